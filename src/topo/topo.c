/*
 * topo.c - builds the system graph from an XML document in NCCL's schema (topo.h):
 * <system> <cpu> <pci> <gpu> <nvlink> <c2c> <nic> <net>. Every node and link of the graph is
 * made here; topo_paths.c then computes the paths. Errors in the document name its line.
 *
 * Link bandwidths (GB/s, reference section 3): PCIe = width x {15,30,60,120,240,480}/80 for
 * Gen1..6; NVLink per link by GPU generation; C2C = bw x count; CPU to CPU by vendor/model;
 * a NIC's PCIe link is capped by its port speed (Mb/s / 8000).
 */
#include "topo/topo.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

/* ---- bandwidth rules ------------------------------------------------------------------ */

float braid_topo_nvlink_bw(int sm) {
  if (sm >= 100) return 40.1f; /* Blackwell, NVLink 5 */
  if (sm >= 90) return 20.6f;  /* Hopper, NVLink 4 */
  if (sm >= 86) return 12.0f;  /* consumer Ampere */
  if (sm >= 70) return 20.0f;  /* Volta, Ampere */
  return 18.0f;                /* Pascal */
}

float braid_topo_pci_bw(const char* speed, int width) {
  /* Per-lane rate x 8/10 (Gen1-2) or ~128/130 folded into NCCL's table: GB/s x80 per lane. */
  static const struct {
    double gts;
    int per_lane;
  } gens[] = {{2.5, 15}, {5.0, 30}, {8.0, 60}, {16.0, 120}, {32.0, 240}, {64.0, 480}};
  if (speed == NULL || width <= 0) return BRAID_TOPO_BW_PCI_DEFAULT;
  double gts = atof(speed);
  for (size_t i = 0; i < sizeof(gens) / sizeof(gens[0]); i++)
    if (gts > 0 && gts <= gens[i].gts + 0.01) return (float)(width * gens[i].per_lane) / 80.0f;
  return BRAID_TOPO_BW_PCI_DEFAULT;
}

/* CPU-to-CPU interconnect per socket pair (GB/s). */
static float cpu_sys_bw(const struct braid_topo_node* c) {
  if (c->arch == BRAID_CPU_ARCH_POWER) return 32.0f; /* P9 */
  if (c->arch == BRAID_CPU_ARCH_ARM) return 6.0f;
  if (c->vendor == BRAID_CPU_VENDOR_AMD) return 16.0f;
  if (c->vendor == BRAID_CPU_VENDOR_INTEL && c->family == 6) {
    if (c->model >= 0xcf) return 40.0f; /* Emerald Rapids and later */
    if (c->model >= 0x8f) return 22.0f; /* Sapphire Rapids */
    if (c->model >= 0x55) return 10.0f; /* Skylake-SP .. Ice Lake */
  }
  return 6.0f; /* Broadwell and unknown */
}

/* ---- nodes and links ------------------------------------------------------------------ */

ncclResult_t braid_topo_node_add(struct braid_topo_system* sys, int kind, int64_t id, int* idx_p) {
  if (sys->nnodes == sys->cap_nodes) {
    int cap = sys->cap_nodes ? 2 * sys->cap_nodes : 32;
    struct braid_topo_node* n = realloc(sys->nodes, (size_t)cap * sizeof(*n));
    if (n == NULL) {
      BRAID_WARN("Failed to grow the topology to %d nodes", cap);
      return ncclSystemError;
    }
    sys->nodes = n;
    sys->cap_nodes = cap;
  }
  struct braid_topo_node* n = &sys->nodes[sys->nnodes];
  memset(n, 0, sizeof(*n));
  n->kind = kind;
  n->id = id;
  n->rank = -1;
  n->pseudo = -1;
  n->dev = -1;
  n->parent = -1;
  *idx_p = sys->nnodes++;
  return ncclSuccess;
}

