/* cmd_snapshot.c - (added) `sbx task snapshot|fork|allow|deny` and `sbx snapshot ls|rm`
 * (docs/tasks.md, "Snapshots and forks"; docs/egress.md, "Changing a running task's
 * egress"), and `sbx task start --from SNAP`. Embedded tasks only: each asks the task's
 * keeper, which holds the lease, the proxy socket and the provider. */
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/task_opts.h"
#include "runner/keeper.h"
#include "cli/task_runner.h"
#include "http/http.h"
#include "runner/runner.h"
#include "sandbox/snapshot.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/units.h"
#include "util/xalloc.h"

void sbx_cmd_snapshot_help(FILE *out)
{
    fprintf(out, "usage: sbx snapshot ls [--pool ci|agent] [--json]\n"
                 "       sbx snapshot rm SNAP... [--json]\n"
                 "       sbx snapshot rm --older-than DURATION [--json]\n"
                 "\n"
                 "Snapshots are content-addressed images of a task's files made by 'sbx task\n"
                 "snapshot T' or 'sbx task fork T' (never its mounts, never a value of its\n"
                 "credential lease). 'ls' lists them, oldest first (SNAP TASK POOL SIZE CREATED);\n"
                 "'rm' removes their images and records; --older-than removes those older than\n"
                 "DURATION (\"30m\", \"12h\", \"7d\"). Each pool keeps at most snapshot.quota\n"
                 "(10); snapshot.max_age (7d) removes old ones at the next snapshot, ls or rm.\n"
                 "Start a task from one with 'sbx task start --from SNAP'.\n"
                 "\n"
                 "Exit status: 0 ok, 1 failed (the engine; a snapshot in use), 2 usage\n"
                 "(a bad or unknown SNAP).\n");
}

static char *state_dir(struct sbx_cli *cli, struct sbx_config **cfg)
{
    sbx_error_t *err = NULL;
    char *s;

    *cfg = sbx_cli_config(cli);
    if (*cfg == NULL) {
        return NULL;
    }
    s = sbx_state_dir((*cfg)->state_dir, &err);
    if (s == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
    }
    return s;
}

static int fail(sbx_error_t **err)
{
    int rc = (*err)->code == SBX_E_NOTFOUND ? SBX_EXIT_USAGE : sbx_cli_exit_for(*err);

    sbx_cli_print_error(*err);
    sbx_error_free(err);
    return rc;
}

static void print_json(json_t *j)
{
    char *s = json_dumps(j, JSON_INDENT(2));

    printf("%s\n", s ? s : "null");
    free(s);
}

/* snapshot.max_age: old snapshots go at each ls and rm too (a failure is only logged). */
static void prune_old(struct sbx_config *cfg, struct sbx_cli *cli, const char *state)
{
    sbx_error_t *err = NULL;

    if (cfg->snapshot.max_age > 0 && sbx_snapshot_prune(cfg, sbx_cli_plugin_dir(cli), state,
                                                        cfg->snapshot.max_age, NULL, &err) < 0) {
        fprintf(stderr, "sbx: warn: snapshot.max_age: %s\n", err->msg);
        sbx_error_free(&err);
    }
}

static int snap_ls(struct sbx_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"pool", required_argument, NULL, 'P'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_args a = {
        .cmd = "snapshot ls", .help = "snapshot", .opts = opts, .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    const char *pool = NULL;
    char *state;
    json_t *arr;
    json_t *r;
    size_t i;
    int json = 0;
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 'j') {
            json = 1;
        }
        else if (c == 'P' && (strcmp(optarg, "ci") == 0 || strcmp(optarg, "agent") == 0)) {
            pool = optarg;
        }
        else {
            if (c == 'P') {
                sbx_args_error(&a, "--pool '%s': use ci or agent", optarg);
            }
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0 || (state = state_dir(cli, &cfg)) == NULL) {
        return SBX_EXIT_USAGE;
    }
    prune_old(cfg, cli, state);
    arr = sbx_snapshot_list(state, pool);
    if (json) {
        print_json(arr);
    }
    else {
        printf("%-16s %-24s %-6s %12s %-20s %s\n", "SNAP", "TASK", "POOL", "SIZE", "CREATED",
               "IMAGE");
        json_array_foreach(arr, i, r)
        {
            printf("%-16s %-24s %-6s %12lld %-20s %s\n",
                   json_string_value(json_object_get(r, "id")) ?: "?",
                   json_string_value(json_object_get(r, "task")) ?: "?",
                   json_string_value(json_object_get(r, "pool")) ?: "?",
                   (long long)json_integer_value(json_object_get(r, "size")),
                   json_string_value(json_object_get(r, "created_at")) ?: "?",
                   json_string_value(json_object_get(r, "ref")) ?: "?");
        }
    }
    json_decref(arr);
    free(state);
    return SBX_EXIT_OK;
}

