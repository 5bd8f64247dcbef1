/* docker_seccomp.c - the seccomp profile of the project's own for sandboxes
 * (docs/operations.md, "The sandbox's seccomp profile"): an allow-list of system
 * calls in the engine's profile format, sent as HostConfig.SecurityOpt
 * "seccomp=<JSON>" (the Engine API takes the profile's text, not a path).
 *
 * What it removes from what a container may do by default: socket() in any family
 * but UNIX, INET, INET6, NETLINK and PACKET (AF_VSOCK reaches the hypervisor of a
 * virtual machine; the rest is kernel attack surface no sandbox uses), socketpair()
 * but for UNIX, socketcall() (the 32-bit x86 multiplexer, whose arguments a filter
 * cannot see; the 32-bit x86 entry is left out of the profile altogether, see
 * dk_seccomp_profile) and io_uring (whose socket operation would bypass the family
 * check).
 * Calls a capability makes useful are allowed when the sandbox has that capability
 * (the engine evaluates "includes"/"excludes" at create time). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "docker.h"

/* Allowed for every sandbox, grouped by what they are for: what the engine's default
 * (Docker 20.10) allows a container without added capabilities, less the socket
 * calls and io_uring (see the top), plus fchmodat2 and the pkey_* calls, which newer
 * kernels and libcs use (newer engines allow them too). */
static const char *const allowed[] = {
    /* file descriptors and I/O */
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "preadv2", "pwritev",
    "pwritev2", "close", "close_range", "lseek", "_llseek", "dup", "dup2", "dup3", "fcntl",
    "fcntl64", "flock", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range", "fallocate",
    "ftruncate", "ftruncate64", "truncate", "truncate64", "sendfile", "sendfile64",
    "copy_file_range", "splice", "tee", "vmsplice", "readahead", "fadvise64", "fadvise64_64",
    "pipe", "pipe2",
    /* paths and metadata */
    "stat", "stat64", "fstat", "fstat64", "lstat", "lstat64", "newfstatat", "fstatat64", "statx",
    "statfs", "statfs64", "fstatfs", "fstatfs64", "access", "faccessat", "faccessat2", "readlink",
    "readlinkat", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "rename", "renameat",
    "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink", "unlinkat", "chown", "chown32",
    "fchown", "fchown32", "lchown", "lchown32", "fchownat", "umask", "utime", "utimes", "utimensat",
    "utimensat_time64", "futimesat", "getdents", "getdents64", "getxattr", "lgetxattr", "fgetxattr",
    "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
    "inotify_init", "inotify_init1", "inotify_add_watch", "inotify_rm_watch", "fanotify_mark",
    /* memory */
    "brk", "mmap", "mmap2", "munmap", "mremap", "mprotect", "madvise", "mincore", "msync", "mlock",
    "mlock2", "munlock", "mlockall", "munlockall", "membarrier", "memfd_create", "memfd_secret",
    "remap_file_pages", "pkey_alloc", "pkey_free", "pkey_mprotect",
    /* processes and threads */
    "execve", "execveat", "exit", "exit_group", "fork", "vfork", "wait4", "waitid", "waitpid",
    "kill", "tkill", "tgkill", "getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp",
    "getsid", "setsid", "set_tid_address", "set_robust_list", "get_robust_list", "rseq", "prctl",
    "getpriority", "setpriority", "sched_yield", "sched_getaffinity", "sched_setaffinity",
    "sched_getparam", "sched_setparam", "sched_getscheduler", "sched_setscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "sched_rr_get_interval",
    "sched_rr_get_interval_time64", "sched_getattr", "sched_setattr", "getcpu", "uname", "sysinfo",
    "getrlimit", "setrlimit", "prlimit64", "ugetrlimit", "getrusage", "times", "capget", "capset",
    "pidfd_open", "pidfd_send_signal", "process_mrelease", "ioprio_get", "ioprio_set",
    "restart_syscall", "futex", "futex_time64", "futex_waitv", "get_thread_area", "set_thread_area",
    "ptrace", "seccomp", "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
    /* user and group ids (the kernel checks the capabilities) */
    "getuid", "getuid32", "geteuid", "geteuid32", "getgid", "getgid32", "getegid", "getegid32",
    "getresuid", "getresuid32", "getresgid", "getresgid32", "getgroups", "getgroups32", "setuid",
    "setuid32", "setgid", "setgid32", "setreuid", "setreuid32", "setregid", "setregid32",
    "setresuid", "setresuid32", "setresgid", "setresgid32", "setgroups", "setgroups32", "setfsuid",
    "setfsuid32", "setfsgid", "setfsgid32",
    /* signals */
    "rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigsuspend", "rt_sigpending",
    "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "sigaltstack", "signalfd", "signalfd4", "sigreturn", "sigprocmask", "pause", "alarm",
    /* time (setting a clock needs CAP_SYS_TIME, below) */
    "clock_gettime", "clock_gettime64", "clock_getres", "clock_getres_time64", "clock_nanosleep",
    "clock_nanosleep_time64", "nanosleep", "gettimeofday", "time", "adjtimex", "clock_adjtime",
    "clock_adjtime64", "timer_create", "timer_delete", "timer_gettime", "timer_gettime64",
    "timer_settime", "timer_settime64", "timer_getoverrun", "timerfd_create", "timerfd_gettime",
    "timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "getitimer", "setitimer",
    /* waiting for events; asynchronous I/O (not io_uring: see the top) */
    "poll", "ppoll", "ppoll_time64", "select", "_newselect", "pselect6", "pselect6_time64",
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_ctl_old", "epoll_wait", "epoll_wait_old",
    "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "io_setup", "io_destroy", "io_submit",
    "io_cancel", "io_getevents", "io_pgetevents", "io_pgetevents_time64",
    /* System V and POSIX IPC */
    "ipc", "shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semctl", "semtimedop",
    "semtimedop_time64", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
    "mq_timedsend", "mq_timedsend_time64", "mq_timedreceive", "mq_timedreceive_time64", "mq_notify",
    "mq_getsetattr",
    /* sockets once made (socket and socketpair: by family, below) */
    "bind", "connect", "listen", "accept", "accept4", "getsockname", "getpeername", "getsockopt",
    "setsockopt", "send", "sendto", "sendmsg", "sendmmsg", "recv", "recvfrom", "recvmsg",
    "recvmmsg", "recvmmsg_time64", "shutdown",
    /* randomness */
    "getrandom", NULL};
