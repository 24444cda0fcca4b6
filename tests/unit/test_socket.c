/*
 * test_socket.c - src/base/socket.c: address parsing and printing, interface selection
 * (NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY), and connections: round trips, peer close, abort,
 * deadlines, connect retries, handshakes.
 */
#include <arpa/inet.h>
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "base/socket.h"

static void env_set(const char* name, const char* value) {
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
  braid_param_reload();
  braid_socket_bootstrap_interface_reset();
}

static union braid_sockaddr loopback(void) {
  union braid_sockaddr a;
  ck_assert_int_eq(braid_socket_addr_from_string("127.0.0.1:0", &a), ncclSuccess);
  return a;
}

/* ---- addresses ---- */

START_TEST(test_addr_parse_print) {
  union braid_sockaddr a;
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  ck_assert_int_eq(braid_socket_addr_from_string("127.0.0.1:1234", &a), ncclSuccess);
  ck_assert_int_eq(a.sa.sa_family, AF_INET);
  ck_assert_int_eq(braid_socket_addr_port(&a), 1234);
  ck_assert_int_eq(braid_socket_addr_to_string(&a, buf, sizeof(buf)), ncclSuccess);
  ck_assert_str_eq(buf, "127.0.0.1<1234>");
  ck_assert_int_eq(braid_socket_addr_from_string("[::1]:80", &a), ncclSuccess);
  ck_assert_int_eq(a.sa.sa_family, AF_INET6);
  ck_assert_str_eq(braid_socket_addr_str(&a, buf), "::1<80>");
  ck_assert_int_eq(braid_socket_addr_from_string("fd00::2", &a), ncclSuccess); /* bare IPv6: no port */
  ck_assert_int_eq(braid_socket_addr_port(&a), 0);
  ck_assert_int_eq(braid_socket_addr_from_string("localhost:99", &a), ncclSuccess);
  ck_assert_int_eq(braid_socket_addr_port(&a), 99);
  ck_assert_int_eq(braid_socket_addr_from_string("10.1.2.3", &a), ncclSuccess);
  ck_assert_str_eq(braid_socket_addr_str(&a, buf), "10.1.2.3<0>");
  const char* bad[] = {"",           ":",    ":80",    "1.2.3.4:", "1.2.3.4:x",           "1.2.3.4:70000",
                       "1.2.3.4:-1", "[::1", "[::1]x", "[]:5",     "nosuchhost.invalid:1"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    ck_assert_msg(braid_socket_addr_from_string(bad[i], &a) == ncclInvalidArgument, "'%s' accepted", bad[i]);
  ck_assert_int_eq(braid_socket_addr_from_string(NULL, &a), ncclInvalidArgument);
  memset(&a, 0, sizeof(a));
  ck_assert_int_eq(braid_socket_addr_to_string(&a, buf, sizeof(buf)), ncclInvalidArgument);
}
END_TEST

/* ---- interfaces ---- */

static int find(const char* list, char names[][BRAID_SOCKET_NAME_MAX], union braid_sockaddr* addrs, int* n) {
  return braid_socket_find_interfaces(list, &names[0][0], addrs, 16, n);
}

START_TEST(test_interfaces) {
  char names[16][BRAID_SOCKET_NAME_MAX];
  union braid_sockaddr addrs[16];
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  int n = 0;
  env_set("NCCL_SOCKET_IFNAME", NULL);
  env_set("NCCL_SOCKET_FAMILY", NULL);
  ck_assert_int_eq(find(NULL, names, addrs, &n), ncclSuccess); /* automatic */
  ck_assert_int_ge(n, 1);
  ck_assert_int_eq(find("lo", names, addrs, &n), ncclSuccess);
  ck_assert_int_eq(n, 1);
  ck_assert_str_eq(names[0], "lo");
  ck_assert_str_eq(braid_socket_addr_str(&addrs[0], buf), "127.0.0.1<0>");
  ck_assert_int_eq(find("=lo", names, addrs, &n), ncclSuccess);
  ck_assert_str_eq(names[0], "lo");
  ck_assert_int_eq(find("=l", names, addrs, &n), ncclInvalidArgument); /* exact: no prefix match */
  ck_assert_int_eq(find("nosuchif", names, addrs, &n), ncclInvalidArgument);
  ck_assert_int_eq(find("nosuchif,lo", names, addrs, &n), ncclSuccess);
  ck_assert_str_eq(names[0], "lo");
  if (find("^lo", names, addrs, &n) == ncclSuccess)
    for (int i = 0; i < n; i++) ck_assert_str_ne(names[i], "lo");
  if (find("^=lo", names, addrs, &n) == ncclSuccess)
    for (int i = 0; i < n; i++) ck_assert_str_ne(names[i], "lo");
  /* through the environment */
  env_set("NCCL_SOCKET_IFNAME", "nosuchif");
  ck_assert_int_eq(find(NULL, names, addrs, &n), ncclInvalidArgument);
  union braid_sockaddr a;
  ck_assert_int_eq(braid_socket_bootstrap_interface(NULL, &a), ncclInvalidArgument);
  env_set("NCCL_SOCKET_IFNAME", "=lo");
  char name[BRAID_SOCKET_NAME_MAX];
  ck_assert_int_eq(braid_socket_bootstrap_interface(name, &a), ncclSuccess);
  ck_assert_str_eq(name, "lo");
  env_set("NCCL_SOCKET_FAMILY", "AF_INET6");
  ck_assert_int_eq(find("lo", names, addrs, &n), ncclSuccess);
  ck_assert_str_eq(braid_socket_addr_str(&addrs[0], buf), "::1<0>");
  /* Not a family: the parameter table WARNs once and the row stays automatic (as in NCCL). */
  env_set("NCCL_SOCKET_FAMILY", "AF_BOGUS");
  ck_assert_int_eq(find("lo", names, addrs, &n), ncclSuccess);
  env_set("NCCL_SOCKET_FAMILY", NULL);
  env_set("NCCL_SOCKET_IFNAME", NULL);
  ck_assert_int_eq(braid_socket_find_interfaces(NULL, NULL, addrs, 1, &n), ncclInvalidArgument);
}
END_TEST

/* NCCL_COMM_ID's subnet is the second automatic class (after ib*). */
START_TEST(test_interfaces_comm_id_subnet) {
  char names[16][BRAID_SOCKET_NAME_MAX];
  union braid_sockaddr addrs[16];
  int n = 0;
  env_set("NCCL_COMM_ID", "127.0.0.1:23456");
  ck_assert_int_eq(find(NULL, names, addrs, &n), ncclSuccess);
  int has_ib = 0;
  for (int i = 0; i < n; i++) has_ib |= strncmp(names[i], "ib", 2) == 0;
  if (!has_ib) ck_assert_str_eq(names[0], "lo");
  env_set("NCCL_COMM_ID", NULL);
}
END_TEST

/* ---- connections ---- */

struct pair {
  struct braid_socket listener, client, server;
};

static void pair_open(struct pair* p) {
  union braid_sockaddr lo = loopback();
  ck_assert_int_eq(braid_socket_listen(&p->listener, &lo), ncclSuccess);
  ck_assert_int_ne(braid_socket_addr_port(&p->listener.addr), 0);
  ck_assert_int_eq(braid_socket_connect(&p->client, &p->listener.addr, 0, NULL, braid_socket_deadline_ms(5000)),
                   ncclSuccess);
  ck_assert_int_eq(braid_socket_accept(&p->listener, &p->server, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
}

static void pair_close(struct pair* p) {
  braid_socket_close(&p->client);
  braid_socket_close(&p->server);
  braid_socket_close(&p->listener);
}

struct reader {
  struct braid_socket* s;
  char* buf;
  size_t n;
  ncclResult_t res;
};

static void* reader_main(void* arg) {
  struct reader* r = arg;
  r->res = braid_socket_recv(r->s, r->buf, r->n, NULL, braid_socket_deadline_ms(20000));
  return NULL;
}

START_TEST(test_roundtrip) {
  struct pair p;
  pair_open(&p);
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  ck_assert_ptr_nonnull(braid_socket_addr_str(&p.server.addr, buf));
  size_t big = 8 << 20;
  char* out = malloc(big);
  char* in = malloc(big);
  for (size_t i = 0; i < big; i++) out[i] = (char)(i * 31 + 7);
  /* bigger than the socket buffers: a thread reads while this one writes */
  struct reader r = {&p.server, in, big, ncclInternalError};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, reader_main, &r), 0);
  ck_assert_int_eq(braid_socket_send(&p.client, out, big, NULL, braid_socket_deadline_ms(20000)), ncclSuccess);
  pthread_join(t, NULL);
  ck_assert_int_eq(r.res, ncclSuccess);
  ck_assert(memcmp(in, out, big) == 0);
  /* sendv with an offset part-way through the iovecs */
  char a[3] = "abc", b[4] = "defg", c[2] = "hi", got[9] = {0};
  struct iovec iov[3] = {{a, 3}, {b, 4}, {c, 2}};
  size_t off = 2;
  ck_assert_int_eq(braid_socket_sendv_try(&p.client, iov, 3, &off), ncclSuccess);
  ck_assert_int_eq((int)off, 9);
  ck_assert_int_eq(braid_socket_recv(&p.server, got, 7, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
  ck_assert(memcmp(got, "cdefghi", 7) == 0);
  /* zero bytes: nothing to do */
  off = 0;
  ck_assert_int_eq(braid_socket_recv_try(&p.server, got, 0, &off), ncclSuccess);
  free(out);
  free(in);
  pair_close(&p);
}
END_TEST

START_TEST(test_peer_close) {
  struct pair p;
  int closed = -1;
  char c = 'x', got;
  pair_open(&p);
  ck_assert_int_eq(braid_socket_peer_closed(&p.client, &closed), ncclSuccess);
  ck_assert_int_eq(closed, 0);
  braid_socket_close(&p.server);
  ck_assert_int_eq(braid_socket_peer_closed(&p.client, &closed), ncclSuccess);
  ck_assert_int_eq(closed, 1);
  ck_assert_int_eq(braid_socket_recv(&p.client, &got, 1, NULL, braid_socket_deadline_ms(5000)), ncclRemoteError);
  ck_assert_int_eq(p.client.fail, BRAID_SOCKET_FAIL_CLOSED);
  /* sending into a closed connection fails too (EPIPE or reset), without SIGPIPE */
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < 100 && res == ncclSuccess; i++) {
    res = braid_socket_send(&p.client, &c, 1, NULL, braid_socket_deadline_ms(5000));
    usleep(1000);
  }
  ck_assert_int_eq(res, ncclRemoteError);
  ck_assert(p.client.fail == BRAID_SOCKET_FAIL_CLOSED || p.client.fail == BRAID_SOCKET_FAIL_RESET);
  pair_close(&p);
}
END_TEST

static volatile uint32_t abort_flag;
static void* raise_abort(void* arg) {
  usleep(200 * 1000);
  __atomic_store_n(&abort_flag, 1, __ATOMIC_RELEASE);
  return arg;
}

START_TEST(test_abort_and_deadline) {
  struct pair p;
  char got;
  pthread_t t;
  pair_open(&p);
  /* deadline */
  ck_assert_int_eq(braid_socket_recv(&p.server, &got, 1, NULL, braid_socket_deadline_ms(150)), ncclRemoteError);
  ck_assert_int_eq(p.server.fail, BRAID_SOCKET_FAIL_TIMEOUT);
  struct braid_socket s;
  ck_assert_int_eq(braid_socket_accept(&p.listener, &s, NULL, braid_socket_deadline_ms(150)), ncclRemoteError);
  ck_assert_int_eq(p.listener.fail, BRAID_SOCKET_FAIL_TIMEOUT);
  /* abort from another thread, no deadline */
  abort_flag = 0;
  ck_assert_int_eq(pthread_create(&t, NULL, raise_abort, NULL), 0);
  ck_assert_int_eq(braid_socket_recv(&p.server, &got, 1, &abort_flag, 0), ncclInvalidUsage);
  ck_assert_int_eq(p.server.fail, BRAID_SOCKET_FAIL_ABORTED);
  pthread_join(t, NULL);
  ck_assert_int_eq(braid_socket_accept(&p.listener, &s, &abort_flag, 0), ncclInvalidUsage);
  pair_close(&p);
}
END_TEST

static union braid_sockaddr unused_port(void) {
  struct braid_socket l;
  union braid_sockaddr lo = loopback(), a;
  ck_assert_int_eq(braid_socket_listen(&l, &lo), ncclSuccess);
  a = l.addr;
  braid_socket_close(&l);
  return a;
}

struct late {
  union braid_sockaddr addr;
  struct braid_socket l;
  ncclResult_t res;
};
static void* listen_late(void* arg) {
  struct late* l = arg;
  usleep(150 * 1000);
  l->res = braid_socket_listen(&l->l, &l->addr);
  return NULL;
}

START_TEST(test_connect_retry) {
  struct braid_socket s;
  union braid_sockaddr a = unused_port();
  env_set("NCCL_SOCKET_RETRY_CNT", "2");
  env_set("NCCL_SOCKET_RETRY_SLEEP_MSEC", "10");
  ck_assert_int_eq(braid_socket_connect(&s, &a, 0, NULL, braid_socket_deadline_ms(5000)), ncclRemoteError);
  ck_assert_int_eq(s.fail, BRAID_SOCKET_FAIL_REFUSED);
  ck_assert_int_eq(s.fd, -1);
  ck_assert_int_eq(braid_socket_connect(&s, &a, 1, NULL, braid_socket_deadline_ms(5000)), ncclRemoteError);
  ck_assert_int_eq(s.fail, BRAID_SOCKET_FAIL_REFUSED);
  /* the listener comes up during the retries: 10+20+...ms sleeps cover 150 ms with 20 tries */
  env_set("NCCL_SOCKET_RETRY_CNT", "20");
  struct late l = {a, {-1, {{0}}, 0, 0}, ncclInternalError};
  pthread_t t;
  ck_assert_int_eq(pthread_create(&t, NULL, listen_late, &l), 0);
  ck_assert_int_eq(braid_socket_connect(&s, &a, 1, NULL, braid_socket_deadline_ms(10000)), ncclSuccess);
  pthread_join(t, NULL);
  ck_assert_int_eq(l.res, ncclSuccess);
  braid_socket_close(&s);
  braid_socket_close(&l.l);
  /* abort during the retry sleeps */
  env_set("NCCL_SOCKET_RETRY_SLEEP_MSEC", "1000");
  abort_flag = 0;
  ck_assert_int_eq(pthread_create(&t, NULL, raise_abort, NULL), 0);
  ck_assert_int_eq(braid_socket_connect(&s, &a, 1, &abort_flag, 0), ncclInvalidUsage);
  pthread_join(t, NULL);
  env_set("NCCL_SOCKET_RETRY_CNT", NULL);
  env_set("NCCL_SOCKET_RETRY_SLEEP_MSEC", NULL);
}
END_TEST

START_TEST(test_handshake_check) {
  struct pair p;
  pair_open(&p);
  struct braid_socket_handshake good = {42, BRAID_SOCKET_TYPE_NET, 0}, bad = {41, BRAID_SOCKET_TYPE_NET, 0},
                                wrong_type = {42, BRAID_SOCKET_TYPE_PROXY, 0};
  ck_assert_int_eq(braid_socket_handshake_check(&p.server, &good, 42, BRAID_SOCKET_TYPE_NET, "test"), ncclSuccess);
  ck_assert_int_eq(braid_socket_handshake_check(&p.server, &bad, 42, BRAID_SOCKET_TYPE_NET, "test"), ncclRemoteError);
  ck_assert_int_eq(p.server.fail, BRAID_SOCKET_FAIL_HANDSHAKE);
  ck_assert_int_eq(braid_socket_handshake_check(&p.server, &wrong_type, 42, BRAID_SOCKET_TYPE_NET, "test"),
                   ncclRemoteError);
  ck_assert_str_eq(braid_socket_fail_str(BRAID_SOCKET_FAIL_CLOSED), "closed the connection");
  pair_close(&p);
}
END_TEST

START_TEST(test_ipv6_loopback) {
  union braid_sockaddr a;
  struct braid_socket l, c, s;
  ck_assert_int_eq(braid_socket_addr_from_string("[::1]:0", &a), ncclSuccess);
  if (braid_socket_listen(&l, &a) != ncclSuccess) return; /* no IPv6 here */
  ck_assert_int_eq(braid_socket_connect(&c, &l.addr, 0, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
  ck_assert_int_eq(braid_socket_accept(&l, &s, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
  uint64_t v = 0x1122334455667788ULL, w = 0;
  ck_assert_int_eq(braid_socket_send(&c, &v, sizeof(v), NULL, 0), ncclSuccess);
  ck_assert_int_eq(braid_socket_recv(&s, &w, sizeof(w), NULL, 0), ncclSuccess);
  ck_assert(v == w);
  braid_socket_close(&c);
  braid_socket_close(&s);
  braid_socket_close(&l);
}
END_TEST

Suite* socket_suite(void);
Suite* socket_suite(void) {
  Suite* s = suite_create("socket");
  TCase* tc = tcase_create("addr");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_addr_parse_print);
  tcase_add_test(tc, test_interfaces);
  tcase_add_test(tc, test_interfaces_comm_id_subnet);
  suite_add_tcase(s, tc);
  tc = tcase_create("conn");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_roundtrip);
  tcase_add_test(tc, test_peer_close);
  tcase_add_test(tc, test_abort_and_deadline);
  tcase_add_test(tc, test_connect_retry);
  tcase_add_test(tc, test_handshake_check);
  tcase_add_test(tc, test_ipv6_loopback);
  suite_add_tcase(s, tc);
  return s;
}
