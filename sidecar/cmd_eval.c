/* sidecar/cmd_eval: `eval` and `check` (LANGUAGE.md, last section). */
#include "common/cli.h"
#include "sidecar/commands.h"

#include <stddef.h>
#include <stdio.h>

typedef struct {
    const char *transcript, *expr, *file, *batch, *kind, *eval_key;
    double timeout;
} eval_config;

#define OFF(f) offsetof(eval_config, f)
static const cli_opt eval_opts[] = {
    {"--transcript", NULL, CLI_STR, OFF(transcript), "FILE", "transcript JSON file", 0, 0},
    {"--expr", NULL, CLI_STR, OFF(expr), "SRC", "expression source", 0, 0},
    {"--file", NULL, CLI_STR, OFF(file), "PATH", "file holding the expression", 0, 0},
    {"--batch", NULL, CLI_STR, OFF(batch), "PATH|-", "JSON lines {kind, source, eval_key?}", 0, 0},
    {"--kind", NULL, CLI_STR, OFF(kind), "KIND", "raw|condition|evaluator (default evaluator)", 0, 0},
    {"--eval-key", NULL, CLI_STR, OFF(eval_key), "K", "eval key of the primary result (default q)", 0, 0},
    {"--timeout", NULL, CLI_DOUBLE, OFF(timeout), "S", "budget per evaluation (default 30, max 60)", 0.001, 60},
};
static const cli_command eval_command = {"eval", "Evaluate expressions against a transcript in the sandbox.",
                                         eval_opts, sizeof eval_opts / sizeof eval_opts[0]};
static const cli_command check_command = {"check", "Compile-check expressions without running them.",
                                          eval_opts, sizeof eval_opts / sizeof eval_opts[0]};

static int common(const cli_command *cmd, int argc, char **argv)
{
    eval_config cfg = {NULL, NULL, NULL, NULL, "evaluator", "q", 30};
    char err[256];
    int rc = cli_parse(cmd, argc, argv, &cfg, stdout, err, sizeof err);
    if (rc == CLI_HELP) return 0;
    if (rc != CLI_OK) {
        fprintf(stderr, "failproofai-sidecar: %s\n", err);
        return 2;
    }
    fprintf(stderr, "failproofai-sidecar: %s: not built yet\n", cmd->name);
    return 1;
}

int cmd_eval(int argc, char **argv)
{
    return common(&eval_command, argc, argv);
}

int cmd_check(int argc, char **argv)
{
    return common(&check_command, argc, argv);
}
