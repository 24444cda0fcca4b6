/*
 * peer_main.c - a peer program of bench/compare.sh: braid's benchmarks with another library's
 * collectives underneath (peer.h; one file per library: mpi_coll_perf.c, gloo_coll_perf.cc,
 * oneccl_coll_perf.cc). The same sizes, data and checks, the same busbw factors and output
 * columns as bench/<coll>_perf, which it takes from the very files those programs use
 * (bench/<coll>_perf.c, compiled with -Dbench_coll=bench_coll_<coll>; nccl_stubs.c satisfies
 * their NCCL references). Buffers are written before timing, in place and out of place, and
 * the results checked after (-c). bench/peers/build.sh builds it per library.
 *
 *   mpirun -np 2 build/bench/mpi_coll_perf all_reduce -b 8 -e 256M -f 2
 *   bench/peers/launch.sh 2 build/bench/gloo_coll_perf all_reduce -b 64K -e 64M
 *   build/bench/gloo_coll_perf --colls     # the collectives this library has
 *
 * Datatypes: those all peers share (int8..uint64, float, double; no half, bfloat16 or fp8);
 * ops sum, prod, max, min (no avg or PreMulSum). A datatype, op or collective the library
 * lacks is said once and skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "dtype.h"
#include "opts.h"
#include "pages.h"
#include "peer.h"
#include "report.h"
#include "verify.h"

#define COLLS(X) \
  X(all_reduce) X(all_gather) X(reduce_scatter) X(broadcast) X(reduce) X(alltoall) X(gather) X(scatter) X(sendrecv)

#define DECLARE(c) extern const struct bench_coll bench_coll_##c;
COLLS(DECLARE)
static const struct {
  const char* name;
  const struct bench_coll* coll;
} colls[] = {
#define ENTRY(c) {#c, &bench_coll_##c},
    COLLS(ENTRY)};

/* The datatypes every peer library shares (ncclDataType_t values). */
static int peer_dtype(int dt) {
  return dt == 0 || dt == 1 || (dt >= 2 && dt <= 5) || dt == 7 || dt == 8;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct peer {
  struct bench_opts o;
  int coll, rank, nranks;
  const struct bench_coll* bc;
  size_t max_bytes;
  char *send, *recv, *expected;
  struct bench_counts counts;
  size_t elt;
  int errors, ran, said_size;
  double bw_sum;
  int bw_count, rep;
};

static void setup(struct peer* p, size_t size, int dt) {
  p->elt = bench_dtype_size(dt);
  p->bc->get_counts(&p->counts, size / p->elt, p->elt, p->nranks);
  if (p->coll == PEER_REDUCE_SCATTER && peer_lib.rs_in_place_at_start) p->counts.recv_inplace = 0;
}

/* The call at iteration `iter`: same buffer offsets as the braid engine. */
static void start(struct peer* p, int dt, int op, int root, int in_place, int iter) {
  const struct bench_counts* c = &p->counts;
  size_t total = (c->send > c->recv ? c->send : c->recv) * p->elt;
  size_t steps = total ? p->max_bytes / total : 1;
  size_t shift = total * ((size_t)iter % (steps ? steps : 1));
  char* recvb = p->recv + shift;
  const char* sendb = in_place ? recvb + c->send_inplace * p->elt * (size_t)p->rank : p->send + shift;
  if (in_place) recvb += c->recv_inplace * p->elt * (size_t)p->rank;
  if (peer_lib.run(p->coll, sendb, recvb, (size_t)c->param, p->elt, dt, op, root, in_place) != 0) {
    fprintf(stderr, "%s_coll_perf: %s failed on rank %d\n", peer_lib.name, colls[p->coll].name, p->rank);
    peer_lib.abort(3);
  }
}

static void bench_time(struct peer* p, int dt, int op, int root, int in_place) {
  const struct bench_opts* o = &p->o;
  int checks = in_place && !p->bc->check_in_place ? 0 : o->datacheck;
  struct bench_gen g;
  struct bench_rank_data d = {&g, p->rank, p->nranks, root, in_place, p->elt, p->counts, p->send, p->recv, p->expected};
  /* Written data before timing, as braid's engine and nccl-tests (the whole buffers were
   * written when allocated too): timing untouched pages measures the kernel's zero page. */
  bench_gen_setup(&g, dt, op, p->nranks, 99);
  p->bc->init_data(&d);
  start(p, dt, op, root, in_place, 0);
  size_t bytes = p->max_bytes > 64 ? p->max_bytes : 64;
  bench_pages_check("send", p->send, bytes);
  bench_pages_check("receive", p->recv, bytes);
  peer_lib.barrier();
  double t0 = now();
  for (int i = 0; i < o->iters * o->agg_iters; i++) start(p, dt, op, root, in_place, i);
  double t = (now() - t0) / ((double)o->iters * o->agg_iters);
  if (o->average == 0)
    peer_lib.bcast_time(&t);
  else
    peer_lib.reduce_time(&t, o->average == 2 ? PEER_TIME_MIN : o->average == 3 ? PEER_TIME_MAX : PEER_TIME_SUM);
  if (o->average == 1) t /= p->nranks;
  double algbw, busbw;
  p->bc->get_bw(p->counts.param, p->elt, t, p->nranks, &algbw, &busbw);
  int64_t wrong = 0;
  p->rep++;
  for (int c = 0; c < checks && !wrong; c++) {
    bench_gen_setup(&g, dt, op, p->nranks, (uint64_t)p->rep);
    p->bc->init_data(&d);
    start(p, dt, op, root, in_place, 0);
    char* data = p->recv + (in_place ? p->counts.recv_inplace * p->elt * (size_t)p->rank : 0);
    wrong = bench_gen_compare(&g, data, p->expected, p->counts.recv);
    p->errors += wrong != 0;
    peer_lib.sum_i64(&wrong);
  }
  if (p->rank == 0) bench_report_row_result(stdout, t * 1e6, algbw, busbw, checks ? wrong : -1);
  p->bw_sum += busbw;
  p->bw_count++;
}

static void time_test(struct peer* p, int dt, int op, int shown, int root) {
  const struct bench_opts* o = &p->o;
  for (size_t size = o->min_bytes; size <= p->max_bytes; size *= 2) { /* warm-up */
    setup(p, size, dt);
    if ((size_t)p->counts.param > peer_lib.max_count) break;
    int skip = peer_lib.lacks_size && peer_lib.lacks_size(p->coll, p->counts.param, p->elt);
    for (int i = 0; i < o->warmup_iters && !skip; i++) start(p, dt, op, root, 0, i);
    if (size == 0) break;
  }
  long repeat = o->run_cycles;
  do {
    for (size_t size = o->min_bytes; size <= p->max_bytes;) {
      setup(p, size, dt);
      if ((size_t)p->counts.param > peer_lib.max_count) break;
      const char* why = peer_lib.lacks_size ? peer_lib.lacks_size(p->coll, p->counts.param, p->elt) : NULL;
      if (why) {
        if (p->rank == 0 && !p->said_size++) printf("# skipped: %s\n", why);
        goto next_size;
      }
      if (p->rank == 0)
        bench_report_row_start(stdout, (p->counts.send > p->counts.recv ? p->counts.send : p->counts.recv) * p->elt,
                               p->counts.param, bench_dtype_name(dt), bench_op_name(shown), root);
      bench_time(p, dt, op, root, 0);
      bench_time(p, dt, op, root, 1);
      if (p->rank == 0) bench_report_row_end(stdout, o->report_timestamps);
    next_size:;
      size_t next = o->step_factor > 1 ? size * o->step_factor : size + o->step_bytes;
      if (next <= size) break;
      size = next;
    }
  } while (--repeat);
}

/* A page-aligned buffer with every page written (not calloc: its untouched pages would all
 * read the shared zero page). */
static char* written_buffer(size_t bytes) {
  void* b = NULL;
  if (posix_memalign(&b, 4096, bytes) != 0) peer_lib.abort(1);
  memset(b, 0, bytes);
  return b;
}

static int usage_error(const char* msg, const char* arg) {
  fprintf(stderr,
          "%s_coll_perf: %s%s\nusage: %s_coll_perf <all_reduce|all_gather|reduce_scatter|broadcast|"
          "reduce|alltoall|gather|scatter|sendrecv> [nccl-tests options] | --colls\n",
          peer_lib.name, msg, arg, peer_lib.name);
  return 255;
}

/* The op a library is asked about for collective `bc` with op `op` (-1: all). */
static int asked_op(const struct bench_coll* bc, int op) {
  return bc->ops == 1 ? (op < 0 ? BENCH_OP_SUM : op) : BENCH_OP_NONE;
}

/* --colls: the collectives the library has for float (and sum), one a line. */
static int list_colls(void) {
  for (int c = 0; c < PEER_NCOLLS; c++) {
    const char* why = peer_lib.lacks(c, 7, asked_op(colls[c].coll, -1));
    if (!why)
      printf("%s\n", colls[c].name);
    else
      fprintf(stderr, "# %s\n", why);
  }
  return 0;
}

static void header(struct peer* p, const char* prog) {
  char version[256], tag[320], host[256], lines[BENCH_LINES_MAX];
  int len = 0;
  peer_lib.version(version, sizeof(version));
  snprintf(tag, sizeof(tag), "braid %s peer, %s", peer_lib.name, version);
  if (p->rank == 0) bench_report_header(stdout, &p->o, tag, 0, 0, prog);
  bench_hostname(host, sizeof(host));
  memset(lines, 0, sizeof(lines));
  bench_report_device_line(lines, &len, p->rank, 0, (int)getpid(), host, p->rank, peer_lib.name);
  char* all = p->rank == 0 ? calloc((size_t)p->nranks, BENCH_LINES_MAX) : NULL;
  peer_lib.gather_bytes(lines, all, BENCH_LINES_MAX);
  for (int r = 0; p->rank == 0 && r < p->nranks; r++) printf("%s", all + (size_t)r * BENCH_LINES_MAX);
  free(all);
  if (p->rank == 0) bench_report_table_header(stdout, p->o.report_cputime, p->o.report_timestamps);
}

/* Every datatype x op x root of the options the library has; what it lacks said once. */
static void run_all(struct peer* p) {
  const struct bench_opts* o = &p->o;
  for (int dt = 0; dt < BENCH_NUM_DTYPES; dt++) {
    if ((o->dtype >= 0 && dt != o->dtype) || !peer_dtype(dt)) continue;
    int nops = !p->bc->ops ? 1 : o->op < 0 ? 4 : 1; /* sum, prod, max, min */
    for (int oi = 0; oi < nops; oi++) {
      int shown = !p->bc->ops ? BENCH_OP_NONE : o->op < 0 ? oi : o->op;
      int op = p->bc->ops == 1 ? shown : BENCH_OP_NONE;
      const char* why = peer_lib.lacks(p->coll, dt, op);
      if (why) {
        if (p->rank == 0) printf("# skipped: %s\n", why);
        continue;
      }
      int lo = p->bc->rooted ? (o->root < 0 ? 0 : o->root) : -1;
      int hi = p->bc->rooted ? (o->root < 0 ? p->nranks - 1 : o->root) : -1;
      for (int root = lo; root <= hi; root++) time_test(p, dt, op, shown, root);
      p->ran++;
    }
  }
}

int main(int argc, char** argv) {
  setlinebuf(stdout);
  struct peer p;
  memset(&p, 0, sizeof(p));
  if (argc == 2 && strcmp(argv[1], "--colls") == 0) return list_colls();
  p.coll = -1;
  for (int i = 0; argc > 1 && i < PEER_NCOLLS; i++)
    if (strcmp(argv[1], colls[i].name) == 0) p.coll = i;
  if (p.coll < 0) return usage_error("unknown collective ", argc > 1 ? argv[1] : "(none)");
  p.bc = colls[p.coll].coll;
  char prog[64];
  snprintf(prog, sizeof(prog), "%s_%s_perf", peer_lib.name, colls[p.coll].name);
  switch (bench_opts_parse(&p.o, argc - 1, argv + 1, prog)) {
    case BENCH_PARSE_EXIT_OK:
      return 0;
    case BENCH_PARSE_EXIT_ERROR:
      return 255;
    default:
      break;
  }
  const struct bench_opts* o = &p.o;
  if (o->nthreads != 1 || o->ngpus != 1 || o->nprocs > 1)
    return usage_error("-t, -g and -P do not apply: one process per rank (mpirun -np N, bench/peers/launch.sh N)", "");
  if (o->dtype >= 0 && !peer_dtype(o->dtype)) return usage_error("no peer datatype for ", bench_dtype_name(o->dtype));
  if (p.bc->ops == 1 && (o->op == BENCH_OP_AVG || o->op == BENCH_OP_MULSUM))
    return usage_error("no peer reduction operator ", bench_op_name(o->op));
  if (peer_lib.init(&argc, &argv, &p.rank, &p.nranks) != 0) {
    fprintf(stderr, "%s: cannot join the job\n", prog);
    return 4;
  }
  header(&p, prog);
  p.max_bytes = o->max_bytes;
  size_t bytes = p.max_bytes > 64 ? p.max_bytes : 64;
  p.send = written_buffer(bytes);
  p.recv = written_buffer(bytes);
  p.expected = written_buffer(bytes);
  run_all(&p);
  int64_t errors = p.errors;
  peer_lib.sum_i64(&errors);
  if (p.rank == 0) bench_report_footer(stdout, (int)errors, p.bw_count ? p.bw_sum / p.bw_count : 0, -1, prog, "");
  free(p.send);
  free(p.recv);
  free(p.expected);
  peer_lib.finalize();
  return errors ? 7 : p.ran ? 0 : 3;
}
