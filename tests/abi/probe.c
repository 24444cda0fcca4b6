/*
 * probe.c - prints the ABI-relevant facts of whichever nccl.h the include path finds: sizes,
 * alignments and field offsets of the public structs, the values their initializers give,
 * every enum value, the #define constants and version macros. tests/abi/check.sh builds it
 * against braid's include/nccl.h and against NVIDIA's headers and diffs the outputs. Valid C
 * and C++, so the C++ view of our header is checked too.
 *
 * Two profiles:
 *   -DPROBE_BASELINE_2_28  the facts a program built against NCCL 2.28 depends on and that
 *                          2.30 kept: built against NVIDIA's 2.28.9 header and against ours,
 *                          the outputs must be identical. Left out: what 2.30 changed on
 *                          purpose (version macros and the version an initializer stores,
 *                          sizeof(ncclConfig_t) and its struct tag, ncclNumResults).
 *   (default)              every fact of the 2.30 header, compared with NVIDIA 2.30.7's
 *                          (tests/abi/nccl-2.30.7.probe, the same probe's output on that header).
 */
#include <nccl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
#define ALIGNOF(T) alignof(T)
#define TYPEOF(x) decltype(x)
#else
#define ALIGNOF(T) _Alignof(T)
#define TYPEOF(x) __typeof__(x)
#endif

#define P_TYPE(T) printf("type %s size %zu align %zu\n", #T, sizeof(T), (size_t)ALIGNOF(T))
/* A field: offset, size, and for integers whether the type is signed. */
#define P_FIELD(T, f) printf("field %s.%s offset %zu size %zu\n", #T, #f, offsetof(T, f), sizeof(((T*)0)->f))
#define P_IFIELD(T, f)                                                                              \
  printf("field %s.%s offset %zu size %zu signed %d\n", #T, #f, offsetof(T, f), sizeof(((T*)0)->f), \
         (int)((TYPEOF(((T*)0)->f)) - 1 < 0))
#define P_VALUE(name) printf("value %s %lld\n", #name, (long long)(name))
#define P_MISSING(name) printf("value %s MISSING\n", #name)
#define P_INIT(var, f) printf("init %s.%s %lld\n", #var, #f, (long long)(var).f)
#define P_INITPTR(var, f) printf("init %s.%s %s\n", #var, #f, (var).f == NULL ? "NULL" : "non-NULL")

static void types(void) {
  P_TYPE(ncclUniqueId);
#ifndef PROBE_BASELINE_2_28
  P_TYPE(ncclConfig_t);
  P_TYPE(struct ncclConfig_v23000);
  P_TYPE(ncclCommMemStat_t);
  P_TYPE(ncclWaitSignalDesc_t);
  P_IFIELD(ncclWaitSignalDesc_t, opCnt);
  P_IFIELD(ncclWaitSignalDesc_t, peer);
  P_IFIELD(ncclWaitSignalDesc_t, sigIdx);
  P_IFIELD(ncclWaitSignalDesc_t, ctx);
#endif
  P_TYPE(ncclSimInfo_t);
  P_TYPE(struct ncclSimInfo_v22200);
  P_TYPE(ncclComm_t);
  P_TYPE(ncclWindow_t);
  P_TYPE(cudaStream_t);
  P_TYPE(ncclResult_t);
  P_TYPE(ncclDataType_t);
  P_TYPE(ncclRedOp_t);
  P_TYPE(ncclRedOp_dummy_t);
  P_TYPE(ncclScalarResidence_t);

  P_FIELD(ncclUniqueId, internal);

  P_IFIELD(ncclConfig_t, size);
  P_IFIELD(ncclConfig_t, magic);
  P_IFIELD(ncclConfig_t, version);
  P_IFIELD(ncclConfig_t, blocking);
  P_IFIELD(ncclConfig_t, cgaClusterSize);
  P_IFIELD(ncclConfig_t, minCTAs);
  P_IFIELD(ncclConfig_t, maxCTAs);
  P_FIELD(ncclConfig_t, netName);
  P_IFIELD(ncclConfig_t, splitShare);
  P_IFIELD(ncclConfig_t, trafficClass);
  P_FIELD(ncclConfig_t, commName);
  P_IFIELD(ncclConfig_t, collnetEnable);
  P_IFIELD(ncclConfig_t, CTAPolicy);
  P_IFIELD(ncclConfig_t, shrinkShare);
  P_IFIELD(ncclConfig_t, nvlsCTAs);
  P_IFIELD(ncclConfig_t, nChannelsPerNetPeer);
  P_IFIELD(ncclConfig_t, nvlinkCentricSched);
#ifndef PROBE_BASELINE_2_28
  P_IFIELD(ncclConfig_t, graphUsageMode);
  P_IFIELD(ncclConfig_t, numRmaCtx);
  P_IFIELD(ncclConfig_t, maxP2pPeers);
  P_IFIELD(ncclConfig_t, graphStreamOrdering);
#endif

  P_IFIELD(ncclSimInfo_t, size);
  P_IFIELD(ncclSimInfo_t, magic);
  P_IFIELD(ncclSimInfo_t, version);
  P_FIELD(ncclSimInfo_t, estimatedTime);
}

