/*
 * test_param_types.c - the typed rows of src/base/param.h (src/base/param_parse.c) and what the
 * table logs: INT (decimal, 0x hex, bounds), SIZE (binary units), BOOL, ENUM (the word as the
 * row writes it), LIST (masks, ^, ALL, unknown words skipped); a value that does not fit is
 * one WARN naming variable, value and source, and the default; `set by` lines, with NCCL's
 * own reading when it differs; one INFO for a set ACCEPTED variable; unknown names with a
 * suggestion, foreign (PyTorch) names with their owner; the parser and the conf syntax on
 * random input.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/param.h"
#include "nccl.h"
#include "param_fixture.h"

/* ---- parsing, through the environment ---- */

struct parse_case {
  enum braid_param id;
  const char* text;
  int ok;
  int64_t value;
  const char* why; /* in the WARN when !ok */
};
static const struct parse_case parse_cases[] = {
    /* INT (BRAID_INIT_TIMEOUT: 0..INT32_MAX; NCCL_CROSS_NIC: 0..2) */
    {BRAID_PARAM_INIT_TIMEOUT, "1048576", 1, 1048576, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "0x100000", 1, 1048576, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "0X1f", 1, 31, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "  42 ", 1, 42, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "+7", 1, 7, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "010", 1, 10, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "0", 1, 0, NULL},
    {BRAID_PARAM_INIT_TIMEOUT, "-1", 0, 0, "out of range [0, 2147483647]"},
    {BRAID_PARAM_INIT_TIMEOUT, "abc", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "12abc", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "0x", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "0xg1", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "--1", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "1.5", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "- 1", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "99999999999999999999", 0, 0, "not an integer"},
    {BRAID_PARAM_INIT_TIMEOUT, "0x8000000000000000", 0, 0, "not an integer"},
    {BRAID_PARAM_CROSS_NIC, "2", 1, 2, NULL},
    {BRAID_PARAM_CROSS_NIC, "3", 0, 0, "out of range [0, 2]"},
    {BRAID_PARAM_IB_GID_INDEX, "-1", 1, -1, NULL},
    /* SIZE (NCCL_BUFFSIZE) */
    {BRAID_PARAM_BUFFSIZE, "1048576", 1, 1048576, NULL},
    {BRAID_PARAM_BUFFSIZE, "0x100000", 1, 1048576, NULL},
    {BRAID_PARAM_BUFFSIZE, "4M", 1, 4194304, NULL},
    {BRAID_PARAM_BUFFSIZE, "4 MiB", 1, 4194304, NULL},
    {BRAID_PARAM_BUFFSIZE, "64k", 1, 65536, NULL},
    {BRAID_PARAM_BUFFSIZE, "64KB", 1, 65536, NULL},
    {BRAID_PARAM_BUFFSIZE, "2g", 1, 2147483648LL, NULL},
    {BRAID_PARAM_BUFFSIZE, "1T", 1, 1099511627776LL, NULL},
    {BRAID_PARAM_BUFFSIZE, "512B", 1, 512, NULL},
    {BRAID_PARAM_BUFFSIZE, "9223372036854775807", 1, INT64_MAX, NULL},
    {BRAID_PARAM_BUFFSIZE, "-4M", 0, 0, "a negative size"},
    {BRAID_PARAM_BUFFSIZE, "4X", 0, 0, "not a size"},
    {BRAID_PARAM_BUFFSIZE, "4Mi", 0, 0, "not a size"},
    {BRAID_PARAM_BUFFSIZE, "M", 0, 0, "not a size"},
    {BRAID_PARAM_BUFFSIZE, "1.5M", 0, 0, "not a size"},
    {BRAID_PARAM_BUFFSIZE, "9000000T", 0, 0, "too large"},
    /* BOOL (NCCL_P2P_DISABLE) */
    {BRAID_PARAM_P2P_DISABLE, "1", 1, 1, NULL},
    {BRAID_PARAM_P2P_DISABLE, "true", 1, 1, NULL},
    {BRAID_PARAM_P2P_DISABLE, " T ", 1, 1, NULL},
    {BRAID_PARAM_P2P_DISABLE, "FALSE", 1, 0, NULL},
    {BRAID_PARAM_P2P_DISABLE, "f", 1, 0, NULL},
    {BRAID_PARAM_P2P_DISABLE, "0", 1, 0, NULL},
    {BRAID_PARAM_P2P_DISABLE, "2", 0, 0, "not a boolean"},
    {BRAID_PARAM_P2P_DISABLE, "yes", 0, 0, "not a boolean"},
    /* ENUM (NCCL_SOCKET_FAMILY, NCCL_DEBUG) */
    {BRAID_PARAM_SOCKET_FAMILY, "AF_INET6", 1, 1, NULL},
    {BRAID_PARAM_SOCKET_FAMILY, "af_inet", 1, 0, NULL},
    {BRAID_PARAM_SOCKET_FAMILY, "AF_UNIX", 0, 0, "not one of AF_INET|AF_INET6"},
    {BRAID_PARAM_DEBUG, "trace", 1, BRAID_LOG_TRACE, NULL},
    /* LIST (NCCL_DEBUG_SUBSYS) */
    {BRAID_PARAM_DEBUG_SUBSYS, "COLL,net", 1, BRAID_LOG_COLL | BRAID_LOG_NET, NULL},
    {BRAID_PARAM_DEBUG_SUBSYS, "^INIT", 1, ~(int64_t)BRAID_LOG_INIT, NULL},
    {BRAID_PARAM_DEBUG_SUBSYS, "ALL", 1, -1, NULL},
    {BRAID_PARAM_DEBUG_SUBSYS, "DESTROY,ALLOC_HOST", 1, BRAID_LOG_DESTROY | BRAID_LOG_ALLOC_HOST, NULL},
};

