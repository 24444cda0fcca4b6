/*
 * multimem.h - the NVLS all-reduce through a multicast object (transport/nvls/nvls.c makes
 * it): every rank's bound memory has the layout below at the same offsets, so one
 * multimem.ld_reduce at an offset of the multicast address loads that offset of every member
 * and returns the switch's reduction, and one multimem.st writes every member's copy.
 * Device (sm_90+): the PTX instructions. Fake GPU (the host executor): the multicast address is
 * a struct braid_mc_emul listing every member's memory as this process maps it, so ld_reduce
 * reads and reduces every member's copy in member order and st writes each. Host mode never
 * has one (the view's mc is NULL), nor does a kernel for sm_80 (nvls.c requires sm_90).
 *
 * A call (seq: this rank's count in its own memory + 1, as lsa.h):
 *   1. waits (local loads) until every rank arrived at seq-1: the slots of parity seq are free;
 *   2. stages its input into its own input slot (unicast stores), publishes arrive[me] = seq
 *      into every member (a multicast release store);
 *   3. waits until every arrive[r] >= seq in its own memory;
 *   4. one-shot: ld_reduce of the whole input slot into its own result slot, then copies it out;
 *      two-shot: ld_reduce of chunk `rank`, multimem.st into every member's result slot,
 *      publishes rs[me]; waits for every rs[r], copies its own result slot out;
 *   5. publishes done[me] = seq into every member, counts the call.
 * Only what PTX reduces goes here (braid_mm_supported); others take the unicast path of lsa.h.
 *
 * Direct: where the plan found sendbuff (and, two-shot, recvbuff) in windows bound to
 * multicast objects of their own (core/sym/win_mc.c, w->lsa_win / lsa_rwin), a rank skips step
 * 2's staging, writes its descriptor (window ids and offsets) into its own memory and arrives
 * with BRAID_MC_FLAG. After step 3 every rank sees the same flags:
 *   - none set: the staged call above;
 *   - all set and every descriptor the same (ld_reduce min == max: the symmetric use NCCL asks
 *     of NCCL_WIN_COLL_SYMMETRIC windows): the reduction straight from every member's sendbuff
 *     through its window's object (one-shot: into recvbuff where it is, then waits for every
 *     rank's done, as the peers read this rank's input; two-shot: its chunk stored through
 *     recvbuff's object into every member, waits for every rs). Nothing is staged or copied;
 *   - otherwise: the ranks that did not stage stage now, every rank publishes staged[me] and
 *     waits for all of them, then the staged call. Never wrong, never a hang: only slower.
 * A flagged rank never finishes the call before every rank read the flags (it waits for done,
 * rs or staged of all), so a rank whose arrive[r] already shows seq + 1 did not set its flag.
 */
#ifndef BRAID_KERNELS_MULTIMEM_H
#define BRAID_KERNELS_MULTIMEM_H

#include "kernels/lsa.h"

/* The bound memory of each rank (the same offsets in every member). */
#define BRAID_MC_ARRIVE_OFF 0 /* [BRAID_LSA_MAX_RANKS] u64, written by rank r through the object */
#define BRAID_MC_RS_OFF 512
#define BRAID_MC_DONE_OFF 1024
#define BRAID_MC_STAGED_OFF 1536 /* [BRAID_LSA_MAX_RANKS] u64: a call that stages late (below) */
/* A call's direct descriptor (its own memory only, unicast): 4 u64 per call parity */
#define BRAID_MC_DESC_OFF(seq) (2048 + (size_t)((seq)&1) * 32)
#define BRAID_MC_CALLS_OFF 3584           /* calls this rank ran (its own memory only) */
#define BRAID_MC_DIRECT_OFF 3592          /* of them, calls straight from and to the windows' objects */
#define BRAID_MC_FLAG ((uint64_t)1 << 32) /* in arrive[r]: rank r did not stage (it offers direct) */
#define BRAID_MC_DATA_OFF 4096
#define BRAID_MC_BYTES(slot_bytes) (BRAID_MC_DATA_OFF + 4 * (size_t)(slot_bytes))
#define BRAID_MC_IN(v, seq) (BRAID_MC_DATA_OFF + (size_t)((seq)&1) * (v)->slot_bytes)
#define BRAID_MC_RES(v, seq) (BRAID_MC_DATA_OFF + (size_t)(2 + ((seq)&1)) * (v)->slot_bytes)

