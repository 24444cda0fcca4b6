/*
 * test_transport.c - the transport boundary itself (src/transport/transport.h, registry.h,
 * progress.h), apart from any one transport:
 *   registry  every registered transport fills every slot that does not say "may be NULL"
 *             (a proxied one has `progress`), the registry's order is p2p, shm, net, and the
 *             build line (braid-info) names every registered transport;
 *   caps      the device tables declare what they do differently (the fake GPU: blocks on
 *             host threads, device memory readable by the host; CUDA: neither);
 *   progress  the progress engine: an item is called until removed and never after; poll()
 *             readiness of a descriptor an item names reaches it (BRAID_PROGRESS_WOKEN); a
 *             sleeping thread wakes for braid_progress_wake; a connector item dispatches to
 *             its transport's `progress`.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/device.h"
#include "transport/progress.h"
#include "transport/registry.h"

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- registry ------------------------------------------------------------------------------ */

START_TEST(test_registry) {
  int n = 0, ninfo = 0;
  const struct braid_transport* const* reg = braid_transport_registry(&n);
  const char* const* info = braid_version_transports(&ninfo);
  static const char* const order[] = {"P2P", "SHM", "NET"};
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(ninfo, n);
  const char* build = braid_build_options();
  for (int i = 0; i < n; i++) {
    const struct braid_transport* t = reg[i];
    ck_assert_str_eq(t->name, order[i]);
    ck_assert_msg(t->can_connect && t->send_setup && t->recv_setup && t->send_connect && t->recv_connect &&
                      t->send_free && t->recv_free && t->host_ctrl,
                  "transport %s leaves a slot NULL that may not be", t->name);
    if (t->caps & BRAID_TRANSPORT_CAP_PROXIED)
      ck_assert_msg(t->progress != NULL, "proxied transport %s has no progress", t->name);
    ck_assert_msg(strstr(build, info[i]) != NULL, "the build line \"%s\" does not name %s", build, info[i]);
  }
  ck_assert_ptr_nonnull(strstr(build, "p2p")); /* the hand list of version.c used to omit it */
  ck_assert_int_ne(braid_transport_net.caps & BRAID_TRANSPORT_CAP_PROXIED, 0);
  ck_assert_int_eq(braid_transport_shm.caps & BRAID_TRANSPORT_CAP_PROXIED, 0);
}
END_TEST

START_TEST(test_device_caps) {
  ck_assert_ptr_nonnull(braid_device_fake);
  ck_assert_int_ne(braid_device_fake->caps & BRAID_DEVICE_CAP_HOST_THREADS, 0);
  ck_assert_int_ne(braid_device_fake->caps & BRAID_DEVICE_CAP_HOST_READS_DEVICE, 0);
  if (braid_device_cuda != NULL) ck_assert_int_eq(braid_device_cuda->caps, 0);
}
END_TEST

/* ---- the progress engine ------------------------------------------------------------------- */

struct counter {
  struct braid_progress_item item;
  volatile int calls; /* progress() calls */
  volatile int woken; /* calls with BRAID_PROGRESS_WOKEN */
  volatile int flag;  /* set by the test: progress() saw it (seen) */
  volatile int seen;
  int fd;         /* -1: names no descriptor */
  int timeout_ms; /* what wait() asks for */
};

static int counter_progress(struct braid_progress_item* it, int64_t now, unsigned flags) {
  struct counter* c = it->arg;
  c->calls++;
  if (flags & BRAID_PROGRESS_WOKEN) {
    c->woken++;
    char b[16];
    (void)!read(c->fd, b, sizeof(b)); /* drained: poll() stops reporting it */
  }
  if (c->flag) c->seen = 1;
  return 0;
}

static void counter_wait(struct braid_progress_item* it, int64_t now, struct braid_progress_wait* w) {
  struct counter* c = it->arg;
  if (c->fd >= 0) {
    w->fds[0] = (struct pollfd){.fd = c->fd, .events = POLLIN};
    w->nfds = 1;
  }
  if (c->timeout_ms >= 0 && (w->timeout_ms < 0 || c->timeout_ms < w->timeout_ms)) w->timeout_ms = c->timeout_ms;
}

