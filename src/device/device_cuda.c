/*
 * device_cuda.c - the GPU layer on the CUDA runtime (device.h). The only file of braid that
 * calls CUDA. Built with the CUDA headers when braid is built with CUDA (BRAID_CUDA_BUILT);
 * otherwise braid_device_cuda is NULL and braid runs in host mode (or on the fake GPU).
 *
 * libnccl.so links the static CUDA runtime, so a machine without a driver still loads it:
 * count() then fails and device.c falls back to host mode. Allocations and copies run in
 * relaxed stream-capture mode, so that connecting a peer while the application captures a
 * graph on another stream does not invalidate that capture (as NCCL does); event queries are
 * left to the caller, which relaxes around them (launch.c), so that the fake GPU checks it.
 * Setup copies and the zeroing of allocations go through a private non-blocking stream per
 * device, synchronised before they return: never the legacy stream, which a kernel spinning
 * on a blocking stream would hold up, and whose pageable copies may land after a kernel that a
 * non-blocking stream starts next.
 */
#include "device/device.h"

#if defined(BRAID_CUDA_BUILT) && BRAID_CUDA_BUILT

#include <cuda.h> /* types and constants of the driver API entry points fetched at run time */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "device/cuda_mc.h"
#include "kernels/kernel.cuh"
#include "topo/topo.h"

/* The kernels (src/kernels/coll_<dtype>.cu, libbraid_kernels.a), by their host stubs. */
#define BRAID_X(id, short_name, type, size, str) void braid_kernel_##short_name(struct braid_kernel_args args);
BRAID_DTYPES(BRAID_X)
#undef BRAID_X

static const void* kernel_of(int dtype) {
  switch (dtype) {
#define BRAID_X(id, short_name, type, size, str) \
  case id:                                       \
    return (const void*)braid_kernel_##short_name;
    BRAID_DTYPES(BRAID_X)
#undef BRAID_X
  }
  return NULL;
}

/* Log a failed runtime call once, where it failed, and map it to ncclUnhandledCudaError. */
#define CUDA_CHECK(call)                                                                \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      BRAID_WARN("Cuda failure %d '%s' in %s", (int)e_, cudaGetErrorString(e_), #call); \
      return ncclUnhandledCudaError;                                                    \
    }                                                                                   \
  } while (0)

static ncclResult_t cuda_count(int* n) {
  /* Quiet: no driver is an ordinary case (host mode), device.c says so at INFO. */
  cudaError_t e = cudaGetDeviceCount(n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    *n = 0;
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}
static ncclResult_t cuda_get_current(int* dev) {
  CUDA_CHECK(cudaGetDevice(dev));
  return ncclSuccess;
}
static ncclResult_t cuda_set_current(int dev) {
  CUDA_CHECK(cudaSetDevice(dev));
  return ncclSuccess;
}
static ncclResult_t cuda_bus_id(int dev, int64_t* bus_id, char* str, size_t len) {
  char buf[32];
  CUDA_CHECK(cudaDeviceGetPCIBusId(buf, (int)sizeof(buf), dev));
  for (char* p = buf; *p; p++)
    if (*p >= 'A' && *p <= 'F') *p = (char)(*p - 'A' + 'a');
  BRAID_CHECK(braid_topo_busid_parse(buf, bus_id));
  if (str != NULL && len > 0) snprintf(str, len, "%s", buf);
  return ncclSuccess;
}
static ncclResult_t cuda_compute_capability(int dev, int* sm) {
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  *sm = major * 10 + minor;
  return ncclSuccess;
}
static ncclResult_t cuda_can_access_peer(int dev, int peer_dev, int* yes) {
  if (dev == peer_dev) {
    *yes = 1;
    return ncclSuccess;
  }
  CUDA_CHECK(cudaDeviceCanAccessPeer(yes, dev, peer_dev));
  return ncclSuccess;
}

/* Allocation and synchronous copies in relaxed capture mode (see the file comment). */
#define RELAXED_BEGIN                                              \
  enum cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed; \
  cudaThreadExchangeStreamCaptureMode(&mode_)
#define RELAXED_END cudaThreadExchangeStreamCaptureMode(&mode_)

/* The private setup stream of the current device, created on first use (non-blocking, so it
 * neither waits for the legacy stream nor is waited for by it). */
#define SETUP_MAX_DEVICES 64
static pthread_mutex_t setup_mu = PTHREAD_MUTEX_INITIALIZER;
static cudaStream_t setup_streams[SETUP_MAX_DEVICES];

static cudaError_t setup_stream(cudaStream_t* s_p) {
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev < 0 || dev >= SETUP_MAX_DEVICES) return cudaErrorInvalidDevice;
  pthread_mutex_lock(&setup_mu);
  if (setup_streams[dev] == NULL) e = cudaStreamCreateWithFlags(&setup_streams[dev], cudaStreamNonBlocking);
  *s_p = setup_streams[dev];
  pthread_mutex_unlock(&setup_mu);
  return e;
}

