/* test_serve_env.c - a job's variables (`env` of POST /v1/jobs) and its
 * output with stdout and stderr apart (?frames=1), in-process with the fake
 * provider ("fake-env NAME..." prints NAME=VALUE on stdout, "NAME unset" on
 * stderr, and exits with the number unset; "fake-nocmd" is not found); then
 * the sbx binary: `sbx run --env --json` and `sbx job --follow` through the
 * runner, and the same `sbx run --json` embedded, for the keys. */
#include "test_common.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "sandbox/task.h"
#include "runner_harness.h"
#include "spawn.h"
#include "cli_harness.h"

struct both {
    char *buf[2];
    size_t len[2];
    int order[8]; /* the streams of the first pieces, in order */
    int n;
};

static int collect(void *ud, int stream, const char *data, size_t len)
{
    struct both *b = ud;
    int i = stream == 2 ? 1 : 0;

    if (b->n < 8) {
        b->order[b->n++] = stream;
    }
    b->buf[i] = realloc(b->buf[i], b->len[i] + len + 1);
    memcpy(b->buf[i] + b->len[i], data, len);
    b->len[i] += len;
    b->buf[i][b->len[i]] = '\0';
    return 0;
}

static void both_free(struct both *b)
{
    free(b->buf[0]);
    free(b->buf[1]);
    memset(b, 0, sizeof(*b));
}

/* The body of GET path with its length (frames hold NUL bytes). */
static char *get_raw(const char *path, size_t *len)
{
    char url[256];
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *out;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    req.method = "GET";
    req.url = url;
    req.unix_socket = rh_sock;
    req.timeout_ms = 30000;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("GET %s: %s", path, sbx_error_msg(err));
    }
    assert_int_equal(resp.status, 200);
    out = malloc(resp.body_len + 1);
    memcpy(out, resp.body, resp.body_len + 1);
    *len = resp.body_len;
    sbx_http_response_free(&resp);
    return out;
}

static void test_env_reaches_the_command(void **state)
{
    static const char frames[] = "\x01\x00\x00\x00\x00\x00\x00\x1b"
                                 "GREETING=v4lue-42 x\nEMPTY=\n"
                                 "\x02\x00\x00\x00\x00\x00\x00\x0b"
                                 "NOPE unset\n";
    char *id, *bare;
    json_t *j;
    json_t *names;
    char *text;
    char path[128];
    size_t len = 0;
    long st = 0;
    struct both b = {0};
    sbx_error_t *err = NULL;
    size_t total = 0;

    (void)state;
    rh_start("box = { max_sandboxes = 2; heavy_min_memory = \"1G\"; };\n");
    id = rh_submit("{\"argv\":[\"fake-env\",\"GREETING\",\"EMPTY\",\"NOPE\"],"
                   "\"env\":{\"GREETING\":\"v4lue-42 x\",\"EMPTY\":\"\"}}");
    j = rh_wait_state(id, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 1);
    /* the record names the variables and never holds a value */
    names = json_object_get(j, "env_names");
    assert_int_equal(json_array_size(names), 2);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "GREETING");
    assert_string_equal(json_string_value(json_array_get(names, 1)), "EMPTY");
    text = json_dumps(j, JSON_COMPACT);
    assert_null(strstr(text, "v4lue-42"));
    assert_null(json_object_get(j, "env"));
    free(text);
    json_decref(j);

    /* merged output, as before */
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", id);
    text = rh_call("GET", path, NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(text, "GREETING=v4lue-42 x\nEMPTY=\nNOPE unset\n");
    free(text);
    /* frames: {stream, 0, 0, 0, length big-endian} then the bytes */
    snprintf(path, sizeof(path), "/v1/jobs/%s/output?frames=1", id);
    text = get_raw(path, &len);
    assert_int_equal(len, sizeof(frames) - 1);
    assert_memory_equal(text, frames, len);
    free(text);
    /* and the client splits them back */
    assert_int_equal(sbx_runner_follow(rh_cfg, id, collect, &b, NULL, &total, &err), 0);
    assert_string_equal(b.buf[0], "GREETING=v4lue-42 x\nEMPTY=\n");
    assert_string_equal(b.buf[1], "NOPE unset\n");
    assert_int_equal(total, 38);
    both_free(&b);
    /* an unknown job: the runner's message, not a framing error */
    assert_int_equal(sbx_runner_follow(rh_cfg, "j-000000000000", collect, &b, NULL, NULL, &err),
                     -1);
    assert_non_null(strstr(sbx_error_msg(err), "no job 'j-000000000000'"));
    sbx_error_free(&err);
    both_free(&b);

    /* without env the command has none of them */
    bare = rh_submit("{\"argv\":[\"fake-env\",\"GREETING\"]}");
    j = rh_wait_state(bare, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 1);
    assert_int_equal(json_array_size(json_object_get(j, "env_names")), 0);
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", bare);
    text = rh_call("GET", path, NULL, &st);
    assert_string_equal(text, "GREETING unset\n");
    free(text);
    free(bare);

    /* a command not found is 127, as `sbx run` embedded */
    bare = rh_submit("{\"argv\":[\"fake-nocmd\"]}");
    j = rh_wait_state(bare, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 127);
    assert_non_null(strstr(json_string_value(json_object_get(j, "reason")), "not found"));
    json_decref(j);
    free(bare);
    free(id);
    rh_stop();
}

