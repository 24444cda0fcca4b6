/*
 * bootstrap_root.c - the bootstrap root (ncclGetUniqueId's listener thread) and a rank's
 * exchange with it.
 *
 * Protocol. Rank r connects to root floor(r * nroots / nranks) and sends a handshake (that
 * root's secret, type BOOTSTRAP, BS_CONN_RANK) and one bs_up HELLO {rank, nranks, its listen
 * address, hostname, and ids[0]}; then it waits on the same connection for one bs_down. Root 0
 * collects the table. Any other root is a relay: at its first hello it connects to root 0
 * (address and secret from that hello) as BS_CONN_RELAY and forwards each hello as it comes.
 * With all nranks known, root 0 sends {bs_down ok, table} to its ranks and relays; relays pass
 * it on. Failures are decided at root 0 (a relay forwards its own as bs_up ERROR) and every
 * waiting rank gets the text to print: mismatched nranks or a rank twice (ncclInvalidUsage);
 * a rank that left, or BRAID_INIT_TIMEOUT seconds after the first hello with ranks still
 * missing, named (ncclRemoteError). A root serves one communicator, then exits and frees all.
 *
 * One thread multiplexes everything with poll(); a connection must complete its handshake
 * within BS_HANDSHAKE_MS, so a stranger (wrong secret, garbage, silence) is dropped with a
 * rate-limited WARN and delays no one. At most braid_socket_max_pending() connections wait in their
 * handshake (a flood loses its oldest first); out of descriptors, accepting backs off.
 */
#define BRAID_BOOTSTRAP_INTERNAL
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/check.h"
#include "base/debug.h"
#include "base/param.h"
#include "base/socket_pending.h"
#include "bootstrap/bootstrap_int.h"

#define NS_PER_S 1000000000LL
#define BS_LINGER_MS 3000 /* after a failure, ranks arriving late still get the verdict this long */

/* ---- the id and small helpers ------------------------------------------------------------- */

void braid_bootstrap_id_decode(const ncclUniqueId* id, uint64_t* secret_p, union braid_sockaddr* addr_p) {
  memcpy(secret_p, id->internal, sizeof(*secret_p));
  memcpy(addr_p, id->internal + sizeof(uint64_t), sizeof(*addr_p));
}

static void id_encode(ncclUniqueId* id, uint64_t secret, const union braid_sockaddr* addr) {
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &secret, sizeof(secret));
  memcpy(id->internal + sizeof(uint64_t), addr, braid_socket_addr_len(addr));
}

ncclResult_t braid_bootstrap_random_secret(uint64_t* secret_p) {
  uint64_t s = 0;
  while (s == 0 || s == BRAID_BOOTSTRAP_COMM_ID_MAGIC) {
    if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s)) {
      BRAID_WARN("Bootstrap: getrandom failed: %s", strerror(errno));
      return ncclSystemError;
    }
  }
  *secret_p = s;
  return ncclSuccess;
}

void braid_bootstrap_hostname(char* host) {
  if (gethostname(host, BS_HOST_MAX) != 0) snprintf(host, BS_HOST_MAX, "unknown");
  host[BS_HOST_MAX - 1] = '\0';
}

/* ---- the root thread ---------------------------------------------------------------------- */

enum rc_state {
  RC_HANDSHAKE, /* reading handshake + first bs_up */
  RC_RANK,      /* a rank that said hello: waits for the verdict, must stay quiet */
  RC_RELAY,     /* (root 0) a relay root: a stream of bs_up */
};

/* A connection accepted by the root. */
struct rc {
  struct braid_socket sock;
  enum rc_state state;
  int64_t deadline; /* RC_HANDSHAKE: by then or dropped */
  size_t off;       /* bytes read of hs + unit */
  struct braid_socket_handshake hs;
  struct bs_up unit;
  int rank; /* RC_RANK */
  int dead; /* dropped; removed after the pass */
};

struct root {
  struct braid_socket listener;
  int64_t accept_after; /* out of descriptors: accept again from then on */
  int max_handshake;    /* connections in RC_HANDSHAKE at most: the oldest goes */
  uint64_t secret;
  int64_t timeout_s;
  struct rc** conns;
  int nconns, cap;
  int iroot;              /* -1 until the first hello says which root this is */
  int nranks;             /* root 0: -1 until the first hello */
  struct bs_entry* table; /* root 0 */
  unsigned char* arrived;
  int narrived;
  struct bs_hello first; /* the first hello: the reference for consistency checks */
  int64_t first_ns;
  struct braid_socket up; /* a relay's connection to root 0 */
  int finished;           /* done: the thread exits */
  int failed;             /* the verdict is a failure: answer latecomers with it a while */
  struct bs_down verdict; /* the failure */
  int answered, expected; /* rank connections answered; ranks this root serves */
  int64_t linger_until;
};

