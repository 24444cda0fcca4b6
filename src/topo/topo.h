/*
 * topo.h - the system graph of one machine: CPUs (NUMA nodes), the PCI tree, GPUs, NVLink and
 * NVSwitch, NICs and their network ports; the path between its nodes with NCCL's path types and
 * bandwidths; the P2P, GPUDirect RDMA and PXN decisions taken from them.
 *
 * Where it comes from: an XML document in NCCL's schema, either read from a file
 * (NCCL_TOPO_FILE, braid_topo_load_xml; every file NCCL itself loads, RCCL's too) or written by
 * the detector from sysfs, NVML (dlopen) and the caller's list of GPUs (topo_detect.c), or a
 * file merged with detection (a vendor's PCI-only file filled with the GPUs and NICs found
 * here, topo_merge.c). The document is kept with the graph, so a dump (NCCL_TOPO_DUMP_FILE)
 * writes back what was loaded or detected, in NCCL's layout.
 *
 * Files: topo_xml.c (the XML tree: parse with line numbers, print), topo_build.c (XML -> nodes
 * and links, NCCL's rules), topo.c (nodes, links, bus ids, queries), topo_paths.c (paths and
 * their re-routes: P2P, GDR, PXN), topo_local.c (the NIC of a GPU and the GPU of a NIC),
 * topo_merge.c (file + detection, subsets), topo_detect.c (sysfs/NVML -> XML).
 *
 * Host mode: a system without GPUs is valid. graph_build.c then adds one pseudo-GPU per local
 * rank (braid_topo_add_pseudo_gpus), joined to a CPU by a shared-memory link.
 */
#ifndef BRAID_TOPO_H
#define BRAID_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* ---------------------------------------------------------------------------------------
 * Path types, NCCL's names and order: a smaller type is a closer, better path.
 * X(id, name, doc) */
#define BRAID_PATH_TYPES(X)                                                  \
  X(LOC, "LOC", "the same device")                                           \
  X(NVL, "NVL", "NVLink, direct or through NVSwitch")                        \
  X(NVB, "NVB", "NVLink through one intermediate GPU")                       \
  X(C2C, "C2C", "chip-to-chip link between a GPU and its CPU")               \
  X(PIX, "PIX", "at most one PCIe switch")                                   \
  X(PXB, "PXB", "several PCIe switches, no host bridge")                     \
  X(P2C, "P2C", "GPU -C2C- CPU -PCIe- NIC")                                  \
  X(PXN, "PXN", "GPU -NVLink- GPU -PCIe- NIC (proxy through the other GPU)") \
  X(PHB, "PHB", "through a CPU host bridge")                                 \
  X(SYS, "SYS", "across the CPU interconnect (QPI/UPI/...)")                 \
  X(NET, "NET", "across the network")                                        \
  X(DIS, "DIS", "disconnected")

enum braid_path_type {
#define BRAID_X(id, name, doc) BRAID_PATH_##id,
  BRAID_PATH_TYPES(BRAID_X)
#undef BRAID_X
      BRAID_NUM_PATH_TYPES
};

/* Kinds of nodes in the system graph (NCCL's GPU, PCI, NVS, CPU, NIC, NET). */
enum braid_topo_kind {
  BRAID_TOPO_GPU = 0,    /* a GPU (or, in host mode, a rank's pseudo-GPU) */
  BRAID_TOPO_PCI = 1,    /* a PCIe switch (or a bridge kept from the XML) */
  BRAID_TOPO_NVS = 2,    /* the NVSwitch fabric: one node joins every GPU linked to a switch */
  BRAID_TOPO_CPU = 3,    /* a CPU socket / NUMA node, with its host bridge */
  BRAID_TOPO_NIC = 4,    /* one network port (a <net> element): what the network plugin calls a device */
  BRAID_TOPO_NICDEV = 5, /* the NIC's PCI function (a <nic> element), holding its ports */
  BRAID_TOPO_NUM_KINDS
};

