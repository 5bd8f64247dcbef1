/* docker_pid.h - signalling a sandbox's process by the pid the engine reports. */
#ifndef SBX_DOCKER_PID_H
#define SBX_DOCKER_PID_H

#include <sys/types.h>

/* Sends sig to pid only when it provably is a process of the sandbox whose init the
 * engine reports as init_pid: both are in one pid namespace and that namespace is not
 * ours. The engine's pids are only ours to use when sbx runs in the engine's pid
 * namespace, and a pid can be reused once its process ends, so the check and the
 * signal go through a pidfd (a reused pid is never signalled). 0 when sent; -1
 * (errno ESRCH: gone or not provably the sandbox's; ENOSYS: no pidfds) otherwise. */
int dk_signal_sandbox_pid(pid_t pid, pid_t init_pid, int sig);

#endif
