/*
 * fake_plugin.c - net plugin libraries for tests/net/plugin.sh, one per -D choice:
 *   FAKE_NCCL_ABI   exports only NCCL's ABI (ncclNetPlugin_v8, "FakeNccl", no device): braid
 *                   loads it through its adapter (v8), finds no device and uses Socket;
 *   FAKE_NCCL_V13   exports only ncclNetPlugin_v13 (newer than braid's v12): unsupported;
 *   FAKE_BROKEN     a braid plugin ("Broken") whose init fails: skipped, Socket used;
 *   FAKE_NODEV      a braid plugin ("Nodev") with no device: skipped, Socket used; NCCL_NET=Nodev
 *                   then fails with a clear error.
 * None of them ever moves data.
 */
#include <stddef.h>

#include "transport/net/net.h"

#if defined(FAKE_NCCL_ABI)
#include "transport/net/plugin/nccl_net_abi.h"
static ncclResult_t fake_init(nccl_abi_logger_t log) {
  log(3, 0x10, __FILE__, __LINE__, "NET/FakeNccl : init through NCCL's v8 logger");
  return ncclSuccess;
}
static ncclResult_t fake_devices(int* ndev) {
  *ndev = 0;
  return ncclSuccess;
}
static ncclResult_t fake_unused(void) {
  return ncclInternalError; /* never called: no device */
}
#define U (void*)fake_unused
__attribute__((visibility("default"))) const struct nccl_net_v8 ncclNetPlugin_v8 = {
    "FakeNccl", fake_init, fake_devices, U, U, U, U, U, U, U, U, U, U, U, U, U, U, U, U,
};
#elif defined(FAKE_NCCL_V13)
/* Only the symbol matters: braid must not call into it. */
__attribute__((visibility("default"))) const char ncclNetPlugin_v13[256] = "newer than braid";
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
