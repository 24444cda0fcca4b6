/*
 * param_api.c - NCCL 2.30's parameter API (ncclParamBind, ncclParamGet*, ncclParamGetParameter,
 * ncclParamGetAllParameterKeys, ncclParamDumpAll) over braid's one table (src/base/param.h),
 * with the semantics of NCCL's src/param/c_api.cc:
 *   - a handle is a row; every row of the table can be bound, the names braid only accepts
 *     (param_nccl.h) included;
 *   - the typed getters need the row's exact type, else ncclInvalidArgument: INT and SIZE rows
 *     are int64_t, BOOL rows bool (int64_t when their default is "auto", which bool cannot
 *     say), ENUM rows a 4-byte enum (the word's index, -1: unset; read with ncclParamGet),
 *     LIST rows a uint64_t mask (NCCL_DEBUG_TIMESTAMP_LEVELS: uint32_t, as NCCL declares it),
 *     STR rows const char* (ncclParamGetStr; "" when unset);
 *   - flags as NCCL's: a row of BRAID_PARAMS is published, ACCEPTED ones are "Unused", LIVE
 *     ones "Cached"; binding an unused one says once (INFO) that setting it has no effect;
 *   - key lists and dumps show the published rows, all of them with NCCL_PARAM_DUMP_ALL=1;
 *   - returned strings live until the next call of the same function on the same thread.
 * Bad input is a WARN naming the argument (NCCL logs INFO) and ncclInvalidArgument.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/api.h"
#include "base/debug.h"
#include "base/param.h"

/* NCCL's ncclParamTypeId_t and ncclParamFlag_t values (src/include/param/common.h). */
enum api_type { API_I8 = 1, API_I16, API_I32, API_I64, API_U8, API_U16, API_U32, API_U64, API_BOOL, API_CSTR, API_RAW };
enum api_flag { API_PUBLISHED = 1, API_DEPRECATED = 2, API_CACHED = 4, API_UNUSED = 8 };

/* A handle is the address of its row's byte here. */
static char handles[BRAID_PARAM_COUNT];
static unsigned char bind_noted[BRAID_PARAM_COUNT]; /* atomic: the unused-note was logged */

static enum api_type type_of(int id) {
  const struct braid_param_row* r = braid_param_row((enum braid_param)id);
  switch (r->type) {
    case BRAID_PARAM_T_INT:
    case BRAID_PARAM_T_SIZE:
      return API_I64;
    case BRAID_PARAM_T_BOOL:
      return r->def_int == BRAID_PARAM_UNSET ? API_I64 : API_BOOL;
    case BRAID_PARAM_T_ENUM:
      return API_RAW;
    case BRAID_PARAM_T_LIST:
      return id == BRAID_PARAM_DEBUG_TIMESTAMP_LEVELS ? API_U32 : API_U64;
    case BRAID_PARAM_T_STR:
      break;
  }
  return API_CSTR;
}

static const char* type_name(enum api_type t) {
  switch (t) {
    case API_I64:
      return "int64_t";
    case API_BOOL:
      return "bool";
    case API_RAW:
      return "enum";
    case API_U32:
      return "uint32_t";
    case API_U64:
      return "uint64_t";
    case API_CSTR:
      return "const char*";
    default:
      return "?";
  }
}

static unsigned flags_of(int id) {
  const struct braid_param_row* r = braid_param_row((enum braid_param)id);
  unsigned f = r->declared ? API_PUBLISHED : 0;
  if (r->status == BRAID_PARAM_ACCEPTED) f |= API_UNUSED;
  if (r->status == BRAID_PARAM_LIVE) f |= API_CACHED;
  return f;
}

/* The row of a handle, -1 (with a WARN) when it is not one of ours. */
static int id_of(ncclParamHandle_t h, const char* fn) {
  const char* p = (const char*)h;
  if (p >= handles && p < handles + BRAID_PARAM_COUNT) return (int)(p - handles);
  BRAID_WARN("%s: invalid argument handle = %p (not from ncclParamBind)", fn, (void*)h);
  return -1;
}

static int find_key(const char* key, const char* fn) {
  int id = braid_param_lookup(key, strlen(key));
  if (id < 0) BRAID_WARN("%s: invalid argument key = \"%s\" (no such parameter)", fn, key);
  return id;
}

/* NCCL's note on binding a parameter that has no effect (once per key). */
static void note_flags(int id) {
  if (!(flags_of(id) & API_UNUSED) || __atomic_exchange_n(&bind_noted[id], 1, __ATOMIC_ACQ_REL)) return;
  BRAID_INFO(BRAID_LOG_ENV, "Warning: ENV %s is unused. Setting it has no effect (braid accepts it for compatibility).",
             braid_param_name((enum braid_param)id));
}

