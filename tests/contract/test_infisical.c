/* test_infisical.c - cred_infisical against tests/contract/infisical_server.py
 * (started here on 127.0.0.1 with an ephemeral port): acquire, renew, revoke
 * and every error case, through sbx_instance_open() like the core does. */
#include "test_common.h"

#include "contract_server.h"
#include "wait.h"

#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "config/config.h"
#include "cred/session.h"
#include "http/http.h"
#include "plugin/host.h"
#include "plugin/instance.h"
#include "util/log.h"

#define SECRET_API "sk-test-abc123xyz"
#define SECRET_DB "hunter2-long"
#define CLIENT_SECRET "test-client-secret"

#define server_port contract_port
static char *tmpdir;
static char *log_path;
static int saved_stderr = -1;
static pthread_t tee_thread;
static int tee_fd = -1;

/* Copies what reaches stderr (sbx's logs, cmocka's messages) to the real
 * stderr and to log_path, which test_logs_hold_no_secret scans. */
static void *tee_main(void *arg)
{
    FILE *log = fopen(log_path, "w");
    char buf[4096];
    ssize_t n;

    (void)arg;
    while ((n = read(tee_fd, buf, sizeof(buf))) > 0) {
        if (write(saved_stderr, buf, (size_t)n) < 0) {
            break;
        }
        fwrite(buf, 1, (size_t)n, log);
        fflush(log);
    }
    fclose(log);
    return NULL;
}

/* ---- the server ---- */

static char *ctl(const char *method, const char *path, const char *body)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp;
    sbx_error_t *err = NULL;
    char *url = NULL;
    char *out;

    assert_true(asprintf(&url, "http://127.0.0.1:%d%s", server_port, path) > 0);
    req.method = method;
    req.url = url;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    req.headers = (const char *const[]){"Content-Type: application/json", NULL};
    req.timeout_ms = 10000;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("%s", err->msg);
    }
    assert_int_equal(resp.status, 200);
    out = strdup(resp.body);
    sbx_http_response_free(&resp);
    free(url);
    return out;
}

static void ctl_config(const char *json)
{
    free(ctl("POST", "/_test/config", json));
}

/* "POST /api/v1/auth/universal-auth/login 200|GET /api/v4/secrets 200|..." */
static char *calls(void)
{
    char *body = ctl("GET", "/_test/calls", NULL);
    json_t *root = json_loads(body, 0, NULL);
    json_t *arr = json_object_get(root, "calls");
    char *out = calloc(1, 4096);
    size_t i;
    json_t *c;

    json_array_foreach(arr, i, c)
    {
        char item[160];

        snprintf(item, sizeof(item), "%s%s %s %lld", i ? "|" : "",
                 json_string_value(json_object_get(c, "method")),
                 json_string_value(json_object_get(c, "path")),
                 (long long)json_integer_value(json_object_get(c, "status")));
        strncat(out, item, 4095 - strlen(out));
    }
    json_decref(root);
    free(body);
    return out;
}

static void expect_calls(const char *want)
{
    char *got = calls();

    if (strcmp(got, want) != 0) {
        fail_msg("server saw\n  %s\nwanted\n  %s", got, want);
    }
    free(got);
}

static void expect_tokens(int live, int revoked)
{
    char *body = ctl("GET", "/_test/tokens", NULL);
    json_t *root = json_loads(body, 0, NULL);

    assert_int_equal(json_integer_value(json_object_get(root, "live")), live);
    assert_int_equal(json_integer_value(json_object_get(root, "revoked")), revoked);
    json_decref(root);
    free(body);
}

#define LOGIN_OK "POST /api/v1/auth/universal-auth/login 200"
#define V4_OK "GET /api/v4/secrets 200"
#define RENEW_OK "POST /api/v1/auth/token/renew 200"
#define REVOKE_OK "POST /api/v1/auth/token/revoke 200"

/* ---- instances ---- */

struct inst {
    struct sbx_config *cfg;
    struct sbx_open_instance *oi;
    const struct sbx_credential_ops *ops;
};

