/* envname.c - the variable-name rule shared by the CLI and the runner. */
#include "util/envname.h"

int sbx_env_name_valid(const char *name, size_t len)
{
    if (name == NULL || len == 0) {
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        char c = name[i];

        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9'))) {
            return 0;
        }
    }
    return 1;
}
