/*
 * ucx_io.c - requests of the UCX net plugin: tagged sends and receives on the shared worker,
 * test (which progresses the worker and watches the control socket), what an idle proxy may
 * sleep on (the worker's armed wake-up descriptor and the control socket), memory
 * registration (ucp_mem_map), goodbye / abort notices and status. Every entry point takes
 * ucx_lock. Requests of a comm sit in a ring in posting order.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/check.h"
#include "transport/net/ucx/ucx.h"

/* ---- requests ------------------------------------------------------------------------------ */

static struct ucx_req* req_new(struct ucx_comm* c) {
  if (c->req_tail - c->req_head >= BRAID_NET_MAX_REQUESTS) return NULL;
  struct ucx_req* r = &c->reqs[c->req_tail++ % BRAID_NET_MAX_REQUESTS];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = 1;
  return r;
}

/* Hand a send to UCX (under ucx_lock; the endpoint exists). */
static ncclResult_t send_post(struct ucx_comm* c, struct ucx_req* r) {
  ucp_request_param_t param;
  memset(&param, 0, sizeof(param));
  if (r->mr != NULL && (char*)r->data >= r->mr->base && (char*)r->data + r->size <= r->mr->base + r->mr->size) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH; /* the FIFO; a direct send's user memory is not registered */
    param.memh = r->mr->memh;
  }
  r->deferred = 0;
  ucs_status_ptr_t p = ucx.api.tag_send_nbx(c->ep, r->data, r->size, c->tag, &param);
  if (UCS_PTR_IS_ERR(p)) return ucx_fail_status(c, UCS_PTR_STATUS(p), "ucp_tag_send_nbx");
  r->ucp = p;
  return ncclSuccess;
}

/* Sender: once the endpoint exists, post what waited for it, in order (under ucx_lock). */
static ncclResult_t send_ready(struct ucx_comm* c) {
  int was = c->ep != NULL;
  int ready = ucx_sender_ready(c);
  if (ready < 0) return ncclRemoteError;
  if (!ready || was) return ncclSuccess;
  for (uint64_t i = c->req_head; i < c->req_tail; i++) {
    struct ucx_req* r = &c->reqs[i % BRAID_NET_MAX_REQUESTS];
    if (r->used && r->deferred) BRAID_CHECK(send_post(c, r));
  }
  return ncclSuccess;
}

ncclResult_t ucx_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  struct ucx_comm* c = comm;
  ncclResult_t res = ncclSuccess;
  *request = NULL;
  pthread_mutex_lock(&ucx_lock);
  if (c->ctl.failed || (res = send_ready(c)) != ncclSuccess) {
    res = ncclRemoteError;
    goto out;
  }
  struct ucx_req* r = req_new(c);
  if (r == NULL) goto out;
  r->is_send = 1;
  r->data = data;
  r->size = size;
  r->mr = mhandle;
  r->deferred = 1;
  if (c->ep != NULL && (res = send_post(c, r)) != ncclSuccess) {
    c->req_tail--;
    goto out;
  }
  c->ctl.posted_msgs++;
  *request = r;
out:
  pthread_mutex_unlock(&ucx_lock);
  return res;
}

ncclResult_t ucx_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  struct ucx_comm* c = comm;
  ncclResult_t res = ncclSuccess;
  *request = NULL;
  if (n != 1) {
    BRAID_WARN("NET/UCX : irecv of %d buffers (maxRecvs is 1)", n);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&ucx_lock);
  if (c->ctl.failed) {
    res = ncclRemoteError;
    goto out;
  }
  struct ucx_req* r = req_new(c);
  if (r == NULL) goto out;
  const struct ucx_mr* mr = mhandles != NULL ? mhandles[0] : NULL;
  ucp_request_param_t param;
  memset(&param, 0, sizeof(param));
  if (mr != NULL && (char*)data[0] >= mr->base && (char*)data[0] + sizes[0] <= mr->base + mr->size) {
    param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    param.memh = mr->memh;
  }
  ucs_status_ptr_t p = ucx.api.tag_recv_nbx(ucx.worker, data[0], sizes[0], c->tag, (ucp_tag_t)-1, &param);
  if (UCS_PTR_IS_ERR(p)) {
    c->req_tail--;
    res = ucx_fail_status(c, UCS_PTR_STATUS(p), "ucp_tag_recv_nbx");
    goto out;
  }
  r->ucp = p;
  r->size = sizes[0];
  *request = r;