/* The value as the bytes of its API type; returns their number (0: a string row). */
static int raw_value(int id, void* out) {
  enum api_type t = type_of(id);
  int64_t v = t == API_CSTR ? 0 : braid_param_int((enum braid_param)id);
  switch (t) {
    case API_I64:
      memcpy(out, &v, sizeof(v));
      return (int)sizeof(v);
    case API_BOOL: {
      bool b = v != 0;
      memcpy(out, &b, sizeof(b));
      return (int)sizeof(b);
    }
    case API_RAW: {
      int32_t e = v == BRAID_PARAM_UNSET ? -1 : (int32_t)v;
      memcpy(out, &e, sizeof(e));
      return (int)sizeof(e);
    }
    case API_U32: {
      uint32_t u = (uint32_t)v;
      memcpy(out, &u, sizeof(u));
      return (int)sizeof(u);
    }
    case API_U64: {
      uint64_t u = (uint64_t)v;
      memcpy(out, &u, sizeof(u));
      return (int)sizeof(u);
    }
    default:
      return 0;
  }
}

/* ---- handles ---- */

BRAID_API ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  if (out == NULL || key == NULL) {
    BRAID_WARN("ncclParamBind: invalid argument %s = NULL", out == NULL ? "out" : "key");
    return ncclInvalidArgument;
  }
  int id = find_key(key, "ncclParamBind");
  if (id < 0) return ncclInvalidArgument;
  note_flags(id);
  *out = (ncclParamHandle_t)(void*)&handles[id];
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclParamBind)

static ncclResult_t get_typed(ncclParamHandle_t h, void* out, enum api_type want, const char* fn, const char* ctype) {
  int id = id_of(h, fn);
  if (id < 0) return ncclInvalidArgument;
  if (out == NULL) {
    BRAID_WARN("%s: invalid argument out = NULL", fn);
    return ncclInvalidArgument;
  }
  enum api_type t = type_of(id);
  if (t != want) {
    BRAID_WARN("%s: type mismatch: %s is %s, not %s", fn, braid_param_name((enum braid_param)id), type_name(t), ctype);
    return ncclInvalidArgument;
  }
  raw_value(id, out);
  return ncclSuccess;
}

#define PARAM_GETTER(suffix, ctype, tid)                                         \
  BRAID_API ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, ctype* out) { \
    return get_typed(h, out, tid, "ncclParamGet" #suffix, #ctype);               \
  }                                                                              \
  BRAID_PROFILE_ALIAS(ncclParamGet##suffix)
PARAM_GETTER(I8, int8_t, API_I8)
PARAM_GETTER(I16, int16_t, API_I16)
PARAM_GETTER(I32, int32_t, API_I32)
PARAM_GETTER(I64, int64_t, API_I64)
PARAM_GETTER(U8, uint8_t, API_U8)
PARAM_GETTER(U16, uint16_t, API_U16)
PARAM_GETTER(U32, uint32_t, API_U32)
PARAM_GETTER(U64, uint64_t, API_U64)
#undef PARAM_GETTER

BRAID_API ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  int id = id_of(h, "ncclParamGetStr");
  if (id < 0) return ncclInvalidArgument;
  if (out == NULL) {
    BRAID_WARN("ncclParamGetStr: invalid argument out = NULL");
    return ncclInvalidArgument;
  }
  if (type_of(id) != API_CSTR) {
    BRAID_WARN("ncclParamGetStr: type mismatch: %s is %s, not const char*", braid_param_name((enum braid_param)id),
               type_name(type_of(id)));
    return ncclInvalidArgument;
  }
  const char* s = braid_param_str((enum braid_param)id);
  *out = s ? s : ""; /* the table's strings outlive any later call */
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclParamGetStr)

BRAID_API ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  int id = id_of(h, "ncclParamGet");
  if (id < 0) return ncclInvalidArgument;
  if (out == NULL || len == NULL || maxLen <= 0) {
    BRAID_WARN("ncclParamGet: invalid argument %s", out == NULL   ? "out = NULL"
                                                    : len == NULL ? "len = NULL"
                                                                  : "maxLen <= 0");
    return ncclInvalidArgument;
  }
  char bytes[8];
  const char* s = NULL;
  int n = raw_value(id, bytes);
  if (n == 0) {
    s = braid_param_str((enum braid_param)id);
    if (s == NULL) s = "";
    n = (int)strlen(s) + 1;
  }
  if (n > maxLen) {
    BRAID_WARN("ncclParamGet: %s needs %d bytes, maxLen is %d", braid_param_name((enum braid_param)id), n, maxLen);
    *len = 0;
    return ncclInvalidArgument;
  }
  memcpy(out, s ? s : bytes, (size_t)n);
  *len = n;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclParamGet)

/* ---- keys ---- */

