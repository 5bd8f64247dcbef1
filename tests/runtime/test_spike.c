/* test_spike.c - `sbx spike` side by side: the Docker column passes what the
 * CI machine can show; the OpenSandbox contract double never passes
 * anything (cannot-measure); the host column (provider_host, unisolated) is
 * marked so on every row; the report is written as JSON and Markdown. */
#include "rt_common.h"

#include "osb_server.h"

static pid_t inf_pid;
static int inf_port;
static pid_t origin_pid;
static int origin_port;

static int start_servers(void)
{
    char *inf = rt_source_path("tests/contract/infisical_server.py");
    char *origin = rt_source_path("tests/support/egress_origin.py");
    char *a1[] = {"python3", inf,        "--port",
                  "0",       "--secret", "dev:/tasks/spike:API_KEY=spike-secret-value-42",
                  NULL};
    char *a2[] = {"python3", origin, "http", NULL};

    inf_pid = rt_spawn_server(a1, &inf_port);
    origin_pid = rt_spawn_server(a2, &origin_port);
    free(inf);
    free(origin);
    setenv("INFISICAL_CLIENT_ID", "test-client-id", 1);
    setenv("SPIKE_INF_SECRET", "test-client-secret", 1);
    return inf_pid > 0 && origin_pid > 0 ? 0 : -1;
}

static int setup(void **state)
{
    char cfg[4096];

    if (rt_setup(state) < 0 || osb_start() < 0 || start_servers() < 0) {
        return -1;
    }
    rt_busybox_image("sbx-busybox:test");
    snprintf(
        cfg, sizeof(cfg),
        "runner = { box_hour_price = 0.8064; };\n"
        "spike = { concurrent = 6; concurrent_cpus = 0.25; concurrent_memory = \"256M\";\n"
        "          testcontainers_image = \"sbx-busybox:test\";\n"
        "          egress_allowed_url = \"http://allowed.test:%d/\";\n"
        "          egress_denied_url = \"http://denied.test:%d/\"; };\n"
        "egress = { system_dns = false; registries = [\"allowed.test:%d\"];\n"
        "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
        "            { name = \"denied.test\"; address = \"127.0.0.1\"; } ); };\n"
        "providers = {\n"
        "  docker = { plugin = \"provider_docker\"; sidecar_images = [\"sbx-busybox:test\"]; };\n"
        "  opensandbox = { plugin = \"provider_opensandbox\"; url = \"http://127.0.0.1:%d\";\n"
        "                  image = \"test\"; };\n"
        "  host = { plugin = \"provider_host\"; unisolated = true; };\n"
        "};\n"
        "credentials = { infisical = { plugin = \"cred_infisical\";\n"
        "  url = \"http://127.0.0.1:%d\"; project = \"proj-1\"; environment = \"dev\";\n"
        "  path = \"/tasks/spike\"; client_secret_env = \"SPIKE_INF_SECRET\"; }; };\n",
        origin_port, origin_port, origin_port, osb_port, inf_port);
    rt_use_config(cfg);
    return 0;
}

static int teardown(void **state)
{
    osb_stop();
    rt_stop_server(&inf_pid);
    rt_stop_server(&origin_pid);
    return rt_teardown(state);
}

/* Sandboxes whose owner process is gone (orphans). The engine is shared with
 * other runs, whose live tasks are not this test's concern; a sandbox the
 * spike left behind has a dead owner (the spike process ended). */
static size_t orphans(void)
{
    json_t *j = rt_containers();
    size_t n = 0;
    size_t i;
    json_t *c;

    json_array_foreach(j, i, c)
    {
        const char *owner =
            json_string_value(json_object_get(json_object_get(c, "Labels"), "sbx.owner"));
        const char *p = owner ? strstr(owner, "pid=") : NULL;
        long pid = p ? strtol(p + 4, NULL, 10) : 0;

        if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH)) {
            n++;
        }
    }
    json_decref(j);
    return n;
}

static const char *result_of(json_t *report, size_t provider, const char *criterion)
{
    json_t *crit =
        json_object_get(json_array_get(json_object_get(report, "providers"), provider), "criteria");
    size_t i;
    json_t *c;

    json_array_foreach(crit, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "criterion")), criterion) == 0) {
            return json_string_value(json_object_get(c, "result"));
        }
    }
    return "missing";
}

