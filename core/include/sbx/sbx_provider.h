/* sbx_provider.h - sandbox provider ops (SDK, plugin ABI v1).
 *
 * A provider creates one sandbox per task, runs commands (execs) in it, and
 * destroys it. Sandboxes are named by the provider's own id string, so a
 * later process (`sbx exec TASK`) can reach a sandbox created by another.
 *
 * Threads: every op may be called from several worker threads at once for
 * different sandboxes, and for the same sandbox (concurrent execs).
 * cancel() may be called from any thread while exec() runs.
 *
 * Required: init, destroy_ctx, create, exec, destroy, list.
 * Optional (may be NULL): cancel, info, check, image_build, scan_secrets,
 * claim_worktree, update_limits, image_op, snapshot, snapshot_remove,
 * port_connect, files_get, files_put, pause, resume, files_put_stream.
 */
#ifndef SBX_SDK_PROVIDER_H
#define SBX_SDK_PROVIDER_H

#include <stddef.h>
#include <stdint.h>

#include "sbx_error.h"
#include "sbx_host.h"

/* What a provider enforces itself; the core does the rest. The capability
 * bits (cpu, memory, pids, disk, egress, user namespaces) fail closed: the
 * core refuses a task that asks for one the provider does not declare, unless
 * the instance sets `unisolated = true` (docs/plugins.md, Capabilities).
 * ENFORCES_LIMITS is the older spelling of CPU | MEMORY | PIDS together;
 * egress is EGRESS_SOCKET or ENFORCES_EGRESS. */
enum sbx_provider_flags {
    SBX_PROVIDER_ENFORCES_LIMITS = 1u << 0,   /* cpu, memory and pids */
    SBX_PROVIDER_ENFORCES_DISK = 1u << 1,     /* the disk cap, by any real mechanism */
    SBX_PROVIDER_ENFORCES_EGRESS = 1u << 2,   /* maps the allow-list to its own controls */
    SBX_PROVIDER_ENFORCES_IDLE = 1u << 3,     /* stops idle sandboxes itself */
    SBX_PROVIDER_ENFORCES_MAX = 1u << 4,      /* stops sandboxes at the maximum lifetime */
    SBX_PROVIDER_NESTED_CONTAINERS = 1u << 5, /* (changed) can give a sandbox containers of
                                                 its own (Testcontainers); was DOCKER_SIDECAR */
    SBX_PROVIDER_PAUSE = 1u << 6,             /* supports pause/resume */
    SBX_PROVIDER_EGRESS_SOCKET = 1u << 7,     /* wires the core's egress proxy socket in */
    /* (added) one bit per limit, for providers that enforce only some */
    SBX_PROVIDER_ENFORCES_CPU = 1u << 8,     /* the cpus limit */
    SBX_PROVIDER_ENFORCES_MEMORY = 1u << 9,  /* the memory limit */
    SBX_PROVIDER_ENFORCES_PIDS = 1u << 10,   /* the pids limit */
    SBX_PROVIDER_ENFORCES_USERNS = 1u << 11, /* root in the sandbox is not root of the host */
    SBX_PROVIDER_WORKTREE_VIEW = 1u << 12,   /* may mount a view of the worktree on view_dir */
};

/* (added) Per-sandbox caps of the kernel's per-user inotify counters, which
 * a provider with user namespaces sets in each sandbox's own user namespace;
 * the box's shared pool (fs.inotify.max_user_*) is sized from them
 * (docs/operations.md, "Kernel per-user counters"). */
#define SBX_SANDBOX_INOTIFY_INSTANCES 128
#define SBX_SANDBOX_INOTIFY_WATCHES 65536

/* Limits of one sandbox (docs/architecture.md, Units): bytes, CPUs, seconds. */
struct sbx_limits {
    double cpus;
    int64_t memory;
    int64_t disk;
    int64_t pids;
    int64_t idle;
    int64_t max;
};

struct sbx_mount {
    const char *host; /* absolute host path */
    const char *path; /* absolute path inside the sandbox */
    int read_only;
};

