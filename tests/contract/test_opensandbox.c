/* test_opensandbox.c - provider_opensandbox's lifecycle against a
 * local test double of the OpenSandbox server (tests/contract/opensandbox_server.py,
 * started on 127.0.0.1, port 0): create and its quirks (202, a slow create,
 * Pending, Failed, a dropped connection), both error body shapes, 404 after
 * delete, list by label, renewal, option mapping, config errors, info. */
#include "osb_fixture.h"

#include <jansson.h>
#include <pthread.h>
#include <time.h>

static void test_osb_flags(void **state)
{
    (void)state;
    assert_int_equal(osb->plugin->desc.state, SBX_PLUGIN_READY);
    /* what OpenSandbox enforces itself: cpu and memory, egress, the lifetime;
     * not pids, disk or user namespaces (docs/providers.md) */
    assert_int_equal(ops->flags, SBX_PROVIDER_ENFORCES_CPU | SBX_PROVIDER_ENFORCES_MEMORY |
                                     SBX_PROVIDER_ENFORCES_EGRESS | SBX_PROVIDER_ENFORCES_MAX);
    assert_non_null(ops->cancel);
    assert_non_null(ops->info);
}

static void test_osb_slow_create(void **state)
{
    const char *argv[] = {"true", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-4", "job-4");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all;
    char *path = NULL;

    (void)state;
    contract_quirks("{\"create_delay\": 1, \"pending_polls\": 3}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    assert_true(asprintf(&path, "/v1/sandboxes/%s", id) > 0);
    all = contract_calls();
    /* 3 Pending answers, then Running */
    assert_true(contract_count_calls(all, "GET", path) >= 4);
    assert_int_equal(contract_count_calls(all, "GET", "/endpoints/44772"), 1);
    assert_true(contract_count_calls(all, "GET", "/proxy/44772/ping") >= 1);
    json_decref(all);
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err), 0);
    assert_int_equal(status, 0);
    destroy_ok(id);
    free(path);
}

static void test_osb_create_never_running(void **state)
{
    struct sbx_open_instance *fast = open_other("osb_fast");
    const struct sbx_provider_ops *p = sbx_instance_provider(fast);
    struct sbx_sandbox_spec spec = make_spec("task-5", "job-5");
    char id[128];
    sbx_error_t *err = NULL;
    json_t *all;

    (void)state;
    contract_quirks("{\"pending_polls\": 100000}");
    assert_int_equal(p->create(fast->ctx, &spec, id, sizeof(id), &err), -1);
    assert_int_equal(err->code, SBX_E_TIMEOUT);
    expect_msg(err, "did not reach Running within 1 s", "Pending");
    sbx_error_free(&err);
    all = contract_calls();
    assert_int_equal(contract_count_calls(all, "DELETE", "/v1/sandboxes/"), 1); /* cleaned up */
    json_decref(all);
    sbx_instance_close(fast);
}

static void test_osb_create_failed_state(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-6", "job-6");
    char id[128];
    sbx_error_t *err = NULL;
    json_t *all;

    (void)state;
    contract_quirks("{\"pending_polls\": 1, \"create_state\": \"Failed\"}");
    assert_int_equal(ops->create(osb->ctx, &spec, id, sizeof(id), &err), -1);
    expect_msg(err, "is Failed (CONTAINER_EXITED_ERROR)", "instead of Running");
    sbx_error_free(&err);
    all = contract_calls();
    assert_int_equal(contract_count_calls(all, "DELETE", "/v1/sandboxes/"), 1);
    json_decref(all);
}

static void test_osb_error_422_detail(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-7", "job-7");
    char id[128];
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{\"create_status\": 422}");
    assert_int_equal(ops->create(osb->ctx, &spec, id, sizeof(id), &err), -1);
    assert_int_equal(err->code, SBX_E_ENGINE);
    expect_msg(err,
               "opensandbox 'osb': POST /sandboxes: HTTP 422: request rejected: "
               "body.timeout: Input should be greater than or equal to 60; "
               "body.resourceLimits: Field required",
               NULL);
    sbx_error_free(&err);
}

static void test_osb_error_code_message(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-8", "job-8");
    char id[128];
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{\"create_status\": 400}");
    assert_int_equal(ops->create(osb->ctx, &spec, id, sizeof(id), &err), -1);
    expect_msg(err,
               "opensandbox 'osb': POST /sandboxes: HTTP 400: SANDBOX::INVALID_PARAMETER: "
               "timeout exceeds max_sandbox_timeout_seconds (86400)",
               NULL);
    sbx_error_free(&err);
}

static void test_osb_error_bad_key(void **state)
{
    struct sbx_open_instance *bad = open_other("osb_badkey");
    const struct sbx_provider_ops *p = sbx_instance_provider(bad);
    struct sbx_sandbox_spec spec = make_spec("task-9", "job-9");
    char id[128];
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{}");
    assert_int_equal(p->create(bad->ctx, &spec, id, sizeof(id), &err), -1);
    assert_int_equal(err->code, SBX_E_CONFIG);
    expect_msg(err, "HTTP 401: INVALID_API_KEY", NULL);
    assert_null(strstr(err->msg, "not-the-key"));
    sbx_error_free(&err);
    sbx_instance_close(bad);
}

