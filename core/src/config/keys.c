/* keys.c - the table of the core's configuration keys (config/keys.h), and the
 * readers and checks its rows name. docs/configuration.md's key tables are
 * generated from it (scripts/config_docs.py; the test config_docs fails when
 * they differ). */
#include "config/keys.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "config/config.h"
#include "config/runner_trust.h"
#include "egress/ca_bundle.h"
#include "egress/rules.h"
#include "image/registry.h"
#include "sandbox/wtscan.h"
#include "util/cleanup.h"
#include "util/units.h"
#include "util/xalloc.h"

static int read_caches(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int read_pools(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int read_hosts(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int read_private_allow(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int read_providers(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int read_credentials(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int check_provider(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int check_host_reserve(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
static int check_max_buffer(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);

/* egress.ca_bundle: a readable PEM file of certificates. */
static int check_ca_bundle(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    char why[600];

    if (s == NULL || c->egress.ca_bundle == NULL ||
        sbx_ca_bundle_check(c->egress.ca_bundle, why, sizeof(why)) == 0) {
        return 0;
    }
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: 'egress.ca_bundle': %s", c->path,
                         config_setting_source_line(s), why);
}

static const char *const pool_names[] = {"ci", "agent", NULL};

/* runner.database: a PostgreSQL DSN (docs/runner.md, Several boxes). */
static int check_database(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    const char *v = c->runner.database;

    if (s == NULL || v == NULL || strncmp(v, "postgresql://", 13) == 0 ||
        strncmp(v, "postgres://", 11) == 0) {
        return 0;
    }
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: 'runner.database' must be a postgresql:// DSN",
                         c->path, config_setting_source_line(s));
}

/* worktree.protect: each entry a glob relative to the worktree. */
static int check_protect(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    for (size_t i = 0; s != NULL && c->worktree_protect && c->worktree_protect[i] != NULL; i++) {
        if (!sbx_protect_glob_ok(c->worktree_protect[i])) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: worktree.protect '%s': a glob relative to the worktree "
                                 "(no leading '/', no '..', no empty part, at most 200 bytes)",
                                 c->path, config_setting_source_line(s), c->worktree_protect[i]);
        }
    }
    return 0;
}

/* box.id: 1-63 of [A-Za-z0-9._-] (it names a row and a file). */
static int check_box_id(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    const char *v = c->box.id;
    size_t n = v ? strlen(v) : 0;

    if (s == NULL || v == NULL) {
        return 0;
    }
    if (n > 0 && n <= 63 &&
        strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == n) {
        return 0;
    }
    return sbx_error_set(err, SBX_E_CONFIG,
                         "%s:%u: 'box.id' must be 1-63 characters of [A-Za-z0-9._-]", c->path,
                         config_setting_source_line(s));
}

/* image_registry.url: https://HOST[:PORT]/PATH (image/registry.c). */
static int check_registry_url(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    struct sbx_registry reg;
    char why[256];

    if (s == NULL || c->image_registry.url == NULL ||
        sbx_registry_parse(c->image_registry.url, &reg, why, sizeof(why)) == 0) {
        return 0;
    }
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: 'image_registry.url' %s", c->path,
                         config_setting_source_line(s), why);
}

/* image_registry.credential: a credential instance. */
static int check_registry_credential(struct sbx_config *c, const config_setting_t *s,
                                     sbx_error_t **err)
{
    if (s == NULL || c->image_registry.credential == NULL ||
        sbx_config_instance(c, c->image_registry.credential, SBX_PLUGIN_CREDENTIAL) != NULL) {
        return 0;
    }
    return sbx_error_set(err, SBX_E_CONFIG,
                         "%s:%u: 'image_registry.credential' '%s' is not a credential instance",
                         c->path, config_setting_source_line(s), c->image_registry.credential);
}

/* (added) image_registry.feature_registries: each HOST[:PORT], as in a
 * feature's reference (image/feature_oci.c). */
static int check_feature_registries(struct sbx_config *c, const config_setting_t *s,
                                    sbx_error_t **err)
{
    for (size_t i = 0; s != NULL && c->image_registry.feature_registries != NULL &&
                       c->image_registry.feature_registries[i] != NULL;
         i++) {
        const char *h = c->image_registry.feature_registries[i];
        char *url = xasprintf("https://%s/x", h);
        struct sbx_registry reg;
        char why[256];
        int bad = sbx_registry_parse(url, &reg, why, sizeof(why)) < 0 || strcmp(reg.host, h) != 0;

        free(url);
        if (bad) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: 'image_registry.feature_registries' '%.128s' is not a "
                                 "registry HOST[:PORT] (e.g. 127.0.0.1:5443; no scheme, no path)",
                                 c->path, config_setting_source_line(s), h);
        }
    }
    return 0;
}

/* (added) image_registry.ca_file: an absolute path to a regular file sbx can
 * read, refused at load rather than at the first registry request. */
static int check_ca_file(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    const char *f = c->image_registry.ca_file;
    struct stat st;

    if (s == NULL || f == NULL) {
        return 0;
    }
    if (f[0] != '/' || stat(f, &st) < 0 || !S_ISREG(st.st_mode) || access(f, R_OK) < 0) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%u: 'image_registry.ca_file' '%.200s' is not a readable file "
                             "(an absolute path to a PEM file of CAs)",
                             c->path, config_setting_source_line(s), f);
    }
    return 0;
}

