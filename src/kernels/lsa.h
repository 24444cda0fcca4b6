/*
 * lsa.h - NVLS-style all-reduce over load/store-reachable memory (LSA: the ranks of a node),
 * in the shared C / CUDA C subset of the data path. core/sym/lsa.c makes the segments every
 * local rank maps: shared memory in host mode, device memory mapped to every local rank by
 * CUDA IPC handles (or the peer's pointer within one process) in device mode. The same code
 * runs on the host executor's one thread, on the fake GPU and in a CUDA block: thread 0
 * waits and publishes, the block votes (prims.h's rules), every thread copies and reduces.
 * Over a multicast object one multimem.ld_reduce / multimem.st would replace the loops over
 * peers (not written: docs/notes/2026-12-01-nvls-device.md).
 *
 * Each rank's segment: an arrival counter, a reduce-scatter counter (one cache line each),
 * the count of calls this rank ran, then two input slots and two result slots of slot_bytes,
 * used alternately by odd and even calls, then host mode's line slots (the one-line variant,
 * below), the done[] words (a cache line per writer) and a private gather area. A call's number seq is the
 * executor's own count + 1, read from its segment when the call starts and stored when it
 * ends: every rank runs the same calls in the same order, so every rank derives the same seq,
 * and a CUDA graph's replays (whose kernel arguments never change) get fresh numbers. A call:
 *   1. waits until every rank arrived at seq-1: they all finished reading what call seq-2 left
 *      in the slot this call overwrites;
 *   2. copies its input, with its own pre-op (PreMulSum's scalar is per rank), into its input
 *      slot (user buffers need not be in a window), or, when its sendbuff lies in a window
 *      (w->lsa_win), copies nothing; either way writes where its input is into its source word
 *      of call seq (window id and offset, or 0: the slot) and publishes arrive = seq (release);
 *   3. waits for every rank's arrive >= seq (acquire);
 *   4. one-shot: loads every rank's input and reduces all of it into its output;
 *      two-shot: reduces chunk `rank` of every input into its result slot, publishes rs = seq,
 *      then loads every rank's reduced chunk into its output. A peer's input is its slot, or
 *      its buffer of the window its source word names, as this rank maps it (the view's table);
 *   5. writes done[me] = seq into every segment: it reads nothing of them any more (a segment
 *      may be unmapped once its done[] says every peer finished its last call: core/sym/lsa.c).
 *   6. one-shot read in place only: waits until every rank's done[] in its own segment reached
 *      seq, so the caller may overwrite its input once the call returns (no peer still loads
 *      it). A two-shot needs no wait: it waited for every rank's rs = seq, which each published
 *      after its last load of this rank's input.
 * Which ranks read in place is each rank's own choice, per call (mixed calls are fine): only
 * the source word says, and windows have the same id on every rank. A one-shot in place
 * (recvbuff == sendbuff) stages (its output would overwrite an input the peers still load), so
 * does PreMulSum (its owner's pre-op), and so does the one-line path below.
 * Every rank reduces in rank order 0..n-1, so every rank's output has the same bits (and the
 * two variants agree). PreMulSum's multiplier applies to each input once, by its owner,
 * SumPostDiv's division after the last operand, as in the ring.
 */
#ifndef BRAID_KERNELS_LSA_H
#define BRAID_KERNELS_LSA_H

#include "kernels/prims.h"
#include "kernels/reduce.h"
#include "kernels/work.h"

#define BRAID_LSA_ARRIVE_OFF 0
#define BRAID_LSA_RS_OFF 64
#define BRAID_LSA_SRC_OFF 128     /* two source words (call parity), a cache line each: window id, offset */
#define BRAID_LSA_STAGED_OFF 256  /* one-/two-shot calls of this rank that staged their input (tests) */
#define BRAID_LSA_INPLACE_OFF 264 /* ... that let the peers read it in place (only its own executor writes both) */
#define BRAID_LSA_CALLS_OFF 3584  /* calls this rank ran (only its own executor writes it) */
#define BRAID_LSA_DATA_OFF 4096
/* After the four slots (host mode's one-line calls: lsa_line.h): two slots of lines, then the
 * done[] words, one cache line per writer (rank r's word: the last call rank r finished reading
 * this segment in; only rank r writes it, only the owner reads it), then this rank's private
 * gather area (never read by a peer). */
