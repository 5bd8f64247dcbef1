/* docker_loopcap.c - the disk cap on overlay2 without a quota in the engine
 * (docs/operations.md, "The disk cap"): a per-sandbox ext4 of the cap's size,
 * in a sparse anonymous file, loop-mounted on the container's overlay2 layer
 * directory between create and start. The layer's upper and work
 * directories (and the overlay's mount point) then live on that filesystem,
 * so a write past the cap fails inside at once with ENOSPC, on the root
 * filesystem, /tmp and every other path of the writable layer.
 *
 * Nothing is left behind: the file is made with O_TMPFILE (it never has a
 * name), the loop device is set to clear itself on its last close, and the
 * engine's own removal of the layer directory unmounts the filesystem (moby's
 * EnsureRemoveAll unmounts a busy directory), which releases the device and
 * with it the file's blocks. A crash before the mount releases both as the
 * process exits. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/loop.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "docker.h"

#ifndef LOOP_CONFIGURE
#define LOOP_CONFIGURE 0x4C0A
struct loop_config {
    uint32_t fd;
    uint32_t block_size;
    struct loop_info64 info;
    uint64_t __reserved[8];
};
#endif

#define LC_SMALL 65536 /* link and lower files of a layer */
#define LC_MIN_BYTES (16LL << 20)

int dk_loopcap_available(char *why, size_t len)
{
    int fd;

    if (geteuid() != 0) {
        snprintf(why, len, "sbx does not run as root");
        return 0;
    }
    fd = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "/dev/loop-control: %s", strerror(errno));
        return 0;
    }
    close(fd);
    if (access("/sbin/mkfs.ext4", X_OK) < 0 && access("/usr/sbin/mkfs.ext4", X_OK) < 0) {
        snprintf(why, len, "no mkfs.ext4 (apt-get install e2fsprogs)");
        return 0;
    }
    why[0] = '\0';
    return 1;
}

/* Reads a small regular file of the layer directory (no symlink). */
static ssize_t read_small(int dirfd, const char *name, char *buf, size_t size, struct stat *st)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n, got = 0;

    if (fd < 0) {
        return errno == ENOENT ? -2 : -1;
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    while ((size_t)got < size && (n = read(fd, buf + got, size - (size_t)got)) > 0) {
        got += n;
    }
    close(fd);
    if ((size_t)got == size) {
        errno = EFBIG;
        return -1;
    }
    return got;
}

static int write_small(int dirfd, const char *name, const char *buf, size_t len,
                       const struct stat *st)
{
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                    st->st_mode & 07777);
    int rc = 0;

    if (fd < 0) {
        return -1;
    }
    if (write(fd, buf, len) != (ssize_t)len || fchown(fd, st->st_uid, st->st_gid) < 0 ||
        fchmod(fd, st->st_mode & 07777) < 0) {
        rc = -1;
    }
    if (close(fd) < 0) {
        rc = -1;
    }
    return rc;
}

static int mkdir_as(int dirfd, const char *name, const struct stat *st)
{
    if (mkdirat(dirfd, name, st->st_mode & 07777) < 0 ||
        fchownat(dirfd, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 ||
        fchmodat(dirfd, name, st->st_mode & 07777, 0) < 0) {
        return -1;
    }
    return 0;
}

/* mkfs.ext4 on the anonymous file (through /proc/self/fd of the child). */
static int make_fs(int fd, uid_t uid, gid_t gid, char *why, size_t len)
{
    char path[64], owner[64];
    int status = 0;
    pid_t pid;

    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    snprintf(owner, sizeof(owner), "lazy_itable_init=1,nodiscard,root_owner=%u:%u", (unsigned)uid,
             (unsigned)gid);
    pid = fork();
    if (pid < 0) {
        snprintf(why, len, "fork: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);

        /* the child keeps fd (made without O_CLOEXEC, or cleared here) */
        fcntl(fd, F_SETFD, 0);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
        }
        /* no journal (the filesystem dies with the sandbox), no reserved
         * blocks, an inode per 8 KiB (many small files), no zeroing */
        execle("/sbin/mkfs.ext4", "mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-m", "0", "-i",
               "8192", "-E", owner, "-L", "sbx-disk", path, (char *)NULL, (char *[]){NULL});
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, len, "mkfs.ext4 failed (status %d)", status);
        return -1;
    }
    return 0;
}

