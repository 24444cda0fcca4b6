/*
 * test_exec_status.c - the one mapping from executor statuses to results (src/core/exec_status.c)
 * that the host path (enqueue.c) and the kernels' path (device/launch.c) both use: each status,
 * with each result the watchdog or the net proxy may have recorded, gives one result; the WARN
 * names the rank and what stopped, or repeats the reason the watchdog or the proxy wrote.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/exec_status.h"
#include "nccl.h"

struct status_case {
  int status;
  ncclResult_t raised; /* comm->async_error as the raiser left it */
  ncclResult_t want;
};
static const struct status_case status_cases[] = {
    {BRAID_EXEC_OK, ncclSuccess, ncclSuccess},
    {BRAID_EXEC_OK, ncclRemoteError, ncclSuccess},
    {BRAID_EXEC_ABORTED, ncclSuccess, ncclInvalidUsage},
    {BRAID_EXEC_ABORTED, ncclRemoteError, ncclInvalidUsage},
    {BRAID_EXEC_TIMEOUT, ncclSuccess, ncclSystemError},
    {BRAID_EXEC_TIMEOUT, ncclSystemError, ncclSystemError},
    {BRAID_EXEC_TIMEOUT, ncclRemoteError, ncclRemoteError},
    /* A dead peer: ncclRemoteError, unless the proxy decided the failure was local. Before
     * there was one mapping, the kernels' path said ncclRemoteError for both. */
    {BRAID_EXEC_PEER_FAILED, ncclSuccess, ncclRemoteError},
    {BRAID_EXEC_PEER_FAILED, ncclRemoteError, ncclRemoteError},
    {BRAID_EXEC_PEER_FAILED, ncclSystemError, ncclSystemError},
    {BRAID_EXEC_PEER_FAILED, ncclInternalError, ncclRemoteError},
    {4, ncclSuccess, ncclInternalError},
    {-1, ncclSuccess, ncclInternalError},
};

START_TEST(test_status_result) {
  const struct status_case* c = &status_cases[_i];
  ck_assert_int_eq(braid_exec_status_result(c->status, c->raised), c->want);
  struct braid_comm* comm = calloc(1, sizeof(*comm));
  comm->rank = 3;
  comm->async_error = c->raised;
  ck_assert_int_eq(braid_exec_status_error(comm, c->status, "operation", -1), c->want);
  ck_assert_int_eq(braid_exec_status_error(comm, c->status, "kernel", 2), c->want);
  free(comm);
}
END_TEST

START_TEST(test_status_messages) {
  struct braid_comm* comm = calloc(1, sizeof(*comm));
  comm->rank = 3;
  braid_exec_status_error(comm, BRAID_EXEC_ABORTED, "kernel", 2);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "rank 3: kernel (channel block 2) stopped: communicator"));
  braid_exec_status_error(comm, BRAID_EXEC_PEER_FAILED, "operation", -1);
  ck_assert_str_eq(ncclGetLastError(NULL), "rank 3: operation failed: a peer failed");
  braid_exec_status_error(comm, 9, "operation", -1);
  ck_assert_str_eq(ncclGetLastError(NULL), "rank 3: operation failed with status 9");
  snprintf(comm->abort_reason, sizeof(comm->abort_reason), "rank 3: rank 1 (host h, pid 7) died");
  braid_exec_status_error(comm, BRAID_EXEC_PEER_FAILED, "kernel", 0);
  ck_assert_str_eq(ncclGetLastError(NULL), "rank 3: rank 1 (host h, pid 7) died");
  braid_exec_status_error(comm, BRAID_EXEC_TIMEOUT, "operation", -1);
  ck_assert_str_eq(ncclGetLastError(NULL), "rank 3: rank 1 (host h, pid 7) died");
  free(comm);
}
END_TEST

Suite* exec_status_suite(void) {
  Suite* s = suite_create("exec_status");
  TCase* tc = tcase_create("mapping");
  tcase_set_timeout(tc, 30);
  tcase_add_loop_test(tc, test_status_result, 0, (int)(sizeof(status_cases) / sizeof(status_cases[0])));
  tcase_add_test(tc, test_status_messages);
  suite_add_tcase(s, tc);
  return s;
}
