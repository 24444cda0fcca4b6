/*
 * fault.h - the test hook BRAID_FAULT_INJECT: make a chosen call fail, or the process die or
 * stop, at a named point, so that tests reach error paths and failure windows on purpose.
 *
 *   BRAID_FAULT_INJECT=<point>[#<n>][:fail|kill|stop]
 *
 * At the n-th time (default 1) this process reaches <point>: `fail` (the default) makes the
 * call fail there (the caller WARNs and returns an error), `kill` raises SIGKILL, `stop`
 * raises SIGSTOP (a rank that hangs with its sockets open). Points: bootstrap.send and
 * bootstrap.recv (braid_bootstrap_send/recv, on entry), init.barrier (before init's last
 * barrier). Unset: one load and a compare per point.
 */
#ifndef BRAID_FAULT_H
#define BRAID_FAULT_H

/* 1 when the caller must fail on purpose here (it says so: "fault injected at <point>"). */
int braid_fault_hit(const char* point);

#endif /* BRAID_FAULT_H */
