/* test_runner_storeq.c - (added, issue 31) the store thread alone
 * (runner/storeq.c, storeq.h), without PostgreSQL: its lanes on a SQLite
 * store in a temporary directory (runner_sq_start_threads), a real libevent
 * loop, and requests from a client on loopback. A call runs on a lane's
 * thread and its done on the loop; a request not back within the deadline
 * is answered 503 by the loop, and its done runs once, later, only to free;
 * a call queued behind a stuck one; a read on its own lane, or behind a
 * write nobody waits for; the refusals at once (a stall known, a full
 * queue); the stop with calls in flight, queued and handed back. One box
 * (no thread) first. The arguments are counted (and ASan sees a leak or a
 * double free): every done frees its own, once. */
#include "test_common.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>

#include "config/config.h"
#include "runner/health.h"
#include "runner/state.h"
#include "runner/storeq.h"
#include "sbx/sbx_util.h"
#include "store/store.h"
#include "util/xalloc.h"

#define NREC 8
#define BULK 1024 /* storeq.c's SQ_MAX: a lane's queue is full */

/* One call as the test sees it: what its work and done saw, and what the
 * client got. Work writes under fx.mu; done and the client on the loop. */
struct rec {
    int hold;                  /* the work waits while fx.held */
    int started, ran, order;   /* under mu: began, ended, rank it began at */
    int off_loop, st_ok;       /* under mu */
    struct sbx_store *st;      /* under mu: the connection it ran on */
    int handed;                /* the server's handler handed it over */
    int dones, late, had_req;  /* its done */
    int done_on_loop;          /* its done ran on the loop's thread */
    int answered, status;      /* the client */
    char retry[16], body[300]; /* the client: Retry-After, the body */
    struct evhttp_connection *conn;
};

struct fx {
    char *dir, *path;
    struct sbx_config cfg;
    struct sbx_runner r;
    struct evhttp *http;
    int port;
    struct event *tick; /* so that each turn of the loop ends */
    pthread_t loop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int held, begun;
    int stopping; /* atomic: runner_sq_free is called (release_at_stop) */
    struct rec rec[NREC], bulk;
    int live; /* arguments not freed yet (the loop's thread alone) */
};

/* What a call carries: freed by its done, once. */
struct arg {
    struct fx *f;
    struct rec *rec;
    char *payload;
};

static struct arg *arg_new(struct fx *f, struct rec *rec)
{
    struct arg *a = xcalloc(1, sizeof(*a));

    a->f = f;
    a->rec = rec;
    a->payload = xstrdup("what the call owns");
    f->live++;
    return a;
}

static void work(struct sbx_runner *r, struct sbx_store *st, void *p)
{
    struct arg *a = p;
    struct fx *f = a->f;
    struct rec *rec = a->rec;
    sbx_error_t *err = NULL;
    int ok;

    (void)r;
    pthread_mutex_lock(&f->mu);
    rec->started++;
    rec->order = ++f->begun;
    pthread_cond_broadcast(&f->cv);
    while (rec->hold && f->held) {
        pthread_cond_wait(&f->cv, &f->mu);
    }
    pthread_mutex_unlock(&f->mu);
    ok = st != NULL && sbx_store_ping(st, &err) == 0;
    sbx_error_free(&err);
    pthread_mutex_lock(&f->mu);
    rec->ran++;
    rec->st = st;
    rec->st_ok = ok;
    rec->off_loop = !pthread_equal(pthread_self(), f->loop);
    pthread_mutex_unlock(&f->mu);
}

static void done(struct sbx_runner *r, struct evhttp_request *req, void *p, int late)
{
    struct arg *a = p;
    struct rec *rec = a->rec;

    (void)r;
    rec->dones++;
    rec->late = late;
    rec->had_req = req != NULL;
    rec->done_on_loop = pthread_equal(pthread_self(), a->f->loop);
    if (req != NULL) {
        struct evbuffer *b = evbuffer_new();

        evbuffer_add_printf(b, "ok %s", a->payload);
        evhttp_send_reply(req, 200, "OK", b);
        evbuffer_free(b);
    }
    a->f->live--;
    free(a->payload);
    free(a);
}

