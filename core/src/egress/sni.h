/* sni.h - the server name a TLS client asks for, read from its ClientHello. */
#ifndef SBX_EGRESS_SNI_H
#define SBX_EGRESS_SNI_H

#include <stddef.h>

/* The most bytes of a client's first flight the proxy holds to find the name: a
 * ClientHello with post-quantum key shares is about 2 KiB, a record at most 16 KiB. */
#define SBX_EGRESS_SNI_MAX (20 * 1024)
/* The most handshake records one ClientHello may span (real clients use one, or two
 * past 16 KiB): bounds what a client sending it in tiny records costs the proxy. */
#define SBX_EGRESS_SNI_RECORDS 8

enum sbx_egress_sni {
    SBX_SNI_MORE,      /* a ClientHello so far: read more */
    SBX_SNI_NOT_TLS,   /* the first byte does not start a TLS handshake record */
    SBX_SNI_ABSENT,    /* a complete ClientHello without a server_name */
    SBX_SNI_FOUND,     /* the name is in host */
    SBX_SNI_MALFORMED, /* a handshake record, but not a ClientHello the proxy can read */
    SBX_SNI_ECH,       /* a ClientHello with Encrypted Client Hello: the real name is
                        * hidden, the outer one proves nothing */
};

/* Looks at the first n bytes a client sent in a tunnel. The ClientHello may span
 * several handshake records. host (at least 256 bytes) gets the host_name, NUL-ended,
 * when the result is SBX_SNI_FOUND; a name longer than 253 bytes or with a NUL is
 * SBX_SNI_MALFORMED. More than SBX_EGRESS_SNI_MAX bytes without an answer is the
 * caller's to refuse. */
enum sbx_egress_sni sbx_egress_sni_parse(const unsigned char *p, size_t n, char *host,
                                         size_t host_size);

/* After sbx_egress_sni_parse said SBX_SNI_FOUND or SBX_SNI_ABSENT for p, n: how many
 * of those bytes the ClientHello's records take (what follows is the next record). */
size_t sbx_egress_sni_hello_len(const unsigned char *p, size_t n);

/* With SBX_SNI_MORE: how many bytes must be there before parsing again can get
 * further (the end of the record under way), so a client dribbling a hello byte by
 * byte is parsed once per record, not once per byte. */
size_t sbx_egress_sni_want(const unsigned char *p, size_t n);

/* Whether the first n bytes of a tunnel start an HTTP request: 1 an HTTP/1 method
 * ("GET ", "POST ", ...), 2 HTTP/2 with prior knowledge ("PRI "), 0 no, -1 cannot
 * tell yet (a method's prefix). */
int sbx_egress_http_start(const unsigned char *p, size_t n);

/* Whether the name the client sent is the CONNECT host: case-insensitive, a trailing
 * dot on either side ignored. */
int sbx_egress_sni_matches(const char *sni, const char *host);

#endif
