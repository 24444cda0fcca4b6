/*
 * test_p2p.c - point-to-point correctness through the public API: ncclSend/ncclRecv in
 * groups, AlltoAll, Gather and Scatter (every root), and groups mixing collectives with
 * sends and receives, on ranks run by harness.h, checked against refdata.
 *
 * Send/recv tests are written as "plans": lists of messages {src, dst, count, datatype} that
 * every rank derives from the same generator; each plan runs as one group (each rank issues,
 * in list order, the sends it is the source of and the receives it is the destination of),
 * then every receiver checks its data (bit-exact, message-specific contents), the guards
 * around its buffers, and every sender that its send buffer did not change.
 *
 * TCases (default tier; BRAID_TEST_TIER=full adds ranks and sizes):
 *   ring     shifts by 1..n-1, 2..8 ranks as threads and processes, 3 and 6 as pairs
 *   pairs    every ordered pair alone, then every pair exchanging both ways
 *   sizes    unequal sizes per pair (0 .. 300007 elements), zero-size messages (NULL buffers)
 *   self     send + recv to self in a group, alone and with other peers, several in order,
 *            a large one beside sends to every peer (made while those wait)
 *   fan      one rank to all others, all to one, everyone to everyone with per-pair sizes
 *   order    several messages to the same peer in one group arrive in call order
 *   zero     a group of zero-size messages only (new connections), then ncclCommDestroy
 *   a2a      AlltoAll, Gather and Scatter at every root, 1..8 ranks (threads, processes),
 *            all 12 datatypes at 3 ranks, in-place Gather/Scatter at the root
 *   large    1M+3 elements, and small FIFOs / odd chunk sizes (NCCL_BUFFSIZE,
 *            NCCL_P2P_PCI_CHUNKSIZE)
 *   groups   AlltoAll / Gather / Scatter and plans with p2p rounds taken 1, 2, 3 and all at
 *            a time (BRAID_P2P_ROUND_GROUP), small FIFOs among them; sends to self made before
 *            the call (BRAID_P2P_SELF_COPY=FIRST)
 *   mixed    collectives and sends/receives in one group; one thread driving an
 *            ncclCommInitAll clique
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "nccl.h"
#include "refdata.h"

#define MAX_MSGS 32
#define RANK_TIMEOUT_S 240
#define TCASE_TIMEOUT_S 300
#define MAX_PLAN 4096

/* ---- send/recv plans ---- */

struct msg {
  int src, dst;
  size_t count;
  int dtype;
};

enum plan_kind { P_RING = 0, P_PAIRS, P_SIZES, P_SELF, P_FAN, P_ORDER, P_ZERO, P_NUM };
static const char* const plan_names[P_NUM] = {"ring", "pairs", "sizes", "self", "fan", "order", "zero"};

static const int msg_dtypes[4] = {ncclFloat32, ncclInt8, ncclFloat64, ncclFloat16};
static const size_t ring_counts[] = {1, 7, 1023, 65537, 0};
static const size_t ring_counts_full[] = {1, 7, 1023, 65537, 1048579, 0};

struct plan_case {
  enum plan_kind kind;
  int nranks;
  enum harness_mode mode;
  const char* env;
  int big; /* full tier: larger counts */
};

static void add(struct msg* m, int* nm, int src, int dst, size_t count, int dtype) {
  if (*nm < MAX_PLAN) m[(*nm)++] = (struct msg){src, dst, count, dtype};
}

