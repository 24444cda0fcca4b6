/* stuck_wait.c - issue 16 item 8 measurement (not a test): rank 0 waits DELAY s (default 5) in an
 * all-reduce that rank 1 joins only then; prints rank 0's wall and CPU seconds for that wait.
 *   cc -O2 -Iinclude -o /tmp/stuck tests/soak/stuck_wait.c -Lbuild/host/lib -lnccl -Wl,-rpath,$PWD/build/host/lib
 *   /tmp/stuck 5; BRAID_SPIN_SLEEP_AFTER=0 /tmp/stuck 5 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"
int main(int argc, char** argv) {
  ncclUniqueId id;
  int delay = argc > 1 ? atoi(argv[1]) : 5;
  ncclGetUniqueId(&id);
  pid_t kid = fork();
  int rank = kid == 0 ? 1 : 0;
  ncclComm_t comm;
  float* b = calloc(1024, 4);
  ncclCommInitRank(&comm, 2, id, rank);
  ncclAllReduce(b, b, 1024, ncclFloat, ncclSum, comm, NULL);
  struct rusage r0, r1;
  struct timespec t0, t1;
  if (rank == 1) sleep(delay);
  getrusage(RUSAGE_SELF, &r0);
  clock_gettime(CLOCK_MONOTONIC, &t0);
  ncclAllReduce(b, b, 1024, ncclFloat, ncclSum, comm, NULL);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  getrusage(RUSAGE_SELF, &r1);
  double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
               1e-6 * ((r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec));
  if (rank == 0)
    printf("rank 0 waited %.2f s wall, %.2f s CPU\n", (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec), cpu);
  ncclCommDestroy(comm);
  if (rank == 0) waitpid(kid, NULL, 0);
  return 0;
}