struct sbx_sandbox_spec {
    const char *task_id;
    const char *job_id;
    const char *image;              /* image reference */
    const char *worktree;           /* host directory mounted at /workspace, or NULL */
    const struct sbx_mount *mounts; /* read-only caches (decision 7) */
    size_t n_mounts;
    struct sbx_limits limits;
    const struct sbx_kv *labels; /* sbx.task, sbx.job, sbx.created, sbx.owner, ... */
    size_t n_labels;
    const struct sbx_kv *env; /* non-secret environment (proxy variables) */
    size_t n_env;
    /* Host directory holding the egress proxy's unix socket for this sandbox,
     * mounted at /run/sbx-egress; NULL: the sandbox gets no way out at all. */
    const char *egress_dir;
    /* Egress allow-list host rules, for providers that enforce egress. */
    const char *const *egress_allow;
    size_t n_egress_allow;
    /* Host path of the core's static egress relay, mounted read-only at
     * SBX_RELAY_PATH and started as the sandbox's entrypoint
     * (`SBX_RELAY_PATH -- <keep-alive command>`): it listens on
     * 127.0.0.1:3128 and hands each connection to the proxy socket in
     * SBX_EGRESS_DIR. NULL when egress_dir is NULL. */
    const char *egress_relay;
    /* (changed: were docker_sidecar and docker_dir, same places and types)
     * nested_containers: non-zero asks for containers inside the sandbox
     * (Testcontainers, docs/testcontainers.md), for providers with
     * SBX_PROVIDER_NESTED_CONTAINERS; how they are given is the provider's
     * own (provider_docker runs a per-sandbox Docker daemon beside the
     * sandbox, and its instance option docker_sidecar gives one to every
     * sandbox).
     * provider_dir: a host directory (mode 0755, <state>/tasks/<task>/provider)
     * that the core makes for every sandbox and removes with the task's
     * directory: the provider's own host-side files of this sandbox, such as
     * a socket it shares with the sandbox. */
    int nested_containers;
    const char *provider_dir;
    /* (added) A host directory holding the socket the core listens on
     * for the sandbox's exec agent (SBX_AGENT_DIR "/host.sock" inside, from
     * sbx/sbx_agent_proto.h); a provider that starts the egress relay mounts
     * it read-only at SBX_AGENT_DIR and starts the relay with
     * `--agent SBX_AGENT_DIR/host.sock`. NULL: no agent. */
    const char *agent_dir;
    /* (added, last) For idmapped worktrees (docs/tasks.md): an empty host directory
     * (mode 0700, <state>/tasks/<task>/workspace) on which a provider with
     * SBX_PROVIDER_WORKTREE_VIEW may mount its own view of the worktree (an
     * idmapped mount) and bind that view instead of the worktree. The core
     * unmounts whatever is mounted there when the task ends, and sweeps it
     * when the task's owner is gone. NULL without a worktree or the flag. */
    const char *view_dir;
    /* (added, ABI 1.2) A warm sandbox (docs/runner.md, "Warm pool"): no worktree
     * yet, but view_dir is given; a provider with the claim_worktree op makes
     * view_dir a shared mount point and mounts it at /workspace with slave
     * propagation, so a view mounted there at claim time shows inside. */
    int view_later;
};

#define SBX_EGRESS_DIR "/run/sbx-egress"
#define SBX_RELAY_PATH "/run/sbx-relay"
/* (added) The relay's transparent path (docs/egress.md, "Without proxy variables"): its
 * resolver (the sandbox's only nameserver), the port the sandbox's netns redirects TCP
 * to, and the addresses the resolver gives names (tools/relay/names.h). */
#define SBX_RELAY_DNS_ADDR "127.0.0.53"
#define SBX_RELAY_DNS_LISTEN SBX_RELAY_DNS_ADDR ":53"
#define SBX_RELAY_REDIRECT_PORT "3129"
#define SBX_RELAY_REDIRECT_LISTEN "127.0.0.1:" SBX_RELAY_REDIRECT_PORT
#define SBX_RELAY_NAME_NET "127.100.0.0/16"
/* (added) the addresses it gives denied names: a connection there is answered with the
 * refusal (docs/egress.md, "What an agent sees on denial") */
#define SBX_RELAY_DENY_NET "127.101.0.0/16"