static ncclResult_t link_add_one(struct braid_topo_system* sys, int a, int b, int kind, float bw) {
  struct braid_topo_node* n = &sys->nodes[a];
  for (int i = 0; i < n->nlinks; i++) {
    if (n->links[i].remote == b && n->links[i].kind == kind) { /* a second declaration adds up */
      n->links[i].bw += bw;
      return ncclSuccess;
    }
  }
  if (n->nlinks == n->cap_links) {
    int cap = n->cap_links ? 2 * n->cap_links : 4;
    struct braid_topo_link* l = realloc(n->links, (size_t)cap * sizeof(*l));
    if (l == NULL) {
      BRAID_WARN("Failed to grow the links of topology node %d to %d", a, cap);
      return ncclSystemError;
    }
    n->links = l;
    n->cap_links = cap;
  }
  n->links[n->nlinks].kind = kind;
  n->links[n->nlinks].remote = b;
  n->links[n->nlinks].bw = bw;
  n->nlinks++;
  return ncclSuccess;
}

ncclResult_t braid_topo_link_add(struct braid_topo_system* sys, int a, int b, int kind, float bw) {
  BRAID_CHECK(link_add_one(sys, a, b, kind, bw));
  return link_add_one(sys, b, a, kind, bw);
}

ncclResult_t braid_topo_busid_parse(const char* s, int64_t* id_p) {
  /* [dddd:]bb:dd.f, hex digits only */
  unsigned long part[4] = {0, 0, 0, 0};
  char sep[4];
  int n = 0, digits = 0;
  if (s == NULL) return ncclInvalidArgument;
  for (const char* c = s;; c++) {
    if (isxdigit((unsigned char)*c)) {
      if (++digits > 4 || n > 3) return ncclInvalidArgument;
      part[n] =
          part[n] * 16 + (unsigned long)(isdigit((unsigned char)*c) ? *c - '0' : tolower((unsigned char)*c) - 'a' + 10);
      continue;
    }
    if (digits == 0 || n > 3 || (*c != ':' && *c != '.' && *c != '\0')) return ncclInvalidArgument;
    sep[n++] = *c;
    digits = 0;
    if (*c == '\0') break;
  }
  unsigned long dom, bus, dev, fn;
  if (n == 4 && sep[0] == ':' && sep[1] == ':' && sep[2] == '.')
    dom = part[0], bus = part[1], dev = part[2], fn = part[3];
  else if (n == 3 && sep[0] == ':' && sep[1] == '.')
    dom = 0, bus = part[0], dev = part[1], fn = part[2];
  else
    return ncclInvalidArgument;
  if (bus > 0xff || dev > 0x1f || fn > 7) return ncclInvalidArgument;
  *id_p = ((int64_t)dom << 20) | ((int64_t)bus << 12) | ((int64_t)dev << 4) | (int64_t)fn;
  return ncclSuccess;
}

void braid_topo_busid_format(int64_t id, char* buf, size_t len) {
  if (id < 0) {
    snprintf(buf, len, "none");
    return;
  }
  snprintf(buf, len, "%04llx:%02llx:%02llx.%llx", (unsigned long long)(id >> 20),
           (unsigned long long)((id >> 12) & 0xff), (unsigned long long)((id >> 4) & 0xff),
           (unsigned long long)(id & 0xf));
}

/* ---- XML -> graph --------------------------------------------------------------------- */

struct topo_build {
  struct braid_topo_system* sys;
  /* nvlink/c2c elements are resolved once every GPU exists */
  int npending, cap_pending;
  struct {
    const struct braid_topo_xml* x;
    int gpu;
    int cpu;
  } * pending;
};

#define TOPO_BAD(x, ...)                                                            \
  do {                                                                              \
    char braid_msg_[256];                                                           \
    snprintf(braid_msg_, sizeof(braid_msg_), __VA_ARGS__);                          \
    BRAID_WARN("Topology XML line %d: <%s>: %s", (x)->line, (x)->name, braid_msg_); \
    return ncclInvalidArgument;                                                     \
  } while (0)

static ncclResult_t xml_int(const struct braid_topo_xml* x, const char* name, int64_t def, int* v) {
  int64_t w;
  BRAID_CHECK(braid_topo_xml_get_int(x, name, def, &w));
  *v = (int)w;
  return ncclSuccess;
}

/* Does this element contain a GPU or a NIC (elements not leading to one are kept in the XML
 * but get no node)? */
static int xml_has_device(const struct braid_topo_xml* x) {
  if (strcmp(x->name, "gpu") == 0 || strcmp(x->name, "net") == 0) return 1;
  for (int i = 0; i < x->nkids; i++)
    if (xml_has_device(x->kids[i])) return 1;
  return 0;
}

