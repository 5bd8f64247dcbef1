/* rt_common.h - helpers for runtime tests against the test Docker engine. */
#ifndef SBX_RT_COMMON_H
#define SBX_RT_COMMON_H

#include "spawn.h"
#include "test_common.h"

#include <fcntl.h>
#include <signal.h>
#include <jansson.h>

#include "http/http.h"

static char *rt_state;  /* a fresh state dir per test file */
static char *rt_sbx;    /* the sbx binary */
static char *rt_host;   /* DOCKER_HOST=... */
static char *rt_statev; /* SBX_STATE_DIR=... */
static char *rt_config; /* SBX_CONFIG=... or NULL */
static const char *rt_sock;
/* This test's scope (docs/testing.md): SBX_TEST_LABEL, set by ctest to the
 * test's name (or here to rt-<pid>), inherited by every sbx the test starts,
 * so each sandbox carries sbx.test=<scope> and sbx's orphan sweeps touch only
 * this test's. Every count of sandboxes below is of this scope only. */
static char rt_scope[64];

static inline int rt_setup(void **state)
{
    const char *host = getenv("SBX_TEST_DOCKER_HOST");
    const char *build = getenv("SBX_BUILD_DIR");

    (void)state;
    if (host == NULL || strncmp(host, "unix://", 7) != 0 || build == NULL) {
        fprintf(stderr, "runtime tests need SBX_TEST_DOCKER_HOST=unix://... (run scripts/test.sh, "
                        "which starts the test engine)\n");
        return -1;
    }
    rt_sock = host + 7;
    if (getenv("SBX_TEST_LABEL") != NULL && *getenv("SBX_TEST_LABEL") != '\0') {
        snprintf(rt_scope, sizeof(rt_scope), "%s", getenv("SBX_TEST_LABEL"));
    }
    else {
        snprintf(rt_scope, sizeof(rt_scope), "rt-%d", (int)getpid());
        setenv("SBX_TEST_LABEL", rt_scope, 1);
    }
    rt_state = test_mkdtemp();
    assert_true(asprintf(&rt_sbx, "%s/sbx", build) > 0);
    assert_true(asprintf(&rt_host, "DOCKER_HOST=%s", host) > 0);
    assert_true(asprintf(&rt_statev, "SBX_STATE_DIR=%s", rt_state) > 0);
    return 0;
}

static inline int rt_teardown(void **state)
{
    (void)state;
    test_rm_rf(rt_state);
    free(rt_state);
    free(rt_sbx);
    free(rt_host);
    free(rt_statev);
    free(rt_config);
    return 0;
}

/* Uses a config file with TEXT for the following sbx calls (NULL: none). */
static inline void rt_use_config(const char *text)
{
    char *path;

    free(rt_config);
    rt_config = NULL;
    if (text == NULL) {
        return;
    }
    path = test_write_file(rt_state, "sbx.conf", text);
    assert_true(asprintf(&rt_config, "SBX_CONFIG=%s", path) > 0);
    free(path);
}

/* sbx ARGS... with the test engine and state dir. */
static inline struct spawn_result rt_sbx_argv(const char *const *args, int uid)
{
    char *argv[64];
    char *env[8];
    size_t n = 0;
    size_t e = 0;

    argv[n++] = rt_sbx;
    for (size_t i = 0; args[i] != NULL && n < 63; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    env[e++] = rt_host;
    env[e++] = rt_statev;
    if (rt_config != NULL) {
        env[e++] = rt_config;
    }
    env[e] = NULL;
    return spawn_run_as(argv, env, uid);
}

#define RT_SBX(...) rt_sbx_argv((const char *const[]){__VA_ARGS__, NULL}, 0)

/* GET on the test engine; returns parsed JSON. */
static inline json_t *rt_engine_get(const char *path)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char url[1024];
    json_t *j;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    req.method = "GET";
    req.url = url;
    req.unix_socket = rt_sock;
    req.timeout_ms = 30000;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("engine GET %s: %s", path, err->msg);
    }
    j = json_loadb(resp.body, resp.body_len, 0, NULL);
    sbx_http_response_free(&resp);
    return j;
}

/* The containers of this test's scope with label LABEL ("key" or "key=value"). */
static inline json_t *rt_containers_with(const char *label)
{
    char path[512];

    /* {"label":["LABEL","sbx.test=SCOPE"]}: both (the scope is [A-Za-z0-9_.-]) */
    snprintf(
        path, sizeof(path),
        "/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22%s%%22%%2C%%22sbx.test%%3D"
        "%s%%22%%5D%%7D",
        label, rt_scope);
    return rt_engine_get(path);
}

/* This test's sandboxes (an sbx.task label and sbx.test=<scope>). */
static inline json_t *rt_containers(void)
{
    return rt_containers_with("sbx.task");
}

