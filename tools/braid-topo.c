/*
 * braid-topo - shows what braid makes of a machine: the matrix `nvidia-smi topo -m` would
 * print, the channels (rings, trees, NICs) of a communicator over N copies of the node, and
 * the tuner's choice per collective and message size. Works on the local machine (sysfs,
 * NVML; NCCL_TOPO_FILE wins) or on any topology XML (--xml), so a laptop can show what a
 * DGX cluster would do. With --nccl-log it compares its plan with the channels an NCCL INFO
 * log of the same machine reports and prints the differences. Output is deterministic.
 * See --help.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_graph.h"
#include "nccl_log.h"
#include "topo/graph.h"
#include "topo/topo.h"
#include "topo/tuner.h"
#include "topo_ranks.h"

struct opts {
  const char* xml;
  const char* dump;
  const char* graph_dump;
  const char* log;
  const char* graph; /* an NCCL graph dump to compare with */
  int nccl_version;
  int nodes, ppn, host;
  size_t min_bytes, max_bytes;
  int factor;
  int func; /* -1: all */
  int matrix, channels, tuner;
  int net_speed;      /* Mb/s of every NIC, as a plugin would report it (0: the XML's) */
  double net_latency; /* us (< 0: the XML's) */
};

static void usage(FILE* f) {
  fprintf(f,
          "Usage: braid-topo [options]\n"
          "Shows the topology matrix, the channels (rings, trees, NICs) and the tuner's choices.\n"
          "\n"
          "  -x, --xml FILE        read the system from a topology XML file (NCCL's schema)\n"
          "                        instead of detecting the local machine (NCCL_TOPO_FILE\n"
          "                        also works for detection)\n"
          "  -n, --nodes N         a communicator over N identical nodes (default 1)\n"
          "  -p, --ppn R           ranks per node: the first R GPUs in rank order (the file's\n"
          "                        rank attributes, else dev order), or in host mode R pseudo-\n"
          "                        GPUs (default: every GPU, all hosts of a multi-host NVLink\n"
          "                        file in one node; host mode: 1 per CPU, at most 8)\n"
          "  -H, --host            host mode even when the system has GPUs\n"
          "  -b, --min-bytes SIZE  smallest message of the tuner table (default 8)\n"
          "  -e, --max-bytes SIZE  largest message (default 8G); SIZE takes K, M, G\n"
          "  -f, --factor F        size multiplier between rows (default 2)\n"
          "  -c, --func NAME       only this collective (Broadcast, Reduce, AllGather,\n"
          "                        ReduceScatter, AllReduce); default all\n"
          "  -s, --sections LIST   comma list of matrix, channels, tuner (default all)\n"
          "  -d, --dump FILE       write the system as topology XML to FILE\n"
          "  -G, --graph-dump FILE write node 0's rings and trees as NCCL's <graphs> XML\n"
          "                        (what NCCL_GRAPH_DUMP_FILE writes; NCCL_GRAPH_FILE reads it)\n"
          "  -l, --nccl-log LOG    compare with the channels of an NCCL_DEBUG=INFO log of the same\n"
          "                        machine (Pattern, Channel, Ring, Trees lines; nodes, ranks and\n"
          "                        NCCL version taken from the log unless given); prints every\n"
          "                        difference and exits 3 when there is one\n"
          "  -g, --nccl-graph FILE compare node 0's ring and tree searches with NCCL's graph dump\n"
          "                        of the same machine (NCCL_GRAPH_DUMP_FILE); exits 3 when\n"
          "                        they differ\n"
          "  -V, --nccl-version V  search with the speed tables of NCCL V (e.g. 2.27.3; default\n"
          "                        2.30, or the version the --nccl-log names)\n"
          "  -S, --net-speed MBPS  every NIC at this speed, as a network plugin reporting it\n"
          "                        would make it (the library takes the plugin's properties)\n"
          "  -L, --net-latency US  every NIC with this latency: the tuner's network rows add it\n"
          "  -h, --help            this text\n"
          "\n"
          "Environment: NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS,\n"
          "NCCL_CROSS_NIC, NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_NET_GDR_LEVEL,\n"
          "NCCL_NTHREADS, NCCL_TOPO_FILE act as they do in the library. NCCL_DEBUG=INFO with\n"
          "NCCL_DEBUG_SUBSYS=GRAPH,TUNING also prints NCCL's log lines for rank 0.\n");
}

