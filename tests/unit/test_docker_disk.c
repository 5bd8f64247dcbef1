/* test_docker_disk.c - the Docker provider's disk cap
 * (plugins/provider_docker/docker_disk.c) against a scripted engine: the
 * mechanism each storage driver gets, the quota's size (the image counts on
 * btrfs), the fall-back when overlay2 on xfs lacks pquota, and the watchdog:
 * it fails closed when the engine's size query errors, fails when the layer
 * is over the cap, measures at each command's end and only every interval in
 * between, and costs nothing under a quota. */
#include "test_common.h"

#include <jansson.h>

#include "docker.h"
#include "plugin/host.h"
#include "plugin/options.h"

/* ---- the scripted engine: dk_request and friends (docker_api.c) -------- */

static int next_transport_fail; /* the next request fails before any status */
static long next_status = 200;
static const char *next_body; /* JSON of the next reply, or NULL */
static int requests;
static char last_path[512];

int dk_request(struct dk_ctx *c, const char *method, const char *path, json_t *body, long *status,
               json_t **reply, sbx_error_t **err)
{
    (void)method;
    (void)body;
    requests++;
    snprintf(last_path, sizeof(last_path), "%s", path);
    if (next_transport_fail) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker engine at /x.sock: Timeout was "
                                  "reached");
    }
    *status = next_status;
    *reply = next_body ? json_loads(next_body, 0, NULL) : json_object();
    return 0;
}

const char *dk_reply_message(json_t *reply)
{
    const char *m = json_string_value(json_object_get(reply, "message"));

    return m ? m : "no message";
}

static struct sbx_options opts = {.instance = "docker"};

static void engine(long status, const char *body)
{
    next_transport_fail = 0;
    next_status = status;
    next_body = body;
}

/* docker_loopcap.c is not linked here: its probe says what each test sets */
static int loop_ok;

int dk_loopcap_available(char *why, size_t len)
{
    snprintf(why, len, "%s", loop_ok ? "" : "sbx does not run as root");
    return loop_ok;
}

int dk_loopcap_apply(struct dk_ctx *c, const char *id, int64_t bytes, sbx_error_t **err)
{
    (void)c;
    (void)id;
    (void)bytes;
    (void)err;
    return 0;
}

static void ctx_for(struct dk_ctx *c, const char *driver, const char *fs, const char *mode)
{
    sbx_error_t *err = NULL;

    memset(c, 0, sizeof(*c));
    c->host = sbx_host_api_get();
    c->opts = &opts;
    c->disk_interval = 60;
    snprintf(c->storage_driver, sizeof(c->storage_driver), "%s", driver);
    snprintf(c->backing_fs, sizeof(c->backing_fs), "%s", fs);
    if (dk_disk_init(c, mode, &err) < 0) {
        fail_msg("dk_disk_init: %s", err->msg);
    }
}

static const char *describe(struct dk_ctx *c)
{
    static char buf[320];

    dk_disk_describe(c, buf, sizeof(buf));
    return buf;
}

static void test_mechanism_per_driver(void **state)
{
    struct dk_ctx c;
    sbx_error_t *err = NULL;

    (void)state;
    ctx_for(&c, "btrfs", "btrfs", "auto");
    assert_true(dk_disk_quota(&c));
    assert_string_equal(describe(&c), "btrfs quota (storage-opt size)");
    dk_disk_free(&c);

    /* overlay2 on ext4 as root with loop devices: a filesystem per sandbox */
    loop_ok = 1;
    ctx_for(&c, "overlay2", "extfs", "auto");
    assert_false(dk_disk_quota(&c));
    assert_int_equal(dk_disk_mode(&c), DK_DISK_LOOP);
    assert_non_null(strstr(describe(&c), "per-sandbox ext4 (a sparse loop-mounted filesystem"));
    dk_disk_free(&c);
    ctx_for(&c, "overlay2", "extfs", "loop");
    assert_int_equal(dk_disk_mode(&c), DK_DISK_LOOP);
    dk_disk_free(&c);
    /* btrfs keeps its quota under auto */
    ctx_for(&c, "btrfs", "btrfs", "auto");
    assert_true(dk_disk_quota(&c));
    dk_disk_free(&c);

    /* without them: the watchdog, saying why */
    loop_ok = 0;
    ctx_for(&c, "overlay2", "extfs", "auto");
    assert_false(dk_disk_quota(&c));
    assert_int_equal(dk_disk_mode(&c), DK_DISK_WATCHDOG);
    assert_non_null(strstr(describe(&c), "watchdog: writable layer measured every 60s and after "
                                         "each command, fails closed"));
    assert_non_null(strstr(describe(&c), "(no quota in storage driver overlay2 on extfs; sbx does "
                                         "not run as root)"));
    dk_disk_free(&c);
    memset(&c, 0, sizeof(c));
    c.host = sbx_host_api_get();
    c.opts = &opts;
    snprintf(c.storage_driver, sizeof(c.storage_driver), "overlay2");
    assert_int_equal(dk_disk_init(&c, "loop", &err), -1);
    assert_non_null(strstr(err->msg, "disk_enforcement 'loop' cannot work here: sbx does not run "
                                     "as root"));
    sbx_error_free(&err);
    dk_disk_free(&c);
    memset(&c, 0, sizeof(c));
    c.host = sbx_host_api_get();
    c.opts = &opts;
    snprintf(c.storage_driver, sizeof(c.storage_driver), "btrfs");
    loop_ok = 1;
    assert_int_equal(dk_disk_init(&c, "loop", &err), -1);
    assert_non_null(strstr(err->msg, "storage driver btrfs is not overlay2"));
    sbx_error_free(&err);
    dk_disk_free(&c);
    loop_ok = 0;

    ctx_for(&c, "overlay2", "xfs", "auto");
    assert_true(dk_disk_quota(&c));
    assert_non_null(strstr(describe(&c), "xfs project quota"));
    dk_disk_free(&c);

    ctx_for(&c, "btrfs", "", "watchdog");
    assert_false(dk_disk_quota(&c));
    assert_non_null(strstr(describe(&c), "fails closed (disk_enforcement = watchdog)"));
    dk_disk_free(&c);

    memset(&c, 0, sizeof(c));
    c.host = sbx_host_api_get();
    c.opts = &opts;
    assert_int_equal(dk_disk_init(&c, "quota", &err), -1);
    assert_non_null(strstr(err->msg, "disk_enforcement 'quota': use auto, storage-opt, loop or "
                                     "watchdog"));
    sbx_error_free(&err);
    dk_disk_free(&c);
}

