/*
 * braid-plan - chooses a training layout (TP x PP x DP x EP) from braid's communication
 * model: per parallelism the collective it issues, how often, the bytes per GPU, the link it
 * crosses and its time; the total per step and plain-words warnings; --search ranks every
 * valid layout; --coll prices one collective the textbook way (tools/lib/plan_coll.c). The
 * model lives in tools/lib/plan_model.c; this file parses flags and prints.
 * Output is deterministic. See --help.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_coll.h"
#include "plan_model.h"

struct opts {
  const char* xml;
  int nodes, gpn, domain;
  double nvl_bw, nic_bw, nvl_lat, net_lat;
  struct braid_plan_model m;
  struct braid_plan_layout l;
  int search, json, top;
  int coll, ranks, repeat, table; /* collective mode: coll >= 0 */
  double size, bw, lat;
};

static void usage(FILE* f) {
  fprintf(f,
          "Usage: braid-plan [cluster] [model] [layout | --search] [--json]\n"
          "       braid-plan [cluster] --coll NAME [--size S] [--ranks N] [--bw B] [--lat L] [--json]\n"
          "Prices the communication of a TP x PP x DP (x EP) training layout per step, or one\n"
          "collective.\n"
          "\n"
          "Cluster, given by numbers (ANALYTIC model: time = steps x latency + bytes / bandwidth;\n"
          "ring all-reduce 2(N-1)/N x S per GPU in 2(N-1) steps, tree 2S in 2 log2 N steps, the\n"
          "faster taken; all-gather, reduce-scatter (N-1)/N x S in N-1 steps; all-to-all\n"
          "(N-1)/N x S, the part leaving the NVLink domain at the NIC bandwidth; a ring that\n"
          "leaves a domain gets min(NVLink, members in the domain x NIC) bandwidth):\n"
          "  -n, --nodes N           nodes (default 1)\n"
          "  -g, --gpus-per-node G   GPUs per node (default 8)\n"
          "  -d, --nvl-domain D      GPUs joined by NVLink (default G; 72 for GB200 NVL72)\n"
          "  -B, --nvl-bw GB/s       NVLink bandwidth per GPU (default 450: NVLink 4)\n"
          "  -I, --nic-bw GB/s       network bandwidth per GPU (default 50: 400 Gb/s NDR)\n"
          "      --nvl-latency US    latency of one NVLink step (default 1)\n"
          "      --net-latency US    latency of one network step (default 2)\n"
          "or by a topology XML (BRAID'S TUNER: all-reduce, all-gather and reduce-scatter are\n"
          "priced by braid_tuner_choose on the channels braid_graph_compute finds for a\n"
          "communicator shaped like the group, as braid-topo shows; all-to-all and send/recv use\n"
          "the analytic formulas with NVLink and NIC bandwidths read from the XML):\n"
          "  -x, --xml FILE          a node (any file braid-topo reads); --nodes copies of it,\n"
          "                          every GPU used; the NVLink domain is the node\n"
          "\n"
          "Model (sizes take K, M, B/G, T):\n"
          "  -P, --preset NAME       llama-70b (dense), mixtral-8x22b (MoE), gpt3-175b; flags after\n"
          "                          it override its values\n"
          "  -L, --layers N          transformer layers\n"
          "  -H, --hidden N          hidden size\n"
          "  -s, --seq N             sequence length (default 4096)\n"
          "  -b, --micro-batch N     sequences per micro-batch (default 1)\n"
          "  -m, --micro-batches N   micro-batches per step per pipeline (default 8)\n"
          "  -e, --bytes N           bytes per element of activations and gradients (default 2)\n"
          "  -p, --params N          parameters (e.g. 70B)\n"
          "  -E, --experts N         MoE experts (default 0: dense); every layer is MoE\n"
          "  -k, --topk N            experts per token (default 2)\n"
          "  -F, --ffn N             MLP width of one expert, for the expert parameter count\n"
          "                          3 x hidden x ffn x experts x layers (default 4 x hidden)\n"
          "  -z, --zero N            ZeRO stage 0-3 (default 0): 1, 2 replace the DP all-reduce\n"
          "                          by reduce-scatter + all-gather; 3 gathers weights per micro-batch\n"
          "      --tflops N          sustained TFLOP/s per GPU for the overlap warning (default 400)\n"
          "      --gpu-mem GB        memory per GPU for the fit check of weights, gradients and\n"
          "                          Adam states (default 80; 0: no check)\n"
          "\n"
          "Layout:\n"
          "  -t, --tp N  -q, --pp N  -D, --dp N  -X, --ep N\n"
          "                          degrees (default 1; DP defaults to GPUs / (TP x PP));\n"
          "                          ranks: TP innermost, EP inside DP, then DP, PP outermost\n"
          "  -S, --search            try every valid layout for the GPU count, ranked by\n"
          "                          communication time per step (layouts that fit memory first)\n"
          "      --top N             rows of the search table (default 20; 0: all)\n"
          "  -j, --json              JSON instead of the table\n"
          "\n"
          "Collective mode (no model needed): bytes each GPU moves, steps, the time split into\n"
          "step cost (steps x latency) and transfer cost (bytes / bandwidth), algbw and busbw,\n"
          "for the ring and (all-reduce) the tree, and which is faster; with --xml also what\n"
          "braid's tuner picks for that communicator:\n"
          "      --coll NAME         allreduce, allgather, reducescatter, alltoall, sendrecv\n"
          "      --size S            bytes of the buffer (default 100M)\n"
          "      --ranks N           GPUs (default nodes x GPUs per node)\n"
          "      --bw GB/s           link bandwidth per GPU (default: NVLink inside the domain,\n"
          "                          else the ring's network share)\n"
          "      --lat US            cost of one step (default: --nvl-latency or --net-latency)\n"
          "      --repeat N          calls to add up (e.g. one per layer: 80)\n"
          "      --table             also step vs transfer cost at 64K, 1M, 100M and 1G\n"
          "  -h, --help              this text\n"
          "\n"
          "Per step: TP 4 all-reduces per layer per micro-batch (Megatron, attention + MLP,\n"
          "forward + backward) of micro-batch x seq x hidden x bytes; EP 4 all-to-alls per MoE\n"
          "layer per micro-batch of top-k x that; PP one send forward and one backward per\n"
          "micro-batch of that / TP; DP one all-reduce of this GPU's gradients (experts' over\n"
          "DP / EP). Warnings: TP larger than the NVLink domain, EP crossing nodes, DP longer\n"
          "than one micro-batch's backward (cannot hide), pipeline bubble (PP-1)/(m+PP-1) above\n"
          "10%%, model states above --gpu-mem.\n");
}