/* A queued job keeps its env across a restart of the runner (the store has
 * the values; recovery re-submits the job with them). */
static void test_env_survives_restart(void **state)
{
    struct sbx_box_capacity cap = {.cpus = 2.0, .memory = 4LL << 30};
    sbx_error_t *err = NULL;
    char *busy, *queued;
    char path[128];
    json_t *j;
    long st = 0;
    char *text;

    (void)state;
    rh_start("box = { max_sandboxes = 2; heavy_min_memory = \"1G\"; };\n");
    busy = rh_submit("{\"argv\":[\"sleep\",\"600000\"]}");
    json_decref(rh_wait_state(busy, "running"));
    queued = rh_submit("{\"argv\":[\"fake-env\",\"GREETING\"],\"env\":{\"GREETING\":\"kept\"}}");
    j = rh_wait_state(queued, "queued");
    json_decref(j);
    /* a clean stop cancels the running job and leaves the queued one */
    sbx_runner_stop(rh_runner);
    pthread_join(rh_thread, NULL);
    sbx_runner_destroy(rh_runner);
    rh_runner =
        sbx_runner_create(&(struct sbx_runner_opts){.cfg = rh_cfg,
                                                    .plugin_dir = getenv("SBX_TEST_PLUGINS"),
                                                    .capacity = &cap,
                                                    .clock = rh_clock,
                                                    .alert_interval_ms = 50},
                          &err);
    if (rh_runner == NULL) {
        fail_msg("runner: %s", sbx_error_msg(err));
    }
    assert_int_equal(pthread_create(&rh_thread, NULL, rh_main, NULL), 0);
    j = rh_wait_state(queued, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 0);
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", queued);
    text = rh_call("GET", path, NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(text, "GREETING=kept\n");
    free(text);
    free(busy);
    free(queued);
    rh_stop();
}

/* Variables never override the credential lease's or, when the provider
 * wires the egress proxy, the proxy variables; the lease's come last. */
static void test_env_conflicts(void **state)
{
    static const struct sbx_kv env[] = {
        {"CI", "1"}, {"TOKEN", "mine"}, {"HTTPS_PROXY", "http://elsewhere:1"}, {"LANG", "C"}};
    static const struct sbx_kv lease[] = {{"TOKEN", "s3cret"}};
    struct sbx_kv *all;
    size_t n = 0;

    (void)state;
    all = sbx_exec_env_merge("t-1", env, 4, lease, 1, 1, &n);
    assert_int_equal(n, 3);
    assert_string_equal(all[0].name, "CI");
    assert_string_equal(all[1].name, "LANG");
    assert_string_equal(all[2].name, "TOKEN");
    assert_string_equal(all[2].value, "s3cret");
    free(all);
    /* no egress wiring: the proxy variables are the caller's to set */
    all = sbx_exec_env_merge("t-1", env, 4, NULL, 0, 0, &n);
    assert_int_equal(n, 4);
    assert_string_equal(all[1].value, "mine");
    assert_string_equal(all[2].value, "http://elsewhere:1");
    free(all);
    all = sbx_exec_env_merge("t-1", NULL, 0, lease, 1, 1, &n);
    assert_int_equal(n, 1);
    free(all);
}

/* ---- the sbx binary through the runner ---- */

/* The job id is the client's `fake-say-wait` run. */
static int is_say_wait(const char *id)
{
    char *path = NULL;
    json_t *j;
    int yes;

    assert_true(asprintf(&path, "/v1/jobs/%s", id) > 0);
    j = rh_json("GET", path, NULL, 200);
    yes = strcmp(json_string_value(json_array_get(json_object_get(j, "argv"), 0)) ?: "",
                 "fake-say-wait") == 0;
    json_decref(j);
    free(path);
    return yes;
}

static void test_sbx_run_through_runner(void **state)
{
    struct spawn_result r;
    json_t *j;
    json_t *embedded;
    const char *k;
    json_t *v;
    char *id;

    (void)state;
    assert_true(asprintf(&sbx_bin, "%s/sbx", getenv("SBX_BUILD_DIR")) > 0);
    rh_start("box = { max_sandboxes = 2; heavy_min_memory = \"1G\"; };\n");
    write_client_conf(rh_sock);

    /* --env and --json: the exit code, both streams apart, the env reached
     * the command */
    r = SBX_RUN("run", "--env", "GREETING=hello there", "--env", "EMPTY=", "--json", "--",
                "fake-env", "GREETING", "EMPTY", "NOPE");
    if (r.rc != 1) {
        fail_msg("rc %d: %s / %s", r.rc, r.out, r.err);
    }
    j = parse_out(&r);
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "stdout")),
                        "GREETING=hello there\nEMPTY=\n");
    assert_string_equal(json_string_value(json_object_get(j, "stderr")), "NOPE unset\n");
    assert_string_equal(json_string_value(json_object_get(j, "state")), "finished");
    assert_int_equal(strncmp(json_string_value(json_object_get(j, "id")), "j-", 2), 0);
    assert_int_equal(json_array_size(json_object_get(j, "env_names")), 2);
    assert_null(json_object_get(j, "output_truncated"));
    assert_int_equal(json_integer_value(json_object_get(j, "output_bytes")), 39);
    spawn_result_free(&r);

    /* streaming: stdout to stdout, stderr to stderr; a name given twice
     * keeps its last value, as embedded */
    r = SBX_RUN("run", "--env", "A=1", "--env", "A=2", "--", "fake-env", "A", "B");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "A=2\n");
    assert_string_equal(r.err, "B unset\n");
    spawn_result_free(&r);
    r = SBX_RUN("run", "--json", "--", "exit", "3");
    assert_int_equal(r.rc, 3);
    embedded = parse_out(&r);
    assert_string_equal(json_string_value(json_object_get(embedded, "stdout")), "exit");
    assert_string_equal(json_string_value(json_object_get(embedded, "stderr")), "");
    json_decref(embedded);
    spawn_result_free(&r);
    /* exit codes as embedded: 127 not found, 125 bad usage */
    r = SBX_RUN("run", "--", "fake-nocmd");
    assert_int_equal(r.rc, 127);
    assert_non_null(strstr(r.err, "not found"));
    spawn_result_free(&r);
    r = SBX_RUN("run", "--env", "1X=2", "--", "fake-env", "A");
    assert_int_equal(r.rc, 125);
    assert_non_null(strstr(r.err, "bad --env name '1X'"));
    spawn_result_free(&r);

    /* Ctrl-C cancels the job (as it cancels an embedded run) and exits 130 */
    {
        pid_t pid = fork();
        char *running = NULL;
        int st = 0;

        char *out_path = NULL;

        assert_true(asprintf(&out_path, "%s/ctrl-c.out", rh_dir) > 0);
        if (pid == 0) {
            int null = open("/dev/null", O_WRONLY);
            int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

            dup2(out, 1);
            dup2(null, 2);
            execl(sbx_bin, sbx_bin, "--config", client_conf, "run", "--", "fake-say-wait",
                  (char *)NULL);
            _exit(127);
        }
        assert_true(pid > 0);
        for (int i = 0; i < 1000 && running == NULL; i++) {
            json_t *q = rh_json("GET", "/v1/queue", NULL, 200);
            json_t *p;
            json_t *slot;
            size_t a;
            size_t b;

            json_array_foreach(json_object_get(q, "pools"), a, p)
            {
                json_array_foreach(json_object_get(p, "slots"), b, slot)
                {
                    const char *jid = json_string_value(json_object_get(slot, "job"));

                    /* this client's job, not an earlier one whose slot is
                     * still being released under load */
                    if (jid != NULL && running == NULL && is_say_wait(jid)) {
                        running = strdup(jid);
                    }
                }
            }
            json_decref(q);
            if (running == NULL) {
                usleep(10000);
            }
        }
        assert_non_null(running);
        /* the client is following once it printed the job's first line (a
         * fixed wait lost that race under load: an interrupt before the client
         * knew its job cancelled nothing) */
        for (int i = 0; i < 3000; i++) {
            FILE *f = fopen(out_path, "r");
            char got[16] = "";

            if (f != NULL) {
                got[fread(got, 1, sizeof(got) - 1, f)] = '\0';
                fclose(f);
            }
            if (strcmp(got, "waiting\n") == 0) {
                break;
            }
            if (i == 2999) {
                fail_msg("the client never printed its job's first line (got '%s')", got);
            }
            usleep(10000);
        }
        kill(pid, SIGINT);
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 130);
        json_decref(rh_wait_state(running, "cancelled"));
        free(running);
        {
            /* the output once: the wait after the cancel does not stream it again */
            FILE *f = fopen(out_path, "r");
            char got[64] = "";
            size_t n;

            assert_non_null(f);
            n = fread(got, 1, sizeof(got) - 1, f);
            got[n] = '\0';
            fclose(f);
            assert_string_equal(got, "waiting\n");
        }
        free(out_path);
    }

    /* sbx job --follow keeps the job's streams apart too */
    id = rh_submit("{\"argv\":[\"fake-env\",\"A\",\"B\"],\"env\":{\"A\":\"a\"}}");
    json_decref(rh_wait_state(id, "finished"));
    r = SBX_RUN("job", id, "--follow");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "A=a\n");
    assert_string_equal(r.err, "B unset\n");
    spawn_result_free(&r);
    r = SBX_RUN("job", id, "--json");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "\"env_names\":[\"A\"]"));
    assert_null(strstr(r.out, "\"a\""));
    spawn_result_free(&r);
    free(id);
    /* sbx submit --env, the same rule */
    r = SBX_RUN("submit", "--env", "A=from submit", "--", "fake-env", "A");
    assert_int_equal(r.rc, 0);
    r.out[strcspn(r.out, "\n")] = '\0';
    id = strdup(r.out);
    spawn_result_free(&r);
    r = SBX_RUN("job", id, "--follow");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "A=from submit\n");
    spawn_result_free(&r);
    free(id);
    r = SBX_RUN("submit", "--env", "A.B=1", "--", "fake-env", "A");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "bad --env name 'A.B'"));
    spawn_result_free(&r);

    /* the same run embedded (no runner.listen): every key it prints is in
     * the runner's result but the sandbox, policy and owner (docs/tasks.md) */
    write_client_conf(NULL);
    r = SBX_RUN("run", "--env", "GREETING=hi", "--json", "--", "fake-env", "GREETING", "NOPE");
    if (r.rc != 1) {
        fail_msg("embedded rc %d: %s / %s", r.rc, r.out, r.err);
    }
    embedded = parse_out(&r);
    assert_string_equal(json_string_value(json_object_get(embedded, "stdout")), "GREETING=hi\n");
    assert_string_equal(json_string_value(json_object_get(embedded, "stderr")), "NOPE unset\n");
    json_object_foreach(embedded, k, v)
    {
        if (strcmp(k, "sandbox") != 0 && strcmp(k, "policy") != 0 && strcmp(k, "owner") != 0 &&
            json_object_get(j, k) == NULL) {
            fail_msg("key '%s' of embedded `sbx run --json` is not in the runner's", k);
        }
    }
    json_decref(embedded);
    spawn_result_free(&r);
    json_decref(j);
    rh_stop();
    free(client_conf);
    client_conf = NULL;
    free(sbx_bin);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_reaches_the_command),
        cmocka_unit_test(test_env_survives_restart),
        cmocka_unit_test(test_env_conflicts),
        cmocka_unit_test(test_sbx_run_through_runner),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