/* A row with a field of struct sbx_config, and a row without one. */
#define KEY(PATH, TYPE, FIELD, ...)                                                                \
    {                                                                                              \
        .path = (PATH), .type = SBX_KEY_##TYPE, .offset = offsetof(struct sbx_config, FIELD),      \
        .ctype = SBX_KEY_CTYPE(((struct sbx_config *)0)->FIELD), __VA_ARGS__                       \
    }
#define NODE(PATH, TYPE, ...)                                                                      \
    {                                                                                              \
        .path = (PATH), .type = SBX_KEY_##TYPE, __VA_ARGS__                                        \
    }
#define AT_LEAST(LO) .check = {.range = 1, .min = (LO), .max = -1}
#define AT_LEAST_NOTE(LO, NOTE) .check = {.range = 1, .min = (LO), .max = -1, .note = (NOTE)}
#define RANGE(LO, HI) .check = {.range = 1, .min = (LO), .max = (HI)}
#define MB (1024.0 * 1024.0)

const struct sbx_key_def sbx_config_keys[] = {
    /* top level */
    KEY("plugin_dir", STRING, plugin_dir,
        .doc_def = "`$SBX_PLUGIN_DIR`, else the binary's own: `plugins/` in its build tree, "
                   "`<prefix>/lib/sbx/plugins` installed",
        .help = "where plugin `.so` files are loaded from (see `docs/plugins.md`)"),
    KEY("state_dir", STRING, state_dir,
        .doc_def = "`$SBX_STATE_DIR`, else `/var/lib/sbx` for root, else `$XDG_STATE_HOME/sbx` "
                   "(when absolute), else `~/.local/state/sbx`",
        .help = "task records, keeper sockets and logs, slot locks, the image cache "
                "(`docs/tasks.md`)"),
    KEY("provider", STRING, provider, .def = "docker", .check = {.fn = check_provider},
        .help = "the provider instance that `sbx run`, `sbx task start`, `sbx image build` and "
                "`sbx info` use unless `--provider` is given; must name a provider instance "
                "(built-in or configured)"),
    KEY("image", STRING, image, .def = "sbx-sandbox:current",
        .help = "the image every sandbox is created from, unless its pool or provider instance "
                "names one (`docs/image.md`, \"Which image\")"),
    NODE("providers", INSTANCES, .read = read_providers, .doc_def = "the built-in ones",
         .help = "provider instances, see below"),
    NODE("credentials", INSTANCES, .read = read_credentials, .doc_def = "the built-in ones",
         .help = "credential instances, see below"),
    NODE("limits", GROUP, .doc_def = "see below", .help = "the limits of every sandbox"),
    NODE("caches", GROUP_LIST, .read = read_caches, .help = "read-only host mounts"),
    NODE("box", GROUP, .doc_def = "see below",
         .help = "this box: its pools, its sandbox cap, its admission budget"),
    NODE("pools", NAMED_GROUPS, .read = read_pools, .doc_type = "group of `ci`/`agent` groups",
         .help = "per-pool capacity for the runner, and per-pool caps on CPUs and memory"),
    NODE("runner", GROUP, .doc_def = "see below",
         .help = "the runner daemon (`sbx serve`) and its clients"),
    NODE("worktree", GROUP, .doc_def = "see below",
         .help = "**(added)** a task's worktree: the paths protected from the sandbox"),
    NODE("spike", GROUP, .doc_def = "see below",
         .help = "the bars of `sbx spike` (ADR 0287 decision 13)"),
    NODE("image_registry", GROUP, .doc_def = "see below",
         .help = "**(added)** the registry `sbx image push` publishes the warm image to and a "
                 "box pulls it from by digest (`docs/image.md`, \"Publishing and pulling\"); "
                 "the registries features may come from"),
    NODE("egress", GROUP, .doc_def = "see below",
         .help = "the egress proxy: its log, names it resolves itself, timeouts, checks, "
                 "budgets; registry hosts for the egress policy"),
    NODE("snapshot", GROUP, .doc_def = "see below",
         .help = "**(added)** snapshots of tasks (`sbx task snapshot`, `fork`): the per-pool "
                 "quota and their age"),
    KEY("policy_dir", STRING, policy_dir,
        .doc_def = "`$SBX_POLICY_DIR`, else the binary's own: `share/sbx/policies` in its "
                   "build tree, `<prefix>/share/sbx/policies` installed",
        .help = "the Lua policy scripts (`limits.lua`, `egress.lua`, `slots.lua`) that decide "
                "each task's limits, egress allow-list and slot class"),

    /* limits */
    KEY("limits.cpus", CPUS, limits.cpus, .def = "2.0", .help = "CPU share (`NanoCpus`)"),
    KEY("limits.memory", SIZE, limits.memory, .def = "8G",
        AT_LEAST_NOTE(6 * MB, "(the engine's minimum)"),
        .help = "memory; swap is the same value, so no swap"),
    KEY("limits.disk", SIZE, limits.disk, .def = "40G", AT_LEAST(1),
        .help = "what the sandbox writes to its writable layer (`docs/operations.md`, \"The "
                "disk cap\"); the worktree is on the host and not counted. With a Docker "
                "sidecar, its writable layer gets the same cap"),
    KEY("limits.pids", INT, limits.pids, .def = "4096", AT_LEAST(1),
        .help = "maximum number of processes"),
    KEY("limits.idle", DURATION, limits.idle, .def = "60m", AT_LEAST(1),
        .help = "a task ends after this long with no command running and none started or ended"),
    KEY("limits.max", DURATION, limits.max, .def = "8h", AT_LEAST(1),
        .help = "a task ends this long after its sandbox started, whatever it is doing"),

    /* caches */
    NODE("caches[].host", STRING, .help = "the host directory (absolute; it must exist)"),
    NODE("caches[].path", STRING, .help = "where it appears in the sandbox (absolute)"),

    /* box */
    KEY("box.max_sandboxes", INT, box.max_sandboxes, .def = "6", AT_LEAST(1),
        .help = "at most this many sandboxes at once. `sbx run` and `sbx task start` take one "
                "of this many lock files under `<state_dir>/slots/` and wait while all are "
                "taken, so the cap holds across processes that share a state directory"),
    KEY("box.memory", SIZE, box.memory, .doc_def = "`MemTotal` of `/proc/meminfo`",
        AT_LEAST(64 * MB),
        .help = "the box's memory for admission. Sandboxes are admitted only while the sum of "
                "their memory limits fits `memory - host_reserve` (`docs/operations.md`, "
                "\"Admission\")"),
    KEY("box.host_reserve", SIZE, box.host_reserve, .flags = SBX_KEY_AUTO,
        .doc_def = "`max(1G, 10%)` of `box.memory` (half of it on a box under 2G)",
        .check = {.fn = check_host_reserve},
        .help = "memory kept for the host: never admitted to sandboxes. `0` admits the whole "
                "box; a reserve of `box.memory` or more is an error"),
    KEY("box.cpu_reserve", CPUS, box.cpu_reserve, .flags = SBX_KEY_AUTO,
        .doc_def = "`0.5` (a quarter of the box below 2 CPUs)",
        .help = "CPUs kept for the host: no sandbox's CPU quota goes above the box's CPUs minus "
                "this (`limits.cpus` is clamped, never refused)"),
    KEY("box.pools", STRINGS, box.pools, .def = "[\"ci\", \"agent\"]",
        .check = {.names = pool_names},
        .help = "the pools this box serves. Read by the runner's scheduler"),
    KEY("box.heavy_min_memory", SIZE, box.heavy_min_memory, .def = "60G",
        .help = "a box with less memory takes no heavy jobs. Read by the runner's scheduler"),
    KEY("box.id", STRING, box.id, .check = {.fn = check_box_id},
        .doc_def = "generated (`box-` and 12 hex digits), kept in `<state_dir>/box-id`",
        .help = "**(added)** the box's id in a fleet (`runner.database`): 1-63 of "
                "`[A-Za-z0-9._-]`; two boxes of one fleet must not share it (docs/runner.md, "
                "Several boxes)"),

    /* worktree */
    KEY("worktree.protect", STRINGS, worktree_protect, .check = {.fn = check_protect},
        .doc_def = "`.gitconfig .gitmodules .bashrc .bash_profile .zshrc .zprofile .profile "
                   ".ripgreprc .mcp.json .vscode .idea .claude/commands .claude/agents "
                   ".claude/settings.json .claude/settings.local.json .envrc .devcontainer`",
        .help = "**(added)** paths of the worktree (globs, relative to it; a directory covers "
                "what is below it) that tools on the host load and run: read-only inside the "
                "sandbox, and one made there is quarantined after the command (docs/tasks.md, "
                "\"Worktrees\"). Set it to narrow or widen the default; `[]` protects none"),

    /* pools.ci, pools.agent */
    NODE("pools.*.cpus", CPUS, .doc_def = "a share of the box", .help = "CPUs of the pool"),
    NODE("pools.*.memory", SIZE, .doc_def = "a share of the box", .help = "memory of the pool"),
    NODE("pools.*.max_sandboxes", INT, .doc_def = "a share of `box.max_sandboxes`",
         .help = "slots of the pool (read only by the scheduler)"),
    NODE("pools.*.warm", INT, .doc_def = "`0`",
         .help = "(added) sandboxes the runner keeps created and started with no task, each "
                 "claimed by one job of the pool (`docs/runner.md`, \"Warm pool\"); they count "
                 "against the pool's slots, CPUs and memory, and a waiting job always wins over "
                 "them. Negative, or more than the pool's slots (or its CPUs or memory at the "
                 "default limits) hold, refuses to start naming the key"),
    NODE("pools.*.warm_max_age", DURATION, .doc_def = "`10m`",
         .help = "(added) a warm sandbox older than this is replaced; greater than 0"),
    NODE("pools.*.ca_bundle", STRING, .doc_def = "`egress.ca_bundle`",
         .help = "**(added)** extra CAs (a PEM file) for the pool's sandboxes, in place of "
                 "`egress.ca_bundle` (docs/egress.md, \"Extra CAs\")"),
    NODE("pools.*.image", STRING, .doc_def = "the provider instance's `image`, else `image`",
         .help = "**(added)** the image of the pool's sandboxes; a job's or task's own image "
                 "(a snapshot) comes first (`docs/image.md`, \"Which image\")"),
    NODE("pools.*.worktree_protect", STRINGS, .doc_def = "`worktree.protect`",
         .help = "**(added)** the pool's own protected paths of a worktree, in place of "
                 "`worktree.protect` for its tasks (e.g. a CI pool that must write "
                 "`.gitmodules`); same globs, `[]` protects none (docs/tasks.md, \"Worktrees\")"),

    /* runner */
    KEY("runner.listen", STRING, runner.listen, .doc_def = "`unix:<state_dir>/runner.sock`",
        .help = "the runner's address: `unix:/PATH`, or `tcp:HOST:PORT` (then every request "
                "needs the bearer token); when set, `sbx run` submits to the runner"),
    KEY("runner.state", STRING, runner.state, .doc_def = "`<state_dir>/runner.db`",
        .help = "the SQLite file of the runner's store (*store*)"),
    KEY("runner.database", STRING, runner.database, .check = {.fn = check_database},
        .doc_def = "none (SQLite at `state`)",
        .help = "**(added)** a `postgresql://` (or `postgres://`) DSN: the box joins a fleet "
                "whose boxes share one queue on that PostgreSQL (docs/runner.md, Several "
                "boxes); a DSN holding a password is refused at start (exit 2)"),
    KEY("runner.database_password_env", STRING, runner.database_password_env,
        .doc_def = "none (libpq's own means, e.g. `~/.pgpass`)",
        .help = "**(added)** the environment variable holding the database password (never "
                "in the file, never logged); unset or empty at start: exit 2"),
    KEY("runner.database_timeout", DURATION, runner.database_timeout, .def = "5s", AT_LEAST(1),
        .help = "**(added)** every PostgreSQL statement's `statement_timeout`, and (plus 1 s) "
                "each call's deadline on the box's side: past it the API answers `503` with "
                "`Retry-After`, and the box's calls fail at once until a probe finds the "
                "database answering again (docs/runner.md, A slow or silent database)"),
    KEY("runner.database_keepalive", DURATION, runner.database_keepalive, .def = "10s", AT_LEAST(1),
        .help = "**(added)** TCP keepalives of the PostgreSQL connections: the first probe "
                "after this idle time, then every third of it; 3 lost probes (or data unacked "
                "for twice this) end the connection"),
    KEY("runner.lease", DURATION, runner.lease, .def = "30s", AT_LEAST(1),
        .help = "**(added)** a fleet box's lease: it renews it every third of this; a box "
                "silent this long is lost to the others (its jobs go back to the queue or end "
                "`interrupted: box lost`)"),
    KEY("runner.keep_output", INT, runner.keep_output, .def = "1000", AT_LEAST(1),
        .help = "**(added)** how many ended jobs keep their output in memory (the newest; "
                "older ones answer `410` for their output, their records stay)"),
    KEY("runner.orphan_sweep", DURATION, runner.orphan_sweep, .def = "20s", AT_LEAST(1),
        .help = "**(added)** how often the runner applies the orphan rule again in the "
                "background (docs/runner.md, Warm pools: orphans and restarts); the tests "
                "shorten it to see one sweep in seconds"),
    KEY("runner.token_env", STRING, runner.token_env,
        .help = "the environment variable holding a bearer token for the TCP listener: one API "
                "client named `default` with every scope (the value is never logged, and hooks "
                "do not inherit it); also what the client commands send"),
    NODE("runner.clients", GROUP_LIST, .read = sbx_config_read_runner_clients,
         .help = "the API clients of the TCP listener, each `{ name; token_env or token_file; "
                 "scopes; }` (below)"),
    NODE("runner.worktree_roots", STRINGS, .read = sbx_config_read_worktree_roots,
         .doc_type = "array of absolute paths",
         .help = "the only directories below which an API client's `worktree` is accepted; "
                 "none: every `worktree` is refused (docs/runner.md, Worktree roots)"),
    KEY("runner.alert_after", DURATION, runner.alert_after, .def = "10m",
        .help = "a queued job waiting this long raises an alert and may trigger a scale-up "
                "(*scheduler*); on a fleet the leader alerts each job of the shared queue once"),
    KEY("runner.alert_webhook", STRING, runner.alert_webhook,
        .help = "URL that gets a JSON POST when a queued job waits past `alert_after`"),
    KEY("runner.alert_command", STRING, runner.alert_command,
        .help = "command run (no shell) with `SBX_ALERT_*` variables when a job waits past "
                "`alert_after`"),
    KEY("runner.scale_up_command", STRING, runner.scale_up_command,
        .help = "command run with the pool and the wanted box count when the autoscaler "
                "decides to add a box; on a fleet only its leader runs it, once per decision "
                "(docs/runner.md, Several boxes)"),
    KEY("runner.max_boxes", INT, runner.max_boxes, .def = "1", AT_LEAST(1),
        .help = "paid boxes never pass this (1: no autoscaling) (*scheduler*)"),
    KEY("runner.cooldown", DURATION, runner.cooldown, .def = "10m",
        .help = "no further scale-up of a pool within this time (*scheduler*)"),
    KEY("runner.box_hour_price", FLOAT, runner.box_hour_price, .doc_def = "`0` (unset)",
        .help = "price of one box-hour in dollars; without it the spend caps cannot be checked "
                "and no box is added (*scheduler*); also an input of `sbx spike`'s cost "
                "criterion"),
    KEY("runner.spend_day_cap", FLOAT, runner.spend_day_cap, .def = "150.0",
        .help = "dollars per UTC day (decision 14) (*scheduler*)"),
    KEY("runner.spend_month_cap", FLOAT, runner.spend_month_cap, .def = "4500.0",
        .help = "dollars per UTC month (decision 14) (*scheduler*)"),

    /* runner.clients */
    NODE("runner.clients[].name", STRING,
         .help = "1-63 of `[A-Za-z0-9._-]`, unique; `default` (`token_env`) is taken; "
                 "(changed) `local` is the unix socket's client: no token, its `scopes` are "
                 "what the socket's peers get (every scope without the entry)"),
    NODE("runner.clients[].token_env", STRING,
         .help = "the variable holding the client's token, read when `sbx serve` starts (unset "
                 "or empty: the runner refuses to start, naming FILE:LINE)"),
    NODE("runner.clients[].token_file", STRING,
         .help = "an absolute path to a file holding the token (one line); a regular file, not "
                 "a symlink, owned by root or the runner's user, with no group or other "
                 "permission bits (else: `token_file ... is readable or writable by its group "
                 "or others (mode 0644): chmod 600 it`)"),
    NODE("runner.clients[].scopes", STRINGS,
         .help = "non-empty, of `submit`, `read-own`, `read-all`, `cancel-any`, `metrics`, "
                 "(added) `snapshot`, `egress`, `exec`"),
    NODE("runner.clients[].credentials", STRINGS, .doc_type = "array of instance names",
         .help = "(added) the credential instances (`credentials` of a submit) the client's "
                 "jobs may use; none: every submit naming one is refused (403) before any "
                 "lease; `local` without the key: every one (docs/credentials.md, Who may use "
                 "which secrets)"),

    /* spike */
    KEY("spike.warm_start", DURATION, spike.warm_start, .def = "10s",
        .help = "the warm-start bar (request to the end of `true`)"),
    KEY("spike.concurrent", INT, spike.concurrent, .def = "6", AT_LEAST(1),
        .help = "sandboxes that must run at once"),
    KEY("spike.concurrent_cpus", CPUS, spike.concurrent_cpus, .def = "0.25",
        .help = "the CPU limit of each of those sandboxes"),
    KEY("spike.concurrent_memory", SIZE, spike.concurrent_memory, .def = "256M",
        .help = "the memory limit of each of those sandboxes"),
    KEY("spike.agent_hour_cost", FLOAT, spike.agent_hour_cost, .def = "0.10",
        .help = "dollars per agent-hour above the bare box"),
    KEY("spike.testcontainers_image", STRING, spike.testcontainers_image, .def = "sbx-busybox:test",
        .help = "the image the Testcontainers criterion starts; seeded into the sidecar "
                "(`sidecar_images`)"),
    KEY("spike.egress_allowed_url", STRING, spike.egress_allowed_url,
        .help = "a local test server the egress allow-list admits (the egress criterion)"),
    KEY("spike.egress_denied_url", STRING, spike.egress_denied_url,
        .help = "a local test server the egress allow-list refuses (the egress criterion)"),

    /* image_registry */
    KEY("image_registry.url", STRING, image_registry.url, .check = {.fn = check_registry_url},
        .help = "`https://HOST[:PORT]/PATH`: the image repository (e.g. "
                "`https://127.0.0.1:5443/team/sbx-sandbox`); no credentials in it"),
    KEY("image_registry.credential", STRING, image_registry.credential,
        .check = {.fn = check_registry_credential},
        .doc_def = "none: the engine's login (`docker login`)",
        .help = "a credential instance whose lease holds the registry's user name and password"),
    KEY("image_registry.username_key", STRING, image_registry.username_key,
        .def = "REGISTRY_USERNAME", .help = "the name of the user name in that lease"),
    KEY("image_registry.password_key", STRING, image_registry.password_key,
        .def = "REGISTRY_PASSWORD", .help = "the name of the password (or token) in that lease"),
    KEY("image_registry.keep", INT, image_registry.keep, .def = "5", AT_LEAST(1),
        .help = "`sbx image gc` keeps this many of the newest `sbx-sandbox` images in the engine "
                "(and every image a container or `current` uses)"),
    KEY("image_registry.feature_registries", STRINGS, image_registry.feature_registries,
        .check = {.fn = check_feature_registries}, .doc_def = "none: only local features",
        .help = "**(added)** the registries (`HOST[:PORT]`) a definition's features may come "
                "from (`REGISTRY/NAMESPACE/NAME:TAG` or `@sha256:...`); a feature of any other "
                "registry is refused (`docs/image.md`, \"Features from a registry\")"),
    KEY("image_registry.ca_file", STRING, image_registry.ca_file, .check = {.fn = check_ca_file},
        .doc_def = "none: the system's CAs",
        .help = "**(added)** a PEM file of CAs that sbx's own registry requests (features, "
                "`sbx image gc --registry`) trust; the engine's pushes and pulls use its own "
                "(`/etc/docker/certs.d`)"),

    /* egress */
    KEY("egress.log", STRING, egress.log, .doc_def = "`<state_dir>/egress.log`",
        .help = "the egress proxy's log: one JSON line per connection (docs/egress.md, Log "
                "format); if it cannot be written, connections are refused"),
    KEY("egress.registries", STRINGS, egress.registries,
        .help = "hosts handed to the egress policy (`egress.lua` sees them as "
                "`config.registries`); each must be a valid host rule, or every task start "
                "fails with `FILE: egress.registries: 'VALUE': ...`"),
    NODE("egress.hosts", GROUP_LIST, .read = read_hosts, .doc_type = "list of `{ name; address; }`",
         .help = "names the proxy resolves itself before DNS (trusted: may be private or "
                 "loopback; the tests point names at local servers this way)"),
    KEY("egress.ca_bundle", STRING, egress.ca_bundle, .check = {.fn = check_ca_bundle},
        .help = "(added) extra CAs (a PEM file, checked at load) the sandboxes trust: installed "
                "read-only at `/run/sbx-egress/extra-ca.pem` (`NODE_EXTRA_CA_CERTS`) and, with "
                "the host's system store, at `/run/sbx-egress/ca-bundle.pem` (`SSL_CERT_FILE`, "
                "`REQUESTS_CA_BUNDLE`, `GIT_SSL_CAINFO`, `CURL_CA_BUNDLE`; docs/egress.md, "
                "\"Extra CAs\")"),
    NODE("egress.private_allow", GROUP_LIST, .read = read_private_allow,
         .doc_type = "list of `{ name; addresses; }`",
         .help = "(added) the exception for private destinations (a mirror on 10.x): the "
                 "name, still allowed by the task's rules, may reach these private addresses; "
                 "each such connection is logged with `private` (docs/egress.md, \"Private "
                 "destinations\")"),
    KEY("egress.header_timeout", DURATION, egress.header_timeout, .def = "10s", AT_LEAST(1),
        .help = "a client must send its whole request head in this, counted from the "
                "connection's arrival (slow-loris; `408`), and a tunnel's first TLS record or "
                "HTTP head, counted from its first byte. The head is also capped at 16 KiB and "
                "100 header lines (`431`; docs/egress.md, \"Caps on the request head\")"),
    KEY("egress.connect_timeout", DURATION, egress.connect_timeout, .def = "10s", AT_LEAST(1),
        .help = "to connect to a destination (each address)"),
    KEY("egress.system_dns", BOOL, egress.system_dns, .def = "true",
        .help = "names outside `hosts` are resolved with the system's resolvers; `false`: only "
                "`hosts` names resolve"),
    KEY("egress.check_sni", BOOL, egress.check_sni, .def = "true",
        .help = "a CONNECT tunnel's first bytes are checked: a TLS server name must be the "
                "CONNECT host (domain fronting is cut), an HTTP request's host too and it is "
                "one request per connection, and anything else needs an opaque rule "
                "(docs/egress.md, \"What a tunnel may carry\"). `false` turns all of that off "
                "(debugging only)"),
    KEY("egress.max_connections", INT, egress.max_connections, .def = "256", RANGE(1, 65536),
        .help = "connections one sandbox may have open in the proxy at once; more are closed "
                "unanswered and logged `budget-connections`"),
    KEY("egress.max_buffer", SIZE, egress.max_buffer, .def = "256M",
        .check = {.fn = check_max_buffer},
        .help = "bytes the proxy may hold for one sandbox: each tunnel reserves its two pipes "
                "(256 KiB each) and its destination socket's buffers; a tunnel that would go "
                "over is refused `503 budget-buffer`; at least `512K` + 4 × `socket_buffer`"),
    KEY("egress.socket_buffer", SIZE, egress.socket_buffer, .def = "1M", RANGE(4096, 64 * MB),
        .help = "the send and receive buffer of a destination socket (the kernel doubles it); "
                "a destination under 200 µs away gets a 256 KiB send buffer instead. One "
                "tunnel to a far destination carries at most about this much per round trip"),
    KEY("egress.connection_rate", INT, egress.connection_rate, .def = "200", RANGE(0, 1000000),
        .help = "new connections per second one sandbox may open (a burst of one second's "
                "worth); past it the proxy takes its next connection later (they wait, none is "
                "refused); `0`: no limit"),
    KEY("egress.bandwidth", SIZE, egress.bandwidth, .def = "1G", RANGE(0, 1024 * 1024 * MB),
        .help = "bytes per second the proxy shares out while several sandboxes move bytes: "
                "each of the N sandboxes that moved bytes in the last 25-50 ms may move "
                "`bandwidth` / N (a token bucket per sandbox, 20 ms of its rate deep); a "
                "sandbox alone is never limited; `0`: no shares (docs/egress.md, \"Fair "
                "shares\")"),

    /* egress.hosts */
    NODE("egress.hosts[].name", STRING, .help = "a host name (not an IP literal)"),
    NODE("egress.hosts[].address", STRING, .help = "the IPv4 or IPv6 address it resolves to"),

    /* egress.private_allow */
    NODE("egress.private_allow[].name", STRING, .help = "a host name (not an IP literal)"),
    NODE("egress.private_allow[].addresses", STRINGS,
         .help = "IP addresses (the proxy connects there, as with `hosts`) and CIDRs (its DNS "
                 "answers in them are kept); at least one"),

    /* snapshot (added: docs/tasks.md, "Snapshots and forks") */
    KEY("snapshot.quota", INT, snapshot.quota, .def = "10", RANGE(0, 10000),
        .help = "snapshots each pool may keep (a fork's own snapshot counts until it is "
                "removed); one more is refused with `snapshot quota of pool P reached (N of "
                "N)`; `0`: no snapshots"),
    KEY("snapshot.max_age", DURATION, snapshot.max_age, .def = "7d", AT_LEAST(0),
        .help = "a snapshot older than this is removed by the next snapshot, fork, `sbx "
                "snapshot ls` or `sbx snapshot rm`; `0`: kept until `sbx snapshot rm`"),
};

