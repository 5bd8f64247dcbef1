/* osb_server.h - starts the OpenSandbox contract server for CLI-level tests. */
#ifndef SBX_RT_OSB_SERVER_H
#define SBX_RT_OSB_SERVER_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pid_t osb_pid;
static int osb_port;

static inline int osb_start(void)
{
    const char *src = getenv("SBX_SOURCE_DIR");
    char *script = NULL;
    char buf[64] = {0};
    int p[2];
    ssize_t n;

    if (src == NULL || asprintf(&script, "%s/tests/contract/opensandbox_server.py", src) < 0 ||
        pipe(p) < 0) {
        return -1;
    }
    osb_pid = fork();
    if (osb_pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execlp("python3", "python3", script, "--port", "0", "--api-key", "osb-test-key",
               (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* read the whole first line: closing the pipe early would kill the
     * server with EPIPE on its newline */
    n = 0;
    while ((size_t)n < sizeof(buf) - 1 && memchr(buf, '\n', (size_t)n) == NULL) {
        ssize_t k = read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n);

        if (k <= 0) {
            break;
        }
        n += k;
    }
    close(p[0]);
    free(script);
    osb_port = n > 0 ? atoi(buf) : 0;
    setenv("OPEN_SANDBOX_API_KEY", "osb-test-key", 1);
    return osb_port > 0 ? 0 : -1;
}

static inline void osb_stop(void)
{
    if (osb_pid > 0) {
        kill(osb_pid, SIGTERM);
        waitpid(osb_pid, NULL, 0);
        osb_pid = 0;
    }
}

#endif
