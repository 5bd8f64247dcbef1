/* cmd_task.c - `sbx task start|end|list`: tasks that hold one sandbox across
 * many commands (docs/architecture.md, Tasks). */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/task_opts.h"
#include "cli/task_runner.h"
#include "runner/keeper.h"
#include "sandbox/keeper.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

void sbx_cmd_task_help(FILE *out)
{
    fprintf(out,
            "usage: sbx task start [OPTIONS] [--json]\n"
            "       sbx task end TASK [--json]\n"
            "       sbx task list [--all] [--json]\n"
            "       sbx task snapshot TASK [--json]\n"
            "       sbx task fork TASK [OPTIONS] [--json]\n"
            "       sbx task allow TASK HOST[:PORT] [--json]\n"
            "       sbx task deny TASK HOST[:PORT] [--json]\n"
            "       sbx task files TASK PATH [--json]\n"
            "       sbx task pause TASK [--to-disk] [--json]\n"
            "       sbx task resume TASK [--json]\n"
            "\n"
            "A task is one sandbox for its whole life; its commands run with 'sbx exec'.\n"
            "'task start' starts a small keeper process that owns the sandbox, holds its\n"
            "slot and credential lease, ends it after the idle time (limits.idle, 60m)\n"
            "or the maximum lifetime (limits.max, 8h), and prints the task id.\n"
            "'task end' destroys the sandbox and revokes the lease. 'task list' shows\n"
            "running tasks (--all: ended ones too, whose records are kept).\n"
            "'task files' lists PATH in the sandbox (a directory's entries, or the file):\n"
            "type, mode, size, mtime (UTC), name; --json: {path, entries, truncated}.\n"
            "'task pause' freezes every process of the sandbox (no CPU at once, memory\n"
            "kept; the record's state is 'paused'; 'sbx exec' is refused until 'task\n"
            "resume', which continues them where they stopped). Paused time counts\n"
            "toward limits.idle and limits.max. --to-disk (checkpoint, memory freed) is\n"
            "not available with the docker provider and says so. Copy files with 'sbx cp'.\n"
            "'task start' waits, saying so on stderr with the numbers, while this box's\n"
            "sandbox slots (box.max_sandboxes) or memory (box.memory - box.host_reserve)\n"
            "are taken, and fails at once when limits.memory can never fit.\n"
            "'task snapshot' makes a content-addressed image of the task's files (not its\n"
            "worktree or other mounts, never a value of its lease; prints its id, see\n"
            "'sbx snapshot'); 'task start --from SNAP' starts from one; 'task fork' does\n"
            "both: a new task with its own id, limits, egress, lease and worktree (none\n"
            "unless --worktree) from the task's current files. 'task allow|deny' changes a\n"
            "running task's egress for its next connections, as egress.lua's change()\n"
            "decides; a refusal names the policy's rule.\n"
            "\n"
            "%s"
            "  --json               print the task record as JSON (start, end: the ended\n"
            "                       task's; list: an array)\n"
            "  --all                list: ended tasks too\n"
            "\n"
            "Exit status: 0 ok, 1 failed, 2 usage or configuration error.\n",
            SBX_TASK_OPTS_HELP);
}

static char *state_or_print(struct sbx_cli *cli)
{
    struct sbx_config *cfg = sbx_cli_config(cli);
    sbx_error_t *err = NULL;
    char *s;

    if (cfg == NULL) {
        return NULL;
    }
    s = sbx_state_dir(cfg->state_dir, &err);
    if (s == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
    }
    return s;
}

static json_t *read_record(const char *state, const char *task)
{
    cleanup_free char *path = xasprintf("%s/tasks/%s/task.json", state, task);

    return json_load_file(path, 0, NULL);
}

static void warn_unisolated(json_t *rec, const char *task)
{
    const char *iso = json_string_value(json_object_get(rec, "isolation"));
    json_t *un = json_object_get(rec, "unenforced");
    size_t i;
    json_t *v;

    if (iso == NULL || strcmp(iso, "sandbox") == 0) {
        return;
    }
    fprintf(stderr,
            "sbx: warn: task %s: provider \"%s\" is UNISOLATED (isolation: %s): it does "
            "not enforce",
            task, json_string_value(json_object_get(rec, "provider")) ?: "?", iso);
    json_array_foreach(un, i, v)
    {
        fprintf(stderr, "%s %s", i ? "," : "", json_string_value(v) ?: "?");
    }
    fprintf(stderr, "\n");
}

static int task_start(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_task_cli o;
    struct sbx_config *cfg;
    const char *dir;
    char id[80];
    sbx_error_t *err = NULL;
    int rc = SBX_EXIT_OK;

    if (sbx_task_cli_parse(&o, argc, argv, 0) < 0) {
        return SBX_EXIT_USAGE;
    }
    if (o.from != NULL && sbx_cli_task_from(cli, &o) < 0) { /* (added) --from SNAP */
        sbx_task_cli_fini(&o);
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    dir = cfg ? sbx_cli_plugin_dir(cli) : NULL;
    if (dir == NULL) {
        sbx_task_cli_fini(&o);
        return SBX_EXIT_USAGE;
    }
    if (o.task.task_id == NULL) {
        sbx_task_id_new(id, sizeof(id));
        o.task.task_id = id;
    }
    if (sbx_keeper_spawn(cfg, dir, &o.task, &err) < 0) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
    }
    else {
        char *state = state_or_print(cli);
        json_t *rec = state ? read_record(state, o.task.task_id) : NULL;

        /* the keeper's stderr is not ours: say here what an unisolated task lacks */
        warn_unisolated(rec, o.task.task_id);
        if (o.json) {
            char *s = rec ? json_dumps(rec, JSON_INDENT(2)) : NULL;

            printf("%s\n", s ? s : "{}");
            free(s);
        }
        else {
            printf("%s\n", o.task.task_id);
        }
        json_decref(rec);
        free(state);
    }
    sbx_task_cli_fini(&o);
    return rc;
}

