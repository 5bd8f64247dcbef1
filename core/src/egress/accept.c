/* accept.c - a sandbox's connections at the door: accepting (with its budget of open
 * connections and its rate), the relay's handover of its client socket, what happens
 * when the process runs out of descriptors or memory (that connection fails with a
 * logged reason, the proxy goes on), and a connected tunnel's buffers and their
 * share of the sandbox's budget. Egress loop only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/conn.h"
#include "egress/tunnel.h"
#include "util/log.h"

/* The reason for a resource failure (errno): it fails this connection only. */
const char *sbx_egress_exhausted(int err)
{
    return err == EMFILE || err == ENFILE ? "out-of-descriptors" : "out-of-memory";
}

/* One stderr line per second at most for resource failures (each connection still gets
 * its JSON line): a sandbox that exhausts descriptors must not flood the runner's log. */
void sbx_egress_warn_exhausted(struct sbx_egress *e, const char *sandbox, const char *what)
{
    time_t now = time(NULL);

    if (now != e->accept_warned) {
        e->accept_warned = now;
        sbx_warn("egress: sandbox %s: %s (connections fail until it passes)",
                 sandbox != NULL ? sandbox : "?", what);
    }
}

/* A TCP or TCPv6 stream socket: the only kind of descriptor a relay may pass (a file
 * or pipe could block the loop). */
static int is_inet_stream(int fd)
{
    struct stat st;
    int v = 0;
    socklen_t vl = sizeof(v);

    if (fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode)) {
        return 0;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) < 0 || v != SOCK_STREAM) {
        return 0;
    }
    vl = sizeof(v);
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &vl) < 0) {
        return 0;
    }
    return v == AF_INET || v == AF_INET6;
}

long sbx_egress_attr_parse(struct sbx_egress_conn *c, const char *buf, size_t len)
{
    size_t plen = strlen(SBX_EGRESS_ATTR_PREFIX);
    const char *end;
    char line[SBX_EGRESS_ATTR_MAX];
    char pid[16];
    char exec[SBX_EGRESS_EXEC_MAX + 2];
    int used = 0;

    if (len < plen || memcmp(buf, SBX_EGRESS_ATTR_PREFIX, plen) != 0) {
        return 0;
    }
    end = memchr(buf, '\n', len < SBX_EGRESS_ATTR_MAX ? len : SBX_EGRESS_ATTR_MAX);
    if (end == NULL || end == buf || end[-1] != '\r') {
        return -1;
    }
    memcpy(line, buf, (size_t)(end - buf) - 1);
    line[end - buf - 1] = '\0';
    if (sscanf(line + plen, "pid=%15[-0-9] exec=%41[-A-Za-z0-9._]%n", pid, exec, &used) != 2 ||
        line[plen + (size_t)used] != '\0' || strlen(exec) > SBX_EGRESS_EXEC_MAX) {
        return -1;
    }
    if (strcmp(pid, "-") != 0) {
        char *e;
        long v = strtol(pid, &e, 10);

        if (*e != '\0' || v < 1 || v > 4194304) {
            return -1;
        }
        c->pid = (int)v;
    }
    if (strcmp(exec, "-") != 0) {
        memcpy(c->exec, exec, strlen(exec) + 1); /* at most SBX_EGRESS_EXEC_MAX, checked */
    }
    return (long)(end - buf) + 1;
}

/* One recvmsg of a hello into bytes (size bytes): up to four passed descriptors into
 * fds (their count in *n_fds), the message's flags in *flags. Returns recvmsg's count;
 * *again is set when nothing is there yet (EAGAIN, EINTR: wait for the next wake-up). */
static ssize_t hello_recv(evutil_socket_t fd, char *bytes, size_t size, int fds[4], size_t *n_fds,
                          int *flags, int *again)
{
    struct iovec iov = {bytes, size};
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr msg;
    ssize_t n;

    *n_fds = 0;
    *flags = 0;
    *again = 0;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = u.buf;
    msg.msg_controllen = sizeof(u.buf);
    n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        *again = 1;
        return n;
    }
    if (n < 0) {
        msg.msg_controllen = 0; /* the kernel left it as it was: no descriptors came */
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
            size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

            for (size_t i = 0; i < k && *n_fds < 4; i++) {
                memcpy(&fds[(*n_fds)++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            }
        }
    }
    *flags = msg.msg_flags;
    return n;
}

