/*
 * test_debug.c - the logger (src/base/debug.c) and the version/error entry points (src/base/errors.c):
 * NCCL_DEBUG levels, NCCL_DEBUG_SUBSYS parsing (with ^), the exact INFO/WARN/TRACE line shapes,
 * timestamps, NCCL_DEBUG_FILE %h/%p/%% expansion, stdout ordering, lines of concurrent threads
 * and processes, the last-error text, the banner, ncclGetErrorString and ncclGetVersion.
 *
 * Output is captured through NCCL_DEBUG_FILE in a fresh temporary directory; each test starts
 * without NCCL_* / BRAID_* variables.
 */
#include <check.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/debug.h"
#include "base/param.h"
#include "base/version.h"
#include "nccl.h"
#include "transport/registry.h"

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
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/braid-test-debug-XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
  setenv("HOME", tmpdir, 1);
  snprintf(logpath, sizeof(logpath), "%s/log", tmpdir);
  braid_debug_set_device(0);
  ncclResetDebugInit();
}

static int rm_entry(const char* path, const struct stat* sb, int flag, struct FTW* ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void teardown(void) {
  clear_braid_env();
  ncclResetDebugInit();
  nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Logs at `level` (subsystems `subsys`, NULL: default) into logpath. */
static void log_to_file(const char* level, const char* subsys) {
  if (level)
    setenv("NCCL_DEBUG", level, 1);
  else
    unsetenv("NCCL_DEBUG");
  if (subsys) setenv("NCCL_DEBUG_SUBSYS", subsys, 1);
  setenv("NCCL_DEBUG_FILE", logpath, 1);
  ncclResetDebugInit();
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return strdup("");
  char* buf = calloc(1, 1 << 22);
  size_t n = fread(buf, 1, (1 << 22) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static int count_of(const char* text, const char* needle) {
  int n = 0;
  for (const char* p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Copies the whole line of `text` that contains `needle` (without its newline); 0 if none. */
static int line_with(const char* text, const char* needle, char* out, size_t len) {
  const char* hit = strstr(text, needle);
  if (hit == NULL) return 0;
  const char* start = hit;
  while (start > text && start[-1] != '\n') start--;
  const char* end = strchr(hit, '\n');
  if (end == NULL) end = hit + strlen(hit);
  snprintf(out, len, "%.*s", (int)(end - start), start);
  return 1;
}

/* "host:pid:tid [dev] " as the logger writes it for the calling thread. */
static void expected_prefix(char* out, size_t len, int dev) {
  char host[256];
  gethostname(host, sizeof(host));
  host[sizeof(host) - 1] = '\0';
  char* dot = strchr(host, '.');
  if (dot) *dot = '\0';
  snprintf(out, len, "%s:%d:%d [%d] ", host, (int)getpid(), (int)syscall(SYS_gettid), dev);
}

static int matches(const char* text, const char* pattern) {
  regex_t re;
  ck_assert_int_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
  int ok = regexec(&re, text, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

/* ---- settings ---- */

struct level_case {
  const char* text;
  int level;
};
static const struct level_case level_cases[] = {
    {NULL, BRAID_LOG_NONE},     {"VERSION", BRAID_LOG_VERSION}, {"warn", BRAID_LOG_WARN},  {"Info", BRAID_LOG_INFO},
    {"ABORT", BRAID_LOG_ABORT}, {"trace", BRAID_LOG_TRACE},     {"bogus", BRAID_LOG_NONE}, {"", BRAID_LOG_NONE},
};

START_TEST(test_levels) {
  const struct level_case* c = &level_cases[_i];
  if (c->text)
    setenv("NCCL_DEBUG", c->text, 1);
  else
    unsetenv("NCCL_DEBUG");
  ncclResetDebugInit();
  ck_assert_int_eq(braid_debug_level, c->level);
}
END_TEST

struct subsys_case {
  const char* text;
  uint64_t mask;
};
static const struct subsys_case subsys_cases[] = {
    {NULL, BRAID_LOG_INIT | BRAID_LOG_BOOTSTRAP | BRAID_LOG_ENV},
    {"COLL,net", BRAID_LOG_COLL | BRAID_LOG_NET},
    {" graph , Tuning ,", BRAID_LOG_GRAPH | BRAID_LOG_TUNING},
    {"^INIT", ~(uint64_t)BRAID_LOG_INIT},
    {"^COLL,P2P", ~(uint64_t)(BRAID_LOG_COLL | BRAID_LOG_P2P)},
    {"ALL", ~(uint64_t)0},
    {"^ALL", 0},
    {"INIT,SHM,ALLOC,CALL,PROXY,NVLS,REG,PROFILE,RAS", BRAID_LOG_INIT | BRAID_LOG_SHM | BRAID_LOG_ALLOC |
                                                           BRAID_LOG_CALL | BRAID_LOG_PROXY | BRAID_LOG_NVLS |
                                                           BRAID_LOG_REG | BRAID_LOG_PROFILE | BRAID_LOG_RAS},
    {"INIT,BOGUS,ENV", BRAID_LOG_INIT | BRAID_LOG_ENV},
};

START_TEST(test_subsys) {
  const struct subsys_case* c = &subsys_cases[_i];
  if (c->text) setenv("NCCL_DEBUG_SUBSYS", c->text, 1);
  log_to_file("WARN", NULL);
  ck_assert_msg(braid_debug_mask == c->mask, "%s: mask 0x%llx, want 0x%llx", c->text ? c->text : "(unset)",
                (unsigned long long)braid_debug_mask, (unsigned long long)c->mask);
  char* log = read_file(logpath);
  if (c->text && strstr(c->text, "BOGUS"))
    ck_assert_ptr_nonnull(strstr(log, "NCCL WARN Unknown NCCL_DEBUG_SUBSYS entries ignored: BOGUS\n"));
  else
    ck_assert_ptr_null(strstr(log, "NCCL_DEBUG_SUBSYS"));
  free(log);
}
END_TEST

START_TEST(test_reset_rereads) {
  setenv("NCCL_DEBUG", "WARN", 1);
  ncclResetDebugInit();
  ck_assert_int_eq(braid_debug_level, BRAID_LOG_WARN);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "COLL", 1);
  ncclResetDebugInit();
  ck_assert_int_eq(braid_debug_level, BRAID_LOG_INFO);
  ck_assert(braid_debug_mask == BRAID_LOG_COLL);
  pncclResetDebugInit(); /* the profiling name is the same function */
  ck_assert_int_eq(braid_debug_level, BRAID_LOG_INFO);
}
END_TEST

/* ---- line shapes ---- */

START_TEST(test_info_line) {
  log_to_file("INFO", NULL);
  BRAID_INFO(BRAID_LOG_INIT, "hello %d", 42);
  char* log = read_file(logpath);
  char want[512], got[1024];
  expected_prefix(want, sizeof(want), 0);
  strcat(want, "NCCL INFO hello 42");
  ck_assert_msg(line_with(log, "hello 42", got, sizeof(got)), "no line in:\n%s", log);
  ck_assert_str_eq(got, want);
  ck_assert_int_eq(count_of(log, "hello 42\n"), 1);
  free(log);
}
END_TEST

START_TEST(test_warn_line) {
  log_to_file("WARN", NULL);
  int line = __LINE__ + 1;
  BRAID_WARN("boom %d", 7);
  char* log = read_file(logpath);
  char rest[512], got[1024];
  expected_prefix(rest, sizeof(rest), 0);
  snprintf(rest + strlen(rest), sizeof(rest) - strlen(rest), "%s:%d NCCL WARN boom 7", __FILE__, line);
  ck_assert_msg(line_with(log, "boom 7", got, sizeof(got)), "no line in:\n%s", log);
  /* Default NCCL_DEBUG_TIMESTAMP_LEVELS=WARN with format "[%F %T] ". */
  ck_assert_msg(matches(got, "^\\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\] "), "got '%s'", got);
  ck_assert_str_eq(got + strlen("[2025-01-01 00:00:00] "), rest);
  /* Preceded by an empty line. */
  const char* at = strstr(log, got);
  ck_assert(at > log && at[-1] == '\n' && (at - 1 == log || at[-2] == '\n'));
  free(log);
}
END_TEST

START_TEST(test_timestamp_levels) {
  setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "INFO", 1);
  setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "<%Y|%3f> ", 1);
  log_to_file("INFO", NULL);
  int line = __LINE__ + 1;
  BRAID_WARN("no stamp");
  BRAID_INFO(BRAID_LOG_INIT, "stamped");
  char* log = read_file(logpath);
  char want[512], got[1024];
  expected_prefix(want, sizeof(want), 0);
  snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s:%d NCCL WARN no stamp", __FILE__, line);
  ck_assert(line_with(log, "no stamp", got, sizeof(got)));
  ck_assert_str_eq(got, want);
  ck_assert(line_with(log, "stamped", got, sizeof(got)));
  ck_assert_msg(matches(got, "^<[0-9]{4}\\|[0-9]{3}> [^ ]+:[0-9]+:[0-9]+ \\[0\\] NCCL INFO stamped$"), "got '%s'", got);
  free(log);
  /* ALL stamps every level; ^WARN stamps all but WARN. */
  setenv("NCCL_DEBUG_TIMESTAMP_LEVELS", "^WARN", 1);
  setenv("NCCL_DEBUG_TIMESTAMP_FORMAT", "T ", 1);
  log_to_file("INFO", NULL);
  BRAID_WARN("w2");
  BRAID_INFO(BRAID_LOG_INIT, "i2");
  log = read_file(logpath);
  ck_assert(line_with(log, "w2", got, sizeof(got)));
  ck_assert_msg(got[0] != 'T', "got '%s'", got);
  ck_assert(line_with(log, "i2", got, sizeof(got)));
  ck_assert_msg(strncmp(got, "T ", 2) == 0, "got '%s'", got);
  free(log);
}
END_TEST

START_TEST(test_trace_line) {
  log_to_file("TRACE", "ALL");
  int line = __LINE__ + 1;
  BRAID_TRACE(BRAID_LOG_COLL, "t %s", "one");
  char* log = read_file(logpath);
  char prefix[256], got[1024], tail[256];
  expected_prefix(prefix, sizeof(prefix), 0);
  snprintf(tail, sizeof(tail), " %s:%d NCCL TRACE t one", __FILE__, line);
  ck_assert(line_with(log, "t one", got, sizeof(got)));
  ck_assert_msg(strncmp(got, prefix, strlen(prefix)) == 0, "got '%s'", got);
  ck_assert_msg(matches(got + strlen(prefix), "^[0-9]+\\.[0-9]{6} "), "got '%s'", got);
  ck_assert_str_eq(got + strlen(got) - strlen(tail), tail);
  free(log);
}
END_TEST

START_TEST(test_filtering) {
  log_to_file("INFO", NULL); /* INIT,BOOTSTRAP,ENV */
  BRAID_INFO(BRAID_LOG_COLL, "coll only");
  BRAID_INFO(BRAID_LOG_INIT, "init line");
  BRAID_INFO(BRAID_LOG_COLL | BRAID_LOG_ENV, "coll or env");
  BRAID_TRACE(BRAID_LOG_INIT, "trace line");
  char* log = read_file(logpath);
  ck_assert_ptr_null(strstr(log, "coll only"));
  ck_assert_ptr_nonnull(strstr(log, "init line"));
  ck_assert_ptr_nonnull(strstr(log, "coll or env"));
  ck_assert_ptr_null(strstr(log, "trace line"));
  free(log);

  log_to_file("WARN", "ALL");
  BRAID_INFO(BRAID_LOG_INIT, "info at warn");
  BRAID_WARN("warn at warn");
  log = read_file(logpath);
  ck_assert_ptr_null(strstr(log, "info at warn"));
  ck_assert_ptr_nonnull(strstr(log, "NCCL WARN warn at warn"));
  free(log);

  /* ABORT sits between INFO and TRACE: INFO lines print, TRACE lines do not. */
  log_to_file("ABORT", "ALL");
  BRAID_INFO(BRAID_LOG_NET, "info at abort");
  BRAID_TRACE(BRAID_LOG_NET, "trace at abort");
  log = read_file(logpath);
  ck_assert_ptr_nonnull(strstr(log, "info at abort"));
  ck_assert_ptr_null(strstr(log, "trace at abort"));
  free(log);

  /* Logging off: nothing is written (the file is not even created), the WARN is recorded. */
  unlink(logpath);
  log_to_file(NULL, NULL);
  BRAID_WARN("silent %s", "warn");
  ck_assert_int_ne(access(logpath, F_OK), 0);
  ck_assert_str_eq(ncclGetLastError(NULL), "silent warn");
}
END_TEST

static void* log_from_thread(void* arg) {
  (void)arg;
  BRAID_INFO(BRAID_LOG_INIT, "from another thread");
  return NULL;
}

START_TEST(test_device_field) {
  log_to_file("INFO", NULL);
  braid_debug_set_device(3);
  BRAID_INFO(BRAID_LOG_INIT, "on device three");
  pthread_t t;
  pthread_create(&t, NULL, log_from_thread, NULL);
  pthread_join(t, NULL);
  braid_debug_set_device(-1);
  BRAID_INFO(BRAID_LOG_INIT, "on the host");
  char* log = read_file(logpath);
  char got[1024];
  ck_assert(line_with(log, "on device three", got, sizeof(got)));
  ck_assert_ptr_nonnull(strstr(got, " [3] NCCL INFO on device three"));
  ck_assert(line_with(log, "from another thread", got, sizeof(got)));
  ck_assert_ptr_nonnull(strstr(got, " [0] NCCL INFO from another thread"));
  ck_assert(line_with(log, "on the host", got, sizeof(got)));
  ck_assert_ptr_nonnull(strstr(got, " [-1] NCCL INFO on the host"));
  free(log);
}
END_TEST

START_TEST(test_file_name_expansion) {
  char pattern[256], path[512], host[256];
  snprintf(pattern, sizeof(pattern), "%s/log.%%h.%%p.%%%%.%%x", tmpdir);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", pattern, 1);
  ncclResetDebugInit();
  BRAID_INFO(BRAID_LOG_INIT, "expanded");
  gethostname(host, sizeof(host));
  host[sizeof(host) - 1] = '\0';
  if (strchr(host, '.')) *strchr(host, '.') = '\0';
  snprintf(path, sizeof(path), "%s/log.%s.%d.%%.%%x", tmpdir, host, (int)getpid());
  char* log = read_file(path);
  ck_assert_msg(strstr(log, "NCCL INFO expanded\n") != NULL, "nothing in %s", path);
  free(log);
}
END_TEST

START_TEST(test_unopenable_file_falls_back_to_stdout) {
  char out[256];
  snprintf(out, sizeof(out), "%s/stdout", tmpdir);
  fflush(stdout);
  int saved = dup(1);
  int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ck_assert_int_ge(fd, 0);
  dup2(fd, 1);
  close(fd);
  setvbuf(stdout, NULL, _IOFBF, 4096);
  printf("program output first\n"); /* still in stdio's buffer */
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_FILE", "/nonexistent/braid/dir/log", 1);
  ncclResetDebugInit();
  BRAID_INFO(BRAID_LOG_INIT, "to stdout");
  fflush(stdout);
  dup2(saved, 1);
  close(saved);
  char* text = read_file(out);
  const char* first = strstr(text, "program output first\n");
  const char* warn = strstr(text, "NCCL WARN NCCL_DEBUG_FILE /nonexistent/braid/dir/log could not be opened");
  const char* info = strstr(text, "NCCL INFO to stdout\n");
  ck_assert_msg(first && warn && info, "stdout was:\n%s", text);
  ck_assert(first < warn && warn < info); /* the program's buffered output stays first */
  free(text);
}
END_TEST

START_TEST(test_long_message_cut) {
  log_to_file("INFO", NULL);
  char* big = malloc(10001);
  memset(big, 'x', 10000);
  big[10000] = '\0';
  BRAID_INFO(BRAID_LOG_INIT, "%s", big);
  BRAID_WARN("%s", big);
  BRAID_INFO(BRAID_LOG_INIT, "after");
  char* log = read_file(logpath);
  ck_assert_ptr_nonnull(strstr(log, "NCCL INFO after\n"));
  ck_assert_int_eq(count_of(log, "NCCL INFO xxxx"), 1);
  ck_assert_int_eq(count_of(log, "NCCL WARN xxxx"), 1);
  ck_assert_int_lt(strlen(ncclGetLastError(NULL)), 10000);
  ck_assert_int_gt(strlen(ncclGetLastError(NULL)), 1000);
  free(log);
  free(big);
}
END_TEST

/* ---- concurrency ---- */

#define LINES_PER_WRITER 250
static const char pad[] =
    "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"
    "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz";

static void* writer(void* arg) {
  int id = (int)(long)arg;
  for (int i = 0; i < LINES_PER_WRITER; i++) BRAID_INFO(BRAID_LOG_INIT, "writer %d line %d %s", id, i, pad);
  return NULL;
}

/* Every `writer` line is whole: "host:pid:tid [0] NCCL INFO writer W line I <pad>". */
static int check_writer_lines(const char* log, int writers) {
  int seen = 0;
  for (const char* p = log; *p;) {
    const char* end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof(line), "%.*s", (int)len, p);
    if (strstr(line, "writer")) {
      char host[256], padded[512];
      int pid, tid, w, i;
      ck_assert_msg(
          sscanf(line, "%255[^:]:%d:%d [0] NCCL INFO writer %d line %d %511s", host, &pid, &tid, &w, &i, padded) == 6,
          "torn line '%s'", line);
      ck_assert_str_eq(padded, pad);
      ck_assert(w >= 0 && w < writers && i >= 0 && i < LINES_PER_WRITER);
      seen++;
    }
    p += len + (end != NULL);
  }
  return seen;
}

START_TEST(test_threads_do_not_interleave) {
  log_to_file("INFO", NULL);
  pthread_t threads[4];
  for (long t = 0; t < 4; t++) pthread_create(&threads[t], NULL, writer, (void*)t);
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  char* log = read_file(logpath);
  ck_assert_int_eq(check_writer_lines(log, 4), 4 * LINES_PER_WRITER);
  free(log);
}
END_TEST

START_TEST(test_processes_do_not_interleave) {
  log_to_file("INFO", NULL);
  BRAID_INFO(BRAID_LOG_INIT, "opened"); /* both processes share the open file */
  pid_t child = fork();
  ck_assert_int_ge(child, 0);
  if (child == 0) {
    writer((void*)1);
    _exit(0);
  }
  writer((void*)0);
  int status;
  waitpid(child, &status, 0);
  ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  char* log = read_file(logpath);
  ck_assert_int_eq(check_writer_lines(log, 2), 2 * LINES_PER_WRITER);
  free(log);
}
END_TEST

static void* warner(void* arg) {
  int id = (int)(long)arg;
  for (int i = 0; i < 500; i++) BRAID_WARN("warner %d message %d %s", id, i, pad);
  return NULL;
}

START_TEST(test_last_error_threads) {
  pthread_t threads[4];
  for (long t = 0; t < 4; t++) pthread_create(&threads[t], NULL, warner, (void*)t);
  for (int k = 0; k < 2000; k++) {
    const char* e = ncclGetLastError(NULL);
    if (e[0] == '\0') continue;
    char padded[512];
    int w, i;
    ck_assert_msg(sscanf(e, "warner %d message %d %511s", &w, &i, padded) == 3, "torn '%s'", e);
    ck_assert_str_eq(padded, pad);
  }
  for (int t = 0; t < 4; t++) pthread_join(threads[t], NULL);
  ck_assert_int_eq(strncmp(ncclGetLastError(NULL), "warner ", 7), 0);
}
END_TEST

/* ---- last error, banner, version and error strings ---- */

START_TEST(test_last_error) {
  ck_assert_str_eq(ncclGetLastError(NULL), ""); /* each test runs in a fresh process (CK_FORK) */
  BRAID_WARN("boom %d", 7);
  ck_assert_str_eq(ncclGetLastError(NULL), "boom 7");
  ck_assert_str_eq(pncclGetLastError((ncclComm_t)0x1234), "boom 7"); /* comm is not consulted */
  /* Advice (a WARN with one subsystem) is printed but not recorded; INFO is never recorded. */
  braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_ENV, __FILE__, __LINE__, "advice");
  BRAID_INFO(BRAID_LOG_ALL, "info");
  ck_assert_str_eq(braid_debug_last_error(), "boom 7");
}
END_TEST

/* The banner prints once: bare at VERSION, as an INFO line (whatever the subsystems) at INFO
 * and above, not at all at WARN. Loop index: 0 VERSION, 1 INFO, 2 WARN. */
START_TEST(test_banner) {
  static const char* const levels[] = {"VERSION", "INFO", "WARN"};
  log_to_file(levels[_i], "COLL");
  braid_debug_banner();
  braid_debug_banner();
  BRAID_WARN("only printed at WARN and above");
  char* log = read_file(logpath);
  char text[512], want[1024], got[1024];
  snprintf(text, sizeof(text),
           "NCCL version 2.30.7+braid.%s (braid %s, a from-scratch implementation of the NCCL 2.30 API; CUDA %s)",
           BRAID_VERSION_STRING, BRAID_VERSION_STRING, braid_version_cuda_built() ? "built" : "not built");
  if (_i == 0) {
    snprintf(want, sizeof(want), "%s\n", text);
    ck_assert_str_eq(log, want);
  } else if (_i == 1) {
    expected_prefix(want, sizeof(want), 0);
    snprintf(want + strlen(want), sizeof(want) - strlen(want), "NCCL INFO %s", text);
    ck_assert(line_with(log, "NCCL version", got, sizeof(got)));
    ck_assert_str_eq(got, want);
    ck_assert_int_eq(count_of(log, "NCCL version 2.30.7"), 1);
  } else {
    ck_assert_ptr_null(strstr(log, "NCCL version"));
  }
  free(log);
}
END_TEST

struct error_case {
  int code;
  const char* text;
};
static const struct error_case error_cases[] = {
    {ncclSuccess, "no error"},
    {ncclUnhandledCudaError, "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"},
    {ncclSystemError, "unhandled system error (run with NCCL_DEBUG=INFO for details)"},
    {ncclInternalError, "internal error - please report this issue to the NCCL developers"},
    {ncclInvalidArgument, "invalid argument (run with NCCL_DEBUG=WARN for details)"},
    {ncclInvalidUsage, "invalid usage (run with NCCL_DEBUG=WARN for details)"},
    {ncclRemoteError, "remote process exited or there was a network error"},
    {ncclInProgress, "NCCL operation in progress"},
    {ncclTimeout, "timeout"},
    {ncclNumResults, "unknown result code"},
    {10, "unknown result code"},
    {-1, "unknown result code"},
    {0x7fffffff, "unknown result code"},
};

START_TEST(test_error_strings) {
  const struct error_case* c = &error_cases[_i];
  ck_assert_str_eq(ncclGetErrorString((ncclResult_t)c->code), c->text);
  ck_assert_str_eq(pncclGetErrorString((ncclResult_t)c->code), c->text);
}
END_TEST

START_TEST(test_get_version) {
  int v = 0;
  ck_assert_int_eq(ncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, 23007);
  ck_assert_int_eq(v, NCCL_VERSION_CODE);
  ck_assert_int_eq(v, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  v = 0;
  ck_assert_int_eq(pncclGetVersion(&v), ncclSuccess);
  ck_assert_int_eq(v, 23007);
  ck_assert_int_eq(ncclGetVersion(NULL), ncclInvalidArgument);
  ck_assert_str_eq(ncclGetLastError(NULL), "ncclGetVersion: invalid argument version = NULL");
}
END_TEST

START_TEST(test_build_options) {
  ck_assert_str_eq(braid_version_string(), BRAID_VERSION_STRING);
  const char* opts = braid_build_options();
  ck_assert_ptr_nonnull(strstr(opts, braid_version_cuda_built() ? "CUDA kernels built" : "CUDA kernels not built"));
  int n = 0;
  const char* const* transports = braid_version_transports(&n);
  ck_assert_int_gt(n, 0);
  for (int i = 0; i < n; i++) ck_assert_ptr_nonnull(strstr(opts, transports[i]));
}
END_TEST

static TCase* new_tcase(Suite* s, const char* name) {
  TCase* tc = tcase_create(name);
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  suite_add_tcase(s, tc);
  return tc;
}

Suite* debug_suite(void) {
  Suite* s = suite_create("debug");
  TCase* tc = new_tcase(s, "settings");
  tcase_add_loop_test(tc, test_levels, 0, (int)(sizeof(level_cases) / sizeof(level_cases[0])));
  tcase_add_loop_test(tc, test_subsys, 0, (int)(sizeof(subsys_cases) / sizeof(subsys_cases[0])));
  tcase_add_test(tc, test_reset_rereads);

  tc = new_tcase(s, "lines");
  tcase_add_test(tc, test_info_line);
  tcase_add_test(tc, test_warn_line);
  tcase_add_test(tc, test_timestamp_levels);
  tcase_add_test(tc, test_trace_line);
  tcase_add_test(tc, test_filtering);
  tcase_add_test(tc, test_device_field);
  tcase_add_test(tc, test_file_name_expansion);
  tcase_add_test(tc, test_unopenable_file_falls_back_to_stdout);
  tcase_add_test(tc, test_long_message_cut);

  tc = new_tcase(s, "concurrency");
  tcase_add_test(tc, test_threads_do_not_interleave);
  tcase_add_test(tc, test_processes_do_not_interleave);
  tcase_add_test(tc, test_last_error_threads);

  tc = new_tcase(s, "api");
  tcase_add_test(tc, test_last_error);
  tcase_add_loop_test(tc, test_banner, 0, 3);
  tcase_add_loop_test(tc, test_error_strings, 0, (int)(sizeof(error_cases) / sizeof(error_cases[0])));
  tcase_add_test(tc, test_get_version);
  tcase_add_test(tc, test_build_options);
  return s;
}
