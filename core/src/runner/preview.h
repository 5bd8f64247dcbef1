/* preview.h - (added, issue 31, from api_term.c) a port preview's answer
 * (docs/api.md, "Terminals and ports"): the response of the server in the
 * sandbox, relayed to the client as it came with the preview's CSP added after
 * its status line ((changed, issue 31) with Connection: close, interim 1xx
 * heads dropped). Its head is parsed first by the one HTTP/1 parser
 * (http/h1_reply.h, kind PREVIEW): a head it refuses, one cut short, or none
 * is a 502 naming why, and no byte of it reaches the client. Blocking I/O on
 * the session's thread (unit test tests/unit/test_preview.c). */
#ifndef SBX_RUNNER_PREVIEW_H
#define SBX_RUNNER_PREVIEW_H

#include <stddef.h>
#include <stdint.h>

/* the preview's pages run in an opaque origin: never with the API's */
#define RUNNER_PREVIEW_CSP                                                                         \
    "Content-Security-Policy: sandbox allow-scripts allow-forms allow-popups\r\n"

/* (added, issue 31) and the connection ends after this one answer: the
 * server's Connection, Keep-Alive and Proxy-Connection lines are dropped, so
 * that a browser never sends a second request on it (a server's second answer,
 * sent ahead, would be that request's, without the CSP) */
#define RUNNER_PREVIEW_CLOSE "Connection: close\r\n"

/* (added, issue 31) The head to relay for a preview's answer h (parsed from
 * buf): its status line as it came, the CSP and Connection: close, then its
 * header lines as they came but Connection, Keep-Alive, Proxy-Connection and
 * a CSP line that is the runner's own (an owner box added it). Into out (cap
 * at least h->len + RUNNER_PREVIEW_HEAD_EXTRA): its length, or 0 when out is
 * too small. Used by the relay to another box too (fwd_tunnel.c), so that
 * an owner of an older sbx cannot keep the connection either. */
struct sbx_h1_head;
#define RUNNER_PREVIEW_HEAD_EXTRA 128
size_t runner_preview_head(const struct sbx_h1_head *h, const char *buf, char *out, size_t cap);

/* A whole reply with a JSON body {"error": msg} and Connection: close on fd. */
void runner_reply_raw(int fd, int code, const char *reason, const char *msg);
/* Relays the response read from up to client until up ends (or a side fails);
 * the bytes read from up. timeout_s names up's read timeout in an error. */
int64_t runner_preview_relay(int up, int client, int timeout_s);

#endif
