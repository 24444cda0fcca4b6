/*
 * fake_mc.h - the fake GPU's multicast objects (fake_mc.c), the mc_* members of its table.
 */
#ifndef BRAID_DEVICE_FAKE_MC_H
#define BRAID_DEVICE_FAKE_MC_H

#include "device/device.h"

ncclResult_t braid_fake_mc_supported(int dev, int* yes);
ncclResult_t braid_fake_mc_granularity(int ndev, size_t bytes, size_t* gran);
ncclResult_t braid_fake_mc_create(int ndev, size_t bytes, void** mc, struct braid_mc_handle* h);
ncclResult_t braid_fake_mc_import(const struct braid_mc_handle* h, void** mc);
ncclResult_t braid_fake_mc_add_device(void* mc, int dev);
ncclResult_t braid_fake_mc_bind(void* mc, int dev, size_t bytes, void** local);
ncclResult_t braid_fake_mc_map(void* mc, size_t bytes, void** mcptr);
void braid_fake_mc_release(void* mc);
ncclResult_t braid_fake_mc_bind_mem(void* mc, int dev, void* ptr, size_t bytes);
/* The fake GPU's VMM allocation granularity: the multicast granularity while fake multicast is
 * on (as CUDA's ncclMemAlloc rounds for multicast), else a page. */
size_t braid_fake_vmm_granularity(void);
/* device_fake.c: 1 when [ptr, ptr + bytes) lies in a VMM allocation of this process (*offset:
 * ptr's offset in it). */
int braid_fake_vmm_find(const void* ptr, size_t bytes, size_t* offset);

#endif /* BRAID_DEVICE_FAKE_MC_H */
