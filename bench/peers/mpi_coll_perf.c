/*
 * mpi_coll_perf.c - the MPI peer of braid's benchmarks (built with Open MPI's mpicc, and with
 * mpicc.mpich when MPICH is installed: bench/peers/build.sh): the same sizes, the same data and
 * checks, the same busbw factors and the same output columns as bench/<coll>_perf, but each
 * operation is the MPI collective (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block,
 * MPI_Bcast, MPI_Reduce, MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Sendrecv to rank+1).
 * bench/compare.sh runs both side by side.
 *
 *   mpirun -np 2 build/bench/mpi_coll_perf all_reduce -b 8 -e 256M -f 2
 *
 * The per-collective sizes, expected results and bandwidths come from the very files the
 * braid programs use (bench/<coll>_perf.c, compiled with -Dbench_coll=bench_coll_<coll>);
 * nccl_stubs.c satisfies their NCCL references. MPI has no half, bfloat16 or fp8 types and no
 * avg or PreMulSum: those are refused. Note that Open MPI 4.1's AVX reduction component
 * saturates 8-bit integer sums instead of wrapping (open-mpi/ompi#8045, "wontfix"), so
 * `-d int8 -o sum` reports wrong elements there. In place means MPI_IN_PLACE; reduce_scatter's in-place
 * result is at the start of the buffer (MPI's rule) and out-of-place broadcast copies the
 * root's send buffer to its receive buffer first (ncclBroadcast's semantics).
 */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "dtype.h"
#include "opts.h"
#include "pages.h"
#include "report.h"
#include "verify.h"

#define COLLS(X) \
  X(all_reduce) X(all_gather) X(reduce_scatter) X(broadcast) X(reduce) X(alltoall) X(gather) X(scatter) X(sendrecv)

#define DECLARE(c) extern const struct bench_coll bench_coll_##c;
COLLS(DECLARE)
enum coll_id {
#define ID(c) C_##c,
  COLLS(ID)
};
static const struct {
  const char* name;
  const struct bench_coll* coll;
} colls[] = {
#define ENTRY(c) {#c, &bench_coll_##c},
    COLLS(ENTRY)};

/* MPI datatype of each ncclDataType_t, MPI_DATATYPE_NULL where MPI has none. */
static MPI_Datatype mpi_type(int dt) {
  switch (dt) {
    case 0:
      return MPI_INT8_T;
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_INT32_T;
    case 3:
      return MPI_UINT32_T;
    case 4:
      return MPI_INT64_T;
    case 5:
      return MPI_UINT64_T;
    case 7:
      return MPI_FLOAT;
    case 8:
      return MPI_DOUBLE;
    default:
      return MPI_DATATYPE_NULL;
  }
}

static MPI_Op mpi_op(int op) {
  switch (op) {
    case BENCH_OP_PROD:
      return MPI_PROD;
    case BENCH_OP_MAX:
      return MPI_MAX;
    case BENCH_OP_MIN:
      return MPI_MIN;
    default:
      return MPI_SUM;
  }
}

struct peer {
  struct bench_opts o;
  int coll, rank, nranks;
  const struct bench_coll* bc;
  size_t max_bytes;
  char *send, *recv, *expected;
  struct bench_counts counts;
  size_t elt;
  int errors;
  double bw_sum;
  int bw_count, rep;
};

