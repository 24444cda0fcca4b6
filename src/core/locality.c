/*
 * locality.c - see locality.h.
 *
 * Per local pair (a < b), in the order of the pairs (a, b) sorted, so no two ranks wait on
 * each other in a cycle: a decides (forced, topology, a figure this process measured for the
 * same two processes less than LOC_CACHE_S ago, or a ping-pong now) and sends b a verdict.
 * For a ping-pong the verdict names a 4 KiB segment a made; b maps it, unlinks it and
 * acknowledges, a unlinks it too (a rank killed in between leaves a name of shm.c's pattern,
 * which the survivors' cleanup at a failed init removes), both bounce one line for at most
 * LOC_BUDGET_MS, a sends the figure. A failure of the probe itself (no /dev/shm, a partner
 * that never answers) leaves the pair UNKNOWN (the defaults); only a failed bootstrap message
 * fails init.
 */
#include "core/locality.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/comm.h"

#define TAG_LOCALITY 0x4c6f630000000000ULL /* "Loc" */
#define LOC_BUDGET_MS 1.5                  /* measuring, per pair */
#define LOC_IDLE_MS 100.0                  /* a side that hears nothing this long stops */
#define LOC_CACHE_S 5.0                    /* a figure for the same two processes is reused */
#define LOC_BATCH 32                       /* round trips per timed batch */
#define LOC_STOP UINT64_MAX

enum { LOC_MODE_AUTO, LOC_MODE_NEAR, LOC_MODE_FAR };
enum { HOW_FORCED, HOW_TOPOLOGY, HOW_CACHED, HOW_MEASURE, HOW_FAILED };

/* What a tells b. */
struct loc_msg {
  int32_t verdict; /* enum braid_locality */
  int32_t how;
  double rtt_ns; /* measured or cached figure; 0 otherwise */
  char name[64]; /* HOW_MEASURE: the segment */
};

const char* braid_locality_name(int loc) {
  return loc == BRAID_LOCALITY_NEAR ? "near" : loc == BRAID_LOCALITY_FAR ? "far" : "unknown";
}

/* ---- topology ------------------------------------------------------------------------------ */