/* The server: GET /call/N or /read/N hands rec N over with its request. */
static void on_request(struct evhttp_request *req, void *p)
{
    struct fx *f = p;
    const char *uri = evhttp_request_get_uri(req);
    char kind[8];
    int n;

    if (sscanf(uri, "/%7[a-z]/%d", kind, &n) != 2 || n < 0 || n >= NREC) {
        evhttp_send_error(req, 404, NULL);
        return;
    }
    f->rec[n].handed = 1;
    if (strcmp(kind, "read") == 0) {
        runner_sq_read(&f->r, req, work, done, arg_new(f, &f->rec[n]));
    }
    else {
        runner_sq_call(&f->r, req, work, done, arg_new(f, &f->rec[n]));
    }
}

/* The client's answer (NULL: the connection failed). */
static void on_answer(struct evhttp_request *q, void *p)
{
    struct rec *rec = p;
    const char *ra;
    struct evbuffer *b;
    size_t n;

    rec->answered = 1;
    if (q == NULL || evhttp_request_get_response_code(q) == 0) {
        rec->status = -1;
        return;
    }
    rec->status = evhttp_request_get_response_code(q);
    ra = evhttp_find_header(evhttp_request_get_input_headers(q), "Retry-After");
    snprintf(rec->retry, sizeof(rec->retry), "%s", ra ? ra : "");
    b = evhttp_request_get_input_buffer(q);
    n = evbuffer_get_length(b);
    if (n >= sizeof(rec->body)) {
        n = sizeof(rec->body) - 1;
    }
    evbuffer_copyout(b, rec->body, n);
    rec->body[n] = '\0';
}

static void send_req(struct fx *f, const char *kind, int n)
{
    struct rec *rec = &f->rec[n];
    struct evhttp_request *q = evhttp_request_new(on_answer, rec);
    char uri[32];

    rec->conn = evhttp_connection_base_new(f->r.base, NULL, "127.0.0.1", (unsigned short)f->port);
    assert_non_null(rec->conn);
    evhttp_add_header(evhttp_request_get_output_headers(q), "Host", "127.0.0.1");
    snprintf(uri, sizeof(uri), "/%s/%d", kind, n);
    assert_int_equal(evhttp_make_request(rec->conn, q, EVHTTP_REQ_GET, uri), 0);
}

static int locked(struct fx *f, const int *v)
{
    int x;

    pthread_mutex_lock(&f->mu);
    x = *v;
    pthread_mutex_unlock(&f->mu);
    return x;
}

