/* agent.c - the host side of the exec agent (agent.h). */
#include "sandbox/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sbx_agent_proto.h>
#include <sbx/sbx_frame.h>

#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define OUT_CHUNK 65536
#define DRAIN_MAX 64
#define CANCEL_CHECK_MS 1000

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

int sbx_agent_listen(struct sbx_agent_link *l, const char *dir, sbx_error_t **err)
{
    cleanup_free char *path = xasprintf("%s/%s", dir, SBX_AGENT_SOCK);

    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->mu, NULL);
    l->lfd = -1;
    l->conn = -1;
    if (sbx_mkdirs(dir, 0755, err) < 0) {
        return -1;
    }
    if (chmod(dir, 0755) < 0) {
        return sbx_error_set(err, errno, "%s: %s", dir, strerror(errno));
    }
    /* 0666: the sandbox's root is some mapped uid; the directory is mounted
     * in this sandbox only, which is what confines who can connect */
    l->lfd = sbx_unix_listen(path, 0666, err);
    if (l->lfd < 0) {
        return sbx_error_wrap(err, "exec agent socket");
    }
    return 0;
}

void sbx_agent_close(struct sbx_agent_link *l)
{
    close_fd(&l->lfd);
    close_fd(&l->conn);
    pthread_mutex_destroy(&l->mu);
}

/* The control connection, accepting the agent's if it came (waiting up to
 * answer_ms the first time only). Called with l->mu held. */
static int agent_conn(struct sbx_agent_link *l, int answer_ms, char *why, size_t why_size)
{
    struct pollfd p = {.fd = l->lfd, .events = POLLIN};

    if (l->conn >= 0 || l->dead || l->lfd < 0) {
        if (l->conn < 0) {
            snprintf(why, why_size, "no exec agent in this sandbox");
        }
        return l->conn;
    }
    if (poll(&p, 1, l->waited ? 0 : answer_ms) > 0) {
        l->conn = accept4(l->lfd, NULL, NULL, SOCK_CLOEXEC);
    }
    if (l->conn < 0) {
        snprintf(why, why_size, "the exec agent did not connect%s", l->waited ? "" : " in time");
        /* one late connect is still taken by a later exec, without waiting */
    }
    l->waited = 1;
    return l->conn;
}

/* The request payload (may hold secret values: the caller zeroes it). */
static char *build_payload(const struct sbx_exec_spec *spec, size_t *len)
{
    const char *cwd = spec->workdir ? spec->workdir : "/workspace";
    size_t argc = 0;
    size_t n = 8 + strlen(cwd) + 1;
    char *buf;
    char *p;

    while (spec->argv[argc] != NULL) {
        n += strlen(spec->argv[argc++]) + 1;
    }
    for (size_t i = 0; i < spec->n_env; i++) {
        n += strlen(spec->env[i].name) + 1 + strlen(spec->env[i].value) + 1;
    }
    if (n > SBX_AGENT_PAYLOAD_MAX || argc + spec->n_env > SBX_AGENT_STRINGS_MAX) {
        return NULL;
    }
    buf = xmalloc(n);
    put32((unsigned char *)buf, (uint32_t)argc);
    put32((unsigned char *)buf + 4, (uint32_t)spec->n_env);
    p = buf + 8;
    p = stpcpy(p, cwd) + 1;
    for (size_t i = 0; i < argc; i++) {
        p = stpcpy(p, spec->argv[i]) + 1;
    }
    for (size_t i = 0; i < spec->n_env; i++) {
        p = stpcpy(p, spec->env[i].name);
        *p++ = '=';
        p = stpcpy(p, spec->env[i].value) + 1;
    }
    *len = n;
    return buf;
}

static int send_request(int fd, const struct sbx_exec_spec *spec, int fds[4])
{
    unsigned char hdr[SBX_AGENT_HDR] = {0};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {hdr, sizeof(hdr)};
    struct msghdr msg = {0};
    struct cmsghdr *cm;
    size_t len = 0;
    char *payload = build_payload(spec, &len);
    size_t off = 0;
    int r = -1;

    if (payload == NULL) {
        errno = E2BIG;
        return -1;
    }
    put32(hdr, SBX_AGENT_MAGIC);
    put32(hdr + 4, SBX_AGENT_VERSION);
    put32(hdr + 8, (uint32_t)len);
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(4 * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, 4 * sizeof(int));
    if (sendmsg(fd, &msg, MSG_NOSIGNAL) != (ssize_t)sizeof(hdr)) {
        goto out;
    }
    while (off < len) {
        /* bounded by SO_SNDTIMEO: an agent that never reads cannot hold us */
        ssize_t w = send(fd, payload + off, len - off, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            goto out;
        }
        off += (size_t)w;
    }
    r = 0;
out:
    explicit_bzero(payload, len);
    free(payload);
    return r;
}

