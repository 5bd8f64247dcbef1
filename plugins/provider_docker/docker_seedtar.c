/* docker_seedtar.c - shifts the owners of a `docker save` archive back from
 * the host engine's user remapping before it is loaded into a sidecar
 * (docs/testcontainers.md, "Seeding images").
 *
 * A layer of the host engine can carry host ids of the remapped range
 * (100000..165535 on the project's engines: a root filesystem written by a
 * sandbox and imported, for example). The inner daemon runs in the
 * sandbox's user namespace, where only 0..65535 exist, so loading such a
 * layer fails with "lchown /bin: invalid argument". Each layer's tar headers
 * are rewritten in place: an id in [base, base + count) becomes id - base,
 * an id below count is kept, any other id is refused. A layer's size does
 * not change, only its digest: the image config's rootfs.diff_ids are
 * replaced with the new digests (same length, so the outer archive keeps
 * its layout and only the config's bytes change).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "docker_seedtar.h"

#define BLOCK 512

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------ */

static const uint32_t k256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(uint32_t h[8], const unsigned char *p)
{
    uint32_t w[64];
    uint32_t a[8];

    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    }
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);

        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(a, h, sizeof(a));
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = a[7] + (ROR(a[4], 6) ^ ROR(a[4], 11) ^ ROR(a[4], 25)) +
                      ((a[4] & a[5]) ^ (~a[4] & a[6])) + k256[i] + w[i];
        uint32_t t2 = (ROR(a[0], 2) ^ ROR(a[0], 13) ^ ROR(a[0], 22)) +
                      ((a[0] & a[1]) ^ (a[0] & a[2]) ^ (a[1] & a[2]));

        memmove(a + 1, a, 7 * sizeof(uint32_t));
        a[4] += t1;
        a[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) {
        h[i] += a[i];
    }
}

void dk_sha256_hex(const void *data, size_t len, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const unsigned char *p = data;
    unsigned char tail[128] = {0};
    size_t full = len / 64 * 64;
    size_t rest = len - full;
    size_t tlen = rest < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;

    for (size_t off = 0; off < full; off += 64) {
        sha256_block(h, p + off);
    }
    memcpy(tail, p + full, rest);
    tail[rest] = 0x80;
    for (int i = 0; i < 8; i++) {
        tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
    }
    for (size_t off = 0; off < tlen; off += 64) {
        sha256_block(h, tail + off);
    }
    for (int i = 0; i < 32; i++) {
        unsigned char b = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));

        out[2 * i] = hex[b >> 4];
        out[2 * i + 1] = hex[b & 15];
    }
    out[64] = '\0';
}

/* ---- tar headers ---------------------------------------------------------- */

/* An octal field (NUL or space terminated). Base-256 and garbage: -1. */
static int64_t tar_octal(const unsigned char *f, size_t n)
{
    int64_t v = 0;
    size_t i = 0;

    if (f[0] & 0x80) {
        return -1;
    }
    while (i < n && f[i] == ' ') {
        i++;
    }
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > (INT64_MAX >> 3)) {
            return -1;
        }
        v = v * 8 + (f[i] - '0');
    }
    if (i < n && f[i] != '\0' && f[i] != ' ') {
        return -1;
    }
    return v;
}

static int tar_checksum_ok(const unsigned char *h)
{
    int64_t want = tar_octal(h + 148, 8);
    int64_t sum = 0;

    for (int i = 0; i < BLOCK; i++) {
        sum += (i >= 148 && i < 156) ? ' ' : h[i];
    }
    return want == sum;
}