/* Opens instance "infisical" from a config whose group holds `extra`
 * (url defaults to the test server; path to "/tasks/{task}", the path of
 * the server's default secrets, unless extra mentions "path"). NULL with
 * *err on failure. */
static struct sbx_config *load_config(const char *extra, sbx_error_t **err)
{
    struct sbx_config *c;
    char *text = NULL;
    char *path;

    assert_true(asprintf(&text,
                         "credentials = {\n"
                         "  infisical = {\n"
                         "    plugin = \"cred_infisical\";\n"
                         "    client_id_env = \"SBX_TEST_INF_ID\";\n"
                         "    project = \"proj-1\";\n"
                         "    environment = \"dev\";\n"
                         "    %s\n"
                         "    %surl = \"http://127.0.0.1:%d\";\n"
                         "    %s\n"
                         "  };\n"
                         "};\n",
                         extra, strstr(extra, "url =") ? "# default: " : "", server_port,
                         strstr(extra, "path") ? "" : "path = \"/tasks/{task}\";") > 0);
    path = test_write_file(tmpdir, "sbx.conf", text);
    free(text);
    c = sbx_config_load_file(path, err);
    free(path);
    return c;
}

static struct inst *open_inst(const char *extra, sbx_error_t **err)
{
    struct inst *in = calloc(1, sizeof(*in));

    in->cfg = load_config(extra, err);
    if (in->cfg == NULL) {
        free(in);
        return NULL;
    }
    in->oi = sbx_instance_open(in->cfg, getenv("SBX_PLUGIN_DIR"), "infisical",
                               SBX_PLUGIN_CREDENTIAL, err);
    if (in->oi == NULL) {
        sbx_config_destroy(in->cfg);
        free(in);
        return NULL;
    }
    in->ops = sbx_instance_credential(in->oi);
    return in;
}

#define WITH_ENV "client_secret_env = \"SBX_TEST_INF_SECRET\"; login_cooldown = 0;"

static struct inst *open_ok(const char *extra)
{
    sbx_error_t *err = NULL;
    struct inst *in = open_inst(extra, &err);

    if (in == NULL) {
        fail_msg("open: %s", err->msg);
    }
    return in;
}

static void close_inst(struct inst *in)
{
    if (in != NULL) {
        sbx_instance_close(in->oi);
        sbx_config_destroy(in->cfg);
        free(in);
    }
}

static void expect_open_error(const char *extra, const char *fragment)
{
    sbx_error_t *err = NULL;
    struct inst *in = open_inst(extra, &err);

    assert_null(in);
    assert_non_null(err);
    if (strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted '%s'", err->msg, fragment);
    }
    assert_null(strchr(err->msg, '\n'));
    sbx_error_free(&err);
}

static int acquire(struct inst *in, const char *task, struct sbx_lease *lease, sbx_error_t **err)
{
    struct sbx_cred_scope scope = {.task_id = task, .job_id = NULL, .path = NULL};

    memset(lease, 0, sizeof(*lease));
    return in->ops->acquire(in->oi->ctx, &scope, lease, err);
}

static void expect_acquire_error(struct inst *in, const char *task, const char *fragment)
{
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    assert_int_equal(acquire(in, task, &lease, &err), -1);
    assert_non_null(err);
    if (strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted '%s'", err->msg, fragment);
    }
    assert_null(strstr(err->msg, SECRET_API));
    assert_null(strstr(err->msg, CLIENT_SECRET));
    assert_null(lease.provider_data);
    assert_int_equal(lease.n_secrets, 0);
    sbx_error_free(&err);
    sbx_lease_clear(&lease);
}

static const char *lease_value(const struct sbx_lease *l, const char *name)
{
    for (size_t i = 0; i < l->n_secrets; i++) {
        if (strcmp(l->secrets[i].name, name) == 0) {
            return l->secrets[i].value;
        }
    }
    return NULL;
}

