/* keys_doc.h - the core's key table (config/keys.h) for people: `sbx config
 * keys` and the key tables of docs/configuration.md. */
#ifndef SBX_CONFIG_KEYS_DOC_H
#define SBX_CONFIG_KEYS_DOC_H

#include <jansson.h>
#include <stdio.h>

/* One entry per key: path, type, default, check, help. */
void sbx_config_keys_text(FILE *out);
/* [{key, type, default (config syntax or null), default_doc, check, help}] */
json_t *sbx_config_keys_json(void);
/* One markdown table per group, each between "<!-- keys NAME: ... -->" and
 * "<!-- /keys -->" (NAME: "top", "limits", "caches[]", "pools.*", ...);
 * scripts/config_docs.py puts them into docs/configuration.md. */
void sbx_config_keys_markdown(FILE *out);

#endif
