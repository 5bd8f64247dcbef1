/* cmd_egress.c - `sbx egress why HOST[:PORT]`: explains the egress proxy's decision
 * for a destination from a task's allow-list, a pool's policy or a rules file
 * (docs/egress.md, "Reading a denial"). It decides by the proxy's own rule code; it
 * resolves no name (the proxy does that at connect time). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "egress/deny.h"
#include "egress/rules.h"
#include "policy/policy.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define RULES_MAX 4096

void sbx_cmd_egress_help(FILE *out)
{
    fprintf(out,
            "usage: sbx egress why HOST[:PORT] [--task T | --pool P | --policy FILE|DIR] "
            "[--json]\n"
            "\n"
            "Explains whether the egress proxy lets a sandbox reach HOST:PORT (default port\n"
            "443; an IPv6 literal in brackets) and why: the rule that allows it, or the deny\n"
            "reason and what to ask for; whether a tunnel to it may carry bytes other than\n"
            "TLS or HTTP (an opaque rule); where its addresses come from and whether\n"
            "private ones are allowed (egress.hosts, egress.private_allow, CIDR rules).\n"
            "\n"
            "  --task T         the allow-list of task T (<state_dir>/tasks/T/egress.rules)\n"
            "  --pool P         what the policy decides for a job of pool P (ci or agent)\n"
            "  --policy FILE    a rules file (one rule per line, as egress.rules), or a policy\n"
            "                   directory (decided for --pool, default agent)\n"
            "  --json           one JSON object\n"
            "Without --task or --policy: the configured policy for --pool (default agent).\n"
            "No name is resolved here: a name's DNS answers are checked by the proxy at\n"
            "connect time (private answers are dropped unless allowed).\n"
            "\n"
            "Exit status: 0 allowed, 1 denied, 2 usage or configuration error (unknown\n"
            "task, unreadable rules, a policy that fails).\n");
}

struct why_opts {
    const char *task;
    const char *pool;
    const char *policy;
    int json;
};

static void strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

static int id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 64 || s[0] == '.') {
        return 0;
    }
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* One rule per line; NULL-terminated, or NULL with err set. */
static char **read_rules_file(const char *path, sbx_error_t **err)
{
    FILE *f = fopen(path, "re");
    char **rules;
    char *line = NULL;
    size_t cap = 0;
    size_t n = 0;
    ssize_t len;

    if (f == NULL) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: cannot read: %m", path);
        return NULL;
    }
    rules = xcalloc(RULES_MAX + 1, sizeof(char *));
    while ((len = getline(&line, &cap, f)) > 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0 || line[0] == '#') {
            continue;
        }
        if (n == RULES_MAX) {
            sbx_error_set(err, SBX_E_CONFIG, "%s: more than %d rules", path, RULES_MAX);
            break;
        }
        rules[n++] = xstrdup(line);
    }
    free(line);
    fclose(f);
    if (n == RULES_MAX && *err != NULL) {
        strv_free(rules);
        return NULL;
    }
    return rules;
}

static char **policy_rules(struct sbx_config *c, const char *dir_opt, const char *pool,
                           char **source, sbx_error_t **err)
{
    cleanup_free char *dir = sbx_policy_dir_resolve(dir_opt != NULL ? dir_opt : c->policy_dir, err);
    const char *argv[] = {"true", NULL};
    struct sbx_job_desc job = {.id = "egress-why", .pool = pool, .argv = argv};
    struct sbx_policy_decision d;
    struct sbx_policy *p;
    char **rules;

    if (dir == NULL || (p = sbx_policy_load(dir, c, err)) == NULL) {
        return NULL;
    }
    if (sbx_policy_decide(p, &job, &d, err) < 0) {
        sbx_policy_destroy(p);
        return NULL;
    }
    sbx_policy_destroy(p);
    rules = xcalloc(d.n_egress_allow + 1, sizeof(char *));
    for (size_t i = 0; i < d.n_egress_allow; i++) {
        rules[i] = xstrdup(d.egress_allow[i]);
    }
    *source = xasprintf("%s/egress.lua (pool %s)", dir, pool);
    sbx_policy_decision_fini(&d);
    return rules;
}

