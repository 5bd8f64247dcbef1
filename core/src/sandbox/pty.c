/* pty.c - a command of a task on a terminal (pty.h). */
#include "sandbox/pty.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <sbx/sbx_util.h>

#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "sandbox/task_int.h"
#include "util/log.h"

#define OUT_CHUNK 65536
/* after the command's end: how long the master is read for what it wrote last
 * (a background process holding the terminal open is not waited for) */
#define DRAIN_QUIET_MS 100
#define DRAIN_MAX_MS 2000

struct pump {
    struct sbx_task *t;
    struct sbx_exec_slot *slot;
    int client;
    int master;
    int wake[2]; /* written once when the command ended */
    char *in;    /* typed bytes not yet taken by the terminal */
    size_t in_len;
    int client_gone; /* the client closed: the command was cancelled */
    int client_dead; /* writing to the client failed: stop sending */
};

void sbx_pty_set_size(int master, unsigned rows, unsigned cols)
{
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

    if (ioctl(master, TIOCSWINSZ, &ws) < 0) {
        sbx_debug("terminal: TIOCSWINSZ: %s", strerror(errno));
    }
}

int sbx_tty_dims_ok(unsigned rows, unsigned cols)
{
    return rows >= 1 && rows <= SBX_TTY_DIM_MAX && cols >= 1 && cols <= SBX_TTY_DIM_MAX;
}

/* One frame from the client: typed bytes are queued for the terminal, a size
 * is applied (the kernel sends SIGWINCH to the foreground group). -1: the client
 * closed or sent something else (it is hung up on). */
static int from_client(struct pump *p)
{
    char type = 0;
    char *data = NULL;
    size_t len = 0;
    sbx_error_t *err = NULL;
    int r = sbx_frame_read(p->client, &type, &data, &len, &err);

    sbx_error_free(&err);
    if (r != 0) {
        free(data);
        return -1;
    }
    if (type == 'I' && len <= SBX_TTY_IN_MAX) {
        p->in = realloc(p->in, p->in_len + len + 1);
        if (p->in == NULL) {
            free(data);
            return -1;
        }
        memcpy(p->in + p->in_len, data, len);
        p->in_len += len;
    }
    else if (type == 'W' && len == 4) {
        const unsigned char *u = (const unsigned char *)data;
        unsigned rows = (unsigned)(u[0] << 8 | u[1]);
        unsigned cols = (unsigned)(u[2] << 8 | u[3]);

        if (sbx_tty_dims_ok(rows, cols)) {
            sbx_pty_set_size(p->master, rows, cols);
        }
    }
    else {
        sbx_warn("task %s: terminal: unexpected frame '%c' (%zu bytes) from the client: hung up",
                 sbx_task_id(p->t), type >= 0x21 && type <= 0x7e ? type : '?', len);
        free(data);
        return -1;
    }
    free(data);
    return 0;
}

static void to_terminal(struct pump *p)
{
    ssize_t w = write(p->master, p->in, p->in_len);

    if (w > 0) {
        memmove(p->in, p->in + w, p->in_len - (size_t)w);
        p->in_len -= (size_t)w;
    }
}

/* What the terminal wrote, to the client: 1 more may come, 0 nothing now, -1 EOF
 * (every slave is closed) or an error. */
static int from_terminal(struct pump *p)
{
    char buf[OUT_CHUNK];
    ssize_t n = read(p->master, buf, sizeof(buf));

    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return 0;
    }
    if (n <= 0) {
        return -1; /* EIO: the command and everything that held the slave ended */
    }
    if (!p->client_dead && sbx_frame_write(p->client, 'O', buf, (size_t)n) < 0) {
        p->client_dead = 1;
    }
    return 1;
}

static void *pump_main(void *arg)
{
    struct pump *p = arg;
    int64_t drain_until = -1;
    int64_t quiet_until = -1;

    for (;;) {
        struct pollfd f[3] = {
            {.fd = p->master, .events = POLLIN | (p->in_len > 0 ? POLLOUT : 0)},
            {.fd = p->client_gone || p->in_len > 0 ? -1 : p->client, .events = POLLIN},
            {.fd = drain_until < 0 ? p->wake[0] : -1, .events = POLLIN},
        };
        int wait = -1;
        int n;

        if (drain_until >= 0) {
            int64_t now = sbx_mono_ms();
            int64_t until = quiet_until < drain_until ? quiet_until : drain_until;

            if (now >= until) {
                break;
            }
            wait = (int)(until - now);
            f[1].fd = -1;
        }
        n = poll(f, 3, wait);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            break;
        }
        if (f[2].revents != 0) {
            /* the command ended: read what it wrote last, then stop */
            drain_until = sbx_mono_ms() + DRAIN_MAX_MS;
            quiet_until = sbx_mono_ms() + DRAIN_QUIET_MS;
            continue;
        }
        if (f[0].revents & POLLOUT) {
            to_terminal(p);
        }
        if (f[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            int r = from_terminal(p);

            if (r < 0 && drain_until >= 0) {
                break;
            }
            if (r < 0) {
                /* every slave closed before the end was reported: wait for it */
                f[0].fd = -1;
                while (poll(&f[2], 1, -1) < 0 && errno == EINTR) {
                }
                break;
            }
            quiet_until = sbx_mono_ms() + DRAIN_QUIET_MS;
        }
        if (f[1].revents != 0 && from_client(p) < 0) {
            p->client_gone = 1;
            sbx_task_exec_cancel(p->t, p->slot);
        }
    }
    return NULL;
}

