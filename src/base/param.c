/*
 * param.c - the parameter table of src/base/param.h: values, their sources, and the advice printed
 * about them (STYLE.md 7). This is the only file in src/ that reads the environment.
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

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/env_plugin.h"
#include "base/fault.h"

extern char** environ;

/* ---- the static table ---- */

#define PARAM_TYPE_INT(lo_, hi_) .type = BRAID_PARAM_T_INT, .lo = (lo_), .hi = (hi_)
#define PARAM_TYPE_SIZE .type = BRAID_PARAM_T_SIZE, .lo = 0, .hi = INT64_MAX
#define PARAM_TYPE_BOOL .type = BRAID_PARAM_T_BOOL, .lo = 0, .hi = 1
#define PARAM_TYPE_ENUM(w) .type = BRAID_PARAM_T_ENUM, .words = (w)
#define PARAM_TYPE_LIST(w) .type = BRAID_PARAM_T_LIST, .words = (w)
#define PARAM_TYPE_STR .type = BRAID_PARAM_T_STR
/* PARAM_DEF_<type> (default): where the default goes, numbers or text. */
#define PARAM_DEF_INT(lo_, hi_) PARAM_DEF_NUM
#define PARAM_DEF_SIZE PARAM_DEF_NUM
#define PARAM_DEF_BOOL PARAM_DEF_NUM
#define PARAM_DEF_ENUM(w) PARAM_DEF_TEXT
#define PARAM_DEF_LIST(w) PARAM_DEF_TEXT
#define PARAM_DEF_STR PARAM_DEF_TEXT
#define PARAM_DEF_NUM(d) .def_int = (int64_t)(d), .def_str = NULL
#define PARAM_DEF_TEXT(d) .def_int = BRAID_PARAM_UNSET, .def_str = (d)

static const struct braid_param_row rows[BRAID_PARAM_COUNT] = {
#define BRAID_X(id, name_, status_, type_, def_, doc_)   \
  [BRAID_PARAM_##id] = {.name = name_,                   \
                        .doc = doc_,                     \
                        .status = BRAID_PARAM_##status_, \
                        PARAM_TYPE_##type_,              \
                        PARAM_DEF_##type_(def_),         \
                        .declared = 1},
    BRAID_PARAMS(BRAID_X)
#undef BRAID_X
#define BRAID_Y(id)                                                                         \
  [BRAID_PARAM_NCCL_##id] = {.name = "NCCL_" #id,                                           \
                             .doc = "read by NCCL; braid has no equivalent and ignores it", \
                             .status = BRAID_PARAM_ACCEPTED,                                \
                             PARAM_TYPE_STR,                                                \
                             PARAM_DEF_TEXT(NULL),                                          \
                             .declared = 0},
        BRAID_PARAMS_NCCL(BRAID_Y)
#undef BRAID_Y
};

static const struct {
  const char* name;
  const char* owner;
} foreign[] = {
#define BRAID_Z(name, owner) {name, owner},
    BRAID_PARAMS_FOREIGN(BRAID_Z)
#undef BRAID_Z
};

/* ---- the state of one load ---- */

enum param_src { SRC_DEFAULT, SRC_PLUGIN, SRC_ENV, SRC_CONF };

struct param_value {
  int64_t i;             /* typed rows: the value (the default when unset or malformed) */
  const char* s;         /* the text: as set (ENUM: the word as the row writes it); NULL: unset */
  const char* raw;       /* the text exactly as its source gave it; NULL: no source set it */
  const char* source;    /* "default", "environment", "env plugin X" or a conf file path */
  unsigned char kind;    /* enum param_src of raw */
  unsigned char fresh;   /* look up again at each read (PER_USE, NCCL_NO_CACHE) */
  unsigned char decided; /* set (or set to a malformed value) by a source of higher priority */
};

struct param_msg {
  int id;   /* the row it is about, -1: none */
  int warn; /* 1: WARN-level advice; 0: INFO/ENV */
  char* text;
  struct param_msg* next;
};

