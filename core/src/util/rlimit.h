/* rlimit.h - process resource limits the long-lived processes set at start. */
#ifndef SBX_UTIL_RLIMIT_H
#define SBX_UTIL_RLIMIT_H

/* Raises the soft RLIMIT_NOFILE to the hard limit (the runner and the keeper hold a
 * proxy with many sockets and pipes). Logs the change at debug level; returns the new
 * soft limit, or -1 (logged at warn) when the limit cannot be read or set. */
long sbx_raise_nofile(const char *who);

#endif