/* Output sink: stream 1 is stdout, 2 is stderr. Return 0 to continue. */
typedef int (*sbx_output_fn)(void *userdata, int stream, const char *data, size_t len);

struct sbx_exec_ctl;

struct sbx_exec_spec {
    const char *const *argv;  /* NULL-terminated, argv[0] non-NULL */
    const struct sbx_kv *env; /* may hold secret values: never log, never persist */
    size_t n_env;
    const char *workdir; /* NULL: the provider's default (/workspace) */
    sbx_output_fn on_output;
    void *output_userdata;
    /* (added, last) The core's exec agent (docs/tasks.md, "The exec agent"),
     * or NULL. A provider that supports it calls run_agent(agent_userdata,
     * ctl, exit_status, err) first, with any exec-time guards of its own
     * around it: 0 the command ran (*exit_status set), -1 it failed (err
     * set), 1 no agent answered and nothing ran: use the engine.
     * It returns soon after ctl->cancelled is set. Providers built against
     * the older header ignore it (every exec then uses the engine). */
    int (*run_agent)(void *agent_userdata, struct sbx_exec_ctl *ctl, int *exit_status,
                     sbx_error_t **err);
    void *agent_userdata;
};

/* Per-exec control block owned by the core. `cancelled` is set by the core
 * before it calls ops->cancel; the provider may keep its own state in
 * `provider_data` (e.g. the engine's exec id). (changed, issue 31) Another
 * thread sets it: read it with __atomic_load_n(&ctl->cancelled,
 * __ATOMIC_ACQUIRE), set it with __atomic_store_n. */
struct sbx_exec_ctl {
    volatile int cancelled;
    void *provider_data;
};

/* Called by list() once per sandbox carrying the requested label. labels may
 * be read during the call only. */
typedef void (*sbx_sandbox_fn)(void *userdata, const char *sandbox_id, const struct sbx_kv *labels,
                               size_t n_labels);

/* Facts a provider reports about itself at run time (optional op). */
struct sbx_provider_info {
    char engine[128];     /* e.g. "docker 20.10.24 (API 1.41)" */
    int userns;           /* 1 on, 0 off, -1 unknown */
    char disk_limit[128]; /* which disk cap mechanism runs, or "" */
    int simulated;        /* 1: the engine is a local test double (its timings and
                             isolation say nothing about the real service) */
    /* (changed: was sidecar, same place) The isolation nested containers
     * run with, e.g. provider_docker's sidecar: "userns-remap on, rootless
     * inner daemon, caps +SYS_ADMIN,...", prefixed with "ISOLATION FAILURE: "
     * when they are host-root-equivalent; "" when the provider has none. */
    char nested[256];
    /* Added last: the seccomp profile the sandboxes run with, e.g. "sbx: sockets
     * only UNIX, INET, ..."; "" when the provider does not say. */
    char seccomp[160];
    /* (added) Capability bits of ops.flags that are off at run time (e.g.
     * ENFORCES_USERNS on an engine without userns-remap, ENFORCES_DISK when no
     * disk mechanism runs); the core treats them as not enforced. 0: all that
     * ops.flags declares holds. The core zeroes the struct before info(), so a
     * provider built against the older header reports 0. */
    uint32_t flags_off;
    /* Added after flags_off: how a worktree reaches /workspace, e.g. "idmapped: its owner
     * is root inside (host 100000:100000) (auto)"; "" when not reported. */
    char worktree[256];
};

/* (added, ABI 1.1) What `sbx image build` asks of a provider that builds
 * images (the optional image_build op): the core's helper builds a root
 * filesystem from the definition (or takes it from the cache) and the
 * provider puts it into its engine as REPO:<hash of spec>, tagged
 * REPO:current. */
struct sbx_image_request {
    const char *builder;        /* absolute path of the core's helper (sbx-image-build) */
    const char *repo;           /* "sbx-sandbox"; "sbx-dind" for --sidecar */
    const char *spec;           /* the canonical definition: its hash names the image */
    const char *suite;          /* Debian suite */
    const char *packages;       /* comma-separated package list */
    const char *npm;            /* space-separated npm packages, or NULL */
    const char *cache;          /* the root filesystem cache directory */
    const char *const *changes; /* "WORKDIR /workspace", "ENV K=V"; NULL-terminated */
    /* (added, ABI 1.5) more options for the helper, in pairs ("--tag", "sbx-sandbox:current";
     * the Dev Container build's "--base-image", "--dockerfile", "--layer", ...:
     * docs/image.md), NULL-terminated; NULL for none. The core refuses a
     * provider built before 1.5 for a build that needs them. */
    const char *const *options;
};

