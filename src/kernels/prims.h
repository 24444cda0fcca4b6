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
#include "kernels/direct.h"
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

/* Connections one step may touch in each direction: a ring uses one, a tree node up to its
 * parent plus two children, or three children at a node's head (chain + two trees). */
#define BRAID_MAX_FAN 3

/* Everything one channel's primitives need, shared by the threads of a block. */
struct braid_prims {
  struct braid_conn* send[BRAID_MAX_FAN]; /* a sending step sends to all nsend of them */
  struct braid_conn* recv[BRAID_MAX_FAN]; /* a receiving step reduces / takes all nrecv */
  int nsend, nrecv;
  const struct braid_redop* op;
  int proto;
  int esize;                           /* bytes per element */
  const volatile uint32_t* abort_flag; /* non-zero: stop waiting (value = braid_exec_status) */
  volatile int status;                 /* first failure seen by thread 0, read by all */
#if !BRAID_DEVICE_COMPILE
  struct braid_direct* direct; /* host executor: direct sends in flight (direct.h) */
#endif
};

/* Point the primitives at one peer each way (ring, chain, p2p); NULL for none. */
HD void braid_prims_set_peers(struct braid_prims* p, struct braid_conn* send, struct braid_conn* recv) {
  p->send[0] = send;
  p->recv[0] = recv;
  p->nsend = send ? 1 : 0;
  p->nrecv = recv ? 1 : 0;
}

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

