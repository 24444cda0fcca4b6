/*
 * test_param_api.c - NCCL 2.30's parameter API over braid's table (src/base/param_api.c):
 * ncclParamBind on every row and on bad keys, the typed getters (the row's exact type only),
 * ncclParamGetStr, ncclParamGet's raw bytes and its maxLen, ncclParamGetParameter's strings,
 * ncclParamGetAllParameterKeys with and without NCCL_PARAM_DUMP_ALL, ncclParamDumpAll's
 * format, values that follow the environment for PER_USE rows, and the pnccl names.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"
#include "nccl.h"
#include "param_fixture.h"

static ncclParamHandle_t bind(const char* key) {
  ncclParamHandle_t h = NULL;
  ck_assert_int_eq(ncclParamBind(&h, key), ncclSuccess);
  ck_assert_ptr_nonnull(h);
  return h;
}

START_TEST(test_bind) {
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    ncclParamHandle_t h = NULL, again = NULL;
    const char* name = braid_param_name((enum braid_param)id);
    ck_assert_int_eq(ncclParamBind(&h, name), ncclSuccess);
    ck_assert_int_eq(pncclParamBind(&again, name), ncclSuccess);
    ck_assert_ptr_eq(h, again);
  }
  ncclParamHandle_t h = (ncclParamHandle_t)0x1;
  ck_assert_int_eq(ncclParamBind(&h, "NCCL_NO_SUCH_THING"), ncclInvalidArgument);
  ck_assert_ptr_eq(h, (ncclParamHandle_t)0x1); /* untouched on failure */
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "NCCL_NO_SUCH_THING"));
  ck_assert_int_eq(ncclParamBind(NULL, "NCCL_BUFFSIZE"), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamBind(&h, NULL), ncclInvalidArgument);
  /* A handle that is not one of ours is refused, not dereferenced. */
  int64_t v;
  char junk[16];
  ck_assert_int_eq(ncclParamGetI64((ncclParamHandle_t)(void*)junk, &v), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetI64(NULL, &v), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetI64(bind("NCCL_BUFFSIZE"), NULL), ncclInvalidArgument);
}
END_TEST

START_TEST(test_typed_getters) {
  setenv("NCCL_BUFFSIZE", "2M", 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET,COLL", 1);
  setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "INFO", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  setenv("BRAID_NET_DIRECT", "false", 1);
  braid_param_reload();
  int64_t i64 = 0;
  ck_assert_int_eq(ncclParamGetI64(bind("NCCL_BUFFSIZE"), &i64), ncclSuccess);
  ck_assert_int_eq(i64, 2097152);
  ck_assert_int_eq(pncclParamGetI64(bind("NCCL_BUFFSIZE"), &i64), ncclSuccess);
  uint64_t u64 = 0;
  ck_assert_int_eq(ncclParamGetU64(bind("NCCL_DEBUG_SUBSYS"), &u64), ncclSuccess);
  ck_assert(u64 == (0x2 | 0x10)); /* NCCL_COLL | NCCL_NET, NCCL's bits */
  uint32_t u32 = 0;
  ck_assert_int_eq(ncclParamGetU32(bind("NCCL_DEBUG_TIMESTAMP_LEVELS"), &u32), ncclSuccess);
  ck_assert_uint_eq(u32, 1u << 3); /* 1 << NCCL_LOG_INFO */
  /* The exact type only, as NCCL. */
  int32_t i32;
  int16_t i16;
  int8_t i8;
  uint8_t u8;
  uint16_t u16;
  ck_assert_int_eq(ncclParamGetI32(bind("NCCL_BUFFSIZE"), &i32), ncclInvalidArgument);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "NCCL_BUFFSIZE is int64_t, not int32_t"));
  ck_assert_int_eq(ncclParamGetI16(bind("NCCL_BUFFSIZE"), &i16), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetI8(bind("NCCL_BUFFSIZE"), &i8), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetU8(bind("NCCL_BUFFSIZE"), &u8), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetU16(bind("NCCL_BUFFSIZE"), &u16), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetU64(bind("NCCL_BUFFSIZE"), &u64), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetI64(bind("NCCL_NET"), &i64), ncclInvalidArgument);
  /* Raw bytes: a bool is one byte, an enum four, a string with its NUL. */
  char raw[64];
  int len = -1;
  ck_assert_int_eq(ncclParamGet(bind("BRAID_NET_DIRECT"), raw, sizeof(raw), &len), ncclSuccess);
  ck_assert_int_eq(len, (int)sizeof(bool));
  ck_assert_int_eq(raw[0], 0);
  ck_assert_int_eq(ncclParamGet(bind("NCCL_SOCKET_FAMILY"), raw, sizeof(raw), &len), ncclSuccess);
  int32_t e;
  memcpy(&e, raw, sizeof(e));
  ck_assert_int_eq(len, 4);
  ck_assert_int_eq(e, 1); /* AF_INET6 is the second word */
  ck_assert_int_eq(ncclParamGet(bind("NCCL_DEBUG"), raw, sizeof(raw), &len), ncclSuccess);
  memcpy(&e, raw, sizeof(e));
  ck_assert_int_eq(e, 0); /* NCCL_LOG_NONE */
  ck_assert_int_eq(ncclParamGet(bind("NCCL_BUFFSIZE"), raw, sizeof(raw), &len), ncclSuccess);
  ck_assert_int_eq(len, 8);
  ck_assert_int_eq(ncclParamGet(bind("NCCL_BUFFSIZE"), raw, 4, &len), ncclInvalidArgument);
  ck_assert_int_eq(len, 0);
  ck_assert_int_eq(ncclParamGet(bind("NCCL_BUFFSIZE"), raw, 0, &len), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGet(bind("NCCL_BUFFSIZE"), NULL, 8, &len), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGet(bind("NCCL_BUFFSIZE"), raw, 8, NULL), ncclInvalidArgument);
}
END_TEST

