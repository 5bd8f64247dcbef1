/* test_opensandbox_exec.c - provider_opensandbox's execs against the
 * local test double: stdout and stderr apart, exit status from error.evalue,
 * ping events, data: prefixes and split events, the stream without its final
 * chunk, a stream cut before its terminal event, cancel, concurrent execs, a
 * command that cannot start, execd's own errors. */
#include "osb_fixture.h"

#include <jansson.h>
#include <pthread.h>
#include <time.h>

/* With QUIRKS set on the double, creates a sandbox for TASK and runs argv in
 * it (failing the test if the exec itself fails); returns the exit status. */
static int quirk_run(const char *quirks, const char *task, const char *const *argv,
                     const char *workdir, char *id, size_t id_size, struct out *o)
{
    struct sbx_sandbox_spec spec = make_spec(task, task);
    sbx_error_t *err = NULL;
    int status = -1;

    contract_quirks(quirks);
    create_ok(ops, osb->ctx, &spec, id, id_size);
    if (run(ops, osb->ctx, id, argv, NULL, 0, workdir, o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    return status;
}

/* The acceptance case, plus what create sent. */
static void test_osb_run_out_err_exit3(void **state)
{
    const char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
    const struct sbx_kv secrets[] = {{"SECRET_TOKEN", "s3cr3t-value"}};
    struct sbx_sandbox_spec spec = make_spec("task-1", "job-1");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all, *c, *body, *meta, *rules;

    (void)state;
    contract_quirks("{\"tail_seconds\": 0}");
    spec.labels = test_labels;
    spec.n_labels = 3;
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    if (run(ops, osb->ctx, id, argv, secrets, 1, NULL, &o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_string_equal(o.text[0], "out\n");
    assert_string_equal(o.text[1], "err\n");
    assert_int_equal(status, 3);
    destroy_ok(id);

    all = contract_calls();
    c = contract_find_call(all, "POST", "/v1/sandboxes");
    assert_non_null(c);
    assert_true(json_is_true(json_object_get(c, "api_key")));
    body = json_object_get(c, "body");
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "image"), "uri")),
                        "sbx-test:1");
    assert_string_equal(json_string_value(json_array_get(json_object_get(body, "entrypoint"), 0)),
                        "tail");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "resourceLimits"), "cpu")),
        "1500m");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "resourceLimits"), "memory")),
        "512Mi");
    assert_int_equal(json_integer_value(json_object_get(body, "timeout")), 7200);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "env"), "PLAIN")),
                        "visible");
    assert_null(json_object_get(json_object_get(body, "env"), "SECRET_TOKEN"));
    meta = json_object_get(body, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.task")), "task-1");
    /* mapped to the label rules (the server refuses invalid ones with 400) */
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.job")), "my_job__1-1ab25ab8");
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.owner")),
                        "boot_1234_5678-cfd57a4d");
    assert_non_null(json_object_get(meta, "sbx.deadline"));
    rules = json_object_get(json_object_get(body, "networkPolicy"), "egress");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "networkPolicy"), "defaultAction")),
        "deny");
    assert_int_equal(json_array_size(rules), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(rules, 0), "target")),
                        "pkgs.example.org");
    assert_string_equal(json_string_value(json_object_get(json_array_get(rules, 1), "target")),
                        "*.example.com");
    /* the exec: secrets per exec, never the API key to execd */
    c = contract_find_call(all, "POST", "/proxy/44772/command");
    assert_non_null(c);
    assert_false(json_is_true(json_object_get(c, "api_key")));
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(c, "body"), "envs"), "SECRET_TOKEN")),
                        "s3cr3t-value");
    assert_int_equal(contract_count_calls(all, "DELETE", id), 1);
    assert_int_equal(contract_count_calls(all, "GET", "/command/status/"), 0);
    json_decref(all);
}

