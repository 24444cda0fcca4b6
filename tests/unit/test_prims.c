/*
 * test_prims.c - the primitives and executor loop of src/kernels (prims.h, direct.h, coll.h)
 * on hand-built connections in host memory, for what the collective suites cannot reach:
 *   abort   the abort flag arriving at each wait of the data path: a Simple receive (tail),
 *           a Simple send (credit), an LL line, an LL128 flag, a p2p round polling for
 *           readiness, a direct send's completion. Each returns BRAID_EXEC_ABORTED, publishes
 *           nothing (tail and head unchanged) and writes no output.
 *   spin    the spin counter keeps spacing abort checks past 2^32 polls (it used to stick at
 *           UINT32_MAX, whose low byte 255 ended the checks).
 *   sched   a schedule that refuses a step (root missing from the ring order, a ring position
 *           out of range, an unknown function or primitive, an op to an unconnected peer) is
 *           BRAID_EXEC_BAD_SCHEDULE, not a silent no-op that leaves the peers waiting.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/coll.h"
#include "nccl.h"

#define SLOT 4096 /* bytes of one slot of every protocol */

/* One connection: both ends share the control block and the buffers, as a FIFO in shared
 * memory would. */
struct tconn {
  struct braid_conn_ctrl ctrl;
  char buff[BRAID_NUM_PROTOS][BRAID_NSTEPS * SLOT];
  struct braid_conn send, recv;
};

static struct tconn* tconn_new(void) {
  struct tconn* t = calloc(1, sizeof(*t));
  ck_assert_ptr_nonnull(t);
  struct braid_conn* ends[2] = {&t->send, &t->recv};
  for (int e = 0; e < 2; e++) {
    struct braid_conn* c = ends[e];
    c->tail = &t->ctrl.tail;
    c->head = &t->ctrl.head;
    c->sizes = t->ctrl.sizes;
    c->ptrs = t->ctrl.ptrs;
    c->want = &t->ctrl.want;
    for (int p = 0; p < BRAID_NUM_PROTOS; p++) {
      c->buff[p] = t->buff[p];
      c->slot_bytes[p] = SLOT;
    }
  }
  return t;
}

/* A channel whose ring sends on `s` and receives on `r` (either may be NULL). */
static void channel(struct braid_dev_channel* ch, const int* ranks, struct braid_conn* s, struct braid_conn* r) {
  memset(ch, 0, sizeof(*ch));
  ch->ring.prev = ranks[1];
  ch->ring.next = ranks[1];
  ch->ring.index = 0;
  ch->ring.ranks = ranks;
  ch->ring_send = s;
  ch->ring_recv = r;
}

static void work(struct braid_work* w, int func, int proto, size_t count, const void* in, void* out) {
  memset(w, 0, sizeof(*w));
  w->func = (uint8_t)func;
  w->algo = BRAID_ALGO_RING;
  w->proto = (uint8_t)proto;
  w->dtype = 7; /* float */
  w->redop.dtype = 7;
  w->nranks = 2;
  w->count = count;
  w->chan_count = count;
  w->chunk_elems = braid_proto_payload(proto, SLOT) / 4;
  w->sendbuff = in;
  w->recvbuff = out;
}

static int run(struct braid_work* w, struct braid_dev_channel* ch, const volatile uint32_t* abort_flag) {
  struct braid_prims p;
  memset(&p, 0, sizeof(p));
  return braid_run_work(&p, w, ch, abort_flag);
}

/* ---- an abort at each wait -------------------------------------------------------------- */

static float in[1024], out[1024];
static const int ranks[2] = {0, 1};

static void check_untouched(const char* what) {
  for (int i = 0; i < 1024; i++) ck_assert_msg(out[i] == -1.0f, "%s: output [%d] written", what, i);
}

