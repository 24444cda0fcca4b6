/*
 * bootstrap_service.c - the process's bootstrap service thread. Every bootstrap registers
 * here while it lives; the thread polls the listeners and pending connections of those that
 * no thread waits on, so strangers are accepted, checked and dropped (and their descriptors
 * released) even while only collectives run, and it watches the connections of bootstraps
 * under a death watch (braid_bootstrap_watch). It starts with the first bootstrap and exits
 * soon after the last one closes. A fork's child starts with none registered.
 */
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/check.h"
#include "base/debug.h"
#include "bootstrap/bootstrap_int.h"

#define SERVICE_SLICE_MS 100 /* the longest poll: deadlines are checked at least this often */

static pthread_mutex_t svc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t svc_once = PTHREAD_ONCE_INIT;
static struct braid_bootstrap** svc;
static int nsvc, capsvc;
static int running;   /* a thread serves svc */
static int wake = -1; /* eventfd: the set changed */

static void svc_kick(void) {
  uint64_t one = 1;
  if (wake >= 0) (void)!write(wake, &one, sizeof(one));
}

static void atfork_prepare(void) {
  pthread_mutex_lock(&svc_lock);
}
static void atfork_parent(void) {
  pthread_mutex_unlock(&svc_lock);
}
static void atfork_child(void) {
  /* the thread does not exist here, and the parent's bootstraps are not this process's */
  nsvc = 0;
  running = 0;
  if (wake >= 0) close(wake);
  wake = -1;
  pthread_mutex_unlock(&svc_lock);
}
static void svc_init(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* One round (svc_lock held): serve, report deaths, collect what to poll. */
static int svc_round(struct pollfd** fds_p, int* cap_p, int* timeout_ms) {
  int n = 0;
  int64_t now = braid_socket_clock_ns(), wake_ns = now + SERVICE_SLICE_MS * NS_PER_MS;
  for (int i = 0; i < nsvc; i++) {
    struct braid_bootstrap* bs = svc[i];
    int dead = bs_service_pass(bs);
    if (dead >= 0 && bs->watch != NULL) {
      braid_bootstrap_death_fn fn = bs->watch;
      bs->watch = NULL; /* once */
      fn(bs->watch_arg, dead);
    }
  }
  if (*cap_p < 1) {
    struct pollfd* f = realloc(*fds_p, 16 * sizeof(*f));
    if (f == NULL) return 0;
    *fds_p = f;
    *cap_p = 16;
  }
  (*fds_p)[n++] = (struct pollfd){.fd = wake, .events = POLLIN};
  for (int i = 0; i < nsvc; i++) n = bs_service_fds(svc[i], fds_p, cap_p, n, &wake_ns);
  int64_t ms = (wake_ns - now + NS_PER_MS - 1) / NS_PER_MS;
  *timeout_ms = ms < 1 ? 1 : ms > SERVICE_SLICE_MS ? SERVICE_SLICE_MS : (int)ms;
  return n;
}

static void* svc_main(void* arg) {
  struct pollfd* fds = NULL;
  int cap = 0, my_wake;
  pthread_mutex_lock(&svc_lock);
  for (;;) {
    if (nsvc == 0) break;
    int timeout, n = svc_round(&fds, &cap, &timeout);
    my_wake = wake;
    pthread_mutex_unlock(&svc_lock);
    if (n > 0 && poll(fds, (nfds_t)n, timeout) > 0 && (fds[0].revents & POLLIN)) {
      uint64_t v;
      (void)!read(my_wake, &v, sizeof(v));
    }
    pthread_mutex_lock(&svc_lock);
  }
  running = 0;
  close(wake);
  wake = -1;
  pthread_mutex_unlock(&svc_lock);
  free(fds);
  return NULL;
}

ncclResult_t bs_service_add(struct braid_bootstrap* bs) {
  ncclResult_t res = ncclSuccess;
  pthread_once(&svc_once, svc_init);
  pthread_mutex_lock(&svc_lock);
  if (nsvc == capsvc) {
    int cap = capsvc ? 2 * capsvc : 16;
    struct braid_bootstrap** grown = realloc(svc, (size_t)cap * sizeof(*grown));
    if (grown == NULL) {
      BRAID_WARN("Bootstrap: failed to allocate the service list (%d entries)", cap);
      res = ncclSystemError;
      goto out;
    }
    svc = grown;
    capsvc = cap;
  }
  if (!running) {
    pthread_attr_t attr;
    pthread_t t;
    if ((wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
      BRAID_WARN("Bootstrap: eventfd for the service thread failed: %s", strerror(errno));
      res = ncclSystemError;
      goto out;
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, svc_main, NULL);
    pthread_attr_destroy(&attr);
    if (err != 0) {
      BRAID_WARN("Bootstrap: cannot start the service thread: %s", strerror(err));
      close(wake);
      wake = -1;
      res = ncclSystemError;
      goto out;
    }
    running = 1;
  }
  svc[nsvc++] = bs;
  svc_kick();
out:
  pthread_mutex_unlock(&svc_lock);
  return res;
}

void bs_service_remove(struct braid_bootstrap* bs) {
  pthread_mutex_lock(&svc_lock);
  for (int i = 0; i < nsvc; i++) {
    if (svc[i] == bs) {
      svc[i] = svc[--nsvc];
      break;
    }
  }
  if (nsvc == 0) {
    free(svc);
    svc = NULL;
    capsvc = 0;
  }
  svc_kick();
  pthread_mutex_unlock(&svc_lock);
}

void bs_service_watch(struct braid_bootstrap* bs, braid_bootstrap_death_fn fn, void* arg) {
  pthread_mutex_lock(&svc_lock);
  bs->watch = fn;
  bs->watch_arg = arg;
  svc_kick();
  pthread_mutex_unlock(&svc_lock);
}