static void release(struct fx *f)
{
    pthread_mutex_lock(&f->mu);
    f->held = 0;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* Runs the loop until cond, 15 s at most. */
#define RUN_UNTIL(f, cond)                                                                         \
    do {                                                                                           \
        int64_t t0_ = sbx_mono_ms();                                                               \
        while (!(cond) && sbx_mono_ms() - t0_ < 15000) {                                           \
            event_base_loop((f)->r.base, EVLOOP_ONCE);                                             \
        }                                                                                          \
        assert_true(cond);                                                                         \
    } while (0)

/* Runs the loop for ms. */
static void run_for(struct fx *f, int ms)
{
    int64_t t0 = sbx_mono_ms();

    while (sbx_mono_ms() - t0 < ms) {
        event_base_loop(f->r.base, EVLOOP_ONCE);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static int setup(void **state)
{
    struct fx *f = xcalloc(1, sizeof(*f));
    struct evhttp_bound_socket *bs;
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);
    struct timeval tv = {0, 10 * 1000};
    sbx_error_t *err = NULL;

    f->dir = test_mkdtemp();
    assert_true(asprintf(&f->path, "%s/state.db", f->dir) > 0);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->loop = pthread_self();
    f->r.base = event_base_new();
    f->r.cfg = &f->cfg;
    f->r.store_path = f->path;
    f->r.store = sbx_store_open(f->path, &err); /* the loop's connection */
    assert_null(err);
    assert_non_null(f->r.store);
    f->http = evhttp_new(f->r.base);
    bs = evhttp_bind_socket_with_handle(f->http, "127.0.0.1", 0);
    assert_non_null(bs);
    assert_int_equal(getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &len), 0);
    f->port = ntohs(sin.sin_port);
    evhttp_set_gencb(f->http, on_request, f);
    f->tick = event_new(f->r.base, -1, EV_PERSIST, on_tick, NULL);
    event_add(f->tick, &tv);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    /* as the runner stops: the server first, its requests with it */
    if (f->http != NULL) {
        evhttp_free(f->http);
    }
    runner_sq_free(&f->r);
    for (int i = 0; i < NREC; i++) {
        if (f->rec[i].conn != NULL) {
            evhttp_connection_free(f->rec[i].conn);
        }
    }
    runner_storeprobe_free(f->r.storeprobe);
    assert_int_equal(f->live, 0); /* every argument freed */
    event_free(f->tick);
    sbx_store_close(f->r.store);
    event_base_free(f->r.base);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    test_rm_rf(f->dir);
    free(f->dir);
    free(f->path);
    free(f);
    return 0;
}

static void start(struct fx *f)
{
    sbx_error_t *err = NULL;

    assert_int_equal(runner_sq_start_threads(&f->r, &err), 0);
    assert_null(err);
    assert_true(runner_sq_threaded(&f->r));
}

static void counts(struct fx *f, unsigned long long calls, unsigned long long late,
                   unsigned long long refused, unsigned queued)
{
    unsigned long long c, l, x;
    unsigned q;

    runner_sq_counts(&f->r, &c, &l, &x, &q);
    assert_int_equal(c, calls);
    assert_int_equal(l, late);
    assert_int_equal(x, refused);
    assert_int_equal(q, queued);
}

/* A deadline's 503, as the client got it. */
static void assert_503(const struct rec *rec, const char *why)
{
    assert_int_equal(rec->status, 503);
    assert_string_equal(rec->retry, "2");
    assert_non_null(strstr(rec->body, "the database is unavailable, try again"));
    assert_non_null(strstr(rec->body, why));
}

/* One box (runner_sq_start without a fleet): no thread, the work at once
 * on the loop's connection, then done. */
static void test_one_box(void **state)
{
    struct fx *f = *state;
    sbx_error_t *err = NULL;

    assert_int_equal(runner_sq_start(&f->r, &err), 0);
    assert_null(f->r.sq);
    assert_false(runner_sq_threaded(&f->r));
    runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->rec[0]));
    runner_sq_read(&f->r, NULL, work, done, arg_new(f, &f->rec[1]));
    runner_sq_write(&f->r, work, done, arg_new(f, &f->rec[2]));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(f->rec[i].ran, 1);
        assert_int_equal(f->rec[i].dones, 1);
        assert_ptr_equal(f->rec[i].st, f->r.store);
        assert_false(f->rec[i].off_loop);
        assert_true(f->rec[i].st_ok);
        assert_int_equal(f->rec[i].late, 0);
    }
    assert_int_equal(f->live, 0);
    send_req(f, "call", 3);
    RUN_UNTIL(f, f->rec[3].answered);
    assert_int_equal(f->rec[3].status, 200);
    assert_string_equal(f->rec[3].body, "ok what the call owns");
    assert_true(f->rec[3].had_req);
    counts(f, 0, 0, 0, 0);
    runner_sq_free(&f->r); /* nothing to stop */
}

/* A call runs on a lane's thread, on the lane's own connection, and its
 * done on the loop: with its request, answered; without one, req NULL. */
