/*
 * pages.h - whether a buffer's pages were written before timing (honest benchmarks).
 *
 * A page that was never written is either unmapped or mapped to the kernel's shared zero
 * page: reading it costs no memory traffic, so a benchmark that times untouched buffers
 * measures the zero page, not the copy. /proc/self/pagemap says, per page, whether it is
 * present and mapped by this process alone (bits 63 and 56; readable without privileges).
 *
 * BRAID_BENCH_CHECK_PAGES=1 (a test hook of braid's benchmarks and of the MPI peer): before
 * every timed loop the send and receive buffers must have no such page; otherwise the program
 * names the buffer and exits 7. At exit it says on stderr how many loops it checked.
 */
#ifndef BENCH_PAGES_H
#define BENCH_PAGES_H

#include <stddef.h>

/* Pages of [p, p + bytes) not written by this process (not present, or shared such as the
 * zero page); -1 when pagemap cannot be read. */
long bench_pages_unwritten(const void* p, size_t bytes);

/* 1 when BRAID_BENCH_CHECK_PAGES=1 (read once). */
int bench_pages_check_on(void);

/* The hook: when on, exits 7 naming `what` if [p, p + bytes) has an unwritten page. */
void bench_pages_check(const char* what, const void* p, size_t bytes);

#endif
