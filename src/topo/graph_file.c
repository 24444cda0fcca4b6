/*
 * graph_file.c - NCCL's graph files (NCCL_GRAPH_FILE in, NCCL_GRAPH_DUMP_FILE out):
 *
 *   <graphs version="1">
 *     <graph id="0" pattern="4" crossnic="0" nchannels="2" speedintra="12" speedinter="12"
 *            latencyinter="0" typeintra="SYS" typeinter="PIX" samechannels="0">
 *       <channel> <net dev="0"/> <gpu dev="0" rank="0"/> ... <net dev="0x1"/> </channel>
 *
 * id 0 is the ring graph, 1 the tree, 2 CollNet chain, 3 NVLS, 4 CollNet direct. A <gpu> is
 * named by its rank attribute (the rank of the communicator that dumped it) or else by dev,
 * NCCL's topology id: the GPU's NVML index, with the host index in bits 56 and up for
 * multi-host (MNNVL) systems; a <net> by its plugin device, likewise; dev is hexadecimal
 * (NCCL reads it with strtol base 16). NCCL reads the graph's nchannels attribute and the
 * channels listed; a graph with crossnic="1" is ignored when NCCL_CROSS_NIC=0. A file that
 * cannot be read is an error (NCCL: "Could not open XML graph file", ncclSystemError), so is a
 * channel that does not name every GPU of the node once, or a name this node does not have.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "topo/graph.h"
#include "topo/search.h"

#define TOPO_ID(host, local) (((int64_t)(host) << 56) + (int64_t)(local))

static int type_of(const char* s) {
  int t;
  if (s != NULL && braid_topo_path_parse(s, &t) == ncclSuccess) return t;
  return BRAID_PATH_LOC; /* NCCL: absent or unknown -> the dictionary's fallback, 0 */
}

/* One <channel> into slot c of the part. */
static ncclResult_t read_channel(const char* path, const struct braid_topo_xml* ch, int c,
                                 const struct braid_topo_system* sys, int ndev, const int* gpu_dev, const int* gpu_host,
                                 const int* ranks_of, int multi, struct braid_graph_part* out) {
  int g = 0, nn = 0, seen[BRAID_GRAPH_MAX_LOCAL] = {0};
  for (int i = 0; i < ch->nkids; i++) {
    const struct braid_topo_xml* k = ch->kids[i];
    const char* ds = braid_topo_xml_get(k, "dev");
    int64_t dev = ds ? strtoll(ds, NULL, 16) : -1, local = -1;
    if (strcmp(k->name, "net") == 0) {
      int nic = -1;
      for (int x = 0; x < sys->nnics; x++) {
        const struct braid_topo_node* n = &sys->nodes[sys->nics[x]];
        if (TOPO_ID(n->host, n->dev) == dev) nic = x;
      }
      if (nic < 0) {
        BRAID_WARN("NCCL_GRAPH_FILE %s line %d: <net dev=\"%s\"> is no NIC of this node", path, k->line, ds ? ds : "");
        return ncclInvalidArgument;
      }
      if (nn < 2) (nn++ == 0 ? out->nic_in : out->nic_out)[c] = (int16_t)nic;
      continue;
    }
    if (strcmp(k->name, "gpu") != 0) continue;
    const char* rs = braid_topo_xml_get(k, "rank");
    for (int d = 0; d < ndev; d++) {
      if (rs != NULL ? ranks_of[d] == atoi(rs) : TOPO_ID(gpu_host[d], gpu_dev[d]) == dev) local = d;
    }
    if (local < 0 || g >= ndev || seen[local]++) {
      BRAID_WARN("NCCL_GRAPH_FILE %s line %d: <gpu %s=\"%s\"> is %s", path, k->line, rs ? "rank" : "dev",
                 rs   ? rs
                 : ds ? ds
                      : "",
                 local < 0 ? "no GPU of this node" : "listed twice in its channel");
      return ncclInvalidArgument;
    }
    out->order[c][g++] = (uint8_t)local;
  }
  if (g != ndev || (multi && nn != 2)) {
    BRAID_WARN("NCCL_GRAPH_FILE %s line %d: the channel names %d of the node's %d GPUs and %d NICs%s", path, ch->line,
               g, ndev, nn, multi ? " (2 needed across nodes)" : "");
    return ncclInvalidArgument;
  }
  if (!multi) out->nic_in[c] = out->nic_out[c] = -1;
  out->relay_in[c] = out->relay_out[c] = -1;
  return ncclSuccess;
}