#define BRAID_LSA_LINE_PAYLOAD 56     /* bytes of a line before its 8-byte call number */
#define BRAID_LSA_LINE_MAX_BYTES 4096 /* the largest one-line call */
#define BRAID_LSA_LINE_NLINES ((BRAID_LSA_LINE_MAX_BYTES + BRAID_LSA_LINE_PAYLOAD - 1) / BRAID_LSA_LINE_PAYLOAD)
#define BRAID_LSA_LINE_SLOT_BYTES (64 * (size_t)BRAID_LSA_LINE_NLINES)
#define BRAID_LSA_LINES_OFF(slot_bytes) (BRAID_LSA_DATA_OFF + 4 * (size_t)(slot_bytes))
#define BRAID_LSA_DONE_OFF(slot_bytes) (BRAID_LSA_LINES_OFF(slot_bytes) + 2 * BRAID_LSA_LINE_SLOT_BYTES)
#define BRAID_LSA_DONE_AT(slot_bytes, r) (BRAID_LSA_DONE_OFF(slot_bytes) + 64 * (size_t)(r))
#define BRAID_LSA_GATHER_OFF(slot_bytes) (BRAID_LSA_DONE_OFF(slot_bytes) + 64 * (size_t)BRAID_LSA_MAX_RANKS)
/* Bytes of one rank's segment for slots of slot_bytes. */
#define BRAID_LSA_SEG_BYTES(slot_bytes) \
  (BRAID_LSA_GATHER_OFF(slot_bytes) + (size_t)BRAID_LSA_MAX_RANKS * BRAID_LSA_LINE_MAX_BYTES)

HD char* braid_lsa_in(const struct braid_lsa_view* v, int r, uint32_t seq) {
  return v->seg[r] + BRAID_LSA_DATA_OFF + (size_t)(seq & 1) * v->slot_bytes;
}
HD volatile uint64_t* braid_lsa_src(const struct braid_lsa_view* v, int r, uint32_t seq) {
  return (volatile uint64_t*)(v->seg[r] + BRAID_LSA_SRC_OFF + 64 * (size_t)(seq & 1));
}
HD char* braid_lsa_res(const struct braid_lsa_view* v, int r, uint32_t seq) {
  return v->seg[r] + BRAID_LSA_DATA_OFF + (size_t)(2 + (seq & 1)) * v->slot_bytes;
}
HD volatile uint64_t* braid_lsa_flag(const struct braid_lsa_view* v, int r, size_t off) {
  return (volatile uint64_t*)(v->seg[r] + off);
}

/* Step 5: tell every rank this one will not read its segment for call seq any more, and count
 * the call. Every thread's last loads precede the barrier; thread 0's stores follow it (the
 * next item's first barrier, coll.h, orders the count before any thread reads it again). */
HD void braid_lsa_done(const struct braid_lsa_view* v, int me, uint32_t seq) {
  simt_bar_sync();
  if (simt_tid() != 0) return;
  for (int r = 0; r < v->nranks; r++)
    simt_st_release_u64(braid_lsa_flag(v, r, BRAID_LSA_DONE_AT(v->slot_bytes, me)), seq);
  simt_st_volatile_u64(braid_lsa_flag(v, me, BRAID_LSA_CALLS_OFF), seq);
}

/* Publish counter `off` of this rank's segment = seq once every thread's stores (and loads) of
 * the step are done: the barrier, then thread 0's release (prims.h's Simple publish). */
HD void braid_lsa_publish(const struct braid_lsa_view* v, int me, size_t off, uint32_t seq) {
  simt_bar_sync();
  if (simt_tid() == 0) simt_st_release_u64(braid_lsa_flag(v, me, off), seq);
}

/* Until the counter reached seq (mod 2^32, so call numbers may wrap): 0, or the abort flag's value. */
HD int braid_lsa_wait(const volatile uint64_t* p, uint32_t seq, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while ((int32_t)((uint32_t)simt_ld_acquire_u64(p) - seq) < 0) {
    int st = braid_spin_check(&spins, abort_flag);
    if (st) return st;
  }
  return 0;
}
/* Counter `off` of ranks [r0, r1) reached seq: thread 0 waits (acquire), the block votes
 * (prims.h's rules: a failure is sticky in p->status, the vote is the barrier after which
 * the other threads load what the peers published). */
HD int braid_lsa_wait_ranks(struct braid_prims* p, const struct braid_lsa_view* v, size_t off, int r0, int r1,
                            uint32_t seq) {
  int st = 0;
  if (simt_tid() == 0)
    for (int r = r0; r < r1 && st == 0; r++) st = braid_lsa_wait(braid_lsa_flag(v, r, off), seq, p->abort_flag);
  return braid_prims_vote(p, st);
}

