/*
 * p2p.c - the peer-to-peer transport: GPU to GPU on one node, the sender's kernels storing
 * straight into the receiver's device memory (P2P write, as NCCL's default).
 *
 * The receiver allocates the connection's FIFO (control block + one buffer per protocol) in
 * its device's memory. A sender in another process maps it through an IPC handle
 * (ipc_export / ipc_import of the device layer: cudaIpc* on a GPU, shared memory under the
 * fake GPU) and logs `via P2P/IPC`; a sender in the same process uses the receiver's pointer
 * (`via P2P/direct pointer`: the CUDA runtime refuses to open a handle of its own process).
 *
 * Who may connect (both ends decide alone and must agree, so every test is symmetric): both
 * ranks on devices, the same node and /dev/shm, NCCL_P2P_DISABLE not 1, the driver able to
 * reach each GPU from the other (or the same GPU, with BRAID_GPU_SHARING=1), and the path
 * between the GPUs within NCCL_P2P_LEVEL (topo.h; default PXB, always over NVLink). A GPU the
 * topology does not show (a peer's GPU hidden from this process is still in sysfs; the fake
 * GPU is not) counts as one PCIe switch away (PIX): the driver's answer decides, and
 * NCCL_P2P_LEVEL of NVB or closer still turns it off.
 *
 * The path comes from the communicator's topology (ctx->topo, detected at init, or NCCL_TOPO_FILE
 * then).
 *
 * Lifetime: the receiver frees its allocation; a sender closes what it imported and forgets a
 * direct pointer. The connect handshake (connect.c) keeps the receiver from freeing before the
 * sender holds the memory; after that either side may go first, or die.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/param.h"
#include "device/device.h"
#include "topo/topo.h"
#include "transport/transport.h"

#define P2P_MAGIC 0x50325031u /* "P2P1": the peer chose this transport too */

/* What each side tells the other. The sender's carries only the magic. */
struct p2p_blob {
  uint32_t magic;
  int rank; /* the writer of the blob */
  int cuda_dev;
  int pid;
  uint64_t pid_hash; /* same process as the reader: use ptr */
  void* ptr;         /* the receiver's FIFO (device pointer) */
  size_t bytes;
  struct braid_ipc_handle handle; /* other process: ipc_import this */
};
_Static_assert(sizeof(struct p2p_blob) <= BRAID_CONNECT_BLOB_BYTES, "p2p blob too large");

/* Per-side state. */
struct p2p_res {
  const struct braid_device_ops* d;
  void* ptr;    /* receiver: its allocation; sender: the mapping or the receiver's pointer */
  int cuda_dev; /* made current around alloc, import, close and free */
  int owner;    /* receiver: ptr is its allocation */
  int imported; /* sender: ptr came from ipc_import */
};

/* ---- who may connect ----------------------------------------------------------------------- */

/* 1 when a and b name the same GPU. Bus ids when both are known, else device numbers of one
 * process. */
static int same_gpu(const struct braid_peer_info* a, const struct braid_peer_info* b) {
  if (a->bus_id >= 0 && b->bus_id >= 0) return a->bus_id == b->bus_id;
  return a->pid_hash == b->pid_hash && a->cuda_dev == b->cuda_dev;
}

/* The path type between the GPUs of a and b, the worse of both directions; PIX when the
 * topology does not show both (or is unknown). */
static int gpu_path(const struct braid_topo_system* sys, const struct braid_peer_info* a,
                    const struct braid_peer_info* b) {
  if (same_gpu(a, b)) return BRAID_PATH_LOC;
  int ga = sys ? braid_topo_gpu_find(sys, a->bus_id) : -1;
  int gb = sys ? braid_topo_gpu_find(sys, b->bus_id) : -1;
  if (ga < 0 || gb < 0) return BRAID_PATH_PIX;
  int ab = braid_topo_path(sys, sys->gpus[ga], sys->gpus[gb])->direct;
  int ba = braid_topo_path(sys, sys->gpus[gb], sys->gpus[ga])->direct;
  return ab > ba ? ab : ba;
}

/* This process's device number of the GPU with this bus id, -1 when it is not visible. */
static int local_dev_of(const struct braid_device_ops* d, const struct braid_peer_info* p,
                        const struct braid_peer_info* me) {
  int n = 0;
  if (p->pid_hash == me->pid_hash) return p->cuda_dev;
  if (p->bus_id < 0 || d->count(&n) != ncclSuccess) return -1;
  for (int i = 0; i < n; i++) {
    int64_t id;
    char str[32];
    if (d->bus_id(i, &id, str, sizeof(str)) == ncclSuccess && id == p->bus_id) return i;
  }
  return -1;
}

/* The driver's word: the same GPU, or peer access both ways. A GPU this process cannot see
 * is left to the topology (CUDA maps IPC handles of invisible devices). */
