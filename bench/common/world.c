/*
 * world.c - launch detection and result combination for the benchmarks (see world.h).
 * The -P fork launch lives in fork.c; this file picks the launch, runs MPI when built with
 * BRAID_BENCH_MPI, and implements the two-step combination (threads under a mutex, then
 * processes) and its COMM-mode replacement (small NCCL collectives on every rank).
 */
#include "world.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fail.h"
#include "fork.h"
#include "report.h"

#if BRAID_BENCH_MPI
#include <mpi.h>
#endif

/* Bytes of one rank's "#  Rank" line in COMM mode, where lines travel by ncclAllGather. */
#define LINE_SLOT 256
/* Bytes of scratch per communicator for COMM-mode combinations. */
#define SCRATCH_SLOT 64

#if !BRAID_BENCH_MPI
static int env_int(const char* name, int* out) {
  const char* s = getenv(name);
  if (!s || !*s) return 0;
  char* end;
  long v = strtol(s, &end, 10);
  if (*end != '\0') return 0;
  *out = (int)v;
  return 1;
}

/* Launchers' rank, size and local-rank variables, in the order they are tried. */
static const char* const launcher_vars[][3] = {
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
};

/* COMM launch from launcher variables; 0 when there is none (or a job of one), 1 when set
 * up, -1 on a usage error. */
static int init_comm_world(struct bench_world* w) {
  for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++) {
    int rank, size;
    if (!env_int(launcher_vars[i][0], &rank) || !env_int(launcher_vars[i][1], &size)) continue;
    if (size <= 1) return 0;
    if (rank < 0 || rank >= size) {
      fprintf(stderr, "%s=%d is not a rank of %s=%d\n", launcher_vars[i][0], rank, launcher_vars[i][1], size);
      return -1;
    }
    const char* id = getenv("NCCL_COMM_ID");
    if (!id || !*id) {
      fprintf(stderr,
              "%s=%d and %s=%d describe a job of %d processes, but NCCL_COMM_ID is not set: "
              "set NCCL_COMM_ID=<host of rank 0>:<port> in every process (or use -P, or an MPI build)\n",
              launcher_vars[i][0], rank, launcher_vars[i][1], size, size);
      return -1;
    }
    w->kind = BENCH_WORLD_COMM;
    w->nprocs = w->total_procs = size;
    w->proc = w->world_proc = rank;
    if (!env_int(launcher_vars[i][2], &w->local_rank)) w->local_rank = 0;
    return 1;
  }
  return 0;
}
#endif

#if BRAID_BENCH_MPI
/* nccl-tests' host hash: hostname + boot id, djb2a. */
static uint64_t host_hash(void) {
  char buf[1024];
  bench_hostname(buf, sizeof(buf));
  size_t len = strlen(buf);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (fgets(buf + len, (int)(sizeof(buf) - len), f)) buf[strcspn(buf, "\n")] = '\0';
    fclose(f);
  }
  uint64_t h = 5381;
  for (const char* p = buf; *p; p++) h = ((h << 5) + h) ^ (uint64_t)(unsigned char)*p;
  return h;
}

/* NCCL_TESTS_SPLIT_MASK=<hex> or NCCL_TESTS_SPLIT="AND|&|OR||MOD|%|DIV|/ <value>". */
static int split_color(int proc) {
  const char* s = getenv("NCCL_TESTS_SPLIT_MASK");
  if (s) return proc & (int)strtoul(s, NULL, 16);
  s = getenv("NCCL_TESTS_SPLIT");
  if (!s) return 0;
  static const struct {
    const char* name;
    int op;
  } ops[] = {{"AND", 0}, {"&", 0}, {"OR", 1}, {"|", 1}, {"MOD", 2}, {"%", 2}, {"DIV", 3}, {"/", 3}};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    size_t n = strlen(ops[i].name);
    if (strncasecmp(s, ops[i].name, n) != 0) continue;
    const char* v = s + n;
    while (*v == ' ') v++;
    int x = strncasecmp(v, "0b", 2) == 0 ? (int)strtoul(v + 2, NULL, 2) : (int)strtoul(v, NULL, 0);
    switch (ops[i].op) {
      case 0:
        return proc & x;
      case 1:
        return proc | x;
      case 2:
        return x ? proc % x : 0;
      default:
        return x ? proc / x : 0;
    }
  }
  return 0;
}