struct param_state {
  struct param_value v[BRAID_PARAM_COUNT];
  struct param_msg* msgs;      /* in load order */
  struct param_msg** msg_tail; /* where the next message goes */
  int reported;                /* 1 once the messages were printed (atomic) */
  char** strings;              /* copies of values and paths owned by this state */
  int nstrings, capstrings;
  int cur_id;                  /* while loading: the row messages are about (-1: none) */
  struct param_state* retired; /* the state this one replaced */
};

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

static const char SOURCE_DEFAULT[] = "default";
static const char SOURCE_ENV[] = "environment";

/* Advice at WARN level that is not recorded as the last error (see the header comment). */
#define PARAM_ADVISE(...) braid_debug_log(BRAID_LOG_WARN, BRAID_LOG_ENV, __FILE__, __LINE__, __VA_ARGS__)

/* ---- small helpers ---- */

/* Keeps a copy of `s` (len bytes) alive as long as the state. NULL when out of memory. */
static const char* state_keep(struct param_state* st, const char* s, size_t len) {
  if (st->nstrings == st->capstrings) {
    int cap = st->capstrings ? 2 * st->capstrings : 32;
    char** grown = realloc(st->strings, (size_t)cap * sizeof(*grown));
    if (grown == NULL) return NULL;
    st->strings = grown;
    st->capstrings = cap;
  }
  char* copy = malloc(len + 1);
  if (copy == NULL) return NULL;
  memcpy(copy, s, len);
  copy[len] = '\0';
  st->strings[st->nstrings++] = copy;
  return copy;
}

static void state_msg(struct param_state* st, int warn, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
static void state_msg(struct param_state* st, int warn, const char* fmt, ...) {
  struct param_msg* m = calloc(1, sizeof(*m));
  if (m == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&m->text, fmt, ap);
  va_end(ap);
  if (n < 0) {
    free(m);
    return;
  }
  m->warn = warn;
  m->id = st->cur_id;
  *st->msg_tail = m;
  st->msg_tail = &m->next;
}

int braid_param_lookup(const char* name, size_t len) {
  for (int id = 0; id < BRAID_PARAM_COUNT; id++)
    if (strlen(rows[id].name) == len && strncmp(rows[id].name, name, len) == 0) return id;
  return -1;
}

const char* braid_param_foreign_owner(const char* name, size_t len) {
  for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++)
    if (strlen(foreign[i].name) == len && strncmp(foreign[i].name, name, len) == 0) return foreign[i].owner;
  return NULL;
}

/* Levenshtein distance between a[0..la) and b[0..lb); names are short (< 64). */
static size_t edit_distance(const char* a, size_t la, const char* b, size_t lb) {
  size_t prev[128], cur[128];
  if (lb >= 128) lb = 127;
  for (size_t j = 0; j <= lb; j++) prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
    }
    memcpy(prev, cur, (lb + 1) * sizeof(size_t));
  }
  return prev[lb];
}

static const char* closest_known(const char* name, size_t len) {
  const char* best = rows[0].name;
  size_t best_d = (size_t)-1;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    size_t d = edit_distance(name, len, rows[id].name, strlen(rows[id].name));
    if (d < best_d) best_d = d, best = rows[id].name;
  }
  return best;
}

/* Names we own or NCCL owns, minus nccl-tests' own variables. */
static int is_checked_name(const char* name, size_t len) {
  if (len > 11 && strncmp(name, "NCCL_TESTS_", 11) == 0) return 0;
  return (len > 5 && strncmp(name, "NCCL_", 5) == 0) || (len > 6 && strncmp(name, "BRAID_", 6) == 0);
}

/* A name that is not a row: say whose it is, or that it is unknown. */
static void state_unknown(struct param_state* st, const char* name, size_t len, const char* where) {
  if (!is_checked_name(name, len)) return;
  const char* owner = braid_param_foreign_owner(name, len);
  if (owner != NULL)
    state_msg(st, 0, "%.*s is read by %s, not by NCCL; braid ignores it.", (int)len, name, owner);
  else if (where == NULL)
    state_msg(st, 1, "Unknown environment variable %.*s (did you mean %s?)", (int)len, name, closest_known(name, len));
  else
    state_msg(st, 1, "Unknown variable %.*s in %s (did you mean %s?)", (int)len, name, where, closest_known(name, len));
}