static int parse_num(const char* s, double* v) {
  char* end;
  double x = strtod(s, &end);
  if (end == s) return -1;
  switch (*end) {
    case 'K':
    case 'k':
      x *= 1e3;
      end++;
      break;
    case 'M':
    case 'm':
      x *= 1e6;
      end++;
      break;
    case 'B':
    case 'b':
    case 'G':
    case 'g':
      x *= 1e9;
      end++;
      break;
    case 'T':
    case 't':
      x *= 1e12;
      end++;
      break;
    default:
      break;
  }
  if (*end != '\0') return -1;
  *v = x;
  return 0;
}

static int preset(const char* name, struct braid_plan_model* m) {
  if (strcmp(name, "llama-70b") == 0) {
    m->layers = 80, m->hidden = 8192, m->params = 70e9, m->ffn = 28672, m->experts = 0;
  } else if (strcmp(name, "mixtral-8x22b") == 0) {
    m->layers = 56, m->hidden = 6144, m->params = 141e9, m->ffn = 16384, m->experts = 8, m->topk = 2;
  } else if (strcmp(name, "gpt3-175b") == 0) {
    m->layers = 96, m->hidden = 12288, m->params = 175e9, m->ffn = 0, m->experts = 0, m->seq = 2048;
  } else {
    return -1;
  }
  return 0;
}

