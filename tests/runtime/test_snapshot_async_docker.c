/* test_snapshot_async_docker.c - (added, issue 30) POST /v1/tasks/{id}/snapshot does
 * not hold the runner's loop (docs/api.md, "Snapshots"): while two snapshots of a
 * task with a few hundred MiB of data are made, GET /healthz answers at once and a
 * third snapshot is refused 429 with Retry-After (the bound per box); both
 * snapshots still answer 201. Against the test engine. */
#include "rt_common.h"

#include <pthread.h>
#include <string.h>
#include <sys/wait.h>

#include "serve_harness.h"
#include "wait.h"

#define BIG_MB "300"

/* One call to the runner's API on its unix socket, with a JSON body or none: the
 * status, the reply's body in *out. */
static long api_body(const char *method, const char *path, const char *body, char **out)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char url[2048];
    long status;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    req.method = method;
    req.url = url;
    req.unix_socket = serve_sock;
    req.timeout_ms = 300000;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("runner %s %s: %s", method, path, err->msg);
    }
    status = resp.status;
    if (out != NULL) {
        *out = strndup(resp.body ? resp.body : "", resp.body_len);
    }
    sbx_http_response_free(&resp);
    return status;
}

static long api(const char *method, const char *path, char **out)
{
    return api_body(method, path, NULL, out);
}

/* A third snapshot with curl (its reply head too): the whole reply. */
static char *third_snapshot(void)
{
    char *cmd = NULL;
    char *out = calloc(1, 4096);
    FILE *p;
    size_t n;

    assert_true(asprintf(&cmd,
                         "curl -sS -i -m 60 --unix-socket '%s' -X POST "
                         "http://localhost/v1/tasks/sa/snapshot",
                         serve_sock) > 0);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, 4095, p);
    out[n] = '\0';
    pclose(p);
    free(cmd);
    return out;
}

struct snap_call {
    pthread_t th;
    long status;
    char *body;
};

static void *snap_main(void *arg)
{
    struct snap_call *c = arg;

    c->status = api("POST", "/v1/tasks/sa/snapshot", &c->body);
    return NULL;
}

/* The task's holds ("running" in GET /v1/queue), -1 when it is not listed. */
static int holds(void)
{
    char *out = NULL;
    json_t *j;
    json_t *t;
    size_t i;
    int n = -1;

    if (api("GET", "/v1/queue", &out) != 200) {
        free(out);
        return -1;
    }
    j = json_loads(out, 0, NULL);
    free(out);
    json_array_foreach(json_object_get(j, "tasks"), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "id")), "sa") == 0) {
            n = (int)json_integer_value(json_object_get(t, "running"));
        }
    }
    json_decref(j);
    return n;
}

static int job_done(const char *id)
{
    struct spawn_result r = RT_SBX("job", "--json", id);
    int done = r.rc == 0 && strstr(r.out, "\"state\":\"finished\"") != NULL;

    spawn_result_free(&r);
    return done;
}

static int rm_ok(const char *id)
{
    struct spawn_result r = RT_SBX("snapshot", "rm", id);
    int ok = r.rc == 0;

    if (!ok && strstr(r.err, "in use") == NULL) {
        fail_msg("snapshot rm %s: %s", id, r.err);
    }
    spawn_result_free(&r);
    return ok;
}

static void rm_snapshot_of(const char *body)
{
    json_t *j = json_loads(body, 0, NULL);
    const char *id = json_string_value(json_object_get(j, "id"));

    assert_non_null(id);
    /* a job's one-command task from it may still be ending: "in use" until then */
    wait_until(rm_ok(id), 60, NULL, "snapshot rm %s", id);
    json_decref(j);
}

/* (added) POST /v1/jobs with `from`: a one-command job in a new task from the
 * snapshot sees the parent's file; its record names the snapshot's image. */
static void job_from_snapshot(const char *snap)
{
    json_t *rec = json_loads(snap, 0, NULL);
    const char *sid = json_string_value(json_object_get(rec, "id"));
    char *body = NULL;
    char *out = NULL;
    char id[64];
    json_t *j;
    long st;

    assert_true(asprintf(&body, "{\"argv\":[\"test\",\"-s\",\"/root/big\"],\"from\":\"%s\"}", sid) >
                0);
    st = api_body("POST", "/v1/jobs", body, &out);
    if (st != 201) {
        fail_msg("job from snapshot %s: HTTP %ld: %s", sid, st, out);
    }
    j = json_loads(out, 0, NULL);
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    free(out);
    wait_until(job_done(id), 120, NULL, "job %s from snapshot %s", id, sid);
    assert_true(asprintf(&out, "/v1/jobs/%s", id) > 0);
    free(body);
    body = out;
    assert_int_equal(api("GET", body, &out), 200);
    j = json_loads(out, 0, NULL);
    if (json_integer_value(json_object_get(j, "exit_status")) != 0 ||
        strcmp(json_string_value(json_object_get(j, "image")) ?: "",
               json_string_value(json_object_get(rec, "ref"))) != 0) {
        fail_msg("job %s from snapshot %s: %s", id, sid, out);
    }
    fprintf(stderr, "a job from snapshot %s saw the parent's /root/big\n", sid);
    json_decref(j);
    json_decref(rec);
    free(out);
    free(body);
}

