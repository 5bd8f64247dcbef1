/* test_route.c - the API's route table (runner/route.c): literal paths and
 * captures, 404 / 405 (with the methods a path takes) / 400 on a bad id, a last
 * "*", a row for any method, and the real table (api_routes.c) has no two rows for one method and
 * path. */
#include "test_common.h"

#include <event2/http.h>
#include <string.h>

#include "runner/route.h"

static void h_none(const struct runner_route_call *c)
{
    (void)c;
}

static const struct runner_route table[] = {
    {EVHTTP_REQ_GET, "/v1/jobs", 1, h_none, "list jobs"},
    {EVHTTP_REQ_POST, "/v1/jobs", 2, h_none, "submit one"},
    {EVHTTP_REQ_GET, "/v1/jobs/{id}", 0, h_none, NULL},
    {EVHTTP_REQ_GET, "/v1/jobs/{id}/output", 0, h_none, NULL},
    {EVHTTP_REQ_POST, "/v1/tasks/{id}/ports/{port}", 0, h_none, NULL},
    {EVHTTP_REQ_GET, "/v1/tasks/{id}/files/*", 0, h_none, NULL},
    {RUNNER_ROUTE_ANY, "/v1/tasks/{id}/proxy/*", 0, h_none, NULL},
};
#define N (sizeof(table) / sizeof(table[0]))

static enum runner_route_result find(int method, const char *path, struct runner_route_call *c,
                                     const struct runner_route **hit, int *allowed, char *msg)
{
    memset(c, 0, sizeof(*c));
    return runner_route_find(table, N, method, path, c, hit, allowed, msg, 200);
}

static void test_match(void **state)
{
    struct runner_route_call c;
    const struct runner_route *hit;
    int allowed;
    char msg[200];

    (void)state;
    assert_int_equal(find(EVHTTP_REQ_POST, "/v1/jobs", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    assert_ptr_equal(hit, &table[1]);
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/jobs/j-1/output", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    assert_ptr_equal(hit, &table[3]);
    assert_string_equal(c.arg[0], "j-1");
    assert_int_equal(find(EVHTTP_REQ_POST, "/v1/tasks/t.1/ports/8080", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    assert_string_equal(c.arg[0], "t.1");
    assert_string_equal(c.arg[1], "8080");
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/tasks/t/files/a/b.txt", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    assert_string_equal(c.rest, "a/b.txt");
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/tasks/t/files/", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    assert_string_equal(c.rest, "");
    /* a row for every method */
    assert_int_equal(find(EVHTTP_REQ_DELETE, "/v1/tasks/t/proxy/80/x", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    assert_ptr_equal(hit, &table[6]);
    assert_string_equal(c.rest, "80/x");
    assert_int_equal(find(EVHTTP_REQ_PATCH, "/v1/tasks/t/proxy/", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_FOUND);
    runner_route_allowed(table, N, "/v1/tasks/t/proxy/1", msg, sizeof(msg));
    assert_string_equal(msg, "use GET, POST, HEAD, PUT, DELETE, OPTIONS, TRACE, CONNECT, PATCH");
}

static void test_refusals(void **state)
{
    struct runner_route_call c;
    const struct runner_route *hit;
    int allowed;
    char msg[200];

    (void)state;
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/nothing", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_NOT_FOUND);
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/jobs/j/frob", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_NOT_FOUND);
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/jobs/j/output/x", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_NOT_FOUND);
    assert_int_equal(find(EVHTTP_REQ_GET, "/v1/jobs/", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_BAD_ID);
    assert_string_equal(msg, "job id '': use 1-63 of [A-Za-z0-9._:-]");
    /* a bad id is a 400 whatever the method */
    assert_int_equal(find(EVHTTP_REQ_POST, "/v1/jobs/a$b", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_BAD_ID);
    assert_non_null(strstr(msg, "job id 'a$b'"));
    assert_int_equal(find(EVHTTP_REQ_POST, "/v1/tasks/x%2f/ports/1", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_BAD_ID);
    assert_non_null(strstr(msg, "task id 'x%2f'"));
    /* 405 with the methods the path takes */
    assert_int_equal(find(EVHTTP_REQ_PUT, "/v1/jobs", &c, &hit, &allowed, msg),
                     RUNNER_ROUTE_METHOD);
    assert_int_equal(allowed, EVHTTP_REQ_GET | EVHTTP_REQ_POST);
    runner_route_allowed(table, N, "/v1/jobs", msg, sizeof(msg));
    assert_string_equal(msg, "use GET to list jobs, POST to submit one");
    runner_route_allowed(table, N, "/v1/jobs/j/output", msg, sizeof(msg));
    assert_string_equal(msg, "use GET");
    {
        char longid[200];

        memset(longid, 'a', sizeof(longid));
        memcpy(longid, "/v1/jobs/", 9);
        longid[sizeof(longid) - 1] = '\0';
        assert_int_equal(find(EVHTTP_REQ_GET, longid, &c, &hit, &allowed, msg),
                         RUNNER_ROUTE_BAD_ID);
    }
}

/* Every row of the API's table is reachable: no earlier row of the same method
 * takes its path. */
static void test_api_table(void **state)
{
    (void)state;
    assert_true(runner_api_routes_n > 0);
    for (size_t i = 0; i < runner_api_routes_n; i++) {
        const struct runner_route *t = &runner_api_routes[i];
        struct runner_route_call c;
        const struct runner_route *hit;
        char path[128];
        char msg[200];
        int allowed;
        size_t o = 0;

        assert_non_null(t->handler);
        assert_true(t->pattern[0] == '/');
        /* the pattern with "j1" for each capture */
        for (const char *p = t->pattern; *p != '\0' && o + 4 < sizeof(path);) {
            if (*p == '{') {
                memcpy(path + o, "j1", 2);
                o += 2;
                p = strchr(p, '}') + 1;
            }
            else {
                path[o++] = *p++;
            }
        }
        path[o] = '\0';
        memset(&c, 0, sizeof(c));
        assert_int_equal(runner_route_find(runner_api_routes, runner_api_routes_n, t->method, path,
                                           &c, &hit, &allowed, msg, sizeof(msg)),
                         RUNNER_ROUTE_FOUND);
        if (hit != t) {
            fail_msg("row %zu (%s) is shadowed by row %zu (%s)", i, t->pattern,
                     (size_t)(hit - runner_api_routes), hit->pattern);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_api_table),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