/* ---- loading ---- */

static const char* where_of(const char* source) {
  return source == SOURCE_ENV ? "environment" : source;
}

/* What NCCL itself makes of an integer setting (strtoll, base 0, trailing text ignored),
 * when it differs from braid's reading: a note for the `set by` line. */
static void nccl_reading(const struct braid_param_row* row, const char* text, int64_t mine, char* note, size_t len) {
  note[0] = '\0';
  if (strncmp(row->name, "NCCL_", 5) != 0) return;
  if (row->type != BRAID_PARAM_T_INT && row->type != BRAID_PARAM_T_SIZE) return;
  long long theirs = strtoll(text, NULL, 0);
  if (theirs != mine) snprintf(note, len, " (NCCL itself would read \"%s\" as %lld)", text, theirs);
}

/* The `set by` line of a value that fits its row. */
static void state_set_line(struct param_state* st, int id, const char* text, const char* where) {
  const struct braid_param_row* row = &rows[id];
  const struct param_value* v = &st->v[id];
  char shown[64], note[160];
  /* NCCL does not log its own logging settings; neither do we (NCCL_DEBUG=INFO would
   * otherwise always start with `NCCL_DEBUG set by environment to INFO.`). */
  if (strncmp(row->name, "NCCL_DEBUG", 10) == 0) return;
  const char* value = text;
  if (row->type == BRAID_PARAM_T_INT || row->type == BRAID_PARAM_T_SIZE || row->type == BRAID_PARAM_T_BOOL) {
    snprintf(shown, sizeof(shown), "%" PRId64, v->i);
    value = shown;
  } else if (row->type == BRAID_PARAM_T_ENUM) {
    value = v->s;
  }
  nccl_reading(row, text, v->i, note, sizeof(note));
  if (row->status == BRAID_PARAM_ACCEPTED)
    state_msg(st, 0, "%s set by %s to %s: braid accepts it for compatibility and ignores it.", row->name, where, text);
  else
    state_msg(st, 0, "%s set by %s to %s%s.", row->name, where, value, note);
}

/* Sets parameter `id` from `text` found at `source`, unless an earlier source set it. */
static void state_set_row(struct param_state* st, int id, const char* text, const char* source, int kind);
static void state_set(struct param_state* st, int id, const char* text, const char* source, int kind) {
  st->cur_id = id;
  state_set_row(st, id, text, source, kind);
  st->cur_id = -1;
}

static void state_set_row(struct param_state* st, int id, const char* text, const char* source, int kind) {
  struct param_value* v = &st->v[id];
  const struct braid_param_row* row = &rows[id];
  if (v->decided) return;      /* a higher-priority source won */
  if (text[0] == '\0') return; /* empty means unset */
  const char* where = where_of(source);
  const char* kept = state_keep(st, text, strlen(text));
  if (kept == NULL) return;
  v->raw = kept;
  v->kind = (unsigned char)kind;
  v->decided = 1; /* from here on lower-priority sources do not apply, even to a bad value */
  char why[256], def[64];
  int64_t val = v->i;
  int fit = braid_param_parse(row, text, &val, why, sizeof(why));
  if (fit < 0) {
    state_msg(st, 1, "Invalid value %s for %s (set by %s): %s; using default %s.", text, row->name, where, why,
              braid_param_default_str((enum braid_param)id, def, sizeof(def)));
    return;
  }
  if (fit > 0) state_msg(st, 1, "Unknown %s entries ignored: %s", row->name, why);
  v->i = val;
  v->s = kept;
  if (row->type == BRAID_PARAM_T_ENUM) {
    char word[64];
    braid_param_word(row, val, word, sizeof(word));
    v->s = state_keep(st, word, strlen(word));
  }
  v->source = source;
  state_set_line(st, id, text, where);
}

