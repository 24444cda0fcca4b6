/*
 * net_cases_fail.c - the network suite's failure TCases (the suite: test_net.c), over every
 * net plugin of net_plugins[] (net_fixture.c):
 *   kill     kill -9 of each rank position in turn during an all-reduce (4 ranks, two fake
 *            nodes): every survivor's call fails within 30 s with ncclRemoteError or
 *            ncclSystemError and a message naming the dead rank, ncclCommGetAsyncError agrees,
 *            and after ncclCommAbort no descriptor or thread is left; also with shared memory
 *            inside the nodes, and on one node with shared memory only (the watchdog finds the
 *            dead shared-memory peer). BRAID_TEST_TIER=full adds the 256 MiB kill;
 *   abort    ncclCommAbort from another thread ends a collective stuck on a silent peer within
 *            a second; nothing is left behind;
 *   timeout  BRAID_TIMEOUT=2 fails a collective whose peer never comes, naming channel, step
 *            and peer, over the network and over shared memory; and while connecting;
 *   abandon  a receive into user memory outlived by its call writes nothing afterwards;
 *   garbage  garbage written onto a data socket mid-run: the receiving rank fails naming the
 *            sender and the garbage, the sender fails too, nobody hangs.
 */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "core/comm.h"
#include "device/device.h"
#include "harness.h"
#include "ibemu_fixture.h"
#include "nccl.h"
#include "net_fixture.h"
#include "transport/net/net_internal.h"
#include "transport/net/socket/net_socket.h"
#if BRAID_UCX_BUILT
#include "transport/net/ucx/ucx.h"
#endif
#if BRAID_IB_BUILT
#include <limits.h>

#include "transport/net/ib/ib_net.h"
#endif

/* ---- kill -9 during an all-reduce ------------------------------------------------------------ */

struct kill_case {
  int victim;
  const char* env;
  int per_node; /* ranks per fake node */
  int stall_ms; /* > 0: the victim's ring successor stops (SIGSTOP) from before the kill until this
                 * long after the start, so it finds the victim's last messages waiting for it */
};

static void* suicide(void* arg) {
  usleep(*(int*)arg * 1000);
  raise(SIGKILL);
  return NULL;
}

/* Stop the whole process 10 ms into the all-reduce (before the victim dies at 30 ms); a child
 * wakes it at stall_ms. What the victim sent meanwhile (over UCX: rendezvous requests that name
 * the receiver's endpoint) is handled only after the death. */
static void* stall(void* arg) {
  int ms = *(int*)arg;
  pid_t me = getpid();
  usleep(10 * 1000);
  pid_t child = fork();
  if (child == 0) {
    usleep(ms * 1000);
    kill(me, SIGCONT);
    _exit(0);
  }
  if (child > 0) {
    kill(me, SIGSTOP);
    waitpid(child, NULL, 0);
  }
  return NULL;
}

static int body_kill(struct harness_rank* r) {
  const struct kill_case* k = r->arg;
  size_t count = (net_full_tier() ? 256u << 20 : 64u << 20) / sizeof(float);
  ncclComm_t comm;
  char name[32];
  net_apply_env(k->env);
  net_fake_node(r, k->per_node);
  int fds0 = harness_count_fds(), threads0 = harness_count_threads();
  float* buf = malloc(count * sizeof(float)); /* untouched pages read as zeros: no fill needed */
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL)); /* everyone is up */
  if (r->rank == k->victim) {
    static int delay_ms = 30;
    pthread_t t;
    pthread_create(&t, NULL, suicide, &delay_ms);
  }
  pthread_t staller;
  int stalled = k->stall_ms > 0 && r->rank == (k->victim + 1) % r->nranks &&
                pthread_create(&staller, NULL, stall, (void*)&k->stall_ms) == 0;
  double t0 = net_now_s();
  ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  double took = net_now_s() - t0;
  if (stalled) pthread_join(staller, NULL);
  const char* msg = ncclGetLastError(comm);
  if (r->rank == k->victim) pause(); /* finished before the kill: wait for it */
  REXPECT(r, res == ncclRemoteError || res == ncclSystemError,
          "all-reduce with rank %d killed returned %d (%s), expected a remote or system error", k->victim, (int)res,
          ncclGetErrorString(res));
  REXPECT(r, took < 30.0, "the all-reduce took %.1f s to fail", took);
  snprintf(name, sizeof(name), "rank %d (host", k->victim);
  REXPECT(r, strstr(msg, name) != NULL, "the error does not name the dead %s ...): %s", name, msg);
  ncclResult_t async = ncclSuccess;
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  REXPECT(r, async == ncclRemoteError || async == ncclSystemError, "ncclCommGetAsyncError gave %d", (int)async);
  RCHECK(r, ncclCommAbort(comm));
  free(buf);
  if (net_released_since(r, fds0, threads0)) return 1;
  /* Stay alive a while: a survivor that exits at once is itself a dead peer to a slower
   * survivor on another node, which may then blame it instead of the victim. */
  sleep(3);
  return 0;
}

