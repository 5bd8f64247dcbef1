/* auth.c - the runner's API clients (docs/api.md, "Clients and scopes"):
 * their tokens, read at start from the environment or a file (never from the
 * configuration, never logged), and who a request is. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/auth.h"
#include "config/config.h"
#include "util/xalloc.h"

#define TOKEN_MAX 4096

/* A TCP client: who it is, and its token (never logged, never out of here). */
struct auth_entry {
    struct runner_client who;
    char *token;
    size_t token_len;
};

struct runner_auth {
    const struct sbx_config *cfg;
    struct auth_entry *clients; /* TCP clients */
    size_t n_clients;
    struct runner_client local; /* the unix socket's client */
};

/* The unix socket: local root and the socket's group, with the scopes of the
 * "local" entry of runner.clients, every scope without one (runner_clients_load). */
const struct runner_client *runner_local_client(const struct runner_auth *a)
{
    return &a->local;
}

size_t runner_auth_n_clients(const struct runner_auth *a)
{
    return a->n_clients;
}

/* A token is printable ASCII without spaces (it travels in a header). */
static int token_ok(const char *t, size_t n)
{
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (t[i] <= ' ' || t[i] > '~') {
            return 0;
        }
    }
    return 1;
}

static int read_token_file(const struct sbx_runner_client *c, char **out, sbx_error_t **err)
{
    int fd = open(c->token_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    char buf[TOKEN_MAX + 1];
    ssize_t n;

    if (fd < 0) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: runner.clients '%s': token_file %s: %s",
                             c->where, c->name, c->token_file, strerror(errno));
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: runner.clients '%s': token_file %s is not a regular file",
                             c->where, c->name, c->token_file);
    }
    if ((st.st_mode & 077) != 0) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: runner.clients '%s': token_file %s is readable or writable by "
                             "its group or others (mode %04o): chmod 600 it",
                             c->where, c->name, c->token_file, (unsigned)(st.st_mode & 07777));
    }
    if (st.st_uid != geteuid() && st.st_uid != 0) {
        close(fd);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: runner.clients '%s': token_file %s is owned by uid %u, neither "
                             "root nor the runner's user",
                             c->where, c->name, c->token_file, (unsigned)st.st_uid);
    }
    n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n < 0 || n > TOKEN_MAX) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: runner.clients '%s': token_file %s: %s",
                             c->where, c->name, c->token_file,
                             n < 0 ? strerror(errno) : "over 4096 bytes");
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        n--;
    }
    if (!token_ok(buf, (size_t)n)) {
        explicit_bzero(buf, sizeof(buf));
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: runner.clients '%s': token_file %s must hold one token "
                             "(printable ASCII, no spaces) and a newline at most",
                             c->where, c->name, c->token_file);
    }
    *out = xstrndup(buf, (size_t)n);
    explicit_bzero(buf, sizeof(buf));
    return 0;
}

static int add_client(struct runner_auth *a, const char *name, const char *where, const char *token,
                      unsigned scopes, sbx_error_t **err)
{
    struct auth_entry *c;

    for (size_t i = 0; i < a->n_clients; i++) {
        if (strcmp(a->clients[i].token, token) == 0) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: runner.clients '%s': the same token as client '%s' (each "
                                 "client needs its own)",
                                 where, name, a->clients[i].who.name);
        }
    }
    a->clients = xrealloc(a->clients, (a->n_clients + 1) * sizeof(*a->clients));
    c = &a->clients[a->n_clients++];
    memset(c, 0, sizeof(*c));
    snprintf(c->who.name, sizeof(c->who.name), "%s", name);
    c->token = xstrdup(token);
    c->token_len = strlen(token);
    c->who.scopes = scopes;
    return 0;
}

