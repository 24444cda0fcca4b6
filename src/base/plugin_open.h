/*
 * plugin_open.h - NCCL's search rules for plugin libraries (src/plugin/plugin_open.cc of NCCL
 * 2.30), shared by the env, net, tuner and profiler plugins: a setting NULL or empty tries
 * `<prefix>.so`; otherwise the setting as given (a path or a library name), then, when it is
 * neither a path nor a lib*.so name, `<prefix>-<setting>.so`. Files that do not exist are
 * listed in one INFO line "<KIND>/Plugin: Could not find: a b"; any other dlopen failure gets
 * its own "<KIND>/Plugin: <lib>: <why>". "none" is the caller's business.
 */
#ifndef BRAID_PLUGIN_OPEN_H
#define BRAID_PLUGIN_OPEN_H

#include <stddef.h>
#include <stdint.h>

/* The dlopen handle (RTLD_NOW | RTLD_LOCAL), with the name that opened in `lib`; NULL. */
void* braid_plugin_open(const char* kind, const char* prefix, uint64_t subsys, const char* setting, char* lib,
                        size_t len);
/* The loaded file's path (for INFO lines), or `lib` when the loader does not say. */
const char* braid_plugin_path(void* dl, const char* lib);

#endif /* BRAID_PLUGIN_OPEN_H */
