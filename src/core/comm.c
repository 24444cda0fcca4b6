/*
 * comm.c - communicator bookkeeping shared by init and the API: the registry of live
 * communicators (a handle is checked on every call, so a destroyed or garbage handle gives an
 * error instead of a crash), host identity, and the simple queries (count, rank, device).
 */
#include "core/comm.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/api.h"
#include "base/check.h"
#include "base/param.h"
#include "core/blame.h"
#include "core/flight.h"
#include "core/mismatch.h"
#include "core/sym/sym.h"
#include "device/launch.h"
#include "transport/cma.h"

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct braid_comm** registry;
static int registry_len, registry_cap;
/* Bumped under the mutex by every add and remove: a communicator this thread found registered
 * at version v is still registered while the version is v (braid_comm_registry_valid's cache,
 * which keeps the mutex off every call's path). */
static uint64_t registry_version;
static __thread struct {
  const struct braid_comm* comm;
  uint32_t gen;
  uint64_t version;
} registry_seen;

double braid_time_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void braid_comm_registry_add(struct braid_comm* comm) {
  pthread_mutex_lock(&registry_mutex);
  if (registry_len == registry_cap) {
    int cap = registry_cap ? 2 * registry_cap : 16;
    struct braid_comm** grown = realloc(registry, cap * sizeof(*grown));
    if (grown != NULL) {
      registry = grown;
      registry_cap = cap;
    }
  }
  if (registry_len < registry_cap) registry[registry_len++] = comm;
  __atomic_add_fetch(&registry_version, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&registry_mutex);
  braid_flight_signal_setup();
}

void braid_comm_registry_remove(struct braid_comm* comm) {
  pthread_mutex_lock(&registry_mutex);
  for (int i = 0; i < registry_len; i++) {
    if (registry[i] == comm) {
      registry[i] = registry[--registry_len];
      break;
    }
  }
  __atomic_add_fetch(&registry_version, 1, __ATOMIC_RELEASE);
  int last = registry_len == 0;
  if (last) {
    free(registry);
    registry = NULL;
    registry_cap = 0;
  }
  pthread_mutex_unlock(&registry_mutex);
  if (last) braid_flight_signal_stop();
}

void braid_comm_registry_foreach(void (*fn)(struct braid_comm* comm, void* arg), void* arg) {
  pthread_mutex_lock(&registry_mutex);
  for (int i = 0; i < registry_len; i++) fn(registry[i], arg);
  pthread_mutex_unlock(&registry_mutex);
}

/* ncclCommAbort's claim: atomically, the comm is live and from now on the aborter frees it. */
int braid_comm_registry_claim(struct braid_comm* comm) {
  int ok = 0;
  pthread_mutex_lock(&registry_mutex);
  for (int i = 0; i < registry_len && !ok; i++) ok = registry[i] == comm;
  if (ok && comm->magic == BRAID_COMM_MAGIC && !comm->claimed) {
    comm->claimed = 1;
    __atomic_store_n(&comm->abort_flag, BRAID_EXEC_ABORTED, __ATOMIC_RELEASE);
  } else {
    ok = 0;
  }
  pthread_mutex_unlock(&registry_mutex);
  return ok;
}

/* A failed init's cleanup: unless claimed by an abort, unregister and let the caller free. */
int braid_comm_registry_take(struct braid_comm* comm) {
  int mine = 0;
  pthread_mutex_lock(&registry_mutex);
  if (!comm->claimed) {
    comm->claimed = 1;
    mine = 1;
    for (int i = 0; i < registry_len; i++) {
      if (registry[i] == comm) {
        registry[i] = registry[--registry_len];
        break;
      }
    }
  }
  int last = mine && registry_len == 0;
  pthread_mutex_unlock(&registry_mutex);
  if (last) braid_flight_signal_stop();
  return mine;
}

static pthread_mutex_t raise_mutex = PTHREAD_MUTEX_INITIALIZER;

/* The reason when `peer` was resolved to `blamed` (blame.c): the blamed rank first. */
static void blame_compose(struct braid_comm* comm, char* out, size_t len, int peer, int blamed, const char* why,
                          const char* msg) {
  char who[160];
  if (blamed != peer)
    snprintf(out, len, "rank %d: %s failed first; %s; seen here: %s", comm->rank,
             braid_transport_peer_name(&comm->tctx, blamed, who, sizeof(who)), why, msg);
  else if (why[0])
    snprintf(out, len, "%s; %s", msg, why);
  else
    snprintf(out, len, "%s", msg);
}

