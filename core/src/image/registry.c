/* registry.c - the configured image registry and its credentials (registry.h). */
#include "image/registry.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cred/session.h"
#include "util/xalloc.h"

#define REG_CONFIG_MAX (1024 * 1024) /* a Docker client config.json read at most */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

char *sbx_base64(const unsigned char *d, size_t len, int url)
{
    const char *a = url ? b64url : b64;
    char *out = xmalloc(4 * ((len + 2) / 3) + 1);
    size_t o = 0;

    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)d[i] << 16;

        v |= i + 1 < len ? (unsigned)d[i + 1] << 8 : 0;
        v |= i + 2 < len ? d[i + 2] : 0;
        out[o++] = a[(v >> 18) & 63];
        out[o++] = a[(v >> 12) & 63];
        out[o++] = i + 1 < len ? a[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? a[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_val(char ch)
{
    const char *p = ch ? strchr(b64, ch) : NULL;

    return p ? (int)(p - b64) : -1;
}

char *sbx_base64_decode(const char *t, size_t *len)
{
    size_t n = strlen(t);
    char *out;
    size_t o = 0;

    while (n > 0 && t[n - 1] == '=') {
        n--;
    }
    out = xmalloc(n * 3 / 4 + 4);
    for (size_t i = 0; i < n; i += 4) {
        int v[4] = {0, 0, 0, 0};
        size_t k;

        for (k = 0; k < 4 && i + k < n; k++) {
            if ((v[k] = b64_val(t[i + k])) < 0) {
                free(out);
                return NULL;
            }
        }
        if (k == 1) {
            free(out);
            return NULL;
        }
        out[o++] = (char)((v[0] << 2) | (v[1] >> 4));
        if (k > 2) {
            out[o++] = (char)(((v[1] & 15) << 4) | (v[2] >> 2));
        }
        if (k > 3) {
            out[o++] = (char)(((v[2] & 3) << 6) | v[3]);
        }
    }
    out[o] = '\0';
    if (len != NULL) {
        *len = o;
    }
    return out;
}

/* Reads up to max bytes of path; -1 when it cannot be read or is larger. */
static int read_small(const char *path, size_t max, char **text, size_t *len)
{
    FILE *f = fopen(path, "re");
    char *buf;
    size_t n;

    if (f == NULL) {
        return -1;
    }
    buf = xmalloc(max + 1);
    n = fread(buf, 1, max + 1, f);
    fclose(f);
    if (n > max) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

static int fail(char *why, size_t size, const char *msg)
{
    snprintf(why, size, "%s", msg);
    return -1;
}

int sbx_registry_parse(const char *url, struct sbx_registry *out, char *why, size_t size)
{
    const char *h;
    const char *slash;
    const char *colon;
    size_t hl;

    memset(out, 0, sizeof(*out));
    if (url == NULL || *url == '\0') {
        return fail(why, size, "is empty");
    }
    if (strncmp(url, "http://", 7) == 0) {
        return fail(why, size, "must start with https:// (the engine talks TLS to a registry)");
    }
    if (strncmp(url, "https://", 8) != 0) {
        return fail(why, size,
                    "must start with https:// (https://HOST[:PORT]/PATH, e.g. "
                    "https://127.0.0.1:5443/team/sbx-sandbox)");
    }
    h = url + 8;
    slash = strchr(h, '/');
    if (slash == NULL || slash[1] == '\0') {
        return fail(why, size, "has no repository path (https://HOST[:PORT]/PATH)");
    }
    hl = (size_t)(slash - h);
    if (memchr(h, '@', hl) != NULL) {
        return fail(why, size,
                    "holds credentials: they come from image_registry.credential or the "
                    "engine's login, never from the configuration file");
    }
    if (hl == 0 || hl >= sizeof(out->host)) {
        return fail(why, size, "has no host");
    }
    colon = memchr(h, ':', hl);
    for (const char *p = h; p < (colon ? colon : slash); p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.')) {
            return fail(why, size, "has a bad host (lower-case letters, digits, '-', '.')");
        }
    }
    if (colon == h) {
        return fail(why, size, "has no host");
    }
    if (colon != NULL) {
        long port = 0;
        const char *p = colon + 1;

        if (p == slash) {
            return fail(why, size, "has an empty port");
        }
        for (; p < slash; p++) {
            if (*p < '0' || *p > '9' || port > 65535) {
                return fail(why, size, "has a bad port (1 to 65535)");
            }
            port = port * 10 + (*p - '0');
        }
        if (port < 1 || port > 65535) {
            return fail(why, size, "has a bad port (1 to 65535)");
        }
    }
    /* the path: Docker's repository name rules, lower case */
    for (const char *p = slash + 1; *p; p++) {
        int sep = *p == '/' || *p == '.' || *p == '_' || *p == '-';

        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || sep) ||
            (sep &&
             (p[1] == '\0' || p[-1] == '/' || p[-1] == '.' || p[-1] == '_' || p[-1] == '-'))) {
            return fail(why, size,
                        "has a bad repository path (lower-case letters and digits, parts "
                        "separated by '/', '.', '_' or '-'; no query, tag or digest)");
        }
    }
    if (strlen(url) - 8 >= sizeof(out->repo) - 80) {
        return fail(why, size, "is too long");
    }
    snprintf(out->host, sizeof(out->host), "%.*s", (int)hl, h);
    snprintf(out->repo, sizeof(out->repo), "%s", h);
    return 0;
}

