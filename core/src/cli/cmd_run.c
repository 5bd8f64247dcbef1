/* cmd_run.c - `sbx run` (a job of the runner: the configured one, or a
 * private one in this process) and `sbx exec` (one command in a running task,
 * through its keeper). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/task_opts.h"
#include "http/http.h"
#include "plugin/loader.h"
#include "runner/private.h"
#include "runner/runner.h"
#include "cli/task_runner.h"
#include "sandbox/statedir.h"
#include "sandbox/task.h"
#include "sandbox/view.h"
#include "sbx/sbx_util.h"
#include "util/log.h"
#include "util/xalloc.h"

#define CAPTURE_MAX (1u << 20)

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
    int e = errno;

    interrupted = sig;
    errno = e;
}

static void install_signals(void)
{
    struct sigaction sa = {0};

    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

void sbx_cmd_run_help(FILE *out)
{
    fprintf(out,
            "usage: sbx run [OPTIONS] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD in a fresh sandbox that is destroyed when CMD ends: start + exec +\n"
            "end in one, as one job of a runner. Output is streamed live, stdout and\n"
            "stderr kept apart. The sandbox is removed on every path: success, failure,\n"
            "Ctrl-C, SIGTERM, engine errors; a later run removes what a killed run left\n"
            "behind. The start waits, saying so on stderr with the numbers, while this\n"
            "box's sandbox slots (box.max_sandboxes) or memory (box.memory -\n"
            "box.host_reserve) are taken, and is refused at once when limits.memory can\n"
            "never fit.\n"
            "\n"
            "%s"
            "  --env K=V            set a variable for CMD (repeatable; K: letters, digits,\n"
            "                       '_', not starting with a digit). A name the credential\n"
            "                       lease or the egress wiring sets keeps their value\n"
            "  --json               print the job record as JSON on stdout instead of\n"
            "                       streaming; it holds CMD's output (1 MiB each, capped)\n"
            "\n"
            "Without runner.listen, the runner is a private one this process starts for\n"
            "the run (its own 0700 directory, socket and store, removed at the end; its\n"
            "only worktree root the --worktree directory; one pool, the whole box; docs/\n"
            "tasks.md, \"One command\"). The job id (j-<12 hex>) is the task id unless\n"
            "--task names one. With runner.listen set, the run is a job of that runner\n"
            "('sbx serve'): its pools, queue, policy and caps apply, and a runner that\n"
            "does not answer fails the run with 125; nothing falls back to running here.\n"
            "Either way --env is the job's env, --json prints the runner's job record\n"
            "with stdout and stderr (docs/tasks.md lists its keys), and Ctrl-C\n"
            "(SIGINT/SIGTERM/SIGHUP) cancels the job and waits for its end (with\n"
            "runner.listen, a second one stops waiting; a private runner always removes\n"
            "the sandbox before sbx exits).\n"
            "\n"
            "A provider that does not enforce a limit, egress control or user namespaces\n"
            "the task asks for is refused, naming what is missing, unless its instance sets\n"
            "unisolated = true; then the task warns and its record says \"isolation\".\n"
            "\n"
            "Exit status: CMD's own (128+n when a signal ended it); 125 when sbx itself\n"
            "failed (configuration, engine, policy, refused provider, lost sandbox, limit\n"
            "reached); 126 when CMD cannot be executed; 127 when it is not found; 130/143/\n"
            "129 when sbx was interrupted by SIGINT/SIGTERM/SIGHUP (after cleaning up).\n",
            SBX_TASK_OPTS_HELP);
}

void sbx_cmd_exec_help(FILE *out)
{
    fprintf(out,
            "usage: sbx exec TASK [--env K=V]... [--json] -- CMD [ARGS...]\n"
            "       sbx exec -it [--keep] TASK [--env K=V]... -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD in the sandbox of a running task (see 'sbx task start'); files it\n"
            "writes stay for the task's later commands. Output is streamed live. Ctrl-C\n"
            "cancels CMD; the task goes on.\n"
            "\n"
            "  --env K=V   set a variable for CMD (repeatable), as 'sbx run --env'\n"
            "  --json      print {\"task\", \"argv\", \"exit_status\", \"stdout\", \"stderr\"}\n"
            "              on stdout instead of streaming (1 MiB of each, then\n"
            "              \"output_truncated\"; \"error\" when sbx failed)\n"
            "  -it, -t, --tty\n"
            "              run CMD on a terminal (a pty) with this terminal's input, in\n"
            "              raw mode until CMD ends: window size changes follow, Ctrl-C\n"
            "              goes to CMD's foreground process group inside (docs/tasks.md,\n"
            "              \"Terminals\"). Needs the sandbox's exec agent; refused for a\n"
            "              task holding credentials. With runner.listen set: the\n"
            "              runner's terminal of its task (the client's own)\n"
            "  --keep      (with -it) CMD is the task's kept session: it goes on when\n"
            "              this terminal leaves (Ctrl-\\ then d, or the connection\n"
            "              closing), and 'sbx attach TASK' comes back to it (one per\n"
            "              task; docs/tasks.md, \"Kept sessions\")\n"
            "\n"
            "Exit status: as 'sbx run' (CMD's own, or 125/126/127); 0 when detached\n"
            "from a kept session.\n");
}

struct capture {
    int json;
    char *buf[2];
    size_t len[2];
    int truncated[2];
};

static int on_output(void *ud, int stream, const char *data, size_t len)
{
    struct capture *c = ud;
    int i = stream == 2 ? 1 : 0;

    if (!c->json) {
        size_t off = 0;

        while (off < len) {
            ssize_t w = write(stream == 2 ? 2 : 1, data + off, len - off);

            if (w < 0 && errno == EINTR) {
                continue; /* a signal (Ctrl-C) must not cut what is being written */
            }
            if (w <= 0) {
                return 0; /* a closed stdout must not kill the sandbox's command */
            }
            off += (size_t)w;
        }
        return 0;
    }
    if (c->len[i] + len > CAPTURE_MAX) {
        len = CAPTURE_MAX - c->len[i];
        c->truncated[i] = 1;
    }
    c->buf[i] = xrealloc(c->buf[i], c->len[i] + len + 1);
    memcpy(c->buf[i] + c->len[i], data, len);
    c->len[i] += len;
    c->buf[i][c->len[i]] = '\0';
    return 0;
}

