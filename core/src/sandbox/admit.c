/* admit.c - the box's budget, the admission arithmetic and the slot ledger. */
#include "sandbox/admit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/owner.h"
#include "sandbox/statedir.h"
#include "sched/sched.h"
#include "util/cleanup.h"
#include "util/units.h"
#include "util/xalloc.h"

#define GIB (1LL << 30)
#define MIB (1LL << 20)
/* a slot file holds three short lines */
#define SLOT_TEXT_MAX 512

int64_t sbx_admit_default_reserve(int64_t memory)
{
    int64_t r = memory / 10;

    if (r < GIB) {
        r = GIB;
    }
    if (r >= memory) {
        r = memory / 2;
    }
    return r;
}

double sbx_admit_default_cpu_reserve(double cpus)
{
    return cpus >= 2.0 ? 0.5 : cpus / 4.0;
}

int sbx_box_budget(const struct sbx_config *cfg, const char *meminfo, double cpus,
                   struct sbx_box_budget *out, sbx_error_t **err)
{
    struct sbx_box_capacity cap = {0};
    char m[32], r[32];

    memset(out, 0, sizeof(*out));
    if (cfg->box.memory <= 0 || cpus <= 0) {
        if (sbx_box_measure(meminfo, &cap, err) < 0) {
            return -1;
        }
    }
    out->memory = cfg->box.memory > 0 ? cfg->box.memory : cap.memory;
    out->cpus = cpus > 0 ? cpus : cap.cpus;
    out->reserve =
        cfg->box.host_reserve >= 0 ? cfg->box.host_reserve : sbx_admit_default_reserve(out->memory);
    out->admit = out->memory - out->reserve;
    out->cpu_reserve =
        cfg->box.cpu_reserve >= 0 ? cfg->box.cpu_reserve : sbx_admit_default_cpu_reserve(out->cpus);
    out->cpu_max = out->cpus - out->cpu_reserve;
    if (out->admit <= 0) {
        sbx_admit_size(out->memory, m, sizeof(m));
        sbx_admit_size(out->reserve, r, sizeof(r));
        return sbx_error_set(err, SBX_E_CONFIG,
                             "box.host_reserve (%s) leaves nothing of the "
                             "box's memory (%s) for sandboxes",
                             r, m);
    }
    if (!(out->cpu_max > 0.0)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "box.cpu_reserve (%.3g) leaves nothing of the "
                             "box's %.3g CPUs for sandboxes",
                             out->cpu_reserve, out->cpus);
    }
    return 0;
}

enum sbx_admit_verdict sbx_admit_check(const struct sbx_box_budget *b, int64_t used, int64_t want)
{
    if (want > b->admit) {
        return SBX_ADMIT_NEVER;
    }
    if (used > b->admit - want) {
        return SBX_ADMIT_WAIT;
    }
    return SBX_ADMIT_OK;
}

void sbx_admit_size(int64_t bytes, char *buf, size_t len)
{
    if (bytes % MIB == 0 || bytes < MIB) {
        sbx_size_format(bytes, buf, len);
    }
    else {
        snprintf(buf, len, "%.1fG", (double)bytes / (double)GIB);
    }
}

int64_t sbx_admit_task_memory(int64_t limit, int nested_containers)
{
    return nested_containers ? limit * 2 : limit;
}

/* Parses "owner=...\nmemory=N\ntask=...\n": 0 when the owner is provably
 * gone, else 1 and *memory (0 when the holder recorded none). */
static int slot_text_parse(const char *text, int64_t *memory_out)
{
    const char *p = text;
    int64_t memory = 0;
    int alive = 1;

    while (*p != '\0') {
        size_t n = strcspn(p, "\n");
        char line[SLOT_TEXT_MAX];

        snprintf(line, sizeof(line), "%.*s", (int)n, p);
        if (strncmp(line, "owner=", 6) == 0) {
            alive = sbx_owner_alive(line + 6);
        }
        else if (strncmp(line, "memory=", 7) == 0) {
            char *end = NULL;
            long long v;

            errno = 0;
            v = strtoll(line + 7, &end, 10);
            if (errno == 0 && end != line + 7 && *end == '\0' && v > 0) {
                memory = (int64_t)v;
            }
        }
        p += n;
        if (*p == '\n') {
            p++;
        }
    }
    *memory_out = alive ? memory : 0;
    return alive;
}

/* 1 when name is "<digits>.lock" */
static int slot_name(const char *name)
{
    size_t d = strspn(name, "0123456789");

    return d > 0 && strcmp(name + d, ".lock") == 0;
}

int64_t sbx_ledger_used(const char *state, int *held)
{
    cleanup_free char *dir = xasprintf("%s/slots", state);
    DIR *d = opendir(dir);
    struct dirent *de;
    int64_t used = 0;

    if (held != NULL) {
        *held = 0;
    }
    if (d == NULL) {
        return 0;
    }
    while ((de = readdir(d)) != NULL) {
        cleanup_free char *path = NULL;
        char text[SLOT_TEXT_MAX];
        int64_t memory = 0;
        ssize_t n;
        int fd;

        if (!slot_name(de->d_name)) {
            continue;
        }
        path = xasprintf("%s/%s", dir, de->d_name);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
            continue;
        }
        if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
            close(fd); /* free: whatever it says is a past holder's */
            continue;
        }
        n = pread(fd, text, sizeof(text) - 1, 0);
        close(fd);
        text[n > 0 ? n : 0] = '\0';
        if (slot_text_parse(text, &memory)) {
            used += memory;
            if (held != NULL) {
                (*held)++;
            }
        }
    }
    closedir(d);
    return used;
}

