/*
 * fuzz_net_socket.c - libFuzzer target: the Socket network plugin's accept side (the
 * handshake of src/base/socket.h on every socket, then the message headers a receive parses;
 * src/transport/net/socket/), through its public vtable only.
 *
 * One listener lives for the whole run. Each input is one TCP connection to it: byte 0 odd:
 * the true handshake {secret, NET, 0} first, so the rest is parsed as the control stream of a
 * connected sender (a receive is posted and tested); even: the input alone, a stranger's
 * bytes. The connection is closed after the input, so the listener resolves it at once.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/socket.h"
#include "transport/net/net.h"
#include "transport/net/socket/net_socket.h"

#define SECRET 0x5eed5eed5eed5eedULL

static void* ctx;
static void* listen_comm;
static union {
  struct sock_handle h;
  char bytes[BRAID_NET_HANDLE_MAXSIZE]; /* what listen may fill */
} handle;

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  struct braid_net_config cfg = {SECRET, -1};
  int ndev = 0;
  if (braid_net_socket.init(NULL) != ncclSuccess || braid_net_socket.devices(&ndev) != ncclSuccess || ndev < 1) abort();
  if (braid_net_socket.openContext(1, &cfg, &ctx) != ncclSuccess) abort();
  if (braid_net_socket.listen(ctx, 0, &handle, &listen_comm) != ncclSuccess) abort();
  return 0;
}

/* A receive on a connected comm: post one, test it a few times, close. */
static void drain(void* recv_comm) {
  static char buf[1 << 16];
  void* data[1] = {buf};
  size_t sizes[1] = {sizeof(buf)};
  int tags[1] = {0};
  void* mh[1] = {NULL};
  void* req = NULL;
  (void)braid_net_socket.regMr(recv_comm, buf, sizeof(buf), BRAID_NET_PTR_HOST, &mh[0]);
  if (braid_net_socket.irecv(recv_comm, 1, data, sizes, tags, mh, &req) == ncclSuccess && req != NULL) {
    for (int k = 0; k < 8; k++) {
      int done = 0;
      if (braid_net_socket.test(req, &done, NULL) != ncclSuccess || done) break;
      usleep(10);
    }
  }
  if (mh[0] != NULL) braid_net_socket.deregMr(recv_comm, mh[0]);
  braid_net_socket.closeRecv(recv_comm);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  struct braid_socket s;
  if (size < 1 || size > (1 << 16)) return 0;
  if (braid_socket_connect(&s, &handle.h.addr, 0, NULL, braid_socket_deadline_ms(2000)) != ncclSuccess) return 0;
  if (data[0] & 1) {
    struct braid_socket_handshake hs = {SECRET, BRAID_SOCKET_TYPE_NET, 0};
    (void)braid_socket_send(&s, &hs, sizeof(hs), NULL, braid_socket_deadline_ms(1000));
  }
  (void)braid_socket_send(&s, data + 1, size - 1, NULL, braid_socket_deadline_ms(1000));
  shutdown(s.fd, SHUT_WR);
  for (int k = 0; k < 20; k++) {
    void* recv_comm = NULL;
    if (braid_net_socket.accept(listen_comm, &recv_comm) != ncclSuccess) break;
    if (recv_comm != NULL) {
      drain(recv_comm);
      break;
    }
    usleep(20);
  }
  braid_socket_close(&s);
  return 0;
}