/* (added, ABI 1.6) One image as the engine describes it (the image_op's fn). */
struct sbx_image_info {
    const char *ref;         /* the name asked for (INSPECT, PULL), one tag (LIST), or the
                                registry reference pushed (PUSH) */
    const char *id;          /* the engine's image id ("sha256:...") */
    const char *digest;      /* the registry manifest digest ("sha256:..."), or NULL */
    const char *labels;      /* the image's labels as a JSON object text, or NULL */
    int64_t created;         /* unix seconds, 0 unknown */
    const char *const *tags; /* every "repo:tag" of the image, NULL-terminated */
    int in_use;              /* LIST: a container (running or not) is made from it */
};
typedef int (*sbx_image_fn)(void *userdata, const struct sbx_image_info *info);

enum sbx_image_action {
    SBX_IMAGE_INSPECT = 1, /* ref: calls fn once, or SBX_E_NOTFOUND */
    SBX_IMAGE_PUSH = 2,    /* ref tagged as target ("host:port/path:tag") and pushed; fn once
                              with the manifest digest */
    SBX_IMAGE_PULL = 3,    /* ref ("host:port/path@sha256:...") pulled; fn once */
    SBX_IMAGE_LIST = 4,    /* every image with a tag of repository ref ("sbx-sandbox"); fn each */
    SBX_IMAGE_REMOVE = 5,  /* the tag ref removed (the image goes with its last tag, never
                              one a container uses) */
};

/* (added, ABI 1.6) What the image_op does. */
struct sbx_image_op {
    int action;         /* enum sbx_image_action */
    const char *ref;    /* see the actions */
    const char *target; /* PUSH only */
    const char *auth;   /* PUSH, PULL: the engine's X-Registry-Auth value, or NULL for none.
                           A secret: never logged, never kept */
    sbx_image_fn fn;    /* may be NULL */
    void *userdata;
    const volatile int *cancel; /* non-NULL: set from another thread to stop a PUSH or PULL */
};

/* (added, ABI 1.1) Where the values of one needle were found in a sandbox. */
struct sbx_scan_hits {
    long exec_env;  /* environments of processes running exec_args */
    long other_env; /* environments of every other process of the sandbox */
    long metadata;  /* the engine's own description of the sandbox */
    long files;     /* the sandbox's filesystem */
};

/* (added, ABI 1.1) The spike's credential scan (the optional scan_secrets
 * op): look for each needle in every process environment, the engine's
 * metadata and the filesystem of one sandbox. Needles are secret values:
 * never log them or keep copies. */
struct sbx_secret_scan {
    const char *const *needles; /* values to look for, each at least 4 bytes */
    size_t n_needles;
    const char *exec_args;      /* the command line of the task's own exec ("sleep 3") */
    struct sbx_scan_hits *hits; /* n_needles entries, zeroed by the core */
    long processes;             /* out: processes looked at */
    int64_t file_bytes;         /* out: filesystem bytes read */
};

/* (added, ABI 1.7) snapshot/fork: what the optional snapshot op is asked
 * (docs/tasks.md, "Snapshots and forks"). */
struct sbx_snapshot_req {
    const struct sbx_kv *labels; /* the image's only labels (sbx.snapshot, ...) */
    size_t n_labels;
    /* Secret values (the task's lease) the image must not hold: its files
     * and config are scanned for each (each at least 4 bytes) and an image
     * holding one is removed and refused. Never log them or keep copies. */
    const char *const *needles;
    size_t n_needles;
};

/* (added, ABI 1.7) What the snapshot op made. */
struct sbx_snapshot_out {
    char digest[80]; /* the image's content address, "sha256:<64 hex>" */
    char ref[160];   /* what a sandbox spec's image names to start from it */
    int64_t size;    /* bytes the snapshot's own layer adds, -1 unknown */
    int64_t scanned; /* bytes the secret scan read (0 without needles) */
};

