/* mise.c - mise.toml's [tools] as Debian and npm packages (mise.h). */
#include "image/mise.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"
#include "util/xalloc.h"

/* mise's core tools that a Debian package of the suite provides. */
static const char *const debian_tools[][2] = {
    {"node", "nodejs"}, {"python", "python3"}, {"go", "golang-go"}, {"ruby", "ruby"},
    {"rust", "rustc"},  {"jq", "jq"},          {"git", "git"},      {"shellcheck", "shellcheck"},
    {"cmake", "cmake"},
};

static int version_ok(const char *v)
{
    size_t n = strlen(v);

    if (n == 0 || n > 64 || !((v[0] >= '0' && v[0] <= '9'))) {
        return 0;
    }
    return strspn(v, "0123456789.") == n && v[n - 1] != '.';
}

static char *trim(char *s)
{
    char *e;

    while (*s == ' ' || *s == '\t') {
        s++;
    }
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) {
        *--e = '\0';
    }
    return s;
}

/* A quoted TOML basic string without escapes: its content, or NULL. */
static char *unquote(char *s)
{
    size_t n = strlen(s);

    if (n < 2 || (s[0] != '"' && s[0] != '\'') || s[n - 1] != s[0]) {
        return NULL;
    }
    s[n - 1] = '\0';
    return strchr(s + 1, '\\') ? NULL : s + 1;
}

static int add_tool(struct sbx_mise *m, const char *key, const char *version, const char *via,
                    const char *package)
{
    m->tools = xrealloc(m->tools, (m->n + 1) * sizeof(*m->tools));
    m->tools[m->n].key = xstrdup(key);
    m->tools[m->n].version = xstrdup(version);
    m->tools[m->n].via = xstrdup(via);
    m->tools[m->n].package = xstrdup(package);
    m->n++;
    return 0;
}

static int one_tool(struct sbx_mise *m, const char *path, int line, const char *key,
                    const char *version, sbx_error_t **err)
{
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->tools[i].key, key) == 0) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: tools.%s is set twice", path, line,
                                 key);
        }
    }
    if (strncmp(key, "npm:", 4) == 0) {
        char *spec = xasprintf("%s@%s", key + 4, version);
        int ok = sbx_image_npm_spec_valid(spec) && version_ok(version);

        if (ok) {
            add_tool(m, key, version, "npm", spec);
        }
        free(spec);
        return ok ? 0
                  : sbx_error_set(err, SBX_E_CONFIG,
                                  "%s:%d: tools.\"%s\" = \"%s\": not an npm package at an exact "
                                  "version (\"1.2.3\")",
                                  path, line, key, version);
    }
    for (size_t i = 0; i < sizeof(debian_tools) / sizeof(debian_tools[0]); i++) {
        if (strcmp(key, debian_tools[i][0]) == 0) {
            if (!version_ok(version)) {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%d: tools.%s = \"%s\": pin a version (\"18\", "
                                     "\"3.11.2\"); ranges, \"latest\" and prefixes like "
                                     "\"lts\" are not pinned",
                                     path, line, key, version);
            }
            return add_tool(m, key, version, "debian", debian_tools[i][1]);
        }
    }
    return sbx_error_set(err, SBX_E_CONFIG,
                         "%s:%d: tools.%s: no source sbx can install it from (npm: tools from the "
                         "npm registry; node, python, go, ruby, rust, jq, git, shellcheck, cmake "
                         "from Debian packages; docs/image.md, \"mise.toml\")",
                         path, line, key);
}

