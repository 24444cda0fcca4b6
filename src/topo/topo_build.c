/*
 * topo_build.c - a topology document in NCCL's schema -> the system graph's nodes and links
 * (topo.h), by NCCL's rules (src/graph/topo.cc), so that every file NCCL loads loads here:
 *
 *   <system>   version 1 (NCCL) or 2 (RCCL: what NCCL's schema has is read, the rest skipped
 *              with a warning); elements neither schema has are skipped with an INFO line
 *   <cpu>      a NUMA node; host_hash names the machine in multi-host (MNNVL) dumps
 *   <pci>      class 0x0604 (bridge), 0x0801 or unknown: a switch node, its children read;
 *              Broadcom Gen4/Gen5 switches in base mode are flattened as NCCL does; other
 *              classes are a node only with a <gpu> or <nic> inside
 *   <gpu>      dev, sm, rank, gdr; its <nvlink> (tclass 0x03..: to a GPU, 0x068001: to the
 *              CPU, anything else: to the one NVSwitch node, target not read), <c2c> (bw in
 *              MB/s per link), RCCL's <xgmi> skipped with a warning
 *   <nic>      a NIC (one per CPU and bus id) with its <net> ports; a port listed again with
 *              the same dev (a socket NIC under every <cpu> in NCCL 2.28 dumps) is the copy
 *              NCCL leaves without paths: not built, an INFO line says so
 *   <pcilink>  a zero-cost link between two switches of one chip
 * Numbers are read as NCCL reads them (strtol/strtof: "0.000000" is 0), bus ids too
 * ("fffffff:ff:ff.0" is never a GPU). What NCCL requires and a file lacks gets NCCL's
 * default instead of a refusal: link_width 0 is x16, an unknown link_speed 60/80 GB/s a lane.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "topo/topo.h"

#define MAX_HOSTS 64
#define MAX_NICDEVS 256

struct build {
  struct braid_topo_system* sys;
  braid_topo_keep_fn keep;
  void* arg;
  char hosts[MAX_HOSTS][32];
  int nhosts;
  int warned_xgmi;
  /* NICs made so far: (cpu node, bus id) -> node */
  int nnicdevs;
  struct {
    int cpu;
    int64_t busid;
    int node;
  } nicdevs[MAX_NICDEVS];
  /* <nvlink>, <c2c> and <pcilink> are resolved once every node exists */
  int npending, cap_pending;
  struct {
    const struct braid_topo_xml* x;
    int node; /* the GPU (nvlink, c2c) or the switch (pcilink) */
    int cpu;
  } * pending;
};

/* NCCL's classes of a PCI device (kvDictPciClass, prefix match). */
enum pci_class { CLASS_PCI, CLASS_NVS, CLASS_CPU, CLASS_GPU, CLASS_NIC };

static int pci_class(const char* c) {
  static const struct {
    const char* prefix;
    int cls;
  } dict[] = {{"0x060400", CLASS_PCI}, {"0x080100", CLASS_PCI}, {"0x068000", CLASS_NVS},
              {"0x068001", CLASS_CPU}, {"0x03", CLASS_GPU},     {"0x02", CLASS_NIC}};
  for (size_t i = 0; c != NULL && i < sizeof(dict) / sizeof(dict[0]); i++)
    if (strncmp(c, dict[i].prefix, strlen(dict[i].prefix)) == 0) return dict[i].cls;
  return CLASS_PCI;
}

static int keep_gpu(const struct build* b, const struct braid_topo_xml* gpu) {
  return b->keep == NULL ? 1 : b->keep(gpu, b->arg) >= 0;
}

/* Does this element hold a (kept) GPU or a NIC port? Elements without one get no node, as
 * NCCL trims them from a loaded file. */
static int has_device(const struct build* b, const struct braid_topo_xml* x) {
  if (strcmp(x->name, "gpu") == 0) return keep_gpu(b, x);
  if (strcmp(x->name, "net") == 0) return braid_topo_xml_get(x, "dev") != NULL;
  for (int i = 0; i < x->nkids; i++)
    if (has_device(b, x->kids[i])) return 1;
  return 0;
}

