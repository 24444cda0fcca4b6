/*
 * ucx.h - private to the UCX net plugin (ucx_lib.c: loading libucp and the per-process worker;
 * ucx_conn.c: devices, listen / connect / accept, close, the table; ucx_io.c: requests,
 * waiting, goodbye / abort notices, status).
 *
 * libucp is dlopened (libnccl.so.2 loads where UCX is absent); the headers give only types and
 * constants. One UCX context and one worker per process (one device), made at the first
 * openContext and destroyed with the last closeContext, so an aborted communicator leaves no
 * UCX thread or descriptor behind. Every UCX call is made under ucx_lock (the worker is
 * UCS_THREAD_MODE_SERIALIZED: the progress engine and host executors take turns).
 *
 * A connection is a UCX endpoint from the sender's worker to the receiver's, plus one TCP
 * control socket between the two (braid's socket layer, on the bootstrap's interface):
 *   - the receiver listens on it and publishes {magic, address} as its handle; the sender
 *     connects and sends the handshake {secret, BRAID_SOCKET_TYPE_NET, UCX_HS_ARG}, and its
 *     connect is done (it must not wait for the receiver, which may itself be connecting);
 *     a stranger is dropped with a WARN; the receiver's accept answers a hello {magic, tag,
 *     address length} and its worker address; the sender reads it in its first isend or test
 *     and creates its endpoint then (sends posted before that wait, in order, in our ring);
 *   - data: tagged messages with the connection's tag (unique on the receiving worker), so
 *     many connections share one worker; UCX keeps one sender's messages of one tag in order;
 *   - the control socket then carries only the end: a goodbye {UCX_MSG_MAGIC, BYE,
 *     messages sent} or an abort notice {.., ABORT, code}; an EOF without either is a
 *     dead peer, anything else is garbage. A receiver that got the goodbye fails (closedByPeer)
 *     only once every message the sender counted has arrived.
 */
#ifndef BRAID_NET_UCX_H
#define BRAID_NET_UCX_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <ucp/api/ucp.h>

#include "base/socket.h"
#include "transport/net/net.h"
#include "transport/net/net_ctrl.h"

#define UCX_HANDLE_MAGIC 0x62726169642d7563ULL /* "braid-uc" */
#define UCX_MSG_MAGIC 0x55435842u              /* control-socket headers start with it */
#define UCX_HS_ARG 0x554358                    /* the handshake's arg: a UCX connection */
#define UCX_ADDR_MAX 8192                      /* a worker address larger than this is refused */
#define UCX_HANDSHAKE_MS 10000                 /* an accepted socket must say who it is by then */
#define UCX_CLOSE_MS 2000                      /* closing waits this long for UCX to let go, at most */

/* The libucp / libucs entry points braid uses (ucx_lib.c fills it). */
struct ucx_api {
  ucs_status_t (*config_read)(const char*, const char*, ucp_config_t**);
  void (*config_release)(ucp_config_t*);
  ucs_status_t (*config_modify)(ucp_config_t*, const char*, const char*);
  void (*config_print)(const ucp_config_t*, FILE*, const char*, ucs_config_print_flags_t);
  ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t*, const ucp_config_t*, ucp_context_h*);
  void (*cleanup)(ucp_context_h);
  void (*get_version)(unsigned*, unsigned*, unsigned*);
  ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*);
  void (*worker_destroy)(ucp_worker_h);
  ucs_status_t (*worker_get_address)(ucp_worker_h, ucp_address_t**, size_t*);
  void (*worker_release_address)(ucp_worker_h, ucp_address_t*);
  unsigned (*worker_progress)(ucp_worker_h);
  ucs_status_t (*worker_get_efd)(ucp_worker_h, int*);
  ucs_status_t (*worker_arm)(ucp_worker_h);
  ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t*, ucp_ep_h*);
  ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t*);
  ucs_status_ptr_t (*tag_send_nbx)(ucp_ep_h, const void*, size_t, ucp_tag_t, const ucp_request_param_t*);
  ucs_status_ptr_t (*tag_recv_nbx)(ucp_worker_h, void*, size_t, ucp_tag_t, ucp_tag_t, const ucp_request_param_t*);
  ucs_status_t (*tag_recv_request_test)(void*, ucp_tag_recv_info_t*);
  ucs_status_t (*request_check_status)(void*);
  void (*request_cancel)(ucp_worker_h, void*);
  void (*request_free)(void*);
  ucs_status_t (*mem_map)(ucp_context_h, const ucp_mem_map_params_t*, ucp_mem_h*);
  ucs_status_t (*mem_unmap)(ucp_context_h, ucp_mem_h);
  const char* (*status_string)(ucs_status_t);
};

