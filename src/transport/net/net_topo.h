/*
 * net_topo.h - the chosen network as the topology sees it: init chooses the plugin before it
 * detects the machine (as NCCL's ncclNetInit comes before ncclTopoGetSystem), so the NET
 * nodes, the channels' NICs and the tuner's network rows come from the plugin's properties.
 */
#ifndef BRAID_NET_TOPO_H
#define BRAID_NET_TOPO_H

#include "nccl.h"
#include "topo/topo.h"

/* Choose the network (braid_net_plugin_get: NCCL_NET, NCCL_IB_DISABLE, NCCL_NET_PLUGIN) and
 * list its devices: *devs_p (malloc'd, the caller frees) holds nets->ndevs entries;
 * nets->plugin is the plugin's name (static). Fails as the choice fails. */
ncclResult_t braid_net_topo_devices(struct braid_topo_nets* nets, struct braid_topo_net_dev** devs_p);

/* The plugin device a connection of channel `channel` (+ index x BRAID_MAX_CHANNELS) to
 * `peer` uses (net_dev.c): its ring's NIC from the graph, else the GPU's local NIC, else
 * channel mod ndev. */
struct braid_transport_ctx;
int braid_net_dev_pick(const struct braid_transport_ctx* t, const char* net_name, int peer, int channel, int is_send,
                       int ndev);

#endif /* BRAID_NET_TOPO_H */