static void revoke_ok(struct inst *in, struct sbx_lease *lease)
{
    sbx_error_t *err = NULL;

    if (in->ops->revoke(in->oi->ctx, lease, &err) != 0) {
        fail_msg("revoke: %s", err->msg);
    }
    assert_null(lease->provider_data);
    sbx_lease_clear(lease);
}

/* ---- fixtures ---- */

static int setup(void **state)
{
    int fds[2];

    (void)state;
    sbx_log_setup(SBX_LOG_DEBUG, SBX_LOG_TEXT);
    tmpdir = test_mkdtemp();
    setenv("SBX_TEST_INF_ID", "test-client-id", 1);
    setenv("SBX_TEST_INF_SECRET", CLIENT_SECRET, 1);
    /* everything sbx logs goes to a file, scanned for secrets at the end */
    assert_true(asprintf(&log_path, "%s/stderr.log", tmpdir) > 0);
    saved_stderr = dup(STDERR_FILENO);
    if (pipe(fds) < 0) {
        return -1;
    }
    tee_fd = fds[0];
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    pthread_create(&tee_thread, NULL, tee_main, NULL);
    return contract_start_server("infisical_server.py", NULL);
}

static int teardown(void **state)
{
    (void)state;
    contract_stop_server();
    if (saved_stderr >= 0) {
        dup2(saved_stderr, STDERR_FILENO); /* closes the pipe: the tee ends */
        pthread_join(tee_thread, NULL);
        close(tee_fd);
        close(saved_stderr);
    }
    test_rm_rf(tmpdir);
    free(tmpdir);
    free(log_path);
    return 0;
}

static int reset(void **state)
{
    (void)state;
    free(ctl("POST", "/_test/reset", "{}"));
    setenv("SBX_TEST_INF_SECRET", CLIENT_SECRET, 1);
    return 0;
}

/* ---- tests ---- */

static void test_acquire_renew_revoke(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;
    int64_t now = (int64_t)time(NULL);

    (void)state;
    if (acquire(in, "T1", &lease, &err) != 0) {
        fail_msg("acquire: %s", err->msg);
    }
    assert_int_equal(lease.n_secrets, 2);
    assert_string_equal(lease_value(&lease, "API_KEY"), SECRET_API);
    assert_string_equal(lease_value(&lease, "DB_PASSWORD"), SECRET_DB);
    assert_non_null(lease.provider_data);
    assert_int_equal(strncmp(lease.id, "infisical-", 10), 0);
    assert_null(strstr(lease.id, SECRET_API));
    assert_null(strstr(lease.id, "eyJ"));
    assert_true(lease.expires_at >= now + 600 && lease.expires_at <= now + 602);
    assert_int_equal(lease.renew_at, lease.expires_at - 60);
    expect_tokens(1, 0);

    assert_non_null(in->ops->renew);
    if (in->ops->renew(in->oi->ctx, &lease, &err) != 0) {
        fail_msg("renew: %s", err->msg);
    }
    expect_tokens(1, 0); /* the renewed token replaced the old one */
    if (in->ops->renew(in->oi->ctx, &lease, &err) != 0) {
        fail_msg("renew: %s", err->msg);
    }
    revoke_ok(in, &lease);
    expect_tokens(0, 1); /* only the last token existed, and it is revoked */
    expect_calls(LOGIN_OK "|" V4_OK "|" RENEW_OK "|" RENEW_OK "|" REVOKE_OK);
    close_inst(in);
}

static void test_v3_fallback_and_imports(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    ctl_config("{\"v4\": false, \"imports\": {\"dev\": {\"/tasks/T1\": "
               "{\"SHARED_TOKEN\": \"shared-value-1\", \"API_KEY\": \"from-import\"}}}}");
    if (acquire(in, "T1", &lease, &err) != 0) {
        fail_msg("acquire: %s", err->msg);
    }
    assert_int_equal(lease.n_secrets, 3);
    assert_string_equal(lease_value(&lease, "API_KEY"), SECRET_API); /* the path wins */
    assert_string_equal(lease_value(&lease, "SHARED_TOKEN"), "shared-value-1");
    revoke_ok(in, &lease);
    expect_calls(LOGIN_OK "|GET /api/v4/secrets 404|GET /api/v3/secrets/raw 200|" REVOKE_OK);
    close_inst(in);
}

