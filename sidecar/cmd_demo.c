/* sidecar/cmd_demo: `failproofai-sidecar demo`: emulator + sidecar + sample
 * sessions, printing the admin URL. */
#include "common/cli.h"
#include "sidecar/commands.h"

#include <stdio.h>

typedef struct {
    long sessions;
} demo_config;

static const cli_opt demo_opts[] = {
    {"--sessions", NULL, CLI_INT, 0, "N", "sample sessions to start with (default 50)", 0, 100000},
};
static const cli_command demo_command = {"demo", "Start the emulator, the sidecar and sample sessions.",
                                         demo_opts, 1};

int cmd_demo(int argc, char **argv)
{
    demo_config cfg = {50};
    char err[256];
    int rc = cli_parse(&demo_command, argc, argv, &cfg, stdout, err, sizeof err);
    if (rc == CLI_HELP) return 0;
    if (rc != CLI_OK) {
        fprintf(stderr, "failproofai-sidecar: %s\n", err);
        return 2;
    }
    fprintf(stderr, "failproofai-sidecar: demo: not built yet\n");
    return 1;
}
