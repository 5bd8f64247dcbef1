/* infisical_config.c - cred_infisical options: validation, the machine
 * identity's client id and secret, and the secrets path of a task. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "infisical.h"

#define INF_SECRET_FILE_MAX 4096

const struct sbx_option inf_options[] = {
    {"url", SBX_OPT_STRING, NULL, 1, "Infisical base URL (cloud or self-hosted)"},
    {"client_id_env", SBX_OPT_STRING, "INFISICAL_CLIENT_ID", 0,
     "environment variable holding the Universal Auth client id"},
    {"client_secret_env", SBX_OPT_STRING, NULL, 0,
     "environment variable holding the Universal Auth client secret"},
    {"client_secret_file", SBX_OPT_STRING, NULL, 0,
     "file holding the client secret (mode 0600 or 0400, owned by sbx's user)"},
    {"project", SBX_OPT_STRING, NULL, 1, "project id"},
    {"environment", SBX_OPT_STRING, NULL, 1, "environment slug (dev, staging, prod, ...)"},
    {"path", SBX_OPT_STRING, "/clients/{client}/{pool}", 0,
     "secrets path of a task; {client} (the API client), {pool} (ci or agent), {task} and "
     "{job} are replaced"},
    {"timeout", SBX_OPT_DURATION, "30s", 0, "time limit of each call to Infisical"},
    {"renew_before", SBX_OPT_DURATION, "60s", 0,
     "renew the access token this long before it expires (at most a third of its TTL)"},
    {"login_cooldown", SBX_OPT_DURATION, "30s", 0,
     "after a rejected login, refuse new logins this long (Infisical locks an identity "
     "after 3 failures in 30 s)"},
    {"lockout_wait", SBX_OPT_DURATION, "300s", 0,
     "after a lockout reply, refuse new logins this long"},
    {"include_imports", SBX_OPT_BOOL, "true", 0, "include secrets imported into the path"},
    SBX_OPTIONS_END,
};

static char *dup_opt(const struct sbx_host_api *host, const struct sbx_options *opts,
                     const char *key)
{
    const char *v = host->opt_string(opts, key);

    return v ? strdup(v) : NULL;
}

static int valid_env_name(const char *s)
{
    if (s == NULL || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) {
        return 0;
    }
    for (; *s; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_')) {
            return 0;
        }
    }
    return 1;
}

static int valid_id(const char *s)
{
    if (s == NULL || s[0] == '\0' || strcmp(s, ".") == 0 || strcmp(s, "..") == 0 ||
        strlen(s) > 200) {
        return 0;
    }
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
           strlen(s);
}

static int valid_path(const char *s)
{
    if (s == NULL || s[0] != '/' || strstr(s, "/../") != NULL || strstr(s, "//") != NULL) {
        return 0;
    }
    if (strlen(s) >= 3 && strcmp(s + strlen(s) - 3, "/..") == 0) {
        return 0;
    }
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f || *p == '?' || *p == '#') {
            return 0;
        }
    }
    return 1;
}

/* The placeholders of the path template, with the scope field each takes
 * (indexed by the field). */
enum inf_field { INF_CLIENT, INF_POOL, INF_TASK, INF_JOB };

static const struct {
    const char *name; /* with its braces */
    const char *what; /* for errors */
    enum inf_field field;
} inf_placeholders[] = {
    {"{client}", "client", INF_CLIENT},
    {"{pool}", "pool", INF_POOL},
    {"{task}", "task id", INF_TASK},
    {"{job}", "job id", INF_JOB},
};

#define INF_PLACEHOLDER_NAMES "{client}, {pool}, {task}, {job}"

static const char *field_value(const struct sbx_cred_scope *scope, enum inf_field f)
{
    switch (f) {
    case INF_TASK:
        return scope->task_id;
    case INF_JOB:
        return scope->job_id;
    case INF_CLIENT:
        return scope->client;
    case INF_POOL:
        return scope->pool;
    }
    return NULL;
}

