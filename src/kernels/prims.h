/*
 * prims.h - the primitives over connections, for the three protocols (DESIGN.md section 4).
 * Shared subset: compiled by gcc into the host executor and by nvcc into the kernels.
 *
 * One call of braid_prim_step() moves one chunk (at most one FIFO slot of payload) through one
 * primitive: receive from the recv connection, reduce with this rank's input, keep a copy in
 * the output, forward on the send connection — whichever of these the primitive names
 * (enum braid_prim in algo/sched.h). Each step advances the step counter of every connection
 * it touches by exactly one, so two ends running the same schedule stay in lock-step.
 *
 * Simple: wait for a free slot (tail - head < NSTEPS), fill it, release-store tail; the
 *         receiver waits for tail, consumes, release-stores head. One fence per slot.
 * LL:     16-byte lines {lo, flag, hi, flag}; the flag is the step number + 1, so the reader
 *         needs no tail and no fence: it spins until both flags of a line match.
 * LL128:  128-byte lines, 15 payload words and a flag word stored last with release
 *         semantics (host: ordered stores; device: st.release after the payload).
 * LL and LL128 still honour head for flow control, and the sender still bumps tail (a relaxed
 * store) so a later Simple step on the same connection sees consistent counters.
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
#define BRAID_REDUCE_COPY braid_reduce_copy
#define BRAID_REDUCE_PACK64 braid_reduce_pack64
#endif

/* Everything one channel's primitives need, shared by the threads of a block. */
struct braid_prims {
  struct braid_conn* send;             /* NULL: the schedule never sends */
  struct braid_conn* recv;             /* NULL: the schedule never receives */
  const struct braid_redop* op;
  int proto;
  int esize;                           /* bytes per element */
  const volatile uint32_t* abort_flag; /* non-zero: stop waiting (value = braid_exec_status) */
  volatile int status;                 /* first failure seen by thread 0, read by all */
};

/* Payload bytes one slot of a protocol carries. */
HD uint32_t braid_proto_payload(int proto, uint32_t slot_bytes) {
  if (proto == BRAID_PROTO_LL) return slot_bytes / BRAID_LL_LINE_BYTES * BRAID_LL_PAYLOAD;
  if (proto == BRAID_PROTO_LL128) return slot_bytes / BRAID_LL128_LINE_BYTES * BRAID_LL128_PAYLOAD;
  return slot_bytes;
}

/* Spin until *p >= v. Returns 0, or the abort flag's value when it was raised. */
HD int braid_wait_ge(const volatile uint64_t* p, uint64_t v, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(p) < v) {
    simt_spin_pause(&spins);
    if ((spins & 255) == 0 && *abort_flag) return (int)*abort_flag;
  }
  return 0;
}

/* Sender: wait until the slot for this step is free (the receiver consumed step - NSTEPS). */
HD int braid_wait_credit(struct braid_conn* c, const volatile uint32_t* abort_flag) {
  if (c->step < BRAID_NSTEPS) return 0;
  return braid_wait_ge(c->head, c->step + 1 - BRAID_NSTEPS, abort_flag);
}

HD char* braid_slot(const struct braid_conn* c, int proto) {
  return c->buff[proto] + (size_t)(c->step % BRAID_NSTEPS) * c->slot_bytes[proto];
}

/* Publish one step on the send side. */
HD void braid_send_publish(struct braid_conn* c, uint64_t bytes, int proto) {
  c->sizes[c->step % BRAID_NSTEPS] = bytes;
  if (proto == BRAID_PROTO_SIMPLE) {
    simt_fence_release();
    simt_st_release_u64(c->tail, c->step + 1);
  } else {
    simt_st_volatile_u64(c->tail, c->step + 1);
  }
  c->step++;
}

/* Release one consumed step on the receive side. */
HD void braid_recv_release(struct braid_conn* c) {
  simt_st_release_u64(c->head, c->step + 1);
  c->step++;
}

/* ---- LL: 8 payload bytes per 16-byte line ---------------------------------------------- */

/* Store `bytes` (<= 8) from src as one line with flag. Short tails are zero-padded. */
HD void braid_ll_store(volatile uint64_t* line, const char* src, int bytes, uint32_t flag) {
  uint32_t w[2] = {0, 0};
  char* d = (char*)w;
  for (int i = 0; i < bytes; i++) d[i] = src[i];
  simt_st_volatile_u64x2(line, (uint64_t)w[0] | ((uint64_t)flag << 32),
                         (uint64_t)w[1] | ((uint64_t)flag << 32));
}