static const struct braid_progress_ops counter_ops = {.progress = counter_progress, .wait = counter_wait};

static void counter_init(struct counter* c, int fd, int timeout_ms) {
  memset(c, 0, sizeof(*c));
  c->item.ops = &counter_ops;
  c->item.arg = c;
  c->fd = fd;
  c->timeout_ms = timeout_ms;
}

/* Up to 2 s for cond. */
#define WAIT_FOR(cond)                                       \
  do {                                                       \
    for (int w_ = 0; w_ < 400 && !(cond); w_++) sleep_ms(5); \
  } while (0)

START_TEST(test_engine_items) {
  struct counter a, b;
  counter_init(&a, -1, 5); /* wants a look every 5 ms */
  counter_init(&b, -1, -1);
  ck_assert_int_eq(braid_progress_add(&a.item), ncclSuccess);
  ck_assert_int_eq(braid_progress_add(&b.item), ncclSuccess);
  WAIT_FOR(a.calls > 20);
  ck_assert_int_gt(a.calls, 20); /* its timeout keeps the thread coming back */
  braid_progress_remove(&a.item);
  int after = a.calls;
  sleep_ms(50);
  ck_assert_int_eq(a.calls, after); /* never after remove */
  braid_progress_remove(&a.item);   /* twice: a no-op */
  braid_progress_remove(&b.item);
}
END_TEST

START_TEST(test_engine_fds) {
  int p[2];
  struct counter c;
  ck_assert_int_eq(pipe(p), 0);
  counter_init(&c, p[0], -1); /* sleeps on the pipe alone */
  ck_assert_int_eq(braid_progress_add(&c.item), ncclSuccess);
  WAIT_FOR(braid_progress_asleep());
  ck_assert_int_eq(braid_progress_asleep(), 1);
  ck_assert_int_eq(write(p[1], "x", 1), 1);
  WAIT_FOR(c.woken > 0);
  ck_assert_int_gt(c.woken, 0);
  /* A wake-up for work left to the thread: Dekker (store, fence, asleep, wake). */
  WAIT_FOR(braid_progress_asleep());
  c.flag = 1;
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  if (braid_progress_asleep()) braid_progress_wake();
  WAIT_FOR(c.seen);
  ck_assert_int_eq(c.seen, 1);
  braid_progress_remove(&c.item);
  close(p[0]);
  close(p[1]);
}
END_TEST

/* A connector item calls its transport's progress (here a fake proxied transport). */
static int fake_calls;
static int fake_progress(struct braid_connector* c, int64_t now, unsigned flags) {
  fake_calls++;
  return 0;
}
static void fake_wait(struct braid_connector* c, int64_t now, struct braid_progress_wait* w) {
  if (w->timeout_ms < 0 || w->timeout_ms > 5) w->timeout_ms = 5;
}

START_TEST(test_engine_conn) {
  struct braid_transport fake = braid_transport_net;
  struct braid_connector c;
  fake.progress = fake_progress;
  fake.wait = fake_wait;
  memset(&c, 0, sizeof(c));
  c.transport = &braid_transport_shm; /* no progress slot: refused */
  ck_assert_int_eq(braid_progress_add_conn(&c, 0), ncclInternalError);
  c.transport = &fake;
  ck_assert_int_eq(braid_progress_add_conn(&c, 0), ncclSuccess);
  WAIT_FOR(fake_calls > 5);
  ck_assert_int_gt(fake_calls, 5);
  braid_progress_remove_conn(&c);
}
END_TEST

Suite* transport_suite(void) {
  Suite* s = suite_create("transport");
  TCase* tc = tcase_create("registry");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_registry);
  tcase_add_test(tc, test_device_caps);
  suite_add_tcase(s, tc);
  tc = tcase_create("progress");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_engine_items);
  tcase_add_test(tc, test_engine_fds);
  tcase_add_test(tc, test_engine_conn);
  suite_add_tcase(s, tc);
  return s;
}
