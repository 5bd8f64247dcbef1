/* agent.c - the exec agent inside a Docker sandbox (sbx-relay --agent PATH).
 *
 * Connects to the host's socket PATH (in a read-only host directory) once and
 * reads exec requests from it (wire format: sbx/sbx_agent_proto.h). The agent
 * has no listening socket: processes in the sandbox cannot ask it for
 * anything. The command is forked from the agent, which the engine started
 * as the sandbox's entrypoint: it has the entrypoint's user, cgroup,
 * capabilities, no_new_privs, seccomp filter and environment, which is what
 * `docker exec` gives. Each command is looked after by its own process, on
 * the channel the host passed with the request. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx/sbx_agent_proto.h"
#include "sbx/sbx_frame.h"

#include "agent.h"
#include "attr.h"

extern char **environ;

static int chld_pipe[2] = {-1, -1};

static void on_chld(int sig)
{
    int e = errno;
    char one = 1;

    (void)sig;
    if (write(chld_pipe[1], &one, 1) < 0) {
        /* already pending */
    }
    errno = e;
}

static uint32_t get32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static int send_rec(int fd, char type, int32_t v)
{
    unsigned char r[SBX_AGENT_REC];

    sbx_frame_encode(r, (unsigned char)type, (uint32_t)v); /* a value, no payload */
    return send(fd, r, sizeof(r), MSG_NOSIGNAL) == (ssize_t)sizeof(r) ? 0 : -1;
}

static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = read(fd, p, n);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* The environment for the command: ours (the sandbox's, as the engine set it
 * for the entrypoint) with the request's variables replacing or added. */
static char **merge_env(char **base, char **req, uint32_t n)
{
    size_t nb = 0;
    char **out;
    size_t k = 0;

    while (base[nb] != NULL) {
        nb++;
    }
    out = calloc(nb + n + 1, sizeof(char *));
    if (out == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < nb; i++) {
        out[k++] = base[i];
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strcspn(req[i], "=");
        size_t j;

        for (j = 0; j < k; j++) {
            if (strncmp(out[j], req[i], len) == 0 && out[j][len] == '=') {
                out[j] = req[i];
                break;
            }
        }
        if (j == k) {
            out[k++] = req[i];
        }
    }
    return out;
}

static void child(int fds[3], const char *cwd, char **argv, char **env, int errfd)
{
    struct sigaction sa;
    sigset_t none;
    int e;

    setsid();
    for (int i = 0; i < 3; i++) {
        if (dup2(fds[i], i) < 0) {
            goto fail;
        }
    }
    /* (added) a terminal (`sbx exec -it`): the host's pty slave becomes the
     * controlling terminal of this new session, so Ctrl-C and SIGWINCH reach
     * its foreground process group */
    if (isatty(0) && ioctl(0, TIOCSCTTY, 0) < 0) {
        goto fail;
    }
    /* what the entrypoint's children get: default dispositions, no mask */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++) {
        sigaction(s, &sa, NULL);
    }
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (chdir(cwd) < 0) {
        goto fail;
    }
    environ = env;
    execvp(argv[0], argv);
fail:
    e = errno;
    if (write(errfd, &e, sizeof(e)) < 0) {
        _exit(127);
    }
    _exit(127);
}

/* Reads one request from the control connection: 0 with fds[4] and the
 * strings (strs[0] the working directory, strs+1 argv, *envp env), 1 EOF,
 * -1 malformed (the connection is dropped). */
