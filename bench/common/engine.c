/*
 * engine.c - nccl-tests' measuring loop (see engine.h), on host or device buffers.
 *
 * Host mode has no streams: every call (or group) returns when the work is done, so the
 * "wait for completion" steps of nccl-tests are no-ops and the time is the wall clock over
 * the calls. GPU mode (gpu.h) is nccl-tests': calls are queued on each rank's stream, the
 * time runs until cudaStreamSynchronize of every stream returns, and data is generated and
 * checked in host staging buffers copied to and from the device buffers. As in nccl-tests, timed iteration k works at
 * offset (k mod steps) x message size inside the max-size buffers, and the check runs one more call at offset 0 on data
 * generated from a fresh seed.
 */
#include "engine.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "dtype.h"
#include "pages.h"
#include "report.h"

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The stream bench_stream() hands to the call being made, and whether any bench_coll asked
 * for it (one that passes NULL instead cannot run ranks sharing a device in one process). */
static __thread cudaStream_t current_stream;
static atomic_int stream_asked;

cudaStream_t bench_engine_stream(void) {
  atomic_store_explicit(&stream_asked, 1, memory_order_relaxed);
  return current_stream;
}

/* -T's mark (main.c's watchdog reads it in seconds): the coarse clock, CLOCK_MONOTONIC's base
 * to a tick. Set twice per call inside the timed loop, where two precise clock_gettime calls
 * were ~0.1 us of a host-mode 8-byte all-reduce on a VM (perf): the benchmark's own cost. */
static void busy(struct bench_thread* t, int on) {
  double since = 0.0;
  if (on) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    since = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  }
  atomic_store(&t->busy_since, since);
}

static void barrier(struct bench_thread* t) {
  busy(t, 1);
  bench_barrier(&t->m);
  busy(t, 0);
}

/* GPU mode: the library must have bound each communicator to its rank's device. A library
 * running on host memory (braid built without CUDA, ncclCommCuDevice -1) would be handed
 * device pointers: refuse with the way out. */
static enum bench_result check_devices(struct bench_run* r, ncclComm_t* comms, int n, int base) {
  for (int i = 0; i < n; i++) {
    int dev = -2;
    BENCH_NCCLCHECK(ncclCommCuDevice(comms[i], &dev));
    if (dev == r->devs[base + i]) continue;
    char host[256];
    bench_hostname(host, sizeof(host));
    printf(
        "%s: the benchmark put its buffers on CUDA device %d but the library %s (ncclCommCuDevice = %d); "
        "set BRAID_HOST_MODE=1 to benchmark host mode\n",
        host, r->devs[base + i], dev < 0 ? "runs on host memory" : "chose another device", dev);
    return BENCH_INVALID_USAGE;
  }
  return BENCH_SUCCESS;
}

enum bench_result bench_comms_init(struct bench_run* r, ncclComm_t* comms, int n, int first_rank) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  int base = (int)(comms - r->comms); /* local index of comms[0] */
  if (r->o->cta_policy >= 0) config.CTAPolicy = r->o->cta_policy;
  BENCH_NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < n; i++) {
    if (r->gpu.rt) BENCH_CHECK(bench_gpu_set_device(&r->gpu, r->devs[base + i])); /* as nccl-tests */
    BENCH_NCCLCHECK(ncclCommInitRankConfig(comms + i, r->nranks, r->id, first_rank + i, &config));
  }
  BENCH_NCCLCHECK(ncclGroupEnd());
  if (r->gpu.rt) BENCH_CHECK(check_devices(r, comms, n, base));
  return BENCH_SUCCESS;
}

