/*
 * init.c - communicator lifecycle: InitRank, InitRankConfig, InitAll, InitRankScalable, Split,
 * Shrink, Finalize, Destroy, Abort. Init is: bootstrap rendezvous, allgather of peer
 * identities, nodes and local ranks, channels and rings, ring connections. Non-blocking
 * communicators (config.blocking = 0) and inits inside a group run the same steps on a thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo/alltoall.h"
#include "base/api.h"
#include "base/check.h"
#include "base/fault.h"
#include "base/param.h"
#include "bootstrap/bootstrap.h"
#include "core/blame.h"
#include "core/comm.h"
#include "core/flight.h"
#include "core/group.h"
#include "core/init_internal.h"
#include "core/locality.h"
#include "core/mismatch.h"
#include "core/profile.h"
#include "core/sym/sym.h"
#include "device/device.h"
#include "device/launch.h"
#include "kernels/executor.h"
#include "topo/graph.h"
#include "topo/topo.h"
#include "topo/tuner.h"
#include "transport/net/net_topo.h"
#include "transport/registry.h"

/* Nodes: distinct host identities, numbered in order of their first rank. */
static ncclResult_t compute_nodes(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  int n = comm->nranks;
  BRAID_CALLOC_GOTO(comm->rank_to_node, n, res, out);
  comm->nnodes = 0;
  comm->local_nranks = 0;
  for (int r = 0; r < n; r++) {
    int node = -1;
    for (int q = 0; q < r && node < 0; q++)
      if (comm->peers[q].host_hash == comm->peers[r].host_hash) node = comm->rank_to_node[q];
    comm->rank_to_node[r] = node >= 0 ? node : comm->nnodes++;
  }
  comm->node = comm->rank_to_node[comm->rank];
  for (int r = 0; r < n; r++) {
    if (comm->rank_to_node[r] != comm->node) continue;
    if (r == comm->rank) comm->local_rank = comm->local_nranks;
    comm->local_nranks++;
  }
out:
  return res;
}

/* Cores per rank on the busiest machine: the CPUs its ranks may run on (the union of their
 * affinity masks) over their number. A machine is a running kernel, not an NCCL_HOSTID node:
 * fake nodes on one machine share its cores. Every rank computes the same value; 0 when some
 * machine has more ranks than cores, -1 when out of memory. */
static int cores_per_rank(const struct braid_comm* comm) {
  struct machine {
    uint64_t kernel_hash, cpus[BRAID_CPU_WORDS];
    int nranks;
  }* m = calloc((size_t)comm->nranks, sizeof(*m));
  int nm = 0, least = -1;
  if (m == NULL) return -1;
  for (int r = 0; r < comm->nranks; r++) {
    const struct braid_peer_info* p = &comm->peers[r];
    int i = 0;
    while (i < nm && m[i].kernel_hash != p->kernel_hash) i++;
    if (i == nm) m[nm++].kernel_hash = p->kernel_hash;
    for (int w = 0; w < BRAID_CPU_WORDS; w++) m[i].cpus[w] |= p->cpus[w];
    m[i].nranks++;
  }
  for (int i = 0; i < nm; i++) {
    int ncpu = 0;
    for (int w = 0; w < BRAID_CPU_WORDS; w++) ncpu += __builtin_popcountll(m[i].cpus[w]);
    if (ncpu == 0) ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN); /* affinity unknown */
    if (least < 0 || ncpu / m[i].nranks < least) least = ncpu / m[i].nranks;
  }
  free(m);
  return least;
}

/* Channel count: host mode gives each rank about one core per channel, counting every rank
 * that shares the machine (the graph may offer more; NCCL_MIN_NCHANNELS / config.minCTAs can
 * ask for more, reusing graph channels). On a GPU a channel is a thread block: the graph's
 * channels (the fake GPU runs blocks on host threads, so it keeps the host's count). */
static int default_nchannels(const struct braid_comm* comm, int cores) {
  int n = cores;
  if (comm->device != NULL && !(comm->device->caps & BRAID_DEVICE_CAP_HOST_THREADS)) n = comm->graph->nchannels;
  if (n < 1) n = 1;
  if (n > comm->graph->nchannels) n = comm->graph->nchannels;
  int64_t lo = braid_param_int(BRAID_PARAM_MIN_NCHANNELS), hi = braid_param_int(BRAID_PARAM_MAX_NCHANNELS);
  if (comm->config.minCTAs > n) n = comm->config.minCTAs;
  if (comm->config.maxCTAs < n) n = comm->config.maxCTAs;
  if (lo != BRAID_PARAM_UNSET && lo > n) n = (int)lo;
  if (hi != BRAID_PARAM_UNSET && hi < n) n = (int)hi;
  if (n < 1) n = 1;
  if (n > BRAID_MAX_CHANNELS) n = BRAID_MAX_CHANNELS;
  return n;
}