static ncclResult_t pending_add(struct build* b, const struct braid_topo_xml* x, int node, int cpu) {
  if (b->npending == b->cap_pending) {
    int cap = b->cap_pending ? 2 * b->cap_pending : 64;
    void* p = realloc(b->pending, (size_t)cap * sizeof(*b->pending));
    if (p == NULL) {
      BRAID_WARN("Failed to allocate the list of NVLink elements");
      return ncclSystemError;
    }
    b->pending = p;
    b->cap_pending = cap;
  }
  b->pending[b->npending].x = x;
  b->pending[b->npending].node = node;
  b->pending[b->npending].cpu = cpu;
  b->npending++;
  return ncclSuccess;
}

static void skip_info(const struct braid_topo_xml* x, const char* where) {
  BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML line %d: ignoring element <%s> in <%s>", x->line, x->name, where);
}

static ncclResult_t build_gpu(struct build* b, const struct braid_topo_xml* x, int64_t busid, int host, int parent,
                              float bw, int cpu) {
  struct braid_topo_system* sys = b->sys;
  int idx;
  BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_GPU, busid, &idx));
  struct braid_topo_node* g = &sys->nodes[idx];
  g->host = host;
  g->xml = x;
  g->xml_line = x->line;
  g->parent = parent;
  g->dev = (int)braid_topo_xml_int(x, "dev", -1);
  g->sm = (int)braid_topo_xml_int(x, "sm", 0);
  g->rank = b->keep ? b->keep(x, b->arg) : (int)braid_topo_xml_int(x, "rank", -1);
  g->gdr = (int)braid_topo_xml_int(x, "gdr", 0);
  BRAID_CHECK(braid_topo_link_add(sys, idx, parent, BRAID_LINK_PCI, bw));
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "nvlink") == 0 || strcmp(k->name, "c2c") == 0) {
      BRAID_CHECK(pending_add(b, k, idx, cpu));
    } else if (strcmp(k->name, "xgmi") == 0) {
      if (!b->warned_xgmi++)
        BRAID_WARN(
            "Topology XML line %d: <xgmi> (RCCL's AMD Infinity Fabric links) is not modeled; the GPUs "
            "are joined by their PCI paths only",
            k->line);
    } else {
      skip_info(k, "gpu");
    }
  }
  return ncclSuccess;
}

/* The NIC of a <nic> element (one per CPU and bus id, as NCCL keys them); *made_p: new. */
static ncclResult_t nicdev_get(struct build* b, int cpu, int64_t busid, int host, int* idx_p, int* made_p) {
  for (int i = 0; i < b->nnicdevs; i++)
    if (b->nicdevs[i].cpu == cpu && b->nicdevs[i].busid == busid) {
      *idx_p = b->nicdevs[i].node;
      *made_p = 0;
      return ncclSuccess;
    }
  if (b->nnicdevs == MAX_NICDEVS) {
    BRAID_WARN("Topology: more than %d NICs", MAX_NICDEVS);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_node_add(b->sys, BRAID_TOPO_NICDEV, busid, idx_p));
  b->sys->nodes[*idx_p].host = host;
  b->nicdevs[b->nnicdevs].cpu = cpu;
  b->nicdevs[b->nnicdevs].busid = busid;
  b->nicdevs[b->nnicdevs].node = *idx_p;
  b->nnicdevs++;
  *made_p = 1;
  return ncclSuccess;
}

/* A port NCCL would find first under another NIC (same host, same dev). */
static int port_seen(const struct braid_topo_system* sys, int host, int dev) {
  for (int i = 0; i < sys->nnodes; i++)
    if (sys->nodes[i].kind == BRAID_TOPO_NIC && sys->nodes[i].host == host && sys->nodes[i].dev == dev) return i;
  return -1;
}