static int parse_size(const char* s, size_t* v) {
  char* end;
  unsigned long long x = strtoull(s, &end, 10);
  if (end == s) return -1;
  if (*end == 'K' || *end == 'k')
    x <<= 10, end++;
  else if (*end == 'M' || *end == 'm')
    x <<= 20, end++;
  else if (*end == 'G' || *end == 'g')
    x <<= 30, end++;
  if (*end != '\0') return -1;
  *v = (size_t)x;
  return 0;
}

/* "2.27.3" -> 22703. */
static int parse_version(const char* s, int* v) {
  int a, b, c = 0;
  if (sscanf(s, "%d.%d.%d", &a, &b, &c) < 2 || a != 2 || b < 0 || b > 99 || c < 0 || c > 99) return -1;
  *v = a * 10000 + b * 100 + c;
  return 0;
}

static int parse_args(int argc, char** argv, struct opts* o) {
  static const struct option longs[] = {{"xml", required_argument, 0, 'x'},
                                        {"graph-dump", required_argument, 0, 'G'},
                                        {"nccl-log", required_argument, 0, 'l'},
                                        {"nccl-graph", required_argument, 0, 'g'},
                                        {"nccl-version", required_argument, 0, 'V'},
                                        {"nodes", required_argument, 0, 'n'},
                                        {"ppn", required_argument, 0, 'p'},
                                        {"host", no_argument, 0, 'H'},
                                        {"min-bytes", required_argument, 0, 'b'},
                                        {"max-bytes", required_argument, 0, 'e'},
                                        {"factor", required_argument, 0, 'f'},
                                        {"func", required_argument, 0, 'c'},
                                        {"sections", required_argument, 0, 's'},
                                        {"dump", required_argument, 0, 'd'},
                                        {"net-speed", required_argument, 0, 'S'},
                                        {"net-latency", required_argument, 0, 'L'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "x:n:p:Hb:e:f:c:s:d:G:l:g:V:S:L:h", longs, NULL)) != -1) {
    switch (c) {
      case 'x':
        o->xml = optarg;
        break;
      case 'G':
        o->graph_dump = optarg;
        break;
      case 'l':
        o->log = optarg;
        break;
      case 'g':
        o->graph = optarg;
        break;
      case 'V':
        if (parse_version(optarg, &o->nccl_version)) goto bad;
        break;
      case 'd':
        o->dump = optarg;
        break;
      case 'S':
        o->net_speed = atoi(optarg);
        if (o->net_speed <= 0) goto bad;
        break;
      case 'L':
        o->net_latency = atof(optarg);
        if (!(o->net_latency >= 0)) goto bad;
        break;
      case 'n':
        o->nodes = atoi(optarg);
        break;
      case 'p':
        o->ppn = atoi(optarg);
        break;
      case 'H':
        o->host = 1;
        break;
      case 'f':
        o->factor = atoi(optarg);
        break;
      case 'b':
        if (parse_size(optarg, &o->min_bytes)) goto bad;
        break;
      case 'e':
        if (parse_size(optarg, &o->max_bytes)) goto bad;
        break;
      case 'c':
        o->func = -1;
        for (int f = 0; f < BRAID_NUM_FUNCS; f++)
          if (f != BRAID_FUNC_SendRecv && strcasecmp(optarg, braid_tuner_func_name(f)) == 0) o->func = f;
        if (o->func < 0) goto bad;
        break;
      case 's':
        o->matrix = strstr(optarg, "matrix") != NULL;
        o->channels = strstr(optarg, "channels") != NULL;
        o->tuner = strstr(optarg, "tuner") != NULL;
        if (!o->matrix && !o->channels && !o->tuner) goto bad;
        break;
      case 'h':
        usage(stdout);
        exit(0);
      default:
        usage(stderr);
        return -1;
    }
  }
  if (optind < argc || o->nodes < 0 || o->ppn < 0 || o->factor < 2 || o->min_bytes < 1 || o->max_bytes < o->min_bytes) {
    fprintf(stderr, "braid-topo: bad arguments (see --help)\n");
    return -1;
  }
  return 0;
