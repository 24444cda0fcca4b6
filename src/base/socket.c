/*
 * socket.c - TCP sockets for out-of-band traffic (socket.h): addresses, NCCL's interface
 * selection, and connections whose every wait is a bounded poll() slice that checks the
 * caller's abort flag and deadline.
 */
#include "base/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "base/debug.h"
#include "base/param.h"

/* ---- time ---------------------------------------------------------------------------------- */

int64_t braid_socket_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t braid_socket_deadline_ms(int64_t ms) {
  return braid_socket_clock_ns() + ms * 1000000LL;
}

/* The next wait in ms: one slice, less if the deadline is nearer; -1 once it has passed. */
static int slice_ms(int64_t deadline) {
  if (deadline == 0) return BRAID_SOCKET_SLICE_MS;
  int64_t left = deadline - braid_socket_clock_ns();
  if (left <= 0) return -1;
  int64_t ms = (left + 999999) / 1000000;
  return ms < BRAID_SOCKET_SLICE_MS ? (int)ms : BRAID_SOCKET_SLICE_MS;
}

/* Abort and deadline, checked before each wait. */
static ncclResult_t check_flags(struct braid_socket* s, volatile uint32_t* abort_flag, int64_t deadline) {
  if (abort_flag != NULL && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE) != 0) {
    s->fail = BRAID_SOCKET_FAIL_ABORTED;
    return ncclInvalidUsage;
  }
  if (deadline != 0 && braid_socket_clock_ns() >= deadline) {
    s->fail = BRAID_SOCKET_FAIL_TIMEOUT;
    return ncclRemoteError;
  }
  return ncclSuccess;
}

/* ---- addresses ----------------------------------------------------------------------------- */

int braid_socket_addr_valid(const union braid_sockaddr* a) {
  return a != NULL && (a->sa.sa_family == AF_INET || a->sa.sa_family == AF_INET6);
}

