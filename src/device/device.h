/*
 * device.h - the GPU as the rest of braid sees it: one table of operations, so that no other
 * file calls the CUDA runtime. Two implementations:
 *   - `cuda` (device_cuda.c): the CUDA runtime, linked in when braid is built with nvcc;
 *   - `fake` (device_fake.c): for tests on machines without a GPU (BRAID_FAKE_GPU=1). Host
 *     memory poses as device memory, IPC handles are shared-memory segments, a stream is a
 *     thread that runs launched work through the host executor in order. It exercises every
 *     device-mode code path above this table (binding, memory placement, handle exchange,
 *     argument packing, stream ordering, asynchronous completion) with nothing but a CPU.
 *
 * braid_device() picks one once per process: NULL means host mode (no device usable,
 * BRAID_HOST_MODE=1, or a build without CUDA and no fake).
 */
#ifndef BRAID_DEVICE_H
#define BRAID_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* Where a pointer lives, as the CUDA runtime reports it. */
enum braid_mem_kind {
  BRAID_MEM_HOST = 0,   /* pageable host memory (or unknown to the runtime) */
  BRAID_MEM_PINNED = 1, /* host memory the device can reach */
  BRAID_MEM_DEVICE = 2,
  BRAID_MEM_MANAGED = 3,
};

/* An exported device allocation another process can map (cudaIpcMemHandle_t is 64 bytes). */
#define BRAID_IPC_HANDLE_BYTES 64
struct braid_ipc_handle {
  unsigned char bytes[BRAID_IPC_HANDLE_BYTES];
};

/* A multicast object as another local process imports it (a POSIX file descriptor's owner
 * and number on CUDA, a segment name on the fake GPU). */
#define BRAID_MC_HANDLE_BYTES 64
struct braid_mc_handle {
  unsigned char bytes[BRAID_MC_HANDLE_BYTES];
};

/* Opaque to everyone but the implementation. */
typedef void* braid_event_t;

/* How a stream orders with the legacy default stream (CUDA's implicit synchronisation). */
enum braid_stream_kind {
  BRAID_STREAM_LEGACY = 0,      /* NULL / cudaStreamLegacy: waits for, and is waited for by, every blocking stream */
  BRAID_STREAM_BLOCKING = 1,    /* cudaStreamCreate's default, cudaStreamPerThread: ordered with the legacy stream */
  BRAID_STREAM_NONBLOCKING = 2, /* cudaStreamNonBlocking: ordered with nothing but itself */
};

/* Stream-capture modes of a thread, CUDA's values (cudaStreamCaptureMode). */
enum braid_capture_mode {
  BRAID_CAPTURE_GLOBAL = 0,
  BRAID_CAPTURE_THREAD_LOCAL = 1,
  BRAID_CAPTURE_RELAXED = 2,
};

struct braid_kernel_args; /* src/kernels/kernel.cuh / launch code */

struct braid_device_ops {
  const char* name; /* "cuda" or "fake" */

  /* Devices. */
  ncclResult_t (*count)(int* n);
  ncclResult_t (*get_current)(int* dev);
  ncclResult_t (*set_current)(int dev);
  /* PCI bus id as NCCL prints it (domain<<20 | bus<<8 | device<<3 | function style int64, the
   * same encoding busId uses in logs) and as a string "0000:1b:00.0". */
  ncclResult_t (*bus_id)(int dev, int64_t* bus_id, char* str, size_t str_len);
  ncclResult_t (*compute_capability)(int dev, int* sm); /* major*10 + minor */
  ncclResult_t (*can_access_peer)(int dev, int peer_dev, int* yes);

  /* Memory. All allocations are zeroed. */
  ncclResult_t (*alloc)(void** ptr, size_t bytes); /* device memory */
  void (*free)(void* ptr);
  ncclResult_t (*host_alloc)(void** host, void** dev, size_t bytes); /* pinned, mapped */
  void (*host_free)(void* host);
  /* Map existing host memory (a shared-memory segment) for the device: *dev is the device's
   * pointer to it. */
  ncclResult_t (*host_register)(void* host, size_t bytes, void** dev);
  void (*host_unregister)(void* host);
  ncclResult_t (*memcpy_sync)(void* dst, const void* src, size_t bytes); /* any direction */
  ncclResult_t (*pointer_kind)(const void* p, int* kind, int* dev);      /* enum braid_mem_kind */

  /* Inter-process device memory. */
  ncclResult_t (*ipc_export)(void* dptr, struct braid_ipc_handle* h);
  ncclResult_t (*ipc_import)(const struct braid_ipc_handle* h, void** dptr);
  void (*ipc_close)(void* dptr);

