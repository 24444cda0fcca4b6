/*
 * cuda_rt.c - dlopen of the CUDA runtime for the benchmarks and the GPU tests (cuda_rt.h).
 */
#include "cuda_rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct bench_cuda cuda;
static const struct bench_cuda* loaded; /* &cuda once every entry point resolved */
static char load_error[512];
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Resolve `name` (or `alt` when given and `name` is absent) into *slot; 0 when found. */
static int sym(void* lib, void* slot, const char* name, const char* alt) {
  void* f = dlsym(lib, name);
  if (f == NULL && alt != NULL) f = dlsym(lib, alt);
  if (f == NULL) {
    snprintf(load_error, sizeof(load_error), "%s lacks %s", cuda.path, name);
    return -1;
  }
  memcpy(slot, &f, sizeof(f));
  return 0;
}

static int resolve(void* lib) {
#define S(field, name) sym(lib, &cuda.field, name, NULL)
  int bad = 0;
  bad |= S(GetDeviceCount, "cudaGetDeviceCount") | S(SetDevice, "cudaSetDevice") | S(GetDevice, "cudaGetDevice");
  bad |= S(DeviceGetAttribute, "cudaDeviceGetAttribute") | S(DeviceSynchronize, "cudaDeviceSynchronize");
  /* CUDA 12 names the current layout _v2; CUDA 13 dropped the suffix. Only `name`, the
   * first field in every version, is read. */
  bad |= sym(lib, &cuda.GetDeviceProperties, "cudaGetDeviceProperties_v2", "cudaGetDeviceProperties");
  bad |= S(MemGetInfo, "cudaMemGetInfo") | S(Malloc, "cudaMalloc") | S(Free, "cudaFree");
  bad |= S(Memcpy, "cudaMemcpy") | S(MemcpyAsync, "cudaMemcpyAsync") | S(MemsetAsync, "cudaMemsetAsync");
  bad |= S(StreamCreateWithFlags, "cudaStreamCreateWithFlags") | S(StreamDestroy, "cudaStreamDestroy");
  bad |= S(StreamSynchronize, "cudaStreamSynchronize") | S(StreamQuery, "cudaStreamQuery");
  bad |= S(EventCreate, "cudaEventCreate") | S(EventDestroy, "cudaEventDestroy") | S(EventRecord, "cudaEventRecord");
  bad |= S(EventSynchronize, "cudaEventSynchronize") | S(EventElapsedTime, "cudaEventElapsedTime");
  bad |= S(StreamBeginCapture, "cudaStreamBeginCapture") | S(StreamEndCapture, "cudaStreamEndCapture");
  bad |= S(GraphInstantiateWithFlags, "cudaGraphInstantiateWithFlags") | S(GraphLaunch, "cudaGraphLaunch");
  bad |= S(GraphExecDestroy, "cudaGraphExecDestroy") | S(GraphDestroy, "cudaGraphDestroy");
  bad |= S(RuntimeGetVersion, "cudaRuntimeGetVersion") | S(DriverGetVersion, "cudaDriverGetVersion");
  bad |= S(GetErrorString, "cudaGetErrorString");
#undef S
  return bad ? -1 : 0;
}

static void load(void) {
  static const char* const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  const char* dirs[] = {"", getenv("CUDA_HOME"), "/usr/local/cuda/lib64"};
  char first_error[256] = "";
  for (size_t d = 0; d < sizeof(dirs) / sizeof(dirs[0]); d++) {
    if (dirs[d] == NULL) continue;
    for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
      if (d == 0)
        snprintf(cuda.path, sizeof(cuda.path), "%s", names[n]);
      else
        snprintf(cuda.path, sizeof(cuda.path), "%s%s/%s", dirs[d], d == 1 ? "/lib64" : "", names[n]);
      void* lib = dlopen(cuda.path, RTLD_NOW | RTLD_LOCAL);
      if (lib == NULL) {
        if (!first_error[0]) snprintf(first_error, sizeof(first_error), "%s", dlerror());
        continue;
      }
      if (resolve(lib) == 0) {
        loaded = &cuda;
        return;
      }
      dlclose(lib);
    }
  }
  if (!load_error[0]) snprintf(load_error, sizeof(load_error), "no CUDA runtime library (%s)", first_error);
}

const struct bench_cuda* bench_cuda_load(char* why, size_t len) {
  pthread_once(&once, load);
  if (loaded == NULL && why != NULL && len > 0) snprintf(why, len, "%s", load_error);
  return loaded;
}

const char* bench_cuda_error(int err) {
  static __thread char buf[160];
  const char* s = loaded ? loaded->GetErrorString(err) : NULL;
  snprintf(buf, sizeof(buf), "%s (%d)", s ? s : "unknown CUDA error", err);
  return buf;
}

int bench_cuda_devices(char* why, size_t len) {
  const struct bench_cuda* rt = bench_cuda_load(why, len);
  if (rt == NULL) return 0;
  int n = 0, err = rt->GetDeviceCount(&n);
  if (err != BENCH_CUDA_SUCCESS) {
    if (why) snprintf(why, len, "cudaGetDeviceCount: %s", bench_cuda_error(err));
    return 0;
  }
  if (n <= 0 && why) snprintf(why, len, "cudaGetDeviceCount found no device");
  return n > 0 ? n : 0;
}
