/* fuzz_h1.c - the one HTTP/1 head parser (core/src/http/h1.c) and its users
 * fuzzed as one: an input starting "HTTP/" is a reply (the parser on a response
 * head, then runner/fwd_parse.c reading it as a forwarded reply: head, framing,
 * chunked body; (added, issue 31) and http/h1_reply.c reading it as a runner's
 * answer to an upgrade, an owner's to a relayed terminal or port, a preview
 * server's, under their caps), anything else a request (the parser on a request head, then the
 * proxy's egress/request.c, plain and inside a tunnel). The corpus of the old
 * `request` target is this target's corpus. Promises checked (a trap when broken):
 * a refusal has an error, printable ASCII; a head fits the input and its headers fit the head and
 * the caps; the head parsed at once and byte by byte gives the same answer. */
#include <stdint.h>
#include <string.h>

#include "egress/request.h"
#include "http/h1.h"
#include "http/h1_reply.h"
#include "runner/fwd_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_head(const struct sbx_h1_head *h, long end, const char *buf, size_t size)
{
    if (end < 0 && (h->error == SBX_H1_OK || h->err[0] == '\0')) {
        __builtin_trap();
    }
    for (const char *c = h->err; *c != '\0'; c++) {
        if (*c < ' ' || *c > '~') {
            __builtin_trap(); /* the error goes into logs and JSON: printable ASCII */
        }
    }
    if (end <= 0) {
        return;
    }
    if ((size_t)end > size || (size_t)end > h->lim.head_max || h->nheaders > h->lim.headers_max) {
        __builtin_trap();
    }
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct sbx_h1_header *hd = &h->headers[i];

        if (hd->name.p < buf || hd->name.p + hd->line_len > buf + end || hd->name.n == 0 ||
            hd->value.p + hd->value.n > buf + end) {
            __builtin_trap();
        }
    }
}

/* The same head fed in pieces of step bytes. */
static long stepped(int response, const char *buf, size_t size, size_t step,
                    enum sbx_h1_error *error)
{
    struct sbx_h1_head h;
    long got = 0;

    sbx_h1_init(&h, response, NULL);
    for (size_t have = step < size ? step : size; got == 0; have += step) {
        got = sbx_h1_feed(&h, buf, have < size ? have : size);
        if (have >= size) {
            break;
        }
    }
    *error = h.error;
    return got;
}

static int sink_body(void *ud, const char *d, size_t n)
{
    (void)ud;
    (void)d;
    (void)n;
    return 0;
}

static void reply(const char *buf, size_t size)
{
    static struct fwd_reply p;
    size_t step = size > 0 ? (size_t)(unsigned char)buf[size - 1] % 17 + 1 : 1;

    fwd_reply_init(&p);
    for (size_t i = 0; i < size; i += step) {
        size_t n = size - i < step ? size - i : step;

        if (fwd_reply_feed(&p, buf + i, n, NULL, sink_body, NULL) < 0) {
            if (p.phase == FWD_BAD && p.err[0] == '\0') {
                __builtin_trap();
            }
            return;
        }
    }
    if (fwd_reply_eof(&p) < 0 && p.err[0] == '\0') {
        __builtin_trap();
    }
}

/* The reply heads sbx reads itself: within their cap, one printable error line. */
static void reply_heads(const char *buf, size_t size)
{
    for (int kind = SBX_H1_REPLY_UPGRADE; kind <= SBX_H1_REPLY_PREVIEW; kind++) {
        struct sbx_h1_head h;
        char err[256] = "";
        char line[65];
        long end;

        sbx_h1_reply_init(&h, (enum sbx_h1_reply_kind)kind);
        end = sbx_h1_reply_feed(&h, buf, size, "the peer", err, sizeof(err));
        check_head(&h, end, buf, size);
        if (end < 0 && strncmp(err, "the peer ", 9) != 0) {
            __builtin_trap();
        }
        for (const char *c = err; *c != '\0'; c++) {
            if (*c < ' ' || *c > '~') {
                __builtin_trap();
            }
        }
        if (end > 0) {
            size_t n = sbx_h1_reply_status_line(&h, buf, line, sizeof(line));

            if (n < 14 || n > (size_t)end || buf[n - 2] != '\r' || buf[n - 1] != '\n' ||
                strlen(line) > 64) {
                __builtin_trap();
            }
        }
    }
}

static void request(const char *buf, size_t size)
{
    struct sbx_egress_request r, tunnel, in;
    const char *reason = NULL;
    int status = 0;
    long end = sbx_egress_head_end(buf, size);

    if (end <= 0) {
        return;
    }
    memset(&r, 0, sizeof(r));
    if (sbx_egress_request_parse(buf, (size_t)end, &r, &status, &reason) == 0) {
        if (!r.connect && (r.forward == NULL || r.forward_len == 0)) {
            __builtin_trap();
        }
    }
    else if (reason == NULL || status < 400) {
        __builtin_trap();
    }
    sbx_egress_request_clear(&r);

    memset(&tunnel, 0, sizeof(tunnel));
    memcpy(tunnel.method, "CONNECT", 8);
    tunnel.connect = 1;
    strcpy(tunnel.host, "example.com");
    tunnel.port = 443;
    memset(&in, 0, sizeof(in));
    (void)sbx_egress_request_parse_tunnel(buf, (size_t)end, &tunnel, &in, &status, &reason);
    sbx_egress_request_clear(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    int response = size >= 5 && memcmp(buf, "HTTP/", 5) == 0;
    struct sbx_h1_head h;
    enum sbx_h1_error e2;
    long end;
    long end2;

    if (size > 2 * SBX_H1_TUNNEL_HEAD_MAX) {
        return 0; /* no caller holds more than a head's cap */
    }
    sbx_h1_init(&h, response, NULL);
    end = sbx_h1_feed(&h, buf, size);
    check_head(&h, end, buf, size);
    end2 = stepped(response, buf, size, size > 0 ? (size_t)(unsigned char)buf[0] % 7 + 1 : 1, &e2);
    if (end2 != end || e2 != h.error) {
        __builtin_trap();
    }
    if (response) {
        reply(buf, size);
        reply_heads(buf, size);
    }
    else {
        request(buf, size);
    }
    return 0;
}
