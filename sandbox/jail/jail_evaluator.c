/* sandbox/jail/jail_evaluator: a session's evaluator (see jail.h), the one
 * process that evaluates a session's requests, one after another, forked by
 * its holder (jail_holder.c). It keeps what a fresh process would have to
 * fault in again for every evaluation: the pages of the session image it has
 * read and the collector's heap, mapped and populated. On this machine kind
 * a fresh page costs ~11 us and a copy-on-write fault in a forked child
 * more, so a grandchild per evaluation paid more for its memory than a walk
 * over 20,000 events costs to evaluate.
 *
 * Nothing of one evaluation is visible to the next: lang_recycle collects
 * every value of the one before and forgets every cache (docs/LANGUAGE.md:
 * each evaluation starts from a fresh interpreter), and each evaluation
 * hashes strings under a key of its own, drawn before the inner filter
 * forbids getrandom. Each gets the budgets it would get alone: its step and
 * memory bounds are lang_eval's own, its wall clock is the parent's, and
 * its RLIMIT_CPU is set on top of the CPU this process used before it. It
 * retires (exits once its holder has its jail_done) when it can no longer
 * promise that (jail.h: JAIL_EVALUATOR_*): after a limit, a heap grown
 * large, a CPU budget nearly spent, or its keys used up. A crash or a kill
 * ends it as it would end a single-use child; its holder reports the exit
 * status and forks a fresh evaluator for the next request. */
#include "sandbox/jail/jail.h"
#include "sandbox/lang/lang.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
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

void jail_evaluator_main(const jail_opts *o, const jail_prepared *p, const unsigned char *img,
                         uint64_t img_len, unsigned lang_flags)
{
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
        if (rc == 1) _exit(0); /* the holder closed the session */
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
        /* A test mode, or a compile check, serves this request alone. */
        if (o->test != NULL || (req.flags & JAIL_REQ_CHECK))
            jail_evaluate(o, &req, src, key, img, lang_flags);

        lang_stats st = {0, 0};
        lang_limits limits = {0, (size_t)req.max_alloc_bytes, lang_flags, &st};
        char *line = lang_eval((lang_kind)req.kind, src, req.source_len, req.key_len ? key : NULL,
                               img, img ? (size_t)req.image_len : 0, &limits);
        free(src);
        free(key);
        jail_write_outcome(line != NULL ? line : JAIL_MEMORY_OUTCOME, 0);

        jail_done d;
        memset(&d, 0, sizeof d);
        d.magic = JAIL_DONE_MAGIC;
        d.has_stats = st.steps != 0 || st.alloc_bytes != 0;
        d.steps = st.steps;
        d.alloc_bytes = st.alloc_bytes;
        struct rusage ru;
        memset(&ru, 0, sizeof ru);
        (void)getrusage(RUSAGE_SELF, &ru);
        int64_t cpu = cpu_now_us();
        d.cpu_us = cpu - cpu_mark;
        d.minflt = (int64_t)ru.ru_minflt - flt_mark;
        d.maxrss_kb = ru.ru_maxrss;
        cpu_mark = cpu;
        flt_mark = (int64_t)ru.ru_minflt;
        int retire = line == NULL || strncmp(line, LIMIT_PREFIX, strlen(LIMIT_PREFIX)) == 0 ||
                     lang_heap_bytes() > JAIL_EVALUATOR_HEAP || cpu > JAIL_EVALUATOR_CPU_US ||
                     served + 1 >= JAIL_EVALUATOR_MAX;
        free(line);
        if (retire) d.flags |= JAIL_DONE_RETIRE;
        if (jail_write_all(2, &d, sizeof d) != 0 || retire) _exit(0);
        /* While the parent reads the outcome: the next evaluation starts
         * from a collected heap and empty caches. */
        lang_recycle();
    }
}