bad:
  fprintf(stderr, "braid-topo: bad value '%s' for -%c (see --help)\n", optarg, c);
  return -1;
}

/* ---- the nvidia-smi style matrix ---- */

/* The chain of PCI ancestors of a node (itself first, its CPU last). */
static int ancestors(const struct braid_topo_system* sys, int n, int* out, int max) {
  int k = 0;
  while (n >= 0 && k < max) {
    out[k++] = n;
    n = sys->nodes[n].parent;
  }
  return k;
}

static const char* pci_relation(const struct braid_topo_system* sys, int a, int b) {
  int ca[32], cb[32], na = ancestors(sys, a, ca, 32), nb = ancestors(sys, b, cb, 32);
  for (int i = 1; i < na; i++)
    for (int j = 1; j < nb; j++)
      if (ca[i] == cb[j]) {
        if (sys->nodes[ca[i]].kind == BRAID_TOPO_CPU) return "NODE";
        return i == 1 && j == 1 ? "PIX" : "PXB";
      }
  return "SYS";
}

static void cell(const struct braid_topo_system* sys, int a, int b, char* buf, size_t len) {
  const struct braid_topo_node *x = &sys->nodes[a], *y = &sys->nodes[b];
  if (a == b) {
    snprintf(buf, len, "X");
    return;
  }
  if (x->kind == BRAID_TOPO_GPU && y->kind == BRAID_TOPO_GPU) {
    int direct = 0, nvs_a = 0, nvs_b = 0;
    for (int l = 0; l < x->nlinks; l++) {
      if (x->links[l].kind != BRAID_LINK_NVL) continue;
      if (x->links[l].remote == b) direct = (int)(x->links[l].bw / braid_topo_nvlink_bw(x->sm) + 0.5f);
      if (x->links[l].remote == sys->nvs) nvs_a = 1;
    }
    for (int l = 0; l < y->nlinks; l++)
      if (y->links[l].kind == BRAID_LINK_NVL && y->links[l].remote == sys->nvs) nvs_b = 1;
    if (direct) {
      snprintf(buf, len, "NV%d", direct);
      return;
    }
    if (nvs_a && nvs_b) {
      snprintf(buf, len, "NV%d", x->nvl_count < y->nvl_count ? x->nvl_count : y->nvl_count);
      return;
    }
  }
  snprintf(buf, len, "%s", pci_relation(sys, a, b));
}

/* "0000ffff,0000ffff" -> "0-15,32-47" */
static void cpulist(const char* mask, char* out, size_t len) {
  int bits[4096], n = 0, nw = 0;
  const char* words[256];
  char copy[256];
  snprintf(copy, sizeof(copy), "%s", mask);
  for (char* s = strtok(copy, ","); s && nw < 256; s = strtok(NULL, ",")) words[nw++] = s;
  for (int w = nw - 1, base = 0; w >= 0; w--, base += 32) {
    unsigned long v = strtoul(words[w], NULL, 16);
    for (int b = 0; b < 32 && n < 4096; b++)
      if (v & (1ul << b)) bits[n++] = base + b;
  }
  size_t k = 0;
  out[0] = '\0';
  for (int i = 0; i < n && k + 16 < len;) {
    int j = i;
    while (j + 1 < n && bits[j + 1] == bits[j] + 1) j++;
    k += (size_t)snprintf(out + k, len - k, j > i ? "%s%d-%d" : "%s%d", k ? "," : "", bits[i], bits[j]);
    i = j + 1;
  }
  if (n == 0) snprintf(out, len, "N/A");
}

