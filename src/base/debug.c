/*
 * debug.c - the logger of src/base/debug.h: NCCL's line format, levels and subsystems; the only
 * code in src/ that prints.
 *
 * Settings come from the parameter table (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE,
 * NCCL_DEBUG_TIMESTAMP_LEVELS, NCCL_DEBUG_TIMESTAMP_FORMAT) and are read by braid_debug_init(),
 * lazily on the first log call, and again whenever braid_debug_level is set back to -1
 * (ncclResetDebugInit). Line shapes, as NCCL prints them:
 *
 *   [timestamp]host:pid:tid [dev] NCCL INFO msg
 *   \n[timestamp]host:pid:tid [dev] file:line NCCL WARN msg
 *   [timestamp]host:pid:tid [dev] ms file:line NCCL TRACE msg
 *   msg                                     (level VERSION: the banner, bare)
 *
 * where the timestamp appears on the levels of NCCL_DEBUG_TIMESTAMP_LEVELS (default WARN).
 * Every line is built in one buffer and leaves in one write(2), under a lock, so lines of
 * threads never interleave and lines of processes sharing a file (opened O_APPEND) neither.
 *
 * WARN lines logged with subsystem BRAID_LOG_ALL (BRAID_WARN) are recorded as the text of
 * ncclGetLastError whether printed or not. A WARN logged with a single subsystem is advice
 * (param.c's unknown-variable warnings): printed like a WARN, never recorded. With
 * NCCL_WARN_ENABLE_DEBUG_INFO=1 a recorded WARN raises the level to INFO from then on.
 */
#include "base/debug.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "base/version.h"
#include "nccl.h"

#define DEBUG_MSG_MAX 2048                   /* longest message kept; longer ones are cut */
#define DEBUG_LINE_MAX (DEBUG_MSG_MAX + 512) /* message plus prefix */

int braid_debug_level = -1;
uint64_t braid_debug_mask = BRAID_LOG_INIT | BRAID_LOG_BOOTSTRAP | BRAID_LOG_ENV;

/* Serialises (re)initialisation. */
static pthread_mutex_t debug_init_lock = PTHREAD_MUTEX_INITIALIZER;
/* Guards the output settings below and serialises writes. */
static pthread_mutex_t debug_out_lock = PTHREAD_MUTEX_INITIALIZER;
static int debug_fd = -1;           /* NCCL_DEBUG_FILE, -1: stdout */
static unsigned debug_ts_levels;    /* bit (1 << level): lines of that level get a timestamp */
static char debug_ts_format[256];   /* NCCL_DEBUG_TIMESTAMP_FORMAT */
static char debug_host[256];        /* hostname up to the first '.' */
static struct timespec debug_start; /* TRACE times are ms since the first init */
static int debug_warn_to_info;      /* NCCL_WARN_ENABLE_DEBUG_INFO: the first WARN raises the level */

/* The last BRAID_WARN text (ncclGetLastError). */
static pthread_mutex_t debug_err_lock = PTHREAD_MUTEX_INITIALIZER;
static char debug_last_error[DEBUG_MSG_MAX];

static __thread int debug_dev = 0;
static __thread char debug_err_copy[DEBUG_MSG_MAX];

/* Subsystem i is bit i, so param.h's word list (built from the same X-list) gives the mask. */
enum {
#define BRAID_X(name, bit) debug_subsys_index_##name,
  BRAID_LOG_SUBSYS(BRAID_X)
#undef BRAID_X
};
#define BRAID_X(name, bit) _Static_assert((bit) == 1ull << debug_subsys_index_##name, #name " is not bit i");
BRAID_LOG_SUBSYS(BRAID_X)
#undef BRAID_X

static void read_hostname(char* buf, size_t len) {
  if (gethostname(buf, len) != 0) snprintf(buf, len, "unknown");
  buf[len - 1] = '\0';
  char* dot = strchr(buf, '.');
  if (dot) *dot = '\0';
}