/* Step 6: every rank's done[] word in this rank's own segment reached seq (each rank finished
 * reading this rank's input of call seq in place): thread 0 waits, the block votes. */
HD int braid_lsa_wait_readers(struct braid_prims* p, const struct braid_lsa_view* v, int me, uint32_t seq) {
  int st = 0;
  if (simt_tid() == 0)
    for (int r = 0; r < v->nranks && st == 0; r++)
      if (r != me) st = braid_lsa_wait(braid_lsa_flag(v, me, BRAID_LSA_DONE_AT(v->slot_bytes, r)), seq, p->abort_flag);
  return braid_prims_vote(p, st);
}

/* Rank r's input of call seq (after step 3: its source word is published): its slot, or its
 * buffer of the window the word names, as this rank maps it; NULL when this rank has no such
 * window (cannot happen while windows are registered collectively). Every thread may call it:
 * the vote after step 3's wait orders these loads after the peer's release. */
HD const char* braid_lsa_input(const struct braid_lsa_view* v, int r, uint32_t seq) {
  const volatile uint64_t* src = braid_lsa_src(v, r, seq);
  const uint64_t id = src[0];
  if (id == 0) return braid_lsa_in(v, r, seq);
  for (int k = 0; k < BRAID_LSA_MAX_WINS; k++)
    if (v->win_id[k] == id) return v->win_seg[(size_t)k * v->nranks + r] + src[1];
  return NULL;
}

/* mm_ld_reduce over unicast pointers: dst[i] = op over every rank's input slot of call seq at
 * element lo + i, in rank order, the post-op after the last operand. The operands are staged
 * inputs, whose pre-op (PreMulSum: each rank's own scalar) their owner applied
 * (braid_lsa_stage). All threads of the block call it. (Multicast: one multimem.ld_reduce.) */
HD void braid_lsa_ld_reduce(const struct braid_redop* op, void* dst, const struct braid_lsa_view* v, uint32_t seq,
                            size_t lo, size_t n, int es) {
  const int nsrc = v->nranks;
  const char* s0 = braid_lsa_input(v, 0, seq) + lo * es;
  if (nsrc == 1) {
    BRAID_REDUCE_COPY(op, dst, NULL, s0, 0, NULL, 0, 1, n);
    return;
  }
  BRAID_REDUCE_COPY(op, dst, NULL, s0, 0, braid_lsa_input(v, 1, seq) + lo * es, 0, nsrc == 2, n);
  for (int i = 2; i < nsrc; i++) {
    simt_bar_sync(); /* the pass reads dst elements another thread may have written (reduce.h's
                        thread mapping follows the pointers' alignment) */
    BRAID_REDUCE_COPY(op, dst, NULL, dst, 0, braid_lsa_input(v, i, seq) + lo * es, 0, i == nsrc - 1, n);
  }
}

/* Step 2's copy: the input with this rank's pre-op (PreMulSum by its own scalar, rounded to
 * the type as a ring's first hop sends it), no post-op. */
HD void braid_lsa_stage(const struct braid_redop* op, void* dst, const void* src, size_t n) {
  BRAID_REDUCE_COPY(op, dst, NULL, src, 1, NULL, 0, 0, n);
}

/* Plain copy of n elements (the operator's pre- and post-ops do not apply). */
HD void braid_lsa_copy(const struct braid_redop* op, void* dst, const void* src, size_t n) {
  BRAID_REDUCE_COPY(op, dst, NULL, src, 0, NULL, 0, 0, n);
}

/* Rank r's chunk of a two-shot call: [*lo, *lo + *n) elements. */
HD void braid_lsa_chunk(size_t count, int nranks, int r, int es, size_t* lo, size_t* n) {
  size_t unit = (size_t)(64 / es), per = (count + nranks - 1) / nranks; /* whole 64-byte lines */
  per = (per + unit - 1) / unit * unit;
  size_t a = (size_t)r * per;
  *lo = a < count ? a : count;
  *n = a < count ? (per < count - a ? per : count - a) : 0;
}