/* (ioctl: by request, ioctl_rules below) */

/* The only socket families a sandbox may open (linux/socket.h). AF_PACKET needs
 * CAP_NET_RAW, which sandboxes lack unless provider_docker.cap_add gives it. */
static const int families[] = {1 /* AF_UNIX */, 2 /* AF_INET */, 10 /* AF_INET6 */,
                               16 /* AF_NETLINK */, 17 /* AF_PACKET */};

/* personality(2) values programs use: PER_LINUX, PER_LINUX32, ADDR_NO_RANDOMIZE
 * with either (setarch -R), and the query 0xffffffff. */
static const json_int_t personalities[] = {0, 8, 0x20000, 0x20008, 0xffffffff};

/* Calls allowed when the sandbox holds the capability (cap_add). */
static const struct {
    const char *cap;
    const char *names[24];
} by_cap[] = {
    {"CAP_SYS_ADMIN",
     {"mount",           "umount",        "umount2",       "unshare",          "setns",
      "clone",           "clone3",        "sethostname",   "setdomainname",    "bpf",
      "perf_event_open", "fanotify_init", "quotactl",      "quotactl_fd",      "lookup_dcookie",
      "syslog",          "open_tree",     "move_mount",    "fsopen",           "fsconfig",
      "fsmount",         "fspick",        "mount_setattr", "name_to_handle_at"}},
    {"CAP_SYS_PTRACE",
     {"kcmp", "pidfd_getfd", "process_madvise", "process_vm_readv", "process_vm_writev"}},
    {"CAP_SYS_CHROOT", {"chroot"}},
    {"CAP_SYS_TIME", {"settimeofday", "stime", "clock_settime", "clock_settime64"}},
    {"CAP_SYS_NICE", {"get_mempolicy", "mbind", "set_mempolicy", "set_mempolicy_home_node"}},
    {"CAP_DAC_READ_SEARCH", {"open_by_handle_at"}},
    {"CAP_SYSLOG", {"syslog"}},
    {"CAP_SYS_TTY_CONFIG", {"vhangup"}},
    {"CAP_SYS_PACCT", {"acct"}},
    {"CAP_SYS_RAWIO", {"iopl", "ioperm"}},
};

