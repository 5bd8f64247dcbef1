/* cmd_image.c - `sbx image build`: the warm image from devcontainer.json. */
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "image/image.h"
#include "plugin/instance.h"
#include "plugin/loader.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/paths.h"
#include "util/xalloc.h"

void sbx_cmd_image_help(FILE *out)
{
    fprintf(out, "usage: sbx image build [--definition FILE] [--provider NAME] [--cache DIR] "
                 "[--tag TAG] [--sidecar] [--json]\n"
                 "\n"
                 "Builds the warm sandbox image from a Dev Container definition\n"
                 "(.devcontainer/devcontainer.json; comments and trailing commas accepted) in\n"
                 "the provider's engine (its image_build op), with no registry.\n"
                 "The base: the definition's `image` (already in the engine: nothing is\n"
                 "pulled), or its build.dockerfile (context, args, target, cacheFrom) built by\n"
                 "the engine's own builder, or else sbx's debootstrap minbase root filesystem\n"
                 "with customizations.sbx.packages (plus bash, ca-certificates, curl, git) and\n"
                 "customizations.sbx.npm (the host's npm) - root is needed for debootstrap.\n"
                 "On top, when the definition has them: local features (./folder, options as\n"
                 "variables, dependsOn/installsAfter order) and features from an OCI registry\n"
                 "listed in image_registry.feature_registries (REGISTRY/NAMESPACE/NAME:TAG or\n"
                 "@sha256:..., fetched with the registry login push uses, every sha256 checked,\n"
                 "kept in <cache>/features, pinned in the label dev.sbx.features; a dependsOn\n"
                 "not listed is fetched so too, with its options, and installed first),\n"
                 "containerEnv, remoteEnv, remoteUser/containerUser, and onCreateCommand,\n"
                 "updateContentCommand and postCreateCommand run at build time;\n"
                 "postStartCommand runs at each sandbox start. A field sbx cannot honour is\n"
                 "an error naming it (exit 2), never a warning: the table of every field is\n"
                 "docs/image.md.\n"
                 "The image is tagged sbx-sandbox:<content hash>. sbx-sandbox:current moves only\n"
                 "for the configured definition (the one found without --definition) or with\n"
                 "--tag current. When the image of a hash exists, nothing is rebuilt. Root\n"
                 "filesystems and build logs are kept in --cache (default\n"
                 "<state dir>/image-cache). The Debian mirror is read from this machine's apt\n"
                 "sources ($SBX_DEBIAN_MIRROR overrides).\n"
                 "The SBOM (Debian packages, npm packages, mise tools, with versions) is\n"
                 "taken of the final image, its files read as data (nothing of it runs),\n"
                 "and kept as <cache>/sbom-<hash>.json and the image's label sbx.sbom\n"
                 "(over 256 KiB: the file /opt/sbx-devc/sbom.json in the image); see\n"
                 "'sbx image inspect'. updateRemoteUserUID (default true) labels the image\n"
                 "so that the worktree's owner is its remote user inside.\n"
                 "\n"
                 "  --definition FILE  devcontainer.json (default ./.devcontainer/, then the\n"
                 "                     one shipped with sbx, share/sbx/devcontainer)\n"
                 "  --provider NAME    a provider instance that builds images (default: config\n"
                 "                     'provider'; provider_docker does)\n"
                 "  --tag TAG          also tag the result TAG (sbx-sandbox:TAG, or a full\n"
                 "                     name:tag); --tag current moves sbx-sandbox:current\n"
                 "  --sidecar          build the Docker sidecar's image instead: sbx-dind:<hash>\n"
                 "                     and sbx-dind:current (docker.io, rootlesskit, uidmap,\n"
                 "                     iptables; docs/testcontainers.md)\n"
                 "  --json             print {\"image\", \"current\" (null when not moved),\n"
                 "                     \"tags\", \"spec_layer\", \"definition\", ...}\n"
                 "\n"
                 "Exit status: 0 built or up to date, 1 failed (a lifecycle command, a build\n"
                 "step, or a feature's registry: the field is named), 2 usage or definition\n"
                 "error.\n");
    sbx_cmd_image_reg_help(out); /* push, pull, gc, inspect */
}

/* The provider instance that builds the image; refuses one without the
 * optional image_build op. */
