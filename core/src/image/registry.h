/* registry.h - the registry the warm image is published to (configuration
 * key image_registry, docs/image.md "Publishing and pulling"): its address,
 * and the engine's X-Registry-Auth value from the credential plugin or the
 * engine's login. Credentials never come from the configuration file. */
#ifndef SBX_IMAGE_REGISTRY_H
#define SBX_IMAGE_REGISTRY_H

#include <jansson.h>
#include <stddef.h>

#include "config/config.h"
#include "util/error.h"

struct sbx_registry {
    char host[256]; /* "127.0.0.1:5443", "ghcr.io": the server the engine logs in to */
    char repo[512]; /* "127.0.0.1:5443/team/sbx-sandbox": the image repository */
};

/* Parses image_registry.url: https://HOST[:PORT]/PATH. 0, or -1 with why
 * (a short phrase: "must start with https://"). */
int sbx_registry_parse(const char *url, struct sbx_registry *out, char *why, size_t why_size);

/* The configured registry; SBX_E_CONFIG naming the key when none is set. */
int sbx_registry_from_config(const struct sbx_config *c, struct sbx_registry *out,
                             sbx_error_t **err);

/* The X-Registry-Auth value for reg: from the credential instance
 * image_registry.credential (its lease's username_key and password_key
 * values), else the engine's login (the Docker client's config.json,
 * $DOCKER_CONFIG or ~/.docker, its "auths" entry for reg->host), else NULL
 * with no error (anonymous). *source says which ("credential 'NAME'",
 * "docker login", "none"). A secret: free it with sbx_registry_auth_free. */
char *sbx_registry_auth(const struct sbx_config *c, const char *plugin_dir,
                        const struct sbx_registry *reg, const char **source, sbx_error_t **err);
void sbx_registry_auth_free(char *auth);

/* (added) The login for the registry server host ("HOST[:PORT]"), for sbx's
 * own requests (features, gc --registry) and sbx_registry_auth:
 * image_registry.credential when host is image_registry.url's, else the
 * engine's login: the Docker client's config.json, credHelpers[host] or
 * credsStore (a credential helper, `docker-credential-NAME get`, run as
 * the client runs it), else its auths entry. No login: 0 with l->secret
 * NULL. *source says which. Secrets: free with sbx_registry_login_free. */
struct sbx_registry_login {
    char *user;   /* "<token>" with an identity token */
    char *secret; /* the password or identity token; NULL: none */
    int token;    /* 1: secret is an identity token */
};
int sbx_registry_login(const struct sbx_config *c, const char *plugin_dir, const char *host,
                       struct sbx_registry_login *l, const char **source, sbx_error_t **err);
void sbx_registry_login_free(struct sbx_registry_login *l);

/* registry_gc.c (added): `sbx image gc --registry`. Deletes the manifests of
 * image_registry.url's repository past the newest keep (by the image
 * config's `created`; one without it is kept), never one the configuration
 * names by digest, through DELETE /v2/PATH/manifests/DIGEST (dry: none).
 * Appends {"digest", "tags"} of each to removed. A registry that does not
 * allow deletes (405, UNSUPPORTED): SBX_E_ENGINE saying so in one line. */
int sbx_registry_gc(const struct sbx_config *c, const char *plugin_dir, int keep, int dry,
                    json_t *removed, sbx_error_t **err);

/* credhelper.c: runs `docker-credential-NAME get` (from PATH) with host on
 * its stdin; *user and *secret from its JSON answer, both NULL when it has
 * none for host ("credentials not found"). cfg_path names the config.json
 * in errors. The secret is never logged. */
int sbx_credhelper_get(const char *name, const char *host, char **user, char **secret,
                       const char *cfg_path, sbx_error_t **err);
/* 1 when name is a credential helper's name (letters, digits, '.', '_', '-'). */
int sbx_credhelper_name_valid(const char *name);

/* base64 (RFC 4648; url: the URL-safe alphabet). Owned by the caller. */
char *sbx_base64(const unsigned char *data, size_t len, int url);
/* Decodes standard base64 into a NUL-terminated buffer; NULL when malformed. */
char *sbx_base64_decode(const char *text, size_t *len);

#endif
