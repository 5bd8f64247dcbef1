/* tarx.c - reading, writing and safely extracting the tar streams of a task's
 * files (tarx.h; docs/tasks.md, "Files"). Everything read comes from a sandbox:
 * each header is checked (checksum, bounded sizes and names) and nothing in a
 * name or a link is ever resolved on the host but below one directory, without
 * following symlinks. */
#include "sandbox/tarx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXT_MAX (64 * 1024) /* a pax header or GNU long name, at most */

void sbx_tar_reader_init(struct sbx_tar_reader *r)
{
    memset(r, 0, sizeof(*r));
    r->ext_size = -1;
}

void sbx_tar_reader_fini(struct sbx_tar_reader *r)
{
    free(r->ext);
    r->ext = NULL;
}

static int fail(struct sbx_tar_reader *r, const char *msg)
{
    if (r->err[0] == '\0') {
        snprintf(r->err, sizeof(r->err), "%s", msg);
    }
    return -1;
}

/* An octal field, or a base-256 one (high bit of the first byte). -1: malformed. */
static int64_t num(const unsigned char *p, size_t n)
{
    int64_t v = 0;
    size_t i = 0;

    if (p[0] & 0x80) {
        if (p[0] != 0x80) {
            return -1; /* negative or too large */
        }
        for (i = 1; i < n; i++) {
            if (v > (INT64_MAX >> 8)) {
                return -1;
            }
            v = (v << 8) | p[i];
        }
        return v;
    }
    while (i < n && (p[i] == ' ' || p[i] == '\0')) {
        i++;
    }
    for (; i < n && p[i] >= '0' && p[i] <= '7'; i++) {
        if (v > (INT64_MAX >> 3)) {
            return -1;
        }
        v = (v << 3) | (p[i] - '0');
    }
    for (; i < n; i++) {
        if (p[i] != ' ' && p[i] != '\0') {
            return -1;
        }
    }
    return v;
}

static int checksum_ok(const unsigned char *h)
{
    int64_t want = num(h + 148, 8);
    int64_t sum = 0;

    for (int i = 0; i < 512; i++) {
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    }
    return want == sum;
}

static void field(char *dst, size_t cap, const unsigned char *src, size_t n)
{
    size_t l = strnlen((const char *)src, n);

    if (l >= cap) {
        l = cap - 1;
    }
    memcpy(dst, src, l);
    dst[l] = '\0';
}

/* pax records "LEN key=value\n" for the next member */
static int parse_pax(struct sbx_tar_reader *r)
{
    size_t off = 0;

    while (off < r->ext_len) {
        char *rec = r->ext + off;
        char *end;
        unsigned long n = strtoul(rec, &end, 10);
        char *eq;
        size_t vlen;

        if (end == rec || *end != ' ' || n < 5 || n > r->ext_len - off || rec[n - 1] != '\n') {
            return fail(r, "malformed pax header in the archive");
        }
        eq = memchr(end + 1, '=', (size_t)(rec + n - 1 - (end + 1)));
        if (eq == NULL) {
            return fail(r, "malformed pax record in the archive");
        }
        vlen = (size_t)(rec + n - 1 - (eq + 1));
        *eq = '\0';
        if (strcmp(end + 1, "path") == 0 || strcmp(end + 1, "linkpath") == 0) {
            char *dst = strcmp(end + 1, "path") == 0 ? r->path : r->linkpath;

            if (vlen >= SBX_TAR_NAME_MAX || memchr(eq + 1, '\0', vlen) != NULL) {
                return fail(r, "a name in the archive is too long or holds a NUL byte");
            }
            memcpy(dst, eq + 1, vlen);
            dst[vlen] = '\0';
        }
        else if (strcmp(end + 1, "size") == 0) {
            char buf[32];
            char *e2;

            if (vlen == 0 || vlen >= sizeof(buf)) {
                return fail(r, "malformed pax size in the archive");
            }
            memcpy(buf, eq + 1, vlen);
            buf[vlen] = '\0';
            r->ext_size = strtoll(buf, &e2, 10);
            if (*e2 != '\0' || r->ext_size < 0) {
                return fail(r, "malformed pax size in the archive");
            }
        }
        off += n;
    }
    return 0;
}

