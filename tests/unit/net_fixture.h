/*
 * net_fixture.h - what the network suite's files share (test_net.c: the suite and its
 * collective cases; net_cases_fail.c: kill -9, abort, BRAID_TIMEOUT, abandon, garbage;
 * net_cases_misc.c: configuration errors, idle cost, device communicators, capabilities): the
 * net plugins every case runs over, fake nodes, expected values, small helpers.
 */
#ifndef BRAID_TEST_NET_FIXTURE_H
#define BRAID_TEST_NET_FIXTURE_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"

#define HARNESS_TIMEOUT_S 120
#define TCASE_TIMEOUT_S 240
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define NET_MAX_PLUGINS 8

/* A plugin under test: its NCCL_NET name, and (white box, for the garbage case) the descriptor
 * of a connection's byte stream that garbage can be written onto (NULL: the case is skipped,
 * and says so). */
struct net_plugin_case {
  const char* name;
  int (*stream_fd)(void* net_comm);
  const char* kill_full_only; /* non-NULL: kill -9 cases only with BRAID_TEST_TIER=full, and why */
  void (*setup)(void);        /* before the ranks start (they inherit the environment); may be NULL */
};
/* Socket, UCX (when built), IB over the emulator (when built): one line per plugin. */
extern const struct net_plugin_case net_plugins[];
extern const int net_nplugins;

int net_full_tier(void); /* BRAID_TEST_TIER=full */
double net_now_s(void);
/* Select plugin p for the ranks this test starts (they inherit the environment). */
const struct net_plugin_case* net_use_plugin(int p);
/* This process's rank lives on fake node rank / per_node (per_node 0: all on one node); the
 * network goes over loopback. Call before ncclCommInitRank, in the rank's own process. */
void net_fake_node(const struct harness_rank* r, int per_node);
void net_apply_env(const char* env); /* "A=1 B=2" (NULL: nothing) */
/* NET_CASE=i runs only loop case i of each TCase; NET_ONLY=<plugin> only that plugin (debugging). */
int net_skip_case(int i);
int net_skip_plugin(int p); /* NET_ONLY names another plugin */
/* Rank `rank`'s value at i, a buffer of n, and a check against expect(). */
int32_t net_val(int rank, size_t i);
int32_t* net_ibuf(size_t n);
int net_check_vals(struct harness_rank* r, const char* what, size_t count, const int32_t* got, size_t n,
                   int (*expect)(int nranks, int rank, size_t count, size_t i, int32_t* v), int rank);
int net_ex_sum(int n, int rank, size_t count, size_t i, int32_t* v); /* all-reduce sum */
/* After ncclCommAbort: wait (up to 5 s) until no more descriptors and threads than before. */
int net_released_since(struct harness_rank* r, int fds0, int threads0);
TCase* net_tcase(const char* name, int timeout_s);
/* The TCases of net_cases_fail.c and net_cases_misc.c, in the suite's order. */
void net_fail_tcases(Suite* s);
void net_misc_tcases(Suite* s);

#endif /* BRAID_TEST_NET_FIXTURE_H */
