/*
 * socket.h - TCP sockets for braid's out-of-band traffic: the bootstrap (bootstrap.c) and the
 * socket network transport. Addresses, interface selection as NCCL does it
 * (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY), and listen / accept / connect / send / recv.
 *
 * No call blocks without bound. File descriptors are non-blocking and close-on-exec; every
 * wait is a poll() of at most BRAID_SOCKET_SLICE_MS that checks the caller's abort flag (may
 * be NULL) and an absolute deadline (CLOCK_MONOTONIC ns, 0: none). The `_try` calls never
 * wait: they move what the kernel accepts now and advance *off.
 *
 * Results: ncclSuccess; ncclInvalidUsage when the abort flag was seen; ncclRemoteError when
 * the peer is the cause (closed, reset, refused, deadline passed): s->fail says which, and the
 * socket layer does not WARN, because the caller knows who the peer is and says so;
 * ncclSystemError (with a WARN) for local failures; ncclInvalidArgument for bad arguments.
 */
#ifndef BRAID_SOCKET_H
#define BRAID_SOCKET_H

#include <netinet/in.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "nccl.h"

#define BRAID_SOCKET_NAME_MAX 16     /* an interface name with its NUL (IFNAMSIZ) */
#define BRAID_SOCKET_ADDR_STR_MAX 80 /* "ffff::1%eth0<65535>" and the like */
#define BRAID_SOCKET_SLICE_MS 100    /* the longest single wait before flags are checked again */

union braid_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

/* What a connection is for: the `type` of its handshake (NCCL's numbering). */
enum braid_socket_type {
  BRAID_SOCKET_TYPE_BOOTSTRAP = 1,
  BRAID_SOCKET_TYPE_PROXY = 2,
  BRAID_SOCKET_TYPE_NET = 3,
  BRAID_SOCKET_TYPE_IB_OOB = 4,
  BRAID_SOCKET_TYPE_RAS = 5,
};

/* The first bytes the connecting side sends on every connection. A server drops (with a WARN
 * naming the remote address) any connection whose secret or type is wrong. */
struct braid_socket_handshake {
  uint64_t secret; /* the job's secret: the unique id's first 8 bytes */
  int32_t type;    /* enum braid_socket_type */
  int32_t arg;     /* the user's: e.g. the bootstrap's connection kind */
};

/* Why the last call on a socket failed. */
enum braid_socket_fail {
  BRAID_SOCKET_FAIL_NONE = 0,
  BRAID_SOCKET_FAIL_CLOSED,      /* orderly close (EOF, EPIPE) */
  BRAID_SOCKET_FAIL_RESET,       /* ECONNRESET and other errors of an established connection */
  BRAID_SOCKET_FAIL_REFUSED,     /* nobody listens there */
  BRAID_SOCKET_FAIL_UNREACHABLE, /* no route, connect timed out in the kernel */
  BRAID_SOCKET_FAIL_TIMEOUT,     /* the caller's deadline passed */
  BRAID_SOCKET_FAIL_ABORTED,     /* the caller's abort flag was set */
  BRAID_SOCKET_FAIL_HANDSHAKE,   /* the peer's handshake was wrong */
  BRAID_SOCKET_FAIL_SYSTEM,      /* a local error (already logged) */
};

struct braid_socket {
  int fd;                      /* -1 when closed */
  union braid_sockaddr addr;   /* connected: the peer; listening: the bound address */
  enum braid_socket_fail fail; /* why the last failed call failed */
  int err;                     /* its errno, when there was one */
};

/* ---- time ---- */
int64_t braid_socket_clock_ns(void); /* CLOCK_MONOTONIC */
/* A network interface's link speed in Mb/s from sysfs; 10000 when it says nothing (lo and
 * virtual links), as the net plugins report it. */
int braid_socket_if_speed(const char* ifname);
int64_t braid_socket_deadline_ms(int64_t ms); /* now + ms, as a deadline */

/* ---- addresses ---- */
int braid_socket_addr_valid(const union braid_sockaddr* addr); /* AF_INET or AF_INET6 */
socklen_t braid_socket_addr_len(const union braid_sockaddr* addr);
int braid_socket_addr_port(const union braid_sockaddr* addr);
void braid_socket_addr_set_port(union braid_sockaddr* addr, int port);
int braid_socket_addr_equal(const union braid_sockaddr* a, const union braid_sockaddr* b);
/* "10.1.2.3<1234>" / "fd00::2<1234>", as NCCL prints addresses. */
ncclResult_t braid_socket_addr_to_string(const union braid_sockaddr* addr, char* buf, size_t len);
/* The same, for log lines: always returns buf (BRAID_SOCKET_ADDR_STR_MAX bytes). */
const char* braid_socket_addr_str(const union braid_sockaddr* addr, char* buf);
/* "host:port", "[v6]:port", "host" (port 0); host is numeric or a name to resolve. A bare IPv6
 * address without brackets takes no port. */
ncclResult_t braid_socket_addr_from_string(const char* str, union braid_sockaddr* addr_p);

/* ---- interfaces ---- */
/* Usable interfaces (UP and RUNNING, with an IPv4/IPv6 address, NCCL_SOCKET_FAMILY honoured;
 * one address per interface). `list` (NULL: NCCL_SOCKET_IFNAME; unset or empty: automatic)
 * is a comma list of name prefixes, `^` excludes, `=` matches whole names. Automatic order,
 * first non-empty class wins: ib*, same subnet as NCCL_COMM_ID, anything but docker/lo/virbr,
 * docker, lo, virbr. names: max * BRAID_SOCKET_NAME_MAX bytes; addrs: max entries (port 0).
 * A list that matches nothing: WARN naming it and the interfaces that exist, ncclInvalidArgument. */
