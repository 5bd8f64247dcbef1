/* pty_session.c - a task's kept terminal session (pty_session.h).
 *
 * Three kinds of threads meet here: the session's own (it runs the command
 * through sbx_task_exec, like any exec, and returns when it ends), its pump (the
 * only one that reads the master and writes to a client, so frames never
 * interleave), and one per client connection (it waits in attach_wait until the
 * pump lets it go, then writes that client's 'X'). Lock order: t->mu, then s->mu;
 * the pump never holds s->mu while it takes t->mu. */
#include "sandbox/pty_session.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sbx_util.h>

#include "sandbox/proto.h"
#include "sandbox/task_int.h"
#include "util/log.h"
#include "util/xalloc.h"

#define OUT_CHUNK 65536
/* after the command's end: how long the master is read for what it wrote last */
#define DRAIN_QUIET_MS 100
#define DRAIN_MAX_MS 2000
/* a client that takes no output for this long is let go (the session goes on) */
#define CLIENT_SEND_TIMEOUT_S 10

enum outcome { C_ATTACHED = 0, C_DETACHED, C_TAKEN, C_ENDED };

struct client {
    int fd;
    unsigned rows, cols;
    enum outcome outcome; /* under s->mu; the pump sets it once */
};

struct sbx_tty_session {
    struct sbx_task *t;
    char **argv; /* owned copies: the session outlives the request */
    struct sbx_kv *env;
    size_t n_env;
    int master;
    int slave;
    int ctl[2]; /* wakes the pump: a client to attach, the command ended */
    pthread_t thread, pump;
    struct sbx_exec_slot slot;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct client *cur;     /* attached; the pump's alone */
    struct client *pending; /* to attach next */
    int refs;               /* clients in attach_wait or about to be */
    int go;                 /* 1: run the command; -1: the task did not take the session */
    int ended;              /* the command returned: exec_r, status, msg, code */
    int done;               /* the pump finished: every client let go */
    int exec_r, status, code;
    char msg[512];

    /* the pump's alone */
    unsigned char ring[SBX_TTY_SCROLLBACK];
    size_t ring_head; /* where the next byte goes */
    size_t ring_len;
    char *in; /* typed bytes the terminal has not taken yet */
    size_t in_len;
};

static void send_x(int fd, json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);

    if (s != NULL && sbx_frame_write(fd, 'X', s, strlen(s)) < 0) {
        /* the client went away: nothing to tell */
    }
    free(s);
    json_decref(j);
}

static int code_of(const sbx_error_t *e)
{
    return e == NULL ? 125 : e->code == SBX_E_NOCMD ? 127 : e->code == SBX_E_NOEXEC ? 126 : 125;
}

static void activity(struct sbx_task *t, int attached_delta)
{
    pthread_mutex_lock(&t->mu);
    t->running += attached_delta;
    t->last_activity = time(NULL);
    pthread_mutex_unlock(&t->mu);
}

static void wake(struct sbx_tty_session *s)
{
    while (write(s->ctl[1], "", 1) < 0 && errno == EINTR) {
    }
}

/* ---- the pump ------------------------------------------------------------ */

static void ring_add(struct sbx_tty_session *s, const char *buf, size_t n)
{
    if (n >= sizeof(s->ring)) {
        buf += n - sizeof(s->ring);
        n = sizeof(s->ring);
    }
    for (size_t i = 0; i < n;) {
        size_t room = sizeof(s->ring) - s->ring_head;
        size_t k = n - i < room ? n - i : room;

        memcpy(s->ring + s->ring_head, buf + i, k);
        s->ring_head = (s->ring_head + k) % sizeof(s->ring);
        i += k;
    }
    s->ring_len = s->ring_len + n > sizeof(s->ring) ? sizeof(s->ring) : s->ring_len + n;
}

/* Lets the attached client go with outcome o. */
static void release(struct sbx_tty_session *s, enum outcome o)
{
    if (s->cur == NULL) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->cur->outcome = o;
    s->cur = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    free(s->in);
    s->in = NULL;
    s->in_len = 0;
    activity(s->t, -1);
    sbx_info("task %s: kept session: client %s", s->t->id,
             o == C_TAKEN   ? "taken over by another"
             : o == C_ENDED ? "told the end"
                            : "detached");
}

