/*
 * fault.h - BRAID_FAULT_INJECT, the test hook that fails named calls on purpose (STYLE.md 15:
 * every cleanup path should run under a test). The check macros of base/check.h consult it,
 * so every call they wrap is a site without further code:
 *
 *   BRAID_FAULT_INJECT=SITE[@FUNCTION][:N|:*][,...]
 *     SITE      calloc (BRAID_CALLOC_GOTO), or the name a BRAID_SYSCHECK_GOTO /
 *               BRAID_PTHREADCHECK_GOTO call gives (socket, listen, shm_open, eventfd,
 *               pthread_create, ...)
 *     FUNCTION  only calls made in this C function (e.g. calloc@braid_comm_alloc)
 *     N         the N-th matching call of the process fails (default 1); * every one
 *
 * An injected failure looks like the real one (calloc: NULL; a syscall: -1 with errno EIO;
 * a pthread call: EAGAIN) and is announced by an INFO line naming the site and the count.
 * Counts start again whenever the parameters are re-read (and in a forked child).
 */
#ifndef BRAID_FAULT_H
#define BRAID_FAULT_H

/* -1: not looked at yet, 0: BRAID_FAULT_INJECT unset, 1: set. */
extern int braid_fault_armed;

/* 1 when this call of `site` made in `function` is to fail. */
int braid_fault_hit(const char* site, const char* function);
/* The parameters changed: read BRAID_FAULT_INJECT again at the next check (param.c). */
void braid_fault_rearm(void);

#define BRAID_FAULT(site) \
  (__builtin_expect(__atomic_load_n(&braid_fault_armed, __ATOMIC_RELAXED) != 0, 0) && braid_fault_hit(site, __func__))

#endif /* BRAID_FAULT_H */