static void print_matrix(const struct braid_topo_system* sys) {
  int n = sys->ngpus + sys->nnics;
  int* nodes = calloc((size_t)(n ? n : 1), sizeof(int));
  char buf[32], aff[512];
  if (nodes == NULL) return;
  for (int i = 0; i < sys->ngpus; i++) nodes[i] = sys->gpus[i];
  for (int i = 0; i < sys->nnics; i++) nodes[sys->ngpus + i] = sys->nics[i];
  printf("== Topology matrix (as nvidia-smi topo -m)\n\t");
  for (int i = 0; i < sys->ngpus; i++) printf("GPU%d\t", i);
  for (int i = 0; i < sys->nnics; i++) printf("NIC%d\t", i);
  printf("CPU Affinity\tNUMA Affinity\n");
  for (int r = 0; r < n; r++) {
    printf(r < sys->ngpus ? "GPU%d\t" : "NIC%d\t", r < sys->ngpus ? r : r - sys->ngpus);
    for (int c = 0; c < n; c++) {
      cell(sys, nodes[r], nodes[c], buf, sizeof(buf));
      printf(" %s\t", buf);
    }
    int anc[32], k = ancestors(sys, nodes[r], anc, 32), cpu = anc[k - 1];
    if (r < sys->ngpus && sys->nodes[cpu].kind == BRAID_TOPO_CPU) {
      cpulist(sys->nodes[cpu].affinity, aff, sizeof(aff));
      printf("%s\t%d\n", aff, (int)sys->nodes[cpu].id);
    } else {
      printf("\t\t\n");
    }
  }
  printf(
      "\nLegend:\n\n"
      "  X    = Self\n"
      "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
      "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node\n"
      "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
      "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
      "  PIX  = Connection traversing at most a single PCIe bridge\n"
      "  NV#  = Connection traversing a bonded set of # NVLinks\n");
  if (sys->nnics > 0) {
    printf("\nNIC Legend:\n\n");
    for (int i = 0; i < sys->nnics; i++)
      printf("  NIC%d: %s (%d Gb/s)\n", i, sys->nodes[sys->nics[i]].name, sys->nodes[sys->nics[i]].speed / 1000);
  }
  if (sys->ngpus == 0) printf("\n(no GPUs: host mode, the ranks run on the CPUs)\n");
  printf("\n");
  free(nodes);
}

/* ---- channels ---- */

static void print_search(const char* what, int pattern, int cross, int nch, float bwi, float bwe, int ti, int te,
                         int same) {
  printf(
      "%s search: pattern %d, crossNic %d, nChannels %d, bw %.1f/%.1f GB/s per channel (intra/inter), type %s/%s, "
      "sameChannels %d\n",
      what, pattern, cross, nch, bwi, bwe, braid_topo_path_name(ti), braid_topo_path_name(te), same);
}

