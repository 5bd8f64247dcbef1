/* redact.h - a streaming redactor for command output.
 *
 * A redactor holds a set of (name, value) secrets. Each output stream of an
 * exec (stdout, stderr) gets its own sbx_redact_stream; every chunk read from
 * the sandbox goes through sbx_redact_stream_write() and the filtered bytes
 * reach the sink. Any occurrence of a value becomes "[redacted:NAME]", also
 * when the value is split across chunks: the stream holds back at most
 * max(value length) - 1 bytes, which sbx_redact_stream_finish() releases at
 * the end of the stream.
 *
 * Rules (docs/credentials.md, "Redaction"):
 *   - values shorter than SBX_REDACT_MIN_LEN bytes are not redacted (a one-
 *     or two-byte value would mangle all output and hides nothing);
 *     sbx_redactor_add() returns 1 for them so the caller can warn by NAME;
 *   - at one position the longest value wins; the stream waits while a longer
 *     value could still match, so the output never depends on how the input
 *     was split into chunks;
 *   - overlapping occurrences are merged into one redacted run: its marker
 *     names the first secret, and a new marker is added only when another
 *     secret extends the run;
 *   - the data may be binary (NUL bytes included).
 *
 * A redactor is read-only once built and may be shared by the streams of
 * several threads; one stream is used by one thread at a time. Both zero the
 * secret bytes they hold before freeing them.
 */
#ifndef SBX_CRED_REDACT_H
#define SBX_CRED_REDACT_H

#include <stddef.h>

#include "sbx/sbx_credential.h"
#include "util/error.h"

#define SBX_REDACT_MIN_LEN 4
/* What a secret's value becomes in output: "[redacted:" NAME "]". */
#define SBX_REDACT_MARKER_OPEN "[redacted:"
#define SBX_REDACT_MARKER_CLOSE "]"

struct sbx_redactor;
struct sbx_redact_stream;

/* Receives filtered output. Return 0 to continue, non-zero to stop (the
 * write then fails). */
typedef int (*sbx_redact_sink_fn)(void *userdata, const char *data, size_t len);

struct sbx_redactor *sbx_redactor_create(void);
/* Adds a secret (both strings are copied). Returns 0 when added, 1 when the
 * value is shorter than SBX_REDACT_MIN_LEN and will not be redacted. */
int sbx_redactor_add(struct sbx_redactor *r, const char *name, const char *value);
size_t sbx_redactor_count(const struct sbx_redactor *r);
/* A redactor holding every value of a lease; each value too short to be
 * redacted is logged as a warning by name (never by value). */
struct sbx_redactor *sbx_redactor_from_lease(const struct sbx_lease *lease);
void sbx_redactor_destroy(struct sbx_redactor *r);

/* The redactor must outlive its streams. */
struct sbx_redact_stream *sbx_redact_stream_new(const struct sbx_redactor *r,
                                                sbx_redact_sink_fn sink, void *userdata);
/* Filters one chunk; returns -1 with *err set when the sink refused. */
int sbx_redact_stream_write(struct sbx_redact_stream *s, const void *data, size_t len,
                            sbx_error_t **err);
/* End of the stream: decides and flushes the held-back bytes. The stream may
 * be written again afterwards (as a new stream). */
int sbx_redact_stream_finish(struct sbx_redact_stream *s, sbx_error_t **err);
void sbx_redact_stream_free(struct sbx_redact_stream *s);

/* Redacts a whole buffer at once (error messages, records). Returns a
 * NUL-terminated copy owned by the caller; *out_len (if not NULL) gets its
 * length. */
char *sbx_redact_buffer(const struct sbx_redactor *r, const void *data, size_t len,
                        size_t *out_len);

#endif
