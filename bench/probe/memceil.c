/* memceil.c - the one-pass memory ceiling of a 2-rank all-reduce (bench/compare.sh).
 *
 *   memceil [-s SIZE] [-t THREADS] [-r REPS]
 *
 * THREADS threads (default 2) each take a slice of three SIZE-byte float arrays (SIZE in
 * nccl-tests syntax: 64M, 256M; default 64M) and compute c = a + b, reading each input once
 * and writing c with non-temporal stores (SSE2 _mm_stream_ps): the least memory traffic any
 * all-reduce of SIZE bytes between two local ranks can cause. All three arrays are written
 * before timing (no untouched pages). Prints one line:
 *   memceil size SIZE threads T GB/s BEST median MED traffic_GB/s TRAFFIC reps R
 * GB/s is SIZE / time (the unit of a 2-rank all-reduce's busbw, which equals its algbw),
 * BEST the fastest repetition (a ceiling); traffic_GB/s counts the 3 x SIZE bytes moved.
 * Exit 0, 1 when memory runs out, 2 on bad arguments. */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_REPS 64

static float *g_a, *g_b, *g_c;
static size_t g_n; /* floats per array, a multiple of 4 * threads */
static int g_threads = 2, g_reps = 5;
static pthread_barrier_t g_bar;
static double g_t0, g_t1;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* c[i] = a[i] + b[i] over [lo, hi), 4 floats a step, streaming stores. */
static void add_stream(size_t lo, size_t hi) {
  for (size_t i = lo; i < hi; i += 4) _mm_stream_ps(g_c + i, _mm_add_ps(_mm_load_ps(g_a + i), _mm_load_ps(g_b + i)));
  _mm_sfence();
}

static void* worker(void* arg) {
  size_t id = (size_t)arg, per = g_n / (size_t)g_threads;
  for (size_t i = id * per; i < (id + 1) * per; i++) { /* first touch by the thread that works */
    g_a[i] = (float)(i & 1023);
    g_b[i] = 1.0f;
    g_c[i] = 0.0f;
  }
  for (int r = 0; r < g_reps; r++) {
    pthread_barrier_wait(&g_bar);
    if (id == 0) g_t0 = now_s();
    add_stream(id * per, (id + 1) * per);
    pthread_barrier_wait(&g_bar);
    if (id == 0) g_t1 = now_s();
    pthread_barrier_wait(&g_bar); /* main reads the times */
  }
  return NULL;
}

static int parse_size(const char* s, size_t* out) {
  char* end;
  double v = strtod(s, &end);
  double mul = 1;
  if (*end == 'K' || *end == 'k')
    mul = 1024, end++;
  else if (*end == 'M' || *end == 'm')
    mul = 1024.0 * 1024, end++;
  else if (*end == 'G' || *end == 'g')
    mul = 1024.0 * 1024 * 1024, end++;
  if (end == s || *end != '\0' || v <= 0) return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  size_t size = 64u << 20;
  int opt;
  while ((opt = getopt(argc, argv, "s:t:r:")) != -1) {
    if (opt == 's' && parse_size(optarg, &size) == 0) {
    } else if (opt == 't' && (g_threads = atoi(optarg)) > 0 && g_threads <= MAX_THREADS) {
    } else if (opt == 'r' && (g_reps = atoi(optarg)) > 0 && g_reps <= MAX_REPS) {
    } else {
      fprintf(stderr, "usage: memceil [-s SIZE>0 (K/M/G)] [-t THREADS 1..%d] [-r REPS 1..%d]\n", MAX_THREADS, MAX_REPS);
      return 2;
    }
  }
  size_t unit = 4 * (size_t)g_threads;
  g_n = (size / sizeof(float) + unit - 1) / unit * unit;
  size_t bytes = g_n * sizeof(float);
  if (posix_memalign((void**)&g_a, 4096, bytes) || posix_memalign((void**)&g_b, 4096, bytes) ||
      posix_memalign((void**)&g_c, 4096, bytes)) {
    fprintf(stderr, "memceil: cannot allocate 3 x %zu bytes\n", bytes);
    return 1;
  }
  pthread_t th[MAX_THREADS];
  pthread_barrier_init(&g_bar, NULL, (unsigned)g_threads + 1);
  for (int t = 0; t < g_threads; t++) pthread_create(&th[t], NULL, worker, (void*)(size_t)t);
  double gbs[MAX_REPS];
  for (int r = 0; r < g_reps; r++) {
    pthread_barrier_wait(&g_bar);
    pthread_barrier_wait(&g_bar);
    pthread_barrier_wait(&g_bar);
    gbs[r] = (double)bytes / (g_t1 - g_t0) / 1e9;
  }
  for (int t = 0; t < g_threads; t++) pthread_join(th[t], NULL);
  int bad = 0;
  for (size_t i = 0; i < g_n; i += g_n / 7 + 1) bad |= g_c[i] != (float)(i & 1023) + 1.0f;
  if (bad) {
    fprintf(stderr, "memceil: wrong sum (internal error)\n");
    return 1;
  }
  qsort(gbs, (size_t)g_reps, sizeof(double), cmp_double);
  printf("memceil size %zu threads %d GB/s %.2f median %.2f traffic_GB/s %.2f reps %d\n", bytes, g_threads,
         gbs[g_reps - 1], gbs[(g_reps - 1) / 2], 3 * gbs[g_reps - 1], g_reps);
  free(g_a);
  free(g_b);
  free(g_c);
  return 0;
}
