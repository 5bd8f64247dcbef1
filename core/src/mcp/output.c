/* output.c - capturing a command's output for a model: capped (head and
 * tail), always valid UTF-8. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/backend.h"
#include "util/xalloc.h"

#define HALF (SBX_MCP_OUTPUT_CAP / 2)

void sbx_mcp_outbuf_add(struct sbx_mcp_outbuf *b, const char *data, size_t len)
{
    b->total += len;
    if (b->head_len < HALF) {
        size_t n = len < HALF - b->head_len ? len : HALF - b->head_len;

        if (b->head == NULL) {
            b->head = xmalloc(HALF);
        }
        memcpy(b->head + b->head_len, data, n);
        b->head_len += n;
        data += n;
        len -= n;
    }
    if (len == 0) {
        return;
    }
    if (b->tail == NULL) {
        b->tail = xmalloc(HALF);
    }
    if (len >= HALF) { /* only the last HALF bytes matter */
        memcpy(b->tail, data + len - HALF, HALF);
        b->tail_len = HALF;
        b->tail_pos = 0;
        return;
    }
    for (size_t i = 0; i < len; i++) {
        b->tail[b->tail_pos] = data[i];
        b->tail_pos = (b->tail_pos + 1) % HALF;
    }
    b->tail_len = b->tail_len + len > HALF ? HALF : b->tail_len + len;
}

/* Length of a valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    size_t need;
    unsigned cp;

    if (s[0] < 0x80) {
        return s[0] == 0 ? 0 : 1;
    }
    if (s[0] >= 0xc2 && s[0] <= 0xdf) {
        need = 2;
        cp = s[0] & 0x1f;
    }
    else if (s[0] >= 0xe0 && s[0] <= 0xef) {
        need = 3;
        cp = s[0] & 0x0f;
    }
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
        need = 4;
        cp = s[0] & 0x07;
    }
    else {
        return 0;
    }
    if (n < need) {
        return 0;
    }
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((need == 3 && cp < 0x800) || (need == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
        return 0;
    }
    return need;
}

char *sbx_mcp_utf8_clean(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    char *out = xmalloc(len * 3 + 1);
    size_t o = 0;

    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(u + i, len - i);

        if (k == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, u + i, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
    return out;
}

char *sbx_mcp_outbuf_text(const struct sbx_mcp_outbuf *b, int *truncated)
{
    char *raw;
    size_t n = 0;
    char *clean;

    *truncated = b->total > b->head_len + b->tail_len;
    raw = xmalloc(b->head_len + b->tail_len + 96);
    if (b->head_len > 0) {
        memcpy(raw, b->head, b->head_len);
        n = b->head_len;
    }
    if (*truncated) {
        n += (size_t)sprintf(raw + n, "\n[... %" PRIu64 " bytes omitted ...]\n",
                             b->total - b->head_len - b->tail_len);
    }
    if (b->tail_len > 0) {
        size_t start = b->tail_len < HALF ? 0 : b->tail_pos;

        for (size_t i = 0; i < b->tail_len; i++) {
            raw[n++] = b->tail[(start + i) % HALF];
        }
    }
    clean = sbx_mcp_utf8_clean(raw, n);
    free(raw);
    return clean;
}

void sbx_mcp_outbuf_free(struct sbx_mcp_outbuf *b)
{
    free(b->head);
    free(b->tail);
    memset(b, 0, sizeof(*b));
}
