/* test_serve_trust.c - the runner API's trust boundaries (issue 15), in-process
 * with the fake provider: worktrees confined below runner.worktree_roots
 * (never the state directory, /proc, /sys, /dev, /run; a symlink out is
 * refused), API clients with their own tokens and scopes (one client cannot
 * see or cancel another's job; metrics and submit apart), bad client
 * configuration as one-line FILE:LINE errors, and the caps on what a peer can
 * make the API hold before it authenticates. */
#include "test_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "runner/state.h"
#include "runner_harness.h"
#include "spawn.h"

static const char *err_of(json_t *j)
{
    const char *m = json_string_value(json_object_get(j, "error"));

    return m ? m : "";
}

/* POST /v1/jobs over the unix socket; the reply's error must hold want. */
static void submit_refused(const char *body, long code, const char *want)
{
    json_t *j = rh_json("POST", "/v1/jobs", body, code);

    if (strstr(err_of(j), want) == NULL || strchr(err_of(j), '\n') != NULL) {
        fail_msg("%s: got '%s', want '%s'", body, err_of(j), want);
    }
    json_decref(j);
}

static char *wt_body(const char *path)
{
    char *b = NULL;

    assert_true(asprintf(&b, "{\"argv\":[\"exit\",\"0\"],\"worktree\":\"%s\"}", path) > 0);
    return b;
}

static void refused_wt(const char *path, long code, const char *want)
{
    char *b = wt_body(path);

    submit_refused(b, code, want);
    free(b);
}

/* ---- worktree roots ------------------------------------------------------ */

