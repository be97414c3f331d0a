/* sandbox/jail/sbx_eval: one evaluation (sbx_eval, sbx_check): a slot, a child, one deadline
 * for the slot wait and the run, the request, the outcome. Shared
 * structures and threading: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

double sbx_clamp_timeout(double t)
{
    if (!(t > 0)) return 30.0;
    return t > 60.0 ? 60.0 : t;
}

/* ---- one evaluation ---- */

void sbx_set_status(sbx_outcome *out, sbx_status st, const char *limit, const char *fmt, ...)
{
    out->status = st;
    snprintf(out->limit, sizeof out->limit, "%s", limit ? limit : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->detail, sizeof out->detail, fmt, ap);
    va_end(ap);
}
#define set_status sbx_set_status

/* Waits for a slot until the deadline. 0 = got one, -2 deadline, -3 cancel.
 * A playground request also needs its own budget (playground_max) and no
 * worker request waiting: the operator's experiments never delay work. */
static int acquire_slot(sbx_pool *pool, double deadline, atomic_int *cancel, int playground)
{
    int rc = 0;
    pthread_mutex_lock(&pool->mu);
    if (!playground) pool->worker_waiting++;
    while (pool->busy >= pool->cfg.max_sandboxes ||
           (playground &&
            (pool->playground_busy >= pool->cfg.playground_max || pool->worker_waiting > 0))) {
        if (cancel != NULL && atomic_load(cancel)) {
            rc = -3;
            break;
        }
        double left = deadline - now_ms();
        if (left <= 0) {
            rc = -2;
            break;
        }
        struct timespec ts =
            abs_after_ms(cancel != NULL && left > CANCEL_TICK_MS ? CANCEL_TICK_MS : left);
        pthread_cond_timedwait(&pool->slot_cv, &pool->mu, &ts);
    }
    if (!playground) pool->worker_waiting--;
    if (rc == 0) {
        pool->busy++;
        pool->playground_busy += playground;
    }
    /* a worker that gave up may unblock a playground request */
    if (rc != 0 && !playground) pthread_cond_broadcast(&pool->slot_cv);
    pthread_mutex_unlock(&pool->mu);
    return rc;
}

static void release_slot(sbx_pool *pool, int playground)
{
    pthread_mutex_lock(&pool->mu);
    pool->busy--;
    pool->playground_busy -= playground;
    /* both kinds may wait, with different conditions: wake them all */
    pthread_cond_broadcast(&pool->slot_cv);
    if (pool->busy == 0) pthread_cond_signal(&pool->refill_cv);
    pthread_mutex_unlock(&pool->mu);
}

int sbx_take_idle(sbx_pool *pool, child_t *c)
{
    int rc = -1;
    pthread_mutex_lock(&pool->mu);
    if (pool->nidle > 0) {
        *c = pool->idle[0];
        memmove(pool->idle, pool->idle + 1, (size_t)(pool->nidle - 1) * sizeof *pool->idle);
        pool->nidle--;
        pthread_cond_signal(&pool->refill_cv);
        rc = 0;
    }
    pthread_mutex_unlock(&pool->mu);
    return rc;
}

int sbx_take_child(sbx_pool *pool, child_t *c, fps_err *err)
{
    if (sbx_take_idle(pool, c) == 0) return 0;
    return sbx_new_child(pool, c, err);
}

void sbx_track_running(sbx_pool *pool, pid_t pid, int on)
{
    pthread_mutex_lock(&pool->mu);
    for (int i = 0; i < pool->cfg.max_sandboxes; i++) {
        if (on && pool->running[i] == 0) {
            pool->running[i] = pid;
            break;
        }
        if (!on && pool->running[i] == pid) {
            pool->running[i] = 0;
            break;
        }
    }
    pthread_mutex_unlock(&pool->mu);
}

static const char *lang_field(lang_kind k)
{
    return k == LANG_CONDITION ? "condition_source" : "evaluator_source";
}

/* ---- the memory budget's gate ---- */

