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

#endif /* BRAID_DEVICE_CUDA_MC_H */
