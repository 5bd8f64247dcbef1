/* tls_record.c - the TLS record layer of a tunnel from its first ClientHello until the
 * handshake is done (RFC 8446 5.1, RFC 5246 6.2). After the hello the client may send
 * only: alerts and change_cipher_spec (TLS 1.3's compatibility mode sends one right
 * after the hello); a second ClientHello only after the server's HelloRetryRequest,
 * naming what the first named; TLS 1.2's plaintext handshake messages after the
 * ServerHello (never a ClientHello); and application data only after the ServerHello.
 * The first application-data record after the ServerHello ends the watch (TLS 1.3:
 * the encrypted Finished; TLS 1.2: the first data after the client's Finished). */
#include "egress/tls_record.h"

#include <stdio.h>
#include <string.h>

#include "egress/sni.h"

#define REC_CCS 20
#define REC_ALERT 21
#define REC_HANDSHAKE 22
#define REC_DATA 23
#define HS_CLIENT_HELLO 1
#define HS_SERVER_HELLO 2

/* A HelloRetryRequest is a ServerHello with this random (RFC 8446 4.1.3). */
static const unsigned char hrr_random[32] = {
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};

void sbx_tls_follow_init(struct sbx_tls_follow *t, const char *sni)
{
    memset(t, 0, sizeof(*t));
    snprintf(t->sni, sizeof(t->sni), "%s", sni != NULL ? sni : "");
    t->hellos = 1;
}

/* The ClientHello after a HelloRetryRequest, at p: it must be readable and name what
 * the first named. */
static enum sbx_tls_verdict retry_hello(struct sbx_tls_follow *t, const unsigned char *p, size_t n,
                                        size_t *len, size_t *need, const char **reason)
{
    char host[256];
    enum sbx_egress_sni r = sbx_egress_sni_parse(p, n, host, sizeof(host));

    if (r == SBX_SNI_MORE) {
        *need = sbx_egress_sni_want(p, n);
        if (*need > SBX_EGRESS_SNI_MAX) {
            *reason = "tls-retry-hello";
            return SBX_TLS_DENY;
        }
        return SBX_TLS_MORE;
    }
    if ((r == SBX_SNI_FOUND && t->sni[0] != '\0' && sbx_egress_sni_matches(host, t->sni)) ||
        (r == SBX_SNI_ABSENT && t->sni[0] == '\0')) {
        *len = sbx_egress_sni_hello_len(p, n);
        t->hellos++;
        t->hrr = 0;
        return SBX_TLS_DONE; /* (the record is whole: go on) */
    }
    *reason = "tls-retry-hello";
    return SBX_TLS_DENY;
}

enum sbx_tls_verdict sbx_tls_follow_client(struct sbx_tls_follow *t, const unsigned char *p,
                                           size_t n, size_t *used, size_t *need,
                                           const char **reason)
{
    size_t off = 0;

    *reason = NULL;
    for (;;) {
        size_t len;
        int type;

        *used = off;
        if (t->client_bytes + off > SBX_TLS_HANDSHAKE_MAX) {
            *reason = "tls-handshake-too-long";
            return SBX_TLS_DENY;
        }
        if (n - off < 5) {
            /* what is there must at least start a record (an HTTP request or an SSH
             * banner is refused at its first byte) */
            if (n > off && (p[off] < REC_CCS || p[off] > REC_DATA)) {
                *reason = "tls-record-type";
                return SBX_TLS_DENY;
            }
            *need = off + 5;
            break;
        }
        type = p[off];
        len = (size_t)p[off + 3] << 8 | p[off + 4];
        if (type < REC_CCS || type > REC_DATA) {
            *reason = "tls-record-type";
            return SBX_TLS_DENY;
        }
        if (p[off + 1] != 3 || p[off + 2] > 4) {
            *reason = "tls-record-version";
            return SBX_TLS_DENY;
        }
        if (len == 0 || len > SBX_TLS_RECORD_MAX) {
            *reason = "tls-record-length";
            return SBX_TLS_DENY;
        }
        if (type == REC_DATA) {
            if (!t->server_hello) {
                *reason = "tls-data-before-server";
                return SBX_TLS_DENY;
            }
            t->client_bytes += off;
            return SBX_TLS_DONE;
        }
        if (type == REC_HANDSHAKE && t->hrr && !t->server_hello) {
            size_t hello = 0;
            enum sbx_tls_verdict v = retry_hello(t, p + off, n - off, &hello, need, reason);

            if (v == SBX_TLS_MORE) {
                *need += off;
                break;
            }
            if (v == SBX_TLS_DENY) {
                return v;
            }
            off += hello;
            continue;
        }
        if (n - off - 5 < len) {
            *need = off + 5 + len;
            break;
        }
        if (type == REC_CCS) {
            if (len != 1 || p[off + 5] != 1) {
                *reason = "tls-record-length";
                return SBX_TLS_DENY;
            }
            if (t->server_hello) {
                t->client_encrypted = 1;
            }
        }
        else if (type == REC_HANDSHAKE && !t->client_encrypted) {
            if (p[off + 5] == HS_CLIENT_HELLO) {
                *reason = "tls-second-hello";
                return SBX_TLS_DENY;
            }
            if (!t->server_hello) {
                *reason = "tls-handshake";
                return SBX_TLS_DENY;
            }
        }
        off += 5 + len;
    }
    t->client_bytes += off;
    return SBX_TLS_MORE;
}

/* The first bytes of a server handshake message are in: a ServerHello or a
 * HelloRetryRequest; anything else first is no TLS server the proxy follows. */
static void server_message(struct sbx_tls_follow *t)
{
    if (t->s_hs[0] != HS_SERVER_HELLO) {
        t->s_stop = 1;
    }
    else if (memcmp(t->s_hs + 6, hrr_random, sizeof(hrr_random)) == 0 && t->hellos == 1) {
        t->hrr = 1; /* the rest of its record is the same message */
    }
    else {
        t->server_hello = 1;
        t->s_stop = 1;
    }
}

void sbx_tls_follow_server(struct sbx_tls_follow *t, const unsigned char *p, size_t n)
{
    size_t off = 0;

    while (off < n && !t->s_stop) {
        size_t k;

        if (t->s_hdr_n < 5) {
            t->s_hdr[t->s_hdr_n++] = p[off++];
            if (t->s_hdr_n == 5) {
                t->s_left = (size_t)t->s_hdr[3] << 8 | t->s_hdr[4];
                if (t->s_hdr[0] < REC_CCS || t->s_hdr[0] > REC_DATA || t->s_hdr[1] != 3 ||
                    t->s_hdr[0] == REC_DATA) {
                    t->s_stop = 1; /* not TLS, or data before a ServerHello */
                }
                else if (t->s_left == 0) {
                    t->s_hdr_n = 0;
                }
            }
            continue;
        }
        k = n - off < t->s_left ? n - off : t->s_left;
        if (t->s_hdr[0] == REC_HANDSHAKE && !t->hrr && t->s_hs_n < sizeof(t->s_hs)) {
            size_t c = sizeof(t->s_hs) - t->s_hs_n < k ? sizeof(t->s_hs) - t->s_hs_n : k;

            memcpy(t->s_hs + t->s_hs_n, p + off, c);
            t->s_hs_n += c;
            if (t->s_hs_n == sizeof(t->s_hs)) {
                server_message(t);
            }
        }
        off += k;
        t->s_left -= k;
        if (t->s_left == 0) {
            t->s_hdr_n = 0;
            if (t->hrr) {
                t->s_hs_n = 0; /* the next handshake record starts the real ServerHello */
            }
        }
    }
}