/* Spin until *p >= v. Returns 0, or the abort flag's value when it was raised. */
HD int braid_wait_ge(const volatile uint64_t* p, uint64_t v, const volatile uint32_t* abort_flag) {
  uint32_t spins = 0;
  while (simt_ld_acquire_u64(p) < v) {
    simt_spin_pause(&spins);
    if ((spins & 255) == 0 && *abort_flag) return (int)*abort_flag;
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
    simt_spin_pause(&spins);
    if ((spins & 255) == 0 && *abort_flag) return (int)*abort_flag;
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
 * (what a net proxy sends). A proxied FIFO is read by another thread, so tail is released. */
HD void braid_send_publish(struct braid_conn* c, uint64_t bytes, int proto) {
  c->sizes[c->step % BRAID_NSTEPS] = braid_proto_wire_bytes(proto, bytes);
  if (proto == BRAID_PROTO_SIMPLE || c->wait_tail) {
    simt_fence_release();
    simt_st_release_u64(c->tail, c->step + 1);
  } else {
    simt_st_volatile_u64(c->tail, c->step + 1);
  }
  c->step++;
  braid_conn_kick(c);
}

/* Release one consumed step on the receive side. */
HD void braid_recv_release(struct braid_conn* c) {
  simt_st_release_u64(c->head, c->step + 1);
  c->step++;
  braid_conn_kick(c);
}

/* ---- LL: 8 payload bytes per 16-byte line ---------------------------------------------- */

/* Store `bytes` (<= 8) from src as one line with flag. Short tails are zero-padded. */
HD void braid_ll_store(volatile uint64_t* line, const char* src, int bytes, uint32_t flag) {
  uint32_t w[2] = {0, 0};
  char* d = (char*)w;
  for (int i = 0; i < bytes; i++) d[i] = src[i];
  simt_st_volatile_u64x2(line, (uint64_t)w[0] | ((uint64_t)flag << 32), (uint64_t)w[1] | ((uint64_t)flag << 32));
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
 * The data movement of one step once the slots are known. Sources: my input (pre-op applied)
 * if the primitive reads it, then every received buffer; destinations: my output if the
 * primitive writes it, then every send buffer. The sources are reduced into the first
 * destination (the post-op with the last of them), the result copied to the others.
 * `rbuf`/`sbuf` hold contiguous payload: Simple slots, or a line's staging for LL/LL128.
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
  /* The post-op applies once, where the value becomes final: a step that reads my input and
   * writes my output. A partial sum on its way (SEND, RECV_REDUCE_SEND) must not get it, and a
   * value merely relayed is final already. */
  int do_post = post && reads_in && braid_prim_writes_output(prim);
  if (nsrc == 1) {
    BRAID_REDUCE_COPY(p->op, dst[0], ndst > 1 ? dst[1] : 0, src[0], reads_in, 0, 0, do_post, nelem);
  } else {
    for (int k = 1; k < nsrc; k++) {
      int last = k == nsrc - 1;
      BRAID_REDUCE_COPY(p->op, dst[0], last && ndst > 1 ? dst[1] : 0, k == 1 ? src[0] : dst[0], k == 1 && reads_in,
                        src[k], 0, last && do_post, nelem);
      simt_bar_sync(); /* the next pass reads dst[0] elements other threads wrote */
    }
  }
  for (int d = 2; d < ndst; d++) BRAID_REDUCE_COPY(p->op, dst[d], 0, dst[0], 0, 0, 0, 0, nelem);
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

/* The same for one thread's share of a line (LL/LL128): `bytes` (whole elements, <= 120) of
 * each source, processed 8 bytes at a time in registers, no striding over threads. rbuf[i]
 * and sbuf[i] are that line's staging, one per connection. */
HD void braid_prim_compute_serial(const struct braid_prims* p, int prim, const char* in, char* out,
                                  const char* const* rbuf, char* const* sbuf, int bytes, int post) {
  int reads_in = braid_prim_reads_input(prim), writes_out = braid_prim_writes_output(prim);
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
  int do_post = post && reads_in && writes_out; /* as in braid_prim_compute */
  for (int off = 0; off < bytes; off += 8) {
    int k = bytes - off < 8 ? bytes - off : 8;
    uint64_t acc;
    int first = 0;
    if (reads_in) {
      acc = braid_load_word(in + off, k);
    } else {
      acc = braid_load_word(rbuf[0] + off, k);
      first = 1;
    }
    if (first == nr) {
      acc = BRAID_REDUCE_PACK64(p->op, acc, reads_in, 0, 0, do_post);
    } else {
      for (int i = first; i < nr; i++) {
        uint64_t b = braid_load_word(rbuf[i] + off, k);
        acc = BRAID_REDUCE_PACK64(p->op, acc, reads_in && i == first, &b, 0, do_post && i == nr - 1);
      }
    }
    if (writes_out) braid_store_word(out + off, acc, k);
    for (int i = 0; i < ns; i++) braid_store_word(sbuf[i] + off, acc, k);
  }
}

/* Wait until every receive has data (tail) and every send has room (credit). Thread 0 waits,
 * everyone learns the outcome. `need_tail`: also wait for the tail of line protocols
 * (connections whose lines arrive through a proxy set conn->wait_tail). */
HD int braid_prims_wait(struct braid_prims* p, int nr, int ns, int simple) {
  if (simt_tid() == 0) {
    int st = 0;
    for (int i = 0; i < nr && st == 0; i++) {
#if !BRAID_DEVICE_COMPILE
      /* a step not declared to land in user memory lands in its slot (direct.h) */
      if (p->recv[i]->rdirect && !braid_recv_declared(p->recv[i])) braid_recv_declare(NULL, p->recv[i], NULL, 0);
#endif
      if (simple || p->recv[i]->wait_tail)
        st = braid_wait_conn(p->recv[i], p->recv[i]->tail, p->recv[i]->step + 1, p->abort_flag);
    }
    for (int i = 0; i < ns && st == 0; i++) st = braid_wait_credit(p->send[i], p->abort_flag);
    p->status = st;
  }
  simt_bar_sync();
  return p->status;
}

/* Publish sends and release receives of one step (thread 0), then let everyone go on. */
HD void braid_prims_finish(struct braid_prims* p, int nr, int ns, uint64_t bytes, int proto) {
  simt_bar_sync();
  if (simt_tid() == 0) {
    for (int i = 0; i < ns; i++) braid_send_publish(p->send[i], bytes, proto);
    for (int i = 0; i < nr; i++) braid_recv_release(p->recv[i]);
  }
  simt_bar_sync();
}

#if !BRAID_DEVICE_COMPILE
/* Host executor, Simple: how a step uses direct connections (kernels/direct.h). *src_p: where
 * it sends from (NULL: copy into the send slots as usual); *rdst_p: its receive lands in my
 * output (declared here, or earlier by a p2p receive polling for readiness); *scratch_p: a
 * RECV_REDUCE_SEND writing its partial result into my output chunk. Waits first for direct
 * sends still reading what the step writes. */
static inline int braid_prim_direct_plan(struct braid_prims* p, int prim, const char* in, char* out, int nr, int ns,
                                         size_t bytes, const char** src_p, char** rdst_p, int* scratch_p) {
  struct braid_direct* d = p->direct;
  int direct = d != NULL && ns > 0 && bytes >= BRAID_DIRECT_MIN_BYTES, writes_out = braid_prim_writes_output(prim);
  *src_p = 0;
  *rdst_p = 0;
  *scratch_p = 0;
  for (int i = 0; i < ns && direct; i++) direct = p->send[i]->direct;
  if (direct && writes_out && out) {
    *src_p = out;
  } else if (direct && prim == BRAID_PRIM_SEND && p->op->kind != BRAID_RED_PREMULSUM) {
    *src_p = in;
  } else if (direct && prim == BRAID_PRIM_RECV_REDUCE_SEND && d->scratch_out && out) {
    *src_p = out;
    *scratch_p = 1;
  }
  if (nr == 1 && p->recv[0]->rdirect) {
    struct braid_conn* c = p->recv[0];
    if (braid_recv_declared(c)) {
      *rdst_p = braid_recv_declared_dst(c);
    } else if (d != NULL && (prim == BRAID_PRIM_RECV || prim == BRAID_PRIM_RECV_COPY_SEND) && out &&
               bytes >= BRAID_DIRECT_MIN_BYTES) {
      int st = braid_direct_before_write(d, out, bytes, p->abort_flag);
      if (st) return st;
      braid_recv_declare(d, c, out, bytes);
      *rdst_p = braid_recv_declared_dst(c);
      if (*rdst_p) return 0;
    }
  }
  if ((writes_out || *scratch_p) && !*rdst_p) return braid_direct_before_write(d, out, bytes, p->abort_flag);
  return 0;
}

/* The step itself: the received payload is in my output already (rdst) or gets computed
 * there (nothing for a plain SEND); the sends go from `src` (publish the address, remember
 * the sends until they complete) or, without one, from a copy in their slots. */
static inline int braid_prim_simple_direct(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem,
                                           int post, const char* src, const char* rdst, int scratch) {
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
  size_t bytes = nelem * p->esize;
  if (braid_prims_wait(p, nr, ns, 1)) return p->status;
  simt_fence_acquire();
  if (rdst != NULL) {
    for (int i = 0; i < ns && src == NULL; i++) /* a relay to a connection that copies */
      BRAID_REDUCE_COPY(p->op, braid_slot(p->send[i], BRAID_PROTO_SIMPLE), 0, rdst, 0, 0, 0, 0, nelem);
  } else if (braid_prim_writes_output(prim) || scratch) { /* else a SEND from my input */
    const char* rbuf[BRAID_MAX_FAN] = {0, 0, 0};
    char* sbuf[BRAID_MAX_FAN] = {out, 0, 0};
    struct braid_prims q = *p;
    for (int i = 0; i < nr; i++) rbuf[i] = braid_slot(p->recv[i], BRAID_PROTO_SIMPLE);
    q.nsend = scratch; /* a partial result goes to `out` as if it were the send slot: no post-op */
    braid_prim_compute(&q, prim, in, out, rbuf, sbuf, nelem, post);
  }
  if (src != NULL)
    for (int i = 0; i < ns; i++) p->send[i]->ptrs[p->send[i]->step % BRAID_NSTEPS] = (uint64_t)(uintptr_t)src;
  braid_prims_finish(p, nr, ns, bytes, BRAID_PROTO_SIMPLE);
  if (src != NULL)
    for (int i = 0; i < ns; i++)
      if (braid_direct_track(p->direct, p->send[i], src, bytes, p->abort_flag)) return (int)*p->abort_flag;
  return 0;
}

/* A p2p receive about to poll connection c for its next step (of `bytes` into `dst`): declare
 * where it lands, user memory unless a send in flight still reads it (waiting there, among
 * other ops polled for readiness, could wait on a peer that waits on us). */
static inline void braid_p2p_recv_declare(struct braid_prims* p, struct braid_conn* c, char* dst, size_t bytes) {
  if (!c->rdirect || braid_recv_declared(c)) return;
  if (p->direct == NULL || p->proto != BRAID_PROTO_SIMPLE || bytes < BRAID_DIRECT_MIN_BYTES ||
      braid_direct_overlaps(p->direct, dst, bytes))
    dst = NULL;
  braid_recv_declare(p->direct, c, dst, bytes);
}
#endif

/* Simple protocol: one slot per step. */
HD int braid_prim_simple(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
#if !BRAID_DEVICE_COMPILE
  {
    const char* src;
    char* rdst;
    int scratch, st = braid_prim_direct_plan(p, prim, in, out, nr, ns, nelem * p->esize, &src, &rdst, &scratch);
    if (st) return st;
    if (src != 0 || rdst != 0) return braid_prim_simple_direct(p, prim, in, out, nelem, post, src, rdst, scratch);
  }
#endif
  if (braid_prims_wait(p, nr, ns, 1)) return p->status;
  simt_fence_acquire();
  const char* rbuf[BRAID_MAX_FAN] = {0, 0, 0};
  char* sbuf[BRAID_MAX_FAN] = {0, 0, 0};
  for (int i = 0; i < nr; i++) rbuf[i] = braid_slot(p->recv[i], BRAID_PROTO_SIMPLE);
  for (int i = 0; i < ns; i++) sbuf[i] = braid_slot(p->send[i], BRAID_PROTO_SIMPLE);
  braid_prim_compute(p, prim, in, out, rbuf, sbuf, nelem, post);
  braid_prims_finish(p, nr, ns, nelem * p->esize, BRAID_PROTO_SIMPLE);
  return 0;
}

/*
 * LL and LL128: the payload travels in lines that carry their own flag. Each thread takes
 * whole lines (stride nthreads), stages one line's payload in registers, reduces it with the
 * matching bytes of the input, and stores the outgoing line.
 */
HD int braid_prim_lines(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  int proto = p->proto, ll = proto == BRAID_PROTO_LL;
  int nr = braid_prim_recvs(prim) ? p->nrecv : 0, ns = braid_prim_sends(prim) ? p->nsend : 0;
  int payload = ll ? BRAID_LL_PAYLOAD : BRAID_LL128_PAYLOAD;
  int line_words = ll ? 2 : BRAID_LL128_WORDS;
  if (braid_prims_wait(p, nr, ns, 0)) return p->status;
  size_t bytes = nelem * p->esize;
  size_t nlines = (bytes + payload - 1) / payload;
  volatile uint64_t* rlines[BRAID_MAX_FAN] = {0, 0, 0};
  volatile uint64_t* slines[BRAID_MAX_FAN] = {0, 0, 0};
  uint64_t rflag[BRAID_MAX_FAN] = {0, 0, 0}, sflag[BRAID_MAX_FAN] = {0, 0, 0};
  for (int i = 0; i < nr; i++) {
    rlines[i] = (volatile uint64_t*)braid_slot(p->recv[i], proto);
    rflag[i] = p->recv[i]->step + 1;
  }
  for (int i = 0; i < ns; i++) {
    slines[i] = (volatile uint64_t*)braid_slot(p->send[i], proto);
    sflag[i] = p->send[i]->step + 1;
  }
  int st = 0;
  for (size_t line = simt_tid(); line < nlines && st == 0; line += simt_nthreads()) {
    uint64_t rl[BRAID_MAX_FAN][BRAID_LL128_WORDS - 1], sl[BRAID_MAX_FAN][BRAID_LL128_WORDS - 1];
    const char* rbuf[BRAID_MAX_FAN] = {0, 0, 0};
    char* sbuf[BRAID_MAX_FAN] = {0, 0, 0};
    size_t off = line * payload;
    int n = (int)(bytes - off < (size_t)payload ? bytes - off : (size_t)payload);
    for (int i = 0; i < nr && st == 0; i++) {
      volatile uint64_t* l = rlines[i] + line * line_words;
      st = ll ? braid_ll_load(l, (char*)rl[i], n, (uint32_t)rflag[i], p->abort_flag)
              : braid_ll128_load(l, (char*)rl[i], n, rflag[i], p->abort_flag);
      rbuf[i] = (const char*)rl[i];
    }
    if (st) break;
    for (int i = 0; i < ns; i++) sbuf[i] = (char*)sl[i];
    braid_prim_compute_serial(p, prim, in ? in + off : 0, out ? out + off : 0, rbuf, sbuf, n, post);
    for (int i = 0; i < ns; i++) {
      volatile uint64_t* l = slines[i] + line * line_words;
      if (ll)
        braid_ll_store(l, (const char*)sl[i], n, (uint32_t)sflag[i]);
      else
        braid_ll128_store(l, (const char*)sl[i], n, sflag[i]);
    }
  }
  if (st) p->status = st; /* any thread's failure stops the block */
  simt_bar_sync();
  if (p->status) return p->status;
  braid_prims_finish(p, nr, ns, bytes, proto);
  return 0;
}

/* One step of a primitive over at most one slot of payload. Returns 0 or an exec status. */
HD int braid_prim_step(struct braid_prims* p, int prim, const char* in, char* out, size_t nelem, int post) {
  if (prim == BRAID_PRIM_LOCAL_COPY) {
    braid_prim_compute(p, prim, in, out, 0, 0, nelem, post);
    simt_bar_sync();
    return 0;
  }
  if (p->proto == BRAID_PROTO_SIMPLE) return braid_prim_simple(p, prim, in, out, nelem, post);
  return braid_prim_lines(p, prim, in, out, nelem, post);
}

#endif /* BRAID_PRIMS_H */
