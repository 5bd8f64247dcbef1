/* oci.h - a small client of the OCI distribution API (/v2/) over libcurl, for
 * what sbx itself reads from or deletes in a registry: features
 * (image/feature_oci.c) and `sbx image gc --registry`. TLS only (verified,
 * against the system's CAs or a CA file), basic auth or a bearer token got
 * from the registry's token realm with the same login; every reply bounded.
 * The credentials are secrets: never logged, zeroed when freed. */
#ifndef SBX_HTTP_OCI_H
#define SBX_HTTP_OCI_H

#include <stddef.h>

#include "util/error.h"

struct sbx_oci {
    char host[256];      /* "127.0.0.1:5443" */
    const char *ca_file; /* PEM CA bundle to verify the registry with, or NULL: the system's */
    char *user;          /* basic-auth login, or NULL (anonymous) */
    char *pass;          /* its password or identity token */
    char *bearer;        /* a token from the realm, once one was asked for */
    int basic;           /* 1: the registry asked for basic auth */
    const volatile int *cancel; /* or NULL */
};

/* One exchange's result. */
struct sbx_oci_reply {
    long status;
    char *body; /* NUL-terminated (kept replies), or NULL */
    size_t len;
    char digest[128];       /* Docker-Content-Digest, or "" */
    char content_type[160]; /* or "" */
};

/* Streamed replies: called with each piece of a 2xx body; non-zero stops. */
typedef int (*sbx_oci_sink)(void *ud, const char *data, size_t len);

/* METHOD https://HOST/PATH (path starts "/v2/") with the Accept types given
 * (NULL-terminated, may be NULL). A 2xx body is kept (at most max bytes,
 * more: SBX_E_PROTOCOL) or, with sink, streamed to it (at most max bytes).
 * A 401 is answered once: basic auth, or a token from the challenge's realm.
 * 0 with r->status set (any status), or -1: the transfer failed (r is then
 * empty). */
int sbx_oci_request(struct sbx_oci *o, const char *method, const char *path,
                    const char *const *accept, size_t max, sbx_oci_sink sink, void *ud,
                    struct sbx_oci_reply *r, sbx_error_t **err);
void sbx_oci_reply_free(struct sbx_oci_reply *r);
/* Zeroes and frees the login and the token. */
void sbx_oci_fini(struct sbx_oci *o);

/* Parses one parameter (realm, service, scope) of a WWW-Authenticate: Bearer
 * challenge into out; 0, or -1 when absent. Exposed for the unit test. */
int sbx_oci_challenge_param(const char *challenge, const char *name, char *out, size_t size);

#endif
