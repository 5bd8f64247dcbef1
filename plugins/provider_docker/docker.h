/* docker.h - provider_docker internals: the Docker Engine API over a unix
 * socket through the host's libcurl wrapper. */
#ifndef SBX_PROVIDER_DOCKER_H
#define SBX_PROVIDER_DOCKER_H

#include <jansson.h>
#include <sys/types.h>
#include <pthread.h>
#include <stdint.h>

#include "sbx/sbx_host.h"
#include "sbx/sbx_provider.h"
#include "sbx/sbx_util.h"

#define DK_NAME "provider_docker"
#define DK_MAX_API_MINOR 47 /* the newest API whose fields we use: v1.47 */
#define DK_MIN_API_MINOR 41 /* Debian 12's engine */
/* CPU weight of sandboxes and sidecars: half the host's default (1024), so
 * the host's own processes win under contention (docs/operations.md) */
#define DK_CPU_SHARES 512
/* Where a sandbox finds its sidecar's daemon (the socket's directory, from
 * spec.provider_dir, is mounted there; DOCKER_HOST points at the socket). */
#define DK_DOCKER_DIR "/run/sbx-docker"
#define DK_DOCKER_SOCKET DK_DOCKER_DIR "/docker.sock"

/* A sandbox the disk watchdog measures (docker_disk.c). */
struct dk_watch {
    struct dk_watch *next;
    char id[72];
    int64_t due; /* monotonic seconds of the next measurement */
};

struct dk_ctx {
    const struct sbx_host_api *host;
    const struct sbx_options *opts;
    char *socket;     /* unix socket path */
    char api[16];     /* negotiated, e.g. "v1.41" */
    char engine[128]; /* "docker 20.10.24 (API 1.41)" */
    int userns;       /* 1 when the engine remaps users */
    char storage_driver[64];
    char backing_fs[64];
    /* the disk cap (docker_disk.c) */
    pthread_mutex_t disk_mu; /* disk_mode (it may fall back) and watches */
    int disk_mu_init;
    int disk_mode;            /* DK_DISK_* */
    int disk_fallback;        /* auto on overlay2/xfs: a refused quota turns to the watchdog */
    int disk_forced;          /* disk_enforcement = "watchdog" */
    int disk_fallback_to;     /* DK_DISK_LOOP or DK_DISK_WATCHDOG */
    char disk_loop_why[160];  /* why the per-sandbox filesystem cannot work, or "" */
    int disk_counts_image;    /* btrfs, zfs: the quota counts the image's bytes */
    int64_t disk_interval;    /* seconds between watchdog measurements */
    struct dk_watch *watches; /* sandboxes the watchdog measures, most recent first */
    char **cap_add;           /* capabilities kept */
    unsigned remap_uid;       /* host uid of container root under userns-remap, else 0 */
    unsigned remap_gid;
    /* the Docker sidecar (docker_sidecar.c, docs/testcontainers.md) */
    int sidecar; /* option docker_sidecar: every sandbox gets one */
    char *sidecar_image;
    int sidecar_rootless;    /* 1 rootless inner daemon, 0 rootful (cgroup remount) */
    int64_t sidecar_data;    /* tmpfs bytes for the inner data root */
    int64_t sidecar_timeout; /* seconds to wait for the inner daemon */
    char **sidecar_images;   /* host engine images loaded into each sidecar, or NULL */
    char **sidecar_insecure; /* --insecure-registry values of the inner daemon, or NULL */
    char *seccomp;           /* "seccomp=<profile JSON>" for the sandbox, or NULL (engine's) */
    char seccomp_desc[160];  /* what sbx info shows */
    /* the worktree (docker_worktree.c, docs/tasks.md) */
    int wt_mode;       /* DK_WT_*: option worktree_idmap */
    unsigned wt_uid;   /* the sandbox's root on the host: the remap user's first */
    unsigned wt_gid;   /* ids in /etc/subuid and /etc/subgid */
    char wt_why[256];  /* why idmapped worktrees cannot work on this box, or "" */
    char wt_fix[128];  /* what fixes that */
    int wt_pin;        /* a plain worktree goes through a pinned view (dk_pinned_bind) */
    int rm_background; /* (added) option remove_in_background */
};

