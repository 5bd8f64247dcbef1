/* tls_record.h - follows the TLS record layer of a CONNECT tunnel from its first
 * ClientHello until the handshake is done (docs/egress.md, "What a tunnel may carry"):
 * the client may send only records that belong to one handshake for the name it was
 * allowed for, and nothing but TLS. Pure bytes in, verdicts out: no sockets. */
#ifndef SBX_EGRESS_TLS_RECORD_H
#define SBX_EGRESS_TLS_RECORD_H

#include <stddef.h>
#include <stdint.h>

/* A TLS 1.2 ciphertext record's payload at most (RFC 5246 6.2.3; TLS 1.3 allows less). */
#define SBX_TLS_RECORD_MAX (16384 + 2048)
/* The most the client may send between its first ClientHello and the end of the
 * handshake (its certificate chain, if any, is the big part). */
#define SBX_TLS_HANDSHAKE_MAX (256 * 1024)

enum sbx_tls_verdict {
    SBX_TLS_MORE, /* forward *used bytes; then wait until *need bytes are there */
    SBX_TLS_DONE, /* forward *used bytes: the handshake is done, the rest (from *used on)
                   * is the encrypted stream: pipe it */
    SBX_TLS_DENY, /* *reason says why; forward nothing more */
};

struct sbx_tls_follow {
    /* what the client's first ClientHello said: the name (empty: none) */
    char sni[256];
    uint64_t client_bytes; /* bytes of the client's records passed after the first hello */
    int server_hello;      /* the server's ServerHello came (not a HelloRetryRequest) */
    int hrr;               /* a HelloRetryRequest came: one more ClientHello may follow */
    int hellos;            /* ClientHellos the client sent */
    int client_encrypted;  /* the client sent change_cipher_spec after the ServerHello
                            * (TLS 1.2): its handshake records are encrypted */
    /* the server's stream, followed a byte at a time until its ServerHello */
    int s_stop;             /* stopped following (ServerHello seen, or not TLS) */
    unsigned char s_hdr[5]; /* the record header under way */
    size_t s_hdr_n;         /* its bytes so far */
    size_t s_left;          /* payload bytes of the current record still to come */
    unsigned char s_hs[38]; /* the first bytes of a handshake message */
    size_t s_hs_n;          /* its bytes so far */
};

/* Starts following after the first ClientHello, which named sni (NULL: none). */
void sbx_tls_follow_init(struct sbx_tls_follow *t, const char *sni);

/* Looks at the client's bytes not forwarded yet (p, n: what is buffered). Records are
 * checked whole; *used is how many leading bytes may go on, *need (with MORE) how many
 * must be buffered before looking again (at most *used + 5 + SBX_TLS_RECORD_MAX, or
 * the rest of a second ClientHello after a HelloRetryRequest, at most
 * SBX_EGRESS_SNI_MAX). A denial's *reason is one of: tls-record-type (not a TLS record:
 * plaintext such as an HTTP request or an SSH banner), tls-record-version,
 * tls-record-length, tls-data-before-server (application data before the server's
 * ServerHello: 0-RTT early data or smuggled bytes), tls-second-hello, tls-handshake
 * (another handshake message before the server's reply), tls-retry-hello (the
 * ClientHello after a HelloRetryRequest names another host or cannot be read),
 * tls-handshake-too-long. */
enum sbx_tls_verdict sbx_tls_follow_client(struct sbx_tls_follow *t, const unsigned char *p,
                                           size_t n, size_t *used, size_t *need,
                                           const char **reason);

/* Takes n bytes the server sent (all of them go on): finds its ServerHello or
 * HelloRetryRequest, whatever the records' split across reads. */
void sbx_tls_follow_server(struct sbx_tls_follow *t, const unsigned char *p, size_t n);

#endif
