/* egress_bench.h - what egress_bench.c (the origin, the relay, one stream) shares with
 * egress_fair.c (the fair=N mode). */
#ifndef SBX_BENCH_EGRESS_BENCH_H
#define SBX_BENCH_EGRESS_BENCH_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "config/config.h"

#define CHUNK (1024 * 1024)

extern char bench_dir[];         /* the scratch directory (removed at exit) */
extern int origin_port;          /* the origin on 127.0.0.1 */
extern int64_t bulk_bytes;       /* what a 'B' stream sends */
extern int flood_nice;           /* SBX_BENCH_FLOOD_NICE: the floods' threads */
extern atomic_int origin_active; /* origin connections still open (their threads) */

extern int origin_fd; /* the origin's listening socket */

/* The origin: accepts on origin_fd, a thread per connection (started by main). */
void *origin_main(void *arg);
/* A listening socket on 127.0.0.1 (*port: its port). */
int tcp_listen(int *port);
double now(void);
void die(const char *what);
int cmp_double(const void *a, const void *b);
/* A stream to the origin, direct (relay_port 0) or through a relay with CONNECT, with
 * its command byte sent: 'B' download, 'U' upload, 'L' one byte back. */
int open_stream(int relay_port, char cmd);
/* One 'B' download of bulk_bytes, in MiB/s. */
double bulk(int relay_port);
/* Median microseconds from connect() to the origin's first byte over count connects. */
double latency(int relay_port, int count);
/* Starts an sbx-relay for the proxy socket sock; *port is its loopback port. */
pid_t start_relay(const char *sock, int *port);

/* egress_fair.c: `egress_bench MIB CONNECTS ROUNDS fair=N` */
int egress_fair(struct sbx_config *cfg, int n, int connects, int rounds);

#endif