/* Plan `step` of a kind for n ranks into m; returns its message count, or -1 past the last. */
static int build_plan(const struct plan_case* pc, int n, int step, struct msg* m) {
  int nm = 0;
  switch (pc->kind) {
    case P_RING: { /* shift by k, one count per round of shifts */
      const size_t* counts = pc->big ? ring_counts_full : ring_counts;
      int ncount = 0;
      while (counts[ncount] != 0) ncount++;
      int shifts = n > 1 ? n - 1 : 1;
      if (step >= shifts * ncount) return -1;
      int k = n > 1 ? step % shifts + 1 : 0;
      size_t count = counts[step / shifts];
      for (int r = 0; r < n; r++) add(m, &nm, r, (r + k) % n, count, msg_dtypes[step % 4]);
      return nm;
    }
    case P_PAIRS: { /* each ordered pair alone, then each unordered pair both ways */
      int npairs = n * (n - 1);
      if (step < npairs) {
        int i = step / (n - 1), j = step % (n - 1);
        if (j >= i) j++;
        add(m, &nm, i, j, 1023 + 10 * i + j, msg_dtypes[step % 4]);
        return nm;
      }
      step -= npairs;
      for (int i = 0, s = 0; i < n; i++)
        for (int j = i + 1; j < n; j++, s++)
          if (s == step) {
            add(m, &nm, i, j, 4099 + j, ncclInt32);
            add(m, &nm, j, i, 777 + i, ncclInt32);
            return nm;
          }
      return -1;
    }
    case P_SIZES: { /* unequal sizes, zero-size messages among them */
      static const size_t sizes[] = {0, 1, 4099, 65537, 300007, 0, 13};
      const int ns = (int)(sizeof(sizes) / sizeof(sizes[0]));
      if (step > ns) return -1;
      if (step == 0) { /* only zero-size messages, every shift (data follows in later steps) */
        for (int r = 0; r < n; r++)
          for (int k = 1; k < n; k++) add(m, &nm, r, (r + k) % n, 0, ncclFloat32);
        return nm;
      }
      for (int r = 0; r < n; r++) {
        add(m, &nm, r, (r + 1) % n, sizes[(r + step) % ns], ncclFloat32);
        if (n > 2) add(m, &nm, r, (r + 2) % n, sizes[(r + step + 3) % ns], ncclInt8);
      }
      return nm;
    }
    case P_ZERO: { /* only zero-size messages, every shift, as the last thing before destroy */
      if (step > 0) return -1;
      for (int r = 0; r < n; r++)
        for (int k = 1; k < n; k++) add(m, &nm, r, (r + k) % n, 0, k % 2 ? ncclFloat32 : ncclInt8);
      return nm;
    }
    case P_SELF: {
      if (step == 0) { /* self only */
        for (int r = 0; r < n; r++) add(m, &nm, r, r, 1023 + r, ncclFloat32);
      } else if (step == 1) { /* self and a ring shift in one group */
        for (int r = 0; r < n; r++) {
          add(m, &nm, r, r, 65537, ncclInt8);
          add(m, &nm, r, (r + 1) % n, 4099, ncclFloat64);
        }
      } else if (step == 2) { /* several to self, different sizes: matched in order */
        for (int r = 0; r < n; r++) {
          add(m, &nm, r, r, 7, ncclInt32);
          add(m, &nm, r, r, 0, ncclInt32);
          add(m, &nm, r, r, 300007, ncclInt32);
          add(m, &nm, r, r, 1, ncclInt32);
        }
      } else if (step == 3) { /* a large send to self beside sends to every peer: the host
                                 executor makes it in pieces while those wait (coll.h) */
        for (int r = 0; r < n; r++) {
          add(m, &nm, r, r, 300007, ncclInt32);
          for (int k = 1; k < n; k++) add(m, &nm, r, (r + k) % n, 65537 + k, ncclFloat32);
        }
      } else {
        return -1;
      }
      return nm;
    }
    case P_FAN: {
      if (step == 0) { /* one to all */
        for (int d = 0; d < n; d++)
          if (d != 0) add(m, &nm, 0, d, 1000 * d + 3, ncclFloat32);
      } else if (step == 1) { /* all to one */
        for (int s = 0; s < n; s++)
          if (s != n - 1) add(m, &nm, s, n - 1, 999 * s + 5, ncclFloat64);
      } else if (step == 2) { /* everyone to everyone, per-pair sizes, self included */
        for (int s = 0; s < n; s++)
          for (int d = 0; d < n; d++) add(m, &nm, s, d, (size_t)((s * 7 + d * 13) % 11) * 1001, ncclInt8);
      } else {
        return -1;
      }
      return nm;
    }
    case P_ORDER: {
      static const size_t sizes[] = {1000, 7, 300000, 0, 4096, 4096, 65536, 1};
      if (step > 1 || n < 2) return -1;
      for (int i = 0; i < (int)(sizeof(sizes) / sizeof(sizes[0])); i++) {
        add(m, &nm, 0, 1, sizes[i], ncclInt8);
        if (step == 1) { /* both ways, interleaved with other peers */
          add(m, &nm, 1, 0, sizes[(i + 3) % 8], ncclInt8);
          if (n > 2) add(m, &nm, 0, 2, sizes[(i + 5) % 8], ncclInt8);
          if (n > 2) add(m, &nm, 2, 1, sizes[(i + 1) % 8], ncclInt8);
        }
      }
      return nm;
    }
    default:
      return -1;
  }
}

static uint32_t msg_seed(int step, int i) {
  return 0x9000u + (uint32_t)step * 4096u + (uint32_t)i;
}

