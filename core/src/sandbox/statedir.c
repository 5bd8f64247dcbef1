/* statedir.c - state directory, task directories and slot locks. */
#include "sandbox/statedir.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/view.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

char *sbx_state_dir(const char *configured, sbx_error_t **err)
{
    const char *env = getenv("SBX_STATE_DIR");
    const char *xdg = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char *dir;

    if (configured != NULL) {
        dir = xstrdup(configured);
    }
    else if (env != NULL && env[0] != '\0') {
        dir = xstrdup(env);
    }
    else if (geteuid() == 0) {
        dir = xstrdup("/var/lib/sbx");
    }
    else if (xdg != NULL && xdg[0] == '/') {
        dir = xasprintf("%s/sbx", xdg);
    }
    else if (home != NULL && home[0] == '/') {
        dir = xasprintf("%s/.local/state/sbx", home);
    }
    else {
        sbx_error_set(err, SBX_E_CONFIG, "no state directory: set state_dir or $SBX_STATE_DIR");
        return NULL;
    }
    if (sbx_mkdirs(dir, 0700, err) < 0) {
        free(dir);
        return NULL;
    }
    return dir;
}

int sbx_mkdirs(const char *path, unsigned mode, sbx_error_t **err)
{
    cleanup_free char *p = xstrdup(path);

    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                return sbx_error_set(err, errno, "mkdir %s: %s", p, strerror(errno));
            }
            *s = '/';
        }
    }
    if (mkdir(p, mode) < 0 && errno != EEXIST) {
        return sbx_error_set(err, errno, "mkdir %s: %s", p, strerror(errno));
    }
    return 0;
}

char *sbx_task_dir(const char *state, const char *task)
{
    return xasprintf("%s/tasks/%s", state, task);
}

void sbx_task_id_new(char *buf, unsigned long len)
{
    unsigned char r[6];

    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        unsigned long long t = (unsigned long long)time(NULL) ^ (unsigned long long)getpid();

        memcpy(r, &t, sizeof(r));
    }
    snprintf(buf, len, "t-%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4], r[5]);
}

/* Removes name below dfd and everything in it, following no symlink and staying on
 * dfd's filesystem (the sandbox wrote part of it: <task dir>/git/repo). */
static void remove_below(int dfd, const char *name, int depth)
{
    struct stat st;
    int fd;
    DIR *d;
    struct dirent *e;

    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        unlinkat(dfd, name, 0);
        return;
    }
    fd = depth < 64 ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    d = fd >= 0 ? fdopendir(fd) : NULL;
    if (d == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            remove_below(dirfd(d), e->d_name, depth + 1);
        }
    }
    closedir(d);
    unlinkat(dfd, name, AT_REMOVEDIR);
}

void sbx_task_dir_remove(const char *state, const char *task)
{
    cleanup_free char *dir = sbx_task_dir(state, task);
    cleanup_free char *rec = xasprintf("%s/task.json", dir);
    cleanup_free char *sock = xasprintf("%s/keeper.sock", dir);

    cleanup_free char *provider = xasprintf("%s/provider", dir);
    cleanup_free char *docker = xasprintf("%s/docker", dir); /* before ABI 1.1 */
    cleanup_free char *egress = xasprintf("%s/egress", dir);
    cleanup_free char *egress_sock = xasprintf("%s/egress/proxy.sock", dir);
    cleanup_free char *rules = xasprintf("%s/egress.rules", dir);
    cleanup_free char *agent = xasprintf("%s/agent", dir);
    cleanup_free char *agent_sock = xasprintf("%s/agent/host.sock", dir);

    sbx_view_release(dir); /* before anything else: never remove through a view */
    unlink(rec);
    unlink(sock);
    unlink(egress_sock);
    unlink(rules);
    unlink(agent_sock);
    rmdir(agent);
    rmdir(provider);
    rmdir(docker);
    rmdir(egress);
    {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (dfd >= 0) {
            remove_below(dfd, "git", 0); /* (added) the worktree's git dir (wtgit.h) */
            /* (added, issue 31) a killed keeper's runner directory (keeper.c) */
            remove_below(dfd, "runner", 0);
            unlinkat(dfd, "since", 0);
            close(dfd);
        }
    }
    if (rmdir(dir) < 0 && errno != ENOENT) {
        sbx_debug("task dir %s not removed: %s", dir, strerror(errno));
    }
}
