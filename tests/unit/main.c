/*
 * main.c - the one Check runner. Every tests/unit/test_<m>.c exposes `Suite *<m>_suite(void)`;
 * the Makefile lists them in build/gen/suites.h. `braid-tests [suite...]` runs the named
 * suites (all by default), `braid-tests --list` prints their names; BRAID_TEST_TIER=full adds
 * the large cases.
 *
 * Cases tagged `gpu` (gpu_rt.h) need a usable CUDA device. Before running, a forked child
 * asks the CUDA runtime (this process never initialises CUDA: the cases run in forked
 * children); without a device the gpu cases are excluded - not run, not counted as passed -
 * and one line says so: "gpu: N cases skipped: no CUDA device (<reason>)".
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#define BRAID_SUITE(m) Suite* m##_suite(void);
#include "suites.h"
#undef BRAID_SUITE

#include "gpu_rt.h"

struct entry {
  const char* name;
  Suite* (*make)(void);
};

static const struct entry suites[] = {
#define BRAID_SUITE(m) {#m, m##_suite},
#include "suites.h"
#undef BRAID_SUITE
};

static int wanted(int argc, char** argv, const char* name) {
  if (argc <= 1) return 1;
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], name) == 0) return 1;
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "--list") == 0) { /* the suite names, one per line (tests/run.sh) */
    for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) printf("%s\n", suites[i].name);
    return 0;
  }
  SRunner* runner = NULL;
  for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
    if (!wanted(argc, argv, suites[i].name)) continue;
    if (runner == NULL)
      runner = srunner_create(suites[i].make());
    else
      srunner_add_suite(runner, suites[i].make());
  }
  if (runner == NULL) {
    fprintf(stderr, "braid-tests: no suite matches\n");
    return 2;
  }
  const char* exclude = NULL; /* NULL: Check's CK_EXCLUDE_TAGS, if set */
  if (gpu_rt_tagged() > 0) {
    char why[256];
    if (gpu_rt_probe(why, sizeof(why)) == 0) {
      exclude = GPU_RT_TAG;
      printf("gpu: %d cases skipped: no CUDA device (%s)\n", gpu_rt_tagged(), why);
      fflush(stdout);
    }
  }
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_tagged(runner, NULL, NULL, NULL, exclude, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}
