/* bench_opensandbox_exec.c - time of one exec through provider_opensandbox
 * against the contract test double, versus a peer measured in the same run:
 * the same POST /command read to the end of the stream, as a client that
 * does not stop at the terminal event would (execd waits 1 s after it).
 *
 *   SBX_SOURCE_DIR=. SBX_PLUGIN_DIR=build/plugins build/bench/bench_opensandbox_exec [N]
 */
#include "contract_server.h"

#include <time.h>

#include "config/config.h"
#include "http/http.h"
#include "plugin/instance.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int sink(void *ud, int stream, const char *data, size_t len)
{
    (void)ud, (void)stream, (void)data, (void)len;
    return 0;
}

static int discard(void *ud, const char *data, size_t len)
{
    (void)ud, (void)data, (void)len;
    return 0;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10;
    const char *cmd[] = {"true", NULL};
    char *dir = test_mkdtemp(), *text = NULL, *path, id[128], *url = NULL;
    struct sbx_sandbox_spec spec = {.task_id = "bench",
                                    .job_id = "bench",
                                    .limits = {.cpus = 1, .memory = 1LL << 30, .max = 3600}};
    struct sbx_exec_spec es = {.argv = cmd, .on_output = sink};
    sbx_error_t *err = NULL;
    struct sbx_config *cfg;
    struct sbx_open_instance *oi;
    const struct sbx_provider_ops *ops;
    double t0, driver = 0, peer = 0;
    json_t *ep = NULL;
    char epath[256];

    if (n < 1 || contract_start_server("opensandbox_server.py", NULL) < 0) {
        fprintf(stderr, "usage: SBX_SOURCE_DIR=... SBX_PLUGIN_DIR=... %s [N]\n", argv[0]);
        return 2;
    }
    if (asprintf(&text,
                 "providers = { osb = { plugin = \"provider_opensandbox\"; "
                 "url = \"http://127.0.0.1:%d\"; api_key_env = \"SBX_BENCH_NO_KEY\"; "
                 "image = \"bench\"; }; };\n",
                 contract_port) < 0) {
        return 2;
    }
    path = test_write_file(dir, "sbx.conf", text);
    cfg = sbx_config_load_file(path, &err);
    oi = cfg ? sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), "osb", SBX_PLUGIN_PROVIDER, &err)
             : NULL;
    if (oi == NULL) {
        fprintf(stderr, "%s\n", err->msg);
        return 1;
    }
    ops = sbx_instance_provider(oi);
    if (ops->create(oi->ctx, &spec, id, sizeof(id), &err) < 0) {
        fprintf(stderr, "%s\n", err->msg);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        struct sbx_exec_ctl ctl = {0};
        int status;

        t0 = now_s();
        if (ops->exec(oi->ctx, id, &es, &ctl, &status, &err) < 0) {
            fprintf(stderr, "%s\n", err->msg);
            return 1;
        }
        driver += now_s() - t0;
    }
    /* the peer: the same request, read until the server closes */
    snprintf(epath, sizeof(epath), "/v1/sandboxes/%s/endpoints/44772", id);
    contract_server_call("GET", epath, NULL, &ep);
    if (asprintf(&url, "http://%s/command", json_string_value(json_object_get(ep, "endpoint"))) <
        0) {
        return 1;
    }
    for (int i = 0; i < n; i++) {
        char route[160];
        const char *hdrs[] = {route, "Content-Type: application/json", NULL};
        const char *body = "{\"command\": \"'true'\", \"envs\": {}}";
        struct sbx_http_request req = {.method = "POST",
                                       .url = url,
                                       .headers = hdrs,
                                       .body = body,
                                       .body_len = strlen(body),
                                       .on_data = discard};
        struct sbx_http_response resp;
        sbx_error_t *e = NULL;

        snprintf(route, sizeof(route), "X-Test-Route: %s", id);
        t0 = now_s();
        if (sbx_http_request(&req, &resp, &e) == 0) {
            sbx_http_response_free(&resp);
        }
        else {
            if (i == 0) {
                fprintf(stderr, "peer: %s\n", e->msg); /* expected: partial file */
            }
            sbx_error_free(&e);
        }
        peer += now_s() - t0;
    }
    printf("opensandbox exec of 'true' against the test double, %d runs\n", n);
    printf("  driver (stops at the terminal event): %8.1f ms/exec\n", driver / n * 1e3);
    printf("  peer (reads to the end of stream):    %8.1f ms/exec\n", peer / n * 1e3);
    printf("  ratio peer/driver:                    %8.1f\n", peer / driver);
    ops->destroy(oi->ctx, id, &err);
    sbx_instance_close(oi);
    sbx_config_destroy(cfg);
    contract_stop_server();
    json_decref(ep);
    test_rm_rf(dir);
    free(dir);
    free(text);
    free(path);
    free(url);
    return 0;
}
