/* test_exec_agent.c - the host side of the exec agent against fake agents
 * that misbehave (garbage, endless, silent, absent, early close), and the
 * real agent in sbx-relay run on this machine (argv, env, working directory,
 * exit codes, command not found, signals, cancel of the process group). */
#include "test_common.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sbx/sbx_agent_proto.h>

#include "sandbox/agent.h"

#define ANSWER_MS 400

struct out {
    char buf[2][4096];
    size_t len[2];
};

static int on_out(void *ud, int stream, const char *data, size_t len)
{
    struct out *o = ud;
    size_t i = stream == 2 ? 1 : 0;
    size_t room = sizeof(o->buf[i]) - 1 - o->len[i];

    memcpy(o->buf[i] + o->len[i], data, len < room ? len : room);
    o->len[i] += len < room ? len : room;
    o->buf[i][o->len[i]] = '\0';
    return 0;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void rec(int fd, char type, int32_t v)
{
    unsigned char r[8] = {(unsigned char)type,
                          0,
                          0,
                          0,
                          (unsigned char)((uint32_t)v >> 24),
                          (unsigned char)((uint32_t)v >> 16),
                          (unsigned char)((uint32_t)v >> 8),
                          (unsigned char)v};

    if (write(fd, r, sizeof(r)) < 0) {
        _exit(3);
    }
}

/* A fake agent: connects to dir/host.sock, takes one request, returns the
 * command's channel (and the stdout pipe in *out_fd). */
static int fake_take(const char *dir, int *ctl, int *out_fd)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    unsigned char hdr[SBX_AGENT_HDR];
    union {
        char buf[CMSG_SPACE(4 * sizeof(int))];
        struct cmsghdr align;
    } c;
    struct iovec iov = {hdr, sizeof(hdr)};
    struct msghdr msg = {0};
    int fds[4];
    char skip[4096];
    uint32_t len;

    snprintf(a.sun_path, sizeof(a.sun_path), "%s/%s", dir, SBX_AGENT_SOCK);
    *ctl = socket(AF_UNIX, SOCK_STREAM, 0);
    if (connect(*ctl, (struct sockaddr *)&a, sizeof(a)) < 0) {
        _exit(2);
    }
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = c.buf;
    msg.msg_controllen = sizeof(c.buf);
    if (recvmsg(*ctl, &msg, MSG_WAITALL) != (ssize_t)sizeof(hdr)) {
        _exit(2);
    }
    memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof(fds));
    len = ((uint32_t)hdr[8] << 24) | ((uint32_t)hdr[9] << 16) | ((uint32_t)hdr[10] << 8) | hdr[11];
    while (len > 0) {
        ssize_t n = read(*ctl, skip, len < sizeof(skip) ? len : sizeof(skip));

        if (n <= 0) {
            _exit(2);
        }
        len -= (uint32_t)n;
    }
    *out_fd = fds[1];
    return fds[3];
}

enum fake { GARBAGE, ENDLESS, SILENT, CLOSE, GOOD, BAD_EXIT, NOCMD, CANCEL };

static pid_t fake_agent(const char *dir, enum fake mode)
{
    pid_t pid = fork();
    int ctl;
    int out;
    int ch;

    if (pid != 0) {
        return pid;
    }
    ch = fake_take(dir, &ctl, &out);
    switch (mode) {
    case GARBAGE:
        if (write(ch, "\x01\xff garbage!", 11) < 0) {
            _exit(3);
        }
        break;
    case ENDLESS:
        rec(ch, 'P', 42);
        for (;;) {
            rec(ch, 'P', 42); /* until the host hangs up (EPIPE kills us) */
        }
    case SILENT:
        sleep(30);
        break;
    case CLOSE:
        close(ch);
        sleep(30);
        break;
    case GOOD:
        rec(ch, 'P', 42);
        if (write(out, "hello\n", 6) < 0) {
            _exit(3);
        }
        rec(ch, 'X', 7);
        break;
    case BAD_EXIT:
        rec(ch, 'P', 42);
        rec(ch, 'X', 999);
        break;
    case NOCMD:
        rec(ch, 'F', ENOENT);
        break;
    case CANCEL: {
        unsigned char k[8];

        rec(ch, 'P', 42);
        if (read(ch, k, sizeof(k)) != (ssize_t)sizeof(k) || k[0] != 'K' || k[7] != SIGKILL) {
            _exit(4);
        }
        rec(ch, 'X', 128 + SIGKILL);
        break;
    }
    }
    sleep(1);
    _exit(0);
}

