/*
 * ib_net.h - private to the "IB" net plugin (ib_plugin.c: devices, contexts, listen / connect /
 * accept, close, the table; ib_io.c: requests, completions, memory registration, the sender's
 * last word, status).
 *
 * A connection is nqps RC QPs (NCCL_IB_QPS_PER_CONNECTION) on one port, one CQ, and one TCP
 * control socket between the two ends (braid's socket layer, on the bootstrap's interface):
 *   - the receiver listens and publishes {magic, address} as its handle; the sender connects,
 *     sends the handshake {secret, BRAID_SOCKET_TYPE_NET, IB_HS_ARG} and its ib_info (QP numbers,
 *     PSNs, LID, GID, MTU, and where its clear-to-send FIFO is: address, rkey), and its connect
 *     is done; the receiver's accept creates its QPs, takes them to RTS and answers its ib_info;
 *     the sender takes its QPs to RTS when that arrives (first isend or test);
 *   - the sender says "ready" on the control socket once its QPs are in RTS (net_ctrl.h): an
 *     HCA drops RDMA writes to a QP still in INIT, and the requester would only retry after
 *     the ack timeout (seconds at NCCL_IB_TIMEOUT 20) or give up, so until then the receiver
 *     keeps its clear-to-sends (test() and irecv() send them once "ready" is read);
 *   - data: the receiver's irecv posts a receive on the QP(s) the request uses and RDMA-writes
 *     {addr, rkey, size, tag, idx} into slot idx % 32 of the sender's FIFO (idx last: the slot is
 *     whole once idx is); the sender's isend waits for slot idx == its request number + 1, then
 *     writes the data with RDMA WRITE_WITH_IMM (imm: bytes; NCCL_IB_ADAPTIVE_ROUTING: RDMA
 *     WRITE, then a 0-byte WRITE_WITH_IMM). Request i uses QP i % nqps, or with
 *     NCCL_IB_SPLIT_DATA_ON_QPS=1 every QP carries a slice of it (each with its own imm);
 *   - completions are polled by test() (the progress engine's item, or the executor that waits);
 *     every WR of a request is signaled and counted back; an error completion fails the comm;
 *   - the control socket then carries only the end (net_ctrl.h, shared with UCX): a goodbye
 *     {IB_MSG_MAGIC, BYE, messages sent} or an abort notice; an EOF without either is a dead peer.
 */
#ifndef BRAID_NET_IB_H
#define BRAID_NET_IB_H

#include <pthread.h>
#include <stdint.h>

#include "base/socket.h"
#include "transport/net/ib/ib_devices.h"
#include "transport/net/ib/ib_qp.h"
#include "transport/net/net.h"
#include "transport/net/net_ctrl.h"

#define IB_HANDLE_MAGIC 0x62726169642d6962ULL /* "braid-ib" */
#define IB_MSG_MAGIC 0x49424e54u
#define IB_HS_ARG 0x4942
#define IB_MAX_QPS 128
#define IB_HANDSHAKE_MS 10000
#define IB_NREQ BRAID_NET_MAX_REQUESTS

/* One port braid uses, opened for the life of the process. */
struct ib_dev {
  struct braid_ib_port port;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  int gid_index;
  union ibv_gid gid;
  uint16_t lid;
  uint8_t mtu;          /* enum ibv_mtu: the port's active MTU */
  int ar;               /* adaptive routing: data as RDMA WRITE + a 0-byte WRITE_WITH_IMM */
  int peermem, dmabuf;  /* GPUDirect RDMA: a peer-memory module; dma-buf registration (ib_gdr.c) */
  pthread_mutex_t lock; /* the registration cache */
  struct ib_mr* cache;
};

struct ib_global {
  const struct braid_ibv* ibv;
  int inited, ndev;
  struct ib_dev dev[BRAID_IB_MAX_PORTS];
  int nqps, split, timeout, retry_cnt, sl, tc, ro;
  char ifname[BRAID_SOCKET_NAME_MAX];
  union braid_sockaddr ifaddr;
};
extern struct ib_global ib;

/* A registration (cached per device: pages, reference counted). */
struct ib_mr {
  struct ib_mr* next;
  struct ib_dev* dev;
  struct ibv_mr* mr;
  uintptr_t base;
  size_t len;
  int refs;
  int cuda; /* device memory (GPUDirect RDMA) */
};

