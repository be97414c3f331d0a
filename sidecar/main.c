/* sidecar/main: the failproofai-sidecar binary: dispatches to subcommands. */
#include "common/log.h"
#include "emulator/emulator.h"
#include "sandbox/jail/jail.h"
#include "sidecar/commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"run", cmd_run, "run the evaluation daemon against a FailproofAI server"},
    {"eval", cmd_eval, "evaluate expressions against a transcript file in the sandbox"},
    {"check", cmd_check, "compile-check expressions without running them"},
    {"backtest", cmd_backtest, "run new definitions over stored sessions and compare"},
    {"emulator", emulator_main, "run the local Evaluator v2 cloud emulator"},
    {"demo", cmd_demo, "start the emulator, the sidecar and sample sessions"},
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: failproofai-sidecar <command> [flags]\n\n"
            "FailproofAI evaluation sidecar %s\n\ncommands:\n",
            FPS_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'failproofai-sidecar <command> --help' describes a command's flags.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "version")) {
        printf("failproofai-sidecar %s\n", FPS_VERSION);
        return 0;
    }
    /* Internal: the jailed child of one evaluation (sandbox/jail/jail.h). */
    if (!strcmp(name, SBX_CHILD_ARG)) return sbx_child_main(argc - 2, argv + 2);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name)) return commands[i].fn(argc - 2, argv + 2);
    fprintf(stderr,
            "failproofai-sidecar: unknown command '%s' (try 'failproofai-sidecar --help')\n", name);
    return 2;
}
