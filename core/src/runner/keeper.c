/* keeper.c - the per-task keeper process: a private runner hosting its task (issue 31). */
#include "runner/keeper.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runner/adopt.h"
#include "runner/private.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/rlimit.h"
#include "util/xalloc.h"

static volatile sig_atomic_t keeper_signal;
/* Wakes serve() at once on a signal (set up in keeper_main; -1 before). */
static int keeper_wake[2] = {-1, -1};

static void keeper_wakeup(void)
{
    int e = errno;
    char one = 1;

    if (keeper_wake[1] >= 0 && write(keeper_wake[1], &one, 1) < 0) {
        /* full: serve() is already due to wake */
    }
    errno = e;
}

static void on_signal(int sig)
{
    keeper_signal = sig;
    keeper_wakeup();
}

/* (changed, issue 31) The task lives in the private runner r: its API (the runner's
 * socket) runs execs, files, terminals, ports, snapshots, pause and egress changes,
 * and ends the task; its tick ends it when the task's own timer stopped it (idle,
 * maximum lifetime). This waits until the runner no longer holds the task. An end
 * asked through the API, or a signal, stops it first: its running commands are
 * cancelled (the runner alone would wait for them), with the keeper's reasons. */
static void serve(struct sbx_runner *r, const char *id)
{
    int stopped = 0;
    int live;

    while ((live = sbx_runner_task_live(r, id)) != 0) {
        struct pollfd p = {.fd = keeper_wake[0], .events = POLLIN};
        char drain[64];

        if (live == 2 && !stopped) {
            sbx_runner_task_stop(r, id, "ended by sbx task end");
            stopped = 1;
        }
        if (keeper_signal && !stopped) {
            char reason[64];

            snprintf(reason, sizeof(reason), "keeper received signal %d", (int)keeper_signal);
            sbx_runner_task_stop(r, id, reason);
            stopped = 1;
        }
        /* signals wake this at once; the timeout bounds how late an end asked
         * through the API, or the runner's end of the task, is seen */
        if (poll(&p, 1, 50) > 0 && read(keeper_wake[0], drain, sizeof(drain)) < 0) {
            /* nothing to drain */
        }
    }
}

/* What the start waits for goes to the starter as "WAIT <line>"; a starter
 * that went away (Ctrl-C) cancels the wait. */
static int keeper_on_wait(void *ud, const char *line)
{
    int fd = *(const int *)ud;
    char msg[600];
    int n;

    if (line == NULL) { /* the starter's end of the pipe closed: nobody waits for us */
        struct pollfd p = {.fd = fd, .events = 0};

        return poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP)) != 0 ? -1 : 0;
    }
    n = snprintf(msg, sizeof(msg), "WAIT %s\n", line);
    sbx_info("%s", line);
    if (n < 0 || (size_t)n >= sizeof(msg)) {
        return 0;
    }
    return write(fd, msg, (size_t)n) == n ? 0 : -1;
}

/* The start failed after the task's: says why to the starter, ends the task. */
static _Noreturn void keeper_failed(int ready_fd, struct sbx_task *t, const char *reason,
                                    sbx_error_t *err)
{
    char msg[1024];

    snprintf(msg, sizeof(msg), "ERR %d %s\n", err ? err->code : SBX_E_ENGINE, sbx_error_msg(err));
    sbx_warn("task %s did not start: %s", sbx_task_id(t), sbx_error_msg(err));
    sbx_task_end(t, reason, NULL, NULL);
    if (write(ready_fd, msg, strlen(msg)) < 0) {
        _exit(1);
    }
    _exit(1);
}

