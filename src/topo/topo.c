/*
 * topo.c - the system graph's nodes and links (topo.h), bus ids, NCCL's bandwidth tables,
 * loading and dumping documents, host-mode pseudo-GPUs and small queries. topo_build.c turns
 * a document into nodes and links; topo_paths.c computes the paths.
 *
 * Links are kept in NCCL's order, which its breadth-first path search depends on for ties:
 * a new link goes after every link at least as wide (so the widest come first), a second
 * declaration of the same link adds its bandwidth and moves it up; braid_topo_build then
 * moves each PCI node's link to its parent last.
 */
#include "topo/topo.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"

/* ---- bandwidth rules (NCCL's topo.h) -------------------------------------------------- */

float braid_topo_nvlink_bw(int sm) {
  if (sm >= 100) return 40.1f; /* Blackwell, NVLink 5 */
  if (sm >= 90) return 20.6f;  /* Hopper, NVLink 4 */
  if (sm == 86) return 12.0f;  /* consumer Ampere */
  if (sm >= 70) return 20.0f;  /* Volta, Ampere */
  return 18.0f;                /* Pascal */
}

float braid_topo_pci_bw(const char* speed, int width) {
  /* NCCL matches the sysfs text by prefix; the value is 100 Mb/s per lane, so width x v / 80
   * is GB/s. Kernels up to 5.6 wrote "8 GT/s", later ones "8.0 GT/s PCIe". */
  static const struct {
    const char* text;
    int per_lane;
  } gens[] = {{"2.5 GT/s", 15},        {"5 GT/s", 30},          {"8 GT/s", 60},         {"16 GT/s", 120},
              {"32 GT/s", 240},        {"2.5 GT/s PCIe", 15},   {"5.0 GT/s PCIe", 30},  {"8.0 GT/s PCIe", 60},
              {"16.0 GT/s PCIe", 120}, {"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480}};
  int per_lane = 60; /* NCCL's fallback */
  if (width <= 0) width = 16;
  for (size_t i = 0; speed != NULL && i < sizeof(gens) / sizeof(gens[0]); i++)
    if (strncmp(speed, gens[i].text, strlen(gens[i].text)) == 0) {
      per_lane = gens[i].per_lane;
      break;
    }
  return (float)width * (float)per_lane / 80.0f; /* float: a file's absurd width must not overflow */
}

float braid_topo_cpu_bw(const struct braid_topo_node* c) {
  if (c->arch == BRAID_CPU_ARCH_POWER) return 32.0f; /* P9 */
  if (c->arch == BRAID_CPU_ARCH_ARM) return 6.0f;
  if (c->arch != BRAID_CPU_ARCH_X86) return BRAID_TOPO_BW_LOC;
  if (c->vendor == BRAID_CPU_VENDOR_INTEL) {
    if (c->family == 6 && c->model >= 0xcf) return 40.0f; /* Emerald Rapids and later */
    if (c->family == 6 && c->model >= 0x8f) return 22.0f; /* Sapphire Rapids */
    if (c->family == 6 && c->model >= 0x55) return 10.0f; /* Skylake-SP .. Ice Lake */
    return 6.0f;                                          /* Broadwell and older */
  }
  if (c->vendor == BRAID_CPU_VENDOR_AMD) return 16.0f;
  if (c->vendor == BRAID_CPU_VENDOR_ZHAOXIN) return c->family == 7 && c->model == 0x5b ? 9.0f : 6.0f;
  return BRAID_TOPO_BW_LOC; /* an x86 vendor NCCL does not know */
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
  n->arch = BRAID_CPU_ARCH_X86;
  n->vendor = BRAID_CPU_VENDOR_OTHER;
  *idx_p = sys->nnodes++;
  return ncclSuccess;
}

/* Move link i up past the narrower links before it. */
static void link_bubble(struct braid_topo_node* n, int i) {
  struct braid_topo_link l = n->links[i];
  while (i > 0 && n->links[i - 1].bw < l.bw) {
    n->links[i] = n->links[i - 1];
    i--;
  }
  n->links[i] = l;
}

ncclResult_t braid_topo_link_add_one(struct braid_topo_system* sys, int a, int b, int kind, float bw) {
  struct braid_topo_node* n = &sys->nodes[a];
  for (int i = 0; i < n->nlinks; i++) {
    if (n->links[i].remote == b && n->links[i].kind == kind) { /* a second declaration adds up */
      n->links[i].bw += bw;
      link_bubble(n, i);
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
  link_bubble(n, n->nlinks++);
  return ncclSuccess;
}

ncclResult_t braid_topo_link_add(struct braid_topo_system* sys, int a, int b, int kind, float bw) {
  BRAID_CHECK(braid_topo_link_add_one(sys, a, b, kind, bw));
  return braid_topo_link_add_one(sys, b, a, kind, bw);
}

/* ---- bus ids -------------------------------------------------------------------------- */

static int hexval(char c) {
  return isdigit((unsigned char)c) ? c - '0' : tolower((unsigned char)c) - 'a' + 10;
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
      part[n] = part[n] * 16 + (unsigned long)hexval(*c);
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

int64_t braid_topo_busid_loose(const char* s) {
  uint64_t v = 0;
  int n = 0;
  for (; s != NULL && *s && n < 16; s++) {
    if (*s == ':' || *s == '.') continue;
    if (!isxdigit((unsigned char)*s)) break;
    v = v * 16 + (uint64_t)hexval(*s);
    n++;
  }
  return (int64_t)(v & 0x7fffffffffffffffULL);
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

/* ---- documents ------------------------------------------------------------------------ */

ncclResult_t braid_topo_from_xml(struct braid_topo_xml* xml, struct braid_topo_system** sys_p) {
  struct braid_topo_system* sys = NULL;
  BRAID_CHECK(braid_topo_build(xml, NULL, NULL, &sys));
  ncclResult_t res = braid_topo_compute_paths(sys);
  if (res != ncclSuccess) {
    braid_topo_free(sys);
    return res;
  }
  sys->xml = xml;
  sys->xml_owned = 1;
  *sys_p = sys;
  return ncclSuccess;
}

ncclResult_t braid_topo_load_xml_string(const char* text, const char* name, struct braid_topo_system** sys_p) {
  ncclResult_t res = ncclSuccess;
  struct braid_topo_xml* xml = NULL;
  if (sys_p == NULL) {
    BRAID_WARN("braid_topo_load_xml_string: sys_p is NULL");
    return ncclInvalidArgument;
  }
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

static ncclResult_t write_text(const char* path, const char* text, const char* what) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    BRAID_WARN("Could not open %s to dump the %s: %s", path, what, strerror(errno));
    return ncclSystemError;
  }
  int bad = fputs(text, f) < 0;
  bad |= fclose(f) != 0;
  if (bad) {
    BRAID_WARN("Could not write the %s to %s: %s", what, path, strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t braid_topo_dump_xml(const struct braid_topo_system* sys, const char* path) {
  char* text = NULL;
  if (path == NULL) {
    BRAID_WARN("braid_topo_dump_xml: path is NULL");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_dump_xml_string(sys, &text));
  ncclResult_t res = write_text(path, text, "topology");
  free(text);
  if (res == ncclSuccess) BRAID_INFO(BRAID_LOG_GRAPH | BRAID_LOG_INIT, "Dumped the topology to %s", path);
  return res;
}

ncclResult_t braid_topo_dump_env(const struct braid_topo_system* sys, int rank, int nlocal, const int64_t* bus_ids,
                                 const int* ranks) {
  const char* path = braid_param_str(BRAID_PARAM_TOPO_DUMP_FILE);
  if (path == NULL || path[0] == '\0' || rank != braid_param_int(BRAID_PARAM_TOPO_DUMP_FILE_RANK)) return ncclSuccess;
  if (sys == NULL || sys->xml == NULL) {
    BRAID_WARN("NCCL_TOPO_DUMP_FILE: no topology to dump");
    return ncclInternalError;
  }
  /* the rank attribute says which communicator rank uses each GPU, as NCCL's dump does */
  for (int i = 0; i < nlocal && bus_ids != NULL && ranks != NULL; i++) {
    int g = braid_topo_gpu_find(sys, bus_ids[i]);
    if (g >= 0 && sys->nodes[sys->gpus[g]].xml != NULL)
      BRAID_CHECK(braid_topo_xml_setf((struct braid_topo_xml*)sys->nodes[sys->gpus[g]].xml, "rank", "%d", ranks[i]));
  }
  BRAID_INFO(BRAID_LOG_ENV, "NCCL_TOPO_DUMP_FILE set by environment to %s", path);
  return braid_topo_dump_xml(sys, path);
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
  if (sys->xml_owned) braid_topo_xml_free(sys->xml);
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
  c->nhosts = sys->nhosts;
  c->xml = sys->xml; /* shared, not owned */
  BRAID_CALLOC_GOTO(c->nodes, sys->nnodes + n + 1, res, err_free);
  c->cap_nodes = sys->nnodes + n + 1;
  for (int i = 0; i < sys->nnodes; i++) {
    c->nodes[i] = sys->nodes[i];
    c->nodes[i].links = NULL;
    c->nodes[i].nlinks = c->nodes[i].cap_links = 0;
    c->nnodes++;
    BRAID_CALLOC_GOTO(c->nodes[i].links, sys->nodes[i].nlinks + 1, res, err_free);
    if (sys->nodes[i].nlinks > 0)
      memcpy(c->nodes[i].links, sys->nodes[i].links, (size_t)sys->nodes[i].nlinks * sizeof(struct braid_topo_link));
    c->nodes[i].nlinks = sys->nodes[i].nlinks;
    c->nodes[i].cap_links = sys->nodes[i].nlinks + 1;
  }
  if (sys->ncpus == 0) { /* a document without <cpu>: one made-up socket */
    int cpu;
    BRAID_CHECK_GOTO(braid_topo_node_add(c, BRAID_TOPO_CPU, 0, &cpu), res, err_free);
  }
  BRAID_CHECK_GOTO(braid_topo_index(c), res, err_free);
  for (int i = 0; i < n; i++) {
    int g, cpu = c->cpus[i % c->ncpus];
    BRAID_CHECK_GOTO(braid_topo_node_add(c, BRAID_TOPO_GPU, -1, &g), res, err_free);
    c->nodes[g].pseudo = i;
    c->nodes[g].parent = cpu;
    c->nodes[g].dev = i;
    c->nodes[g].rank = i;
    BRAID_CHECK_GOTO(braid_topo_link_add(c, g, cpu, BRAID_LINK_SHM, BRAID_TOPO_BW_SHM), res, err_free);
  }
  c->pseudo = n;
  BRAID_CHECK_GOTO(braid_topo_index(c), res, err_free);
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
  int host = (int)(bus_id >> 56); /* NCCL's topology id: a host index above the bus id */
  int64_t id = bus_id & BRAID_TOPO_ID_LOCAL_MASK;
  for (int h = host; h <= (host ? host : sys->nhosts); h++) /* no host given: the first that has it */
    for (int i = 0; i < sys->ngpus; i++)
      if (sys->nodes[sys->gpus[i]].id == id && sys->nodes[sys->gpus[i]].host == h) return i;
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
