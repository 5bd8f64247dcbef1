/* fuzz_image.c - the image definition (core/src/image/image.c): a
 * repository's .devcontainer/devcontainer.json, and the mise.toml beside it.
 * The input is the JSON, optionally followed by a line "#mise" and the
 * mise.toml text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "image/image.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char sep[] = "\n#mise\n";
    const uint8_t *mise = NULL;
    size_t json_len = size;
    struct sbx_image_def *d;
    sbx_error_t *err = NULL;
    const char *path;
    static int quiet;

    if (!quiet) {
        sbx_log_setup(SBX_LOG_ERROR, SBX_LOG_TEXT);
        quiet = 1;
    }
    if (size > (1u << 20)) {
        return 0;
    }
    for (size_t i = 0; i + sizeof(sep) - 1 <= size; i++) {
        if (memcmp(data + i, sep, sizeof(sep) - 1) == 0) {
            json_len = i;
            mise = data + i + sizeof(sep) - 1;
            break;
        }
    }
    if (mise != NULL) {
        fuzz_write_file("repo/mise.toml", mise, size - (size_t)(mise - data));
    }
    else {
        fuzz_remove_file("repo/mise.toml");
    }
    path = fuzz_write_file("repo/.devcontainer/devcontainer.json", data, json_len);
    d = sbx_image_def_load(path, &err);
    if (d != NULL) {
        char *side;

        if (d->canonical == NULL || d->suite == NULL || d->workdir == NULL || d->packages == NULL) {
            __builtin_trap(); /* the image build hashes and reads these */
        }
        side = sbx_image_sidecar_canonical(d);
        free(side);
        sbx_image_def_free(d);
    }
    else {
        if (err == NULL) {
            __builtin_trap(); /* a refusal always says why */
        }
        sbx_error_free(&err);
    }
    return 0;
}