socklen_t braid_socket_addr_len(const union braid_sockaddr* a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

int braid_socket_addr_port(const union braid_sockaddr* a) {
  return ntohs(a->sa.sa_family == AF_INET6 ? a->sin6.sin6_port : a->sin.sin_port);
}

void braid_socket_addr_set_port(union braid_sockaddr* a, int port) {
  if (a->sa.sa_family == AF_INET6)
    a->sin6.sin6_port = htons((uint16_t)port);
  else
    a->sin.sin_port = htons((uint16_t)port);
}

int braid_socket_addr_equal(const union braid_sockaddr* a, const union braid_sockaddr* b) {
  if (a->sa.sa_family != b->sa.sa_family) return 0;
  if (a->sa.sa_family == AF_INET)
    return a->sin.sin_port == b->sin.sin_port && a->sin.sin_addr.s_addr == b->sin.sin_addr.s_addr;
  if (a->sa.sa_family == AF_INET6)
    return a->sin6.sin6_port == b->sin6.sin6_port &&
           memcmp(&a->sin6.sin6_addr, &b->sin6.sin6_addr, sizeof(a->sin6.sin6_addr)) == 0;
  return 0;
}

/* A numeric host fits: 46 (INET6_ADDRSTRLEN) + '%' + an interface name (16). */
#define HOST_STR_MAX 64

const char* braid_socket_addr_str(const union braid_sockaddr* a, char* buf) {
  char host[HOST_STR_MAX];
  if (!braid_socket_addr_valid(a) ||
      getnameinfo(&a->sa, braid_socket_addr_len(a), host, sizeof(host), NULL, 0, NI_NUMERICHOST) != 0) {
    snprintf(buf, BRAID_SOCKET_ADDR_STR_MAX, "<no address>");
    return buf;
  }
  snprintf(buf, BRAID_SOCKET_ADDR_STR_MAX, "%s<%d>", host, braid_socket_addr_port(a));
  return buf;
}

ncclResult_t braid_socket_addr_to_string(const union braid_sockaddr* a, char* buf, size_t len) {
  char tmp[BRAID_SOCKET_ADDR_STR_MAX];
  if (buf == NULL || len == 0) {
    BRAID_WARN("braid_socket_addr_to_string: invalid buffer %p (len %zu)", (void*)buf, len);
    return ncclInvalidArgument;
  }
  snprintf(buf, len, "%s", braid_socket_addr_str(a, tmp));
  if (!braid_socket_addr_valid(a)) {
    BRAID_WARN("braid_socket_addr_to_string: address family %d is not IPv4/IPv6", a ? a->sa.sa_family : -1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* Splits "host:port", "[v6]:port", "host", "v6" into host and port (-1 when none). */
static int split_host_port(const char* str, char* host, size_t hlen, long* port_p) {
  const char* port = NULL;
  size_t n;
  if (str[0] == '[') {
    const char* close = strchr(str, ']');
    if (close == NULL || (close[1] != '\0' && close[1] != ':')) return -1;
    n = (size_t)(close - str - 1);
    if (close[1] == ':') port = close + 2;
    str++;
  } else {
    const char* colon = strchr(str, ':');
    n = strlen(str);
    if (colon != NULL && colon == strrchr(str, ':')) { /* one colon: host:port */
      n = (size_t)(colon - str);
      port = colon + 1;
    }
  }
  if (n == 0 || n >= hlen) return -1;
  memcpy(host, str, n);
  host[n] = '\0';
  *port_p = -1;
  if (port != NULL) {
    char* end;
    errno = 0;
    long p = strtol(port, &end, 10);
    if (*port == '\0' || *end != '\0' || errno != 0 || p < 0 || p > 65535) return -1;
    *port_p = p;
  }
  return 0;
}

ncclResult_t braid_socket_addr_from_string(const char* str, union braid_sockaddr* addr_p) {
  char host[NI_MAXHOST];
  long port;
  struct addrinfo hints, *res = NULL;
  if (str == NULL || addr_p == NULL || split_host_port(str, host, sizeof(host), &port) != 0) {
    BRAID_WARN("Invalid socket address '%s': expected host:port, [ipv6]:port or host", str ? str : "(null)");
    return ncclInvalidArgument;
  }
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || res == NULL) {
    BRAID_WARN("Invalid socket address '%s': cannot resolve '%s': %s", str, host, gai_strerror(rc));
    return ncclInvalidArgument;
  }
  union braid_sockaddr a;
  memset(&a, 0, sizeof(a));
  for (struct addrinfo* ai = res; ai != NULL; ai = ai->ai_next) {
    if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) && ai->ai_addrlen <= sizeof(a)) {
      memcpy(&a, ai->ai_addr, ai->ai_addrlen);
      break;
    }
  }
  freeaddrinfo(res);
  if (!braid_socket_addr_valid(&a)) {
    BRAID_WARN("Invalid socket address '%s': '%s' has no IPv4/IPv6 address", str, host);
    return ncclInvalidArgument;
  }
  braid_socket_addr_set_port(&a, port < 0 ? 0 : (int)port);
  *addr_p = a;
  return ncclSuccess;
}

/* ---- interfaces ---------------------------------------------------------------------------- */

#define IF_LIST_MAX 32

/* A parsed NCCL_SOCKET_IFNAME-style list. */
struct if_filter {
  int exclude; /* leading '^': everything but these */
  int exact;   /* leading '=': whole names instead of prefixes */
  int n;
  char items[IF_LIST_MAX][64];
};

static void if_filter_parse(const char* s, struct if_filter* f) {
  memset(f, 0, sizeof(*f));
  if (*s == '^') f->exclude = 1, s++;
  if (*s == '=') f->exact = 1, s++;
  while (*s != '\0' && f->n < IF_LIST_MAX) {
    size_t len = strcspn(s, ",");
    if (len > 0 && len < sizeof(f->items[0])) {
      memcpy(f->items[f->n], s, len);
      f->items[f->n++][len] = '\0';
    }
    s += len;
    if (*s == ',') s++;
  }
}

static int if_filter_match(const struct if_filter* f, const char* name) {
  int hit = 0;
  for (int i = 0; i < f->n && !hit; i++)
    hit = f->exact ? strcmp(name, f->items[i]) == 0 : strncmp(name, f->items[i], strlen(f->items[i])) == 0;
  return f->exclude ? !hit : hit;
}

static int same_subnet(const struct ifaddrs* ifa, const union braid_sockaddr* ref) {
  if (ifa->ifa_netmask == NULL || ifa->ifa_addr->sa_family != ref->sa.sa_family) return 0;
  const unsigned char *a, *m, *r;
  size_t n;
  if (ref->sa.sa_family == AF_INET) {
    a = (const unsigned char*)&((const struct sockaddr_in*)ifa->ifa_addr)->sin_addr;
    m = (const unsigned char*)&((const struct sockaddr_in*)ifa->ifa_netmask)->sin_addr;
    r = (const unsigned char*)&ref->sin.sin_addr;
    n = 4;
  } else {
    a = (const unsigned char*)&((const struct sockaddr_in6*)ifa->ifa_addr)->sin6_addr;
    m = (const unsigned char*)&((const struct sockaddr_in6*)ifa->ifa_netmask)->sin6_addr;
    r = (const unsigned char*)&ref->sin6.sin6_addr;
    n = 16;
  }
  for (size_t i = 0; i < n; i++)
    if (((a[i] ^ r[i]) & m[i]) != 0) return 0;
  return 1;
}

/* UP, RUNNING, an address of the wanted family (no IPv6 link-local: it needs a scope). */
static int if_usable(const struct ifaddrs* ifa, int family) {
  if (ifa->ifa_addr == NULL) return 0;
  int fam = ifa->ifa_addr->sa_family;
  if (fam != AF_INET && fam != AF_INET6) return 0;
  if (family != AF_UNSPEC && fam != family) return 0;
  if (!(ifa->ifa_flags & IFF_UP) || !(ifa->ifa_flags & IFF_RUNNING)) return 0;
  if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6*)ifa->ifa_addr)->sin6_addr)) return 0;
  return 1;
}

