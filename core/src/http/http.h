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
/* (added, issue 30) req with its body read from source as it is sent (chunked; req->body
 * ignored): source fills buf with up to cap bytes, *n 0 at the end, non-zero to stop
 * (then -1, SBX_E_CANCELLED; the source keeps its own reason). */
int sbx_http_upload(const struct sbx_http_request *req,
                    int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                    struct sbx_http_response *resp, sbx_error_t **err);

#endif