static void test_trust_worktree(void **state)
{
    char *root = test_mkdtemp();
    char *outside = test_mkdtemp();
    char *tmp = realpath(getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", NULL);
    char *extra = NULL, *p = NULL, *q = NULL, *body;
    json_t *j;
    char *id;

    (void)state;
    /* root/ok (a directory), root/out -> outside, root/up -> .., root/alias -> ok */
    assert_true(asprintf(&p, "%s/ok", root) > 0);
    assert_int_equal(mkdir(p, 0755), 0);
    free(p);
    assert_true(asprintf(&p, "%s/out", root) > 0);
    assert_int_equal(symlink(outside, p), 0);
    free(p);
    assert_true(asprintf(&p, "%s/up", root) > 0);
    assert_int_equal(symlink("..", p), 0);
    free(p);
    assert_true(asprintf(&p, "%s/alias", root) > 0);
    assert_int_equal(symlink("ok", p), 0);
    free(p);
    /* the second root holds the state directory (the harness's temp dir) */
    assert_true(asprintf(&extra,
                         "runner = { worktree_roots = [\"%s\", \"%s\"]; };\n"
                         "box = { pools = [\"ci\"]; max_sandboxes = 1; };\n",
                         root, tmp) > 0);
    rh_start(extra);

    refused_wt("/proc", 403, "worktree \"/proc\": outside runner.worktree_roots");
    refused_wt("/etc", 403, "outside runner.worktree_roots");
    refused_wt("rel/dir", 400, "absolute path");
    refused_wt(rh_dir, 403, "inside the state directory");
    assert_true(asprintf(&p, "%s/egress", rh_dir) > 0);
    mkdir(p, 0700);
    refused_wt(p, 403, "inside the state directory");
    free(p);
    refused_wt(tmp, 403, "contains the state directory");
    assert_true(asprintf(&p, "%s/out", root) > 0);
    refused_wt(p, 403, "leads outside runner.worktree_roots");
    free(p);
    assert_true(asprintf(&p, "%s/up", root) > 0);
    refused_wt(p, 403, "leads outside runner.worktree_roots");
    free(p);
    assert_true(asprintf(&p, "%s/ok/../..", root) > 0);
    refused_wt(p, 403, "leads outside");
    free(p);
    assert_true(asprintf(&p, "%s/missing", root) > 0);
    refused_wt(p, 400, "No such file");
    free(p);

    /* a good worktree is accepted and kept resolved (the symlink inside the root
     * is followed, and the record holds where it led) */
    assert_true(asprintf(&p, "%s/alias", root) > 0);
    body = wt_body(p);
    id = rh_submit(body);
    free(body);
    j = rh_wait_state(id, "finished");
    assert_true(asprintf(&q, "%s/ok", root) > 0);
    {
        char *real = realpath(q, NULL);

        assert_string_equal(json_string_value(json_object_get(j, "worktree")), real);
        free(real);
    }
    json_decref(j);
    free(id);
    free(p);
    free(q);

    /* a queued job's worktree swapped for a symlink out before it starts: the
     * check again at start refuses it */
    {
        char *hold = rh_submit("{\"argv\":[\"sleep\",\"600000\"]}");
        char *swap = NULL, *old = NULL, *cancel = NULL;
        const char *reason;

        json_decref(rh_wait_state(hold, "running"));
        assert_true(asprintf(&swap, "%s/swap", root) > 0);
        assert_true(asprintf(&old, "%s/swap.old", root) > 0);
        assert_int_equal(mkdir(swap, 0755), 0);
        body = wt_body(swap);
        id = rh_submit(body);
        free(body);
        assert_int_equal(rename(swap, old), 0);
        assert_int_equal(symlink(outside, swap), 0);
        assert_true(asprintf(&cancel, "/v1/jobs/%s/cancel", hold) > 0);
        json_decref(rh_json("POST", cancel, "{}", 202));
        j = rh_wait_state(id, "finished");
        reason = json_string_value(json_object_get(j, "reason"));
        if (reason == NULL || strstr(reason, "leads outside runner.worktree_roots") == NULL) {
            fail_msg("swapped worktree: reason %s", reason ? reason : "(none)");
        }
        json_decref(j);
        free(hold);
        free(id);
        free(swap);
        free(old);
        free(cancel);
    }
    rh_stop();

    /* no roots: every worktree is refused, and a job without one runs */
    rh_start(NULL);
    refused_wt(root, 403, "outside runner.worktree_roots");
    id = rh_submit("{\"argv\":[\"exit\",\"0\"]}");
    json_decref(rh_wait_state(id, "finished"));
    free(id);
    rh_stop();
    test_rm_rf(root);
    test_rm_rf(outside);
    free(root);
    free(outside);
    free(tmp);
    free(extra);
}

/* What the runner reads from outside the state directory (its store, a
 * client's token file) is never mounted, whatever the roots say: a sandbox with
 * the store could rewrite the records, with a token file act as that client. */
static void test_trust_worktree_deny(void **state)
{
    char *root = test_mkdtemp();
    char *toks = NULL, *db = NULL, *tokf, *extra = NULL, *p = NULL, *id, *body;

    (void)state;
    assert_true(asprintf(&toks, "%s/tokens", root) > 0);
    assert_int_equal(mkdir(toks, 0700), 0);
    tokf = test_write_file(toks, "ci.token", "tok-ci-0123456789\n");
    assert_int_equal(chmod(tokf, 0600), 0);
    assert_true(asprintf(&db, "%s/db", root) > 0);
    assert_int_equal(mkdir(db, 0700), 0);
    assert_true(asprintf(&p, "%s/ok", root) > 0);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_true(asprintf(&extra,
                         "runner = { worktree_roots = [\"%s\"]; state = \"%s/runner.db\";\n"
                         "  clients = ( { name = \"ci\"; token_file = \"%s\"; scopes = "
                         "[\"submit\"]; } ); };\n"
                         "box = { pools = [\"ci\"]; max_sandboxes = 1; };\n",
                         root, db, tokf) > 0);
    rh_start(extra);
    refused_wt(root, 403, "contains the runner's store");
    refused_wt(db, 403, "contains the runner's store");
    refused_wt(toks, 403, "contains a client's token file");
    body = wt_body(p);
    id = rh_submit(body);
    json_decref(rh_wait_state(id, "finished"));
    free(id);
    free(body);
    rh_stop();
    test_rm_rf(root);
    free(root);
    free(toks);
    free(tokf);
    free(db);
    free(extra);
    free(p);
}

/* ---- clients and scopes --------------------------------------------------- */

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static int tc_port;

/* One request over TCP with token (NULL: none); returns the body as JSON (or
 * a string for non-JSON) and sets *status. */
static json_t *tc(const char *token, const char *method, const char *path, const char *body,
                  long *status)
{
    char url[256], auth[256];
    const char *hdrs[2] = {auth, NULL};
    struct sbx_http_request req = {.method = method, .url = url, .timeout_ms = 30000};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    json_t *j;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", tc_port, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token ? token : "");
    req.headers = token ? hdrs : NULL;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("%s %s: %s", method, path, sbx_error_msg(err));
    }
    *status = resp.status;
    j = json_loads(resp.body, 0, NULL);
    if (j == NULL) {
        j = json_string(resp.body);
    }
    sbx_http_response_free(&resp);
    return j;
}

static json_t *tc_want(const char *token, const char *method, const char *path, const char *body,
                       long want, const char *msg)
{
    long st = 0;
    json_t *j = tc(token, method, path, body, &st);

    if (st != want || (msg != NULL && strstr(err_of(j), msg) == NULL)) {
        char *t = json_dumps(j, JSON_ENCODE_ANY);

        fail_msg("%s %s as %s: HTTP %ld %s (want %ld '%s')", method, path, token ? token : "(none)",
                 st, t, want, msg ? msg : "");
    }
    return j;
}

