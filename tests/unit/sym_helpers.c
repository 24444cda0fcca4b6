/*
 * sym_helpers.c - rank modes of the memory-API suites (sym_helpers.h).
 */
#include "sym_helpers.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/param.h"
#include "device/device.h"

const char* const sym_mode_names[SYM_NMODES] = {"threads", "procs", "pairs", "fake-nodes", "fake-gpu"};
const enum harness_mode sym_harness_modes[SYM_NMODES] = {HARNESS_THREADS, HARNESS_PROCS, HARNESS_PAIRS, HARNESS_PROCS,
                                                         HARNESS_PROCS};

void sym_use_mode(int mode, int nranks) {
  char buf[16];
  unsetenv("NCCL_HOSTID");
  if (mode == SYM_FAKE_GPU) {
    snprintf(buf, sizeof(buf), "%d", nranks);
    setenv("BRAID_FAKE_GPU", buf, 1);
  } else {
    unsetenv("BRAID_FAKE_GPU");
  }
  braid_param_reload();
  braid_device_reset();
}

void sym_rank_env(const struct harness_rank* r, int mode, const char* node_prefix) {
  if (mode == SYM_FAKE_NODES) {
    char id[48];
    snprintf(id, sizeof(id), "%s-%d", node_prefix, r->rank);
    setenv("NCCL_HOSTID", id, 1);
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    braid_param_reload();
  }
  if (mode == SYM_FAKE_GPU) braid_device()->set_current(r->rank);
}
