/*
 * param.c - the parameter table of src/base/param.h: its values, when they are read, and the
 * advice printed about them (docs/CONVENTIONS.md 7). With param_load.c, the only code in src/ that reads
 * the environment.
 *
 * A value comes from the first place that sets it: the env plugin (NCCL_ENV_PLUGIN,
 * param_env_plugin.c), the environment, then the file named by NCCL_CONF_FILE or else
 * ~/.nccl.conf, then /etc/nccl.conf (NCCL's order: NCCL_CONF_FILE replaces ~/.nccl.conf).
 * Typed rows are parsed by param_parse.c; a value that does not fit is reported and the
 * default is used (lower sources do not apply).
 *
 * When values are read, as NCCL reads them:
 *   - LIVE rows are loaded once per process. A forked child loads again at its first read
 *     (pthread_atfork marks the table stale), so a launcher that called NCCL before forking
 *     ranks still sees each rank's own settings.
 *   - PER_USE rows (those NCCL reads with ncclGetEnv at each use), and the rows NCCL_NO_CACHE
 *     names, are looked up again at every read: when the env plugin's or the environment's
 *     text differs from the table's, they are loaded again (the other rows keep their values).
 *
 * One load builds a `struct param_state`, published through an atomic pointer. An old state is
 * retired, never freed, so strings handed out before a reload stay valid (a few KB per load;
 * loads happen at start, after a fork, when a PER_USE value changes, and in tests).
 *
 * Loading logs nothing: the logger reads its own settings from this table, so printing from
 * here while it initialises would recurse. Instead each state keeps a list of messages (the
 * `set by` lines, unknown-variable and malformed-value advice) that the first accessor call
 * after the logger is configured prints. A message already printed since the last
 * braid_param_reload() is not printed again (a reload after a fork or a changed PER_USE value
 * says only what is new). The advice is logged at WARN level with the ENV subsystem, which
 * debug.c prints like any WARN but does not record as the ncclGetLastError text.
 */
#include "base/param.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/env_plugin.h"
#include "base/fault.h"
#include "base/param_state.h"

static pthread_once_t param_once = PTHREAD_ONCE_INIT;
static pthread_once_t plugin_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t param_reload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct param_state* param_current; /* atomic */
static int param_stale;                   /* atomic: set in a forked child */
static int param_ready;                   /* atomic: loaded, logger configured, env plugin tried */
/* Used only when allocating a state fails: defaults, no messages. */
static struct param_state param_fallback;

/* Texts of the messages printed since the last braid_param_reload(), under printed_lock. */
struct printed {
  char* text;
  struct printed* next;
};
static pthread_mutex_t printed_lock = PTHREAD_MUTEX_INITIALIZER;
static struct printed* printed_list;

/* Advice at WARN level that is not recorded as the last error (see the header comment). */
#define PARAM_ADVISE(...) braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_ENV, __FILE__, __LINE__, __VA_ARGS__)

/* A load, or the fallback when memory is short. */
static struct param_state* param_load(void) {
  struct param_state* st = braid_param_state_load();
  if (st != NULL) return st;
  braid_param_state_defaults(&param_fallback);
  param_fallback.reported = 1;
  return &param_fallback;
}

/* ---- publishing, fork, printing ---- */

static void printed_clear(void) {
  pthread_mutex_lock(&printed_lock);
  while (printed_list != NULL) {
    struct printed* p = printed_list;
    printed_list = p->next;
    free(p->text);
    free(p);
  }
  pthread_mutex_unlock(&printed_lock);
}

/* 1 the first time `text` is seen since the last printed_clear(). */
static int printed_first(const char* text) {
  int first = 1;
  pthread_mutex_lock(&printed_lock);
  for (struct printed* p = printed_list; p && first; p = p->next) first = strcmp(p->text, text) != 0;
  struct printed* p = first ? malloc(sizeof(*p)) : NULL;
  if (p != NULL && (p->text = strdup(text)) != NULL) {
    p->next = printed_list;
    printed_list = p;
  } else {
    free(p);
  }
  pthread_mutex_unlock(&printed_lock);
  return first;
}

