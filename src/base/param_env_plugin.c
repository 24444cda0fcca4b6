/*
 * param_env_plugin.c - loading NCCL's env plugin (env_plugin.h) with NCCL's search rules
 * (src/plugin/plugin_open.cc, src/plugin/env.cc of NCCL 2.30): NCCL_ENV_PLUGIN unset tries
 * libnccl-env.so; "none" disables; a value is tried as given, then, when it is neither a path
 * nor a lib*.so name, as libnccl-env-<value>.so. The newest ABI found wins (v2, then v1); a
 * plugin whose init fails is closed and the environment is used as without one. The plugin
 * stays loaded for the life of the process; its finalize runs at exit.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/debug.h"
#include "base/env_plugin.h"
#include "base/plugin_open.h"

static struct braid_env_v2 plugin_v2;        /* the plugin's table, v1 adapted */
static const struct braid_env_v1* plugin_v1; /* a v1 plugin's own table (its init) */
static const struct braid_env_v2* plugin;    /* NULL: none */
static char plugin_source[640];

/* NCCL's logger signature over braid's logger (same level and subsystem numbering). */
static void plugin_log(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  braid_debug_vlog(level, (uint64_t)flags, file, line, fmt, ap);
  va_end(ap);
}

static ncclResult_t v1_init(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, braid_env_logger_t log) {
  (void)log;
  return plugin_v1->init(major, minor, patch, suffix);
}

/* The table of the newest ABI the library exports, or NULL. */
static const struct braid_env_v2* table_of(void* dl, const char* lib) {
  const struct braid_env_v2* v2 = dlsym(dl, "ncclEnvPlugin_v2");
  if (v2 != NULL && v2->init != NULL && v2->getEnv != NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_ENV, "ENV/Plugin: Using %s (v2)", v2->name ? v2->name : lib);
    return v2;
  }
  const struct braid_env_v1* v1 = dlsym(dl, "ncclEnvPlugin_v1");
  if (v1 != NULL && v1->init != NULL && v1->getEnv != NULL) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_ENV, "ENV/Plugin: Using %s (v1)", v1->name ? v1->name : lib);
    plugin_v1 = v1;
    plugin_v2 = (struct braid_env_v2){v1->name, v1_init, v1->finalize, v1->getEnv};
    return &plugin_v2;
  }
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_ENV, "External env plugin %s is unsupported (no ncclEnvPlugin_v2 or _v1)", lib);
  return NULL;
}

static void plugin_finalize(void) {
  const struct braid_env_v2* p = __atomic_exchange_n(&plugin, NULL, __ATOMIC_ACQ_REL);
  if (p != NULL && p->finalize != NULL) p->finalize();
}

int braid_env_plugin_open(const char* setting) {
  char lib[512];
  if (setting != NULL && strcasecmp(setting, "none") == 0) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_ENV, "ENV/Plugin: NCCL_ENV_PLUGIN=none, reading the environment");
    return 0;
  }
  void* dl = braid_plugin_open("ENV", "libnccl-env", BRAID_LOG_INIT | BRAID_LOG_ENV, setting, lib, sizeof(lib));
  if (dl == NULL) return 0;
  const struct braid_env_v2* p = table_of(dl, lib);
  if (p == NULL) goto err_close;
  ncclResult_t res = p->init(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, NCCL_SUFFIX, plugin_log);
  if (res != ncclSuccess) {
    BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_ENV, "ENV/Plugin: %s: init returned %d, reading the environment instead", lib,
               (int)res);
    goto err_close;
  }
  snprintf(plugin_source, sizeof(plugin_source), "env plugin %s", p->name ? p->name : lib);
  __atomic_store_n(&plugin, p, __ATOMIC_RELEASE);
  atexit(plugin_finalize);
  BRAID_INFO(BRAID_LOG_INIT | BRAID_LOG_ENV, "Successfully loaded external env plugin %s", lib);
  return 1;
err_close:
  plugin_v1 = NULL;
  dlclose(dl);
  return 0;
}

char* braid_env_plugin_dup(const char* name) {
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  const struct braid_env_v2* p = __atomic_load_n(&plugin, __ATOMIC_ACQUIRE);
  if (p == NULL) return NULL;
  /* The plugin's answer lives until its next getEnv of the same name: ask and copy as one. */
  pthread_mutex_lock(&lock);
  const char* v = p->getEnv(name);
  char* copy = v != NULL ? strdup(v) : NULL;
  pthread_mutex_unlock(&lock);
  return copy;
}

const char* braid_env_plugin_source(void) {
  return __atomic_load_n(&plugin, __ATOMIC_ACQUIRE) != NULL ? plugin_source : NULL;
}
