/* attr.h - which exec a connection to the relay comes from (attr.c; docs/egress.md,
 * "Attribution"). The exec agent records each command it starts (pid, exec id) in a
 * table shared with the relay; the relay finds the pid holding an accepted client
 * socket and walks its parents to a command of the table. */
#ifndef SBX_RELAY_ATTR_H
#define SBX_RELAY_ATTR_H

#include <stddef.h>
#include <sys/types.h>

struct sockaddr_un;

#define SBX_ATTR_ID_MAX 40 /* an exec id's bytes, [A-Za-z0-9._-] */
/* The line the relay puts first on its connection to the proxy (after the handover's
 * NUL byte, or before the copied bytes): "Sbx-Relay: pid=N|- exec=ID|-\r\n". */
#define SBX_ATTR_PREFIX "Sbx-Relay: "
#define SBX_ATTR_LINE_MAX 96

/* Maps the shared table (before the agent and the relay fork apart). -1 on failure. */
int sbx_attr_init(void);
/* The agent: command pid runs exec id (pid 0: the slot of id is freed). */
void sbx_attr_set(pid_t pid, const char *id);
void sbx_attr_clear(pid_t pid);
/* The relay: the pid inside that holds the accepted socket fd (0 when not found, the
 * search bounded), and the exec id of the nearest ancestor the agent started ("" when
 * none). Writes the line for the proxy to line[SBX_ATTR_LINE_MAX]; returns its length. */
size_t sbx_attr_line(int fd, char *line);

/* The longest head a hand-over carries before its attribution line. */
#define SBX_ATTR_HEAD_MAX 300
/* Hands the client socket c to the proxy at sun in one message: head[0..n) (the
 * control byte and, for a transparent connection, its "HOST:PORT\n" line) with c
 * as SCM_RIGHTS, then with attribute the attribution line. Closes c: the relay
 * keeps no copy. */
void sbx_attr_hand_over(int c, const struct sockaddr_un *sun, const char *head, size_t n,
                        int attribute);

#endif
