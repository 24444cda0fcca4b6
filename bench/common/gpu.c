/*
 * gpu.c - the benchmarks' GPU mode (gpu.h) over the dlopen'd runtime.
 */
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_gpu_open(struct bench_gpu* g, int allowed, const char* why_not) {
  memset(g, 0, sizeof(*g));
  const char* host = getenv("BRAID_HOST_MODE");
  if (!allowed) {
    snprintf(g->why, sizeof(g->why), "%s", why_not);
    return;
  }
  if (host && atoi(host) == 1) {
    snprintf(g->why, sizeof(g->why), "BRAID_HOST_MODE=1");
    return;
  }
  g->ndev = bench_cuda_devices(g->why, sizeof(g->why));
  if (g->ndev > 0) g->rt = bench_cuda_load(NULL, 0);
}

int bench_gpu_device(const struct bench_gpu* g, int idx) {
  return g->ndev > 0 ? idx % g->ndev : 0;
}

void bench_gpu_describe(const struct bench_gpu* g, int dev, char* name, size_t len, int pci[3]) {
  static const int attrs[3] = {BENCH_CUDA_ATTR_PCI_DOMAIN, BENCH_CUDA_ATTR_PCI_BUS, BENCH_CUDA_ATTR_PCI_DEVICE};
  /* cudaDeviceProp is about 1 KiB and grows with CUDA versions; name is its first field. */
  char* prop = calloc(1, 16384);
  snprintf(name, len, "cuda device %d", dev);
  if (prop && g->rt->GetDeviceProperties(prop, dev) == BENCH_CUDA_SUCCESS) {
    prop[255] = '\0';
    snprintf(name, len, "%s", prop);
  }
  free(prop);
  for (int i = 0; i < 3; i++)
    if (g->rt->DeviceGetAttribute(&pci[i], attrs[i], dev) != BENCH_CUDA_SUCCESS) pci[i] = 0;
}

size_t bench_gpu_mem_total(const struct bench_gpu* g, int dev) {
  size_t free_bytes = 0, total = 0;
  if (g->rt->SetDevice(dev) != BENCH_CUDA_SUCCESS || g->rt->MemGetInfo(&free_bytes, &total) != BENCH_CUDA_SUCCESS)
    return 0;
  return total;
}

enum bench_result bench_gpu_set_device(const struct bench_gpu* g, int dev) {
  BENCH_CUDACHECK(g, g->rt->SetDevice(dev), "cudaSetDevice");
  return BENCH_SUCCESS;
}

enum bench_result bench_gpu_alloc(const struct bench_gpu* g, int dev, size_t bytes, void** p_out) {
  void* p = NULL;
  BENCH_CUDACHECK(g, g->rt->SetDevice(dev), "cudaSetDevice");
  BENCH_CUDACHECK(g, g->rt->Malloc(&p, bytes), "cudaMalloc");
  /* Zeroed like the host buffers; nothing else runs yet, so the device-wide wait is cheap. */
  BENCH_CUDACHECK(g, g->rt->MemsetAsync(p, 0, bytes, NULL), "cudaMemsetAsync");
  BENCH_CUDACHECK(g, g->rt->DeviceSynchronize(), "cudaDeviceSynchronize");
  *p_out = p;
  return BENCH_SUCCESS;
}

void bench_gpu_free(const struct bench_gpu* g, void* p) {
  if (p) g->rt->Free(p);
}

enum bench_result bench_gpu_stream(const struct bench_gpu* g, int dev, cudaStream_t* s_out) {
  cudaStream_t s = NULL;
  BENCH_CUDACHECK(g, g->rt->SetDevice(dev), "cudaSetDevice");
  BENCH_CUDACHECK(g, g->rt->StreamCreateWithFlags(&s, BENCH_CUDA_STREAM_NON_BLOCKING), "cudaStreamCreateWithFlags");
  *s_out = s;
  return BENCH_SUCCESS;
}

void bench_gpu_stream_destroy(const struct bench_gpu* g, cudaStream_t s) {
  if (s) g->rt->StreamDestroy(s);
}

enum bench_result bench_gpu_copy(const struct bench_gpu* g, void* dst, const void* src, size_t bytes, cudaStream_t s) {
  if (bytes == 0) return BENCH_SUCCESS;
  BENCH_CUDACHECK(g, g->rt->MemcpyAsync(dst, src, bytes, BENCH_CUDA_MEMCPY_DEFAULT, s), "cudaMemcpyAsync");
  BENCH_CUDACHECK(g, g->rt->StreamSynchronize(s), "cudaStreamSynchronize");
  return BENCH_SUCCESS;
}

enum bench_result bench_gpu_sync(const struct bench_gpu* g, cudaStream_t s) {
  BENCH_CUDACHECK(g, g->rt->StreamSynchronize(s), "cudaStreamSynchronize");
  return BENCH_SUCCESS;
}
