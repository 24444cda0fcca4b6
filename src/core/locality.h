/*
 * locality.h - near or far: do two local ranks' cores share a cache? Decided once at init per
 * pair of local host-mode ranks (BRAID_SHM_LOCALITY=AUTO|NEAR|FAR), from the topology where it
 * can tell (sysfs cache ids of the CPUs each rank may run on, on bare metal) and otherwise by a
 * cache-line ping-pong between the two ranks over a small shared segment (bounded: a few ms).
 * The lower rank of a pair decides and tells the other over the bootstrap, so both ends agree
 * whatever their environment says. What it chooses: FIFO sizes (a far pair gets 2 MiB slots
 * when NCCL_BUFFSIZE is not set, core/init.c) and the pieces a one-pass reduction copies over
 * cross-memory attach (transport/shm.c).
 */
#ifndef BRAID_CORE_LOCALITY_H
#define BRAID_CORE_LOCALITY_H

#include <stdint.h>

#include "nccl.h"

enum braid_locality { BRAID_LOCALITY_UNKNOWN = 0, BRAID_LOCALITY_NEAR = 1, BRAID_LOCALITY_FAR = 2 };

/* A ping-pong round trip below this is a pair of cores that share a cache (this VM: 60-75 ns
 * near, 150-350 far; bench/compare.sh classifies rounds with the same figure). */
#define BRAID_LOCALITY_NEAR_NS 150.0

struct braid_comm;
struct braid_peer_info;

/* Every rank of comm (collective: bootstrap messages between local pairs): fills
 * comm->locality[nranks] (this rank's view of each peer; UNKNOWN for remote ones and itself). */
ncclResult_t braid_locality_decide(struct braid_comm* comm);

/* The pieces, for tests. */
const char* braid_locality_name(int loc);
/* From the topology alone: NEAR/FAR, or UNKNOWN where it cannot tell (a hypervisor's floating
 * vCPUs, CPU sets spanning several caches, no sysfs). `sysfs` is the cpu directory
 * ("/sys/devices/system/cpu"), `virt` 1 under a hypervisor. */
int braid_locality_from_caches(const uint64_t* cpus_a, const uint64_t* cpus_b, const char* sysfs, int virt);
/* One side of the ping-pong on the 64-byte line `v` (both sides of a pair at once): the leader
 * measures for at most budget_ms and returns the round trip in ns (the least disturbed batch),
 * or a negative value when the follower never answered; the follower answers until the leader
 * stops or nothing happens for a while and returns 0. */
double braid_locality_pingpong(volatile uint64_t* v, int leader, double budget_ms);

#endif
