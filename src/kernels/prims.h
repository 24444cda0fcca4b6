/*
 * prims.h - the primitives over connections, for the three protocols (docs/ARCHITECTURE.md 4).
 * Shared subset: compiled by gcc into the host executor and by nvcc into the kernels.
 *
 * One primitive step moves one chunk (at most one FIFO slot of payload) through one primitive:
 * receive from the recv connections, reduce with this rank's input, keep a copy in the output,
 * forward on the send connections, whichever of these the primitive names (enum braid_prim in
 * algo/sched.h). Each step advances the step counter of every connection it touches by exactly
 * one, so two ends running the same schedule stay in lock-step. coll.h dispatches a step to
 * the protocol here, or to the host-only variant of direct.h when a connection of the step
 * takes user pointers.
 *
 * Simple: thread 0 waits for a free slot (tail - head < NSTEPS) and for data, the block
 *         agrees on the outcome (one vote), everyone moves 16-byte packs, a barrier, then
 *         thread 0 release-stores tail (and head on the receive side).
 * LL:     16-byte lines {lo, flag, hi, flag}; the flag is the step number + 1, so the reader
 *         needs no tail and no fence: a thread per line spins until both flags match.
 * LL128:  128-byte lines, 15 payload words and a flag word. On the device 8 lanes of a warp
 *         share a line, 16 bytes each; the lane holding the flag waits for it (acquire), the
 *         lanes load after a warp barrier; a sender's lanes store their chunks, a warp barrier,
 *         then the flag lane release-stores the flag. One host thread is all 8 lanes.
 * LL and LL128 still honour head for flow control, and the sender still bumps tail so a later
 * Simple step on the same connection sees consistent counters.
 *
 * Threads of a block (device) share `struct braid_prims`. Rules that keep it race-free:
 *   - only thread 0 writes its fields after the work item starts (connections of a step,
 *     counters), and the other threads read them only between the step's first barrier (the
 *     wait vote) and its publishing barrier;
 *   - `status` is sticky: threads write only failures into it, before a vote that tells every
 *     thread that some thread failed; it is read only after such a vote;
 *   - every barrier is reached by every thread: decisions that change the control flow are
 *     votes (simt_bar_or / simt_warp_any), never a shared variable read at different times.
 */
#ifndef BRAID_PRIMS_H
#define BRAID_PRIMS_H

#include "algo/sched.h"
#include "kernels/reduce.h"
#include "kernels/simt.h"
#include "kernels/work.h"

/* A kernel built for one datatype (src/kernels/coll_<dtype>.cu) names its reduction routines,
 * so it instantiates one datatype's loops instead of all twelve. */
#ifdef BRAID_KERNEL_DTYPE
#define BRAID_CAT3_(a, b, c) a##b##c
#define BRAID_CAT3(a, b, c) BRAID_CAT3_(a, b, c)
#define BRAID_REDUCE_COPY BRAID_CAT3(braid_reduce_copy_, BRAID_KERNEL_DTYPE, )
#define BRAID_REDUCE_PACK64 BRAID_CAT3(braid_reduce_pack64_, BRAID_KERNEL_DTYPE, )
#else
#ifndef BRAID_REDUCE_COPY /* the host executor calls its run-time choice (reduce_isa.h) */
#define BRAID_REDUCE_COPY braid_reduce_copy
#endif
#define BRAID_REDUCE_PACK64 braid_reduce_pack64
#endif

/* Connections one step may touch in each direction: a ring uses one, a tree node up to its
 * parent plus two children, or three children at a node's head (chain + two trees). */
#define BRAID_MAX_FAN 3

struct braid_direct; /* host executor (direct.h) */

