/*
 * bootstrap_conn.c - a rank's bootstrap, the incoming side: accepting connections, reading
 * their handshakes, reading messages of identified connections into the queue; and what the
 * service thread (bootstrap_service.c) does for a bootstrap nobody waits on.
 *
 * What a stranger can hold is bounded. A connection proves itself with one bs_peer_hello:
 * the communicator's secret and the claimed rank's nonce; until then it is pending, and
 * pending connections are capped per listener (braid_socket_max_pending: oldest dropped first), must
 * complete within BS_HANDSHAKE_MS, and are served whenever the listener is ready, by a waiter
 * or by the service thread. Out of descriptors, accepting backs off instead of failing. An
 * identified connection's message header is checked against BS_MSG_MAX, and its payload
 * buffer grows with the bytes that come, so a forged size costs nothing; a malformed header
 * or an allocation failure drops that connection only. Drops are WARNed at most once per
 * source and interval (braid_socket_warn_drop).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/debug.h"
#include "bootstrap/bootstrap_int.h"

#define BS_PAYLOAD_CHUNK (1u << 20) /* the first allocation for a payload; doubled as it fills */

void bs_in_free(struct bs_in* in) {
  braid_socket_close(&in->sock);
  free(in->payload);
  free(in);
}

/* ---- handshakes ---------------------------------------------------------------------------- */

enum { BS_PENDING_WAIT, BS_PENDING_DROP, BS_PENDING_DONE };

static int bs_pending_drop(struct bs_in* in, const char* why) {
  braid_socket_warn_drop("Bootstrap", &in->sock.addr, "%s", why);
  return BS_PENDING_DROP;
}

/* Reads the handshake of a pending connection; identifies it or drops it. A complete hello
 * waits (past its deadline too) while the table that checks it is not yet in. */
static int bs_pending_step(struct braid_bootstrap* bs, struct bs_in* in, int64_t now) {
  char why[160];
  if (braid_socket_recv_try(&in->sock, &in->hello, sizeof(in->hello), &in->off) != ncclSuccess)
    return bs_pending_drop(in, "closed before completing its handshake");
  if (in->off < sizeof(in->hello)) {
    if (now < in->hs_deadline) return BS_PENDING_WAIT;
    snprintf(why, sizeof(why), "no complete handshake within %d ms", BS_HANDSHAKE_MS);
    return bs_pending_drop(in, why);
  }
  if (!bs->ready) return BS_PENDING_WAIT;
  if (braid_socket_handshake_check(&in->sock, &in->hello.hs, bs->secret, BRAID_SOCKET_TYPE_BOOTSTRAP, "Bootstrap") !=
      ncclSuccess)
    return BS_PENDING_DROP;
  int r = in->hello.rank;
  if (in->hello.hs.arg != BS_CONN_PEER || r < 0 || r >= bs->nranks || in->hello.nranks != bs->nranks) {
    snprintf(why, sizeof(why), "malformed handshake (kind %d, rank %d, nranks %d)", (int)in->hello.hs.arg, r,
             (int)in->hello.nranks);
    return bs_pending_drop(in, why);
  }
  if (in->hello.nonce != bs->table[r].nonce) {
    snprintf(why, sizeof(why), "it claims to be rank %d but does not carry that rank's nonce (another job's rank?)", r);
    return bs_pending_drop(in, why);
  }
  if (bs->peers[r].in != NULL) {
    snprintf(why, sizeof(why), "a second connection claiming to be rank %d", r);
    return bs_pending_drop(in, why);
  }
  in->peer = r;
  in->off = 0;
  bs->peers[r].in = in;
  return BS_PENDING_DONE;
}

/* Runs the handshake step of every pending connection; identified ones become active. */
static void bs_pending_all(struct braid_bootstrap* bs) {
  int64_t now = braid_socket_clock_ns();
  for (struct bs_in** pp = &bs->pending; *pp != NULL;) {
    struct bs_in* in = *pp;
    int st = bs_pending_step(bs, in, now);
    if (st == BS_PENDING_WAIT) {
      pp = &in->next;
      continue;
    }
    *pp = in->next;
    bs->npending--;
    if (st == BS_PENDING_DROP) {
      bs_in_free(in);
    } else {
      in->next = bs->active;
      bs->active = in;
    }
  }
}