enum bench_result bench_buffers_register(struct bench_run* r, int first, int n) {
  if (!r->o->local_register) return BENCH_SUCCESS;
  BENCH_NCCLCHECK(ncclGroupStart());
  for (int i = first; i < first + n; i++) {
    if (r->o->local_register == 2) {
      BENCH_NCCLCHECK(ncclCommWindowRegister(r->comms[i], r->dsend[i], r->max_bytes, (ncclWindow_t*)&r->send_reg[i],
                                             NCCL_WIN_COLL_SYMMETRIC));
      BENCH_NCCLCHECK(ncclCommWindowRegister(r->comms[i], r->drecv[i], r->max_bytes, (ncclWindow_t*)&r->recv_reg[i],
                                             NCCL_WIN_COLL_SYMMETRIC));
    } else {
      BENCH_NCCLCHECK(ncclCommRegister(r->comms[i], r->dsend[i], r->max_bytes, &r->send_reg[i]));
      BENCH_NCCLCHECK(ncclCommRegister(r->comms[i], r->drecv[i], r->max_bytes, &r->recv_reg[i]));
    }
  }
  BENCH_NCCLCHECK(ncclGroupEnd());
  return BENCH_SUCCESS;
}

/* nccl-tests' setupArgs: the counts of a `size`-byte message. */
static void setup_args(struct bench_thread* t, size_t size, int dtype) {
  t->elt = bench_dtype_size(dtype);
  t->run->coll->get_counts(&t->counts, size / t->elt, t->elt, t->run->nranks);
}

/* nccl-tests' completeColl: wait for this thread's streams (GPU mode; host calls are done
 * when they return). A library that ignored bench_stream() queued on the NULL stream. */
static enum bench_result complete(struct bench_thread* t) {
  struct bench_run* r = t->run;
  if (!r->gpu.rt) return BENCH_SUCCESS;
  int asked = atomic_load_explicit(&stream_asked, memory_order_relaxed);
  busy(t, 1);
  for (int i = 0; i < r->o->ngpus; i++) {
    BENCH_CHECK(bench_gpu_set_device(&r->gpu, t->devs[i]));
    BENCH_CHECK(bench_gpu_sync(&r->gpu, asked ? t->streams[i] : NULL));
  }
  busy(t, 0);
  return BENCH_SUCCESS;
}

/* One call (or one group of ngpus calls) at iteration `iter`'s buffer offset. */
static enum bench_result start_coll(struct bench_thread* t, int dtype, int op, int root, int in_place, int iter) {
  struct bench_run* r = t->run;
  const struct bench_counts* c = &t->counts;
  size_t elt = t->elt, total = (c->send > c->recv ? c->send : c->recv) * elt;
  size_t steps = total ? r->max_bytes / total : 1;
  size_t shift = total * ((size_t)iter % (steps ? steps : 1));
  int ngpus = r->o->ngpus;
  busy(t, 1);
  if (ngpus > 1) BENCH_NCCLCHECK(ncclGroupStart());
  for (int i = 0; i < ngpus; i++) {
    int rank = t->first_rank + i;
    char* recvb = t->drecv[i] + shift;
    char* sendb = in_place ? recvb + c->send_inplace * elt * (size_t)rank : t->dsend[i] + shift;
    if (in_place) recvb += c->recv_inplace * elt * (size_t)rank;
    ncclRedOp_t nop = op == BENCH_OP_NONE ? ncclSum : (ncclRedOp_t)op;
    if (op == BENCH_OP_MULSUM) { /* op is NONE for collectives that do not reduce */
      struct bench_gen g;
      char scalar[8];
      bench_gen_setup(&g, dtype, op, r->nranks, 0);
      bench_gen_scalar(&g, rank, scalar);
      BENCH_NCCLCHECK(
          ncclRedOpCreatePreMulSum(&nop, scalar, (ncclDataType_t)dtype, ncclScalarHostImmediate, t->comms[i]));
    }
    if (r->gpu.rt) BENCH_CHECK(bench_gpu_set_device(&r->gpu, t->devs[i]));
    current_stream = t->streams[i];
    BENCH_NCCLCHECK(r->coll->run(sendb, recvb, c->param, (ncclDataType_t)dtype, nop, root, t->comms[i]));
    current_stream = NULL;
    if (op == BENCH_OP_MULSUM) BENCH_NCCLCHECK(ncclRedOpDestroy(nop, t->comms[i]));
    if (r->shared_device && !atomic_load_explicit(&stream_asked, memory_order_relaxed)) {
      printf(
          "%s passes the NULL stream instead of bench_stream(): ranks sharing a GPU in one process would "
          "wait for each other forever; run one rank per process (-P) or update the program\n",
          r->coll->name);
      return BENCH_INVALID_USAGE;
    }
  }
  if (ngpus > 1) BENCH_NCCLCHECK(ncclGroupEnd());
  busy(t, 0);
  if (r->o->blocking == 1 || r->o->blocking == 2) BENCH_CHECK(complete(t));
  if (r->o->blocking == 1) barrier(t);
  return BENCH_SUCCESS;
}

