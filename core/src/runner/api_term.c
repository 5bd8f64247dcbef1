/* api_term.c - a runner task's terminal and ports over the API (docs/api.md,
 * "Terminals and ports"):
 *
 *   GET /v1/tasks/{id}/terminal   Upgrade: sbx-terminal.v2 -> 101, then the
 *                                 frames of core/src/sandbox/pty.h; (added) "keep":
 *                                 true starts the task's kept session, and
 *                                 ?attach=1 attaches to it (pty_session.h)
 *   ANY /v1/tasks/{id}/ports/{port}[/PATH][?QUERY]
 *                                 one HTTP request proxied to 127.0.0.1:port
 *                                 inside the sandbox (Connection: close)
 *   GET /v1/tasks/{id}/ports/{port}  Upgrade: sbx-port.v1 -> 101, then the bytes
 *                                 of one connection to that port, both ways
 *                                 (added, issue 31: `sbx port`)
 *   GET /v1/tasks/{id}/archive    Upgrade: sbx-archive.v1 -> 101, then one
 *                                 streamed archive request (`sbx cp`, issue 31)
 *
 * Both need the scope `exec` and are the task's owner's alone (no scope reaches
 * another client's task). Both take the connection over from evhttp: its
 * bufferevent is disabled, a duplicate of the socket is served on a thread of
 * its own, and evhttp frees the connection (shutdown, close) on the loop thread
 * when that thread is done. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "runner/route.h"
#include "runner/state.h" /* (the keeper) adopted_only, the lock */
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/preview.h"
#include "runner/rtask.h"
#include "runner/sessions.h"
#include "sandbox/keeper_files.h"
#include "sandbox/proto.h"
#include "sandbox/pty.h"
#include "sandbox/pty_session.h"
#include "sandbox/task_port.h"
#include "util/fileio.h"
#include "util/envname.h"
#include "util/log.h"
#include "util/relay.h"
#include "util/xalloc.h"

#define REQ_TIMEOUT_S 30
#define UPSTREAM_TIMEOUT_S 300
#define CLIENT_SEND_TIMEOUT_S 60
#define TERM_PROTO RUNNER_UPGRADE_TERMINAL /* forward.h: a relay asks the same */
/* v1 spoke 5-byte frame headers (sbx before the one framing, sbx/sbx_frame.h) */
#define TERM_PROTO_V1 "sbx-terminal.v1"
/* (added, issue 31) `sbx port`: one raw connection to the port inside */
#define PORT_PROTO RUNNER_UPGRADE_PORT
/* (added, issue 31) `sbx cp`: one streamed archive request in frames */
#define ARCHIVE_PROTO RUNNER_UPGRADE_ARCHIVE

/* the terminals open now, so that a stopping runner can end them */
static pthread_mutex_t terms_mu = PTHREAD_MUTEX_INITIALIZER;
static struct session *terms;

struct session {
    struct sbx_runner *r;
    struct evhttp_connection *evcon;
    struct rtask *rt;
    int fd;
    int port;
    int attach; /* (added) ?attach=1: the task's kept session */
    int raw;    /* (added, issue 31) ports: Upgrade: sbx-port.v1, bytes both ways */
    char client[64];
    char peer[96];
    char *head; /* ports: the request to send upstream (head and body) */
    size_t head_len;
    struct session *next_term; /* in terms while a terminal runs */
};

static void term_list(struct session *s, int add)
{
    pthread_mutex_lock(&terms_mu);
    if (add) {
        s->next_term = terms;
        terms = s;
    }
    else {
        for (struct session **pp = &terms; *pp != NULL; pp = &(*pp)->next_term) {
            if (*pp == s) {
                *pp = s->next_term;
                break;
            }
        }
    }
    pthread_mutex_unlock(&terms_mu);
}

void runner_task_io_stop(struct sbx_runner *r)
{
    (void)r;
    pthread_mutex_lock(&terms_mu);
    for (struct session *s = terms; s != NULL; s = s->next_term) {
        /* the task ends with the runner anyway: its commands are cancelled now */
        sbx_task_stop(rtask_sandbox(s->rt), "runner stopped");
    }
    pthread_mutex_unlock(&terms_mu);
}

