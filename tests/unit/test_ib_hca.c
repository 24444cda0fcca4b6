/*
 * test_ib_hca.c - NCCL_IB_HCA's syntax (src/transport/net/ib/ib_hca.c), as NCCL reads it:
 *   parse  prefixes, ':port' (and rail, plane), '^' to exclude, '=' for exact names, empty
 *          entries skipped; bad ports, long names, too many entries: ncclInvalidArgument with
 *          a WARN naming the value (stricter than NCCL's atoi);
 *   match  which (device, port) pairs a value keeps, against a table worked out from NCCL's
 *          matchIfList (src/misc/utils.cc) and its use in net_ib/init.cc.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "base/debug.h"
#include "transport/net/ib/ib_hca.h"

START_TEST(test_parse) {
  struct braid_ib_hca_filter f;
  ck_assert_int_eq(braid_ib_hca_parse("^=mlx5_0:1,,mlx5_1::2,:3,mlx4", "NCCL_IB_HCA", &f), ncclSuccess);
  ck_assert(f.exclude && f.exact);
  ck_assert_int_eq(f.n, 3); /* ",," and ":3" name nothing: skipped */
  ck_assert_str_eq(f.e[0].prefix, "mlx5_0");
  ck_assert_int_eq(f.e[0].port, 1);
  ck_assert_int_eq(f.e[0].rail, -1);
  ck_assert_str_eq(f.e[1].prefix, "mlx5_1");
  ck_assert_int_eq(f.e[1].port, -1);
  ck_assert_int_eq(f.e[1].rail, 2);
  ck_assert_str_eq(f.e[2].prefix, "mlx4");
  ck_assert_int_eq(f.e[2].port, -1);
  /* '=' before '^' is not NCCL's order: the name is then "^..." literally */
  ck_assert_int_eq(braid_ib_hca_parse("=^mlx5", "NCCL_IB_HCA", &f), ncclSuccess);
  ck_assert(!f.exclude && f.exact);
  ck_assert_str_eq(f.e[0].prefix, "^mlx5");
  ck_assert_int_eq(braid_ib_hca_parse(NULL, "NCCL_IB_HCA", &f), ncclSuccess);
  ck_assert_int_eq(f.n, 0);
}
END_TEST

static const char* const bad_values[] = {
    "mlx5_0:x",       "mlx5_0:-1", "mlx5_0:70000",
    "mlx5_0:1:2:3:4", "mlx5_0:1a", "a234567890123456789012345678901234567890123456789012345678901234", /* 64 bytes */
};

START_TEST(test_parse_bad) {
  struct braid_ib_hca_filter f;
  const char* v = bad_values[_i];
  ck_assert_int_eq(braid_ib_hca_parse(v, "NCCL_IB_HCA", &f), ncclInvalidArgument);
  ck_assert_int_eq(f.n, 0);
  const char* msg = braid_debug_last_error();
  ck_assert_msg(strstr(msg, "NCCL_IB_HCA=") != NULL && strstr(msg, v) != NULL, "the WARN does not name %s: %s", v, msg);
}
END_TEST

START_TEST(test_parse_too_many) {
  char v[40 * 8] = "";
  struct braid_ib_hca_filter f;
  for (int i = 0; i < BRAID_IB_HCA_MAX + 1; i++)
    snprintf(v + strlen(v), sizeof(v) - strlen(v), "%smlx%d", i ? "," : "", i);
  ck_assert_int_eq(braid_ib_hca_parse(v, "NCCL_IB_HCA", &f), ncclInvalidArgument);
  v[strrchr(v, ',') - v] = '\0'; /* exactly the maximum is fine */
  ck_assert_int_eq(braid_ib_hca_parse(v, "NCCL_IB_HCA", &f), ncclSuccess);
  ck_assert_int_eq(f.n, BRAID_IB_HCA_MAX);
}
END_TEST

/* The devices: mlx5_0, mlx5_1, mlx5_10 and mlx4_0, ports 1 and 2 each. A row: the value and
 * the 8 verdicts in that order (mlx5_0:1 mlx5_0:2 mlx5_1:1 mlx5_1:2 mlx5_10:1 mlx5_10:2 mlx4_0:1
 * mlx4_0:2). */
struct match_row {
  const char* value;
  const char* keep;
};
static const struct match_row rows[] = {
    {NULL, "11111111"},
    {"", "11111111"},
    {"mlx5", "11111100"},
    {"mlx5_1", "00111100"},   /* a prefix: mlx5_10 too */
    {"=mlx5_1", "00110000"},  /* exact */
    {"mlx5_0:1", "10000000"}, /* one port */
    {"mlx5_0:1,mlx4_0:2", "10000001"},
    {"^mlx5_1", "11000011"},
    {"^=mlx5_1", "11001111"},
    {"^mlx5_0:2", "10111111"},
    {"^", "00000000"}, /* NCCL: an empty exclusion list excludes everything */
    {"mlx6", "00000000"},
};

START_TEST(test_match) {
  static const char* const devs[] = {"mlx5_0", "mlx5_1", "mlx5_10", "mlx4_0"};
  const struct match_row* row = &rows[_i];
  struct braid_ib_hca_filter f;
  ck_assert_int_eq(braid_ib_hca_parse(row->value, "NCCL_IB_HCA", &f), ncclSuccess);
  for (int d = 0; d < 4; d++)
    for (int p = 1; p <= 2; p++) {
      int want = row->keep[d * 2 + p - 1] == '1', entry = -2;
      int got = braid_ib_hca_match(&f, devs[d], p, &entry);
      ck_assert_msg(got == want, "NCCL_IB_HCA=%s: %s:%d %s, expected %s", row->value ? row->value : "(unset)", devs[d],
                    p, got ? "kept" : "dropped", want ? "kept" : "dropped");
      ck_assert_int_ge(entry, -1);
    }
}
END_TEST

Suite* ib_hca_suite(void) {
  Suite* s = suite_create("ib_hca");
  TCase* tc = tcase_create("parse");
  tcase_set_timeout(tc, 10);
  tcase_add_test(tc, test_parse);
  tcase_add_loop_test(tc, test_parse_bad, 0, (int)(sizeof(bad_values) / sizeof(bad_values[0])));
  tcase_add_test(tc, test_parse_too_many);
  suite_add_tcase(s, tc);
  tc = tcase_create("match");
  tcase_set_timeout(tc, 10);
  tcase_add_loop_test(tc, test_match, 0, (int)(sizeof(rows) / sizeof(rows[0])));
  suite_add_tcase(s, tc);
  return s;
}
