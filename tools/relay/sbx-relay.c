/* sbx-relay - the in-sandbox end of the egress path (docs/egress.md).
 *
 * Listens on a loopback TCP port (127.0.0.1:3128 by default) and hands every accepted
 * connection to the host egress proxy through its unix socket
 * (/run/sbx-egress/proxy.sock by default): one NUL byte carrying the TCP socket as
 * SCM_RIGHTS, after which the proxy talks to the client directly and the relay is out
 * of the path. With --copy it instead copies bytes both ways (with half-close) in one
 * poll() loop, for a proxy that cannot take descriptors. Built static with no
 * dependency beyond libc, so it runs in any image.
 *
 *   sbx-relay [--listen ADDR:PORT] [--socket PATH] [--copy] [--print-port]
 *             [--dns ADDR:PORT] [--redirect ADDR:PORT] [--agent SOCK] [--attribute]
 *             [-- CMD [ARG]...]
 *
 * (added) --dns and --redirect are the transparent path (names.c): a resolver on UDP
 * ADDR:PORT that answers names with loopback addresses of their own (allowed and
 * denied names from separate ranges), and the listener the sandbox's netns redirects
 * TCP to.
 *
 * --agent SOCK also starts the exec agent (agent.c) in its own process. With --agent
 * or --attribute each connection goes to the proxy with one line naming the pid inside
 * and the agent's exec it belongs to (attr.c).
 *
 * --print-port writes the bound port on stdout (for --listen 127.0.0.1:0). With a
 * command, the relay forks into the background (dying with its parent) and the
 * command replaces this process once the port is listening. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent.h"
#include "attr.h"
#include "names.h"

#define BUF_SIZE (256 * 1024)
#define MAX_PAIRS 1024

struct dir {
    char *buf;
    size_t len;
    size_t off;
    int eof;  /* the source said EOF */
    int shut; /* the sink was shut for writing */
};

struct pair {
    int fd[2];       /* 0: the TCP client, 1: the proxy's unix socket */
    struct dir d[2]; /* d[0]: fd[0] -> fd[1], d[1]: fd[1] -> fd[0] */
};

static struct pair *pairs[MAX_PAIRS];
static size_t n_pairs;
static int attribute; /* --agent or --attribute: name each connection's pid and exec */

/* The hand-over loop: the proxy port, and (added) the resolver and the redirect
 * listener when asked for (-1 otherwise). */
static int hand_over_loop(int lfd, int ufd, int tfd, const struct sockaddr_un *sun)
{
    struct pollfd p[3] = {{lfd, POLLIN, 0}, {ufd, POLLIN, 0}, {tfd, POLLIN, 0}};
    int one = 1;

    for (;;) {
        if (poll(p, 3, -1) < 0) {
            continue;
        }
        if (p[1].revents & POLLIN) {
            sbx_relay_dns_serve(ufd, sun);
        }
        if (p[2].revents & POLLIN) {
            sbx_relay_transparent_accept(tfd, sun, attribute);
        }
        if (p[0].revents & POLLIN) {
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

            if (c >= 0) {
                setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                sbx_attr_hand_over(c, sun, "", 1, attribute); /* a NUL byte */
            }
        }
    }
    return 1; /* not reached */
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sbx-relay [--listen ADDR:PORT] [--socket PATH] [--copy] [--print-port] "
               "[--dns ADDR:PORT] [--redirect ADDR:PORT] [--agent SOCK] [--attribute]\n"
               "       [-- CMD [ARG]...]\n"
               "Hands each TCP connection on ADDR:PORT (default 127.0.0.1:3128) to the egress\n"
               "proxy on the unix socket PATH (default /run/sbx-egress/proxy.sock); with\n"
               "--copy, copies the bytes instead. --agent also serves exec requests from the\n"
               "host on the unix socket SOCK (docs/tasks.md, \"The exec agent\"). With --agent\n"
               "or --attribute, each connection is sent to the proxy with the pid inside and\n"
               "the exec it comes from (docs/egress.md, \"Attribution\").\n"
               "--dns serves DNS on UDP ADDR:PORT: a name the proxy's policy allows gets an\n"
               "address of its own in " SBX_RELAY_NAME_NET " (AAAA: none); a denied name gets\n"
               "one in " SBX_RELAY_DENY_NET " with an Extended DNS Error naming the policy.\n"
               "--redirect takes the TCP connections the sandbox's netns redirects to\n"
               "ADDR:PORT and hands each to the proxy as a CONNECT to the name (or address)\n"
               "and port it was opened to, so programs that ignore HTTP(S)_PROXY reach the\n"
               "proxy's checks too; one to a denied name's address is handed over to be\n"
               "refused (an HTTP 403 or a TLS alert naming the policy), never connected\n"
               "(docs/egress.md, \"Without proxy variables\"). Not with --copy.\n");
}