static sbx_gate_class gate_class(const sbx_request *req)
{
    if (req->background) return SBX_GATE_BACKGROUND;
    if (req->playground) return SBX_GATE_PLAYGROUND;
    return req->budget_s > 0 ? SBX_GATE_NOWAIT : SBX_GATE_WAIT;
}

/* The anonymous resident bytes of pid (statm: resident less shared); 0
 * when unreadable (it is exiting). */
static uint64_t anon_bytes(pid_t pid)
{
    static long page;
    if (page == 0) page = sysconf(_SC_PAGESIZE);
    char path[64];
    uint64_t total = 0;
    snprintf(path, sizeof path, "/proc/%d/statm", (int)pid);
    FILE *f = fopen(path, "re");
    if (f != NULL) {
        unsigned long size, res, shared;
        if (fscanf(f, "%lu %lu %lu", &size, &res, &shared) == 3 && res > shared)
            total += (uint64_t)(res - shared) * (uint64_t)page;
        fclose(f);
    }
    return total;
}

int sbx_watch_stop(sbx_run *r)
{
    if (r == NULL || r->ticket == NULL || r->watch_pid <= 0) return 0;
    const sbx_gate *g = &r->gate;
    sbx_ticket *t = r->ticket;
    uint64_t bytes = 0;
    int stop = atomic_load(&t->stop) != 0;
    if (!stop && t->cls != SBX_GATE_NOWAIT && g->near != NULL && g->near(g->ud)) {
        bytes = anon_bytes(r->watch_pid);
        stop = g->sample != NULL && g->sample(g->ud, t, bytes);
    }
    if (!stop) return 0;
    if (bytes == 0) bytes = anon_bytes(r->watch_pid);
    if (bytes > t->need) t->need = bytes;
    atomic_fetch_add(&r->pool->reruns, 1);
    return 1;
}

void sbx_pool_set_gate(sbx_pool *pool, const sbx_gate *gate)
{
    pthread_mutex_lock(&pool->mu);
    if (gate != NULL)
        pool->gate = *gate;
    else
        memset(&pool->gate, 0, sizeof pool->gate);
    pthread_mutex_unlock(&pool->mu);
}

