/*
 * net_dev.c - which device of the plugin a connection uses, as NCCL's ncclTopoGetNetDev:
 * a ring connection between nodes takes the NIC the channel search gave its channel (graph.h
 * net_send / net_recv: rings pick NICs by locality and bandwidth), any other connection (tree
 * links off the ring, point-to-point) the GPU's local NIC for the channel (NCCL's
 * ncclTopoGetLocalNet). Both need the topology built from this plugin's devices (init does so
 * across nodes, net_topo.h); otherwise, and in host mode off the ring, channel mod devices.
 */
#include <string.h>

#include "topo/graph.h"
#include "topo/topo.h"
#include "transport/net/net_topo.h"
#include "transport/transport.h"

int braid_net_dev_pick(const struct braid_transport_ctx* t, const char* net_name, int peer, int channel, int is_send,
                       int ndev) {
  const struct braid_channel_graph* g = t->graph;
  const struct braid_topo_system* sys = t->topo;
  int ch = channel % BRAID_MAX_CHANNELS, nic = -1;
  if (ndev < 1) return 0;
  if (g == NULL || sys == NULL || g->nchannels < 1 || strcmp(sys->net_plugin, net_name) != 0) return ch % ndev;
  int cell = (ch % g->nchannels) * g->nranks + t->rank;
  if (is_send && g->ring_next[cell] == peer) nic = g->net_send[cell];
  if (!is_send && g->ring_prev[cell] == peer) nic = g->net_recv[cell];
  if (nic < 0) {
    int gpu = t->peers[t->rank].bus_id >= 0 ? braid_topo_gpu_find(sys, t->peers[t->rank].bus_id) : -1;
    if (gpu >= 0) nic = braid_topo_local_nic(sys, gpu, ch);
  }
  if (nic < 0 || nic >= sys->nnics) return ch % ndev;
  int dev = sys->nodes[sys->nics[nic]].dev;
  return dev >= 0 && dev < ndev ? dev : ch % ndev;
}
