/* envname.h - the one rule for the names of a command's variables (`sbx run
 * --env`, `sbx exec --env`, the runner's `env` field): letters, digits and
 * '_', not starting with a digit. Values are any string. */
#ifndef SBX_UTIL_ENVNAME_H
#define SBX_UTIL_ENVNAME_H

#include <stddef.h>

#define SBX_ENV_NAME_RULE "use letters, digits and '_', not starting with a digit"

/* 1 when the len bytes at name are a valid variable name, else 0. */
int sbx_env_name_valid(const char *name, size_t len);

#endif
