/*
 * topo_detect.c - writes the XML document of the local machine (topo.h), which topo.c then
 * turns into the system graph:
 *   CPUs      /sys/devices/system/node/node<N>/cpumap, /proc/cpuinfo (vendor, family, model)
 *   PCI tree  realpath of /sys/bus/pci/devices/<busid>: the root port belongs to the CPU, the
 *             bridges below it come in pairs (switch upstream port, downstream port) and the
 *             pair is one switch, named by its upstream port; link speed and width from
 *             max_link_speed/max_link_width, a device's capped by its downstream port
 *   GPUs      the caller's list of PCI bus ids (it has the CUDA runtime; braid_topo does not
 *             link CUDA), or NVIDIA display/3D controllers found in sysfs
 *   NVLink    NVML through dlopen (absent: no NVLink): active links and their remote bus ids;
 *             a remote that is not one of our GPUs is the NVSwitch fabric
 *   NICs      the chosen network plugin's devices when the caller lists them (opts->nets:
 *             name, pciPath, speed, latency, port, guid, maxconn, gdr; NCCL's
 *             ncclTopoPopulateNics), else a guess: /sys/class/infiniband (rate, node GUID)
 *             when present, else the Ethernet interfaces with a PCI device
 *             (/sys/class/net/<if>/speed), numbered like the plugins number them (by name)
 * Every <pci> gets link_speed and link_width (empty / 0 when sysfs does not say) and every
 * <gpu> a rank attribute, so that NCCL can load what braid dumps. An optional root prefix lets
 * tests run the detector on a fake sysfs tree.
 */
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/check.h"
#include "base/param.h"
#include "topo/topo.h"

struct detect {
  const char* root;           /* prefix of /sys and /proc */
  struct braid_topo_xml* doc; /* the document */
  struct braid_topo_xml* sys; /* its <system> */
  int gdr;                    /* a GPUDirect RDMA peer-memory module is loaded */
};

/* Read the first line of root+path (trailing newline removed); 0 when unreadable. */
static int read_line(const struct detect* d, const char* path, char* buf, size_t len) {
  char full[PATH_MAX];
  FILE* f;
  snprintf(full, sizeof(full), "%s%s", d->root, path);
  f = fopen(full, "r");
  if (f == NULL) return 0;
  if (fgets(buf, (int)len, f) == NULL) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
  return 1;
}

static int file_exists(const struct detect* d, const char* path) {
  char full[PATH_MAX];
  snprintf(full, sizeof(full), "%s%s", d->root, path);
  return access(full, F_OK) == 0;
}

/* ---- CPUs ----------------------------------------------------------------------------- */

static void cpuinfo_field(const struct detect* d, const char* key, char* out, size_t len) {
  char path[PATH_MAX], line[256];
  FILE* f;
  out[0] = '\0';
  snprintf(path, sizeof(path), "%s/proc/cpuinfo", d->root);
  f = fopen(path, "r");
  if (f == NULL) return;
  while (fgets(line, sizeof(line), f)) {
    char* colon = strchr(line, ':');
    if (colon == NULL || strncmp(line, key, strlen(key)) != 0) continue;
    char* v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    snprintf(out, len, "%s", v);
    break;
  }
  fclose(f);
}

static ncclResult_t detect_cpu(struct detect* d, int numa, const char* affinity) {
  struct braid_topo_xml* c;
  struct utsname u;
  char vendor[64], family[32], model[32];
  BRAID_CHECK(braid_topo_xml_new(d->sys, "cpu", &c));
  BRAID_CHECK(braid_topo_xml_setf(c, "numaid", "%d", numa));
  BRAID_CHECK(braid_topo_xml_set(c, "affinity", affinity));
  const char* arch = uname(&u) == 0 ? u.machine : "x86_64";
  if (strcmp(arch, "aarch64") == 0) arch = "arm64"; /* NCCL's names */
  if (strncmp(arch, "ppc64", 5) == 0) arch = "ppc64";
  BRAID_CHECK(braid_topo_xml_set(c, "arch", arch));
  cpuinfo_field(d, "vendor_id", vendor, sizeof(vendor));
  cpuinfo_field(d, "cpu family", family, sizeof(family));
  cpuinfo_field(d, "model\t", model, sizeof(model));
  if (vendor[0]) BRAID_CHECK(braid_topo_xml_set(c, "vendor", vendor));
  if (family[0]) BRAID_CHECK(braid_topo_xml_set(c, "familyid", family));
  if (model[0]) BRAID_CHECK(braid_topo_xml_set(c, "modelid", model));
  return ncclSuccess;
}