static ncclResult_t build_ports(struct build* b, const struct braid_topo_xml* nic, int nicdev, int host) {
  struct braid_topo_system* sys = b->sys;
  for (int i = 0; i < nic->nkids; i++) {
    const struct braid_topo_xml* k = nic->kids[i];
    if (strcmp(k->name, "net") != 0) {
      skip_info(k, "nic");
      continue;
    }
    if (braid_topo_xml_get(k, "dev") == NULL) { /* NCCL adds only ports with a dev */
      BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML line %d: <net> without dev, not a device", k->line);
      continue;
    }
    int dev = (int)braid_topo_xml_int(k, "dev", -1), seen = port_seen(sys, host, dev), idx;
    if (seen >= 0) {
      BRAID_INFO(BRAID_LOG_GRAPH,
                 "Topology XML line %d: <net dev=\"%d\"> listed again (first at line %d); NCCL uses the first, "
                 "the copy is disconnected",
                 k->line, dev, sys->nodes[seen].xml_line);
      continue;
    }
    BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_NIC, sys->nodes[nicdev].id, &idx));
    struct braid_topo_node* n = &sys->nodes[idx];
    const char* name = braid_topo_xml_get(k, "name");
    const char* guid = braid_topo_xml_get(k, "guid");
    n->host = host;
    n->xml = k;
    n->xml_line = k->line;
    n->parent = nicdev;
    n->dev = dev;
    snprintf(n->name, sizeof(n->name), "%s", name ? name : "");
    n->speed = (int)braid_topo_xml_int(k, "speed", 0);
    if (n->speed <= 0) n->speed = BRAID_TOPO_NET_SPEED_DEFAULT; /* some plugins say -1 */
    n->latency = (float)braid_topo_xml_float(k, "latency", 0.0);
    n->port = (int)braid_topo_xml_int(k, "port", 0);
    n->gdr = (int)braid_topo_xml_int(k, "gdr", 0);
    n->maxconn = (int)braid_topo_xml_int(k, "maxconn", 64);
    n->coll = (int)braid_topo_xml_int(k, "coll", 0);
    n->guid = guid ? strtoull(guid, NULL, 16) : ((uint64_t)host << 56) + (uint64_t)dev;
    BRAID_CHECK(braid_topo_link_add(sys, nicdev, idx, BRAID_LINK_NET, (float)n->speed / 8000.0f));
  }
  return ncclSuccess;
}

/* A <nic>: its NIC node (made once per CPU and bus id) and ports; *node_p: the NIC when it
 * was made here and got a port (the caller links it), else -1. */
static ncclResult_t build_nic(struct build* b, const struct braid_topo_xml* nic, int cpu, int64_t busid, int host,
                              int* node_p) {
  int idx, made;
  *node_p = -1;
  BRAID_CHECK(nicdev_get(b, cpu, busid, host, &idx, &made));
  int before = b->sys->nnodes;
  BRAID_CHECK(build_ports(b, nic, idx, host));
  if (made) {
    b->sys->nodes[idx].xml = nic;
    b->sys->nodes[idx].xml_line = nic->line;
    if (b->sys->nnodes > before) *node_p = idx;
  }
  return ncclSuccess;
}

/* Broadcom PEX switches that show one chip as two levels (NCCL's getBcmGen). */
static int bcm_gen(uint64_t device, int level) {
  if ((device & 0xfffffffffffff000ULL) == 0x1000c0101000a000ULL) return 4;
  if ((device & 0xfffffffffffff000ULL) == (0x1000c03010000000ULL | (uint64_t)level * 0x1000)) return 5;
  return 0;
}

static uint64_t pci_device(const struct braid_topo_xml* x) {
  return ((uint64_t)braid_topo_xml_int(x, "vendor", 0) << 48) + ((uint64_t)braid_topo_xml_int(x, "device", 0) << 32) +
         ((uint64_t)braid_topo_xml_int(x, "subsystem_vendor", 0) << 16) +
         (uint64_t)braid_topo_xml_int(x, "subsystem_device", 0);
}

static ncclResult_t build_pci(struct build* b, const struct braid_topo_xml* x, int parent, int cpu, int host,
                              int flatten_gen);

