/* attr.c - which exec a connection to the relay comes from (docs/egress.md,
 * "Attribution").
 *
 * The exec agent (agent.c) writes each command it starts into a table in memory
 * shared with the relay (mapped before the two fork apart, so no process of the
 * sandbox can reach it by name): its pid and its exec id (also SBX_EXEC_ID in the
 * command's environment). For each accepted TCP connection on loopback the relay
 * finds the client socket's inode in /proc/net/tcp{,6} (the entry whose local end is
 * our peer and whose remote end is us, or for a redirected connection its original
 * destination), the process holding that inode (a bounded
 * scan of /proc/PID/fd), then walks that process's parents to a command of the
 * table. For a unix socket, SO_PEERCRED gives the pid. The result goes to the proxy
 * as one line ahead of the connection (SBX_ATTR_PREFIX); the proxy logs it as
 * reported by the sandbox: a process inside may connect to the proxy's socket itself
 * and write any line. */
#include "attr.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef SO_ORIGINAL_DST
#define SO_ORIGINAL_DST 80 /* linux/netfilter_ipv4.h */
#endif

#define SLOTS 512       /* commands running at once that can be named */
#define MAX_PROCS 4096  /* processes looked at per connection */
#define MAX_FDS 65536   /* descriptors looked at per connection */
#define MAX_DEPTH 64    /* parents walked */
#define TCP_LINES 65536 /* lines of /proc/net/tcp read */

struct slot {
    int pid; /* 0 free, -1 being written */
    char id[SBX_ATTR_ID_MAX + 1];
};

static struct slot *table;

int sbx_attr_init(void)
{
    void *p = mmap(NULL, SLOTS * sizeof(struct slot), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    if (p == MAP_FAILED) {
        return -1;
    }
    table = p;
    return 0;
}

void sbx_attr_set(pid_t pid, const char *id)
{
    if (table == NULL || pid <= 0) {
        return;
    }
    for (size_t i = 0; i < SLOTS; i++) {
        int free_pid = 0;

        if (__atomic_compare_exchange_n(&table[i].pid, &free_pid, -1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
            snprintf(table[i].id, sizeof(table[i].id), "%s", id);
            __atomic_store_n(&table[i].pid, (int)pid, __ATOMIC_RELEASE);
            return;
        }
    }
}

void sbx_attr_clear(pid_t pid)
{
    if (table == NULL || pid <= 0) {
        return;
    }
    for (size_t i = 0; i < SLOTS; i++) {
        if (__atomic_load_n(&table[i].pid, __ATOMIC_ACQUIRE) == (int)pid) {
            __atomic_store_n(&table[i].pid, 0, __ATOMIC_RELEASE);
        }
    }
}

static int lookup(pid_t pid, char *id)
{
    for (size_t i = 0; i < SLOTS; i++) {
        if (__atomic_load_n(&table[i].pid, __ATOMIC_ACQUIRE) == (int)pid) {
            memcpy(id, table[i].id, sizeof(table[i].id));
            id[SBX_ATTR_ID_MAX] = '\0';
            /* written before pid was published; recheck it was not reused meanwhile */
            return __atomic_load_n(&table[i].pid, __ATOMIC_ACQUIRE) == (int)pid;
        }
    }
    return 0;
}

/* Parses the hex address of /proc/net/tcp{,6} ("0100007F" or 32 digits: the raw words
 * as the kernel prints them) into b[16]; returns its length in bytes, or 0. */
static size_t parse_addr(const char *hex, unsigned char *b)
{
    size_t n = strlen(hex);

    if (n != 8 && n != 32) {
        return 0;
    }
    for (size_t w = 0; w < n / 8; w++) {
        char part[9];
        uint32_t v;

        memcpy(part, hex + 8 * w, 8);
        part[8] = '\0';
        v = (uint32_t)strtoul(part, NULL, 16);
        memcpy(b + 4 * w, &v, 4);
    }
    return n / 2;
}

/* Address bytes and port of a socket address (IPv4-mapped stays as IPv6, as the
 * kernel lists it in tcp6). */
static size_t sock_bytes(const struct sockaddr_storage *ss, unsigned char *b, unsigned *port)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)ss;

        memcpy(b, &s->sin_addr, 4);
        *port = ntohs(s->sin_port);
        return 4;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;

        memcpy(b, &s->sin6_addr, 16);
        *port = ntohs(s->sin6_port);
        return 16;
    }
    return 0;
}

/* The inode of the socket whose local end is peer and remote end is self. */
static unsigned long find_inode(const struct sockaddr_storage *peer,
                                const struct sockaddr_storage *self)
{
    unsigned char pb[16];
    unsigned char sb[16];
    unsigned pport = 0;
    unsigned sport = 0;
    size_t plen = sock_bytes(peer, pb, &pport);
    char line[512];
    unsigned long inode = 0;
    FILE *f;

    if (plen == 0 || sock_bytes(self, sb, &sport) != plen) {
        return 0;
    }
    f = fopen(plen == 4 ? "/proc/net/tcp" : "/proc/net/tcp6", "re");
    if (f == NULL) {
        return 0;
    }
    for (size_t n = 0; n < TCP_LINES && fgets(line, sizeof(line), f) != NULL; n++) {
        char la[40];
        char ra[40];
        unsigned lp;
        unsigned rp;
        unsigned long ino;
        unsigned char lb[16];
        unsigned char rb[16];

        if (sscanf(line,
                   " %*u: %39[0-9A-Fa-f]:%x %39[0-9A-Fa-f]:%x %*x %*x:%*x %*x:%*x %*x %*u %*u %lu",
                   la, &lp, ra, &rp, &ino) != 5) {
            continue;
        }
        if (lp == pport && rp == sport && parse_addr(la, lb) == plen &&
            parse_addr(ra, rb) == plen && memcmp(lb, pb, plen) == 0 && memcmp(rb, sb, plen) == 0) {
            inode = ino;
            break;
        }
    }
    fclose(f);
    return inode;
}