static ncclResult_t detect_cpus(struct detect* d) {
  char path[PATH_MAX], aff[160];
  int found = 0;
  for (int n = 0; n < 1024; n++) {
    snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpumap", n);
    if (!read_line(d, path, aff, sizeof(aff))) continue;
    BRAID_CHECK(detect_cpu(d, n, aff));
    found++;
  }
  if (found == 0) BRAID_CHECK(detect_cpu(d, 0, "ffffffff")); /* no NUMA in sysfs */
  return ncclSuccess;
}

static struct braid_topo_xml* find_cpu(struct detect* d, int numa) {
  struct braid_topo_xml* first = NULL;
  for (int i = 0; i < d->sys->nkids; i++) {
    struct braid_topo_xml* c = d->sys->kids[i];
    const char* id = braid_topo_xml_get(c, "numaid");
    if (first == NULL) first = c;
    if (id && atoi(id) == numa) return c;
  }
  return first;
}

/* ---- PCI tree ------------------------------------------------------------------------- */

static struct braid_topo_xml* find_busid(struct braid_topo_xml* parent, const char* busid) {
  for (int i = 0; i < parent->nkids; i++) {
    const char* b = braid_topo_xml_get(parent->kids[i], "busid");
    if (b && strcmp(b, busid) == 0) return parent->kids[i];
  }
  return NULL;
}

/* Copy sysfs attributes of one PCI function into a <pci> element; `down` is its parent
 * bridge (downstream port) whose link caps the device's. */
static ncclResult_t pci_attrs(struct detect* d, struct braid_topo_xml* x, const char* dir, const char* down) {
  static const char* const attrs[][2] = {{"class", "class"},
                                         {"vendor", "vendor"},
                                         {"device", "device"},
                                         {"subsystem_vendor", "subsystem_vendor"},
                                         {"subsystem_device", "subsystem_device"}};
  char path[PATH_MAX], v[128], dv[128];
  for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", dir, attrs[i][0]);
    if (read_line(d, path, v, sizeof(v)) && v[0]) BRAID_CHECK(braid_topo_xml_set(x, attrs[i][1], v));
  }
  /* NCCL's loader wants both attributes: "" and 0 when sysfs does not say (read as x16 at
   * NCCL's default lane speed) */
  snprintf(path, sizeof(path), "%s/max_link_speed", dir);
  if (!read_line(d, path, v, sizeof(v)) || strcmp(v, "Unknown") == 0) v[0] = '\0';
  snprintf(path, sizeof(path), "%s/max_link_speed", down ? down : "");
  if (v[0] && down && read_line(d, path, dv, sizeof(dv)) && atof(dv) > 0 && atof(dv) < atof(v))
    snprintf(v, sizeof(v), "%s", dv);
  BRAID_CHECK(braid_topo_xml_set(x, "link_speed", v));
  snprintf(path, sizeof(path), "%s/max_link_width", dir);
  if (!read_line(d, path, v, sizeof(v)) || atoi(v) <= 0) snprintf(v, sizeof(v), "0");
  snprintf(path, sizeof(path), "%s/max_link_width", down ? down : "");
  if (atoi(v) > 0 && down && read_line(d, path, dv, sizeof(dv)) && atoi(dv) > 0 && atoi(dv) < atoi(v))
    snprintf(v, sizeof(v), "%s", dv);
  BRAID_CHECK(braid_topo_xml_set(x, "link_width", v));
  return ncclSuccess;
}

/* The <pci> element of a device: the sysfs path from the root complex decides its parents.
 * Returns the device's element (created or found). */