/* NCCL_TOPO_DUMP_FILE and NCCL_GRAPH_DUMP_FILE, each written by the rank its _RANK variable
 * names (default 0): the node's system with the rank of each local GPU, and the node's ring
 * and tree searches, in NCCL's formats (topo.h, graph.h). */
static ncclResult_t dump_files(const struct braid_comm* comm, const struct braid_topo_system* sys,
                               const struct braid_topo_rank* ranks, const struct braid_graph_node_info* info) {
  ncclResult_t res = ncclSuccess;
  int n = comm->nranks, nlocal = 0;
  int64_t* bus = NULL;
  int* who = NULL;
  BRAID_CALLOC_GOTO(bus, n, res, out);
  BRAID_CALLOC_GOTO(who, n, res, out);
  for (int r = 0; r < n; r++)
    if (ranks[r].node == comm->node) {
      bus[nlocal] = ranks[r].bus_id;
      who[nlocal++] = r;
    }
  BRAID_CHECK_GOTO(braid_topo_dump_env(sys, comm->rank, nlocal, bus, who), res, out);
  BRAID_CHECK_GOTO(braid_graph_dump_env(sys, n, ranks, comm->rank, info), res, out);
out:
  free(bus);
  free(who);
  return res;
}

/* This node's system. Across nodes the network is chosen first and its devices are the NICs
 * (net_topo.h), so the channels' NICs and the tuner's network rows are the plugin's. */
static ncclResult_t detect_system(const struct braid_comm* comm, struct braid_topo_system** sys_p) {
  struct braid_topo_nets nets = {0};
  struct braid_topo_net_dev* devs = NULL;
  if (comm->nnodes < 2) return braid_topo_detect(sys_p);
  BRAID_CHECK(braid_net_topo_devices(&nets, &devs));
  ncclResult_t res = braid_topo_detect_nets(&nets, sys_p);
  free(devs);
  return res;
}

/* Topology, channels and the tuner. Every rank searches its own node; the results are
 * allgathered so that every rank assembles the same graph (graph.h). */
static ncclResult_t setup_graph(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  int n = comm->nranks;
  struct braid_topo_system* sys = NULL;
  struct braid_topo_rank* ranks = NULL;
  struct braid_graph_node_info* infos = NULL;
  struct braid_graph_node_info* by_node = NULL;
  BRAID_CALLOC_GOTO(ranks, n, res, out);
  BRAID_CALLOC_GOTO(infos, n, res, out);
  BRAID_CALLOC_GOTO(by_node, comm->nnodes, res, out);
  for (int r = 0; r < n; r++) {
    int node = comm->rank_to_node[r];
    ranks[r] =
        (struct braid_topo_rank){r, comm->peers[r].host_hash, node, 0, comm->peers[r].cuda_dev, comm->peers[r].bus_id};
    for (int q = 0; q < r; q++) ranks[r].local_rank += comm->rank_to_node[q] == node;
  }
  BRAID_CHECK_GOTO(detect_system(comm, &sys), res, out);
  BRAID_CHECK_GOTO(braid_graph_node_search(sys, n, ranks, comm->node, &infos[comm->rank]), res, out);
  BRAID_CHECK_GOTO(dump_files(comm, sys, ranks, &infos[comm->rank]), res, out);
  BRAID_CHECK_GOTO(braid_bootstrap_allgather(comm->bootstrap, infos, sizeof(*infos)), res, out);
  for (int r = n - 1; r >= 0; r--) by_node[comm->rank_to_node[r]] = infos[r];
  BRAID_CHECK_GOTO(braid_graph_build(n, ranks, by_node, &comm->graph), res, out);
  BRAID_CHECK_GOTO(braid_tuner_init(comm->graph, n, comm->nnodes, &comm->tuner), res, out);
  BRAID_CHECK_GOTO(braid_tuner_attach_plugin(comm->tuner, comm->comm_hash), res, out);
  braid_tuner_set_log(comm->tuner, comm->rank == 0);
  if (comm->rank == 0) braid_tuner_log_model(comm->tuner);
  BRAID_CHECK_GOTO(braid_profile_open(comm), res, out);
  comm->topo = sys; /* the transports decide on its paths (P2P levels) */
  sys = NULL;
out:
  braid_topo_free(sys);
  free(by_node);
  free(infos);
  free(ranks);
  return res;
}

