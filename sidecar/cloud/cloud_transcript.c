/* sidecar/cloud_transcript: GET the assignment's transcript (capped at
 * 25 MiB, read no further) and parse it once, from its bytes straight to the
 * session image the jail maps: strict JSON (duplicate keys, NaN/Infinity
 * refused), schema_version "2", string fields, event shapes, event_count ==
 * len(events); then the assignment's session revision. Every violation is a
 * protocol error for the assignment. The bytes are kept as received, in
 * one buffer of the Content-Length's size (never regrown), when the caller
 * asks for them; otherwise the build consumes them (SIMG_CONSUME). */
#include "sidecar/cloud/cloud.h"

#include "sandbox/lang/simg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cloud_transcript(cloud *c, const cloud_assignment *a, rcbuf **raw, void **simg,
                     size_t *simg_len, cloud_error *e)
{
    return cloud_transcript_sized(c, a, NULL, NULL, raw, simg, simg_len, e);
}

int cloud_transcript_sized(cloud *c, const cloud_assignment *a, cloud_size_hook on_size, void *ud,
                           rcbuf **raw, void **simg, size_t *simg_len, cloud_error *e)
{
    char *body = NULL;
    size_t len = 0;
    if (raw != NULL) *raw = NULL;
    *simg = NULL;
    *simg_len = 0;
    json_t *unused = NULL;
    cloud_req req = {.method = "GET",
                     .url = a->transcript_url,
                     .cap = CLOUD_MAX_TRANSCRIPT,
                     .retry = 1,
                     .lease_generation = a->lease_generation,
                     .allow_no_version = 1,
                     .ep = CLOUD_EP_TRANSCRIPT,
                     .raw_out = &body,
                     .raw_len = &len,
                     .lease_expires_epoch = a->lease_expires_epoch,
                     .on_size = on_size,
                     .size_ud = ud};
    if (cloud_call(c, &req, &unused, e) != 0) {
        if (e->errc == CLOUD_ERRC_RESPONSE_TOO_LARGE) {
            e->errc = CLOUD_ERRC_TRANSCRIPT_TOO_LARGE;
            snprintf(e->err.name, sizeof e->err.name, "transcript_too_large");
        }
        return -1;
    }
    fps_err err;
    /* without `raw`, nothing reads the bytes after the build: they are
     * given up to it, handed back to the kernel as they are parsed */
    unsigned flags = SIMG_STRICT | (raw == NULL ? SIMG_CONSUME : 0u);
    if (simg_build_text(body, len, a->assignment_id, flags, simg, simg_len, &err) != 0) {
        cloud_set_protocol_error(e, "%s", err.msg);
        goto fail;
    }
    if (strcmp(simg_session_revision_id(*simg), a->session_revision_id) != 0) {
        cloud_set_protocol_error(e, "transcript session_revision_id does not match the assignment");
        goto fail;
    }
    if (raw == NULL) {
        free(body);
        return 0;
    }
    *raw = rcbuf_take(body, len);
    if (*raw == NULL) {
        cloud_set_protocol_error(e, "out of memory");
        body = NULL;
        goto fail;
    }
    return 0;
fail:
    free(body);
    free(*simg);
    *simg = NULL;
    *simg_len = 0;
    return -1;
}
