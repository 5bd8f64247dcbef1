/* docker_worktree.c - how the worktree reaches /workspace: through an
 * idmapped view (docker_idmap.c) when the engine remaps users, else a plain
 * bind mount; option worktree_idmap = auto | required | off (docs/tasks.md,
 * "The worktree and user namespaces"). */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "docker.h"
#include "docker_idmap.h"

/* CAP_SYS_ADMIN, for the probe of /proc/self/status */
#define DK_CAP_SYS_ADMIN 21

/* Idmapped worktrees cannot work on this box: why, and what fixes it. */
static void set_why(struct dk_ctx *c, const char *fix, const char *why)
{
    snprintf(c->wt_why, sizeof(c->wt_why), "%s", why);
    snprintf(c->wt_fix, sizeof(c->wt_fix), "%s", fix);
}

int dk_worktree_probe(struct dk_ctx *c, const char *user, const struct dk_probe_files *f)
{
    struct passwd pwbuf;
    struct passwd *pw = NULL;
    char pwtext[1024];
    char why[256] = "";
    long uid = -1;

    c->wt_why[0] = '\0';
    c->wt_fix[0] = '\0';
    if (!c->userns) {
        set_why(c, "turn on the engine's userns-remap (docs/operations.md)",
                "the engine does not remap users");
        return 0;
    }
    /* a line of /etc/subuid may name the user by its uid */
    if (getpwnam_r(user, &pwbuf, pwtext, sizeof(pwtext), &pw) == 0 && pw != NULL) {
        uid = (long)pw->pw_uid;
    }
    if (dk_subid_first(f->subuid, user, uid, &c->wt_uid, why, sizeof(why)) < 0 ||
        dk_subid_first(f->subgid, user, uid, &c->wt_gid, why, sizeof(why)) < 0) {
        set_why(c, "set userns_remap_user to the engine's userns-remap user", why);
        return 0;
    }
    /* the engine's data root ends in "<uid>.<gid>" of its root: they must agree */
    if ((c->remap_uid != 0 || c->remap_gid != 0) &&
        (c->remap_uid != c->wt_uid || c->remap_gid != c->wt_gid)) {
        snprintf(why, sizeof(why),
                 "'%.64s' starts at %u:%u in %s and %s, but the engine's root is host %u:%u", user,
                 c->wt_uid, c->wt_gid, f->subuid, f->subgid, c->remap_uid, c->remap_gid);
        set_why(c, "set userns_remap_user to the engine's userns-remap user", why);
        return 0;
    }
    if (dk_idmap_kernel(why, sizeof(why)) != 1) {
        set_why(c, "run a Linux 5.12+ kernel", why);
        return 0;
    }
    if (dk_cap_effective(f->status, DK_CAP_SYS_ADMIN, why, sizeof(why)) != 1) {
        set_why(c, "run sbx as root", why);
        return 0;
    }
    if (dk_same_mount_ns(c->socket, why, sizeof(why)) == 0) {
        set_why(c,
                "run sbx in the engine's mount namespace (no PrivateMounts, PrivateTmp or "
                "ProtectSystem in its unit)",
                why);
        return 0;
    }
    return 0;
}

int dk_worktree_init(struct dk_ctx *c, sbx_error_t **err)
{
    static const struct dk_probe_files files = {"/etc/subuid", "/etc/subgid", "/proc/self/status"};
    const char *mode = c->host->opt_string(c->opts, "worktree_idmap");
    const char *user = c->host->opt_string(c->opts, "userns_remap_user");

    if (mode == NULL || strcmp(mode, "auto") == 0) {
        c->wt_mode = DK_WT_AUTO;
    }
    else if (strcmp(mode, "required") == 0) {
        c->wt_mode = DK_WT_REQUIRED;
    }
    else if (strcmp(mode, "off") == 0) {
        c->wt_mode = DK_WT_OFF;
    }
    else {
        return c->host->error_set(err, SBX_E_CONFIG,
                                  "%s: worktree_idmap '%s': use auto, "
                                  "required or off",
                                  c->host->opt_where(c->opts, "worktree_idmap"), mode);
    }
    if (user == NULL || user[0] == '\0' || strchr(user, ':') != NULL || strlen(user) > 64) {
        return c->host->error_set(err, SBX_E_CONFIG,
                                  "%s: userns_remap_user '%s': a user name "
                                  "(the engine's userns-remap user, default dockremap)",
                                  c->host->opt_where(c->opts, "userns_remap_user"),
                                  user ? user : "");
    }
    if (dk_worktree_probe(c, user, &files) < 0) {
        return -1;
    }
    /* a plain worktree is pinned too where views work at all: open_tree and
     * move_mount, CAP_SYS_ADMIN, and the engine in our mount namespace */
    {
        char why[256];

        c->wt_pin = dk_idmap_kernel(why, sizeof(why)) == 1 &&
                    dk_cap_effective(files.status, DK_CAP_SYS_ADMIN, why, sizeof(why)) == 1 &&
                    dk_same_mount_ns(c->socket, why, sizeof(why)) == 1;
    }
    return 0;
}

/* A plain bind mount of the worktree: through a pinned view where the box
 * allows one, so that the engine binds what was checked, not a path that
 * may have been swapped since (docs/tasks.md). */
static int plain_source(struct dk_ctx *c, const struct sbx_sandbox_spec *s, const char **src,
                        int *viewed, sbx_error_t **err)
{
    char why[512];

    if (!c->wt_pin || s->view_dir == NULL) {
        return 0;
    }
    if (dk_pinned_bind(s->worktree, s->view_dir, why, sizeof(why)) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker: worktree %s: %s", s->worktree, why);
    }
    *src = s->view_dir;
    *viewed = 1;
    return 0;
}

