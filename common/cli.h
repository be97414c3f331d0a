/* common/cli: table-driven command-line and environment parsing shared by
 * every subcommand.
 *
 * A subcommand describes its options in a cli_opt table whose entries point
 * (by offset) into its own config struct. cli_parse applies, in order:
 * the defaults already in the struct, then each option's environment
 * variable, then the flags; so flags override the environment, which
 * overrides defaults. Strings are borrowed from argv/environ (process
 * lifetime); lists are allocated and released with cli_list_free. */
#ifndef FPS_CLI_H
#define FPS_CLI_H
#include "common/err.h"

#include <stddef.h>
#include <stdio.h>

typedef enum {
    CLI_STR,    /* const char *            */
    CLI_INT,    /* long                    */
    CLI_DOUBLE, /* double                  */
    CLI_FLAG,   /* int, set to 1, no value */
    CLI_LIST,   /* cli_list, repeatable    */
} cli_type;

typedef struct {
    const char **items; /* borrowed strings, owned array */
    size_t len;
} cli_list;

typedef struct {
    const char *name; /* "--server" */
    const char *env;  /* environment variable or NULL */
    cli_type type;
    size_t offset;       /* offsetof(config, field) */
    const char *metavar; /* "URL" */
    const char *help;
    double min, max; /* numeric bounds (inclusive) when min < max */
} cli_opt;

typedef struct {
    const char *name;    /* "run" */
    const char *summary; /* one line */
    const cli_opt *opts;
    size_t nopts;
} cli_command;

enum { CLI_OK = 0, CLI_HELP = 1, CLI_ERROR = -1 };

/* Parses argv[0..argc) (argv[0] is the first flag, not the program name).
 * Returns CLI_OK, CLI_HELP (after printing usage to `out`), or CLI_ERROR
 * with err (common/err.h: name "usage") naming the flag or variable at fault. */
int cli_parse(const cli_command *cmd, int argc, char **argv, void *cfg, FILE *out, fps_err *err);
void cli_usage(const cli_command *cmd, FILE *out);
void cli_list_free(cli_list *l);

#endif
