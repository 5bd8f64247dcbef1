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
 * of runner_api_routes[], api_routes.c, which check the method and scope). (changed)
 * The files' work is done on a thread per request (at most FOPS_MAX, then 429), as a
 * snapshot's (api_snap.c): the loop never waits for the engine. Pause and resume stay
 * on the loop (one engine call each). */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "runner/route.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/rtask.h"
#include "sbx/sbx_util.h"
#include "sandbox/files.h"
#include "sandbox/statedir.h"
#include "store/store.h"
#include "util/log.h"
#include "util/xalloc.h"

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

/* (added) No other box holds the task either (forward.h). */
static void not_kept(struct evhttp_request *req, const char *id)
{
    runner_reply_error(req, 404, "no task '%s' is kept by this runner", id);
}

/* The task, ready, the client's own, held (running++) until put_task; NULL
 * when answered (or, another box's task, being answered: forward.h). */
static struct rtask *get_task(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                              const struct runner_client *who, unsigned fwd)
{
    struct rtask *t;

    runner_lock(r); /* scope submit: checked by the router */
    t = runner_task_find(r, id);
    if (t == NULL) {
        runner_unlock(r);
        /* (added) another box of the fleet holds it: the request goes there
         * (forward.c; the owner checks the scope and the client again) */
        runner_forward_task(r, req, who, id, fwd, not_kept);
        return NULL;
    }
    if (!sbx_store_owner_ok(rtask_owner(t), who->name)) {
        runner_unlock(r);
        sbx_warn("runner: client '%s' asked for the files or pause of task %s, another client's: "
                 "refused",
                 who->name, id);
        runner_reply_error(req, 403, "task %s belongs to another client", id);
        return NULL;
    }
    if (!rtask_ready(t)) {
        int ending = rtask_state(t) == RT_ENDING || rtask_state(t) == RT_FAILED;

        runner_unlock(r);
        runner_reply_error(req, 409, ending ? "task %s is ending" : "task %s is starting", id);
        return NULL;
    }
    rtask_enter(t); /* not ended under us */
    runner_unlock(r);
    return t;
}

