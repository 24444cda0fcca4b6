/*
 * param_nccl.h - the names NCCL reads that braid has no row for in param.h: accepted for
 * compatibility and ignored (one INFO line when set), never reported as unknown. The list is
 * tests/param/nccl-2.{28,29,30}-names.txt (extracted from NCCL's sources by
 * tests/param/extract-nccl-names.sh) minus the names param.h declares; test_param checks both
 * ways. Y(id) is the variable NCCL_<id>.
 *
 * BRAID_PARAMS_FOREIGN(Z): names other programs read under the NCCL_ prefix, Z(name, whose):
 * braid says whose they are instead of calling them unknown. The plugins' names are those of
 * NCCL 2.30.7's plugins/ examples (git grep getenv there).
 */
#ifndef BRAID_PARAM_NCCL_H
#define BRAID_PARAM_NCCL_H

#define BRAID_PARAMS_NCCL(Y)                              \
  Y(ALLGATHERV_ENABLE)                                    \
  Y(ALLOC_P2P_NET_LL_BUFFERS)                             \
  Y(CHECK_MODE)                                           \
  Y(CHUNK_SIZE)                                           \
  Y(COLLNET_NODE_THRESHOLD)                               \
  Y(COMM_SHRINK_SHARE_RESOURCES)                          \
  Y(COMM_SPLIT_SHARE_RESOURCES)                           \
  Y(CONNECT_ROUND_MAX_PEERS)                              \
  Y(CREATE_THREAD_CONTEXT)                                \
  Y(CTA_POLICY)                                           \
  Y(CUMEM_HOST_ENABLE)                                    \
  Y(DEV_API_JIT)                                          \
  Y(DISABLE_MEM_MANAGER)                                  \
  Y(ELASTIC_BUFFER_REGISTER)                              \
  Y(ENABLE_VERSION_CHECK)                                 \
  Y(GDAKI_USE_RELIABLE_DB)                                \
  Y(GDRCOPY_ENABLE)                                       \
  Y(GDRCOPY_FIFO_ENABLE)                                  \
  Y(GDRCOPY_FLUSH_ENABLE)                                 \
  Y(GDRCOPY_SYNC_ENABLE)                                  \
  Y(GIN_COUNTER_POOL_SIZE)                                \
  Y(GIN_ENABLE)                                           \
  Y(GIN_ERROR_QUERY_SEC)                                  \
  Y(GIN_EXCLUSIVE_CONTEXTS)                               \
  Y(GIN_GDAKI_MAX_DEST_RD_ATOMIC)                         \
  Y(GIN_GDAKI_MAX_QP_RD_ATOMIC)                           \
  Y(GIN_GDAKI_NIC_HANDLER)                                \
  Y(GIN_GDAKI_QP_DEPTH)                                   \
  Y(GIN_IB_TC)                                            \
  Y(GIN_NCONNECTIONS)                                     \
  Y(GIN_NCONTEXTS)                                        \
  Y(GIN_PLUGIN)                                           \
  Y(GIN_PLUGIN_REF_COUNT)                                 \
  Y(GIN_PROXY_QUEUE_SIZE)                                 \
  Y(GIN_SIGNAL_POOL_SIZE)                                 \
  Y(GIN_TYPE)                                             \
  Y(GRAPH_HELPER_DISABLE)                                 \
  Y(GRAPH_MIXING_SUPPORT)                                 \
  Y(GRAPH_STREAM_ORDERING)                                \
  Y(GROUP_CUDA_STREAM)                                    \
  Y(IBVERBS_LIB)                                          \
  Y(IB_AR_THRESHOLD)                                      \
  Y(IB_DATA_DIRECT)                                       \
  Y(IB_DEVICE_PCI_ORDER)                                  \
  Y(IB_ECE_ENABLE)                                        \
  Y(IB_FIFO_TC)                                           \
  Y(IB_MERGE_NICS)                                        \
  Y(IB_MERGE_VFS)                                         \
  Y(IB_MQP_RETRY_ALL)                                     \
  Y(IB_MQP_RETRY_CNT)                                     \
  Y(IB_MQP_RETRY_SLEEP_MSEC)                              \
  Y(IB_OOO_RQ)                                            \
  Y(IB_PKEY)                                              \
  Y(IB_PREPOST_RECEIVE_WORK_REQUESTS)                     \
  Y(IB_QUERY_PORT_SPEED)                                  \
  Y(IB_RECEIVER_SIDE_MATCHING_SCHEME)                     \
  Y(IB_RESILIENCY_PORT_FAILOVER)                          \
  Y(IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS)             \
  Y(IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY)              \
  Y(IB_RESILIENCY_PORT_RECOVERY)                          \
  Y(IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT)              \
  Y(IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL) \
  Y(IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE)     \
  Y(IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE)  \
  Y(IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT)        \
  Y(IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX)             \
  Y(IB_RESILIENCY_PORT_RECOVERY_START_DELAY)              \
  Y(IB_RETURN_ASYNC_EVENTS)                               \
  Y(IB_SUBNET_AWARE_ROUTING)                              \
  Y(IB_SUBNET_PREFIX_LEN)                                 \
  Y(IB_USE_INLINE)                                        \
  Y(IB_WARN_RAIL_LOCAL)                                   \
  Y(IGNORE_COLLNET_MISMATCH)                              \
  Y(IGNORE_NET_MISMATCH)                                  \
  Y(IPC_USE_ABSTRACT_SOCKET)                              \
  Y(L1_SHARED_MEMORY_CARVEOUT)                            \
  Y(LAUNCH_ORDER_IMPLICIT)                                \
  Y(LAUNCH_RACE_FATAL)                                    \
  Y(LEGACY_CUDA_REGISTER)                                 \
  Y(LL128_C2C)                                            \
  Y(LOCAL_REGISTER)                                       \
  Y(LSA_TEAM_SIZE)                                        \
  Y(MAX_NRINGS)                                           \
  Y(MEM_SYNC_DOMAIN)                                      \
  Y(MIN_NRINGS)                                           \
  Y(MIN_P2P_NCHANNELS)                                    \
  Y(MLOPART_RDMA_ENABLE)                                  \
  Y(MNNVL_CLIQUE_ID)                                      \
  Y(MNNVL_CROSS_CLIQUE)                                   \
  Y(MNNVL_ENABLE)                                         \
  Y(MNNVL_RAIL_PER_HOST)                                  \
  Y(MNNVL_SCATTER_NETS_ENABLE)                            \
  Y(MNNVL_UUID)                                           \
  Y(MULTI_RANK_GPU_ENABLE)                                \
  Y(MULTI_SEGMENT_REGISTER)                               \
  Y(NCHANNELS_PER_NET_PEER)                               \
  Y(NETDEVS_POLICY)                                       \
  Y(NET_DISABLE_INTRA)                                    \
  Y(NET_FORCE_MERGE)                                      \
  Y(NET_GDR_C2C)                                          \
  Y(NET_GDR_MLOPART)                                      \
  Y(NET_MERGE_LEVEL)                                      \
  Y(NET_MERGE_POLICY)                                     \
  Y(NET_OPTIONAL_RECV_COMPLETION)                         \
  Y(NET_OVERHEAD)                                         \
  Y(NET_PLUGIN_REF_COUNT)                                 \
  Y(NET_SHARED_BUFFERS)                                   \
  Y(NET_SHARED_COMMS)                                     \
  Y(NUM_RMA_CTX)                                          \
  Y(NVB_PRECONNECT)                                       \
  Y(NVLINK_UTIL_CENTRIC_SCHED_ENABLE)                     \
  Y(NVLSTREE_MAX_CHUNKSIZE)                               \
  Y(NVLS_CHUNKSIZE)                                       \
  Y(NVTX_DISABLE)                                         \
  Y(OOB_NET_ENABLE)                                       \
  Y(OOB_NET_IFNAME)                                       \
  Y(P2P_DIRECT_DISABLE)                                   \
  Y(P2P_EPOCH_ENABLE)                                     \
  Y(P2P_MAX_PEERS)                                        \
  Y(P2P_PER_CHANNEL_NET_BW)                               \
  Y(P2P_SCHEDULE_GROUP_SIZE)                              \
  Y(PROGRESS_APPENDOP_FREQ)                               \
  Y(PROXY_APPEND_BATCH_SIZE)                              \
  Y(PROXY_CPUSET)                                         \
  Y(PROXY_DUMP_SIGNAL)                                    \
  Y(PXN_C2C)                                              \
  Y(REPORT_CONNECT_PROGRESS)                              \
  Y(RMA_DISABLE)                                          \
  Y(RMA_PLUGIN)                                           \
  Y(RMA_PLUGIN_REF_COUNT)                                 \
  Y(RMA_PROXY_DUMP_SIGNAL)                                \
  Y(RMA_PROXY_QUEUE_SIZE)                                 \
  Y(SET_CPU_STACK_SIZE)                                   \
  Y(SET_STACK_SIZE)                                       \
  Y(SHADOW_MEMPOOL_MAX_SIZE)                              \
  Y(SHM_LOCALITY)                                         \
  Y(SHM_MEMCPY_MODE)                                      \
  Y(SHM_USE_CUDA_MEMCPY)                                  \
  Y(SINGLE_PROC_MEM_REG_ENABLE)                           \
  Y(SOCKET_INLINE)                                        \
  Y(SOCKET_MAGIC)                                         \
  Y(SOCKET_MIN_TASKSIZE)                                  \
  Y(SOCKET_POLL_TIMEOUT_MSEC)                             \
  Y(SOCKET_RCVBUF)                                        \
  Y(SOCKET_SNDBUF)                                        \
  Y(SYM_CE_THRESHOLD)                                     \
  Y(SYM_CTAS)                                             \
  Y(SYM_GIN_KERNELS_ENABLE)                               \
  Y(SYM_KERNEL)                                           \
  Y(SYM_NOWIN_ENABLE)                                     \
  Y(SYM_REUSE_SYSMEM_HANDLES)                             \
  Y(SYM_RS_GIN_CHUNK_SIZE)                                \
  Y(SYM_TMA_ENABLE)                                       \
  Y(THREAD_THRESHOLDS)                                    \
  Y(TOPO_SPLIT_MLOPART)                                   \
  Y(UID_STAGGER_RATE)                                     \
  Y(UID_STAGGER_THRESHOLD)                                \
  Y(UNPACK_DOUBLE_NCHANNELS)                              \
  Y(WIN_ENABLE)                                           \
  Y(WIN_STRIDE)                                           \
  Y(WORK_ARGS_BYTES)                                      \
  Y(WORK_FIFO_BYTES)

