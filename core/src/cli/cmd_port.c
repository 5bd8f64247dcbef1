/* cmd_port.c - `sbx port TASK PORT`: a host loopback port (or a unix socket)
 * forwarded to 127.0.0.1:PORT inside a task's sandbox (docs/tasks.md, "Ports").
 * Each accepted connection asks the runner that hosts the task (its keeper's) for
 * a connection inside (the API's raw port connection, runner/api_term.c, logged
 * there) and copies bytes both ways on a thread of its own. The sandbox gets no
 * network. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/task_runner.h"
#include "runner/runner.h"
#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "util/fileio.h"
#include "util/cleanup.h"
#include "util/relay.h"
#include "util/xalloc.h"

#define COPY_CHUNK 65536
#define CONNS_MAX 256

static volatile sig_atomic_t stop_signal;
static int stop_pipe[2] = {-1, -1};
static pthread_mutex_t conns_mu = PTHREAD_MUTEX_INITIALIZER;
static int conns;

void sbx_cmd_port_help(FILE *out)
{
    fprintf(out, "usage: sbx port TASK PORT [--listen [127.0.0.1:]LPORT | --unix PATH] [--json]\n"
                 "\n"
                 "Forwards a host loopback port to 127.0.0.1:PORT inside the sandbox of a running\n"
                 "task (e.g. a dev server an agent started there), until Ctrl-C. The sandbox gets\n"
                 "no network: the host connects from inside its network namespace. Each\n"
                 "connection is logged when it ends (<state>/logs/ports.log, one JSON line: task,\n"
                 "port, peer, bytes_in, bytes_out, duration) and counts as the task's activity.\n"
                 "\n"
                 "  --listen [HOST:]LPORT  listen there (HOST a loopback address; default\n"
                 "                         127.0.0.1 and a free port)\n"
                 "  --unix PATH            listen on a unix socket instead (mode 0600)\n"
                 "  --json                 print {\"task\", \"port\", \"listen\"} once listening\n"
                 "\n"
                 "Prints the address it listens on (127.0.0.1:LPORT, or unix:PATH), then runs\n"
                 "until SIGINT or SIGTERM (exit 0). Exit 125: bad usage, no such task, or the\n"
                 "address cannot be bound.\n");
}

static void on_stop(int sig)
{
    int e = errno;

    stop_signal = sig;
    if (write(stop_pipe[1], "", 1) < 0) {
        /* pending */
    }
    errno = e;
}

struct fwd {
    const struct sbx_config *cfg;
    char *task;
    int port;
    int client;
    char peer[96];
};

/* (changed, issue 31) A connection to the port inside, through the runner that
 * hosts the task (its keeper's): GET /v1/tasks/T/ports/P with Upgrade: sbx-port.v1
 * on its unix socket; after the 101 the socket is the connection. The runner logs
 * it (ports.log) when it ends. -1 with err: the runner's reason. */
static int port_open(const struct sbx_config *cfg, const char *task, int port, const char *peer,
                     int *out, sbx_error_t **err)
{
    struct sbx_runner_endpoint ep;
    char target[128];
    char headers[160];
    int fd;

    if (sbx_runner_endpoint(cfg, &ep, err) < 0) {
        return -1;
    }
    snprintf(target, sizeof(target), "/v1/tasks/%s/ports/%d", task, port);
    snprintf(headers, sizeof(headers), "X-Sbx-Peer: %s\r\n", peer);
    fd = sbx_unix_upgrade(ep.unix_path, target, "sbx-port.v1", headers, err);
    sbx_runner_endpoint_clear(&ep);
    if (fd < 0) {
        return -1;
    }
    *out = fd;
    return 0;
}

static void *fwd_main(void *arg)
{
    struct fwd *f = arg;
    sbx_error_t *err = NULL;
    int64_t in = 0;
    int64_t out = 0;
    int inside = -1;

    if (port_open(f->cfg, f->task, f->port, f->peer, &inside, &err) < 0) {
        fprintf(stderr, "sbx: warn: port %d: connection from %s: %s\n", f->port, f->peer,
                sbx_error_msg(err));
        sbx_error_free(&err);
    }
    else {
        sbx_relay_both(f->client, inside, &in, &out);
        close(inside);
    }
    close(f->client);
    free(f);
    pthread_mutex_lock(&conns_mu);
    conns--;
    pthread_mutex_unlock(&conns_mu);
    return NULL;
}

