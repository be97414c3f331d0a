/* common/procmem: the resident memory of a process tree, as a memory budget
 * counts it: each process's RssAnon + RssFile (/proc/PID/status), plus the
 * memfd files the tree holds open (session images), each counted once by
 * inode whatever the number of holders and whether or not it is mapped
 * (a memfd's pages are shmem, in neither Rss figure). Reads /proc only. */
#ifndef FPS_PROCMEM_H
#define FPS_PROCMEM_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    uint64_t rss;   /* sum of RssAnon + RssFile, bytes  */
    uint64_t memfd; /* distinct memfd files held, bytes */
    int processes;  /* processes in the tree            */
} procmem_sample;

/* From /proc/<pid>/stat: the command name (at most 15 bytes, as the
 * kernel keeps it) into comm[0..cap) and the parent's pid into *ppid
 * (either may be NULL). 0, or -1 if pid is gone or the line unreadable. */
int procmem_stat(pid_t pid, char *comm, size_t cap, pid_t *ppid);

/* Samples `root` and all its descendants. 0, or -1 if root is gone. */
int procmem_tree(pid_t root, procmem_sample *out);

#endif