int sbx_tty_parse(json_t *jtty, struct sbx_tty_req *rq, sbx_error_t **err)
{
    json_t *jr;
    json_t *jc;

    rq->rows = 0;
    rq->cols = 0;
    if (jtty == NULL || json_is_false(jtty) || json_is_null(jtty)) {
        return 0;
    }
    if (json_is_true(jtty)) {
        return 1;
    }
    jr = json_object_get(jtty, "rows");
    jc = json_object_get(jtty, "cols");
    if (!json_is_object(jtty) || !json_is_integer(jr) || !json_is_integer(jc) ||
        !sbx_tty_dims_ok((unsigned)json_integer_value(jr), (unsigned)json_integer_value(jc)) ||
        json_integer_value(jr) < 1 || json_integer_value(jc) < 1) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "request field 'tty': use true or {\"rows\": 1-%d, \"cols\": 1-%d}",
                             SBX_TTY_DIM_MAX, SBX_TTY_DIM_MAX);
    }
    rq->rows = (unsigned)json_integer_value(jr);
    rq->cols = (unsigned)json_integer_value(jc);
    return 1;
}

int sbx_pty_open(int *master, int *slave, sbx_error_t **err)
{
    char name[64];

    *slave = -1;
    *master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (*master < 0 || grantpt(*master) < 0 || unlockpt(*master) < 0 ||
        ptsname_r(*master, name, sizeof(name)) != 0 ||
        (*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) {
        int e = errno;

        if (*master >= 0) {
            close(*master);
        }
        *master = -1;
        return sbx_error_set(err, e, "allocating a terminal (/dev/ptmx): %s", strerror(e));
    }
    /* the host reads and writes the master without ever blocking on it */
    fcntl(*master, F_SETFL, fcntl(*master, F_GETFL) | O_NONBLOCK);
    return 0;
}

int sbx_task_exec_tty(struct sbx_task *t, const struct sbx_tty_req *rq, int client_fd, int *status,
                      sbx_error_t **err)
{
    struct sbx_exec_slot slot = {0};
    struct pump p = {.t = t, .slot = &slot, .client = client_fd, .wake = {-1, -1}};
    pthread_t th;
    int slave = -1;
    int r;

    if (t->have_lease) {
        /* typed commands pass no credential guard, and the output of a terminal
         * is not redacted (its bytes are split at will): refused, not leaked */
        return sbx_error_set(err, SBX_E_USAGE,
                             "task %s holds credentials: a terminal is refused (use sbx exec "
                             "without -it, whose output is redacted)",
                             t->id);
    }
    if (sbx_pty_open(&p.master, &slave, err) < 0) {
        return -1;
    }
    sbx_pty_set_size(p.master, rq->rows ? rq->rows : 24, rq->cols ? rq->cols : 80);
    if (pipe2(p.wake, O_CLOEXEC) < 0 || pthread_create(&th, NULL, pump_main, &p) != 0) {
        int e = errno;

        close(p.master);
        close(slave);
        if (p.wake[0] >= 0) {
            close(p.wake[0]);
            close(p.wake[1]);
        }
        return sbx_error_set(err, e, "starting a terminal: %s", strerror(e));
    }
    slot.tty_slave1 = slave + 1;
    r = sbx_task_exec(t, rq->argv, rq->env, rq->n_env, NULL, NULL, &slot, status, err);
    /* the sandbox holds its copies now (or none): ours must go for the master
     * to see the end of what the command wrote */
    close(slave);
    while (write(p.wake[1], "", 1) < 0 && errno == EINTR) {
    }
    pthread_join(th, NULL);
    close(p.wake[0]);
    close(p.wake[1]);
    close(p.master);
    free(p.in);
    if (r == 0) {
        sbx_info("task %s: terminal: its command ended with status %d", t->id, *status);
    }
    return r;
}