static int listen_tcp(const char *spec, char *shown, size_t shown_size)
{
    char host[64] = "127.0.0.1";
    const char *colon = spec ? strrchr(spec, ':') : NULL;
    const char *ps = spec ? (colon ? colon + 1 : spec) : "0";
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    char *end = NULL;
    long lp = strtol(ps, &end, 10);
    int fd;
    int one = 1;

    if (colon != NULL) {
        if ((size_t)(colon - spec) >= sizeof(host)) {
            fprintf(stderr, "sbx: error: port: --listen '%s': host too long\n", spec);
            return -1;
        }
        memcpy(host, spec, (size_t)(colon - spec));
        host[colon - spec] = '\0';
    }
    if (end == ps || *end != '\0' || lp < 0 || lp > 65535) {
        fprintf(stderr, "sbx: error: port: --listen '%s': use [127.0.0.1:]PORT (0-65535)\n", spec);
        return -1;
    }
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || (ntohl(sa.sin_addr.s_addr) >> 24) != 127) {
        fprintf(stderr,
                "sbx: error: port: --listen '%s': host must be a loopback address "
                "(127.x.x.x): a forwarded port is never exposed off the host\n",
                spec);
        return -1;
    }
    sa.sin_port = htons((uint16_t)lp);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        fprintf(stderr, "sbx: error: port: listening on %s:%ld: %s\n", host, lp, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    snprintf(shown, shown_size, "%s:%u", host, (unsigned)ntohs(sa.sin_port));
    return fd;
}

static int listen_unix(const char *path, char *shown, size_t shown_size)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;
    mode_t old;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "sbx: error: port: --unix '%s': path too long\n", path);
        return -1;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    old = umask(0177);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
        umask(old);
        fprintf(stderr, "sbx: error: port: listening on %s: %s\n", path, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    umask(old);
    snprintf(shown, shown_size, "unix:%s", path);
    return fd;
}

static void peer_name(int fd, int is_unix, char *out, size_t n)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    char a[INET_ADDRSTRLEN] = "?";

    if (is_unix) {
        snprintf(out, n, "unix");
        return;
    }
    if (getpeername(fd, (struct sockaddr *)&sa, &sl) == 0 && sa.sin_family == AF_INET) {
        inet_ntop(AF_INET, &sa.sin_addr, a, sizeof(a));
        snprintf(out, n, "%s:%u", a, (unsigned)ntohs(sa.sin_port));
        return;
    }
    snprintf(out, n, "?");
}

struct port_opts {
    const char *task;
    long port;
    const char *listen;    /* --listen, or NULL */
    const char *unix_path; /* --unix, or NULL */
    int json;
};

/* Parses `sbx port`'s options and operands into *o. Returns 0 or -1 (printed). */
static int port_parse(int argc, char **argv, struct port_opts *o)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"unix", required_argument, NULL, 'u'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "port", .help = "port", .opts = opts, .argc = argc, .argv = argv};
    char *end = NULL;
    int c;

    *o = (struct port_opts){.port = -1};
    while ((c = sbx_args_next(&a)) != -1) {
        if (c == '?') {
            return -1;
        }
        if (c == 'j') {
            o->json = 1;
        }
        else if (c == 'l') {
            o->listen = optarg;
        }
        else if (c == 'u') {
            o->unix_path = optarg;
        }
    }
    if (sbx_args_operands(&a, 2, 2, "TASK PORT") < 0) {
        return -1;
    }
    o->task = argv[optind];
    o->port = strtol(argv[optind + 1], &end, 10);
    if (end == argv[optind + 1] || *end != '\0' || o->port < 1 || o->port > 65535) {
        fprintf(stderr, "sbx: error: port: '%s' is not a port (1-65535)\n", argv[optind + 1]);
        return -1;
    }
    if (o->task == NULL || o->port < 0) {
        fprintf(stderr, "sbx: error: port: usage: sbx port TASK PORT [--listen [127.0.0.1:]LPORT "
                        "| --unix PATH] [--json]\n");
        return -1;
    }
    if (o->listen != NULL && o->unix_path != NULL) {
        fprintf(stderr, "sbx: error: port: --listen and --unix exclude each other\n");
        return -1;
    }
    if (!sbx_id_valid(o->task, SBX_ID_TASK)) {
        fprintf(stderr, "sbx: error: port: '%s' is not a valid task id\n", o->task);
        return -1;
    }
    return 0;
}