enum { O_NVL_LAT = 256, O_NET_LAT, O_TFLOPS, O_MEM, O_TOP, O_COLL, O_SIZE, O_RANKS, O_BW, O_LAT, O_REPEAT, O_TABLE };

static int coll_of(const char* name) {
  static const char* names[] = {"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"};
  char k[32];
  size_t j = 0;
  for (const char* c = name; *c && j + 1 < sizeof(k); c++)
    if (*c != '-' && *c != '_') k[j++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
  k[j] = '\0';
  for (int i = 0; i < BRAID_PLAN_NUM_COLLS; i++)
    if (strcmp(k, names[i]) == 0) return i;
  return -1;
}

static int parse_args(int argc, char** argv, struct opts* o) {
  static const struct option lo[] = {{"nodes", 1, 0, 'n'},
                                     {"gpus-per-node", 1, 0, 'g'},
                                     {"nvl-domain", 1, 0, 'd'},
                                     {"nvl-bw", 1, 0, 'B'},
                                     {"nic-bw", 1, 0, 'I'},
                                     {"nvl-latency", 1, 0, O_NVL_LAT},
                                     {"net-latency", 1, 0, O_NET_LAT},
                                     {"xml", 1, 0, 'x'},
                                     {"preset", 1, 0, 'P'},
                                     {"layers", 1, 0, 'L'},
                                     {"hidden", 1, 0, 'H'},
                                     {"seq", 1, 0, 's'},
                                     {"micro-batch", 1, 0, 'b'},
                                     {"micro-batches", 1, 0, 'm'},
                                     {"bytes", 1, 0, 'e'},
                                     {"params", 1, 0, 'p'},
                                     {"experts", 1, 0, 'E'},
                                     {"topk", 1, 0, 'k'},
                                     {"ffn", 1, 0, 'F'},
                                     {"zero", 1, 0, 'z'},
                                     {"tflops", 1, 0, O_TFLOPS},
                                     {"gpu-mem", 1, 0, O_MEM},
                                     {"tp", 1, 0, 't'},
                                     {"pp", 1, 0, 'q'},
                                     {"dp", 1, 0, 'D'},
                                     {"ep", 1, 0, 'X'},
                                     {"search", 0, 0, 'S'},
                                     {"top", 1, 0, O_TOP},
                                     {"json", 0, 0, 'j'},
                                     {"help", 0, 0, 'h'},
                                     {"coll", 1, 0, O_COLL},
                                     {"size", 1, 0, O_SIZE},
                                     {"ranks", 1, 0, O_RANKS},
                                     {"bw", 1, 0, O_BW},
                                     {"lat", 1, 0, O_LAT},
                                     {"repeat", 1, 0, O_REPEAT},
                                     {"table", 0, 0, O_TABLE},
                                     {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "n:g:d:B:I:x:P:L:H:s:b:m:e:p:E:k:F:z:t:q:D:X:Sjh", lo, NULL)) != -1) {
    double v = 0;
    if (c == 'h') {
      usage(stdout);
      exit(0);
    }
    if (c == '?') return -1;
    if (c == 'S') {
      o->search = 1;
      continue;
    }
    if (c == 'j') {
      o->json = 1;
      continue;
    }
    if (c == 'x') {
      o->xml = optarg;
      continue;
    }
    if (c == O_TABLE) {
      o->table = 1;
      continue;
    }
    if (c == O_COLL) {
      if ((o->coll = coll_of(optarg)) >= 0) continue;
      fprintf(stderr, "braid-plan: unknown --coll '%s' (allreduce, allgather, reducescatter, alltoall, sendrecv)\n",
              optarg);
      return -1;
    }
    if (c == 'P') {
      if (preset(optarg, &o->m) == 0) continue;
      fprintf(stderr, "braid-plan: unknown --preset '%s' (llama-70b, mixtral-8x22b, gpt3-175b)\n", optarg);
      return -1;
    }
    if (parse_num(optarg, &v) != 0 || v < 0) {
      fprintf(stderr, "braid-plan: bad value '%s' for an option (see --help)\n", optarg);
      return -1;
    }
    int iv = v > 2e9 ? -1 : (int)v;
    switch (c) {
      case 'n':
        o->nodes = iv;
        break;
      case 'g':
        o->gpn = iv;
        break;
      case 'd':
        o->domain = iv;
        break;
      case 'B':
        o->nvl_bw = v;
        break;
      case 'I':
        o->nic_bw = v;
        break;
      case O_NVL_LAT:
        o->nvl_lat = v;
        break;
      case O_NET_LAT:
        o->net_lat = v;
        break;
      case 'L':
        o->m.layers = iv;
        break;
      case 'H':
        o->m.hidden = iv;
        break;
      case 's':
        o->m.seq = iv;
        break;
      case 'b':
        o->m.micro_batch = iv;
        break;
      case 'm':
        o->m.micro_batches = iv;
        break;
      case 'e':
        o->m.bytes_per_elem = iv;
        break;
      case 'p':
        o->m.params = v;
        break;
      case 'E':
        o->m.experts = iv;
        break;
      case 'k':
        o->m.topk = iv;
        break;
      case 'F':
        o->m.ffn = iv;
        break;
      case 'z':
        o->m.zero = iv;
        break;
      case O_TFLOPS:
        o->m.tflops = v;
        break;
      case O_MEM:
        o->m.gpu_mem_gb = v;
        break;
      case 't':
        o->l.tp = iv;
        break;
      case 'q':
        o->l.pp = iv;
        break;
      case 'D':
        o->l.dp = iv;
        break;
      case 'X':
        o->l.ep = iv;
        break;
      case O_TOP:
        o->top = iv;
        break;
      case O_SIZE:
        o->size = v;
        break;
      case O_RANKS:
        o->ranks = iv;
        break;
      case O_BW:
        o->bw = v;
        break;
      case O_LAT:
        o->lat = v;
        break;
      case O_REPEAT:
        o->repeat = iv;
        break;
      default:
        return -1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "braid-plan: unexpected argument '%s' (see --help)\n", argv[optind]);
    return -1;
  }
  if (o->coll < 0 && (o->m.layers == 0 || o->m.hidden == 0 || o->m.params == 0)) {
    fprintf(stderr, "braid-plan: the model needs --layers, --hidden and --params (or --preset)\n");
    return -1;
  }
  return 0;
}

