/* server.c - the MCP server: stdio framing (one JSON-RPC message per line),
 * the lifecycle methods and dispatch; tools/call runs on its own thread so
 * that ping, sandbox_job and sandbox_cancel answer while a command runs. */
#include "mcp/server.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp/jsonrpc.h"
#include "sbx_build.h"
#include "util/log.h"
#include "util/xalloc.h"

struct inflight {
    struct sbx_mcp_server *s;
    json_t *id;
    json_t *params;
    struct sbx_mcp_call call;
    int silenced;   /* notifications/cancelled: send no response */
    int responding; /* the response is being sent: no more progress */
    int done;
    json_t *progress_token; /* params._meta.progressToken, or NULL */
    int64_t started_ms;
    int64_t progress_ms; /* last progress notification */
    pthread_t th;
    struct inflight *next;
};

struct sbx_mcp_server {
    struct sbx_mcp_backend backend;
    sbx_mcp_write_fn write;
    void *ud;
    pthread_mutex_t out_mu;
    pthread_mutex_t mu; /* inflight */
    struct inflight *inflight;
    int n_inflight;
    int initialized;
    int64_t progress_interval_ms;
};

static const char *const versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
                                       NULL};

static int write_stdout(void *ud, const char *line, size_t len)
{
    (void)ud;
    while (len > 0) {
        ssize_t w = write(1, line, len);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        line += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Sends msg (consumed). */
static void send_msg(struct sbx_mcp_server *s, json_t *msg)
{
    size_t len;
    char *line = sbx_jsonrpc_dump(msg, &len);

    json_decref(msg);
    pthread_mutex_lock(&s->out_mu);
    if (s->write(s->ud, line, len) < 0) {
        sbx_debug("mcp: the client is gone (stdout closed)");
    }
    pthread_mutex_unlock(&s->out_mu);
    free(line);
}

struct sbx_mcp_server *sbx_mcp_server_new(const struct sbx_mcp_backend *backend,
                                          sbx_mcp_write_fn write, void *ud)
{
    struct sbx_mcp_server *s = xcalloc(1, sizeof(*s));

    s->backend = *backend;
    s->write = write ? write : write_stdout;
    s->ud = ud;
    pthread_mutex_init(&s->out_mu, NULL);
    pthread_mutex_init(&s->mu, NULL);
    s->progress_interval_ms = SBX_MCP_PROGRESS_MS;
    return s;
}

void sbx_mcp_server_set_progress_interval(struct sbx_mcp_server *s, int64_t ms)
{
    s->progress_interval_ms = ms > 0 ? ms : SBX_MCP_PROGRESS_MS;
}

/* notifications/progress for long calls that asked for it (a progressToken):
 * the seconds elapsed, so the client may reset its request timeout. */
static void progress(struct sbx_mcp_server *s)
{
    int64_t now = sbx_mono_ms();

    pthread_mutex_lock(&s->mu);
    for (struct inflight *f = s->inflight; f != NULL; f = f->next) {
        int64_t secs = (now - f->started_ms) / 1000;
        char msg[64];

        if (f->progress_token == NULL || f->responding || f->silenced ||
            now - f->progress_ms < s->progress_interval_ms) {
            continue;
        }
        f->progress_ms = now;
        snprintf(msg, sizeof(msg), "running for %llds", (long long)secs);
        send_msg(s,
                 json_pack("{s:s, s:s, s:{s:O, s:f, s:s}}", "jsonrpc", "2.0", "method",
                           "notifications/progress", "params", "progressToken", f->progress_token,
                           "progress", (double)(now - f->started_ms) / 1000.0, "message", msg));
    }
    pthread_mutex_unlock(&s->mu);
}

static json_t *initialize(struct sbx_mcp_server *s, json_t *params, int *code, char **msg)
{
    const char *want = json_string_value(json_object_get(params, "protocolVersion"));
    const char *use = versions[0];
    char *instructions;
    json_t *r;

    if (want == NULL) {
        *code = SBX_JSONRPC_INVALID_PARAMS;
        *msg = xstrdup("initialize: \"protocolVersion\" must be a string");
        return NULL;
    }
    for (size_t i = 0; versions[i] != NULL; i++) {
        if (strcmp(want, versions[i]) == 0) {
            use = versions[i];
        }
    }
    instructions = xasprintf(
        "sbx runs commands in isolated, limited sandboxes with filtered egress. Use "
        "sandbox_run with a task id to keep one sandbox (and its files) across commands, and "
        "sandbox_end when done; without a task id each command gets a fresh sandbox. Mode: %s%s.",
        s->backend.ops->mode,
        strcmp(s->backend.ops->mode, "embedded") == 0
            ? " (no runner configured: tasks live in this server's own runner and end with it)"
            : "");
    r = json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", use,
                  "capabilities", "tools", "listChanged", 0, "serverInfo", "name", "sbx", "title",
                  "stackra sandbox", "version", SBX_VERSION, "instructions", instructions);
    free(instructions);
    s->initialized = 1;
    return r;
}

static void *call_main(void *arg)
{
    struct inflight *f = arg;
    struct sbx_mcp_server *s = f->s;
    int code = 0;
    char *msg = NULL;
    json_t *r = sbx_mcp_tools_call(&s->backend, f->params, &f->call, &code, &msg);
    json_t *reply = r ? sbx_jsonrpc_result(f->id, r) : sbx_jsonrpc_error(f->id, code, "%s", msg);
    int silenced;

    free(msg);
    pthread_mutex_lock(&s->mu);
    silenced = f->silenced;
    f->responding = 1;
    pthread_mutex_unlock(&s->mu);
    if (silenced) {
        json_decref(reply);
    }
    else {
        send_msg(s, reply);
    }
    pthread_mutex_lock(&s->mu);
    f->done = 1;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Joins finished calls; all of them (waiting) when all is set. */
static void reap(struct sbx_mcp_server *s, int all)
{
    for (;;) {
        struct inflight *f = NULL;

        pthread_mutex_lock(&s->mu);
        for (struct inflight **pp = &s->inflight; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->done || all) {
                f = *pp;
                *pp = f->next;
                s->n_inflight--;
                break;
            }
        }
        pthread_mutex_unlock(&s->mu);
        if (f == NULL) {
            return;
        }
        pthread_join(f->th, NULL);
        json_decref(f->id);
        json_decref(f->params);
        free(f);
    }
}

static void tools_call(struct sbx_mcp_server *s, struct sbx_jsonrpc_msg *m, int async)
{
    struct inflight *f;
    json_t *params = m->params ? m->params : json_object();

    if (!async) {
        struct sbx_mcp_call call = {0};
        int code = 0;
        char *msg = NULL;
        json_t *r = sbx_mcp_tools_call(&s->backend, params, &call, &code, &msg);

        send_msg(s, r ? sbx_jsonrpc_result(m->id, r) : sbx_jsonrpc_error(m->id, code, "%s", msg));
        free(msg);
        if (m->params == NULL) {
            json_decref(params);
        }
        return;
    }
    reap(s, 0);
    pthread_mutex_lock(&s->mu);
    if (s->n_inflight >= SBX_MCP_MAX_INFLIGHT) {
        pthread_mutex_unlock(&s->mu);
        send_msg(s, sbx_jsonrpc_result(
                        m->id, json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
                                         "error: too many tool calls in flight; wait "
                                         "for one to finish",
                                         "isError", 1)));
        if (m->params == NULL) {
            json_decref(params);
        }
        return;
    }
    f = xcalloc(1, sizeof(*f));
    f->s = s;
    f->id = json_incref(m->id);
    f->params = m->params ? json_incref(params) : params;
    f->progress_token = json_object_get(json_object_get(params, "_meta"), "progressToken");
    if (!json_is_string(f->progress_token) && !json_is_integer(f->progress_token)) {
        f->progress_token = NULL; /* borrowed from params, which f holds */
    }
    f->started_ms = sbx_mono_ms();
    f->progress_ms = f->started_ms;
    f->next = s->inflight;
    s->inflight = f;
    s->n_inflight++;
    if (pthread_create(&f->th, NULL, call_main, f) != 0) {
        s->inflight = f->next;
        s->n_inflight--;
        pthread_mutex_unlock(&s->mu);
        send_msg(s, sbx_jsonrpc_error(m->id, SBX_JSONRPC_INTERNAL_ERROR, "cannot start a thread"));
        json_decref(f->id);
        json_decref(f->params);
        free(f);
        return;
    }
    pthread_mutex_unlock(&s->mu);
}