out:
  pthread_mutex_unlock(&ucx_lock);
  return res;
}

/* Is r done? (under ucx_lock) 1 done, 0 not yet, <0 failed (*res set). */
static int req_poll(struct ucx_req* r, size_t* got, ncclResult_t* res) {
  struct ucx_comm* c = r->comm;
  ucs_status_t s = UCS_OK;
  if (r->deferred) return 0;
  if (r->ucp != NULL) {
    ucp_tag_recv_info_t info;
    memset(&info, 0, sizeof(info));
    s = r->is_send ? ucx.api.request_check_status(r->ucp) : ucx.api.tag_recv_request_test(r->ucp, &info);
    if (s == UCS_INPROGRESS) return 0;
    ucx.api.request_free(r->ucp);
    r->ucp = NULL;
    if (!r->is_send) r->size = info.length;
  }
  if (s != UCS_OK) {
    *res = ucx_fail_status(c, s, r->is_send ? "tagged send" : "tagged receive");
    return -1;
  }
  *got = r->size;
  return 1;
}

ncclResult_t ucx_test(void* request, int* done, size_t* sizes) {
  struct ucx_req* r = request;
  struct ucx_comm* c = r->comm;
  ncclResult_t res = ncclSuccess;
  size_t got = 0;
  *done = 0;
  pthread_mutex_lock(&ucx_lock);
  if (c->is_send && c->ep == NULL && send_ready(c) != ncclSuccess) {
    pthread_mutex_unlock(&ucx_lock);
    return ncclRemoteError;
  }
  int st = req_poll(r, &got, &res);
  if (st == 0) {
    for (int i = 0; i < 16 && ucx.api.worker_progress(ucx.worker) != 0; i++) {
    }
    st = req_poll(r, &got, &res);
  }
  if (st == 0) {
    braid_net_ctrl_check(&c->ctl, 0);
    if (c->ctl.failed) res = ncclRemoteError;
  }
  /* A receiver looks at the control socket with every message too: garbage or an abort notice
   * the sender wrote before this message fails it (the stream is not to be trusted). */
  if (st == 1 && !c->is_send) {
    braid_net_ctrl_read(&c->ctl);
    if (c->ctl.failed) st = -1, res = ncclRemoteError;
  }
  if (st == 1) {
    if (!c->is_send) c->ctl.posted_msgs++;
    r->used = 0;
    while (c->req_head < c->req_tail && !c->reqs[c->req_head % BRAID_NET_MAX_REQUESTS].used) c->req_head++;
    *done = 1;
    if (sizes != NULL) sizes[0] = got;
  }
  pthread_mutex_unlock(&ucx_lock);
  return res;
}

void ucx_comm_drop_requests(struct ucx_comm* c) {
  int64_t deadline = braid_socket_deadline_ms(UCX_CLOSE_MS);
  for (uint64_t i = c->req_head; i < c->req_tail; i++) {
    struct ucx_req* r = &c->reqs[i % BRAID_NET_MAX_REQUESTS];
    if (!r->used || r->ucp == NULL) continue;
    if (!r->is_send) {
      /* A receive may still write into the FIFO the caller frees next: cancel it and wait */
      ucx.api.request_cancel(ucx.worker, r->ucp);
      while (ucx.api.request_check_status(r->ucp) == UCS_INPROGRESS && braid_socket_clock_ns() < deadline)
        ucx.api.worker_progress(ucx.worker);
    }
    ucx.api.request_free(r->ucp); /* a send keeps going inside UCX, then is freed */
    r->ucp = NULL;
    r->used = 0;
  }
  c->req_head = c->req_tail;
}

/* ---- waiting ------------------------------------------------------------------------------- */

