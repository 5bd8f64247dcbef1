/* rtask.c - (added, issue 31) a task in the runner (rtask.h): one sandbox,
 * shared by the jobs that name it, and the job table's list of tasks. The
 * caller holds the runner's lock where rtask.h says so; nothing here locks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/rtask.h"
#include "sandbox/task.h"
#include "util/xalloc.h"

struct rtask {
    char id[SBX_SCHED_ID_MAX];
    char holder[SBX_SCHED_ID_MAX]; /* the job whose sched slot the task holds */
    char owner[64];                /* the client of the job that started it ("": unknown) */
    enum sbx_pool pool;
    int keep;             /* agent task: kept after its command */
    struct rtask_fsm fsm; /* changed by runner_task_move alone (jobstate.h) */
    char fail_reason[256];
    struct sbx_task *t; /* set once ready */
    int running;        /* jobs executing or waiting in it, requests holding it */
    int end_requested;
    enum sbx_job_result holder_result;
    struct rtask *next; /* the table's list */
};

struct rtask *rtask_new(const struct rtask_init *in)
{
    struct rtask *t = xcalloc(1, sizeof(*t));

    snprintf(t->id, sizeof(t->id), "%s", in->id);
    snprintf(t->holder, sizeof(t->holder), "%s", in->holder);
    snprintf(t->owner, sizeof(t->owner), "%s", in->owner != NULL ? in->owner : "");
    t->pool = in->pool;
    t->keep = in->keep;
    t->holder_result = in->holder_result;
    return t;
}

void rtask_free(struct rtask *t)
{
    free(t);
}

const char *rtask_id(const struct rtask *t)
{
    return t->id;
}

const char *rtask_holder(const struct rtask *t)
{
    return t->holder;
}

const char *rtask_owner(const struct rtask *t)
{
    return t->owner;
}

int rtask_owned_by(const struct rtask *t, const char *client)
{
    return strcmp(t->owner, client) == 0;
}

enum sbx_pool rtask_pool(const struct rtask *t)
{
    return t->pool;
}

int rtask_keep(const struct rtask *t)
{
    return t->keep;
}

enum rtask_state rtask_state(const struct rtask *t)
{
    return t->fsm.state;
}

int rtask_takes_jobs(const struct rtask *t)
{
    return t->fsm.state == RT_STARTING || t->fsm.state == RT_READY;
}

int rtask_ready(const struct rtask *t)
{
    return t->fsm.state == RT_READY && t->t != NULL;
}

int rtask_starts_for(const struct rtask *t, const char *job)
{
    return t->fsm.state == RT_STARTING && t->t == NULL && strcmp(t->holder, job) == 0;
}

int rtask_due_to_end(const struct rtask *t, int stopping)
{
    return t->keep && t->fsm.state == RT_READY && t->running == 0 &&
           (t->end_requested || stopping || (t->t != NULL && sbx_task_stopped(t->t, NULL, 0)));
}

const char *rtask_fail_reason(const struct rtask *t)
{
    return t->fail_reason;
}

struct sbx_task *rtask_sandbox(const struct rtask *t)
{
    return t->t;
}

struct sbx_task *rtask_take_sandbox(struct rtask *t)
{
    struct sbx_task *sandbox = t->t;

    t->t = NULL;
    return sandbox;
}

void rtask_enter(struct rtask *t)
{
    t->running++;
}

void rtask_leave(struct rtask *t)
{
    t->running--;
}

int rtask_running(const struct rtask *t)
{
    return t->running;
}

void rtask_request_end(struct rtask *t)
{
    t->end_requested = 1;
}

int rtask_end_requested(const struct rtask *t)
{
    return t->end_requested;
}

void rtask_job_ended(struct rtask *t, const char *job, enum sbx_job_result result)
{
    if (strcmp(t->holder, job) == 0) {
        t->holder_result = result;
    }
}

enum sbx_job_result rtask_holder_result(const struct rtask *t)
{
    return t->holder_result;
}

json_t *rtask_json(const struct rtask *t)
{
    static const char *const names[] = {"starting", "ready", "failed", "ending"};

    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:i, s:s}", "id", t->id, "holder", t->holder,
                     "pool", sbx_pool_name(t->pool), "state", names[t->fsm.state], "kept", t->keep,
                     "running", t->running, "client", t->owner);
}

struct rtask_fsm *rtask_fsm(struct rtask *t)
{
    return &t->fsm;
}

void rtask_set_sandbox(struct rtask *t, struct sbx_task *sandbox)
{
    t->t = sandbox;
}

void rtask_set_fail_reason(struct rtask *t, const char *reason)
{
    snprintf(t->fail_reason, sizeof(t->fail_reason), "%s", reason);
}

struct rtask *rtask_next(const struct rtask *t)
{
    return t->next;
}

void rtask_list_push(struct rtask **head, struct rtask *t)
{
    t->next = *head;
    *head = t;
}

struct rtask *rtask_list_find(struct rtask *head, const char *id)
{
    for (struct rtask *t = head; t != NULL; t = t->next) {
        if (strcmp(t->id, id) == 0) {
            return t;
        }
    }
    return NULL;
}

int rtask_list_unlink(struct rtask **head, struct rtask *t)
{
    for (struct rtask **pp = head; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            return 1;
        }
    }
    return 0;
}

void rtask_list_free(struct rtask **head)
{
    while (*head != NULL) {
        struct rtask *t = *head;

        *head = t->next;
        free(t);
    }
}