/* The namespace flags of clone(2): CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
 * NEWPID, NEWNET. Without CAP_SYS_ADMIN a sandbox clones without them. */
#define CLONE_NS_FLAGS 0x7E020000

static json_t *rule(json_t *names, const char *action)
{
    return json_pack("{s:o, s:s}", "names", names, "action", action);
}

static json_t *arg(int index, json_int_t value, json_int_t two, const char *op)
{
    return json_pack("{s:i, s:I, s:I, s:s}", "index", index, "value", value, "valueTwo", two, "op",
                     op);
}

/* The disk cap counts everything (docs/operations.md, "The disk cap"): ioctl is allowed
 * by request, and btrfs's own requests (type 0x94 in bits 8-15) only when listed here.
 * A nested subvolume or snapshot (BTRFS_IOC_SUBVOL_CREATE 0x5000940e, _V2 0x50009418,
 * BTRFS_IOC_SNAP_CREATE 0x50009401, _V2 0x50009417) is a qgroup of its own that the
 * container's limit does not count; destroying one (0x5000940f, _V2 0x5000943f) and the
 * quota and qgroup calls (QUOTA_CTL 0xc0109428, QGROUP_ASSIGN 0x40189429, QGROUP_CREATE
 * 0x4010942a, QGROUP_LIMIT 0x8030942b, QUOTA_RESCAN 0x4040942c) go with them, as does
 * every other btrfs request: they are denied (EPERM, the profile's default). Listed:
 * the VFS's reflink and dedupe calls, which share the type (cp --reflink), and the
 * read-only filesystem info. The kernel takes the request as an unsigned int, so a
 * filter comparing all 64 bits could be passed by setting the high half: every
 * comparison masks the low 32 bits (on the 32-bit ARM compat entry the argument is 32
 * bits anyway). A rule holds one comparison per argument (the engine splits several on
 * one argument into rules OR'ed together), so "type is not 0x94" is eight rules, one
 * per bit of the type that differs. */
#define IOCTL_TYPE_SHIFT 8
#define BTRFS_IOCTL_TYPE 0x94
static const json_int_t btrfs_ioctls_allowed[] = {
    0x40049409, /* FICLONE */
    0x4020940d, /* FICLONERANGE */
    0xc0189436, /* FIDEDUPERANGE */
    0x8400941f, /* BTRFS_IOC_FS_INFO */
    0x80189439, /* BTRFS_IOC_GET_FEATURES */
};

static void ioctl_rules(json_t *calls)
{
    json_t *r;

    for (int bit = 0; bit < 8; bit++) {
        json_int_t mask = (json_int_t)1 << (IOCTL_TYPE_SHIFT + bit);
        json_int_t differs = (BTRFS_IOCTL_TYPE >> bit & 1) ? 0 : mask;

        r = rule(json_pack("[s]", "ioctl"), "SCMP_ACT_ALLOW");
        json_object_set_new(r, "args",
                            json_pack("[o]", arg(1, mask, differs, "SCMP_CMP_MASKED_EQ")));
        json_array_append_new(calls, r);
    }
    for (size_t i = 0; i < sizeof(btrfs_ioctls_allowed) / sizeof(btrfs_ioctls_allowed[0]); i++) {
        r = rule(json_pack("[s]", "ioctl"), "SCMP_ACT_ALLOW");
        json_object_set_new(
            r, "args",
            json_pack("[o]", arg(1, 0xffffffff, btrfs_ioctls_allowed[i], "SCMP_CMP_MASKED_EQ")));
        json_array_append_new(calls, r);
    }
}

/* ---- no privilege out of the worktree (docs/operations.md) -----------------------
 * The calls that make a file or give it a mode, allowed only without the set-uid and
 * set-gid bits (and mknod only for a regular file): a file the sandbox writes in the
 * worktree never becomes a set-id program on the host. No extended attribute is set
 * (a file capability, security.capability, or an ACL): EOPNOTSUPP, which cp -a, tar
 * and rsync take as "not supported here" and go on. openat2 (its mode is in memory
 * the filter cannot read) says ENOSYS, and callers fall back to openat. */
#define SETID_BITS 06000
#define MKNOD_MASK (0170000 | SETID_BITS)
#define MKNOD_REG 0100000