static void tc_check(const char *token, const char *method, const char *path, const char *body,
                     long want, const char *msg)
{
    json_decref(tc_want(token, method, path, body, want, msg));
}

/* The job ids anywhere in a queue view. */
static int queue_mentions(json_t *q, const char *id)
{
    char *t = json_dumps(q, JSON_COMPACT);
    int found = strstr(t, id) != NULL;

    free(t);
    return found;
}

#define TOK_A "token-of-client-a-0123456789"
#define TOK_B "token-of-client-b-0123456789"
#define TOK_PROM "token-of-prometheus-01234567"
#define TOK_ADMIN "token-of-the-admin-012345678"

static void test_trust_clients(void **state)
{
    char *dir = test_mkdtemp();
    char *tokf = test_write_file(dir, "admin.token", TOK_ADMIN "\n");
    char *conf = NULL, *path = NULL;
    char *ida, *idb;
    json_t *j;

    (void)state;
    assert_int_equal(chmod(tokf, 0600), 0);
    setenv("SBX_TEST_TOK_A", TOK_A, 1);
    setenv("SBX_TEST_TOK_B", TOK_B, 1);
    setenv("SBX_TEST_TOK_PROM", TOK_PROM, 1);
    tc_port = free_port();
    assert_true(asprintf(&conf,
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = (\n"
                         "  { name = \"a\"; token_env = \"SBX_TEST_TOK_A\"; scopes = [\"submit\", "
                         "\"read-own\"]; },\n"
                         "  { name = \"b\"; token_env = \"SBX_TEST_TOK_B\"; scopes = [\"submit\", "
                         "\"read-own\"]; },\n"
                         "  { name = \"prom\"; token_env = \"SBX_TEST_TOK_PROM\"; scopes = "
                         "[\"metrics\"]; },\n"
                         "  { name = \"admin\"; token_file = \"%s\"; scopes = [\"read-all\", "
                         "\"cancel-any\"]; }\n); };\n"
                         "box = { max_sandboxes = 2; };\n",
                         tc_port, tokf) > 0);
    rh_start(conf);

    /* a's job: an agent task that runs until cancelled */
    j = tc_want(TOK_A, "POST", "/v1/jobs",
                "{\"argv\":[\"sleep\",\"600000\"],\"task\":\"ta\",\"pool\":\"agent\"}", 201, NULL);
    ida = strdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);
    json_decref(rh_wait_state(ida, "running"));
    /* b's job stays queued behind nothing: a plain one that runs until cancelled */
    j = tc_want(TOK_B, "POST", "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", 201, NULL);
    idb = strdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);

    /* b cannot see a's job: record, output, queue view, slots */
    assert_true(asprintf(&path, "/v1/jobs/%s", ida) > 0);
    tc_check(TOK_B, "GET", path, NULL, 403, "lacks scope 'read-all'");
    j = tc_want(TOK_A, "GET", path, NULL, 200, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "client")), "a");
    json_decref(j);
    tc_check(TOK_ADMIN, "GET", path, NULL, 200, NULL);
    free(path);
    assert_true(asprintf(&path, "/v1/jobs/%s/output", ida) > 0);
    tc_check(TOK_B, "GET", path, NULL, 403, "lacks scope 'read-all'");
    free(path);
    j = tc_want(TOK_B, "GET", "/v1/queue", NULL, 200, NULL);
    assert_false(queue_mentions(j, ida));
    assert_false(queue_mentions(j, "\"ta\""));
    assert_true(queue_mentions(j, idb));
    json_decref(j);
    j = tc_want(TOK_B, "GET", "/v1/slots", NULL, 200, NULL);
    assert_false(queue_mentions(j, ida));
    json_decref(j);
    j = tc_want(TOK_A, "GET", "/v1/queue", NULL, 200, NULL);
    assert_true(queue_mentions(j, ida));
    assert_false(queue_mentions(j, idb));
    json_decref(j);
    j = tc_want(TOK_ADMIN, "GET", "/v1/queue", NULL, 200, NULL);
    assert_true(queue_mentions(j, ida));
    assert_true(queue_mentions(j, idb));
    json_decref(j);
    /* nor run a command in a's task, cancel a's job or end a's task */
    tc_check(TOK_B, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"],\"task\":\"ta\"}", 403,
             "task ta belongs to another client");
    assert_true(asprintf(&path, "/v1/jobs/%s/cancel", ida) > 0);
    tc_check(TOK_B, "POST", path, "{}", 403, "lacks scope 'cancel-any'");
    tc_check(TOK_B, "POST", "/v1/tasks/ta/end", "{}", 403, "lacks scope 'cancel-any'");
    /* (added, issue 30) nor read, write or pause a's task's files; a may (the fake
     * provider has no file ops: 501 once the ownership and scope checks passed) */
    tc_check(TOK_B, "GET", "/v1/tasks/ta/files?path=/etc/hostname", NULL, 403,
             "task ta belongs to another client");
    tc_check(TOK_B, "PUT", "/v1/tasks/ta/files?path=/tmp/x", "x", 403, "belongs to another client");
    tc_check(TOK_B, "POST", "/v1/tasks/ta/pause", "{}", 403, "belongs to another client");
    tc_check(TOK_ADMIN, "GET", "/v1/tasks/ta/files?path=/etc/hostname", NULL, 403,
             "lacks scope 'submit'");
    tc_check(TOK_A, "GET", "/v1/tasks/ta/files?path=etc/hostname", NULL, 400, "absolute");
    for (int i = 0; i < 600; i++) { /* the task may still be starting (409) */
        long st = 0;

        json_decref(tc(TOK_A, "GET", "/v1/tasks/ta/files?path=/etc/hostname", NULL, &st));
        if (st != 409) {
            break;
        }
        usleep(50 * 1000);
    }
    tc_check(TOK_A, "GET", "/v1/tasks/ta/files?path=/etc/hostname", NULL, 501, "cannot");
    tc_check(TOK_A, "POST", "/v1/tasks/ta/pause", "{}", 501, "cannot pause");
    j = tc_want(TOK_A, "GET", "/v1/jobs/", NULL, 400, NULL);
    json_decref(j);

    /* scopes: metrics only cannot submit; submit only cannot scrape */
    tc_check(TOK_PROM, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"]}", 403,
             "client 'prom' lacks scope 'submit'");
    tc_check(TOK_PROM, "GET", "/v1/queue", NULL, 403, "lacks scope 'read-own'");
    tc_check(TOK_A, "GET", "/metrics", NULL, 403, "client 'a' lacks scope 'metrics'");
    tc_check(TOK_PROM, "GET", "/metrics", NULL, 200, NULL);
    tc_check(TOK_ADMIN, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"]}", 403, "'submit'");
    tc_check("wrong-token", "GET", "/v1/queue", NULL, 401, "bearer token");
    tc_check(NULL, "GET", "/v1/queue", NULL, 401, "bearer token");

    /* cancel-any may; the unix socket (local root) sees and does everything */
    tc_check(TOK_ADMIN, "POST", path, "{}", 202, NULL);
    free(path);
    json_decref(rh_wait_state(ida, "cancelled"));
    j = rh_json("GET", "/v1/queue", NULL, 200);
    assert_true(queue_mentions(j, idb));
    json_decref(j);
    assert_true(asprintf(&path, "/v1/jobs/%s/cancel", idb) > 0);
    tc_check(TOK_B, "POST", path, "{}", 202, NULL);
    free(path);
    json_decref(rh_wait_state(idb, "cancelled"));
    rh_stop();
    unsetenv("SBX_TEST_TOK_A");
    unsetenv("SBX_TEST_TOK_B");
    unsetenv("SBX_TEST_TOK_PROM");
    free(ida);
    free(idb);
    free(conf);
    free(tokf);
    test_rm_rf(dir);
    free(dir);
}

