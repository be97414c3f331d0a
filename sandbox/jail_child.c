/* sandbox/jail_child: the child side of one jailed evaluation. */
#include "sandbox/jail.h"

#include <stdio.h>

int sbx_child_main(int argc, char **argv)
{
    fprintf(stderr, "sandbox child: not built yet\n");
    return 1;
}
