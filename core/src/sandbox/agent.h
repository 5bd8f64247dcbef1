/* agent.h - the host side of the exec agent inside a Docker sandbox
 * (docs/tasks.md, "The exec agent"; wire format in sbx/sbx_agent_proto.h).
 * Everything the agent sends is untrusted: a process in the sandbox can
 * replace it. Replies are fixed-size records read against deadlines; a bad
 * agent fails only the exec that talked to it. */
#ifndef SBX_SANDBOX_AGENT_H
#define SBX_SANDBOX_AGENT_H

#include <pthread.h>

#include <sbx/sbx_provider.h>

#include "util/error.h"

/* How long the agent has to accept a request and say the command runs. */
#define SBX_AGENT_ANSWER_MS 5000
/* After a cancel, how long the agent has to report the exit. */
#define SBX_AGENT_CANCEL_MS 5000

enum sbx_agent_result {
    SBX_AGENT_RAN = 0,     /* *status is the command's exit status */
    SBX_AGENT_FAILED = -1, /* err says why; the command may have run */
    SBX_AGENT_ABSENT = 1,  /* nothing ran: use the engine (why says so) */
};

/* The host end for one sandbox: a listening socket in the task's agent
 * directory and, once the agent connected, its control connection. */
struct sbx_agent_link {
    pthread_mutex_t mu;
    int lfd;    /* -1: none */
    int conn;   /* -1: not connected (yet) */
    int waited; /* the first exec waited for the agent to connect */
    int dead;   /* gave up on this agent: every exec uses the engine */
};

/* Listens on dir/SBX_AGENT_SOCK (dir is created, mode 0755). */
int sbx_agent_listen(struct sbx_agent_link *l, const char *dir, sbx_error_t **err);
void sbx_agent_close(struct sbx_agent_link *l);

/* Runs spec->argv through the agent, streaming output to spec->on_output.
 * cancel_fd (or -1) becoming readable, or *cancelled (or NULL) set, cancels
 * the command (SIGKILL to its group). answer_ms bounds each wait for the agent: to connect (first
 * exec only), to take the request, to say the command runs. */
int sbx_agent_exec(struct sbx_agent_link *l, const struct sbx_exec_spec *spec, int cancel_fd,
                   const volatile int *cancelled, int answer_ms, int *status, char *why,
                   size_t why_size, sbx_error_t **err);

/* (added) The same with stdio (a terminal's slave, pty.c) as the command's stdin,
 * stdout and stderr instead of /dev/null and pipes; nothing is streamed to
 * spec->on_output (the caller reads the terminal's master). */
int sbx_agent_exec_stdio(struct sbx_agent_link *l, const struct sbx_exec_spec *spec, int stdio,
                         int cancel_fd, const volatile int *cancelled, int answer_ms, int *status,
                         char *why, size_t why_size, sbx_error_t **err);

#endif