static const char *storage_size(json_t *hc)
{
    return json_string_value(json_object_get(json_object_get(hc, "StorageOpt"), "size"));
}

static void test_quota_size(void **state)
{
    struct dk_ctx c;
    sbx_error_t *err = NULL;
    json_t *hc = json_object();

    (void)state;
    /* btrfs: a container is a snapshot of its image, whose bytes count */
    ctx_for(&c, "btrfs", "btrfs", "auto");
    engine(200, "{\"Size\": 354731092}");
    assert_int_equal(dk_disk_storage_opt(&c, hc, "img:1", "sbx image build", 1LL << 30, &err), 0);
    /* the image name is percent-encoded by the SDK's sbx_url_escape (libcurl) */
    assert_string_equal(last_path, "/images/img%3A1/json");
    assert_string_equal(storage_size(hc), "1428472916"); /* 1 GiB + the image */
    /* an image the engine lacks: the build command to run */
    engine(404, "{\"message\": \"No such image\"}");
    assert_int_equal(
        dk_disk_storage_opt(&c, hc, "img:2", "sbx image build --sidecar", 1 << 30, &err), -1);
    assert_non_null(strstr(err->msg, "image 'img:2' not found in the engine (build it with "
                                     "'sbx image build --sidecar')"));
    sbx_error_free(&err);
    dk_disk_free(&c);
    json_decref(hc);

    /* overlay2 on xfs: the quota is on the upper layer alone */
    hc = json_object();
    ctx_for(&c, "overlay2", "xfs", "auto");
    requests = 0;
    assert_int_equal(dk_disk_storage_opt(&c, hc, "img:1", "sbx image build", 1LL << 30, &err), 0);
    assert_int_equal(requests, 0);
    assert_string_equal(storage_size(hc), "1073741824");
    /* the engine refuses it (no pquota): this context turns to the watchdog */
    engine(500, "{\"message\": \"--storage-opt is supported only for overlay over xfs with "
                "'pquota' mount option\"}");
    {
        json_t *reply = json_loads(next_body, 0, NULL);

        assert_int_equal(dk_disk_fallback(&c, 500, reply), 1);
        assert_false(dk_disk_quota(&c));
        assert_int_equal(dk_disk_fallback(&c, 500, reply), 0); /* once */
        json_decref(reply);
    }
    json_decref(hc);
    hc = json_object();
    assert_int_equal(dk_disk_storage_opt(&c, hc, "img:1", "sbx image build", 1LL << 30, &err), 0);
    assert_null(json_object_get(hc, "StorageOpt"));
    dk_disk_free(&c);
    json_decref(hc);

    /* with loop devices the fall-back is the per-sandbox filesystem */
    loop_ok = 1;
    ctx_for(&c, "overlay2", "xfs", "auto");
    {
        json_t *reply = json_pack("{s:s}", "message",
                                  "--storage-opt is supported only for "
                                  "overlay over xfs with 'pquota' mount option");

        assert_int_equal(dk_disk_fallback(&c, 500, reply), 1);
        assert_int_equal(dk_disk_mode(&c), DK_DISK_LOOP);
        json_decref(reply);
    }
    dk_disk_free(&c);
    loop_ok = 0;

    /* btrfs never falls back: a refused quota fails the create */
    ctx_for(&c, "btrfs", "btrfs", "auto");
    {
        json_t *reply = json_pack("{s:s}", "message", "storage-opt size: quota failed");

        assert_int_equal(dk_disk_fallback(&c, 500, reply), 0);
        assert_true(dk_disk_quota(&c));
        json_decref(reply);
    }
    dk_disk_free(&c);
}

