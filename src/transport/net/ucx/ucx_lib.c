/*
 * ucx_lib.c - loading UCX at run time (dlopen of libucp.so.0 and libucs.so.0: libnccl.so.2
 * never links them), the process's one UCX context and worker (made with the first
 * communicator that uses UCX, destroyed with the last), and failure bookkeeping.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "transport/net/ucx/ucx.h"

struct ucx_global ucx = {.efd = -1};
pthread_mutex_t ucx_lock = PTHREAD_MUTEX_INITIALIZER;

#define UCX_SYM(lib, field, name)               \
  do {                                          \
    *(void**)&ucx.api.field = dlsym(lib, name); \
    if (ucx.api.field == NULL) {                \
      missing = name;                           \
      goto bad;                                 \
    }                                           \
  } while (0)

static ncclResult_t ucx_load_locked(void) {
  static int tried;
  static ncclResult_t result = ncclSystemError;
  const char* missing = NULL;
  if (tried) return result;
  tried = 1;
  void* ucs = dlopen("libucs.so.0", RTLD_NOW | RTLD_LOCAL);
  void* ucp = ucs != NULL ? dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL) : NULL;
  if (ucp == NULL) {
    const char* why = dlerror();
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/UCX : cannot load UCX (libucs.so.0, libucp.so.0): %s",
               why ? why : "not found");
    if (ucs != NULL) dlclose(ucs);
    return result;
  }
  UCX_SYM(ucp, config_read, "ucp_config_read");
  UCX_SYM(ucp, config_release, "ucp_config_release");
  UCX_SYM(ucp, config_modify, "ucp_config_modify");
  UCX_SYM(ucp, config_print, "ucp_config_print");
  UCX_SYM(ucp, init_version, "ucp_init_version");
  UCX_SYM(ucp, cleanup, "ucp_cleanup");
  UCX_SYM(ucp, get_version, "ucp_get_version");
  UCX_SYM(ucp, worker_create, "ucp_worker_create");
  UCX_SYM(ucp, worker_destroy, "ucp_worker_destroy");
  UCX_SYM(ucp, worker_get_address, "ucp_worker_get_address");
  UCX_SYM(ucp, worker_release_address, "ucp_worker_release_address");
  UCX_SYM(ucp, worker_progress, "ucp_worker_progress");
  UCX_SYM(ucp, worker_get_efd, "ucp_worker_get_efd");
  UCX_SYM(ucp, worker_arm, "ucp_worker_arm");
  UCX_SYM(ucp, ep_create, "ucp_ep_create");
  UCX_SYM(ucp, ep_close_nbx, "ucp_ep_close_nbx");
  UCX_SYM(ucp, tag_send_nbx, "ucp_tag_send_nbx");
  UCX_SYM(ucp, tag_recv_nbx, "ucp_tag_recv_nbx");
  UCX_SYM(ucp, tag_recv_request_test, "ucp_tag_recv_request_test");
  UCX_SYM(ucp, request_check_status, "ucp_request_check_status");
  UCX_SYM(ucp, request_cancel, "ucp_request_cancel");
  UCX_SYM(ucp, request_free, "ucp_request_free");
  UCX_SYM(ucp, mem_map, "ucp_mem_map");
  UCX_SYM(ucp, mem_unmap, "ucp_mem_unmap");
  UCX_SYM(ucs, status_string, "ucs_status_string");
  unsigned major = 0, minor = 0, release = 0;
  ucx.api.get_version(&major, &minor, &release);
  if (major != UCP_API_MAJOR || minor < 9) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/UCX : UCX %u.%u.%u is too old (braid was built against %d.%d)",
               major, minor, release, UCP_API_MAJOR, UCP_API_MINOR);
    return result; /* kept loaded: UCX does not like being unloaded */
  }
  ucx.loaded = 1;
  result = ncclSuccess;
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/UCX : Loaded UCX %u.%u.%u", major, minor, release);
  return result;
bad:
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/UCX : libucp.so.0 lacks %s: not using UCX", missing);
  return result;
}

ncclResult_t ucx_load(void) {
  pthread_mutex_lock(&ucx_lock);
  ncclResult_t res = ucx_load_locked();
  int n = 0;
  if (res == ncclSuccess && ucx.ifname[0] == '\0') {
    res = braid_socket_find_interfaces(NULL, ucx.ifname, &ucx.ifaddr, 1, &n);
    if (res == ncclSuccess && n == 0) ucx.ifname[0] = '\0'; /* no device */
  }
  pthread_mutex_unlock(&ucx_lock);
  return res;
}

const char* ucx_status_str(ucs_status_t s) {
  return ucx.loaded ? ucx.api.status_string(s) : "UCX not loaded";
}

static void worker_destroy(void) {
  if (ucx.address != NULL) ucx.api.worker_release_address(ucx.worker, ucx.address);
  if (ucx.worker != NULL) ucx.api.worker_destroy(ucx.worker);
  if (ucx.context != NULL) ucx.api.cleanup(ucx.context);
  ucx.address = NULL;
  ucx.worker = NULL;
  ucx.context = NULL;
  ucx.efd = -1;
}

/* UCX's value of one setting (environment or ucx.conf), as ucp_config_print writes it; 0 when
 * this UCX has no such setting. */
