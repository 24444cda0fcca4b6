/*
 * topo.h - the system graph of one node: CPUs (NUMA nodes), the PCI tree, GPUs, NVLink and
 * NVSwitch, NICs; the path between every pair of its nodes with NCCL's path types and
 * bandwidths; the P2P and GPUDirect RDMA decisions taken from them.
 *
 * Where it comes from: an XML document in NCCL's schema, either read from a file
 * (NCCL_TOPO_FILE, braid_topo_load_xml) or written by the detector from sysfs, NVML (dlopen)
 * and the caller's list of GPUs (topo_detect.c). The document is kept with the graph, so a
 * dump (NCCL_TOPO_DUMP_FILE, braid_topo_dump_xml) writes back what was loaded or detected.
 *
 * Files: topo_xml.c (the XML tree: parse with line numbers, dump), topo.c (XML -> nodes and
 * links), topo_paths.c (paths, PXN, P2P/GDR decisions), topo_detect.c (sysfs/NVML -> XML).
 * graph.c searches channels on this graph; tuner.c models their cost.
 *
 * Host mode: a system without GPUs is valid. graph.c then adds one pseudo-GPU per local rank
 * (braid_topo_add_pseudo_gpus), joined to a CPU by a shared-memory link.
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

/* Kinds of nodes in the system graph. */
enum braid_topo_kind {
  BRAID_TOPO_GPU = 0, /* a GPU (or, in host mode, a rank's pseudo-GPU) */
  BRAID_TOPO_PCI = 1, /* a PCIe switch (or a bridge kept from the XML) */
  BRAID_TOPO_NVS = 2, /* the NVSwitch fabric: one node joins every GPU linked to a switch */
  BRAID_TOPO_CPU = 3, /* a CPU socket / NUMA node, with its host bridge */
  BRAID_TOPO_NIC = 4, /* one network device (a <net> element: a port of a NIC) */
  BRAID_TOPO_NUM_KINDS
};

/* Kinds of links; each link is one direction with its own bandwidth. */
enum braid_link_kind {
  BRAID_LINK_NVL = 0, /* NVLink (GPU-GPU, GPU-NVSwitch) */
  BRAID_LINK_C2C = 1, /* NVLink-C2C between a GPU and its CPU */
  BRAID_LINK_PCI = 2, /* PCIe */
  BRAID_LINK_SYS = 3, /* CPU to CPU (QPI/UPI/Infinity Fabric/...) */
  BRAID_LINK_SHM = 4, /* host mode: a pseudo-GPU's shared-memory port on its CPU */
  BRAID_NUM_LINK_KINDS
};

/* Bandwidths (GB/s) NCCL uses for links it cannot measure (reference section 3). */
#define BRAID_TOPO_BW_PCI_DEFAULT 24.0f /* PCIe of unknown speed: taken as Gen4 x16 */
#define BRAID_TOPO_BW_LOC 5000.0f       /* inside one device */
/* Host mode: a pseudo-GPU's shared-memory port, the copy rate of one core into and out of
 * a shared segment (memcpy class; measured ~5-10 GB/s on current x86 servers). */
#define BRAID_TOPO_BW_SHM 5.0f
/* A network device whose speed sysfs does not know (virtual NICs, loopback): 10 Gb/s. */
#define BRAID_TOPO_NET_SPEED_DEFAULT 10000

/* One directed link. */
struct braid_topo_link {
  int kind;   /* enum braid_link_kind */
  int remote; /* index of the node at the other end */
  float bw;   /* GB/s in this direction */
};

/* A node of the system graph. Only the fields of its kind are meaningful. */
struct braid_topo_node {
  int kind;     /* enum braid_topo_kind */
  int64_t id;   /* PCI bus id as a number (GPU, PCI, NIC on PCI; -1 if none); numa id (CPU) */
  int xml_line; /* line of the XML element it came from (0: made up, e.g. NVS, pseudo-GPU) */
  int parent;   /* the PCI switch or CPU it hangs under in the PCI tree (-1: a CPU, the NVS) */
  int nlinks, cap_links;
  struct braid_topo_link* links;
  /* GPU */
  int dev;       /* CUDA device index (GPU), net device index (NIC) */
  int sm;        /* compute capability x10 (90 = Hopper); 0 pseudo-GPU */
  int rank;      /* rank attribute of the XML (-1 absent) */
  int gdr;       /* GPU/NIC supports GPUDirect RDMA */
  int pseudo;    /* host-mode pseudo-GPU: its index among the pseudo-GPUs, else -1 */
  int nvl_count; /* NVLinks of a GPU, all targets together */
  /* CPU */
  int arch;   /* enum braid_cpu_arch */
  int vendor; /* enum braid_cpu_vendor */
  int family, model;
  char affinity[160]; /* the cpumask as in sysfs, e.g. "0000ffff,0000ffff" */
  /* NIC */
  char name[64]; /* e.g. "mlx5_0", "eth0" */
  int speed;     /* Mb/s */
  int port;
  int latency;
  uint64_t guid;
  int maxconn;
};

