/* store/store: the database handle. */
#include "store/store.h"

int store_placeholder_(void);
int store_placeholder_(void)
{
    return 0;
}