static void test_reserved_names_skipped(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    ctl_config("{\"secrets\": {\"dev\": {\"/tasks/T1\": {\"PATH\": \"/evil\", "
               "\"HTTPS_PROXY\": \"http://elsewhere\", \"LD_PRELOAD\": \"/x.so\", "
               "\"GOOD_NAME\": \"good-value\"}}}}");
    if (acquire(in, "T1", &lease, &err) != 0) {
        fail_msg("acquire: %s", err->msg);
    }
    assert_int_equal(lease.n_secrets, 1);
    assert_string_equal(lease.secrets[0].name, "GOOD_NAME");
    revoke_ok(in, &lease);
    close_inst(in);
}

static void test_bad_credentials(void **state)
{
    struct inst *in;

    (void)state;
    setenv("SBX_TEST_INF_SECRET", "wrong-secret", 1);
    in = open_ok(WITH_ENV);
    expect_acquire_error(in, "T1", "HTTP 401 (Invalid credentials)");
    close_inst(in);
    expect_calls("POST /api/v1/auth/universal-auth/login 401");
}

/* With the default login_cooldown, one rejected login stops further
 * attempts: no retry storm that would lock the identity out. */
static void test_no_retry_storm(void **state)
{
    struct inst *in;

    (void)state;
    setenv("SBX_TEST_INF_SECRET", "wrong-secret", 1);
    in = open_ok("client_secret_env = \"SBX_TEST_INF_SECRET\";");
    expect_acquire_error(in, "T1", "HTTP 401");
    expect_acquire_error(in, "T1", "login not attempted: the last login was rejected");
    expect_acquire_error(in, "T2", "next attempt is allowed in");
    expect_calls("POST /api/v1/auth/universal-auth/login 401");
    close_inst(in);
}

static void test_lockout(void **state)
{
    struct inst *in;

    (void)state;
    setenv("SBX_TEST_INF_SECRET", "wrong-secret", 1);
    in = open_ok(WITH_ENV);
    for (int i = 0; i < 3; i++) {
        expect_acquire_error(in, "T1", "Invalid credentials");
    }
    /* right secret, but the server locked the identity after 3 failures */
    setenv("SBX_TEST_INF_SECRET", CLIENT_SECRET, 1);
    expect_acquire_error(in, "T1", "locked out after failed logins");
    /* and sbx does not try again while the lockout lasts */
    expect_acquire_error(in, "T1", "login not attempted: Infisical locked the identity out");
    expect_calls("POST /api/v1/auth/universal-auth/login 401|"
                 "POST /api/v1/auth/universal-auth/login 401|"
                 "POST /api/v1/auth/universal-auth/login 401|"
                 "POST /api/v1/auth/universal-auth/login 401");
    close_inst(in);
}

static void test_expired_token_renews_by_login(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(acquire(in, "T1", &lease, &err), 0);
    ctl_config("{\"expire_tokens\": true}");
    if (in->ops->renew(in->oi->ctx, &lease, &err) != 0) {
        fail_msg("renew: %s", err->msg);
    }
    assert_non_null(lease.provider_data);
    revoke_ok(in, &lease);
    expect_tokens(0, 1);
    expect_calls(LOGIN_OK "|" V4_OK "|POST /api/v1/auth/token/renew 401|" LOGIN_OK
                          "|POST /api/v1/auth/token/revoke 401|" REVOKE_OK);
    close_inst(in);
}

static void test_renew_past_max_ttl(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    /* a renew would end past the Max TTL: sbx logs in again instead */
    ctl_config("{\"ttl\": 600, \"max_ttl\": 300}");
    assert_int_equal(acquire(in, "T1", &lease, &err), 0);
    if (in->ops->renew(in->oi->ctx, &lease, &err) != 0) {
        fail_msg("renew: %s", err->msg);
    }
    revoke_ok(in, &lease);
    expect_tokens(0, 2);
    expect_calls(LOGIN_OK "|" V4_OK "|" LOGIN_OK "|" REVOKE_OK "|" REVOKE_OK);
    close_inst(in);
}