static ncclResult_t read_graph(const char* path, const struct braid_topo_xml* x, const struct braid_topo_system* sys,
                               int ndev, const int* gpu_dev, const int* gpu_host, const int* ranks_of, int multi,
                               struct braid_graph_part* out) {
  int nch = (int)braid_topo_xml_int(x, "nchannels", 0), nlisted = 0;
  for (int i = 0; i < x->nkids; i++) nlisted += strcmp(x->kids[i]->name, "channel") == 0;
  if (nch < 0 || nch > nlisted || nch > BRAID_GRAPH_MAX_RINGS) {
    BRAID_WARN("NCCL_GRAPH_FILE %s line %d: nchannels=%d but %d <channel> elements (at most %d)", path, x->line, nch,
               nlisted, BRAID_GRAPH_MAX_RINGS);
    return ncclInvalidArgument;
  }
  memset(out, 0, sizeof(*out));
  out->nchannels = nch;
  out->pattern = (int)braid_topo_xml_int(x, "pattern", 0);
  out->cross_nic = (int)braid_topo_xml_int(x, "crossnic", 0);
  out->same_channels = (int)braid_topo_xml_int(x, "samechannels", 0);
  out->bw_intra = (float)braid_topo_xml_float(x, "speedintra", 0);
  out->bw_inter = (float)braid_topo_xml_float(x, "speedinter", 0);
  out->latency_inter = (float)braid_topo_xml_float(x, "latencyinter", 0);
  out->type_intra = type_of(braid_topo_xml_get(x, "typeintra"));
  out->type_inter = type_of(braid_topo_xml_get(x, "typeinter"));
  if (out->pattern < BRAID_PATTERN_BALANCED_TREE || out->pattern > BRAID_PATTERN_RING || !(out->bw_intra > 0)) {
    BRAID_WARN("NCCL_GRAPH_FILE %s line %d: pattern %d, speedintra %g: not a ring or tree braid can run", path, x->line,
               out->pattern, out->bw_intra);
    return ncclInvalidArgument;
  }
  for (int i = 0, c = 0; i < x->nkids && c < nch; i++) {
    if (strcmp(x->kids[i]->name, "channel") != 0) continue;
    BRAID_CHECK(read_channel(path, x->kids[i], c++, sys, ndev, gpu_dev, gpu_host, ranks_of, multi, out));
  }
  return ncclSuccess;
}

ncclResult_t braid_graph_file_read(const char* path, int id, const struct braid_topo_system* sys, int ndev,
                                   const int* gpu_dev, const int* gpu_host, const int* ranks_of, int multi,
                                   struct braid_graph_part* out, int* found_p) {
  ncclResult_t res = ncclSuccess;
  char* text = NULL;
  struct braid_topo_xml* doc = NULL;
  *found_p = 0;
  BRAID_INFO(BRAID_LOG_ENV, "NCCL_GRAPH_FILE set by environment to %s", path);
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    BRAID_WARN("Could not open XML graph file %s : %s", path, strerror(errno));
    return ncclSystemError;
  }
  fclose(f);
  BRAID_CHECK(braid_topo_xml_read_file(path, &text));
  BRAID_CHECK_GOTO(braid_topo_xml_parse(text, path, &doc), res, out_free);
  const struct braid_topo_xml* graphs = braid_topo_xml_child(doc, "graphs");
  if (graphs == NULL) {
    BRAID_WARN("NCCL_GRAPH_FILE %s: no <graphs> element", path);
    res = ncclInvalidArgument;
    goto out_free;
  }
  for (int i = 0; i < graphs->nkids; i++) {
    const struct braid_topo_xml* x = graphs->kids[i];
    if (strcmp(x->name, "graph") != 0 || braid_topo_xml_int(x, "id", -1) != id) continue;
    if (braid_param_int(BRAID_PARAM_CROSS_NIC) == 0 && braid_topo_xml_int(x, "crossnic", 0) == 1) continue;
    BRAID_CHECK_GOTO(read_graph(path, x, sys, ndev, gpu_dev, gpu_host, ranks_of, multi, out), res, out_free);
    *found_p = out->nchannels > 0;
    BRAID_INFO(BRAID_LOG_GRAPH, "Search %d : %d channels loaded from XML graph", id, out->nchannels);
    break;
  }
