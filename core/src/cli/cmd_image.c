/* cmd_image.c - `sbx image build`: the warm image from devcontainer.json. */
#include <errno.h>
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
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/paths.h"
#include "util/xalloc.h"

void sbx_cmd_image_help(FILE *out)
{
    fprintf(out,
            "usage: sbx image build [--definition FILE] [--provider NAME] [--cache DIR] "
            "[--sidecar] [--json]\n"
            "\n"
            "Builds the warm sandbox image with no registry: a debootstrap minbase root\n"
            "filesystem with the packages from .devcontainer/devcontainer.json\n"
            "(customizations.sbx.packages, plus bash, ca-certificates, curl, git),\n"
            "imported into the provider's Docker engine and tagged\n"
            "sbx-sandbox:<content hash> and sbx-sandbox:current. When the image for the\n"
            "current definition exists, it only re-tags it. The root filesystem is cached\n"
            "(--cache, default <state dir>/image-cache). Needs root for debootstrap.\n"
            "customizations.sbx.npm ([\"name@version\"]) is installed with the host's npm\n"
            "(its configured registry) into /opt/sbx-node, NODE_PATH pointing there.\n"
            "The Debian mirror is read from this machine's apt sources\n"
            "($SBX_DEBIAN_MIRROR overrides). Fields read: docs/image.md.\n"
            "\n"
            "  --definition FILE  devcontainer.json (default ./.devcontainer/, then the\n"
            "                     one shipped with sbx, share/sbx/devcontainer)\n"
            "  --provider NAME    a provider_docker instance (default: config 'provider')\n"
            "  --sidecar          build the Docker sidecar's image instead: sbx-dind:<hash>\n"
            "                     and sbx-dind:current (docker.io, rootlesskit, uidmap,\n"
            "                     iptables; docs/testcontainers.md)\n"
            "  --json             print {\"image\", \"current\", \"definition\", ...}\n"
            "\n"
            "Exit status: 0 built or up to date, 1 failed, 2 usage or definition error.\n");
}

static char *docker_host_of(struct sbx_cli *cli, const char *provider, sbx_error_t **err)
{
    struct sbx_config *cfg = sbx_cli_config(cli);
    const char *dir = sbx_cli_plugin_dir(cli);
    struct sbx_open_instance *oi;
    const struct sbx_opt_value *v;
    const char *env = getenv("DOCKER_HOST");
    char *out;

    if (cfg == NULL || dir == NULL) {
        sbx_error_set(err, SBX_E_CONFIG, "configuration failed");
        return NULL;
    }
    oi = sbx_instance_load(cfg, dir, provider ? provider : cfg->provider, SBX_PLUGIN_PROVIDER,
                           err);
    if (oi == NULL) {
        return NULL;
    }
    if (strcmp(oi->cfg->plugin, "provider_docker") != 0) {
        sbx_error_set(err, SBX_E_USAGE, "provider '%s' uses %s; sbx image build needs a "
                      "provider_docker instance", oi->cfg->name, oi->cfg->plugin);
        sbx_instance_close(oi);
        return NULL;
    }
    v = sbx_options_get(oi->opts, "socket");
    if (v != NULL && v->present && v->str != NULL) {
        out = xasprintf("unix://%s", v->str);
    }
    else if (env != NULL && env[0] != '\0') {
        out = xstrdup(env);
    }
    else {
        out = xstrdup("unix:///var/run/docker.sock");
    }
    sbx_instance_close(oi);
    return out;
}

