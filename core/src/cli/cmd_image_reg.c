/* cmd_image_reg.c - `sbx image push|pull|gc|inspect`: the warm image in a
 * registry and in the engine (docs/image.md, "Publishing and pulling"). */
#include <getopt.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "image/devc.h"
#include "image/push.h"
#include "image/registry.h"
#include "plugin/instance.h"
#include "util/xalloc.h"

void sbx_cmd_image_reg_help(FILE *out)
{
    fprintf(out,
            "\n"
            "usage: sbx image push [--image REF] [--provider NAME] [--json]\n"
            "       sbx image pull [--image REF] [--provider NAME] [--json]\n"
            "       sbx image gc [--keep N] [--dry-run] [--registry] [--provider NAME] [--json]\n"
            "       sbx image inspect [--image REF] [--provider NAME] [--json]\n"
            "\n"
            "push: tags the image (default: the configuration's 'image') as\n"
            "  <image_registry.url>:<content hash>, pushes it with the credentials of\n"
            "  image_registry.credential (else the engine's login: docker login, its\n"
            "  credsStore/credHelpers helpers run as the Docker client runs them), prints\n"
            "  the reference by digest (HOST:PORT/PATH@sha256:...) a box names in 'image',\n"
            "  and records it in <state dir>/images/pushed.json.\n"
            "pull: makes sure the image is in the engine; a missing reference by digest is\n"
            "  pulled (the runner does the same before it takes work). Never builds.\n"
            "gc: removes sbx-sandbox images past the newest N (image_registry.keep, 5),\n"
            "  never one a container or sbx-sandbox:current uses.\n"
            "  --registry: instead deletes the manifests of image_registry.url's repository\n"
            "  past the newest N (by the image's created date) through the registry's API\n"
            "  (DELETE /v2/PATH/manifests/DIGEST), never one the configuration names by\n"
            "  digest; the registry must allow deletes, and frees the blobs in its own\n"
            "  garbage collection.\n"
            "inspect: the image's id, digest, tags, SBOM (label " SBX_IMAGE_SBOM_LABEL ", or the\n"
            "  file " SBX_IMAGE_SBOM_FILE " of the image when too large for a label: its\n"
            "  sha256 in label " SBX_IMAGE_SBOM_LABEL ".sha256) and\n"
            "  the features read from a registry, by digest (label " SBX_DEVC_FEATURES_LABEL ").\n"
            "Exit status: 0 done, 1 failed (engine, registry), 2 usage or configuration.\n");
}

struct reg_opts {
    const char *image;
    const char *provider;
    int keep;
    int dry;
    int json;
    int registry; /* (added) gc --registry */
};

static int parse(const char *cmd, int argc, char **argv, struct reg_opts *o)
{
    static const struct option opts[] = {
        {"image", required_argument, NULL, 'i'},
        {"provider", required_argument, NULL, 'p'},
        {"keep", required_argument, NULL, 'k'},
        {"dry-run", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"registry", no_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    struct sbx_args a = {.cmd = cmd, .help = "image", .opts = opts, .argc = argc, .argv = argv};
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        switch (c) {
        case 'i':
            o->image = optarg;
            break;
        case 'p':
            o->provider = optarg;
            break;
        case 'k': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);

            if (end == optarg || *end != '\0' || v < 1 || v > 10000) {
                fprintf(stderr, "sbx: error: %s: --keep must be 1 to 10000\n", cmd);
                return -1;
            }
            o->keep = (int)v;
            break;
        }
        case 'n':
            o->dry = 1;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'r':
            o->registry = 1;
            break;
        default:
            return -1;
        }
    }
    return sbx_args_operands(&a, 0, 0, "");
}

static void print_json(json_t *o)
{
    char *s = json_dumps(o, JSON_INDENT(2));

    printf("%s\n", s);
    free(s);
    json_decref(o);
}

static int fail_with(sbx_error_t **err)
{
    int rc = sbx_cli_exit_for(*err);

    sbx_cli_print_error(*err);
    sbx_error_free(err);
    return rc;
}

static int on_info(void *ud, const struct sbx_image_info *info)
{
    json_t *o = json_pack("{s:s?, s:s?, s:s?, s:I, s:[], s:b}", "ref", info->ref, "id", info->id,
                          "digest", info->digest, "created", (json_int_t)info->created, "tags",
                          "in_use", info->in_use);
    json_t *sbom = NULL;
    json_t *features = NULL;

    for (size_t i = 0; info->tags != NULL && info->tags[i] != NULL; i++) {
        json_array_append_new(json_object_get(o, "tags"), json_string(info->tags[i]));
    }
    if (info->labels != NULL) {
        json_t *labels = json_loads(info->labels, 0, NULL);
        const char *s = json_string_value(json_object_get(labels, SBX_IMAGE_SBOM_LABEL));

        const char *sum =
            json_string_value(json_object_get(labels, SBX_IMAGE_SBOM_LABEL ".sha256"));

        sbom = s && *s ? json_loads(s, 0, NULL) : NULL;
        if (sum != NULL && *sum != '\0' && strlen(sum) == 64) {
            /* (added) too large for a label: a file in the image (docs/image.md) */
            json_object_set_new(
                o, "sbom_file",
                json_pack("{s:s, s:s}", "path", SBX_IMAGE_SBOM_FILE, "sha256", sum));
        }
        /* (added) the features read from a registry and their digests */
        s = json_string_value(json_object_get(labels, SBX_DEVC_FEATURES_LABEL));
        features = s ? json_loads(s, 0, NULL) : NULL;
        json_decref(labels);
    }
    json_object_set_new(o, "sbom", sbom ? sbom : json_null());
    json_object_set_new(o, "features", json_is_array(features) ? features : json_array());
    if (features != NULL && !json_is_array(features)) {
        json_decref(features);
    }
    json_array_append_new(ud, o);
    return 0;
}

