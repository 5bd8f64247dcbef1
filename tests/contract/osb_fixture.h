/* osb_fixture.h - shared fixture of the provider_opensandbox contract tests. */
#ifndef SBX_TEST_OSB_FIXTURE_H
#define SBX_TEST_OSB_FIXTURE_H

#include "contract_server.h"

#include "config/config.h"
#include "plugin/instance.h"

#define OSB_TEST_KEY "osb-test-key-6b1f"

extern struct sbx_config *cfg;
extern struct sbx_open_instance *osb; /* instance `osb` */
extern const struct sbx_provider_ops *ops;
extern const struct sbx_kv test_labels[3]; /* sbx.task, sbx.job "my job #1", sbx.owner */

/* Starts the server, writes the configuration (instances osb, osb_fast,
 * osb_renew, osb_badkey, osb_opts, osb_nourl, osb_ftp), opens `osb`. */
int group_setup(void **state);
int group_teardown(void **state);
/* Opens another configured instance or fails the test. */
struct sbx_open_instance *open_other(const char *name);
/* A spec with limits, one env var and an allow-list of three rules. */
struct sbx_sandbox_spec make_spec(const char *task, const char *job);

/* stdout (0) and stderr (1) of one exec, kept apart. */
struct out {
    char text[2][4096];
    size_t len[2];
};

int collect(void *ud, int stream, const char *data, size_t len);
void create_ok(const struct sbx_provider_ops *p, void *ctx, const struct sbx_sandbox_spec *spec,
               char *id, size_t n);
int run(const struct sbx_provider_ops *p, void *ctx, const char *id, const char *const *argv,
        const struct sbx_kv *env, size_t n_env, const char *workdir, struct out *o, int *status,
        sbx_error_t **err);
void destroy_ok(const char *id);
/* err's message holds a (and b unless NULL) and is one line. */
void expect_msg(sbx_error_t *err, const char *a, const char *b);

#endif