enum braid_cpu_arch { BRAID_CPU_ARCH_X86 = 0, BRAID_CPU_ARCH_POWER = 1, BRAID_CPU_ARCH_ARM = 2 };
enum braid_cpu_vendor {
  BRAID_CPU_VENDOR_INTEL = 0,
  BRAID_CPU_VENDOR_AMD = 1,
  BRAID_CPU_VENDOR_ZHAOXIN = 2,
  BRAID_CPU_VENDOR_OTHER = 3
};

/* The best path from one node to another. Paths through a relay (PXN, or a GPU pair that
 * may not use P2P and goes through host memory) are the path to the relay, then the
 * relay's own path. */
struct braid_topo_path {
  uint8_t type;   /* enum braid_path_type */
  uint8_t hops;   /* links on the path */
  uint8_t direct; /* type of the breadth-first path (before a host-memory re-route) */
  int16_t prev;   /* node before the destination (-1: none / relay path) */
  int16_t plink;  /* index of the link of `prev` that reaches the destination */
  int16_t relay;  /* relay node, or -1 */
  float bw;       /* GB/s: the narrowest link */
};

/* A PXN alternative for a GPU->NIC path that is worse than PXB: through `relay`, a GPU linked
 * by NVLink whose own path to the NIC is P2C or better. relay -1: none. */
struct braid_topo_pxn {
  int relay;
  float bw;
};

struct braid_topo_xml;

