/*
 * unit.c - Check tests of the benchmarks' shared code that needs no communicator:
 * nccl-tests' size syntax and flags (opts.c), its number and line formats (report.c), the
 * half/bfloat16/fp8 codecs (dtype.c), and the claim verify.h makes - that a library
 * accumulating in the datatype's own precision, in any order, produces results that compare
 * equal (or within 2 ulp for float avg) to the expected ones. Built and run by
 * tests/bench/run.sh.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "dtype.h"
#include "opts.h"
#include "pages.h"
#include "report.h"
#include "verify.h"

/* ---- opts ------------------------------------------------------------------------- */

START_TEST(test_parse_size) {
  ck_assert(bench_parse_size("8") == 8);
  ck_assert(bench_parse_size("64K") == 65536);
  ck_assert(bench_parse_size("64k") == 65536);
  ck_assert(bench_parse_size("1.5M") == 1.5 * 1048576);
  ck_assert(bench_parse_size("2G") == 2.0 * 1073741824);
  ck_assert(bench_parse_size("256M") == 268435456);
  ck_assert(bench_parse_size("x") < 0);
  ck_assert(bench_parse_size("8X") < 0);
  ck_assert(bench_parse_size("-8") < 0);
}
END_TEST

static enum bench_parse parse(struct bench_opts* o, const char* line) {
  char buf[512], *argv[64];
  int argc = 0;
  snprintf(buf, sizeof(buf), "prog %s", line);
  for (char* t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
  argv[argc] = NULL;
  return bench_opts_parse(o, argc, argv, "prog");
}

START_TEST(test_opts) {
  struct bench_opts o;
  ck_assert_int_eq(parse(&o, ""), BENCH_PARSE_RUN);
  ck_assert_uint_eq(o.min_bytes, 32u << 20);
  ck_assert_uint_eq(o.max_bytes, 32u << 20);
  ck_assert_int_eq(o.iters, 20);
  ck_assert_int_eq(o.warmup_iters, 1);
  ck_assert_int_eq(o.dtype, 7);
  ck_assert_int_eq(o.op, BENCH_OP_SUM);
  ck_assert_int_eq(o.average, 1);
  ck_assert_int_eq(parse(&o, "-b 8 -e 128M -f 2 -n 5 -w 2 -m 3 -N 2 -c 0 -t 2 -g 3 -P 4 -d half -o avg -r 1 -z 1 -a 2"),
                   BENCH_PARSE_RUN);
  ck_assert_uint_eq(o.min_bytes, 8);
  ck_assert_uint_eq(o.max_bytes, 128u << 20);
  ck_assert_uint_eq(o.step_factor, 2);
  ck_assert_int_eq(o.iters, 5);
  ck_assert_int_eq(o.warmup_iters, 2);
  ck_assert_int_eq(o.agg_iters, 3);
  ck_assert_int_eq(o.run_cycles, 2);
  ck_assert_int_eq(o.datacheck, 0);
  ck_assert_int_eq(o.nthreads, 2);
  ck_assert_int_eq(o.ngpus, 3);
  ck_assert_int_eq(o.nprocs, 4);
  ck_assert_int_eq(o.dtype, 6);
  ck_assert_int_eq(o.op, BENCH_OP_AVG);
  ck_assert_int_eq(o.root, 1);
  ck_assert_int_eq(o.blocking, 1);
  ck_assert_int_eq(o.average, 2);
  ck_assert_int_eq(parse(&o, "--minbytes 1K --maxbytes 4K --stepbytes 1K --datatype all --op all --root -1 --nprocs 2"),
                   BENCH_PARSE_RUN);
  ck_assert_uint_eq(o.step_bytes, 1024);
  ck_assert_int_eq(o.dtype, -1);
  ck_assert_int_eq(o.op, -1);
  ck_assert_int_eq(o.root, -1);
  ck_assert_int_eq(parse(&o, "-d nosuchtype -o nosuchop"), BENCH_PARSE_RUN); /* nccl-tests falls back */
  ck_assert_int_eq(o.dtype, 7);
  ck_assert_int_eq(o.op, BENCH_OP_SUM);
  ck_assert_int_eq(parse(&o, "-b 1M -e 1K"), BENCH_PARSE_EXIT_ERROR);
  ck_assert_int_eq(parse(&o, "-b 1Q"), BENCH_PARSE_EXIT_ERROR);
  ck_assert_int_eq(parse(&o, "-t 0"), BENCH_PARSE_EXIT_ERROR);
  ck_assert_int_eq(parse(&o, "-P 0"), BENCH_PARSE_EXIT_ERROR);
  ck_assert_int_eq(parse(&o, "-h"), BENCH_PARSE_EXIT_OK);
}
END_TEST

/* ---- report ----------------------------------------------------------------------- */

START_TEST(test_format_float) {
  char s[16];
  bench_format_float(s, 0, 7);
  ck_assert_str_eq(s, "   0.00");
  bench_format_float(s, 1234.5, 7);
  ck_assert_str_eq(s, "1234.50");
  bench_format_float(s, 12345.67, 7);
  ck_assert_str_eq(s, "12345.7");
  bench_format_float(s, 1234567, 7);
  ck_assert_str_eq(s, "1234567");
  bench_format_float(s, 12345678, 7);
  ck_assert_str_eq(s, "1.2e+07");
  bench_format_float(s, 108.72, 6);
  ck_assert_str_eq(s, "108.72");
  bench_format_float(s, 1000.5, 6);
  ck_assert_str_eq(s, "1000.5");
  bench_format_float(s, 123456, 6);
  ck_assert_str_eq(s, "123456");
  bench_format_float(s, 1234567, 6);
  ck_assert_str_eq(s, " 1e+06");
}
END_TEST

/* The lines of reference section 13's sample output, byte for byte. */
START_TEST(test_report_lines) {
  FILE* f;
  size_t len;
  char* buf = NULL;
  f = open_memstream(&buf, &len);
  bench_report_table_header(f, 0, 0);
  bench_report_row_start(f, 134217728, 33554432, "float", "sum", -1);
  bench_report_row_result(f, 1234.50, 108.72, 190.27, 0);
  bench_report_row_result(f, 1230.10, 109.11, 190.95, 0);
  bench_report_row_end(f, 0);
  bench_report_row_start(f, 8, 2, "float", "sum", -1);
  bench_report_row_result(f, 10.79, 0, 0, 0);
  bench_report_row_result(f, 10.53, 0, 0, -1);
  bench_report_row_end(f, 0);
  bench_report_footer(f, 0, 85.1234, -1, "all_reduce_perf", "");
  fclose(f);
  const char* want =
      "#\n"
      "#                                                              out-of-place                       in-place      "
      "    \n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  "
      "#wrong \n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)  "
      "       \n"
      "   134217728      33554432     float     sum      -1  1234.50  108.72  190.27       0  1230.10  109.11  190.95  "
      "     0\n"
      "           8             2     float     sum      -1    10.79    0.00    0.00       0    10.53    0.00    0.00  "
      "  N/A\n"
      "# Out of bounds values : 0 OK\n"
      "# Avg bus bandwidth    : 85.1234 \n"
      "#\n"
      "# Collective test concluded: all_reduce_perf\n"
      "#\n"
      "\n";
  ck_assert_str_eq(buf, want);
  free(buf);

  f = open_memstream(&buf, &len);
  bench_report_footer(f, 2, 1.5, 10, "x_perf", "boom");
  fclose(f);
  ck_assert_str_eq(buf,
                   "# Out of bounds values : 2 FAILED\n# Avg bus bandwidth    : 1.5 FAILED\n#\n"
                   "# Collective test concluded: x_perf\n#\n# error: boom\n");
  free(buf);

  char lines[BENCH_LINES_MAX];
  int n = 0;
  bench_report_device_line(lines, &n, 0, 0, 12345, "myhost", 0, "host");
  ck_assert_str_eq(lines, "#  Rank  0 Group  0 Pid  12345 on     myhost device  0 [0000:00:00] host\n");
  for (int i = 0; i < 100; i++) bench_report_device_line(lines, &n, i, 0, 1, "h", i, "host");
  ck_assert_str_eq(lines + BENCH_LINES_MAX - 5, "...\n"); /* truncated as nccl-tests */
}
END_TEST

START_TEST(test_report_header) {
  struct bench_opts o;
  bench_opts_defaults(&o);
  o.min_bytes = 8;
  o.max_bytes = 134217728;
  o.step_factor = 2;
  o.ngpus = 8;
  size_t len;
  char* buf = NULL;
  FILE* f = open_memstream(&buf, &len);
  bench_report_header(f, &o, "braid", 22809, 22809, "all_reduce_perf");
  fclose(f);
  ck_assert_str_eq(buf,
                   "# nccl-tests version 2.19.6 (braid) nccl-headers=22809 nccl-library=22809\n"
                   "# Collective test starting: all_reduce_perf\n"
                   "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 1 iters: 20 "
                   "agg iters: 1 validation: 1 graph: 0 unalign: 0\n"
                   "#\n"
                   "# Using devices\n");
  free(buf);
}
END_TEST

/* ---- dtype ------------------------------------------------------------------------ */

START_TEST(test_dtype_codecs) {
  static const struct {
    int dt;
    double v;
    uint64_t bits;
  } known[] = {{6, 1.0, 0x3C00},
               {6, -2.0, 0xC000},
               {6, 65504, 0x7BFF},
               {6, 1e9, 0x7C00},
               {6, 1 + 1.0 / 2048, 0x3C00},
               /* tie -> even */ {6, 1 + 3.0 / 2048, 0x3C02},
               {9, 1.0, 0x3F80},
               {9, 3.0, 0x4040},
               {10, 1.0, 0x38},
               {10, 448, 0x7E},
               {10, 1000, 0x7E},
               {10, -0.5, 0xB0},
               {11, 1.0, 0x3C},
               {11, 57344, 0x7B},
               {11, 1e6, 0x7C}};
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    uint64_t bits = 0;
    bench_dtype_encode(known[i].dt, known[i].v, &bits);
    ck_assert_msg(bits == known[i].bits, "%s(%g) = 0x%llx, want 0x%llx", bench_dtype_name(known[i].dt), known[i].v,
                  (unsigned long long)bits, (unsigned long long)known[i].bits);
  }
  /* Every finite pattern of the narrow formats survives decode -> encode. */
  int dts[] = {6, 9, 10, 11};
  for (int k = 0; k < 4; k++) {
    int dt = dts[k];
    uint64_t n = 1ull << (8 * bench_dtype_size(dt));
    for (uint64_t b = 0; b < n; b++) {
      double v = bench_dtype_decode(dt, &b);
      if (!isfinite(v)) continue;
      uint64_t back = 0;
      bench_dtype_encode(dt, v, &back);
      ck_assert_msg(back == b, "%s 0x%llx -> %g -> 0x%llx", bench_dtype_name(dt), (unsigned long long)b, v,
                    (unsigned long long)back);
    }
  }
  ck_assert_int_eq(bench_dtype_from_name("bfloat16"), 9);
  ck_assert_int_eq(bench_dtype_from_name("f8e5m2"), 11);
  ck_assert_int_eq(bench_dtype_from_name("float32"), -1);
}
END_TEST

