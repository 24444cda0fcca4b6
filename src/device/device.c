/*
 * device.c - which GPU layer this process uses (device.h), decided once:
 *   BRAID_HOST_MODE=1          -> none (host mode), whatever is installed;
 *   BRAID_FAKE_GPU=N (N > 0)   -> the fake GPU with N devices (tests only);
 *   a CUDA build with a device -> the CUDA runtime;
 *   otherwise                  -> none: host mode. A CUDA build on a machine without a driver
 *                                 or without a visible device lands here, quietly (INFO).
 * Also ncclMemAlloc's memory: device memory on a device, page-aligned host memory otherwise.
 */
#include "device/device.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const struct braid_device_ops* chosen;

static void decide(void) {
  chosen = NULL;
  if (braid_param_int(BRAID_PARAM_HOST_MODE) == 1) {
    BRAID_INFO(BRAID_LOG_INIT, "Device: host mode (BRAID_HOST_MODE=1)");
    return;
  }
  int64_t fake = braid_param_int(BRAID_PARAM_FAKE_GPU);
  if (fake > 0) {
    if (braid_device_fake == NULL) {
      BRAID_WARN("BRAID_FAKE_GPU=%lld but this build has no fake GPU; running in host mode", (long long)fake);
      return;
    }
    chosen = braid_device_fake;
    BRAID_INFO(BRAID_LOG_INIT, "Device: fake GPU with %lld devices (BRAID_FAKE_GPU)", (long long)fake);
    return;
  }
  if (braid_device_cuda == NULL) {
    BRAID_INFO(BRAID_LOG_INIT, "Device: host mode (braid was built without CUDA)");
    return;
  }
  int n = 0;
  if (braid_device_cuda->count(&n) != ncclSuccess) {
    BRAID_INFO(BRAID_LOG_INIT, "Device: host mode (cudaGetDeviceCount failed: no CUDA driver or no device)");
    return;
  }
  if (n <= 0) {
    BRAID_INFO(BRAID_LOG_INIT, "Device: host mode (no visible CUDA device)");
    return;
  }
  chosen = braid_device_cuda;
  BRAID_INFO(BRAID_LOG_INIT, "Device: CUDA runtime, %d devices", n);
}

const struct braid_device_ops* braid_device(void) {
  pthread_once(&once, decide);
  return chosen;
}

void braid_device_reset(void) {
  static const pthread_once_t fresh = PTHREAD_ONCE_INIT;
  braid_param_reload();
  once = fresh;
  chosen = NULL;
}

ncclResult_t braid_device_mem_alloc(void** ptr, size_t bytes) {
  const struct braid_device_ops* dev = braid_device();
  if (dev != NULL) return dev->alloc(ptr, bytes);
  long page = sysconf(_SC_PAGESIZE);
  void* p = NULL;
  if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytes) != 0) {
    BRAID_WARN("Failed to allocate %zu bytes of host memory", bytes);
    return ncclSystemError;
  }
  *ptr = p;
  return ncclSuccess;
}

void braid_device_mem_free(void* ptr) {
  const struct braid_device_ops* dev = braid_device();
  if (ptr == NULL) return;
  if (dev != NULL)
    dev->free(ptr);
  else
    free(ptr);
}