#if !BRAID_DEVICE_COMPILE
#if defined(__x86_64__) && !defined(__CUDACC__)
#include <emmintrin.h>
#endif
/* ---- host mode's one-line one-shot (calls up to BRAID_LSA_LINE_MAX_BYTES) ----------------
 * Rank r's call seq is the lines of slot seq & 1 of r's line region: each holds 56 bytes of r's
 * staged input (its pre-op applied) and then the call number, stored last with release. A peer
 * that loads the number (acquire) reads the payload of the same cache line: one line transfer
 * per 56 bytes per peer, no separate arrival flag. Every rank copies the peers' payloads into
 * its private gather area (contiguous, rank order) and reduces there exactly as the one-shot
 * reduces the staged inputs (same operands, same order: the same bits on every rank).
 * No wait before staging: this rank finished call seq-1, so every peer published seq-1 (in
 * any variant), which it did after reading everything of call seq-2, the slot rewritten here.
 * It publishes arrive = seq and done[] too, so a call of another variant may follow.
 * A rank stages into its gather area and copies into its lines; it never reads its own lines
 * back (braid_lsa_line_operand). Calls of up to 8 bytes take the one-word path below. */
HD char* braid_lsa_line(const struct braid_lsa_view* v, int r, uint32_t seq, size_t i) {
  return v->seg[r] + BRAID_LSA_LINES_OFF(v->slot_bytes) + (size_t)(seq & 1) * BRAID_LSA_LINE_SLOT_BYTES + 64 * i;
}
HD char* braid_lsa_gather(const struct braid_lsa_view* v, int me, int r) {
  return v->seg[me] + BRAID_LSA_GATHER_OFF(v->slot_bytes) + (size_t)r * BRAID_LSA_LINE_MAX_BYTES;
}

/* A line's last word: the call number (low half: what braid_lsa_wait compares) and the call's
 * size in bytes (high half), so that ranks which called with different sizes fail at line 0,
 * which every call writes, instead of one waiting for a line the other never writes. */
HD uint64_t braid_lsa_line_word(uint32_t seq, size_t bytes) {
  return (uint64_t)seq | ((uint64_t)bytes << 32);
}
/* Wait for line i of rank r's call seq; at line 0 check its size: 0, a status, or
 * BRAID_EXEC_MISMATCH. */
HD int braid_lsa_line_wait(const struct braid_lsa_view* v, int r, uint32_t seq, size_t i, size_t bytes,
                           const volatile uint32_t* abort_flag) {
  const volatile uint64_t* w = (const volatile uint64_t*)(braid_lsa_line(v, r, seq, i) + BRAID_LSA_LINE_PAYLOAD);
  int st = braid_lsa_wait(w, seq, abort_flag);
  if (st == 0 && i == 0 && (simt_ld_acquire_u64(w) >> 32) != (uint64_t)bytes) st = BRAID_EXEC_MISMATCH;
  return st;
}

/* Rank r's payload of call seq into g: wait for each line's number, copy what precedes it. */
HD int braid_lsa_line_fetch(const struct braid_lsa_view* v, int r, uint32_t seq, char* g, size_t bytes,
                            const volatile uint32_t* abort_flag) {
  for (size_t i = 0, off = 0; off < bytes; i++, off += BRAID_LSA_LINE_PAYLOAD) {
    const char* l = braid_lsa_line(v, r, seq, i);
    int st = braid_lsa_line_wait(v, r, seq, i, bytes, abort_flag);
    if (st) return st;
    if (bytes - off >= BRAID_LSA_LINE_PAYLOAD)
      memcpy(g + off, l, BRAID_LSA_LINE_PAYLOAD);
    else
      memcpy(g + off, l, bytes - off);
  }
  return 0;
}

/* Operand r of call seq: a one-line call reduces straight from a peer's line (its payload is
 * contiguous there, and stays until this rank publishes its next call), a longer one from the
 * gather area; this rank's own operand is always its staged copy in the gather area, never
 * read back from its line (a peer that read the line may have taken it away: a far transfer). */
HD const char* braid_lsa_line_operand(const struct braid_lsa_view* v, int me, int r, uint32_t seq, int one) {
  return one && r != me ? braid_lsa_line(v, r, seq, 0) : braid_lsa_gather(v, me, r);
}

/* ---- a call of at most 8 bytes: one word, and one store ----------------------------------
 * Its staged word sits at BRAID_LSA_WORD_AT, just before the call number, and both go out in
 * one 16-byte store (x86-64 with AVX; elsewhere two stores, payload first): the line becomes visible to
 * the peer polling it in one piece, so a peer's poll that lands between two stores of the
 * line cannot take it away before the call number is in (which would cost this rank another
 * ownership request and the peer another transfer). The word is reduced with
 * braid_reduce_pack64 (the LL lines' operator: the loops' semantics and operand order, so the
 * same bits); the reduce loops' dispatch and set-up cost more than the whole reduction here.
 * Split in two so that the lone path (core/sym/lsa.c) publishes before its bookkeeping. */