/* ---- verify ----------------------------------------------------------------------- */

static double round_to(int dt, double v) {
  uint64_t b = 0;
  bench_dtype_encode(dt, v, &b);
  return bench_dtype_decode(dt, &b);
}

/* What a library does: combine inputs in `order`, rounding every step to the datatype. */
static double simulate(const struct bench_gen* g, const double* in, const int* order, int avg_premul) {
  int dt = g->dtype, n = g->nranks;
  double scale = avg_premul ? round_to(dt, dt == 8 ? 1.0 / n : (double)(1.0f / (float)n)) : 1;
  double acc = 0;
  for (int k = 0; k < n; k++) {
    int r = order[k];
    double v = in[r];
    if (g->op == BENCH_OP_MULSUM) v = round_to(dt, v * (1 + (r & 1)));
    if (g->op == BENCH_OP_AVG && avg_premul) v = round_to(dt, v * scale);
    if (k == 0) {
      acc = v;
      continue;
    }
    switch (g->op) {
      case BENCH_OP_PROD:
        acc = round_to(dt, acc * v);
        break;
      case BENCH_OP_MAX:
        acc = v > acc ? v : acc;
        break;
      case BENCH_OP_MIN:
        acc = v < acc ? v : acc;
        break;
      default:
        acc = round_to(dt, acc + v);
        break;
    }
  }
  if (g->op == BENCH_OP_AVG && !avg_premul) acc = round_to(dt, acc / n);
  return acc;
}

