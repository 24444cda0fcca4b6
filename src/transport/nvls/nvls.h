/*
 * nvls.h - the node's multicast object (NVSwitch, NVLink SHARP) behind the NVLS all-reduce:
 * a per-communicator resource over every rank of one node, not a per-pair connection. Made
 * by core/sym/lsa.c next to the one-/two-shot scratch; kernels/multimem.h runs over it.
 */
#ifndef BRAID_TRANSPORT_NVLS_H
#define BRAID_TRANSPORT_NVLS_H

#include <stddef.h>

#include "bootstrap/bootstrap.h"
#include "device/device.h"
#include "transport/transport.h"

struct braid_nvls_args {
  const struct braid_device_ops* dev; /* NULL in host mode: no multicast */
  int cuda_dev, rank, nranks;
  const struct braid_peer_info* peers; /* [nranks] */
  struct braid_bootstrap* bs;
  size_t bytes; /* each rank's bound memory (rounded up to the granularity) */
  /* NULL: each rank's memory is allocated for the object (mc_bind). Else this rank's memory to
   * bind (a window of cuMem memory: mc_bind_mem): `bytes` rounded to the granularity must fit
   * in bind_room bytes from bind_ptr, and bind_off (its offset in its allocation) be a multiple
   * of the granularity, or this rank fails the bind step. */
  void* bind_ptr;
  size_t bind_off, bind_room;
};

struct braid_nvls {
  void* mc;     /* the device layer's object */
  void* local;  /* this rank's bound memory, as mapped here */
  void* mcptr;  /* the multicast address (multimem instructions) */
  size_t bytes; /* of each member, rounded to gran */
  size_t gran;
};

/* Collective over the communicator (every rank calls it; each step ends with an allgather, so
 * every rank takes the same branch). *out = the object, or NULL with `why` saying why not (no
 * multicast on some GPU, a GPU shared by two ranks, sm < 90, NCCL_NVLS_ENABLE=0, or a step
 * that failed on some rank: granularity, create, import, join, bind, map). Returns an error
 * only when the bootstrap itself failed. */
ncclResult_t braid_nvls_setup(const struct braid_nvls_args* a, struct braid_nvls** out, char* why, size_t why_len);

/* Unmaps, unbinds and frees an object no kernel uses any more (a window's: deregistration). */
void braid_nvls_release(const struct braid_device_ops* dev, struct braid_nvls* nv);

/* Waits (bounded: 5 s) until every rank's done word in this rank's memory reached `calls`
 * (offset done_off + 8 r: kernels/multimem.h), then unmaps, unbinds and frees. */
void braid_nvls_free(const struct braid_device_ops* dev, struct braid_nvls* nv, int nranks, size_t done_off,
                     size_t calls_off, const volatile uint32_t* abort_flag);

#endif /* BRAID_TRANSPORT_NVLS_H */