static void free_evcon(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evhttp_connection_free(arg);
}

static void session_end(struct session *s)
{
    close(s->fd);
    runner_lock(s->r);
    if (s->rt != NULL) {
        rtask_leave(s->rt);
    }
    runner_unlock(s->r);
    runner_session_give(s->client);
    /* thread-safe with evthread_use_pthreads() (runner.c) */
    event_base_once(runner_base(s->r), -1, EV_TIMEOUT, free_evcon, s->evcon, NULL);
    free(s->head);
    free(s);
}

static void send_x(int fd, int status, const char *error, int code)
{
    json_t *j = error ? json_pack("{s:s, s:i}", "error", error, "code", code)
                      : json_pack("{s:i}", "status", status);
    char *s = json_dumps(j, JSON_COMPACT);

    sbx_frame_write(fd, 'X', s, strlen(s));
    free(s);
    json_decref(j);
}

/* The terminal's request frame: {"argv":[...], "env":{"K":"V"}, "tty":{rows, cols}}. */
static int parse_term(json_t *req, const char ***argv, struct sbx_kv **env, size_t *n_env,
                      struct sbx_tty_req *tr, sbx_error_t **err)
{
    json_t *ja = json_object_get(req, "argv");
    json_t *je = json_object_get(req, "env");
    size_t n = json_array_size(ja);
    const char *k;
    json_t *v;
    size_t i = 0;

    if (!json_is_array(ja) || n == 0 || n > 4096) {
        return sbx_error_set(err, SBX_E_USAGE, "field 'argv': a non-empty array of strings");
    }
    if (je != NULL && !json_is_object(je)) {
        return sbx_error_set(err, SBX_E_USAGE, "field 'env': an object of strings");
    }
    if (sbx_tty_parse(json_object_get(req, "tty"), tr, err) < 0) {
        return -1;
    }
    *argv = xcalloc(n + 1, sizeof(char *));
    for (size_t a = 0; a < n; a++) {
        (*argv)[a] = json_string_value(json_array_get(ja, a));
        if ((*argv)[a] == NULL || (a == 0 && (*argv)[a][0] == '\0')) {
            return sbx_error_set(err, SBX_E_USAGE, "field 'argv': item %zu is not a string", a);
        }
    }
    *env = xcalloc(json_object_size(je) + 1, sizeof(**env));
    json_object_foreach(je, k, v)
    {
        if (!sbx_env_name_valid(k, strlen(k)) || !json_is_string(v)) {
            return sbx_error_set(err, SBX_E_USAGE,
                                 "field 'env': '%.64s': a name of letters, digits and '_' with "
                                 "a string value",
                                 k);
        }
        (*env)[i].name = k;
        (*env)[i].value = json_string_value(v);
        i++;
    }
    *n_env = i;
    return 0;
}

/* A session's first frame: 'R' with a JSON object, within REQ_TIMEOUT_S (then no
 * timeout: the session's own bytes may pause). NULL: none in time, another type,
 * or not JSON (*err says why when the read failed). */