static struct sbx_open_instance *builder_of(struct sbx_cli *cli, const char *provider,
                                            sbx_error_t **err)
{
    struct sbx_config *cfg = sbx_cli_config(cli);
    const char *dir = sbx_cli_plugin_dir(cli);
    struct sbx_open_instance *oi;

    if (cfg == NULL || dir == NULL) {
        sbx_error_set(err, SBX_E_CONFIG, "configuration failed");
        return NULL;
    }
    oi = sbx_instance_open(cfg, dir, provider ? provider : cfg->provider, SBX_PLUGIN_PROVIDER, err);
    if (oi != NULL && sbx_instance_provider(oi)->image_build == NULL) {
        sbx_error_set(err, SBX_E_USAGE, "provider '%s' (%s) cannot build images", oi->cfg->name,
                      oi->cfg->plugin);
        sbx_instance_close(oi);
        return NULL;
    }
    if (oi != NULL && oi->plugin->desc.abi_minor < 5) {
        /* sbx_image_request.options (1.5) carries the tags and the spec's build */
        sbx_error_set(err, SBX_E_USAGE,
                      "provider '%s' (%s) is built for plugin ABI 1.%u: sbx image build needs "
                      "1.5 (docs/plugins.md)",
                      oi->cfg->name, oi->cfg->plugin, (unsigned)oi->plugin->desc.abi_minor);
        sbx_instance_close(oi);
        return NULL;
    }
    return oi;
}

static char *join_strv(const char *const *v, const char *sep)
{
    size_t len = 1;
    char *out;

    for (size_t i = 0; v[i] != NULL; i++) {
        len += strlen(v[i]) + strlen(sep);
    }
    out = xcalloc(1, len);
    for (size_t i = 0; v[i] != NULL; i++) {
        if (i > 0) {
            strcat(out, sep);
        }
        strcat(out, v[i]);
    }
    return out;
}

struct build_opts {
    const char *definition;
    const char *provider;
    const char *cache; /* --cache, or NULL */
    const char *tag;   /* --tag, or NULL */
    int sidecar;
    int json;
};

/* What one build makes: the image's repository, packages and spec, its tags
 * and the spec's top layer. */
struct build {
    const char *repo;
    const char *const *pkgv;
    char *canonical;
    char *tags[3]; /* <repo>:current when moved, --tag's; NULL-terminated */
    int moved;     /* <repo>:current moves */
    char *layer;   /* the spec's build context in the cache, or NULL */
};

/* Parses `sbx image build`'s options into *o. Returns 0, or the exit status
 * after printing the error. */
