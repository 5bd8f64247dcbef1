/* api_files.c - the files and the pause of a task kept by the runner (docs/api.md,
 * "Files and pause of a kept task"):
 *   GET  /v1/tasks/{id}/files?path=P          one regular file's bytes (at most 1 MiB)
 *   GET  /v1/tasks/{id}/files?path=P&list=1   the listing of P (JSON)
 *   PUT  /v1/tasks/{id}/files?path=P          writes one file (the body, at most 1 MiB)
 *   GET  ...files?path=P&archive=1            a tar archive of P (`sbx cp` out; 64 MiB)
 *   PUT  ...files?path=DIR&archive=1          a tar body extracted into DIR (`sbx cp` in)
 *   GET  ...files?path=P&stat=1               {"path", "dir": true|false}
 *   POST /v1/tasks/{id}/pause[?to_disk=1]     POST /v1/tasks/{id}/resume
 * Scope `submit` (what runs commands in a task) and the task's own client only (rows
 * of runner_api_routes[], api_routes.c, which check the method and scope). The
 * work is done on the loop's thread: each request is bounded (1 MiB, the engine's
 * timeouts), as the submit's own store writes are. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "runner/route.h"
#include "runner/runner_int.h"
#include "sbx/sbx_util.h"
#include "sandbox/files.h"
#include "sandbox/statedir.h"
#include "store/store.h"
#include "util/log.h"

static int status_of(const sbx_error_t *e)
{
    switch (e ? e->code : 0) {
    case SBX_E_NOTFOUND:
        return 404;
    case SBX_FILES_E_TOOBIG:
        return 413;
    case SBX_FILES_E_PAUSED:
    case SBX_E_CANCELLED:
        return 409;
    case SBX_FILES_E_NOTFILE:
    case SBX_E_USAGE:
        return 400;
    case SBX_FILES_E_UNSUPPORTED:
        return 501;
    default:
        return 500;
    }
}

/* The task, ready, the client's own, held (running++) until put_task; NULL when answered. */
static struct rtask *get_task(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                              const struct runner_client *who, unsigned fwd)
{
    struct rtask *t;

    pthread_mutex_lock(&r->mu); /* scope submit: checked by the router */
    t = runner_task_find(r, id);
    if (t == NULL) {
        pthread_mutex_unlock(&r->mu);
        /* (added) another box of the fleet holds it: the request goes there
         * (forward.c; the owner checks the scope and the client again) */
        if (!runner_forward_task(r, req, who, id, fwd)) {
            runner_reply_error(req, 404, "no task '%s' is kept by this runner", id);
        }
        return NULL;
    }
    if (!sbx_store_owner_ok(t->owner, who->name)) {
        pthread_mutex_unlock(&r->mu);
        sbx_warn("runner: client '%s' asked for the files or pause of task %s, another client's: "
                 "refused",
                 who->name, id);
        runner_reply_error(req, 403, "task %s belongs to another client", id);
        return NULL;
    }
    if (t->state != RT_READY || t->t == NULL) {
        int ending = t->state == RT_ENDING || t->state == RT_FAILED;

        pthread_mutex_unlock(&r->mu);
        runner_reply_error(req, 409, ending ? "task %s is ending" : "task %s is starting", id);
        return NULL;
    }
    t->running++; /* not ended under us */
    pthread_mutex_unlock(&r->mu);
    return t;
}

static void put_task(struct sbx_runner *r, struct rtask *t)
{
    pthread_mutex_lock(&r->mu);
    t->running--;
    pthread_mutex_unlock(&r->mu);
}

static void reply_err(struct evhttp_request *req, sbx_error_t **e)
{
    runner_reply_error(req, status_of(*e), "%s", sbx_error_msg(*e));
    sbx_error_free(e);
}

static int is_on(const char *v)
{
    return v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
}

static int to_evbuffer(void *ud, const char *data, size_t len)
{
    return evbuffer_add(ud, data, len) < 0 ? 1 : 0;
}

