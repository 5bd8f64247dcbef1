/* jobstate.c - the two state machines of the runner: a job's and a task's
 * (jobstate.h). A move reads the state under r->mu, checks the event against
 * the table (the job's rows are the store's, store/states.h), issues the
 * store write outside the lock, then sets the state under the lock ((added,
 * issue 31) a deferred end's write goes to the store thread after that). A job
 * is moved by one thread at a time: the loop while it is queued, its worker
 * once it runs; a move that finds the state changed meanwhile is refused. */
#include "runner/jobstate.h"

#include <errno.h>
#include <string.h>

#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/dbwait.h"
#include "runner/jobs.h"
#include "runner/output.h"
#include "runner/rtask.h"
#include "store/states.h"
#include "util/log.h"

/* ---- jobs ---- */

struct job_row {
    const char *name;
    int step; /* enum sbx_job_step it writes, -1: none (a new record) */
    enum sbx_job_state to;
};

static const struct job_row job_rows[RJOB_EVENTS] = {
    [RJOB_QUEUED] = {"queued", -1, SBX_JOB_QUEUED},
    [RJOB_ADOPTED] = {"adopted", -1, SBX_JOB_RUNNING},
    [RJOB_GRANTED] = {"granted", SBX_JOB_STEP_GRANTED, SBX_JOB_RUNNING},
    [RJOB_READY] = {"ready", SBX_JOB_STEP_READY, SBX_JOB_RUNNING},
    [RJOB_FINISHED] = {"finished", SBX_JOB_STEP_END, SBX_JOB_FINISHED},
    [RJOB_CANCELLED] = {"cancelled", SBX_JOB_STEP_END, SBX_JOB_CANCELLED},
    [RJOB_INTERRUPTED] = {"interrupted", SBX_JOB_STEP_END, SBX_JOB_INTERRUPTED},
};

int runner_job_event_ok(int from, enum rjob_event ev)
{
    const struct job_row *row;

    if ((unsigned)ev >= RJOB_EVENTS) {
        return 0;
    }
    row = &job_rows[ev];
    if (row->step < 0) {
        return from == RJOB_NEW;
    }
    return from != RJOB_NEW && sbx_job_step_ok((enum sbx_job_step)row->step, from, (int)row->to);
}

enum sbx_job_state runner_job_event_to(enum rjob_event ev)
{
    return (unsigned)ev < RJOB_EVENTS ? job_rows[ev].to : SBX_JOB_INTERRUPTED;
}

int runner_job_event_step(enum rjob_event ev)
{
    return (unsigned)ev < RJOB_EVENTS ? job_rows[ev].step : -1;
}

const char *runner_job_event_name(enum rjob_event ev)
{
    return (unsigned)ev < RJOB_EVENTS ? job_rows[ev].name : "unknown";
}

static int job_from(const struct rjob *j)
{
    return rjob_has_state(j) ? rjob_state(j) : RJOB_NEW;
}

static const char *job_state_text(int s)
{
    return s == RJOB_NEW ? "new" : sbx_job_state_name((enum sbx_job_state)s);
}

static int job_refuse(const struct rjob *j, int from, enum rjob_event ev, sbx_error_t **err)
{
    sbx_error_log("runner: job %s: event '%s' refused: a %s job does not move to %s", rjob_id(j),
                  runner_job_event_name(ev), job_state_text(from),
                  job_state_text((int)runner_job_event_to(ev)));
    return sbx_error_set(err, EINVAL, "job %s is %s: it cannot be %s", rjob_id(j),
                         job_state_text(from), runner_job_event_name(ev));
}

/* Under r->mu. */
static void job_set(struct rjob *j, enum rjob_event ev, const struct rjob_move *m)
{
    struct rjob_fsm *f = rjob_fsm(j); /* (changed, issue 31) rjob.h */

    f->state = (int)job_rows[ev].to;
    f->has_state = 1;
    if (job_rows[ev].to >= SBX_JOB_FINISHED) {
        rjob_set_exit_status(j, ev == RJOB_FINISHED && m != NULL ? m->exit_status : -1);
        runner_output_settle(rjob_output(j));
    }
}