static void tar_set_checksum(unsigned char *h)
{
    unsigned sum = 0;

    memset(h + 148, ' ', 8);
    for (int i = 0; i < BLOCK; i++) {
        sum += h[i];
    }
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

static int all_zero(const unsigned char *h)
{
    for (int i = 0; i < BLOCK; i++) {
        if (h[i] != 0) {
            return 0;
        }
    }
    return 1;
}

/* Walks the tar in buf; calls fn for each header. fn returns -1 to stop. */
typedef int (*tar_fn)(unsigned char *hdr, unsigned char *data, size_t size, void *arg);

static int tar_walk(unsigned char *buf, size_t len, tar_fn fn, void *arg, char *msg, size_t msz)
{
    size_t off = 0;

    while (off + BLOCK <= len) {
        unsigned char *h = buf + off;
        int64_t size;

        if (all_zero(h)) {
            return 0;
        }
        if (!tar_checksum_ok(h)) {
            snprintf(msg, msz, "bad tar header checksum at byte %zu", off);
            return -1;
        }
        size = tar_octal(h + 124, 12);
        if (size < 0 || (uint64_t)size > len - off - BLOCK) {
            snprintf(msg, msz, "bad or truncated tar entry size at byte %zu", off);
            return -1;
        }
        if (fn != NULL && fn(h, h + BLOCK, (size_t)size, arg) < 0) {
            return -1;
        }
        off += BLOCK + ((size_t)size + BLOCK - 1) / BLOCK * BLOCK;
    }
    snprintf(msg, msz, "tar archive ends without its end blocks");
    return -1;
}

/* ---- one layer ------------------------------------------------------------ */

struct shift {
    unsigned base_uid;
    unsigned base_gid;
    unsigned count;
    int changed;
    char *msg;
    size_t msz;
};

static int shift_field(struct shift *s, unsigned char *f, unsigned base, const char *what,
                       const unsigned char *hdr)
{
    int64_t id = tar_octal(f, 8);

    if (id >= 0 && id < s->count) {
        return 0;
    }
    if (id >= base && id < (int64_t)base + s->count) {
        snprintf((char *)f, 8, "%07o", (unsigned)(id - base));
        s->changed = 1;
        return 0;
    }
    snprintf(s->msg, s->msz, "'%.100s' is owned by %s %lld, outside 0-%u and the remapped %u-%u",
             (const char *)hdr, what, (long long)id, s->count - 1, base, base + s->count - 1);
    return -1;
}

/* PAX records may carry ids too (Go writes them only for ids above
 * 2097151, which no range here reaches): refused. */
static int pax_has_ids(const unsigned char *data, size_t size)
{
    size_t off = 0;

    while (off < size) {
        size_t n = 0;
        size_t i = off;

        while (i < size && data[i] >= '0' && data[i] <= '9' && n < size) {
            n = n * 10 + (size_t)(data[i++] - '0');
        }
        if (n == 0 || n > size - off || i >= size || data[i] != ' ') {
            return 1; /* malformed: refuse rather than guess */
        }
        i++;
        if ((off + n - i >= 4 && memcmp(data + i, "uid=", 4) == 0) ||
            (off + n - i >= 4 && memcmp(data + i, "gid=", 4) == 0)) {
            return 1;
        }
        off += n;
    }
    return 0;
}

static int shift_entry(unsigned char *h, unsigned char *data, size_t size, void *arg)
{
    struct shift *s = arg;
    char type = (char)h[156];

    if (type == 'x' || type == 'g') {
        if (pax_has_ids(data, size)) {
            snprintf(s->msg, s->msz, "a PAX header carries owner ids (or is malformed)");
            return -1;
        }
        return 0;
    }
    if (type == 'L' || type == 'K') {
        return 0;
    }
    if (shift_field(s, h + 108, s->base_uid, "uid", h) < 0 ||
        shift_field(s, h + 116, s->base_gid, "gid", h) < 0) {
        return -1;
    }
    tar_set_checksum(h);
    return 0;
}

/* ---- the outer archive ---------------------------------------------------- */

struct entry {
    char name[257];
    char link[101];
    unsigned char *data;
    size_t size;
    char type;
};

struct outer {
    struct entry *e;
    size_t n;
    size_t cap;
};

static int collect(unsigned char *h, unsigned char *data, size_t size, void *arg)
{
    struct outer *o = arg;
    struct entry *e;

    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;

        if (cap > 65536) {
            return -1;
        }
        o->e = realloc(o->e, cap * sizeof(*o->e));
        if (o->e == NULL) {
            abort();
        }
        o->cap = cap;
    }
    e = &o->e[o->n++];
    if (h[345] != '\0') {
        snprintf(e->name, sizeof(e->name), "%.155s/%.100s", (const char *)h + 345, (const char *)h);
    }
    else {
        snprintf(e->name, sizeof(e->name), "%.100s", (const char *)h);
    }
    e->data = data;
    e->size = size;
    e->type = (char)h[156];
    snprintf(e->link, sizeof(e->link), "%.100s", (const char *)h + 157);
    return 0;
}

static struct entry *find(struct outer *o, const char *name)
{
    for (size_t i = 0; i < o->n; i++) {
        if (strcmp(o->e[i].name, name) == 0) {
            return &o->e[i];
        }
    }
    return NULL;
}

/* A layer path of the manifest, following one symlink (docker save links a
 * layer it already wrote: "../<dir>/layer.tar"). */
static struct entry *find_layer(struct outer *o, const char *path)
{
    struct entry *e = find(o, path);

    if (e != NULL && e->type == '2') {
        e = strncmp(e->link, "../", 3) == 0 ? find(o, e->link + 3) : NULL;
    }
    if (e == NULL || (e->type != '0' && e->type != '\0')) {
        return NULL;
    }
    return e;
}