struct run {
    int conn;
    int out[2]; /* read ends of stdout and stderr, -1 once at EOF */
    unsigned char rec[SBX_AGENT_REC];
    size_t have;
    const struct sbx_exec_spec *spec;
    const volatile int *cancelled;
};

/* Copies what one output pipe has now to the sink: one chunk, or with drain
 * up to DRAIN_MAX chunks (a background process may write on after the exit:
 * that is not waited for). 0 more may come, 1 EOF. */
static int pump(struct run *r, int i, int drain)
{
    char buf[OUT_CHUNK];

    for (int k = 0; k < (drain ? DRAIN_MAX : 1); k++) {
        ssize_t n = read(r->out[i], buf, sizeof(buf));

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (n == 0 || errno != EAGAIN) {
                close_fd(&r->out[i]);
                return 1;
            }
            return 0;
        }
        if (r->spec->on_output != NULL) {
            r->spec->on_output(r->spec->output_userdata, i + 1, buf, (size_t)n);
        }
    }
    return 0;
}

/* Waits for the next whole record (type, value) until deadline (-1: none),
 * moving output meanwhile. 0 got one, 1 deadline, 2 cancel_fd readable,
 * -1 the agent closed or failed. */
static int next_record(struct run *r, int cancel_fd, int64_t deadline, char *type, int32_t *v)
{
    for (;;) {
        int64_t until = deadline;
        struct pollfd p[4] = {{.fd = r->conn, .events = POLLIN},
                              {.fd = r->out[0], .events = POLLIN},
                              {.fd = r->out[1], .events = POLLIN},
                              {.fd = cancel_fd, .events = POLLIN}};
        int wait = -1;
        int n;

        /* (changed, issue 31) an atomic read: another thread sets the flag */
        if (r->cancelled != NULL && __atomic_load_n(r->cancelled, __ATOMIC_ACQUIRE)) {
            return 2;
        }
        if (r->cancelled != NULL && (until < 0 || until > sbx_mono_ms() + CANCEL_CHECK_MS)) {
            /* a cancel set without cancel_fd (the provider's disk watchdog) is
             * seen this late; output and the exit wake the poll at once */
            until = sbx_mono_ms() + CANCEL_CHECK_MS;
        }
        if (until >= 0) {
            int64_t left = until - sbx_mono_ms();

            if (left <= 0) {
                if (deadline >= 0 && sbx_mono_ms() >= deadline) {
                    return 1;
                }
                continue;
            }
            wait = (int)left;
        }
        n = poll(p, 4, wait);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        for (int i = 0; i < 2; i++) {
            if (p[1 + i].revents != 0) {
                pump(r, i, 0);
            }
        }
        if (p[3].revents != 0) {
            return 2;
        }
        if (p[0].revents != 0) {
            ssize_t got = read(r->conn, r->rec + r->have, sizeof(r->rec) - r->have);

            if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (got <= 0) {
                return -1;
            }
            r->have += (size_t)got;
            if (r->have == sizeof(r->rec)) {
                r->have = 0;
                unsigned char t;
                uint32_t u;

                /* a bad header is type 0: the callers call it malformed */
                *type = sbx_frame_decode(r->rec, UINT32_MAX, &t, &u) == SBX_FRAME_OK ? (char)t : 0;
                *v = (int32_t)u;
                return 0;
            }
        }
    }
}

/* This agent misbehaved: the task's later execs use the engine. */
static void give_up(struct sbx_agent_link *l)
{
    pthread_mutex_lock(&l->mu);
    close_fd(&l->conn);
    l->dead = 1;
    pthread_mutex_unlock(&l->mu);
}

