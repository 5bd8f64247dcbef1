/* docker_qgroup.c - stale btrfs qgroups removed with their subvolumes (issue
 * 25; docs/operations.md, "Nothing leaks"). On a btrfs data root with full
 * qgroups the engine cannot delete a removed container's qgroup while the
 * kernel still drops its subvolume ("device or resource busy"), and a kernel
 * that does not delete it later leaves it for good. So, after removals, the
 * background removal worker (docker_remove.c) runs `btrfs qgroup
 * clear-stale DATA_ROOT`: a few seconds after the last removal (the kernel
 * has dropped the subvolume by then, or by the next run), at most once every
 * DK_QG_INTERVAL_S seconds, each run killed after DK_QG_TIMEOUT_S, and at
 * most DK_QG_RUNS runs per burst of removals. It needs root (CAP_SYS_ADMIN),
 * the btrfs program and the data root mounted here; without them nothing
 * runs and `sbx info` says why, once, on its disk line. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "docker.h"

#define DK_QG_BTRFS_MAGIC 0x9123683EL
#define DK_QG_DELAY_S 3     /* after the last removal */
#define DK_QG_INTERVAL_S 10 /* between two runs */
#define DK_QG_TIMEOUT_S 20  /* one run at most */
#define DK_QG_RUNS 3        /* runs per burst of removals */

static pthread_mutex_t qg_mu = PTHREAD_MUTEX_INITIALIZER;
static char qg_root[256];     /* the engine's btrfs data root, "" when none */
static char qg_btrfs[64];     /* the btrfs program */
static int qg_can;            /* 1: clear-stale can run */
static char qg_why[320];      /* why not, for sbx info */
static int64_t qg_due;        /* monotonic seconds of the next run, 0: none */
static int64_t qg_last;       /* of the last run */
static int qg_left;           /* runs left in this burst */
static unsigned long qg_runs; /* runs so far (sbx info) */

static int64_t mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

void dk_qgroup_setup(struct dk_ctx *c, const char *root)
{
    static const char *const progs[] = {"/usr/bin/btrfs", "/usr/sbin/btrfs", "/bin/btrfs",
                                        "/sbin/btrfs"};
    struct statfs sf;

    if (strcmp(c->storage_driver, "btrfs") != 0 || root == NULL || root[0] != '/' ||
        strlen(root) >= sizeof(qg_root)) {
        return;
    }
    pthread_mutex_lock(&qg_mu);
    snprintf(qg_root, sizeof(qg_root), "%s", root);
    qg_can = 0;
    qg_btrfs[0] = '\0';
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]) && !qg_btrfs[0]; i++) {
        if (access(progs[i], X_OK) == 0) {
            snprintf(qg_btrfs, sizeof(qg_btrfs), "%s", progs[i]);
        }
    }
    if (geteuid() != 0) {
        snprintf(qg_why, sizeof(qg_why),
                 "sbx is not root (needs CAP_SYS_ADMIN): run btrfs qgroup clear-stale %.80s as "
                 "root, or scripts/dockerd.sh stop and start",
                 root);
    }
    else if (qg_btrfs[0] == '\0') {
        snprintf(qg_why, sizeof(qg_why), "no btrfs program (apt-get install btrfs-progs)");
    }
    else if (statfs(root, &sf) != 0 || (unsigned long)sf.f_type != DK_QG_BTRFS_MAGIC) {
        snprintf(qg_why, sizeof(qg_why),
                 "the engine's data root %.100s is not a btrfs mounted here (a remote engine?)",
                 root);
    }
    else {
        qg_can = 1;
        qg_why[0] = '\0';
    }
    pthread_mutex_unlock(&qg_mu);
}

void dk_qgroup_describe(char *buf, size_t size)
{
    pthread_mutex_lock(&qg_mu);
    if (qg_root[0] == '\0') {
        buf[0] = size > 0 ? '\0' : buf[0];
    }
    else if (qg_can) {
        snprintf(buf, size, "; stale qgroups removed after removals (btrfs qgroup clear-stale)");
    }
    else {
        snprintf(buf, size, "; stale qgroups NOT removed: %s", qg_why);
    }
    pthread_mutex_unlock(&qg_mu);
}

void dk_qgroup_removed(void)
{
    pthread_mutex_lock(&qg_mu);
    if (qg_can) {
        qg_due = mono_s() + DK_QG_DELAY_S;
        qg_left = DK_QG_RUNS;
    }
    pthread_mutex_unlock(&qg_mu);
}

int64_t dk_qgroup_wait(void)
{
    int64_t w = -1;

    pthread_mutex_lock(&qg_mu);
    if (qg_due > 0) {
        int64_t at = qg_due;

        if (qg_last > 0 && at < qg_last + DK_QG_INTERVAL_S) {
            at = qg_last + DK_QG_INTERVAL_S;
        }
        w = at - mono_s();
        w = w < 0 ? 0 : w;
    }
    pthread_mutex_unlock(&qg_mu);
    return w;
}

/* Runs `btrfs qgroup clear-stale ROOT`, killed after DK_QG_TIMEOUT_S. */
static void run_clear_stale(const struct sbx_host_api *host, const char *prog, const char *root)
{
    pid_t pid = fork();
    int status = 0;

    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);

        if (null >= 0) {
            dup2(null, STDIN_FILENO);
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        alarm(DK_QG_TIMEOUT_S); /* kept across exec: SIGALRM ends it */
        execl(prog, prog, "qgroup", "clear-stale", root, (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        host->log(DK_NAME, SBX_LOG_WARN, "btrfs qgroup clear-stale: fork: %s", strerror(errno));
        return;
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* qgroups of subvolumes still being dropped are busy: the next run takes them */
        host->log(DK_NAME, SBX_LOG_DEBUG, "btrfs qgroup clear-stale %s: %s %d", root,
                  WIFEXITED(status) ? "exit" : "signal",
                  WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
}

void dk_qgroup_run_due(const struct sbx_host_api *host, int force)
{
    char prog[sizeof(qg_btrfs)];
    char root[sizeof(qg_root)];
    int64_t now = mono_s();

    pthread_mutex_lock(&qg_mu);
    if (qg_due == 0 || !qg_can ||
        (!force && (now < qg_due || (qg_last > 0 && now < qg_last + DK_QG_INTERVAL_S)))) {
        pthread_mutex_unlock(&qg_mu);
        return;
    }
    qg_last = now;
    qg_runs++;
    qg_due = --qg_left > 0 ? now + DK_QG_INTERVAL_S : 0;
    snprintf(prog, sizeof(prog), "%s", qg_btrfs);
    snprintf(root, sizeof(root), "%s", qg_root);
    pthread_mutex_unlock(&qg_mu);
    if (host != NULL) {
        run_clear_stale(host, prog, root);
    }
}