static int interrupted_exit(void)
{
    return interrupted == SIGINT ? 130 : interrupted == SIGTERM ? 143 : 129;
}

/* The agent pool, unless this box serves only others (box.pools). */
static const char *default_pool(const struct sbx_config *cfg)
{
    for (size_t i = 0; cfg->box.pools != NULL && cfg->box.pools[i] != NULL; i++) {
        if (strcmp(cfg->box.pools[i], "agent") == 0) {
            return "agent";
        }
    }
    return cfg->box.pools != NULL && cfg->box.pools[0] != NULL ? cfg->box.pools[0] : "agent";
}

/* The embedded --json result's output keys on a record: stdout, stderr
 * (held up to CAPTURE_MAX each) and output_truncated when cut. */
static void add_output(json_t *rec, const struct capture *cap, int truncated)
{
    json_object_set_new(rec, "stdout", json_stringn(cap->buf[0] ?: "", cap->len[0]));
    json_object_set_new(rec, "stderr", json_stringn(cap->buf[1] ?: "", cap->len[1]));
    if (truncated || cap->truncated[0] || cap->truncated[1]) {
        json_object_set_new(rec, "output_truncated", json_true());
    }
}

static void print_json(json_t *rec)
{
    char *s = json_dumps(rec, JSON_INDENT(2));

    printf("%s\n", s ? s : "null");
    free(s);
}

static char *submit_body(struct sbx_config *cfg, const struct sbx_task_cli *o)
{
    json_t *req = json_object();
    json_t *cmd = json_array();
    char *body;

    for (size_t i = 0; o->cmd[i] != NULL; i++) {
        json_array_append_new(cmd, json_string(o->cmd[i]));
    }
    json_object_set_new(req, "argv", cmd);
    json_object_set_new(req, "pool", json_string(o->task.pool ? o->task.pool : default_pool(cfg)));
    if (o->task.task_id != NULL) {
        json_object_set_new(req, "task", json_string(o->task.task_id));
    }
    if (o->task.worktree != NULL) {
        char *real = realpath(o->task.worktree, NULL);

        json_object_set_new(req, "worktree", json_string(real ? real : o->task.worktree));
        free(real);
    }
    if (o->task.provider != NULL) {
        json_object_set_new(req, "provider", json_string(o->task.provider));
    }
    if (o->task.credentials != NULL) {
        json_object_set_new(req, "credentials", json_string(o->task.credentials));
    }
    if (o->n_env > 0) {
        json_t *env = json_object();

        /* a name given twice: the last value, as in embedded mode */
        for (size_t i = 0; i < o->n_env; i++) {
            json_object_set_new(env, o->env[i].name, json_string(o->env[i].value));
        }
        json_object_set_new(req, "env", env);
    }
    body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    return body;
}