static json_t *first_request(int fd, sbx_error_t **err)
{
    struct timeval tv = {REQ_TIMEOUT_S, 0};
    struct timeval none = {0, 0};
    char type = 0;
    char *data = NULL;
    size_t len = 0;
    json_t *req = NULL;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (sbx_frame_read(fd, &type, &data, &len, err) == 0 && type == 'R') {
        req = json_loads(data, 0, NULL);
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
    free(data);
    return json_is_object(req) ? req : (json_decref(req), NULL);
}

static void *term_main(void *arg)
{
    struct session *s = arg;
    sbx_error_t *err = NULL;
    json_t *req = NULL;
    const char **argv = NULL;
    struct sbx_kv *env = NULL;
    size_t n_env = 0;
    struct sbx_tty_req tr = {0};
    int status = 0;
    int r;

    req = first_request(s->fd, &err);
    if (req == NULL) {
        send_x(s->fd, 0, err ? sbx_error_msg(err) : "the first frame must be 'R' with JSON", 125);
        goto out;
    }
    if (s->attach) {
        /* (added) the kept session: only the client's window size is asked for */
        if (sbx_tty_parse(json_object_get(req, "tty"), &tr, &err) < 0) {
            send_x(s->fd, 0, sbx_error_msg(err), 125);
            goto out;
        }
        sbx_info("runner: task %s: client '%s' attaches to its kept session", rtask_id(s->rt),
                 s->client);
        term_list(s, 1);
        r = sbx_tty_session_attach(rtask_sandbox(s->rt), tr.rows, tr.cols, s->fd, &err);
        term_list(s, 0);
        if (r < 0) {
            send_x(s->fd, 0, sbx_error_msg(err), 125);
        }
        goto out;
    }
    if (parse_term(req, &argv, &env, &n_env, &tr, &err) < 0) {
        send_x(s->fd, 0, sbx_error_msg(err), 125);
        goto out;
    }
    tr.argv = argv;
    tr.env = env;
    tr.n_env = n_env;
    {
        char shown[65]; /* the client's word in our log: printable, bounded */

        snprintf(shown, sizeof(shown), "%s", argv[0]);
        for (char *c = shown; *c; c++) {
            *c = *c < 0x20 || *c > 0x7e ? '?' : *c;
        }
        sbx_info("runner: task %s: terminal for client '%s' (%s)", rtask_id(s->rt), s->client,
                 shown);
    }
    term_list(s, 1);
    if (json_is_true(json_object_get(req, "keep"))) {
        /* (added) the task's kept session: its 'X' is written when this client leaves */
        r = sbx_tty_session_run(rtask_sandbox(s->rt), &tr, s->fd, &err);
        term_list(s, 0);
        if (r < 0) {
            send_x(s->fd, 0, sbx_error_msg(err), 125);
        }
        goto out;
    }
    r = sbx_task_exec_tty(rtask_sandbox(s->rt), &tr, s->fd, &status, &err);
    term_list(s, 0);
    if (r < 0) {
        send_x(s->fd, 0, sbx_error_msg(err),
               err->code == SBX_E_NOCMD    ? 127
               : err->code == SBX_E_NOEXEC ? 126
                                           : 125);
    }
    else {
        send_x(s->fd, status, NULL, 0);
    }
out:
    sbx_error_free(&err);
    json_decref(req);
    free(argv);
    free(env);
    session_end(s);
    return NULL;
}

static void *port_main(void *arg)
{
    struct session *s = arg;
    struct timeval tv = {UPSTREAM_TIMEOUT_S, 0};
    sbx_error_t *err = NULL;
    struct sbx_port_conn *conn = NULL;
    char via[96];
    int64_t in = 0;
    int64_t out = 0;
    int up = -1;
    int r;

    snprintf(via, sizeof(via), "api client %s", s->client);
    r = sbx_task_port_connect(rtask_sandbox(s->rt), s->port, s->peer, via, &up, &conn, &err);
    /* the connection needs the task no more: it may end meanwhile (the socket then resets) */
    runner_lock(s->r);
    rtask_leave(s->rt);
    s->rt = NULL;
    runner_unlock(s->r);
    if (r < 0) {
        runner_reply_raw(s->fd, 502, "Bad Gateway", sbx_error_msg(err));
        sbx_error_free(&err);
        session_end(s);
        return NULL;
    }
    setsockopt(up, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (sbx_send_all(up, s->head, s->head_len) == 0) {
        in = (int64_t)s->head_len;
        out = runner_preview_relay(up, s->fd, UPSTREAM_TIMEOUT_S);
    }
    close(up);
    sbx_port_conn_end(conn, in, out, NULL); /* (added) the line, with the counts */
    session_end(s);
    return NULL;
}

/* (added, issue 31) `sbx cp` of a task (Upgrade: sbx-archive.v1): one request 'R'
 * {"op": "files_get"|"files_put"|"files_stat", ...} within 30 s, answered in the frames
 * of sandbox/keeper_files.h (a streamed archive each way, bounded by
 * SBX_FILES_CP_MAX), the task held until the reply. */
static void *archive_main(void *arg)
{
    struct session *s = arg;
    sbx_error_t *err = NULL;
    json_t *req = first_request(s->fd, &err);
    const char *op = json_string_value(json_object_get(req, "op"));

    if (op == NULL || (strcmp(op, "files_get") != 0 && strcmp(op, "files_put") != 0 &&
                       strcmp(op, "files_stat") != 0)) {
        send_x(s->fd, 0,
               err ? sbx_error_msg(err)
                   : "the first frame must be 'R' {\"op\": \"files_get|files_put|files_stat\"}",
               125);
    }
    else {
        sbx_info("runner: task %s: %s for client '%s'", rtask_id(s->rt), op, s->client);
        sbx_keeper_files_op(rtask_sandbox(s->rt), s->fd, op, req);
    }
    sbx_error_free(&err);
    json_decref(req);
    session_end(s);
    return NULL;
}

/* (added, issue 31) A raw port connection (`sbx port`, Upgrade: sbx-port.v1): the
 * connection inside first (its failure is a 502 saying why), then the 101 and the
 * bytes both ways until both sides closed; one line of ports.log with the counts. */
static void *raw_port_main(void *arg)
{
    static const char up_head[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: " PORT_PROTO
                                  "\r\nConnection: Upgrade\r\n\r\n";
    struct session *s = arg;
    sbx_error_t *err = NULL;
    struct sbx_port_conn *conn = NULL;
    char via[96];
    int64_t in = 0;
    int64_t out = 0;
    int up = -1;
    int r;

    /* a keeper's runner: its client is `sbx port`, as the keeper logged it */
    snprintf(via, sizeof(via), s->r->adopted_only ? "sbx port" : "api client %s", s->client);
    r = sbx_task_port_connect(rtask_sandbox(s->rt), s->port, s->peer, via, &up, &conn, &err);
    pthread_mutex_lock(&s->r->mu);
    rtask_leave(s->rt);
    s->rt = NULL;
    pthread_mutex_unlock(&s->r->mu);
    if (r < 0) {
        runner_reply_raw(s->fd, 502, "Bad Gateway", sbx_error_msg(err));
        sbx_error_free(&err);
        session_end(s);
        return NULL;
    }
    if (sbx_send_all(s->fd, up_head, sizeof(up_head) - 1) == 0) {
        sbx_relay_both(s->fd, up, &in, &out);
    }
    close(up);
    sbx_port_conn_end(conn, in, out, NULL);
    session_end(s);
    return NULL;
}

/* The request for the server inside: the method, /PATH?QUERY, the client's headers
 * without its credentials and hop-by-hop ones, then the body evhttp read. */
static char *upstream_request(struct evhttp_request *req, const char *rest, size_t *len)
{
    static const char *const drop[] = {"Authorization",     "Cookie",
                                       "Connection",        "Keep-Alive",
                                       "Proxy-Connection",  "Proxy-Authorization",
                                       "Upgrade",           "TE",
                                       "Transfer-Encoding", "Content-Length",
                                       "Trailer",           NULL};
    static const char *const methods[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
                                          "OPTIONS", "TRACE", "CONNECT", "PATCH"};
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *query = evhttp_uri_get_query(uri);
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(body);
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    struct evbuffer *out = evbuffer_new();
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *mname = "GET";
    char *s;

    for (unsigned i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if ((unsigned)m == 1u << i) {
            mname = methods[i];
        }
    }
    evbuffer_add_printf(out, "%s /%s%s%s HTTP/1.1\r\n", mname, rest, query ? "?" : "",
                        query ? query : "");
    for (struct evkeyval *kv = h->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
        int skip = strncasecmp(kv->key, "X-Sbx-", 6) == 0;

        for (unsigned i = 0; drop[i] != NULL && !skip; i++) {
            skip = strcasecmp(kv->key, drop[i]) == 0;
        }
        if (!skip) {
            evbuffer_add_printf(out, "%s: %s\r\n", kv->key, kv->value);
        }
    }
    evbuffer_add_printf(out, "Content-Length: %zu\r\nConnection: close\r\n\r\n", blen);
    evbuffer_add_buffer(out, body);
    *len = evbuffer_get_length(out);
    s = xmalloc(*len + 1);
    evbuffer_remove(out, s, *len);
    evbuffer_free(out);
    return s;
}

/* Takes the connection over from evhttp; -1 when it cannot (the reply is sent). */
static int take_over(struct evhttp_request *req, struct session *s)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct timeval tv = {CLIENT_SEND_TIMEOUT_S, 0};
    int fd = bev ? bufferevent_getfd(bev) : -1;

    s->fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
    if (s->fd < 0) {
        runner_reply_error(req, 500, "taking the connection over: %s", strerror(errno));
        return -1;
    }
    bufferevent_disable(bev, EV_READ | EV_WRITE);
    /* the socket is shared with evhttp's descriptor, which no longer uses it */
    fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK);
    setsockopt(s->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    s->evcon = evcon;
    return 0;
}

static int header_has(struct evhttp_request *req, const char *name, const char *token)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);

    return v != NULL && strcasestr(v, token) != NULL;
}