#define BRAID_LSA_WORD_AT 48
#define BRAID_LSA_WORD_MAX 8 /* the largest one-word call */

/* The call number this rank's next call takes (its executor's count + 1). */
HD uint32_t braid_lsa_next_seq(const struct braid_lsa_view* v, int me) {
  return (uint32_t)simt_ld_volatile_u64(braid_lsa_flag(v, me, BRAID_LSA_CALLS_OFF)) + 1;
}

/* Stage and publish this rank's word of call seq (0 < bytes <= BRAID_LSA_WORD_MAX); returns
 * the staged word, this rank's operand (see braid_lsa_word_finish). */
HD uint64_t braid_lsa_word_publish(const struct braid_redop* op, const struct braid_lsa_view* v, int me, uint32_t seq,
                                   const void* sendbuff, size_t bytes) {
  uint64_t x = 0;
  memcpy(&x, sendbuff, bytes);
  x = BRAID_REDUCE_PACK64(op, x, 1, NULL, 0, 0);
  char* l = braid_lsa_line(v, me, seq, 0);
  const uint64_t word = braid_lsa_line_word(seq, bytes);
#if defined(__x86_64__) && !defined(__CUDACC__)
  /* One store is one piece only where the CPU says so: aligned 16-byte SSE stores are
   * single-copy atomic on CPUs with AVX (Intel SDM vol. 3 8.1.1; AMD APM vol. 2 7.3.2); before
   * AVX a peer could see the call number with the old word. A cached feature bit: one load. */
  if (__builtin_cpu_supports("avx")) {
    __atomic_thread_fence(__ATOMIC_RELEASE); /* the loads of call seq-2's lines first (a compiler barrier) */
    _mm_store_si128((__m128i*)(void*)(l + BRAID_LSA_WORD_AT), _mm_set_epi64x((long long)word, (long long)x));
    return x;
  }
#endif
  simt_st_volatile_u64((volatile uint64_t*)(void*)(l + BRAID_LSA_WORD_AT), x);
  simt_st_release_u64((volatile uint64_t*)(void*)(l + BRAID_LSA_LINE_PAYLOAD), word);
  return x;
}

/* Wait for every peer's word of call seq, reduce them in rank order into recvbuff (`bytes` of
 * it written), then arrive and done as the other variants: 0 or a status. This rank's operand
 * is `mine` (what braid_lsa_word_publish returned), not its line: a peer that read the line may
 * have taken it away (measured: reading it back cost a far transfer, ~150 ns, on most calls). */
HD uint64_t braid_lsa_word_at(const struct braid_lsa_view* v, int me, uint64_t mine, int r, uint32_t seq) {
  return r == me ? mine : *(const uint64_t*)(void*)(braid_lsa_line(v, r, seq, 0) + BRAID_LSA_WORD_AT);
}
HD int braid_lsa_word_finish(const struct braid_redop* op, const struct braid_lsa_view* v, int me, uint32_t seq,
                             uint64_t mine, void* recvbuff, size_t bytes, const volatile uint32_t* abort_flag) {
  const int n = v->nranks;
  for (int k = 1; k < n; k++) { /* the next rank first: the ranks do not all poll rank 0 */
    int st = braid_lsa_line_wait(v, (me + k) % n, seq, 0, bytes, abort_flag);
    if (st) return st;
  }
  uint64_t w = braid_lsa_word_at(v, me, mine, 1, seq);
  uint64_t r = BRAID_REDUCE_PACK64(op, braid_lsa_word_at(v, me, mine, 0, seq), 0, &w, 0, n == 2);
  for (int k = 2; k < n; k++) {
    w = braid_lsa_word_at(v, me, mine, k, seq);
    r = BRAID_REDUCE_PACK64(op, r, 0, &w, 0, k == n - 1);
  }
  memcpy(recvbuff, &r, bytes);
  simt_st_release_u64(braid_lsa_flag(v, me, BRAID_LSA_ARRIVE_OFF), seq);
  braid_lsa_done(v, me, seq);
  return 0;
}

/* The whole call (one host thread), of more than BRAID_LSA_WORD_MAX bytes (callers send the
 * smaller ones to the one-word path): 0, or the abort flag's value (BRAID_TIMEOUT, abort). */
