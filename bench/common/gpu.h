/*
 * gpu.h - the benchmarks' GPU mode, as nccl-tests: when a CUDA device is usable (and
 * BRAID_HOST_MODE is not 1), every rank's send and receive buffers are device memory, data is
 * generated and checked on the host and moved with cudaMemcpy, each rank has its own
 * non-blocking stream, and the time covers the calls up to cudaStreamSynchronize of every
 * stream. Rank i of local process p uses device (p x ranks per process + i) mod device count,
 * so several ranks share a GPU when there are more ranks than devices (braid then needs
 * BRAID_GPU_SHARING=1). Without a runtime library or a device the benchmarks stay in host mode.
 *
 * The runtime is dlopen'd (cuda_rt.h): the benchmarks never link CUDA.
 */
#ifndef BENCH_GPU_H
#define BENCH_GPU_H

#include <stddef.h>

#include "cuda_rt.h"
#include "fail.h"

struct bench_gpu {
  const struct bench_cuda* rt; /* NULL: host mode */
  int ndev;                    /* devices visible to this process */
  char why[256];               /* host mode: the reason (for the log) */
};

/* Decide this process's mode. `allowed` 0 forces host mode (a launch without GPU support);
 * `why_not` says why. Call after the -P fork: it initialises CUDA. */
void bench_gpu_open(struct bench_gpu* g, int allowed, const char* why_not);

/* Device of the rank at local index idx (0.. ranks on this host). */
int bench_gpu_device(const struct bench_gpu* g, int idx);

/* For the "#  Rank" line: the device's name and PCI domain, bus, device numbers. */
void bench_gpu_describe(const struct bench_gpu* g, int dev, char* name, size_t len, int pci[3]);
/* Total memory of the device (0 when unknown). */
size_t bench_gpu_mem_total(const struct bench_gpu* g, int dev);

/* Each reports a failure as nccl-tests ("<host>: Test CUDA failure <file>:<line> '<error>'")
 * and returns BENCH_CUDA_ERROR. */
enum bench_result bench_gpu_set_device(const struct bench_gpu* g, int dev);
enum bench_result bench_gpu_alloc(const struct bench_gpu* g, int dev, size_t bytes, void** p_out);
void bench_gpu_free(const struct bench_gpu* g, void* p);
enum bench_result bench_gpu_stream(const struct bench_gpu* g, int dev, cudaStream_t* s_out);
void bench_gpu_stream_destroy(const struct bench_gpu* g, cudaStream_t s);
/* Copy `bytes` (any direction) on stream s and wait for it. */
enum bench_result bench_gpu_copy(const struct bench_gpu* g, void* dst, const void* src, size_t bytes, cudaStream_t s);
/* Wait until everything queued on s has finished. */
enum bench_result bench_gpu_sync(const struct bench_gpu* g, cudaStream_t s);

#define BENCH_CUDACHECK(g, call, what)                   \
  do {                                                   \
    int err_ = (call);                                   \
    if (err_ != BENCH_CUDA_SUCCESS) {                    \
      bench_fail_cuda(__FILE__, __LINE__, (what), err_); \
      return BENCH_CUDA_ERROR;                           \
    }                                                    \
  } while (0)

#endif /* BENCH_GPU_H */
