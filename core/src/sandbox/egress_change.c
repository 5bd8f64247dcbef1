/* egress_change.c - `sbx task allow|deny T HOST[:PORT]` on a running task (docs/egress.md,
 * "Changing a running task's egress"): the request is checked as a host rule, egress.lua's
 * change() decides it (policy/egress_change.c), and the new allow-list goes to the task's
 * proxy socket (its next connections; open ones stay), to <task dir>/egress.rules and to
 * the log. A deny that a wider rule would still allow is refused naming that rule. */
#include "sandbox/egress_change.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "egress/egress.h"
#include "policy/convert.h"
#include "policy/policy.h"
#include "sandbox/task_egress.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

#define SPEC_MAX 300
#define PORTS_MAX 64
#define RULES_MAX 4096

/* A canonical rule "host:p1,p2[ opaque]" split: host in host (NUL-terminated), its
 * ports; 0, or -1 when it does not look like one. */
static int split_rule(const char *rule, char *host, size_t hsize, int *ports, size_t *n,
                      int *opaque)
{
    const char *colon = strchr(rule, ':');
    const char *p;

    *n = 0;
    *opaque = strstr(rule, " opaque") != NULL;
    if (colon == NULL || (size_t)(colon - rule) >= hsize) {
        return -1;
    }
    memcpy(host, rule, (size_t)(colon - rule));
    host[colon - rule] = '\0';
    for (p = colon + 1; *n < PORTS_MAX && *p >= '0' && *p <= '9';) {
        char *end;
        long v = strtol(p, &end, 10);

        ports[(*n)++] = (int)v;
        if (*end != ',') {
            break;
        }
        p = end + 1;
    }
    return *n > 0 ? 0 : -1;
}

static char *join_rule(const char *host, const int *ports, size_t n, int opaque)
{
    char buf[SPEC_MAX + PORTS_MAX * 7];
    size_t pos = (size_t)snprintf(buf, sizeof(buf), "%s", host);

    for (size_t i = 0; i < n && pos < sizeof(buf); i++) {
        pos += (size_t)snprintf(buf + pos, sizeof(buf) - pos, "%c%d", i ? ',' : ':', ports[i]);
    }
    if (opaque && pos < sizeof(buf)) {
        snprintf(buf + pos, sizeof(buf) - pos, " opaque");
    }
    return xstrdup(buf);
}

static size_t count(char *const *v)
{
    size_t n = 0;

    while (v != NULL && v[n] != NULL) {
        n++;
    }
    return n;
}

