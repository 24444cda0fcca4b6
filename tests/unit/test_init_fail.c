/*
 * test_init_fail.c - the communicator lifecycle when things go wrong (the working cases are in
 * test_init.c):
 *   - ncclCommAbort from another thread while init waits for a rank that never comes
 *     (non-blocking init, and blocking init through the handle ncclCommInitRank writes first);
 *   - strangers on the bootstrap ports while init runs: garbage, silence, a forged handshake
 *     with a wrong secret, a right secret with a malformed hello — init still completes;
 *   - BRAID_INIT_TIMEOUT with a rank that never calls init: an error naming that rank;
 *   - bad input to init: NULL pointers, nranks, rank out of range, duplicate ranks, mismatched
 *     nranks, a config that was not initialised, corrupted unique ids.
 * Misuse of communicators that exist (destroyed, finalized twice, bad split arguments) is in
 * test_init.c.
 * Every wait is bounded by BRAID_INIT_TIMEOUT or the harness; a hang fails by the TCase
 * timeout. Nothing asserts on time; durations are only printed.
 */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/socket.h" /* struct braid_socket_handshake: to forge one */
#include "harness.h"
#include "nccl.h"

#define HARNESS_TIMEOUT_S 60
#define TCASE_TIMEOUT_S 120

/* The last error mentions `word` (the library must name the problem). */
#define ASSERT_LAST_ERROR_HAS(word)                                                                      \
  do {                                                                                                   \
    const char* e_ = ncclGetLastError(NULL);                                                             \
    ck_assert_msg(e_ != NULL && strstr(e_, (word)) != NULL, "last error \"%s\" does not mention \"%s\"", \
                  e_ ? e_ : "(null)", (word));                                                           \
  } while (0)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sets a parameter for this test process (Check forks one per test) and re-reads them all. */
static void set_param(const char* name, const char* value) {
  setenv(name, value, 1);
  ncclResetDebugInit();
}

static int allreduce_ok(ncclComm_t comm, int mine, int expected) {
  int recv = -12345;
  return ncclAllReduce(&mine, &recv, 1, ncclInt32, ncclSum, comm, NULL) == ncclSuccess && recv == expected;
}

/* Waits (bounded) until this process has at most `fds0` descriptors and `threads0` threads:
 * threads that are done (a bootstrap root whose ranks left) take a moment to disappear. */
static int settle(int fds0, int threads0, int* fds_p, int* threads_p) {
  for (int i = 0; i < 1000; i++) {
    *fds_p = harness_count_fds();
    *threads_p = harness_count_threads();
    if (*fds_p <= fds0 && *threads_p <= threads0) return 1;
    usleep(10000);
  }
  return 0;
}

#define ASSERT_SETTLED(fds0, threads0)                                                                                \
  do {                                                                                                                \
    int fds_, threads_;                                                                                               \
    ck_assert_msg(settle((fds0), (threads0), &fds_, &threads_), "leaked: %d fds (was %d), %d threads (was %d)", fds_, \
                  (fds0), threads_, (threads0));                                                                      \
  } while (0)

/* ---- abort while a rank is missing ---------------------------------------------------------- */

struct abort_ctx {
  ncclUniqueId id;
  ncclComm_t volatile handle; /* written by ncclCommInitRank before it waits */
  ncclResult_t init_res, abort_res;
  double abort_s;
};

static void* abort_thread(void* p) {
  struct abort_ctx* a = p;
  double t0 = now_s();
  a->abort_res = ncclCommAbort(a->handle);
  a->abort_s = now_s() - t0;
  return NULL;
}

/* Non-blocking: rank 0 of 2 alone; the init cannot complete (rank 1 never comes), then another
 * thread aborts it. */
