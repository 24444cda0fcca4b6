/*
 * ib_hca.c - NCCL_IB_HCA's syntax (ib_hca.h): parsing with errors that name the entry, and
 * matching a device's port against the list.
 */
#include "transport/net/ib/ib_hca.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

/* A numeric field: "" -> -1; otherwise 0..65535. */
static int field_number(const char* s, int* out) {
  if (s == NULL || s[0] == '\0') {
    *out = -1;
    return 0;
  }
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 65535) return -1;
  *out = (int)v;
  return 0;
}

static ncclResult_t parse_entry(char* entry, const char* what, const char* value, struct braid_ib_hca_entry* e) {
  static const char* const names[] = {"port", "rail", "plane"};
  char* rest = entry;
  char* name = strsep(&rest, ":");
  if (strlen(name) >= BRAID_IB_HCA_NAME_MAX) {
    BRAID_WARN("%s=%s: the device name '%s' is longer than %d bytes", what, value, name, BRAID_IB_HCA_NAME_MAX - 1);
    return ncclInvalidArgument;
  }
  snprintf(e->prefix, sizeof(e->prefix), "%s", name);
  int* fields[] = {&e->port, &e->rail, &e->plane};
  for (int i = 0; i < 3; i++) {
    char* tok = rest != NULL ? strsep(&rest, ":") : NULL;
    if (field_number(tok, fields[i]) != 0) {
      BRAID_WARN("%s=%s: the %s of '%s' is '%s', not a number in 0..65535", what, value, names[i], name, tok);
      return ncclInvalidArgument;
    }
  }
  if (rest != NULL) {
    BRAID_WARN("%s=%s: '%s' has more than name:port:rail:plane", what, value, name);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

ncclResult_t braid_ib_hca_parse(const char* value, const char* what, struct braid_ib_hca_filter* f) {
  ncclResult_t res = ncclSuccess;
  memset(f, 0, sizeof(*f));
  if (value == NULL) return ncclSuccess;
  const char* s = value;
  if (*s == '^') f->exclude = 1, s++;
  if (*s == '=') f->exact = 1, s++;
  char* copy = strdup(s);
  if (copy == NULL) {
    BRAID_WARN("%s: out of memory", what);
    return ncclSystemError;
  }
  char* save = NULL;
  for (char* entry = strtok_r(copy, ",", &save); entry != NULL; entry = strtok_r(NULL, ",", &save)) {
    if (entry[0] == '\0' || entry[0] == ':') continue; /* no name: skipped, as NCCL does */
    if (f->n == BRAID_IB_HCA_MAX) {
      BRAID_WARN("%s=%s: more than %d entries", what, value, BRAID_IB_HCA_MAX);
      res = ncclInvalidArgument;
      break;
    }
    if ((res = parse_entry(entry, what, value, &f->e[f->n])) != ncclSuccess) break;
    f->n++;
  }
  free(copy);
  if (res != ncclSuccess) memset(f, 0, sizeof(*f));
  return res;
}

static int entry_matches(const struct braid_ib_hca_entry* e, int exact, const char* dev, int port) {
  int name = exact ? strcmp(dev, e->prefix) == 0 : strncmp(dev, e->prefix, strlen(e->prefix)) == 0;
  return name && (e->port == -1 || port == -1 || e->port == port);
}

int braid_ib_hca_match(const struct braid_ib_hca_filter* f, const char* dev, int port, int* entry) {
  int found = -1;
  if (entry != NULL) *entry = -1;
  if (f->n == 0) return !f->exclude; /* no list: everything; "^" alone: nothing */
  for (int i = 0; i < f->n && found < 0; i++)
    if (entry_matches(&f->e[i], f->exact, dev, port)) found = i;
  if (entry != NULL) *entry = found;
  return (found >= 0) != f->exclude;
}