/* Whether multimem.ld_reduce computes (dtype, reduction kind): sums of 32/64-bit integers and
 * of f16, bf16, f32, f64; min and max of 32/64-bit integers (float min/max: braid's NaN and
 * signed-zero rules are not the switch's). Every rank decides the same (plan.c). */
HD int braid_mm_supported(int dtype, int kind) {
  switch (dtype) {
    case 2:
    case 3:
    case 4:
    case 5: /* int32 uint32 int64 uint64 */
      return kind == BRAID_RED_SUM || kind == BRAID_RED_MAX || kind == BRAID_RED_MIN;
    case 6:
    case 7:
    case 8:
    case 9: /* half float double bfloat16 */
      return kind == BRAID_RED_SUM;
  }
  return 0;
}

#if BRAID_DEVICE_COMPILE && __CUDA_ARCH__ >= 900
#define BRAID_MM_ASM(s) "multimem." s ".global."
/* 16 bytes: v4 of f32 / f16x2 / bf16x2 (sums). */
#define BRAID_MM_LDV(name, ty)                                                          \
  __device__ __forceinline__ uint4 name(const char* p) {                                \
    uint4 v;                                                                            \
    asm volatile(BRAID_MM_ASM("ld_reduce.relaxed.sys") "add" ty " {%0,%1,%2,%3}, [%4];" \
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)                           \
                 : "l"(p)                                                               \
                 : "memory");                                                           \
    return v;                                                                           \
  }
BRAID_MM_LDV(braid_mm_ldv_f32, ".v4.f32")
BRAID_MM_LDV(braid_mm_ldv_f16, ".acc::f32.v4.f16x2")
BRAID_MM_LDV(braid_mm_ldv_bf16, ".acc::f32.v4.bf16x2")
#define BRAID_MM_LD1(name, opty, T, c)                                                                    \
  __device__ __forceinline__ T name(const char* p) {                                                      \
    T v;                                                                                                  \
    asm volatile(BRAID_MM_ASM("ld_reduce.relaxed.sys") opty " %0, [%1];" : "=" c(v) : "l"(p) : "memory"); \
    return v;                                                                                             \
  }
BRAID_MM_LD1(braid_mm_ld_add_f32, "add.f32", float, "f")
BRAID_MM_LD1(braid_mm_ld_add_f16x2, "add.acc::f32.f16x2", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_add_bf16x2, "add.acc::f32.bf16x2", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_add_f64, "add.f64", double, "d")
BRAID_MM_LD1(braid_mm_ld_add_u32, "add.u32", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_min_u32, "min.u32", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_max_u32, "max.u32", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_min_s32, "min.s32", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_max_s32, "max.s32", uint32_t, "r")
BRAID_MM_LD1(braid_mm_ld_add_u64, "add.u64", unsigned long long, "l")
BRAID_MM_LD1(braid_mm_ld_min_u64, "min.u64", unsigned long long, "l")
BRAID_MM_LD1(braid_mm_ld_max_u64, "max.u64", unsigned long long, "l")
BRAID_MM_LD1(braid_mm_ld_min_s64, "min.s64", unsigned long long, "l")
BRAID_MM_LD1(braid_mm_ld_max_s64, "max.s64", unsigned long long, "l")

