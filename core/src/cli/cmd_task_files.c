/* cmd_task_files.c - `sbx task files|pause|resume` of a kept task, through its
 * keeper (docs/tasks.md, "Files", "Pause and resume"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "sandbox/files.h"
#include "sandbox/keeper_files.h"
#include "sandbox/statedir.h"

static int call(struct sbx_cli *cli, const char *task, json_t *req, json_t **res)
{
    struct sbx_config *cfg = sbx_cli_config(cli);
    sbx_error_t *err = NULL;
    char *state;
    int rc;

    if (cfg == NULL) {
        json_decref(req);
        return SBX_EXIT_USAGE;
    }
    if ((state = sbx_state_dir(cfg->state_dir, &err)) == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        json_decref(req);
        return SBX_EXIT_USAGE;
    }
    rc = sbx_keeper_files_call(state, task, req, NULL, 0, NULL, NULL, res, &err);
    free(state);
    json_decref(req);
    if (rc < 0) {
        sbx_cli_print_error(err);
        rc = err->code == SBX_E_USAGE ? SBX_EXIT_USAGE : SBX_EXIT_FAIL;
        sbx_error_free(&err);
        return rc;
    }
    return SBX_EXIT_OK;
}

int sbx_task_cmd_files(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "task files", .help = "task", .argc = argc, .argv = argv};
    sbx_error_t *err = NULL;
    json_t *res = NULL;
    json_t *l;
    json_t *e;
    size_t i;
    int json = 0;
    int rc;

    if (sbx_args_json_only(&a, 2, 2, "TASK PATH", &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    if (sbx_files_path_ok(a.argv[optind + 1], "task files", &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_USAGE;
    }
    rc = call(cli, a.argv[optind],
              json_pack("{s:s, s:s}", "op", "files_list", "path", a.argv[optind + 1]), &res);
    if (rc != SBX_EXIT_OK) {
        return rc;
    }
    l = json_object_get(res, "listing");
    if (json) {
        char *s = json_dumps(l, JSON_INDENT(2));

        printf("%s\n", s ? s : "{}");
        free(s);
    }
    else {
        json_array_foreach(json_object_get(l, "entries"), i, e)
        {
            time_t mt = (time_t)json_integer_value(json_object_get(e, "mtime"));
            struct tm tm;
            char when[32];

            gmtime_r(&mt, &tm);
            strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
            printf("%-7s %s %12lld %s %s\n", json_string_value(json_object_get(e, "type")),
                   json_string_value(json_object_get(e, "mode")),
                   (long long)json_integer_value(json_object_get(e, "size")), when,
                   json_string_value(json_object_get(e, "name")));
        }
        if (json_is_true(json_object_get(l, "truncated"))) {
            fprintf(stderr, "sbx: warning: task files: the listing was cut at %d entries\n",
                    SBX_FILES_LIST_MAX);
        }
    }
    json_decref(res);
    return SBX_EXIT_OK;
}

int sbx_task_cmd_pause(struct sbx_cli *cli, int argc, char **argv, int resume)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"to-disk", no_argument, NULL, 'd'}, {NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = resume ? "task resume" : "task pause",
                         .help = "task",
                         .opts = resume ? NULL : opts,
                         .argc = argc,
                         .argv = argv};
    json_t *res = NULL;
    int json = 0;
    int to_disk = 0;
    int c;
    int rc;

    if (resume) {
        if (sbx_args_json_only(&a, 1, 1, "TASK", &json) < 0) {
            return SBX_EXIT_USAGE;
        }
        rc = call(cli, a.argv[optind], json_pack("{s:s}", "op", "resume"), NULL);
        if (rc == SBX_EXIT_OK && json) {
            printf("{\"task\": \"%s\", \"state\": \"running\"}\n", a.argv[optind]);
        }
        return rc;
    }
    while ((c = sbx_args_next(&a)) != -1) {
        if (c == '?') {
            return SBX_EXIT_USAGE;
        }
        json |= c == 'j';
        to_disk |= c == 'd';
    }
    if (sbx_args_operands(&a, 1, 1, "TASK") < 0) {
        return SBX_EXIT_USAGE;
    }
    rc =
        call(cli, a.argv[optind], json_pack("{s:s, s:b}", "op", "pause", "to_disk", to_disk), &res);
    if (rc == SBX_EXIT_OK && json) {
        printf("{\"task\": \"%s\", \"state\": \"paused\"}\n", a.argv[optind]);
    }
    json_decref(res);
    return rc;
}