static void root_free(struct root* rt) {
  for (int i = 0; i < rt->nconns; i++) {
    braid_socket_close(&rt->conns[i]->sock);
    free(rt->conns[i]);
  }
  free(rt->conns);
  braid_socket_close(&rt->listener);
  braid_socket_close(&rt->up);
  free(rt->table);
  free(rt->arrived);
  free(rt);
}

static ncclResult_t root_add_conn(struct root* rt, const struct braid_socket* s) {
  ncclResult_t res = ncclSuccess;
  struct rc* c;
  if (rt->nconns == rt->cap) {
    int cap = rt->cap ? 2 * rt->cap : 16;
    struct rc** conns = realloc(rt->conns, (size_t)cap * sizeof(*conns));
    if (conns == NULL) {
      BRAID_WARN("Bootstrap root: failed to allocate %d connections", cap);
      return ncclSystemError;
    }
    rt->conns = conns;
    rt->cap = cap;
  }
  BRAID_CALLOC_GOTO(c, 1, res, out);
  c->sock = *s;
  c->state = RC_HANDSHAKE;
  c->deadline = braid_socket_deadline_ms(BS_HANDSHAKE_MS);
  rt->conns[rt->nconns++] = c;
out:
  return res;
}

static void root_send_one(struct rc* c, const struct bs_down* d, const struct bs_entry* table) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  int64_t deadline = braid_socket_deadline_ms(5000);
  ncclResult_t res = braid_socket_send(&c->sock, d, sizeof(*d), NULL, deadline);
  if (res == ncclSuccess && d->result == ncclSuccess)
    res = braid_socket_send(&c->sock, table, (size_t)d->nranks * sizeof(*table), NULL, deadline);
  if (res != ncclSuccess)
    BRAID_INFO(BRAID_LOG_BOOTSTRAP, "Bootstrap root: could not answer %s: it %s",
               braid_socket_addr_str(&c->sock.addr, buf), braid_socket_fail_str(c->sock.fail));
}

/* Success: the table to every rank and relay connection; the thread is done. */
static void root_succeed(struct root* rt, const struct bs_down* d, const struct bs_entry* table) {
  /* closed first: once a rank has the table the address is free again (NCCL_COMM_ID reuses it) */
  braid_socket_close(&rt->listener);
  for (int i = 0; i < rt->nconns; i++)
    if (!rt->conns[i]->dead && rt->conns[i]->state != RC_HANDSHAKE) root_send_one(rt->conns[i], d, table);
  rt->finished = 1;
}

/* After a failure: a rank or relay connection gets the verdict and is closed. */
static void root_answer(struct root* rt, struct rc* c) {
  root_send_one(c, &rt->verdict, NULL);
  braid_socket_close(&c->sock);
  c->dead = 1;
  rt->answered += c->state == RC_RANK;
}

/* Ranks served by this root directly (known from the first hello). */
static int root_slice(const struct root* rt) {
  int n = 0;
  for (int r = 0; rt->first_ns != 0 && r < rt->first.nranks; r++)
    n += (int)((int64_t)r * rt->first.nroots / rt->first.nranks) == rt->iroot;
  return n;
}

static int rc_identify(struct root* rt, struct rc* c);

/* The communicator cannot be built: tell every rank (a relay also tells root 0), then keep
 * telling ranks that arrive late, for BS_LINGER_MS or until all of this root's ranks heard. */
