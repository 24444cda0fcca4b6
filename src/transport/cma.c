/*
 * cma.c - see cma.h.
 */
#include "transport/cma.h"

#include <errno.h>
#include <sys/uio.h>

static volatile uint64_t probe_word;

uint64_t braid_cma_probe_word(uint64_t pid_hash) {
  probe_word = pid_hash;
  return (uint64_t)(uintptr_t)&probe_word;
}

int braid_cma_read(int pid, void* dst, uint64_t src, size_t bytes) {
  char* d = dst;
  while (bytes > 0) {
    struct iovec local = {d, bytes}, remote = {(void*)(uintptr_t)src, bytes};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    d += n;
    src += (uint64_t)n;
    bytes -= (size_t)n;
  }
  return 0;
}

int braid_cma_write(int pid, uint64_t dst, const void* src, size_t bytes) {
  const char* s = src;
  while (bytes > 0) {
    struct iovec local = {(void*)s, bytes}, remote = {(void*)(uintptr_t)dst, bytes};
    ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    s += n;
    dst += (uint64_t)n;
    bytes -= (size_t)n;
  }
  return 0;
}

int braid_cma_probe(int pid, uint64_t addr, uint64_t expect) {
  uint64_t got = 0;
  if (pid <= 0 || addr == 0) return EINVAL;
  int err = braid_cma_read(pid, &got, addr, sizeof(got));
  if (err) return err;
  return got == expect ? 0 : EIO;
}
