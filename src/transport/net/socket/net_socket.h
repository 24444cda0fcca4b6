/*
 * net_socket.h - private to the Socket net plugin (net_socket.c: devices, listen, connect,
 * accept, the table; net_socket_io.c: requests, helper threads, waiting).
 *
 * A connection is one control socket plus `nsocks` data sockets (0 by default). Every message
 * starts with a 16-byte header on the control socket {magic, tag, size}. A message of at most
 * SOCK_INLINE_MAX bytes, or any message when there are no data sockets, follows its header on
 * the control socket; a larger one is cut into pieces of at least SOCK_MIN_PIECE bytes spread
 * round-robin over the data sockets, where helper threads (NCCL_SOCKET_NTHREADS, each owning
 * NCCL_NSOCKS_PERTHREAD sockets) move them. Both ends cut a message the same way from its size,
 * so each data socket carries the same sequence of pieces in both directions of the stream.
 *
 * A sender that finishes cleanly ends the control stream with a header of tag SOCK_TAG_BYE,
 * one that aborts with SOCK_TAG_ABORT (its code in the size field); an EOF without either
 * means the sender died.
 *
 * Every socket opens with the handshake of socket.h {secret, BRAID_SOCKET_TYPE_NET, index}
 * (index 0 is the control socket): a connection with a wrong secret or type is dropped with a
 * WARN and the listener keeps waiting for the real sender.
 */
#ifndef BRAID_NET_SOCKET_H
#define BRAID_NET_SOCKET_H

#include <pthread.h>
#include <stdint.h>

#include "base/socket.h"
#include "transport/net/net.h"

#define SOCK_MAX_DEVS 16
#define SOCK_MAX_THREADS 16
#define SOCK_MAX_SOCKS 64
#define SOCK_MIN_PIECE (64 << 10)
#define SOCK_INLINE_MAX (64 << 10)
#define SOCK_HANDLE_MAGIC 0x62726169646e6574ULL /* "braidnet" */
#define SOCK_MSG_MAGIC 0x424e4d53u              /* every message header starts with it */
#define SOCK_HANDSHAKE_MS 10000                 /* an accepted socket must say who it is by then */
#define SOCK_TAG_BYE (-0x42594521)              /* header tag of finishSend's last message */
#define SOCK_TAG_ABORT (-0x41424f52)            /* header tag of abortSend's notice; size = its code */
#define SOCK_ABORT_MS 200                       /* abortSend waits this long for room, at most */
#define SOCK_BYE_MS 2000                        /* finishSend waits this long for room, at most */
#define SOCK_STAGE 4096                         /* receive side: bytes read ahead on the control socket */

/* What the receiver publishes (fits BRAID_NET_HANDLE_MAXSIZE). */
struct sock_handle {
  uint64_t magic;            /* SOCK_HANDLE_MAGIC */
  union braid_sockaddr addr; /* where the receiver listens */
  uint32_t nsocks;           /* data sockets the sender must open */
  uint32_t nthreads;         /* helper threads on each side */
};

struct sock_hdr {
  uint32_t magic; /* SOCK_MSG_MAGIC */
  int32_t tag;
  uint64_t size; /* payload bytes */
};

enum { SOCK_OP_SEND = 1, SOCK_OP_RECV = 2 };

struct sock_comm;

struct sock_req {
  struct sock_comm* comm;
  int used; /* posted and not yet reported done by test */
  int op;
  char* data;
  size_t cap;    /* send: the size; recv: room posted */
  size_t nbytes; /* the message's size (recv: from its header) */
  int tag;
  struct sock_hdr hdr;
  size_t hdr_off;  /* header bytes moved */
  size_t pay_off;  /* inline payload bytes moved */
  int ctrl_done;   /* header (and inline payload) moved */
  int pieces_left; /* pieces still with helpers (atomic) */
};

/* One piece of a message on one data socket. */
struct sock_task {
  struct sock_req* req;
  char* data;
  size_t size;
  size_t off;
};

/* A data socket and its queue of pieces (the owning helper's mutex guards the indices). */
struct sock_data {
  struct braid_socket sock;
  struct sock_task tasks[BRAID_NET_MAX_REQUESTS];
  unsigned head, tail;
};

struct sock_helper {
  pthread_t thread;
  int started;
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int stop;
  struct sock_comm* comm;
  int index; /* owns data sockets index, index + nthreads, ... */
};

struct sock_comm {
  int is_send;
  struct braid_socket ctrl;
  int nsocks, nthreads;
  struct sock_data* data;      /* [nsocks] */
  struct sock_helper* helpers; /* [nthreads] */
  int efd;                     /* helpers signal completions here (-1 without helpers) */
  struct sock_req reqs[BRAID_NET_MAX_REQUESTS];
  uint64_t req_head; /* oldest request not yet reported done */
  uint64_t req_ctrl; /* first request whose control part is not done */
  uint64_t req_tail; /* next request to post */
  unsigned rr;       /* data socket of the next message's first piece */
  /* Receive side: one recv() takes a header and a small payload (and whatever follows) at
   * once; the stream is parsed from here first. */
  char* stage; /* SOCK_STAGE bytes */
  size_t stage_off, stage_len;
  pthread_mutex_t fail_lock;    /* helpers and the caller may both fail it */
  int failed;                   /* (atomic) */
  int closed_by_peer;           /* the sender said goodbye (SOCK_TAG_BYE) */
  int peer_aborted, abort_code; /* the sender gave up (SOCK_TAG_ABORT) */
  char reason[160];
};

/* net_socket_io.c */
ncclResult_t sock_comm_start(struct sock_comm* c); /* helpers, eventfd */
void sock_comm_free(struct sock_comm* c);          /* stops helpers, closes everything */
ncclResult_t sock_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request);
ncclResult_t sock_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
ncclResult_t sock_test(void* request, int* done, size_t* sizes);
ncclResult_t sock_wait_fds(void* comm, struct pollfd* fds, int max, int* n);
ncclResult_t sock_get_status(void* comm, struct braid_net_status* st);
ncclResult_t sock_finish_send(void* comm);
ncclResult_t sock_abort_send(void* comm, int code);
/* Record why the comm failed (first reason wins); returns ncclRemoteError. */
ncclResult_t sock_fail(struct sock_comm* c, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* BRAID_NET_SOCKET_H */
