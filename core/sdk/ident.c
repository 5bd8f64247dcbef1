/* ident.c - the one identifier validator of the core and the plugins. */
#include <string.h>

#include "sbx/sbx_util.h"

static int is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int sbx_id_valid(const char *id, enum sbx_id_rule rule)
{
    const char *punct = rule == SBX_ID_TASK ? "-_." : "-_.:";
    size_t max = rule == SBX_ID_TASK ? 64 : 63;
    size_t n = id != NULL ? strlen(id) : 0;

    if (n == 0 || n > max || (rule == SBX_ID_TASK && !is_alnum(id[0]))) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_alnum(id[i]) && strchr(punct, id[i]) == NULL) {
            return 0;
        }
    }
    return 1;
}