/* Kinds of links; each link is one direction with its own bandwidth. */
enum braid_link_kind {
  BRAID_LINK_NVL = 0, /* NVLink (GPU-GPU, GPU-NVSwitch, GPU-POWER CPU) */
  BRAID_LINK_C2C = 1, /* NVLink-C2C between a GPU and its CPU */
  BRAID_LINK_PCI = 2, /* PCIe */
  BRAID_LINK_SYS = 3, /* CPU to CPU (QPI/UPI/Infinity Fabric/...) */
  BRAID_LINK_SHM = 4, /* host mode: a pseudo-GPU's shared-memory port on its CPU */
  BRAID_LINK_NET = 5, /* a NIC's PCI function to one of its ports */
  BRAID_LINK_LOC = 6, /* a <pcilink>: switches bridged inside one chip (BCM P2P links) */
  BRAID_NUM_LINK_KINDS
};

/* Bandwidths (GB/s) NCCL uses (reference section 3). */
#define BRAID_TOPO_BW_PCI_DEFAULT 12.0f /* a PCIe link of unknown speed: x16 at NCCL's default 60/80 per lane */
#define BRAID_TOPO_BW_LOC 5000.0f       /* inside one device; a CPU to a NIC without PCI */
/* Host mode: a pseudo-GPU's shared-memory port, the copy rate of one core into and out of
 * a shared segment (memcpy class; measured ~5-10 GB/s on current x86 servers). */
#define BRAID_TOPO_BW_SHM 5.0f
/* A network port whose speed is unknown or not positive: 10 Gb/s (NCCL's rule). */
#define BRAID_TOPO_NET_SPEED_DEFAULT 10000

/* One directed link. */
struct braid_topo_link {
  int kind;   /* enum braid_link_kind */
  int remote; /* index of the node at the other end */
  float bw;   /* GB/s in this direction */
};

struct braid_topo_xml;

/* A node of the system graph. Only the fields of its kind are meaningful. */
struct braid_topo_node {
  int kind;                         /* enum braid_topo_kind */
  int64_t id;                       /* PCI bus id as a number (GPU, PCI, NICDEV; -1 none); numa id (CPU) */
  int host;                         /* the machine of a multi-host file (index of its CPU's host_hash) */
  const struct braid_topo_xml* xml; /* the element it came from (NULL: made up, e.g. NVS, pseudo-GPU) */
  int xml_line;                     /* that element's line (0: made up) */
  int parent;                       /* the PCI switch, NICDEV or CPU above it (-1: a CPU, the NVS) */
  int nlinks, cap_links;
  struct braid_topo_link* links; /* NCCL's order: widest first, the PCI link up last */
  int dev;                       /* CUDA/NVML device index (GPU), plugin device index (NIC) */
  /* GPU */
  int sm;        /* compute capability x10 (90 = Hopper); 0 pseudo-GPU */
  int rank;      /* the rank attribute of the XML (-1 absent): the rank of the dumping communicator */
  int gdr;       /* GPU/NIC supports GPUDirect RDMA */
  int pseudo;    /* host-mode pseudo-GPU: its index among the pseudo-GPUs, else -1 */
  int nvl_count; /* NVLinks of a GPU, all targets together */
  /* CPU */
  int arch;   /* enum braid_cpu_arch */
  int vendor; /* enum braid_cpu_vendor */
  int family, model;
  char affinity[160]; /* the cpumask as in sysfs, e.g. "0000ffff,0000ffff" */
  /* NIC (a port) */
  char name[64]; /* e.g. "mlx5_0", "eth0" */
  int speed;     /* Mb/s */
  int port;
  float latency; /* us, as the plugin reports it */
  uint64_t guid; /* NCCL's asic: the guid, or the port's id when the file has none */
  int maxconn;
  int coll; /* CollNet support */
};

enum braid_cpu_arch {
  BRAID_CPU_ARCH_X86 = 0,
  BRAID_CPU_ARCH_POWER = 1,
  BRAID_CPU_ARCH_ARM = 2,
  BRAID_CPU_ARCH_UNKNOWN = 3 /* an arch NCCL does not know: no interconnect figure (5000 GB/s) */
};
enum braid_cpu_vendor {
  BRAID_CPU_VENDOR_INTEL = 0,
  BRAID_CPU_VENDOR_AMD = 1,
  BRAID_CPU_VENDOR_ZHAOXIN = 2,
  BRAID_CPU_VENDOR_OTHER = 3
};