enum {
    DK_WT_AUTO = 1,     /* idmapped when the engine remaps users and it works, else plain */
    DK_WT_REQUIRED = 2, /* idmapped or the task is refused */
    DK_WT_OFF = 3,      /* always a plain bind mount */
};

enum {
    DK_DISK_WATCHDOG = 1,
    DK_DISK_STORAGE_OPT = 2,
    DK_DISK_LOOP = 3, /* (added) a per-sandbox ext4 under the overlay2 layer */
};

/* (added) Milliseconds on the monotonic clock, for the phase timings logged
 * at debug level (docs/operations.md, "Where the tail came from"). */
int64_t dk_now_ms(void);

/* docker_api.c */
/* The pid of the sandbox's init as the engine reports it (State.Pid), or 0. */
pid_t dk_init_pid(struct dk_ctx *c, const char *id);
int dk_request(struct dk_ctx *c, const char *method, const char *path, json_t *body, long *status,
               json_t **reply, sbx_error_t **err);
/* The engine's error message from a reply body, or the status text. */
const char *dk_reply_message(json_t *reply);
int dk_negotiate(struct dk_ctx *c, sbx_error_t **err);

/* docker_stream.c: demultiplexes exec output (8-byte frame headers). */
struct dk_demux {
    unsigned char hdr[8];
    size_t hlen;
    uint32_t left;
    int type;
    sbx_output_fn out;
    void *out_ud;
    char syserr[512]; /* text of stream-3 (system error) frames */
    size_t syserr_len;
    int bad;          /* protocol error seen */
    int seen_payload; /* the first payload byte was handled */
};
int dk_demux_feed(void *ud, const char *data, size_t len);

/* docker_api.c: a request whose body is not JSON (socket: NULL for the
 * engine; path is used as given, unversioned). Free resp with
 * c->host->http_response_free. */
int dk_raw(struct dk_ctx *c, const char *socket, const char *method, const char *path,
           const char *body, size_t len, const char *ctype, long timeout_ms,
           struct sbx_http_response *resp, sbx_error_t **err);

/* (added) docker_poststart.c: runs the image's postStartCommand (its label
 * dev.sbx.post-start, docs/image.md) in the started sandbox; -1 when it fails. */
int dk_post_start(struct dk_ctx *c, const char *id, const char *image, sbx_error_t **err);

/* docker_userns.c: caps the sandbox's inotify counters in its own user
 * namespace (SBX_SANDBOX_INOTIFY_*); call right after the start. */
int dk_userns_caps(struct dk_ctx *c, const char *id, sbx_error_t **err);

/* (added) docker_netns.c: the sandbox's netns redirects TCP to names and off-loopback
 * addresses to the relay, and rejects other packets off loopback (docs/egress.md,
 * "Without proxy variables"); call right after the start, before any exec. */
int dk_netns_redirect(struct dk_ctx *c, const char *id, sbx_error_t **err);
/* (added) The host path of sbx-resolv.conf beside the relay at relay (malloc'd), or
 * NULL when there is none. */
char *dk_resolv_conf_path(const char *relay);
/* (added) docker_port.c: the port_connect op (a socket made in the sandbox's netns). */
int dk_port_connect(void *ctx, const char *id, int port, int *fd_out, sbx_error_t **err);
/* docker_userns.c: 1 when /proc/PID/cgroup names the container id. */
int dk_pid_is_container(pid_t pid, const char *id);
/* docker_userns.c: a descriptor of the sandbox id's namespace NS ("user", "net") of
 * its init, pinned by a pidfd and checked to be the sandbox's; -1 with err. */
