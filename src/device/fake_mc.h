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

#endif /* BRAID_DEVICE_FAKE_MC_H */