/* The best path from one node to another, NCCL's rules (topo_paths.c). A path is either the
 * breadth-first one, walked hop by hop through `next`, or, when NCCL re-routes it (no P2P,
 * no GPUDirect RDMA, PXN), the path to `relay` followed by the relay's path. */
struct braid_topo_path {
  uint8_t type;   /* enum braid_path_type */
  uint8_t direct; /* type of the breadth-first path (before a re-route) */
  uint16_t hops;  /* links on the path */
  int16_t next;   /* index of the link of the source that starts the breadth-first path (-1: none) */
  int16_t relay;  /* relay node (a CPU, or the GPU of a PXN path), or -1 */
  float bw;       /* GB/s: the narrowest link */
};

/* The PXN relay of a GPU->NIC path: relay -1 when the path is direct (for tools and tests). */
struct braid_topo_pxn {
  int relay;
  float bw;
};

struct braid_topo_system {
  struct braid_topo_xml* xml; /* the document the graph was built from */
  int xml_owned;              /* 1: freed with the system (0: a subset sharing its parent's) */
  int nnodes, cap_nodes;
  struct braid_topo_node* nodes;
  int ngpus, nnics, ncpus, nvs;  /* nvs: index of the NVSwitch node, -1 none */
  int nhosts;                    /* machines described (host_hash values of the CPUs) */
  int* gpus;                     /* node index of GPU i (sorted by dev) */
  int* nics;                     /* node index of NIC i (sorted by net dev) */
  int* cpus;                     /* node index of CPU i (sorted by host, numa id) */
  struct braid_topo_path* paths; /* nnodes x nnodes, after braid_topo_compute_paths */
  struct braid_topo_pxn* pxn;    /* ngpus x nnics */
  int pseudo;                    /* number of host-mode pseudo-GPUs */
  char net_plugin[32];           /* the network whose devices are the NICs ("": sysfs guessed them) */
};

/* What each rank knows about itself, allgathered by init. */
struct braid_topo_rank {
  int rank;
  uint64_t host_hash; /* ranks with equal hashes share a node */
  int node;           /* node index, 0..nnodes-1, in order of each node's first rank */
  int local_rank;     /* order of the rank within its node */
  int cuda_dev;       /* -1 in host mode */
  int64_t bus_id;     /* the GPU's PCI bus id as a number; -1 in host mode */
};

/* ---------------------------------------------------------------------------------------
 * Building the system. */

/* The local machine: NCCL_TOPO_FILE when set (merged with what detection finds, as NCCL
 * fills a vendor's file with the GPUs and NICs it sees), else detection (topo_detect.c) with
 * the GPUs sysfs shows. A NCCL_TOPO_FILE that cannot be read or parsed is an error. */
ncclResult_t braid_topo_detect(struct braid_topo_system** sys_p);

/* One device of the chosen network plugin, as its getProperties reports it (topo does not
 * depend on the transport layer: core copies the plugin's properties here). */
struct braid_topo_net_dev {
  char name[64];      /* "mlx5_0", "eth0" */
  char pci_path[256]; /* sysfs path of the device ("" none: attached to the first CPU) */
  uint64_t guid;      /* ports of one NIC share it */
  int speed;          /* Mb/s (<= 0: NCCL's 10 Gb/s) */
  int port;
  float latency; /* us (0: the tuner's network row alone) */
  int max_comms;
  int gdr; /* the plugin registers GPU memory (ptrSupport CUDA or DMABUF) */
};
/* The network's devices in plugin order (index = the plugin's dev). */
struct braid_topo_nets {
  const char* plugin; /* its name, for logs and sys->net_plugin */
  int ndevs;
  const struct braid_topo_net_dev* devs;
};
/* braid_topo_detect with the NICs of a network plugin instead of sysfs's guess (NCCL's
 * ncclTopoProcessNet): each device is a <net dev=i> at its pciPath's place in the PCI tree,
 * with the plugin's speed, latency, port, guid, maxconn and gdr; with NCCL_TOPO_FILE, a file's
 * <net> of the same name is kept (its own attributes win, dev becomes the plugin's) and one
 * no device matches is dropped, as NCCL trims it. nets NULL: braid_topo_detect. */
