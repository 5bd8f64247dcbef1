/* share.h - fair shares of the proxy's bandwidth between sandboxes (docs/egress.md,
 * "Fair shares"): a token bucket per sandbox whose rate is egress.bandwidth divided
 * by the sandboxes that moved bytes lately. A sandbox alone is never limited. Pure
 * logic on a clock given by the caller (nanoseconds), so it is tested with a fake one
 * (tests/unit/test_egress_share.c). Egress loop only. */
#ifndef SBX_EGRESS_SHARE_H
#define SBX_EGRESS_SHARE_H

#include <stddef.h>
#include <stdint.h>

/* A sandbox counts as active in the window in which it asked to move bytes and the
 * next one: for 25 to 50 ms after its last ask. A gap of up to SBX_EGRESS_SHARE_GAP
 * windows in which nobody asked (the proxy's thread did not run) counts as one window;
 * after a longer one nobody is active. */
#define SBX_EGRESS_SHARE_WINDOW_NS (25LL * 1000 * 1000)
#define SBX_EGRESS_SHARE_GAP 4
/* A bucket holds at most this long's worth of its rate (its burst)... */
#define SBX_EGRESS_SHARE_BURST_NS (20LL * 1000 * 1000)
/* ...and a dry one is read again once it holds this long's worth (a step): a limited
 * tunnel wakes about 200 times a second, not once per few KiB... */
#define SBX_EGRESS_SHARE_STEP_NS (5LL * 1000 * 1000)
/* ...and both are at least this many bytes (a tunnel's smallest turn). */
#define SBX_EGRESS_SHARE_BYTES_MIN (64 * 1024)

/* The proxy's: what is shared, and who is sharing it. */
struct sbx_egress_share {
    uint64_t bandwidth; /* egress.bandwidth: bytes/s shared by active sandboxes; 0: off */
    int64_t window;     /* the current window (now / SBX_EGRESS_SHARE_WINDOW_NS) */
    size_t n_now;       /* sandboxes that asked in this window */
    size_t n_prev;      /* ... in the window before */
};

/* A sandbox's. Zeroed is a fresh bucket. */
struct sbx_egress_bucket {
    double tokens;   /* bytes it may move now (below 0 after a read past its grant) */
    int64_t last_ns; /* when tokens were last refilled; 0: never */
    int64_t window;  /* the window it last asked in, plus one (0: never) */
    int limited;     /* its last grant was limited (only then is a spend counted) */
};

/* The sandboxes that count as active at now_ns (the window moves on first). */
size_t sbx_egress_share_active(struct sbx_egress_share *s, int64_t now_ns);
/* A sandbox's rate at now_ns in bytes/s: bandwidth / active sandboxes, 0 (no limit)
 * when the share is off or fewer than two sandboxes are active. */
double sbx_egress_share_rate(struct sbx_egress_share *s, int64_t now_ns);
/* b's sandbox asks to move up to want bytes at now_ns (it becomes active): how many it
 * may move now, at most want (want itself when there is no limit); 0 when its bucket
 * holds less than a step (and less than want). Spend what was really moved with
 * sbx_egress_bucket_spend. */
uint64_t sbx_egress_share_grant(struct sbx_egress_share *s, struct sbx_egress_bucket *b,
                                int64_t now_ns, uint64_t want);
/* used bytes moved (after a grant). */
void sbx_egress_bucket_spend(struct sbx_egress_bucket *b, uint64_t used);
/* Nanoseconds from now_ns until b holds a step (0: it does, or there is no limit), at
 * most half a window: a tunnel waiting for its bucket asks again by then, so its
 * sandbox stays in the count while it waits. Call after a grant at now_ns. */
int64_t sbx_egress_share_wait_ns(struct sbx_egress_share *s, const struct sbx_egress_bucket *b,
                                 int64_t now_ns);

#endif
