/* docker_seedtar.h - a `docker save` archive's owners shifted back from the
 * host engine's user remapping (docker_seedtar.c). */
#ifndef SBX_DOCKER_SEEDTAR_H
#define SBX_DOCKER_SEEDTAR_H

#include <stddef.h>

/* SHA-256 of data as 64 lowercase hex digits. */
void dk_sha256_hex(const void *data, size_t len, char out[65]);

/* Rewrites buf (a `docker save` archive of len bytes) in place: owners in
 * [base, base + count) become id - base, owners below count stay, any other
 * owner is refused; the image configs' rootfs.diff_ids follow the layers'
 * new digests. *changed says whether any id moved. On error returns -1 with
 * a one-line reason in msg (buf may then be partly rewritten). */
int dk_seed_shift(unsigned char *buf, size_t len, unsigned base_uid, unsigned base_gid,
                  unsigned count, int *changed, char *msg, size_t msz);

#endif