static void handle_files(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                         const struct runner_client *who)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q;
    const char *path;
    const char *list;
    const char *archive;
    const char *stat;
    struct rtask *t;
    sbx_error_t *e = NULL;

    TAILQ_INIT(&q);
    if (query == NULL || evhttp_parse_query_str(query, &q) < 0 ||
        (path = evhttp_find_header(&q, "path")) == NULL) {
        evhttp_clear_headers(&q);
        runner_reply_error(req, 400, "/v1/tasks/%s/files: give ?path=/absolute/path", id);
        return;
    }
    if (sbx_files_path_ok(path, "path", &e) < 0) {
        evhttp_clear_headers(&q);
        reply_err(req, &e);
        return;
    }
    list = evhttp_find_header(&q, "list");
    archive = evhttp_find_header(&q, "archive");
    stat = evhttp_find_header(&q, "stat");
    if ((t = get_task(r, req, id, who, m == EVHTTP_REQ_PUT ? 0 : RUNNER_FWD_STREAM)) == NULL) {
        evhttp_clear_headers(&q);
        return;
    }
    if (m == EVHTTP_REQ_PUT) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);
        size_t len = evbuffer_get_length(in);
        const char *data = len ? (const char *)evbuffer_pullup(in, -1) : "";

        if (is_on(archive) ? sbx_task_files_put(t->t, path, data, len, &e) < 0
                           : sbx_task_file_write(t->t, path, data, len, &e) < 0) {
            reply_err(req, &e);
        }
        else {
            sbx_info("runner: client '%s' wrote %s%s (%zu bytes) in task %s", who->name,
                     is_on(archive) ? "an archive into " : "", path, len, id);
            runner_reply_json(
                req, 200,
                json_pack("{s:s, s:s, s:I}", "task", id, "path", path, "bytes", (json_int_t)len));
        }
    }
    else if (is_on(archive)) { /* sbx cp out through the runner */
        struct evbuffer *b = evbuffer_new();

        if (sbx_task_files_get(t->t, path, SBX_FILES_API_ARCHIVE_MAX, to_evbuffer, b, &e) < 0) {
            reply_err(req, &e);
        }
        else {
            evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                              "application/x-tar");
            evhttp_send_reply(req, 200, "OK", b);
        }
        evbuffer_free(b);
    }
    else if (is_on(stat)) {
        int d = sbx_task_files_is_dir(t->t, path, &e);

        if (d < 0) {
            reply_err(req, &e);
        }
        else {
            runner_reply_json(req, 200, json_pack("{s:s, s:b}", "path", path, "dir", d));
        }
    }
    else if (is_on(list)) {
        json_t *l = sbx_task_files_list(t->t, path, &e);

        if (l == NULL) {
            reply_err(req, &e);
        }
        else {
            runner_reply_json(req, 200, l);
        }
    }
    else {
        char *data = NULL;
        size_t len = 0;

        if (sbx_task_file_read(t->t, path, SBX_FILES_ONE_MAX, &data, &len, &e) < 0) {
            reply_err(req, &e);
        }
        else {
            struct evbuffer *b = evbuffer_new();

            evbuffer_add(b, data, len);
            evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                              "application/octet-stream");
            evhttp_send_reply(req, 200, "OK", b);
            evbuffer_free(b);
            free(data);
        }
    }
    put_task(r, t);
    evhttp_clear_headers(&q);
}

static void handle_pause(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                         const struct runner_client *who, int resume)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    int to_disk = 0;
    struct rtask *t;
    sbx_error_t *e = NULL;
    int rc;

    if (query != NULL) {
        struct evkeyvalq q;
        const char *d;

        TAILQ_INIT(&q);
        evhttp_parse_query_str(query, &q);
        d = evhttp_find_header(&q, "to_disk");
        to_disk = d != NULL && (strcmp(d, "1") == 0 || strcmp(d, "true") == 0);
        evhttp_clear_headers(&q);
    }
    if ((t = get_task(r, req, id, who, RUNNER_FWD_SLOW)) == NULL) {
        return;
    }
    rc = resume ? sbx_task_resume(t->t, &e) : sbx_task_pause(t->t, to_disk, &e);
    put_task(r, t);
    if (rc < 0) {
        reply_err(req, &e);
        return;
    }
    runner_reply_json(req, 200,
                      json_pack("{s:s, s:s}", "task", id, "state", resume ? "running" : "paused"));
}

/* The route table's rows (api_routes.c): the router has checked the method
 * (GET/PUT files, POST pause and resume), the task id and the scope submit. */
void runner_api_task_files(const struct runner_route_call *c)
{
    handle_files(c->r, c->req, c->arg[0], c->who);
}

void runner_api_task_pause(const struct runner_route_call *c)
{
    handle_pause(c->r, c->req, c->arg[0], c->who, 0);
}

void runner_api_task_resume(const struct runner_route_call *c)
{
    handle_pause(c->r, c->req, c->arg[0], c->who, 1);
}
