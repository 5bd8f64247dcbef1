/* error.c - error helpers of the SDK helper library. */
#include "sbx/sbx_util.h"

void sbx_err_log_free(const struct sbx_host_api *host, const char *instance,
                      enum sbx_log_level level, sbx_error_t **err, const char *what)
{
    if (err == NULL || *err == NULL) {
        return;
    }
    host->log(instance, level, "%s: %s", what, sbx_err_msg(*err));
    host->error_free(err);
}
