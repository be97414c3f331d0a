/* common/secret_watch: see secret_watch.h. */
#include "common/secret_watch.h"

#include "common/log.h"
#include "common/thread.h"

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
    pthread_mutex_t mu;
    pthread_cond_t cv; /* stop (CLOCK_MONOTONIC) */
    int stopping, started;
    pthread_t thread;
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

static void *watch_main(void *arg)
{
    secret_watch *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += SECRET_WATCH_PERIOD_MS / 1000;
        ts.tv_nsec += (long)(SECRET_WATCH_PERIOD_MS % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        while (!w->stopping && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0) {
        }
        if (w->stopping) break;
        reload_all(w); /* under mu: secret_watch_add may not run meanwhile */
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

secret_watch *secret_watch_new(void)
{
    secret_watch *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
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
    if (!w->started) {
        if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
            w->n--;
            fps_err_set(err, -1, 0, "cannot_start", "cannot start the secret watcher thread");
            goto done;
        }
        pthread_setname_np(w->thread, "fps-secrets");
        w->started = 1;
    }
    rc = 0;
done:
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void secret_watch_free(secret_watch *w)
{
    if (w == NULL) return;
    if (w->started) thread_stop_join(w->thread, &w->mu, &w->cv, &w->stopping);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}
