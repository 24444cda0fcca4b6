/*
 * profiler_plugin.h - NCCL's profiler plugins (NCCL_PROFILER_PLUGIN, ncclProfiler_v6 .. _v1;
 * profiler_abi.h) behind one braid interface. The library is found once per process with
 * NCCL's search rules (base/plugin_open.h, prefix libnccl-profiler; "none" disables) and stays
 * loaded; each communicator gets its own plugin context and the event mask its init set.
 *
 * Events are described in the newest layout (v6's fields, ids kept for v1's numbers) and
 * adapted to the version loaded. A plugin whose init fails is not used by that communicator
 * (INFO, as NCCL: "Continue without profiler"); a failing startEvent / stopEvent is ignored.
 */
#ifndef BRAID_PROFILER_PLUGIN_H
#define BRAID_PROFILER_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct braid_prof; /* one communicator's context */

struct braid_prof_shape {
  uint64_t comm_id;
  const char* comm_name;
  int nnodes, nranks, rank;
};

struct braid_prof_event {
  int type;           /* NCCL_PROF_GROUP, _COLL, _P2P, _GROUP_API, _COLL_API, _P2P_API (profiler_abi.h) */
  void* parent_group; /* coll / p2p: the group event's handle */
  void* parent_obj;   /* v5+: coll / p2p: its API event; coll / p2p API events: the group API event */
  int group_depth;    /* group API event: ncclGroupStart nesting when it started */
  void* stream;       /* API events: the user's stream */
  int rank;
  uint64_t seq;  /* coll: its number among this communicator's calls of that function */
  int func;      /* enum braid_func; p2p: BRAID_FUNC_SendRecv */
  int is_send;   /* p2p */
  int dtype;     /* ncclDataType_t */
  int algo;      /* coll: enum braid_algo */
  int proto;     /* coll: enum braid_proto */
  int nchannels; /* coll: as the tuner chose; p2p: channels its ops use */
  int nwarps;    /* coll: threads per channel / 32 (0 in host mode) */
  int root;      /* coll (-1 without one) */
  int peer;      /* p2p */
  const void* sendbuff;
  void* recvbuff; /* p2p: the buffer */
  size_t count;
  /* Proxy events (v1+: ProxyOp, ProxyStep, ProxyCtrl; v3+: NetPlugin); parent_obj is the
   * task's event (ProxyOp), the ProxyOp (ProxyStep) or the ProxyStep (NetPlugin). */
  int pid, channel, nsteps, chunk; /* ProxyOp: peer above, is_send above */
  int step;                        /* ProxyStep: the connection's step number (as an int) */
  int64_t net_id;                  /* NetPlugin: the plugin's id and data */
  void* net_data;
};

/* States (NCCL's ncclProfilerEventState_t numbers): v1-v3 record them on the ProxyOp (with
 * transSize and steps so far), v4+ on the ProxyStep (ProxyOp: only InProgress). */
enum {
  BRAID_PROF_OP_SEND_POSTED = 0,
  BRAID_PROF_OP_SEND_REM_FIFO_WAIT = 1,
  BRAID_PROF_OP_SEND_TRANSMITTED = 2,
  BRAID_PROF_OP_SEND_DONE = 3,
  BRAID_PROF_OP_RECV_POSTED = 4,
  BRAID_PROF_OP_RECV_RECEIVED = 5,
  BRAID_PROF_OP_RECV_TRANSMITTED = 6,
  BRAID_PROF_OP_RECV_DONE = 7,
  BRAID_PROF_STEP_SEND_GPU_WAIT = 8,
  BRAID_PROF_STEP_SEND_WAIT = 9,
  BRAID_PROF_STEP_RECV_WAIT = 10,
  BRAID_PROF_STEP_RECV_FLUSH_WAIT = 11,
  BRAID_PROF_STEP_RECV_GPU_WAIT = 12,
  BRAID_PROF_OP_IN_PROGRESS_V4 = 19,
  BRAID_PROF_STEP_SEND_PEER_WAIT_V4 = 20,
  BRAID_PROF_CTRL_IDLE = 13,
  BRAID_PROF_CTRL_ACTIVE = 14,
  BRAID_PROF_CTRL_SLEEP = 15,
  BRAID_PROF_CTRL_WAKEUP = 16,
  BRAID_PROF_CTRL_APPEND = 17,
  BRAID_PROF_CTRL_APPEND_END = 18,
  BRAID_PROF_NET_PLUGIN_UPDATE = 21,
};

/* The communicator's context, *p = NULL without a plugin or when its init failed. */
ncclResult_t braid_prof_open(const struct braid_prof_shape* shape, struct braid_prof** p);
void braid_prof_close(struct braid_prof* p);
/* The mask the plugin's init set (bits NCCL_PROF_*). */
int braid_prof_mask(const struct braid_prof* p);
/* Start an event; returns the plugin's handle (NULL when it gave none or failed). */
void* braid_prof_start(struct braid_prof* p, const struct braid_prof_event* e);
void braid_prof_stop(struct braid_prof* p, void* handle);
/* recordEventState on an event braid started (NULL: nothing); trans_size / steps / data fill
 * the state arguments of the version loaded (proxy: transSize, steps; netPlugin: data). */
void braid_prof_record(void* handle, int state, size_t trans_size, int steps, void* data);
/* ProxyCtrl (the progress thread's transitions: enum BRAID_PROGRESS_CTRL_* of
 * transport/progress.h): an event per context whose mask asks for ProxyCtrl (a sleep lasts
 * from its start, state Sleep, to its stop, state Wakeup; Idle / Active are events of one
 * state). braid has one progress thread per process, so every context sees it. */
void braid_prof_ctrl(int what);
/* The plugin's name and ABI version, for logs and tests; NULL / 0 without one. */
const char* braid_prof_name(void);
int braid_prof_version(void);

#endif /* BRAID_PROFILER_PLUGIN_H */
