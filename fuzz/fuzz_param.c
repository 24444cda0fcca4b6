/*
 * fuzz_param.c - libFuzzer target: the parameter parser (src/base/param.c). The input is an
 * NCCL_CONF_FILE (NAME=value lines); its first line's value is also given to one variable
 * through the environment (byte 0 picks which). Every parameter is then read.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"

static char path[64];

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  snprintf(path, sizeof(path), "/tmp/braid-fuzz-param-%d.conf", (int)getpid());
  setenv("NCCL_CONF_FILE", path, 1);
  setenv("HOME", "/nonexistent", 1); /* no ~/.nccl.conf of the machine's */
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  FILE* f = fopen(path, "w");
  if (f == NULL) return 0;
  fwrite(data + 1, 1, size - 1, f);
  fclose(f);
  /* the first line's text after '=' (NUL-free) as an environment value too */
  char value[256];
  size_t n = 0;
  const char* eq = memchr(data + 1, '=', size - 1);
  for (const char* p = eq ? eq + 1 : NULL; p && p < (const char*)data + size && *p != '\n' && *p && n < 255; p++)
    value[n++] = *p;
  value[n] = '\0';
  enum braid_param id = (enum braid_param)(data[0] % BRAID_PARAM_COUNT);
  const char* name = braid_param_name(id);
  if (id != BRAID_PARAM_CONF_FILE && id != BRAID_PARAM_DEBUG_FILE) setenv(name, value, 1);
  braid_param_reload();
  for (int i = 0; i < BRAID_PARAM_COUNT; i++) {
    if (braid_param_is_int((enum braid_param)i))
      (void)braid_param_int((enum braid_param)i);
    else
      (void)braid_param_str((enum braid_param)i);
    (void)braid_param_source((enum braid_param)i);
  }
  if (id != BRAID_PARAM_CONF_FILE && id != BRAID_PARAM_DEBUG_FILE) unsetenv(name);
  return 0;
}