/* The scrollback to a client that just attached: 0, or -1 when it is gone. */
static int replay(struct sbx_tty_session *s)
{
    size_t start = (s->ring_head + sizeof(s->ring) - s->ring_len) % sizeof(s->ring);
    size_t first = s->ring_len < sizeof(s->ring) - start ? s->ring_len : sizeof(s->ring) - start;

    if (first > 0 && sbx_frame_write(s->cur->fd, 'O', s->ring + start, first) < 0) {
        return -1;
    }
    if (s->ring_len > first && sbx_frame_write(s->cur->fd, 'O', s->ring, s->ring_len - first) < 0) {
        return -1;
    }
    return 0;
}

/* Takes the pending client, if any, over from the attached one. */
static void take_pending(struct sbx_tty_session *s)
{
    struct client *c;

    pthread_mutex_lock(&s->mu);
    c = s->pending;
    s->pending = NULL;
    pthread_mutex_unlock(&s->mu);
    if (c == NULL) {
        return;
    }
    release(s, C_TAKEN);
    s->cur = c;
    activity(s->t, +1);
    if (sbx_tty_dims_ok(c->rows, c->cols)) {
        sbx_pty_set_size(s->master, c->rows, c->cols); /* the shell gets SIGWINCH, redraws */
    }
    sbx_info("task %s: kept session: a client attached", s->t->id);
    if (replay(s) < 0) {
        release(s, C_DETACHED);
    }
}

/* One frame from the attached client: -1 when it left (closed or misbehaved). */
static int from_client(struct sbx_tty_session *s)
{
    char type = 0;
    char *data = NULL;
    size_t len = 0;
    sbx_error_t *err = NULL;
    int r = sbx_frame_read(s->cur->fd, &type, &data, &len, &err);

    sbx_error_free(&err);
    if (r == 0 && type == 'I' && len <= SBX_TTY_IN_MAX) {
        s->in = xrealloc(s->in, s->in_len + len + 1);
        memcpy(s->in + s->in_len, data, len);
        s->in_len += len;
        activity(s->t, 0);
    }
    else if (r == 0 && type == 'W' && len == 4) {
        const unsigned char *u = (const unsigned char *)data;
        unsigned rows = (unsigned)(u[0] << 8 | u[1]);
        unsigned cols = (unsigned)(u[2] << 8 | u[3]);

        if (sbx_tty_dims_ok(rows, cols)) {
            sbx_pty_set_size(s->master, rows, cols);
        }
    }
    else {
        if (r == 0) {
            sbx_warn("task %s: kept session: unexpected frame (%zu bytes) from a client: "
                     "let go",
                     s->t->id, len);
        }
        free(data);
        return -1;
    }
    if (data != NULL) {
        explicit_bzero(data, len); /* typed: may be a password */
    }
    free(data);
    return 0;
}

/* What the terminal wrote: to the ring and the attached client. 1 read, 0 nothing
 * now, -1 EOF (every slave closed) or an error. */
static int from_terminal(struct sbx_tty_session *s)
{
    char buf[OUT_CHUNK];
    ssize_t n = read(s->master, buf, sizeof(buf));

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }
    if (n <= 0) {
        return -1;
    }
    ring_add(s, buf, (size_t)n);
    activity(s->t, 0);
    if (s->cur != NULL && sbx_frame_write(s->cur->fd, 'O', buf, (size_t)n) < 0) {
        release(s, C_DETACHED); /* gone, or took nothing for CLIENT_SEND_TIMEOUT_S */
    }
    return 1;
}

static int has_ended(struct sbx_tty_session *s)
{
    int ended;

    pthread_mutex_lock(&s->mu);
    ended = s->ended;
    pthread_mutex_unlock(&s->mu);
    return ended;
}

/* The control pipe woke the pump: drained; when the command has ended, the read of
 * what it wrote last starts (*drain_until, *quiet_until). */
static void from_ctl(struct sbx_tty_session *s, int64_t *drain_until, int64_t *quiet_until)
{
    char drain[64];

    while (read(s->ctl[0], drain, sizeof(drain)) < 0 && errno == EINTR) {
    }
    if (has_ended(s) && *drain_until < 0) {
        /* the command ended: read what it wrote last, then stop */
        *drain_until = sbx_mono_ms() + DRAIN_MAX_MS;
        *quiet_until = sbx_mono_ms() + DRAIN_QUIET_MS;
    }
}

