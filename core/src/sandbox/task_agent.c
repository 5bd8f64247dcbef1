/* task_agent.c - a task's execs through the exec agent in its sandbox, with
 * the provider's exec (the engine) as the fallback (docs/tasks.md, "The exec
 * agent"). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/agent.h"
#include "sandbox/task_int.h"
#include "util/log.h"
#include "util/xalloc.h"

struct agent_call {
    struct sbx_task *t;
    struct sbx_exec_slot *slot;
    const struct sbx_exec_spec *spec;
};

int sbx_task_agent_dir(struct sbx_task *t, sbx_error_t **err)
{
    if (t->egress_dir == NULL || getenv("SBX_EXEC_AGENT_OFF") != NULL) {
        return 0; /* no relay in the sandbox, so no agent */
    }
    t->agent_dir = xasprintf("%s/agent", t->dir);
    t->agent = xcalloc(1, sizeof(*t->agent));
    if (sbx_agent_listen(t->agent, t->agent_dir, err) < 0) {
        sbx_task_agent_free(t);
        return -1;
    }
    return 0;
}

void sbx_task_agent_free(struct sbx_task *t)
{
    if (t->agent != NULL) {
        sbx_agent_close(t->agent);
        free(t->agent);
        t->agent = NULL;
    }
    if (t->agent_dir != NULL) {
        char *sock = xasprintf("%s/host.sock", t->agent_dir);

        unlink(sock);
        free(sock);
        rmdir(t->agent_dir);
        free(t->agent_dir);
        t->agent_dir = NULL;
    }
}

/* spec->run_agent: called by the provider around its exec-time guards. */
static int run_agent(void *ud, struct sbx_exec_ctl *ctl, int *status, sbx_error_t **err)
{
    struct agent_call *a = ud;
    char why[300];
    int cancel[2];
    int r;

    if (pipe2(cancel, O_CLOEXEC | O_NONBLOCK) < 0) {
        return SBX_AGENT_ABSENT;
    }
    pthread_mutex_lock(&a->t->mu);
    a->slot->agent_cancel_fd = cancel[1];
    pthread_mutex_unlock(&a->t->mu);
    r = sbx_agent_exec_stdio(a->t->agent, a->spec, a->slot->tty_slave1 - 1, cancel[0],
                             &ctl->cancelled, SBX_AGENT_ANSWER_MS, status, why, sizeof(why), err);
    pthread_mutex_lock(&a->t->mu);
    a->slot->agent_cancel_fd = 0;
    pthread_mutex_unlock(&a->t->mu);
    close(cancel[0]);
    close(cancel[1]);
    if (r == SBX_AGENT_ABSENT && a->slot->tty_slave1 > 0) {
        /* (added) a terminal runs through the agent only (docs/tasks.md, "Terminals") */
        return sbx_error_set(err, SBX_E_ENGINE, "a terminal needs the sandbox's exec agent, and %s",
                             why);
    }
    if (r == SBX_AGENT_ABSENT) {
        /* said once per reason kind is enough at debug level: the record says
         * which path ran */
        sbx_debug("task %s: exec via the engine: %s", a->t->id, why);
        return 1;
    }
    a->slot->path = "agent";
    return r;
}

int sbx_task_exec_run(struct sbx_task *t, const struct sbx_exec_spec *spec,
                      struct sbx_exec_slot *slot, int *status, sbx_error_t **err)
{
    struct sbx_exec_spec s = *spec;
    struct agent_call a = {.t = t, .slot = slot, .spec = spec};
    int r;

    if (t->agent != NULL) {
        s.run_agent = run_agent;
        s.agent_userdata = &a;
    }
    else if (slot->tty_slave1 > 0) {
        return sbx_error_set(err, SBX_E_ENGINE,
                             "a terminal needs the sandbox's exec agent, and this task has none "
                             "(no egress relay, SBX_EXEC_AGENT_OFF, or a re-adopted task)");
    }
    slot->path = NULL;
    r = sbx_instance_provider(t->prov)->exec(t->prov->ctx, t->sandbox, &s, &slot->ctl, status, err);
    if (slot->path == NULL) {
        slot->path = "engine";
    }
    return r;
}