/* One pass: usable interfaces matching the filter (or the subnet), first address of each. */
static int if_collect(struct ifaddrs* list, const struct if_filter* f, const union braid_sockaddr* subnet, int family,
                      char* names, union braid_sockaddr* addrs, int max) {
  int n = 0;
  for (struct ifaddrs* ifa = list; ifa != NULL && n < max; ifa = ifa->ifa_next) {
    if (!if_usable(ifa, family)) continue;
    if (f != NULL && !if_filter_match(f, ifa->ifa_name)) continue;
    if (subnet != NULL && !same_subnet(ifa, subnet)) continue;
    int dup = 0;
    for (int i = 0; i < n && !dup; i++) dup = strcmp(names + i * BRAID_SOCKET_NAME_MAX, ifa->ifa_name) == 0;
    if (dup) continue;
    snprintf(names + n * BRAID_SOCKET_NAME_MAX, BRAID_SOCKET_NAME_MAX, "%s", ifa->ifa_name);
    memset(&addrs[n], 0, sizeof(addrs[n]));
    memcpy(&addrs[n], ifa->ifa_addr,
           ifa->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
    n++;
  }
  return n;
}

/* "eth0, lo, ifb0 (down)": what exists, for the WARN when nothing matches. */
static void if_describe(struct ifaddrs* list, int family, char* buf, size_t len) {
  size_t o = 0;
  buf[0] = '\0';
  for (struct ifaddrs* ifa = list; ifa != NULL; ifa = ifa->ifa_next) {
    int seen = 0;
    for (struct ifaddrs* p = list; p != ifa && !seen; p = p->ifa_next) seen = strcmp(p->ifa_name, ifa->ifa_name) == 0;
    if (seen) continue;
    int usable = 0;
    for (struct ifaddrs* p = ifa; p != NULL && !usable; p = p->ifa_next)
      usable = strcmp(p->ifa_name, ifa->ifa_name) == 0 && if_usable(p, family);
    int w = snprintf(buf + o, len - o, "%s%s%s", o ? ", " : "", ifa->ifa_name, usable ? "" : " (unusable)");
    if (w < 0 || (size_t)w >= len - o) break;
    o += (size_t)w;
  }
}

static ncclResult_t socket_family(int* family_p) {
  const char* fam = braid_param_str(BRAID_PARAM_SOCKET_FAMILY);
  if (fam == NULL || fam[0] == '\0')
    *family_p = AF_UNSPEC;
  else if (strcmp(fam, "AF_INET") == 0)
    *family_p = AF_INET;
  else if (strcmp(fam, "AF_INET6") == 0)
    *family_p = AF_INET6;
  else {
    BRAID_WARN("NCCL_SOCKET_FAMILY=%s is invalid: use AF_INET or AF_INET6", fam);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* The automatic order; the first class with any interface wins. */
static int if_auto(struct ifaddrs* list, int family, char* names, union braid_sockaddr* addrs, int max) {
  static const char* classes[] = {"ib", NULL /* NCCL_COMM_ID's subnet */, "^docker,lo,virbr", "docker", "lo", "virbr"};
  struct if_filter f;
  for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++) {
    int n = 0;
    if (classes[c] == NULL) {
      const char* comm_id = braid_param_str(BRAID_PARAM_COMM_ID);
      union braid_sockaddr ref;
      char host[NI_MAXHOST];
      long port;
      /* parse quietly: a bad NCCL_COMM_ID is reported where it is used */
      if (comm_id == NULL || split_host_port(comm_id, host, sizeof(host), &port) != 0) continue;
      if (braid_socket_addr_from_string(comm_id, &ref) != ncclSuccess) continue;
      n = if_collect(list, NULL, &ref, family, names, addrs, max);
    } else {
      if_filter_parse(classes[c], &f);
      n = if_collect(list, &f, NULL, family, names, addrs, max);
    }
    if (n > 0) return n;
  }
  return 0;
}

ncclResult_t braid_socket_find_interfaces(const char* list, char* names, union braid_sockaddr* addrs, int max,
                                          int* n_p) {
  ncclResult_t res = ncclSuccess;
  struct ifaddrs* ifl = NULL;
  const char* source = "interface list";
  int family, n;
  if (names == NULL || addrs == NULL || n_p == NULL || max <= 0) {
    BRAID_WARN("braid_socket_find_interfaces: invalid argument (names %p addrs %p n_p %p max %d)", (void*)names,
               (void*)addrs, (void*)n_p, max);
    return ncclInvalidArgument;
  }
  BRAID_CHECK(socket_family(&family));
  if (list == NULL) {
    list = braid_param_str(BRAID_PARAM_SOCKET_IFNAME);
    source = "NCCL_SOCKET_IFNAME";
  }
  BRAID_SYSCHECK_GOTO(getifaddrs(&ifl), "getifaddrs", res, out);
  if (list != NULL && list[0] != '\0') {
    struct if_filter f;
    if_filter_parse(list, &f);
    n = if_collect(ifl, &f, NULL, family, names, addrs, max);
    if (n == 0) {
      char have[512];
      if_describe(ifl, family, have, sizeof(have));
      BRAID_WARN("%s=%s matches no usable interface (UP, RUNNING, with an %s address); interfaces here: %s", source,
                 list,
                 family == AF_INET    ? "IPv4"
                 : family == AF_INET6 ? "IPv6"
                                      : "IPv4/IPv6",
                 have);
      res = ncclInvalidArgument;
      goto out;
    }
  } else {
    n = if_auto(ifl, family, names, addrs, max);
    if (n == 0) {
      BRAID_WARN("No usable network interface (UP, RUNNING, with an IPv4/IPv6 address) was found");
      res = ncclSystemError;
      goto out;
    }
  }
  *n_p = n;
out:
  if (ifl != NULL) freeifaddrs(ifl);
  return res;
}

static pthread_mutex_t bootstrap_if_lock = PTHREAD_MUTEX_INITIALIZER;
static int bootstrap_if_ready;
static char bootstrap_if_name[BRAID_SOCKET_NAME_MAX];
static union braid_sockaddr bootstrap_if_addr;

ncclResult_t braid_socket_bootstrap_interface(char* name, union braid_sockaddr* addr_p) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&bootstrap_if_lock);
  if (!bootstrap_if_ready) {
    int n;
    char buf[BRAID_SOCKET_ADDR_STR_MAX];
    BRAID_CHECK_GOTO(braid_socket_find_interfaces(NULL, bootstrap_if_name, &bootstrap_if_addr, 1, &n), res, out);
    bootstrap_if_ready = 1;
    BRAID_INFO(BRAID_LOG_BOOTSTRAP, "Bootstrap: Using %s:%s", bootstrap_if_name,
               braid_socket_addr_str(&bootstrap_if_addr, buf));
  }
  if (name != NULL) memcpy(name, bootstrap_if_name, BRAID_SOCKET_NAME_MAX);
  *addr_p = bootstrap_if_addr;
out:
  pthread_mutex_unlock(&bootstrap_if_lock);
  return res;
}

