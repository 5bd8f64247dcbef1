/* backend.h - what the MCP tools call: one implementation, the runner's API
 * (backend_runner.c). With `runner.listen` set it is `sbx serve`'s; without,
 * `sbx mcp` starts a private one-box runner on a thread of its own process
 * (runner/private.h) and talks to that one (mode "embedded": its tasks end
 * with the process). A configured runner that does not answer fails the call
 * with the reason: it never falls back to the private one (docs/architecture.md,
 * One implementation). The job object is the same in both modes (docs/mcp.md). */
#ifndef SBX_MCP_BACKEND_H
#define SBX_MCP_BACKEND_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "config/config.h"
#include "util/error.h"

/* Output kept per stream and job (the first and the last half). */
#define SBX_MCP_OUTPUT_CAP (64u << 10)
/* Default and largest per-command timeout of sandbox_run, in seconds. */
#define SBX_MCP_DEFAULT_TIMEOUT (10 * 60)
/* Jobs whose call's timeout and cancel reason this process remembers for
 * sandbox_job (oldest dropped first); the record and output are the runner's. */
#define SBX_MCP_JOB_HISTORY 256

/* One tools/call in flight. The server sets cancelled (notifications/cancelled,
 * shutdown); the backend polls it and cancels the job. Read and write it
 * with sbx_mcp_call_cancel / sbx_mcp_call_cancelled (atomic). It is also a
 * `const volatile int *` stop flag for a blocking call: the backend gives it
 * to sbx_runner_follow (and its timeout sets it, as a client's cancel would). */
struct sbx_mcp_call {
    volatile int cancelled;
};

static inline void sbx_mcp_call_cancel(struct sbx_mcp_call *c)
{
    __atomic_store_n(&c->cancelled, 1, __ATOMIC_RELEASE);
}

static inline int sbx_mcp_call_cancelled(const struct sbx_mcp_call *c)
{
    return c != NULL && __atomic_load_n(&c->cancelled, __ATOMIC_ACQUIRE);
}

struct sbx_mcp_run {
    const char *const *argv; /* NULL-terminated, non-empty */
    const char *task;        /* NULL: a fresh task that ends with the command */
    const char *pool;        /* "ci" or "agent"; NULL: agent */
    const char *worktree;    /* host directory mounted at /workspace, or NULL */
    const char *provider;    /* instance name, or NULL: config `provider` */
    int64_t timeout;         /* seconds; 0: SBX_MCP_DEFAULT_TIMEOUT */
    const char *from;        /* (added, issue 30) a snapshot id the new task starts from */
};

/* Each call returns a JSON object (the tool's structuredContent) or NULL and
 * *err (a failure before any job existed: bad argument, unknown task...).
 * run and job return the job object even when the command failed; its
 * "state" is running, finished (the command ran to its end, any exit
 * status), failed (sbx failed), cancelled or timed_out. */
struct sbx_mcp_backend_ops {
    const char *mode; /* "embedded" (a private runner) or "runner" */
    json_t *(*run)(void *ctx, const struct sbx_mcp_run *r, struct sbx_mcp_call *call,
                   sbx_error_t **err);
    json_t *(*end)(void *ctx, const char *task, sbx_error_t **err);
    json_t *(*job)(void *ctx, const char *job, sbx_error_t **err);
    json_t *(*cancel)(void *ctx, const char *job, sbx_error_t **err);
    json_t *(*queue)(void *ctx, sbx_error_t **err);
    /* Refuses new calls (stdin closed, signal); the server then cancels the
     * calls in flight, each of which cancels its job. */
    void (*shutdown)(void *ctx);
    /* Frees ctx (after all calls returned); a private runner is stopped: every
     * task it still holds is ended, its directory removed. */
    void (*destroy)(void *ctx);
    /* (added, issue 30) sandbox_read_file, sandbox_write_file (tools_files.c): one
     * regular file of a task's sandbox, at most SBX_FILES_ONE_MAX bytes; path absolute,
     * resolved inside the sandbox. read: *data malloc'd (NUL-terminated). */
    int (*read_file)(void *ctx, const char *task, const char *path, char **data, size_t *len,
                     sbx_error_t **err);
    int (*write_file)(void *ctx, const char *task, const char *path, const char *data, size_t len,
                      sbx_error_t **err);
    /* (added, issue 30) sandbox_snapshot, sandbox_fork (tools_snap.c): a snapshot of a
     * kept task's files (for_fork: the record says "fork": true); its record. A fork is
     * this, then run with `from` in a new task. */
    json_t *(*snapshot)(void *ctx, const char *task, int for_fork, sbx_error_t **err);
};