struct sbx_provider_ops {
    uint32_t flags; /* enum sbx_provider_flags */

    int (*init)(const struct sbx_host_api *host, const struct sbx_options *opts, void **ctx,
                sbx_error_t **err);
    void (*destroy_ctx)(void *ctx);

    /* Creates and starts the sandbox; writes its id into id_out. */
    int (*create)(void *ctx, const struct sbx_sandbox_spec *spec, char *id_out, size_t id_size,
                  sbx_error_t **err);
    /* Runs one command; streams output; sets *exit_status (128+n on signal,
     * 126 not executable, 127 not found). Returns -1 only when the provider
     * itself failed (the sandbox is lost, the engine failed, cancelled). */
    int (*exec)(void *ctx, const char *sandbox_id, const struct sbx_exec_spec *spec,
                struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err);
    /* Stops and removes the sandbox and everything created with it.
     * Destroying a sandbox that is already gone succeeds. */
    int (*destroy)(void *ctx, const char *sandbox_id, sbx_error_t **err);
    /* Lists the sandboxes carrying label key (any value if value is NULL). */
    int (*list)(void *ctx, const char *label_key, const char *label_value, sbx_sandbox_fn fn,
                void *userdata, sbx_error_t **err);

    /* Optional. Asks a running exec to stop; exec() then returns. */
    void (*cancel)(void *ctx, struct sbx_exec_ctl *ctl);
    /* Optional. Fills what the provider knows about its engine. */
    int (*info)(void *ctx, struct sbx_provider_info *info, sbx_error_t **err);

    /* Optional (added last). Checks a live sandbox against a limit the
     * provider measures instead of the kernel enforcing it (the Docker
     * provider's disk watchdog). The core calls it from the task's timer
     * about once a second, whether or not a command runs (after_exec 0), and
     * when each command ends (after_exec 1); a provider measures as often as
     * it chooses and returns 0 at once in between. Returns 0 while the
     * sandbox may go on; -1 when the task must end, *err saying why: a limit
     * was passed, or the provider could not measure it (fail closed). The
     * core then stops the task with that message as its reason. */
    int (*check)(void *ctx, const char *sandbox_id, int after_exec, sbx_error_t **err);

    /* Optional (added, ABI 1.1). Builds or re-tags the image of req in the
     * provider's engine; writes the image reference ("sbx-sandbox:<hash>")
     * into ref_out. NULL: `sbx image build` says the provider cannot build
     * images. */
    int (*image_build)(void *ctx, const struct sbx_image_request *req, char *ref_out,
                       size_t ref_size, sbx_error_t **err);
    /* Optional (added, ABI 1.1). Fills scan for a running sandbox (the
     * spike's "only short-lived credentials inside"); returns -1 when any
     * part could not be read. NULL: the spike says the provider cannot be
     * scanned. */
    int (*scan_secrets)(void *ctx, const char *sandbox_id, struct sbx_secret_scan *scan,
                        sbx_error_t **err);
    /* Optional (added, ABI 1.2). A warm sandbox created with view_later is
     * claimed by a task with a worktree (an absolute, canonical path the core
     * checked): mount the provider's view of it on view_dir, the shared mount
     * point the running sandbox sees at /workspace. The core unmounts it when
     * the task ends. Without this op a task with a worktree never claims a
     * warm sandbox (docs/runner.md, "Warm pool"). */
    int (*claim_worktree)(void *ctx, const char *sandbox_id, const char *worktree,
                          const char *view_dir, sbx_error_t **err);
    /* Optional (added, ABI 1.3). A warm sandbox is claimed by a task whose
     * memory, CPUs or pids differ from the ones it was created with: set
     * them on the running sandbox (limits->memory, cpus, pids; its disk, idle
     * and max are not read: a claim with another disk starts cold). -1: the
     * core ends that sandbox and starts one cold. NULL: a claim with other
     * limits always starts cold (docs/runner.md, "Warm pool"). */
    int (*update_limits)(void *ctx, const char *sandbox_id, const struct sbx_limits *limits,
                         sbx_error_t **err);
    /* Optional (added, ABI 1.6). Registry work on the provider's engine for
     * `sbx image push|pull|gc|inspect` and the runner's image check at start
     * (docs/image.md, "Publishing and pulling"). Returns 0, or -1 with *err;
     * an image that is not there is SBX_E_NOTFOUND. NULL: the provider has
     * no images to publish or pull. */
    int (*image_op)(void *ctx, const struct sbx_image_op *op, sbx_error_t **err);