/* A formatted filesystem of one size and root owner, kept in memory: the
 * non-zero extents mkfs.ext4 wrote (about 600 KiB for 1 GiB; the rest of the
 * image reads as zeros). The first sandbox of a size in this process runs
 * mkfs.ext4 on an anonymous memory file (no fsync reaches the host's disk);
 * every sandbox then gets a copy of those extents in its own sparse file, so
 * a runner's sandboxes after the first run no mkfs at all. */
struct lc_extent {
    off_t off;
    size_t len;
    char *data;
};

struct lc_template {
    int64_t bytes;
    uid_t uid;
    gid_t gid;
    size_t n;
    struct lc_extent *ext;
};

#define LC_TEMPLATES 4
#define LC_TEMPLATE_MAX (64LL << 20) /* refuse a template larger than this */

static pthread_mutex_t lc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct lc_template lc_cache[LC_TEMPLATES];
static unsigned lc_next;

static void template_free(struct lc_template *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->ext[i].data);
    }
    free(t->ext);
    memset(t, 0, sizeof(*t));
}

/* Reads the data extents of fd (SEEK_DATA / SEEK_HOLE) into t. */
static int template_read(int fd, int64_t bytes, struct lc_template *t, char *why, size_t len)
{
    off_t pos = 0, total = 0;

    while (pos < bytes) {
        off_t d = lseek(fd, pos, SEEK_DATA), h;

        if (d < 0) {
            if (errno == ENXIO) {
                break;
            }
            snprintf(why, len, "SEEK_DATA: %s", strerror(errno));
            return -1;
        }
        h = lseek(fd, d, SEEK_HOLE);
        if (h < 0 || h <= d || (total += h - d) > LC_TEMPLATE_MAX) {
            snprintf(why, len, "the formatted image: %s", h < 0 ? strerror(errno) : "too large");
            return -1;
        }
        struct lc_extent e = {d, (size_t)(h - d), xmalloc((size_t)(h - d))};

        t->ext = xrealloc(t->ext, (t->n + 1) * sizeof(*t->ext));
        t->ext[t->n++] = e;
        for (size_t got = 0; got < e.len;) {
            ssize_t r = pread(fd, e.data + got, e.len - got, d + (off_t)got);

            if (r <= 0) {
                snprintf(why, len, "reading the formatted image: %s",
                         r < 0 ? strerror(errno) : "short");
                return -1;
            }
            got += (size_t)r;
        }
        pos = h;
    }
    return 0;
}

/* Writes a fresh ext4 of `bytes` owned by uid:gid into the sparse file fd:
 * a copy of the cached template, made first when there is none. */
static int format(int fd, int64_t bytes, uid_t uid, gid_t gid, int *made, char *why, size_t len)
{
    struct lc_template *t = NULL;
    int rc = -1;

    *made = 0;

    pthread_mutex_lock(&lc_mu);
    for (unsigned i = 0; i < LC_TEMPLATES; i++) {
        if (lc_cache[i].ext != NULL && lc_cache[i].bytes == bytes && lc_cache[i].uid == uid &&
            lc_cache[i].gid == gid) {
            t = &lc_cache[i];
        }
    }
    if (t == NULL) {
        int mfd = memfd_create("sbx-disk", MFD_CLOEXEC);

        t = &lc_cache[lc_next++ % LC_TEMPLATES];
        template_free(t);
        *made = 1;
        if (mfd < 0 || ftruncate(mfd, bytes) < 0) {
            snprintf(why, len, "memfd: %s", strerror(errno));
        }
        else if (make_fs(mfd, uid, gid, why, len) == 0 &&
                 template_read(mfd, bytes, t, why, len) == 0) {
            t->bytes = bytes;
            t->uid = uid;
            t->gid = gid;
        }
        else {
            template_free(t);
        }
        if (mfd >= 0) {
            close(mfd);
        }
    }
    if (t->ext != NULL) {
        rc = 0;
        for (size_t i = 0; i < t->n && rc == 0; i++) {
            for (size_t put = 0; put < t->ext[i].len;) {
                ssize_t w = pwrite(fd, t->ext[i].data + put, t->ext[i].len - put,
                                   t->ext[i].off + (off_t)put);

                if (w <= 0) {
                    snprintf(why, len, "writing the filesystem: %s",
                             w < 0 ? strerror(errno) : "short");
                    rc = -1;
                    break;
                }
                put += (size_t)w;
            }
        }
    }
    pthread_mutex_unlock(&lc_mu);
    return rc;
}

