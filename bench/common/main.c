/*
 * main.c - entry point of every bench/<coll>_perf program: options, launch (world.c,
 * fork.c), header and device lines, host buffers, communicators, one thread per -t (thread 0
 * is the main thread), then nccl-tests' footer and exit status: 0, 7 when a check found
 * wrong data or the bandwidth is under NCCL_TESTS_MIN_BW, 3 on an NCCL error, 255 for bad
 * arguments.
 *
 * Buffers: in GPU mode (gpu.h: a CUDA device usable through the dlopen'd runtime, and not
 * BRAID_HOST_MODE=1) device memory per rank plus host staging buffers, a stream per rank, and
 * "#  Rank" lines naming the GPU as nccl-tests. Otherwise host memory (posix_memalign) only:
 * the lines name the device "host", with bus id 0000:00:00 and, as device number, the index
 * nccl-tests would have used (local process x threads x ranks per thread + i).
 *
 * Test hooks (environment): BRAID_BENCH_CORRUPT=N flips one element of rank 0's result in
 * the first N checks; BRAID_BENCH_DIE=P makes process P kill itself (SIGKILL) before its
 * first timed size.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "engine.h"
#include "report.h"

static int env_int(const char* name, int dflt) {
  const char* s = getenv(name);
  return s && *s ? atoi(s) : dflt;
}

/* -T: a process-wide watchdog over every thread's current blocking call. */
static void* watchdog(void* arg) {
  struct bench_run* r = arg;
  for (;;) {
    usleep(100000);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    for (int i = 0; i < r->o->nthreads; i++) {
      double since = atomic_load(&r->threads[i].busy_since);
      if (since > 0 && now - since > r->o->timeout) {
        char host[256];
        bench_hostname(host, sizeof(host));
        printf("%s: Test timeout (%ds) %s:%d\n", host, r->o->timeout, __FILE__, __LINE__);
        fflush(stdout);
        _exit(BENCH_TIMEOUT);
      }
    }
  }
  return NULL;
}

/* nccl-tests caps -e by device memory; here by this host's memory over its local ranks, and
 * in GPU mode also by the device memory over the ranks sharing a device. */
static void limit_max_bytes(struct bench_run* r, int local_ranks, int is_main) {
  double total = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  double per_rank = 0.8 * total / local_ranks / (r->o->datacheck ? 3 : 2);
  if (r->gpu.rt) {
    double dev_total = (double)bench_gpu_mem_total(&r->gpu, r->devs[0]);
    int sharing = (local_ranks + r->gpu.ndev - 1) / r->gpu.ndev;
    double dev_rank = (dev_total - (1u << 30)) * 0.8 / sharing / 2; /* send + receive; NCCL's own buffers */
    if (dev_total > 0 && dev_rank < per_rank) per_rank = dev_rank > 0 ? dev_rank : 1 << 20;
  }
  if (total <= 0 || (double)r->max_bytes <= per_rank) return;
  r->max_bytes = (size_t)per_rank;
  if (r->min_bytes > r->max_bytes) r->min_bytes = r->max_bytes;
  if (is_main) printf("#\n# Reducing maxBytes to %zu due to memory limitation\n", r->max_bytes);
}

/* Per-rank tables: communicators, registration handles, threads. */
static enum bench_result alloc_tables(struct bench_run* r, int nlocal) {
  r->send = calloc((size_t)nlocal, sizeof(char*));
  r->recv = calloc((size_t)nlocal, sizeof(char*));
  r->expected = calloc((size_t)nlocal, sizeof(char*));
  r->send_reg = calloc((size_t)nlocal, sizeof(void*));
  r->recv_reg = calloc((size_t)nlocal, sizeof(void*));
  r->comms = calloc((size_t)nlocal, sizeof(ncclComm_t));
  r->threads = calloc((size_t)r->o->nthreads, sizeof(struct bench_thread));
  r->dsend = calloc((size_t)nlocal, sizeof(char*));
  r->drecv = calloc((size_t)nlocal, sizeof(char*));
  r->devs = calloc((size_t)nlocal, sizeof(int));
  r->streams = calloc((size_t)nlocal, sizeof(cudaStream_t));
  int ok = r->send && r->recv && r->expected && r->send_reg && r->recv_reg && r->comms && r->threads && r->dsend &&
           r->drecv && r->devs && r->streams;
  return ok ? BENCH_SUCCESS : BENCH_INTERNAL_ERROR;
}

/* Host mode with -R 2: the send and receive buffers come from ncclMemAlloc, as nccl-tests
 * allocates registered buffers, so that windows over them map into the other processes of the
 * node (plain memory is refused there) and the one-/two-shot all-reduce reads them in place. */
static int host_mem_alloc(const struct bench_run* r) {
  return !r->gpu.rt && r->o->local_register == 2;
}