static ncclResult_t build_gpu(struct topo_build* b, const struct braid_topo_xml* x, int64_t busid, int parent, float bw,
                              int cpu) {
  struct braid_topo_system* sys = b->sys;
  int idx;
  for (int i = 0; i < sys->nnodes; i++)
    if (sys->nodes[i].kind == BRAID_TOPO_GPU && sys->nodes[i].id == busid)
      TOPO_BAD(x, "GPU %s appears twice", braid_topo_xml_get(x->parent, "busid"));
  BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_GPU, busid, &idx));
  struct braid_topo_node* g = &sys->nodes[idx];
  g->xml_line = x->line;
  g->parent = parent;
  BRAID_CHECK(xml_int(x, "dev", -1, &g->dev));
  BRAID_CHECK(xml_int(x, "sm", 0, &g->sm));
  BRAID_CHECK(xml_int(x, "rank", -1, &g->rank));
  BRAID_CHECK(xml_int(x, "gdr", 0, &g->gdr));
  if (g->sm < 0 || g->sm > 1000) TOPO_BAD(x, "sm=%d is not a compute capability", g->sm);
  BRAID_CHECK(braid_topo_link_add(sys, idx, parent, BRAID_LINK_PCI, bw));
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "nvlink") != 0 && strcmp(k->name, "c2c") != 0) continue;
    if (b->npending == b->cap_pending) {
      int cap = b->cap_pending ? 2 * b->cap_pending : 64;
      void* p = realloc(b->pending, (size_t)cap * sizeof(*b->pending));
      if (p == NULL) {
        BRAID_WARN("Failed to allocate the NVLink list");
        return ncclSystemError;
      }
      b->pending = p;
      b->cap_pending = cap;
    }
    b->pending[b->npending].x = k;
    b->pending[b->npending].gpu = idx;
    b->pending[b->npending].cpu = cpu;
    b->npending++;
  }
  return ncclSuccess;
}

static ncclResult_t build_nic(struct topo_build* b, const struct braid_topo_xml* x, int64_t busid, int parent, float bw,
                              int link_kind) {
  struct braid_topo_system* sys = b->sys;
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "net") != 0) continue;
    int idx;
    BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_NIC, busid, &idx));
    struct braid_topo_node* n = &sys->nodes[idx];
    const char* name = braid_topo_xml_get(k, "name");
    const char* guid = braid_topo_xml_get(k, "guid");
    n->xml_line = k->line;
    n->parent = parent;
    snprintf(n->name, sizeof(n->name), "%s", name ? name : "");
    BRAID_CHECK(xml_int(k, "dev", -1, &n->dev));
    BRAID_CHECK(xml_int(k, "speed", BRAID_TOPO_NET_SPEED_DEFAULT, &n->speed));
    BRAID_CHECK(xml_int(k, "port", 1, &n->port));
    BRAID_CHECK(xml_int(k, "latency", 0, &n->latency));
    BRAID_CHECK(xml_int(k, "maxconn", 0, &n->maxconn));
    BRAID_CHECK(xml_int(k, "gdr", 0, &n->gdr));
    n->guid = guid ? strtoull(guid, NULL, 0) : 0; /* informational: no check */
    if (n->speed <= 0) n->speed = BRAID_TOPO_NET_SPEED_DEFAULT;
    float nbw = (float)n->speed / 8000.0f;
    BRAID_CHECK(braid_topo_link_add(sys, idx, parent, link_kind, bw < nbw ? bw : nbw));
  }
  return ncclSuccess;
}

