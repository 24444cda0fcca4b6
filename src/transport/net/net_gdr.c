/*
 * net_gdr.c - GPUDirect RDMA decisions of the network transport (net_gdr.h): the rule table
 * (braid_net_gdr_decide, pure) and what feeds it for one connection end (the plugin's device
 * properties, the device layer, the topology, the environment).
 */
#include "transport/net/net_gdr.h"

#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "device/device.h"
#include "topo/topo.h"
#include "transport/net/net.h"
#include "transport/transport.h"

static const char* path_name(int type) {
  static const char* const names[] = {
#define BRAID_X(id, name, doc) name,
      BRAID_PATH_TYPES(BRAID_X)
#undef BRAID_X
  };
  return type >= 0 && type < BRAID_NUM_PATH_TYPES ? names[type] : "?";
}

int braid_net_gdr_decide(const struct braid_net_gdr_in* in, char* why, size_t len) {
  char none[1];
  if (why == NULL || len == 0) why = none, len = sizeof(none);
  int nic = (in->nic_ptr & BRAID_NET_PTR_CUDA) || ((in->nic_ptr & BRAID_NET_PTR_DMABUF) && in->gpu_dmabuf);
  if (!nic) {
    snprintf(why, len, "%s",
             in->nic_ptr & BRAID_NET_PTR_DMABUF ? "the GPU exports no dma-buf" : "the NIC reaches host memory only");
    return 0;
  }
  if (in->read) {
    if (in->gdr_read == 0) {
      snprintf(why, len, "NCCL_NET_GDR_READ=0");
      return 0;
    }
    if (in->gdr_read == BRAID_PARAM_UNSET && in->sm < 80 && !in->nvlink_peer) {
      snprintf(why, len, "sends: sm_%d before sm_80 without an NVLink peer", in->sm);
      return 0;
    }
  }
  if (in->distance > in->level) {
    snprintf(why, len, "distance %s > %s", path_name(in->distance), path_name(in->level));
    return 0;
  }
  snprintf(why, len, "distance %s <= %s, read %d", path_name(in->distance), path_name(in->level), in->read);
  return 1;
}

int braid_net_gdr_need_flush(int sm, int force_flush, int flush_disable) {
  if (flush_disable) return 0;
  return force_flush || sm < 90;
}

/* The topology's NIC for the plugin's device (same name and port), or -1. */
static int topo_nic(const struct braid_topo_system* sys, const struct braid_net_props* props) {
  for (int i = 0; sys != NULL && props->name != NULL && i < sys->nnics; i++) {
    const struct braid_topo_node* n = &sys->nodes[sys->nics[i]];
    if (strcmp(n->name, props->name) == 0 && (n->port == props->port || n->port <= 0 || props->port <= 0)) return i;
  }
  return -1;
}

/* NCCL's "GPU Direct RDMA Enabled|Disabled for HCA" line, once per device and process. */
static void log_hca(const char* net_name, int dev, const struct braid_net_props* props, int capable) {
  static int logged[64];
  if (dev < 0 || dev >= 64 || __atomic_exchange_n(&logged[dev], 1, __ATOMIC_ACQ_REL)) return;
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/%s : GPU Direct RDMA %s for HCA %d '%s'", net_name,
             capable ? "Enabled" : "Disabled", dev, props->name != NULL ? props->name : "?");
}

ncclResult_t braid_net_gdr_choose(const struct braid_transport_ctx* t, const char* net_name, int dev,
                                  const struct braid_net_props* props, int is_send, int* gdr_p, int* flush_p) {
  const struct braid_device_ops* d = t->device;
  *gdr_p = *flush_p = 0;
  if (d == NULL) return ncclSuccess; /* host mode: host memory is all there is */
  struct braid_net_gdr_in in;
  memset(&in, 0, sizeof(in));
  in.nic_ptr = props->ptrSupport;
  in.read = is_send;
  in.gdr_read = braid_param_int(BRAID_PARAM_NET_GDR_READ);
  if (d->dmabuf_supported != NULL) BRAID_CHECK(d->dmabuf_supported(t->cuda_dev, &in.gpu_dmabuf));
  BRAID_CHECK(d->compute_capability(t->cuda_dev, &in.sm));
  BRAID_CHECK(braid_topo_gdr_level(&in.level));
  int64_t bus = -1;
  BRAID_CHECK(d->bus_id(t->cuda_dev, &bus, NULL, 0));
  const struct braid_topo_system* sys = t->topo;
  int nic = topo_nic(sys, props), g = sys != NULL ? braid_topo_gpu_find(sys, bus) : -1;
  in.distance = nic >= 0 ? braid_topo_gdr_distance(sys, bus, nic) : -1;
  if (in.distance < 0) in.distance = BRAID_PATH_PHB; /* not placed: attached to the CPU, as NCCL does */
  in.nvlink_peer = sys == NULL || g < 0 || sys->ngpus <= 1 || sys->nodes[sys->gpus[g]].nvl_count > 0;
  log_hca(net_name, dev, props,
          (in.nic_ptr & BRAID_NET_PTR_CUDA) || ((in.nic_ptr & BRAID_NET_PTR_DMABUF) && in.gpu_dmabuf));
  char why[96];
  *gdr_p = braid_net_gdr_decide(&in, why, sizeof(why));
  BRAID_TRACE(BRAID_LOG_NET | BRAID_LOG_GRAPH, "GPU Direct RDMA %s for GPU %d (rank %d) - NET/%s/%d (%s)",
              *gdr_p ? "Enabled" : "Disabled", t->cuda_dev, t->rank, net_name, dev, why);
  if (*gdr_p && !is_send)
    *flush_p = braid_net_gdr_need_flush(in.sm, braid_param_int(BRAID_PARAM_NET_FORCE_FLUSH) == 1,
                                        braid_param_int(BRAID_PARAM_GDR_FLUSH_DISABLE) == 1);
  return ncclSuccess;
}
