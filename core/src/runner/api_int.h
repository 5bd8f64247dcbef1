/* api_int.h - the API's handlers and replies, for a client already
 * authenticated (api.c, api_list.c, api_http.c, api_snap.c, api_term.c, api_submit.c). */
#ifndef SBX_RUNNER_API_INT_H
#define SBX_RUNNER_API_INT_H

#include <jansson.h>
#include <stddef.h>

#include "util/error.h"

struct sbx_runner;
struct evhttp_request;
struct runner_client;
struct sbx_store;
struct sbx_store_owner;
struct rjob;
struct rtask;

/* (added, api.c) The box of the fleet that holds a job (task 0) or a live
 * task (task 1) when it is another box: 1 and *o, else 0; on st. */
int runner_elsewhere(struct sbx_runner *r, struct sbx_store *st, int task, const char *id,
                     struct sbx_store_owner *o);
/* (added, api.c) The HTTP status of a refusal. */
int runner_http_code(const sbx_error_t *err);

/* api.c: the handlers, for a client `who` already authenticated */
void runner_reply_json(struct evhttp_request *req, int code, json_t *body);
void runner_reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void runner_handle_submit(struct sbx_runner *r, struct evhttp_request *req,
                          const struct runner_client *who);
void runner_handle_job_get(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                           const struct runner_client *who);
void runner_handle_output(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          int follow, int frames, const struct runner_client *who);
void runner_handle_cancel(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who);
void runner_handle_task_end(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                            const struct runner_client *who);
/* (api_submit.c) Parses and checks a POST /v1/jobs body (len bytes, NUL-ended) into *j and
 * *labels (a new reference or NULL): 0, or the HTTP status with the reason in
 * msg. Only r->cfg is used (fuzz/fuzz_api_submit.c calls it without a runner). */
int runner_parse_submit(struct sbx_runner *r, const char *body, size_t len, struct rjob *j,
                        json_t **labels, char *msg, size_t mlen);
void runner_streams_flush(struct sbx_runner *r, struct rjob *j, int final);
/* (added) Frees j's follows whose requests are gone (the runner stops, after
 * evhttp_free). */
void runner_streams_free(struct rjob *j);

/* api_list.c */
void runner_handle_jobs_list(struct sbx_runner *r, struct evhttp_request *req,
                             const struct runner_client *who);
/* (changed, api_http.c) ready 0: /healthz (store and engine); 1: /readyz (and
 * not draining or stopping) */
void runner_handle_health(struct sbx_runner *r, struct evhttp_request *req, int ready);

/* api_http.c */
int runner_api_bind(struct sbx_runner *r, sbx_error_t **err);

/* api_term.c */
/* (added, api_term.c) A stopping runner cancels the terminals open now (their tasks
 * end with it). */
void runner_task_io_stop(struct sbx_runner *r);

/* api_snap.c */
/* (added, issue 30) A submit's `from` (api_snap.c): the snapshot must exist, be the
 * client's own (any with read-all), of the job's provider, the client must have the
 * scope `snapshot`, and the task must not be running yet. 0 and j->image set, or -1
 * having replied (403, 404, 400, 409 naming the field). */
int runner_submit_from(struct sbx_runner *r, struct evhttp_request *req,
                       const struct runner_client *who, struct rjob *j);
/* (added, api_snap.c) A hold (running++) taken off the loop ends, on the loop: a task
 * whose job ended meanwhile is ended now. */
void runner_task_let_go(struct sbx_runner *r, struct rtask *t);

#endif
