/*
 * test_bootstrap.c - src/bootstrap/bootstrap.c and src/bootstrap/bootstrap_root.c: rendezvous of 1..16 ranks as
 * threads and as processes, NCCL_COMM_ID, several roots, split, tagged send/recv out of order,
 * and the failures: strangers on the root's and a rank's port, abort, timeout naming the
 * missing rank, a peer that dies, bad arguments, and no fd or thread left behind.
 */
#include <check.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BRAID_BOOTSTRAP_INTERNAL /* the wire format, to forge a malformed hello */
#include "base/debug.h"
#include "base/param.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"

#define MAX_RANKS 16

static void env_set(const char* name, const char* value) {
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
  braid_param_reload();
  braid_socket_bootstrap_interface_reset();
}

static int count_dir(const char* path) {
  DIR* d = opendir(path);
  int n = 0;
  ck_assert_ptr_nonnull(d);
  for (struct dirent* e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

/* Root threads exit on their own after their verdict: give them time. */
static void expect_counts(int fds, int tasks) {
  int f = 0, t = 0;
  for (int i = 0; i < 500; i++) { /* a root that failed answers latecomers for 3 s */
    f = count_dir("/proc/self/fd");
    t = count_dir("/proc/self/task");
    if (f == fds && t == tasks) return;
    usleep(20 * 1000);
  }
  ck_abort_msg("leak: %d fds (expected %d), %d threads (expected %d)", f, fds, t, tasks);
}

static void make_ids(ncclUniqueId* ids, int nids) {
  for (int i = 0; i < nids; i++) ck_assert_int_eq(braid_bootstrap_get_unique_id(&ids[i]), ncclSuccess);
}

/* ---- what every rank does after init -------------------------------------------------------- */

static ncclResult_t rank_ops(struct braid_bootstrap* bs) {
  int r = braid_bootstrap_rank(bs), n = braid_bootstrap_nranks(bs);
  int all[MAX_RANKS];
  all[r] = r * 7 + 1;
  ncclResult_t res = braid_bootstrap_allgather(bs, all, sizeof(int));
  if (res != ncclSuccess) return res;
  for (int i = 0; i < n; i++)
    if (all[i] != i * 7 + 1) return ncclInternalError;
  /* a bigger allgather: 256 KiB a rank, more than a socket buffer holds at once */
  size_t big = 256 << 10;
  unsigned char* b = malloc(big * (size_t)n);
  memset(b + big * (size_t)r, r + 1, big);
  res = braid_bootstrap_allgather(bs, b, big);
  for (int i = 0; i < n && res == ncclSuccess; i++)
    if (b[big * (size_t)i] != i + 1 || b[big * (size_t)i + big - 1] != i + 1) res = ncclInternalError;
  free(b);
  for (int k = 0; k < 3 && res == ncclSuccess; k++) res = braid_bootstrap_barrier(bs);
  /* tagged send/recv to every peer (self included), received in another order than sent */
  for (int p = 0; p < n && res == ncclSuccess; p++)
    for (uint64_t tag = 1; tag <= 3 && res == ncclSuccess; tag++) {
      int msg[3] = {r, p, (int)tag};
      res = braid_bootstrap_send(bs, p, tag, msg, sizeof(msg));
    }
  for (int p = n - 1; p >= 0 && res == ncclSuccess; p--) {
    static const uint64_t order[3] = {3, 1, 2};
    for (int k = 0; k < 3 && res == ncclSuccess; k++) {
      int msg[3];
      res = braid_bootstrap_recv(bs, p, order[k], msg, sizeof(msg));
      if (res == ncclSuccess && (msg[0] != p || msg[1] != r || msg[2] != (int)order[k])) res = ncclInternalError;
    }
  }
  if (res == ncclSuccess && (braid_bootstrap_peer_host(bs, (r + 1) % n)[0] == '\0' || braid_bootstrap_secret(bs) == 0))
    res = ncclInternalError;
  if (res == ncclSuccess) res = braid_bootstrap_barrier(bs);
  return res;
}

/* ---- ranks as threads ----------------------------------------------------------------------- */

struct job {
  const ncclUniqueId* ids;
  int nids, rank, nranks;
  volatile uint32_t* abort_flag;
  int ops;                  /* run rank_ops after init */
  pthread_barrier_t* pause; /* when set: wait there after init, then run ops */
  ncclResult_t res;
  struct braid_bootstrap* bs; /* closed by the thread unless keep */
  int keep;
};

static void* job_main(void* arg) {
  struct job* j = arg;
  j->res = braid_bootstrap_init(j->ids, j->nids, j->rank, j->nranks, j->abort_flag, &j->bs);
  if (j->pause != NULL) pthread_barrier_wait(j->pause);
  if (j->res == ncclSuccess && j->ops) j->res = rank_ops(j->bs);
  if (j->res == ncclSuccess && !j->keep) {
    braid_bootstrap_close(j->bs);
    j->bs = NULL;
  }
  return NULL;
}

static void jobs_start(struct job* jobs, pthread_t* threads, int n) {
  for (int i = 0; i < n; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, job_main, &jobs[i]), 0);
}

static void jobs_join(pthread_t* threads, int n) {
  for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
}

static void run_threads(const ncclUniqueId* ids, int nids, int n, int ops) {
  struct job jobs[MAX_RANKS];
  pthread_t threads[MAX_RANKS];
  for (int i = 0; i < n; i++) jobs[i] = (struct job){.ids = ids, .nids = nids, .rank = i, .nranks = n, .ops = ops};
  jobs_start(jobs, threads, n);
  jobs_join(threads, n);
  for (int i = 0; i < n; i++) ck_assert_msg(jobs[i].res == ncclSuccess, "rank %d of %d: result %d", i, n, jobs[i].res);
}

static const int thread_sizes[] = {1, 2, 3, 4, 5, 8, 13, 16};

START_TEST(test_threads) {
  ncclUniqueId id;
  make_ids(&id, 1);
  run_threads(&id, 1, thread_sizes[_i], 1);
}
END_TEST

/* ---- ranks as processes --------------------------------------------------------------------- */

/* Forks n ranks; each inits, runs ops, closes, and exits with its result. Returns how many
 * failed. */
static int run_processes(const ncclUniqueId* ids, int nids, int n) {
  pid_t pids[MAX_RANKS];
  for (int i = 0; i < n; i++) {
    pids[i] = fork();
    ck_assert_int_ge(pids[i], 0);
    if (pids[i] == 0) {
      struct braid_bootstrap* bs;
      ncclResult_t res = braid_bootstrap_init(ids, nids, i, n, NULL, &bs);
      if (res == ncclSuccess) res = rank_ops(bs);
      if (res == ncclSuccess) braid_bootstrap_close(bs);
      _exit(res);
    }
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    int status;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failed;
}

static const int process_sizes[] = {1, 2, 3, 4, 8, 16};

START_TEST(test_processes) {
  ncclUniqueId id;
  make_ids(&id, 1);
  ck_assert_int_eq(run_processes(&id, 1, process_sizes[_i]), 0);
}
END_TEST

/* ---- NCCL_COMM_ID, several roots, several communicators ---------------------------------- */

static int free_port(void) {
  struct braid_socket l;
  union braid_sockaddr lo;
  ck_assert_int_eq(braid_socket_addr_from_string("127.0.0.1:0", &lo), ncclSuccess);
  ck_assert_int_eq(braid_socket_listen(&l, &lo), ncclSuccess);
  int port = braid_socket_addr_port(&l.addr);
  braid_socket_close(&l);
  return port;
}

START_TEST(test_comm_id) {
  char value[64];
  ncclUniqueId id;
  snprintf(value, sizeof(value), "127.0.0.1:%d", free_port());
  env_set("NCCL_COMM_ID", value);
  env_set("NCCL_SOCKET_RETRY_SLEEP_MSEC", "20");
  ck_assert_int_eq(braid_bootstrap_get_unique_id(&id), ncclSuccess);
  uint64_t secret;
  memcpy(&secret, id.internal, sizeof(secret));
  ck_assert(secret == BRAID_BOOTSTRAP_COMM_ID_MAGIC);
  /* twice on the same address: the first root is gone by the time rank 0 starts the second */
  run_threads(&id, 1, 4, 1);
  run_threads(&id, 1, 3, 1);
  ck_assert_int_eq(run_processes(&id, 1, 4), 0);
  env_set("NCCL_COMM_ID", "127.0.0.1");
  ck_assert_int_eq(braid_bootstrap_get_unique_id(&id), ncclInvalidArgument);
  env_set("NCCL_COMM_ID", NULL);
  env_set("NCCL_SOCKET_RETRY_SLEEP_MSEC", NULL);
}
END_TEST

START_TEST(test_scalable) {
  ncclUniqueId ids[3];
  make_ids(ids, 3);
  run_threads(ids, 2, 5, 1);
  make_ids(ids, 3);
  run_threads(ids, 3, 8, 1);
  make_ids(ids, 3);
  run_threads(ids, 3, 3, 1); /* one rank per root */
  make_ids(ids, 2);
  ck_assert_int_eq(run_processes(ids, 2, 4), 0);
}
END_TEST

/* Three communicators of four ranks at once in one process. */
START_TEST(test_concurrent_comms) {
  enum { C = 3, N = 4 };
  ncclUniqueId ids[C];
  struct job jobs[C * N];
  pthread_t threads[C * N];
  make_ids(ids, C);
  for (int c = 0; c < C; c++)
    for (int i = 0; i < N; i++)
      jobs[c * N + i] = (struct job){.ids = &ids[c], .nids = 1, .rank = i, .nranks = N, .ops = 1};
  jobs_start(jobs, threads, C * N);
  jobs_join(threads, C * N);
  for (int i = 0; i < C * N; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
}
END_TEST

/* ---- split ---------------------------------------------------------------------------------- */

struct split_job {
  struct braid_bootstrap* parent;
  int rank, nranks;
  const int* parent_ranks;
  uint64_t tag;
  ncclResult_t res;
};

static void* split_main(void* arg) {
  struct split_job* s = arg;
  struct braid_bootstrap* child;
  s->res = braid_bootstrap_split(s->parent, s->rank, s->nranks, s->parent_ranks, s->tag, &child);
  if (s->res != ncclSuccess) return NULL;
  if (braid_bootstrap_rank(child) != s->rank || braid_bootstrap_nranks(child) != s->nranks) s->res = ncclInternalError;
  if (s->res == ncclSuccess) s->res = rank_ops(child);
  braid_bootstrap_close(child);
  return NULL;
}

/* Eight ranks; evens and odds split at once (two tags); then three ranks in a new order. */
START_TEST(test_split) {
  enum { N = 8 };
  ncclUniqueId id;
  struct job jobs[N];
  pthread_t threads[N];
  struct split_job sj[N];
  make_ids(&id, 1);
  for (int i = 0; i < N; i++) jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = N, .keep = 1};
  jobs_start(jobs, threads, N);
  jobs_join(threads, N);
  for (int i = 0; i < N; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
  static const int evens[] = {0, 2, 4, 6}, odds[] = {7, 5, 3, 1}, three[] = {5, 0, 3};
  for (int i = 0; i < N; i++) {
    const int* pr = i % 2 ? odds : evens;
    int r = 0;
    while (pr[r] != i) r++;
    sj[i] = (struct split_job){jobs[i].bs, r, 4, pr, (uint64_t)(i % 2) + 100, ncclInternalError};
  }
  for (int i = 0; i < N; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, split_main, &sj[i]), 0);
  jobs_join(threads, N);
  for (int i = 0; i < N; i++) ck_assert_int_eq(sj[i].res, ncclSuccess);
  for (int k = 0; k < 3; k++) sj[k] = (struct split_job){jobs[three[k]].bs, k, 3, three, 7, ncclInternalError};
  for (int k = 0; k < 3; k++) ck_assert_int_eq(pthread_create(&threads[k], NULL, split_main, &sj[k]), 0);
  jobs_join(threads, 3);
  for (int k = 0; k < 3; k++) ck_assert_int_eq(sj[k].res, ncclSuccess);
  /* bad arguments: this rank is not parent_ranks[rank]; repeated parent rank */
  struct braid_bootstrap* child;
  static const int rep[] = {0, 0};
  ck_assert_int_eq(braid_bootstrap_split(jobs[1].bs, 0, 3, three, 9, &child), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_split(jobs[0].bs, 0, 2, rep, 9, &child), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_split(NULL, 0, 2, rep, 9, &child), ncclInvalidArgument);
  for (int i = 0; i < N; i++) braid_bootstrap_close(jobs[i].bs);
}
END_TEST

/* ---- strangers ---------------------------------------------------------------------------- */

enum stranger_kind { GARBAGE, WRONG_SECRET, SILENT, SHORT, MALFORMED_HELLO };

/* Connects to addr and misbehaves; the socket stays open until stranger_close. */
static void stranger_open(struct braid_socket* s, const union braid_sockaddr* addr, enum stranger_kind kind,
                          uint64_t secret) {
  unsigned char junk[700];
  for (size_t i = 0; i < sizeof(junk); i++) junk[i] = (unsigned char)(i * 131 + 17);
  ck_assert_int_eq(braid_socket_connect(s, addr, 0, NULL, braid_socket_deadline_ms(5000)), ncclSuccess);
  struct braid_socket_handshake hs = {secret + 1, BRAID_SOCKET_TYPE_BOOTSTRAP, 1};
  switch (kind) {
    case GARBAGE:
      (void)braid_socket_send(s, junk, sizeof(junk), NULL, braid_socket_deadline_ms(2000));
      break;
    case WRONG_SECRET:
      (void)braid_socket_send(s, &hs, sizeof(hs), NULL, braid_socket_deadline_ms(2000));
      (void)braid_socket_send(s, junk, sizeof(junk), NULL, braid_socket_deadline_ms(2000));
      break;
    case SILENT:
      break;
    case SHORT:
      (void)braid_socket_send(s, junk, 5, NULL, braid_socket_deadline_ms(2000));
      break;
    case MALFORMED_HELLO: { /* the right secret, then a hello no rank could send */
      struct bs_up up;
      memset(&up, 0, sizeof(up));
      up.what = BS_UP_HELLO;
      up.hello.rank = 3;
      up.hello.nranks = 2;
      hs.secret = secret;
      hs.arg = BS_CONN_RANK;
      (void)braid_socket_send(s, &hs, sizeof(hs), NULL, braid_socket_deadline_ms(2000));
      (void)braid_socket_send(s, &up, sizeof(up), NULL, braid_socket_deadline_ms(2000));
      break;
    }
  }
}

START_TEST(test_stranger_at_root) {
  enum { N = 4, S = 5 };
  ncclUniqueId id;
  uint64_t secret;
  union braid_sockaddr root;
  struct braid_socket strangers[S];
  make_ids(&id, 1);
  memcpy(&secret, id.internal, sizeof(secret));
  memcpy(&root, id.internal + sizeof(secret), sizeof(root));
  for (int k = 0; k < S; k++) stranger_open(&strangers[k], &root, (enum stranger_kind)k, secret);
  run_threads(&id, 1, N, 1); /* the silent one is still connected: nobody waits for it */
  for (int k = 0; k < S; k++) braid_socket_close(&strangers[k]);
}
END_TEST

/* Strangers on rank 1's listener between init and the operations, and during a split. */
START_TEST(test_stranger_at_rank) {
  enum { N = 4, S = 5 };
  ncclUniqueId id;
  struct job jobs[N];
  pthread_t threads[N];
  pthread_barrier_t pause;
  struct braid_socket strangers[S];
  make_ids(&id, 1);
  pthread_barrier_init(&pause, NULL, N + 1);
  for (int i = 0; i < N; i++)
    jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = N, .ops = 1, .pause = &pause, .keep = 1};
  jobs_start(jobs, threads, N);
  pthread_barrier_wait(&pause);
  for (int i = 0; i < N; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
  const union braid_sockaddr* target = braid_bootstrap_peer_addr(jobs[0].bs, 1);
  ck_assert_ptr_nonnull(target);
  uint64_t secret = braid_bootstrap_secret(jobs[0].bs);
  for (int k = 0; k < S; k++) stranger_open(&strangers[k], target, (enum stranger_kind)k, secret);
  jobs_join(threads, N);
  for (int i = 0; i < N; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
  /* a split (a child init) while the silent stranger still sits on rank 1's port */
  static const int all[] = {0, 1, 2, 3};
  struct split_job sj[N];
  for (int i = 0; i < N; i++) sj[i] = (struct split_job){jobs[i].bs, i, N, all, 1, ncclInternalError};
  for (int i = 0; i < N; i++) ck_assert_int_eq(pthread_create(&threads[i], NULL, split_main, &sj[i]), 0);
  jobs_join(threads, N);
  for (int i = 0; i < N; i++) ck_assert_int_eq(sj[i].res, ncclSuccess);
  for (int k = 0; k < S; k++) braid_socket_close(&strangers[k]);
  for (int i = 0; i < N; i++) braid_bootstrap_close(jobs[i].bs);
  pthread_barrier_destroy(&pause);
}
END_TEST

/* ---- failures ----------------------------------------------------------------------------- */

static volatile uint32_t abort_flag;

/* Rank 3 of 4 never comes; the others are aborted from this thread. */
START_TEST(test_abort_missing_rank) {
  enum { N = 4 };
  ncclUniqueId id;
  struct job jobs[N - 1];
  pthread_t threads[N - 1];
  int fds = count_dir("/proc/self/fd"), tasks = count_dir("/proc/self/task");
  make_ids(&id, 1);
  abort_flag = 0;
  for (int i = 0; i < N - 1; i++)
    jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = N, .abort_flag = &abort_flag};
  jobs_start(jobs, threads, N - 1);
  usleep(300 * 1000);
  __atomic_store_n(&abort_flag, 1, __ATOMIC_RELEASE);
  jobs_join(threads, N - 1);
  for (int i = 0; i < N - 1; i++) ck_assert_int_eq(jobs[i].res, ncclInvalidUsage);
  expect_counts(fds, tasks);
}
END_TEST

START_TEST(test_timeout_names_missing_rank) {
  enum { N = 4 };
  ncclUniqueId id;
  struct job jobs[N];
  pthread_t threads[N];
  int fds = count_dir("/proc/self/fd"), tasks = count_dir("/proc/self/task");
  env_set("BRAID_INIT_TIMEOUT", "2");
  make_ids(&id, 1);
  int n = 0;
  for (int i = 0; i < N; i++)
    if (i != 2) jobs[n++] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = N};
  jobs_start(jobs, threads, n);
  jobs_join(threads, n);
  for (int i = 0; i < n; i++) ck_assert_int_eq(jobs[i].res, ncclRemoteError);
  const char* err = braid_debug_last_error();
  ck_assert_msg(strstr(err, "timeout after 2 s waiting for rank 2 of 4") != NULL, "last error: %s", err);
  expect_counts(fds, tasks);
  env_set("BRAID_INIT_TIMEOUT", NULL);
}
END_TEST

/* Two roots; ranks 1 and 2 (one per root) missing: root 0 still names both. */
START_TEST(test_timeout_scalable) {
  enum { N = 4 };
  ncclUniqueId ids[2];
  struct job jobs[N];
  pthread_t threads[N];
  env_set("BRAID_INIT_TIMEOUT", "2");
  make_ids(ids, 2);
  int n = 0;
  for (int i = 0; i < N; i++)
    if (i != 1 && i != 2) jobs[n++] = (struct job){.ids = ids, .nids = 2, .rank = i, .nranks = N};
  jobs_start(jobs, threads, n);
  jobs_join(threads, n);
  for (int i = 0; i < n; i++) ck_assert_int_eq(jobs[i].res, ncclRemoteError);
  const char* err = braid_debug_last_error();
  ck_assert_msg(strstr(err, "waiting for ranks 1,2 of 4") != NULL, "last error: %s", err);
  env_set("BRAID_INIT_TIMEOUT", NULL);
}
END_TEST

/* Ranks that disagree: a rank twice, or two values of nranks. */
START_TEST(test_mismatch) {
  ncclUniqueId id;
  struct job jobs[3];
  pthread_t threads[3];
  int fds = count_dir("/proc/self/fd"), tasks = count_dir("/proc/self/task");
  make_ids(&id, 1);
  for (int i = 0; i < 3; i++) jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i < 2 ? i : 1, .nranks = 3};
  jobs_start(jobs, threads, 3);
  jobs_join(threads, 3);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(jobs[i].res, ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "rank 1 joined twice"));
  make_ids(&id, 1);
  jobs[0] = (struct job){.ids = &id, .nids = 1, .rank = 0, .nranks = 2};
  jobs[1] = (struct job){.ids = &id, .nids = 1, .rank = 1, .nranks = 3};
  jobs_start(jobs, threads, 2);
  jobs_join(threads, 2);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(jobs[i].res, ncclInvalidUsage);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "with nranks"));
  expect_counts(fds, tasks);
}
END_TEST

