/* redact.c - streaming redaction of secret values (see redact.h). */
#include "cred/redact.h"

#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "util/xalloc.h"

struct redact_secret {
    char *name;
    char *value;
    size_t len;
    char *marker; /* "[redacted:NAME]" */
    size_t marker_len;
};

struct sbx_redactor {
    struct redact_secret *v;
    size_t n;
    size_t max_len;
    unsigned char first[256]; /* non-zero: some value starts with this byte */
    size_t *bucket[256];      /* the secrets starting with each byte */
    size_t bucket_n[256];
};

struct sbx_redact_stream {
    const struct sbx_redactor *r;
    sbx_redact_sink_fn sink;
    void *userdata;
    char *held; /* undecided tail of the previous chunk, < max_len bytes */
    size_t held_len;
    size_t suppress; /* bytes from the current position inside a redacted run */
    long run;        /* secret named by the run's last marker, -1 outside a run */
    char *out;       /* filtered output of one call */
    size_t out_len;
    size_t out_cap;
};

struct sbx_redactor *sbx_redactor_create(void)
{
    return xcalloc(1, sizeof(struct sbx_redactor));
}

int sbx_redactor_add(struct sbx_redactor *r, const char *name, const char *value)
{
    struct redact_secret *s;
    size_t len = strlen(value);
    unsigned char c;

    if (len < SBX_REDACT_MIN_LEN) {
        return 1;
    }
    r->v = xrealloc(r->v, (r->n + 1) * sizeof(*r->v));
    s = &r->v[r->n++];
    s->name = xstrdup(name);
    s->value = xstrdup(value);
    s->len = len;
    s->marker = xasprintf(SBX_REDACT_MARKER_OPEN "%s" SBX_REDACT_MARKER_CLOSE, name);
    s->marker_len = strlen(s->marker);
    if (len > r->max_len) {
        r->max_len = len;
    }
    c = (unsigned char)value[0];
    r->first[c] = 1;
    r->bucket[c] = xrealloc(r->bucket[c], (r->bucket_n[c] + 1) * sizeof(size_t));
    r->bucket[c][r->bucket_n[c]++] = r->n - 1;
    return 0;
}

size_t sbx_redactor_count(const struct sbx_redactor *r)
{
    return r ? r->n : 0;
}

struct sbx_redactor *sbx_redactor_from_lease(const struct sbx_lease *lease)
{
    struct sbx_redactor *r = sbx_redactor_create();

    for (size_t i = 0; lease != NULL && i < lease->n_secrets; i++) {
        if (sbx_redactor_add(r, lease->secrets[i].name, lease->secrets[i].value) != 0) {
            sbx_log(SBX_LOG_WARN,
                    "credentials: lease %s: the value of %s is shorter than %d "
                    "bytes and will not be redacted from output",
                    lease->id, lease->secrets[i].name, SBX_REDACT_MIN_LEN);
        }
    }
    return r;
}

void sbx_redactor_destroy(struct sbx_redactor *r)
{
    if (r == NULL) {
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        explicit_bzero(r->v[i].value, r->v[i].len);
        free(r->v[i].value);
        free(r->v[i].name);
        free(r->v[i].marker);
    }
    free(r->v);
    for (size_t c = 0; c < 256; c++) {
        free(r->bucket[c]);
    }
    explicit_bzero(r, sizeof(*r));
    free(r);
}

struct sbx_redact_stream *sbx_redact_stream_new(const struct sbx_redactor *r,
                                                sbx_redact_sink_fn sink, void *userdata)
{
    struct sbx_redact_stream *s = xcalloc(1, sizeof(*s));

    s->r = r;
    s->sink = sink;
    s->userdata = userdata;
    s->run = -1;
    s->held = xmalloc(r->max_len > 0 ? r->max_len : 1);
    return s;
}

static void out_put(struct sbx_redact_stream *s, const char *p, size_t n)
{
    if (s->out_len + n > s->out_cap) {
        s->out_cap = (s->out_len + n) * 2;
        s->out = xrealloc(s->out, s->out_cap);
    }
    memcpy(s->out + s->out_len, p, n);
    s->out_len += n;
}

/* Decides every position of buf that can be decided; returns how many bytes
 * were consumed (the rest must be held back). With final, all of them. */
