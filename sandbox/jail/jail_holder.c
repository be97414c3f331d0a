/* sandbox/jail/jail_holder: a session's holder (see jail.h). A child whose
 * first request is JAIL_REQ_SESSION takes the session's image once: a small
 * one (below JAIL_DROP_MIN_IMAGE) is copied from its memfd into anonymous
 * memory (transparent huge pages where the kernel gives them) and the memfd
 * is closed, because fork copies the page tables of anonymous memory but
 * not those of a file mapping, whose pages every grandchild would fault in
 * again; a bigger one stays in its memfd, which each grandchild maps as a
 * single-use child does. The image is validated once, here.
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

#define HUGE_PAGE ((size_t)2 << 20)

/* Copies the image into read-only anonymous memory, 2 MiB aligned so that
 * it can sit in huge pages. NULL on failure. */
static unsigned char *copy_image(int fd, size_t len)
{
    size_t span = (len + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    size_t map_len = span + HUGE_PAGE;
    unsigned char *m =
        mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    unsigned char *img =
        (unsigned char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    if (img > m) munmap(m, (size_t)(img - m));
    size_t tail = (size_t)((m + map_len) - (img + span));
    if (tail > 0) munmap(img + span, tail);
    (void)madvise(img, span, MADV_HUGEPAGE);
    for (size_t off = 0; off < len;) {
        ssize_t n = pread(fd, img + off, len - off, (off_t)off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return NULL;
        off += (size_t)n;
    }
    if (mprotect(img, span, PROT_READ) != 0) return NULL;
    return img;
}

/* In the grandchild: never returns. */
__attribute__((noreturn)) static void grandchild(const jail_opts *o, const jail_prepared *p,
                                                 pid_t holder, jail_request *req, const char *src,
                                                 const char *key, const unsigned char *img,
                                                 int img_fd, lang_stats *sh)
{
    /* The session's channel is the holder's alone. */
    close(0);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) jail_die_setup("PR_SET_PDEATHSIG");
    if (getppid() != holder) _exit(JAIL_EXIT_SETUP); /* the holder is gone already */
    unsigned flags = 0;
    if (img_fd >= 0) {
        void *m = mmap(NULL, req->image_len, PROT_READ, MAP_PRIVATE, img_fd, 0);
        if (m == MAP_FAILED) jail_die_setup("mapping the session image");
        close(img_fd);
        img = m;
        flags = LANG_IMAGE_MAPPED;
    }
    jail_lock_down(p, req->cpu_seconds);
    jail_evaluate(o, req, src, key, img, flags, sh);
}

void jail_hold(const jail_opts *o, const jail_prepared *p, const jail_request *first, int img_fd)
{
    const unsigned char *img = NULL;
    uint64_t img_len = 0;
    if (first->source_len != 0 || first->key_len != 0) _exit(JAIL_EXIT_PROTO);
    if (first->flags & JAIL_REQ_IMAGE) {
        img_len = first->image_len;
        if (img_len < JAIL_DROP_MIN_IMAGE) {
            img = copy_image(img_fd, (size_t)img_len);
            if (img == NULL) jail_die_setup("copying the session image");
            close(img_fd);
            img_fd = -1;
            jail_check_image(img, (size_t)img_len);
        } else {
            void *m = mmap(NULL, (size_t)img_len, PROT_READ, MAP_PRIVATE, img_fd, 0);
            if (m == MAP_FAILED) jail_die_setup("mapping the session image");
            jail_check_image(m, (size_t)img_len);
            munmap(m, (size_t)img_len);
        }
    } else if (img_fd >= 0) {
        close(img_fd);
        img_fd = -1;
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
        if (img != NULL || img_fd >= 0) {
            req.flags |= JAIL_REQ_IMAGE;
            req.image_len = img_len;
        }
        memset(sh, 0, sizeof *sh);
        /* A raw clone, as the zygote's: fork's flags, and nothing of glibc's
         * fork handlers to run in a single-threaded process. */
        long pid = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
        if (pid == 0) grandchild(o, p, self, &req, src, key, img, img_fd, sh);
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
