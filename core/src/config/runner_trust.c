/* runner_trust.c - the runner's trust settings: API clients with their
 * scopes (runner.clients) and the worktree roots (runner.worktree_roots).
 * Tokens are not read here: the runner reads them when it starts. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/runner_trust.h"
#include "util/confine.h"
#include "util/envname.h"
#include "util/xalloc.h"

static const char *const scope_names[] = {
    "submit", "read-own", "read-all", "cancel-any", "metrics", "snapshot", "egress", "exec", NULL};

unsigned sbx_scope_parse(const char *name)
{
    for (unsigned i = 0; scope_names[i] != NULL; i++) {
        if (strcmp(scope_names[i], name) == 0) {
            return 1u << i;
        }
    }
    return 0;
}

const char *sbx_scope_name(unsigned scope)
{
    for (unsigned i = 0; scope_names[i] != NULL; i++) {
        if (scope == 1u << i) {
            return scope_names[i];
        }
    }
    return "?";
}

static int name_ok(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n < 64 &&
           strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

static int bad(sbx_error_t **err, const struct sbx_config *c, const config_setting_t *s,
               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int bad(sbx_error_t **err, const struct sbx_config *c, const config_setting_t *s,
               const char *fmt, ...)
{
    char *where = sbx_config_where(c, s);
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sbx_error_set(err, SBX_E_CONFIG, "%s: %s", where, msg);
    free(where);
    return -1;
}

static int read_client(struct sbx_config *c, const config_setting_t *e,
                       struct sbx_runner_client *cl, sbx_error_t **err)
{
    const char *name = NULL, *tenv = NULL, *tfile = NULL;
    const config_setting_t *scopes = config_setting_get_member(e, "scopes");

    config_setting_lookup_string(e, "name", &name);
    config_setting_lookup_string(e, "token_env", &tenv);
    config_setting_lookup_string(e, "token_file", &tfile);
    cl->where = sbx_config_where(c, e);
    if (name == NULL || !name_ok(name)) {
        return bad(err, c, e, "runner.clients: 'name' %s%s", name ? name : "is missing",
                   name ? " must be 1-63 of [A-Za-z0-9._-]" : " (1-63 of [A-Za-z0-9._-])");
    }
    if (strcmp(name, "default") == 0) {
        return bad(err, c, e, "runner.clients '%s': the name is reserved (%s)", name,
                   "'default' is runner.token_env");
    }
    cl->name = xstrdup(name);
    if (strcmp(name, "local") == 0) {
        /* (added) the unix socket's scopes: no token, the socket's
         * permissions decide who connects */
        if (tenv != NULL || tfile != NULL) {
            return bad(err, c, e,
                       "runner.clients 'local': the unix socket's client takes no token_env or "
                       "token_file (the socket's permissions decide who connects)");
        }
    }
    else if ((tenv == NULL) == (tfile == NULL)) {
        return bad(err, c, e, "runner.clients '%s': give exactly one of token_env or token_file%s",
                   name, " (the token is never in the configuration)");
    }
    if (tenv != NULL && !sbx_env_name_valid(tenv, strlen(tenv))) {
        return bad(err, c, config_setting_get_member(e, "token_env"),
                   "runner.clients '%s': token_env '%s' is not a variable name", name, tenv);
    }
    if (tfile != NULL && tfile[0] != '/') {
        return bad(err, c, config_setting_get_member(e, "token_file"),
                   "runner.clients '%s': token_file '%s' must be an absolute path", name, tfile);
    }
    cl->token_env = tenv ? xstrdup(tenv) : NULL;
    cl->token_file = tfile ? xstrdup(tfile) : NULL;
    if (scopes == NULL || config_setting_length(scopes) == 0) {
        return bad(err, c, e, "runner.clients '%s': 'scopes' is missing or empty (%s)", name,
                   SBX_SCOPE_NAMES);
    }
    for (int i = 0; i < config_setting_length(scopes); i++) {
        const char *sn = config_setting_get_string_elem(scopes, i);
        unsigned bit = sbx_scope_parse(sn);

        if (bit == 0) {
            char what[160];

            snprintf(what, sizeof(what), "runner.clients '%.63s': unknown scope", name);
            return bad(err, c, config_setting_get_elem(scopes, (unsigned)i),
                       "%s '%s' (scopes: " SBX_SCOPE_NAMES ")", what, sn);
        }
        cl->scopes |= bit;
    }
    {
        const config_setting_t *creds = config_setting_get_member(e, "credentials");
        int nc = creds ? config_setting_length(creds) : 0;

        if (creds == NULL) {
            return 0;
        }
        cl->credentials = xcalloc((size_t)nc + 1, sizeof(char *));
        for (int i = 0; i < nc; i++) {
            const char *cn = config_setting_get_string_elem(creds, i);

            if (cn == NULL || !name_ok(cn)) {
                return bad(err, c, config_setting_get_elem(creds, (unsigned)i),
                           "runner.clients '%.63s': credentials: '%s' is not an instance name",
                           name, cn ? cn : "(not a string)");
            }
            cl->credentials[i] = xstrdup(cn);
        }
    }
    return 0;
}

int sbx_config_read_runner_clients(struct sbx_config *c, const config_setting_t *list,
                                   sbx_error_t **err)
{
    size_t n = (size_t)config_setting_length(list);

    c->runner.clients = xcalloc(n ? n : 1, sizeof(*c->runner.clients));
    for (size_t i = 0; i < n; i++) {
        const config_setting_t *e = config_setting_get_elem(list, (unsigned)i);

        c->runner.n_clients = i + 1;
        if (read_client(c, e, &c->runner.clients[i], err) < 0) {
            return -1;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(c->runner.clients[k].name, c->runner.clients[i].name) == 0) {
                return bad(err, c, e, "runner.clients: duplicate name '%s' (first at %s)",
                           c->runner.clients[i].name, c->runner.clients[k].where);
            }
        }
    }
    return 0;
}

int sbx_config_read_worktree_roots(struct sbx_config *c, const config_setting_t *list,
                                   sbx_error_t **err)
{
    size_t n = (size_t)config_setting_length(list);

    c->runner.worktree_roots = xcalloc(n + 1, sizeof(char *));
    c->runner.worktree_roots_where = sbx_config_where(c, list);
    for (size_t i = 0; i < n; i++) {
        const char *root = config_setting_get_string_elem(list, (int)i);
        const char *why = sbx_confine_root_problem(root, c->state_dir);

        c->runner.worktree_roots[i] = xstrdup(root);
        c->runner.n_worktree_roots = i + 1;
        if (why != NULL) {
            return bad(err, c, config_setting_get_elem(list, (unsigned)i),
                       "runner.worktree_roots \"%s\": %s (a worktree root may not be there)", root,
                       why);
        }
    }
    return 0;
}

void sbx_config_clear_runner_trust(struct sbx_config *c)
{
    for (size_t i = 0; i < c->runner.n_clients; i++) {
        free(c->runner.clients[i].name);
        free(c->runner.clients[i].token_env);
        free(c->runner.clients[i].token_file);
        free(c->runner.clients[i].where);
        for (size_t k = 0; c->runner.clients[i].credentials && c->runner.clients[i].credentials[k];
             k++) {
            free(c->runner.clients[i].credentials[k]);
        }
        free(c->runner.clients[i].credentials);
    }
    free(c->runner.clients);
    for (size_t i = 0; i < c->runner.n_worktree_roots; i++) {
        free(c->runner.worktree_roots[i]);
    }
    free(c->runner.worktree_roots);
    free(c->runner.worktree_roots_where);
}