/* A hello that passed descriptors (n_fds > 0, n > 0 bytes): exactly one TCP socket after
 * "\0" or "\x01HOST:PORT\n" / "\x03HOST:PORT\n", with an optional attribution line and
 * nothing else; it replaces the unix connection. Every other descriptor is closed. */
static void hello_handover(struct sbx_egress_conn *c, const char *bytes, ssize_t n, const int *fds,
                           size_t n_fds, int flags)
{
    int buf = SBX_EGRESS_CLIENT_BUF;
    char line[SBX_EGRESS_NAME_LINE];
    long attr = 0;
    long used = 1;

    for (size_t i = 1; i < n_fds; i++) {
        close(fds[i]);
    }
    if (bytes[0] == '\x01' || bytes[0] == '\x03') {
        long l = sbx_egress_name_line(bytes + 1, (size_t)n - 1, line, sizeof(line));

        used = l < 0 ? -1 : 1 + l;
    }
    if (used > 0 && used < n) {
        attr = sbx_egress_attr_parse(c, bytes + used, (size_t)(n - used));
    }
    if ((bytes[0] != '\0' && bytes[0] != '\x01' && bytes[0] != '\x03') || n_fds != 1 ||
        (flags & MSG_CTRUNC) || used < 0 || attr != n - used || !is_inet_stream(fds[0])) {
        close(fds[0]);
        c->reason = used > 0 && attr != n - used ? "bad-attribution" : "bad-handover";
        sbx_egress_conn_finish(c);
        return;
    }
    /* The relay's client socket replaces the unix connection. */
    close(c->client_fd);
    c->client_fd = fds[0];
    if (fcntl(c->client_fd, F_SETFL, fcntl(c->client_fd, F_GETFL) | O_NONBLOCK) < 0 ||
        setsockopt(c->client_fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf)) < 0 ||
        setsockopt(c->client_fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf)) < 0) {
        c->reason = "bad-handover";
        sbx_egress_conn_finish(c);
        return;
    }
    if (bytes[0] == '\x01' || bytes[0] == '\x03') {
        sbx_egress_conn_transparent(c, line, bytes[0] == '\x03'); /* names.c */
        return;
    }
    sbx_egress_conn_start_head(c, NULL, 0);
}

/* The first bytes on a sandbox socket, one message:
 *   "\0" + a descriptor [+ attribution line]      a relay handing over its client's TCP
 *                                                 socket (the client speaks to a proxy)
 *   "\x01HOST:PORT\n" + a descriptor [+ attr.]    (added) a transparent connection
 *                                                 (names.c)
 *   "\x03HOST:PORT\n" + a descriptor [+ attr.]    (added) a transparent connection to a
 *                                                 denied name's address: refused
 *   "\x02NAME\n"                                  (added) a name query (names.c)
 *   [attribution line +] a request                a plain request stream (a relay in
 *                                                 --copy mode puts its line first)
 * Whoever connects to the socket writes these bytes: what they report is the sandbox's
 * word (docs/egress.md, "Attribution"). */
static void hello_read(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_egress_conn *c = arg;
    char bytes[1 + SBX_EGRESS_NAME_LINE + SBX_EGRESS_ATTR_MAX];
    int fds[4];
    size_t n_fds = 0;
    int flags = 0;
    int again = 0;
    long attr = 0;
    ssize_t n;

    (void)what;
    n = hello_recv(fd, bytes, sizeof(bytes), fds, &n_fds, &flags, &again);
    if (again) {
        return;
    }
    event_free(c->hello);
    c->hello = NULL;
    if (n <= 0) {
        for (size_t i = 0; i < n_fds; i++) {
            close(fds[i]);
        }
        c->reason = "client-closed";
        sbx_egress_conn_finish(c);
        return;
    }
    if (n_fds == 0 && bytes[0] == '\0' && (flags & MSG_CTRUNC)) {
        /* A handover whose descriptor the kernel could not install here (EMFILE). */
        c->reason = "out-of-descriptors";
        c->sb->refused++;
        sbx_egress_warn_exhausted(c->sb->e, c->sb->name, "out of descriptors receiving a handover");
        sbx_egress_conn_finish(c);
        return;
    }
    if (n_fds == 0 && bytes[0] == '\x02') {
        sbx_egress_conn_name_query(c, bytes + 1, (size_t)n - 1); /* names.c */
        return;
    }
    if (n_fds == 0) {
        attr = sbx_egress_attr_parse(c, bytes, (size_t)n);
        if (attr < 0) {
            c->reason = "bad-attribution";
            sbx_egress_conn_finish(c);
            return;
        }
        sbx_egress_conn_start_head(c, bytes + attr, (size_t)(n - attr));
        return;
    }
    hello_handover(c, bytes, n, fds, n_fds, flags);
}

