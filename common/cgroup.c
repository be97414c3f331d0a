/* common/cgroup: see cgroup.h. */
#include "common/cgroup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* v1 reports "no limit" as LONG_MAX rounded down to the page size. */
#define CGROUP_V1_UNLIMITED ((uint64_t)1 << 62)

int cgroup_parse_limit(const char *text, int version, uint64_t *bytes, fps_err *e)
{
    size_t n = text ? strlen(text) : 0;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' ' || text[n - 1] == '\t'))
        n--;
    if (n == 0) {
        fps_err_set(e, CGROUP_EINVALID, 0, "invalid_cgroup", "empty memory limit");
        return CGROUP_EINVALID;
    }
    if (version == 2 && n == 3 && !strncmp(text, "max", 3)) return CGROUP_NONE;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9' || v > (UINT64_MAX - 9) / 10) {
            fps_err_set(e, CGROUP_EINVALID, 0, "invalid_cgroup",
                        "memory limit '%.40s' is not a number of bytes%s", text,
                        version == 2 ? " or \"max\"" : "");
            return CGROUP_EINVALID;
        }
        v = v * 10 + (uint64_t)(text[i] - '0');
    }
    if (version == 1 && v >= CGROUP_V1_UNLIMITED) return CGROUP_NONE;
    *bytes = v;
    return CGROUP_LIMIT;
}

/* Copies s[0..n) into out (cap bytes). 0, or -1 if it does not fit. */
static int copy_n(char *out, size_t cap, const char *s, size_t n)
{
    if (n >= cap) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* 1 if the comma-separated list s[0..n) holds `word`. */
static int list_has(const char *s, size_t n, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = s, *end = s + n; p < end;) {
        const char *c = memchr(p, ',', (size_t)(end - p));
        size_t l = c ? (size_t)(c - p) : (size_t)(end - p);
        if (l == wl && !memcmp(p, word, wl)) return 1;
        p += l + 1;
    }
    return 0;
}

