/* task_runner.c - (added, issue 31) `sbx exec` and `sbx task end` through the
 * runner that hosts a kept task (task_runner.h). */
#include "cli/task_runner.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "runner/runner.h"
#include "sandbox/keeper.h"
#include "sandbox/owner.h"
#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "util/fileio.h"
#include "util/xalloc.h"

int sbx_task_runner_use(struct sbx_config *cfg, const char *state, const char *task,
                        sbx_error_t **err)
{
    char *sock;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        return sbx_error_set(err, SBX_E_USAGE, "'%s' is not a valid task id", task);
    }
    sock = sbx_keeper_runner_socket(state, task);
    if (sock == NULL) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "no running task '%s' (sbx task list)", task);
    }
    free(cfg->runner.listen);
    cfg->runner.listen = xasprintf("unix:%s", sock);
    free(sock);
    return 0;
}

int sbx_task_runner_call(struct sbx_config *cfg, const char *method, const char *url,
                         const char *body, struct sbx_http_response *resp, sbx_error_t **err)
{
    static const struct {
        const char *status;
        int code;
    } codes[] = {
        {"(HTTP 400)", SBX_E_USAGE}, {"(HTTP 404)", SBX_E_NOTFOUND}, {"(HTTP 422)", SBX_E_POLICY}};
    const char *msg;
    const char *tail;
    int code = SBX_E_GENERIC;

    if (sbx_runner_call(cfg, method, url, body, NULL, NULL, resp, err) == 0) {
        return 0;
    }
    /* "runner: MSG (HTTP N)": the keeper's runner is no runner to its user */
    msg = sbx_error_msg(*err);
    if (msg != NULL && strncmp(msg, "runner not reachable", 20) == 0) {
        /* its socket is there and nobody answers: the keeper was killed */
        char *was = xstrdup(msg);

        sbx_error_free(err);
        sbx_error_set(err, SBX_E_ENGINE, "the task's keeper is not answering (%s)", was + 7);
        free(was);
        return -1;
    }
    tail = msg != NULL ? strrchr(msg, '(') : NULL;
    if (msg == NULL || strncmp(msg, "runner: ", 8) != 0 || tail == NULL ||
        strncmp(tail, "(HTTP ", 6) != 0 || tail < msg + 9) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        if (strcmp(tail, codes[i].status) == 0) {
            code = codes[i].code;
        }
    }
    {
        char *inner = xstrndup(msg + 8, (size_t)(tail - 1 - (msg + 8)));

        sbx_error_free(err);
        sbx_error_set(err, code, "%s", inner);
        free(inner);
    }
    return -1;
}

struct out_to {
    sbx_output_fn out;
    void *ud;
};

static int on_output(void *ud, int stream, const char *data, size_t len)
{
    struct out_to *o = ud;

    if (o->out != NULL) {
        return o->out(o->ud, stream, data, len) != 0;
    }
    sbx_write_all(stream == 2 ? 2 : 1, data, len);
    return 0;
}

static int discard(void *ud, int stream, const char *data, size_t len)
{
    (void)ud;
    (void)stream;
    (void)data;
    (void)len;
    return 0;
}

