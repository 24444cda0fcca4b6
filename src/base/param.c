/*
 * param.c - the parameter table of src/base/param.h: values, their sources, and the advice printed
 * about them (STYLE.md 7). This is the only file in src/ that reads the environment.
 *
 * A value comes from the first place that sets it: the environment, then the file named by
 * NCCL_CONF_FILE, then ~/.nccl.conf, then /etc/nccl.conf (lines `NAME=value`; `#` comments
 * and blank lines ignored). An empty value counts as unset. INT values are decimal or 0x hex;
 * a malformed one is reported and the default is used.
 *
 * One load builds a `struct param_state`; it is published through an atomic pointer, first
 * under pthread_once and again by braid_param_reload(). An old state is retired, never freed,
 * so strings handed out before a reload stay valid (reload is a test hook; the cost is a few
 * hundred bytes per reload).
 *
 * Loading logs nothing: the logger reads its own settings from this table, so printing from
 * here while it initialises would recurse. Instead each state keeps a list of messages (the
 * `set by` lines, unknown-variable and malformed-value advice) that the first accessor call
 * after the logger is configured prints, once per load. An accessor configures the logger
 * first when nobody has, and braid_debug_init() ends with such a call. The advice is logged at WARN level with the ENV
 * subsystem, which debug.c prints like any WARN but does not record as the ncclGetLastError text: it is advice, not the
 * error of a call.
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

extern char** environ;

/* The static part of a row: what param.h says about it. */
struct param_row {
  const char* name;
  int is_int;
  int64_t def_int;
  const char* def_str;
  const char* doc;
};

#define PARAM_ROW_INT(def) 1, (int64_t)(def), NULL
#define PARAM_ROW_STR(def) 0, 0, (def)
static const struct param_row rows[BRAID_PARAM_COUNT] = {
#define BRAID_X(id, name, type, def, doc) [BRAID_PARAM_##id] = {name, PARAM_ROW_##type(def), doc},
    BRAID_PARAMS(BRAID_X)
#undef BRAID_X
};

/* The value of one parameter in one load. */
struct param_value {
  int64_t i;          /* INT rows: the value (default when unset or malformed) */
  const char* s;      /* STR rows: the value, NULL when unset; INT rows: the text as set */
  const char* source; /* "default", "environment" or a conf file path */
  int decided;        /* set (or set to a malformed value) by a source of higher priority */
};

/* A message to print once the logger is ready. */
struct param_msg {
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
  struct param_state* retired; /* the state this one replaced */
};

static pthread_once_t param_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t param_reload_lock = PTHREAD_MUTEX_INITIALIZER;
static struct param_state* param_current; /* atomic */
/* Used only when allocating a state fails: defaults, no messages. */
static struct param_state param_fallback;

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
  *st->msg_tail = m;
  st->msg_tail = &m->next;
}

static int param_lookup(const char* name, size_t len) {
  for (int id = 0; id < BRAID_PARAM_COUNT; id++)
    if (strlen(rows[id].name) == len && strncmp(rows[id].name, name, len) == 0) return id;
  return -1;
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

/* Decimal or 0x hex, optional sign, surrounding blanks allowed. 0 on success. */
static int parse_int(const char* text, int64_t* out_p) {
  const char* p = text;
  while (isspace((unsigned char)*p)) p++;
  int neg = 0;
  if (*p == '+' || *p == '-') neg = (*p++ == '-');
  int base = 10;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) base = 16, p += 2;
  if (!(base == 16 ? isxdigit((unsigned char)*p) : isdigit((unsigned char)*p))) return -1;
  errno = 0;
  char* end;
  unsigned long long mag = strtoull(p, &end, base);
  if (errno == ERANGE) return -1;
  while (isspace((unsigned char)*end)) end++;
  if (*end != '\0') return -1;
  if (!neg && mag > (unsigned long long)INT64_MAX) return -1;
  if (neg && mag > (unsigned long long)INT64_MAX + 1ULL) return -1;
  *out_p = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return 0;
}

/* ---- loading ---- */