static int all_digits(const char *s)
{
    if (*s == '\0') {
        return 0;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return 0;
        }
    }
    return 1;
}

/* The first process (not this one) with a descriptor on socket INODE; 0 if none was
 * found within the bounds. */
static pid_t find_holder(unsigned long inode)
{
    char want[48];
    size_t procs = 0;
    size_t fds = 0;
    pid_t found = 0;
    pid_t self = getpid();
    DIR *d = opendir("/proc");
    struct dirent *de;

    if (d == NULL) {
        return 0;
    }
    snprintf(want, sizeof(want), "socket:[%lu]", inode);
    while (found == 0 && (de = readdir(d)) != NULL && procs < MAX_PROCS && fds < MAX_FDS) {
        char path[300];
        DIR *fd_dir;
        struct dirent *fe;

        if (!all_digits(de->d_name) || atoi(de->d_name) == self) {
            continue;
        }
        procs++;
        snprintf(path, sizeof(path), "/proc/%s/fd", de->d_name);
        fd_dir = opendir(path);
        if (fd_dir == NULL) {
            continue; /* gone, or another user's */
        }
        while ((fe = readdir(fd_dir)) != NULL && fds < MAX_FDS) {
            char link[600];
            char target[64];
            ssize_t n;

            if (!all_digits(fe->d_name)) {
                continue;
            }
            fds++;
            snprintf(link, sizeof(link), "/proc/%s/fd/%s", de->d_name, fe->d_name);
            n = readlink(link, target, sizeof(target) - 1);
            if (n > 0) {
                target[n] = '\0';
                if (strcmp(target, want) == 0) {
                    found = (pid_t)atoi(de->d_name);
                    break;
                }
            }
        }
        closedir(fd_dir);
    }
    closedir(d);
    return found;
}

static pid_t parent_of(pid_t pid)
{
    char path[64];
    char buf[512];
    char *p;
    int ppid = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return 0;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) {
        return 0;
    }
    buf[n] = '\0';
    p = strrchr(buf, ')'); /* the name may hold anything, up to its last ')' */
    if (p == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1) {
        return 0;
    }
    return (pid_t)ppid;
}

static pid_t peer_pid(int fd)
{
    struct sockaddr_storage peer;
    struct sockaddr_storage self;
    socklen_t pl = sizeof(peer);
    socklen_t sl = sizeof(self);
    unsigned long inode;

    if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
        getsockname(fd, (struct sockaddr *)&self, &sl) < 0) {
        return 0;
    }
    if (peer.ss_family == AF_UNIX) {
        struct ucred cr;
        socklen_t cl = sizeof(cr);

        return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 ? cr.pid : 0;
    }
    if (self.ss_family == AF_INET) {
        /* (added) A connection the sandbox's netns redirected to us (names.c): the
         * client's socket is connected to its original destination, not to us. For
         * one not redirected, conntrack's original destination is us anyway; without
         * conntrack the call fails and self stays. */
        struct sockaddr_storage dst;
        socklen_t dl = sizeof(struct sockaddr_in);

        memset(&dst, 0, sizeof(dst));
        if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &dst, &dl) == 0 && dst.ss_family == AF_INET) {
            self = dst;
        }
    }
    inode = find_inode(&peer, &self);
    return inode != 0 ? find_holder(inode) : 0;
}

size_t sbx_attr_line(int fd, char *line)
{
    pid_t pid = peer_pid(fd);
    char id[SBX_ATTR_ID_MAX + 1] = "";
    int n;

    if (table != NULL) {
        pid_t p = pid;

        for (int depth = 0; p > 1 && depth < MAX_DEPTH; depth++) {
            if (lookup(p, id)) {
                break;
            }
            id[0] = '\0';
            p = parent_of(p);
        }
    }
    if (pid > 0) {
        n = snprintf(line, SBX_ATTR_LINE_MAX, SBX_ATTR_PREFIX "pid=%d exec=%s\r\n", (int)pid,
                     id[0] ? id : "-");
    }
    else {
        n = snprintf(line, SBX_ATTR_LINE_MAX, SBX_ATTR_PREFIX "pid=- exec=-\r\n");
    }
    return n > 0 && n < SBX_ATTR_LINE_MAX ? (size_t)n : 0;
}

void sbx_attr_hand_over(int c, const struct sockaddr_un *sun, const char *head, size_t n,
                        int attribute)
{
    char buf[SBX_ATTR_HEAD_MAX + SBX_ATTR_LINE_MAX];
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct iovec iov = {buf, 0};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg;
    struct cmsghdr *cm;

    if (n > SBX_ATTR_HEAD_MAX) {
        goto out;
    }
    memcpy(buf, head, n);
    iov.iov_len = n + (attribute ? sbx_attr_line(c, buf + n) : 0);
    if (u < 0 || connect(u, (const struct sockaddr *)sun, sizeof(*sun)) < 0) {
        fprintf(stderr, "sbx-relay: cannot connect to %s: %s\n", sun->sun_path, strerror(errno));
        goto out;
    }
    memset(&msg, 0, sizeof(msg));
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &c, sizeof(int));
    /* one message: the head with the descriptor, then the attribution line */
    if (sendmsg(u, &msg, MSG_NOSIGNAL) != (ssize_t)iov.iov_len) {
        fprintf(stderr, "sbx-relay: cannot hand over to %s: %s\n", sun->sun_path, strerror(errno));
    }
out:
    if (u >= 0) {
        close(u);
    }
    close(c);
}