/* The value as NCCL's toString prints it, valid until the next call on this thread. */
static const char* value_text(int id) {
  static __thread char buf[1024];
  enum braid_param p = (enum braid_param)id;
  if (type_of(id) == API_CSTR) {
    const char* s = braid_param_str(p);
    return s ? s : "";
  }
  return braid_param_text(p, buf, sizeof(buf));
}

BRAID_API ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  if (key == NULL || value == NULL || valueLen == NULL) {
    BRAID_WARN("ncclParamGetParameter: invalid argument %s = NULL", key == NULL     ? "key"
                                                                    : value == NULL ? "value"
                                                                                    : "valueLen");
    return ncclInvalidArgument;
  }
  int id = find_key(key, "ncclParamGetParameter");
  if (id < 0) {
    *value = NULL;
    *valueLen = 0;
    return ncclInvalidArgument;
  }
  note_flags(id);
  *value = value_text(id);
  *valueLen = (int)strlen(*value);
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclParamGetParameter)

static int listed(int id) {
  return braid_param_row((enum braid_param)id)->declared || braid_param_int(BRAID_PARAM_PARAM_DUMP_ALL) == 1;
}

BRAID_API ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  static __thread const char* keys[BRAID_PARAM_COUNT];
  if (table == NULL || tableLen == NULL) {
    BRAID_WARN("ncclParamGetAllParameterKeys: invalid argument %s = NULL", table == NULL ? "table" : "tableLen");
    return ncclInvalidArgument;
  }
  int n = 0;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++)
    if (listed(id)) keys[n++] = braid_param_name((enum braid_param)id);
  *table = keys;
  *tableLen = n;
  return ncclSuccess;
}
BRAID_PROFILE_ALIAS(ncclParamGetAllParameterKeys)

/* ---- the dump ---- */

/* NCCL's "Accepted value:" text of a row. */
static void accepted_text(const struct braid_param_row* r, char* buf, size_t len) {
  size_t o = 0;
  char word[64];
  switch (r->type) {
    case BRAID_PARAM_T_INT:
      snprintf(buf, len, "Integer in range [%" PRId64 ", %" PRId64 "]", r->lo, r->hi);
      return;
    case BRAID_PARAM_T_SIZE:
      snprintf(buf, len, "Size in bytes: integer with optional K, M, G or T (binary units)");
      return;
    case BRAID_PARAM_T_BOOL:
      snprintf(buf, len, "Boolean: 1/T/TRUE or 0/F/FALSE");
      return;
    case BRAID_PARAM_T_STR:
      snprintf(buf, len, "String");
      return;
    default:
      break;
  }
  o = (size_t)snprintf(buf, len, "%s", r->type == BRAID_PARAM_T_ENUM ? "One of:" : "Comma-separated list of:");
  for (int64_t i = 0; o < len && braid_param_word(r, i, word, sizeof(word))[0] != '\0'; i++)
    o += (size_t)snprintf(buf + o, len - o, "\n        %s", word);
  if (r->type == BRAID_PARAM_T_LIST && o < len) snprintf(buf + o, len - o, "\n        ALL");
}

static void flags_text(unsigned f, char* buf, size_t len) {
  snprintf(buf, len, "%s", f & API_PUBLISHED ? "" : "Private");
  if (f & API_CACHED) snprintf(buf + strlen(buf), len - strlen(buf), "%sCached", buf[0] ? ", " : "");
  if (f & API_UNUSED) snprintf(buf + strlen(buf), len - strlen(buf), "%sUnused", buf[0] ? ", " : "");
}

static void dump_one(int id) {
  const struct braid_param_row* r = braid_param_row((enum braid_param)id);
  char flags[64], def[128], accepted[1024], *text = NULL;
  flags_text(flags_of(id), flags, sizeof(flags));
  braid_param_default_str((enum braid_param)id, def, sizeof(def));
  accepted_text(r, accepted, sizeof(accepted));
  const char* cur = value_text(id);
  int n = asprintf(&text,
                   "%s (%s) [%s] %s\n"
                   "    Current value=%s set_by=%s default=%s\n"
                   "    Accepted value: %s\n\n",
                   r->name, type_name(type_of(id)), flags, r->doc, cur[0] ? cur : "<unset>",
                   braid_param_source((enum braid_param)id), strcmp(def, "auto") ? def : "<unset>", accepted);
  if (n > 0) braid_debug_write_stdout(text, (size_t)n);
  free(text);
}

BRAID_API void ncclParamDumpAll(void) {
  static const char head[] = "=== ncclParam Registry Dump ===\n";
  braid_debug_write_stdout(head, sizeof(head) - 1);
  for (int id = 0; id < BRAID_PARAM_COUNT; id++)
    if (listed(id)) dump_one(id);
}
BRAID_PROFILE_ALIAS(ncclParamDumpAll)
