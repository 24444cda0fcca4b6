/*
 * sym_helpers.h - the rank modes the memory-API suites run in (test_sym.c, test_devcomm.c):
 * ranks as threads, processes, pairs of threads per process, fake nodes (NCCL_HOSTID per
 * process: the remote path, core/sym/remote.c) and the fake GPU (BRAID_FAKE_GPU).
 */
#ifndef BRAID_TEST_SYM_HELPERS_H
#define BRAID_TEST_SYM_HELPERS_H

#include "harness.h"

enum sym_mode { SYM_THREADS = 0, SYM_PROCS, SYM_PAIRS, SYM_FAKE_NODES, SYM_FAKE_GPU, SYM_NMODES };

extern const char* const sym_mode_names[SYM_NMODES];
extern const enum harness_mode sym_harness_modes[SYM_NMODES];

/* Before harness_run: the environment of the mode (fake GPU of nranks devices, or none). */
void sym_use_mode(int mode, int nranks);
/* In the rank's process: its fake node ("<node_prefix>-<rank>") or its fake GPU device. */
void sym_rank_env(const struct harness_rank* r, int mode, const char* node_prefix);

#endif /* BRAID_TEST_SYM_HELPERS_H */
