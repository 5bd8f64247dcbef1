/* devc.h - the Dev Container spec's build fields of devcontainer.json
 * (image, build, features, users, environment, lifecycle commands), read
 * and turned into the image's top layer: a build context whose Dockerfile
 * the engine's own builder runs on top of the base (docs/image.md, "The
 * spec's fields"). Every field is honoured or refused by name. */
#ifndef SBX_IMAGE_DEVC_H
#define SBX_IMAGE_DEVC_H

#include <jansson.h>
#include <stddef.h>

#include "util/error.h"

/* The lifecycle steps baked at build time, in the spec's order, then
 * postStartCommand (run at each sandbox start). */
enum sbx_devc_step {
    SBX_DEVC_ON_CREATE,
    SBX_DEVC_UPDATE_CONTENT,
    SBX_DEVC_POST_CREATE,
    SBX_DEVC_POST_START,
    SBX_DEVC_NSTEPS
};

/* The definition's (and a feature's) field name of each step. */
extern const char *const sbx_devc_step_field[SBX_DEVC_NSTEPS];

/* Appends a copy of s to the NULL-terminated array *v (grown). */
void sbx_devc_strv_add(char ***v, const char *s);

/* One command of a lifecycle step: a shell string or an argv. */
struct sbx_devc_cmd {
    char *label; /* "FILE: postCreateCommand.name", for the failure message */
    char **argv; /* NULL-terminated; argv[0] the program */
    int shell;   /* 1: argv[0] is a /bin/sh -c string */
};

struct sbx_devc_feature {
    char *ref;            /* as written: "./node" */
    char *id;             /* devcontainer-feature.json's id */
    char *dir;            /* the feature's folder */
    char **env;           /* options as "NAME=value" (safe ids, uppercased) */
    char **container_env; /* the feature's containerEnv "NAME=value" */
    char **after;         /* installsAfter (ids or refs) */
    char **depends;       /* dependsOn (ids or refs) */
    struct sbx_devc_cmd *cmds[SBX_DEVC_NSTEPS];
    size_t ncmds[SBX_DEVC_NSTEPS];
    char *pinned;       /* (added) a feature from a registry: REGISTRY/REPO@sha256:..., else NULL */
    json_t *depends_on; /* (added) its dependsOn object (refs and their options), or NULL */
    long *dep_idx;      /* (added) the feature each dependsOn entry resolved to, in order */
};

/* (added) Where features from an OCI registry come from (feature_oci.c): the
 * configuration (image_registry.feature_registries, the login, ca_file) and
 * the folder they are extracted to (<cache>/features/<layer hex>). */
struct sbx_config;
struct sbx_devc_fetch {
    const struct sbx_config *cfg;
    const char *plugin_dir;
    const char *cache;
};

struct sbx_devc {
    char *path;           /* the devcontainer.json */
    char *image;          /* `image`, or NULL */
    char *dockerfile;     /* build.dockerfile, absolute, or NULL */
    char *context;        /* build.context, absolute (default: the Dockerfile's folder) */
    char **args;          /* build.args "NAME=value" */
    char *target;         /* build.target or NULL */
    char **cache_from;    /* build.cacheFrom */
    char **env;           /* containerEnv then remoteEnv, "NAME=value" */
    char *container_user; /* or NULL */
    char *remote_user;    /* or NULL */
    int update_uid;       /* updateRemoteUserUID (default 1) */
    char *workdir;        /* workspaceFolder */
    int layered;          /* 1: a top layer is built (features, users, lifecycle...) */
    struct sbx_devc_feature *features; /* in install order */
    size_t nfeatures;
    struct sbx_devc_cmd *cmds[SBX_DEVC_NSTEPS];
    size_t ncmds[SBX_DEVC_NSTEPS];
    const struct sbx_devc_fetch *fetch; /* (added) or NULL: no feature is fetched */
};

/* Reads the spec's fields of root (path: the file, for messages and relative
 * paths). *out is NULL when none of them asks for more than the debootstrap
 * shortcut (customizations.sbx, containerEnv, workspaceFolder). Errors name
 * the file and the field (SBX_E_CONFIG: exit 2). */
int sbx_devc_parse(const char *path, json_t *root, struct sbx_devc **out, sbx_error_t **err);
/* (added) The same; features from a registry are fetched through fetch (NULL:
 * refused naming the field, as with sbx_devc_parse). */
