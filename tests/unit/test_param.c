/*
 * test_param.c - the parameter table (src/base/param.c): defaults, the order environment >
 * NCCL_CONF_FILE > ~/.nccl.conf > /etc/nccl.conf, INT parsing (decimal, 0x hex, malformed),
 * the `set by` lines, unknown-variable advice and its suggestion, reload under readers.
 *
 * Each test starts from an environment without NCCL_* / BRAID_* variables and with HOME set
 * to a fresh temporary directory; log output is captured through NCCL_DEBUG_FILE.
 */
#include <check.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "nccl.h"

extern char** environ;

static char tmpdir[64];
static char logpath[128];

/* ---- fixture and helpers ---- */

static void clear_braid_env(void) {
  char* names[512];
  int n = 0;
  for (char** e = environ; *e && n < 512; e++) {
    if (strncmp(*e, "NCCL_", 5) != 0 && strncmp(*e, "BRAID_", 6) != 0) continue;
    const char* eq = strchr(*e, '=');
    if (eq) names[n++] = strndup(*e, (size_t)(eq - *e));
  }
  for (int i = 0; i < n; i++) unsetenv(names[i]), free(names[i]);
}

static void setup(void) {
  clear_braid_env();
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/braid-test-param-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  setenv("HOME", tmpdir, 1);
  snprintf(logpath, sizeof(logpath), "%s/log", tmpdir);
  ncclResetDebugInit();
}

static int rm_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void teardown(void) {
  clear_braid_env();
  ncclResetDebugInit(); /* closes the log file */
  nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Logs at `level` into logpath (subsystems `subsys`, NULL: default) and re-reads everything. */
static void log_to_file(const char* level, const char* subsys) {
  setenv("NCCL_DEBUG", level, 1);
  if (subsys) setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", logpath, 1);
  ncclResetDebugInit();
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return strdup("");
  char* buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int count_of(const char* text, const char* needle) {
  int n = 0;
  for (const char* p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

static char* write_conf(const char* name, const char* body) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  FILE* f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(body, f);
  fclose(f);
  return path;
}

/* 1 when /etc/nccl.conf on this machine sets `name` (then its default cannot be checked). */
static int system_conf_sets(const char* name) {
  char* text = read_file("/etc/nccl.conf");
  char needle[128];
  snprintf(needle, sizeof(needle), "%s", name);
  int found = strstr(text, needle) != NULL;
  free(text);
  return found;
}

/* ---- defaults and table metadata ---- */

START_TEST(test_defaults) {
  char buf[64];
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    enum braid_param p = (enum braid_param)id;
    const char* name = braid_param_name(p);
    ck_assert_ptr_nonnull(name);
    ck_assert(strncmp(name, "NCCL_", 5) == 0 || strncmp(name, "BRAID_", 6) == 0);
    ck_assert_ptr_nonnull(braid_param_doc(p));
    ck_assert_int_gt(strlen(braid_param_doc(p)), 0);
    for (int other = 0; other < id; other++) ck_assert_str_ne(name, braid_param_name((enum braid_param)other));
    if (!system_conf_sets(name)) ck_assert_str_eq(braid_param_source(p), "default");
  }
  ck_assert_int_eq(braid_param_is_int(BRAID_PARAM_BUFFSIZE), 1);
  ck_assert_int_eq(braid_param_is_int(BRAID_PARAM_NET), 0);
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_BUFFSIZE, buf, sizeof(buf)), "4194304");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_IB_GID_INDEX, buf, sizeof(buf)), "-1");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_LL_BUFFSIZE, buf, sizeof(buf)), "auto");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_NET, buf, sizeof(buf)), "auto");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_DEBUG_SUBSYS, buf, sizeof(buf)), "INIT,BOOTSTRAP,ENV");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_BUFFSIZE, buf, 4), "419"); /* truncated, terminated */
  if (!system_conf_sets("NCCL_BUFFSIZE")) ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
  if (!system_conf_sets("NCCL_LL_BUFFSIZE")) ck_assert(braid_param_int(BRAID_PARAM_LL_BUFFSIZE) == BRAID_PARAM_UNSET);
  if (!system_conf_sets("NCCL_NET")) ck_assert_ptr_null(braid_param_str(BRAID_PARAM_NET));
  if (!system_conf_sets("NCCL_LAUNCH_MODE")) ck_assert_str_eq(braid_param_str(BRAID_PARAM_LAUNCH_MODE), "PARALLEL");
}
END_TEST

