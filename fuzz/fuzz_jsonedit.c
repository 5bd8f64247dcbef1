/* fuzz_jsonedit.c - the JSON editor of `sbx agents setup`
 * (core/src/agents/jsonedit.c): a user's agent configuration file, edited in
 * place. Its caller hands it only text that parses as JSON, so the harness
 * does the same; the first byte picks the group and the value. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agents/jsonedit.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const groups[] = {"mcpServers", "servers", "mcp", "a"};
    const char *group, *key;
    json_t *root, *value;
    char *text, *out;

    if (size < 1 || size > 65536) {
        return 0;
    }
    group = groups[data[0] & 3];
    key = (data[0] & 4) ? "sbx" : "x";
    text = malloc(size);
    if (text == NULL) {
        abort();
    }
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    root = json_loads(text, JSON_DECODE_ANY, NULL);
    if (root == NULL) {
        free(text);
        return 0;
    }
    value = (data[0] & 8) ? json_pack("{s:s,s:[s,s]}", "command", "sbx", "args", "mcp", "--x")
                          : json_string("v\"\\\n");
    out = sbx_jsonedit_set(text, group, key, value);
    if (out != NULL) {
        json_t *back = json_loads(out, JSON_DECODE_ANY, NULL);

        json_decref(back);
        free(out);
    }
    json_decref(value);
    json_decref(root);
    free(text);
    return 0;
}
