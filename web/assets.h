/* web/assets: the admin page's static files, embedded into the binary at build
 * time by embed.cmake from web/static/. Read-only, process lifetime. */
#ifndef FPS_WEB_ASSETS_H
#define FPS_WEB_ASSETS_H
#include <stddef.h>

typedef struct {
    const char *path;         /* "/index.html" */
    const char *content_type; /* full Content-Type header value */
    const unsigned char *data;
    size_t len;
} web_asset;

/* The table, terminated by an entry whose path is NULL. */
extern const web_asset web_assets[];

/* Returns the asset served at `path` ("/" means "/index.html"), or NULL. */
const web_asset *web_asset_find(const char *path);

#endif