static void test_renew_refused_past_max_ttl_by_server(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    /* the server enforces a Max TTL its replies do not announce: sbx tries
     * the renew, is refused, and logs in again */
    ctl_config("{\"ttl\": 600, \"max_ttl\": 300, \"advertised_max_ttl\": 0}");
    assert_int_equal(acquire(in, "T1", &lease, &err), 0);
    if (in->ops->renew(in->oi->ctx, &lease, &err) != 0) {
        fail_msg("renew: %s", err->msg);
    }
    revoke_ok(in, &lease);
    expect_tokens(0, 1);
    expect_calls(LOGIN_OK "|" V4_OK "|POST /api/v1/auth/token/renew 401|" LOGIN_OK
                          "|POST /api/v1/auth/token/revoke 401|" REVOKE_OK);
    close_inst(in);
}

static int closed_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void test_server_down(void **state)
{
    struct inst *up = open_ok(WITH_ENV);
    struct inst *down;
    struct sbx_lease lease;
    sbx_error_t *err = NULL;
    char extra[256];

    (void)state;
    snprintf(extra, sizeof(extra), "%s url = \"http://127.0.0.1:%d\"; timeout = \"5s\";", WITH_ENV,
             closed_port());
    down = open_ok(extra);
    expect_acquire_error(down, "T1", "login: cannot reach Infisical");
    /* a lease taken while the server was up, renewed and revoked while down */
    assert_int_equal(acquire(up, "T1", &lease, &err), 0);
    assert_int_equal(down->ops->renew(down->oi->ctx, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "cannot reach Infisical"));
    sbx_error_free(&err);
    assert_non_null(lease.provider_data); /* kept: the next renew may work */
    assert_int_equal(down->ops->revoke(down->oi->ctx, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "revoke failed (Infisical unreachable); the token lapses "
                                     "at its TTL"));
    sbx_error_free(&err);
    assert_null(lease.provider_data); /* freed on every path */
    sbx_lease_clear(&lease);
    expect_tokens(1, 0);
    close_inst(down);
    close_inst(up);
}

static void test_malformed_replies(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    ctl_config("{\"malformed\": [\"login\"]}");
    expect_acquire_error(in, "T1", "login: the reply is not a JSON object");
    ctl_config("{\"malformed\": [\"secrets\"]}");
    expect_acquire_error(in, "T1", "secrets (v4): the reply is not a JSON object");
    /* the token of the unreadable login reply is out of reach; the token
     * whose secrets could not be read was revoked */
    expect_tokens(1, 1);
    ctl_config("{\"malformed\": [\"renew\"]}");
    assert_int_equal(acquire(in, "T1", &lease, &err), 0);
    if (in->ops->renew(in->oi->ctx, &lease, &err) != 0) { /* falls back to a login */
        fail_msg("renew: %s", err->msg);
    }
    revoke_ok(in, &lease);
    close_inst(in);
}

static void test_secrets_errors(void **state)
{
    struct inst *in = open_ok(WITH_ENV);

    (void)state;
    expect_acquire_error(in, "T2", "path /tasks/T2 in environment dev");
    expect_acquire_error(in, "../etc", "cannot be used in a secrets path");
    expect_acquire_error(in, "", "path uses {task} but the task has no task id");
    ctl_config("{\"hidden\": true}");
    expect_acquire_error(in, "T1", "lacks the readValue permission");
    ctl_config("{\"hidden\": false, \"project\": \"other\"}");
    expect_acquire_error(in, "T1", "HTTP 404 (Project not found)");
    ctl_config("{\"project\": \"proj-1\", \"secrets\": {\"dev\": {\"/tasks/T1\": "
               "{\"bad-name\": \"value-1234\"}}}}");
    expect_acquire_error(in, "T1", "'bad-name' is not an environment variable name");
    expect_tokens(0, 4); /* every failed fetch revoked its token */
    close_inst(in);
}