static void free_rules(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

/* The rules after an allow of rule: the same list plus it (unless present). */
static char **rules_allow(char *const *cur, const char *rule, int *changed)
{
    size_t n = count(cur);
    char **v = xcalloc(n + 2, sizeof(char *));

    *changed = 1;
    for (size_t i = 0; i < n; i++) {
        v[i] = xstrdup(cur[i]);
        if (strcmp(cur[i], rule) == 0) {
            *changed = 0;
        }
    }
    if (*changed) {
        v[n] = xstrdup(rule);
    }
    return v;
}

/* The rules after a deny of host (ports: those asked; all: every port of it). */
static char **rules_deny(char *const *cur, const char *host, const int *ports, size_t n_ports,
                         int all, int *changed)
{
    size_t n = count(cur);
    char **v = xcalloc(n + 1, sizeof(char *));
    size_t k = 0;

    *changed = 0;
    for (size_t i = 0; i < n; i++) {
        char h[SPEC_MAX];
        int rp[PORTS_MAX];
        size_t rn = 0;
        size_t keep = 0;
        int opaque = 0;

        if (split_rule(cur[i], h, sizeof(h), rp, &rn, &opaque) < 0 || strcasecmp(h, host) != 0) {
            v[k++] = xstrdup(cur[i]);
            continue;
        }
        for (size_t j = 0; !all && j < rn; j++) {
            int drop = 0;

            for (size_t q = 0; q < n_ports; q++) {
                drop |= rp[j] == ports[q];
            }
            if (!drop) {
                rp[keep++] = rp[j];
            }
        }
        if (keep != rn) {
            *changed = 1;
        }
        if (keep > 0) {
            v[k++] = join_rule(h, rp, keep, opaque);
        }
    }
    return v;
}

/* After a deny: the first rule that still allows host at one of ports, or NULL. */
static const char *still_allowed(char *const *rules, const char *host, const int *ports,
                                 size_t n_ports)
{
    if (host[0] == '*') {
        return NULL; /* a wildcard's own rule is gone; a wider wildcard is not looked for */
    }
    for (size_t i = 0; rules != NULL && rules[i] != NULL; i++) {
        for (size_t q = 0; q < n_ports; q++) {
            if (sbx_policy_host_rule_matches(rules[i], host, ports[q])) {
                return rules[i];
            }
        }
    }
    return NULL;
}

/* One JSON line per change asked, made or refused, in <task dir>/egress.changes (mode
 * 0600): the task's audit trail (docs/egress.md). Rules and names hold no secret. */
static void note(const struct sbx_task *t, const struct sbx_egress_change *req, const char *outcome,
                 const char *by, const char *why)
{
    cleanup_free char *path = xasprintf("%s/egress.changes", t->dir);
    json_t *j =
        json_pack("{s:I, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "time", (json_int_t)time(NULL),
                  "task", t->id, "op", req->op, "rule", req->rule, "client", req->client, "via",
                  req->via, "outcome", outcome, "by", by ? by : "");
    char *line;
    FILE *f;
    int fd;

    if (j == NULL) {
        return;
    }
    json_object_set_new(j, "reason", json_string(why ? why : ""));
    line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    f = fd >= 0 ? fdopen(fd, "a") : NULL;
    if (f == NULL || line == NULL || fprintf(f, "%s\n", line) < 0) {
        sbx_warn("task %s: %s: cannot note the egress change", t->id, path);
    }
    if (f != NULL) {
        fclose(f);
    }
    else if (fd >= 0) {
        close(fd);
    }
    free(line);
}

static int decide(struct sbx_task *t, const char *jobid, const struct sbx_egress_change *req,
                  struct sbx_egress_verdict *v, sbx_error_t **err)
{
    struct sbx_job_desc job = {0};
    struct sbx_policy *pol;
    char *dir = sbx_policy_dir_resolve(t->cfg->policy_dir, err);
    int r;

    if (dir == NULL) {
        return -1;
    }
    pol = sbx_policy_load(dir, t->cfg, err);
    free(dir);
    if (pol == NULL) {
        return sbx_error_wrap(err, "policy");
    }
    job.id = jobid;
    job.task = t->id;
    job.pool = t->pool;
    job.workdir = t->worktree;
    job.provider = t->prov ? t->prov->cfg->name : NULL;
    r = sbx_policy_egress_change(pol, &job, req, v, err);
    sbx_policy_destroy(pol);
    return r;
}

/* The request checked: op is allow or deny, spec a host rule (its canonical form in
 * *rule, which the caller frees even on failure, split into host and ports), and the
 * task has an egress proxy to change. */
static int check_request(const struct sbx_task *t, const char *op, const char *spec, char **rule,
                         char host[SPEC_MAX], int ports[PORTS_MAX], size_t *n_ports,
                         sbx_error_t **err)
{
    char why[160];
    int opaque = 0;

    if (op == NULL || (strcmp(op, "allow") != 0 && strcmp(op, "deny") != 0)) {
        return sbx_error_set(err, SBX_E_USAGE, "egress change: op must be allow or deny");
    }
    if (spec == NULL || *spec == '\0' || strlen(spec) > SPEC_MAX - 8) {
        return sbx_error_set(err, SBX_E_USAGE, "task %s: %s: HOST[:PORT] expected (1 to %d bytes)",
                             t->id, op, SPEC_MAX - 8);
    }
    *rule = sbx_policy_rule_canon(spec, strlen(spec), NULL, 0, why, sizeof(why));
    if (*rule == NULL || split_rule(*rule, host, SPEC_MAX, ports, n_ports, &opaque) < 0) {
        return sbx_error_set(err, SBX_E_USAGE, "task %s: %s '%.80s': %s", t->id, op, spec,
                             *rule ? "not a host rule" : why);
    }
    if (t->egress == NULL || t->egress_dir == NULL) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "task %s: it has no egress proxy to change (its provider does not "
                             "wire the proxy in)",
                             t->id);
    }
    return 0;
}

/* The task's rules after the change (an allow adds rule; a deny of a bare host drops
 * every port of it, of HOST:PORT those ports), with *changed. Under t->mu. */
static char **next_rules(const struct sbx_task *t, const char *op, const char *spec,
                         const char *rule, const char *host, const int *ports, size_t n_ports,
                         int *changed)
{
    if (strcmp(op, "allow") == 0) {
        return rules_allow(t->egress_allow, rule, changed);
    }
    return rules_deny(t->egress_allow, host, ports, n_ports, strchr(spec, ':') == NULL, changed);
}

