/*
 * gpu_rt.h - what the Check runner and the GPU suite (test_gpu.c) share about CUDA: the
 * dlopen'd runtime of bench/common/cuda_rt.h (one loader for the benchmarks and the tests),
 * a probe that says whether a device is usable without initialising CUDA in the runner (CUDA
 * does not survive fork, and every case runs in a forked child), and the `gpu` tag with a
 * count of the cases carrying it, so main.c can say how many it skipped.
 *
 * Any suite with cases that need a real GPU tags them with gpu_rt_tag(tc, ncases).
 */
#ifndef BRAID_TEST_GPU_RT_H
#define BRAID_TEST_GPU_RT_H

#ifdef BRAID_CHECK_SHIM
#include "../gpu/check_shim.h" /* built without libcheck: tests/gpu/run.sh */
#else
#include <check.h>
#endif
#include <stddef.h>

#include "../../bench/common/cuda_rt.h"

/* The Check tag of cases that need a usable CUDA device. */
#define GPU_RT_TAG "gpu"

/*
 * Devices usable here, asked in a forked child (this process does not initialise CUDA).
 * 0 with the reason in why[len]: BRAID_HOST_MODE=1, no runtime library, no device, a driver
 * error, or a probe that hung (killed after 30 s).
 */
int gpu_rt_probe(char* why, size_t len);

/* Tag `tc` "gpu" and count its `ncases` tests (loop iterations) as GPU cases. */
void gpu_rt_tag(TCase* tc, int ncases);
/* GPU cases tagged so far (by the suites built in this process). */
int gpu_rt_tagged(void);

#endif /* BRAID_TEST_GPU_RT_H */
