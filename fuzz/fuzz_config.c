/* fuzz_config.c - the configuration (core/src/config): libconfig text, then
 * the core's schema check and value validation (sbx_config_load_file). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "fuzz_file.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sbx_config *c;
    sbx_error_t *err = NULL;
    const char *path;
    static int quiet;

    if (!quiet) {
        sbx_log_setup(SBX_LOG_ERROR, SBX_LOG_TEXT);
        quiet = 1;
    }
    if (size > (256u << 10)) {
        return 0;
    }
    /* @include is the operator's own feature: an input that names another
     * file would make the harness read the host's files */
    if (memmem(data, size, "@include", 8) != NULL || memmem(data, size, "@INCLUDE", 8) != NULL) {
        return 0;
    }
    path = fuzz_write_file("sbx.conf", data, size);
    c = sbx_config_load_file(path, &err);
    if (c != NULL) {
        if (c->provider == NULL) {
            __builtin_trap();
        }
        (void)sbx_config_instance(c, c->provider, SBX_PLUGIN_PROVIDER);
        sbx_config_destroy(c);
    }
    else {
        if (err == NULL) {
            __builtin_trap(); /* a refusal always says why */
        }
        sbx_error_free(&err);
    }
    return 0;
}
