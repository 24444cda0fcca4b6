/*
 * debug.h - logging in NCCL's format (docs/CONVENTIONS.md 5, 6).
 *
 * Lines look like NCCL's: `host:pid:tid [dev] NCCL INFO msg`. The level and subsystem mask come
 * from NCCL_DEBUG / NCCL_DEBUG_SUBSYS and are tested before any formatting, so a disabled
 * INFO costs one load and one branch. BRAID_WARN also records the message for
 * ncclGetLastError. No other file in src/ prints.
 */
#ifndef BRAID_DEBUG_H
#define BRAID_DEBUG_H

#include <stdarg.h>
#include <stdint.h>

#include "nccl.h"

/* Levels, NCCL's names and numbers (NCCL_DEBUG, NCCL_DEBUG_TIMESTAMP_LEVELS). */
#define BRAID_LOG_LEVELS(X) \
  X(NONE, 0)                \
  X(VERSION, 1)             \
  X(WARN, 2)                \
  X(INFO, 3)                \
  X(ABORT, 4)               \
  X(TRACE, 5)

enum braid_log_level {
#define BRAID_X(name, value) BRAID_LOG_##name = value,
  BRAID_LOG_LEVELS(BRAID_X)
#undef BRAID_X
};

/* Subsystems, one bit each, bit i for the i-th, in NCCL's order and names (NCCL_DEBUG_SUBSYS;
 * param.h builds the row's word list from this list). */
#define BRAID_LOG_SUBSYS(X) \
  X(INIT, 0x1)              \
  X(COLL, 0x2)              \
  X(P2P, 0x4)               \
  X(SHM, 0x8)               \
  X(NET, 0x10)              \
  X(GRAPH, 0x20)            \
  X(TUNING, 0x40)           \
  X(ENV, 0x80)              \
  X(ALLOC, 0x100)           \
  X(CALL, 0x200)            \
  X(PROXY, 0x400)           \
  X(NVLS, 0x800)            \
  X(BOOTSTRAP, 0x1000)      \
  X(REG, 0x2000)            \
  X(PROFILE, 0x4000)        \
  X(RAS, 0x8000)            \
  X(DESTROY, 0x10000)       \
  X(ALLOC_HOST, 0x20000)

enum braid_log_subsys {
#define BRAID_X(name, bit) BRAID_LOG_##name = bit,
  BRAID_LOG_SUBSYS(BRAID_X)
#undef BRAID_X
      BRAID_LOG_ALL = ~0
};

/* Current settings; read (once) by braid_debug_init. */
extern int braid_debug_level;
extern uint64_t braid_debug_mask;

void braid_debug_init(void);
void braid_debug_log(int level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void braid_debug_vlog(int level, uint64_t subsys, const char* file, int line, const char* fmt, va_list ap);
/* Writes `text` to stdout as is, ordered with the log lines (ncclParamDumpAll prints there). */
void braid_debug_write_stdout(const char* text, size_t len);
/* The text of the last WARN of this process (ncclGetLastError). */
const char* braid_debug_last_error(void);
/* On this thread, until called with 0: WARNs are INFO lines, not recorded (best-effort work
 * after an error was decided, such as telling peers about it, must not replace its text). */
void braid_debug_set_quiet(int quiet);
/* The CUDA device shown in the `[dev]` field of this thread's log lines (-1: host). */
void braid_debug_set_device(int dev);
/* Prints the version banner once per process (rank 0, or any rank when level >= INFO). */
void braid_debug_banner(void);

#define BRAID_LOG_ENABLED(level, subsys)                                     \
  (__builtin_expect(braid_debug_level < 0, 0) ? (braid_debug_init(), 0) : 0, \
   braid_debug_level >= (level) && (braid_debug_mask & (uint64_t)(subsys)))

/* WARN is always recorded for ncclGetLastError, printed when NCCL_DEBUG >= WARN. */
#define BRAID_WARN(...) braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_INFO(subsys, ...)                                                   \
  do {                                                                            \
    if (BRAID_LOG_ENABLED(BRAID_LOG_INFO, subsys))                                \
      braid_debug_log(BRAID_LOG_INFO, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define BRAID_TRACE(subsys, ...)                                                   \
  do {                                                                             \
    if (BRAID_LOG_ENABLED(BRAID_LOG_TRACE, subsys))                                \
      braid_debug_log(BRAID_LOG_TRACE, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif /* BRAID_DEBUG_H */
