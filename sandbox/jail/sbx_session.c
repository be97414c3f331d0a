/* sandbox/jail/sbx_session: sessions and batches (sbx.h): the evaluations of
 * one transcript, in order, on one image, in one evaluator (jail.h,
 * jail_evaluator.c): a jailed child that takes the image once and evaluates
 * the session's requests one after another. The parent side here hands it
 * each request, enforces the evaluation's wall clock (waiting for a slot,
 * the deadline, cancellation and the output bound are sbx_eval's:
 * sbx_run_begin and the outcome mapping of sbx_eval.c), and reads back its
 * outcome (fd 1) and its report (fd 0). An evaluator that retires is let go;
 * anything but a clean end (a well-formed outcome, reported) kills it. Either
 * way the session's next evaluation gets a fresh child, to which the image is
 * handed again. Shared structures: sbx_int.h. */
#include "sandbox/jail/sbx_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long the evaluator's report may take once the outcome line is in (a
 * single-use child's grace, sbx_eval.c), whatever the deadline: past it the
 * evaluator is killed and the line, if well-formed, is the outcome. */
#define REPORT_GRACE_MS 2000

struct sbx_session {
    sbx_pool *pool;   /* borrowed */
    sbx_image *image; /* borrowed; may be NULL */
    child_t h;        /* the evaluator, when `have` */
    int have;
    int served; /* evaluations the evaluator has reported */
    int cpu;    /* >= 0: the CPU its evaluators are kept on (sbx_session_set_cpu) */
    char *buf;  /* owned: the outcome buffer, kept across evaluations */
    size_t cap;
};

/* Lets the evaluator go, reaped in the background: `kill_it` kills it;
 * else it ends on its own (retired, or on the EOF of its socket). */
static void evaluator_drop(sbx_session *s, int kill_it)
{
    if (!s->have) return;
    sbx_reap_later(s->pool, &s->h, kill_it);
    s->have = 0;
}

/* Keeps the evaluator on s->cpu. Set from here, the parent: the child's
 * filter stays without sched_setaffinity. Best effort: an evaluator left
 * where it was still serves. */
static void evaluator_pin(sbx_session *s)
{
    if (!s->have || s->cpu < 0 || s->cpu >= CPU_SETSIZE) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    (void)sched_setaffinity(s->h.pid, sizeof set, &set);
}

/* Makes a child the session's evaluator: hands it the session (its image
 * fd attached). `spawn` 0: only a pre-started child, none is no error but -1.
 * 0, or -1 with err filled. */
static int evaluator_start(sbx_session *s, int spawn, fps_err *err)
{
    child_t c;
    if (spawn) {
        if (sbx_take_child(s->pool, &c, err) != 0) return -1;
    } else if (sbx_take_idle(s->pool, &c) != 0) {
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_error", "no idle sandbox child");
        return -1;
    }
    jail_request hdr;
    memset(&hdr, 0, sizeof hdr);
    hdr.magic = JAIL_REQ_MAGIC;
    hdr.flags = JAIL_REQ_SESSION | (s->image != NULL ? JAIL_REQ_IMAGE : 0);
    hdr.image_len = s->image != NULL ? s->image->len : 0;
    /* The header alone: an empty socket buffer takes it at once. */
    if (sbx_send_request(&c, &hdr, s->image != NULL ? s->image->fd : -1, "", "", now_ms() + 5000,
                         NULL) != 0) {
        sbx_reap_later(s->pool, &c, 1);
        fps_err_set(err, SBX_JAIL_FAILURE, 0, "sandbox_error",
                    "the sandbox child died before its session");
        return -1;
    }
    s->h = c;
    s->have = 1;
    s->served = 0;
    evaluator_pin(s);
    atomic_fetch_add(&s->pool->holders, 1);
    return 0;
}

/* Starts the evaluator's next peak resident set from what it holds now
 * (clear_refs 5: the kernel's high-water mark, which its getrusage reports,
 * goes back to its current RSS), so that each report gives the peak of its
 * own evaluation, not of the evaluator's life. Written from here: the child
 * opens no file. Best effort: where /proc refuses, reports keep the
 * lifetime peak, an overestimate. */
static void reset_peak(pid_t pid)
{
    char path[48];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", (int)pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)!write(fd, "5", 1);
    close(fd);
}

/* One read of the outcome pipe into s->buf at *len: 1 read (or nothing to
 * read now), 0 EOF, -1 error, -2 more than JAIL_MAX_OUTCOME in all. */
