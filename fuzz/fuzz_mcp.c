/* fuzz_mcp.c - the MCP server (core/src/mcp): the stdio framing (one JSON-RPC
 * message per line, sbx_mcp_server_serve), the JSON-RPC checks (jsonrpc.c)
 * and the dispatch to the lifecycle methods and tools (server.c, tools.c),
 * with a fixture backend that answers every tool at once. Bit 0 of the first
 * byte: 1 feeds the rest through serve() (tools/call on threads), 0 line by
 * line to sbx_mcp_server_line synchronously. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "mcp/jsonrpc.h"
#include "mcp/server.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static json_t *job_obj(const char *id)
{
    return json_pack("{s:s, s:s, s:i}", "job", id ? id : "j-1", "state", "finished", "exit_code",
                     0);
}

static json_t *fx_run(void *ctx, const struct sbx_mcp_run *r, struct sbx_mcp_call *call,
                      sbx_error_t **err)
{
    size_t n = 0;

    (void)ctx;
    (void)call;
    if (r->argv == NULL || r->argv[0] == NULL) {
        __builtin_trap(); /* tools.c promises a non-empty argv */
    }
    while (r->argv[n] != NULL) {
        (void)strlen(r->argv[n]);
        n++;
    }
    if (r->task != NULL && strcmp(r->task, "fail") == 0) {
        sbx_error_set(err, SBX_E_USAGE, "fixture: task %s refused", r->task);
        return NULL;
    }
    return job_obj(NULL);
}

static json_t *fx_end(void *ctx, const char *task, sbx_error_t **err)
{
    (void)ctx;
    (void)err;
    return json_pack("{s:s}", "task", task);
}

static json_t *fx_job(void *ctx, const char *job, sbx_error_t **err)
{
    (void)ctx;
    if (strlen(job) > 3 && job[0] == 'x') {
        sbx_error_set(err, SBX_E_NOTFOUND, "fixture: no job %s", job);
        return NULL;
    }
    return job_obj(job);
}

static json_t *fx_queue(void *ctx, sbx_error_t **err)
{
    (void)ctx;
    (void)err;
    return json_pack("{s:[]}", "jobs");
}

static void fx_nop(void *ctx)
{
    (void)ctx;
}

static const struct sbx_mcp_backend_ops fx_ops = {
    .mode = "embedded",
    .run = fx_run,
    .end = fx_end,
    .job = fx_job,
    .cancel = fx_job,
    .queue = fx_queue,
    .shutdown = fx_nop,
    .destroy = fx_nop,
};

static int fx_write(void *ud, const char *line, size_t len)
{
    size_t *total = ud;

    if (len == 0 || line[len - 1] != '\n' || memchr(line, '\n', len - 1) != NULL) {
        __builtin_trap(); /* one message per line */
    }
    *total += len;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sbx_mcp_backend b = {.ops = &fx_ops, .ctx = NULL};
    struct sbx_mcp_server *s;
    size_t written = 0;
    static int quiet;

    if (!quiet) {
        sbx_log_setup(SBX_LOG_ERROR, SBX_LOG_TEXT);
        quiet = 1;
    }
    if (size < 1 || size > (1u << 20)) {
        return 0;
    }
    s = sbx_mcp_server_new(&b, fx_write, &written);
    if (data[0] & 1) {
        int fd = memfd_create("fuzz-mcp", MFD_CLOEXEC);
        volatile int stop = 0;

        if (fd < 0 || write(fd, data + 1, size - 1) != (ssize_t)(size - 1) ||
            lseek(fd, 0, SEEK_SET) != 0) {
            abort();
        }
        sbx_mcp_server_serve(s, fd, &stop);
        close(fd);
    }
    else {
        const char *p = (const char *)data + 1, *end = (const char *)data + size;

        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
            /* each line in its own buffer, not NUL-ended: a read past it is caught */
            char *line = malloc(len ? len : 1);

            if (line == NULL) {
                abort();
            }
            memcpy(line, p, len);
            sbx_mcp_server_line(s, line, len, 0);
            free(line);
            p += len + 1;
        }
    }
    sbx_mcp_server_free(s);
    return 0;
}
