/*
 * env_plugin.h - NCCL's env plugin (NCCL_ENV_PLUGIN, NCCL 2.28+): a library exporting
 * ncclEnvPlugin_v2 or _v1 whose getEnv answers for the environment. param.c asks it before
 * the environment and the conf files (param_env_plugin.c loads it; the ABI is NCCL's
 * src/include/plugin/env/env_v{1,2}.h).
 */
#ifndef BRAID_ENV_PLUGIN_H
#define BRAID_ENV_PLUGIN_H

#include <stdint.h>

#include "nccl.h"

/* NCCL's ncclDebugLogger_t (nccl_common.h): level and subsystem numbering are NCCL's. */
typedef void (*braid_env_logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

/* ncclEnv_v2_t and ncclEnv_v1_t, field for field. */
struct braid_env_v2 {
  const char* name;
  ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, braid_env_logger_t log);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
};
struct braid_env_v1 {
  const char* name;
  ncclResult_t (*init)(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char* name);
};

/* Looks for the plugin as NCCL does: `setting` NULL or empty: libnccl-env.so; "none": no
 * plugin; else the name as given (a path or a library name), then libnccl-env-<setting>.so.
 * Loads it, calls its init, and logs what happened at INFO (INIT|ENV). Returns 1 when a plugin
 * is in use from now on. Called once per process, after the logger is configured. */
int braid_env_plugin_open(const char* setting);
/* A malloc'ed copy of the plugin's answer for `name` (NULL: no plugin, or it has no value);
 * calls into the plugin are serialised. */
char* braid_env_plugin_dup(const char* name);
/* "env plugin <its name>", or NULL without a plugin. */
const char* braid_env_plugin_source(void);

#endif /* BRAID_ENV_PLUGIN_H */