__device__ __forceinline__ void braid_mm_stv(char* p, uint4 v) {
  asm volatile(BRAID_MM_ASM("st.relaxed.sys") "v4.f32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void braid_mm_st32(char* p, uint32_t v) {
  asm volatile(BRAID_MM_ASM("st.relaxed.sys") "b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void braid_mm_st64(char* p, unsigned long long v) {
  asm volatile(BRAID_MM_ASM("st.relaxed.sys") "b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void braid_mm_st_release64(char* p, unsigned long long v) {
  asm volatile(BRAID_MM_ASM("st.release.sys") "b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

/* dst (through the object when bcast, else this rank's own memory) = the reduction of every
 * member's [src, src + n elements). Loops stride by the block's threads; 16-byte vectors of
 * the float types, 4-byte pairs and a last scalar (f16, bf16: 2-byte elements go by pairs,
 * the odd last one through a full pair of the slot, whose padding no rank reads). */
__device__ __forceinline__ void braid_mm_reduce_dev(int dtype, int kind, const char* s, char* d, size_t n, int bcast) {
  const size_t t0 = (size_t)simt_tid(), nt = (size_t)simt_nthreads();
  const int es = braid_dtype_size(dtype);
  size_t nb = n * (size_t)es, nv = (dtype == 6 || dtype == 7 || dtype == 9) ? nb / 16 : 0;
  for (size_t i = t0; i < nv; i += nt) {
    uint4 r = dtype == 7   ? braid_mm_ldv_f32(s + 16 * i)
              : dtype == 6 ? braid_mm_ldv_f16(s + 16 * i)
                           : braid_mm_ldv_bf16(s + 16 * i);
    if (bcast)
      braid_mm_stv(d + 16 * i, r);
    else
      *(uint4*)(d + 16 * i) = r;
  }
  if (es == 8) {
    for (size_t i = nv * 2 + t0; i < n; i += nt) {
      const char* a = s + 8 * i;
      unsigned long long r;
      if (dtype == 8) {
        double f = braid_mm_ld_add_f64(a);
        r = (unsigned long long)__double_as_longlong(f);
      } else if (kind == BRAID_RED_SUM) {
        r = braid_mm_ld_add_u64(a);
      } else if (dtype == 4) {
        r = kind == BRAID_RED_MAX ? braid_mm_ld_max_s64(a) : braid_mm_ld_min_s64(a);
      } else {
        r = kind == BRAID_RED_MAX ? braid_mm_ld_max_u64(a) : braid_mm_ld_min_u64(a);
      }
      if (bcast)
        braid_mm_st64(d + 8 * i, r);
      else
        *(unsigned long long*)(d + 8 * i) = r;
    }
    return;
  }
  /* 4-byte words: f32, i32/u32, and pairs of f16/bf16 */
  const size_t nw = (nb + 3) / 4;
  for (size_t i = nv * 4 + t0; i < nw; i += nt) {
    const char* a = s + 4 * i;
    uint32_t r;
    if (dtype == 7)
      r = __float_as_uint(braid_mm_ld_add_f32(a));
    else if (dtype == 6)
      r = braid_mm_ld_add_f16x2(a);
    else if (dtype == 9)
      r = braid_mm_ld_add_bf16x2(a);
    else if (kind == BRAID_RED_SUM)
      r = braid_mm_ld_add_u32(a);
    else if (dtype == 2)
      r = kind == BRAID_RED_MAX ? braid_mm_ld_max_s32(a) : braid_mm_ld_min_s32(a);
    else
      r = kind == BRAID_RED_MAX ? braid_mm_ld_max_u32(a) : braid_mm_ld_min_u32(a);
    if (bcast)
      braid_mm_st32(d + 4 * i, r);
    else
      *(uint32_t*)(d + 4 * i) = r;
  }
}
#endif

#if !BRAID_DEVICE_COMPILE
/* The fake GPU: out = the reduction of every member of e at src (n elements), in member order. */
static inline void braid_mm_emul_reduce(const struct braid_redop* op, const struct braid_mc_emul* e, size_t src,
                                        char* out, size_t n) {
  BRAID_REDUCE_COPY(op, out, NULL, e->member[0] + src, 0, e->n > 1 ? e->member[1] + src : NULL, 0, e->n <= 2, n);
  for (int i = 2; i < e->n; i++) BRAID_REDUCE_COPY(op, out, NULL, out, 0, e->member[i] + src, 0, i == e->n - 1, n);
}
#endif

/* The reduction of every member's [src, src + n elements) of the object at smc into dst: with
 * bcast, offset dst of every member of the object at dmc; else local + dst. All threads of the
 * block call it. The fake GPU stores to every member once all of it is reduced, through `tmp`
 * (tmp_bytes, a multiple of 64) when dst may be a member's source (a direct two-shot in place),
 * as the switch reads each element before the stores that replace it. */
HD void braid_mm_reduce_at(const struct braid_redop* op, const char* smc, size_t src, char* dmc, char* local,
                           size_t dst, size_t n, int bcast, char* tmp, size_t tmp_bytes) {
#if BRAID_DEVICE_COMPILE
  (void)tmp, (void)tmp_bytes;
#if __CUDA_ARCH__ >= 900
  braid_mm_reduce_dev(op->dtype, op->kind, smc + src, (bcast ? dmc : local) + dst, n, bcast);
#else
  (void)op, (void)smc, (void)src, (void)dmc, (void)local, (void)dst, (void)n, (void)bcast; /* never planned (sm_90+) */
#endif
#else
  const struct braid_mc_emul* e = (const struct braid_mc_emul*)smc;
  if (!bcast) {
    braid_mm_emul_reduce(op, e, src, local + dst, n);
    return;
  }
  const struct braid_mc_emul* d = (const struct braid_mc_emul*)dmc;
  const size_t es = (size_t)braid_dtype_size(op->dtype), step = tmp != NULL ? tmp_bytes / es : n;
  for (size_t at = 0; at < n; at += step) {
    size_t len = n - at < step ? n - at : step;
    char* out = tmp != NULL ? tmp : local + dst + at * es;
    braid_mm_emul_reduce(op, e, src + at * es, out, len);
    for (int i = 0; i < d->n; i++)
      if (d->member[i] + dst + at * es != out)
        BRAID_REDUCE_COPY(op, d->member[i] + dst + at * es, NULL, out, 0, NULL, 0, 0, len);
  }
#endif
}

/* The reduction of every member's [src, src + n) of the NVLS scratch into dst (bcast: every
 * member's, through the object; else this rank's own memory). */
HD void braid_mm_reduce(const struct braid_redop* op, const struct braid_lsa_view* v, size_t src, size_t dst, size_t n,
                        int bcast) {
  braid_mm_reduce_at(op, v->mc, src, v->mc, v->mc_local, dst, n, bcast, NULL, 0);
}

/* Thread 0 after a barrier: counter `off` + 8 * me of every member = seq (a release). */
HD void braid_mm_publish(const struct braid_lsa_view* v, int me, size_t off, uint64_t seq) {
  simt_bar_sync();
  if (simt_tid() != 0) return;
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.alias;" ::: "memory"); /* the block's unicast stores, seen through the object */
  simt_fence_release();
  braid_mm_st_release64(v->mc + off + 8 * (size_t)me, seq);
#endif
#else
  const struct braid_mc_emul* e = (const struct braid_mc_emul*)v->mc;
  for (int i = 0; i < e->n; i++) simt_st_release_u64((volatile uint64_t*)(e->member[i] + off + 8 * (size_t)me), seq);
#endif
}

/* Counters off + 8r of this rank's own memory, r in [0, n), reached seq: thread 0 waits, the
 * block votes (lsa.h's rule). */
HD int braid_mm_wait_all(struct braid_prims* p, const struct braid_lsa_view* v, size_t off, int n, uint32_t seq) {
  int st = 0;
  if (simt_tid() == 0)
    for (int r = 0; r < n && st == 0; r++)
      st = braid_lsa_wait((const volatile uint64_t*)(v->mc_local + off + 8 * (size_t)r), seq, p->abort_flag);
  st = braid_prims_vote(p, st);
#if BRAID_DEVICE_COMPILE && __CUDA_ARCH__ >= 900
  asm volatile("fence.proxy.alias;" ::: "memory"); /* multicast stores, then loads of the unicast alias */
#endif
  return st;
}

/* Thread 0: whether the 4 words at `off` are the same in every member of the object at mc
 * (multimem.ld_reduce's min and max agree). */
HD int braid_mm_same(const char* mc, size_t off) {
#if BRAID_DEVICE_COMPILE
#if __CUDA_ARCH__ >= 900
  for (int j = 0; j < 4; j++)
    if (braid_mm_ld_min_u64(mc + off + 8 * j) != braid_mm_ld_max_u64(mc + off + 8 * j)) return 0;
  return 1;
#else
  (void)mc, (void)off;
  return 0;
#endif
#else
  const struct braid_mc_emul* e = (const struct braid_mc_emul*)mc;
  for (int i = 1; i < e->n; i++)
    for (int j = 0; j < 4; j++)
      if (simt_ld_volatile_u64((const volatile uint64_t*)(e->member[i] + off + 8 * j)) !=
          simt_ld_volatile_u64((const volatile uint64_t*)(e->member[0] + off + 8 * j)))
        return 0;
  return 1;
#endif
}

/* Where a direct call reads and writes (multimem.h's head comment): sendbuff's window object
 * and offset, two-shot recvbuff's, as the plan found them and the entries still hold them (an
 * entry freed since, as by a graph replayed after a deregistration, stages). 0: stage. */
struct braid_mm_direct {
  const char* smc;
  char *rmc, *rlocal;
  size_t soff, roff;
  uint64_t desc[4]; /* sendbuff's window id and offset, recvbuff's (two-shot; else 0 0) */
};
HD int braid_mm_direct_of(const struct braid_lsa_view* v, const struct braid_work* w, int me, int one,
                          struct braid_mm_direct* d) {
  const int ks = w->lsa_win - 1, kr = w->lsa_rwin - 1;
  if (ks < 0 || ks >= BRAID_LSA_MAX_WINS || v->win_id[ks] == 0 || v->win_mc[ks] == NULL) return 0;
  d->smc = v->win_mc[ks];
  d->soff = w->lsa_off;
  d->desc[0] = v->win_id[ks], d->desc[1] = d->soff, d->desc[2] = d->desc[3] = 0;
  d->rmc = d->rlocal = NULL;
  d->roff = 0;
  if (one) return 1;
  if (kr < 0 || kr >= BRAID_LSA_MAX_WINS || v->win_id[kr] == 0 || v->win_mc[kr] == NULL) return 0;
  d->rmc = v->win_mc[kr];
  d->rlocal = v->win_seg[(size_t)kr * v->nranks + me];
  d->roff = (size_t)((const char*)w->recvbuff - d->rlocal);
  d->desc[2] = v->win_id[kr], d->desc[3] = d->roff;
  return 1;
}

/* The all-reduce of work item w through the multicast object (lsa_mode has BRAID_LSA_MC). */
HD_STEP int braid_run_mc_allreduce(struct braid_prims* p, const struct braid_work* w) {
  const struct braid_lsa_view* v = w->lsa;
  const int n = w->nranks, me = w->rank, es = p->esize, one = (w->lsa_mode & 3) == BRAID_LSA_ONESHOT;
  int st;
  if (v->mc == NULL || !braid_mm_supported(p->op.dtype, p->op.kind)) return BRAID_EXEC_BAD_SCHEDULE;
  volatile uint64_t* calls = (volatile uint64_t*)(v->mc_local + BRAID_MC_CALLS_OFF);
  const uint32_t seq = (uint32_t)simt_ld_volatile_u64(calls) + 1;
  struct braid_mm_direct d = {0, 0, 0, 0, 0, {0, 0, 0, 0}};
  const int offer = braid_mm_direct_of(v, w, me, one, &d);
  if ((st = braid_mm_wait_all(p, v, BRAID_MC_ARRIVE_OFF, n, seq - 1)) != 0) return st;
  if (!offer)
    braid_lsa_copy(&p->op, v->mc_local + BRAID_MC_IN(v, seq), w->sendbuff, w->count);
  else if (simt_tid() == 0)
    for (int j = 0; j < 4; j++)
      simt_st_volatile_u64((volatile uint64_t*)(v->mc_local + BRAID_MC_DESC_OFF(seq) + 8 * (size_t)j), d.desc[j]);
  braid_mm_publish(v, me, BRAID_MC_ARRIVE_OFF, seq | (offer ? BRAID_MC_FLAG : 0));
  if ((st = braid_mm_wait_all(p, v, BRAID_MC_ARRIVE_OFF, n, seq)) != 0) return st;
  int flagged = 0, same = 0;
  if (simt_tid() == 0) {
    for (int r = 0; r < n; r++) {
      uint64_t a = simt_ld_acquire_u64((const volatile uint64_t*)(v->mc_local + BRAID_MC_ARRIVE_OFF + 8 * (size_t)r));
      flagged += (uint32_t)a == seq && (a & BRAID_MC_FLAG) != 0; /* seq + 1 there: it did not offer */
    }
    same = flagged == n && braid_mm_same(v->mc, BRAID_MC_DESC_OFF(seq)) ? 1 : 0; /* the descriptors */
  }
  if (simt_bar_or(same)) { /* every rank offered the same windows and offsets */
    if (one) {
      braid_mm_reduce_at(&p->op, d.smc, d.soff, NULL, (char*)w->recvbuff, 0, w->count, 0, NULL, 0);
      braid_mm_publish(v, me, BRAID_MC_DONE_OFF, seq);
      if ((st = braid_mm_wait_all(p, v, BRAID_MC_DONE_OFF, n, seq)) != 0) return st; /* done reading my input */
    } else {
      size_t lo, len;
      braid_lsa_chunk(w->count, n, me, es, &lo, &len);
      char* tmp = w->sendbuff == w->recvbuff ? v->mc_local + BRAID_MC_RES(v, seq) : NULL; /* the fake GPU's */
      if (len > 0)
        braid_mm_reduce_at(&p->op, d.smc, d.soff + lo * es, d.rmc, d.rlocal, d.roff + lo * es, len, 1, tmp,
                           v->slot_bytes);
      braid_mm_publish(v, me, BRAID_MC_RS_OFF, seq);
      if ((st = braid_mm_wait_all(p, v, BRAID_MC_RS_OFF, n, seq)) != 0) return st;
      braid_mm_publish(v, me, BRAID_MC_DONE_OFF, seq);
    }
    if (simt_tid() == 0) {
      volatile uint64_t* direct = (volatile uint64_t*)(v->mc_local + BRAID_MC_DIRECT_OFF);
      simt_st_volatile_u64(direct, simt_ld_volatile_u64(direct) + 1);
      simt_st_volatile_u64(calls, seq);
    }
    return 0;
  }
  if (simt_bar_or(simt_tid() == 0 && flagged > 0)) { /* some offered, not all alike: stage late */
    if (offer) braid_lsa_copy(&p->op, v->mc_local + BRAID_MC_IN(v, seq), w->sendbuff, w->count);
    braid_mm_publish(v, me, BRAID_MC_STAGED_OFF, seq);
    if ((st = braid_mm_wait_all(p, v, BRAID_MC_STAGED_OFF, n, seq)) != 0) return st;
  }
  if (one) {
    braid_mm_reduce(&p->op, v, BRAID_MC_IN(v, seq), BRAID_MC_RES(v, seq), w->count, 0);
    simt_bar_sync(); /* another thread's words of the result */
  } else {
    size_t lo, len;
    braid_lsa_chunk(w->count, n, me, es, &lo, &len);
    if (len > 0) braid_mm_reduce(&p->op, v, BRAID_MC_IN(v, seq) + lo * es, BRAID_MC_RES(v, seq) + lo * es, len, 1);
    braid_mm_publish(v, me, BRAID_MC_RS_OFF, seq);
    if ((st = braid_mm_wait_all(p, v, BRAID_MC_RS_OFF, n, seq)) != 0) return st;
  }
  braid_lsa_copy(&p->op, w->recvbuff, v->mc_local + BRAID_MC_RES(v, seq), w->count);
  braid_mm_publish(v, me, BRAID_MC_DONE_OFF, seq);
  if (simt_tid() == 0) simt_st_volatile_u64(calls, seq);
  return 0;
}

#endif /* BRAID_KERNELS_MULTIMEM_H */
