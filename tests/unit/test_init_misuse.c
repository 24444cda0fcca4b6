/*
 * test_init_misuse.c - careless callers: nothing they do may crash braid.
 *   - ncclCommDestroy inside an open group that holds a task of that communicator (refused),
 *     and a communicator destroyed or aborted by another path before ncclGroupEnd (the group
 *     fails instead of touching freed memory);
 *   - ncclMemFree of memory braid did not allocate, twice, or inside an allocation;
 *   - counts whose byte size no address space holds (SIZE_MAX int8 on one rank);
 *   - ncclCommInitAll with device numbers no machine has, and with more ranks than one process
 *     can hold (it fails at once instead of after minutes);
 *   - a stale handle whose memory a new communicator reuses.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

#define ASSERT_LAST_ERROR_HAS(word)                                                                      \
  do {                                                                                                   \
    const char* e_ = ncclGetLastError(NULL);                                                             \
    ck_assert_msg(e_ != NULL && strstr(e_, (word)) != NULL, "last error \"%s\" does not mention \"%s\"", \
                  e_ ? e_ : "(null)", (word));                                                           \
  } while (0)

START_TEST(test_destroy_inside_group) {
  ncclComm_t c[2];
  int in[2] = {1, 2}, out[2] = {0, 0};
  ck_assert_int_eq(ncclCommInitAll(c, 2, NULL), ncclSuccess);
  ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(ncclAllReduce(&in[i], &out[i], 1, ncclInt32, ncclSum, c[i], NULL), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(c[0]), ncclInvalidUsage);
  ASSERT_LAST_ERROR_HAS("ncclGroupEnd");
  ck_assert_int_eq(ncclGroupEnd(), ncclSuccess);
  ck_assert_int_eq(out[0], 3);
  ck_assert_int_eq(out[1], 3);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(ncclCommDestroy(c[i]), ncclSuccess);
}
END_TEST

static void* destroy_main(void* arg) {
  ncclCommDestroy(*(ncclComm_t*)arg);
  return NULL;
}

/* Another thread destroys, or this thread aborts, a communicator this thread's open group
 * holds a task for: ncclGroupEnd fails naming it. */
