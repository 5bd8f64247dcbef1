/* bench_redact.c - throughput of the streaming redactor against a peer
 * measured in the same run: the same chunks copied to the same sink without
 * redaction. Prints medians of 5 runs and the ratio.
 *
 *   ./build/bench/bench_redact
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cred/redact.h"

#define TOTAL (64u << 20)
#define CHUNK 4096u
#define RUNS 5

struct sink {
    char *buf;
    size_t len;
};

static int sink_fn(void *ud, const char *data, size_t len)
{
    struct sink *s = ud;

    if (s->len + len > TOTAL * 2) {
        s->len = 0;
    }
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    return 0;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double run_peer(const char *in, struct sink *s)
{
    double t = now();

    for (size_t off = 0; off < TOTAL; off += CHUNK) {
        sink_fn(s, in + off, CHUNK);
    }
    return now() - t;
}

static double run_redact(const struct sbx_redactor *r, const char *in, struct sink *s)
{
    struct sbx_redact_stream *st = sbx_redact_stream_new(r, sink_fn, s);
    double t = now();

    for (size_t off = 0; off < TOTAL; off += CHUNK) {
        sbx_redact_stream_write(st, in + off, CHUNK, NULL);
    }
    sbx_redact_stream_finish(st, NULL);
    t = now() - t;
    sbx_redact_stream_free(st);
    return t;
}

static void measure(const char *label, const struct sbx_redactor *r, const char *in, struct sink *s)
{
    double peer[RUNS];
    double red[RUNS];

    for (int i = 0; i < RUNS; i++) {
        peer[i] = run_peer(in, s);
        red[i] = run_redact(r, in, s);
    }
    qsort(peer, RUNS, sizeof(double), cmp);
    qsort(red, RUNS, sizeof(double), cmp);
    printf("%-34s peer %8.0f MB/s  redact %8.0f MB/s  ratio %.2fx slower\n", label,
           TOTAL / peer[RUNS / 2] / 1e6, TOTAL / red[RUNS / 2] / 1e6,
           red[RUNS / 2] / peer[RUNS / 2]);
}

int main(void)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789 =:/-_\n";
    char *in = malloc(TOTAL);
    struct sink s = {malloc(TOTAL * 2 + CHUNK * 2), 0};
    struct sbx_redactor *r = sbx_redactor_create();
    unsigned seed = 1;
    char value[48];

    if (in == NULL || s.buf == NULL) {
        return 1;
    }
    for (int k = 0; k < 10; k++) {
        size_t len = 16 + (size_t)(rand_r(&seed) % 25);
        char name[16];

        for (size_t i = 0; i < len; i++) {
            value[i] = alphabet[rand_r(&seed) % 36];
        }
        value[len] = '\0';
        snprintf(name, sizeof(name), "SECRET_%d", k);
        sbx_redactor_add(r, name, value);
    }
    for (size_t i = 0; i < TOTAL; i++) {
        in[i] = alphabet[rand_r(&seed) % (sizeof(alphabet) - 1)];
    }
    for (size_t off = 1000; off + 64 < TOTAL; off += 100000) { /* a value now and then */
        memcpy(in + off, value, strlen(value));
    }
    printf("64 MiB in 4 KiB chunks, 10 secrets of 16-40 bytes, median of %d\n", RUNS);
    measure("log-like text", r, in, &s);
    memset(in, value[0], TOTAL); /* every byte starts a candidate */
    measure("worst case (one repeated byte)", r, in, &s);
    sbx_redactor_destroy(r);
    free(in);
    free(s.buf);
    return 0;
}
