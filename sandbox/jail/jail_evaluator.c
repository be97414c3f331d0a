/* sandbox/jail/jail_evaluator: a session's evaluator (see jail.h), the one
 * process that evaluates a session's requests, one after another. A child
 * whose first request is JAIL_REQ_SESSION becomes it: it maps the session
 * image's memfd read-only (the page cache the parent wrote, shared),
 * validates it once for the whole session, closes the memfd, locks itself
 * down exactly as a single-use child does (jail_lock_down: its CPU limit,
 * the inner filter) and then serves each request on fd 0: its outcome on
 * fd 1, then one jail_report on fd 0.
 *
 * It keeps what a fresh process would have to fault in again for every
 * evaluation: the pages of the session image it has read (the validation's
 * among them) and the collector's heap, mapped and populated. On this
 * machine kind a fresh page costs 7 to 13 us and a copy-on-write fault in a
 * forked child more, so a child per evaluation paid more for its memory
 * than a walk over 20,000 events costs to evaluate; and an evaluator forked
 * per session by a holder that kept the image paid a second process per
 * session (bench_jail, sessions of 3, same minutes: 217 sessions/s with a
 * holder and its evaluator, against 491 single-use children/s).
 *
 * Nothing of one evaluation is visible to the next: lang_recycle collects
 * every value of the one before and forgets every cache (docs/LANGUAGE.md:
 * each evaluation starts from a fresh interpreter), and each evaluation
 * hashes strings under a key of its own, drawn before the inner filter
 * forbids getrandom. Each gets the budgets it would get alone: its step and
 * memory bounds are lang_eval's own, its wall clock is the parent's, and
 * its RLIMIT_CPU is set on top of the CPU this process used before it. It
 * retires (exits once its report is written, JAIL_REP_RETIRE) when it can no
 * longer promise that (jail.h: JAIL_EVALUATOR_*): after a limit, a heap
 * grown large, a CPU budget nearly spent, or its keys used up. A crash or a
 * kill ends it as it would end a single-use child: the parent reads its
 * exit status, and gives the session's next request a fresh child, to which
 * it hands the image again. */
#include "sandbox/jail/jail.h"
#include "sandbox/lang/lang.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define LIMIT_PREFIX "{\"ok\": false, \"stage\": \"limit\""