/* Attaches fd to a free loop device that clears itself on its last close;
 * returns the device's descriptor and its path in dev. */
static int attach(int fd, char *dev, size_t dlen, char *why, size_t len)
{
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

    if (ctl < 0) {
        snprintf(why, len, "/dev/loop-control: %s", strerror(errno));
        return -1;
    }
    for (int attempt = 0; attempt < 16; attempt++) {
        struct loop_config cfg;
        int n = ioctl(ctl, LOOP_CTL_GET_FREE);
        int lfd;

        if (n < 0) {
            snprintf(why, len, "no free loop device: %s", strerror(errno));
            break;
        }
        snprintf(dev, dlen, "/dev/loop%d", n);
        lfd = open(dev, O_RDWR | O_CLOEXEC);
        if (lfd < 0) {
            snprintf(why, len, "%s: %s", dev, strerror(errno));
            break;
        }
        memset(&cfg, 0, sizeof(cfg));
        cfg.fd = (uint32_t)fd;
        cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        snprintf((char *)cfg.info.lo_file_name, sizeof(cfg.info.lo_file_name), "sbx-disk");
        if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
            close(ctl);
            return lfd;
        }
        snprintf(why, len, "%s: LOOP_CONFIGURE: %s", dev, strerror(errno));
        close(lfd);
        if (errno != EBUSY) {
            break;
        }
        /* another process took it between GET_FREE and CONFIGURE */
    }
    close(ctl);
    return -1;
}

/* The layer directory of the container's writable layer: the parent of
 * GraphDriver.Data.UpperDir, which must also hold WorkDir. */
static int layer_dir(struct dk_ctx *c, const char *id, char *out, size_t size, sbx_error_t **err)
{
    char path[256];
    json_t *reply = NULL;
    json_t *data;
    const char *up, *wk;
    long status = 0;
    size_t n;
    int rc = -1;

    snprintf(path, sizeof(path), "/containers/%s/json", id);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    data = json_object_get(json_object_get(reply, "GraphDriver"), "Data");
    up = json_string_value(json_object_get(data, "UpperDir"));
    wk = json_string_value(json_object_get(data, "WorkDir"));
    if (status != 200 || up == NULL || wk == NULL || up[0] != '/' || strstr(up, "/../") ||
        strlen(up) < 6 || strlen(up) >= size || strcmp(up + strlen(up) - 5, "/diff") != 0) {
        c->host->error_set(err, SBX_E_ENGINE,
                           "disk cap: the engine reported no overlay2 upper directory for "
                           "%.12s (HTTP %ld)",
                           id, status);
        goto out;
    }
    n = strlen(up) - 5;
    if (strncmp(wk, up, n) != 0 || strcmp(wk + n, "/work") != 0) {
        c->host->error_set(err, SBX_E_ENGINE,
                           "disk cap: %.12s: upper and work directories not side by side", id);
        goto out;
    }
    memcpy(out, up, n);
    out[n] = '\0';
    rc = 0;
out:
    json_decref(reply);
    return rc;
}

