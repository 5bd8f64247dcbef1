/* docker_pid.c - signalling a sandbox's process by the pid the engine reports
 * (docker_pid.h). The engine has no API to signal an exec, so a cancelled exec is
 * killed by its pid; this makes sure that pid is the sandbox's. */
#include "docker_pid.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pid_ns(const char *pid, struct stat *st)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%s/ns/pid", pid);
    return stat(path, st);
}

int dk_signal_sandbox_pid(pid_t pid, pid_t init_pid, int sig)
{
    char p[24];
    char i[24];
    struct stat self;
    struct stat of_pid;
    struct stat of_init;
    int fd;
    int r;

    if (pid <= 0 || init_pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) {
        return -1;
    }
    snprintf(p, sizeof(p), "%d", (int)pid);
    snprintf(i, sizeof(i), "%d", (int)init_pid);
    /* checked after the pidfd pins the process: if pid was reused before, the check
     * sees the new process, and the signal goes to the old one (ESRCH) */
    if (pid_ns("self", &self) < 0 || pid_ns(p, &of_pid) < 0 || pid_ns(i, &of_init) < 0 ||
        of_pid.st_dev != of_init.st_dev || of_pid.st_ino != of_init.st_ino ||
        (of_pid.st_dev == self.st_dev && of_pid.st_ino == self.st_ino)) {
        close(fd);
        errno = ESRCH;
        return -1;
    }
    r = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
    close(fd);
    return r;
}