static int discard_output(void *ud, int stream, const char *data, size_t len)
{
    (void)ud;
    (void)stream;
    (void)data;
    (void)len;
    return 0;
}

/* Waits for the job's end, or a signal: the runner's follow stream closes
 * when the job has ended (event-driven, no polling); its bytes were shown
 * already and are dropped. */
static void wait_job_end(struct sbx_config *cfg, const char *id)
{
    sbx_error_t *err = NULL;

    if (sbx_runner_follow(cfg, id, discard_output, NULL, (const volatile int *)&interrupted, NULL,
                          &err) < 0 &&
        !interrupted) {
        sbx_cli_print_error(err);
    }
    sbx_error_free(&err);
}

/* Submits o's job (POST /v1/jobs): its id into id. -1 having said why. */
static int submit_job(struct sbx_config *cfg, const struct sbx_task_cli *o, char *id, size_t size)
{
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *body = submit_body(cfg, o);
    json_t *rep;

    if (sbx_runner_call(cfg, "POST", "/v1/jobs", body, NULL, NULL, &resp, &err) < 0) {
        free(body);
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return -1;
    }
    free(body);
    rep = json_loadb(resp.body, resp.body_len, 0, NULL);
    snprintf(id, size, "%s", json_string_value(json_object_get(rep, "id")) ?: "");
    json_decref(rep);
    sbx_http_response_free(&resp);
    return 0;
}

/* Ctrl-C cancels the job, as it cancels an embedded run; then waits for its end
 * (the runner stops the command and cleans up) unless a second signal comes.
 * The wait reads the record, not the output again (that would repeat it). */
static void cancel_job(struct sbx_config *cfg, const char *id, int priv)
{
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    int sig = interrupted;
    char *path = xasprintf("/v1/jobs/%s/cancel", id);

    if (sbx_runner_call(cfg, "POST", path, "{}", NULL, NULL, &resp, &err) == 0) {
        sbx_http_response_free(&resp);
        if (!priv) { /* a private runner's job id means nothing to the user */
            fprintf(stderr, "sbx: job %s cancelled (%s)\n", id,
                    sig == SIGINT    ? "SIGINT"
                    : sig == SIGTERM ? "SIGTERM"
                                     : "SIGHUP");
        }
    }
    else {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
    }
    free(path);
    interrupted = 0;
    wait_job_end(cfg, id);
    interrupted = sig;
}

/* The job's record (GET /v1/jobs/ID), or NULL having said why; *rc gets the
 * command's exit status when it has one, else it is left and the reason said. */
static json_t *job_record(struct sbx_config *cfg, const char *id, int priv, int *rc)
{
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *path = xasprintf("/v1/jobs/%s", id);
    json_t *rec = NULL;
    json_t *es;

    if (sbx_runner_call(cfg, "GET", path, NULL, NULL, NULL, &resp, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        free(path);
        return NULL;
    }
    free(path);
    rec = json_loadb(resp.body, resp.body_len, 0, NULL);
    es = json_object_get(rec, "exit_status");
    if (json_is_integer(es) && json_integer_value(es) >= 0) {
        *rc = (int)json_integer_value(es);
        if (json_is_string(json_object_get(rec, "reason"))) {
            /* 126/127: why the command did not run, as embedded */
            fprintf(stderr, "sbx: error: %s\n", json_string_value(json_object_get(rec, "reason")));
        }
    }
    else if (priv && interrupted) {
        /* cancelled by this run's own signal: exit 130/143/129 says it */
    }
    else if (priv) {
        fprintf(stderr, "sbx: error: %s\n",
                json_string_value(json_object_get(rec, "reason")) ?: "no exit status");
    }
    else {
        fprintf(stderr, "sbx: error: job %s %s: %s\n", id,
                json_string_value(json_object_get(rec, "state")) ?: "?",
                json_string_value(json_object_get(rec, "reason")) ?: "no exit status");
    }
    sbx_http_response_free(&resp);
    return rec;
}

/* `sbx run` is start + exec + end: the runner keeps an agent task after its
 * command, so end it (a task already gone is fine). */
static void end_task(struct sbx_config *cfg, const char *task)
{
    struct sbx_http_response resp = {0};
    char *path = xasprintf("/v1/tasks/%s/end", task);

    if (sbx_runner_call(cfg, "POST", path, "{}", NULL, NULL, &resp, NULL) == 0) {
        sbx_http_response_free(&resp);
    }
    free(path);
}

/* `sbx run` is a job of a runner (docs/architecture.md, One implementation):
 * the configured one (runner.listen; a runner that is down fails the run with
 * 125, nothing falls back) or this process's private one (priv: its job id
 * means nothing to the user, so a failure says only why). The output comes
 * back in frames, stdout and stderr apart. */
static int run_via_runner(struct sbx_config *cfg, const struct sbx_task_cli *o, int priv)
{
    struct capture cap = {.json = o->json};
    sbx_error_t *err = NULL;
    json_t *rec;
    size_t got = 0;
    char id[96];
    int rc = SBX_EXIT_SBX;
    int followed;

    install_signals(); /* SIGPIPE too: a closed stdout must not kill sbx (the job is awaited) */
    if (submit_job(cfg, o, id, sizeof(id)) < 0) {
        return SBX_EXIT_SBX;
    }
    followed = interrupted ? -1
                           : sbx_runner_follow(cfg, id, on_output, &cap,
                                               (const volatile int *)&interrupted, &got, &err);
    if (followed < 0 && !interrupted) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        free(cap.buf[0]);
        free(cap.buf[1]);
        return SBX_EXIT_SBX;
    }
    sbx_error_free(&err);
    if (followed == 0) {
        interrupted = 0; /* a signal after the job's end changes nothing */
    }
    if (interrupted) {
        cancel_job(cfg, id, priv);
    }
    rec = job_record(cfg, id, priv, &rc);
    if (o->json && rec != NULL) {
        json_t *total = json_object_get(rec, "output_bytes");
        /* the runner keeps the last 1 MiB: bytes it dropped before this
         * client followed are missing here */
        int dropped = json_is_integer(total) && (size_t)json_integer_value(total) > got;

        json_object_del(rec, "output_truncated");
        add_output(rec, &cap, dropped);
        print_json(rec);
    }
    json_decref(rec);
    free(cap.buf[0]);
    free(cap.buf[1]);
    if (interrupted) {
        rc = interrupted == SIGINT ? 130 : interrupted == SIGTERM ? 143 : 129;
    }
    if (o->task.task_id != NULL) {
        end_task(cfg, o->task.task_id);
    }
    return rc;
}