static long read_long(const char* path) {
  FILE* f = fopen(path, "r");
  long v = -1;
  if (f == NULL) return -1;
  if (fscanf(f, "%ld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

/* The id of the data/unified cache of `level` of cpu c; -1 when unknown. */
static long cache_id(const char* sysfs, int c, int level) {
  char path[256], type[32];
  for (int i = 0; i < 8; i++) {
    snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/level", sysfs, c, i);
    long l = read_long(path);
    if (l < 0) return -1;
    if (l != level) continue;
    snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/type", sysfs, c, i);
    FILE* f = fopen(path, "r");
    if (f == NULL) return -1;
    int ok = fscanf(f, "%31s", type) == 1;
    fclose(f);
    if (!ok || strcmp(type, "Instruction") == 0) continue;
    snprintf(path, sizeof(path), "%s/cpu%d/cache/index%d/id", sysfs, c, i);
    return read_long(path);
  }
  return -1;
}

/* The one cache id of `level` every CPU of the set has; -1 when they differ or it is unknown. */
static long set_cache_id(const uint64_t* cpus, const char* sysfs, int level) {
  long id = -2;
  for (int c = 0; c < BRAID_CPU_WORDS * 64; c++) {
    if (!(cpus[c / 64] >> (c % 64) & 1)) continue;
    long x = cache_id(sysfs, c, level);
    if (x < 0 || (id != -2 && x != id)) return -1;
    id = x;
  }
  return id < 0 ? -1 : id;
}

int braid_locality_from_caches(const uint64_t* cpus_a, const uint64_t* cpus_b, const char* sysfs, int virt) {
  if (virt) return BRAID_LOCALITY_UNKNOWN; /* vCPUs float over the host's cores */
  long a3 = set_cache_id(cpus_a, sysfs, 3), b3 = set_cache_id(cpus_b, sysfs, 3);
  if (a3 >= 0 && b3 >= 0) return a3 == b3 ? BRAID_LOCALITY_NEAR : BRAID_LOCALITY_FAR;
  long a2 = set_cache_id(cpus_a, sysfs, 2), b2 = set_cache_id(cpus_b, sysfs, 2);
  if (a3 < 0 && b3 < 0 && a2 >= 0 && b2 >= 0 && a2 == b2) return BRAID_LOCALITY_NEAR; /* no L3: one L2 */
  return BRAID_LOCALITY_UNKNOWN;
}

static int under_hypervisor(void) {
  static int virt = -1;
  if (virt >= 0) return virt;
  FILE* f = fopen("/proc/cpuinfo", "r");
  char line[4096];
  int v = 0;
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "flags", 5) == 0) {
      v = strstr(line, " hypervisor") != NULL;
      break;
    }
  if (f != NULL) fclose(f);
  virt = v;
  return v;
}

/* ---- the ping-pong --------------------------------------------------------------------------- */

static double now_ms(void) {
  return braid_time_now() * 1e3;
}

/* Wait until *v is `want` (or, want 0: odd or STOP); the value seen, or 0 once `until` passed. */
static uint64_t wait_line(volatile uint64_t* v, uint64_t want, double until) {
  for (uint32_t spins = 1;; spins++) {
    uint64_t x = __atomic_load_n(v, __ATOMIC_ACQUIRE);
    if (want ? x == want : (x & 1) || x == LOC_STOP) return x;
    if ((spins & 1023) == 0) {
      if (now_ms() > until) return 0;
      sched_yield(); /* a partner on this core needs it to run */
    } else {
      __builtin_ia32_pause();
    }
  }
}

static double lead(volatile uint64_t* v, double budget_ms) {
  uint64_t x = 1;
  double best = -1, start = now_ms();
  __atomic_store_n(v, x, __ATOMIC_RELEASE);
  if (wait_line(v, x + 1, start + LOC_IDLE_MS) == 0) goto out; /* the follower never came */
  x += 2;
  for (double t0 = now_ms(), end = t0 + budget_ms; t0 < end; t0 = now_ms()) {
    int k = 0;
    for (; k < LOC_BATCH; k++, x += 2) {
      __atomic_store_n(v, x, __ATOMIC_RELEASE);
      if (wait_line(v, x + 1, end) == 0) break;
    }
    double per = (now_ms() - t0) * 1e6 / LOC_BATCH;
    if (k < LOC_BATCH) { /* the budget ran out inside a batch: a partner that hardly runs */
      if (best < 0) best = k > 0 ? (now_ms() - t0) * 1e6 / k : budget_ms * 1e6;
      break;
    }
    if (best < 0 || per < best) best = per;
  }
out:
  __atomic_store_n(v, LOC_STOP, __ATOMIC_RELEASE);
  return best;
}

static double follow(volatile uint64_t* v) {
  uint64_t last = 0;
  for (;;) {
    uint64_t x = wait_line(v, 0, now_ms() + LOC_IDLE_MS);
    if (x == 0 || x == LOC_STOP) return 0;
    if (x != last) {
      last = x;
      __atomic_store_n(v, x + 1, __ATOMIC_RELEASE);
    }
  }
}

double braid_locality_pingpong(volatile uint64_t* v, int leader, double budget_ms) {
  return leader ? lead(v, budget_ms) : follow(v);
}

/* ---- figures this process measured --------------------------------------------------------- */

#define LOC_CACHE_N 64
static struct {
  uint64_t a, b; /* the two processes' pid_hash */
  double when, rtt;
} cache[LOC_CACHE_N];
static int cache_next;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

static double cache_get(uint64_t a, uint64_t b) {
  double rtt = -1, now = braid_time_now();
  pthread_mutex_lock(&cache_mu);
  for (int i = 0; i < LOC_CACHE_N; i++)
    if (cache[i].a == a && cache[i].b == b && cache[i].when > 0 && now - cache[i].when < LOC_CACHE_S)
      rtt = cache[i].rtt;
  pthread_mutex_unlock(&cache_mu);
  return rtt;
}

static void cache_put(uint64_t a, uint64_t b, double rtt) {
  pthread_mutex_lock(&cache_mu);
  int i = cache_next++ % LOC_CACHE_N;
  cache[i].a = a;
  cache[i].b = b;
  cache[i].rtt = rtt;
  cache[i].when = braid_time_now();
  pthread_mutex_unlock(&cache_mu);
}

/* ---- one pair ------------------------------------------------------------------------------- */

static int verdict_of(double rtt) {
  return rtt < 0 ? BRAID_LOCALITY_UNKNOWN : rtt < BRAID_LOCALITY_NEAR_NS ? BRAID_LOCALITY_NEAR : BRAID_LOCALITY_FAR;
}

/* Map (create: the leader) the probe segment; NULL on failure. */
static volatile uint64_t* seg_map(const char* name, int create) {
  int fd = shm_open(name, create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR, 0600);
  if (fd < 0) return NULL;
  if (create && ftruncate(fd, 4096) != 0) {
    close(fd);
    shm_unlink(name);
    return NULL;
  }
  void* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name);
    return NULL;
  }
  return p;
}