void braid_socket_bootstrap_interface_reset(void) {
  pthread_mutex_lock(&bootstrap_if_lock);
  bootstrap_if_ready = 0;
  pthread_mutex_unlock(&bootstrap_if_lock);
}

/* ---- connections --------------------------------------------------------------------------- */

void braid_socket_init(struct braid_socket* s) {
  memset(s, 0, sizeof(*s));
  s->fd = -1;
}

void braid_socket_close(struct braid_socket* s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

static void set_nodelay(int fd) {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int new_fd(int family) {
  return socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

ncclResult_t braid_socket_listen(struct braid_socket* s, const union braid_sockaddr* local) {
  ncclResult_t res = ncclSuccess;
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  int one = 1, fd;
  union braid_sockaddr bound;
  socklen_t len = sizeof(bound);
  if (s == NULL || !braid_socket_addr_valid(local)) {
    BRAID_WARN("braid_socket_listen: invalid socket %p or address", (void*)s);
    return ncclInvalidArgument;
  }
  braid_socket_init(s);
  BRAID_SYSCHECK_GOTO(fd = new_fd(local->sa.sa_family), "socket", res, out);
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, &local->sa, braid_socket_addr_len(local)) != 0) {
    BRAID_WARN("Cannot listen on %s: bind: %s", braid_socket_addr_str(local, buf), strerror(errno));
    res = ncclSystemError;
    goto err_close;
  }
  BRAID_SYSCHECK_GOTO(listen(fd, 16384), "listen", res, err_close);
  memset(&bound, 0, sizeof(bound));
  BRAID_SYSCHECK_GOTO(getsockname(fd, &bound.sa, &len), "getsockname", res, err_close);
  s->fd = fd;
  s->addr = bound;
  return ncclSuccess;
err_close:
  close(fd);
out:
  s->fail = BRAID_SOCKET_FAIL_SYSTEM;
  return res;
}

ncclResult_t braid_socket_accept_try(struct braid_socket* listener, struct braid_socket* s, int* got_p) {
  union braid_sockaddr peer;
  socklen_t len = sizeof(peer);
  memset(&peer, 0, sizeof(peer));
  int fd = accept4(listener->fd, &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) {
    /* nothing pending, or a connection that died in the queue: not the listener's failure */
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED || errno == EPROTO ||
        errno == EPERM) {
      *got_p = 0;
      return ncclSuccess;
    }
    /* out of descriptors or memory: the connection waits in the backlog; try again later */
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      char buf[BRAID_SOCKET_ADDR_STR_MAX];
      int quiet, err = errno;
      listener->err = err;
      if (braid_socket_warn_due("accept", &listener->addr, &quiet))
        braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_NET | BRAID_LOG_BOOTSTRAP, __FILE__, __LINE__,
                        "Cannot accept connections on %s: %s; they wait in the backlog (%d such failures before)",
                        braid_socket_addr_str(&listener->addr, buf), strerror(err), quiet);
      *got_p = 0;
      return ncclSuccess;
    }
    BRAID_WARN("Call to accept failed: %s", strerror(errno));
    listener->fail = BRAID_SOCKET_FAIL_SYSTEM;
    listener->err = errno;
    return ncclSystemError;
  }
  set_nodelay(fd);
  braid_socket_init(s);
  s->fd = fd;
  s->addr = peer;
  listener->err = 0;
  *got_p = 1;
  return ncclSuccess;
}

