/* guard.c - refuse commands that dump the environment of a task that holds
 * credentials (see guard.h and docs/credentials.md). */
#include "cred/guard.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/xalloc.h"

/* sh -c 'sh -c "..."' nesting beyond this is refused rather than guessed */
#define GUARD_MAX_DEPTH 8

struct words {
    char **v;
    size_t n;
    size_t cap;
};

static int check_argv(char *const *w, size_t n, int depth, sbx_error_t **err);
static int check_script(const char *s, int depth, sbx_error_t **err);

static int refuse(sbx_error_t **err, const char *what, const char *why)
{
    return sbx_error_set(err, SBX_E_POLICY,
                         "credentials guard: refused '%.64s': %s; this task holds credentials "
                         "(ask for one variable by name instead; see docs/credentials.md)",
                         what, why);
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');

    return s ? s + 1 : p;
}

static int is_one_of(const char *s, const char *const *list)
{
    for (size_t i = 0; list[i] != NULL; i++) {
        if (strcmp(s, list[i]) == 0) {
            return 1;
        }
    }
    return 0;
}

/* A word naming /proc/PID/environ, also through a glob in its last component. */
static int names_proc_environ(const char *w)
{
    const char *proc = strstr(w, "/proc");
    const char *last;

    if (proc == NULL) {
        return 0;
    }
    if (strstr(proc, "environ") != NULL) {
        return 1;
    }
    last = strrchr(proc, '/');
    if (last == NULL || strpbrk(last, "*?[") == NULL) {
        return 0;
    }
    return fnmatch(last + 1, "environ", 0) == 0;
}

static int is_assignment(const char *w)
{
    const char *eq = strchr(w, '=');

    if (eq == NULL || eq == w || !(isalpha((unsigned char)w[0]) || w[0] == '_')) {
        return 0;
    }
    for (const char *p = w; p < eq; p++) {
        if (!(isalnum((unsigned char)*p) || *p == '_')) {
            return 0;
        }
    }
    return 1;
}

static int only_options(char *const *w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (w[i][0] != '-' && w[i][0] != '+') {
            return 0;
        }
    }
    return 1;
}

/* env [OPTION]... [NAME=VALUE]... [COMMAND [ARG]...] */
static int check_env(char *const *w, size_t n, int depth, sbx_error_t **err)
{
    static const char *const with_value[] = {"-u", "-C", "--unset", "--chdir", NULL};
    int has_split = 0;
    size_t j = 1;

    while (j < n) {
        const char *a = w[j];

        if (strcmp(a, "--") == 0) {
            j++;
            break;
        }
        if (strcmp(a, "-S") == 0 || strcmp(a, "--split-string") == 0) {
            if (j + 1 < n && check_script(w[j + 1], depth + 1, err) < 0) {
                return -1;
            }
            has_split = 1;
            j += 2;
            continue;
        }
        if (strncmp(a, "-S", 2) == 0 || strncmp(a, "--split-string=", 15) == 0) {
            if (check_script(a[1] == 'S' ? a + 2 : a + 15, depth + 1, err) < 0) {
                return -1;
            }
            has_split = 1;
            j++;
            continue;
        }
        if (is_one_of(a, with_value)) {
            j += 2;
            continue;
        }
        if (a[0] == '-' || is_assignment(a)) {
            j++;
            continue;
        }
        break;
    }
    if (j >= n) {
        if (has_split) {
            return 0;
        }
        return refuse(err, w[0], "env without a command prints the whole environment");
    }
    return check_argv(w + j, n - j, depth + 1, err);
}

/* sh [OPTION]... -c STRING [NAME [ARG]...]: checks STRING. Without -c the
 * shell reads a file or stdin, which cannot be inspected. */
static int check_shell(char *const *w, size_t n, int depth, sbx_error_t **err)
{
    int has_c = 0;
    size_t j = 1;

    while (j < n) {
        const char *a = w[j];
        size_t len = strlen(a);

        if (strcmp(a, "--") == 0 || strcmp(a, "-") == 0) {
            j++;
            break;
        }
        if ((a[0] != '-' && a[0] != '+') || len < 2) {
            break;
        }
        if (a[1] == '-') {
            j += (strcmp(a, "--rcfile") == 0 || strcmp(a, "--init-file") == 0) ? 2 : 1;
            continue;
        }
        if (a[0] == '-' && strchr(a + 1, 'c') != NULL) {
            has_c = 1;
        }
        j += (a[len - 1] == 'o' || a[len - 1] == 'O') ? 2 : 1;
    }
    if (has_c && j < n) {
        return check_script(w[j], depth + 1, err);
    }
    return 0;
}

