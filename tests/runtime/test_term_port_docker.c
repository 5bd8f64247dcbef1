/* test_term_port_docker.c - terminals and ports of a kept task (docs/tasks.md,
 * "Terminals" and "Ports"; docs/api.md, "Terminals and ports"):
 *  - `sbx exec -it` driven through a pty of the test's: `stty size` follows a
 *    resize, Ctrl-C interrupts a foreground `sleep` and the shell lives on, the
 *    exit status comes back, the test's terminal leaves raw mode;
 *  - a server inside (node) answers through `sbx port`, each connection is a
 *    line of <state>/logs/ports.log;
 *  - through the runner: /v1/tasks/T/ports/3000/... for the owner (bearer token
 *    not passed in), 403 for another client and for one without scope exec, and
 *    /v1/tasks/T/terminal (Upgrade: sbx-terminal.v2) runs a command on a pty;
 *  - (added) a kept session: `sbx exec -it --keep` starts it, Ctrl-\ d detaches,
 *    `sbx attach` shows the scrollback and the shell's state, follows a resize,
 *    takes the session over from another client, gets the exit status; through
 *    the runner, "keep": true and ?attach=1. */
#include "rt_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <termios.h>

#include <sbx/sbx_frame.h>

#include "serve_harness.h"
#include "wait.h"

#define NODE_SERVER                                                                                \
    "node -e 'require(\"http\").createServer((q,s)=>s.end(\"hi \"+q.url+\" \"+"                    \
    "(q.headers.authorization||\"noauth\")+\"\\n\")).listen(3000,\"127.0.0.1\")' "                 \
    ">/dev/null 2>&1 &"

/* ---- a pty of the test's ------------------------------------------------ */

struct term {
    int master;
    pid_t pid;
    char buf[65536];
    size_t len;
};

/* Reads what the terminal shows until TEXT appears after the first `from` bytes
 * (at most secs); 1 when it did. */
static int term_wait(struct term *t, size_t from, const char *text, double secs)
{
    double end = test_now() + secs;

    for (;;) {
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        ssize_t n;

        t->buf[t->len] = '\0';
        if (t->len > from && strstr(t->buf + from, text) != NULL) {
            return 1;
        }
        if (test_now() >= end) {
            return 0;
        }
        if (poll(&p, 1, 100) <= 0) {
            continue;
        }
        n = read(t->master, t->buf + t->len, sizeof(t->buf) - 1 - t->len);
        if (n <= 0) {
            return 0;
        }
        t->len += (size_t)n;
    }
}

static void term_type(struct term *t, const char *s)
{
    assert_int_equal(write(t->master, s, strlen(s)), (ssize_t)strlen(s));
}

static void term_size(struct term *t, int rows, int cols)
{
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

    assert_int_equal(ioctl(t->master, TIOCSWINSZ, &ws), 0);
}

/* sbx ARGS... on a new pty of rows x cols (NULL-terminated args). */
static void term_spawn(struct term *t, int rows, int cols, const char *const *args)
{
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

    memset(t, 0, sizeof(*t));
    t->pid = forkpty(&t->master, NULL, NULL, &ws);
    assert_true(t->pid >= 0);
    if (t->pid == 0) {
        char *env[] = {rt_host, rt_statev, "TERM=dumb", rt_config, NULL};
        char *argv[16] = {rt_sbx};

        for (int i = 0; args[i] != NULL && i < 14; i++) {
            argv[i + 1] = (char *)args[i];
        }
        execve(rt_sbx, argv, env);
        _exit(127);
    }
}

/* Waits for the sbx on t to exit (what it shows until then is read) and returns its
 * exit code. */
