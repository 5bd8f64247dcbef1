/* agent.h - the exec agent of sbx-relay (agent.c). */
#ifndef SBX_RELAY_AGENT_H
#define SBX_RELAY_AGENT_H

/* Serves exec requests on the unix socket PATH; never returns. */
void sbx_agent_run(const char *path);

#endif
