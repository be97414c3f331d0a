/* api/api: the admin server. */
#include "api/api.h"

int api_placeholder_(void);
int api_placeholder_(void)
{
    return 0;
}