/* ---- bad configuration ---------------------------------------------------- */

/* Loads text as sbx.conf (then creates a runner when load_ok): the one-line
 * error must hold "sbx.conf:LINE" and want. */
static void config_refused(const char *text, int load_ok, const char *want)
{
    char *dir = test_mkdtemp();
    char *full = NULL;
    char *path;
    struct sbx_config *c;
    sbx_error_t *err = NULL;

    assert_true(asprintf(&full, "state_dir = \"%s\";\n%s", dir, text) > 0);
    path = test_write_file(dir, "sbx.conf", full);
    c = sbx_config_load_file(path, &err);
    if (load_ok) {
        struct sbx_runner *r;

        if (c == NULL) {
            fail_msg("%s: %s", text, sbx_error_msg(err));
        }
        r = sbx_runner_create(&(struct sbx_runner_opts){.cfg = c, .plugin_dir = "/nonexistent"},
                              &err);
        assert_null(r);
        sbx_config_destroy(c);
    }
    else {
        assert_null(c);
    }
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_CONFIG);
    if (strstr(sbx_error_msg(err), want) == NULL ||
        strstr(sbx_error_msg(err), "sbx.conf:") == NULL ||
        strchr(sbx_error_msg(err), '\n') != NULL) {
        fail_msg("%s: got '%s', want '%s'", text, sbx_error_msg(err), want);
    }
    sbx_error_free(&err);
    free(path);
    free(full);
    test_rm_rf(dir);
    free(dir);
}

/* Client b naming a task that client a has queued learns that the id is taken,
 * not a's job id. */
