/* backend_runner.c - the MCP tools when `runner.listen` is set: every call
 * goes to `sbx serve` over its API (docs/api.md), so pools, caps and policy
 * always apply (DESIGN.md, One implementation). A runner that does not
 * answer fails the call with the reason; nothing falls back to running in
 * this process. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "mcp/backend.h"
#include "runner/runner.h"
#include "util/log.h"
#include "util/xalloc.h"

struct runner {
    const struct sbx_config *cfg;
};

/* A call whose reply is a JSON object. */
static json_t *call_json(struct runner *r, const char *method, const char *path,
                         const char *body, sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    json_t *j;

    if (sbx_runner_call(r->cfg, method, path, body, NULL, NULL, &resp, err) < 0) {
        return NULL;
    }
    j = json_loadb(resp.body, resp.body_len, 0, NULL);
    sbx_http_response_free(&resp);
    if (j == NULL) {
        sbx_error_set(err, SBX_E_PROTOCOL, "runner: %s %s: the reply is not JSON", method, path);
    }
    return j;
}

struct follow {
    struct sbx_mcp_call *call;
    char *buf;
    size_t len;
    size_t total;
};

static int on_output(void *ud, const char *data, size_t len)
{
    struct follow *f = ud;
    size_t room = f->len < SBX_MCP_OUTPUT_CAP ? SBX_MCP_OUTPUT_CAP - f->len : 0;
    size_t n = len < room ? len : room;

    if (sbx_mcp_call_cancelled(f->call)) {
        return 1; /* stops the stream; the job is cancelled below */
    }
    f->buf = xrealloc(f->buf, f->len + n + 1);
    memcpy(f->buf + f->len, data, n);
    f->len += n;
    f->buf[f->len] = '\0';
    f->total += len;
    return 0;
}

/* The runner's record as the tool's job object. */
static json_t *job_object(json_t *rec, const char *output, size_t shown, size_t total)
{
    const char *st = json_string_value(json_object_get(rec, "state"));
    const char *state = st == NULL                         ? "failed"
                        : strcmp(st, "finished") == 0      ? "finished"
                        : strcmp(st, "cancelled") == 0     ? "cancelled"
                        : strcmp(st, "queued") == 0        ? "running"
                        : strcmp(st, "running") == 0       ? "running"
                                                           : "failed";
    json_t *o = json_pack("{s:s, s:O?, s:O?, s:s, s:O?, s:O?, s:s, s:s, s:s}", "mode", "runner",
                          "job", json_object_get(rec, "id"), "task",
                          json_object_get(rec, "task"), "state", state, "exit_status",
                          json_object_get(rec, "exit_status"), "reason",
                          json_object_get(rec, "reason"), "stdout", output ? output : "",
                          "stderr", "", "note",
                          "the runner streams stdout and stderr merged, in stdout");

    if (total > shown) {
        char note[160];

        snprintf(note, sizeof(note), "output truncated: %zu of %zu bytes shown", shown, total);
        json_object_set_new(o, "truncation", json_string(note));
    }
    json_object_set_new(o, "record", json_incref(rec) ? rec : json_null());
    return o;
}

