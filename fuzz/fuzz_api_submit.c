/* fuzz_api_submit.c - the runner API's POST /v1/jobs body parser
 * (runner_parse_submit, core/src/runner/api.c): JSON from an API client. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "runner/runner_int.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sbx_config *cfg;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sbx_runner r;
    struct rjob *j;
    json_t *labels = NULL;
    char msg[512];
    char *body;

    if (size > SBX_RUNNER_MAX_BODY) {
        return 0; /* refused with 413 before parsing */
    }
    if (cfg == NULL) {
        cfg = sbx_config_defaults(); /* kept for the process's life */
    }
    memset(&r, 0, sizeof(r));
    r.cfg = cfg;
    body = xmalloc(size + 1); /* as handle_submit: a NUL-ended copy */
    memcpy(body, data, size);
    body[size] = '\0';
    j = xcalloc(1, sizeof(*j));
    msg[0] = '\0';
    if (runner_parse_submit(&r, body, size, j, &labels, msg, sizeof(msg)) == 0) {
        if (j->argv == NULL || j->argv[0] == NULL || j->argv[0][0] == '\0') {
            __builtin_trap();
        }
        json_decref(labels);
    }
    else if (msg[0] == '\0') {
        __builtin_trap(); /* a refusal always says why */
    }
    runner_job_free(j);
    free(body);
    return 0;
}
