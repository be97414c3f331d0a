/* sandbox/simg: session images (simg.h). PLACEHOLDER until the interpreter
 * lands: the image is the transcript's compact JSON text. */
#include "sandbox/simg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int simg_build(const json_t *transcript, const char *assignment_id, void **out, size_t *out_len,
               char *err, size_t errcap)
{
    char *s = json_dumps(transcript, JSON_COMPACT);
    if (s == NULL) {
        snprintf(err, errcap, "transcript cannot be serialized");
        return -1;
    }
    *out = s;
    *out_len = strlen(s);
    return 0;
}

int simg_validate(const void *buf, size_t len, char *err, size_t errcap)
{
    return 0;
}
