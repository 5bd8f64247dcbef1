/* cmd_submit.c - `sbx submit` and `sbx cancel`: clients of the runner. */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/task_opts.h"
#include "http/http.h"
#include "runner/runner.h"
#include "util/log.h"
#include "util/xalloc.h"

void sbx_cmd_submit_help(FILE *out)
{
    fprintf(out, "usage: sbx submit [OPTIONS] -- CMD [ARGS...]\n"
                 "\n"
                 "Submits a job to the runner ('sbx serve') and prints its id. A job naming a\n"
                 "task that runs in the runner executes in that task's sandbox; an agent job\n"
                 "with a new --task starts the task and keeps it (its slot too) until\n"
                 "'sbx cancel --task ID' or its idle time; every other job is a one-command task.\n"
                 "\n"
                 "  --task ID         run in this task (an agent task is kept; see above)\n"
                 "  --pool ci|agent   slot pool (default ci)\n"
                 "  --class CLASS     light (default) or heavy (the pool's exclusive heavy slot)\n"
                 "  --label K=V       a label for the policies (repeatable)\n"
                 "  --worktree DIR    host directory mounted at /workspace\n"
                 "  --provider NAME   provider instance (default: the policy's, else config)\n"
                 "  --credentials NAME  credential instance whose lease CMD gets\n"
                 "  --env K=V         a variable for CMD (repeatable), as 'sbx run --env'; the\n"
                 "                    job record shows the names only\n"
                 "  --json            print the runner's reply as JSON\n"
                 "\n"
                 "Exit status: 0 accepted; 2 usage; 125 refused or the runner is not reachable.\n");
}

void sbx_cmd_cancel_help(FILE *out)
{
    fprintf(out,
            "usage: sbx cancel JOB [--json]\n"
            "       sbx cancel --task TASK [--json]\n"
            "\n"
            "Cancels a queued or running job (its record stays, state cancelled), or ends\n"
            "a task kept by the runner (its sandbox is removed, its slot freed).\n"
            "\n"
            "  --task TASK   end the runner's task TASK instead of cancelling a job\n"
            "  --json        print the runner's reply as JSON\n"
            "\n"
            "Exit status: 0 done; 1 failed (unknown job, already ended, runner down); 2 usage.\n");
}

/* One option of `sbx submit` into the request o, its labels or env. -1 having
 * said why. */
static int submit_option(int c, json_t *o, json_t *labels, json_t *env)
{
    sbx_error_t *err = NULL;

    switch (c) {
    case 't':
        json_object_set_new(o, "task", json_string(optarg));
        return 0;
    case 'p':
        json_object_set_new(o, "pool", json_string(optarg));
        return 0;
    case 'C':
        json_object_set_new(o, "class", json_string(optarg));
        return 0;
    case 'l': {
        char *eq = strchr(optarg, '=');

        if (eq == NULL || eq == optarg) {
            fprintf(stderr, "sbx: error: --label '%s': use K=V\n", optarg);
            return -1;
        }
        *eq = '\0';
        json_object_set_new(labels, optarg, json_string(eq + 1));
        return 0;
    }
    case 'w': {
        char *real = realpath(optarg, NULL);

        if (real == NULL) {
            fprintf(stderr, "sbx: error: --worktree %s: no such directory\n", optarg);
            return -1;
        }
        json_object_set_new(o, "worktree", json_string(real));
        free(real);
        return 0;
    }
    case 'P':
        json_object_set_new(o, "provider", json_string(optarg));
        return 0;
    case 'c':
        json_object_set_new(o, "credentials", json_string(optarg));
        return 0;
    case 'e': {
        struct sbx_kv kv;

        if (sbx_env_arg_parse(optarg, &kv, &err) < 0) {
            fprintf(stderr, "sbx: error: submit: %s\n", sbx_error_msg(err));
            sbx_error_free(&err);
            return -1;
        }
        json_object_set_new(env, kv.name, json_string(kv.value));
        return 0;
    }
    default:
        return -1;
    }
}

/* The job `sbx submit` asks for (the body of POST /v1/jobs), from its options
 * and the command after them; NULL having said why. */
