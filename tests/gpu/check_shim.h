/*
 * check_shim.h - the few Check names the GPU suite uses (tests/unit/test_gpu.c, gpu_rt.c), for
 * building it without libcheck: the GPU machine has no package manager, and its one run must
 * not lose the correctness cases to a missing library. tests/gpu/gpu_main.c is the runner;
 * tests/gpu/run.sh compiles both with -DBRAID_CHECK_SHIM. Semantics kept: a test body gets its
 * loop index as `_i`; ck_assert_msg prints the message and fails the case (the runner runs
 * each case in a forked child, as Check's fork mode does, so it may simply exit).
 */
#ifndef BRAID_CHECK_SHIM_H
#define BRAID_CHECK_SHIM_H

#include <stdio.h>
#include <stdlib.h>

typedef struct TTest {
  const char* name;
  void (*fn)(int _i);
} TTest;

#define SHIM_MAX_TESTS 16
typedef struct TCase {
  const char* name;
  int timeout_s;
  int ntests;
  const TTest* tests[SHIM_MAX_TESTS];
  int from[SHIM_MAX_TESTS], to[SHIM_MAX_TESTS];
  struct TCase* next;
} TCase;

typedef struct Suite {
  const char* name;
  TCase* tcases;
} Suite;

#define START_TEST(n)                                         \
  static void n##_fn(int _i);                                 \
  static const TTest n##_ttest = {#n, n##_fn};                \
  static const TTest* n __attribute__((unused)) = &n##_ttest; \
  static void n##_fn(int _i __attribute__((unused)))
#define END_TEST

#define ck_assert_msg(cond, ...)                                                    \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "%s:%d: Assertion '%s' failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                                 \
      fputc('\n', stderr);                                                          \
      fflush(stderr);                                                               \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)

static inline Suite* suite_create(const char* name) {
  Suite* s = (Suite*)calloc(1, sizeof(*s));
  if (s) s->name = name;
  return s;
}
static inline TCase* tcase_create(const char* name) {
  TCase* t = (TCase*)calloc(1, sizeof(*t));
  if (t) t->name = name, t->timeout_s = 300;
  return t;
}
static inline void tcase_set_timeout(TCase* t, double s) {
  t->timeout_s = (int)s;
}
static inline void tcase_set_tags(TCase* t, const char* tags) {
  (void)t, (void)tags;
}
static inline void tcase_add_loop_test(TCase* t, const TTest* test, int from, int to) {
  if (t->ntests == SHIM_MAX_TESTS) return;
  t->tests[t->ntests] = test, t->from[t->ntests] = from, t->to[t->ntests] = to;
  t->ntests++;
}
static inline void suite_add_tcase(Suite* s, TCase* t) {
  TCase** pp = &s->tcases;
  while (*pp) pp = &(*pp)->next;
  *pp = t;
}

#endif /* BRAID_CHECK_SHIM_H */