static ncclResult_t cuda_alloc(void** ptr, size_t bytes) {
  void* p = NULL;
  size_t n = bytes ? bytes : 1;
  cudaStream_t s = NULL;
  /* Zeroed on the setup stream, waited for: landed before any later launch. */
  RELAXED_BEGIN;
  cudaError_t e = setup_stream(&s);
  if (e == cudaSuccess) e = cudaMalloc(&p, n);
  if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, n, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  RELAXED_END;
  if (e != cudaSuccess) {
    BRAID_WARN("Cuda failure %d '%s': cudaMalloc of %zu bytes", (int)e, cudaGetErrorString(e), bytes);
    if (p != NULL) cudaFree(p);
    return ncclUnhandledCudaError;
  }
  *ptr = p;
  return ncclSuccess;
}
ncclResult_t braid_cuda_zero(void* ptr, size_t bytes) {
  cudaStream_t s = NULL;
  RELAXED_BEGIN;
  cudaError_t e = setup_stream(&s);
  if (e == cudaSuccess) e = cudaMemsetAsync(ptr, 0, bytes, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  RELAXED_END;
  if (e != cudaSuccess) {
    BRAID_WARN("Cuda failure %d '%s': zeroing %zu bytes at %p", (int)e, cudaGetErrorString(e), bytes, ptr);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}
static void cuda_free(void* ptr) {
  if (ptr == NULL) return;
  RELAXED_BEGIN;
  cudaError_t e = cudaFree(ptr);
  RELAXED_END;
  if (e != cudaSuccess) BRAID_WARN("Cuda failure %d '%s': cudaFree(%p)", (int)e, cudaGetErrorString(e), ptr);
}
static ncclResult_t cuda_host_alloc(void** host, void** dev, size_t bytes) {
  void *h = NULL, *d = NULL;
  RELAXED_BEGIN;
  cudaError_t e = cudaHostAlloc(&h, bytes ? bytes : 1, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e == cudaSuccess) e = cudaHostGetDevicePointer(&d, h, 0);
  RELAXED_END;
  if (e != cudaSuccess) {
    BRAID_WARN("Cuda failure %d '%s': cudaHostAlloc of %zu bytes", (int)e, cudaGetErrorString(e), bytes);
    if (h != NULL) cudaFreeHost(h);
    return ncclUnhandledCudaError;
  }
  memset(h, 0, bytes);
  *host = h;
  *dev = d;
  return ncclSuccess;
}
static void cuda_host_free(void* host) {
  if (host == NULL) return;
  RELAXED_BEGIN;
  cudaError_t e = cudaFreeHost(host);
  RELAXED_END;
  if (e != cudaSuccess) BRAID_WARN("Cuda failure %d '%s': cudaFreeHost(%p)", (int)e, cudaGetErrorString(e), host);
}
static ncclResult_t cuda_host_register(void* host, size_t bytes, void** dev) {
  void* d = NULL;
  RELAXED_BEGIN;
  cudaError_t e = cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  if (e == cudaSuccess) e = cudaHostGetDevicePointer(&d, host, 0);
  RELAXED_END;
  if (e != cudaSuccess) {
    BRAID_WARN("Cuda failure %d '%s': cudaHostRegister(%p, %zu)", (int)e, cudaGetErrorString(e), host, bytes);
    return ncclUnhandledCudaError;
  }
  *dev = d;
  return ncclSuccess;
}
static void cuda_host_unregister(void* host) {
  RELAXED_BEGIN;
  cudaError_t e = cudaHostUnregister(host);
  RELAXED_END;
  if (e != cudaSuccess) BRAID_WARN("Cuda failure %d '%s': cudaHostUnregister(%p)", (int)e, cudaGetErrorString(e), host);
}
static ncclResult_t cuda_memcpy_sync(void* dst, const void* src, size_t bytes) {
  RELAXED_BEGIN;
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  RELAXED_END;
  if (e != cudaSuccess) {
    BRAID_WARN("Cuda failure %d '%s': cudaMemcpy(%p, %p, %zu)", (int)e, cudaGetErrorString(e), dst, src, bytes);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}
static ncclResult_t cuda_setup_copy(void* dst, const void* src, size_t bytes) {
  cudaStream_t s = NULL;
  RELAXED_BEGIN;
  cudaError_t e = setup_stream(&s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  RELAXED_END;
  if (e != cudaSuccess) {
    BRAID_WARN("Cuda failure %d '%s': setup copy of %zu bytes %p -> %p", (int)e, cudaGetErrorString(e), bytes, src,
               dst);
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}
static ncclResult_t cuda_pointer_kind(const void* p, int* kind, int* dev) {
  struct cudaPointerAttributes a;
  memset(&a, 0, sizeof(a));
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* unknown pointer: pageable host memory */
    *kind = BRAID_MEM_HOST;
    *dev = -1;
    return ncclSuccess;
  }
  switch (a.type) {
    case cudaMemoryTypeDevice:
      *kind = BRAID_MEM_DEVICE;
      break;
    case cudaMemoryTypeHost:
      *kind = BRAID_MEM_PINNED;
      break;
    case cudaMemoryTypeManaged:
      *kind = BRAID_MEM_MANAGED;
      break;
    default:
      *kind = BRAID_MEM_HOST;
      break;
  }
  *dev = *kind == BRAID_MEM_HOST ? -1 : a.device;
  return ncclSuccess;
}

static ncclResult_t cuda_ipc_export(void* dptr, struct braid_ipc_handle* h) {
  cudaIpcMemHandle_t ch;
  _Static_assert(sizeof(ch) <= BRAID_IPC_HANDLE_BYTES, "cudaIpcMemHandle_t fits");
  CUDA_CHECK(cudaIpcGetMemHandle(&ch, dptr));
  memset(h, 0, sizeof(*h));
  memcpy(h->bytes, &ch, sizeof(ch));
  return ncclSuccess;
}
static ncclResult_t cuda_ipc_import(const struct braid_ipc_handle* h, void** dptr) {
  cudaIpcMemHandle_t ch;
  memcpy(&ch, h->bytes, sizeof(ch));
  CUDA_CHECK(cudaIpcOpenMemHandle(dptr, ch, cudaIpcMemLazyEnablePeerAccess));
  return ncclSuccess;
}
static void cuda_ipc_close(void* dptr) {
  cudaError_t e = cudaIpcCloseMemHandle(dptr);
  if (e != cudaSuccess)
    BRAID_WARN("Cuda failure %d '%s': cudaIpcCloseMemHandle(%p)", (int)e, cudaGetErrorString(e), dptr);
}

/* The most threads a block of fn may have on the current device: what its __launch_bounds__
 * for that architecture allows (kernel.cuh: 384 on sm_100, 512 before), read once per device
 * and datatype. The block size follows the compiled kernel instead of failing its launch. */
#define MAX_THREADS_DEVS 64
static int max_threads_cache[MAX_THREADS_DEVS][BRAID_NUM_DTYPES];
static ncclResult_t kernel_max_threads(const void* fn, int dtype, int* max) {
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  int* c = dev >= 0 && dev < MAX_THREADS_DEVS && dtype >= 0 && dtype < BRAID_NUM_DTYPES ? &max_threads_cache[dev][dtype]
                                                                                        : NULL;
  int v = c != NULL ? __atomic_load_n(c, __ATOMIC_RELAXED) : 0;
  if (v == 0) {
    struct cudaFuncAttributes a;
    CUDA_CHECK(cudaFuncGetAttributes(&a, fn));
    v = a.maxThreadsPerBlock / 32 * 32;
    if (v < 32) v = 32;
    if (c != NULL) __atomic_store_n(c, v, __ATOMIC_RELAXED);
  }
  *max = v;
  return ncclSuccess;
}

static ncclResult_t cuda_launch(const struct braid_kernel_args* args, int dtype, int nblocks, int nthreads,
                                cudaStream_t stream) {
  const void* fn = kernel_of(dtype);
  int max = 0;
  if (fn == NULL || nblocks < 1 || nblocks > BRAID_MAX_CHANNELS || nthreads < 32 ||
      nthreads > BRAID_KERNEL_MAX_THREADS) {
    BRAID_WARN("launch: invalid kernel for datatype %d or grid %d x %d threads", dtype, nblocks, nthreads);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(kernel_max_threads(fn, dtype, &max));
  if (nthreads > max) nthreads = max;
  void* params[1] = {(void*)args};
  dim3 grid = {(unsigned)nblocks, 1, 1}, block = {(unsigned)nthreads, 1, 1};
  CUDA_CHECK(cudaLaunchKernel(fn, grid, block, params, 0, stream));
  return ncclSuccess;
}

static ncclResult_t cuda_event_create(braid_event_t* ev) {
  cudaEvent_t e;
  CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  *ev = (braid_event_t)e;
  return ncclSuccess;
}
static void cuda_event_destroy(braid_event_t ev) {
  if (ev != NULL) cudaEventDestroy((cudaEvent_t)ev);
}
static ncclResult_t cuda_event_record(braid_event_t ev, cudaStream_t stream) {
  CUDA_CHECK(cudaEventRecord((cudaEvent_t)ev, stream));
  return ncclSuccess;
}
static ncclResult_t cuda_event_query(braid_event_t ev, int* done) {
  cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
  if (e == cudaErrorNotReady) {
    *done = 0;
    return ncclSuccess;
  }
  CUDA_CHECK(e);
  *done = 1;
  return ncclSuccess;
}
static ncclResult_t cuda_stream_wait_event(cudaStream_t stream, braid_event_t ev) {
  CUDA_CHECK(cudaStreamWaitEvent(stream, (cudaEvent_t)ev, 0));
  return ncclSuccess;
}
static ncclResult_t cuda_stream_sync(cudaStream_t stream) {
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return ncclSuccess;
}
static ncclResult_t cuda_stream_capturing(cudaStream_t stream, int* yes) {
  enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &st));
  *yes = st != cudaStreamCaptureStatusNone;
  return ncclSuccess;
}
static ncclResult_t cuda_memcpy_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  return ncclSuccess;
}

static ncclResult_t cuda_stream_kind(cudaStream_t stream, int* kind) {
  unsigned flags = 0;
  if (stream == NULL || stream == cudaStreamLegacy) {
    *kind = BRAID_STREAM_LEGACY;
    return ncclSuccess;
  }
  if (stream == cudaStreamPerThread) {
    *kind = BRAID_STREAM_BLOCKING;
    return ncclSuccess;
  }
  CUDA_CHECK(cudaStreamGetFlags(stream, &flags));
  *kind = flags & cudaStreamNonBlocking ? BRAID_STREAM_NONBLOCKING : BRAID_STREAM_BLOCKING;
  return ncclSuccess;
}
_Static_assert((int)cudaStreamCaptureModeRelaxed == BRAID_CAPTURE_RELAXED &&
                   (int)cudaStreamCaptureModeGlobal == BRAID_CAPTURE_GLOBAL,
               "braid_capture_mode has CUDA's values");
static ncclResult_t cuda_capture_mode(int* mode) {
  enum cudaStreamCaptureMode m = (enum cudaStreamCaptureMode) * mode;
  CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&m));
  *mode = (int)m;
  return ncclSuccess;
}

