/* sidecar/cmd_run: `failproofai-sidecar run`: parse configuration, then hand
 * over to the daemon (sidecar/daemon.c). */
#include "common/log.h"
#include "sidecar/commands.h"
#include "sidecar/config.h"
#include "sidecar/daemon.h"

#include <stdio.h>

int cmd_run(int argc, char **argv)
{
    run_config cfg;
    fps_err err;
    int status = 2;
    config_defaults(&cfg);
    int rc = cli_parse(config_run_command(), argc, argv, &cfg, stdout, &err);
    if (rc == CLI_HELP) {
        status = 0;
        goto done;
    }
    if (rc != CLI_OK || config_validate(&cfg, &err) != 0) {
        fprintf(stderr, "failproofai-sidecar: %s\n", err.msg);
        goto done;
    }
    status = daemon_run(&cfg);
done:
    config_free(&cfg);
    return status;
}