/* Rank 2 of 4 dies while the others wait for it in a recv. Rank 3 has its ring connection
 * (it closes), rank 1 has a connection to it (it closes), rank 0 has none (it connects after
 * a while and is refused). All get ncclRemoteError naming rank 2. */
START_TEST(test_peer_killed) {
  enum { N = 4 };
  ncclUniqueId id;
  pid_t pids[N];
  make_ids(&id, 1);
  for (int i = 0; i < N; i++) {
    pids[i] = fork();
    ck_assert_int_ge(pids[i], 0);
    if (pids[i] != 0) continue;
    struct braid_bootstrap* bs;
    ncclResult_t res = braid_bootstrap_init(&id, 1, i, N, NULL, &bs);
    if (res != ncclSuccess) _exit(100 + res);
    if (i == 2) {
      usleep(300 * 1000);
      raise(SIGKILL);
    }
    int v;
    res = braid_bootstrap_recv(bs, 2, 5, &v, sizeof(v));
    if (res != ncclRemoteError) _exit(50 + res);
    const char* err = braid_debug_last_error();
    int named = strstr(err, "rank 2 (host ") != NULL;
    int closed = strstr(err, "closed the connection") != NULL, refused = strstr(err, "refused the connection") != NULL;
    _exit(named && (i == 0 ? refused : closed) ? 0 : 99);
  }
  for (int i = 0; i < N; i++) {
    int status;
    ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
    if (i == 2)
      ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else
      ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "rank %d: status %d", i, status);
  }
}
END_TEST

