/*
 * fail.h - result codes and failure reporting of the benchmarks, as nccl-tests: the codes
 * are nccl-tests' testResult_t values and become the exit status; an NCCL error prints
 * "<host>: Test NCCL failure <file>:<line> '<error string> / <last error>'" and every caller
 * on the way out adds " .. <host> pid <pid>: Test failure <file>:<line>".
 */
#ifndef BENCH_FAIL_H
#define BENCH_FAIL_H

#include "nccl.h"

enum bench_result {
  BENCH_SUCCESS = 0,
  BENCH_INTERNAL_ERROR = 1,
  BENCH_CUDA_ERROR = 2,
  BENCH_NCCL_ERROR = 3,
  BENCH_TIMEOUT = 4,
  BENCH_NOT_IMPLEMENTED = 5,
  BENCH_INVALID_USAGE = 6,
  BENCH_NUM_RESULTS = 7 /* wrong results or bandwidth below NCCL_TESTS_MIN_BW */
};

void bench_fail_nccl(const char* file, int line, ncclResult_t res);
void bench_fail_trace(const char* file, int line);
/* "<host>: Test CUDA failure <file>:<line> '<what>: <error string> (<code>)'" (GPU mode). */
void bench_fail_cuda(const char* file, int line, const char* what, int err);
/* Print an NCCL failure, flush and leave the process now (used where no caller can unwind,
 * e.g. inside a combination other threads are waiting on). */
void bench_die_nccl(const char* file, int line, ncclResult_t res) __attribute__((noreturn));

#define BENCH_NCCLCHECK(cmd)                     \
  do {                                           \
    ncclResult_t res_ = (cmd);                   \
    if (res_ != ncclSuccess) {                   \
      bench_fail_nccl(__FILE__, __LINE__, res_); \
      return BENCH_NCCL_ERROR;                   \
    }                                            \
  } while (0)

#define BENCH_CHECK(cmd)                    \
  do {                                      \
    enum bench_result r_ = (cmd);           \
    if (r_ != BENCH_SUCCESS) {              \
      bench_fail_trace(__FILE__, __LINE__); \
      return r_;                            \
    }                                       \
  } while (0)

#endif /* BENCH_FAIL_H */