/* 1 (said) when name is given and cfg has no instance of kind by it. */
static int no_instance(const struct sbx_config *cfg, const char *name, enum sbx_plugin_kind kind)
{
    if (name == NULL || sbx_config_instance(cfg, name, kind) != NULL) {
        return 0;
    }
    sbx_log(SBX_LOG_ERROR, "%s: no %s instance named '%s'", cfg->path ? cfg->path : "configuration",
            sbx_plugin_kind_name(kind), name);
    return 1;
}

/* Without runner.listen, `sbx run` starts a private one-box runner in this
 * process (runner/private.h) and is a job of it, as with a configured runner
 * (docs/tasks.md, "One command"): one host of tasks. The worktree is checked
 * as every task's is first (same refusals, same messages), and its resolved
 * path is the private runner's only worktree root. The runner stops before
 * this returns: its job cancelled if still running, its task ended, its
 * sandbox removed, its directory gone. */
static int run_private(struct sbx_cli *cli, struct sbx_config *cfg, const struct sbx_task_cli *o)
{
    struct sbx_runner_private_opts po = {.slot_lock = 1,
                                         .one_shot = 1,
                                         .output_wait = 1,
                                         .pool = o->task.pool ? o->task.pool : "agent"};
    struct sbx_runner_private *p;
    sbx_error_t *err = NULL;
    const char *dir = sbx_cli_plugin_dir(cli);
    const char *roots[1];
    char *wt = NULL;
    int rc;

    if (dir == NULL) {
        return SBX_EXIT_SBX;
    }
    install_signals(); /* before the start: a Ctrl-C during it stops the run */
    if (o->task.task_id != NULL && !sbx_id_valid(o->task.task_id, SBX_ID_TASK)) {
        sbx_log(SBX_LOG_ERROR,
                "task id '%s': use 1-64 letters, digits, '-', '_' or '.', starting with a "
                "letter or digit",
                o->task.task_id);
        return SBX_EXIT_SBX;
    }
    /* the instances named, as a task's start names them (the runner's submit
     * would say "field 'provider'") */
    if (no_instance(cfg, o->task.provider, SBX_PLUGIN_PROVIDER) ||
        no_instance(cfg, o->task.credentials, SBX_PLUGIN_CREDENTIAL)) {
        return SBX_EXIT_SBX;
    }
    if (o->task.worktree != NULL) {
        char *state = sbx_state_dir(cfg->state_dir, &err);

        if (state == NULL || sbx_worktree_check(o->task.worktree, state, &wt, &err) < 0) {
            free(state);
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            return SBX_EXIT_SBX;
        }
        free(state);
        roots[0] = wt;
        po.worktree_roots = roots;
        po.n_worktree_roots = 1;
    }
    p = sbx_runner_private_start(cfg, dir, &po, &err);
    free(wt);
    if (p == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return interrupted ? interrupted_exit() : SBX_EXIT_SBX;
    }
    rc = interrupted ? interrupted_exit() : run_via_runner(cfg, o, 1);
    sbx_runner_private_stop(p);
    return rc;
}

