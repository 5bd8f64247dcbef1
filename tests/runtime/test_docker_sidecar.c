/* test_docker_sidecar.c - a per-sandbox Docker daemon (docs/testcontainers.md):
 * Testcontainers (Node) inside the sandbox starts and stops a container from
 * an image seeded from the host's engine, (added) and with a user-defined
 * network, containers reaching each other by alias; the sidecar never sees the host's
 * socket, shares the sandbox's network namespace, reports its isolation, and
 * is gone with the sandbox. */
#include "rt_common.h"

#define SEED_IMAGE "sbx-busybox:test"
#define WEB_IMAGE "sbx-tc-web:test"

static char *tc_dir; /* tests/runtime/tc, mounted as the worktree */

/* WEB_IMAGE: a base imported from files owned by the engine's remapped root
 * (100000, as a root filesystem a sandbox wrote would be on the host), then
 * `docker build` with COPY: busybox httpd serving /www on 8080. Seeding it
 * needs its owners shifted back (docker_seedtar.c). */
static void web_image(void)
{
    char *dir = test_mkdtemp();
    char *script = NULL;
    char *argv[] = {"/bin/sh", "-c", NULL, NULL};
    char *env[] = {rt_host, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DOCKER_BUILDKIT=0", NULL};
    struct spawn_result r;

    assert_true(asprintf(&script,
                         "set -e; d='%s'; mkdir -p $d/base/bin $d/ctx/www; "
                         "cp /bin/busybox $d/base/bin/busybox; "
                         "for a in sh httpd cat awk grep nc sleep echo; do "
                         "ln -s busybox $d/base/bin/$a; done; "
                         "tar --numeric-owner --owner=100000 --group=100000 -C $d/base -c . | "
                         "docker import - sbx-tc-base:test >/dev/null; "
                         "echo tc-web-ok > $d/ctx/www/index.html; "
                         "printf 'FROM sbx-tc-base:test\nCOPY www /www\n"
                         "CMD [\"httpd\",\"-f\",\"-p\",\"8080\",\"-h\",\"/www\"]\n' "
                         "> $d/ctx/Dockerfile; "
                         "docker build -q -t " WEB_IMAGE " $d/ctx >/dev/null 2>$d/err || "
                         "{ cat $d/err >&2; exit 1; }; "
                         "docker save " WEB_IMAGE " | tar -xOf - --wildcards '*/layer.tar' | "
                         "tar -tvif - --numeric-owner | grep -q ' 100000/100000 '",
                         dir) > 0);
    argv[2] = script;
    r = spawn_run_as(argv, env, 0);
    if (r.rc != 0) {
        fail_msg("building " WEB_IMAGE " (its base must carry ids 100000): rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    free(script);
    test_rm_rf(dir);
    free(dir);
}

static int setup(void **state)
{
    const char *src = getenv("SBX_SOURCE_DIR");

    if (rt_setup(state) < 0 || src == NULL) {
        return -1;
    }
    assert_true(asprintf(&tc_dir, "%s/tests/runtime/tc", src) > 0);
    rt_busybox_image(SEED_IMAGE);
    web_image();
    return 0;
}

static int teardown(void **state)
{
    free(tc_dir);
    return rt_teardown(state);
}

/* {"label":["LABEL"]}, percent-encoded for a query string. */
static char *label_filter(const char *label)
{
    static const char hex[] = "0123456789ABCDEF";
    char *text = NULL;
    char *out;
    char *p;

    assert_true(asprintf(&text, "{\"label\":[\"%s\"]}", label) > 0);
    out = malloc(strlen(text) * 3 + 1);
    assert_non_null(out);
    p = out;
    for (const char *s = text; *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.') {
            *p++ = (char)ch;
        }
        else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    *p = '\0';
    free(text);
    return out;
}

/* Containers of this test's scope carrying LABEL ("key" or "key=value"). */
static json_t *containers_with(const char *label)
{
    char *scoped = NULL;
    char *enc;
    char *path = NULL;
    json_t *j;

    assert_true(asprintf(&scoped, "%s\",\"sbx.test=%s", label, rt_scope) > 0);
    enc = label_filter(scoped);
    assert_true(asprintf(&path, "/containers/json?all=1&filters=%s", enc) > 0);
    j = rt_engine_get(path);
    free(path);
    free(enc);
    free(scoped);
    assert_true(json_is_array(j));
    return j;
}

static void use_sidecar_config(const char *extra)
{
    char *text = NULL;

    assert_true(asprintf(&text,
                         "provider = \"dind\";\n"
                         "providers = {\n"
                         "  dind = { plugin = \"provider_docker\"; docker_sidecar = true;\n"
                         "           sidecar_images = [\"" SEED_IMAGE "\", \"" WEB_IMAGE
                         "\"]; %s };\n"
                         "};\n",
                         extra) > 0);
    rt_use_config(text);
    free(text);
}

static void check_sidecar(const char *task)
{
    char label[128];
    json_t *list;
    json_t *side;
    json_t *sandbox;
    json_t *insp;
    json_t *mounts;
    json_t *m;
    char path[256];
    const char *sid;
    const char *netmode;
    const char *iso;
    size_t i;

    snprintf(label, sizeof(label), "sbx.task=%s", task);
    list = containers_with(label);
    assert_int_equal(json_array_size(list), 2); /* the sandbox and its sidecar */
    json_decref(list);
    list = containers_with("sbx.role=docker-sidecar");
    assert_int_equal(json_array_size(list), 1);
    side = json_array_get(list, 0);
    sid = json_string_value(json_object_get(side, "Id"));
    assert_non_null(sid);
    snprintf(path, sizeof(path), "/containers/%s/json", sid);
    insp = rt_engine_get(path);
    json_decref(list);

    /* never the host's socket: exactly one bind mount, the per-sandbox dir */
    mounts = json_object_get(insp, "Mounts");
    assert_int_equal(json_array_size(mounts), 1);
    json_array_foreach(mounts, i, m)
    {
        const char *src = json_string_value(json_object_get(m, "Source"));
        const char *dst = json_string_value(json_object_get(m, "Destination"));

        assert_non_null(src);
        assert_string_equal(dst, "/run/sbx-docker");
        assert_null(strstr(src, rt_sock));
        assert_null(strstr(src, "/var/run/docker.sock"));
        assert_non_null(strstr(src, task)); /* under the task's own directory */
    }
    assert_false(json_is_true(json_object_get(json_object_get(insp, "HostConfig"), "Privileged")));
    /* it lives in the sandbox's network namespace */
    snprintf(label, sizeof(label), "sbx.docker_sidecar=1");
    list = containers_with(label);
    assert_int_equal(json_array_size(list), 1);
    sandbox = json_array_get(list, 0);
    netmode =
        json_string_value(json_object_get(json_object_get(insp, "HostConfig"), "NetworkMode"));
    assert_non_null(netmode);
    assert_int_equal(strncmp(netmode, "container:", 10), 0);
    assert_string_equal(netmode + 10, json_string_value(json_object_get(sandbox, "Id")));
    json_decref(list);

    /* the isolation report: the test engine remaps users, the daemon is rootless */
    {
        json_t *labels = json_object_get(json_object_get(insp, "Config"), "Labels");

        assert_string_equal(json_string_value(json_object_get(labels, "sbx.sidecar.userns")), "on");
        assert_string_equal(json_string_value(json_object_get(labels, "sbx.sidecar.daemon")),
                            "rootless");
        assert_contains(json_string_value(json_object_get(labels, "sbx.sidecar.caps")),
                        "SYS_ADMIN");
        iso = json_string_value(json_object_get(labels, "sbx.sidecar.isolation"));
        assert_non_null(iso);
        assert_null(strstr(iso, "ISOLATION FAILURE"));
        assert_non_null(json_object_get(labels, "sbx.owner"));
        fprintf(stderr, "sidecar isolation: %s\n", iso);
    }
    json_decref(insp);
}

static void test_sidecar_testcontainers(void **state)
{
    struct spawn_result r;

    (void)state;
    use_sidecar_config("");
    r = RT_SBX("task", "start", "--task", "tc-1", "--worktree", tc_dir);
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    check_sidecar("tc-1");

    r = RT_SBX("exec", "tc-1", "--", "sh", "-c",
               "echo $DOCKER_HOST; echo $TESTCONTAINERS_RYUK_DISABLED; "
               "echo $TESTCONTAINERS_HOST_OVERRIDE; "
               "test -e /var/run/docker.sock && echo HOST-SOCKET-VISIBLE; "
               "curl -s --unix-socket /run/sbx-docker/docker.sock http://localhost/_ping");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "unix:///run/sbx-docker/docker.sock\ntrue\n127.0.0.1\nOK");
    spawn_result_free(&r);

    /* Testcontainers starts and stops a container from the seeded image;
     * inside it, root is host uid 100000 (the engine's remapping) */
    r = RT_SBX("exec", "tc-1", "--env", "TC_IMAGE=" SEED_IMAGE, "--", "node",
               "/workspace/testcontainers_smoke.js");
    if (r.rc != 0) {
        fail_msg("testcontainers smoke rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_contains(r.out, "TESTCONTAINERS OK");
    assert_contains(r.out, "exec=inner-100000");
    fprintf(stderr, "%s", r.out);
    spawn_result_free(&r);
    /* the smoke test's container is gone from the inner daemon */
    r = RT_SBX("exec", "tc-1", "--", "curl", "-s", "--unix-socket", "/run/sbx-docker/docker.sock",
               "http://localhost/containers/json?all=1");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "[]\n");
    spawn_result_free(&r);

    /* an exposed port (Testcontainers' random host port) answers from the
     * sandbox at the host Testcontainers asks for, after the listening-ports
     * wait strategy, from the image built with COPY */
    r = RT_SBX("exec", "tc-1", "--env", "TC_IMAGE=" WEB_IMAGE, "--", "node",
               "/workspace/testcontainers_ports.js");
    if (r.rc != 0) {
        fail_msg("testcontainers ports rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_contains(r.out, "TESTCONTAINERS PORTS OK host=127.0.0.1 port=");
    assert_contains(r.out, "body=tc-web-ok");
    fprintf(stderr, "%s", r.out);
    spawn_result_free(&r);
    /* (added) a user-defined network (Testcontainers' Network): a container on it
     * with an alias and an exposed port, reached by a sibling by the alias (the
     * inner daemon's embedded DNS) and by the sandbox at the mapped port */
    r = RT_SBX("exec", "tc-1", "--env", "TC_IMAGE=" WEB_IMAGE, "--", "node",
               "/workspace/testcontainers_network.js");
    if (r.rc != 0) {
        fail_msg("testcontainers network rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_contains(r.out, "TESTCONTAINERS NETWORK OK alias=web sibling=tc-web-ok "
                           "sandbox=tc-web-ok");
    fprintf(stderr, "%s", r.out);
    spawn_result_free(&r);
    /* the inner bridge adds no way out: the sandbox's namespace has no
     * default route but the one through lo that sends TCP to the relay
     * (docs/egress.md, "Without proxy variables"), and does not forward */
    r = RT_SBX("exec", "tc-1", "--", "sh", "-c",
               "awk '$2 == \"00000000\" && $1 != \"lo\" { print \"DEFAULT-ROUTE\", $1 }' "
               "/proc/net/route; "
               "grep -q docker0 /proc/net/dev && echo bridge; "
               "cat /proc/sys/net/ipv4/ip_forward");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "bridge\n0\n");
    spawn_result_free(&r);

    r = RT_SBX("info", "--json");
    assert_contains(r.out, "\"nested_containers\": \"userns-remap on, rootless inner daemon");
    spawn_result_free(&r);

    r = RT_SBX("task", "end", "tc-1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
    {
        json_t *left = containers_with("sbx.role=docker-sidecar");

        assert_int_equal(json_array_size(left), 0);
        json_decref(left);
    }
}

static void test_sidecar_run_inner_container(void **state)
{
    struct spawn_result r;

    (void)state;
    use_sidecar_config("");
    /* one-shot: an inner container through the raw Engine API with curl */
    r = RT_SBX("run", "--", "sh", "-c",
               "s=/run/sbx-docker/docker.sock; "
               "id=$(curl -sf --unix-socket $s -H 'Content-Type: application/json' "
               "-d '{\"Image\":\"" SEED_IMAGE "\",\"Cmd\":[\"true\"],"
               "\"HostConfig\":{\"NetworkMode\":\"none\"}}' "
               "http://localhost/containers/create | sed 's/.*\"Id\":\"\\([0-9a-f]*\\)\".*/\\1/'); "
               "curl -sf --unix-socket $s -X POST http://localhost/containers/$id/start && "
               "curl -sf --unix-socket $s -X POST http://localhost/containers/$id/wait");
    if (r.rc != 0) {
        fail_msg("sbx run rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_contains(r.out, "\"StatusCode\":0");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_sidecar_missing_image(void **state)
{
    struct spawn_result r;

    (void)state;
    use_sidecar_config("sidecar_image = \"sbx-no-such-dind:1\";");
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "sbx image build --sidecar");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_sidecar_daemon_fails(void **state)
{
    struct spawn_result r;

    (void)state;
    /* an image without dockerd: create fails with the sidecar's last log lines */
    use_sidecar_config("sidecar_image = \"sbx-sandbox:current\"; sidecar_timeout = \"20s\";");
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "docker sidecar exited before its daemon answered; last log lines:");
    assert_contains(r.err, "dockerd: not found");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_sidecar_bad_mode(void **state)
{
    struct spawn_result r;

    (void)state;
    use_sidecar_config("sidecar_mode = \"half\";");
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "sidecar_mode 'half': use auto, rootless or rootful");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

/* After a failed assertion: end the task so the next test starts clean. */
static int end_task(void **state)
{
    struct spawn_result r = RT_SBX("task", "end", "tc-1");

    (void)state;
    spawn_result_free(&r);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_sidecar_testcontainers, end_task),
        cmocka_unit_test(test_sidecar_run_inner_container),
        cmocka_unit_test(test_sidecar_missing_image),
        cmocka_unit_test(test_sidecar_daemon_fails),
        cmocka_unit_test(test_sidecar_bad_mode),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