static int driver_allows(const struct braid_device_ops* d, const struct braid_peer_info* me,
                         const struct braid_peer_info* p) {
  if (same_gpu(me, p)) return 1;
  int peer_dev = local_dev_of(d, p, me);
  if (peer_dev < 0) return 1;
  if (peer_dev == me->cuda_dev) return 1;
  int ab = 0, ba = 0;
  if (d->can_access_peer(me->cuda_dev, peer_dev, &ab) != ncclSuccess) return 0;
  if (d->can_access_peer(peer_dev, me->cuda_dev, &ba) != ncclSuccess) return 0;
  return ab && ba;
}

static int p2p_can_connect(const struct braid_transport_ctx* t, int peer) {
  const struct braid_device_ops* d = t->device;
  const struct braid_peer_info* me = &t->peers[t->rank];
  const struct braid_peer_info* p = &t->peers[peer];
  int level;
  if (d == NULL || me->host_mode || p->host_mode) return 0;
  if (me->host_hash != p->host_hash || me->shm_dev != p->shm_dev) return 0;
  if (braid_param_int(BRAID_PARAM_P2P_DISABLE) == 1) return 0;
  if (braid_topo_p2p_level(t->topo, &level) != ncclSuccess) return 0; /* malformed NCCL_P2P_LEVEL: WARNed, no P2P */
  int path = gpu_path(t->topo, me, p);
  if (path > level) {
    BRAID_TRACE(BRAID_LOG_P2P, "P2P rank %d -> %d: path %s beyond NCCL_P2P_LEVEL %s", t->rank, peer,
                braid_topo_path_name(path), braid_topo_path_name(level));
    return 0;
  }
  return driver_allows(d, me, p);
}

/* ---- setup and connect --------------------------------------------------------------------- */

static void blob_fill(const struct braid_transport_ctx* t, struct braid_connect_blob* out, struct p2p_blob** b_p) {
  struct p2p_blob* b = (struct p2p_blob*)out->data;
  const struct braid_peer_info* me = &t->peers[t->rank];
  memset(out, 0, sizeof(*out));
  b->magic = P2P_MAGIC;
  b->rank = t->rank;
  b->cuda_dev = t->cuda_dev;
  b->pid = me->pid;
  b->pid_hash = me->pid_hash;
  *b_p = b;
}

/* The peer's blob must come from this transport: both sides pick alone, and a disagreement
 * (different NCCL_P2P_* settings on the two processes) would otherwise read garbage. */
static ncclResult_t blob_check(const struct braid_transport_ctx* t, const struct braid_connect_blob* peer,
                               const struct p2p_blob** b_p) {
  const struct p2p_blob* b = (const struct p2p_blob*)peer->data;
  if (b->magic != P2P_MAGIC) {
    BRAID_WARN(
        "Rank %d chose P2P for a connection whose peer chose another transport; NCCL_P2P_DISABLE, "
        "NCCL_P2P_LEVEL and NCCL_SHM_DISABLE must be the same on every rank",
        t->rank);
    return ncclInvalidUsage;
  }
  *b_p = b;
  return ncclSuccess;
}

static ncclResult_t p2p_send_setup(const struct braid_transport_ctx* t, int peer, int channel,
                                   struct braid_connector* c, struct braid_connect_blob* out) {
  struct p2p_blob* b;
  blob_fill(t, out, &b); /* the receiver only checks that we chose P2P too */
  return ncclSuccess;
}

static ncclResult_t p2p_recv_setup(const struct braid_transport_ctx* t, int peer, int channel,
                                   struct braid_connector* c, struct braid_connect_blob* out) {
  const struct braid_device_ops* d = t->device;
  ncclResult_t res = ncclSuccess;
  struct p2p_res* r;
  struct p2p_blob* b;
  int saved;
  BRAID_CALLOC_GOTO(r, 1, res, err);
  r->d = d;
  r->cuda_dev = t->cuda_dev;
  r->owner = 1;
  BRAID_CHECK_GOTO(braid_transport_device_enter(d, r->cuda_dev, &saved), res, err_free_res);
  blob_fill(t, out, &b);
  b->bytes = braid_transport_fifo_bytes(t);
  BRAID_CHECK_GOTO(d->alloc(&r->ptr, b->bytes), res, err_leave);
  b->ptr = r->ptr;
  if (t->peers[peer].pid_hash != b->pid_hash) BRAID_CHECK_GOTO(d->ipc_export(r->ptr, &b->handle), res, err_dev_free);
  braid_transport_device_leave(d, saved);
  braid_transport_fifo_layout(t, r->ptr, &c->conn);
  c->res = r;
  return ncclSuccess;
err_dev_free:
  d->free(r->ptr);
err_leave:
  braid_transport_device_leave(d, saved);
err_free_res:
  free(r);
err:
  return res;
}

