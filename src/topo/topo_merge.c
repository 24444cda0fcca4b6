/*
 * topo_merge.c - documents combined the ways NCCL combines them (src/graph/topo.cc):
 *
 * braid_topo_load_merged: a topology file and detection. NCCL reads NCCL_TOPO_FILE, then fills
 * it with the GPU of each rank and the NICs of the network plugin: a vendor's file that lists
 * only the PCI tree (Azure ND, AWS p4d: <pci class="0x030200"/> with no <gpu>) gets its <gpu>
 * and <nic> elements from the machine, at the file's place in the tree. Here every GPU and
 * NIC detection finds is merged the same way: an element of the file with its bus id gets the
 * detected <gpu> / <nic> (or, when it has one, the attributes it lacks); a device the file
 * does not list joins it under the <cpu> with the detected NUMA id. With a network plugin's
 * devices (opts->nets), a device is matched by name anywhere in the file first (NCCL's
 * ncclTopoFillNet), the file's attributes win but dev is the plugin's, and a file <net> no
 * device matches is dropped (NCCL's keep / ncclTopoTrimXml).
 *
 * braid_topo_subset: the system of one node of a communicator. NCCL keeps only the GPUs of
 * the communicator's local ranks (and trims the switches and CPUs left without a device)
 * before it computes paths, so that, for example, a P2P rule counting GPUs or the NIC a GPU
 * picks see the communicator, not the whole machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/check.h"
#include "topo/topo.h"

/* ---- subsets -------------------------------------------------------------------------- */

struct subset {
  const struct braid_topo_system* sys;
  int n;
  const int* gpus;
};

static int subset_keep(const struct braid_topo_xml* x, void* arg) {
  const struct subset* s = arg;
  for (int i = 0; i < s->n; i++)
    if (s->sys->nodes[s->sys->gpus[s->gpus[i]]].xml == x) return i;
  return -1;
}

ncclResult_t braid_topo_subset(const struct braid_topo_system* sys, int n, const int* gpus,
                               struct braid_topo_system** sub_p) {
  struct subset s = {sys, n, gpus};
  struct braid_topo_system* sub = NULL;
  if (sys == NULL || sys->xml == NULL || n < 0 || (n > 0 && gpus == NULL)) {
    BRAID_WARN("braid_topo_subset: bad argument (sys %p, %d GPUs)", (const void*)sys, n);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < n; i++)
    if (gpus[i] < 0 || gpus[i] >= sys->ngpus || sys->nodes[sys->gpus[gpus[i]]].xml == NULL) {
      BRAID_WARN("braid_topo_subset: GPU %d is not a GPU of the document", gpus[i]);
      return ncclInvalidArgument;
    }
  BRAID_CHECK(braid_topo_build(sys->xml, n ? subset_keep : braid_topo_keep_none, &s, &sub));
  sub->xml = sys->xml; /* shared */
  ncclResult_t res = braid_topo_compute_paths(sub);
  if (res != ncclSuccess) {
    braid_topo_free(sub);
    return res;
  }
  *sub_p = sub;
  return ncclSuccess;
}

/* ---- file + detection ----------------------------------------------------------------- */

/* The first element named `name` with attribute key=value (case-insensitive), depth first. */
static struct braid_topo_xml* find_kv(struct braid_topo_xml* x, const char* name, const char* key, const char* value) {
  const char* v = braid_topo_xml_get(x, key);
  if (strcmp(x->name, name) == 0 && v != NULL && strcasecmp(v, value) == 0) return x;
  for (int i = 0; i < x->nkids; i++) {
    struct braid_topo_xml* f = find_kv(x->kids[i], name, key, value);
    if (f != NULL) return f;
  }
  return NULL;
}

/* Copy the attributes of `from` that `to` lacks; `always` names those taken even if set. */
static ncclResult_t fill_attrs(struct braid_topo_xml* to, const struct braid_topo_xml* from, const char* always) {
  for (int i = 0; i < from->nattrs; i++) {
    const char* k = from->attrs[i].name;
    if (braid_topo_xml_get(to, k) == NULL || (always && strcmp(k, always) == 0))
      BRAID_CHECK(braid_topo_xml_set(to, k, from->attrs[i].value));
  }
  return ncclSuccess;
}

/* The <cpu> of the file to take a detected element whose CPU is dcpu. */
static ncclResult_t cpu_for(struct braid_topo_xml* fsys, const struct braid_topo_xml* dcpu,
                            struct braid_topo_xml** cpu_p) {
  const char* numa = braid_topo_xml_get(dcpu, "numaid");
  for (int i = 0; i < fsys->nkids; i++) {
    const char* n = braid_topo_xml_get(fsys->kids[i], "numaid");
    if (strcmp(fsys->kids[i]->name, "cpu") == 0 && n && numa && strcmp(n, numa) == 0) {
      *cpu_p = fsys->kids[i];
      return fill_attrs(*cpu_p, dcpu, NULL); /* arch, vendor, ... a vendor's file may omit */
    }
  }
  struct braid_topo_xml* c;
  BRAID_CHECK(braid_topo_xml_new(fsys, "cpu", &c));
  BRAID_CHECK(fill_attrs(c, dcpu, NULL));
  *cpu_p = c;
  return ncclSuccess;
}