static int comm_vraise(struct braid_comm* comm, int status, ncclResult_t res, int peer, int wait, const char* fmt,
                       va_list ap) {
  int raised = 0, blamed = peer;
  char msg[BRAID_REASON_MAX], why[BRAID_REASON_MAX] = "";
  vsnprintf(msg, sizeof(msg), fmt, ap);
  /* a peer that left may have left because of another one: its notice says */
  if (wait && status == BRAID_EXEC_PEER_FAILED && __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) == 0)
    blamed = braid_blame_resolve(comm, peer, BRAID_BLAME_WAIT_MS, why, sizeof(why));
  pthread_mutex_lock(&raise_mutex);
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) == 0) {
    blame_compose(comm, comm->abort_reason, sizeof(comm->abort_reason), peer, blamed, why, msg);
    comm->failed_peer = blamed;
    if (res != ncclSuccess) comm->async_error = res;
    __atomic_store_n(&comm->abort_flag, (uint32_t)status, __ATOMIC_RELEASE);
    raised = 1;
    /* printed, not recorded: the call that fails because of it says so (ncclGetLastError) */
    braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_INIT, __FILE__, __LINE__, "rank %d: %s", comm->rank, comm->abort_reason);
  }
  pthread_mutex_unlock(&raise_mutex);
  if (raised && comm->flight != NULL) braid_flight_dump(comm, comm->abort_reason, -1); /* it ran calls */
  if (raised && wait) braid_blame_tell(comm); /* before the failing call can return */
  return raised;
}

int braid_comm_raise(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int raised = comm_vraise(comm, status, res, peer, 1, fmt, ap);
  va_end(ap);
  return raised;
}

int braid_comm_raise_nowait(struct braid_comm* comm, int status, ncclResult_t res, int peer, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int raised = comm_vraise(comm, status, res, peer, 0, fmt, ap);
  va_end(ap);
  return raised;
}

void braid_comm_reblame(struct braid_comm* comm, int peer, int blamed, const char* why) {
  char old[sizeof(comm->abort_reason)];
  pthread_mutex_lock(&raise_mutex);
  if (comm->failed_peer == peer) {
    memcpy(old, comm->abort_reason, sizeof(old));
    blame_compose(comm, comm->abort_reason, sizeof(comm->abort_reason), peer, blamed, why, old);
    comm->failed_peer = blamed;
    braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_INIT, __FILE__, __LINE__, "rank %d: %s", comm->rank, comm->abort_reason);
  }
  pthread_mutex_unlock(&raise_mutex);
}

int braid_comm_pid_gone(int pid) {
  char path[64], buf[512];
  if (kill(pid, 0) != 0) return errno == ESRCH;
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (f == NULL) return 0; /* no procfs: it runs, as far as we can tell */
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char* close_paren = strrchr(buf, ')'); /* the state follows "(comm)" */
  return close_paren != NULL && (close_paren[2] == 'Z' || close_paren[2] == 'X');
}

uint32_t braid_comm_new_gen(void) {
  static uint32_t counter;
  return (uint32_t)(__atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED) % BRAID_HANDLE_GEN_MASK) + 1;
}

/* Registered, and of that generation: a pointer is compared before anything is read. The
 * answer this thread last got stands while no communicator came or went. */
int braid_comm_registry_valid(const struct braid_comm* comm, uint32_t gen) {
  if (registry_seen.comm == comm && registry_seen.gen == gen &&
      registry_seen.version == __atomic_load_n(&registry_version, __ATOMIC_ACQUIRE))
    return 1;
  int found = 0;
  pthread_mutex_lock(&registry_mutex);
  for (int i = 0; i < registry_len && !found; i++) found = registry[i] == comm;
  found = found && comm->magic == BRAID_COMM_MAGIC && comm->handle_gen == gen;
  if (found) {
    registry_seen.comm = comm;
    registry_seen.gen = gen;
    registry_seen.version = registry_version;
  }
  pthread_mutex_unlock(&registry_mutex);
  return found;
}