static void root_fail(struct root* rt, ncclResult_t result, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void root_fail(struct root* rt, ncclResult_t result, const char* fmt, ...) {
  va_list ap;
  if (rt->failed || rt->finished) return;
  memset(&rt->verdict, 0, sizeof(rt->verdict));
  rt->verdict.result = result;
  va_start(ap, fmt);
  vsnprintf(rt->verdict.text, sizeof(rt->verdict.text), fmt, ap);
  va_end(ap);
  BRAID_INFO(BRAID_LOG_BOOTSTRAP, "Bootstrap root %d: %s", rt->iroot, rt->verdict.text);
  rt->failed = 1;
  rt->linger_until = braid_socket_deadline_ms(BS_LINGER_MS);
  rt->expected = root_slice(rt);
  if (rt->iroot > 0 && rt->up.fd >= 0) {
    struct bs_up u;
    memset(&u, 0, sizeof(u));
    u.what = BS_UP_ERROR;
    u.result = result;
    memcpy(u.text, rt->verdict.text, sizeof(u.text));
    (void)braid_socket_send(&rt->up, &u, sizeof(u), NULL, braid_socket_deadline_ms(5000));
  }
  braid_socket_close(&rt->up);
  /* a hello that is here but not yet read gets the verdict too (closing it unread: a reset) */
  for (int i = 0; i < rt->nconns; i++)
    if (!rt->conns[i]->dead && rt->conns[i]->state == RC_HANDSHAKE) (void)rc_identify(rt, rt->conns[i]);
  for (int i = 0; i < rt->nconns; i++)
    if (!rt->conns[i]->dead && rt->conns[i]->state != RC_HANDSHAKE) root_answer(rt, rt->conns[i]);
}

static int root_done(const struct root* rt) {
  return rt->finished || (rt->failed && ((rt->expected > 0 && rt->answered >= rt->expected) ||
                                         braid_socket_clock_ns() >= rt->linger_until));
}

/* A relay: connect to root 0, named by the first hello. */
static void root_connect_up(struct root* rt) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  int64_t deadline = rt->timeout_s > 0 ? rt->first_ns + (rt->timeout_s + bs_grace_s(rt->timeout_s)) * NS_PER_S : 0;
  struct braid_socket_handshake hs = {rt->first.root0_secret, BRAID_SOCKET_TYPE_BOOTSTRAP, BS_CONN_RELAY};
  ncclResult_t res = braid_socket_connect(&rt->up, &rt->first.root0_addr, 1, NULL, deadline);
  if (res == ncclSuccess) res = braid_socket_send(&rt->up, &hs, sizeof(hs), NULL, deadline);
  if (res != ncclSuccess) {
    enum braid_socket_fail fail = rt->up.fail;
    braid_socket_close(&rt->up);
    root_fail(rt, ncclRemoteError, "Bootstrap: root %d cannot reach bootstrap root 0 at %s: it %s", rt->iroot,
              braid_socket_addr_str(&rt->first.root0_addr, buf), braid_socket_fail_str(fail));
  }
}

/* Root 0: one more rank; the verdict when it was the last. */
static void root_record(struct root* rt, const struct bs_hello* h) {
  if (rt->nranks < 0) {
    rt->nranks = h->nranks;
    rt->table = calloc((size_t)h->nranks, sizeof(*rt->table));
    rt->arrived = calloc((size_t)h->nranks, 1);
    if (rt->table == NULL || rt->arrived == NULL) {
      root_fail(rt, ncclSystemError, "Bootstrap: the root failed to allocate a table of %d ranks", h->nranks);
      return;
    }
  }
  if (h->nranks != rt->nranks) {
    root_fail(rt, ncclInvalidUsage,
              "Bootstrap: rank %d (host %.64s) called init with nranks %d, but rank %d (host %.64s) with nranks %d",
              h->rank, h->entry.host, h->nranks, rt->first.rank, rt->first.entry.host, rt->nranks);
    return;
  }
  if (rt->arrived[h->rank]) {
    root_fail(rt, ncclInvalidUsage, "Bootstrap: rank %d joined twice, from host %.64s and from host %.64s", h->rank,
              rt->table[h->rank].host, h->entry.host);
    return;
  }
  rt->table[h->rank] = h->entry;
  rt->table[h->rank].host[BS_HOST_MAX - 1] = '\0';
  rt->arrived[h->rank] = 1;
  if (++rt->narrived < rt->nranks) return;
  struct bs_down d;
  memset(&d, 0, sizeof(d));
  d.result = ncclSuccess;
  d.nranks = rt->nranks;
  BRAID_INFO(BRAID_LOG_BOOTSTRAP, "Bootstrap root: all %d ranks arrived", rt->nranks);
  root_succeed(rt, &d, rt->table);
}