/* After a load for a changed PER_USE value: every other row keeps the value (and the silence)
 * of `old`, LIVE values are loaded once. */
static void state_keep_cached(struct param_state* st, const struct param_state* old) {
  if (st == &param_fallback || old == &param_fallback) return;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++)
    if (!old->v[id].fresh) st->v[id] = old->v[id];
  struct param_msg** link = &st->msgs;
  st->msg_tail = &st->msgs;
  while (*link != NULL) {
    struct param_msg* m = *link;
    if (m->id >= 0 && !old->v[m->id].fresh) {
      *link = m->next;
      free(m->text);
      free(m);
    } else {
      st->msg_tail = &m->next;
      link = &m->next;
    }
  }
}

/* Replaces the current state by a fresh load. PARAM_ALL: everything again (explicit: a caller
 * asked, messages print again; or a forked child); PARAM_FRESH: the rows read at each use. */
enum { PARAM_EXPLICIT, PARAM_ALL, PARAM_FRESH };
static struct param_state* param_swap(int how) {
  struct param_state* st = param_load();
  pthread_mutex_lock(&param_reload_lock);
  int explicit = how == PARAM_EXPLICIT;
  if (how == PARAM_FRESH) state_keep_cached(st, __atomic_load_n(&param_current, __ATOMIC_ACQUIRE));
  if (explicit) printed_clear();
  struct param_state* old = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE);
  if (st != &param_fallback && old != &param_fallback) st->retired = old;
  __atomic_store_n(&param_current, st, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&param_reload_lock);
  braid_fault_rearm();
  return st;
}

static void fork_prepare(void) {
  pthread_mutex_lock(&param_reload_lock);
  pthread_mutex_lock(&printed_lock);
}
static void fork_parent(void) {
  pthread_mutex_unlock(&printed_lock);
  pthread_mutex_unlock(&param_reload_lock);
}
static void fork_child(void) {
  fork_parent();
  __atomic_store_n(&param_stale, 1, __ATOMIC_RELEASE);
}

static void param_load_first(void) {
  __atomic_store_n(&param_current, param_load(), __ATOMIC_RELEASE);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Prints the messages of `st` once, as soon as the logger has its settings. */
static void state_report(struct param_state* st) {
  if (__atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0) return;
  if (__atomic_load_n(&st->reported, __ATOMIC_ACQUIRE)) return;
  if (__atomic_exchange_n(&st->reported, 1, __ATOMIC_ACQ_REL)) return;
  for (struct param_msg* m = st->msgs; m; m = m->next) {
    if (!printed_first(m->text)) continue;
    if (m->warn)
      PARAM_ADVISE("%s", m->text);
    else
      BRAID_INFO(BRAID_LOG_ENV, "%s", m->text);
  }
}

/* Once the logger is configured: the env plugin, and a load that asks it. */
static void plugin_load_once(void) {
  const char* setting = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE)->v[BRAID_PARAM_ENV_PLUGIN].s;
  if (braid_env_plugin_open(setting)) param_swap(PARAM_ALL);
}

/* The first read, a forked child's first read, a read before the logger is configured. */
static void param_state_slow(void) {
  pthread_once(&param_once, param_load_first);
  if (__atomic_load_n(&param_stale, __ATOMIC_ACQUIRE) && __atomic_exchange_n(&param_stale, 0, __ATOMIC_ACQ_REL))
    param_swap(PARAM_ALL);
  /* The logger's settings are parameters too: configure it now, so the messages of this load
   * are printed no later than the first read (braid_debug_init ignores the reads it makes). */
  if (__atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0) braid_debug_init();
  if (__atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0) return; /* inside braid_debug_init */
  pthread_once(&plugin_once, plugin_load_once);
  __atomic_store_n(&param_ready, 1, __ATOMIC_RELEASE);
}