/* /v1/tasks/{id}/terminal (terminal) or /v1/tasks/{id}/ports[/PORT/...], any method (a
 * terminal's other than GET is a 426); the router has checked the id and scope. */
/* (added) No other box holds the task either (forward.h). */
static void not_running(struct evhttp_request *req, const char *id)
{
    runner_reply_error(req, 404, "no task '%s' is running in this runner", id);
}

/* What a terminal, a port or an archive request asks for, once its protocol
 * and headers are checked (io_request_ok). */
struct io_want {
    int terminal;
    int archive;
    long port;        /* a port connection: 1-65535; 0: a terminal or an archive */
    const char *rest; /* a port's path after /ports/PORT/ ("" none) */
    int raw;          /* Upgrade: sbx-port.v1 */
};

/* A port: /v1/tasks/ID/ports/PORT[/PATH], or a raw connection (sbx-port.v1) with
 * no path; sets w's port, rest and raw, else answered (400). */
static int port_request_ok(const struct runner_route_call *c, struct io_want *w)
{
    struct evhttp_request *req = c->req;
    char *end = NULL;

    /* c->rest: what follows /ports/ (NULL for /ports itself) */
    if (c->rest == NULL || (w->port = strtol(c->rest, &end, 10)) < 1 || w->port > 65535 ||
        end == c->rest || (*end != '\0' && *end != '/')) {
        runner_reply_error(req, 400, "%s: use /v1/tasks/ID/ports/PORT[/PATH] (1-65535)", c->path);
        return 0;
    }
    w->rest = *end == '/' ? end + 1 : "";
    w->raw = header_has(req, "Upgrade", PORT_PROTO);
    if (w->raw && (evhttp_request_get_command(req) != EVHTTP_REQ_GET || *w->rest != '\0' ||
                   !header_has(req, "Connection", "upgrade"))) {
        runner_reply_error(req, 400,
                           "%s: " PORT_PROTO
                           " is GET /v1/tasks/ID/ports/PORT with 'Connection: Upgrade'",
                           c->path);
        return 0;
    }
    return 1;
}