/* A job's end with its task's exec cleared and the path it ran by: one
 * transaction. The job's end failing (a fenced write, or the database gone)
 * rolls it back whole; the two task/record writes failing only warn (their
 * rows may have moved on, say a task the core interrupted), unless the
 * database is gone: then all of it is written again (runner_store_retry). */
struct end_batch {
    const char *exec_task;
    const char *exec_path;
    struct sbx_job_move mv;
};

static void warn_free(sbx_error_t **err)
{
    if (*err != NULL) {
        sbx_warn("runner: store: %s", sbx_error_msg(*err));
        sbx_error_free(err);
    }
}

static int end_batch_write(struct sbx_store *st, void *arg, sbx_error_t **err)
{
    struct end_batch *b = arg;

    if (sbx_store_batch_begin(st, 0, err) < 0) {
        return -1;
    }
    if (b->exec_task != NULL && sbx_store_task_exec(st, b->exec_task, 0, 0, err) < 0) {
        if (sbx_store_down(st)) {
            goto abort;
        }
        warn_free(err);
    }
    if (b->exec_path != NULL && sbx_store_job_set_exec_path(st, b->mv.id, b->exec_path, err) < 0) {
        if (sbx_store_down(st)) {
            goto abort;
        }
        warn_free(err);
    }
    if (sbx_store_job_move(st, &b->mv, err) < 0) {
        goto abort;
    }
    return sbx_store_batch_end(st, 0, err);
abort:
    sbx_store_batch_abort(st, 0);
    return -1;
}

static int job_write(struct sbx_runner *r, struct rjob *j, enum rjob_event ev,
                     const struct rjob_move *m, sbx_error_t **err)
{
    static const struct rjob_move none = {.exit_status = -1};
    struct sbx_store *st;
    struct end_batch b;

    if (m == NULL) {
        m = &none;
    }
    st = m->st != NULL ? m->st : r->store;
    b = (struct end_batch){
        .exec_task = m->exec_task,
        .exec_path = m->exec_path,
        .mv = {.id = rjob_id(j),
               .token = rjob_token(j),
               .step = (enum sbx_job_step)job_rows[ev].step,
               .at = m->at,
               .task = m->task,
               .provider = m->provider,
               .image = m->image},
    };
    if (b.mv.step == SBX_JOB_STEP_END) {
        b.mv.end = (struct sbx_job_end){
            .state = job_rows[ev].to,
            .exit_status = ev == RJOB_FINISHED ? m->exit_status : -1,
            .reason = m->reason,
            .egress_allowed = m->egress_allowed,
            .egress_denied = m->egress_denied,
            .at = m->at,
        };
    }
    if (m->retry) {
        return runner_store_retry(r, st, rjob_id(j), end_batch_write, &b, err);
    }
    return sbx_store_job_move(st, &b.mv, err);
}

/* (added, issue 31) A deferred write carries an end's state and reason alone
 * (runner_job_end_write): a move that asks for more than that, which memory
 * and the store would then disagree on, is refused. */
static int deferred_ok(enum rjob_event ev, const struct rjob_move *m)
{
    return job_rows[ev].step == SBX_JOB_STEP_END && m->st == NULL && !m->strict && !m->retry &&
           m->at == 0 && m->egress_allowed == 0 && m->egress_denied == 0 && m->exec_task == NULL &&
           m->exec_path == NULL && (ev != RJOB_FINISHED || m->exit_status < 0);
}