struct waiter {
  struct braid_bootstrap* bs;
  ncclResult_t res;
};
static void* wait_recv(void* arg) {
  struct waiter* w = arg;
  int v;
  w->res = braid_bootstrap_recv(w->bs, 1, 77, &v, sizeof(v));
  return NULL;
}

/* braid_bootstrap_abort wakes a recv on another thread; bad arguments; size mismatch. */
START_TEST(test_abort_recv_and_args) {
  enum { N = 2 };
  ncclUniqueId id;
  struct job jobs[N];
  pthread_t threads[N], t;
  make_ids(&id, 1);
  for (int i = 0; i < N; i++) jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = N, .keep = 1};
  jobs_start(jobs, threads, N);
  jobs_join(threads, N);
  for (int i = 0; i < N; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
  struct braid_bootstrap *a = jobs[0].bs, *b = jobs[1].bs;
  int v = 5;
  long long w = 0;
  ck_assert_int_eq(braid_bootstrap_send(a, 2, 0, &v, sizeof(v)), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_send(a, -1, 0, &v, sizeof(v)), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_recv(a, 1, 0, NULL, 4), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_allgather(NULL, &v, 4), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_send(b, 0, 9, &v, sizeof(v)), ncclSuccess);
  ck_assert_int_eq(braid_bootstrap_recv(a, 1, 9, &w, sizeof(w)), ncclInvalidUsage); /* 4 bytes sent, 8 expected */
  struct waiter wt = {a, ncclSuccess};
  ck_assert_int_eq(pthread_create(&t, NULL, wait_recv, &wt), 0);
  usleep(200 * 1000);
  braid_bootstrap_abort(a);
  pthread_join(t, NULL);
  ck_assert_int_eq(wt.res, ncclInvalidUsage);
  braid_bootstrap_close(a);
  braid_bootstrap_close(b);
  /* init arguments */
  struct braid_bootstrap* bs;
  ncclUniqueId zero;
  memset(&zero, 0, sizeof(zero));
  ck_assert_int_eq(braid_bootstrap_init(NULL, 1, 0, 1, NULL, &bs), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_init(&id, 1, 2, 2, NULL, &bs), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_init(&id, 3, 0, 2, NULL, &bs), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_init(&zero, 1, 0, 1, NULL, &bs), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_get_unique_id(NULL), ncclInvalidArgument);
}
END_TEST

