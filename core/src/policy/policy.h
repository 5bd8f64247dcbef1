/* policy.h - Lua policy engine: limits, egress allow-list and slot class of a job.
 *
 * Three scripts in the policy dir decide each job: limits.lua, egress.lua and
 * slots.lua (docs/policy.md). They run in one capped Lua state, each with a
 * fresh environment, and their results are validated field by field and
 * clamped by the configuration's hard caps (`limits`, and the job's pool's
 * `cpus` and `memory`): a policy may narrow them, never exceed them. Any
 * error, timeout, out-of-memory or malformed result denies the job (fail
 * closed) with "policies/NAME.lua:LINE: message" (code SBX_E_POLICY, or
 * SBX_E_TIMEOUT when a cap on instructions or time stopped the script).
 *
 * Threads: a struct sbx_policy is used by one thread at a time (the loop
 * thread). Reload = load a new one, then swap pointers; a failed load leaves
 * the old one untouched.
 */
#ifndef SBX_POLICY_POLICY_H
#define SBX_POLICY_POLICY_H

#include <jansson.h>
#include <stddef.h>

#include "config/config.h"
#include "sbx/sbx_host.h"
#include "sbx/sbx_provider.h"
#include "util/error.h"

/* What the scripts see as the read-only table `job`. Strings may be NULL
 * (absent). argv is NULL-terminated (or NULL). requested: 0 = not requested. */
struct sbx_job_desc {
    const char *id;
    const char *task;
    const char *pool; /* "ci" or "agent" (required) */
    const char *workdir;
    const char *repository;
    const char *provider;
    const char *const *argv;
    const struct sbx_kv *labels;
    size_t n_labels;
    struct sbx_limits requested;
};

enum sbx_policy_part {
    SBX_POLICY_LIMITS = 0, /* policies/limits.lua */
    SBX_POLICY_EGRESS = 1, /* policies/egress.lua */
    SBX_POLICY_SLOTS = 2,  /* policies/slots.lua */
    SBX_POLICY_NPARTS = 3,
};

/* Bits of sbx_policy_decision.clamped: which limits a cap lowered. */
enum sbx_policy_clamp {
    SBX_CLAMP_CPUS = 1u << 0,
    SBX_CLAMP_MEMORY = 1u << 1,
    SBX_CLAMP_DISK = 1u << 2,
    SBX_CLAMP_PIDS = 1u << 3,
    SBX_CLAMP_IDLE = 1u << 4,
    SBX_CLAMP_MAX = 1u << 5,
};

struct sbx_policy_decision {
    struct sbx_limits limits; /* validated, clamped to the caps */
    unsigned clamped;         /* enum sbx_policy_clamp */
    /* Canonical host rules "HOST:PORT[,PORT...]", HOST an exact name or
     * "*.name" (subdomains only), lower case; NULL-terminated. */
    char **egress_allow;
    size_t n_egress_allow;
    char *slot_class;                    /* "heavy" or "light" */
    char *decided_by[SBX_POLICY_NPARTS]; /* "policies/limits.lua", ... */
    char *reason[SBX_POLICY_NPARTS];     /* the script's `reason`, or NULL */
};

struct sbx_policy;

/* Loads and compiles DIR/limits.lua, egress.lua and slots.lua; caps and
 * egress.registries are read from cfg (and copied). */
struct sbx_policy *sbx_policy_load(const char *dir, const struct sbx_config *cfg,
                                   sbx_error_t **err);
void sbx_policy_destroy(struct sbx_policy *p);

/* Runs the three scripts for one job. On success fills *out (release it with
 * sbx_policy_decision_fini); on failure *out is zeroed and the job is denied. */
int sbx_policy_decide(struct sbx_policy *p, const struct sbx_job_desc *job,
                      struct sbx_policy_decision *out, sbx_error_t **err);
void sbx_policy_decision_fini(struct sbx_policy_decision *d);