/* Over the cap: the oldest pending connection (the list's last) goes. */
static void bs_pending_evict(struct braid_bootstrap* bs) {
  struct bs_in** pp = &bs->pending;
  while ((*pp)->next != NULL) pp = &(*pp)->next;
  struct bs_in* old = *pp;
  *pp = NULL;
  bs->npending--;
  braid_socket_warn_drop("Bootstrap", &old->sock.addr, "%d connections wait for their handshake, the oldest goes",
                         bs->max_pending);
  bs_in_free(old);
}

/* Accepts all that is pending (unless backing off after running out of descriptors). */
static ncclResult_t bs_accept_all(struct braid_bootstrap* bs) {
  if (bs->accept_after != 0 && braid_socket_clock_ns() < bs->accept_after) return ncclSuccess;
  bs->accept_after = 0;
  for (;;) {
    struct braid_socket s;
    int got;
    BRAID_CHECK(braid_socket_accept_try(&bs->listener, &s, &got));
    if (!got) {
      if (bs->listener.err != 0) bs->accept_after = braid_socket_deadline_ms(BRAID_SOCKET_ACCEPT_BACKOFF_MS);
      return ncclSuccess;
    }
    struct bs_in* in = calloc(1, sizeof(*in));
    if (in == NULL) {
      braid_socket_close(&s);
      BRAID_WARN("Bootstrap: failed to allocate %zu bytes", sizeof(*in));
      return ncclSystemError;
    }
    in->sock = s;
    in->peer = -1;
    in->hs_deadline = braid_socket_deadline_ms(BS_HANDSHAKE_MS);
    in->next = bs->pending;
    bs->pending = in;
    if (++bs->npending > bs->max_pending) {
      bs_pending_all(bs); /* those that have said who they are make room first */
      if (bs->npending > bs->max_pending) bs_pending_evict(bs);
    }
  }
}

/* ---- messages ------------------------------------------------------------------------------ */

static ncclResult_t bs_enqueue(struct braid_bootstrap* bs, int peer, const struct bs_hdr* h, char* data) {
  struct bs_msg* m = malloc(sizeof(*m));
  if (m == NULL) {
    BRAID_WARN("Bootstrap: failed to allocate %zu bytes", sizeof(*m));
    return ncclSystemError;
  }
  *m = (struct bs_msg){NULL, peer, h->kind, h->tag, h->size, data};
  *bs->queue_tail = m;
  bs->queue_tail = &m->next;
  return ncclSuccess;
}

struct bs_msg* bs_queue_take(struct braid_bootstrap* bs, int peer, uint32_t kind, uint64_t tag) {
  for (struct bs_msg** pp = &bs->queue; *pp != NULL; pp = &(*pp)->next) {
    struct bs_msg* m = *pp;
    if (m->peer != peer || m->kind != kind || m->tag != tag) continue;
    *pp = m->next;
    if (bs->queue_tail == &m->next) bs->queue_tail = pp;
    return m;
  }
  return NULL;
}

static void bs_in_close(struct bs_in* in, enum braid_socket_fail fail) {
  in->closed = 1;
  in->fail = fail;
  braid_socket_close(&in->sock); /* out of the poll set: EOF would wake it forever */
}

/* A header past BS_MSG_MAX, or memory we do not have: that connection goes, no call fails. */
static void bs_in_reject(struct braid_bootstrap* bs, struct bs_in* in, const char* why) {
  BRAID_WARN("Bootstrap: rank %d (host %s) %s (a message of %llu bytes); closing its connection", in->peer,
             bs->table[in->peer].host, why, (unsigned long long)in->hdr.size);
  bs_in_close(in, BRAID_SOCKET_FAIL_HANDSHAKE);
}