static void test_trust_queued_task_private(void **state)
{
    char *conf = NULL, *hold, *qa, *path = NULL;
    json_t *j;

    (void)state;
    setenv("SBX_TEST_TOK_A", TOK_A, 1);
    setenv("SBX_TEST_TOK_B", TOK_B, 1);
    tc_port = free_port();
    assert_true(asprintf(&conf,
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = (\n"
                         "  { name = \"a\"; token_env = \"SBX_TEST_TOK_A\"; scopes = [\"submit\", "
                         "\"read-own\"]; },\n"
                         "  { name = \"b\"; token_env = \"SBX_TEST_TOK_B\"; scopes = [\"submit\", "
                         "\"read-own\"]; }\n); };\n"
                         "box = { pools = [\"ci\"]; max_sandboxes = 1; };\n",
                         tc_port) > 0);
    rh_start(conf);
    j = tc_want(TOK_A, "POST", "/v1/jobs", "{\"argv\":[\"sleep\",\"600000\"]}", 201, NULL);
    hold = strdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);
    json_decref(rh_wait_state(hold, "running"));
    j = tc_want(TOK_A, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"],\"task\":\"tq\"}", 201,
                NULL);
    qa = strdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);
    /* (changed) tq is a's task: b may not see a's work, 403 (issue 25) */
    j = tc_want(TOK_B, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"],\"task\":\"tq\"}", 403,
                "task tq belongs to another client");
    if (strstr(err_of(j), qa) != NULL) {
        fail_msg("b learned a's job id: %s", err_of(j));
    }
    json_decref(j);
    /* a itself is told which job */
    j = tc_want(TOK_A, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"],\"task\":\"tq\"}", 409, qa);
    json_decref(j);
    assert_true(asprintf(&path, "/v1/jobs/%s/cancel", hold) > 0);
    json_decref(rh_json("POST", path, "{}", 202));
    json_decref(rh_wait_state(qa, "finished"));
    /* (added) an ended task stays a's: b naming it is refused, nothing stored */
    json_decref(tc_want(TOK_B, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"],\"task\":\"tq\"}",
                        403, "task tq belongs to another client"));
    rh_stop();
    unsetenv("SBX_TEST_TOK_A");
    unsetenv("SBX_TEST_TOK_B");
    free(path);
    free(hold);
    free(qa);
    free(conf);
}

/* (added, issue 25) Forged forwarding headers on the unix socket of a box in
 * no fleet: 400 with one line, logged, nothing stored or run; the socket's
 * own client gets the scopes of runner.clients' "local" entry. */
static long unix_raw(const char *req, char *reply, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    size_t got = 0;
    ssize_t n;
    long code = -1;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", rh_sock);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    while (got + 1 < len && (n = read(fd, reply + got, len - 1 - got)) > 0) {
        got += (size_t)n;
    }
    reply[got] = '\0';
    close(fd);
    sscanf(reply, "HTTP/1.1 %ld", &code);
    return code;
}

static void test_trust_forged_forward(void **state)
{
    static const char body[] = "{\"argv\":[\"exit\",\"0\"],\"task\":\"alice-kept\"}";
    const char *forged[] = {
        "X-Sbx-Forwarded-By: b9\r\nX-Sbx-Client: alice\r\nX-Sbx-Scopes: 31\r\n",
        "X-Sbx-Client: alice\r\n",
        "X-Sbx-Scopes: 31\r\n",
        "X-Sbx-Forwarded-By: b9\r\n",
    };
    char reply[4096];
    char *req = NULL;
    json_t *j;

    (void)state;
    rh_start("runner = { clients = ( { name = \"local\"; scopes = [\"read-own\"]; } ); };\n");
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        assert_true(asprintf(&req,
                             "POST /v1/jobs HTTP/1.1\r\nHost: sbx\r\nConnection: close\r\n%s"
                             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                             forged[i], strlen(body), body) > 0);
        assert_int_equal(unix_raw(req, reply, sizeof(reply)), 400);
        assert_non_null(strstr(reply, "taken only from a box of a fleet"));
        free(req);
        req = NULL;
    }
    /* nothing stored, nothing ran */
    j = rh_json("GET", "/v1/jobs", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 0);
    json_decref(j);
    /* the socket's own client has read-own only: no submit */
    j = rh_json("POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"]}", 403);
    assert_non_null(strstr(err_of(j), "submit"));
    json_decref(j);
    rh_stop();
}

/* (added, issue 25) A client may use only the credential instances its
 * runner.clients entry names: another one is 403 naming it, before anything
 * is stored or leased. */