ncclResult_t braid_socket_accept(struct braid_socket* listener, struct braid_socket* s, volatile uint32_t* abort_flag,
                                 int64_t deadline) {
  for (;;) {
    int got;
    BRAID_CHECK(braid_socket_accept_try(listener, s, &got));
    if (got) return ncclSuccess;
    ncclResult_t res = braid_socket_wait(listener, POLLIN, abort_flag, deadline);
    if (res != ncclSuccess) return res;
  }
}

/* errno of a failed connect: who is to blame. */
static enum braid_socket_fail connect_fail_kind(int err) {
  switch (err) {
    case ECONNREFUSED:
      return BRAID_SOCKET_FAIL_REFUSED;
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EHOSTDOWN:
    case ENETDOWN:
      return BRAID_SOCKET_FAIL_UNREACHABLE;
    case ECONNRESET:
    case EAGAIN:
    case EADDRNOTAVAIL:
      return BRAID_SOCKET_FAIL_RESET;
    default:
      return BRAID_SOCKET_FAIL_SYSTEM;
  }
}

/* Ends a connect attempt with errno `err` (0: connected). */
static ncclResult_t connect_result(struct braid_socket* s, int err, int* done_p) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  if (err == 0) {
    /* connecting to an unused local port can connect the socket to itself */
    union braid_sockaddr local;
    socklen_t len = sizeof(local);
    memset(&local, 0, sizeof(local));
    if (getsockname(s->fd, &local.sa, &len) == 0 && braid_socket_addr_equal(&local, &s->addr)) err = ECONNREFUSED;
  }
  if (err == 0) {
    *done_p = 1;
    return ncclSuccess;
  }
  braid_socket_close(s);
  s->fail = connect_fail_kind(err);
  s->err = err;
  if (s->fail != BRAID_SOCKET_FAIL_SYSTEM) return ncclRemoteError;
  BRAID_WARN("Call to connect %s failed: %s", braid_socket_addr_str(&s->addr, buf), strerror(err));
  return ncclSystemError;
}