/* Channel c runs graph channel c mod the graph's count: its ring and its tree. */
static ncclResult_t setup_channels(struct braid_comm* comm) {
  ncclResult_t res = ncclSuccess;
  int n = comm->nranks;
  const struct braid_channel_graph* g = comm->graph;
  int host_threads = comm->device == NULL || (comm->device->caps & BRAID_DEVICE_CAP_HOST_THREADS);
  int cores = host_threads ? cores_per_rank(comm) : g->nchannels;
  comm->cores_per_rank = host_threads ? cores : -1; /* p2p rounds (plan.c) */
  comm->p2p_round_group =
      braid_p2p_round_group(n, (int)braid_param_int(BRAID_PARAM_P2P_ROUND_GROUP), comm->cores_per_rank);
  int group = comm->p2p_round_group;
  if (group > 1 && n > 2)
    BRAID_INFO(BRAID_LOG_INIT, "P2P: %d rounds progressed together (%s)", group < n ? group : n,
               comm->cores_per_rank == 0 ? "ranks outnumber cores" : "BRAID_P2P_ROUND_GROUP");
  comm->nchannels = default_nchannels(comm, cores);
  braid_tuner_cap_channels(comm->tuner, comm->nchannels);
  if (host_threads && cores >= 0 && comm->nchannels < g->nchannels && cores < g->nchannels)
    BRAID_INFO(BRAID_LOG_INIT, "Using %d of %d channels: host mode runs a thread per channel, %d core%s per rank here",
               comm->nchannels, g->nchannels, cores, cores == 1 ? "" : "s");
  for (int c = 0; c < comm->nchannels; c++) {
    struct braid_channel* ch = &comm->channels[c];
    int gc = c % g->nchannels;
    ch->id = c;
    ch->dev.id = c;
    BRAID_CALLOC_GOTO(ch->ring_ranks, n, res, out);
    for (int i = 0; i < n; i++) {
      ch->ring_ranks[i] = g->ring[gc * n + i];
      if (ch->ring_ranks[i] == comm->rank) ch->dev.ring.index = i;
    }
    ch->dev.ring.next = g->ring_next[gc * n + comm->rank];
    ch->dev.ring.prev = g->ring_prev[gc * n + comm->rank];
    ch->dev.ring.ranks = ch->ring_ranks;
    const struct braid_tree_links* t = &g->tree[gc * n + comm->rank];
    ch->dev.tree.up = t->up;
    for (int d = 0; d < BRAID_MAX_TREE_ARITY; d++) ch->dev.tree.down[d] = t->down[d];
    BRAID_CALLOC_GOTO(ch->p2p_send, n, res, out);
    BRAID_CALLOC_GOTO(ch->p2p_recv, n, res, out);
    BRAID_CALLOC_GOTO(ch->p2p_send_dev, n, res, out);
    BRAID_CALLOC_GOTO(ch->p2p_recv_dev, n, res, out);
    ch->dev.p2p_send = ch->p2p_send_dev;
    ch->dev.p2p_recv = ch->p2p_recv_dev;
  }
  if (comm->rank == 0) braid_graph_log(g, comm->rank, comm->nchannels); /* the channels that run */
out:
  return res;
}

/* FIFO sizes per connection (NCCL_BUFFSIZE for Simple; LL and LL128 scaled for host memory). */
static ncclResult_t setup_buffers(struct braid_comm* comm) {
  int64_t simple = braid_param_int(BRAID_PARAM_BUFFSIZE);
  int64_t ll = braid_param_int(BRAID_PARAM_LL_BUFFSIZE), ll128 = braid_param_int(BRAID_PARAM_LL128_BUFFSIZE);
  if (ll == BRAID_PARAM_UNSET) ll = 256 << 10;
  if (ll128 == BRAID_PARAM_UNSET) ll128 = 1 << 20;
  const int64_t min_bytes = BRAID_NSTEPS * 4096, max_bytes = (int64_t)1 << 31;
  if (simple < min_bytes || simple > max_bytes || ll < min_bytes || ll > max_bytes || ll128 < min_bytes ||
      ll128 > max_bytes) {
    BRAID_WARN(
        "Invalid buffer size: NCCL_BUFFSIZE=%lld NCCL_LL_BUFFSIZE=%lld NCCL_LL128_BUFFSIZE=%lld (each must be "
        "between %lld and %lld bytes)",
        (long long)simple, (long long)ll, (long long)ll128, (long long)min_bytes, (long long)max_bytes);
    return ncclInvalidArgument;
  }
  /* Whole lines per slot. */
  comm->buff_bytes[BRAID_PROTO_SIMPLE] = (size_t)simple / (BRAID_NSTEPS * 128) * (BRAID_NSTEPS * 128);
  comm->buff_bytes[BRAID_PROTO_LL] = (size_t)ll / (BRAID_NSTEPS * 4096) * (BRAID_NSTEPS * 4096);
  comm->buff_bytes[BRAID_PROTO_LL128] = (size_t)ll128 / (BRAID_NSTEPS * 4096) * (BRAID_NSTEPS * 4096);
  return ncclSuccess;
}