static int read_pipe(sbx_session *s, size_t *len)
{
    if (*len == s->cap) {
        size_t want = s->cap ? s->cap * 2 : OUTCOME_BUF_MIN; /* cap is never 0 */
        size_t ncap = want < JAIL_MAX_OUTCOME + 1 ? want : JAIL_MAX_OUTCOME + 1;
        char *nb = realloc(s->buf, ncap);
        if (nb == NULL) return -1;
        s->buf = nb;
        s->cap = ncap;
    }
    ssize_t n = read(s->h.out, s->buf + *len, s->cap - *len);
    if (n < 0) return errno == EINTR || errno == EAGAIN ? 1 : -1;
    if (n == 0) return 0;
    *len += (size_t)n;
    return *len > JAIL_MAX_OUTCOME ? -2 : 1;
}

/* Reads the evaluation's outcome (s->buf, *len) and the evaluator's report
 * (*rep) until both are in, the deadline, cancellation or the output bound.
 * RD_EOF: done, with *reported 1 (the report is in and the pipe drained:
 * the evaluator wrote its outcome before its report, so everything it wrote
 * is there) or 0 (it closed its socket: it has ended). RD_LINE: an outcome
 * line came but no report within REPORT_GRACE_MS of it (it lingers). */
static read_end read_session(sbx_session *s, double deadline, atomic_int *cancel, size_t *len,
                             jail_report *rep, int *reported, sbx_run *watch)
{
    size_t got = 0;
    int pipe_open = 1, lined = 0;
    int tick = cancel != NULL || sbx_watched(watch);
    *reported = 0;
    for (;;) {
        if (cancel != NULL && atomic_load(cancel)) return RD_CANCEL;
        if (!lined && sbx_watch_stop(watch)) return RD_STOP;
        if (!lined && *len > 0 && s->buf[*len - 1] == '\n') {
            /* The outcome is in; the report follows. */
            deadline = now_ms() + REPORT_GRACE_MS;
            lined = 1;
        }
        double left = deadline - now_ms();
        if (left <= 0) return lined ? RD_LINE : RD_DEADLINE;
        int wait = left > CANCEL_TICK_MS && tick ? CANCEL_TICK_MS : (int)ceil(left);
        struct pollfd p[2] = {{pipe_open ? s->h.out : -1, POLLIN, 0}, {s->h.sock, POLLIN, 0}};
        int r = poll(p, 2, wait);
        if (r < 0 && errno != EINTR) return RD_ERROR;
        if (r <= 0) continue;
        if (p[0].revents != 0) {
            int rc = read_pipe(s, len);
            if (rc == -2) return RD_OVERFLOW;
            if (rc == -1) return RD_ERROR;
            if (rc == 0) pipe_open = 0;
        }
        if (p[1].revents == 0) continue;
        ssize_t n = read(s->h.sock, (char *)rep + got, sizeof *rep - got);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0 && errno != ECONNRESET) return RD_ERROR;
        if (n > 0) got += (size_t)n;
        if (n > 0 && got < sizeof *rep) continue;
        /* The report is in, or the evaluator is gone: take what the pipe has. */
        for (;;) {
            struct pollfd q = {s->h.out, POLLIN, 0};
            if (!pipe_open || poll(&q, 1, 0) <= 0) break;
            int rc = read_pipe(s, len);
            if (rc == -2) return RD_OVERFLOW;
            if (rc <= 0) break;
        }
        *reported = got == sizeof *rep;
        return RD_EOF;
    }
}

sbx_session *sbx_session_open(sbx_pool *pool, sbx_image *image)
{
    sbx_session *s = calloc(1, sizeof *s);
    if (s == NULL) return NULL;
    s->pool = pool;
    s->image = image;
    s->cpu = -1;
    s->cap = OUTCOME_BUF_MIN;
    s->buf = malloc(s->cap);
    if (s->buf == NULL) {
        free(s);
        return NULL;
    }
    /* A pre-started child, if one is idle, takes the image now, while the
     * caller prepares its first request. */
    fps_err err;
    (void)evaluator_start(s, 0, &err);
    return s;
}

/* One run of a session's evaluation; *stopped = 1 when the gate stopped it
 * (out is then to be discarded and the evaluation run again). */