/* Two threads of each of two ranks exchange messages at once; both ranks send 8 MiB to each
 * other before either receives (a send that waits keeps receiving). */
struct chatter {
  struct braid_bootstrap* bs;
  int peer;
  uint64_t tag0;
  ncclResult_t res;
};
static void* chatter_main(void* arg) {
  struct chatter* c = arg;
  c->res = ncclSuccess;
  for (int k = 0; k < 200 && c->res == ncclSuccess; k++) {
    int v = k;
    c->res = braid_bootstrap_send(c->bs, c->peer, c->tag0 + (uint64_t)k, &v, sizeof(v));
    if (c->res == ncclSuccess) c->res = braid_bootstrap_recv(c->bs, c->peer, c->tag0 + (uint64_t)k, &v, sizeof(v));
    if (c->res == ncclSuccess && v != k) c->res = ncclInternalError;
  }
  return NULL;
}
struct bigx {
  struct braid_bootstrap* bs;
  int peer;
  ncclResult_t res;
};
static void* bigx_main(void* arg) {
  struct bigx* x = arg;
  size_t n = 8 << 20;
  char* out = malloc(n);
  char* in = malloc(n);
  memset(out, x->peer + 'a', n);
  x->res = braid_bootstrap_send(x->bs, x->peer, 1, out, n);
  if (x->res == ncclSuccess) x->res = braid_bootstrap_recv(x->bs, x->peer, 1, in, n);
  if (x->res == ncclSuccess && (in[0] != 1 - x->peer + 'a' || in[n - 1] != 1 - x->peer + 'a'))
    x->res = ncclInternalError;
  free(out);
  free(in);
  return NULL;
}

