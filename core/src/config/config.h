/* config.h - the sbx configuration (libconfig). Its keys, types, fields,
 * defaults and checks are the table of config/keys.c.
 *
 * Search order: --config FILE, $SBX_CONFIG, ./sbx.conf, /etc/sbx/sbx.conf.
 * With no file at all, sbx runs on defaults. Every error names FILE:LINE.
 */
#ifndef SBX_CONFIG_CONFIG_H
#define SBX_CONFIG_CONFIG_H

#include <libconfig.h>
#include <stdint.h>

#include "sbx/sbx_plugin.h"
#include "sbx/sbx_provider.h"
#include "util/error.h"

#define SBX_SYSTEM_CONFIG "/etc/sbx/sbx.conf"

/* Defaults of the key table (config/keys.c), for the code and tests that need
 * them as constants; test_config checks that the table agrees. */
#define SBX_DEFAULT_CPUS 2.0
#define SBX_DEFAULT_MEMORY (8LL << 30)
#define SBX_DEFAULT_DISK (40LL << 30)
#define SBX_DEFAULT_PIDS 4096
#define SBX_DEFAULT_IDLE (60 * 60)
#define SBX_DEFAULT_MAX (8 * 60 * 60)
#define SBX_DEFAULT_IMAGE "sbx-sandbox:current"

struct sbx_instance {
    char *name;   /* "docker", "ci-docker", ... */
    char *plugin; /* "provider_docker" */
    enum sbx_plugin_kind kind;
    config_setting_t *group; /* NULL for the built-in default instances */
    char *where;             /* "FILE:LINE" or "built-in" */
    /* (added) `unisolated = true`: tasks may run although the provider does not
     * enforce what they ask for (sandbox/caps.h); every output then says so */
    int unisolated;
    /* (added) `image = "REF"`: the image of this instance's sandboxes (within
     * the instance's group); NULL: the top-level `image` (sbx_config_image) */
    const char *image;
};

/* egress.hosts = ( { name = "api.test"; address = "127.0.0.1"; } ): names the egress
 * proxy resolves itself, before DNS (tests, pinned internal hosts). */
struct sbx_egress_host {
    char *name;    /* normal form: lower case, no trailing dot */
    char *address; /* an IPv4 or IPv6 literal */
};

/* egress.private_allow = ( { name = "mirror.corp"; addresses = ["10.1.2.3", "10.1.0.0/16"]; } ):
 * the documented exception for a private destination (docs/egress.md, "Private
 * destinations"): an address without a prefix is where the name goes (as in
 * egress.hosts), a CIDR lets the name's DNS answers in it through. Each connection it
 * lets through is logged with "private". */
struct sbx_egress_private {
    char *name;       /* normal form */
    char **addresses; /* "10.1.2.3", "10.1.0.0/16", "fd00::/8"; NULL-terminated */
};

#define SBX_DEFAULT_EGRESS_HEADER_TIMEOUT 10
#define SBX_DEFAULT_EGRESS_CONNECT_TIMEOUT 10
/* Per-sandbox budgets of the egress proxy (docs/egress.md, "Budgets"). */
#define SBX_DEFAULT_EGRESS_MAX_CONNECTIONS 256
#define SBX_DEFAULT_EGRESS_MAX_BUFFER (256LL << 20)
#define SBX_DEFAULT_EGRESS_SOCKET_BUFFER (1LL << 20)
#define SBX_DEFAULT_EGRESS_CONNECTION_RATE 200
#define SBX_DEFAULT_EGRESS_BANDWIDTH (1LL << 30)
/* Each direction's splice pipe in a tunnel. */
#define SBX_EGRESS_PIPE_SIZE (256 * 1024)
/* What one tunnel reserves of egress.max_buffer at most: two pipes, and its destination
 * socket's send and receive buffers (the kernel doubles what is asked for). */
#define SBX_EGRESS_TUNNEL_RESERVE(socket_buffer)                                                   \
    (2 * (uint64_t)SBX_EGRESS_PIPE_SIZE + 4 * (uint64_t)(socket_buffer))

