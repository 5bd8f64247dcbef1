/* fuzz_api_submit.c - the runner API's POST /v1/jobs body parser
 * (runner_parse_submit, core/src/runner/api_submit.c): JSON from an API client,
 * including the worktree it names, confined below runner.worktree_roots
 * (util/confine.c). The fixture's root is a private directory with
 * subdirectories and symlinks that lead out of it; "@ROOT" in the input is
 * replaced by that root's path, so inputs can name paths inside it. A
 * worktree accepted outside the root is a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "fuzz_file.h"
#include "runner/runner.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/api_int.h"
#include "runner/jobs.h"
#include "util/log.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sbx_config *cfg;
static struct sbx_runner fixture;
static char root[512];

static void setup(void)
{
    char state[512], path[600];
    char why[256];
    char *roots[1];

    sbx_log_setup(SBX_LOG_ERROR, SBX_LOG_TEXT);
    cfg = sbx_config_defaults(); /* kept for the process's life */
    snprintf(root, sizeof(root), "%s/root", fuzz_dir());
    snprintf(state, sizeof(state), "%s/root/state", fuzz_dir());
    fuzz_write_file("root/a/b/file", (const uint8_t *)"x", 1);
    fuzz_write_file("root/state/tasks/x", (const uint8_t *)"x", 1);
    snprintf(path, sizeof(path), "%s/out", root);
    if (symlink("/", path) < 0) {
        abort();
    }
    snprintf(path, sizeof(path), "%s/a/up", root);
    if (symlink("../..", path) < 0) {
        abort();
    }
    snprintf(path, sizeof(path), "%s/a/in", root);
    if (symlink("b", path) < 0) {
        abort();
    }
    snprintf(path, sizeof(path), "%s/a/st", root);
    if (symlink("../state", path) < 0) {
        abort();
    }
    roots[0] = root;
    fixture.cfg = cfg;
    if (sbx_confine_init(&fixture.confine, "runner.worktree_roots", roots, 1, state, why,
                         sizeof(why)) < 0) {
        abort();
    }
}

/* path is dir or below it. */
static int within(const char *path, const char *dir)
{
    size_t n = strlen(dir);

    return strncmp(path, dir, n) == 0 && (path[n] == '/' || path[n] == '\0');
}

/* The body with every "@ROOT" replaced by the fixture's root. */
static char *expand(const uint8_t *data, size_t size, size_t *len)
{
    size_t rl = strlen(root), cap = size + 1, n = 0;
    char *out = xmalloc(cap);

    for (size_t i = 0; i < size; i++) {
        if (i + 5 <= size && memcmp(data + i, "@ROOT", 5) == 0) {
            cap += rl;
            out = xrealloc(out, cap);
            memcpy(out + n, root, rl);
            n += rl;
            i += 4;
            continue;
        }
        out[n++] = (char)data[i];
    }
    out[n] = '\0';
    *len = n;
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rjob *j;
    json_t *labels = NULL;
    char msg[512];
    char *body;
    size_t len;
    int code;

    if (size > SBX_RUNNER_MAX_BODY) {
        return 0; /* refused with 413 before parsing */
    }
    if (cfg == NULL) {
        setup();
    }
    body = expand(data, size, &len); /* as handle_submit: a NUL-ended copy */
    j = runner_job_new();
    msg[0] = '\0';
    code = runner_parse_submit(&fixture, body, len, j, &labels, msg, sizeof(msg));
    if (code == 0) {
        const struct rjob_req *q = rjob_req(j);

        if (q->argv == NULL || q->argv[0] == NULL || q->argv[0][0] == '\0') {
            __builtin_trap();
        }
        if (q->worktree != NULL && (!within(q->worktree, fixture.confine.real[0]) ||
                                    within(q->worktree, fixture.confine.state_dir) ||
                                    within(fixture.confine.state_dir, q->worktree))) {
            __builtin_trap(); /* out of the root, or in or above the state dir */
        }
        json_decref(labels);
    }
    else if (msg[0] == '\0' || code < 400 || code > 499) {
        __builtin_trap(); /* a refusal is a 4xx that says why */
    }
    runner_job_free(j);
    free(body);
    return 0;
}