static const char* warn_text(int bit) {
  switch (bit) {
    case BRAID_PLAN_WARN_TP_DOMAIN:
      return "TP is larger than the NVLink domain: its all-reduces cross the network";
    case BRAID_PLAN_WARN_EP_NETWORK:
      return "EP crosses nodes: its all-to-alls go over the network";
    case BRAID_PLAN_WARN_DP_EXPOSED:
      return "the DP gradient reduction takes longer than one micro-batch's backward: it cannot hide";
    case BRAID_PLAN_WARN_BUBBLE:
      return "the pipeline bubble is above 10% for this micro-batch count";
    case BRAID_PLAN_WARN_MEMORY:
      return "weights, gradients and optimizer states do not fit in --gpu-mem";
    default:
      return "?";
  }
}

static double sum_of(const struct braid_plan_result* r, const char* what) {
  double t = 0;
  for (int i = 0; i < r->nitems; i++)
    if (strncmp(r->items[i].what, what, strlen(what)) == 0) t += r->items[i].total_us;
  return t;
}

static const char* link_name(const struct braid_plan_cluster* c, const struct braid_plan_item* it) {
  return it->network ? "network" : c->intra_name;
}

static void print_header(const struct opts* o, const struct braid_plan_cluster* c) {
  const struct braid_plan_model* m = &o->m;
  printf(
      "# braid-plan: %d nodes x %d GPUs = %d GPUs; NVLink domain %d GPUs, %s %.0f GB/s per GPU, network %.1f GB/s "
      "per GPU; %s\n",
      c->nodes, c->gpus_per_node, c->nodes * c->gpus_per_node, c->nvl_domain, c->intra_name, c->nvl_bw, c->nic_bw,
      o->xml ? "AR/AG/RS from braid's tuner on the XML, A2A/P2P analytic" : "analytic model");
  printf("# model: %d layers, hidden %d, seq %d, micro-batch %d x %d per step, %d B/elem, %.1fB params", m->layers,
         m->hidden, m->seq, m->micro_batch, m->micro_batches, m->bytes_per_elem, m->params / 1e9);
  if (m->experts) printf(", MoE %d experts top-%d", m->experts, m->topk);
  printf(", ZeRO %d\n", m->zero);
}