START_TEST(test_bad_ids_and_types) {
  BRAID_WARN("sentinel");
  ck_assert(braid_param_int(BRAID_PARAM_NET) == BRAID_PARAM_UNSET);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "NCCL_NET is a string parameter"));
  ck_assert_ptr_null(braid_param_str(BRAID_PARAM_BUFFSIZE));
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "NCCL_BUFFSIZE is an integer parameter"));
  ck_assert(braid_param_int(BRAID_PARAM_COUNT) == BRAID_PARAM_UNSET);
  ck_assert_ptr_nonnull(strstr(ncclGetLastError(NULL), "invalid parameter id"));
  ck_assert_ptr_null(braid_param_str((enum braid_param) - 1));
  ck_assert_ptr_null(braid_param_name(BRAID_PARAM_COUNT));
  ck_assert_ptr_null(braid_param_source(BRAID_PARAM_COUNT));
  ck_assert_ptr_null(braid_param_doc(BRAID_PARAM_COUNT));
  ck_assert_int_eq(braid_param_is_int(BRAID_PARAM_COUNT), 0);
  char buf[8] = "x";
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_COUNT, buf, sizeof(buf)), "");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_BUFFSIZE, NULL, 0), "");
}
END_TEST

/* ---- sources and their order ---- */

START_TEST(test_environment) {
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  setenv("NCCL_NET", "Socket", 1);
  setenv("BRAID_HOST_MODE", "1", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 1048576);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), "environment");
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_NET), "Socket");
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_NET), "environment");
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_HOST_MODE), 1);
  /* An empty value counts as unset. */
  setenv("NCCL_BUFFSIZE", "", 1);
  setenv("NCCL_NET", "", 1);
  braid_param_reload();
  if (!system_conf_sets("NCCL_BUFFSIZE")) {
    ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
    ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), "default");
  }
  if (!system_conf_sets("NCCL_NET")) ck_assert_ptr_null(braid_param_str(BRAID_PARAM_NET));
}
END_TEST

START_TEST(test_conf_file) {
  const char* path = write_conf("conf",
                                "# a comment\n"
                                "\n"
                                "   # an indented comment\n"
                                "NCCL_BUFFSIZE=2097152\n"
                                "  NCCL_NET = IB  \r\n"
                                "NCCL_SOCKET_IFNAME=eth0,eth1\n"
                                "NCCL_PROTO=LL\n");
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", path);
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_PROTO", "Simple", 1); /* the environment wins over the file */
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 2097152);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), conf);
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_NET), "IB");
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_NET), conf);
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_SOCKET_IFNAME), "eth0,eth1");
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_PROTO), "Simple");
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_PROTO), "environment");
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_CONF_FILE), conf);
}
END_TEST

START_TEST(test_home_conf) {
  write_conf(".nccl.conf", "NCCL_BUFFSIZE=65536\nNCCL_NET=Socket\nNCCL_ALGO=Ring\n");
  char home_conf[256];
  snprintf(home_conf, sizeof(home_conf), "%s/.nccl.conf", tmpdir);
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_BUFFSIZE=131072\n"));
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 65536);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), home_conf);
  /* NCCL_CONF_FILE comes before ~/.nccl.conf; ~/.nccl.conf still fills the rest. */
  setenv("NCCL_CONF_FILE", conf, 1);
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 131072);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), conf);
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_NET), "Socket");
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_NET), home_conf);
  /* ... and the environment before both. */
  setenv("NCCL_ALGO", "Tree", 1);
  braid_param_reload();
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_ALGO), "Tree");
}
END_TEST

