/* credhelper.c - a Docker credential helper's login (registry.h): runs
 * `docker-credential-NAME get` from PATH with the server on stdin, as the
 * Docker client does for credsStore and credHelpers, and reads its
 * {"ServerURL", "Username", "Secret"}. The secret is never logged or
 * written; the buffers that held it are zeroed. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "image/registry.h"
#include "util/xalloc.h"

#define HELPER_OUT_MAX (64 * 1024)
#define HELPER_TIMEOUT_MS 30000

extern char **environ;

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int sbx_credhelper_name_valid(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    return n > 0 && n <= 64 && name[0] != '-' && name[0] != '.' &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

/* Starts prog get with in[0] as its stdin, outp[1] as its stdout and /dev/null as its
 * stderr; closes those three here either way. -1 (the reason in why): not started. */
static int spawn_helper(const char *prog, const int in[2], const int outp[2], pid_t *pid, char *why,
                        size_t why_size)
{
    posix_spawn_file_actions_t fa;
    char *argv[] = {(char *)prog, "get", NULL};
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int rc;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, outp[1], 1);
    if (null_fd >= 0) {
        posix_spawn_file_actions_adddup2(&fa, null_fd, 2); /* it may echo what it got */
    }
    rc = posix_spawnp(pid, prog, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(outp[1]);
    if (null_fd >= 0) {
        close(null_fd);
    }
    if (rc != 0) {
        snprintf(why, why_size, "%s", strerror(rc));
        return -1;
    }
    return 0;
}

/* Writes the server to the helper's stdin. A helper that exits without reading must
 * not kill sbx: SIGPIPE is blocked in this thread only (the runner has other threads)
 * and a pending one is taken before the mask is restored. */
static void write_server(int fd, const char *server)
{
    sigset_t pipe_set;
    sigset_t old_set;
    struct timespec zero = {0, 0};
    ssize_t w;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    w = write(fd, server, strlen(server));
    if (w < 0 && errno == EPIPE) {
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
}

/* Reads the helper's stdout (fd) into buf (HELPER_OUT_MAX bytes) until it ends or the
 * deadline passes; returns the count, or (size_t)-1 (the helper killed, the reason in
 * why) when it took too long or wrote too much. */
static size_t read_output(int fd, pid_t pid, char *buf, long deadline, char *why, size_t why_size)
{
    size_t n = 0;

    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        long left = deadline - now_ms();
        ssize_t r;

        if (left <= 0) {
            kill(pid, SIGKILL);
            snprintf(why, why_size, "no answer in %d s", HELPER_TIMEOUT_MS / 1000);
            return (size_t)-1;
        }
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
            break;
        }
        r = read(fd, buf + n, HELPER_OUT_MAX - n);
        if (r < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        n += (size_t)r;
        if (n >= HELPER_OUT_MAX) {
            kill(pid, SIGKILL);
            snprintf(why, why_size, "more than %d bytes of output", HELPER_OUT_MAX);
            return (size_t)-1;
        }
    }
    return n;
}

/* Runs the helper; its stdout in *out (at most HELPER_OUT_MAX), its exit
 * status in *status. -1: it could not be run (errno-like reason in why). */
static int run_helper(const char *prog, const char *server, char **out, size_t *len, int *status,
                      char *why, size_t why_size)
{
    int in[2] = {-1, -1};
    int outp[2] = {-1, -1};
    char *buf = xmalloc(HELPER_OUT_MAX + 1);
    size_t n;
    pid_t pid;
    long deadline = now_ms() + HELPER_TIMEOUT_MS;

    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0) {
        snprintf(why, why_size, "pipe: %s", strerror(errno));
        if (in[0] >= 0) { /* the first pipe was made: no descriptor leaks */
            close(in[0]);
            close(in[1]);
        }
        free(buf);
        return -1;
    }
    if (spawn_helper(prog, in, outp, &pid, why, why_size) < 0) {
        close(in[1]);
        close(outp[0]);
        free(buf);
        return -1;
    }
    write_server(in[1], server);
    close(in[1]);
    n = read_output(outp[0], pid, buf, deadline, why, why_size);
    close(outp[0]);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    if (n == (size_t)-1) {
        memset(buf, 0, HELPER_OUT_MAX + 1);
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int sbx_credhelper_get(const char *name, const char *host, char **user, char **secret,
                       const char *cfg_path, sbx_error_t **err)
{
    char *prog;
    char *out = NULL;
    size_t len = 0;
    int status = 0;
    char why[160] = "";
    json_t *j;
    const char *u;
    const char *s;
    int ret = 0;

    *user = *secret = NULL;
    if (!sbx_credhelper_name_valid(name)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: credential helper '%.64s' is not a helper name (letters, digits, "
                             "'.', '_', '-')",
                             cfg_path, name);
    }
    prog = xasprintf("docker-credential-%s", name);
    if (run_helper(prog, host, &out, &len, &status, why, sizeof(why)) < 0) {
        ret = sbx_error_set(err, SBX_E_CONFIG, "%s: credential helper %s (for %s): %s", cfg_path,
                            prog, host, why);
        free(prog);
        return ret;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* "credentials not found in native keychain": no login (anonymous),
         * as the Docker client takes it; anything else is an error */
        if (strstr(out, "credentials not found") == NULL) {
            ret = sbx_error_set(err, SBX_E_ENGINE, "credential helper %s (for %s) failed (%s %d)",
                                prog, host, WIFEXITED(status) ? "exit" : "signal",
                                WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        }
        memset(out, 0, len);
        free(out);
        free(prog);
        return ret;
    }
    j = json_loadb(out, len, 0, NULL);
    memset(out, 0, len);
    free(out);
    u = json_string_value(json_object_get(j, "Username"));
    s = json_string_value(json_object_get(j, "Secret"));
    if (u == NULL || s == NULL || *s == '\0') {
        ret = sbx_error_set(err, SBX_E_PROTOCOL,
                            "credential helper %s (for %s): its answer has no Username and Secret",
                            prog, host);
    }
    else {
        *user = xstrdup(u);
        *secret = xstrdup(s);
    }
    if (s != NULL) {
        /* jansson's own copy: zeroed before it is freed */
        memset((char *)s, 0, strlen(s));
    }
    json_decref(j);
    free(prog);
    return ret;
}