static int load(struct runner_auth *a, sbx_error_t **err)
{
    const struct sbx_config *cfg = a->cfg;

    snprintf(a->local.name, sizeof(a->local.name), "local");
    a->local.scopes = SBX_SCOPE_ALL;
    /* runner.token_env alone: one client, every scope (as before clients) */
    if (cfg->runner.token_env != NULL) {
        const char *tok = getenv(cfg->runner.token_env);

        if (tok != NULL && tok[0] != '\0') {
            if (!token_ok(tok, strlen(tok))) {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "runner.token_env: the variable %s must hold printable "
                                     "ASCII without spaces",
                                     cfg->runner.token_env);
            }
            if (add_client(a, "default", "runner.token_env", tok, SBX_SCOPE_ALL, err) < 0) {
                return -1;
            }
        }
        else if (cfg->runner.n_clients > 0) {
            return sbx_error_set(err, SBX_E_CONFIG, "runner.token_env: the variable %s is not set",
                                 cfg->runner.token_env);
        }
    }
    for (size_t i = 0; i < cfg->runner.n_clients; i++) {
        const struct sbx_runner_client *c = &cfg->runner.clients[i];
        char *tok = NULL;
        int rc;

        if (strcmp(c->name, "local") == 0) { /* (added) the unix socket's scopes */
            a->local.scopes = c->scopes;
            continue;
        }
        if (c->token_env != NULL) {
            const char *v = getenv(c->token_env);

            if (v == NULL || v[0] == '\0') {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s: runner.clients '%s': token_env %s is not set", c->where,
                                     c->name, c->token_env);
            }
            if (!token_ok(v, strlen(v))) {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s: runner.clients '%s': token_env %s must hold printable "
                                     "ASCII without spaces",
                                     c->where, c->name, c->token_env);
            }
            tok = xstrdup(v);
        }
        else if (read_token_file(c, &tok, err) < 0) {
            return -1;
        }
        rc = add_client(a, c->name, c->where, tok, c->scopes, err);
        explicit_bzero(tok, strlen(tok));
        free(tok);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

struct runner_auth *runner_clients_load(const struct sbx_config *cfg, sbx_error_t **err)
{
    struct runner_auth *a = xcalloc(1, sizeof(*a));

    a->cfg = cfg;
    if (load(a, err) < 0) {
        runner_clients_free(a);
        return NULL;
    }
    return a;
}

void runner_clients_free(struct runner_auth *a)
{
    if (a == NULL) {
        return;
    }
    for (size_t i = 0; i < a->n_clients; i++) {
        explicit_bzero(a->clients[i].token, a->clients[i].token_len);
        free(a->clients[i].token);
    }
    free(a->clients);
    free(a);
}

/* Equal in time independent of where they differ. */
static int ct_equal(const char *a, size_t an, const char *b, size_t bn)
{
    unsigned char d = an != bn;
    size_t n = an < bn ? an : bn;

    for (size_t i = 0; i < n; i++) {
        d |= (unsigned char)(a[i] ^ b[i]);
    }
    return d == 0;
}

const struct runner_client *runner_authenticate(const struct runner_auth *a, const char *authz)
{
    const struct runner_client *who = NULL;
    size_t n;

    if (authz == NULL || strncmp(authz, "Bearer ", 7) != 0) {
        return NULL;
    }
    authz += 7;
    n = strlen(authz);
    /* every client is compared, whichever matches */
    for (size_t i = 0; i < a->n_clients; i++) {
        if (ct_equal(authz, n, a->clients[i].token, a->clients[i].token_len)) {
            who = &a->clients[i].who;
        }
    }
    return who;
}

int runner_may_read(const struct runner_client *who, const char *owner)
{
    return (who->scopes & SBX_SCOPE_READ_ALL) != 0 ||
           ((who->scopes & SBX_SCOPE_READ_OWN) != 0 && owner != NULL &&
            strcmp(owner, who->name) == 0);
}

int runner_may_cancel(const struct runner_client *who, const char *owner)
{
    return (who->scopes & SBX_SCOPE_CANCEL_ANY) != 0 ||
           (owner != NULL && strcmp(owner, who->name) == 0);
}

int runner_may_use_credentials(const struct runner_auth *a, const char *client, const char *name)
{
    const struct sbx_config *cfg = a->cfg;

    if (strcmp(client, "default") == 0) { /* runner.token_env: every scope, every instance */
        return 1;
    }
    for (size_t i = 0; i < cfg->runner.n_clients; i++) {
        const struct sbx_runner_client *c = &cfg->runner.clients[i];

        if (strcmp(c->name, client) != 0) {
            continue;
        }
        for (size_t k = 0; c->credentials != NULL && c->credentials[k] != NULL; k++) {
            if (strcmp(c->credentials[k], name) == 0) {
                return 1;
            }
        }
        return 0;
    }
    return strcmp(client, "local") == 0; /* the unix socket without a `local` entry */
}