static json_t *rules_json(char *const *rules)
{
    json_t *allow = json_array();

    for (size_t i = 0; rules[i] != NULL; i++) {
        json_array_append_new(allow, json_string(rules[i]));
    }
    return allow;
}

int sbx_task_egress_change(struct sbx_task *t, const char *op, const char *spec, const char *client,
                           const char *via, json_t **out, sbx_error_t **err)
{
    char host[SPEC_MAX];
    int ports[PORTS_MAX];
    size_t n_ports = 0;
    int changed = 0;
    cleanup_free char *rule = NULL;
    struct sbx_egress_verdict v;
    struct sbx_egress_change req = {0};
    char **next;
    const char *wider;
    json_t *allow;
    char jobid[80];

    *out = NULL;
    sbx_task_job(t, jobid, sizeof(jobid));
    if (check_request(t, op, spec, &rule, host, ports, &n_ports, err) < 0) {
        return -1;
    }
    pthread_mutex_lock(&t->mu);
    req.op = op;
    req.rule = rule;
    req.host = host;
    req.ports = ports;
    req.n_ports = n_ports;
    req.current = (const char *const *)t->egress_allow;
    req.client = client ? client : "local";
    req.via = via ? via : "cli";
    if (decide(t, jobid, &req, &v, err) < 0) {
        pthread_mutex_unlock(&t->mu);
        sbx_warn("task %s: egress %s %s by %s (%s): refused, the policy failed: %s", t->id, op,
                 rule, req.client, req.via, (*err)->msg);
        note(t, &req, "refused", "policies/egress.lua", (*err)->msg);
        return sbx_error_wrap(err, "task %s: egress %s %s refused (fail closed)", t->id, op, rule);
    }
    if (!v.allow) {
        pthread_mutex_unlock(&t->mu);
        sbx_warn("task %s: egress %s %s by %s (%s): refused by %s rule '%s': %s", t->id, op, rule,
                 req.client, req.via, v.where, v.rule, v.reason);
        note(t, &req, "refused", v.rule, v.reason);
        return sbx_error_set(err, SBX_E_POLICY, "task %s: egress %s %s refused by %s rule '%s'%s%s",
                             t->id, op, rule, v.where, v.rule, v.reason[0] ? ": " : "", v.reason);
    }
    next = next_rules(t, op, spec, rule, host, ports, n_ports, &changed);
    if (count(next) > RULES_MAX) {
        pthread_mutex_unlock(&t->mu);
        free_rules(next);
        return sbx_error_set(err, SBX_E_USAGE, "task %s: more than %d egress rules", t->id,
                             RULES_MAX);
    }
    wider = strcmp(op, "deny") == 0 ? still_allowed(next, host, ports, n_ports) : NULL;
    if (wider != NULL) {
        int r = sbx_error_set(err, SBX_E_USAGE,
                              "task %s: deny %s: still allowed by the task's rule '%s' (deny "
                              "that rule instead)",
                              t->id, rule, wider);

        pthread_mutex_unlock(&t->mu);
        free_rules(next);
        note(t, &req, "refused", wider, "still allowed by this rule of the task");
        return r;
    }
    if (changed &&
        sbx_egress_set_rules(t->egress, t->egress_dir, (const char *const *)next, err) < 0) {
        pthread_mutex_unlock(&t->mu);
        free_rules(next);
        return sbx_error_wrap(err, "task %s: egress %s %s", t->id, op, rule);
    }
    free_rules(t->egress_allow);
    t->egress_allow = next;
    if (changed) {
        sbx_task_egress_save(t);
    }
    allow = rules_json(next);
    pthread_mutex_unlock(&t->mu);
    note(t, &req, changed ? "changed" : "unchanged", v.rule, v.reason);
    sbx_info("task %s: egress %s %s by %s (%s): %s by %s rule '%s'", t->id, op, rule, req.client,
             req.via, changed ? "changed" : "already so", v.where, v.rule);
    *out = json_pack("{s:s, s:s, s:s, s:b, s:o, s:s, s:s, s:s}", "task", t->id, "op", op, "rule",
                     rule, "changed", changed, "allow", allow, "decided_by", v.where, "policy_rule",
                     v.rule, "reason", v.reason);
    return 0;
}