static const struct kill_case kill_cases[] = {
    {0, "NCCL_SHM_DISABLE=1", 2, 0},
    {1, "NCCL_SHM_DISABLE=1", 2, 0},
    {2, "NCCL_SHM_DISABLE=1", 2, 0},
    {3, "NCCL_SHM_DISABLE=1", 2, 0},
    {1, NULL, 2, 0}, /* shared memory inside the nodes: rank 0 learns of rank 1 from the watchdog */
    {2, NULL, 4, 0}, /* one node, shared memory only: the watchdog alone */
    /* rank 2 stopped across rank 1's death: over UCX 1.13 its first read of rank 1's memory
     * fails, UCX destroys the endpoint the next rendezvous request names (ucx_lib.c) */
    {1, "NCCL_SHM_DISABLE=1", 2, 300},
};

/* The plugins whose kill cases this tier registers (filled by net_suite): a case that does not
 * run is not registered, so it is never counted as passed. */
static int kill_plugins[NET_MAX_PLUGINS];
static int nkill_plugins;

START_TEST(test_kill) {
  const struct kill_case* k = &kill_cases[_i % NELEMS(kill_cases)];
  if (net_skip_case(_i % NELEMS(kill_cases)) || net_skip_plugin(kill_plugins[_i / NELEMS(kill_cases)])) return;
  const struct net_plugin_case* p = net_use_plugin(kill_plugins[_i / NELEMS(kill_cases)]);
  int shm0 = harness_count_shm();
  int failed = harness_run(4, HARNESS_PROCS, body_kill, (void*)k, HARNESS_TIMEOUT_S);
  ck_assert_msg(failed == 1,
                "kill of rank %d over %s (%s, %d ranks per node): %d processes failed (only the victim should)",
                k->victim, p->name, k->env ? k->env : "shared memory inside nodes", k->per_node, failed);
  ck_assert_int_le(harness_count_shm(), shm0);
}
END_TEST

/* ---- abort from another thread -------------------------------------------------------------- */

struct aborter {
  ncclComm_t comm;
};

static void* abort_later(void* arg) {
  struct aborter* a = arg;
  usleep(300000);
  ncclCommAbort(a->comm);
  return NULL;
}

/* Rank 1 stays in the communicator, without joining the collective, until rank 0's
 * all-reduce has returned (a flag in memory both processes share), so only rank 0's own
 * ncclCommAbort can have ended it; rank 1 gives up after 60 s, which fails the case. */
static int body_abort(struct harness_rank* r) {
  volatile int* returned = r->arg;
  size_t count = 4 << 20;
  ncclComm_t comm;
  net_fake_node(r, 1);
  int fds0 = harness_count_fds(), threads0 = harness_count_threads();
  float* buf = calloc(count, sizeof(float));
  REXPECT(r, buf != NULL, "out of memory");
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 1) {
    for (int i = 0; i < 6000 && !__atomic_load_n(returned, __ATOMIC_ACQUIRE); i++) usleep(10000);
    REXPECT(r, __atomic_load_n(returned, __ATOMIC_ACQUIRE), "rank 0's all-reduce did not return after its abort");
    RCHECK(r, ncclCommAbort(comm));
  } else {
    struct aborter a = {comm};
    pthread_t t;
    pthread_create(&t, NULL, abort_later, &a);
    ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    __atomic_store_n(returned, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    REXPECT(r, res != ncclSuccess, "the all-reduce succeeded without its peer");
  }
  free(buf);
  if (net_released_since(r, fds0, threads0)) return 1;
  return 0;
}

