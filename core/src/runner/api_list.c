/* api_list.c - GET /v1/jobs (filters and paging) (docs/api.md). Loop thread
 * only. (changed) GET /healthz and /readyz are in api_http.c. */
#include <errno.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "config/config.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/storeq.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/xalloc.h"

#define LIST_DEFAULT 50
#define LIST_MAX 500
#define CURSOR_PREFIX "c1."

static const char *const list_params[] = {"state", "pool", "since", "limit", "cursor", NULL};

/* One known parameter k=v into f; 0, or -1 with the one-line reason in msg. */
static int parse_list_param(const char *k, const char *v, struct sbx_job_filter *f, char *msg,
                            size_t len)
{
    char *end = NULL;

    if (strcmp(k, "state") == 0) {
        int s = -1;

        for (int st = 0; st <= SBX_JOB_INTERRUPTED; st++) {
            if (strcmp(v, sbx_job_state_name((enum sbx_job_state)st)) == 0) {
                s = st;
            }
        }
        if (s < 0) {
            snprintf(msg, len,
                     "query 'state' '%.40s': use queued, running, finished, cancelled or "
                     "interrupted",
                     v);
            return -1;
        }
        f->state = s;
    }
    else if (strcmp(k, "pool") == 0) {
        if (sbx_pool_parse(v) < 0) {
            snprintf(msg, len, "query 'pool' '%.40s': use ci or agent", v);
            return -1;
        }
        f->pool = sbx_pool_name((enum sbx_pool)sbx_pool_parse(v));
    }
    else if (strcmp(k, "since") == 0) {
        double s;

        errno = 0;
        s = strtod(v, &end);
        if (v[0] == '\0' || *end != '\0' || errno != 0 || !isfinite(s) || s < 0 || s > 1e11) {
            snprintf(msg, len, "query 'since' '%.40s': use Unix seconds (e.g. 1793491200)", v);
            return -1;
        }
        f->since = (int64_t)llround(s * 1000.0);
    }
    else if (strcmp(k, "limit") == 0) {
        long n;

        errno = 0;
        n = strtol(v, &end, 10);
        if (v[0] == '\0' || *end != '\0' || errno != 0 || n < 1 || n > LIST_MAX) {
            snprintf(msg, len, "query 'limit' '%.40s': use 1-%d", v, LIST_MAX);
            return -1;
        }
        f->limit = (size_t)n;
    }
    else { /* cursor */
        unsigned long long seq;

        errno = 0;
        if (strncmp(v, CURSOR_PREFIX, strlen(CURSOR_PREFIX)) != 0 ||
            strspn(v + strlen(CURSOR_PREFIX), "0123456789abcdef") !=
                strlen(v + strlen(CURSOR_PREFIX)) ||
            strlen(v) > strlen(CURSOR_PREFIX) + 16 ||
            (seq = strtoull(v + strlen(CURSOR_PREFIX), &end, 16)) == 0 || errno != 0 ||
            seq > INT64_MAX) {
            snprintf(msg, len, "query 'cursor': not the next_cursor of an earlier page");
            return -1;
        }
        f->before_seq = (int64_t)seq;
    }
    return 0;
}

/* Parses the query into f; 0, or -1 with the one-line reason in msg. */
static int parse_list_query(const char *query, struct sbx_job_filter *f, char *msg, size_t len)
{
    struct evkeyvalq q;
    struct evkeyval *kv;
    int rc = -1;

    f->state = -1;
    f->limit = LIST_DEFAULT;
    if (query == NULL || query[0] == '\0') {
        return 0;
    }
    if (evhttp_parse_query_str(query, &q) < 0) {
        snprintf(msg, len, "the query string is malformed");
        return -1;
    }
    TAILQ_FOREACH(kv, &q, next)
    {
        const char *k = kv->key;
        size_t i = 0;

        while (list_params[i] != NULL && strcmp(list_params[i], k) != 0) {
            i++;
        }
        if (list_params[i] == NULL) {
            snprintf(msg, len,
                     "unknown query parameter '%.40s' (allowed: state, pool, since, limit, "
                     "cursor)",
                     k);
            goto out;
        }
        for (struct evkeyval *o = TAILQ_FIRST(&q); o != kv; o = TAILQ_NEXT(o, next)) {
            if (strcmp(o->key, k) == 0) {
                snprintf(msg, len, "query parameter '%s' is given twice", k);
                goto out;
            }
        }
        if (parse_list_param(k, kv->value, f, msg, len) < 0) {
            goto out;
        }
    }
    rc = 0;
out:
    evhttp_clear_headers(&q);
    return rc;
}

/* (changed) GET /v1/jobs: the page is read by the store thread on a fleet box
 * (storeq.h). */
struct page_call {
    struct sbx_job_filter f;
    char client[64];
    struct sbx_job_rec *recs;
    size_t n;
    sbx_error_t *err;
    int rc, down;
};

static void page_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct page_call *c = arg;

    (void)r;
    c->rc = sbx_store_job_page(st, &c->f, &c->recs, &c->n, &c->err);
    c->down = c->rc < 0 && sbx_store_down(st);
}

static void page_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct page_call *c = arg;
    json_t *jobs;
    json_t *next = json_null();

    (void)r;
    if (late) {
        goto out;
    }
    if (c->rc < 0) {
        if (!runner_reply_unavailable(req, c->down, c->err)) {
            runner_reply_error(req, 500, "%s", sbx_error_msg(c->err));
        }
        goto out;
    }
    jobs = json_array();
    for (size_t i = 0; i < c->n && i + 1 < c->f.limit; i++) {
        json_array_append_new(jobs, sbx_job_rec_to_json(&c->recs[i]));
    }
    if (c->n == c->f.limit) {
        char cur[48];

        snprintf(cur, sizeof(cur), CURSOR_PREFIX "%" PRIx64, (uint64_t)c->recs[c->n - 2].seq);
        next = json_string(cur);
    }
    runner_reply_json(req, 200, json_pack("{s:o, s:o}", "jobs", jobs, "next_cursor", next));
out:
    if (c->rc == 0) {
        sbx_job_rec_free_array(c->recs, c->n);
    }
    sbx_error_free(&c->err);
    free(c);
}

void runner_handle_jobs_list(struct sbx_runner *r, struct evhttp_request *req,
                             const struct runner_client *who)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct page_call *c;
    char msg[256];

    if ((who->scopes & (SBX_SCOPE_READ_OWN | SBX_SCOPE_READ_ALL)) == 0) {
        runner_reply_error(req, 403, "client '%s' lacks scope 'read-own'", who->name);
        return;
    }
    c = xcalloc(1, sizeof(*c));
    if (parse_list_query(query, &c->f, msg, sizeof(msg)) < 0) {
        free(c);
        runner_reply_error(req, 400, "%s", msg);
        return;
    }
    if ((who->scopes & SBX_SCOPE_READ_ALL) == 0) {
        snprintf(c->client, sizeof(c->client), "%s", who->name);
        c->f.client = c->client; /* read-own: its own jobs only */
    }
    c->f.limit++; /* one more tells whether a next page exists */
    runner_sq_read(r, req, page_work, page_done, c);
}
