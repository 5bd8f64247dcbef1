/* execd.c - provider_opensandbox: the client of execd, the agent the
 * OpenSandbox server puts in every sandbox (port 44772).
 *
 * POST /command answers with a stream of JSON events separated by blank
 * lines (raw JSON, no SSE `data:` prefix, though one is tolerated):
 * init {text: command id}, stdout/stderr {text}, ping, and one terminal
 * event: execution_complete (exit 0) or error {error.evalue: the exit status
 * as decimal text, or Go error text when the command could not start}.
 * We stop reading at the terminal event: execd sleeps a second after it and
 * then ends the stream without the final chunk (upstream issue #1277), so
 * transport errors after a terminal event are not errors. A stream that
 * ends before one is resolved through GET /command/status/{id}.
 * The API key is never sent to execd.
 */
#include "opensandbox.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define OSB_EVENT_MAX (8u << 20)
#define OSB_HEAD_MAX 4096

enum { TERM_NONE = 0, TERM_COMPLETE, TERM_ERROR };

struct stream {
    struct osb_ctx *c;
    const char *sandbox_id;
    const struct sbx_exec_spec *spec;
    char *buf;
    size_t len, cap;
    char head[OSB_HEAD_MAX + 1]; /* the reply's first bytes, for error bodies */
    size_t head_len;
    char *cmd_id;
    int terminal;
    int exit_status;
    char *start_error; /* non-numeric evalue: the command did not start */
    int sink_stopped;
    char *protocol_error;
};

/* Header list: the endpoint's headers, then extra (NULL-terminated). */
static const char **header_list(char *const *endpoint, const char *extra1, const char *extra2)
{
    size_t n = 0;
    const char **h;

    while (endpoint != NULL && endpoint[n] != NULL) {
        n++;
    }
    h = xmalloc((n + 3) * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        h[i] = endpoint[i];
    }
    h[n++] = extra1;
    h[n++] = extra2;
    h[n] = NULL;
    return h;
}

int osb_execd_wait_ready(struct osb_ctx *c, const char *execd, char *const *headers,
                         sbx_error_t **err)
{
    cleanup_free char *url = xasprintf("%s/ping", execd);
    cleanup_free const char **h = header_list(headers, NULL, NULL);
    int64_t start = (int64_t)time(NULL), last_log = start;
    char last[256] = "no answer yet";

    for (;;) {
        struct sbx_http_request req = {.method = "GET",
                                       .url = url,
                                       .headers = h,
                                       .timeout_ms = 5000,
                                       .connect_timeout_ms = 5000};
        struct sbx_http_response resp;
        sbx_error_t *e = NULL;
        int64_t now;

        if (c->host->http(&req, &resp, &e) == 0) {
            if (resp.status == 200) {
                c->host->http_response_free(&resp);
                return 0;
            }
            snprintf(last, sizeof(last), "HTTP %ld", resp.status);
            c->host->http_response_free(&resp);
        }
        else {
            snprintf(last, sizeof(last), "%s", e->msg);
            c->host->error_free(&e);
        }
        now = (int64_t)time(NULL);
        if (now - start >= c->ready_timeout) {
            return c->host->error_set(err, SBX_E_TIMEOUT,
                                      "opensandbox '%s': execd at %s did "
                                      "not answer GET /ping within %lld s: %s",
                                      c->instance, execd, (long long)c->ready_timeout, last);
        }
        if (now - last_log >= 10) {
            c->host->log(c->instance, SBX_LOG_INFO,
                         "opensandbox: waiting for execd at %s "
                         "(%lld s): %s",
                         execd, (long long)(now - start), last);
            last_log = now;
        }
        osb_sleep_ms(c->poll_ms < 200 ? c->poll_ms : 200);
    }
}

/* --- the event parser ----------------------------------------------------- */

static int evalue_status(const char *ev, int *status)
{
    const char *p = ev;
    long n;
    char *end;

    if (p == NULL || *p == '\0') {
        return -1;
    }
    n = strtol(p, &end, 10);
    while (isspace((unsigned char)*end)) {
        end++;
    }
    if (end == p || *end != '\0') {
        return -1;
    }
    if (n < 0) {
        *status = 128 + 9; /* Go reports -1 for a signal: execd kills with SIGKILL */
    }
    else {
        *status = (int)(n & 0xff);
    }
    return 0;
}

static int stream_fail(struct stream *s, const char *what, const char *block)
{
    if (s->protocol_error == NULL) {
        s->protocol_error = xasprintf("%s: '%.60s'", what, block);
        for (char *p = s->protocol_error; *p; p++) {
            if ((unsigned char)*p < 0x20) {
                *p = ' ';
            }
        }
    }
    return -1;
}

