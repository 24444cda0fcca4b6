/*
 * fuzz_bootstrap.c - libFuzzer target: what a rank's bootstrap reads from a connection (the
 * handshake, then message headers and payloads; src/bootstrap/bootstrap_conn.c).
 *
 * Two real ranks are set up once. Each input is one connection to rank 0, handed to its
 * progress pass over a socketpair: byte 0 picks what precedes the rest of the input on the
 * wire (0: nothing, a stranger's bytes; 1: rank 1's true hello, so the rest is parsed as
 * messages of an identified peer; 2: rank 0's own hello). The connection is then removed and
 * whatever it queued freed, so every input starts from the same state.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap/bootstrap_int.h"

static struct braid_bootstrap* bs[2];
static ncclUniqueId id;

static void* init_main(void* arg) {
  int r = (int)(intptr_t)arg;
  if (braid_bootstrap_init(&id, 1, r, 2, NULL, &bs[r]) != ncclSuccess) abort();
  return NULL;
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  pthread_t t[2];
  if (braid_bootstrap_get_unique_id(&id) != ncclSuccess) abort();
  for (intptr_t r = 0; r < 2; r++) pthread_create(&t[r], NULL, init_main, (void*)r);
  for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
  return 0;
}

/* Unlinks `in` from a list if it is there (by address only: it may have been freed). */
static int unlink_in(struct bs_in** pp, struct bs_in* in) {
  for (; *pp != NULL; pp = &(*pp)->next) {
    if (*pp != in) continue;
    *pp = in->next;
    return 1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct braid_bootstrap* b = bs[0];
  struct bs_peer_hello h;
  int sv[2];
  if (size < 1 || size > (1 << 16)) return 0;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) return 0;
  int mode = data[0] % 3;
  if (mode > 0) {
    braid_bootstrap_test_hello(bs[mode == 1 ? 1 : 0], &h);
    (void)!write(sv[1], &h, sizeof(h));
  }
  (void)!write(sv[1], data + 1, size - 1);
  close(sv[1]); /* EOF after the input */

  struct bs_in* in = calloc(1, sizeof(*in));
  braid_socket_init(&in->sock);
  in->sock.fd = sv[0];
  in->peer = -1;
  in->hs_deadline = braid_socket_clock_ns() + 3600 * 1000000000LL;
  pthread_mutex_lock(&b->lock);
  int claim = mode == 1 ? 1 : 0;
  struct bs_in* real = b->peers[claim].in; /* the real connection steps aside meanwhile */
  b->peers[claim].in = NULL;
  in->next = b->pending;
  b->pending = in;
  b->npending++;
  for (int k = 0; k < 4; k++) (void)bs_progress(b);
  if (unlink_in(&b->pending, in)) {
    b->npending--;
    bs_in_free(in);
  } else if (unlink_in(&b->active, in)) {
    bs_in_free(in);
  }
  b->peers[claim].in = real;
  while (b->queue != NULL) {
    struct bs_msg* m = b->queue;
    b->queue = m->next;
    free(m->data);
    free(m);
  }
  b->queue_tail = &b->queue;
  pthread_mutex_unlock(&b->lock);
  return 0;
}