int sbx_run_begin(sbx_pool *pool, const sbx_request *req, int check_only, sbx_run *r,
                  sbx_outcome *out, sbx_ticket *ticket)
{
    memset(out, 0, sizeof *out);
    memset(r, 0, sizeof *r);
    r->pool = pool;
    r->t0 = now_ms();
    r->budget_ms = sbx_clamp_timeout(req->timeout_s) * 1e3;
    r->deadline = r->t0 + r->budget_ms;
    /* with a lease budget, the wait is bounded by the lease, not the timeout */
    r->wait_deadline = req->budget_s > 0 ? r->t0 + req->budget_s * 1e3 : r->deadline;
    r->cut = "timeout"; /* which bound a deadline kill means */
    r->playground = req->playground != 0;
    r->src = req->source ? req->source : "";
    size_t src_len = req->source ? req->source_len : 0;
    r->key = req->eval_key ? req->eval_key : "";
    size_t key_len = strlen(r->key);

    if (src_len > JAIL_MAX_SOURCE) {
        /* Far past the language's own limits: no need for a child. */
        char line[160];
        snprintf(line, sizeof line,
                 "{\"ok\": false, \"stage\": \"compile\", \"message\": \"%s exceeds %d bytes\"}",
                 lang_field(req->kind), req->kind == LANG_CONDITION ? 16384 : 131072);
        out->line = strdup(line);
        out->json = out->line ? json_loads(out->line, 0, NULL) : NULL;
        if (out->json == NULL)
            set_status(out, SBX_JAIL_FAILURE, NULL, "out of memory");
        else
            out->status = SBX_OK;
        return 1;
    }
    if (key_len > JAIL_MAX_KEY) {
        set_status(out, SBX_JAIL_FAILURE, NULL, "eval_key longer than %u bytes", JAIL_MAX_KEY);
        return 1;
    }

    double gate_ms = 0;
    /* the run keeps the gate it was admitted by (one cleared meanwhile
     * still lets it go) */
    pthread_mutex_lock(&pool->mu);
    r->gate = pool->gate;
    pthread_mutex_unlock(&pool->mu);
    if (r->gate.enter != NULL && ticket != NULL) {
        ticket->cls = gate_class(req);
        atomic_store(&ticket->stop, 0);
        int g = r->gate.enter(r->gate.ud, ticket, req->cancel);
        if (g == -3) {
            out->wait_ms = now_ms() - r->t0;
            set_status(out, SBX_CANCELLED, NULL, "cancelled while waiting for memory");
            return 1;
        }
        if (g != 0) {
            out->wait_ms = now_ms() - r->t0;
            set_status(out, SBX_TIMEOUT, "memory_budget",
                       "no room in the memory budget for another sandbox");
            return 1;
        }
        r->ticket = ticket;
        /* the deadline starts once the budget admits it (a run waiting for
         * memory is covered by its lease's heartbeats) */
        double t = now_ms();
        gate_ms = t - r->t0;
        r->t0 = t;
        r->deadline = t + r->budget_ms;
        r->wait_deadline = req->budget_s > 0 ? t + req->budget_s * 1e3 : r->deadline;
    }
    int rc = acquire_slot(pool, r->wait_deadline, req->cancel, r->playground);
    out->wait_ms = gate_ms + now_ms() - r->t0;
    if (rc != 0 && r->ticket != NULL) {
        r->gate.leave(r->gate.ud, r->ticket);
        r->ticket = NULL;
    }
    if (rc == -3) {
        set_status(out, SBX_CANCELLED, NULL, "cancelled while waiting for a sandbox slot");
        return 1;
    }
    if (rc == -2) {
        set_status(out, SBX_TIMEOUT, req->budget_s > 0 ? "slot" : "timeout",
                   "deadline passed while waiting for a sandbox slot");
        return 1;
    }
    atomic_fetch_add(&pool->active, 1);
    r->t_run = now_ms();
    if (req->budget_s > 0) { /* the run gets its own timeout, within the budget */
        r->deadline = r->t_run + r->budget_ms;
        if (r->wait_deadline < r->deadline) {
            r->deadline = r->wait_deadline;
            r->cut = "budget";
        }
    }
    if (r->t_run >= r->deadline) {
        /* Never start a child after its deadline. */
        set_status(out, SBX_TIMEOUT, req->budget_s > 0 ? "slot" : "timeout",
                   "deadline passed while waiting for a sandbox slot");
        sbx_run_end(pool, r, out);
        return 1;
    }

    jail_request *hdr = &r->hdr;
    hdr->magic = JAIL_REQ_MAGIC;
    hdr->kind = (uint32_t)req->kind;
    hdr->flags = check_only ? JAIL_REQ_CHECK : req->image ? JAIL_REQ_IMAGE : 0;
    hdr->key_len = (uint32_t)key_len;
    double left_s = (r->deadline - r->t_run) / 1e3;
    hdr->cpu_seconds = (uint32_t)ceil(left_s);
    if (hdr->cpu_seconds < 1) hdr->cpu_seconds = 1;
    if (hdr->cpu_seconds > 60) hdr->cpu_seconds = 60;
    hdr->source_len = src_len;
    hdr->image_len = (hdr->flags & JAIL_REQ_IMAGE) ? req->image->len : 0;
    /* The interpreter's live-heap budget: the address-space limit less the
     * mapped session image and a reserve for the child's code, stacks and
     * scratch buffers (the kernel's RLIMIT_AS stays the backstop). */
    size_t as_bytes = (size_t)pool->cfg.memory_mb << 20, reserve;
    if (r->ticket != NULL && r->gate.child_cap > 0 && r->gate.child_cap < as_bytes)
        as_bytes = (size_t)r->gate.child_cap;
    reserve = as_bytes / 16;
    if (reserve < ((size_t)24 << 20)) reserve = (size_t)24 << 20;
    hdr->max_alloc_bytes = as_bytes > hdr->image_len + 2 * reserve
                               ? as_bytes - (size_t)hdr->image_len - reserve
                               : as_bytes / 4;
    r->running = 1;
    return 0;
}