out_free:
  braid_topo_xml_free(doc);
  free(text);
  return res;
}

/* ---- dumping -------------------------------------------------------------------------- */

/* "%#lx" as NCCL's xmlSetAttrLong writes it: 0 is "0", 1 is "0x1". */
static ncclResult_t set_long(struct braid_topo_xml* x, const char* name, int64_t v) {
  if (v == 0) return braid_topo_xml_set(x, name, "0");
  return braid_topo_xml_setf(x, name, "%#llx", (unsigned long long)v);
}

static ncclResult_t dump_part(struct braid_topo_xml* graphs, int id, const struct braid_graph_part* p, int ndev,
                              const int* gpu_dev, const int* gpu_host, const int* ranks_of,
                              const struct braid_topo_system* sys, int multi) {
  struct braid_topo_xml *x, *ch, *e;
  BRAID_CHECK(braid_topo_xml_new(graphs, "graph", &x));
  BRAID_CHECK(braid_topo_xml_setf(x, "id", "%d", id));
  BRAID_CHECK(braid_topo_xml_setf(x, "pattern", "%d", p ? p->pattern : id == 2 ? 3 : id == 3 ? 5 : 6));
  BRAID_CHECK(braid_topo_xml_setf(x, "crossnic", "%d", p ? p->cross_nic : 0));
  BRAID_CHECK(braid_topo_xml_setf(x, "nchannels", "%d", p ? p->nchannels : 0));
  BRAID_CHECK(braid_topo_xml_setf(x, "speedintra", "%g", p ? p->bw_intra : 0));
  BRAID_CHECK(braid_topo_xml_setf(x, "speedinter", "%g", p ? p->bw_inter : 0));
  BRAID_CHECK(braid_topo_xml_setf(x, "latencyinter", "%g", p ? p->latency_inter : 0));
  BRAID_CHECK(braid_topo_xml_set(x, "typeintra", braid_topo_path_name(p ? p->type_intra : BRAID_PATH_LOC)));
  BRAID_CHECK(braid_topo_xml_set(x, "typeinter", braid_topo_path_name(p ? p->type_inter : BRAID_PATH_LOC)));
  BRAID_CHECK(braid_topo_xml_setf(x, "samechannels", "%d", p ? p->same_channels : 0));
  for (int c = 0; p != NULL && c < p->nchannels; c++) {
    BRAID_CHECK(braid_topo_xml_new(x, "channel", &ch));
    for (int end = 0; end < 2 && multi; end++) {
      int nic = end == 0 ? p->nic_in[c] : p->nic_out[c];
      const struct braid_topo_node* n = nic >= 0 && nic < sys->nnics ? &sys->nodes[sys->nics[nic]] : NULL;
      if (end == 1) { /* the GPUs go between the two NICs */
        for (int i = 0; i < ndev; i++) {
          int d = p->order[c][i];
          BRAID_CHECK(braid_topo_xml_new(ch, "gpu", &e));
          BRAID_CHECK(set_long(e, "dev", TOPO_ID(gpu_host[d], gpu_dev[d])));
          BRAID_CHECK(braid_topo_xml_setf(e, "rank", "%d", ranks_of[d]));
        }
      }
      BRAID_CHECK(braid_topo_xml_new(ch, "net", &e));
      BRAID_CHECK(set_long(e, "dev", n ? TOPO_ID(n->host, n->dev) : 0));
    }
    for (int i = 0; i < ndev && !multi; i++) {
      int d = p->order[c][i];
      BRAID_CHECK(braid_topo_xml_new(ch, "gpu", &e));
      BRAID_CHECK(set_long(e, "dev", TOPO_ID(gpu_host[d], gpu_dev[d])));
      BRAID_CHECK(braid_topo_xml_setf(e, "rank", "%d", ranks_of[d]));
    }
  }
  return ncclSuccess;
}