static int build_parse(int argc, char **argv, struct build_opts *o)
{
    static const struct option opts[] = {
        {"definition", required_argument, NULL, 'd'},
        {"provider", required_argument, NULL, 'p'},
        {"cache", required_argument, NULL, 'c'},
        {"json", no_argument, NULL, 'j'},
        {"sidecar", no_argument, NULL, 's'},
        {"tag", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    struct sbx_args a = {
        .cmd = "image build", .help = "image", .opts = opts, .argc = argc - 1, .argv = argv + 1};
    int c;

    *o = (struct build_opts){0};
    if (argc < 2 || strcmp(argv[1], "build") != 0) {
        fprintf(stderr, "sbx: error: usage: sbx image build|push|pull|gc|inspect [OPTIONS] (see "
                        "'sbx image --help')\n");
        return SBX_EXIT_USAGE;
    }
    while ((c = sbx_args_next(&a)) != -1) {
        switch (c) {
        case 'd':
            o->definition = optarg;
            break;
        case 'p':
            o->provider = optarg;
            break;
        case 'c':
            o->cache = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 's':
            o->sidecar = 1;
            break;
        case 't':
            o->tag = optarg;
            break;
        default:
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    if (o->tag != NULL && (o->tag[0] == '\0' || o->tag[0] == '-' || strlen(o->tag) > 128 ||
                           strspn(o->tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789._-:/") != strlen(o->tag))) {
        fprintf(stderr,
                "sbx: error: --tag '%s': an image name or tag (letters, digits, . _ - : /)\n",
                o->tag);
        return SBX_EXIT_USAGE;
    }
    return 0;
}

/* --cache, else <state dir>/image-cache; NULL having printed why. */
static char *build_cache(const struct sbx_config *cfg, const char *cache_opt)
{
    cleanup_free char *state = NULL;
    sbx_error_t *err = NULL;

    if (cache_opt != NULL) {
        return xstrdup(cache_opt);
    }
    state = sbx_state_dir(cfg->state_dir, &err);
    if (state == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return NULL;
    }
    return xasprintf("%s/image-cache", state);
}

/* Loads the definition (fetching its registry features into the cache) and
 * opens the provider that builds it. Returns 0, or the exit status after
 * printing the error. */
static int build_open(struct sbx_cli *cli, struct sbx_config *cfg, const struct build_opts *o,
                      const char *cache, struct sbx_image_def **d, struct sbx_open_instance **oi)
{
    cleanup_free char *def_path = NULL;
    sbx_error_t *err = NULL;
    int rc;

    def_path = sbx_image_def_find(o->definition, &err);
    {
        /* (added) features from a registry the configuration lists are
         * fetched into <cache>/features (docs/image.md) */
        struct sbx_devc_fetch fetch = {
            .cfg = cfg, .plugin_dir = sbx_cli_plugin_dir(cli), .cache = cache};

        *d = def_path ? sbx_image_def_load_with(def_path, &fetch, &err) : NULL;
        if (*d != NULL && (*d)->devc != NULL) {
            (*d)->devc->fetch = NULL; /* fetch lives on this block's stack */
        }
    }
    if (*d == NULL && err != NULL && err->code != SBX_E_CONFIG && err->code != SBX_E_USAGE) {
        /* the registry of a feature failed (not found, a digest that does not
         * match, refused): exit 1, the definition itself is fine */
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_FAIL;
    }
    *oi = *d ? builder_of(cli, o->provider, &err) : NULL;
    if (*oi == NULL) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        sbx_image_def_free(*d);
        *d = NULL;
        return rc == SBX_EXIT_FAIL ? SBX_EXIT_USAGE : rc;
    }
    return 0;
}

/* The repository, packages, spec and tags of the build of d (or of the
 * sidecar's image). */
static void build_plan(struct build *b, const struct build_opts *o, const struct sbx_image_def *d)
{
    b->repo = "sbx-sandbox";
    if (o->sidecar) {
        b->pkgv = sbx_image_sidecar_packages;
        b->canonical = sbx_image_sidecar_canonical(d);
        b->repo = "sbx-dind";
    }
    else {
        b->pkgv = (const char *const *)d->packages;
        b->canonical = xstrdup(d->canonical);
    }
    /* no silent re-tag: <repo>:current moves for the configured definition
     * (the one found without --definition) or when --tag names it */
    b->moved = o->sidecar || sbx_devc_is_configured(d->path);
    if (b->moved) {
        b->tags[0] = xasprintf("%s:current", b->repo);
    }
    if (o->tag != NULL) {
        b->tags[b->moved] =
            strchr(o->tag, ':') ? xstrdup(o->tag) : xasprintf("%s:%s", b->repo, o->tag);
        cleanup_free char *cur = xasprintf("%s:current", b->repo);

        b->moved |= strcmp(b->tags[b->moved], cur) == 0;
    }
}

/* The spec's top layer (its build context) in a new folder of the cache:
 * b->layer. -1 with err set. */
static int build_layer(struct build *b, const struct sbx_image_def *d, const char *cache,
                       sbx_error_t **err)
{
    mkdir(cache, 0700);
    b->layer = xasprintf("%s/layer-XXXXXX", cache);
    if (mkdtemp(b->layer) == NULL || sbx_devc_write_layer(d->devc, b->layer, err) < 0) {
        if (*err == NULL) {
            sbx_error_set(err, SBX_E_GENERIC, "%s: %s", b->layer, strerror(errno));
        }
        return -1;
    }
    return 0;
}

/* Removes the layer folder and frees what b holds. */
static void build_fini(struct build *b)
{
    sbx_devc_remove_layer(b->layer);
    free(b->layer);
    b->layer = NULL;
    free(b->canonical);
    free(b->tags[0]);
    free(b->tags[1]);
}

/* Runs the provider's image_build for b with the helper script; the image's
 * tag into tag. -1 with err set. */
static int build_run(struct sbx_open_instance *oi, const struct build *b,
                     const struct sbx_image_def *d, int sidecar, const char *script,
                     const char *cache, char *tag, size_t size, sbx_error_t **err)
{
    char **options = sbx_devc_options(sidecar ? NULL : d, b->layer, (const char *const *)b->tags);
    cleanup_free char *packages = join_strv(b->pkgv, ",");
    cleanup_free char *npm = NULL;
    char **changes = xcalloc(2 + 64 + 1, sizeof(char *));
    size_t nc = 0;
    int rc;

    if (!sidecar && d->npm != NULL) {
        npm = join_strv((const char *const *)d->npm, " ");
    }
    if (!sidecar) {
        changes[nc++] = xasprintf("WORKDIR %s", d->workdir);
        for (size_t i = 0; d->env != NULL && d->env[i] != NULL && nc < 64; i++) {
            changes[nc++] = xasprintf("ENV %s", d->env[i]);
        }
        if (npm != NULL) {
            changes[nc++] = xstrdup("ENV NODE_PATH=/opt/sbx-node/node_modules");
        }
    }
    {
        struct sbx_image_request req = {
            .builder = script,
            .repo = b->repo,
            .spec = b->canonical,
            .suite = d->suite,
            .packages = packages,
            .npm = npm,
            .cache = cache,
            .changes = (const char *const *)changes,
            .options = (const char *const *)options,
        };

        rc = sbx_instance_provider(oi)->image_build(oi->ctx, &req, tag, size, err);
    }
    for (size_t i = 0; i < nc; i++) {
        free(changes[i]);
    }
    free(changes);
    sbx_devc_options_free(options);
    return rc;
}

/* --json: the image, its tags, packages and registry features. */
static void build_print_json(const struct build *b, const struct sbx_image_def *d, int sidecar,
                             const char *tag)
{
    cleanup_free char *current = b->moved ? xasprintf("%s:current", b->repo) : NULL;
    json_t *o = json_pack("{s:s, s:s?, s:s, s:s, s:[], s:[], s:[], s:b}", "image", tag, "current",
                          current, "definition", d->path, "suite", d->suite, "packages", "npm",
                          "tags", "spec_layer", !sidecar && d->devc != NULL);
    char *s;

    for (size_t i = 0; b->tags[i] != NULL; i++) {
        json_array_append_new(json_object_get(o, "tags"), json_string(b->tags[i]));
    }
    for (size_t i = 0; b->pkgv[i] != NULL; i++) {
        json_array_append_new(json_object_get(o, "packages"), json_string(b->pkgv[i]));
    }
    for (size_t i = 0; !sidecar && d->npm != NULL && d->npm[i] != NULL; i++) {
        json_array_append_new(json_object_get(o, "npm"), json_string(d->npm[i]));
    }
    /* (added) each feature from a registry and the digest it resolved to */
    json_object_set_new(o, "features", json_array());
    for (size_t i = 0; !sidecar && d->devc != NULL && i < d->devc->nfeatures; i++) {
        const struct sbx_devc_feature *fe = &d->devc->features[i];

        json_array_append_new(
            json_object_get(o, "features"),
            json_pack("{s:s, s:s, s:s?}", "ref", fe->ref, "id", fe->id, "pinned", fe->pinned));
    }
    s = json_dumps(o, JSON_INDENT(2));
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

int sbx_cmd_image(struct sbx_cli *cli, int argc, char **argv)
{
    struct build_opts o;
    struct build b = {0};
    cleanup_free char *script = NULL;
    cleanup_free char *cache = NULL;
    struct sbx_image_def *d = NULL;
    struct sbx_open_instance *oi = NULL;
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    char tag[256];
    int rc;

    if (argc >= 2 && (rc = sbx_cmd_image_reg(cli, argc, argv)) >= 0) {
        return rc; /* push, pull, gc, inspect: cmd_image_reg.c */
    }
    rc = build_parse(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    cache = build_cache(cfg, o.cache);
    if (cache == NULL) {
        return SBX_EXIT_FAIL;
    }
    rc = build_open(cli, cfg, &o, cache, &d, &oi);
    if (rc != 0) {
        return rc;
    }
    script = sbx_libexec_path("sbx-image-build");
    if (script == NULL) {
        fprintf(stderr, "sbx: error: helper sbx-image-build not found (set SBX_LIBEXEC_DIR)\n");
        sbx_instance_close(oi);
        sbx_image_def_free(d);
        return SBX_EXIT_FAIL;
    }
    build_plan(&b, &o, d);
    if (!o.sidecar && d->devc != NULL && build_layer(&b, d, cache, &err) < 0) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        build_fini(&b);
        sbx_instance_close(oi);
        sbx_image_def_free(d);
        return rc;
    }
    rc = build_run(oi, &b, d, o.sidecar, script, cache, tag, sizeof(tag), &err);
    sbx_devc_remove_layer(b.layer);
    free(b.layer);
    b.layer = NULL;
    sbx_instance_close(oi);
    if (rc < 0) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        build_fini(&b);
        sbx_image_def_free(d);
        return rc;
    }
    if (o.json) {
        build_print_json(&b, d, o.sidecar, tag);
    }
    else {
        printf("%s\n", tag);
    }
    build_fini(&b);
    sbx_image_def_free(d);
    return SBX_EXIT_OK;
}
