/*
 * test_param.c - the parameter table (src/base/param.c): its rows, the names NCCL reads
 * (tests/param/nccl-*-names.txt, all known, none stale), the order environment >
 * NCCL_CONF_FILE or ~/.nccl.conf > /etc/nccl.conf. The typed parsers and what is logged are in
 * test_param_types.c, when values are read (PER_USE, fork) in test_param_use.c, the env plugin
 * in tests/param/run.sh (it needs a library built by the tests).
 *
 * Each test starts from an environment without NCCL_* / BRAID_* variables and with HOME set
 * to a fresh temporary directory (param_fixture.h).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/param.h"
#include "nccl.h"
#include "param_fixture.h"

/* ---- the table ---- */

START_TEST(test_defaults) {
  char buf[64];
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    enum braid_param p = (enum braid_param)id;
    const char* name = braid_param_name(p);
    ck_assert_ptr_nonnull(name);
    ck_assert(strncmp(name, "NCCL_", 5) == 0 || strncmp(name, "BRAID_", 6) == 0);
    ck_assert_ptr_nonnull(braid_param_doc(p));
    ck_assert_int_gt(strlen(braid_param_doc(p)), 0);
    if (!system_conf_sets(name)) ck_assert_str_eq(braid_param_source(p), "default");
  }
  ck_assert_int_eq(braid_param_is_int(BRAID_PARAM_BUFFSIZE), 1);
  ck_assert_int_eq(braid_param_is_int(BRAID_PARAM_NET), 0);
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_BUFFSIZE, buf, sizeof(buf)), "4194304");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_IB_GID_INDEX, buf, sizeof(buf)), "-1");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_LL_BUFFSIZE, buf, sizeof(buf)), "auto");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_NET, buf, sizeof(buf)), "auto");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_P2P_DISABLE, buf, sizeof(buf)), "FALSE");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_DEBUG_SUBSYS, buf, sizeof(buf)), "INIT,BOOTSTRAP,ENV");
  ck_assert_str_eq(braid_param_default_str(BRAID_PARAM_BUFFSIZE, buf, 4), "419"); /* truncated, terminated */
  if (!system_conf_sets("NCCL_BUFFSIZE")) ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 4194304);
  if (!system_conf_sets("NCCL_LL_BUFFSIZE")) ck_assert(braid_param_int(BRAID_PARAM_LL_BUFFSIZE) == BRAID_PARAM_UNSET);
  if (!system_conf_sets("NCCL_NET")) ck_assert_ptr_null(braid_param_str(BRAID_PARAM_NET));
  if (!system_conf_sets("NCCL_LAUNCH_MODE")) {
    ck_assert_str_eq(braid_param_str(BRAID_PARAM_LAUNCH_MODE), "PARALLEL");
    ck_assert_int_eq(braid_param_int(BRAID_PARAM_LAUNCH_MODE), 0);
  }
  if (!system_conf_sets("NCCL_DEBUG_SUBSYS"))
    ck_assert(braid_param_int(BRAID_PARAM_DEBUG_SUBSYS) == (BRAID_LOG_INIT | BRAID_LOG_BOOTSTRAP | BRAID_LOG_ENV));
}
END_TEST