/* A terminal: its one query (attach=1) and the upgrade to sbx-term.v2 (426
 * naming the change from v1); else answered. */
static int terminal_request_ok(const struct runner_route_call *c)
{
    struct evhttp_request *req = c->req;
    const char *path = c->path;

    if (c->query != NULL && c->query[0] != '\0' && strcmp(c->query, "attach=1") != 0 &&
        strcmp(c->query, "attach=true") != 0) {
        runner_reply_error(req, 400, "%s: the only query is attach=1 (the task's kept session)",
                           path);
        return 0;
    }
    if (header_has(req, "Upgrade", TERM_PROTO_V1)) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Upgrade", TERM_PROTO);
        runner_reply_error(req, 426,
                           "%s: " TERM_PROTO_V1
                           " (5-byte frame headers) was replaced by " TERM_PROTO
                           " (8-byte headers {type, 0, 0, 0, length u32 BE}; docs/api.md, "
                           "\"Terminals and ports\")",
                           path);
        return 0;
    }
    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET ||
        !header_has(req, "Upgrade", TERM_PROTO) || !header_has(req, "Connection", "upgrade")) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Upgrade", TERM_PROTO);
        runner_reply_error(req, 426,
                           "%s: use GET with 'Connection: Upgrade' and 'Upgrade: " TERM_PROTO
                           "' (docs/api.md, \"Terminals and ports\")",
                           path);
        return 0;
    }
    return 1;
}