void sbx_run_end(sbx_pool *pool, sbx_run *r, sbx_outcome *out)
{
    if (r->handed && out->run_ms == 0) out->run_ms = now_ms() - r->t_run;
    atomic_fetch_sub(&pool->active, 1);
    release_slot(pool, r->playground);
    if (r->ticket != NULL) r->gate.leave(r->gate.ud, r->ticket);
    r->ticket = NULL;
}

int sbx_outcome_parse(sbx_outcome *out, const char *buf, size_t len)
{
    json_error_t jerr;
    if (out->json == NULL && len > 0) out->json = json_loadb(buf, len, 0, &jerr);
    if (out->json != NULL && json_is_object(out->json) &&
        json_is_boolean(json_object_get(out->json, "ok"))) {
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
            len--;
        out->line = strndup(buf, len);
        if (out->line == NULL) {
            json_decref(out->json);
            out->json = NULL;
            set_status(out, SBX_JAIL_FAILURE, NULL, "out of memory");
            return 1;
        }
        out->status = SBX_OK;
        return 1;
    }
    json_decref(out->json);
    out->json = NULL;
    return 0;
}

void sbx_outcome_from_read(sbx_outcome *out, read_end end, const sbx_run *r)
{
    switch (end) {
    case RD_DEADLINE:
        set_status(out, SBX_TIMEOUT, r->cut, "killed at the deadline (%.0f ms budget)",
                   r->deadline - r->t_run);
        break;
    case RD_CANCEL:
        set_status(out, SBX_CANCELLED, NULL, "cancelled while running");
        break;
    case RD_OVERFLOW:
        set_status(out, SBX_OUTPUT, "output", "the outcome exceeded %u bytes", JAIL_MAX_OUTCOME);
        break;
    default:
        set_status(out, SBX_JAIL_FAILURE, NULL, "reading the outcome failed");
        break;
    }
}

void sbx_outcome_from_exit(sbx_outcome *out, int st, char *buf, size_t len)
{
    if (st == -1) {
        set_status(out, SBX_JAIL_FAILURE, NULL,
                   "the sandbox child wrote no usable outcome and did not exit");
        return;
    }
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        if (sig == SIGXCPU || sig == SIGKILL)
            set_status(out, SBX_TIMEOUT, "timeout", "killed by the CPU limit (signal %d)", sig);
        else if (sig == SIGSYS)
            set_status(out, SBX_JAIL_FAILURE, NULL, "killed by seccomp: blocked system call");
        else
            set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox child died (signal %d)", sig);
        return;
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (code == JAIL_EXIT_SIGSYS) {
        set_status(out, SBX_JAIL_FAILURE, NULL, "killed by seccomp: blocked system call");
    } else if (code != 0) {
        buf[len < 160 ? len : 160] = '\0';
        for (char *p = buf; *p; p++)
            if ((unsigned char)*p < 0x20) *p = ' ';
        set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox child failed (exit %d)%s%s", code,
                   len ? ": " : "", len ? buf : "");
    } else {
        set_status(out, SBX_JAIL_FAILURE, NULL,
                   len ? "the sandbox child wrote a malformed outcome"
                       : "the sandbox child ended without an outcome");
    }
}

/* One run; *stopped = 1 when the gate stopped it (out is then to be
 * discarded and the evaluation run again). */