int dk_loopcap_apply(struct dk_ctx *c, const char *id, int64_t bytes, sbx_error_t **err)
{
    char layer[4096], parent[4096], dev[32], why[512] = "";
    char *link = xmalloc(LC_SMALL), *lower = xmalloc(LC_SMALL);
    struct stat st_l, st_diff, st_work, st_link, st_lower;
    ssize_t nlink, nlower;
    int dfd = -1, fd = -1, lfd = -1, mfd = -1, mounted = 0, made = 0, rc = -1;
    int64_t t[7];
    char *slash;

    t[0] = dk_now_ms();

    if (bytes < LC_MIN_BYTES) {
        bytes = LC_MIN_BYTES;
    }
    if (layer_dir(c, id, layer, sizeof(layer), err) < 0) {
        goto out;
    }
    t[1] = dk_now_ms();
    dfd = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || fstat(dfd, &st_l) < 0 || fstatat(dfd, "diff", &st_diff, AT_SYMLINK_NOFOLLOW) ||
        fstatat(dfd, "work", &st_work, AT_SYMLINK_NOFOLLOW) || !S_ISDIR(st_diff.st_mode) ||
        !S_ISDIR(st_work.st_mode)) {
        snprintf(why, sizeof(why), "%.200s: %s", layer, errno ? strerror(errno) : "not a layer");
        goto fail;
    }
    nlink = read_small(dfd, "link", link, LC_SMALL, &st_link);
    nlower = read_small(dfd, "lower", lower, LC_SMALL, &st_lower);
    if (nlink < 0 || nlower == -1) {
        snprintf(why, sizeof(why), "%.200s: link or lower: %s", layer, strerror(errno));
        goto fail;
    }
    /* the file's blocks come from the filesystem of the engine's data root */
    snprintf(parent, sizeof(parent), "%s", layer);
    slash = strrchr(parent, '/');
    *(slash == parent ? slash + 1 : slash) = '\0';
    fd = open(parent, O_TMPFILE | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, bytes) < 0) {
        snprintf(why, sizeof(why), "an anonymous file in %.200s: %s", parent, strerror(errno));
        goto fail;
    }
    t[2] = dk_now_ms();
    if (format(fd, bytes, st_l.st_uid, st_l.st_gid, &made, why, sizeof(why)) < 0) {
        goto fail;
    }
    t[3] = dk_now_ms();
    lfd = attach(fd, dev, sizeof(dev), why, sizeof(why));
    if (lfd < 0) {
        goto fail;
    }
    close(fd);
    fd = -1;
    t[4] = dk_now_ms();
    /* noinit_itable: the file is sparse, its inode tables read as zeros;
     * nobarrier: no cache flush reaches the host's disk (an fsync of the
     * file) when the filesystem syncs or unmounts: it dies with the sandbox */
    if (mount(dev, layer, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "noinit_itable,nobarrier") <
        0) {
        snprintf(why, sizeof(why), "mount %s on %.200s: %s", dev, layer, strerror(errno));
        goto fail;
    }
    mounted = 1;
    t[5] = dk_now_ms();
    close(lfd); /* the mount holds the device now: it goes at the unmount */
    lfd = -1;
    mfd = open(layer, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (mfd < 0 || fchmod(mfd, st_l.st_mode & 07777) < 0 ||
        unlinkat(mfd, "lost+found", AT_REMOVEDIR) < 0 || mkdir_as(mfd, "diff", &st_diff) < 0 ||
        mkdir_as(mfd, "work", &st_work) < 0 ||
        write_small(mfd, "link", link, (size_t)nlink, &st_link) < 0 ||
        (nlower >= 0 && write_small(mfd, "lower", lower, (size_t)nlower, &st_lower) < 0)) {
        snprintf(why, sizeof(why), "filling %.200s: %s", layer, strerror(errno));
        goto fail;
    }
    t[6] = dk_now_ms();
    c->host->log(DK_NAME, SBX_LOG_DEBUG,
                 "disk cap %.12s: inspect %" PRId64 " ms, file %" PRId64 " ms, format %" PRId64
                 " ms (%s), attach %s %" PRId64 " ms, mount %" PRId64 " ms, fill %" PRId64 " ms",
                 id, t[1] - t[0], t[2] - t[1], t[3] - t[2], made ? "mkfs" : "copy", dev,
                 t[4] - t[3], t[5] - t[4], t[6] - t[5]);
    rc = 0;
    goto out;
fail:
    if (mounted) {
        umount2(layer, MNT_DETACH);
    }
    c->host->error_set(err, SBX_E_ENGINE, "disk cap: a %" PRId64 "-byte filesystem for %.12s: %s",
                       bytes, id, why);
out:
    if (mfd >= 0) {
        close(mfd);
    }
    if (lfd >= 0) {
        close(lfd);
    }
    if (fd >= 0) {
        close(fd);
    }
    if (dfd >= 0) {
        close(dfd);
    }
    free(link);
    free(lower);
    return rc;
}
