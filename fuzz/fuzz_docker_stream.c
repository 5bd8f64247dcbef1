/* fuzz_docker_stream.c - the Docker provider's demultiplexer of the attach/exec
 * stream (plugins/provider_docker/docker_stream.c): 8-byte frame headers and
 * payloads from the engine, i.e. from whatever the sandbox's command writes.
 * The first input byte picks how the stream is cut into transfer chunks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct sink {
    size_t bytes[3];
    int stop_after; /* the reader stops after this many calls (0: never) */
    int calls;
};

static int sink_out(void *ud, int stream, const char *data, size_t len)
{
    struct sink *s = ud;

    if (stream != 1 && stream != 2) {
        __builtin_trap();
    }
    if (len > 0) {
        volatile char c = data[0];
        volatile char last = data[len - 1];
        (void)c;
        (void)last;
    }
    s->bytes[stream] += len;
    s->calls++;
    return s->stop_after != 0 && s->calls >= s->stop_after;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct dk_demux d;
    struct sink s;
    size_t off = 1, chunk;

    if (size < 1) {
        return 0;
    }
    chunk = (size_t)(data[0] & 0x3f) + 1;
    memset(&d, 0, sizeof(d));
    memset(&s, 0, sizeof(s));
    s.stop_after = (data[0] & 0xc0) == 0xc0 ? 3 : 0;
    d.out = sink_out;
    d.out_ud = &s;
    while (off < size) {
        size_t k = size - off < chunk ? size - off : chunk;
        /* each chunk in its own buffer: a read past it is caught */
        char *c = malloc(k);

        if (c == NULL) {
            abort();
        }
        memcpy(c, data + off, k);
        if (dk_demux_feed(&d, c, k) != 0) {
            free(c);
            break;
        }
        free(c);
        off += k;
    }
    if (d.syserr_len >= sizeof(d.syserr) || d.syserr[d.syserr_len] != '\0') {
        __builtin_trap();
    }
    return 0;
}