int sbx_devc_parse_with(const char *path, json_t *root, const struct sbx_devc_fetch *fetch,
                        struct sbx_devc **out, sbx_error_t **err);
void sbx_devc_free(struct sbx_devc *dc);
/* (added) Frees what one feature holds (not f itself). */
void sbx_devc_feature_fini(struct sbx_devc_feature *f);
/* What shapes the result, for the content hash (the helper adds the base
 * image's id and the layer's bytes). */
json_t *sbx_devc_canonical(const struct sbx_devc *dc);
/* Writes the top layer's build context into dir (an empty, private folder):
 * Dockerfile, features/, lifecycle scripts. */
int sbx_devc_write_layer(const struct sbx_devc *dc, const char *dir, sbx_error_t **err);
/* The label the provider reads at each sandbox start, and the script it runs. */
#define SBX_DEVC_POST_START_LABEL "dev.sbx.post-start"
#define SBX_DEVC_SHARE "/opt/sbx-devc"
/* (added) the label listing the features read from a registry and their digests */
#define SBX_DEVC_FEATURES_LABEL "dev.sbx.features"

/* devc_features.c */
/* Reads the local features of `features` (an object), checks their options
 * and orders them (dependsOn, installsAfter, overrideFeatureInstallOrder). */
int sbx_devc_features(struct sbx_devc *dc, json_t *features, json_t *override, sbx_error_t **err);
/* A lifecycle field (string, array or object form) into cmds. */
int sbx_devc_cmds(const char *path, const char *field, json_t *v, struct sbx_devc_cmd **cmds,
                  size_t *n, sbx_error_t **err);
void sbx_devc_cmds_free(struct sbx_devc_cmd *cmds, size_t n);
/* The spec's environment name of an option id: non-word characters and a
 * leading run of digits/underscores become '_', upper-cased. */
char *sbx_devc_safe_id(const char *id);

/* devc_opts.c */
/* The helper's options for the definition d (image.h) and the tags to give
 * the result: "--base-spec", "--definition", "--base-image" or
 * "--dockerfile"..., "--layer" layer_dir (when d->devc), "--tag" each.
 * NULL-terminated; free with sbx_devc_options_free. */
struct sbx_image_def;
char **sbx_devc_options(const struct sbx_image_def *d, const char *layer_dir,
                        const char *const *tags);
void sbx_devc_options_free(char **v);
/* Removes a layer folder made by sbx_devc_write_layer (no links followed). */
void sbx_devc_remove_layer(const char *dir);
/* 1 when the definition at path is the one sbx uses without --definition
 * (./.devcontainer/devcontainer.json, else the shipped one): the build of
 * that one moves <repo>:current. */
int sbx_devc_is_configured(const char *path);

/* feature_oci.c (added): a feature reference REGISTRY/PATH[:TAG|@sha256:HEX]. */
struct sbx_feature_ref {
    char host[256];  /* "127.0.0.1:5443" */
    char repo[512];  /* "team/features/greet" */
    char tag[130];   /* "1", or "" with a digest ("latest" when neither is given) */
    char digest[80]; /* "sha256:...", or "" */
};
/* 0, or -1 when ref is not one (no registry host, bad path, tag or digest). */
int sbx_feature_ref_parse(const char *ref, struct sbx_feature_ref *out);
/* Fetches the feature ref (path: the definition, for messages) from its
 * registry, which must be listed in image_registry.feature_registries (else
 * SBX_E_CONFIG naming the file and the field): the manifest (by tag or
 * digest, its sha256 checked), the layer (its sha256 and size checked),
 * extracted into fetch->cache/features/<hex>: *dir; *pinned is
 * REGISTRY/REPO@sha256:<manifest digest>. Registry failures: SBX_E_ENGINE,
 * SBX_E_NOTFOUND, SBX_E_PROTOCOL (a digest that does not match). */
int sbx_feature_oci_fetch(const struct sbx_devc_fetch *fetch, const char *path, const char *ref,
                          char **dir, char **pinned, sbx_error_t **err);
/* (added) The same, its messages starting with label ("FILE: features[\"A\"]
 * .dependsOn[\"B\"]") instead of "FILE: features[\"REF\"]". */
int sbx_feature_oci_fetch_as(const struct sbx_devc_fetch *fetch, const char *label, const char *ref,
                             char **dir, char **pinned, sbx_error_t **err);
#endif