/* Typed input to the terminal, as much as it takes now; what went is wiped. */
static void to_terminal(struct sbx_tty_session *s)
{
    ssize_t w = write(s->master, s->in, s->in_len);

    if (w > 0) {
        explicit_bzero(s->in, (size_t)w);
        memmove(s->in, s->in + w, s->in_len - (size_t)w);
        s->in_len -= (size_t)w;
    }
}

/* The pump's end: it waits for the command's end when it stopped before it (a
 * poll error), then lets every client, attached or pending, go with C_ENDED. */
static void pump_done(struct sbx_tty_session *s)
{
    while (!has_ended(s)) {
        struct pollfd p = {.fd = s->ctl[0], .events = POLLIN};
        char drain[64];

        if (poll(&p, 1, -1) > 0 && read(s->ctl[0], drain, sizeof(drain)) < 0) {
            /* drained */
        }
    }
    take_pending(s);
    release(s, C_ENDED);
    pthread_mutex_lock(&s->mu);
    if (s->pending != NULL) {
        s->pending->outcome = C_ENDED;
        s->pending = NULL;
    }
    s->done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *pump_main(void *arg)
{
    struct sbx_tty_session *s = arg;
    int64_t drain_until = -1;
    int64_t quiet_until = -1;
    int master_open = 1;

    for (;;) {
        struct pollfd f[3];
        int wait = -1;
        int n;

        take_pending(s);
        f[0] = (struct pollfd){.fd = master_open ? s->master : -1,
                               .events = POLLIN | (s->in_len > 0 ? POLLOUT : 0)};
        f[1] = (struct pollfd){
            .fd = s->cur != NULL && s->in_len == 0 && drain_until < 0 ? s->cur->fd : -1,
            .events = POLLIN};
        f[2] = (struct pollfd){.fd = s->ctl[0], .events = POLLIN};
        if (drain_until >= 0) {
            int64_t now = sbx_mono_ms();
            int64_t until = quiet_until < drain_until ? quiet_until : drain_until;

            if (now >= until || !master_open) {
                break;
            }
            wait = (int)(until - now);
        }
        n = poll(f, 3, wait);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            break;
        }
        if (f[2].revents != 0) {
            from_ctl(s, &drain_until, &quiet_until);
        }
        if (f[0].revents & POLLOUT) {
            to_terminal(s);
        }
        if (f[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            int r = from_terminal(s);

            if (r < 0) {
                /* every slave closed: the session holds one until the command
                 * returned, so it has; or a read error */
                master_open = 0;
                if (drain_until < 0) {
                    drain_until = sbx_mono_ms() + DRAIN_MAX_MS;
                    quiet_until = drain_until;
                }
            }
            else if (r > 0) {
                quiet_until = sbx_mono_ms() + DRAIN_QUIET_MS;
            }
        }
        if (f[1].revents != 0 && s->cur != NULL && from_client(s) < 0) {
            release(s, C_DETACHED);
        }
    }
    pump_done(s);
    return NULL;
}

/* ---- the session's thread: its command ---------------------------------- */

static void *session_main(void *arg)
{
    struct sbx_tty_session *s = arg;
    sbx_error_t *err = NULL;
    int status = 0;
    int go;
    int r = -1;

    pthread_mutex_lock(&s->mu);
    while (s->go == 0) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    go = s->go;
    pthread_mutex_unlock(&s->mu);
    if (go > 0) {
        r = sbx_task_exec(s->t, (const char *const *)s->argv, s->env, s->n_env, NULL, NULL,
                          &s->slot, &status, &err);
    }
    else {
        sbx_error_set(&err, SBX_E_CANCELLED, "the session did not start");
    }

    /* the sandbox holds its copies now (or none): ours must go for the master to
     * see the end of what the command wrote */
    close(s->slave);
    s->slave = -1;
    pthread_mutex_lock(&s->mu);
    s->ended = 1;
    s->exec_r = r;
    s->status = status;
    s->code = code_of(err);
    snprintf(s->msg, sizeof(s->msg), "%s", r < 0 ? sbx_error_msg(err) : "");
    pthread_mutex_unlock(&s->mu);
    wake(s);
    pthread_join(s->pump, NULL);
    if (r == 0) {
        sbx_info("task %s: kept session: its command ended with status %d", s->t->id, status);
    }
    else if (go > 0) {
        sbx_info("task %s: kept session: its command failed: %s", s->t->id, sbx_error_msg(err));
    }
    sbx_error_free(&err);
    return NULL;
}

static void session_free(struct sbx_tty_session *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; s->argv != NULL && s->argv[i] != NULL; i++) {
        free(s->argv[i]);
    }
    free(s->argv);
    for (size_t i = 0; i < s->n_env; i++) {
        explicit_bzero((char *)s->env[i].value, strlen(s->env[i].value));
        free((char *)s->env[i].name);
        free((char *)s->env[i].value);
    }
    free(s->env);
    if (s->master >= 0) {
        close(s->master);
    }
    if (s->slave >= 0) {
        close(s->slave);
    }
    if (s->ctl[0] >= 0) {
        close(s->ctl[0]);
        close(s->ctl[1]);
    }
    free(s->in);
    explicit_bzero(s->ring, sizeof(s->ring));
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

/* ---- clients -------------------------------------------------------------- */

/* Hands fd to the pump and waits until it lets it go; writes its 'X'; drops the
 * reference the caller took. */
static void attach_wait(struct sbx_tty_session *s, int fd, unsigned rows, unsigned cols)
{
    struct client c = {.fd = fd, .rows = rows, .cols = cols, .outcome = C_ATTACHED};
    struct timeval tv = {CLIENT_SEND_TIMEOUT_S, 0};
    json_t *x;

    /* a client that stops taking output, or stops in the middle of a frame, is let
     * go instead of holding the session */
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    pthread_mutex_lock(&s->mu);
    if (s->done) {
        c.outcome = C_ENDED;
    }
    else {
        if (s->pending != NULL) {
            s->pending->outcome = C_TAKEN; /* two at once: the later one wins */
            pthread_cond_broadcast(&s->cv);
        }
        s->pending = &c;
        pthread_mutex_unlock(&s->mu);
        wake(s);
        pthread_mutex_lock(&s->mu);
        while (c.outcome == C_ATTACHED) {
            pthread_cond_wait(&s->cv, &s->mu);
        }
    }
    if (c.outcome == C_ENDED && s->exec_r == 0) {
        x = json_pack("{s:i}", "status", s->status);
    }
    else if (c.outcome == C_ENDED) {
        x = json_pack("{s:s, s:i}", "error", s->msg, "code", s->code);
    }
    else if (c.outcome == C_TAKEN) {
        x = json_pack("{s:s}", "detached", "another client attached to the session");
    }
    else {
        x = NULL; /* it left */
    }
    pthread_mutex_unlock(&s->mu);
    if (x != NULL) {
        send_x(fd, x);
    }
    pthread_mutex_lock(&s->mu);
    s->refs--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void copy_cmd(struct sbx_tty_session *s, const struct sbx_tty_req *rq)
{
    size_t n = 0;

    while (rq->argv[n] != NULL) {
        n++;
    }
    s->argv = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        s->argv[i] = xstrdup(rq->argv[i]);
    }
    s->env = xcalloc(rq->n_env + 1, sizeof(*s->env));
    for (size_t i = 0; i < rq->n_env; i++) {
        s->env[i].name = xstrdup(rq->env[i].name ? rq->env[i].name : "");
        s->env[i].value = xstrdup(rq->env[i].value ? rq->env[i].value : "");
    }
    s->n_env = rq->n_env;
}

int sbx_tty_session_run(struct sbx_task *t, const struct sbx_tty_req *rq, int client_fd,
                        sbx_error_t **err)
{
    struct sbx_tty_session *s;
    struct sbx_tty_session *old = NULL;
    const char *busy = NULL;

    if (t->have_lease) {
        /* as for every terminal (pty.c): typed commands pass no credential guard */
        return sbx_error_set(err, SBX_E_USAGE,
                             "task %s holds credentials: a terminal is refused (use sbx exec "
                             "without -it, whose output is redacted)",
                             t->id);
    }
    if (rq->argv == NULL || rq->argv[0] == NULL || rq->argv[0][0] == '\0') {
        return sbx_error_set(err, SBX_E_USAGE, "empty command");
    }
    s = xcalloc(1, sizeof(*s));
    s->t = t;
    s->master = s->slave = s->ctl[0] = s->ctl[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    copy_cmd(s, rq);
    if (sbx_pty_open(&s->master, &s->slave, err) < 0) {
        session_free(s);
        return -1;
    }
    if (pipe2(s->ctl, O_CLOEXEC | O_NONBLOCK) < 0) {
        sbx_error_set(err, errno, "starting a kept session: %s", strerror(errno));
        s->ctl[0] = s->ctl[1] = -1;
        session_free(s);
        return -1;
    }
    sbx_pty_set_size(s->master, rq->rows ? rq->rows : 24, rq->cols ? rq->cols : 80);
    s->slot.tty_slave1 = s->slave + 1;
    s->slot.kept = 1;
    s->refs = 1; /* the starter */
    /* both threads before the session is the task's: the command waits for s->go */
    if (pthread_create(&s->pump, NULL, pump_main, s) != 0) {
        session_free(s);
        return sbx_error_set(err, SBX_E_GENERIC, "starting a kept session: no thread");
    }
    if (pthread_create(&s->thread, NULL, session_main, s) != 0) {
        pthread_mutex_lock(&s->mu);
        s->ended = 1;
        pthread_mutex_unlock(&s->mu);
        wake(s);
        pthread_join(s->pump, NULL);
        session_free(s);
        return sbx_error_set(err, SBX_E_GENERIC, "starting a kept session: no thread");
    }

    pthread_mutex_lock(&t->mu);
    if (t->session != NULL) {
        struct sbx_tty_session *cur = t->session;

        pthread_mutex_lock(&cur->mu);
        if (!cur->done) {
            busy = "has a kept session already: attach to it";
        }
        else if (cur->refs > 0) {
            busy = "has a kept session that is ending: try again, or attach";
        }
        else {
            old = cur; /* one that ended: its thread returns at once */
            t->session = NULL;
        }
        pthread_mutex_unlock(&cur->mu);
    }
    if (busy == NULL && t->stop) {
        busy = "is ending";
    }
    if (busy == NULL) {
        t->session = s;
    }
    pthread_mutex_unlock(&t->mu);
    if (old != NULL) {
        pthread_join(old->thread, NULL);
        session_free(old);
    }
    pthread_mutex_lock(&s->mu);
    s->go = busy == NULL ? 1 : -1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (busy != NULL) {
        pthread_join(s->thread, NULL);
        session_free(s);
        return sbx_error_set(err, SBX_E_USAGE, "task %s %s (sbx attach %s)", t->id, busy, t->id);
    }
    sbx_info("task %s: kept session started", t->id);
    attach_wait(s, client_fd, 0, 0);
    return 0;
}

int sbx_tty_session_attach(struct sbx_task *t, unsigned rows, unsigned cols, int client_fd,
                           sbx_error_t **err)
{
    struct sbx_tty_session *s;
    int last = -1;
    int done = 0;

    if (t->have_lease) {
        return sbx_error_set(err, SBX_E_USAGE, "task %s holds credentials: a terminal is refused",
                             t->id);
    }
    pthread_mutex_lock(&t->mu);
    s = t->session;
    if (s != NULL) {
        pthread_mutex_lock(&s->mu);
        done = s->done;
        if (!done) {
            s->refs++;
        }
        else if (s->exec_r == 0) {
            last = s->status;
        }
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_unlock(&t->mu);
    if (s == NULL || done) {
        char ended[64] = "";

        if (done && last >= 0) {
            snprintf(ended, sizeof(ended), " (the last one ended with status %d)", last);
        }
        else if (done) {
            snprintf(ended, sizeof(ended), " (the last one failed)");
        }
        return sbx_error_set(err, SBX_E_NOTFOUND,
                             "task %s has no kept session%s: start one with 'sbx exec -it "
                             "--keep %s -- bash'",
                             t->id, ended, t->id);
    }
    attach_wait(s, client_fd, rows, cols);
    return 0;
}

void sbx_tty_session_reap(struct sbx_task *t)
{
    struct sbx_tty_session *s;

    pthread_mutex_lock(&t->mu);
    s = t->session;
    t->session = NULL;
    pthread_mutex_unlock(&t->mu);
    if (s == NULL) {
        return;
    }
    /* sbx_task_stop cancelled its command: the thread returns, the pump lets every
     * client go */
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    while (s->refs > 0) {
        pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    session_free(s);
}