static json_t *submit_request(int argc, char **argv, int *json)
{
    static const struct option opts[] = {
        {"task", required_argument, NULL, 't'},
        {"pool", required_argument, NULL, 'p'},
        {"class", required_argument, NULL, 'C'},
        {"label", required_argument, NULL, 'l'},
        {"worktree", required_argument, NULL, 'w'},
        {"provider", required_argument, NULL, 'P'},
        {"credentials", required_argument, NULL, 'c'},
        {"env", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'j'},
        {NULL, 0, NULL, 0},
    };
    struct sbx_args a = {.cmd = "submit", .opts = opts, .in_order = 1, .argc = argc, .argv = argv};
    json_t *o = json_object();
    json_t *labels = json_object();
    json_t *env = json_object();
    json_t *cmd = json_array();
    int ok = 1;
    int c;

    while (ok && (c = sbx_args_next(&a)) != -1) {
        if (c == 'j') {
            *json = 1;
        }
        else {
            ok = submit_option(c, o, labels, env) == 0;
        }
    }
    if (ok && optind >= argc) {
        fprintf(stderr, "sbx: error: submit: no command (sbx submit [OPTIONS] -- CMD...)\n");
        ok = 0;
    }
    for (int i = optind; ok && i < argc; i++) {
        json_array_append_new(cmd, json_string(argv[i]));
    }
    if (ok) {
        json_object_set(o, "argv", cmd);
        if (json_object_size(labels) > 0) {
            json_object_set(o, "labels", labels);
        }
        if (json_object_size(env) > 0) {
            json_object_set(o, "env", env);
        }
    }
    json_decref(labels);
    json_decref(env);
    json_decref(cmd);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int sbx_cmd_submit(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *cfg;
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    json_t *o;
    char *body;
    int json = 0;

    o = submit_request(argc, argv, &json);
    if (o == NULL) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        json_decref(o);
        return SBX_EXIT_USAGE;
    }
    body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (sbx_runner_call(cfg, "POST", "/v1/jobs", body, NULL, NULL, &resp, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        free(body);
        return SBX_EXIT_SBX;
    }
    free(body);
    if (json) {
        printf("%s", resp.body);
    }
    else {
        json_t *r = json_loadb(resp.body, resp.body_len, 0, NULL);

        printf("%s\n", json_string_value(json_object_get(r, "id")));
        json_decref(r);
    }
    sbx_http_response_free(&resp);
    return SBX_EXIT_OK;
}

int sbx_cmd_cancel(struct sbx_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"task", required_argument, NULL, 't'},
                                         {"json", no_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "cancel", .opts = opts, .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    const char *id = NULL;
    char *path;
    int task = 0;
    int json = 0;
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 't') {
            task = 1;
            id = optarg;
        }
        else if (c == 'j') {
            json = 1;
        }
        else {
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, task ? 0 : 1, task ? 0 : 1, "the job id (or --task TASK)") < 0) {
        return SBX_EXIT_USAGE;
    }
    if (!task) {
        id = a.argv[optind];
    }
    if (strlen(id) == 0 || strlen(id) > 63 ||
        strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:-") !=
            strlen(id)) {
        fprintf(stderr, "sbx: error: '%.80s' is not a job or task id\n", id);
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    path = task ? xasprintf("/v1/tasks/%s/end", id) : xasprintf("/v1/jobs/%s/cancel", id);
    if (sbx_runner_call(cfg, "POST", path, "{}", NULL, NULL, &resp, &err) < 0) {
        free(path);
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_FAIL;
    }
    free(path);
    if (json) {
        json_t *r = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
        char *s;

        if (!json_is_object(r)) { /* an empty reply: say what was done */
            json_decref(r);
            r = json_pack("{s:s, s:s}", task ? "task" : "id", id, "state",
                          task ? "ended" : "cancelling");
        }
        s = json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        printf("%s\n", s);
        free(s);
        json_decref(r);
    }
    sbx_http_response_free(&resp);
    return SBX_EXIT_OK;
}
