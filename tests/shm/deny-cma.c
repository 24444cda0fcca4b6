/*
 * deny-cma.c - run a command with cross-memory attach forbidden (tests/unit/deny_cma.h: a
 * seccomp filter makes process_vm_readv/writev fail with EPERM in it and its children), as a
 * container policy would. tests/run.sh runs the collective suites under it.
 *
 *   deny-cma COMMAND [ARG...]
 */
#include <stdio.h>
#include <unistd.h>

#include "../unit/deny_cma.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: deny-cma COMMAND [ARG...]\n");
    return 2;
  }
  if (deny_cma() != 0) {
    perror("deny-cma: seccomp");
    return 126;
  }
  execvp(argv[1], argv + 1);
  perror("deny-cma: exec");
  return 127;
}