int dk_open_ns(struct dk_ctx *c, const char *id, const char *ns, sbx_error_t **err);
/* Forks child_main(nsfd, arg) (async-signal-safe code that enters nsfd and exits
 * with a code naming its step), closes nsfd and waits: the child's exit code (128
 * for a signal), or -1 with err when it could not fork. */
int dk_run_in_ns(struct dk_ctx *c, int nsfd, void (*child_main)(int nsfd, const void *arg),
                 const void *arg, sbx_error_t **err);

/* docker_seccomp.c: the sandbox's seccomp profile (option seccomp). */
json_t *dk_seccomp_profile(void);
int dk_seccomp_init(struct dk_ctx *c, sbx_error_t **err);

/* docker_sidecar.c */
int dk_sidecar_init(struct dk_ctx *c, sbx_error_t **err);
void dk_sidecar_free(struct dk_ctx *c);
/* What the sandbox needs when it gets a sidecar: env, mount and label. */
void dk_sidecar_sandbox_body(struct dk_ctx *c, const struct sbx_sandbox_spec *s, json_t *env,
                             json_t *mounts, json_t *labels);
/* Starts the sidecar in the netns of sandbox id; waits for the daemon. */
int dk_sidecar_start(struct dk_ctx *c, const char *id, const struct sbx_sandbox_spec *s,
                     sbx_error_t **err);
/* Removes the sidecars of sandbox id (none is fine). */
int dk_sidecar_remove(struct dk_ctx *c, const char *id, sbx_error_t **err);
/* The isolation a sidecar runs with (struct sbx_provider_info.nested). */
void dk_sidecar_describe(struct dk_ctx *c, char *buf, size_t size);
/* docker_worktree.c */
int dk_worktree_init(struct dk_ctx *c, sbx_error_t **err);
/* Where the probe reads the remap range and sbx's capabilities. */
struct dk_probe_files {
    const char *subuid; /* /etc/subuid */
    const char *subgid; /* /etc/subgid */
    const char *status; /* /proc/self/status */
};
/* Sets c->wt_why and c->wt_fix when idmapped worktrees cannot work on this
 * box (c->userns, c->remap_uid/gid and c->socket set), else the range in
 * c->wt_uid/wt_gid. */
int dk_worktree_probe(struct dk_ctx *c, const char *user, const struct dk_probe_files *f);
/* The host path to bind at /workspace: the idmapped view (mounted now on
 * s->view_dir; *viewed = 1) or the worktree itself; -1 when worktree_idmap =
 * required and no view can be made. */
int dk_worktree_source(struct dk_ctx *c, const struct sbx_sandbox_spec *s, const char **src,
                       int *viewed, sbx_error_t **err);
void dk_worktree_release(const char *view);
/* (added) Gives a read-write mount's directory (the worktree's git dir, core wtgit.h) to
 * the sandbox's root on the host: the remap user's first id, or root; (added) plus
 * ru:rg, the image's remote user (dk_remote_ids). */
int dk_worktree_give(struct dk_ctx *c, const char *dir, unsigned ru, unsigned rg,
                     sbx_error_t **err);
/* (added) updateRemoteUserUID: the ids inside of the image's remote user from its
 * label dev.sbx.remote-ids (sbx image build), the user the worktree's owner
 * becomes inside; 0:0 for none. image NULL: the image of container. */
void dk_remote_ids(struct dk_ctx *c, const char *image, const char *container, unsigned *uid,
                   unsigned *gid);
/* Which applies, for struct sbx_provider_info.worktree. */
void dk_worktree_describe(struct dk_ctx *c, char *buf, size_t size);

/* docker_push.c: the image_op (push, pull by digest, list, remove, inspect) */
int dk_image_op(void *ctx, const struct sbx_image_op *op, sbx_error_t **err);
/* docker_image.c: the image_build op */
int dk_image_build(void *ctx, const struct sbx_image_request *req, char *ref_out, size_t ref_size,
                   sbx_error_t **err);