/* infisical run [FLAGS] -- CMD..., infisical run --command "STRING" */
static int check_infisical(char *const *w, size_t n, int depth, sbx_error_t **err)
{
    if (n < 2 || strcmp(w[1], "run") != 0) {
        return 0;
    }
    for (size_t j = 2; j < n; j++) {
        if (strcmp(w[j], "--") == 0) {
            return j + 1 < n ? check_argv(w + j + 1, n - j - 1, depth + 1, err) : 0;
        }
        if (strcmp(w[j], "--command") == 0 && j + 1 < n) {
            return check_script(w[j + 1], depth + 1, err);
        }
        if (strncmp(w[j], "--command=", 10) == 0) {
            return check_script(w[j] + 10, depth + 1, err);
        }
    }
    return 0;
}

/* Wrappers that run their operand as a command, with the short options of
 * each that take a separate value (sudo -u root, nice -n 5). */
static const struct {
    const char *name;
    const char *value_opts;
} wrappers[] = {
    {"command", ""}, {"builtin", ""},        {"exec", "a"},     {"nohup", ""},
    {"setsid", ""},  {"sudo", "ugpChrtUDR"}, {"doas", "uC"},    {"stdbuf", "ioe"},
    {"nice", "n"},   {"ionice", "cnp"},      {"timeout", "sk"}, {"xargs", "adEILnPs"},
};

static const char *wrapper_opts(const char *cmd)
{
    for (size_t i = 0; i < sizeof(wrappers) / sizeof(wrappers[0]); i++) {
        if (strcmp(cmd, wrappers[i].name) == 0) {
            return wrappers[i].value_opts;
        }
    }
    return NULL;
}

/* command, exec, sudo, timeout, ... CMD: checks CMD. */
static int check_wrapper(const char *cmd, const char *value_opts, char *const *w, size_t n,
                         int depth, sbx_error_t **err)
{
    size_t j = 1;

    if (strcmp(cmd, "command") == 0 && n > 1 &&
        (strcmp(w[1], "-v") == 0 || strcmp(w[1], "-V") == 0)) {
        return 0; /* prints where a command is */
    }
    while (j < n && w[j][0] == '-') {
        const char *a = w[j];

        if (strcmp(a, "--") == 0) {
            j++;
            break;
        }
        /* "-u root" takes the next word; "-uroot" and "--user=root" do not */
        if (a[1] != '-' && a[1] != '\0' && a[2] == '\0' && strchr(value_opts, a[1]) != NULL) {
            j++;
        }
        j++;
    }
    if (strcmp(cmd, "timeout") == 0 && j < n) {
        j++; /* the duration */
    }
    if (j >= n) {
        return 0;
    }
    return check_argv(w + j, n - j, depth + 1, err);
}

static int check_argv(char *const *w, size_t n, int depth, sbx_error_t **err)
{
    static const char *const keywords[] = {"if",    "then", "else", "elif", "do",   "while",
                                           "until", "!",    "{",    "}",    "time", NULL};
    static const char *const shells[] = {"sh",  "bash",  "dash", "zsh",  "ksh", "mksh",
                                         "ash", "rbash", "yash", "fish", NULL};
    const char *value_opts;
    const char *cmd;
    size_t i = 0;

    if (depth > GUARD_MAX_DEPTH) {
        return refuse(err, n > 0 ? w[0] : "", "nested too deeply to inspect");
    }
    for (size_t k = 0; k < n; k++) {
        if (names_proc_environ(w[k])) {
            return refuse(err, w[k], "it reads a process environment under /proc");
        }
    }
    while (i < n && (is_assignment(w[i]) || is_one_of(w[i], keywords))) {
        i++;
    }
    if (i >= n) {
        return 0;
    }
    w += i;
    n -= i;
    cmd = base_name(w[0]);
    if (strcmp(cmd, "busybox") == 0) {
        return n > 1 ? check_argv(w + 1, n - 1, depth + 1, err) : 0;
    }
    if (strcmp(cmd, "env") == 0) {
        return check_env(w, n, depth, err);
    }
    if (strcmp(cmd, "printenv") == 0 && only_options(w + 1, n - 1)) {
        return refuse(err, w[0], "printenv without a name prints the whole environment");
    }
    if (strcmp(cmd, "export") == 0 && only_options(w + 1, n - 1)) {
        return refuse(err, w[0], "export without a name prints every exported variable");
    }
    if (strcmp(cmd, "set") == 0 && n == 1) {
        return refuse(err, w[0], "set without arguments prints every variable");
    }
    if ((strcmp(cmd, "declare") == 0 || strcmp(cmd, "typeset") == 0) &&
        only_options(w + 1, n - 1)) {
        for (size_t k = 1; k < n; k++) {
            if (strspn(w[k] + 1, "fF") != strlen(w[k] + 1)) {
                return refuse(err, w[0], "declare without a name prints every variable");
            }
        }
        if (n == 1) {
            return refuse(err, w[0], "declare without a name prints every variable");
        }
        return 0;
    }
    if (strcmp(cmd, "eval") == 0) {
        cleanup_free char *joined = NULL;
        size_t len = 0;

        for (size_t k = 1; k < n; k++) {
            len += strlen(w[k]) + 1;
        }
        joined = xcalloc(1, len + 1);
        for (size_t k = 1; k < n; k++) {
            strcat(joined, w[k]);
            strcat(joined, " ");
        }
        return check_script(joined, depth + 1, err);
    }
    if (strcmp(cmd, "infisical") == 0) {
        return check_infisical(w, n, depth, err);
    }
    value_opts = wrapper_opts(cmd);
    if (value_opts != NULL) {
        return check_wrapper(cmd, value_opts, w, n, depth, err);
    }
    if (is_one_of(cmd, shells)) {
        return check_shell(w, n, depth, err);
    }
    return 0;
}

