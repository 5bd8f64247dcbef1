/* hostrule.c - egress host rules of a policy result: a rule's canonical form
 * ("host:p1,p2", " opaque"), the host of a registry setting, and whether a rule list
 * allows a host and port (declared in convert.h and policy.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/convert.h"
#include "util/xalloc.h"

static int valid_name(const char *h, size_t len, char *why, size_t why_len)
{
    size_t start = 0;
    int labels = 0;
    int digits = 1;

    if (len == 0 || len > 253) {
        snprintf(why, why_len, "host name must have 1 to 253 characters");
        return 0;
    }
    for (size_t i = 0; i <= len; i++) {
        if (i == len || h[i] == '.') {
            size_t l = i - start;

            if (l == 0 || l > 63) {
                snprintf(why, why_len, "empty or over-long label");
                return 0;
            }
            if (h[start] == '-' || h[i - 1] == '-') {
                snprintf(why, why_len, "a label may not start or end with '-'");
                return 0;
            }
            labels++;
            if (i < len) {
                digits = 1;
            }
            start = i + 1;
            continue;
        }
        if (h[i] == '*') {
            snprintf(why, why_len, "'*' is allowed only as a leading '*.' label");
            return 0;
        }
        if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= '0' && h[i] <= '9') || h[i] == '-')) {
            snprintf(why, why_len,
                     "invalid character '%c' (host names are letters, digits, "
                     "'-' and '.')",
                     isprint((unsigned char)h[i]) ? h[i] : '?');
            return 0;
        }
        if (h[i] < '0' || h[i] > '9') {
            digits = 0;
        }
    }
    if (digits) {
        snprintf(why, why_len, "IP literals are not host rules");
        return 0;
    }
    if (labels < 2) {
        snprintf(why, why_len,
                 "a host rule needs at least two labels (example.com, "
                 "*.example.com)");
        return 0;
    }
    return 1;
}

char *sbx_policy_rule_canon(const char *spec, size_t len, const int *ports, size_t n_ports,
                            char *why, size_t why_len)
{
    char host[256];
    int parsed[SBX_POLICY_MAX_PORTS];
    size_t n_parsed = 0;
    const char *colon = memchr(spec, ':', len);
    size_t hlen = colon != NULL ? (size_t)(colon - spec) : len;
    int wildcard = 0;
    char *out;
    size_t pos;

    if (colon != NULL && ports != NULL) {
        snprintf(why, why_len, "give ports either in the string or in 'ports', not both");
        return NULL;
    }
    if (hlen >= sizeof(host) || hlen == 0) {
        snprintf(why, why_len, "host name must have 1 to 253 characters");
        return NULL;
    }
    for (size_t i = 0; i < hlen; i++) {
        char c = spec[i];

        host[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    host[hlen] = '\0';
    if (hlen > 1 && host[hlen - 1] == '.') {
        host[--hlen] = '\0';
    }
    if (hlen >= 2 && host[0] == '*' && host[1] == '.') {
        wildcard = 1;
    }
    if (!valid_name(host + (wildcard ? 2 : 0), hlen - (wildcard ? 2 : 0), why, why_len)) {
        return NULL;
    }
    if (colon != NULL) {
        const char *p = colon + 1;
        const char *end = spec + len;

        while (p <= end) {
            long v = 0;
            const char *q = p;

            while (q < end && isdigit((unsigned char)*q) && v <= 65535) {
                v = v * 10 + (*q++ - '0');
            }
            if (q == p || v < 1 || v > 65535 || (q < end && *q != ',')) {
                snprintf(why, why_len, "ports must be numbers from 1 to 65535, comma-separated");
                return NULL;
            }
            if (n_parsed == SBX_POLICY_MAX_PORTS) {
                snprintf(why, why_len, "more than %d ports", SBX_POLICY_MAX_PORTS);
                return NULL;
            }
            parsed[n_parsed++] = (int)v;
            p = q + 1;
        }
        ports = parsed;
        n_ports = n_parsed;
    }
    else if (ports == NULL) {
        static const int defaults[] = {80, 443};

        ports = defaults;
        n_ports = 2;
    }
    if (n_ports == 0 || n_ports > SBX_POLICY_MAX_PORTS) {
        snprintf(why, why_len, "a rule needs 1 to %d ports", SBX_POLICY_MAX_PORTS);
        return NULL;
    }
    out = xmalloc(hlen + 1 + n_ports * 6 + 1);
    memcpy(out, host, hlen);
    pos = hlen;
    for (size_t i = 0; i < n_ports; i++) {
        if (ports[i] < 1 || ports[i] > 65535) {
            free(out);
            snprintf(why, why_len, "port %d is not in 1..65535", ports[i]);
            return NULL;
        }
        char digits[8];
        int nd = 0;

        for (int v = ports[i]; v > 0; v /= 10) {
            digits[nd++] = (char)('0' + v % 10);
        }
        out[pos++] = i == 0 ? ':' : ',';
        while (nd > 0) {
            out[pos++] = digits[--nd];
        }
    }
    out[pos] = '\0';
    return out;
}

char *sbx_policy_registry_rule(const char *setting, char *why, size_t why_len)
{
    const char *p = setting;
    const char *end;

    if (strncmp(p, "https://", 8) == 0) {
        p += 8;
    }
    else if (strncmp(p, "http://", 7) == 0) {
        p += 7;
    }
    end = p + strcspn(p, "/");
    return sbx_policy_rule_canon(p, (size_t)(end - p), NULL, 0, why, why_len);
}

static int host_eq(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && strncasecmp(a, b, alen) == 0;
}

int sbx_policy_host_rule_matches(const char *rule, const char *host, int port)
{
    const char *colon = strrchr(rule, ':');
    size_t rlen;
    size_t hlen;
    int port_ok = 0;

    if (colon == NULL || host == NULL) {
        return 0;
    }
    for (const char *p = colon + 1; *p != '\0';) {
        char *end;
        long v = strtol(p, &end, 10);

        if (v == port) {
            port_ok = 1;
            break;
        }
        p = *end == ',' ? end + 1 : end;
        if (end == p && *end != '\0') {
            break;
        }
    }
    if (!port_ok) {
        return 0;
    }
    rlen = (size_t)(colon - rule);
    hlen = strlen(host);
    if (hlen > 1 && host[hlen - 1] == '.') {
        hlen--;
    }
    if (rlen > 2 && rule[0] == '*' && rule[1] == '.') {
        size_t slen = rlen - 1; /* ".example.com" */

        return hlen > slen && strncasecmp(host + hlen - slen, rule + 1, slen) == 0;
    }
    return host_eq(rule, rlen, host, hlen);
}

int sbx_policy_egress_allows(char *const *rules, const char *host, int port)
{
    for (size_t i = 0; rules != NULL && rules[i] != NULL; i++) {
        if (sbx_policy_host_rule_matches(rules[i], host, port)) {
            return 1;
        }
    }
    return 0;
}
