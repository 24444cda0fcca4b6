/*
 * axes.h - one X-macro list per dispatch axis (docs/CONVENTIONS.md 11). Host switches, kernel tables,
 * tuner names and tests all expand from these lists, so adding a datatype or protocol is one
 * line here. Valid C and CUDA C; includes nothing host-only.
 */
#ifndef BRAID_AXES_H
#define BRAID_AXES_H

/* X(nccl enum value, short name, storage type, size in bytes, nccl-tests name) */
#define BRAID_DTYPES(X)               \
  X(0, i8, int8_t, 1, "int8")         \
  X(1, u8, uint8_t, 1, "uint8")       \
  X(2, i32, int32_t, 4, "int32")      \
  X(3, u32, uint32_t, 4, "uint32")    \
  X(4, i64, int64_t, 8, "int64")      \
  X(5, u64, uint64_t, 8, "uint64")    \
  X(6, f16, uint16_t, 2, "half")      \
  X(7, f32, float, 4, "float")        \
  X(8, f64, double, 8, "double")      \
  X(9, bf16, uint16_t, 2, "bfloat16") \
  X(10, f8e4m3, uint8_t, 1, "f8e4m3") \
  X(11, f8e5m2, uint8_t, 1, "f8e5m2")

/* The user-visible operators: X(nccl enum value, short name, nccl-tests name). */
#define BRAID_REDOPS(X) \
  X(0, sum, "sum")      \
  X(1, prod, "prod")    \
  X(2, max, "max")      \
  X(3, min, "min")      \
  X(4, avg, "avg")

/*
 * What the data path actually computes. The host maps each user op to one of these plus a
 * scalar: Avg on floating types is PreMulSum by 1/nranks, Avg on integers is Sum followed by a
 * division by nranks (SumPostDiv), a user PreMulSum op carries its scalar.
 */
#define BRAID_REDKINDS(X) \
  X(0, SUM)               \
  X(1, PROD)              \
  X(2, MAX)               \
  X(3, MIN)               \
  X(4, PREMULSUM)         \
  X(5, SUMPOSTDIV)

/* Collective functions: X(id, NCCL's name as in logs). */
#define BRAID_FUNCS(X) \
  X(0, Broadcast)      \
  X(1, Reduce)         \
  X(2, AllGather)      \
  X(3, ReduceScatter)  \
  X(4, AllReduce)      \
  X(5, SendRecv)

/* Algorithms, NCCL's ids and names (NCCL_ALGO), and whether braid's data path runs them (1)
 * or the tuner only prices them to show what NCCL would pick (0): the one place that says
 * which algorithms run (braid_tuner_implemented, braid-topo's table). */
#define BRAID_ALGOS(X)                     \
  X(0, TREE, "Tree", 1)                    \
  X(1, RING, "Ring", 1)                    \
  X(2, COLLNET_DIRECT, "CollNetDirect", 0) \
  X(3, COLLNET_CHAIN, "CollNetChain", 0)   \
  X(4, NVLS, "NVLS", 0)                    \
  X(5, NVLS_TREE, "NVLSTree", 0)           \
  X(6, PAT, "PAT", 0)

/* Protocols, NCCL's ids and names (NCCL_PROTO). */
#define BRAID_PROTOS(X) \
  X(0, LL, "LL")        \
  X(1, LL128, "LL128")  \
  X(2, SIMPLE, "Simple")

enum braid_redkind {
#define BRAID_X(id, name) BRAID_RED_##name = id,
  BRAID_REDKINDS(BRAID_X)
#undef BRAID_X
      BRAID_NUM_REDKINDS
};
enum braid_func {
#define BRAID_X(id, name) BRAID_FUNC_##name = id,
  BRAID_FUNCS(BRAID_X)
#undef BRAID_X
      BRAID_NUM_FUNCS
};
enum braid_algo {
#define BRAID_X(id, name, str, runs) BRAID_ALGO_##name = id,
  BRAID_ALGOS(BRAID_X)
#undef BRAID_X
      BRAID_NUM_ALGOS
};
enum braid_proto {
#define BRAID_X(id, name, str) BRAID_PROTO_##name = id,
  BRAID_PROTOS(BRAID_X)
#undef BRAID_X
      BRAID_NUM_PROTOS
};
#define BRAID_NUM_DTYPES 12

#endif /* BRAID_AXES_H */
