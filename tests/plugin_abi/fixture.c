/* fixture.c - ABI fixture plugins, one source built many ways (see CMakeLists.txt).
 * FIX_NAME is the descriptor name; other FIX_* macros break one rule each. The
 * good provider also works as a fake in-memory provider for core tests. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sbx/sbx_credential.h"
#include "sbx/sbx_plugin.h"
#include "sbx/sbx_provider.h"

static const struct sbx_host_api *host;
/* list() fails while the file "<socket option>.down" exists (an engine that
 * went away) and hangs while "<socket option>.slow" does (the runner's
 * /healthz test) */
static char down_path[512];

static int p_init(const struct sbx_host_api *h, const struct sbx_options *o, void **ctx,
                  sbx_error_t **err)
{
    const char *sock = o != NULL ? h->opt_string(o, "socket") : NULL;

    (void)err;
    host = h;
    snprintf(down_path, sizeof(down_path), "%s.down", sock ? sock : "/run/fake.sock");
    *ctx = (void *)&host;
    return 0;
}

static void p_destroy_ctx(void *ctx)
{
    (void)ctx;
}

static int p_create(void *ctx, const struct sbx_sandbox_spec *spec, char *id, size_t n,
                    sbx_error_t **err)
{
    (void)ctx;
    /* a task named "createfail*" gets no sandbox (test_task_start's unwinding) */
    if (spec->task_id != NULL && strstr(spec->task_id, "createfail") != NULL) {
        return host->error_set(err, SBX_E_ENGINE, "fake: no sandbox for %s", spec->task_id);
    }
    snprintf(id, n, "fake-%s", spec->task_id ? spec->task_id : "x");
    return 0;
}