/* API client scopes (docs/api.md, "Clients and scopes"). */
enum sbx_scope {
    SBX_SCOPE_SUBMIT = 1 << 0,     /* POST /v1/jobs */
    SBX_SCOPE_READ_OWN = 1 << 1,   /* its own jobs, output, queue entries */
    SBX_SCOPE_READ_ALL = 1 << 2,   /* every client's */
    SBX_SCOPE_CANCEL_ANY = 1 << 3, /* cancel any job, end any task */
    SBX_SCOPE_METRICS = 1 << 4,    /* GET /metrics */
    SBX_SCOPE_SNAPSHOT = 1 << 5,   /* (added) snapshot its tasks, list and remove snapshots */
    SBX_SCOPE_EGRESS = 1 << 6,     /* (added) change its running tasks' egress */
    SBX_SCOPE_EXEC = 1 << 7,       /* (added) its own tasks' terminal and ports */
    SBX_SCOPE_ALL = (1 << 8) - 1,
};

/* runner.clients = ( { name; token_env or token_file; scopes; } ): the
 * token is read when the runner starts, never from the configuration. */
struct sbx_runner_client {
    char *name;
    char *token_env;
    char *token_file;
    unsigned scopes; /* enum sbx_scope bits */
    char *where;     /* "FILE:LINE" */
    /* (added, issue 25) the credential instances its jobs may name
     * (NULL-terminated); NULL: none (for `local`: every one) */
    char **credentials;
};

/* The scope of a name ("read-own"), or 0. */
unsigned sbx_scope_parse(const char *name);
/* The name of one scope bit. */
const char *sbx_scope_name(unsigned scope);
#define SBX_SCOPE_NAMES "submit, read-own, read-all, cancel-any, metrics, snapshot, egress, exec"

struct sbx_pool_cfg {
    char *name;  /* "ci" or "agent" */
    double cpus; /* 0 = share of the box decided by the runner */
    int64_t memory;
    int max_sandboxes;
    /* (added) warm sandboxes the runner keeps ready (docs/runner.md, Warm
     * pool); warm_line is the key's line for errors (0: not set) */
    int warm;
    int64_t warm_max_age; /* seconds; 0: the default (10m) */
    int warm_line;
    char *ca_bundle; /* (added) pools.NAME.ca_bundle; NULL: egress.ca_bundle */
    /* (added) pools.NAME.worktree_protect; NULL: worktree.protect */
    char **worktree_protect;
    char *image; /* (added) pools.NAME.image; NULL: the instance's, else `image` */
};

struct sbx_config {
    config_t cfg;
    int loaded; /* a file was read */
    char *path; /* the file read, or NULL */

    char *plugin_dir; /* NULL: the default (next to the binary) */
    char *policy_dir;
    char *provider; /* default provider instance */
    char *image;
    char *state_dir; /* where task records and locks live */

    struct sbx_limits limits;
    struct sbx_mount *caches;
    size_t n_caches;
    char **worktree_protect; /* (added) worktree.protect; NULL: the default (wtscan.h) */

    struct sbx_instance *instances;
    size_t n_instances;

    struct sbx_pool_cfg *pools;
    size_t n_pools;

    struct {
        char **pools;
        int max_sandboxes;
        int64_t heavy_min_memory;
        int64_t memory;       /* box.memory: 0 = MemTotal of /proc/meminfo */
        int64_t host_reserve; /* box.host_reserve: -1 = max(1G, 10% of box.memory) */
        double cpu_reserve;   /* box.cpu_reserve: < 0 = the default (docs/operations.md) */
        char *id;             /* (added) box.id: the box's id in a fleet; NULL = generated */
    } box;

    struct {
        char *listen;
        char *state;
        /* (added) runner.database: a postgresql:// DSN (no password) for a fleet
         * of boxes on one queue; NULL = SQLite at runner.state (one box) */
        char *database;
        char *database_password_env; /* (added) the variable that holds its password */
        int64_t database_timeout;    /* (added) seconds: statement_timeout, call deadline */
        int64_t database_keepalive;  /* (added) seconds: TCP keepalive idle */
        int64_t lease;               /* (added) runner.lease, seconds: a box's lease */
        int64_t orphan_sweep;        /* (added) runner.orphan_sweep, seconds (runner/warm.c) */
        int keep_output;             /* (added) runner.keep_output: ended jobs' output kept */
        char *token_env;
        struct sbx_runner_client *clients; /* runner.clients */
        size_t n_clients;
        char **worktree_roots; /* runner.worktree_roots; none: no worktree accepted */
        size_t n_worktree_roots;
        char *worktree_roots_where; /* "FILE:LINE" of the setting */
        int64_t alert_after;
        char *alert_webhook;
        char *alert_command;
        char *scale_up_command;
        int max_boxes;
        int64_t cooldown;
        double box_hour_price;
        double spend_day_cap;
        double spend_month_cap;
    } runner;