static ncclResult_t pci_place(struct detect* d, const char* busid, struct braid_topo_xml** x_p) {
  char link[PATH_MAX], real[PATH_MAX], numa_s[32], path[PATH_MAX];
  char comps[16][32];
  char dirs[16][PATH_MAX / 4];
  int n = 0;
  snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", d->root, busid);
  if (realpath(link, real) == NULL) {
    BRAID_WARN("Topology detection: %s: %s", link, strerror(errno));
    return ncclSystemError;
  }
  /* components after /sys/devices/pciDDDD:BB/ that look like bus ids */
  size_t rootlen = strlen(d->root);
  char* p = real + (strncmp(real, d->root, rootlen) == 0 ? rootlen : 0);
  char* walk = strstr(p, "/pci");
  if (walk == NULL) {
    BRAID_WARN("Topology detection: %s is not under a PCI root", real);
    return ncclSystemError;
  }
  walk = strchr(walk + 1, '/');
  while (walk && n < 16) {
    char* next = strchr(walk + 1, '/');
    size_t len = next ? (size_t)(next - walk - 1) : strlen(walk + 1);
    int64_t id;
    if (len < sizeof(comps[0])) {
      memcpy(comps[n], walk + 1, len);
      comps[n][len] = '\0';
      if (braid_topo_busid_parse(comps[n], &id) == ncclSuccess) {
        snprintf(dirs[n], sizeof(dirs[n]), "%.*s", (int)(walk + 1 + len - p), p);
        n++;
      }
    }
    walk = next;
  }
  if (n == 0 || strcmp(comps[n - 1], busid) != 0) {
    BRAID_WARN("Topology detection: cannot place %s (%s)", busid, real);
    return ncclSystemError;
  }
  snprintf(path, sizeof(path), "%s/numa_node", dirs[n - 1]);
  int numa = read_line(d, path, numa_s, sizeof(numa_s)) ? atoi(numa_s) : 0;
  struct braid_topo_xml* parent = find_cpu(d, numa < 0 ? 0 : numa);
  /* bridges: comps[0..n-2]; the first is the root port when there is more than the device */
  int first = n >= 2 ? 1 : 0;
  for (int i = first; i < n - 1; i += 2) { /* (upstream, downstream) pairs */
    struct braid_topo_xml* sw = find_busid(parent, comps[i]);
    if (sw == NULL) {
      BRAID_CHECK(braid_topo_xml_new(parent, "pci", &sw));
      BRAID_CHECK(braid_topo_xml_set(sw, "busid", comps[i]));
      BRAID_CHECK(pci_attrs(d, sw, dirs[i], NULL));
    }
    parent = sw;
  }
  struct braid_topo_xml* x = find_busid(parent, busid);
  if (x == NULL) {
    BRAID_CHECK(braid_topo_xml_new(parent, "pci", &x));
    BRAID_CHECK(braid_topo_xml_set(x, "busid", busid));
    BRAID_CHECK(pci_attrs(d, x, dirs[n - 1], n >= 2 ? dirs[n - 2] : NULL));
  }
  *x_p = x;
  return ncclSuccess;
}

/* ---- GPUs and NVLink ------------------------------------------------------------------ */

/* The NVML functions we use, loaded with dlopen (NVML's ABI; nvmlPciInfo_t v2+ keeps the
 * 32-byte busId at offset 36). */
struct nvml {
  void* lib;
  int (*init)(void);
  int (*shutdown)(void);
  int (*by_pci)(const char*, void**);
  int (*cc)(void*, int*, int*);
  int (*link_state)(void*, unsigned, int*);
  int (*link_remote)(void*, unsigned, void*);
};

static void nvml_open(struct nvml* m) {
  memset(m, 0, sizeof(*m));
  m->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (m->lib == NULL) return;
  *(void**)&m->init = dlsym(m->lib, "nvmlInit_v2");
  *(void**)&m->shutdown = dlsym(m->lib, "nvmlShutdown");
  *(void**)&m->by_pci = dlsym(m->lib, "nvmlDeviceGetHandleByPciBusId_v2");
  *(void**)&m->cc = dlsym(m->lib, "nvmlDeviceGetCudaComputeCapability");
  *(void**)&m->link_state = dlsym(m->lib, "nvmlDeviceGetNvLinkState");
  *(void**)&m->link_remote = dlsym(m->lib, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  if (!m->init || !m->shutdown || !m->by_pci || !m->cc || !m->link_state || !m->link_remote || m->init() != 0) {
    dlclose(m->lib);
    m->lib = NULL;
    return;
  }
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_GRAPH, "Topology detection: NVML loaded");
}

