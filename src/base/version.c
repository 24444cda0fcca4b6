/*
 * version.c - braid's version and a description of the build (see version.h). The banner
 * (debug.c) and tools/braid-info print these.
 */
#include "base/version.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nccl.h"

/* The transports compiled into the library, in the order they are tried. The owner of
 * src/transport/ keeps this list current when a transport is added or made optional. */
static const char* const transports[] = {
    "shm",
    "net/socket",
};

static char build_options[256];
static pthread_once_t build_options_once = PTHREAD_ONCE_INIT;

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

const char* const* braid_version_transports(int* count_p) {
  if (count_p) *count_p = (int)(sizeof(transports) / sizeof(transports[0]));
  return transports;
}

static void build_options_fill(void) {
  size_t len = (size_t)snprintf(build_options, sizeof(build_options), "CUDA kernels %s; transports:",
                                braid_version_cuda_built() ? "built" : "not built (host mode only)");
  for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]) && len < sizeof(build_options); i++)
    len += (size_t)snprintf(build_options + len, sizeof(build_options) - len, "%s %s", i ? "," : "", transports[i]);
}

const char* braid_build_options(void) {
  pthread_once(&build_options_once, build_options_fill);
  return build_options;
}