int sbx_registry_from_config(const struct sbx_config *c, struct sbx_registry *out,
                             sbx_error_t **err)
{
    char why[256];

    if (c->image_registry.url == NULL) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: 'image_registry.url' is not set: no registry to push to or "
                             "pull from (docs/image.md, \"Publishing and pulling\")",
                             c->path ? c->path : "the configuration");
    }
    if (sbx_registry_parse(c->image_registry.url, out, why, sizeof(why)) < 0) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: 'image_registry.url' %s",
                             c->path ? c->path : "the configuration", why);
    }
    return 0;
}

/* The engine's X-Registry-Auth for a login at server. */
static char *auth_value(const struct sbx_registry_login *l, const char *server)
{
    json_t *o = l->token
                    ? json_pack("{s:s, s:s}", "identitytoken", l->secret, "serveraddress", server)
                    : json_pack("{s:s, s:s, s:s}", "username", l->user, "password", l->secret,
                                "serveraddress", server);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    char *v = NULL;

    json_decref(o);
    if (text != NULL) {
        v = sbx_base64((const unsigned char *)text, strlen(text), 1);
        memset(text, 0, strlen(text));
        free(text);
    }
    return v;
}

static void login_set(struct sbx_registry_login *l, const char *user, const char *secret, int token)
{
    l->user = xstrdup(user);
    l->secret = xstrdup(secret);
    l->token = token;
}

static int from_credential(const struct sbx_config *c, const char *plugin_dir,
                           struct sbx_registry_login *l, sbx_error_t **err)
{
    struct sbx_cred_scope scope = {.task_id = "image-registry",
                                   .job_id = "image-registry",
                                   .client = SBX_CRED_CLIENT_LOCAL,
                                   .pool = "ci"};
    struct sbx_cred_session *s =
        sbx_cred_session_open(c, plugin_dir, c->image_registry.credential, &scope, err);
    const struct sbx_kv *kv;
    const char *user = NULL;
    const char *pass = NULL;
    size_t n = 0;
    int r = 0;

    if (s == NULL) {
        sbx_error_wrap(err, "image_registry.credential");
        return -1;
    }
    kv = sbx_cred_session_env(s, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(kv[i].name, c->image_registry.username_key) == 0) {
            user = kv[i].value;
        }
        else if (strcmp(kv[i].name, c->image_registry.password_key) == 0) {
            pass = kv[i].value;
        }
    }
    if (user == NULL || pass == NULL) {
        r = sbx_error_set(err, SBX_E_CONFIG,
                          "image_registry.credential '%s': its lease has no '%s' or no '%s' "
                          "(image_registry.username_key, image_registry.password_key)",
                          c->image_registry.credential, c->image_registry.username_key,
                          c->image_registry.password_key);
    }
    else {
        login_set(l, user, pass, 0);
    }
    sbx_cred_session_close(s, NULL);
    return r;
}

/* A credential helper's login (credhelper.c): its Username "<token>" means
 * the Secret is an identity token, as the Docker client takes it. */
static int from_helper(const char *name, const char *host, const char *path,
                       struct sbx_registry_login *l, sbx_error_t **err)
{
    char *user = NULL;
    char *secret = NULL;

    if (sbx_credhelper_get(name, host, &user, &secret, path, err) < 0) {
        return -1;
    }
    if (user != NULL && secret != NULL) {
        l->token = strcmp(user, "<token>") == 0;
        l->user = user;
        l->secret = secret;
    }
    return 0;
}

/* The Docker client's login for host: credHelpers["HOST"], else credsStore
 * (a credential helper, run as the client runs it), else auths["HOST"] or
 * auths["https://HOST"], its "auth" (base64 of user:password) or
 * "identitytoken". No login and no error: none. */