static int run(struct sbx_agent_link *l, const char *const *argv, int *status, char *why,
               sbx_error_t **err)
{
    struct out o = {0};
    struct sbx_exec_spec spec = {.argv = argv, .on_output = on_out, .output_userdata = &o};

    return sbx_agent_exec(l, &spec, -1, NULL, ANSWER_MS, status, why, 300, err);
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* One misbehaving agent: that exec fails (or falls back) with a clear
 * message, promptly, and the link is given up (later execs: the engine). */
static void expect_bad(enum fake mode, int want, const char *msg)
{
    char *dir = test_mkdtemp();
    char *adir = NULL;
    struct sbx_agent_link l;
    const char *const argv[] = {"true", NULL};
    sbx_error_t *err = NULL;
    char why[300];
    int status = -1;
    double t0;
    pid_t pid;
    int r;

    assert_true(asprintf(&adir, "%s/agent", dir) > 0);
    assert_int_equal(sbx_agent_listen(&l, adir, &err), 0);
    pid = fake_agent(adir, mode);
    t0 = now_s();
    r = run(&l, argv, &status, why, &err);
    if (r != want) {
        fail_msg("mode %d: got %d (%s / %s)", (int)mode, r, why, err ? err->msg : "");
    }
    assert_true(now_s() - t0 < 5.0);
    assert_int_equal(r, want);
    if (want == SBX_AGENT_FAILED) {
        assert_non_null(err);
        assert_non_null(strstr(err->msg, msg));
        sbx_error_free(&err);
    }
    else {
        assert_non_null(strstr(why, msg));
    }
    /* given up: the next exec goes to the engine at once */
    t0 = now_s();
    assert_int_equal(run(&l, argv, &status, why, &err), SBX_AGENT_ABSENT);
    assert_true(now_s() - t0 < 0.2);
    reap(pid);
    sbx_agent_close(&l);
    test_rm_rf(dir);
    free(adir);
    free(dir);
}

static void test_garbage(void **state)
{
    (void)state;
    expect_bad(GARBAGE, SBX_AGENT_FAILED, "malformed reply");
}

static void test_endless(void **state)
{
    (void)state;
    expect_bad(ENDLESS, SBX_AGENT_FAILED, "malformed reply");
}

static void test_silent(void **state)
{
    (void)state;
    expect_bad(SILENT, SBX_AGENT_ABSENT, "did not answer in time");
}

static void test_close(void **state)
{
    (void)state;
    expect_bad(CLOSE, SBX_AGENT_ABSENT, "closed the command's channel");
}

static void test_bad_exit(void **state)
{
    (void)state;
    expect_bad(BAD_EXIT, SBX_AGENT_FAILED, "where the exit status was due");
}

static void test_absent(void **state)
{
    char *dir = test_mkdtemp();
    char *adir = NULL;
    struct sbx_agent_link l;
    const char *const argv[] = {"true", NULL};
    sbx_error_t *err = NULL;
    char why[300];
    int status;
    double t0;

    (void)state;
    assert_true(asprintf(&adir, "%s/agent", dir) > 0);
    assert_int_equal(sbx_agent_listen(&l, adir, &err), 0);
    /* the first exec waits for the agent to connect, later ones do not */
    assert_int_equal(run(&l, argv, &status, why, &err), SBX_AGENT_ABSENT);
    assert_non_null(strstr(why, "did not connect in time"));
    t0 = now_s();
    assert_int_equal(run(&l, argv, &status, why, &err), SBX_AGENT_ABSENT);
    assert_true(now_s() - t0 < 0.2);
    sbx_agent_close(&l);
    test_rm_rf(dir);
    free(adir);
    free(dir);
}

static void test_good_fake(void **state)
{
    char *dir = test_mkdtemp();
    char *adir = NULL;
    struct sbx_agent_link l;
    const char *const argv[] = {"anything", NULL};
    struct out o = {0};
    struct sbx_exec_spec spec = {.argv = argv, .on_output = on_out, .output_userdata = &o};
    sbx_error_t *err = NULL;
    char why[300];
    int status = -1;
    pid_t pid;

    (void)state;
    assert_true(asprintf(&adir, "%s/agent", dir) > 0);
    assert_int_equal(sbx_agent_listen(&l, adir, &err), 0);
    pid = fake_agent(adir, GOOD);
    assert_int_equal(sbx_agent_exec(&l, &spec, -1, NULL, ANSWER_MS, &status, why, 300, &err),
                     SBX_AGENT_RAN);
    assert_int_equal(status, 7);
    assert_string_equal(o.buf[0], "hello\n");
    reap(pid);
    sbx_agent_close(&l);
    test_rm_rf(dir);
    free(adir);
    free(dir);
}

static void test_nocmd_and_cancel_fake(void **state)
{
    char *dir = test_mkdtemp();
    char *adir = NULL;
    struct sbx_agent_link l;
    const char *const argv[] = {"nosuch", NULL};
    struct sbx_exec_spec spec = {.argv = argv};
    sbx_error_t *err = NULL;
    char why[300];
    int status = -1;
    int cancel[2];
    pid_t pid;

    (void)state;
    assert_true(asprintf(&adir, "%s/agent", dir) > 0);
    assert_int_equal(sbx_agent_listen(&l, adir, &err), 0);
    pid = fake_agent(adir, NOCMD);
    assert_int_equal(sbx_agent_exec(&l, &spec, -1, NULL, ANSWER_MS, &status, why, 300, &err),
                     SBX_AGENT_FAILED);
    assert_int_equal(err->code, SBX_E_NOCMD);
    sbx_error_free(&err);
    reap(pid);
    sbx_agent_close(&l);

    /* cancel: the host sends K SIGKILL, the agent reports the end */
    assert_int_equal(sbx_agent_listen(&l, adir, &err), 0);
    pid = fake_agent(adir, CANCEL);
    assert_int_equal(pipe(cancel), 0);
    if (fork() == 0) {
        usleep(200 * 1000); /* after the pid came */
        _exit(write(cancel[1], "", 1) == 1 ? 0 : 1);
    }
    assert_int_equal(sbx_agent_exec(&l, &spec, cancel[0], NULL, ANSWER_MS, &status, why, 300, &err),
                     SBX_AGENT_FAILED);
    assert_int_equal(err->code, SBX_E_CANCELLED);
    sbx_error_free(&err);
    {
        int st = 0;

        waitpid(pid, &st, 0);
        assert_int_equal(WEXITSTATUS(st), 0); /* it saw the K record */
        wait(NULL);
    }
    close(cancel[0]);
    close(cancel[1]);
    sbx_agent_close(&l);
    test_rm_rf(dir);
    free(adir);
    free(dir);
}

/* The real agent of sbx-relay, run here (no sandbox): what it runs. */
static void test_real_agent(void **state)
{
    char *dir = test_mkdtemp();
    char *adir = NULL;
    char *sock = NULL;
    char *relay = NULL;
    struct sbx_agent_link l;
    sbx_error_t *err = NULL;
    char why[300];
    int status = -1;
    pid_t pid;

    (void)state;
    assert_true(asprintf(&adir, "%s/agent", dir) > 0);
    assert_true(asprintf(&sock, "%s/%s", adir, SBX_AGENT_SOCK) > 0);
    assert_true(asprintf(&relay, "%s/libexec/sbx-relay", getenv("SBX_BUILD_DIR")) > 0);
    assert_int_equal(sbx_agent_listen(&l, adir, &err), 0);
    pid = fork();
    if (pid == 0) {
        char *const env[] = {"PATH=/usr/bin:/bin", "BASE=from-entrypoint", "KEEP=yes", NULL};

        setpgid(0, 0);
        execle(relay, relay, "--listen", "127.0.0.1:0", "--agent", sock, "--", "sleep", "60",
               (char *)NULL, env);
        _exit(127);
    }
    {
        const char *const argv[] = {"sh", "-c", "echo $BASE $KEEP $ADDED; pwd; echo e >&2; exit 5",
                                    NULL};
        const struct sbx_kv env[] = {{"BASE", "overridden"}, {"ADDED", "new"}};
        struct out o = {0};
        struct sbx_exec_spec spec = {.argv = argv,
                                     .env = env,
                                     .n_env = 2,
                                     .workdir = dir,
                                     .on_output = on_out,
                                     .output_userdata = &o};
        char want[600];

        assert_int_equal(sbx_agent_exec(&l, &spec, -1, NULL, 5000, &status, why, 300, &err),
                         SBX_AGENT_RAN);
        assert_int_equal(status, 5);
        snprintf(want, sizeof(want), "overridden yes new\n%s\n", dir);
        assert_string_equal(o.buf[0], want);
        assert_string_equal(o.buf[1], "e\n");
    }
    {
        const char *const argv[] = {"no-such-command-here", NULL};
        struct sbx_exec_spec spec = {.argv = argv, .workdir = dir};

        assert_int_equal(sbx_agent_exec(&l, &spec, -1, NULL, 5000, &status, why, 300, &err),
                         SBX_AGENT_FAILED);
        assert_int_equal(err->code, SBX_E_NOCMD);
        sbx_error_free(&err);
    }
    {
        const char *const argv[] = {"sh", "-c", "kill -TERM $$", NULL};
        struct sbx_exec_spec spec = {.argv = argv, .workdir = dir};

        assert_int_equal(sbx_agent_exec(&l, &spec, -1, NULL, 5000, &status, why, 300, &err),
                         SBX_AGENT_RAN);
        assert_int_equal(status, 128 + SIGTERM);
    }
    {
        /* cancel kills the whole group: the background sleep too, so the
         * output pipe closes and nothing waits 30 s */
        const char *const argv[] = {"sh", "-c", "sleep 30 & sleep 30", NULL};
        struct sbx_exec_spec spec = {.argv = argv, .workdir = dir};
        volatile int cancelled = 0;
        int cancel[2];
        double t0 = now_s();

        assert_int_equal(pipe(cancel), 0);
        if (fork() == 0) {
            usleep(300 * 1000);
            if (write(cancel[1], "", 1) < 0) {
                _exit(1);
            }
            _exit(0);
        }
        assert_int_equal(
            sbx_agent_exec(&l, &spec, cancel[0], &cancelled, 5000, &status, why, 300, &err),
            SBX_AGENT_FAILED);
        assert_int_equal(err->code, SBX_E_CANCELLED);
        sbx_error_free(&err);
        assert_true(now_s() - t0 < 10.0);
        wait(NULL);
        close(cancel[0]);
        close(cancel[1]);
    }
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    sbx_agent_close(&l);
    test_rm_rf(dir);
    free(adir);
    free(sock);
    free(relay);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage),    cmocka_unit_test(test_endless),
        cmocka_unit_test(test_silent),     cmocka_unit_test(test_close),
        cmocka_unit_test(test_bad_exit),   cmocka_unit_test(test_absent),
        cmocka_unit_test(test_good_fake),  cmocka_unit_test(test_nocmd_and_cancel_fake),
        cmocka_unit_test(test_real_agent),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