static char *exec_body(const char *task, const char *const *argv, const struct sbx_kv *env,
                       size_t n_env)
{
    json_t *jargv = json_array();
    json_t *req;
    char *body;

    for (size_t i = 0; argv[i] != NULL; i++) {
        json_array_append_new(jargv, json_string(argv[i]));
    }
    req = json_pack("{s:o, s:s, s:s}", "argv", jargv, "task", task, "pool", "agent");
    if (n_env > 0) {
        json_t *jenv = json_object();

        for (size_t i = 0; i < n_env; i++) { /* a name given twice: the last value */
            json_object_set_new(jenv, env[i].name, json_string(env[i].value));
        }
        json_object_set_new(req, "env", jenv);
    }
    body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

/* The job's end from its record: 0 with *status, or -1 (*code, err). */
static int job_result(struct sbx_config *cfg, const char *id, int *status, int *code,
                      sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    char *path = xasprintf("/v1/jobs/%s", id);
    json_t *rec;
    json_t *es;
    const char *reason;
    int rc;

    rc = sbx_runner_call(cfg, "GET", path, NULL, NULL, NULL, &resp, err);
    free(path);
    if (rc < 0) {
        return -1;
    }
    rec = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
    sbx_http_response_free(&resp);
    es = json_object_get(rec, "exit_status");
    reason = json_string_value(json_object_get(rec, "reason"));
    if (json_is_integer(es) && json_integer_value(es) >= 0) {
        *status = (int)json_integer_value(es);
        rc = 0;
        if (reason != NULL && (*status == 126 || *status == 127)) {
            /* why the command did not run, as before */
            *code = *status;
            sbx_error_set(err, *status == 126 ? SBX_E_NOEXEC : SBX_E_NOCMD, "%s", reason);
            rc = -1;
        }
    }
    else {
        sbx_error_set(err, SBX_E_ENGINE, "%s",
                      reason ? reason : "the command ended without an exit status");
        rc = -1;
    }
    json_decref(rec);
    return rc;
}

int sbx_task_runner_exec(struct sbx_config *cfg, const char *task, const char *const *argv,
                         const struct sbx_kv *env, size_t n_env, const volatile int *interrupted,
                         sbx_output_fn out, void *ud, int *status, int *code, sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    struct out_to o = {.out = out, .ud = ud};
    char *body = exec_body(task, argv, env, n_env);
    char id[96];
    int rc;

    *code = 125;
    rc = sbx_task_runner_call(cfg, "POST", "/v1/jobs", body, &resp, err);
    /* the request may hold --env values: scrub our copy */
    explicit_bzero(body, strlen(body));
    free(body);
    if (rc < 0) {
        return -1;
    }
    {
        json_t *rep = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);

        snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(rep, "id")) ?: "");
        json_decref(rep);
        sbx_http_response_free(&resp);
    }
    if (!sbx_id_valid(id, SBX_ID_TASK)) {
        return sbx_error_set(err, SBX_E_PROTOCOL, "the task's runner sent no job id");
    }
    rc = sbx_runner_follow(cfg, id, on_output, &o, interrupted, NULL, err);
    if (rc < 0 && interrupted != NULL && *interrupted) {
        /* Ctrl-C: the command is cancelled and its end awaited (as the keeper
         * cancelled it when its client went away) */
        char *path = xasprintf("/v1/jobs/%s/cancel", id);

        sbx_error_free(err);
        if (sbx_runner_call(cfg, "POST", path, "{}", NULL, NULL, &resp, NULL) == 0) {
            sbx_http_response_free(&resp);
        }
        free(path);
        if (sbx_runner_follow(cfg, id, discard, NULL, NULL, NULL, NULL) < 0) {
            /* the runner went away: nothing more to wait for */
        }
        return sbx_error_set(err, SBX_E_CANCELLED, "interrupted");
    }
    if (rc < 0) {
        return -1;
    }
    return job_result(cfg, id, status, code, err);
}

int sbx_task_runner_end(struct sbx_config *cfg, const char *state, const char *task,
                        sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    char *path = xasprintf("/v1/tasks/%s/end", task);
    char *dir;
    char *rec;
    int rc = sbx_task_runner_call(cfg, "POST", path, "{}", &resp, err);

    free(path);
    if (rc < 0) {
        return -1;
    }
    sbx_http_response_free(&resp);
    /* the keeper ends the task, then stops its runner (which waits for what the
     * provider still removes in the background), then removes the runner's
     * directory: the end is over when that directory is gone, or when the keeper
     * is (killed: its record names it) */
    dir = xasprintf("%s/tasks/%s/runner", state, task);
    rec = xasprintf("%s/tasks/%s/task.json", state, task);
    for (int i = 0;; i++) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        char *real = realpath(dir, NULL);

        if (real == NULL) {
            break;
        }
        free(real);
        if (i % 50 == 49) {
            json_t *r = json_load_file(rec, 0, NULL);
            const char *owner = json_string_value(json_object_get(r, "owner"));
            int gone = owner != NULL && !sbx_owner_alive(owner);

            json_decref(r);
            if (gone) {
                break;
            }
        }
        nanosleep(&ts, NULL);
    }
    free(dir);
    free(rec);
    return 0;
}