static int term_exit(struct term *t)
{
    int st = 0;
    pid_t got;

    do {
        struct pollfd p = {.fd = t->master, .events = POLLIN};
        ssize_t n;

        got = waitpid(t->pid, &st, WNOHANG);
        /* what it wrote, until the pty has nothing more (EIO once it is gone) */
        while (poll(&p, 1, got == 0 ? 20 : 0) > 0 && t->len < sizeof(t->buf) - 1 &&
               (n = read(t->master, t->buf + t->len, sizeof(t->buf) - 1 - t->len)) > 0) {
            t->len += (size_t)n;
        }
        t->buf[t->len] = '\0';
    } while (got == 0);
    close(t->master);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* (added) The kept session of task tp-1. */
static void kept_session(void)
{
    static const char *const keep[] = {"exec", "-it",    "--keep", "tp-1", "--",
                                       "bash", "--norc", "-i",     NULL};
    static const char *const attach[] = {"attach", "tp-1", NULL};
    struct term a;
    struct term b;
    struct term c;
    struct spawn_result r;
    size_t mark;

    term_spawn(&a, 24, 80, keep);
    if (!term_wait(&a, 0, "# ", 60)) {
        fail_msg("no prompt in the kept session; it showed:\n%s", a.buf);
    }
    term_type(&a, "export X=42; echo set$((40+2))\n");
    assert_true(term_wait(&a, 0, "set42\r\n", 30));
    /* a second session for the same task is refused */
    r = RT_SBX("exec", "-it", "--keep", "tp-1", "--", "sh");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "has a kept session already");
    spawn_result_free(&r);
    /* Ctrl-\ d: the client leaves (exit 0), the session goes on */
    term_type(&a, "\034d");
    assert_int_equal(term_exit(&a), 0);
    assert_non_null(strstr(a.buf, "detached from task tp-1's kept session"));

    /* attach: the scrollback first, then the same shell (X is still set), its size */
    term_spawn(&b, 30, 100, attach);
    if (!term_wait(&b, 0, "set42", 30)) {
        fail_msg("sbx attach showed no scrollback:\n%s", b.buf);
    }
    mark = b.len;
    term_type(&b, "echo X=$X; stty size\n");
    if (!term_wait(&b, mark, "X=42\r\n30 100\r\n", 30)) {
        fail_msg("the attached shell lost its state or size:\n%s", b.buf + mark);
    }
    /* Ctrl-\ then another key sends both (cat -v shows them, ISIG off for it) */
    mark = b.len;
    term_type(&b, "stty -isig; echo R$((1+1)); cat -v; stty isig\n");
    assert_true(term_wait(&b, mark, "R2\r\n", 30));
    term_type(&b, "\034x\n\004");
    if (!term_wait(&b, mark, "^\\x\r\n", 30)) {
        fail_msg("Ctrl-\\ x did not reach the session as two bytes:\n%s", b.buf + mark);
    }
    /* a resize follows (SIGWINCH to sbx, then to the shell inside) */
    term_size(&b, 41, 132);
    mark = b.len;
    for (int i = 3; !term_wait(&b, mark, "41 132\r\n", 1); i++) {
        if (i > 60) {
            fail_msg("stty size never said 41 132 after the resize:\n%s", b.buf + mark);
        }
        term_type(&b, "stty size\n");
    }
    /* another client takes the session over; the first is told and exits 0 */
    term_spawn(&c, 24, 80, attach);
    assert_int_equal(term_exit(&b), 0);
    assert_non_null(strstr(b.buf, "another client attached to the session"));
    assert_true(term_wait(&c, 0, "41 132", 30)); /* its scrollback */
    /* the session ends with its shell: its status to the client attached */
    term_type(&c, "exit 3\n");
    assert_int_equal(term_exit(&c), 3);
    r = RT_SBX("attach", "tp-1");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "has no kept session (the last one ended with status 3)");
    spawn_result_free(&r);
    r = RT_SBX("exec", "--keep", "tp-1", "--", "sh");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "--keep goes with -it");
    spawn_result_free(&r);
}