START_TEST(test_conf_file_problems) {
  setenv("NCCL_CONF_FILE", "/nonexistent/braid/nccl.conf", 1);
  log_to_file("WARN", NULL);
  char* log = read_file(logpath);
  ck_assert_ptr_nonnull(strstr(log, "NCCL WARN NCCL_CONF_FILE /nonexistent/braid/nccl.conf could not be opened"));
  free(log);
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_BUFFSIZE 12\nNCCL_PROTOO=LL\nOTHER_VAR=1\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  log_to_file("WARN", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  log = read_file(logpath);
  char want[512];
  snprintf(want, sizeof(want), "NCCL WARN %s:1: ignoring line without '=': NCCL_BUFFSIZE 12\n", conf);
  ck_assert_ptr_nonnull(strstr(log, want));
  snprintf(want, sizeof(want), "NCCL WARN Unknown variable NCCL_PROTOO in %s (did you mean NCCL_PROTO?)\n", conf);
  ck_assert_ptr_nonnull(strstr(log, want));
  ck_assert_ptr_null(strstr(log, "OTHER_VAR"));
  free(log);
}
END_TEST

START_TEST(test_conf_read_once) {
  /* NCCL_CONF_FILE naming ~/.nccl.conf reads it once: one warning, not two. */
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf(".nccl.conf", "NCCL_PROTOO=LL\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  log_to_file("WARN", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  char* log = read_file(logpath);
  ck_assert_int_eq(count_of(log, "Unknown variable NCCL_PROTOO"), 1);
  free(log);
}
END_TEST

/* ---- INT parsing ---- */

struct int_case {
  const char* text;
  int ok;
  int64_t value;
};
static const struct int_case int_cases[] = {
    {"1048576", 1, 1048576},
    {"0x100000", 1, 1048576},
    {"0X1f", 1, 31},
    {"  42 ", 1, 42},
    {"-1", 1, -1},
    {"+7", 1, 7},
    {"010", 1, 10},
    {"0", 1, 0},
    {"9223372036854775807", 1, INT64_MAX},
    {"-0x10", 1, -16},
    {"abc", 0, 0},
    {"12abc", 0, 0},
    {"0x", 0, 0},
    {"0xg1", 0, 0},
    {"--1", 0, 0},
    {"1.5", 0, 0},
    {"4M", 0, 0},
    {"99999999999999999999", 0, 0},
    {"0x8000000000000000", 0, 0},
    {"- 1", 0, 0},
};

START_TEST(test_int_parse) {
  const struct int_case* c = &int_cases[_i];
  setenv("NCCL_BUFFSIZE", c->text, 1);
  BRAID_WARN("sentinel");
  log_to_file("WARN", NULL);
  int64_t v = braid_param_int(BRAID_PARAM_BUFFSIZE);
  char* log = read_file(logpath);
  char want[256];
  snprintf(want, sizeof(want),
           "NCCL WARN Invalid value %s for NCCL_BUFFSIZE (set by environment), using default 4194304.\n", c->text);
  if (c->ok) {
    ck_assert_msg(v == c->value, "'%s' gave %lld", c->text, (long long)v);
    ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), "environment");
    ck_assert_ptr_null(strstr(log, "Invalid value"));
  } else {
    ck_assert_msg(v == 4194304, "'%s' gave %lld", c->text, (long long)v);
    ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), "default");
    ck_assert_msg(strstr(log, want) != NULL, "no '%s' in:\n%s", want, log);
    ck_assert_int_eq(count_of(log, "Invalid value"), 1);
  }
  /* Parameter advice is not an error of any call. */
  ck_assert_str_eq(ncclGetLastError(NULL), "sentinel");
  free(log);
}
END_TEST

START_TEST(test_malformed_blocks_lower_sources) {
  /* A malformed environment value falls back to the default, not to a conf file's value. */
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_BUFFSIZE=65536\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_BUFFSIZE", "lots", 1);
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), "default");
}
END_TEST

/* ---- what is logged ---- */

START_TEST(test_set_by_lines) {
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_PROTO=LL\nNCCL_BUFFSIZE=1\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  setenv("NCCL_BUFFSIZE", "0x100000", 1);
  setenv("NCCL_NET", "Socket", 1);
  log_to_file("INFO", "ENV");
  for (int i = 0; i < 3; i++) {
    braid_param_int(BRAID_PARAM_BUFFSIZE);
    braid_param_str(BRAID_PARAM_NET);
  }
  char* log = read_file(logpath);
  ck_assert_int_eq(count_of(log, "NCCL INFO NCCL_BUFFSIZE set by environment to 1048576.\n"), 1);
  ck_assert_int_eq(count_of(log, "NCCL INFO NCCL_NET set by environment to Socket.\n"), 1);
  char want[512];
  snprintf(want, sizeof(want), "NCCL INFO NCCL_PROTO set by %s to LL.\n", conf);
  ck_assert_int_eq(count_of(log, want), 1);
  snprintf(want, sizeof(want), "NCCL INFO NCCL_CONF_FILE set by environment to %s.\n", conf);
  ck_assert_int_eq(count_of(log, want), 1);
  ck_assert_int_eq(count_of(log, "set by"), 4); /* not NCCL_DEBUG*, not the overridden file value */
  free(log);
  /* Without ENV in the subsystems, no `set by` lines. */
  log_to_file("INFO", "INIT");
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  log = read_file(logpath);
  ck_assert_ptr_null(strstr(log, "set by"));
  free(log);
}
END_TEST

