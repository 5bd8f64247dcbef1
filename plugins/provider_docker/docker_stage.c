/* docker_stage.c - an archive put into the worktree (docs/tasks.md, "Files").
 *
 * /workspace is an idmapped view of the host's worktree: only the sandbox's own
 * users are mapped there, and the engine extracts an archive as the daemon's
 * root, which the view does not map, so its PUT fails with EOVERFLOW ("value
 * too large for defined data type"). Such a put goes to a staging directory on
 * the container's own filesystem (/tmp/.sbx-put-RANDOM, mode 0700) and is then
 * copied in by the user that owns the destination inside (cp -a, as that
 * uid:gid): the write is the sandbox's own, under the sandbox's rules (the
 * protected paths' read-only mounts, its own git dir, the seccomp profile, the
 * worktree's checks), and the files are the worktree owner's on the host. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "docker.h"

#define STAGE_OUT_MAX 512

struct out {
    char buf[STAGE_OUT_MAX];
    size_t len;
};

static int keep_out(void *ud, int stream, const char *data, size_t len)
{
    struct out *o = ud;
    size_t room = sizeof(o->buf) - 1 - o->len;

    (void)stream;
    if (len > room) {
        len = room;
    }
    memcpy(o->buf + o->len, data, len);
    o->len += len;
    o->buf[o->len] = '\0';
    return 0;
}

/* Runs argv in the sandbox as user; 0 when it exited 0, else -1 naming what
 * with its output's first line. */
static int step(struct dk_ctx *c, const char *id, const char *user, const char *const *argv,
                const char *what, struct out *o, sbx_error_t **err)
{
    struct sbx_exec_spec spec = {.argv = argv, .on_output = keep_out, .output_userdata = o};
    int code = 0;

    o->len = 0;
    o->buf[0] = '\0';
    if (dk_exec_user(c, id, &spec, user, &code, err) < 0) {
        return c->host->error_wrap(err, "docker: %s", what);
    }
    if (code != 0) {
        o->buf[strcspn(o->buf, "\n")] = '\0';
        return c->host->error_set(err, SBX_E_ENGINE, "docker: %s: exit %d: %s", what, code,
                                  o->buf[0] ? o->buf : "(no output)");
    }
    return 0;
}

int dk_stage_wanted(const char *dir)
{
    return strcmp(dir, "/workspace") == 0 || strncmp(dir, "/workspace/", 11) == 0;
}

int dk_stage_open(struct dk_ctx *c, const char *id, const char *dest, struct dk_stage *s,
                  sbx_error_t **err)
{
    unsigned char rnd[8];
    const char *argv[] = {
        "/bin/sh", "-c", "mkdir -m 0700 \"$1\" && stat -c %u:%g \"$2\"", "sh", NULL, dest, NULL};
    struct out o;
    unsigned u, g;
    char extra;

    memset(s, 0, sizeof(*s));
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        return c->host->error_set(err, SBX_E_GENERIC, "docker: no random bytes for a staging dir");
    }
    snprintf(s->dir, sizeof(s->dir), "/tmp/.sbx-put-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
             rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    argv[4] = s->dir;
    if (step(c, id, "0:0", argv, "a staging dir for the worktree", &o, err) < 0) {
        return -1;
    }
    /* the destination's owner inside: digits only, from the sandbox, bounded */
    if (sscanf(o.buf, "%u:%u%c", &u, &g, &extra) < 2 || (extra != '\n' && extra != '\0') ||
        u > 0x7fffffffu || g > 0x7fffffffu) {
        dk_stage_close(c, id, s);
        return c->host->error_set(err, SBX_E_ENGINE, "docker: %s: its owner inside is unreadable",
                                  dest);
    }
    snprintf(s->owner, sizeof(s->owner), "%u:%u", u, g);
    s->open = 1;
    return 0;
}

int dk_stage_commit(struct dk_ctx *c, const char *id, const char *dest, struct dk_stage *s,
                    sbx_error_t **err)
{
    const char *chown_argv[] = {"chown", "-R", s->owner, s->dir, NULL};
    /* each entry of the staging dir (dot files too), never the dir itself: its
     * mode must not land on dest */
    const char *cp_argv[] = {"/bin/sh",
                             "-c",
                             "d=$2; cd \"$1\" || exit 1; for f in * .[!.]* ..?*; do "
                             "if [ -e \"$f\" ] || [ -L \"$f\" ]; then "
                             "cp -a -- \"$f\" \"$d\"/ || exit 1; fi; done",
                             "sh",
                             s->dir,
                             dest,
                             NULL};
    struct out o;

    if (strcmp(s->owner, "0:0") != 0 &&
        step(c, id, "0:0", chown_argv, "handing the staged files over", &o, err) < 0) {
        return -1;
    }
    if (step(c, id, s->owner, cp_argv, "copying into the worktree", &o, err) < 0) {
        return -1;
    }
    return 0;
}

void dk_stage_close(struct dk_ctx *c, const char *id, struct dk_stage *s)
{
    const char *argv[] = {"rm", "-rf", s->dir, NULL};
    struct out o;
    sbx_error_t *e = NULL;

    if (s->dir[0] == '\0') {
        return;
    }
    if (step(c, id, "0:0", argv, "removing the staging dir", &o, &e) < 0) {
        c->host->log(DK_NAME, SBX_LOG_WARN, "%s (%s)", e ? e->msg : "?", s->dir);
        c->host->error_free(&e);
    }
    s->dir[0] = '\0';
    s->open = 0;
}
