/*
 * param_load.c - one load of the parameter table (param_state.h): the rows, then every source
 * in order (the env plugin, the environment, NCCL_CONF_FILE or ~/.nccl.conf, /etc/nccl.conf),
 * each value parsed as its row says (param_parse.c), and the messages that go with them: the
 * `set by` lines, accepted-and-ignored notes, malformed values, unknown and foreign names.
 * Logs nothing itself (param.c prints the messages once the logger is ready).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/env_plugin.h"
#include "base/param.h"
#include "base/param_state.h"

extern char** environ;

static const char SOURCE_DEFAULT[] = "default";
static const char SOURCE_ENV[] = "environment";

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

const struct braid_param_row braid_param_rows[BRAID_PARAM_COUNT] = {
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
    if (strlen(braid_param_rows[id].name) == len && strncmp(braid_param_rows[id].name, name, len) == 0) return id;
  return -1;
}

const char* braid_param_foreign_owner(const char* name, size_t len) {
  for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++)
    if (strlen(foreign[i].name) == len && strncmp(foreign[i].name, name, len) == 0) return foreign[i].owner;
  return NULL;
}

/* Levenshtein distance between a[0..la) and b[0..lb), or `limit` as soon as it cannot be
 * less; names are short (< 128). */
static size_t edit_distance(const char* a, size_t la, const char* b, size_t lb, size_t limit) {
  size_t prev[128], cur[128];
  if (lb >= 128) lb = 127;
  for (size_t j = 0; j <= lb; j++) prev[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t row_min = cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
      size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
      cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
      if (cur[j] < row_min) row_min = cur[j];
    }
    if (row_min >= limit) return limit;
    memcpy(prev, cur, (lb + 1) * sizeof(size_t));
  }
  return prev[lb];
}

static const char* closest_known(const char* name, size_t len) {
  const char* best = braid_param_rows[0].name;
  size_t best_d = (size_t)-1;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    size_t rl = strlen(braid_param_rows[id].name);
    if ((rl > len ? rl - len : len - rl) >= best_d) continue; /* the distance is at least that */
    size_t d = edit_distance(name, len, braid_param_rows[id].name, rl, best_d);
    if (d < best_d) best_d = d, best = braid_param_rows[id].name;
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
  const struct braid_param_row* row = &braid_param_rows[id];
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
  const struct braid_param_row* row = &braid_param_rows[id];
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
    if (id == BRAID_PARAM_ENV_PLUGIN || id == BRAID_PARAM_CONF_FILE) continue; /* NCCL: the environment only */
    char* text = braid_env_plugin_dup(braid_param_rows[id].name);
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

void braid_param_state_defaults(struct param_state* st) {
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    const struct braid_param_row* row = &braid_param_rows[id];
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

struct param_state* braid_param_state_load(void) {
  struct param_state* st = calloc(1, sizeof(*st));
  if (st == NULL) return NULL;
  braid_param_state_defaults(st);
  load_plugin(st);
  load_environment(st);
  const char* conf = braid_param_env_raw("NCCL_CONF_FILE");
  const char* home = braid_param_env_raw("HOME");
  char path[4096];
  if (conf && conf[0])
    load_conf(st, conf, 1);
  else if (home && home[0] && snprintf(path, sizeof(path), "%s/.nccl.conf", home) < (int)sizeof(path))
    load_conf(st, path, 0);
  if (conf == NULL || strcmp(conf, "/etc/nccl.conf") != 0) load_conf(st, "/etc/nccl.conf", 0);
  state_no_cache(st);
  return st;
}