static int p_exec(void *ctx, const char *id, const struct sbx_exec_spec *spec,
                  struct sbx_exec_ctl *ctl, int *status, sbx_error_t **err)
{
    (void)ctx;
    (void)id;
    /* "fake-wait": runs until cancelled (at most 60 s), silently; "fake-say-wait"
     * prints "waiting" on stdout first; "fake-exit N": status N */
    if (strcmp(spec->argv[0], "fake-say-wait") == 0 && spec->on_output != NULL) {
        spec->on_output(spec->output_userdata, 1, "waiting\n", 8);
    }
    if (strcmp(spec->argv[0], "fake-wait") == 0 || strcmp(spec->argv[0], "fake-say-wait") == 0) {
        for (int i = 0; i < 6000 && !ctl->cancelled; i++) {
            struct timespec ts = {0, 10 * 1000 * 1000};

            nanosleep(&ts, NULL);
        }
        if (ctl->cancelled) {
            return host->error_set(err, SBX_E_CANCELLED, "fake: exec cancelled");
        }
    }
    /* "fake-env NAME...": NAME=VALUE on stdout per name in the exec's env
     * (the last one given), "NAME unset" on stderr otherwise; the status is
     * the number unset. "fake-nocmd": the command is not found. */
    if (strcmp(spec->argv[0], "fake-env") == 0) {
        int unset = 0;

        for (int a = 1; spec->argv[a] != NULL; a++) {
            const char *v = NULL;
            char line[512];
            int n;

            for (size_t i = 0; i < spec->n_env; i++) {
                if (strcmp(spec->env[i].name, spec->argv[a]) == 0) {
                    v = spec->env[i].value;
                }
            }
            n = v ? snprintf(line, sizeof(line), "%s=%s\n", spec->argv[a], v)
                  : snprintf(line, sizeof(line), "%s unset\n", spec->argv[a]);
            unset += v == NULL;
            if (spec->on_output != NULL && n > 0) {
                spec->on_output(spec->output_userdata, v ? 1 : 2, line,
                                (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
            }
        }
        *status = unset;
        return 0;
    }
    /* "fake-bin": bytes that are not UTF-8 (invalid, NUL, a cut character):
     * "ok\xff\xfe\0\xc3" on stdout, "err\xe2\x82" on stderr; status 0 */
    if (strcmp(spec->argv[0], "fake-bin") == 0) {
        if (spec->on_output != NULL) {
            spec->on_output(spec->output_userdata, 1, "ok\xff\xfe\0\xc3", 6);
            spec->on_output(spec->output_userdata, 2, "err\xe2\x82", 5);
        }
        *status = 0;
        return 0;
    }
    /* "fake-drip N MS": N lines "line I", stdout for even I and stderr for
     * odd, MS apart (until cancelled); status 0 (the fleet's forwarding test) */
    if (strcmp(spec->argv[0], "fake-drip") == 0 && spec->argv[1] != NULL && spec->argv[2] != NULL) {
        long n = atol(spec->argv[1]);
        long ms = atol(spec->argv[2]);

        for (long i = 0; i < n && !ctl->cancelled; i++) {
            char line[32];
            int k = snprintf(line, sizeof(line), "line %ld\n", i);

            if (spec->on_output != NULL) {
                spec->on_output(spec->output_userdata, i % 2 ? 2 : 1, line, (size_t)k);
            }
            for (long t = 0; t < ms && !ctl->cancelled; t += 10) {
                usleep(10 * 1000);
            }
        }
        if (ctl->cancelled) {
            return host->error_set(err, 4, "cancelled");
        }
        *status = 0;
        return 0;
    }
    if (strcmp(spec->argv[0], "fake-nocmd") == 0) {
        return host->error_set(err, SBX_E_NOCMD, "fake-nocmd: command not found in the sandbox");
    }
    if (strcmp(spec->argv[0], "fake-exit") == 0 && spec->argv[1] != NULL) {
        *status = atoi(spec->argv[1]);
        return 0;
    }
    (void)err;
    /* "sleep MS": runs until cancelled or MS elapsed; "exit N": status N;
     * anything else prints argv[0] and succeeds (the runner's tests) */
    if (strcmp(spec->argv[0], "sleep") == 0 && spec->argv[1] != NULL) {
        long ms = atol(spec->argv[1]);

        for (long t = 0; t < ms && !ctl->cancelled; t += 10) {
            usleep(10 * 1000);
        }
        if (ctl->cancelled) {
            return host->error_set(err, 4, "cancelled");
        }
    }
    if (spec->on_output != NULL) {
        spec->on_output(spec->output_userdata, 1, spec->argv[0], strlen(spec->argv[0]));
    }
    *status = strcmp(spec->argv[0], "exit") == 0 && spec->argv[1] != NULL ? atoi(spec->argv[1]) : 0;
    return 0;
}

static int p_destroy(void *ctx, const char *id, sbx_error_t **err)
{
    (void)ctx;
    (void)id;
    (void)err;
    return 0;
}

static int p_list(void *ctx, const char *k, const char *v, sbx_sandbox_fn fn, void *ud,
                  sbx_error_t **err)
{
    (void)ctx;
    (void)k;
    (void)v;
    (void)fn;
    (void)ud;
    /* "<socket option>.slow": the engine hangs until the file goes (at most 60 s) */
    {
        char slow[sizeof(down_path)];

        memcpy(slow, down_path, sizeof(slow));
        memcpy(slow + strlen(slow) - 5, ".slow", 5);
        for (int i = 0; i < 1200 && access(slow, F_OK) == 0; i++) {
            usleep(50 * 1000);
        }
    }
    if (access(down_path, F_OK) == 0) {
        return host->error_set(err, SBX_E_ENGINE, "fake: engine down (%s exists)", down_path);
    }
    return 0;
}

/* The check op (the disk watchdog's place): a sandbox of a task named
 * "checkfail*" cannot be measured (fail closed); one of "checkafter*" passes
 * its limit with each command (after_exec); every other one is fine. */
static int p_check(void *ctx, const char *id, int after_exec, sbx_error_t **err)
{
    (void)ctx;
    if (strstr(id, "checkfail") != NULL) {
        return host->error_set(err, SBX_E_ENGINE, "fake: cannot measure sandbox %s: fails closed",
                               id);
    }
    if (strstr(id, "checkafter") != NULL && after_exec) {
        return host->error_set(err, SBX_E_ENGINE, "fake: the last command took %s past its limit",
                               id);
    }
    return 0;
}

/* (added) Ports: port P of a fake sandbox is 127.0.0.1:P of the host, on
 * loopback only (the fleet's tests serve a page there, tests/fleet/fleet.sh). */
static int p_port_connect(void *ctx, const char *id, int port, int *fd_out, sbx_error_t **err)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    (void)ctx;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;

        if (fd >= 0) {
            close(fd);
        }
        return host->error_set(err, SBX_E_ENGINE, "fake: port %d of %s: %s", port, id, strerror(e));
    }
    *fd_out = fd;
    return 0;
}

