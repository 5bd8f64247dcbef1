/* jsonedit.h - minimal in-place edits of a JSON text (see jsonedit.c). */
#ifndef SBX_AGENTS_JSONEDIT_H
#define SBX_AGENTS_JSONEDIT_H

#include <jansson.h>

/* text (a valid JSON object) with text[group][key] set to value, every
 * other byte kept; group is created when missing. NULL when the text is not
 * an object or group is not an object. Caller frees. */
char *sbx_jsonedit_set(const char *text, const char *group, const char *key, json_t *value);

#endif