ncclResult_t braid_socket_find_interfaces(const char* list, char* names, union braid_sockaddr* addrs, int max,
                                          int* n_p);
/* The first of those, picked once per process (and logged `Bootstrap: Using eth0:10.1.2.3<0>`).
 * name: BRAID_SOCKET_NAME_MAX bytes, may be NULL. */
ncclResult_t braid_socket_bootstrap_interface(char* name, union braid_sockaddr* addr_p);
/* Test hook: forget the pick, so the next call reads the parameters again. */
void braid_socket_bootstrap_interface_reset(void);

/* ---- connections ---- */
void braid_socket_init(struct braid_socket* s); /* fd = -1 */
/* Listen on `local` (port 0: ephemeral); s->addr becomes the bound address. */
ncclResult_t braid_socket_listen(struct braid_socket* s, const union braid_sockaddr* local);
/* Accept one pending connection into s if there is one; *got_p = 0 when none is pending.
 * Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) is not the listener's
 * failure either: *got_p = 0, listener->err says which (a rate-limited WARN), and the caller
 * tries again after BRAID_SOCKET_ACCEPT_BACKOFF_MS (polling the listener sooner would spin). */
#define BRAID_SOCKET_ACCEPT_BACKOFF_MS 100
ncclResult_t braid_socket_accept_try(struct braid_socket* listener, struct braid_socket* s, int* got_p);
ncclResult_t braid_socket_accept(struct braid_socket* listener, struct braid_socket* s, volatile uint32_t* abort_flag,
                                 int64_t deadline);
/* Non-blocking connect: start, then finish (poll s->fd for POLLOUT between calls) until
 * *done_p. A refused/unreachable peer fails with ncclRemoteError (s->fail, s->err). */
ncclResult_t braid_socket_connect_start(struct braid_socket* s, const union braid_sockaddr* remote, int* done_p);
ncclResult_t braid_socket_connect_finish(struct braid_socket* s, int* done_p);
/* Blocking connect. retry != 0: refused / unreachable are retried NCCL_SOCKET_RETRY_CNT times,
 * sleeping k * NCCL_SOCKET_RETRY_SLEEP_MSEC before try k (for a listener that may not be up
 * yet); retry == 0: the first failure is final. */
ncclResult_t braid_socket_connect(struct braid_socket* s, const union braid_sockaddr* remote, int retry,
                                  volatile uint32_t* abort_flag, int64_t deadline);
ncclResult_t braid_socket_send_try(struct braid_socket* s, const void* buf, size_t n, size_t* off);
ncclResult_t braid_socket_sendv_try(struct braid_socket* s, const struct iovec* iov, int niov, size_t* off);
/* A partial read is success; EOF before n bytes is ncclRemoteError (FAIL_CLOSED). */
ncclResult_t braid_socket_recv_try(struct braid_socket* s, void* buf, size_t n, size_t* off);
ncclResult_t braid_socket_send(struct braid_socket* s, const void* buf, size_t n, volatile uint32_t* abort_flag,
                               int64_t deadline);
ncclResult_t braid_socket_recv(struct braid_socket* s, void* buf, size_t n, volatile uint32_t* abort_flag,
                               int64_t deadline);
/* Wait until s->fd has one of `events` (or an error/hangup, which the next call reports). */
ncclResult_t braid_socket_wait(struct braid_socket* s, short events, volatile uint32_t* abort_flag, int64_t deadline);
/* One wait of at most one slice (less if the deadline is nearer) on a set of descriptors;
 * EINTR counts as an empty wait. */
ncclResult_t braid_socket_poll(struct pollfd* fds, int nfds, int64_t deadline);
/* For a connection the peer never writes to: has the peer closed or reset it? */
ncclResult_t braid_socket_peer_closed(const struct braid_socket* s, int* closed_p);
void braid_socket_close(struct braid_socket* s);

/* Checks a received handshake; a wrong one gets a WARN `<ctx>: dropping connection from
 * <addr>: ...`, s->fail = FAIL_HANDSHAKE and ncclRemoteError. */
ncclResult_t braid_socket_handshake_check(struct braid_socket* s, const struct braid_socket_handshake* hs,
                                          uint64_t secret, int type, const char* ctx);
const char* braid_socket_fail_str(enum braid_socket_fail fail);
/* One non-blocking step of reading and checking an accepted connection's handshake, into
 * *hs with *off bytes read so far: 1 when complete and valid, 0 to wait (before `deadline`),
 * -1 when dropped (said through braid_socket_warn_drop: closed early, too slow after
 * `timeout_ms`, wrong secret or type). The caller then checks hs->arg and owns the socket. */
int braid_socket_handshake_step(struct braid_socket* s, struct braid_socket_handshake* hs, size_t* off,
                                int64_t deadline, int64_t now, uint64_t secret, int type, const char* ctx,
                                int timeout_ms);

/* The WARN for a connection dropped before it proved who it is, `<ctx>: dropping connection
 * from <addr>: <why>`, at most once per ctx and source host every BRAID_SOCKET_DROP_WARN_S
 * seconds; the next line says how many were dropped quietly since. A flood of strangers
 * then costs a line per interval, not one per connection. */
#define BRAID_SOCKET_DROP_WARN_S 10
void braid_socket_warn_drop(const char* ctx, const union braid_sockaddr* from, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same limit for other lines: 1 when one about (ctx, from's host) is due now;
 * *quiet_p: how many were skipped since the last one. */
int braid_socket_warn_due(const char* ctx, const union braid_sockaddr* from, int* quiet_p);

#endif /* BRAID_SOCKET_H */
