/* serve_bench.c - submit throughput over the runner's API (POST /v1/jobs on
 * its unix socket: validation, scheduler, durable SQLite insert with
 * synchronous=FULL, reply) against a trivial local HTTP round trip (an evhttp
 * server on a unix socket answering "{}"), both with the core's libcurl client
 * in the same run.
 *
 *   serve_bench PLUGIN_DIR [jobs=500]
 *
 * PLUGIN_DIR holds provider_good.so (build/test_plugins): the fake provider,
 * so no engine is needed; submitted jobs queue behind two held ones. */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/thread.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "runner/runner.h"
#include "util/xalloc.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double post_loop(const char *sock, const char *path, const char *body, int n)
{
    char url[256];
    double t0;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    t0 = now_s();
    for (int i = 0; i < n; i++) {
        struct sbx_http_request req = {.method = "POST",
                                       .url = url,
                                       .unix_socket = sock,
                                       .body = body,
                                       .body_len = strlen(body)};
        struct sbx_http_response resp = {0};
        sbx_error_t *err = NULL;

        if (sbx_http_request(&req, &resp, &err) < 0 || resp.status >= 300) {
            fprintf(stderr, "serve_bench: POST %s: %s %s\n", path, err ? sbx_error_msg(err) : "",
                    resp.body ? resp.body : "");
            exit(1);
        }
        sbx_http_response_free(&resp);
    }
    return now_s() - t0;
}

/* ---- the peer: a trivial evhttp server ---- */

static struct event_base *peer_base;

static void peer_cb(struct evhttp_request *req, void *arg)
{
    struct evbuffer *b = evbuffer_new();

    (void)arg;
    evbuffer_add(b, "{}\n", 3);
    evhttp_send_reply(req, 201, "OK", b);
    evbuffer_free(b);
}

static void *peer_main(void *arg)
{
    (void)arg;
    event_base_dispatch(peer_base);
    return NULL;
}

static void start_peer(const char *path, struct evhttp **http)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    pthread_t th;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0) {
        perror("serve_bench: peer socket");
        exit(1);
    }
    peer_base = event_base_new();
    *http = evhttp_new(peer_base);
    evhttp_set_gencb(*http, peer_cb, NULL);
    evhttp_accept_socket(*http, fd);
    pthread_create(&th, NULL, peer_main, NULL);
    pthread_detach(th);
}

static void *runner_main(void *arg)
{
    if (sbx_runner_run(arg, NULL) < 0) {
        fprintf(stderr, "serve_bench: the runner's loop failed\n");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    char dir[] = "/tmp/sbx-serve-bench-XXXXXX";
    char *plugins = realpath(argc > 1 ? argv[1] : "build/test_plugins", NULL);
    int n = argc > 2 ? atoi(argv[2]) : 500;
    struct sbx_box_capacity cap = {.cpus = 2.0, .memory = 4LL << 30};
    struct sbx_runner *r;
    struct sbx_config *cfg;
    sbx_error_t *err = NULL;
    struct evhttp *peer;
    char *conf, *path, *sock, *peer_sock;
    pthread_t th;
    double t_submit, t_peer;
    FILE *f;

    /* the shipped policies decide the submitted jobs */
    setenv("SBX_POLICY_DIR", SBX_BENCH_POLICY_DIR, 0);
    if (mkdtemp(dir) == NULL || n < 1 || plugins == NULL) {
        fprintf(stderr, "usage: serve_bench PLUGIN_DIR [jobs]\n");
        return 2;
    }
    evthread_use_pthreads();
    sbx_http_global_init();
    conf = xasprintf("plugin_dir = \"%s\";\nstate_dir = \"%s\";\nprovider = \"fake\";\n"
                     "providers = { fake = { plugin = \"provider_good\"; }; };\n"
                     "limits = { cpus = 0.5; memory = \"256M\"; };\n"
                     "box = { max_sandboxes = 2; heavy_min_memory = \"1G\"; };\n",
                     plugins, dir);
    path = xasprintf("%s/sbx.conf", dir);
    f = fopen(path, "w");
    fputs(conf, f);
    fclose(f);
    cfg = sbx_config_load_file(path, &err);
    if (cfg == NULL) {
        fprintf(stderr, "serve_bench: %s\n", sbx_error_msg(err));
        return 1;
    }
    r = sbx_runner_create(
        &(struct sbx_runner_opts){.cfg = cfg, .plugin_dir = plugins, .capacity = &cap}, &err);
    if (r == NULL) {
        fprintf(stderr, "serve_bench: %s\n", sbx_error_msg(err));
        return 1;
    }
    pthread_create(&th, NULL, runner_main, r);
    sock = xasprintf("%s/runner.sock", dir);
    peer_sock = xasprintf("%s/peer.sock", dir);
    start_peer(peer_sock, &peer);
    usleep(100 * 1000);
    /* warm up both, then measure alternately in two halves */
    post_loop(sock, "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", 5);
    post_loop(peer_sock, "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", 5);
    t_submit = post_loop(sock, "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", n / 2);
    t_peer = post_loop(peer_sock, "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", n / 2);
    t_submit += post_loop(sock, "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", n - n / 2);
    t_peer += post_loop(peer_sock, "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", n - n / 2);
    printf("submit over the API: %d jobs in %.3f s = %.0f jobs/s (%.0f us each; durable, "
           "synchronous=FULL)\n",
           n, t_submit, n / t_submit, t_submit / n * 1e6);
    printf("peer, trivial evhttp round trip: %.0f req/s (%.0f us each)\n", n / t_peer,
           t_peer / n * 1e6);
    printf("ratio submit/peer: %.1fx the time of a trivial local round trip\n", t_submit / t_peer);
    sbx_runner_stop(r);
    pthread_join(th, NULL);
    sbx_runner_destroy(r);
    sbx_config_destroy(cfg);
    {
        char *cmd = xasprintf("rm -rf '%s'", dir);

        if (system(cmd) != 0) {
            fprintf(stderr, "serve_bench: could not remove %s\n", dir);
        }
        free(cmd);
    }
    free(conf);
    free(path);
    free(sock);
    free(peer_sock);
    free(plugins);
    return 0;
}