START_TEST(test_unknown_variables) {
  setenv("NCCL_BUFSIZE", "1", 1);
  setenv("BRAID_HOSTMODE", "1", 1);
  setenv("NCCL_SOCKET_IFNAM", "eth0", 1);
  setenv("NCCL_DEBUG_SUBSYSTEM", "INIT", 1);
  setenv("NCCL_TESTS_SPLIT", "MOD 2", 1);
  setenv("NCCL_TESTS_MIN_BW", "1", 1);
  setenv("NOT_NCCL_BUFSIZE", "1", 1);
  BRAID_WARN("sentinel");
  log_to_file("WARN", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  char* log = read_file(logpath);
  ck_assert_int_eq(count_of(log, "NCCL WARN Unknown environment variable NCCL_BUFSIZE (did you mean NCCL_BUFFSIZE?)\n"),
                   1);
  ck_assert_int_eq(
      count_of(log, "NCCL WARN Unknown environment variable BRAID_HOSTMODE (did you mean BRAID_HOST_MODE?)\n"), 1);
  ck_assert_int_eq(count_of(log, "Unknown environment variable NCCL_SOCKET_IFNAM (did you mean NCCL_SOCKET_IFNAME?)\n"),
                   1);
  ck_assert_int_eq(
      count_of(log, "Unknown environment variable NCCL_DEBUG_SUBSYSTEM (did you mean NCCL_DEBUG_SUBSYS?)\n"), 1);
  ck_assert_int_eq(count_of(log, "Unknown"), 4);
  ck_assert_ptr_null(strstr(log, "NCCL_TESTS"));
  ck_assert_ptr_null(strstr(log, "NOT_NCCL"));
  /* Each WARN line is preceded by an empty line. */
  ck_assert_int_eq(count_of(log, "\n\n") + (log[0] == '\n'), 4);
  ck_assert_str_eq(ncclGetLastError(NULL), "sentinel");
  free(log);
  /* Not printed below WARN, still not recorded. */
  log_to_file("VERSION", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  log = read_file(logpath);
  ck_assert_ptr_null(strstr(log, "Unknown"));
  ck_assert_str_eq(ncclGetLastError(NULL), "sentinel");
  free(log);
}
END_TEST

START_TEST(test_first_read_prints_advice) {
  /* With no log call at all, reading a parameter configures the logger and prints the advice. */
  setenv("NCCL_BUFSIZE", "1", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", logpath, 1);
  braid_param_reload();
  __atomic_store_n(&braid_debug_level, -1, __ATOMIC_RELEASE); /* "not initialised" */
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE) > 0, 1);
  ck_assert_int_eq(braid_debug_level, BRAID_LOG_WARN);
  char* log = read_file(logpath);
  ck_assert_int_eq(count_of(log, "Unknown environment variable NCCL_BUFSIZE (did you mean NCCL_BUFFSIZE?)"), 1);
  free(log);
}
END_TEST

/* ---- reload while other threads read ---- */

static volatile int readers_stop;

static void* reader(void* arg) {
  long bad = 0;
  while (!__atomic_load_n(&readers_stop, __ATOMIC_ACQUIRE)) {
    if (braid_param_int(BRAID_PARAM_BUFFSIZE) != 1048576) bad++;
    const char* net = braid_param_str(BRAID_PARAM_NET);
    if (net == NULL || strcmp(net, "Socket") != 0) bad++;
    if (strcmp(braid_param_source(BRAID_PARAM_NET), "environment") != 0) bad++;
  }
  *(long*)arg = bad;
  return NULL;
}

START_TEST(test_reload_under_readers) {
  setenv("NCCL_BUFFSIZE", "1048576", 1);
  setenv("NCCL_NET", "Socket", 1);
  braid_param_reload();
  const char* before = braid_param_str(BRAID_PARAM_NET);
  pthread_t threads[4];
  long bad[4];
  readers_stop = 0;
  for (int t = 0; t < 4; t++) ck_assert_int_eq(pthread_create(&threads[t], NULL, reader, &bad[t]), 0);
  for (int r = 0; r < 200; r++) braid_param_reload();
  __atomic_store_n(&readers_stop, 1, __ATOMIC_RELEASE);
  for (int t = 0; t < 4; t++) {
    pthread_join(threads[t], NULL);
    ck_assert_int_eq(bad[t], 0);
  }
  /* Strings handed out before a reload stay valid. */
  ck_assert_str_eq(before, "Socket");
}
END_TEST

Suite* param_suite(void) {
  Suite* s = suite_create("param");
  TCase* tc = tcase_create("table");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_bad_ids_and_types);
  suite_add_tcase(s, tc);

  tc = tcase_create("sources");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_environment);
  tcase_add_test(tc, test_conf_file);
  tcase_add_test(tc, test_home_conf);
  tcase_add_test(tc, test_conf_file_problems);
  tcase_add_test(tc, test_conf_read_once);
  tcase_add_test(tc, test_malformed_blocks_lower_sources);
  suite_add_tcase(s, tc);

  tc = tcase_create("int_parse");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_loop_test(tc, test_int_parse, 0, (int)(sizeof(int_cases) / sizeof(int_cases[0])));
  suite_add_tcase(s, tc);

  tc = tcase_create("logging");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_set_by_lines);
  tcase_add_test(tc, test_unknown_variables);
  tcase_add_test(tc, test_first_read_prints_advice);
  suite_add_tcase(s, tc);

  tc = tcase_create("reload");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_reload_under_readers);
  suite_add_tcase(s, tc);
  return s;
}
