/* tls_hello.h - TLS ClientHellos built byte by byte for the egress tests (the SNI parser
 * and the proxy's tunnel check): a name or none, the usual extensions or none or an
 * extra one, in records of any size. */
#ifndef SBX_TEST_TLS_HELLO_H
#define SBX_TEST_TLS_HELLO_H

#include "test_common.h"

#include <string.h>

struct buf {
    unsigned char b[8192];
    size_t n;
};

static inline void put(struct buf *o, const void *p, size_t n)
{
    assert_true(o->n + n <= sizeof(o->b));
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static inline void put8(struct buf *o, unsigned v)
{
    unsigned char c = (unsigned char)v;

    put(o, &c, 1);
}

static inline void put16(struct buf *o, unsigned v)
{
    put8(o, v >> 8);
    put8(o, v & 0xff);
}

/* A ClientHello handshake message (header included) naming names[] (NULL: no
 * server_name extension; with_ext 0: no extensions at all, 1: the usual ones, any
 * other value: also an extension of that type, after the name). */
static inline void hello_msg(struct buf *o, const char *const *names, int with_ext)
{
    struct buf body = {{0}, 0};
    struct buf ext = {{0}, 0};
    unsigned char random[32] = {0};

    put16(&body, 0x0303);
    put(&body, random, sizeof(random));
    put8(&body, 0); /* session id */
    put16(&body, 2);
    put16(&body, 0x1301); /* TLS_AES_128_GCM_SHA256 */
    put8(&body, 1);
    put8(&body, 0); /* null compression */
    if (with_ext) {
        put16(&ext, 43); /* supported_versions: TLS 1.3 */
        put16(&ext, 3);
        put8(&ext, 2);
        put16(&ext, 0x0304);
        if (names != NULL) {
            struct buf list = {{0}, 0};

            for (size_t i = 0; names[i] != NULL; i++) {
                put8(&list, 0);
                put16(&list, (unsigned)strlen(names[i]));
                put(&list, names[i], strlen(names[i]));
            }
            put16(&ext, 0);
            put16(&ext, (unsigned)list.n + 2);
            put16(&ext, (unsigned)list.n);
            put(&ext, list.b, list.n);
        }
        if (with_ext > 1) {
            put16(&ext, (unsigned)with_ext);
            put16(&ext, 1);
            put8(&ext, 0);
        }
        put16(&body, (unsigned)ext.n);
        put(&body, ext.b, ext.n);
    }
    put8(o, 1);
    put8(o, (unsigned)(body.n >> 16));
    put16(o, (unsigned)(body.n & 0xffff));
    put(o, body.b, body.n);
}

/* The message in records of at most `frag` bytes each. */
static inline void records(struct buf *o, const struct buf *msg, size_t frag)
{
    for (size_t off = 0; off < msg->n; off += frag) {
        size_t len = msg->n - off < frag ? msg->n - off : frag;

        put8(o, 0x16);
        put16(o, 0x0301);
        put16(o, (unsigned)len);
        put(o, msg->b + off, len);
    }
}

static inline void client_hello(struct buf *o, const char *name)
{
    const char *names[] = {name, NULL};
    struct buf msg = {{0}, 0};

    hello_msg(&msg, name != NULL ? names : NULL, 1);
    records(o, &msg, 16384);
}

#endif