static void keeper_main(const struct sbx_config *cfg, const char *plugin_dir,
                        const struct sbx_task_opts *given, int ready_fd)
{
    struct sbx_task_opts opts = *given;
    const struct sbx_task_opts *o = &opts;
    struct sigaction sa = {0};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    struct sbx_runner_private_opts po = {0};
    struct sbx_runner_private *p;
    struct stat st;
    char id[80];
    char *rdir;
    char msg[1024];
    int devnull = open("/dev/null", O_RDWR);

    if (devnull >= 0) {
        dup2(devnull, 0);
        dup2(devnull, 1);
        close(devnull);
    }
    if (pipe2(keeper_wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(msg, sizeof(msg), "ERR %d keeper wake pipe: %s\n", SBX_E_GENERIC, strerror(errno));
        if (write(ready_fd, msg, strlen(msg)) < 0) {
            _exit(1);
        }
        _exit(1);
    }
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sbx_raise_nofile("keeper"); /* the task's egress proxy holds its sockets and pipes */
    opts.on_wait = keeper_on_wait;
    opts.wait_ud = &ready_fd;
    if (sbx_task_start(cfg, plugin_dir, o, &t, &err) < 0) {
        /* in the keeper's log too: a starter that went away reads no ERR line */
        sbx_warn("task %s did not start: %s", o->task_id, sbx_error_msg(err));
        snprintf(msg, sizeof(msg), "ERR %d %s\n", err ? err->code : SBX_E_ENGINE,
                 sbx_error_msg(err));
        if (write(ready_fd, msg, strlen(msg)) < 0) {
            _exit(1);
        }
        _exit(1);
    }
    /* (added, issue 31) the task's host: a private runner, its socket where the
     * clients find it from the task's name (sbx_keeper_runner) */
    snprintf(id, sizeof(id), "%s", sbx_task_id(t));
    rdir = xasprintf("%s/tasks/%s/runner", sbx_task_state_dir(t), id);
    if (lstat(rdir, &st) == 0 && S_ISLNK(st.st_mode)) {
        unlink(rdir); /* a killed keeper's link to its directory elsewhere */
    }
    po.dir = strlen(rdir) <= 95 ? rdir : NULL; /* else elsewhere, and a link here */
    po.adopt = t;
    /* the keeper's own copy of the configuration (forked): rewritten for the runner;
     * its execs' clients follow their output live, so few ended jobs keep theirs in
     * memory (runner.keep_output: 1000 by default on sbx serve) */
    ((struct sbx_config *)cfg)->runner.keep_output = 8;
    p = sbx_runner_private_start((struct sbx_config *)cfg, plugin_dir, &po, &err);
    if (p == NULL) {
        keeper_failed(ready_fd, t, "keeper runner failed", err);
    }
    if (po.dir == NULL && symlink(sbx_runner_private_dir(p), rdir) < 0) {
        sbx_error_set(&err, errno, "task %s: link %s: %s", id, rdir, strerror(errno));
        snprintf(msg, sizeof(msg), "ERR %d %s\n", err->code, sbx_error_msg(err));
        sbx_runner_private_stop(p); /* ends the task */
        if (write(ready_fd, msg, strlen(msg)) < 0) {
            _exit(1);
        }
        _exit(1);
    }
    snprintf(msg, sizeof(msg), "OK %s\n", id);
    if (write(ready_fd, msg, strlen(msg)) < 0) {
        sbx_runner_task_stop(sbx_runner_private_runner(p), id, "starter went away");
    }
    close(ready_fd);
    /* stderr stays the keeper log (set up by the spawner) */
    serve(sbx_runner_private_runner(p), id);
    sbx_info("task %s: its runner stops", id);
    sbx_runner_private_stop(p); /* the task is gone: nothing of it is left running */
    if (po.dir == NULL) {
        unlink(rdir);
    }
    free(rdir);
    _exit(0);
}

int sbx_keeper_spawn(const struct sbx_config *cfg, const char *plugin_dir,
                     const struct sbx_task_opts *o, sbx_error_t **err)
{
    int pfd[2];
    pid_t pid;
    char buf[1200];
    size_t got = 0;
    int status;

    if (pipe2(pfd, O_CLOEXEC) < 0) {
        return sbx_error_set(err, errno, "pipe: %s", strerror(errno));
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        return sbx_error_set(err, errno, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* double fork: the keeper is re-parented and in its own session */
        close(pfd[0]);
        setsid();
        if (fork() != 0) {
            _exit(0);
        }
        {
            cleanup_free char *state = sbx_state_dir(cfg->state_dir, NULL);
            cleanup_free char *logdir = state ? xasprintf("%s/logs", state) : NULL;
            cleanup_free char *log = state ? xasprintf("%s/%s.log", logdir, o->task_id) : NULL;

            if (logdir != NULL && sbx_mkdirs(logdir, 0700, NULL) == 0) {
                int lf = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

                if (lf >= 0) {
                    dup2(lf, 2);
                    close(lf);
                }
            }
        }
        keeper_main(cfg, plugin_dir, o, pfd[1]);
        _exit(1);
    }
    close(pfd[1]);
    waitpid(pid, &status, 0);
    for (;;) {
        char *nl;
        ssize_t n;

        while ((nl = memchr(buf, '\n', got)) != NULL && strncmp(buf, "WAIT ", 5) == 0) {
            /* the keeper waits for memory or a slot: say so, keep reading */
            fprintf(stderr, "sbx: %.*s\n", (int)(nl - buf - 5), buf + 5);
            got -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, got);
        }
        if (nl != NULL || got >= sizeof(buf) - 1) {
            break;
        }
        n = read(pfd[0], buf + got, sizeof(buf) - 1 - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(pfd[0]);
    buf[got] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (strncmp(buf, "OK ", 3) == 0) {
        return 0;
    }
    if (strncmp(buf, "ERR ", 4) == 0) {
        char *end = NULL;
        long code = strtol(buf + 4, &end, 10);

        return sbx_error_set(err, (int)code, "%s", end && *end == ' ' ? end + 1 : buf + 4);
    }
    return sbx_error_set(err, SBX_E_ENGINE,
                         "task %s: the keeper died while starting (see its "
                         "log in the state directory's logs/)",
                         o->task_id);
}