START_TEST(test_abort) {
  net_use_plugin(_i);
  int* returned = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(returned, MAP_FAILED);
  *returned = 0;
  int failed = harness_run(2, HARNESS_PROCS, body_abort, returned, HARNESS_TIMEOUT_S);
  munmap(returned, sizeof(int));
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- BRAID_TIMEOUT ------------------------------------------------------------------------------ */

static int body_timeout(struct harness_rank* r) {
  ncclComm_t comm;
  int32_t x = 1;
  setenv("BRAID_TIMEOUT", "2", 1);
  /* The wait under test is the data path's (a FIFO step). The tuner may pick the tree for one
   * element, whose connections are made at first use over the bootstrap: a wait there fails
   * with ncclInvalidUsage from the bootstrap, not with this message (reported, connect.c). */
  setenv("NCCL_ALGO", "Ring", 1);
  net_fake_node(r, *(const int*)r->arg); /* 1: two nodes (sockets); 2: one node (shared memory) */
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 1) {
    usleep(5000000);
    RCHECK(r, ncclCommAbort(comm));
    return 0;
  }
  double t0 = net_now_s();
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  double took = net_now_s() - t0;
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, res == ncclSystemError, "the all-reduce returned %d (%s), expected ncclSystemError", (int)res,
          ncclGetErrorString(res));
  REXPECT(r, took >= 1.5 && took < 30.0, "it failed after %.1f s with BRAID_TIMEOUT=2", took);
  REXPECT(r, strstr(msg, "BRAID_TIMEOUT=2") && strstr(msg, "channel 0 waits for step 0 from rank 1 (host"),
          "the message does not say what it waited for: %s", msg);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

static const int timeout_per_node[] = {1, 2};

/* BRAID_TIMEOUT while a tree's connections are being made at first use (3 ranks, 3 fake nodes,
 * rank 2 never calls): the call fails as a data-path timeout would, ncclSystemError and the
 * BRAID_TIMEOUT message, not as an "aborted" bootstrap receive. */
static int body_timeout_connect(struct harness_rank* r) {
  ncclComm_t comm;
  int32_t x = 1;
  setenv("BRAID_TIMEOUT", "2", 1);
  setenv("NCCL_ALGO", "allreduce:Tree", 1);
  net_fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 2) {
    usleep(6000000);
    RCHECK(r, ncclCommAbort(comm));
    return 0;
  }
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  const char* msg = ncclGetLastError(comm);
  REXPECT(r, res == ncclSystemError || res == ncclRemoteError,
          "the all-reduce returned %d (%s), expected a system or remote error", (int)res, ncclGetErrorString(res));
  REXPECT(r, strstr(msg, "BRAID_TIMEOUT") != NULL || strstr(msg, "rank 2") != NULL,
          "the message names neither the timeout nor the missing rank: %s", msg);
  /* Neither of the two leaves before both have failed: a rank that exits after its timeout
   * would otherwise be seen dying by the other (which then rightly names it, not rank 2). */
  int* failed = r->arg;
  __atomic_add_fetch(failed, 1, __ATOMIC_ACQ_REL);
  for (int i = 0; i < 6000 && __atomic_load_n(failed, __ATOMIC_ACQUIRE) < 2; i++) usleep(10000);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

START_TEST(test_timeout_connect) {
  net_use_plugin(_i);
  int* failed = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(failed, MAP_FAILED);
  *failed = 0;
  int res = harness_run(3, HARNESS_PROCS, body_timeout_connect, failed, HARNESS_TIMEOUT_S);
  munmap(failed, sizeof(int));
  ck_assert_int_eq(res, 0);
}
END_TEST

