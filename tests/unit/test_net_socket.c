/*
 * test_net_socket.c - the Socket net plugin (src/transport/net_socket*.c) on its own, through
 * its table (net.h), both ends in this process:
 *   roundtrip  messages of 0 B .. 4 MiB, four in flight, checked byte for byte: everything on
 *              the control socket, and spread over 6 data sockets by 3 helper threads;
 *   stranger   connections with a wrong secret, with garbage instead of a handshake, and one
 *              that closes at once are dropped (WARN) while the real sender still gets in;
 *   stream     a raw socket posing as the sender: garbage where a header belongs, a message
 *              larger than the posted buffer, an EOF without goodbye (failures), a goodbye
 *              (the peer finished), and a last message arriving with the goodbye (it completes).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "base/socket.h"
#include "base/socket_pending.h"
#include "harness.h"
#include "nccl.h"
#include "transport/net/net.h"
#include "transport/net/socket/net_socket.h"

void braid_param_reload(void); /* src/base/param.c: re-read the environment (test hook) */

#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int noop_log_used;
static void noop_log(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  noop_log_used++;
}

struct pair {
  void* ctx;
  void* listen;
  void* send;
  void* recv;
  unsigned char handle[BRAID_NET_HANDLE_MAXSIZE];
};

static void plugin_setup_env(const char* threads, const char* socks) {
  if (threads)
    setenv("NCCL_SOCKET_NTHREADS", threads, 1);
  else
    unsetenv("NCCL_SOCKET_NTHREADS");
  if (socks)
    setenv("NCCL_NSOCKS_PERTHREAD", socks, 1);
  else
    unsetenv("NCCL_NSOCKS_PERTHREAD");
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  braid_param_reload();
}

static void plugin_open(struct pair* p, uint64_t secret) {
  const struct braid_net_v1* n = &braid_net_socket;
  struct braid_net_config cfg = {secret, -1};
  int ndev = 0;
  memset(p, 0, sizeof(*p));
  ck_assert_int_eq(n->init(noop_log), ncclSuccess);
  ck_assert_int_eq(n->devices(&ndev), ncclSuccess);
  ck_assert_int_ge(ndev, 1);
  ck_assert_int_eq(n->openContext(1, &cfg, &p->ctx), ncclSuccess);
  ck_assert_int_eq(n->listen(p->ctx, 0, p->handle, &p->listen), ncclSuccess);
}

/* Connect and accept from one thread (both are non-blocking). */
static void plugin_connect(struct pair* p) {
  const struct braid_net_v1* n = &braid_net_socket;
  double t0 = now_s();
  while (p->send == NULL || p->recv == NULL) {
    if (p->send == NULL) ck_assert_int_eq(n->connect(p->ctx, 0, p->handle, &p->send), ncclSuccess);
    if (p->recv == NULL) ck_assert_int_eq(n->accept(p->listen, &p->recv), ncclSuccess);
    ck_assert_msg(now_s() - t0 < 20, "connect/accept did not finish");
  }
}

static void plugin_close(struct pair* p) {
  const struct braid_net_v1* n = &braid_net_socket;
  if (p->send) n->closeSend(p->send);
  if (p->recv) n->closeRecv(p->recv);
  if (p->listen) n->closeListen(p->listen);
  n->closeContext(p->ctx);
}

/* Wait for a request; returns its result (done or failed). */
static ncclResult_t plugin_wait(void* req, size_t* size) {
  int done = 0;
  double t0 = now_s();
  while (!done) {
    ncclResult_t res = braid_net_socket.test(req, &done, size);
    if (res != ncclSuccess) return res;
    if (now_s() - t0 > 20) return ncclInternalError;
  }
  return ncclSuccess;
}

static void plugin_roundtrips(const char* threads, const char* socks) {
  const struct braid_net_v1* n = &braid_net_socket;
  static const size_t sizes[] = {0, 1, 16, 4096, 65536, 65537, 300000, 4 << 20};
  struct pair p;
  plugin_setup_env(threads, socks);
  plugin_open(&p, 0x1234);
  plugin_connect(&p);
  size_t max = 4 << 20;
  char* src = malloc(max);
  char* dst[4];
  for (int j = 0; j < 4; j++) dst[j] = malloc(max + 64);
  for (size_t i = 0; i < max; i++) src[i] = (char)(i * 7 + 3);
  for (int k = 0; k < NELEMS(sizes); k++) {
    /* several in flight: the recvs first, then the sends, completed in order */
    void *rreq[4], *sreq[4];
    for (int j = 0; j < 4; j++) {
      void* d = dst[j];
      memset(dst[j], 0x55, sizes[k] + 8);
      size_t cap = max + 64;
      int tag = 0;
      ck_assert_int_eq(n->irecv(p.recv, 1, &d, &cap, &tag, NULL, &rreq[j]), ncclSuccess);
      ck_assert_ptr_nonnull(rreq[j]);
    }
    for (int j = 0; j < 4; j++) {
      sreq[j] = NULL;
      while (sreq[j] == NULL) ck_assert_int_eq(n->isend(p.send, src, sizes[k], 0, NULL, &sreq[j]), ncclSuccess);
    }
    for (int j = 0; j < 4; j++) {
      size_t got = (size_t)-1;
      /* sends and receives progress from this one thread: test both until the receive is in */
      int rdone = 0, sdone = 0;
      double t0 = now_s();
      while (!rdone) {
        ck_assert_int_eq(n->test(rreq[j], &rdone, &got), ncclSuccess);
        if (!sdone) ck_assert_int_eq(n->test(sreq[j], &sdone, NULL), ncclSuccess);
        ck_assert_msg(now_s() - t0 < 20, "message of %zu bytes did not arrive", sizes[k]);
      }
      while (!sdone) ck_assert_int_eq(n->test(sreq[j], &sdone, NULL), ncclSuccess);
      ck_assert_uint_eq(got, sizes[k]);
      ck_assert_msg(memcmp(dst[j], src, sizes[k]) == 0, "message of %zu bytes arrived wrong", sizes[k]);
    }
  }
  free(src);
  for (int j = 0; j < 4; j++) free(dst[j]);
  plugin_close(&p);
}

