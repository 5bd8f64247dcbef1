/* test_api_snapshot.c - (added, issue 30) the runner's snapshot and egress-change
 * endpoints against the in-process runner and the fake provider (no snapshot op, no
 * egress socket): scopes, owners, bad input and the provider's refusal, each one line.
 * The engine path is tests/runtime/test_snapshot_docker.c. */
#include "test_common.h"

#include <jansson.h>

#include "runner_harness.h"

static const char *err_of(json_t *j)
{
    const char *e = json_string_value(json_object_get(j, "error"));

    return e ? e : "";
}

static void want(const char *method, const char *path, const char *body, long code, const char *msg)
{
    long st = 0;
    char *out = rh_call(method, path, body, &st);
    json_t *j = json_loads(out, 0, NULL);

    if (st != code || (msg != NULL && strstr(err_of(j), msg) == NULL)) {
        fail_msg("%s %s: HTTP %ld %s (want %ld '%s')", method, path, st, out, code, msg ? msg : "");
    }
    json_decref(j);
    free(out);
}

/* A kept agent task "ta" of the unix socket's client. */
static void kept_task(void)
{
    char *id = rh_submit("{\"argv\":[\"true\"],\"task\":\"ta\",\"pool\":\"agent\"}");

    json_decref(rh_wait_state(id, "finished"));
    free(id);
}

static void test_endpoints_every_scope(void **state)
{
    json_t *j;

    (void)state;
    rh_start(NULL);
    kept_task();
    want("POST", "/v1/tasks/ta/snapshot", NULL, 400, "cannot snapshot a sandbox");
    want("POST", "/v1/tasks/ta/egress", "{\"allow\":\"x.example.test\"}", 400,
         "no egress proxy to change");
    want("POST", "/v1/tasks/ta/egress", "{\"allow\":\"bad host\"}", 400, "invalid character");
    want("POST", "/v1/tasks/ta/egress", "{\"allow\":\"a.test\",\"deny\":\"b.test\"}", 400,
         "expected");
    want("POST", "/v1/tasks/ta/egress", "[1]", 400, "expected");
    want("POST", "/v1/tasks/ta/egress", "{\"allow\":7}", 400, "expected");
    want("POST", "/v1/tasks/nosuch/snapshot", NULL, 404, "no running task 'nosuch'");
    want("POST", "/v1/tasks/nosuch/egress", "{\"deny\":\"x.test\"}", 404, "no running task");
    want("GET", "/v1/tasks/ta/snapshot", NULL, 405, "use POST");
    want("POST", "/v1/snapshots", NULL, 405, "use GET");
    want("GET", "/v1/snapshots/s-000000000000", NULL, 405, "use DELETE");
    want("DELETE", "/v1/snapshots/s-000000000000", NULL, 404, "no such snapshot");
    want("DELETE", "/v1/snapshots/nope", NULL, 400, "not a snapshot id");
    j = rh_json("GET", "/v1/snapshots", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "snapshots")), 0);
    json_decref(j);
    rh_stop();
}

static void test_scopes_refused(void **state)
{
    (void)state;
    rh_start("runner = { clients = ( { name = \"local\"; "
             "scopes = [\"submit\", \"read-own\"]; } ); };");
    kept_task();
    want("POST", "/v1/tasks/ta/snapshot", NULL, 403, "lacks scope 'snapshot'");
    want("POST", "/v1/tasks/ta/egress", "{\"allow\":\"x.example.test\"}", 403,
         "lacks scope 'egress'");
    want("GET", "/v1/snapshots", NULL, 403, "lacks scope 'snapshot'");
    want("DELETE", "/v1/snapshots/s-000000000000", NULL, 403, "lacks scope 'snapshot'");
    rh_stop();
}

/* A snapshot record as sbx_task_snapshot writes it (the fake provider has no
 * snapshot op: the record alone stands for one). */
