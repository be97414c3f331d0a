/* sandbox/jail/jail_holder: a session's holder (see jail.h). A child whose
 * first request is JAIL_REQ_SESSION takes the session's image once: it maps
 * the memfd read-only (the page cache the parent wrote, shared), validates
 * the image once for the whole session and closes the memfd; each
 * grandchild inherits the mapping. fork copies no page tables of a file
 * mapping, so a grandchild faults in only the pages its evaluation reads,
 * as a single-use child does (a read fault maps the pages around it too),
 * but skips the validation, the mapping and the child's own set-up. Copying
 * the image into the holder's anonymous memory (huge pages), whose page
 * tables fork does copy, cost more per session than it saved (the 12 MiB
 * copy of the 7.4 MB transcript's image, with its huge-page zeroing, was
 * paid per session, where a cheap evaluation reads a few hundred KiB of
 * event records). bench_jail, CPU per evaluation of sessions of 6 / 3
 * against a child each, same minutes: contract sample 0.97x / 1.18x
 * copied, 0.80x / 0.95x mapped; 7.4 MB 2.05x / 2.96x copied, 0.81x / 0.90x
 * mapped. Nor did keeping the pages the validation read mapped in the
 * holder, the mapping given an anonymous page first (one page written) so
 * that fork copies its page tables: every fork then copies and every exit
 * drops them, whatever the evaluation reads (eval --batch on the 7 MB
 * transcript, 90 evaluations in sessions of 6, CPU ms best of 4, mapped
 * against inherited: the trivial 1 52.0 / 57.4, session.count 77.6 / 75.5,
 * filter_errors 305.0 / 307.8, sum_latency 243.5 / 254.8).
 *
 * Then the session's evaluator (jail_evaluator.c): one child (a plain fork:
 * SIGCHLD only), forked at the session's first request, that takes its end of a
 * socket pair as fds 0 and 2 (so the session's channel is the holder's
 * alone), dies with the holder (PR_SET_PDEATHSIG), locks itself down
 * (jail_lock_down: RLIMIT_NPROC 0, a fresh string-hash key, the inner
 * filter) and serves request after request. For each request on fd 0 the
 * holder forwards it on fd 3, waits for the evaluator's jail_done and
 * answers with one jail_report on fd 0. An evaluator that retires, or ends
 * any other way (a limit, a crash: its wait status is the report), is
 * waited for, and the next request gets a fresh one. Even a single-use
 * evaluator forked from the holder skips the mapping, the validation and a
 * child's set-up; one that serves several evaluations also keeps the pages
 * they fault in (see jail_evaluator.c). The holder itself never evaluates:
 * each evaluator starts from the holder's state, which no evaluation has
 * touched. Ends when the parent closes fd 0 (or kills the process group). */
#include "sandbox/jail/jail.h"
#include "sandbox/lang/lang.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The holder's end of its evaluator's socket pair; the evaluator's own end
 * is EVAL_END until it is forked. */
#define HOLDER_END 3
#define EVAL_END 4

/* Forks the session's evaluator: its pid, or -1 (no socket pair, no fork). */
static long evaluator_start(const jail_opts *o, const jail_prepared *p, const unsigned char *img,
                            uint64_t img_len, unsigned lang_flags)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
    if (sv[0] != HOLDER_END || sv[1] != EVAL_END) _exit(JAIL_EXIT_SETUP); /* fds 0..2 only */
    pid_t holder = getpid();
    /* A raw clone, as the zygote's: fork's flags, and nothing of glibc's
     * fork handlers to run in a single-threaded process. */
    long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
    if (pid == 0) {
        /* The session's channel (fd 0) and /dev/null (fd 2) give way to
         * the evaluator's end of the pair. */
        if (syscall(SYS_dup3, EVAL_END, 0, 0) != 0 || syscall(SYS_dup3, EVAL_END, 2, 0) != 2)
            jail_die_setup("dup3");
        close(EVAL_END);
        close(HOLDER_END);
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) jail_die_setup("PR_SET_PDEATHSIG");
        if (getppid() != holder) _exit(JAIL_EXIT_SETUP); /* the holder is gone already */
        jail_evaluator_main(o, p, img, img_len, lang_flags);
    }
    close(EVAL_END);
    if (pid < 0) close(HOLDER_END);
    return pid;
}

/* Waits for the evaluator, which has ended or is ending, into *rep's
 * status and (unless `keep`: the evaluator's own figures are in) its
 * figures. */