static void test_reply(void **state)
{
    struct fx *f = *state;

    start(f);
    send_req(f, "call", 0);
    send_req(f, "read", 1);
    RUN_UNTIL(f, f->rec[0].answered && f->rec[1].answered);
    runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->rec[2]));
    runner_sq_write(&f->r, work, done, arg_new(f, &f->rec[3]));
    RUN_UNTIL(f, f->rec[2].dones == 1 && f->rec[3].dones == 1);
    for (int i = 0; i < 4; i++) {
        struct rec *rec = &f->rec[i];

        assert_int_equal(rec->ran, 1);
        assert_true(rec->off_loop);
        assert_true(rec->st_ok);
        assert_non_null(rec->st);
        assert_ptr_not_equal(rec->st, f->r.store);
        assert_int_equal(rec->dones, 1);
        assert_true(rec->done_on_loop);
        assert_int_equal(rec->late, 0);
        assert_int_equal(rec->had_req, i < 2);
    }
    assert_int_equal(f->rec[0].status, 200);
    assert_string_equal(f->rec[0].body, "ok what the call owns");
    assert_int_equal(f->rec[1].status, 200);
    /* two lanes: the read on its own connection; a call and a write on the other */
    assert_ptr_not_equal(f->rec[1].st, f->rec[0].st);
    assert_ptr_equal(f->rec[2].st, f->rec[0].st);
    assert_ptr_equal(f->rec[3].st, f->rec[0].st);
    counts(f, 4, 0, 0, 0);
}

/* A call slower than its deadline: answered 503 by the loop at the
 * deadline; its done runs once when the work ends, req NULL, late set. */
static void test_deadline(void **state)
{
    struct fx *f = *state;
    char why[80];
    int64_t t0;

    start(f);
    snprintf(why, sizeof(why), "the store did not answer within %d ms", sbx_store_pg_deadline_ms());
    f->held = 1;
    f->rec[0].hold = 1;
    t0 = sbx_mono_ms();
    send_req(f, "call", 0);
    RUN_UNTIL(f, f->rec[0].answered);
    assert_true(sbx_mono_ms() - t0 >= sbx_store_pg_deadline_ms() - 50);
    assert_503(&f->rec[0], why);
    assert_int_equal(locked(f, &f->rec[0].started), 1);
    assert_int_equal(locked(f, &f->rec[0].ran), 0);
    assert_int_equal(f->rec[0].dones, 0); /* its work still runs */
    counts(f, 1, 1, 0, 0);
    release(f);
    RUN_UNTIL(f, f->rec[0].dones == 1);
    assert_int_equal(f->rec[0].ran, 1);
    assert_int_equal(f->rec[0].late, 1);
    assert_false(f->rec[0].had_req);
    assert_true(f->rec[0].done_on_loop);
    run_for(f, 100);
    assert_int_equal(f->rec[0].dones, 1); /* once */
    counts(f, 1, 1, 0, 0);
}

/* Behind a stuck call: a request waits in the queue until its own deadline
 * (503), and its work, not begun, is skipped; a call without a request
 * waits and runs after; a read does not wait (its own lane). */
static void test_queued_behind(void **state)
{
    struct fx *f = *state;
    char why[80];

    start(f);
    snprintf(why, sizeof(why), "the store did not answer within %d ms", sbx_store_pg_deadline_ms());
    f->held = 1;
    f->rec[0].hold = 1;
    send_req(f, "call", 0);
    RUN_UNTIL(f, locked(f, &f->rec[0].started) == 1);
    send_req(f, "call", 1);
    send_req(f, "read", 2);
    RUN_UNTIL(f, f->rec[1].handed && f->rec[2].answered);
    assert_int_equal(f->rec[2].status, 200); /* the read did not wait */
    runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->rec[3]));
    counts(f, 4, 0, 0, 2);
    RUN_UNTIL(f, f->rec[0].answered && f->rec[1].answered);
    assert_503(&f->rec[0], why);
    assert_503(&f->rec[1], why);
    assert_int_equal(f->rec[1].dones, 0); /* still queued */
    assert_int_equal(f->rec[3].dones, 0);
    counts(f, 4, 2, 0, 2);
    release(f);
    RUN_UNTIL(f, f->rec[0].dones && f->rec[1].dones && f->rec[3].dones);
    assert_int_equal(f->rec[0].ran, 1);
    assert_int_equal(f->rec[0].late, 1);
    assert_int_equal(f->rec[1].started, 0); /* late before it began: skipped */
    assert_int_equal(f->rec[1].ran, 0);
    assert_int_equal(f->rec[1].late, 1);
    assert_false(f->rec[1].had_req);
    assert_int_equal(f->rec[3].ran, 1); /* nobody waited: it ran, after the stuck one */
    assert_true(f->rec[3].order > f->rec[0].order);
    assert_int_equal(f->rec[3].late, 0);
    assert_false(f->rec[3].had_req);
    run_for(f, 50);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(f->rec[i].dones, 1);
    }
    counts(f, 4, 2, 0, 0);
}