const size_t sbx_config_n_keys = sizeof(sbx_config_keys) / sizeof(sbx_config_keys[0]);

const struct sbx_key_def *sbx_key_find(const char *path)
{
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        if (strcmp(sbx_config_keys[i].path, path) == 0) {
            return &sbx_config_keys[i];
        }
    }
    return NULL;
}

static int where_error(const struct sbx_config *c, const config_setting_t *s, sbx_error_t **err,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int where_error(const struct sbx_config *c, const config_setting_t *s, sbx_error_t **err,
                       const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: %s", c->path,
                         s ? config_setting_source_line(s) : 0, msg);
}

static char *member_string(const config_setting_t *g, const char *key)
{
    const char *v = NULL;

    return config_setting_lookup_string(g, key, &v) == CONFIG_TRUE ? xstrdup(v) : NULL;
}

static int read_caches(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    c->n_caches = (size_t)config_setting_length(s);
    c->caches = xcalloc(c->n_caches ? c->n_caches : 1, sizeof(*c->caches));
    for (size_t i = 0; i < c->n_caches; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        char *host = member_string(e, "host");
        char *path = member_string(e, "path");

        c->caches[i].host = host;
        c->caches[i].path = path;
        c->caches[i].read_only = 1;
        if (host == NULL || path == NULL || host[0] != '/' || path[0] != '/') {
            return where_error(c, e, err, "a cache needs absolute 'host' and 'path'");
        }
    }
    return 0;
}