ncclResult_t braid_socket_connect_start(struct braid_socket* s, const union braid_sockaddr* remote, int* done_p) {
  ncclResult_t res = ncclSuccess;
  int fd;
  if (s == NULL || done_p == NULL || !braid_socket_addr_valid(remote)) {
    BRAID_WARN("braid_socket_connect: invalid socket %p or address", (void*)s);
    return ncclInvalidArgument;
  }
  braid_socket_init(s);
  s->addr = *remote;
  BRAID_SYSCHECK_GOTO(fd = new_fd(remote->sa.sa_family), "socket", res, out);
  set_nodelay(fd);
  s->fd = fd;
  *done_p = 0;
  if (connect(fd, &remote->sa, braid_socket_addr_len(remote)) == 0) return connect_result(s, 0, done_p);
  if (errno == EINPROGRESS || errno == EINTR) return ncclSuccess;
  return connect_result(s, errno, done_p);
out:
  s->fail = BRAID_SOCKET_FAIL_SYSTEM;
  return res;
}

ncclResult_t braid_socket_connect_finish(struct braid_socket* s, int* done_p) {
  struct pollfd p = {.fd = s->fd, .events = POLLOUT};
  int err = 0;
  socklen_t len = sizeof(err);
  if (poll(&p, 1, 0) <= 0) {
    *done_p = 0;
    return ncclSuccess;
  }
  if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  return connect_result(s, err, done_p);
}

/* Sleeps ms in slices, watching the abort flag and the deadline. */
static ncclResult_t sleep_sliced(struct braid_socket* s, int64_t ms, volatile uint32_t* abort_flag, int64_t deadline) {
  int64_t end = braid_socket_deadline_ms(ms);
  for (;;) {
    BRAID_CHECK(check_flags(s, abort_flag, deadline));
    int64_t left = (end - braid_socket_clock_ns()) / 1000000;
    if (left <= 0) return ncclSuccess;
    int w = slice_ms(deadline);
    if (w < 0 || w > left) w = (int)left;
    (void)poll(NULL, 0, w);
  }
}

