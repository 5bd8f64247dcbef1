/* names.c - what the relay asks the proxy for the sandbox's transparent path
 * (docs/egress.md, "Without proxy variables"). Two messages arrive on the sandbox's
 * socket, each led by a control byte no HTTP request starts with:
 *
 *   "\x02NAME\n"                a name query: the relay's resolver asks whether the
 *                               policy allows NAME; answered "allow\n" or
 *                               "deny REASON TEXT\n", then closed
 *   "\x01HOST:PORT\n" + a fd    a transparent connection: the relay hands over the TCP
 *                               socket a program opened to HOST:PORT (it learned HOST
 *                               from the address its resolver gave out), and the proxy
 *                               treats it as "CONNECT HOST:PORT" whose 200 is not sent
 *   "\x03HOST:PORT\n" + a fd    (added) the same for an address the resolver gave a
 *                               denied name: the proxy refuses it whatever the rules
 *                               say (never connects it) and answers what the program
 *                               sends first (refusal.c)
 *
 * Each message arrives whole in accept.c's first read (the relay writes it in one
 * call; a transparent connection's line may be followed by the relay's attribution
 * line), its line at most SBX_EGRESS_NAME_LINE bytes; anything else is a bad handover.
 * Egress loop only. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/conn.h"

long sbx_egress_name_line(const char *buf, size_t len, char *line, size_t size)
{
    const char *end = memchr(buf, '\n', len < size ? len : size);
    size_t n;

    if (end == NULL) {
        return -1;
    }
    n = (size_t)(end - buf);
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)buf[i] <= ' ' || (unsigned char)buf[i] >= 0x7f) {
            return -1;
        }
    }
    memcpy(line, buf, n);
    line[n] = '\0';
    return (long)n + 1;
}

/* NULL when some rule could allow NAME (normalized) on some port, else the reason. A
 * CIDR rule allows names that resolve into it, which only a connection can tell: with
 * one, every well-formed name is let through to the connection's own check. */
static const char *name_decision(const struct sbx_egress_rules *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct sbx_egress_rule *rule = &r->v[i];

        if (rule->kind == SBX_RULE_CIDR) {
            return NULL;
        }
        if (sbx_egress_rules_match_name(r, name, rule->any_port ? 1 : rule->ports[0]) != NULL) {
            return NULL;
        }
    }
    return "not-allowed";
}

void sbx_egress_conn_name_query(struct sbx_egress_conn *c, const char *buf, size_t len)
{
    char line[SBX_EGRESS_NAME_LINE];
    char name[SBX_EGRESS_HOST_MAX + 1];
    char answer[SBX_EGRESS_NAME_LINE + 160];
    const char *why;
    int n;

    if (sbx_egress_name_line(buf, len, line, sizeof(line)) != (long)len) {
        c->reason = "bad-name-query";
        sbx_egress_conn_finish(c);
        return;
    }
    why = sbx_egress_host_normalize(line, strlen(line), name);
    if (why == NULL) {
        why = name_decision(&c->sb->rules, name);
    }
    else {
        size_t l = strnlen(line, sizeof(name) - 1);

        memcpy(name, line, l);
        name[l] = '\0';
    }
    if (why == NULL) {
        n = snprintf(answer, sizeof(answer), "allow\n");
        c->decision = "allow";
        c->quiet = 1; /* the connection that follows has its own line */
    }
    else {
        n = snprintf(answer, sizeof(answer),
                     "deny %s sbx egress: %s not allowed by policy of task %s (%s)\n", why, name,
                     c->sb->task != NULL ? c->sb->task : "?", why);
        snprintf(c->req.method, sizeof(c->req.method), "DNS");
        snprintf(c->req.host, sizeof(c->req.host), "%s", name);
    }
    /* a few bytes into an empty unix socket: never blocks */
    if (send(c->client_fd, answer, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n && why == NULL) {
        c->quiet = 0;
        c->reason = "client-closed";
    }
    c->reason = c->reason != NULL ? c->reason : why;
    sbx_egress_conn_finish(c);
}

void sbx_egress_conn_transparent(struct sbx_egress_conn *c, const char *line, int denied)
{
    char head[SBX_EGRESS_NAME_LINE * 2 + 64];
    int n;

    c->transparent = 1;
    c->name_denied = denied;
    n = snprintf(head, sizeof(head), "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", line, line);
    sbx_egress_conn_start_head(c, head, (size_t)n);
}

const char *sbx_egress_conn_denied_reason(const struct sbx_egress_conn *c)
{
    if (!c->req.host_is_ip &&
        sbx_egress_rules_match_name(&c->sb->rules, c->req.host, c->req.port) != NULL) {
        return "denied-at-lookup";
    }
    return "not-allowed";
}
