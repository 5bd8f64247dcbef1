/* test_docker_remote_ids.c - updateRemoteUserUID in the Docker provider
 * (plugins/provider_docker/docker_poststart.c, dk_remote_ids) against a
 * scripted engine: the image's label dev.sbx.remote-ids "UID:GID" is the
 * remote user the worktree's owner becomes inside; the label is the image's
 * (untrusted), so anything but two ids of 1..65535 (uid) and 0..65535 (gid)
 * is none; a warm sandbox's claim finds the image through its container;
 * an engine error is none. */
#include "test_common.h"

#include <jansson.h>

#include "docker.h"
#include "plugin/host.h"
#include "plugin/options.h"

/* ---- the scripted engine -------------------------------------------- */

static const char *image_label; /* the label's value, or NULL: no label */
static long image_status = 200; /* of GET /images/.../json */
static char paths[2][512];      /* the requests, in order */
static int requests;

int dk_request(struct dk_ctx *c, const char *method, const char *path, json_t *body, long *status,
               json_t **reply, sbx_error_t **err)
{
    (void)c;
    (void)method;
    (void)body;
    (void)err;
    if (requests < 2) {
        snprintf(paths[requests], sizeof(paths[0]), "%s", path);
    }
    requests++;
    if (strncmp(path, "/containers/", 12) == 0) {
        *status = 200;
        *reply = json_pack("{s:s}", "Image", "sha256:feed");
        return 0;
    }
    *status = image_status;
    *reply = image_label != NULL
                 ? json_pack("{s:{s:{s:s}}}", "Config", "Labels", "dev.sbx.remote-ids", image_label)
                 : json_pack("{s:{s:{}}}", "Config", "Labels");
    return 0;
}

/* docker_poststart.c's postStartCommand runs through dk_exec: not here */
int dk_exec(void *ctx, const char *id, const struct sbx_exec_spec *spec, struct sbx_exec_ctl *ctl,
            int *exit_code, sbx_error_t **err)
{
    (void)ctx;
    (void)id;
    (void)spec;
    (void)ctl;
    (void)err;
    *exit_code = 0;
    return 0;
}

static struct dk_ctx ctx;

static int setup(void **state)
{
    (void)state;
    memset(&ctx, 0, sizeof(ctx));
    ctx.host = sbx_host_api_get();
    return 0;
}

static void ids_for(const char *label, unsigned want_uid, unsigned want_gid)
{
    unsigned uid = 99;
    unsigned gid = 99;

    image_label = label;
    image_status = 200;
    requests = 0;
    dk_remote_ids(&ctx, "sbx-sandbox:0123456789abcdef", NULL, &uid, &gid);
    if (uid != want_uid || gid != want_gid) {
        fail_msg("label '%s': %u:%u, want %u:%u", label ? label : "(none)", uid, gid, want_uid,
                 want_gid);
    }
    assert_int_equal(requests, 1);
    assert_string_equal(paths[0], "/images/sbx-sandbox%3A0123456789abcdef/json");
}

static void test_label(void **state)
{
    (void)state;
    ids_for("1234:1234", 1234, 1234);
    ids_for("1000:0", 1000, 0);
    ids_for("65535:65535", 65535, 65535);
}

static void test_none_or_refused(void **state)
{
    static const char *const bad[] = {
        "",          "0:0",   "0:1234", "65536:1", "1:65536",      "1234",
        "1234:",     ":1234", "-1:2",   "1:-2",    "1:2x",         " 1:2",
        "1:2 ",      "1:2:3", "0x10:1", "1e3:1",   "4294967297:1", "1:99999999999999999999",
        "root:root",
    };

    (void)state;
    ids_for(NULL, 0, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ids_for(bad[i], 0, 0);
    }
}

static void test_engine_error_is_none(void **state)
{
    unsigned uid = 99;
    unsigned gid = 99;

    (void)state;
    image_label = "1234:1234";
    image_status = 404;
    dk_remote_ids(&ctx, "gone:1", NULL, &uid, &gid);
    assert_int_equal(uid, 0);
    assert_int_equal(gid, 0);
    dk_remote_ids(&ctx, NULL, NULL, &uid, &gid);
    assert_int_equal(uid, 0);
}

/* a warm sandbox's claim: the image through the container */
static void test_claim_through_container(void **state)
{
    unsigned uid = 0;
    unsigned gid = 0;

    (void)state;
    image_label = "1234:100";
    image_status = 200;
    requests = 0;
    dk_remote_ids(&ctx, NULL, "abc123", &uid, &gid);
    assert_int_equal(requests, 2);
    assert_string_equal(paths[0], "/containers/abc123/json");
    assert_string_equal(paths[1], "/images/sha256%3Afeed/json");
    assert_int_equal(uid, 1234);
    assert_int_equal(gid, 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_label, setup),
        cmocka_unit_test_setup(test_none_or_refused, setup),
        cmocka_unit_test_setup(test_engine_error_is_none, setup),
        cmocka_unit_test_setup(test_claim_through_container, setup),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
