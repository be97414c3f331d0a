/* web/assets: lookup in the generated asset table. */
#include "assets.h"
#include <string.h>

const web_asset *web_asset_find(const char *path)
{
    if (path == NULL) return NULL;
    if (strcmp(path, "/") == 0) path = "/index.html";
    for (const web_asset *a = web_assets; a->path != NULL; a++)
        if (strcmp(a->path, path) == 0) return a;
    return NULL;
}