/* Sets parameter `id` from `text` found at `source`, unless an earlier source set it. */
static void state_set(struct param_state* st, int id, const char* text, const char* source) {
  struct param_value* v = &st->v[id];
  if (v->decided) return;      /* a higher-priority source won */
  if (text[0] == '\0') return; /* empty means unset */
  const char* where = source == SOURCE_ENV ? "environment" : source;
  const char* kept = state_keep(st, text, strlen(text));
  if (kept == NULL) return;
  if (rows[id].is_int) {
    int64_t val;
    if (parse_int(text, &val) != 0) {
      char def[32];
      state_msg(st, 1, "Invalid value %s for %s (set by %s), using default %s.", text, rows[id].name, where,
                braid_param_default_str((enum braid_param)id, def, sizeof(def)));
      v->decided = 1; /* lower-priority sources do not apply; the value stays the default */
      return;
    }
    v->i = val;
  }
  v->s = kept;
  v->source = source;
  v->decided = 1;
  /* NCCL does not log its own logging settings; neither do we (NCCL_DEBUG=INFO would
   * otherwise always start with `NCCL_DEBUG set by environment to INFO.`). */
  if (strncmp(rows[id].name, "NCCL_DEBUG", 10) == 0) return;
  if (rows[id].is_int)
    state_msg(st, 0, "%s set by %s to %" PRId64 ".", rows[id].name, where, v->i);
  else
    state_msg(st, 0, "%s set by %s to %s.", rows[id].name, where, text);
}

static void load_environment(struct param_state* st) {
  for (char** e = environ; e && *e; e++) {
    const char* eq = strchr(*e, '=');
    if (eq == NULL) continue;
    size_t len = (size_t)(eq - *e);
    int id = param_lookup(*e, len);
    if (id >= 0) {
      state_set(st, id, eq + 1, SOURCE_ENV);
    } else if (is_checked_name(*e, len)) {
      state_msg(st, 1, "Unknown environment variable %.*s (did you mean %s?)", (int)len, *e, closest_known(*e, len));
    }
  }
}

/* Reads one conf file; a missing file is silent unless `must_exist` (NCCL_CONF_FILE). */
static void load_conf(struct param_state* st, const char* path, int must_exist) {
  FILE* f = fopen(path, "r");
  if (f == NULL) {
    if (must_exist) state_msg(st, 1, "NCCL_CONF_FILE %s could not be opened: %s", path, strerror(errno));
    return;
  }
  const char* source = state_keep(st, path, strlen(path));
  char* line = NULL;
  size_t cap = 0;
  ssize_t n;
  int lineno = 0;
  while (source && (n = getline(&line, &cap, f)) >= 0) {
    lineno++;
    while (n > 0 && isspace((unsigned char)line[n - 1])) line[--n] = '\0';
    char* p = line;
    while (isspace((unsigned char)*p)) p++;
    if (*p == '\0' || *p == '#') continue;
    char* eq = strchr(p, '=');
    if (eq == NULL) {
      state_msg(st, 1, "%s:%d: ignoring line without '=': %s", path, lineno, p);
      continue;
    }
    char* name_end = eq;
    while (name_end > p && isspace((unsigned char)name_end[-1])) name_end--;
    char* value = eq + 1;
    while (isspace((unsigned char)*value)) value++;
    size_t len = (size_t)(name_end - p);
    int id = param_lookup(p, len);
    if (id >= 0)
      state_set(st, id, value, source);
    else if (is_checked_name(p, len))
      state_msg(st, 1, "Unknown variable %.*s in %s (did you mean %s?)", (int)len, p, path, closest_known(p, len));
  }
  free(line);
  fclose(f);
}

static void state_defaults(struct param_state* st) {
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    st->v[id].i = rows[id].is_int ? rows[id].def_int : BRAID_PARAM_UNSET;
    st->v[id].s = rows[id].is_int ? NULL : rows[id].def_str;
    st->v[id].source = SOURCE_DEFAULT;
  }
  st->msg_tail = &st->msgs;
}