/* How many sandboxes of this test exist. */
static inline size_t rt_sandboxes(void)
{
    /* a sandbox that ended is killed at once and removed in the background
     * (remove_in_background): wait, with a deadline, for those to go */
    for (int i = 0;; i++) {
        json_t *j = rt_containers();
        size_t n = json_array_size(j);
        size_t ending = 0;
        json_t *c;
        size_t k;

        json_array_foreach(j, k, c)
        {
            const char *st = json_string_value(json_object_get(c, "State"));

            ending += st != NULL && (strcmp(st, "exited") == 0 || strcmp(st, "dead") == 0 ||
                                     strcmp(st, "removing") == 0);
        }
        json_decref(j);
        if (ending == 0 || i >= 600) {
            return n;
        }
        usleep(100 * 1000);
    }
}

/* 1 when a process whose command line holds WHAT runs in one of this test's
 * sandboxes (the engine's /containers/ID/top). */
static inline int rt_process_running(const char *what)
{
    json_t *list = rt_containers();
    size_t i;
    json_t *c;
    int found = 0;

    json_array_foreach(list, i, c)
    {
        char path[256];
        json_t *top;
        json_t *procs;
        size_t k;
        json_t *row;

        snprintf(path, sizeof(path), "/containers/%.64s/top",
                 json_string_value(json_object_get(c, "Id")));
        top = rt_engine_get(path);
        procs = json_object_get(top, "Processes");
        json_array_foreach(procs, k, row)
        {
            json_t *cmd = json_array_get(row, json_array_size(row) - 1);

            found |= json_is_string(cmd) && strstr(json_string_value(cmd), what) != NULL;
        }
        json_decref(top);
    }
    json_decref(list);
    return found;
}

/* Waits (at most SECS) until a process whose command line holds WHAT runs in
 * one of this test's sandboxes: the exec has started. */
static inline void rt_wait_process(const char *what, int secs)
{
    for (int i = 0; i < secs * 10; i++) {
        if (rt_process_running(what)) {
            return;
        }
        usleep(100 * 1000);
    }
    fail_msg("waited %d s for '%s' to run in a sandbox of %s (%zu sandboxes)", secs, what, rt_scope,
             rt_sandboxes());
}

/* A busybox image FROM scratch (the host's busybox-static) in the test engine. */
static inline void rt_busybox_image(const char *name)
{
    char *dir = test_mkdtemp();
    char *script = NULL;
    char *argv[] = {"/bin/sh", "-c", NULL, NULL};
    char *env[] = {rt_host, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    struct spawn_result r;

    assert_true(asprintf(&script,
                         "set -e; test -x /bin/busybox || { echo 'no /bin/busybox: apt-get "
                         "install busybox-static' >&2; exit 1; }; "
                         "mkdir -p '%s/img/bin'; cp /bin/busybox '%s/img/bin/busybox'; "
                         "for a in sh sleep echo cat true tr cut id; do "
                         "ln -s busybox '%s/img/bin/'$a; done; "
                         "tar -C '%s/img' -c . | docker import - %s >/dev/null",
                         dir, dir, dir, dir, name) > 0);
    argv[2] = script;
    r = spawn_run_as(argv, env, 0);
    if (r.rc != 0) {
        fail_msg("building %s: rc %d: %s", name, r.rc, r.err);
    }
    spawn_result_free(&r);
    free(script);
    test_rm_rf(dir);
    free(dir);
}

/* Starts a local test server (argv[0] is run with execvp) that prints its
 * port on its first stdout line; returns its pid and sets *port, or -1. The
 * whole line is read: closing the pipe early kills the server with EPIPE. */
static inline pid_t rt_spawn_server(char *const argv[], int *port)
{
    char buf[64] = {0};
    ssize_t n = 0;
    pid_t pid;
    int p[2];

    if (pipe(p) < 0) {
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    while ((size_t)n < sizeof(buf) - 1 && memchr(buf, '\n', (size_t)n) == NULL) {
        ssize_t k = read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n);

        if (k <= 0) {
            break;
        }
        n += k;
    }
    close(p[0]);
    *port = atoi(buf);
    return *port > 0 ? pid : -1;
}

/* A script of the source tree (caller frees). */
static inline char *rt_source_path(const char *rel)
{
    char *p = NULL;

    if (asprintf(&p, "%s/%s", getenv("SBX_SOURCE_DIR") ? getenv("SBX_SOURCE_DIR") : ".", rel) < 0) {
        abort();
    }
    return p;
}

static inline void rt_stop_server(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGTERM);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

#define assert_contains(hay, needle)                                                               \
    do {                                                                                           \
        if (strstr((hay), (needle)) == NULL) {                                                     \
            fail_msg("'%s' not found in: %s", (needle), (hay));                                    \
        }                                                                                          \
    } while (0)

#endif
