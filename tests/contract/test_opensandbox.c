/* test_opensandbox.c - provider_opensandbox against a local test double of
 * the OpenSandbox server (tests/contract/opensandbox_server.py, started here
 * on 127.0.0.1 with an ephemeral port): create, exec, destroy, list, cancel,
 * renew, and every quirk and error shape of the wire format. */
#include "contract_server.h"

#include <jansson.h>
#include <pthread.h>
#include <time.h>

#include "config/config.h"
#include "plugin/instance.h"

#define TEST_KEY "osb-test-key-6b1f"

static char *dir;
static struct sbx_config *cfg;
static struct sbx_open_instance *osb;
static const struct sbx_provider_ops *ops;

/* --- fixtures ------------------------------------------------------------- */

static int group_setup(void **state)
{
    char *text = NULL;
    char *path;
    sbx_error_t *err = NULL;
    const char *plugins = getenv("SBX_PLUGIN_DIR");

    (void)state;
    if (plugins == NULL || contract_start_server("opensandbox_server.py", TEST_KEY) < 0) {
        fprintf(stderr, "cannot start tests/contract/opensandbox_server.py\n");
        return -1;
    }
    setenv("SBX_TEST_OSB_KEY", TEST_KEY, 1);
    setenv("SBX_TEST_OSB_BADKEY", "not-the-key-9z", 1);
    dir = test_mkdtemp();
#define COMMON "plugin = \"provider_opensandbox\"; url = \"http://127.0.0.1:%d/\"; " \
               "image = \"sbx-test:1\"; poll_interval = 100; "
#define KEY "api_key_env = \"SBX_TEST_OSB_KEY\";"
    if (asprintf(&text,
                 "providers = {\n"
                 "  osb = { " COMMON KEY " };\n"
                 "  osb_fast = { " COMMON KEY " create_timeout = \"1s\"; };\n"
                 "  osb_renew = { " COMMON KEY " timeout_cap = \"60s\"; };\n"
                 "  osb_badkey = { " COMMON " api_key_env = \"SBX_TEST_OSB_BADKEY\"; };\n"
                 "  osb_opts = { " COMMON KEY " snapshot = \"snap-1\"; host_mounts = true;\n"
                 "    workdir = \"/workspace\"; entrypoint = [\"sleep\", \"infinity\"]; };\n"
                 "  osb_nourl = { plugin = \"provider_opensandbox\"; };\n"
                 "  osb_ftp = { plugin = \"provider_opensandbox\"; url = \"ftp://127.0.0.1\"; };\n"
                 "};\n",
                 contract_port, contract_port, contract_port, contract_port, contract_port) < 0) {
        return -1;
    }
#undef COMMON
#undef KEY
    path = test_write_file(dir, "sbx.conf", text);
    free(text);
    cfg = sbx_config_load_file(path, &err);
    free(path);
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", err->msg);
        return -1;
    }
    osb = sbx_instance_open(cfg, plugins, "osb", SBX_PLUGIN_PROVIDER, &err);
    if (osb == NULL) {
        fprintf(stderr, "%s\n", err->msg);
        return -1;
    }
    ops = sbx_instance_provider(osb);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    sbx_instance_close(osb);
    sbx_config_destroy(cfg);
    contract_stop_server();
    if (dir != NULL) {
        test_rm_rf(dir);
        free(dir);
    }
    return 0;
}

static struct sbx_open_instance *open_other(const char *name)
{
    sbx_error_t *err = NULL;
    struct sbx_open_instance *oi = sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), name,
                                                     SBX_PLUGIN_PROVIDER, &err);

    if (oi == NULL) {
        fail_msg("opening %s: %s", name, err->msg);
    }
    return oi;
}

static const struct sbx_kv test_labels[] = {
    {"sbx.task", "task-1"},
    {"sbx.job", "my job #1"}, /* a space and '#': not a valid label value as is */
    {"sbx.owner", "boot:1234:5678"},
};

static const struct sbx_kv test_env[] = {
    {"PLAIN", "visible"},
};

static const char *const test_egress[] = {"pkgs.example.org", "*.example.com:443",
                                          "10.0.0.0/8"};

static struct sbx_sandbox_spec make_spec(const char *task, const char *job)
{
    struct sbx_sandbox_spec s = {
        .task_id = task,
        .job_id = job,
        .image = "sbx-sandbox:current",
        .limits = {.cpus = 1.5, .memory = 512LL << 20, .disk = 1LL << 30, .pids = 100,
                   .idle = 3600, .max = 7200},
        .env = test_env,
        .n_env = 1,
        .egress_allow = test_egress,
        .n_egress_allow = 3,
    };

    return s;
}

struct out {
    char text[2][4096];
    size_t len[2];
};