static ncclResult_t cuda_enable_peer_access(int peer_dev) {
  cudaError_t err = cudaDeviceEnablePeerAccess(peer_dev, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError(); /* not sticky, but leave no error behind for the user */
    return ncclSuccess;
  }
  CUDA_CHECK(err);
  return ncclSuccess;
}

/* ---- driver entry points, fetched through the runtime (device/cuda_mc.h); dma-buf ---- */

void* braid_cuda_driver_sym(const char* name) {
  void* fn = NULL;
  enum cudaDriverEntryPointQueryResult st = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &st);
#elif CUDART_VERSION >= 12000
  cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &st);
#else
  cudaError_t e = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault);
  st = cudaDriverEntryPointSuccess;
#endif
  if (e != cudaSuccess || st != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  return fn;
}

#define driver_sym braid_cuda_driver_sym

static ncclResult_t cuda_dmabuf_supported(int dev, int* yes) {
  CUresult (*attr)(int*, CUdevice_attribute, CUdevice) = driver_sym("cuDeviceGetAttribute");
  int v = 0;
  *yes = attr != NULL && driver_sym("cuMemGetHandleForAddressRange") != NULL &&
         attr(&v, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, (CUdevice)dev) == CUDA_SUCCESS && v != 0;
  return ncclSuccess;
}