    struct {
        char *log;
        char **registries;
        struct sbx_egress_host *hosts; /* egress.hosts: the proxy's static names */
        size_t n_hosts;
        struct sbx_egress_private *private_allow; /* egress.private_allow */
        size_t n_private_allow;
        char *ca_bundle;         /* egress.ca_bundle: extra CAs (PEM) for the sandboxes */
        int64_t header_timeout;  /* seconds for a client's request head */
        int64_t connect_timeout; /* seconds to connect to a destination */
        int system_dns;          /* names outside `hosts` use the system's resolvers */
        int check_sni;           /* a tunnel's TLS server name must be its host */
        int64_t max_connections; /* open connections per sandbox */
        int64_t max_buffer;      /* bytes the proxy may hold for one sandbox */
        int64_t socket_buffer;   /* a destination socket's send/receive buffer */
        int64_t connection_rate; /* new connections per second per sandbox; 0: any */
        int64_t bandwidth;       /* bytes/s shared by the sandboxes moving bytes; 0: off */
    } egress;

    struct {
        double warm_start;      /* seconds (bar: 10 s) */
        int concurrent;         /* sandboxes at once (bar: 6) */
        double concurrent_cpus; /* limits of each concurrent sandbox */
        int64_t concurrent_memory;
        double agent_hour_cost;     /* dollars above the bare box (bar: 0.10) */
        char *testcontainers_image; /* seeded into the sidecar (sidecar_images) */
        char *egress_allowed_url;   /* a local test server the allow-list admits */
        char *egress_denied_url;    /* a local test server it refuses */
    } spike;

    /* (added) image_registry: where `sbx image push` publishes the warm image
     * and a box pulls it from (image/registry.h, docs/image.md) */
    struct {
        char *url;          /* https://HOST[:PORT]/PATH */
        char *credential;   /* a credential instance, or NULL: the engine's login */
        char *username_key; /* the names of its lease's values */
        char *password_key;
        int keep;                  /* sbx image gc keeps this many images */
        char **feature_registries; /* (added) HOST[:PORT] features may come from; NULL: none */
        char *ca_file; /* (added) PEM CAs sbx's own registry requests trust; NULL: the system's */
    } image_registry;

    struct {             /* (added) snapshot.*: docs/tasks.md, "Snapshots and forks" */
        int quota;       /* snapshots each pool may keep */
        int64_t max_age; /* seconds; 0: kept until removed */
    } snapshot;
};

/* Finds and loads the configuration. explicit_path may be NULL. */
struct sbx_config *sbx_config_load(const char *explicit_path, sbx_error_t **err);
/* Loads one file (which must exist). */
struct sbx_config *sbx_config_load_file(const char *path, sbx_error_t **err);
/* The configuration with no file: all defaults. */
struct sbx_config *sbx_config_defaults(void);
void sbx_config_destroy(struct sbx_config *c);

const struct sbx_instance *sbx_config_instance(const struct sbx_config *c, const char *name,
                                               enum sbx_plugin_kind kind);
/* (added) The protected paths of a worktree for a task of POOL: the pool's
 * worktree_protect, else worktree.protect; NULL when neither is set (then the
 * default list, sbx_protect_default). */
const char *const *sbx_config_protect(const struct sbx_config *c, const char *pool);
/* Adds or replaces the instances of a `providers` or `credentials` group
 * (the key table's reader of those keys). */
int sbx_config_read_instances(struct sbx_config *c, const config_setting_t *group,
                              enum sbx_plugin_kind kind, sbx_error_t **err);
/* "FILE:LINE" of a setting, or "FILE" when unknown. Owned by the caller. */
/* (added) The image of a sandbox of POOL (NULL: none) on provider instance
 * PROVIDER (NULL: `provider`): pools.POOL.image, else the instance's `image`
 * option, else the top-level `image` (docs/image.md, "Which image"). */
const char *sbx_config_image(const struct sbx_config *c, const char *pool, const char *provider);
/* (added) 1 when REF looks like an image reference (NAME[:TAG][@DIGEST], at
 * most 255 bytes, no space or control character, no leading '-'). */
int sbx_config_image_ref_ok(const char *ref);
char *sbx_config_where(const struct sbx_config *c, const config_setting_t *s);

#endif