/* Why a scope's value cannot fill placeholder f (value NULL, empty or not an id). */
static int bad_value(const struct sbx_host_api *host, const char *where, enum inf_field f,
                     const char *v, sbx_error_t **err)
{
    if (v == NULL || v[0] == '\0') {
        return host->error_set(err, SBX_E_USAGE, "%s: path uses %s but the task has no %s", where,
                               inf_placeholders[f].name,
                               f == INF_JOB ? "job" : inf_placeholders[f].what);
    }
    return host->error_set(err, SBX_E_USAGE,
                           "%s: %s '%.80s' cannot be used in a secrets path (letters, digits, "
                           "'.', '_', '-')",
                           where, inf_placeholders[f].what, v);
}

/* Expands the template's placeholders with the scope's values; NULL with
 * *err on an unknown placeholder (SBX_E_CONFIG) or a missing or unusable
 * value (SBX_E_USAGE). Every value is an id (valid_id): no '/', no "..". */
static char *expand(const struct sbx_host_api *host, const char *tpl,
                    const struct sbx_cred_scope *scope, const char *where, sbx_error_t **err)
{
    size_t cap = strlen(tpl) + 1;
    char *out;
    size_t n = 0;

    for (size_t i = 0; i < sizeof(inf_placeholders) / sizeof(inf_placeholders[0]); i++) {
        const char *v = field_value(scope, inf_placeholders[i].field);

        cap += strlen(tpl) * (v != NULL ? strlen(v) : 0); /* every char replaced, at worst */
    }
    out = xcalloc(1, cap);
    for (const char *p = tpl; *p;) {
        const char *val = NULL;

        for (size_t i = 0;
             val == NULL && *p == '{' && i < sizeof(inf_placeholders) / sizeof(inf_placeholders[0]);
             i++) {
            size_t l = strlen(inf_placeholders[i].name);

            if (strncmp(p, inf_placeholders[i].name, l) == 0) {
                val = field_value(scope, inf_placeholders[i].field);
                if (!valid_id(val)) {
                    bad_value(host, where, inf_placeholders[i].field, val, err);
                    free(out);
                    return NULL;
                }
                p += l;
            }
        }
        if (val == NULL && (*p == '{' || *p == '}')) {
            size_t l = strcspn(p + 1, "{}/");

            host->error_set(err, SBX_E_CONFIG,
                            "%s: path '%s': unknown placeholder '%.*s' (use " INF_PLACEHOLDER_NAMES
                            ")",
                            where, tpl, (int)(l > 40 ? 40 : l) + (p[1 + l] == '}' ? 2 : 1), p);
            free(out);
            return NULL;
        }
        if (val != NULL) {
            size_t l = strlen(val);

            memcpy(out + n, val, l);
            n += l;
        }
        else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
    return out;
}

int inf_config_check_secret_file(const char *path, const char *where,
                                 const struct sbx_host_api *host, sbx_error_t **err)
{
    struct stat st;

    if (lstat(path, &st) < 0) {
        return host->error_set(err, SBX_E_CONFIG, "%s: client_secret_file '%s': %s", where, path,
                               strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: client_secret_file '%s' is not a regular "
                               "file",
                               where, path);
    }
    if (st.st_uid != geteuid()) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: client_secret_file '%s' is owned by uid %u, "
                               "not by sbx's user (uid %u)",
                               where, path, (unsigned)st.st_uid, (unsigned)geteuid());
    }
    if ((st.st_mode & 077) != 0) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: client_secret_file '%s' is readable or "
                               "writable by others (mode %04o); it must be readable by its owner "
                               "only: chmod 600 '%s'",
                               where, path, (unsigned)(st.st_mode & 07777), path);
    }
    return 0;
}