/* Everything one channel's primitives need, shared by the threads of a block. */
struct braid_prims {
  struct braid_conn* send[BRAID_MAX_FAN]; /* a sending step sends to all nsend of them */
  struct braid_conn* recv[BRAID_MAX_FAN]; /* a receiving step reduces / takes all nrecv */
  int nsend, nrecv;
  struct braid_redop op; /* the work item's operator (a device-resident scalar already read) */
  int proto;
  int esize;                           /* bytes per element */
  const volatile uint32_t* abort_flag; /* non-zero: stop waiting (value = braid_exec_status) */
  volatile int status;                 /* sticky first failure (see the rules above) */
  /* Scratch for the ops of one p2p round (device: shared memory, so the polling loop does not
   * re-read them across PCIe), ops_cap of them; NULL: the ops are used where they are. */
  struct braid_p2p_op* ops;
  int ops_cap;
  /* Host executor only: the connections of the current step take user pointers (direct.h
   * chooses the primitive variant), and that variant's sends in flight. 0 / NULL on the device. */
  int variant;
  struct braid_direct* direct;
#if !BRAID_DEVICE_COMPILE
  /* Host executor: local copies (sends to self) made while p2p ops wait on peers (coll.h
   * braid_idle_copy_step), NULL for none. Absent on the device: its layout is unchanged. */
  struct braid_idle_copies* idle;
#endif
};

/* Payload bytes one slot of a protocol carries. */
HD uint32_t braid_proto_payload(int proto, uint32_t slot_bytes) {
  if (proto == BRAID_PROTO_LL) return slot_bytes / BRAID_LL_LINE_BYTES * BRAID_LL_PAYLOAD;
  if (proto == BRAID_PROTO_LL128) return slot_bytes / BRAID_LL128_LINE_BYTES * BRAID_LL128_PAYLOAD;
  return slot_bytes;
}

/* Host executor: let the proxy of a proxied connection (work.h) move it now; the net
 * transport does the moving in this thread when nobody else is, else wakes its thread. */
HD void braid_conn_kick(struct braid_conn* c) {
#if !BRAID_DEVICE_COMPILE
  if (c->host_kick) c->host_kick(c);
#endif
}

/* One poll of a wait loop: pause, and every 256 polls the abort flag's value (0 otherwise). */
HD int braid_spin_check(uint32_t* spins, const volatile uint32_t* abort_flag) {
  simt_spin_pause(spins);
  return (*spins & 255) == 0 ? (int)*abort_flag : 0;
}

/* Spin until *p >= v. Returns 0, or the abort flag's value when it was raised. */
HD int braid_wait_ge(const volatile uint64_t* p, uint64_t v, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(p) < v) {
    int st = braid_spin_check(&spins, abort_flag);
    if (st) return st;
  }
  return 0;
}

/* The same for a counter of connection c (its tail or head); a proxied connection is kicked
 * while waiting, so on the host the waiting thread moves it itself (no hand-off). */
HD int braid_wait_conn(struct braid_conn* c, const volatile uint64_t* p, uint64_t v,
                       const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(p) < v) {
    braid_conn_kick(c);
    int st = braid_spin_check(&spins, abort_flag);
    if (st) return st;
  }
  return 0;
}

/* Sender: wait until the slot for this step is free (the receiver consumed step - NSTEPS). */
HD int braid_wait_credit(struct braid_conn* c, const volatile uint32_t* abort_flag) {
  if (c->step < BRAID_NSTEPS) return 0;
  return braid_wait_conn(c, c->head, c->step + 1 - BRAID_NSTEPS, abort_flag);
}

HD char* braid_slot(const struct braid_conn* c, int proto) {
  return c->buff[proto] + (size_t)(c->step % BRAID_NSTEPS) * c->slot_bytes[proto];
}

/* Bytes a slot holds for `bytes` of payload: LL and LL128 travel as whole lines. */
HD uint64_t braid_proto_wire_bytes(int proto, uint64_t bytes) {
  if (proto == BRAID_PROTO_LL) return (bytes + BRAID_LL_PAYLOAD - 1) / BRAID_LL_PAYLOAD * BRAID_LL_LINE_BYTES;
  if (proto == BRAID_PROTO_LL128)
    return (bytes + BRAID_LL128_PAYLOAD - 1) / BRAID_LL128_PAYLOAD * BRAID_LL128_LINE_BYTES;
  return bytes;
}