static void test_watchdog_fails_closed(void **state)
{
    struct dk_ctx c;
    sbx_error_t *err = NULL;

    (void)state;
    ctx_for(&c, "overlay2", "extfs", "auto");
    /* the engine does not answer */
    engine(0, NULL);
    next_transport_fail = 1;
    assert_int_equal(dk_disk_check(&c, "0123456789abcdef", 0, &err), -1);
    assert_non_null(strstr(err->msg, "disk cap: cannot measure the writable layer of sandbox "
                                     "0123456789ab (docker engine at /x.sock: Timeout was "
                                     "reached): the disk watchdog fails closed"));
    assert_string_equal(last_path, "/containers/0123456789abcdef/json?size=1");
    sbx_error_free(&err);
    /* it answers with an error (at a command's end: measured at once) */
    engine(500, "{\"message\": \"size: walking the layer failed\"}");
    assert_int_equal(dk_disk_check(&c, "0123456789abcdef", 1, &err), -1);
    assert_non_null(strstr(err->msg, "(the engine answered HTTP 500: size: walking the layer "
                                     "failed): the disk watchdog fails closed"));
    sbx_error_free(&err);
    /* it answers without a size */
    engine(200, "{\"Id\": \"x\"}");
    assert_int_equal(dk_disk_check(&c, "0123456789abcdef", 1, &err), -1);
    assert_non_null(strstr(err->msg, "(the engine reported no SizeRw)"));
    sbx_error_free(&err);
    dk_disk_free(&c);
}

static void test_watchdog_measures(void **state)
{
    struct dk_ctx c;
    sbx_error_t *err = NULL;

    (void)state;
    ctx_for(&c, "overlay2", "extfs", "auto");
    engine(200, "{\"SizeRw\": 2000, \"Config\": {\"Labels\": {\"sbx.disk\": \"1000\"}}}");
    assert_int_equal(dk_disk_check(&c, "over", 0, &err), -1);
    assert_string_equal(err->msg, "disk cap exceeded: the sandbox wrote 2000 bytes, its limit "
                                  "is 1000 bytes");
    sbx_error_free(&err);

    engine(200, "{\"SizeRw\": 999, \"Config\": {\"Labels\": {\"sbx.disk\": \"1000\"}}}");
    requests = 0;
    assert_int_equal(dk_disk_check(&c, "under", 0, &err), 0);
    assert_int_equal(requests, 1);
    /* the interval (60s) has not passed: not measured again... */
    assert_int_equal(dk_disk_check(&c, "under", 0, &err), 0);
    assert_int_equal(requests, 1);
    /* ...but at a command's end it is */
    assert_int_equal(dk_disk_check(&c, "under", 1, &err), 0);
    assert_int_equal(requests, 2);
    /* removed and seen again: measured at once */
    dk_disk_forget(&c, "under");
    assert_int_equal(dk_disk_check(&c, "under", 0, &err), 0);
    assert_int_equal(requests, 3);
    /* no sbx.disk label: no cap */
    engine(200, "{\"SizeRw\": 99999999}");
    assert_int_equal(dk_disk_check(&c, "nolabel", 0, &err), 0);
    dk_disk_free(&c);

    /* under a quota the watchdog costs nothing */
    ctx_for(&c, "btrfs", "btrfs", "auto");
    requests = 0;
    next_transport_fail = 1;
    assert_int_equal(dk_disk_check(&c, "any", 1, &err), 0);
    assert_int_equal(requests, 0);
    dk_disk_free(&c);
}

/* Many sandboxes seen and never removed in this process: the table stays
 * bounded. */
static void test_watchdog_table_bounded(void **state)
{
    struct dk_ctx c;
    sbx_error_t *err = NULL;
    size_t n = 0;

    (void)state;
    ctx_for(&c, "overlay2", "extfs", "auto");
    engine(200, "{\"SizeRw\": 1}");
    for (int i = 0; i < 1100; i++) {
        char id[32];

        snprintf(id, sizeof(id), "sandbox-%d", i);
        assert_int_equal(dk_disk_check(&c, id, 0, &err), 0);
    }
    for (struct dk_watch *w = c.watches; w != NULL; w = w->next) {
        n++;
    }
    assert_int_equal(n, 1024);
    dk_disk_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mechanism_per_driver),   cmocka_unit_test(test_quota_size),
        cmocka_unit_test(test_watchdog_fails_closed),  cmocka_unit_test(test_watchdog_measures),
        cmocka_unit_test(test_watchdog_table_bounded),
    };

    return cmocka_run_group_tests_name("docker_disk", tests, NULL, NULL);
}