static void eval_once(sbx_pool *pool, const sbx_request *req, int check_only, sbx_outcome *out,
                      sbx_ticket *ticket, int *stopped)
{
    sbx_run run;
    *stopped = 0;
    if (sbx_run_begin(pool, req, check_only, &run, out, ticket) != 0) return;
    char *buf = NULL;
    child_t c = {-1, -1, -1};
    int have_child = 0;
    fps_err err;
    const jail_request *hdr = &run.hdr;
    double deadline = run.deadline;

    /* A pre-started child may have died while idle (killed from outside):
     * then try once more with a fresh one. */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (sbx_take_child(pool, &c, &err) != 0) {
            set_status(out, SBX_JAIL_FAILURE, NULL, "%s", err.msg);
            goto done;
        }
        have_child = 1;
        run.handed = 1;
        run.watch_pid = c.pid;
        sbx_track_running(pool, c.pid, 1);
        atomic_fetch_add(&pool->started, 1);
        int img_fd = (hdr->flags & JAIL_REQ_IMAGE) && req->image != NULL ? req->image->fd : -1;
        int s = sbx_send_request(&c, hdr, img_fd, run.src, run.key, deadline, req->cancel);
        if (s == 0) break;
        sbx_track_running(pool, c.pid, 0);
        sbx_reap_later(pool, &c, 1);
        have_child = 0;
        if (s == -2) {
            set_status(out, SBX_TIMEOUT, "timeout", "deadline passed while sending the request");
            goto done;
        }
        if (s == -3) {
            set_status(out, SBX_CANCELLED, NULL, "cancelled");
            goto done;
        }
        if (attempt == 1) {
            set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox child died before its request");
            goto done;
        }
    }

    size_t cap = OUTCOME_BUF_MIN, len = 0;
    buf = malloc(cap);
    if (buf == NULL) {
        set_status(out, SBX_JAIL_FAILURE, NULL, "out of memory");
        goto done;
    }
    read_end end = sbx_read_outcome(c.out, &buf, &cap, &len, deadline, req->cancel, 1, &run);
    if (end == RD_LINE) {
        /* A complete line: done if it is a well-formed outcome (the child
         * is exiting; it is killed and reaped in the background). If not,
         * read on to EOF so its exit status can say what went wrong. */
        json_error_t jerr;
        out->json = json_loadb(buf, len, 0, &jerr);
        if (out->json != NULL && json_is_object(out->json) &&
            json_is_boolean(json_object_get(out->json, "ok"))) {
            end = RD_EOF;
        } else {
            json_decref(out->json);
            out->json = NULL;
            end = sbx_read_outcome(c.out, &buf, &cap, &len, deadline, req->cancel, 0, &run);
        }
    }
    sbx_track_running(pool, c.pid, 0);
    out->run_ms = now_ms() - run.t_run;
    if (end != RD_EOF) {
        /* Killed: its exit status adds nothing; reap in the background. */
        sbx_reap_later(pool, &c, 1);
        have_child = 0;
        if (end == RD_STOP)
            *stopped = 1;
        else
            sbx_outcome_from_read(out, end, &run);
        goto done;
    }
    /* EOF with a well-formed outcome: the evaluation is complete (the child
     * closes its end before exiting), so it is reaped in the background. */
    if (sbx_outcome_parse(out, buf, len)) {
        sbx_reap_later(pool, &c, 1);
        have_child = 0;
        goto done;
    }
    /* No usable outcome: the exit status says why. */
    int st = sbx_reap_child(pool, &c, 0, 2000);
    have_child = 0;
    sbx_outcome_from_exit(out, st, buf, len);
done:
    if (have_child) {
        sbx_track_running(pool, c.pid, 0);
        sbx_reap_later(pool, &c, 1);
    }
    free(buf);
    sbx_run_end(pool, &run, out);
}

static void eval_impl(sbx_pool *pool, const sbx_request *req, int check_only, sbx_outcome *out)
{
    sbx_ticket t;
    memset(&t, 0, sizeof t);
    int stopped, reruns = 0;
    for (;;) {
        eval_once(pool, req, check_only, out, &t, &stopped);
        if (!stopped) break;
        sbx_outcome_free(out);
        t.reruns = ++reruns;
    }
    out->reruns = reruns;
}

void sbx_eval(sbx_pool *pool, const sbx_request *req, sbx_outcome *out)
{
    eval_impl(pool, req, 0, out);
}

void sbx_check(sbx_pool *pool, const sbx_request *req, sbx_outcome *out)
{
    eval_impl(pool, req, 1, out);
}

void sbx_outcome_free(sbx_outcome *out)
{
    if (out == NULL) return;
    json_decref(out->json);
    out->json = NULL;
    free(out->line);
    out->line = NULL;
}
