/* cmd_policy.c - `sbx policy check|eval|test`. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "policy/policy.h"
#include "util/cleanup.h"

void sbx_cmd_policy_help(FILE *out)
{
    fprintf(
        out,
        "usage: sbx policy check [DIR] [--json]\n"
        "       sbx policy eval --job FILE|- [--dir DIR] [--json]\n"
        "       sbx policy test [DIR] [--json]\n"
        "\n"
        "Policy scripts decide each job's limits (limits.lua), egress allow-list\n"
        "(egress.lua) and slot class (slots.lua); see docs/policy.md.\n"
        "\n"
        "  check  loads the three scripts of DIR and decides sample jobs with them.\n"
        "  eval   decides the job read from FILE (or stdin with -) and prints the\n"
        "         decision as JSON, with the script that decided each part.\n"
        "  test   runs DIR/*_test.lua and prints 'N passed, N failed'.\n"
        "\n"
        "DIR defaults to the configured policy_dir, else $SBX_POLICY_DIR, else the\n"
        "policies shipped with the binary (share/sbx/policies under its prefix).\n"
        "Job JSON: {\"id\", \"task\", \"pool\": \"ci\"|\"agent\", \"argv\": [...], \"workdir\",\n"
        "\"repository\", \"provider\", \"labels\": {...}, \"requested\": {\"cpus\", \"memory\",\n"
        "\"disk\", \"pids\", \"idle\", \"max\"}}.\n"
        "\n"
        "Exit status: 0 ok, 1 a policy failed or denied the job, 2 usage or\n"
        "configuration error.\n");
}

struct opts {
    const char *dir;
    const char *job;
    int json;
};

static int parse(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"dir", required_argument, NULL, 'd'},
        {"job", required_argument, NULL, 'j'},
        {"json", no_argument, NULL, 'J'},
        {NULL, 0, NULL, 0},
    };
    char cmd[32];
    struct sbx_args a = {
        .cmd = cmd, .help = "policy", .opts = longopts, .argc = argc, .argv = argv};
    int c;

    snprintf(cmd, sizeof(cmd), "policy %s", argv[0]);
    while ((c = sbx_args_next(&a)) != -1) { /* options may follow DIR */
        switch (c) {
        case 'd':
            o->dir = optarg;
            break;
        case 'j':
            o->job = optarg;
            break;
        case 'J':
            o->json = 1;
            break;
        default:
            return -1;
        }
    }
    if (sbx_args_operands(&a, 0, o->dir != NULL ? 0 : 1, "") < 0) {
        return -1;
    }
    if (optind < argc) {
        o->dir = argv[optind];
    }
    return 0;
}

static char *resolve_dir(struct sbx_config *c, const struct opts *o)
{
    sbx_error_t *err = NULL;
    char *dir = sbx_policy_dir_resolve(o->dir != NULL ? o->dir : c->policy_dir, &err);

    if (dir == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
    }
    return dir;
}

