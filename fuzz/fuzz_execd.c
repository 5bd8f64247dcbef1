/* fuzz_execd.c - the OpenSandbox provider's reader of execd's event stream
 * (plugins/provider_opensandbox/execd.c: on_data, the event parser, and
 * stream_finish): what execd, inside the sandbox, sends back for a command.
 * The parser is static in the plugin, so its source is compiled into this
 * harness. The first input byte picks how the stream is cut into transfer
 * chunks. */
#include "execd.c"

#include <stdint.h>

#include "plugin/host.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sink(void *ud, int stream, const char *data, size_t len)
{
    size_t *total = ud;

    if (stream != 1 && stream != 2) {
        __builtin_trap();
    }
    if (len > 0) {
        volatile char first = data[0];
        volatile char last = data[len - 1];
        (void)first;
        (void)last;
    }
    *total += len;
    return *total > (1u << 20); /* a reader that stops early */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct osb_ctx c;
    static int ready;
    static const char *const argv[] = {"true", NULL};
    struct sbx_exec_spec spec;
    struct stream s;
    size_t total = 0, off = 1, chunk;
    int stopped = 0;

    if (!ready) {
        c.host = sbx_host_api_get();
        c.instance = "fuzz";
        pthread_mutex_init(&c.lock, NULL);
        ready = 1;
    }
    if (size < 1 || size > (1u << 20)) {
        return 0;
    }
    chunk = (data[0] & 0x80) ? (size_t)(data[0] & 0x7f) + 1 : size;
    memset(&spec, 0, sizeof(spec));
    spec.argv = argv;
    spec.on_output = sink;
    spec.output_userdata = &total;
    memset(&s, 0, sizeof(s));
    s.c = &c;
    s.sandbox_id = "sb-fuzz";
    s.spec = &spec;
    while (off < size) {
        size_t k = size - off < chunk ? size - off : chunk;
        char *buf = xmalloc(k); /* each chunk alone: a read past it is caught */

        memcpy(buf, data + off, k);
        stopped = on_data(&s, buf, k);
        free(buf);
        off += k;
        if (stopped) {
            break;
        }
    }
    if (!stopped) {
        stream_finish(&s);
    }
    if (s.terminal == TERM_ERROR && s.start_error == NULL &&
        (s.exit_status < 0 || s.exit_status > 255)) {
        __builtin_trap(); /* an exit status is 0..255 */
    }
    free(s.buf);
    free(s.cmd_id);
    free(s.start_error);
    free(s.protocol_error);
    return 0;
}