/* Send, receive and expected buffers of max_bytes per local rank, page aligned. */
static enum bench_result alloc_buffers(struct bench_run* r, int nlocal) {
  size_t bytes = r->max_bytes > 64 ? r->max_bytes : 64;
  char** lists[] = {r->send, r->recv, r->expected};
  for (int l = 0; l < 3; l++)
    for (int i = 0; i < nlocal; i++) {
      void* p = NULL;
      if (l < 2 && host_mem_alloc(r)) {
        BENCH_NCCLCHECK(ncclMemAlloc(&p, bytes));
      } else if (posix_memalign(&p, 4096, bytes) != 0) {
        fprintf(stderr, "cannot allocate %zu bytes of host memory for rank buffers\n", bytes);
        return BENCH_INTERNAL_ERROR;
      }
      memset(p, 0, bytes);
      lists[l][i] = p;
    }
  for (int i = 0; i < nlocal; i++) {
    r->dsend[i] = r->send[i];
    r->drecv[i] = r->recv[i];
    if (!r->gpu.rt) continue;
    void *s = NULL, *d = NULL;
    BENCH_CHECK(bench_gpu_alloc(&r->gpu, r->devs[i], bytes, &s));
    r->dsend[i] = s;
    BENCH_CHECK(bench_gpu_alloc(&r->gpu, r->devs[i], bytes, &d));
    r->drecv[i] = d;
    BENCH_CHECK(bench_gpu_stream(&r->gpu, r->devs[i], &r->streams[i]));
  }
  return BENCH_SUCCESS;
}

/* GPU mode: each local rank's device, and whether two of them share one. */
static void place_ranks(struct bench_run* r, const struct bench_world* w, int nlocal) {
  for (int i = 0; i < nlocal; i++) {
    r->devs[i] = bench_gpu_device(&r->gpu, w->local_rank * nlocal + i);
    for (int j = 0; j < i; j++) r->shared_device |= r->devs[j] == r->devs[i];
  }
}

/* The "#  Rank" lines of this process's ranks. */
static void device_lines(const struct bench_run* r, const struct bench_world* w, int nlocal, char* lines, int* len) {
  char host[256], name[256];
  bench_hostname(host, sizeof(host));
  for (int i = 0; i < nlocal; i++) {
    int rank = w->world_proc * nlocal + i;
    if (!r->gpu.rt) {
      bench_report_device_line(lines, len, rank, w->color, (int)getpid(), host, w->local_rank * nlocal + i, "host");
      continue;
    }
    int pci[3];
    bench_gpu_describe(&r->gpu, r->devs[i], name, sizeof(name), pci);
    bench_report_device_line_pci(lines, len, rank, w->color, (int)getpid(), host, r->devs[i], pci, name);
  }
}

static enum bench_result release(struct bench_run* r, int nlocal) {
  for (int i = 0; i < nlocal; i++) {
    if (r->comms[i] && r->o->local_register == 2) {
      BENCH_NCCLCHECK(ncclCommWindowDeregister(r->comms[i], (ncclWindow_t)r->send_reg[i]));
      BENCH_NCCLCHECK(ncclCommWindowDeregister(r->comms[i], (ncclWindow_t)r->recv_reg[i]));
    } else if (r->comms[i] && r->o->local_register == 1) {
      BENCH_NCCLCHECK(ncclCommDeregister(r->comms[i], r->send_reg[i]));
      BENCH_NCCLCHECK(ncclCommDeregister(r->comms[i], r->recv_reg[i]));
    }
    if (r->comms[i]) BENCH_NCCLCHECK(ncclCommDestroy(r->comms[i]));
    if (r->gpu.rt) {
      bench_gpu_free(&r->gpu, r->dsend[i]);
      bench_gpu_free(&r->gpu, r->drecv[i]);
      bench_gpu_stream_destroy(&r->gpu, r->streams[i]);
    }
    if (host_mem_alloc(r)) {
      if (r->send[i] != NULL) ncclMemFree(r->send[i]);
      if (r->recv[i] != NULL) ncclMemFree(r->recv[i]);
    } else {
      free(r->send[i]);
      free(r->recv[i]);
    }
    free(r->expected[i]);
  }
  free(r->send);
  free(r->recv);
  free(r->expected);
  free(r->send_reg);
  free(r->recv_reg);
  free(r->comms);
  free(r->threads);
  free(r->dsend);
  free(r->drecv);
  free(r->devs);
  free(r->streams);
  return BENCH_SUCCESS;
}

static enum bench_result run(struct bench_world* w, const struct bench_opts* o, const char* prog) {
  struct bench_run r;
  memset(&r, 0, sizeof(r));
  r.o = o;
  r.coll = &bench_coll;
  r.w = w;
  int nthreads = o->nthreads, ngpus = o->ngpus, nlocal = nthreads * ngpus;
  int is_main = w->world_proc == 0, comm_mode = w->kind == BENCH_WORLD_COMM;
  r.nranks = w->nprocs * nlocal;
  r.min_bytes = o->min_bytes;
  r.max_bytes = o->max_bytes;
  atomic_store(&r.corrupt, env_int("BRAID_BENCH_CORRUPT", 0));
  r.die_proc = env_int("BRAID_BENCH_DIE", -1);