static int cmd_inspect(struct sbx_open_instance *oi, const char *ref, int json, sbx_error_t **err)
{
    json_t *list = json_array();
    json_t *o;

    if (sbx_instance_provider(oi)->image_op(
            oi->ctx,
            &(struct sbx_image_op){
                .action = SBX_IMAGE_INSPECT, .ref = ref, .fn = on_info, .userdata = list},
            err) < 0) {
        json_decref(list);
        return -1;
    }
    o = json_incref(json_array_get(list, 0));
    json_decref(list);
    if (json) {
        print_json(o);
        return 0;
    }
    printf("image   %s\nid      %s\ndigest  %s\n", ref,
           json_string_value(json_object_get(o, "id")) ?: "-",
           json_string_value(json_object_get(o, "digest")) ?: "-");
    {
        json_t *sbom = json_object_get(o, "sbom");

        json_t *file = json_object_get(o, "sbom_file");

        if (json_is_object(file)) {
            printf("sbom    in the image: %s (sha256 %s)\n",
                   json_string_value(json_object_get(file, "path")),
                   json_string_value(json_object_get(file, "sha256")));
        }
        else {
            printf("sbom    %s\n", json_is_object(sbom)
                                       ? "yes (sbx image inspect --json)"
                                       : "none (built before SBOMs, or not by sbx image build)");
        }
        if (json_is_object(sbom)) {
            printf("  definition hash %s, %zu Debian packages, %zu npm packages, %zu mise "
                   "tools\n",
                   json_string_value(json_object_get(sbom, "definition_hash")) ?: "?",
                   json_array_size(json_object_get(sbom, "debian")),
                   json_array_size(json_object_get(sbom, "npm")),
                   json_array_size(json_object_get(sbom, "mise")));
        }
    }
    {
        size_t i;
        json_t *f;

        json_array_foreach(json_object_get(o, "features"), i, f)
        {
            printf("feature %s\n", json_string_value(json_object_get(f, "pinned")) ?: "?");
        }
    }
    json_decref(o);
    return 0;
}

static int newest_first(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "created"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "created"));

    return x < y ? 1 : x > y ? -1 : 0;
}

/* (added) 1 when TAG is an image the configuration names: the top-level
 * `image`, a pool's or a provider instance's (docs/image.md, "Which image"). */
static int configured_image(const struct sbx_config *cfg, const char *tag)
{
    if (cfg->image != NULL && strcmp(tag, cfg->image) == 0) {
        return 1;
    }
    for (size_t i = 0; i < cfg->n_pools; i++) {
        if (cfg->pools[i].image != NULL && strcmp(tag, cfg->pools[i].image) == 0) {
            return 1;
        }
    }
    for (size_t i = 0; i < cfg->n_instances; i++) {
        if (cfg->instances[i].image != NULL && strcmp(tag, cfg->instances[i].image) == 0) {
            return 1;
        }
    }
    return 0;
}
static int cmd_gc(struct sbx_open_instance *oi, const struct sbx_config *cfg,
                  const struct reg_opts *o, sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(oi);
    int keep = o->keep > 0 ? o->keep : cfg->image_registry.keep;
    json_t *list = json_array();
    json_t *removed = json_array();
    json_t **v;
    size_t n;
    int kept = 0;
    int rc = 0;

    if (ops->image_op(
            oi->ctx,
            &(struct sbx_image_op){
                .action = SBX_IMAGE_LIST, .ref = "sbx-sandbox", .fn = on_info, .userdata = list},
            err) < 0) {
        json_decref(list);
        json_decref(removed);
        return -1;
    }
    n = json_array_size(list);
    v = xcalloc(n + 1, sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        v[i] = json_array_get(list, i);
    }
    qsort(v, n, sizeof(*v), newest_first);
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *tags = json_object_get(v[i], "tags");
        int current = 0;
        size_t k;
        json_t *t;

        json_array_foreach(tags, k, t)
        {
            current |= strcmp(json_string_value(t), "sbx-sandbox:current") == 0 ||
                       configured_image(cfg, json_string_value(t));
        }
        if (current || json_is_true(json_object_get(v[i], "in_use")) || kept < keep) {
            kept += !current;
            continue;
        }
        json_array_foreach(tags, k, t)
        {
            if (strncmp(json_string_value(t), "sbx-sandbox:", 12) != 0) {
                continue;
            }
            json_array_append(removed, t);
            if (!o->dry) {
                rc = ops->image_op(
                    oi->ctx,
                    &(struct sbx_image_op){.action = SBX_IMAGE_REMOVE, .ref = json_string_value(t)},
                    err);
            }
            if (rc < 0) {
                break;
            }
            if (!o->json) {
                printf("%s %s\n", o->dry ? "would remove" : "removed", json_string_value(t));
            }
        }
    }
    free(v);
    if (rc == 0 && o->json) {
        print_json(
            json_pack("{s:i, s:O, s:b}", "keep", keep, "removed", removed, "dry_run", o->dry));
    }
    json_decref(removed);
    json_decref(list);
    return rc;
}