static void print_plan(const struct braid_plan_cluster* c, const struct braid_plan_result* r) {
  const struct braid_plan_layout* l = &r->layout;
  printf("# layout: TP %d x PP %d x DP %d x EP %d\n", l->tp, l->pp, l->dp, l->ep);
  printf("%-10s %-13s %5s %10s %11s %12s %-8s %-12s %11s %11s\n", "what", "collective", "group", "calls/step",
         "size(MB)", "MB/GPU/call", "link", "algo", "us/call", "ms/step");
  for (int i = 0; i < r->nitems; i++) {
    const struct braid_plan_item* it = &r->items[i];
    printf("%-10s %-13s %5d %10.0f %11.3f %12.3f %-8s %-12s %11.2f %11.3f\n", it->what,
           braid_plan_model_coll_name(it->coll), it->group, it->count, it->size / 1e6, it->bytes / 1e6,
           link_name(c, it), it->algo, it->time_us, it->total_us / 1e3);
  }
  printf("total communication per step: %.3f ms (DP %.3f ms; one micro-batch backward %.3f ms)\n", r->total_us / 1e3,
         r->dp_us / 1e3, r->backward_us / 1e3);
  printf("pipeline bubble: %.1f%%; model states %.1f GB per GPU\n", 100 * r->bubble, r->mem_gb);
  for (int b = 1; b <= BRAID_PLAN_WARN_MEMORY; b <<= 1)
    if (r->warn & b) printf("warning: %s\n", warn_text(b));
}

static void print_search(const struct braid_plan_result* rs, int n, int top) {
  printf("%4s %4s %4s %4s %4s %11s %9s %9s %9s %9s %7s %8s  %s\n", "rank", "TP", "PP", "DP", "EP", "comm ms", "TP ms",
         "EP ms", "PP ms", "DP ms", "bubble", "mem GB", "warnings");
  for (int i = 0; i < n && (top == 0 || i < top); i++) {
    const struct braid_plan_result* r = &rs[i];
    printf("%4d %4d %4d %4d %4d %11.3f %9.3f %9.3f %9.3f %9.3f %6.1f%% %8.1f  %s%s%s%s%s\n", i + 1, r->layout.tp,
           r->layout.pp, r->layout.dp, r->layout.ep, r->total_us / 1e3, sum_of(r, "TP") / 1e3, sum_of(r, "EP") / 1e3,
           sum_of(r, "PP") / 1e3, sum_of(r, "DP") / 1e3, 100 * r->bubble, r->mem_gb,
           r->warn & BRAID_PLAN_WARN_TP_DOMAIN ? "tp-net " : "", r->warn & BRAID_PLAN_WARN_EP_NETWORK ? "ep-net " : "",
           r->warn & BRAID_PLAN_WARN_DP_EXPOSED ? "dp-exposed " : "", r->warn & BRAID_PLAN_WARN_BUBBLE ? "bubble " : "",
           r->warn & BRAID_PLAN_WARN_MEMORY ? "no-fit" : "");
  }
  if (top && n > top) printf("(%d more layouts; --top 0 shows all)\n", n - top);
  printf(
      "warnings: tp-net = TP larger than the NVLink domain; ep-net = EP all-to-all crosses nodes; dp-exposed = DP\n"
      "reduction longer than one micro-batch's backward; bubble = pipeline bubble above 10%%; no-fit = model\n"
      "states above --gpu-mem (ranked after the layouts that fit)\n");
}