/* The lower rank a of the pair: decide, tell b, measure with it if need be. */
static ncclResult_t pair_lead(struct braid_comm* comm, int b, uint64_t tag, int* loc) {
  const struct braid_peer_info *me = &comm->peers[comm->rank], *p = &comm->peers[b];
  int mode = (int)braid_param_int(BRAID_PARAM_SHM_LOCALITY);
  struct loc_msg m = {0};
  volatile uint64_t* line = NULL;
  if (mode != LOC_MODE_AUTO) {
    m.how = HOW_FORCED;
    m.verdict = mode == LOC_MODE_NEAR ? BRAID_LOCALITY_NEAR : BRAID_LOCALITY_FAR;
  } else if ((m.verdict = braid_locality_from_caches(me->cpus, p->cpus, "/sys/devices/system/cpu",
                                                     under_hypervisor())) != BRAID_LOCALITY_UNKNOWN) {
    m.how = HOW_TOPOLOGY;
  } else if ((m.rtt_ns = cache_get(me->pid_hash, p->pid_hash)) >= 0) {
    m.how = HOW_CACHED;
    m.verdict = verdict_of(m.rtt_ns);
  } else {
    m.how = HOW_MEASURE;
    m.rtt_ns = 0;
    /* shm.c's name pattern (/braid-<pid>-<comm>-<rank>-...): a rank killed before it unlinks
     * this leaves what the survivors' cleanup removes (shm forget_dead) */
    snprintf(m.name, sizeof(m.name), "/braid-%d-%llx-%d-loc-%d", me->pid, (unsigned long long)comm->comm_hash,
             comm->rank, b);
    line = seg_map(m.name, 1);
    if (line == NULL) m.how = HOW_FAILED;
  }
  BRAID_CHECK(braid_bootstrap_send(comm->bootstrap, b, tag, &m, sizeof(m)));
  if (m.how == HOW_MEASURE) {
    int32_t ok = 0;
    ncclResult_t res = braid_bootstrap_recv(comm->bootstrap, b, tag | 1, &ok, sizeof(ok));
    shm_unlink(m.name);
    double rtt = res == ncclSuccess && ok ? braid_locality_pingpong(line, 1, LOC_BUDGET_MS) : -1;
    munmap((void*)line, 4096);
    BRAID_CHECK(res);
    m.verdict = verdict_of(rtt);
    m.rtt_ns = rtt;
    if (rtt >= 0) cache_put(me->pid_hash, p->pid_hash, rtt);
    BRAID_CHECK(braid_bootstrap_send(comm->bootstrap, b, tag | 2, &m, sizeof(m)));
  }
  static const char* how[] = {"forced by BRAID_SHM_LOCALITY", "topology: cache ids", "measured earlier", "measured",
                              "not measured: no probe segment"};
  if (m.rtt_ns > 0)
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_SHM, "SHM/%s rank %d<->%d: round trip %.0f ns (%s)",
               braid_locality_name(m.verdict), comm->rank, b, m.rtt_ns, how[m.how]);
  else
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_SHM, "SHM/%s rank %d<->%d (%s)", braid_locality_name(m.verdict), comm->rank,
               b, how[m.how]);
  *loc = m.verdict;
  return ncclSuccess;
}

/* The higher rank b of the pair: follow a's verdict (and its ping-pong). */
static ncclResult_t pair_follow(struct braid_comm* comm, int a, uint64_t tag, int* loc) {
  struct loc_msg m;
  BRAID_CHECK(braid_bootstrap_recv(comm->bootstrap, a, tag, &m, sizeof(m)));
  if (m.how == HOW_MEASURE) {
    m.name[sizeof(m.name) - 1] = '\0';
    volatile uint64_t* line = seg_map(m.name, 0);
    int32_t ok = line != NULL;
    shm_unlink(m.name); /* mapped (or not): either side unlinking suffices, in case a dies now */
    BRAID_CHECK(braid_bootstrap_send(comm->bootstrap, a, tag | 1, &ok, sizeof(ok)));
    if (line != NULL) {
      braid_locality_pingpong(line, 0, 0);
      munmap((void*)line, 4096);
    }
    BRAID_CHECK(braid_bootstrap_recv(comm->bootstrap, a, tag | 2, &m, sizeof(m)));
  }
  *loc = m.verdict;
  return ncclSuccess;
}

static int local_pair(const struct braid_comm* comm, int r) {
  const struct braid_peer_info *me = &comm->peers[comm->rank], *p = &comm->peers[r];
  return r != comm->rank && p->host_mode && me->host_mode && p->kernel_hash == me->kernel_hash &&
         p->host_hash == me->host_hash;
}

ncclResult_t braid_locality_decide(struct braid_comm* comm) {
  int n = comm->nranks, me = comm->rank;
  comm->locality = calloc((size_t)n, 1);
  if (comm->locality == NULL) {
    BRAID_WARN("Failed to allocate %d bytes of locality information", n);
    return ncclSystemError;
  }
  if (!comm->host_mode || n == 1) return ncclSuccess;
  /* pairs (a, b), a < b, in order: mine are (r, me) for r < me, then (me, r) for r > me */
  for (int r = 0; r < n; r++) {
    if (!local_pair(comm, r)) continue;
    int a = r < me ? r : me, b = r < me ? me : r, loc;
    uint64_t tag = TAG_LOCALITY | ((uint64_t)a << 24) | ((uint64_t)b << 4);
    if (a == me)
      BRAID_CHECK(pair_lead(comm, b, tag, &loc));
    else
      BRAID_CHECK(pair_follow(comm, a, tag, &loc));
    comm->locality[r] = (uint8_t)loc;
  }
  return ncclSuccess;
}
