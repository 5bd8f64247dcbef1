/* http.h - the core's libcurl wrapper; the only place that includes curl.h. */
#ifndef SBX_HTTP_HTTP_H
#define SBX_HTTP_HTTP_H

#include "sbx/sbx_host.h"
#include "util/error.h"

/* Once per process, before threads start (idempotent). */
void sbx_http_global_init(void);
int sbx_http_request(const struct sbx_http_request *req, struct sbx_http_response *resp,
                     sbx_error_t **err);
void sbx_http_response_free(struct sbx_http_response *resp);

#endif