ncclResult_t braid_graph_dump_string(const struct braid_topo_system* sys, int nranks,
                                     const struct braid_topo_rank* ranks, int node,
                                     const struct braid_graph_node_info* info, char** text_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_xml *doc = NULL, *graphs;
  int gpus[BRAID_GRAPH_MAX_LOCAL], devs[BRAID_GRAPH_MAX_LOCAL], hosts[BRAID_GRAPH_MAX_LOCAL];
  int ranks_of[BRAID_GRAPH_MAX_LOCAL], n = 0, nnodes = 0;
  if (sys == NULL || ranks == NULL || info == NULL || text_p == NULL) {
    BRAID_WARN("braid_graph_dump_string: a NULL argument");
    return ncclInvalidArgument;
  }
  for (int i = 0; i < nranks; i++) {
    if (ranks[i].node + 1 > nnodes) nnodes = ranks[i].node + 1;
    if (ranks[i].node == node && ranks[i].local_rank >= 0 && ranks[i].local_rank < BRAID_GRAPH_MAX_LOCAL)
      ranks_of[ranks[i].local_rank] = i;
  }
  if (ranks[0].bus_id >= 0) BRAID_CHECK(braid_graph_node_gpus(sys, nranks, ranks, node, gpus, &n));
  if (ranks[0].bus_id < 0) n = info->ndev;
  for (int i = 0; i < n; i++) {
    const struct braid_topo_node* g = ranks[0].bus_id >= 0 && gpus[i] >= 0 ? &sys->nodes[sys->gpus[gpus[i]]] : NULL;
    devs[i] = g ? g->dev : i;
    hosts[i] = g ? g->host : 0;
  }
  BRAID_CHECK(braid_topo_xml_new(NULL, "#document", &doc));
  BRAID_CHECK_GOTO(braid_topo_xml_new(doc, "graphs", &graphs), res, out);
  BRAID_CHECK_GOTO(braid_topo_xml_set(graphs, "version", "1"), res, out);
  BRAID_CHECK_GOTO(dump_part(graphs, 0, &info->ring, n, devs, hosts, ranks_of, sys, nnodes > 1), res, out);
  BRAID_CHECK_GOTO(dump_part(graphs, 1, &info->tree, n, devs, hosts, ranks_of, sys, nnodes > 1), res, out);
  /* what braid does not search, as NCCL writes graphs it found nothing for */
  BRAID_CHECK_GOTO(dump_part(graphs, 4, NULL, n, devs, hosts, ranks_of, sys, 0), res, out);
  BRAID_CHECK_GOTO(dump_part(graphs, 2, NULL, n, devs, hosts, ranks_of, sys, 0), res, out);
  BRAID_CHECK_GOTO(dump_part(graphs, 3, NULL, n, devs, hosts, ranks_of, sys, 0), res, out);
  BRAID_CHECK_GOTO(braid_topo_xml_print(doc, text_p), res, out);
out:
  braid_topo_xml_free(doc);
  return res;
}

ncclResult_t braid_graph_dump_env(const struct braid_topo_system* sys, int nranks, const struct braid_topo_rank* ranks,
                                  int rank, const struct braid_graph_node_info* info) {
  const char* path = braid_param_str(BRAID_PARAM_GRAPH_DUMP_FILE);
  char* text = NULL;
  if (path == NULL || path[0] == '\0' || rank != braid_param_int(BRAID_PARAM_GRAPH_DUMP_FILE_RANK)) return ncclSuccess;
  if (rank < 0 || rank >= nranks || ranks == NULL) {
    BRAID_WARN("NCCL_GRAPH_DUMP_FILE: rank %d of %d", rank, nranks);
    return ncclInvalidArgument;
  }
  BRAID_INFO(BRAID_LOG_ENV, "NCCL_GRAPH_DUMP_FILE set by environment to %s", path);
  BRAID_CHECK(braid_graph_dump_string(sys, nranks, ranks, ranks[rank].node, info, &text));
  FILE* f = fopen(path, "w");
  ncclResult_t res = ncclSuccess;
  if (f == NULL || fputs(text, f) < 0) {
    BRAID_WARN("Could not write the graphs to %s: %s", path, strerror(errno));
    res = ncclSystemError;
  }
  if (f != NULL && fclose(f) != 0 && res == ncclSuccess) {
    BRAID_WARN("Could not write the graphs to %s: %s", path, strerror(errno));
    res = ncclSystemError;
  }
  free(text);
  return res;
}
