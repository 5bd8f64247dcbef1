/* owner.c - the sbx.owner label and the orphan rule. */
#include "sandbox/owner.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int boot_id(char *buf, size_t len)
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    if (f == NULL) {
        return -1;
    }
    if (fgets(buf, (int)len, f) == NULL) {
        fclose(f);
        return -1;
    }
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

unsigned long long sbx_proc_start_time(pid_t pid)
{
    char path[64];
    char line[2048];
    unsigned long long start = 0;
    char *p;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    if (fgets(line, sizeof(line), f) == NULL) {
        fclose(f);
        return 0;
    }
    fclose(f);
    /* comm may hold spaces and parentheses: fields start after the last ')' */
    p = strrchr(line, ')');
    if (p == NULL) {
        return 0;
    }
    /* field 3 is after ") "; starttime is field 22 */
    p += 2;
    for (int field = 3; field < 22 && p != NULL; field++) {
        p = strchr(p, ' ');
        if (p != NULL) {
            p++;
        }
    }
    if (p == NULL || sscanf(p, "%llu", &start) != 1) {
        return 0;
    }
    return start;
}

int sbx_owner_self(char *buf, size_t len)
{
    char boot[64];

    if (boot_id(boot, sizeof(boot)) < 0) {
        snprintf(boot, sizeof(boot), "unknown");
    }
    snprintf(buf, len, "boot=%s;pid=%d;start=%llu", boot, (int)getpid(),
             sbx_proc_start_time(getpid()));
    return 0;
}

const char *sbx_owner_test_scope(int *bad)
{
    const char *v = getenv("SBX_TEST_LABEL");
    size_t n;

    if (bad != NULL) {
        *bad = 0;
    }
    if (v == NULL || *v == '\0') {
        return NULL;
    }
    n = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-");
    if (n != strlen(v) || n > 63) {
        if (bad != NULL) {
            *bad = 1;
        }
        return NULL;
    }
    return v;
}

int sbx_owner_alive(const char *label)
{
    char boot[64];
    char their_boot[64];
    int pid = 0;
    unsigned long long start = 0;

    if (label == NULL ||
        sscanf(label, "boot=%63[^;];pid=%d;start=%llu", their_boot, &pid, &start) != 3 ||
        pid <= 0 || start == 0 || strcmp(their_boot, "unknown") == 0) {
        return 1; /* not ours to judge: never touch what may live */
    }
    if (boot_id(boot, sizeof(boot)) < 0) {
        return 1;
    }
    if (strcmp(boot, their_boot) != 0) {
        return 0; /* another boot: that process is gone */
    }
    return sbx_proc_start_time((pid_t)pid) == start && start != 0;
}
