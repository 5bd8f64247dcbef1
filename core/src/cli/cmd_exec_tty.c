/* cmd_exec_tty.c - `sbx exec -it TASK -- CMD`: a command on a terminal
 * (docs/tasks.md, "Terminals"). The keeper allocates the pty and relays it
 * (core/src/sandbox/pty.c); this side puts the user's terminal in raw mode,
 * sends what is typed and each new window size, writes what comes back, and
 * restores the terminal on every way out. (added) `sbx exec -it --keep` and
 * `sbx attach TASK`: the task's kept session (core/src/sandbox/pty_session.c),
 * left with the detach keys, Ctrl-\ then d. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/task_opts.h"
#include "cli/task_runner.h"
#include "runner/runner.h"
#include "sandbox/proto.h"
#include "sandbox/pty.h"
#include "sandbox/statedir.h"
#include "util/fileio.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

static struct termios saved;
static int raw_on;
static int sig_pipe[2] = {-1, -1};
static volatile sig_atomic_t got_signal;

static void restore_tty(void)
{
    if (raw_on) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        raw_on = 0;
    }
}

static void on_signal(int sig)
{
    int e = errno;
    char c = (char)sig;

    if (sig != SIGWINCH) {
        got_signal = sig;
    }
    if (write(sig_pipe[1], &c, 1) < 0) {
        /* full: a wake-up is pending already */
    }
    errno = e;
}

static int is_tty_flag(const char *a)
{
    return strcmp(a, "-it") == 0 || strcmp(a, "-ti") == 0 || strcmp(a, "-t") == 0 ||
           strcmp(a, "-i") == 0 || strcmp(a, "--tty") == 0 || strcmp(a, "--interactive") == 0;
}

int sbx_exec_wants_tty(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-it") == 0 || strcmp(argv[i], "-ti") == 0 ||
            strcmp(argv[i], "-t") == 0 || strcmp(argv[i], "--tty") == 0 ||
            strcmp(argv[i], "--keep") == 0) {
            return 1;
        }
    }
    return 0;
}

static void window_size(unsigned *rows, unsigned *cols)
{
    struct winsize ws = {0};

    *rows = 24;
    *cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        *rows = ws.ws_row > SBX_TTY_DIM_MAX ? SBX_TTY_DIM_MAX : ws.ws_row;
        *cols = ws.ws_col > SBX_TTY_DIM_MAX ? SBX_TTY_DIM_MAX : ws.ws_col;
    }
}

static int send_size(int fd)
{
    unsigned rows, cols;
    unsigned char b[4];

    window_size(&rows, &cols);
    b[0] = (unsigned char)(rows >> 8);
    b[1] = (unsigned char)rows;
    b[2] = (unsigned char)(cols >> 8);
    b[3] = (unsigned char)cols;
    return sbx_frame_write(fd, 'W', b, sizeof(b));
}

/* The result frame: the command's status, or 125/126/127 with the error printed;
 * (added) a kept session's client taken over by another: 0, said on stderr. */
static int result(const char *data, int detach)
{
    json_t *j = json_loads(data, 0, NULL);
    json_t *st = json_object_get(j, "status");
    int rc = 125;

    if (json_is_integer(st)) {
        rc = (int)json_integer_value(st);
    }
    else if (detach && json_is_string(json_object_get(j, "detached"))) {
        restore_tty();
        fprintf(stderr, "\r\nsbx: detached: %s\n",
                json_string_value(json_object_get(j, "detached")));
        rc = 0;
    }
    else {
        const char *msg = json_string_value(json_object_get(j, "error"));
        json_t *code = json_object_get(j, "code");

        restore_tty();
        fprintf(stderr, "sbx: error: %s\n", msg ? msg : "malformed reply from the keeper");
        if (json_is_integer(code)) {
            rc = (int)json_integer_value(code);
        }
    }
    json_decref(j);
    return rc;
}

#define DETACH_KEY 0x1c /* Ctrl-\ ; then 'd' */
#define RELAY_DETACHED (-1)

/* (added) With the detach keys: buf's bytes without Ctrl-\ d (*held: a Ctrl-\ was
 * the last byte read, not sent yet); RELAY_DETACHED when they came, else the
 * length to send. Ctrl-\ then any other byte sends both. */
static ssize_t detach_filter(char *buf, ssize_t n, char *out, int *held)
{
    ssize_t k = 0;

    for (ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];

        if (*held) {
            *held = 0;
            if (c == 'd') {
                return RELAY_DETACHED;
            }
            out[k++] = DETACH_KEY;
            if (c == DETACH_KEY) {
                *held = 1;
                continue;
            }
        }
        else if (c == DETACH_KEY) {
            *held = 1;
            continue;
        }
        out[k++] = (char)c;
    }
    return k;
}