/* The detected <cpu> above an element. */
static const struct braid_topo_xml* cpu_above(const struct braid_topo_xml* x) {
  while (x != NULL && strcmp(x->name, "cpu") != 0) x = x->parent;
  return x;
}

/* A file's <net> of a detected one's name: the file's attributes win, dev is detection's. */
static ncclResult_t fill_port(struct braid_topo_xml* port, const struct braid_topo_xml* det) {
  const char *was = braid_topo_xml_get(port, "dev"), *now = braid_topo_xml_get(det, "dev");
  if (was != NULL && now != NULL && strcmp(was, now) != 0)
    BRAID_INFO(BRAID_LOG_GRAPH, "TOPO/NET : Changing %s dev index from %s to %s", braid_topo_xml_get(det, "name"), was,
               now);
  return fill_attrs(port, det, "dev");
}

/* A detected <nic> whose ports the file lists by name (NCCL finds a plugin's device by name
 * anywhere in the file): the file's attributes win, dev is the plugin's. */
static ncclResult_t fill_named_ports(struct braid_topo_xml* fsys, const struct braid_topo_xml* dev) {
  for (int i = 0; i < dev->nkids; i++)
    BRAID_CHECK(fill_port(find_kv(fsys, "net", "name", braid_topo_xml_get(dev->kids[i], "name")), dev->kids[i]));
  return ncclSuccess;
}

/* Is `dev` a <nic> every port of which the file names somewhere? */
static int all_named(struct braid_topo_xml* fsys, const struct braid_topo_xml* dev) {
  if (strcmp(dev->name, "nic") != 0 || dev->nkids == 0) return 0;
  for (int i = 0; i < dev->nkids; i++) {
    const char* name = braid_topo_xml_get(dev->kids[i], "name");
    if (name == NULL || find_kv(fsys, "net", "name", name) == NULL) return 0;
  }
  return 1;
}

/* A detected device element (the <pci> holding a <gpu> or <nic>) into the file. */
static ncclResult_t merge_device(struct braid_topo_xml* fsys, const struct braid_topo_xml* dpci,
                                 const struct braid_topo_xml* dev) {
  const char* busid = braid_topo_xml_get(dpci, "busid");
  struct braid_topo_xml* fpci = busid ? find_kv(fsys, "pci", "busid", busid) : NULL;
  if (fpci == NULL && all_named(fsys, dev)) return fill_named_ports(fsys, dev); /* the file has them elsewhere */
  if (fpci == NULL) { /* not in the file: the detected branch joins below the deepest switch the
                        file has (or the CPU) */
    const struct braid_topo_xml* top = dpci;
    struct braid_topo_xml* at = NULL;
    while (top->parent != NULL && strcmp(top->parent->name, "pci") == 0 && at == NULL) {
      const char* up = braid_topo_xml_get(top->parent, "busid");
      at = up ? find_kv(fsys, "pci", "busid", up) : NULL;
      if (at == NULL) top = top->parent;
    }
    if (at == NULL) BRAID_CHECK(cpu_for(fsys, cpu_above(dpci), &at));
    return braid_topo_xml_copy(at, top, NULL);
  }
  BRAID_CHECK(fill_attrs(fpci, dpci, NULL));
  struct braid_topo_xml* have = braid_topo_xml_child(fpci, dev->name);
  if (have == NULL && all_named(fsys, dev)) return fill_named_ports(fsys, dev);
  if (have == NULL) return braid_topo_xml_copy(fpci, dev, NULL);
  if (strcmp(dev->name, "gpu") == 0) {
    BRAID_CHECK(fill_attrs(have, dev, NULL));
    if (braid_topo_xml_child(have, "nvlink") == NULL)
      for (int i = 0; i < dev->nkids; i++) BRAID_CHECK(braid_topo_xml_copy(have, dev->kids[i], NULL));
    return ncclSuccess;
  }
  for (int i = 0; i < dev->nkids; i++) { /* <nic>: its ports, by name; dev is the plugin's */
    const char* name = braid_topo_xml_get(dev->kids[i], "name");
    struct braid_topo_xml* port = name ? find_kv(fsys, "net", "name", name) : NULL;
    if (port == NULL) BRAID_CHECK(braid_topo_xml_copy(have, dev->kids[i], NULL));
    if (port != NULL) BRAID_CHECK(fill_port(port, dev->kids[i]));
  }
  return ncclSuccess;
}

