/* test_docker_pid.c - a cancelled Docker exec is killed by its pid only when that pid
 * provably is the sandbox's (plugins/provider_docker/docker_pid.c): a process in a pid
 * namespace of its own (as a sandbox's are) can be signalled through its init's
 * namespace; a process of ours, a pid whose namespace differs, or a pid that is gone
 * cannot. Needs root for the namespace (the suite runs as root). */
#include "test_common.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include "docker_pid.h"

/* A process in a new pid namespace (its init), as seen from here. */
static pid_t start_ns_init(pid_t *middle)
{
    int fds[2];
    pid_t init = 0;

    assert_int_equal(pipe(fds), 0);
    *middle = fork();
    assert_true(*middle >= 0);
    if (*middle == 0) {
        pid_t p;

        if (unshare(CLONE_NEWPID) < 0) {
            _exit(2);
        }
        p = fork();
        if (p == 0) {
            pause();
            _exit(0);
        }
        if (write(fds[1], &p, sizeof(p)) != (ssize_t)sizeof(p)) {
            _exit(3);
        }
        waitpid(p, NULL, 0);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &init, sizeof(init)) != (ssize_t)sizeof(init)) {
        fail_msg("could not start a process in a new pid namespace (root needed)");
    }
    close(fds[0]);
    return init;
}

static void test_signal_only_the_sandboxs(void **state)
{
    pid_t middle;
    pid_t init = start_ns_init(&middle);
    pid_t ours = fork();
    int st = 0;

    (void)state;
    if (ours == 0) {
        pause();
        _exit(0);
    }
    /* a process in our own namespace is never the sandbox's */
    errno = 0;
    assert_int_equal(dk_signal_sandbox_pid(ours, init, SIGKILL), -1);
    assert_int_equal(errno, ESRCH);
    assert_int_equal(dk_signal_sandbox_pid(ours, ours, SIGKILL), -1);
    assert_int_equal(dk_signal_sandbox_pid(init, ours, SIGKILL), -1);
    assert_int_equal(kill(ours, 0), 0); /* still alive */
    assert_int_equal(kill(init, 0), 0);
    /* bad and gone pids */
    assert_int_equal(dk_signal_sandbox_pid(0, init, SIGKILL), -1);
    assert_int_equal(dk_signal_sandbox_pid(init, 0, SIGKILL), -1);
    /* the sandbox's own process: signalled */
    assert_int_equal(dk_signal_sandbox_pid(init, init, SIGKILL), 0);
    assert_int_equal(waitpid(middle, &st, 0), middle);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0); /* its child was killed, it reaped it */
    assert_int_equal(dk_signal_sandbox_pid(init, init, SIGKILL), -1); /* gone now */
    kill(ours, SIGKILL);
    waitpid(ours, NULL, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signal_only_the_sandboxs),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
