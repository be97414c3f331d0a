/* api/api: the admin server (implementation lands next). */
#include "api/api.h"

#include <stdio.h>

api_server *api_start(const api_deps *deps, char *err, size_t errcap)
{
    (void)deps;
    snprintf(err, errcap, "admin API not built yet");
    return NULL;
}

int api_port(const api_server *srv)
{
    (void)srv;
    return 0;
}

void api_stop(api_server *srv)
{
    (void)srv;
}
