/*
 * net_socket_io.c - the data movement of the Socket net plugin (wire format: net_socket.h):
 * requests, the control-socket stream, pieces on data sockets and the helper threads that
 * move them, and what an idle proxy may sleep on.
 *
 * Requests of a comm sit in a ring in posting order. The caller's thread (the proxy) moves the
 * control stream: headers and inline payloads, strictly in order, never blocking. Pieces go to
 * the helper owning their data socket (a queue per socket, in message order); a helper moves
 * the head piece of each of its sockets, sleeps in poll() while they are not ready and on its
 * condition variable while it has nothing queued, and writes the comm's eventfd when a
 * request's last piece is done, so a sleeping proxy wakes up.
 *
 * Failures: the first reason wins (sock_fail) and every later call on the comm reports it. A
 * goodbye header (finishSend) is the peer leaving cleanly (closed_by_peer); anything else (an
 * EOF without goodbye, a reset, a header without the magic or larger than the posted buffer)
 * fails the comm.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/check.h"
#include "transport/net/socket/net_socket.h"

ncclResult_t sock_fail(struct sock_comm* c, const char* fmt, ...) {
  pthread_mutex_lock(&c->fail_lock);
  if (!__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->reason, sizeof(c->reason), fmt, ap);
    va_end(ap);
    __atomic_store_n(&c->failed, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&c->fail_lock);
  return ncclRemoteError;
}

/* A socket call failed: the peer's doing is recorded quietly, a local error was WARNed by
 * socket.c and is recorded too. */
static ncclResult_t sock_io_fail(struct sock_comm* c, struct braid_socket* s, ncclResult_t res, const char* what) {
  if (s->fail == BRAID_SOCKET_FAIL_SYSTEM)
    sock_fail(c, "local error while %s: %s", what, strerror(s->err));
  else
    sock_fail(c, "%s (while %s)", braid_socket_fail_str(s->fail), what);
  return res == ncclRemoteError ? ncclRemoteError : ncclSystemError;
}

static void sock_signal(struct sock_comm* c) {
  uint64_t one = 1;
  if (c->efd >= 0) (void)!write(c->efd, &one, sizeof(one));
}

/* ---- pieces and helpers -------------------------------------------------------------------- */

static int sock_inline(const struct sock_comm* c, size_t size) {
  return c->nsocks == 0 || size <= SOCK_INLINE_MAX;
}

/* How a message of `size` bytes is cut: n pieces of `piece` bytes (the last one shorter). */
static int sock_pieces(const struct sock_comm* c, size_t size, size_t* piece_p) {
  size_t n = (size + SOCK_MIN_PIECE - 1) / SOCK_MIN_PIECE;
  if (n > (size_t)c->nsocks) n = (size_t)c->nsocks;
  if (n < 1) n = 1;
  size_t piece = ((size + n - 1) / n + 4095) & ~(size_t)4095;
  *piece_p = piece;
  return (int)((size + piece - 1) / piece);
}

/* Queue the pieces of r's payload on the data sockets, round-robin from c->rr. */
static void sock_queue_pieces(struct sock_comm* c, struct sock_req* r) {
  size_t piece;
  int n = sock_pieces(c, r->nbytes, &piece);
  __atomic_store_n(&r->pieces_left, n, __ATOMIC_RELEASE);
  for (int i = 0; i < n; i++) {
    int s = (int)((c->rr + (unsigned)i) % (unsigned)c->nsocks);
    struct sock_data* d = &c->data[s];
    struct sock_helper* h = &c->helpers[s % c->nthreads];
    size_t off = (size_t)i * piece;
    pthread_mutex_lock(&h->mutex);
    struct sock_task* t = &d->tasks[d->tail % BRAID_NET_MAX_REQUESTS];
    t->req = r;
    t->data = r->data + off;
    t->size = r->nbytes - off < piece ? r->nbytes - off : piece;
    t->off = 0;
    d->tail++;
    pthread_cond_signal(&h->cond);
    pthread_mutex_unlock(&h->mutex);
  }
  c->rr = (c->rr + (unsigned)n) % (unsigned)c->nsocks;
}