/* Wait for a line carrying `flag` and copy its payload (<= 8 bytes) to dst. */
HD int braid_ll_load(const volatile uint64_t* line, char* dst, int bytes, uint32_t flag,
                     const volatile uint32_t* abort_flag) {
  uint64_t lo, hi;
  uint32_t spins = 0;
  for (;;) {
    simt_ld_volatile_u64x2(line, &lo, &hi);
    if ((uint32_t)(lo >> 32) == flag && (uint32_t)(hi >> 32) == flag) break;
    simt_spin_pause(&spins);
    if ((spins & 255) == 0 && *abort_flag) return (int)*abort_flag;
  }
  uint32_t w[2] = {(uint32_t)lo, (uint32_t)hi};
  const char* s = (const char*)w;
  for (int i = 0; i < bytes; i++) dst[i] = s[i];
  return 0;
}

/* ---- LL128: 120 payload bytes per 128-byte line ------------------------------------------ */

HD void braid_ll128_store(volatile uint64_t* line, const char* src, int bytes, uint64_t flag) {
  uint64_t w[BRAID_LL128_WORDS - 1];
  char* d = (char*)w;
  int i = 0;
  for (; i < bytes; i++) d[i] = src[i];
  for (; i < BRAID_LL128_PAYLOAD; i++) d[i] = 0;
  for (int k = 0; k < BRAID_LL128_WORDS - 1; k++) simt_st_volatile_u64(line + k, w[k]);
  simt_st_release_u64(line + BRAID_LL128_WORDS - 1, flag);
}

HD int braid_ll128_load(const volatile uint64_t* line, char* dst, int bytes, uint64_t flag,
                        const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(line + BRAID_LL128_WORDS - 1) != flag) {
    simt_spin_pause(&spins);
    if ((spins & 255) == 0 && *abort_flag) return (int)*abort_flag;
  }
  uint64_t w[BRAID_LL128_WORDS - 1];
  for (int k = 0; k < BRAID_LL128_WORDS - 1; k++) w[k] = simt_ld_volatile_u64(line + k);
  const char* s = (const char*)w;
  for (int i = 0; i < bytes; i++) dst[i] = s[i];
  return 0;
}

/*
 * The data movement of one step once the slots are known: dst0/dst1 <- post(op(pre(in), recv)).
 * `rbuf`/`sbuf` are contiguous payload (Simple slot, or a line's staging for LL/LL128).
 */
HD void braid_prim_compute(const struct braid_prims* p, int prim, const char* in, char* out,
                           const char* rbuf, char* sbuf, size_t nelem, int post) {
  const void* src0;
  const void* src1 = 0;
  int pre0 = 0;
  void* dst0;
  void* dst1 = 0;
  int reads_in = braid_prim_reads_input(prim);
  int recvs = braid_prim_recvs(prim);
  if (reads_in) {
    src0 = in;
    pre0 = 1;
    if (recvs) src1 = rbuf;
  } else {
    src0 = rbuf;
  }
  if (braid_prim_writes_output(prim)) {
    dst0 = out;
    if (braid_prim_sends(prim)) dst1 = sbuf;
  } else {
    dst0 = sbuf;
  }
  /* The post-op applies where the value becomes final; a value merely relayed is final already. */
  int do_post = post && reads_in;
  BRAID_REDUCE_COPY(p->op, dst0, dst1, src0, pre0, src1, 0, do_post, nelem);
}

/* Copy `n` (<= 8) bytes; the rest of an 8-byte word stays zero. */
HD uint64_t braid_load_word(const char* p, int n) {
  uint64_t w = 0;
  char* d = (char*)&w;
  for (int i = 0; i < n; i++) d[i] = p[i];
  return w;
}
HD void braid_store_word(char* p, uint64_t w, int n) {
  const char* s = (const char*)&w;
  for (int i = 0; i < n; i++) p[i] = s[i];
}

/* The same for one thread's share of a line (LL/LL128): `bytes` (whole elements, <= 120)
 * processed 8 bytes at a time in registers, no striding over threads. */
HD void braid_prim_compute_serial(const struct braid_prims* p, int prim, const char* in, char* out,
                                  const char* rbuf, char* sbuf, int bytes, int post) {
  int reads_in = braid_prim_reads_input(prim), recvs = braid_prim_recvs(prim);
  int writes_out = braid_prim_writes_output(prim), sends = braid_prim_sends(prim);
  for (int off = 0; off < bytes; off += 8) {
    int k = bytes - off < 8 ? bytes - off : 8;
    uint64_t a = braid_load_word(reads_in ? in + off : rbuf + off, k);
    uint64_t b = reads_in && recvs ? braid_load_word(rbuf + off, k) : 0;
    uint64_t r = BRAID_REDUCE_PACK64(p->op, a, reads_in, reads_in && recvs ? &b : 0, 0, post && reads_in);
    if (writes_out) braid_store_word(out + off, r, k);
    if (sends) braid_store_word(sbuf + off, r, k);
  }
}

