/*
 * fuzz_param.c - libFuzzer target: the parameter parser (src/base/param.c). The input is an
 * NCCL_CONF_FILE (NAME=value lines); its first line's value is also given to one variable
 * through the environment (byte 0 picks which). Every parameter is then read. The log goes
 * to /dev/null, and no input may name a file to write (lines naming *_FILE are dropped).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/param.h"

static char path[4096];

static void remove_conf(void) {
  unlink(path);
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* tmp = getenv("TMPDIR");
  snprintf(path, sizeof(path), "%s/braid-fuzz-param-%d.conf", tmp != NULL && tmp[0] ? tmp : "/tmp", (int)getpid());
  atexit(remove_conf);
  setenv("NCCL_CONF_FILE", path, 1);
  setenv("HOME", "/nonexistent", 1); /* no ~/.nccl.conf of the machine's */
  setenv("NCCL_DEBUG_FILE", "/dev/null", 1);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  FILE* f = fopen(path, "w");
  if (f == NULL) return 0;
  for (const char *p = (const char*)data + 1, *end = (const char*)data + size; p < end;) {
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    const char* stop = nl ? nl + 1 : end;
    if (memmem(p, (size_t)(stop - p), "_FILE", 5) == NULL) fwrite(p, 1, (size_t)(stop - p), f);
    p = stop;
  }
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
  int file = strstr(name, "_FILE") != NULL;
  if (!file) setenv(name, value, 1);
  braid_param_reload();
  for (int i = 0; i < BRAID_PARAM_COUNT; i++) {
    if (braid_param_is_int((enum braid_param)i))
      (void)braid_param_int((enum braid_param)i);
    else
      (void)braid_param_str((enum braid_param)i);
    (void)braid_param_source((enum braid_param)i);
  }
  if (!file) unsetenv(name);
  return 0;
}