START_TEST(test_threads_share_a_bootstrap) {
  ncclUniqueId id;
  struct job jobs[2];
  pthread_t threads[4];
  make_ids(&id, 1);
  for (int i = 0; i < 2; i++) jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = 2, .keep = 1};
  jobs_start(jobs, threads, 2);
  jobs_join(threads, 2);
  struct chatter c[4];
  for (int k = 0; k < 4; k++)
    c[k] = (struct chatter){jobs[k % 2].bs, 1 - k % 2, (uint64_t)(k / 2) * 1000, ncclInternalError};
  for (int k = 0; k < 4; k++) ck_assert_int_eq(pthread_create(&threads[k], NULL, chatter_main, &c[k]), 0);
  jobs_join(threads, 4);
  for (int k = 0; k < 4; k++) ck_assert_int_eq(c[k].res, ncclSuccess);
  struct bigx x[2] = {{jobs[0].bs, 1, ncclInternalError}, {jobs[1].bs, 0, ncclInternalError}};
  for (int k = 0; k < 2; k++) ck_assert_int_eq(pthread_create(&threads[k], NULL, bigx_main, &x[k]), 0);
  jobs_join(threads, 2);
  for (int k = 0; k < 2; k++) ck_assert_int_eq(x[k].res, ncclSuccess);
  braid_bootstrap_close(jobs[0].bs);
  braid_bootstrap_close(jobs[1].bs);
}
END_TEST