static void test_path_template(void **state)
{
    struct inst *in = open_ok(WITH_ENV " path = \"/ci/{task}/{job}\";");
    struct sbx_cred_scope scope = {.task_id = "T1", .job_id = "J9", .path = NULL};
    struct sbx_lease lease = {0};
    sbx_error_t *err = NULL;

    (void)state;
    ctl_config("{\"secrets\": {\"dev\": {\"/ci/T1/J9\": {\"JOB_KEY\": \"job-value-1\"}, "
               "\"/tasks/T1\": {\"TASK_KEY\": \"task-value-1\"}}}}");
    if (in->ops->acquire(in->oi->ctx, &scope, &lease, &err) != 0) {
        fail_msg("acquire: %s", err->msg);
    }
    assert_string_equal(lease_value(&lease, "JOB_KEY"), "job-value-1");
    revoke_ok(in, &lease);
    /* an explicit path from the core replaces the template */
    scope.path = "/tasks/T1";
    memset(&lease, 0, sizeof(lease));
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), 0);
    assert_string_equal(lease_value(&lease, "TASK_KEY"), "task-value-1");
    revoke_ok(in, &lease);
    scope.path = "/tasks/../admin";
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "without '..'"));
    sbx_error_free(&err);
    /* a task with no job cannot fill {job} */
    scope.path = NULL;
    scope.job_id = NULL;
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "path uses {job} but the task has no job"));
    sbx_error_free(&err);
    sbx_lease_clear(&lease);
    close_inst(in);
}

/* (added, ABI 1.4) The default template /clients/{client}/{pool}: each
 * client and pool its own path, whatever the task is called; a client or
 * pool that is no id, or none, is refused before any login. */
static void test_client_pool_template(void **state)
{
    struct inst *in = open_ok(WITH_ENV " # the default path");
    struct sbx_cred_scope scope = {
        .task_id = "alice-deploy", .job_id = "J1", .path = NULL, .client = "mallory", .pool = "ci"};
    struct sbx_lease lease = {0};
    sbx_error_t *err = NULL;

    (void)state;
    ctl_config(
        "{\"secrets\": {\"dev\": {\"/clients/alice/ci\": {\"ALICE_KEY\": \"alice-value-1\"}, "
        "\"/clients/mallory/ci\": {\"MALLORY_KEY\": \"mallory-value-1\"}}}}");
    /* mallory naming alice's task gets her own path */
    if (in->ops->acquire(in->oi->ctx, &scope, &lease, &err) != 0) {
        fail_msg("acquire: %s", err->msg);
    }
    assert_string_equal(lease_value(&lease, "MALLORY_KEY"), "mallory-value-1");
    assert_null(lease_value(&lease, "ALICE_KEY"));
    revoke_ok(in, &lease);
    scope.client = "alice";
    memset(&lease, 0, sizeof(lease));
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), 0);
    assert_string_equal(lease_value(&lease, "ALICE_KEY"), "alice-value-1");
    revoke_ok(in, &lease);
    /* alice's agent pool is another path (none here: not found) */
    scope.pool = "agent";
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "/clients/alice/agent"));
    sbx_error_free(&err);
    expect_calls(LOGIN_OK "|" V4_OK "|" REVOKE_OK "|" LOGIN_OK "|" V4_OK "|" REVOKE_OK "|" LOGIN_OK
                          "|GET /api/v4/secrets 404|GET /api/v3/secrets/raw 404|" REVOKE_OK);
    free(ctl("POST", "/_test/reset", "{}"));
    /* no client (a job from before clients), or one that is no id: refused
     * before any login */
    scope.pool = "ci";
    scope.client = "";
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "path uses {client} but the task has no client"));
    sbx_error_free(&err);
    scope.client = "..";
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "client '..' cannot be used in a secrets path"));
    sbx_error_free(&err);
    scope.client = "alice";
    scope.pool = NULL;
    assert_int_equal(in->ops->acquire(in->oi->ctx, &scope, &lease, &err), -1);
    assert_non_null(strstr(err->msg, "path uses {pool} but the task has no pool"));
    sbx_error_free(&err);
    expect_calls("");
    sbx_lease_clear(&lease);
    close_inst(in);
}

