/*
 * fault.c - BRAID_FAULT_INJECT (base/fault.h): the setting parsed into a few rules, each with
 * a count of the calls that matched it. A rule set belongs to one value of the parameter: when
 * the value changes (a reload), the rules and their counts are built again.
 */
#include "base/fault.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/param.h"

#define FAULT_RULES 16

enum fault_action { FAULT_FAIL, FAULT_KILL, FAULT_STOP };

struct fault_rule {
  char point[64];
  char function[96]; /* "": any */
  long nth;          /* 0: every time */
  long seen;         /* matching calls so far */
  enum fault_action action;
};

int braid_fault_armed = -1;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fault_rule rules[FAULT_RULES];
static int nrules;
static const char* parsed; /* the value the rules were built from */

/* One "POINT[@FUNCTION][#N|#*][:fail|:kill|:stop]" entry; 0 when well formed. */
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
    if (strcmp(colon + 1, "fail") == 0)
      r->action = FAULT_FAIL;
    else if (strcmp(colon + 1, "kill") == 0)
      r->action = FAULT_KILL;
    else if (strcmp(colon + 1, "stop") == 0)
      r->action = FAULT_STOP;
    else
      return -1;
  }
  char* hash = strchr(buf, '#');
  if (hash != NULL) {
    *hash = '\0';
    char* end;
    if (strcmp(hash + 1, "*") == 0)
      r->nth = 0;
    else if ((r->nth = strtol(hash + 1, &end, 10)) < 1 || *end != '\0')
      return -1;
  }
  char* at = strchr(buf, '@');
  if (at != NULL) {
    *at = '\0';
    if (at[1] == '\0' || strlen(at + 1) >= sizeof(r->function)) return -1;
    snprintf(r->function, sizeof(r->function), "%s", at + 1);
  }
  if (buf[0] == '\0' || strlen(buf) >= sizeof(r->point)) return -1;
  snprintf(r->point, sizeof(r->point), "%s", buf);
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
      BRAID_WARN("BRAID_FAULT_INJECT=%s: entry '%.*s' is not POINT[@FUNCTION][#N|#*][:fail|:kill|:stop], ignored",
                 value, (int)len, s);
    s = comma ? comma + 1 : NULL;
  }
}

/* The action for this call (-1: none) and the count it is; `spec_p`: the setting. */
static int fault_match(const char* point, const char* function, long* count_p, const char** spec_p) {
  const char* value = braid_param_str(BRAID_PARAM_FAULT_INJECT);
  int action = -1;
  pthread_mutex_lock(&fault_lock);
  if (value != parsed) rules_build(value);
  __atomic_store_n(&braid_fault_armed, nrules > 0, __ATOMIC_RELAXED);
  for (int i = 0; i < nrules && action < 0; i++) {
    struct fault_rule* r = &rules[i];
    if (strcmp(r->point, point) != 0) continue;
    if (r->function[0] && (function == NULL || strcmp(r->function, function) != 0)) continue;
    *count_p = ++r->seen;
    if (r->nth == 0 || *count_p == r->nth) action = (int)r->action;
  }
  pthread_mutex_unlock(&fault_lock);
  *spec_p = value;
  if (action == FAULT_KILL) raise(SIGKILL);
  if (action == FAULT_STOP) {
    raise(SIGSTOP); /* a rank that hangs; it goes on if someone continues it */
    action = -1;
  }
  return action;
}

int braid_fault_hit(const char* point) {
  if (__atomic_load_n(&braid_fault_armed, __ATOMIC_RELAXED) == 0) return 0;
  long count = 0;
  const char* spec = NULL;
  if (fault_match(point, NULL, &count, &spec) != FAULT_FAIL) return 0;
  BRAID_WARN("BRAID_FAULT_INJECT=%s: fault injected at %s", spec, point);
  return 1;
}

int braid_fault_site(const char* site, const char* function) {
  long count = 0;
  const char* spec = NULL;
  if (fault_match(site, function, &count, &spec) != FAULT_FAIL) return 0;
  BRAID_INFO(BRAID_LOG_ALL, "BRAID_FAULT_INJECT: %s call %ld in %s fails on purpose", site, count, function);
  return 1;
}

void braid_fault_rearm(void) {
  __atomic_store_n(&braid_fault_armed, -1, __ATOMIC_RELAXED);
}
