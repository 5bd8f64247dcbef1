/* deny.c - a refusal a client inside can read: each deny reason of the proxy as one
 * line that says what happened and what to ask for, for the status line's reason
 * phrase and the body (docs/egress.md, "Reading a denial"), and the same text for
 * `sbx egress why`. */
#include "egress/deny.h"

#include <stdio.h>
#include <string.h>

/* Only characters a validated host or IP literal has: nothing the client sent can put
 * a CR, LF or quote into the status line. */
static int printable_host(const char *host)
{
    if (host == NULL || host[0] == '\0' || strlen(host) > SBX_EGRESS_HOST_MAX) {
        return 0;
    }
    for (const char *p = host; *p != '\0'; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_' || *p == ':')) {
            return 0;
        }
    }
    return 1;
}

/* The rule to ask for: "host" for the default ports, else "host:port"; an IPv6 literal
 * in brackets, an address as a /32 or /128 CIDR. */
static void rule_for(const char *host, unsigned port, int is_ip, char *out, size_t size)
{
    int v6 = strchr(host, ':') != NULL;
    char h[SBX_EGRESS_HOST_MAX + 8];

    if (is_ip) {
        snprintf(h, sizeof(h), v6 ? "[%s]/128" : "%s/32", host);
    }
    else {
        snprintf(h, sizeof(h), "%s", host);
    }
    if (port == 0 || port == 80 || port == 443) {
        snprintf(out, size, "%s", h);
    }
    else {
        snprintf(out, size, "%s:%u", h, port);
    }
}

const char *sbx_egress_deny_hint(const char *reason)
{
    static const struct {
        const char *reason;
        const char *text;
    } hints[] = {
        {"log-unavailable", "the egress log cannot be written, so all egress is refused (tell the "
                            "box's operator)"},
        {"budget-buffer", "this sandbox's connections hold the proxy's whole buffer budget "
                          "(close idle connections; operator: egress.max_buffer)"},
        {"budget-connections", "this sandbox has too many connections open (operator: "
                               "egress.max_connections)"},
        {"out-of-descriptors", "the proxy is out of descriptors; retry later"},
        {"out-of-memory", "the proxy is out of memory; retry later"},
        {"host-mismatch", "the Host header names another host or port than the request target"},
        {"chunked-body", "a chunked request body cannot be forwarded (send a Content-Length)"},
        {"bad-content-length", "the Content-Length is not one value of 1-15 digits"},
        {"use-connect-for-https", "https:// goes through CONNECT (set HTTPS_PROXY)"},
        {"not-a-proxy-request", "not a proxy request (send an absolute http:// URI or CONNECT)"},
        {"header-timeout", "the request head did not arrive in egress.header_timeout"},
        {"header-too-large", "the request head is over 16 KiB"},
        {"too-many-headers", "the request head has over 100 header lines"},
        {"malformed-head", "the request head is malformed (bare LF, NUL or control bytes)"},
        {"bad-request-line", "the request line is not METHOD SP TARGET SP HTTP/1.x"},
        {"bad-target", "the request target has user-info or %-escapes"},
        {"bad-port", "the port is not 1-65535"},
        {"bad-header", "a header line is malformed or folded"},
        {"duplicate-host", "the request has two Host headers"},
        {"host-empty", "the host name is empty"},
        {"host-too-long", "the host name is over 253 bytes"},
        {"host-malformed", "the host name is malformed (letters, digits, '-', '_' only; punycode "
                           "for others)"},
        {"host-numeric", "a host name ending in a numeric label reads as an address (use the "
                         "address or a name)"},
        {"connect-in-tunnel", "CONNECT inside a tunnel is refused"},
        {"denied-at-lookup", "the name was denied when it was looked up and the policy may "
                             "allow it now (look it up again)"},
    };

    for (size_t i = 0; i < sizeof(hints) / sizeof(hints[0]); i++) {
        if (strcmp(hints[i].reason, reason) == 0) {
            return hints[i].text;
        }
    }
    return NULL;
}

size_t sbx_egress_deny_text(const char *reason, const char *host, unsigned port, int is_ip,
                            char *out, size_t size)
{
    char dest[SBX_EGRESS_HOST_MAX + 16];
    char rule[SBX_EGRESS_HOST_MAX + 24];
    const char *hint;
    int n;

    if (!printable_host(host)) {
        host = NULL;
    }
    if (host != NULL) {
        snprintf(dest, sizeof(dest), strchr(host, ':') != NULL ? "[%s]:%u" : "%s:%u", host, port);
        rule_for(host, port, is_ip, rule, sizeof(rule));
    }
    if (host != NULL && strcmp(reason, "not-allowed") == 0) {
        n = snprintf(out, size,
                     "sbx egress not-allowed: %s is not in this task's egress allow-list (ask "
                     "for egress.allow \"%s\")",
                     dest, rule);
    }
    else if (host != NULL && strcmp(reason, "ip-literal") == 0) {
        n = snprintf(out, size,
                     "sbx egress ip-literal: %s is an IP address no rule allows (use its host "
                     "name, or ask for egress.allow \"%s\")",
                     dest, rule);
    }
    else if (host != NULL && strcmp(reason, "private-address") == 0) {
        n = snprintf(out, size,
                     "sbx egress private-address: %s resolves only to private addresses (ask "
                     "for egress.private_allow \"%s\" with its addresses)",
                     dest, host);
    }
    else if (host != NULL && strcmp(reason, "resolve-failed") == 0) {
        n = snprintf(out, size, "sbx egress resolve-failed: %s is allowed but does not resolve",
                     dest);
    }
    else if (host != NULL && strcmp(reason, "connect-failed") == 0) {
        n = snprintf(out, size,
                     "sbx egress connect-failed: %s is allowed but no address of it accepted "
                     "the connection",
                     dest);
    }
    else if ((hint = sbx_egress_deny_hint(reason)) != NULL) {
        n = snprintf(out, size, "sbx egress %s: %s", reason, hint);
    }
    else {
        n = snprintf(out, size, "sbx egress %s: refused", reason);
    }
    if (n < 0) {
        out[0] = '\0';
        return 0;
    }
    return (size_t)n < size ? (size_t)n : size - 1;
}