/* A read handed over while a write nobody waits for is not back goes after
 * that write, on its lane; once the write is back, reads have their own. */
static void test_read_after_write(void **state)
{
    struct fx *f = *state;

    start(f);
    f->held = 1;
    f->rec[0].hold = 1;
    runner_sq_write(&f->r, work, done, arg_new(f, &f->rec[0]));
    RUN_UNTIL(f, locked(f, &f->rec[0].started) == 1);
    send_req(f, "read", 1);
    RUN_UNTIL(f, f->rec[1].handed);
    run_for(f, 100);
    assert_int_equal(locked(f, &f->rec[1].started), 0); /* behind the write */
    assert_false(f->rec[1].answered);
    release(f);
    RUN_UNTIL(f, f->rec[1].answered);
    assert_int_equal(f->rec[1].status, 200);
    assert_int_equal(f->rec[0].dones, 1);
    assert_int_equal(f->rec[0].late, 0);
    assert_ptr_equal(f->rec[1].st, f->rec[0].st);
    assert_true(f->rec[1].order > f->rec[0].order);
    send_req(f, "read", 2);
    RUN_UNTIL(f, f->rec[2].answered);
    assert_int_equal(f->rec[2].status, 200);
    assert_ptr_not_equal(f->rec[2].st, f->rec[0].st);
    counts(f, 3, 0, 0, 0);
}

/* Refused at once, without reaching the thread: a request while the store
 * probe knows of a stall, and one when its lane has SQ_MAX calls waiting;
 * done runs at once (req NULL, late). A call without a request is queued
 * all the same. */
static void test_refused(void **state)
{
    struct fx *f = *state;
    sbx_error_t *err = NULL;
    char why[120];

    f->r.storeprobe = runner_storeprobe_start(&f->cfg, f->path, f->r.store, 60000, &err);
    assert_null(err);
    assert_non_null(f->r.storeprobe);
    start(f);
    sbx_store_gate_set(runner_store_gate(f->r.storeprobe), 1); /* a call passed its deadline */
    send_req(f, "call", 0);
    RUN_UNTIL(f, f->rec[0].answered);
    snprintf(why, sizeof(why),
             "a call passed its deadline (%d ms) and the store has not answered since",
             sbx_store_pg_deadline_ms());
    assert_503(&f->rec[0], why);
    assert_int_equal(f->rec[0].dones, 1);
    assert_int_equal(f->rec[0].late, 1);
    assert_false(f->rec[0].had_req);
    assert_int_equal(f->rec[0].started, 0);
    runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->rec[1]));
    RUN_UNTIL(f, f->rec[1].dones == 1);
    assert_int_equal(f->rec[1].ran, 1);
    assert_int_equal(f->rec[1].late, 0);
    counts(f, 1, 0, 1, 0);
    sbx_store_gate_set(runner_store_gate(f->r.storeprobe), 0);

    /* a full lane */
    f->held = 1;
    f->rec[2].hold = 1;
    runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->rec[2]));
    RUN_UNTIL(f, locked(f, &f->rec[2].started) == 1);
    for (int i = 0; i < BULK; i++) {
        runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->bulk));
    }
    counts(f, 2 + BULK, 0, 1, BULK);
    send_req(f, "call", 3);
    send_req(f, "read", 4);
    RUN_UNTIL(f, f->rec[3].answered && f->rec[4].answered);
    snprintf(why, sizeof(why), "%u calls wait for the store already", BULK);
    assert_503(&f->rec[3], why);
    assert_int_equal(f->rec[3].dones, 1);
    assert_int_equal(f->rec[3].late, 1);
    assert_int_equal(f->rec[4].status, 200); /* the read lane is not full */
    counts(f, 3 + BULK, 0, 2, BULK);
    release(f);
    RUN_UNTIL(f, f->bulk.dones == BULK && f->rec[2].dones == 1);
    assert_int_equal(locked(f, &f->bulk.ran), BULK);
    assert_int_equal(f->bulk.late, 0);
    counts(f, 3 + BULK, 0, 2, 0);
}