/* Publish one step on the send side: `bytes` of payload; sizes[] gets the bytes the slot holds
 * (what a net proxy sends). Simple and proxied FIFOs release tail: it orders every thread's
 * slot stores before it (they precede the barrier the caller passed, and release is
 * cumulative), so no separate fence is needed. */
HD void braid_send_publish(struct braid_conn* c, uint64_t bytes, int proto) {
  c->sizes[c->step % BRAID_NSTEPS] = braid_proto_wire_bytes(proto, bytes);
  if (proto == BRAID_PROTO_SIMPLE || c->wait_tail)
    simt_st_release_u64(c->tail, c->step + 1);
  else
    simt_st_volatile_u64(c->tail, c->step + 1);
  c->step++;
  braid_conn_kick(c);
}

/* Release one consumed step on the receive side (after every thread's reads of the slot). */
HD void braid_recv_release(struct braid_conn* c) {
  simt_st_release_u64(c->head, c->step + 1);
  c->step++;
  braid_conn_kick(c);
}

/* A failure of this thread (0: none) made known to the block: every thread returns the
 * block's sticky status, or 0 when no thread failed. A barrier: all threads call it. */
HD int braid_prims_vote(struct braid_prims* p, int st) {
  if (st) p->status = st;
  return simt_bar_or(st) ? p->status : 0;
}

/* Connections a step of `prim` receives from / sends on. The other threads read them only
 * after the step's wait vote: thread 0 may set the step's connections right before (coll.h). */
HD int braid_step_nrecv(const struct braid_prims* p, int prim) {
  return braid_prim_recvs(prim) ? p->nrecv : 0;
}
HD int braid_step_nsend(const struct braid_prims* p, int prim) {
  return braid_prim_sends(prim) ? p->nsend : 0;
}

/* Wait until every receive has data (tail) and every send has room (credit). Thread 0 waits,
 * the block votes on the outcome. `simple`: also wait for the tail of line protocols where
 * their lines arrive through a proxy (conn->wait_tail). */
HD int braid_prims_wait(struct braid_prims* p, int prim, int simple) {
  int st = 0;
  if (simt_tid() == 0) {
    int nr = braid_step_nrecv(p, prim), ns = braid_step_nsend(p, prim);
    for (int i = 0; i < nr && st == 0; i++)
      if (simple || p->recv[i]->wait_tail)
        st = braid_wait_conn(p->recv[i], p->recv[i]->tail, p->recv[i]->step + 1, p->abort_flag);
    for (int i = 0; i < ns && st == 0; i++) st = braid_wait_credit(p->send[i], p->abort_flag);
  }
  return braid_prims_vote(p, st);
}

/* Thread 0 publishes the sends and releases the receives of a step. The caller has passed a
 * barrier after the step's last access of a slot. */
HD void braid_prims_publish(struct braid_prims* p, int nr, int ns, uint64_t bytes, int proto) {
  if (simt_tid() != 0) return;
  for (int i = 0; i < ns; i++) braid_send_publish(p->send[i], bytes, proto);
  for (int i = 0; i < nr; i++) braid_recv_release(p->recv[i]);
}

HD void braid_prims_finish(struct braid_prims* p, int nr, int ns, uint64_t bytes, int proto) {
  simt_bar_sync();
  braid_prims_publish(p, nr, ns, bytes, proto);
}

/*
 * The data movement of one step once the slots are known. Sources: my input (pre-op applied)
 * if the primitive reads it, then every received buffer; destinations: my output if the
 * primitive writes it, then every send buffer. The sources are reduced into the first
 * destination (the post-op with the last of them), the result copied to the others.
 */
