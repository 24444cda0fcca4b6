/*
 * cma_ceiling.c - the copy ceilings a copy collective between two local processes runs
 * against: a one-core memcpy of written pages, and cross-memory attach (process_vm_readv /
 * process_vm_writev) of the same bytes in pieces, one direction (one core copies, the other
 * waits) and both at once (each process copies its half: the two cores work together).
 *
 *   cma_ceiling [-s SIZE_MIB] [-n PASSES] [-c CPU_A,CPU_B] [PIECE_KIB ...]
 *
 * Prints one line per figure, GB/s of payload (best of PASSES), e.g.
 *   memcpy         64 MiB            9.10 GB/s
 *   readv   piece 1024 KiB one-way   7.80 GB/s
 *   readv   piece 1024 KiB both      12.1 GB/s   (bytes both processes moved / the slower one's time)
 * Every buffer is written before timing (no shared zero page). Linux only; a kernel or
 * container that forbids process_vm_readv (ptrace scope, seccomp) makes it say so and exit 3.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void pin(int cpu) {
  if (cpu < 0) return;
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof(s), &s);
}

/* Copy `bytes` between me and pid in pieces: write=0 reads pid's src into my dst, write=1
 * writes my src into pid's dst. 0 or errno. */
static int cma(pid_t pid, int write, char* src, char* dst, size_t bytes, size_t piece) {
  for (size_t off = 0; off < bytes; off += piece) {
    size_t n = bytes - off < piece ? bytes - off : piece;
    struct iovec l = {write ? src + off : dst + off, n}, r = {write ? dst + off : src + off, n};
    ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) {
      off -= piece;
      continue;
    }
    if (got != (ssize_t)n) return got < 0 ? errno : EIO;
  }
  return 0;
}

static void xwrite(int fd, const void* b, size_t n) {
  if (write(fd, b, n) != (ssize_t)n) _exit(2);
}
static void xread(int fd, void* b, size_t n) {
  if (read(fd, b, n) != (ssize_t)n) _exit(2);
}

int main(int argc, char** argv) {
  size_t mib = 64;
  int passes = 5, cpu_a = -1, cpu_b = -1, opt;
  while ((opt = getopt(argc, argv, "s:n:c:")) != -1) {
    if (opt == 's')
      mib = strtoul(optarg, 0, 0);
    else if (opt == 'n')
      passes = atoi(optarg);
    else if (opt == 'c')
      sscanf(optarg, "%d,%d", &cpu_a, &cpu_b);
    else {
      fprintf(stderr, "usage: %s [-s MIB] [-n PASSES] [-c CPU_A,CPU_B] [PIECE_KIB ...]\n", argv[0]);
      return 1;
    }
  }
  size_t pieces[16] = {256, 1024, 4096};
  int np = 3;
  if (optind < argc) {
    np = 0;
    for (int i = optind; i < argc && np < 16; i++) pieces[np++] = strtoul(argv[i], 0, 0);
  }
  size_t bytes = mib << 20;
  /* Same addresses in both processes (mapped before fork); each writes its own copy after. */
  char* src = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char* dst = mmap(0, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (src == MAP_FAILED || dst == MAP_FAILED) return 2;
  int p2c[2], c2p[2];
  if (pipe(p2c) || pipe(c2p)) return 2;
  pid_t parent = getpid(), child = fork();
  if (child < 0) return 2;
  int me_child = child == 0;
  if (me_child) prctl(PR_SET_PDEATHSIG, SIGKILL);
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* Yama ptrace_scope 1 */
  pin(me_child ? cpu_b : cpu_a);
  memset(src, me_child ? 0x5a : 0xa5, bytes);
  memset(dst, 0x11, bytes);
  pid_t peer = me_child ? parent : child;
  int in = me_child ? p2c[0] : c2p[0], out = me_child ? c2p[1] : p2c[1];
  char c = 0;
  xwrite(out, &c, 1); /* both have written their pages */
  xread(in, &c, 1);

  if (!me_child) {
    double best = 1e30;
    for (int i = 0; i < passes; i++) {
      double t = now();
      memcpy(dst, src, bytes);
      t = now() - t;
      if (t < best) best = t;
    }
    printf("memcpy         %4zu MiB            %6.2f GB/s\n", mib, bytes / best / 1e9);
    if (cma(peer, 0, src, dst, 8, 8)) {
      fprintf(stderr, "cma_ceiling: process_vm_readv refused: %s\n", strerror(errno));
      kill(child, SIGKILL);
      return 3;
    }
    fflush(stdout);
  }
  /* Per piece and kind: one-way (parent copies, child waits in read()), then both (each copies
   * its direction at once; a pipe message starts both, each reports its time). */
  for (int k = 0; k < np; k++)
    for (int wr = 0; wr < 2; wr++) {
      size_t piece = pieces[k] << 10;
      double one = 1e30, both = 1e30;
      for (int i = 0; i < passes; i++) {
        if (!me_child) {
          double t = now();
          if (cma(peer, wr, src, dst, bytes, piece)) return 2;
          t = now() - t;
          if (t < one) one = t;
        }
        xwrite(out, &c, 1); /* both at once */
        xread(in, &c, 1);
        double t0 = now();
        if (cma(peer, wr, src, dst, bytes, piece)) return 2;
        double t1 = now() - t0, t2;
        xwrite(out, &t1, sizeof(t1));
        xread(in, &t2, sizeof(t2));
        double slow = t1 > t2 ? t1 : t2;
        if (slow < both) both = slow;
      }
      if (!me_child) {
        printf("%s  piece %4zu KiB one-way  %6.2f GB/s\n", wr ? "writev" : "readv ", pieces[k], bytes / one / 1e9);
        printf("%s  piece %4zu KiB both     %6.2f GB/s (2 x %zu MiB / the slower side)\n", wr ? "writev" : "readv ",
               pieces[k], 2.0 * bytes / both / 1e9, mib);
        fflush(stdout);
      }
    }
  if (!me_child) waitpid(child, 0, 0);
  return 0;
}