/* A connection record for fd on sandbox sb, linked in; NULL (fd closed) without memory. */
static struct sbx_egress_conn *conn_new(struct sbx_egress_sandbox *sb, int fd)
{
    struct sbx_egress_conn *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        close(fd);
        sb->refused++;
        sbx_egress_warn_exhausted(sb->e, sb->name, "out of memory for a connection");
        return NULL;
    }
    c->sb = sb;
    c->job = sb->job != NULL ? strdup(sb->job) : NULL;
    c->client_fd = fd;
    c->up_fd = -1;
    clock_gettime(CLOCK_REALTIME, &c->start);
    clock_gettime(CLOCK_MONOTONIC, &c->t0);
    c->state = ST_HELLO;
    c->next = sb->conns;
    if (sb->conns != NULL) {
        sb->conns->prev = c;
    }
    sb->conns = c;
    sb->n_conns++;
    return c;
}

/* Logs and closes a connection refused before it did anything. */
static void refuse_early(struct sbx_egress_conn *c, const char *reason)
{
    c->reason = reason;
    c->sb->refused++;
    sbx_egress_conn_finish(c);
}

/* Rests the sandbox's listener for ms milliseconds (connections wait in its backlog). */
static void pause_listener(struct sbx_egress_sandbox *sb, long ms)
{
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};

    evconnlistener_disable(sb->listener);
    evtimer_add(sb->resume, &tv);
}

void sbx_egress_resume(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_egress_sandbox *sb = arg;

    (void)fd;
    (void)what;
    sb->accepts = 0;
    evconnlistener_enable(sb->listener);
}

/* (added) Round-robin at the door: a listener takes at most SBX_EGRESS_ACCEPT_TURN
 * connections per turn (libevent's would take its whole backlog in one callback), then
 * goes to the back of the queue of ready events at its priority, behind the other
 * sandboxes' listeners and connections being set up. */
void sbx_egress_next_turn(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_egress_sandbox *sb = arg;

    (void)fd;
    (void)what;
    sb->accepts = 0;
    if (!evtimer_pending(sb->resume, NULL)) { /* not resting for its rate */
        evconnlistener_enable(sb->listener);
    }
}

/* egress.connection_rate: a token bucket per sandbox (burst: one second's worth). When
 * it runs dry the listener rests until the next token: a sandbox that opens
 * connections as fast as it can gets its rate, the others' turns are not taken. */
