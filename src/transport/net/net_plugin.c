/*
 * net_plugin.c - which network this process uses, decided once at its first network
 * connection (a failed choice is tried again next time).
 *
 * Candidates, in order: an external plugin, the built-in Socket network, then UCX (built when
 * UCX's headers were found; like NCCL, which has UCX only as an external plugin, braid uses it
 * only when NCCL_NET=UCX names it, since Socket always has a device). The external
 * library is NCCL_NET_PLUGIN: unset -> libnccl-net.so, "none" -> no library, a name with
 * ".so" -> that file, otherwise libnccl-net-<name>.so; it must export braidNetPlugin_v1
 * (net.h). A library exporting only NCCL's ABI (ncclNetPlugin_vN) is reported and skipped.
 * Every outcome is logged at INFO (NET), in NCCL's words where NCCL has some:
 * `NET/Plugin: Could not find: libnccl-net.so.`
 * NCCL_NET=<name> takes the candidate of that name (case-insensitive) or fails; otherwise the
 * first whose init succeeds with at least one device wins: `Using network Socket`.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/check.h"
#include "base/param.h"
#include "transport/net/net_internal.h"

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct braid_net_v1* chosen;
static const struct braid_net_v1* external;
static int external_tried;

/* NCCL's plugin symbols, newest first: recognised only to say why they are not loaded. */
static const char* const nccl_symbols[] = {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                                           "ncclNetPlugin_v8",  "ncclNetPlugin_v7",  "ncclNetPlugin_v6"};

static void plugin_library_name(const char* v, char* lib, size_t len) {
  if (v == NULL || v[0] == '\0')
    snprintf(lib, len, "libnccl-net.so");
  else if (strstr(v, ".so") != NULL)
    snprintf(lib, len, "%s", v);
  else
    snprintf(lib, len, "libnccl-net-%s.so", v);
}

/* The external plugin, or NULL (with the reason at INFO). */
static const struct braid_net_v1* plugin_load(void) {
  const char* v = braid_param_str(BRAID_PARAM_NET_PLUGIN);
  char lib[512];
  if (v != NULL && strcasecmp(v, "none") == 0) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: NCCL_NET_PLUGIN=none, using internal network plugin.");
    return NULL;
  }
  plugin_library_name(v, lib, sizeof(lib));
  void* dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    const char* why = dlerror();
    if (why == NULL || strstr(why, "No such file") != NULL || strstr(why, "cannot open shared object") != NULL)
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: Could not find: %s.", lib);
    else
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: Failed to load %s: %s", lib, why);
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: Using internal network plugin.");
    return NULL;
  }
  const struct braid_net_v1* net = dlsym(dl, BRAID_NET_PLUGIN_SYMBOL);
  if (net == NULL || net->name == NULL) {
    const char* nccl = NULL;
    for (size_t i = 0; i < sizeof(nccl_symbols) / sizeof(nccl_symbols[0]) && nccl == NULL; i++)
      if (dlsym(dl, nccl_symbols[i]) != NULL) nccl = nccl_symbols[i];
    if (nccl != NULL)
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET,
                 "NET/Plugin: %s exports %s (NCCL's net plugin ABI), which braid does not load; it needs %s. Using "
                 "internal network plugin.",
                 lib, nccl, BRAID_NET_PLUGIN_SYMBOL);
    else
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: %s has no %s symbol. Using internal network plugin.", lib,
                 BRAID_NET_PLUGIN_SYMBOL);
    dlclose(dl);
    return NULL;
  }
  /* Kept loaded for the life of the process: a plugin may have threads of its own. */
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/Plugin: Loaded net plugin %s (%s, v%d)", net->name, lib,
             BRAID_NET_PLUGIN_VERSION);
  return net;
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
  if (!external_tried) {
    external = plugin_load();
    external_tried = 1;
  }
  const struct braid_net_v1* cands[3];
  int n = 0;
  if (external != NULL) cands[n++] = external;
  cands[n++] = &braid_net_socket;
#if BRAID_UCX_BUILT
  cands[n++] = &braid_net_ucx;
#endif
  const char* want = braid_param_str(BRAID_PARAM_NET);
  int matched = 0;
  char why[400] = "";
  for (int i = 0; i < n && chosen == NULL; i++) {
    const struct braid_net_v1* net = cands[i];
    if (want != NULL && strcasecmp(want, net->name) != 0) continue;
    matched = 1;
    int ndev = 0;
    last = net->init(braid_debug_log);
    if (last == ncclSuccess) last = net->devices(&ndev);
    if (last != ncclSuccess) { /* the plugin said why: keep it for the final message */
      snprintf(why, sizeof(why), "%s: %s", net->name, braid_debug_last_error());
      continue;
    }
    if (ndev == 0) {
      BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/%s : No device found.", net->name);
      snprintf(why, sizeof(why), "%s: no device found", net->name);
      last = ncclSystemError;
      continue;
    }
    chosen = net;
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "Using network %s", net->name);
  }
  if (chosen == NULL) {
    if (want != NULL && !matched) {
      char names[200];
      int len = 0;
      for (int i = 0; i < n && len < (int)sizeof(names); i++)
        len += snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "", cands[i]->name);
      BRAID_WARN("NCCL_NET=%s: no network of that name (available: %s)", want, names);
      res = ncclInvalidArgument;
    } else {
      BRAID_WARN("No network can connect ranks on different nodes: %s%s could not start (%s)%s%s",
                 want != NULL ? "NCCL_NET=" : "every network plugin", want != NULL ? want : "",
                 ncclGetErrorString(last), why[0] ? "; " : "", why);
      res = last;
    }
    goto unlock;
  }
out:
  *net_p = chosen;
unlock:
  pthread_mutex_unlock(&plugin_lock);
  return res;
}
