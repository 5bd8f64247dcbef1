/* docker_netns.c - the sandbox's transparent egress path, netns side (docs/egress.md,
 * "Without proxy variables").
 *
 * The sandbox (NetworkMode none) has only lo. Right after the start, before any exec,
 * a child of ours enters its network namespace (host root holds CAP_NET_ADMIN over
 * it; the sandbox has no capability and cannot undo this) and sets:
 *
 *   ip -4 route replace default dev lo src 127.0.0.1     (an IP literal is routable)
 *   nat OUTPUT: TCP to SBX_RELAY_NAME_NET and SBX_RELAY_DENY_NET (the addresses the
 *               relay's resolver gives allowed and denied names), and TCP leaving by lo to any
 * address off 127/8, REDIRECT to the relay's port (SBX_RELAY_REDIRECT_PORT); the relay reads the
 * original destination (SO_ORIGINAL_DST) filter OUTPUT: anything else leaving by lo to an address
 * off 127/8 (UDP, ICMP) REJECT: only the relay's resolver answers UDP
 *
 * Interfaces other than lo (none today) are left alone. */
#include "docker.h"

#include <errno.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char rules[] =
    "*nat\n"
    ":PREROUTING ACCEPT [0:0]\n"
    ":INPUT ACCEPT [0:0]\n"
    ":OUTPUT ACCEPT [0:0]\n"
    ":POSTROUTING ACCEPT [0:0]\n"
    "-A OUTPUT -p tcp -d " SBX_RELAY_NAME_NET " -j REDIRECT --to-ports " SBX_RELAY_REDIRECT_PORT
    "\n"
    "-A OUTPUT -p tcp -d " SBX_RELAY_DENY_NET " -j REDIRECT --to-ports " SBX_RELAY_REDIRECT_PORT
    "\n"
    "-A OUTPUT -o lo -p tcp ! -d 127.0.0.0/8 -j REDIRECT --to-ports " SBX_RELAY_REDIRECT_PORT "\n"
    "COMMIT\n"
    "*filter\n"
    ":INPUT ACCEPT [0:0]\n"
    ":FORWARD ACCEPT [0:0]\n"
    ":OUTPUT ACCEPT [0:0]\n"
    "-A OUTPUT -o lo ! -d 127.0.0.0/8 -j REJECT\n"
    "COMMIT\n";

char *dk_resolv_conf_path(const char *relay)
{
    const char *slash = strrchr(relay, '/');
    size_t dir = slash != NULL ? (size_t)(slash - relay + 1) : 0;
    char *p = malloc(dir + sizeof("sbx-resolv.conf"));

    if (p == NULL) {
        return NULL;
    }
    memcpy(p, relay, dir);
    memcpy(p + dir, "sbx-resolv.conf", sizeof("sbx-resolv.conf"));
    if (access(p, R_OK) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

static const char *find_tool(const char *const *paths)
{
    for (int i = 0; paths[i] != NULL; i++) {
        if (access(paths[i], X_OK) == 0) {
            return paths[i];
        }
    }
    return NULL;
}

/* In a forked child: only async-signal-safe calls. Exit codes name the step. */
static void child_setup(int nsfd, const char *ip, const char *restore)
{
    char *const route[] = {(char *)ip, "-4", "route", "replace",   "default",
                           "dev",      "lo", "src",   "127.0.0.1", NULL};
    char *const load[] = {(char *)restore, "-w", "5", NULL};
    char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    int p[2];
    int status = 0;
    pid_t pid;

    if (setns(nsfd, CLONE_NEWNET) < 0) {
        _exit(10);
    }
    pid = fork();
    if (pid < 0) {
        _exit(11);
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        if (null >= 0) {
            dup2(null, 1);
        }
        execve(ip, route, envp);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        _exit(12);
    }
    if (pipe(p) < 0 || write(p[1], rules, sizeof(rules) - 1) != (ssize_t)(sizeof(rules) - 1)) {
        _exit(13);
    }
    close(p[1]);
    if (dup2(p[0], 0) < 0) {
        _exit(13);
    }
    execve(restore, load, envp);
    _exit(14);
}

static void setup_child(int nsfd, const void *arg)
{
    const char *const *tools = arg;

    child_setup(nsfd, tools[0], tools[1]);
}

int dk_netns_redirect(struct dk_ctx *c, const char *id, sbx_error_t **err)
{
    static const char *const ips[] = {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip", NULL};
    static const char *const restores[] = {"/usr/sbin/iptables-restore", "/sbin/iptables-restore",
                                           NULL};
    const char *tools[] = {find_tool(ips), find_tool(restores)};
    int nsfd;
    int code;

    if (tools[0] == NULL || tools[1] == NULL) {
        return c->host->error_set(err, SBX_E_ENGINE, "%s not found (packages iproute2, iptables)",
                                  tools[0] == NULL ? "ip" : "iptables-restore");
    }
    if (geteuid() != 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "sbx is not root");
    }
    nsfd = dk_open_ns(c, id, "net", err);
    if (nsfd < 0) {
        return -1;
    }
    code = dk_run_in_ns(c, nsfd, setup_child, tools, err);
    if (code != 0) {
        return code < 0 ? -1
                        : c->host->error_set(err, SBX_E_ENGINE, "%s failed in the sandbox's netns",
                                             code == 10   ? "setns"
                                             : code == 12 ? "ip route"
                                             : code == 14 ? "exec iptables-restore"
                                                          : "iptables-restore");
    }
    return 0;
}
