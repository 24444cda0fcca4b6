/*
 * nccl_graph.c - NCCL's graph dumps compared with braid's searches (nccl_graph.h).
 */
#include "nccl_graph.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int type_of(const char* s) {
  int t;
  return s && braid_topo_path_parse(s, &t) == ncclSuccess ? t : BRAID_PATH_LOC;
}

static void read_search(const struct braid_topo_xml* x, struct nccl_graph_search* s) {
  s->valid = 1;
  s->pattern = (int)braid_topo_xml_int(x, "pattern", 0);
  s->cross_nic = (int)braid_topo_xml_int(x, "crossnic", 0);
  s->nchannels = (int)braid_topo_xml_int(x, "nchannels", 0);
  s->same_channels = (int)braid_topo_xml_int(x, "samechannels", 0);
  s->bw_intra = (float)braid_topo_xml_float(x, "speedintra", 0);
  s->bw_inter = (float)braid_topo_xml_float(x, "speedinter", 0);
  s->type_intra = type_of(braid_topo_xml_get(x, "typeintra"));
  s->type_inter = type_of(braid_topo_xml_get(x, "typeinter"));
  for (int i = 0, c = 0; i < x->nkids && c < BRAID_GRAPH_MAX_RINGS; i++) {
    const struct braid_topo_xml* ch = x->kids[i];
    int g = 0;
    if (strcmp(ch->name, "channel") != 0) continue;
    for (int k = 0; k < ch->nkids && g < BRAID_GRAPH_MAX_LOCAL; k++) {
      const char* d = braid_topo_xml_get(ch->kids[k], "dev");
      if (strcmp(ch->kids[k]->name, "gpu") == 0) s->dev[c][g++] = d ? strtoll(d, NULL, 16) : -1;
    }
    s->ngpus = g;
    c++;
  }
}

int braid_nccl_graph_read(const char* path, struct nccl_graph* g) {
  char* text = NULL;
  struct braid_topo_xml* doc = NULL;
  memset(g, 0, sizeof(*g));
  if (braid_topo_xml_read_file(path, &text) != ncclSuccess || braid_topo_xml_parse(text, path, &doc) != ncclSuccess) {
    fprintf(stderr, "braid-topo: cannot read the graph dump %s (run with NCCL_DEBUG=WARN)\n", path);
    free(text);
    return -1;
  }
  const struct braid_topo_xml* graphs = braid_topo_xml_child(doc, "graphs");
  for (int i = 0; graphs != NULL && i < graphs->nkids; i++) {
    int64_t id = braid_topo_xml_int(graphs->kids[i], "id", -1);
    if (id == 0) read_search(graphs->kids[i], &g->ring);
    if (id == 1) read_search(graphs->kids[i], &g->tree);
  }
  braid_topo_xml_free(doc);
  free(text);
  return 0;
}

static int compare_one(const char* what, const struct nccl_graph_search* n, const struct braid_graph_part* p, int ndev,
                       const int64_t* devs, FILE* out) {
  int diffs = 0;
  if (!n->valid) return 0;
  if (n->pattern != p->pattern || n->nchannels != p->nchannels || fabsf(n->bw_intra - p->bw_intra) > 1e-3f ||
      fabsf(n->bw_inter - p->bw_inter) > 1e-3f || n->type_intra != p->type_intra || n->type_inter != p->type_inter ||
      n->same_channels != p->same_channels || n->cross_nic != p->cross_nic) {
    fprintf(out,
            "%s graph: NCCL pattern %d, %d channels, bw %g/%g, type %s/%s, crossNic %d, sameChannels %d; braid "
            "pattern %d, %d channels, bw %g/%g, type %s/%s, crossNic %d, sameChannels %d\n",
            what, n->pattern, n->nchannels, n->bw_intra, n->bw_inter, braid_topo_path_name(n->type_intra),
            braid_topo_path_name(n->type_inter), n->cross_nic, n->same_channels, p->pattern, p->nchannels, p->bw_intra,
            p->bw_inter, braid_topo_path_name(p->type_intra), braid_topo_path_name(p->type_inter), p->cross_nic,
            p->same_channels);
    diffs++;
  }
  for (int c = 0; c < n->nchannels && c < p->nchannels; c++) {
    int same = n->ngpus == ndev;
    for (int i = 0; i < ndev && same; i++) same = n->dev[c][i] == devs[p->order[c][i]];
    if (same) continue;
    fprintf(out, "%s channel %d: NCCL devs", what, c);
    for (int i = 0; i < n->ngpus; i++) fprintf(out, " %#llx", (unsigned long long)n->dev[c][i]);
    fprintf(out, ", braid devs");
    for (int i = 0; i < ndev; i++) fprintf(out, " %#llx", (unsigned long long)devs[p->order[c][i]]);
    fprintf(out, "\n");
    diffs++;
  }
  return diffs;
}

int braid_nccl_graph_compare(const struct nccl_graph* ng, const struct braid_graph_node_info* info, const int64_t* devs,
                             FILE* out) {
  int diffs = compare_one("ring", &ng->ring, &info->ring, info->ndev, devs, out);
  diffs += compare_one("tree", &ng->tree, &info->tree, info->ndev, devs, out);
  if (diffs == 0)
    fprintf(out, "braid's searches agree with the graph dump: ring %d and tree %d channels, orders and speeds\n",
            ng->ring.nchannels, ng->tree.nchannels);
  else
    fprintf(out, "%d difference%s between the graph dump and braid\n", diffs, diffs == 1 ? "" : "s");
  return diffs;
}

int braid_nccl_graph_check(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                           const struct braid_graph_opts* opts, const char* path, FILE* out) {
  struct nccl_graph* ng = calloc(1, sizeof(*ng));
  struct braid_graph_node_info* info = calloc(1, sizeof(*info));
  int64_t devs[BRAID_GRAPH_MAX_LOCAL] = {0};
  int rc = -1;
  if (ng != NULL && info != NULL && braid_nccl_graph_read(path, ng) == 0 &&
      braid_graph_node_search_ex(sys, nranks, ranks, 0, opts, info) == ncclSuccess) {
    for (int i = 0; i < nranks; i++) {
      if (ranks[i].node != 0 || ranks[i].local_rank >= BRAID_GRAPH_MAX_LOCAL) continue;
      int gi = braid_topo_gpu_find(sys, ranks[i].bus_id);
      const struct braid_topo_node* gpu = gi < 0 ? NULL : &sys->nodes[sys->gpus[gi]];
      devs[ranks[i].local_rank] = gpu ? BRAID_TOPO_ID(gpu->host, gpu->dev) : ranks[i].local_rank;
    }
    rc = braid_nccl_graph_compare(ng, info, devs, out);
  }
  free(ng);
  free(info);
  return rc;
}
