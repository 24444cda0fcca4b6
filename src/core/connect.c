/*
 * connect.c - the core's side of the transport boundary (transport/transport.h): it builds
 * the context the transports see instead of the communicator, picks a transport per peer
 * pair (the registry's order), runs both sides' setup, swaps the blobs over the bootstrap,
 * connects, and starts the communicator's watchdog. Ring connections are built at init;
 * point-to-point and tree ones the first time a call needs them, in phases (post our blobs,
 * then finish with the peers') so one thread can connect several communicators.
 */
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/watchdog.h"
#include "transport/registry.h"

/* ---- the transports' context --------------------------------------------------------------- */

static void ctx_fail(void* owner, int status, ncclResult_t res, int peer, const char* msg) {
  braid_comm_raise(owner, status, res, peer, "%s", msg);
}
static int ctx_dead_peer(void* owner) {
  return braid_watchdog_dead_peer(owner);
}
static int ctx_blamed_peer(void* owner) {
  return braid_comm_blamed_peer(owner);
}

/* What the transports may know of comm; built before its first connection (idempotent). */
static void ctx_build(struct braid_comm* comm) {
  struct braid_transport_ctx* t = &comm->tctx;
  if (t->peers != NULL) return;
  t->rank = comm->rank;
  t->nranks = comm->nranks;
  t->cuda_dev = comm->device != NULL ? comm->cuda_dev : -1;
  t->device = comm->device;
  t->rank_to_node = comm->rank_to_node;
  t->topo = comm->topo;
  t->graph = comm->graph;
  memcpy(t->buff_bytes, comm->buff_bytes, sizeof(t->buff_bytes));
  t->locality = comm->locality;
  t->comm_hash = comm->comm_hash;
  t->secret = braid_bootstrap_secret(comm->bootstrap);
  t->traffic_class = comm->config.trafficClass;
  t->abort_flag = &comm->abort_flag;
  t->owner = comm;
  t->fail = ctx_fail;
  t->dead_peer = ctx_dead_peer;
  t->blamed_peer = ctx_blamed_peer;
  t->peers = comm->peers; /* last: it marks the context built */
}

/* Bootstrap tags of connection blobs: which channel, and which side wrote the blob. */
#define TAG_CONN_BASE 0x436f6e6e00000000ULL /* "Conn" */
#define TAG_ACK (1ULL << 40)
static uint64_t blob_tag(int channel, int conn_index, int from_sender) {
  return TAG_CONN_BASE | ((uint64_t)conn_index << 16) | ((uint64_t)channel << 1) | (uint64_t)from_sender;
}

/* A host-mode rank and a device rank cannot share a connection: the two ends agree on the
 * FIFO protocol but not on what surrounds it (host mode sizes the LL/LL128 buffers, channel
 * counts and the tuner's choices for CPUs), so they would disagree on slot sizes and on which
 * algorithm runs. Refused here, where both ends see it, rather than hang later. */
static ncclResult_t check_modes(const struct braid_comm* comm, int peer) {
  const struct braid_peer_info* me = &comm->peers[comm->rank];
  const struct braid_peer_info* p = &comm->peers[peer];
  if (me->host_mode == p->host_mode) return ncclSuccess;
  const struct braid_peer_info* host = me->host_mode ? me : p;
  const struct braid_peer_info* dev = me->host_mode ? p : me;
  BRAID_WARN(
      "Rank %d (pid %d on %s) runs in host mode but rank %d (pid %d on %s) is on CUDA device %d: a "
      "communicator cannot mix host-mode and GPU ranks (set BRAID_HOST_MODE=1 on every rank, or make a "
      "GPU usable to every rank)",
      host->rank, host->pid, host->hostname, dev->rank, dev->pid, dev->hostname, dev->cuda_dev);
  return ncclInvalidUsage;
}

static ncclResult_t pick_transport(struct braid_comm* comm, int peer, const struct braid_transport** t_p) {
  int n = 0;
  const struct braid_transport* const* transports = braid_transport_registry(&n);
  BRAID_CHECK(check_modes(comm, peer));
  for (int i = 0; i < n; i++) {
    if (transports[i]->can_connect(&comm->tctx, peer)) {
      *t_p = transports[i];
      return ncclSuccess;
    }
  }
  BRAID_WARN(
      "No transport can connect rank %d (host %s) to rank %d (host %s): shared memory needs the same "
      "host and /dev/shm%s",
      comm->rank, comm->peers[comm->rank].hostname, peer, comm->peers[peer].hostname,
      braid_param_int(BRAID_PARAM_SHM_DISABLE) == 1 ? " and NCCL_SHM_DISABLE=1 turned it off" : "");
  return ncclSystemError;
}

/* NCCL's INFO line for a connection: a proxied transport's ends each log their side ("[send]
 * via NET/Socket/0", "[receive] ..."); other transports log once, on the sender. */