static void json_result(const struct braid_plan_cluster* c, const struct braid_plan_result* r) {
  printf(
      "{\"tp\":%d,\"pp\":%d,\"dp\":%d,\"ep\":%d,\"comm_us\":%.3f,\"dp_us\":%.3f,\"backward_us\":%.3f,"
      "\"bubble\":%.4f,\"mem_gb\":%.3f,\"items\":[",
      r->layout.tp, r->layout.pp, r->layout.dp, r->layout.ep, r->total_us, r->dp_us, r->backward_us, r->bubble,
      r->mem_gb);
  for (int i = 0; i < r->nitems; i++) {
    const struct braid_plan_item* it = &r->items[i];
    printf(
        "%s{\"what\":\"%s\",\"collective\":\"%s\",\"group\":%d,\"calls_per_step\":%.0f,\"size_bytes\":%.0f,"
        "\"bytes_per_gpu\":%.0f,\"link\":\"%s\",\"algo\":\"%s\",\"us_per_call\":%.3f,\"us_per_step\":%.3f}",
        i ? "," : "", it->what, braid_plan_model_coll_name(it->coll), it->group, it->count, it->size, it->bytes,
        link_name(c, it), it->algo, it->time_us, it->total_us);
  }
  printf("],\"warnings\":[");
  for (int b = 1, k = 0; b <= BRAID_PLAN_WARN_MEMORY; b <<= 1)
    if (r->warn & b) printf("%s\"%s\"", k++ ? "," : "", warn_text(b));
  printf("]}");
}

/* The cluster of the collective mode: enough nodes for the ranks. */
static ncclResult_t coll_cluster(const struct opts* o, struct braid_plan_cluster* c, int* n_p) {
  int n = o->ranks, nodes = o->nodes;
  memset(c, 0, sizeof(*c));
  for (int pass = 0; pass < 2; pass++) {
    ncclResult_t res =
        o->xml ? braid_plan_model_cluster_xml(o->xml, nodes, c)
               : braid_plan_model_cluster_init(nodes, o->gpn, o->domain ? o->domain : o->gpn, o->nvl_bw, o->nic_bw, c);
    if (res != ncclSuccess) return res;
    if (n == 0) n = c->nodes * c->gpus_per_node;
    if (n <= c->nodes * c->gpus_per_node) break;
    nodes = (n + c->gpus_per_node - 1) / c->gpus_per_node;
    braid_plan_model_cluster_free(c);
  }
  if (o->nvl_lat >= 0) c->nvl_lat_us = o->nvl_lat;
  if (o->net_lat >= 0) c->net_lat_us = o->net_lat;
  *n_p = n;
  return ncclSuccess;
}

/* --coll: one collective, ring and tree, and braid's tuner's pick on an XML. */
static int coll_main(const struct opts* o) {
  struct braid_plan_cluster c;
  struct braid_plan_coll_result r;
  struct braid_plan_coll_tuner tu = {0};
  int n, rc = 2;
  if (o->repeat < 1 || coll_cluster(o, &c, &n) != ncclSuccess) {
    fprintf(stderr, "braid-plan: bad %s (run with NCCL_DEBUG=WARN for the reason)\n",
            o->repeat < 1 ? "--repeat" : "cluster");
    return 2;
  }
  int ppn, ndom;
  braid_plan_model_placement(&c, n, 1, &ppn, &ndom);
  double bw = o->bw >= 0 ? o->bw : ndom > 1 ? fmin(c.nvl_bw, ppn * c.nic_bw) : c.nvl_bw;
  double lat = o->lat >= 0 ? o->lat : ndom > 1 ? c.net_lat_us : c.nvl_lat_us;
  if (braid_plan_coll_price(o->coll, n, o->size, bw, lat, &r) != ncclSuccess) {
    fprintf(stderr, "braid-plan: bad collective (run with NCCL_DEBUG=WARN for the reason)\n");
    goto out;
  }
  struct braid_plan_item it;
  if (o->xml && braid_plan_model_coll(&c, o->coll, n, 1, o->size, &it) == ncclSuccess && strchr(it.algo, '/')) {
    tu = (struct braid_plan_coll_tuner){1, "", it.time_us, o->xml, ndom, ppn};
    snprintf(tu.algo, sizeof(tu.algo), "%s", it.algo);
  }
  if (o->json) {
    braid_plan_coll_json(stdout, &r, o->repeat, &tu);
  } else {
    braid_plan_coll_print(stdout, &r, o->repeat, &tu);
    static const double sizes[] = {64e3, 1e6, 100e6, 1e9};
    if (o->table) {
      printf("\n");
      if (braid_plan_coll_table(stdout, o->coll, n, sizes, 4, bw, lat) != ncclSuccess) goto out;
    }
  }
  rc = 0;
out:
  braid_plan_model_cluster_free(&c);
  return rc;
}