static int init_mpi_world(struct bench_world* w, int* argc, char*** argv) {
  MPI_Init(argc, argv);
  MPI_Comm_size(MPI_COMM_WORLD, &w->total_procs);
  MPI_Comm_rank(MPI_COMM_WORLD, &w->world_proc);
  uint64_t* hashes = calloc((size_t)w->total_procs, sizeof(uint64_t));
  if (!hashes) return BENCH_INTERNAL_ERROR;
  hashes[w->world_proc] = host_hash();
  MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, hashes, sizeof(uint64_t), MPI_BYTE, MPI_COMM_WORLD);
  for (int p = 0; p < w->world_proc; p++) w->local_rank += hashes[p] == hashes[w->world_proc];
  free(hashes);
  w->color = split_color(w->world_proc);
  MPI_Comm* comm = malloc(sizeof(MPI_Comm));
  if (!comm) return BENCH_INTERNAL_ERROR;
  MPI_Comm_split(MPI_COMM_WORLD, w->color, w->world_proc, comm);
  MPI_Comm_size(*comm, &w->nprocs);
  MPI_Comm_rank(*comm, &w->proc);
  w->mpi_comm = comm;
  w->kind = BENCH_WORLD_MPI;
  return 0;
}
#endif

int bench_world_init(struct bench_world* w, const struct bench_opts* o, int* argc, char*** argv) {
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  w->nthreads = o->nthreads;
  w->kind = BENCH_WORLD_SINGLE;
  w->nprocs = w->total_procs = 1;
#if BRAID_BENCH_MPI
  if (o->nprocs > 1) {
    fprintf(stderr, "-P is not available in MPI builds: launch with mpirun -np %d\n", o->nprocs);
    return 255;
  }
  return init_mpi_world(w, argc, argv);
#else
  if (o->nprocs > 1) return bench_fork_start(w, o->nprocs); /* only children return */
  return init_comm_world(w) < 0 ? 255 : 0;
#endif
}

void bench_world_finalize(struct bench_world* w) {
#if BRAID_BENCH_MPI
  if (w->kind == BENCH_WORLD_MPI) {
    MPI_Comm_free((MPI_Comm*)w->mpi_comm);
    free(w->mpi_comm);
    MPI_Finalize();
  }
#else
  (void)w;
#endif
}

ncclResult_t bench_world_unique_id(struct bench_world* w, ncclUniqueId* id) {
  ncclResult_t res = ncclSuccess;
  memset(id, 0, sizeof(*id));
  if (w->kind != BENCH_WORLD_FORK && w->kind != BENCH_WORLD_MPI) return ncclGetUniqueId(id);
  if (w->proc == 0) res = ncclGetUniqueId(id);
  if (res != ncclSuccess) return res; /* process 0 exits; the others are stopped for it */
  if (w->kind == BENCH_WORLD_FORK) bench_shm_bcast_id(w, id);
#if BRAID_BENCH_MPI
  if (w->kind == BENCH_WORLD_MPI) {
    MPI_Bcast(id, sizeof(*id), MPI_BYTE, 0, *(MPI_Comm*)w->mpi_comm);
    MPI_Barrier(MPI_COMM_WORLD);
  }
#endif
  return ncclSuccess;
}

int bench_member_init(struct bench_member* m, struct bench_world* w, int thread, ncclComm_t* comms, int ncomms,
                      int first_rank) {
  memset(m, 0, sizeof(*m));
  m->w = w;
  m->thread = thread;
  m->comms = comms;
  m->ncomms = ncomms;
  m->first_rank = first_rank;
  if (w->kind != BENCH_WORLD_COMM) return 0;
  m->scratch = calloc((size_t)ncomms, SCRATCH_SLOT);
  return m->scratch ? 0 : -1;
}

void bench_member_free(struct bench_member* m) {
  free(m->scratch);
  m->scratch = NULL;
}

