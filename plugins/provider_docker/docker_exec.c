/* docker_exec.c - one command in a sandbox: exec create, the streamed
 * output, the exit code and cancellation. (The disk watchdog is
 * docker_disk.c, called by the core between and after commands.) */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker.h"
#include "docker_pid.h"

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int inspect_exec(struct dk_ctx *c, const char *eid, int *running, int *code, int64_t *pid,
                        sbx_error_t **err)
{
    json_t *reply = NULL;
    long status = 0;
    char path[256];

    snprintf(path, sizeof(path), "/exec/%s/json", eid);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status != 200) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: exec inspect: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    *running = json_is_true(json_object_get(reply, "Running"));
    *code = (int)json_integer_value(json_object_get(reply, "ExitCode"));
    *pid = json_integer_value(json_object_get(reply, "Pid"));
    json_decref(reply);
    return 0;
}

static int create_exec(struct dk_ctx *c, const char *id, const struct sbx_exec_spec *spec,
                       const char *user, char *eid, size_t eid_size, sbx_error_t **err)
{
    json_t *env = json_array();
    json_t *cmd = json_array();
    json_t *body;
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    const char *v;
    int r;

    for (size_t i = 0; spec->argv[i] != NULL; i++) {
        json_array_append_new(cmd, json_string(spec->argv[i]));
    }
    for (size_t i = 0; i < spec->n_env; i++) {
        char *kv = NULL;

        kv = xasprintf("%s=%s", spec->env[i].name, spec->env[i].value);
        json_array_append_new(env, json_string(kv));
        c->host->secret_zero(kv, strlen(kv));
        free(kv);
    }
    body = json_pack("{s:b, s:b, s:b, s:b, s:o, s:o, s:s}", "AttachStdin", 0, "AttachStdout", 1,
                     "AttachStderr", 1, "Tty", 0, "Cmd", cmd, "Env", env, "WorkingDir",
                     spec->workdir ? spec->workdir : "/workspace");
    if (user != NULL) { /* (added) sbx's own steps (docker_files.c): as this uid:gid */
        json_object_set_new(body, "User", json_string(user));
    }
    snprintf(path, sizeof(path), "/containers/%s/exec", id);
    r = dk_request(c, "POST", path, body, &status, &reply, err);
    json_decref(body); /* env values are in jansson's memory until here */
    if (r < 0) {
        return -1;
    }
    v = json_string_value(json_object_get(reply, "Id"));
    if (status == 404) {
        c->host->error_set(err, SBX_E_NOTFOUND, "docker: sandbox %.12s is gone", id);
    }
    else if (status == 409) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: sandbox %.12s is not running: %s", id,
                           dk_reply_message(reply));
    }
    else if (status != 201 || v == NULL) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: exec create: HTTP %ld: %s", status,
                           dk_reply_message(reply));
    }
    else {
        snprintf(eid, eid_size, "%s", v);
        json_decref(reply);
        return 0;
    }
    json_decref(reply);
    return -1;
}

/* runc reports a command it could not start as a system error; map it to
 * the shell's conventions: 127 not found, 126 cannot execute. */
static int start_failure(struct dk_ctx *c, const struct dk_demux *d, const char *cmd,
                         sbx_error_t **err)
{
    const char *t = d->syserr;

    if (strstr(t, "not found") != NULL || strstr(t, "no such file") != NULL) {
        return c->host->error_set(err, SBX_E_NOCMD, "%s: command not found in the sandbox", cmd);
    }
    if (strstr(t, "permission denied") != NULL) {
        return c->host->error_set(err, SBX_E_NOEXEC, "%s: permission denied (not executable)", cmd);
    }
    return c->host->error_set(err, SBX_E_NOEXEC, "%s: cannot be executed: %.200s", cmd, t);
}

static int exec_as(void *ctx, const char *id, const struct sbx_exec_spec *spec,
                   struct sbx_exec_ctl *ctl, const char *user, int *exit_status, sbx_error_t **err);

int dk_exec(void *ctx, const char *id, const struct sbx_exec_spec *spec, struct sbx_exec_ctl *ctl,
            int *exit_status, sbx_error_t **err)
{
    return exec_as(ctx, id, spec, ctl, NULL, exit_status, err);
}

