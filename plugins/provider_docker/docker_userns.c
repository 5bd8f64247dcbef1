/* docker_userns.c - per-sandbox caps on the kernel's per-user inotify counters
 * (docs/operations.md, "Kernel per-user counters").
 *
 * Under userns-remap every sandbox's root is the same host uid, and the
 * engine creates every sandbox's user namespace as host root: the kernel
 * charges all their inotify instances and watches to host root's counters in
 * the initial namespace (fs.inotify.max_user_*), one pool for all sandboxes
 * and the host. Each sandbox's own user namespace has its own limits
 * (/proc/sys/user/max_inotify_* read in that namespace), unlimited by default
 * and not writable from inside (read-only /proc/sys, no capabilities). Right
 * after the start we set them from outside: a child enters the sandbox's user
 * namespace (host root holds every capability over it) and writes them. */
#include "docker.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* 1 when /proc/<pid>/cgroup names the container: the pid is the sandbox's in
 * our pid namespace (not some other process of that number). */
int dk_pid_is_container(pid_t pid, const char *id)
{
    char path[64];
    char buf[8192];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    return strlen(id) >= 12 && strstr(buf, id) != NULL;
}

/* In a forked child: only async-signal-safe calls. */
static void child_write(int nsfd, const char *const *paths, const char *const *values)
{
    if (setns(nsfd, CLONE_NEWUSER) < 0) {
        _exit(10);
    }
    for (int i = 0; paths[i] != NULL; i++) {
        int fd = open(paths[i], O_WRONLY | O_CLOEXEC);
        size_t len = strlen(values[i]);

        if (fd < 0 || write(fd, values[i], len) != (ssize_t)len) {
            _exit(20 + i);
        }
        close(fd);
    }
    _exit(0);
}

int dk_open_ns(struct dk_ctx *c, const char *id, const char *ns, sbx_error_t **err)
{
    pid_t pid = dk_init_pid(c, id);
    char path[64];
    int pidfd, nsfd;

    if (pid <= 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "the engine reports no pid for it");
    }
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        return c->host->error_set(err, errno, "pidfd_open %d: %s", (int)pid, strerror(errno));
    }
    if (!dk_pid_is_container(pid, id)) {
        close(pidfd);
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "pid %d is not the sandbox's in this pid namespace", (int)pid);
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, ns);
    nsfd = open(path, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0) {
        int e = errno;

        close(pidfd);
        return c->host->error_set(err, e, "%s: %s", path, strerror(e));
    }
    /* the pidfd pinned the process: still alive now means nsfd is its namespace */
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
        close(nsfd);
        close(pidfd);
        return c->host->error_set(err, SBX_E_ENGINE, "the sandbox's init ended while starting");
    }
    close(pidfd);
    return nsfd;
}

int dk_run_in_ns(struct dk_ctx *c, int nsfd, void (*child_main)(int nsfd, const void *arg),
                 const void *arg, sbx_error_t **err)
{
    pid_t child = fork();
    int status = 0;

    if (child < 0) {
        int e = errno;

        close(nsfd);
        return c->host->error_set(err, e, "fork: %s", strerror(e));
    }
    if (child == 0) {
        child_main(nsfd, arg); /* never returns */
        _exit(127);
    }
    close(nsfd);
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void caps_child(int nsfd, const void *arg)
{
    const char *const *const *pv = arg;

    child_write(nsfd, pv[0], pv[1]);
}

int dk_userns_caps(struct dk_ctx *c, const char *id, sbx_error_t **err)
{
    static const char *const paths[] = {"/proc/sys/user/max_inotify_instances",
                                        "/proc/sys/user/max_inotify_watches", NULL};
    char inst[24], watches[24];
    const char *const values[] = {inst, watches, NULL};
    const char *const *pv[] = {paths, values};
    struct stat ours, theirs;
    int nsfd = dk_open_ns(c, id, "user", err);
    int code;

    if (nsfd < 0) {
        return -1;
    }
    if (fstat(nsfd, &theirs) < 0 || stat("/proc/self/ns/user", &ours) < 0) {
        int e = errno;

        close(nsfd);
        return c->host->error_set(err, e, "the sandbox's user namespace: %s", strerror(e));
    }
    if (theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino) {
        close(nsfd);
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "the sandbox shares our user namespace "
                                  "(user namespaces are off)");
    }
    snprintf(inst, sizeof(inst), "%d", SBX_SANDBOX_INOTIFY_INSTANCES);
    snprintf(watches, sizeof(watches), "%d", SBX_SANDBOX_INOTIFY_WATCHES);
    code = dk_run_in_ns(c, nsfd, caps_child, pv, err);
    if (code != 0) {
        return code < 0 ? -1
                        : c->host->error_set(err, SBX_E_ENGINE,
                                             "%s failed in the sandbox's user namespace",
                                             code == 10   ? "setns"
                                             : code == 20 ? paths[0]
                                             : code == 21 ? paths[1]
                                                          : "the child");
    }
    return 0;
}