static int fail_json(const struct opts *o, const sbx_error_t *err)
{
    sbx_cli_print_error(err);
    if (o->json) {
        json_t *j = json_pack("{s:b, s:s}", "ok", 0, "error", sbx_error_msg(err));

        json_dumpf(j, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(j);
    }
    return SBX_EXIT_FAIL;
}

static int cmd_check(struct sbx_config *c, const struct opts *o)
{
    cleanup_free char *dir = resolve_dir(c, o);
    cleanup_error sbx_error_t *err = NULL;

    if (dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (sbx_policy_check(dir, c, &err) < 0) {
        return err->code == SBX_E_CONFIG ? (sbx_cli_print_error(err), SBX_EXIT_USAGE)
                                         : fail_json(o, err);
    }
    if (o->json) {
        printf("{\"ok\": true, \"dir\": \"%s\"}\n", dir);
    }
    else {
        printf("%s: ok (limits.lua, egress.lua, slots.lua)\n", dir);
    }
    return SBX_EXIT_OK;
}

static int cmd_eval(struct sbx_config *c, const struct opts *o)
{
    cleanup_free char *dir = NULL;
    cleanup_error sbx_error_t *err = NULL;
    struct sbx_policy_decision d;
    struct sbx_job_desc *job;
    struct sbx_policy *p;
    json_error_t jerr;
    json_t *j;
    int rc;

    if (o->job == NULL) {
        fprintf(stderr, "sbx: error: policy eval: --job FILE|- is required\n");
        return SBX_EXIT_USAGE;
    }
    j = strcmp(o->job, "-") == 0 ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                                 : json_load_file(o->job, JSON_REJECT_DUPLICATES, &jerr);
    if (j == NULL) {
        fprintf(stderr, "sbx: error: %s:%d: %s\n", strcmp(o->job, "-") == 0 ? "stdin" : o->job,
                jerr.line, jerr.text);
        return SBX_EXIT_USAGE;
    }
    job = sbx_policy_job_from_json(j, &err);
    json_decref(j);
    if (job == NULL) {
        sbx_cli_print_error(err);
        return SBX_EXIT_USAGE;
    }
    dir = resolve_dir(c, o);
    if (dir == NULL) {
        sbx_policy_job_free(job);
        return SBX_EXIT_USAGE;
    }
    p = sbx_policy_load(dir, c, &err);
    if (p == NULL) {
        sbx_policy_job_free(job);
        return err->code == SBX_E_CONFIG ? (sbx_cli_print_error(err), SBX_EXIT_USAGE)
                                         : fail_json(o, err);
    }
    rc = sbx_policy_decide(p, job, &d, &err);
    sbx_policy_job_free(job);
    sbx_policy_destroy(p);
    if (rc < 0) {
        return fail_json(o, err);
    }
    j = sbx_policy_decision_to_json(&d);
    json_dumpf(j, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    fputc('\n', stdout);
    json_decref(j);
    sbx_policy_decision_fini(&d);
    return SBX_EXIT_OK;
}

struct test_report {
    int json;
    json_t *failures;
};

static void on_failure(void *userdata, const char *file, const char *test, const char *message)
{
    struct test_report *r = userdata;

    if (r->json) {
        json_array_append_new(r->failures, json_pack("{s:s, s:s, s:s}", "file", file, "test", test,
                                                     "message", message));
    }
    else {
        printf("FAIL %s: %s: %s\n", file, test, message);
    }
}

static int cmd_test(struct sbx_config *c, const struct opts *o)
{
    cleanup_free char *dir = resolve_dir(c, o);
    cleanup_error sbx_error_t *err = NULL;
    struct test_report r = {o->json, json_array()};
    int passed = 0;
    int failed = 0;

    if (dir == NULL) {
        json_decref(r.failures);
        return SBX_EXIT_USAGE;
    }
    if (sbx_policy_test_dir(dir, c, on_failure, &r, &passed, &failed, &err) < 0) {
        json_decref(r.failures);
        return err->code == SBX_E_CONFIG ? (sbx_cli_print_error(err), SBX_EXIT_USAGE)
                                         : fail_json(o, err);
    }
    if (o->json) {
        json_t *j = json_pack("{s:i, s:i, s:o}", "passed", passed, "failed", failed, "failures",
                              r.failures);

        json_dumpf(j, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(j);
    }
    else {
        json_decref(r.failures);
        printf("%d passed, %d failed\n", passed, failed);
    }
    return failed > 0 ? SBX_EXIT_FAIL : SBX_EXIT_OK;
}

int sbx_cmd_policy(struct sbx_cli *cli, int argc, char **argv)
{
    struct opts o = {0};
    struct sbx_config *c;

    if (argc < 2) {
        fprintf(stderr, "sbx: error: usage: sbx policy check|eval|test (see 'sbx policy "
                        "--help')\n");
        return SBX_EXIT_USAGE;
    }
    if (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "eval") != 0 &&
        strcmp(argv[1], "test") != 0) {
        fprintf(stderr, "sbx: error: policy: unknown subcommand '%s' (check, eval or test)\n",
                argv[1]);
        return SBX_EXIT_USAGE;
    }
    if (parse(argc - 1, argv + 1, &o) < 0) {
        return SBX_EXIT_USAGE;
    }
    if (strcmp(argv[1], "eval") != 0 && o.job != NULL) {
        fprintf(stderr, "sbx: error: policy %s: --job is for 'policy eval'\n", argv[1]);
        return SBX_EXIT_USAGE;
    }
    c = sbx_cli_config(cli);
    if (c == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (strcmp(argv[1], "check") == 0) {
        return cmd_check(c, &o);
    }
    if (strcmp(argv[1], "eval") == 0) {
        return cmd_eval(c, &o);
    }
    return cmd_test(c, &o);
}
