/*
 * nvls.c - the node's multicast object (nvls.h). Steps, each closed by an allgather of every
 * rank's status so that all ranks continue or all fall back together:
 *   0. eligible: a device layer with multicast (mc_supported), sm_90+ (multimem), a GPU of
 *      its own (an object takes each device once), NCCL_NVLS_ENABLE not 0;
 *   1. granularity for nranks devices (the largest any rank reports), the size rounded to it;
 *   2. rank 0 creates the object, its handle travels with its status;
 *   3. the others import it; every rank adds its device (the object must have every device
 *      before memory is bound);
 *   4. every rank binds memory of its own GPU at offset 0 (new memory, or its window's);
 *   5. every rank maps the object: the multicast address.
 * A failed step (the device layer said why at INFO) releases what each rank made and reports
 * the first failing rank and step; the caller stays unicast and says so.
 */
#include "transport/nvls/nvls.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "base/param.h"

/* One status per rank, gathered: the first failing rank, or -1. */
static ncclResult_t agree(const struct braid_nvls_args* a, int ok, int* bad) {
  int* all = calloc((size_t)a->nranks, sizeof(int));
  if (all == NULL) return ncclSystemError;
  all[a->rank] = ok;
  ncclResult_t res = braid_bootstrap_allgather(a->bs, all, sizeof(int));
  *bad = -1;
  for (int r = 0; r < a->nranks && res == ncclSuccess; r++)
    if (!all[r]) {
      *bad = r;
      break;
    }
  free(all);
  return res;
}

/* Step 0 on this rank: "" when eligible, else why not. */
static const char* ineligible(const struct braid_nvls_args* a) {
  const struct braid_device_ops* d = a->dev;
  int yes = 0, sm = 0;
  if (braid_param_int(BRAID_PARAM_NVLS_ENABLE) == 0) return "NCCL_NVLS_ENABLE=0";
  if (d == NULL || d->mc_supported == NULL) return "no GPU";
  if (d->mc_supported(a->cuda_dev, &yes) != ncclSuccess || !yes) return "its GPU has no multicast (no NVSwitch)";
  if (d->compute_capability(a->cuda_dev, &sm) != ncclSuccess || sm < 90) return "its GPU is older than sm_90";
  const struct braid_peer_info* me = &a->peers[a->rank];
  for (int r = 0; r < a->nranks; r++)
    if (r != a->rank &&
        (me->bus_id >= 0 ? a->peers[r].bus_id == me->bus_id
                         : a->peers[r].pid_hash == me->pid_hash && a->peers[r].cuda_dev == me->cuda_dev))
      return "it shares its GPU with another rank";
  return "";
}

static void release(const struct braid_nvls_args* a, struct braid_nvls* nv) {
  if (nv->mc != NULL) a->dev->mc_release(nv->mc);
  free(nv);
}

struct create_msg {
  int ok;
  struct braid_mc_handle h;
};

