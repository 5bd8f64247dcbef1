/* keys_doc.c - the key table (config/keys.c) as text, JSON and the markdown
 * tables of docs/configuration.md (`sbx config keys`). */
#include "config/keys_doc.h"

#include <stdlib.h>
#include <string.h>

#include "config/keys.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

/* "limits" of "limits.cpus", "caches[]" of "caches[].host", "" of "image". */
static char *parent_of(const char *path)
{
    const char *dot = strrchr(path, '.');

    return dot ? xstrndup(path, (size_t)(dot - path)) : xstrdup("");
}

static const char *leaf_of(const char *path)
{
    const char *dot = strrchr(path, '.');

    return dot ? dot + 1 : path;
}

static char *default_cell(const struct sbx_key_def *k)
{
    cleanup_free char *def = NULL;

    if (k->doc_def != NULL) {
        return xstrdup(k->doc_def);
    }
    def = sbx_key_default_text(k);
    return def ? xasprintf("`%s`", def) : xstrdup("none");
}

static void markdown_section(FILE *out, const char *section)
{
    fprintf(out,
            "<!-- keys %s: generated from core/src/config/keys.c by scripts/config_docs.py -->\n"
            "| key | type | default | meaning |\n"
            "|---|---|---|---|\n",
            section[0] ? section : "top");
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        cleanup_free char *parent = parent_of(k->path);
        cleanup_free char *def = NULL;
        cleanup_free char *check = NULL;

        if (strcmp(parent, section) != 0) {
            continue;
        }
        def = default_cell(k);
        check = sbx_key_check_text(k);
        fprintf(out, "| `%s` | %s | %s | %s%s%s |\n", leaf_of(k->path), sbx_key_type_text(k), def,
                k->help, check ? "; " : "", check ? check : "");
    }
    fprintf(out, "<!-- /keys -->\n");
}

void sbx_config_keys_markdown(FILE *out)
{
    /* one table per parent, in the order parents first appear */
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        cleanup_free char *parent = parent_of(sbx_config_keys[i].path);
        int seen = 0;

        for (size_t j = 0; j < i && !seen; j++) {
            cleanup_free char *p = parent_of(sbx_config_keys[j].path);

            seen = strcmp(p, parent) == 0;
        }
        if (!seen) {
            markdown_section(out, parent);
        }
    }
}

void sbx_config_keys_text(FILE *out)
{
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        cleanup_free char *def = sbx_key_default_text(k);
        cleanup_free char *check = sbx_key_check_text(k);

        /* the default as written in the file; else how sbx computes it */
        fprintf(out, "%s (%s; default %s%s%s)\n    %s\n", k->path, sbx_key_type_text(k),
                def          ? def
                : k->doc_def ? k->doc_def
                             : "none",
                check ? "; " : "", check ? check : "", k->help);
    }
}

json_t *sbx_config_keys_json(void)
{
    json_t *arr = json_array();

    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        cleanup_free char *def = sbx_key_default_text(k);
        cleanup_free char *check = sbx_key_check_text(k);

        json_array_append_new(arr,
                              json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:s}", "key", k->path, "type",
                                        sbx_key_type_text(k), "default", def, "default_doc",
                                        k->doc_def, "check", check, "help", k->help));
    }
    return arr;
}