static struct param_state* param_state(void) {
  if (__builtin_expect(!__atomic_load_n(&param_ready, __ATOMIC_ACQUIRE) ||
                           __atomic_load_n(&param_stale, __ATOMIC_ACQUIRE) ||
                           __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0,
                       0))
    param_state_slow();
  struct param_state* st = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE);
  if (!__atomic_load_n(&st->reported, __ATOMIC_ACQUIRE)) state_report(st);
  return st;
}

const char* braid_param_env_raw(const char* name) {
  return getenv(name);
}

/* The state to read row `id` from: for a row read at each use, one whose value is what the
 * plugin and the environment say now (conf files are read once, as NCCL does). */
static struct param_state* state_of(int id) {
  struct param_state* st = param_state();
  const struct param_value* v = &st->v[id];
  if (!v->fresh) return st;
  char* from_plugin = braid_env_plugin_dup(braid_param_rows[id].name);
  const char* now = from_plugin;
  int kind = SRC_PLUGIN;
  if (now == NULL || now[0] == '\0') now = getenv(braid_param_rows[id].name), kind = SRC_ENV;
  if (now != NULL && now[0] == '\0') now = NULL;
  int same = now == NULL ? v->kind != SRC_PLUGIN && v->kind != SRC_ENV
                         : v->kind == kind && v->raw != NULL && strcmp(v->raw, now) == 0;
  free(from_plugin);
  if (same) return st;
  st = param_swap(PARAM_FRESH);
  state_report(st);
  return st;
}

static int param_valid(enum braid_param id, const char* what) {
  if ((int)id >= 0 && id < BRAID_PARAM_COUNT) return 1;
  BRAID_WARN("%s: invalid parameter id %d", what, (int)id);
  return 0;
}

/* ---- the interface of param.h ---- */

void braid_param_reload(void) {
  pthread_once(&param_once, param_load_first);
  param_swap(PARAM_EXPLICIT);
}

int braid_param_is_int(enum braid_param id) {
  if (!param_valid(id, "braid_param_is_int")) return 0;
  return braid_param_rows[id].type != BRAID_PARAM_T_STR;
}

int64_t braid_param_int(enum braid_param id) {
  if (!param_valid(id, "braid_param_int")) return BRAID_PARAM_UNSET;
  if (braid_param_rows[id].type == BRAID_PARAM_T_STR) {
    BRAID_WARN("braid_param_int: %s is a string parameter", braid_param_rows[id].name);
    return BRAID_PARAM_UNSET;
  }
  return state_of(id)->v[id].i;
}

/* braid_param_int_memo's miss: out of line, so the hit saves no registers. */
static __attribute__((noinline)) int64_t memo_fill(enum braid_param id, struct braid_param_memo* memo) {
  int64_t v = braid_param_int(id); /* the slow path's work: first load, fork, messages, fresh rows */
  struct param_state* st;
  memo->state = NULL;
  if (!param_valid(id, "braid_param_int_memo") || braid_param_rows[id].type == BRAID_PARAM_T_STR) return v;
  st = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE);
  if (!__atomic_load_n(&param_ready, __ATOMIC_ACQUIRE) || __atomic_load_n(&param_stale, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0 || !__atomic_load_n(&st->reported, __ATOMIC_ACQUIRE) ||
      st->v[id].fresh)
    return v;
  memo->value = st->v[id].i; /* this table's value (v may come from the one before a swap) */
  memo->state = st;
  return memo->value;
}

int64_t braid_param_int_memo(enum braid_param id, struct braid_param_memo* memo) {
  /* States are retired, never freed: a pointer is never reused for another table. */
  const struct param_state* st = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE);
  if (__builtin_expect(st != NULL && st == memo->state && __atomic_load_n(&param_ready, __ATOMIC_ACQUIRE) &&
                           !__atomic_load_n(&param_stale, __ATOMIC_ACQUIRE) &&
                           __atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) >= 0,
                       1))
    return memo->value;
  return memo_fill(id, memo);
}