/* (added) gc --registry: the manifests in image_registry.url past the newest N. */
static int cmd_gc_registry(const struct sbx_config *cfg, const char *plugin_dir,
                           const struct reg_opts *o, sbx_error_t **err)
{
    int keep = o->keep > 0 ? o->keep : cfg->image_registry.keep;
    json_t *removed = json_array();
    size_t i;
    json_t *x;

    if (sbx_registry_gc(cfg, plugin_dir, keep, o->dry, removed, err) < 0) {
        json_decref(removed);
        return -1;
    }
    if (o->json) {
        print_json(json_pack("{s:i, s:o, s:b, s:s}", "keep", keep, "removed", removed, "dry_run",
                             o->dry, "registry", cfg->image_registry.url));
        return 0;
    }
    json_array_foreach(removed, i, x)
    {
        printf("%s %s (registry)\n", o->dry ? "would delete" : "deleted",
               json_string_value(json_object_get(x, "digest")));
    }
    json_decref(removed);
    return 0;
}

int sbx_cmd_image_reg(struct sbx_cli *cli, int argc, char **argv)
{
    const char *sub = argv[1];
    struct reg_opts o = {0};
    struct sbx_config *cfg;
    struct sbx_open_instance *oi;
    sbx_error_t *err = NULL;
    char cmd[32];
    const char *ref;
    int rc = 0;

    if (strcmp(sub, "push") != 0 && strcmp(sub, "pull") != 0 && strcmp(sub, "gc") != 0 &&
        strcmp(sub, "inspect") != 0) {
        return -1;
    }
    snprintf(cmd, sizeof(cmd), "image %s", sub);
    if (parse(cmd, argc - 1, argv + 1, &o) < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL || sbx_cli_plugin_dir(cli) == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (o.registry) {
        /* (added) the registry's API only: no provider */
        if (strcmp(sub, "gc") != 0) {
            fprintf(stderr, "sbx: error: %s: --registry is an option of sbx image gc only\n", cmd);
            return SBX_EXIT_USAGE;
        }
        rc = cmd_gc_registry(cfg, sbx_cli_plugin_dir(cli), &o, &err);
        return rc < 0 ? fail_with(&err) : SBX_EXIT_OK;
    }
    ref = o.image ? o.image : cfg->image;
    oi = sbx_instance_open(cfg, sbx_cli_plugin_dir(cli), o.provider ? o.provider : cfg->provider,
                           SBX_PLUGIN_PROVIDER, &err);
    if (oi == NULL || !sbx_image_op_supported(oi, &err)) {
        sbx_instance_close(oi);
        rc = fail_with(&err);
        return rc == SBX_EXIT_FAIL ? SBX_EXIT_USAGE : rc;
    }
    if (strcmp(sub, "push") == 0) {
        struct sbx_pushed p;

        rc = sbx_image_push(cfg, sbx_cli_plugin_dir(cli), oi, ref, &p, &err);
        if (rc == 0 && o.json) {
            print_json(json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "image", ref, "hash", p.hash,
                                 "target", p.target, "digest", p.digest, "pull_ref", p.pull_ref,
                                 "credentials", p.auth_source));
        }
        else if (rc == 0) {
            printf("%s\n", p.pull_ref);
        }
    }
    else if (strcmp(sub, "pull") == 0) {
        int pulled = 0;

        rc = sbx_image_ensure(cfg, sbx_cli_plugin_dir(cli), oi, ref, NULL, 1, &pulled, &err);
        if (rc == 0 && o.json) {
            print_json(json_pack("{s:s, s:b}", "image", ref, "pulled", pulled));
        }
        else if (rc == 0) {
            printf("%s %s\n", ref, pulled ? "pulled" : "already in the engine");
        }
    }
    else if (strcmp(sub, "gc") == 0) {
        rc = cmd_gc(oi, cfg, &o, &err);
    }
    else {
        rc = cmd_inspect(oi, ref, o.json, &err);
    }
    sbx_instance_close(oi);
    return rc < 0 ? fail_with(&err) : SBX_EXIT_OK;
}
