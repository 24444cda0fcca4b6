/*
 * version.c - braid's version and whether the CUDA kernels are built in (see version.h). The
 * banner (debug.c) and tools/braid-info print these; the build line with the transports is
 * transport/registry.c's.
 */
#include "base/version.h"

#include "nccl.h"

const char* braid_version_string(void) {
  return BRAID_VERSION_STRING;
}

int braid_version_cuda_built(void) {
#ifdef BRAID_CUDA_BUILT
  return 1;
#else
  return 0;
#endif
}
