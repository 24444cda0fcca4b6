/*
 * cuda_rt.h - the CUDA runtime, loaded at run time with dlopen ("libcudart.so.13", ".so.12",
 * ".so", then the same names under $CUDA_HOME/lib64 and /usr/local/cuda/lib64), so the
 * benchmarks and the tests that use it build and run where CUDA is absent. Only the calls
 * they need, with the runtime's C ABI: error codes are ints (0 = cudaSuccess), streams,
 * events and graphs opaque pointers. Used by bench/common/gpu.c (the benchmarks' GPU mode),
 * tests/gpu/memcpy_bw.c and tests/unit/gpu_rt.c; never by the library (src/device*.c).
 *
 * Loading does not initialise CUDA: a process may load it, fork, and let the children be the
 * first to call into it (CUDA does not survive fork).
 */
#ifndef BENCH_CUDA_RT_H
#define BENCH_CUDA_RT_H

#include <stddef.h>

#include "nccl.h"

/* Values of the runtime's enums these callers pass. */
#define BENCH_CUDA_SUCCESS 0
#define BENCH_CUDA_NOT_READY 600
#define BENCH_CUDA_MEMCPY_DEFAULT 4 /* cudaMemcpyDefault: direction from the pointers */
#define BENCH_CUDA_STREAM_NON_BLOCKING 1
#define BENCH_CUDA_CAPTURE_THREAD_LOCAL 1
#define BENCH_CUDA_ATTR_PCI_BUS 33
#define BENCH_CUDA_ATTR_PCI_DEVICE 34
#define BENCH_CUDA_ATTR_PCI_DOMAIN 50
#define BENCH_CUDA_ATTR_CC_MAJOR 75
#define BENCH_CUDA_ATTR_CC_MINOR 76

typedef void* bench_cuda_event_t;
typedef void* bench_cuda_graph_t;
typedef void* bench_cuda_graph_exec_t;

/* The entry points; each returns a cudaError_t as int. */
struct bench_cuda {
  char path[256]; /* the library that was loaded */
  int (*GetDeviceCount)(int* n);
  int (*SetDevice)(int dev);
  int (*GetDevice)(int* dev);
  int (*DeviceGetAttribute)(int* value, int attr, int dev);
  int (*GetDeviceProperties)(void* prop, int dev); /* only prop's first field (name) is read */
  int (*DeviceSynchronize)(void);
  int (*MemGetInfo)(size_t* free_bytes, size_t* total_bytes);
  int (*Malloc)(void** p, size_t bytes);
  int (*Free)(void* p);
  int (*Memcpy)(void* dst, const void* src, size_t bytes, int kind);
  int (*MemcpyAsync)(void* dst, const void* src, size_t bytes, int kind, cudaStream_t s);
  int (*MemsetAsync)(void* p, int value, size_t bytes, cudaStream_t s);
  int (*StreamCreateWithFlags)(cudaStream_t* s, unsigned flags);
  int (*StreamDestroy)(cudaStream_t s);
  int (*StreamSynchronize)(cudaStream_t s);
  int (*StreamQuery)(cudaStream_t s);
  int (*EventCreate)(bench_cuda_event_t* e);
  int (*EventDestroy)(bench_cuda_event_t e);
  int (*EventRecord)(bench_cuda_event_t e, cudaStream_t s);
  int (*EventSynchronize)(bench_cuda_event_t e);
  int (*EventElapsedTime)(float* ms, bench_cuda_event_t start, bench_cuda_event_t end);
  int (*StreamBeginCapture)(cudaStream_t s, int mode);
  int (*StreamEndCapture)(cudaStream_t s, bench_cuda_graph_t* g);
  int (*GraphInstantiateWithFlags)(bench_cuda_graph_exec_t* e, bench_cuda_graph_t g, unsigned long long flags);
  int (*GraphLaunch)(bench_cuda_graph_exec_t e, cudaStream_t s);
  int (*GraphExecDestroy)(bench_cuda_graph_exec_t e);
  int (*GraphDestroy)(bench_cuda_graph_t g);
  int (*RuntimeGetVersion)(int* v);
  int (*DriverGetVersion)(int* v);
  const char* (*GetErrorString)(int err);
};

/*
 * The runtime of this process, loaded once (thread-safe); NULL when no library loads or one
 * lacks an entry point, with the reason in why[len] (e.g. "libcudart.so.13: cannot open ...").
 */
const struct bench_cuda* bench_cuda_load(char* why, size_t len);

/*
 * Devices usable by this process: loads the runtime and calls cudaGetDeviceCount. Returns the
 * count (> 0) or 0 with the reason in why[len] ("no CUDA runtime library (...)",
 * "cudaGetDeviceCount: no CUDA-capable device is detected (100)"). Initialises CUDA.
 */
int bench_cuda_devices(char* why, size_t len);

/* "name (code)" of a runtime error, for messages. */
const char* bench_cuda_error(int err);

#endif /* BENCH_CUDA_RT_H */