/* {"limits": {cpus, memory, disk, pids, idle, max, clamped[], decided_by,
 * reason}, "egress": {allow[], decided_by, reason}, "slot": {class,
 * decided_by, reason}} (bytes, CPUs and seconds as numbers). */
json_t *sbx_policy_decision_to_json(const struct sbx_policy_decision *d);

/* (added) A change of a running task's egress (`sbx task allow|deny`, docs/policy.md,
 * "Changing a running task's egress"): egress.lua's function change(task, request,
 * who) decides it (policy/egress_change.c). */
struct sbx_egress_change {
    const char *op;   /* "allow" or "deny" */
    const char *rule; /* the canonical rule asked, "host:p1,p2" */
    const char *host; /* its host ("*.example.com" for a wildcard) */
    const int *ports; /* its ports */
    size_t n_ports;
    const char *const *current; /* the task's rules now, NULL-terminated */
    const char *client;         /* who asks: "local" (the CLI) or the API client's name */
    const char *via;            /* "cli", "api" or "mcp" */
};

struct sbx_egress_verdict {
    int allow;        /* 1: the change is made */
    char rule[96];    /* the name of the policy's rule that decided ("default" without one) */
    char reason[256]; /* its reason, or "" */
    char where[160];  /* "policies/egress.lua" (the script that decided) */
};

/* Runs egress.lua for job (its `job` and `config` as at start) and calls its change()
 * with read-only tables task {id, job, pool, provider, allow}, request {op, rule, host,
 * ports} and who {client, via}; its result {allow = bool, rule = "NAME", reason = "..."}
 * fills *out. Without change(): a deny is allowed, an allow refused (rule "default").
 * -1 (the change refused, fail closed) when the script fails or its result is
 * malformed. */
int sbx_policy_egress_change(struct sbx_policy *p, const struct sbx_job_desc *job,
                             const struct sbx_egress_change *req, struct sbx_egress_verdict *out,
                             sbx_error_t **err);

/* The policy dir: configured (config policy_dir), else $SBX_POLICY_DIR, else
 * the policies shipped with the binary (util/paths.h: build/share/sbx/policies
 * in a build tree, <prefix>/share/sbx/policies installed). Returns an absolute
 * path (caller frees). */
char *sbx_policy_dir_resolve(const char *configured, sbx_error_t **err);

/* Egress matching with the documented wildcard semantics: host is compared
 * case-insensitively, a trailing dot ignored; "*.example.com" matches
 * subdomains only. rule is a canonical rule (a trailing " opaque" is ignored);
 * rules is NULL-terminated. */
int sbx_policy_host_rule_matches(const char *rule, const char *host, int port);
int sbx_policy_egress_allows(char *const *rules, const char *host, int port);

/* A job read from JSON ({"id", "task", "pool", "argv": [...], "workdir",
 * "repository", "provider", "labels": {}, "requested": {cpus, memory, disk,
 * pids, idle, max}}; sizes and durations as numbers or "8G"/"60m"); unknown
 * keys are refused. Free with sbx_policy_job_free. */
struct sbx_job_desc *sbx_policy_job_from_json(const json_t *j, sbx_error_t **err);
void sbx_policy_job_free(struct sbx_job_desc *job);

/* `sbx policy check`: loads DIR and decides a few sample jobs (a CI
 * `encore test`, an agent task); 0 when everything is valid. */
int sbx_policy_check(const char *dir, const struct sbx_config *cfg, sbx_error_t **err);

/* `sbx policy test`: runs DIR/ *_test.lua against the policies of DIR.
 * Failures are reported through fn (file, test name, message); counts in
 * *passed and *failed. Returns -1 only when the harness itself cannot run
 * (the policies do not load: then *err). */
typedef void (*sbx_policy_test_fn)(void *userdata, const char *file, const char *test,
                                   const char *message);
int sbx_policy_test_dir(const char *dir, const struct sbx_config *cfg, sbx_policy_test_fn fn,
                        void *userdata, int *passed, int *failed, sbx_error_t **err);

#endif