  /* Streams, events, launch. `stream` is the user's cudaStream_t (NULL: legacy default). */
  ncclResult_t (*launch)(const struct braid_kernel_args* args, int dtype, int nblocks, int nthreads,
                         cudaStream_t stream);
  ncclResult_t (*event_create)(braid_event_t* ev);
  void (*event_destroy)(braid_event_t ev);
  ncclResult_t (*event_record)(braid_event_t ev, cudaStream_t stream);
  ncclResult_t (*event_query)(braid_event_t ev, int* done);
  ncclResult_t (*stream_wait_event)(cudaStream_t stream, braid_event_t ev);
  ncclResult_t (*stream_sync)(cudaStream_t stream);
  ncclResult_t (*stream_capturing)(cudaStream_t stream, int* yes);

  /* Added by the launch code (members above are frozen: the transports use them). */
  /* Copy on `stream`, ordered with its kernels (sends to self). */
  ncclResult_t (*memcpy_async)(void* dst, const void* src, size_t bytes, cudaStream_t stream);
  /* Let the current device read and write `peer_dev`'s memory (two ranks of one process on
   * two GPUs, P2P/direct pointer). Already enabled is success. */
  ncclResult_t (*enable_peer_access)(int peer_dev);

  /* Added for the first GPU run (the launch code's setup, capture and stream rules). */
  /* A setup copy (any direction) on the layer's private non-blocking stream of the current
   * device, landed when it returns. Unlike memcpy_sync (cudaMemcpy: the legacy stream, where a
   * pageable host-to-device copy may return before its DMA lands, and which waits for every
   * blocking stream's kernels) it is ordered before any launch that follows, on any stream,
   * and never waits for a user's kernel. Legal while another stream is being captured. */
  ncclResult_t (*setup_copy)(void* dst, const void* src, size_t bytes);
  /* enum braid_stream_kind of a user's stream. */
  ncclResult_t (*stream_kind)(cudaStream_t stream, int* kind);
  /* This thread's stream-capture mode (enum braid_capture_mode): sets *mode, returns the old one
   * in it (cudaThreadExchangeStreamCaptureMode). Calls that a capture in global mode on any
   * thread forbids (event queries, synchronous copies) run in relaxed mode, or they would
   * invalidate the user's capture. */
  ncclResult_t (*capture_mode)(int* mode);
  /* Added for GPUDirect RDMA through dma-buf (a net plugin registering device memory with its
   * NIC: transport/net/ib/ib_gdr.c). dmabuf_supported: *yes = 1 when device `dev` exports
   * dma-bufs (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED; the fake GPU: always). dmabuf_get: a new
   * dma-buf file descriptor covering [ptr, ptr + bytes) of device memory
   * (cuMemGetHandleForAddressRange over the enclosing pages; the fake GPU: its shared-memory
   * segment) and ptr's offset in it; the caller closes *fd. ncclSystemError (with an INFO,
   * no WARN: the caller falls back) when it cannot. */
  ncclResult_t (*dmabuf_supported)(int dev, int* yes);
  ncclResult_t (*dmabuf_get)(void* ptr, size_t bytes, int* fd, uint64_t* offset);
  /* Added for NVLS (transport/nvls/nvls.c): multicast objects over the GPUs of a node.
   * mc_supported: *yes = 1 when device `dev` has them (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED
   * and the driver's entry points). mc_granularity: the size unit of an object of ndev devices
   * (cuMulticastGetGranularity, minimum). mc_create: a new object of `bytes` for ndev devices
   * and its handle, which another process's mc_import turns into its own object (the same
   * multicast object); every member then mc_add_device's its device, and once all did,
   * mc_bind allocates `bytes` of memory on the device, maps it here (*local, zeroed) and binds
   * it at offset 0; once all bound, mc_map maps the object (*mcptr: what multimem instructions
   * address). mc_release undoes whatever of that this member did (NULLs for steps not taken).
   * Failures log at INFO (the caller falls back to unicast, and says so). */
  ncclResult_t (*mc_supported)(int dev, int* yes);
  ncclResult_t (*mc_granularity)(int ndev, size_t bytes, size_t* gran);
  ncclResult_t (*mc_create)(int ndev, size_t bytes, void** mc, struct braid_mc_handle* h);
  ncclResult_t (*mc_import)(const struct braid_mc_handle* h, void** mc);
  ncclResult_t (*mc_add_device)(void* mc, int dev);
  ncclResult_t (*mc_bind)(void* mc, int dev, size_t bytes, void** local);
  ncclResult_t (*mc_map)(void* mc, size_t bytes, void** mcptr);
  void (*mc_release)(void* mc);
  /* Added for ncclMemAlloc through the VMM API (core/sym/mem.c) and windows bound to a
   * multicast object (core/sym/win_mc.c). vmm_alloc: `bytes` of the current device's memory,
   * rounded up to the allocation granularity (and the multicast granularity where the device
   * has multicast), *alloc_bytes what it took, zeroed, mapped read-write here (cuMemCreate with
   * a POSIX-fd shareable handle, cuMemAddressReserve, cuMemMap, cuMemSetAccess); an error
   * logged at INFO where the device or driver has no VMM (the caller falls back to alloc).
   * vmm_free: unmap and release. vmm_export: a handle of the whole allocation that starts at
   * `base` (its owner's pid and exported descriptor, taken with pidfd_getfd: no cudaIpc);
   * vmm_import maps it here (*ptr: its base), vmm_close unmaps it. mc_bind_mem: like mc_bind,
   * but binds [ptr, ptr + bytes) of a vmm_alloc allocation of this process (an offset and size
   * that are multiples of the object's granularity) at offset 0 of the object; mc_release then
   * unbinds it and leaves the memory to its owner. */
  ncclResult_t (*vmm_alloc)(size_t bytes, size_t* alloc_bytes, void** ptr);
  void (*vmm_free)(void* ptr);
  ncclResult_t (*vmm_export)(void* base, struct braid_ipc_handle* h);
  ncclResult_t (*vmm_import)(const struct braid_ipc_handle* h, void** ptr);
  void (*vmm_close)(void* ptr);
  ncclResult_t (*mc_bind_mem)(void* mc, int dev, void* ptr, size_t bytes);
  /* What this device layer does differently (BRAID_DEVICE_CAP_*), declared instead of being
   * guessed from which table it is. */
  unsigned caps;
};

