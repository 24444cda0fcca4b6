/*
 * memcpy_bw.c - the reference the GPU run (tests/gpu/run.sh) compares braid with: the
 * device-to-device cudaMemcpy bandwidth of one GPU, timed with events over `iters` copies of
 * `bytes` after a warm-up. Prints one line
 *   memcpy_bw device 0 NVIDIA H200 bytes 1073741824 iters 20 time_us 512.3 copy_GBps 2095.6 traffic_GBps 4191.2
 * where copy = bytes / time and traffic = 2 x bytes / time (each byte is read once and written
 * once). `memcpy_bw --probe` only says whether a device is usable (exit 0) or why not (exit 1).
 *
 * Build (run.sh does): gcc -O2 -Iinclude -Ibench/common tests/gpu/memcpy_bw.c
 *   bench/common/cuda_rt.c -ldl -lpthread -o memcpy_bw   (the runtime is dlopen'd)
 * Usage: memcpy_bw [--probe] [-b bytes] [-n iters] [-d device]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_rt.h"

#define CK(call)                                                           \
  do {                                                                     \
    int e_ = (call);                                                       \
    if (e_ != BENCH_CUDA_SUCCESS) {                                        \
      fprintf(stderr, "memcpy_bw: %s: %s\n", #call, bench_cuda_error(e_)); \
      return 1;                                                            \
    }                                                                      \
  } while (0)

int main(int argc, char** argv) {
  size_t bytes = (size_t)1 << 30;
  int iters = 20, dev = 0, probe = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--probe") == 0)
      probe = 1;
    else if (strcmp(argv[i], "-b") == 0 && i + 1 < argc)
      bytes = strtoull(argv[++i], NULL, 0);
    else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (strcmp(argv[i], "-d") == 0 && i + 1 < argc)
      dev = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: memcpy_bw [--probe] [-b bytes] [-n iters] [-d device]\n");
      return 2;
    }
  }
  char why[256];
  int ndev = bench_cuda_devices(why, sizeof(why));
  if (ndev <= 0) {
    printf("memcpy_bw: no usable CUDA device: %s\n", why);
    return 1;
  }
  const struct bench_cuda* rt = bench_cuda_load(NULL, 0);
  char* prop = calloc(1, 16384);
  CK(rt->SetDevice(dev));
  CK(rt->GetDeviceProperties(prop, dev));
  prop[255] = '\0';
  int rtv = 0, drv = 0;
  rt->RuntimeGetVersion(&rtv);
  rt->DriverGetVersion(&drv);
  if (probe) {
    void* p = NULL;
    CK(rt->Malloc(&p, 1 << 20)); /* a context really comes up (MPS, if used, answers) */
    CK(rt->Free(p));
    printf("memcpy_bw: %d device(s); device %d: %s; runtime %d driver %d (%s)\n", ndev, dev, prop, rtv, drv, rt->path);
    return 0;
  }
  void *a = NULL, *b = NULL;
  cudaStream_t s = NULL;
  bench_cuda_event_t e0 = NULL, e1 = NULL;
  CK(rt->Malloc(&a, bytes));
  CK(rt->Malloc(&b, bytes));
  CK(rt->StreamCreateWithFlags(&s, BENCH_CUDA_STREAM_NON_BLOCKING));
  CK(rt->EventCreate(&e0));
  CK(rt->EventCreate(&e1));
  CK(rt->MemsetAsync(a, 1, bytes, s));
  for (int i = 0; i < 3; i++) CK(rt->MemcpyAsync(b, a, bytes, BENCH_CUDA_MEMCPY_DEFAULT, s));
  CK(rt->EventRecord(e0, s));
  for (int i = 0; i < iters; i++)
    CK(rt->MemcpyAsync(i & 1 ? a : b, i & 1 ? b : a, bytes, BENCH_CUDA_MEMCPY_DEFAULT, s));
  CK(rt->EventRecord(e1, s));
  CK(rt->EventSynchronize(e1));
  float ms = 0;
  CK(rt->EventElapsedTime(&ms, e0, e1));
  double us = 1e3 * ms / iters, copy = (double)bytes / (us * 1e-6) / 1e9;
  printf("memcpy_bw device %d %s bytes %zu iters %d time_us %.1f copy_GBps %.1f traffic_GBps %.1f\n", dev, prop, bytes,
         iters, us, copy, 2 * copy);
  rt->EventDestroy(e0);
  rt->EventDestroy(e1);
  rt->StreamDestroy(s);
  rt->Free(a);
  rt->Free(b);
  free(prop);
  return 0;
}