START_TEST(test_strings) {
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  braid_param_reload();
  const char* s = NULL;
  ck_assert_int_eq(ncclParamGetStr(bind("NCCL_SOCKET_IFNAME"), &s), ncclSuccess);
  ck_assert_str_eq(s, "=lo");
  ck_assert_int_eq(ncclParamGetStr(bind("NCCL_NET"), &s), ncclSuccess);
  ck_assert_str_eq(s, ""); /* unset reads as empty, as NCCL */
  ck_assert_int_eq(ncclParamGetStr(bind("NCCL_BUFFSIZE"), &s), ncclInvalidArgument);
  char raw[8];
  int len = 0;
  ck_assert_int_eq(ncclParamGet(bind("NCCL_SOCKET_IFNAME"), raw, sizeof(raw), &len), ncclSuccess);
  ck_assert_int_eq(len, 4);
  ck_assert_str_eq(raw, "=lo");
  ck_assert_int_eq(ncclParamGet(bind("NCCL_SOCKET_IFNAME"), raw, 3, &len), ncclInvalidArgument);
  /* Any row as text, by key. */
  const char* v = NULL;
  int vlen = -1;
  ck_assert_int_eq(ncclParamGetParameter("NCCL_SOCKET_IFNAME", &v, &vlen), ncclSuccess);
  ck_assert_str_eq(v, "=lo");
  ck_assert_int_eq(vlen, 3);
  ck_assert_int_eq(ncclParamGetParameter("NCCL_BUFFSIZE", &v, &vlen), ncclSuccess);
  ck_assert_str_eq(v, "4194304");
  ck_assert_int_eq(ncclParamGetParameter("BRAID_NET_DIRECT", &v, &vlen), ncclSuccess);
  ck_assert_str_eq(v, "TRUE");
  ck_assert_int_eq(ncclParamGetParameter("NCCL_DEBUG_SUBSYS", &v, &vlen), ncclSuccess);
  ck_assert_str_eq(v, "INIT,ENV,BOOTSTRAP");
  ck_assert_int_eq(ncclParamGetParameter("NCCL_LL_BUFFSIZE", &v, &vlen), ncclSuccess);
  ck_assert_str_eq(v, "");
  ck_assert_int_eq(vlen, 0);
  ck_assert_int_eq(ncclParamGetParameter("NCCL_NOPE", &v, &vlen), ncclInvalidArgument);
  ck_assert_ptr_null(v);
  ck_assert_int_eq(vlen, 0);
  ck_assert_int_eq(ncclParamGetParameter(NULL, &v, &vlen), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetParameter("NCCL_BUFFSIZE", NULL, &vlen), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetParameter("NCCL_BUFFSIZE", &v, NULL), ncclInvalidArgument);
  /* A PER_USE row read through the API follows the environment too. */
  setenv("NCCL_HOSTID", "api-node", 1);
  ck_assert_int_eq(ncclParamGetStr(bind("NCCL_HOSTID"), &s), ncclSuccess);
  ck_assert_str_eq(s, "api-node");
}
END_TEST

