/*
 * deny_cma.h - tests: forbid cross-memory attach in this process and its children, as a
 * container's seccomp policy does: process_vm_readv and process_vm_writev fail with EPERM.
 * A seccomp filter (no libseccomp needed); inherited across fork and exec.
 */
#ifndef BRAID_TEST_DENY_CMA_H
#define BRAID_TEST_DENY_CMA_H

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

/* Deny process_vm_writev only (a policy that lets a process read a peer but not write it) where
 * `write_only`, else both. 0, or -1 with errno set. */
static inline int deny_cma_calls(int write_only) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, write_only ? __NR_process_vm_writev : __NR_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

/* Both calls denied. 0, or -1 with errno set. */
static inline int deny_cma(void) {
  return deny_cma_calls(0);
}

/* Only process_vm_writev denied: the fallbacks of the split Reduce's store and the pushed
 * all-reduce (kernels/direct.h). 0, or -1 with errno set. */
static inline int deny_cma_write(void) {
  return deny_cma_calls(1);
}

#endif