/* The bytes of rank `rank`'s send and receive buffers that a call at offset 0 touches. */
static void spans(const struct bench_thread* t, int rank, int in_place, size_t* send, size_t* recv) {
  const struct bench_counts* c = &t->counts;
  size_t r = (size_t)rank, in = c->send_inplace * r + c->send, out = c->recv_inplace * r + c->recv;
  *send = in_place ? 0 : c->send * t->elt;
  *recv = (in_place ? (in > out ? in : out) : c->recv) * t->elt;
}

/* GPU mode: the staged inputs (and the zeroed or pre-filled receive buffer) to the device. */
static enum bench_result upload(struct bench_thread* t, int in_place) {
  struct bench_run* r = t->run;
  if (!r->gpu.rt) return BENCH_SUCCESS;
  for (int i = 0; i < r->o->ngpus; i++) {
    size_t send, recv;
    spans(t, t->first_rank + i, in_place, &send, &recv);
    BENCH_CHECK(bench_gpu_set_device(&r->gpu, t->devs[i]));
    BENCH_CHECK(bench_gpu_copy(&r->gpu, t->dsend[i], t->send[i], send, t->streams[i]));
    BENCH_CHECK(bench_gpu_copy(&r->gpu, t->drecv[i], t->recv[i], recv, t->streams[i]));
  }
  return BENCH_SUCCESS;
}

/* GPU mode: the results back into the staging buffers, after the calls completed. */
static enum bench_result download(struct bench_thread* t, int in_place) {
  struct bench_run* r = t->run;
  if (!r->gpu.rt) return BENCH_SUCCESS;
  BENCH_CHECK(complete(t));
  for (int i = 0; i < r->o->ngpus; i++) {
    size_t send, recv;
    spans(t, t->first_rank + i, in_place, &send, &recv);
    BENCH_CHECK(bench_gpu_set_device(&r->gpu, t->devs[i]));
    BENCH_CHECK(bench_gpu_copy(&r->gpu, t->recv[i], t->drecv[i], recv, t->streams[i]));
  }
  return BENCH_SUCCESS;
}

static void init_data(struct bench_thread* t, const struct bench_gen* g, int root, int in_place) {
  for (int i = 0; i < t->run->o->ngpus; i++) {
    struct bench_rank_data d = {g,      t->first_rank + i, t->run->nranks, root,       in_place,
                                t->elt, t->counts,         t->send[i],     t->recv[i], t->expected[i]};
    t->run->coll->init_data(&d);
  }
}

/* The test hook: every page of this thread's host buffers written (pages.h). The timed calls
 * walk the whole max-size buffers (offset k x size), so the whole buffers are checked. */
static void check_pages(struct bench_thread* t) {
  struct bench_run* r = t->run;
  if (r->gpu.rt || !bench_pages_check_on()) return;
  size_t bytes = r->max_bytes > 64 ? r->max_bytes : 64;
  for (int i = 0; i < r->o->ngpus; i++) {
    bench_pages_check("send", t->send[i], bytes);
    bench_pages_check("receive", t->recv[i], bytes);
  }
}