START_TEST(test_abort_nonblocking_init) {
  struct abort_ctx a;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = NULL;
  pthread_t th;
  ncclResult_t state = ncclSuccess;
  memset(&a, 0, sizeof(a));
  config.blocking = 0;
  int fds0 = harness_count_fds(), threads0 = harness_count_threads();
  ck_assert_int_eq(ncclGetUniqueId(&a.id), ncclSuccess);
  ncclResult_t res = ncclCommInitRankConfig(&comm, 2, a.id, 0, &config);
  ck_assert_msg(res == ncclInProgress, "non-blocking init with a missing rank returned %d", (int)res);
  ck_assert_ptr_nonnull(comm);
  usleep(250 * 1000); /* off the 100 ms poll slices, so the abort has something to interrupt */
  ck_assert_int_eq(ncclCommGetAsyncError(comm, &state), ncclSuccess);
  ck_assert_int_eq(state, ncclInProgress); /* rank 1 is missing: it cannot have finished */
  a.handle = comm;
  ck_assert_int_eq(pthread_create(&th, NULL, abort_thread, &a), 0);
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  fprintf(stderr, "abort of a non-blocking init waiting for a rank took %.3f s\n", a.abort_s);
  ck_assert_int_eq(a.abort_res, ncclSuccess);
  /* The handle is gone: the registry of live communicators refuses it. */
  int count;
  ck_assert_int_eq(ncclCommCount(comm, &count), ncclInvalidArgument);
  ASSERT_SETTLED(fds0, threads0); /* the root, too, gave up once rank 0 left */
}
END_TEST

static void* blocking_init_thread(void* p) {
  struct abort_ctx* a = p;
  a->init_res = ncclCommInitRank((ncclComm_t*)&a->handle, 2, a->id, 0);
  return NULL;
}

/* Blocking: ncclCommInitRank writes the handle before it waits for the other ranks (as NCCL
 * does; src/core/init_api.c), so this thread can read it and abort the init from outside. */
START_TEST(test_abort_blocking_init) {
  struct abort_ctx a;
  pthread_t th;
  memset(&a, 0, sizeof(a));
  a.init_res = ncclInternalError;
  int fds0 = harness_count_fds(), threads0 = harness_count_threads();
  ck_assert_int_eq(ncclGetUniqueId(&a.id), ncclSuccess);
  ck_assert_int_eq(pthread_create(&th, NULL, blocking_init_thread, &a), 0);
  while (a.handle == NULL) usleep(1000); /* bounded by the TCase timeout */
  ncclComm_t comm = a.handle;
  usleep(250 * 1000); /* off the 100 ms poll slices, so the abort has something to interrupt */
  double t0 = now_s();
  a.abort_res = ncclCommAbort(comm);
  a.abort_s = now_s() - t0;
  ck_assert_int_eq(pthread_join(th, NULL), 0);
  fprintf(stderr, "abort of a blocking init waiting for a rank took %.3f s; init returned %d (%s)\n", a.abort_s,
          (int)a.init_res, ncclGetLastError(NULL));
  ck_assert_int_eq(a.abort_res, ncclSuccess);
  ck_assert_msg(a.init_res != ncclSuccess && a.init_res != ncclInProgress, "the aborted init returned %d",
                (int)a.init_res);
  int count;
  ck_assert_int_eq(ncclCommCount(comm, &count), ncclInvalidArgument);
  ASSERT_SETTLED(fds0, threads0);
}
END_TEST

/* ---- strangers on the bootstrap ports -------------------------------------------------------- */

/* What the bootstrap expects first on a connection (src/bootstrap/bootstrap_root.c, src/bootstrap/bootstrap.c):
 * struct braid_socket_handshake {secret, type, arg}; to the root arg is BS_CONN_RANK (1) and a
 * bs_up follows, to a rank arg is BS_CONN_PEER (3) and {rank, nranks} follow. */
struct forged_hello {
  uint64_t secret;
  int32_t type, arg;
  int32_t rank, nranks;
  char rest[4096]; /* zeros: more than any hello */
};
_Static_assert(offsetof(struct forged_hello, rank) == sizeof(struct braid_socket_handshake), "handshake layout");
#define FORGED_CONN_RANK 1
#define FORGED_CONN_PEER 3

#define MAX_HELD 64

struct stranger {
  int held[MAX_HELD]; /* connections kept open (silent or half-sent) until the end */
  int nheld;
  int nlisteners;
};

static uint64_t id_secret(const ncclUniqueId* id) {
  uint64_t s;
  memcpy(&s, id->internal, sizeof(s));
  return s;
}

/* The root's address: the id's bytes 8.. hold a sockaddr_in or sockaddr_in6. */
static int id_root_addr(const ncclUniqueId* id, struct sockaddr_storage* ss, socklen_t* len) {
  memset(ss, 0, sizeof(*ss));
  memcpy(ss, id->internal + 8, sizeof(struct sockaddr_in6));
  if (ss->ss_family == AF_INET)
    *len = sizeof(struct sockaddr_in);
  else if (ss->ss_family == AF_INET6)
    *len = sizeof(struct sockaddr_in6);
  else
    return -1;
  return 0;
}