static int start_failed(int e, const char *cmd, sbx_error_t **err)
{
    if (e == ENOENT || e == ENOTDIR) {
        return sbx_error_set(err, SBX_E_NOCMD, "%s: command not found in the sandbox", cmd);
    }
    if (e == EACCES || e == EPERM || e == ENOEXEC) {
        return sbx_error_set(err, SBX_E_NOEXEC, "%s: permission denied (not executable)", cmd);
    }
    return sbx_error_set(err, SBX_E_NOEXEC, "%s: cannot be executed: %s", cmd,
                         e > 0 && e < 4096 ? strerror(e) : "unknown error from the agent");
}

static int printable(char c)
{
    return c >= 0x21 && c <= 0x7e;
}

/* Sends the request with the command's descriptors on the agent's control connection
 * (made or reused under l->mu); -1 with why set when there is no agent to ask. */
static int send_to_agent(struct sbx_agent_link *l, const struct sbx_exec_spec *spec, int fds[4],
                         int answer_ms, char *why, size_t why_size)
{
    struct timeval tv = {answer_ms / 1000, (answer_ms % 1000) * 1000};
    int ctl;

    pthread_mutex_lock(&l->mu);
    ctl = agent_conn(l, answer_ms, why, why_size);
    if (ctl >= 0) {
        setsockopt(ctl, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (send_request(ctl, spec, fds) < 0) {
            /* the control connection is in an unknown state now: drop it */
            snprintf(why, why_size, "sending to the exec agent: %s", strerror(errno));
            close_fd(&l->conn);
            l->dead = 1;
            ctl = -1;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return ctl < 0 ? -1 : 0;
}

/* The command runs (its pid came): relays its output until the exit status record,
 * *v. A cancel kills its process group and waits SBX_AGENT_CANCEL_MS for the end. */
static int await_exit(struct sbx_agent_link *l, struct run *r, int cancel_fd, int32_t *v,
                      sbx_error_t **err)
{
    int64_t deadline = -1;
    int cancelled_now = 0;
    char type = 0;
    int w;

    for (;;) {
        w = next_record(r, cancel_fd, deadline, &type, v);
        if (w == 2) {
            /* kill the group, then give the agent a moment to report the end */
            unsigned char k[SBX_AGENT_REC];

            sbx_frame_encode(k, 'K', SIGKILL);
            if (send(r->conn, k, sizeof(k), MSG_NOSIGNAL) < 0) {
                /* closing the connection below kills the group too */
            }
            cancel_fd = -1;
            r->cancelled = NULL;
            cancelled_now = 1;
            deadline = sbx_mono_ms() + SBX_AGENT_CANCEL_MS;
            continue;
        }
        if (cancelled_now) {
            return sbx_error_set(err, SBX_E_CANCELLED, "exec cancelled");
        }
        if (w == -1) {
            return sbx_error_set(err, SBX_E_PROTOCOL,
                                 "exec agent in the sandbox closed the "
                                 "connection before the exit status");
        }
        if (type == 'X' && *v >= 0 && *v <= 255) {
            return 0;
        }
        give_up(l);
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "exec agent in the sandbox sent a malformed "
                             "reply (record '%c' %d where the exit status was due)",
                             printable(type) ? type : '?', (int)*v);
    }
}

int sbx_agent_exec(struct sbx_agent_link *l, const struct sbx_exec_spec *spec, int cancel_fd,
                   const volatile int *cancelled, int answer_ms, int *status, char *why,
                   size_t why_size, sbx_error_t **err)
{
    return sbx_agent_exec_stdio(l, spec, -1, cancel_fd, cancelled, answer_ms, status, why, why_size,
                                err);
}

/* the command's stdin (devnull), stdout (po[1]), stderr (pe[1]) and the
 * channel (sp) for send_to_agent; on failure why says what failed and the
 * caller closes whatever is open */
static int open_channels(int stdio, int *devnull, int po[2], int pe[2], int sp[2], char *why,
                         size_t why_size)
{
    *devnull = stdio >= 0 ? dup(stdio) : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (stdio >= 0) {
        /* (added) a terminal (pty.c): its slave is stdin, stdout and stderr; the
         * caller reads the master, so there is nothing to pump here */
        if (*devnull < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
            snprintf(why, why_size, "a channel for the exec agent: %s", strerror(errno));
            return -1;
        }
        po[1] = dup(stdio);
        pe[1] = dup(stdio);
        if (po[1] < 0 || pe[1] < 0) {
            snprintf(why, why_size, "a channel for the exec agent: %s", strerror(errno));
            return -1;
        }
    }
    /* (changed, issue 31) O_NONBLOCK on the host's read ends only: pipe2's flag is
     * on both ends, and a command given a non-blocking stdout fails its writes
     * with EAGAIN as soon as the pipe is full (`seq 1 3000000` lost all but 64 KiB) */
    else if (*devnull < 0 || pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0 ||
             fcntl(po[0], F_SETFL, O_NONBLOCK) < 0 || fcntl(pe[0], F_SETFL, O_NONBLOCK) < 0 ||
             socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0) {
        snprintf(why, why_size, "pipes for the exec agent: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* the agent has the command: its pid record, then its exit status, pumping
 * its output meanwhile; SBX_AGENT_RAN with *status, SBX_AGENT_ABSENT with
 * why, or -1 with err */
static int await_command(struct sbx_agent_link *l, struct run *r, int cancel_fd, int answer_ms,
                         int *status, char *why, size_t why_size, sbx_error_t **err)
{
    char type = 0;
    int32_t v = 0;
    int w;

    w = next_record(r, cancel_fd, sbx_mono_ms() + answer_ms, &type, &v);
    if (w == 1 || w == -1) {
        /* no answer: closing the channel makes a real agent kill what it may
         * have started, and the engine runs the command (and later ones) */
        snprintf(why, why_size, "the exec agent %s",
                 w == 1 ? "did not answer in time" : "closed the command's channel");
        give_up(l);
        return SBX_AGENT_ABSENT;
    }
    if (w == 2) {
        return sbx_error_set(err, SBX_E_CANCELLED, "exec cancelled");
    }
    if (type == 'F') {
        return start_failed(v, r->spec->argv[0], err);
    }
    if (type != 'P' || v <= 0) {
        give_up(l);
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "exec agent in the sandbox sent a malformed "
                             "reply (record '%c' %d where the pid was due)",
                             printable(type) ? type : '?', (int)v);
    }
    if (await_exit(l, r, cancel_fd, &v, err) < 0) {
        return -1;
    }
    /* what the command wrote before it exited is in the pipes now */
    for (int i = 0; i < 2; i++) {
        if (r->out[i] >= 0) {
            pump(r, i, 1);
        }
    }
    *status = v;
    return SBX_AGENT_RAN;
}

int sbx_agent_exec_stdio(struct sbx_agent_link *l, const struct sbx_exec_spec *spec, int stdio,
                         int cancel_fd, const volatile int *cancelled, int answer_ms, int *status,
                         char *why, size_t why_size, sbx_error_t **err)
{
    struct run r = {.conn = -1, .out = {-1, -1}, .spec = spec, .cancelled = cancelled};
    int po[2] = {-1, -1};
    int pe[2] = {-1, -1};
    int sp[2] = {-1, -1};
    int fds[4];
    int devnull = -1;
    int rc = SBX_AGENT_ABSENT;

    why[0] = '\0';
    if (open_channels(stdio, &devnull, po, pe, sp, why, why_size) < 0) {
        goto out;
    }
    fds[0] = devnull;
    fds[1] = po[1];
    fds[2] = pe[1];
    fds[3] = sp[1];
    if (send_to_agent(l, spec, fds, answer_ms, why, why_size) < 0) {
        goto out;
    }
    /* the agent holds the other ends now */
    close_fd(&po[1]);
    close_fd(&pe[1]);
    close_fd(&sp[1]);
    close_fd(&devnull);
    r.conn = sp[0];
    r.out[0] = po[0];
    r.out[1] = pe[0];
    po[0] = pe[0] = sp[0] = -1;
    rc = await_command(l, &r, cancel_fd, answer_ms, status, why, why_size, err);
out:
    close_fd(&r.conn);
    close_fd(&r.out[0]);
    close_fd(&r.out[1]);
    close_fd(&po[0]);
    close_fd(&po[1]);
    close_fd(&pe[0]);
    close_fd(&pe[1]);
    close_fd(&sp[0]);
    close_fd(&sp[1]);
    close_fd(&devnull);
    return rc;
}