/* Broadcast from rank 1 to me (rank 0): a Simple/LL/LL128 RECV from a peer that never sends. */
static void abort_recv(int proto) {
  static const char* names[] = {"LL line", "LL128 flag", "Simple tail"};
  struct tconn* t = tconn_new();
  struct braid_dev_channel ch;
  struct braid_work w;
  volatile uint32_t flag = BRAID_EXEC_ABORTED;
  for (int i = 0; i < 1024; i++) out[i] = -1.0f;
  channel(&ch, ranks, NULL, &t->recv);
  work(&w, BRAID_FUNC_Broadcast, proto, 1000, in, out);
  w.root = 1;
  /* ring order {0, 1}: root 1 is chain position 0, I am the last (RECV only) */
  int st = run(&w, &ch, &flag);
  ck_assert_msg(st == BRAID_EXEC_ABORTED, "%s wait: status %d, want ABORTED", names[proto], st);
  ck_assert_uint_eq(t->ctrl.head, 0); /* nothing consumed */
  ck_assert_uint_eq(t->recv.step, 0);
  check_untouched(names[proto]);
  free(t);
}

START_TEST(test_abort_recv) {
  abort_recv(_i);
}
END_TEST

/* A Simple send to a peer that consumed nothing: the FIFO is full, the credit wait aborts. */
START_TEST(test_abort_credit) {
  struct tconn* t = tconn_new();
  struct braid_dev_channel ch;
  struct braid_work w;
  volatile uint32_t flag = BRAID_EXEC_ABORTED;
  channel(&ch, ranks, &t->send, NULL);
  t->send.step = BRAID_NSTEPS; /* every slot full, head 0 */
  t->ctrl.tail = BRAID_NSTEPS;
  work(&w, BRAID_FUNC_Broadcast, BRAID_PROTO_SIMPLE, 1000, in, out);
  w.root = 0; /* I am the root: COPY_SEND */
  for (int i = 0; i < 1024; i++) in[i] = (float)i, out[i] = -1.0f;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_ABORTED);
  ck_assert_uint_eq(t->ctrl.tail, BRAID_NSTEPS); /* nothing published */
  ck_assert_uint_eq(t->send.step, BRAID_NSTEPS);
  free(t);
}
END_TEST

/* A p2p receive whose sender never sends: the round's readiness loop aborts. */
START_TEST(test_abort_p2p) {
  struct tconn* t = tconn_new();
  struct braid_dev_channel ch;
  struct braid_work w;
  struct braid_conn* send_tab[2] = {NULL, NULL};
  struct braid_conn* recv_tab[2] = {NULL, &t->recv};
  struct braid_p2p_op op = {.round = 0, .peer = 1, .is_send = 0, .buff = (char*)out, .bytes = 4000};
  volatile uint32_t flag = BRAID_EXEC_ABORTED;
  for (int i = 0; i < 1024; i++) out[i] = -1.0f;
  channel(&ch, ranks, NULL, NULL);
  ch.p2p_send = send_tab;
  ch.p2p_recv = recv_tab;
  work(&w, BRAID_FUNC_SendRecv, BRAID_PROTO_SIMPLE, 0, NULL, NULL);
  w.dtype = ncclInt8;
  w.nops = 1;
  w.ops = &op;
  w.p2p_chunk_bytes = SLOT;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_ABORTED);
  ck_assert_uint_eq(t->ctrl.head, 0);
  check_untouched("p2p");
  free(t);
}
END_TEST

/* A direct send the plugin never completes (head stays): the executor's drain aborts. */
START_TEST(test_abort_direct) {
  struct tconn* t = tconn_new();
  struct braid_direct d;
  volatile uint32_t flag = BRAID_EXEC_ABORTED;
  memset(&d, 0, sizeof(d));
  t->send.direct = 1;
  t->send.step = 1; /* step 0 published by pointer */
  ck_assert_int_eq(braid_direct_track(&d, &t->send, (const char*)in, 4000, &flag), 0);
  ck_assert_int_eq(braid_direct_drain(&d, &flag), BRAID_EXEC_ABORTED);
  ck_assert_int_eq(d.npend, 0);
  free(t);
}
END_TEST

/* ---- the spin counter ------------------------------------------------------------------- */

