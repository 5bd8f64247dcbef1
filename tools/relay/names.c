/* names.c - the relay's transparent path (names.h). Everything a program in the
 * sandbox sends here is hostile: a query is read into a fixed buffer and parsed by
 * dns.c; the name tables are bounded (SBX_RELAY_NAMES_MAX, then SERVFAIL;
 * SBX_RELAY_DENIED_MAX, then NXDOMAIN); the proxy decides every name the first time it
 * is asked for (a denied one each time), and checks every connection again as a
 * CONNECT (against the rules of that moment: they change when a warm sandbox is
 * claimed). A connection to a denied name's address goes to the proxy marked denied
 * ("\x03"), which answers it and never connects it on. */
#include "names.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "attr.h"

#include "dns.h"

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h */
#endif

#define NAME_BASE 0x7f640000u /* 127.100.0.0: allowed names */
#define DENY_BASE 0x7f650000u /* 127.101.0.0: denied names (added) */
#define ASK_TIMEOUT_S 2

/* A table of names, each with the address base + its index + 1, for the sandbox's
 * life; bounded (max), so a sandbox asking for endless names gets SERVFAIL (allowed) or
 * the plain NXDOMAIN (denied) once it is full, never more memory. */
struct table {
    char **v;
    size_t n;
    size_t max;
    unsigned base;
};

static char *allowed_v[SBX_RELAY_NAMES_MAX];
static char *denied_v[SBX_RELAY_DENIED_MAX];
static struct table allowed = {allowed_v, 0, SBX_RELAY_NAMES_MAX, NAME_BASE};
static struct table denied = {denied_v, 0, SBX_RELAY_DENIED_MAX, DENY_BASE};

static void table_reset(struct table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i]);
        t->v[i] = NULL;
    }
    t->n = 0;
}

void sbx_relay_names_reset(void)
{
    table_reset(&allowed);
    table_reset(&denied);
}

static const char *table_name_of(const struct table *t, unsigned a)
{
    unsigned i = a - t->base;

    if ((a & 0xffff0000u) != t->base || i == 0 || i > t->n) {
        return NULL;
    }
    return t->v[i - 1];
}

const char *sbx_relay_name_of(unsigned a)
{
    return table_name_of(&allowed, a);
}

const char *sbx_relay_denied_name_of(unsigned a)
{
    return table_name_of(&denied, a);
}

/* The address name has in t (host order), or 0. */
static unsigned address_known(const struct table *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++) {
        if (strcmp(t->v[i], name) == 0) {
            return t->base + (unsigned)i + 1;
        }
    }
    return 0;
}

/* The address of name in t (host order), given one if it has none; 0 when t is full. */
static unsigned address_of(struct table *t, const char *name)
{
    unsigned a = address_known(t, name);

    if (a != 0) {
        return a;
    }
    if (t->n == t->max || (t->v[t->n] = strdup(name)) == NULL) {
        return 0;
    }
    t->n++;
    return t->base + (unsigned)t->n;
}

static void address_bytes(unsigned a, unsigned char a4[4])
{
    a4[0] = (unsigned char)(a >> 24);
    a4[1] = (unsigned char)(a >> 16);
    a4[2] = (unsigned char)(a >> 8);
    a4[3] = (unsigned char)a;
}

