/*
 * cma.h - cross-memory attach (process_vm_readv/writev) between local processes: the shm
 * transport's direct path reads a peer's user buffer in one copy instead of two through the
 * FIFO, and the split Reduce writes the non-root's reduced half into the root's output.
 *
 * Whether it is allowed (same user, ptrace policy, seccomp, container) is decided per
 * connection at setup by a probe: every process publishes, in its peer info, the address of
 * a word holding its pid_hash (braid_cma_probe_word); the receiver reads it back from the
 * sender's process. A failed probe or a mismatch (another pid namespace: the pid names some
 * other process) means no direct path for that connection.
 */
#ifndef BRAID_TRANSPORT_CMA_H
#define BRAID_TRANSPORT_CMA_H

#include <stddef.h>
#include <stdint.h>

/* The address (in this process) of a word holding `pid_hash`, for peers to probe. */
uint64_t braid_cma_probe_word(uint64_t pid_hash);

/* 0 when process `pid`'s word at `addr` reads back as `expect`; else an errno value
 * (EPERM, ESRCH, ...; EIO for a mismatch). */
int braid_cma_probe(int pid, uint64_t addr, uint64_t expect);

/* Copy `bytes` at `src` in process `pid` to `dst`: 0, or an errno value. */
int braid_cma_read(int pid, void* dst, uint64_t src, size_t bytes);
/* The other way: `bytes` from `src` here to address `dst` in process `pid` (process_vm_writev,
 * which the kernel permits exactly where it permits the read). 0, or an errno. */
int braid_cma_write(int pid, uint64_t dst, const void* src, size_t bytes);

/* Copy `bytes` at `src` here to `dst` in process `pid` (process_vm_writev): 0, or an errno
 * value. */
int braid_cma_write(int pid, uint64_t dst, const void* src, size_t bytes);

/* braid_cma_probe, then the same word written back with process_vm_writev (policies may allow
 * reading a process and not writing it): 0 when both work. */
int braid_cma_probe_write(int pid, uint64_t addr, uint64_t expect);

#endif
