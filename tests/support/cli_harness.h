/* cli_harness.h - the sbx binary as a client of an in-process runner
 * (runner_harness.h): a client configuration in rh_dir and SBX_RUN(args...)
 * spawning `sbx --config <it> args...`. Include after runner_harness.h and
 * spawn.h; the test sets sbx_bin. */
#ifndef SBX_TEST_CLI_HARNESS_H
#define SBX_TEST_CLI_HARNESS_H

#include <jansson.h>

#include "fake_config.h"

static char *sbx_bin;
static char *client_conf;

static struct spawn_result sbx_run(const char *const *args)
{
    char *argv[16] = {sbx_bin, "--config", client_conf};
    int n = 3;

    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = (char *)args[i];
    }
    argv[n] = NULL;
    return spawn_run(argv, NULL);
}

#define SBX_RUN(...) sbx_run((const char *const[]){__VA_ARGS__, NULL})

/* A command's standard output as JSON; fails the test when it is not. */
__attribute__((unused)) static json_t *parse_out(const struct spawn_result *r)
{
    json_error_t e;
    json_t *j = json_loads(r->out, 0, &e);

    if (j == NULL) {
        fail_msg("not JSON (%s): %s / stderr: %s", e.text, r->out, r->err);
    }
    return j;
}

/* The client's configuration: through the runner at unix:LISTEN, or
 * embedded (LISTEN NULL), state in rh_dir. */
static void write_client_conf(const char *listen)
{
    free(client_conf);
    client_conf = test_fake_client_conf(rh_dir, listen);
}

#endif