static int read_pools(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    c->n_pools = (size_t)config_setting_length(s);
    c->pools = xcalloc(c->n_pools ? c->n_pools : 1, sizeof(*c->pools));
    for (size_t i = 0; i < c->n_pools; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const config_setting_t *m;
        const char *name = config_setting_name(e);
        struct sbx_value v = {0};

        c->pools[i].name = xstrdup(name);
        if ((m = config_setting_get_member(e, "cpus")) != NULL) {
            sbx_value_read(m, SBX_KEY_CPUS, &v);
            c->pools[i].cpus = v.d;
        }
        if ((m = config_setting_get_member(e, "memory")) != NULL) {
            sbx_value_read(m, SBX_KEY_SIZE, &v);
            c->pools[i].memory = v.i;
        }
        if ((m = config_setting_get_member(e, "max_sandboxes")) != NULL) {
            sbx_value_read(m, SBX_KEY_INT, &v);
            c->pools[i].max_sandboxes = (int)v.i;
        }
        if ((m = config_setting_get_member(e, "warm")) != NULL) { /* (added) runner/warm.c */
            sbx_value_read(m, SBX_KEY_INT, &v);
            c->pools[i].warm = (int)v.i;
            c->pools[i].warm_line = (int)config_setting_source_line(m);
            if (v.i < 0) {
                return where_error(c, m, err, "'pools.%s.warm' must be 0 or more (got %lld)", name,
                                   (long long)v.i);
            }
        }
        if ((m = config_setting_get_member(e, "warm_max_age")) != NULL) {
            sbx_value_read(m, SBX_KEY_DURATION, &v);
            c->pools[i].warm_max_age = v.i;
            if (v.i <= 0) {
                return where_error(c, m, err, "'pools.%s.warm_max_age' must be greater than 0",
                                   name);
            }
        }
        if ((m = config_setting_get_member(e, "ca_bundle")) != NULL) { /* (added) */
            char why[600];

            sbx_value_read(m, SBX_KEY_STRING, &v);
            c->pools[i].ca_bundle = v.str;
            if (v.str == NULL || sbx_ca_bundle_check(v.str, why, sizeof(why)) < 0) {
                return where_error(c, m, err, "'pools.%s.ca_bundle': %s", name,
                                   v.str != NULL ? why : "a PEM file path");
            }
        }
        if ((m = config_setting_get_member(e, "worktree_protect")) != NULL) { /* (added) */
            sbx_value_read(m, SBX_KEY_STRINGS, &v);
            c->pools[i].worktree_protect = v.strv;
            for (size_t k = 0; v.strv[k] != NULL; k++) {
                if (!sbx_protect_glob_ok(v.strv[k])) {
                    return where_error(c, m, err,
                                       "'pools.%s.worktree_protect' '%s': a glob relative to the "
                                       "worktree (no leading '/', no '..', no empty part, at most "
                                       "200 bytes)",
                                       name, v.strv[k]);
                }
            }
        }
        if ((m = config_setting_get_member(e, "image")) != NULL) { /* (added) */
            sbx_value_read(m, SBX_KEY_STRING, &v);
            c->pools[i].image = v.str;
            if (!sbx_config_image_ref_ok(v.str)) {
                return where_error(c, m, err,
                                   "'pools.%s.image' '%.80s' is not an image reference "
                                   "(NAME[:TAG][@DIGEST], at most 255 bytes)",
                                   name, v.str != NULL ? v.str : "");
            }
        }
        if (strcmp(name, "ci") != 0 && strcmp(name, "agent") != 0) {
            return where_error(c, e, err, "unknown pool '%s' (pools are 'ci' and 'agent')", name);
        }
    }
    return 0;
}