static json_t *runner_run(void *ctx, const struct sbx_mcp_run *req, struct sbx_mcp_call *call,
                          sbx_error_t **err)
{
    struct runner *r = ctx;
    json_t *body = json_object();
    json_t *argv = json_array();
    struct follow f = {.call = call};
    struct sbx_http_response resp = {0};
    json_t *rep;
    json_t *rec;
    json_t *out;
    char *text;
    char *path;
    char id[96];

    for (size_t i = 0; req->argv[i] != NULL; i++) {
        json_array_append_new(argv, json_string(req->argv[i]));
    }
    json_object_set_new(body, "argv", argv);
    json_object_set_new(body, "pool", json_string(req->pool ? req->pool : "agent"));
    if (req->task != NULL) {
        json_object_set_new(body, "task", json_string(req->task));
    }
    if (req->worktree != NULL) {
        json_object_set_new(body, "worktree", json_string(req->worktree));
    }
    if (req->provider != NULL) {
        json_object_set_new(body, "provider", json_string(req->provider));
    }
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    rep = call_json(r, "POST", "/v1/jobs", text, err);
    free(text);
    if (rep == NULL) {
        return NULL;
    }
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(rep, "id")) ?: "");
    json_decref(rep);
    path = xasprintf("/v1/jobs/%s/output?follow=1", id);
    if (sbx_runner_call(r->cfg, "GET", path, NULL, on_output, &f, &resp, NULL) == 0) {
        sbx_http_response_free(&resp);
    }
    free(path);
    if (sbx_mcp_call_cancelled(call)) {
        path = xasprintf("/v1/jobs/%s/cancel", id);
        json_decref(call_json(r, "POST", path, "{}", NULL));
        free(path);
    }
    path = xasprintf("/v1/jobs/%s", id);
    rec = call_json(r, "GET", path, NULL, err);
    free(path);
    if (rec == NULL) {
        free(f.buf);
        return NULL;
    }
    out = job_object(rec, f.buf, f.len, f.total);
    json_decref(rec);
    free(f.buf);
    return out;
}

static json_t *runner_end(void *ctx, const char *task, sbx_error_t **err)
{
    char *path = xasprintf("/v1/tasks/%s/end", task);
    json_t *j = call_json(ctx, "POST", path, "{}", err);

    free(path);
    return j;
}

static json_t *runner_job(void *ctx, const char *job, sbx_error_t **err)
{
    struct runner *r = ctx;
    struct follow f = {0};
    struct sbx_http_response resp = {0};
    char *path = xasprintf("/v1/jobs/%s", job);
    json_t *rec = call_json(r, "GET", path, NULL, err);
    json_t *out;

    free(path);
    if (rec == NULL) {
        return NULL;
    }
    path = xasprintf("/v1/jobs/%s/output", job);
    if (sbx_runner_call(r->cfg, "GET", path, NULL, on_output, &f, &resp, NULL) == 0) {
        sbx_http_response_free(&resp);
    }
    free(path);
    out = job_object(rec, f.buf, f.len, f.total);
    json_decref(rec);
    free(f.buf);
    return out;
}

static json_t *runner_cancel(void *ctx, const char *job, sbx_error_t **err)
{
    char *path = xasprintf("/v1/jobs/%s/cancel", job);
    json_t *j = call_json(ctx, "POST", path, "{}", err);

    free(path);
    return j;
}

static json_t *runner_queue(void *ctx, sbx_error_t **err)
{
    json_t *q = call_json(ctx, "GET", "/v1/queue", NULL, err);

    if (q != NULL) {
        json_object_set_new(q, "mode", json_string("runner"));
    }
    return q;
}

static void runner_shutdown(void *ctx)
{
    (void)ctx; /* jobs belong to the runner: they go on */
}

static void runner_destroy(void *ctx)
{
    free(ctx);
}

static const struct sbx_mcp_backend_ops runner_ops = {
    .mode = "runner",
    .run = runner_run,
    .end = runner_end,
    .job = runner_job,
    .cancel = runner_cancel,
    .queue = runner_queue,
    .shutdown = runner_shutdown,
    .destroy = runner_destroy,
};

void sbx_mcp_backend_runner(const struct sbx_config *cfg, struct sbx_mcp_backend *out)
{
    struct runner *r = xcalloc(1, sizeof(*r));

    r->cfg = cfg;
    out->ops = &runner_ops;
    out->ctx = r;
}

int sbx_mcp_backend_open(const struct sbx_config *cfg, const char *plugin_dir,
                         struct sbx_mcp_backend *out, sbx_error_t **err)
{
    if (cfg->runner.listen != NULL && cfg->runner.listen[0] != '\0') {
        sbx_mcp_backend_runner(cfg, out);
        return 0;
    }
    return sbx_mcp_backend_embedded(cfg, plugin_dir, out, err);
}