START_TEST(test_plugin_roundtrip) {
  plugin_roundtrips(NULL, NULL);
}
END_TEST

START_TEST(test_plugin_roundtrip_threads) {
  plugin_roundtrips("3", "2");
}
END_TEST

/* A raw TCP client speaking to the listener of p. */
static int raw_connect(const struct pair* p) {
  const struct sock_handle* h = (const struct sock_handle*)p->handle;
  struct braid_socket s;
  ck_assert_int_eq(braid_socket_connect(&s, &h->addr, 0, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
  return s.fd;
}

static void raw_send(int fd, const void* data, size_t n) {
  struct braid_socket s;
  braid_socket_init(&s);
  s.fd = fd;
  ck_assert_int_eq(braid_socket_send(&s, data, n, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
}

/* Accept until a recv comm appears (or not within ms). */
static void* accept_for(struct pair* p, int ms) {
  void* rc = NULL;
  double t0 = now_s();
  while (rc == NULL && now_s() - t0 < ms / 1000.0) {
    ck_assert_int_eq(braid_net_socket.accept(p->listen, &rc), ncclSuccess);
    usleep(1000);
  }
  return rc;
}

/* Strangers are dropped and said, rate-limited (one line per source host and interval: all
 * three come from 127.0.0.1), and not recorded as the caller's error. */
START_TEST(test_plugin_stranger) {
  struct pair p;
  char path[] = "/tmp/braid-test-warn-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  ncclResetDebugInit();
  plugin_setup_env(NULL, NULL);
  plugin_open(&p, 0xfeedULL);
  /* a stranger with a wrong secret, one speaking garbage, one that closes: all dropped */
  struct braid_socket_handshake bad = {0xbadULL, BRAID_SOCKET_TYPE_NET, 0};
  int s1 = raw_connect(&p), s2 = raw_connect(&p), s3 = raw_connect(&p);
  raw_send(s1, &bad, sizeof(bad));
  raw_send(s2, "GET / HTTP/1.0\r\n\r\n", 18);
  close(s3);
  ck_assert_ptr_null(accept_for(&p, 300));
  ck_assert_str_eq(ncclGetLastError(NULL), "");
  /* the real sender still gets in */
  plugin_connect(&p);
  close(s1);
  close(s2);
  plugin_close(&p);
  int lines = harness_count_lines(path, "NET/Socket: dropping connection from 127.0.0.1");
  unlink(path);
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG");
  ncclResetDebugInit();
  ck_assert_msg(lines >= 1 && lines <= 3, "%d WARN lines for 3 strangers from one address", lines);
}
END_TEST

/* A flood of silent strangers holds at most the listener's cap of descriptors
 * (braid_socket_max_pending: a quarter of RLIMIT_NOFILE, here 256 -> 64; the oldest go
 * first), and the real sender, which comes last, still gets in. */
START_TEST(test_plugin_flood) {
  enum { STRANGERS = 100 };
  struct rlimit old, low = {256, 256};
  ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
  low.rlim_max = old.rlim_max;
  ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
  ck_assert_int_eq(braid_socket_max_pending(), 64);
  struct pair p;
  plugin_setup_env(NULL, NULL);
  plugin_open(&p, 0xf1eedULL);
  int fds0 = harness_count_fds();
  static int strangers[STRANGERS];
  for (int i = 0; i < STRANGERS; i++) strangers[i] = raw_connect(&p);
  ck_assert_ptr_null(accept_for(&p, 300));
  int held = harness_count_fds() - fds0 - STRANGERS;
  ck_assert_msg(held <= 64, "the listener holds %d stranger descriptors (cap 64)", held);
  plugin_connect(&p);
  for (int i = 0; i < STRANGERS; i++) close(strangers[i]);
  plugin_close(&p);
  ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
}
END_TEST

/* A sender that is really a raw socket: the handshake, then `bytes`; the receiver must fail
 * (or, for a goodbye, report that the peer finished). */
static void garbage_case(const void* bytes, size_t n, int close_after, int expect_closed, const char* reason) {
  const struct braid_net_v1* net = &braid_net_socket;
  struct pair p;
  plugin_setup_env(NULL, NULL);
  plugin_open(&p, 0x5eedULL);
  struct braid_socket_handshake hs = {0x5eedULL, BRAID_SOCKET_TYPE_NET, 0};
  int fd = raw_connect(&p);
  raw_send(fd, &hs, sizeof(hs));
  p.recv = accept_for(&p, 5000);
  ck_assert_ptr_nonnull(p.recv);
  char buf[256];
  void* d = buf;
  size_t cap = 64;
  int tag = 0;
  void* req = NULL;
  ck_assert_int_eq(net->irecv(p.recv, 1, &d, &cap, &tag, NULL, &req), ncclSuccess);
  if (n) raw_send(fd, bytes, n);
  if (close_after) close(fd);
  ck_assert_int_eq(plugin_wait(req, NULL), ncclRemoteError);
  struct braid_net_status st;
  ck_assert_int_eq(net->getStatus(p.recv, &st), ncclSuccess);
  ck_assert_int_eq(st.failed, 1);
  ck_assert_int_eq(st.closedByPeer, expect_closed);
  ck_assert_msg(strstr(st.reason, reason) != NULL, "reason '%s' lacks '%s'", st.reason, reason);
  if (!close_after) close(fd);
  plugin_close(&p);
}

START_TEST(test_plugin_garbage) {
  const char junk[32] = "this is not a message header!!!";
  garbage_case(junk, sizeof(junk), 0, 0, "garbage");
}
END_TEST

START_TEST(test_plugin_oversized) {
  struct sock_hdr h = {SOCK_MSG_MAGIC, 0, 1000}; /* more than the 64 bytes posted */
  garbage_case(&h, sizeof(h), 0, 0, "more than the 64 bytes");
}
END_TEST

START_TEST(test_plugin_vanished) {
  garbage_case(NULL, 0, 1, 0, "without finishing");
}
END_TEST

/* The last message and the goodbye arrive together: the message still completes. */
START_TEST(test_plugin_last_then_goodbye) {
  const struct braid_net_v1* net = &braid_net_socket;
  struct pair p;
  plugin_setup_env(NULL, NULL);
  plugin_open(&p, 0x5eedULL);
  struct braid_socket_handshake hs = {0x5eedULL, BRAID_SOCKET_TYPE_NET, 0};
  struct sock_hdr h1 = {SOCK_MSG_MAGIC, 0, 12}, bye = {SOCK_MSG_MAGIC, SOCK_TAG_BYE, 0};
  char wire[2 * sizeof(struct sock_hdr) + 12];
  memcpy(wire, &h1, sizeof(h1));
  memcpy(wire + sizeof(h1), "last message", 12);
  memcpy(wire + sizeof(h1) + 12, &bye, sizeof(bye));
  int fd = raw_connect(&p);
  raw_send(fd, &hs, sizeof(hs));
  p.recv = accept_for(&p, 5000);
  ck_assert_ptr_nonnull(p.recv);
  char buf[2][64];
  void* req[2];
  for (int j = 0; j < 2; j++) {
    void* d = buf[j];
    size_t cap = 64;
    int tag = 0;
    ck_assert_int_eq(net->irecv(p.recv, 1, &d, &cap, &tag, NULL, &req[j]), ncclSuccess);
  }
  raw_send(fd, wire, sizeof(wire));
  close(fd);
  usleep(100000); /* both are in the socket before the first test */
  size_t got = 0;
  ck_assert_int_eq(plugin_wait(req[0], &got), ncclSuccess);
  ck_assert_uint_eq(got, 12);
  ck_assert(memcmp(buf[0], "last message", 12) == 0);
  ck_assert_int_eq(plugin_wait(req[1], NULL), ncclRemoteError);
  struct braid_net_status st;
  ck_assert_int_eq(net->getStatus(p.recv, &st), ncclSuccess);
  ck_assert_int_eq(st.closedByPeer, 1);
  plugin_close(&p);
}
END_TEST

START_TEST(test_plugin_goodbye) {
  struct sock_hdr h = {SOCK_MSG_MAGIC, SOCK_TAG_BYE, 0};
  garbage_case(&h, sizeof(h), 1, 1, "finished");
}
END_TEST

Suite* net_socket_suite(void) {
  Suite* s = suite_create("net_socket");
  TCase* tc = tcase_create("roundtrip");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_plugin_roundtrip);
  tcase_add_test(tc, test_plugin_roundtrip_threads);
  suite_add_tcase(s, tc);
  tc = tcase_create("stranger");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_plugin_stranger);
  tcase_add_test(tc, test_plugin_flood);
  suite_add_tcase(s, tc);
  tc = tcase_create("stream");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_plugin_garbage);
  tcase_add_test(tc, test_plugin_oversized);
  tcase_add_test(tc, test_plugin_vanished);
  tcase_add_test(tc, test_plugin_goodbye);
  tcase_add_test(tc, test_plugin_last_then_goodbye);
  suite_add_tcase(s, tc);
  return s;
}