/* Room for the next bytes of the payload: the buffer doubles, up to the header's size. */
static int bs_in_grow(struct bs_in* in) {
  if (in->off < in->cap) return 1;
  size_t cap = in->cap ? 2 * in->cap : BS_PAYLOAD_CHUNK;
  if (cap > in->hdr.size) cap = in->hdr.size;
  char* p = realloc(in->payload, cap);
  if (p == NULL) return 0;
  in->payload = p;
  in->cap = cap;
  return 1;
}

/* Reads all that is available on an identified connection, queueing complete messages. */
static ncclResult_t bs_in_read(struct braid_bootstrap* bs, struct bs_in* in) {
  while (!in->closed) {
    if (!in->in_payload) {
      if (braid_socket_recv_try(&in->sock, &in->hdr, sizeof(in->hdr), &in->off) != ncclSuccess) {
        bs_in_close(in, in->sock.fail);
        break;
      }
      if (in->off < sizeof(in->hdr)) break;
      if (in->hdr.size > BS_MSG_MAX) {
        bs_in_reject(bs, in, "sent a malformed header");
        break;
      }
      in->payload = NULL;
      in->cap = 0;
      in->in_payload = 1;
      in->off = 0;
    }
    if (in->off < in->hdr.size) {
      if (!bs_in_grow(in)) {
        bs_in_reject(bs, in, "sent more than this process can allocate");
        break;
      }
      if (braid_socket_recv_try(&in->sock, in->payload, in->cap, &in->off) != ncclSuccess) {
        bs_in_close(in, in->sock.fail);
        break;
      }
      if (in->off < in->hdr.size) {
        if (in->off < in->cap) break; /* nothing more now */
        continue;
      }
    }
    BRAID_CHECK(bs_enqueue(bs, in->peer, &in->hdr, in->payload));
    in->payload = NULL;
    in->cap = 0;
    in->in_payload = 0;
    in->off = 0;
  }
  return ncclSuccess;
}

ncclResult_t bs_progress(struct braid_bootstrap* bs) {
  BRAID_CHECK(bs_accept_all(bs));
  bs_pending_all(bs);
  for (struct bs_in* in = bs->active; in != NULL; in = in->next) BRAID_CHECK(bs_in_read(bs, in));
  return ncclSuccess;
}

/* ---- poll sets ----------------------------------------------------------------------------- */

static int bs_fds_reserve(struct pollfd** fds_p, int* cap_p, int n) {
  if (n <= *cap_p) return 0;
  struct pollfd* f = realloc(*fds_p, (size_t)n * 2 * sizeof(*f));
  if (f == NULL) {
    BRAID_WARN("Bootstrap: failed to allocate %d poll entries", n * 2);
    return -1;
  }
  *fds_p = f;
  *cap_p = n * 2;
  return 0;
}

static int bs_listening(const struct braid_bootstrap* bs) {
  return bs->accept_after == 0 || braid_socket_clock_ns() >= bs->accept_after;
}

int bs_pollset(struct braid_bootstrap* bs, struct pollfd** fds_p, int* cap_p, int extra_fd, short extra_events) {
  int n = 2 + bs->npending;
  for (struct bs_in* in = bs->active; in != NULL; in = in->next) n++;
  if (bs_fds_reserve(fds_p, cap_p, n) != 0) return -1;
  struct pollfd* fds = *fds_p;
  n = 0;
  if (bs_listening(bs)) fds[n++] = (struct pollfd){.fd = bs->listener.fd, .events = POLLIN};
  for (struct bs_in* in = bs->pending; in != NULL; in = in->next)
    fds[n++] = (struct pollfd){.fd = in->sock.fd, .events = POLLIN};
  for (struct bs_in* in = bs->active; in != NULL; in = in->next)
    if (!in->closed) fds[n++] = (struct pollfd){.fd = in->sock.fd, .events = POLLIN};
  if (extra_fd >= 0) fds[n++] = (struct pollfd){.fd = extra_fd, .events = extra_events};
  return n;
}

/* ---- the service thread's share ------------------------------------------------------------ */