HD void braid_prim_compute(const struct braid_prims* p, int prim, const char* in, char* out, const char* const* rbuf,
                           char* const* sbuf, size_t nelem, int post) {
  int reads_in = braid_prim_reads_input(prim);
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
  const void* src[BRAID_MAX_FAN + 1] = {0, 0, 0, 0};
  void* dst[BRAID_MAX_FAN + 1] = {0, 0, 0, 0};
  int nsrc = 0, ndst = 0;
  if (reads_in) src[nsrc++] = in;
  for (int i = 0; i < nr; i++) src[nsrc++] = rbuf[i];
  if (braid_prim_writes_output(prim)) dst[ndst++] = out;
  for (int i = 0; i < ns; i++) dst[ndst++] = sbuf[i];
  /* The post-op applies once, where the value becomes final (sched.h braid_prim_finalizes;
   * written out so that device code, which has no FINAL_SEND, is what it was before it). */
  int do_post = post && reads_in && (braid_prim_writes_output(prim) || BRAID_PRIM_IS_FINAL_SEND(prim));
  if (nsrc == 1) {
    BRAID_REDUCE_COPY(&p->op, dst[0], ndst > 1 ? dst[1] : 0, src[0], reads_in, 0, 0, do_post, nelem);
  } else {
    for (int k = 1; k < nsrc; k++) {
      int last = k == nsrc - 1;
      BRAID_REDUCE_COPY(&p->op, dst[0], last && ndst > 1 ? dst[1] : 0, k == 1 ? src[0] : dst[0], k == 1 && reads_in,
                        src[k], 0, last && do_post, nelem);
      /* the next pass reads dst[0] elements another thread may have written (a pass's thread
       * mapping follows its pointers' alignment) */
      if (!last) simt_bar_sync();
    }
  }
  if (ndst > 2) simt_bar_sync(); /* the copies below read dst[0] in their own thread mapping */
  for (int d = 2; d < ndst; d++) BRAID_REDUCE_COPY(&p->op, dst[d], 0, dst[0], 0, 0, 0, 0, nelem);
}

/* Simple protocol: one slot per step. */
HD_STEP int braid_prim_simple(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  int st = braid_prims_wait(p, prim, 1);
  if (st) return st;
  int nr = braid_step_nrecv(p, prim), ns = braid_step_nsend(p, prim);
  /* No fence here: thread 0's acquire of tail and the vote's barrier order every thread's
   * reads of the slot after the sender's writes. */
  const char* rbuf[BRAID_MAX_FAN] = {0, 0, 0};
  char* sbuf[BRAID_MAX_FAN] = {0, 0, 0};
  for (int i = 0; i < nr; i++) rbuf[i] = braid_slot(p->recv[i], BRAID_PROTO_SIMPLE);
  for (int i = 0; i < ns; i++) sbuf[i] = braid_slot(p->send[i], BRAID_PROTO_SIMPLE);
  braid_prim_compute(p, prim, in, out, rbuf, sbuf, nelem, post);
  braid_prims_finish(p, nr, ns, nelem * p->esize, BRAID_PROTO_SIMPLE);
  return 0;
}

/* ---- LL and LL128: words -------------------------------------------------------------------
 * Their payload moves in 8-byte words held in registers. User memory is read and written a
 * word at a time where it is 8-byte aligned, byte by byte at an unaligned pointer or a short
 * tail (the rest of a word is zero). */

HD uint64_t braid_word_load(const char* p, int n, int aligned) {
  if (aligned && n == 8) return *(const uint64_t*)p;
  uint64_t w = 0;
  char* d = (char*)&w;
  for (int i = 0; i < n; i++) d[i] = p[i];
  return w;
}
HD void braid_word_store(char* p, uint64_t w, int n, int aligned) {
  if (aligned && n == 8) {
    *(uint64_t*)p = w;
    return;
  }
  const char* s = (const char*)&w;
  for (int i = 0; i < n; i++) p[i] = s[i];
}

/* One word position of a step: my input word (if read) reduced with the received words,
 * the result to my output (if written) and into `send_w`. `n` valid bytes (<= 8). */