/* Root 0 checks and records a hello (direct: from a rank's own connection); a relay forwards it. */
static void root_hello(struct root* rt, const struct bs_hello* h, int direct) {
  if (rt->first_ns == 0) {
    if (rt->iroot < 0) rt->iroot = direct ? h->iroot : 0; /* only root 0 hears from relays */
    rt->first = *h;
    rt->first_ns = braid_socket_clock_ns();
    if (rt->iroot > 0) root_connect_up(rt);
  }
  if (rt->finished || rt->failed) return;
  if (direct && h->iroot != rt->iroot) {
    root_fail(rt, ncclInvalidUsage,
              "Bootstrap: rank %d (host %.64s) took this root for root %d of %d, but it is root %d", h->rank,
              h->entry.host, h->iroot, h->nroots, rt->iroot);
  } else if (rt->iroot > 0) {
    struct bs_up u;
    memset(&u, 0, sizeof(u));
    u.what = BS_UP_HELLO;
    u.hello = *h;
    if (braid_socket_send(&rt->up, &u, sizeof(u), NULL, braid_socket_deadline_ms(5000)) != ncclSuccess)
      root_fail(rt, ncclRemoteError, "Bootstrap: root %d lost its connection to bootstrap root 0 (it %s)", rt->iroot,
                braid_socket_fail_str(rt->up.fail));
  } else {
    root_record(rt, h);
  }
}

/* A hello that could come from no rank of a communicator: drop the connection. */
static int hello_malformed(const struct bs_hello* h) {
  return h->nranks < 1 || h->rank < 0 || h->rank >= h->nranks || h->nroots < 1 || h->nroots > h->nranks ||
         h->iroot < 0 || h->iroot >= h->nroots;
}

static void rc_drop(struct rc* c, const char* why) {
  braid_socket_warn_drop("Bootstrap root", &c->sock.addr, "%s", why);
  braid_socket_close(&c->sock);
  c->dead = 1;
}

/* Reads hs (first) and then one bs_up; returns 1 when a whole unit is in c->unit. */
static int rc_read_unit(struct rc* c, int with_hs, ncclResult_t* res_p) {
  size_t hs = with_hs ? sizeof(c->hs) : 0;
  *res_p = ncclSuccess;
  if (c->off < hs) {
    *res_p = braid_socket_recv_try(&c->sock, &c->hs, hs, &c->off);
    if (*res_p != ncclSuccess || c->off < hs) return 0;
  }
  size_t uoff = c->off - hs;
  *res_p = braid_socket_recv_try(&c->sock, &c->unit, sizeof(c->unit), &uoff);
  c->off = hs + uoff;
  if (*res_p != ncclSuccess || uoff < sizeof(c->unit)) return 0;
  c->off = 0;
  c->unit.hello.entry.host[BS_HOST_MAX - 1] = '\0';
  c->unit.text[BS_TEXT_MAX - 1] = '\0';
  return 1;
}

/* Reads and checks the handshake and first unit: 1 when the connection is a rank or a relay
 * with its first unit in c->unit, 0 while incomplete, -1 when dropped. */
static int rc_identify(struct root* rt, struct rc* c) {
  ncclResult_t res;
  if (!rc_read_unit(c, 1, &res)) {
    if (res == ncclSuccess) return 0;
    rc_drop(c, "closed before completing its handshake");
    return -1;
  }
  if (braid_socket_handshake_check(&c->sock, &c->hs, rt->secret, BRAID_SOCKET_TYPE_BOOTSTRAP, "Bootstrap root") !=
      ncclSuccess) {
    braid_socket_close(&c->sock);
    c->dead = 1;
    return -1;
  }
  int relay = c->hs.arg == BS_CONN_RELAY;
  int hello = c->unit.what == BS_UP_HELLO;
  if ((c->hs.arg != BS_CONN_RANK && !relay) || (relay && rt->iroot > 0) || (hello && hello_malformed(&c->unit.hello)) ||
      (!hello && !(relay && c->unit.what == BS_UP_ERROR))) {
    rc_drop(c, "malformed hello");
    return -1;
  }
  c->state = relay ? RC_RELAY : RC_RANK;
  c->rank = c->unit.hello.rank;
  return 1;
}

static void rc_handshake(struct root* rt, struct rc* c) {
  if (rc_identify(rt, c) <= 0) return;
  if (rt->failed) {
    root_answer(rt, c);
    return;
  }
  if (c->state == RC_RELAY && rt->iroot < 0) rt->iroot = 0;
  if (c->unit.what == BS_UP_HELLO)
    root_hello(rt, &c->unit.hello, c->state == RC_RANK);
  else
    root_fail(rt, c->unit.result, "%s", c->unit.text);
}

