/* image.h - the warm sandbox image defined by .devcontainer/devcontainer.json
 * (ADR 0287 decision 10). See docs/image.md for the fields read. */
#ifndef SBX_IMAGE_IMAGE_H
#define SBX_IMAGE_IMAGE_H

#include "image/devc.h"
#include "util/error.h"

struct sbx_image_def {
    char *path;            /* the devcontainer.json read */
    char *suite;           /* Debian suite, default bookworm */
    char **packages;       /* NULL-terminated: required ones + customizations.sbx.packages */
    char **env;            /* "K=V" from containerEnv */
    char *workdir;         /* workspaceFolder, default /workspace */
    char *mise;            /* mise.toml content beside .devcontainer, or NULL */
    char **npm;            /* NULL-terminated "name@version" from customizations.sbx.npm */
    char *canonical;       /* the canonical spec the content hash is taken of */
    struct sbx_devc *devc; /* the spec's build fields (image/devc.h), or NULL: the shortcut only */
};

/* Finds the definition: explicit path, else ./.devcontainer/devcontainer.json,
 * else the one shipped with the binary (util/paths.h: share/sbx/devcontainer). */
char *sbx_image_def_find(const char *explicit_path, sbx_error_t **err);
/* The largest devcontainer.json read. */
#define SBX_IMAGE_DEF_MAX (1024 * 1024)
/* Parses and validates; errors name the file and the field. */
struct sbx_image_def *sbx_image_def_load(const char *path, sbx_error_t **err);
/* (added) The same; features from a registry are fetched through fetch
 * (devc.h; NULL: refused naming the field). */
struct sbx_image_def *sbx_image_def_load_with(const char *path, const struct sbx_devc_fetch *fetch,
                                              sbx_error_t **err);
void sbx_image_def_free(struct sbx_image_def *d);
/* The Docker sidecar's image (sbx-dind): its fixed package list and the
 * canonical spec its content hash is taken of, for the definition's suite.
 * NULL-terminated; the canonical string is the caller's to free. */
extern const char *const sbx_image_sidecar_packages[];
char *sbx_image_sidecar_canonical(const struct sbx_image_def *d);
/* 1 when s is "name@version" as npm takes it (scoped names allowed). */
int sbx_image_npm_spec_valid(const char *s);

#endif