/* A free slot among 0..max-1, locked; -1 when all are taken. */
static int slot_take(const char *dir, int max, sbx_error_t **err)
{
    for (int i = 0; i < max; i++) {
        cleanup_free char *path = xasprintf("%s/%d.lock", dir, i);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (fd < 0) {
            sbx_error_set(err, errno, "open %s: %s", path, strerror(errno));
            return -2;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            return fd;
        }
        close(fd);
    }
    return -1;
}

static int slot_record(int fd, const char *task, int64_t memory, sbx_error_t **err)
{
    char owner[160];
    char text[SLOT_TEXT_MAX];
    int n;

    sbx_owner_self(owner, sizeof(owner));
    n = snprintf(text, sizeof(text), "owner=%s\nmemory=%" PRId64 "\ntask=%s\n", owner, memory,
                 task ? task : "");
    if (n < 0 || (size_t)n >= sizeof(text) || ftruncate(fd, 0) < 0 ||
        pwrite(fd, text, (size_t)n, 0) != n) {
        return sbx_error_set(err, errno ? errno : EIO, "recording the slot: %s",
                             strerror(errno ? errno : EIO));
    }
    return 0;
}

static int tell(const struct sbx_admit_req *req, const char *line)
{
    if (req->on_wait != NULL) {
        return req->on_wait(req->wait_ud, line);
    }
    if (line != NULL) {
        fprintf(stderr, "sbx: %s\n", line);
    }
    return 0;
}

int sbx_slot_acquire(const char *state, const struct sbx_admit_req *req, sbx_error_t **err)
{
    cleanup_free char *dir = xasprintf("%s/slots", state);
    cleanup_free char *lock_path = xasprintf("%s/admit.lock", dir);
    const struct sbx_box_budget *b = req->budget;
    time_t started = time(NULL);
    time_t told = 0;
    int last_kind = -1;
    char want[32], total[32], mem[32], res[32];

    sbx_admit_size(req->memory, want, sizeof(want));
    sbx_admit_size(b->admit, total, sizeof(total));
    sbx_admit_size(b->memory, mem, sizeof(mem));
    sbx_admit_size(b->reserve, res, sizeof(res));
    if (sbx_admit_check(b, 0, req->memory) == SBX_ADMIT_NEVER) {
        return sbx_error_set(err, SBX_E_POLICY,
                             "refused: task %s needs %s of memory but this "
                             "box admits at most %s (box.memory %s - box.host_reserve %s); "
                             "lower limits.memory",
                             req->task, want, total, mem, res);
    }
    if (sbx_mkdirs(dir, 0700, err) < 0) {
        return -1;
    }
    for (;;) {
        char line[400];
        int kind, held = 0, slot;
        int64_t used;
        int lk = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

        if (lk < 0) {
            return sbx_error_set(err, errno, "open %s: %s", lock_path, strerror(errno));
        }
        while (flock(lk, LOCK_EX) < 0 && errno == EINTR) {
        }
        used = sbx_ledger_used(state, &held);
        slot = slot_take(dir, req->max_slots, err);
        if (slot == -2) {
            close(lk);
            return -1;
        }
        kind = slot < 0 ? 0 : sbx_admit_check(b, used, req->memory) == SBX_ADMIT_OK ? 2 : 1;
        if (kind == 2) {
            int r = slot_record(slot, req->task, req->memory, err);

            close(lk);
            if (r < 0) {
                close(slot);
                return -1;
            }
            return slot;
        }
        close(lk);
        if (slot >= 0) {
            close(slot);
        }
        /* (changed, issue 31) an atomic read: the job's cancel, another thread's */
        if (req->cancel != NULL && __atomic_load_n(req->cancel, __ATOMIC_ACQUIRE)) {
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled while waiting for %s",
                                 kind == 0 ? "a slot" : "memory");
        }
        if (kind != last_kind || time(NULL) - told >= 30) {
            char u[32];

            sbx_admit_size(used, u, sizeof(u));
            if (kind == 0) {
                snprintf(line, sizeof(line),
                         "all %d sandbox slots on this box are taken "
                         "(box.max_sandboxes); task %s waits (%lds so far)",
                         req->max_slots, req->task, (long)(time(NULL) - started));
            }
            else {
                snprintf(line, sizeof(line),
                         "task %s waits for memory: it needs %s; %s of %s "
                         "are admitted to %d sandbox%s (box.memory %s - box.host_reserve %s) "
                         "(%lds so far)",
                         req->task, want, u, total, held, held == 1 ? "" : "es", mem, res,
                         (long)(time(NULL) - started));
            }
            if (tell(req, line) < 0) {
                return sbx_error_set(err, SBX_E_CANCELLED, "cancelled while waiting for %s",
                                     kind == 0 ? "a slot" : "memory");
            }
            told = time(NULL);
            last_kind = kind;
        }
        else if (tell(req, NULL) < 0) { /* between lines: may we go on waiting? */
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled while waiting for %s",
                                 kind == 0 ? "a slot" : "memory");
        }
        usleep((req->poll_ms ? req->poll_ms : 200) * 1000);
    }
}
