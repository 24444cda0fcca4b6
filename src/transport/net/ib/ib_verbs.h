/*
 * ib_verbs.h - libibverbs, loaded at run time (libnccl.so.2 runs where rdma-core is absent):
 * the entry points net_ib uses, resolved with dlsym from BRAID_IB_VERBS_LIBRARY (default
 * libibverbs.so.1; tests point it at the emulated provider, tests/ibemu/). Built when
 * Debian's libibverbs-dev headers are found (BRAID_IB_BUILT); they give only types.
 */
#ifndef BRAID_IB_VERBS_H
#define BRAID_IB_VERBS_H

#include <infiniband/verbs.h>

#include "nccl.h"

struct braid_ibv {
  struct ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(struct ibv_device**);
  const char* (*get_device_name)(struct ibv_device*);
  struct ibv_context* (*open_device)(struct ibv_device*);
  int (*close_device)(struct ibv_context*);
  int (*query_device)(struct ibv_context*, struct ibv_device_attr*);
  int (*query_port)(struct ibv_context*, uint8_t, struct ibv_port_attr*);
  int (*query_gid)(struct ibv_context*, uint8_t, int, union ibv_gid*);
  struct ibv_pd* (*alloc_pd)(struct ibv_context*);
  int (*dealloc_pd)(struct ibv_pd*);
  struct ibv_cq* (*create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
  int (*destroy_cq)(struct ibv_cq*);
  struct ibv_qp* (*create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*);
  int (*destroy_qp)(struct ibv_qp*);
  int (*modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int);
  struct ibv_mr* (*reg_mr)(struct ibv_pd*, void*, size_t, int);
  int (*dereg_mr)(struct ibv_mr*);
  /* optional (rdma-core 32+): the GID's type, for RoCE v2 selection; NULL when absent */
  int (*query_gid_ex)(struct ibv_context*, uint32_t, uint32_t, struct ibv_gid_entry*, uint32_t, size_t);
  /* optional (rdma-core 34+): dma-buf registration (GPUDirect RDMA); NULL when absent */
  struct ibv_mr* (*reg_dmabuf_mr)(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int);
};
/* post_send, post_recv and poll_cq are verbs.h's inline calls through ibv_context.ops. */

/* The loaded library (once per process; a failed load is not retried). ncclSystemError with
 * an INFO line (no WARN: no verbs library simply means no IB) when it cannot be loaded;
 * *lib_p (may be NULL): the file it tried. */
ncclResult_t braid_ibv_load(const struct braid_ibv** ibv_p, const char** lib_p);
/* Test hook: forget the loaded library, so the next load reads BRAID_IB_VERBS_LIBRARY again. */
void braid_ibv_reset(void);

#endif /* BRAID_IB_VERBS_H */
