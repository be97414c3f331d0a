/* sandbox/jail/helper/failproofai_sandbox: the sandbox child image. sbx_spawn.c execs
 * this small binary (installed next to failproofai-sidecar) once per
 * evaluation instead of the whole sidecar: it links only the interpreter and
 * the jail (no HTTP client or server, TLS, SQLite), so a child starts in
 * about the time of any small program, and its image carries none of the
 * daemon's network code. Same argv contract as `failproofai-sidecar
 * __sandbox-child` (sandbox/jail/jail.h), which remains the fallback. */
#include "sandbox/jail/jail.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], SBX_CHILD_ARG) != 0) {
        fprintf(stderr,
                "failproofai-sandbox: the sandbox child is started by failproofai-sidecar\n");
        return 2;
    }
    return sbx_child_main(argc - 2, argv + 2);
}
