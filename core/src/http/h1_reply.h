/* h1_reply.h - (added, issue 31) the reply heads sbx reads itself before it acts
 * on them or relays them as they came (docs/architecture.md, "HTTP/1 heads"):
 *
 *   UPGRADE  a runner's answer to an upgrade (sandbox/proto.c: `sbx exec -it`,
 *            `sbx port`, `sbx cp`): its 101, or an error and its status
 *   TUNNEL   the owner box's answer to a relayed terminal or port
 *            (runner/fwd_tunnel.c): its status, the head relayed as it came
 *   PREVIEW  the answer of the server in a sandbox to a port preview
 *            (runner/api_term.c): the preview's CSP goes after its status line
 *
 * Each is parsed by the one HTTP/1 parser (http/h1.h, RFC 9112 strict) under the
 * caps of its kind, from a buffer the caller fills with the reply's first bytes
 * (at most the cap + 1 of them are ever looked at); the bytes after the head are
 * the caller's. A refusal is one printable line naming what was wrong, where,
 * and whose reply it was. Pure code: no I/O, no allocation (unit test
 * tests/unit/test_h1_reply.c; fuzzed with h1 as target h1). */
#ifndef SBX_HTTP_H1_REPLY_H
#define SBX_HTTP_H1_REPLY_H

#include <stddef.h>

#include "http/h1.h"

enum sbx_h1_reply_kind {
    SBX_H1_REPLY_UPGRADE,
    SBX_H1_REPLY_TUNNEL,
    SBX_H1_REPLY_PREVIEW,
};

#define SBX_H1_UPGRADE_HEAD_MAX 8192  /* a runner's 101 or error head */
#define SBX_H1_PREVIEW_HEAD_MAX 32768 /* the head of a server in a sandbox */
/* the owner relays a preview's head with its CSP line added */
#define SBX_H1_TUNNEL_HEAD_MAX (SBX_H1_PREVIEW_HEAD_MAX + 1024)

/* h: a response head, with the caps of kind (h->lim.head_max the head's). */
void sbx_h1_reply_init(struct sbx_h1_head *h, enum sbx_h1_reply_kind kind);
/* buf holds the reply's first len bytes (more each call). >0: the head's length,
 * parsed into h; 0: more bytes needed (len is within the cap); -1: err holds
 * "<from> did not answer HTTP (<what>)" or "<from> sent a bad reply head: <what>". */
long sbx_h1_reply_feed(struct sbx_h1_head *h, const char *buf, size_t len, const char *from,
                       char *err, size_t errlen);
/* The peer closed after len bytes, before the head's end: err says so. */
void sbx_h1_reply_cut(size_t len, const char *from, char *err, size_t errlen);
/* The status line of a parsed head (buf as fed): its length with the CRLF;
 * out gets the line without it, printable ASCII ('?' for others), cut to fit. */
size_t sbx_h1_reply_status_line(const struct sbx_h1_head *h, const char *buf, char *out,
                                size_t outlen);

#endif