static void test_trust_credentials(void **state)
{
    char *conf = NULL;
    json_t *j;

    (void)state;
    setenv("SBX_TEST_TOK_A", TOK_A, 1);
    setenv("SBX_TEST_TOK_B", TOK_B, 1);
    tc_port = free_port();
    assert_true(asprintf(&conf,
                         "credentials = { vault = { plugin = \"cred_wrongkind\"; }; };\n"
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = (\n"
                         "  { name = \"a\"; token_env = \"SBX_TEST_TOK_A\"; scopes = [\"submit\", "
                         "\"read-own\"]; credentials = [\"vault\"]; },\n"
                         "  { name = \"b\"; token_env = \"SBX_TEST_TOK_B\"; scopes = [\"submit\", "
                         "\"read-own\"]; }\n); };\n",
                         tc_port) > 0);
    rh_start(conf);
    j = tc_want(TOK_B, "POST", "/v1/jobs",
                "{\"argv\":[\"exit\",\"0\"],\"credentials\":\"vault\",\"task\":\"b-t\"}", 403,
                "client 'b' may not use credential instance 'vault'");
    json_decref(j);
    j = rh_json("GET", "/v1/jobs", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 0);
    json_decref(j);
    rh_stop();
    unsetenv("SBX_TEST_TOK_A");
    unsetenv("SBX_TEST_TOK_B");
    free(conf);
}

static void test_trust_bad_config(void **state)
{
    char *dir = test_mkdtemp();
    char *tokf = test_write_file(dir, "t", "abc\n");
    char *text = NULL;

    (void)state;
    config_refused("runner = { clients = ( { name = \"ci\"; token_env = \"X\"; scopes = "
                   "[\"submit\", \"admin\"]; } ); };\n",
                   0,
                   "sbx.conf:2: runner.clients 'ci': unknown scope 'admin' (scopes: submit, "
                   "read-own, read-all, cancel-any, metrics, snapshot, egress, exec)");
    config_refused("runner = { clients = (\n { name = \"ci\"; token_env = \"X\"; scopes = "
                   "[\"submit\"]; },\n { name = \"ci\"; token_env = \"Y\"; scopes = "
                   "[\"metrics\"]; } ); };\n",
                   0, "sbx.conf:4: runner.clients: duplicate name 'ci' (first at ");
    config_refused("runner = { clients = ( { name = \"ci\"; token_env = \"X\"; token_file = "
                   "\"/x\"; scopes = [\"submit\"]; } ); };\n",
                   0, "give exactly one of token_env or token_file");
    config_refused("runner = { clients = ( { name = \"ci\"; scopes = [\"submit\"]; } ); };\n", 0,
                   "give exactly one of token_env or token_file");
    config_refused("runner = { clients = ( { name = \"ci\"; token_env = \"X\"; } ); };\n", 0,
                   "'scopes' is missing or empty");
    config_refused("runner = { clients = ( { name = \"local\"; token_env = \"X\"; scopes = "
                   "[\"submit\"]; } ); };\n",
                   0, "the unix socket's client takes no token_env or token_file");
    config_refused("runner = { clients = ( { name = \"default\"; token_env = \"X\"; scopes = "
                   "[\"submit\"]; } ); };\n",
                   0, "the name is reserved");
    config_refused("runner = { clients = ( { token_env = \"X\"; scopes = [\"submit\"]; } ); };\n",
                   0, "'name' is missing");
    config_refused("runner = { clients = ( { name = \"ci\"; token_file = \"rel\"; scopes = "
                   "[\"submit\"]; } ); };\n",
                   0, "token_file 'rel' must be an absolute path");
    config_refused("runner = { clients = ( { name = \"ci\"; token = \"s3cret\"; } ); };\n", 0,
                   "unknown key 'token'");
    config_refused("runner = { worktree_roots = [\"/srv\",\n \"/proc/x\"]; };\n", 0,
                   "sbx.conf:3: runner.worktree_roots \"/proc/x\": inside /proc, /sys, /dev or "
                   "/run (a worktree root may not be there)");
    config_refused("runner = { worktree_roots = [\"/run\"]; };\n", 0, "inside /proc");
    config_refused("runner = { worktree_roots = [\"srv\"]; };\n", 0, "not an absolute path");
    /* read at start: a missing variable, a token file others can read, two
     * clients with one token, a root that does not exist */
    unsetenv("SBX_TEST_NO_SUCH_TOKEN");
    config_refused("runner = { clients = (\n { name = \"ci\"; token_env = "
                   "\"SBX_TEST_NO_SUCH_TOKEN\"; scopes = [\"submit\"]; } ); };\n",
                   1,
                   "sbx.conf:3: runner.clients 'ci': token_env SBX_TEST_NO_SUCH_TOKEN is not set");
    assert_int_equal(chmod(tokf, 0644), 0);
    assert_true(asprintf(&text,
                         "runner = { clients = ( { name = \"prom\"; token_file = \"%s\"; scopes = "
                         "[\"metrics\"]; } ); };\n",
                         tokf) > 0);
    config_refused(text, 1,
                   "is readable or writable by its group or others (mode 0644): chmod 600 it");
    assert_int_equal(chmod(tokf, 0600), 0);
    free(text);
    setenv("SBX_TEST_SAME_TOKEN", "abc", 1);
    assert_true(
        asprintf(&text,
                 "runner = { clients = ( { name = \"prom\"; token_file = \"%s\"; scopes = "
                 "[\"metrics\"]; },\n { name = \"ci\"; token_env = \"SBX_TEST_SAME_TOKEN\"; "
                 "scopes = [\"submit\"]; } ); };\n",
                 tokf) > 0);
    config_refused(text, 1, "runner.clients 'ci': the same token as client 'prom'");
    free(text);
    unsetenv("SBX_TEST_SAME_TOKEN");
    config_refused("runner = { worktree_roots = [\n \"/nonexistent/sbx-root\"]; };\n", 1,
                   "runner.worktree_roots: root \"/nonexistent/sbx-root\": No such file");
    /* `sbx serve` itself: exit 2 and the one line on stderr, for a load error
     * and for a start error */
    {
        static const struct {
            const char *conf, *want;
        } bin[] = {
            {"runner = { clients = ( { name = \"ci\"; token_env = \"X\"; scopes = "
             "[\"admin\"]; } ); };\n",
             "sbx.conf:2: runner.clients 'ci': unknown scope 'admin'"},
            {"runner = { clients = ( { name = \"ci\"; token_env = "
             "\"SBX_TEST_NO_SUCH_TOKEN\"; scopes = [\"submit\"]; } ); };\n",
             "sbx.conf:2: runner.clients 'ci': token_env SBX_TEST_NO_SUCH_TOKEN is not set"},
        };
        char *sbx_bin = NULL;

        assert_true(asprintf(&sbx_bin, "%s/sbx", getenv("SBX_BUILD_DIR")) > 0);
        for (size_t i = 0; i < sizeof(bin) / sizeof(bin[0]); i++) {
            char *full = NULL;
            char *conf;
            struct spawn_result res;

            assert_true(asprintf(&full, "state_dir = \"%s\";\n%s", dir, bin[i].conf) > 0);
            conf = test_write_file(dir, "sbx.conf", full);
            res = spawn_run((char *const[]){sbx_bin, "--config", conf, "serve", NULL}, NULL);
            if (res.rc != 2 || strstr(res.err, bin[i].want) == NULL ||
                strchr(res.err, '\n') != res.err + strlen(res.err) - 1) {
                fail_msg("sbx serve: exit %d, stderr '%s' (want 2, '%s')", res.rc, res.err,
                         bin[i].want);
            }
            spawn_result_free(&res);
            free(conf);
            free(full);
        }
        free(sbx_bin);
    }
    free(tokf);
    test_rm_rf(dir);
    free(dir);
}

/* ---- limits before authentication ---------------------------------------- */

static int tcp_connect(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tc_port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads until the peer closes (or timeout_s); the reply's first bytes in buf. */
static int read_until_closed(int fd, char *buf, size_t len, double timeout_s)
{
    double end = now_s() + timeout_s;
    size_t got = 0;

    buf[0] = '\0';
    while (now_s() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char tmp[4096];
        ssize_t n;

        if (poll(&p, 1, 200) <= 0) {
            continue;
        }
        n = read(fd, tmp, sizeof(tmp));
        if (n <= 0) {
            return 1;
        }
        if (got + 1 < len) {
            size_t k = (size_t)n < len - 1 - got ? (size_t)n : len - 1 - got;

            memcpy(buf + got, tmp, k);
            got += k;
            buf[got] = '\0';
        }
    }
    return 0;
}

static void test_trust_header_caps(void **state)
{
    char *conf = NULL;
    char buf[512];
    int fd;

    (void)state;
    setenv("SBX_TEST_TOK_A", TOK_A, 1);
    tc_port = free_port();
    assert_true(asprintf(&conf,
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = ( { name = \"a\"; "
                         "token_env = \"SBX_TEST_TOK_A\"; scopes = [\"read-own\"]; } ); };\n",
                         tc_port) > 0);
    rh_start(conf);
    {
        /* an endless header: cut at the cap (400), the connection closed */
        char chunk[4096];
        double t0 = now_s();
        size_t sent = 0;
        int closed;

        memset(chunk, 'a', sizeof(chunk));
        fd = tcp_connect();
        assert_true(write(fd, "GET /v1/queue HTTP/1.1\r\nHost: x\r\nX-Endless: ", 44) == 44);
        while (sent < (64u << 20) && now_s() - t0 < 20.0) {
            ssize_t n = send(fd, chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT);

            if (n < 0 && errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};

                poll(&p, 1, 100);
                continue;
            }
            if (n <= 0) {
                break;
            }
            sent += (size_t)n;
        }
        closed = read_until_closed(fd, buf, sizeof(buf), 10.0);
        close(fd);
        assert_true(closed);
        assert_true(sent < (64u << 20));
        /* libevent 2.1 answers a head over its cap with 400 */
        if (buf[0] != '\0' && strncmp(buf, "HTTP/1.1 400", 12) != 0) {
            fail_msg("endless header: reply '%.60s'", buf);
        }
    }
    {
        /* too many header lines: 431 and the connection closed */
        char req[4096];
        size_t n = (size_t)snprintf(req, sizeof(req), "GET /v1/queue HTTP/1.1\r\nHost: x\r\n");

        for (int i = 0; i < SBX_RUNNER_MAX_HEADERS + 5; i++) {
            n += (size_t)snprintf(req + n, sizeof(req) - n, "X-%d: v\r\n", i);
        }
        n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
        fd = tcp_connect();
        assert_true(write(fd, req, n) == (ssize_t)n);
        assert_true(read_until_closed(fd, buf, sizeof(buf), 10.0));
        close(fd);
        assert_non_null(strstr(buf, "HTTP/1.1 431"));
        assert_non_null(strstr(buf, "header lines, more than the limit of 64"));
    }
    {
        /* a head that never ends (slowloris): shut after the deadline */
        double t0 = now_s();
        double took;

        fd = tcp_connect();
        assert_true(write(fd, "GET /v1/queue HTTP/1.1\r\nX-Slow: a", 33) == 33);
        assert_true(read_until_closed(fd, buf, sizeof(buf), SBX_RUNNER_HEADER_TIMEOUT_S + 20.0));
        took = now_s() - t0;
        close(fd);
        if (took < SBX_RUNNER_HEADER_TIMEOUT_S - 1 || took > SBX_RUNNER_HEADER_TIMEOUT_S + 15) {
            fail_msg("slow head closed after %.1f s (deadline %d s)", took,
                     SBX_RUNNER_HEADER_TIMEOUT_S);
        }
    }
    {
        /* connections that send nothing: up to the cap they wait for their
         * deadline; one more is closed at once */
        int fds[SBX_RUNNER_MAX_PENDING];
        struct pollfd p;
        double t0;

        for (int i = 0; i < SBX_RUNNER_MAX_PENDING; i++) {
            fds[i] = tcp_connect();
        }
        /* the runner accepts them all before the next one */
        for (int i = 0; i < 200 && __atomic_load_n(&rh_runner->lis[1].n_guards, __ATOMIC_SEQ_CST) <
                                       SBX_RUNNER_MAX_PENDING;
             i++) {
            usleep(50 * 1000);
        }
        t0 = now_s();
        fd = tcp_connect();
        assert_true(read_until_closed(fd, buf, sizeof(buf), SBX_RUNNER_HEADER_TIMEOUT_S - 2));
        assert_true(now_s() - t0 < SBX_RUNNER_HEADER_TIMEOUT_S - 2);
        close(fd);
        p = (struct pollfd){.fd = fds[0], .events = POLLIN};
        assert_int_equal(poll(&p, 1, 0), 0); /* the first is still open */
        for (int i = 0; i < SBX_RUNNER_MAX_PENDING; i++) {
            close(fds[i]);
        }
    }
    /* nothing of the abandoned connections is held any more (the sweep ran;
     * ASan's leak check at exit covers what evhttp freed) */
    for (int i = 0; i < 100 && __atomic_load_n(&rh_runner->lis[1].guards, __ATOMIC_SEQ_CST); i++) {
        usleep(50 * 1000);
    }
    assert_null(__atomic_load_n(&rh_runner->lis[1].guards, __ATOMIC_SEQ_CST));
    /* a 401 closes its connection (no second try on it); the API still answers */
    {
        static const char req[] = "GET /v1/queue HTTP/1.1\r\nHost: x\r\n\r\n";

        fd = tcp_connect();
        assert_true(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1));
        assert_true(read_until_closed(fd, buf, sizeof(buf), 10.0));
        close(fd);
        assert_non_null(strstr(buf, "HTTP/1.1 401"));
    }
    tc_check(NULL, "GET", "/v1/queue", NULL, 401, "bearer token");
    tc_check(TOK_A, "GET", "/v1/queue", NULL, 200, NULL);
    rh_stop();
    unsetenv("SBX_TEST_TOK_A");
    free(conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trust_worktree),
        cmocka_unit_test(test_trust_worktree_deny),
        cmocka_unit_test(test_trust_clients),
        cmocka_unit_test(test_trust_queued_task_private),
        cmocka_unit_test(test_trust_forged_forward),
        cmocka_unit_test(test_trust_credentials),
        cmocka_unit_test(test_trust_bad_config),
        cmocka_unit_test(test_trust_header_caps),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
