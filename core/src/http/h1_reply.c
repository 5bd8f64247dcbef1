/* h1_reply.c - the reply heads sbx reads itself, by the one HTTP/1 parser under
 * the caps of their kind (h1_reply.h). */
#include "http/h1_reply.h"

#include <stdio.h>
#include <string.h>

void sbx_h1_reply_init(struct sbx_h1_head *h, enum sbx_h1_reply_kind kind)
{
    /* a preview's head leaves two header lines of the cap for the owner's CSP
     * and Connection: close (runner/preview.h) */
    static const struct sbx_h1_limits caps[] = {
        [SBX_H1_REPLY_UPGRADE] = {SBX_H1_UPGRADE_HEAD_MAX, 64, SBX_H1_UPGRADE_HEAD_MAX},
        [SBX_H1_REPLY_TUNNEL] = {SBX_H1_TUNNEL_HEAD_MAX, SBX_H1_HEADERS_CAP, 16384},
        [SBX_H1_REPLY_PREVIEW] = {SBX_H1_PREVIEW_HEAD_MAX, SBX_H1_HEADERS_CAP - 2, 16384},
    };

    sbx_h1_init(h, 1, &caps[kind]);
}

long sbx_h1_reply_feed(struct sbx_h1_head *h, const char *buf, size_t len, const char *from,
                       char *err, size_t errlen)
{
    long end = sbx_h1_feed(h, buf, len);

    if (end < 0) {
        snprintf(err, errlen,
                 h->error == SBX_H1_E_START ? "%s did not answer HTTP (%s)"
                                            : "%s sent a bad reply head: %s",
                 from, h->err);
    }
    return end;
}

void sbx_h1_reply_cut(size_t len, const char *from, char *err, size_t errlen)
{
    snprintf(err, errlen,
             len == 0 ? "%s closed the connection without a reply"
                      : "%s closed the connection inside its reply head",
             from);
}

size_t sbx_h1_reply_status_line(const struct sbx_h1_head *h, const char *buf, char *out,
                                size_t outlen)
{
    /* h1 took the head: its first CR ends the status line */
    const char *cr = memchr(buf, '\r', h->len);
    size_t n = cr != NULL ? (size_t)(cr - buf) : 0;
    size_t shown = outlen == 0 ? 0 : n < outlen ? n : outlen - 1;

    for (size_t i = 0; i < shown; i++) {
        out[i] = buf[i] >= ' ' && buf[i] <= '~' ? buf[i] : '?';
    }
    if (outlen > 0) {
        out[shown] = '\0';
    }
    return cr != NULL ? n + 2 : 0;
}
