/* rlimit.c - raising the descriptor limit of the runner and the keeper. */
#include "util/rlimit.h"

#include <errno.h>
#include <string.h>
#include <sys/resource.h>

#include "util/log.h"

long sbx_raise_nofile(const char *who)
{
    struct rlimit rl;
    rlim_t old;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
        sbx_warn("%s: cannot read RLIMIT_NOFILE: %s", who, strerror(errno));
        return -1;
    }
    if (rl.rlim_cur == rl.rlim_max) {
        sbx_debug("%s: descriptor limit %llu (already the hard limit)", who,
                  (unsigned long long)rl.rlim_cur);
        return (long)rl.rlim_cur;
    }
    old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        sbx_warn("%s: cannot raise RLIMIT_NOFILE from %llu to %llu: %s", who,
                 (unsigned long long)old, (unsigned long long)rl.rlim_max, strerror(errno));
        return -1;
    }
    sbx_debug("%s: descriptor limit raised from %llu to %llu", who, (unsigned long long)old,
              (unsigned long long)rl.rlim_cur);
    return (long)rl.rlim_cur;
}