/* The control socket (the peer's last word, or its death) and the worker's descriptor, armed.
 * When the worker has events that arm refuses (UCS_ERR_BUSY even after progress), the comm
 * cannot sleep now: ncclInProgress (the engine then polls). */
ncclResult_t ucx_wait_fds(void* comm, struct pollfd* fds, int max, int* n_p) {
  struct ucx_comm* c = comm;
  ncclResult_t res = ncclSuccess;
  int n = 0;
  pthread_mutex_lock(&ucx_lock);
  if (!c->ctl.failed && c->is_send && c->ep == NULL) {
    fds[n++] = (struct pollfd){.fd = c->ctl.sock.fd, .events = POLLIN}; /* the receiver's hello */
  } else if (!c->ctl.failed && max >= 2) {
    ucs_status_t s = UCS_ERR_BUSY;
    for (int i = 0; i < 4 && s == UCS_ERR_BUSY; i++) {
      while (ucx.api.worker_progress(ucx.worker) != 0) {
      }
      s = ucx.api.worker_arm(ucx.worker);
    }
    if (s == UCS_OK) {
      fds[n++] = (struct pollfd){.fd = ucx.efd, .events = POLLIN};
      fds[n++] = (struct pollfd){.fd = c->ctl.sock.fd, .events = POLLIN};
    } else {
      res = ncclInProgress;
    }
  }
  pthread_mutex_unlock(&ucx_lock);
  *n_p = n;
  return res;
}

ncclResult_t ucx_get_status(void* comm, struct braid_net_status* st) {
  struct ucx_comm* c = comm;
  pthread_mutex_lock(&ucx_lock);
  braid_net_ctrl_status(&c->ctl, st);
  pthread_mutex_unlock(&ucx_lock);
  return ncclSuccess;
}

/* ---- the sender's last word ---------------------------------------------------------------- */

ncclResult_t ucx_finish_send(void* comm) {
  struct ucx_comm* c = comm;
  pthread_mutex_lock(&ucx_lock);
  int ok = !c->ctl.failed;
  uint64_t msgs = c->ctl.posted_msgs;
  pthread_mutex_unlock(&ucx_lock);
  if (ok)
    braid_net_ctrl_say(&c->ctl, BRAID_NET_CTRL_BYE, msgs,
                       2000); /* best effort: without it the receiver reports a failure */
  return ncclSuccess;
}

ncclResult_t ucx_abort_send(void* comm, int code) {
  struct ucx_comm* c = comm;
  braid_net_ctrl_say(&c->ctl, BRAID_NET_CTRL_ABORT, (uint64_t)(code > 0 ? code : 0), 200);
  return ncclSuccess;
}

/* ---- memory -------------------------------------------------------------------------------- */

ncclResult_t ucx_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (type != BRAID_NET_PTR_HOST) {
    BRAID_WARN("NET/UCX : regMr: memory type %d is not host memory (braid's UCX network registers host memory only)",
               type);
    return ncclInvalidArgument;
  }
  struct ucx_mr* mr = calloc(1, sizeof(*mr));
  if (mr == NULL) {
    BRAID_WARN("NET/UCX : failed to allocate a memory registration");
    return ncclSystemError;
  }
  ucp_mem_map_params_t p;
  memset(&p, 0, sizeof(p));
  p.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  p.address = data;
  p.length = size;
  pthread_mutex_lock(&ucx_lock);
  ucs_status_t s = ucx.api.mem_map(ucx.context, &p, &mr->memh);
  pthread_mutex_unlock(&ucx_lock);
  if (s != UCS_OK) {
    BRAID_WARN("NET/UCX : ucp_mem_map of %zu bytes at %p failed: %s", size, data, ucx_status_str(s));
    free(mr);
    return ncclSystemError;
  }
  mr->base = data;
  mr->size = size;
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t ucx_dereg_mr(void* comm, void* mhandle) {
  struct ucx_mr* mr = mhandle;
  if (mr == NULL) return ncclSuccess;
  pthread_mutex_lock(&ucx_lock);
  ucx.api.mem_unmap(ucx.context, mr->memh);
  pthread_mutex_unlock(&ucx_lock);
  free(mr);
  return ncclSuccess;
}