static void initializers(void) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
#ifndef PROBE_BASELINE_2_28
  P_INIT(config, size);
#endif
  P_INIT(config, magic);
#ifndef PROBE_BASELINE_2_28
  P_INIT(config, version);
#endif
  P_INIT(config, blocking);
  P_INIT(config, cgaClusterSize);
  P_INIT(config, minCTAs);
  P_INIT(config, maxCTAs);
  P_INITPTR(config, netName);
  P_INIT(config, splitShare);
  P_INIT(config, trafficClass);
  P_INITPTR(config, commName);
  P_INIT(config, collnetEnable);
  P_INIT(config, CTAPolicy);
  P_INIT(config, shrinkShare);
  P_INIT(config, nvlsCTAs);
  P_INIT(config, nChannelsPerNetPeer);
  P_INIT(config, nvlinkCentricSched);
#ifndef PROBE_BASELINE_2_28
  P_INIT(config, graphUsageMode);
  P_INIT(config, numRmaCtx);
  P_INIT(config, maxP2pPeers);
  P_INIT(config, graphStreamOrdering);
#endif

  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  P_INIT(sim, size);
  P_INIT(sim, magic);
#ifndef PROBE_BASELINE_2_28
  P_INIT(sim, version);
#endif
  printf("init sim.estimatedTime %g\n", (double)sim.estimatedTime);
}

static void enums(void) {
  P_VALUE(ncclSuccess);
  P_VALUE(ncclUnhandledCudaError);
  P_VALUE(ncclSystemError);
  P_VALUE(ncclInternalError);
  P_VALUE(ncclInvalidArgument);
  P_VALUE(ncclInvalidUsage);
  P_VALUE(ncclRemoteError);
  P_VALUE(ncclInProgress);
#ifndef PROBE_BASELINE_2_28
  P_VALUE(ncclTimeout);
  P_VALUE(ncclNumResults);
  P_VALUE(ncclStatGpuMemSuspend);
  P_VALUE(ncclStatGpuMemSuspended);
  P_VALUE(ncclStatGpuMemPersist);
  P_VALUE(ncclStatGpuMemTotal);
#endif

  P_VALUE(ncclInt8);
  P_VALUE(ncclChar);
  P_VALUE(ncclUint8);
  P_VALUE(ncclInt32);
  P_VALUE(ncclInt);
  P_VALUE(ncclUint32);
  P_VALUE(ncclInt64);
  P_VALUE(ncclUint64);
  P_VALUE(ncclFloat16);
  P_VALUE(ncclHalf);
  P_VALUE(ncclFloat32);
  P_VALUE(ncclFloat);
  P_VALUE(ncclFloat64);
  P_VALUE(ncclDouble);
  P_VALUE(ncclBfloat16);
  P_VALUE(ncclFloat8e4m3);
  P_VALUE(ncclFloat8e5m2);
  P_VALUE(ncclNumTypes);

  P_VALUE(ncclNumOps_dummy);
  P_VALUE(ncclSum);
  P_VALUE(ncclProd);
  P_VALUE(ncclMax);
  P_VALUE(ncclMin);
  P_VALUE(ncclAvg);
  P_VALUE(ncclNumOps);
  P_VALUE(ncclMaxRedOp);

  P_VALUE(ncclScalarDevice);
  P_VALUE(ncclScalarHostImmediate);
}