static int task_end(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "task end", .help = "task", .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    const char *task;
    char *state;
    int rc = SBX_EXIT_OK;
    int json = 0;

    if (sbx_args_json_only(&a, 1, 1, "TASK", &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    task = a.argv[optind];
    state = state_or_print(cli);
    if (state == NULL) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    /* (changed, issue 31) through the runner that hosts the task (its keeper) */
    if (sbx_task_runner_use(cfg, state, task, &err) < 0 ||
        sbx_task_runner_end(cfg, state, task, &err) < 0) {
        sbx_cli_print_error(err);
        rc = err->code == SBX_E_USAGE ? SBX_EXIT_USAGE : SBX_EXIT_FAIL;
        sbx_error_free(&err);
    }
    else if (json) {
        json_t *rec = sbx_id_valid(task, SBX_ID_TASK) ? read_record(state, task) : NULL;
        char *s = rec ? json_dumps(rec, JSON_INDENT(2)) : NULL;

        printf("%s\n", s ? s : "{}");
        free(s);
        json_decref(rec);
    }
    free(state);
    return rc;
}

static int task_list(struct sbx_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"all", no_argument, NULL, 'a'}, {NULL, 0, NULL, 0}};
    cleanup_free char *tasks = NULL;
    json_t *arr = json_array();
    char *state;
    struct dirent *de;
    DIR *d;
    int json = 0;
    int all = 0;
    int c;
    struct sbx_args a = {
        .cmd = "task list", .help = "task", .opts = opts, .argc = argc, .argv = argv};

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 'j') {
            json = 1;
        }
        else if (c == 'a') {
            all = 1;
        }
        else {
            json_decref(arr);
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        json_decref(arr);
        return SBX_EXIT_USAGE;
    }
    state = state_or_print(cli);
    if (state == NULL) {
        json_decref(arr);
        return SBX_EXIT_USAGE;
    }
    tasks = xasprintf("%s/tasks", state);
    d = opendir(tasks);
    while (d != NULL && (de = readdir(d)) != NULL) {
        json_t *rec;
        cleanup_free char *sock = NULL;
        int live;

        if (!sbx_id_valid(de->d_name, SBX_ID_TASK)) {
            continue;
        }
        rec = read_record(state, de->d_name);
        if (rec == NULL) {
            continue;
        }
        sock = sbx_keeper_runner_socket(state, de->d_name); /* its keeper's runner */
        live = sock != NULL;
        if (!live && !all) {
            json_decref(rec);
            continue;
        }
        json_array_append_new(arr, rec);
    }
    if (d != NULL) {
        closedir(d);
    }
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2));

        printf("%s\n", s);
        free(s);
    }
    else {
        size_t i;
        json_t *r;

        printf("%-24s %-8s %-6s %-12s %-20s %s\n", "TASK", "STATE", "POOL", "PROVIDER", "CREATED",
               "REASON");
        json_array_foreach(arr, i, r)
        {
            printf("%-24s %-8s %-6s %-12s %-20s %s\n",
                   json_string_value(json_object_get(r, "task")) ?: "?",
                   json_string_value(json_object_get(r, "state")) ?: "?",
                   json_string_value(json_object_get(r, "pool")) ?: "?",
                   json_string_value(json_object_get(r, "provider")) ?: "?",
                   json_string_value(json_object_get(r, "created_at")) ?: "?",
                   json_string_value(json_object_get(r, "reason")) ?: "");
        }
    }
    json_decref(arr);
    free(state);
    return SBX_EXIT_OK;
}

int sbx_cmd_task(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *cfg = argc >= 2 && strcmp(argv[1], "list") != 0 ? sbx_cli_config(cli) : NULL;
    int rc;

    if (cfg != NULL && cfg->runner.listen != NULL) {
        fprintf(stderr, "sbx: error: task: runner.listen is set: the runner keeps agent tasks "
                        "('sbx submit --pool agent --task ID -- CMD', 'sbx cancel --task ID'); "
                        "'sbx task' manages embedded tasks only and does not fall back\n");
        return SBX_EXIT_USAGE;
    }
    if (argc >= 2 && strcmp(argv[1], "start") == 0) {
        return task_start(cli, argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "end") == 0) {
        return task_end(cli, argc - 1, argv + 1);
    }
    if (argc >= 2 && strcmp(argv[1], "list") == 0) {
        return task_list(cli, argc - 1, argv + 1);
    }
    if (argc >= 2 &&
        (rc = sbx_cmd_task_extra(cli, argc, argv)) >= 0) { /* (added) snapshot, fork, allow, deny */
        return rc;
    }
    if (argc >= 2 && strcmp(argv[1], "files") == 0) { /* (added, issue 30) cmd_task_files.c */
        return sbx_task_cmd_files(cli, argc - 1, argv + 1);
    }
    if (argc >= 2 && (strcmp(argv[1], "pause") == 0 || strcmp(argv[1], "resume") == 0)) {
        return sbx_task_cmd_pause(cli, argc - 1, argv + 1, argv[1][0] == 'r');
    }
    fprintf(stderr,
            "sbx: error: task: %s%s%s: use start, end, list, snapshot, fork, allow, deny, files, "
            "pause or resume (see 'sbx task --help')\n",
            argc >= 2 ? "unknown subcommand '" : "no subcommand", argc >= 2 ? argv[1] : "",
            argc >= 2 ? "'" : "");
    return SBX_EXIT_USAGE;
}
