/* fuzz_policy.c - policy results (core/src/policy/convert.c): Lua source run
 * in the project's Lua sandbox with the engine's caps (sbx_policy_caps), whose
 * result tables the converter reads, validates and clamps. The input is up to
 * three scripts (limits.lua, egress.lua, slots.lua) separated by lines
 * "--8<--"; a missing one is "return {}". The whole path is the engine's own:
 * sbx_policy_load and sbx_policy_decide for a sample job. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fuzz_file.h"
#include "policy/policy.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const parts[] = {"policies/limits.lua", "policies/egress.lua",
                                    "policies/slots.lua"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n--8<--\n";
    static struct sbx_config *cfg;
    static const char *const argv[] = {"make", "test", NULL};
    static const struct sbx_kv labels[] = {{"team", "core"}};
    struct sbx_job_desc job = {
        .id = "j-fuzz",
        .task = "t-fuzz",
        .pool = "ci",
        .workdir = "/workspace",
        .repository = "example/repo",
        .argv = argv,
        .labels = labels,
        .n_labels = 1,
    };
    struct sbx_policy_decision d;
    struct sbx_policy *p;
    sbx_error_t *err = NULL;
    const uint8_t *start = data, *end = data + size;
    char dir[512];

    if (cfg == NULL) {
        sbx_log_setup(SBX_LOG_ERROR, SBX_LOG_TEXT);
        cfg = sbx_config_defaults(); /* kept for the process's life */
    }
    if (size > (64u << 10)) {
        return 0;
    }
    for (int i = 0; i < 3; i++) {
        const uint8_t *cut = NULL;

        for (const uint8_t *q = start; start != NULL && q + sizeof(sep) - 1 <= end; q++) {
            if (memcmp(q, sep, sizeof(sep) - 1) == 0) {
                cut = q;
                break;
            }
        }
        if (start == NULL) {
            fuzz_write_file(parts[i], (const uint8_t *)"return {}\n", 10);
        }
        else {
            fuzz_write_file(parts[i], start, (size_t)((cut ? cut : end) - start));
            start = cut ? cut + sizeof(sep) - 1 : NULL;
        }
    }
    snprintf(dir, sizeof(dir), "%s/policies", fuzz_dir());
    p = sbx_policy_load(dir, cfg, &err);
    if (p == NULL) {
        if (err == NULL) {
            __builtin_trap();
        }
        sbx_error_free(&err);
        return 0;
    }
    for (int pool = 0; pool < 2; pool++) {
        job.pool = pool ? "agent" : "ci";
        if (sbx_policy_decide(p, &job, &d, &err) == 0) {
            json_t *j = sbx_policy_decision_to_json(&d);

            if (j == NULL || d.slot_class == NULL || d.egress_allow == NULL) {
                __builtin_trap(); /* what the scheduler and the proxy read */
            }
            for (size_t k = 0; k < d.n_egress_allow; k++) {
                (void)sbx_policy_egress_allows(d.egress_allow, "api.example.com", 443);
                (void)sbx_policy_host_rule_matches(d.egress_allow[k], "x.example.com", 80);
            }
            json_decref(j);
            sbx_policy_decision_fini(&d);
        }
        else {
            if (err == NULL) {
                __builtin_trap();
            }
            sbx_error_free(&err);
        }
    }
    sbx_policy_destroy(p);
    return 0;
}
