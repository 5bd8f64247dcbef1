/* test_api_snapshot.c - (added, issue 30) the runner's snapshot and egress-change
 * endpoints against the in-process runner and the fake provider (no snapshot op, no
 * egress socket): scopes, owners, bad input and the provider's refusal, each one line.
 * The engine path is tests/runtime/test_snapshot_docker.c. */
#include "test_common.h"

#include <jansson.h>

#include "runner/runner_int.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoints_every_scope),
        cmocka_unit_test(test_scopes_refused),
    };

    return cmocka_run_group_tests_name("api_snapshot", tests, NULL, NULL);
}