static ncclResult_t build_pci(struct topo_build* b, const struct braid_topo_xml* x, int parent, int cpu) {
  struct braid_topo_system* sys = b->sys;
  int64_t busid;
  int width;
  if (!xml_has_device(x)) return ncclSuccess;
  const char* bs = braid_topo_xml_get(x, "busid");
  if (bs == NULL) TOPO_BAD(x, "no busid attribute");
  if (braid_topo_busid_parse(bs, &busid) != ncclSuccess) TOPO_BAD(x, "busid=\"%s\" is not dddd:bb:dd.f", bs);
  BRAID_CHECK(xml_int(x, "link_width", 0, &width));
  float bw = braid_topo_pci_bw(braid_topo_xml_get(x, "link_speed"), width);
  const struct braid_topo_xml* gpu = braid_topo_xml_child(x, "gpu");
  const struct braid_topo_xml* nic = braid_topo_xml_child(x, "nic");
  if (gpu != NULL && nic != NULL) TOPO_BAD(x, "holds both a <gpu> and a <nic>");
  if (gpu != NULL) return build_gpu(b, gpu, busid, parent, bw, cpu);
  if (nic != NULL) return build_nic(b, nic, busid, parent, bw, BRAID_LINK_PCI);
  int idx;
  BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_PCI, busid, &idx));
  sys->nodes[idx].xml_line = x->line;
  sys->nodes[idx].parent = parent;
  BRAID_CHECK(braid_topo_link_add(sys, idx, parent, BRAID_LINK_PCI, bw));
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "pci") == 0) {
      BRAID_CHECK(build_pci(b, k, idx, cpu));
    } else if (strcmp(k->name, "gpu") != 0 && strcmp(k->name, "nic") != 0) {
      TOPO_BAD(k, "unexpected inside <pci> (line %d)", x->line);
    }
  }
  return ncclSuccess;
}

static ncclResult_t build_cpu(struct topo_build* b, const struct braid_topo_xml* x) {
  struct braid_topo_system* sys = b->sys;
  int numa, idx;
  BRAID_CHECK(xml_int(x, "numaid", -1, &numa));
  if (numa < 0) numa = sys->ncpus;
  for (int i = 0; i < sys->nnodes; i++)
    if (sys->nodes[i].kind == BRAID_TOPO_CPU && sys->nodes[i].id == numa) TOPO_BAD(x, "numaid=%d appears twice", numa);
  BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_CPU, numa, &idx));
  sys->ncpus++;
  struct braid_topo_node* c = &sys->nodes[idx];
  const char* arch = braid_topo_xml_get(x, "arch");
  const char* vendor = braid_topo_xml_get(x, "vendor");
  const char* aff = braid_topo_xml_get(x, "affinity");
  c->xml_line = x->line;
  c->arch = BRAID_CPU_ARCH_X86;
  if (arch && (strstr(arch, "ppc") || strstr(arch, "power"))) c->arch = BRAID_CPU_ARCH_POWER;
  if (arch && (strstr(arch, "arm") || strstr(arch, "aarch"))) c->arch = BRAID_CPU_ARCH_ARM;
  c->vendor = BRAID_CPU_VENDOR_OTHER;
  if (vendor && strstr(vendor, "Intel")) c->vendor = BRAID_CPU_VENDOR_INTEL;
  if (vendor && strstr(vendor, "AMD")) c->vendor = BRAID_CPU_VENDOR_AMD;
  if (vendor && (strstr(vendor, "Centaur") || strstr(vendor, "Shanghai"))) c->vendor = BRAID_CPU_VENDOR_ZHAOXIN;
  BRAID_CHECK(xml_int(x, "familyid", 0, &c->family));
  BRAID_CHECK(xml_int(x, "modelid", 0, &c->model));
  snprintf(c->affinity, sizeof(c->affinity), "%s", aff ? aff : "");
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "pci") == 0) {
      BRAID_CHECK(build_pci(b, k, idx, idx));
    } else if (strcmp(k->name, "nic") == 0) { /* a NIC not on PCI (e.g. virtual) */
      BRAID_CHECK(build_nic(b, k, -1, idx, BRAID_TOPO_BW_PCI_DEFAULT, BRAID_LINK_PCI));
    } else {
      TOPO_BAD(k, "unexpected inside <cpu> (line %d)", x->line);
    }
  }
  return ncclSuccess;
}

/* NVLink and C2C: targets are GPUs (by bus id), the NVSwitch fabric (tclass 0x068000 not a
 * GPU), or a CPU (POWER9). */