/* The core's side: sbx_cred_session_* over the plugin, as a task uses it. */
static void test_session(void **state)
{
    struct sbx_config *c = load_config(WITH_ENV, NULL);
    struct sbx_cred_scope scope = {.task_id = "T1"};
    struct sbx_cred_session *s;
    const struct sbx_kv *env;
    sbx_error_t *err = NULL;
    char *lease_id;
    char *out;
    size_t n;

    (void)state;
    assert_non_null(c);
    s = sbx_cred_session_open(c, getenv("SBX_PLUGIN_DIR"), "infisical", &scope, &err);
    if (s == NULL) {
        fail_msg("open: %s", err->msg);
    }
    env = sbx_cred_session_env(s, &n);
    assert_int_equal(n, 2);
    assert_string_equal(env[0].name, "API_KEY");
    out = sbx_redact_buffer(sbx_cred_session_redactor(s), "key=" SECRET_API "\n", 22, NULL);
    assert_string_equal(out, "key=[redacted:API_KEY]\n");
    free(out);
    lease_id = strdup(sbx_cred_session_lease_id(s));
    assert_int_equal(sbx_cred_session_renew_due(s, (int64_t)time(NULL), &err), 0);
    expect_calls(LOGIN_OK "|" V4_OK); /* nothing was due */
    assert_int_equal(sbx_cred_session_renew_due(s, sbx_cred_session_renew_at(s), &err), 0);
    assert_int_equal(sbx_cred_session_close(s, &err), 0);
    expect_calls(LOGIN_OK "|" V4_OK "|" RENEW_OK "|" REVOKE_OK);
    /* a crashed sbx's record: the id alone; the plugin says it cannot revoke */
    assert_int_equal(
        sbx_cred_revoke_orphan(c, getenv("SBX_PLUGIN_DIR"), "infisical", lease_id, &err), 0);
    expect_calls(LOGIN_OK "|" V4_OK "|" RENEW_OK "|" REVOKE_OK);
    /* a session that cannot be opened leaves nothing behind */
    scope.task_id = "T2";
    assert_null(sbx_cred_session_open(c, getenv("SBX_PLUGIN_DIR"), "infisical", &scope, &err));
    assert_non_null(strstr(err->msg, "credentials 'infisical' for task T2"));
    sbx_error_free(&err);
    expect_tokens(0, 2);
    free(lease_id);
    sbx_config_destroy(c);
}

static void test_crashed_lease(void **state)
{
    struct inst *in = open_ok(WITH_ENV);
    struct sbx_lease lease = {0};
    sbx_error_t *err = NULL;

    (void)state;
    snprintf(lease.id, sizeof(lease.id), "infisical-0123456789abcdef01234567");
    /* only the id survives a crash: renew cannot work, revoke is a no-op */
    assert_int_equal(in->ops->renew(in->oi->ctx, &lease, &err), -1);
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    assert_non_null(strstr(err->msg, "holds no token"));
    sbx_error_free(&err);
    assert_int_equal(in->ops->revoke(in->oi->ctx, &lease, &err), 0);
    expect_calls("");
    close_inst(in);
}