int cgroup_parse_self(const char *text, char *path, size_t cap, fps_err *e)
{
    int found = 0;
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (len > 0 && c2 == NULL) {
            fps_err_set(e, CGROUP_EINVALID, 0, "invalid_cgroup",
                        "/proc/self/cgroup line '%.60s' is not ID:CONTROLLERS:PATH", line);
            return CGROUP_EINVALID;
        }
        if (c2 != NULL) {
            const char *p = c2 + 1;
            size_t pl = len - (size_t)(p - line);
            size_t cl = (size_t)(c2 - c1 - 1);
            if (list_has(c1 + 1, cl, "memory")) {
                if (copy_n(path, cap, p, pl) != 0) goto too_long;
                return 1; /* v1's memory controller wins over a hybrid v2 line */
            }
            if (cl == 0 && c1 - line == 1 && line[0] == '0' && !found) {
                if (copy_n(path, cap, p, pl) != 0) goto too_long;
                found = 2;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return found;
too_long:
    fps_err_set(e, CGROUP_EINVALID, 0, "invalid_cgroup", "cgroup path too long");
    return CGROUP_EINVALID;
}

int cgroup_parse_mountinfo(const char *text, int version, char *root, size_t rcap, char *mnt,
                           size_t mcap)
{
    for (const char *line = text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        /* fields: id parent major:minor root mountpoint options [optional...] - fstype source
         * super-options */
        const char *f[6];
        size_t fl[6];
        int nf = 0;
        const char *p = line, *end = line + len;
        while (nf < 6 && p < end) {
            while (p < end && *p == ' ')
                p++;
            const char *s = p;
            while (p < end && *p != ' ')
                p++;
            if (p > s) {
                f[nf] = s;
                fl[nf++] = (size_t)(p - s);
            }
        }
        const char *dash = NULL;
        for (const char *q = p; q + 2 < end; q++)
            if (q[0] == ' ' && q[1] == '-' && q[2] == ' ') {
                dash = q + 3;
                break;
            }
        if (nf >= 5 && dash != NULL) {
            const char *ft = dash, *fte = memchr(dash, ' ', (size_t)(end - dash));
            size_t ftl = fte ? (size_t)(fte - ft) : (size_t)(end - ft);
            const char *so = NULL;
            size_t sol = 0;
            if (fte) {
                const char *src = fte + 1, *srce = memchr(src, ' ', (size_t)(end - src));
                if (srce) {
                    so = srce + 1;
                    sol = (size_t)(end - so);
                }
            }
            int match = version == 2 ? (ftl == 7 && !memcmp(ft, "cgroup2", 7))
                                     : (ftl == 6 && !memcmp(ft, "cgroup", 6) && so != NULL &&
                                        list_has(so, sol, "memory"));
            if (match && copy_n(root, rcap, f[3], fl[3]) == 0 &&
                copy_n(mnt, mcap, f[4], fl[4]) == 0)
                return 1;
        }
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

/* Reads a small file whole (NUL-terminated, malloc'd), or NULL. */
static char *read_small(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        size_t n = fread(buf + len, 1, cap - 1 - len, f);
        len += n;
        if (len < cap - 1) break;
        char *nb = cap < ((size_t)1 << 22) ? realloc(buf, cap * 2) : NULL;
        if (nb == NULL) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    fclose(f);
    if (buf != NULL) buf[len] = '\0';
    return buf;
}

int cgroup_memory_limit(const char *prefix, uint64_t *bytes, char *source, size_t scap, fps_err *e)
{
    char path[4096], cgpath[2048], root[2048], mnt[2048], file[8192];
    int rc = CGROUP_NONE;
    if (source && scap) source[0] = '\0';
    snprintf(path, sizeof path, "%s/proc/self/cgroup", prefix);
    char *self = read_small(path);
    snprintf(path, sizeof path, "%s/proc/self/mountinfo", prefix);
    char *mi = read_small(path);
    if (self == NULL || mi == NULL) goto done;
    int version = cgroup_parse_self(self, cgpath, sizeof cgpath, e);
    if (version <= 0) {
        rc = version < 0 ? CGROUP_EINVALID : CGROUP_NONE;
        goto done;
    }
    if (!cgroup_parse_mountinfo(mi, version, root, sizeof root, mnt, sizeof mnt)) goto done;
    /* The process's cgroup relative to the mount: its path less the mount's
     * root; a path outside that root (another cgroup namespace) means the
     * mount itself is the process's cgroup. */
    const char *rel = cgpath;
    size_t rl = strlen(root);
    if (strcmp(root, "/") != 0) {
        if (!strncmp(cgpath, root, rl) && (cgpath[rl] == '/' || cgpath[rl] == '\0'))
            rel = cgpath + rl;
        else
            rel = "";
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s%s%s", prefix, mnt, strcmp(rel, "/") ? rel : "");
    snprintf(file, sizeof file, "%s/%s", dir,
             version == 2 ? "memory.max" : "memory.limit_in_bytes");
    FILE *probe = fopen(file, "re");
    if (probe == NULL) { /* the path is not visible here: the mount's own */
        snprintf(dir, sizeof dir, "%s%s", prefix, mnt);
    } else {
        fclose(probe);
    }
    size_t base = strlen(prefix) + strlen(mnt);
    /* The smallest limit from the cgroup up to the mount point. */
    for (;;) {
        snprintf(file, sizeof file, "%s/%s", dir,
                 version == 2 ? "memory.max" : "memory.limit_in_bytes");
        char *text = read_small(file);
        if (text != NULL) {
            uint64_t v = 0;
            int r = cgroup_parse_limit(text, version, &v, e);
            free(text);
            if (r == CGROUP_EINVALID) {
                rc = CGROUP_EINVALID;
                goto done;
            }
            if (r == CGROUP_LIMIT && (rc != CGROUP_LIMIT || v < *bytes)) {
                *bytes = v;
                rc = CGROUP_LIMIT;
                if (source && scap) snprintf(source, scap, "%s", file + strlen(prefix));
            }
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || (size_t)(slash - dir) < base || strlen(dir) <= base) break;
        *slash = '\0';
    }
done:
    free(self);
    free(mi);
    return rc;
}