/* Map the receiver's FIFO: its pointer within one process, its IPC handle across two. */
static ncclResult_t p2p_send_connect(const struct braid_transport_ctx* t, struct braid_connector* c,
                                     const struct braid_connect_blob* peer) {
  const struct braid_device_ops* d = t->device;
  const struct braid_peer_info* me = &t->peers[t->rank];
  ncclResult_t res = ncclSuccess;
  const struct p2p_blob* b;
  struct p2p_res* r;
  int saved;
  BRAID_CHECK(blob_check(t, peer, &b));
  BRAID_CALLOC_GOTO(r, 1, res, err);
  r->d = d;
  r->cuda_dev = t->cuda_dev;
  if (b->pid_hash == me->pid_hash) {
    /* A device of this process: its memory is reachable once peer access from our device is
     * enabled (IPC imports enable it themselves, lazily). The same device needs nothing. */
    if (b->cuda_dev != t->cuda_dev) {
      BRAID_CHECK_GOTO(braid_transport_device_enter(d, r->cuda_dev, &saved), res, err_free_res);
      res = d->enable_peer_access(b->cuda_dev);
      braid_transport_device_leave(d, saved);
      if (res != ncclSuccess) {
        BRAID_WARN(
            "Rank %d (CUDA device %d) could not enable peer access to CUDA device %d of rank %d: %s; "
            "NCCL_P2P_DISABLE=1 uses shared memory instead",
            t->rank, t->cuda_dev, b->cuda_dev, b->rank, ncclGetErrorString(res));
        goto err_free_res;
      }
    }
    r->ptr = b->ptr;
  } else {
    BRAID_CHECK_GOTO(braid_transport_device_enter(d, r->cuda_dev, &saved), res, err_free_res);
    res = d->ipc_import(&b->handle, &r->ptr);
    braid_transport_device_leave(d, saved);
    if (res != ncclSuccess) {
      BRAID_WARN(
          "Rank %d (CUDA device %d, pid %d) could not map the P2P receive buffer of rank %d (CUDA device %d, "
          "pid %d, %zu bytes): IPC import failed: %s. The processes may not share an IPC namespace or "
          "may see different GPUs; NCCL_P2P_DISABLE=1 uses shared memory instead",
          t->rank, t->cuda_dev, me->pid, b->rank, b->cuda_dev, b->pid, b->bytes, ncclGetErrorString(res));
      goto err_free_res;
    }
    r->imported = 1;
  }
  braid_transport_fifo_layout(t, r->ptr, &c->conn);
  c->res = r;
  return ncclSuccess;
err_free_res:
  free(r);
err:
  return res;
}

static ncclResult_t p2p_recv_connect(const struct braid_transport_ctx* t, struct braid_connector* c,
                                     const struct braid_connect_blob* peer) {
  const struct p2p_blob* b;
  return blob_check(t, peer, &b);
}

/* Either side; what it holds decides what it undoes. */
static void p2p_free(struct braid_connector* c) {
  struct p2p_res* r = c->res;
  int saved = -1;
  if (r == NULL) return;
  const struct braid_device_ops* d = r->d;
  if (r->ptr != NULL && (r->imported || r->owner) && d != NULL) {
    if (braid_transport_device_enter(d, r->cuda_dev, &saved) != ncclSuccess) saved = -1; /* free anyway */
    if (r->imported)
      d->ipc_close(r->ptr);
    else
      d->free(r->ptr);
    braid_transport_device_leave(d, saved);
  }
  free(r);
  c->res = NULL;
}

static const char* p2p_desc(const struct braid_connector* c) {
  const struct p2p_res* r = c->res;
  return r != NULL && r->imported ? "IPC" : "direct pointer";
}

/* The FIFO is device memory (the receiver's allocation, or the sender's mapping of it; its
 * control block first): the host reads its counters only where the device layer says device
 * memory is host memory (the fake GPU). */
static const volatile struct braid_conn_ctrl* p2p_host_ctrl(const struct braid_connector* c) {
  const struct p2p_res* r = c->res;
  if (r == NULL || r->ptr == NULL || !(r->d->caps & BRAID_DEVICE_CAP_HOST_READS_DEVICE)) return NULL;
  return (const volatile struct braid_conn_ctrl*)r->ptr;
}

const struct braid_transport braid_transport_p2p = {
    .name = "P2P",
    .can_connect = p2p_can_connect,
    .send_setup = p2p_send_setup,
    .recv_setup = p2p_recv_setup,
    .send_connect = p2p_send_connect,
    .recv_connect = p2p_recv_connect,
    .send_free = p2p_free,
    .recv_free = p2p_free,
    .desc = p2p_desc,
    .host_ctrl = p2p_host_ctrl,
};