/* A relay root's stream of bs_up (root 0). */
static void rc_relay(struct root* rt, struct rc* c) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  ncclResult_t res = ncclSuccess;
  while (!rt->finished && !rt->failed && rc_read_unit(c, 0, &res)) {
    if (c->unit.what == BS_UP_ERROR)
      root_fail(rt, c->unit.result, "%s", c->unit.text);
    else if (c->unit.what != BS_UP_HELLO || hello_malformed(&c->unit.hello))
      root_fail(rt, ncclInternalError, "Bootstrap: malformed message from a relay root at %s",
                braid_socket_addr_str(&c->sock.addr, buf));
    else
      root_hello(rt, &c->unit.hello, 0);
  }
  if (res != ncclSuccess && !rt->finished && !rt->failed) {
    braid_socket_close(&c->sock);
    c->dead = 1;
    root_fail(rt, ncclRemoteError, "Bootstrap: lost the connection from a relay bootstrap root at %s (it %s)",
              braid_socket_addr_str(&c->sock.addr, buf), braid_socket_fail_str(c->sock.fail));
  }
}

/* A readable connection. */
static void rc_progress(struct root* rt, struct rc* c) {
  if (c->state == RC_HANDSHAKE) {
    rc_handshake(rt, c);
  } else if (c->state == RC_RELAY) {
    rc_relay(rt, c);
  } else { /* RC_RANK: a rank that said hello only ever closes (it left) */
    char byte;
    size_t off = 0;
    ncclResult_t res = braid_socket_recv_try(&c->sock, &byte, 1, &off);
    if (res == ncclSuccess && off == 0) return;
    braid_socket_close(&c->sock);
    c->dead = 1;
    root_fail(rt, ncclRemoteError, "Bootstrap: rank %d (host %.64s) left during init (it %s)", c->rank,
              c->unit.hello.entry.host, off ? "sent unexpected data" : braid_socket_fail_str(c->sock.fail));
  }
}

/* A relay: root 0's verdict arrived (or root 0 went away). */
static void root_read_up(struct root* rt) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  struct bs_down d;
  struct bs_entry* table = NULL;
  int64_t deadline = braid_socket_deadline_ms(5000);
  ncclResult_t res = braid_socket_recv(&rt->up, &d, sizeof(d), NULL, deadline);
  if (res == ncclSuccess && d.result == ncclSuccess) {
    table = d.nranks > 0 ? calloc((size_t)d.nranks, sizeof(*table)) : NULL;
    res = table == NULL ? ncclSystemError
                        : braid_socket_recv(&rt->up, table, (size_t)d.nranks * sizeof(*table), NULL, deadline);
  }
  braid_socket_close(&rt->up);
  d.text[BS_TEXT_MAX - 1] = '\0';
  if (res != ncclSuccess)
    root_fail(rt, ncclRemoteError, "Bootstrap: root %d lost its connection to bootstrap root 0 at %s (it %s)",
              rt->iroot, braid_socket_addr_str(&rt->first.root0_addr, buf), braid_socket_fail_str(rt->up.fail));
  else if (d.result != ncclSuccess)
    root_fail(rt, d.result, "%s", d.text);
  else
    root_succeed(rt, &d, table);
  free(table);
}

/* Ranks still missing, as "3,5,9" (cut with ",..." when long). */
static int root_missing(const struct root* rt, char* buf, size_t len) {
  size_t o = 0;
  int count = 0;
  buf[0] = '\0';
  for (int r = 0; r < rt->nranks; r++) {
    if (rt->arrived[r]) continue;
    count++;
    if (o + 16 >= len) {
      if (o + 4 < len && strcmp(buf + o - 4, ",...") != 0) o += (size_t)snprintf(buf + o, len - o, ",...");
      continue;
    }
    o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", r);
  }
  return count;
}

