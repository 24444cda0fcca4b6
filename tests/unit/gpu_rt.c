/*
 * gpu_rt.c - the GPU probe and tag count of gpu_rt.h, and the runtime loader itself.
 *
 * The loader is bench/common/cuda_rt.c, compiled into the test runner from here: the
 * Makefile builds the .c files of tests/unit into braid-tests and those of bench/common
 * into the benchmarks, and both need the same dlopen of libcudart.
 */
#include "gpu_rt.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../bench/common/cuda_rt.c"

static int tagged;

void gpu_rt_tag(TCase* tc, int ncases) {
  tcase_set_tags(tc, GPU_RT_TAG);
  tagged += ncases;
}

int gpu_rt_tagged(void) {
  return tagged;
}

/* What the probing child sends back. */
struct probe_reply {
  int ndev;
  char why[200];
};

int gpu_rt_probe(char* why, size_t len) {
  const char* host = getenv("BRAID_HOST_MODE");
  if (host && atoi(host) == 1) {
    snprintf(why, len, "BRAID_HOST_MODE=1");
    return 0;
  }
  int fds[2];
  if (pipe(fds) != 0) {
    snprintf(why, len, "pipe failed");
    return 0;
  }
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    struct probe_reply rep = {0, ""};
    close(fds[0]);
    rep.ndev = bench_cuda_devices(rep.why, sizeof(rep.why));
    if (write(fds[1], &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  struct probe_reply rep = {0, "the probe process could not start"};
  if (pid > 0) {
    struct pollfd p = {fds[0], POLLIN, 0};
    if (poll(&p, 1, 30000) == 1) {
      if (read(fds[0], &rep, sizeof(rep)) != (ssize_t)sizeof(rep)) snprintf(rep.why, sizeof(rep.why), "the probe died");
    } else {
      snprintf(rep.why, sizeof(rep.why), "cudaGetDeviceCount did not return within 30 s");
      kill(pid, SIGKILL);
    }
    waitpid(pid, NULL, 0);
  }
  close(fds[0]);
  rep.why[sizeof(rep.why) - 1] = '\0';
  if (rep.ndev <= 0) snprintf(why, len, "%s", rep.why);
  return rep.ndev > 0 ? rep.ndev : 0;
}