/* One event. Returns 0 to go on, 1 at a terminal event, -1 to stop. */
static int stream_event(struct stream *s, json_t *ev, const char *raw)
{
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *text = json_object_get(ev, "text");

    if (!json_is_object(ev)) {
        return stream_fail(s, "execd sent an event that is not a JSON object", raw);
    }
    if (type == NULL) {
        return 0; /* not an event (an error body is handled by the caller) */
    }
    if (strcmp(type, "init") == 0) {
        const char *id = json_string_value(text);

        if (id == NULL || *id == '\0' || strlen(id) > 128 ||
            strspn(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                strlen(id)) {
            return stream_fail(s, "execd sent an init event without a usable command id", raw);
        }
        free(s->cmd_id);
        s->cmd_id = osb_strdup_opt(json_string_value(text));
    }
    else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        int stream = type[3] == 'o' ? 1 : 2;

        if (json_is_string(text) && s->spec->on_output != NULL &&
            s->spec->on_output(s->spec->output_userdata, stream, json_string_value(text),
                               json_string_length(text)) != 0) {
            s->sink_stopped = 1;
            return -1;
        }
    }
    else if (strcmp(type, "execution_complete") == 0) {
        s->terminal = TERM_COMPLETE;
        s->exit_status = 0;
        return 1;
    }
    else if (strcmp(type, "error") == 0) {
        json_t *e = json_object_get(ev, "error");
        const char *evalue = json_string_value(json_object_get(e, "evalue"));
        const char *ename = json_string_value(json_object_get(e, "ename"));

        s->terminal = TERM_ERROR;
        if (evalue_status(evalue, &s->exit_status) < 0) {
            s->start_error = xasprintf("%s%s%s", ename ? ename : "", ename && evalue ? ": " : "",
                                       evalue ? evalue : "");
        }
        return 1;
    }
    else if (strcmp(type, "ping") == 0) {
        osb_box_maybe_renew(s->c, s->sandbox_id);
    }
    /* status, result, execution_count and unknown types are ignored */
    return 0;
}

/* One block between blank lines: strips an SSE `data:` prefix, skips SSE
 * comment and field lines, parses the rest as JSON. */
static int stream_block(struct stream *s, char *block)
{
    cleanup_free char *json = xmalloc(strlen(block) + 1);
    size_t n = 0;
    char *line, *save = NULL;
    json_error_t je;
    json_t *ev;
    int r;

    for (line = strtok_r(block, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "data:", 5) == 0) {
            line += line[5] == ' ' ? 6 : 5;
        }
        else if (line[0] == ':' || strncmp(line, "event:", 6) == 0 ||
                 strncmp(line, "id:", 3) == 0 || strncmp(line, "retry:", 6) == 0) {
            continue;
        }
        if (n > 0) {
            json[n++] = '\n';
        }
        memcpy(json + n, line, strlen(line));
        n += strlen(line);
    }
    json[n] = '\0';
    if (strspn(json, " \t\n") == n) {
        return 0;
    }
    ev = json_loadb(json, n, 0, &je);
    if (ev == NULL) {
        return stream_fail(s, "execd sent an event that is not JSON", json);
    }
    r = stream_event(s, ev, json);
    json_decref(ev);
    return r;
}

