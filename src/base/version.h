/*
 * version.h - what this build of braid is: its own version, the NCCL API it implements, and
 * whether the CUDA kernels are built in. Used by the log banner (debug.c) and by
 * tools/braid-info (which lists the transports from transport/registry.h).
 */
#ifndef BRAID_VERSION_H
#define BRAID_VERSION_H

/* braid's own version, e.g. "0.1.0" (BRAID_VERSION_STRING of include/nccl.h). */
const char* braid_version_string(void);
/* 1 when the CUDA kernels were compiled in (the Makefile defines BRAID_CUDA_BUILT with nvcc). */
int braid_version_cuda_built(void);

#endif /* BRAID_VERSION_H */