HD uint64_t braid_word_compute(const struct braid_prims* p, int prim, int nr, const char* in, char* out,
                               const uint64_t* recv_w, int n, int aligned, int post) {
  int reads_in = braid_prim_reads_input(prim), writes_out = braid_prim_writes_output(prim);
  int do_post = post && reads_in && (writes_out || BRAID_PRIM_IS_FINAL_SEND(prim)); /* as in braid_prim_compute */
  uint64_t acc;
  int first = 0;
  if (reads_in) {
    acc = braid_word_load(in, n, aligned);
  } else {
    acc = recv_w[0];
    first = 1;
  }
  if (first == nr) { /* a copy: only a pre- or post-op changes the word */
    if (braid_red_copy_changes(&p->op, reads_in, do_post))
      acc = BRAID_REDUCE_PACK64(&p->op, acc, reads_in, 0, 0, do_post);
  } else {
    BRAID_UNROLL for (int i = 0; i < BRAID_MAX_FAN; i++) if (i >= first && i < nr) acc =
        BRAID_REDUCE_PACK64(&p->op, acc, reads_in && i == first, &recv_w[i], 0, do_post && i == nr - 1);
  }
  if (writes_out) braid_word_store(out, acc, n, aligned);
  return acc;
}

/* ---- LL: 8 payload bytes per 16-byte line ---------------------------------------------- */

/* Wait for a line carrying `flag`; its payload word. 0, or the abort flag's value. */
HD int braid_ll_wait(const volatile uint64_t* line, uint32_t flag, const volatile uint32_t* abort_flag,
                     uint64_t* word) {
  uint64_t lo, hi;
  uint32_t spins = 0;
  for (;;) {
    simt_ld_volatile_u64x2(line, &lo, &hi);
    if ((uint32_t)(lo >> 32) == flag && (uint32_t)(hi >> 32) == flag) break;
    int st = braid_spin_check(&spins, abort_flag);
    if (st) return st;
  }
  *word = (lo & 0xffffffffu) | (hi << 32);
  return 0;
}

/* One line per thread per iteration (a warp covers 512 contiguous bytes of a slot). */
HD_STEP int braid_prim_ll(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  int st = braid_prims_wait(p, prim, 0);
  if (st) return st;
  int nr = braid_step_nrecv(p, prim), ns = braid_step_nsend(p, prim);
  size_t bytes = nelem * p->esize, nlines = (bytes + BRAID_LL_PAYLOAD - 1) / BRAID_LL_PAYLOAD;
  volatile uint64_t* rl[BRAID_MAX_FAN] = {0, 0, 0};
  volatile uint64_t* sl[BRAID_MAX_FAN] = {0, 0, 0};
  uint32_t rflag[BRAID_MAX_FAN] = {0, 0, 0}, sflag[BRAID_MAX_FAN] = {0, 0, 0};
  for (int i = 0; i < nr; i++) {
    rl[i] = (volatile uint64_t*)braid_slot(p->recv[i], BRAID_PROTO_LL);
    rflag[i] = (uint32_t)(p->recv[i]->step + 1);
  }
  for (int i = 0; i < ns; i++) {
    sl[i] = (volatile uint64_t*)braid_slot(p->send[i], BRAID_PROTO_LL);
    sflag[i] = (uint32_t)(p->send[i]->step + 1);
  }
  int aligned = (((uintptr_t)in | (uintptr_t)out) & 7) == 0;
  for (size_t line = simt_tid(); line < nlines && st == 0; line += simt_nthreads()) {
    size_t off = line * BRAID_LL_PAYLOAD;
    int n = (int)(bytes - off < BRAID_LL_PAYLOAD ? bytes - off : BRAID_LL_PAYLOAD);
    uint64_t rw[BRAID_MAX_FAN] = {0, 0, 0};
    BRAID_UNROLL for (int i = 0; i < BRAID_MAX_FAN; i++) if (i < nr && st == 0) st =
        braid_ll_wait(rl[i] + 2 * line, rflag[i], p->abort_flag, &rw[i]);
    if (st) break;
    uint64_t w = braid_word_compute(p, prim, nr, in ? in + off : 0, out ? out + off : 0, rw, n, aligned, post);
    if (n < 8) w &= ((uint64_t)1 << (8 * n)) - 1; /* a short tail travels zero-padded */
    BRAID_UNROLL for (int i = 0; i < BRAID_MAX_FAN; i++) if (i < ns) simt_st_volatile_u64x2(
        sl[i] + 2 * line, (w & 0xffffffffu) | ((uint64_t)sflag[i] << 32), (w >> 32) | ((uint64_t)sflag[i] << 32));
  }
  st = braid_prims_vote(p, st); /* also the barrier after every thread's lines */
  if (st) return st;
  braid_prims_publish(p, nr, ns, bytes, BRAID_PROTO_LL);
  return 0;
}