static const struct {
    const char *name;
    int mode_arg; /* the index of the mode argument */
} mode_calls[] = {
    {"open", 2},   {"openat", 3},   {"creat", 1},     {"chmod", 1},
    {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
};

static void worktree_rules(json_t *calls)
{
    static const struct {
        const char *name;
        int mode_arg;
    } mknods[] = {{"mknod", 1}, {"mknodat", 2}};
    json_t *r;

    for (size_t i = 0; i < sizeof(mode_calls) / sizeof(mode_calls[0]); i++) {
        r = rule(json_pack("[s]", mode_calls[i].name), "SCMP_ACT_ALLOW");
        json_object_set_new(
            r, "args",
            json_pack("[o]", arg(mode_calls[i].mode_arg, SETID_BITS, 0, "SCMP_CMP_MASKED_EQ")));
        json_array_append_new(calls, r);
    }
    for (size_t i = 0; i < sizeof(mknods) / sizeof(mknods[0]); i++) {
        /* a regular file: S_IFREG, or no type at all */
        for (int k = 0; k < 2; k++) {
            r = rule(json_pack("[s]", mknods[i].name), "SCMP_ACT_ALLOW");
            json_object_set_new(r, "args",
                                json_pack("[o]", arg(mknods[i].mode_arg, MKNOD_MASK,
                                                     k ? MKNOD_REG : 0, "SCMP_CMP_MASKED_EQ")));
            json_array_append_new(calls, r);
        }
    }
    r = rule(json_pack("[s,s,s]", "setxattr", "lsetxattr", "fsetxattr"), "SCMP_ACT_ERRNO");
    json_object_set_new(r, "errnoRet", json_integer(EOPNOTSUPP));
    json_array_append_new(calls, r);
    r = rule(json_pack("[s]", "openat2"), "SCMP_ACT_ERRNO");
    json_object_set_new(r, "errnoRet", json_integer(ENOSYS));
    json_array_append_new(calls, r);
}

json_t *dk_seccomp_profile(void)
{
    json_t *calls = json_array();
    json_t *r;

    json_array_append_new(calls, rule(dk_strv_json(allowed), "SCMP_ACT_ALLOW"));
    ioctl_rules(calls);
    worktree_rules(calls);
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        r = rule(json_pack("[s]", "socket"), "SCMP_ACT_ALLOW");
        json_object_set_new(r, "args", json_pack("[o]", arg(0, families[i], 0, "SCMP_CMP_EQ")));
        json_array_append_new(calls, r);
    }
    r = rule(json_pack("[s]", "socketpair"), "SCMP_ACT_ALLOW");
    json_object_set_new(r, "args", json_pack("[o]", arg(0, 1, 0, "SCMP_CMP_EQ")));
    json_array_append_new(calls, r);
    for (size_t i = 0; i < sizeof(personalities) / sizeof(personalities[0]); i++) {
        r = rule(json_pack("[s]", "personality"), "SCMP_ACT_ALLOW");
        json_object_set_new(r, "args",
                            json_pack("[o]", arg(0, personalities[i], 0, "SCMP_CMP_EQ")));
        json_array_append_new(calls, r);
    }
    /* clone without namespace flags; clone3 (flags in memory the filter cannot read)
     * says ENOSYS, so libc falls back to clone */
    r = rule(json_pack("[s]", "clone"), "SCMP_ACT_ALLOW");
    json_object_set_new(r, "args",
                        json_pack("[o]", arg(0, CLONE_NS_FLAGS, 0, "SCMP_CMP_MASKED_EQ")));
    json_object_set_new(r, "excludes", json_pack("{s:[s]}", "caps", "CAP_SYS_ADMIN"));
    json_array_append_new(calls, r);
    r = rule(json_pack("[s]", "clone3"), "SCMP_ACT_ERRNO");
    json_object_set_new(r, "errnoRet", json_integer(ENOSYS));
    json_object_set_new(r, "excludes", json_pack("{s:[s]}", "caps", "CAP_SYS_ADMIN"));
    json_array_append_new(calls, r);
    r = rule(json_pack("[s,s]", "arch_prctl", "modify_ldt"), "SCMP_ACT_ALLOW");
    json_object_set_new(r, "includes", json_pack("{s:[s,s,s]}", "arches", "amd64", "x32", "x86"));
    json_array_append_new(calls, r);
    r = rule(json_pack("[s,s,s,s,s,s]", "arm_fadvise64_64", "arm_sync_file_range",
                       "sync_file_range2", "breakpoint", "cacheflush", "set_tls"),
             "SCMP_ACT_ALLOW");
    json_object_set_new(r, "includes", json_pack("{s:[s,s]}", "arches", "arm", "arm64"));
    json_array_append_new(calls, r);
    for (size_t i = 0; i < sizeof(by_cap) / sizeof(by_cap[0]); i++) {
        json_t *names = json_array();

        for (size_t k = 0; k < 24 && by_cap[i].names[k] != NULL; k++) {
            json_array_append_new(names, json_string(by_cap[i].names[k]));
        }
        r = rule(names, "SCMP_ACT_ALLOW");
        json_object_set_new(r, "includes", json_pack("{s:[s]}", "caps", by_cap[i].cap));
        json_array_append_new(calls, r);
    }
    /* No SCMP_ARCH_X86: libseccomp turns each socket rule into socketcall(call ==
     * SYS_SOCKET) for it, dropping the family comparison (the arguments are in
     * memory), so a 32-bit x86 program (or int $0x80 from a 64-bit one) would open
     * any family. Without the subarchitecture the 32-bit entry is a bad architecture
     * and the engine kills the process. */
    return json_pack("{s:s, s:[{s:s, s:[s]}, {s:s, s:[s]}], s:o}", "defaultAction",
                     "SCMP_ACT_ERRNO", "archMap", "architecture", "SCMP_ARCH_X86_64",
                     "subArchitectures", "SCMP_ARCH_X32", "architecture", "SCMP_ARCH_AARCH64",
                     "subArchitectures", "SCMP_ARCH_ARM", "syscalls", calls);
}

