/* test_serve_status.c - the status page over the unix socket (issue 20, item
 * 7), in-process with the fake provider: `/` is the page itself (the local
 * client needs no login), the embedded script, style and icon are served,
 * wrong methods are 405, /login and /logout send the browser back to `/`, and
 * the API around it is unchanged. The TCP side (login, cookie) is driven in a
 * real browser by tests/web (ctest web_status_page). */
#include "test_common.h"

#include "runner_harness.h"

static void expect(const char *method, const char *path, long want, const char *has,
                   const char *lacks)
{
    long st = 0;
    char *body = rh_call(method, path, NULL, &st);

    if (st != want || (has != NULL && strstr(body, has) == NULL) ||
        (lacks != NULL && strstr(body, lacks) != NULL)) {
        fail_msg("%s %s: HTTP %ld (want %ld), body: %.400s", method, path, st, want, body);
    }
    free(body);
}

static void test_status_unix(void **state)
{
    (void)state;
    rh_start(NULL);
    expect("GET", "/", 200, "<script src=\"/ui/status.js\" defer></script>", "action=\"/login\"");
    expect("GET", "/", 200, "<table id=\"jobs\">", "action=\"/logout\"");
    expect("GET", "/ui/status.js", 200, "fetch(path", NULL);
    expect("GET", "/ui/status.js", 200, "textContent", "innerHTML");
    expect("GET", "/ui/status.css", 200, "table {", NULL);
    expect("GET", "/ui/icon.svg", 200, "<svg", NULL);
    expect("POST", "/", 405, "use GET", NULL);
    expect("POST", "/ui/status.js", 405, "use GET", NULL);
    expect("GET", "/login", 303, NULL, NULL);
    expect("POST", "/login", 303, NULL, NULL);
    expect("GET", "/logout", 405, "use POST", NULL);
    expect("POST", "/logout", 303, NULL, NULL);
    expect("GET", "/ui/other.js", 404, "no endpoint", NULL);
    expect("GET", "/index.html", 404, "no endpoint", NULL);
    json_decref(rh_json("GET", "/v1/queue", NULL, 200));
    json_decref(rh_json("GET", "/v1/jobs", NULL, 200));
    rh_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_unix),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