/* The request's protocol and headers, in the order they were always checked; 0:
 * answered. */
static int io_request_ok(const struct runner_route_call *c, struct io_want *w)
{
    struct evhttp_request *req = c->req;

    if (w->archive &&
        (evhttp_request_get_command(req) != EVHTTP_REQ_GET ||
         !header_has(req, "Upgrade", ARCHIVE_PROTO) || !header_has(req, "Connection", "upgrade"))) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Upgrade", ARCHIVE_PROTO);
        runner_reply_error(req, 426,
                           "%s: use GET with 'Connection: Upgrade' and 'Upgrade: " ARCHIVE_PROTO
                           "' (docs/api.md, \"Files and pause of a kept task\")",
                           c->path);
        return 0;
    }
    if (!w->terminal && !w->archive && !port_request_ok(c, w)) {
        return 0;
    }
    if (c->tcp &&
        evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization") == NULL) {
        /* the status page's cookie is for its own GETs; a preview never rides on it */
        runner_reply_error(req, 401, "%s needs a bearer token (Authorization: Bearer ...)",
                           c->path);
        return 0;
    }
    return !w->terminal || terminal_request_ok(c);
}

/* (added, issue 31) The upgrade a request asked for (forward.h), NULL for a
 * port preview: what a relay to another box asks of it. */
static const char *upgrade_of(const struct io_want *w)
{
    if (w->terminal) {
        return RUNNER_UPGRADE_TERMINAL;
    }
    if (w->archive) {
        return RUNNER_UPGRADE_ARCHIVE;
    }
    return w->raw ? RUNNER_UPGRADE_PORT : NULL;
}

/* The client's own kept task, ready, held (rtask_enter: not ended under the
 * session) with a session counted; NULL when answered (or, another box's task,
 * being relayed with the upgrade asked for, or NULL for a preview:
 * fwd_tunnel.c). */
static struct rtask *io_task_hold(const struct runner_route_call *c, const char *upgrade)
{
    struct sbx_runner *r = c->r;
    struct evhttp_request *req = c->req;
    const char *id = c->arg[0];
    struct rtask *rt;

    runner_lock(r);
    rt = runner_task_find(r, id);
    if (rt == NULL || !rtask_owned_by(rt, c->who->name)) {
        int other = rt != NULL;

        runner_unlock(r);
        if (other) {
            runner_reply_error(req, 403,
                               "task %s belongs to another client (a task's terminal and ports "
                               "are its owner's alone)",
                               id);
        }
        else {
            /* (added) another box of the fleet holds it: relayed (fwd_tunnel.c),
             * once the store thread has said which (fwd_owner.c) */
            runner_forward_tunnel(r, req, c->who, id, upgrade, not_running);
        }
        return NULL;
    }
    if (!rtask_keep(rt) || !rtask_ready(rt)) {
        runner_unlock(r);
        runner_reply_error(req, 409, "task %s is not a kept task that runs (state: %s)", id,
                           rtask_state(rt) == RT_STARTING ? "starting" : "not ready");
        return NULL;
    }
    {
        char why[200];
        int status = runner_session_take(c->who->name, why, sizeof(why));

        if (status != 0) { /* (changed, issue 31) the box's cap, or the client's */
            runner_unlock(r);
            runner_reply_error(req, status, "%s", why);
            return NULL;
        }
    }
    rtask_enter(rt); /* the task is not ended under the session */
    runner_unlock(r);
    return rt;
}