/* HOST[:PORT], [V6][:PORT]: host text (no brackets) and port. -1 when malformed. */
static int split_dest(const char *s, char *host, size_t size, unsigned *port)
{
    const char *end;
    const char *colon = NULL;
    size_t n;

    *port = 443;
    if (s[0] == '[') {
        end = strchr(s, ']');
        if (end == NULL) {
            return -1;
        }
        n = (size_t)(end - s - 1);
        s++;
        colon = end[1] == ':' ? end + 1 : NULL;
        if (end[1] != '\0' && colon == NULL) {
            return -1;
        }
    }
    else {
        colon = strchr(s, ':');
        if (colon != NULL && strchr(colon + 1, ':') != NULL) {
            return -1; /* an IPv6 literal needs brackets */
        }
        n = colon != NULL ? (size_t)(colon - s) : strlen(s);
    }
    if (n == 0 || n >= size) {
        return -1;
    }
    memcpy(host, s, n);
    host[n] = '\0';
    if (colon != NULL) {
        char *e;
        long p = strtol(colon + 1, &e, 10);

        if (*e != '\0' || e == colon + 1 || p < 1 || p > 65535) {
            return -1;
        }
        *port = (unsigned)p;
    }
    return 0;
}

/* What the proxy decides for one destination. */
struct why {
    char norm[SBX_EGRESS_HOST_MAX + 1]; /* the host as the rules see it */
    unsigned port;
    int is_ip;
    struct sbx_egress_addr ip;            /* when is_ip */
    const struct sbx_egress_rule *rule;   /* the allowing rule, or NULL */
    const struct sbx_egress_rule *opaque; /* an opaque rule covering it, or NULL */
    const char *reason;                   /* the deny reason, or NULL: allowed */
};

/* Decides host:port by the proxy's rule code, as the proxy would. */
static void why_decide(const struct sbx_egress_rules *rules, const char *host, unsigned port,
                       struct why *w)
{
    w->port = port;
    w->rule = NULL;
    w->reason = NULL;
    w->is_ip = sbx_egress_addr_parse(host, &w->ip);
    if (w->is_ip) {
        snprintf(w->norm, sizeof(w->norm), "%s", host);
        w->rule = sbx_egress_rules_match_addr(rules, &w->ip, port);
        w->reason = w->rule == NULL ? "ip-literal" : NULL;
    }
    else if ((w->reason = sbx_egress_host_normalize(host, strlen(host), w->norm)) == NULL) {
        w->rule = sbx_egress_rules_match_name(rules, w->norm, port);
        w->reason = w->rule == NULL ? "not-allowed" : NULL;
    }
    else {
        snprintf(w->norm, sizeof(w->norm), "%s", host);
    }
    w->opaque = w->rule != NULL ? sbx_egress_rules_match_opaque(rules, w->is_ip ? NULL : w->norm,
                                                                w->is_ip ? &w->ip : NULL, port)
                                : NULL;
}

/* The addresses the configuration gives an allowed name (egress.hosts,
 * egress.private_allow): a JSON array, empty for a denied name or an address. */
static json_t *why_addresses(const struct sbx_config *c, const struct why *w)
{
    json_t *addrs = json_array();

    for (size_t i = 0; w->rule != NULL && !w->is_ip && i < c->egress.n_hosts; i++) {
        if (strcmp(c->egress.hosts[i].name, w->norm) == 0) {
            struct sbx_egress_addr a;

            sbx_egress_addr_parse(c->egress.hosts[i].address, &a);
            json_array_append_new(
                addrs, json_pack("{s:s, s:s, s:b}", "address", c->egress.hosts[i].address, "from",
                                 "egress.hosts", "private", !sbx_egress_addr_is_public(&a)));
        }
    }
    for (size_t i = 0; w->rule != NULL && !w->is_ip && i < c->egress.n_private_allow; i++) {
        const struct sbx_egress_private *p = &c->egress.private_allow[i];

        for (size_t k = 0; strcmp(p->name, w->norm) == 0 && p->addresses[k] != NULL; k++) {
            json_array_append_new(addrs, json_pack("{s:s, s:s, s:b}", "address", p->addresses[k],
                                                   "from", "egress.private_allow", "private", 1));
        }
    }
    return addrs;
}