static int snap_rm(struct sbx_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"older-than", required_argument, NULL, 'o'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_args a = {
        .cmd = "snapshot rm", .help = "snapshot", .opts = opts, .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    int64_t age = -1;
    json_t *removed = json_array();
    char *state;
    int json = 0;
    int rc = SBX_EXIT_OK;
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 'j') {
            json = 1;
        }
        else if (c == 'o') {
            if (sbx_duration_parse(optarg, &age, &err) < 0 || age <= 0) {
                sbx_args_error(&a, "--older-than '%s': %s", optarg,
                               err ? err->msg : "must be more than 0");
                sbx_error_free(&err);
                json_decref(removed);
                return SBX_EXIT_USAGE;
            }
        }
        else {
            json_decref(removed);
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, age > 0 ? 0 : 1, age > 0 ? 0 : -1, "SNAP...") < 0 ||
        (state = state_dir(cli, &cfg)) == NULL) {
        json_decref(removed);
        return SBX_EXIT_USAGE;
    }
    if (age > 0) {
        if (sbx_snapshot_prune(cfg, sbx_cli_plugin_dir(cli), state, age, removed, &err) < 0) {
            rc = fail(&err);
        }
    }
    for (int i = optind; i < a.argc; i++) {
        if (sbx_snapshot_remove(cfg, sbx_cli_plugin_dir(cli), state, a.argv[i], &err) < 0) {
            rc = fail(&err);
            continue;
        }
        json_array_append_new(removed, json_string(a.argv[i]));
    }
    if (json) {
        json_t *o = json_pack("{s:O}", "removed", removed);

        print_json(o);
        json_decref(o);
    }
    json_decref(removed);
    free(state);
    return rc;
}

int sbx_cmd_snapshot(struct sbx_cli *cli, int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "ls") == 0 || strcmp(argv[1], "list") == 0)) {
        return snap_ls(cli, argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "rm") == 0) {
        return snap_rm(cli, argc - 1, argv + 1);
    }
    fprintf(stderr, "sbx: error: snapshot: %s%s%s: use ls or rm (see 'sbx snapshot --help')\n",
            argc >= 2 ? "unknown subcommand '" : "no subcommand", argc >= 2 ? argv[1] : "",
            argc >= 2 ? "'" : "");
    return SBX_EXIT_USAGE;
}

/* ---- sbx task snapshot|fork|allow|deny, task start --from ----------------------- */

int sbx_cli_task_from(struct sbx_cli *cli, struct sbx_task_cli *o)
{
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    char *state = state_dir(cli, &cfg);
    json_t *rec = state ? sbx_snapshot_get(state, o->from, &err) : NULL;
    const char *prov = o->task.provider ? o->task.provider : cfg ? cfg->provider : NULL;
    const char *rp;

    free(state);
    if (rec == NULL) {
        if (err != NULL) {
            fprintf(stderr, "sbx: error: task start: --from: %s\n", err->msg);
            sbx_error_free(&err);
        }
        return -1;
    }
    rp = json_string_value(json_object_get(rec, "provider"));
    if (prov == NULL || rp == NULL || strcmp(prov, rp) != 0) {
        fprintf(stderr,
                "sbx: error: task start: --from %s: the snapshot is of provider '%s', the task's "
                "is '%s'\n",
                o->from, rp ? rp : "?", prov ? prov : "?");
        json_decref(rec);
        return -1;
    }
    snprintf(o->from_ref, sizeof(o->from_ref), "%s",
             json_string_value(json_object_get(rec, "ref")) ?: "");
    o->task.image = o->from_ref;
    json_decref(rec);
    return 0;
}

/* (changed, issue 31) One request to the runner that hosts the task (its keeper's):
 * its JSON reply, or NULL with err. */
static json_t *task_call(struct sbx_config *cfg, const char *state, const char *task,
                         const char *what, const char *body, sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    char *url;
    json_t *j;
    int rc;

    if (sbx_task_runner_use(cfg, state, task, err) < 0) {
        return NULL;
    }
    url = xasprintf("/v1/tasks/%s/%s", task, what);
    rc = sbx_task_runner_call(cfg, "POST", url, body, &resp, err);
    free(url);
    if (rc < 0) {
        return NULL;
    }
    j = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
    sbx_http_response_free(&resp);
    if (j == NULL) {
        sbx_error_set(err, SBX_E_PROTOCOL, "task '%s': malformed reply from its runner", task);
    }
    return j;
}

