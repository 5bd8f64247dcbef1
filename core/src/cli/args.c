/* args.c - the one argument parser of every sbx command (args.h). */
#include "cli/args.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sbx_args_error(const struct sbx_args *a, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "sbx: error: %s%s", a->cmd ? a->cmd : "", a->cmd ? ": " : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (a->cmd == NULL) {
        fprintf(stderr, " (see 'sbx --help')\n");
    }
    else {
        fprintf(stderr, " (see 'sbx %s --help')\n", a->help ? a->help : a->cmd);
    }
    return '?';
}

/* The token an option came from: "--name", "--name=value" or "-x". */
static const char *option_token(const struct sbx_args *a, const struct option *o)
{
    if (o->has_arg != no_argument && optarg != NULL && optind >= 2 &&
        optarg == a->argv[optind - 1]) {
        return a->argv[optind - 2]; /* the value was the next word */
    }
    return a->argv[optind - 1];
}

int sbx_args_next(struct sbx_args *a)
{
    char spec[64];
    int li = -1;
    int c;

    if (!a->started) {
        optind = 0; /* a full reset of getopt's state */
        a->started = 1;
    }
    opterr = 0;
    /* '+': stop at the first operand; ':': report a missing value as ':' */
    snprintf(spec, sizeof(spec), "%s:%s", a->in_order ? "+" : "", a->shortopts ? a->shortopts : "");
    c = getopt_long(a->argc, a->argv, spec, a->opts, &li);
    if (c == -1) {
        return -1;
    }
    if (c == '?') {
        const char *tok = optind >= 1 && optind <= a->argc ? a->argv[optind - 1] : "?";

        if (strncmp(tok, "--", 2) == 0 && strchr(tok, '=') != NULL && optopt != 0) {
            return sbx_args_error(a, "option '%.*s' takes no value", (int)strcspn(tok, "="), tok);
        }
        if (strncmp(tok, "--", 2) == 0 || optopt == 0) {
            return sbx_args_error(a, "unknown option '%s'", tok);
        }
        return sbx_args_error(a, "unknown option '-%c'", optopt);
    }
    if (c == ':') {
        if (optopt != 0 && strchr(a->shortopts ? a->shortopts : "", optopt) != NULL) {
            return sbx_args_error(a, "option '-%c' needs a value", optopt);
        }
        return sbx_args_error(a, "option '%s' needs a value", a->argv[optind - 1]);
    }
    if (li >= 0) {
        const struct option *o = &a->opts[li];
        const char *tok = option_token(a, o);
        size_t len = strcspn(tok + 2, "=");

        if (strncmp(tok, "--", 2) == 0 && len != strlen(o->name)) {
            return sbx_args_error(a,
                                  "unknown option '%.*s' (did you mean --%s? options are "
                                  "spelled in full)",
                                  (int)(len + 2), tok, o->name);
        }
    }
    return c;
}

int sbx_args_operands(const struct sbx_args *a, int min, int max, const char *what)
{
    int n = a->argc - optind;

    if (n < min) {
        sbx_args_error(a, "missing %s", what);
        return -1;
    }
    if (max >= 0 && n > max) {
        sbx_args_error(a, "unexpected argument '%s'", a->argv[optind + max]);
        return -1;
    }
    return 0;
}

int sbx_args_json_only(struct sbx_args *a, int min, int max, const char *what, int *json)
{
    static const struct option json_opts[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
    int c;

    a->opts = json_opts;
    *json = 0;
    while ((c = sbx_args_next(a)) != -1) {
        if (c != 'j') {
            return -1;
        }
        *json = 1;
    }
    return sbx_args_operands(a, min, max, what);
}
