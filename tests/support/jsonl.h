/* jsonl.h - a log of one JSON object per line (the proxy's connection log)
 * read back in tests. Include after test_common.h. */
#ifndef SBX_TEST_JSONL_H
#define SBX_TEST_JSONL_H

#include <jansson.h>

/* Every line of PATH as an array (empty when the file is not there yet);
 * a line that is not JSON fails the test. */
static inline json_t *test_jsonl_read(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    json_t *arr = json_array();

    if (f == NULL) {
        return arr;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        json_error_t jerr;
        json_t *o = json_loads(line, 0, &jerr);

        if (o == NULL) {
            fail_msg("%s: a line is not JSON: %s (%s)", path, line, jerr.text);
        }
        json_array_append_new(arr, o);
    }
    fclose(f);
    return arr;
}

/* How many lines PATH has now: a mark to find the lines written after it. */
static inline size_t test_jsonl_count(const char *path)
{
    json_t *arr = test_jsonl_read(path);
    size_t n = json_array_size(arr);

    json_decref(arr);
    return n;
}

#endif
