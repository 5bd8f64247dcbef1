/* contract_server.c - starting and steering a contract test server: a
 * Python 3 standard-library test double started on 127.0.0.1, port 0, that
 * prints its port first and offers /_test/quirks, /_test/calls and
 * /_test/reset. */
#include "contract_server.h"

#include <signal.h>
#include <sys/wait.h>

#include "http/http.h"

static pid_t server_pid = -1;
int contract_port;

int contract_start_server(const char *name, const char *api_key)
{
    const char *src = getenv("SBX_SOURCE_DIR");
    char *script = NULL;
    char line[64];
    int fds[2];
    FILE *f;

    if (src == NULL || pipe(fds) < 0 || asprintf(&script, "%s/tests/contract/%s", src, name) < 0) {
        return -1;
    }
    server_pid = fork();
    if (server_pid < 0) {
        return -1;
    }
    if (server_pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (api_key != NULL) {
            execlp("python3", "python3", script, "--port", "0", "--api-key", api_key, (char *)NULL);
        }
        else {
            execlp("python3", "python3", script, "--port", "0", (char *)NULL);
        }
        _exit(127);
    }
    free(script);
    close(fds[1]);
    f = fdopen(fds[0], "r");
    if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
        return -1;
    }
    fclose(f);
    contract_port = atoi(line);
    return contract_port > 0 ? 0 : -1;
}

void contract_stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        server_pid = -1;
    }
}

/* One call to the server's test-control or API routes; returns the status
 * and (optionally) the parsed body. */
long contract_server_call(const char *method, const char *path, const char *body, json_t **out)
{
    char url[512];
    const char *hdrs[] = {"Content-Type: application/json", NULL};
    struct sbx_http_request req = {.method = method,
                                   .url = url,
                                   .headers = hdrs,
                                   .body = body,
                                   .body_len = body ? strlen(body) : 0,
                                   .timeout_ms = 10000};
    struct sbx_http_response resp;
    sbx_error_t *err = NULL;
    long status;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", contract_port, path);
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("test server: %s", err->msg);
    }
    status = resp.status;
    if (out != NULL) {
        *out = json_loadb(resp.body, resp.body_len, 0, NULL);
    }
    sbx_http_response_free(&resp);
    return status;
}

void contract_quirks(const char *json)
{
    assert_int_equal(contract_server_call("POST", "/_test/quirks", json, NULL), 200);
    assert_int_equal(contract_server_call("POST", "/_test/reset", "{}", NULL), 200);
}

json_t *contract_calls(void)
{
    json_t *j = NULL;

    assert_int_equal(contract_server_call("GET", "/_test/calls", NULL, &j), 200);
    assert_true(json_is_array(j));
    return j;
}

/* The first call whose method matches and whose path contains `frag`;
 * borrowed from `all`. */
json_t *contract_find_call(json_t *all, const char *method, const char *frag)
{
    size_t i;
    json_t *c;

    json_array_foreach(all, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "method")), method) == 0 &&
            strstr(json_string_value(json_object_get(c, "path")), frag) != NULL) {
            return c;
        }
    }
    return NULL;
}

int contract_count_calls(json_t *all, const char *method, const char *frag)
{
    size_t i;
    json_t *c;
    int n = 0;

    json_array_foreach(all, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "method")), method) == 0 &&
            strstr(json_string_value(json_object_get(c, "path")), frag) != NULL) {
            n++;
        }
    }
    return n;
}