/* egress.hosts: each entry a host name (not an IP literal) and an IP address. */
static int read_hosts(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    c->egress.n_hosts = (size_t)config_setting_length(s);
    c->egress.hosts = xcalloc(c->egress.n_hosts ? c->egress.n_hosts : 1, sizeof(*c->egress.hosts));
    for (size_t i = 0; i < c->egress.n_hosts; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        cleanup_free char *name = member_string(e, "name");
        char norm[SBX_EGRESS_HOST_MAX + 1];
        struct sbx_egress_addr a;
        const char *why;

        c->egress.hosts[i].address = member_string(e, "address");
        if (name == NULL || c->egress.hosts[i].address == NULL) {
            return where_error(c, e, err, "an 'egress.hosts' entry needs 'name' and 'address'");
        }
        why = sbx_egress_addr_parse(name, &a) ? "an IP literal"
                                              : sbx_egress_host_normalize(name, strlen(name), norm);
        if (why != NULL) {
            return where_error(c, e, err, "'egress.hosts' name '%s' is not a valid host name (%s)",
                               name, why);
        }
        c->egress.hosts[i].name = xstrdup(norm);
        if (!sbx_egress_addr_parse(c->egress.hosts[i].address, &a)) {
            return where_error(c, e, err, "'egress.hosts' address '%s' is not an IP address",
                               c->egress.hosts[i].address);
        }
    }
    return 0;
}