static struct param_state* param_load(void) {
  struct param_state* st = calloc(1, sizeof(*st));
  if (st == NULL) {
    state_defaults(&param_fallback);
    param_fallback.reported = 1;
    return &param_fallback;
  }
  state_defaults(st);
  load_environment(st);
  const char* conf = getenv("NCCL_CONF_FILE");
  if (conf && conf[0]) load_conf(st, conf, 1);
  if (conf == NULL) conf = "";
  /* Each file is read once, even when NCCL_CONF_FILE names one of the usual places. */
  const char* home = getenv("HOME");
  char path[4096];
  if (home && home[0] && snprintf(path, sizeof(path), "%s/.nccl.conf", home) < (int)sizeof(path) &&
      strcmp(path, conf) != 0)
    load_conf(st, path, 0);
  if (strcmp(conf, "/etc/nccl.conf") != 0) load_conf(st, "/etc/nccl.conf", 0);
  return st;
}

static void param_load_first(void) {
  __atomic_store_n(&param_current, param_load(), __ATOMIC_RELEASE);
}

/* Prints the messages of `st` once, as soon as the logger has its settings. */
static void state_report(struct param_state* st) {
  if (__atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0) return;
  if (__atomic_load_n(&st->reported, __ATOMIC_ACQUIRE)) return;
  if (__atomic_exchange_n(&st->reported, 1, __ATOMIC_ACQ_REL)) return;
  for (struct param_msg* m = st->msgs; m; m = m->next) {
    if (m->warn)
      PARAM_ADVISE("%s", m->text);
    else
      BRAID_INFO(BRAID_LOG_ENV, "%s", m->text);
  }
}

static struct param_state* param_state(void) {
  pthread_once(&param_once, param_load_first);
  /* The logger's settings are parameters too: configure it now, so the messages of this load
   * are printed no later than the first read (braid_debug_init ignores the reads it makes). */
  if (__atomic_load_n(&braid_debug_level, __ATOMIC_ACQUIRE) < 0) braid_debug_init();
  struct param_state* st = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE);
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
  struct param_state* st = param_load();
  pthread_mutex_lock(&param_reload_lock);
  struct param_state* old = __atomic_load_n(&param_current, __ATOMIC_ACQUIRE);
  if (st != &param_fallback && old != &param_fallback) st->retired = old;
  __atomic_store_n(&param_current, st, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&param_reload_lock);
}

int64_t braid_param_int(enum braid_param id) {
  if (!param_valid(id, "braid_param_int")) return BRAID_PARAM_UNSET;
  if (!rows[id].is_int) {
    BRAID_WARN("braid_param_int: %s is a string parameter", rows[id].name);
    return BRAID_PARAM_UNSET;
  }
  return param_state()->v[id].i;
}

const char* braid_param_str(enum braid_param id) {
  if (!param_valid(id, "braid_param_str")) return NULL;
  if (rows[id].is_int) {
    BRAID_WARN("braid_param_str: %s is an integer parameter", rows[id].name);
    return NULL;
  }
  return param_state()->v[id].s;
}

const char* braid_param_source(enum braid_param id) {
  if (!param_valid(id, "braid_param_source")) return NULL;
  return param_state()->v[id].source;
}

const char* braid_param_name(enum braid_param id) {
  if (!param_valid(id, "braid_param_name")) return NULL;
  return rows[id].name;
}

const char* braid_param_doc(enum braid_param id) {
  if (!param_valid(id, "braid_param_doc")) return NULL;
  return rows[id].doc;
}

int braid_param_is_int(enum braid_param id) {
  if (!param_valid(id, "braid_param_is_int")) return 0;
  return rows[id].is_int;
}

const char* braid_param_default_str(enum braid_param id, char* buf, int len) {
  if (buf == NULL || len <= 0) return "";
  buf[0] = '\0';
  if (!param_valid(id, "braid_param_default_str")) return buf;
  if (rows[id].is_int && rows[id].def_int != BRAID_PARAM_UNSET)
    snprintf(buf, (size_t)len, "%" PRId64, rows[id].def_int);
  else if (!rows[id].is_int && rows[id].def_str != NULL)
    snprintf(buf, (size_t)len, "%s", rows[id].def_str);
  else
    snprintf(buf, (size_t)len, "auto");
  return buf;
}
