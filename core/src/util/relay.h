/* relay.h - bytes copied both ways between two connected sockets: `sbx port`'s
 * connections, and (issue 31) the runner's raw port connections (api_term.c). */
#ifndef SBX_UTIL_RELAY_H
#define SBX_UTIL_RELAY_H

#include <stdint.h>

/* Copies both ways until both directions ended (a half-close is passed on, a reset
 * ends both); *ab and *ba: the bytes copied from a to b and from b to a. Blocks. */
void sbx_relay_both(int a, int b, int64_t *ab, int64_t *ba);

#endif
