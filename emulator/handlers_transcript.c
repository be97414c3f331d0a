/* emulator/handlers_transcript: GET .../assignments/{id}/transcript and
 * GET .../assignments/{id}/definitions, both fenced by the
 * X-FailproofAI-Worker-Id and X-FailproofAI-Lease-Generation headers. The
 * transcript is serialized once when the session is added and served from
 * that buffer (413 above --max-transcript-bytes). */
#include "emulator/emu_internal.h"

#include "common/canonjson.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int emu_fence_headers(emu_req *r, const char **worker_id, long *generation)
{
    *worker_id = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-FailproofAI-Worker-Id");
    const char *g =
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-FailproofAI-Lease-Generation");
    if (*worker_id == NULL || **worker_id == '\0') {
        emu_reply_error(r, "invalid_request", "the X-FailproofAI-Worker-Id header is required");
        return -1;
    }
    if (g == NULL || *g == '\0') {
        emu_reply_error(r, "invalid_request",
                        "the X-FailproofAI-Lease-Generation header is required");
        return -1;
    }
    char *end;
    errno = 0;
    long v = strtol(g, &end, 10);
    if (errno || *end || v <= 0) {
        emu_reply_error(r, "invalid_request",
                        "X-FailproofAI-Lease-Generation must be a positive integer");
        return -1;
    }
    *generation = v;
    return 0;
}

/* Looks up and fences; on success returns the assignment with mu held. */
static emu_assignment *fenced(emu_req *r, const char *assignment_id)
{
    const char *worker_id;
    long gen;
    if (emu_fence_headers(r, &worker_id, &gen) != 0) return NULL;
    emulator *e = r->e;
    pthread_mutex_lock(&e->mu);
    emu_assignment *a = emu_map_get(&e->assignments_by_id, assignment_id);
    if (a == NULL) {
        pthread_mutex_unlock(&e->mu);
        emu_reply_error(r, "assignment_not_found", "no assignment %.64s", assignment_id);
        return NULL;
    }
    if (emu_fence(r, a, worker_id, gen, 0) != 0) {
        pthread_mutex_unlock(&e->mu);
        return NULL;
    }
    return a;
}

void emu_h_transcript(emu_req *r, const char *assignment_id)
{
    emulator *e = r->e;
    emu_assignment *a = fenced(r, assignment_id);
    if (a == NULL) return;
    /* The transcript buffer is immutable and lives as long as the emulator. */
    const char *t = a->transcript;
    size_t len = a->transcript_len;
    pthread_mutex_unlock(&e->mu);
    if ((long)len > e->max_transcript_bytes) {
        emu_reply_error(r, "transcript_too_large", "the transcript is %zu bytes; maximum is %ld",
                        len, e->max_transcript_bytes);
        return;
    }
    r->status = 200;
    r->resp = (char *)t;
    r->resp_len = len;
    r->resp_static = 1;
}

void emu_h_definitions(emu_req *r, const char *assignment_id)
{
    emulator *e = r->e;
    emu_assignment *a = fenced(r, assignment_id);
    if (a == NULL) return;
    json_t *resp =
        json_pack("{s:s, s:s, s:s, s:O}", "protocol_version", EMU_PROTOCOL_VERSION, "assignment_id",
                  a->id, "catalog_revision", a->catalog_revision, "definitions", a->definitions);
    char *text = canonjson_dumps_ordered(resp);
    json_decref(resp);
    pthread_mutex_unlock(&e->mu);
    r->status = 200;
    r->resp = text;
    r->resp_len = text ? strlen(text) : 0;
    r->resp_static = 0;
}
