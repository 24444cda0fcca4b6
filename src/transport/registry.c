/*
 * registry.c - the transport registry (registry.h) and the build description that lists it.
 */
#include "transport/registry.h"

#include <pthread.h>
#include <stdio.h>

#include "base/version.h"

static const struct braid_transport* const registry[] = {
#define BRAID_X(id, info) &braid_transport_##id,
    BRAID_TRANSPORTS(BRAID_X)
#undef BRAID_X
};

static const char* const info_names[] = {
#define BRAID_X(id, info) info,
    BRAID_TRANSPORTS(BRAID_X)
#undef BRAID_X
};

#define NTRANSPORTS ((int)(sizeof(registry) / sizeof(registry[0])))

const struct braid_transport* const* braid_transport_registry(int* count_p) {
  *count_p = NTRANSPORTS;
  return registry;
}

const char* const* braid_version_transports(int* count_p) {
  if (count_p) *count_p = NTRANSPORTS;
  return info_names;
}

static char build_options[256];
static pthread_once_t build_options_once = PTHREAD_ONCE_INIT;

static void build_options_fill(void) {
  size_t len = (size_t)snprintf(build_options, sizeof(build_options), "CUDA kernels %s; transports:",
                                braid_version_cuda_built() ? "built" : "not built (host mode only)");
  for (int i = 0; i < NTRANSPORTS && len < sizeof(build_options); i++)
    len += (size_t)snprintf(build_options + len, sizeof(build_options) - len, "%s %s", i ? "," : "", info_names[i]);
}

const char* braid_build_options(void) {
  pthread_once(&build_options_once, build_options_fill);
  return build_options;
}