ncclResult_t braid_topo_detect_nets(const struct braid_topo_nets* nets, struct braid_topo_system** sys_p);

/* Detection options: the GPUs the caller found (CUDA runtime), so topo needs no CUDA. */
struct braid_topo_detect_opts {
  int ngpus;                          /* -1: find NVIDIA GPUs in sysfs; 0: none (host mode) */
  const int64_t* bus_ids;             /* ngpus PCI bus ids */
  const int* devs;                    /* ngpus CUDA device indices (NULL: 0..ngpus-1) */
  const int* sms;                     /* ngpus compute capabilities x10 (NULL: NVML, else 0) */
  const char* sysfs_root;             /* "" or NULL: "/"; tests point it at a fake tree */
  int no_nvml;                        /* 1: do not load NVML */
  const struct braid_topo_nets* nets; /* NULL: NICs from sysfs; else the plugin's devices */
};
ncclResult_t braid_topo_detect_ex(const struct braid_topo_detect_opts* opts, struct braid_topo_system** sys_p);
/* A topology file merged with detection (topo_merge.c): every GPU and NIC detection finds
 * fills the file's element with its bus id (a <pci> without <gpu>/<nic> in a vendor's file)
 * or, when the file lacks it, joins the document under its CPU. opts NULL: this machine. */
ncclResult_t braid_topo_load_merged(const char* path, const struct braid_topo_detect_opts* opts,
                                    struct braid_topo_system** sys_p);

ncclResult_t braid_topo_load_xml(const char* path, struct braid_topo_system** sys_p);
/* The same from text in memory; `name` is used in messages. Callable on any buffer (the
 * fuzzer's entry point): bad input is a WARN and ncclInvalidArgument, never a crash. */
ncclResult_t braid_topo_load_xml_string(const char* text, const char* name, struct braid_topo_system** sys_p);
ncclResult_t braid_topo_dump_xml(const struct braid_topo_system* sys, const char* path);
/* The XML text (malloc'd, caller frees). */
ncclResult_t braid_topo_dump_xml_string(const struct braid_topo_system* sys, char** text_p);
/* NCCL_TOPO_DUMP_FILE for the rank NCCL_TOPO_DUMP_FILE_RANK (default 0): the system with the
 * rank attribute of every GPU set to the communicator rank using it (ranks[i] -> bus id,
 * -1 ends; NULL: as detected). Nothing when the variable is unset or rank is another. */
ncclResult_t braid_topo_dump_env(const struct braid_topo_system* sys, int rank, int nlocal, const int64_t* bus_ids,
                                 const int* ranks);
void braid_topo_free(struct braid_topo_system* sys);

/* A copy of `sys` with n host-mode pseudo-GPUs, pseudo-GPU i on CPU i % ncpus, paths
 * computed. */
ncclResult_t braid_topo_add_pseudo_gpus(const struct braid_topo_system* sys, int n, struct braid_topo_system** copy_p);

/* The system as NCCL sees it for one node of a communicator (topo_merge.c): only the GPUs
 * gpus[0..n-1] (GPU indices of `sys`), rank attribute = their position in the list, CPUs and
 * switches left without a kept device trimmed (NCCL's ncclTopoTrimXml), the NICs kept; paths
 * computed. Shares `sys`'s document. n = 0: no GPU at all, every socket kept (host mode). */
ncclResult_t braid_topo_subset(const struct braid_topo_system* sys, int n, const int* gpus,
                               struct braid_topo_system** sub_p);

/* ---------------------------------------------------------------------------------------
 * Queries. GPU and NIC indices are positions in sys->gpus / sys->nics. */

/* NCCL's topology id of a device of host h of a multi-host (MNNVL) file: (h << 56) + bus id. */
#define BRAID_TOPO_ID_LOCAL_MASK 0x00ffffffffffffffLL
#define BRAID_TOPO_ID(h, bus) (((int64_t)(h) << 56) + (bus))
/* Index of the GPU with this bus id (a topology id names its host; a plain bus id the first
 * host that has one), -1 if none. */
