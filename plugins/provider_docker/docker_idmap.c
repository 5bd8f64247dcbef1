/* docker_idmap.c - the worktree through an idmapped mount (docker_idmap.h).
 *
 * Under the engine's userns-remap, container root is host uid RANGE (the
 * first id of the remap user's range), so a plain bind mount of a worktree
 * owned by uid 1000 shows its files as nobody and root inside cannot write
 * them. An idmapped mount of the worktree, mapping its owner to RANGE, makes
 * root inside own the owner's files, and what root creates belongs to the
 * owner on the host. The mapping comes from a user namespace made for the
 * purpose: a child unshares one, we write "OWNER RANGE 1" into its uid_map and
 * gid_map, take its namespace fd, and kill it. */
#include "docker_idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_IDMAP
#define MOUNT_ATTR_IDMAP 0x00100000
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef MOVE_MOUNT_T_EMPTY_PATH
#define MOVE_MOUNT_T_EMPTY_PATH 0x00000040
#endif

/* The kernel's struct mount_attr (v0, 32 bytes). */
struct dk_mount_attr {
    unsigned long long attr_set;
    unsigned long long attr_clr;
    unsigned long long propagation;
    unsigned long long userns_fd;
};

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end = NULL;
    unsigned long long v;

    if (s == NULL || *s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

int dk_subid_first(const char *file, const char *user, long uid, unsigned *first, char *why,
                   size_t n)
{
    FILE *f = fopen(file, "re");
    char line[512];
    char uidtext[32] = "";
    int lineno = 0;

    if (f == NULL) {
        snprintf(why, n, "%s: %s", file, strerror(errno));
        return -1;
    }
    if (uid >= 0) {
        snprintf(uidtext, sizeof(uidtext), "%ld", uid);
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        char *name = line;
        char *start;
        char *count;
        unsigned long long a;
        unsigned long long c;

        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '\0' || line[0] == '#') {
            continue;
        }
        start = strchr(name, ':');
        count = start ? strchr(start + 1, ':') : NULL;
        if (start == NULL || count == NULL) {
            continue; /* not a range line: not this user's either */
        }
        *start++ = '\0';
        *count++ = '\0';
        if (strcmp(name, user) != 0 && (uidtext[0] == '\0' || strcmp(name, uidtext) != 0)) {
            continue;
        }
        if (parse_uint(start, 0xfffffffeULL, &a) < 0 || parse_uint(count, 0xffffffffULL, &c) < 0 ||
            c == 0 || a + c > 0xffffffffULL) {
            snprintf(why, n, "%s:%d: the range of '%s' is not FIRST:COUNT", file, lineno, user);
            fclose(f);
            return -1;
        }
        *first = (unsigned)a;
        fclose(f);
        return 0;
    }
    fclose(f);
    snprintf(why, n, "no range for '%s' in %s", user, file);
    return -1;
}

int dk_cap_effective(const char *status_file, int cap, char *why, size_t n)
{
    FILE *f = fopen(status_file, "re");
    char line[256];
    unsigned long long eff = 0;
    int found = 0;

    if (f == NULL) {
        snprintf(why, n, "%s: %s", status_file, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "CapEff: %llx", &eff) == 1) {
            found = 1;
            break;
        }
    }
    fclose(f);
    if (!found) {
        snprintf(why, n, "%s: no CapEff line", status_file);
        return -1;
    }
    if (cap < 0 || cap > 63 || (eff & (1ULL << cap)) == 0) {
        snprintf(why, n, "sbx lacks CAP_SYS_ADMIN (idmapped mounts need it: run sbx as root)");
        return 0;
    }
    return 1;
}

int dk_idmap_kernel(char *why, size_t n)
{
    struct dk_mount_attr attr = {0};

    /* invalid arguments on purpose: ENOSYS means the call does not exist */
    if (syscall(SYS_mount_setattr, -1, "", 0, &attr, sizeof(attr)) < 0 && errno == ENOSYS) {
        snprintf(why, n, "the kernel has no mount_setattr (idmapped mounts need Linux 5.12+)");
        return 0;
    }
    if (syscall(SYS_open_tree, -1, "", 0) < 0 && errno == ENOSYS) {
        snprintf(why, n, "the kernel has no open_tree (idmapped mounts need Linux 5.12+)");
        return 0;
    }
    return 1;
}