/* ---- shell strings ---- */

/* Index just past the ')' matching the '(' at s[open], or strlen(s). */
static size_t match_paren(const char *s, size_t open)
{
    int level = 0;
    char q = 0;

    for (size_t i = open; s[i] != '\0'; i++) {
        if (q != 0) {
            if (s[i] == q) {
                q = 0;
            }
            else if (q == '"' && s[i] == '\\' && s[i + 1] != '\0') {
                i++;
            }
            continue;
        }
        if (s[i] == '\\' && s[i + 1] != '\0') {
            i++;
        }
        else if (s[i] == '\'' || s[i] == '"') {
            q = s[i];
        }
        else if (s[i] == '(') {
            level++;
        }
        else if (s[i] == ')' && --level == 0) {
            return i + 1;
        }
    }
    return strlen(s);
}

/* Index just past the '`' closing the one at s[open], or strlen(s). */
static size_t match_backtick(const char *s, size_t open)
{
    for (size_t i = open + 1; s[i] != '\0'; i++) {
        if (s[i] == '\\' && s[i + 1] != '\0') {
            i++;
        }
        else if (s[i] == '`') {
            return i + 1;
        }
    }
    return strlen(s);
}

/* Checks the inside of every $(...), <(...), >(...) and `...`. */
static int check_substitutions(const char *s, int depth, sbx_error_t **err)
{
    int dq = 0;

    for (size_t i = 0; s[i] != '\0'; i++) {
        size_t end;
        char *inner;
        int r;

        if (s[i] == '\\' && s[i + 1] != '\0') {
            i++;
            continue;
        }
        if (s[i] == '\'' && !dq) {
            const char *q = strchr(s + i + 1, '\'');

            if (q == NULL) {
                return 0;
            }
            i = (size_t)(q - s);
            continue;
        }
        if (s[i] == '"') {
            dq = !dq;
            continue;
        }
        if ((s[i] == '$' || s[i] == '<' || s[i] == '>') && s[i + 1] == '(') {
            end = match_paren(s, i + 1);
            /* without its closing ')' when there is one */
            inner = xstrndup(s + i + 2, end - (i + 2) - (s[end - 1] == ')' ? 1 : 0));
        }
        else if (s[i] == '`') {
            end = match_backtick(s, i);
            inner = xstrndup(s + i + 1, end - (i + 1) - (end > i + 1 && s[end - 1] == '`'));
        }
        else {
            continue;
        }
        r = check_script(inner, depth + 1, err);
        free(inner);
        if (r < 0) {
            return -1;
        }
        i = end > 0 ? end - 1 : 0;
    }
    return 0;
}

struct lexer {
    struct words cmd; /* words of the current simple command */
    char *word;
    size_t len;
    size_t cap;
    int have_word;
    int redirect; /* the next word is a redirection target */
};

static void lex_putc(struct lexer *lx, char c)
{
    if (lx->len + 2 > lx->cap) {
        lx->cap = (lx->len + 2) * 2;
        lx->word = xrealloc(lx->word, lx->cap);
    }
    lx->word[lx->len++] = c;
    lx->word[lx->len] = '\0';
    lx->have_word = 1;
}

static void lex_putn(struct lexer *lx, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        lex_putc(lx, p[i]);
    }
}

