/* cmd_task_files.c - `sbx task files|pause|resume` of a kept task, through its
 * keeper's runner (docs/tasks.md, "Files", "Pause and resume"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "sandbox/files.h"
#include "cli/task_runner.h"
#include "http/http.h"
#include "runner/runner.h"
#include "sandbox/statedir.h"
#include "sbx/sbx_util.h"
#include "util/xalloc.h"

/* (changed, issue 31) One request to the runner that hosts the task (its keeper's):
 * the API of docs/api.md, "Files and pause of a kept task"; *res (may be NULL) its
 * JSON reply. */
static int call(struct sbx_cli *cli, const char *task, const char *method, const char *url,
                json_t **res)
{
    struct sbx_config *cfg = sbx_cli_config(cli);
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *state;
    int rc;

    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    if ((state = sbx_state_dir(cfg->state_dir, &err)) == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_USAGE;
    }
    rc = sbx_task_runner_use(cfg, state, task, &err);
    free(state);
    if (rc == 0) {
        rc = sbx_task_runner_call(cfg, method, url, method[0] == 'P' ? "{}" : NULL, &resp, &err);
    }
    if (rc < 0) {
        sbx_cli_print_error(err);
        rc = err->code == SBX_E_USAGE ? SBX_EXIT_USAGE : SBX_EXIT_FAIL;
        sbx_error_free(&err);
        return rc;
    }
    if (res != NULL) {
        *res = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
    }
    sbx_http_response_free(&resp);
    return SBX_EXIT_OK;
}

static char *task_url(const char *task, const char *what, const char *path)
{
    char *t = sbx_url_escape(task);
    char *p = path != NULL ? sbx_url_escape(path) : NULL;
    char *u = path != NULL
                  ? xasprintf("/v1/tasks/%s/%s?path=%s&list=1", t ? t : "", what, p ? p : "")
                  : xasprintf("/v1/tasks/%s/%s", t ? t : "", what);

    free(t);
    free(p);
    return u;
}

int sbx_task_cmd_files(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "task files", .help = "task", .argc = argc, .argv = argv};
    sbx_error_t *err = NULL;
    json_t *res = NULL;
    json_t *l;
    json_t *e;
    char *url;
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
    url = task_url(a.argv[optind], "files", a.argv[optind + 1]);
    rc = call(cli, a.argv[optind], "GET", url, &res);
    free(url);
    if (rc != SBX_EXIT_OK) {
        return rc;
    }
    l = res; /* {path, entries, truncated} */
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
        char *url = task_url(a.argv[optind], "resume", NULL);

        rc = call(cli, a.argv[optind], "POST", url, NULL);
        free(url);
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
    {
        char *url = task_url(a.argv[optind], to_disk ? "pause?to_disk=1" : "pause", NULL);

        rc = call(cli, a.argv[optind], "POST", url, &res);
        free(url);
    }
    if (rc == SBX_EXIT_OK && json) {
        printf("{\"task\": \"%s\", \"state\": \"paused\"}\n", a.argv[optind]);
    }
    json_decref(res);
    return rc;
}