/* Parses every complete block in the buffer. */
static int stream_drain(struct stream *s)
{
    char *end;

    while ((end = memmem(s->buf, s->len, "\n\n", 2)) != NULL) {
        size_t used = (size_t)(end - s->buf) + 2;
        int r;

        *end = '\0';
        r = stream_block(s, s->buf);
        memmove(s->buf, s->buf + used, s->len - used);
        s->len -= used;
        s->buf[s->len] = '\0';
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

static int on_data(void *ud, const char *data, size_t len)
{
    struct stream *s = ud;
    size_t room = OSB_HEAD_MAX - s->head_len;

    memcpy(s->head + s->head_len, data, len < room ? len : room);
    s->head_len += len < room ? len : room;
    if (s->len + len + 1 > OSB_EVENT_MAX) {
        return stream_fail(s, "execd sent an event larger than 8 MiB", "");
    }
    if (s->len + len + 1 > s->cap) {
        s->cap = (s->len + len + 1) * 2;
        s->buf = xrealloc(s->buf, s->cap);
    }
    for (size_t i = 0; i < len; i++) {
        if (data[i] != '\r') { /* raw CR is only ever framing: JSON escapes it */
            s->buf[s->len++] = data[i];
        }
    }
    s->buf[s->len] = '\0';
    return stream_drain(s) != 0;
}

/* At the end of the stream: a last event without its blank line. */
static void stream_finish(struct stream *s)
{
    if (s->terminal == TERM_NONE && s->protocol_error == NULL && !s->sink_stopped && s->len > 0) {
        stream_block(s, s->buf);
        s->len = 0;
    }
}

/* --- exec ----------------------------------------------------------------- */

static void interrupt_command(struct osb_ctx *c, const char *execd, char *const *headers,
                              const char *cmd_id)
{
    cleanup_free char *url = xasprintf("%s/command?id=%s", execd, cmd_id);
    cleanup_free const char **h = header_list(headers, NULL, NULL);
    struct sbx_http_request req = {
        .method = "DELETE", .url = url, .headers = h, .timeout_ms = 10000};
    struct sbx_http_response resp;
    sbx_error_t *e = NULL;

    if (c->host->http(&req, &resp, &e) < 0) {
        c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: interrupting command %s: %s", cmd_id,
                     e->msg);
        c->host->error_free(&e);
        return;
    }
    if (resp.status != 200 && resp.status != 204) {
        c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: interrupting command %s: HTTP %ld",
                     cmd_id, resp.status);
    }
    c->host->http_response_free(&resp);
}

/* The stream ended before a terminal event: ask execd how the command ended,
 * waiting while it still runs. */
static int status_fallback(struct osb_ctx *c, const char *execd, char *const *headers,
                           struct stream *s, struct sbx_exec_ctl *ctl, const char *why,
                           sbx_error_t **err)
{
    cleanup_free char *url = xasprintf("%s/command/status/%s", execd, s->cmd_id);
    cleanup_free const char **h = header_list(headers, "Accept: application/json", NULL);
    int warned = 0;

    for (;;) {
        struct sbx_http_request req = {.method = "GET",
                                       .url = url,
                                       .headers = h,
                                       .timeout_ms = 10000,
                                       .cancel = &ctl->cancelled};
        struct sbx_http_response resp;
        json_t *j, *code;
        int running;

        if (c->host->http(&req, &resp, err) < 0) {
            return c->host->error_wrap(err,
                                       "opensandbox '%s': the output stream ended before "
                                       "the command finished (%s); its status is unknown",
                                       c->instance, why);
        }
        if (resp.status != 200) {
            c->host->error_set(err, SBX_E_ENGINE,
                               "opensandbox '%s': the output stream ended "
                               "before the command finished (%s); GET /command/status: HTTP "
                               "%ld",
                               c->instance, why, resp.status);
            c->host->http_response_free(&resp);
            return -1;
        }
        j = json_loadb(resp.body, resp.body_len, 0, NULL);
        c->host->http_response_free(&resp);
        running = json_is_true(json_object_get(j, "running"));
        code = json_object_get(j, "exit_code");
        if (!running && json_is_integer(code)) {
            long long n = json_integer_value(code);

            s->exit_status = n < 0 ? 128 + 9 : (int)(n & 0xff);
            json_decref(j);
            c->host->log(c->instance, SBX_LOG_WARN,
                         "opensandbox: the output stream of command "
                         "%s ended early (%s); exit status %d from /command/status",
                         s->cmd_id, why, s->exit_status);
            return 0;
        }
        json_decref(j);
        if (!running) {
            return c->host->error_set(err, SBX_E_ENGINE,
                                      "opensandbox '%s': the output stream "
                                      "ended before the command finished (%s) and execd "
                                      "reports no exit code",
                                      c->instance, why);
        }
        if (!warned) {
            c->host->log(c->instance, SBX_LOG_WARN,
                         "opensandbox: the output stream of command "
                         "%s ended early (%s); waiting for it, further output is lost",
                         s->cmd_id, why);
            warned = 1;
        }
        if (__atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE)) {
            return c->host->error_set(err, SBX_E_CANCELLED, "opensandbox '%s': cancelled",
                                      c->instance);
        }
        osb_sleep_ms(c->poll_ms);
    }
}

