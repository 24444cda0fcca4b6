/*
 * errors.c - the public entry points about versions and errors: ncclGetVersion,
 * ncclGetErrorString, ncclGetLastError and the deprecated ncclResetDebugInit. Each is also
 * exported under its `pnccl` name (src/base/api.h).
 */
/* nccl.h declares ncclResetDebugInit only for NCCL_OS_LINUX (elsewhere it is a no-op macro):
 * this file defines it, so it sees the declaration. */
#define NCCL_OS_LINUX 1
#include <stddef.h>

#include "base/api.h"
#include "base/debug.h"
#include "base/param.h"

BRAID_API ncclResult_t ncclGetVersion(int* version) {
  if (version == NULL) {
    BRAID_WARN("ncclGetVersion: invalid argument version = NULL");
    return ncclInvalidArgument;
  }
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclGetVersion)

/* NCCL's exact strings; ncclNumResults and anything else is "unknown result code". */
BRAID_API const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "timeout";
    default:
      return "unknown result code";
  }
}
BRAID_PROFILE_ALIAS(ncclGetErrorString)

/* The last WARN of the process, as NCCL does; `comm` is not consulted. "" when none. */
BRAID_API const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return braid_debug_last_error();
}
BRAID_PROFILE_ALIAS(ncclGetLastError)

/* Re-reads the environment and conf files, then the logging settings (level -1 tells the
 * logger it is not initialised; braid_debug_init reopens NCCL_DEBUG_FILE). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
BRAID_API void ncclResetDebugInit() {
  braid_param_reload();
  __atomic_store_n(&braid_debug_level, -1, __ATOMIC_RELEASE);
  braid_debug_init();
}
BRAID_PROFILE_ALIAS(ncclResetDebugInit)
#pragma GCC diagnostic pop
