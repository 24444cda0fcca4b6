/*
 * bootstrap_notice.c - failure notices between the ranks of a bootstrap (bootstrap.h): one
 * BS_KIND_NOTICE message per rank and peer, sent when its communicator fails, read by a peer
 * that has to decide whom to blame for that rank's departure. The notice travels on the
 * ordinary connections (opened if need be), so it is queued before the sender can close
 * them: a rank that finds a peer gone and its notice there knows the peer left after failing.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "bootstrap/bootstrap_int.h"

#define NOTICE_BACKLOG_MS 50

/* Our connection to it was closed by its end (it exited), not yet noticed by a wait. */
static int watch_hung_up(struct bs_peer* p) {
  struct pollfd f = {.fd = p->watch.fd, .events = POLLRDHUP};
  return p->watch.fd >= 0 && poll(&f, 1, 0) > 0 && (f.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static int peer_known_gone(struct braid_bootstrap* bs, int peer) {
  struct bs_peer* p = &bs->peers[peer];
  pthread_mutex_lock(&bs->lock);
  int gone = p->out_dead || (p->in != NULL && p->in->closed);
  pthread_mutex_unlock(&bs->lock);
  return gone;
}

int braid_bootstrap_tell(struct braid_bootstrap* bs, const void* data, size_t size, int budget_ms) {
  if (bs == NULL || size > BS_MSG_MAX) return 0;
  int64_t deadline = braid_socket_deadline_ms(budget_ms);
  int all = 1;
  bs_ignore_abort = 1;
  for (int i = 1; i < bs->nranks; i++) {
    int peer = (bs->rank + i) % bs->nranks;
    if (peer_known_gone(bs, peer) || braid_socket_clock_ns() >= deadline) {
      all = 0;
      continue;
    }
    if (bs_send(bs, peer, BS_KIND_NOTICE, 0, data, size, deadline) != ncclSuccess) all = 0;
  }
  bs_ignore_abort = 0;
  return all;
}

/* Under bs->lock: a copy of peer's notice into data (1), or 0. It stays queued: every rank
 * that asks gets it (freed with the bootstrap). */
static int notice_peek(struct braid_bootstrap* bs, int peer, void* data, size_t size) {
  for (struct bs_msg* m = bs->queue; m != NULL; m = m->next) {
    if (m->peer != peer || m->kind != BS_KIND_NOTICE || m->size != size) continue;
    memcpy(data, m->data, size);
    return 1;
  }
  return 0;
}

int braid_bootstrap_notice(struct braid_bootstrap* bs, int peer, void* data, size_t size, int wait_ms) {
  if (bs == NULL || peer < 0 || peer >= bs->nranks || peer == bs->rank) return 0;
  int64_t deadline = braid_socket_deadline_ms(wait_ms);
  struct pollfd* fds = NULL;
  int cap = 0, found = 0;
  pthread_mutex_lock(&bs->lock);
  for (;;) {
    if (bs_progress(bs) != ncclSuccess) break;
    if ((found = notice_peek(bs, peer, data, size)) != 0) break;
    struct bs_peer* p = &bs->peers[peer];
    int64_t now = braid_socket_clock_ns();
    /* its connection to us is closed and read to the end: nothing more will come */
    if ((p->in != NULL && p->in->closed) || now >= deadline) break;
    /* gone without a connection to us: one it opened to tell us may still be in the backlog */
    if (p->in == NULL && (p->out_dead || watch_hung_up(p)) && deadline > now + NOTICE_BACKLOG_MS * NS_PER_MS)
      deadline = now + NOTICE_BACKLOG_MS * NS_PER_MS;
    int n = bs_pollset(bs, &fds, &cap, -1, 0);
    if (n < 0) break;
    bs->nwaiters++;
    pthread_mutex_unlock(&bs->lock);
    int64_t slice = braid_socket_deadline_ms(10);
    (void)braid_socket_poll(fds, n, slice < deadline ? slice : deadline);
    pthread_mutex_lock(&bs->lock);
    bs->nwaiters--;
  }
  pthread_mutex_unlock(&bs->lock);
  free(fds);
  return found;
}