/* The children of a switch element below node `sw`. */
static ncclResult_t build_pci_kids(struct build* b, const struct braid_topo_xml* x, int sw, int cpu, int host,
                                   int gen) {
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "pci") == 0) {
      BRAID_CHECK(build_pci(b, k, sw, cpu, host, gen));
    } else if (strcmp(k->name, "pcilink") == 0) {
      BRAID_CHECK(pending_add(b, k, sw, cpu));
    } else if (strcmp(k->name, "gpu") != 0 && strcmp(k->name, "nic") != 0) {
      skip_info(k, "pci");
    }
  }
  return ncclSuccess;
}

static ncclResult_t build_pci(struct build* b, const struct braid_topo_xml* x, int parent, int cpu, int host,
                              int flatten_gen) {
  struct braid_topo_system* sys = b->sys;
  int64_t busid;
  if (!has_device(b, x)) return ncclSuccess;
  const char* bs = braid_topo_xml_get(x, "busid");
  if (bs == NULL) {
    BRAID_WARN("Topology XML line %d: <pci> with a device inside has no busid", x->line);
    return ncclInvalidArgument;
  }
  if (braid_topo_busid_parse(bs, &busid) != ncclSuccess) busid = braid_topo_busid_loose(bs);
  float bw = braid_topo_pci_bw(braid_topo_xml_get(x, "link_speed"), (int)braid_topo_xml_int(x, "link_width", 0));
  const struct braid_topo_xml* gpu = braid_topo_xml_child(x, "gpu");
  const struct braid_topo_xml* nic = braid_topo_xml_child(x, "nic");
  if (gpu != NULL && keep_gpu(b, gpu)) return build_gpu(b, gpu, busid, host, parent, bw, cpu);
  if (gpu != NULL) return ncclSuccess;
  if (nic != NULL) {
    int idx;
    BRAID_CHECK(build_nic(b, nic, cpu, busid, host, &idx));
    if (idx >= 0) {
      sys->nodes[idx].parent = parent;
      BRAID_CHECK(braid_topo_link_add(sys, idx, parent, BRAID_LINK_PCI, bw));
    }
    return ncclSuccess;
  }
  if (pci_class(braid_topo_xml_get(x, "class")) != CLASS_PCI) return ncclSuccess; /* NCCL reads no further */
  uint64_t device = pci_device(x);
  if (flatten_gen && bcm_gen(device, 1) == flatten_gen) /* the lower half of a BCM switch */
    return build_pci_kids(b, x, parent, cpu, host, 0);
  int idx;
  BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_PCI, busid, &idx));
  sys->nodes[idx].host = host;
  sys->nodes[idx].xml = x;
  sys->nodes[idx].xml_line = x->line;
  sys->nodes[idx].parent = parent;
  BRAID_CHECK(braid_topo_link_add(sys, idx, parent, BRAID_LINK_PCI, bw));
  return build_pci_kids(b, x, idx, cpu, host, bcm_gen(device, 0));
}

/* The machine of a <cpu>: hosts are told apart by their host_hash text (NCCL parses the hex
 * number; published dumps often redact it, "0xHOSTHASH_A", which must stay two hosts). */
static int host_index(struct build* b, const struct braid_topo_xml* x) {
  const char* h = braid_topo_xml_get(x, "host_hash");
  for (int i = 0; i < b->nhosts; i++)
    if (strcmp(b->hosts[i], h ? h : "") == 0) return i;
  if (b->nhosts == MAX_HOSTS) return MAX_HOSTS - 1;
  snprintf(b->hosts[b->nhosts], sizeof(b->hosts[0]), "%s", h ? h : "");
  return b->nhosts++;
}