static void test_snapshot_leaves_the_loop_free(void **state)
{
    struct snap_call c[2] = {0};
    struct spawn_result r;
    char *conf = NULL;
    char *out = NULL;
    char id[64];
    double t0;
    double took;
    long st;
    int before;
    int after;
    int gone;

    (void)state;
    assert_true(asprintf(&conf,
                         "runner = { listen = \"unix:%s/runner.sock\"; };\n"
                         "box = { pools = [\"ci\", \"agent\"]; heavy_min_memory = \"1G\"; };\n",
                         rt_state) > 0);
    rt_use_config(conf);
    free(conf);
    serve_start();
    r = RT_SBX("submit", "--pool", "agent", "--task", "sa", "--", "sh", "-c",
               "head -c " BIG_MB "M /dev/urandom > /root/big");
    assert_int_equal(r.rc, 0);
    snprintf(id, sizeof(id), "%s", r.out);
    id[strcspn(id, "\n")] = '\0';
    spawn_result_free(&r);
    wait_until(job_done(id), 180, NULL, "job %s to write " BIG_MB " MiB", id);

    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&c[i].th, NULL, snap_main, &c[i]), 0);
    }
    wait_until(holds() == 2, 30, NULL, "both snapshots of task sa to be in flight");
    before = holds();
    t0 = test_now();
    st = api("GET", "/healthz", NULL);
    took = test_now() - t0;
    fprintf(stderr, "GET /healthz during two snapshots of " BIG_MB " MiB: %.3f s (HTTP %ld)\n",
            took, st);
    assert_int_equal(st, 200);
    out = third_snapshot();
    after = holds();
    if (before != 2 || after != 2) {
        fail_msg("the snapshots ended before the checks (holds %d then %d): more data needed",
                 before, after);
    }
    if (strstr(out, " 429 ") == NULL || strcasestr(out, "\nRetry-After: 5") == NULL ||
        strstr(out, "snapshots are being made on this box") == NULL) {
        fail_msg("a third snapshot: %s (want 429 with Retry-After)", out);
    }
    assert_true(took < 1.0);
    free(out);
    for (int i = 0; i < 2; i++) {
        pthread_join(c[i].th, NULL);
        if (c[i].status != 201) {
            fail_msg("snapshot %d: HTTP %ld: %s", i, c[i].status, c[i].body);
        }
    }
    job_from_snapshot(c[0].body);
    for (int i = 0; i < 2; i++) {
        rm_snapshot_of(c[i].body);
        free(c[i].body);
    }
    assert_int_equal(holds(), 0); /* the task is let go (the runner ends it when it stops) */

    /* a client that goes away before the reply (curl's 1 s timeout, status 28): the
     * snapshot is made and listed all the same, the runner carries on (ASan: nothing
     * used after libevent freed it; libevent may notice the close only at the reply) */
    assert_true(asprintf(&conf,
                         "curl -sS -o /dev/null -m 1 --unix-socket '%s' -X POST "
                         "http://localhost/v1/tasks/sa/snapshot 2>/dev/null",
                         serve_sock) > 0);
    gone = system(conf);
    free(conf);
    wait_until(holds() == 0, 120, NULL, "the snapshot of a client gone to be made");
    assert_int_equal(api("GET", "/v1/snapshots", &out), 200);
    {
        json_t *j = json_loads(out, 0, NULL);
        json_t *all = json_object_get(j, "snapshots");
        char *rec;

        assert_int_equal(json_array_size(all), 1);
        rec = json_dumps(json_array_get(all, 0), 0);
        rm_snapshot_of(rec);
        free(rec);
        json_decref(j);
    }
    free(out);
    fprintf(stderr, "a snapshot whose client went away after 1 s: curl status %d\n",
            WIFEXITED(gone) ? WEXITSTATUS(gone) : -1);
}

static int teardown_all(void **state)
{
    serve_stop_show_log(40);
    return rt_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_leaves_the_loop_free),
    };

    return cmocka_run_group_tests(tests, rt_setup, teardown_all);
}