/* NCCL_DEBUG_FILE with %h (host), %p (pid) and %% expanded. */
static void expand_file_name(const char* in, char* out, size_t len) {
  size_t o = 0;
  for (const char* p = in; *p && o + 1 < len; p++) {
    if (p[0] == '%' && p[1] == 'h') {
      o += (size_t)snprintf(out + o, len - o, "%s", debug_host), p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      o += (size_t)snprintf(out + o, len - o, "%d", (int)getpid()), p++;
    } else if (p[0] == '%' && p[1] == '%') {
      out[o++] = '%', p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o < len ? o : len - 1] = '\0';
}

/* ---- (re)initialisation ---- */

/* Set while this thread reads the settings: reading a parameter calls back here (param.c
 * configures the logger before its first report), and that nested call must return at once. */
static __thread int debug_initialising;

void braid_debug_init(void) {
  char file_error[1200] = "";
  if (debug_initialising) return;
  pthread_mutex_lock(&debug_init_lock);
  if (__atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) >= 0) {
    pthread_mutex_unlock(&debug_init_lock);
    return;
  }
  debug_initialising = 1;
  static int started;
  if (!started) clock_gettime(CLOCK_MONOTONIC, &debug_start), started = 1;

  int64_t lv = braid_param_int(BRAID_PARAM_DEBUG);
  int level = lv == BRAID_PARAM_UNSET ? BRAID_LOG_NONE : (int)lv;
  uint64_t mask = (uint64_t)braid_param_int(BRAID_PARAM_DEBUG_SUBSYS);
  unsigned ts_levels = (unsigned)braid_param_int(BRAID_PARAM_DEBUG_TIMESTAMP_LEVELS);
  debug_warn_to_info = braid_param_int(BRAID_PARAM_WARN_ENABLE_DEBUG_INFO) == 1;
  const char* ts_format = braid_param_str(BRAID_PARAM_DEBUG_TIMESTAMP_FORMAT);
  const char* file = braid_param_str(BRAID_PARAM_DEBUG_FILE);

  pthread_mutex_lock(&debug_out_lock);
  read_hostname(debug_host, sizeof(debug_host));
  debug_ts_levels = ts_levels;
  snprintf(debug_ts_format, sizeof(debug_ts_format), "%s", ts_format ? ts_format : "");
  if (debug_fd >= 0) close(debug_fd);
  debug_fd = -1;
  if (file && level > BRAID_LOG_NONE) {
    char path[4096];
    expand_file_name(file, path, sizeof(path));
    debug_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (debug_fd < 0)
      snprintf(file_error, sizeof(file_error), "NCCL_DEBUG_FILE %.1024s could not be opened (%s), logging to stdout",
               path, strerror(errno));
  }
  pthread_mutex_unlock(&debug_out_lock);

  __atomic_store_n(&braid_debug_mask, mask, __ATOMIC_RELEASE);
  __atomic_store_n(&braid_debug_level, level, __ATOMIC_RELEASE);
  debug_initialising = 0;
  pthread_mutex_unlock(&debug_init_lock);

  if (file_error[0]) braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_ENV, __FILE__, __LINE__, "%s", file_error);
  /* param.c prints its `set by` lines and advice at the first read after the level is known. */
  (void)braid_param_source(BRAID_PARAM_DEBUG);
}

/* ---- formatting and output ---- */

/* strftime of NCCL_DEBUG_TIMESTAMP_FORMAT, plus %Nf (N = 1..9): N digits of the second's
 * fraction, as NCCL allows. Returns the length written. */
static size_t format_timestamp(char* out, size_t len) {
  struct timespec now;
  struct tm tm;
  char fmt[512];
  size_t o = 0;
  clock_gettime(CLOCK_REALTIME, &now);
  localtime_r(&now.tv_sec, &tm);
  for (const char* p = debug_ts_format; *p && o + 12 < sizeof(fmt); p++) {
    if (p[0] == '%' && p[1] == '%') {
      fmt[o++] = '%', fmt[o++] = '%', p++;
    } else if (p[0] == '%' && p[1] >= '1' && p[1] <= '9' && p[2] == 'f') {
      int digits = p[1] - '0';
      long frac = now.tv_nsec;
      for (int d = digits; d < 9; d++) frac /= 10;
      o += (size_t)snprintf(fmt + o, sizeof(fmt) - o, "%0*ld", digits, frac);
      p += 2;
    } else {
      fmt[o++] = *p;
    }
  }
  fmt[o] = '\0';
  if (o == 0) return 0;
  return strftime(out, len, fmt, &tm);
}

static double ms_since_start(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - debug_start.tv_sec) * 1e3 + (double)(now.tv_nsec - debug_start.tv_nsec) / 1e6;
}

static void write_all(int fd, const char* buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    buf += n;
    len -= (size_t)n;
  }
}

