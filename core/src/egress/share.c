/* share.c - per-sandbox token buckets over the proxy's egress.bandwidth (share.h). */
#include "egress/share.h"

size_t sbx_egress_share_active(struct sbx_egress_share *s, int64_t now_ns)
{
    int64_t w = now_ns / SBX_EGRESS_SHARE_WINDOW_NS;

    if (w > s->window && w <= s->window + SBX_EGRESS_SHARE_GAP) {
        s->n_prev = s->n_now;
        s->n_now = 0;
        s->window = w;
    }
    else if (w > s->window) {
        s->n_prev = 0;
        s->n_now = 0;
        s->window = w;
    }
    return s->n_now > s->n_prev ? s->n_now : s->n_prev;
}

double sbx_egress_share_rate(struct sbx_egress_share *s, int64_t now_ns)
{
    size_t n = sbx_egress_share_active(s, now_ns);

    if (s->bandwidth == 0 || n < 2) {
        return 0.0;
    }
    return (double)s->bandwidth / (double)n;
}

/* rate's worth of ns, at least SBX_EGRESS_SHARE_BYTES_MIN bytes */
static double worth(double rate, int64_t ns)
{
    double b = rate * (double)ns / 1e9;

    return b > SBX_EGRESS_SHARE_BYTES_MIN ? b : SBX_EGRESS_SHARE_BYTES_MIN;
}

uint64_t sbx_egress_share_grant(struct sbx_egress_share *s, struct sbx_egress_bucket *b,
                                int64_t now_ns, uint64_t want)
{
    double rate;
    double cap;
    double step;

    sbx_egress_share_active(s, now_ns);
    if (b->window != s->window + 1) {
        b->window = s->window + 1;
        s->n_now++;
    }
    rate = sbx_egress_share_rate(s, now_ns);
    if (rate <= 0.0) {
        /* No limit: the clock moves on, so that no credit piles up for later, and what
         * is moved now is not a debt for later. */
        b->last_ns = now_ns;
        b->limited = 0;
        if (b->tokens < 0) {
            b->tokens = 0;
        }
        return want;
    }
    cap = worth(rate, SBX_EGRESS_SHARE_BURST_NS);
    step = worth(rate, SBX_EGRESS_SHARE_STEP_NS);
    if (b->last_ns == 0 || now_ns < b->last_ns) {
        b->tokens = cap;
    }
    else {
        b->tokens += rate * (double)(now_ns - b->last_ns) / 1e9;
    }
    if (b->tokens > cap) {
        b->tokens = cap;
    }
    b->last_ns = now_ns;
    b->limited = 1;
    if (b->tokens < 1.0 || (b->tokens < step && b->tokens < (double)want)) {
        return 0;
    }
    return (double)want < b->tokens ? want : (uint64_t)b->tokens;
}

void sbx_egress_bucket_spend(struct sbx_egress_bucket *b, uint64_t used)
{
    if (b->limited) {
        b->tokens -= (double)used;
    }
}

int64_t sbx_egress_share_wait_ns(struct sbx_egress_share *s, const struct sbx_egress_bucket *b,
                                 int64_t now_ns)
{
    double rate = sbx_egress_share_rate(s, now_ns);
    double missing;

    if (rate <= 0.0) {
        return 0;
    }
    missing = worth(rate, SBX_EGRESS_SHARE_STEP_NS) - b->tokens;
    if (missing <= 0.0) {
        return 0;
    }
    if (missing / rate * 1e9 >= (double)(SBX_EGRESS_SHARE_WINDOW_NS / 2)) {
        return SBX_EGRESS_SHARE_WINDOW_NS / 2;
    }
    return (int64_t)(missing / rate * 1e9) + 1;
}