    /* (added, ABI 1.7) snapshot/fork (docs/tasks.md, "Snapshots and forks").
     * Optional. Commits the running sandbox's own filesystem (never its mounts:
     * the worktree, caches, egress and agent directories) as a content-addressed
     * image. Its config is the provider's own (entrypoint, command, user, working
     * directory, no health check, no ONBUILD), never anything the sandbox set;
     * its labels are req->labels and neutralised copies of the sandbox's. With
     * needles, a snapshot that holds one is removed and refused (-1, err says
     * where, never the value). NULL: `sbx task snapshot` says the provider cannot. */
    int (*snapshot)(void *ctx, const char *sandbox_id, const struct sbx_snapshot_req *req,
                    struct sbx_snapshot_out *out, sbx_error_t **err);
    /* Optional. Removes the image of a snapshot (ref or digest); one already
     * gone succeeds; one a sandbox still runs from fails, saying so. */
    int (*snapshot_remove)(void *ctx, const char *ref, sbx_error_t **err);

    /* (added, ABI 1.8) terminals/ports */
    /* Optional. Connects to 127.0.0.1:port inside the sandbox's own network
     * namespace, without giving the sandbox any network (the host end of
     * `sbx port` and the API's /v1/tasks/T/ports/PORT, docs/tasks.md, "Ports"),
     * and sets *fd_out to the connected socket (close-on-exec, blocking). Every
     * byte read from it is the sandbox's data. -1 with err when nothing listens
     * there (ECONNREFUSED) or the sandbox cannot be entered. NULL: the provider
     * cannot forward ports. */
    int (*port_connect)(void *ctx, const char *sandbox_id, int port, int *fd_out,
                        sbx_error_t **err);

    /* ---- (added, ABI 1.9) files/pause (docs/tasks.md, "Files" and "Pause and resume").
     * Paths are absolute paths inside the sandbox and are resolved there (in the
     * sandbox's root, never on the host: a symlink planted inside cannot name a
     * host file). Every op is optional. */
    /* Streams a tar archive of path (a file or a directory, its name the
     * archive's top entry) to sink as it arrives; sink returns non-zero to
     * stop (the op then fails with SBX_E_CANCELLED unless it set *err).
     * A path that does not exist: -1 with SBX_E_NOTFOUND. */
    int (*files_get)(void *ctx, const char *sandbox_id, const char *path,
                     int (*sink)(void *ud, const char *data, size_t len), void *ud,
                     sbx_error_t **err);
    /* Extracts the tar archive tar[0..len) into the existing directory dir. */
    int (*files_put)(void *ctx, const char *sandbox_id, const char *dir, const char *tar,
                     size_t len, sbx_error_t **err);
    /* Freezes every process of the sandbox (no CPU; memory kept). to_disk
     * asks for a checkpoint that frees the memory too: a provider that
     * cannot fails with one line saying why. */
    int (*pause)(void *ctx, const char *sandbox_id, int to_disk, sbx_error_t **err);
    /* Continues every process of a paused sandbox where it stopped. */
    int (*resume)(void *ctx, const char *sandbox_id, sbx_error_t **err);

    /* ---- (added, ABI 1.10) files_put with the archive streamed (`sbx cp` into a task).
     * Extracts the tar archive read from source into the existing directory dir, as
     * files_put does: source fills buf with up to cap bytes (*n 0 at the end) and
     * returns non-zero to stop (the op then fails; the caller knows why). The core
     * bounds the archive (it counts what source gives). NULL: the core reads the whole
     * archive and calls files_put. */
    int (*files_put_stream)(void *ctx, const char *sandbox_id, const char *dir,
                            int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                            sbx_error_t **err);
};

#endif