static size_t process(struct sbx_redact_stream *s, const char *buf, size_t len, int final)
{
    const struct sbx_redactor *r = s->r;
    size_t i = 0;
    size_t lit = 0; /* start of the pending literal run */

    while (i < len) {
        long best = -1;
        size_t best_len = 0;
        int partial = 0;

        if (s->suppress == 0) { /* fast path: bytes that start no value */
            while (i < len && !r->first[(unsigned char)buf[i]]) {
                i++;
            }
            if (i == len) {
                break;
            }
        }
        if (r->first[(unsigned char)buf[i]]) {
            unsigned char c = (unsigned char)buf[i];
            size_t avail = len - i;

            for (size_t b = 0; b < r->bucket_n[c]; b++) {
                size_t k = r->bucket[c][b];
                const struct redact_secret *v = &r->v[k];

                if (avail >= 2 && v->value[1] != buf[i + 1]) {
                    continue; /* every value has at least SBX_REDACT_MIN_LEN bytes */
                }
                if (avail >= v->len) {
                    if (v->len > best_len && memcmp(buf + i, v->value, v->len) == 0) {
                        best = (long)k;
                        best_len = v->len;
                    }
                }
                else if (!final && memcmp(buf + i, v->value, avail) == 0) {
                    partial = 1;
                }
            }
        }
        if (partial) {
            break; /* a longer value may still match here: wait for more */
        }
        if (best >= 0 && best_len > s->suppress) {
            if (s->suppress == 0 || best != s->run) {
                if (lit < i) {
                    out_put(s, buf + lit, i - lit);
                }
                lit = i;
                out_put(s, r->v[best].marker, r->v[best].marker_len);
                s->run = best;
            }
            s->suppress = best_len;
        }
        if (s->suppress > 0) {
            if (lit < i) {
                out_put(s, buf + lit, i - lit);
            }
            s->suppress--;
            if (s->suppress == 0) {
                s->run = -1;
            }
            lit = i + 1;
        }
        i++;
    }
    if (lit < i) {
        out_put(s, buf + lit, i - lit);
    }
    return i;
}

static int deliver(struct sbx_redact_stream *s, sbx_error_t **err)
{
    int r = 0;

    if (s->out_len > 0 && s->sink != NULL && s->sink(s->userdata, s->out, s->out_len) != 0) {
        r = sbx_error_set(err, SBX_E_GENERIC, "redact: the output sink stopped");
    }
    s->out_len = 0;
    return r;
}

int sbx_redact_stream_write(struct sbx_redact_stream *s, const void *data, size_t len,
                            sbx_error_t **err)
{
    const char *buf = data;
    char *work = NULL;
    size_t total = len;
    size_t used;

    if (len == 0) {
        return 0;
    }
    if (s->held_len > 0) {
        total = s->held_len + len;
        work = xmalloc(total);
        memcpy(work, s->held, s->held_len);
        memcpy(work + s->held_len, data, len);
        buf = work;
    }
    used = process(s, buf, total, 0);
    s->held_len = total - used; /* < max_len by construction */
    memmove(s->held, buf + used, s->held_len);
    if (work != NULL) {
        explicit_bzero(work, total);
        free(work);
    }
    return deliver(s, err);
}

int sbx_redact_stream_finish(struct sbx_redact_stream *s, sbx_error_t **err)
{
    process(s, s->held, s->held_len, 1);
    explicit_bzero(s->held, s->held_len);
    s->held_len = 0;
    s->suppress = 0;
    s->run = -1;
    return deliver(s, err);
}

void sbx_redact_stream_free(struct sbx_redact_stream *s)
{
    if (s == NULL) {
        return;
    }
    explicit_bzero(s->held, s->r->max_len > 0 ? s->r->max_len : 1);
    free(s->held);
    if (s->out != NULL) {
        explicit_bzero(s->out, s->out_cap);
        free(s->out);
    }
    free(s);
}

struct grow {
    char *p;
    size_t len;
    size_t cap;
};

static int grow_sink(void *ud, const char *data, size_t len)
{
    struct grow *g = ud;

    if (g->len + len + 1 > g->cap) {
        g->cap = (g->len + len + 1) * 2;
        g->p = xrealloc(g->p, g->cap);
    }
    memcpy(g->p + g->len, data, len);
    g->len += len;
    g->p[g->len] = '\0';
    return 0;
}

char *sbx_redact_buffer(const struct sbx_redactor *r, const void *data, size_t len, size_t *out_len)
{
    struct grow g = {.p = xstrdup(""), .len = 0, .cap = 1};
    struct sbx_redact_stream *s = sbx_redact_stream_new(r, grow_sink, &g);

    /* grow_sink never refuses, so neither call can fail */
    sbx_redact_stream_write(s, data, len, NULL);
    sbx_redact_stream_finish(s, NULL);
    sbx_redact_stream_free(s);
    if (out_len != NULL) {
        *out_len = g.len;
    }
    return g.p;
}