int inf_config_init(struct inf_config *cfg, const struct sbx_host_api *host,
                    const struct sbx_options *opts, sbx_error_t **err)
{
    char *probe;

    memset(cfg, 0, sizeof(*cfg));
    cfg->url = dup_opt(host, opts, "url");
    cfg->client_id_env = dup_opt(host, opts, "client_id_env");
    cfg->client_secret_env = dup_opt(host, opts, "client_secret_env");
    cfg->client_secret_file = dup_opt(host, opts, "client_secret_file");
    cfg->project = dup_opt(host, opts, "project");
    cfg->environment = dup_opt(host, opts, "environment");
    cfg->path = dup_opt(host, opts, "path");
    cfg->timeout_ms = (long)host->opt_int(opts, "timeout") * 1000L;
    cfg->renew_before = host->opt_int(opts, "renew_before");
    cfg->login_cooldown = host->opt_int(opts, "login_cooldown");
    cfg->lockout_wait = host->opt_int(opts, "lockout_wait");
    cfg->include_imports = host->opt_bool(opts, "include_imports");

    /* parsed by libcurl's URL API, as the requests will be */
    if (cfg->url == NULL || !sbx_url_is_http_base(cfg->url) ||
        strpbrk(cfg->url, " ?#\"\\") != NULL) {
        host->error_set(err, SBX_E_CONFIG, "%s: url '%s' must be an http:// or https:// base URL",
                        host->opt_where(opts, "url"), cfg->url ? cfg->url : "");
        goto fail;
    }
    while (strlen(cfg->url) > 8 && cfg->url[strlen(cfg->url) - 1] == '/') {
        cfg->url[strlen(cfg->url) - 1] = '\0';
    }
    /* the host itself, not a prefix: http://127.0.0.1.evil.example is remote */
    if (strncasecmp(cfg->url, "http://", 7) == 0 && !sbx_url_is_loopback(cfg->url)) {
        host->log(host->instance_name(opts), SBX_LOG_WARN,
                  "%s: url '%s' is plain http: the "
                  "client secret and the tokens would cross the network unencrypted",
                  host->opt_where(opts, "url"), cfg->url);
    }
    if (!valid_env_name(cfg->client_id_env)) {
        host->error_set(err, SBX_E_CONFIG,
                        "%s: client_id_env '%s' is not an environment "
                        "variable name",
                        host->opt_where(opts, "client_id_env"),
                        cfg->client_id_env ? cfg->client_id_env : "");
        goto fail;
    }
    if ((cfg->client_secret_env == NULL) == (cfg->client_secret_file == NULL)) {
        host->error_set(err, SBX_E_CONFIG,
                        "%s: set exactly one of client_secret_env and "
                        "client_secret_file",
                        host->instance_name(opts));
        goto fail;
    }
    if (cfg->client_secret_env != NULL && !valid_env_name(cfg->client_secret_env)) {
        host->error_set(err, SBX_E_CONFIG,
                        "%s: client_secret_env '%s' is not an environment "
                        "variable name",
                        host->opt_where(opts, "client_secret_env"), cfg->client_secret_env);
        goto fail;
    }
    if (cfg->client_secret_file != NULL &&
        inf_config_check_secret_file(cfg->client_secret_file,
                                     host->opt_where(opts, "client_secret_file"), host, err) < 0) {
        goto fail;
    }
    if (cfg->project[0] == '\0' || cfg->environment[0] == '\0') {
        host->error_set(err, SBX_E_CONFIG, "%s: project and environment must not be empty",
                        host->instance_name(opts));
        goto fail;
    }
    {
        const struct sbx_cred_scope sample = {
            .task_id = "task", .job_id = "job", .client = "client", .pool = "ci"};

        char where[512];

        /* FILE:LINE: credentials.NAME, the key's place */
        snprintf(where, sizeof(where), "%s: credentials.%s", host->opt_where(opts, "path"),
                 host->instance_name(opts));
        probe = expand(host, cfg->path, &sample, where, err);
    }
    if (probe == NULL) {
        goto fail;
    }
    if (!valid_path(probe)) {
        host->error_set(err, SBX_E_CONFIG,
                        "%s: path '%s' must be an absolute secrets path "
                        "without '..', '//', '?' or '#'",
                        host->opt_where(opts, "path"), cfg->path);
        free(probe);
        goto fail;
    }
    free(probe);
    if (strstr(cfg->path, "{client}") == NULL) {
        host->log(host->instance_name(opts), SBX_LOG_WARN,
                  "%s: path '%s' has no {client}: every client that may use this instance "
                  "reads the same secrets paths (give each client its own instance, "
                  "runner.clients[].credentials; docs/credentials.md, The model)",
                  host->opt_where(opts, "path"), cfg->path);
    }
    if (cfg->timeout_ms <= 0) {
        host->error_set(err, SBX_E_CONFIG, "%s: timeout must be at least 1s",
                        host->opt_where(opts, "timeout"));
        goto fail;
    }
    return 0;

fail:
    inf_config_fini(cfg);
    return -1;
}