static int64_t cpu_now_us(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* RLIMIT_CPU counts this process's whole life: the evaluation's own budget
 * is put on top of what it has used (whole seconds, rounded up), under the
 * hard limit jail_lock_down set. */
static void set_cpu_budget(uint32_t cpu_seconds, int64_t used_us)
{
    rlim_t cpu = cpu_seconds >= 1 && cpu_seconds <= 60 ? cpu_seconds : 60;
    rlim_t soft = (rlim_t)((used_us + 999999) / 1000000) + cpu;
    struct rlimit rl;
    if (getrlimit(RLIMIT_CPU, &rl) != 0) jail_die_setup("RLIMIT_CPU");
    rl.rlim_cur = soft < rl.rlim_max ? soft : rl.rlim_max;
    if (setrlimit(RLIMIT_CPU, &rl) != 0) jail_die_setup("RLIMIT_CPU");
}

/* Maps the session image `first` announces (img_fd; *img NULL when it has
 * none) and validates it; the memfd is closed either way. */
static void map_image(const jail_request *first, int img_fd, const unsigned char **img,
                      uint64_t *img_len, unsigned *lang_flags)
{
    *img = NULL;
    *img_len = 0;
    *lang_flags = 0;
    if (first->flags & JAIL_REQ_IMAGE) {
        void *m = mmap(NULL, (size_t)first->image_len, PROT_READ, MAP_PRIVATE, img_fd, 0);
        if (m == MAP_FAILED) jail_die_setup("mapping the session image");
        jail_check_image(m, (size_t)first->image_len);
        *img = m;
        *img_len = first->image_len;
        /* The validation read every event record. A big image is walked
         * with its pages dropped behind (JAIL_DROP_MIN_IMAGE): none stays
         * resident. A smaller one keeps them for the evaluations. */
        if (*img_len >= JAIL_DROP_MIN_IMAGE) {
            (void)madvise(m, (size_t)*img_len, MADV_DONTNEED);
            *lang_flags = LANG_IMAGE_MAPPED;
        }
    }
    if (img_fd >= 0) close(img_fd);
}

void jail_evaluator_main(const jail_opts *o, const jail_prepared *p, const jail_request *first,
                         int img_fd)
{
    if (first->source_len != 0 || first->key_len != 0) _exit(JAIL_EXIT_PROTO);
    const unsigned char *img;
    uint64_t img_len;
    unsigned lang_flags;
    map_image(first, img_fd, &img, &img_len, &lang_flags);
    /* A key for each evaluation after the first (jail_lock_down draws that
     * one), drawn while getrandom is allowed. */
    uint64_t keys[JAIL_EVALUATOR_MAX][2];
    size_t got = 0;
    while (got < sizeof keys) {
        ssize_t n = getrandom((char *)keys + got, sizeof keys - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) jail_die_setup("getrandom");
        got += (size_t)n;
    }
    /* The hard CPU limit for the evaluator's life; each evaluation's soft
     * one is set as it starts. */
    jail_lock_down(p, 60);
    int64_t cpu_mark = 0, flt_mark = 0;
    for (unsigned served = 0;; served++) {
        jail_request req;
        int fd;
        int rc = jail_recv_request(&req, &fd);
        if (rc == 1) _exit(0); /* the parent closed the session */
        if (rc != 0 || fd >= 0 || (req.flags & (JAIL_REQ_SESSION | JAIL_REQ_IMAGE)))
            _exit(JAIL_EXIT_PROTO);
        char *src, *key;
        jail_recv_body(&req, &src, &key);
        if (img != NULL) {
            req.flags |= JAIL_REQ_IMAGE;
            req.image_len = img_len;
        }
        if (served > 0) lang_hash_set_key(keys[served][0], keys[served][1]);
        memset(keys[served], 0, sizeof keys[served]);
        set_cpu_budget(req.cpu_seconds, cpu_now_us());
        /* A test mode, or a compile check, serves this request alone (and
         * exits without a report: its exit status is the parent's word). */
        if (o->test != NULL || (req.flags & JAIL_REQ_CHECK))
            jail_evaluate(o, &req, src, key, img, lang_flags);

        lang_stats st = {0, 0};
        lang_limits limits = {0, (size_t)req.max_alloc_bytes, lang_flags, &st};
        char *line = lang_eval((lang_kind)req.kind, src, req.source_len, req.key_len ? key : NULL,
                               img, img ? (size_t)req.image_len : 0, &limits);
        free(src);
        free(key);
        jail_write_outcome(line != NULL ? line : JAIL_MEMORY_OUTCOME, 0);

        jail_report rep;
        memset(&rep, 0, sizeof rep);
        rep.magic = JAIL_REP_MAGIC;
        rep.has_stats = st.steps != 0 || st.alloc_bytes != 0;
        rep.steps = st.steps;
        rep.alloc_bytes = st.alloc_bytes;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        (void)getrusage(RUSAGE_SELF, &ru);
        int64_t cpu = cpu_now_us();
        rep.cpu_us = cpu - cpu_mark;
        rep.minflt = (int64_t)ru.ru_minflt - flt_mark;
        rep.maxrss_kb = ru.ru_maxrss;
        cpu_mark = cpu;
        flt_mark = (int64_t)ru.ru_minflt;
        int retire = line == NULL || strncmp(line, LIMIT_PREFIX, strlen(LIMIT_PREFIX)) == 0 ||
                     lang_heap_bytes() > JAIL_EVALUATOR_HEAP || cpu > JAIL_EVALUATOR_CPU_US ||
                     served + 1 >= JAIL_EVALUATOR_MAX;
        free(line);
        if (retire) rep.flags |= JAIL_REP_RETIRE;
        if (jail_write_all(0, &rep, sizeof rep) != 0 || retire) _exit(0);
        /* While the parent reads the outcome: the next evaluation starts
         * from a collected heap and empty caches. */
        lang_recycle();
    }
}
