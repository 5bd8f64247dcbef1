/* rules.c - egress host rules: parsing, host name checks, matching.
 *
 * Names are compared in their normal form: ASCII lower case, one trailing dot
 * removed. "*.example.com" matches subdomains at any depth but not the apex.
 * IP literals match only CIDR rules. */
#include "egress/rules.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "util/xalloc.h"

int sbx_egress_addr_parse(const char *s, struct sbx_egress_addr *a)
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    unsigned char b[16];

    memset(a, 0, sizeof(*a));
    if (inet_pton(AF_INET, s, b) == 1) {
        a->family = AF_INET;
        memcpy(a->b, b, 4);
        return 1;
    }
    if (inet_pton(AF_INET6, s, b) == 1) {
        if (memcmp(b, mapped, sizeof(mapped)) == 0) {
            a->family = AF_INET;
            memcpy(a->b, b + 12, 4);
            return 1;
        }
        a->family = AF_INET6;
        memcpy(a->b, b, 16);
        return 1;
    }
    return 0;
}

void sbx_egress_addr_format(const struct sbx_egress_addr *a, char *buf, size_t size)
{
    if (inet_ntop(a->family, a->b, buf, (socklen_t)size) == NULL) {
        snprintf(buf, size, "?");
    }
}

int sbx_egress_addr_from_sockaddr(const void *sa, struct sbx_egress_addr *a)
{
    const struct sockaddr *s = sa;
    char buf[INET6_ADDRSTRLEN];

    if (s->sa_family == AF_INET) {
        memset(a, 0, sizeof(*a));
        a->family = AF_INET;
        memcpy(a->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 0;
    }
    if (s->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, sizeof(buf));
        return sbx_egress_addr_parse(buf, a) ? 0 : -1;
    }
    return -1;
}

static int in_net(const struct sbx_egress_addr *a, const struct sbx_egress_addr *net, int prefix)
{
    int full = prefix / 8;
    int rest = prefix % 8;

    if (a->family != net->family) {
        return 0;
    }
    if (memcmp(a->b, net->b, (size_t)full) != 0) {
        return 0;
    }
    if (rest != 0) {
        unsigned char mask = (unsigned char)(0xff << (8 - rest));

        return (a->b[full] & mask) == (net->b[full] & mask);
    }
    return 1;
}

/* Ranges that are not the public internet (IANA special-purpose registries). */
static const struct {
    const char *net;
    int prefix;
} non_public[] = {
    {"0.0.0.0", 8},      {"10.0.0.0", 8},     {"100.64.0.0", 10},   {"127.0.0.0", 8},
    {"169.254.0.0", 16}, {"172.16.0.0", 12},  {"192.0.0.0", 24},    {"192.0.2.0", 24},
    {"192.168.0.0", 16}, {"198.18.0.0", 15},  {"198.51.100.0", 24}, {"203.0.113.0", 24},
    {"224.0.0.0", 4},    {"240.0.0.0", 4},    {"::", 128},          {"::1", 128},
    {"64:ff9b::", 96},   {"64:ff9b:1::", 48}, {"100::", 64},        {"2001:db8::", 32},
    {"2002::", 16},      {"fc00::", 7},       {"fe80::", 10},       {"fec0::", 10},
    {"ff00::", 8},
};

int sbx_egress_addr_is_public(const struct sbx_egress_addr *a)
{
    for (size_t i = 0; i < sizeof(non_public) / sizeof(non_public[0]); i++) {
        struct sbx_egress_addr net;

        if (sbx_egress_addr_parse(non_public[i].net, &net) &&
            in_net(a, &net, non_public[i].prefix)) {
            return 0;
        }
    }
    return 1;
}

const char *sbx_egress_host_normalize(const char *host, size_t len, char *out)
{
    size_t label = 0;
    size_t last_start = 0;
    int last_numeric = 1;

    if (len > 0 && host[len - 1] == '.') {
        len--;
    }
    if (len == 0) {
        return "host-empty";
    }
    if (len > SBX_EGRESS_HOST_MAX) {
        return "host-too-long";
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)host[i];

        if (ch == '.') {
            if (label == 0 || out[i - 1] == '-') {
                return "host-malformed";
            }
            label = 0;
            last_start = i + 1;
            out[i] = '.';
            continue;
        }
        if (!(isascii(ch) && (isalnum(ch) || ch == '-' || ch == '_'))) {
            return "host-malformed";
        }
        if (ch == '-' && label == 0) {
            return "host-malformed";
        }
        if (++label > 63) {
            return "host-malformed";
        }
        out[i] = (char)tolower(ch);
    }
    if (label == 0 || out[len - 1] == '-') {
        return "host-malformed";
    }
    out[len] = '\0';
    /* A numeric last label ("127.1", "2130706433", "0x7f.1") is an IP in disguise:
     * getaddrinfo would read it as an address. */
    for (size_t i = last_start; i < len; i++) {
        if (!isdigit((unsigned char)out[i])) {
            last_numeric = 0;
        }
    }
    if (last_numeric || strncmp(out + last_start, "0x", 2) == 0) {
        return "host-numeric";
    }
    return NULL;
}

