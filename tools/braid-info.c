/*
 * braid-info - what this braid is and how it is configured: its version, the NCCL API version
 * it implements, the build options, then every parameter of src/base/param.h with its status
 * (LIVE, PER_USE or ACCEPTED), type, default, current value, where that value came from, and
 * one line of doc (like `ucx_info -c`). --all adds the names NCCL reads that braid accepts and
 * ignores without a row of its own (src/base/param_nccl.h). Linked against the static library,
 * so it calls the internal parameter accessors.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/param.h"
#include "base/version.h"
#include "nccl.h"
#include "transport/registry.h"

static void usage(FILE* out) {
  fprintf(out,
          "usage: braid-info [--help] [--version] [--all] [--dump PID]\n"
          "\n"
          "Prints braid's version, the NCCL API version it implements, the build options and the\n"
          "table of environment parameters: name, status, type, default, current value, where the\n"
          "value came from (default, env plugin, environment, or a conf file), and what it does.\n"
          "Status: LIVE (read once per process), PER_USE (read again at each use, as NCCL does),\n"
          "ACCEPTED (NCCL's knob, accepted for compatibility and ignored by braid).\n"
          "Values come from NCCL_ENV_PLUGIN, the environment, NCCL_CONF_FILE (or ~/.nccl.conf),\n"
          "then /etc/nccl.conf.\n"
          "\n"
          "  --all       also list the names NCCL reads that braid ignores without a row of its own\n"
          "  --dump PID  print the flight recorder of every communicator of process PID (it\n"
          "              writes $TMPDIR/braid-flight-PID.txt on SIGUSR1; same TMPDIR needed)\n"
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
  char raw[256];
  return shown(braid_param_default_str(id, raw, sizeof(raw)), buf, len);
}

static const char* current_value(enum braid_param id, char* buf, size_t len) {
  char raw[512];
  const char* t = braid_param_text(id, raw, sizeof(raw));
  return shown(t[0] ? t : "auto", buf, len);
}

static const char* type_name(enum braid_param id) {
  static const char* const names[] = {"int", "size", "bool", "enum", "list", "string"};
  return names[braid_param_row(id)->type];
}

static int width_of(const char* s, int w) {
  int n = (int)strlen(s);
  return n > w ? n : w;
}

static void print_params(int all) {
  char def[256], cur[512];
  int wname = 4, wdef = 7, wcur = 5, wsrc = 6, hidden = 0;
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    enum braid_param p = (enum braid_param)id;
    if (!all && !braid_param_row(p)->declared) continue;
    wname = width_of(braid_param_name(p), wname);
    wdef = width_of(default_value(p, def, sizeof(def)), wdef);
    wcur = width_of(current_value(p, cur, sizeof(cur)), wcur);
    wsrc = width_of(braid_param_source(p), wsrc);
  }
  printf("%-*s  %-8s  %-6s  %-*s  %-*s  %-*s  %s\n", wname, "NAME", "STATUS", "TYPE", wdef, "DEFAULT", wcur, "VALUE",
         wsrc, "SOURCE", "DESCRIPTION");
  for (int id = 0; id < BRAID_PARAM_COUNT; id++) {
    enum braid_param p = (enum braid_param)id;
    if (!all && !braid_param_row(p)->declared) {
      hidden++;
      continue;
    }
    printf("%-*s  %-8s  %-6s  %-*s  %-*s  %-*s  %s\n", wname, braid_param_name(p), braid_param_status_name(p),
           type_name(p), wdef, default_value(p, def, sizeof(def)), wcur, current_value(p, cur, sizeof(cur)), wsrc,
           braid_param_source(p), braid_param_doc(p));
  }
  if (hidden) printf("\n%d more names NCCL reads are ACCEPTED and ignored (braid-info --all lists them).\n", hidden);
}

/* SIGUSR1 to pid, then print the file its flight recorder writes (core/flight.c). */
static int dump_pid(const char* arg) {
  char* end = NULL;
  long pid = strtol(arg, &end, 10);
  char path[512];
  if (end == arg || *end != '\0' || pid <= 0) {
    fprintf(stderr, "braid-info: --dump: invalid argument PID '%s'\n", arg);
    return 2;
  }
  const char* dir = getenv("TMPDIR");
  snprintf(path, sizeof(path), "%s/braid-flight-%ld.txt", dir != NULL && dir[0] ? dir : "/tmp", pid);
  unlink(path);
  if (kill((pid_t)pid, SIGUSR1) != 0) {
    fprintf(stderr, "braid-info: --dump: cannot signal process %ld: %s\n", pid, strerror(errno));
    return 1;
  }
  for (int i = 0; i < 500; i++) { /* 5 s */
    FILE* f = fopen(path, "r");
    if (f != NULL) {
      char buf[4096];
      size_t n;
      while ((n = fread(buf, 1, sizeof(buf), f)) > 0) fwrite(buf, 1, n, stdout);
      fclose(f);
      unlink(path);
      return 0;
    }
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr,
          "braid-info: --dump: process %ld wrote no %s within 5 s (no braid communicator, BRAID_FLIGHT_CALLS=0, "
          "or SIGUSR1 is the application's)\n",
          pid, path);
  return 1;
}

int main(int argc, char** argv) {
  int all = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(argv[i], "--version") == 0) {
      print_version();
      return 0;
    }
    if (strcmp(argv[i], "--dump") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "braid-info: --dump needs a PID\n");
        return 2;
      }
      return dump_pid(argv[i + 1]);
    }
    if (strcmp(argv[i], "--all") == 0) {
      all = 1;
      continue;
    }
    fprintf(stderr, "braid-info: unknown argument '%s'\n", argv[i]);
    usage(stderr);
    return 2;
  }
  print_version();
  printf("build: %s\n", braid_build_options());
  printf("\nparameters (NCCL_ENV_PLUGIN, environment, NCCL_CONF_FILE or ~/.nccl.conf, /etc/nccl.conf):\n\n");
  print_params(all);
  return 0;
}
