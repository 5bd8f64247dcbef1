/* sni.c - reads the server_name extension (RFC 6066) from a TLS ClientHello (RFC 8446
 * 4.1.2; the same layout back to TLS 1.0), reassembling it from handshake records.
 * Strict on purpose: the proxy refuses what it cannot read, because a lenient server
 * might accept it (RFC 8446 tells servers to ignore the record version). */
#include "egress/sni.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

#define RECORD_HANDSHAKE 0x16
#define RECORD_MAX 16384 /* a plaintext record's payload */
#define HS_CLIENT_HELLO 1
#define EXT_SERVER_NAME 0
#define EXT_ECH 0xfe0d  /* encrypted_client_hello (RFC 9849 draft numbering) */
#define EXT_ESNI 0xffce /* the older encrypted_server_name draft */
#define NAME_HOST 0

struct reader {
    const unsigned char *p;
    size_t left;
};

static int take(struct reader *r, size_t n, const unsigned char **out)
{
    if (r->left < n) {
        return -1;
    }
    if (out != NULL) {
        *out = r->p;
    }
    r->p += n;
    r->left -= n;
    return 0;
}

static int take_u8(struct reader *r, size_t *v)
{
    const unsigned char *b;

    if (take(r, 1, &b) < 0) {
        return -1;
    }
    *v = b[0];
    return 0;
}

static int take_u16(struct reader *r, size_t *v)
{
    const unsigned char *b;

    if (take(r, 2, &b) < 0) {
        return -1;
    }
    *v = (size_t)b[0] << 8 | b[1];
    return 0;
}

/* The server_name extension's body: exactly one host_name. */
static enum sbx_egress_sni server_name(struct reader ext, char *host, size_t host_size)
{
    size_t list;
    int found = 0;

    if (take_u16(&ext, &list) < 0 || list != ext.left || list == 0) {
        return SBX_SNI_MALFORMED;
    }
    while (ext.left > 0) {
        size_t type;
        size_t len;
        const unsigned char *name;

        if (take_u8(&ext, &type) < 0 || take_u16(&ext, &len) < 0 || take(&ext, len, &name) < 0) {
            return SBX_SNI_MALFORMED;
        }
        if (type != NAME_HOST) {
            continue;
        }
        if (found || len == 0 || len > 253 || len >= host_size || memchr(name, 0, len)) {
            return SBX_SNI_MALFORMED;
        }
        memcpy(host, name, len);
        host[len] = '\0';
        found = 1;
    }
    return found ? SBX_SNI_FOUND : SBX_SNI_MALFORMED;
}

/* A whole ClientHello body. */
static enum sbx_egress_sni client_hello(struct reader r, char *host, size_t host_size)
{
    size_t len;
    size_t ext_total;
    int seen = 0;
    enum sbx_egress_sni res = SBX_SNI_ABSENT;

    if (take(&r, 2 + 32, NULL) < 0 ||                                   /* version, random */
        take_u8(&r, &len) < 0 || len > 32 || take(&r, len, NULL) < 0 || /* session id */
        take_u16(&r, &len) < 0 || len < 2 || len % 2 != 0 || take(&r, len, NULL) < 0 ||
        take_u8(&r, &len) < 0 || len < 1 || take(&r, len, NULL) < 0) {
        return SBX_SNI_MALFORMED;
    }
    if (r.left == 0) {
        return SBX_SNI_ABSENT; /* no extensions at all */
    }
    if (take_u16(&r, &ext_total) < 0 || ext_total != r.left) {
        return SBX_SNI_MALFORMED;
    }
    while (r.left > 0) {
        size_t type;
        struct reader ext;

        if (take_u16(&r, &type) < 0 || take_u16(&r, &len) < 0 || take(&r, len, &ext.p) < 0) {
            return SBX_SNI_MALFORMED;
        }
        ext.left = len;
        if (type == EXT_ECH || type == EXT_ESNI) {
            return SBX_SNI_ECH;
        }
        if (type == EXT_SERVER_NAME) {
            if (seen++) {
                return SBX_SNI_MALFORMED; /* one extension of a type */
            }
            res = server_name(ext, host, host_size);
            if (res == SBX_SNI_MALFORMED) {
                return res;
            }
        }
    }
    return res;
}

