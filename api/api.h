/* api/: the localhost admin REST server (libmicrohttpd). */
#ifndef FPS_API_H
#define FPS_API_H

typedef struct api_server api_server;

#endif
