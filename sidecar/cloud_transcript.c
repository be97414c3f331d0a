/* sidecar/cloud_transcript: GET the assignment's transcript (capped at
 * 25 MiB, read no further) and validate it: schema_version "2", the
 * assignment's session revision, event_count == len(events), event shapes. */
#include "sidecar/cloud.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cloud_transcript(cloud *c, const cloud_assignment *a, json_t **out, size_t *bytes, char **raw,
                     cloud_error *e)
{
    json_t *t = NULL;
    *out = NULL;
    if (raw) *raw = NULL;
    size_t raw_len = 0;
    cloud_req req = {
        "GET", a->transcript_url, NULL, 0,       CLOUD_MAX_TRANSCRIPT, 1, a->lease_generation,
        1,     "transcript",      raw,  &raw_len};
    if (cloud_call(c, &req, &t, e) != 0) {
        if (!strcmp(e->code, "response_too_large"))
            snprintf(e->code, sizeof e->code, "transcript_too_large");
        return -1;
    }
    const char *sv = cloud_req_str(t, "schema_version", "transcript", e);
    if (sv == NULL) goto fail;
    if (strcmp(sv, "2") != 0) {
        cloud_set_protocol_error(e, "unsupported transcript schema_version '%.32s'", sv);
        goto fail;
    }
    static const char *const strs[] = {"assignment_id", "session_id",  "session_revision_id",
                                       "agent_id",      "environment", "started_at",
                                       "ended_at"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++)
        if (cloud_req_str(t, strs[i], "transcript", e) == NULL) goto fail;
    if (strcmp(json_string_value(json_object_get(t, "session_revision_id")),
               a->session_revision_id) != 0) {
        cloud_set_protocol_error(e, "transcript session_revision_id does not match the assignment");
        goto fail;
    }
    long long count;
    if (cloud_req_int(t, "event_count", "transcript", 0, &count, e)) goto fail;
    json_t *events = json_object_get(t, "events");
    if (!json_is_array(events)) {
        cloud_set_protocol_error(e, "transcript.events must be an array");
        goto fail;
    }
    if ((size_t)count != json_array_size(events)) {
        cloud_set_protocol_error(e, "transcript event_count is %lld but it holds %zu events", count,
                                 json_array_size(events));
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(events); i++) {
        json_t *ev = json_array_get(events, i);
        if (!json_is_object(ev) || !json_is_string(json_object_get(ev, "id")) ||
            !json_is_string(json_object_get(ev, "ts")) ||
            !json_is_string(json_object_get(ev, "event_type")) ||
            !json_is_object(json_object_get(ev, "payload"))) {
            cloud_set_protocol_error(e,
                                     "transcript.events[%zu] must be an object with string id, "
                                     "ts, event_type and an object payload",
                                     i);
            goto fail;
        }
    }
    *out = t;
    if (bytes) *bytes = e->response_bytes;
    return 0;
fail:
    json_decref(t);
    if (raw) {
        free(*raw);
        *raw = NULL;
    }
    return -1;
}