/* One non-blocking attempt on the head piece of data socket s. 1: it completed. */
static int helper_move(struct sock_helper* h, int s, struct sock_task* t) {
  struct sock_comm* c = h->comm;
  struct sock_data* d = &c->data[s];
  ncclResult_t res = c->is_send ? braid_socket_send_try(&d->sock, t->data, t->size, &t->off)
                                : braid_socket_recv_try(&d->sock, t->data, t->size, &t->off);
  if (res != ncclSuccess) {
    sock_io_fail(c, &d->sock, res, c->is_send ? "sending on a data socket" : "receiving on a data socket");
    sock_signal(c);
    return 0;
  }
  if (t->off < t->size) return 0;
  pthread_mutex_lock(&h->mutex);
  d->head++;
  pthread_mutex_unlock(&h->mutex);
  if (__atomic_sub_fetch(&t->req->pieces_left, 1, __ATOMIC_ACQ_REL) == 0) sock_signal(c);
  return 1;
}

static void* helper_main(void* arg) {
  struct sock_helper* h = arg;
  struct sock_comm* c = h->comm;
  struct pollfd fds[SOCK_MAX_SOCKS];
  pthread_mutex_lock(&h->mutex);
  while (!h->stop) {
    struct sock_task* head[SOCK_MAX_SOCKS];
    int socks[SOCK_MAX_SOCKS], n = 0;
    for (int s = h->index; s < c->nsocks; s += c->nthreads) {
      struct sock_data* d = &c->data[s];
      if (d->head == d->tail) continue;
      head[n] = &d->tasks[d->head % BRAID_NET_MAX_REQUESTS];
      socks[n++] = s;
    }
    if (n == 0 || __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
      pthread_cond_wait(&h->cond, &h->mutex);
      continue;
    }
    pthread_mutex_unlock(&h->mutex);
    int moved = 0;
    for (int i = 0; i < n; i++) moved |= helper_move(h, socks[i], head[i]);
    if (!moved && !__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
      for (int i = 0; i < n; i++)
        fds[i] = (struct pollfd){.fd = c->data[socks[i]].sock.fd, .events = c->is_send ? POLLOUT : POLLIN};
      (void)poll(fds, (nfds_t)n, 20); /* short: close() must not wait long for a stop */
    }
    pthread_mutex_lock(&h->mutex);
  }
  pthread_mutex_unlock(&h->mutex);
  return NULL;
}

ncclResult_t sock_comm_start(struct sock_comm* c) {
  ncclResult_t res = ncclSuccess;
  c->efd = -1;
  if (c->nthreads == 0) return ncclSuccess;
  BRAID_SYSCHECK_GOTO(c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), "eventfd", res, out);
  for (int i = 0; i < c->nthreads; i++) {
    struct sock_helper* h = &c->helpers[i];
    h->comm = c;
    h->index = i;
    BRAID_PTHREADCHECK_GOTO(pthread_create(&h->thread, NULL, helper_main, h), "pthread_create", res, out);
    h->started = 1;
  }
out:
  return res; /* on failure sock_comm_free stops what started */
}

void sock_comm_free(struct sock_comm* c) {
  if (c == NULL) return;
  for (int i = 0; i < c->nthreads && c->helpers; i++) {
    struct sock_helper* h = &c->helpers[i];
    if (!h->started) continue;
    pthread_mutex_lock(&h->mutex);
    h->stop = 1;
    pthread_cond_broadcast(&h->cond);
    pthread_mutex_unlock(&h->mutex);
    pthread_join(h->thread, NULL);
  }
  for (int i = 0; i < c->nthreads && c->helpers; i++) {
    pthread_mutex_destroy(&c->helpers[i].mutex);
    pthread_cond_destroy(&c->helpers[i].cond);
  }
  for (int s = 0; s < c->nsocks && c->data; s++) braid_socket_close(&c->data[s].sock);
  braid_socket_close(&c->ctrl);
  if (c->efd >= 0) close(c->efd);
  pthread_mutex_destroy(&c->fail_lock);
  free(c->stage);
  free(c->helpers);
  free(c->data);
  free(c);
}

/* ---- the control stream -------------------------------------------------------------------- */

