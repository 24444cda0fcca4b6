/*
 * harness.c - the multi-rank runner of harness.h.
 */
#include "harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct thread_arg {
  struct harness_rank r;
  harness_fn fn;
  int result;
};

static void* thread_main(void* p) {
  struct thread_arg* a = p;
  a->result = a->fn(&a->r);
  return NULL;
}

/* Run ranks [first, first + n) as threads; returns how many failed. */
static int run_threads(int first, int n, int nranks, const ncclUniqueId* id, harness_fn fn, void* arg) {
  struct thread_arg* args = calloc(n, sizeof(*args));
  pthread_t* th = calloc(n, sizeof(*th));
  int failed = 0;
  for (int i = 0; i < n; i++) {
    args[i].r = (struct harness_rank){first + i, nranks, *id, arg};
    args[i].fn = fn;
    if (pthread_create(&th[i], NULL, thread_main, &args[i]) != 0) {
      args[i].result = 1;
      th[i] = 0;
    }
  }
  for (int i = 0; i < n; i++) {
    if (th[i]) pthread_join(th[i], NULL);
    failed += args[i].result != 0;
  }
  free(args);
  free(th);
  return failed;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Every process the harness forked in this process, and when (CLOCK_REALTIME, taken before the
 * fork), so that harness_count_shm counts only what this test's ranks made: other test runs may
 * share /dev/shm, and a segment an earlier process left behind carries that process's pid,
 * which the kernel hands out again (pid_max is 32768 here; a suite forks thousands). */
static struct {
  pid_t pid;
  double since;
} children[4096];
static int nchildren;
static double real_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}
static void remember_child(pid_t pid, double since) {
  if (nchildren < (int)(sizeof(children) / sizeof(children[0])))
    children[nchildren].pid = pid, children[nchildren].since = since, nchildren++;
}
/* When this process started (CLOCK_REALTIME): /proc/stat's btime plus /proc/self/stat's
 * starttime; 0 when unknown (then every segment named for this pid counts). */
static double self_since(void) {
  char buf[1024];
  double btime = 0, start = 0;
  FILE* f = fopen("/proc/stat", "r");
  if (f == NULL) return 0;
  while (fgets(buf, sizeof(buf), f) != NULL)
    if (strncmp(buf, "btime ", 6) == 0) btime = strtod(buf + 6, NULL);
  fclose(f);
  f = fopen("/proc/self/stat", "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')'); /* field 2 (the name) may hold spaces */
  for (int field = 2; p != NULL && field < 22; field++) p = strchr(p + 1, ' ');
  if (p == NULL || btime == 0) return 0;
  start = strtod(p + 1, NULL) / (double)sysconf(_SC_CLK_TCK);
  return btime + start;
}
/* Whether a segment named for `pid`, last modified at `mtime`, is this test's: made by this
 * process or one it forked, since that process began (1 s of slack: file times come from a
 * coarse clock, and btime is whole seconds). */
static int ours(pid_t pid, double mtime) {
  static pid_t self_pid; /* this process's start, read once (a forked child reads its own) */
  static double self_start;
  if (pid == getpid()) {
    if (self_pid != pid) self_start = self_since(), self_pid = pid;
    return mtime >= self_start - 1.0;
  }
  for (int i = 0; i < nchildren; i++)
    if (children[i].pid == pid) return mtime >= children[i].since - 1.0;
  return 0;
}

static int run_procs(int nranks, int per_proc, const ncclUniqueId* id, harness_fn fn, void* arg, int timeout_s) {
  int nprocs = (nranks + per_proc - 1) / per_proc, failed = 0;
  pid_t* pids = calloc(nprocs, sizeof(*pids));
  fflush(stdout);
  fflush(stderr);
  for (int p = 0; p < nprocs; p++) {
    int first = p * per_proc, n = first + per_proc <= nranks ? per_proc : nranks - first;
    double since = real_now();
    pids[p] = fork();
    if (pids[p] > 0) remember_child(pids[p], since);
    if (pids[p] == 0) {
      int f = run_threads(first, n, nranks, id, fn, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(f == 0 ? 0 : 1);
    }
    if (pids[p] < 0) failed += n;
  }
  double deadline = now() + timeout_s;
  int alive = nprocs;
  while (alive > 0) {
    alive = 0;
    for (int p = 0; p < nprocs; p++) {
      if (pids[p] <= 0) continue;
      int status;
      pid_t w = waitpid(pids[p], &status, WNOHANG);
      if (w == 0) {
        alive++;
        continue;
      }
      if (w < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        if (w > 0 && WIFSIGNALED(status))
          fprintf(stderr, "harness: process %d (ranks from %d) killed by signal %d\n", p, p * per_proc,
                  WTERMSIG(status));
        failed++;
      }
      pids[p] = 0;
    }
    if (alive > 0 && now() > deadline) {
      fprintf(stderr, "harness: %d processes still running after %d s: killing them\n", alive, timeout_s);
      for (int p = 0; p < nprocs; p++) {
        if (pids[p] > 0) {
          kill(pids[p], SIGKILL);
          waitpid(pids[p], NULL, 0);
          failed++;
        }
      }
      break;
    }
    if (alive > 0) usleep(2000);
  }
  free(pids);
  return failed;
}

int harness_run(int nranks, enum harness_mode mode, harness_fn fn, void* arg, int timeout_s) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "harness: ncclGetUniqueId failed: %s\n", ncclGetLastError(NULL));
    return nranks;
  }
  switch (mode) {
    case HARNESS_THREADS:
      return run_threads(0, nranks, nranks, &id, fn, arg);
    case HARNESS_PROCS:
      return run_procs(nranks, 1, &id, fn, arg, timeout_s);
    case HARNESS_PAIRS:
      return run_procs(nranks, 2, &id, fn, arg, timeout_s);
  }
  return nranks;
}

