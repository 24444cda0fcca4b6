/*
 * net_plugin.c - which network this process uses, decided once: at the init of the first
 * communicator across nodes (before its topology, whose NICs are the plugin's devices:
 * braid_net_topo_devices), else at the first network connection (a failed choice is tried
 * again next time).
 *
 * Candidates, in order: an external plugin, the built-in Socket network, then UCX (built when
 * UCX's headers were found; like NCCL, which has UCX only as an external plugin, braid uses it
 * only when NCCL_NET=UCX names it, since Socket always has a device); IB (built with
 * libibverbs' headers) comes before Socket, as in NCCL, when it starts with a port
 * (NCCL_IB_DISABLE=1: never). External
 * libraries come from NCCL_NET_PLUGIN with NCCL's rules (base/plugin_open.h): unset ->
 * libnccl-net.so, "none" -> no library, otherwise a comma-separated list (NCCL 2.27+), each
 * a path, a library name or <name> for libnccl-net-<name>.so, tried in order; the first that
 * loads and starts with at least one device (and is NCCL_NET's choice, when set) is the
 * external plugin, and the rest of the list is not opened. A library exports braid's ABI
 * (braidNetPlugin_v1, net.h) or NCCL's (ncclNetPlugin_v11 .. _v6, adapted by
 * plugin/nccl_adapt.c). Every outcome is logged at INFO (INIT|NET), in NCCL's words where
 * NCCL has some: `NET/Plugin: Could not find: libnccl-net.so`, `NET/Plugin: Loaded net plugin
 * X (v11)`. NCCL_NET=<name> takes the candidate of that name (case-insensitive) or fails;
 * otherwise the first whose init succeeds with a device wins: `Using network Socket`.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/check.h"
#include "base/param.h"
#include "base/plugin_open.h"
#include "transport/net/net_internal.h"
#include "transport/net/net_topo.h"
#include "transport/net/plugin/nccl_adapt.h"

#define MAX_LISTED 14 /* NCCL: 16 plugins, 2 of them internal */

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct braid_net_v1* chosen;
static const struct braid_net_v1* external;
static int external_tried;
/* What the external libraries' trial found, for the final message of later calls too. */
static int ext_matched;
static ncclResult_t ext_last = ncclSystemError;
static char ext_why[400];
static char ext_names[256];

/* The table a library exports (braid's ABI first), or NULL with INFO saying why. */
static const struct braid_net_v1* table_of(void* dl, const char* path) {
  const struct braid_net_v1* net = dlsym(dl, BRAID_NET_PLUGIN_SYMBOL);
  if (net != NULL && net->name != NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: Loaded net plugin %s (%s, braid v%d)", net->name, path,
               BRAID_NET_PLUGIN_VERSION);
    return net;
  }
  return braid_net_nccl_adapt(dl, path, BRAID_NCCL_NET_MAX_VERSION, NULL);
}

/* init + devices: 1 when it can carry traffic; else the reason in ext_why / *last. */
static int net_start(const struct braid_net_v1* net, ncclResult_t* last, char* why, size_t len) {
  int ndev = 0;
  *last = net->init(braid_debug_log);
  if (*last == ncclSuccess) *last = net->devices(&ndev);
  if (*last != ncclSuccess) { /* the plugin said why: keep it for the final message */
    snprintf(why, len, "%s: %s", net->name, braid_debug_last_error());
    return 0;
  }
  if (ndev == 0) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/%s : No device found.", net->name);
    snprintf(why, len, "%s: no device found", net->name);
    *last = ncclSystemError;
    return 0;
  }
  return 1;
}

/* The first listed library that loads, is NCCL_NET's choice and starts; NULL. */
static const struct braid_net_v1* externals_load(const char* want) {
  const char* v = braid_param_str(BRAID_PARAM_NET_PLUGIN);
  char list[1024], *save = NULL, lib[512];
  int n = 0;
  if (v != NULL && strcasecmp(v, "none") == 0) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: NCCL_NET_PLUGIN=none, using internal network plugin.");
    return NULL;
  }
  /* the names, in order; unset or empty: one NULL (libnccl-net.so) */
  const char* names[MAX_LISTED + 1];
  snprintf(list, sizeof(list), "%s", v != NULL ? v : "");
  for (char* t = strtok_r(list, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
    if (n == MAX_LISTED) {
      BRAID_INFO(BRAID_LOG_NET | BRAID_LOG_ENV, "NCCL_NET_PLUGIN list contains more than %d plugins, ignoring the rest",
                 MAX_LISTED);
      break;
    }
    names[n++] = t;
  }
  if (n == 0) names[n++] = NULL;
  for (int i = 0; i < n; i++) {
    const char* name = names[i];
    void* dl = braid_plugin_open("NET", "libnccl-net", BRAID_LOG_INIT | BRAID_LOG_NET, name, lib, sizeof(lib));
    if (dl == NULL) continue;
    const char* path = braid_plugin_path(dl, lib);
    const struct braid_net_v1* net = table_of(dl, path);
    if (net == NULL) {
      dlclose(dl);
      continue;
    }
    size_t used = strlen(ext_names);
    snprintf(ext_names + used, sizeof(ext_names) - used, "%s, ", net->name);
    if (want != NULL && strcasecmp(want, net->name) != 0) {
      dlclose(dl); /* nothing of it ran */
      continue;
    }
    ext_matched = 1;
    if (net_start(net, &ext_last, ext_why, sizeof(ext_why))) return net;
    /* Kept loaded for the life of the process (as one that starts): it may have threads. */
  }
  return NULL;
}