static void log_init_complete(struct braid_comm* comm, const char* fn, double t_boot, double t_gather,
                              double t_connect) {
  BRAID_INFO(BRAID_LOG_INIT, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d", (void*)comm,
             comm->rank, comm->nranks, comm->nnodes, comm->local_nranks, comm->local_rank, 0);
  if (comm->nranks > 1) BRAID_INFO(BRAID_LOG_INIT, "Connected all rings");
  BRAID_INFO(BRAID_LOG_INIT,
             "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE", fn,
             (void*)comm, comm->rank, comm->nranks, comm->cuda_dev, comm->cuda_dev,
             (long)(comm->bus_id < 0 ? 0 : comm->bus_id), (unsigned long long)comm->comm_hash);
  double total = braid_time_now() - comm->init_start;
  BRAID_INFO(BRAID_LOG_INIT,
             "Init timings - %s: rank %d nranks %d total %.2f (kernels %.2f, alloc %.2f, bootstrap %.2f, allgathers "
             "%.2f, topo %.2f, graphs %.2f, connections %.2f, rest %.2f)",
             fn, comm->rank, comm->nranks, total, 0.0, 0.0, t_boot, t_gather, 0.0, 0.0, t_connect,
             total - t_boot - t_gather - t_connect);
}

/* The bootstrap's death watch during init's connections: a rank whose bootstrap connection
 * closes has died or given up, and whatever this rank waits for on another transport (a
 * network accept, a peer's shared memory) will never come. */
static void init_peer_died(void* arg, int rank) {
  struct braid_comm* comm = arg;
  braid_comm_raise_nowait(comm, BRAID_EXEC_PEER_FAILED, ncclSuccess, rank,
                          "rank %d (host %s, pid %d) left during init: its bootstrap connection closed", rank,
                          braid_bootstrap_peer_host(comm->bootstrap, rank),
                          comm->peers != NULL ? comm->peers[rank].pid : -1);
}

/* Identities, nodes, channels, connections. Bootstrap waits watch the peer they wait for
 * themselves; the connections also wait on other transports (a network accept), so while
 * they are made the bootstrap's death watch covers every peer. */
static ncclResult_t init_connect(struct braid_comm* comm, double* t_gather) {
  double t0 = braid_time_now();
  comm->peers = calloc(comm->nranks, sizeof(*comm->peers));
  if (comm->peers == NULL) {
    BRAID_WARN("Failed to allocate peer information for %d ranks", comm->nranks);
    return ncclSystemError;
  }
  braid_comm_fill_identity(comm, &comm->peers[comm->rank]);
  BRAID_CHECK(braid_bootstrap_allgather(comm->bootstrap, comm->peers, sizeof(struct braid_peer_info)));
  for (int r = 0; r < comm->nranks; r++) {
    if (comm->peers[r].version != NCCL_VERSION_CODE) {
      BRAID_WARN("Mismatched NCCL version detected : rank %d version %d rank %d version %d", comm->rank,
                 NCCL_VERSION_CODE, r, comm->peers[r].version);
      return ncclInvalidUsage;
    }
  }
  BRAID_CHECK(braid_mismatch_check_agree(comm));
  *t_gather = braid_time_now() - t0;
  BRAID_CHECK(compute_nodes(comm));
  BRAID_CHECK(braid_locality_decide(comm));
  BRAID_CHECK(setup_buffers(comm));
  BRAID_CHECK(setup_graph(comm));
  BRAID_CHECK(setup_channels(comm));
  braid_bootstrap_watch(comm->bootstrap, init_peer_died, comm);
  ncclResult_t res = braid_connect_rings(comm, 0);
  /* a failure here may be a dead peer's doing that the watch has not reported yet (a busy
   * machine): give it a moment, then ask, while no rank may have left legitimately */
  for (int i = 0; res != ncclSuccess && comm->abort_flag == 0 && i < 20; i++) usleep(5000);
  int dead = res != ncclSuccess && comm->abort_flag == 0 ? braid_bootstrap_dead_peer(comm->bootstrap) : -1;
  braid_bootstrap_watch(comm->bootstrap, NULL, NULL);
  if (dead >= 0) init_peer_died(comm, dead);
  if (res != ncclSuccess) braid_blame_settle(comm); /* whom to blame, then tell the others */
  return res;
}