/* Wrong elements on this thread's ranks; BRAID_BENCH_CORRUPT flips one first on rank 0. */
static int64_t check_data(struct bench_thread* t, const struct bench_gen* g, int in_place) {
  int64_t wrong = 0;
  for (int i = 0; i < t->run->o->ngpus; i++) {
    int rank = t->first_rank + i;
    char* data = t->recv[i] + (in_place ? t->counts.recv_inplace * t->elt * (size_t)rank : 0);
    if (rank == 0 && t->counts.recv > 0 && atomic_load(&t->run->corrupt) > 0) {
      atomic_fetch_sub(&t->run->corrupt, 1);
      data[0] ^= 1; /* the lowest bit of element 0: always a different value */
    }
    wrong += bench_gen_compare(g, data, t->expected[i], t->counts.recv);
  }
  if (wrong) t->errors++;
  return wrong;
}

/* nccl-tests' BenchTime: one result group (out of place or in place) of one row. `op` is
 * what runs: a bench_op, or NONE for collectives that do not reduce. */
static enum bench_result bench_time(struct bench_thread* t, int dtype, int op, int root, int in_place) {
  const struct bench_opts* o = t->run->o;
  int checks = in_place && !t->run->coll->check_in_place ? 0 : o->datacheck;
  struct bench_gen g;
  /* Written data before timing, with or without -c (the buffers were also written whole when
   * allocated: no timed call reads the shared zero page; BRAID_BENCH_CHECK_PAGES checks it). */
  bench_gen_setup(&g, dtype, op, t->run->nranks, 99);
  init_data(t, &g, root, in_place);
  BENCH_CHECK(upload(t, in_place));
  BENCH_CHECK(start_coll(t, dtype, op, root, in_place, 0)); /* sync */
  BENCH_CHECK(complete(t));
  check_pages(t);
  barrier(t);

  double elapsed = 0, start = now_sec();
  for (int iter = 0; iter < o->iters; iter++) {
    if (o->blocking == 3) start = now_sec();
    if (o->agg_iters > 1) BENCH_NCCLCHECK(ncclGroupStart());
    for (int a = 0; a < o->agg_iters; a++)
      BENCH_CHECK(start_coll(t, dtype, op, root, in_place, iter * o->agg_iters + a));
    if (o->agg_iters > 1) BENCH_NCCLCHECK(ncclGroupEnd());
    if (o->blocking == 3) { /* time excludes the barrier */
      BENCH_CHECK(complete(t));
      elapsed += now_sec() - start;
      barrier(t);
    }
  }
  double queued = now_sec() - start; /* -C: the host's time, before waiting for the device */
  if (o->blocking != 3) BENCH_CHECK(complete(t));
  if (o->blocking != 3) elapsed = now_sec() - start;
  double per_iter = elapsed / ((double)o->iters * o->agg_iters);
  double cputime = o->blocking == 3 ? per_iter : queued / ((double)o->iters * o->agg_iters);
  busy(t, 1);
  double delta = bench_allreduce_f64(&t->m, per_iter, (enum bench_red)o->average);
  busy(t, 0);

  double algbw, busbw;
  t->run->coll->get_bw(t->counts.param, t->elt, delta, t->run->nranks, &algbw, &busbw);
  barrier(t);

  int64_t wrong = 0;
  t->rep++;
  for (int c = 0; c < checks; c++) {
    bench_gen_setup(&g, dtype, op, t->run->nranks, (uint64_t)t->rep);
    init_data(t, &g, root, in_place);
    BENCH_CHECK(upload(t, in_place));
    BENCH_CHECK(start_coll(t, dtype, op, root, in_place, 0));
    BENCH_CHECK(download(t, in_place));
    int64_t mine = check_data(t, &g, in_place);
    busy(t, 1);
    wrong = bench_allreduce_i64(&t->m, mine);
    busy(t, 0);
    if (wrong) break;
  }
  if (t->is_main)
    bench_report_row_result(stdout, (o->report_cputime ? cputime : delta) * 1e6, algbw, busbw, checks ? wrong : -1);
  t->bw_sum += busbw;
  t->bw_count++;
  return BENCH_SUCCESS;
}

/* The next size of the sweep, or 0 when it would not grow. */
static size_t next_size(const struct bench_opts* o, size_t size) {
  size_t next = o->step_factor > 1 ? size * o->step_factor : size + o->step_bytes;
  return next > size ? next : 0;
}