static void print_channels(const struct braid_topo_system* sys, const struct braid_channel_graph* g) {
  int n = g->nranks;
  printf("== Channels: %d ranks on %d node%s, %d channels (%d searched x 2 trees)%s\n", n, g->nnodes,
         g->nnodes > 1 ? "s" : "", g->nchannels, g->nrings,
         g->host_mode ? ", host mode (shared memory / sockets)" : "");
  print_search("ring", g->pattern, g->cross_nic, g->nrings, g->bw_intra, g->bw_inter, g->type_intra, g->type_inter,
               g->same_channels);
  print_search("tree", g->tree_pattern, g->cross_nic, g->nrings, g->tree_bw_intra, g->tree_bw_inter, g->tree_type_intra,
               g->tree_type_inter, g->tree_same_channels);
  for (int c = 0; c < g->nchannels; c++) {
    printf("Channel %02d/%02d :", c, g->nchannels);
    for (int i = 0; i < n; i++) printf(" %d", g->ring[c * n + i]);
    printf("\n");
  }
  if (g->nnodes > 1) {
    printf("NICs per ring (node 0; every node alike):\n");
    for (int c = 0; c < g->nrings; c++) {
      printf("  ring %02d:", c);
      for (int r = 0; r < n / g->nnodes; r++) {
        int d = g->net_dev[c * n + r];
        if (d < 0) continue;
        int recv = braid_graph_ring_prev(g, c, r) >= n / g->nnodes ? 1 : 0;
        const char* name = d < sys->nnics ? sys->nodes[sys->nics[d]].name : "?";
        printf(" rank %d %s NIC%d(%s)", r, recv ? "<-" : "->", d, name);
        if (g->net_proxy[c * n + r] >= 0) printf(" via rank %d (PXN)", g->net_proxy[c * n + r]);
        printf(";");
      }
      printf("\n");
    }
  }
  for (int t = 0; t < 2 && t * g->nrings < g->nchannels; t++) {
    int c = t * g->nrings;
    printf("Tree %d (channel %02d), as NCCL's Trees lines: children/parent of each rank\n", t, c);
    for (int r = 0; r < n; r++) {
      const struct braid_tree_links* l = braid_graph_tree(g, c, r);
      printf("  %d/%d/%d->%d->%d\n", l->down[0], l->down[1], l->down[2], r, l->up);
    }
  }
  printf("\n");
}

/* ---- tuner table ---- */

static double bus_factor(int f, int n) {
  if (f == BRAID_FUNC_AllReduce) return n > 1 ? 2.0 * (n - 1) / n : 1.0;
  if (f == BRAID_FUNC_AllGather || f == BRAID_FUNC_ReduceScatter) return n > 1 ? (double)(n - 1) / n : 1.0;
  return 1.0;
}

static int print_tuner(const struct braid_tuner* t, const struct braid_channel_graph* g, const struct opts* o) {
  printf("== Tuner (bytes = the size NCCL's TUNING line shows: max of send and receive)\n");
  printf("%-14s %12s %-6s %-7s %4s %5s %12s %9s %9s  %s\n", "# collective", "bytes", "algo", "proto", "chan", "thr",
         "time(us)", "algbw", "busbw", "model best if different (* = model only)");
  for (int f = 0; f < BRAID_NUM_FUNCS; f++) {
    if (f == BRAID_FUNC_SendRecv || (o->func >= 0 && f != o->func)) continue;
    for (size_t b = o->min_bytes; b <= o->max_bytes; b *= (size_t)o->factor) {
      struct braid_tuner_choice c, m;
      if (braid_tuner_choose(t, f, b, &c) != ncclSuccess) return -1;
      double alg = (double)b / (c.time_us * 1e3);
      printf("%-14s %12zu %-6s %-7s %4d %5d %12.2f %9.2f %9.2f", braid_tuner_func_name(f), b,
             braid_tuner_algo_name(c.algo), braid_tuner_proto_name(c.proto), c.nchannels, c.nthreads, c.time_us, alg,
             alg * bus_factor(f, g->nranks));
      if (braid_tuner_model_best(t, f, b, &m) == ncclSuccess && (m.algo != c.algo || m.proto != c.proto))
        printf("  %s/%s %.2f%s", braid_tuner_algo_name(m.algo), braid_tuner_proto_name(m.proto), m.time_us,
               braid_tuner_implemented(m.algo) ? "" : "*");
      printf("\n");
      if (b > o->max_bytes / (size_t)o->factor) break;
    }
  }
  const char* sep[2] = {"", ""};
  printf("* model only: braid's data path runs");
  for (int a = 0; a < BRAID_NUM_ALGOS; a++)
    if (braid_tuner_implemented(a)) printf("%s %s", sep[0], braid_tuner_algo_name(a)), sep[0] = ",";
  printf(";");
  for (int a = 0; a < BRAID_NUM_ALGOS; a++)
    if (!braid_tuner_implemented(a)) printf("%s %s", sep[1], braid_tuner_algo_name(a)), sep[1] = ",";
  printf(" are priced to show what NCCL's model would pick.\n");
  return 0;
}