static void test_osb_dropped_create(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-10", "job-10");
    char id[128];
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{\"drop_create\": true}");
    assert_int_equal(ops->create(osb->ctx, &spec, id, sizeof(id), &err), -1);
    expect_msg(err, "opensandbox 'osb'", "/v1/sandboxes");
    sbx_error_free(&err);
}

static void test_osb_404_after_delete(void **state)
{
    const char *argv[] = {"true", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-12", "job-12");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    destroy_ok(id);
    destroy_ok(id); /* 404: already gone, which is success */
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err), -1);
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    expect_msg(err, "does not exist", "HTTP 404");
    sbx_error_free(&err);
    assert_int_equal(ops->destroy(osb->ctx, "../etc", &err), -1);
    expect_msg(err, "[A-Za-z0-9._-]", NULL);
    sbx_error_free(&err);
}

struct seen {
    char ids[8][128];
    int n;
    int with_owner;
};

static void on_sandbox(void *ud, const char *id, const struct sbx_kv *labels, size_t n)
{
    struct seen *s = ud;

    assert_true(s->n < 8);
    snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", id);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(labels[i].name, "sbx.owner") == 0) {
            s->with_owner++;
        }
    }
}

static const struct sbx_kv list_labels[] = {
    {"sbx.owner", "boot:1234:5678"},
    {"sbx.listtest", "a"},
    {"sbx.listtest", "b"},
};

static void test_osb_list_by_label(void **state)
{
    struct sbx_sandbox_spec spec = make_spec("task-14", "list job");
    struct sbx_sandbox_spec other = make_spec("task-15", "other-job");
    char id[3][128];
    struct seen s;
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{\"page_size_cap\": 1}");
    spec.labels = list_labels;
    spec.n_labels = 2;
    other.labels = list_labels + 2;
    other.n_labels = 1;
    create_ok(ops, osb->ctx, &spec, id[0], sizeof(id[0]));
    create_ok(ops, osb->ctx, &spec, id[1], sizeof(id[1]));
    create_ok(ops, osb->ctx, &other, id[2], sizeof(id[2]));
    memset(&s, 0, sizeof(s));
    /* the value is mapped the same way create mapped it; and two 503s first */
    contract_quirks("{\"page_size_cap\": 1, \"fail_gets\": 2}");
    if (ops->list(osb->ctx, "sbx.job", "list job", on_sandbox, &s, &err) < 0) {
        fail_msg("list: %s", err->msg);
    }
    assert_int_equal(s.n, 2);
    assert_int_equal(s.with_owner, 2);
    assert_true((strcmp(s.ids[0], id[0]) == 0 && strcmp(s.ids[1], id[1]) == 0) ||
                (strcmp(s.ids[0], id[1]) == 0 && strcmp(s.ids[1], id[0]) == 0));
    memset(&s, 0, sizeof(s));
    assert_int_equal(ops->list(osb->ctx, "sbx.listtest", NULL, on_sandbox, &s, &err), 0);
    assert_int_equal(s.n, 3);
    for (int i = 0; i < 3; i++) {
        destroy_ok(id[i]);
    }
    memset(&s, 0, sizeof(s));
    assert_int_equal(ops->list(osb->ctx, "sbx.listtest", NULL, on_sandbox, &s, &err), 0);
    assert_int_equal(s.n, 0);
}

/* timeout_cap 60 s and a 1 h lifetime: create asks for 60 s and renews. */
static void test_osb_renew(void **state)
{
    struct sbx_open_instance *ri = open_other("osb_renew");
    const struct sbx_provider_ops *p = sbx_instance_provider(ri);
    const char *argv[] = {"sleep", "1.6", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-17", "job-17");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all, *c;

    (void)state;
    contract_quirks("{\"ping_interval\": 0.2, \"zulu_times\": true}");
    spec.limits.max = 3600;
    create_ok(p, ri->ctx, &spec, id, sizeof(id));
    if (run(p, ri->ctx, id, argv, NULL, 0, NULL, &o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_int_equal(status, 0);
    all = contract_calls();
    c = contract_find_call(all, "POST", "/v1/sandboxes");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(c, "body"), "timeout")),
                     60);
    c = contract_find_call(all, "POST", "/renew-expiration");
    assert_non_null(c);
    assert_non_null(json_object_get(json_object_get(c, "body"), "expiresAt"));
    json_decref(all);
    assert_int_equal(p->destroy(ri->ctx, id, &err), 0);
    sbx_instance_close(ri);
}

