/* route.c - matching a request against the API's route table (route.h). Pure:
 * no I/O; the dispatch is api_http.c's. */
#include "runner/route.h"

#include <stdio.h>
#include <string.h>

#include "sbx/sbx_util.h"

static const char *const method_names[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
                                           "OPTIONS", "TRACE", "CONNECT", "PATCH"};

/* 1 when path fits pat (captures into c); *bad set when an {id} capture is not an
 * id, with msg saying which. */
static int match(const char *pat, const char *path, struct runner_route_call *c, int *bad,
                 char *msg, size_t mlen)
{
    const char *p = pat;
    const char *s = path;
    const char *lit = "";
    size_t lit_n = 0;
    int nargs = 0;

    *bad = 0;
    c->rest = NULL;
    while (*p != '\0') {
        const char *pe;
        const char *se;
        size_t pn;
        size_t sn;

        if (*p != '/' || *s != '/') {
            return 0;
        }
        p++;
        s++;
        pe = strchrnul(p, '/');
        se = strchrnul(s, '/');
        pn = (size_t)(pe - p);
        sn = (size_t)(se - s);
        if (pn == 1 && *p == '*' && *pe == '\0') {
            c->rest = s;
            return 1;
        }
        if (pn >= 2 && p[0] == '{' && p[pn - 1] == '}') {
            int is_id = pn == 4 && memcmp(p, "{id}", 4) == 0;
            size_t k = sn < RUNNER_ROUTE_ARG_MAX ? sn : RUNNER_ROUTE_ARG_MAX;

            if (nargs >= RUNNER_ROUTE_ARGS || (!is_id && sn > RUNNER_ROUTE_ARG_MAX)) {
                return 0;
            }
            memcpy(c->arg[nargs], s, k);
            c->arg[nargs][k] = '\0';
            if (is_id && !*bad &&
                (sn > RUNNER_ROUTE_ARG_MAX || !sbx_id_valid(c->arg[nargs], SBX_ID_NAME))) {
                *bad = 1;
                snprintf(msg, mlen, "%.*s id '%s': use 1-63 of [A-Za-z0-9._:-]",
                         (int)(lit_n > 1 && lit[lit_n - 1] == 's' ? lit_n - 1 : lit_n), lit,
                         c->arg[nargs]);
            }
            nargs++;
        }
        else {
            if (pn != sn || memcmp(p, s, pn) != 0) {
                return 0;
            }
            lit = p;
            lit_n = pn;
        }
        p = pe;
        s = se;
    }
    return *s == '\0';
}

enum runner_route_result runner_route_find(const struct runner_route *table, size_t n, int method,
                                           const char *path, struct runner_route_call *c,
                                           const struct runner_route **hit, int *allowed, char *msg,
                                           size_t mlen)
{
    int bad = 0;
    int any_bad = 0;
    char first[160] = "";

    *hit = NULL;
    *allowed = 0;
    for (size_t i = 0; i < n; i++) {
        struct runner_route_call tmp;
        int b;

        memset(&tmp, 0, sizeof(tmp));
        if (!match(table[i].pattern, path, &tmp, &b, msg, mlen)) {
            continue;
        }
        *allowed |= table[i].method;
        if (b && !any_bad) {
            any_bad = 1;
            snprintf(first, sizeof(first), "%s", msg);
        }
        if ((table[i].method & method) != 0 && *hit == NULL) {
            *hit = &table[i];
            bad = b;
            memcpy(c->arg, tmp.arg, sizeof(c->arg));
            c->rest = tmp.rest;
        }
    }
    if (*allowed == 0) {
        return RUNNER_ROUTE_NOT_FOUND;
    }
    if (any_bad) { /* a bad id is a 400 whatever the method */
        if (!bad) {
            snprintf(msg, mlen, "%s", first);
        }
        else {
            struct runner_route_call tmp;

            match((*hit)->pattern, path, &tmp, &bad, msg, mlen); /* this row's words */
        }
        return RUNNER_ROUTE_BAD_ID;
    }
    if (*hit == NULL) {
        return RUNNER_ROUTE_METHOD;
    }
    return RUNNER_ROUTE_FOUND;
}

void runner_route_allowed(const struct runner_route *table, size_t n, const char *path, char *out,
                          size_t len)
{
    size_t o = 0;
    int seen = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n && o < len; i++) {
        struct runner_route_call tmp;
        char msg[160];
        int b;

        if (!match(table[i].pattern, path, &tmp, &b, msg, sizeof(msg))) {
            continue;
        }
        for (size_t k = 0; k < sizeof(method_names) / sizeof(method_names[0]) && o < len; k++) {
            int m = 1 << k;

            if ((table[i].method & m) == 0 || (seen & m) != 0) {
                continue;
            }
            seen |= m;
            o += (size_t)snprintf(out + o, len - o, "%s%s%s%s", o ? ", " : "use ", method_names[k],
                                  table[i].doc ? " to " : "", table[i].doc ? table[i].doc : "");
        }
    }
}
