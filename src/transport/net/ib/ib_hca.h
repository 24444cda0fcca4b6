/*
 * ib_hca.h - NCCL_IB_HCA, parsed and matched as NCCL does (the first piece of net_ib; the
 * verbs plugin itself is not written yet: src/transport/net/ib/README.md).
 *
 * Syntax: an optional `^` (exclude the listed ports instead of using only them), then an
 * optional `=` (names match exactly instead of as prefixes), then comma-separated entries
 * `name[:port[:rail[:plane]]]`; an empty field means "any" (-1), empty entries are skipped.
 * "mlx5" uses every port of every mlx5* device, "mlx5_0:1,mlx5_1:1" two ports, "^=mlx5_2"
 * everything but the device named exactly mlx5_2. An unset or empty value uses everything;
 * "^" alone excludes everything (as in NCCL).
 * Stricter than NCCL, which reads a port with atoi and drops entries past its limit: a port,
 * rail or plane that is not a number in 0..65535, a name longer than 63 bytes or more than
 * BRAID_IB_HCA_MAX entries is ncclInvalidArgument with a WARN naming the entry.
 */
#ifndef BRAID_IB_HCA_H
#define BRAID_IB_HCA_H

#include "nccl.h"

#define BRAID_IB_HCA_MAX 32
#define BRAID_IB_HCA_NAME_MAX 64

struct braid_ib_hca_entry {
  char prefix[BRAID_IB_HCA_NAME_MAX];
  int port, rail, plane; /* -1: any / unset */
};

struct braid_ib_hca_filter {
  int exclude; /* '^' */
  int exact;   /* '=' */
  int n;
  struct braid_ib_hca_entry e[BRAID_IB_HCA_MAX];
};

/* Parse `value` (NULL or "": no filter). `what` names the variable in the WARN. */
ncclResult_t braid_ib_hca_parse(const char* value, const char* what, struct braid_ib_hca_filter* f);
/* 1 when port `port` of device `dev` is to be used; *entry (may be NULL): the entry that
 * matched, -1 when none did. */
int braid_ib_hca_match(const struct braid_ib_hca_filter* f, const char* dev, int port, int* entry);

#endif /* BRAID_IB_HCA_H */