START_TEST(test_timeout) {
  net_use_plugin(_i / NELEMS(timeout_per_node));
  const int* per_node = &timeout_per_node[_i % NELEMS(timeout_per_node)];
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_timeout, (void*)per_node, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- a receive into user memory outlived by its call --------------------------------------- */

/* Rank 0's ncclRecv (large: it lands straight in the user's buffer, kernels/direct.h) fails on
 * BRAID_TIMEOUT while rank 1 has not sent yet. Rank 0 then fills its buffer with a marker, and
 * only then (a flag file) rank 1 sends after all; its bytes reach rank 0's socket, and once
 * rank 1's send has given up (a second flag) rank 0's buffer must still hold the marker: a
 * receive still posted there would have taken them. Rank 1's own result does not matter. */
static void abandon_flag_path(char* path, size_t len, const char* what) {
  snprintf(path, len, "/tmp/braid-test-abandon-%d-%s", (int)getppid(), what); /* the ranks share a parent */
}
static void abandon_flag_set(const char* what) {
  char path[96];
  abandon_flag_path(path, sizeof(path), what);
  int fd = open(path, O_CREAT | O_WRONLY, 0600);
  if (fd >= 0) close(fd);
}
static int abandon_flag_wait(const char* what) {
  char path[96];
  abandon_flag_path(path, sizeof(path), what);
  for (int i = 0; i < 6000; i++) { /* 60 s: a hang guard, not a timing condition */
    if (access(path, F_OK) == 0) return 0;
    usleep(10000);
  }
  return -1;
}

static int body_abandon(struct harness_rank* r) {
  size_t bytes = 4 << 20;
  ncclComm_t comm;
  char path[96];
  setenv("BRAID_TIMEOUT", "1", 1);
  net_fake_node(r, 1);
  unsigned char* buf = malloc(bytes);
  REXPECT(r, buf != NULL, "out of memory");
  memset(buf, 0x11, bytes);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  /* p2p connections are made at first use: make them now, so the receive under test is posted */
  RCHECK(r, ncclGroupStart());
  RCHECK(r, ncclSend(buf, 1, ncclUint8, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclRecv(buf + 1, 1, ncclUint8, 1 - r->rank, comm, NULL));
  RCHECK(r, ncclGroupEnd());
  if (r->rank == 1) {
    int waited = abandon_flag_wait("marked");
    if (waited == 0) (void)ncclSend(buf, bytes, ncclUint8, 0, comm, NULL); /* fails on BRAID_TIMEOUT */
    abandon_flag_set("sent");
    ncclCommAbort(comm);
    free(buf);
    REXPECT(r, waited == 0, "rank 0 never marked its buffer");
    return 0;
  }
  ncclResult_t res = ncclRecv(buf, bytes, ncclUint8, 1, comm, NULL);
  memset(buf, 0xA5, bytes);
  abandon_flag_set("marked");
  int waited = abandon_flag_wait("sent");
  usleep(200000); /* a receive still posted would be served by the proxy thread by now */
  size_t changed = 0, first = 0;
  for (size_t i = 0; i < bytes; i++)
    if (buf[i] != 0xA5 && changed++ == 0) first = i;
  ncclCommAbort(comm);
  free(buf);
  abandon_flag_path(path, sizeof(path), "marked");
  unlink(path);
  abandon_flag_path(path, sizeof(path), "sent");
  unlink(path);
  REXPECT(r, res != ncclSuccess, "the receive succeeded before its peer sent");
  REXPECT(r, waited == 0, "rank 1 never said it sent");
  REXPECT(r, changed == 0, "%zu bytes of the buffer changed after the failed receive returned (first at %zu)", changed,
          first);
  return 0;
}

START_TEST(test_abandon) {
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_abandon, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* ---- garbage on a data socket -------------------------------------------------------------- */

/* Rank 0 writes garbage straight onto the byte stream of its channel-0 ring send connection
 * (white box: through the communicator's internals and the plugin's stream_fd); rank 1 must
 * fail its next call naming rank 0 and the garbage, and rank 0 must fail too (rank 1 aborts),
 * neither hangs nor crashes. */
struct garbage_arg {
  const struct net_plugin_case* plugin;
  int* warm; /* shared: ranks whose first all-reduce returned */
};

static int body_garbage(struct harness_rank* r) {
  const struct garbage_arg* g = r->arg;
  const struct net_plugin_case* p = g->plugin;
  ncclComm_t comm;
  int32_t x = 1;
  net_fake_node(r, 1);
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  RCHECK(r, ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL));
  /* Garbage only once both ranks are done with the first call: a plugin whose data and control
   * travel apart (UCX) does not order the garbage after data that was sent before it. */
  __atomic_add_fetch(g->warm, 1, __ATOMIC_ACQ_REL);
  for (int i = 0; i < 6000 && __atomic_load_n(g->warm, __ATOMIC_ACQUIRE) < 2; i++) usleep(10000);
  if (r->rank == 0) {
    struct braid_connector* c = &braid_comm_of(comm)->channels[0].ring_send;
    REXPECT(r, c->transport != NULL && strcmp(c->transport->name, "NET") == 0,
            "the ring connection is not a network one");
    struct net_res* res = c->res;
    static const char junk[64] = "GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE GARBAGE";
    REXPECT(r, strcmp(res->net->name, p->name) == 0, "the connection uses %s, not %s", res->net->name, p->name);
    REXPECT(r, write(p->stream_fd(res->net_comm), junk, sizeof(junk)) == (ssize_t)sizeof(junk),
            "cannot write the garbage");
  }
  double t0 = net_now_s();
  ncclResult_t res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  /* Rank 0 sent the garbage, not received it: with a one-hop algorithm (2-rank exchange) its
   * own call can complete on rank 1's intact data. Its next call must fail then, since rank 1
   * aborts. */
  if (res == ncclSuccess && r->rank == 0) res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, comm, NULL);
  REXPECT(r, res != ncclSuccess, "the all-reduce after garbage succeeded");
  REXPECT(r, net_now_s() - t0 < 30, "it took %.1f s to fail", net_now_s() - t0);
  /* Rank 1's proxy may see the garbage before the call starts (the call then fails at once):
   * the reason stays with the communicator, as its asynchronous error. */
  ncclResult_t async = ncclSuccess;
  RCHECK(r, ncclCommGetAsyncError(comm, &async));
  REXPECT(r, async == ncclRemoteError, "ncclCommGetAsyncError gave %d", (int)async);
  const char* why = braid_comm_of(comm)->abort_reason;
  if (r->rank == 1)
    REXPECT(r, strstr(why, "rank 0 (host") && strstr(why, "garbage"),
            "the reason does not name rank 0 and the garbage: %s", why);
  RCHECK(r, ncclCommAbort(comm));
  return 0;
}

START_TEST(test_garbage) {
  const struct net_plugin_case* p = net_use_plugin(_i);
  if (p->stream_fd == NULL) {
    fprintf(stderr, "net garbage over %s: SKIPPED: the plugin has no byte stream to write garbage onto\n", p->name);
    return;
  }
  int* warm = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(warm, MAP_FAILED);
  *warm = 0;
  struct garbage_arg g = {p, warm};
  int res = harness_run(2, HARNESS_PROCS, body_garbage, &g, HARNESS_TIMEOUT_S);
  munmap(warm, sizeof(int));
  ck_assert_int_eq(res, 0);
}
END_TEST

void net_fail_tcases(Suite* s) {
  TCase* tc = net_tcase("kill", TCASE_TIMEOUT_S);
  nkill_plugins = 0;
  for (int p = 0; p < net_nplugins; p++) {
    if (net_plugins[p].kill_full_only == NULL || net_full_tier())
      kill_plugins[nkill_plugins++] = p;
    else
      fprintf(stderr, "net: %d kill cases over %s not run in this tier (BRAID_TEST_TIER=full runs them): %s\n",
              (int)NELEMS(kill_cases), net_plugins[p].name, net_plugins[p].kill_full_only);
  }
  tcase_add_loop_test(tc, test_kill, 0, NELEMS(kill_cases) * nkill_plugins);
  suite_add_tcase(s, tc);
  tc = net_tcase("abort", 60);
  tcase_add_loop_test(tc, test_abort, 0, net_nplugins);
  suite_add_tcase(s, tc);
  tc = net_tcase("timeout", 60);
  tcase_add_loop_test(tc, test_timeout, 0, NELEMS(timeout_per_node) * net_nplugins);
  tcase_add_loop_test(tc, test_timeout_connect, 0, net_nplugins);
  suite_add_tcase(s, tc);
  tc = net_tcase("abandon", 60);
  tcase_add_test(tc, test_abandon);
  suite_add_tcase(s, tc);
  tc = net_tcase("garbage", 60);
  tcase_add_loop_test(tc, test_garbage, 0, net_nplugins);
  suite_add_tcase(s, tc);
}