static char *exec_body(struct osb_ctx *c, const struct sbx_exec_spec *spec)
{
    cleanup_free char *cmd = osb_shell_join(spec->argv);
    const char *cwd = spec->workdir != NULL ? spec->workdir : c->workdir;
    json_t *b = json_pack("{ss}", "command", cmd);
    json_t *envs = json_object();
    char *out;

    if (cwd != NULL) {
        json_object_set_new(b, "cwd", json_string(cwd));
    }
    for (size_t i = 0; i < spec->n_env; i++) {
        if (spec->env[i].name != NULL && spec->env[i].value != NULL) {
            json_object_set_new(envs, spec->env[i].name, json_string(spec->env[i].value));
        }
    }
    json_object_set_new(b, "envs", envs);
    out = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    if (out == NULL) {
        abort();
    }
    return out;
}

int osb_execd_exec(struct osb_ctx *c, const char *sandbox_id, const struct sbx_exec_spec *spec,
                   struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err)
{
    cleanup_free char *execd = NULL;
    cleanup_free char *url = NULL;
    cleanup_free const char **h = NULL;
    char **headers = NULL;
    char *body;
    struct stream s;
    struct sbx_http_request req;
    struct sbx_http_response resp;
    sbx_error_t *e = NULL;
    struct sbx_exec_ctl local_ctl = {0};
    int r, ret = -1;
    int cancelled;

    if (ctl == NULL) {
        ctl = &local_ctl;
    }
    if (spec->argv == NULL || spec->argv[0] == NULL) {
        return c->host->error_set(err, SBX_E_USAGE, "opensandbox '%s': exec without a command",
                                  c->instance);
    }
    if (osb_box_get(c, sandbox_id, &execd, &headers, err) < 0) {
        return -1;
    }
    osb_box_maybe_renew(c, sandbox_id);
    url = xasprintf("%s/command", execd);
    h = header_list(headers, "Content-Type: application/json", "Accept: text/event-stream");
    body = exec_body(c, spec); /* may hold secrets: zeroed below, never logged */
    memset(&s, 0, sizeof(s));
    s.c = c;
    s.sandbox_id = sandbox_id;
    s.spec = spec;
    memset(&req, 0, sizeof(req));
    req.method = "POST";
    req.url = url;
    req.headers = h;
    req.body = body;
    req.body_len = strlen(body);
    req.on_data = on_data;
    req.userdata = &s;
    req.cancel = &ctl->cancelled;
    memset(&resp, 0, sizeof(resp));
    r = c->host->http(&req, &resp, &e);
    c->host->secret_zero(body, strlen(body));
    free(body);
    if (r == 0) {
        stream_finish(&s);
    }

    if (s.terminal != TERM_NONE) {
        /* anything after the terminal event (our abort, a missing final
         * chunk, a dropped connection) does not matter */
        if (s.start_error != NULL) {
            c->host->error_set(err, SBX_E_NOEXEC,
                               "opensandbox '%s': execd could not start the "
                               "command: %s",
                               c->instance, s.start_error);
            goto out;
        }
        *exit_status = s.exit_status;
        ret = 0;
        goto out;
    }
    cancelled = __atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE);
    if (cancelled || s.sink_stopped) {
        if (s.cmd_id != NULL) {
            interrupt_command(c, execd, headers, s.cmd_id);
        }
        c->host->error_set(err, SBX_E_CANCELLED, "opensandbox '%s': command %s in sandbox %s",
                           c->instance, cancelled ? "cancelled" : "stopped by its reader",
                           sandbox_id);
        goto out;
    }
    if (r == 0 && resp.status != 200) {
        osb_reply_error(c, "POST", "/command (execd)", resp.status, s.head, s.head_len, err);
        goto out;
    }
    if (s.protocol_error != NULL) {
        if (s.cmd_id != NULL) {
            interrupt_command(c, execd, headers, s.cmd_id);
        }
        c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': POST /command: %s", c->instance,
                           s.protocol_error);
        goto out;
    }
    if (s.cmd_id == NULL) {
        if (r < 0) {
            *err = e;
            e = NULL;
            c->host->error_wrap(err, "opensandbox '%s': POST /command", c->instance);
        }
        else {
            c->host->error_set(err, SBX_E_PROTOCOL,
                               "opensandbox '%s': POST /command: the stream "
                               "ended before its init event",
                               c->instance);
        }
        goto out;
    }
    ret = status_fallback(c, execd, headers, &s, ctl,
                          r < 0 ? e->msg : "end of stream without a terminal event", err);
    if (ret == 0) {
        *exit_status = s.exit_status;
    }

out:
    if (e != NULL) {
        c->host->error_free(&e);
    }
    if (r == 0) {
        c->host->http_response_free(&resp);
    }
    osb_strv_free(headers);
    free(s.buf);
    free(s.cmd_id);
    free(s.start_error);
    free(s.protocol_error);
    return ret;
}
