/* ca_bundle.c - extra CAs for the sandboxes (egress.ca_bundle, pools.NAME.ca_bundle;
 * docs/egress.md, "Extra CAs"): checked at config load, and installed per task into
 * the sandbox's egress directory (mounted read-only at /run/sbx-egress) as the extra
 * CAs alone (NODE_EXTRA_CA_CERTS) and as the host's system store plus them (the other
 * variables, which replace a client's store rather than add to it). */
#include "egress/ca_bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/xalloc.h"

#define BUNDLE_MAX (4u << 20) /* bytes of a CA file read */

const struct sbx_kv sbx_ca_bundle_env[] = {
    {"NODE_EXTRA_CA_CERTS", SBX_CA_EXTRA_PATH}, {"SSL_CERT_FILE", SBX_CA_BUNDLE_PATH},
    {"REQUESTS_CA_BUNDLE", SBX_CA_BUNDLE_PATH}, {"GIT_SSL_CAINFO", SBX_CA_BUNDLE_PATH},
    {"CURL_CA_BUNDLE", SBX_CA_BUNDLE_PATH},
};
const size_t sbx_ca_bundle_n_env = sizeof(sbx_ca_bundle_env) / sizeof(sbx_ca_bundle_env[0]);

/* The file's bytes (NUL-terminated), at most BUNDLE_MAX; NULL with errno. */
static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    char *buf;
    size_t off = 0;

    if (fd < 0) {
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > BUNDLE_MAX) {
        int e = fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) ? EISDIR : EFBIG;

        close(fd);
        errno = e;
        return NULL;
    }
    buf = xmalloc((size_t)st.st_size + 1);
    while (off < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        off += (size_t)n;
    }
    close(fd);
    buf[off] = '\0';
    *len = off;
    return buf;
}

static int base64_line(const char *p, size_t n)
{
    if (n == 0 || n > 128) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];

        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '+' || ch == '/' || ch == '=')) {
            return 0;
        }
    }
    return 1;
}

int sbx_ca_bundle_check(const char *path, char *why, size_t size)
{
    size_t len = 0;
    char *buf = slurp(path, &len);
    const char *p;
    unsigned line = 0;
    unsigned begin = 0; /* line of the open block, 0 outside one */
    size_t b64 = 0;
    int certs = 0;

    if (buf == NULL) {
        snprintf(why, size, "cannot read '%s': %s", path,
                 errno == EFBIG ? "over 4 MiB" : strerror(errno));
        return -1;
    }
    for (p = buf; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);

        line++;
        if (n > 0 && p[n - 1] == '\r') {
            n--;
        }
        if (begin == 0 && n == 27 && memcmp(p, "-----BEGIN CERTIFICATE-----", 27) == 0) {
            begin = line;
            b64 = 0;
        }
        else if (begin != 0 && n == 25 && memcmp(p, "-----END CERTIFICATE-----", 25) == 0) {
            if (b64 == 0 || b64 % 4 != 0) {
                snprintf(why, size,
                         "'%s' line %u: the certificate begun on line %u is empty or "
                         "cut (not PEM)",
                         path, line, begin);
                free(buf);
                return -1;
            }
            certs++;
            begin = 0;
        }
        else if (begin != 0) {
            if (!base64_line(p, n)) {
                snprintf(why, size, "'%s' line %u: not base64 inside a certificate (not PEM)", path,
                         line);
                free(buf);
                return -1;
            }
            b64 += n;
        }
        else if (n >= 5 && memcmp(p, "-----", 5) == 0) {
            snprintf(why, size, "'%s' line %u: only CERTIFICATE blocks belong in a CA bundle", path,
                     line);
            free(buf);
            return -1;
        }
        p = nl != NULL ? nl + 1 : p + strlen(p);
    }
    free(buf);
    if (begin != 0) {
        snprintf(why, size, "'%s' line %u: the certificate is not ended (not PEM)", path, begin);
        return -1;
    }
    if (certs == 0) {
        snprintf(why, size, "'%s': no PEM certificate in it", path);
        return -1;
    }
    return 0;
}

static const char *system_store(void)
{
    static const char *const stores[] = {
        "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine */
        "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
        "/etc/ssl/cert.pem",
        NULL,
    };

    for (size_t i = 0; stores[i] != NULL; i++) {
        if (access(stores[i], R_OK) == 0) {
            return stores[i];
        }
    }
    return NULL;
}

/* Writes len bytes to dir/name (0644) through a temporary file and rename. */
static int write_file(const char *dir, const char *name, const char *a, size_t alen, const char *b,
                      size_t blen, sbx_error_t **err)
{
    char *tmp = xasprintf("%s/.%s.tmp", dir, name);
    char *path = xasprintf("%s/%s", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    int rc = -1;

    if (fd >= 0 && (alen == 0 || write(fd, a, alen) == (ssize_t)alen) &&
        (alen == 0 || a[alen - 1] == '\n' || write(fd, "\n", 1) == 1) &&
        (blen == 0 || write(fd, b, blen) == (ssize_t)blen) && fchmod(fd, 0644) == 0 &&
        close(fd) == 0) {
        fd = -1;
        rc = rename(tmp, path);
    }
    if (rc < 0) {
        sbx_error_set(err, SBX_E_GENERIC, "egress: cannot write %s: %s", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        unlink(tmp);
    }
    free(tmp);
    free(path);
    return rc;
}

int sbx_ca_bundle_install(const char *extra, const char *dir, sbx_error_t **err)
{
    size_t elen = 0;
    size_t slen = 0;
    char *e = slurp(extra, &elen);
    const char *store = system_store();
    char *s = store != NULL ? slurp(store, &slen) : NULL;
    int rc;

    if (e == NULL) {
        free(s);
        return sbx_error_set(err, SBX_E_CONFIG, "egress.ca_bundle: cannot read '%s': %s", extra,
                             strerror(errno));
    }
    rc = write_file(dir, SBX_CA_EXTRA_FILE, e, elen, NULL, 0, err);
    if (rc == 0) {
        rc = write_file(dir, SBX_CA_BUNDLE_FILE, s != NULL ? s : "", slen, e, elen, err);
    }
    free(e);
    free(s);
    return rc;
}

void sbx_ca_bundle_remove(const char *dir)
{
    char *a = xasprintf("%s/%s", dir, SBX_CA_EXTRA_FILE);
    char *b = xasprintf("%s/%s", dir, SBX_CA_BUNDLE_FILE);

    unlink(a);
    unlink(b);
    free(a);
    free(b);
}