START_TEST(test_float_results_exact) {
  static const int nranks[] = {1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 130};
  static const int dts[] = {6, 7, 8, 9, 10, 11};
  enum { COUNT = 300 };
  for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
    for (int op = 0; op < BENCH_NUM_OPS; op++)
      for (size_t k = 0; k < sizeof(nranks) / sizeof(nranks[0]); k++) {
        int dt = dts[d], n = nranks[k];
        size_t elt = bench_dtype_size(dt);
        struct bench_gen g;
        bench_gen_setup(&g, dt, op, n, 12345 + (uint64_t)k);
        char* inputs = malloc((size_t)n * COUNT * elt);
        char* expected = malloc(COUNT * elt);
        char* got = malloc(COUNT * elt);
        double* in = malloc(sizeof(double) * (size_t)n);
        int* order = malloc(sizeof(int) * (size_t)n);
        for (int r = 0; r < n; r++) bench_gen_input(&g, inputs + (size_t)r * COUNT * elt, COUNT, 0, r);
        bench_gen_expected(&g, expected, COUNT, 0);
        for (int pass = 0; pass < 6; pass++) { /* forward, backward, evens-then-odds; x2 avg kinds */
          /* Passes 3..5: avg as sum-then-divide, which NCCL does not do for floats; only
           * checked where it stays within the 2-ulp tolerance (few ranks, wide types). */
          if (pass >= 3 && (op != BENCH_OP_AVG || n > 8 || elt == 1)) continue;
          for (int r = 0; r < n; r++) order[r] = pass % 3 == 1 ? n - 1 - r : r;
          if (pass % 3 == 2) /* evens then odds */
            for (int r = 0, i = 0; i < 2; i++)
              for (int x = i; x < n; x += 2) order[r++] = x;
          for (size_t j = 0; j < COUNT; j++) {
            for (int r = 0; r < n; r++) in[r] = bench_dtype_decode(dt, inputs + ((size_t)r * COUNT + j) * elt);
            bench_dtype_encode(dt, simulate(&g, in, order, pass < 3), got + j * elt);
          }
          int64_t wrong = bench_gen_compare(&g, got, expected, COUNT);
          ck_assert_msg(wrong == 0, "%s %s n=%d pass %d: %lld wrong", bench_dtype_name(dt), bench_op_name(op), n, pass,
                        (long long)wrong);
        }
        free(inputs), free(expected), free(got), free(in), free(order);
      }
}
END_TEST