START_TEST(test_parse_env) {
  const struct parse_case* c = &parse_cases[_i];
  const char* name = braid_param_name(c->id);
  char def[64], want[512];
  setenv(name, c->text, 1);
  BRAID_WARN("sentinel");
  log_to_file("WARN", NULL);
  if (c->id == BRAID_PARAM_DEBUG) { /* log_to_file set it: set it again, without re-opening the log */
    setenv("NCCL_DEBUG", c->text, 1);
    braid_param_reload();
  }
  int64_t v = braid_param_int(c->id);
  char* log = read_file(param_logpath);
  if (c->ok) {
    ck_assert_msg(v == c->value, "%s='%s' gave %lld, want %lld", name, c->text, (long long)v, (long long)c->value);
    ck_assert_str_eq(braid_param_source(c->id), "environment");
    ck_assert_ptr_null(strstr(log, "Invalid value"));
  } else {
    ck_assert_msg(v == braid_param_row(c->id)->def_int, "%s='%s' gave %lld", name, c->text, (long long)v);
    ck_assert_str_eq(braid_param_source(c->id), "default");
    snprintf(want, sizeof(want), "NCCL WARN Invalid value %s for %s (set by environment): %s", c->text, name, c->why);
    ck_assert_msg(strstr(log, want) != NULL, "no '%s' in:\n%s", want, log);
    snprintf(want, sizeof(want), "; using default %s.\n", braid_param_default_str(c->id, def, sizeof(def)));
    ck_assert_msg(strstr(log, want) != NULL, "no '%s' in:\n%s", want, log);
    ck_assert_int_eq(count_of(log, "Invalid value"), 1);
  }
  /* Parameter advice is not an error of any call. */
  ck_assert_str_eq(ncclGetLastError(NULL), "sentinel");
  free(log);
}
END_TEST

