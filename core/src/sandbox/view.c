/* view.c - the worktree's checks; unmounting and sweeping views (view.h). */
#include "sandbox/view.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "sandbox/owner.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

/* a is b or below it */
static int path_within(const char *a, const char *b)
{
    size_t n = strlen(b);

    if (strcmp(b, "/") == 0) {
        return 1;
    }
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

int sbx_worktree_check(const char *w, const char *state, char **out, sbx_error_t **err)
{
    static const char *const kernel[] = {"/proc", "/sys", "/dev"};
    cleanup_free char *real_state = NULL;
    char *real = realpath(w, NULL);

    if (real == NULL) {
        return sbx_error_set(err, SBX_E_USAGE, "worktree %s: %s", w, strerror(errno));
    }
    if (strcmp(real, "/") == 0) {
        free(real);
        return sbx_error_set(err, SBX_E_USAGE, "worktree %s: refusing to mount the host root", w);
    }
    for (size_t i = 0; i < sizeof(kernel) / sizeof(kernel[0]); i++) {
        if (path_within(real, kernel[i])) {
            sbx_error_set(err, SBX_E_USAGE,
                          "worktree %s: resolves to %s, in the kernel's %s: "
                          "refused",
                          w, real, kernel[i]);
            free(real);
            return -1;
        }
    }
    real_state = state ? realpath(state, NULL) : NULL;
    if (real_state != NULL && (path_within(real, real_state) || path_within(real_state, real))) {
        sbx_error_set(err, SBX_E_USAGE,
                      "worktree %s: resolves to %s, which %s the state "
                      "directory %s (other tasks' sockets): refused",
                      w, real, path_within(real, real_state) ? "is or is inside" : "holds",
                      real_state);
        free(real);
        return -1;
    }
    *out = real;
    return 0;
}

void sbx_view_release(const char *dir)
{
    cleanup_free char *view = xasprintf("%s/" SBX_VIEW_NAME, dir);

    /* one mount; a few more rounds cover anything stacked on it */
    for (int i = 0; i < 8; i++) {
        if (umount2(view, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
            if (errno != EINVAL && errno != ENOENT) {
                sbx_warn("unmounting %s: %s", view, strerror(errno));
            }
            break;
        }
    }
    if (rmdir(view) < 0 && errno != ENOENT) {
        sbx_debug("%s not removed: %s", view, strerror(errno));
    }
}

/* Undoes the octal escapes of /proc/self/mountinfo (\040 and friends). */
static void unescape(char *s)
{
    char *o = s;

    while (*s) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 4;
        }
        else {
            *o++ = *s++;
        }
    }
    *o = '\0';
}

/* The mount points of this mount namespace, in mountinfo order (the caller
 * frees each and the array); NULL when unreadable. */
static char **mount_points(size_t *n)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char *line = NULL;
    size_t cap = 0;
    char **v = NULL;

    *n = 0;
    if (f == NULL) {
        return NULL;
    }
    while (getline(&line, &cap, f) > 0) {
        char *save = NULL;
        char *tok = strtok_r(line, " ", &save);

        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT ... */
        for (int field = 1; tok != NULL && field < 5; field++) {
            tok = strtok_r(NULL, " ", &save);
        }
        if (tok == NULL) {
            continue;
        }
        unescape(tok);
        v = xrealloc(v, (*n + 1) * sizeof(char *));
        v[(*n)++] = xstrdup(tok);
    }
    free(line);
    fclose(f);
    return v;
}

int sbx_view_mounted(const char *path)
{
    size_t n = 0;
    char **v = mount_points(&n);
    int found = 0;

    if (v == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        found |= strcmp(v[i], path) == 0;
        free(v[i]);
    }
    free(v);
    return found;
}

/* A task whose record says it may still run (its owner lives). */
static int task_alive(const char *state, const char *task)
{
    cleanup_free char *path = xasprintf("%s/tasks/%s/task.json", state, task);
    json_t *rec = json_load_file(path, 0, NULL);
    const char *st;
    const char *owner;
    int alive;

    if (rec == NULL) {
        return access(path, F_OK) == 0; /* unreadable, not absent: never touch */
    }
    st = json_string_value(json_object_get(rec, "state"));
    owner = json_string_value(json_object_get(rec, "owner"));
    if (st != NULL && strcmp(st, "ended") == 0) {
        alive = 0;
    }
    else {
        alive = owner == NULL || sbx_owner_alive(owner);
    }
    json_decref(rec);
    return alive;
}

int sbx_view_sweep(const char *state)
{
    cleanup_free char *real = realpath(state, NULL);
    cleanup_free char *prefix = NULL;
    size_t plen;
    size_t n = 0;
    char **v;
    int swept = 0;

    if (real == NULL) {
        return 0;
    }
    prefix = xasprintf("%s/tasks/", real);
    plen = strlen(prefix);
    v = mount_points(&n);
    /* the deepest first: a later line may be mounted on an earlier one */
    for (size_t i = n; i-- > 0;) {
        char task[80];
        const char *rest = strncmp(v[i], prefix, plen) == 0 ? v[i] + plen : "";
        size_t tl = strcspn(rest, "/");

        if (tl > 0 && tl < sizeof(task) && rest[tl] == '/') {
            memcpy(task, rest, tl);
            task[tl] = '\0';
            if (sbx_id_valid(task, SBX_ID_TASK) && !task_alive(real, task)) {
                if (umount2(v[i], MNT_DETACH | UMOUNT_NOFOLLOW) == 0) {
                    sbx_info("unmounted %s (task %s is gone)", v[i], task);
                    rmdir(v[i]);
                    swept++;
                }
                else if (errno != EINVAL && errno != ENOENT) {
                    sbx_warn("unmounting %s (task %s is gone): %s", v[i], task, strerror(errno));
                }
            }
        }
        free(v[i]);
    }
    free(v);
    return swept;
}

int sbx_task_record_reown(const char *dir)
{
    cleanup_free char *path = xasprintf("%s/task.json", dir);
    cleanup_free char *tmp = xasprintf("%s/task.json.tmp", dir);
    json_t *rec = json_load_file(path, 0, NULL);
    char owner[160];
    int fd;
    int r = -1;

    if (rec == NULL) {
        return -1;
    }
    sbx_owner_self(owner, sizeof(owner));
    json_object_set_new(rec, "owner", json_string(owner));
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd >= 0) {
        int ok =
            json_dumpfd(rec, fd, JSON_INDENT(2)) == 0 && write(fd, "\n", 1) == 1 && fsync(fd) == 0;

        if (close(fd) == 0 && ok) {
            r = rename(tmp, path);
        }
    }
    json_decref(rec);
    return r < 0 ? -1 : 0;
}