/* Logical CPUs of the system (for the default host-mode ppn). */
static int count_cpus(const struct braid_topo_system* sys) {
  int n = 0;
  for (int i = 0; i < sys->ncpus; i++) {
    const char* m = sys->nodes[sys->cpus[i]].affinity;
    for (; *m; m++) {
      if (*m == ',') continue;
      int v = *m >= 'a' ? *m - 'a' + 10 : *m >= 'A' ? *m - 'A' + 10 : *m - '0';
      n += __builtin_popcount((unsigned)v & 0xf);
    }
  }
  return n;
}

/* Node 0's search graphs as NCCL's <graphs> XML. */
static int graph_dump(const struct braid_topo_system* sys, int n, const struct braid_topo_rank* ranks,
                      const struct braid_graph_opts* go, const char* path) {
  struct braid_graph_node_info* info = calloc(1, sizeof(*info));
  char* text = NULL;
  int rc = -1;
  if (info != NULL && braid_graph_node_search_ex(sys, n, ranks, 0, go, info) == ncclSuccess &&
      braid_graph_dump_string(sys, n, ranks, 0, info, &text) == ncclSuccess) {
    FILE* f = fopen(path, "w");
    rc = f != NULL && fputs(text, f) >= 0 ? 0 : -1;
    if (f != NULL && fclose(f) != 0) rc = -1;
  }
  if (rc != 0) fprintf(stderr, "braid-topo: could not write the graphs to %s\n", path);
  free(text);
  free(info);
  return rc;
}

/* Nodes and ranks per node: the options, else the log's communicator, else the machine. */
static void shape(const struct opts* o, const struct nccl_log* log, const struct braid_topo_system* sys, int host,
                  int* nodes_p, int* ppn_p) {
  int nodes = o->nodes, ppn = o->ppn;
  if (nodes == 0 && log && log->nnodes > 0) nodes = log->nnodes;
  if (ppn == 0 && log && log->local_ranks > 0) ppn = log->local_ranks;
  if (ppn == 0 && log && log->nranks > 0 && nodes > 0) ppn = log->nranks / nodes;
  if (nodes == 0) nodes = 1;
  if (ppn == 0) ppn = host ? count_cpus(sys) : sys->ngpus;
  if (host && !o->ppn && ppn > 8) ppn = 8;
  if (ppn < 1) ppn = 1;
  *nodes_p = nodes;
  *ppn_p = ppn;
}

/* ---- NICs as a plugin reports them ---- */

static void set_nets(struct braid_topo_xml* x, const struct opts* o) {
  if (strcmp(x->name, "net") == 0) {
    if (o->net_speed > 0) braid_topo_xml_setf(x, "speed", "%d", o->net_speed);
    if (o->net_latency >= 0) braid_topo_xml_setf(x, "latency", "%g", o->net_latency);
  }
  for (int i = 0; i < x->nkids; i++) set_nets(x->kids[i], o);
}

/* --net-speed / --net-latency: the <net> attributes set, the system built again. */
static int net_override(struct braid_topo_system** sys_p, const struct opts* o) {
  char* text = NULL;
  struct braid_topo_system* s = NULL;
  if (o->net_speed <= 0 && o->net_latency < 0) return 0;
  set_nets((*sys_p)->xml, o);
  int bad = braid_topo_dump_xml_string(*sys_p, &text) != ncclSuccess ||
            braid_topo_load_xml_string(text, "--net-speed/--net-latency", &s) != ncclSuccess;
  free(text);
  if (bad) return -1;
  braid_topo_free(*sys_p);
  *sys_p = s;
  return 0;
}