int dk_exec_user(struct dk_ctx *c, const char *id, const struct sbx_exec_spec *spec,
                 const char *user, int *exit_status, sbx_error_t **err)
{
    return exec_as(c, id, spec, NULL, user, exit_status, err);
}

static int exec_as(void *ctx, const char *id, const struct sbx_exec_spec *spec,
                   struct sbx_exec_ctl *ctl, const char *user, int *exit_status, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    static const char *const json_hdr[] = {"Content-Type: application/json", NULL};
    static const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
    struct dk_demux demux = {.out = spec->on_output, .out_ud = spec->output_userdata};
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    char eid[128];
    char url[512];
    int running = 1;
    int code = 0;
    int64_t pid = 0;
    int r;

    if (spec->argv == NULL || spec->argv[0] == NULL || spec->argv[0][0] == '\0') {
        return c->host->error_set(err, SBX_E_USAGE, "docker: empty command");
    }
    /* the core's exec agent in the sandbox first (the disk watchdog is the
     * core's check, so it covers these commands too); 1: it is not there */
    if (user == NULL && spec->run_agent != NULL &&
        (r = spec->run_agent(spec->agent_userdata, ctl, exit_status, err)) <= 0) {
        return r;
    }
    if (create_exec(c, id, spec, user, eid, sizeof(eid), err) < 0) {
        return -1;
    }
    snprintf(url, sizeof(url), "http://localhost/%s/exec/%s/start", c->api, eid);
    req.method = "POST";
    req.url = url;
    req.unix_socket = c->socket;
    req.headers = json_hdr;
    req.body = start_body;
    req.body_len = sizeof(start_body) - 1;
    req.on_data = dk_demux_feed;
    req.userdata = &demux;
    req.cancel = ctl != NULL ? &ctl->cancelled : NULL;
    r = c->host->http(&req, &resp, err);
    if (r == 0 && resp.status != 200) {
        long st = resp.status;

        c->host->http_response_free(&resp);
        if (st == 404 || st == 409) {
            return c->host->error_set(err, SBX_E_NOTFOUND,
                                      "docker: sandbox %.12s is gone or "
                                      "stopped (exec start: HTTP %ld)",
                                      id, st);
        }
        return c->host->error_set(err, SBX_E_ENGINE, "docker: exec start: HTTP %ld", st);
    }
    c->host->http_response_free(&resp);
    /* the stream ended; the exit code may take a moment to be recorded */
    for (int i = 0; i < 250; i++) {
        sbx_error_t *ierr = NULL;

        if (inspect_exec(c, eid, &running, &code, &pid, &ierr) < 0) {
            if (r < 0) {
                c->host->error_free(&ierr);
                break;
            }
            *err = ierr;
            return -1;
        }
        if (!running || (ctl != NULL && __atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE))) {
            break;
        }
        sleep_ms(i < 50 ? 4 : 20);
    }
    if (ctl != NULL && __atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE)) {
        if (running && pid > 0 &&
            dk_signal_sandbox_pid((pid_t)pid, dk_init_pid(c, id), SIGKILL) < 0) {
            /* not provably the sandbox's (sbx outside the engine's pid namespace):
             * the command runs on until the sandbox ends */
            c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                         "exec %.12s cancelled but not killed: pid %" PRId64
                         " is not provably the sandbox's",
                         eid, pid);
        }
        if (err != NULL && *err != NULL) {
            return -1;
        }
        return c->host->error_set(err, SBX_E_CANCELLED, "docker: exec cancelled");
    }
    if (r < 0) {
        return -1;
    }
    if (demux.bad) {
        return c->host->error_set(err, SBX_E_PROTOCOL, "docker: exec stream is not multiplexed");
    }
    if (running) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker: exec stream ended but the command "
                                  "still runs");
    }
    if (demux.syserr_len > 0) {
        return start_failure(c, &demux, spec->argv[0], err);
    }
    *exit_status = code;
    return 0;
}

void dk_cancel(void *ctx, struct sbx_exec_ctl *ctl)
{
    (void)ctx;
    __atomic_store_n(&ctl->cancelled, 1, __ATOMIC_RELEASE);
}