/* The current member's content has all come. */
static int member_done(struct sbx_tar_reader *r)
{
    if (r->kind == 1) {
        int rc = parse_pax(r);

        r->ext_len = 0;
        return rc;
    }
    if (r->kind == 2 || r->kind == 3) {
        char *dst = r->kind == 2 ? r->path : r->linkpath;
        size_t l = strnlen(r->ext, r->ext_len);

        if (l >= SBX_TAR_NAME_MAX) {
            return fail(r, "a name in the archive is too long");
        }
        memcpy(dst, r->ext, l);
        dst[l] = '\0';
        r->ext_len = 0;
    }
    return 0;
}

static int header(struct sbx_tar_reader *r)
{
    const unsigned char *h = r->hdr;
    struct sbx_tar_entry *e = &r->cur;
    int64_t size;
    char type = (char)h[156];
    int zero = 1;

    for (int i = 0; i < 512 && zero; i++) {
        zero = h[i] == 0;
    }
    if (zero) {
        r->done = 1;
        return 0;
    }
    if (!checksum_ok(h) || (size = num(h + 124, 12)) < 0) {
        return fail(r, "malformed tar header in the archive (bad checksum or size)");
    }
    r->left = size;
    r->pad = (size_t)((512 - size % 512) % 512);
    if (type == 'x' || type == 'L' || type == 'K') {
        if (size > EXT_MAX) {
            return fail(r, "an extended header in the archive is over 64 KiB");
        }
        r->kind = type == 'x' ? 1 : type == 'L' ? 2 : 3;
        free(r->ext);
        r->ext = malloc((size_t)size + 1);
        if (r->ext == NULL) {
            return fail(r, "out of memory");
        }
        r->ext_len = 0;
        r->ext[size] = '\0';
        return size == 0 ? member_done(r) : 0;
    }
    if (type == 'g') {
        r->kind = 4;
        return 0;
    }
    memset(e, 0, sizeof(*e));
    if (r->path[0] != '\0') {
        snprintf(e->name, sizeof(e->name), "%s", r->path);
    }
    else if (memcmp(h + 257, "ustar", 5) == 0 && h[345] != '\0') {
        char prefix[156];
        char name[101];

        field(prefix, sizeof(prefix), h + 345, 155);
        field(name, sizeof(name), h, 100);
        snprintf(e->name, sizeof(e->name), "%s/%s", prefix, name);
    }
    else {
        field(e->name, sizeof(e->name), h, 100);
    }
    if (r->linkpath[0] != '\0') {
        snprintf(e->link, sizeof(e->link), "%s", r->linkpath);
    }
    else {
        field(e->link, sizeof(e->link), h + 157, 100);
    }
    e->type = type == '\0' || type == '7' ? '0' : type;
    e->mode = (uint32_t)(num(h + 100, 8) & 07777);
    e->mtime = num(h + 136, 12);
    if (r->ext_size >= 0) {
        size = r->ext_size;
        r->left = size;
        r->pad = (size_t)((512 - size % 512) % 512);
    }
    e->size = e->type == '0' ? size : 0;
    r->path[0] = r->linkpath[0] = '\0';
    r->ext_size = -1;
    r->kind = e->type == '0' ? 0 : 4;
    if (r->on_entry(r->ud, e) != 0) {
        return fail(r, "stopped");
    }
    return 0;
}