static ncclResult_t merge_walk(struct braid_topo_xml* fsys, const struct braid_topo_xml* d) {
  for (int i = 0; i < d->nkids; i++) {
    const struct braid_topo_xml* k = d->kids[i];
    if (strcmp(k->name, "gpu") == 0 || (strcmp(k->name, "nic") == 0 && strcmp(d->name, "pci") == 0)) {
      BRAID_CHECK(merge_device(fsys, d, k));
    } else if (strcmp(k->name, "nic") == 0) { /* a NIC without PCI: its ports by name */
      for (int p = 0; p < k->nkids; p++) {
        const char* name = braid_topo_xml_get(k->kids[p], "name");
        struct braid_topo_xml* port = name != NULL ? find_kv(fsys, "net", "name", name) : NULL;
        if (port != NULL) {
          BRAID_CHECK(fill_port(port, k->kids[p]));
          continue;
        }
        struct braid_topo_xml *cpu, *nic;
        BRAID_CHECK(cpu_for(fsys, d, &cpu));
        nic = braid_topo_xml_child(cpu, "nic");
        if (nic == NULL) BRAID_CHECK(braid_topo_xml_new(cpu, "nic", &nic));
        BRAID_CHECK(braid_topo_xml_copy(nic, k->kids[p], NULL));
      }
    } else {
      BRAID_CHECK(merge_walk(fsys, k));
    }
  }
  return ncclSuccess;
}

/* The file's <net> elements no device of the plugin is named after (NCCL sets keep only on
 * the plugin's and trims the rest), and <nic>s left empty. */
static void drop_unmatched_nets(struct braid_topo_xml* x, const struct braid_topo_nets* nets, const char* path) {
  for (int i = 0; i < x->nkids; i++) {
    struct braid_topo_xml* k = x->kids[i];
    const char* name = braid_topo_xml_get(k, "name");
    int drop = 0;
    if (strcmp(k->name, "net") == 0) {
      drop = 1;
      for (int d = 0; d < nets->ndevs && drop; d++) drop = name == NULL || strcasecmp(name, nets->devs[d].name) != 0;
      if (drop)
        BRAID_INFO(BRAID_LOG_GRAPH, "Topology XML %s line %d: <net name=\"%s\"> is no device of network %s: dropped",
                   path, k->line, name ? name : "", nets->plugin);
    } else {
      drop_unmatched_nets(k, nets, path);
      drop = strcmp(k->name, "nic") == 0 && k->nkids == 0;
    }
    if (!drop) continue;
    braid_topo_xml_free(k);
    memmove(&x->kids[i], &x->kids[i + 1], sizeof(x->kids[0]) * (size_t)(x->nkids - i - 1));
    x->nkids--;
    i--;
  }
}

ncclResult_t braid_topo_load_merged(const char* path, const struct braid_topo_detect_opts* opts,
                                    struct braid_topo_system** sys_p) {
  ncclResult_t res = ncclSuccess;
  char* text = NULL;
  struct braid_topo_xml* file = NULL;
  struct braid_topo_system* det = NULL;
  if (path == NULL || sys_p == NULL) {
    BRAID_WARN("braid_topo_load_merged: %s is NULL", path == NULL ? "path" : "sys_p");
    return ncclInvalidArgument;
  }
  BRAID_CHECK(braid_topo_xml_read_file(path, &text));
  BRAID_CHECK_GOTO(braid_topo_xml_parse(text, path, &file), res, out);
  struct braid_topo_xml* fsys = braid_topo_xml_child(file, "system");
  if (fsys == NULL) {
    BRAID_WARN("Topology XML %s: no <system> element", path);
    res = ncclInvalidArgument;
    goto out;
  }
  BRAID_CHECK_GOTO(braid_topo_detect_ex(opts, &det), res, out);
  const struct braid_topo_xml* dsys = braid_topo_xml_child(det->xml, "system");
  if (dsys != NULL) BRAID_CHECK_GOTO(merge_walk(fsys, dsys), res, out);
  if (opts != NULL && opts->nets != NULL) drop_unmatched_nets(fsys, opts->nets, path);
  BRAID_CHECK_GOTO(braid_topo_from_xml(file, sys_p), res, out);
  file = NULL;
  if (opts != NULL && opts->nets != NULL)
    snprintf((*sys_p)->net_plugin, sizeof((*sys_p)->net_plugin), "%s", opts->nets->plugin);
  BRAID_INFO(BRAID_LOG_GRAPH | BRAID_LOG_INIT, "Topology from %s with the devices detected here: %d GPUs, %d NICs",
             path, (*sys_p)->ngpus, (*sys_p)->nnics);
out:
  braid_topo_xml_free(file);
  braid_topo_free(det);
  free(text);
  return res;
}
