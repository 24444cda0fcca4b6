/*
 * flight.c - the flight recorder (flight.h). One ring of entries per communicator, allocated
 * at its first call; the thread that runs a group writes it, a dump reads it from any thread
 * without a lock (a dump is a diagnosis: an entry being rewritten may show half old, half new;
 * its sequence number is read before and after and such an entry is marked "(changing)").
 * SIGUSR1: the handler only writes a byte to a pipe; a thread started with the handler reads
 * it and dumps every registered communicator.
 */
#include "core/flight.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "core/comm.h"
#include "core/group.h"
#include "core/mismatch.h"
#include "core/watchdog.h"

struct flight_entry {
  volatile uint64_t id; /* 1, 2, ...: the call's number on this communicator; 0 unused */
  int kind, func, dtype, op, root;
  size_t count;
  volatile int state;
  volatile int nchannels;
  int64_t t_queued, t_started, t_ended; /* ns, CLOCK_MONOTONIC */
  /* Host mode: braid_watchdog_steps when it started (FLIGHT_NO_STEPS: a call that moves
   * nothing on connections, the direct path), and the steps its group moved (sent + consumed
   * on this rank's connections) once it ended; -1 while unknown. */
  uint64_t steps0;
  volatile int64_t steps;
};

/* steps0 of a call run without connections: its steps so far are 0, with no counter read. */
#define FLIGHT_NO_STEPS UINT64_MAX

/* The counters braid_watchdog_steps sums, kept while comm->conn_gen stays: a call's two
 * readings then cost a load per connection, not a walk over every channel's ring, tree and
 * peer slots (a fifth of a host-mode 8-byte all-reduce). Only the thread running a group on
 * the communicator uses it; a dump walks the connections itself. */
struct flight_counters {
  int valid, n, cap;
  uint32_t gen;
  const volatile uint64_t** ptrs;
};

struct braid_flight {
  int n;            /* BRAID_FLIGHT_CALLS: the dump shows the last n calls */
  uint64_t mask;    /* the ring holds mask + 1 >= n entries, a power of two: no division per call */
  uint64_t next_id; /* the last id given */
  struct flight_counters ctr;
  struct flight_entry e[];
};

/* The coarse clock (the kernel's tick, a few ms; CLOCK_MONOTONIC's base): the record is read
 * in milliseconds, and it is taken three times per call, where a precise clock_gettime costs
 * as much as a small host-mode all-reduce's data path on some VMs. */