static ncclResult_t sock_failed_result(struct sock_comm* c) {
  return strncmp(c->reason, "local error", 11) == 0 ? ncclSystemError : ncclRemoteError;
}

/* Send side: headers and inline payloads, in order, as far as the socket takes them. */
static ncclResult_t sock_progress_send(struct sock_comm* c) {
  while (c->req_ctrl < c->req_tail) {
    struct sock_req* r = &c->reqs[c->req_ctrl % BRAID_NET_MAX_REQUESTS];
    int inl = sock_inline(c, r->nbytes);
    struct iovec iov[2] = {{&r->hdr, sizeof(r->hdr)}, {r->data, inl ? r->nbytes : 0}};
    size_t total = sizeof(r->hdr) + (inl ? r->nbytes : 0);
    ncclResult_t res = braid_socket_sendv_try(&c->ctrl, iov, 2, &r->hdr_off);
    if (res != ncclSuccess) return sock_io_fail(c, &c->ctrl, res, "sending");
    if (r->hdr_off < total) return ncclSuccess;
    r->ctrl_done = 1;
    c->req_ctrl++;
  }
  return ncclSuccess;
}

/* A failed recv() on the control socket, classified as socket.c does: EOF and a broken
 * connection are the peer's doing (ncclRemoteError, no WARN here), the rest is ours. */
static ncclResult_t sock_recv_error(struct sock_comm* c, int err) {
  c->ctrl.err = err;
  switch (err) {
    case 0:
    case EPIPE:
      c->ctrl.fail = BRAID_SOCKET_FAIL_CLOSED;
      return ncclRemoteError;
    case ECONNRESET:
    case ETIMEDOUT:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ECONNABORTED:
      c->ctrl.fail = BRAID_SOCKET_FAIL_RESET;
      return ncclRemoteError;
    default:
      c->ctrl.fail = BRAID_SOCKET_FAIL_SYSTEM;
      BRAID_WARN("NET/Socket : recv on a connection failed: %s", strerror(err));
      return ncclSystemError;
  }
}

/* Receive side: up to n bytes of the control stream into dst (*off counts them): what the
 * stage holds first, then the socket. A short read is no error. Small remainders go through
 * the stage, so the next header usually comes with them; large ones straight to dst. */