/* docker_scan.c: the scan_secrets op */
int dk_scan_secrets(void *ctx, const char *id, struct sbx_secret_scan *s, sbx_error_t **err);
/* (added) the filesystem part of it: container id's export, streamed (hits[].files) */
int dk_scan_export(struct dk_ctx *c, const char *id, struct sbx_secret_scan *s, sbx_error_t **err);
/* (added, ABI 1.7) docker_snapshot.c: the snapshot and snapshot_remove ops */
int dk_snapshot(void *ctx, const char *id, const struct sbx_snapshot_req *req,
                struct sbx_snapshot_out *out, sbx_error_t **err);
int dk_snapshot_remove(void *ctx, const char *ref, sbx_error_t **err);

/* docker.c */
json_t *dk_strv_json(const char *const *v);
json_t *dk_bind_mount(const char *src, const char *dst, int ro);
/* (added) a read-write bind with rslave propagation (a warm sandbox's view) */
json_t *dk_bind_mount_rslave(const char *src, const char *dst);
/* docker_claim.c (added): a warm sandbox's shared /workspace mount point, and
 * the worktree mounted on it at claim time (docs/runner.md, Warm pool) */
int dk_claim_prepare(struct dk_ctx *c, const char *view_dir, sbx_error_t **err);
/* (added) POST /containers/{id}/update: memory (no swap), CPUs, pids, as at
 * create (docker_claim.c). */
int dk_update_limits(void *ctx, const char *sandbox_id, const struct sbx_limits *limits,
                     sbx_error_t **err);
int dk_claim_worktree(void *ctx, const char *sandbox_id, const char *worktree, const char *view_dir,
                      sbx_error_t **err);

/* docker_disk.c: the disk cap. */
int dk_disk_init(struct dk_ctx *c, const char *mode, sbx_error_t **err);
void dk_disk_free(struct dk_ctx *c);
/* 1 when containers get a quota (storage-opt), 0 under the watchdog. */
int dk_disk_quota(struct dk_ctx *c);
/* The mechanism, for sbx info (struct sbx_provider_info.disk_limit). */
void dk_disk_describe(struct dk_ctx *c, char *buf, size_t size);
/* Adds HostConfig.StorageOpt.size for a cap of `disk` bytes to hc when the
 * mechanism is a quota (nothing under the watchdog); build_hint names the
 * command that builds `image` for its not-found error. */
int dk_disk_storage_opt(struct dk_ctx *c, json_t *hc, const char *image, const char *build_hint,
                        int64_t disk, sbx_error_t **err);
/* After a refused create: 1 when the refusal was the quota and this context
 * just fell back to the watchdog (create again without it), else 0. */
int dk_disk_fallback(struct dk_ctx *c, long status, json_t *reply);
/* The provider's check op: the watchdog (0 at once under a quota). */
int dk_disk_check(void *ctx, const char *id, int after_exec, sbx_error_t **err);
/* Forgets a removed sandbox. */
void dk_disk_forget(struct dk_ctx *c, const char *id);
/* (added) DK_DISK_*: the mechanism now. */
int dk_disk_mode(struct dk_ctx *c);
/* (added) Between create and start: the per-sandbox filesystem when the
 * mechanism is DK_DISK_LOOP and disk > 0 (else nothing). */
int dk_disk_after_create(struct dk_ctx *c, const char *id, int64_t disk, sbx_error_t **err);