static int write_file(pid_t pid, const char *name, const char *text, char *why, size_t n)
{
    char path[64];
    int fd;
    ssize_t len = (ssize_t)strlen(text);

    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, (size_t)len) != len) {
        snprintf(why, n, "writing %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    return 0;
}

/* A user namespace mapping owner uid/gid to host_uid/host_gid (one id each);
 * returns its fd, or -1 (why). */
static int mapping_userns(uid_t uid, gid_t gid, unsigned host_uid, unsigned host_gid, char *why,
                          size_t n)
{
    int ready[2];
    int hold[2];
    char map[64];
    char path[64];
    char res = 1;
    pid_t pid;
    int fd = -1;

    if (pipe2(ready, O_CLOEXEC) < 0) {
        snprintf(why, n, "pipe: %s", strerror(errno));
        return -1;
    }
    if (pipe2(hold, O_CLOEXEC) < 0) {
        snprintf(why, n, "pipe: %s", strerror(errno));
        close(ready[0]);
        close(ready[1]);
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        /* only async-signal-safe calls here: the parent may have threads */
        char ok;

        close(ready[0]);
        close(hold[1]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        ok = unshare(CLONE_NEWUSER) == 0 ? 0 : (char)(errno & 0x7f);
        if (write(ready[1], &ok, 1) != 1) {
            _exit(1);
        }
        /* wait until the parent has taken the namespace (or died) */
        while (read(hold[0], &ok, 1) < 0 && errno == EINTR) {
        }
        _exit(0);
    }
    close(ready[1]);
    close(hold[0]);
    if (pid < 0) {
        snprintf(why, n, "fork: %s", strerror(errno));
        close(ready[0]);
        close(hold[1]);
        return -1;
    }
    if (read(ready[0], &res, 1) != 1) {
        res = EIO;
    }
    close(ready[0]);
    if (res != 0) {
        snprintf(why, n,
                 "unshare(CLONE_NEWUSER): %s (are user namespaces allowed? sysctl "
                 "user.max_user_namespaces)",
                 strerror(res));
        goto out;
    }
    snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid, host_uid);
    if (write_file(pid, "uid_map", map, why, n) < 0) {
        goto out;
    }
    /* not needed by a privileged writer, harmless otherwise */
    if (write_file(pid, "setgroups", "deny", why, n) < 0 && errno != ENOENT) {
        goto out;
    }
    snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid, host_gid);
    if (write_file(pid, "gid_map", map, why, n) < 0) {
        goto out;
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, n, "open %s: %s", path, strerror(errno));
    }
out:
    close(hold[1]);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    return fd;
}

/* Mounts a clone of the directory src, opened once and checked to still be
 * the canonical path src, on view; idmapped (src's owner to host_uid/gid)
 * when idmap is set. */
static int view_mount(const char *src, const char *view, int idmap, unsigned host_uid,
                      unsigned host_gid, char *why, size_t n)
{
    struct dk_mount_attr attr = {.attr_set = MOUNT_ATTR_IDMAP};
    char fdpath[64];
    char real[4096];
    struct stat st;
    ssize_t len;
    int dfd;
    int vfd;
    int tfd = -1;
    int ufd = -1;
    int r = -1;

    dfd = open(src, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(why, n, "%s: %s", src, strerror(errno));
        return -1;
    }
    vfd = open(view, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (vfd < 0) {
        snprintf(why, n, "view %s: %s", view, strerror(errno));
        close(dfd);
        return -1;
    }
    /* the path was canonical when checked: it must still name this directory */
    snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", dfd);
    len = readlink(fdpath, real, sizeof(real) - 1);
    if (len < 0 || fstat(dfd, &st) < 0) {
        snprintf(why, n, "%s: %s", src, strerror(errno));
        goto out;
    }
    real[len] = '\0';
    if (strcmp(real, src) != 0) {
        snprintf(why, n, "%s changed while it was being mounted (it is now %s)", src, real);
        goto out;
    }
    if (idmap) {
        ufd = mapping_userns(st.st_uid, st.st_gid, host_uid, host_gid, why, n);
        if (ufd < 0) {
            goto out;
        }
    }
    tfd = (int)syscall(SYS_open_tree, dfd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tfd < 0) {
        snprintf(why, n, "open_tree %s: %s", src, strerror(errno));
        goto out;
    }
    attr.userns_fd = (unsigned long long)ufd;
    if (idmap && syscall(SYS_mount_setattr, tfd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0) {
        if (errno == EINVAL) {
            snprintf(why, n,
                     "the filesystem of %s does not support idmapped mounts "
                     "(mount_setattr: %s)",
                     src, strerror(errno));
        }
        else {
            snprintf(why, n, "mount_setattr %s: %s", src, strerror(errno));
        }
        goto out;
    }
    if (syscall(SYS_move_mount, tfd, "", vfd, "",
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
        snprintf(why, n, "move_mount onto %s: %s", view, strerror(errno));
        goto out;
    }
    r = 0;
out:
    if (tfd >= 0) {
        close(tfd); /* a clone never attached goes away with its fd */
    }
    if (ufd >= 0) {
        close(ufd);
    }
    close(vfd);
    close(dfd);
    return r;
}

int dk_idmap_mount(const char *src, const char *view, unsigned host_uid, unsigned host_gid,
                   char *why, size_t n)
{
    return view_mount(src, view, 1, host_uid, host_gid, why, n);
}

int dk_pinned_bind(const char *src, const char *view, char *why, size_t n)
{
    return view_mount(src, view, 0, 0, 0, why, n);
}

void dk_idmap_release(const char *view)
{
    /* a view is one mount; a few more rounds cover anything stacked on it */
    for (int i = 0; i < 8; i++) {
        if (umount2(view, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
            break;
        }
    }
}

int dk_same_mount_ns(const char *socket_path, char *why, size_t n)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct ucred cred = {0};
    socklen_t len = sizeof(cred);
    struct stat ours;
    struct stat theirs;
    char path[64];
    int fd;

    if (strlen(socket_path) >= sizeof(sa.sun_path)) {
        snprintf(why, n, "%s: path too long", socket_path);
        return -1;
    }
    memcpy(sa.sun_path, socket_path, strlen(socket_path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        snprintf(why, n, "engine socket %s: %s", socket_path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    close(fd);
    if (cred.pid <= 0) {
        snprintf(why, n, "the engine's process is not visible from here");
        return -1;
    }
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)cred.pid);
    if (stat("/proc/self/ns/mnt", &ours) < 0 || stat(path, &theirs) < 0) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino) {
        snprintf(why, n,
                 "sbx runs in another mount namespace than the engine (pid %d), which "
                 "would not see the view",
                 (int)cred.pid);
        return 0;
    }
    return 1;
}
