/* egress_log.h - one JSON line per proxied connection, fail closed (docs/egress.md). */
#ifndef SBX_EGRESS_LOG_H
#define SBX_EGRESS_LOG_H

#include <stdint.h>
#include <time.h>

#include "util/error.h"

struct sbx_egress_log {
    char *path;
    int fd;
    int ok;          /* the last write succeeded */
    uint64_t errors; /* lines that could not be written */
};

struct sbx_egress_record {
    struct timespec start; /* CLOCK_REALTIME */
    double duration;       /* seconds */
    const char *job;
    const char *task;
    const char *sandbox;
    const char *exec;   /* the exec the relay reported (the sandbox's word), or NULL */
    int pid;            /* the pid inside the relay reported, or 0 */
    const char *method; /* NULL before a request line was read */
    const char *host;
    unsigned port;
    const char *address;  /* "192.0.2.1:443", "[2001:db8::1]:443" or NULL */
    const char *sni;      /* the TLS server name a CONNECT client sent, or NULL */
    int opaque;           /* an opaque rule passed the tunnel's first bytes unchecked */
    const char *decision; /* "allow" or "deny" */
    const char *rule;     /* the rule that allowed it, or NULL */
    const char *priv;     /* a private address connected to: what allowed it, or NULL */
    const char *reason;   /* why it was denied or failed, or NULL */
    int status;           /* the proxy's own reply status, 0 when relayed */
    uint64_t bytes_up;    /* client to destination */
    uint64_t bytes_down;  /* destination to client */
};

/* Opens (creating, mode 0640) PATH for appending. */
int sbx_egress_log_open(struct sbx_egress_log *l, const char *path, sbx_error_t **err);
/* 0 when a line can be written now: the file is open, still linked and the last write
 * worked; otherwise tries to reopen it once and returns -1 if that fails. */
int sbx_egress_log_ready(struct sbx_egress_log *l);
/* Appends one line with a single write(2). -1 (and the error logged once) on failure. */
int sbx_egress_log_write(struct sbx_egress_log *l, const struct sbx_egress_record *r);
void sbx_egress_log_close(struct sbx_egress_log *l);

#endif