static ncclResult_t sock_ctrl_read(struct sock_comm* c, void* dst, size_t n, size_t* off) {
  while (*off < n) {
    size_t want = n - *off;
    if (c->stage_off < c->stage_len) {
      size_t k = c->stage_len - c->stage_off < want ? c->stage_len - c->stage_off : want;
      memcpy((char*)dst + *off, c->stage + c->stage_off, k);
      c->stage_off += k;
      *off += k;
      continue;
    }
    if (want >= SOCK_STAGE) return braid_socket_recv_try(&c->ctrl, dst, n, off);
    /* One recv() for the stage: looping until EAGAIN would cost a second call per message. */
    c->stage_off = c->stage_len = 0;
    ssize_t r;
    do {
      r = recv(c->ctrl.fd, c->stage, SOCK_STAGE, MSG_DONTWAIT);
    } while (r < 0 && errno == EINTR);
    if (r > 0) {
      /* After a small read that drained the socket, delay the ACK: a one-way connection has
       * no reply to carry it, and an immediate pure ACK costs both ends about a microsecond
       * on the latency path. Streams of large messages keep their prompt ACKs. */
      if (r < SOCK_STAGE) {
        int zero = 0;
        (void)setsockopt(c->ctrl.fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof(zero));
      }
      c->stage_len = (size_t)r;
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    return sock_recv_error(c, r == 0 ? 0 : errno);
  }
  return ncclSuccess;
}

/* Receive side: the next header, then an inline payload or the pieces. */
static ncclResult_t sock_progress_recv(struct sock_comm* c) {
  while (c->req_ctrl < c->req_tail) {
    struct sock_req* r = &c->reqs[c->req_ctrl % BRAID_NET_MAX_REQUESTS];
    ncclResult_t res;
    if (r->hdr_off < sizeof(r->hdr)) {
      res = sock_ctrl_read(c, &r->hdr, sizeof(r->hdr), &r->hdr_off);
      if (res != ncclSuccess) {
        if (r->hdr_off == 0 && c->ctrl.fail == BRAID_SOCKET_FAIL_CLOSED)
          return sock_fail(c, "closed the connection without finishing (the process exited or aborted)");
        return sock_io_fail(c, &c->ctrl, res, "receiving a message header");
      }
      if (r->hdr_off < sizeof(r->hdr)) return ncclSuccess;
      if (r->hdr.magic != SOCK_MSG_MAGIC)
        return sock_fail(c, "sent garbage: a message header without the magic (0x%08x, expected 0x%08x)",
                         (unsigned)r->hdr.magic, SOCK_MSG_MAGIC);
      if (r->hdr.tag == SOCK_TAG_BYE && r->hdr.size == 0) {
        c->closed_by_peer = 1;
        return sock_fail(c, "finished and closed the connection");
      }
      if (r->hdr.tag == SOCK_TAG_ABORT) {
        c->peer_aborted = 1;
        c->abort_code = (int)r->hdr.size;
        return sock_fail(c, "aborted its communicator");
      }
      if (r->hdr.size > r->cap)
        return sock_fail(c, "sent a message of %llu bytes, more than the %zu bytes posted for it",
                         (unsigned long long)r->hdr.size, r->cap);
      r->nbytes = (size_t)r->hdr.size;
      if (!sock_inline(c, r->nbytes)) {
        sock_queue_pieces(c, r);
        r->ctrl_done = 1;
        c->req_ctrl++;
        continue;
      }
    }
    res = sock_ctrl_read(c, r->data, r->nbytes, &r->pay_off);
    if (res != ncclSuccess) return sock_io_fail(c, &c->ctrl, res, "receiving a message");
    if (r->pay_off < r->nbytes) return ncclSuccess;
    r->ctrl_done = 1;
    c->req_ctrl++;
  }
  return ncclSuccess;
}

static ncclResult_t sock_progress(struct sock_comm* c) {
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) return ncclSuccess; /* test reports it */
  return c->is_send ? sock_progress_send(c) : sock_progress_recv(c);
}

/* ---- requests ------------------------------------------------------------------------------ */

static struct sock_req* sock_req_new(struct sock_comm* c) {
  if (c->req_tail - c->req_head >= BRAID_NET_MAX_REQUESTS) return NULL;
  struct sock_req* r = &c->reqs[c->req_tail % BRAID_NET_MAX_REQUESTS];
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = 1;
  c->req_tail++;
  return r;
}

ncclResult_t sock_isend(void* comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  struct sock_comm* c = comm;
  *request = NULL;
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) return sock_failed_result(c);
  struct sock_req* r = sock_req_new(c);
  if (r == NULL) return ncclSuccess;
  r->op = SOCK_OP_SEND;
  r->data = data;
  r->cap = r->nbytes = size;
  r->tag = tag;
  r->hdr = (struct sock_hdr){SOCK_MSG_MAGIC, tag, size};
  if (!sock_inline(c, size)) sock_queue_pieces(c, r);
  *request = r;
  return sock_progress(c); /* small messages leave now */
}

ncclResult_t sock_irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  struct sock_comm* c = comm;
  *request = NULL;
  if (n != 1) {
    BRAID_WARN("NET/Socket : irecv of %d buffers; this network receives one at a time (maxRecvs 1)", n);
    return ncclInternalError;
  }
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) return sock_failed_result(c);
  struct sock_req* r = sock_req_new(c);
  if (r == NULL) return ncclSuccess;
  r->op = SOCK_OP_RECV;
  r->data = data[0];
  r->cap = sizes[0];
  r->tag = tags ? tags[0] : 0;
  *request = r;
  return ncclSuccess;
}

ncclResult_t sock_test(void* request, int* done, size_t* sizes) {
  struct sock_req* r = request;
  struct sock_comm* c = r->comm;
  *done = 0;
  (void)sock_progress(c); /* a failure is recorded in c; it may come after this request's bytes */
  /* A failure stops every request, except one whose bytes all came in before it. */
  int complete = r->ctrl_done && __atomic_load_n(&r->pieces_left, __ATOMIC_ACQUIRE) == 0;
  if (!complete && __atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) return sock_failed_result(c);
  if (!complete) return ncclSuccess;
  *done = 1;
  if (sizes) sizes[0] = r->nbytes;
  r->used = 0;
  while (c->req_head < c->req_tail && !c->reqs[c->req_head % BRAID_NET_MAX_REQUESTS].used) c->req_head++;
  return ncclSuccess;
}