/* Steps 1-5; *bad_step names the first failing one (NULL: all done). */
static ncclResult_t build(const struct braid_nvls_args* a, struct braid_nvls* nv, const char** bad_step, int* bad) {
  const struct braid_device_ops* d = a->dev;
  ncclResult_t res = ncclSuccess;
  size_t* grans = calloc((size_t)a->nranks, sizeof(size_t));
  struct create_msg* msgs = calloc((size_t)a->nranks, sizeof(*msgs));
  if (grans == NULL || msgs == NULL) {
    res = ncclSystemError;
    goto out;
  }
  *bad_step = "query the multicast granularity";
  size_t g = 0;
  grans[a->rank] = d->mc_granularity(a->nranks, a->bytes, &g) == ncclSuccess && g > 0 && (g & (g - 1)) == 0 ? g : 0;
  BRAID_CHECK_GOTO(braid_bootstrap_allgather(a->bs, grans, sizeof(size_t)), res, out);
  for (int r = 0; r < a->nranks; r++) {
    if (grans[r] == 0) {
      *bad = r;
      goto out;
    }
    if (grans[r] > nv->gran) nv->gran = grans[r];
  }
  nv->bytes = (a->bytes + nv->gran - 1) / nv->gran * nv->gran;
  *bad_step = "create the multicast object";
  if (a->rank == 0) msgs[0].ok = d->mc_create(a->nranks, nv->bytes, &nv->mc, &msgs[0].h) == ncclSuccess;
  BRAID_CHECK_GOTO(braid_bootstrap_allgather(a->bs, msgs, sizeof(*msgs)), res, out);
  if (!msgs[0].ok) {
    *bad = 0;
    goto out;
  }
  *bad_step = "join the multicast object";
  int ok = a->rank == 0 || d->mc_import(&msgs[0].h, &nv->mc) == ncclSuccess;
  ok = ok && d->mc_add_device(nv->mc, a->cuda_dev) == ncclSuccess;
  BRAID_CHECK_GOTO(agree(a, ok, bad), res, out);
  if (*bad >= 0) goto out;
  *bad_step = "bind memory to the multicast object";
  if (a->bind_ptr == NULL) {
    ok = d->mc_bind(nv->mc, a->cuda_dev, nv->bytes, &nv->local) == ncclSuccess;
  } else if (nv->bytes > a->bind_room || a->bind_off % nv->gran != 0 || d->mc_bind_mem == NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_REG,
               "multicast: rank %d's window (offset %zu in its allocation, %zu bytes to its end) does not hold %zu "
               "bytes at a multiple of the granularity %zu",
               a->rank, a->bind_off, a->bind_room, nv->bytes, nv->gran);
    ok = 0;
  } else {
    ok = d->mc_bind_mem(nv->mc, a->cuda_dev, a->bind_ptr, nv->bytes) == ncclSuccess;
    if (ok) nv->local = a->bind_ptr;
  }
  BRAID_CHECK_GOTO(agree(a, ok, bad), res, out);
  if (*bad >= 0) goto out;
  *bad_step = "map the multicast object";
  ok = d->mc_map(nv->mc, nv->bytes, &nv->mcptr) == ncclSuccess;
  BRAID_CHECK_GOTO(agree(a, ok, bad), res, out);
  if (*bad < 0) *bad_step = NULL;
out:
  free(grans);
  free(msgs);
  return res;
}

ncclResult_t braid_nvls_setup(const struct braid_nvls_args* a, struct braid_nvls** out, char* why, size_t why_len) {
  const char* no = ineligible(a);
  int bad = -1;
  *out = NULL;
  int* all = calloc((size_t)a->nranks, sizeof(int));
  if (all == NULL) return ncclSystemError;
  all[a->rank] = no[0] == '\0';
  ncclResult_t res = braid_bootstrap_allgather(a->bs, all, sizeof(int));
  for (int r = 0; r < a->nranks && res == ncclSuccess; r++)
    if (!all[r] && bad < 0) bad = r;
  free(all);
  BRAID_CHECK(res);
  if (bad >= 0) {
    /* every rank names the first ineligible one; only that rank knows the reason */
    snprintf(why, why_len, "rank %d cannot use multicast%s%s", bad, bad == a->rank ? ": " : "",
             bad == a->rank ? no : "");
    return ncclSuccess;
  }
  struct braid_nvls* nv = calloc(1, sizeof(*nv));
  if (nv == NULL) return ncclSystemError;
  const char* step = NULL;
  res = build(a, nv, &step, &bad);
  if (res != ncclSuccess || step != NULL) {
    if (res == ncclSuccess) snprintf(why, why_len, "rank %d could not %s", bad, step);
    release(a, nv);
    return res;
  }
  *out = nv;
  return ncclSuccess;
}

void braid_nvls_release(const struct braid_device_ops* dev, struct braid_nvls* nv) {
  if (nv == NULL) return;
  dev->mc_release(nv->mc);
  free(nv);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
static uint32_t word(const struct braid_device_ops* dev, const struct braid_nvls* nv, size_t off, int* ok) {
  uint64_t v = 0;
  if (dev->setup_copy(&v, (const char*)nv->local + off, sizeof(v)) != ncclSuccess) *ok = 0;
  return (uint32_t)v;
}

void braid_nvls_free(const struct braid_device_ops* dev, struct braid_nvls* nv, int nranks, size_t done_off,
                     size_t calls_off, const volatile uint32_t* abort_flag) {
  if (nv == NULL) return;
  int ok = 1;
  const uint32_t calls = word(dev, nv, calls_off, &ok);
  double deadline = now() + 5.0;
  for (int r = 0; r < nranks && ok && calls > 0; r++)
    while (ok && (int32_t)(word(dev, nv, done_off + 8 * (size_t)r, &ok) - calls) < 0 && !*abort_flag) {
      if (now() > deadline) {
        BRAID_INFO(BRAID_LOG_INIT, "rank %d never finished multicast call %u; releasing the object anyway", r, calls);
        ok = 0;
        break;
      }
      sched_yield();
    }
  dev->mc_release(nv->mc);
  free(nv);
}
