/* hooks.c - wait alerts (webhook and command hook), the autoscaler's
 * scale-up hook. Hooks run in a detached thread so the loop never waits on
 * them; commands are run with execvp and an argv (no shell). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "http/http.h"
#include "runner/hooks.h"
#include "sched/sched.h"
#include "util/log.h"
#include "util/xalloc.h"

extern char **environ;

#define HOOK_TIMEOUT_S 60

void runner_strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

char **runner_split_command(const char *cmd)
{
    char **v = NULL;
    size_t n = 0;
    const char *p = cmd;

    while (p != NULL && *p != '\0') {
        size_t len;

        p += strspn(p, " \t");
        len = strcspn(p, " \t");
        if (len == 0) {
            break;
        }
        v = xrealloc(v, (n + 2) * sizeof(char *));
        v[n++] = xstrndup(p, len);
        v[n] = NULL;
        p += len;
    }
    return v;
}

static int hidden(const char *entry, char *const *hide)
{
    for (size_t i = 0; hide != NULL && hide[i] != NULL; i++) {
        size_t n = strlen(hide[i]);

        if (strncmp(entry, hide[i], n) == 0 && entry[n] == '=') {
            return 1;
        }
    }
    return 0;
}

int runner_run_hook(const char *what, char *const argv[], char *const env[], char *const *hide)
{
    size_t n_env = 0;
    size_t n_add = 0;
    char **envp;
    pid_t pid;
    int st = 0;
    time_t deadline = time(NULL) + HOOK_TIMEOUT_S;

    while (environ[n_env] != NULL) {
        n_env++;
    }
    while (env != NULL && env[n_add] != NULL) {
        n_add++;
    }
    envp = xcalloc(n_env + n_add + 1, sizeof(char *));
    n_env = 0;
    for (size_t i = 0; environ[i] != NULL; i++) {
        /* the API clients' bearer tokens never reach a hook */
        if (hidden(environ[i], hide)) {
            continue;
        }
        envp[n_env++] = environ[i];
    }
    if (n_add > 0) {
        memcpy(envp + n_env, env, n_add * sizeof(char *));
    }
    pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_RDONLY);

        if (fd >= 0) {
            dup2(fd, 0);
        }
        execvpe(argv[0], argv, envp);
        _exit(127);
    }
    free(envp);
    if (pid < 0) {
        sbx_warn("runner: %s: fork: %s", what, strerror(errno));
        return -1;
    }
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);

        if (w == pid) {
            break;
        }
        if (w < 0 && errno != EINTR) {
            return -1;
        }
        if (time(NULL) > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            sbx_warn("runner: %s (%s): killed after %d s", what, argv[0], HOOK_TIMEOUT_S);
            return -1;
        }
        usleep(20 * 1000);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        sbx_warn("runner: %s (%s) failed with status %d", what, argv[0],
                 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        return -1;
    }
    return 0;
}

struct alert_job {
    char *webhook;  /* URL or NULL */
    char **command; /* alert_command argv or NULL */
    char **scale;   /* scale_up_command argv + pool + wanted, or NULL */
    char *body;     /* the alert JSON */
    char **hide;    /* runner.token_env and the clients' token_env: kept out of hooks */
    char *env[10];
};

static void alert_job_free(struct alert_job *a)
{
    free(a->webhook);
    runner_strv_free(a->command);
    runner_strv_free(a->scale);
    free(a->body);
    runner_strv_free(a->hide);
    for (size_t i = 0; a->env[i] != NULL; i++) {
        free(a->env[i]);
    }
    free(a);
}

static void *alert_main(void *arg)
{
    struct alert_job *a = arg;

    if (a->webhook != NULL) {
        static const char *const hdrs[] = {"Content-Type: application/json", NULL};
        struct sbx_http_request req = {
            .method = "POST",
            .url = a->webhook,
            .headers = hdrs,
            .body = a->body,
            .body_len = strlen(a->body),
            .timeout_ms = 10000,
        };
        struct sbx_http_response resp = {0};
        sbx_error_t *err = NULL;

        if (sbx_http_request(&req, &resp, &err) < 0) {
            sbx_warn("runner: alert webhook: %s", sbx_error_msg(err));
            sbx_error_free(&err);
        }
        else if (resp.status < 200 || resp.status >= 300) {
            sbx_warn("runner: alert webhook answered HTTP %ld", resp.status);
        }
        sbx_http_response_free(&resp);
    }
    if (a->command != NULL) {
        runner_run_hook("runner.alert_command", a->command, a->env, a->hide);
    }
    if (a->scale != NULL) {
        runner_run_hook("runner.scale_up_command", a->scale, a->env, a->hide);
    }
    alert_job_free(a);
    return NULL;
}