START_TEST(test_enum_word_and_list_text) {
  char buf[256];
  setenv("NCCL_SOCKET_FAMILY", "af_inet6", 1);
  setenv("NCCL_LAUNCH_MODE", "group", 1);
  setenv("NCCL_DEBUG_SUBSYS", "net, coll ,BOGUS", 1);
  setenv("BRAID_NET_DIRECT", "false", 1);
  braid_param_reload();
  /* An ENUM reads back as the row writes the word, whatever the case it was set in. */
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_SOCKET_FAMILY), "AF_INET6");
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_LAUNCH_MODE), "GROUP");
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_LAUNCH_MODE), 1);
  /* A LIST keeps the text as set; its text form is NCCL's (bit order). */
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_DEBUG_SUBSYS), "net, coll ,BOGUS");
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_DEBUG_SUBSYS, buf, sizeof(buf)), "COLL,NET");
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_NET_DIRECT, buf, sizeof(buf)), "FALSE");
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_BUFFSIZE, buf, sizeof(buf)), "4194304");
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_LL_BUFFSIZE, buf, sizeof(buf)), "");
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_NET, buf, sizeof(buf)), "");
  setenv("NCCL_DEBUG_SUBSYS", "ALL", 1);
  setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "^WARN", 1);
  braid_param_reload();
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_DEBUG_SUBSYS, buf, sizeof(buf)), "ALL");
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_DEBUG_TIMESTAMP_LEVELS, buf, sizeof(buf)), "VERSION,INFO,ABORT,TRACE");
  setenv("NCCL_DEBUG_SUBSYS", "^ALL", 1);
  braid_param_reload();
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_DEBUG_SUBSYS, buf, sizeof(buf)), "NONE");
}
END_TEST

struct conf_seen {
  int lines, bad;
  char last_name[64], last_value[64];
};
static void conf_count(void* arg, int lineno, const char* name, size_t nl, const char* value, size_t vl) {
  struct conf_seen* c = arg;
  (void)lineno;
  if (name == NULL) {
    c->bad++;
    return;
  }
  c->lines++;
  snprintf(c->last_name, sizeof(c->last_name), "%.*s", (int)nl, name);
  snprintf(c->last_value, sizeof(c->last_value), "%.*s", (int)vl, value);
}

/* The parser and the conf syntax take any bytes: no crash, values within the row's range. */
START_TEST(test_parse_random) {
  unsigned seed = 12345;
  const char alphabet[] = "0123456789xXkKmMgGtTiIbB+-^, |=#\n\tafINTRUEfalseALLNET";
  char text[48], why[128];
  for (int iter = 0; iter < 20000; iter++) {
    size_t n = rand_r(&seed) % (sizeof(text) - 1);
    for (size_t k = 0; k < n; k++) text[k] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
    text[n] = '\0';
    enum braid_param id = (enum braid_param)(rand_r(&seed) % BRAID_PARAM_COUNT);
    const struct braid_param_row* r = braid_param_row(id);
    int64_t v = 7;
    int fit = braid_param_parse(r, text, &v, why, sizeof(why));
    ck_assert(fit >= -1 && fit <= 1);
    if (fit == 0 && r->type == BRAID_PARAM_T_INT) ck_assert(v >= r->lo && v <= r->hi);
    if (fit == 0 && r->type == BRAID_PARAM_T_BOOL) ck_assert(v == 0 || v == 1);
    if (fit == 0 && r->type == BRAID_PARAM_T_SIZE) ck_assert(v >= 0);
    if (fit < 0) ck_assert_int_gt(strlen(why), 0);
    struct conf_seen c = {0};
    braid_param_conf_parse(text, n, conf_count, &c);
    ck_assert_int_le(c.lines + c.bad, (int)n + 1);
  }
}
END_TEST

START_TEST(test_conf_syntax) {
  const char text[] = "# c\n\n  A = 1 \r\nno equals\n#B=2\n  C=x=y\nD=";
  struct conf_seen c = {0};
  braid_param_conf_parse(text, sizeof(text) - 1, conf_count, &c);
  ck_assert_int_eq(c.lines, 3);
  ck_assert_int_eq(c.bad, 1);
  ck_assert_str_eq(c.last_name, "D");
  ck_assert_str_eq(c.last_value, "");
  memset(&c, 0, sizeof(c));
  braid_param_conf_parse("E=5", 1, conf_count, &c); /* a length shorter than the text */
  ck_assert_int_eq(c.bad, 1);
}
END_TEST

/* ---- what is logged ---- */