ncclResult_t sock_wait_fds(void* comm, struct pollfd* fds, int max, int* n_p) {
  struct sock_comm* c = comm;
  int n = 0;
  if (c->efd >= 0) {
    uint64_t v;
    while (read(c->efd, &v, sizeof(v)) > 0) {
    }
  }
  if (!__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) {
    if (c->req_ctrl < c->req_tail && n < max)
      fds[n++] = (struct pollfd){.fd = c->ctrl.fd, .events = c->is_send ? POLLOUT : POLLIN};
    if (c->efd >= 0 && c->req_head < c->req_ctrl && n < max) fds[n++] = (struct pollfd){.fd = c->efd, .events = POLLIN};
  }
  *n_p = n;
  return ncclSuccess;
}

ncclResult_t sock_get_status(void* comm, struct braid_net_status* st) {
  struct sock_comm* c = comm;
  memset(st, 0, sizeof(*st));
  pthread_mutex_lock(&c->fail_lock);
  st->failed = c->failed;
  st->closedByPeer = c->closed_by_peer;
  st->peerAborted = c->peer_aborted;
  st->abortCode = c->abort_code;
  snprintf(st->reason, sizeof(st->reason), "%s", c->reason);
  pthread_mutex_unlock(&c->fail_lock);
  return ncclSuccess;
}

ncclResult_t sock_finish_send(void* comm) {
  struct sock_comm* c = comm;
  struct sock_hdr bye = {SOCK_MSG_MAGIC, SOCK_TAG_BYE, 0};
  /* Only between messages: a half-sent header would turn the goodbye into garbage. */
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE) || c->req_ctrl != c->req_tail) return ncclSuccess;
  (void)braid_socket_send(&c->ctrl, &bye, sizeof(bye), NULL, braid_socket_deadline_ms(SOCK_BYE_MS));
  return ncclSuccess; /* best effort: without it the receiver reports a failure, which is then true */
}

/* Finish the control-stream part of a message cut short (the receiver must be at a header
 * boundary to read the notice), then the notice; both bounded by SOCK_ABORT_MS. */
ncclResult_t sock_abort_send(void* comm, int code) {
  struct sock_comm* c = comm;
  int64_t deadline = braid_socket_deadline_ms(SOCK_ABORT_MS);
  if (__atomic_load_n(&c->failed, __ATOMIC_ACQUIRE)) return ncclSuccess;
  if (c->req_ctrl < c->req_tail) {
    struct sock_req* r = &c->reqs[c->req_ctrl % BRAID_NET_MAX_REQUESTS];
    int inl = sock_inline(c, r->nbytes);
    struct iovec iov[2] = {{&r->hdr, sizeof(r->hdr)}, {r->data, inl ? r->nbytes : 0}};
    size_t total = sizeof(r->hdr) + (inl ? r->nbytes : 0);
    if (r->hdr_off == 0) {
      c->req_ctrl = c->req_tail; /* nothing of it left: drop it and the rest */
    } else {
      while (r->hdr_off < total) {
        if (braid_socket_sendv_try(&c->ctrl, iov, 2, &r->hdr_off) != ncclSuccess) return ncclSuccess;
        if (r->hdr_off < total && braid_socket_wait(&c->ctrl, POLLOUT, NULL, deadline) != ncclSuccess)
          return ncclSuccess;
      }
    }
  }
  struct sock_hdr note = {SOCK_MSG_MAGIC, SOCK_TAG_ABORT, (uint64_t)(code > 0 ? code : 0)};
  size_t off = 0;
  while (off < sizeof(note)) {
    if (braid_socket_send_try(&c->ctrl, &note, sizeof(note), &off) != ncclSuccess) break;
    if (off < sizeof(note) && braid_socket_wait(&c->ctrl, POLLOUT, NULL, deadline) != ncclSuccess) break;
  }
  return ncclSuccess;
}
