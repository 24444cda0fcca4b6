/*
 * fail.c - nccl-tests' failure messages (see fail.h). They go to stdout, as nccl-tests
 * prints them, so they interleave correctly with the table.
 */
#include "fail.h"

#include <stdio.h>
#include <unistd.h>

#include "cuda_rt.h"
#include "report.h"

void bench_fail_nccl(const char* file, int line, ncclResult_t res) {
  char host[256];
  bench_hostname(host, sizeof(host));
  const char* last = ncclGetLastError(NULL);
  printf("%s: Test NCCL failure %s:%d '%s / %s'\n", host, file, line, ncclGetErrorString(res), last ? last : "");
  fflush(stdout);
}

void bench_fail_cuda(const char* file, int line, const char* what, int err) {
  char host[256];
  bench_hostname(host, sizeof(host));
  printf("%s: Test CUDA failure %s:%d '%s: %s'\n", host, file, line, what, bench_cuda_error(err));
  fflush(stdout);
}

void bench_fail_trace(const char* file, int line) {
  char host[256];
  bench_hostname(host, sizeof(host));
  printf(" .. %s pid %d: Test failure %s:%d\n", host, (int)getpid(), file, line);
  fflush(stdout);
}

void bench_die_nccl(const char* file, int line, ncclResult_t res) {
  bench_fail_nccl(file, line, res);
  fflush(stderr);
  _exit(BENCH_NCCL_ERROR);
}