START_TEST(test_set_by_lines) {
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_PROTO=LL\nNCCL_BUFFSIZE=1\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_BUFFSIZE", "0x100000", 1);
  setenv("NCCL_NET", "Socket", 1);
  setenv("NCCL_LL_BUFFSIZE", "64K", 1);
  log_to_file("INFO", "ENV");
  for (int i = 0; i < 3; i++) {
    braid_param_int(BRAID_PARAM_BUFFSIZE);
    braid_param_str(BRAID_PARAM_NET);
  }
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "NCCL INFO NCCL_BUFFSIZE set by environment to 1048576.\n"), 1);
  ck_assert_int_eq(count_of(log, "NCCL INFO NCCL_NET set by environment to Socket.\n"), 1);
  /* Units are braid's: the line says what NCCL would make of the text. */
  ck_assert_int_eq(
      count_of(log, "NCCL INFO NCCL_LL_BUFFSIZE set by environment to 65536 (NCCL itself would read \"64K\" as 64).\n"),
      1);
  char want[512];
  snprintf(want, sizeof(want), "NCCL INFO NCCL_PROTO set by %s to LL.\n", conf);
  ck_assert_int_eq(count_of(log, want), 1);
  snprintf(want, sizeof(want), "NCCL INFO NCCL_CONF_FILE set by environment to %s.\n", conf);
  ck_assert_int_eq(count_of(log, want), 1);
  ck_assert_int_eq(count_of(log, "set by"), 5); /* not NCCL_DEBUG*, not the overridden file value */
  free(log);
  /* Without ENV in the subsystems, no `set by` lines. */
  log_to_file("INFO", "INIT");
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  log = read_file(param_logpath);
  ck_assert_ptr_null(strstr(log, "set by"));
  free(log);
}
END_TEST

START_TEST(test_accepted_says_ignored) {
  setenv("NCCL_WORK_FIFO_BYTES", "65536", 1); /* a name of param_nccl.h */
  /* a declared ACCEPTED row (NCCL_GRAPH_FILE, then NCCL_IB_HCA were this example: topo and
   * net_ib read them now) */
  setenv("NCCL_RAS_ADDR", "x:1", 1);
  log_to_file("INFO", "ENV");
  for (int i = 0; i < 3; i++) braid_param_str(BRAID_PARAM_RAS_ADDR), braid_param_str(BRAID_PARAM_NCCL_WORK_FIFO_BYTES);
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log,
                            "NCCL INFO NCCL_RAS_ADDR set by environment to x:1: braid accepts it for compatibility and "
                            "ignores it.\n"),
                   1);
  ck_assert_int_eq(count_of(log,
                            "NCCL INFO NCCL_WORK_FIFO_BYTES set by environment to 65536: braid accepts it for "
                            "compatibility and ignores it.\n"),
                   1);
  ck_assert_int_eq(count_of(log, "NCCL_RAS_ADDR set by environment to x:1: braid accepts it"), 1);
  ck_assert_ptr_null(strstr(log, "Unknown"));
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_NCCL_WORK_FIFO_BYTES), "65536");
  free(log);
}
END_TEST

START_TEST(test_unknown_variables) {
  setenv("NCCL_BUFSIZE", "1", 1);
  setenv("BRAID_HOSTMODE", "1", 1);
  setenv("NCCL_SOCKET_IFNAM", "eth0", 1);
  setenv("NCCL_DEBUG_SUBSYSTEM", "INIT", 1);
  setenv("NCCL_WORK_FIFO_BYTE", "1", 1);
  setenv("NCCL_TESTS_SPLIT", "MOD 2", 1);
  setenv("NCCL_TESTS_MIN_BW", "1", 1);
  setenv("NOT_NCCL_BUFSIZE", "1", 1);
  BRAID_WARN("sentinel");
  log_to_file("WARN", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "NCCL WARN Unknown environment variable NCCL_BUFSIZE (did you mean NCCL_BUFFSIZE?)\n"),
                   1);
  ck_assert_int_eq(
      count_of(log, "NCCL WARN Unknown environment variable BRAID_HOSTMODE (did you mean BRAID_HOST_MODE?)\n"), 1);
  ck_assert_int_eq(count_of(log, "Unknown environment variable NCCL_SOCKET_IFNAM (did you mean NCCL_SOCKET_IFNAME?)\n"),
                   1);
  ck_assert_int_eq(
      count_of(log, "Unknown environment variable NCCL_DEBUG_SUBSYSTEM (did you mean NCCL_DEBUG_SUBSYS?)\n"), 1);
  /* The suggestions include the names braid accepts without a row. */
  ck_assert_int_eq(
      count_of(log, "Unknown environment variable NCCL_WORK_FIFO_BYTE (did you mean NCCL_WORK_FIFO_BYTES?)\n"), 1);
  ck_assert_int_eq(count_of(log, "Unknown"), 5);
  ck_assert_ptr_null(strstr(log, "NCCL_TESTS"));
  ck_assert_ptr_null(strstr(log, "NOT_NCCL"));
  /* Each WARN line is preceded by an empty line. */
  ck_assert_int_eq(count_of(log, "\n\n") + (log[0] == '\n'), 5);
  ck_assert_str_eq(ncclGetLastError(NULL), "sentinel");
  free(log);
  /* Not printed below WARN, still not recorded. */
  log_to_file("VERSION", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  log = read_file(param_logpath);
  ck_assert_ptr_null(strstr(log, "Unknown"));
  ck_assert_str_eq(ncclGetLastError(NULL), "sentinel");
  free(log);
}
END_TEST

