/* sandbox/lang/simg_layout: the byte layout of a session image, private to
 * simg.c (writer, validator) and session.c (reader). All offsets are from
 * the image start; every struct is 8-byte aligned; child node blocks always
 * lie after their parent (the validator enforces it, so walks terminate). */
#ifndef FPS_SIMG_LAYOUT_H
#define FPS_SIMG_LAYOUT_H
#include <stdint.h>

#define SIMG_MAGIC "FPSIMG\x01"
#define SIMG_VERSION 1u
#define SIMG_MAX_DEPTH 4096
/* A string value of at most this many bytes may be one stored earlier and
 * shared (simg.c's value cache): it can lie anywhere before its node. */
#define SIMG_INTERN_VALUE 16

enum {
    SF_ASSIGNMENT_ID,
    SF_SESSION_ID,
    SF_SESSION_REVISION_ID,
    SF_AGENT_ID,
    SF_ENVIRONMENT,
    SF_STARTED_AT,
    SF_ENDED_AT,
    SF_SCHEMA_VERSION,
    SF__COUNT
};

/* a string: UTF-8 bytes at off (NUL-terminated), blen bytes, clen code points */
typedef struct {
    uint32_t off, blen, clen, ascii;
} simg_str;

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t total_len;
    uint32_t nevents;
    uint32_t events_off;
    int64_t event_count;
    simg_str fields[SF__COUNT];
} simg_hdr;

enum { SN_NULL, SN_TRUE, SN_FALSE, SN_INT, SN_BIGINT, SN_FLOAT, SN_STR, SN_ARR, SN_OBJ };

/* 16 bytes. STR: a=blen, b=off | clen<<32, flags=ascii. INT: b=int64.
 * BIGINT: a=len of decimal text at off b. FLOAT: b=double bits.
 * ARR: a=count, b=offset of `count` child nodes. OBJ: a=count, b=offset of
 * 2*count nodes (key STR node, value node) in order. */
typedef struct {
    uint8_t tag;
    uint8_t flags;
    uint16_t pad;
    uint32_t a;
    uint64_t b;
} simg_node;

/* one per event, contiguous; the payload's OBJ node is inline so a scan over
 * events touches one cache line per event */
typedef struct {
    simg_str id, ts, type;
    simg_node payload;
} simg_event;

#endif
