/* fuzz_rules.c - egress rules (core/src/egress/rules.c): one rule per line
 * ("HOST[:PORTS]", from policies and the configuration), then the host names
 * and addresses a sandbox asks for, matched against them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/rules.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_LINES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text, *save = NULL, *line;
    const char *lines[MAX_LINES + 1];
    size_t n = 0;
    struct sbx_egress_rules rules = {0};
    sbx_error_t *err = NULL;

    if (size > 16384) {
        return 0;
    }
    text = malloc(size + 1);
    if (text == NULL) {
        abort();
    }
    memcpy(text, data, size);
    text[size] = '\0';
    for (line = strtok_r(text, "\n", &save); line != NULL && n < MAX_LINES;
         line = strtok_r(NULL, "\n", &save)) {
        lines[n++] = line;
    }
    lines[n] = NULL;
    if (sbx_egress_rules_parse(lines, &rules, &err) < 0) {
        sbx_error_free(&err);
    }
    for (size_t i = 0; i < n; i++) {
        char norm[SBX_EGRESS_HOST_MAX + 1];
        struct sbx_egress_addr a;
        char fmt[64];

        if (sbx_egress_addr_parse(lines[i], &a)) {
            sbx_egress_addr_format(&a, fmt, sizeof(fmt));
            (void)sbx_egress_addr_is_public(&a);
            (void)sbx_egress_rules_match_addr(&rules, &a, 443);
        }
        else if (sbx_egress_host_normalize(lines[i], strlen(lines[i]), norm) == NULL) {
            if (strlen(norm) > SBX_EGRESS_HOST_MAX) {
                __builtin_trap();
            }
            (void)sbx_egress_rules_match_name(&rules, norm, 443);
            (void)sbx_egress_rules_match_name(&rules, norm, 80);
        }
    }
    sbx_egress_rules_free(&rules);
    free(text);
    return 0;
}