/* One plan on one rank. Returns 0, 1 (wrong data) or -1 (API error). */
static int run_plan(struct harness_rank* r, ncclComm_t comm, const struct plan_case* pc, int step, const struct msg* m,
                    int nm, int* nreports) {
  int me = r->rank, ret = 0;
  struct ref_region* reg = calloc(nm, sizeof(*reg));
  if (reg == NULL) return harness_fail(r, "out of memory"), -1;
  for (int i = 0; i < nm; i++) {
    if (m[i].src != me && m[i].dst != me) continue;
    size_t bytes = m[i].count * ref_dtype_size(m[i].dtype);
    if (m[i].src == me && m[i].dst == me) bytes *= 2; /* self: send half, then receive half */
    if (ref_region_alloc(&reg[i], bytes, 0, (uint8_t)(i * 4)) != 0) {
      ret = -1;
      goto out;
    }
    if (m[i].src == me) ref_fill(m[i].dtype, REF_KIND_SUM, msg_seed(step, i), me, 0, m[i].count, reg[i].p);
  }
  ncclResult_t res = ncclGroupStart();
  for (int i = 0; i < nm && res == ncclSuccess; i++) {
    size_t es = ref_dtype_size(m[i].dtype);
    int null0 = m[i].count == 0 && (i & 1); /* count 0 allows NULL */
    if (m[i].src == me) res = ncclSend(null0 ? NULL : reg[i].p, m[i].count, m[i].dtype, m[i].dst, comm, NULL);
    if (m[i].dst == me && res == ncclSuccess) {
      char* dst = m[i].src == me ? reg[i].p + m[i].count * es : reg[i].p;
      res = ncclRecv(null0 ? NULL : dst, m[i].count, m[i].dtype, m[i].src, comm, NULL);
    }
  }
  ncclResult_t end = ncclGroupEnd();
  if (res != ncclSuccess || end != ncclSuccess) {
    harness_fail(r, "%s step %d: send/recv %s, group end %s (%s)", plan_names[pc->kind], step, ncclGetErrorString(res),
                 ncclGetErrorString(end), ncclGetLastError(comm));
    ret = -1;
    goto out;
  }
  for (int i = 0; i < nm; i++) {
    if (m[i].src != me && m[i].dst != me) continue;
    char msg[512];
    size_t es = ref_dtype_size(m[i].dtype), bad;
    int wrong = 0;
    if (ref_region_guards_bad(&reg[i])) {
      snprintf(msg, sizeof(msg), "guard bytes overwritten");
      wrong = 1;
    }
    if (!wrong && m[i].src == me &&
        ref_check_copy(m[i].dtype, REF_KIND_SUM, msg_seed(step, i), me, 0, m[i].count, reg[i].p, msg, sizeof(msg))) {
      snprintf(msg, sizeof(msg), "the send buffer changed");
      wrong = 1;
    }
    if (!wrong && m[i].dst == me) {
      const char* got = m[i].src == me ? reg[i].p + m[i].count * es : reg[i].p;
      char detail[400];
      bad = ref_check_copy(m[i].dtype, REF_KIND_SUM, msg_seed(step, i), m[i].src, 0, m[i].count, got, detail,
                           sizeof(detail));
      if (bad) {
        snprintf(msg, sizeof(msg), "%zu wrong elements; first: %s", bad, detail);
        wrong = 1;
      }
    }
    if (wrong) {
      ret = 1;
      if ((*nreports)++ < MAX_MSGS)
        harness_fail(r, "%s step %d message %d (%d -> %d, %zu x %s, nranks %d): %s", plan_names[pc->kind], step, i,
                     m[i].src, m[i].dst, m[i].count, ref_dtype_name(m[i].dtype), r->nranks, msg);
    }
  }
out:
  for (int i = 0; i < nm; i++) ref_region_free(&reg[i]);
  free(reg);
  return ret;
}

static int plan_body(struct harness_rank* r) {
  const struct plan_case* pc = r->arg;
  ncclComm_t comm;
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (res != ncclSuccess) return harness_fail(r, "ncclCommInitRank: %s", ncclGetErrorString(res));
  struct msg* m = calloc(MAX_PLAN, sizeof(*m));
  int wrong = 0, nreports = 0, nm;
  for (int step = 0; m != NULL && (nm = build_plan(pc, r->nranks, step, m)) >= 0; step++) {
    int rc = run_plan(r, comm, pc, step, m, nm, &nreports);
    if (rc < 0) {
      free(m);
      return 1; /* out of step with the peers: leave the communicator */
    }
    wrong += rc;
  }
  free(m);
  res = ncclCommDestroy(comm);
  return wrong || res != ncclSuccess;
}

static void run_plan_case(const struct plan_case* pc) {
  ref_env_apply(pc->env);
  int failed = harness_run(pc->nranks, pc->mode, plan_body, (void*)pc, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%s: %d of %d ranks (%s) failed", plan_names[pc->kind], failed, pc->nranks,
                harness_mode_name(pc->mode));
}