static int parse_listen(const char *s, struct sockaddr_in *sin)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    char *end;
    long port;

    if (colon == NULL || (size_t)(colon - s) >= sizeof(host)) {
        return -1;
    }
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    errno = 0;
    port = strtol(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || end == colon + 1 || port < 0 || port > 65535) {
        return -1;
    }
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_port = htons((unsigned short)port);
    return inet_pton(AF_INET, host, &sin->sin_addr) == 1 ? 0 : -1;
}

/* (added) A bound UDP (the resolver) or listening TCP socket (the redirect) on
 * ADDR:PORT; -2 for a bad ADDR:PORT, -1 when it cannot be bound (both said). */
static int open_socket(const char *at, const char *opt, int type)
{
    struct sockaddr_in sin;
    int one = 1;
    int fd;

    if (parse_listen(at, &sin) < 0) {
        fprintf(stderr, "sbx-relay: %s '%s': want IPV4:PORT\n", opt, at);
        return -2;
    }
    fd = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        (type == SOCK_STREAM && listen(fd, 256) < 0)) {
        fprintf(stderr, "sbx-relay: cannot bind %s %s: %s\n", opt, at, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

static void set_nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void pair_free(size_t i)
{
    struct pair *p = pairs[i];

    close(p->fd[0]);
    close(p->fd[1]);
    free(p->d[0].buf);
    free(p->d[1].buf);
    free(p);
    pairs[i] = pairs[--n_pairs];
}

static void accept_one(int lfd, const struct sockaddr_un *sun)
{
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    int u;
    int one = 1;
    struct pair *p;

    if (c < 0) {
        return;
    }
    if (n_pairs == MAX_PAIRS) {
        close(c);
        return;
    }
    u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (u < 0 || connect(u, (const struct sockaddr *)sun, sizeof(*sun)) < 0) {
        fprintf(stderr, "sbx-relay: cannot connect to %s: %s\n", sun->sun_path, strerror(errno));
        if (u >= 0) {
            close(u);
        }
        close(c);
        return;
    }
    if (attribute) {
        char line[SBX_ATTR_LINE_MAX];
        size_t n = sbx_attr_line(c, line);

        /* ahead of the client's bytes, on a socket still blocking */
        if (n > 0 && send(u, line, n, MSG_NOSIGNAL) != (ssize_t)n) {
            close(u);
            close(c);
            return;
        }
    }
    set_nonblock(u);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    p = calloc(1, sizeof(*p));
    if (p == NULL || (p->d[0].buf = malloc(BUF_SIZE)) == NULL ||
        (p->d[1].buf = malloc(BUF_SIZE)) == NULL) {
        abort();
    }
    p->fd[0] = c;
    p->fd[1] = u;
    pairs[n_pairs++] = p;
}

/* Moves bytes for direction k of p; returns -1 when the pair is finished. */
static int pump(struct pair *p, int k, short rev_src, short rev_dst)
{
    struct dir *d = &p->d[k];
    int src = p->fd[k];
    int dst = p->fd[1 - k];

    if ((rev_src & (POLLIN | POLLHUP | POLLERR)) && !d->eof && d->len < BUF_SIZE) {
        ssize_t n = read(src, d->buf + d->len, BUF_SIZE - d->len);

        if (n > 0) {
            d->len += (size_t)n;
        }
        else if (n == 0) {
            d->eof = 1;
        }
        else if (errno != EAGAIN && errno != EINTR) {
            return -1;
        }
    }
    (void)rev_dst; /* writes are tried whenever bytes wait; EAGAIN is fine */
    if (d->off < d->len) {
        ssize_t n = write(dst, d->buf + d->off, d->len - d->off);

        if (n > 0) {
            d->off += (size_t)n;
            if (d->off == d->len) {
                d->off = d->len = 0;
            }
        }
        else if (n < 0 && errno != EAGAIN && errno != EINTR) {
            return -1;
        }
    }
    if (d->eof && d->len == 0 && !d->shut) {
        shutdown(dst, SHUT_WR);
        d->shut = 1;
    }
    return 0;
}

static int relay_loop(int lfd, const struct sockaddr_un *sun)
{
    static struct pollfd pfd[1 + 2 * MAX_PAIRS];

    for (;;) {
        size_t n = 0;

        pfd[n].fd = lfd;
        pfd[n].events = n_pairs < MAX_PAIRS ? POLLIN : 0;
        pfd[n++].revents = 0;
        for (size_t i = 0; i < n_pairs; i++) {
            struct pair *p = pairs[i];

            for (int k = 0; k < 2; k++) {
                struct dir *in = &p->d[k];      /* what fd[k] reads */
                struct dir *out = &p->d[1 - k]; /* what fd[k] writes */

                pfd[n].fd = p->fd[k];
                pfd[n].events = (short)((!in->eof && in->len < BUF_SIZE ? POLLIN : 0) |
                                        (out->off < out->len ? POLLOUT : 0));
                if (pfd[n].events == 0) {
                    pfd[n].fd = -1; /* nothing wanted: no busy loop on HUP */
                }
                pfd[n++].revents = 0;
            }
        }
        if (poll(pfd, n, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            perror("sbx-relay: poll");
            return 1;
        }
        /* Pairs first (accepting reorders nothing before them). */
        for (size_t i = n_pairs; i-- > 0;) {
            struct pair *p = pairs[i];
            short r0 = pfd[1 + 2 * i].revents;
            short r1 = pfd[2 + 2 * i].revents;

            if (pump(p, 0, r0, r1) < 0 || pump(p, 1, r1, r0) < 0 ||
                (p->d[0].shut && p->d[1].shut)) {
                pair_free(i);
            }
        }
        if (pfd[0].revents & POLLIN) {
            accept_one(lfd, sun);
        }
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'}, {"socket", required_argument, NULL, 's'},
        {"print-port", no_argument, NULL, 'p'},   {"copy", no_argument, NULL, 'c'},
        {"agent", required_argument, NULL, 'a'},  {"attribute", no_argument, NULL, 'A'},
        {"dns", required_argument, NULL, 'd'},    {"redirect", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    const char *listen_at = "127.0.0.1:3128";
    const char *sock = "/run/sbx-egress/proxy.sock";
    const char *agent = NULL;
    const char *dns_at = NULL;
    const char *redirect_at = NULL;
    int ufd = -1;
    int tfd = -1;
    int print_port = 0;
    int copy = 0;
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    struct sockaddr_un sun;
    int lfd;
    int one = 1;
    int ch;

    while ((ch = getopt_long(argc, argv, "+l:s:pcha:Ad:r:", opts, NULL)) != -1) {
        switch (ch) {
        case 'l':
            listen_at = optarg;
            break;
        case 's':
            sock = optarg;
            break;
        case 'p':
            print_port = 1;
            break;
        case 'c':
            copy = 1;
            break;
        case 'a':
            agent = optarg;
            attribute = 1;
            break;
        case 'A':
            attribute = 1;
            break;
        case 'd':
            dns_at = optarg;
            break;
        case 'r':
            redirect_at = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (parse_listen(listen_at, &sin) < 0) {
        fprintf(stderr, "sbx-relay: --listen '%s': want IPV4:PORT\n", listen_at);
        return 2;
    }
    if ((dns_at != NULL || redirect_at != NULL) && copy) {
        fprintf(stderr, "sbx-relay: --dns and --redirect hand sockets over: not with --copy\n");
        return 2;
    }
    if ((dns_at != NULL && (ufd = open_socket(dns_at, "--dns", SOCK_DGRAM)) < 0) ||
        (redirect_at != NULL && (tfd = open_socket(redirect_at, "--redirect", SOCK_STREAM)) < 0)) {
        return ufd == -2 || tfd == -2 ? 2 : 1;
    }
    if (strlen(sock) >= sizeof(sun.sun_path)) {
        fprintf(stderr, "sbx-relay: --socket '%s' is too long\n", sock);
        return 2;
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    strcpy(sun.sun_path, sock);
    signal(SIGPIPE, SIG_IGN);

    lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 256) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &sl) < 0) {
        fprintf(stderr, "sbx-relay: cannot listen on %s: %s\n", listen_at, strerror(errno));
        return 1;
    }
    if (print_port) {
        printf("%u\n", ntohs(sin.sin_port));
        fflush(stdout);
    }
    if (attribute && sbx_attr_init() < 0) {
        attribute = 0; /* connections go on, unattributed */
    }
    if (agent != NULL) {
        pid_t parent = getpid();
        pid_t pid = fork();

        if (pid < 0) {
            perror("sbx-relay: fork");
            return 1;
        }
        if (pid == 0) {
            close(lfd);
            if (ufd >= 0) {
                close(ufd);
            }
            if (tfd >= 0) {
                close(tfd);
            }
            if (getppid() != parent) {
                return 0;
            }
            sbx_agent_run(agent);
        }
    }
    if (optind < argc) {
        pid_t parent = getpid();
        pid_t pid = fork();

        if (pid < 0) {
            perror("sbx-relay: fork");
            return 1;
        }
        if (pid > 0) {
            close(lfd);
            if (ufd >= 0) {
                close(ufd);
            }
            if (tfd >= 0) {
                close(tfd);
            }
            execvp(argv[optind], argv + optind);
            fprintf(stderr, "sbx-relay: cannot run %s: %s\n", argv[optind], strerror(errno));
            return 127;
        }
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) {
            return 0;
        }
    }
    return copy ? relay_loop(lfd, &sun) : hand_over_loop(lfd, ufd, tfd, &sun);
}