static void root_check_deadlines(struct root* rt) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX], missing[256];
  int64_t now = braid_socket_clock_ns();
  for (int i = 0; i < rt->nconns; i++) {
    struct rc* c = rt->conns[i];
    if (!c->dead && c->state == RC_HANDSHAKE && now >= c->deadline) {
      snprintf(missing, sizeof(missing), "no complete handshake within %d ms", BS_HANDSHAKE_MS);
      rc_drop(c, missing);
    }
  }
  if (rt->first_ns == 0 || rt->timeout_s <= 0 || rt->finished || rt->failed) return;
  if (rt->iroot == 0 && now >= rt->first_ns + rt->timeout_s * NS_PER_S) {
    int n = root_missing(rt, missing, sizeof(missing));
    root_fail(rt, ncclRemoteError, "Bootstrap: timeout after %lld s waiting for rank%s %s of %d",
              (long long)rt->timeout_s, n > 1 ? "s" : "", missing, rt->nranks);
  } else if (rt->iroot > 0 && now >= rt->first_ns + (rt->timeout_s + bs_grace_s(rt->timeout_s)) * NS_PER_S) {
    root_fail(rt, ncclRemoteError, "Bootstrap: root %d: timeout after %lld s waiting for bootstrap root 0 at %s",
              rt->iroot, (long long)rt->timeout_s, braid_socket_addr_str(&rt->first.root0_addr, buf));
  }
}

/* Forget dropped connections. */
static void root_reap(struct root* rt) {
  for (int i = 0; i < rt->nconns;) {
    if (rt->conns[i]->dead) {
      free(rt->conns[i]);
      rt->conns[i] = rt->conns[--rt->nconns];
    } else {
      i++;
    }
  }
}

/* Over the cap of connections still in their handshake: the oldest goes. */
static void root_evict_oldest(struct root* rt) {
  struct rc* old = NULL;
  for (int i = 0; i < rt->nconns; i++) {
    struct rc* c = rt->conns[i];
    if (!c->dead && c->state == RC_HANDSHAKE && (old == NULL || c->deadline < old->deadline)) old = c;
  }
  if (old == NULL) return;
  char why[96];
  snprintf(why, sizeof(why), "%d connections wait for their handshake, the oldest goes", rt->max_handshake);
  rc_drop(old, why);
}

/* Accepts what waits (unless backing off, out of descriptors); reads each hello at once (a
 * rank sends it right after connecting), so strangers alone fill the handshake slots. */
static ncclResult_t root_accept_all(struct root* rt) {
  if (rt->accept_after != 0 && braid_socket_clock_ns() < rt->accept_after) return ncclSuccess;
  rt->accept_after = 0;
  for (;;) {
    struct braid_socket s;
    int got;
    BRAID_CHECK(braid_socket_accept_try(&rt->listener, &s, &got));
    if (!got) {
      if (rt->listener.err != 0) rt->accept_after = braid_socket_deadline_ms(BRAID_SOCKET_ACCEPT_BACKOFF_MS);
      return ncclSuccess;
    }
    if (root_add_conn(rt, &s) != ncclSuccess) { /* out of memory: the root gives up (else it may idle forever) */
      braid_socket_close(&s);
      root_fail(rt, ncclSystemError, "Bootstrap: the root could not take a connection (out of memory)");
      return ncclSuccess;
    }
    struct rc* c = rt->conns[rt->nconns - 1];
    rc_progress(rt, c);
    if (rt->finished) return ncclSuccess;
    int n = 0;
    for (int i = 0; i < rt->nconns; i++) n += !rt->conns[i]->dead && rt->conns[i]->state == RC_HANDSHAKE;
    if (n > rt->max_handshake) root_evict_oldest(rt);
    root_reap(rt);
  }
}

/* One pass after a poll: accept, read what is readable, drop the dead, check the clocks. */
static ncclResult_t root_step(struct root* rt, const struct pollfd* fds, int nfds) {
  for (int i = 2; i < nfds && !rt->finished; i++)
    if (fds[i].revents != 0 && !rt->conns[i - 2]->dead) rc_progress(rt, rt->conns[i - 2]);
  if (!rt->finished && !rt->failed && fds[1].revents != 0) root_read_up(rt);
  root_reap(rt);
  if (!rt->finished) BRAID_CHECK(root_accept_all(rt));
  if (!rt->finished) root_check_deadlines(rt);
  root_reap(rt); /* poll() refuses more entries than RLIMIT_NOFILE, dead ones included */
  return ncclSuccess;
}

