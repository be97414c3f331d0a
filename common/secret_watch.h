/* common/secret_watch: keeps secrets read from files current while the
 * process runs. Kubernetes updates a mounted Secret in place (kubelet writes
 * a new timestamped directory and swaps the `..data` symlink to it), and
 * operators rotate tokens that way; a watched secret follows within
 * SECRET_WATCH_PERIOD_MS. One periodic thread (common/periodic.h) re-reads
 * every watched file at that period (a few small reads a second; inotify
 * would need a watch on each directory of the symlink chain for the same
 * result). A rotation is logged with the file's path and the secret's name,
 * never the value; an unreadable or empty file keeps the old value, and the
 * reason is logged once per change of state. */
#ifndef FPS_SECRET_WATCH_H
#define FPS_SECRET_WATCH_H
#include "common/err.h"
#include "common/secret.h"

enum { SECRET_WATCH_PERIOD_MS = 1000, SECRET_WATCH_MAX = 8 };

typedef struct secret_watch secret_watch;

/* An empty watcher (its thread starts with the first secret_watch_add).
 * NULL when out of memory. */
secret_watch *secret_watch_new(void);
/* Watches `path` for `s` (both borrowed: they outlive the watcher), logged
 * as `what`. Returns 0, or -1 with err (too many secrets, or no thread). */
int secret_watch_add(secret_watch *w, secret *s, const char *path, const char *what, fps_err *err);
/* Stops the thread and frees the watcher. NULL is a no-op. */
void secret_watch_free(secret_watch *w);

#endif