/* nccl-tests' TimeTest: warm-up over sizes min*2^k, then the rows, -N times. `shown` is the
 * op of the redop column (sendrecv shows -o without reducing). */
static enum bench_result time_test(struct bench_thread* t, int dtype, int op, int shown, int root) {
  const struct bench_opts* o = t->run->o;
  size_t min = t->run->min_bytes, max = t->run->max_bytes;
  barrier(t);
  if (t->thread == 0 && t->run->die_proc == t->run->w->proc) raise(SIGKILL); /* test hook */
  for (size_t size = min; size <= max; size *= 2) {
    setup_args(t, size, dtype);
    for (int w = 0; w < o->warmup_iters; w++) BENCH_CHECK(start_coll(t, dtype, op, root, 0, w));
    BENCH_CHECK(complete(t));
    if (size == 0) break;
  }
  long repeat = o->run_cycles;
  do {
    for (size_t size = min; size <= max;) {
      setup_args(t, size, dtype);
      if (t->is_main) {
        const struct bench_counts* c = &t->counts;
        bench_report_row_start(stdout, (c->send > c->recv ? c->send : c->recv) * t->elt, c->param,
                               bench_dtype_name(dtype), bench_op_name(shown), root);
      }
      BENCH_CHECK(bench_time(t, dtype, op, root, 0));
      BENCH_CHECK(bench_time(t, dtype, op, root, 1));
      if (t->is_main) bench_report_row_end(stdout, o->report_timestamps);
      size_t next = next_size(o, size);
      if (!next) break;
      size = next;
    }
  } while (--repeat);
  return BENCH_SUCCESS;
}

static enum bench_result thread_run(struct bench_thread* t) {
  struct bench_run* r = t->run;
  const struct bench_opts* o = r->o;
  int ngpus = o->ngpus, base = t->thread * ngpus;
  bench_gen_share_expected(ngpus > 1);
  if (o->parallel_init) {
    BENCH_CHECK(bench_comms_init(r, t->comms, ngpus, t->first_rank));
    BENCH_CHECK(bench_buffers_register(r, base, ngpus));
  }
  if (r->print_table_header) { /* COMM mode with -p: lines travel over the new communicators */
    char lines[BENCH_LINES_MAX];
    int len = 0;
    char host[256];
    bench_hostname(host, sizeof(host));
    for (int i = 0; i < ngpus; i++)
      bench_report_device_line(lines, &len, t->first_rank + i, r->w->color, (int)getpid(), host,
                               r->w->local_rank * o->nthreads * ngpus + base + i, "host");
    bench_print_device_lines(&t->m, lines, t->is_main);
    if (t->is_main) bench_report_table_header(stdout, o->report_cputime, o->report_timestamps);
  }
  int ntypes = o->dtype < 0 ? BENCH_NUM_DTYPES : 1;
  int nops = !r->coll->ops ? 1 : o->op < 0 ? BENCH_NUM_OPS : 1;
  int root_lo = r->coll->rooted ? (o->root < 0 ? 0 : o->root) : -1;
  int root_hi = r->coll->rooted ? (o->root < 0 ? r->nranks - 1 : o->root) : -1;
  for (int ti = 0; ti < ntypes; ti++) {
    int dtype = o->dtype < 0 ? ti : o->dtype;
    for (int oi = 0; oi < nops; oi++) {
      int shown = !r->coll->ops ? BENCH_OP_NONE : o->op < 0 ? oi : o->op;
      int op = r->coll->ops == 1 ? shown : BENCH_OP_NONE;
      for (int root = root_lo; root <= root_hi; root++) BENCH_CHECK(time_test(t, dtype, op, shown, root));
    }
  }
  return BENCH_SUCCESS;
}

void* bench_thread_main(void* arg) {
  struct bench_thread* t = arg;
  enum bench_result res = thread_run(t);
  if (res != BENCH_SUCCESS) { /* others may wait on this thread: end the process */
    bench_fail_trace(__FILE__, __LINE__);
    fflush(stdout);
    fflush(stderr);
    _exit(res);
  }
  return NULL;
}