static void test_exec_it(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", "tp-1");
    struct term t = {0};
    struct winsize ws = {.ws_row = 30, .ws_col = 100};
    struct termios tio;
    size_t mark;
    int st = 0;

    (void)state;
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    t.pid = forkpty(&t.master, NULL, NULL, &ws);
    assert_true(t.pid >= 0);
    if (t.pid == 0) {
        char *env[] = {rt_host, rt_statev, "TERM=dumb", NULL};

        execle(rt_sbx, rt_sbx, "exec", "-it", "tp-1", "--", "bash", "--norc", "-i", (char *)NULL,
               env);
        _exit(127);
    }
    /* the size the terminal started with (typed once the shell prompts: bash drops
     * what was typed before it set its terminal up) */
    if (!term_wait(&t, 0, "# ", 60)) {
        fail_msg("no prompt on the terminal; it showed:\n%s", t.buf);
    }
    term_type(&t, "stty size; echo M$((1+1))\n");
    if (!term_wait(&t, 0, "M2\r\n", 60)) {
        fail_msg("no shell on the terminal; it showed:\n%s", t.buf);
    }
    assert_non_null(strstr(t.buf, "30 100\r\n"));
    /* a resize reaches the terminal inside (SIGWINCH to sbx, then the keeper) */
    term_size(&t, 41, 132);
    mark = t.len;
    for (int i = 3; !term_wait(&t, mark, "41 132\r\n", 1); i++) {
        char cmd[64];

        if (i > 60) {
            fail_msg("stty size never said 41 132 after the resize:\n%s", t.buf + mark);
        }
        snprintf(cmd, sizeof(cmd), "stty size; echo M$((%d+1))\n", i);
        term_type(&t, cmd);
    }
    /* Ctrl-C goes to the foreground process group inside: sleep ends, bash stays */
    mark = t.len;
    /* S5 is printed by the job itself, so the job is the foreground group by then
     * (a Ctrl-C between bash's fork and its tcsetpgrp would race bash itself) */
    term_type(&t, "sh -c 'echo S$((4+1)); exec sleep 300'\n");
    assert_true(term_wait(&t, mark, "S5\r\n", 30));
    mark = t.len;
    term_type(&t, "\003");
    term_type(&t, "echo alive$((6*7))\n");
    if (!term_wait(&t, mark, "alive42", 60)) {
        fail_msg("Ctrl-C did not interrupt sleep, or the shell died:\n%s", t.buf + mark);
    }
    /* the exit status of the command, and the terminal back from raw mode */
    term_type(&t, "exit 7\n");
    term_wait(&t, t.len, "never", 5);
    assert_int_equal(waitpid(t.pid, &st, 0), t.pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 7);
    assert_int_equal(tcgetattr(t.master, &tio), 0);
    assert_true((tio.c_lflag & (ICANON | ECHO | ISIG)) == (ICANON | ECHO | ISIG));
    close(t.master);
    kept_session();

    /* -it with --json is refused, as is a task that does not run */
    r = RT_SBX("exec", "-it", "tp-1", "--json", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "--json cannot go with a terminal");
    spawn_result_free(&r);
    r = RT_SBX("exec", "-it", "no-such", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "no running task 'no-such'");
    spawn_result_free(&r);
}

/* ---- HTTP on loopback ---------------------------------------------------- */

