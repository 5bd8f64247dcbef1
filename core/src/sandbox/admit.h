/* admit.h - admission of sandboxes to this box (docs/operations.md,
 * "Admission").
 *
 * Memory is not compressible: a sandbox is admitted only while the sum of the
 * memory limits of the admitted sandboxes, its own included, fits
 * box.memory - box.host_reserve. Embedded tasks (`sbx run`, the keeper of
 * `sbx task start`, `sbx mcp`) share one ledger across processes: the slot
 * lock files, each holding the owner and the memory of the task that holds
 * its lock, read under slots/admit.lock. The runner sizes its pools from the
 * same budget (sched.c).
 *
 * CPU is compressible: no sandbox's quota goes above the box's CPUs minus
 * box.cpu_reserve, and the Docker provider gives sandboxes a CPU weight below
 * the host's default. */
#ifndef SBX_SANDBOX_ADMIT_H
#define SBX_SANDBOX_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "util/error.h"

struct sbx_box_budget {
    int64_t memory;     /* box.memory, or MemTotal */
    int64_t reserve;    /* box.host_reserve, or sbx_admit_default_reserve(memory) */
    int64_t admit;      /* memory - reserve: what all admitted limits may add up to */
    double cpus;        /* online CPUs */
    double cpu_reserve; /* box.cpu_reserve, or sbx_admit_default_cpu_reserve(cpus) */
    double cpu_max;     /* cpus - cpu_reserve: no sandbox's CPU quota above it */
};

/* max(1G, memory / 10), never all of memory. */
int64_t sbx_admit_default_reserve(int64_t memory);
/* 0.5 CPU on a box of 2 CPUs or more, a quarter of the box below that. */
double sbx_admit_default_cpu_reserve(double cpus);

/* The budget from the configuration and the measured box: meminfo is the
 * file with MemTotal (NULL: /proc/meminfo), cpus the online CPUs (<= 0:
 * measured). Fails when the reserves leave nothing for a sandbox. */
int sbx_box_budget(const struct sbx_config *cfg, const char *meminfo, double cpus,
                   struct sbx_box_budget *out, sbx_error_t **err);

enum sbx_admit_verdict {
    SBX_ADMIT_OK = 0, /* fits now */
    SBX_ADMIT_WAIT,   /* fits once others end */
    SBX_ADMIT_NEVER,  /* larger than the whole budget */
};

/* want: the new sandbox's memory; used: the sum of the admitted ones. */
enum sbx_admit_verdict sbx_admit_check(const struct sbx_box_budget *b, int64_t used, int64_t want);

/* "3G", "1536M", or "2.4G" when not a whole number of M. */
void sbx_admit_size(int64_t bytes, char *buf, size_t len);

/* The memory a task with these limits takes on the box: its sandbox, and as
 * much again when it asks for nested containers (provider_docker's sidecar
 * has the same limits). */
int64_t sbx_admit_task_memory(int64_t limit, int nested_containers);

/* The ledger: the sum of the memory recorded in slot files whose lock is held
 * by a live owner, and how many such slots there are. Slot files whose lock
 * is free, or whose recorded owner is provably dead, count nothing. */
int64_t sbx_ledger_used(const char *state, int *held);

/* Called with a line saying what the caller waits for (no "sbx: " prefix,
 * no newline), and with NULL between lines (every poll) to ask whether to go
 * on. Returns 0, or -1 to give up waiting (cancelled). */
typedef int (*sbx_admit_wait_fn)(void *ud, const char *line);

struct sbx_admit_req {
    const char *task; /* for messages and the slot file */
    int max_slots;    /* box.max_sandboxes */
    int64_t memory;   /* sbx_admit_task_memory() of the task */
    const struct sbx_box_budget *budget;
    const volatile int *cancel; /* may be NULL; read atomically (changed, issue 31) */
    sbx_admit_wait_fn on_wait;  /* NULL: the line goes to stderr */
    void *wait_ud;
    unsigned poll_ms; /* between attempts; 0: 200 */
};

/* Takes a slot whose lock is free and whose memory fits the budget, records
 * this process and the memory in it, and returns the held fd. Waits (telling
 * on_wait at once and every 30 s) while no slot is free or the memory does
 * not fit; refuses at once (SBX_E_POLICY) when the memory can never fit. */
int sbx_slot_acquire(const char *state, const struct sbx_admit_req *req, sbx_error_t **err);

#endif
