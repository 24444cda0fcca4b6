/*
 * fault.h - BRAID_FAULT_INJECT, the test hook that makes a chosen call fail, or the process die
 * or stop, at a named point, so that tests reach error paths and failure windows on purpose
 * (docs/CONVENTIONS.md 15: every cleanup path should run under a test).
 *
 *   BRAID_FAULT_INJECT=<point>[@<function>][#<n>|#*][:fail|:kill|:stop][,...]
 *
 * The n-th time (default 1; * every time) this process reaches <point> (made in C function
 * <function>, when given): `fail` (the default) makes the call fail there, `kill` raises
 * SIGKILL, `stop` raises SIGSTOP (a rank that hangs with its sockets open). Points:
 *   - the named points, braid_fault_hit(): bootstrap.send and bootstrap.recv
 *     (braid_bootstrap_send/recv, on entry), init.barrier (before init's last barrier); the
 *     hook WARNs "fault injected at <point>" and the caller returns an error;
 *   - every call the check macros of base/check.h wrap, BRAID_FAULT(): calloc
 *     (BRAID_CALLOC_GOTO), and the name a BRAID_SYSCHECK_GOTO / BRAID_PTHREADCHECK_GOTO call
 *     gives (socket, listen, shm_open, eventfd, pthread_create, ...). The failure looks like the
 *     real one (calloc: NULL; a syscall: -1 with errno EIO; a pthread call: EAGAIN), the macro
 *     WARNs as for a real one, the hook says so at INFO.
 * Counts start again whenever the parameter's value changes (a reload, a forked child).
 * Unset: one relaxed load and a branch per point.
 */
#ifndef BRAID_FAULT_H
#define BRAID_FAULT_H

/* -1: not looked at yet, 0: BRAID_FAULT_INJECT unset, 1: set. */
extern int braid_fault_armed;

/* At a named point: 1 when the caller must fail on purpose here (this WARNs, naming it). */
int braid_fault_hit(const char* point);
/* At a check macro's call of `site` in `function`: 1 when it is to fail (INFO names it). */
int braid_fault_site(const char* site, const char* function);
/* The parameters changed: read BRAID_FAULT_INJECT again at the next point (param.c). */
void braid_fault_rearm(void);

#define BRAID_FAULT(site) \
  (__builtin_expect(__atomic_load_n(&braid_fault_armed, __ATOMIC_RELAXED) != 0, 0) && braid_fault_site(site, __func__))

#endif /* BRAID_FAULT_H */
