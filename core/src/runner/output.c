/* output.c - a job's kept output (docs/api.md, GET /v1/jobs/ID/output): the last
 * SBX_RUNNER_MAX_OUTPUT bytes in a buffer that moves its kept bytes once per
 * maximum appended, and which stream (stdout 1, stderr 2) each byte came from,
 * as runs. The fields are struct rjob's (records.h); the caller holds the
 * runner's lock for a job a worker and the loop share (worker.c appends,
 * api.c reads, jobstate.c settles an ended job's). */
#include <string.h>

#include "runner/output.h"
#include "runner/records.h"
#include "util/xalloc.h"

static int seg_stream(const struct rjob *j, size_t i)
{
    return i % 2 == 0 ? j->seg_first : 3 - j->seg_first;
}

int runner_output_stream_at(const struct rjob *j, size_t off, size_t *run_end)
{
    size_t lo = j->seg_head;
    size_t hi = j->n_seg;

    /* the last run starting at or before off */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;

        if (j->seg[mid] <= off) {
            lo = mid;
        }
        else {
            hi = mid;
        }
    }
    *run_end = lo + 1 < j->n_seg ? j->seg[lo + 1] : j->out_total;
    return seg_stream(j, lo);
}

/* Notes a run of `stream` starting at out_total, and forgets the runs that
 * ended before the first kept byte (amortised O(1)). */
static void seg_note(struct rjob *j, int stream, size_t keep_from)
{
    if (j->n_seg == j->seg_head || seg_stream(j, j->n_seg - 1) != stream) {
        if (j->n_seg == j->seg_head) {
            j->n_seg = j->seg_head = 0;
            j->seg_first = stream;
        }
        if (j->n_seg == j->seg_cap) {
            j->seg_cap = j->seg_cap ? j->seg_cap * 2 : 8;
            j->seg = xrealloc(j->seg, j->seg_cap * sizeof(*j->seg));
        }
        j->seg[j->n_seg++] = j->out_total;
    }
    while (j->seg_head + 1 < j->n_seg && j->seg[j->seg_head + 1] <= keep_from) {
        j->seg_head++;
    }
    if (j->seg_head > 0 && j->seg_head >= j->n_seg / 2) {
        if (j->seg_head % 2 == 1) {
            j->seg_first = 3 - j->seg_first;
        }
        memmove(j->seg, j->seg + j->seg_head, (j->n_seg - j->seg_head) * sizeof(*j->seg));
        j->n_seg -= j->seg_head;
        j->seg_head = 0;
    }
}

void runner_output_add(struct rjob *j, int stream, const char *data, size_t len)
{
    if (len == 0) {
        return;
    }
    stream = stream == 2 ? 2 : 1;
    if (len >= SBX_RUNNER_MAX_OUTPUT) {
        data += len - SBX_RUNNER_MAX_OUTPUT;
        j->out_total += len - SBX_RUNNER_MAX_OUTPUT;
        len = SBX_RUNNER_MAX_OUTPUT;
    }
    seg_note(j, stream,
             j->out_total + len > SBX_RUNNER_MAX_OUTPUT ? j->out_total + len - SBX_RUNNER_MAX_OUTPUT
                                                        : 0);
    if (j->out_len + len > SBX_RUNNER_MAX_OUTPUT) {
        size_t drop = j->out_len + len - SBX_RUNNER_MAX_OUTPUT;

        j->out_off += drop;
        j->out_len -= drop;
    }
    if (j->out_off + j->out_len + len > j->out_cap) {
        /* Out of room at the end: move the kept bytes to the front, and keep the
         * allocation at least twice what is needed (at most twice the maximum), so
         * the next move comes only after as many bytes as it moves were appended. */
        size_t need = j->out_len + len;

        if (j->out_off > 0) {
            memmove(j->out, j->out + j->out_off, j->out_len);
            j->out_moved += j->out_len;
            j->out_off = 0;
        }
        if (2 * need > j->out_cap) {
            size_t cap = 2 * need < 4096 ? 4096 : 2 * need;

            j->out = xrealloc(j->out, cap + 1);
            j->out_cap = cap;
        }
    }
    memcpy(j->out + j->out_off + j->out_len, data, len);
    j->out_len += len;
    j->out_total += len;
}

void runner_output_settle(struct rjob *j)
{
    if (j->out_off > 0) {
        memmove(j->out, j->out + j->out_off, j->out_len);
        j->out_off = 0;
    }
    if (j->out != NULL && j->out_cap > j->out_len) {
        j->out = xrealloc(j->out, j->out_len + 1);
        j->out_cap = j->out_len;
    }
}