/* A bootstrap wait of init failed (an allgather, the last barrier) without a raise: if a peer
 * left, blame it, or the rank whose death made it leave (its notice), and tell the others. */
static void init_blame_left(struct braid_comm* comm) {
  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) == 0 && comm->bootstrap != NULL) {
    int dead = braid_bootstrap_dead_peer(comm->bootstrap);
    int late = braid_bootstrap_timeout_peer(comm->bootstrap);
    if (dead >= 0)
      braid_comm_raise(comm, BRAID_EXEC_PEER_FAILED, ncclSuccess, dead,
                       "rank %d (host %s, pid %d) left during init: its bootstrap connection closed", dead,
                       braid_bootstrap_peer_host(comm->bootstrap, dead),
                       comm->peers != NULL ? comm->peers[dead].pid : -1);
    else if (late >= 0) /* so that a rank that sees this one leave blames the rank it waited for */
      braid_blame_tell_timeout(comm, late, braid_debug_last_error());
  }
  braid_blame_settle(comm);
}

/* Everything after the bootstrap exists. Every bootstrap wait is bounded by
 * BRAID_INIT_TIMEOUT; while the connections are made a peer's death fails them at once (the
 * watch stops before the last barrier: past it a peer may leave, and its messages to us may
 * still be on their way). */
ncclResult_t braid_init_finish(struct braid_comm* comm, const char* fn, double t_boot) {
  double t0 = braid_time_now(), t_gather = 0;
  int64_t timeout_s = braid_param_int(BRAID_PARAM_INIT_TIMEOUT);
  if (timeout_s > 0) braid_bootstrap_set_deadline(comm->bootstrap, braid_socket_deadline_ms(timeout_s * 1000));
  ncclResult_t res = init_connect(comm, &t_gather);
  if (res == ncclSuccess) res = braid_sym_init(comm); /* signal inboxes, mapped by local peers (src/core/sym/) */
  if (res == ncclSuccess) res = braid_lsa_init(comm); /* one-/two-shot all-reduce scratch (src/core/sym/lsa.c) */
  /* Every sender has mapped its FIFO before any rank may return (and destroy, unlinking what a
   * slower peer has yet to map). */
  if (res == ncclSuccess && braid_fault_hit("init.barrier")) res = ncclSystemError;
  if (res == ncclSuccess) res = braid_bootstrap_barrier(comm->bootstrap);
  braid_bootstrap_set_deadline(comm->bootstrap, 0);
  /* A usage or argument error this rank decided itself (a duplicate GPU, a version mismatch)
   * with no flag raised is its own: a peer that decided the same and left at once is not to
   * blame (a bootstrap wait on a peer gone fails with ncclRemoteError, or raises the flag). */
  int own = __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE) == 0 &&
            (res == ncclInvalidUsage || res == ncclInvalidArgument);
  if (res != ncclSuccess && !own) init_blame_left(comm);
  if (res == ncclSuccess) braid_sym_ready(comm); /* every peer mapped the inbox: its name goes */
  if (res == ncclSuccess && comm->device != NULL) res = braid_launch_setup(comm);
  if (res != ncclSuccess) return res;
  double t2 = braid_time_now();
  log_init_complete(comm, fn, t_boot, t_gather, t2 - t0 - t_gather);
  return ncclSuccess;
}

/* ---- configuration ------------------------------------------------------------------------ */