/* Replaces every occurrence of old with new (same length) in the config;
 * returns how many there were. */
static int replace_digest(struct entry *cfg, const char *old, const char *new)
{
    size_t n = strlen(old);
    int hits = 0;

    for (size_t i = 0; i + n <= cfg->size; i++) {
        if (memcmp(cfg->data + i, old, n) == 0) {
            memcpy(cfg->data + i, new, n);
            hits++;
        }
    }
    return hits;
}

/* Whether diff_ids[0..i) holds id (a layer listed twice, already done). */
static int seen_before(json_t *diff_ids, size_t i, const char *id)
{
    for (size_t j = 0; j < i; j++) {
        if (strcmp(json_string_value(json_array_get(diff_ids, j)), id) == 0) {
            return 1;
        }
    }
    return 0;
}

static int shift_image(struct outer *o, json_t *item, struct shift *s)
{
    const char *cname = json_string_value(json_object_get(item, "Config"));
    json_t *layers = json_object_get(item, "Layers");
    struct entry *cfg = cname != NULL ? find(o, cname) : NULL;
    json_t *conf;
    json_t *diff_ids;
    size_t i;
    json_t *l;

    if (cfg == NULL || !json_is_array(layers)) {
        snprintf(s->msg, s->msz, "manifest.json: no config or layers for an image");
        return -1;
    }
    conf = json_loadb((const char *)cfg->data, cfg->size, 0, NULL);
    diff_ids = json_object_get(json_object_get(conf, "rootfs"), "diff_ids");
    if (!json_is_array(diff_ids) || json_array_size(diff_ids) != json_array_size(layers)) {
        snprintf(s->msg, s->msz, "%.100s: rootfs.diff_ids do not match the manifest's layers",
                 cname);
        json_decref(conf);
        return -1;
    }
    json_array_foreach(layers, i, l)
    {
        const char *path = json_string_value(l);
        const char *old = json_string_value(json_array_get(diff_ids, i));
        struct entry *e = path != NULL ? find_layer(o, path) : NULL;
        char now[72] = "sha256:";
        char why[300];

        if (e == NULL || old == NULL || strlen(old) != 71) {
            snprintf(s->msg, s->msz, "layer %zu (%.100s): not a plain layer.tar in the archive", i,
                     path ? path : "?");
            json_decref(conf);
            return -1;
        }
        if (e->size >= 2 && e->data[0] == 0x1f && e->data[1] == 0x8b) {
            snprintf(s->msg, s->msz, "compressed layers are not supported");
        }
        else if (tar_walk(e->data, e->size, shift_entry, s, s->msg, s->msz) == 0) {
            dk_sha256_hex(e->data, e->size, now + 7);
            if (strcmp(now, old) == 0) {
                continue;
            }
            if (replace_digest(cfg, old, now) > 0 || seen_before(diff_ids, i, old)) {
                continue;
            }
            snprintf(s->msg, s->msz, "its diff id is not in the image config");
        }
        snprintf(why, sizeof(why), "%s", s->msg);
        snprintf(s->msg, s->msz, "layer %zu: %s", i, why);
        json_decref(conf);
        return -1;
    }
    json_decref(conf);
    return 0;
}

int dk_seed_shift(unsigned char *buf, size_t len, unsigned base_uid, unsigned base_gid,
                  unsigned count, int *changed, char *msg, size_t msz)
{
    struct outer o = {0};
    struct entry *man;
    json_t *m = NULL;
    json_t *item;
    size_t i;
    int r = -1;
    struct shift s = {base_uid, base_gid, count, 0, NULL, 0};

    *changed = 0;
    if (base_uid < count || base_gid < count || count == 0) {
        snprintf(msg, msz, "remapped base %u:%u overlaps the container ids 0-%u", base_uid,
                 base_gid, count - 1);
        return -1;
    }
    if (tar_walk(buf, len, collect, &o, msg, msz) < 0) {
        if (o.n >= 65536) {
            snprintf(msg, msz, "more than 65536 entries in the archive");
        }
        goto out;
    }
    man = find(&o, "manifest.json");
    if (man != NULL) {
        m = json_loadb((const char *)man->data, man->size, 0, NULL);
    }
    if (!json_is_array(m)) {
        snprintf(msg, msz, "no manifest.json array in the archive");
        goto out;
    }
    s.msg = msg;
    s.msz = msz;
    json_array_foreach(m, i, item)
    {
        if (shift_image(&o, item, &s) < 0) {
            goto out;
        }
    }
    *changed = s.changed;
    r = 0;
out:
    json_decref(m);
    free(o.e);
    return r;
}
