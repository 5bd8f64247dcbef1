/* h1_bench.c - the one HTTP/1 head parser (core/src/http/h1.c) on typical heads:
 * ns per head for the proxy's whole request parse (scan, h1, its own rules) and the
 * parser alone on a request and on a reply, against a peer measured in the same
 * run: finding the head's end with memmem (the least any reader does).
 *
 *   h1_bench [ITERATIONS]   (default 200000; best of 7 rounds each) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egress/request.h"
#include "http/h1.h"

static const char connect_head[] = "CONNECT api.example.test:443 HTTP/1.1\r\n"
                                   "Host: api.example.test:443\r\nUser-Agent: curl/8.5.0\r\n"
                                   "Proxy-Connection: Keep-Alive\r\n\r\n";
static const char get_head[] = "GET http://deb.example.test/debian/dists/bookworm/InRelease "
                               "HTTP/1.1\r\nHost: deb.example.test\r\nCache-Control: max-age=0\r\n"
                               "Accept: text/*\r\nUser-Agent: Debian APT-HTTP/1.3 (2.6.1)\r\n"
                               "If-Modified-Since: Sat, 07 Oct 2023 09:38:57 GMT\r\n\r\n";
static const char reply_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sbx.output-"
                                 "frames\r\nTransfer-Encoding: chunked\r\nDate: Wed, 02 Dec 2026 "
                                 "11:00:00 GMT\r\n\r\n";

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static volatile long sink;

/* what: 0 the peer (memmem), 1 h1 alone, 2 the proxy's parse. */
static double run(int what, const char *head, int response, long n)
{
    double best = 1e9;
    size_t len = strlen(head);

    for (int round = 0; round < 7; round++) {
        double t0 = now();
        double ns;

        for (long i = 0; i < n; i++) {
            if (what == 0) {
                const char *e = memmem(head, len, "\r\n\r\n", 4);

                sink += e != NULL ? e - head + 4 : 0;
            }
            else if (what == 1) {
                struct sbx_h1_head h;

                sbx_h1_init(&h, response, NULL);
                sink += sbx_h1_feed(&h, head, len);
            }
            else {
                struct sbx_egress_request r;
                const char *reason;
                int status;
                long end = sbx_egress_head_end(head, len);

                if (end <= 0 ||
                    sbx_egress_request_parse(head, (size_t)end, &r, &status, &reason) < 0) {
                    fprintf(stderr, "h1_bench: the proxy refused its own sample head\n");
                    exit(1);
                }
                sbx_egress_request_clear(&r);
            }
        }
        ns = (now() - t0) / (double)n * 1e9;
        best = ns < best ? ns : best;
    }
    return best;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
    static const struct {
        const char *name;
        const char *head;
        int response;
        int what;
    } rows[] = {
        {"proxy: CONNECT request", connect_head, 0, 2},
        {"proxy: GET request", get_head, 0, 2},
        {"h1: GET request", get_head, 0, 1},
        {"h1: chunked reply", reply_head, 1, 1},
    };

    if (n <= 0) {
        fprintf(stderr, "h1_bench: ITERATIONS must be a positive number\n");
        return 2;
    }
    printf("h1_bench: best of 7 rounds of %ld heads; peer: memmem for the head's end\n", n);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        double peer = run(0, rows[i].head, rows[i].response, n);
        double ns = run(rows[i].what, rows[i].head, rows[i].response, n);

        printf("  %-24s %4zu bytes  %7.0f ns/head   peer %5.0f ns   ratio %.1f\n", rows[i].name,
               strlen(rows[i].head), ns, peer, ns / peer);
    }
    return 0;
}
