/*
 * tuner_env.c - NCCL_ALGO / NCCL_PROTO (reference section 7): "Ring", "ring,tree", "^Tree",
 * "ring,collnetdirect;allreduce:tree;broadcast:ring", "^LL128;allreduce:LL128". Entries are
 * separated by ';'; only the first may lack a `function:` prefix and applies to every
 * function; later ones override theirs. A list allows exactly its names; '^' allows all but
 * its names. Names and functions are case-insensitive; spaces around them are ignored.
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "base/check.h"
#include "topo/tuner.h"

static const char* const func_names[BRAID_NUM_FUNCS] = {
#define BRAID_X(id, name) [id] = #name,
    BRAID_FUNCS(BRAID_X)
#undef BRAID_X
};
static const char* const algo_names[BRAID_NUM_ALGOS] = {
#define BRAID_X(id, name, str, runs) [id] = str,
    BRAID_ALGOS(BRAID_X)
#undef BRAID_X
};
static const char* const proto_names[BRAID_NUM_PROTOS] = {
#define BRAID_X(id, name, str) [id] = str,
    BRAID_PROTOS(BRAID_X)
#undef BRAID_X
};

const char* braid_tuner_func_name(int f) {
  return f >= 0 && f < BRAID_NUM_FUNCS ? func_names[f] : "?";
}
const char* braid_tuner_algo_name(int a) {
  return a >= 0 && a < BRAID_NUM_ALGOS ? algo_names[a] : "?";
}
const char* braid_tuner_proto_name(int p) {
  return p >= 0 && p < BRAID_NUM_PROTOS ? proto_names[p] : "?";
}

/* Copy [s, e) without surrounding spaces into buf. */
static void trim(const char* s, const char* e, char* buf, size_t len) {
  while (s < e && isspace((unsigned char)*s)) s++;
  while (e > s && isspace((unsigned char)e[-1])) e--;
  size_t n = (size_t)(e - s) < len - 1 ? (size_t)(e - s) : len - 1;
  memcpy(buf, s, n);
  buf[n] = '\0';
}

/* Apply one list ("a,b" or "^a,b") to function f. */
static ncclResult_t apply_list(const char* list, int kind, const char* var, const char* str, int f,
                               uint8_t on[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX],
                               uint8_t named[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX]) {
  const char* const* names = kind == BRAID_TUNER_LIST_ALGO ? algo_names : proto_names;
  int n = kind == BRAID_TUNER_LIST_ALGO ? BRAID_NUM_ALGOS : BRAID_NUM_PROTOS;
  uint8_t in[BRAID_TUNER_LIST_MAX] = {0};
  int exclude = 0;
  while (isspace((unsigned char)*list)) list++;
  if (*list == '^') {
    exclude = 1;
    list++;
  }
  for (const char* s = list; *s;) {
    const char* e = strchr(s, ',');
    char tok[64];
    if (e == NULL) e = s + strlen(s);
    trim(s, e, tok, sizeof(tok));
    s = *e ? e + 1 : e;
    if (tok[0] == '\0') continue;
    int x = -1;
    for (int i = 0; i < n; i++)
      if (strcasecmp(tok, names[i]) == 0) x = i;
    if (x < 0) {
      BRAID_WARN("%s=\"%s\": unknown %s \"%s\"", var, str, kind == BRAID_TUNER_LIST_ALGO ? "algorithm" : "protocol",
                 tok);
      return ncclInvalidUsage;
    }
    in[x] = 1;
  }
  for (int i = 0; i < n; i++) {
    on[f][i] = exclude ? !in[i] : in[i];
    named[f][i] = exclude ? 0 : in[i];
  }
  return ncclSuccess;
}

ncclResult_t braid_tuner_parse_list(const char* str, int kind, const char* var,
                                    uint8_t on[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX],
                                    uint8_t named[BRAID_NUM_FUNCS][BRAID_TUNER_LIST_MAX]) {
  char entry[256], fname[64];
  if (var == NULL) var = kind == BRAID_TUNER_LIST_ALGO ? "NCCL_ALGO" : "NCCL_PROTO";
  for (int f = 0; f < BRAID_NUM_FUNCS; f++)
    for (int i = 0; i < BRAID_TUNER_LIST_MAX; i++) {
      on[f][i] = 1;
      named[f][i] = 0;
    }
  if (str == NULL) return ncclSuccess;
  int idx = 0;
  for (const char* s = str; *s; idx++) {
    const char* e = strchr(s, ';');
    if (e == NULL) e = s + strlen(s);
    if ((size_t)(e - s) >= sizeof(entry)) {
      BRAID_WARN("%s=\"%s\": entry too long", var, str);
      return ncclInvalidUsage;
    }
    trim(s, e, entry, sizeof(entry));
    s = *e ? e + 1 : e;
    if (entry[0] == '\0') continue;
    char* colon = strchr(entry, ':');
    if (colon == NULL) {
      if (idx > 0) {
        BRAID_WARN("%s=\"%s\": entry \"%s\" needs a function prefix (only the first entry may lack one)", var, str,
                   entry);
        return ncclInvalidUsage;
      }
      for (int f = 0; f < BRAID_NUM_FUNCS; f++) BRAID_CHECK(apply_list(entry, kind, var, str, f, on, named));
      continue;
    }
    trim(entry, colon, fname, sizeof(fname));
    int f = -1;
    for (int i = 0; i < BRAID_NUM_FUNCS; i++)
      if (i != BRAID_FUNC_SendRecv && strcasecmp(fname, func_names[i]) == 0) f = i;
    if (f < 0) {
      BRAID_WARN("%s=\"%s\": unknown function \"%s\" (Broadcast Reduce AllGather ReduceScatter AllReduce)", var, str,
                 fname);
      return ncclInvalidUsage;
    }
    BRAID_CHECK(apply_list(colon + 1, kind, var, str, f, on, named));
  }
  return ncclSuccess;
}