static void* root_main(void* arg) {
  struct root* rt = arg;
  struct pollfd* fds = NULL;
  int cap = 0;
  while (!root_done(rt)) {
    int n = rt->nconns + 2;
    if (n > cap) {
      struct pollfd* f = realloc(fds, (size_t)n * 2 * sizeof(*f));
      if (f == NULL) {
        root_fail(rt, ncclSystemError, "Bootstrap: the root failed to allocate %d poll entries", n);
        break;
      }
      fds = f;
      cap = n * 2;
    }
    int listening = rt->accept_after == 0 || braid_socket_clock_ns() >= rt->accept_after;
    fds[0] = (struct pollfd){.fd = listening ? rt->listener.fd : -1, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = rt->up.fd, .events = POLLIN}; /* -1: ignored by poll */
    for (int i = 0; i < rt->nconns; i++) fds[i + 2] = (struct pollfd){.fd = rt->conns[i]->sock.fd, .events = POLLIN};
    if (braid_socket_poll(fds, n, 0) != ncclSuccess || root_step(rt, fds, n) != ncclSuccess)
      root_fail(rt, ncclSystemError, "Bootstrap: the root failed (see the previous message)");
  }
  free(fds);
  root_free(rt);
  return NULL;
}

ncclResult_t braid_bootstrap_root_start(const union braid_sockaddr* addr, uint64_t secret,
                                        union braid_sockaddr* bound_p) {
  ncclResult_t res = ncclSuccess;
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  struct root* rt;
  pthread_attr_t attr;
  pthread_t thread;
  BRAID_CALLOC_GOTO(rt, 1, res, out);
  braid_socket_init(&rt->up);
  BRAID_CHECK_GOTO(braid_socket_listen(&rt->listener, addr), res, err_free);
  rt->secret = secret;
  rt->timeout_s = braid_param_int(BRAID_PARAM_INIT_TIMEOUT);
  rt->iroot = rt->nranks = -1;
  rt->max_handshake = braid_socket_max_pending();
  union braid_sockaddr bound = rt->listener.addr;
  BRAID_PTHREADCHECK_GOTO(pthread_attr_init(&attr), "pthread_attr_init", res, err_free);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  res = pthread_create(&thread, &attr, root_main, rt) == 0 ? ncclSuccess : ncclSystemError;
  pthread_attr_destroy(&attr);
  if (res != ncclSuccess) {
    BRAID_WARN("Bootstrap: cannot start the root thread: %s", strerror(errno));
    goto err_free;
  }
  BRAID_INFO(BRAID_LOG_BOOTSTRAP, "Bootstrap: root listening on %s", braid_socket_addr_str(&bound, buf));
  if (bound_p != NULL) *bound_p = bound;
  return ncclSuccess;
err_free:
  braid_socket_close(&rt->listener);
  free(rt);
out:
  return res;
}

ncclResult_t braid_bootstrap_get_unique_id(ncclUniqueId* id) {
  union braid_sockaddr addr;
  uint64_t secret;
  if (id == NULL) {
    BRAID_WARN("ncclGetUniqueId: invalid argument uniqueId NULL");
    return ncclInvalidArgument;
  }
  const char* comm_id = braid_param_str(BRAID_PARAM_COMM_ID);
  if (comm_id != NULL && comm_id[0] != '\0') {
    if (braid_socket_addr_from_string(comm_id, &addr) != ncclSuccess || braid_socket_addr_port(&addr) == 0) {
      BRAID_WARN("NCCL_COMM_ID=%s is invalid: expected host:port or [ipv6]:port with a non-zero port", comm_id);
      return ncclInvalidArgument;
    }
    secret = BRAID_BOOTSTRAP_COMM_ID_MAGIC;
  } else {
    BRAID_CHECK(braid_socket_bootstrap_interface(NULL, &addr));
    braid_socket_addr_set_port(&addr, 0);
    BRAID_CHECK(braid_bootstrap_random_secret(&secret));
    BRAID_CHECK(braid_bootstrap_root_start(&addr, secret, &addr));
  }
  id_encode(id, secret, &addr);
  return ncclSuccess;
}

/* ---- a rank's side ------------------------------------------------------------------------ */

static int aborted(volatile uint32_t* abort_flag) {
  return abort_flag != NULL && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE) != 0;
}

/* The WARN for a failed step of the exchange with the root at `addr`. Once the abort flag is
 * up, whatever else went wrong (others aborting close their connections) is the abort. */
