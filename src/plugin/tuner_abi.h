/*
 * tuner_abi.h - NCCL's tuner plugin ABI, versions 2 to 6, as facts (NVIDIA's
 * src/include/plugin/tuner/tuner_vN.h of NCCL 2.30.7; no code of theirs): the symbol
 * ncclTunerPlugin_vN, the table's slot order and signatures, v5's init structs.
 *   v2  init(nRanks, nNodes, log, &ctx); getCollInfo returns algorithm, protocol, nChannels.
 *   v3  getCollInfo receives the cost table float[numAlgo][numProto] (microseconds, -1: not
 *       available) and may change it; the cheapest entry wins; nChannels 0 keeps the default.
 *   v4  + regBuff (the user buffers are registered).
 *   v5  init(&ctx, commId, nRanks, nNodes, log, NVLink domains, tuning constants); finalize.
 *   v6  (NCCL 2.30) v5's slots (same constants and NVLink structs) + getChunkSize(ctx, func,
 *       nBytes, algo, proto, nChannels, &chunkSize), optional (NULL: the library's own chunk).
 * Algorithm and protocol numbers are NCCL's (and braid's, kernels/axes.h): Tree 0, Ring 1,
 * CollNetDirect 2, CollNetChain 3, NVLS 4, NVLSTree 5, PAT 6; LL 0, LL128 1, Simple 2.
 */
#ifndef BRAID_TUNER_ABI_H
#define BRAID_TUNER_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define NCCL_ABI_NUM_ALGORITHMS 7
#define NCCL_ABI_NUM_PROTOCOLS 3
#define NCCL_ABI_ALGO_PROTO_IGNORE -1.0f
#define NCCL_ABI_NUM_HW_LINKS 3
#define NCCL_ABI_NUM_COMPCAPS 4
#define NCCL_ABI_NUM_TUNING_SCALES 3

typedef void (*nccl_abi_tuner_logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt,
                                        ...);

struct nccl_tuner_v2 {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, nccl_abi_tuner_logger_t log, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
};

struct nccl_tuner_v3 {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, nccl_abi_tuner_logger_t log, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
};

struct nccl_tuner_v4 {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, nccl_abi_tuner_logger_t log, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
};

struct nccl_tuner_nvl_domain_v5 {
  int nNvlDomains, minRanksPerNvlDomain, maxRanksPerNvlDomain;
};

struct nccl_tuner_constants_v5 {
  double baseLatencies[NCCL_ABI_NUM_ALGORITHMS][NCCL_ABI_NUM_PROTOCOLS];
  double hwLatencies[NCCL_ABI_NUM_HW_LINKS][NCCL_ABI_NUM_ALGORITHMS][NCCL_ABI_NUM_PROTOCOLS];
  double llMaxBws[NCCL_ABI_NUM_COMPCAPS][NCCL_ABI_NUM_TUNING_SCALES];
  double perChMaxRingLL128Bws[NCCL_ABI_NUM_COMPCAPS][NCCL_ABI_NUM_TUNING_SCALES];
  double perChMaxTreeLL128Bws[NCCL_ABI_NUM_COMPCAPS][NCCL_ABI_NUM_TUNING_SCALES];
  double perChMaxTreeBws[NCCL_ABI_NUM_COMPCAPS][NCCL_ABI_NUM_TUNING_SCALES];
  double perChMaxNVLSTreeBws[NCCL_ABI_NUM_COMPCAPS][NCCL_ABI_NUM_TUNING_SCALES];
};

struct nccl_tuner_v5 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, nccl_abi_tuner_logger_t log,
                       struct nccl_tuner_nvl_domain_v5* nvlDomainInfo, struct nccl_tuner_constants_v5* constants);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
};

struct nccl_tuner_v6 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, nccl_abi_tuner_logger_t log,
                       struct nccl_tuner_nvl_domain_v5* nvlDomainInfo, struct nccl_tuner_constants_v5* constants);
  ncclResult_t (*getCollInfo)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*getChunkSize)(void* ctx, int collType, size_t nBytes, int algo, int proto, int nChannels,
                               size_t* chunkSize);
};

#endif /* BRAID_TUNER_ABI_H */
