/*
 * plugin_open.c - NCCL's search rules for plugin libraries (plugin_open.h).
 */
#include "base/plugin_open.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "base/debug.h"

/* dlopen, saying at INFO why not (a missing file is collected into `missing`). */
static void* try_open(const char* kind, uint64_t subsys, const char* lib, char* missing, size_t len) {
  void* dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (dl != NULL) return dl;
  const char* why = dlerror();
  if (why == NULL || strstr(why, "No such file") != NULL) {
    size_t used = strlen(missing);
    snprintf(missing + used, len - used, " %s", lib);
  } else {
    BRAID_INFO(subsys, "%s/Plugin: %s: %s", kind, lib, why);
  }
  return NULL;
}

void* braid_plugin_open(const char* kind, const char* prefix, uint64_t subsys, const char* setting, char* lib,
                        size_t len) {
  char missing[1024] = "";
  if (setting == NULL || setting[0] == '\0')
    snprintf(lib, len, "%s.so", prefix);
  else
    snprintf(lib, len, "%s", setting);
  void* dl = try_open(kind, subsys, lib, missing, sizeof(missing));
  size_t n = setting ? strlen(setting) : 0;
  int lib_name = n >= 3 && strncmp(setting, "lib", 3) == 0 && strcmp(setting + n - 3, ".so") == 0;
  if (dl == NULL && n > 0 && strchr(setting, '/') == NULL && !lib_name) {
    snprintf(lib, len, "%s-%s.so", prefix, setting);
    dl = try_open(kind, subsys, lib, missing, sizeof(missing));
  }
  if (dl == NULL && missing[0]) BRAID_INFO(subsys, "%s/Plugin: Could not find:%s", kind, missing);
  return dl;
}

const char* braid_plugin_path(void* dl, const char* lib) {
  struct link_map* lm = NULL;
  if (dl != NULL && dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL && lm->l_name[0])
    return lm->l_name;
  return lib;
}