static void plant_snapshot(const char *id, const char *by, const char *provider)
{
    char *dir = NULL;
    char *name = NULL;
    char *text = NULL;

    assert_true(asprintf(&dir, "%s/snapshots", rh_dir) > 0);
    mkdir(dir, 0700);
    assert_true(asprintf(&name, "%s.json", id) > 0);
    assert_true(asprintf(&text,
                         "{\"id\":\"%s\",\"ref\":\"sbx-snapshot:%s\",\"task\":\"ta\","
                         "\"pool\":\"agent\",\"provider\":\"%s\",\"created\":1,\"by\":\"%s\"}",
                         id, id, provider, by) > 0);
    free(test_write_file(dir, name, text));
    free(dir);
    free(name);
    free(text);
}

/* (added) POST /v1/jobs with `from`: the checks, each naming the field, then a job
 * that starts its task from the snapshot's image. */
static void test_submit_from(void **state)
{
    json_t *j;
    char *id;

    (void)state;
    rh_start(NULL);
    kept_task();
    plant_snapshot("s-aaaaaaaaaaaa", "local", "fake");
    plant_snapshot("s-bbbbbbbbbbbb", "someone", "fake");
    plant_snapshot("s-cccccccccccc", "local", "other");
    want("POST", "/v1/jobs", "{\"argv\":[\"true\"],\"from\":7}", 400,
         "field 'from' must be a string");
    want("POST", "/v1/jobs", "{\"argv\":[\"true\"],\"from\":\"nope\"}", 400,
         "field 'from': snapshot 'nope': not a snapshot id");
    want("POST", "/v1/jobs", "{\"argv\":[\"true\"],\"from\":\"s-000000000000\"}", 404,
         "field 'from': snapshot s-000000000000: no such snapshot");
    want("POST", "/v1/jobs", "{\"argv\":[\"true\"],\"from\":\"s-cccccccccccc\"}", 400,
         "field 'from': snapshot s-cccccccccccc is of provider 'other', the job's is 'fake'");
    want("POST", "/v1/jobs",
         "{\"argv\":[\"true\"],\"task\":\"ta\",\"pool\":\"agent\",\"from\":\"s-aaaaaaaaaaaa\"}",
         409, "field 'from': task ta is already running");
    /* the unix socket's client has read-all: another client's snapshot is allowed */
    id = rh_submit("{\"argv\":[\"true\"],\"task\":\"tf\",\"pool\":\"agent\","
                   "\"from\":\"s-bbbbbbbbbbbb\"}");
    j = rh_wait_state(id, "finished");
    assert_string_equal(json_string_value(json_object_get(j, "image")),
                        "sbx-snapshot:s-bbbbbbbbbbbb");
    json_decref(j);
    free(id);
    rh_stop();

    /* submit without snapshot: 403 naming the field; snapshot without read-all:
     * only its own snapshots */
    rh_start("runner = { clients = ( { name = \"local\"; "
             "scopes = [\"submit\", \"read-own\"]; } ); };");
    plant_snapshot("s-aaaaaaaaaaaa", "local", "fake");
    want("POST", "/v1/jobs", "{\"argv\":[\"true\"],\"from\":\"s-aaaaaaaaaaaa\"}", 403,
         "field 'from': client 'local' lacks scope 'snapshot'");
    rh_stop();
    rh_start("runner = { clients = ( { name = \"local\"; "
             "scopes = [\"submit\", \"read-own\", \"snapshot\"]; } ); };");
    plant_snapshot("s-aaaaaaaaaaaa", "local", "fake");
    plant_snapshot("s-bbbbbbbbbbbb", "someone", "fake");
    want("POST", "/v1/jobs", "{\"argv\":[\"true\"],\"from\":\"s-bbbbbbbbbbbb\"}", 403,
         "field 'from': snapshot s-bbbbbbbbbbbb was made by another client: client 'local' lacks "
         "scope 'read-all'");
    id = rh_submit("{\"argv\":[\"true\"],\"from\":\"s-aaaaaaaaaaaa\"}");
    json_decref(rh_wait_state(id, "finished"));
    free(id);
    rh_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints_every_scope),
        cmocka_unit_test(test_scopes_refused),
        cmocka_unit_test(test_submit_from),
    };

    return cmocka_run_group_tests_name("api_snapshot", tests, NULL, NULL);
}