/* PyTorch's ProcessGroupNCCL reads these (deprecated spellings of its TORCH_NCCL_* names), and
 * NCCL's own plugin examples read theirs. */
#define BRAID_PARAMS_FOREIGN(Z)                                                                                   \
  Z("NCCL_ASYNC_ERROR_HANDLING", "PyTorch (TORCH_NCCL_ASYNC_ERROR_HANDLING)")                                     \
  Z("NCCL_BLOCKING_WAIT", "PyTorch (TORCH_NCCL_BLOCKING_WAIT)")                                                   \
  Z("NCCL_DESYNC_DEBUG", "PyTorch (TORCH_NCCL_DESYNC_DEBUG)")                                                     \
  Z("NCCL_ENABLE_TIMING", "PyTorch (TORCH_NCCL_ENABLE_TIMING)")                                                   \
  Z("NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", "PyTorch (TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK)")         \
  Z("NCCL_PROFILER_CE_POLLER_INTERVAL_MICROSECONDS", "NCCL's example profiler plugin (plugins/profiler/example)") \
  Z("NCCL_PROFILER_CE_TIMING", "NCCL's example profiler plugin (plugins/profiler/example)")                       \
  Z("NCCL_PROFILE_CE_BATCH_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")               \
  Z("NCCL_PROFILE_CE_COLL_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")                \
  Z("NCCL_PROFILE_CE_SYNC_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")                \
  Z("NCCL_PROFILE_COLL_API_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")               \
  Z("NCCL_PROFILE_COLL_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")                   \
  Z("NCCL_PROFILE_DUMP_FILE", "NCCL's example profiler plugin (plugins/profiler/example)")                        \
  Z("NCCL_PROFILE_EVENT_MASK", "NCCL's example profiler plugin (plugins/profiler/example)")                       \
  Z("NCCL_PROFILE_GROUP_API_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")              \
  Z("NCCL_PROFILE_GROUP_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")                  \
  Z("NCCL_PROFILE_KERNEL_LAUNCH_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")          \
  Z("NCCL_PROFILE_P2P_API_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")                \
  Z("NCCL_PROFILE_P2P_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")                    \
  Z("NCCL_PROFILE_PROXY_CTRL_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")             \
  Z("NCCL_PROFILE_PROXY_DETACH_POOL_SIZE", "NCCL's example profiler plugin (plugins/profiler/example)")           \
  Z("NCCL_INSPECTOR_COLL_POOL_SIZE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")             \
  Z("NCCL_INSPECTOR_COMM_POOL_SIZE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")             \
  Z("NCCL_INSPECTOR_DUMP_COLL_RING_SIZE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")        \
  Z("NCCL_INSPECTOR_DUMP_DIR", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")                   \
  Z("NCCL_INSPECTOR_DUMP_MIN_SIZE_BYTES", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")        \
  Z("NCCL_INSPECTOR_DUMP_P2P_RING_SIZE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")         \
  Z("NCCL_INSPECTOR_DUMP_THREAD_ENABLE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")         \
  Z("NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS",                                                           \
    "NCCL's inspector profiler plugin (plugins/profiler/inspector)")                                              \
  Z("NCCL_INSPECTOR_DUMP_VERBOSE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")               \
  Z("NCCL_INSPECTOR_ENABLE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")                     \
  Z("NCCL_INSPECTOR_ENABLE_P2P", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")                 \
  Z("NCCL_INSPECTOR_P2P_POOL_SIZE", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")              \
  Z("NCCL_INSPECTOR_POOL_GROW", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")                  \
  Z("NCCL_INSPECTOR_PROM_DUMP", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")                  \
  Z("NCCL_INSPECTOR_REQUIRE_KERNEL_TIMING", "NCCL's inspector profiler plugin (plugins/profiler/inspector)")      \
  Z("NCCL_TUNER_CONFIG_FILE", "NCCL's example tuner plugin (plugins/tuner/example)")

#endif /* BRAID_PARAM_NCCL_H */