int runner_job_move(struct sbx_runner *r, struct rjob *j, enum rjob_event ev,
                    const struct rjob_move *m, sbx_error_t **err)
{
    sbx_error_t *werr = NULL;
    int from;
    int now;
    int rc = 0;

    pthread_mutex_lock(&r->mu);
    from = job_from(j);
    pthread_mutex_unlock(&r->mu);
    if (!runner_job_event_ok(from, ev)) {
        return job_refuse(j, from, ev, err);
    }
    if (m != NULL && m->deferred && !m->memory && !deferred_ok(ev, m)) {
        sbx_error_log("runner: job %s: event '%s' refused: only an end's state and reason are "
                      "written deferred",
                      rjob_id(j), runner_job_event_name(ev));
        return sbx_error_set(err, EINVAL, "job %s: event '%s' cannot defer its write", rjob_id(j),
                             runner_job_event_name(ev));
    }
    if (job_rows[ev].step >= 0 && !(m != NULL && (m->memory || m->deferred)) &&
        job_write(r, j, ev, m, &werr) < 0) {
        if (m != NULL && m->strict) {
            if (err != NULL && *err == NULL) {
                *err = werr;
                return -1;
            }
            sbx_error_log("runner: job %s: %s", rjob_id(j), sbx_error_msg(werr));
            sbx_error_free(&werr);
            return -1;
        }
        rc = 1;
    }
    pthread_mutex_lock(&r->mu);
    now = job_from(j);
    if (now == from) {
        job_set(j, ev, m);
    }
    pthread_mutex_unlock(&r->mu);
    if (now != from) { /* another thread moved it: the one-owner rule above broke */
        sbx_error_free(&werr);
        return job_refuse(j, now, ev, err);
    }
    if (m != NULL && m->deferred && !m->memory) { /* checked and moved: now its write */
        runner_job_end_write(r, rjob_id(j), rjob_token(j), job_rows[ev].to,
                             m->reason != NULL ? m->reason : "");
    }
    if (rc > 0) {
        if (err != NULL && *err == NULL) {
            *err = werr;
        }
        else {
            sbx_warn("runner: job %s: %s", rjob_id(j), sbx_error_msg(werr));
            sbx_error_free(&werr);
        }
    }
    return rc;
}

int runner_job_move_held(struct sbx_runner *r, struct rjob *j, enum rjob_event ev)
{
    int from = job_from(j);

    (void)r;
    if (!runner_job_event_ok(from, ev)) {
        return job_refuse(j, from, ev, NULL);
    }
    job_set(j, ev, NULL);
    return 0;
}

/* ---- tasks ---- */

#define RT_BIT(s) (1u << (unsigned)(s))

struct task_row {
    const char *name;
    int from_new;  /* a new task may take it */
    unsigned from; /* RT_BIT of each state it leaves */
    int to;        /* enum rtask_state */
    int step;      /* the row's step it stands for (enum sbx_task_step), -1: none */
    int row_to;    /* the row's state after it */
    int writes;    /* the move writes the row (else: said in jobstate.h) */
};

static const struct task_row task_rows[RTASK_EVENTS] = {
    [RTASK_CREATED] = {"created", 1, 0, RT_STARTING, -1, -1, 0},
    [RTASK_ADOPTED] = {"adopted", 1, 0, RT_READY, -1, -1, 0},
    [RTASK_READY] = {"ready", 0, RT_BIT(RT_STARTING), RT_READY, SBX_TASK_STEP_READY, SBX_TASK_READY,
                     0},
    [RTASK_FAILED] = {"failed", 0, RT_BIT(RT_STARTING), RT_FAILED, SBX_TASK_STEP_END,
                      SBX_TASK_ENDED, 1},
    [RTASK_ENDING] = {"ending", 0, RT_BIT(RT_STARTING) | RT_BIT(RT_READY) | RT_BIT(RT_FAILED),
                      RT_ENDING, -1, -1, 0},
    [RTASK_KEPT] = {"kept", 0, RT_BIT(RT_ENDING), RT_READY, -1, -1, 0},
    [RTASK_GONE] = {"gone", 0, RT_BIT(RT_ENDING), RT_ENDING, SBX_TASK_STEP_END, SBX_TASK_ENDED, 1},
};

/* The row's state of a task in each state in memory: an ending task is
 * ready in its row until its sandbox is gone (RTASK_GONE; one whose start
 * failed has no sandbox, its row ended with RTASK_FAILED). */
static const int row_of[] = {
    [RT_STARTING] = SBX_TASK_STARTING,
    [RT_READY] = SBX_TASK_READY,
    [RT_FAILED] = SBX_TASK_ENDED,
    [RT_ENDING] = SBX_TASK_READY,
};

int runner_task_event_ok(int from, enum rtask_event ev)
{
    const struct task_row *row;

    if ((unsigned)ev >= RTASK_EVENTS) {
        return 0;
    }
    row = &task_rows[ev];
    if (from == RTASK_NEW) {
        return row->from_new;
    }
    if (from < RT_STARTING || from > RT_ENDING || (row->from & RT_BIT(from)) == 0) {
        return 0;
    }
    return row->step < 0 ||
           sbx_task_step_ok((enum sbx_task_step)row->step, row_of[from], row->row_to);
}

