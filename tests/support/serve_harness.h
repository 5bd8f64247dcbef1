/* serve_harness.h - `sbx serve` as a child process for the runtime tests
 * (tests/runtime): started against the test engine with the test's state
 * directory and configuration, its log in <state>/serve.log, waited for
 * until `sbx queue` answers; stopped with a signal; its log's tail shown when
 * a test ends. (The in-process runner of the unit tests is
 * runner_harness.h.) Include after rt_common.h. */
#ifndef SBX_TEST_SERVE_HARNESS_H
#define SBX_TEST_SERVE_HARNESS_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define SERVE_UP_TRIES 1200 /* x 50 ms: a loaded machine starts slowly */

static pid_t serve_pid;
/* Every sbx serve this test started: a sandbox is the test's when its
 * sbx.owner names one of them (other sessions may use the same engine). */
__attribute__((unused)) static pid_t serve_pids[16];
__attribute__((unused)) static size_t n_serve_pids;
/* The runner's unix socket (<state>/runner.sock), for direct API calls. */
__attribute__((unused)) static char *serve_sock;

__attribute__((unused)) static void serve_start(void)
{
    char *log = NULL;

    assert_true(asprintf(&log, "%s/serve.log", rt_state) > 0);
    free(serve_sock);
    assert_true(asprintf(&serve_sock, "%s/runner.sock", rt_state) > 0);
    serve_pid = fork();
    if (serve_pid > 0 && n_serve_pids < sizeof(serve_pids) / sizeof(serve_pids[0])) {
        serve_pids[n_serve_pids++] = serve_pid;
    }
    if (serve_pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);

        dup2(fd, 2);
        dup2(fd, 1);
        putenv(rt_host);
        putenv(rt_statev);
        putenv(rt_config);
        execl(rt_sbx, rt_sbx, "--log-level", "info", "serve", (char *)NULL);
        _exit(127);
    }
    free(log);
    for (int i = 0; i < SERVE_UP_TRIES; i++) {
        struct spawn_result r = RT_SBX("queue", "--json");
        int ok = r.rc == 0;

        spawn_result_free(&r);
        if (ok) {
            return;
        }
        usleep(50 * 1000);
    }
    fail_msg("sbx serve did not come up (see %s/serve.log)", rt_state);
}

/* Sends sig to the runner (if one runs) and waits for it to exit. */
__attribute__((unused)) static void serve_kill(int sig)
{
    if (serve_pid > 0) {
        kill(serve_pid, sig);
        waitpid(serve_pid, NULL, 0);
        serve_pid = 0;
    }
}

/* Stops the runner (SIGTERM) and shows the last `lines` lines of its log on
 * stderr (seen with ctest --output-on-failure), then removes the log. */
__attribute__((unused)) static void serve_stop_show_log(int lines)
{
    char *cmd = NULL;

    serve_kill(SIGTERM);
    if (asprintf(&cmd, "tail -n %d '%s/serve.log' >&2 2>/dev/null; rm -f '%s/serve.log'", lines,
                 rt_state, rt_state) > 0 &&
        system(cmd) != 0) {
        fprintf(stderr, "(no serve.log)\n");
    }
    free(cmd);
}

#endif
