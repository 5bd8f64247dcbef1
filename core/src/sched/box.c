/* box.c - names, the clock, and measuring the box. */
#include "sched/sched_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"

const double sbx_sched_wait_bounds[SBX_SCHED_WAIT_BUCKETS] = {1,   5,   10,  30,   60,  120,
                                                              300, 600, 900, 1800, 3600};

const char *sbx_pool_name(enum sbx_pool pool)
{
    return pool == SBX_POOL_CI ? "ci" : pool == SBX_POOL_AGENT ? "agent" : "unknown";
}

int sbx_pool_parse(const char *name)
{
    if (name == NULL) {
        return -1;
    }
    if (strcmp(name, "ci") == 0) {
        return SBX_POOL_CI;
    }
    if (strcmp(name, "agent") == 0) {
        return SBX_POOL_AGENT;
    }
    return -1;
}

const char *sbx_job_class_name(enum sbx_job_class cls)
{
    return cls == SBX_CLASS_HEAVY ? "heavy" : cls == SBX_CLASS_LIGHT ? "light" : "unknown";
}

int sbx_job_class_parse(const char *name)
{
    if (name == NULL) {
        return -1;
    }
    if (strcmp(name, "light") == 0) {
        return SBX_CLASS_LIGHT;
    }
    if (strcmp(name, "heavy") == 0) {
        return SBX_CLASS_HEAVY;
    }
    return -1;
}

const char *sbx_job_result_name(enum sbx_job_result result)
{
    static const char *const names[SBX_RESULT_COUNT] = {"ok", "failed", "cancelled", "interrupted"};

    return (unsigned)result < SBX_RESULT_COUNT ? names[result] : "unknown";
}

int64_t sbx_clock_real(void *ctx)
{
    struct timespec ts;

    (void)ctx;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sbx_box_measure(const char *meminfo_path, struct sbx_box_capacity *out, sbx_error_t **err)
{
    const char *path = meminfo_path ? meminfo_path : "/proc/meminfo";
    cleanup_fclose FILE *f = fopen(path, "re");
    char line[256];
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    long long kb = -1;

    if (f == NULL) {
        return sbx_error_set(err, errno, "box capacity: cannot open %s: %s", path, strerror(errno));
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemTotal: %lld kB", &kb) == 1) {
            break;
        }
    }
    if (kb <= 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "box capacity: %s has no MemTotal line", path);
    }
    if (ncpu < 1) {
        return sbx_error_set(err, errno ? errno : SBX_E_GENERIC,
                             "box capacity: sysconf(_SC_NPROCESSORS_ONLN) failed");
    }
    out->cpus = (double)ncpu;
    out->memory = (int64_t)kb * 1024;
    return 0;
}