START_TEST(test_keys) {
  const char** keys = NULL;
  int n = 0, declared = 0;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) declared += braid_param_row((enum braid_param)id)->declared;
  ck_assert_int_eq(ncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
  ck_assert_int_eq(n, declared);
  int found = 0;
  for (int i = 0; i < n; i++) found += strcmp(keys[i], "NCCL_BUFFSIZE") == 0 || strcmp(keys[i], "BRAID_TIMEOUT") == 0;
  ck_assert_int_eq(found, 2);
  setenv("NCCL_PARAM_DUMP_ALL", "1", 1);
  braid_param_reload();
  ck_assert_int_eq(pncclParamGetAllParameterKeys(&keys, &n), ncclSuccess);
  ck_assert_int_eq(n, BRAID_PARAM_COUNT);
  ck_assert_int_eq(ncclParamGetAllParameterKeys(NULL, &n), ncclInvalidArgument);
  ck_assert_int_eq(ncclParamGetAllParameterKeys(&keys, NULL), ncclInvalidArgument);
}
END_TEST

/* Runs ncclParamDumpAll with stdout in a file; returns the text. */
static char* dump(void) {
  char path[192];
  snprintf(path, sizeof(path), "%s/dump", param_tmpdir);
  fflush(stdout);
  int saved = dup(1);
  FILE* f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  dup2(fileno(f), 1);
  ncclParamDumpAll();
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  fclose(f);
  return read_file(path);
}

START_TEST(test_dump_all) {
  setenv("NCCL_BUFFSIZE", "1M", 1);
  braid_param_reload();
  char* text = dump();
  ck_assert_msg(strncmp(text, "=== ncclParam Registry Dump ===\n", 32) == 0, "%.200s", text);
  ck_assert_ptr_nonnull(strstr(text,
                               "NCCL_BUFFSIZE (int64_t) [Cached] Simple protocol buffer per connection (bytes)\n"
                               "    Current value=1048576 set_by=environment default=4194304\n"
                               "    Accepted value: Size in bytes"));
  ck_assert_ptr_nonnull(strstr(text, "NCCL_RAS_ADDR (const char*) [Unused] "));
  ck_assert_ptr_nonnull(strstr(text, "NCCL_HOSTID (const char*) [] host identity"));
  ck_assert_ptr_nonnull(strstr(text, "    Current value=<unset> set_by=default default=<unset>\n"));
  ck_assert_ptr_nonnull(strstr(text, "NCCL_SOCKET_FAMILY (enum) [Cached] AF_INET or AF_INET6 only\n"));
  ck_assert_ptr_nonnull(strstr(text, "    Accepted value: One of:\n        AF_INET\n        AF_INET6\n"));
  ck_assert_ptr_null(strstr(text, "NCCL_WORK_FIFO_BYTES"));
  free(text);
  setenv("NCCL_PARAM_DUMP_ALL", "TRUE", 1);
  braid_param_reload();
  text = dump();
  ck_assert_ptr_nonnull(strstr(text, "NCCL_WORK_FIFO_BYTES (const char*) [Private, Unused] "));
  free(text);
}
END_TEST

START_TEST(test_unused_note) {
  log_to_file("INFO", "ENV");
  bind("NCCL_RAS_ADDR"); /* an ACCEPTED row (NCCL_IB_HCA was this example: net_ib reads it now) */
  bind("NCCL_RAS_ADDR");
  const char* v;
  int n;
  ncclParamGetParameter("NCCL_WORK_FIFO_BYTES", &v, &n);
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "Warning: ENV NCCL_RAS_ADDR is unused. Setting it has no effect"), 1);
  ck_assert_int_eq(count_of(log, "Warning: ENV NCCL_WORK_FIFO_BYTES is unused."), 1);
  ck_assert_ptr_null(strstr(log, "ENV NCCL_BUFFSIZE is unused"));
  free(log);
}
END_TEST

Suite* param_api_suite(void) {
  Suite* s = suite_create("param_api");
  TCase* tc = tcase_create("api");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_bind);
  tcase_add_test(tc, test_typed_getters);
  tcase_add_test(tc, test_strings);
  tcase_add_test(tc, test_keys);
  tcase_add_test(tc, test_dump_all);
  tcase_add_test(tc, test_unused_note);
  suite_add_tcase(s, tc);
  return s;
}
