/* test_proc.h - start helper processes that print a port, run shell commands, and
 * talk raw TCP on loopback (runtime tests only). */
#ifndef SBX_TEST_PROC_H
#define SBX_TEST_PROC_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

/* asprintf that aborts. */
static inline char *xasprintf_test(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *xasprintf_test(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        abort();
    }
    va_end(ap);
    return s;
}

/* Starts argv with stdout on a pipe and reads its first line as a port. */
static inline pid_t test_spawn_port(char *const argv[], int *port)
{
    int fds[2];
    pid_t pid;
    char line[32];
    FILE *f;

    if (pipe(fds) < 0) {
        abort();
    }
    pid = fork();
    if (pid < 0) {
        abort();
    }
    if (pid == 0) {
        /* Dies with the test, even when a failed assertion skips test_kill(). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    if (f == NULL || fgets(line, sizeof(line), f) == NULL || (*port = atoi(line)) <= 0) {
        fprintf(stderr, "%s did not print a port\n", argv[0]);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (f != NULL) {
            fclose(f);
        }
        return -1;
    }
    fclose(f);
    return pid;
}

static inline void test_kill(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
}

/* Runs a shell command and returns its stdout (caller frees); *status gets the exit
 * status (or -1). */
static inline char *test_run(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    char *out = NULL;
    size_t len = 0;
    size_t cap = 0;
    char buf[4096];
    size_t n;
    int st;

    if (p == NULL) {
        abort();
    }
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            out = realloc(out, cap);
            if (out == NULL) {
                abort();
            }
        }
        memcpy(out + len, buf, n);
        len += n;
    }
    if (out == NULL) {
        out = calloc(1, 1);
    }
    out[len] = '\0';
    st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return out;
}

static inline int test_connect_loopback(int port)
{
    struct sockaddr_in sin;
    struct timeval tv = {15, 0}; /* a safety net so a broken proxy fails, not hangs */
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        abort();
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

/* Reads until EOF (or the safety timeout); returns what came (caller frees). */
static inline char *test_read_all(int fd)
{
    size_t cap = 65536;
    size_t len = 0;
    char *out = malloc(cap);
    ssize_t n;

    if (out == NULL) {
        abort();
    }
    while ((n = read(fd, out + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        if (len + 1 == cap) {
            break;
        }
    }
    out[len] = '\0';
    return out;
}

/* Sends raw bytes to the relay on loopback and returns the whole reply. */
static inline char *test_raw(int port, const char *data, size_t len)
{
    int fd = test_connect_loopback(port);
    char *reply;

    if (write(fd, data, len) != (ssize_t)len) {
        abort();
    }
    reply = test_read_all(fd);
    close(fd);
    return reply;
}

#endif