static ncclResult_t build_links(struct topo_build* b) {
  struct braid_topo_system* sys = b->sys;
  for (int p = 0; p < b->npending; p++) {
    const struct braid_topo_xml* x = b->pending[p].x;
    int g = b->pending[p].gpu;
    int count, sm = sys->nodes[g].sm;
    BRAID_CHECK(xml_int(x, "count", 1, &count));
    if (count < 1 || count > 64) TOPO_BAD(x, "count=%d is not 1..64", count);
    if (strcmp(x->name, "c2c") == 0) {
      double per;
      BRAID_CHECK(braid_topo_xml_get_float(x, "bw", 0.0, &per));
      if (per <= 0) TOPO_BAD(x, "bw attribute missing or not positive");
      BRAID_CHECK(braid_topo_link_add(sys, g, b->pending[p].cpu, BRAID_LINK_C2C, (float)(per * count)));
      continue;
    }
    const char* ts = braid_topo_xml_get(x, "target");
    int64_t target, tclass;
    if (ts == NULL || braid_topo_busid_parse(ts, &target) != ncclSuccess)
      TOPO_BAD(x, "target=\"%s\" is not a bus id", ts ? ts : "");
    BRAID_CHECK(braid_topo_xml_get_int(x, "tclass", 0x030200, &tclass));
    float bw = (float)count * braid_topo_nvlink_bw(sm);
    sys->nodes[g].nvl_count += count;
    int peer = -1;
    for (int i = 0; i < sys->nnodes; i++)
      if (sys->nodes[i].kind == BRAID_TOPO_GPU && sys->nodes[i].id == target) peer = i;
    if (peer == g) TOPO_BAD(x, "GPU has an NVLink to itself");
    if (peer >= 0) { /* each side lists its own links: add one direction */
      BRAID_CHECK(link_add_one(sys, g, peer, BRAID_LINK_NVL, bw));
    } else if (tclass == 0x068000) {
      if (sys->nvs < 0) BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_NVS, 0, &sys->nvs));
      BRAID_CHECK(braid_topo_link_add(sys, g, sys->nvs, BRAID_LINK_NVL, bw));
    } else if (tclass == 0x060400 || tclass == 0x068001) { /* NVLink to the CPU */
      BRAID_CHECK(braid_topo_link_add(sys, g, b->pending[p].cpu, BRAID_LINK_NVL, bw));
    } else {
      BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML line %d: NVLink target %s not found, ignored", x->line, ts);
    }
  }
  return ncclSuccess;
}

static int cmp_dev(const struct braid_topo_system* sys, int a, int b) {
  const struct braid_topo_node *x = &sys->nodes[a], *y = &sys->nodes[b];
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return a < b ? -1 : (a > b);
}

/* Index lists of GPUs, NICs and CPUs; devs of GPUs/NICs without one are numbered after. */
static ncclResult_t build_index(struct braid_topo_system* sys) {
  int kinds[3] = {BRAID_TOPO_GPU, BRAID_TOPO_NIC, BRAID_TOPO_CPU};
  int** lists[3] = {&sys->gpus, &sys->nics, &sys->cpus};
  int* counts[3] = {&sys->ngpus, &sys->nnics, &sys->ncpus};
  for (int k = 0; k < 3; k++) {
    int n = 0, *l;
    for (int i = 0; i < sys->nnodes; i++) n += sys->nodes[i].kind == kinds[k];
    free(*lists[k]);
    l = calloc((size_t)(n ? n : 1), sizeof(int));
    if (l == NULL) {
      BRAID_WARN("Failed to allocate the topology index");
      return ncclSystemError;
    }
    n = 0;
    for (int i = 0; i < sys->nnodes; i++)
      if (sys->nodes[i].kind == kinds[k]) l[n++] = i;
    if (kinds[k] == BRAID_TOPO_CPU)
      for (int i = 0; i < n; i++) sys->nodes[l[i]].dev = (int)sys->nodes[l[i]].id;
    for (int i = 1; i < n; i++) /* insertion sort: stable, tiny lists */
      for (int j = i; j > 0 && cmp_dev(sys, l[j - 1], l[j]) > 0; j--) {
        int t = l[j];
        l[j] = l[j - 1];
        l[j - 1] = t;
      }
    *lists[k] = l;
    *counts[k] = n;
  }
  return ncclSuccess;
}

