/* mise.h - the tools a repository's mise.toml pins, as sbx installs them at
 * image build time without the mise binary (docs/image.md, "mise.toml"):
 * `npm:NAME = "VERSION"` from the npm registry (the host's npm, like
 * customizations.sbx.npm), and the tools Debian packages (node, python, go,
 * ruby, ...) from the Debian mirror, checked at build time against the pinned
 * version (a prefix: "18" is any 18.x). Anything else is refused naming the
 * file and the key: a tool sbx cannot get is a failed build, never a
 * different image. */
#ifndef SBX_IMAGE_MISE_H
#define SBX_IMAGE_MISE_H

#include <jansson.h>
#include <stddef.h>

#include "util/error.h"

struct sbx_mise_tool {
    char *key;     /* "node", "npm:typescript" */
    char *version; /* as pinned: "18", "5.4.5" */
    char *via;     /* "debian" or "npm" */
    char *package; /* the Debian package ("nodejs") or the npm spec ("typescript@5.4.5") */
};

struct sbx_mise {
    struct sbx_mise_tool *tools;
    size_t n;
};

/* Parses text (mise.toml at path, for messages): only [tools] with
 * `KEY = "VERSION"` lines, comments and blank lines. 0, or -1 with
 * SBX_E_CONFIG "PATH:LINE: tools.KEY ..." naming what cannot be honoured. */
int sbx_mise_parse(const char *text, const char *path, struct sbx_mise *out, sbx_error_t **err);
void sbx_mise_free(struct sbx_mise *m);

/* [{"tool","version","via","package"}] in the file's order: the build
 * checks the Debian ones and the SBOM lists them. */
json_t *sbx_mise_tools_json(const struct sbx_mise *m);

/* The hook for the image build (image.c): parses the definition's mise.toml
 * (text, may be NULL) and appends its Debian packages to *packages and its
 * npm specs to *npm (NULL-terminated string vectors, unique, sorted again
 * on return), and sets *tools to sbx_mise_tools_json (NULL when no tool). */
int sbx_mise_apply(const char *text, const char *path, char ***packages, char ***npm,
                   json_t **tools, sbx_error_t **err);

#endif
