/*
 * test_ib_gid.c - RoCE GID selection (src/transport/net/ib/ib_gid.c) on its own, as NCCL's
 * ncclIbGetGidIndex chooses: a table like an mlx5 port's (link-local, IPv4, IPv6 and a second
 * IPv4 subnet, each as RoCE v1 and v2) against NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM
 * and NCCL_IB_ADDR_RANGE, a table whose versions are unknown, the address families, and the
 * environment's parsing (a bad range is ignored). The plugin's use of it through the emulator:
 * test_net_ib.c (qpfail: the GID index in the RTR failure's WARN).
 */
#include <arpa/inet.h>
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/param.h"
#include "transport/net/ib/ib_gid.h"

static void gid4(struct braid_ib_gid* g, int a, int b, int c, int d, int version) {
  memset(g, 0, sizeof(*g));
  g->raw[10] = g->raw[11] = 0xff;
  g->raw[12] = (uint8_t)a, g->raw[13] = (uint8_t)b, g->raw[14] = (uint8_t)c, g->raw[15] = (uint8_t)d;
  g->version = version;
}
static void gid6(struct braid_ib_gid* g, const char* text, int version) {
  memset(g, 0, sizeof(*g));
  ck_assert_int_eq(inet_pton(AF_INET6, text, g->raw), 1);
  g->version = version;
}

/* 0-1 fe80::1, 2-3 10.0.1.1, 4-5 fd00::1, 6-7 192.168.0.1, 8-9 zeros (v1, v2 each) */
static int table(struct braid_ib_gid* t, int versions) {
  for (int v = 0; v < 2; v++) {
    int ver = versions ? v + 1 : 0;
    gid6(&t[0 + v], "fe80::1", ver);
    gid4(&t[2 + v], 10, 0, 1, 1, ver);
    gid6(&t[4 + v], "fd00::1", ver);
    gid4(&t[6 + v], 192, 168, 0, 1, ver);
    memset(&t[8 + v], 0, sizeof(t[8 + v]));
  }
  return 10;
}

struct gid_row {
  int family, version;
  const char* range; /* NULL: none */
  int versions;      /* the table knows them */
  int want;
};
static const struct gid_row gid_rows[] = {
    {AF_INET, 2, NULL, 1, 3},  /* NCCL's defaults: IPv4, RoCE v2 */
    {AF_INET, 1, NULL, 1, 2},  /* IPv4, RoCE v1 */
    {AF_INET6, 2, NULL, 1, 5}, /* the global IPv6 one, v2 (fe80:: is link-local) */
    {AF_INET6, 1, NULL, 1, 4},
    {AF_INET, 2, "192.168.0.0/16", 1, 7}, /* the second subnet */
    {AF_INET, 1, "192.168.0.0/16", 1, 6},
    {AF_INET, 2, "10.0.0.0/8", 1, 3},
    {AF_INET, 2, "172.16.0.0/12", 1, 0}, /* nothing in range: index 0 */
    {AF_INET6, 2, "fd00::/8", 1, 5},
    {AF_INET6, 2, "fc00::/16", 1, 0},
    {AF_INET, 2, NULL, 0, 2},  /* versions unknown: the first IPv4 GID */
    {AF_INET6, 2, NULL, 0, 0}, /* same family as fe80:: and no version to prefer it: 0, as NCCL */
};

START_TEST(test_select) {
  const struct gid_row* r = &gid_rows[_i];
  struct braid_ib_gid t[16];
  int n = table(t, r->versions);
  struct braid_ib_gid_want w;
  memset(&w, 0, sizeof(w));
  w.family = r->family;
  w.version = r->version;
  if (r->range != NULL) {
    char buf[64];
    strcpy(buf, r->range);
    char* slash = strchr(buf, '/');
    *slash = '\0';
    ck_assert_int_eq(inet_pton(r->family, buf, w.prefix), 1);
    w.prefixlen = atoi(slash + 1);
  }
  int got = braid_ib_gid_select(t, n, &w);
  ck_assert_msg(got == r->want, "row %d: index %d, expected %d", _i, got, r->want);
}
END_TEST

START_TEST(test_family) {
  struct braid_ib_gid g;
  gid4(&g, 10, 1, 2, 3, 2);
  ck_assert_int_eq(braid_ib_gid_family(g.raw), AF_INET);
  gid6(&g, "ff0e::ffff:239.1.1.1", 2); /* IPv4-mapped multicast */
  ck_assert_int_eq(braid_ib_gid_family(g.raw), AF_INET);
  gid6(&g, "fd00::10:1", 2);
  ck_assert_int_eq(braid_ib_gid_family(g.raw), AF_INET6);
}
END_TEST

START_TEST(test_env) {
  struct braid_ib_gid_want w;
  setenv("NCCL_IB_ADDR_FAMILY", "AF_INET6", 1);
  setenv("NCCL_IB_ADDR_RANGE", "fd00::/8", 1);
  setenv("NCCL_IB_ROCE_VERSION_NUM", "1", 1);
  braid_param_reload();
  braid_ib_gid_want_env(&w);
  ck_assert_int_eq(w.family, AF_INET6);
  ck_assert_int_eq(w.version, 1);
  ck_assert_int_eq(w.prefixlen, 8);
  ck_assert_int_eq(w.prefix[0], 0xfd);
  setenv("NCCL_IB_ADDR_FAMILY", "AF_INET", 1);
  setenv("NCCL_IB_ADDR_RANGE", "300.1.1.1/8", 1); /* not an IPv4 address: ignored, as NCCL */
  braid_param_reload();
  braid_ib_gid_want_env(&w);
  ck_assert_int_eq(w.family, AF_INET);
  ck_assert_int_eq(w.prefixlen, 0);
  setenv("NCCL_IB_ADDR_RANGE", "10.0.0.0/40", 1); /* mask too long: ignored */
  braid_param_reload();
  braid_ib_gid_want_env(&w);
  ck_assert_int_eq(w.prefixlen, 0);
  unsetenv("NCCL_IB_ADDR_FAMILY");
  unsetenv("NCCL_IB_ADDR_RANGE");
  unsetenv("NCCL_IB_ROCE_VERSION_NUM");
  braid_param_reload();
  braid_ib_gid_want_env(&w);
  ck_assert_int_eq(w.family, AF_INET); /* the defaults */
  ck_assert_int_eq(w.version, 2);
}
END_TEST

Suite* ib_gid_suite(void);
Suite* ib_gid_suite(void) {
  Suite* s = suite_create("ib_gid");
  TCase* tc = tcase_create("select");
  tcase_add_loop_test(tc, test_select, 0, (int)(sizeof(gid_rows) / sizeof(gid_rows[0])));
  tcase_add_test(tc, test_family);
  tcase_add_test(tc, test_env);
  suite_add_tcase(s, tc);
  return s;
}