void inf_config_fini(struct inf_config *cfg)
{
    free(cfg->url);
    free(cfg->client_id_env);
    free(cfg->client_secret_env);
    free(cfg->client_secret_file);
    free(cfg->project);
    free(cfg->environment);
    free(cfg->path);
    memset(cfg, 0, sizeof(*cfg));
}

void inf_secret_free(const struct sbx_host_api *host, char *s)
{
    if (s != NULL) {
        host->secret_zero(s, strlen(s));
        free(s);
    }
}

static char *read_secret_file(const struct inf_config *cfg, const struct sbx_host_api *host,
                              sbx_error_t **err)
{
    char *buf;
    ssize_t n;
    size_t len = 0;
    int fd;

    /* checked again at each use: the file may have changed since init */
    if (inf_config_check_secret_file(cfg->client_secret_file, "cred_infisical", host, err) < 0) {
        return NULL;
    }
    fd = open(cfg->client_secret_file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        host->error_set(err, SBX_E_CONFIG, "client_secret_file '%s': %s", cfg->client_secret_file,
                        strerror(errno));
        return NULL;
    }
    buf = xcalloc(1, INF_SECRET_FILE_MAX + 1);
    while ((n = read(fd, buf + len, INF_SECRET_FILE_MAX + 1 - len)) > 0) {
        len += (size_t)n;
        if (len > INF_SECRET_FILE_MAX) {
            break;
        }
    }
    close(fd);
    if (n < 0 || len > INF_SECRET_FILE_MAX) {
        host->error_set(err, SBX_E_CONFIG, "client_secret_file '%s': %s", cfg->client_secret_file,
                        n < 0 ? strerror(errno) : "larger than 4096 bytes");
        host->secret_zero(buf, INF_SECRET_FILE_MAX + 1);
        free(buf);
        return NULL;
    }
    while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' ' ||
                       buf[len - 1] == '\t')) {
        buf[--len] = '\0';
    }
    if (len == 0 || memchr(buf, '\0', len) != NULL) {
        host->error_set(err, SBX_E_CONFIG, "client_secret_file '%s' is empty or not text",
                        cfg->client_secret_file);
        host->secret_zero(buf, INF_SECRET_FILE_MAX + 1);
        free(buf);
        return NULL;
    }
    return buf;
}

int inf_config_read_identity(const struct inf_config *cfg, const struct sbx_host_api *host,
                             char **client_id, char **client_secret, sbx_error_t **err)
{
    const char *id = getenv(cfg->client_id_env);
    const char *secret;

    *client_id = NULL;
    *client_secret = NULL;
    if (id == NULL || id[0] == '\0') {
        return host->error_set(err, SBX_E_CONFIG,
                               "client_id_env: environment variable %s is not "
                               "set",
                               cfg->client_id_env);
    }
    if (cfg->client_secret_env != NULL) {
        secret = getenv(cfg->client_secret_env);
        if (secret == NULL || secret[0] == '\0') {
            return host->error_set(err, SBX_E_CONFIG,
                                   "client_secret_env: environment variable "
                                   "%s is not set",
                                   cfg->client_secret_env);
        }
        *client_secret = xstrdup(secret);
    }
    else {
        *client_secret = read_secret_file(cfg, host, err);
        if (*client_secret == NULL) {
            return -1;
        }
    }
    *client_id = xstrdup(id);
    return 0;
}

char *inf_config_path(const struct inf_config *cfg, const struct sbx_host_api *host,
                      const struct sbx_cred_scope *scope, sbx_error_t **err)
{
    char *p;

    if (scope->path != NULL && scope->path[0] != '\0') {
        p = xstrdup(scope->path);
    }
    else {
        p = expand(host, cfg->path, scope, "cred_infisical", err);
        if (p == NULL) {
            return NULL;
        }
    }
    if (!valid_path(p)) {
        host->error_set(err, SBX_E_USAGE,
                        "cred_infisical: secrets path '%s' must be absolute, "
                        "without '..', '//', '?' or '#'",
                        p);
        free(p);
        return NULL;
    }
    return p;
}