/* One MPI call; `send`/`recv` are laid out as for the NCCL call of the same name. */
static int run(struct peer* p, const char* send, char* recv, int dt, int op, int root, int in_place) {
  int n = (int)p->counts.param, me = p->rank;
  MPI_Datatype t = mpi_type(dt);
  MPI_Op mop = mpi_op(op);
  MPI_Comm w = MPI_COMM_WORLD;
  switch (p->coll) {
    case C_all_reduce:
      return MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, n, t, mop, w);
    case C_all_gather:
      return in_place ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, w)
                      : MPI_Allgather(send, n, t, recv, n, t, w);
    case C_reduce_scatter:
      return MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, n, t, mop, w);
    case C_broadcast:
      if (me == root && !in_place) memcpy(recv, send, (size_t)n * p->elt);
      return MPI_Bcast(recv, n, t, root, w);
    case C_reduce:
      return MPI_Reduce(in_place && me == root ? MPI_IN_PLACE : send, recv, n, t, mop, root, w);
    case C_alltoall:
      return in_place ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, t, w)
                      : MPI_Alltoall(send, n, t, recv, n, t, w);
    case C_gather:
      return MPI_Gather(in_place && me == root ? MPI_IN_PLACE : send, n, t, recv, n, t, root, w);
    case C_scatter:
      return MPI_Scatter(send, n, t, in_place && me == root ? MPI_IN_PLACE : recv, n, t, root, w);
    default: {
      int next = (me + 1) % p->nranks, prev = (me - 1 + p->nranks) % p->nranks;
      if (in_place) return MPI_Sendrecv_replace(recv, n, t, next, 0, prev, 0, w, MPI_STATUS_IGNORE);
      return MPI_Sendrecv(send, n, t, next, 0, recv, n, t, prev, 0, w, MPI_STATUS_IGNORE);
    }
  }
}

static void setup(struct peer* p, size_t size, int dt) {
  p->elt = bench_dtype_size(dt);
  p->bc->get_counts(&p->counts, size / p->elt, p->elt, p->nranks);
  if (p->coll == C_reduce_scatter) p->counts.recv_inplace = 0; /* MPI_IN_PLACE: result at 0 */
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
  if (run(p, sendb, recvb, dt, op, root, in_place) != MPI_SUCCESS) MPI_Abort(MPI_COMM_WORLD, 3);
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
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters * o->agg_iters; i++) start(p, dt, op, root, in_place, i);
  double t = (MPI_Wtime() - t0) / ((double)o->iters * o->agg_iters);
  MPI_Op red = o->average == 2 ? MPI_MIN : o->average == 3 ? MPI_MAX : MPI_SUM;
  if (o->average == 0)
    MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else
    MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, red, MPI_COMM_WORLD);
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
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  }
  if (p->rank == 0) bench_report_row_result(stdout, t * 1e6, algbw, busbw, checks ? wrong : -1);
  p->bw_sum += busbw;
  p->bw_count++;
}

