/*
 * param_parse.c - the parameter types of src/base/param.h, read from text: the one place where a
 * value is checked against its row's type, and the conf file syntax. Pure functions on strings
 * (no environment, no logging), so tests and fuzzers can drive them directly.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/param.h"

/* Writes what is wrong into why[0..len) (either may be absent). */
#define SAY(...)                                                 \
  do {                                                           \
    if (why != NULL && len > 0) snprintf(why, len, __VA_ARGS__); \
  } while (0)

/* Decimal or 0x hex, optional sign, blanks around. `end_p` (may be NULL) receives what follows
 * the digits; without it trailing text is an error. 0 on success. */
static int parse_number(const char* text, int64_t* out_p, const char** end_p) {
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
  if (!neg && mag > (unsigned long long)INT64_MAX) return -1;
  if (neg && mag > (unsigned long long)INT64_MAX + 1ULL) return -1;
  if (end_p != NULL) {
    *end_p = end;
  } else {
    while (isspace((unsigned char)*end)) end++;
    if (*end != '\0') return -1;
  }
  *out_p = neg ? (int64_t)(0 - mag) : (int64_t)mag;
  return 0;
}

static int parse_int(const struct braid_param_row* row, const char* text, int64_t* out_p, char* why, size_t len) {
  int64_t v;
  if (parse_number(text, &v, NULL) != 0) {
    SAY("not an integer");
    return -1;
  }
  if (v < row->lo || v > row->hi) {
    SAY("out of range [%" PRId64 ", %" PRId64 "]", row->lo, row->hi);
    return -1;
  }
  *out_p = v;
  return 0;
}

/* Binary units: K, M, G, T, alone or followed by B or iB, any case. */
static int unit_shift(const char* u, int* shift_p) {
  static const char letters[] = "KMGT";
  while (isspace((unsigned char)*u)) u++;
  int shift = 0;
  const char* l = *u ? strchr(letters, toupper((unsigned char)*u)) : NULL;
  if (l != NULL) {
    shift = 10 * (int)(l - letters + 1);
    u++;
    if (*u == 'i' || *u == 'I') {
      u++;
      if (*u != 'b' && *u != 'B') return -1;
    }
  }
  if (*u == 'b' || *u == 'B') u++;
  while (isspace((unsigned char)*u)) u++;
  if (*u != '\0') return -1;
  *shift_p = shift;
  return 0;
}

static int parse_size(const char* text, int64_t* out_p, char* why, size_t len) {
  int64_t v;
  const char* end;
  int shift;
  if (parse_number(text, &v, &end) != 0 || unit_shift(end, &shift) != 0) {
    SAY("not a size (bytes, optionally with K, M, G or T)");
    return -1;
  }
  if (v < 0) {
    SAY("a negative size");
    return -1;
  }
  if (shift > 0 && v > (INT64_MAX >> shift)) {
    SAY("too large");
    return -1;
  }
  *out_p = v << shift;
  return 0;
}

/* The blank-trimmed text as [*a, *b). */
static void trim(const char* s, size_t n, const char** a_p, const char** b_p) {
  const char* a = s;
  const char* b = s + n;
  while (a < b && isspace((unsigned char)*a)) a++;
  while (b > a && isspace((unsigned char)b[-1])) b--;
  *a_p = a, *b_p = b;
}

static int word_is(const char* tok, size_t len, const char* word) {
  return strlen(word) == len && strncasecmp(tok, word, len) == 0;
}

static int parse_bool(const char* text, int64_t* out_p, char* why, size_t len) {
  const char *a, *b;
  trim(text, strlen(text), &a, &b);
  size_t n = (size_t)(b - a);
  if (word_is(a, n, "1") || word_is(a, n, "T") || word_is(a, n, "TRUE")) {
    *out_p = 1;
    return 0;
  }
  if (word_is(a, n, "0") || word_is(a, n, "F") || word_is(a, n, "FALSE")) {
    *out_p = 0;
    return 0;
  }
  SAY("not a boolean (1/T/TRUE or 0/F/FALSE)");
  return -1;
}

/* Index of [tok, tok + len) among the '|'-separated words (any case), -1 when absent. */
static int64_t word_index(const char* words, const char* tok, size_t len) {
  int64_t i = 0;
  for (const char* w = words;; i++) {
    const char* bar = strchr(w, '|');
    size_t wl = bar ? (size_t)(bar - w) : strlen(w);
    if (wl > 0 && wl == len && strncasecmp(w, tok, len) == 0) return i;
    if (bar == NULL) return -1;
    w = bar + 1;
  }
}

