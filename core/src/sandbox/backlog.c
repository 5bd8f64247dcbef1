/* backlog.c - the removal backlog as the engine sees it: sandboxes that were
 * killed and are still there, whatever process queued their removal. */
#include "sandbox/backlog.h"

#include <string.h>

static void count(void *ud, const char *id, const struct sbx_kv *labels, size_t n)
{
    int *k = ud;

    (void)id;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(labels[i].name, "sbx.engine.state") == 0 &&
            (strcmp(labels[i].value, "exited") == 0 || strcmp(labels[i].value, "dead") == 0 ||
             strcmp(labels[i].value, "removing") == 0)) {
            (*k)++;
        }
    }
}

int sbx_removal_backlog(struct sbx_open_instance *prov, sbx_error_t **err)
{
    int k = 0;

    if (sbx_instance_provider(prov)->list(prov->ctx, "sbx.task", NULL, count, &k, err) < 0) {
        return -1;
    }
    return k;
}