static const char *measured_of(json_t *report, size_t provider, const char *criterion)
{
    json_t *crit =
        json_object_get(json_array_get(json_object_get(report, "providers"), provider), "criteria");
    size_t i;
    json_t *c;

    json_array_foreach(crit, i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "criterion")), criterion) == 0) {
            const char *why = json_string_value(json_object_get(c, "why"));

            (void)why;
            return json_string_value(json_object_get(c, "measured"));
        }
    }
    return "missing";
}

static void test_spike_side_by_side(void **state)
{
    char *out = NULL;
    char *json_path = NULL;
    char *md_path = NULL;
    struct spawn_result r;
    json_t *report;
    json_t *osb;
    json_t *host;
    size_t i;
    json_t *c;

    (void)state;
    assert_true(asprintf(&out, "%s/report", rt_state) > 0);
    r = RT_SBX("spike", "--provider", "docker", "--provider", "opensandbox", "--provider", "host",
               "--runs", "3", "--credentials", "infisical", "--out", out);
    assert_true(asprintf(&json_path, "%s.json", out) > 0);
    assert_true(asprintf(&md_path, "%s.md", out) > 0);
    report = json_load_file(json_path, 0, NULL);
    if (report == NULL) {
        fail_msg("no report (rc %d): %s", r.rc, r.err);
    }
    assert_contains(r.out, "docker");
    assert_contains(r.out, "opensandbox");
    assert_string_equal(result_of(report, 0, "warm start"), "pass");
    assert_string_equal(result_of(report, 0, "concurrent sandboxes"), "pass");
    if (strcmp(result_of(report, 0, "Testcontainers"), "pass") != 0 ||
        strcmp(result_of(report, 0, "short-lived credentials only"), "pass") != 0 ||
        strcmp(result_of(report, 0, "egress allow-list"), "pass") != 0) {
        fail_msg("docker column: Testcontainers: %s; credentials: %s; egress: %s",
                 measured_of(report, 0, "Testcontainers"),
                 measured_of(report, 0, "short-lived credentials only"),
                 measured_of(report, 0, "egress allow-list"));
    }
    /* (issue 27) the criterion's container has an exposed port that answered
     * from the sandbox after the listening-ports wait strategy */
    assert_contains(measured_of(report, 0, "Testcontainers"), "port 8080 -> 127.0.0.1:");
    assert_contains(measured_of(report, 0, "Testcontainers"), "answered");
    fprintf(stderr, "spike Testcontainers: %s\n", measured_of(report, 0, "Testcontainers"));
    assert_string_equal(result_of(report, 0, "cost per agent-hour"), "pass");
    assert_string_equal(result_of(report, 0, "Agent Vault"), "cannot-measure");
    /* the contract double shows nothing real: never a pass */
    osb = json_object_get(json_array_get(json_object_get(report, "providers"), 1), "criteria");
    json_array_foreach(osb, i, c)
    {
        assert_string_equal(json_string_value(json_object_get(c, "result")), "cannot-measure");
    }
    /* the box with worktrees (decision 13), unisolated on every row */
    assert_contains(r.out, "host [UNISOLATED: isolation none]");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(report, "providers"), 2), "isolation")),
                        "none");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(report, "providers"), 0), "isolation")),
                        "sandbox");
    assert_string_equal(result_of(report, 2, "warm start"), "pass");
    host = json_object_get(json_array_get(json_object_get(report, "providers"), 2), "criteria");
    json_array_foreach(host, i, c)
    {
        assert_string_equal(json_string_value(json_object_get(c, "isolation")), "none");
    }
    {
        /* each table row holds both columns side by side */
        const char *row = strstr(r.out, "\nwarm start ");

        assert_non_null(row);
        assert_non_null(strstr(row, "| pass (bar"));
        assert_non_null(strstr(row, "| pass, UNISOLATED (bar"));
    }
    assert_int_equal(access(md_path, R_OK), 0);
    assert_int_equal(r.rc, 0);
    json_decref(report);
    spawn_result_free(&r);
    assert_int_equal(orphans(), 0);
    free(out);
    free(json_path);
    free(md_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spike_side_by_side),
    };

    return cmocka_run_group_tests_name("spike", tests, setup, teardown);
}