ncclResult_t braid_topo_from_xml(struct braid_topo_xml* xml, struct braid_topo_system** sys_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_system* sys = NULL;
  struct topo_build b = {0};
  const struct braid_topo_xml* system = braid_topo_xml_child(xml, "system");
  if (system == NULL) {
    BRAID_WARN("Topology XML line %d: no <system> element", xml->nkids ? xml->kids[0]->line : 1);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(sys, 1, res, err);
  sys->nvs = -1;
  b.sys = sys;
  for (int i = 0; i < system->nkids; i++) {
    const struct braid_topo_xml* k = system->kids[i];
    if (strcmp(k->name, "cpu") != 0) {
      BRAID_WARN("Topology XML line %d: <%s>: only <cpu> may sit in <system>", k->line, k->name);
      res = ncclInvalidArgument;
      goto err_free;
    }
    BRAID_CHECK_GOTO(build_cpu(&b, k), res, err_free);
  }
  BRAID_CHECK_GOTO(build_links(&b), res, err_free);
  /* every pair of sockets is joined by the CPU interconnect */
  for (int i = 0; i < sys->nnodes; i++)
    for (int j = i + 1; j < sys->nnodes; j++)
      if (sys->nodes[i].kind == BRAID_TOPO_CPU && sys->nodes[j].kind == BRAID_TOPO_CPU) {
        float bw = cpu_sys_bw(&sys->nodes[i]);
        BRAID_CHECK_GOTO(braid_topo_link_add(sys, i, j, BRAID_LINK_SYS, bw), res, err_free);
      }
  BRAID_CHECK_GOTO(build_index(sys), res, err_free);
  for (int i = 1; i < sys->nnics; i++)
    if (sys->nodes[sys->nics[i]].dev >= 0 && sys->nodes[sys->nics[i]].dev == sys->nodes[sys->nics[i - 1]].dev) {
      BRAID_WARN("Topology XML line %d: <net dev=\"%d\">: the same dev as line %d", sys->nodes[sys->nics[i]].xml_line,
                 sys->nodes[sys->nics[i]].dev, sys->nodes[sys->nics[i - 1]].xml_line);
      res = ncclInvalidArgument;
      goto err_free;
    }
  BRAID_CHECK_GOTO(braid_topo_compute_paths(sys), res, err_free);
  sys->xml = xml;
  free(b.pending);
  *sys_p = sys;
  return ncclSuccess;
err_free:
  free(b.pending);
  braid_topo_free(sys);
err:
  return res;
}

ncclResult_t braid_topo_load_xml_string(const char* text, const char* name, struct braid_topo_system** sys_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_xml* xml = NULL;
  BRAID_CHECK(braid_topo_xml_parse(text, name, &xml));
  BRAID_CHECK_GOTO(braid_topo_from_xml(xml, sys_p), res, err_free);
  return ncclSuccess;
err_free:
  braid_topo_xml_free(xml);
  return res;
}

ncclResult_t braid_topo_load_xml(const char* path, struct braid_topo_system** sys_p) {
  ncclResult_t res;
  char* text = NULL;
  if (path == NULL) {
    BRAID_WARN("braid_topo_load_xml: path is NULL");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_xml_read_file(path, &text));
  res = braid_topo_load_xml_string(text, path, sys_p);
  free(text);
  if (res == ncclSuccess)
    BRAID_INFO(BRAID_LOG_GRAPH | BRAID_LOG_INIT, "Loaded topology from %s: %d GPUs, %d NICs, %d CPUs", path,
               (*sys_p)->ngpus, (*sys_p)->nnics, (*sys_p)->ncpus);
  return res;
}

ncclResult_t braid_topo_dump_xml_string(const struct braid_topo_system* sys, char** text_p) {
  if (sys == NULL || sys->xml == NULL) {
    BRAID_WARN("braid_topo_dump_xml: system is %s", sys == NULL ? "NULL" : "without XML");
    return ncclInvalidArgument;
  }
  return braid_topo_xml_print(sys->xml, text_p);
}

ncclResult_t braid_topo_dump_xml(const struct braid_topo_system* sys, const char* path) {
  ncclResult_t res = ncclSuccess;
  char* text = NULL;
  FILE* f;
  if (path == NULL) {
    BRAID_WARN("braid_topo_dump_xml: path is NULL");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_dump_xml_string(sys, &text));
  f = fopen(path, "w");
  if (f == NULL) {
    BRAID_WARN("Could not open %s to dump the topology: %s", path, strerror(errno));
    res = ncclSystemError;
    goto err_free;
  }
  if (fputs(text, f) < 0 || fclose(f) != 0) {
    BRAID_WARN("Could not write the topology to %s: %s", path, strerror(errno));
    res = ncclSystemError;
    goto err_free;
  }
  BRAID_INFO(BRAID_LOG_GRAPH | BRAID_LOG_INIT, "Dumped the topology to %s", path);
err_free:
  free(text);
  return res;
}

void braid_topo_free(struct braid_topo_system* sys) {
  if (sys == NULL) return;
  for (int i = 0; i < sys->nnodes; i++) free(sys->nodes[i].links);
  free(sys->nodes);
  free(sys->gpus);
  free(sys->nics);
  free(sys->cpus);
  free(sys->paths);
  free(sys->pxn);
  braid_topo_xml_free(sys->xml);
  free(sys);
}

ncclResult_t braid_topo_add_pseudo_gpus(const struct braid_topo_system* sys, int n, struct braid_topo_system** copy_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_system* c = NULL;
  if (sys == NULL || n < 1) {
    BRAID_WARN("braid_topo_add_pseudo_gpus: %s %d", sys == NULL ? "system is NULL, n" : "n =", n);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(c, 1, res, err);
  c->nvs = sys->nvs;
  BRAID_CALLOC_GOTO(c->nodes, sys->nnodes + n + 1, res, err_free);
  c->cap_nodes = sys->nnodes + n + 1;
  for (int i = 0; i < sys->nnodes; i++) {
    c->nodes[i] = sys->nodes[i];
    c->nodes[i].links = NULL;
    c->nodes[i].nlinks = c->nodes[i].cap_links = 0;
    c->nnodes++;
    BRAID_CALLOC_GOTO(c->nodes[i].links, sys->nodes[i].nlinks + 1, res, err_free);
    memcpy(c->nodes[i].links, sys->nodes[i].links, (size_t)sys->nodes[i].nlinks * sizeof(struct braid_topo_link));
    c->nodes[i].nlinks = sys->nodes[i].nlinks;
    c->nodes[i].cap_links = sys->nodes[i].nlinks + 1;
  }
  if (sys->ncpus == 0) { /* a document without <cpu>: one made-up socket */
    int cpu;
    BRAID_CHECK_GOTO(braid_topo_node_add(c, BRAID_TOPO_CPU, 0, &cpu), res, err_free);
  }
  BRAID_CHECK_GOTO(build_index(c), res, err_free);
  for (int i = 0; i < n; i++) {
    int g, cpu = c->cpus[i % c->ncpus];
    BRAID_CHECK_GOTO(braid_topo_node_add(c, BRAID_TOPO_GPU, -1, &g), res, err_free);
    c->nodes[g].pseudo = i;
    c->nodes[g].parent = cpu;
    c->nodes[g].dev = i;
    BRAID_CHECK_GOTO(braid_topo_link_add(c, g, cpu, BRAID_LINK_SHM, BRAID_TOPO_BW_SHM), res, err_free);
  }
  c->pseudo = n;
  BRAID_CHECK_GOTO(build_index(c), res, err_free);
  BRAID_CHECK_GOTO(braid_topo_compute_paths(c), res, err_free);
  *copy_p = c;
  return ncclSuccess;
err_free:
  braid_topo_free(c);
err:
  return res;
}

/* ---- small queries -------------------------------------------------------------------- */

int braid_topo_gpu_find(const struct braid_topo_system* sys, int64_t bus_id) {
  if (sys == NULL || bus_id < 0) return -1;
  for (int i = 0; i < sys->ngpus; i++)
    if (sys->nodes[sys->gpus[i]].id == bus_id) return i;
  return -1;
}

int braid_topo_nic_find(const struct braid_topo_system* sys, const char* name) {
  if (sys == NULL || name == NULL) return -1;
  for (int i = 0; i < sys->nnics; i++)
    if (strcmp(sys->nodes[sys->nics[i]].name, name) == 0) return i;
  return -1;
}

int braid_topo_nvls_capable(const struct braid_topo_system* sys) {
  if (sys == NULL || sys->nvs < 0 || sys->ngpus < 2) return 0;
  for (int i = 0; i < sys->ngpus; i++) {
    const struct braid_topo_node* g = &sys->nodes[sys->gpus[i]];
    int on_nvs = 0;
    if (g->sm < 90 || g->pseudo >= 0) return 0;
    for (int l = 0; l < g->nlinks; l++) on_nvs |= g->links[l].remote == sys->nvs;
    if (!on_nvs) return 0;
  }
  return 1;
}
