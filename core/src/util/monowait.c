/* monowait.c - see monowait.h */
#include "util/monowait.h"

#include <time.h>

#include <sbx/sbx_util.h>

void sbx_cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

void sbx_cond_wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t at_ms,
                            const volatile int *stop)
{
    struct timespec until;

    until.tv_sec = (time_t)(at_ms / 1000);
    until.tv_nsec = (long)(at_ms % 1000) * 1000000;
    /* (changed, issue 31) an atomic read: image_check.c sets its flag atomically */
    while (!__atomic_load_n(stop, __ATOMIC_ACQUIRE) && sbx_mono_ms() < at_ms) {
        pthread_cond_timedwait(cv, mu, &until);
    }
}