ncclResult_t braid_config_resolve(const ncclConfig_t* user, ncclConfig_t* out, const char* fn) {
  ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
  if (user != NULL) {
    if (user->magic != 0xcafebeef) {
      BRAID_WARN("%s: ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER (magic 0x%x)", fn, user->magic);
      return ncclInvalidArgument;
    }
    if (user->size < offsetof(ncclConfig_t, blocking) + sizeof(int) || user->size > (1 << 20)) {
      BRAID_WARN("%s: ncclConfig_t size %zu is not a valid configuration size", fn, user->size);
      return ncclInvalidArgument;
    }
    /* Fields the caller's (older) header did not have keep their defaults. */
    memcpy(&def, user, user->size < sizeof(def) ? user->size : sizeof(def));
    def.size = sizeof(def);
  }
  int64_t blocking = braid_param_int(BRAID_PARAM_COMM_BLOCKING);
  if (def.blocking == NCCL_CONFIG_UNDEF_INT) def.blocking = blocking == BRAID_PARAM_UNSET ? 1 : (int)blocking;
  if (def.cgaClusterSize == NCCL_CONFIG_UNDEF_INT) def.cgaClusterSize = 4;
  if (def.minCTAs == NCCL_CONFIG_UNDEF_INT) {
    int64_t v = braid_param_int(BRAID_PARAM_MIN_CTAS);
    def.minCTAs = v == BRAID_PARAM_UNSET ? 1 : (int)v;
  }
  if (def.maxCTAs == NCCL_CONFIG_UNDEF_INT) {
    int64_t v = braid_param_int(BRAID_PARAM_MAX_CTAS);
    def.maxCTAs = v == BRAID_PARAM_UNSET ? BRAID_MAX_CHANNELS : (int)v;
  }
  if (def.splitShare == NCCL_CONFIG_UNDEF_INT) def.splitShare = 0;
  if (def.trafficClass == NCCL_CONFIG_UNDEF_INT) def.trafficClass = 0;
  if (def.collnetEnable == NCCL_CONFIG_UNDEF_INT) def.collnetEnable = 0;
  if (def.CTAPolicy == NCCL_CONFIG_UNDEF_INT) def.CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
  if (def.shrinkShare == NCCL_CONFIG_UNDEF_INT) def.shrinkShare = 0;
  if (def.nvlsCTAs == NCCL_CONFIG_UNDEF_INT) def.nvlsCTAs = 0;
  if (def.nChannelsPerNetPeer == NCCL_CONFIG_UNDEF_INT) def.nChannelsPerNetPeer = 0;
  if (def.nvlinkCentricSched == NCCL_CONFIG_UNDEF_INT) def.nvlinkCentricSched = 0;
  /* 2.30 fields (an older caller's config never has them: they keep these defaults). */
  if (def.graphUsageMode == NCCL_CONFIG_UNDEF_INT) def.graphUsageMode = 2;
  if (def.numRmaCtx == NCCL_CONFIG_UNDEF_INT) def.numRmaCtx = 1;
  if (def.numRmaCtx < 0) {
    BRAID_WARN("%s: config.numRmaCtx %d is negative", fn, def.numRmaCtx);
    return ncclInvalidArgument;
  }
  if (def.blocking != 0 && def.blocking != 1) {
    BRAID_WARN("%s: config.blocking %d is not 0 or 1", fn, def.blocking);
    return ncclInvalidArgument;
  }
  if (def.minCTAs < 1 || def.maxCTAs < 1 || def.minCTAs > def.maxCTAs || def.maxCTAs > BRAID_MAX_CHANNELS) {
    BRAID_WARN("%s: config.minCTAs %d / maxCTAs %d out of range (1 <= min <= max <= %d)", fn, def.minCTAs, def.maxCTAs,
               BRAID_MAX_CHANNELS);
    return ncclInvalidArgument;
  }
  *out = def;
  return ncclSuccess;
}

/* ---- allocation and teardown -------------------------------------------------------------- */

/* Device mode: the communicator lives in pinned, mapped memory, so the kernels poll its
 * abort_flag where every host-side writer (abort, the net proxy, the watchdog) raises it. */
static ncclResult_t comm_struct_alloc(const struct braid_device_ops* dev, struct braid_comm** comm_p) {
  struct braid_comm* comm = NULL;
  void *base = NULL, *dev_self = NULL;
  int cuda_dev = -1;
  int64_t bus_id = -1;
  /* aligned to BRAID_COMM_ALIGN, so its handles have room for a generation (comm.h) */
  if (dev != NULL) {
    BRAID_CHECK(dev->get_current(&cuda_dev));
    BRAID_CHECK(dev->bus_id(cuda_dev, &bus_id, NULL, 0));
    BRAID_CHECK(dev->host_alloc(&base, &dev_self, sizeof(*comm) + BRAID_COMM_ALIGN));
    size_t pad = (BRAID_COMM_ALIGN - (uintptr_t)base % BRAID_COMM_ALIGN) % BRAID_COMM_ALIGN;
    comm = (struct braid_comm*)((char*)base + pad);
    dev_self = (char*)dev_self + pad;
    memset(comm, 0, sizeof(*comm));
  } else if (posix_memalign(&base, BRAID_COMM_ALIGN, sizeof(*comm)) != 0) {
    BRAID_WARN("Failed to allocate a communicator (%zu bytes)", sizeof(*comm));
    return ncclSystemError;
  } else {
    comm = base;
    memset(comm, 0, sizeof(*comm));
  }
  comm->alloc_base = base;
  comm->handle_gen = braid_comm_new_gen();
  comm->device = dev;
  comm->dev_self = dev_self;
  comm->cuda_dev = cuda_dev;
  comm->bus_id = bus_id;
  comm->host_mode = dev == NULL;
  *comm_p = comm;
  return ncclSuccess;
}