static int tcp_connect(int port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends req to 127.0.0.1:port and returns all it answered until EOF (malloc'd), or NULL. */
static char *http_raw(int port, const char *req)
{
    int fd = tcp_connect(port);
    struct timeval tv = {30, 0};
    char *out = calloc(1, 65536);
    size_t n = 0;
    ssize_t k;

    if (fd < 0) {
        free(out);
        return NULL;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        free(out);
        return NULL;
    }
    while (n < 65535 && (k = read(fd, out + n, 65535 - n)) > 0) {
        n += (size_t)k;
    }
    close(fd);
    return out;
}

static int has_text(char **got, int port, const char *req, const char *text)
{
    free(*got);
    *got = http_raw(port, req);
    return *got != NULL && strstr(*got, text) != NULL;
}

/* (added) The first line of ports.log from VIA that was allowed and counted bytes
 * (bytes_out > 0), or NULL. */
static json_t *counted_line(const char *path, const char *via)
{
    FILE *f = fopen(path, "r");
    char line[4096];
    json_t *found = NULL;

    while (f != NULL && found == NULL && fgets(line, sizeof(line), f) != NULL) {
        json_t *j = json_loads(line, 0, NULL);

        if (strcmp(json_string_value(json_object_get(j, "via")) ?: "", via) == 0 &&
            strcmp(json_string_value(json_object_get(j, "decision")) ?: "", "allow") == 0 &&
            json_integer_value(json_object_get(j, "bytes_out")) > 0) {
            found = j;
        }
        else {
            json_decref(j);
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return found;
}

static void test_port_forward(void **state)
{
    struct spawn_result r;
    char *argv[] = {rt_sbx, "port", "tp-1", "3000", NULL};
    char *env[] = {rt_host, rt_statev, NULL};
    char logp[512];
    char line[128] = "";
    char *got = NULL;
    int out[2];
    pid_t pid;
    int lport = 0;
    json_t *j = NULL;
    FILE *f;

    (void)state;
    r = RT_SBX("exec", "tp-1", "--", "sh", "-c", NODE_SERVER);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(pipe(out), 0);
    pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        execve(rt_sbx, argv, env);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    assert_non_null(fgets(line, sizeof(line), f));
    assert_int_equal(sscanf(line, "127.0.0.1:%d", &lport), 1);
    /* the server may still be starting: asked until it answers */
    wait_until(has_text(&got, lport, "GET /x/y?z=1 HTTP/1.0\r\n\r\n", "hi /x/y?z=1 noauth"), 60,
               NULL, "the server inside through sbx port (last: %s)", got ? got : "(none)");
    /* one line per connection, like the egress log, written when it ends: (added)
     * the bytes each way (the request in, exactly what the client got out) and
     * how long it lasted */
    snprintf(logp, sizeof(logp), "%s/logs/ports.log", rt_state);
    wait_until((j = counted_line(logp, "sbx port")) != NULL, 30, NULL,
               "a ports.log line with the bytes of sbx port's connection");
    assert_int_equal(json_integer_value(json_object_get(j, "bytes_in")), 25);
    assert_int_equal(json_integer_value(json_object_get(j, "bytes_out")), (json_int_t)strlen(got));
    assert_true(json_is_real(json_object_get(j, "duration")));
    json_decref(j);
    free(got);

    assert_true(test_file_has(logp, "\"task\":\"tp-1\""));
    assert_true(test_file_has(logp, "\"port\":3000,\"peer\":\"127.0.0.1:"));
    assert_true(test_file_has(logp, "\"via\":\"sbx port\",\"decision\":\"allow\""));

    /* a bad port, a listen address off loopback */
    r = RT_SBX("port", "tp-1", "70000");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "is not a port");
    spawn_result_free(&r);
    r = RT_SBX("port", "tp-1", "3000", "--listen", "0.0.0.0:0");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "must be a loopback address");
    spawn_result_free(&r);
    {
        /* (added) a connection still open through sbx port (HTTP keep-alive) does not
         * hold the task's end: the keeper stops waiting for its counts */
        int held = tcp_connect(lport);
        const char req[] = "GET /k HTTP/1.1\r\nHost: t\r\n\r\n";
        char buf[512];
        size_t n = 0;
        ssize_t k;

        assert_true(held >= 0);
        assert_int_equal(write(held, req, strlen(req)), (ssize_t)strlen(req));
        while (n < sizeof(buf) - 1 && (k = read(held, buf + n, sizeof(buf) - 1 - n)) > 0) {
            n += (size_t)k;
            buf[n] = '\0';
            if (strstr(buf, "hi /k") != NULL) {
                break;
            }
        }
        assert_non_null(strstr(buf, "hi /k"));
        r = RT_SBX("task", "end", "tp-1");
        assert_int_equal(r.rc, 0);
        spawn_result_free(&r);
        close(held);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    fclose(f);
}

/* ---- through the runner -------------------------------------------------- */

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static char *api(int port, const char *method, const char *path, const char *tok, const char *body)
{
    char req[4096];

    snprintf(req, sizeof(req),
             "%s %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\nConnection: close\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
             method, path, tok, body ? strlen(body) : 0, body ? body : "");
    return http_raw(port, req);
}

static void frame(int fd, char type, const char *data, size_t len)
{
    unsigned char h[SBX_FRAME_HDR];

    sbx_frame_encode(h, (unsigned char)type, (uint32_t)len);
    assert_int_equal(write(fd, h, sizeof(h)), (ssize_t)sizeof(h));
    assert_int_equal(write(fd, data, len), (ssize_t)len);
}

/* (added) The runner's terminal of tp-api (path after /terminal: "" or "?attach=1"):
 * the connection after the 101, R frame req sent. */
static int api_terminal(int port, const char *query, const char *req)
{
    char buf[1024];
    size_t n = 0;
    struct timeval tv = {60, 0};
    int fd = tcp_connect(port);

    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    snprintf(buf, sizeof(buf),
             "GET /v1/tasks/tp-api/terminal%s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
             "tp-token-a-0123456789abcdef\r\nConnection: Upgrade\r\nUpgrade: sbx-terminal.v2"
             "\r\n\r\n",
             query);
    assert_int_equal(write(fd, buf, strlen(buf)), (ssize_t)strlen(buf));
    while (n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) != 0) {
        assert_true(n < sizeof(buf) - 1);
        assert_int_equal(read(fd, buf + n, 1), 1);
        n++;
    }
    buf[n] = '\0';
    assert_contains(buf, "101 Switching Protocols");
    frame(fd, 'R', req, strlen(req));
    return fd;
}

/* Reads the frames of fd until an 'O' has shown `text` (*x: NULL) or an 'X' came
 * (*x: its JSON, malloc'd); 1 when text was seen. */
static int frames_until(int fd, const char *text, char **x)
{
    char out[65536];
    size_t olen = 0;

    *x = NULL;
    for (;;) {
        unsigned char h[SBX_FRAME_HDR];
        unsigned char t;
        uint32_t len;
        char *data;

        if (read(fd, h, 1) != 1 || recv(fd, h + 1, 7, MSG_WAITALL) != 7) {
            return 0;
        }
        assert_int_equal(sbx_frame_decode(h, 1u << 20, &t, &len), SBX_FRAME_OK);
        data = calloc(1, len + 1);
        assert_true(len == 0 || recv(fd, data, len, MSG_WAITALL) == (ssize_t)len);
        if (h[0] == 'X') {
            *x = data;
            return 0;
        }
        if (h[0] == 'O') {
            size_t k = len < sizeof(out) - 1 - olen ? len : sizeof(out) - 1 - olen;

            memcpy(out + olen, data, k);
            olen += k;
            out[olen] = '\0';
        }
        free(data);
        if (strstr(out, text) != NULL) {
            return 1;
        }
    }
}

/* (added) The runner's kept session of tp-api: "keep" starts it, a closed connection
 * leaves it, ?attach=1 comes back (scrollback, the shell's state), the exit status. */
static void api_kept_session(int port)
{
    char *x = NULL;
    char *body;
    int fd;

    fd = api_terminal(port, "", "{\"argv\":[\"sh\"],\"keep\":true,\"tty\":true}");
    if (!frames_until(fd, "# ", &x)) { /* typed once the shell prompts */
        fail_msg("no prompt in the runner's kept session: %s", x ? x : "(closed)");
    }
    frame(fd, 'I', "Y=7; echo a$((Y*6))\n", 20);
    if (!frames_until(fd, "a42\r\n", &x)) {
        fail_msg("the runner's kept session: %s", x ? x : "(closed)");
    }
    close(fd); /* detached: the session goes on */
    fd = api_terminal(port, "?attach=1", "{\"tty\":{\"rows\":20,\"cols\":70}}");
    assert_true(frames_until(fd, "a42", &x)); /* the scrollback */
    frame(fd, 'I', "echo b$Y; stty size; exit 6\n", 28);
    assert_true(frames_until(fd, "b7\r\n20 70\r\n", &x));
    assert_false(frames_until(fd, "\001never", &x));
    assert_non_null(x);
    assert_string_equal(x, "{\"status\":6}");
    free(x);
    close(fd);
    fd = api_terminal(port, "?attach=1", "{}");
    assert_false(frames_until(fd, "\001never", &x));
    assert_non_null(x);
    assert_non_null(strstr(x, "has no kept session (the last one ended with status 6)"));
    free(x);
    close(fd);
    body =
        api(port, "GET", "/v1/tasks/tp-api/terminal?attach=2", "tp-token-a-0123456789abcdef", NULL);
    assert_contains(body, "400");
    assert_contains(body, "the only query is attach=1");
    free(body);
}

static void test_runner_ports_and_terminal(void **state)
{
    int port = free_port();
    char cfg[1024];
    char path[128];
    char *got = NULL;
    char *body;
    int fd;
    char buf[65536];
    size_t n = 0;
    ssize_t k;
    struct timeval tv = {60, 0};

    (void)state;
    setenv("TP_TOK_A", "tp-token-a-0123456789abcdef", 1);
    setenv("TP_TOK_B", "tp-token-b-0123456789abcdef", 1);
    setenv("TP_TOK_C", "tp-token-c-0123456789abcdef", 1);
    snprintf(cfg, sizeof(cfg),
             "limits = { cpus = 0.5; memory = \"256M\"; idle = \"1h\"; };\n"
             "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = (\n"
             " { name = \"a\"; token_env = \"TP_TOK_A\"; scopes = [\"submit\", \"read-own\", "
             "\"exec\"]; },\n"
             " { name = \"b\"; token_env = \"TP_TOK_B\"; scopes = [\"submit\", \"read-all\", "
             "\"cancel-any\"]; },\n"
             " { name = \"c\"; token_env = \"TP_TOK_C\"; scopes = [\"submit\", \"exec\"]; }\n"
             "); };\n",
             port);
    rt_use_config(cfg);
    serve_start();
    snprintf(path, sizeof(path), "%s/serve.log", rt_state);
    {
        json_t *j = json_pack("{s:[s,s,s], s:s, s:s}", "argv", "sh", "-c",
                              NODE_SERVER " echo started", "pool", "agent", "task", "tp-api");
        char *s = json_dumps(j, JSON_COMPACT);

        body = api(port, "POST", "/v1/jobs", "tp-token-a-0123456789abcdef", s);
        free(s);
        json_decref(j);
    }
    assert_non_null(body);
    assert_contains(body, "201");
    free(body);
    /* the owner: the request reaches the server inside, without its token */
    wait_until(has_text(&got, port,
                        "GET /v1/tasks/tp-api/ports/3000/p?q=2 HTTP/1.1\r\nHost: t\r\n"
                        "Authorization: Bearer tp-token-a-0123456789abcdef\r\n\r\n",
                        "hi /p?q=2 noauth"),
               120, path, "the preview through the runner (last: %s)", got ? got : "(none)");
    assert_contains(got, "Content-Security-Policy: sandbox");
    free(got);
    got = NULL;
    {
        /* (added) the runner counts what it relayed (the server's reply; the client
         * also got the preview's CSP header) */
        json_t *j = NULL;
        char logp[512];

        snprintf(logp, sizeof(logp), "%s/logs/ports.log", rt_state);
        wait_until((j = counted_line(logp, "api client a")) != NULL, 30, NULL,
                   "a ports.log line with the bytes of the runner's connection");
        assert_true(json_integer_value(json_object_get(j, "bytes_in")) > 0);
        assert_true(json_is_real(json_object_get(j, "duration")));
        json_decref(j);
    }
    /* another client, even with read-all and cancel-any; one without exec; no token */
    body = api(port, "GET", "/v1/tasks/tp-api/ports/3000/", "tp-token-c-0123456789abcdef", NULL);
    assert_contains(body, "403");
    assert_contains(body, "belongs to another client");
    free(body);
    body = api(port, "GET", "/v1/tasks/tp-api/ports/3000/", "tp-token-b-0123456789abcdef", NULL);
    assert_contains(body, "403");
    assert_contains(body, "lacks scope 'exec'");
    free(body);
    body = http_raw(port, "GET /v1/tasks/tp-api/ports/3000/ HTTP/1.0\r\n\r\n");
    assert_contains(body, "401");
    free(body);
    body = api(port, "GET", "/v1/tasks/tp-api/ports/3999/", "tp-token-a-0123456789abcdef", NULL);
    assert_contains(body, "502");
    assert_contains(body, "nothing listens on 127.0.0.1:3999");
    free(body);
    snprintf(path, sizeof(path), "%s/logs/ports.log", rt_state);
    assert_true(test_file_has(path, "\"via\":\"api client a\""));

    /* (added, issue 31) sbx-port.v1: one raw connection (what `sbx port` sends to a
     * keeper's runner); a path after the port is refused, nothing listening is a 502 */
    body = http_raw(port, "GET /v1/tasks/tp-api/ports/3000/x HTTP/1.0\r\nHost: t\r\n"
                          "Authorization: Bearer tp-token-a-0123456789abcdef\r\nConnection: "
                          "Upgrade\r\nUpgrade: sbx-port.v1\r\n\r\n");
    assert_contains(body, "400");
    assert_contains(body, "sbx-port.v1 is GET /v1/tasks/ID/ports/PORT");
    free(body);
    body = http_raw(port, "GET /v1/tasks/tp-api/ports/3999 HTTP/1.0\r\nHost: t\r\n"
                          "Authorization: Bearer tp-token-a-0123456789abcdef\r\nConnection: "
                          "Upgrade\r\nUpgrade: sbx-port.v1\r\n\r\n");
    assert_contains(body, "502");
    assert_contains(body, "nothing listens on 127.0.0.1:3999");
    free(body);
    fd = tcp_connect(port);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    snprintf(buf, sizeof(buf),
             "GET /v1/tasks/tp-api/ports/3000 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
             "tp-token-a-0123456789abcdef\r\nConnection: Upgrade\r\nUpgrade: sbx-port.v1\r\n\r\n");
    assert_int_equal(write(fd, buf, strlen(buf)), (ssize_t)strlen(buf));
    n = 0;
    while (n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) != 0) {
        assert_int_equal(read(fd, buf + n, 1), 1);
        n++;
    }
    buf[n] = '\0';
    assert_contains(buf, "101 Switching Protocols");
    /* the server's own bytes, no header added */
    snprintf(buf, sizeof(buf), "GET /raw HTTP/1.0\r\nHost: t\r\n\r\n");
    assert_int_equal(write(fd, buf, strlen(buf)), (ssize_t)strlen(buf));
    n = 0;
    while (n < sizeof(buf) - 1 && (k = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0) {
        n += (size_t)k;
    }
    buf[n] = '\0';
    close(fd);
    assert_contains(buf, "hi /raw noauth");
    assert_null(strstr(buf, "Content-Security-Policy"));
    n = 0;
    /* sbx-archive.v1 (`sbx cp`): an upgrade only, the owner's alone */
    body = http_raw(port, "GET /v1/tasks/tp-api/archive HTTP/1.0\r\nHost: t\r\n"
                          "Authorization: Bearer tp-token-a-0123456789abcdef\r\n\r\n");
    assert_contains(body, "426");
    assert_contains(body, "sbx-archive.v1");
    free(body);
    body = http_raw(port, "GET /v1/tasks/tp-api/archive HTTP/1.0\r\nHost: t\r\n"
                          "Authorization: Bearer tp-token-c-0123456789abcdef\r\nConnection: "
                          "Upgrade\r\nUpgrade: sbx-archive.v1\r\n\r\n");
    assert_contains(body, "403");
    free(body);

    /* (changed) sbx-terminal.v1 spoke 5-byte frame headers: refused, naming v2 */
    body = http_raw(port, "GET /v1/tasks/tp-api/terminal HTTP/1.0\r\nHost: t\r\nAuthorization: "
                          "Bearer tp-token-a-0123456789abcdef\r\nConnection: Upgrade\r\nUpgrade: "
                          "sbx-terminal.v1\r\n\r\n");
    assert_contains(body, "426");
    assert_contains(body, "sbx-terminal.v1 (5-byte frame headers) was replaced by sbx-terminal.v2");
    free(body);

    /* the terminal: upgrade, then the keeper's frames */
    fd = tcp_connect(port);
    assert_true(fd >= 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    snprintf(buf, sizeof(buf),
             "GET /v1/tasks/tp-api/terminal HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
             "tp-token-a-0123456789abcdef\r\nConnection: Upgrade\r\nUpgrade: sbx-terminal.v2"
             "\r\n\r\n");
    assert_int_equal(write(fd, buf, strlen(buf)), (ssize_t)strlen(buf));
    while (n < 4 || memcmp(buf + n - 4, "\r\n\r\n", 4) != 0) {
        assert_int_equal(read(fd, buf + n, 1), 1);
        n++;
    }
    buf[n] = '\0';
    assert_contains(buf, "101 Switching Protocols");
    {
        const char req[] = "{\"argv\":[\"sh\",\"-c\",\"stty size; exit 3\"],"
                           "\"tty\":{\"rows\":20,\"cols\":70}}";

        frame(fd, 'R', req, strlen(req));
    }
    n = 0;
    while (n < sizeof(buf) - 1 && (k = read(fd, buf + n, sizeof(buf) - 1 - n)) > 0) {
        n += (size_t)k;
    }
    buf[n] = '\0';
    close(fd);
    /* 'O' frames with the output, then 'X' with the status */
    assert_true(memmem(buf, n, "20 70\r\n", 7) != NULL);
    assert_true(memmem(buf, n, "{\"status\":3}", 12) != NULL);
    api_kept_session(port);

    /* sbx exec -it with runner.listen: the runner's terminal, for a task of the
     * unix socket's client (local) */
    {
        struct spawn_result sr =
            RT_SBX("submit", "--pool", "agent", "--task", "tp-local", "--", "true");
        struct term t = {0};
        struct winsize ws = {.ws_row = 27, .ws_col = 91};
        int st = 0;

        assert_int_equal(sr.rc, 0);
        spawn_result_free(&sr);
        t.pid = forkpty(&t.master, NULL, NULL, &ws);
        assert_true(t.pid >= 0);
        if (t.pid == 0) {
            char *env[] = {rt_host, rt_statev, rt_config, NULL};

            /* the task may still be starting: asked again until it runs */
            for (int i = 0; i < 120; i++) {
                pid_t c = fork();
                int cst = 0;

                if (c == 0) {
                    execle(rt_sbx, rt_sbx, "exec", "-it", "tp-local", "--", "sh", "-c",
                           "stty size; exit 4", (char *)NULL, env);
                    _exit(127);
                }
                waitpid(c, &cst, 0);
                if (!WIFEXITED(cst) || WEXITSTATUS(cst) != 125) {
                    _exit(WIFEXITED(cst) ? WEXITSTATUS(cst) : 99);
                }
                usleep(500 * 1000);
            }
            _exit(98);
        }
        if (!term_wait(&t, 0, "27 91\r\n", 120)) {
            fail_msg("sbx exec -it through the runner showed:\n%s", t.buf);
        }
        term_wait(&t, t.len, "never", 2);
        assert_int_equal(waitpid(t.pid, &st, 0), t.pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 4);
        close(t.master);
    }
    {
        /* (added) sbx exec -it --keep and sbx attach with runner.listen: the runner's
         * kept session (?attach=1) */
        static const char *const keep[] = {"exec", "-it", "--keep", "tp-local", "--", "sh", NULL};
        static const char *const attach[] = {"attach", "tp-local", NULL};
        struct term t;

        term_spawn(&t, 24, 80, keep);
        /* typed once the shell prompts (what comes before may be dropped) */
        if (!term_wait(&t, 0, "# ", 60)) {
            fail_msg("no prompt in the runner's kept session:\n%s", t.buf);
        }
        term_type(&t, "Z=5; echo z$((Z*9))\n");
        if (!term_wait(&t, 0, "z45\r\n", 60)) {
            fail_msg("the runner's kept session through sbx showed:\n%s", t.buf);
        }
        term_type(&t, "\034d");
        assert_int_equal(term_exit(&t), 0);
        term_spawn(&t, 24, 80, attach);
        assert_true(term_wait(&t, 0, "z45", 60));
        term_type(&t, "exit $((Z+1))\n");
        assert_int_equal(term_exit(&t), 6);
    }
    serve_stop_show_log(30);
}

/* A failed test leaves no runner behind (its sandboxes would outlive the test). */
static int teardown(void **state)
{
    serve_kill(SIGTERM);
    return rt_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exec_it),
        cmocka_unit_test(test_port_forward),
        cmocka_unit_test(test_runner_ports_and_terminal),
    };

    return cmocka_run_group_tests(tests, rt_setup, teardown);
}