int runner_task_event_to(enum rtask_event ev)
{
    return (unsigned)ev < RTASK_EVENTS ? task_rows[ev].to : RTASK_NEW;
}

int runner_task_event_row(enum rtask_event ev, int *row_from, int *row_to)
{
    if ((unsigned)ev >= RTASK_EVENTS || task_rows[ev].step < 0) {
        return -1;
    }
    for (int s = RT_STARTING; s <= RT_ENDING; s++) {
        if (task_rows[ev].from & RT_BIT(s)) {
            *row_from = row_of[s];
        }
    }
    *row_to = task_rows[ev].row_to;
    return task_rows[ev].step;
}

const char *runner_task_event_name(enum rtask_event ev)
{
    return (unsigned)ev < RTASK_EVENTS ? task_rows[ev].name : "unknown";
}

static int task_from(struct rtask *t)
{
    const struct rtask_fsm *f = rtask_fsm(t);

    return f->has_state ? (int)f->state : RTASK_NEW;
}

static const char *task_state_text(int s)
{
    static const char *const names[] = {"starting", "ready", "failed", "ending"};

    return s >= RT_STARTING && s <= RT_ENDING ? names[s] : "new";
}

static int task_refuse(const struct rtask *t, int from, enum rtask_event ev, sbx_error_t **err)
{
    sbx_error_log("runner: task %s: event '%s' refused: a %s task does not move to %s", rtask_id(t),
                  runner_task_event_name(ev), task_state_text(from),
                  task_state_text(runner_task_event_to(ev)));
    return sbx_error_set(err, EINVAL, "task %s is %s: it cannot be %s", rtask_id(t),
                         task_state_text(from), runner_task_event_name(ev));
}

/* Under r->mu. */
static void task_set(struct sbx_runner *r, struct rtask *t, enum rtask_event ev,
                     const struct rtask_move *m)
{
    struct rtask_fsm *f = rtask_fsm(t); /* (changed, issue 31) rtask.h */

    f->state = (enum rtask_state)task_rows[ev].to;
    f->has_state = 1;
    if ((ev == RTASK_READY || ev == RTASK_ADOPTED) && m != NULL) {
        rtask_set_sandbox(t, m->t);
    }
    if (ev == RTASK_FAILED) {
        rtask_set_fail_reason(t, m != NULL && m->reason != NULL ? m->reason : "start failed");
    }
    pthread_cond_broadcast(&r->cond); /* jobs wait for a task's start */
}

int runner_task_move(struct sbx_runner *r, struct rtask *t, enum rtask_event ev,
                     const struct rtask_move *m, sbx_error_t **err)
{
    sbx_error_t *werr = NULL;
    int from;
    int now;
    int rc = 0;

    pthread_mutex_lock(&r->mu);
    from = task_from(t);
    pthread_mutex_unlock(&r->mu);
    if (!runner_task_event_ok(from, ev)) {
        return task_refuse(t, from, ev, err);
    }
    if (task_rows[ev].writes && m != NULL && m->st != NULL &&
        sbx_store_task_end(m->st, rtask_id(t), (enum sbx_task_state)task_rows[ev].row_to, m->reason,
                           0, &werr) < 0) {
        rc = 1;
    }
    pthread_mutex_lock(&r->mu);
    now = task_from(t);
    if (now == from) {
        task_set(r, t, ev, m);
    }
    pthread_mutex_unlock(&r->mu);
    if (now != from) {
        sbx_error_free(&werr);
        return task_refuse(t, now, ev, err);
    }
    if (rc > 0) {
        if (err != NULL && *err == NULL) {
            *err = werr;
        }
        else {
            sbx_warn("runner: task %s: %s", rtask_id(t), sbx_error_msg(werr));
            sbx_error_free(&werr);
        }
    }
    return rc;
}

int runner_task_move_held(struct sbx_runner *r, struct rtask *t, enum rtask_event ev)
{
    int from = task_from(t);

    if (!runner_task_event_ok(from, ev)) {
        return task_refuse(t, from, ev, NULL);
    }
    task_set(r, t, ev, NULL);
    return 0;
}