static void log_connection(const struct braid_comm* comm, int channel, int conn_index, int peer, int is_send,
                           const struct braid_connector* c) {
  const struct braid_transport* t = c->transport;
  /* [n] after a rank: its CUDA device (NCCL: the NVML index); host mode: local rank, rank */
  int me_n = comm->host_mode ? comm->local_rank : comm->cuda_dev;
  int peer_n = comm->host_mode ? peer : comm->peers[peer].cuda_dev;
  uint64_t subsys = (conn_index ? BRAID_LOG_P2P : BRAID_LOG_INIT) | t->log_subsys;
  const char* desc = t->desc ? t->desc(c) : "?";
  if (t->caps & BRAID_TRANSPORT_CAP_PROXIED)
    BRAID_INFO(subsys, "Channel %02d/%d : %d[%d] -> %d[%d] [%s] via %s/%s", channel, conn_index,
               is_send ? comm->rank : peer, is_send ? me_n : peer_n, is_send ? peer : comm->rank,
               is_send ? peer_n : me_n, is_send ? "send" : "receive", t->name, desc);
  else if (is_send)
    BRAID_INFO(subsys, "Channel %02d/%d : %d[%d] -> %d[%d] via %s/%s", channel, conn_index, comm->rank, me_n, peer,
               peer_n, t->name, desc);
}

/* Phase 1 for one direction: local setup, blob to the peer. */
static ncclResult_t post_one(struct braid_comm* comm, int channel, int conn_index, int peer, int is_send,
                             struct braid_connector* c, int64_t deadline) {
  struct braid_connect_blob blob = {{0}}; /* bytes a transport leaves unset still cross the wire */
  ctx_build(comm);
  BRAID_CHECK(pick_transport(comm, peer, &c->transport));
  int id = channel + conn_index * BRAID_MAX_CHANNELS;
  if (is_send)
    BRAID_CHECK(c->transport->send_setup(&comm->tctx, peer, id, c, &blob));
  else
    BRAID_CHECK(c->transport->recv_setup(&comm->tctx, peer, id, c, &blob));
  return braid_bootstrap_send_until(comm->bootstrap, peer, blob_tag(channel, conn_index, is_send), &blob, sizeof(blob),
                                    deadline);
}

/* Phase 2: the peer's blob, connect. */
static ncclResult_t finish_one(struct braid_comm* comm, int channel, int conn_index, int peer, int is_send,
                               struct braid_connector* c, int64_t deadline) {
  struct braid_connect_blob blob;
  uint64_t ack_tag = blob_tag(channel, conn_index, 1) | TAG_ACK;
  BRAID_CHECK(braid_bootstrap_recv_until(comm->bootstrap, peer, blob_tag(channel, conn_index, !is_send), &blob,
                                         sizeof(blob), deadline));
  /* The sender acknowledges once it holds the receiver's memory, and the receiver waits for
   * that: until then the receiver must not free it (a rank whose only receive has 0 bytes
   * could otherwise finish and destroy before the sender mapped the FIFO). Senders finish
   * before receivers in every phase, so the wait cannot close a cycle. */
  char ack = 1;
  if (is_send) {
    BRAID_CHECK(c->transport->send_connect(&comm->tctx, c, &blob));
    BRAID_CHECK(braid_bootstrap_send_until(comm->bootstrap, peer, ack_tag, &ack, 1, deadline));
  } else {
    BRAID_CHECK(c->transport->recv_connect(&comm->tctx, c, &blob));
    BRAID_CHECK(braid_bootstrap_recv_until(comm->bootstrap, peer, ack_tag, &ack, 1, deadline));
  }
  c->connected = 1;
  __atomic_add_fetch(&comm->conn_gen, 1, __ATOMIC_RELEASE); /* the flight recorder's counter list */
  log_connection(comm, channel, conn_index, peer, is_send, c);
  return ncclSuccess;
}

/* One phase for one connection: POST runs both sides' setup; SENDS and RECVS finish only
 * the side they name, so every sender everywhere acknowledges before any receiver waits. */
static ncclResult_t phase_until(struct braid_comm* comm, int phase, int channel, int conn_index, int peer, int is_send,
                                struct braid_connector* c, int64_t deadline) {
  if (phase == BRAID_CONNECT_POST) return post_one(comm, channel, conn_index, peer, is_send, c, deadline);
  if ((phase == BRAID_CONNECT_SENDS) != is_send) return ncclSuccess;
  return finish_one(comm, channel, conn_index, peer, is_send, c, deadline);
}

/* Init's and first-use connections: the bootstrap's own deadline (init's, none later). */
static ncclResult_t phase_one(struct braid_comm* comm, int phase, int channel, int conn_index, int peer, int is_send,
                              struct braid_connector* c) {
  return phase_until(comm, phase, channel, conn_index, peer, is_send, c, 0);
}