/* docker_remove.c (added): removal off the job's path. */
/* DELETE ?force=1&v=1 now (a removal in progress is waited for). */
int dk_remove_now(struct dk_ctx *c, const char *id, sbx_error_t **err);
/* Kills the container now and queues its removal for the process's worker. */
/* docker_qgroup.c (added, issue 25): stale btrfs qgroups removed after
 * removals. setup: after /info (root: DockerRootDir); describe: "" or the
 * "; stale qgroups ..." tail of sbx info's disk line; removed: a removal
 * finished; wait: seconds until a run is due (-1: none); run_due: runs
 * `btrfs qgroup clear-stale` when due (force: now, if any is pending). */
void dk_qgroup_setup(struct dk_ctx *c, const char *root);
void dk_qgroup_describe(char *buf, size_t size);
void dk_qgroup_removed(void);
int64_t dk_qgroup_wait(void);
void dk_qgroup_run_due(const struct sbx_host_api *host, int force);
int dk_remove_later(struct dk_ctx *c, const char *id, sbx_error_t **err);
/* Removals queued or in progress in this process. */
int dk_remove_pending(void);
/* (added) The container whose full id is id was killed by this process and
 * waits for (or is in) its removal in the background. */
int dk_remove_queued(const char *id);
/* An instance opens / closes; the last close waits for the queue. */
void dk_remove_hold(void);
void dk_remove_release(void);

/* docker_loopcap.c (added): the per-sandbox ext4 under the overlay2 layer. */
/* 1 when it can work here (root, /dev/loop-control, mkfs.ext4), else 0 and why. */
int dk_loopcap_available(char *why, size_t len);
/* Mounts a fresh ext4 of `bytes` on container id's layer directory (the
 * container created, not started); nothing is left when the engine removes
 * the container. */
int dk_loopcap_apply(struct dk_ctx *c, const char *id, int64_t bytes, sbx_error_t **err);

/* docker_exec.c */
/* (added, ABI 1.9) docker_files.c, docker_pause.c: files of a running sandbox through
 * the engine's archive API, and pause/resume (docs/tasks.md, "Files", "Pause and resume"). */
int dk_files_get(void *ctx, const char *id, const char *path,
                 int (*sink)(void *ud, const char *data, size_t len), void *ud, sbx_error_t **err);
int dk_files_put(void *ctx, const char *id, const char *dir, const char *tar, size_t len,
                 sbx_error_t **err);
int dk_files_put_stream(void *ctx, const char *id, const char *dir,
                        int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                        sbx_error_t **err);
int dk_pause(void *ctx, const char *id, int to_disk, sbx_error_t **err);
int dk_resume(void *ctx, const char *id, sbx_error_t **err);

int dk_exec(void *ctx, const char *id, const struct sbx_exec_spec *spec, struct sbx_exec_ctl *ctl,
            int *exit_status, sbx_error_t **err);
/* (added) A put into the worktree, staged (docker_stage.c). */
struct dk_stage {
    char dir[48];   /* /tmp/.sbx-put-RANDOM inside, or "" */
    char owner[24]; /* the destination's "UID:GID" inside */
    int open;
};
/* 1 when an archive put into dir must be staged (dir is /workspace or below). */
int dk_stage_wanted(const char *dir);
/* Makes the staging dir and reads dest's owner inside. */
int dk_stage_open(struct dk_ctx *c, const char *id, const char *dest, struct dk_stage *s,
                  sbx_error_t **err);
/* Copies what was put into s->dir into dest, as dest's owner. */
int dk_stage_commit(struct dk_ctx *c, const char *id, const char *dest, struct dk_stage *s,
                    sbx_error_t **err);
/* Removes the staging dir (logged when it cannot). */
void dk_stage_close(struct dk_ctx *c, const char *id, struct dk_stage *s);

/* (added) The same for sbx's own steps in the sandbox: never through the exec
 * agent, as user ("UID:GID"; NULL: the container's). */
int dk_exec_user(struct dk_ctx *c, const char *id, const struct sbx_exec_spec *spec,
                 const char *user, int *exit_status, sbx_error_t **err);
void dk_cancel(void *ctx, struct sbx_exec_ctl *ctl);

#endif
