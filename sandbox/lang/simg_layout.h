/* sandbox/lang/simg_layout: the byte layout of a session image, private to
 * simg.c (writer, validator) and session.c (reader). All offsets are from
 * the image start and fit 32 bits; the header, node blocks and event
 * records are 8-byte aligned, strings and out-of-line numbers are not (they
 * are read with memcpy); child node blocks always lie before the node that
 * owns them (the validator and the reader enforce it, so walks terminate). */
#ifndef FPS_SIMG_LAYOUT_H
#define FPS_SIMG_LAYOUT_H
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define SIMG_MAGIC "FPSIMG\x01"
#define SIMG_VERSION 2u
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

/* A string is its offset: there a 4-byte word w, then (when w's bit 0 is
 * clear: not ASCII) a 4-byte code point count, then its w >> 1 UTF-8 bytes
 * and a NUL. An ASCII string's code point count is its byte count. */
typedef struct {
    const char *s; /* the bytes (NUL-terminated) */
    uint32_t blen, clen;
    bool ascii;
} simg_sv;

/* Reads the string at `off` of an image of `len` bytes into *out; false
 * when it does not lie wholly inside the image or is malformed. */
static inline bool simg_str_at(const char *img, size_t len, uint64_t off, simg_sv *out)
{
    uint32_t w, clen;
    if (off + 4 > len) return false;
    memcpy(&w, img + off, 4);
    size_t at = (size_t)off + 4;
    if (w & 1) {
        clen = w >> 1;
    } else {
        if (at + 4 > len) return false;
        memcpy(&clen, img + at, 4);
        at += 4;
        if (clen > w >> 1) return false;
    }
    if (at + (w >> 1) >= len) return false; /* the NUL too */
    out->s = img + at;
    out->blen = w >> 1;
    out->clen = clen;
    out->ascii = (w & 1) != 0;
    return true;
}

typedef struct {
    char magic[8];
    uint32_t version;
    uint32_t total_len;
    uint32_t nevents;
    uint32_t events_off;
    int64_t event_count;
    uint32_t fields[SF__COUNT]; /* strings */
} simg_hdr;

/* A value is one 64-bit node: its tag in the low 4 bits.
 * NULL, TRUE, FALSE: the tag alone. INT: the value in the high 60 bits
 * (arithmetic shift right by 4). INT64: offset (high 32 bits) of its 8
 * bytes. FLOAT: offset of the double's 8 bytes. BIGINT: offset of a string,
 * its decimal text. STR: offset of the string. ARR: count in bits 4..31,
 * offset of `count` child nodes. OBJ: count in bits 4..31, offset of a
 * block of `count` value nodes followed by `count` 4-byte key offsets
 * (strings; short keys are stored once per image, so the keys of a
 * transcript's payloads share a few cache lines). EVENTS: only the
 * transcript's own "events" value in the root object (its records are the
 * header's). */
typedef uint64_t simg_node;
enum {
    SN_NULL,
    SN_TRUE,
    SN_FALSE,
    SN_INT,
    SN_INT64,
    SN_BIGINT,
    SN_FLOAT,
    SN_STR,
    SN_ARR,
    SN_OBJ,
    SN_EVENTS
};
#define SIMG_MAX_COUNT 0x0FFFFFFFu
#define SIMG_INT_MIN (-((int64_t)1 << 59))
#define SIMG_INT_MAX (((int64_t)1 << 59) - 1)

static inline unsigned simg_tag(simg_node n)
{
    return (unsigned)(n & 15);
}
static inline uint32_t simg_off(simg_node n)
{
    return (uint32_t)(n >> 32);
}
static inline uint32_t simg_count(simg_node n)
{
    return (uint32_t)(n >> 4) & SIMG_MAX_COUNT;
}
static inline int64_t simg_int(simg_node n)
{
    return (int64_t)n >> 4;
}
static inline simg_node simg_mk(unsigned tag, uint32_t count, uint32_t off)
{
    return (simg_node)tag | (simg_node)count << 4 | (simg_node)off << 32;
}
/* The bytes of an OBJ block of `count` pairs. */
static inline uint64_t simg_obj_bytes(uint64_t count)
{
    return count * (sizeof(simg_node) + 4);
}

/* one per event, contiguous (24 bytes, so a scan over events touches a
 * cache line per 2.7 events); the payload's OBJ node is inline */
typedef struct {
    uint32_t id, ts, type; /* strings */
    uint32_t pad;          /* 0 */
    simg_node payload;
} simg_event;

#endif