static void test_config_errors(void **state)
{
    char *file;
    char extra[512];
    struct inst *in;
    struct sbx_lease lease;
    sbx_error_t *err = NULL;

    (void)state;
    expect_open_error("", "set exactly one of client_secret_env and client_secret_file");
    expect_open_error("client_secret_env = \"A\"; client_secret_file = \"/x\";", "exactly one");
    expect_open_error("client_secret_env = \"NOT-A-NAME\";", "not an environment variable");
    expect_open_error("client_secret_env = \"SBX_TEST_UNSET_VAR\";",
                      "environment variable SBX_TEST_UNSET_VAR is not set");
    expect_open_error(WITH_ENV " url = \"ftp://127.0.0.1\";", "must be an http:// or https://");
    expect_open_error(WITH_ENV " path = \"/tasks/{user}\";",
                      "sbx.conf:7: credentials.infisical: path '/tasks/{user}': unknown "
                      "placeholder '{user}' (use {client}, {pool}, {task}, {job})");
    expect_open_error(WITH_ENV " path = \"/c/{client}/{pool\";", "unknown placeholder '{pool'");
    expect_open_error(WITH_ENV " path = \"/c/}\";", "unknown placeholder '}'");
    expect_open_error(WITH_ENV " path = \"tasks/{task}\";", "absolute secrets path");
    expect_open_error(WITH_ENV " colour = 1;", "colour");
    expect_open_error("client_secret_file = \"/nonexistent/secret\";", "No such file");

    file = test_write_file(tmpdir, "client-secret", CLIENT_SECRET "\n");
    assert_int_equal(chmod(file, 0644), 0);
    snprintf(extra, sizeof(extra), "client_secret_file = \"%s\";", file);
    expect_open_error(extra, "must be readable by its owner only: chmod 600");
    assert_int_equal(chmod(file, 0640), 0);
    expect_open_error(extra, "mode 0640");
    assert_int_equal(chmod(file, 0600), 0);
    in = open_ok(extra);
    if (acquire(in, "T1", &lease, &err) != 0) {
        fail_msg("acquire with a secret file: %s", err->msg);
    }
    revoke_ok(in, &lease);
    /* the file is checked again at each login */
    assert_int_equal(chmod(file, 0604), 0);
    expect_acquire_error(in, "T1", "readable by its owner only");
    close_inst(in);
    free(file);
}

/* Nothing written to stderr by sbx and the plugin holds a secret or token. */
static void test_logs_hold_no_secret(void **state)
{
    char buf[65536];
    size_t n;
    FILE *f;

    (void)state;
    /* everything written so far is in the file once a mark written after it
     * is (the tee copies in order; before: a fixed 200 ms) */
    fprintf(stderr, "test_infisical: the scan starts\n");
    fflush(stderr);
    wait_until(test_file_has(log_path, "test_infisical: the scan starts"), 30, NULL,
               "the tee to copy stderr into %s", log_path);
    f = fopen(log_path, "r");
    assert_non_null(f);
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_true(n > 0); /* the plugin did log (leases, warnings) */
    assert_non_null(strstr(buf, "lease infisical-"));
    /* a template without {client} is warned about at start */
    assert_non_null(strstr(buf, "path '/tasks/{task}' has no {client}"));
    assert_null(strstr(buf, SECRET_API));
    assert_null(strstr(buf, SECRET_DB));
    assert_null(strstr(buf, CLIENT_SECRET));
    assert_null(strstr(buf, "eyJhbGci"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_acquire_renew_revoke, reset),
        cmocka_unit_test_setup(test_v3_fallback_and_imports, reset),
        cmocka_unit_test_setup(test_reserved_names_skipped, reset),
        cmocka_unit_test_setup(test_bad_credentials, reset),
        cmocka_unit_test_setup(test_no_retry_storm, reset),
        cmocka_unit_test_setup(test_lockout, reset),
        cmocka_unit_test_setup(test_expired_token_renews_by_login, reset),
        cmocka_unit_test_setup(test_renew_past_max_ttl, reset),
        cmocka_unit_test_setup(test_renew_refused_past_max_ttl_by_server, reset),
        cmocka_unit_test_setup(test_server_down, reset),
        cmocka_unit_test_setup(test_malformed_replies, reset),
        cmocka_unit_test_setup(test_secrets_errors, reset),
        cmocka_unit_test_setup(test_path_template, reset),
        cmocka_unit_test_setup(test_client_pool_template, reset),
        cmocka_unit_test_setup(test_session, reset),
        cmocka_unit_test_setup(test_crashed_lease, reset),
        cmocka_unit_test_setup(test_config_errors, reset),
        cmocka_unit_test(test_logs_hold_no_secret),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
