/*
 * opts.c - nccl-tests' command line (see opts.h). Flags, long names and defaults follow
 * nccl-tests v2.19.6; so do its messages and exit paths: an unknown option prints the usage
 * and exits 0, a bad size or min > max exits 255, an unknown -d/-o falls back to float/sum
 * with a message. braid adds -P/--nprocs and rejects counts that cannot work (-t 0, -n 0).
 */
#include "opts.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "verify.h"

void bench_opts_defaults(struct bench_opts* o) {
  memset(o, 0, sizeof(*o));
  o->nthreads = 1;
  o->ngpus = 1;
  o->min_bytes = 32u << 20;
  o->max_bytes = 32u << 20;
  o->step_bytes = 1u << 20;
  o->step_factor = 1;
  o->iters = 20;
  o->warmup_iters = 1;
  o->agg_iters = 1;
  o->run_cycles = 1;
  o->datacheck = 1;
  o->op = BENCH_OP_SUM;
  o->dtype = 7; /* ncclFloat */
  o->root = 0;
  o->average = 1;
  o->cta_policy = -1;
}

double bench_parse_size(const char* text) {
  double size;
  char unit;
  int n = sscanf(text, "%lf %1c", &size, &unit);
  if (n == 1) return size < 0 ? -1.0 : size;
  if (n != 2 || size < 0) return -1.0;
  switch (unit) {
    case 'G':
    case 'g':
      return size * 1024 * 1024 * 1024;
    case 'M':
    case 'm':
      return size * 1024 * 1024;
    case 'K':
    case 'k':
      return size * 1024;
    default:
      return -1.0;
  }
}

static void usage(const char* prog) {
  printf(
      "USAGE: %s \n\t"
      "[-t,--nthreads <num threads>] \n\t"
      "[-g,--ngpus <gpus per thread>] \n\t"
      "[-b,--minbytes <min size in bytes>] \n\t"
      "[-e,--maxbytes <max size in bytes>] \n\t"
      "[-i,--stepbytes <increment size>] \n\t"
      "[-f,--stepfactor <increment factor>] \n\t"
      "[-n,--iters <iteration count>] \n\t"
      "[-m,--agg_iters <aggregated iteration count>] \n\t"
      "[-w,--warmup_iters <warmup iteration count>] \n\t"
      "[-N,--run_cycles <cycle count> run & print each cycle (default: 1; 0=infinite)] \n\t"
      "[-p,--parallel_init <0/1>] \n\t"
      "[-c,--check <check iteration count>] \n\t"
      "[-o,--op <sum/prod/min/max/avg/mulsum/all>] \n\t"
      "[-d,--datatype <nccltype/all>] \n\t"
      "[-r,--root <root>] \n\t"
      "[-z,--blocking <0/1/2/3>] \n\t"
      "[-y,--stream_null <0/1>] \n\t"
      "[-T,--timeout <time in seconds>] \n\t"
      "[-G,--cudagraph <num graph launches>] \n\t"
      "[-C,--report_cputime <0/1>] \n\t"
      "[-S,--report_timestamps <0/1> report timestamps (default 0)] \n\t"
      "[-J,--output_file <file> write output to filepath, if accessible. Infer type from suffix (only json supported "
      "presently.)] \n\t"
      "[-a,--average <0/1/2/3> report average iteration time <0=RANK0/1=AVG/2=MIN/3=MAX>] \n\t"
      "[-R,--local_register <0/1/2> enable local (1) or symmetric (2) buffer registration on send/recv buffers "
      "(default: disable (0))] \n\t"
      "[-x,--cta_policy <0/1/2> set CTA policy (NCCL_CTA_POLICY_DEFAULT (0), NCCL_CTA_POLICY_EFFICIENCY (1), "
      "NCCL_CTA_POLICY_ZERO (2)) (default: do not set)] \n\t"
      "[-M,--memory_report <0/1> enable memory usage report (default: 0)] \n\t"
      "[-P,--nprocs <num processes> braid: fork this many local processes, each running nthreads x ngpus ranks] \n\t"
      "[-h,--help]\n",
      prog);
}

