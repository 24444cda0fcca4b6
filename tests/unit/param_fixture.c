/*
 * param_fixture.c - the shared fixture of the parameter suites (param_fixture.h).
 */
#include "param_fixture.h"

#include <check.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl.h"

extern char** environ;

char param_tmpdir[64];
char param_logpath[128];

void param_clear_env(void) {
  char* names[512];
  int n = 0;
  for (char** e = environ; *e && n < 512; e++) {
    if (strncmp(*e, "NCCL_", 5) != 0 && strncmp(*e, "BRAID_", 6) != 0) continue;
    const char* eq = strchr(*e, '=');
    if (eq) names[n++] = strndup(*e, (size_t)(eq - *e));
  }
  for (int i = 0; i < n; i++) unsetenv(names[i]), free(names[i]);
}

void param_setup(void) {
  param_clear_env();
  snprintf(param_tmpdir, sizeof(param_tmpdir), "/tmp/braid-test-param-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(param_tmpdir));
  setenv("HOME", param_tmpdir, 1);
  snprintf(param_logpath, sizeof(param_logpath), "%s/log", param_tmpdir);
  ncclResetDebugInit();
}

static int rm_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

void param_teardown(void) {
  param_clear_env();
  ncclResetDebugInit(); /* closes the log file */
  nftw(param_tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

void log_to_file(const char* level, const char* subsys) {
  setenv("NCCL_DEBUG", level, 1);
  if (subsys) setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", param_logpath, 1);
  ncclResetDebugInit();
}

char* read_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return strdup("");
  char* buf = calloc(1, 1 << 20);
  size_t n = fread(buf, 1, (1 << 20) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

int count_of(const char* text, const char* needle) {
  int n = 0;
  for (const char* p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

char* write_conf(const char* name, const char* body) {
  static char path[256];
  snprintf(path, sizeof(path), "%s/%s", param_tmpdir, name);
  FILE* f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(body, f);
  fclose(f);
  return path;
}

int system_conf_sets(const char* name) {
  char* text = read_file("/etc/nccl.conf");
  int found = strstr(text, name) != NULL;
  free(text);
  return found;
}

FILE* open_data(const char* name) {
  const char* dirs[] = {"tests/param", "../tests/param", "../../tests/param", "../../../tests/param"};
  char path[256];
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", dirs[i], name);
    FILE* f = fopen(path, "r");
    if (f != NULL) return f;
  }
  return NULL;
}
