/* common/ids: identifiers and digests. Request ids (32 lowercase hex, SPEC §2),
 * UUIDs (random, formatted by libuuid) and SHA-256 (Nettle, the crypto
 * library GnuTLS is built on). */
#ifndef FPS_IDS_H
#define FPS_IDS_H
#include <stddef.h>

/* 32 lowercase hex chars + NUL: out needs 33 bytes. */
void ids_request_id(char out[33]);
/* Canonical lowercase random (version 4) UUID: out needs 37 bytes. */
void ids_uuid(char out[37]);
/* Lowercase hex SHA-256 of data: out needs 65 bytes. */
void ids_sha256_hex(const void *data, size_t len, char out[65]);

#endif