/* Relays until the 'X' frame; the exit code of sbx. detach: the detach keys
 * leave (RELAY_DETACHED), and an 'X' that says the session was taken over is 0. */
static int relay(int fd, int detach)
{
    int stdin_open = 1;
    int held = 0;

    for (;;) {
        struct pollfd p[3] = {{.fd = fd, .events = POLLIN},
                              {.fd = stdin_open ? STDIN_FILENO : -1, .events = POLLIN},
                              {.fd = sig_pipe[0], .events = POLLIN}};

        if (poll(p, 3, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            return 125;
        }
        if (p[2].revents != 0) {
            char drain[16];

            while (read(sig_pipe[0], drain, sizeof(drain)) > 0) {
            }
            if (got_signal) {
                return 128 + got_signal; /* closing the connection cancels the command */
            }
            if (send_size(fd) < 0) {
                return 125;
            }
        }
        if (p[1].revents != 0) {
            char buf[4096];
            char sent[2 * sizeof(buf)];
            ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
            ssize_t k = n > 0 && detach ? detach_filter(buf, n, sent, &held) : n;

            if (k == RELAY_DETACHED) {
                return RELAY_DETACHED;
            }
            if (k > 0 && sbx_frame_write(fd, 'I', detach ? sent : buf, (size_t)k) < 0) {
                return 125;
            }
            if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
                stdin_open = 0; /* not a terminal's EOF (that is Ctrl-D, a byte): stop reading */
            }
        }
        if (p[0].revents != 0) {
            char type = 0;
            char *data = NULL;
            size_t len = 0;
            sbx_error_t *err = NULL;
            int r = sbx_frame_read(fd, &type, &data, &len, &err);

            if (r != 0) {
                restore_tty();
                fprintf(stderr, "sbx: error: %s\n",
                        err ? sbx_error_msg(err) : "the keeper closed the connection");
                sbx_error_free(&err);
                free(data);
                return 125;
            }
            if (type == 'O' || type == 'E') {
                sbx_write_all(STDOUT_FILENO, data, len);
            }
            else if (type == 'X') {
                int rc = result(data, detach);

                free(data);
                return rc;
            }
            free(data);
        }
    }
}

/* (runner.listen set) The runner's terminal for its task: the upgrade on its unix
 * socket (or TCP with runner.token_env's token); the connection after the 101, or -1
 * with the error printed. */
static int runner_terminal(const struct sbx_config *cfg, const char *task, int attach)
{
    struct sbx_runner_endpoint ep;
    sbx_error_t *err = NULL;
    const char *tok = NULL;
    char head[4096];
    int fd;

    if (sbx_runner_endpoint(cfg, &ep, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return -1;
    }
    if (ep.tcp_host != NULL && access(ep.unix_path, F_OK) != 0) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        char port[16];

        tok = cfg->runner.token_env ? getenv(cfg->runner.token_env) : NULL;
        snprintf(port, sizeof(port), "%d", ep.tcp_port);
        fd = -1;
        if (tok != NULL && *tok != '\0' && getaddrinfo(ep.tcp_host, port, &hints, &ai) == 0) {
            fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                close(fd);
                fd = -1;
            }
            freeaddrinfo(ai);
        }
        if (fd < 0) {
            fprintf(stderr, "sbx: error: runner at %s:%d: %s\n", ep.tcp_host, ep.tcp_port,
                    tok == NULL || *tok == '\0'
                        ? "set the token in the variable named by runner.token_env"
                        : "not reachable");
        }
    }
    else {
        fd = sbx_unix_connect(ep.unix_path, &err);
        if (fd < 0) {
            fprintf(stderr, "sbx: error: runner not reachable: %s\n", sbx_error_msg(err));
            sbx_error_free(&err);
        }
    }
    sbx_runner_endpoint_clear(&ep);
    if (fd < 0) {
        return -1;
    }
    snprintf(head, sizeof(head),
             "GET /v1/tasks/%s/terminal%s HTTP/1.1\r\nHost: sbx\r\n%s%s%sConnection: Upgrade\r\n"
             "Upgrade: sbx-terminal.v2\r\n\r\n",
             task, attach ? "?attach=1" : "", tok ? "Authorization: Bearer " : "", tok ? tok : "",
             tok ? "\r\n" : "");
    fd = sbx_upgrade_on(fd, head, strlen(head), "the runner", &err);
    explicit_bzero(head, sizeof(head)); /* the token */
    if (fd < 0) {
        fprintf(stderr, "sbx: error: runner: %s\n", sbx_error_msg(err));
        sbx_error_free(&err);
        return -1;
    }
    return fd;
}

