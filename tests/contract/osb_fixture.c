/* osb_fixture.c - the shared fixture of provider_opensandbox's contract
 * tests: the test server, a configuration with instances pointing at it,
 * the instance `osb` opened, and helpers to create, run and destroy. */
#include "osb_fixture.h"

static char *dir;
struct sbx_config *cfg;
struct sbx_open_instance *osb;
const struct sbx_provider_ops *ops;

int group_setup(void **state)
{
    char *text = NULL;
    char *path;
    sbx_error_t *err = NULL;
    const char *plugins = getenv("SBX_PLUGIN_DIR");

    (void)state;
    if (plugins == NULL || contract_start_server("opensandbox_server.py", OSB_TEST_KEY) < 0) {
        fprintf(stderr, "cannot start tests/contract/opensandbox_server.py\n");
        return -1;
    }
    setenv("SBX_TEST_OSB_KEY", OSB_TEST_KEY, 1);
    setenv("SBX_TEST_OSB_BADKEY", "not-the-key-9z", 1);
    dir = test_mkdtemp();
#define COMMON                                                                                     \
    "plugin = \"provider_opensandbox\"; url = \"http://127.0.0.1:%d/\"; "                          \
    "image = \"sbx-test:1\"; poll_interval = 100; "
#define KEY "api_key_env = \"SBX_TEST_OSB_KEY\";"
    if (asprintf(&text,
                 "providers = {\n"
                 "  osb = { " COMMON KEY " };\n"
                 "  osb_fast = { " COMMON KEY " create_timeout = \"1s\"; };\n"
                 "  osb_renew = { " COMMON KEY " timeout_cap = \"60s\"; };\n"
                 "  osb_badkey = { " COMMON " api_key_env = \"SBX_TEST_OSB_BADKEY\"; };\n"
                 "  osb_opts = { " COMMON KEY " snapshot = \"snap-1\"; host_mounts = true;\n"
                 "    workdir = \"/workspace\"; entrypoint = [\"sleep\", \"infinity\"]; };\n"
                 "  osb_nourl = { plugin = \"provider_opensandbox\"; };\n"
                 "  osb_ftp = { plugin = \"provider_opensandbox\"; url = \"ftp://127.0.0.1\"; };\n"
                 "};\n",
                 contract_port, contract_port, contract_port, contract_port, contract_port) < 0) {
        return -1;
    }
#undef COMMON
#undef KEY
    path = test_write_file(dir, "sbx.conf", text);
    free(text);
    cfg = sbx_config_load_file(path, &err);
    free(path);
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", err->msg);
        return -1;
    }
    osb = sbx_instance_open(cfg, plugins, "osb", SBX_PLUGIN_PROVIDER, &err);
    if (osb == NULL) {
        fprintf(stderr, "%s\n", err->msg);
        return -1;
    }
    ops = sbx_instance_provider(osb);
    return 0;
}

int group_teardown(void **state)
{
    (void)state;
    sbx_instance_close(osb);
    sbx_config_destroy(cfg);
    contract_stop_server();
    if (dir != NULL) {
        test_rm_rf(dir);
        free(dir);
    }
    return 0;
}

struct sbx_open_instance *open_other(const char *name)
{
    sbx_error_t *err = NULL;
    struct sbx_open_instance *oi =
        sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), name, SBX_PLUGIN_PROVIDER, &err);

    if (oi == NULL) {
        fail_msg("opening %s: %s", name, err->msg);
    }
    return oi;
}

const struct sbx_kv test_labels[] = {
    {"sbx.task", "task-1"},
    {"sbx.job", "my job #1"}, /* a space and '#': not a valid label value as is */
    {"sbx.owner", "boot:1234:5678"},
};

static const struct sbx_kv test_env[] = {
    {"PLAIN", "visible"},
};

static const char *const test_egress[] = {"pkgs.example.org", "*.example.com:443", "10.0.0.0/8"};

struct sbx_sandbox_spec make_spec(const char *task, const char *job)
{
    struct sbx_sandbox_spec s = {
        .task_id = task,
        .job_id = job,
        .image = "sbx-sandbox:current",
        .limits = {.cpus = 1.5,
                   .memory = 512LL << 20,
                   .disk = 1LL << 30,
                   .pids = 100,
                   .idle = 3600,
                   .max = 7200},
        .env = test_env,
        .n_env = 1,
        .egress_allow = test_egress,
        .n_egress_allow = 3,
    };

    return s;
}

int collect(void *ud, int stream, const char *data, size_t len)
{
    struct out *o = ud;
    int i = stream == 1 ? 0 : 1;

    assert_true(stream == 1 || stream == 2);
    assert_true(o->len[i] + len < sizeof(o->text[i]));
    memcpy(o->text[i] + o->len[i], data, len);
    o->len[i] += len;
    o->text[i][o->len[i]] = '\0';
    return 0;
}

void create_ok(const struct sbx_provider_ops *p, void *ctx, const struct sbx_sandbox_spec *spec,
               char *id, size_t n)
{
    sbx_error_t *err = NULL;

    if (p->create(ctx, spec, id, n, &err) < 0) {
        fail_msg("create: %s", err->msg);
    }
}

int run(const struct sbx_provider_ops *p, void *ctx, const char *id, const char *const *argv,
        const struct sbx_kv *env, size_t n_env, const char *workdir, struct out *o, int *status,
        sbx_error_t **err)
{
    struct sbx_exec_spec es = {.argv = argv,
                               .env = env,
                               .n_env = n_env,
                               .workdir = workdir,
                               .on_output = collect,
                               .output_userdata = o};
    struct sbx_exec_ctl ctl = {0};

    memset(o, 0, sizeof(*o));
    return p->exec(ctx, id, &es, &ctl, status, err);
}

void destroy_ok(const char *id)
{
    sbx_error_t *err = NULL;

    if (ops->destroy(osb->ctx, id, &err) < 0) {
        fail_msg("destroy: %s", err->msg);
    }
}

void expect_msg(sbx_error_t *err, const char *a, const char *b)
{
    assert_non_null(err);
    if (strstr(err->msg, a) == NULL || (b != NULL && strstr(err->msg, b) == NULL)) {
        fail_msg("got '%s', wanted '%s'%s%s", err->msg, a, b ? " and " : "", b ? b : "");
    }
    assert_null(strchr(err->msg, '\n'));
}