int sbx_cmd_run(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_task_cli o;
    struct sbx_config *cfg;
    int rc;

    if (sbx_task_cli_parse(&o, argc, argv, 1) < 0) {
        return SBX_EXIT_SBX;
    }
    if (o.cmd == NULL) {
        fprintf(stderr, "sbx: error: run: no command (usage: sbx run [OPTIONS] -- CMD ...)\n");
        sbx_task_cli_fini(&o);
        return SBX_EXIT_SBX;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        rc = SBX_EXIT_SBX;
    }
    else if (cfg->runner.listen != NULL) {
        rc = run_via_runner(cfg, &o, 0);
    }
    else {
        rc = run_private(cli, cfg, &o);
    }
    sbx_task_cli_fini(&o);
    return rc;
}

/* exec --json: {task, argv, exit_status, stdout, stderr[, output_truncated][, error]} */
static void print_exec_json(const char *task, char **cmd, int ran, int status,
                            const struct capture *cap, const sbx_error_t *err)
{
    json_t *args = json_array();
    json_t *rec;

    for (size_t i = 0; cmd[i] != NULL; i++) {
        json_array_append_new(args, json_string(cmd[i]));
    }
    rec = json_pack("{s:s, s:o, s:o}", "task", task, "argv", args, "exit_status",
                    ran ? json_integer(status) : json_null());
    add_output(rec, cap, 0);
    if (err != NULL) {
        json_object_set_new(rec, "error", json_string(sbx_error_msg(err)));
    }
    print_json(rec);
    json_decref(rec);
}

int sbx_cmd_exec(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_task_cli o;
    struct sbx_config *cfg;
    struct capture cap = {0};
    sbx_error_t *err = NULL;
    char *state;
    int status = 0;
    int code = 125;
    int r;

    if (sbx_exec_wants_tty(argc, argv)) {
        return sbx_cmd_exec_tty(cli, argc, argv); /* (added) -it */
    }
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "sbx: error: exec: usage: sbx exec TASK [--env K=V]... [--json] -- CMD "
                        "... (see 'sbx exec --help')\n");
        return SBX_EXIT_SBX;
    }
    if (sbx_task_cli_parse(&o, argc - 1, argv + 1, 2) < 0) {
        return SBX_EXIT_SBX;
    }
    if (o.cmd == NULL) {
        fprintf(stderr, "sbx: error: exec: no command (usage: sbx exec TASK -- CMD ...)\n");
        sbx_task_cli_fini(&o);
        return SBX_EXIT_SBX;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        sbx_task_cli_fini(&o);
        return SBX_EXIT_SBX;
    }
    if (cfg->runner.listen != NULL) {
        fprintf(stderr,
                "sbx: error: exec: runner.listen is set: run commands in a runner task "
                "with 'sbx submit --task %s -- CMD' (sbx exec talks to embedded tasks only; it "
                "does not fall back)\n",
                argv[1]);
        sbx_task_cli_fini(&o);
        return SBX_EXIT_SBX;
    }
    state = sbx_state_dir(cfg->state_dir, &err);
    if (state == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        sbx_task_cli_fini(&o);
        return SBX_EXIT_SBX;
    }
    install_signals();
    cap.json = 1;
    /* (changed, issue 31) a job of the runner that hosts the task (its keeper) */
    r = sbx_task_runner_use(cfg, state, argv[1], &err) < 0
            ? -1
            : sbx_task_runner_exec(cfg, argv[1], (const char *const *)o.cmd, o.env, o.n_env,
                                   (const volatile int *)&interrupted, o.json ? on_output : NULL,
                                   &cap, &status, &code, &err);
    free(state);
    if (r < 0) {
        sbx_cli_print_error(err);
        code = interrupted ? interrupted_exit() : code;
    }
    if (o.json) {
        print_exec_json(argv[1], o.cmd, r == 0, status, &cap, err);
    }
    sbx_error_free(&err);
    sbx_task_cli_fini(&o);
    free(cap.buf[0]);
    free(cap.buf[1]);
    return r < 0 ? code : status;
}