/* Releases the held work once runner_sq_free has begun to stop the lanes:
 * 50 ms after the test's own flag says it is called (r->sq is storeq.c's,
 * written without atomics: not read here). */
static void *release_at_stop(void *p)
{
    struct fx *f = p;
    struct timespec ts = {0, 2 * 1000 * 1000};

    while (!__atomic_load_n(&f->stopping, __ATOMIC_ACQUIRE)) {
        nanosleep(&ts, NULL);
    }
    ts.tv_nsec = 50 * 1000 * 1000;
    nanosleep(&ts, NULL);
    release(f);
    return NULL;
}

/* The stop with calls everywhere (after evhttp_free, as the runner stops):
 * the call in flight ends, then every call's done runs once with late set:
 * one handed back but not seen by the loop, ones never begun (their work
 * skipped, but a write nobody waits for runs now, on the loop's thread),
 * their requests and deadlines gone. */
static void test_free_in_flight(void **state)
{
    struct fx *f = *state;
    pthread_t th;
    int64_t t0;

    start(f);
    f->held = 1;
    f->rec[0].hold = 1;
    send_req(f, "call", 0);
    RUN_UNTIL(f, locked(f, &f->rec[0].started) == 1);
    send_req(f, "call", 1);
    RUN_UNTIL(f, f->rec[1].handed);
    runner_sq_call(&f->r, NULL, work, done, arg_new(f, &f->rec[2]));
    runner_sq_read(&f->r, NULL, work, done, arg_new(f, &f->rec[4])); /* lane 1 */
    runner_sq_write(&f->r, work, done, arg_new(f, &f->rec[3]));
    t0 = sbx_mono_ms();
    while (locked(f, &f->rec[4].ran) == 0 && sbx_mono_ms() - t0 < 15000) {
        struct timespec ts = {0, 2 * 1000 * 1000};

        nanosleep(&ts, NULL); /* not the loop: it stays on the done list */
    }
    assert_int_equal(locked(f, &f->rec[4].ran), 1);
    counts(f, 5, 0, 0, 3);
    evhttp_free(f->http);
    f->http = NULL;
    assert_int_equal(pthread_create(&th, NULL, release_at_stop, f), 0);
    __atomic_store_n(&f->stopping, 1, __ATOMIC_RELEASE);
    runner_sq_free(&f->r);
    pthread_join(th, NULL);
    assert_null(f->r.sq);
    assert_false(runner_sq_threaded(&f->r));
    for (int i = 0; i < 5; i++) {
        assert_int_equal(f->rec[i].dones, 1);
        assert_int_equal(f->rec[i].late, 1);
        assert_false(f->rec[i].had_req);
        assert_true(f->rec[i].done_on_loop);
    }
    assert_int_equal(f->rec[0].ran, 1); /* in flight: ended */
    assert_int_equal(f->rec[1].started, 0);
    assert_int_equal(f->rec[2].started, 0);
    assert_int_equal(f->rec[3].ran, 1); /* the write, at the stop */
    assert_false(f->rec[3].off_loop);
    assert_ptr_equal(f->rec[3].st, f->rec[0].st); /* lane 0's connection */
    assert_true(f->rec[3].st_ok);
    assert_int_equal(f->rec[4].ran, 1);
    assert_int_equal(f->live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_box, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_behind, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_after_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_in_flight, setup, teardown),
    };

    evthread_use_pthreads();   /* the lanes wake the loop (event_active) */
    sbx_store_pg_limits(1, 0); /* the deadline: 1 + 1000 ms */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
