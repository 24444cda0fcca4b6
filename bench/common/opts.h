/*
 * opts.h - the command line of the benchmarks: nccl-tests' flags with nccl-tests' long names,
 * defaults and quirks, plus braid's -P/--nprocs (fork N local processes). Parsing has no side
 * effects beyond the printing nccl-tests does (usage, "invalid type ... defaulting to ...").
 */
#ifndef BENCH_OPTS_H
#define BENCH_OPTS_H

#include <stddef.h>

struct bench_opts {
  int nthreads;          /* -t threads per process */
  int ngpus;             /* -g ranks ("GPUs") per thread */
  size_t min_bytes;      /* -b */
  size_t max_bytes;      /* -e */
  size_t step_bytes;     /* -i */
  size_t step_factor;    /* -f (1: step by -i) */
  int iters;             /* -n */
  int warmup_iters;      /* -w */
  int agg_iters;         /* -m operations per iteration, grouped */
  int run_cycles;        /* -N (0: forever) */
  int parallel_init;     /* -p threads create their own communicators */
  int datacheck;         /* -c check iterations (0: report N/A) */
  int op;                /* -o bench_op, -1 = all */
  int dtype;             /* -d ncclDataType_t, -1 = all */
  int root;              /* -r, -1 = all */
  int blocking;          /* -z 0..3 */
  int stream_null;       /* -y (accepted; host buffers use no stream) */
  int timeout;           /* -T seconds, 0 = none */
  int graph_launches;    /* -G (not available on host buffers) */
  int report_cputime;    /* -C */
  int report_timestamps; /* -S */
  int average;           /* -a 0 rank 0, 1 avg, 2 min, 3 max */
  int local_register;    /* -R 0 none, 1 ncclCommRegister, 2 ncclCommWindowRegister */
  int cta_policy;        /* -x (-1: leave the config default) */
  int memory_report;     /* -M (accepted; GPU memory only) */
  int unalign;           /* -u (accepted and ignored: always 0) */
  int nprocs;            /* -P braid: fork this many local processes (0: not asked) */
  const char* json_file; /* -J (accepted; not written) */
};

/* Parse result: run, exit 0 (help or nccl-tests' invalid-option path), or exit with 255. */
enum bench_parse { BENCH_PARSE_RUN = 0, BENCH_PARSE_EXIT_OK = 1, BENCH_PARSE_EXIT_ERROR = 2 };

void bench_opts_defaults(struct bench_opts* o);
/* Parses argv (getopt_long: resets optind). `prog` names the program in the usage text. */
enum bench_parse bench_opts_parse(struct bench_opts* o, int argc, char** argv, const char* prog);
/*
 * nccl-tests' size syntax: a number with an optional K, M or G suffix (binary units), e.g.
 * "8", "64K", "1.5M". Returns -1 when the text is not a size.
 */
double bench_parse_size(const char* text);

#endif /* BENCH_OPTS_H */