static int lex_end_word(struct lexer *lx, sbx_error_t **err)
{
    if (!lx->have_word) {
        return 0;
    }
    if (lx->redirect) {
        lx->redirect = 0;
        if (names_proc_environ(lx->word)) {
            return refuse(err, lx->word, "it reads a process environment under /proc");
        }
    }
    else {
        if (lx->cmd.n + 1 >= lx->cmd.cap) {
            lx->cmd.cap = lx->cmd.cap ? lx->cmd.cap * 2 : 8;
            lx->cmd.v = xrealloc(lx->cmd.v, lx->cmd.cap * sizeof(char *));
        }
        lx->cmd.v[lx->cmd.n++] = xstrdup(lx->word);
    }
    lx->len = 0;
    lx->have_word = 0;
    if (lx->word != NULL) {
        lx->word[0] = '\0';
    }
    return 0;
}

static int lex_end_command(struct lexer *lx, int depth, sbx_error_t **err)
{
    int r;

    if (lex_end_word(lx, err) < 0) {
        return -1;
    }
    r = check_argv(lx->cmd.v, lx->cmd.n, depth, err);
    for (size_t i = 0; i < lx->cmd.n; i++) {
        free(lx->cmd.v[i]);
    }
    lx->cmd.n = 0;
    return r;
}

static int lex_all_digits(const struct lexer *lx)
{
    return lx->have_word && lx->len > 0 && strspn(lx->word, "0123456789") == lx->len;
}

static int lex_script(struct lexer *lx, const char *s, int depth, sbx_error_t **err)
{
    char q = 0;

    for (size_t i = 0; s[i] != '\0'; i++) {
        char c = s[i];

        if (q == '\'') {
            if (c == '\'') {
                q = 0;
            }
            else {
                lex_putc(lx, c);
            }
            continue;
        }
        if (c == '\\' && s[i + 1] != '\0') {
            if (s[i + 1] != '\n') {
                lex_putc(lx, s[i + 1]);
            }
            i++;
            continue;
        }
        if ((c == '$' && s[i + 1] == '(') || c == '`') {
            size_t end = c == '`' ? match_backtick(s, i) : match_paren(s, i + 1);

            lex_putn(lx, s + i, end - i); /* checked by check_substitutions */
            i = end - 1;
            continue;
        }
        if (q == '"') {
            if (c == '"') {
                q = 0;
            }
            else {
                lex_putc(lx, c);
            }
            continue;
        }
        if (c == '\'' || c == '"') {
            q = c;
            lx->have_word = 1;
            continue;
        }
        if (c == '#' && !lx->have_word) {
            while (s[i + 1] != '\0' && s[i + 1] != '\n') {
                i++;
            }
            continue;
        }
        if ((c == '<' || c == '>') && s[i + 1] == '(') {
            size_t end = match_paren(s, i + 1);

            lex_putn(lx, s + i, end - i);
            i = end - 1;
            continue;
        }
        if (c == '<' || c == '>') {
            if (lex_all_digits(lx)) {
                lx->len = 0;
                lx->have_word = 0;
            }
            else if (lex_end_word(lx, err) < 0) {
                return -1;
            }
            while (s[i + 1] != '\0' && strchr("<>&|", s[i + 1]) != NULL) {
                i++;
            }
            lx->redirect = 1;
            continue;
        }
        if (c == ' ' || c == '\t') {
            if (lex_end_word(lx, err) < 0) {
                return -1;
            }
            continue;
        }
        if (strchr(";&|\n()", c) != NULL) {
            lx->redirect = 0;
            if (lex_end_command(lx, depth, err) < 0) {
                return -1;
            }
            continue;
        }
        lex_putc(lx, c);
    }
    return lex_end_command(lx, depth, err);
}

static int check_script(const char *s, int depth, sbx_error_t **err)
{
    struct lexer lx = {0};
    int r;

    if (depth > GUARD_MAX_DEPTH) {
        return refuse(err, "sh -c", "nested too deeply to inspect");
    }
    if (check_substitutions(s, depth, err) < 0) {
        return -1;
    }
    r = lex_script(&lx, s, depth, err);
    for (size_t i = 0; i < lx.cmd.n; i++) {
        free(lx.cmd.v[i]);
    }
    free(lx.cmd.v);
    free(lx.word);
    return r;
}

int sbx_cred_guard_check(const char *const *argv, sbx_error_t **err)
{
    size_t n = 0;

    if (argv == NULL) {
        return 0;
    }
    while (argv[n] != NULL) {
        n++;
    }
    return check_argv((char *const *)argv, n, 0, err);
}

int sbx_cred_guard_check_shell(const char *script, sbx_error_t **err)
{
    return script == NULL ? 0 : check_script(script, 0, err);
}
