/*
 * ibemu.h - private to the emulated verbs provider (tests/ibemu/, test-only; see README.md).
 *
 * RDMA between processes: a WR's bytes go into (or come from) the peer process's memory with
 * process_vm_writev / process_vm_readv (same user; no shared mapping). The peer's QP is found
 * by its QP number in a registry file shared by every process (ibemu_data.c); each QP's
 * incoming ring (WRITE_WITH_IMM notices) and each process's MR table live in ordinary memory
 * that the peer reads and writes the same way.
 */
#ifndef BRAID_IBEMU_H
#define BRAID_IBEMU_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#define EMU_QP_MAGIC 0x6962656d75515021ULL
#define EMU_RING 1024     /* incoming WRITE_WITH_IMM notices per QP */
#define EMU_RQ 1024       /* posted receives per QP */
#define EMU_RETRY_MS 2000 /* how long a request waits for a responder QP not yet in RTR */
#define EMU_CQ 8192       /* completions a CQ holds */
#define EMU_MR_MAX 4096
#define EMU_MR_IDX(key) ((key)&0xfffu)

struct emu_in {
  uint32_t imm, len;
};

struct emu_qp {
  struct ibv_qp qp; /* first: ibv_qp* <-> emu_qp* */
  /* written by the peer process */
  uint64_t magic;
  uint64_t in_head;  /* notices produced */
  uint64_t in_error; /* the peer failed a request of ours: this QP goes to ERR */
  struct emu_in in[EMU_RING];
  uint64_t in_tail; /* read by the peer (room in the ring) */
  /* local */
  int access; /* qp_access_flags from INIT */
  uint64_t rq[EMU_RQ];
  uint64_t rq_head, rq_tail;
  int peer_pid; /* from the registry at RTR; 0: not found */
  uint32_t peer_qpn;
  uint64_t peer_qp, peer_mrt, peer_head;
  struct emu_qp* next_on_cq;
};

struct emu_cq {
  struct ibv_cq cq; /* first */
  pthread_mutex_t lock;
  struct ibv_wc wc[EMU_CQ];
  uint64_t head, tail;
  struct emu_qp* qps; /* QPs whose receive CQ this is */
};

struct emu_mr_slot {
  uint64_t addr, len; /* the region as keys address it (a dma-buf region: its iova) */
  uint32_t key;
  int access;
  int valid;
  int dmabuf;    /* ibv_reg_dmabuf_mr: the bytes are a mapping of the dma-buf at `host` */
  uint64_t host; /* where addr lives in the owner process (== addr unless dmabuf) */
};

extern struct emu_mr_slot ibemu_mrs[EMU_MR_MAX];
extern pthread_mutex_t ibemu_lock; /* MR table, CQ lists */

int ibemu_fails(const char* call, const char* what);
int ibemu_port_is_eth(struct ibv_context* ctx, int port);
/* ibemu_data.c */
int ibemu_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad);
int ibemu_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad);
int ibemu_poll_cq(struct ibv_cq* cq, int n, struct ibv_wc* wc);
int ibemu_req_notify_cq(struct ibv_cq* cq, int solicited);
/* The registry: publish / find / forget a QP number. */
int ibemu_registry_add(struct emu_qp* q);
int ibemu_registry_find(uint32_t qpn, int* pid, uint64_t* qp_addr, uint64_t* mrt_addr);
void ibemu_registry_del(struct emu_qp* q);
/* Hold the peer QP's lock while moving bytes through it; -1: it is gone (or stuck). */
int ibemu_peer_lock(uint32_t qpn, int pid, uint64_t qp);
void ibemu_peer_unlock(uint32_t qpn);
uint32_t ibemu_next_qpn(void);
/* Push a completion (under the CQ's lock). */
void ibemu_cq_push(struct emu_cq* cq, const struct ibv_wc* wc);

#endif /* BRAID_IBEMU_H */