/* 100 init/close cycles leave no fd and no thread behind. */
START_TEST(test_no_leaks) {
  ncclUniqueId id;
  make_ids(&id, 1);
  run_threads(&id, 1, 4, 0); /* warm up: logger, parameters */
  int fds = -1, tasks = -1;
  for (int i = 0; i < 200 && (fds != count_dir("/proc/self/fd") || tasks != count_dir("/proc/self/task")); i++) {
    fds = count_dir("/proc/self/fd");
    tasks = count_dir("/proc/self/task");
    usleep(20 * 1000);
  }
  for (int k = 0; k < 100; k++) {
    make_ids(&id, 1);
    run_threads(&id, 1, 4, 0);
  }
  expect_counts(fds, tasks);
}
END_TEST

/* NCCL_SOCKET_IFNAME: an interface that does not exist fails at once; lo and =lo work. */
START_TEST(test_ifname) {
  ncclUniqueId id, good;
  struct braid_bootstrap* bs;
  make_ids(&good, 1);
  env_set("NCCL_SOCKET_IFNAME", "nosuchif");
  ck_assert_int_eq(braid_bootstrap_get_unique_id(&id), ncclInvalidArgument);
  ck_assert_int_eq(braid_bootstrap_init(&good, 1, 0, 1, NULL, &bs), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(braid_debug_last_error(), "NCCL_SOCKET_IFNAME=nosuchif"));
  env_set("NCCL_SOCKET_IFNAME", NULL);
  run_threads(&good, 1, 1, 0); /* the root of `good` waits for its one rank */
  static const char* lists[] = {"lo", "=lo"};
  for (int k = 0; k < 2; k++) {
    char buf[BRAID_SOCKET_ADDR_STR_MAX];
    env_set("NCCL_SOCKET_IFNAME", lists[k]);
    make_ids(&id, 1);
    struct job jobs[3];
    pthread_t threads[3];
    for (int i = 0; i < 3; i++)
      jobs[i] = (struct job){.ids = &id, .nids = 1, .rank = i, .nranks = 3, .ops = 1, .keep = 1};
    jobs_start(jobs, threads, 3);
    jobs_join(threads, 3);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(jobs[i].res, ncclSuccess);
    braid_socket_addr_str(braid_bootstrap_peer_addr(jobs[0].bs, 2), buf);
    ck_assert_msg(strncmp(buf, "127.0.0.1<", 10) == 0, "rank 2 at %s", buf);
    for (int i = 0; i < 3; i++) braid_bootstrap_close(jobs[i].bs);
  }
  env_set("NCCL_SOCKET_IFNAME", NULL);
}
END_TEST