static int config_value(const ucp_config_t* config, const char* name, char* value, size_t len) {
  char *text = NULL, key[64];
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (f == NULL) return 0;
  ucx.api.config_print(config, f, NULL, UCS_CONFIG_PRINT_CONFIG);
  fclose(f);
  int n = snprintf(key, sizeof(key), "UCX_%s=", name), found = 0;
  for (const char* line = text; line != NULL && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
    if (strncmp(line, key, n) != 0) continue;
    snprintf(value, len, "%.*s", (int)strcspn(line + n, "\n"), line + n);
    found = 1;
    break;
  }
  free(text);
  return found;
}

/* Eager messages only (UCX_RNDV_THRESH=inf), unless the user set UCX_RNDV_THRESH (ucx.conf or
 * the environment). A rendezvous request names the receiver's endpoint by its address (error
 * mode NONE, ucx_conn.c: no indirect IDs). When a sender dies with requests still queued to a
 * receiver, the receiver's first read of the dead sender's memory fails and UCX 1.13 destroys
 * that endpoint (not exposed to the user: "destroy endpoint ... due to peer failure"); the next
 * queued request then reads freed memory and aborts the process in ucp_rndv_receive
 * ("(*ep_p)->worker == worker"). Eager messages name no endpoint. UCX_PROTO_INDIRECT_ID=on
 * instead trades it for an assertion at ucp_worker_destroy (sends to a dead peer are never
 * purged in mode NONE). docs/notes/2026-12-02-ucxkill.md has the evidence. */
static void config_rndv(ucp_config_t* config) {
  char v[32];
  if (!config_value(config, "RNDV_THRESH", v, sizeof(v))) {
    BRAID_WARN("NET/UCX : this UCX has no UCX_RNDV_THRESH: a peer's death may crash UCX in a survivor");
  } else if (strcmp(v, "auto") != 0) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET,
               "NET/UCX : UCX_RNDV_THRESH=%s (the user's): with rendezvous, a peer's "
               "death can crash UCX 1.13 in a survivor (ucp_rndv_receive)",
               v);
  } else if (ucx.api.config_modify(config, "RNDV_THRESH", "inf") == UCS_OK) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET,
               "NET/UCX : UCX_RNDV_THRESH=inf (set by braid: eager messages only, so "
               "that a peer's death cannot crash UCX 1.13 in a survivor; set UCX_RNDV_THRESH to override)");
  } else {
    BRAID_WARN("NET/UCX : ucp_config_modify(RNDV_THRESH, inf) failed: a peer's death may crash UCX in a survivor");
  }
}

static ncclResult_t ucx_check(ucs_status_t s, const char* call) {
  if (s == UCS_OK) return ncclSuccess;
  BRAID_WARN("NET/UCX : %s failed: %s", call, ucx_status_str(s));
  return ncclSystemError;
}

ncclResult_t ucx_worker_get(void) {
  ncclResult_t res = ncclSuccess;
  if (ucx.refs++ > 0) return ncclSuccess;
  ucp_config_t* config = NULL;
  ucp_params_t params;
  ucp_worker_params_t wp;
  memset(&params, 0, sizeof(params));
  memset(&wp, 0, sizeof(wp));
  BRAID_CHECK_GOTO(ucx_check(ucx.api.config_read(NULL, NULL, &config), "ucp_config_read"), res, err);
  config_rndv(config);
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  res = ucx_check(ucx.api.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &ucx.context), "ucp_init");
  ucx.api.config_release(config);
  if (res != ncclSuccess) goto err;
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  BRAID_CHECK_GOTO(ucx_check(ucx.api.worker_create(ucx.context, &wp, &ucx.worker), "ucp_worker_create"), res, err);
  BRAID_CHECK_GOTO(ucx_check(ucx.api.worker_get_efd(ucx.worker, &ucx.efd), "ucp_worker_get_efd"), res, err);
  BRAID_CHECK_GOTO(
      ucx_check(ucx.api.worker_get_address(ucx.worker, &ucx.address, &ucx.address_len), "ucp_worker_get_address"), res,
      err);
  if (ucx.address_len > UCX_ADDR_MAX) {
    BRAID_WARN("NET/UCX : the worker's address is %zu bytes, more than braid sends (%d)", ucx.address_len,
               UCX_ADDR_MAX);
    res = ncclSystemError;
    goto err;
  }
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/UCX : worker ready (address %zu bytes); control sockets on %s",
             ucx.address_len, ucx.ifname);
  return ncclSuccess;
err:
  worker_destroy();
  ucx.refs--;
  return res;
}

void ucx_worker_put(void) {
  if (ucx.refs <= 0 || --ucx.refs > 0) return;
  worker_destroy();
}

ncclResult_t ucx_fail_status(struct ucx_comm* c, ucs_status_t s, const char* what) {
  switch (s) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_MESSAGE_TRUNCATED:
    case UCS_ERR_CANCELED:
    case UCS_ERR_TIMED_OUT:
      return ucx_fail(c, "UCX %s failed: %s", what, ucx_status_str(s));
    default:
      BRAID_WARN("NET/UCX : %s failed: %s", what, ucx_status_str(s));
      ucx_fail(c, "UCX %s failed: %s", what, ucx_status_str(s));
      return ncclSystemError;
  }
}