/* egress.private_allow: a host name and its private addresses or CIDRs. */
static int read_private_allow(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    c->egress.n_private_allow = (size_t)config_setting_length(s);
    c->egress.private_allow =
        xcalloc(c->egress.n_private_allow + 1, sizeof(*c->egress.private_allow));
    for (size_t i = 0; i < c->egress.n_private_allow; i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const config_setting_t *list = config_setting_get_member(e, "addresses");
        struct sbx_egress_private *p = &c->egress.private_allow[i];
        cleanup_free char *name = member_string(e, "name");
        char norm[SBX_EGRESS_HOST_MAX + 1];
        struct sbx_egress_addr a;
        const char *why;
        size_t n;

        p->addresses = xcalloc(1, sizeof(char *));
        if (name == NULL || list == NULL || !config_setting_is_array(list) ||
            (n = (size_t)config_setting_length(list)) == 0) {
            return where_error(c, e, err,
                               "an 'egress.private_allow' entry needs 'name' and 'addresses' "
                               "(a non-empty array of IP addresses and CIDRs)");
        }
        why = sbx_egress_addr_parse(name, &a) ? "an IP literal"
                                              : sbx_egress_host_normalize(name, strlen(name), norm);
        if (why != NULL) {
            return where_error(c, e, err,
                               "'egress.private_allow' name '%s' is not a valid host name (%s)",
                               name, why);
        }
        p->name = xstrdup(norm);
        free(p->addresses);
        p->addresses = xcalloc(n + 1, sizeof(char *));
        for (size_t k = 0; k < n; k++) {
            const char *v = config_setting_get_string_elem(list, (unsigned)k);

            if (v == NULL || !sbx_egress_private_addr_ok(v)) {
                return where_error(c, list, err,
                                   "'egress.private_allow' '%s': address '%s' is not an IP "
                                   "address or CIDR (10.1.0.0/16, fd00::/8)",
                                   norm, v != NULL ? v : "(not a string)");
            }
            p->addresses[k] = xstrdup(v);
        }
    }
    return 0;
}