/* ---- LL128: 120 payload bytes per 128-byte line -------------------------------------------
 * A line is 8 chunks of 16 bytes (2 words); chunk 7 holds payload word 14 and the flag (word
 * 15). Lanes: 8 threads of one warp per line on the device, a chunk each; a lone host thread
 * is all 8 lanes of its lines. */
#define BRAID_LL128_CHUNKS 8

HD int braid_ll128_lanes(void) {
#if BRAID_DEVICE_COMPILE
  return BRAID_LL128_CHUNKS; /* blocks have >= 64 threads (launch.c) */
#else
  return simt_nthreads() >= BRAID_LL128_CHUNKS ? BRAID_LL128_CHUNKS : 1;
#endif
}

/* The flag lane: wait for the flag of a line (relaxed polls, then one acquire, which the lanes
 * inherit through the warp barrier that follows). 0, or the abort flag's value. */
HD int braid_ll128_wait_flag(const volatile uint64_t* flag_word, uint64_t flag, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_volatile_u64(flag_word) != flag) {
    int st = braid_spin_check(&spins, abort_flag);
    if (st) return st;
  }
  (void)simt_ld_acquire_u64(flag_word);
  return 0;
}

/* Chunk c of a received line: both words (chunk 7: payload word 14, its second word 0). */
HD void braid_ll128_load_chunk(const volatile uint64_t* line, int c, uint64_t* w) {
  if (c < BRAID_LL128_CHUNKS - 1) {
    simt_ld_volatile_u64x2(line + 2 * c, &w[0], &w[1]);
  } else {
    w[0] = simt_ld_volatile_u64(line + 2 * c);
    w[1] = 0;
  }
}

HD void braid_ll128_store_chunk(volatile uint64_t* line, int c, const uint64_t* w) {
  if (c < BRAID_LL128_CHUNKS - 1)
    simt_st_volatile_u64x2(line + 2 * c, w[0], w[1]);
  else
    simt_st_volatile_u64(line + 2 * c, w[0]);
}

/* Where a step's lines are and what flag they carry. */
struct braid_ll128_fan {
  volatile uint64_t* rl[BRAID_MAX_FAN];
  volatile uint64_t* sl[BRAID_MAX_FAN];
  uint64_t rflag[BRAID_MAX_FAN], sflag[BRAID_MAX_FAN];
};