ncclResult_t braid_comm_alloc(int rank, int nranks, const ncclConfig_t* config, struct braid_comm** comm_p) {
  struct braid_comm* comm = NULL;
  BRAID_CHECK(comm_struct_alloc(braid_device(), &comm));
  comm->magic = BRAID_COMM_MAGIC;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->config = *config;
  comm->state = BRAID_COMM_INITIALIZING;
  comm->async_error = ncclInProgress;
  comm->init_start = braid_time_now();
  pthread_mutex_init(&comm->mutex, NULL);
  pthread_cond_init(&comm->init_cond, NULL);
  braid_debug_set_device(comm->cuda_dev < 0 ? 0 : comm->cuda_dev);
  /* A blocking init outside a group runs on the caller's thread; an aborting thread must see
   * that before it can find the handle (init_api.c hands it out before init returns). */
  comm->blocking_init_active = config->blocking && braid_group_depth() == 0;
  braid_host_pool_retain();
  braid_comm_registry_add(comm);
  *comm_p = comm;
  return ncclSuccess;
}

void braid_comm_free(struct braid_comm* comm) {
  /* Kernels still running read the channels and the FIFOs: let them finish (an abort raised
   * the flag they poll, so stuck ones end too). */
  if (comm->launch != NULL) braid_launch_wait(comm);
  braid_launch_free(comm);
  braid_sym_free(comm);
  braid_connect_free(comm);
  for (int c = 0; c < comm->nchannels; c++) {
    struct braid_channel* ch = &comm->channels[c];
    free(ch->ring_ranks);
    free(ch->p2p_send);
    free(ch->p2p_recv);
    free(ch->p2p_send_dev);
    free(ch->p2p_recv_dev);
  }
  if (comm->bootstrap != NULL) braid_bootstrap_close(comm->bootstrap);
  while (comm->regs != NULL) {
    struct braid_reg* r = comm->regs;
    comm->regs = r->next;
    free(r);
  }
  free(comm->redops);
  braid_flight_free(comm);
  braid_profile_close(comm);
  braid_tuner_free(comm->tuner);
  braid_graph_free(comm->graph);
  braid_topo_free(comm->topo);
  free(comm->peers);
  free(comm->locality);
  free(comm->rank_to_node);
  pthread_mutex_destroy(&comm->mutex);
  pthread_cond_destroy(&comm->init_cond);
  braid_comm_registry_remove(comm);
  comm->magic = 0;
  if (comm->device != NULL)
    comm->device->host_free(comm->alloc_base);
  else
    free(comm->alloc_base);
  braid_host_pool_release();
}

/* Wait for a non-blocking or grouped init still running on its thread. */
void braid_init_join_thread(struct braid_comm* comm) {
  pthread_mutex_lock(&comm->mutex);
  while (comm->blocking_init_active) pthread_cond_wait(&comm->init_cond, &comm->mutex);
  pthread_mutex_unlock(&comm->mutex);
  if (comm->init_thread_running) {
    pthread_join(comm->init_thread, NULL);
    comm->init_thread_running = 0;
  }
}

/* ---- running init ------------------------------------------------------------------------- */

/* A peer on this machine that is gone may have left what it made for this communicator in
 * /dev/shm (a receive segment whose sender never mapped it): its survivors remove it. */
static void init_forget_dead(struct braid_comm* comm) {
  const struct braid_peer_info* me = comm->peers != NULL ? &comm->peers[comm->rank] : NULL;
  int nt = 0;
  const struct braid_transport* const* transports = braid_transport_registry(&nt);
  for (int r = 0; me != NULL && r < comm->nranks; r++) {
    const struct braid_peer_info* p = &comm->peers[r];
    if (r == comm->rank || p->pid <= 0 || p->kernel_hash != me->kernel_hash || p->shm_dev != me->shm_dev) continue;
    if (!braid_comm_pid_gone(p->pid)) continue;
    for (int i = 0; i < nt; i++)
      if (transports[i]->forget_dead != NULL) transports[i]->forget_dead(comm->comm_hash, r, p->pid);
  }
}

/* Why init failed, said last (the message ncclGetLastError returns): when braid raised the
 * abort flag itself (a peer died) and the failure can be what that causes (a wait aborted:
 * ncclInvalidUsage; a broken connection: ncclRemoteError; a peer's segment gone with it:
 * ncclSystemError), the reason, which names the rank; a bad setting of this rank
 * (ncclInvalidArgument) keeps its own message. A user's abort. */