START_TEST(test_foreign_names) {
  setenv("NCCL_ASYNC_ERROR_HANDLING", "1", 1);
  setenv("NCCL_BLOCKING_WAIT", "1", 1);
  log_to_file("INFO", "ENV");
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  char* log = read_file(param_logpath);
  ck_assert_ptr_null(strstr(log, "Unknown"));
  ck_assert_int_eq(count_of(log,
                            "NCCL INFO NCCL_ASYNC_ERROR_HANDLING is read by PyTorch "
                            "(TORCH_NCCL_ASYNC_ERROR_HANDLING), not by NCCL; braid ignores it.\n"),
                   1);
  ck_assert_int_eq(count_of(log, "NCCL_BLOCKING_WAIT is read by PyTorch"), 1);
  ck_assert_str_eq(braid_param_foreign_owner("NCCL_DESYNC_DEBUG", 17), "PyTorch (TORCH_NCCL_DESYNC_DEBUG)");
  ck_assert_ptr_null(braid_param_foreign_owner("NCCL_BUFFSIZE", 13));
  free(log);
}
END_TEST

START_TEST(test_first_read_prints_advice) {
  /* With no log call at all, reading a parameter configures the logger and prints the advice. */
  setenv("NCCL_BUFSIZE", "1", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", param_logpath, 1);
  braid_param_reload();
  __atomic_store_n(&braid_debug_level, -1, __ATOMIC_RELEASE); /* "not initialised" */
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE) > 0, 1);
  ck_assert_int_eq(braid_debug_level, BRAID_LOG_WARN);
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "Unknown environment variable NCCL_BUFSIZE (did you mean NCCL_BUFFSIZE?)"), 1);
  free(log);
}
END_TEST

START_TEST(test_warn_enables_info) {
  setenv("NCCL_WARN_ENABLE_DEBUG_INFO", "1", 1);
  log_to_file("WARN", "INIT");
  BRAID_INFO(BRAID_LOG_INIT, "before the warning");
  BRAID_WARN("the warning");
  BRAID_INFO(BRAID_LOG_INIT, "after the warning");
  char* log = read_file(param_logpath);
  ck_assert_ptr_null(strstr(log, "before the warning"));
  ck_assert_ptr_nonnull(strstr(log, "NCCL WARN the warning"));
  ck_assert_ptr_nonnull(strstr(log, "NCCL INFO after the warning"));
  free(log);
}
END_TEST

Suite* param_types_suite(void) {
  Suite* s = suite_create("param_types");
  TCase* tc = tcase_create("parse");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_loop_test(tc, test_parse_env, 0, (int)(sizeof(parse_cases) / sizeof(parse_cases[0])));
  tcase_add_test(tc, test_enum_word_and_list_text);
  tcase_add_test(tc, test_parse_random);
  tcase_add_test(tc, test_conf_syntax);
  suite_add_tcase(s, tc);

  tc = tcase_create("logging");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_set_by_lines);
  tcase_add_test(tc, test_accepted_says_ignored);
  tcase_add_test(tc, test_unknown_variables);
  tcase_add_test(tc, test_foreign_names);
  tcase_add_test(tc, test_first_read_prints_advice);
  tcase_add_test(tc, test_warn_enables_info);
  suite_add_tcase(s, tc);
  return s;
}