HD int braid_lsa_line_allreduce(const struct braid_redop* op, const struct braid_lsa_view* v, int me,
                                const void* sendbuff, void* recvbuff, size_t count, int es,
                                const volatile uint32_t* abort_flag) {
  const int n = v->nranks;
  const size_t bytes = count * (size_t)es;
  const int one = bytes <= BRAID_LSA_LINE_PAYLOAD;
  const uint32_t seq = braid_lsa_next_seq(v, me);
  char* mine = (char*)braid_lsa_line_operand(v, me, me, seq, one);
  braid_lsa_stage(op, mine, sendbuff, count);
  for (size_t i = 0, off = 0; off < bytes; i++, off += BRAID_LSA_LINE_PAYLOAD) {
    char* l = braid_lsa_line(v, me, seq, i);
    if (bytes - off >= BRAID_LSA_LINE_PAYLOAD)
      memcpy(l, mine + off, BRAID_LSA_LINE_PAYLOAD);
    else
      memcpy(l, mine + off, bytes - off);
    simt_st_release_u64((volatile uint64_t*)(l + BRAID_LSA_LINE_PAYLOAD), braid_lsa_line_word(seq, bytes));
  }
  for (int k = 1; k < n; k++) { /* the next rank first: the ranks do not all poll rank 0 */
    int r = (me + k) % n, st;
    if (one)
      st = braid_lsa_line_wait(v, r, seq, 0, bytes, abort_flag);
    else
      st = braid_lsa_line_fetch(v, r, seq, braid_lsa_gather(v, me, r), bytes, abort_flag);
    if (st) return st;
  }
  BRAID_REDUCE_COPY(op, recvbuff, NULL, braid_lsa_line_operand(v, me, 0, seq, one), 0,
                    braid_lsa_line_operand(v, me, 1, seq, one), 0, n == 2, count);
  for (int i = 2; i < n; i++)
    BRAID_REDUCE_COPY(op, recvbuff, NULL, recvbuff, 0, braid_lsa_line_operand(v, me, i, seq, one), 0, i == n - 1,
                      count);
  simt_st_release_u64(braid_lsa_flag(v, me, BRAID_LSA_ARRIVE_OFF), seq);
  braid_lsa_done(v, me, seq);
  return 0;
}

/* ---- a call of at least v->flat_min bytes (more than one line's payload), flat ----------
 * Rank r's call seq: its staged input contiguous from line 1 of slot seq & 1 (up to 4 KiB:
 * lines 1-64), and one call number for the whole call, in line 0's last word (where every line
 * call keeps it), stored after the payload with release. A peer that loads it (acquire) loads
 * every payload line at once: the loads are independent, so their transfers overlap, where a
 * number per line had the reader wait for line i before it asked for line i+1 (and a line
 * polled before its writer got to it travels twice). The reader reduces straight from the
 * peers' payloads (contiguous, and there until it publishes its next call), and its own
 * operand is its sendbuff, not a staged copy: nothing goes through the gather area, except
 * where the own operand must be staged (PreMulSum: its pre-op; in place at rank >= 2: the
 * first passes overwrite it), then the gather area holds it. With nt (a per-rank choice: the
 * readers cannot tell; core/sym/lsa.c measures which is faster) the payload's whole lines go
 * out with non-temporal stores: the writer takes no line back from a peer that read it two
 * calls ago (the lines go to memory, the peers' copies are dropped). Measured between far
 * CPUs (another CCX): 2300 -> 700 cycles to publish 4 KiB, and the readers load the lines from
 * memory no slower than from the far cache; between near CPUs (a shared L3) the reads from
 * memory cost more than the stores save.
 * The number's high half is the size with BRAID_LSA_FLAT_BIT: a rank that took the other
 * layout (or another size) fails at line 0 with BRAID_EXEC_MISMATCH. The same wait-free start
 * as the lines (a peer published seq-1 after its last load of call seq-2's slot). */
#define BRAID_LSA_FLAT_BIT 0x80000000u
BRAID_STATIC_ASSERT(64 + BRAID_LSA_LINE_MAX_BYTES <= BRAID_LSA_LINE_SLOT_BYTES, "a flat call fits a slot of lines");

/* n bytes from src to dst (64-byte aligned), visible before any later store: whole lines with
 * non-temporal stores (x86-64; elsewhere a plain copy), the rest plain, then a store fence. */