enum sbx_egress_sni sbx_egress_sni_parse(const unsigned char *p, size_t n, char *host,
                                         size_t host_size)
{
    unsigned char hs[SBX_EGRESS_SNI_MAX];
    size_t hs_len = 0;
    size_t off = 0;
    int records = 0;

    if (n == 0) {
        return SBX_SNI_MORE;
    }
    if (p[0] != RECORD_HANDSHAKE) {
        return SBX_SNI_NOT_TLS;
    }
    /* Gather handshake records until the first handshake message is whole. */
    for (;;) {
        size_t rec_len;

        if (hs_len >= 4) {
            size_t msg_len = (size_t)hs[1] << 16 | (size_t)hs[2] << 8 | hs[3];
            struct reader r;

            if (hs[0] != HS_CLIENT_HELLO || msg_len > sizeof(hs) - 4) {
                return SBX_SNI_MALFORMED;
            }
            if (hs_len >= 4 + msg_len) {
                /* Nothing else shares its records (early data or a compatibility
                 * change_cipher_spec may follow, in records of their own). */
                if (hs_len != 4 + msg_len) {
                    return SBX_SNI_MALFORMED;
                }
                r.p = hs + 4;
                r.left = msg_len;
                return client_hello(r, host, host_size);
            }
        }
        if (n - off < 5) {
            return SBX_SNI_MORE;
        }
        rec_len = (size_t)p[off + 3] << 8 | p[off + 4];
        if (p[off] != RECORD_HANDSHAKE || rec_len == 0 || rec_len > RECORD_MAX ||
            ++records > SBX_EGRESS_SNI_RECORDS) {
            return SBX_SNI_MALFORMED;
        }
        if (n - off - 5 < rec_len) {
            return SBX_SNI_MORE;
        }
        if (rec_len > sizeof(hs) - hs_len) {
            return SBX_SNI_MALFORMED;
        }
        memcpy(hs + hs_len, p + off + 5, rec_len);
        hs_len += rec_len;
        off += 5 + rec_len;
    }
}

size_t sbx_egress_sni_hello_len(const unsigned char *p, size_t n)
{
    unsigned char head[4];
    size_t head_n = 0;
    size_t payload = 0;
    size_t off = 0;

    /* the records parse checked: handshake records holding exactly the message */
    while (n - off >= 5) {
        size_t rec_len = (size_t)p[off + 3] << 8 | p[off + 4];

        if (n - off - 5 < rec_len) {
            break;
        }
        for (size_t i = 0; i < rec_len && head_n < 4; i++) {
            head[head_n++] = p[off + 5 + i];
        }
        payload += rec_len;
        off += 5 + rec_len;
        if (head_n == 4 &&
            payload >= 4 + ((size_t)head[1] << 16 | (size_t)head[2] << 8 | head[3])) {
            return off;
        }
    }
    return off;
}

size_t sbx_egress_sni_want(const unsigned char *p, size_t n)
{
    size_t off = 0;

    for (;;) {
        size_t rec_len;

        if (n - off < 5) {
            return off + 5;
        }
        rec_len = (size_t)p[off + 3] << 8 | p[off + 4];
        if (n - off - 5 < rec_len) {
            return off + 5 + rec_len;
        }
        off += 5 + rec_len;
    }
}

int sbx_egress_http_start(const unsigned char *p, size_t n)
{
    static const char *const methods[] = {"GET ",    "POST ",    "PUT ",   "HEAD ",
                                          "DELETE ", "OPTIONS ", "PATCH ", "CONNECT ",
                                          "TRACE ",  "PRI ",     NULL};
    int maybe = 0;

    for (size_t i = 0; methods[i] != NULL; i++) {
        size_t len = strlen(methods[i]);

        if (n >= len && memcmp(p, methods[i], len) == 0) {
            return strcmp(methods[i], "PRI ") == 0 ? 2 : 1;
        }
        if (n < len && memcmp(p, methods[i], n) == 0) {
            maybe = 1;
        }
    }
    return maybe ? -1 : 0;
}

int sbx_egress_sni_matches(const char *sni, const char *host)
{
    size_t a = strlen(sni);
    size_t b = strlen(host);

    if (a > 0 && sni[a - 1] == '.') {
        a--;
    }
    if (b > 0 && host[b - 1] == '.') {
        b--;
    }
    return a == b && a > 0 && strncasecmp(sni, host, a) == 0;
}