#ifdef FIX_UNDEFINED
/* Deliberately undefined: dlopen(RTLD_NOW) must fail naming it. */
extern void sbx_fixture_undefined_symbol(void);
#endif

/* The fake declares every capability (it stands for a real sandbox in the
 * runner's tests); provider_nocaps declares none (sandbox/caps.h). */
#ifndef FIX_FLAGS
#define FIX_FLAGS                                                                                  \
    (SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_DISK | SBX_PROVIDER_ENFORCES_EGRESS |    \
     SBX_PROVIDER_ENFORCES_USERNS)
#endif

#ifdef FIX_IMAGE_BUILD
static int p_image_build(void *ctx, const struct sbx_image_request *req, char *ref_out,
                         size_t ref_size, sbx_error_t **err)
{
    (void)ctx, (void)req, (void)err;
    snprintf(ref_out, ref_size, "fake:1");
    return 0;
}
#endif

static const struct sbx_provider_ops ops = {
    .flags = FIX_FLAGS,
    .init = p_init,
    .destroy_ctx = p_destroy_ctx,
    .create = p_create,
#ifndef FIX_NO_EXEC
    .exec = p_exec,
#endif
    .destroy = p_destroy,
    .list = p_list,
    .check = p_check,
    .port_connect = p_port_connect, /* (added) */
#ifdef FIX_IMAGE_BUILD
    /* set, but outside the ops_size of provider_oldminor: the core must read NULL */
    .image_build = p_image_build,
#endif
};

static const struct sbx_option options[] = {
    {"socket", SBX_OPT_STRING, "/run/fake.sock", 0, "a path"},
    {"retries", SBX_OPT_INT, "3", 0, "how many"},
    {"timeout", SBX_OPT_DURATION, "30s", 0, "how long"},
    {"quota", SBX_OPT_SIZE, NULL, 0, "how much"},
    {"token", SBX_OPT_STRING, NULL, FIX_TOKEN_REQUIRED, "required in one fixture"},
    SBX_OPTIONS_END,
};

#ifndef FIX_KIND
#define FIX_KIND SBX_PLUGIN_PROVIDER
#endif
#ifndef FIX_OPS_SIZE
#define FIX_OPS_SIZE sizeof(ops)
#endif

#ifndef FIX_NO_ENTRY
static const struct sbx_plugin_desc desc = {SBX_PLUGIN_ABI_MAJOR,
                                            SBX_PLUGIN_ABI_MINOR,
                                            (uint32_t)sizeof(struct sbx_plugin_desc),
                                            FIX_KIND,
                                            FIX_NAME,
                                            "9.9.9",
                                            SBX_PLUGIN_READY,
                                            NULL,
                                            options,
                                            &ops,
                                            (uint32_t)(FIX_OPS_SIZE)};

SBX_PLUGIN_EXPORT const struct sbx_plugin_desc *sbx_plugin_entry(void);
SBX_PLUGIN_EXPORT const struct sbx_plugin_desc *sbx_plugin_entry(void)
{
#ifdef FIX_UNDEFINED
    sbx_fixture_undefined_symbol();
#endif
    return &desc;
}
#else
SBX_PLUGIN_EXPORT int sbx_not_the_entry(void);
SBX_PLUGIN_EXPORT int sbx_not_the_entry(void)
{
    return 0;
}
#endif