Suite* bootstrap_suite(void);
Suite* bootstrap_suite(void) {
  Suite* s = suite_create("bootstrap");
  TCase* tc = tcase_create("ranks");
  tcase_set_timeout(tc, 60);
  tcase_add_loop_test(tc, test_threads, 0, sizeof(thread_sizes) / sizeof(thread_sizes[0]));
  tcase_add_loop_test(tc, test_processes, 0, sizeof(process_sizes) / sizeof(process_sizes[0]));
  tcase_add_test(tc, test_comm_id);
  tcase_add_test(tc, test_scalable);
  tcase_add_test(tc, test_concurrent_comms);
  tcase_add_test(tc, test_split);
  tcase_add_test(tc, test_threads_share_a_bootstrap);
  suite_add_tcase(s, tc);
  tc = tcase_create("failures");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_stranger_at_root);
  tcase_add_test(tc, test_stranger_at_rank);
  tcase_add_test(tc, test_abort_missing_rank);
  tcase_add_test(tc, test_timeout_names_missing_rank);
  tcase_add_test(tc, test_timeout_scalable);
  tcase_add_test(tc, test_mismatch);
  tcase_add_test(tc, test_peer_killed);
  tcase_add_test(tc, test_abort_recv_and_args);
  tcase_add_test(tc, test_ifname);
  suite_add_tcase(s, tc);
  tc = tcase_create("leaks");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_no_leaks);
  suite_add_tcase(s, tc);
  return s;
}
