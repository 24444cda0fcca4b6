/*
 * nccl_log.h - what an NCCL_DEBUG=INFO log says about a communicator's channels, and how it
 * compares with braid's plan for the same machine (braid-topo --nccl-log).
 *
 * Read from the log (any NCCL version, lines of every rank mixed in any order; other lines
 * ignored):
 *   NCCL version 2.27.3+cuda12.9                                    -> the version
 *   comm 0x... rank 0 nRanks 8 nNodes 1 localRanks 8 localRank 0    -> the communicator's shape
 *   Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000,    -> the ring search (the first
 *     type NVL/PIX, sameChannels 1                                     pattern 4 line), then the
 *                                                                      tree search (the next line
 *                                                                      of the same process)
 *   Channel 00/24 : 0 1 2 3 4 5 6 7                                 -> channel count, ring orders
 *   Ring 00 : 7 -> 0 -> 1                                           -> a rank's ring neighbours
 *   Trees [0] 1/-1/-1->0->-1 [1] ...                                -> a rank's tree links
 *   Tree 0 : -1 -> 0 -> 1/-1/-1                                     -> the same, GRAPH subsystem
 */
#ifndef BRAID_TOOL_NCCL_LOG_H
#define BRAID_TOOL_NCCL_LOG_H

#include <stdio.h>

#include "topo/graph.h"

struct nccl_log_search {
  int valid, pattern, cross_nic, nchannels, same_channels;
  float bw_intra, bw_inter;
  char type_intra[8], type_inter[8];
};

struct nccl_log_link { /* one rank's links on one channel */
  int rank, channel, up, down[3];
};

struct nccl_log {
  int version;                         /* M*10000 + m*100 + p; 0 unknown */
  int nranks, nnodes, local_ranks;     /* 0 unknown */
  struct nccl_log_search ring, tree;   /* the two searches */
  int nchannels;                       /* of the Channel lines; 0 none */
  int order_len[BRAID_MAX_CHANNELS];   /* ranks listed for channel c (0: no line) */
  int* order;                          /* [c * BRAID_NCCL_LOG_MAX_RANKS + i] */
  int ntrees, nrings;                  /* Trees/Tree and Ring entries */
  struct nccl_log_link *trees, *rings; /* rings: up = prev, down[0] = next */
};
#define BRAID_NCCL_LOG_MAX_RANKS 1024

/* Read a log. An unreadable file: a message on stderr and -1. */
int braid_nccl_log_read(const char* path, struct nccl_log* log);
/* The same from text in memory (for tests). */
int braid_nccl_log_parse(const char* text, struct nccl_log* log);
void braid_nccl_log_free(struct nccl_log* log);

/* Print to out what the log and braid's graph g disagree on, one line each, then a summary;
 * returns the number of differences. */
int braid_nccl_log_compare(const struct nccl_log* log, const struct braid_channel_graph* g, FILE* out);

#endif /* BRAID_TOOL_NCCL_LOG_H */
