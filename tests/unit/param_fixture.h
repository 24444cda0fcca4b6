/*
 * param_fixture.h - what the parameter suites (test_param*.c, test_fault.c) share: an
 * environment without NCCL_* / BRAID_* variables, HOME in a fresh temporary directory, log
 * output captured in a file, and small text helpers.
 */
#ifndef BRAID_TEST_PARAM_FIXTURE_H
#define BRAID_TEST_PARAM_FIXTURE_H

#include <stdio.h>

extern char param_tmpdir[64];   /* this test's HOME */
extern char param_logpath[128]; /* where log_to_file() sends the log */

/* Check fixtures: clean environment and temporary HOME, then remove both. */
void param_setup(void);
void param_teardown(void);
/* Unsets every NCCL_* / BRAID_* variable. */
void param_clear_env(void);
/* Logs at `level` into param_logpath (subsystems `subsys`, NULL: default); re-reads all. */
void log_to_file(const char* level, const char* subsys);
/* The whole file (at most 1 MiB), "" when missing; free() it. */
char* read_file(const char* path);
int count_of(const char* text, const char* needle);
/* Writes `body` to param_tmpdir/name; returns the path (a static buffer). */
char* write_conf(const char* name, const char* body);
/* 1 when /etc/nccl.conf on this machine sets `name` (then its default cannot be checked). */
int system_conf_sets(const char* name);
/* tests/param/<name> from the repository root or a build folder; NULL when absent. */
FILE* open_data(const char* name);

#endif /* BRAID_TEST_PARAM_FIXTURE_H */