static int parse_ports(const char *s, struct sbx_egress_rule *r)
{
    if (strcmp(s, "*") == 0) {
        r->any_port = 1;
        return 0;
    }
    while (*s != '\0') {
        char *end;
        long p;

        if (!isdigit((unsigned char)*s)) {
            return -1;
        }
        errno = 0;
        p = strtol(s, &end, 10);
        if (errno != 0 || p < 1 || p > 65535 ||
            r->n_ports == sizeof(r->ports) / sizeof(r->ports[0])) {
            return -1;
        }
        r->ports[r->n_ports++] = (uint16_t)p;
        if (*end == ',') {
            end++;
            if (*end == '\0') {
                return -1;
            }
        }
        else if (*end != '\0') {
            return -1;
        }
        s = end;
    }
    return r->n_ports > 0 ? 0 : -1;
}

static int parse_cidr(char *host, struct sbx_egress_rule *r)
{
    char *slash = strchr(host, '/');
    int max;

    if (slash != NULL) {
        char *end;
        long p;

        *slash = '\0';
        if (!isdigit((unsigned char)slash[1])) {
            return -1;
        }
        p = strtol(slash + 1, &end, 10);
        if (*end != '\0' || p < 0 || p > 128) {
            return -1;
        }
        r->prefix = (int)p;
    }
    else {
        r->prefix = -1;
    }
    if (!sbx_egress_addr_parse(host, &r->net)) {
        return -1;
    }
    max = r->net.family == AF_INET ? 32 : 128;
    if (r->prefix < 0) {
        r->prefix = max;
    }
    /* "::ffff:10.0.0.0/104" is stored as IPv4 10.0.0.0/8. */
    if (r->net.family == AF_INET && strchr(host, ':') != NULL) {
        r->prefix -= 96;
    }
    if (r->prefix < 0 || r->prefix > max) {
        return -1;
    }
    r->kind = SBX_RULE_CIDR;
    return 0;
}

static int parse_rule(const char *text, struct sbx_egress_rule *r)
{
    char *buf = xstrdup(text);
    char *host = buf;
    char *ports = NULL;
    char *space = strchr(buf, ' ');
    char norm[SBX_EGRESS_HOST_MAX + 1];
    int rc = -1;

    memset(r, 0, sizeof(*r));
    r->text = xstrdup(text);
    if (space != NULL) {
        /* one flag after the rule: " opaque" */
        if (strcmp(space, " " SBX_EGRESS_OPAQUE) != 0) {
            goto out;
        }
        *space = '\0';
        r->opaque = 1;
    }
    if (host[0] == '[') {
        char *close = strchr(host, ']');

        if (close == NULL) {
            goto out;
        }
        *close = '\0';
        host++;
        if (close[1] == '/') {
            char *colon = strchr(close + 1, ':');

            if (colon != NULL) {
                *colon = '\0';
                ports = colon + 1;
            }
            memmove(close, close + 1, strlen(close + 1) + 1);
        }
        else if (close[1] == ':') {
            ports = close + 2;
        }
        else if (close[1] != '\0') {
            goto out;
        }
        rc = parse_cidr(host, r);
        if (rc == 0 && strchr(host, ':') == NULL) {
            rc = -1;
        }
    }
    else {
        char *colon = strchr(host, ':');

        if (colon != NULL) {
            *colon = '\0';
            ports = colon + 1;
        }
        if (strchr(host, '/') != NULL || sbx_egress_addr_parse(host, &r->net)) {
            rc = parse_cidr(host, r);
        }
        else if (strncmp(host, "*.", 2) == 0) {
            if (sbx_egress_host_normalize(host + 2, strlen(host + 2), norm) == NULL) {
                r->kind = SBX_RULE_WILDCARD;
                r->name = xasprintf(".%s", norm);
                rc = 0;
            }
        }
        else if (sbx_egress_host_normalize(host, strlen(host), norm) == NULL) {
            r->kind = SBX_RULE_EXACT;
            r->name = xstrdup(norm);
            rc = 0;
        }
    }
    if (rc == 0) {
        if (ports != NULL) {
            rc = parse_ports(ports, r);
        }
        else {
            r->ports[0] = 80;
            r->ports[1] = 443;
            r->n_ports = 2;
        }
    }
out:
    free(buf);
    return rc;
}