int sbx_tar_feed(struct sbx_tar_reader *r, const char *data, size_t len)
{
    while (len > 0 && !r->done) {
        if (r->left > 0) {
            size_t n = (int64_t)len < r->left ? len : (size_t)r->left;

            if (r->kind == 0 && r->on_data != NULL && r->on_data(r->ud, data, n) != 0) {
                return fail(r, "stopped");
            }
            if (r->kind >= 1 && r->kind <= 3) {
                memcpy(r->ext + r->ext_len, data, n);
                r->ext_len += n;
            }
            r->left -= (int64_t)n;
            data += n;
            len -= n;
            if (r->left == 0 && member_done(r) < 0) {
                return -1;
            }
            continue;
        }
        if (r->pad > 0) {
            size_t n = len < r->pad ? len : r->pad;

            r->pad -= n;
            data += n;
            len -= n;
            continue;
        }
        size_t n = 512 - r->hlen;

        if (n > len) {
            n = len;
        }
        memcpy(r->hdr + r->hlen, data, n);
        r->hlen += n;
        data += n;
        len -= n;
        if (r->hlen == 512) {
            r->hlen = 0;
            if (header(r) < 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* ---- one file ------------------------------------------------------------- */

static void octal(unsigned char *dst, size_t n, int64_t v)
{
    char buf[32];

    snprintf(buf, sizeof(buf), "%0*llo", (int)n - 1, (unsigned long long)v);
    memcpy(dst, buf, n - 1); /* the caller's values fit n - 1 digits */
}

static void fill_header(unsigned char *h, const char *name, int64_t size, unsigned mode,
                        int64_t mtime, char type, const char *link)
{
    int64_t sum = 0;

    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    if (link != NULL) {
        snprintf((char *)h + 157, 100, "%s", link);
    }
    octal(h + 100, 8, mode & 07777);
    octal(h + 108, 8, 0);
    octal(h + 116, 8, 0);
    octal(h + 124, 12, size);
    octal(h + 136, 12, mtime);
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    memset(h + 148, ' ', 8);
    for (int i = 0; i < 512; i++) {
        sum += h[i];
    }
    snprintf((char *)h + 148, 8, "%06llo", (unsigned long long)(sum & 0777777));
}

static int tar_add(struct sbx_tar_buf *b, const char *name, char type, unsigned mode, int64_t mtime,
                   const char *link, const char *data, size_t len, int head_only);

int sbx_tar_add(struct sbx_tar_buf *b, const char *name, char type, unsigned mode, int64_t mtime,
                const char *link, const char *data, size_t len)
{
    return tar_add(b, name, type, mode, mtime, link, data, len, 0);
}

int sbx_tar_add_head(struct sbx_tar_buf *b, const char *name, unsigned mode, int64_t mtime,
                     uint64_t size)
{
    return tar_add(b, name, '0', mode, mtime, NULL, NULL, (size_t)size, 1);
}

static int tar_add(struct sbx_tar_buf *b, const char *name, char type, unsigned mode, int64_t mtime,
                   const char *link, const char *data, size_t len, int head_only)
{
    size_t room = head_only ? 0 : len; /* the data this buffer holds */
    size_t nl = strlen(name);
    size_t ll = link ? strlen(link) : 0;
    char pax[2 * SBX_TAR_NAME_MAX + 64];
    size_t paxl = 0;
    size_t need;

    if (nl == 0 || nl >= SBX_TAR_NAME_MAX || ll >= SBX_TAR_NAME_MAX) {
        return -1;
    }
    if (nl > 99 || ll > 99) { /* pax records carry the long name and link */
        const char *keys[2] = {nl > 99 ? "path" : NULL, ll > 99 ? "linkpath" : NULL};
        const char *vals[2] = {name, link};

        for (int k = 0; k < 2; k++) {
            size_t body;
            size_t digits = 1;

            if (keys[k] == NULL) {
                continue;
            }
            body = strlen(keys[k]) + strlen(vals[k]) + 3; /* " k=v\n" */
            while (1) {
                char d[24];
                size_t got = (size_t)snprintf(d, sizeof(d), "%zu", body + digits);

                if (got == digits) {
                    break;
                }
                digits = got;
            }
            paxl += (size_t)snprintf(pax + paxl, sizeof(pax) - paxl, "%zu %s=%s\n", body + digits,
                                     keys[k], vals[k]);
        }
    }
    need = (paxl ? 512 + (paxl + 511) / 512 * 512 : 0) + 512 + (room + 511) / 512 * 512 + 1024;
    if (b->len + need > b->cap) {
        size_t cap = b->cap ? b->cap : 64 * 1024;
        char *p;

        while (cap < b->len + need) {
            cap *= 2;
        }
        if ((p = realloc(b->data, cap)) == NULL) {
            return -1;
        }
        b->data = p;
        b->cap = cap;
    }
    memset(b->data + b->len, 0, need);
    if (paxl) {
        fill_header((unsigned char *)b->data + b->len, "PaxHeader", (int64_t)paxl, 0644, mtime, 'x',
                    NULL);
        memcpy(b->data + b->len + 512, pax, paxl);
        b->len += 512 + (paxl + 511) / 512 * 512;
    }
    fill_header((unsigned char *)b->data + b->len, name, (int64_t)len, mode, mtime, type, link);
    if (room > 0) {
        memcpy(b->data + b->len + 512, data, room);
    }
    b->len += 512 + (room + 511) / 512 * 512;
    return 0;
}

void sbx_tar_finish(struct sbx_tar_buf *b)
{
    if (b->cap < b->len + 1024) { /* nothing was added */
        char *p = realloc(b->data, b->len + 1024);

        if (p == NULL) {
            return;
        }
        b->data = p;
        b->cap = b->len + 1024;
        memset(b->data + b->len, 0, 1024);
    }
    b->len += 1024; /* the end blocks, zeroed by the last add */
}

int sbx_tar_one_file(const char *name, const char *data, size_t len, unsigned mode, int64_t mtime,
                     char **out, size_t *out_len)
{
    struct sbx_tar_buf b = {0};

    if (strchr(name, '/') != NULL || sbx_tar_add(&b, name, '0', mode, mtime, NULL, data, len) < 0) {
        free(b.data);
        return -1;
    }
    sbx_tar_finish(&b);
    *out = b.data;
    *out_len = b.len;
    return 0;
}

/* ---- extracting below one host directory ----------------------------------- */

static int xfail(struct sbx_tar_extract *x, const char *name, const char *what)
{
    snprintf(x->rd.err, sizeof(x->rd.err), "%.300s: %s", name, what);
    return 1;
}

static void close_out(struct sbx_tar_extract *x)
{
    if (x->out_fd >= 0) {
        struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = x->out_mtime}};

        if (x->out_mtime >= 0) {
            (void)futimens(x->out_fd, ts);
        }
        close(x->out_fd);
        x->out_fd = -1;
    }
}

/* Splits name into components below the root (top replacing the first); -1: refused. */
static int split(struct sbx_tar_extract *x, const char *name, char *buf, size_t cap, char **comp,
                 int max, int *n)
{
    char *save = NULL;
    char *p;

    *n = 0;
    if (snprintf(buf, cap, "%s", name) >= (int)cap) {
        return -1;
    }
    for (p = strtok_r(buf, "/", &save); p != NULL; p = strtok_r(NULL, "/", &save)) {
        if (strcmp(p, ".") == 0) {
            continue;
        }
        if (strcmp(p, "..") == 0 || *n >= max) {
            return -1;
        }
        comp[(*n)++] = p;
    }
    if (*n > 0 && x->top != NULL) {
        comp[0] = (char *)x->top;
    }
    return 0;
}

/* Opens (making it when missing) each directory of comp[0..n), never following a
 * symlink; returns the last one's fd, or -1. */
static int walk(struct sbx_tar_extract *x, char **comp, int n, const char *name)
{
    int fd = dup(x->root_fd);

    for (int i = 0; i < n && fd >= 0; i++) {
        int next = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (next < 0 && errno == ENOENT && mkdirat(fd, comp[i], 0755) == 0) {
            next = openat(fd, comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        close(fd);
        fd = next;
        if (fd < 0) {
            xfail(x, name,
                  errno == ELOOP || errno == ENOTDIR
                      ? "a symlink or a file stands where a directory is due: refused"
                      : strerror(errno));
        }
    }
    return fd;
}

static int on_entry(void *ud, const struct sbx_tar_entry *e)
{
    struct sbx_tar_extract *x = ud;
    char buf[SBX_TAR_NAME_MAX];
    char *comp[512];
    int n;
    int dfd;
    int rc = 0;
    const char *last;
    mode_t mode = e->mode & 0777;

    close_out(x);
    if (e->type != '0' && e->type != '5' && e->type != '2' && e->type != '1') {
        x->skipped++; /* devices, FIFOs, ...: never made on the host */
        return 0;
    }
    if (split(x, e->name, buf, sizeof(buf), comp, 512, &n) < 0) {
        return xfail(x, e->name, "a name with '..' or too deep: refused");
    }
    if (n == 0) {
        return 0; /* "." itself */
    }
    if ((dfd = walk(x, comp, n - 1, e->name)) < 0) {
        return 1;
    }
    last = comp[n - 1];
    if (e->type == '5') {
        struct stat st;

        if (mkdirat(dfd, last, mode | 0700) < 0 && errno != EEXIST) {
            rc = xfail(x, e->name, strerror(errno));
        }
        else if (fstatat(dfd, last, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode)) {
            rc = xfail(x, e->name, "exists and is not a directory: refused");
        }
        x->dirs++;
        close(dfd);
        return rc;
    }
    /* a file, link or symlink replaces what is there (never written through) */
    if (unlinkat(dfd, last, 0) < 0 && errno != ENOENT) {
        rc = xfail(x, e->name,
                   errno == EISDIR ? "a directory stands there: refused" : strerror(errno));
    }
    else if (e->type == '2') {
        if (symlinkat(e->link, dfd, last) < 0) {
            rc = xfail(x, e->name, strerror(errno));
        }
        x->links++;
    }
    else if (e->type == '1') {
        char lbuf[SBX_TAR_NAME_MAX];
        char *lcomp[512];
        int ln;
        int lfd;

        if (split(x, e->link, lbuf, sizeof(lbuf), lcomp, 512, &ln) < 0 || ln == 0) {
            rc = xfail(x, e->name, "a hard link with '..' or to the root: refused");
        }
        else if ((lfd = walk(x, lcomp, ln - 1, e->name)) < 0) {
            rc = 1;
        }
        else {
            if (linkat(lfd, lcomp[ln - 1], dfd, last, 0) < 0) {
                rc = xfail(x, e->name, strerror(errno));
            }
            close(lfd);
        }
        x->files++;
    }
    else {
        x->out_fd = openat(dfd, last, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        x->out_mtime = e->mtime;
        if (x->out_fd < 0) {
            rc = xfail(x, e->name, strerror(errno));
        }
        x->files++;
    }
    close(dfd);
    return rc;
}

static int on_data(void *ud, const char *data, size_t len)
{
    struct sbx_tar_extract *x = ud;

    while (len > 0 && x->out_fd >= 0) {
        ssize_t w = write(x->out_fd, data, len);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return xfail(x, x->rd.cur.name, strerror(errno));
        }
        data += w;
        len -= (size_t)w;
    }
    return 0;
}

void sbx_tar_extract_init(struct sbx_tar_extract *x, int root_fd, const char *top)
{
    memset(x, 0, sizeof(*x));
    x->root_fd = root_fd;
    x->top = top;
    x->out_fd = -1;
    sbx_tar_reader_init(&x->rd);
    x->rd.on_entry = on_entry;
    x->rd.on_data = on_data;
    x->rd.ud = x;
}

int sbx_tar_extract_feed(struct sbx_tar_extract *x, const char *data, size_t len)
{
    return sbx_tar_feed(&x->rd, data, len);
}

int sbx_tar_extract_fini(struct sbx_tar_extract *x)
{
    int cut = !x->rd.done && x->rd.err[0] == '\0';

    close_out(x);
    sbx_tar_reader_fini(&x->rd);
    if (cut) {
        snprintf(x->rd.err, sizeof(x->rd.err), "the archive ended early");
        return -1;
    }
    return x->rd.err[0] != '\0' ? -1 : 0;
}
