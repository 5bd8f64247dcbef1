/* owner.h - who owns a sandbox (docs/architecture.md, Labels): the owning process as
 * boot id, pid and start time. A sandbox is an orphan only when its owner is
 * provably gone: another boot, or no live process with that pid and start
 * time. */
#ifndef SBX_SANDBOX_OWNER_H
#define SBX_SANDBOX_OWNER_H

#include <stddef.h>
#include <sys/types.h>

/* "boot=<id>;pid=<n>;start=<ticks>" for the calling process. */
int sbx_owner_self(char *buf, size_t len);
/* 1 alive (or unknown format: never touch), 0 provably gone. */
int sbx_owner_alive(const char *label);
/* The test scope (docs/testing.md): SBX_TEST_LABEL's value when it is set
 * and valid (1-63 of [A-Za-z0-9_.-]), else NULL. Every sandbox this process
 * creates then carries sbx.test=<value>, and its orphan sweeps look only at
 * sandboxes with that label, so tests side by side on one engine never
 * count or remove each other's. Set but invalid: NULL and *bad set to 1. */
const char *sbx_owner_test_scope(int *bad);
/* Start time of a process in clock ticks since boot, or 0. */
unsigned long long sbx_proc_start_time(pid_t pid);

#endif
