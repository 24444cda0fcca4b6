/*
 * report.h - nccl-tests' output, column for column: the header block, the "# Using devices"
 * lines, the three-line table header, one row per size (out-of-place then in-place: time,
 * algbw, busbw, #wrong) and the footer ("Out of bounds values", "Avg bus bandwidth",
 * "Collective test concluded"). Pure formatting onto a FILE*, so it is unit-tested and shared
 * with the MPI peer benchmark. Reference: nccl-tests v2.19.6 (reference section 13).
 */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "opts.h"

/* The version of nccl-tests whose output these programs reproduce. */
#define BENCH_NCCL_TESTS_VERSION "2.19.6"
/* Longest "#  Rank ..." block of one process, as nccl-tests' MAX_LINE. */
#define BENCH_LINES_MAX 2048

/*
 * `width` characters for v: the first of %.2f, %.1f, %.0f that fits, else %.1e (width >= 7)
 * or %.0e. `out` holds width + 1 bytes.
 */
void bench_format_float(char* out, double v, int width);

/* "# nccl-tests version ...", "# Collective test starting", "# nThread ...", option lines,
 * "#" and "# Using devices". `tag` goes where nccl-tests prints its git hash ("braid");
 * `headers`/`library` are NCCL version codes. */
void bench_report_header(FILE* f, const struct bench_opts* o, const char* tag, int headers, int library,
                         const char* prog);
/* Appends one "#  Rank ..." line to lines[BENCH_LINES_MAX] at *len (truncated with "...").
 * `name` is the device name: "host" for host buffers. */
void bench_report_device_line(char* lines, int* len, int rank, int group, int pid, const char* host, int device,
                              const char* name);
/* The same with the device's PCI domain, bus and device numbers (GPU mode). */
void bench_report_device_line_pci(char* lines, int* len, int rank, int group, int pid, const char* host, int device,
                                  const int pci[3], const char* name);
/* "#", then the column titles and units; `cputime` names the time column "cputime". */
void bench_report_table_header(FILE* f, int cputime, int timestamps);
/* Row start: bytes, count, type, op name ("none" without one), root (-1 without one). */
void bench_report_row_start(FILE* f, size_t bytes, size_t count, const char* type, const char* op, int root);
/* One result group. `wrong` < 0 prints N/A (no check, -c 0). */
void bench_report_row_result(FILE* f, double time_us, double algbw, double busbw, int64_t wrong);
/* Row end: the -S timestamp when asked, then the newline. */
void bench_report_row_end(FILE* f, int timestamps);
/*
 * Footer: out-of-bounds count, average bus bandwidth (OK/FAILED against min_bw when
 * min_bw >= 0), "#", the concluded line, "#", then "# error: <last_error>" or an empty line.
 */
void bench_report_footer(FILE* f, int errors, double avg_busbw, double min_bw, const char* prog,
                         const char* last_error);

/* The host name nccl-tests prints: gethostname() up to the first dot. */
void bench_hostname(char* out, size_t len);

#endif /* BENCH_REPORT_H */
