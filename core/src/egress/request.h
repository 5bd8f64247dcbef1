/* request.h - the proxy's HTTP/1 request head parser (CONNECT and absolute-URI). */
#ifndef SBX_EGRESS_REQUEST_H
#define SBX_EGRESS_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "egress/rules.h"

#define SBX_EGRESS_HEAD_MAX 16384  /* bytes of request line + headers */
#define SBX_EGRESS_HEADERS_MAX 100 /* header lines */

struct sbx_egress_request {
    char method[24];
    int connect;                        /* CONNECT host:port */
    char host[SBX_EGRESS_HOST_MAX + 1]; /* normal form, or the IP literal as text */
    int host_is_ip;
    struct sbx_egress_addr ip; /* when host_is_ip */
    unsigned port;
    char *forward; /* plain HTTP: the head to send upstream */
    size_t forward_len;
    uint64_t body; /* plain HTTP: Content-Length, else 0 */
};

/* Length of the head (through the blank line) in buf, 0 when more bytes are needed,
 * or -1 when the head is malformed (a bare LF or a NUL). */
long sbx_egress_head_end(const char *buf, size_t len);
/* The same for a head that arrives in pieces: *scanned (0 at first) is how far earlier
 * calls looked; the scan resumes there and sets it when more bytes are needed, so a
 * client dribbling its head byte by byte costs the proxy linear, not quadratic, work. */
long sbx_egress_head_scan(const char *buf, size_t len, size_t *scanned);

/* Parses a complete head (len from sbx_egress_head_end). Returns 0, or -1 with
 * *status (400, 403, 411, 431) and *reason (the X-Sbx-Deny value) set; then method,
 * host and port hold what could be read ("" / 0 otherwise), for the log. A request
 * other than CONNECT carries at most a Content-Length body (r->body); a
 * Transfer-Encoding is refused (411 "chunked-body"): the proxy must know where the one
 * request it forwards ends, so that nothing after it reaches the destination. */
int sbx_egress_request_parse(const char *buf, size_t len, struct sbx_egress_request *r, int *status,
                             const char **reason);
/* The same for a request sent inside the CONNECT tunnel `tunnel` (plain HTTP clients
 * such as Node's fetch tunnel http:// too): origin-form targets are allowed, and the
 * host (target or Host header) must be the tunnel's; r->forward is the head to send,
 * hop-by-hop headers dropped and "Connection: close" added: the destination serves
 * this one request, and the proxy forwards nothing after its body. */
int sbx_egress_request_parse_tunnel(const char *buf, size_t len,
                                    const struct sbx_egress_request *tunnel,
                                    struct sbx_egress_request *r, int *status, const char **reason);
void sbx_egress_request_clear(struct sbx_egress_request *r);

#endif