/* The text of an allowed destination: the rule, what a tunnel may carry and
 * where its addresses come from. */
static void why_print_allow(const struct why *w, const char *source, json_t *addrs, size_t n_cidrs)
{
    const char *v6 = strchr(w->norm, ':');

    printf("%s%s%s:%u: allow by rule \"%s\", from %s\n", v6 ? "[" : "", w->norm, v6 ? "]" : "",
           w->port, w->rule->text, source);
    printf("tunnel bytes: %s\n", w->opaque != NULL
                                     ? "anything (opaque rule)"
                                     : "TLS naming this host, or one HTTP/1 request for it");
    if (w->is_ip) {
        printf("address: %s (%s)\n", w->norm,
               sbx_egress_addr_is_public(&w->ip) ? "public" : "private, allowed by the rule");
    }
    else if (json_array_size(addrs) > 0) {
        for (size_t i = 0; i < json_array_size(addrs); i++) {
            json_t *a = json_array_get(addrs, i);

            printf("address: %s (%s%s)\n", json_string_value(json_object_get(a, "address")),
                   json_string_value(json_object_get(a, "from")),
                   json_is_true(json_object_get(a, "private")) ? "; private, trusted" : "");
        }
    }
    else {
        printf("addresses: resolved by the proxy at connect time; private answers are "
               "dropped (403 private-address) unless a CIDR rule (%zu here) or "
               "egress.private_allow covers them\n",
               n_cidrs);
    }
}

static int explain(struct sbx_config *c, const char *dest, char **texts, const char *source,
                   int json)
{
    char host[SBX_EGRESS_HOST_MAX + 1];
    char text[SBX_EGRESS_DENY_TEXT_MAX];
    struct sbx_egress_rules rules = {0};
    struct why w;
    cleanup_error sbx_error_t *err = NULL;
    json_t *addrs;
    json_t *cidrs;
    json_t *o;
    unsigned port;

    if (split_dest(dest, host, sizeof(host), &port) < 0) {
        fprintf(stderr, "sbx: error: egress why: '%s': want HOST[:PORT] or [IPV6][:PORT]\n", dest);
        return SBX_EXIT_USAGE;
    }
    if (sbx_egress_rules_parse((const char *const *)texts, &rules, &err) < 0) {
        fprintf(stderr, "sbx: error: egress why: %s: %s\n", source, sbx_error_msg(err));
        return SBX_EXIT_USAGE;
    }
    why_decide(&rules, host, port, &w);
    addrs = why_addresses(c, &w);
    cidrs = json_array();
    for (size_t i = 0; i < rules.n; i++) {
        if (rules.v[i].kind == SBX_RULE_CIDR) {
            json_array_append_new(cidrs, json_string(rules.v[i].text));
        }
    }
    if (w.reason != NULL) {
        sbx_egress_deny_text(w.reason, w.norm, port, w.is_ip, text, sizeof(text));
    }
    o = json_pack("{s:s, s:i, s:s, s:s, s:o, s:o, s:b, s:o, s:o, s:o}", "host", w.norm, "port",
                  (int)port, "decision", w.reason == NULL ? "allow" : "deny", "source", source,
                  "rule", w.rule != NULL ? json_string(w.rule->text) : json_null(), "reason",
                  w.reason != NULL ? json_string(w.reason) : json_null(), "opaque",
                  w.opaque != NULL, "message", w.reason != NULL ? json_string(text) : json_null(),
                  "addresses", addrs, "private_rules", cidrs);
    if (json) {
        json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        fputc('\n', stdout);
    }
    else if (w.reason != NULL) {
        printf("%s%s%s:%u: deny (%s), from %s\n%s\n", strchr(w.norm, ':') ? "[" : "", w.norm,
               strchr(w.norm, ':') ? "]" : "", port, w.reason, source, text);
    }
    else {
        why_print_allow(&w, source, addrs, json_array_size(cidrs));
    }
    json_decref(o);
    sbx_egress_rules_free(&rules);
    return w.reason == NULL ? SBX_EXIT_OK : SBX_EXIT_FAIL;
}

