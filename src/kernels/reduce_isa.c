/*
 * reduce_isa.c - which of reduce_isa.h's loops the host executor calls.
 */
#include "kernels/reduce_isa.h"

#include "base/debug.h"
#include "base/param.h"

enum { ISA_AUTO, ISA_SSE2, ISA_AVX2, ISA_AVX512 };

/* The widest of reduce_isa.h's builds this CPU runs: ISA_SSE2, ISA_AVX2 or ISA_AVX512. */
static int cpu_best_isa(void) {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl"))
    return ISA_AVX512;
  return __builtin_cpu_supports("avx2") ? ISA_AVX2 : ISA_SSE2;
#else
  return ISA_SSE2;
#endif
}

braid_reduce_copy_fn braid_reduce_isa_choose(int mode, const char** name_p, int* downgraded_p) {
  static const char* const names[] = {"SSE2", "SSE2", "AVX2", "AVX512"};
  static const braid_reduce_copy_fn fns[] = {braid_reduce_copy_sse2, braid_reduce_copy_sse2, braid_reduce_copy_avx2,
                                             braid_reduce_copy_avx512};
  int best = cpu_best_isa(), isa = mode == ISA_AUTO || mode > best ? best : mode;
  *downgraded_p = mode > best;
  *name_p = names[isa];
  return fns[isa];
}

static braid_reduce_copy_fn chosen;
static const char* chosen_name;

static braid_reduce_copy_fn choose_once(void) {
  braid_reduce_copy_fn fn = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
  if (fn != NULL) return fn;
  const char* name;
  int downgraded;
  fn = braid_reduce_isa_choose((int)braid_param_int(BRAID_PARAM_REDUCE_ISA), &name, &downgraded);
  braid_reduce_copy_fn none = NULL;
  if (__atomic_compare_exchange_n(&chosen, &none, fn, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    chosen_name = name;
    if (downgraded)
      BRAID_INFO(BRAID_LOG_INIT, "BRAID_REDUCE_ISA=%s, but this CPU lacks it: host reductions use %s loops",
                 braid_param_str(BRAID_PARAM_REDUCE_ISA), name);
    else
      BRAID_INFO(BRAID_LOG_INIT, "Host reductions: %s loops", name);
    return fn;
  }
  return none; /* another thread chose first */
}

void braid_reduce_copy_host(const struct braid_redop* op, void* dst0, void* dst1, const void* src0, int pre0,
                            const void* src1, int pre1, int post, size_t n) {
  braid_reduce_copy_fn fn = choose_once();
  int es = braid_reduce_stream_take(op, dst0, n);
  if (es)
    braid_reduce_copy_streamed(fn, es, op, dst0, dst1, src0, pre0, src1, pre1, post, n);
  else
    fn(op, dst0, dst1, src0, pre0, src1, pre1, post, n);
}

const char* braid_reduce_isa_name(void) {
  choose_once();
  return chosen_name != NULL ? chosen_name : "SSE2";
}