static void evaluator_reap(long pid, jail_report *rep, int keep)
{
    int st = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof ru);
    close(HOLDER_END);
    while (wait4((pid_t)pid, &st, 0, &ru) < 0 && errno == EINTR) {
    }
    rep->status = st;
    if (keep) return;
    rep->has_stats = 0;
    rep->maxrss_kb = ru.ru_maxrss;
    rep->minflt = ru.ru_minflt;
    rep->cpu_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
                  (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
}

void jail_hold(const jail_opts *o, const jail_prepared *p, const jail_request *first, int img_fd)
{
    const unsigned char *img = NULL;
    uint64_t img_len = 0;
    unsigned lang_flags = 0;
    if (first->source_len != 0 || first->key_len != 0) _exit(JAIL_EXIT_PROTO);
    if (first->flags & JAIL_REQ_IMAGE) {
        img_len = first->image_len;
        void *m = mmap(NULL, (size_t)img_len, PROT_READ, MAP_PRIVATE, img_fd, 0);
        if (m == MAP_FAILED) jail_die_setup("mapping the session image");
        close(img_fd);
        jail_check_image(m, (size_t)img_len);
        /* The validation read every event record: the holder keeps none of
         * it resident (the evaluator faults in what it reads). */
        (void)madvise(m, (size_t)img_len, MADV_DONTNEED);
        img = m;
        /* A walk may drop the pages behind it (see JAIL_DROP_MIN_IMAGE). */
        if (img_len >= JAIL_DROP_MIN_IMAGE) lang_flags = LANG_IMAGE_MAPPED;
    } else if (img_fd >= 0) {
        close(img_fd);
    }
    /* Forked at the first request, which comes after the parent has pinned
     * this holder to its CPU (sbx_session_set_cpu), so that it inherits the
     * mask. */
    long ev = -1;
    for (;;) {
        jail_request req;
        int fd;
        int rc = jail_recv_request(&req, &fd);
        if (rc == 1) {
            /* The session is over: the evaluator ends on the EOF of its
             * socket, and is waited for (its figures go to the holder's). */
            if (ev > 0) {
                jail_report unused;
                evaluator_reap(ev, &unused, 1);
            }
            _exit(0);
        }
        if (rc != 0 || fd >= 0 || (req.flags & (JAIL_REQ_SESSION | JAIL_REQ_IMAGE)))
            _exit(JAIL_EXIT_PROTO);
        char *src, *key;
        jail_recv_body(&req, &src, &key);
        if (ev < 0) ev = evaluator_start(o, p, img, img_len, lang_flags);
        jail_report rep;
        memset(&rep, 0, sizeof rep);
        rep.magic = JAIL_REP_MAGIC;
        if (ev < 0) {
            /* No evaluator: reported as one that failed its set-up. */
            rep.status = JAIL_EXIT_SETUP << 8;
        } else {
            rep.pid = (int32_t)ev;
            /* An evaluator that died since its last request ends the
             * write with EPIPE or SIGPIPE, which ends the holder: the
             * parent then gives the request a fresh one. */
            int sent = jail_write_all(HOLDER_END, &req, sizeof req) == 0 &&
                       jail_write_all(HOLDER_END, src, req.source_len) == 0 &&
                       jail_write_all(HOLDER_END, key, req.key_len) == 0;
            jail_done d;
            memset(&d, 0, sizeof d);
            if (sent && jail_read_all(HOLDER_END, &d, sizeof d) == 0) {
                if (d.magic != JAIL_DONE_MAGIC) _exit(JAIL_EXIT_PROTO);
                rep.has_stats = d.has_stats != 0;
                rep.steps = d.steps;
                rep.alloc_bytes = d.alloc_bytes;
                rep.maxrss_kb = d.maxrss_kb;
                rep.cpu_us = d.cpu_us;
                rep.minflt = d.minflt;
                if (d.flags & JAIL_DONE_RETIRE) {
                    evaluator_reap(ev, &rep, 1);
                    ev = -1;
                }
            } else {
                /* It ended (a limit, a crash, a test mode's exit): its
                 * wait status says how. */
                evaluator_reap(ev, &rep, 0);
                ev = -1;
            }
        }
        /* Nothing of this request stays in the holder's memory, which the
         * next evaluator inherits. */
        memset(src, 0, req.source_len);
        memset(key, 0, req.key_len);
        free(src);
        free(key);
        if (jail_write_all(0, &rep, sizeof rep) != 0) _exit(0);
    }
}
