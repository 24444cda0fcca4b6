/*
 * pages.c - see pages.h.
 */
#include "pages.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PM_PRESENT (1ull << 63)
#define PM_EXCLUSIVE (1ull << 56)

long bench_pages_unwritten(const void* p, size_t bytes) {
  if (bytes == 0) return 0;
  long ps = sysconf(_SC_PAGESIZE);
  uintptr_t first = (uintptr_t)p / (uintptr_t)ps, last = ((uintptr_t)p + bytes - 1) / (uintptr_t)ps;
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  long unwritten = 0;
  uint64_t entries[512];
  for (uintptr_t page = first; page <= last;) {
    size_t n = last - page + 1 < 512 ? (size_t)(last - page + 1) : 512;
    ssize_t got = pread(fd, entries, n * sizeof(uint64_t), (off_t)(page * sizeof(uint64_t)));
    if (got <= 0 || got % (ssize_t)sizeof(uint64_t) != 0) {
      unwritten = -1;
      break;
    }
    n = (size_t)got / sizeof(uint64_t);
    for (size_t i = 0; i < n; i++)
      unwritten += (entries[i] & (PM_PRESENT | PM_EXCLUSIVE)) != (PM_PRESENT | PM_EXCLUSIVE);
    page += n;
  }
  close(fd);
  return unwritten;
}

static long checked;

static void report_checked(void) {
  fprintf(stderr, "# pages checked before %ld timed loops\n", checked);
}

int bench_pages_check_on(void) {
  static int on = -1;
  if (on < 0) {
    const char* v = getenv("BRAID_BENCH_CHECK_PAGES");
    on = v && strcmp(v, "1") == 0;
    if (on) atexit(report_checked);
  }
  return on;
}

void bench_pages_check(const char* what, const void* p, size_t bytes) {
  if (!bench_pages_check_on()) return;
  long bad = bench_pages_unwritten(p, bytes);
  if (bad != 0) {
    fprintf(stderr, "BRAID_BENCH_CHECK_PAGES: %s buffer (%zu bytes) has %ld %s page(s) when timing starts\n", what,
            bytes, bad, bad < 0 ? "unreadable (no /proc/self/pagemap)" : "unwritten");
    fflush(stdout);
    fflush(stderr);
    _exit(7);
  }
  __atomic_add_fetch(&checked, 1, __ATOMIC_RELAXED);
}