static int read_request(int ctlfd, int fds[4], char **payloadp, size_t *lenp, char ***strsp,
                        char ***envp, uint32_t *envcp)
{
    unsigned char hdr[SBX_AGENT_HDR];
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {hdr, sizeof(hdr)};
    struct msghdr msg = {0};
    struct cmsghdr *cm;
    uint32_t len;
    uint32_t argc;
    uint32_t envc;
    char *payload;
    char **strs;
    char *p;
    char *end;
    ssize_t n;

    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    do {
        n = recvmsg(ctlfd, &msg, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    } while (n < 0 && errno == EINTR);
    if (n == 0) {
        return 1;
    }
    cm = CMSG_FIRSTHDR(&msg);
    if (cm != NULL && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(4 * sizeof(int))) {
        memcpy(fds, CMSG_DATA(cm), 4 * sizeof(int));
    }
    if (n != (ssize_t)sizeof(hdr) || fds[3] < 0 || get32(hdr) != SBX_AGENT_MAGIC ||
        get32(hdr + 4) != SBX_AGENT_VERSION) {
        return -1;
    }
    len = get32(hdr + 8);
    if (len < 9 || len > SBX_AGENT_PAYLOAD_MAX || (payload = malloc(len + 1)) == NULL ||
        read_full(ctlfd, payload, len) < 0) {
        return -1;
    }
    payload[len] = '\0';
    argc = get32((unsigned char *)payload);
    envc = get32((unsigned char *)payload + 4);
    if (argc == 0 || argc > SBX_AGENT_STRINGS_MAX || envc > SBX_AGENT_STRINGS_MAX ||
        (strs = calloc(1 + argc + 1 + envc + 1, sizeof(char *))) == NULL) {
        free(payload);
        return -1;
    }
    /* strings: cwd, argv..., env...; each NUL-terminated inside the payload.
     * argv is strs[1..argc], then NULL at strs[argc+1]; env after it */
    p = payload + 8;
    end = payload + len;
    for (uint32_t i = 0; i < 1 + argc + envc; i++) {
        char *z = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;

        if (z == NULL) {
            explicit_bzero(payload, len);
            free(strs);
            free(payload);
            return -1;
        }
        strs[i <= argc ? i : i + 1] = p;
        p = z + 1;
    }
    *payloadp = payload;
    *lenp = len;
    *strsp = strs;
    *envp = strs + argc + 2;
    *envcp = envc;
    return 0;
}

/* Runs one command and reports on its channel c; runs in its own process. exec_id
 * ("SBX_EXEC_ID=ID") goes into its environment, and (pid, ID) into the table the relay
 * reads to name the exec of each connection (attr.c). */
static void serve_one(int c, int fds[3], char **strs, char **req_env, uint32_t envc,
                      char **base_env, char *exec_id)
{
    char **env;
    int ep[2];
    pid_t pid;
    int e = 0;
    ssize_t n;

    env = merge_env(base_env, req_env, envc);
    if (env != NULL) {
        char **with_id = merge_env(env, &exec_id, 1);

        free(env);
        env = with_id;
    }
    if (env == NULL || pipe2(ep, O_CLOEXEC) < 0) {
        send_rec(c, 'F', ENOMEM);
        _exit(1);
    }
    signal(SIGCHLD, SIG_DFL);
    pid = fork();
    if (pid < 0) {
        send_rec(c, 'F', errno);
        _exit(1);
    }
    if (pid == 0) {
        close(ep[0]);
        child(fds, strs[0], strs + 1, env, ep[1]);
    }
    /* named before the command can connect anywhere */
    sbx_attr_set(pid, exec_id + strlen("SBX_EXEC_ID="));
    close(ep[1]);
    for (int i = 0; i < 3; i++) {
        close(fds[i]);
    }
    /* the exec either succeeded (EOF: the pipe was close-on-exec) or said why not */
    while ((n = read(ep[0], &e, sizeof(e))) < 0 && errno == EINTR) {
    }
    close(ep[0]);
    if (n == (ssize_t)sizeof(e)) {
        waitpid(pid, NULL, 0);
        sbx_attr_clear(pid);
        send_rec(c, 'F', e);
        _exit(0);
    }
    if (pipe2(chld_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        kill(-pid, SIGKILL);
        _exit(1);
    }
    {
        struct sigaction sa = {0};

        sa.sa_handler = on_chld;
        sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
        sigaction(SIGCHLD, &sa, NULL);
    }
    if (send_rec(c, 'P', (int32_t)pid) < 0) {
        kill(-pid, SIGKILL);
    }
    for (;;) {
        struct pollfd pf[2] = {{.fd = c, .events = POLLIN}, {.fd = chld_pipe[0], .events = POLLIN}};
        int st = 0;
        unsigned char rec[SBX_AGENT_REC];

        if (waitpid(pid, &st, WNOHANG) == pid) {
            sbx_attr_clear(pid);
            send_rec(c, 'X', WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            _exit(0);
        }
        if (poll(pf, 2, -1) < 0) {
            continue;
        }
        if (pf[1].revents != 0) {
            char drain[16];

            while (read(chld_pipe[0], drain, sizeof(drain)) > 0) {
            }
        }
        if (pf[0].revents != 0) {
            if (read_full(c, rec, sizeof(rec)) < 0) {
                /* the host went away: the command goes with it */
                kill(-pid, SIGKILL);
                waitpid(pid, NULL, 0);
                sbx_attr_clear(pid);
                _exit(0);
            }
            unsigned char t;
            uint32_t u;

            if (sbx_frame_decode(rec, UINT32_MAX, &t, &u) == SBX_FRAME_OK && t == 'K') {
                int sig = (int)u;

                kill(-pid, sig > 0 && sig < NSIG ? sig : SIGKILL);
            }
        }
    }
}

void sbx_agent_run(const char *path)
{
    struct sockaddr_un sun;
    char **base_env;
    size_t n = 0;
    int ctlfd = -1;
    unsigned long execs = 0;

    prctl(PR_SET_PDEATHSIG, SIGTERM);
    /* command processes are reaped by the kernel; each reaps its command */
    signal(SIGCHLD, SIG_IGN);
    while (environ[n] != NULL) {
        n++;
    }
    base_env = calloc(n + 1, sizeof(char *));
    if (base_env == NULL) {
        _exit(1);
    }
    memcpy(base_env, environ, n * sizeof(char *));
    if (strlen(path) >= sizeof(sun.sun_path)) {
        fprintf(stderr, "sbx-relay: --agent '%s' is too long\n", path);
        _exit(2);
    }
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    strcpy(sun.sun_path, path);
    /* the host listens before the sandbox is created: one try is enough */
    ctlfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ctlfd < 0 || connect(ctlfd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        fprintf(stderr, "sbx-relay: agent: cannot connect to %s: %s (execs use the engine)\n", path,
                strerror(errno));
        _exit(1);
    }
    for (;;) {
        int fds[4] = {-1, -1, -1, -1};
        char *payload = NULL;
        char **strs = NULL;
        char **req_env = NULL;
        uint32_t envc = 0;
        size_t payload_len = 0;
        int r = read_request(ctlfd, fds, &payload, &payload_len, &strs, &req_env, &envc);
        char exec_id[sizeof("SBX_EXEC_ID=") + SBX_ATTR_ID_MAX];
        pid_t pid;

        if (r != 0) {
            if (r < 0) {
                fprintf(stderr, "sbx-relay: agent: malformed request from the host\n");
            }
            _exit(r < 0 ? 1 : 0);
        }
        /* the sandbox's agent numbers its commands: with the task and job of the log
         * line, "exec-N" names one command */
        snprintf(exec_id, sizeof(exec_id), "SBX_EXEC_ID=exec-%lu", ++execs);
        pid = fork();
        if (pid == 0) {
            close(ctlfd);
            signal(SIGCHLD, SIG_DFL);
            serve_one(fds[3], fds, strs, req_env, envc, base_env, exec_id);
            _exit(0);
        }
        if (pid < 0) {
            send_rec(fds[3], 'F', errno);
        }
        for (int i = 0; i < 4; i++) {
            close(fds[i]);
        }
        /* the request may hold secret values (credentials): no copy stays */
        explicit_bzero(payload, payload_len);
        free(strs);
        free(payload);
    }
}
