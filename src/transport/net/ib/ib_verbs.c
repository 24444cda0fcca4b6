/*
 * ib_verbs.c - dlopen of libibverbs (ib_verbs.h).
 */
#include "transport/net/ib/ib_verbs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "base/check.h"
#include "base/param.h"

static pthread_mutex_t ibv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct braid_ibv ibv;
static int ibv_state; /* 0 untried, 1 loaded, -1 failed */
static void* ibv_dl;
static char ibv_lib[512];

#define IBV_SYM(field, name)                   \
  do {                                         \
    *(void**)&ibv.field = dlsym(ibv_dl, name); \
    if (ibv.field == NULL) {                   \
      missing = name;                          \
      goto bad;                                \
    }                                          \
  } while (0)

static void load_locked(void) {
  const char* missing = NULL;
  const char* v = braid_param_str(BRAID_PARAM_IB_VERBS_LIBRARY);
  snprintf(ibv_lib, sizeof(ibv_lib), "%s", v != NULL && v[0] ? v : "libibverbs.so.1");
  ibv_state = -1;
  ibv_dl = dlopen(ibv_lib, RTLD_NOW | RTLD_LOCAL);
  if (ibv_dl == NULL) {
    const char* why = dlerror();
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB : cannot load %s: %s", ibv_lib, why ? why : "not found");
    return;
  }
  IBV_SYM(get_device_list, "ibv_get_device_list");
  IBV_SYM(free_device_list, "ibv_free_device_list");
  IBV_SYM(get_device_name, "ibv_get_device_name");
  IBV_SYM(open_device, "ibv_open_device");
  IBV_SYM(close_device, "ibv_close_device");
  IBV_SYM(query_device, "ibv_query_device");
  IBV_SYM(query_port, "ibv_query_port");
  IBV_SYM(query_gid, "ibv_query_gid");
  IBV_SYM(alloc_pd, "ibv_alloc_pd");
  IBV_SYM(dealloc_pd, "ibv_dealloc_pd");
  IBV_SYM(create_cq, "ibv_create_cq");
  IBV_SYM(destroy_cq, "ibv_destroy_cq");
  IBV_SYM(create_qp, "ibv_create_qp");
  IBV_SYM(destroy_qp, "ibv_destroy_qp");
  IBV_SYM(modify_qp, "ibv_modify_qp");
  IBV_SYM(reg_mr, "ibv_reg_mr");
  IBV_SYM(dereg_mr, "ibv_dereg_mr");
  *(void**)&ibv.query_gid_ex = dlsym(ibv_dl, "_ibv_query_gid_ex");
  *(void**)&ibv.reg_dmabuf_mr = dlsym(ibv_dl, "ibv_reg_dmabuf_mr");
  ibv_state = 1;
  return;
bad:
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_NET, "NET/IB : %s lacks %s: not using it", ibv_lib, missing);
  dlclose(ibv_dl);
  ibv_dl = NULL;
}

ncclResult_t braid_ibv_load(const struct braid_ibv** ibv_p, const char** lib_p) {
  pthread_mutex_lock(&ibv_lock);
  if (ibv_state == 0) load_locked();
  int ok = ibv_state == 1;
  if (lib_p != NULL) *lib_p = ibv_lib;
  pthread_mutex_unlock(&ibv_lock);
  *ibv_p = ok ? &ibv : NULL;
  return ok ? ncclSuccess : ncclSystemError;
}

void braid_ibv_reset(void) {
  pthread_mutex_lock(&ibv_lock);
  if (ibv_dl != NULL) dlclose(ibv_dl);
  ibv_dl = NULL;
  ibv_state = 0;
  pthread_mutex_unlock(&ibv_lock);
}