static void cpu_kind(struct braid_topo_node* c, const struct braid_topo_xml* x) {
  const char* arch = braid_topo_xml_get(x, "arch");
  const char* vendor = braid_topo_xml_get(x, "vendor");
  c->arch = BRAID_CPU_ARCH_X86; /* absent: NCCL fills it from this machine; x86 is the common case */
  if (arch != NULL) {
    c->arch = BRAID_CPU_ARCH_UNKNOWN;
    if (strncmp(arch, "x86_64", 6) == 0) c->arch = BRAID_CPU_ARCH_X86;
    if (strncmp(arch, "arm64", 5) == 0 || strncmp(arch, "aarch64", 7) == 0) c->arch = BRAID_CPU_ARCH_ARM;
    if (strncmp(arch, "ppc64", 5) == 0) c->arch = BRAID_CPU_ARCH_POWER;
  }
  c->vendor = BRAID_CPU_VENDOR_OTHER;
  if (vendor && strncmp(vendor, "GenuineIntel", 12) == 0) c->vendor = BRAID_CPU_VENDOR_INTEL;
  if (vendor && strncmp(vendor, "AuthenticAMD", 12) == 0) c->vendor = BRAID_CPU_VENDOR_AMD;
  if (vendor && (strncmp(vendor, "CentaurHauls", 12) == 0 || strncmp(vendor, "  Shanghai  ", 12) == 0))
    c->vendor = BRAID_CPU_VENDOR_ZHAOXIN;
  c->family = (int)braid_topo_xml_int(x, "familyid", 0);
  c->model = (int)braid_topo_xml_int(x, "modelid", 0);
}

static ncclResult_t build_cpu(struct build* b, const struct braid_topo_xml* x) {
  struct braid_topo_system* sys = b->sys;
  int idx, host = host_index(b, x);
  if (b->keep != NULL && b->keep != braid_topo_keep_none && !has_device(b, x))
    return ncclSuccess; /* NCCL trims an unused socket */
  int numa = (int)braid_topo_xml_int(x, "numaid", sys->ncpus);
  BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_CPU, numa, &idx));
  sys->ncpus++;
  struct braid_topo_node* c = &sys->nodes[idx];
  const char* aff = braid_topo_xml_get(x, "affinity");
  c->host = host;
  c->xml = x;
  c->xml_line = x->line;
  c->dev = numa;
  cpu_kind(c, x);
  snprintf(c->affinity, sizeof(c->affinity), "%s", aff ? aff : "");
  for (int i = 0; i < x->nkids; i++) {
    const struct braid_topo_xml* k = x->kids[i];
    if (strcmp(k->name, "pci") == 0) {
      BRAID_CHECK(build_pci(b, k, idx, idx, host, 0));
    } else if (strcmp(k->name, "nic") == 0) { /* a NIC not on PCI (a socket device): no PCI cost */
      int nic;
      BRAID_CHECK(build_nic(b, k, idx, -1, host, &nic));
      if (nic >= 0) {
        sys->nodes[nic].parent = idx;
        BRAID_CHECK(braid_topo_link_add(sys, idx, nic, BRAID_LINK_PCI, BRAID_TOPO_BW_LOC));
      }
    } else {
      skip_info(k, "cpu");
    }
  }
  return ncclSuccess;
}

/* The CPU above a node in the PCI tree. */
static int cpu_of(const struct braid_topo_system* sys, int n) {
  while (n >= 0 && sys->nodes[n].kind != BRAID_TOPO_CPU) n = sys->nodes[n].parent;
  return n;
}

