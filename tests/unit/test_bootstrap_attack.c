/*
 * test_bootstrap_attack.c - the bootstrap (src/bootstrap/) against strangers and insiders:
 *   - a flood of silent connections on the root's and on a rank's port, in a process whose
 *     descriptor limit the flood exceeds: init and the operations still complete, and the
 *     strangers' descriptors are released within the handshake deadline even when no
 *     bootstrap call runs;
 *   - the same flood on a communicator's bootstrap while only collectives run, then a first
 *     send/recv (which needs the bootstrap);
 *   - an insider (the right secret) that claims a rank before the real one connects;
 *   - a connection that announces a 2^40-byte message;
 *   - many strangers from one address: one WARN line per interval, with a count.
 * The flooder is this test's process (a normal descriptor limit); the ranks run in a child
 * with a low one. Every wait is bounded by the TCase timeout.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define BRAID_BOOTSTRAP_INTERNAL /* the wire format, to forge a peer's hello */
#include "base/param.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"
#include "harness.h"
#include "nccl.h"

#define N 3
#define FLOOD 400   /* connections, more than LOW_FDS */
#define LOW_FDS 256 /* the ranks' process: RLIMIT_NOFILE */

static int count_fds(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  if (d == NULL) return -1;
  for (struct dirent* e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void lower_fd_limit(void) {
  struct rlimit rl = {LOW_FDS, LOW_FDS};
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(90);
}

/* ---- the flooder (this process) --------------------------------------------------------- */

struct flood {
  struct braid_socket s[FLOOD];
  int n;
};

/* Opens silent connections to addr; the kernel completes them whether or not anyone accepts. */
static void flood_open(struct flood* f, const union braid_sockaddr* addr, int n) {
  f->n = 0;
  for (int i = 0; i < n; i++) {
    int done = 0;
    if (braid_socket_connect_start(&f->s[f->n], addr, &done) == ncclSuccess) f->n++;
  }
  usleep(200 * 1000); /* let the handshakes complete */
}

static void flood_close(struct flood* f) {
  for (int i = 0; i < f->n; i++) braid_socket_close(&f->s[i]);
  f->n = 0;
}

/* ---- ranks as threads (in the child) --------------------------------------------------- */

static ncclResult_t rank_ops(struct braid_bootstrap* bs) {
  int r = braid_bootstrap_rank(bs), n = braid_bootstrap_nranks(bs);
  int all[N];
  all[r] = r * 3 + 1;
  ncclResult_t res = braid_bootstrap_allgather(bs, all, sizeof(int));
  for (int i = 0; i < n && res == ncclSuccess; i++)
    if (all[i] != i * 3 + 1) res = ncclInternalError;
  if (res == ncclSuccess) res = braid_bootstrap_barrier(bs);
  for (int p = 0; p < n && res == ncclSuccess; p++) res = braid_bootstrap_send(bs, p, 7, &r, sizeof(r));
  for (int p = 0; p < n && res == ncclSuccess; p++) {
    int v = -1;
    res = braid_bootstrap_recv(bs, p, 7, &v, sizeof(v));
    if (res == ncclSuccess && v != p) res = ncclInternalError;
  }
  if (res == ncclSuccess) res = braid_bootstrap_barrier(bs);
  return res;
}

struct job {
  const ncclUniqueId* id;
  int rank;
  pthread_barrier_t* pause; /* after init: wait twice (the main thread floods in between) */
  struct braid_bootstrap* bs;
  ncclResult_t res;
};

static void* job_main(void* arg) {
  struct job* j = arg;
  j->res = braid_bootstrap_init(j->id, 1, j->rank, N, NULL, &j->bs);
  if (j->pause != NULL) {
    pthread_barrier_wait(j->pause);
    pthread_barrier_wait(j->pause);
  }
  if (j->res == ncclSuccess) j->res = rank_ops(j->bs);
  return NULL;
}

/* Child side: runs N ranks; with `pause`, stops after init, writes rank `target`'s address
 * to `out`, waits for a byte on `in`, then runs the operations. Exit status: 0 all good. */
static int child_ranks(const ncclUniqueId* id, int pause, int target, int out, int in) {
  struct job jobs[N];
  pthread_t th[N];
  pthread_barrier_t b;
  pthread_barrier_init(&b, NULL, N + 1);
  for (int i = 0; i < N; i++) jobs[i] = (struct job){id, i, pause ? &b : NULL, NULL, ncclInternalError};
  for (int i = 0; i < N; i++) pthread_create(&th[i], NULL, job_main, &jobs[i]);
  if (pause) {
    char c;
    pthread_barrier_wait(&b);
    for (int i = 0; i < N; i++)
      if (jobs[i].res != ncclSuccess) return 10 + i;
    if (write(out, braid_bootstrap_peer_addr(jobs[0].bs, target), sizeof(union braid_sockaddr)) < 0) return 20;
    if (read(in, &c, 1) != 1) return 21;
    pthread_barrier_wait(&b);
  }
  for (int i = 0; i < N; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < N; i++)
    if (jobs[i].res != ncclSuccess) return 30 + i;
  return 0;
}

static int wait_child(pid_t pid) {
  int status;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/* The root of the id lives in the child (its limit); the flood reaches it before any rank. */
START_TEST(test_flood_root) {
  int up[2], down[2];
  ck_assert_int_eq(pipe(up), 0);
  ck_assert_int_eq(pipe(down), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    ncclUniqueId id;
    union braid_sockaddr root;
    uint64_t secret;
    char c;
    lower_fd_limit();
    if (braid_bootstrap_get_unique_id(&id) != ncclSuccess) _exit(1);
    braid_bootstrap_id_decode(&id, &secret, &root);
    if (write(up[1], &root, sizeof(root)) != sizeof(root) || read(down[0], &c, 1) != 1) _exit(2);
    _exit(child_ranks(&id, 0, 0, -1, -1));
  }
  static struct flood f;
  union braid_sockaddr root;
  ck_assert_int_eq(read(up[0], &root, sizeof(root)), sizeof(root));
  flood_open(&f, &root, FLOOD);
  ck_assert_int_eq(write(down[1], "g", 1), 1);
  int rc = wait_child(pid);
  flood_close(&f);
  ck_assert_msg(rc == 0, "ranks behind a flood of %d connections on the root (fd limit %d): status %d", FLOOD, LOW_FDS,
                rc);
}
END_TEST

/* Flood rank 1 between init and the operations; then, with nothing running, the strangers'
 * descriptors must go within a few handshake deadlines. */
static int child_flood_rank(int out, int in) {
  ncclUniqueId id;
  lower_fd_limit();
  if (braid_bootstrap_get_unique_id(&id) != ncclSuccess) return 1;
  int rc = child_ranks(&id, 1, 1, out, in);
  if (rc != 0) return rc;
  /* the parent keeps its connections open and silent; we call nothing */
  int base = count_fds(), now = base;
  for (int i = 0; i < 100 && now > 40; i++) {
    usleep(100 * 1000);
    now = count_fds();
  }
  if (now > 40) {
    fprintf(stderr, "child: %d descriptors still open (%d after the operations)\n", now, base);
    return 40;
  }
  return 0;
}

START_TEST(test_flood_rank) {
  int up[2], down[2];
  ck_assert_int_eq(pipe(up), 0);
  ck_assert_int_eq(pipe(down), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) _exit(child_flood_rank(up[1], down[0]));
  static struct flood f;
  union braid_sockaddr target;
  ck_assert_int_eq(read(up[0], &target, sizeof(target)), sizeof(target));
  flood_open(&f, &target, FLOOD);
  ck_assert_int_eq(write(down[1], "g", 1), 1);
  int rc = wait_child(pid);
  flood_close(&f);
  ck_assert_msg(rc == 0, "flood of %d connections on rank 1 (fd limit %d): child status %d", FLOOD, LOW_FDS, rc);
}
END_TEST

/* A communicator (ncclCommInitAll in the child) runs an AllReduce while rank 1's bootstrap
 * port is flooded, then the first Send/Recv between ranks 1 and 0, which needs it. */
static int child_flood_comm(int out, int in) {
  ncclComm_t comms[N];
  char c;
  lower_fd_limit();
  if (ncclCommInitAll(comms, N, NULL) != ncclSuccess) return 1;
  struct braid_comm* c0 = braid_comm_of(comms[0]);
  if (write(out, braid_bootstrap_peer_addr(c0->bootstrap, 1), sizeof(union braid_sockaddr)) < 0) return 2;
  if (read(in, &c, 1) != 1) return 3;
  int v[N], s[N];
  for (int i = 0; i < N; i++) v[i] = i + 1;
  ncclGroupStart();
  for (int i = 0; i < N; i++) ncclAllReduce(&v[i], &s[i], 1, ncclInt32, ncclSum, comms[i], NULL);
  if (ncclGroupEnd() != ncclSuccess) return 4;
  for (int i = 0; i < N; i++)
    if (s[i] != 6) return 5;
  int x = 42, y = 0;
  ncclGroupStart();
  ncclSend(&x, 1, ncclInt32, 0, comms[1], NULL);
  ncclRecv(&y, 1, ncclInt32, 1, comms[0], NULL);
  if (ncclGroupEnd() != ncclSuccess) {
    fprintf(stderr, "child: send/recv failed: %s\n", ncclGetLastError(NULL));
    return 6;
  }
  if (y != 42) return 7;
  for (int i = 0; i < N; i++) ncclCommDestroy(comms[i]);
  return 0;
}

START_TEST(test_flood_comm_later) {
  int up[2], down[2];
  ck_assert_int_eq(pipe(up), 0);
  ck_assert_int_eq(pipe(down), 0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) _exit(child_flood_comm(up[1], down[0]));
  static struct flood f;
  union braid_sockaddr target;
  ck_assert_int_eq(read(up[0], &target, sizeof(target)), sizeof(target));
  flood_open(&f, &target, FLOOD);
  ck_assert_int_eq(write(down[1], "g", 1), 1);
  int rc = wait_child(pid);
  flood_close(&f);
  ck_assert_msg(rc == 0, "flood on a communicator's bootstrap while collectives run: child status %d", rc);
}
END_TEST

/* ---- insiders (this process) ------------------------------------------------------------- */

struct init_job {
  const ncclUniqueId* id;
  int rank, nranks;
  struct braid_bootstrap* bs;
  ncclResult_t res;
};
static void* init_main(void* arg) {
  struct init_job* j = arg;
  j->res = braid_bootstrap_init(j->id, 1, j->rank, j->nranks, NULL, &j->bs);
  return NULL;
}
static void init_ranks(struct init_job* jobs, int n) {
  ncclUniqueId id;
  pthread_t th[8];
  ck_assert_int_eq(braid_bootstrap_get_unique_id(&id), ncclSuccess);
  for (int i = 0; i < n; i++) jobs[i] = (struct init_job){&id, i, n, NULL, ncclInternalError};
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, init_main, &jobs[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
}

/* What a peer says first on a connection to another rank. An insider knows the secret (and
 * the layout) but nothing that only the real rank holds. */
static void insider_hello(struct braid_bootstrap* bs, int claim, struct bs_peer_hello* h) {
  memset(h, 0, sizeof(*h));
  h->hs = (struct braid_socket_handshake){braid_bootstrap_secret(bs), BRAID_SOCKET_TYPE_BOOTSTRAP, BS_CONN_PEER};
  h->rank = claim;
  h->nranks = braid_bootstrap_nranks(bs);
}

static void insider_connect(struct braid_socket* s, const union braid_sockaddr* to, const void* bytes, size_t n) {
  ck_assert_int_eq(braid_socket_connect(s, to, 0, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
  ck_assert_int_eq(braid_socket_send(s, bytes, n, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
}

struct recv_job {
  struct braid_bootstrap* bs;
  int peer;
  int value;
  ncclResult_t res;
};
static void* recv_main(void* arg) {
  struct recv_job* j = arg;
  j->res = braid_bootstrap_recv(j->bs, j->peer, 11, &j->value, sizeof(j->value));
  return NULL;
}

/* Four ranks: rank 2 has no connection to rank 0 yet (the ring joins 3 to 0). An insider
 * claims rank 2 at rank 0 first; the real rank 2's message must still arrive. */
START_TEST(test_insider_claims_rank) {
  enum { R = 4 };
  struct init_job jobs[R];
  struct bs_peer_hello h;
  struct braid_socket insider;
  init_ranks(jobs, R);
  insider_hello(jobs[0].bs, 2, &h);
  insider_connect(&insider, braid_bootstrap_peer_addr(jobs[1].bs, 0), &h, sizeof(h));
  usleep(100 * 1000);
  struct recv_job rj = {jobs[0].bs, 2, -1, ncclInternalError};
  pthread_t t;
  pthread_create(&t, NULL, recv_main, &rj); /* rank 0's progress pass sees the insider first */
  usleep(300 * 1000);
  int v = 1234;
  ck_assert_int_eq(braid_bootstrap_send(jobs[2].bs, 0, 11, &v, sizeof(v)), ncclSuccess);
  usleep(500 * 1000);
  braid_socket_close(&insider); /* today's code: rank 0 then reads "rank 2" closing */
  pthread_join(t, NULL);
  ck_assert_msg(rj.res == ncclSuccess && rj.value == 1234, "rank 0's receive from rank 2: result %d value %d", rj.res,
                rj.value);
  for (int i = 0; i < R; i++) braid_bootstrap_close(jobs[i].bs);
}
END_TEST

/* A rank's connection announces a 2^40-byte message while rank 0 waits for another rank: the
 * connection is dropped, the wait is not disturbed. */
START_TEST(test_huge_header) {
  enum { R = 4 };
  struct init_job jobs[R];
  struct bs_peer_hello h;
  struct braid_socket bad;
  init_ranks(jobs, R);
  struct {
    struct bs_peer_hello h;
    uint32_t kind, pad;
    uint64_t tag, size;
  } msg;
  insider_hello(jobs[0].bs, 2, &h);
  braid_bootstrap_test_hello(jobs[2].bs, &h); /* the real rank 2's credentials */
  memset(&msg, 0, sizeof(msg));
  msg.h = h;
  msg.kind = 1;
  msg.tag = 11;
  msg.size = 1ULL << 40;
  insider_connect(&bad, braid_bootstrap_peer_addr(jobs[1].bs, 0), &msg, sizeof(msg));
  struct recv_job rj = {jobs[0].bs, 1, -1, ncclInternalError};
  pthread_t t;
  pthread_create(&t, NULL, recv_main, &rj);
  usleep(300 * 1000);
  int v = 77;
  ck_assert_int_eq(braid_bootstrap_send(jobs[1].bs, 0, 11, &v, sizeof(v)), ncclSuccess);
  pthread_join(t, NULL);
  ck_assert_msg(rj.res == ncclSuccess && rj.value == 77, "rank 0's receive from rank 1: result %d value %d", rj.res,
                rj.value);
  braid_socket_close(&bad);
  for (int i = 0; i < R; i++) braid_bootstrap_close(jobs[i].bs);
}
END_TEST

/* ---- the WARN of dropped strangers ------------------------------------------------------ */

/* 60 strangers with a wrong secret from one address on rank 1: one WARN line (the count comes
 * with the next interval's first line). */
START_TEST(test_warn_rate_limited) {
  enum { S = 60 };
  char path[] = "/tmp/braid-test-warn-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
  braid_param_reload();
  ncclResetDebugInit();
  struct init_job jobs[N];
  init_ranks(jobs, N);
  struct bs_peer_hello h;
  insider_hello(jobs[0].bs, 2, &h);
  h.hs.secret++;
  static struct braid_socket s[S];
  for (int i = 0; i < S; i++) insider_connect(&s[i], braid_bootstrap_peer_addr(jobs[0].bs, 1), &h, sizeof(h));
  usleep(200 * 1000);
  for (int k = 0; k < 3; k++) {
    int v = k;
    ck_assert_int_eq(braid_bootstrap_send(jobs[0].bs, 1, 5, &v, sizeof(v)), ncclSuccess);
    ck_assert_int_eq(braid_bootstrap_recv(jobs[1].bs, 0, 5, &v, sizeof(v)), ncclSuccess);
    usleep(200 * 1000);
  }
  for (int i = 0; i < S; i++) braid_socket_close(&s[i]);
  for (int i = 0; i < N; i++) braid_bootstrap_close(jobs[i].bs);
  int lines = harness_count_lines(path, "dropping connection from");
  unlink(path);
  unsetenv("NCCL_DEBUG_FILE");
  unsetenv("NCCL_DEBUG");
  ncclResetDebugInit();
  ck_assert_msg(lines >= 1 && lines <= 2, "%d WARN lines for %d strangers from one address", lines, S);
}
END_TEST

Suite* bootstrap_attack_suite(void);
Suite* bootstrap_attack_suite(void) {
  Suite* s = suite_create("bootstrap_attack");
  TCase* tc = tcase_create("flood");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_flood_root);
  tcase_add_test(tc, test_flood_rank);
  tcase_add_test(tc, test_flood_comm_later);
  suite_add_tcase(s, tc);
  tc = tcase_create("insider");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_insider_claims_rank);
  tcase_add_test(tc, test_huge_header);
  tcase_add_test(tc, test_warn_rate_limited);
  suite_add_tcase(s, tc);
  return s;
}
