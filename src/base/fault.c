/*
 * fault.c - BRAID_FAULT_INJECT (fault.h): one spec, one counter of the times its point was
 * reached in this process.
 */
#include "base/fault.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "base/debug.h"
#include "base/param.h"

static int hits; /* times the spec's point was reached */

int braid_fault_hit(const char* point) {
  const char* spec = braid_param_str(BRAID_PARAM_FAULT_INJECT);
  size_t len = strlen(point);
  if (spec == NULL || strncmp(spec, point, len) != 0) return 0;
  const char* p = spec + len;
  long nth = 1;
  if (*p != '\0' && *p != '#' && *p != ':') return 0; /* another point that starts the same */
  if (*p == '#') nth = strtol(p + 1, (char**)&p, 10);
  if (__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED) != nth) return 0;
  if (strcmp(p, ":kill") == 0) raise(SIGKILL);
  if (strcmp(p, ":stop") == 0) {
    raise(SIGSTOP);
    return 0;
  }
  BRAID_WARN("BRAID_FAULT_INJECT=%s: fault injected at %s", spec, point);
  return 1;
}