static int terminal(const struct sbx_config *cfg, const char *state, const char *task, json_t *req,
                    int detach, int attach);

/* (added, issue 31) No runner configured: the runner that hosts the task (its
 * keeper's), whose API's terminal this takes. -1 having said why. */
static int task_host(struct sbx_config *cfg, const char *state, const char *task)
{
    sbx_error_t *err = NULL;

    if (cfg->runner.listen != NULL) {
        return 0;
    }
    if (sbx_task_runner_use(cfg, state, task, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return -1;
    }
    return 0;
}

static int usage(const char *msg)
{
    fprintf(stderr,
            "sbx: error: exec: %s (usage: sbx exec -it [--keep] TASK [--env K=V]... -- CMD ...)\n",
            msg);
    return SBX_EXIT_SBX;
}

/* The configuration, the state directory (*state, the caller's) and the runner
 * that hosts the task (task_host). -1 having said why. */
static int terminal_setup(struct sbx_cli *cli, const char *task, struct sbx_config **cfg,
                          char **state)
{
    sbx_error_t *err = NULL;

    *cfg = sbx_cli_config(cli);
    if (*cfg == NULL || (*state = sbx_state_dir((*cfg)->state_dir, &err)) == NULL) {
        if (err != NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
        }
        return -1;
    }
    return task_host(*cfg, *state, task);
}

/* The flags `sbx exec -it` takes for itself, before any "--": -i/-t (*tty_flag
 * when a terminal is asked for), --keep, and the task (the first operand).
 * rest gets argv without them, what `sbx exec` parses; returns its count. */
static int take_tty_args(int argc, char **argv, char **rest, const char **task, int *keep,
                         int *tty_flag)
{
    int n = 0;

    rest[n++] = argv[0];
    for (int i = 1; i < argc; i++) {
        int before = 1;

        for (int k = 1; k < i; k++) {
            before = before && strcmp(argv[k], "--") != 0;
        }
        if (before && strcmp(argv[i], "--") == 0) {
            before = 0;
        }
        if (before && strcmp(argv[i], "--keep") == 0) {
            *keep = 1; /* (added) a kept session */
            continue;
        }
        if (before && is_tty_flag(argv[i])) {
            *tty_flag =
                *tty_flag || (strcmp(argv[i], "-i") != 0 && strcmp(argv[i], "--interactive") != 0);
            continue;
        }
        if (before && *task == NULL && strcmp(argv[i], "--") != 0 && argv[i][0] != '-') {
            *task = argv[i];
            continue;
        }
        rest[n++] = argv[i];
    }
    return n;
}

/* The 'R' frame of an exec on a terminal of this window's size: env as pairs
 * for a keeper, as an object for a configured runner (its jobs', docs/api.md). */
static json_t *exec_request(const struct sbx_config *cfg, const struct sbx_task_cli *o, int keep)
{
    json_t *jargv = json_array();
    json_t *jenv = json_array();
    json_t *req;
    unsigned rows, cols;

    for (size_t i = 0; o->cmd[i] != NULL; i++) {
        json_array_append_new(jargv, json_string(o->cmd[i]));
    }
    for (size_t i = 0; i < o->n_env; i++) {
        json_array_append_new(jenv, json_pack("[s,s]", o->env[i].name, o->env[i].value));
    }
    window_size(&rows, &cols);
    if (cfg->runner.listen != NULL) {
        json_t *obj = json_object();

        for (size_t i = 0; i < o->n_env; i++) {
            json_object_set_new(obj, o->env[i].name, json_string(o->env[i].value));
        }
        json_decref(jenv);
        jenv = obj;
    }
    req = json_pack("{s:s, s:o, s:o, s:{s:i, s:i}}", "op", "exec", "argv", jargv, "env", jenv,
                    "tty", "rows", (int)rows, "cols", (int)cols);
    if (keep) {
        json_object_set_new(req, "keep", json_true());
    }
    return req;
}

int sbx_cmd_exec_tty(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_task_cli o;
    struct sbx_config *cfg;
    cleanup_free char *state = NULL;
    /* o.cmd points into it: freed when this returns */
    cleanup_free char **rest = xcalloc((size_t)argc + 1, sizeof(char *));
    const char *task = NULL;
    json_t *req;
    int n;
    int keep = 0;
    int tty_flag = 0;

    n = take_tty_args(argc, argv, rest, &task, &keep, &tty_flag);
    if (task == NULL || (keep && !tty_flag)) {
        return usage(task == NULL ? "no task"
                                  : "--keep goes with -it (a kept session is a terminal)");
    }
    if (sbx_task_cli_parse(&o, n, rest, 2) < 0) {
        return SBX_EXIT_SBX;
    }
    if (o.cmd == NULL || o.json) {
        sbx_task_cli_fini(&o);
        return usage(o.json ? "--json cannot go with a terminal (-t)" : "no command");
    }
    if (terminal_setup(cli, task, &cfg, &state) < 0) {
        sbx_task_cli_fini(&o);
        return SBX_EXIT_SBX;
    }
    req = exec_request(cfg, &o, keep);
    sbx_task_cli_fini(&o);
    return terminal(cfg, state, task, req, keep, 0);
}

/* Connects to the task's terminal (the runner's API: runner.listen, set by task_host
 * for a task of a keeper), sends req (taken), relays in raw mode and restores the
 * terminal; sbx's exit code. detach: a kept session (the detach keys work). */
static int terminal(const struct sbx_config *cfg, const char *state, const char *task, json_t *req,
                    int detach, int attach)
{
    char *s;
    int fd;
    int rc;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        json_decref(req);
        fprintf(stderr, "sbx: error: '%s' is not a valid task id\n", task);
        return SBX_EXIT_SBX;
    }
    /* (changed, issue 31) the API's terminal of the runner that hosts the task: a
     * configured one, or the task's keeper's (task_host); same frames after the 101 */
    (void)state;
    fd = runner_terminal(cfg, task, attach);
    if (fd < 0) {
        json_decref(req);
        return SBX_EXIT_SBX;
    }
    s = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    rc = sbx_frame_write(fd, 'R', s, strlen(s));
    explicit_bzero(s, strlen(s)); /* --env values */
    free(s);
    if (rc < 0) {
        close(fd);
        fprintf(stderr, "sbx: error: sending to the keeper: %s\n", strerror(errno));
        return SBX_EXIT_SBX;
    }
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
        struct sigaction sa = {0};

        sa.sa_handler = on_signal;
        sigaction(SIGWINCH, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
    }
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0) {
        struct termios raw = saved;

        /* Ctrl-C, Ctrl-Z, Ctrl-D travel as bytes to the terminal inside */
        cfmakeraw(&raw);
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0) {
            raw_on = 1;
            atexit(restore_tty);
        }
    }
    rc = relay(fd, detach);
    restore_tty();
    close(fd);
    if (rc == RELAY_DETACHED || (detach && rc >= 128 && rc < 128 + 65 && got_signal)) {
        /* the session goes on without us */
        fprintf(stderr,
                "\r\nsbx: detached from task %s's kept session (sbx attach %s comes back)\n", task,
                task);
        rc = rc == RELAY_DETACHED ? 0 : rc;
    }
    return rc;
}

