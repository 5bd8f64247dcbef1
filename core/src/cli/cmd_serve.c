/* cmd_serve.c - `sbx serve`: the runner daemon (docs/runner.md). */
#include <pthread.h>
#include <signal.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "runner/runner.h"
#include "util/log.h"

void sbx_cmd_serve_help(FILE *out)
{
    fprintf(out,
            "usage: sbx serve\n"
            "\n"
            "Runs the runner: a durable queue with ci and agent slot pools, heavy and\n"
            "light slots, an HTTP API on runner.listen (default unix:<state_dir>/runner.sock,\n"
            "mode 0660; tcp:HOST:PORT needs a bearer token in the variable named by\n"
            "runner.token_env), Prometheus metrics at GET /metrics, wait alerts and the\n"
            "autoscaler hook. Jobs are submitted with 'sbx submit'. SIGINT or SIGTERM stops\n"
            "it: running jobs are cancelled ('runner stopped'), queued jobs stay queued for\n"
            "the next start. After a crash or kill -9 the next start recovers every job.\n"
            "\n"
            "See docs/runner.md and docs/api.md.\n");
}

struct sigwaiter {
    struct sbx_runner *r;
    sigset_t set;
};

static void *sig_main(void *arg)
{
    struct sigwaiter *w = arg;
    int sig = 0;

    while (sigwait(&w->set, &sig) == 0) {
        if (sig == SIGHUP) {
            sbx_error_t *err = NULL;

            /* reload policy atomically: a bad new policy is refused, the old stays */
            if (sbx_runner_reload_policy(w->r, &err) < 0) {
                sbx_error_log("runner: SIGHUP: %s", sbx_error_msg(err));
                sbx_error_free(&err);
            }
            else {
                sbx_info("runner: SIGHUP: policy reloaded");
            }
            continue;
        }
        /* a normal stop (systemctl stop, Ctrl-C): info, not a warning */
        sbx_info("runner: %s: stopping", strsignal(sig));
        sbx_runner_stop(w->r);
        break;
    }
    return NULL;
}

int sbx_cmd_serve(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *cfg;
    const char *plugin_dir;
    struct sbx_runner *r;
    struct sigwaiter w = {0};
    sbx_error_t *err = NULL;
    pthread_t th;
    int rc = SBX_EXIT_OK;

    static const struct option opts[] = {{NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "serve", .opts = opts, .argc = argc, .argv = argv};

    if (sbx_args_next(&a) != -1 || sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    if (cfg == NULL) {
        return SBX_EXIT_USAGE;
    }
    plugin_dir = sbx_cli_plugin_dir(cli);
    if (plugin_dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    /* signals go to one thread, before any other thread exists */
    sigemptyset(&w.set);
    sigaddset(&w.set, SIGINT);
    sigaddset(&w.set, SIGTERM);
    sigaddset(&w.set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &w.set, NULL);
    signal(SIGPIPE, SIG_IGN);
    r = sbx_runner_create(&(struct sbx_runner_opts){.cfg = cfg, .plugin_dir = plugin_dir}, &err);
    if (r == NULL) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err);
        sbx_error_free(&err);
        return rc;
    }
    w.r = r;
    pthread_create(&th, NULL, sig_main, &w);
    pthread_detach(th);
    fprintf(stderr, "%ssbx serve: ready\n", sbx_log_prefix(SBX_LOG_INFO));
    if (sbx_runner_run(r, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        rc = SBX_EXIT_FAIL;
    }
    sbx_runner_destroy(r);
    return rc;
}