/* snapshot, entrypoint, host mounts, workdir, "*" egress, rounding */
static void test_osb_option_mapping(void **state)
{
    struct sbx_open_instance *oi = open_other("osb_opts");
    const struct sbx_provider_ops *p = sbx_instance_provider(oi);
    const char *argv[] = {"pwd", NULL};
    const char *const star[] = {"*"};
    /* a read-only cache and the sandbox's own git dir (read-write, docs/tasks.md) */
    const struct sbx_mount cache[] = {
        {.host = "/var/cache/sbx", .path = "/cache", .read_only = 1},
        {.host = "/var/lib/sbx/tasks/task-20/git/repo", .path = "/workspace/.git", .read_only = 0},
    };
    struct sbx_sandbox_spec spec = make_spec("task-20", "job-20");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all, *body, *vols, *np;

    (void)state;
    contract_quirks("{}");
    spec.worktree = "/srv/work/task-20";
    spec.mounts = cache;
    spec.n_mounts = 2;
    spec.egress_allow = star;
    spec.n_egress_allow = 1;
    spec.limits.cpus = 2.0;
    spec.limits.memory = (1LL << 30) + 1;
    spec.limits.max = 30; /* raised to OpenSandbox's minimum */
    create_ok(p, oi->ctx, &spec, id, sizeof(id));
    if (run(p, oi->ctx, id, argv, NULL, 0, NULL, &o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_int_equal(status, 0);
    assert_non_null(strstr(o.text[0], "/workspace\n"));
    all = contract_calls();
    body = json_object_get(contract_find_call(all, "POST", "/v1/sandboxes"), "body");
    assert_string_equal(json_string_value(json_object_get(body, "snapshotId")), "snap-1");
    assert_null(json_object_get(body, "image"));
    assert_string_equal(json_string_value(json_array_get(json_object_get(body, "entrypoint"), 1)),
                        "infinity");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "resourceLimits"), "cpu")), "2");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "resourceLimits"), "memory")),
        "1025Mi");
    assert_int_equal(json_integer_value(json_object_get(body, "timeout")), 60);
    np = json_object_get(body, "networkPolicy");
    assert_string_equal(json_string_value(json_object_get(np, "defaultAction")), "allow");
    assert_int_equal(json_array_size(json_object_get(np, "egress")), 0);
    vols = json_object_get(body, "volumes");
    assert_int_equal(json_array_size(vols), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(vols, 0), "host"), "path")),
                        "/srv/work/task-20");
    assert_string_equal(json_string_value(json_object_get(json_array_get(vols, 0), "mountPath")),
                        "/workspace");
    assert_true(json_is_true(json_object_get(json_array_get(vols, 1), "readOnly")));
    /* (added) each mount's own read_only: the sandbox's git dir is writable */
    assert_string_equal(json_string_value(json_object_get(json_array_get(vols, 2), "mountPath")),
                        "/workspace/.git");
    assert_true(json_is_false(json_object_get(json_array_get(vols, 2), "readOnly")));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(contract_find_call(all, "POST", "/command"), "body"), "cwd")),
        "/workspace");
    json_decref(all);
    assert_int_equal(p->destroy(oi->ctx, id, &err), 0);
    sbx_instance_close(oi);
}

static void test_osb_config_errors(void **state)
{
    sbx_error_t *err = NULL;

    (void)state;
    assert_null(
        sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), "osb_nourl", SBX_PLUGIN_PROVIDER, &err));
    assert_int_equal(err->code, SBX_E_CONFIG);
    expect_msg(err, "needs option 'url'", "osb_nourl");
    sbx_error_free(&err);
    assert_null(
        sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), "osb_ftp", SBX_PLUGIN_PROVIDER, &err));
    expect_msg(err, "must start with http://", "ftp://127.0.0.1");
    sbx_error_free(&err);
}

static void test_osb_info(void **state)
{
    struct sbx_provider_info info;
    sbx_error_t *err = NULL;

    (void)state;
    memset(&info, 0, sizeof(info));
    if (ops->info(osb->ctx, &info, &err) < 0) {
        fail_msg("info: %s", err->msg);
    }
    assert_non_null(strstr(info.engine, "OpenSandbox at http://127.0.0.1:"));
    assert_non_null(strstr(info.engine, "healthy"));
    assert_int_equal(info.userns, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_osb_flags),
        cmocka_unit_test(test_osb_slow_create),
        cmocka_unit_test(test_osb_create_never_running),
        cmocka_unit_test(test_osb_create_failed_state),
        cmocka_unit_test(test_osb_error_422_detail),
        cmocka_unit_test(test_osb_error_code_message),
        cmocka_unit_test(test_osb_error_bad_key),
        cmocka_unit_test(test_osb_dropped_create),
        cmocka_unit_test(test_osb_404_after_delete),
        cmocka_unit_test(test_osb_list_by_label),
        cmocka_unit_test(test_osb_renew),
        cmocka_unit_test(test_osb_option_mapping),
        cmocka_unit_test(test_osb_config_errors),
        cmocka_unit_test(test_osb_info),
    };

    return cmocka_run_group_tests_name("opensandbox", tests, group_setup, group_teardown);
}