static void defines(void) {
#ifndef PROBE_BASELINE_2_28
#ifdef NCCL_MAJOR
  P_VALUE(NCCL_MAJOR);
#else
  P_MISSING(NCCL_MAJOR);
#endif
#ifdef NCCL_MINOR
  P_VALUE(NCCL_MINOR);
#else
  P_MISSING(NCCL_MINOR);
#endif
#ifdef NCCL_PATCH
  P_VALUE(NCCL_PATCH);
#else
  P_MISSING(NCCL_PATCH);
#endif
#ifdef NCCL_SUFFIX
  printf("value NCCL_SUFFIX \"%s\"\n", NCCL_SUFFIX);
#else
  P_MISSING(NCCL_SUFFIX);
#endif
#ifdef NCCL_VERSION_CODE
  P_VALUE(NCCL_VERSION_CODE);
#else
  P_MISSING(NCCL_VERSION_CODE);
#endif
#ifdef NCCL_API_MAGIC
  P_VALUE(NCCL_API_MAGIC);
#else
  P_MISSING(NCCL_API_MAGIC);
#endif
#ifdef NCCL_WIN_STRICT_ORDERING
  P_VALUE(NCCL_WIN_STRICT_ORDERING);
#else
  P_MISSING(NCCL_WIN_STRICT_ORDERING);
#endif
#ifdef NCCL_SUSPEND_MEM
  P_VALUE(NCCL_SUSPEND_MEM);
#else
  P_MISSING(NCCL_SUSPEND_MEM);
#endif
#endif /* PROBE_BASELINE_2_28 */
#ifdef NCCL_VERSION
  P_VALUE(NCCL_VERSION(2, 28, 9));
  P_VALUE(NCCL_VERSION(2, 8, 4)); /* the old M*1000 scheme */
  P_VALUE(NCCL_VERSION(2, 9, 0));
  P_VALUE(NCCL_VERSION(3, 0, 1));
  P_VALUE(NCCL_VERSION(2, 30, 7));
#else
  P_MISSING(NCCL_VERSION);
#endif
#ifdef NCCL_COMM_NULL
  printf("value NCCL_COMM_NULL %s\n", (void*)NCCL_COMM_NULL == NULL ? "NULL" : "non-NULL");
#else
  P_MISSING(NCCL_COMM_NULL);
#endif
#ifdef NCCL_UNIQUE_ID_BYTES
  P_VALUE(NCCL_UNIQUE_ID_BYTES);
#else
  P_MISSING(NCCL_UNIQUE_ID_BYTES);
#endif
#ifdef NCCL_CONFIG_UNDEF_INT
  P_VALUE(NCCL_CONFIG_UNDEF_INT);
#else
  P_MISSING(NCCL_CONFIG_UNDEF_INT);
#endif
#ifdef NCCL_CONFIG_UNDEF_PTR
  printf("value NCCL_CONFIG_UNDEF_PTR %s\n", (void*)NCCL_CONFIG_UNDEF_PTR == NULL ? "NULL" : "non-NULL");
#else
  P_MISSING(NCCL_CONFIG_UNDEF_PTR);
#endif
#ifdef NCCL_SPLIT_NOCOLOR
  P_VALUE(NCCL_SPLIT_NOCOLOR);
#else
  P_MISSING(NCCL_SPLIT_NOCOLOR);
#endif
#ifdef NCCL_UNDEF_FLOAT
  printf("value NCCL_UNDEF_FLOAT %g size %zu\n", (double)NCCL_UNDEF_FLOAT, sizeof(NCCL_UNDEF_FLOAT));
#else
  P_MISSING(NCCL_UNDEF_FLOAT);
#endif
#ifdef NCCL_WIN_DEFAULT
  P_VALUE(NCCL_WIN_DEFAULT);
#else
  P_MISSING(NCCL_WIN_DEFAULT);
#endif
#ifdef NCCL_WIN_COLL_SYMMETRIC
  P_VALUE(NCCL_WIN_COLL_SYMMETRIC);
#else
  P_MISSING(NCCL_WIN_COLL_SYMMETRIC);
#endif
#ifdef NCCL_WIN_REQUIRED_ALIGNMENT
  P_VALUE(NCCL_WIN_REQUIRED_ALIGNMENT);
#else
  P_MISSING(NCCL_WIN_REQUIRED_ALIGNMENT);
#endif
#ifdef NCCL_CTA_POLICY_DEFAULT
  P_VALUE(NCCL_CTA_POLICY_DEFAULT);
#else
  P_MISSING(NCCL_CTA_POLICY_DEFAULT);
#endif
#ifdef NCCL_CTA_POLICY_EFFICIENCY
  P_VALUE(NCCL_CTA_POLICY_EFFICIENCY);
#else
  P_MISSING(NCCL_CTA_POLICY_EFFICIENCY);
#endif
#ifdef NCCL_CTA_POLICY_ZERO
  P_VALUE(NCCL_CTA_POLICY_ZERO);
#else
  P_MISSING(NCCL_CTA_POLICY_ZERO);
#endif
#ifdef NCCL_SHRINK_DEFAULT
  P_VALUE(NCCL_SHRINK_DEFAULT);
#else
  P_MISSING(NCCL_SHRINK_DEFAULT);
#endif
#ifdef NCCL_SHRINK_ABORT
  P_VALUE(NCCL_SHRINK_ABORT);
#else
  P_MISSING(NCCL_SHRINK_ABORT);
#endif
#ifdef NCCL_REVOKE_DEFAULT
  P_VALUE(NCCL_REVOKE_DEFAULT);
#else
  P_MISSING(NCCL_REVOKE_DEFAULT);
#endif
}

int main(void) {
  types();
  initializers();
  enums();
  defines();
  return 0;
}