static void nvml_close(struct nvml* m) {
  if (m->lib == NULL) return;
  m->shutdown();
  dlclose(m->lib);
}

static ncclResult_t detect_gpu(struct detect* d, struct nvml* m, const char* busid, int dev, int sm, char (*all)[32],
                               int nall) {
  struct braid_topo_xml *pci, *gpu;
  void* h = NULL;
  BRAID_CHECK(pci_place(d, busid, &pci));
  BRAID_CHECK(braid_topo_xml_new(pci, "gpu", &gpu));
  if (m->lib && m->by_pci(busid, &h) != 0) h = NULL;
  if (sm <= 0 && h) {
    int major = 0, minor = 0;
    if (m->cc(h, &major, &minor) == 0) sm = major * 10 + minor;
  }
  BRAID_CHECK(braid_topo_xml_setf(gpu, "dev", "%d", dev));
  BRAID_CHECK(braid_topo_xml_setf(gpu, "sm", "%d", sm));
  BRAID_CHECK(braid_topo_xml_set(gpu, "rank", "-1"));
  BRAID_CHECK(braid_topo_xml_setf(gpu, "gdr", "%d", d->gdr));
  if (h == NULL) return ncclSuccess;
  char targets[18][32];
  int counts[18] = {0}, nt = 0;
  for (unsigned l = 0; l < 18; l++) {
    unsigned char info[256];
    int active = 0;
    if (m->link_state(h, l, &active) != 0 || !active) continue;
    memset(info, 0, sizeof(info));
    if (m->link_remote(h, l, info) != 0) continue;
    char remote[32];
    int64_t id;
    snprintf(remote, sizeof(remote), "%.31s", (const char*)info + 36);
    for (char* c = remote; *c; c++) *c = (char)tolower((unsigned char)*c);
    if (braid_topo_busid_parse(remote, &id) != ncclSuccess) continue;
    braid_topo_busid_format(id, remote, sizeof(remote)); /* NVML says 00000000:xx:xx.x */
    int t = 0;
    while (t < nt && strcmp(targets[t], remote) != 0) t++;
    if (t == nt) snprintf(targets[nt++], sizeof(targets[0]), "%s", remote);
    counts[t]++;
  }
  for (int t = 0; t < nt; t++) {
    struct braid_topo_xml* nv;
    int is_gpu = 0;
    for (int i = 0; i < nall; i++) is_gpu |= strcmp(all[i], targets[t]) == 0;
    BRAID_CHECK(braid_topo_xml_new(gpu, "nvlink", &nv));
    BRAID_CHECK(braid_topo_xml_set(nv, "target", targets[t]));
    BRAID_CHECK(braid_topo_xml_setf(nv, "count", "%d", counts[t]));
    BRAID_CHECK(braid_topo_xml_set(nv, "tclass", is_gpu ? "0x030200" : "0x068000"));
  }
  return ncclSuccess;
}

/* NVIDIA display (0x0300) and 3D (0x0302) controllers in sysfs, sorted by bus id. */
static int sysfs_gpus(const struct detect* d, char (*out)[32], int max) {
  char path[PATH_MAX], v[64];
  int n = 0;
  snprintf(path, sizeof(path), "%s/sys/bus/pci/devices", d->root);
  DIR* dir = opendir(path);
  if (dir == NULL) return 0;
  for (struct dirent* e; (e = readdir(dir)) != NULL && n < max;) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/vendor", e->d_name);
    if (!read_line(d, path, v, sizeof(v)) || strcmp(v, "0x10de") != 0) continue;
    snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", e->d_name);
    if (!read_line(d, path, v, sizeof(v)) || (strncmp(v, "0x0300", 6) != 0 && strncmp(v, "0x0302", 6) != 0)) continue;
    if (strlen(e->d_name) >= 32) continue;
    memcpy(out[n++], e->d_name, strlen(e->d_name) + 1);
  }
  closedir(dir);
  qsort(out, (size_t)n, 32, (int (*)(const void*, const void*))strcmp);
  return n;
}

/* ---- NICs ----------------------------------------------------------------------------- */

static int cmp_str(const void* a, const void* b) {
  return strcmp((const char*)a, (const char*)b);
}

