/*
 * kill_soak.c - one kill trial (tests/soak/kill-soak.sh runs many): NRANKS processes make a
 * communicator, one (the victim) dies at a chosen phase, and every survivor must fail without
 * hanging, naming the victim first in its error; nothing of any trial process may stay in
 * /dev/shm. Prints one line: "trial ok|FAIL hang=H named=N/S leaks=L took=T s <why>".
 *   kill_soak NRANKS PER_NODE VICTIM PHASE
 * PHASE: init-connect (dies before connecting its sends), init-shm (after creating its receive
 * segment), coll (SIGKILL 30 ms into a 32 MiB all-reduce loop), coll-early (SIGKILL after the
 * first all-reduce). PER_NODE: ranks per fake node (NCCL_HOSTID); 0: all on one node.
 */
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define MAXR 16
#define TRIAL_TIMEOUT_S 60

struct shared {
  int named[MAXR]; /* first rank named by rank r's error; -2: succeeded; -3: not reported */
  char err[MAXR][200];
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int first_named(const char* msg, int self, int nranks) {
  const char* first = NULL;
  int named = -1;
  for (int q = 0; q < nranks; q++) {
    char who[32];
    snprintf(who, sizeof(who), "rank %d (host", q);
    const char* at = q != self ? strstr(msg, who) : NULL;
    if (at != NULL && (first == NULL || at < first)) {
      first = at;
      named = q;
    }
  }
  return named;
}

static void* suicide(void* arg) {
  usleep(30000);
  raise(SIGKILL);
  return NULL;
}

static void rank_main(struct shared* sh, ncclUniqueId id, int nranks, int per_node, int victim, const char* phase,
                      int rank) {
  char host[32];
  snprintf(host, sizeof(host), "soak-node-%d", per_node > 0 ? rank / per_node : 0);
  setenv("NCCL_HOSTID", host, 1);
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  if (rank == victim && strcmp(phase, "init-connect") == 0) setenv("BRAID_FAULT_INJECT", "bootstrap.recv#1:kill", 1);
  if (rank == victim && strcmp(phase, "init-shm") == 0) setenv("BRAID_FAULT_INJECT", "bootstrap.send#2:kill", 1);
  ncclComm_t comm;
  size_t count = (32u << 20) / sizeof(float);
  float* buf = calloc(count, sizeof(float));
  ncclResult_t res = ncclCommInitRank(&comm, nranks, id, rank);
  if (res == ncclSuccess) {
    res = ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, NULL);
    if (rank == victim && strcmp(phase, "coll-early") == 0) raise(SIGKILL);
    if (rank == victim && strcmp(phase, "coll") == 0) {
      pthread_t t;
      pthread_create(&t, NULL, suicide, NULL);
    }
    for (int i = 0; i < 200 && res == ncclSuccess; i++)
      res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  }
  const char* e = ncclGetLastError(NULL);
  sh->named[rank] = res == ncclSuccess ? -2 : first_named(e, rank, nranks);
  snprintf(sh->err[rank], sizeof(sh->err[rank]), "%s", e);
  _exit(0); /* at once, without destroying: the hardest case for blame */
}

static int shm_left(const pid_t* pids, int n) {
  int left = 0;
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    for (int i = 0; i < n; i++) {
      char prefix[32];
      snprintf(prefix, sizeof(prefix), "braid-%d-", (int)pids[i]);
      left += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    }
  closedir(d);
  return left;
}

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: kill_soak NRANKS PER_NODE VICTIM PHASE\n");
    return 2;
  }
  int nranks = atoi(argv[1]), per_node = atoi(argv[2]), victim = atoi(argv[3]);
  const char* phase = argv[4];
  if (nranks < 2 || nranks > MAXR || victim < 0 || victim >= nranks) return 2;
  struct shared* sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  for (int r = 0; r < nranks; r++) sh->named[r] = -3;
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  pid_t pids[MAXR];
  double t0 = now_s();
  for (int r = 0; r < nranks; r++)
    if ((pids[r] = fork()) == 0) rank_main(sh, id, nranks, per_node, victim, phase, r);
  int alive = nranks, hang = 0;
  while (alive > 0) {
    int st;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      alive--;
      continue;
    }
    if (now_s() - t0 > TRIAL_TIMEOUT_S) {
      for (int r = 0; r < nranks; r++)
        if (sh->named[r] == -3 && r != victim) hang++;
      for (int r = 0; r < nranks; r++) kill(pids[r], SIGKILL);
      while (waitpid(-1, &st, 0) > 0) {
      }
      break;
    }
    usleep(10000);
  }
  double took = now_s() - t0;
  usleep(200000); /* a survivor's cleanup of a dead rank's segments runs before it exits */
  int leaks = shm_left(pids, nranks), named = 0, survivors = nranks - 1, bad = -1;
  for (int r = 0; r < nranks; r++) {
    if (r == victim) continue;
    if (sh->named[r] == victim)
      named++;
    else if (bad < 0)
      bad = r;
  }
  int ok = hang == 0 && leaks == 0 && named == survivors;
  printf("trial %s hang=%d named=%d/%d leaks=%d took=%.2f s", ok ? "ok" : "FAIL", hang, named, survivors, leaks, took);
  if (bad >= 0) printf(" rank %d: %s", bad, sh->named[bad] == -2 ? "succeeded" : sh->err[bad]);
  printf("\n");
  return ok ? 0 : 1;
}
