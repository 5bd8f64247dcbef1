/* storeq.c - the store thread of a fleet box (storeq.h; docs/runner.md, "A
 * slow or silent database").
 *
 * Ownership: a call belongs to the loop until runner_sq_call queues it, to
 * the queue and the thread until the thread puts it on the done list, and to
 * the loop again from there. The loop alone touches its request and its
 * timer; the thread alone runs its work. At the deadline the loop answers the
 * request 503 and forgets it (req NULL, late 1) but leaves the call where it
 * is: the thread skips the work of a late call it has not begun, finishes one
 * it has, and hands it back like any other; done then only frees. A client
 * gone meanwhile costs nothing: libevent keeps a request whose connection
 * closed until it is answered, and the answer frees it. */
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdlib.h>

#include "runner/state.h"
#include "runner/api_int.h"
#include "runner/health.h"
#include "runner/storepool.h"
#include "runner/storeq.h"
#include "util/log.h"
#include "util/xalloc.h"

/* Calls waiting for the thread at most: past it a request is answered 503
 * at once (a database slower than the API's rate). */
#define SQ_MAX 1024

struct sq_call {
    runner_sq_work work;
    runner_sq_done done;
    void *arg;
    struct evhttp_request *req; /* loop only; NULL once answered */
    struct event *timer;        /* loop only: the request's deadline */
    struct runner_sq *sq;
    int late;    /* under sq->mu: answered at the deadline; work not begun is skipped */
    int durable; /* a write nobody waits for: run at the stop too */
    struct sq_call *next;
};

struct runner_sq {
    struct sbx_runner *r;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sq_call *head, **tail; /* waiting for the thread */
    struct sq_call *done, **done_tail;
    unsigned queued;
    int stop;
    struct event *wake;                      /* the loop: calls handed back */
    struct sbx_store *st;                    /* the thread's connection */
    unsigned long long calls, late, refused; /* loop only */
};

int runner_reply_unavailable(struct evhttp_request *req, int down, const sbx_error_t *err)
{
    if (!down) {
        return 0;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "2");
    runner_reply_error(req, 503, "the database is unavailable, try again: %s",
                       err ? sbx_error_msg(err) : "no connection");
    return 1;
}

static void *sq_main(void *arg)
{
    struct runner_sq *sq = arg;

    pthread_mutex_lock(&sq->mu);
    for (;;) {
        struct sq_call *c;
        int late;

        while (sq->head == NULL && !sq->stop) {
            pthread_cond_wait(&sq->cv, &sq->mu);
        }
        if (sq->stop) {
            break;
        }
        c = sq->head;
        sq->head = c->next;
        if (sq->head == NULL) {
            sq->tail = &sq->head;
        }
        sq->queued--;
        late = c->late;
        pthread_mutex_unlock(&sq->mu);
        if (!late) {
            c->work(sq->r, sq->st, c->arg);
        }
        pthread_mutex_lock(&sq->mu);
        c->next = NULL;
        *sq->done_tail = c;
        sq->done_tail = &c->next;
        pthread_mutex_unlock(&sq->mu);
        event_active(sq->wake, EV_READ, 0); /* thread-safe (evthread_use_pthreads) */
        pthread_mutex_lock(&sq->mu);
    }
    pthread_mutex_unlock(&sq->mu);
    return NULL;
}

static void call_end(struct sbx_runner *r, struct sq_call *c)
{
    if (c->timer != NULL) {
        event_free(c->timer);
    }
    c->done(r, c->req, c->arg, c->req == NULL && c->late);
    free(c);
}

/* The loop: the calls the thread handed back. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
    struct runner_sq *sq = arg;
    struct sq_call *c;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&sq->mu);
    c = sq->done;
    sq->done = NULL;
    sq->done_tail = &sq->done;
    pthread_mutex_unlock(&sq->mu);
    while (c != NULL) {
        struct sq_call *next = c->next;

        call_end(sq->r, c);
        c = next;
    }
}

static void reply_late(struct sbx_runner *r, struct evhttp_request *req, const char *why)
{
    (void)r;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "2");
    runner_reply_error(req, 503, "the database is unavailable, try again: %s", why);
}

/* The loop: a request's deadline passed before its call came back. */
static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct sq_call *c = arg;
    struct runner_sq *sq = c->sq;
    char why[160];

    (void)fd;
    (void)what;
    if (c->req == NULL) {
        return;
    }
    pthread_mutex_lock(&sq->mu);
    c->late = 1;
    pthread_mutex_unlock(&sq->mu);
    snprintf(why, sizeof(why), "the store did not answer within %d ms", sbx_store_pg_deadline_ms());
    sbx_warn("runner: %s %s: %s; answered 503",
             evhttp_request_get_command(c->req) == EVHTTP_REQ_POST ? "POST" : "GET",
             evhttp_request_get_uri(c->req), why);
    reply_late(sq->r, c->req, why);
    c->req = NULL;
    sq->late++;
}

