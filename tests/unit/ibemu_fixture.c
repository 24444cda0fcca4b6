/*
 * ibemu_fixture.c - the emulated verbs provider for the IB suites (ibemu_fixture.h).
 */
#include "ibemu_fixture.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/param.h"
#include "harness.h"
#if BRAID_IB_BUILT
#include "transport/net/ib/ib_verbs.h"
#endif

void ibemu_fixture_env(const char* devices, const char* fail) {
  char lib[PATH_MAX + 64];
  setenv("BRAID_IB_VERBS_LIBRARY", harness_runner_path(lib, sizeof(lib), "../lib/libbraid-ibemu.so"), 1);
  setenv("IBEMU_DEVICES", devices, 1);
  if (fail != NULL)
    setenv("IBEMU_FAIL", fail, 1);
  else
    unsetenv("IBEMU_FAIL");
  braid_param_reload();
#if BRAID_IB_BUILT
  braid_ibv_reset();
#endif
}
