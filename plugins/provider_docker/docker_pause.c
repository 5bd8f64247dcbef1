/* docker_pause.c - pause and resume a sandbox (docs/tasks.md, "Pause and
 * resume"): the engine's pause freezes every process of the container in its
 * cgroup (the freezer), so it uses no CPU at once and keeps its memory;
 * unpause thaws them where they stopped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

static int post(struct dk_ctx *c, const char *id, const char *what, sbx_error_t **err)
{
    char *eid = sbx_url_escape(id);
    char path[512];
    long status = 0;
    json_t *reply = NULL;
    int rc;

    if (eid == NULL || strlen(eid) > 300) {
        free(eid);
        return c->host->error_set(err, SBX_E_USAGE, "docker: bad sandbox id");
    }
    snprintf(path, sizeof(path), "/containers/%s/%s", eid, what);
    free(eid);
    rc = dk_request(c, "POST", path, NULL, &status, &reply, err);
    if (rc == 0 && status != 204) {
        rc = c->host->error_set(err, status == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                                "docker: %s of sandbox %.12s: HTTP %ld: %s", what, id, status,
                                dk_reply_message(reply));
    }
    json_decref(reply);
    return rc;
}

int dk_pause(void *ctx, const char *id, int to_disk, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    if (to_disk) {
        /* docker checkpoint (CRIU) exists only in an engine started with
         * experimental features, and sbx does not drive it: one line, no attempt */
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "pause --to-disk is not available with the docker provider: the "
                                  "engine's checkpoints need its experimental mode and CRIU, which "
                                  "sbx does not use; 'sbx task pause' without --to-disk frees the "
                                  "CPU and keeps the memory");
    }
    return post(c, id, "pause", err);
}

int dk_resume(void *ctx, const char *id, sbx_error_t **err)
{
    return post(ctx, id, "unpause", err);
}