int main(int argc, char** argv) {
  struct opts o = {NULL, NULL, NULL, NULL, NULL, 0, 0, 0, 0, 8, (size_t)8 << 30, 2, -1, 1, 1, 1, 0, -1};
  struct braid_topo_system* sys = NULL;
  struct braid_channel_graph* g = NULL;
  struct braid_tuner* t = NULL;
  struct braid_topo_rank* ranks = NULL;
  struct nccl_log log;
  int rc = 1, have_log = 0, nodes, ppn;
  if (parse_args(argc, argv, &o) != 0) return 2;
  if (o.log) {
    if (braid_nccl_log_read(o.log, &log) != 0) return 1;
    have_log = 1;
    if (!o.nccl_version) o.nccl_version = log.version;
  }
  if ((o.xml ? braid_topo_load_xml(o.xml, &sys) : braid_topo_detect(&sys)) != ncclSuccess) {
    fprintf(stderr, "braid-topo: could not %s the topology (run with NCCL_DEBUG=WARN)\n", o.xml ? "load" : "detect");
    goto out;
  }
  if (net_override(&sys, &o) != 0) goto out;
  if (o.dump && braid_topo_dump_xml(sys, o.dump) != ncclSuccess) goto out;
  int host = o.host || sys->ngpus == 0;
  shape(&o, have_log ? &log : NULL, sys, host, &nodes, &ppn);
  if (braid_tool_ranks(sys, nodes, ppn, host, &ranks) != ncclSuccess) goto out;
  int n = nodes * ppn;
  struct braid_graph_opts go = {o.nccl_version};
  printf("# braid-topo: %s, %d node%s x %d rank%s (%s)", o.xml ? o.xml : "local machine", nodes, nodes > 1 ? "s" : "",
         ppn, ppn > 1 ? "s" : "", host ? "host mode" : "GPUs");
  if (o.nccl_version)
    printf(", NCCL %d.%d.%d search tables", o.nccl_version / 10000, o.nccl_version / 100 % 100, o.nccl_version % 100);
  printf("\n");
  if (o.matrix) print_matrix(sys);
  if (braid_graph_compute_ex(sys, n, ranks, &go, &g) != ncclSuccess) {
    fprintf(stderr, "braid-topo: channel search failed (run with NCCL_DEBUG=WARN)\n");
    goto out;
  }
  if (o.graph_dump && graph_dump(sys, n, ranks, &go, o.graph_dump) != 0) goto out;
  braid_graph_log(g, 0, 0);
  if (o.channels) print_channels(sys, g);
  if (o.tuner) {
    if (braid_tuner_init(g, n, nodes, &t) != ncclSuccess) {
      fprintf(stderr, "braid-topo: tuner failed (a bad NCCL_ALGO/NCCL_PROTO? run with NCCL_DEBUG=WARN)\n");
      goto out;
    }
    if (print_tuner(t, g, &o) != 0) goto out;
  }
  rc = 0;
  if (have_log) {
    printf("== Against %s (NCCL %d.%d.%d)\n", o.log, log.version / 10000, log.version / 100 % 100, log.version % 100);
    rc = braid_nccl_log_compare(&log, g, stdout) ? 3 : 0;
  }
  if (o.graph) {
    printf("== Against %s\n", o.graph);
    int d = braid_nccl_graph_check(sys, n, ranks, &go, o.graph, stdout);
    if (d != 0 && rc == 0) rc = d < 0 ? 1 : 3;
  }
out:
  if (have_log) braid_nccl_log_free(&log);
  braid_tuner_free(t);
  braid_graph_free(g);
  braid_topo_free(sys);
  free(ranks);
  return rc;
}
