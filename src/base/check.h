/*
 * check.h - the error-handling macros (docs/CONVENTIONS.md 4). Every internal function returns
 * ncclResult_t. Log once where the error is decided; the macros here only add the
 * `file:line -> N` backtrace line (at INFO) and propagate. The syscall, pthread and calloc
 * macros are also the sites of BRAID_FAULT_INJECT (base/fault.h): a test can make any of them
 * fail on purpose, by the name given here (calloc for the allocations).
 */
#ifndef BRAID_CHECK_H
#define BRAID_CHECK_H

#include <errno.h>
#include <string.h>

#include "base/debug.h"
#include "base/fault.h"

/* Only before the first resource is held. */
#define BRAID_CHECK(call)                                                       \
  do {                                                                          \
    ncclResult_t braid_res_ = (call);                                           \
    if (braid_res_ != ncclSuccess && braid_res_ != ncclInProgress) {            \
      BRAID_INFO(BRAID_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, braid_res_); \
      return braid_res_;                                                        \
    }                                                                           \
  } while (0)

/* Store the result in `res` and jump to the cleanup label on failure. */
#define BRAID_CHECK_GOTO(call, res, label)                                 \
  do {                                                                     \
    (res) = (call);                                                        \
    if ((res) != ncclSuccess && (res) != ncclInProgress) {                 \
      BRAID_INFO(BRAID_LOG_ALL, "%s:%d -> %d", __FILE__, __LINE__, (res)); \
      goto label;                                                          \
    }                                                                      \
  } while (0)

/* A syscall returning -1 on failure: retried on EINTR, logged with strerror. */
#define BRAID_SYSCHECK_GOTO(call, name, res, label)               \
  do {                                                            \
    int braid_ret_;                                               \
    if (BRAID_FAULT(name)) {                                      \
      braid_ret_ = -1;                                            \
      errno = EIO;                                                \
    } else {                                                      \
      do {                                                        \
        braid_ret_ = (int)(call);                                 \
      } while (braid_ret_ == -1 && errno == EINTR);               \
    }                                                             \
    if (braid_ret_ == -1) {                                       \
      BRAID_WARN("Call to %s failed: %s", name, strerror(errno)); \
      (res) = ncclSystemError;                                    \
      goto label;                                                 \
    }                                                             \
  } while (0)

/* pthread_* return an error number instead of setting errno. */
#define BRAID_PTHREADCHECK_GOTO(call, name, res, label)                \
  do {                                                                 \
    int braid_err_ = BRAID_FAULT(name) ? EAGAIN : (call);              \
    if (braid_err_ != 0) {                                             \
      BRAID_WARN("Call to %s failed: %s", name, strerror(braid_err_)); \
      (res) = ncclSystemError;                                         \
      goto label;                                                      \
    }                                                                  \
  } while (0)

/* Allocation with a WARN naming the size; zeroed. */
#define BRAID_CALLOC_GOTO(ptr, n, res, label)                                               \
  do {                                                                                      \
    size_t braid_n_ = (size_t)(n);                                                          \
    (ptr) = BRAID_FAULT("calloc") ? NULL : calloc(braid_n_ ? braid_n_ : 1, sizeof(*(ptr))); \
    if ((ptr) == NULL) {                                                                    \
      BRAID_WARN("Failed to allocate %zu bytes", braid_n_ * sizeof(*(ptr)));                \
      (res) = ncclSystemError;                                                              \
      goto label;                                                                           \
    }                                                                                       \
  } while (0)

#endif /* BRAID_CHECK_H */
