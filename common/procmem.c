/* common/procmem: see procmem.h. */
#include "common/procmem.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    pid_t pid, ppid;
} pp;

int procmem_stat(pid_t pid, char *comm, size_t cap, pid_t *ppid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold ')' itself, so the last one
     * ends it. */
    const char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    int pp;
    char st;
    if (l == NULL || r == NULL || r < l || sscanf(r + 1, " %c %d", &st, &pp) != 2) return -1;
    if (comm != NULL && cap > 0) snprintf(comm, cap, "%.*s", (int)(r - l - 1), l + 1);
    if (ppid != NULL) *ppid = (pid_t)pp;
    return 0;
}

/* The parent of pid, or -1. */
static pid_t parent_of(pid_t pid)
{
    pid_t ppid;
    return procmem_stat(pid, NULL, 0, &ppid) == 0 ? ppid : -1;
}

/* RssAnon + RssFile of pid in bytes; -1 if it is gone. */
static int64_t rss_of(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL) return -1;
    int64_t kib = 0;
    while (fgets(line, sizeof line, f)) {
        long long v;
        if ((!strncmp(line, "RssAnon:", 8) && sscanf(line + 8, "%lld", &v) == 1) ||
            (!strncmp(line, "RssFile:", 8) && sscanf(line + 8, "%lld", &v) == 1))
            kib += v;
    }
    fclose(f);
    return kib * 1024;
}

/* Adds the memfds pid holds that are not in seen[0..*n) yet. */
static void memfds_of(pid_t pid, ino_t **seen, size_t *n, size_t *cap, uint64_t *bytes)
{
    char path[64], link[256], fdp[352];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d == NULL) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(fdp, sizeof fdp, "%s/%s", path, e->d_name);
        ssize_t l = readlink(fdp, link, sizeof link - 1);
        if (l < 7) continue;
        link[l] = '\0';
        if (strncmp(link, "/memfd:", 7) != 0) continue;
        struct stat st;
        if (stat(fdp, &st) != 0) continue;
        int dup = 0;
        for (size_t i = 0; i < *n && !dup; i++)
            dup = (*seen)[i] == st.st_ino;
        if (dup) continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 16;
            ino_t *ns = realloc(*seen, nc * sizeof *ns);
            if (ns == NULL) continue;
            *seen = ns;
            *cap = nc;
        }
        (*seen)[(*n)++] = st.st_ino;
        *bytes += (uint64_t)st.st_blocks * 512;
    }
    closedir(d);
}

int procmem_tree(pid_t root, procmem_sample *out)
{
    memset(out, 0, sizeof *out);
    pp *all = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir("/proc");
    if (d == NULL) return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end != '\0' || pid <= 0) continue;
        pid_t par = parent_of((pid_t)pid);
        if (par < 0) continue;
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            pp *na = realloc(all, nc * sizeof *na);
            if (na == NULL) break;
            all = na;
            cap = nc;
        }
        all[n].pid = (pid_t)pid;
        all[n++].ppid = par;
    }
    closedir(d);
    /* the tree: root, then every process whose parent is in it */
    pid_t *tree = malloc((n + 1) * sizeof *tree);
    size_t nt = 0;
    int rc = -1;
    if (tree == NULL) goto done;
    tree[nt++] = root;
    for (size_t i = 0; i < nt; i++)
        for (size_t k = 0; k < n; k++)
            if (all[k].ppid == tree[i] && all[k].pid != root) tree[nt++] = all[k].pid;
    ino_t *seen = NULL;
    size_t ns = 0, scap = 0;
    for (size_t i = 0; i < nt; i++) {
        int64_t r = rss_of(tree[i]);
        if (r < 0) {
            if (i == 0) break;
            continue;
        }
        if (i == 0) rc = 0;
        out->rss += (uint64_t)r;
        out->processes++;
        memfds_of(tree[i], &seen, &ns, &scap, &out->memfd);
    }
    free(seen);
done:
    free(tree);
    free(all);
    return rc;
}
