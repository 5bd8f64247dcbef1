/* cleanup.h - scope-bound cleanup (GCC/Clang cleanup attribute), crun style. */
#ifndef SBX_UTIL_CLEANUP_H
#define SBX_UTIL_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void sbx_freep(void *p)
{
    void **pp = (void **)p;

    free(*pp);
    *pp = NULL;
}

static inline void sbx_closep(int *fd)
{
    int saved = errno;

    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    errno = saved;
}

static inline void sbx_fclosep(FILE **f)
{
    int saved = errno;

    if (*f != NULL) {
        fclose(*f);
        *f = NULL;
    }
    errno = saved;
}

#define cleanup_free __attribute__((cleanup(sbx_freep)))
#define cleanup_close __attribute__((cleanup(sbx_closep)))
#define cleanup_fclose __attribute__((cleanup(sbx_fclosep)))

/* Hands ownership out of a cleanup-attributed variable. */
#define steal_pointer(pp)                                                                    \
    __extension__({                                                                          \
        __typeof__(*(pp)) steal_tmp_ = *(pp);                                                \
        *(pp) = NULL;                                                                        \
        steal_tmp_;                                                                          \
    })

static inline int sbx_steal_fd(int *fd)
{
    int r = *fd;

    *fd = -1;
    return r;
}

#endif
