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
 * closed until it is answered, and the answer frees it.
 *
 * (added) Two lanes, each a thread with its own connection: lane 0 runs every
 * write and every call that must follow one, in the order handed over (a
 * claim, a grant, the beat, a registration, a submit, a job's end); lane 1
 * runs reads nobody's write waits on (runner_sq_read: a record, a page, the
 * box that holds a job or task, the fleet's view), so that a GET does not
 * queue behind the submits, claims and grants. A read handed over while a
 * write nobody waits for (runner_sq_write) is still queued or running goes
 * to lane 0, behind it: what the loop wrote it reads back. */
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

#define SQ_LANES 2 /* 0: writes and what follows them, in order; 1: reads */

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

struct sq_lane {
    struct runner_sq *sq;
    pthread_t th;
    int started;
    pthread_cond_t cv;
    struct sq_call *head, **tail; /* waiting for the lane's thread */
    unsigned queued;
    struct sbx_store *st; /* the lane's connection */
};

struct runner_sq {
    struct sbx_runner *r;
    pthread_mutex_t mu;
    struct sq_lane lane[SQ_LANES];
    struct sq_call *done, **done_tail;
    int stop;
    unsigned unawaited;                      /* loop only: writes nobody waits for, not back */
    struct event *wake;                      /* the loop: calls handed back */
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
    struct sq_lane *l = arg;
    struct runner_sq *sq = l->sq;

    pthread_mutex_lock(&sq->mu);
    for (;;) {
        struct sq_call *c;
        int late;

        while (l->head == NULL && !sq->stop) {
            pthread_cond_wait(&l->cv, &sq->mu);
        }
        if (sq->stop) {
            break;
        }
        c = l->head;
        l->head = c->next;
        if (l->head == NULL) {
            l->tail = &l->head;
        }
        l->queued--;
        late = c->late;
        pthread_mutex_unlock(&sq->mu);
        if (!late) {
            c->work(sq->r, l->st, c->arg);
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
    if (c->durable && c->sq->unawaited > 0) {
        c->sq->unawaited--;
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
                    runner_sq_done done, void *arg, int durable, int read)
{
    struct runner_sq *sq = r->sq;
    struct sq_lane *l;
    struct sq_call *c;
    unsigned queued;

    if (sq == NULL) { /* one box: the local file, at once */
        work(r, r->store, arg);
        done(r, req, arg, 0);
        return;
    }
    /* a read behind a write nobody waits for: after it, on its lane */
    l = &sq->lane[read && sq->unawaited == 0 ? 1 : 0];
    pthread_mutex_lock(&sq->mu);
    queued = l->queued;
    pthread_mutex_unlock(&sq->mu);
    if (req != NULL && (runner_store_stalled(r->storeprobe) || queued >= SQ_MAX)) {
        char why[200];

        if (queued >= SQ_MAX) {
            snprintf(why, sizeof(why), "%u calls wait for the store already", queued);
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
    sq->unawaited += durable;
    pthread_mutex_lock(&sq->mu);
    *l->tail = c;
    l->tail = &c->next;
    l->queued++;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&sq->mu);
}

void runner_sq_call(struct sbx_runner *r, struct evhttp_request *req, runner_sq_work work,
                    runner_sq_done done, void *arg)
{
    sq_post(r, req, work, done, arg, 0, 0);
}

void runner_sq_read(struct sbx_runner *r, struct evhttp_request *req, runner_sq_work work,
                    runner_sq_done done, void *arg)
{
    sq_post(r, req, work, done, arg, 0, 1);
}

void runner_sq_write(struct sbx_runner *r, runner_sq_work work, runner_sq_done done, void *arg)
{
    sq_post(r, NULL, work, done, arg, 1, 0);
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
    for (int i = 0; i < SQ_LANES; i++) {
        *queued += sq->lane[i].queued;
    }
    pthread_mutex_unlock(&sq->mu);
}

static void sq_destroy(struct runner_sq *sq)
{
    for (int i = 0; i < SQ_LANES; i++) {
        sbx_store_close(sq->lane[i].st);
        pthread_cond_destroy(&sq->lane[i].cv);
    }
    if (sq->wake != NULL) {
        event_free(sq->wake);
    }
    pthread_mutex_destroy(&sq->mu);
    free(sq);
}

/* Stops the lanes' threads started so far (the call in flight of each ends
 * within its deadline). */
static void sq_join(struct runner_sq *sq)
{
    pthread_mutex_lock(&sq->mu);
    sq->stop = 1;
    for (int i = 0; i < SQ_LANES; i++) {
        pthread_cond_signal(&sq->lane[i].cv);
    }
    pthread_mutex_unlock(&sq->mu);
    for (int i = 0; i < SQ_LANES; i++) {
        if (sq->lane[i].started) {
            pthread_join(sq->lane[i].th, NULL);
            sq->lane[i].started = 0;
        }
    }
}

int runner_sq_start(struct sbx_runner *r, sbx_error_t **err)
{
    if (r->fleet == NULL) {
        return 0;
    }
    return runner_sq_start_threads(r, err);
}

int runner_sq_start_threads(struct sbx_runner *r, sbx_error_t **err)
{
    struct runner_sq *sq = xcalloc(1, sizeof(*sq));

    sq->r = r;
    sq->done_tail = &sq->done;
    pthread_mutex_init(&sq->mu, NULL);
    for (int i = 0; i < SQ_LANES; i++) {
        sq->lane[i].sq = sq;
        sq->lane[i].tail = &sq->lane[i].head;
        pthread_cond_init(&sq->lane[i].cv, NULL);
    }
    for (int i = 0; i < SQ_LANES; i++) {
        struct sq_lane *l = &sq->lane[i];

        l->st = runner_store_get(r, err);
        if (l->st == NULL) {
            goto fail;
        }
        /* the probe's gate: a call past its deadline makes the others fail
         * at once until the database answers in time again */
        sbx_store_set_gate(l->st, runner_store_gate(r->storeprobe));
    }
    sq->wake = event_new(r->base, -1, EV_PERSIST | EV_READ, on_done, sq);
    if (sq->wake == NULL) {
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot create the store thread's event");
        goto fail;
    }
    for (int i = 0; i < SQ_LANES; i++) {
        if (pthread_create(&sq->lane[i].th, NULL, sq_main, &sq->lane[i]) != 0) {
            sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start the store thread");
            goto fail;
        }
        sq->lane[i].started = 1;
    }
    r->sq = sq;
    return 0;
fail:
    sq_join(sq);
    sq_destroy(sq);
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
    sq_join(sq);  /* the call in flight of each lane ends within its deadline */
    /* what is left: handed back, or never begun; their requests went with
     * evhttp_free. A write never begun runs now, on lane 0's connection (the
     * threads are gone): a job's end is not lost to a stop. */
    for (int list = 0; list <= SQ_LANES; list++) {
        c = list == 0 ? sq->done : sq->lane[list - 1].head;
        while (c != NULL) {
            struct sq_call *next = c->next;

            if (list > 0 && c->durable) {
                c->work(r, sq->lane[0].st, c->arg);
            }
            c->req = NULL;
            c->late = 1;
            call_end(r, c);
            c = next;
        }
    }
    sq_destroy(sq);
}