HD void braid_lsa_copy_nt(char* dst, const char* src, size_t n) {
#if defined(__x86_64__) && !defined(__CUDACC__)
  size_t o = 0;
  for (; o + 64 <= n; o += 64) {
    const __m128i a = _mm_loadu_si128((const __m128i*)(const void*)(src + o));
    const __m128i b = _mm_loadu_si128((const __m128i*)(const void*)(src + o + 16));
    const __m128i c = _mm_loadu_si128((const __m128i*)(const void*)(src + o + 32));
    const __m128i d = _mm_loadu_si128((const __m128i*)(const void*)(src + o + 48));
    _mm_stream_si128((__m128i*)(void*)(dst + o), a);
    _mm_stream_si128((__m128i*)(void*)(dst + o + 16), b);
    _mm_stream_si128((__m128i*)(void*)(dst + o + 32), c);
    _mm_stream_si128((__m128i*)(void*)(dst + o + 48), d);
  }
  if (o < n) memcpy(dst + o, src + o, n - o);
  _mm_sfence(); /* non-temporal stores are not ordered before the call number's store */
#else
  memcpy(dst, src, n);
#endif
}
HD const char* braid_lsa_flat_operand(const struct braid_lsa_view* v, const char* own, int me, int r, uint32_t seq) {
  return r == me ? own : braid_lsa_line(v, r, seq, 1);
}
HD int braid_lsa_flat_allreduce(const struct braid_redop* op, const struct braid_lsa_view* v, int me,
                                const void* sendbuff, void* recvbuff, size_t count, int es, int nt,
                                const volatile uint32_t* abort_flag) {
  const int n = v->nranks;
  const size_t bytes = count * (size_t)es;
  const uint32_t seq = braid_lsa_next_seq(v, me);
  char* l0 = braid_lsa_line(v, me, seq, 0);
  const char* own = (const char*)sendbuff;
  if (op->kind == BRAID_RED_PREMULSUM || (sendbuff == recvbuff && me >= 2)) {
    char* g = braid_lsa_gather(v, me, me);
    braid_lsa_stage(op, g, sendbuff, count);
    own = g;
  }
  if (nt)
    braid_lsa_copy_nt(l0 + 64, own, bytes);
  else
    memcpy(l0 + 64, own, bytes); /* own is staged, or sendbuff without a pre-op */
  simt_st_release_u64((volatile uint64_t*)(void*)(l0 + BRAID_LSA_LINE_PAYLOAD),
                      braid_lsa_line_word(seq, bytes) | ((uint64_t)BRAID_LSA_FLAT_BIT << 32));
  for (int k = 1; k < n; k++) { /* the next rank first: the ranks do not all poll rank 0 */
    const volatile uint64_t* w =
        (const volatile uint64_t*)(void*)(braid_lsa_line(v, (me + k) % n, seq, 0) + BRAID_LSA_LINE_PAYLOAD);
    int st = braid_lsa_wait(w, seq, abort_flag);
    if (st == 0 && (simt_ld_acquire_u64(w) >> 32) != (BRAID_LSA_FLAT_BIT | (uint64_t)bytes)) st = BRAID_EXEC_MISMATCH;
    if (st) return st;
  }
  BRAID_REDUCE_COPY(op, recvbuff, NULL, braid_lsa_flat_operand(v, own, me, 0, seq), 0,
                    braid_lsa_flat_operand(v, own, me, 1, seq), 0, n == 2, count);
  for (int i = 2; i < n; i++)
    BRAID_REDUCE_COPY(op, recvbuff, NULL, recvbuff, 0, braid_lsa_flat_operand(v, own, me, i, seq), 0, i == n - 1,
                      count);
  simt_st_release_u64(braid_lsa_flag(v, me, BRAID_LSA_ARRIVE_OFF), seq);
  braid_lsa_done(v, me, seq);
  return 0;
}
#endif

/* The all-reduce of work item w (algo NVLS, one channel): the host executor's one thread, a
 * fake GPU's block (one thread), or every thread of one CUDA block (over the peers' segments
 * as CUDA IPC / peer mappings of device memory). Returns 0 or a braid_exec_status, the same
 * in every thread. A call of its own on the device (HD_STEP): the kernel's other paths keep
 * their registers. */