/* Combine across processes (non-COMM worlds), in place. */
static void process_op(struct bench_world* w, double* d, int64_t* i, enum bench_red red) {
  if (w->kind == BENCH_WORLD_FORK) bench_shm_exchange(w, d, i, red);
#if BRAID_BENCH_MPI
  if (w->kind == BENCH_WORLD_MPI) {
    if (red == BENCH_RED_RANK0 && w->world_proc != 0) *d = 0;
    MPI_Op op = red == BENCH_RED_MIN ? MPI_MIN : red == BENCH_RED_MAX ? MPI_MAX : MPI_SUM;
    MPI_Allreduce(MPI_IN_PLACE, d, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, i, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
#endif
}

/* COMM worlds: one value per member (in its first rank, neutral elsewhere), all ranks. */
static void comm_allreduce(struct bench_member* m, ncclDataType_t type, ncclRedOp_t op, const void* value,
                           const void* neutral, void* out) {
  for (int c = 0; c < m->ncomms; c++) memcpy(m->scratch + c * SCRATCH_SLOT, c ? neutral : value, 8);
  ncclResult_t res = ncclGroupStart();
  for (int c = 0; c < m->ncomms && res == ncclSuccess; c++)
    res = ncclAllReduce(m->scratch + c * SCRATCH_SLOT, m->scratch + c * SCRATCH_SLOT, 1, type, op, m->comms[c], NULL);
  ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) bench_die_nccl(__FILE__, __LINE__, res);
  memcpy(out, m->scratch, 8);
}

/* Threads of this process meet; the last one also combines across processes. */
static void combine(struct bench_member* m, double* d, int64_t* i, enum bench_red red) {
  struct bench_world* w = m->w;
  if (m->thread < 0) {
    process_op(w, d, i, red);
    if (red == BENCH_RED_AVG) *d /= w->total_procs;
    return;
  }
  int e = m->epoch;
  double mine = (red == BENCH_RED_RANK0 && m->thread != 0) ? 0 : *d;
  pthread_mutex_lock(&w->lock);
  if (w->counter[e] == 0) {
    w->dacc[e] = mine;
    w->iacc[e] = *i;
  } else {
    w->iacc[e] += *i;
    if (red == BENCH_RED_MIN)
      w->dacc[e] = mine < w->dacc[e] ? mine : w->dacc[e];
    else if (red == BENCH_RED_MAX)
      w->dacc[e] = mine > w->dacc[e] ? mine : w->dacc[e];
    else
      w->dacc[e] += mine;
  }
  if (++w->counter[e] == w->nthreads) pthread_cond_broadcast(&w->cond);
  if (m->thread == w->nthreads - 1) {
    while (w->counter[e] != w->nthreads) pthread_cond_wait(&w->cond, &w->lock);
    process_op(w, &w->dacc[e], &w->iacc[e], red);
    if (red == BENCH_RED_AVG) w->dacc[e] /= (double)w->total_procs * w->nthreads;
    w->counter[e] = 0;
    pthread_cond_broadcast(&w->cond);
  } else {
    while (w->counter[e] != 0) pthread_cond_wait(&w->cond, &w->lock);
  }
  *d = w->dacc[e];
  *i = w->iacc[e];
  pthread_mutex_unlock(&w->lock);
  m->epoch ^= 1;
}

void bench_barrier(struct bench_member* m) {
  int64_t zero = 0;
  if (m->w->kind == BENCH_WORLD_COMM) {
    comm_allreduce(m, ncclInt64, ncclSum, &zero, &zero, &zero);
    return;
  }
  double d = 0;
  if (m->thread < 0 && m->w->kind == BENCH_WORLD_FORK) {
    bench_shm_barrier(m->w);
    return;
  }
  combine(m, &d, &zero, BENCH_RED_SUM);
}

double bench_allreduce_f64(struct bench_member* m, double v, enum bench_red red) {
  struct bench_world* w = m->w;
  if (w->kind != BENCH_WORLD_COMM) {
    int64_t unused = 0;
    combine(m, &v, &unused, red);
    return v;
  }
  double neutral = red == BENCH_RED_MIN ? INFINITY : red == BENCH_RED_MAX ? -INFINITY : 0, out;
  ncclRedOp_t op = red == BENCH_RED_MIN ? ncclMin : red == BENCH_RED_MAX ? ncclMax : ncclSum;
  if (red == BENCH_RED_RANK0 && m->first_rank != 0) v = 0;
  comm_allreduce(m, ncclFloat64, op, &v, &neutral, &out);
  if (red == BENCH_RED_AVG) out /= (double)w->nprocs * (m->thread < 0 ? 1 : w->nthreads);
  return out;
}

int64_t bench_allreduce_i64(struct bench_member* m, int64_t v) {
  if (m->w->kind != BENCH_WORLD_COMM) {
    double unused = 0;
    combine(m, &unused, &v, BENCH_RED_SUM);
    return v;
  }
  int64_t zero = 0, out;
  comm_allreduce(m, ncclInt64, ncclSum, &v, &zero, &out);
  return out;
}

/* COMM worlds: every rank's line travels by ncclAllGather on its communicator. */
static void comm_device_lines(struct bench_member* m, const char* mine, int is_main) {
  int nranks = 0;
  ncclResult_t res = ncclCommCount(m->comms[0], &nranks);
  if (res != ncclSuccess) bench_die_nccl(__FILE__, __LINE__, res);
  size_t each = (size_t)nranks * LINE_SLOT;
  char* send = calloc((size_t)m->ncomms, LINE_SLOT);
  char* recv = calloc((size_t)m->ncomms, each);
  if (!send || !recv) {
    fprintf(stderr, "out of memory gathering device lines\n");
    _exit(BENCH_INTERNAL_ERROR);
  }
  const char* p = mine;
  for (int c = 0; c < m->ncomms && *p; c++) { /* one line per communicator, in rank order */
    size_t len = strcspn(p, "\n");
    snprintf(send + (size_t)c * LINE_SLOT, LINE_SLOT, "%.*s", (int)len, p);
    p += len + (p[len] == '\n');
  }
  res = ncclGroupStart();
  for (int c = 0; c < m->ncomms && res == ncclSuccess; c++)
    res = ncclAllGather(send + (size_t)c * LINE_SLOT, recv + (size_t)c * each, LINE_SLOT, ncclInt8, m->comms[c], NULL);
  ncclResult_t end = ncclGroupEnd();
  if (res == ncclSuccess) res = end;
  if (res != ncclSuccess) bench_die_nccl(__FILE__, __LINE__, res);
  if (is_main)
    for (int r = 0; r < nranks; r++) printf("%s\n", recv + (size_t)r * LINE_SLOT);
  free(send);
  free(recv);
}

void bench_print_device_lines(struct bench_member* m, const char* mine, int is_main) {
  struct bench_world* w = m->w;
  if (w->kind == BENCH_WORLD_COMM) {
    comm_device_lines(m, mine, is_main);
    return;
  }
  if (w->kind == BENCH_WORLD_SINGLE) {
    if (is_main) printf("%s", mine);
    return;
  }
  char* all = w->world_proc == 0 ? calloc((size_t)w->total_procs, BENCH_LINES_MAX) : NULL;
  if (w->world_proc == 0 && !all) {
    fprintf(stderr, "out of memory gathering device lines\n");
    _exit(BENCH_INTERNAL_ERROR);
  }
  if (w->kind == BENCH_WORLD_FORK) bench_shm_gather_lines(w, mine, all);
#if BRAID_BENCH_MPI
  if (w->kind == BENCH_WORLD_MPI) {
    char block[BENCH_LINES_MAX] = {0};
    snprintf(block, sizeof(block), "%s", mine);
    MPI_Gather(block, BENCH_LINES_MAX, MPI_BYTE, all, BENCH_LINES_MAX, MPI_BYTE, 0, MPI_COMM_WORLD);
  }
#endif
  if (is_main)
    for (int p = 0; p < w->total_procs; p++) printf("%s", all + (size_t)p * BENCH_LINES_MAX);
  free(all);
}