static int stranger_connect(const struct sockaddr_storage* ss, socklen_t len) {
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (const struct sockaddr*)ss, len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void stranger_hold(struct stranger* st, int fd) {
  if (st->nheld < MAX_HELD)
    st->held[st->nheld++] = fd;
  else
    close(fd);
}

/* Every kind of unwelcome visitor, at one listening address. `kind`: the arg a real connector
 * would send there. */
static void stranger_visit(struct stranger* st, const struct sockaddr_storage* ss, socklen_t len, uint64_t secret,
                           int kind) {
  unsigned char garbage[4096];
  struct forged_hello f;
  unsigned x = 12345;
  for (size_t i = 0; i < sizeof(garbage); i++) garbage[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 16);
  int fd = stranger_connect(ss, len); /* a little garbage, then gone */
  if (fd >= 0) {
    (void)!write(fd, garbage, 64);
    close(fd);
  }
  fd = stranger_connect(ss, len); /* more garbage than any handshake, connection kept */
  if (fd >= 0) {
    (void)!write(fd, garbage, sizeof(garbage));
    stranger_hold(st, fd);
  }
  fd = stranger_connect(ss, len); /* silence */
  if (fd >= 0) stranger_hold(st, fd);
  memset(&f, 0, sizeof(f)); /* a well-formed handshake with the wrong secret */
  f.secret = secret ^ 0x5a5a5a5a5a5a5a5aULL;
  f.type = BRAID_SOCKET_TYPE_BOOTSTRAP;
  f.arg = kind;
  f.rank = 0;
  f.nranks = 3;
  fd = stranger_connect(ss, len);
  if (fd >= 0) {
    (void)!write(fd, &f, sizeof(f));
    stranger_hold(st, fd);
  }
  f.secret = secret; /* the right secret, a hello no rank would send */
  f.rank = 77;
  fd = stranger_connect(ss, len);
  if (fd >= 0) {
    (void)!write(fd, &f, sizeof(f));
    stranger_hold(st, fd);
  }
}

/* TCP sockets of this process in LISTEN state (from /proc/self/fd and /proc/net/tcp{,6}). */
static int find_listeners(struct sockaddr_storage* out, socklen_t* lens, int max) {
  unsigned long inodes[256];
  int ninodes = 0, n = 0;
  DIR* d = opendir("/proc/self/fd");
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL && ninodes < 256) {
    char path[300], link[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t k = readlink(path, link, sizeof(link) - 1);
    if (k <= 0) continue;
    link[k] = '\0';
    if (sscanf(link, "socket:[%lu]", &inodes[ninodes]) == 1) ninodes++;
  }
  if (d != NULL) closedir(d);
  for (int v6 = 0; v6 < 2; v6++) {
    FILE* f = fopen(v6 ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
    char line[512];
    if (f == NULL) continue;
    if (fgets(line, sizeof(line), f) == NULL) line[0] = '\0'; /* header */
    while (fgets(line, sizeof(line), f) != NULL && n < max) {
      char local[64];
      unsigned state, port;
      unsigned long inode;
      if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*s %x %*s %*s %*s %*s %*s %lu", local, &port, &state, &inode) != 4)
        continue;
      int mine = 0;
      for (int i = 0; i < ninodes; i++) mine |= inodes[i] == inode;
      if (state != 0x0A || !mine) continue;
      memset(&out[n], 0, sizeof(out[n]));
      if (!v6) {
        struct sockaddr_in* sin = (struct sockaddr_in*)&out[n];
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        sin->sin_addr.s_addr = (uint32_t)strtoul(local, NULL, 16); /* the kernel prints the raw word */
        if (sin->sin_addr.s_addr == INADDR_ANY) sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        lens[n++] = sizeof(*sin);
      } else {
        struct sockaddr_in6* sin6 = (struct sockaddr_in6*)&out[n];
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        for (int w = 0; w < 4; w++) {
          char word[9];
          memcpy(word, local + 8 * w, 8);
          word[8] = '\0';
          uint32_t v = (uint32_t)strtoul(word, NULL, 16);
          memcpy(&sin6->sin6_addr.s6_addr[4 * w], &v, 4);
        }
        if (IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr)) sin6->sin6_addr = in6addr_loopback;
        lens[n++] = sizeof(*sin6);
      }
    }
    fclose(f);
  }
  return n;
}

static int same_addr(const struct sockaddr_storage* a, const struct sockaddr_storage* b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET)
    return memcmp(&((const struct sockaddr_in*)a)->sin_addr, &((const struct sockaddr_in*)b)->sin_addr, 4) == 0 &&
           ((const struct sockaddr_in*)a)->sin_port == ((const struct sockaddr_in*)b)->sin_port;
  return memcmp(&((const struct sockaddr_in6*)a)->sin6_addr, &((const struct sockaddr_in6*)b)->sin6_addr, 16) == 0 &&
         ((const struct sockaddr_in6*)a)->sin6_port == ((const struct sockaddr_in6*)b)->sin6_port;
}