struct ib_handle {
  uint64_t magic;
  union braid_sockaddr addr;
};

/* One end, as the other needs it (over the control socket). */
struct ib_info {
  uint32_t magic, nqps;
  uint16_t lid;
  uint8_t mtu, split;
  uint32_t pad;
  union ibv_gid gid;
  uint64_t fifo_addr; /* sender: its FIFO */
  uint32_t fifo_rkey, pad2;
  uint32_t qpn[IB_MAX_QPS];
  uint32_t psn[IB_MAX_QPS];
};

/* A clear-to-send slot (idx last). */
struct ib_fifo_slot {
  uint64_t addr;
  uint32_t rkey, size;
  int32_t tag;
  uint32_t pad;
  uint64_t idx;
};

struct ib_comm;
struct ib_req {
  struct ib_comm* comm;
  int used;
  int pending; /* completions still to come */
  int flush;   /* an iflush read (ib_gdr.c), not a message */
  size_t size; /* receive: bytes (sum of the imm values) */
};

struct ib_comm {
  int is_send;
  struct ib_dev* dev;
  struct braid_net_ctrl ctl; /* the control socket and the end of the connection (net_ctrl.h) */
  struct braid_ib_qp_cfg cfg;
  struct ibv_cq* cq;
  int nqps, split;
  struct ibv_qp* qp[IB_MAX_QPS];
  int ready;           /* QPs in RTS, the peer's info known */
  struct ib_info mine; /* what we told the peer */
  struct ib_info peer; /* sender: read from the receiver after connect */
  size_t peer_off;
  struct ib_fifo_slot fifo[IB_NREQ]
      __attribute__((aligned(64))); /* sender: the receiver writes it; receiver: staging */
  struct ibv_mr* fifo_mr;
  struct ibv_qp* flush_qp; /* receiver with GPUDirect RDMA: connected to itself (ib_gdr.c) */
  struct ibv_mr* flush_mr;
  char flush_byte;
  struct ib_req reqs[IB_NREQ];
  uint64_t req_head, req_tail;
  uint64_t recv_msgs;        /* receiver: irecvs posted, the clear-to-send index (requests count flushes too) */
  uint64_t cts_sent;         /* receiver: clear-to-sends written (< recv_msgs until the sender is ready) */
  uint32_t cts_req[IB_NREQ]; /* receiver: message i's request slot, at i % IB_NREQ */
};

/* ib_plugin.c */
ncclResult_t ib_comm_rts(struct ib_comm* c, const struct ib_info* peer); /* RTR + RTS every QP */
/* Record why the comm failed (first reason wins); returns ncclRemoteError. */
#define ib_fail(c, ...) braid_net_ctrl_fail(&(c)->ctl, __VA_ARGS__)
/* ib_io.c */
ncclResult_t ib_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t ib_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
ncclResult_t ib_test(void* request, int* done, size_t* sizes);
ncclResult_t ib_wait_fds(void* comm, struct pollfd* fds, int max, int* n);
ncclResult_t ib_get_status(void* comm, struct braid_net_status* st);
ncclResult_t ib_finish_send(void* comm);
ncclResult_t ib_abort_send(void* comm, int code);
ncclResult_t ib_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t ib_dereg_mr(void* comm, void* mhandle);
/* Sender: read the receiver's info and go to RTS; 1 ready, 0 not yet, -1 failed. */
int ib_sender_ready(struct ib_comm* c);
/* A free request slot of c (NULL: IB_NREQ in flight). */
struct ib_req* ib_req_new(struct ib_comm* c);
/* ib_gdr.c: GPUDirect RDMA (see there). */
void ib_gdr_probe(struct ib_dev* d);
int ib_gdr_ptr_support(const struct ib_dev* d); /* BRAID_NET_PTR_CUDA / _DMABUF */
struct ibv_mr* ib_gdr_reg(struct ib_dev* d, uintptr_t base, size_t len, int access);
ncclResult_t ib_gdr_flush_open(struct ib_comm* c);
void ib_gdr_flush_close(struct ib_comm* c);
ncclResult_t ib_iflush(void* comm, int n, void** data, size_t* sizes, void** mhandles, void** request);

#endif /* BRAID_NET_IB_H */
