/* jsonc.h - JSON with comments, as the Dev Container spec allows for
 * devcontainer.json and devcontainer-feature.json: // and block comments
 * and trailing commas are accepted, line numbers are kept. */
#ifndef SBX_IMAGE_JSONC_H
#define SBX_IMAGE_JSONC_H

#include <jansson.h>
#include <stddef.h>

/* Rewrites text in place: comments and trailing commas become spaces
 * (newlines kept, so the parser's line numbers stay true). */
void sbx_jsonc_strip(char *text, size_t len);
/* Reads path (at most max bytes) as JSONC; NULL with jerr filled on error. */
json_t *sbx_jsonc_load_file(const char *path, size_t max, size_t flags, json_error_t *jerr);

#endif