static ncclResult_t init_failed(struct braid_comm* comm, const char* fn, ncclResult_t res) {
  uint32_t flag = __atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE);
  int consequence = res == ncclInvalidUsage || res == ncclRemoteError || res == ncclSystemError;
  if (flag != BRAID_EXEC_ABORTED) braid_blame_tell(comm); /* the others learn why this rank leaves */
  if (flag != 0 && flag != BRAID_EXEC_ABORTED && comm->abort_reason[0] && consequence) {
    BRAID_WARN("%s: rank %d: initialization failed: %s", fn, comm->rank, comm->abort_reason);
    res = ncclRemoteError;
  } else if (flag == BRAID_EXEC_ABORTED) {
    BRAID_WARN("%s: rank %d: initialization aborted", fn, comm->rank);
  }
  init_forget_dead(comm);
  return res;
}

static ncclResult_t init_run(struct init_args* a) {
  struct braid_comm* comm = a->comm;
  double t0 = braid_time_now();
  ncclResult_t res = ncclSuccess;
  /* The device is per thread: an init on its own thread binds to the communicator's. */
  if (comm->device != NULL) res = comm->device->set_current(comm->cuda_dev);
  if (res == ncclSuccess && a->parent_bs != NULL) {
    res =
        braid_bootstrap_split(a->parent_bs, comm->rank, comm->nranks, a->parent_ranks, a->split_tag, &comm->bootstrap);
    /* A split bootstrap watches no abort flag until told: the parent may die first. */
    if (res == ncclSuccess) braid_bootstrap_set_abort_flag(comm->bootstrap, &comm->abort_flag);
  } else if (res == ncclSuccess) {
    res = braid_bootstrap_init(a->ids, a->nids, comm->rank, comm->nranks, &comm->abort_flag, &comm->bootstrap);
  }
  if (res == ncclSuccess) res = braid_init_finish(comm, a->fn, braid_time_now() - t0);
  if (res != ncclSuccess) res = init_failed(comm, a->fn, res);
  comm->state = res == ncclSuccess ? BRAID_COMM_READY : BRAID_COMM_FAILED;
  __atomic_store_n(&comm->async_error, res, __ATOMIC_RELEASE);
  return res;
}

void braid_init_args_free(struct init_args* a) {
  free(a->ids);
  free(a->parent_ranks);
  free(a);
}

static void* init_thread_main(void* arg) {
  struct init_args* a = arg;
  init_run(a);
  braid_init_args_free(a);
  return NULL;
}

/* Run init now (blocking, outside a group) or on a thread (non-blocking, or inside a group,
 * where ncclGroupEnd joins it). Takes ownership of `a`. */
ncclResult_t braid_init_start(struct init_args* a) {
  struct braid_comm* comm = a->comm;
  BRAID_INFO(BRAID_LOG_INIT, "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init START",
             a->fn, (void*)comm, comm->rank, comm->nranks, comm->cuda_dev, comm->cuda_dev,
             (long)(comm->bus_id < 0 ? 0 : comm->bus_id), (unsigned long long)comm->comm_hash);
  int in_group = braid_group_depth() > 0;
  if (comm->config.blocking && !in_group) {
    /* blocking_init_active was set by braid_comm_alloc, before the handle was visible. */
    ncclResult_t res = init_run(a);
    braid_init_args_free(a);
    /* A failed init frees the communicator unless an ncclCommAbort claimed it first (the
     * claim and this check are atomic under the registry lock; the aborter then frees). */
    int ours = res != ncclSuccess && braid_comm_registry_take(comm);
    pthread_mutex_lock(&comm->mutex);
    comm->blocking_init_active = 0;
    pthread_cond_broadcast(&comm->init_cond);
    pthread_mutex_unlock(&comm->mutex);
    if (ours) braid_comm_free(comm);
    return res;
  }
  int err = pthread_create(&comm->init_thread, NULL, init_thread_main, a);
  if (err != 0) {
    BRAID_WARN("%s: failed to start the init thread: %s", a->fn, strerror(err));
    braid_init_args_free(a);
    return ncclSystemError;
  }
  comm->init_thread_running = 1;
  if (in_group) BRAID_CHECK(braid_group_add_init(comm));
  return comm->config.blocking ? ncclSuccess : ncclInProgress;
}

ncclResult_t braid_init_join(struct braid_comm* comm) {
  braid_init_join_thread(comm);
  return comm->async_error;
}
