/*
 * topo_local.c - which NIC a GPU uses and which GPU a NIC belongs to, NCCL's rules
 * (ncclTopoGetLocal, ncclTopoGetLocalNet, ncclTopoGetLocalGpu with NCCL_NETDEVS_POLICY=AUTO):
 *
 *   the local NICs of a GPU are those its widest paths reach, the closest type among them;
 *   GPU g on channel c takes local NIC number ((dev mirrored when their count is a power of
 *   two) + c mod ceil(NICs / GPUs sharing them)) mod NICs, dev being its NVML index;
 *   a NIC's GPU is the first of its local GPUs that takes it on some channel.
 *
 * The channel search starts rings at these NICs and PXN relays through these GPUs.
 */
#include "topo/topo.h"

#define MAX_CHANNELS 64

int braid_topo_local(const struct braid_topo_system* sys, int from, int kind, int* out, int max) {
  float best_bw = 0;
  int best_type = BRAID_PATH_DIS, n = 0;
  for (int i = 0; i < sys->nnodes; i++) {
    if (sys->nodes[i].kind != kind) continue;
    const struct braid_topo_path* p = braid_topo_path(sys, from, i);
    if (p->bw > best_bw || (p->bw == best_bw && p->type < best_type)) {
      best_bw = p->bw;
      best_type = p->type;
      n = 0;
    }
    if (p->bw == best_bw && p->type == best_type && n < max) out[n++] = i;
  }
  return n;
}

static int mirror_bits(int v, int pow2) {
  int m = 0;
  for (int b = 1, mb = pow2 >> 1; b < pow2; b <<= 1, mb >>= 1)
    if (v & b) m |= mb;
  return m;
}

static int nic_index(const struct braid_topo_system* sys, int node) {
  for (int i = 0; i < sys->nnics; i++)
    if (sys->nics[i] == node) return i;
  return -1;
}

int braid_topo_local_nic(const struct braid_topo_system* sys, int g, int c) {
  int nets[256], gpus[256];
  if (g < 0 || g >= sys->ngpus) return -1;
  int gn = sys->gpus[g];
  int nnets = braid_topo_local(sys, gn, BRAID_TOPO_NIC, nets, 256);
  if (nnets == 0) return -1;
  int ngpus = braid_topo_local(sys, nets[0], BRAID_TOPO_GPU, gpus, 256);
  int per_gpu = ngpus > 0 ? (nnets + ngpus - 1) / ngpus : 1;
  int net = sys->nodes[gn].dev < 0 ? 0 : sys->nodes[gn].dev;
  if ((nnets & (nnets - 1)) == 0) net = mirror_bits(net, nnets);
  net += c % per_gpu;
  return nic_index(sys, nets[net % nnets]);
}

int braid_topo_local_gpu(const struct braid_topo_system* sys, int nic) {
  int gpus[256];
  if (nic < 0 || nic >= sys->nnics) return -1;
  int ngpus = braid_topo_local(sys, sys->nics[nic], BRAID_TOPO_GPU, gpus, 256);
  for (int c = 0; c < MAX_CHANNELS; c++)
    for (int i = 0; i < ngpus; i++) {
      int g = -1;
      for (int k = 0; k < sys->ngpus; k++)
        if (sys->gpus[k] == gpus[i]) g = k;
      if (g >= 0 && braid_topo_local_nic(sys, g, c) == nic) return g;
    }
  return -1;
}
