/* host_exec.c - provider_host's exec: fork, a new process group, the
 * sandbox's directory, a clean environment, then poll stdout and stderr until
 * the command ends. When it ends, what is left of its process group is
 * killed: with no cgroup, the group is all the provider can find. cancel()
 * and destroy() kill the group at once. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host.h"

#define HX_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define HX_READ_CHUNK 65536

/* A workdir under /workspace means the same place under the sandbox's directory. */
static char *resolve_workdir(const char *cwd, const char *workdir)
{
    char *out = NULL;

    if (workdir == NULL || workdir[0] == '\0') {
        return strdup(cwd);
    }
    if (strncmp(workdir, "/workspace", 10) == 0 && (workdir[10] == '\0' || workdir[10] == '/')) {
        if (asprintf(&out, "%s%s", cwd, workdir + 10) < 0) {
            return NULL;
        }
        return out;
    }
    return strdup(workdir);
}

/* PATH, HOME, then the exec's variables (the last of a name wins). */
static char **build_env(const struct sbx_exec_spec *spec, const char *cwd, const char **path)
{
    size_t n = 0;
    char **env = calloc(spec->n_env + 3, sizeof(char *));

    if (env == NULL) {
        return NULL;
    }
    *path = HX_DEFAULT_PATH;
    for (size_t i = 0; i < spec->n_env; i++) {
        if (strcmp(spec->env[i].name, "PATH") == 0) {
            *path = spec->env[i].value;
        }
    }
    if (asprintf(&env[n++], "PATH=%s", *path) < 0 || asprintf(&env[n++], "HOME=%s", cwd) < 0) {
        env[n - 1] = NULL;
        return env;
    }
    for (size_t i = 0; i < spec->n_env; i++) {
        if (strcmp(spec->env[i].name, "PATH") == 0 || strcmp(spec->env[i].name, "HOME") == 0) {
            continue;
        }
        if (asprintf(&env[n], "%s=%s", spec->env[i].name, spec->env[i].value) < 0) {
            env[n] = NULL;
            return env;
        }
        n++;
    }
    return env;
}

static void free_env(char **env)
{
    for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
        free(env[i]);
    }
    free(env);
}

/* argv[0] as execve needs it: with a '/', as given (relative to the working
 * directory); else the first executable file on path. NULL: not found. */
static char *find_program(const char *name, const char *path, const char *cwd)
{
    char *cand = NULL;

    if (strchr(name, '/') != NULL) {
        if (name[0] == '/') {
            return strdup(name);
        }
        return asprintf(&cand, "%s/%s", cwd, name) < 0 ? NULL : cand;
    }
    for (const char *p = path; p != NULL && *p != '\0';) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        struct stat st;

        if (len > 0 && asprintf(&cand, "%.*s/%s", (int)len, p, name) >= 0) {
            if (stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
                return cand;
            }
            free(cand);
            cand = NULL;
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

/* In the child: only async-signal-safe calls until execve. */
static void child(const char *prog, char *const *argv, char *const *env, const char *dir, int in,
                  int out, int errfd, int report)
{
    sigset_t none;
    int e;

    setpgid(0, 0);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL); /* sbx ignores it; the command must not inherit that */
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(errfd, 2) < 0 || chdir(dir) < 0) {
        e = -errno; /* negative: the setup failed, not execve */
        (void)!write(report, &e, sizeof(e));
        _exit(127);
    }
    /* none of sbx's descriptors (sockets, the state directory's locks) pass on */
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0) {
        for (int fd = 3; fd < 4096; fd++) {
            if (fd != report) {
                close(fd);
            }
        }
    }
    execve(prog, argv, env);
    e = errno;
    (void)!write(report, &e, sizeof(e));
    _exit(127);
}

static void run_register(struct hx_ctx *c, struct hx_run *run, struct sbx_exec_ctl *ctl)
{
    pthread_mutex_lock(&c->mu);
    run->next = c->runs;
    c->runs = run;
    ctl->provider_data = run;
    pthread_mutex_unlock(&c->mu);
}

/* Kills what is left of the group, once, and forgets the run. */
static void run_finish(struct hx_ctx *c, struct hx_run *run, struct sbx_exec_ctl *ctl)
{
    pthread_mutex_lock(&c->mu);
    if (!run->done && run->pgid > 0) {
        kill(-run->pgid, SIGKILL);
    }
    run->done = 1;
    for (struct hx_run **pp = &c->runs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == run) {
            *pp = run->next;
            break;
        }
    }
    ctl->provider_data = NULL;
    pthread_mutex_unlock(&c->mu);
}

void hx_cancel(void *ctx, struct sbx_exec_ctl *ctl)
{
    struct hx_ctx *c = ctx;
    struct hx_run *run;

    pthread_mutex_lock(&c->mu);
    run = ctl->provider_data;
    if (run != NULL && !run->done && run->pgid > 0) {
        kill(-run->pgid, SIGKILL);
    }
    pthread_mutex_unlock(&c->mu);
}

