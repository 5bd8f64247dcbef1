/* spawn.h - running the sbx binary (or any program) from a test, capturing
 * stdout and stderr separately, with extra environment. */
#ifndef SBX_TEST_SPAWN_H
#define SBX_TEST_SPAWN_H

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct spawn_result {
    int rc;      /* exit status, or 128+signal */
    char *out;   /* stdout, NUL-terminated */
    char *err;   /* stderr */
    double secs; /* wall time */
};

static inline void spawn_result_free(struct spawn_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

static inline void spawn_append(char **buf, size_t *len, const char *data, size_t n)
{
    *buf = realloc(*buf, *len + n + 1);
    memcpy(*buf + *len, data, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Runs argv with env additions ("K=V", NULL-terminated, may be NULL); when
 * uid > 0 the child drops to that uid/gid first. */
static inline struct spawn_result spawn_run_as(char *const argv[], char *const env[], int uid)
{
    struct spawn_result r = {0};
    int po[2];
    int pe[2];
    size_t lo = 0;
    size_t le = 0;
    struct timespec a;
    struct timespec b;
    pid_t pid;
    int st = 0;
    int open_fds = 2;

    r.out = calloc(1, 1);
    r.err = calloc(1, 1);
    if (pipe(po) < 0 || pipe(pe) < 0) {
        abort();
    }
    clock_gettime(CLOCK_MONOTONIC, &a);
    pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close(po[0]);
        close(pe[0]);
        close(po[1]);
        close(pe[1]);
        for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
            putenv(env[i]);
        }
        if (uid > 0 && (setgid((gid_t)uid) < 0 || setuid((uid_t)uid) < 0)) {
            _exit(99);
        }
        execv(argv[0], argv);
        _exit(98);
    }
    close(po[1]);
    close(pe[1]);
    while (open_fds > 0) {
        struct pollfd p[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
        char buf[8192];

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP))) {
                ssize_t n = read(p[i].fd, buf, sizeof(buf));

                if (n <= 0) {
                    close(i == 0 ? po[0] : pe[0]);
                    if (i == 0) {
                        po[0] = -1;
                    }
                    else {
                        pe[0] = -1;
                    }
                    open_fds--;
                }
                else if (i == 0) {
                    spawn_append(&r.out, &lo, buf, (size_t)n);
                }
                else {
                    spawn_append(&r.err, &le, buf, (size_t)n);
                }
            }
        }
        if (po[0] < 0 && pe[0] < 0) {
            break;
        }
    }
    waitpid(pid, &st, 0);
    clock_gettime(CLOCK_MONOTONIC, &b);
    r.secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

static inline struct spawn_result spawn_run(char *const argv[], char *const env[])
{
    return spawn_run_as(argv, env, 0);
}

#endif