ncclResult_t braid_connect_rings(struct braid_comm* comm, int64_t deadline) {
  ctx_build(comm);
  if (comm->nranks == 1) return ncclSuccess;
  for (int phase = BRAID_CONNECT_POST; phase <= BRAID_CONNECT_RECVS; phase++) {
    for (int c = 0; c < comm->nchannels; c++) {
      struct braid_channel* ch = &comm->channels[c];
      BRAID_CHECK(phase_until(comm, phase, c, 0, ch->dev.ring.next, 1, &ch->ring_send, deadline));
      BRAID_CHECK(phase_until(comm, phase, c, 0, ch->dev.ring.prev, 0, &ch->ring_recv, deadline));
    }
  }
  for (int c = 0; c < comm->nchannels; c++) {
    comm->channels[c].dev.ring_send = &comm->channels[c].ring_send.conn;
    comm->channels[c].dev.ring_recv = &comm->channels[c].ring_recv.conn;
  }
  /* Dead peers and BRAID_TIMEOUT, host mode and device (core/watchdog.c). */
  return braid_watchdog_start(comm);
}

ncclResult_t braid_connect_p2p(struct braid_comm* comm, int channel, int phase, const int* send_peers, int nsend,
                               const int* recv_peers, int nrecv) {
  struct braid_channel* ch = &comm->channels[channel];
  for (int i = 0; i < nsend; i++) {
    int peer = send_peers[i];
    BRAID_CHECK(phase_one(comm, phase, channel, 1, peer, 1, &ch->p2p_send[peer]));
    if (phase == BRAID_CONNECT_SENDS) ch->p2p_send_dev[peer] = &ch->p2p_send[peer].conn;
  }
  for (int i = 0; i < nrecv; i++) {
    int peer = recv_peers[i];
    BRAID_CHECK(phase_one(comm, phase, channel, 1, peer, 0, &ch->p2p_recv[peer]));
    if (phase == BRAID_CONNECT_RECVS) ch->p2p_recv_dev[peer] = &ch->p2p_recv[peer].conn;
  }
  return ncclSuccess;
}

/* Tree links of a channel: the parent, then the children, each a send and a receive
 * connection (connection index 2, so a tree peer that is also a ring neighbour gets its own). */
#define TREE_CONN 2
ncclResult_t braid_connect_trees(struct braid_comm* comm, int phase) {
  for (int c = 0; c < comm->nchannels; c++) {
    struct braid_channel* ch = &comm->channels[c];
    const struct braid_dev_tree* t = &ch->dev.tree;
    if (t->up >= 0) {
      BRAID_CHECK(phase_one(comm, phase, c, TREE_CONN, t->up, 1, &ch->tree_up_send));
      BRAID_CHECK(phase_one(comm, phase, c, TREE_CONN, t->up, 0, &ch->tree_up_recv));
    }
    for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) {
      if (t->down[d] < 0) continue;
      BRAID_CHECK(phase_one(comm, phase, c, TREE_CONN, t->down[d], 1, &ch->tree_down_send[d]));
      BRAID_CHECK(phase_one(comm, phase, c, TREE_CONN, t->down[d], 0, &ch->tree_down_recv[d]));
    }
    if (phase == BRAID_CONNECT_RECVS) {
      ch->dev.tree_up_send = t->up >= 0 ? &ch->tree_up_send.conn : NULL;
      ch->dev.tree_up_recv = t->up >= 0 ? &ch->tree_up_recv.conn : NULL;
      for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) {
        ch->dev.tree_down_send[d] = t->down[d] >= 0 ? &ch->tree_down_send[d].conn : NULL;
        ch->dev.tree_down_recv[d] = t->down[d] >= 0 ? &ch->tree_down_recv[d].conn : NULL;
      }
    }
  }
  if (phase == BRAID_CONNECT_RECVS) {
    comm->trees_connected = 1;
    BRAID_INFO(BRAID_LOG_INIT, "Connected all trees");
  }
  return ncclSuccess;
}

static void free_connector(struct braid_connector* c, int is_send) {
  if (c->transport == NULL) return;
  if (is_send)
    c->transport->send_free(c);
  else
    c->transport->recv_free(c);
  memset(c, 0, sizeof(*c));
}

void braid_connect_free(struct braid_comm* comm) {
  braid_watchdog_stop(comm);
  __atomic_add_fetch(&comm->conn_gen, 1, __ATOMIC_RELEASE);
  for (int c = 0; c < comm->nchannels; c++) {
    struct braid_channel* ch = &comm->channels[c];
    free_connector(&ch->ring_send, 1);
    free_connector(&ch->ring_recv, 0);
    free_connector(&ch->tree_up_send, 1);
    free_connector(&ch->tree_up_recv, 0);
    for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) {
      free_connector(&ch->tree_down_send[d], 1);
      free_connector(&ch->tree_down_recv[d], 0);
    }
    for (int p = 0; (ch->p2p_send || ch->p2p_recv) && p < comm->nranks; p++) { /* either may be missing */
      if (ch->p2p_send) free_connector(&ch->p2p_send[p], 1);
      if (ch->p2p_recv) free_connector(&ch->p2p_recv[p], 0);
    }
  }
}