static ncclResult_t cuda_dmabuf_get(void* ptr, size_t bytes, int* fd_p, uint64_t* offset_p) {
  CUresult (*get)(void*, CUdeviceptr, size_t, CUmemRangeHandleType, unsigned long long) =
      driver_sym("cuMemGetHandleForAddressRange");
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t base = (uintptr_t)ptr & ~(page - 1), end = ((uintptr_t)ptr + bytes + page - 1) & ~(page - 1);
  int fd = -1;
  CUresult r = get != NULL ? get(&fd, (CUdeviceptr)base, end - base, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)
                           : CUDA_ERROR_NOT_SUPPORTED;
  if (r != CUDA_SUCCESS || fd < 0) {
    BRAID_INFO(BRAID_LOG_NET | BRAID_LOG_REG, "cuMemGetHandleForAddressRange of %zu bytes at %p failed: CUDA error %d",
               (size_t)(end - base), (void*)base, (int)r);
    return ncclSystemError;
  }
  *fd_p = fd;
  *offset_p = (uint64_t)((uintptr_t)ptr - base);
  return ncclSuccess;
}

static const struct braid_device_ops cuda_ops = {
    .name = "cuda",
    .count = cuda_count,
    .get_current = cuda_get_current,
    .set_current = cuda_set_current,
    .bus_id = cuda_bus_id,
    .compute_capability = cuda_compute_capability,
    .can_access_peer = cuda_can_access_peer,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .memcpy_sync = cuda_memcpy_sync,
    .pointer_kind = cuda_pointer_kind,
    .ipc_export = cuda_ipc_export,
    .ipc_import = cuda_ipc_import,
    .ipc_close = cuda_ipc_close,
    .launch = cuda_launch,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_query = cuda_event_query,
    .stream_wait_event = cuda_stream_wait_event,
    .stream_sync = cuda_stream_sync,
    .stream_capturing = cuda_stream_capturing,
    .memcpy_async = cuda_memcpy_async,
    .enable_peer_access = cuda_enable_peer_access,
    .setup_copy = cuda_setup_copy,
    .stream_kind = cuda_stream_kind,
    .capture_mode = cuda_capture_mode,
    .dmabuf_supported = cuda_dmabuf_supported,
    .dmabuf_get = cuda_dmabuf_get,
    .mc_supported = braid_cuda_mc_supported,
    .mc_granularity = braid_cuda_mc_granularity,
    .mc_create = braid_cuda_mc_create,
    .mc_import = braid_cuda_mc_import,
    .mc_add_device = braid_cuda_mc_add_device,
    .mc_bind = braid_cuda_mc_bind,
    .mc_map = braid_cuda_mc_map,
    .mc_release = braid_cuda_mc_release,
    .vmm_alloc = braid_cuda_vmm_alloc,
    .vmm_free = braid_cuda_vmm_free,
    .vmm_export = braid_cuda_vmm_export,
    .vmm_import = braid_cuda_vmm_import,
    .vmm_close = braid_cuda_vmm_close,
    .mc_bind_mem = braid_cuda_mc_bind_mem,
    .caps = 0,
};

const struct braid_device_ops* const braid_device_cuda = &cuda_ops;

#else /* no CUDA in this build */

const struct braid_device_ops* const braid_device_cuda = NULL;

#endif
