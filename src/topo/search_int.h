/*
 * search_int.h - what search.c (the recursion and ncclTopoCompute) and search_sys.c (speed
 * lists, the search's copy of the system, paths and NIC choice) share. Internal to them.
 */
#ifndef BRAID_TOPO_SEARCH_INT_H
#define BRAID_TOPO_SEARCH_INT_H

#include "topo/search.h"

#define MAX_HOPS 128

struct speeds {
  int since; /* first NCCL version (M*10000+m*100+p) with this list */
  int n;
  float v[24];
};

/* A precomputed path: its links in order, the node before each, and each link's reverse. */
struct spath {
  int count, type;
  float bw;
  struct braid_topo_link** list;
  struct braid_topo_link** rev;
  int* from;
};

struct ssys {
  struct braid_topo_system* sys;
  int version, inter, nvs, nhosts, cpu_arch, cpu_vendor;
  int ngpus, nnets;
  int* gpu;       /* node of GPU g (node order: NCCL's GPU index) */
  int* rank;      /* rank of GPU g */
  uint64_t* used; /* channels GPU g is in (bit c) */
  int* net;       /* node of NIC port n (node order) */
  int* net_index; /* its index in sys->nics */
  float* net_bw;  /* GB/s left on its network side */
  int* local_gpu; /* NCCL's net.localGpu, a GPU index or -1 */
  int* local_net; /* [g * 64 + c]: the NIC (search index) GPU g uses on channel c, -1 none */
  float max_bw, total_bw;
  struct spath *gg, *gn, *ng; /* GPU->GPU [a * ngpus + b], GPU->NIC [g * nnets + n], NIC->GPU [n * ngpus + g] */
};

enum { T_GPU = 0, T_NET = 1, T_NONE = -1 };

const struct speeds* braid_search_speeds(int version, int cc, int inter);
ncclResult_t braid_search_sys_make(struct braid_topo_system* sys, int inter, int version, struct ssys* s);
void braid_search_sys_free(struct ssys* s);
int braid_search_is_tree(int pattern);
const struct spath* braid_search_path(const struct ssys* s, int t1, int i1, int t2, int i2);
/* NCCL's ncclTopoFollowPath: 1 when t2/i2 is reached (bandwidth reserved with mult 1,
 * released with -1), 0 when the path is too far or too narrow. */
int braid_search_follow(const struct ssys* s, struct braid_search_graph* g, int t1, int i1, int t2, int i2, float mult);
/* NCCL's ncclTopoSelectNets: the NICs to try (search indices), the GPUs' own first. */
int braid_search_select_nets(const struct ssys* s, int type_inter, int gpu, int* nets);
/* Whether a ring or tree that started at NIC `start` may end at NIC n. */
int braid_search_check_net(const struct ssys* s, const struct braid_search_graph* g, int start, int n, int step);

#endif /* BRAID_TOPO_SEARCH_INT_H */