static int collect(void *ud, int stream, const char *data, size_t len)
{
    struct out *o = ud;
    int i = stream == 1 ? 0 : 1;

    assert_true(stream == 1 || stream == 2);
    assert_true(o->len[i] + len < sizeof(o->text[i]));
    memcpy(o->text[i] + o->len[i], data, len);
    o->len[i] += len;
    o->text[i][o->len[i]] = '\0';
    return 0;
}

static void create_ok(const struct sbx_provider_ops *p, void *ctx,
                      const struct sbx_sandbox_spec *spec, char *id, size_t n)
{
    sbx_error_t *err = NULL;

    if (p->create(ctx, spec, id, n, &err) < 0) {
        fail_msg("create: %s", err->msg);
    }
}

static int run(const struct sbx_provider_ops *p, void *ctx, const char *id,
               const char *const *argv, const struct sbx_kv *env, size_t n_env,
               const char *workdir, struct out *o, int *status, sbx_error_t **err)
{
    struct sbx_exec_spec es = {.argv = argv, .env = env, .n_env = n_env, .workdir = workdir,
                               .on_output = collect, .output_userdata = o};
    struct sbx_exec_ctl ctl = {0};

    memset(o, 0, sizeof(*o));
    return p->exec(ctx, id, &es, &ctl, status, err);
}

static void destroy_ok(const char *id)
{
    sbx_error_t *err = NULL;

    if (ops->destroy(osb->ctx, id, &err) < 0) {
        fail_msg("destroy: %s", err->msg);
    }
}

static void expect_msg(sbx_error_t *err, const char *a, const char *b)
{
    assert_non_null(err);
    if (strstr(err->msg, a) == NULL || (b != NULL && strstr(err->msg, b) == NULL)) {
        fail_msg("got '%s', wanted '%s'%s%s", err->msg, a, b ? " and " : "", b ? b : "");
    }
    assert_null(strchr(err->msg, '\n'));
}

/* --- tests ---------------------------------------------------------------- */

static void test_osb_flags(void **state)
{
    (void)state;
    assert_int_equal(osb->plugin->desc.state, SBX_PLUGIN_READY);
    assert_int_equal(ops->flags, SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_EGRESS |
                                     SBX_PROVIDER_ENFORCES_MAX);
    assert_non_null(ops->cancel);
    assert_non_null(ops->info);
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
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(body, "env"), "PLAIN")), "visible");
    assert_null(json_object_get(json_object_get(body, "env"), "SECRET_TOKEN"));
    meta = json_object_get(body, "metadata");
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.task")), "task-1");
    /* mapped to the label rules (the server refuses invalid ones with 400) */
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.job")), "my_job__1-1ab25ab8");
    assert_string_equal(json_string_value(json_object_get(meta, "sbx.owner")),
                        "boot_1234_5678-cfd57a4d");
    assert_non_null(json_object_get(meta, "sbx.deadline"));
    rules = json_object_get(json_object_get(body, "networkPolicy"), "egress");
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "networkPolicy"),
                                                          "defaultAction")), "deny");
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
    struct sbx_sandbox_spec spec = make_spec("task-2", "job-2");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;

    (void)state;
    contract_quirks("{\"data_prefix\": true, \"split_events\": true}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    if (run(ops, osb->ctx, id, argv, NULL, 0, "/workspace", &o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_int_equal(status, 0);
    assert_string_equal(o.text[0], "a\nb it's");
    assert_string_equal(o.text[1], "");
    destroy_ok(id);
}

/* The default tail: execd sleeps after the terminal event and never sends
 * the final chunk. */