int braid_topo_gpu_find(const struct braid_topo_system* sys, int64_t bus_id);
/* Index of the NIC with this name, -1 if none. */
int braid_topo_nic_find(const struct braid_topo_system* sys, const char* name);
/* The path from node a to node b (node indices). */
const struct braid_topo_path* braid_topo_path(const struct braid_topo_system* sys, int a, int b);
/* The nodes a path goes through, a and b included, written to nodes[0..*n_p-1]; with
 * links[i] the index of the link of nodes[i] that leads to nodes[i+1]. max: capacity. */
ncclResult_t braid_topo_path_walk(const struct braid_topo_system* sys, int a, int b, int max, int* nodes, int* links,
                                  int* n_p);
/* The CPU node (index into nodes) closest to a node (fewest hops); -1 for none. */
int braid_topo_node_cpu(const struct braid_topo_system* sys, int node);

const char* braid_topo_path_name(int type);
/* "NVL", "pxb", ... (case-insensitive) -> type. ncclInvalidArgument for anything else. */
ncclResult_t braid_topo_path_parse(const char* s, int* type_p);

/* P2P between two GPUs of this system (bus ids): the path type is within NCCL_P2P_LEVEL
 * (default PXB; SYS on AMD with <= 2 GPUs), and NCCL_P2P_DISABLE is not set. Host mode
 * (-1) or a bus id this system lacks: not allowed. A malformed NCCL_P2P_LEVEL:
 * ncclInvalidUsage. */
ncclResult_t braid_topo_p2p_allowed(const struct braid_topo_system* sys, int64_t bus_a, int64_t bus_b, int* allowed_p);
/* GPUDirect RDMA between a GPU (bus id) and a NIC (index): both capable (gdr="1") and the
 * path (the relay GPU's for PXN; P2C counts as C2C) within NCCL_NET_GDR_LEVEL (default PXB). */
ncclResult_t braid_topo_gdr_allowed(const struct braid_topo_system* sys, int64_t gpu_bus, int nic, int* allowed_p);
/* The distance (BRAID_PATH_*) braid_topo_gdr_allowed compares with the level, whatever the gdr
 * attributes say; -1 when the GPU or the NIC is not in sys. */
int braid_topo_gdr_distance(const struct braid_topo_system* sys, int64_t gpu_bus, int nic);
/* The P2P and GDR path limits from the environment (and the system's CPUs). */
ncclResult_t braid_topo_p2p_level(const struct braid_topo_system* sys, int* level_p);
ncclResult_t braid_topo_gdr_level(int* level_p);

/* Bus id text "0000:18:00.0" <-> number 0x18000 (NCCL's int64 of the hex digits). */
ncclResult_t braid_topo_busid_parse(const char* s, int64_t* id_p);
/* NCCL's reading of any bus id text: the hex digits up to the first other character, ':'
 * and '.' skipped ("fffffff:ff:ff.0" -> 0xfffffffffff0). Never fails. */
int64_t braid_topo_busid_loose(const char* s);
void braid_topo_busid_format(int64_t id, char* buf, size_t len);

/* The GPUs' NVLink fabric supports NVLink SHARP (sm90+, every GPU on the NVSwitch). */
int braid_topo_nvls_capable(const struct braid_topo_system* sys);

/* ---------------------------------------------------------------------------------------
 * Internals shared by the topo_*.c and graph*.c files (not for other modules). */
ncclResult_t braid_topo_node_add(struct braid_topo_system* sys, int kind, int64_t id, int* idx_p);
/* Both directions (bw each); a second link of the same kind between the same nodes adds up. */
ncclResult_t braid_topo_link_add(struct braid_topo_system* sys, int a, int b, int kind, float bw);
/* One direction. */
ncclResult_t braid_topo_link_add_one(struct braid_topo_system* sys, int a, int b, int kind, float bw);
ncclResult_t braid_topo_compute_paths(struct braid_topo_system* sys);
/* Nodes, links and the index lists from a document; keep (may be NULL): only the <gpu>
 * elements for which it returns >= 0 are built, that value becoming their rank, and CPUs and
 * switches without a built device are left out (a subset). */
typedef int (*braid_topo_keep_fn)(const struct braid_topo_xml* gpu, void* arg);
/* keep for the machine without its GPUs (host mode on a file with GPUs): every socket stays. */
int braid_topo_keep_none(const struct braid_topo_xml* gpu, void* arg);
ncclResult_t braid_topo_build(struct braid_topo_xml* xml, braid_topo_keep_fn keep, void* arg,
                              struct braid_topo_system** sys_p);
