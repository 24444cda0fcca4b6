/*
 * gpu_main.c - a runner for the GPU suite (tests/unit/test_gpu.c) built without libcheck
 * (check_shim.h). Usage: braid-gpu-tests [CASE[:FROM-TO]]...  (no argument: every case). Each
 * loop iteration runs in a forked child under its TCase's timeout; one line per iteration
 * ("gpu:matrix:6: PASS (12.3 s)"), then Check's summary line and "N passed, N failed". No
 * usable device: says why, runs nothing, exits 0 ("0 passed, 0 failed").
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_shim.h"
#include "gpu_rt.h"

Suite* gpu_suite(void);

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Is iteration i of tcase `name` selected by the arguments? */
static int selected(int argc, char** argv, const char* name, int i) {
  if (argc <= 1) return 1;
  for (int a = 1; a < argc; a++) {
    size_t n = strcspn(argv[a], ":");
    if (strlen(name) != n || strncmp(argv[a], name, n) != 0) continue;
    if (argv[a][n] == '\0') return 1;
    int from = 0, to = -1;
    if (sscanf(argv[a] + n + 1, "%d-%d", &from, &to) == 1) to = from;
    if (i >= from && i <= to) return 1;
  }
  return 0;
}

/* One iteration in a child; 0 passed. */
static int run_one(const TCase* tc, const TTest* t, int i) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    alarm((unsigned)tc->timeout_s);
    t->fn(i);
    fflush(stdout);
    fflush(stderr);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 1;
  if (WIFSIGNALED(status)) {
    fprintf(stderr, "gpu:%s:%d: %s\n", tc->name, i,
            WTERMSIG(status) == SIGALRM ? "timed out" : strsignal(WTERMSIG(status)));
    return 1;
  }
  return WEXITSTATUS(status) != 0;
}

int main(int argc, char** argv) {
  char why[256] = "";
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (gpu_rt_probe(why, sizeof(why)) == 0) {
    printf("SKIP: gpu: no CUDA device (%s)\n0 passed, 0 failed\n", why);
    return 0;
  }
  Suite* s = gpu_suite();
  int passed = 0, failed = 0;
  for (TCase* tc = s->tcases; tc != NULL; tc = tc->next)
    for (int k = 0; k < tc->ntests; k++)
      for (int i = tc->from[k]; i < tc->to[k]; i++) {
        if (!selected(argc, argv, tc->name, i)) continue;
        double t0 = now();
        int bad = run_one(tc, tc->tests[k], i);
        printf("gpu:%s:%d: %s (%.1f s)\n", tc->name, i, bad ? "FAIL" : "PASS", now() - t0);
        if (bad)
          failed++;
        else
          passed++;
      }
  printf("%d%%: Checks: %d, Failures: %d, Errors: 0\n", passed + failed ? 100 * passed / (passed + failed) : 100,
         passed + failed, failed);
  printf("%d passed, %d failed\n", passed, failed);
  return failed != 0;
}