/* The root, then every other listener of this process (the ranks' bootstrap sockets). */
static int stranger_attack(struct stranger* st, const ncclUniqueId* id) {
  struct sockaddr_storage root, ls[32];
  socklen_t root_len, lens[32];
  if (id_root_addr(id, &root, &root_len) != 0) return -1;
  stranger_visit(st, &root, root_len, id_secret(id), FORGED_CONN_RANK);
  int n = find_listeners(ls, lens, 32);
  st->nlisteners = n;
  for (int i = 0; i < n; i++)
    if (!same_addr(&ls[i], &root)) stranger_visit(st, &ls[i], lens[i], id_secret(id), FORGED_CONN_PEER);
  return 0;
}

/* Three ranks as threads; rank 2 comes 300 ms late and first sends strangers to the root and to
 * the listening sockets of ranks 0 and 1; after init it does it again before a split (more
 * bootstrap traffic). The strangers' connections stay open until the end. */
static int body_stranger(struct harness_rank* r) {
  struct stranger* st = r->arg;
  ncclComm_t comm, child;
  if (r->rank == 2) {
    usleep(300 * 1000);
    REXPECT(r, stranger_attack(st, &r->id) == 0, "the unique id holds no root address");
    REXPECT(r, st->nlisteners >= 1, "found no listening socket in this process (the root at least listens)");
  }
  RCHECK(r, ncclCommInitRank(&comm, r->nranks, r->id, r->rank));
  if (r->rank == 2) REXPECT(r, stranger_attack(st, &r->id) == 0, "the unique id holds no root address");
  /* Ranks 0 and 1 cannot leave this before rank 2 is done with its second round. */
  REXPECT(r, allreduce_ok(comm, r->rank, 3), "allreduce after init with strangers failed: %s", ncclGetLastError(NULL));
  RCHECK(r, ncclCommSplit(comm, 0, -r->rank, &child, NULL));
  REXPECT(r, allreduce_ok(child, r->rank, 3), "allreduce on a split child failed: %s", ncclGetLastError(NULL));
  RCHECK(r, ncclCommDestroy(child));
  RCHECK(r, ncclCommDestroy(comm));
  return 0;
}

START_TEST(test_strangers) {
  struct stranger st;
  memset(&st, 0, sizeof(st));
  int failed = harness_run(3, HARNESS_THREADS, body_stranger, &st, HARNESS_TIMEOUT_S);
  fprintf(stderr, "strangers: %d listening sockets found, %d connections held\n", st.nlisteners, st.nheld);
  for (int i = 0; i < st.nheld; i++) close(st.held[i]);
  ck_assert_int_eq(failed, 0);
}
END_TEST

/* ---- init timeout with a rank that never comes ----------------------------------------------- */

static int names_rank_2(const char* e) {
  return strstr(e, "rank 2") != NULL || strstr(e, "ranks 2") != NULL;
}

static int body_missing_rank(struct harness_rank* r) {
  ncclComm_t comm = NULL;
  int fds0 = harness_count_fds(), threads0 = harness_count_threads(), fds, threads;
  if (r->rank == 2) return 0; /* never calls init */
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  const char* e = ncclGetLastError(NULL);
  REXPECT(r, res != ncclSuccess && res != ncclInProgress, "init without rank 2 returned %d", (int)res);
  REXPECT(r, names_rank_2(e), "the last error does not name the missing rank 2: \"%s\"", e);
  REXPECT(r, settle(fds0, threads0, &fds, &threads), "the failed init leaked: %d fds (was %d), %d threads (was %d)",
          fds, fds0, threads, threads0);
  return 0;
}

