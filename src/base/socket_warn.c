/*
 * socket_warn.c - the rate-limited WARN of connections dropped before they proved who they
 * are (socket.h: braid_socket_warn_drop), so a flood of strangers costs a line per source
 * host and interval, with a count, instead of a line per connection.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/debug.h"
#include "base/socket.h"

/* ---- rate-limited drop warnings ------------------------------------------------------------ */

#define DROP_SLOTS 32

/* One (context, source host) pair that was warned about. */
struct drop_slot {
  char ctx[32];
  union braid_sockaddr host; /* port 0 */
  int64_t last_ns;           /* the last line's time; 0: free */
  int quiet;                 /* dropped since without a line */
};

static pthread_mutex_t drop_lock = PTHREAD_MUTEX_INITIALIZER;
static struct drop_slot drop_slots[DROP_SLOTS];

/* The slot of (ctx, host), or the least recently used one (reset) when none matches. */
static struct drop_slot* drop_slot_of(const char* ctx, const union braid_sockaddr* host) {
  struct drop_slot* lru = &drop_slots[0];
  for (int i = 0; i < DROP_SLOTS; i++) {
    struct drop_slot* d = &drop_slots[i];
    if (d->last_ns != 0 && strcmp(d->ctx, ctx) == 0 && braid_socket_addr_equal(&d->host, host)) return d;
    if (d->last_ns < lru->last_ns) lru = d;
  }
  memset(lru, 0, sizeof(*lru));
  snprintf(lru->ctx, sizeof(lru->ctx), "%s", ctx);
  lru->host = *host;
  return lru;
}

/* 1 when a line about (ctx, from) is due now; *quiet_p: lines skipped since the last one. */
int braid_socket_warn_due(const char* ctx, const union braid_sockaddr* from, int* quiet_p) {
  union braid_sockaddr host;
  memset(&host, 0, sizeof(host));
  if (braid_socket_addr_valid(from)) memcpy(&host, from, braid_socket_addr_len(from));
  braid_socket_addr_set_port(&host, 0);
  int64_t now = braid_socket_clock_ns();
  pthread_mutex_lock(&drop_lock);
  struct drop_slot* d = drop_slot_of(ctx, &host);
  int due = d->last_ns == 0 || now - d->last_ns >= BRAID_SOCKET_DROP_WARN_S * 1000000000LL;
  if (due) {
    *quiet_p = d->quiet;
    d->quiet = 0;
    d->last_ns = now;
  } else {
    d->quiet++;
  }
  pthread_mutex_unlock(&drop_lock);
  return due;
}

void braid_socket_warn_drop(const char* ctx, const union braid_sockaddr* from, const char* fmt, ...) {
  char why[256], buf[BRAID_SOCKET_ADDR_STR_MAX];
  int quiet;
  if (!braid_socket_warn_due(ctx, from, &quiet)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  /* printed as a WARN, not recorded: a stranger is no caller's error (ncclGetLastError keeps
   * the message of what really failed, even when this line comes later from another thread) */
  uint64_t subsys = strncmp(ctx, "NET", 3) == 0 ? BRAID_LOG_NET : BRAID_LOG_BOOTSTRAP;
  if (quiet > 0)
    braid_debug_log(BRAID_LOG_WARN, subsys, __FILE__, __LINE__,
                    "%s: dropping connection from %s: %s (and %d more from that host since the last such line)", ctx,
                    braid_socket_addr_str(from, buf), why, quiet);
  else
    braid_debug_log(BRAID_LOG_WARN, subsys, __FILE__, __LINE__, "%s: dropping connection from %s: %s", ctx,
                    braid_socket_addr_str(from, buf), why);
}
