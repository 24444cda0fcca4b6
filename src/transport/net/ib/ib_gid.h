/*
 * ib_gid.h - which GID of a RoCE port net_ib uses when NCCL_IB_GID_INDEX is unset, as NCCL
 * chooses (ncclIbGetGidIndex): starting from index 0, each later entry replaces the choice
 *   - when its address family differs from the choice's and is the one wanted
 *     (NCCL_IB_ADDR_FAMILY: AF_INET, the default, or AF_INET6) and it lies in
 *     NCCL_IB_ADDR_RANGE (a.b.c.d/n or an IPv6 prefix; unset: everything);
 *   - or, being of the wanted family, valid (configured, not link-local) and in range, when its
 *     RoCE version is the one wanted (NCCL_IB_ROCE_VERSION_NUM, default 2) and the choice's
 *     version differs or the choice is not valid.
 * The version of a GID is its type (ibv_query_gid_ex; NCCL reads the same from sysfs); 0 when
 * unknown. InfiniBand ports: index NCCL_IB_ROUTABLE_FLID_GID_INDEX (1) when that GID carries a
 * routable FLID, else 0.
 */
#ifndef BRAID_IB_GID_H
#define BRAID_IB_GID_H

#include <stdint.h>

#include "nccl.h"

struct braid_ib_gid {
  uint8_t raw[16];
  int version; /* RoCE 1 or 2; 0: not known */
};

struct braid_ib_gid_want {
  int family;         /* AF_INET or AF_INET6 */
  int version;        /* 1 or 2 */
  int prefixlen;      /* 0: no NCCL_IB_ADDR_RANGE */
  uint8_t prefix[16]; /* AF_INET: the 4 address bytes first */
};

/* From NCCL_IB_ADDR_FAMILY, NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_RANGE. A range that does not
 * parse for the family is ignored with an INFO, as NCCL does. */
void braid_ib_gid_want_env(struct braid_ib_gid_want* w);
/* The index in tbl[0..n) (n >= 1). */
int braid_ib_gid_select(const struct braid_ib_gid* tbl, int n, const struct braid_ib_gid_want* w);
/* AF_INET for an IPv4-mapped GID (or IPv4-mapped multicast), else AF_INET6. */
int braid_ib_gid_family(const uint8_t raw[16]);

#endif /* BRAID_IB_GID_H */