static int from_docker_login(const char *host, struct sbx_registry_login *l, const char **source,
                             sbx_error_t **err)
{
    const char *dir = getenv("DOCKER_CONFIG");
    const char *home = getenv("HOME");
    char *path = dir && *dir ? xasprintf("%s/config.json", dir)
                             : xasprintf("%s/.docker/config.json", home ? home : "/root");
    char *text = NULL;
    size_t len = 0;
    json_t *root;
    json_t *entry;
    json_t *helper;
    char key[300];
    int r = 0;

    if (read_small(path, REG_CONFIG_MAX, &text, &len) < 0) {
        free(path);
        return 0; /* no login */
    }
    root = json_loadb(text, len, 0, NULL);
    memset(text, 0, len);
    free(text);
    if (root == NULL) {
        r = sbx_error_set(err, SBX_E_CONFIG, "%s: not JSON (the Docker client's login)", path);
        free(path);
        return r;
    }
    helper = json_object_get(json_object_get(root, "credHelpers"), host);
    if (helper == NULL) {
        helper = json_object_get(root, "credsStore");
    }
    entry = json_object_get(json_object_get(root, "auths"), host);
    if (entry == NULL) {
        snprintf(key, sizeof(key), "https://%s", host);
        entry = json_object_get(json_object_get(root, "auths"), key);
    }
    if (helper != NULL && !json_is_string(helper)) {
        r = sbx_error_set(err, SBX_E_CONFIG, "%s: credsStore/credHelpers.%s must be a string", path,
                          host);
    }
    else if (helper != NULL && json_string_length(helper) > 0) {
        r = from_helper(json_string_value(helper), host, path, l, err);
        *source = "docker login (credential helper)";
    }
    if (r < 0 || l->secret != NULL) {
        /* done: the helper's login, or its error */
    }
    else if (json_string_value(json_object_get(entry, "identitytoken")) != NULL) {
        login_set(l, "<token>", json_string_value(json_object_get(entry, "identitytoken")), 1);
        *source = "docker login";
    }
    else if (json_string_value(json_object_get(entry, "auth")) != NULL) {
        char *up = sbx_base64_decode(json_string_value(json_object_get(entry, "auth")), NULL);
        char *colon = up ? strchr(up, ':') : NULL;

        if (colon == NULL) {
            r = sbx_error_set(err, SBX_E_CONFIG, "%s: auths.%s.auth is not base64 of user:password",
                              path, host);
        }
        else {
            *colon = '\0';
            login_set(l, up, colon + 1, 0);
            *colon = ':';
            *source = "docker login";
        }
        if (up != NULL) {
            memset(up, 0, strlen(up));
            free(up);
        }
    }
    json_decref(root); /* jansson keeps the strings: the login stays in freed memory only */
    free(path);
    return r;
}

int sbx_registry_login(const struct sbx_config *c, const char *plugin_dir, const char *host,
                       struct sbx_registry_login *l, const char **source, sbx_error_t **err)
{
    struct sbx_registry reg;
    char why[256];

    memset(l, 0, sizeof(*l));
    *source = "none";
    if (c->image_registry.credential != NULL && c->image_registry.url != NULL &&
        sbx_registry_parse(c->image_registry.url, &reg, why, sizeof(why)) == 0 &&
        strcmp(reg.host, host) == 0) {
        *source = "credential";
        return from_credential(c, plugin_dir, l, err);
    }
    if (from_docker_login(host, l, source, err) < 0) {
        sbx_registry_login_free(l);
        return -1;
    }
    if (l->secret == NULL) {
        *source = "none";
    }
    return 0;
}

void sbx_registry_login_free(struct sbx_registry_login *l)
{
    if (l->user != NULL) {
        memset(l->user, 0, strlen(l->user));
    }
    if (l->secret != NULL) {
        memset(l->secret, 0, strlen(l->secret));
    }
    free(l->user);
    free(l->secret);
    memset(l, 0, sizeof(*l));
}

char *sbx_registry_auth(const struct sbx_config *c, const char *plugin_dir,
                        const struct sbx_registry *reg, const char **source, sbx_error_t **err)
{
    struct sbx_registry_login l;
    char *v = NULL;

    if (sbx_registry_login(c, plugin_dir, reg->host, &l, source, err) < 0) {
        return NULL;
    }
    if (l.secret != NULL) {
        v = auth_value(&l, reg->host);
    }
    sbx_registry_login_free(&l);
    return v;
}

void sbx_registry_auth_free(char *auth)
{
    if (auth != NULL) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
}