const char* braid_param_word(const struct braid_param_row* row, int64_t i, char* buf, size_t len) {
  if (buf == NULL || len == 0) return "";
  buf[0] = '\0';
  if (row == NULL || row->words == NULL || i < 0) return buf;
  const char* w = row->words;
  for (int64_t k = 0; k < i; k++) {
    w = strchr(w, '|');
    if (w == NULL) return buf;
    w++;
  }
  size_t wl = strcspn(w, "|");
  snprintf(buf, len, "%.*s", (int)wl, w);
  return buf;
}

static int parse_enum(const struct braid_param_row* row, const char* text, int64_t* out_p, char* why, size_t len) {
  const char *a, *b;
  trim(text, strlen(text), &a, &b);
  int64_t i = word_index(row->words, a, (size_t)(b - a));
  if (i < 0) {
    size_t n = strlen(row->words);
    SAY("not one of %.*s", (int)(n > 0 && row->words[n - 1] == '|' ? n - 1 : n), row->words);
    return -1;
  }
  *out_p = i;
  return 0;
}

/* Appends an unknown LIST word to why; returns 1. */
static int note_bad(char* why, size_t len, const char* tok, size_t n) {
  if (why != NULL && len > 0) {
    size_t used = strlen(why);
    snprintf(why + used, len - used, "%s%.*s", used ? "," : "", (int)n, tok);
  }
  return 1;
}

static int parse_list(const struct braid_param_row* row, const char* text, int64_t* out_p, char* why, size_t len) {
  const char* s = text;
  while (isspace((unsigned char)*s)) s++;
  int invert = *s == '^';
  uint64_t mask = 0;
  int bad = 0;
  for (s += invert; *s;) {
    const char* comma = strchr(s, ',');
    const char* end = comma ? comma : s + strlen(s);
    const char *a, *b;
    trim(s, (size_t)(end - s), &a, &b);
    size_t n = (size_t)(b - a);
    int64_t i = n ? word_index(row->words, a, n) : -1;
    if (n > 0 && word_is(a, n, "ALL"))
      mask = ~(uint64_t)0;
    else if (i >= 0 && i < 64)
      mask |= (uint64_t)1 << i;
    else if (n > 0)
      bad = note_bad(why, len, a, n);
    s = comma ? comma + 1 : end;
  }
  *out_p = (int64_t)(invert ? ~mask : mask);
  return bad ? 1 : 0;
}

int braid_param_parse(const struct braid_param_row* row, const char* text, int64_t* value_p, char* why, size_t whylen) {
  if (why != NULL && whylen > 0) why[0] = '\0';
  if (row == NULL || text == NULL || value_p == NULL) return -1;
  switch (row->type) {
    case BRAID_PARAM_T_INT:
      return parse_int(row, text, value_p, why, whylen);
    case BRAID_PARAM_T_SIZE:
      return parse_size(text, value_p, why, whylen);
    case BRAID_PARAM_T_BOOL:
      return parse_bool(text, value_p, why, whylen);
    case BRAID_PARAM_T_ENUM:
      return parse_enum(row, text, value_p, why, whylen);
    case BRAID_PARAM_T_LIST:
      return parse_list(row, text, value_p, why, whylen);
    case BRAID_PARAM_T_STR:
      return 0;
  }
  return -1;
}

void braid_param_conf_parse(const char* text, size_t len, braid_param_conf_fn fn, void* arg) {
  const char* end = text + len;
  int lineno = 0;
  for (const char* line = text; line < end;) {
    const char* nl = memchr(line, '\n', (size_t)(end - line));
    const char* stop = nl ? nl : end;
    lineno++;
    const char *a, *b;
    trim(line, (size_t)(stop - line), &a, &b);
    if (a < b && *a != '#') {
      const char* eq = memchr(a, '=', (size_t)(b - a));
      if (eq == NULL) {
        fn(arg, lineno, NULL, 0, a, (size_t)(b - a));
      } else {
        const char *na, *nb, *va, *vb;
        trim(a, (size_t)(eq - a), &na, &nb);
        trim(eq + 1, (size_t)(b - eq - 1), &va, &vb);
        fn(arg, lineno, na, (size_t)(nb - na), va, (size_t)(vb - va));
      }
    }
    line = nl ? nl + 1 : end;
  }
}