static void test_osb_exit0_data_prefix_split_events(void **state)
{
    const char *argv[] = {"printf", "a\\nb it's", NULL};
    char id[128];
    struct out o;

    (void)state;
    assert_int_equal(quirk_run("{\"data_prefix\": true, \"split_events\": true}", "task-2", argv,
                               "/workspace", id, sizeof(id), &o),
                     0);
    assert_string_equal(o.text[0], "a\nb it's");
    assert_string_equal(o.text[1], "");
    destroy_ok(id);
}

/* The default tail: execd sleeps after the terminal event and never sends
 * the final chunk. */
static void test_osb_stream_without_final_chunk(void **state)
{
    const char *argv[] = {"sh", "-c", "echo x; exit 7", NULL};
    char id[128];
    struct out o;
    json_t *all;

    (void)state;
    assert_int_equal(quirk_run("{\"tail_seconds\": 1.0}", "task-3", argv, NULL, id, sizeof(id), &o),
                     7);
    assert_string_equal(o.text[0], "x\n");
    /* the terminal event decided, not the status fallback */
    all = contract_calls();
    assert_int_equal(contract_count_calls(all, "GET", "/command/status/"), 0);
    json_decref(all);
    destroy_ok(id);
}

/* The connection drops mid-stream: the exit status comes from
 * /command/status. */
static void test_osb_dropped_stream(void **state)
{
    const char *argv[] = {"sh", "-c", "echo before; sleep 0.5; exit 5", NULL};
    char id[128];
    struct out o;
    json_t *all;

    (void)state;
    assert_int_equal(
        quirk_run("{\"drop_midstream\": true}", "task-11", argv, NULL, id, sizeof(id), &o), 5);
    assert_string_equal(o.text[0], "before\n");
    all = contract_calls();
    assert_true(contract_count_calls(all, "GET", "/command/status/") >= 1);
    json_decref(all);
    destroy_ok(id);
}

