/* ca_bundle.h - extra CAs for the sandboxes (egress.ca_bundle; ca_bundle.c). */
#ifndef SBX_EGRESS_CA_BUNDLE_H
#define SBX_EGRESS_CA_BUNDLE_H

#include <stddef.h>

#include "sbx/sbx_host.h"
#include "util/error.h"

/* In the sandbox's egress directory (mounted read-only at /run/sbx-egress). */
#define SBX_CA_EXTRA_FILE "extra-ca.pem"   /* the configured CAs alone */
#define SBX_CA_BUNDLE_FILE "ca-bundle.pem" /* the host's system store plus them */
#define SBX_CA_EXTRA_PATH "/run/sbx-egress/" SBX_CA_EXTRA_FILE
#define SBX_CA_BUNDLE_PATH "/run/sbx-egress/" SBX_CA_BUNDLE_FILE

/* NODE_EXTRA_CA_CERTS, SSL_CERT_FILE, REQUESTS_CA_BUNDLE, GIT_SSL_CAINFO, CURL_CA_BUNDLE. */
extern const struct sbx_kv sbx_ca_bundle_env[];
extern const size_t sbx_ca_bundle_n_env;

/* 0 when PATH is a readable PEM file of one or more CERTIFICATE blocks (at most 4 MiB);
 * else -1 with why ("'FILE' line N: ..."). */
int sbx_ca_bundle_check(const char *path, char *why, size_t size);
/* Writes DIR/extra-ca.pem (a copy of EXTRA) and DIR/ca-bundle.pem (the host's system
 * store, then EXTRA), each 0644. */
int sbx_ca_bundle_install(const char *extra, const char *dir, sbx_error_t **err);
/* Removes both files from DIR (before the directory goes). */
void sbx_ca_bundle_remove(const char *dir);

#endif
