/* dns.h - the relay's resolver messages (docs/egress.md, "Names inside the sandbox"):
 * one query parsed, one answer built. No I/O, no allocation: every byte comes from the
 * sandbox, so every length is checked against what was received. */
#ifndef SBX_RELAY_DNS_H
#define SBX_RELAY_DNS_H

#include <stddef.h>
#include <stdint.h>

#define SBX_DNS_MSG_MAX 1232 /* the largest query read and answer sent (one datagram) */
#define SBX_DNS_NAME_MAX 253
#define SBX_DNS_TEXT_MAX 200 /* an Extended DNS Error's text */

#define SBX_DNS_NOERROR 0
#define SBX_DNS_FORMERR 1
#define SBX_DNS_SERVFAIL 2
#define SBX_DNS_NXDOMAIN 3
#define SBX_DNS_NOTIMP 4
#define SBX_DNS_REFUSED 5

#define SBX_DNS_TYPE_A 1
#define SBX_DNS_TYPE_AAAA 28

#define SBX_DNS_EDE_OTHER 0
#define SBX_DNS_EDE_BLOCKED 15 /* RFC 8914: blocked by the operator's policy */

struct sbx_dns_query {
    uint16_t id;
    int rd;   /* recursion desired (echoed) */
    int edns; /* the query carried an OPT record */
    uint16_t qtype;
    uint16_t qclass;
    size_t qend;                     /* end of the question section in the query */
    char name[SBX_DNS_NAME_MAX + 1]; /* lower case, no trailing dot; "" for the root */
    int name_ok;                     /* labels of letters, digits, '-', '_' only */
};

/* Parses a query of n bytes. Returns -1 when no answer may be sent (shorter than a
 * header, or itself a response), else the rcode to answer with: SBX_DNS_NOERROR (q
 * filled), SBX_DNS_FORMERR (q->id and q->rd filled, q->qend 0) or SBX_DNS_NOTIMP. */
int sbx_dns_parse(const unsigned char *p, size_t n, struct sbx_dns_query *q);

/* Writes the answer to q (query bytes req, whose question is copied) into out: rcode,
 * one A record with addr when addr is not NULL, and, when the query carried EDNS and
 * text is not NULL, an Extended DNS Error (info code ede, text cut at
 * SBX_DNS_TEXT_MAX). Returns its length, or 0 when size is too small. */
size_t sbx_dns_answer(const unsigned char *req, const struct sbx_dns_query *q, int rcode,
                      const unsigned char addr[4], uint16_t ede, const char *text,
                      unsigned char *out, size_t size);

#endif
