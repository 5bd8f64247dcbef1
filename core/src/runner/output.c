/* output.c - a job's kept output (docs/api.md, GET /v1/jobs/ID/output): the last
 * SBX_RUNNER_MAX_OUTPUT bytes in a buffer that moves its kept bytes once per
 * maximum appended, and which stream (stdout 1, stderr 2) each byte came from,
 * as runs. **(changed, issue 31)** struct runner_output is this file's alone
 * (output.h); a job holds one (rjob.h). The caller holds the runner's lock
 * for a job a worker and the loop share (worker.c appends, api.c reads,
 * jobstate.c settles an ended job's). */
#include <stdlib.h>
#include <string.h>

#include "runner/output.h"
#include "runner/runner.h"
#include "util/xalloc.h"

struct runner_output {
    /* the last SBX_RUNNER_MAX_OUTPUT bytes, at buf + off; total counts all.
     * The allocation (cap) grows to twice the maximum, so dropping old bytes
     * moves the kept ones only once per maximum appended: amortised O(1) per
     * byte, however small the pieces (moved counts what compaction copied). */
    char *buf;
    size_t off;
    size_t cap;
    size_t len;
    size_t total;
    size_t moved;
    /* which stream each byte came from: runs of one stream, alternating
     * stdout/stderr; seg[i] is the absolute (total terms) start of run i,
     * runs before seg_head are gone; run 0 is stream seg_first (1 or 2) */
    size_t *seg;
    size_t n_seg, seg_head, seg_cap;
    int seg_first;
};

struct runner_output *runner_output_new(void)
{
    return xcalloc(1, sizeof(struct runner_output));
}

void runner_output_free(struct runner_output *o)
{
    if (o == NULL) {
        return;
    }
    free(o->buf);
    free(o->seg);
    free(o);
}

size_t runner_output_total(const struct runner_output *o)
{
    return o->total;
}

size_t runner_output_first(const struct runner_output *o)
{
    return o->total - o->len;
}

const char *runner_output_at(const struct runner_output *o, size_t off)
{
    return o->buf != NULL ? o->buf + o->off + (off - (o->total - o->len)) : "";
}

void runner_output_stats(const struct runner_output *o, struct runner_output_stats *st)
{
    st->room = o->cap;
    st->moved = o->moved;
    st->runs = o->n_seg - o->seg_head;
    st->run_room = o->seg_cap;
}

static int seg_stream(const struct runner_output *o, size_t i)
{
    return i % 2 == 0 ? o->seg_first : 3 - o->seg_first;
}

/* The run holding the kept byte at absolute offset off: the last starting at
 * or before it (binary search). */
static size_t seg_find(const struct runner_output *o, size_t off)
{
    size_t lo = o->seg_head;
    size_t hi = o->n_seg;

    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;

        if (o->seg[mid] <= off) {
            lo = mid;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

void runner_output_runs(const struct runner_output *o, size_t from, runner_output_run_fn fn,
                        void *ud)
{
    size_t first = runner_output_first(o);

    if (from < first) {
        from = first;
    }
    if (from >= o->total) {
        return;
    }
    for (size_t i = seg_find(o, from); from < o->total; i++) {
        size_t end = i + 1 < o->n_seg ? o->seg[i + 1] : o->total;

        if (fn(ud, seg_stream(o, i), runner_output_at(o, from), end - from) != 0) {
            return;
        }
        from = end;
    }
}

/* Notes a run of `stream` starting at total, and forgets the runs that
 * ended before the first kept byte (amortised O(1)). */
static void seg_note(struct runner_output *o, int stream, size_t keep_from)
{
    if (o->n_seg == o->seg_head || seg_stream(o, o->n_seg - 1) != stream) {
        if (o->n_seg == o->seg_head) {
            o->n_seg = o->seg_head = 0;
            o->seg_first = stream;
        }
        if (o->n_seg == o->seg_cap) {
            o->seg_cap = o->seg_cap ? o->seg_cap * 2 : 8;
            o->seg = xrealloc(o->seg, o->seg_cap * sizeof(*o->seg));
        }
        o->seg[o->n_seg++] = o->total;
    }
    while (o->seg_head + 1 < o->n_seg && o->seg[o->seg_head + 1] <= keep_from) {
        o->seg_head++;
    }
    if (o->seg_head > 0 && o->seg_head >= o->n_seg / 2) {
        if (o->seg_head % 2 == 1) {
            o->seg_first = 3 - o->seg_first;
        }
        memmove(o->seg, o->seg + o->seg_head, (o->n_seg - o->seg_head) * sizeof(*o->seg));
        o->n_seg -= o->seg_head;
        o->seg_head = 0;
    }
}

void runner_output_add(struct runner_output *o, int stream, const char *data, size_t len)
{
    if (len == 0) {
        return;
    }
    stream = stream == 2 ? 2 : 1;
    if (len >= SBX_RUNNER_MAX_OUTPUT) {
        data += len - SBX_RUNNER_MAX_OUTPUT;
        o->total += len - SBX_RUNNER_MAX_OUTPUT;
        len = SBX_RUNNER_MAX_OUTPUT;
    }
    seg_note(o, stream,
             o->total + len > SBX_RUNNER_MAX_OUTPUT ? o->total + len - SBX_RUNNER_MAX_OUTPUT : 0);
    if (o->len + len > SBX_RUNNER_MAX_OUTPUT) {
        size_t drop = o->len + len - SBX_RUNNER_MAX_OUTPUT;

        o->off += drop;
        o->len -= drop;
    }
    if (o->off + o->len + len > o->cap) {
        /* Out of room at the end: move the kept bytes to the front, and keep the
         * allocation at least twice what is needed (at most twice the maximum), so
         * the next move comes only after as many bytes as it moves were appended. */
        size_t need = o->len + len;

        if (o->off > 0) {
            memmove(o->buf, o->buf + o->off, o->len);
            o->moved += o->len;
            o->off = 0;
        }
        if (2 * need > o->cap) {
            size_t cap = 2 * need < 4096 ? 4096 : 2 * need;

            o->buf = xrealloc(o->buf, cap + 1);
            o->cap = cap;
        }
    }
    memcpy(o->buf + o->off + o->len, data, len);
    o->len += len;
    o->total += len;
}

void runner_output_settle(struct runner_output *o)
{
    if (o->off > 0) {
        memmove(o->buf, o->buf + o->off, o->len);
        o->off = 0;
    }
    if (o->buf != NULL && o->cap > o->len) {
        o->buf = xrealloc(o->buf, o->len + 1);
        o->cap = o->len;
    }
}
