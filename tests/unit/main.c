/*
 * main.c - the one Check runner. Every tests/unit/test_<m>.c exposes `Suite *<m>_suite(void)`;
 * the Makefile lists them in build/gen/suites.h. `braid-tests [suite...]` runs the named
 * suites (all by default); BRAID_TEST_TIER=full adds the large cases.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#define BRAID_SUITE(m) Suite* m##_suite(void);
#include "suites.h"
#undef BRAID_SUITE

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
  srunner_set_fork_status(runner, CK_FORK);
  srunner_run_all(runner, CK_NORMAL);
  int failed = srunner_ntests_failed(runner);
  srunner_free(runner);
  return failed == 0 ? 0 : 1;
}