/* The process's UCX state (ucx_lib.c). */
struct ucx_global {
  struct ucx_api api;
  int loaded; /* api filled */
  int refs;   /* open contexts; the worker lives while > 0 */
  ucp_context_h context;
  ucp_worker_h worker;
  int efd; /* the worker's wake-up descriptor */
  ucp_address_t* address;
  size_t address_len;
  uint64_t next_tag;
  char ifname[BRAID_SOCKET_NAME_MAX];
  union braid_sockaddr ifaddr; /* where control sockets listen */
};

extern struct ucx_global ucx;
extern pthread_mutex_t ucx_lock;

/* What the receiver publishes (fits BRAID_NET_HANDLE_MAXSIZE). */
struct ucx_handle {
  uint64_t magic;
  union braid_sockaddr addr;
};

/* On the control socket: the receiver's hello (then addrlen bytes of worker address), and the
 * sender's last word (net_ctrl.h: BRAID_NET_CTRL_BYE / _ABORT with UCX_MSG_MAGIC). */
struct ucx_hello {
  uint32_t magic;
  uint32_t addrlen;
  uint64_t tag;
};
struct ucx_comm;

struct ucx_req {
  struct ucx_comm* comm;
  int used;
  int is_send;
  int deferred; /* a send posted before the endpoint exists */
  void* ucp;    /* UCX's request; NULL: completed at once */
  void* data;
  size_t size;
  const struct ucx_mr* mr;
};

struct ucx_mr {
  ucp_mem_h memh;
  char* base;
  size_t size;
};

struct ucx_comm {
  int is_send;
  struct braid_net_ctrl ctl; /* the control socket and the end of the connection (net_ctrl.h) */
  ucp_ep_h ep;               /* sender: NULL until the receiver's hello is in */
  struct ucx_hello hello;
  unsigned char* addr; /* sender: the receiver's worker address, while it is read */
  size_t hello_off;
  uint64_t tag;
  struct ucx_req reqs[BRAID_NET_MAX_REQUESTS];
  uint64_t req_head, req_tail; /* oldest not reported done, next to post */
};

/* ucx_lib.c */
ncclResult_t ucx_load(void);       /* dlopen once; ncclSystemError (INFO, no WARN) when absent */
ncclResult_t ucx_worker_get(void); /* a context holds the worker: refs++ (under ucx_lock) */
void ucx_worker_put(void);         /* refs--, destroyed at 0 (under ucx_lock) */
const char* ucx_status_str(ucs_status_t s);
/* Record why the comm failed (first reason wins); returns ncclRemoteError. */
#define ucx_fail(c, ...) braid_net_ctrl_fail(&(c)->ctl, __VA_ARGS__)
/* A UCX status of a request or call: peer-caused ones fail the comm quietly (ncclRemoteError),
 * others WARN (ncclSystemError). */
ncclResult_t ucx_fail_status(struct ucx_comm* c, ucs_status_t s, const char* what);

/* ucx_io.c (each takes ucx_lock) */
ncclResult_t ucx_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t ucx_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
ncclResult_t ucx_test(void* request, int* done, size_t* sizes);
ncclResult_t ucx_wait_fds(void* comm, struct pollfd* fds, int max, int* n);
ncclResult_t ucx_get_status(void* comm, struct braid_net_status* st);
ncclResult_t ucx_finish_send(void* comm);
ncclResult_t ucx_abort_send(void* comm, int code);
ncclResult_t ucx_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t ucx_dereg_mr(void* comm, void* mhandle);
/* Sender: read the receiver's hello and address, then create the endpoint (under ucx_lock;
 * ucx_conn.c). 1 when the endpoint exists, 0 not yet, -1 failed (the comm says why). */
int ucx_sender_ready(struct ucx_comm* c);
/* Drop every request in flight (cancel receives and wait, bounded, until UCX lets go of them). */
void ucx_comm_drop_requests(struct ucx_comm* c);

#endif /* BRAID_NET_UCX_H */
