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
 * Then, for each request on fd 0: one grandchild (a plain fork: SIGCHLD
 * only) that closes fd 0, dies with the holder (PR_SET_PDEATHSIG), locks
 * itself down (jail_lock_down: RLIMIT_NPROC 0, its own RLIMIT_CPU, a fresh
 * string-hash key, the inner filter) and evaluates exactly as a single-use
 * child, its outcome on fd 1; the holder waits for it and answers with one
 * jail_report on fd 0. The holder itself never evaluates: every
 * grandchild starts from the holder's state, which no evaluation has
 * touched, so nothing of one evaluation is visible to the next. Ends when
 * the parent closes fd 0 (or kills the process group). */
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* In the grandchild: never returns. */
__attribute__((noreturn)) static void grandchild(const jail_opts *o, const jail_prepared *p,
                                                 pid_t holder, jail_request *req, const char *src,
                                                 const char *key, const unsigned char *img,
                                                 unsigned lang_flags, lang_stats *sh)
{
    /* The session's channel is the holder's alone. */
    close(0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) jail_die_setup("PR_SET_PDEATHSIG");
    if (getppid() != holder) _exit(JAIL_EXIT_SETUP); /* the holder is gone already */
    jail_lock_down(p, req->cpu_seconds);
    jail_evaluate(o, req, src, key, img, lang_flags, sh);
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
         * it resident (a grandchild faults in what it reads). */
        (void)madvise(m, (size_t)img_len, MADV_DONTNEED);
        img = m;
        /* A walk may drop the pages behind it (see JAIL_DROP_MIN_IMAGE). */
        if (img_len >= JAIL_DROP_MIN_IMAGE) lang_flags = LANG_IMAGE_MAPPED;
    } else if (img_fd >= 0) {
        close(img_fd);
    }
    /* What lang_eval counts in a grandchild (lang_limits.stats), left in one
     * shared page that is cleared before each fork. */
    lang_stats *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) jail_die_setup("mapping the statistics page");
    pid_t self = getpid();
    for (;;) {
        jail_request req;
        int fd;
        int rc = jail_recv_request(&req, &fd);
        if (rc == 1) _exit(0);
        if (rc != 0 || fd >= 0 || (req.flags & (JAIL_REQ_SESSION | JAIL_REQ_IMAGE)))
            _exit(JAIL_EXIT_PROTO);
        char *src, *key;
        jail_recv_body(&req, &src, &key);
        if (img != NULL) {
            req.flags |= JAIL_REQ_IMAGE;
            req.image_len = img_len;
        }
        memset(sh, 0, sizeof *sh);
        /* A raw clone, as the zygote's: fork's flags, and nothing of glibc's
         * fork handlers to run in a single-threaded process. */
        long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
        if (pid == 0) grandchild(o, p, self, &req, src, key, img, lang_flags, sh);
        /* The next grandchild inherits this memory: nothing of this request
         * stays in it. */
        memset(src, 0, req.source_len);
        memset(key, 0, req.key_len);
        free(src);
        free(key);
        jail_report rep;
        memset(&rep, 0, sizeof rep);
        rep.magic = JAIL_REP_MAGIC;
        if (pid < 0) {
            /* No grandchild: reported as one that failed its set-up. */
            rep.status = JAIL_EXIT_SETUP << 8;
        } else {
            int st = 0;
            struct rusage ru;
            memset(&ru, 0, sizeof ru);
            while (wait4((pid_t)pid, &st, 0, &ru) < 0 && errno == EINTR) {
            }
            rep.pid = (int32_t)pid;
            rep.status = st;
            rep.maxrss_kb = ru.ru_maxrss;
            rep.minflt = ru.ru_minflt;
            rep.cpu_us = (int64_t)ru.ru_utime.tv_sec * 1000000 + ru.ru_utime.tv_usec +
                         (int64_t)ru.ru_stime.tv_sec * 1000000 + ru.ru_stime.tv_usec;
            /* zero when lang_eval did not run (a compile error, a test mode) */
            rep.has_stats = sh->steps != 0 || sh->alloc_bytes != 0;
            rep.steps = sh->steps;
            rep.alloc_bytes = sh->alloc_bytes;
        }
        if (jail_write_all(0, &rep, sizeof rep) != 0) _exit(0);
    }
}
