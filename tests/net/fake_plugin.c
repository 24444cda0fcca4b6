/*
 * fake_plugin.c - net plugin libraries for tests/net/plugin.sh, one per -D choice:
 *   FAKE_NCCL_ABI   exports only NCCL's symbol (ncclNetPlugin_v8): braid must say it does not
 *                   load that ABI and use its own Socket network;
 *   FAKE_BROKEN     a braid plugin ("Broken") whose init fails: skipped, Socket used;
 *   FAKE_NODEV      a braid plugin ("Nodev") with no device: skipped, Socket used; NCCL_NET=Nodev
 *                   then fails with a clear error.
 * None of them ever moves data.
 */
#include <stddef.h>

#include "transport/net/net.h"

#if defined(FAKE_NCCL_ABI)
/* Only the symbol matters: braid must not call into it. */
__attribute__((visibility("default"))) const char ncclNetPlugin_v8[256] = "not a braid plugin";
#else
#if defined(FAKE_BROKEN)
#define FAKE_NAME "Broken"
static ncclResult_t fake_init(braid_net_log_fn log) {
  log(2, ~0ULL, __FILE__, __LINE__, "NET/Broken : this plugin always fails to start");
  return ncclSystemError;
}
#else
#define FAKE_NAME "Nodev"
static ncclResult_t fake_init(braid_net_log_fn log) {
  return ncclSuccess;
}
#endif
static ncclResult_t fake_devices(int* ndev) {
  *ndev = 0;
  return ncclSuccess;
}
__attribute__((visibility("default"))) const struct braid_net_v1 braidNetPlugin_v1 = {
    .name = FAKE_NAME,
    .init = fake_init,
    .devices = fake_devices,
};
#endif