/* braid_topo_build of the whole document, paths computed; the system owns xml. */
ncclResult_t braid_topo_from_xml(struct braid_topo_xml* xml, struct braid_topo_system** sys_p);
/* Index lists of GPUs, NICs and CPUs (sorted as documented above). */
ncclResult_t braid_topo_index(struct braid_topo_system* sys);
/* NVLink GB/s of one link of a GPU of this sm (NCCL's table). */
float braid_topo_nvlink_bw(int sm);
/* GB/s of a PCIe link from its XML link_speed text and link_width (NCCL's table: width 0 is
 * 16 lanes, an unknown speed 60/80 GB/s per lane). */
float braid_topo_pci_bw(const char* speed, int width);
/* GB/s between two CPU sockets of this kind (NCCL: QPI/UPI by model, AMD, POWER, ARM). */
float braid_topo_cpu_bw(const struct braid_topo_node* cpu);

/* The NIC (index into sys->nics) GPU g (index into sys->gpus) uses for channel c and the GPU
 * a NIC belongs to (topo_local.c, NCCL's ncclTopoGetLocalNet / ncclTopoGetLocalGpu with
 * NCCL_NETDEVS_POLICY=AUTO). -1: none. */
int braid_topo_local_nic(const struct braid_topo_system* sys, int g, int c);
int braid_topo_local_gpu(const struct braid_topo_system* sys, int nic);
/* The nodes of `kind` reached from node `from` with the widest, then closest path (NCCL's
 * ncclTopoGetLocal): written to out (node indices, in node order); returns how many. */
int braid_topo_local(const struct braid_topo_system* sys, int from, int kind, int* out, int max);

/* The XML tree (topo_xml.c). */
struct braid_topo_xml_attr {
  char* name;
  char* value;
};
struct braid_topo_xml {
  char* name; /* element name */
  int line;   /* line of its start tag (0: made in memory) */
  int nattrs, cap_attrs;
  struct braid_topo_xml_attr* attrs;
  int nkids, cap_kids;
  struct braid_topo_xml** kids;
  struct braid_topo_xml* parent;
};

/* Parse a document. Malformed text: a WARN "<name>:<line>: <what>" and ncclInvalidArgument. */
ncclResult_t braid_topo_xml_parse(const char* text, const char* name, struct braid_topo_xml** root_p);
/* Text of a document, NCCL's layout (one element per line, two spaces per level). */
ncclResult_t braid_topo_xml_print(const struct braid_topo_xml* root, char** text_p);
void braid_topo_xml_free(struct braid_topo_xml* x);
ncclResult_t braid_topo_xml_new(struct braid_topo_xml* parent, const char* name, struct braid_topo_xml** x_p);
/* A deep copy of x appended to parent's children. */
ncclResult_t braid_topo_xml_copy(struct braid_topo_xml* parent, const struct braid_topo_xml* x,
                                 struct braid_topo_xml** copy_p);
ncclResult_t braid_topo_xml_set(struct braid_topo_xml* x, const char* name, const char* value);
ncclResult_t braid_topo_xml_setf(struct braid_topo_xml* x, const char* name, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The attribute's value, NULL when absent. */
const char* braid_topo_xml_get(const struct braid_topo_xml* x, const char* name);
/* Integer attribute read as NCCL reads it (strtol: decimal, 0x hex, leading digits of
 * anything else, e.g. "0.000000" -> 0); `def` when absent or empty. Text that does not start
 * with a number reads as 0 with an INFO line naming the element's line. Never fails. */
int64_t braid_topo_xml_int(const struct braid_topo_xml* x, const char* name, int64_t def);
/* Float attribute, as NCCL's strtof: `def` when absent, leading number else 0. */
double braid_topo_xml_float(const struct braid_topo_xml* x, const char* name, double def);
/* The first child with this name, NULL if none. */
struct braid_topo_xml* braid_topo_xml_child(const struct braid_topo_xml* x, const char* name);
ncclResult_t braid_topo_xml_read_file(const char* path, char** text_p);

#endif /* BRAID_TOPO_H */