ncclResult_t braid_socket_connect(struct braid_socket* s, const union braid_sockaddr* remote, int retry,
                                  volatile uint32_t* abort_flag, int64_t deadline) {
  int64_t tries = retry ? braid_param_int(BRAID_PARAM_SOCKET_RETRY_CNT) : 0;
  int64_t sleep_ms = braid_param_int(BRAID_PARAM_SOCKET_RETRY_SLEEP_MSEC);
  for (int64_t k = 1;; k++) {
    int done = 0;
    ncclResult_t res = braid_socket_connect_start(s, remote, &done);
    while (res == ncclSuccess && !done) {
      res = braid_socket_wait(s, POLLOUT, abort_flag, deadline);
      if (res == ncclSuccess) res = braid_socket_connect_finish(s, &done);
    }
    if (res == ncclSuccess) return ncclSuccess;
    braid_socket_close(s);
    int retriable = s->fail == BRAID_SOCKET_FAIL_REFUSED || s->fail == BRAID_SOCKET_FAIL_UNREACHABLE ||
                    s->fail == BRAID_SOCKET_FAIL_RESET;
    if (res != ncclRemoteError || !retriable || k > tries) return res;
    res = sleep_sliced(s, k * (sleep_ms > 0 ? sleep_ms : 0), abort_flag, deadline);
    if (res != ncclSuccess) return res;
  }
}

/* A send/recv error: the peer's doing (ncclRemoteError, quiet) or ours (WARN). */
static ncclResult_t io_fail(struct braid_socket* s, int err, const char* what) {
  char buf[BRAID_SOCKET_ADDR_STR_MAX];
  s->err = err;
  switch (err) {
    case 0:
    case EPIPE:
      s->fail = BRAID_SOCKET_FAIL_CLOSED;
      return ncclRemoteError;
    case ECONNRESET:
    case ETIMEDOUT:
    case ENOTCONN:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ECONNABORTED:
      s->fail = BRAID_SOCKET_FAIL_RESET;
      return ncclRemoteError;
    default:
      s->fail = BRAID_SOCKET_FAIL_SYSTEM;
      BRAID_WARN("Call to %s on the socket to %s failed: %s", what, braid_socket_addr_str(&s->addr, buf),
                 strerror(err));
      return ncclSystemError;
  }
}

ncclResult_t braid_socket_send_try(struct braid_socket* s, const void* buf, size_t n, size_t* off) {
  struct iovec iov = {.iov_base = (void*)buf, .iov_len = n};
  return braid_socket_sendv_try(s, &iov, 1, off);
}