  /* After the -P fork: CUDA, like the library, is first called here. The COMM launch
   * exchanges results through host buffers, so it stays in host mode, and tells braid so. */
  bench_gpu_open(&r.gpu, !comm_mode, "launcher variables without MPI: results travel through host buffers");
  if (comm_mode) setenv("BRAID_HOST_MODE", "1", 0);
  int lib_version = 0;
  ncclGetVersion(&lib_version); /* after the -P fork: no library call happens before it */
  if (is_main) bench_report_header(stdout, o, "braid", NCCL_VERSION_CODE, lib_version, prog);
  BENCH_CHECK(alloc_tables(&r, nlocal));
  if (r.gpu.rt) place_ranks(&r, w, nlocal);
  char lines[BENCH_LINES_MAX];
  int len = 0;
  device_lines(&r, w, nlocal, lines, &len);
  struct bench_member pm; /* the whole process, for the steps outside the threads */
  if (bench_member_init(&pm, w, -1, r.comms, nlocal, w->proc * nlocal) != 0) return BENCH_INTERNAL_ERROR;
  if (!comm_mode) bench_print_device_lines(&pm, lines, is_main);

  limit_max_bytes(&r, w->kind == BENCH_WORLD_FORK ? w->nprocs * nlocal : nlocal, is_main);
  BENCH_NCCLCHECK(bench_world_unique_id(w, &r.id));
  BENCH_CHECK(alloc_buffers(&r, nlocal));
  if (!o->parallel_init) {
    BENCH_CHECK(bench_comms_init(&r, r.comms, nlocal, w->proc * nlocal));
    BENCH_CHECK(bench_buffers_register(&r, 0, nlocal));
    if (comm_mode) bench_print_device_lines(&pm, lines, is_main);
  }
  r.print_table_header = comm_mode && o->parallel_init;
  if (is_main && !r.print_table_header) bench_report_table_header(stdout, o->report_cputime, o->report_timestamps);
  fflush(stdout);

  for (int t = 0; t < nthreads; t++) {
    struct bench_thread* th = &r.threads[t];
    th->run = &r;
    th->thread = t;
    th->is_main = is_main && t == 0;
    th->first_rank = (w->proc * nthreads + t) * ngpus;
    th->comms = r.comms + t * ngpus;
    th->send = r.send + t * ngpus;
    th->recv = r.recv + t * ngpus;
    th->expected = r.expected + t * ngpus;
    th->dsend = r.dsend + t * ngpus;
    th->drecv = r.drecv + t * ngpus;
    th->devs = r.devs + t * ngpus;
    th->streams = r.streams + t * ngpus;
    if (bench_member_init(&th->m, w, t, th->comms, ngpus, th->first_rank) != 0) return BENCH_INTERNAL_ERROR;
  }
  pthread_t dog;
  if (o->timeout > 0 && pthread_create(&dog, NULL, watchdog, &r) == 0) pthread_detach(dog);
  for (int t = 1; t < nthreads; t++)
    if (pthread_create(&r.threads[t].tid, NULL, bench_thread_main, &r.threads[t]) != 0) {
      fprintf(stderr, "pthread_create failed: %s\n", strerror(errno));
      return BENCH_INTERNAL_ERROR;
    }
  bench_thread_main(&r.threads[0]); /* failures end the process from inside */
  int errors = r.threads[0].errors, bw_count = r.threads[0].bw_count;
  double bw = r.threads[0].bw_sum;
  for (int t = 1; t < nthreads; t++) {
    pthread_join(r.threads[t].tid, NULL);
    errors += r.threads[t].errors;
    bw += r.threads[t].bw_sum;
    bw_count += r.threads[t].bw_count;
  }
  errors = (int)bench_allreduce_i64(&pm, errors);
  for (int t = 0; t < nthreads; t++) bench_member_free(&r.threads[t].m);
  bench_member_free(&pm);
  BENCH_CHECK(release(&r, nlocal));

  const char* min_env = getenv("NCCL_TESTS_MIN_BW");
  double min_bw = min_env ? atof(min_env) : -1;
  bw = bw_count ? bw / bw_count : 0;
  if (is_main) bench_report_footer(stdout, errors, bw, min_bw, prog, ncclGetLastError(NULL));
  fflush(stdout);
  return errors || (min_bw >= 0 && bw < min_bw * 0.9) ? BENCH_NUM_RESULTS : BENCH_SUCCESS;
}

int main(int argc, char** argv) {
  setlinebuf(stdout);
  const char* prog = program_invocation_short_name;
  struct bench_opts o;
  switch (bench_opts_parse(&o, argc, argv, prog)) {
    case BENCH_PARSE_EXIT_OK:
      return 0;
    case BENCH_PARSE_EXIT_ERROR:
      return 255; /* nccl-tests returns -1 from main */
    default:
      break;
  }
  struct bench_world w;
  int status = bench_world_init(&w, &o, &argc, &argv);
  if (status != 0) return status;
  enum bench_result res = run(&w, &o, prog);
  bench_world_finalize(&w);
  if (res != BENCH_SUCCESS) {
    bench_fail_trace(__FILE__, __LINE__);
    return res;
  }
  return 0;
}