/* ring: 2..8 ranks x {threads, processes}, then 3 and 6 as pairs. */
START_TEST(test_ring) {
  struct plan_case pc = {P_RING, 0, HARNESS_THREADS, NULL, ref_tier_full()};
  if (_i < 14) {
    pc.nranks = _i / 2 + 2;
    pc.mode = _i % 2 ? HARNESS_PROCS : HARNESS_THREADS;
  } else {
    pc.nranks = _i == 14 ? 3 : 6;
    pc.mode = HARNESS_PAIRS;
  }
  run_plan_case(&pc);
}
END_TEST

/* The other plans: 4 ranks as threads, as processes, 3 as pairs; 1 and 2 ranks where they apply. */
static const struct {
  enum plan_kind kind;
  int nranks;
  enum harness_mode mode;
} other_plans[] = {
    {P_PAIRS, 4, HARNESS_THREADS}, {P_PAIRS, 4, HARNESS_PROCS},   {P_PAIRS, 3, HARNESS_PAIRS},
    {P_SIZES, 4, HARNESS_THREADS}, {P_SIZES, 5, HARNESS_PROCS},   {P_SIZES, 2, HARNESS_THREADS},
    {P_SELF, 1, HARNESS_THREADS},  {P_SELF, 3, HARNESS_THREADS},  {P_SELF, 3, HARNESS_PROCS},
    {P_SELF, 4, HARNESS_PROCS},    {P_FAN, 5, HARNESS_THREADS},   {P_FAN, 4, HARNESS_PROCS},
    {P_FAN, 6, HARNESS_PAIRS},     {P_ORDER, 2, HARNESS_THREADS}, {P_ORDER, 3, HARNESS_THREADS},
    {P_ORDER, 3, HARNESS_PROCS},   {P_ZERO, 4, HARNESS_THREADS},  {P_ZERO, 5, HARNESS_PROCS},
};
#define NOTHER (int)(sizeof(other_plans) / sizeof(other_plans[0]))

START_TEST(test_plans) {
  struct plan_case pc = {other_plans[_i].kind, other_plans[_i].nranks, other_plans[_i].mode, NULL, ref_tier_full()};
  run_plan_case(&pc);
}
END_TEST

/* ---- AlltoAll, Gather, Scatter ---- */

enum xcoll { X_ALLTOALL = 0, X_GATHER, X_SCATTER, X_NUM };
static const char* const xcoll_names[X_NUM] = {"AlltoAll", "Gather", "Scatter"};

struct xcase {
  int nranks;
  enum harness_mode mode;
  uint32_t dtypes;
  const size_t* counts; /* ends with (size_t)-1 */
};

/* One AlltoAll / Gather / Scatter. inplace: AlltoAll's sendbuff is its recvbuff (every rank);
 * at the root, Gather's sendbuff is its slot of recvbuff and Scatter's recvbuff its slot of
 * sendbuff. Returns 0, 1 or -1. */