static void test_osb_stream_without_final_chunk(void **state)
{
    const char *argv[] = {"sh", "-c", "echo x; exit 7", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-3", "job-3");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all;

    (void)state;
    contract_quirks("{\"tail_seconds\": 1.0}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    if (run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_int_equal(status, 7);
    assert_string_equal(o.text[0], "x\n");
    /* the terminal event decided, not the status fallback */
    all = contract_calls();
    assert_int_equal(contract_count_calls(all, "GET", "/command/status/"), 0);
    json_decref(all);
    destroy_ok(id);
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
    expect_msg(err, "opensandbox 'osb': POST /sandboxes: HTTP 422: request rejected: "
               "body.timeout: Input should be greater than or equal to 60; "
               "body.resourceLimits: Field required", NULL);
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
    expect_msg(err, "opensandbox 'osb': POST /sandboxes: HTTP 400: SANDBOX::INVALID_PARAMETER: "
               "timeout exceeds max_sandbox_timeout_seconds (86400)", NULL);
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

/* The connection drops mid-stream: the exit status comes from
 * /command/status. */
static void test_osb_dropped_stream(void **state)
{
    const char *argv[] = {"sh", "-c", "echo before; sleep 0.5; exit 5", NULL};
    struct sbx_sandbox_spec spec = make_spec("task-11", "job-11");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all;

    (void)state;
    contract_quirks("{\"drop_midstream\": true}");
    create_ok(ops, osb->ctx, &spec, id, sizeof(id));
    if (run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_int_equal(status, 5);
    assert_string_equal(o.text[0], "before\n");
    all = contract_calls();
    assert_true(contract_count_calls(all, "GET", "/command/status/") >= 1);
    json_decref(all);
    destroy_ok(id);
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
    if (run(sbx_instance_provider(other), other->ctx, id, argv, NULL, 0, NULL, &o, &status,
            &err) < 0) {
        fail_msg("exec: %s", err->msg);
    }
    assert_string_equal(o.text[0], "again\n");
    destroy_ok(id);
    sbx_instance_close(other);
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
    contract_quirks("{\"ping_interval\": 0.2}");
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
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, "/no/such/dir", &o, &status, &err),
                     -1);
    assert_int_equal(err->code, SBX_E_NOEXEC);
    expect_msg(err, "execd could not start the command", "CommandExecError");
    sbx_error_free(&err);
    destroy_ok(id);
}

/* snapshot, entrypoint, host mounts, workdir, "*" egress, rounding */
static void test_osb_option_mapping(void **state)
{
    struct sbx_open_instance *oi = open_other("osb_opts");
    const struct sbx_provider_ops *p = sbx_instance_provider(oi);
    const char *argv[] = {"pwd", NULL};
    const char *const star[] = {"*"};
    const struct sbx_mount cache = {.host = "/var/cache/sbx", .path = "/cache", .read_only = 1};
    struct sbx_sandbox_spec spec = make_spec("task-20", "job-20");
    char id[128];
    struct out o;
    int status = -1;
    sbx_error_t *err = NULL;
    json_t *all, *body, *vols, *np;

    (void)state;
    contract_quirks("{}");
    spec.worktree = "/srv/work/task-20";
    spec.mounts = &cache;
    spec.n_mounts = 1;
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
    assert_int_equal(json_array_size(vols), 2);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(vols, 0), "host"), "path")),
                        "/srv/work/task-20");
    assert_string_equal(json_string_value(json_object_get(json_array_get(vols, 0), "mountPath")),
                        "/workspace");
    assert_true(json_is_true(json_object_get(json_array_get(vols, 1), "readOnly")));
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(contract_find_call(all, "POST", "/command"), "body"),
                            "cwd")),
                        "/workspace");
    json_decref(all);
    assert_int_equal(p->destroy(oi->ctx, id, &err), 0);
    sbx_instance_close(oi);
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
    expect_msg(err, "opensandbox 'osb': POST /command (execd): HTTP 400: INVALID_REQUEST_BODY: "
               "error parsing request", NULL);
    sbx_error_free(&err);
    contract_quirks("{\"command_garbage\": true}");
    assert_int_equal(run(ops, osb->ctx, id, argv, NULL, 0, NULL, &o, &status, &err), -1);
    assert_int_equal(err->code, SBX_E_PROTOCOL);
    expect_msg(err, "execd sent an event that is not JSON", "this is not json");
    sbx_error_free(&err);
    destroy_ok(id);
}

static void test_osb_config_errors(void **state)
{
    sbx_error_t *err = NULL;

    (void)state;
    assert_null(sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), "osb_nourl",
                                  SBX_PLUGIN_PROVIDER, &err));
    assert_int_equal(err->code, SBX_E_CONFIG);
    expect_msg(err, "needs option 'url'", "osb_nourl");
    sbx_error_free(&err);
    assert_null(sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), "osb_ftp",
                                  SBX_PLUGIN_PROVIDER, &err));
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
        cmocka_unit_test(test_osb_run_out_err_exit3),
        cmocka_unit_test(test_osb_exit0_data_prefix_split_events),
        cmocka_unit_test(test_osb_stream_without_final_chunk),
        cmocka_unit_test(test_osb_slow_create),
        cmocka_unit_test(test_osb_create_never_running),
        cmocka_unit_test(test_osb_create_failed_state),
        cmocka_unit_test(test_osb_error_422_detail),
        cmocka_unit_test(test_osb_error_code_message),
        cmocka_unit_test(test_osb_error_bad_key),
        cmocka_unit_test(test_osb_dropped_create),
        cmocka_unit_test(test_osb_dropped_stream),
        cmocka_unit_test(test_osb_404_after_delete),
        cmocka_unit_test(test_osb_exec_from_other_instance),
        cmocka_unit_test(test_osb_list_by_label),
        cmocka_unit_test(test_osb_cancel),
        cmocka_unit_test(test_osb_renew),
        cmocka_unit_test(test_osb_start_failure),
        cmocka_unit_test(test_osb_option_mapping),
        cmocka_unit_test(test_osb_execd_errors),
        cmocka_unit_test(test_osb_config_errors),
        cmocka_unit_test(test_osb_info),
    };

    return cmocka_run_group_tests_name("opensandbox", tests, group_setup, group_teardown);
}
