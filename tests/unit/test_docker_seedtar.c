/* test_docker_seedtar.c - a `docker save` archive's owners shifted back from
 * the engine's user remapping (plugins/provider_docker/docker_seedtar.c):
 * ids in the remapped range move down, the config's diff_ids follow the new
 * layer digests, ids outside both ranges and broken archives are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "docker_seedtar.h"

#define BASE 100000u
#define COUNT 65536u

struct buf {
    unsigned char *p;
    size_t len;
};

static void put_header(struct buf *b, const char *name, char type, size_t size, unsigned uid,
                       unsigned gid, const char *link)
{
    unsigned char h[512] = {0};
    unsigned sum = 0;

    snprintf((char *)h, 100, "%s", name);
    snprintf((char *)h + 100, 8, "%07o", 0644);
    snprintf((char *)h + 108, 8, "%07o", uid);
    snprintf((char *)h + 116, 8, "%07o", gid);
    snprintf((char *)h + 124, 12, "%011zo", size);
    snprintf((char *)h + 136, 12, "%011o", 0);
    h[156] = (unsigned char)type;
    if (link != NULL) {
        snprintf((char *)h + 157, 100, "%s", link);
    }
    memcpy(h + 257,
           "ustar\0"
           "00",
           8);
    memset(h + 148, ' ', 8);
    for (int i = 0; i < 512; i++) {
        sum += h[i];
    }
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
    b->p = realloc(b->p, b->len + 512);
    memcpy(b->p + b->len, h, 512);
    b->len += 512;
}

static void put_data(struct buf *b, const void *data, size_t size)
{
    size_t padded = (size + 511) / 512 * 512;

    b->p = realloc(b->p, b->len + padded);
    memset(b->p + b->len, 0, padded);
    memcpy(b->p + b->len, data, size);
    b->len += padded;
}

static void put_file(struct buf *b, const char *name, const void *data, size_t size, unsigned uid,
                     unsigned gid)
{
    put_header(b, name, '0', size, uid, gid, NULL);
    put_data(b, data, size);
}

static void put_end(struct buf *b)
{
    static const unsigned char zero[1024];

    put_data(b, zero, sizeof(zero));
}

/* A layer: /bin (dir) and /bin/x owned by uid/gid. */
static struct buf layer(unsigned uid, unsigned gid)
{
    struct buf b = {0};

    put_header(&b, "bin/", '5', 0, uid, gid, NULL);
    put_file(&b, "bin/x", "hello\n", 6, uid, gid);
    put_end(&b);
    return b;
}

static char *digest(const struct buf *b)
{
    char hex[65];
    char *out = NULL;

    dk_sha256_hex(b->p, b->len, hex);
    assert_true(asprintf(&out, "sha256:%s", hex) > 0);
    return out;
}

/* An archive: two layers (the second a symlink to the first when linked),
 * their config and the manifest. */
static struct buf archive(struct buf *l1, struct buf *l2, int linked, char **d1, char **d2)
{
    struct buf b = {0};
    char *config = NULL;
    const char *manifest = "[{\"Config\":\"cfg.json\",\"RepoTags\":[\"t:1\"],"
                           "\"Layers\":[\"aaa/layer.tar\",\"bbb/layer.tar\"]}]";

    *d1 = digest(l1);
    *d2 = digest(linked ? l1 : l2);
    assert_true(asprintf(&config,
                         "{\"architecture\":\"amd64\",\"os\":\"linux\",\"rootfs\":"
                         "{\"type\":\"layers\",\"diff_ids\":[\"%s\",\"%s\"]}}",
                         *d1, *d2) > 0);
    put_header(&b, "aaa/", '5', 0, 0, 0, NULL);
    put_file(&b, "aaa/layer.tar", l1->p, l1->len, 0, 0);
    put_header(&b, "bbb/", '5', 0, 0, 0, NULL);
    if (linked) {
        put_header(&b, "bbb/layer.tar", '2', 0, 0, 0, "../aaa/layer.tar");
    }
    else {
        put_file(&b, "bbb/layer.tar", l2->p, l2->len, 0, 0);
    }
    put_file(&b, "cfg.json", config, strlen(config), 0, 0);
    put_file(&b, "manifest.json", manifest, strlen(manifest), 0, 0);
    put_end(&b);
    free(config);
    return b;
}

/* The config's text inside the archive. */
static const char *config_of(const struct buf *b)
{
    for (size_t off = 0; off + 512 <= b->len; off += 512) {
        if (strcmp((const char *)b->p + off, "cfg.json") == 0) {
            return (const char *)b->p + off + 512;
        }
    }
    fail();
    return NULL;
}

static unsigned owner_in(const struct buf *b, const char *layer_dir, const char *name, int gid)
{
    for (size_t off = 0; off + 512 <= b->len; off += 512) {
        char want[64];

        snprintf(want, sizeof(want), "%s/layer.tar", layer_dir);
        if (strcmp((const char *)b->p + off, want) == 0) {
            const unsigned char *l = b->p + off + 512;

            for (size_t o = 0;; o += 512) {
                if (strcmp((const char *)l + o, name) == 0) {
                    return (unsigned)strtoul((const char *)l + o + (gid ? 116 : 108), NULL, 8);
                }
            }
        }
    }
    fail();
    return 0;
}

