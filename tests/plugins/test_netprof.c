/*
 * test_netprof.c - a test-only NCCL net plugin (ncclNetPlugin_v10, "BraidProfProbe") that
 * reports profiler events the way NCCL's own Socket plugin does: it wraps braid's Socket
 * network exported under NCCL's ABI (libnccl-net-braid.so, next to this library) and, for
 * every isend / irecv that came with a profiler handle, starts a NetPlugin event through the
 * init's profiler callback (plugin id NCCL_PROFILER_NET_TYPE_SOCK | 1, a socket descriptor
 * {type, fd -1, op 0 send / 1 recv, length}), updates and stops it when test() reports the
 * request done; braid's extensions (braidNetExt_v1) are the inner library's. The Makefile builds it as
 * build/lib/libnccl-net-braidtest-prof.so; tests/unit/test_profiler_proxy.c loads it through braid's adapter (NetPlugin
 * events nest under the ProxyStep that posted the request).
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transport/net/plugin/nccl_net_abi.h"

#define EXPORT __attribute__((visibility("default")))
#define NET_TYPE_SOCK_V1 ((2u << 16) | 1u) /* NCCL_PROFILER_NET_TYPE_SOCK, struct version 1 */
#define MAX_LIVE 1024

struct sock_descr { /* ncclProfilerNetSockDescr_v1_t's layout */
  uint8_t type;     /* ncclProfileSocket = 1 */
  struct {
    int fd, op;
    size_t length;
  } sock;
};

static struct nccl_net_v10 inner;
static nccl_abi_prof_cb_t prof_cb;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct live {
  void* req;
  void* event;
  struct sock_descr d;
} live[MAX_LIVE];

EXPORT struct nccl_net_v10 ncclNetPlugin_v10;
EXPORT struct braid_net_ext_v1 braidNetExt_v1; /* the inner one's (a peer's clean close, waitFds) */

static void event_start(void* req, void* phandle, int op, size_t length) {
  if (prof_cb == NULL || phandle == NULL || req == NULL) return;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_LIVE; i++) {
    if (live[i].req != NULL) continue;
    live[i].req = req;
    live[i].d = (struct sock_descr){1, {-1, op, length}};
    prof_cb(&live[i].event, 0 /* ncclProfilerNetEventStart */, phandle, NET_TYPE_SOCK_V1, &live[i].d);
    break;
  }
  pthread_mutex_unlock(&lock);
}

static void event_stop(void* req) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_LIVE; i++) {
    if (live[i].req != req) continue;
    if (live[i].event != NULL) prof_cb(&live[i].event, 3 /* UpdateAndStop */, NULL, NET_TYPE_SOCK_V1, &live[i].d);
    live[i].req = NULL, live[i].event = NULL;
    break;
  }
  pthread_mutex_unlock(&lock);
}

static ncclResult_t p_init(nccl_abi_logger_t log, nccl_abi_prof_cb_t prof) {
  prof_cb = prof;
  return inner.init(log, prof);
}
static ncclResult_t p_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** req) {
  ncclResult_t res = inner.isend(comm, data, size, tag, mhandle, phandle, req);
  if (res == ncclSuccess) event_start(*req, phandle, 0, size);
  return res;
}
static ncclResult_t p_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                            void** req) {
  ncclResult_t res = inner.irecv(comm, n, data, sizes, tags, mhandles, phandles, req);
  if (res == ncclSuccess && n > 0) event_start(*req, phandles != NULL ? phandles[0] : NULL, 1, sizes[0]);
  return res;
}
static ncclResult_t p_test(void* req, int* done, int* sizes) {
  ncclResult_t res = inner.test(req, done, sizes);
  if (res != ncclSuccess || *done) event_stop(req);
  return res;
}

/* At dlopen, before the loader reads the table: braid's Socket network beside this file. */
__attribute__((constructor)) static void wrap(void) {
  Dl_info info;
  char dir[PATH_MAX], path[PATH_MAX + 32];
  if (dladdr((void*)wrap, &info) == 0 || info.dli_fname == NULL) return;
  snprintf(dir, sizeof(dir), "%s", info.dli_fname);
  snprintf(path, sizeof(path), "%s/libnccl-net-braid.so", dirname(dir));
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const struct nccl_net_v10* t = dl != NULL ? dlsym(dl, "ncclNetPlugin_v10") : NULL;
  if (t == NULL) return; /* the table stays empty: the adapter refuses it and says so */
  inner = *t;
  const struct braid_net_ext_v1* ext = dlsym(dl, "braidNetExt_v1");
  if (ext != NULL) braidNetExt_v1 = *ext;
  ncclNetPlugin_v10 = inner;
  ncclNetPlugin_v10.name = "BraidProfProbe";
  ncclNetPlugin_v10.init = p_init;
  ncclNetPlugin_v10.isend = p_isend;
  ncclNetPlugin_v10.irecv = p_irecv;
  ncclNetPlugin_v10.test = p_test;
}