int main(int argc, char** argv) {
  struct opts o = {NULL,         1, 8, 0,  450, 50, -1, -1, {0, 0, 4096, 1, 8, 2, 0, 0, 2, 0, 0, 400, 80},
                   {0, 1, 0, 1}, 0, 0, 20, -1,  0,  1,  0,  100e6,
                   -1,           -1};
  struct braid_plan_cluster c;
  struct braid_plan_result one, *rs = NULL;
  int n = 0, rc = 1;
  if (parse_args(argc, argv, &o) != 0) return 2;
  if (o.coll >= 0) return coll_main(&o);
  memset(&c, 0, sizeof(c));
  ncclResult_t res =
      o.xml ? braid_plan_model_cluster_xml(o.xml, o.nodes, &c)
            : braid_plan_model_cluster_init(o.nodes, o.gpn, o.domain ? o.domain : o.gpn, o.nvl_bw, o.nic_bw, &c);
  if (res != ncclSuccess) {
    fprintf(stderr, "braid-plan: bad cluster (run with NCCL_DEBUG=WARN for the reason)\n");
    return 2;
  }
  if (o.nvl_lat >= 0) c.nvl_lat_us = o.nvl_lat;
  if (o.net_lat >= 0) c.net_lat_us = o.net_lat;
  if (braid_plan_model_check(&o.m) != ncclSuccess) {
    fprintf(stderr, "braid-plan: bad model (run with NCCL_DEBUG=WARN for the field)\n");
    goto out;
  }
  if (o.search) {
    if (braid_plan_model_search(&c, &o.m, &rs, &n) != ncclSuccess) {
      fprintf(stderr, "braid-plan: no layout (run with NCCL_DEBUG=WARN)\n");
      goto out;
    }
    if (o.json) {
      printf("{\"gpus\":%d,\"layouts\":[", c.nodes * c.gpus_per_node);
      for (int i = 0; i < n && (o.top == 0 || i < o.top); i++) {
        printf(i ? ",\n" : "\n");
        json_result(&c, &rs[i]);
      }
      printf("]}\n");
    } else {
      print_header(&o, &c);
      print_search(rs, n, o.top);
      printf("\n# the best layout in detail\n");
      print_plan(&c, &rs[0]);
    }
  } else {
    struct braid_plan_layout l = o.l;
    if (l.tp < 1) l.tp = 1;
    if (l.dp == 0 && l.tp > 0 && l.pp > 0) l.dp = c.nodes * c.gpus_per_node / (l.tp * l.pp);
    const char* why = NULL;
    if (!braid_plan_model_layout_valid(&c, &o.m, &l, &why)) {
      fprintf(stderr, "braid-plan: layout TP %d x PP %d x DP %d x EP %d: %s\n", l.tp, l.pp, l.dp, l.ep, why);
      goto out;
    }
    if (braid_plan_model_evaluate(&c, &o.m, &l, &one) != ncclSuccess) goto out;
    if (o.json) {
      json_result(&c, &one);
      printf("\n");
    } else {
      print_header(&o, &c);
      print_plan(&c, &one);
    }
  }
  rc = 0;
out:
  free(rs);
  braid_plan_model_cluster_free(&c);
  return rc;
}