/* A later process knows only the id: the execd endpoint is looked up. */
static void test_osb_exec_from_other_instance(void **state)
{
    const char *argv[] = {"sh", "-c", "echo again", NULL};
    struct sbx_open_instance *other = open_other("osb_renew");
    struct sbx_sandbox_spec spec = make_spec("task-13", "job-13");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    if (run(sbx_instance_provider(other), other->ctx, id, argv, NULL, 0, NULL, &o, &status, &err) <
        0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_string_equal(o.text[0], "again\n");
    destroy_ok(id);
    sbx_instance_close(other);
}

struct cancel_run {
    const char *id;
    struct sbx_exec_ctl ctl;
    struct out o;
    int status;
    int r;
    sbx_error_t *err;
};

static void *cancel_thread(void *arg)
{
    struct cancel_run *cr = arg;
    const char *argv[] = {"sleep", "30", NULL};
    struct sbx_exec_spec es = {.argv = argv, .on_output = collect, .output_userdata = &cr->o};

    cr->r = ops->exec(osb->ctx, cr->id, &es, &cr->ctl, &cr->status, &cr->err);
    return NULL;
}

static void test_osb_cancel(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-16", "job-16");
    char id[128];
    struct cancel_run cr;
    pthread_t t;
    json_t *all = NULL;
    struct timespec ts = {0, 50 * 1000000L};

    (void)state;
    contract_quirks("{}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    memset(&cr, 0, sizeof(cr));
    cr.id = id;
    assert_int_equal(pthread_create(&t, NULL, cancel_thread, &cr), 0);
    for (int i = 0; i < 200; i++) { /* until the command runs (10 s at most) */
        json_decref(all);
        all = contract_calls();
        if (contract_find_call(all, "POST", "/proxy/44772/command") != NULL) {
            break;
        }
        nanosleep(&ts, NULL);
    }
    json_decref(all);
    nanosleep(&ts, NULL);
    cr.ctl.cancelled = 1;
    ops->cancel(osb->ctx, &cr.ctl);
    pthread_join(t, NULL);
    assert_int_equal(cr.r, -1);
    assert_non_null(cr.err);
    assert_int_equal(cr.err->code, SBX_E_CANCELLED);
    sbx_error_free(&cr.err);
    all = contract_calls();
    assert_int_equal(contract_count_calls(all, "DELETE", "/proxy/44772/command?id="), 1);
    json_decref(all);
    destroy_ok(id);
}

struct par_run {
    const char *id;
    const char *word;
    struct out o;
    int status;
    int r;
    sbx_error_t *err;
};

static void *par_thread(void *arg)
{
    struct par_run *pr = arg;
    char script[64];
    const char *argv[] = {"sh", "-c", script, NULL};
    struct sbx_exec_spec es = {.argv = argv, .on_output = collect, .output_userdata = &pr->o};
    struct sbx_exec_ctl ctl = {0};

    snprintf(script, sizeof(script), "echo %s; sleep 0.3; echo %s >&2; exit %d", pr->word, pr->word,
             (int)strlen(pr->word));
    pr->r = ops->exec(osb->ctx, pr->id, &es, &ctl, &pr->status, &pr->err);
    return NULL;
}

/* Two execs in one sandbox at once, each with its own output. */
static void test_osb_concurrent_execs(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-21", "job-21");
    char id[128];
    struct par_run pr[2];
    pthread_t t[2];

    (void)state;
    contract_quirks("{}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    memset(pr, 0, sizeof(pr));
    pr[0].id = pr[1].id = id;
    pr[0].word = "one";
    pr[1].word = "second";
    for (int i = 0; i < 2; i++) {
        assert_int_equal(pthread_create(&t[i], NULL, par_thread, &pr[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        if (pr[i].r < 0) {
            fail_msg("exec %d: %s", i, pr[i].err->msg);
        }
    }
    assert_string_equal(pr[0].o.text[0], "one\n");
    assert_string_equal(pr[0].o.text[1], "one\n");
    assert_int_equal(pr[0].status, 3);
    assert_string_equal(pr[1].o.text[0], "second\n");
    assert_string_equal(pr[1].o.text[1], "second\n");
    assert_int_equal(pr[1].status, 6);
    destroy_ok(id);
}

static void test_osb_start_failure(void **state)
{
    const char *argv[] = {"true", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-18", "job-18");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, "/no/such/dir", &o, &status, &err), -1);
    assert_int_equal(err->code, SBX_E_NOEXEC);
    expect_msg(err, "execd could not start the command", "CommandExecError");
    sbx_error_free(&err);
    destroy_ok(id);
}

/* execd's own error body, and a stream that is not JSON */
static void test_osb_execd_errors(void **state)
{
    const char *argv[] = {"true", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-19", "job-19");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    contract_quirks("{\"command_error\": true}");
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err), -1);
    expect_msg(err,
               "opensandbox 'osb': POST /command (execd): HTTP 400: INVALID_REQUEST_BODY: "
               "error parsing request",
               NULL);
    sbx_error_free(&err);
    contract_quirks("{\"command_garbage\": true}");
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err), -1);
    assert_int_equal(err->code, SBX_E_PROTOCOL);
    expect_msg(err, "execd sent an event that is not JSON", "this is not json");
    sbx_error_free(&err);
    destroy_ok(id);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_osb_run_out_err_exit3),
        cmocka_unit_test(test_osb_exit0_data_prefix_split_events),
        cmocka_unit_test(test_osb_stream_without_final_chunk),
        cmocka_unit_test(test_osb_dropped_stream),
        cmocka_unit_test(test_osb_exec_from_other_instance),
        cmocka_unit_test(test_osb_cancel),
        cmocka_unit_test(test_osb_concurrent_execs),
        cmocka_unit_test(test_osb_start_failure),
        cmocka_unit_test(test_osb_execd_errors),
    };

    return cmocka_run_group_tests_name("opensandbox_exec", tests, group_setup, group_teardown);
}
