/* clock.c - the one monotonic clock helper of the core and the plugins. */
#include <time.h>

#include "sbx/sbx_util.h"

int64_t sbx_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sbx_mono_ms(void)
{
    return sbx_mono_ns() / 1000000;
}