static int task_snapshot(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "task snapshot", .help = "task", .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    json_t *rec;
    char *state;
    int json = 0;

    if (sbx_args_json_only(&a, 1, 1, "TASK", &json) < 0 || (state = state_dir(cli, &cfg)) == NULL) {
        return SBX_EXIT_USAGE;
    }
    rec = task_call(cfg, state, a.argv[optind], "snapshot", "{}", &err);
    free(state);
    if (rec == NULL) {
        return fail(&err);
    }
    if (json) {
        print_json(rec);
    }
    else {
        printf("%s\n", json_string_value(json_object_get(rec, "id")) ?: "?");
    }
    json_decref(rec);
    return SBX_EXIT_OK;
}

static int task_fork(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_task_cli o;
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    const char *parent;
    char id[80];
    char *state;
    json_t *rec;
    int rc = SBX_EXIT_OK;

    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "sbx: error: task fork: TASK expected first (sbx task fork TASK "
                        "[OPTIONS])\n");
        return SBX_EXIT_USAGE;
    }
    parent = argv[1];
    if (sbx_task_cli_parse(&o, argc - 1, argv + 1, 0) < 0) {
        return SBX_EXIT_USAGE;
    }
    if (o.from != NULL) {
        fprintf(stderr, "sbx: error: task fork: --from belongs to 'sbx task start'\n");
        sbx_task_cli_fini(&o);
        return SBX_EXIT_USAGE;
    }
    state = state_dir(cli, &cfg);
    if (state == NULL || sbx_cli_plugin_dir(cli) == NULL) {
        free(state);
        sbx_task_cli_fini(&o);
        return SBX_EXIT_USAGE;
    }
    rec = task_call(cfg, state, parent, "snapshot?fork=1", "{}", &err);
    free(cfg->runner.listen); /* the fork's keeper is its own runner */
    cfg->runner.listen = NULL;
    if (rec == NULL) {
        free(state);
        sbx_task_cli_fini(&o);
        return fail(&err);
    }
    o.from = json_string_value(json_object_get(rec, "id"));
    if (sbx_cli_task_from(cli, &o) < 0) {
        rc = SBX_EXIT_FAIL;
    }
    if (rc == SBX_EXIT_OK && o.task.task_id == NULL) {
        sbx_task_id_new(id, sizeof(id));
        o.task.task_id = id;
    }
    if (rc == SBX_EXIT_OK && sbx_keeper_spawn(cfg, sbx_cli_plugin_dir(cli), &o.task, &err) < 0) {
        fprintf(stderr, "sbx: error: task fork: the fork of %s (snapshot %s, kept): %s\n", parent,
                o.from, err->msg);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
    }
    else if (rc == SBX_EXIT_OK && o.json) {
        cleanup_free char *path = xasprintf("%s/tasks/%s/task.json", state, o.task.task_id);
        json_t *t = json_load_file(path, 0, NULL);

        if (t != NULL) {
            json_object_set_new(t, "fork_of", json_string(parent));
            json_object_set(t, "snapshot", json_object_get(rec, "id"));
        }
        print_json(t);
        json_decref(t);
    }
    else if (rc == SBX_EXIT_OK) {
        printf("%s\n", o.task.task_id);
    }
    json_decref(rec);
    free(state);
    sbx_task_cli_fini(&o);
    return rc;
}

static int task_egress(struct sbx_cli *cli, const char *op, int argc, char **argv)
{
    char name[16];
    struct sbx_args a = {.cmd = name, .help = "task", .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    json_t *req;
    json_t *res;
    char *body;
    char *state;
    int json = 0;

    snprintf(name, sizeof(name), "task %s", op);
    if (sbx_args_json_only(&a, 2, 2, "TASK HOST[:PORT]", &json) < 0 ||
        (state = state_dir(cli, &cfg)) == NULL) {
        return SBX_EXIT_USAGE;
    }
    req = json_pack("{s:s}", op, a.argv[optind + 1]);
    body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    res = task_call(cfg, state, a.argv[optind], "egress", body, &err);
    free(body);
    free(state);
    if (res == NULL) {
        return fail(&err);
    }
    if (json) {
        print_json(res);
    }
    else {
        printf("%s %s%s (%s rule '%s')\n", op, json_string_value(json_object_get(res, "rule")),
               json_is_true(json_object_get(res, "changed")) ? "" : ": already so",
               json_string_value(json_object_get(res, "decided_by")),
               json_string_value(json_object_get(res, "policy_rule")));
    }
    json_decref(res);
    return SBX_EXIT_OK;
}

int sbx_cmd_task_extra(struct sbx_cli *cli, int argc, char **argv)
{
    if (strcmp(argv[1], "snapshot") == 0) {
        return task_snapshot(cli, argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "fork") == 0) {
        return task_fork(cli, argc - 1, argv + 1);
    }
    if (strcmp(argv[1], "allow") == 0 || strcmp(argv[1], "deny") == 0) {
        return task_egress(cli, argv[1], argc - 1, argv + 1);
    }
    return -1;
}