static int take_token(struct sbx_egress_sandbox *sb)
{
    struct sbx_egress *e = sb->e;
    struct timespec now;
    double dt;

    if (e->conn_rate <= 0) {
        return 0;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    dt = (double)(now.tv_sec - sb->refill.tv_sec) + (now.tv_nsec - sb->refill.tv_nsec) / 1e9;
    sb->refill = now;
    sb->tokens += dt * e->conn_rate;
    if (sb->tokens > e->conn_rate) {
        sb->tokens = e->conn_rate;
    }
    sb->tokens -= 1;
    if (sb->tokens < 0) {
        long ms = (long)(-sb->tokens * 1000 / e->conn_rate) + 1;

        pause_listener(sb, ms);
        return 1;
    }
    return 0;
}

void sbx_egress_accept(struct evconnlistener *l, int fd, struct sockaddr *sa, int len, void *arg)
{
    struct sbx_egress_sandbox *sb = arg;
    struct sbx_egress_conn *c = conn_new(sb, fd);

    (void)l;
    (void)sa;
    (void)len;
    if (!take_token(sb) && ++sb->accepts >= SBX_EGRESS_ACCEPT_TURN) {
        evconnlistener_disable(sb->listener); /* ends libevent's accept loop */
        event_active(sb->next_turn, EV_TIMEOUT, 1);
    }
    if (c == NULL) {
        return;
    }
    if (sb->n_conns > sb->e->max_conns) {
        refuse_early(c, "budget-connections");
        return;
    }
    c->timer = evtimer_new(sb->e->base, sbx_egress_conn_timer, c);
    c->hello = event_new(sb->e->base, fd, EV_READ | EV_PERSIST, hello_read, c);
    if (c->timer == NULL || c->hello == NULL) {
        refuse_early(c, "out-of-memory");
        return;
    }
    event_add(c->hello, NULL);
    evtimer_add(c->timer, &sb->e->header_timeout);
}

/* accept() failed for another reason than "try again": out of descriptors (EMFILE,
 * ENFILE) or memory (ENOMEM, ENOBUFS). The connection that could not be taken waits in
 * the backlog and the listener is level-triggered, so it would wake the loop at once,
 * forever: instead the spare descriptor is given up to take that connection and close
 * it with a logged reason, and the listener rests a moment. */
void sbx_egress_accept_error(struct evconnlistener *l, void *arg)
{
    struct sbx_egress_sandbox *sb = arg;
    struct sbx_egress *e = sb->e;
    int err = errno;
    const char *why = sbx_egress_exhausted(err);
    char what[160];

    if (err == EMFILE || err == ENFILE) {
        if (e->reserve_fd >= 0) {
            int fd;

            close(e->reserve_fd);
            e->reserve_fd = -1;
            fd = accept4(evconnlistener_get_fd(l), NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                struct sbx_egress_conn *c = conn_new(sb, fd);

                if (c != NULL) {
                    refuse_early(c, why);
                }
            }
            e->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        }
    }
    snprintf(what, sizeof(what), "accept on %s: %s", sb->sock, strerror(err));
    sbx_egress_warn_exhausted(e, sb->name, what);
    pause_listener(sb, SBX_EGRESS_ACCEPT_PAUSE_MS);
}

uint64_t sbx_egress_held(const struct sbx_egress_sandbox *sb)
{
    uint64_t n = 0;

    for (const struct sbx_egress_conn *c = sb->conns; c != NULL; c = c->next) {
        int q = 0;

        if (c->tunnel != NULL) {
            n += sbx_egress_tunnel_held(c->tunnel);
        }
        if (c->client != NULL) {
            n += evbuffer_get_length(bufferevent_get_input(c->client));
            n += evbuffer_get_length(bufferevent_get_output(c->client));
        }
        if (c->up_fd >= 0) {
            if (ioctl(c->up_fd, SIOCINQ, &q) == 0 && q > 0) {
                n += (uint64_t)q;
            }
            if (ioctl(c->up_fd, SIOCOUTQ, &q) == 0 && q > 0) {
                n += (uint64_t)q;
            }
        }
    }
    return n;
}

/* A destination a few hundred microseconds away (this host, the LAN: a package
 * cache) gets the client socket's small fixed send buffer too: at that round trip it
 * still carries tens of Gbit/s, and it keeps forwarded bytes in cache. A farther one
 * keeps the kernel's autotuning, which a long path needs (SBX_EGRESS_NEAR_RTT_US). */
static void size_near_destination(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    int buf = SBX_EGRESS_CLIENT_BUF;

    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_rtt > 0 &&
        ti.tcpi_rtt < SBX_EGRESS_NEAR_RTT_US) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    }
}

/* After connect: the tunnel's reservation becomes what its socket really got. */
static void settle_reservation(struct sbx_egress_conn *c)
{
    int rcv = 0;
    int snd = 0;
    socklen_t l1 = sizeof(rcv);
    socklen_t l2 = sizeof(snd);
    uint64_t need;

    if (getsockopt(c->up_fd, SOL_SOCKET, SO_RCVBUF, &rcv, &l1) < 0 ||
        getsockopt(c->up_fd, SOL_SOCKET, SO_SNDBUF, &snd, &l2) < 0) {
        return; /* keep the worst case */
    }
    need = 2 * (uint64_t)SBX_EGRESS_PIPE_SIZE + (uint64_t)rcv + (uint64_t)snd;
    if (need < c->reserved) {
        c->sb->reserved -= c->reserved - need;
        c->reserved = need;
    }
}

void sbx_egress_conn_connected(struct sbx_egress_conn *c)
{
    size_near_destination(c->up_fd);
    settle_reservation(c);
}