void hx_kill_sandbox(struct hx_ctx *c, const char *sandbox_id)
{
    pthread_mutex_lock(&c->mu);
    for (struct hx_run *r = c->runs; r != NULL; r = r->next) {
        if (!r->done && r->pgid > 0 && strcmp(r->sandbox, sandbox_id) == 0) {
            kill(-r->pgid, SIGKILL);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Streams both pipes until the command ends (or, once it has, until what it
 * wrote is drained). Returns 0, or -1 when the output sink refused more. */
static int pump(pid_t pid, int fds[2], const struct sbx_exec_spec *spec)
{
    char *buf = malloc(HX_READ_CHUNK);
    int open_fds = 2;
    int exited = 0;
    int r = 0;

    if (buf == NULL) {
        return -1;
    }
    while (open_fds > 0) {
        struct pollfd p[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
        int n = poll(p, 2, exited ? 0 : 100);

        if (n < 0 && errno != EINTR) {
            break;
        }
        if (n == 0) {
            siginfo_t si = {0};

            if (exited) {
                break; /* ended, and nothing more is waiting in the pipes */
            }
            /* WNOWAIT: the group stays ours to kill until run_finish */
            if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                si.si_pid == pid) {
                exited = 1;
            }
            continue;
        }
        for (int i = 0; i < 2; i++) {
            ssize_t got;

            if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            got = read(fds[i], buf, HX_READ_CHUNK);
            if (got < 0 && errno == EINTR) {
                continue;
            }
            if (got <= 0) {
                close(fds[i]);
                fds[i] = -1;
                open_fds--;
                continue;
            }
            if (r == 0 && spec->on_output != NULL &&
                spec->on_output(spec->output_userdata, i + 1, buf, (size_t)got) != 0) {
                r = -1;
                kill(-pid, SIGKILL);
            }
        }
    }
    free(buf);
    return r;
}

int hx_exec(void *ctx, const char *sandbox_id, const struct sbx_exec_spec *spec,
            struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err)
{
    struct hx_ctx *c = ctx;
    struct hx_run run = {0};
    const char *path = NULL;
    char *cwd = hx_store_cwd(c, sandbox_id, err);
    char *dir = NULL;
    char **env = NULL;
    char *prog = NULL;
    int out[2] = {-1, -1};
    int errp[2] = {-1, -1};
    int rep[2] = {-1, -1};
    int fds[2];
    int in = -1;
    int child_errno = 0;
    int status = 0;
    int sink = 0;
    pid_t pid;
    int r = -1;

    if (cwd == NULL) {
        return -1;
    }
    dir = resolve_workdir(cwd, spec->workdir);
    env = build_env(spec, cwd, &path);
    if (dir == NULL || env == NULL) {
        c->host->error_set(err, SBX_E_GENERIC, "out of memory");
        goto out;
    }
    prog = find_program(spec->argv[0], path, dir);
    if (prog == NULL) {
        c->host->error_set(err, SBX_E_NOCMD, "%.200s: command not found on the host",
                           spec->argv[0]);
        goto out;
    }
    if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(rep, O_CLOEXEC) < 0 ||
        (in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        c->host->error_set(err, SBX_E_GENERIC, "pipes for %.100s: %s", spec->argv[0],
                           strerror(errno));
        goto out;
    }
    if (__atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE)) {
        c->host->error_set(err, SBX_E_CANCELLED, "exec cancelled");
        goto out;
    }
    pid = fork();
    if (pid < 0) {
        c->host->error_set(err, SBX_E_GENERIC, "fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        child(prog, (char *const *)spec->argv, env, dir, in, out[1], errp[1], rep[1]);
    }
    setpgid(pid, pid); /* also in the child: whichever runs first */
    run.pgid = pid;
    snprintf(run.sandbox, sizeof(run.sandbox), "%s", sandbox_id);
    run_register(c, &run, ctl);
    if (__atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE)) {
        hx_cancel(c, ctl); /* cancelled between the check and the registration */
    }
    close(out[1]);
    close(errp[1]);
    close(rep[1]);
    out[1] = errp[1] = rep[1] = -1;
    fds[0] = out[0];
    fds[1] = errp[0];
    out[0] = errp[0] = -1;
    sink = pump(pid, fds, spec);
    for (int i = 0; i < 2; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    if (read(rep[0], &child_errno, sizeof(child_errno)) != (ssize_t)sizeof(child_errno)) {
        child_errno = 0;
    }
    {
        siginfo_t si = {0};

        /* the command itself ends first (not reaped: its group stays ours), then
         * what is left of its group is killed, then it is reaped */
        while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
        }
    }
    run_finish(c, &run, ctl);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (__atomic_load_n(&ctl->cancelled, __ATOMIC_ACQUIRE)) {
        c->host->error_set(err, SBX_E_CANCELLED, "exec cancelled");
    }
    else if (sink < 0) {
        c->host->error_set(err, SBX_E_CANCELLED, "the output sink refused more: exec stopped");
    }
    else if (child_errno < 0) {
        c->host->error_set(err, SBX_E_ENGINE, "sandbox %.64s: cannot enter %.200s: %s", sandbox_id,
                           dir, strerror(-child_errno));
    }
    else if (child_errno == ENOENT) {
        c->host->error_set(err, SBX_E_NOCMD, "%.200s: %s", spec->argv[0], strerror(child_errno));
    }
    else if (child_errno != 0) {
        c->host->error_set(err, SBX_E_NOEXEC, "%.200s: cannot be executed: %s", spec->argv[0],
                           strerror(child_errno));
    }
    else {
        *exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        r = 0;
    }
out:
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0) {
            close(out[i]);
        }
        if (errp[i] >= 0) {
            close(errp[i]);
        }
        if (rep[i] >= 0) {
            close(rep[i]);
        }
    }
    if (in >= 0) {
        close(in);
    }
    free_env(env);
    free(prog);
    free(dir);
    free(cwd);
    return r;
}