static void put_task(struct sbx_runner *r, struct rtask *t)
{
    runner_lock(r);
    rtask_leave(t);
    runner_unlock(r);
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

/* (changed) The file work of one request, on a thread of its own (as a snapshot's,
 * api_snap.c): the loop goes on answering while the engine reads or writes; the task is
 * held until it is answered from the loop. At most FOPS_MAX at a time per box. */
#define FOPS_MAX 8
#define FOPS_RETRY_S "1"

enum fop_kind { FOP_PUT_ARCHIVE, FOP_PUT_FILE, FOP_GET_ARCHIVE, FOP_STAT, FOP_LIST, FOP_READ };

struct files_op {
    struct sbx_runner *r;
    struct rtask *rt;           /* held (rtask_enter) until fop_done */
    struct evhttp_request *req; /* NULL: libevent freed it with its connection */
    struct evhttp_connection *conn;
    int gone;
    enum fop_kind kind;
    char id[128];
    char client[64];
    char *path;
    char *in; /* a PUT's body */
    size_t in_len;
    sbx_error_t *err;
    json_t *json; /* the reply, or NULL: out's bytes */
    char *out;
    size_t out_len, out_cap;
    const char *ctype;
};

static int fops; /* in flight; loop thread only */

static int to_out(void *ud, const char *data, size_t len)
{
    struct files_op *op = ud;

    if (op->out_len + len > op->out_cap) {
        size_t cap = op->out_cap ? op->out_cap : 64 * 1024;

        while (cap < op->out_len + len) {
            cap *= 2;
        }
        op->out = xrealloc(op->out, cap);
        op->out_cap = cap;
    }
    memcpy(op->out + op->out_len, data, len);
    op->out_len += len;
    return 0;
}

static void fop_free(struct files_op *op)
{
    free(op->path);
    free(op->in);
    free(op->out);
    json_decref(op->json);
    sbx_error_free(&op->err);
    free(op);
}

static void fop_closed(struct evhttp_connection *c, void *arg)
{
    struct files_op *op = arg;

    (void)c;
    op->gone = 1;
    op->conn = NULL;
    if (evhttp_request_get_connection(op->req) != NULL) {
        op->req = NULL; /* freed with the connection */
    }
}

/* Loop thread: the work is done; answer (if anyone waits) and let the task go. */
static void fop_done(evutil_socket_t fd, short what, void *arg)
{
    struct files_op *op = arg;

    (void)fd;
    (void)what;
    runner_task_let_go(op->r, op->rt);
    fops--;
    if (op->gone) {
        if (op->req != NULL) {
            evhttp_request_free(op->req);
        }
    }
    else {
        evhttp_connection_set_closecb(op->conn, NULL, NULL);
        if (op->err != NULL) {
            reply_err(op->req, &op->err);
        }
        else if (op->json != NULL) {
            runner_reply_json(op->req, 200, op->json);
            op->json = NULL;
        }
        else {
            struct evbuffer *b = evbuffer_new();

            evbuffer_add(b, op->out ? op->out : "", op->out_len);
            evhttp_add_header(evhttp_request_get_output_headers(op->req), "Content-Type",
                              op->ctype);
            evhttp_send_reply(op->req, 200, "OK", b);
            evbuffer_free(b);
        }
    }
    fop_free(op);
}

static void *fop_main(void *arg)
{
    struct files_op *op = arg;
    struct sbx_task *t = rtask_sandbox(op->rt); /* held: not ended under us */
    int rc = 0;

    switch (op->kind) {
    case FOP_PUT_ARCHIVE:
    case FOP_PUT_FILE:
        rc = op->kind == FOP_PUT_ARCHIVE
                 ? sbx_task_files_put(t, op->path, op->in, op->in_len, &op->err)
                 : sbx_task_file_write(t, op->path, op->in, op->in_len, &op->err);
        if (rc == 0) {
            sbx_info("runner: client '%s' wrote %s%s (%zu bytes) in task %s", op->client,
                     op->kind == FOP_PUT_ARCHIVE ? "an archive into " : "", op->path, op->in_len,
                     op->id);
            op->json = json_pack("{s:s, s:s, s:I}", "task", op->id, "path", op->path, "bytes",
                                 (json_int_t)op->in_len);
        }
        break;
    case FOP_GET_ARCHIVE: /* sbx cp out through the runner */
        op->ctype = "application/x-tar";
        rc = sbx_task_files_get(t, op->path, SBX_FILES_API_ARCHIVE_MAX, to_out, op, &op->err);
        break;
    case FOP_STAT: {
        int d = sbx_task_files_is_dir(t, op->path, &op->err);

        if (d >= 0) {
            op->json = json_pack("{s:s, s:b}", "path", op->path, "dir", d);
        }
        break;
    }
    case FOP_LIST:
        op->json = sbx_task_files_list(t, op->path, &op->err);
        break;
    case FOP_READ:
        op->ctype = "application/octet-stream";
        rc = sbx_task_file_read(t, op->path, SBX_FILES_ONE_MAX, &op->out, &op->out_len, &op->err);
        break;
    }
    (void)rc;
    /* thread-safe with evthread_use_pthreads() (runner.c); the task stays held, so the
     * loop does not stop before fop_done ran */
    if (event_base_once(runner_base(op->r), -1, EV_TIMEOUT, fop_done, op, NULL) < 0) {
        sbx_warn("runner: files of task %s: cannot reach the loop", op->id);
    }
    return NULL;
}

static void handle_files(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                         const struct runner_client *who)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q;
    struct files_op *op;
    const char *path;
    struct rtask *t;
    sbx_error_t *e = NULL;
    pthread_t th;

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
    if (fops >= FOPS_MAX) {
        evhttp_clear_headers(&q);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", FOPS_RETRY_S);
        runner_reply_error(req, 429,
                           "%d file requests are being served on this box: try again "
                           "later",
                           FOPS_MAX);
        return;
    }
    if ((t = get_task(r, req, id, who, m == EVHTTP_REQ_PUT ? 0 : RUNNER_FWD_STREAM)) == NULL) {
        evhttp_clear_headers(&q);
        return;
    }
    op = xcalloc(1, sizeof(*op));
    op->r = r;
    op->rt = t;
    op->req = req;
    op->conn = evhttp_request_get_connection(req);
    op->path = xstrdup(path);
    snprintf(op->id, sizeof(op->id), "%s", id);
    snprintf(op->client, sizeof(op->client), "%s", who->name);
    if (m == EVHTTP_REQ_PUT) {
        struct evbuffer *in = evhttp_request_get_input_buffer(req);

        op->in_len = evbuffer_get_length(in);
        op->in = xmalloc(op->in_len + 1);
        evbuffer_copyout(in, op->in, op->in_len);
        op->kind = is_on(evhttp_find_header(&q, "archive")) ? FOP_PUT_ARCHIVE : FOP_PUT_FILE;
    }
    else {
        op->kind = is_on(evhttp_find_header(&q, "archive")) ? FOP_GET_ARCHIVE
                   : is_on(evhttp_find_header(&q, "stat"))  ? FOP_STAT
                   : is_on(evhttp_find_header(&q, "list"))  ? FOP_LIST
                                                            : FOP_READ;
    }
    evhttp_clear_headers(&q);
    fops++;
    evhttp_connection_set_closecb(op->conn, fop_closed, op);
    if (pthread_create(&th, NULL, fop_main, op) != 0) {
        evhttp_connection_set_closecb(op->conn, NULL, NULL);
        fops--;
        put_task(r, t);
        fop_free(op);
        runner_reply_error(req, 503, "no thread for the files of task %s: try again later", id);
        return;
    }
    pthread_detach(th);
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
    rc = resume ? sbx_task_resume(rtask_sandbox(t), &e)
                : sbx_task_pause(rtask_sandbox(t), to_disk, &e);
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