static int run_x(struct harness_rank* r, ncclComm_t comm, int x, int dt, size_t cnt, int root, int inplace,
                 uint32_t seed, int* nreports) {
  int n = r->nranks, me = r->rank, is_root = me == root, ret = 0;
  size_t es = ref_dtype_size(dt);
  struct ref_region s = {0}, d = {0};
  size_t in_elems = x == X_ALLTOALL || (x == X_SCATTER && is_root) ? n * cnt : x == X_GATHER ? cnt : 0;
  size_t out_elems = x == X_ALLTOALL || (x == X_GATHER && is_root) ? n * cnt : x == X_SCATTER ? cnt : 0;
  const char* send = NULL;
  char* recv = NULL;
  char msg[512] = "";
  inplace = inplace && (is_root || x == X_ALLTOALL);
  if (inplace) {
    if (ref_region_alloc(&d, n * cnt * es, 0, 0x40) != 0) return -1;
    if (x == X_ALLTOALL) { /* one buffer: my input, replaced by everyone's block for me */
      ref_fill(dt, REF_KIND_SUM, seed, me, 0, n * cnt, d.p);
      send = recv = d.p;
    } else if (x == X_GATHER) {
      ref_fill(dt, REF_KIND_SUM, seed, me, 0, cnt, d.p + me * cnt * es);
      send = d.p + me * cnt * es;
      recv = d.p;
    } else {
      ref_fill(dt, REF_KIND_SUM, seed, me, 0, n * cnt, d.p);
      send = d.p;
      recv = d.p + me * cnt * es;
    }
  } else {
    if (ref_region_alloc(&s, in_elems * es, 0, 0x30) != 0 || ref_region_alloc(&d, out_elems * es, 0, 0x40) != 0) {
      ref_region_free(&s);
      return -1;
    }
    ref_fill(dt, REF_KIND_SUM, seed, me, 0, in_elems, s.p);
    /* Buffers a rank does not use may be NULL (non-root Scatter send, non-root Gather recv). */
    send = in_elems || (seed & 1) ? s.p : NULL;
    recv = out_elems || (seed & 1) ? d.p : NULL;
  }
  ncclResult_t res;
  switch (x) {
    case X_ALLTOALL:
      res = ncclAlltoAll(send, recv, cnt, dt, comm, NULL);
      break;
    case X_GATHER:
      res = ncclGather(send, recv, cnt, dt, root, comm, NULL);
      break;
    default:
      res = ncclScatter(send, recv, cnt, dt, root, comm, NULL);
      break;
  }
  if (res != ncclSuccess) {
    harness_fail(r, "%s %s count %zu root %d: %s (%s)", xcoll_names[x], ref_dtype_name(dt), cnt, root,
                 ncclGetErrorString(res), ncclGetLastError(comm));
    ret = -1;
    goto out;
  }
  size_t bad = 0;
  if (ref_region_guards_bad(&s) + ref_region_guards_bad(&d)) {
    snprintf(msg, sizeof(msg), "guard bytes overwritten");
    bad = 1;
  }
  if (!bad && !inplace && send != NULL && ref_check_copy(dt, REF_KIND_SUM, seed, me, 0, in_elems, send, NULL, 0)) {
    snprintf(msg, sizeof(msg), "the send buffer changed");
    bad = 1;
  }
  if (!bad) {
    switch (x) {
      case X_ALLTOALL:
        for (int q = 0; q < n && !bad; q++)
          bad = ref_check_copy(dt, REF_KIND_SUM, seed, q, me * cnt, cnt, recv + q * cnt * es, msg, sizeof(msg));
        break;
      case X_GATHER:
        if (is_root)
          for (int q = 0; q < n && !bad; q++)
            bad = ref_check_copy(dt, REF_KIND_SUM, seed, q, 0, cnt, recv + q * cnt * es, msg, sizeof(msg));
        break;
      default:
        bad = ref_check_copy(dt, REF_KIND_SUM, seed, root, me * cnt, cnt, recv, msg, sizeof(msg));
        break;
    }
  }
  if (bad) {
    ret = 1;
    if ((*nreports)++ < MAX_MSGS)
      harness_fail(r, "%s %s count %zu root %d %s nranks %d: %s", xcoll_names[x], ref_dtype_name(dt), cnt, root,
                   inplace ? "in-place" : "out-of-place", n, msg);
  }
out:
  ref_region_free(&s);
  ref_region_free(&d);
  return ret;
}

static int x_body(struct harness_rank* r) {
  const struct xcase* xc = r->arg;
  ncclComm_t comm;
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (res != ncclSuccess) return harness_fail(r, "ncclCommInitRank: %s", ncclGetErrorString(res));
  int wrong = 0, nreports = 0;
  uint32_t seed = 0x5000;
  for (int dt = 0; dt < REF_NUM_DTYPES; dt++) {
    if (!(xc->dtypes & (1u << dt))) continue;
    for (const size_t* c = xc->counts; *c != (size_t)-1; c++) {
      for (int x = 0; x < X_NUM; x++) {
        int nroots = x == X_ALLTOALL ? 1 : r->nranks;
        for (int root = 0; root < nroots; root++) {
          for (int inplace = 0; inplace < 2; inplace++) {
            int rc = run_x(r, comm, x, dt, *c, root, inplace, seed++, &nreports);
            if (rc < 0) return 1;
            wrong += rc;
          }
        }
      }
    }
  }
  res = ncclCommDestroy(comm);
  return wrong || res != ncclSuccess;
}

static const size_t x_counts[] = {0, 1, 7, 1023, (size_t)-1};
static const size_t x_counts_dtypes[] = {7, 1023, 65537, (size_t)-1};
static const size_t x_counts_large[] = {(1u << 20) + 3, (size_t)-1};