void sbx_cmd_attach_help(FILE *out)
{
    fprintf(out, "usage: sbx attach TASK\n"
                 "\n"
                 "Attaches this terminal to the task's kept session, started with\n"
                 "'sbx exec -it --keep TASK -- bash' (docs/tasks.md, \"Kept sessions\"): what\n"
                 "the session showed last (its scrollback, up to 64 KiB) comes first, then\n"
                 "it is live, in raw mode; this terminal's size is the session's from now on.\n"
                 "\n"
                 "Detach: Ctrl-\\ then d (the session goes on; Ctrl-\\ then any other key\n"
                 "sends both). One client is attached at a time: attaching takes the session\n"
                 "over from the one attached before, which is told so and exits 0. The session\n"
                 "ends with its command; the client attached then exits with its status.\n"
                 "Refused for a task holding credentials, as every terminal. With\n"
                 "runner.listen set: the runner's session of its task (the client's own).\n"
                 "\n"
                 "Exit status: the session command's own when it ended while attached, 0 when\n"
                 "detached, 125 when sbx failed (no such task, no kept session).\n");
}

int sbx_cmd_attach(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *cfg;
    cleanup_free char *state = NULL;
    unsigned rows, cols;

    if (argc != 2 || argv[1][0] == '-') {
        for (int i = 1; i < argc; i++) {
            if (argv[i][0] == '-') {
                fprintf(stderr,
                        "sbx: error: attach: unknown option '%s' (usage: sbx attach TASK)\n",
                        argv[i]);
                return SBX_EXIT_SBX;
            }
        }
        fprintf(stderr, "sbx: error: attach: %s (usage: sbx attach TASK)\n",
                argc < 2 ? "no task" : "one task, nothing more");
        return SBX_EXIT_SBX;
    }
    if (terminal_setup(cli, argv[1], &cfg, &state) < 0) {
        return SBX_EXIT_SBX;
    }
    window_size(&rows, &cols);
    return terminal(cfg, state, argv[1],
                    json_pack("{s:s, s:{s:i, s:i}}", "op", "attach", "tty", "rows", (int)rows,
                              "cols", (int)cols),
                    1, 1);
}