/* Simple protocol: one slot per step. */
HD int braid_prim_simple(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem,
                         int post) {
  int recvs = braid_prim_recvs(prim), sends = braid_prim_sends(prim);
  if (simt_tid() == 0) {
    int st = 0;
    if (recvs) st = braid_wait_ge(p->recv->tail, p->recv->step + 1, p->abort_flag);
    if (st == 0 && sends) st = braid_wait_credit(p->send, p->abort_flag);
    p->status = st;
  }
  simt_bar_sync();
  if (p->status) return p->status;
  simt_fence_acquire();
  const char* rbuf = recvs ? braid_slot(p->recv, BRAID_PROTO_SIMPLE) : 0;
  char* sbuf = sends ? braid_slot(p->send, BRAID_PROTO_SIMPLE) : 0;
  braid_prim_compute(p, prim, in, out, rbuf, sbuf, nelem, post);
  simt_bar_sync();
  if (simt_tid() == 0) {
    if (sends) braid_send_publish(p->send, nelem * p->esize, BRAID_PROTO_SIMPLE);
    if (recvs) braid_recv_release(p->recv);
  }
  simt_bar_sync();
  return 0;
}

/*
 * LL and LL128: the payload travels in lines that carry their own flag. Each thread takes
 * whole lines (stride nthreads), stages one line's payload in registers, reduces it with the
 * matching bytes of the input, and stores the outgoing line.
 */
HD int braid_prim_lines(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem,
                        int post) {
  int proto = p->proto;
  int recvs = braid_prim_recvs(prim), sends = braid_prim_sends(prim);
  int ll = proto == BRAID_PROTO_LL;
  int payload = ll ? BRAID_LL_PAYLOAD : BRAID_LL128_PAYLOAD;
  int line_words = ll ? 2 : BRAID_LL128_WORDS;
  if (simt_tid() == 0) p->status = sends ? braid_wait_credit(p->send, p->abort_flag) : 0;
  simt_bar_sync();
  if (p->status) return p->status;
  size_t bytes = nelem * p->esize;
  size_t nlines = (bytes + payload - 1) / payload;
  volatile uint64_t* rlines = recvs ? (volatile uint64_t*)braid_slot(p->recv, proto) : 0;
  volatile uint64_t* slines = sends ? (volatile uint64_t*)braid_slot(p->send, proto) : 0;
  uint64_t rflag = recvs ? p->recv->step + 1 : 0, sflag = sends ? p->send->step + 1 : 0;
  int st = 0;
  for (size_t i = simt_tid(); i < nlines && st == 0; i += simt_nthreads()) {
    uint64_t rl[BRAID_LL128_WORDS - 1], sl[BRAID_LL128_WORDS - 1];
    size_t off = i * payload;
    int n = (int)(bytes - off < (size_t)payload ? bytes - off : (size_t)payload);
    if (recvs) {
      st = ll ? braid_ll_load(rlines + i * line_words, (char*)rl, n, (uint32_t)rflag, p->abort_flag)
              : braid_ll128_load(rlines + i * line_words, (char*)rl, n, rflag, p->abort_flag);
      if (st) break;
    }
    braid_prim_compute_serial(p, prim, in ? in + off : 0, out ? out + off : 0, (const char*)rl,
                              (char*)sl, n, post);
    if (sends) {
      if (ll)
        braid_ll_store(slines + i * line_words, (const char*)sl, n, (uint32_t)sflag);
      else
        braid_ll128_store(slines + i * line_words, (const char*)sl, n, sflag);
    }
  }
  if (st) p->status = st; /* any thread's failure stops the block */
  simt_bar_sync();
  if (p->status) return p->status;
  if (simt_tid() == 0) {
    if (sends) braid_send_publish(p->send, bytes, proto);
    if (recvs) braid_recv_release(p->recv);
  }
  simt_bar_sync();
  return 0;
}

/* One step of a primitive over at most one slot of payload. Returns 0 or an exec status. */
HD int braid_prim_step(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem,
                       int post) {
  if (prim == BRAID_PRIM_LOCAL_COPY) {
    braid_prim_compute(p, prim, in, out, 0, 0, nelem, post);
    simt_bar_sync();
    return 0;
  }
  if (p->proto == BRAID_PROTO_SIMPLE) return braid_prim_simple(p, prim, in, out, nelem, post);
  return braid_prim_lines(p, prim, in, out, nelem, post);
}

#endif /* BRAID_PRIMS_H */