static void session_eval_once(sbx_session *s, const sbx_request *req, sbx_outcome *out,
                              sbx_ticket *ticket, int *stopped)
{
    sbx_pool *pool = s->pool;
    sbx_request r = *req;
    r.image = s->image;
    sbx_run run;
    *stopped = 0;
    if (sbx_run_begin(pool, &r, 0, &run, out, ticket) != 0) return;
    /* The evaluator has the image: the request carries none. */
    run.hdr.flags &= ~JAIL_REQ_IMAGE;
    fps_err err;
    /* An evaluator may have died while it waited (killed from outside): then
     * try once more with a fresh one. */
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!s->have && evaluator_start(s, 1, &err) != 0) {
            sbx_set_status(out, SBX_JAIL_FAILURE, NULL, "%s", err.msg);
            goto done;
        }
        if (s->served > 0) reset_peak(s->h.pid);
        run.handed = 1;
        run.watch_pid = s->h.pid;
        sbx_track_running(pool, s->h.pid, 1);
        atomic_fetch_add(&pool->started, 1);
        int rc = sbx_send_request(&s->h, &run.hdr, -1, run.src, run.key, run.deadline, r.cancel);
        if (rc == 0) break;
        sbx_track_running(pool, s->h.pid, 0);
        evaluator_drop(s, 1);
        if (rc == -2) {
            sbx_set_status(out, SBX_TIMEOUT, "timeout",
                           "deadline passed while sending the request");
            goto done;
        }
        if (rc == -3) {
            sbx_set_status(out, SBX_CANCELLED, NULL, "cancelled");
            goto done;
        }
        if (attempt == 1) {
            sbx_set_status(out, SBX_JAIL_FAILURE, NULL,
                           "the sandbox child died before its request");
            goto done;
        }
    }

    size_t len = 0;
    jail_report rep;
    int reported = 0;
    read_end end = read_session(s, run.deadline, r.cancel, &len, &rep, &reported, &run);
    sbx_track_running(pool, s->h.pid, 0);
    out->run_ms = now_ms() - run.t_run;
    out->pid = s->h.pid;
    if (end == RD_STOP) {
        evaluator_drop(s, 1);
        *stopped = 1;
        goto done;
    }
    if (end == RD_LINE) {
        /* A line, and then the evaluator neither exited nor reported: the
         * line is the outcome if well-formed (as sbx_eval takes it without
         * waiting for the exit); the evaluator goes. */
        evaluator_drop(s, 1);
        if (!sbx_outcome_parse(out, s->buf, len)) sbx_outcome_from_exit(out, -1, s->buf, len);
        goto done;
    }
    if (end != RD_EOF) {
        evaluator_drop(s, 1);
        sbx_outcome_from_read(out, end, &run);
        goto done;
    }
    if (!reported) {
        /* The evaluator ended (a limit, a crash, its set-up failed, a test
         * mode, a compile check): its exit status says why. */
        sbx_kill_child(s->h.pid);
        int st = sbx_reap_child(pool, &s->h, 0, 2000);
        s->have = 0;
        if (!sbx_outcome_parse(out, s->buf, len)) sbx_outcome_from_exit(out, st, s->buf, len);
        goto done;
    }
    if (rep.magic != JAIL_REP_MAGIC) {
        evaluator_drop(s, 1);
        sbx_set_status(out, SBX_JAIL_FAILURE, NULL, "the sandbox evaluator answered garbage");
        goto done;
    }
    s->served++;
    out->has_stats = rep.has_stats != 0;
    out->steps = rep.steps;
    out->alloc_bytes = rep.alloc_bytes;
    out->peak_rss_kb = (long)rep.maxrss_kb;
    out->cpu_us = (long)rep.cpu_us;
    out->minflt = (long)rep.minflt;
    if (sbx_outcome_parse(out, s->buf, len)) {
        /* A retired evaluator exits now; the next request gets a fresh one. */
        if (rep.flags & JAIL_REP_RETIRE) evaluator_drop(s, 0);
        goto done;
    }
    /* Reported, yet no usable outcome: a broken evaluator. */
    sbx_outcome_from_exit(out, 0, s->buf, len);
    evaluator_drop(s, 1);
done:
    sbx_run_end(pool, &run, out);
}

void sbx_session_eval(sbx_session *s, const sbx_request *req, sbx_outcome *out)
{
    sbx_ticket t;
    memset(&t, 0, sizeof t);
    int stopped, reruns = 0;
    for (;;) {
        session_eval_once(s, req, out, &t, &stopped);
        if (!stopped) break;
        sbx_outcome_free(out);
        t.reruns = ++reruns;
    }
    out->reruns = reruns;
}

void sbx_session_close(sbx_session *s)
{
    if (s == NULL) return;
    evaluator_drop(s, 0);
    free(s->buf);
    free(s);
}

void sbx_session_set_cpu(sbx_session *s, int cpu)
{
    s->cpu = cpu;
    evaluator_pin(s);
}

int sbx_session_pid(const sbx_session *s)
{
    return s->have ? (int)s->h.pid : -1;
}

void sbx_eval_batch(sbx_pool *pool, sbx_image *image, const sbx_request *reqs, size_t n,
                    sbx_outcome *outs)
{
    sbx_session *s = sbx_session_open(pool, image);
    for (size_t i = 0; i < n; i++) {
        if (s != NULL) {
            sbx_session_eval(s, &reqs[i], &outs[i]);
        } else {
            /* Out of memory for the session: one child each, as alone. */
            sbx_request r = reqs[i];
            r.image = image;
            sbx_eval(pool, &r, &outs[i]);
        }
    }
    sbx_session_close(s);
}