/* Names in root+dir, sorted; only those with a `device` link (real hardware). */
static int list_devices(const struct detect* d, const char* dir, char (*out)[64], int max) {
  char path[PATH_MAX];
  int n = 0;
  snprintf(path, sizeof(path), "%s%s", d->root, dir);
  DIR* dp = opendir(path);
  if (dp == NULL) return 0;
  for (struct dirent* e; (e = readdir(dp)) != NULL && n < max;) {
    if (e->d_name[0] == '.' || strlen(e->d_name) >= 64) continue;
    snprintf(path, sizeof(path), "%s/%s/device", dir, e->d_name);
    if (!file_exists(d, path)) continue;
    memcpy(out[n++], e->d_name, strlen(e->d_name) + 1);
  }
  closedir(dp);
  qsort(out, (size_t)n, 64, cmp_str);
  return n;
}

/* The PCI bus id a class device hangs under ("" when none). */
static void class_busid(const struct detect* d, const char* dir, const char* name, char* out, size_t len) {
  char link[PATH_MAX], real[PATH_MAX];
  out[0] = '\0';
  snprintf(link, sizeof(link), "%s%s/%s/device", d->root, dir, name);
  if (realpath(link, real) == NULL) return;
  /* the last path component that is a bus id */
  for (char* c = real; (c = strchr(c, '/')) != NULL; c++) {
    char comp[32];
    int64_t id;
    size_t l = strcspn(c + 1, "/");
    if (l >= sizeof(comp)) continue;
    memcpy(comp, c + 1, l);
    comp[l] = '\0';
    if (braid_topo_busid_parse(comp, &id) == ncclSuccess) snprintf(out, len, "%s", comp);
  }
}

static ncclResult_t add_net(struct detect* d, const char* busid, const struct braid_topo_net_dev* nd, int dev) {
  struct braid_topo_xml *parent, *nic, *net;
  if (busid[0]) {
    BRAID_CHECK(pci_place(d, busid, &parent));
  } else {
    parent = find_cpu(d, 0);
  }
  nic = braid_topo_xml_child(parent, "nic");
  if (nic == NULL) BRAID_CHECK(braid_topo_xml_new(parent, "nic", &nic));
  BRAID_CHECK(braid_topo_xml_new(nic, "net", &net));
  BRAID_CHECK(braid_topo_xml_set(net, "name", nd->name));
  BRAID_CHECK(braid_topo_xml_setf(net, "dev", "%d", dev));
  BRAID_CHECK(braid_topo_xml_setf(net, "speed", "%d", nd->speed > 0 ? nd->speed : BRAID_TOPO_NET_SPEED_DEFAULT));
  BRAID_CHECK(braid_topo_xml_setf(net, "port", "%d", nd->port));
  BRAID_CHECK(braid_topo_xml_setf(net, "latency", "%g", (double)nd->latency));
  BRAID_CHECK(braid_topo_xml_setf(net, "guid", "0x%llx", (unsigned long long)nd->guid));
  BRAID_CHECK(braid_topo_xml_setf(net, "maxconn", "%d", nd->max_comms > 0 ? nd->max_comms : 65536));
  BRAID_CHECK(braid_topo_xml_setf(net, "gdr", "%d", nd->gdr));
  return ncclSuccess;
}