const char* braid_param_str(enum braid_param id) {
  if (!param_valid(id, "braid_param_str")) return NULL;
  enum braid_param_type t = braid_param_rows[id].type;
  if (t != BRAID_PARAM_T_STR && t != BRAID_PARAM_T_ENUM && t != BRAID_PARAM_T_LIST) {
    BRAID_WARN("braid_param_str: %s is an integer parameter", braid_param_rows[id].name);
    return NULL;
  }
  return state_of(id)->v[id].s;
}

/* A LIST mask as NCCL prints one: ALL, the words of its bits, or NONE. */
static void list_text(const struct braid_param_row* row, uint64_t mask, char* buf, size_t len) {
  char word[64];
  size_t o = 0;
  if (mask == ~(uint64_t)0) {
    snprintf(buf, len, "ALL");
    return;
  }
  for (int64_t i = 0; i < 64 && o < len; i++)
    if ((mask >> i) & 1 && braid_param_word(row, i, word, sizeof(word))[0] != '\0')
      o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? "," : "", word);
  if (o == 0) snprintf(buf, len, "NONE");
}

const char* braid_param_text(enum braid_param id, char* buf, size_t len) {
  if (buf == NULL || len == 0) return "";
  buf[0] = '\0';
  if (!param_valid(id, "braid_param_text")) return buf;
  const struct param_value* v = &state_of(id)->v[id];
  switch (braid_param_rows[id].type) {
    case BRAID_PARAM_T_INT:
    case BRAID_PARAM_T_SIZE:
      if (v->i != BRAID_PARAM_UNSET) snprintf(buf, len, "%" PRId64, v->i);
      break;
    case BRAID_PARAM_T_BOOL:
      if (v->i != BRAID_PARAM_UNSET) snprintf(buf, len, "%s", v->i ? "TRUE" : "FALSE");
      break;
    case BRAID_PARAM_T_LIST:
      list_text(&braid_param_rows[id], (uint64_t)v->i, buf, len);
      break;
    default:
      snprintf(buf, len, "%s", v->s ? v->s : "");
  }
  return buf;
}

const char* braid_param_source(enum braid_param id) {
  if (!param_valid(id, "braid_param_source")) return NULL;
  return state_of(id)->v[id].source;
}

const char* braid_param_name(enum braid_param id) {
  if (!param_valid(id, "braid_param_name")) return NULL;
  return braid_param_rows[id].name;
}

const char* braid_param_doc(enum braid_param id) {
  if (!param_valid(id, "braid_param_doc")) return NULL;
  return braid_param_rows[id].doc;
}

const struct braid_param_row* braid_param_row(enum braid_param id) {
  if ((int)id < 0 || id >= BRAID_PARAM_COUNT) return NULL;
  return &braid_param_rows[id];
}

const char* braid_param_status_name(enum braid_param id) {
  static const char* const names[] = {"LIVE", "PER_USE", "ACCEPTED"};
  if (!param_valid(id, "braid_param_status_name")) return "";
  return names[braid_param_rows[id].status];
}

const char* braid_param_default_str(enum braid_param id, char* buf, int len) {
  if (buf == NULL || len <= 0) return "";
  buf[0] = '\0';
  if (!param_valid(id, "braid_param_default_str")) return buf;
  const struct braid_param_row* row = &braid_param_rows[id];
  if (row->def_str != NULL)
    snprintf(buf, (size_t)len, "%s", row->def_str);
  else if (row->type == BRAID_PARAM_T_BOOL && row->def_int != BRAID_PARAM_UNSET)
    snprintf(buf, (size_t)len, "%s", row->def_int ? "TRUE" : "FALSE");
  else if (row->def_int != BRAID_PARAM_UNSET && row->type != BRAID_PARAM_T_STR)
    snprintf(buf, (size_t)len, "%" PRId64, row->def_int);
  else
    snprintf(buf, (size_t)len, "auto");
  return buf;
}
