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

int sbx_cmd_image(struct sbx_cli *cli, int argc, char **argv)
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
    const char *definition = NULL;
    const char *provider = NULL;
    const char *cache_opt = NULL;
    const char *tag_opt = NULL;
    char *tags[3] = {NULL, NULL, NULL};
    char **options = NULL;
    char *layer = NULL;
    int moved = 0;
    cleanup_free char *def_path = NULL;
    cleanup_free char *script = NULL;
    cleanup_free char *cache = NULL;
    cleanup_free char *packages = NULL;
    cleanup_free char *npm = NULL;
    cleanup_free char *canonical = NULL;
    const char *const *pkgv;
    const char *repo = "sbx-sandbox";
    int sidecar = 0;
    struct sbx_image_def *d = NULL;
    struct sbx_open_instance *oi = NULL;
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    char **changes = NULL;
    size_t nc = 0;
    char tag[256];
    int json = 0;
    int c;
    int rc;
    struct sbx_args a = {
        .cmd = "image build", .help = "image", .opts = opts, .argc = argc - 1, .argv = argv + 1};

    if (argc >= 2 && (rc = sbx_cmd_image_reg(cli, argc, argv)) >= 0) {
        return rc; /* push, pull, gc, inspect: cmd_image_reg.c */
    }
    if (argc < 2 || strcmp(argv[1], "build") != 0) {
        fprintf(stderr, "sbx: error: usage: sbx image build|push|pull|gc|inspect [OPTIONS] (see "
                        "'sbx image --help')\n");
        return SBX_EXIT_USAGE;
    }
    while ((c = sbx_args_next(&a)) != -1) {
        switch (c) {
        case 'd':
            definition = optarg;
            break;
        case 'p':
            provider = optarg;
            break;
        case 'c':
            cache_opt = optarg;
            break;
        case 'j':
            json = 1;
            break;
        case 's':
            sidecar = 1;
            break;
        case 't':
            tag_opt = optarg;
            break;
        default:
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    if (tag_opt != NULL && (tag_opt[0] == '\0' || tag_opt[0] == '-' || strlen(tag_opt) > 128 ||
                            strspn(tag_opt, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "0123456789._-:/") != strlen(tag_opt))) {
        fprintf(stderr,
                "sbx: error: --tag '%s': an image name or tag (letters, digits, . _ - : /)\n",
                tag_opt);
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (cache_opt != NULL) {
        cache = xstrdup(cache_opt);
    }
    else {
        cleanup_free char *state = sbx_state_dir(cfg->state_dir, &err);

        if (state == NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            return SBX_EXIT_FAIL;
        }
        cache = xasprintf("%s/image-cache", state);
    }
    def_path = sbx_image_def_find(definition, &err);
    {
        /* (added) features from a registry the configuration lists are
         * fetched into <cache>/features (docs/image.md) */
        struct sbx_devc_fetch fetch = {
            .cfg = cfg, .plugin_dir = sbx_cli_plugin_dir(cli), .cache = cache};

        d = def_path ? sbx_image_def_load_with(def_path, &fetch, &err) : NULL;
        if (d != NULL && d->devc != NULL) {
            d->devc->fetch = NULL; /* fetch lives on this block's stack */
        }
    }
    if (d == NULL && err != NULL && err->code != SBX_E_CONFIG && err->code != SBX_E_USAGE) {
        /* the registry of a feature failed (not found, a digest that does not
         * match, refused): exit 1, the definition itself is fine */
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_FAIL;
    }
    oi = d ? builder_of(cli, provider, &err) : NULL;
    if (oi == NULL) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        sbx_image_def_free(d);
        return rc == SBX_EXIT_FAIL ? SBX_EXIT_USAGE : rc;
    }
    script = sbx_libexec_path("sbx-image-build");
    if (script == NULL) {
        fprintf(stderr, "sbx: error: helper sbx-image-build not found (set SBX_LIBEXEC_DIR)\n");
        sbx_instance_close(oi);
        sbx_image_def_free(d);
        return SBX_EXIT_FAIL;
    }
    if (sidecar) {
        pkgv = sbx_image_sidecar_packages;
        canonical = sbx_image_sidecar_canonical(d);
        repo = "sbx-dind";
    }
    else {
        pkgv = (const char *const *)d->packages;
        canonical = xstrdup(d->canonical);
    }
    /* no silent re-tag: <repo>:current moves for the configured definition
     * (the one found without --definition) or when --tag names it */
    moved = sidecar || sbx_devc_is_configured(d->path);
    if (moved) {
        tags[0] = xasprintf("%s:current", repo);
    }
    if (tag_opt != NULL) {
        tags[moved] = strchr(tag_opt, ':') ? xstrdup(tag_opt) : xasprintf("%s:%s", repo, tag_opt);
        cleanup_free char *cur = xasprintf("%s:current", repo);

        moved |= strcmp(tags[moved], cur) == 0;
    }
    if (!sidecar && d->devc != NULL) {
        /* the spec's top layer: its build context, in the cache */
        mkdir(cache, 0700);
        layer = xasprintf("%s/layer-XXXXXX", cache);
        if (mkdtemp(layer) == NULL || sbx_devc_write_layer(d->devc, layer, &err) < 0) {
            if (err == NULL) {
                sbx_error_set(&err, SBX_E_GENERIC, "%s: %s", layer, strerror(errno));
            }
            sbx_cli_print_error(err);
            rc = sbx_cli_exit_for(err);
            sbx_error_free(&err);
            sbx_devc_remove_layer(layer);
            free(layer);
            sbx_instance_close(oi);
            sbx_image_def_free(d);
            return rc;
        }
    }
    options = sbx_devc_options(sidecar ? NULL : d, layer, (const char *const *)tags);
    packages = join_strv(pkgv, ",");
    if (!sidecar && d->npm != NULL) {
        npm = join_strv((const char *const *)d->npm, " ");
    }
    changes = xcalloc(2 + 64 + 1, sizeof(char *));
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
            .repo = repo,
            .spec = canonical,
            .suite = d->suite,
            .packages = packages,
            .npm = npm,
            .cache = cache,
            .changes = (const char *const *)changes,
            .options = (const char *const *)options,
        };

        rc = sbx_instance_provider(oi)->image_build(oi->ctx, &req, tag, sizeof(tag), &err);
    }
    for (size_t i = 0; i < nc; i++) {
        free(changes[i]);
    }
    free(changes);
    sbx_devc_options_free(options);
    sbx_devc_remove_layer(layer);
    free(layer);
    sbx_instance_close(oi);
    if (rc < 0) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        sbx_image_def_free(d);
        free(tags[0]);
        free(tags[1]);
        return rc;
    }
    if (json) {
        cleanup_free char *current = moved ? xasprintf("%s:current", repo) : NULL;
        json_t *o = json_pack("{s:s, s:s?, s:s, s:s, s:[], s:[], s:[], s:b}", "image", tag,
                              "current", current, "definition", d->path, "suite", d->suite,
                              "packages", "npm", "tags", "spec_layer", !sidecar && d->devc != NULL);

        for (size_t i = 0; tags[i] != NULL; i++) {
            json_array_append_new(json_object_get(o, "tags"), json_string(tags[i]));
        }
        for (size_t i = 0; pkgv[i] != NULL; i++) {
            json_array_append_new(json_object_get(o, "packages"), json_string(pkgv[i]));
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
        char *s = json_dumps(o, JSON_INDENT(2));

        printf("%s\n", s);
        free(s);
        json_decref(o);
    }
    else {
        printf("%s\n", tag);
    }
    sbx_image_def_free(d);
    free(tags[0]);
    free(tags[1]);
    return SBX_EXIT_OK;
}