static void load_plugin(struct param_state* st) {
  const char* source = braid_env_plugin_source();
  if (source == NULL) return;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    if (id == BRAID_PARAM_ENV_PLUGIN || id == BRAID_PARAM_CONF_FILE) continue; /* NCCL: getenv only */
    char* text = braid_env_plugin_dup(rows[id].name);
    if (text != NULL) state_set(st, id, text, source, SRC_PLUGIN);
    free(text);
  }
}

static void load_environment(struct param_state* st) {
  for (char** e = environ; e && *e; e++) {
    const char* eq = strchr(*e, '=');
    if (eq == NULL) continue;
    size_t len = (size_t)(eq - *e);
    if (!is_checked_name(*e, len)) continue;
    int id = braid_param_lookup(*e, len);
    if (id >= 0)
      state_set(st, id, eq + 1, SOURCE_ENV, SRC_ENV);
    else
      state_unknown(st, *e, len, NULL);
  }
}

struct conf_ctx {
  struct param_state* st;
  const char* path; /* kept by the state */
};

static void conf_line(void* arg, int lineno, const char* name, size_t name_len, const char* value, size_t value_len) {
  struct conf_ctx* c = arg;
  if (name == NULL) {
    state_msg(c->st, 1, "%s:%d: ignoring line without '=': %.*s", c->path, lineno, (int)value_len, value);
    return;
  }
  int id = braid_param_lookup(name, name_len);
  if (id < 0) {
    state_unknown(c->st, name, name_len, c->path);
    return;
  }
  const char* text = state_keep(c->st, value, value_len);
  if (text != NULL) state_set(c->st, id, text, c->path, SRC_CONF);
}

/* The whole file (at most 16 MiB) in a malloc'ed buffer; NULL with errno set. */
static char* read_whole(FILE* f, size_t* len_p) {
  size_t cap = 4096, len = 0;
  char* buf = malloc(cap);
  while (buf != NULL) {
    len += fread(buf + len, 1, cap - len, f);
    if (len < cap || cap >= (16u << 20)) break;
    char* grown = realloc(buf, cap * 2);
    if (grown == NULL) free(buf);
    buf = grown, cap *= 2;
  }
  if (buf != NULL && ferror(f)) free(buf), buf = NULL;
  *len_p = len;
  return buf;
}

/* Reads one conf file; a missing file is silent unless `must_exist` (NCCL_CONF_FILE). */
static void load_conf(struct param_state* st, const char* path, int must_exist) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    if (must_exist) state_msg(st, 1, "NCCL_CONF_FILE %s could not be opened: %s", path, strerror(errno));
    return;
  }
  struct conf_ctx c = {st, state_keep(st, path, strlen(path))};
  size_t len = 0;
  char* text = read_whole(f, &len);
  if (text == NULL && must_exist) state_msg(st, 1, "NCCL_CONF_FILE %s could not be read: %s", path, strerror(errno));
  if (text != NULL && c.path != NULL) braid_param_conf_parse(text, len, conf_line, &c);
  free(text);
  fclose(f);
}

static void state_defaults(struct param_state* st) {
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    const struct braid_param_row* row = &rows[id];
    struct param_value* v = &st->v[id];
    v->i = row->def_int;
    v->s = row->def_str;
    v->source = SOURCE_DEFAULT;
    v->fresh = row->status == BRAID_PARAM_PER_USE;
    if (row->def_str != NULL && row->type != BRAID_PARAM_T_STR) braid_param_parse(row, row->def_str, &v->i, NULL, 0);
  }
  st->msg_tail = &st->msgs;
  st->cur_id = -1;
}

/* NCCL_NO_CACHE: the rows it names (or ALL) are looked up at each read. */
static void state_no_cache(struct param_state* st) {
  const char* list = st->v[BRAID_PARAM_NO_CACHE].s;
  for (const char* s = list; s != NULL && *s;) {
    const char* comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    while (len > 0 && isspace((unsigned char)*s)) s++, len--;
    while (len > 0 && isspace((unsigned char)s[len - 1])) len--;
    int id = braid_param_lookup(s, len);
    if (len == 3 && strncmp(s, "ALL", 3) == 0) {
      for (int i = 0; i < BRAID_PARAM_COUNT; i++) st->v[i].fresh = 1;
    } else if (id >= 0) {
      st->v[id].fresh = 1;
    } else if (len > 0) {
      state_msg(st, 1, "NCCL_NO_CACHE names %.*s, which is not a parameter; ignored", (int)len, s);
    }
    s = comma ? comma + 1 : NULL;
  }
}