static int read_providers(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    return sbx_config_read_instances(c, s, SBX_PLUGIN_PROVIDER, err);
}

static int read_credentials(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    return sbx_config_read_instances(c, s, SBX_PLUGIN_CREDENTIAL, err);
}

static int check_provider(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    if (sbx_config_instance(c, c->provider, SBX_PLUGIN_PROVIDER) == NULL) {
        return where_error(c, s, err, "provider '%s' is not a configured provider instance",
                           c->provider);
    }
    return 0;
}

/* The reserve must leave room for a sandbox (when both are set). */
static int check_host_reserve(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    char r[32], m[32];

    if (s == NULL || config_lookup(&c->cfg, "box.memory") == NULL ||
        c->box.host_reserve < c->box.memory) {
        return 0;
    }
    sbx_size_format(c->box.host_reserve, r, sizeof(r));
    sbx_size_format(c->box.memory, m, sizeof(m));
    return where_error(c, s, err,
                       "'box.host_reserve' (%s) leaves nothing of 'box.memory' (%s) for sandboxes",
                       r, m);
}

/* max_buffer must hold at least one tunnel. */
static int check_max_buffer(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err)
{
    if ((uint64_t)c->egress.max_buffer >= SBX_EGRESS_TUNNEL_RESERVE(c->egress.socket_buffer)) {
        return 0;
    }
    return where_error(c, s, err,
                       "'egress.max_buffer' must hold one tunnel: at least 512K + 4 x "
                       "socket_buffer");
}
