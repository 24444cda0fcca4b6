/*
 * socket_pending.c - accepted connections waiting for their handshake (socket_pending.h).
 */
#include "base/socket_pending.h"

#include <stdlib.h>
#include <sys/resource.h>

#include "base/check.h"
#include "base/debug.h"

int braid_socket_max_pending(void) {
  struct rlimit rl;
  long n = 256;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) n = (long)rl.rlim_cur / 4;
  return n < 16 ? 16 : n > 1024 ? 1024 : (int)n;
}

void braid_socket_pending_init(struct braid_socket_pending_list* l, const char* ctx, uint64_t secret, int type,
                               int timeout_ms) {
  *l = (struct braid_socket_pending_list){NULL, 0, braid_socket_max_pending(), 0, ctx, secret, type, timeout_ms};
}

static void pending_free(struct braid_socket_pending* q) {
  braid_socket_close(&q->sock);
  free(q);
}

/* Over the cap: the oldest (the list's last) goes. */
static void pending_evict(struct braid_socket_pending_list* l) {
  struct braid_socket_pending** pp = &l->head;
  while ((*pp)->next != NULL) pp = &(*pp)->next;
  struct braid_socket_pending* old = *pp;
  *pp = NULL;
  l->n--;
  braid_socket_warn_drop(l->ctx, &old->sock.addr, "%d connections wait for their handshake, the oldest goes", l->max);
  pending_free(old);
}

static ncclResult_t pending_accept(struct braid_socket_pending_list* l, struct braid_socket* listener) {
  if (l->accept_after != 0 && braid_socket_clock_ns() < l->accept_after) return ncclSuccess;
  l->accept_after = 0;
  for (;;) {
    struct braid_socket s;
    int got = 0;
    BRAID_CHECK(braid_socket_accept_try(listener, &s, &got));
    if (!got) {
      if (listener->err != 0) l->accept_after = braid_socket_deadline_ms(BRAID_SOCKET_ACCEPT_BACKOFF_MS);
      return ncclSuccess;
    }
    struct braid_socket_pending* q = calloc(1, sizeof(*q));
    if (q == NULL) {
      braid_socket_close(&s);
      BRAID_WARN("%s : failed to allocate %zu bytes for an accepted connection", l->ctx, sizeof(*q));
      return ncclSystemError;
    }
    q->sock = s;
    q->deadline = braid_socket_deadline_ms(l->timeout_ms);
    q->next = l->head;
    l->head = q;
    if (++l->n > l->max) pending_evict(l);
  }
}

ncclResult_t braid_socket_pending_poll(struct braid_socket_pending_list* l, struct braid_socket* listener,
                                       braid_socket_pending_fn fn, void* arg) {
  BRAID_CHECK(pending_accept(l, listener));
  int64_t now = braid_socket_clock_ns();
  for (struct braid_socket_pending** pp = &l->head; *pp != NULL;) {
    struct braid_socket_pending* q = *pp;
    int r = q->off == sizeof(q->hs) ? 1 /* checked at an earlier poll, left for later */
                                    : braid_socket_handshake_step(&q->sock, &q->hs, &q->off, q->deadline, now,
                                                                  l->secret, l->type, l->ctx, l->timeout_ms);
    if (r > 0) r = fn(arg, &q->sock, &q->hs);
    if (r == BRAID_PENDING_LATER) {
      pp = &q->next;
      continue;
    }
    *pp = q->next;
    l->n--;
    if (r == BRAID_PENDING_TAKEN)
      free(q);
    else
      pending_free(q);
  }
  return ncclSuccess;
}

void braid_socket_pending_close(struct braid_socket_pending_list* l) {
  while (l->head != NULL) {
    struct braid_socket_pending* q = l->head;
    l->head = q->next;
    pending_free(q);
  }
  l->n = 0;
}