int sbx_relay_ask(const struct sockaddr_un *sun, const char *name, char *text, size_t size)
{
    struct timeval tv = {ASK_TIMEOUT_S, 0};
    char msg[SBX_DNS_NAME_MAX + 3];
    char buf[512];
    size_t got = 0;
    int len = snprintf(msg, sizeof(msg), "\x02%s\n", name);
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    snprintf(text, size, "sbx egress: the proxy did not answer for %s", name);
    if (u < 0) {
        return -1;
    }
    if (setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(u, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
        connect(u, (const struct sockaddr *)sun, sizeof(*sun)) < 0 ||
        send(u, msg, (size_t)len, MSG_NOSIGNAL) != len) {
        close(u);
        return -1;
    }
    while (got < sizeof(buf) - 1) {
        ssize_t n = read(u, buf + got, sizeof(buf) - 1 - got);

        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(u);
    buf[got] = '\0';
    if (strcmp(buf, "allow\n") == 0) {
        return 1;
    }
    if (strncmp(buf, "deny ", 5) == 0 && got > 6 && buf[got - 1] == '\n') {
        const char *sp = strchr(buf + 5, ' '); /* after the reason word: the text */

        buf[got - 1] = '\0';
        snprintf(text, size, "%s", sp != NULL ? sp + 1 : buf + 5);
        return 0;
    }
    return -1;
}

size_t sbx_relay_dns_reply(const unsigned char *q, size_t n, unsigned char *out, size_t size,
                           sbx_relay_ask_fn ask, const struct sockaddr_un *sun)
{
    struct sbx_dns_query dq;
    char text[SBX_DNS_TEXT_MAX + 1];
    unsigned char a4[4];
    unsigned a;
    int rc = sbx_dns_parse(q, n, &dq);
    int r;

    if (rc < 0) {
        return 0;
    }
    if (rc != SBX_DNS_NOERROR) {
        return sbx_dns_answer(q, &dq, rc, NULL, 0, NULL, out, size);
    }
    if (dq.qclass != 1 || dq.name[0] == '\0') {
        return sbx_dns_answer(q, &dq, SBX_DNS_REFUSED, NULL, SBX_DNS_EDE_OTHER,
                              "sbx egress: only names of the IN class are answered", out, size);
    }
    if (!dq.name_ok) {
        return sbx_dns_answer(q, &dq, SBX_DNS_NXDOMAIN, NULL, SBX_DNS_EDE_BLOCKED,
                              "sbx egress: not a host name (letters, digits, '-', '_')", out, size);
    }
    {
        size_t l = strlen(dq.name);

        if ((l >= 5 && strcmp(dq.name + l - 5, ".arpa") == 0) || strcmp(dq.name, "arpa") == 0) {
            return sbx_dns_answer(q, &dq, SBX_DNS_NXDOMAIN, NULL, SBX_DNS_EDE_BLOCKED,
                                  "sbx egress: no reverse lookups in the sandbox", out, size);
        }
    }
    /* A name the proxy allowed once keeps its address without asking again (the AAAA
     * query beside the A, the next lookup): every connection to it is still checked
     * by the proxy against the policy of that moment. A denied name is asked for each
     * time (the policy may allow it now). */
    r = address_known(&allowed, dq.name) != 0 ? 1 : ask(sun, dq.name, text, sizeof(text));
    if (r < 0) {
        return sbx_dns_answer(q, &dq, SBX_DNS_SERVFAIL, NULL, SBX_DNS_EDE_OTHER, text, out, size);
    }
    if (r == 0) {
        /* (changed) A denied name resolves, to a deny address of its own, with the
         * Extended DNS Error: a client that shows no EDE connects and gets the refusal
         * from the proxy in words it prints (an HTTP 403, a TLS access_denied alert).
         * AAAA: no data, with the EDE. A full table: NXDOMAIN as before. */
        if (dq.qtype != SBX_DNS_TYPE_A) {
            return sbx_dns_answer(q, &dq, SBX_DNS_NOERROR, NULL, SBX_DNS_EDE_BLOCKED, text, out,
                                  size);
        }
        a = address_of(&denied, dq.name);
        if (a == 0) {
            return sbx_dns_answer(q, &dq, SBX_DNS_NXDOMAIN, NULL, SBX_DNS_EDE_BLOCKED, text, out,
                                  size);
        }
        address_bytes(a, a4);
        return sbx_dns_answer(q, &dq, SBX_DNS_NOERROR, a4, SBX_DNS_EDE_BLOCKED, text, out, size);
    }
    if (dq.qtype != SBX_DNS_TYPE_A) { /* AAAA and the rest: the name exists, no data */
        return sbx_dns_answer(q, &dq, SBX_DNS_NOERROR, NULL, 0, NULL, out, size);
    }
    a = address_of(&allowed, dq.name);
    if (a == 0) {
        return sbx_dns_answer(q, &dq, SBX_DNS_SERVFAIL, NULL, SBX_DNS_EDE_OTHER,
                              "sbx egress: the sandbox's table of names is full", out, size);
    }
    address_bytes(a, a4);
    return sbx_dns_answer(q, &dq, SBX_DNS_NOERROR, a4, 0, NULL, out, size);
}

void sbx_relay_dns_serve(int fd, const struct sockaddr_un *sun)
{
    unsigned char q[SBX_DNS_MSG_MAX + 1];
    unsigned char out[SBX_DNS_MSG_MAX];
    struct sockaddr_storage from;
    socklen_t fl = sizeof(from);
    ssize_t n = recvfrom(fd, q, sizeof(q), MSG_DONTWAIT | MSG_TRUNC, (struct sockaddr *)&from, &fl);
    size_t len;

    if (n <= 0) {
        return;
    }
    /* a datagram longer than the buffer is cut: parse it as the FORMERR it is */
    len = sbx_relay_dns_reply(q, (size_t)n > sizeof(q) ? sizeof(q) : (size_t)n, out, sizeof(out),
                              sbx_relay_ask, sun);
    if (len > 0) {
        sendto(fd, out, len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&from, fl);
    }
}

void sbx_relay_transparent_accept(int fd, const struct sockaddr_un *sun, int attribute)
{
    struct sockaddr_in dst;
    socklen_t dl = sizeof(dst);
    char line[SBX_ATTR_HEAD_MAX];
    char ip[INET_ADDRSTRLEN];
    const char *host;
    char kind = '\x01'; /* a connection to decide; '\x03': to refuse */
    int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
    int one = 1;
    int len;

    if (c < 0) {
        return;
    }
    if (getsockopt(c, SOL_IP, SO_ORIGINAL_DST, &dst, &dl) < 0 || dst.sin_family != AF_INET) {
        close(c); /* not redirected: nothing to forward it to */
        return;
    }
    if ((ntohl(dst.sin_addr.s_addr) >> 24) == 127) {
        host = sbx_relay_name_of(ntohl(dst.sin_addr.s_addr));
        if (host == NULL && (host = sbx_relay_denied_name_of(ntohl(dst.sin_addr.s_addr))) != NULL) {
            kind = '\x03'; /* (added) a denied name's address: the proxy only answers it */
        }
        if (host == NULL) {
            close(c); /* an address the resolver never gave out */
            return;
        }
    }
    else { /* an IP literal off loopback: the proxy's CIDR rules decide */
        host = inet_ntop(AF_INET, &dst.sin_addr, ip, sizeof(ip));
    }
    len = snprintf(line, sizeof(line), "%c%s:%u\n", kind, host, ntohs(dst.sin_port));
    if (len < 0 || (size_t)len >= sizeof(line)) {
        close(c);
        return;
    }
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sbx_attr_hand_over(c, sun, line, (size_t)len, attribute); /* attr.c; closes c */
}