/* Parses `sbx egress why`'s options into *o. Returns 0 or -1 (printed). */
static int why_parse(int argc, char **argv, struct why_opts *o)
{
    static const struct option longopts[] = {
        {"task", required_argument, NULL, 't'},
        {"pool", required_argument, NULL, 'p'},
        {"policy", required_argument, NULL, 'P'},
        {"json", no_argument, NULL, 'J'},
        {NULL, 0, NULL, 0},
    };
    struct sbx_args a = {.cmd = "egress why",
                         .help = "egress",
                         .opts = longopts,
                         .argc = argc - 1,
                         .argv = argv + 1};
    int ch;

    if (argc < 2 || strcmp(argv[1], "why") != 0) {
        fprintf(stderr,
                "sbx: error: usage: sbx egress why HOST[:PORT] (see 'sbx egress --help')\n");
        return -1;
    }
    while ((ch = sbx_args_next(&a)) != -1) {
        switch (ch) {
        case 't':
            o->task = optarg;
            break;
        case 'p':
            o->pool = optarg;
            break;
        case 'P':
            o->policy = optarg;
            break;
        case 'J':
            o->json = 1;
            break;
        default:
            return -1;
        }
    }
    if (sbx_args_operands(&a, 1, 1, "HOST[:PORT]") < 0) {
        return -1;
    }
    if ((o->task != NULL) + (o->policy != NULL) > 1 || (o->task != NULL && o->pool != NULL)) {
        fprintf(stderr, "sbx: error: egress why: --task and --policy/--pool exclude each other\n");
        return -1;
    }
    if (o->pool != NULL && strcmp(o->pool, "ci") != 0 && strcmp(o->pool, "agent") != 0) {
        fprintf(stderr, "sbx: error: egress why: --pool '%s': ci or agent\n", o->pool);
        return -1;
    }
    return 0;
}

/* The rules to decide by: the task's allow-list, a rules file, or what the
 * policy decides for the pool; *source names where they came from. NULL
 * having said why. */
static char **why_rules(struct sbx_config *c, const struct why_opts *o, char **source)
{
    cleanup_error sbx_error_t *err = NULL;
    struct stat st;
    char **rules = NULL;

    if (o->task != NULL) {
        cleanup_free char *state = sbx_state_dir(c->state_dir, &err);

        if (!id_ok(o->task)) {
            fprintf(stderr, "sbx: error: egress why: --task '%s' is not a task id\n", o->task);
            return NULL;
        }
        if (state != NULL) {
            *source = xasprintf("%s/tasks/%s/egress.rules", state, o->task);
            if (stat(*source, &st) < 0) {
                fprintf(stderr, "sbx: error: egress why: task '%s' has no allow-list (%s)\n",
                        o->task, *source);
                return NULL;
            }
            rules = read_rules_file(*source, &err);
        }
    }
    else if (o->policy != NULL && stat(o->policy, &st) == 0 && !S_ISDIR(st.st_mode)) {
        *source = xstrdup(o->policy);
        rules = read_rules_file(*source, &err);
    }
    else {
        rules = policy_rules(c, o->policy, o->pool != NULL ? o->pool : "agent", source, &err);
    }
    if (rules == NULL) {
        sbx_cli_print_error(err);
    }
    return rules;
}

int sbx_cmd_egress(struct sbx_cli *cli, int argc, char **argv)
{
    struct why_opts o = {0};
    cleanup_free char *source = NULL;
    struct sbx_config *c;
    char **rules;
    int rc;

    if (why_parse(argc, argv, &o) < 0) {
        return SBX_EXIT_USAGE;
    }
    c = sbx_cli_config(cli);
    if (c == NULL) {
        return SBX_EXIT_USAGE;
    }
    rules = why_rules(c, &o, &source);
    if (rules == NULL) {
        return SBX_EXIT_USAGE;
    }
    rc = explain(c, argv[optind + 1], rules, source, o.json);
    strv_free(rules);
    return rc;
}