static struct param_state* param_load(void) {
  struct param_state* st = calloc(1, sizeof(*st));
  if (st == NULL) {
    state_defaults(&param_fallback);
    param_fallback.reported = 1;
    return &param_fallback;
  }
  state_defaults(st);
  load_plugin(st);
  load_environment(st);
  const char* conf = getenv("NCCL_CONF_FILE");
  const char* home = getenv("HOME");
  char path[4096];
  if (conf && conf[0])
    load_conf(st, conf, 1);
  else if (home && home[0] && snprintf(path, sizeof(path), "%s/.nccl.conf", home) < (int)sizeof(path))
    load_conf(st, path, 0);
  if (conf == NULL || strcmp(conf, "/etc/nccl.conf") != 0) load_conf(st, "/etc/nccl.conf", 0);
  state_no_cache(st);
  return st;
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

/* The state to read row `id` from: for a row read at each use, one whose value is what the
 * plugin and the environment say now (conf files are read once, as NCCL does). */
static struct param_state* state_of(int id) {
  struct param_state* st = param_state();
  const struct param_value* v = &st->v[id];
  if (!v->fresh) return st;
  char* from_plugin = braid_env_plugin_dup(rows[id].name);
  const char* now = from_plugin;
  int kind = SRC_PLUGIN;
  if (now == NULL || now[0] == '\0') now = getenv(rows[id].name), kind = SRC_ENV;
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
  return rows[id].type != BRAID_PARAM_T_STR;
}

int64_t braid_param_int(enum braid_param id) {
  if (!param_valid(id, "braid_param_int")) return BRAID_PARAM_UNSET;
  if (rows[id].type == BRAID_PARAM_T_STR) {
    BRAID_WARN("braid_param_int: %s is a string parameter", rows[id].name);
    return BRAID_PARAM_UNSET;
  }
  return state_of(id)->v[id].i;
}

const char* braid_param_str(enum braid_param id) {
  if (!param_valid(id, "braid_param_str")) return NULL;
  enum braid_param_type t = rows[id].type;
  if (t != BRAID_PARAM_T_STR && t != BRAID_PARAM_T_ENUM && t != BRAID_PARAM_T_LIST) {
    BRAID_WARN("braid_param_str: %s is an integer parameter", rows[id].name);
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
  switch (rows[id].type) {
    case BRAID_PARAM_T_INT:
    case BRAID_PARAM_T_SIZE:
      if (v->i != BRAID_PARAM_UNSET) snprintf(buf, len, "%" PRId64, v->i);
      break;
    case BRAID_PARAM_T_BOOL:
      if (v->i != BRAID_PARAM_UNSET) snprintf(buf, len, "%s", v->i ? "TRUE" : "FALSE");
      break;
    case BRAID_PARAM_T_LIST:
      list_text(&rows[id], (uint64_t)v->i, buf, len);
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
  return rows[id].name;
}

const char* braid_param_doc(enum braid_param id) {
  if (!param_valid(id, "braid_param_doc")) return NULL;
  return rows[id].doc;
}

const struct braid_param_row* braid_param_row(enum braid_param id) {
  if ((int)id < 0 || id >= BRAID_PARAM_COUNT) return NULL;
  return &rows[id];
}

const char* braid_param_status_name(enum braid_param id) {
  static const char* const names[] = {"LIVE", "PER_USE", "ACCEPTED"};
  if (!param_valid(id, "braid_param_status_name")) return "";
  return names[rows[id].status];
}

const char* braid_param_default_str(enum braid_param id, char* buf, int len) {
  if (buf == NULL || len <= 0) return "";
  buf[0] = '\0';
  if (!param_valid(id, "braid_param_default_str")) return buf;
  const struct braid_param_row* row = &rows[id];
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
