/* pingpong.c - cache-line round trip between two CPUs (bench/compare.sh: near or far cores).
 *
 *   pingpong [-c A,B] [-n ROUND_TRIPS] [-r REPS]
 *
 * Two threads, pinned to CPUs A and B (default: the first two CPUs this process may run on),
 * bounce one 64-byte line: A writes an odd number, B answers with the next even one. Each of
 * REPS repetitions times ROUND_TRIPS round trips (a repetition stops early after 100 ms, when
 * the machine is so loaded that the partner thread is not running). Prints one line:
 *   pingpong cpus A,B rtt_ns MIN median MED reps R trips N
 * MIN (the least disturbed repetition) is what compare.sh classifies. Exit 0, or 2 on bad
 * arguments, 3 when fewer than two CPUs are available. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_REPS 64
#define REP_CAP_NS 100000000.0 /* 100 ms */

struct line {
  _Alignas(64) atomic_long v;
  char pad[64 - sizeof(atomic_long)];
};

static struct line g_line;
static int g_cpu[2];
static long g_trips = 2000;
static int g_reps = 7;
static double g_rtt[MAX_REPS];
static atomic_int g_stop;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* The answering side: waits for each odd value and writes the next even one. */
static void* answer(void* arg) {
  (void)arg;
  if (pin(g_cpu[1]) != 0) fprintf(stderr, "pingpong: cannot pin to CPU %d\n", g_cpu[1]);
  long want = 1;
  while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
    long v = atomic_load_explicit(&g_line.v, memory_order_acquire);
    if (v == want) {
      atomic_store_explicit(&g_line.v, v + 1, memory_order_release);
      want += 2;
    } else if (v < 0) {
      break;
    }
  }
  return NULL;
}

/* One repetition: ROUND_TRIPS bounces from value `base`; returns ns per round trip. */
static double one_rep(long* base) {
  double t0 = now_ns(), t = t0;
  long i;
  for (i = 0; i < g_trips; i++) {
    long odd = *base + 1;
    atomic_store_explicit(&g_line.v, odd, memory_order_release);
    while (atomic_load_explicit(&g_line.v, memory_order_acquire) != odd + 1) {
    }
    *base = odd + 1;
    if ((i & 63) == 63 && (t = now_ns()) - t0 > REP_CAP_NS) break;
  }
  t = now_ns();
  return (t - t0) / (double)(i < g_trips ? i + 1 : g_trips);
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int default_cpus(void) {
  cpu_set_t set;
  int n = 0;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return -1;
  for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, &set)) g_cpu[n++] = c;
  return n == 2 ? 0 : -1;
}

static int parse_args(int argc, char** argv) {
  int opt, have_cpus = 0;
  while ((opt = getopt(argc, argv, "c:n:r:")) != -1) {
    if (opt == 'c') {
      if (sscanf(optarg, "%d,%d", &g_cpu[0], &g_cpu[1]) != 2 || g_cpu[0] < 0 || g_cpu[1] < 0 || g_cpu[0] == g_cpu[1]) {
        fprintf(stderr, "pingpong: -c wants two different CPUs A,B, got '%s'\n", optarg);
        return 2;
      }
      have_cpus = 1;
    } else if (opt == 'n' && (g_trips = atol(optarg)) > 0) {
    } else if (opt == 'r' && (g_reps = atoi(optarg)) > 0 && g_reps <= MAX_REPS) {
    } else {
      fprintf(stderr, "usage: pingpong [-c A,B] [-n ROUND_TRIPS>0] [-r REPS 1..%d]\n", MAX_REPS);
      return 2;
    }
  }
  if (!have_cpus && default_cpus() != 0) {
    fprintf(stderr, "pingpong: fewer than two CPUs available\n");
    return 3;
  }
  return 0;
}

int main(int argc, char** argv) {
  int rc = parse_args(argc, argv);
  if (rc != 0) return rc;
  pthread_t th;
  atomic_store(&g_line.v, 0);
  if (pthread_create(&th, NULL, answer, NULL) != 0) {
    perror("pingpong: pthread_create");
    return 1;
  }
  if (pin(g_cpu[0]) != 0) fprintf(stderr, "pingpong: cannot pin to CPU %d\n", g_cpu[0]);
  long base = 0;
  one_rep(&base); /* warm-up: both threads running and the line shared */
  for (int r = 0; r < g_reps; r++) g_rtt[r] = one_rep(&base);
  atomic_store(&g_stop, 1);
  atomic_store(&g_line.v, -1);
  pthread_join(th, NULL);
  double sorted[MAX_REPS];
  memcpy(sorted, g_rtt, sizeof(double) * (size_t)g_reps);
  qsort(sorted, (size_t)g_reps, sizeof(double), cmp_double);
  printf("pingpong cpus %d,%d rtt_ns %.1f median %.1f reps %d trips %ld\n", g_cpu[0], g_cpu[1], sorted[0],
         sorted[(g_reps - 1) / 2], g_reps, g_trips);
  return 0;
}
