/* monowait.h - a condition variable on the monotonic clock, and a wait on it
 * until a time or a stop flag (the runner's background threads: probe.c,
 * image_check.c). */
#ifndef SBX_UTIL_MONOWAIT_H
#define SBX_UTIL_MONOWAIT_H

#include <pthread.h>
#include <stdint.h>

/* Initialises cv to time out against CLOCK_MONOTONIC. */
void sbx_cond_init_mono(pthread_cond_t *cv);

/* With mu held: waits on cv (made by sbx_cond_init_mono) until sbx_mono_ms()
 * reaches at_ms or *stop is set; wakeups in between go back to waiting. */
void sbx_cond_wait_until_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t at_ms,
                            const volatile int *stop);

#endif
