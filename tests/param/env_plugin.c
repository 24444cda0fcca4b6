/*
 * env_plugin.c - a test env plugin with NCCL's ABI (ncclEnvPlugin_v2 / _v1 of NCCL's
 * src/include/plugin/env/): it answers NCCL_BUFFSIZE=1048576 and BRAID_TIMEOUT=11 whatever
 * the environment says, hides nothing else (getenv for every other name), and logs through
 * the logger NCCL hands to v2 plugins. Built by tests/param/run.sh in variants:
 *   (default)        exports ncclEnvPlugin_v2 and _v1
 *   -DENV_V1_ONLY    exports ncclEnvPlugin_v1 only
 *   -DENV_FAIL_INIT  its init fails (NCCL then reads the environment without it)
 *   -DENV_NO_TABLE   exports no plugin table at all
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult_t; /* ncclSuccess = 0, ncclInternalError = 3 */
typedef void (*logger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

static const char* get_env(const char* name) {
  if (strcmp(name, "NCCL_BUFFSIZE") == 0) return "1048576";
  if (strcmp(name, "BRAID_TIMEOUT") == 0) return "11";
  return getenv(name);
}

static ncclResult_t init_v2(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix, logger_t log) {
  (void)suffix;
#ifdef ENV_FAIL_INIT
  return 3;
#endif
  if (log) log(3, 0x80, __FILE__, __LINE__, "braid-test env plugin: init for NCCL %d.%d.%d", major, minor, patch);
  return 0;
}

static ncclResult_t init_v1(uint8_t major, uint8_t minor, uint8_t patch, const char* suffix) {
  return init_v2(major, minor, patch, suffix, NULL);
}

static ncclResult_t finalize(void) {
  return 0;
}

struct env_v2 {
  const char* name;
  ncclResult_t (*init)(uint8_t, uint8_t, uint8_t, const char*, logger_t);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char*);
};
struct env_v1 {
  const char* name;
  ncclResult_t (*init)(uint8_t, uint8_t, uint8_t, const char*);
  ncclResult_t (*finalize)(void);
  const char* (*getEnv)(const char*);
};

#ifndef ENV_NO_TABLE
#ifndef ENV_V1_ONLY
__attribute__((visibility("default")))
const struct env_v2 ncclEnvPlugin_v2 = {"braid-test", init_v2, finalize, get_env};
#endif
__attribute__((visibility("default")))
const struct env_v1 ncclEnvPlugin_v1 = {"braid-test-v1", init_v1, finalize, get_env};
#endif