/* 1..8 ranks x {threads, processes}; then all datatypes at 3 ranks; then pairs. */
START_TEST(test_a2a) {
  struct xcase xc = {0, HARNESS_THREADS, 1u << ncclFloat32, x_counts};
  if (_i < 16) {
    xc.nranks = _i / 2 + 1;
    xc.mode = _i % 2 ? HARNESS_PROCS : HARNESS_THREADS;
  } else if (_i == 16) {
    xc.nranks = 3;
    xc.dtypes = REF_ALL_DTYPES;
    xc.counts = x_counts_dtypes;
  } else {
    xc.nranks = _i == 17 ? 3 : 5;
    xc.mode = HARNESS_PAIRS;
  }
  int failed = harness_run(xc.nranks, xc.mode, x_body, &xc, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d of %d ranks (%s) failed", failed, xc.nranks, harness_mode_name(xc.mode));
}
END_TEST

/* Large messages, and small FIFOs with a chunk size that is no multiple of any element size. */
static const char* const large_env[] = {NULL, "NCCL_BUFFSIZE=65536 NCCL_P2P_PCI_CHUNKSIZE=3000"};

START_TEST(test_large) {
  const char* env = large_env[_i % 2];
  ref_env_apply(env);
  if (_i < 2) { /* AlltoAll / Gather / Scatter */
    struct xcase xc = {4, HARNESS_THREADS, 1u << ncclFloat32, x_counts_large};
    if (_i == 1) xc.counts = x_counts_dtypes, xc.dtypes = (1u << ncclInt8) | (1u << ncclFloat64);
    int failed = harness_run(xc.nranks, xc.mode, x_body, &xc, RANK_TIMEOUT_S);
    ck_assert_msg(failed == 0, "%d of %d ranks failed (env %s)", failed, xc.nranks, env ? env : "-");
  } else { /* ring shifts, big counts */
    struct plan_case pc = {_i < 4 ? P_RING : P_ORDER, 3, _i == 3 ? HARNESS_PROCS : HARNESS_THREADS, env, 1};
    run_plan_case(&pc);
  }
}
END_TEST

/* ---- p2p rounds taken together (BRAID_P2P_ROUND_GROUP) ---- */

/* Every grouping must deliver the same data: 1 (NCCL's round by round schedule, the default
 * where each rank has a core), 2 and 3 (groups that split the rounds unevenly), and more than
 * the rounds (all at once, the default where ranks share cores); with small FIFOs and an odd
 * chunk, so messages take many steps and senders wait for credit inside a group. */
static const struct {
  const char* env;
  int x; /* 1: AlltoAll / Gather / Scatter; else a send/recv plan */
  enum plan_kind kind;
  int nranks;
  enum harness_mode mode;
} group_cases[] = {
    {"BRAID_P2P_ROUND_GROUP=1", 1, 0, 4, HARNESS_PROCS},
    {"BRAID_P2P_ROUND_GROUP=1", 1, 0, 5, HARNESS_THREADS},
    {"BRAID_P2P_ROUND_GROUP=2", 1, 0, 5, HARNESS_PROCS},
    {"BRAID_P2P_ROUND_GROUP=3 NCCL_BUFFSIZE=65536 NCCL_P2P_PCI_CHUNKSIZE=3000", 1, 0, 4, HARNESS_THREADS},
    {"BRAID_P2P_ROUND_GROUP=64 NCCL_BUFFSIZE=65536 NCCL_P2P_PCI_CHUNKSIZE=3000", 1, 0, 5, HARNESS_PROCS},
    {"BRAID_P2P_ROUND_GROUP=64", 0, P_FAN, 5, HARNESS_THREADS},
    {"BRAID_P2P_ROUND_GROUP=2", 0, P_ORDER, 3, HARNESS_PROCS},
    {"BRAID_P2P_ROUND_GROUP=3", 0, P_SIZES, 5, HARNESS_PROCS},
    {"BRAID_P2P_ROUND_GROUP=1", 0, P_SIZES, 4, HARNESS_THREADS},
    {"BRAID_P2P_SELF_COPY=FIRST", 0, P_SELF, 4, HARNESS_PROCS}, /* sends to self before the call */
    {"BRAID_P2P_SELF_COPY=FIRST BRAID_P2P_ROUND_GROUP=1", 1, 0, 3, HARNESS_THREADS},
    {"BRAID_P2P_SELF_COPY=WAIT", 0, P_SELF, 3, HARNESS_PROCS}, /* in any poll where nothing moves */
    {"BRAID_P2P_SELF_COPY=WAIT", 1, 0, 4, HARNESS_PROCS},
    {"BRAID_P2P_SELF_COPY=SENDS", 0, P_SELF, 4, HARNESS_THREADS},
};
#define NGROUP (int)(sizeof(group_cases) / sizeof(group_cases[0]))

START_TEST(test_groups) {
  if (group_cases[_i].x) {
    struct xcase xc = {group_cases[_i].nranks, group_cases[_i].mode, (1u << ncclFloat32) | (1u << ncclInt8),
                       x_counts_dtypes};
    ref_env_apply(group_cases[_i].env);
    int failed = harness_run(xc.nranks, xc.mode, x_body, &xc, RANK_TIMEOUT_S);
    ck_assert_msg(failed == 0, "%s: %d of %d ranks (%s) failed", group_cases[_i].env, failed, xc.nranks,
                  harness_mode_name(xc.mode));
  } else {
    struct plan_case pc = {group_cases[_i].kind, group_cases[_i].nranks, group_cases[_i].mode, group_cases[_i].env, 0};
    run_plan_case(&pc);
  }
}
END_TEST

/* ---- collectives and sends/receives in one group ---- */

/* In one group: AllReduce (float sum), a ring of sends/receives, Broadcast (root 1), and
 * sends to self; twice. */
static int mixed_once(struct harness_rank* r, ncclComm_t comm, int rep) {
  int n = r->nranks, me = r->rank, bad = 0;
  const size_t ac = 4099, pc = 65537, bc = 1023;
  uint32_t seed = 0x7000 + rep * 16;
  float* ain = malloc(ac * sizeof(float));
  float* aout = malloc(ac * sizeof(float));
  double* psend = malloc(pc * sizeof(double));
  double* precv = malloc(pc * sizeof(double));
  int32_t* bbuf = malloc(bc * sizeof(int32_t));
  int32_t* self_in = malloc(bc * sizeof(int32_t));
  int32_t* self_out = malloc(bc * sizeof(int32_t));
  if (!ain || !aout || !psend || !precv || !bbuf || !self_in || !self_out) return harness_fail(r, "out of memory");
  ref_fill(ncclFloat32, REF_KIND_SUM, seed, me, 0, ac, ain);
  ref_fill(ncclFloat64, REF_KIND_SUM, seed + 1, me, 0, pc, psend);
  ref_fill(ncclInt32, REF_KIND_SUM, seed + 2, me, 0, bc, bbuf);
  ref_fill(ncclInt32, REF_KIND_SUM, seed + 3, me, 0, bc, self_in);
  int root = 1 % n;
  ncclResult_t res = ncclGroupStart();
  if (res == ncclSuccess) res = ncclAllReduce(ain, aout, ac, ncclFloat32, ncclSum, comm, NULL);
  if (res == ncclSuccess) res = ncclSend(psend, pc, ncclFloat64, (me + 1) % n, comm, NULL);
  if (res == ncclSuccess) res = ncclRecv(precv, pc, ncclFloat64, (me + n - 1) % n, comm, NULL);
  if (res == ncclSuccess) res = ncclBroadcast(bbuf, bbuf, bc, ncclInt32, root, comm, NULL);
  if (res == ncclSuccess) res = ncclSend(self_in, bc, ncclInt32, me, comm, NULL);
  if (res == ncclSuccess) res = ncclRecv(self_out, bc, ncclInt32, me, comm, NULL);
  ncclResult_t end = ncclGroupEnd();
  if (res != ncclSuccess || end != ncclSuccess)
    return harness_fail(r, "mixed group: %s / %s (%s)", ncclGetErrorString(res), ncclGetErrorString(end),
                        ncclGetLastError(comm));
  char msg[512];
  struct ref_red red = {ncclFloat32, REF_SUM, n, seed};
  if (ref_check_reduce(&red, 0, ac, aout, msg, sizeof(msg))) bad += harness_fail(r, "mixed AllReduce: %s", msg);
  if (ref_check_copy(ncclFloat64, REF_KIND_SUM, seed + 1, (me + n - 1) % n, 0, pc, precv, msg, sizeof(msg)))
    bad += harness_fail(r, "mixed recv: %s", msg);
  if (ref_check_copy(ncclInt32, REF_KIND_SUM, seed + 2, root, 0, bc, bbuf, msg, sizeof(msg)))
    bad += harness_fail(r, "mixed Broadcast: %s", msg);
  if (ref_check_copy(ncclInt32, REF_KIND_SUM, seed + 3, me, 0, bc, self_out, msg, sizeof(msg)))
    bad += harness_fail(r, "mixed self recv: %s", msg);
  free(ain), free(aout), free(psend), free(precv), free(bbuf), free(self_in), free(self_out);
  return bad;
}

static int mixed_body(struct harness_rank* r) {
  ncclComm_t comm;
  ncclResult_t res = ncclCommInitRank(&comm, r->nranks, r->id, r->rank);
  if (res != ncclSuccess) return harness_fail(r, "ncclCommInitRank: %s", ncclGetErrorString(res));
  int bad = 0;
  for (int rep = 0; rep < 3; rep++) bad += mixed_once(r, comm, rep);
  res = ncclCommDestroy(comm);
  return bad || res != ncclSuccess;
}

START_TEST(test_mixed) {
  static const struct {
    int n;
    enum harness_mode mode;
  } rm[] = {{3, HARNESS_THREADS}, {4, HARNESS_PROCS}, {4, HARNESS_PAIRS}, {1, HARNESS_THREADS}};
  int failed = harness_run(rm[_i].n, rm[_i].mode, mixed_body, NULL, RANK_TIMEOUT_S);
  ck_assert_msg(failed == 0, "%d of %d ranks (%s) failed", failed, rm[_i].n, harness_mode_name(rm[_i].mode));
}
END_TEST

/* One thread drives an ncclCommInitAll clique: a ring shift, an AlltoAll and an AllReduce,
 * each as one group over all communicators. */
START_TEST(test_initall_one_thread) {
  enum { N = 5 };
  const size_t cnt = 4099;
  ncclComm_t comms[N];
  float* sbuf[N];
  float* rbuf[N];
  char msg[512];
  ck_assert_int_eq(ncclCommInitAll(comms, N, NULL), ncclSuccess);
  for (int i = 0; i < N; i++) {
    sbuf[i] = malloc(N * cnt * sizeof(float));
    rbuf[i] = malloc(N * cnt * sizeof(float));
    ck_assert(sbuf[i] && rbuf[i]);
  }
  for (int phase = 0; phase < 3; phase++) {
    uint32_t seed = 0xA000 + phase;
    for (int i = 0; i < N; i++) ref_fill(ncclFloat32, REF_KIND_SUM, seed, i, 0, N * cnt, sbuf[i]);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < N; i++) {
      if (phase == 0) {
        ck_assert_int_eq(ncclSend(sbuf[i], cnt, ncclFloat32, (i + 1) % N, comms[i], NULL), ncclSuccess);
        ck_assert_int_eq(ncclRecv(rbuf[i], cnt, ncclFloat32, (i + N - 1) % N, comms[i], NULL), ncclSuccess);
      } else if (phase == 1) {
        ck_assert_int_eq(ncclAlltoAll(sbuf[i], rbuf[i], cnt, ncclFloat32, comms[i], NULL), ncclSuccess);
      } else {
        ck_assert_int_eq(ncclAllReduce(sbuf[i], rbuf[i], cnt, ncclFloat32, ncclSum, comms[i], NULL), ncclSuccess);
      }
    }
    ck_assert_msg(ncclGroupEnd() == ncclSuccess, "phase %d: %s", phase, ncclGetLastError(NULL));
    for (int i = 0; i < N; i++) {
      size_t bad = 0;
      if (phase == 0) {
        bad = ref_check_copy(ncclFloat32, REF_KIND_SUM, seed, (i + N - 1) % N, 0, cnt, rbuf[i], msg, sizeof(msg));
      } else if (phase == 1) {
        for (int q = 0; q < N && !bad; q++)
          bad = ref_check_copy(ncclFloat32, REF_KIND_SUM, seed, q, i * cnt, cnt, rbuf[i] + q * cnt, msg, sizeof(msg));
      } else {
        struct ref_red red = {ncclFloat32, REF_SUM, N, seed};
        bad = ref_check_reduce(&red, 0, cnt, rbuf[i], msg, sizeof(msg));
      }
      ck_assert_msg(bad == 0, "phase %d rank %d: %s", phase, i, msg);
    }
  }
  for (int i = 0; i < N; i++) {
    ck_assert_int_eq(ncclCommDestroy(comms[i]), ncclSuccess);
    free(sbuf[i]);
    free(rbuf[i]);
  }
}
END_TEST

Suite* p2p_suite(void) {
  Suite* s = suite_create("p2p");
  struct {
    const char* name;
    const TTest* fn;
    int n;
  } const tcs[] = {
      {"ring", test_ring, 16},  {"plans", test_plans, NOTHER}, {"a2a", test_a2a, 19},
      {"large", test_large, 5}, {"mixed", test_mixed, 4},      {"groups", test_groups, NGROUP},
  };
  for (size_t i = 0; i < sizeof(tcs) / sizeof(tcs[0]); i++) {
    TCase* tc = tcase_create(tcs[i].name);
    tcase_set_timeout(tc, TCASE_TIMEOUT_S);
    tcase_add_loop_test(tc, tcs[i].fn, 0, tcs[i].n);
    suite_add_tcase(s, tc);
  }
  TCase* tc = tcase_create("initall");
  tcase_set_timeout(tc, TCASE_TIMEOUT_S);
  tcase_add_test(tc, test_initall_one_thread);
  suite_add_tcase(s, tc);
  return s;
}