void sbx_egress_rules_free(struct sbx_egress_rules *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free(r->v[i].text);
        free(r->v[i].name);
    }
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

int sbx_egress_rules_parse(const char *const *texts, struct sbx_egress_rules *out,
                           sbx_error_t **err)
{
    size_t n = 0;

    out->v = NULL;
    out->n = 0;
    while (texts != NULL && texts[n] != NULL) {
        n++;
    }
    out->v = xcalloc(n ? n : 1, sizeof(*out->v));
    for (size_t i = 0; i < n; i++) {
        if (parse_rule(texts[i], &out->v[i]) < 0) {
            out->n = i + 1;
            sbx_egress_rules_free(out);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "egress rule '%s': want NAME, *.NAME, IP or CIDR, optionally "
                                 "followed by :PORT[,PORT...] or :*, then optionally "
                                 "' " SBX_EGRESS_OPAQUE "'",
                                 texts[i]);
        }
        out->n = i + 1;
    }
    return 0;
}

static int port_ok(const struct sbx_egress_rule *r, unsigned port)
{
    if (r->any_port) {
        return 1;
    }
    for (size_t i = 0; i < r->n_ports; i++) {
        if (r->ports[i] == port) {
            return 1;
        }
    }
    return 0;
}

const struct sbx_egress_rule *sbx_egress_rules_match_name(const struct sbx_egress_rules *r,
                                                          const char *name, unsigned port)
{
    size_t len = strlen(name);

    for (size_t i = 0; i < r->n; i++) {
        const struct sbx_egress_rule *e = &r->v[i];

        if (!port_ok(e, port)) {
            continue;
        }
        if (e->kind == SBX_RULE_EXACT && strcmp(e->name, name) == 0) {
            return e;
        }
        if (e->kind == SBX_RULE_WILDCARD) {
            size_t sl = strlen(e->name);

            if (len > sl && strcmp(name + len - sl, e->name) == 0) {
                return e;
            }
        }
    }
    return NULL;
}

const struct sbx_egress_rule *sbx_egress_rules_match_addr(const struct sbx_egress_rules *r,
                                                          const struct sbx_egress_addr *a,
                                                          unsigned port)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct sbx_egress_rule *e = &r->v[i];

        if (e->kind == SBX_RULE_CIDR && port_ok(e, port) && in_net(a, &e->net, e->prefix)) {
            return e;
        }
    }
    return NULL;
}

const struct sbx_egress_rule *sbx_egress_rules_match_opaque(const struct sbx_egress_rules *r,
                                                            const char *name,
                                                            const struct sbx_egress_addr *a,
                                                            unsigned port)
{
    for (size_t i = 0; i < r->n; i++) {
        struct sbx_egress_rules one = {&r->v[i], 1};

        if (!r->v[i].opaque) {
            continue;
        }
        if (name != NULL ? sbx_egress_rules_match_name(&one, name, port) != NULL
                         : sbx_egress_rules_match_addr(&one, a, port) != NULL) {
            return &r->v[i];
        }
    }
    return NULL;
}

/* "ADDR" or "ADDR/PREFIX" (IPv6 without brackets) as a CIDR rule on any port. */
static int private_rule(const char *s, struct sbx_egress_rules *out)
{
    char text[128];
    const char *slash = strchr(s, '/');
    size_t alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
    char addr[64];
    struct sbx_egress_addr a;
    const char *texts[2] = {text, NULL};
    sbx_error_t *err = NULL;
    int rc;

    if (alen == 0 || alen >= sizeof(addr) || strlen(s) > 80) {
        return -1;
    }
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (!sbx_egress_addr_parse(addr, &a)) {
        return -1;
    }
    snprintf(text, sizeof(text), a.family == AF_INET6 ? "[%s]%s:*" : "%s%s:*", addr,
             slash != NULL ? slash : "");
    rc = sbx_egress_rules_parse(texts, out, &err);
    sbx_error_free(&err);
    return rc;
}

int sbx_egress_private_addr_ok(const char *s)
{
    struct sbx_egress_rules r = {0};

    if (private_rule(s, &r) < 0) {
        return 0;
    }
    sbx_egress_rules_free(&r);
    return 1;
}

int sbx_egress_private_match(const char *s, const struct sbx_egress_addr *a)
{
    struct sbx_egress_rules r = {0};
    int hit;

    if (private_rule(s, &r) < 0) {
        return 0;
    }
    hit = sbx_egress_rules_match_addr(&r, a, 1) != NULL;
    sbx_egress_rules_free(&r);
    return hit;
}
