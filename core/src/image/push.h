/* push.h - publishing the warm image to the configured registry and pulling
 * it back by digest (docs/image.md, "Publishing and pulling"), through the
 * provider's optional image_op (ABI 1.6). Used by `sbx image push|pull|gc`
 * (cli/cmd_image_reg.c) and by the runner before it takes work
 * (runner/image_check.c). */
#ifndef SBX_IMAGE_PUSH_H
#define SBX_IMAGE_PUSH_H

#include <stdint.h>

#include "config/config.h"
#include "plugin/instance.h"
#include "util/error.h"

/* The label the SBOM is written to (scripts/sbx-image-sbom.py); an SBOM
 * over 256 KiB is this file of the image instead, its sha256 in the label
 * SBX_IMAGE_SBOM_LABEL ".sha256" (docs/image.md, "The SBOM"). */
#define SBX_IMAGE_SBOM_LABEL "sbx.sbom"
#define SBX_IMAGE_SBOM_FILE "/opt/sbx-devc/sbom.json"

struct sbx_pushed {
    char hash[64];           /* the content hash of the image pushed */
    char target[640];        /* "HOST:PORT/PATH:<hash>" */
    char digest[128];        /* "sha256:..." */
    char pull_ref[640];      /* "HOST:PORT/PATH@sha256:...": what a box's `image` names */
    const char *auth_source; /* "credential", "docker login", "none" */
};

/* 1 when oi's provider has the image_op; else 0 with *err naming it. */
int sbx_image_op_supported(struct sbx_open_instance *oi, sbx_error_t **err);

/* Pushes the local image ref (its content-hash tag REPO:<16 hex> found among
 * its tags) to the configured registry as PATH:<hash>, and records the digest
 * in <state dir>/images/pushed.json. */
int sbx_image_push(const struct sbx_config *c, const char *plugin_dir, struct sbx_open_instance *oi,
                   const char *ref, struct sbx_pushed *out, sbx_error_t **err);

/* Makes sure ref is in the engine: present, 0 (*pulled 0); missing and ref a
 * reference by digest (HOST[:PORT]/PATH@sha256:...), pulled with the
 * registry's credentials (logs "pulling image REF"), 0 (*pulled 1); missing
 * otherwise: SBX_E_NOTFOUND saying so (never a build). cancel may be NULL;
 * say: the CLI's own stderr line too when the log level hides info. */
int sbx_image_ensure(const struct sbx_config *c, const char *plugin_dir,
                     struct sbx_open_instance *oi, const char *ref, const volatile int *cancel,
                     int say, int *pulled, sbx_error_t **err);

/* 1 when ref names an image by digest (...@sha256:<64 hex>). */
int sbx_image_ref_by_digest(const char *ref);

#endif