/* strtol with base 0 (as nccl-tests), plus braid's lower bound; 0 on success. */
static int parse_int(const char* text, const char* what, int min, int* out) {
  char* end;
  long v = strtol(text, &end, 0);
  if (end == text || *end != '\0' || v < min || v > 0x7fffffff) {
    fprintf(stderr, "invalid value '%s' for '%s' (at least %d)\n", text, what, min);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static int parse_bytes(const char* text, const char* what, size_t* out) {
  double v = bench_parse_size(text);
  if (v < 0) {
    fprintf(stderr, "invalid size specified for '%s'\n", what);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

static int parse_dtype(const char* text) {
  if (strcmp(text, "all") == 0) return -1;
  int dt = bench_dtype_from_name(text);
  if (dt >= 0) return dt;
  printf("invalid type %s, defaulting to %s .. \n", text, bench_dtype_name(7));
  return 7;
}

static int parse_op(const char* text) {
  if (strcmp(text, "all") == 0) return -1;
  int op = bench_op_from_name(text);
  if (op >= 0 && op < BENCH_NUM_OPS) return op;
  printf("invalid op %s, defaulting to %s .. \n", text, bench_op_name(BENCH_OP_SUM));
  return BENCH_OP_SUM;
}

static const struct option longopts[] = {{"nthreads", required_argument, 0, 't'},
                                         {"ngpus", required_argument, 0, 'g'},
                                         {"minbytes", required_argument, 0, 'b'},
                                         {"maxbytes", required_argument, 0, 'e'},
                                         {"stepbytes", required_argument, 0, 'i'},
                                         {"stepfactor", required_argument, 0, 'f'},
                                         {"iters", required_argument, 0, 'n'},
                                         {"agg_iters", required_argument, 0, 'm'},
                                         {"warmup_iters", required_argument, 0, 'w'},
                                         {"run_cycles", required_argument, 0, 'N'},
                                         {"parallel_init", required_argument, 0, 'p'},
                                         {"check", required_argument, 0, 'c'},
                                         {"op", required_argument, 0, 'o'},
                                         {"datatype", required_argument, 0, 'd'},
                                         {"root", required_argument, 0, 'r'},
                                         {"blocking", required_argument, 0, 'z'},
                                         {"stream_null", required_argument, 0, 'y'},
                                         {"timeout", required_argument, 0, 'T'},
                                         {"cudagraph", required_argument, 0, 'G'},
                                         {"report_cputime", required_argument, 0, 'C'},
                                         {"report_timestamps", required_argument, 0, 'S'},
                                         {"output_file", required_argument, 0, 'J'},
                                         {"average", required_argument, 0, 'a'},
                                         {"local_register", required_argument, 0, 'R'},
                                         {"cta_policy", required_argument, 0, 'x'},
                                         {"device_implementation", required_argument, 0, 'D'},
                                         {"device_cta_count", required_argument, 0, 'V'},
                                         {"memory", required_argument, 0, 'M'},
                                         {"memory_report", required_argument, 0, 'M'},
                                         {"unalign", required_argument, 0, 'u'},
                                         {"per_iter_timing", required_argument, 0, 'I'},
                                         {"per_iter_skip", required_argument, 0, 'K'},
                                         {"nprocs", required_argument, 0, 'P'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};

/* One option; 0 = fine, -1 = exit with 255, 1 = print usage and exit 0. */
static int apply(struct bench_opts* o, int c, const char* arg) {
  int v = 0;
  switch (c) {
    case 't':
      return parse_int(arg, "nthreads", 1, &o->nthreads);
    case 'g':
      return parse_int(arg, "ngpus", 1, &o->ngpus);
    case 'b':
      return parse_bytes(arg, "minbytes", &o->min_bytes);
    case 'e':
      return parse_bytes(arg, "maxbytes", &o->max_bytes);
    case 'i':
      return parse_bytes(arg, "stepBytes", &o->step_bytes);
    case 'f':
      if (parse_int(arg, "stepfactor", 0, &v)) return -1;
      o->step_factor = (size_t)v;
      return 0;
    case 'n':
      return parse_int(arg, "iters", 1, &o->iters);
    case 'm':
      return parse_int(arg, "agg_iters", 1, &o->agg_iters);
    case 'w':
      return parse_int(arg, "warmup_iters", 0, &o->warmup_iters);
    case 'N':
      return parse_int(arg, "run_cycles", 0, &o->run_cycles);
    case 'p':
      return parse_int(arg, "parallel_init", 0, &o->parallel_init);
    case 'c':
      return parse_int(arg, "check", 0, &o->datacheck);
    case 'o':
      o->op = parse_op(arg);
      return 0;
    case 'd':
      o->dtype = parse_dtype(arg);
      return 0;
    case 'r':
      if (strcmp(arg, "all") == 0) {
        o->root = -1;
        return 0;
      }
      return parse_int(arg, "root", -1, &o->root);
    case 'z':
      return parse_int(arg, "blocking", 0, &o->blocking);
    case 'y':
      return parse_int(arg, "stream_null", 0, &o->stream_null);
    case 'T':
      return parse_int(arg, "timeout", 0, &o->timeout);
    case 'G':
      if (parse_int(arg, "cudagraph", 0, &v)) return -1;
      if (v > 0) printf("Option -G (CUDA graph) is not available with host buffers. Ignoring\n");
      return 0;
    case 'C':
      return parse_int(arg, "report_cputime", 0, &o->report_cputime);
    case 'S':
      return parse_int(arg, "report_timestamps", 0, &o->report_timestamps);
    case 'J':
      o->json_file = arg;
      printf("# skipping json output; not supported by braid's benchmarks\n");
      return 0;
    case 'a':
      return parse_int(arg, "average", 0, &o->average);
    case 'R':
      return parse_int(arg, "local_register", 0, &o->local_register);
    case 'x':
      return parse_int(arg, "cta_policy", 0, &o->cta_policy);
    case 'D':
      if (parse_int(arg, "device_implementation", 0, &v)) return -1;
      if (v == 0) return 0;
      fprintf(stderr, "Option -D (device implementation) is not available with host buffers\n");
      return -1;
    case 'V':
      return parse_int(arg, "device_cta_count", 1, &v);
    case 'M':
      return parse_int(arg, "memory_report", 0, &o->memory_report);
    case 'u':
    case 'I':
      /* Accepted for command-line compatibility; the header reports the value in effect. */
      if (parse_int(arg, c == 'u' ? "unalign" : "per_iter_timing", 0, &v)) return -1;
      if (v) printf("Option -%c is not supported by braid's benchmarks. Ignoring\n", c);
      return 0;
    case 'K':
      return parse_int(arg, "per_iter_skip", 0, &v);
    case 'P':
      return parse_int(arg, "nprocs", 1, &o->nprocs);
    default:
      return 1;
  }
}

enum bench_parse bench_opts_parse(struct bench_opts* o, int argc, char** argv, const char* prog) {
  bench_opts_defaults(o);
  optind = 1;
  for (;;) {
    int c =
        getopt_long(argc, argv, "t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:I:K:P:", longopts, NULL);
    if (c == -1) break;
    int r = c == 'h' ? 1 : apply(o, c, optarg);
    if (r < 0) return BENCH_PARSE_EXIT_ERROR;
    if (r > 0) {
      if (c != 'h') printf("invalid option '%c'\n", c);
      usage(prog);
      return BENCH_PARSE_EXIT_OK;
    }
  }
  if (o->min_bytes > o->max_bytes) {
    fprintf(stderr, "invalid sizes for 'minbytes' and 'maxbytes': %llu > %llu\n", (unsigned long long)o->min_bytes,
            (unsigned long long)o->max_bytes);
    return BENCH_PARSE_EXIT_ERROR;
  }
  if (o->blocking > 3 || o->average > 3 || o->local_register > 2) {
    fprintf(stderr, "invalid value for -z (0..3), -a (0..3) or -R (0..2)\n");
    return BENCH_PARSE_EXIT_ERROR;
  }
  return BENCH_PARSE_RUN;
}
