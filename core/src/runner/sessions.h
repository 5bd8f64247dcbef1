/* sessions.h - (added, issue 31) the box's count of terminal, port and
 * archive sessions (api_term.c): at most RUNNER_SESSIONS_MAX open at once on
 * the box, and RUNNER_SESSIONS_PER_CLIENT of one client, so that no client
 * (nor a page its sandbox serves it) takes every session of the box from
 * the others (docs/api.md, "Terminals and ports"). Any thread; its own lock.
 * Unit test tests/unit/test_runner_sessions.c. */
#ifndef SBX_RUNNER_SESSIONS_H
#define SBX_RUNNER_SESSIONS_H

#include <stddef.h>

#define RUNNER_SESSIONS_MAX 64
#define RUNNER_SESSIONS_PER_CLIENT 32 /* half the box */

/* 0 with one session of client counted; else the status to answer (503: the
 * box's cap, 429: the client's) with the refusal in why (len > 0). */
int runner_session_take(const char *client, char *why, size_t len);
/* The end of a session runner_session_take counted for client. */
void runner_session_give(const char *client);
/* How many are open: on the box, of client (NULL: only the box's). */
int runner_sessions_open(const char *client, int *of_client);

#endif