/* sysfs's guess, when no plugin was chosen: InfiniBand devices (port 1), else Ethernet. */
static ncclResult_t detect_nics(struct detect* d) {
  char names[64][64], busid[32], v[128], path[PATH_MAX];
  int n = list_devices(d, "/sys/class/infiniband", names, 64), dev = 0;
  for (int i = 0; i < n; i++) { /* InfiniBand / RoCE: port 1 */
    struct braid_topo_net_dev nd = {.port = 1, .gdr = d->gdr};
    snprintf(nd.name, sizeof(nd.name), "%.63s", names[i]);
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/rate", names[i]);
    if (read_line(d, path, v, sizeof(v))) nd.speed = (int)(atof(v) * 1000); /* "400 Gb/sec (4X NDR)" */
    snprintf(path, sizeof(path), "/sys/class/infiniband/%s/node_guid", names[i]);
    if (read_line(d, path, v, sizeof(v)) && v[0]) {
      unsigned long long g = 0;
      for (char* c = v; *c; c++)
        if (*c != ':')
          g = g * 16 +
              (unsigned long long)(isdigit((unsigned char)*c) ? *c - '0' : (tolower((unsigned char)*c) - 'a' + 10));
      nd.guid = g;
    }
    class_busid(d, "/sys/class/infiniband", names[i], busid, sizeof(busid));
    BRAID_CHECK(add_net(d, busid, &nd, dev++));
  }
  if (n > 0) return ncclSuccess; /* the IB plugin wins when it has devices */
  n = list_devices(d, "/sys/class/net", names, 64);
  for (int i = 0; i < n; i++) { /* Ethernet, through sockets */
    struct braid_topo_net_dev nd = {.port = 1};
    snprintf(path, sizeof(path), "/sys/class/net/%.63s/type", names[i]);
    if (read_line(d, path, v, sizeof(v)) && atoi(v) != 1) continue; /* ARPHRD_ETHER only */
    snprintf(path, sizeof(path), "/sys/class/net/%.63s/speed", names[i]);
    nd.speed = read_line(d, path, v, sizeof(v)) ? atoi(v) : 0;
    snprintf(nd.name, sizeof(nd.name), "%.63s", names[i]);
    class_busid(d, "/sys/class/net", names[i], busid, sizeof(busid));
    BRAID_CHECK(add_net(d, busid, &nd, dev++));
  }
  return ncclSuccess;
}

/* The bus id of a plugin's pciPath, as NCCL's ncclTopoFillNet reads it: the path's last
 * component when its subsystem is pci; "" (the first CPU) for a virtual device or none. */
static void plugin_busid(const struct detect* d, const struct braid_topo_net_dev* nd, char* out, size_t len) {
  char link[PATH_MAX], real[PATH_MAX];
  int64_t id;
  out[0] = '\0';
  if (nd->pci_path[0] == '\0') return;
  snprintf(link, sizeof(link), "%s%s/subsystem", d->root, nd->pci_path);
  const char* sub = realpath(link, real) ? strrchr(real, '/') : NULL;
  const char* last = strrchr(nd->pci_path, '/');
  if (sub == NULL || strcmp(sub, "/pci") != 0 || last == NULL || braid_topo_busid_parse(last + 1, &id) != ncclSuccess) {
    BRAID_INFO(BRAID_LOG_NET | BRAID_LOG_GRAPH,
               "Topology detection: network path (name = %s) %s is not a PCI device (%s). Attaching to first CPU",
               nd->name, nd->pci_path, sub ? sub + 1 : "no subsystem");
    return;
  }
  snprintf(out, len, "%s", last + 1);
}

/* The network plugin's devices (NCCL's ncclTopoPopulateNics), index = its dev. */
static ncclResult_t plugin_nics(struct detect* d, const struct braid_topo_nets* nets) {
  char busid[32];
  for (int i = 0; i < nets->ndevs; i++) {
    const struct braid_topo_net_dev* nd = &nets->devs[i];
    plugin_busid(d, nd, busid, sizeof(busid));
    BRAID_CHECK(add_net(d, busid, nd, i)); /* NCCL's "GPU Direct RDMA ... for HCA" line: net_gdr.c */
  }
  return ncclSuccess;
}

/* Children in bus id order (cpus in numa order are made in order), so output is stable. */
static int cmp_xml(const void* a, const void* b) {
  const char* x = braid_topo_xml_get(*(struct braid_topo_xml* const*)a, "busid");
  const char* y = braid_topo_xml_get(*(struct braid_topo_xml* const*)b, "busid");
  return strcmp(x ? x : "", y ? y : "");
}

static void sort_tree(struct braid_topo_xml* x) {
  if (strcmp(x->name, "pci") == 0 || strcmp(x->name, "cpu") == 0)
    qsort(x->kids, (size_t)x->nkids, sizeof(x->kids[0]), cmp_xml);
  for (int i = 0; i < x->nkids; i++) sort_tree(x->kids[i]);
}

