/* common/cgroup: the memory limit of the container this process runs in,
 * read from its cgroup: v2 `memory.max` (a number of bytes or "max"), else
 * v1 `memory.limit_in_bytes` (a number; the page-rounded LONG_MAX means no
 * limit). The cgroup is found as the JVM and Go's runtimes find it:
 * /proc/self/cgroup names the process's cgroup path per hierarchy and
 * /proc/self/mountinfo where that hierarchy is mounted; the limit is the
 * smallest one on the path from the process's cgroup up to the mount's
 * root. The parsers are pure functions over the files' text so that each
 * format is testable without a cgroup; cgroup_memory_limit reads the files
 * under a root prefix ("" for the real system). */
#ifndef FPS_CGROUP_H
#define FPS_CGROUP_H
#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

/* Results of the parsers and of cgroup_memory_limit. */
enum {
    CGROUP_LIMIT = 1,     /* a limit: *bytes holds it                   */
    CGROUP_NONE = 0,      /* no limit ("max", unlimited, no cgroup)     */
    CGROUP_EINVALID = -1, /* the text is not a limit (fps_err "invalid_cgroup") */
};

/* One limit file's text (trailing newline allowed). version 2: a decimal
 * number or "max"; version 1: a decimal number, >= 2^62 meaning none. */
int cgroup_parse_limit(const char *text, int version, uint64_t *bytes, fps_err *e);

/* The cgroup path of the memory controller in /proc/self/cgroup's text:
 * the v1 line whose controller list holds "memory" (version 1), else the
 * v2 line "0::PATH" (version 2). Copies the path into `path`. Returns the
 * version, 0 if the text names neither, or CGROUP_EINVALID. */
int cgroup_parse_self(const char *text, char *path, size_t cap, fps_err *e);

/* The mount of a hierarchy in /proc/self/mountinfo's text: version 2, the
 * "cgroup2" file system; version 1, a "cgroup" one whose super options
 * hold "memory". Copies its root (field 4) and mount point (field 5).
 * Returns 1 if found, 0 if not. */
int cgroup_parse_mountinfo(const char *text, int version, char *root, size_t rcap, char *mnt,
                           size_t mcap);

/* The container's memory limit: CGROUP_LIMIT with *bytes, CGROUP_NONE, or
 * CGROUP_EINVALID (a limit file that is not a limit). `prefix` is prepended
 * to every path read ("" for the real system; tests give a directory that
 * holds proc/self/... and the mount points). `source`, if not NULL, gets
 * the file the limit came from. */
int cgroup_memory_limit(const char *prefix, uint64_t *bytes, char *source, size_t scap, fps_err *e);

#endif