HD_STEP int braid_run_lsa_allreduce(struct braid_prims* p, const struct braid_work* w) {
  const struct braid_lsa_view* v = w->lsa;
  const int n = w->nranks, me = w->rank, es = p->esize;
  int st;
  if (v == NULL || v->nranks != n || n > BRAID_LSA_MAX_RANKS || w->count * es > v->slot_bytes)
    return BRAID_EXEC_BAD_SCHEDULE;
#if !BRAID_DEVICE_COMPILE
  if (w->lsa_mode == BRAID_LSA_ONELINE) {
    if (n < 2 || w->count * es > BRAID_LSA_LINE_MAX_BYTES) return BRAID_EXEC_BAD_SCHEDULE;
    if (w->count > 0 && w->count * es <= BRAID_LSA_WORD_MAX) {
      const uint32_t seq = braid_lsa_next_seq(v, me);
      uint64_t mine = braid_lsa_word_publish(&p->op, v, me, seq, w->sendbuff, w->count * es);
      return braid_lsa_word_finish(&p->op, v, me, seq, mine, w->recvbuff, w->count * es, p->abort_flag);
    }
    if (w->count * es >= v->flat_min)
      return braid_lsa_flat_allreduce(&p->op, v, me, w->sendbuff, w->recvbuff, w->count, es, v->flat_nt, p->abort_flag);
    return braid_lsa_line_allreduce(&p->op, v, me, w->sendbuff, w->recvbuff, w->count, es, p->abort_flag);
  }
#endif
  if (w->lsa_mode != BRAID_LSA_ONESHOT && w->lsa_mode != BRAID_LSA_TWOSHOT) return BRAID_EXEC_BAD_SCHEDULE;
  const uint32_t seq = (uint32_t)simt_ld_volatile_u64(braid_lsa_flag(v, me, BRAID_LSA_CALLS_OFF)) + 1;
  /* An entry freed since the plan (its window deregistered: a graph replayed after that) stages. */
  const int in_place = w->lsa_win != 0 && w->lsa_win <= BRAID_LSA_MAX_WINS && v->win_id[w->lsa_win - 1] != 0;
  if ((st = braid_lsa_wait_ranks(p, v, BRAID_LSA_ARRIVE_OFF, 0, n, seq - 1)) != 0) return st;
  if (!in_place) braid_lsa_stage(&p->op, braid_lsa_in(v, me, seq), w->sendbuff, w->count);
  if (simt_tid() == 0) { /* where the peers find this input (before arrive's release) */
    volatile uint64_t* src = braid_lsa_src(v, me, seq);
    src[0] = in_place ? v->win_id[w->lsa_win - 1] : 0;
    src[1] = in_place ? w->lsa_off : 0;
    volatile uint64_t* cnt = braid_lsa_flag(v, me, in_place ? BRAID_LSA_INPLACE_OFF : BRAID_LSA_STAGED_OFF);
    *cnt = *cnt + 1;
  }
  braid_lsa_publish(v, me, BRAID_LSA_ARRIVE_OFF, seq);
  if ((st = braid_lsa_wait_ranks(p, v, BRAID_LSA_ARRIVE_OFF, 0, n, seq)) != 0) return st;
  for (int r = 0; r < n; r++)
    if (braid_lsa_input(v, r, seq) == NULL) return BRAID_EXEC_BAD_SCHEDULE; /* the same in every thread */
  if (w->lsa_mode == BRAID_LSA_ONESHOT) {
    braid_lsa_ld_reduce(&p->op, w->recvbuff, v, seq, 0, w->count, es);
    braid_lsa_done(v, me, seq);
    return in_place ? braid_lsa_wait_readers(p, v, me, seq) : 0;
  }
  size_t lo, len;
  braid_lsa_chunk(w->count, n, me, es, &lo, &len);
  if (len > 0) braid_lsa_ld_reduce(&p->op, braid_lsa_res(v, me, seq) + lo * es, v, seq, lo, len, es);
  braid_lsa_publish(v, me, BRAID_LSA_RS_OFF, seq);
  for (int r = 0; r < n; r++) {
    if ((st = braid_lsa_wait_ranks(p, v, BRAID_LSA_RS_OFF, r, r + 1, seq)) != 0) return st;
    braid_lsa_chunk(w->count, n, r, es, &lo, &len);
    if (len > 0) braid_lsa_copy(&p->op, (char*)w->recvbuff + lo * es, braid_lsa_res(v, r, seq) + lo * es, len);
  }
  /* No step 6: every peer's rs = seq, waited for above, came after its loads of this input. */
  braid_lsa_done(v, me, seq);
  return 0;
}

#endif /* BRAID_KERNELS_LSA_H */
