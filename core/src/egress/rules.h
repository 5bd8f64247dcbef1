/* rules.h - egress host rules: parsing, host name checks, matching (docs/egress.md). */
#ifndef SBX_EGRESS_RULES_H
#define SBX_EGRESS_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_EGRESS_HOST_MAX 253
/* The flag word of an opaque rule: "git.example.com:22 opaque". */
#define SBX_EGRESS_OPAQUE "opaque"

/* An address; IPv4-mapped IPv6 is stored as IPv4. */
struct sbx_egress_addr {
    int family;          /* AF_INET or AF_INET6 */
    unsigned char b[16]; /* network order; 4 bytes used for AF_INET */
};

enum sbx_egress_rule_kind {
    SBX_RULE_EXACT,    /* "example.com" */
    SBX_RULE_WILDCARD, /* "*.example.com": subdomains only, any depth */
    SBX_RULE_CIDR,     /* "10.0.0.0/8", "192.0.2.7", "[fd00::]/8" */
};

struct sbx_egress_rule {
    enum sbx_egress_rule_kind kind;
    char *text;                 /* the rule as written, for the log */
    char *name;                 /* normalized name; for a wildcard ".example.com" */
    struct sbx_egress_addr net; /* CIDR network */
    int prefix;
    int any_port;
    uint16_t ports[16];
    size_t n_ports;
    int opaque; /* "HOST:PORTS opaque": a tunnel's client-first bytes need not be TLS
                 * or HTTP (SSH to a Git host); logged "opaque" (docs/egress.md) */
};

struct sbx_egress_rules {
    struct sbx_egress_rule *v;
    size_t n;
};

/* Parses rules "HOST[:PORTS][ opaque]" (PORTS is "443", "80,443" or "*"; default
 * 80,443; " opaque": see struct sbx_egress_rule). On error *out is left empty and err
 * names the rule. */
int sbx_egress_rules_parse(const char *const *texts, struct sbx_egress_rules *out,
                           sbx_error_t **err);
void sbx_egress_rules_free(struct sbx_egress_rules *r);

/* Parses an IP literal (no brackets). Returns 1 and fills a, or 0. */
int sbx_egress_addr_parse(const char *s, struct sbx_egress_addr *a);
/* Writes the address as text ("192.0.2.1", "2001:db8::1"). */
void sbx_egress_addr_format(const struct sbx_egress_addr *a, char *buf, size_t size);
/* Fills a from a sockaddr (AF_INET/AF_INET6); returns 0, or -1 for other families. */
int sbx_egress_addr_from_sockaddr(const void *sa, struct sbx_egress_addr *a);
/* 1 when the address is globally routable (not loopback, private, link-local, ...). */
int sbx_egress_addr_is_public(const struct sbx_egress_addr *a);

/* Checks a host NAME (not an IP literal) and writes its normal form (lower case, no
 * trailing dot) to out[SBX_EGRESS_HOST_MAX + 1]. Returns NULL, or the deny reason:
 * "host-empty", "host-too-long", "host-malformed", "host-numeric". */
const char *sbx_egress_host_normalize(const char *host, size_t len, char *out);

/* The first rule that allows NAME (normalized) on PORT, or NULL. */
const struct sbx_egress_rule *sbx_egress_rules_match_name(const struct sbx_egress_rules *r,
                                                          const char *name, unsigned port);
/* The first CIDR rule that allows the address on PORT, or NULL. */
const struct sbx_egress_rule *sbx_egress_rules_match_addr(const struct sbx_egress_rules *r,
                                                          const struct sbx_egress_addr *a,
                                                          unsigned port);
/* The first opaque rule that allows the destination (NAME, or the address a when name
 * is NULL) on PORT, or NULL: another rule may allow it without being opaque. */
const struct sbx_egress_rule *sbx_egress_rules_match_opaque(const struct sbx_egress_rules *r,
                                                            const char *name,
                                                            const struct sbx_egress_addr *a,
                                                            unsigned port);

/* egress.private_allow addresses: "10.1.2.3" or "10.1.0.0/16", "fd00::/8" (no
 * brackets). ok: 1 when S is one; match: 1 when the address a is in S. */
int sbx_egress_private_addr_ok(const char *s);
int sbx_egress_private_match(const char *s, const struct sbx_egress_addr *a);

#endif
