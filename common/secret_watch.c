/* common/secret_watch: see secret_watch.h. */
#include "common/secret_watch.h"

#include "common/log.h"
#include "common/periodic.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    secret *s;        /* borrowed */
    const char *path; /* borrowed */
    const char *what; /* borrowed */
    int failing;      /* the last reload failed (logged once until it recovers) */
} watched;

struct secret_watch {
    pthread_mutex_t mu; /* guards items and n against secret_watch_add */
    periodic *reloader; /* owned: started with the first secret_watch_add */
    watched items[SECRET_WATCH_MAX];
    int n;
};

static void reload_all(secret_watch *w)
{
    for (int i = 0; i < w->n; i++) {
        watched *x = &w->items[i];
        fps_err err = {0};
        int rc = secret_reload(x->s, x->path, &err);
        if (rc < 0) {
            if (!x->failing)
                log_warn("a rotated secret file cannot be used; keeping the current value",
                         LOG_S("which", x->what), LOG_S("error", err.msg));
            x->failing = 1;
            continue;
        }
        if (x->failing && rc == 0)
            log_info("secret file readable again", LOG_S("which", x->what), LOG_S("path", x->path));
        x->failing = 0;
        if (rc == 1) log_info("secret rotated", LOG_S("which", x->what), LOG_S("path", x->path));
    }
}

/* The periodic job (ud: the watcher). */
static void reload_job(void *ud)
{
    secret_watch *w = ud;
    pthread_mutex_lock(&w->mu); /* secret_watch_add may not run meanwhile */
    reload_all(w);
    pthread_mutex_unlock(&w->mu);
}

secret_watch *secret_watch_new(void)
{
    secret_watch *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    return w;
}

int secret_watch_add(secret_watch *w, secret *s, const char *path, const char *what, fps_err *err)
{
    int rc = -1;
    pthread_mutex_lock(&w->mu);
    if (w->n == SECRET_WATCH_MAX) {
        fps_err_set(err, -1, 0, "too_many", "at most %d secret files are watched",
                    SECRET_WATCH_MAX);
        goto done;
    }
    w->items[w->n++] = (watched){s, path, what, 0};
    if (w->reloader == NULL) {
        periodic_job job = {"secret files", SECRET_WATCH_PERIOD_MS, reload_job, w};
        fps_err pe;
        w->reloader = periodic_start("fps-secrets", &job, 1, &pe);
        if (w->reloader == NULL) {
            w->n--;
            fps_err_set(err, -1, 0, "cannot_start", "cannot start the secret watcher thread: %s",
                        pe.msg);
            goto done;
        }
    }
    rc = 0;
done:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void secret_watch_free(secret_watch *w)
{
    if (w == NULL) return;
    periodic_stop(w->reloader); /* before mu: its job takes it */
    pthread_mutex_destroy(&w->mu);
    free(w);
}
