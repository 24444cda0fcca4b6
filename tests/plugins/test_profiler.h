/*
 * test_profiler.h - what the test profiler (test_profiler.c) reports per rank after its
 * finalize, read by tests/unit/test_profiler.c through dlsym("braid_test_profiler_result").
 */
#ifndef BRAID_TEST_PROFILER_H
#define BRAID_TEST_PROFILER_H

#define BRAID_TEST_PROFILER_TYPES 15
#define BRAID_TEST_PROFILER_MAX_RANKS 64
#define BRAID_TEST_PROFILER_MAX_OPS 64

struct braid_test_profiler_result {
  int finalized;
  int version;
  int starts[BRAID_TEST_PROFILER_TYPES], stops[BRAID_TEST_PROFILER_TYPES]; /* by bit of the type */
  int open;                                                                /* started and not stopped */
  int unasked;         /* starts of a type outside the mask (dropped, as NCCL's example) */
  int coll_by_func[5]; /* Broadcast, Reduce, AllGather, ReduceScatter, AllReduce */
  int coll_by_algo[7], coll_by_proto[3];
  int sends, recvs;
  int errors;
  char first_error[160];
  /* Proxy events: each ProxyOp as it started (the first BRAID_TEST_PROFILER_MAX_OPS), the
   * states recorded on proxy events, the bytes their step states reported (v4+: transSize of
   * SendWait and RecvFlushWait, as NCCL's example adds them up). */
  int nops;
  struct {
    int is_send, peer, nsteps, chunk, channel, parent_type;
    long long bytes;        /* v4+: what its steps' SendWait / RecvFlushWait reported */
    long long parent_bytes; /* its task's count times its datatype's size */
  } ops[BRAID_TEST_PROFILER_MAX_OPS];
  int proxy_states;
  long long step_bytes;
  int net_under_sends; /* NetPlugin events under a send's ProxyStep */
  int ctrl_appends;    /* ProxyCtrl events with Append and AppendEnd */
};

typedef int (*braid_test_profiler_result_fn)(int rank, struct braid_test_profiler_result* out);
/* braid_test_profiler_live: the same, so far, of a context not finalized yet. */

#endif /* BRAID_TEST_PROFILER_H */