struct sbx_mcp_backend {
    const struct sbx_mcp_backend_ops *ops;
    void *ctx;
};

/* The backend for cfg: "runner" when runner.listen is set; else a private
 * runner is started (cfg's runner settings are rewritten to it, so cfg must
 * outlive the backend) with the directory `sbx mcp` runs in as its one
 * worktree root, and the mode is "embedded". plugin_dir is kept (not copied)
 * for the process's life. */
int sbx_mcp_backend_open(struct sbx_config *cfg, const char *plugin_dir,
                         struct sbx_mcp_backend *out, sbx_error_t **err);
/* The runner client: every call goes to the runner's API; a runner that does
 * not answer fails the call with the reason (no fallback). */
void sbx_mcp_backend_runner(const struct sbx_config *cfg, struct sbx_mcp_backend *out);

/* boxinfo.c: sandbox_queue's object from the runner's GET /v1/queue (taken)
 * and its running and queued job records (an array, taken): {mode, runner,
 * tasks, running_jobs, queued, slots, pools, box}. */
json_t *sbx_mcp_queue_view(json_t *queue, json_t *jobs, const char *mode, const char *runner);

/* Output capture: the first and last SBX_MCP_OUTPUT_CAP/2
 * bytes of a stream, and how much there was. */
struct sbx_mcp_outbuf {
    char *head;
    size_t head_len;
    char *tail; /* a ring */
    size_t tail_len;
    size_t tail_pos;
    uint64_t total;
};

void sbx_mcp_outbuf_add(struct sbx_mcp_outbuf *b, const char *data, size_t len);
/* The kept text as valid UTF-8 (invalid bytes become U+FFFD), with a
 * "[... N bytes omitted ...]" line between head and tail when cut. */
char *sbx_mcp_outbuf_text(const struct sbx_mcp_outbuf *b, int *truncated);
void sbx_mcp_outbuf_free(struct sbx_mcp_outbuf *b);
/* Copies s (len bytes) replacing invalid UTF-8 and NUL with U+FFFD. */
char *sbx_mcp_utf8_clean(const char *s, size_t len);

/* jobobj.c: what this process knows of one of its jobs beyond the runner's
 * record (backend_runner.c keeps the last SBX_MCP_JOB_HISTORY). */
struct sbx_mcp_note {
    char job[32];
    int64_t timeout; /* seconds; 0: not known (another process's job) */
    int timed_out;   /* its call's timeout cancelled it */
    const char *why; /* who cancelled it (a static text), or NULL */
};

/* The runner's job record and the output read from it (out[0] stdout, out[1]
 * stderr; out_error: why it could not be read, or NULL) as the tool's job
 * object, with mode and the record under "record". */
json_t *sbx_mcp_job_object(json_t *rec, const struct sbx_mcp_outbuf out[2], const char *out_error,
                           struct sbx_mcp_note n, const char *mode);
/* A record's state that is not final (queued, running). */
int sbx_mcp_job_active(const char *state);

/* jobobj.c: sandbox_run's timeout: a thread that cancels the call (as the
 * client would) when it expires. */
struct sbx_mcp_timer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sbx_mcp_call *call;
    int64_t seconds;
    int done;
    int fired;
    pthread_t th;
};

int sbx_mcp_timer_start(struct sbx_mcp_timer *t, struct sbx_mcp_call *call, int64_t seconds);
/* Stops the timer; 1 when it had fired. */
int sbx_mcp_timer_stop(struct sbx_mcp_timer *t);

#endif