static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct braid_flight* flight_of(struct braid_comm* comm) {
  struct braid_flight* f = __atomic_load_n(&comm->flight, __ATOMIC_ACQUIRE);
  if (f != NULL) return f;
  int64_t n = braid_param_int(BRAID_PARAM_FLIGHT_CALLS);
  if (n <= 0) return NULL;
  uint64_t cap = 1;
  while (cap < (uint64_t)n) cap <<= 1;
  f = calloc(1, sizeof(*f) + (size_t)cap * sizeof(f->e[0]));
  if (f == NULL) return NULL; /* no record: nothing else changes */
  f->n = (int)n;
  f->mask = cap - 1;
  struct braid_flight* expected = NULL;
  if (!__atomic_compare_exchange_n(&comm->flight, &expected, f, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    free(f);
    f = expected;
  }
  return f;
}

/* braid_watchdog_steps(comm), from the kept list (rebuilt when a connection came or went). */
static uint64_t steps_now(struct braid_comm* comm, struct flight_counters* c) {
  uint32_t gen = __atomic_load_n(&comm->conn_gen, __ATOMIC_ACQUIRE);
  if (!c->valid || c->gen != gen) {
    c->valid = 0;
    int n = braid_watchdog_step_counters(comm, c->ptrs, c->cap);
    if (n > c->cap) {
      const volatile uint64_t** p = realloc((void*)c->ptrs, (size_t)n * sizeof(*p));
      if (p == NULL) return braid_watchdog_steps(comm); /* no list: the walk */
      c->ptrs = p;
      c->cap = n;
      n = braid_watchdog_step_counters(comm, c->ptrs, c->cap);
    }
    c->n = n;
    c->gen = gen;
    c->valid = 1;
  }
  uint64_t sum = 0;
  for (int i = 0; i < c->n; i++) sum += __atomic_load_n(c->ptrs[i], __ATOMIC_ACQUIRE);
  return sum;
}

uint64_t braid_flight_add(struct braid_task* t) {
  struct braid_flight* f = flight_of(t->comm);
  if (f == NULL) return 0;
  uint64_t id = __atomic_add_fetch(&f->next_id, 1, __ATOMIC_ACQ_REL);
  struct flight_entry* e = &f->e[(id - 1) & f->mask];
  __atomic_store_n(&e->id, 0, __ATOMIC_RELEASE); /* changing */
  e->kind = t->kind;
  e->func = t->func;
  e->dtype = t->dtype;
  e->op = t->op;
  e->root = t->root;
  e->count = t->count;
  e->state = BRAID_FLIGHT_QUEUED;
  e->nchannels = 0;
  e->t_queued = now_ns();
  e->t_started = e->t_ended = 0;
  e->steps0 = 0;
  e->steps = -1;
  __atomic_store_n(&e->id, id, __ATOMIC_RELEASE);
  return id;
}

void braid_flight_set(struct braid_comm* comm, uint64_t id, int state, int nchannels) {
  struct braid_flight* f = __atomic_load_n(&comm->flight, __ATOMIC_ACQUIRE);
  if (f == NULL || id == 0) return;
  struct flight_entry* e = &f->e[(id - 1) & f->mask];
  if (e->id != id) return; /* overwritten by a newer call */
  int host = comm->device == NULL;
  if (state == BRAID_FLIGHT_RUNNING || state == BRAID_FLIGHT_LAUNCHED) e->t_started = now_ns();
  if (state == BRAID_FLIGHT_RUNNING && host) e->steps0 = steps_now(comm, &f->ctr);
  if (state == BRAID_FLIGHT_DONE || state == BRAID_FLIGHT_FAILED) {
    e->t_ended = now_ns();
    if (host && e->t_started) e->steps = (int64_t)(steps_now(comm, &f->ctr) - e->steps0);
  }
  if (nchannels >= 0) e->nchannels = nchannels;
  __atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

void braid_flight_set_direct(struct braid_comm* comm, uint64_t id, int state) {
  struct braid_flight* f = __atomic_load_n(&comm->flight, __ATOMIC_ACQUIRE);
  if (f == NULL || id == 0) return;
  struct flight_entry* e = &f->e[(id - 1) & f->mask];
  if (e->id != id) return; /* overwritten by a newer call */
  if (state == BRAID_FLIGHT_RUNNING) {
    e->t_started = e->t_queued;  /* the same coarse tick: nothing ran in between */
    e->steps0 = FLIGHT_NO_STEPS; /* it moves no connection's steps: no counter to read */
    e->nchannels = 1;
  } else {
    e->t_ended = now_ns();
    e->steps = 0;
  }
  __atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

static const char* state_name(int s) {
  static const char* names[] = {"?", "queued", "running", "launched", "done", "FAILED"};
  return s >= 0 && s <= BRAID_FLIGHT_FAILED ? names[s] : "?";
}

static const char* call_name(int kind, int func) {
  return kind == BRAID_TASK_SEND ? "Send" : kind == BRAID_TASK_RECV ? "Recv" : braid_func_name(func);
}

static double ms_ago(int64_t now, int64_t t) {
  return t ? (double)(now - t) * 1e-6 : -1.0;
}

#define APPEND(...)                                                    \
  do {                                                                 \
    if (n < len) n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__); \
  } while (0)

size_t braid_flight_format(struct braid_comm* comm, const char* why, char* buf, size_t len) {
  size_t n = 0;
  int64_t now = now_ns();
  struct braid_flight* f = __atomic_load_n(&comm->flight, __ATOMIC_ACQUIRE);
  const struct braid_peer_info* me = comm->peers != NULL ? &comm->peers[comm->rank] : NULL;
  APPEND("braid flight recorder: comm %p commId 0x%llx rank %d of %d (host %s, pid %d): %s\n", (void*)comm,
         (unsigned long long)comm->comm_hash, comm->rank, comm->nranks, me ? me->hostname : "?", (int)getpid(), why);
  if (f == NULL) {
    APPEND("  no call recorded (BRAID_FLIGHT_CALLS=%lld)\n", (long long)braid_param_int(BRAID_PARAM_FLIGHT_CALLS));
  } else {
    uint64_t last = __atomic_load_n(&f->next_id, __ATOMIC_ACQUIRE);
    uint64_t first = last > (uint64_t)f->n ? last - (uint64_t)f->n + 1 : 1;
    APPEND(
        "  call   function          count  type      op       root/peer  channels  state     steps    ms since "
        "queued/started/ended\n");
    for (uint64_t id = first; id <= last && id > 0; id++) {
      struct flight_entry c = f->e[(id - 1) & f->mask];
      int changing = c.id != id;
      int has_op = c.kind == BRAID_TASK_COLL && (c.func == BRAID_FUNC_AllReduce || c.func == BRAID_FUNC_Reduce ||
                                                 c.func == BRAID_FUNC_ReduceScatter);
      int has_root = c.kind != BRAID_TASK_COLL || c.func == BRAID_FUNC_Broadcast || c.func == BRAID_FUNC_Reduce;
      char root[16] = "-", steps[24] = "-";
      if (has_root) snprintf(root, sizeof(root), "%d", c.root);
      if (c.steps >= 0) /* its group's steps: the calls of a group run together */
        snprintf(steps, sizeof(steps), "%lld", (long long)c.steps);
      else if (c.state == BRAID_FLIGHT_RUNNING && comm->device == NULL) /* so far */
        snprintf(steps, sizeof(steps), "%lld+",
                 c.steps0 == FLIGHT_NO_STEPS ? 0LL : (long long)(braid_watchdog_steps(comm) - c.steps0));
      APPEND("  %-6llu %-13s %9zu  %-9s %-8s %9s %9d  %-9s %-8s %.1f/%.1f/%.1f%s\n", (unsigned long long)id,
             call_name(c.kind, c.func), c.count, braid_dtype_name(c.dtype), has_op ? braid_op_name(c.op) : "-", root,
             c.nchannels, state_name(c.state), steps, ms_ago(now, c.t_queued), ms_ago(now, c.t_started),
             ms_ago(now, c.t_ended), changing ? " (changing)" : "");
    }
  }
  if (n < len) n += braid_watchdog_describe(comm, buf + n, len - n);
  APPEND("end of braid flight recorder (rank %d)\n", comm->rank);
  return n < len ? n : len - 1;
}

static void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

void braid_flight_dump(struct braid_comm* comm, const char* why, int fd) {
  size_t len = 64 << 10;
  char* buf = malloc(len);
  if (buf == NULL) return;
  size_t n = braid_flight_format(comm, why, buf, len);
  write_all(STDERR_FILENO, buf, n);
  if (fd >= 0) write_all(fd, buf, n);
  free(buf);
}

void braid_flight_free(struct braid_comm* comm) {
  if (comm->flight != NULL) free((void*)comm->flight->ctr.ptrs);
  free(comm->flight);
  comm->flight = NULL;
}

/* ---- SIGUSR1 ------------------------------------------------------------------------------- */

/* While a communicator lives: the handler writes a byte into the pipe, the thread reads it
 * and dumps. With the last communicator the thread ends and SIGUSR1 gets its default action
 * back (nothing of the recorder outlives the communicators: no thread, no descriptor). */
static int sig_write_fd = -1;
static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int sig_pid; /* the process whose thread reads the pipe (a fork's child starts its own) */

static void on_sigusr1(int sig) {
  int saved = errno;
  char c = 1;
  int fd = __atomic_load_n(&sig_write_fd, __ATOMIC_ACQUIRE);
  if (fd >= 0) (void)!write(fd, &c, 1);
  errno = saved;
}

static void dump_one(struct braid_comm* comm, void* arg) {
  braid_flight_dump(comm, "SIGUSR1", *(int*)arg);
}

static void* sig_thread(void* arg) {
  int rfd = (int)(intptr_t)arg;
  char c, path[512], tmp[520];
  for (;;) {
    ssize_t r = read(rfd, &c, 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break; /* the write end closed: no communicator left */
    const char* dir = braid_param_env_raw("TMPDIR");
    snprintf(path, sizeof(path), "%s/braid-flight-%d.txt", dir != NULL && dir[0] ? dir : "/tmp", (int)getpid());
    snprintf(tmp, sizeof(tmp), "%s.part", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    braid_comm_registry_foreach(dump_one, &fd);
    if (fd >= 0) {
      close(fd);
      (void)!rename(tmp, path); /* whole or absent: braid-info --dump waits for it */
    }
  }
  close(rfd);
  return NULL;
}

static void signal_setup_locked(void) {
  struct sigaction old, sa;
  pthread_t t;
  pthread_attr_t attr;
  int fds[2];
  if (sigaction(SIGUSR1, NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO)) return;
  if (old.sa_handler != SIG_DFL && old.sa_handler != on_sigusr1) return; /* the application's */
  if (pipe2(fds, O_CLOEXEC) != 0) return;
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int err = pthread_create(&t, &attr, sig_thread, (void*)(intptr_t)fds[0]);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  __atomic_store_n(&sig_write_fd, fds[1], __ATOMIC_RELEASE); /* (a fork's child drops the parent's) */
  sig_pid = (int)getpid();
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigusr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  BRAID_INFO(BRAID_LOG_INIT, "SIGUSR1 dumps the flight recorder of every communicator (braid-info --dump %d)",
             (int)getpid());
}

void braid_flight_signal_setup(void) {
  if (braid_param_int(BRAID_PARAM_FLIGHT_CALLS) <= 0) return;
  pthread_mutex_lock(&sig_lock);
  if (sig_pid != (int)getpid()) signal_setup_locked();
  pthread_mutex_unlock(&sig_lock);
}

void braid_flight_signal_stop(void) {
  pthread_mutex_lock(&sig_lock);
  if (sig_pid == (int)getpid()) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    int fd = __atomic_exchange_n(&sig_write_fd, -1, __ATOMIC_ACQ_REL);
    if (fd >= 0) close(fd); /* the thread reads EOF and ends */
    sig_pid = 0;
  }
  pthread_mutex_unlock(&sig_lock);
}
