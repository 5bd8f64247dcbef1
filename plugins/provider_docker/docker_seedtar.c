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
#include "util/sha256.h"

#define BLOCK 512

/* ---- SHA-256: the core's (util/sha256.c, compiled into this plugin) ---------- */

void dk_sha256_hex(const void *data, size_t len, char out[65])
{
    struct sbx_sha256 s;

    sbx_sha256_init(&s);
    sbx_sha256_update(&s, data, len);
    sbx_sha256_hex(&s, out);
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