START_TEST(test_init_timeout) {
  set_param("BRAID_INIT_TIMEOUT", "2");
  ck_assert_int_eq(harness_run(3, HARNESS_PROCS, body_missing_rank, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* Non-blocking: the asynchronous error ends in an error naming the rank, not ncclInProgress. */
START_TEST(test_init_timeout_nonblocking) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclResult_t state = ncclInProgress;
  config.blocking = 0;
  set_param("BRAID_INIT_TIMEOUT", "2");
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ncclResult_t res = ncclCommInitRankConfig(&comm, 3, id, 0, &config);
  ck_assert_msg(res == ncclInProgress, "non-blocking init with missing ranks returned %d", (int)res);
  while (state == ncclInProgress) { /* bounded by BRAID_INIT_TIMEOUT */
    ck_assert_int_eq(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    usleep(1000);
  }
  ck_assert_msg(state != ncclSuccess, "init without ranks 1 and 2 succeeded");
  ck_assert_msg(strstr(ncclGetLastError(NULL), "1,2") != NULL, "the error does not name ranks 1,2: \"%s\"",
                ncclGetLastError(NULL));
  ck_assert_int_eq(ncclCommDestroy(comm), ncclSuccess);
}
END_TEST

/* ---- bad arguments --------------------------------------------------------------------------- */

#define SENTINEL ((ncclComm_t)(uintptr_t)0xbad)

/* The call fails with `expect`, names `word`, and leaves the output untouched. */
static void expect_init_rejected(ncclResult_t got, ncclResult_t expect, ncclComm_t comm, const char* word) {
  ck_assert_msg(got == expect, "returned %d, expected %d (%s)", (int)got, (int)expect, ncclGetLastError(NULL));
  ASSERT_LAST_ERROR_HAS(word);
  ck_assert_msg(comm == SENTINEL, "a rejected init wrote the handle (%p)", (void*)comm);
}

START_TEST(test_bad_init_args) {
  ncclUniqueId id;
  ncclComm_t comm = SENTINEL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  ck_assert_int_eq(ncclGetUniqueId(NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclCommInitRank(NULL, 2, id, 0), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("comm");
  expect_init_rejected(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, comm, "nranks");
  expect_init_rejected(ncclCommInitRank(&comm, -3, id, 0), ncclInvalidArgument, comm, "nranks");
  expect_init_rejected(ncclCommInitRank(&comm, 4, id, -1), ncclInvalidArgument, comm, "rank");
  expect_init_rejected(ncclCommInitRank(&comm, 4, id, 4), ncclInvalidArgument, comm, "rank");
  config.magic = 0x12345678;
  expect_init_rejected(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInvalidArgument, comm, "magic");
  config = (ncclConfig_t)NCCL_CONFIG_INITIALIZER;
  config.blocking = 7;
  expect_init_rejected(ncclCommInitRankConfig(&comm, 2, id, 0, &config), ncclInvalidArgument, comm, "blocking");
  expect_init_rejected(ncclCommInitRankScalable(&comm, 2, 0, 0, &id, NULL), ncclInvalidArgument, comm, "nId");
  expect_init_rejected(ncclCommInitRankScalable(&comm, 2, 0, 1, NULL, NULL), ncclInvalidArgument, comm, "commIds");
  ck_assert_int_eq(ncclCommInitAll(NULL, 2, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("comms");
  ncclComm_t comms[2];
  ck_assert_int_eq(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("ndev");
  int dup[2] = {0, 0};
  ck_assert_int_eq(ncclCommInitAll(comms, 2, dup), ncclInvalidUsage);
  ASSERT_LAST_ERROR_HAS("duplicate");
}
END_TEST

/* Two processes both claim rank 0 of 2: at least one fails, none hangs. */
static int body_duplicate_rank(struct harness_rank* r) {
  ncclResult_t* results = r->arg;
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, 0);
  results[r->rank] = res;
  if (res == ncclSuccess) return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  const char* e = ncclGetLastError(NULL);
  REXPECT(r, strstr(e, "rank") != NULL, "the error for a duplicate rank does not mention it: \"%s\"", e);
  return 0;
}

START_TEST(test_duplicate_rank) {
  set_param("BRAID_INIT_TIMEOUT", "3");
  ncclResult_t* results = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(results, MAP_FAILED);
  results[0] = results[1] = ncclNumResults;
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_duplicate_rank, results, HARNESS_TIMEOUT_S), 0);
  fprintf(stderr, "duplicate rank 0: the two inits returned %d and %d\n", (int)results[0], (int)results[1]);
  ck_assert_msg(results[0] != ncclSuccess || results[1] != ncclSuccess, "both claims of rank 0 succeeded");
  for (int i = 0; i < 2; i++) ck_assert_msg(results[i] != ncclInProgress && results[i] != ncclNumResults, "rank %d", i);
  munmap(results, 4096);
}
END_TEST

/* Rank 0 says 2 ranks, rank 1 says 3: both fail and the error names nranks. */
static int body_nranks_mismatch(struct harness_rank* r) {
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, r->rank == 0 ? 2 : 3, r->id, r->rank);
  REXPECT(r, res != ncclSuccess && res != ncclInProgress, "init with mismatched nranks returned %d", (int)res);
  REXPECT(r, strstr(ncclGetLastError(NULL), "nranks") != NULL, "the error does not mention nranks: \"%s\"",
          ncclGetLastError(NULL));
  return 0;
}

START_TEST(test_nranks_mismatch) {
  set_param("BRAID_INIT_TIMEOUT", "3");
  ck_assert_int_eq(harness_run(2, HARNESS_PROCS, body_nranks_mismatch, NULL, HARNESS_TIMEOUT_S), 0);
}
END_TEST

/* Corrupted ids: random bytes, zeros, a wrong secret for a live root, an address nobody
 * listens on. Each must end in an error (not a hang, not success) that names the root. */
enum { ID_RANDOM, ID_ZERO, ID_WRONG_SECRET, ID_DEAD_ROOT, ID_NCASES };
static const char* const id_case_names[] = {"random bytes", "zeros", "wrong secret", "nobody listening"};

START_TEST(test_corrupt_id) {
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  set_param("BRAID_INIT_TIMEOUT", "2");
  ck_assert_int_eq(ncclGetUniqueId(&id), ncclSuccess);
  int fds0 = harness_count_fds(), threads0 = harness_count_threads(); /* the id's root stays: never used */
  if (_i == ID_RANDOM) {
    unsigned x = 0x1234567u;
    for (size_t i = 0; i < sizeof(id.internal); i++) id.internal[i] = (char)((x = x * 1103515245u + 12345u) >> 16);
  } else if (_i == ID_ZERO) {
    memset(&id, 0, sizeof(id));
  } else if (_i == ID_WRONG_SECRET) {
    id.internal[0] ^= 0x5a;
  } else {
    /* A port that was free a moment ago (bound, then closed). */
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(bind(fd, (struct sockaddr*)&sin, sizeof(sin)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr*)&sin, &len), 0);
    close(fd);
    memset(id.internal + 8, 0, sizeof(id.internal) - 8);
    memcpy(id.internal + 8, &sin, sizeof(sin));
  }
  double t0 = now_s();
  ncclResult_t res = ncclCommInitRank(&comm, 2, id, 0);
  fprintf(stderr, "corrupted id (%s): init returned %d after %.2f s: %s\n", id_case_names[_i], (int)res, now_s() - t0,
          ncclGetLastError(NULL));
  ck_assert_msg(
      res == ncclInvalidArgument || res == ncclInvalidUsage || res == ncclRemoteError || res == ncclSystemError,
      "init with a corrupted id (%s) returned %d", id_case_names[_i], (int)res);
  ck_assert_msg(comm == NULL, "a failed blocking init left a handle behind");
  ASSERT_LAST_ERROR_HAS("root");
  ASSERT_SETTLED(fds0, threads0);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------------- */

static TCase* tcase(Suite* s, const char* name, int timeout_s) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, timeout_s);
  suite_add_tcase(s, tc);
  return tc;
}

Suite* init_fail_suite(void) {
  Suite* s = suite_create("init_fail");
  TCase* tc = tcase(s, "abort", 60);
  tcase_add_test(tc, test_abort_nonblocking_init);
  tcase_add_test(tc, test_abort_blocking_init);
  tc = tcase(s, "strangers", TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_strangers);
  tc = tcase(s, "timeout", TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_init_timeout);
  tcase_add_test(tc, test_init_timeout_nonblocking);
  tcase_add_test(tc, test_duplicate_rank);
  tcase_add_test(tc, test_nranks_mismatch);
  tcase_add_loop_test(tc, test_corrupt_id, 0, ID_NCASES);
  tc = tcase(s, "bad_input", 60);
  tcase_add_test(tc, test_bad_init_args);
  return s;
}
