/*
 * braid-info - what this braid is and how it is configured: its version, the NCCL API version
 * it implements, the build options, then every parameter of src/base/param.h with its default,
 * current value, where that value came from, and one line of doc (like `ucx_info -c`).
 * Linked against the static library, so it calls the internal parameter accessors.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/param.h"
#include "base/version.h"
#include "nccl.h"
#include "transport/registry.h"

static void usage(FILE* out) {
  fprintf(out,
          "usage: braid-info [--help] [--version]\n"
          "\n"
          "Prints braid's version, the NCCL API version it implements, the build options and the\n"
          "table of environment parameters: name, default, current value, where the value came\n"
          "from (default, environment, or a conf file), and what it does.\n"
          "Values are read from the environment, then NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf.\n"
          "\n"
          "  --version   print only the version line\n"
          "  --help      print this help\n");
}

static void print_version(void) {
  int code = 0;
  ncclGetVersion(&code);
  printf("braid %s, implementing the NCCL %d.%d.%d API (ncclGetVersion %d)\n", braid_version_string(), NCCL_MAJOR,
         NCCL_MINOR, NCCL_PATCH, code);
}

/* Quotes text with blanks at either end, so a value like "[%F %T] " shows its space. */
static const char* shown(const char* text, char* buf, size_t len) {
  size_t n = strlen(text);
  if (n > 0 && (text[0] == ' ' || text[n - 1] == ' ')) {
    snprintf(buf, len, "\"%s\"", text);
    return buf;
  }
  if (text != buf) snprintf(buf, len, "%s", text);
  return buf;
}

static const char* default_value(enum braid_param id, char* buf, size_t len) {
  char raw[128];
  return shown(braid_param_default_str(id, raw, sizeof(raw)), buf, len);
}

static const char* current_value(enum braid_param id, char* buf, size_t len) {
  if (braid_param_is_int(id)) {
    int64_t v = braid_param_int(id);
    if (v == BRAID_PARAM_UNSET)
      snprintf(buf, len, "auto");
    else
      snprintf(buf, len, "%" PRId64, v);
  } else {
    const char* s = braid_param_str(id);
    shown(s ? s : "auto", buf, len);
  }
  return buf;
}

static int width_of(const char* s, int w) {
  int n = (int)strlen(s);
  return n > w ? n : w;
}

static void print_params(void) {
  char def[128], cur[512];
  int wname = 4, wdef = 7, wcur = 5, wsrc = 6;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    enum braid_param p = (enum braid_param)id;
    wname = width_of(braid_param_name(p), wname);
    wdef = width_of(default_value(p, def, sizeof(def)), wdef);
    wcur = width_of(current_value(p, cur, sizeof(cur)), wcur);
    wsrc = width_of(braid_param_source(p), wsrc);
  }
  printf("%-*s  %-*s  %-*s  %-*s  %s\n", wname, "NAME", wdef, "DEFAULT", wcur, "VALUE", wsrc, "SOURCE", "DESCRIPTION");
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    enum braid_param p = (enum braid_param)id;
    printf("%-*s  %-*s  %-*s  %-*s  %s\n", wname, braid_param_name(p), wdef, default_value(p, def, sizeof(def)), wcur,
           current_value(p, cur, sizeof(cur)), wsrc, braid_param_source(p), braid_param_doc(p));
  }
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      print_version();
      return 0;
    }
    fprintf(stderr, "braid-info: unknown argument '%s'\n", argv[i]);
    usage(stderr);
    return 2;
  }
  print_version();
  printf("build: %s\n", braid_build_options());
  printf("\nparameters (environment, then NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf):\n\n");
  print_params();
  return 0;
}
