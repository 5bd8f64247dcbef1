/* share.c - per-sandbox token buckets over the proxy's egress.bandwidth (share.h). */
#include "egress/share.h"

size_t sbx_egress_share_active(struct sbx_egress_share *s, int64_t now_ns)
{
    int64_t w = now_ns / SBX_EGRESS_SHARE_WINDOW_NS;

    if (w == s->window + 1) {
        s->n_prev = s->n_now;
        s->n_now = 0;
        s->window = w;
    }
    else if (w > s->window + 1) {
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

/* The most b may hold at rate. */
static double burst(double rate)
{
    double b = rate * (double)SBX_EGRESS_SHARE_BURST_NS / 1e9;

    return b > SBX_EGRESS_SHARE_BURST_MIN ? b : SBX_EGRESS_SHARE_BURST_MIN;
}

uint64_t sbx_egress_share_grant(struct sbx_egress_share *s, struct sbx_egress_bucket *b,
                                int64_t now_ns, uint64_t want)
{
    double rate;
    double cap;

    sbx_egress_share_active(s, now_ns);
    if (b->window != s->window + 1) {
        b->window = s->window + 1;
        s->n_now++;
    }
    rate = sbx_egress_share_rate(s, now_ns);
    if (rate <= 0.0) {
        /* No limit: the bucket stays full, for when the limit comes back. */
        b->tokens = burst((double)s->bandwidth);
        b->last_ns = now_ns;
        return want;
    }
    cap = burst(rate);
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
    if (b->tokens < (double)(want < SBX_EGRESS_SHARE_GRANT_MIN ? want : SBX_EGRESS_SHARE_GRANT_MIN) ||
        b->tokens < 1.0) {
        return 0;
    }
    return (double)want < b->tokens ? want : (uint64_t)b->tokens;
}

void sbx_egress_bucket_spend(struct sbx_egress_bucket *b, uint64_t used)
{
    b->tokens -= (double)used;
}

int64_t sbx_egress_share_wait_ns(struct sbx_egress_share *s, const struct sbx_egress_bucket *b,
                                 int64_t now_ns, uint64_t need)
{
    double rate = sbx_egress_share_rate(s, now_ns);
    double missing = (double)need - b->tokens;

    if (rate <= 0.0 || missing <= 0.0) {
        return 0;
    }
    if (need > burst(rate)) { /* never more than a full bucket */
        missing = burst(rate) - b->tokens;
    }
    return (int64_t)(missing / rate * 1e9) + 1;
}
