/* info_box.h - `sbx info`'s lines on admission (memory budget, CPU clamp) and
 * the kernel's shared per-user counters (docs/operations.md). */
#ifndef SBX_CLI_INFO_BOX_H
#define SBX_CLI_INFO_BOX_H

#include <jansson.h>

#include "config/config.h"

/* Adds "admission" and "kernel" to j. With text, prints their lines to
 * stdout; a pool below its need is also a warning on stderr. */
void sbx_info_box(const struct sbx_config *cfg, const char *state, json_t *j, int text);

#endif