ncclResult_t braid_net_plugin_use(const struct braid_net_v1* net) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&plugin_lock);
  chosen = NULL;
  if (net != NULL && (res = net->init(braid_debug_log)) == ncclSuccess) chosen = net;
  pthread_mutex_unlock(&plugin_lock);
  return res;
}

ncclResult_t braid_net_plugin_get(const struct braid_net_v1** net_p) {
  ncclResult_t res = ncclSuccess, last = ncclSystemError;
  pthread_mutex_lock(&plugin_lock);
  if (chosen != NULL) goto out;
  const char* want = braid_param_str(BRAID_PARAM_NET);
  if (!external_tried) {
    external = externals_load(want);
    external_tried = 1;
  }
  int matched = 0;
  char why[400] = "";
  if (external != NULL) chosen = external; /* started above (or at an earlier call) */
#if BRAID_IB_BUILT
  /* IB before Socket, as NCCL: unset NCCL_NET takes it when it starts with a port */
  if (chosen == NULL && (want == NULL || strcasecmp(want, braid_net_ib.name) == 0)) {
    matched = want != NULL;
    if (net_start(&braid_net_ib, &last, why, sizeof(why))) chosen = &braid_net_ib;
  }
#define IB_NAME ", IB"
#else
#define IB_NAME ""
#endif
  if (chosen == NULL && (want == NULL || strcasecmp(want, braid_net_socket.name) == 0)) {
    matched = 1;
    if (net_start(&braid_net_socket, &last, why, sizeof(why))) chosen = &braid_net_socket;
  }
#if BRAID_UCX_BUILT
  if (chosen == NULL && want != NULL && strcasecmp(want, braid_net_ucx.name) == 0) {
    matched = 1;
    if (net_start(&braid_net_ucx, &last, why, sizeof(why))) chosen = &braid_net_ucx;
  }
#define UCX_NAME ", UCX"
#else
#define UCX_NAME ""
#endif
  if (chosen != NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "Using network %s", chosen->name);
    goto out;
  }
  if (ext_matched && !matched) {
    last = ext_last;
    snprintf(why, sizeof(why), "%s", ext_why);
  }
  if (want != NULL && !matched && !ext_matched) {
    BRAID_WARN("NCCL_NET=%s: no network of that name (available: %s%s%s%s)", want, ext_names, braid_net_socket.name,
               IB_NAME, UCX_NAME);
    res = ncclInvalidArgument;
  } else {
    BRAID_WARN("No network can connect ranks on different nodes: %s%s could not start (%s)%s%s",
               want != NULL ? "NCCL_NET=" : "every network plugin", want != NULL ? want : "", ncclGetErrorString(last),
               why[0] ? "; " : "", why);
    res = last;
  }
  goto unlock;
out:
  *net_p = chosen;
unlock:
  pthread_mutex_unlock(&plugin_lock);
  return res;
}

ncclResult_t braid_net_topo_devices(struct braid_topo_nets* nets, struct braid_topo_net_dev** devs_p) {
  ncclResult_t res = ncclSuccess;
  const struct braid_net_v1* net;
  struct braid_topo_net_dev* devs = NULL;
  int ndev = 0;
  BRAID_CHECK(braid_net_plugin_get(&net));
  BRAID_CHECK(net->devices(&ndev));
  BRAID_CALLOC_GOTO(devs, ndev, res, err);
  for (int i = 0; i < ndev; i++) {
    struct braid_net_props p;
    memset(&p, 0, sizeof(p)); /* a plugin that fills fewer fields declares nothing more */
    if ((res = net->getProperties(i, &p)) != ncclSuccess) {
      BRAID_WARN("NET/%s : getProperties of device %d failed: %s", net->name, i, ncclGetErrorString(res));
      goto err;
    }
    struct braid_topo_net_dev* d = &devs[i];
    snprintf(d->name, sizeof(d->name), "%s", p.name ? p.name : "");
    snprintf(d->pci_path, sizeof(d->pci_path), "%s", p.pciPath ? p.pciPath : "");
    d->guid = p.guid;
    d->speed = p.speed;
    d->port = p.port;
    d->latency = p.latency > 0 ? p.latency : 0;
    d->max_comms = p.maxComms;
    d->gdr = (p.ptrSupport & (BRAID_NET_PTR_CUDA | BRAID_NET_PTR_DMABUF)) != 0;
    BRAID_INFO(BRAID_LOG_NET | BRAID_LOG_GRAPH, "NET/%s : device %d %s speed %d Mb/s latency %g us port %d%s%s",
               net->name, i, d->name, d->speed, (double)d->latency, d->port, d->pci_path[0] ? " " : "", d->pci_path);
  }
  nets->plugin = net->name;
  nets->ndevs = ndev;
  nets->devs = devs;
  *devs_p = devs;
  return ncclSuccess;
err:
  free(devs);
  return res;
}