/* Builds the whole line and writes it with one write(2). Called with debug_out_lock held. */
static void emit_line(int level, const char* file, int line, const char* msg) {
  char buf[DEBUG_LINE_MAX];
  size_t pos = 0;
  if (level == BRAID_LOG_VERSION) {
    pos = (size_t)snprintf(buf, sizeof(buf) - 1, "%s", msg);
  } else {
    if (level == BRAID_LOG_WARN) buf[pos++] = '\n';
    if (debug_ts_levels & (1u << level)) pos += format_timestamp(buf + pos, sizeof(buf) - 1 - pos);
    pos += (size_t)snprintf(buf + pos, sizeof(buf) - 1 - pos, "%s:%d:%d [%d] ", debug_host, (int)getpid(),
                            (int)syscall(SYS_gettid), debug_dev);
    if (pos < sizeof(buf) - 1) {
      if (level == BRAID_LOG_WARN)
        pos += (size_t)snprintf(buf + pos, sizeof(buf) - 1 - pos, "%s:%d NCCL WARN %s", file, line, msg);
      else if (level == BRAID_LOG_TRACE)
        pos += (size_t)snprintf(buf + pos, sizeof(buf) - 1 - pos, "%f %s:%d NCCL TRACE %s", ms_since_start(), file,
                                line, msg);
      else
        pos += (size_t)snprintf(buf + pos, sizeof(buf) - 1 - pos, "NCCL INFO %s", msg);
    }
  }
  if (pos > sizeof(buf) - 2) pos = sizeof(buf) - 2; /* cut: keep room for the newline */
  buf[pos++] = '\n';
  if (debug_fd >= 0) {
    write_all(debug_fd, buf, pos);
  } else {
    /* Keep order with what the program printed through stdio before this line. */
    flockfile(stdout);
    fflush(stdout);
    write_all(fileno(stdout), buf, pos);
    funlockfile(stdout);
  }
}

void braid_debug_log(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  braid_debug_vlog(level, subsys, file, line, fmt, ap);
  va_end(ap);
}

static __thread int debug_quiet;

void braid_debug_set_quiet(int quiet) {
  debug_quiet = quiet;
}

void braid_debug_vlog(int level, uint64_t subsys, const char* file, int line, const char* fmt, va_list ap) {
  if (debug_quiet && level == BRAID_LOG_WARN) level = BRAID_LOG_INFO; /* neither recorded nor a WARN */
  int cur = __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE);
  if (cur < 0) {
    braid_debug_init();
    cur = __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE);
  }
  int record = level == BRAID_LOG_WARN && subsys == (uint64_t)BRAID_LOG_ALL;
  /* INFO, ABORT and TRACE lines need one of their subsystems enabled; WARN and VERSION do not. */
  int print =
      cur >= level && (level <= BRAID_LOG_WARN || (__atomic_load_n(&braid_debug_mask, __ATOMIC_ACQUIRE) & subsys));
  if (!record && !print) return;

  char msg[DEBUG_MSG_MAX];
  vsnprintf(msg, sizeof(msg), fmt, ap);

  if (record) {
    pthread_mutex_lock(&debug_err_lock);
    memcpy(debug_last_error, msg, sizeof(msg));
    pthread_mutex_unlock(&debug_err_lock);
    /* NCCL_WARN_ENABLE_DEBUG_INFO: what follows an error is logged at INFO, as NCCL does. */
    if (debug_warn_to_info && cur < BRAID_LOG_INFO)
      __atomic_store_n(&braid_debug_level, BRAID_LOG_INFO, __ATOMIC_RELEASE);
  }
  if (!print) return;
  pthread_mutex_lock(&debug_out_lock);
  emit_line(level, file, line, msg);
  pthread_mutex_unlock(&debug_out_lock);
}

void braid_debug_write_stdout(const char* text, size_t len) {
  pthread_mutex_lock(&debug_out_lock);
  flockfile(stdout);
  fflush(stdout);
  write_all(fileno(stdout), text, len);
  funlockfile(stdout);
  pthread_mutex_unlock(&debug_out_lock);
}

const char* braid_debug_last_error(void) {
  pthread_mutex_lock(&debug_err_lock);
  memcpy(debug_err_copy, debug_last_error, sizeof(debug_err_copy));
  pthread_mutex_unlock(&debug_err_lock);
  return debug_err_copy;
}

void braid_debug_set_device(int dev) {
  debug_dev = dev;
}

void braid_debug_banner(void) {
  static int done;
  if (__atomic_exchange_n(&done, 1, __ATOMIC_ACQ_REL)) return;
  int cur = __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE);
  if (cur < 0) {
    braid_debug_init();
    cur = __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE);
  }
  if (cur != BRAID_LOG_VERSION && cur < BRAID_LOG_INFO) return;
  /* Starts with `NCCL version 2.28.9` so tools that grep for NCCL's banner still find it. */
  braid_debug_log(cur == BRAID_LOG_VERSION ? BRAID_LOG_VERSION : BRAID_LOG_INFO, BRAID_LOG_ALL, __FILE__, __LINE__,
                  "NCCL version %d.%d.%d%s+braid.%s (braid %s, a from-scratch implementation of the NCCL %d.%d API; "
                  "CUDA %s)",
                  NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, braid_version_string(), braid_version_string(),
                  NCCL_MAJOR, NCCL_MINOR, braid_version_cuda_built() ? "built" : "not built");
}
