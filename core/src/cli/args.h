/* args.h - the one argument parser every sbx command uses: getopt_long with
 * the same errors everywhere. Options are spelled in full: an abbreviation
 * getopt_long would accept ("--js" for "--json") is refused naming the option,
 * so a script keeps meaning the same thing when options are added. */
#ifndef SBX_CLI_ARGS_H
#define SBX_CLI_ARGS_H

#include <getopt.h>

struct sbx_args {
    const char *cmd;           /* named in errors: "job", "task list"; NULL: sbx's own */
    const char *help;          /* the command for "see 'sbx HELP --help'" ("task") */
    const struct option *opts; /* NULL-terminated; val is what sbx_args_next returns */
    const char *shortopts;     /* e.g. "f" for -f; NULL for none */
    int in_order;              /* 1: stop at the first operand (a command to run
                                * follows); 0: options may follow operands */
    int argc;
    char **argv; /* argv[0] is the command's own name */
    /* state */
    int started;
};

/* The next option's val, with optarg set; -1 when the options end (optind
 * then indexes the first operand, after any "--"); '?' after printing a
 * one-line error (unknown option, missing value, abbreviation, stray value). */
int sbx_args_next(struct sbx_args *a);
/* Prints "sbx: error: CMD: MSG (see 'sbx HELP --help')" and returns '?'. */
int sbx_args_error(const struct sbx_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Checks the operands left after the options: at least min, at most max
 * (max < 0: any). Prints the error; returns 0 or -1. */
int sbx_args_operands(const struct sbx_args *a, int min, int max, const char *what);
/* For a command whose only option is --json: sets a->opts, parses, sets *json
 * and checks the operands as sbx_args_operands. Returns 0 or -1 (printed). */
int sbx_args_json_only(struct sbx_args *a, int min, int max, const char *what, int *json);

#endif