static ncclResult_t build_nvlink(struct build* b, const struct braid_topo_xml* x, int g) {
  struct braid_topo_system* sys = b->sys;
  int count = (int)braid_topo_xml_int(x, "count", 1), remote = -1;
  const char* tclass = braid_topo_xml_get(x, "tclass");
  const char* target = braid_topo_xml_get(x, "target");
  int cls = tclass ? pci_class(tclass) : CLASS_GPU;
  if (count <= 0) return ncclSuccess;
  if (cls == CLASS_GPU) { /* another GPU of this machine (or itself); not found: no link */
    int64_t id = braid_topo_busid_loose(target);
    for (int i = 0; i < sys->nnodes && remote < 0; i++)
      if (sys->nodes[i].kind == BRAID_TOPO_GPU && sys->nodes[i].id == id && sys->nodes[i].host == sys->nodes[g].host)
        remote = i;
    if (remote < 0 && tclass == NULL) cls = CLASS_NVS; /* no class given, no such GPU: a switch */
    if (remote < 0 && cls == CLASS_GPU) {
      BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML line %d: NVLink target %s is no GPU here, link ignored", x->line,
                 target ? target : "(none)");
      return ncclSuccess;
    }
  }
  if (cls == CLASS_CPU) remote = cpu_of(sys, g);
  if (cls != CLASS_GPU && cls != CLASS_CPU) { /* the NVSwitch fabric: every GPU on one switch node */
    if (sys->nvs < 0) BRAID_CHECK(braid_topo_node_add(sys, BRAID_TOPO_NVS, 0, &sys->nvs));
    remote = sys->nvs;
  }
  if (remote < 0) return ncclSuccess;
  float bw = (float)count * braid_topo_nvlink_bw(sys->nodes[g].sm);
  sys->nodes[g].nvl_count += count;
  if (sys->nodes[remote].kind == BRAID_TOPO_GPU) return braid_topo_link_add_one(sys, g, remote, BRAID_LINK_NVL, bw);
  return braid_topo_link_add(sys, g, remote, BRAID_LINK_NVL, bw);
}

static ncclResult_t build_links(struct build* b) {
  struct braid_topo_system* sys = b->sys;
  for (int p = 0; p < b->npending; p++) {
    const struct braid_topo_xml* x = b->pending[p].x;
    int n = b->pending[p].node;
    if (strcmp(x->name, "nvlink") == 0) {
      BRAID_CHECK(build_nvlink(b, x, n));
    } else if (strcmp(x->name, "c2c") == 0) { /* bw: MB/s per link (NVML) */
      double bw = (double)braid_topo_xml_int(x, "bw", 0) * (double)braid_topo_xml_int(x, "count", 0) / 1000.0;
      int cpu = cpu_of(sys, n);
      if (cpu >= 0 && bw > 0) BRAID_CHECK(braid_topo_link_add(sys, n, cpu, BRAID_LINK_C2C, (float)bw));
    } else { /* pcilink */
      int64_t id = braid_topo_busid_loose(braid_topo_xml_get(x, "target"));
      for (int i = 0; i < sys->nnodes; i++)
        if (sys->nodes[i].kind == BRAID_TOPO_PCI && sys->nodes[i].id == id && sys->nodes[i].host == sys->nodes[n].host)
          BRAID_CHECK(braid_topo_link_add_one(sys, n, i, BRAID_LINK_LOC, BRAID_TOPO_BW_LOC));
    }
  }
  return ncclSuccess;
}

/* NCCL's order for the path search: a PCI child's link to its parent comes last. */
static void sort_tree(struct braid_topo_system* sys, int n, int up, int depth) {
  struct braid_topo_node* x = &sys->nodes[n];
  if (depth > 64) return;
  if (up >= 0) {
    int l = 0;
    while (l < x->nlinks && x->links[l].remote != up) l++;
    if (l < x->nlinks) {
      struct braid_topo_link save = x->links[l];
      memmove(&x->links[l], &x->links[l + 1], (size_t)(x->nlinks - l - 1) * sizeof(save));
      x->links[x->nlinks - 1] = save;
    }
  }
  for (int l = 0; l < sys->nodes[n].nlinks; l++) {
    const struct braid_topo_link* k = &sys->nodes[n].links[l];
    if (k->kind == BRAID_LINK_PCI && k->remote != up) sort_tree(sys, k->remote, n, depth + 1);
  }
}

static ncclResult_t connect_cpus(struct braid_topo_system* sys) {
  for (int i = 0; i < sys->nnodes; i++)
    for (int j = 0; j < sys->nnodes; j++) {
      const struct braid_topo_node *a = &sys->nodes[i], *c = &sys->nodes[j];
      if (i == j || a->kind != BRAID_TOPO_CPU || c->kind != BRAID_TOPO_CPU || a->host != c->host) continue;
      BRAID_CHECK(braid_topo_link_add_one(sys, i, j, BRAID_LINK_SYS, braid_topo_cpu_bw(a)));
    }
  return ncclSuccess;
}