static void test_sha256_vectors(void **state)
{
    char hex[65];
    char big[1000];

    (void)state;
    dk_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    dk_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    dk_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    memset(big, 'a', sizeof(big));
    dk_sha256_hex(big, sizeof(big), hex);
    assert_string_equal(hex, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

static void test_shifts_remapped_ids(void **state)
{
    struct buf l1 = layer(BASE, BASE + 5);
    struct buf l2 = layer(0, 0);
    struct buf shifted = layer(0, 5);
    char *d1 = NULL;
    char *d2 = NULL;
    char *want = digest(&shifted);
    struct buf a = archive(&l1, &l2, 0, &d1, &d2);
    size_t len = a.len;
    char msg[300] = "";
    int changed = -1;

    (void)state;
    assert_int_equal(dk_seed_shift(a.p, a.len, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), 0);
    assert_int_equal(changed, 1);
    assert_int_equal(a.len, len);
    assert_int_equal(owner_in(&a, "aaa", "bin/x", 0), 0);
    assert_int_equal(owner_in(&a, "aaa", "bin/x", 1), 5);
    assert_int_equal(owner_in(&a, "aaa", "bin/", 0), 0);
    /* the first diff id is the shifted layer's digest, the second unchanged */
    assert_non_null(strstr(config_of(&a), want));
    assert_null(strstr(config_of(&a), d1));
    assert_non_null(strstr(config_of(&a), d2));
    free(want);
    free(d1);
    free(d2);
    free(a.p);
    free(l1.p);
    free(l2.p);
    free(shifted.p);
}

static void test_container_ids_unchanged(void **state)
{
    struct buf l1 = layer(0, 0);
    struct buf l2 = layer(1000, 65535);
    char *d1 = NULL;
    char *d2 = NULL;
    struct buf a = archive(&l1, &l2, 0, &d1, &d2);
    unsigned char *copy = malloc(a.len);
    char msg[300] = "";
    int changed = -1;

    (void)state;
    memcpy(copy, a.p, a.len);
    assert_int_equal(dk_seed_shift(a.p, a.len, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), 0);
    assert_int_equal(changed, 0);
    assert_memory_equal(a.p, copy, a.len);
    free(copy);
    free(d1);
    free(d2);
    free(a.p);
    free(l1.p);
    free(l2.p);
}

static void test_linked_layer(void **state)
{
    struct buf l1 = layer(BASE + 1, BASE + 1);
    struct buf shifted = layer(1, 1);
    char *d1 = NULL;
    char *d2 = NULL;
    char *want = digest(&shifted);
    struct buf a = archive(&l1, NULL, 1, &d1, &d2);
    char msg[300] = "";
    int changed = 0;
    const char *cfg;

    (void)state;
    /* the same layer twice (docker save links the second to the first):
     * shifted once, both diff ids follow */
    assert_int_equal(dk_seed_shift(a.p, a.len, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), 0);
    assert_int_equal(changed, 1);
    assert_int_equal(owner_in(&a, "aaa", "bin/x", 0), 1);
    cfg = config_of(&a);
    assert_non_null(strstr(cfg, want));
    assert_non_null(strstr(strstr(cfg, want) + 1, want));
    assert_null(strstr(cfg, d1));
    free(want);
    free(d1);
    free(d2);
    free(a.p);
    free(l1.p);
    free(shifted.p);
}

static void test_refuses_foreign_ids(void **state)
{
    struct buf l1 = layer(0, 0);
    struct buf l2 = layer(70000, 0);
    char *d1 = NULL;
    char *d2 = NULL;
    struct buf a = archive(&l1, &l2, 0, &d1, &d2);
    char msg[300] = "";
    int changed = 0;

    (void)state;
    assert_int_equal(dk_seed_shift(a.p, a.len, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "layer 1: 'bin/' is owned by uid 70000, outside 0-65535 and the "
                             "remapped 100000-165535");
    free(d1);
    free(d2);
    free(a.p);
    free(l1.p);
    free(l2.p);
}

static void test_refuses_broken_archives(void **state)
{
    struct buf l1 = layer(BASE, BASE);
    struct buf l2 = layer(0, 0);
    char *d1 = NULL;
    char *d2 = NULL;
    struct buf a = archive(&l1, &l2, 0, &d1, &d2);
    struct buf nomanifest = {0};
    char msg[300] = "";
    int changed = 0;

    (void)state;
    /* truncated: the end blocks are gone; or inside the first layer */
    assert_int_equal(
        dk_seed_shift(a.p, a.len - 1024, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "tar archive ends without its end blocks");
    assert_int_equal(dk_seed_shift(a.p, 1536, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "bad or truncated tar entry size at byte 512");
    /* a corrupted header */
    a.p[5] ^= 1;
    assert_int_equal(dk_seed_shift(a.p, a.len, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), -1);
    assert_string_equal(msg, "bad tar header checksum at byte 0");
    a.p[5] ^= 1;
    /* no manifest */
    put_file(&nomanifest, "x", "y", 1, 0, 0);
    put_end(&nomanifest);
    assert_int_equal(
        dk_seed_shift(nomanifest.p, nomanifest.len, BASE, BASE, COUNT, &changed, msg, sizeof(msg)),
        -1);
    assert_string_equal(msg, "no manifest.json array in the archive");
    /* a base overlapping the container ids */
    assert_int_equal(dk_seed_shift(a.p, a.len, 1000, 1000, COUNT, &changed, msg, sizeof(msg)), -1);
    assert_non_null(strstr(msg, "overlaps the container ids"));
    /* empty input */
    assert_int_equal(dk_seed_shift(a.p, 0, BASE, BASE, COUNT, &changed, msg, sizeof(msg)), -1);
    free(nomanifest.p);
    free(d1);
    free(d2);
    free(a.p);
    free(l1.p);
    free(l2.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_vectors),
        cmocka_unit_test(test_shifts_remapped_ids),
        cmocka_unit_test(test_container_ids_unchanged),
        cmocka_unit_test(test_linked_layer),
        cmocka_unit_test(test_refuses_foreign_ids),
        cmocka_unit_test(test_refuses_broken_archives),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