/* A lane's chunks of one line: receive, compute, store (the flags are the caller's). */
HD void braid_ll128_line(const struct braid_prims* p, int prim, int nr, int ns, const struct braid_ll128_fan* f,
                         size_t line, size_t bytes, const char* in, char* out, int lane, int lanes, int aligned,
                         int post) {
  size_t base = line * BRAID_LL128_PAYLOAD;
  int nline = (int)(bytes - base < BRAID_LL128_PAYLOAD ? bytes - base : BRAID_LL128_PAYLOAD);
  for (int c = lane; c < BRAID_LL128_CHUNKS; c += lanes) {
    /* (loops to BRAID_MAX_FAN with constant indices: the words stay in registers) */
    uint64_t rw[2][BRAID_MAX_FAN] = {{0, 0, 0}, {0, 0, 0}}, sw[2] = {0, 0};
    BRAID_UNROLL for (int i = 0; i < BRAID_MAX_FAN; i++) {
      uint64_t w[2] = {0, 0};
      if (i < nr) braid_ll128_load_chunk(f->rl[i] + line * BRAID_LL128_WORDS, c, w);
      rw[0][i] = w[0];
      rw[1][i] = w[1];
    }
    BRAID_UNROLL for (int k = 0; k < 2; k++) {
      int at = 16 * c + 8 * k, n = nline - at;
      if (n <= 0) continue; /* past the payload (word 15 is the flag: at = 120) */
      if (n > 8) n = 8;
      uint64_t w =
          braid_word_compute(p, prim, nr, in ? in + base + at : 0, out ? out + base + at : 0, rw[k], n, aligned, post);
      sw[k] = n < 8 ? w & (((uint64_t)1 << (8 * n)) - 1) : w;
    }
    BRAID_UNROLL for (int i = 0; i < BRAID_MAX_FAN; i++) if (i < ns)
        braid_ll128_store_chunk(f->sl[i] + line * BRAID_LL128_WORDS, c, sw);
  }
}

HD_STEP int braid_prim_ll128(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  int st = braid_prims_wait(p, prim, 0);
  if (st) return st;
  int nr = braid_step_nrecv(p, prim), ns = braid_step_nsend(p, prim);
  size_t bytes = nelem * p->esize, nlines = (bytes + BRAID_LL128_PAYLOAD - 1) / BRAID_LL128_PAYLOAD;
  struct braid_ll128_fan f;
  for (int i = 0; i < BRAID_MAX_FAN; i++) {
    f.rl[i] = i < nr ? (volatile uint64_t*)braid_slot(p->recv[i], BRAID_PROTO_LL128) : 0;
    f.sl[i] = i < ns ? (volatile uint64_t*)braid_slot(p->send[i], BRAID_PROTO_LL128) : 0;
    f.rflag[i] = i < nr ? p->recv[i]->step + 1 : 0;
    f.sflag[i] = i < ns ? p->send[i]->step + 1 : 0;
  }
  int lanes = braid_ll128_lanes(), lane = simt_tid() % lanes, group = simt_tid() / lanes;
  int ngroups = simt_nthreads() / lanes, flag_lane = lane == lanes - 1;
  int aligned = (((uintptr_t)in | (uintptr_t)out) & 7) == 0;
  size_t rounds = (nlines + ngroups - 1) / ngroups; /* the same for every thread: warp votes line up */
  for (size_t r = 0; r < rounds; r++) {
    size_t line = r * ngroups + group;
    int active = group < ngroups && line < nlines;
    for (int i = 0; i < nr && active && flag_lane && st == 0; i++)
      st = braid_ll128_wait_flag(f.rl[i] + line * BRAID_LL128_WORDS + BRAID_LL128_WORDS - 1, f.rflag[i], p->abort_flag);
    if (simt_warp_any(st != 0)) break; /* the whole warp leaves together */
    simt_warp_sync();                  /* the flag lane's acquire orders its lanes' loads */
    if (active) braid_ll128_line(p, prim, nr, ns, &f, line, bytes, in, out, lane, lanes, aligned, post);
    simt_warp_sync(); /* every lane's chunks before the flag */
    for (int i = 0; i < ns && active && flag_lane; i++)
      simt_st_release_u64(f.sl[i] + line * BRAID_LL128_WORDS + BRAID_LL128_WORDS - 1, f.sflag[i]);
  }
  st = braid_prims_vote(p, st);
  if (st) return st;
  braid_prims_publish(p, nr, ns, bytes, BRAID_PROTO_LL128);
  return 0;
}

#endif /* BRAID_PRIMS_H */