ncclResult_t braid_socket_sendv_try(struct braid_socket* s, const struct iovec* iov, int niov, size_t* off) {
  struct iovec rest[8];
  if (niov > 8) {
    BRAID_WARN("braid_socket_sendv_try: %d iovecs (at most 8)", niov);
    return ncclInvalidArgument;
  }
  for (;;) {
    /* the iovecs past *off */
    int n = 0;
    size_t skip = *off;
    for (int i = 0; i < niov; i++) {
      if (skip >= iov[i].iov_len) {
        skip -= iov[i].iov_len;
        continue;
      }
      rest[n].iov_base = (char*)iov[i].iov_base + skip;
      rest[n++].iov_len = iov[i].iov_len - skip;
      skip = 0;
    }
    if (n == 0) return ncclSuccess;
    struct msghdr msg = {.msg_iov = rest, .msg_iovlen = (size_t)n};
    ssize_t r = sendmsg(s->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      *off += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    return io_fail(s, r == 0 ? EPIPE : errno, "send");
  }
}

ncclResult_t braid_socket_recv_try(struct braid_socket* s, void* buf, size_t n, size_t* off) {
  while (*off < n) {
    ssize_t r = recv(s->fd, (char*)buf + *off, n - *off, MSG_DONTWAIT);
    if (r > 0) {
      *off += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return ncclSuccess;
    return io_fail(s, r == 0 ? 0 : errno, "recv");
  }
  return ncclSuccess;
}

ncclResult_t braid_socket_send(struct braid_socket* s, const void* buf, size_t n, volatile uint32_t* abort_flag,
                               int64_t deadline) {
  size_t off = 0;
  for (;;) {
    BRAID_CHECK(braid_socket_send_try(s, buf, n, &off));
    if (off == n) return ncclSuccess;
    ncclResult_t res = braid_socket_wait(s, POLLOUT, abort_flag, deadline);
    if (res != ncclSuccess) return res;
  }
}

ncclResult_t braid_socket_recv(struct braid_socket* s, void* buf, size_t n, volatile uint32_t* abort_flag,
                               int64_t deadline) {
  size_t off = 0;
  for (;;) {
    ncclResult_t res = braid_socket_recv_try(s, buf, n, &off);
    if (res != ncclSuccess || off == n) return res;
    res = braid_socket_wait(s, POLLIN, abort_flag, deadline);
    if (res != ncclSuccess) return res;
  }
}

ncclResult_t braid_socket_wait(struct braid_socket* s, short events, volatile uint32_t* abort_flag, int64_t deadline) {
  for (;;) {
    ncclResult_t res = check_flags(s, abort_flag, deadline);
    if (res != ncclSuccess) return res;
    struct pollfd p = {.fd = s->fd, .events = events};
    int ms = slice_ms(deadline);
    if (ms < 0) continue; /* check_flags reports the deadline */
    int r = poll(&p, 1, ms);
    if (r > 0) return ncclSuccess;
    if (r < 0 && errno != EINTR) return io_fail(s, errno, "poll");
  }
}

ncclResult_t braid_socket_poll(struct pollfd* fds, int nfds, int64_t deadline) {
  int ms = slice_ms(deadline);
  if (ms < 0) return ncclSuccess;
  if (poll(fds, (nfds_t)nfds, ms) < 0 && errno != EINTR) {
    BRAID_WARN("Call to poll failed: %s", strerror(errno));
    return ncclSystemError;
  }
  return ncclSuccess;
}

ncclResult_t braid_socket_peer_closed(const struct braid_socket* s, int* closed_p) {
  char c;
  ssize_t r = recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  *closed_p = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  return ncclSuccess;
}

ncclResult_t braid_socket_handshake_check(struct braid_socket* s, const struct braid_socket_handshake* hs,
                                          uint64_t secret, int type, const char* ctx) {
  if (hs->secret == secret && hs->type == type) return ncclSuccess;
  if (hs->secret != secret)
    braid_socket_warn_drop(ctx, &s->addr, "wrong secret (not a peer of this communicator)");
  else
    braid_socket_warn_drop(ctx, &s->addr, "connection type %d, expected %d", (int)hs->type, type);
  s->fail = BRAID_SOCKET_FAIL_HANDSHAKE;
  return ncclRemoteError;
}

int braid_socket_if_speed(const char* ifname) {
  char path[128];
  int speed = -1;
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
  FILE* f = fopen(path, "r");
  if (f != NULL) {
    if (fscanf(f, "%d", &speed) != 1) speed = -1;
    fclose(f);
  }
  return speed > 0 ? speed : 10000;
}

int braid_socket_handshake_step(struct braid_socket* s, struct braid_socket_handshake* hs, size_t* off,
                                int64_t deadline, int64_t now, uint64_t secret, int type, const char* ctx,
                                int timeout_ms) {
  if (braid_socket_recv_try(s, hs, sizeof(*hs), off) != ncclSuccess) {
    braid_socket_warn_drop(ctx, &s->addr, "it %s before completing its handshake", braid_socket_fail_str(s->fail));
    return -1;
  }
  if (*off < sizeof(*hs)) {
    if (now < deadline) return 0;
    braid_socket_warn_drop(ctx, &s->addr, "no complete handshake within %d ms", timeout_ms);
    return -1;
  }
  return braid_socket_handshake_check(s, hs, secret, type, ctx) == ncclSuccess ? 1 : -1;
}

const char* braid_socket_fail_str(enum braid_socket_fail fail) {
  switch (fail) {
    case BRAID_SOCKET_FAIL_NONE:
      return "no error";
    case BRAID_SOCKET_FAIL_CLOSED:
      return "closed the connection";
    case BRAID_SOCKET_FAIL_RESET:
      return "reset the connection";
    case BRAID_SOCKET_FAIL_REFUSED:
      return "refused the connection";
    case BRAID_SOCKET_FAIL_UNREACHABLE:
      return "is unreachable";
    case BRAID_SOCKET_FAIL_TIMEOUT:
      return "timed out";
    case BRAID_SOCKET_FAIL_ABORTED:
      return "aborted";
    case BRAID_SOCKET_FAIL_HANDSHAKE:
      return "sent a wrong handshake";
    case BRAID_SOCKET_FAIL_SYSTEM:
      return "failed with a system error";
  }
  return "failed";
}