START_TEST(test_spin_wrap) {
  volatile uint32_t flag = BRAID_EXEC_ABORTED;
  uint32_t spins = UINT32_MAX - 600;
  int checks = 0;
  braid_spin_before_yield = 0; /* (this test only pauses; yielding would cost seconds) */
  for (int i = 0; i < 1200; i++) {
    checks += braid_spin_check(&spins, &flag) == BRAID_EXEC_ABORTED;
    ck_assert_uint_ne(spins, 0); /* never back to "just started" */
  }
  ck_assert_msg(checks >= 4, "%d abort checks in 1200 polls across UINT32_MAX (want one per 256)", checks);
  ck_assert_uint_ge(spins, BRAID_SPIN_WRAP);
}
END_TEST

/* ---- schedule errors -------------------------------------------------------------------- */

START_TEST(test_bad_schedule) {
  struct tconn* t = tconn_new();
  struct braid_dev_channel ch;
  struct braid_work w;
  volatile uint32_t flag = 0;
  static const int bad_ranks[2] = {0, 0}; /* rank 1 is missing from the ring order */
  /* Broadcast from a root that is not in the ring. */
  channel(&ch, bad_ranks, &t->send, &t->recv);
  work(&w, BRAID_FUNC_Broadcast, BRAID_PROTO_SIMPLE, 100, in, out);
  w.root = 1;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  /* A ring position out of range. */
  channel(&ch, ranks, &t->send, &t->recv);
  ch.ring.index = 2;
  work(&w, BRAID_FUNC_AllReduce, BRAID_PROTO_SIMPLE, 100, in, out);
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  work(&w, BRAID_FUNC_AllGather, BRAID_PROTO_SIMPLE, 100, in, out);
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  /* No rank count at all. */
  channel(&ch, ranks, &t->send, &t->recv);
  work(&w, BRAID_FUNC_ReduceScatter, BRAID_PROTO_SIMPLE, 100, in, out);
  w.nranks = 0;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  /* A function the data path does not know, and a protocol. */
  work(&w, BRAID_FUNC_AllReduce, BRAID_PROTO_SIMPLE, 100, in, out);
  w.func = 42;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  work(&w, BRAID_FUNC_AllReduce, BRAID_PROTO_SIMPLE, 100, in, out);
  w.proto = 7;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  /* A primitive outside the list. */
  struct braid_prims p;
  memset(&p, 0, sizeof(p));
  p.abort_flag = &flag;
  ck_assert_int_eq(braid_prim_step(&p, BRAID_PRIM_NONE, (const char*)in, (char*)out, 10, 0), BRAID_EXEC_BAD_SCHEDULE);
  ck_assert_int_eq(braid_prim_step(&p, BRAID_NUM_PRIMS, (const char*)in, (char*)out, 10, 0), BRAID_EXEC_BAD_SCHEDULE);
  /* A p2p op to a peer without a connection. */
  struct braid_conn* tab[2] = {NULL, NULL};
  struct braid_p2p_op op = {.round = 0, .peer = 1, .is_send = 1, .buff = (char*)in, .bytes = 400};
  channel(&ch, ranks, NULL, NULL);
  ch.p2p_send = tab;
  ch.p2p_recv = tab;
  work(&w, BRAID_FUNC_SendRecv, BRAID_PROTO_SIMPLE, 0, NULL, NULL);
  w.nops = 1;
  w.ops = &op;
  w.p2p_chunk_bytes = SLOT;
  ck_assert_int_eq(run(&w, &ch, &flag), BRAID_EXEC_BAD_SCHEDULE);
  free(t);
}
END_TEST

Suite* prims_suite(void) {
  Suite* s = suite_create("prims");
  TCase* tc = tcase_create("abort");
  tcase_set_timeout(tc, 30);
  tcase_add_loop_test(tc, test_abort_recv, 0, BRAID_NUM_PROTOS);
  tcase_add_test(tc, test_abort_credit);
  tcase_add_test(tc, test_abort_p2p);
  tcase_add_test(tc, test_abort_direct);
  suite_add_tcase(s, tc);
  tc = tcase_create("spin");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_spin_wrap);
  suite_add_tcase(s, tc);
  tc = tcase_create("sched");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_bad_schedule);
  suite_add_tcase(s, tc);
  return s;
}
