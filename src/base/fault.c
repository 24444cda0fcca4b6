/*
 * fault.c - BRAID_FAULT_INJECT (base/fault.h): parses the setting into a few rules and counts
 * the calls that match each. A rule set belongs to one value of the parameter: when the value
 * changes (a reload), the rules and their counts are built again.
 */
#include "base/fault.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/param.h"

#define FAULT_RULES 16

struct fault_rule {
  char site[64];
  char function[96]; /* "" : any */
  long nth;          /* 0: every call */
  long seen;         /* matching calls so far (atomic) */
};

int braid_fault_armed = -1;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fault_rule rules[FAULT_RULES];
static int nrules;
static const char* parsed; /* the value the rules were built from */

/* One "SITE[@FUNCTION][:N|:*]" entry; 0 when well formed. */
static int parse_rule(const char* s, size_t len, struct fault_rule* r) {
  char buf[192];
  if (len == 0 || len >= sizeof(buf)) return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  memset(r, 0, sizeof(*r));
  r->nth = 1;
  char* colon = strchr(buf, ':');
  if (colon != NULL) {
    *colon = '\0';
    char* end;
    if (strcmp(colon + 1, "*") == 0)
      r->nth = 0;
    else if ((r->nth = strtol(colon + 1, &end, 10)) < 1 || *end != '\0')
      return -1;
  }
  char* at = strchr(buf, '@');
  if (at != NULL) {
    *at = '\0';
    if (at[1] == '\0' || strlen(at + 1) >= sizeof(r->function)) return -1;
    snprintf(r->function, sizeof(r->function), "%s", at + 1);
  }
  if (buf[0] == '\0' || strlen(buf) >= sizeof(r->site)) return -1;
  snprintf(r->site, sizeof(r->site), "%s", buf);
  return 0;
}

/* Under fault_lock: the rules of the current value. */
static void rules_build(const char* value) {
  nrules = 0;
  parsed = value;
  for (const char* s = value; s != NULL && *s;) {
    const char* comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (nrules == FAULT_RULES) {
      BRAID_WARN("BRAID_FAULT_INJECT=%s: more than %d entries, the rest ignored", value, FAULT_RULES);
      break;
    }
    if (len == 0)
      ; /* an empty entry ("a,,b") */
    else if (parse_rule(s, len, &rules[nrules]) == 0)
      nrules++;
    else
      BRAID_WARN("BRAID_FAULT_INJECT=%s: entry '%.*s' is not SITE[@FUNCTION][:N|:*], ignored", value, (int)len, s);
    s = comma ? comma + 1 : NULL;
  }
}

int braid_fault_hit(const char* site, const char* function) {
  const char* value = braid_param_str(BRAID_PARAM_FAULT_INJECT);
  pthread_mutex_lock(&fault_lock);
  if (value != parsed) rules_build(value);
  __atomic_store_n(&braid_fault_armed, nrules > 0, __ATOMIC_RELAXED);
  int hit = 0;
  long count = 0;
  for (int i = 0; i < nrules && !hit; i++) {
    struct fault_rule* r = &rules[i];
    if (strcmp(r->site, site) != 0 || (r->function[0] && strcmp(r->function, function) != 0)) continue;
    count = ++r->seen;
    hit = r->nth == 0 || count == r->nth;
  }
  pthread_mutex_unlock(&fault_lock);
  if (hit) BRAID_INFO(BRAID_LOG_ALL, "BRAID_FAULT_INJECT: %s call %ld in %s fails on purpose", site, count, function);
  return hit;
}

void braid_fault_rearm(void) {
  __atomic_store_n(&braid_fault_armed, -1, __ATOMIC_RELAXED);
}