static void cancelled(struct sbx_mcp_server *s, json_t *params)
{
    json_t *rid = json_object_get(params, "requestId");

    pthread_mutex_lock(&s->mu);
    for (struct inflight *f = s->inflight; f != NULL; f = f->next) {
        if (rid != NULL && json_equal(f->id, rid) && !f->done) {
            sbx_mcp_call_cancel(&f->call);
            f->silenced = 1;
            sbx_info("mcp: the client cancelled request %s",
                     json_is_string(rid) ? json_string_value(rid) : "(number)");
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void request(struct sbx_mcp_server *s, struct sbx_jsonrpc_msg *m, int async)
{
    json_t *r = NULL;
    int code = 0;
    char *msg = NULL;

    if (strcmp(m->method, "tools/call") == 0) {
        tools_call(s, m, async);
        return;
    }
    if (strcmp(m->method, "initialize") == 0) {
        r = initialize(s, m->params, &code, &msg);
    }
    else if (strcmp(m->method, "ping") == 0) {
        r = json_object();
    }
    else if (strcmp(m->method, "tools/list") == 0) {
        r = sbx_mcp_tools_list();
    }
    else {
        code = SBX_JSONRPC_METHOD_NOT_FOUND;
        msg = xasprintf("Method not found: %.128s", m->method);
    }
    send_msg(s, r ? sbx_jsonrpc_result(m->id, r) : sbx_jsonrpc_error(m->id, code, "%s", msg));
    free(msg);
}

void sbx_mcp_server_line(struct sbx_mcp_server *s, const char *line, size_t len, int async)
{
    struct sbx_jsonrpc_msg m;
    json_t *reply = NULL;
    size_t i = 0;

    while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) {
        len--;
    }
    while (i < len && (line[i] == ' ' || line[i] == '\t')) {
        i++;
    }
    if (i == len) {
        return; /* an empty line */
    }
    if (sbx_jsonrpc_parse(line + i, len - i, &m, &reply) < 0) {
        sbx_debug("mcp: refused a message: %s",
                  json_string_value(json_object_get(json_object_get(reply, "error"), "message")));
        send_msg(s, reply);
        return;
    }
    switch (m.kind) {
    case SBX_JSONRPC_REQUEST:
        sbx_debug("mcp: request %s", m.method);
        request(s, &m, async);
        break;
    case SBX_JSONRPC_NOTIFICATION:
        if (strcmp(m.method, "notifications/cancelled") == 0) {
            cancelled(s, m.params);
        }
        else if (strcmp(m.method, "notifications/initialized") == 0) {
            sbx_debug("mcp: client initialized");
        }
        else if (!sbx_jsonrpc_is_notification_method(m.method)) {
            sbx_warn("mcp: '%.64s' came without an id (a notification): not answered", m.method);
        }
        break;
    case SBX_JSONRPC_RESPONSE:
        sbx_debug("mcp: ignoring a response (this server sends no requests)");
        break;
    }
    sbx_jsonrpc_msg_free(&m);
}

int sbx_mcp_server_serve(struct sbx_mcp_server *s, int in_fd, const volatile int *stop)
{
    size_t cap = 64 << 10;
    char *buf = xmalloc(cap);
    size_t len = 0;
    int discarding = 0;

    while (stop == NULL || !*stop) {
        struct pollfd p = {.fd = in_fd, .events = POLLIN};
        size_t start = 0;
        ssize_t n;
        char *nl;

        progress(s);
        if (poll(&p, 1, 200) <= 0) {
            reap(s, 0);
            continue;
        }
        if (len == cap) {
            cap = cap * 2 > SBX_JSONRPC_MAX_LINE + 1 ? SBX_JSONRPC_MAX_LINE + 1 : cap * 2;
            buf = xrealloc(buf, cap);
        }
        n = read(in_fd, buf + len, cap - len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (n <= 0) {
            if (discarding) {
                send_msg(s, sbx_jsonrpc_error(NULL, SBX_JSONRPC_INVALID_REQUEST,
                                              "Invalid Request: message longer than %u bytes "
                                              "(skipped)",
                                              SBX_JSONRPC_MAX_LINE));
            }
            else if (len > 0) {
                sbx_mcp_server_line(s, buf, len, 1); /* a last line without newline */
            }
            break;
        }
        len += (size_t)n;
        while ((nl = memchr(buf + start, '\n', len - start)) != NULL) {
            if (discarding) {
                discarding = 0;
                send_msg(s, sbx_jsonrpc_error(NULL, SBX_JSONRPC_INVALID_REQUEST,
                                              "Invalid Request: message longer than %u bytes "
                                              "(skipped)",
                                              SBX_JSONRPC_MAX_LINE));
            }
            else {
                sbx_mcp_server_line(s, buf + start, (size_t)(nl - (buf + start)), 1);
            }
            start = (size_t)(nl - buf) + 1;
        }
        memmove(buf, buf + start, len - start);
        len -= start;
        if (discarding || len > SBX_JSONRPC_MAX_LINE) {
            if (!discarding) {
                sbx_warn("mcp: a message is longer than %u bytes: skipping it",
                         SBX_JSONRPC_MAX_LINE);
            }
            discarding = 1;
            len = 0;
        }
    }
    free(buf);
    return 0;
}

void sbx_mcp_server_free(struct sbx_mcp_server *s)
{
    if (s == NULL) {
        return;
    }
    /* new calls refused first, so that a cancelled call says why */
    s->backend.ops->shutdown(s->backend.ctx);
    pthread_mutex_lock(&s->mu);
    for (struct inflight *f = s->inflight; f != NULL; f = f->next) {
        sbx_mcp_call_cancel(&f->call);
    }
    pthread_mutex_unlock(&s->mu);
    reap(s, 1);
    s->backend.ops->destroy(s->backend.ctx);
    pthread_mutex_destroy(&s->out_mu);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