/* The configuration, with the runner that hosts the task (its keeper's) as its
 * endpoint; NULL having said why. */
static struct sbx_config *port_host(struct sbx_cli *cli, const char *task)
{
    struct sbx_config *cfg = sbx_cli_config(cli);
    cleanup_free char *state = NULL;
    sbx_error_t *err = NULL;

    if (cfg == NULL || (state = sbx_state_dir(cfg->state_dir, &err)) == NULL) {
        if (err != NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
        }
        return NULL;
    }
    /* (changed, issue 31) the runner that hosts the task (its keeper's) */
    if (sbx_task_runner_use(cfg, state, task, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return NULL;
    }
    return cfg;
}

/* Hands one accepted connection c to a thread of its own (fwd_main); closes
 * it instead when CONNS_MAX are open or no thread starts. */
static void port_forward(const struct sbx_config *cfg, const struct port_opts *o, int c)
{
    struct fwd *f;
    pthread_t th;

    pthread_mutex_lock(&conns_mu);
    if (conns >= CONNS_MAX) {
        pthread_mutex_unlock(&conns_mu);
        close(c);
        return;
    }
    conns++;
    pthread_mutex_unlock(&conns_mu);
    f = xcalloc(1, sizeof(*f));
    f->cfg = cfg;
    f->task = (char *)o->task;
    f->port = (int)o->port;
    f->client = c;
    peer_name(c, o->unix_path != NULL, f->peer, sizeof(f->peer));
    if (pthread_create(&th, NULL, fwd_main, f) != 0) {
        close(c);
        free(f);
        pthread_mutex_lock(&conns_mu);
        conns--;
        pthread_mutex_unlock(&conns_mu);
        return;
    }
    pthread_detach(th);
}

int sbx_cmd_port(struct sbx_cli *cli, int argc, char **argv)
{
    struct port_opts o;
    struct sbx_config *cfg;
    char shown[160];
    struct sigaction sa = {0};
    int lfd;

    if (port_parse(argc, argv, &o) < 0) {
        return SBX_EXIT_SBX;
    }
    cfg = port_host(cli, o.task);
    if (cfg == NULL) {
        return SBX_EXIT_SBX;
    }
    lfd = o.unix_path ? listen_unix(o.unix_path, shown, sizeof(shown))
                      : listen_tcp(o.listen, shown, sizeof(shown));
    if (lfd < 0) {
        return SBX_EXIT_SBX;
    }
    if (pipe2(stop_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        close(lfd);
        return SBX_EXIT_SBX;
    }
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (o.json) {
        printf("{\"task\":\"%s\",\"port\":%ld,\"listen\":\"%s\"}\n", o.task, o.port, shown);
    }
    else {
        printf("%s\n", shown);
        fprintf(stderr, "sbx: forwarding %s to port %ld in task %s (Ctrl-C to stop)\n", shown,
                o.port, o.task);
    }
    fflush(stdout);
    while (!stop_signal) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN},
                              {.fd = stop_pipe[0], .events = POLLIN}};
        int c;

        if (poll(p, 2, -1) < 0 || p[0].revents == 0) {
            continue;
        }
        c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c >= 0) {
            port_forward(cfg, &o, c);
        }
    }
    close(lfd);
    if (o.unix_path != NULL) {
        unlink(o.unix_path);
    }
    /* open connections end with the process */
    fflush(stdout);
    _exit(0);
}