static void time_test(struct peer* p, int dt, int op, int shown, int root) {
  const struct bench_opts* o = &p->o;
  for (size_t size = o->min_bytes; size <= p->max_bytes; size *= 2) { /* warm-up */
    setup(p, size, dt);
    for (int i = 0; i < o->warmup_iters; i++) start(p, dt, op, root, 0, i);
    if (size == 0) break;
  }
  long repeat = o->run_cycles;
  do {
    for (size_t size = o->min_bytes; size <= p->max_bytes;) {
      setup(p, size, dt);
      if (p->counts.param > INT_MAX) break; /* MPI counts are int */
      if (p->rank == 0)
        bench_report_row_start(stdout, (p->counts.send > p->counts.recv ? p->counts.send : p->counts.recv) * p->elt,
                               p->counts.param, bench_dtype_name(dt), bench_op_name(shown), root);
      bench_time(p, dt, op, root, 0);
      bench_time(p, dt, op, root, 1);
      if (p->rank == 0) bench_report_row_end(stdout, o->report_timestamps);
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
  if (posix_memalign(&b, 4096, bytes) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
  memset(b, 0, bytes);
  return b;
}

static int usage_error(const char* msg, const char* arg) {
  fprintf(stderr,
          "mpi_coll_perf: %s%s\nusage: mpi_coll_perf <all_reduce|all_gather|reduce_scatter|broadcast|"
          "reduce|alltoall|gather|scatter|sendrecv> [nccl-tests options]\n",
          msg, arg);
  return 255;
}

int main(int argc, char** argv) {
  setlinebuf(stdout);
  struct peer p;
  memset(&p, 0, sizeof(p));
  p.coll = -1;
  for (size_t i = 0; argc > 1 && i < sizeof(colls) / sizeof(colls[0]); i++)
    if (strcmp(argv[1], colls[i].name) == 0) p.coll = (int)i;
  if (p.coll < 0) return usage_error("unknown collective ", argc > 1 ? argv[1] : "(none)");
  p.bc = colls[p.coll].coll;
  char prog[64];
  snprintf(prog, sizeof(prog), "mpi_%s_perf", colls[p.coll].name);
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
    return usage_error("-t, -g and -P do not apply: launch ranks with mpirun -np N", "");
  if (o->dtype >= 0 && mpi_type(o->dtype) == MPI_DATATYPE_NULL)
    return usage_error("MPI has no datatype for ", bench_dtype_name(o->dtype));
  if (p.bc->ops == 1 && (o->op == BENCH_OP_AVG || o->op == BENCH_OP_MULSUM))
    return usage_error("MPI has no reduction operator ", bench_op_name(o->op));
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &p.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &p.nranks);

  char version[MPI_MAX_LIBRARY_VERSION_STRING], tag[MPI_MAX_LIBRARY_VERSION_STRING + 32];
  char host[256], lines[BENCH_LINES_MAX];
  int vlen = 0, len = 0;
  MPI_Get_library_version(version, &vlen);
  version[strcspn(version, ",\n")] = '\0';
  snprintf(tag, sizeof(tag), "braid mpi peer, %s", version);
  if (p.rank == 0) bench_report_header(stdout, o, tag, 0, 0, prog);
  bench_hostname(host, sizeof(host));
  bench_report_device_line(lines, &len, p.rank, 0, (int)getpid(), host, p.rank, "mpi");
  char* all = p.rank == 0 ? calloc((size_t)p.nranks, BENCH_LINES_MAX) : NULL;
  MPI_Gather(lines, BENCH_LINES_MAX, MPI_BYTE, all, BENCH_LINES_MAX, MPI_BYTE, 0, MPI_COMM_WORLD);
  for (int r = 0; p.rank == 0 && r < p.nranks; r++) printf("%s", all + (size_t)r * BENCH_LINES_MAX);
  free(all);
  if (p.rank == 0) bench_report_table_header(stdout, o->report_cputime, o->report_timestamps);

  p.max_bytes = o->max_bytes;
  size_t bytes = p.max_bytes > 64 ? p.max_bytes : 64;
  p.send = written_buffer(bytes);
  p.recv = written_buffer(bytes);
  p.expected = written_buffer(bytes);
  for (int dt = 0; dt < BENCH_NUM_DTYPES; dt++) {
    if ((o->dtype >= 0 && dt != o->dtype) || mpi_type(dt) == MPI_DATATYPE_NULL) continue;
    int nops = !p.bc->ops ? 1 : o->op < 0 ? 4 : 1; /* MPI: sum, prod, max, min */
    for (int oi = 0; oi < nops; oi++) {
      int shown = !p.bc->ops ? BENCH_OP_NONE : o->op < 0 ? oi : o->op;
      int op = p.bc->ops == 1 ? shown : BENCH_OP_NONE;
      int lo = p.bc->rooted ? (o->root < 0 ? 0 : o->root) : -1;
      int hi = p.bc->rooted ? (o->root < 0 ? p.nranks - 1 : o->root) : -1;
      for (int root = lo; root <= hi; root++) time_test(&p, dt, op, shown, root);
    }
  }
  int errors = p.errors;
  MPI_Allreduce(MPI_IN_PLACE, &errors, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (p.rank == 0) bench_report_footer(stdout, errors, p.bw_count ? p.bw_sum / p.bw_count : 0, -1, prog, "");
  free(p.send);
  free(p.recv);
  free(p.expected);
  MPI_Finalize();
  return errors ? 7 : 0;
}