ncclResult_t braid_topo_detect_ex(const struct braid_topo_detect_opts* opts, struct braid_topo_system** sys_p) {
  ncclResult_t res = ncclSuccess;
  struct detect d = {0};
  struct nvml m;
  char found[64][32];
  int ngpus = opts ? opts->ngpus : -1;
  d.root = opts && opts->sysfs_root ? opts->sysfs_root : "";
  if (ngpus > 64 || (ngpus > 0 && opts->bus_ids == NULL)) {
    BRAID_WARN("braid_topo_detect_ex: ngpus %d %s", ngpus, ngpus > 64 ? "> 64" : "without bus_ids");
    return ncclInvalidArgument;
  }
  memset(&m, 0, sizeof(m));
  BRAID_CHECK(braid_topo_xml_new(NULL, "#document", &d.doc));
  BRAID_CHECK_GOTO(braid_topo_xml_new(d.doc, "system", &d.sys), res, err_free);
  BRAID_CHECK_GOTO(braid_topo_xml_set(d.sys, "version", "1"), res, err_free);
  d.gdr = file_exists(&d, "/sys/kernel/mm/memory_peers/nv_mem/version") ||
          file_exists(&d, "/sys/kernel/mm/memory_peers/nv_mem_nc/version") ||
          file_exists(&d, "/sys/module/nvidia_peermem/version");
  BRAID_CHECK_GOTO(detect_cpus(&d), res, err_free);
  if (ngpus < 0) {
    ngpus = sysfs_gpus(&d, found, 64);
  } else {
    for (int i = 0; i < ngpus; i++) braid_topo_busid_format(opts->bus_ids[i], found[i], sizeof(found[i]));
  }
  if (ngpus > 0 && !(opts && opts->no_nvml)) nvml_open(&m);
  for (int i = 0; i < ngpus; i++) {
    int dev = opts && opts->ngpus > 0 && opts->devs ? opts->devs[i] : i;
    int sm = opts && opts->ngpus > 0 && opts->sms ? opts->sms[i] : 0;
    BRAID_CHECK_GOTO(detect_gpu(&d, &m, found[i], dev, sm, found, ngpus), res, err_nvml);
  }
  const struct braid_topo_nets* nets = opts ? opts->nets : NULL;
  BRAID_CHECK_GOTO(nets ? plugin_nics(&d, nets) : detect_nics(&d), res, err_nvml);
  nvml_close(&m);
  sort_tree(d.doc);
  BRAID_CHECK_GOTO(braid_topo_from_xml(d.doc, sys_p), res, err_free);
  if (nets != NULL) snprintf((*sys_p)->net_plugin, sizeof((*sys_p)->net_plugin), "%s", nets->plugin);
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_GRAPH, "Topology detected: %d GPUs, %d NICs (%s%s), %d CPUs%s", (*sys_p)->ngpus,
             (*sys_p)->nnics, nets ? "network " : "sysfs", nets ? nets->plugin : "", (*sys_p)->ncpus,
             m.lib ? ", NVML" : "");
  return ncclSuccess;
err_nvml:
  nvml_close(&m);
err_free:
  braid_topo_xml_free(d.doc);
  return res;
}

ncclResult_t braid_topo_detect_nets(const struct braid_topo_nets* nets, struct braid_topo_system** sys_p) {
  const char* file = braid_param_str(BRAID_PARAM_TOPO_FILE);
  struct braid_topo_detect_opts opts = {.ngpus = -1, .nets = nets};
  if (sys_p == NULL) {
    BRAID_WARN("braid_topo_detect: sys_p is NULL");
    return ncclInvalidArgument;
  }
  if (nets != NULL && (nets->plugin == NULL || nets->ndevs < 0 || (nets->ndevs > 0 && nets->devs == NULL))) {
    BRAID_WARN("braid_topo_detect_nets: bad network description (plugin %s, %d devices)",
               nets->plugin ? nets->plugin : "NULL", nets->ndevs);
    return ncclInvalidArgument;
  }
  if (file != NULL && file[0] != '\0') {
    if (access(file, R_OK) == 0) return braid_topo_load_merged(file, &opts, sys_p);
    /* NCCL says so at INFO level and detects the machine; braid says it louder */
    BRAID_WARN("NCCL_TOPO_FILE=%s cannot be read (%s); using the detected topology, as NCCL does", file,
               strerror(errno));
  }
  return braid_topo_detect_ex(&opts, sys_p);
}

ncclResult_t braid_topo_detect(struct braid_topo_system** sys_p) {
  return braid_topo_detect_nets(NULL, sys_p);
}