/* Is `comm` a live communicator? (Any state.) */
static ncclResult_t comm_alive(ncclComm_t handle, const char* fn) {
  struct braid_comm* comm = braid_comm_of(handle);
  if (handle == NULL) {
    BRAID_WARN("%s: comm argument is NULL", fn);
    return ncclInvalidArgument;
  }
  if (!braid_comm_registry_valid(comm, (uint32_t)((uintptr_t)handle & BRAID_HANDLE_GEN_MASK))) {
    BRAID_WARN("%s: comm %p has already been destroyed or is not a valid communicator", fn, (void*)handle);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t braid_comm_check_resumable(ncclComm_t handle, const char* fn) {
  BRAID_CHECK(comm_alive(handle, fn));
  struct braid_comm* comm = braid_comm_of(handle);
  if (comm->abort_flag) {
    /* A failure braid raised (a dead peer, BRAID_TIMEOUT) keeps its reason: every later call
     * repeats it, naming the rank (braid_comm_raise). */
    if (comm->abort_reason[0])
      BRAID_WARN("%s: rank %d: communicator %p failed: %s", fn, comm->rank, (void*)comm, comm->abort_reason);
    else
      BRAID_WARN("%s: rank %d: communicator %p was aborted or hit an error (%s)", fn, comm->rank, (void*)comm,
                 ncclGetErrorString(comm->async_error));
    return ncclInvalidUsage;
  }
  switch (comm->state) {
    case BRAID_COMM_READY:
      return ncclSuccess;
    case BRAID_COMM_INITIALIZING:
      BRAID_WARN("%s: rank %d: communicator %p is still initializing (poll ncclCommGetAsyncError)", fn, comm->rank,
                 (void*)comm);
      return ncclInvalidUsage;
    case BRAID_COMM_FINALIZED:
      BRAID_WARN("%s: rank %d: communicator %p was finalized", fn, comm->rank, (void*)comm);
      return ncclInvalidUsage;
    default:
      BRAID_WARN("%s: rank %d: communicator %p failed to initialize (%s)", fn, comm->rank, (void*)comm,
                 ncclGetErrorString(comm->async_error));
      return ncclInvalidUsage;
  }
}

/* Every call but resume and the queries: a suspended communicator is refused too (sym/). */
ncclResult_t braid_comm_check(ncclComm_t handle, const char* fn) {
  /* Every call's case in one test: the pointer and generation this thread last found
   * registered (the registry unchanged since), not failed, ready, not suspended. Anything else
   * takes the checks below, which say what is wrong. */
  const struct braid_comm* comm = braid_comm_of(handle);
  if (handle != NULL && registry_seen.comm == comm &&
      registry_seen.gen == (uint32_t)((uintptr_t)handle & BRAID_HANDLE_GEN_MASK) &&
      registry_seen.version == __atomic_load_n(&registry_version, __ATOMIC_ACQUIRE) && !comm->abort_flag &&
      comm->state == BRAID_COMM_READY && (comm->sym == NULL || !comm->sym->suspended))
    return ncclSuccess;
  BRAID_CHECK(braid_comm_check_resumable(handle, fn));
  return braid_sym_check_active(braid_comm_of(handle), fn);
}

BRAID_API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  BRAID_CHECK(comm_alive(comm, "ncclCommCount"));
  if (count == NULL) {
    BRAID_WARN("ncclCommCount: count argument is NULL");
    return ncclInvalidArgument;
  }
  *count = braid_comm_of(comm)->nranks;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommCount)

BRAID_API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  BRAID_CHECK(comm_alive(comm, "ncclCommUserRank"));
  if (rank == NULL) {
    BRAID_WARN("ncclCommUserRank: rank argument is NULL");
    return ncclInvalidArgument;
  }
  *rank = braid_comm_of(comm)->rank;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommUserRank)

BRAID_API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  BRAID_CHECK(comm_alive(comm, "ncclCommCuDevice"));
  if (device == NULL) {
    BRAID_WARN("ncclCommCuDevice: device argument is NULL");
    return ncclInvalidArgument;
  }
  *device = braid_comm_of(comm)->cuda_dev;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommCuDevice)

BRAID_API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  BRAID_CHECK(comm_alive(comm, "ncclCommGetAsyncError"));
  if (asyncError == NULL) {
    BRAID_WARN("ncclCommGetAsyncError: asyncError argument is NULL");
    return ncclInvalidArgument;
  }
  struct braid_comm* c = braid_comm_of(comm);
  /* Device mode: statuses of finished kernels (an error becomes async_error). */
  if (c->state == BRAID_COMM_READY) braid_launch_poll(c);
  *asyncError = c->async_error;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclCommGetAsyncError)

/* 64-bit FNV-1a: any stable hash works, values are only compared. */
uint64_t braid_hash(const void* data, size_t len, uint64_t seed) {
  const unsigned char* p = data;
  uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

static void read_line(const char* path, char* buf, size_t len) {
  buf[0] = '\0';
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  if (fgets(buf, (int)len, f) == NULL) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
}

void braid_comm_fill_identity(struct braid_comm* comm, struct braid_peer_info* me) {
  char ident[512], ns[128] = "";
  memset(me, 0, sizeof(*me));
  me->rank = comm->rank;
  me->pid = (int)getpid();
  gethostname(me->hostname, sizeof(me->hostname) - 1);
  char boot[64];
  read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
  snprintf(ident, sizeof(ident), "%s", boot[0] ? boot : me->hostname);
  me->kernel_hash = braid_hash(ident, strlen(ident), 0);
  const char* hostid = braid_param_str(BRAID_PARAM_HOSTID);
  if (hostid != NULL)
    snprintf(ident, sizeof(ident), "%s", hostid);
  else
    snprintf(ident, sizeof(ident), "%s%s", me->hostname, boot);
  me->host_hash = braid_hash(ident, strlen(ident), 0);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < BRAID_CPU_WORDS * 64 && c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &set)) me->cpus[c / 64] |= 1ull << (c % 64);
  }
  ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0) ns[n] = '\0';
  snprintf(ident, sizeof(ident), "%d%s", me->pid, ns);
  me->pid_hash = braid_hash(ident, strlen(ident), me->host_hash);
  me->cma_probe = braid_cma_probe_word(me->pid_hash);
  struct stat st;
  me->shm_dev = stat("/dev/shm", &st) == 0 ? (uint64_t)st.st_dev : 0;
  me->cuda_dev = comm->cuda_dev;
  me->bus_id = comm->bus_id;
  me->host_mode = comm->host_mode;
  me->version = NCCL_VERSION_CODE;
  me->must_agree = braid_mismatch_enabled() ? BRAID_PEER_AGREE_CHECK_MISMATCH : 0;
}