static ncclResult_t exchange_error(ncclResult_t res, const struct braid_socket* s, int rank, int64_t timeout_s,
                                   const union braid_sockaddr* addr, const char* doing, volatile uint32_t* abort_flag) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  braid_socket_addr_str(addr, buf);
  if (s->fail == BRAID_SOCKET_FAIL_ABORTED || aborted(abort_flag)) {
    BRAID_WARN("Bootstrap: rank %d: init aborted while %s the bootstrap root at %s", rank, doing, buf);
    res = ncclInvalidUsage;
  } else if (s->fail == BRAID_SOCKET_FAIL_TIMEOUT) {
    BRAID_WARN("Bootstrap: rank %d: timeout after %lld s %s the bootstrap root at %s", rank, (long long)timeout_s,
               doing, buf);
  } else if (res == ncclRemoteError) {
    BRAID_WARN("Bootstrap: rank %d: error %s the bootstrap root at %s: it %s", rank, doing, buf,
               braid_socket_fail_str(s->fail));
  }
  return res;
}

ncclResult_t braid_bootstrap_root_exchange(const ncclUniqueId* ids, int nids, int rank, int nranks,
                                           const struct bs_entry* me, volatile uint32_t* abort_flag,
                                           struct bs_entry* table) {
  ncclResult_t res = ncclSuccess;
  struct braid_socket s;
  struct bs_up u;
  struct bs_down d;
  uint64_t secret;
  union braid_sockaddr addr;
  int64_t timeout_s = braid_param_int(BRAID_PARAM_INIT_TIMEOUT);
  int64_t t = timeout_s > 0 ? timeout_s * NS_PER_S : 0;
  int iroot = (int)((int64_t)rank * nids / nranks);
  memset(&u, 0, sizeof(u));
  u.what = BS_UP_HELLO;
  u.hello = (struct bs_hello){.rank = rank, .nranks = nranks, .nroots = nids, .iroot = iroot, .entry = *me};
  braid_bootstrap_id_decode(&ids[0], &u.hello.root0_secret, &u.hello.root0_addr);
  braid_bootstrap_id_decode(&ids[iroot], &secret, &addr);
  struct braid_socket_handshake hs = {secret, BRAID_SOCKET_TYPE_BOOTSTRAP, BS_CONN_RANK};

  braid_socket_init(&s);
  res = braid_socket_connect(&s, &addr, 1, abort_flag, t ? braid_socket_clock_ns() + t : 0);
  if (res != ncclSuccess) return exchange_error(res, &s, rank, timeout_s, &addr, "connecting to", abort_flag);
  /* the root answers within the timeout after the first hello; allow a grace on top */
  int64_t deadline = t ? braid_socket_clock_ns() + t + bs_grace_s(timeout_s) * NS_PER_S : 0;
  res = braid_socket_send(&s, &hs, sizeof(hs), abort_flag, deadline);
  if (res == ncclSuccess) res = braid_socket_send(&s, &u, sizeof(u), abort_flag, deadline);
  if (res != ncclSuccess) {
    res = exchange_error(res, &s, rank, timeout_s, &addr, "sending its hello to", abort_flag);
    goto out;
  }
  res = braid_socket_recv(&s, &d, sizeof(d), abort_flag, deadline);
  if (res != ncclSuccess) {
    res = exchange_error(res, &s, rank, timeout_s, &addr, "waiting for the other ranks at", abort_flag);
    goto out;
  }
  d.text[BS_TEXT_MAX - 1] = '\0';
  if (d.result != ncclSuccess && aborted(abort_flag)) {
    res = exchange_error(ncclInvalidUsage, &s, rank, timeout_s, &addr, "waiting for the other ranks at", abort_flag);
    goto out;
  }
  if (d.result != ncclSuccess) {
    BRAID_WARN("%s", d.text);
    res = d.result > ncclSuccess && d.result < ncclNumResults ? (ncclResult_t)d.result : ncclRemoteError;
    goto out;
  }
  if (d.nranks != nranks) {
    BRAID_WARN("Bootstrap: rank %d: the root sent a table of %d ranks, expected %d", rank, d.nranks, nranks);
    res = ncclInternalError;
    goto out;
  }
  res = braid_socket_recv(&s, table, (size_t)nranks * sizeof(*table), abort_flag, deadline);
  if (res != ncclSuccess) res = exchange_error(res, &s, rank, timeout_s, &addr, "reading the table from", abort_flag);
  for (int r = 0; r < nranks && res == ncclSuccess; r++) table[r].host[BS_HOST_MAX - 1] = '\0';
out:
  braid_socket_close(&s);
  return res;
}