/* Every row is well formed: a known status and type, a default that fits, one name once. */
START_TEST(test_rows_well_formed) {
  int declared = 0;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    const struct braid_param_row* r = braid_param_row((enum braid_param)id);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(braid_param_lookup(r->name, strlen(r->name)) == id, "%s is declared twice (param.h, param_nccl.h)",
                  r->name);
    ck_assert(r->status == BRAID_PARAM_LIVE || r->status == BRAID_PARAM_PER_USE || r->status == BRAID_PARAM_ACCEPTED);
    ck_assert(r->type >= BRAID_PARAM_T_INT && r->type <= BRAID_PARAM_T_STR);
    ck_assert(r->declared || r->status == BRAID_PARAM_ACCEPTED);
    declared += r->declared;
    int64_t v = 0;
    if (r->type == BRAID_PARAM_T_ENUM || r->type == BRAID_PARAM_T_LIST) {
      ck_assert_ptr_nonnull(r->words);
      if (r->def_str) ck_assert_msg(braid_param_parse(r, r->def_str, &v, NULL, 0) == 0, "%s default", r->name);
    } else if (r->type == BRAID_PARAM_T_INT && r->def_int != BRAID_PARAM_UNSET) {
      ck_assert_msg(r->lo <= r->def_int && r->def_int <= r->hi, "%s default out of its range", r->name);
    } else if (r->type == BRAID_PARAM_T_BOOL && r->def_int != BRAID_PARAM_UNSET) {
      ck_assert(r->def_int == 0 || r->def_int == 1);
    }
    ck_assert_str_eq(braid_param_status_name((enum braid_param)id), r->status == BRAID_PARAM_LIVE      ? "LIVE"
                                                                    : r->status == BRAID_PARAM_PER_USE ? "PER_USE"
                                                                                                       : "ACCEPTED");
  }
  ck_assert_int_gt(declared, 80);
  ck_assert_int_eq(braid_param_lookup("NCCL_NOT_A_PARAM", 16), -1);
  ck_assert_ptr_null(braid_param_row(BRAID_PARAM_COUNT));
  /* The rows NCCL reads at each use are read at each use here too. */
  ck_assert_int_eq(braid_param_row(BRAID_PARAM_HOSTID)->status, BRAID_PARAM_PER_USE);
  ck_assert_int_eq(braid_param_row(BRAID_PARAM_COMM_ID)->status, BRAID_PARAM_PER_USE);
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
  ck_assert_str_eq(braid_param_text(BRAID_PARAM_COUNT, buf, sizeof(buf)), "");
}
END_TEST

/* ---- the names NCCL reads ---- */

static const char* const name_files[] = {"nccl-2.28-names.txt", "nccl-2.29-names.txt", "nccl-2.30-names.txt"};

/* Every name NCCL 2.28, 2.29 and 2.30 read is a row, and setting them all draws no "Unknown". */
START_TEST(test_nccl_names_known) {
  FILE* f = open_data(name_files[_i]);
  ck_assert_msg(f != NULL, "tests/param/%s not found", name_files[_i]);
  char line[256];
  int n = 0;
  while (fgets(line, sizeof(line), f)) {
    line[strcspn(line, "\n")] = '\0';
    if (line[0] == '\0' || line[0] == '#') continue;
    ck_assert_msg(braid_param_lookup(line, strlen(line)) >= 0, "%s (%s) is not a row", line, name_files[_i]);
    if (strncmp(line, "NCCL_DEBUG", 10) != 0 && strcmp(line, "NCCL_CONF_FILE") != 0 &&
        strcmp(line, "NCCL_ENV_PLUGIN") != 0 && strcmp(line, "NCCL_NO_CACHE") != 0 &&
        strcmp(line, "NCCL_WARN_ENABLE_DEBUG_INFO") != 0)
      setenv(line, "1", 1);
    n++;
  }
  fclose(f);
  ck_assert_int_gt(n, 150);
  log_to_file("INFO", "ENV");
  char* log = read_file(param_logpath);
  ck_assert_msg(strstr(log, "Unknown") == NULL, "an NCCL name is reported unknown:\n%s", log);
  ck_assert_int_gt(count_of(log, "braid accepts it for compatibility and ignores it."), 100);
  free(log);
}
END_TEST