struct braid_topo_system {
  struct braid_topo_xml* xml; /* the document the graph was built from */
  int nnodes, cap_nodes;
  struct braid_topo_node* nodes;
  int ngpus, nnics, ncpus, nvs;  /* nvs: index of the NVSwitch node, -1 none */
  int* gpus;                     /* node index of GPU i (sorted by dev) */
  int* nics;                     /* node index of NIC i (sorted by net dev) */
  int* cpus;                     /* node index of CPU i (sorted by numa id) */
  struct braid_topo_path* paths; /* nnodes x nnodes, after braid_topo_compute_paths */
  struct braid_topo_pxn* pxn;    /* ngpus x nnics */
  int pseudo;                    /* number of host-mode pseudo-GPUs */
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

/* The local machine: NCCL_TOPO_FILE when set, else detection (topo_detect.c) with the GPUs
 * sysfs shows (NVIDIA display/3D controllers). NCCL_TOPO_DUMP_FILE, when set, receives the
 * result. */
ncclResult_t braid_topo_detect(struct braid_topo_system** sys_p);

/* Detection options: the GPUs the caller found (CUDA runtime), so topo needs no CUDA. */
struct braid_topo_detect_opts {
  int ngpus;              /* -1: find NVIDIA GPUs in sysfs; 0: none (host mode) */
  const int64_t* bus_ids; /* ngpus PCI bus ids */
  const int* devs;        /* ngpus CUDA device indices (NULL: 0..ngpus-1) */
  const int* sms;         /* ngpus compute capabilities x10 (NULL: NVML, else 0) */
  const char* sysfs_root; /* "" or NULL: "/"; tests point it at a fake tree */
  int no_nvml;            /* 1: do not load NVML */
};
ncclResult_t braid_topo_detect_ex(const struct braid_topo_detect_opts* opts, struct braid_topo_system** sys_p);

ncclResult_t braid_topo_load_xml(const char* path, struct braid_topo_system** sys_p);
/* The same from text in memory; `name` is used in messages. */
ncclResult_t braid_topo_load_xml_string(const char* text, const char* name, struct braid_topo_system** sys_p);
ncclResult_t braid_topo_dump_xml(const struct braid_topo_system* sys, const char* path);
/* The XML text (malloc'd, caller frees). */
ncclResult_t braid_topo_dump_xml_string(const struct braid_topo_system* sys, char** text_p);
void braid_topo_free(struct braid_topo_system* sys);

/* A copy of `sys` with n host-mode pseudo-GPUs, pseudo-GPU i on CPU i % ncpus, paths
 * computed. */
ncclResult_t braid_topo_add_pseudo_gpus(const struct braid_topo_system* sys, int n, struct braid_topo_system** copy_p);

/* ---------------------------------------------------------------------------------------
 * Queries. GPU and NIC indices are positions in sys->gpus / sys->nics. */

/* Index of the GPU with this bus id, -1 if none. */
int braid_topo_gpu_find(const struct braid_topo_system* sys, int64_t bus_id);
/* Index of the NIC with this name, -1 if none. */
int braid_topo_nic_find(const struct braid_topo_system* sys, const char* name);
/* The path from node a to node b (node indices). */
const struct braid_topo_path* braid_topo_path(const struct braid_topo_system* sys, int a, int b);
/* The nodes a path goes through, a and b included, written to nodes[0..*n_p-1]; with
 * links[i] the index of the link of nodes[i] that leads to nodes[i+1]. max: capacity. */
ncclResult_t braid_topo_path_walk(const struct braid_topo_system* sys, int a, int b, int max, int* nodes, int* links,
                                  int* n_p);
/* The CPU node (index into nodes) a node hangs under; -1 for none. */
int braid_topo_node_cpu(const struct braid_topo_system* sys, int node);

const char* braid_topo_path_name(int type);
/* "NVL", "pxb", ... (case-insensitive) -> type. ncclInvalidArgument for anything else. */
ncclResult_t braid_topo_path_parse(const char* s, int* type_p);

/* P2P between two GPUs of this system (bus ids): the path type is within NCCL_P2P_LEVEL
 * (default PXB; SYS on AMD with <= 2 GPUs), and NCCL_P2P_DISABLE is not set. Host mode
 * (-1) or a bus id this system lacks: not allowed. A malformed NCCL_P2P_LEVEL:
 * ncclInvalidUsage. */
ncclResult_t braid_topo_p2p_allowed(const struct braid_topo_system* sys, int64_t bus_a, int64_t bus_b, int* allowed_p);
/* GPUDirect RDMA between a GPU (bus id) and a NIC (index): both capable and the path (the
 * relay GPU's for PXN) within NCCL_NET_GDR_LEVEL (default PXB; P2C also counts). */
ncclResult_t braid_topo_gdr_allowed(const struct braid_topo_system* sys, int64_t gpu_bus, int nic, int* allowed_p);
/* The P2P and GDR path limits from the environment (and the system's CPUs). */
ncclResult_t braid_topo_p2p_level(const struct braid_topo_system* sys, int* level_p);
ncclResult_t braid_topo_gdr_level(int* level_p);

/* Bus id text "0000:18:00.0" <-> number 0x18000 (NCCL's int64 of the hex digits). */
ncclResult_t braid_topo_busid_parse(const char* s, int64_t* id_p);
void braid_topo_busid_format(int64_t id, char* buf, size_t len);

/* The GPUs' NVLink fabric supports NVLink SHARP (sm90+, every GPU on the NVSwitch). */
int braid_topo_nvls_capable(const struct braid_topo_system* sys);

/* ---------------------------------------------------------------------------------------
 * Internals shared by the topo_*.c files (not for other modules). */
ncclResult_t braid_topo_node_add(struct braid_topo_system* sys, int kind, int64_t id, int* idx_p);
ncclResult_t braid_topo_link_add(struct braid_topo_system* sys, int a, int b, int kind, float bw);
ncclResult_t braid_topo_compute_paths(struct braid_topo_system* sys);
ncclResult_t braid_topo_from_xml(struct braid_topo_xml* xml, struct braid_topo_system** sys_p);
/* Per-link bandwidth of NVLink on a GPU of this sm (GB/s). */
float braid_topo_nvlink_bw(int sm);
/* GB/s of a PCIe link from sysfs text ("32.0 GT/s PCIe") and width. */
float braid_topo_pci_bw(const char* speed, int width);

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
/* Text of a document, NCCL's layout (one element per line, one space per level). */
ncclResult_t braid_topo_xml_print(const struct braid_topo_xml* root, char** text_p);
void braid_topo_xml_free(struct braid_topo_xml* x);
ncclResult_t braid_topo_xml_new(struct braid_topo_xml* parent, const char* name, struct braid_topo_xml** x_p);
ncclResult_t braid_topo_xml_set(struct braid_topo_xml* x, const char* name, const char* value);
ncclResult_t braid_topo_xml_setf(struct braid_topo_xml* x, const char* name, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The attribute's value, NULL when absent. */
const char* braid_topo_xml_get(const struct braid_topo_xml* x, const char* name);
/* Integer attribute (decimal or 0x hex); `def` when absent. Malformed: WARN with the line. */
ncclResult_t braid_topo_xml_get_int(const struct braid_topo_xml* x, const char* name, int64_t def, int64_t* v_p);
ncclResult_t braid_topo_xml_get_float(const struct braid_topo_xml* x, const char* name, double def, double* v_p);
/* The first child with this name, NULL if none. */
struct braid_topo_xml* braid_topo_xml_child(const struct braid_topo_xml* x, const char* name);
ncclResult_t braid_topo_xml_read_file(const char* path, char** text_p);

#endif /* BRAID_TOPO_H */