/* Device capabilities (braid_device_ops.caps). */
enum {
  /* Kernel blocks run on host threads (the fake GPU): a channel costs a core, so channel
   * counts follow the host's cores as in host mode (core/init.c). */
  BRAID_DEVICE_CAP_HOST_THREADS = 0x1,
  /* Device memory is host memory at the same address: the host may read a FIFO allocated
   * with `alloc` (the watchdog's view of P2P connections, transport/p2p.c). */
  BRAID_DEVICE_CAP_HOST_READS_DEVICE = 0x2,
};

/* The device layer of this process, or NULL in host mode. Decided once (thread-safe). */
const struct braid_device_ops* braid_device(void);

/* The implementations (each NULL when not built in). */
extern const struct braid_device_ops* const braid_device_cuda;
extern const struct braid_device_ops* const braid_device_fake;

/* Test hook: forget the choice so that the next braid_device() decides again (tests that
 * change BRAID_FAKE_GPU / BRAID_HOST_MODE in a forked child). Not thread-safe. */
void braid_device_reset(void);
/* Test hook (fake GPU): hold a stream (on=1: its worker starts nothing new) or let it go. With
 * a held stream a test sees that calls return before their kernels run. */
ncclResult_t braid_device_fake_hold(cudaStream_t stream, int on);
/* Test hook (fake GPU): make stream_capturing report the stream as capturing (a CUDA graph
 * capture in global mode; the fake still runs the work at once), so tests reach the launch
 * path's rules for captured launches. While it is on, an event query, synchronous copy or
 * stream sync from a thread not in relaxed capture mode invalidates the capture, as CUDA's
 * does; turning it off then fails with ncclInvalidUsage (cudaStreamEndCapture's error). */
ncclResult_t braid_device_fake_capture(cudaStream_t stream, int on);
/* Test hook (fake GPU): make a stream blocking (ordered with the legacy NULL stream of its
 * device both ways, as cudaStreamCreate's default) or non-blocking (the default here). */
ncclResult_t braid_device_fake_blocking(cudaStream_t stream, int on);
/* Test hook (fake GPU): memcpy_sync behaves as cudaMemcpy does on the legacy stream: it waits
 * for the legacy stream (which waits for blocking streams), and a copy from pageable host
 * memory to device memory returns once staged, landing when the legacy stream runs it.
 * Off (the default): memcpy_sync copies at once. Not thread-safe. */
void braid_device_fake_legacy_copies(int on);
/* Test hook (fake GPU): kernel launches and copies this process queued so far, and the grid of
 * the last launch (blocks, threads per block); any pointer may be NULL. */
void braid_device_fake_counts(int* launches, int* copies, int* last_blocks, int* last_threads);

/* Device memory for ncclMemAlloc/ncclMemFree: device->alloc on a device, page-aligned host
 * memory in host mode. */
ncclResult_t braid_device_mem_alloc(void** ptr, size_t bytes);
void braid_device_mem_free(void* ptr);

#endif /* BRAID_DEVICE_H */