/* Who is at the other end: the TCP peer, or "unix" (on the unix socket, `sbx
 * port` may say whose connection it is). */
static void session_peer(struct session *s, struct evhttp_request *req, int tcp)
{
    char *host = NULL;
    ev_uint16_t pp = 0;
    struct evhttp_connection *con = evhttp_request_get_connection(req);

    if (con != NULL && tcp) {
        evhttp_connection_get_peer(con, &host, &pp);
    }
    snprintf(s->peer, sizeof(s->peer), "%s:%u", tcp && host ? host : "unix", (unsigned)pp);
    if (s->raw && !tcp) {
        /* (added) on the unix socket, `sbx port` says whose connection it is */
        const char *given = evhttp_find_header(evhttp_request_get_input_headers(req), "X-Sbx-Peer");
        size_t n = given != NULL ? strspn(given, "0123456789abcdefABCDEF.:[]unix") : 0;

        if (given != NULL && n > 0 && n < sizeof(s->peer) && given[n] == '\0') {
            snprintf(s->peer, sizeof(s->peer), "%s", given);
        }
    }
}

/* The connection is the session's: the 101 of a terminal or an archive stream,
 * then its thread (a port's answers its own). */
static void session_run(struct session *s, const struct io_want *w)
{
    pthread_t th;

    if (w->port == 0) {
        static const char up[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: " TERM_PROTO
                                 "\r\nConnection: Upgrade\r\n\r\n";
        static const char up_archive[] =
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: " ARCHIVE_PROTO
            "\r\nConnection: Upgrade\r\n\r\n";

        if (w->archive) {
            sbx_send_all(s->fd, up_archive, sizeof(up_archive) - 1);
        }
        else {
            sbx_send_all(s->fd, up, sizeof(up) - 1);
        }
    }
    if (pthread_create(&th, NULL,
                       w->archive    ? archive_main
                       : w->raw      ? raw_port_main
                       : w->port > 0 ? port_main
                                     : term_main,
                       s) != 0) {
        runner_reply_raw(s->fd, 503, "Service Unavailable", "no thread for the connection");
        session_end(s);
        return;
    }
    pthread_detach(th);
}

static void task_io(const struct runner_route_call *c, int terminal, int archive)
{
    struct sbx_runner *r = c->r;
    struct evhttp_request *req = c->req;
    struct io_want w = {.terminal = terminal, .archive = archive, .rest = ""};
    struct session *s;
    struct rtask *rt;

    if (!io_request_ok(c, &w) || (rt = io_task_hold(c, upgrade_of(&w))) == NULL) {
        return;
    }
    s = xcalloc(1, sizeof(*s));
    s->r = r;
    s->rt = rt;
    s->port = (int)w.port;
    s->attach = terminal && c->query != NULL && c->query[0] != '\0'; /* checked above */
    s->raw = w.raw;
    snprintf(s->client, sizeof(s->client), "%s", c->who->name);
    session_peer(s, req, c->tcp);
    if (w.port > 0 && !w.raw) {
        s->head = upstream_request(req, w.rest, &s->head_len);
    }
    if (take_over(req, s) < 0) {
        runner_lock(r);
        rtask_leave(rt);
        runner_unlock(r);
        runner_session_give(c->who->name);
        free(s->head);
        free(s);
        return;
    }
    session_run(s, &w);
}

/* The route table's rows (api_routes.c), scope exec */
void runner_api_task_terminal(const struct runner_route_call *c)
{
    task_io(c, 1, 0);
}

void runner_api_task_port(const struct runner_route_call *c)
{
    task_io(c, 0, 0);
}

/* (added, issue 31) scope submit, as the files requests */
void runner_api_task_archive(const struct runner_route_call *c)
{
    task_io(c, 0, 1);
}