static void sq_post(struct sbx_runner *r, struct evhttp_request *req, runner_sq_work work,
                    runner_sq_done done, void *arg, int durable)
{
    struct runner_sq *sq = r->sq;
    struct sq_call *c;

    if (sq == NULL) { /* one box: the local file, at once */
        work(r, r->store, arg);
        done(r, req, arg, 0);
        return;
    }
    if (req != NULL && (runner_store_stalled(r->storeprobe) || sq->queued >= SQ_MAX)) {
        char why[200];

        if (sq->queued >= SQ_MAX) {
            snprintf(why, sizeof(why), "%u calls wait for the store already", sq->queued);
        }
        else {
            snprintf(why, sizeof(why),
                     "a call passed its deadline (%d ms) and the store has not answered since",
                     sbx_store_pg_deadline_ms());
        }
        sq->refused++;
        reply_late(r, req, why);
        done(r, NULL, arg, 1);
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->work = work;
    c->done = done;
    c->arg = arg;
    c->req = req;
    c->sq = sq;
    c->durable = durable;
    if (req != NULL) {
        int ms = sbx_store_pg_deadline_ms();
        struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

        c->timer = evtimer_new(r->base, on_deadline, c);
        evtimer_add(c->timer, &tv);
    }
    sq->calls++;
    pthread_mutex_lock(&sq->mu);
    *sq->tail = c;
    sq->tail = &c->next;
    sq->queued++;
    pthread_cond_signal(&sq->cv);
    pthread_mutex_unlock(&sq->mu);
}

void runner_sq_call(struct sbx_runner *r, struct evhttp_request *req, runner_sq_work work,
                    runner_sq_done done, void *arg)
{
    sq_post(r, req, work, done, arg, 0);
}

void runner_sq_write(struct sbx_runner *r, runner_sq_work work, runner_sq_done done, void *arg)
{
    sq_post(r, NULL, work, done, arg, 1);
}

int runner_sq_threaded(const struct sbx_runner *r)
{
    return r->sq != NULL;
}

void runner_sq_counts(const struct sbx_runner *r, unsigned long long *calls,
                      unsigned long long *late, unsigned long long *refused, unsigned *queued)
{
    struct runner_sq *sq = r->sq;

    *calls = *late = *refused = 0;
    *queued = 0;
    if (sq == NULL) {
        return;
    }
    *calls = sq->calls;
    *late = sq->late;
    *refused = sq->refused;
    pthread_mutex_lock(&sq->mu);
    *queued = sq->queued;
    pthread_mutex_unlock(&sq->mu);
}

int runner_sq_start(struct sbx_runner *r, sbx_error_t **err)
{
    struct runner_sq *sq;

    if (r->fleet == NULL) {
        return 0;
    }
    sq = xcalloc(1, sizeof(*sq));
    sq->r = r;
    sq->tail = &sq->head;
    sq->done_tail = &sq->done;
    pthread_mutex_init(&sq->mu, NULL);
    pthread_cond_init(&sq->cv, NULL);
    sq->st = runner_store_get(r, err);
    if (sq->st == NULL) {
        goto fail;
    }
    /* the probe's gate: a call past its deadline makes the others fail at
     * once until the database answers in time again */
    sbx_store_set_gate(sq->st, runner_store_gate(r->storeprobe));
    sq->wake = event_new(r->base, -1, EV_PERSIST | EV_READ, on_done, sq);
    if (sq->wake == NULL) {
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot create the store thread's event");
        goto fail;
    }
    if (pthread_create(&sq->th, NULL, sq_main, sq) != 0) {
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start the store thread");
        goto fail;
    }
    r->sq = sq;
    return 0;
fail:
    if (sq->wake != NULL) {
        event_free(sq->wake);
    }
    sbx_store_close(sq->st);
    pthread_mutex_destroy(&sq->mu);
    pthread_cond_destroy(&sq->cv);
    free(sq);
    return -1;
}

void runner_sq_free(struct sbx_runner *r)
{
    struct runner_sq *sq = r->sq;
    struct sq_call *c;

    if (sq == NULL) {
        return;
    }
    r->sq = NULL; /* a call a done makes now runs at once (a withdrawal) */
    pthread_mutex_lock(&sq->mu);
    sq->stop = 1;
    pthread_cond_signal(&sq->cv);
    pthread_mutex_unlock(&sq->mu);
    pthread_join(sq->th, NULL); /* the call in flight ends within its deadline */
    /* what is left: handed back, or never begun; their requests went with
     * evhttp_free. A write never begun runs now, on the thread's connection
     * (the thread is gone): a job's end is not lost to a stop. */
    for (int list = 0; list < 2; list++) {
        c = list == 0 ? sq->done : sq->head;
        while (c != NULL) {
            struct sq_call *next = c->next;

            if (list == 1 && c->durable) {
                c->work(r, sq->st, c->arg);
            }
            c->req = NULL;
            c->late = 1;
            call_end(r, c);
            c = next;
        }
    }
    event_free(sq->wake);
    sbx_store_close(sq->st);
    pthread_mutex_destroy(&sq->mu);
    pthread_cond_destroy(&sq->cv);
    free(sq);
}
