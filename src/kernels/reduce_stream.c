/*
 * reduce_stream.c - host executor only: streaming (non-temporal) stores for large outputs
 * (reduce_isa.h). A call whose output is at least BRAID_STREAM_BYTES opens a window over it
 * for the executor thread running it; a reduction or copy whose first destination lies in the
 * window is computed in blocks into a small buffer that stays in L1 (the same loops, so the
 * values are bit-identical) and each block is written to the output with non-temporal
 * stores: the output's lines are not read for ownership first and do not evict the inputs
 * from the caches. An sfence ends every streamed call, before the step publishes anything.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "kernels/reduce_isa.h"
#include "kernels/work.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#define HAVE_STREAM 1
#else
#define HAVE_STREAM 0
#endif

/* Bytes computed per block: the block and the sources' lines stay in L1 (48 KiB and up). */
#define STREAM_BLOCK 8192
/* Smaller pieces are written through the cache (a streamed call's fixed cost is one sfence). */
#define STREAM_MIN_BYTES 4096

static __thread struct {
  const char *lo, *hi; /* the window; hi == NULL: closed */
  int esize;
  int hold; /* braid_reduce_stream_hold */
} win;

static int64_t threshold = -1;

/* LLC/4: an output that large would evict most of what the caches hold anyway. 0: unknown. */
static int64_t auto_threshold(void) {
#ifdef _SC_LEVEL3_CACHE_SIZE
  long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return llc > 0 ? (int64_t)llc / 4 : 0;
#else
  return 0;
#endif
}

int64_t braid_reduce_stream_threshold(void) {
  int64_t t = __atomic_load_n(&threshold, __ATOMIC_RELAXED);
  if (t >= 0) return t;
  t = braid_param_int(BRAID_PARAM_STREAM_BYTES);
  int set = t != BRAID_PARAM_UNSET;
  if (!set) t = auto_threshold();
  if (!HAVE_STREAM) t = 0;
  int64_t none = -1;
  if (__atomic_compare_exchange_n(&threshold, &none, t, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    if (t > 0)
      BRAID_INFO(BRAID_LOG_INIT, "Host outputs of %lld bytes and more use non-temporal stores (%s)", (long long)t,
                 set ? "BRAID_STREAM_BYTES" : "a quarter of the last-level cache");
    else
      BRAID_INFO(BRAID_LOG_INIT, "Host outputs use no non-temporal stores (%s)",
                 !HAVE_STREAM ? "not built for this CPU"
                 : set        ? "BRAID_STREAM_BYTES=0"
                              : "cache size unknown");
  }
  return threshold;
}

void braid_reduce_stream_reset(void) {
  __atomic_store_n(&threshold, -1, __ATOMIC_RELAXED);
}

void braid_reduce_stream_open(void* out, size_t bytes, int esize) {
  int64_t t = braid_reduce_stream_threshold();
  win.hi = NULL;
  if (t <= 0 || out == NULL || esize <= 0 || bytes < (uint64_t)t) return;
  win.lo = out;
  win.hi = (const char*)out + bytes;
  win.esize = esize;
}

void braid_reduce_stream_close(void) {
  win.hi = NULL;
  win.hold = 0;
}

void braid_reduce_stream_hold(int on) {
  win.hold = on;
}

/* dst = src, bytes of it, the 16-byte-aligned middle with non-temporal stores. */
static void copy_nt(char* dst, const char* src, size_t bytes) {
#if HAVE_STREAM
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
  if (head > bytes) head = bytes;
  memcpy(dst, src, head);
  dst += head, src += head, bytes -= head;
  for (; bytes >= 64; dst += 64, src += 64, bytes -= 64) {
    __m128i a = _mm_loadu_si128((const __m128i*)src), b = _mm_loadu_si128((const __m128i*)(src + 16));
    __m128i c = _mm_loadu_si128((const __m128i*)(src + 32)), d = _mm_loadu_si128((const __m128i*)(src + 48));
    _mm_stream_si128((__m128i*)dst, a);
    _mm_stream_si128((__m128i*)(dst + 16), b);
    _mm_stream_si128((__m128i*)(dst + 32), c);
    _mm_stream_si128((__m128i*)(dst + 48), d);
  }
  for (; bytes >= 16; dst += 16, src += 16, bytes -= 16)
    _mm_stream_si128((__m128i*)dst, _mm_loadu_si128((const __m128i*)src));
#endif
  memcpy(dst, src, bytes);
}

void braid_reduce_copy_streamed(braid_reduce_copy_fn fn, int esize, const struct braid_redop* op, void* dst0,
                                void* dst1, const void* src0, int pre0, const void* src1, int pre1, int post,
                                size_t n) {
  static __thread _Alignas(64) char block[STREAM_BLOCK];
  size_t es = (size_t)esize, per = STREAM_BLOCK / es;
  for (size_t e = 0; e < n; e += per) {
    size_t m = n - e < per ? n - e : per, off = e * es;
    fn(op, block, dst1 ? (char*)dst1 + off : NULL, (const char*)src0 + off, pre0, src1 ? (const char*)src1 + off : NULL,
       pre1, post, m);
    copy_nt((char*)dst0 + off, block, m * es);
  }
#if HAVE_STREAM
  _mm_sfence(); /* the non-temporal stores are seen before whatever the step publishes next */
#endif
}

int braid_reduce_stream_take(const struct braid_redop* op, const void* dst0, size_t n) {
  const char* d = dst0;
  if (win.hi == NULL || win.hold || d < win.lo || d >= win.hi || n * (size_t)win.esize < STREAM_MIN_BYTES) return 0;
  return braid_dtype_size(op->dtype) == win.esize ? win.esize : 0; /* the loops' element, never another */
}
