/*
 * cuda_mc.h - multicast objects on CUDA (cuda_mc.c), the mc_* members of device_cuda.c's
 * table, and the driver entry-point lookup they share with it. CUDA builds only.
 */
#ifndef BRAID_DEVICE_CUDA_MC_H
#define BRAID_DEVICE_CUDA_MC_H

#include "device/device.h"

/* A driver API function by name (cudaGetDriverEntryPoint, ABI of CUDA 12.0), NULL if none. */
void* braid_cuda_driver_sym(const char* name);

ncclResult_t braid_cuda_mc_supported(int dev, int* yes);
ncclResult_t braid_cuda_mc_granularity(int ndev, size_t bytes, size_t* gran);
ncclResult_t braid_cuda_mc_create(int ndev, size_t bytes, void** mc, struct braid_mc_handle* h);
ncclResult_t braid_cuda_mc_import(const struct braid_mc_handle* h, void** mc);
ncclResult_t braid_cuda_mc_add_device(void* mc, int dev);
ncclResult_t braid_cuda_mc_bind(void* mc, int dev, size_t bytes, void** local);
ncclResult_t braid_cuda_mc_map(void* mc, size_t bytes, void** mcptr);
void braid_cuda_mc_release(void* mc);
ncclResult_t braid_cuda_mc_bind_mem(void* mc, int dev, void* ptr, size_t bytes);
/* This process's copy of descriptor `fd` of process `pid` (pidfd_getfd; dup for itself), or -1. */
int braid_cuda_take_fd(int pid, int fd);

/* cuMem (VMM) allocations (cuda_vmm.c), device.h's vmm_* members. */
ncclResult_t braid_cuda_vmm_alloc(size_t bytes, size_t* alloc_bytes, void** ptr);
void braid_cuda_vmm_free(void* ptr);
ncclResult_t braid_cuda_vmm_export(void* base, struct braid_ipc_handle* h);
ncclResult_t braid_cuda_vmm_import(const struct braid_ipc_handle* h, void** ptr);
void braid_cuda_vmm_close(void* ptr);
/* The allocation handle (CUmemGenericAllocationHandle) of the vmm_alloc allocation holding
 * [ptr, ptr + bytes) and ptr's offset in it; ncclInvalidArgument when there is none. */
ncclResult_t braid_cuda_vmm_handle(const void* ptr, size_t bytes, unsigned long long* handle, size_t* offset);
/* device_cuda.c: zero device memory on the layer's setup stream, landed when it returns. */
ncclResult_t braid_cuda_zero(void* ptr, size_t bytes);

#endif /* BRAID_DEVICE_CUDA_MC_H */
