/* contract_server.h - the contract tests' server helpers. */
#ifndef SBX_TEST_CONTRACT_SERVER_H
#define SBX_TEST_CONTRACT_SERVER_H

#include "test_common.h"

#include <jansson.h>

extern int contract_port;

/* Starts tests/contract/NAME (python3) with --port 0 and, unless NULL,
 * --api-key KEY;
 * reads its port into contract_port. Returns -1 on failure. */
int contract_start_server(const char *name, const char *api_key);
/* SIGTERM and wait. */
void contract_stop_server(void);
/* One call to the server; returns the HTTP status, *out the parsed body. */
long contract_server_call(const char *method, const char *path, const char *body, json_t **out);
/* Replaces the quirk set and forgets the calls seen. */
void contract_quirks(const char *json);
/* The calls seen so far (caller decrefs). */
json_t *contract_calls(void);
/* The first call with METHOD whose path contains FRAG (borrowed), or NULL. */
json_t *contract_find_call(json_t *all, const char *method, const char *frag);
int contract_count_calls(json_t *all, const char *method, const char *frag);

#endif
