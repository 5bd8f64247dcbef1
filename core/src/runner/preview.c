/* preview.c - a port preview's answer, its head checked by the one HTTP/1
 * parser, relayed with the preview's CSP (preview.h). */
#include "runner/preview.h"

#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/h1_reply.h"
#include "sbx/sbx_util.h"
#include "util/fileio.h"
#include "util/xalloc.h"

#define COPY_CHUNK 65536
#define FROM "the server in the sandbox"

_Static_assert(COPY_CHUNK > SBX_H1_PREVIEW_HEAD_MAX, "a head and the byte after its cap fit");

void runner_reply_raw(int fd, int code, const char *reason, const char *msg)
{
    json_t *j = json_pack("{s:s}", "error", msg);
    char *body = json_dumps(j, JSON_COMPACT);
    char head[256];

    snprintf(head, sizeof(head),
             "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
             "Connection: close\r\n\r\n",
             code, reason, strlen(body) + 1);
    if (sbx_send_all(fd, head, strlen(head)) == 0 && sbx_send_all(fd, body, strlen(body)) == 0) {
        sbx_send_all(fd, "\n", 1);
    }
    free(body);
    json_decref(j);
}

/* One read of up, by the deadline (ms, monotonic): the bytes read, 0 at its
 * end, or -1 with errno (ETIMEDOUT: the deadline, or up's own read timeout,
 * passed first). */
static ssize_t read_by(int up, char *p, size_t room, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - sbx_mono_ms();
        struct pollfd pf = {.fd = up, .events = POLLIN};
        int ready = left > 0 ? poll(&pf, 1, (int)left) : 0;
        ssize_t n;

        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        n = read(up, p, room);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            errno = ETIMEDOUT;
        }
        return n;
    }
}

/* The response's final head into buf (with what came after it in the same
 * reads): its length, *have the bytes in buf; or 0 with why set. (changed,
 * issue 31) Interim heads (1xx) are read and dropped, never relayed: a browser
 * takes no page from them, so the CSP on one would leave the final page
 * without it. Their bytes together are held to the head's cap; a 101 answers
 * no request of ours (it carries no Upgrade) and is refused. (changed, issue
 * 31) All of it within timeout_s, not only each read: a server that sends a
 * byte now and then holds the session no longer than that. */
static size_t read_head(int up, struct sbx_h1_head *h, char *buf, size_t *have, int timeout_s,
                        int64_t *total, char *why, size_t whylen)
{
    int64_t deadline = sbx_mono_ms() + (int64_t)timeout_s * 1000;
    size_t interim = 0;

    for (;;) {
        long end;

        sbx_h1_reply_init(h, SBX_H1_REPLY_PREVIEW);
        end = *have > 0 ? sbx_h1_reply_feed(h, buf, *have, FROM, why, whylen) : 0;
        while (end == 0) {
            ssize_t n = read_by(up, buf + *have, COPY_CHUNK - *have, deadline);

            if (n < 0 && errno == ETIMEDOUT) {
                snprintf(why, whylen, FROM " did not answer within %d s", timeout_s);
                return 0;
            }
            if (n < 0) {
                snprintf(why, whylen, "reading the answer of " FROM ": %s", strerror(errno));
                return 0;
            }
            if (n == 0) {
                sbx_h1_reply_cut(*have, FROM, why, whylen);
                return 0;
            }
            *total += n;
            *have += (size_t)n;
            end = sbx_h1_reply_feed(h, buf, *have, FROM, why, whylen);
        }
        if (end < 0) {
            return 0;
        }
        if (h->status >= 200) {
            return (size_t)end;
        }
        if (h->status == 101) {
            snprintf(why, whylen, FROM " answered 101 to a request without Upgrade");
            return 0;
        }
        interim += (size_t)end;
        if (interim > SBX_H1_PREVIEW_HEAD_MAX) {
            snprintf(why, whylen, FROM " sent more than %d bytes of interim (1xx) heads",
                     SBX_H1_PREVIEW_HEAD_MAX);
            return 0;
        }
        memmove(buf, buf + end, *have - (size_t)end);
        *have -= (size_t)end;
    }
}

/* 1 for a header the relay drops: the server's say on the connection, which
 * the runner closes after this one answer (Connection: close is sent), and a
 * CSP line that is the runner's own (an owner box added it already). */
static int dropped_header(const struct sbx_h1_header *hd)
{
    static const char *const hop[] = {"Connection", "Keep-Alive", "Proxy-Connection"};
    static const char csp[] = RUNNER_PREVIEW_CSP;

    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++) {
        if (hd->name.n == strlen(hop[i]) && strncasecmp(hd->name.p, hop[i], hd->name.n) == 0) {
            return 1;
        }
    }
    return hd->line_len == sizeof(csp) - 1 && memcmp(hd->name.p, csp, hd->line_len) == 0;
}

size_t runner_preview_head(const struct sbx_h1_head *h, const char *buf, char *out, size_t cap)
{
    static const char add[] = RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE;
    size_t line = sbx_h1_reply_status_line(h, buf, NULL, 0);
    size_t n = 0;

    if (cap < h->len + sizeof(add)) {
        return 0;
    }
    memcpy(out, buf, line);
    n = line;
    memcpy(out + n, add, sizeof(add) - 1);
    n += sizeof(add) - 1;
    for (size_t i = 0; i < h->nheaders; i++) {
        const struct sbx_h1_header *hd = &h->headers[i];

        if (!dropped_header(hd)) {
            memcpy(out + n, hd->name.p, hd->line_len);
            n += hd->line_len;
        }
    }
    memcpy(out + n, "\r\n", 2);
    return n + 2;
}

int64_t runner_preview_relay(int up, int client, int timeout_s)
{
    int64_t total = 0;
    char *buf = xmalloc(COPY_CHUNK);
    struct sbx_h1_head *h = xmalloc(sizeof(*h));
    size_t have = 0;
    char why[300];
    size_t end = read_head(up, h, buf, &have, timeout_s, &total, why, sizeof(why));
    char *head = NULL;
    size_t head_len;

    if (end == 0) {
        runner_reply_raw(client, 502, "Bad Gateway", why);
        goto out;
    }
    head = xmalloc(end + RUNNER_PREVIEW_HEAD_EXTRA);
    head_len = runner_preview_head(h, buf, head, end + RUNNER_PREVIEW_HEAD_EXTRA);
    if (sbx_send_all(client, head, head_len) < 0 ||
        sbx_send_all(client, buf + end, have - end) < 0) {
        goto out;
    }
    for (;;) {
        ssize_t n = read(up, buf, COPY_CHUNK);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        total += n;
        if (sbx_send_all(client, buf, (size_t)n) < 0) {
            break;
        }
    }
out:
    free(head);
    free(h);
    free(buf);
    return total;
}