int sbx_mise_parse(const char *text, const char *path, struct sbx_mise *out, sbx_error_t **err)
{
    char *copy = xstrdup(text ? text : "");
    char *section = NULL;
    int line = 0;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    for (char *p = copy; p != NULL && rc == 0;) {
        char *nl = strchr(p, '\n');
        char *s;
        char *eq;
        char *k;
        char *v;
        char *hash;

        if (nl != NULL) {
            *nl = '\0';
        }
        line++;
        s = trim(p);
        p = nl ? nl + 1 : NULL;
        if (*s == '\0' || *s == '#') {
            continue;
        }
        if (*s == '[') {
            free(section);
            section = xstrdup(s);
            if (strcmp(s, "[tools]") != 0) {
                rc = sbx_error_set(err, SBX_E_CONFIG,
                                   "%s:%d: %s: sbx reads only [tools] of mise.toml (it installs "
                                   "the tools at image build time without mise)",
                                   path, line, s);
            }
            continue;
        }
        if (section == NULL) {
            eq = strchr(s, '=');
            if (eq != NULL) {
                *eq = '\0';
            }
            rc = sbx_error_set(err, SBX_E_CONFIG, "%s:%d: %s: sbx reads only [tools] of mise.toml",
                               path, line, trim(s));
            continue;
        }
        eq = strchr(s, '=');
        if (eq == NULL) {
            rc = sbx_error_set(err, SBX_E_CONFIG, "%s:%d: not KEY = \"VERSION\"", path, line);
            continue;
        }
        *eq = '\0';
        k = trim(s);
        v = trim(eq + 1);
        hash = strstr(v, " #");
        if (hash != NULL) {
            *hash = '\0';
            v = trim(v);
        }
        if (k[0] == '"') {
            k = unquote(k);
        }
        if (k == NULL || *k == '\0' || strlen(k) > 214) {
            rc = sbx_error_set(err, SBX_E_CONFIG, "%s:%d: a bad tool name", path, line);
            continue;
        }
        if ((v = unquote(v)) == NULL) {
            rc = sbx_error_set(err, SBX_E_CONFIG,
                               "%s:%d: tools.%s: only a version string is supported (no arrays "
                               "of versions, no tables of options)",
                               path, line, k);
            continue;
        }
        rc = one_tool(out, path, line, k, v, err);
    }
    free(section);
    free(copy);
    if (rc < 0) {
        sbx_mise_free(out);
    }
    return rc;
}

void sbx_mise_free(struct sbx_mise *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->tools[i].key);
        free(m->tools[i].version);
        free(m->tools[i].via);
        free(m->tools[i].package);
    }
    free(m->tools);
    memset(m, 0, sizeof(*m));
}

json_t *sbx_mise_tools_json(const struct sbx_mise *m)
{
    json_t *a = json_array();

    for (size_t i = 0; i < m->n; i++) {
        json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s}", "tool", m->tools[i].key,
                                           "version", m->tools[i].version, "via", m->tools[i].via,
                                           "package", m->tools[i].package));
    }
    return a;
}

static void push_unique(char ***v, const char *s)
{
    size_t n = 0;

    while (*v != NULL && (*v)[n] != NULL) {
        if (strcmp((*v)[n], s) == 0) {
            return;
        }
        n++;
    }
    *v = xrealloc(*v, (n + 2) * sizeof(char *));
    (*v)[n] = xstrdup(s);
    (*v)[n + 1] = NULL;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void sort_strv(char **v)
{
    size_t n = 0;

    while (v != NULL && v[n] != NULL) {
        n++;
    }
    if (n > 1) {
        qsort(v, n, sizeof(char *), cmp_str);
    }
}

int sbx_mise_apply(const char *text, const char *path, char ***packages, char ***npm,
                   json_t **tools, sbx_error_t **err)
{
    struct sbx_mise m;

    *tools = NULL;
    if (text == NULL) {
        return 0;
    }
    if (sbx_mise_parse(text, path, &m, err) < 0) {
        return -1;
    }
    for (size_t i = 0; i < m.n; i++) {
        push_unique(strcmp(m.tools[i].via, "npm") == 0 ? npm : packages, m.tools[i].package);
    }
    if (m.n > 0) {
        *tools = sbx_mise_tools_json(&m);
    }
    sbx_mise_free(&m);
    sort_strv(*packages);
    sort_strv(*npm);
    return 0;
}
