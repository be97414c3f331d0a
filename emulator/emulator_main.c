/* emulator/emulator_main: the `emulator` subcommand. */
#include "emulator/emulator.h"

#include <stdio.h>
#include <string.h>

int emulator_main(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: failproofai-sidecar emulator [flags]\n\nRun the local Evaluator v2 cloud emulator.\n");
        return 0;
    }
    fprintf(stderr, "failproofai-sidecar: emulator: not built yet\n");
    return 1;
}
