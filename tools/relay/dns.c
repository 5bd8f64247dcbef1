/* dns.c - the relay's resolver messages (dns.h). RFC 1035 queries, RFC 6891 OPT,
 * RFC 8914 Extended DNS Errors. A query is one question, no compression. */
#include "dns.h"

#include <string.h>

static uint16_t get16(const unsigned char *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static unsigned char *put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
    return p + 2;
}

static int name_byte_ok(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_';
}

/* The question's name at p[off..n): fills q->name; returns the offset after it, or 0. */
static size_t parse_name(const unsigned char *p, size_t n, size_t off, struct sbx_dns_query *q)
{
    size_t len = 0;

    q->name_ok = 1;
    for (;;) {
        unsigned lab;

        if (off >= n) {
            return 0;
        }
        lab = p[off++];
        if (lab == 0) {
            break;
        }
        if (lab > 63 || n - off < lab || len + (len > 0) + lab > SBX_DNS_NAME_MAX) {
            return 0; /* a compression pointer (0xC0), a long label, or past the end */
        }
        if (len > 0) {
            q->name[len++] = '.';
        }
        for (unsigned i = 0; i < lab; i++) {
            unsigned char ch = p[off + i];

            if (ch >= 'A' && ch <= 'Z') {
                ch = (unsigned char)(ch - 'A' + 'a');
            }
            if (!name_byte_ok(ch)) {
                q->name_ok = 0;
                ch = '?';
            }
            q->name[len++] = (char)ch;
        }
        off += lab;
    }
    q->name[len] = '\0';
    return off;
}

/* 1 when the additional section (after the question) holds an OPT record. */
static int has_opt(const unsigned char *p, size_t n, size_t off, unsigned arcount)
{
    /* only the simple form resolvers send: the root name, then TYPE 41 */
    for (unsigned i = 0; i < arcount && i < 4; i++) {
        uint16_t rdlen;

        if (n - off < 11 || p[off] != 0) {
            return 0;
        }
        if (get16(p + off + 1) == 41) {
            return 1;
        }
        rdlen = get16(p + off + 9);
        if (n - off - 11 < rdlen) {
            return 0;
        }
        off += 11 + (size_t)rdlen;
    }
    return 0;
}

int sbx_dns_parse(const unsigned char *p, size_t n, struct sbx_dns_query *q)
{
    size_t off;

    memset(q, 0, sizeof(*q));
    if (n < 12 || (p[2] & 0x80)) {
        return -1; /* no header, or a response: never answered (no loops) */
    }
    q->id = get16(p);
    q->rd = (p[2] & 0x01) != 0;
    if (n > SBX_DNS_MSG_MAX) {
        return SBX_DNS_FORMERR;
    }
    if (((p[2] >> 3) & 0x0f) != 0) {
        return SBX_DNS_NOTIMP; /* only QUERY */
    }
    if (get16(p + 4) != 1 || get16(p + 6) != 0 || get16(p + 8) != 0) {
        return SBX_DNS_FORMERR; /* one question, no answers or authority */
    }
    off = parse_name(p, n, 12, q);
    if (off == 0 || n - off < 4) {
        q->name[0] = '\0';
        return SBX_DNS_FORMERR;
    }
    q->qtype = get16(p + off);
    q->qclass = get16(p + off + 2);
    q->qend = off + 4;
    q->edns = has_opt(p, n, q->qend, get16(p + 10));
    return SBX_DNS_NOERROR;
}

size_t sbx_dns_answer(const unsigned char *req, const struct sbx_dns_query *q, int rcode,
                      const unsigned char addr[4], uint16_t ede, const char *text,
                      unsigned char *out, size_t size)
{
    size_t qlen = q->qend >= 12 ? q->qend - 12 : 0;
    size_t tlen = text != NULL ? strnlen(text, SBX_DNS_TEXT_MAX) : 0;
    int with_ede = q->edns && text != NULL;
    int with_a = addr != NULL && qlen > 0;
    size_t need = 12 + qlen + (with_a ? 16 : 0) + (q->edns ? 11 : 0) + (with_ede ? 6 + tlen : 0);
    unsigned char *w = out;

    if (size < need) {
        return 0;
    }
    w = put16(w, q->id);
    *w++ = (unsigned char)(0x84 | (q->rd ? 0x01 : 0)); /* QR, AA, RD echoed */
    *w++ = (unsigned char)(0x80 | (rcode & 0x0f));     /* RA, rcode */
    w = put16(w, qlen > 0);
    w = put16(w, with_a);
    w = put16(w, 0);
    w = put16(w, q->edns);
    memcpy(w, req + 12, qlen);
    w += qlen;
    if (with_a) {
        w = put16(w, 0xC00C); /* the question's name */
        w = put16(w, SBX_DNS_TYPE_A);
        w = put16(w, 1);
        w = put16(w, 0);
        w = put16(w, 30); /* TTL 30 s */
        w = put16(w, 4);
        memcpy(w, addr, 4);
        w += 4;
    }
    if (q->edns) {
        *w++ = 0; /* root */
        w = put16(w, 41);
        w = put16(w, SBX_DNS_MSG_MAX);
        w = put16(w, 0);
        w = put16(w, 0);
        w = put16(w, with_ede ? 6 + tlen : 0);
        if (with_ede) {
            w = put16(w, 15); /* EDNS option 15: Extended DNS Error */
            w = put16(w, 2 + tlen);
            w = put16(w, ede);
            memcpy(w, text, tlen);
            w += tlen;
        }
    }
    return (size_t)(w - out);
}