static int bs_peer_gone(struct bs_peer* p) {
  if (p->out_dead || (p->in != NULL && p->in->closed)) return 1;
  struct pollfd f[2];
  int n = 0;
  if (p->in != NULL) f[n++] = (struct pollfd){.fd = p->in->sock.fd, .events = POLLRDHUP};
  if (p->watch.fd >= 0) f[n++] = (struct pollfd){.fd = p->watch.fd, .events = POLLRDHUP};
  if (n > 0 && poll(f, (nfds_t)n, 0) > 0)
    for (int i = 0; i < n; i++)
      if (f[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) return 1;
  return 0;
}

/* A rank that closed or reset its connection to us, or ours to it, or refused us: -1 if none.
 * Non-destructive: POLLRDHUP reports the close even with its last bytes still unread. Of
 * several, the one found gone first (a rank that fails because another died usually leaves
 * later); found in the same check, the lowest rank. */
static int bs_dead_peer(struct braid_bootstrap* bs) {
  int64_t now = braid_socket_clock_ns();
  int first = -1;
  for (int r = 0; r < bs->nranks; r++) {
    struct bs_peer* p = &bs->peers[r];
    if (r == bs->rank || (p->gone_seen_ns == 0 && !bs_peer_gone(p))) continue;
    if (p->gone_seen_ns == 0) p->gone_seen_ns = now;
    if (first < 0 || p->gone_seen_ns < bs->peers[first].gone_seen_ns) first = r;
  }
  return first;
}

int braid_bootstrap_timeout_peer(struct braid_bootstrap* bs) {
  return bs == NULL ? -1 : __atomic_load_n(&bs->timeout_peer, __ATOMIC_ACQUIRE);
}

int braid_bootstrap_dead_peer(struct braid_bootstrap* bs) {
  if (bs == NULL) return -1;
  pthread_mutex_lock(&bs->lock);
  int dead = bs_dead_peer(bs);
  pthread_mutex_unlock(&bs->lock);
  return dead;
}

int bs_service_pass(struct braid_bootstrap* bs) {
  int dead = -1;
  if (pthread_mutex_trylock(&bs->lock) != 0) return -1; /* a waiter serves it */
  if (bs->nwaiters == 0) {
    (void)bs_accept_all(bs); /* failures were logged; the next pass tries again */
    bs_pending_all(bs);
  }
  if (bs->watch != NULL) dead = bs_dead_peer(bs);
  pthread_mutex_unlock(&bs->lock);
  return dead;
}

int bs_service_fds(struct braid_bootstrap* bs, struct pollfd** fds_p, int* cap_p, int n, int64_t* wake_ns) {
  if (pthread_mutex_trylock(&bs->lock) != 0) return n;
  int want = n + 1 + bs->npending + (bs->watch != NULL ? 2 * bs->nranks : 0);
  if (bs_fds_reserve(fds_p, cap_p, want) != 0) goto out;
  struct pollfd* fds = *fds_p;
  if (bs->nwaiters == 0) {
    if (bs_listening(bs))
      fds[n++] = (struct pollfd){.fd = bs->listener.fd, .events = POLLIN};
    else if (bs->accept_after < *wake_ns)
      *wake_ns = bs->accept_after;
    for (struct bs_in* in = bs->pending; in != NULL; in = in->next) {
      if (in->off == sizeof(in->hello)) continue; /* complete, waits for the table: not for bytes */
      fds[n++] = (struct pollfd){.fd = in->sock.fd, .events = POLLIN};
      if (in->hs_deadline < *wake_ns) *wake_ns = in->hs_deadline;
    }
  }
  for (int r = 0; bs->watch != NULL && r < bs->nranks; r++) {
    struct bs_peer* p = &bs->peers[r];
    if (p->in != NULL && !p->in->closed) fds[n++] = (struct pollfd){.fd = p->in->sock.fd, .events = POLLRDHUP};
    if (p->watch.fd >= 0) fds[n++] = (struct pollfd){.fd = p->watch.fd, .events = POLLRDHUP};
  }
out:
  pthread_mutex_unlock(&bs->lock);
  return n;
}