int harness_fail(const struct harness_rank* r, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  fprintf(stderr, "rank %d/%d: %s\n", r->rank, r->nranks, buf);
  return 1;
}

static int count_dir(const char* path, const char* prefix) {
  DIR* d = opendir(path);
  if (d == NULL) return -1;
  int n = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (prefix == NULL || strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
  }
  closedir(d);
  return n;
}

int harness_count_fds(void) {
  return count_dir("/proc/self/fd", NULL) - 1; /* minus opendir's own */
}
int harness_count_threads(void) {
  return count_dir("/proc/self/task", NULL);
}
/* braid's names carry their creator's pid: braid-<pid>-..., or braid-<kind>-<pid>-... */
static pid_t shm_creator(const char* name) {
  const char* p = name + strlen("braid-");
  if (*p < '0' || *p > '9') {
    p = strchr(p, '-');
    if (p == NULL) return -1;
    p++;
  }
  char* end;
  long pid = strtol(p, &end, 10);
  return end != p && *end == '-' ? (pid_t)pid : -1;
}

int harness_count_shm(void) {
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    struct stat st;
    if (strncmp(e->d_name, "braid-", 6) != 0 || fstatat(dirfd(d), e->d_name, &st, 0) != 0) continue;
    n += ours(shm_creator(e->d_name), (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9);
  }
  closedir(d);
  return n;
}

int harness_count_lines(const char* path, const char* word) {
  FILE* f = fopen(path, "r");
  char line[1024];
  int n = 0;
  if (f == NULL) return -1;
  while (fgets(line, sizeof(line), f) != NULL) n += strstr(line, word) != NULL;
  fclose(f);
  return n;
}

const char* harness_mode_name(enum harness_mode mode) {
  return mode == HARNESS_THREADS ? "threads" : mode == HARNESS_PROCS ? "processes" : "pairs";
}

const char* harness_runner_path(char* out, size_t len, const char* rel) {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  exe[n > 0 ? n : 0] = '\0';
  snprintf(out, len, "%s/%s", n > 0 ? dirname(exe) : ".", rel);
  return out;
}