static ncclResult_t build_system(struct build* b, const struct braid_topo_xml* system) {
  const char* version = braid_topo_xml_get(system, "version");
  if (version != NULL && braid_topo_xml_int(system, "version", 1) != 1)
    BRAID_WARN(
        "Topology XML line %d: <system version=\"%s\"> (NCCL writes 1, RCCL 2): reading what NCCL's schema "
        "has, skipping the rest",
        system->line, version);
  for (int i = 0; i < system->nkids; i++) {
    const struct braid_topo_xml* k = system->kids[i];
    if (strcmp(k->name, "cpu") == 0) {
      BRAID_CHECK(build_cpu(b, k));
    } else {
      skip_info(k, "system");
    }
  }
  BRAID_CHECK(build_links(b));
  BRAID_CHECK(connect_cpus(b->sys));
  for (int i = 0; i < b->sys->nnodes; i++)
    if (b->sys->nodes[i].kind == BRAID_TOPO_CPU) sort_tree(b->sys, i, -1, 0);
  b->sys->nhosts = b->nhosts;
  return braid_topo_index(b->sys);
}

int braid_topo_keep_none(const struct braid_topo_xml* gpu, void* arg) {
  (void)gpu;
  (void)arg;
  return -1;
}

ncclResult_t braid_topo_build(struct braid_topo_xml* xml, braid_topo_keep_fn keep, void* arg,
                              struct braid_topo_system** sys_p) {
  ncclResult_t res = ncclSuccess;
  struct build* b = NULL;
  const struct braid_topo_xml* system = xml ? braid_topo_xml_child(xml, "system") : NULL;
  if (system == NULL) {
    BRAID_WARN("Topology XML line %d: no <system> element", xml && xml->nkids ? xml->kids[0]->line : 1);
    return ncclInvalidArgument;
  }
  BRAID_CALLOC_GOTO(b, 1, res, out);
  BRAID_CALLOC_GOTO(b->sys, 1, res, out);
  b->sys->nvs = -1;
  b->keep = keep;
  b->arg = arg;
  BRAID_CHECK_GOTO(build_system(b, system), res, out);
  *sys_p = b->sys;
  b->sys = NULL;
out:
  if (b != NULL) {
    braid_topo_free(b->sys);
    free(b->pending);
    free(b);
  }
  return res;
}

static int cmp_node(const struct braid_topo_system* sys, int a, int b, int kind) {
  const struct braid_topo_node *x = &sys->nodes[a], *y = &sys->nodes[b];
  if (kind == BRAID_TOPO_CPU && x->host != y->host) return x->host < y->host ? -1 : 1;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->host != y->host) return x->host < y->host ? -1 : 1;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return a < b ? -1 : (a > b);
}

ncclResult_t braid_topo_index(struct braid_topo_system* sys) {
  int kinds[3] = {BRAID_TOPO_GPU, BRAID_TOPO_NIC, BRAID_TOPO_CPU};
  int** lists[3] = {&sys->gpus, &sys->nics, &sys->cpus};
  int* counts[3] = {&sys->ngpus, &sys->nnics, &sys->ncpus};
  for (int k = 0; k < 3; k++) {
    int n = 0, *l;
    for (int i = 0; i < sys->nnodes; i++) n += sys->nodes[i].kind == kinds[k];
    free(*lists[k]);
    *lists[k] = NULL;
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
    for (int i = 1; i < n; i++) /* insertion sort: stable, small lists */
      for (int j = i; j > 0 && cmp_node(sys, l[j - 1], l[j], kinds[k]) > 0; j--) {
        int t = l[j];
        l[j] = l[j - 1];
        l[j - 1] = t;
      }
    *lists[k] = l;
    *counts[k] = n;
  }
  return ncclSuccess;
}
