/*
 * version.h - what this build of braid is: its own version, the NCCL API it implements, and
 * the build options (CUDA kernels or not, transports compiled in). Used by the log banner
 * (debug.c) and by tools/braid-info.
 */
#ifndef BRAID_VERSION_H
#define BRAID_VERSION_H

/* braid's own version, e.g. "0.1.0" (BRAID_VERSION_STRING of include/nccl.h). */
const char* braid_version_string(void);
/* One line describing the build, e.g. "CUDA kernels not built; transports: shm, net/socket". */
const char* braid_build_options(void);
/* 1 when the CUDA kernels were compiled in (the Makefile defines BRAID_CUDA_BUILT with nvcc). */
int braid_version_cuda_built(void);
/* The transports compiled in, in selection order; *count_p gets their number. */
const char* const* braid_version_transports(int* count_p);

#endif /* BRAID_VERSION_H */