int dk_worktree_source(struct dk_ctx *c, const struct sbx_sandbox_spec *s, const char **src,
                       int *viewed, sbx_error_t **err)
{
    const char *inst = c->host->instance_name(c->opts);
    char why[512];
    const char *fix = c->wt_fix;
    unsigned ru = 0;
    unsigned rg = 0;

    *src = s->worktree;
    *viewed = 0;
    if (s->worktree == NULL) {
        return 0;
    }
    if (c->wt_mode == DK_WT_OFF) {
        return plain_source(c, s, src, viewed, err);
    }
    /* (added) the worktree's owner is the image's remote user inside
     * (updateRemoteUserUID), else the sandbox's root */
    dk_remote_ids(c, s->image, s->image ? NULL : s->task_id, &ru, &rg);
    if (!c->userns && c->wt_mode == DK_WT_AUTO) {
        /* container root is host root: a plain bind is writable; for a
         * remote user, a view that maps the owner to it (ids are the host's) */
        if (ru != 0 && c->wt_pin && s->view_dir != NULL &&
            dk_idmap_mount(s->worktree, s->view_dir, ru, rg, why, sizeof(why)) == 0) {
            *src = s->view_dir;
            *viewed = 1;
            return 0;
        }
        if (ru != 0) {
            c->host->log(inst, SBX_LOG_WARN,
                         "worktree %s: updateRemoteUserUID cannot hold: the owner stays the "
                         "owner, not the image's user %u, inside (%s; docs/image.md)",
                         s->worktree, ru, c->wt_pin ? why : "no idmapped views on this box");
        }
        return plain_source(c, s, src, viewed, err);
    }
    snprintf(why, sizeof(why), "%s", c->wt_why);
    if (why[0] == '\0' && s->view_dir == NULL) {
        snprintf(why, sizeof(why), "the core gave no view directory");
        fix = "use an sbx core as new as this plugin";
    }
    if (why[0] == '\0') {
        if (dk_idmap_mount(s->worktree, s->view_dir, c->wt_uid + ru, c->wt_gid + rg, why,
                           sizeof(why)) == 0) {
            *src = s->view_dir;
            *viewed = 1;
            return 0;
        }
        fix = "put the worktree on a filesystem with idmapped mounts (ext4, xfs, btrfs, tmpfs)";
    }
    if (c->wt_mode == DK_WT_REQUIRED) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker: worktree %s: worktree_idmap = "
                                  "required, but no idmapped mount: %s",
                                  s->worktree, why);
    }
    c->host->log(inst, SBX_LOG_WARN,
                 "worktree %s: plain bind mount, its files show as nobody "
                 "inside and cannot be written there: no idmapped mount (%s); fix: %s, or set "
                 "worktree_idmap = \"off\" (docs/tasks.md)",
                 s->worktree, why, fix);
    return plain_source(c, s, src, viewed, err);
}

void dk_worktree_release(const char *view)
{
    if (view != NULL) {
        dk_idmap_release(view);
    }
}

void dk_worktree_describe(struct dk_ctx *c, char *buf, size_t size)
{
    static const char *const names[] = {"", "auto", "required", "off"};
    const char *mode = names[c->wt_mode];

    if (c->wt_mode == DK_WT_OFF) {
        snprintf(buf, size, "plain bind mount (worktree_idmap = off)");
    }
    else if (!c->userns && c->wt_mode == DK_WT_AUTO) {
        snprintf(buf, size, "plain bind mount: the engine does not remap users (auto)");
    }
    else if (c->wt_why[0] != '\0' && c->wt_mode == DK_WT_REQUIRED) {
        snprintf(buf, size, "REFUSED: %.160s (required)", c->wt_why);
    }
    else if (c->wt_why[0] != '\0') {
        snprintf(buf, size, "plain bind mount, files show as nobody: %.160s (auto)", c->wt_why);
    }
    else {
        snprintf(buf, size, "idmapped: its owner is root inside (host %u:%u) (%s)", c->wt_uid,
                 c->wt_gid, mode);
    }
}

/* nftw has no user data: the ids of the walk under way, one walk at a time
 * (give_mu). Not thread-local: a dlopen'ed plugin's TLS outlives its dlclose
 * in threads that touched it, and LeakSanitizer then reads a freed block at
 * exit (seen as "Tracer caught signal 11"). */
static pthread_mutex_t give_mu = PTHREAD_MUTEX_INITIALIZER;
static uid_t give_uid;
static gid_t give_gid;

static int give_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)type;
    (void)f;
    return lchown(path, give_uid, give_gid) < 0 ? -1 : 0;
}

int dk_worktree_give(struct dk_ctx *c, const char *dir, unsigned ru, unsigned rg, sbx_error_t **err)
{
    int rc;
    int e;

    pthread_mutex_lock(&give_mu);
    give_uid = (c->userns ? (c->remap_uid ? c->remap_uid : c->wt_uid) : 0) + ru;
    give_gid = (c->userns ? (c->remap_gid ? c->remap_gid : c->wt_gid) : 0) + rg;
    rc = nftw(dir, give_one, 16, FTW_PHYS | FTW_MOUNT);
    e = errno;
    pthread_mutex_unlock(&give_mu);
    if (rc < 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker: giving %s to the sandbox's root: %s",
                                  dir, strerror(e));
    }
    return 0;
}