static int run_script(char *const *argv, char *tag, size_t tag_size)
{
    int pfd[2];
    pid_t pid;
    int status = 0;
    char buf[4096];
    size_t got = 0;

    if (pipe(pfd) < 0) {
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execv(argv[0], argv);
        fprintf(stderr, "sbx: error: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    for (;;) {
        ssize_t n = read(pfd[0], buf + got, sizeof(buf) - 1 - got);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
        if (got == sizeof(buf) - 1) {
            got = 0;
        }
    }
    close(pfd[0]);
    buf[got] = '\0';
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(tag, tag_size, "%.200s", buf);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
        {"definition", required_argument, NULL, 'd'}, {"provider", required_argument, NULL, 'p'},
        {"cache", required_argument, NULL, 'c'},      {"json", no_argument, NULL, 'j'},
        {"sidecar", no_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    const char *definition = NULL;
    const char *provider = NULL;
    const char *cache_opt = NULL;
    cleanup_free char *def_path = NULL;
    cleanup_free char *script = NULL;
    cleanup_free char *docker_host = NULL;
    cleanup_free char *cache = NULL;
    cleanup_free char *packages = NULL;
    cleanup_free char *npm = NULL;
    cleanup_free char *canonical = NULL;
    const char *const *pkgv;
    const char *repo = "sbx-sandbox";
    int sidecar = 0;
    struct sbx_image_def *d = NULL;
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    char **args = NULL;
    size_t na = 0;
    char tag[256];
    size_t first_change;
    int json = 0;
    int c;
    int rc;
    struct sbx_args a = {
        .cmd = "image build", .help = "image", .opts = opts, .argc = argc - 1, .argv = argv + 1};

    if (argc < 2 || strcmp(argv[1], "build") != 0) {
        fprintf(stderr, "sbx: error: usage: sbx image build [OPTIONS] (see 'sbx image --help')\n");
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
        default:
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    def_path = sbx_image_def_find(definition, &err);
    d = def_path ? sbx_image_def_load(def_path, &err) : NULL;
    docker_host = d ? docker_host_of(cli, provider, &err) : NULL;
    if (docker_host == NULL) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        sbx_image_def_free(d);
        return rc == SBX_EXIT_FAIL ? SBX_EXIT_USAGE : rc;
    }
    script = sbx_libexec_path("sbx-image-build");
    if (script == NULL) {
        fprintf(stderr, "sbx: error: helper sbx-image-build not found (set SBX_LIBEXEC_DIR)\n");
        sbx_image_def_free(d);
        return SBX_EXIT_FAIL;
    }
    if (cache_opt != NULL) {
        cache = xstrdup(cache_opt);
    }
    else {
        cleanup_free char *state = sbx_state_dir(cfg->state_dir, &err);

        if (state == NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            sbx_image_def_free(d);
            return SBX_EXIT_FAIL;
        }
        cache = xasprintf("%s/image-cache", state);
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
    packages = join_strv(pkgv, ",");
    if (!sidecar && d->npm != NULL) {
        npm = join_strv((const char *const *)d->npm, " ");
    }
    args = xcalloc(32 + 2 * 64, sizeof(char *));
    args[na++] = script;
    args[na++] = "--repo";
    args[na++] = (char *)repo;
    if (npm != NULL) {
        args[na++] = "--npm";
        args[na++] = npm;
    }
    args[na++] = "--spec";
    args[na++] = canonical;
    args[na++] = "--suite";
    args[na++] = d->suite;
    args[na++] = "--packages";
    args[na++] = packages;
    args[na++] = "--docker-host";
    args[na++] = docker_host;
    args[na++] = "--cache";
    args[na++] = cache;
    first_change = na;
    if (!sidecar) {
        args[na++] = "--change";
        args[na++] = xasprintf("WORKDIR %s", d->workdir);
        for (size_t i = 0; d->env != NULL && d->env[i] != NULL && na < 32 + 2 * 62; i++) {
            args[na++] = "--change";
            args[na++] = xasprintf("ENV %s", d->env[i]);
        }
        if (npm != NULL) {
            args[na++] = "--change";
            args[na++] = xstrdup("ENV NODE_PATH=/opt/sbx-node/node_modules");
        }
    }
    rc = run_script(args, tag, sizeof(tag));
    for (size_t i = first_change + 1; i < na; i += 2) {
        free(args[i]);
    }
    free(args);
    if (rc != 0 || tag[0] == '\0') {
        fprintf(stderr, "sbx: error: image build failed (exit %d)\n", rc);
        sbx_image_def_free(d);
        return SBX_EXIT_FAIL;
    }
    if (json) {
        cleanup_free char *current = xasprintf("%s:current", repo);
        json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[]}", "image", tag, "current",
                              current, "definition", d->path, "suite", d->suite, "packages",
                              "npm");

        for (size_t i = 0; pkgv[i] != NULL; i++) {
            json_array_append_new(json_object_get(o, "packages"), json_string(pkgv[i]));
        }
        for (size_t i = 0; !sidecar && d->npm != NULL && d->npm[i] != NULL; i++) {
            json_array_append_new(json_object_get(o, "npm"), json_string(d->npm[i]));
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
    return SBX_EXIT_OK;
}
