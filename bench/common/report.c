/*
 * report.c - the output format of nccl-tests v2.19.6, reproduced from its documented
 * layout (see report.h). Every format string here is matched column for column by
 * tests/bench/run.sh; change them only together with that test.
 */
#include "report.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void bench_format_float(char* out, double v, int width) {
  static const char* const fixed[] = {"%*.2f", "%*.1f", "%*.0f"};
  for (int i = 0; i < 3; i++)
    if (snprintf(out, (size_t)width + 1, fixed[i], width, v) <= width) return;
  snprintf(out, (size_t)width + 1, width >= 7 ? "%*.1e" : "%*.0e", width, v);
}

void bench_report_header(FILE* f, const struct bench_opts* o, const char* tag, int headers, int library,
                         const char* prog) {
  /* The tag sits where nccl-tests puts its git hash, so parsers keep working. */
  fprintf(f, "# nccl-tests version %s (%s) nccl-headers=%d nccl-library=%d\n", BENCH_NCCL_TESTS_VERSION, tag, headers,
          library);
  fprintf(f, "# Collective test starting: %s\n", prog);
  int factor = o->step_factor > 1;
  fprintf(f,
          "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
          "iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
          o->nthreads, o->ngpus, o->min_bytes, o->max_bytes, factor ? o->step_factor : o->step_bytes,
          factor ? "factor" : "bytes", o->warmup_iters, o->iters, o->agg_iters, o->datacheck, o->graph_launches,
          o->unalign);
  if (o->blocking == 1) fprintf(f, "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n");
  if (o->blocking == 2) fprintf(f, "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
  if (o->blocking == 3)
    fprintf(f,
            "# Blocking Enabled: wait and barrier after each outer iteration (-n); "
            "time excludes barrier \n");
  if (o->parallel_init) fprintf(f, "# Parallel Init Enabled: threads call into NcclInitRank concurrently \n");
  fprintf(f, "#\n");
  fprintf(f, "# Using devices\n");
}

void bench_report_device_line(char* lines, int* len, int rank, int group, int pid, const char* host, int device,
                              const char* name) {
  static const int none[3] = {0, 0, 0};
  bench_report_device_line_pci(lines, len, rank, group, pid, host, device, none, name);
}

void bench_report_device_line_pci(char* lines, int* len, int rank, int group, int pid, const char* host, int device,
                                  const int pci[3], const char* name) {
  if (*len < BENCH_LINES_MAX)
    *len += snprintf(lines + *len, (size_t)(BENCH_LINES_MAX - *len),
                     "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", rank, group, pid, host,
                     device, pci[0], pci[1], pci[2], name);
  if (*len >= BENCH_LINES_MAX) strcpy(lines + BENCH_LINES_MAX - 5, "...\n");
}

void bench_report_table_header(FILE* f, int cputime, int timestamps) {
  const char* t = cputime ? "cputime" : "time";
  const char* ts_label = timestamps ? "timestamp" : "";
  const char* ts_units = timestamps ? "%Y-%m-%d %H:%M:%S" : "";
  int ts_pad = timestamps ? 19 : 0;
  fprintf(f, "#\n");
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "",
          "", "", "");
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "size", "count", "type",
          "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw", "#wrong", ts_pad, ts_label);
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n", "(B)", "(elements)", "", "",
          "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", ts_pad, ts_units);
}

void bench_report_row_start(FILE* f, size_t bytes, size_t count, const char* type, const char* op, int root) {
  char root_str[16];
  snprintf(root_str, sizeof(root_str), "%6i", root);
  fprintf(f, "%12li  %12li  %8s  %6s  %6s", (long)bytes, (long)count, type, op, root_str);
}

void bench_report_row_result(FILE* f, double time_us, double algbw, double busbw, int64_t wrong) {
  char t[8], a[7], b[7];
  bench_format_float(t, time_us, 7);
  bench_format_float(a, algbw, 6);
  bench_format_float(b, busbw, 6);
  if (wrong >= 0)
    fprintf(f, "  %7s  %6s  %6s  %6g", t, a, b, (double)wrong);
  else
    fprintf(f, "  %7s  %6s  %6s    N/A", t, a, b);
}

void bench_report_row_end(FILE* f, int timestamps) {
  if (timestamps) {
    char buf[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(f, "%21s", buf);
  }
  fprintf(f, "\n");
}

void bench_report_footer(FILE* f, int errors, double avg_busbw, double min_bw, const char* prog,
                         const char* last_error) {
  fprintf(f, "# %-20s : %d %s\n", "Out of bounds values", errors, errors ? "FAILED" : "OK");
  fprintf(f, "# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw,
          min_bw < 0 ? "" : (avg_busbw < min_bw * 0.9 ? "FAILED" : "OK"));
  fprintf(f, "#\n");
  fprintf(f, "# Collective test concluded: %s\n", prog);
  fprintf(f, "#\n");
  if (last_error && last_error[0])
    fprintf(f, "# error: %s\n", last_error);
  else
    fprintf(f, "\n");
}

void bench_hostname(char* out, size_t len) {
  if (gethostname(out, len) != 0) snprintf(out, len, "unknown");
  out[len - 1] = '\0';
  char* dot = strchr(out, '.');
  if (dot) *dot = '\0';
}