#define PROFILE_MAX (1024 * 1024)

int dk_seccomp_init(struct dk_ctx *c, sbx_error_t **err)
{
    const char *opt = c->host->opt_string(c->opts, "seccomp");
    json_t *profile = NULL;
    json_error_t jerr;
    char *text;

    if (opt == NULL || strcmp(opt, "sbx") == 0) {
        profile = dk_seccomp_profile();
        snprintf(
            c->seccomp_desc, sizeof(c->seccomp_desc),
            "sbx: sockets only UNIX, INET, INET6, NETLINK, PACKET; no io_uring, socketcall, "
            "32-bit x86, btrfs subvolume/quota ioctls; no set-id bits, xattrs or device nodes");
    }
    else if (strcmp(opt, "default") == 0) {
        snprintf(c->seccomp_desc, sizeof(c->seccomp_desc),
                 "engine default (AF_VSOCK and other socket families open)");
        return 0;
    }
    else if (opt[0] == '/') {
        struct stat st;

        if (stat(opt, &st) == 0 && st.st_size > PROFILE_MAX) {
            return c->host->error_set(err, SBX_E_CONFIG, "%s: seccomp profile %s: over %d bytes",
                                      c->host->opt_where(c->opts, "seccomp"), opt, PROFILE_MAX);
        }
        profile = json_load_file(opt, JSON_REJECT_DUPLICATES, &jerr);
        if (profile == NULL || !json_is_object(profile) ||
            !json_is_string(json_object_get(profile, "defaultAction"))) {
            c->host->error_set(err, SBX_E_CONFIG, "%s: seccomp profile %s:%d: %s",
                               c->host->opt_where(c->opts, "seccomp"), opt, profile ? 0 : jerr.line,
                               profile ? "not a profile (an object with \"defaultAction\")"
                                       : jerr.text);
            json_decref(profile);
            return -1;
        }
        snprintf(c->seccomp_desc, sizeof(c->seccomp_desc), "file %.140s", opt);
    }
    else {
        return c->host->error_set(err, SBX_E_CONFIG,
                                  "%s: seccomp '%s': use sbx, default or an absolute path to a "
                                  "profile (JSON)",
                                  c->host->opt_where(c->opts, "seccomp"), opt);
    }
    text = json_dumps(profile, JSON_COMPACT);
    json_decref(profile);
    if (text == NULL || asprintf(&c->seccomp, "seccomp=%s", text) < 0) {
        abort();
    }
    free(text);
    return 0;
}