START_TEST(test_compare_counts) {
  struct bench_gen g;
  char a[64 * 8], b[64 * 8];
  for (int dt = 0; dt < BENCH_NUM_DTYPES; dt++) {
    bench_gen_setup(&g, dt, BENCH_OP_NONE, 4, 7);
    bench_gen_input(&g, a, 64, 0, 3);
    memcpy(b, a, sizeof(a));
    ck_assert_int_eq(bench_gen_compare(&g, a, b, 64), 0);
    a[5 * bench_dtype_size(dt)] ^= 1;
    a[9 * bench_dtype_size(dt)] ^= 1;
    ck_assert_int_eq(bench_gen_compare(&g, a, b, 64), 2);
    /* Data differs between ranks and between seeds. */
    bench_gen_input(&g, a, 64, 0, 2);
    ck_assert_int_gt(bench_gen_compare(&g, a, b, 64), 32);
  }
}
END_TEST

START_TEST(test_int_results) {
  /* Integer avg: non-negative inputs, so truncation and floor agree; sums never wrap. */
  for (int dt = 0; dt < 6; dt++)
    for (int n = 1; n <= 300; n += 37) {
      struct bench_gen g;
      bench_gen_setup(&g, dt, BENCH_OP_AVG, n, 1);
      size_t elt = bench_dtype_size(dt);
      char v[8], e[8];
      uint64_t sum = 0;
      for (int r = 0; r < n; r++) {
        bench_gen_input(&g, v, 1, 5, r);
        sum += bench_dtype_load_bits(dt, v);
      }
      ck_assert(sum <= ((elt == 8 ? ~0ull : (1ull << (8 * elt)) - 1) >> (dt % 2 == 0)));
      bench_gen_expected(&g, e, 1, 5);
      ck_assert_uint_eq(bench_dtype_load_bits(dt, e), sum / (uint64_t)n);
    }
}
END_TEST

/* The honesty check: a fresh mapping's pages are unwritten, reading them (the zero page) does
 * not change that, writing does, page by page. */
START_TEST(test_pages_unwritten) {
  size_t ps = 4096, n = 64;
  char* m = mmap(NULL, n * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(m, MAP_FAILED);
  ck_assert_int_eq(bench_pages_unwritten(m, n * ps), (long)n);
  volatile char sum = 0;
  for (size_t i = 0; i < n * ps; i += ps) sum += m[i];
  ck_assert_int_eq(bench_pages_unwritten(m, n * ps), (long)n);
  for (size_t i = 0; i < n * ps; i += 2 * ps) m[i] = 1;
  ck_assert_int_eq(bench_pages_unwritten(m, n * ps), (long)n / 2);
  ck_assert_int_eq(bench_pages_unwritten(m + 100, 1), 0);
  ck_assert_int_eq(bench_pages_unwritten(m + ps, ps), 1);
  memset(m, 0, n * ps);
  ck_assert_int_eq(bench_pages_unwritten(m, n * ps), 0);
  ck_assert_int_eq(bench_pages_unwritten(m, 0), 0);
  munmap(m, n * ps);
}
END_TEST

static Suite* bench_suite(void) {
  Suite* s = suite_create("bench");
  TCase* tc = tcase_create("common");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_parse_size);
  tcase_add_test(tc, test_opts);
  tcase_add_test(tc, test_format_float);
  tcase_add_test(tc, test_report_lines);
  tcase_add_test(tc, test_report_header);
  tcase_add_test(tc, test_dtype_codecs);
  tcase_add_test(tc, test_float_results_exact);
  tcase_add_test(tc, test_compare_counts);
  tcase_add_test(tc, test_int_results);
  tcase_add_test(tc, test_pages_unwritten);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner* sr = srunner_create(bench_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