START_TEST(test_gone_before_group_end) {
  for (int how = 0; how < 2; how++) {
    ncclComm_t c, keep;
    int in = 5, out = 0, in2 = 6, out2 = 0;
    ck_assert_int_eq(ncclCommInitAll(&c, 1, NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommInitAll(&keep, 1, NULL), ncclSuccess);
    ck_assert_int_eq(ncclGroupStart(), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(&in, &out, 1, ncclInt32, ncclSum, c, NULL), ncclSuccess);
    ck_assert_int_eq(ncclAllReduce(&in2, &out2, 1, ncclInt32, ncclSum, keep, NULL), ncclSuccess);
    if (how == 0) {
      pthread_t t;
      pthread_create(&t, NULL, destroy_main, &c);
      pthread_join(t, NULL);
    } else {
      ck_assert_int_eq(ncclCommAbort(c), ncclSuccess);
    }
    ncclResult_t res = ncclGroupEnd();
    ck_assert_msg(res == ncclInvalidUsage, "%s before ncclGroupEnd: it returned %d", how ? "abort" : "destroy", res);
    ASSERT_LAST_ERROR_HAS("destroyed or aborted");
    ck_assert_int_eq(out, 0);
    ck_assert_int_eq(ncclCommDestroy(keep), ncclSuccess);
  }
}
END_TEST

START_TEST(test_bad_mem_free) {
  int on_stack = 0;
  void* p = NULL;
  ck_assert_int_eq(ncclMemFree(&on_stack), ncclInvalidArgument);
  void* heap = malloc(64);
  ck_assert_int_eq(ncclMemFree(heap), ncclInvalidArgument);
  free(heap);
  ck_assert_int_eq(ncclMemAlloc(&p, 4096), ncclSuccess);
  ck_assert_int_eq(ncclMemFree((char*)p + 16), ncclInvalidArgument);
  ck_assert_int_eq(ncclMemFree(p), ncclSuccess);
  ck_assert_int_eq(ncclMemFree(p), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("ncclMemFree");
  ck_assert_int_eq(ncclMemFree(NULL), ncclSuccess);
}
END_TEST

START_TEST(test_count_beyond_address_space) {
  ncclComm_t c;
  char buf[8];
  ck_assert_int_eq(ncclCommInitAll(&c, 1, NULL), ncclSuccess);
  ck_assert_int_eq(ncclAllReduce(buf, buf, SIZE_MAX, ncclInt8, ncclSum, c, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("count");
  ck_assert_int_eq(ncclBroadcast(buf, buf, SIZE_MAX - 7, ncclUint8, 0, c, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclAllGather(buf, buf, SIZE_MAX / 2, ncclInt8, c, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclSend(buf, SIZE_MAX, ncclInt8, 0, c, NULL), ncclInvalidArgument);
  ck_assert_int_eq(ncclAllReduce(buf, buf, 8, ncclInt8, ncclSum, c, NULL), ncclSuccess);
  ck_assert_int_eq(ncclCommDestroy(c), ncclSuccess);
}
END_TEST

START_TEST(test_init_all_bad_devlist) {
  ncclComm_t c[2] = {NULL, NULL};
  static const int bad[][2] = {{-5, 1000}, {0, -1}, {1000, 0}};
  for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
    ck_assert_msg(ncclCommInitAll(c, 2, bad[k]) == ncclInvalidArgument, "devlist {%d, %d} was accepted", bad[k][0],
                  bad[k][1]);
    ASSERT_LAST_ERROR_HAS("device");
  }
  static const int good[2] = {1, 0};
  ck_assert_int_eq(ncclCommInitAll(c, 2, good), ncclSuccess);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(ncclCommDestroy(c[i]), ncclSuccess);
}
END_TEST

/* More ranks than one process can hold fails at once (it took minutes). */
START_TEST(test_init_all_too_many) {
  ncclComm_t* c = calloc(2000, sizeof(*c));
  ck_assert_int_eq(ncclCommInitAll(c, 2000, NULL), ncclInvalidArgument);
  ASSERT_LAST_ERROR_HAS("2000");
  free(c);
}
END_TEST

/* Destroy, create again (the allocator often hands out the same memory): the old handle is
 * refused, the new one works. */
START_TEST(test_stale_handle) {
  for (int round = 0; round < 8; round++) {
    ncclComm_t old, fresh;
    int count = -1;
    ck_assert_int_eq(ncclCommInitAll(&old, 1, NULL), ncclSuccess);
    ck_assert_int_eq(ncclCommDestroy(old), ncclSuccess);
    ck_assert_int_eq(ncclCommInitAll(&fresh, 1, NULL), ncclSuccess);
    ck_assert_msg(ncclCommCount(old, &count) == ncclInvalidArgument, "round %d: the destroyed handle %p still works",
                  round, (void*)old);
    char b[4] = {0};
    ck_assert_int_eq(ncclAllReduce(b, b, 4, ncclInt8, ncclSum, old, NULL), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommCount(fresh, &count), ncclSuccess);
    ck_assert_int_eq(count, 1);
    ck_assert_int_eq(ncclCommDestroy(old), ncclInvalidArgument);
    ck_assert_int_eq(ncclCommDestroy(fresh), ncclSuccess);
  }
}
END_TEST

Suite* init_misuse_suite(void);
Suite* init_misuse_suite(void) {
  Suite* s = suite_create("init_misuse");
  TCase* tc = tcase_create("misuse");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_destroy_inside_group);
  tcase_add_test(tc, test_gone_before_group_end);
  tcase_add_test(tc, test_bad_mem_free);
  tcase_add_test(tc, test_count_beyond_address_space);
  tcase_add_test(tc, test_init_all_bad_devlist);
  tcase_add_test(tc, test_stale_handle);
  suite_add_tcase(s, tc);
  tc = tcase_create("bounded"); /* it took 45 s on 2 cores */
  tcase_set_timeout(tc, 20);
  tcase_add_test(tc, test_init_all_too_many);
  suite_add_tcase(s, tc);
  return s;
}
