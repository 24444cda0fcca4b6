/*
 * transport.h - the transport vtable (DESIGN.md section 5, STYLE.md 3). A transport knows how
 * to build one direction of a connection between two ranks: the receiver owns the FIFO memory
 * (control block + one buffer per protocol), the sender gets access to it. Each side runs
 * setup (produces a blob for the peer), the blobs cross over the bootstrap, then connect
 * (consumes the peer's blob). Per peer pair the first transport whose can_connect says yes
 * wins, in the order of braid_transports[].
 */
#ifndef BRAID_TRANSPORT_H
#define BRAID_TRANSPORT_H

#include "core/comm.h"

#define BRAID_CONNECT_BLOB_BYTES 256

/* What one side tells the other to complete a connection. */
struct braid_connect_blob {
  unsigned char data[BRAID_CONNECT_BLOB_BYTES];
};

struct braid_transport {
  const char* name;
  /* 1 when this transport can connect `comm`'s rank to `peer`. */
  int (*can_connect)(const struct braid_comm* comm, int peer);
  /* Sender side: prepare, describe yourself to the receiver. */
  ncclResult_t (*send_setup)(struct braid_comm* comm, int peer, int channel, struct braid_connector* c,
                             struct braid_connect_blob* out);
  /* Receiver side: allocate the FIFO, describe it to the sender. */
  ncclResult_t (*recv_setup)(struct braid_comm* comm, int peer, int channel, struct braid_connector* c,
                             struct braid_connect_blob* out);
  /* Sender side: map the receiver's FIFO; fills c->conn. */
  ncclResult_t (*send_connect)(struct braid_comm* comm, struct braid_connector* c,
                               const struct braid_connect_blob* peer);
  /* Receiver side: finish with the sender's blob; fills c->conn. */
  ncclResult_t (*recv_connect)(struct braid_comm* comm, struct braid_connector* c,
                               const struct braid_connect_blob* peer);
  /* Release everything of one side; safe on a half-built connector. */
  void (*send_free)(struct braid_connector* c);
  void (*recv_free)(struct braid_connector* c);
  /* May be NULL: how a connected sender reaches the receiver, the text after "via NAME/" in
   * the connection's INFO line ("IPC", "direct pointer", "shared memory", ...). */
  const char* (*desc)(const struct braid_connector* c);
};

extern const struct braid_transport braid_transport_p2p;
extern const struct braid_transport braid_transport_shm;

/* shm.c: a rank of this machine that died during init may have left the receive segments it
 * created for `comm` in /dev/shm (its sender never mapped them); its survivors remove them. */
void braid_transport_shm_forget(const struct braid_comm* comm, int peer);

/* Size of the FIFO memory a receiver allocates for one connection. */
size_t braid_transport_fifo_bytes(const struct braid_comm* comm);
/* Lay out ctrl + buffers in `base` (the receiver's memory) into a braid_conn. */
void braid_transport_fifo_layout(const struct braid_comm* comm, char* base, struct braid_conn* conn);

/* Device communicators: run a device-layer call with `dev` current on this thread and put
 * the previous device back afterwards (connections are made on init threads, group threads
 * and the caller's thread, whose current device need not be the communicator's). enter
 * returns the device to restore in *saved_p (-1: nothing to restore). */
ncclResult_t braid_transport_device_enter(int dev, int* saved_p);
void braid_transport_device_leave(int saved);

#endif /* BRAID_TRANSPORT_H */
