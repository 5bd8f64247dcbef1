/* keeper_client.c - `sbx exec` and `sbx task end` talking to a keeper. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/keeper.h"
#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "util/fileio.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

char *sbx_keeper_runner_socket(const char *state, const char *task)
{
    cleanup_free char *link = NULL;
    char *dir;
    char *sock;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        return NULL;
    }
    link = xasprintf("%s/tasks/%s/runner", state, task);
    dir = realpath(link, NULL); /* a long state path: a link to a shorter one */
    if (dir == NULL) {
        return NULL;
    }
    sock = xasprintf("%s/runner.sock", dir);
    free(dir);
    if (access(sock, F_OK) < 0) {
        free(sock);
        return NULL;
    }
    return sock;
}

static int connect_task(const char *state, const char *task, sbx_error_t **err)
{
    cleanup_free char *sock = NULL;
    int fd;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        return sbx_error_set(err, SBX_E_USAGE, "'%s' is not a valid task id", task);
    }
    sock = sbx_keeper_socket(state, task);
    if (access(sock, F_OK) < 0) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "no running task '%s' (sbx task list)", task);
    }
    fd = sbx_unix_connect(sock, err);
    if (fd < 0) {
        return sbx_error_wrap(err, "task '%s': its keeper is not answering", task);
    }
    return fd;
}

static int send_request(int fd, json_t *req, sbx_error_t **err)
{
    char *s = json_dumps(req, JSON_COMPACT);
    int r = sbx_frame_write(fd, 'R', s, strlen(s));

    /* the request may hold --env values: scrub our copy */
    explicit_bzero(s, strlen(s));
    free(s);
    if (r < 0) {
        return sbx_error_set(err, errno, "sending to the keeper: %s", strerror(errno));
    }
    return 0;
}

/* Waits until fd is readable or *interrupted is set, with no timeout: the
 * signals that set the flag are blocked outside ppoll, so one arriving
 * between the check and the wait still interrupts it. 0 readable, -1
 * interrupted. */
static int wait_readable(int fd, const volatile int *interrupted)
{
    sigset_t block;
    sigset_t old;
    int r = 0;

    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};

        if (*interrupted) {
            r = -1;
            break;
        }
        if (ppoll(&p, 1, NULL, &old) > 0 || errno != EINTR) {
            break; /* readable, or an error the next read reports */
        }
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* Reads frames until 'X'. Returns 0 with *status, or -1 with *code. */
static int read_result(int fd, const volatile int *interrupted, sbx_output_fn out, void *ud,
                       int *status, int *code, sbx_error_t **err)
{
    for (;;) {
        char type = 0;
        char *data = NULL;
        size_t len = 0;
        int r;

        if (interrupted != NULL && wait_readable(fd, interrupted) < 0) {
            *code = 125;
            return sbx_error_set(err, SBX_E_CANCELLED, "interrupted");
        }
        r = sbx_frame_read(fd, &type, &data, &len, err);
        if (r != 0) {
            *code = 125;
            if (r > 0) {
                sbx_error_set(err, SBX_E_ENGINE, "the keeper closed the connection");
            }
            return -1;
        }
        if (type == 'O' || type == 'E') {
            if (out != NULL) {
                out(ud, type == 'O' ? 1 : 2, data, len);
            }
            else {
                sbx_write_all(type == 'O' ? 1 : 2, data, len);
            }
            free(data);
            continue;
        }
        if (type == 'X') {
            json_t *j = json_loads(data, 0, NULL);
            const char *e = json_string_value(json_object_get(j, "error"));

            free(data);
            if (j == NULL) {
                *code = 125;
                return sbx_error_set(err, SBX_E_PROTOCOL, "malformed reply from the keeper");
            }
            if (e != NULL) {
                *code = (int)json_integer_value(json_object_get(j, "code"));
                if (*code != 126 && *code != 127) {
                    *code = 125;
                }
                sbx_error_set(err, SBX_E_ENGINE, "%s", e);
                json_decref(j);
                return -1;
            }
            *status = (int)json_integer_value(json_object_get(j, "status"));
            json_decref(j);
            return 0;
        }
        free(data);
        *code = 125;
        return sbx_error_set(err, SBX_E_PROTOCOL, "unexpected frame '%c' from the keeper", type);
    }
}

int sbx_keeper_exec(const char *state, const char *task, const char *const *argv,
                    const struct sbx_kv *env, size_t n_env, const volatile int *interrupted,
                    sbx_output_fn out, void *ud, int *status, int *code, sbx_error_t **err)
{
    json_t *jargv = json_array();
    json_t *jenv = json_array();
    json_t *req;
    int fd;
    int r;

    *code = 125;
    fd = connect_task(state, task, err);
    if (fd < 0) {
        json_decref(jargv);
        json_decref(jenv);
        return -1;
    }
    for (size_t i = 0; argv[i] != NULL; i++) {
        json_array_append_new(jargv, json_string(argv[i]));
    }
    for (size_t i = 0; i < n_env; i++) {
        json_array_append_new(jenv, json_pack("[s,s]", env[i].name, env[i].value));
    }
    req = json_pack("{s:s, s:o, s:o}", "op", "exec", "argv", jargv, "env", jenv);
    r = send_request(fd, req, err);
    json_decref(req);
    if (r == 0) {
        r = read_result(fd, interrupted, out, ud, status, code, err);
    }
    close(fd);
    return r;
}

int sbx_keeper_end(const char *state, const char *task, sbx_error_t **err)
{
    json_t *req = json_pack("{s:s}", "op", "end");
    int status = 0;
    int code = 0;
    int fd = connect_task(state, task, err);
    int r;

    if (fd < 0) {
        json_decref(req);
        return -1;
    }
    r = send_request(fd, req, err);
    json_decref(req);
    if (r == 0) {
        r = read_result(fd, NULL, NULL, NULL, &status, &code, err);
    }
    close(fd);
    return r;
}