/* Every name param_nccl.h accepts without a row is one NCCL reads (no stale entry). */
START_TEST(test_bare_names_are_nccls) {
  char* all = calloc(1, 1 << 16);
  for (size_t k = 0; k < sizeof(name_files) / sizeof(name_files[0]); k++) {
    FILE* f = open_data(name_files[k]);
    ck_assert_ptr_nonnull(f);
    size_t used = strlen(all);
    all[used++] = '\n';
    fread(all + used, 1, (1 << 16) - used - 1, f);
    fclose(f);
  }
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    const struct braid_param_row* r = braid_param_row((enum braid_param)id);
    char needle[128];
    snprintf(needle, sizeof(needle), "\n%s\n", r->name);
    if (!r->declared)
      ck_assert_msg(strstr(all, needle) != NULL, "%s is in param_nccl.h but NCCL reads no such name", r->name);
  }
  free(all);
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
                                "NCCL_PROTO=LL\n"
                                "NCCL_LL_BUFFSIZE=64K"); /* no newline at the end */
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
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_LL_BUFFSIZE), 65536);
}
END_TEST

START_TEST(test_home_conf) {
  write_conf(".nccl.conf", "NCCL_BUFFSIZE=65536\nNCCL_NET=Socket\nNCCL_ALGO=Ring\n");
  char home_conf[256];
  snprintf(home_conf, sizeof(home_conf), "%s/.nccl.conf", param_tmpdir);
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_BUFFSIZE=131072\n"));
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 65536);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), home_conf);
  /* NCCL_CONF_FILE replaces ~/.nccl.conf, as in NCCL (src/misc/param.cc). */
  setenv("NCCL_CONF_FILE", conf, 1);
  braid_param_reload();
  ck_assert_int_eq(braid_param_int(BRAID_PARAM_BUFFSIZE), 131072);
  ck_assert_str_eq(braid_param_source(BRAID_PARAM_BUFFSIZE), conf);
  if (!system_conf_sets("NCCL_NET")) ck_assert_ptr_null(braid_param_str(BRAID_PARAM_NET));
  /* ... and the environment comes before both. */
  unsetenv("NCCL_CONF_FILE");
  setenv("NCCL_ALGO", "Tree", 1);
  braid_param_reload();
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_ALGO), "Tree");
  ck_assert_str_eq(braid_param_str(BRAID_PARAM_NET), "Socket");
}
END_TEST

START_TEST(test_conf_file_problems) {
  setenv("NCCL_CONF_FILE", "/nonexistent/braid/nccl.conf", 1);
  log_to_file("WARN", NULL);
  char* log = read_file(param_logpath);
  ck_assert_ptr_nonnull(strstr(log, "NCCL WARN NCCL_CONF_FILE /nonexistent/braid/nccl.conf could not be opened"));
  free(log);
  char conf[256];
  snprintf(conf, sizeof(conf), "%s", write_conf("conf", "NCCL_BUFFSIZE 12\nNCCL_PROTOO=LL\nOTHER_VAR=1\n"));
  setenv("NCCL_CONF_FILE", conf, 1);
  log_to_file("WARN", NULL);
  braid_param_int(BRAID_PARAM_BUFFSIZE);
  log = read_file(param_logpath);
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
  char* log = read_file(param_logpath);
  ck_assert_int_eq(count_of(log, "Unknown variable NCCL_PROTOO"), 1);
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

Suite* param_suite(void) {
  Suite* s = suite_create("param");
  TCase* tc = tcase_create("table");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_rows_well_formed);
  tcase_add_test(tc, test_bad_ids_and_types);
  tcase_add_loop_test(tc, test_nccl_names_known, 0, (int)(sizeof(name_files) / sizeof(name_files[0])));
  tcase_add_test(tc, test_bare_names_are_nccls);
  suite_add_tcase(s, tc);

  tc = tcase_create("sources");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, param_setup, param_teardown);
  tcase_add_test(tc, test_environment);
  tcase_add_test(tc, test_conf_file);
  tcase_add_test(tc, test_home_conf);
  tcase_add_test(tc, test_conf_file_problems);
  tcase_add_test(tc, test_conf_read_once);
  tcase_add_test(tc, test_malformed_blocks_lower_sources);
  suite_add_tcase(s, tc);
  return s;
}