void runner_alert_fire(const struct sbx_config *c, const struct sbx_sched_alert *al,
                       const char *task, const struct sbx_scale_decision *d)
{
    struct alert_job *a = xcalloc(1, sizeof(*a));
    json_t *o;
    pthread_t th;
    size_t e = 0;

    o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:f, s:f, s:I, s:{s:s, s:i, s:i, s:b, s:s}}", "event",
                  "job_wait_alert", "job", al->id, "task", task, "pool", sbx_pool_name(al->pool),
                  "class", sbx_job_class_name(al->cls), "enqueued_at",
                  (double)al->enqueued_at / 1000.0, "wait_seconds", (double)al->wait_ms / 1000.0,
                  "alert_after", (json_int_t)c->runner.alert_after, "autoscaler", "action",
                  d->action == SBX_SCALE_UP ? "scale_up" : "none", "current", d->current, "wanted",
                  d->wanted, "capped", d->capped, "reason", d->reason);
    a->body = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    a->env[e++] = xasprintf("SBX_ALERT_JOB=%s", al->id);
    a->env[e++] = xasprintf("SBX_ALERT_TASK=%s", task);
    a->env[e++] = xasprintf("SBX_ALERT_POOL=%s", sbx_pool_name(al->pool));
    a->env[e++] = xasprintf("SBX_ALERT_CLASS=%s", sbx_job_class_name(al->cls));
    a->env[e++] = xasprintf("SBX_ALERT_WAIT_SECONDS=%.0f", (double)al->wait_ms / 1000.0);
    a->env[e++] = xasprintf("SBX_ALERT_ENQUEUED_AT=%.0f", (double)al->enqueued_at / 1000.0);
    a->env[e++] = xasprintf("SBX_AUTOSCALE=%s", d->reason);
    a->hide = xcalloc(c->runner.n_clients + 2, sizeof(char *));
    {
        size_t h = 0;

        if (c->runner.token_env != NULL) {
            a->hide[h++] = xstrdup(c->runner.token_env);
        }
        for (size_t i = 0; i < c->runner.n_clients; i++) {
            if (c->runner.clients[i].token_env != NULL) {
                a->hide[h++] = xstrdup(c->runner.clients[i].token_env);
            }
        }
    }
    if (c->runner.alert_webhook != NULL) {
        a->webhook = xstrdup(c->runner.alert_webhook);
    }
    if (c->runner.alert_command != NULL) {
        a->command = runner_split_command(c->runner.alert_command);
    }
    if (d->action == SBX_SCALE_UP && c->runner.scale_up_command != NULL) {
        char **v = runner_split_command(c->runner.scale_up_command);
        size_t n = 0;

        while (v != NULL && v[n] != NULL) {
            n++;
        }
        if (n > 0) {
            v = xrealloc(v, (n + 3) * sizeof(char *));
            v[n] = xstrdup(sbx_pool_name(d->pool));
            v[n + 1] = xasprintf("%d", d->wanted);
            v[n + 2] = NULL;
            a->scale = v;
        }
        else {
            runner_strv_free(v);
        }
    }
    if (pthread_create(&th, NULL, alert_main, a) != 0) {
        alert_job_free(a);
        return;
    }
    pthread_detach(th);
}

void runner_alerts_tick(struct sbx_sched *sched, const struct sbx_config *cfg,
                        const char *(*task_of)(void *arg, const char *job), void *arg)
{
    struct sbx_sched_alert al[16];
    size_t n;

    do {
        n = sbx_sched_due_alerts(sched, al, 16);
        for (size_t i = 0; i < n; i++) {
            struct sbx_scale_decision d = {0};

            sbx_sched_autoscale(sched, al[i].pool, &d);
            sbx_warn("runner: job %s has waited %.0fs in pool %s (runner.alert_after %llds)%s%s",
                     al[i].id, (double)al[i].wait_ms / 1000.0, sbx_pool_name(al[i].pool),
                     (long long)cfg->runner.alert_after, d.reason[0] ? "; autoscaler: " : "",
                     d.reason);
            if (d.action == SBX_SCALE_UP) {
                sbx_error_t *err = NULL;

                if (cfg->runner.scale_up_command == NULL) {
                    sbx_warn("runner: autoscaler wants %d box(es) for pool %s but "
                             "runner.scale_up_command is not set",
                             d.wanted, sbx_pool_name(d.pool));
                }
                else if (sbx_sched_boxes_set(sched, d.pool, d.wanted, &err) < 0) {
                    sbx_warn("runner: %s", sbx_error_msg(err));
                    sbx_error_free(&err);
                }
            }
            runner_alert_fire(cfg, &al[i], task_of(arg, al[i].id), &d);
        }
    } while (n == 16);
}
