/*
 * harness.h - run one function on N ranks, as threads of this process, as forked processes,
 * or as processes holding two ranks each (threads), for the multi-rank tests.
 *
 *   static int body(struct harness_rank* r) { ...ncclCommInitRank(&c, r->nranks, r->id, r->rank)...; return 0; }
 *   ck_assert_int_eq(harness_run(4, HARNESS_PROCS, body, NULL, 60), 0);
 *
 * The unique id is created before any rank starts. A rank reports failure by returning
 * non-zero (and printing why with harness_fail); a crashed or hung process counts as failed.
 */
#ifndef BRAID_TEST_HARNESS_H
#define BRAID_TEST_HARNESS_H

#include "nccl.h"

enum harness_mode {
  HARNESS_THREADS = 0, /* every rank a thread of this process */
  HARNESS_PROCS,       /* every rank a forked process */
  HARNESS_PAIRS,       /* processes of two ranks (threads) each */
};

struct harness_rank {
  int rank, nranks;
  ncclUniqueId id;
  void* arg; /* the caller's, shared (threads) or copied by fork (processes) */
};

typedef int (*harness_fn)(struct harness_rank* r);

/* 0 when every rank returned 0; otherwise the number of ranks that failed, crashed or timed
 * out (processes are killed after timeout_s seconds). */
int harness_run(int nranks, enum harness_mode mode, harness_fn fn, void* arg, int timeout_s);

/* Print a failure line naming the rank (stderr), return 1: `return harness_fail(r, "...", ...)`. */
int harness_fail(const struct harness_rank* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* In a rank body: a failed NCCL call fails the rank, naming the call, the result and the
 * library's last message. */
#define RCHECK(r, call)                                                                                            \
  do {                                                                                                             \
    ncclResult_t res_ = (call);                                                                                    \
    if (res_ != ncclSuccess)                                                                                       \
      return harness_fail((r), "%s:%d: %s returned %d (%s); last error: %s", __FILE__, __LINE__, #call, (int)res_, \
                          ncclGetErrorString(res_), ncclGetLastError(NULL));                                       \
  } while (0)

/* In a rank body: fail the rank with a message unless `cond` holds. */
#define REXPECT(r, cond, ...)                           \
  do {                                                  \
    if (!(cond)) return harness_fail((r), __VA_ARGS__); \
  } while (0)

/* Number of open file descriptors and threads of this process (leak checks). */
int harness_count_fds(void);
int harness_count_threads(void);
/* Entries braid-* in /dev/shm made by this process or by processes the harness forked in it
 * (the creator's pid is in the name): other test runs that share /dev/shm do not count. */
int harness_count_shm(void);
/* Lines of the file at path that contain word; -1 when it cannot be read (log checks). */
int harness_count_lines(const char* path, const char* word);

const char* harness_mode_name(enum harness_mode mode);

/* `rel` taken from the directory of this runner (BUILD/bin/braid-tests): "braid-info" is the
 * tool beside it, "../lib/libbraid-ibemu.so" a library of the same build. Written into out
 * (len bytes) and returned; when /proc/self/exe cannot be read, rel from ".". */
const char* harness_runner_path(char* out, size_t len, const char* rel);

#endif /* BRAID_TEST_HARNESS_H */
