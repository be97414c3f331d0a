/* sandbox/jail/jail_child: the child side of a jailed evaluation (see jail.h
 * for the fd/argv contract). jail_prepare compiles the two seccomp
 * filters once per image (in the zygote, or in an exec'd child);
 * jail_enter installs the per-child layers in order (capability drop,
 * rlimits, no_new_privs, the outer filter); jail_serve waits for the first
 * request on fd 0: a session's makes it the session's evaluator
 * (jail_evaluator.c), a single one is served here: the session image mapped
 * read-only, jail_lock_down (the inner filter, the evaluation's CPU limit and
 * hash key), lang_eval, the outcome line on fd 1 (jail_evaluate, also an
 * evaluator's for a test mode or a compile check).
 * sbx_child_main dispatches an exec'd image to the child, the probe or the
 * zygote (jail_zygote.c).
 *
 * The `--test-*` modes exist for the jail's own tests (tests/unit/test_jail*):
 * they are selected only by argv, which only the parent's sbx_config.test_mode
 * can set (never anything from a request), and act AFTER the jail is in place
 * (e.g. try open/socket/fork, which seccomp must kill). */
#include "sandbox/jail/jail.h"
#include "sandbox/lang/lang.h"
#include "sandbox/lang/simg.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <malloc.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int jail_write_all(int fd, const void *data, size_t len)
{
    const char *buf = data;
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int jail_read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reports a setup failure to the parent (fd 1, plain text) and exits. */
void jail_die_setup(const char *what)
{
    char line[256];
    int n = snprintf(line, sizeof line, "jail: %s: %s", what, strerror(errno));
    if (n > 0) (void)jail_write_all(1, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    _exit(JAIL_EXIT_SETUP);
}
#define die_setup jail_die_setup
#define write_all jail_write_all
#define read_all jail_read_all

static int set_limit(int res, rlim_t soft, rlim_t hard)
{
    struct rlimit rl = {soft, hard}, got;
    if (setrlimit(res, &rl) != 0) return -1;
    if (getrlimit(res, &got) != 0 || got.rlim_cur != soft || got.rlim_max != hard) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

#ifdef FPS_SANITIZE
/* Sanitizer builds: ASan reserves terabytes of shadow address space at
 * start-up, so RLIMIT_AS is set relative to what is already mapped: the
 * child may still map `memory_mb` more. */
static rlim_t current_vm_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f == NULL) return 0;
    if (fscanf(f, "%lu", &pages) != 1) pages = 0;
    fclose(f);
    return (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE);
}

/* Seccomp traps (instead of killing) in sanitizer builds so a blocked call
 * made by the sanitizer runtime is named on stderr. Async-signal-safe. */
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    char msg[80] = "sandbox child: seccomp blocked syscall ";
    size_t n = strlen(msg);
    int nr = si->si_syscall;
    char digits[12];
    int d = 0;
    if (nr < 0) nr = 0;
    do {
        digits[d++] = (char)('0' + nr % 10);
        nr /= 10;
    } while (nr > 0 && d < 11);
    while (d > 0 && n < sizeof msg - 2)
        msg[n++] = digits[--d];
    msg[n++] = '\n';
    (void)!write(2, msg, n);
    _exit(JAIL_EXIT_SIGSYS);
}
#endif

/* The allowlist of an evaluating process (a single-use child, a session's
 * evaluator) into `ctx`, and with `lock_down` also the calls a child makes
 * to lock itself down (see jail.h). Everything else gets the context's
 * default action. */
static int add_allowlist(scmp_filter_ctx ctx, int lock_down)
{
    int rc = 0;
#define ALLOW(name) rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(name), 0)
#define ALLOW1(name, cmp) rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(name), 1, cmp)
    /* The requests (fd 0) and the outcome (fd 1); fd 2 is /dev/null. A
     * session's evaluator reports on fd 0 after each outcome. */
    ALLOW1(read, SCMP_A0(SCMP_CMP_EQ, 0));
    ALLOW1(recvmsg, SCMP_A0(SCMP_CMP_EQ, 0));
    ALLOW1(write, SCMP_A0(SCMP_CMP_EQ, 0));
    ALLOW1(write, SCMP_A0(SCMP_CMP_EQ, 1));
    ALLOW1(write, SCMP_A0(SCMP_CMP_EQ, 2));
    ALLOW(close);
    /* What each evaluation of a session's evaluator used (its report). */
    ALLOW1(getrusage, SCMP_A0(SCMP_CMP_EQ, RUSAGE_SELF));
    /* Memory management (never executable mappings). */
    ALLOW1(mmap, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW1(mprotect, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
    ALLOW(munmap);
    ALLOW(mremap);
    ALLOW(brk);
    ALLOW(madvise);
    /* Lowering its own CPU limit to the request's budget (caps are dropped,
     * so the hard limit can only go down). */
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                           SCMP_A1(SCMP_CMP_EQ, RLIMIT_CPU));
    /* Clocks, signal return, exit. */
    ALLOW(clock_gettime);
    ALLOW(clock_getres);
    ALLOW(gettimeofday);
    ALLOW(time);
    ALLOW(rt_sigreturn);
    ALLOW(exit);
    ALLOW(exit_group);
#ifndef FPS_SANITIZE
    /* The collector's getcontext() reads the signal mask (set == NULL):
     * refused, not fatal; it then spills the registers another way. */
    rc |= seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(rt_sigprocmask), 1,
                           SCMP_A1(SCMP_CMP_EQ, 0));
#endif
#ifdef FPS_SANITIZE
    /* What the ASan/UBSan runtimes use after start-up (allocator, stack
     * unwinding, reports to stderr). No file, socket or process calls. */
    ALLOW(sched_yield);
    ALLOW(futex);
    ALLOW(getpid);
    ALLOW(gettid);
    ALLOW(sigaltstack);
    ALLOW(rt_sigprocmask);
    ALLOW(rt_sigaction);
    ALLOW(writev);
    ALLOW1(prlimit64, SCMP_A2(SCMP_CMP_EQ, 0));
    ALLOW(getrlimit);
#endif
    if (lock_down) {
        /* jail_lock_down: hash keys, the inner filter. */
        ALLOW(getrandom);
        ALLOW1(prctl, SCMP_A0(SCMP_CMP_EQ, PR_SET_SECCOMP));
    }
#undef ALLOW
#undef ALLOW1
    return rc;
}

/* The inner filter: it takes back, from a process already under the outer
 * one, exactly the lock-down calls (the `lock_down` part of add_allowlist)
 * and allows everything else, which the outer filter still judges (the
 * kernel runs both; the stricter answer wins). Together they are the
 * evaluating allowlist (tests/unit/test_jail.c checks the two against it
 * over every system call and the arguments the rules compare). Kept this
 * short because its length is paid twice per evaluating process: at attach
 * time (the kernel checks, converts and JIT-compiles the program and, for
 * its action cache, emulates it for every system call number) and on every
 * system call the evaluation makes that the cache does not answer. */
static int add_lock_down_denials(scmp_filter_ctx ctx, uint32_t deny)
{
    int rc = 0;
    rc |= seccomp_rule_add(ctx, deny, SCMP_SYS(getrandom), 0);
    rc |= seccomp_rule_add(ctx, deny, SCMP_SYS(prctl), 0);
    return rc;
}

/* One of the programs (see jail.h), compiled by libseccomp into BPF that a
 * process loads with one prctl call. What a filter does not allow kills the
 * process (traps in sanitizer builds, which then exit with
 * JAIL_EXIT_SIGSYS). */
int jail_compile_filter(jail_filter which, void **prog, size_t *nprog)
{
#ifdef FPS_SANITIZE
    uint32_t deny = SCMP_ACT_TRAP;
#else
    uint32_t deny = SCMP_ACT_KILL_PROCESS;
#endif
    *prog = NULL;
    *nprog = 0;
    scmp_filter_ctx ctx = seccomp_init(which == JAIL_FILTER_INNER ? SCMP_ACT_ALLOW : deny);
    if (ctx == NULL) return -1;
    /* Another architecture's calls (x32's included) get libseccomp's
     * bad-architecture action, in every program alike. */
    /* A binary tree over the system call numbers rather than a chain of
     * comparisons: the kernel emulates a new filter for every number to
     * fill its action cache, so attaching costs in proportion to the path
     * length: the outer filter, attached by every child to a process that
     * has none, ~75 -> ~55 us of CPU
     * on a small VM. (The inner one, on top of it, is emulated only for the
     * numbers the outer one allows outright: no measurable change.) */
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
    rc |= which == JAIL_FILTER_INNER ? add_lock_down_denials(ctx, deny)
                                     : add_allowlist(ctx, which == JAIL_FILTER_OUTER);
    /* Export the program through a memfd and keep it in memory. */
    int fd = -1;
    if (rc == 0) fd = memfd_create("fps-seccomp", MFD_CLOEXEC);
    if (rc != 0 || fd < 0 || seccomp_export_bpf(ctx, fd) != 0) goto fail;
    off_t size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 || size > (1 << 20) ||
        lseek(fd, 0, SEEK_SET) != 0)
        goto fail;
    *prog = malloc((size_t)size);
    if (*prog == NULL || read_all(fd, *prog, (size_t)size) != 0) goto fail;
    *nprog = (size_t)size / sizeof(struct sock_filter);
    close(fd);
    seccomp_release(ctx);
    return 0;
fail:
    free(*prog);
    *prog = NULL;
    if (fd >= 0) close(fd);
    seccomp_release(ctx);
    if (errno == 0) errno = EINVAL;
    return -1;
}

static int load_seccomp(const void *filter, size_t nfilter)
{
#ifdef FPS_SANITIZE
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSYS, &sa, NULL) != 0) return -1;
#endif
    struct sock_fprog prog = {(unsigned short)nfilter, (struct sock_filter *)filter};
    if (filter == NULL || nfilter == 0 || nfilter > 0xffff) {
        errno = EINVAL;
        return -1;
    }
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) == 0 ? 0 : -1;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* ---- warm-up ---- */

/* A small session and an evaluator that walks the interpreter's common
 * paths (events, payloads, comprehensions, strings, numbers, results). It
 * must evaluate cleanly (tests/unit/test_jail.c checks): a source the
 * checker rejects would warm up only the front end. */
const char jail_warm_transcript[] =
    "{\"schema_version\": \"2\", \"assignment_id\": \"warm\", \"session_id\": \"warm\", "
    "\"session_revision_id\": \"r\", \"agent_id\": \"a\", \"environment\": \"e\", "
    "\"started_at\": \"2026-01-01T00:00:00.000000Z\", \"ended_at\": "
    "\"2026-01-01T00:00:01.000000Z\", \"event_count\": 2, \"events\": [{\"id\": \"1\", \"ts\": "
    "\"2026-01-01T00:00:00.000000Z\", \"event_type\": \"tool_use\", \"payload\": "
    "{\"tool_name\": \"search\", \"n\": 1.5, \"ok\": true, \"tags\": [\"x\"]}}, {\"id\": \"2\", "
    "\"ts\": \"2026-01-01T00:00:01.000000Z\", \"event_type\": \"agent_end\", \"payload\": "
    "{\"summary\": \"done\"}}]}";
const char jail_warm_source[] =
    "EvalResult(score=Score(min(1.0, session.count('tool_use') / max(1, session.event_count))), "
    "reasoning=f\"{len([e for e in session.events if e.event_type == 'tool_use'])} "
    "{session.events[0].payload.get('tool_name', '').upper()}\", "
    "metrics={'n': Metric(sum([e.payload.get('n', 0) for e in "
    "session.events_of_type('tool_use')]))}, "
    "assertions={'ok': Assertion(all([e.payload.get('ok', True) for e in session.events]))}, "
    "summary=str(sorted({'b': 1, 'a': 2}.items())) + ' '.join(['x', 'y']).replace('x', 'z'))";

/* One evaluation of the built-in expression, in the process that prepares
 * (the zygote, or an exec'd child before its layers): the interpreter's
 * lazily built tables then exist before any fork, and children share them. */
static int warm_eval(void)
{
    void *img = NULL;
    size_t len = 0;
    if (simg_build_text(jail_warm_transcript, sizeof jail_warm_transcript - 1, NULL, 0, &img, &len,
                        NULL) != 0)
        return -1;
    lang_limits limits = {0};
    char *out = lang_eval(LANG_EVALUATOR, jail_warm_source, sizeof jail_warm_source - 1, "q", img,
                          len, &limits);
    free(out);
    free(img);
    return 0;
}

int jail_prepare(jail_prepared *p)
{
    memset(p, 0, sizeof *p);
    /* glibc's qsort asks sysconf(_SC_PHYS_PAGES) (a sysinfo call) once, on
     * its first large sort; do that now, while the call is still allowed. */
    int warm[512];
    for (int i = 0; i < 512; i++)
        warm[i] = 511 - i;
    qsort(warm, 512, sizeof warm[0], cmp_int);
    /* jansson seeds its hash function from /dev/urandom on first use. */
    json_object_seed(0);
    if (warm_eval() != 0) {
        errno = EINVAL;
        return -1;
    }
    if (jail_compile_filter(JAIL_FILTER_INNER, &p->filter, &p->nfilter) != 0 ||
        jail_compile_filter(JAIL_FILTER_OUTER, &p->outer, &p->nouter) != 0)
        return -1;
    /* malloc'd blocks below 32 MiB (list builders, output buffers) come
     * from the heap rather than a mapping each; freed memory at its top is
     * trimmed as usual, so a big buffer freed before the peak is not part
     * of it (the values themselves live in the collector's mappings).
     * Last, after everything prepare allocates and frees: mallopt first
     * consolidates the heap's fastbins (the small chunks the warm-up and
     * libseccomp freed), which every forked child would otherwise do again
     * on its first large malloc (the lexer's arena), writing to, and so
     * copying, the heap pages those chunks are on. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    /* The consolidated chunks wait in malloc's unsorted bin, which the first
     * malloc no exact bin serves walks chunk by chunk, writing each one's
     * links: in every forked child, a copy-on-write fault for each heap page
     * such a chunk is on (a holder's forked evaluator, trivial evaluation: 65 ->
     * 60 faults). A block larger than any free chunk, allocated here once
     * and given back to the top, sorts them all into their bins now. Volatile:
     * the compiler drops an unused malloc and free pair. */
    void *volatile sort = malloc(256 << 10);
    free(sort);
    return 0;
}

/* A child populates nothing up front: it faults in the pages an evaluation
 * touches, copy-on-write from the zygote (only the collector's heap, as it
 * grows during an evaluation, is populated a section at a time: alloc.c). Populating every page the
 * zygote had written, plus a heap reserve, plus a warm-up evaluation in each pre-started child cost
 * more CPU than the evaluation (bench_jail: 0.94 -> 0.48 ms per evaluation) and did not make the
 * evaluation faster: a fault costs what populating that page does (~1.7 us on a small VM) and only
 * the pages used are faulted. A big session needs no malloc reserve either: the values a walk over
 * it allocates live in the collector's own mappings. */
void jail_enter(const jail_opts *o, const jail_prepared *p, jail_layers *got)
{
    /* The fd contract: 0 a socket, 1 a pipe; nothing above 2 is open, and
     * the parent gave us no environment. */
    int bounding = 0;
    if (jail_drop_caps(&bounding) != 0) die_setup("dropping capabilities");
    got->caps = 1;
    got->bounding = got->bounding || bounding; /* a zygote child: emptied by the zygote */

    rlim_t as = (rlim_t)o->memory_mb << 20;
#ifdef FPS_SANITIZE
    as += current_vm_bytes();
#endif
    if (set_limit(RLIMIT_CPU, 61, 62) != 0) die_setup("RLIMIT_CPU");
    if (set_limit(RLIMIT_AS, as, as) != 0) die_setup("RLIMIT_AS");
    if (set_limit(RLIMIT_FSIZE, 0, 0) != 0) die_setup("RLIMIT_FSIZE");
    /* fds 0..2 plus the one image memfd received over the socket. */
    if (set_limit(RLIMIT_NOFILE, 4, 4) != 0) die_setup("RLIMIT_NOFILE");
    /* No child forks (nor does the outer filter allow clone). */
    if (set_limit(RLIMIT_NPROC, 0, 0) != 0) die_setup("RLIMIT_NPROC");
    if (set_limit(RLIMIT_CORE, 0, 0) != 0) die_setup("RLIMIT_CORE");
    got->rlimits = 1;

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        die_setup("PR_SET_NO_NEW_PRIVS");
    got->nnp = 1;
    if (load_seccomp(p->outer, p->nouter) != 0) die_setup("seccomp");
    got->seccomp = 1;
}

void jail_lock_down(const jail_prepared *p, uint32_t cpu_seconds)
{
    rlim_t cpu = cpu_seconds >= 1 && cpu_seconds <= 60 ? cpu_seconds : 60;
    if (set_limit(RLIMIT_CPU, cpu, cpu + 1) != 0) die_setup("RLIMIT_CPU");
    /* Each evaluation its own string-hash key (getrandom: before the inner
     * filter, which does not allow it). */
    (void)lang_hash_seed();
    if (load_seccomp(p->filter, p->nfilter) != 0) die_setup("seccomp");
}

int jail_recv_request(jail_request *req, int *img_fd)
{
    int nfds;
    *img_fd = -1;
    ssize_t n = jail_recv_fds(0, req, sizeof *req, img_fd, 1, &nfds);
    if (n == 0) return 1;
    if (n < 0) return -1;
    if ((size_t)n < sizeof *req && read_all(0, (char *)req + n, sizeof *req - (size_t)n) != 0)
        return -1;
    if (req->magic != JAIL_REQ_MAGIC || req->source_len > JAIL_MAX_SOURCE ||
        req->key_len > JAIL_MAX_KEY)
        return -1;
    if ((req->flags & JAIL_REQ_IMAGE) && (*img_fd < 0 || req->image_len == 0)) return -1;
    return 0;
}

void jail_recv_body(const jail_request *req, char **src, char **key)
{
    *src = malloc(req->source_len + 1);
    *key = malloc(req->key_len + 1);
    if (*src == NULL || *key == NULL) _exit(JAIL_EXIT_PROTO);
    if (read_all(0, *src, req->source_len) != 0 || read_all(0, *key, req->key_len) != 0)
        _exit(JAIL_EXIT_PROTO);
    (*src)[req->source_len] = '\0';
    (*key)[req->key_len] = '\0';
}

void jail_check_image(const void *img, size_t len)
{
    fps_err err;
    if (simg_validate(img, len, &err) != 0) {
        char line[256];
        int n = snprintf(line, sizeof line, "jail: invalid session image: %s", err.msg);
        if (n > 0) (void)write_all(1, line, strlen(line));
        _exit(JAIL_EXIT_PROTO);
    }
}

void jail_write_outcome(const char *s, int last)
{
    size_t len = strlen(s);
    char small[1024];
    char *buf = len < sizeof small ? small : malloc(len + 1);
    if (buf != NULL) {
        memcpy(buf, s, len + 1); /* its NUL too, which the newline replaces */
        buf[len] = '\n';
        int rc = write_all(1, buf, len + 1);
        if (buf != small) free(buf);
        if (rc != 0) _exit(0);
    } else if (write_all(1, s, len) != 0 || write_all(1, "\n", 1) != 0) {
        _exit(0);
    }
    /* EOF for the parent now, before this process's teardown. */
    if (last) close(1);
}

static void write_outcome(const char *s)
{
    jail_write_outcome(s, 1);
}

/* A call an evaluating process must not make, which one of its filters
 * kills ("call-<name>" test modes): the lock-down calls the outer filter
 * allows and the inner one takes back, and what a process that forked would
 * need. The result when it is not killed: >= 0 succeeded. */
static long forbidden_call(const char *name)
{
    if (!strcmp(name, "clone")) {
        long r = syscall(SYS_clone, (unsigned long)SIGCHLD, NULL, NULL, NULL, NULL);
        if (r == 0) _exit(0);
        return r;
    }
    if (!strcmp(name, "wait4")) return syscall(SYS_wait4, -1, NULL, WNOHANG, NULL);
    if (!strcmp(name, "getppid")) return syscall(SYS_getppid);
    if (!strcmp(name, "getpid")) return syscall(SYS_getpid);
    if (!strcmp(name, "getrandom")) {
        char b[8];
        return syscall(SYS_getrandom, b, sizeof b, 0);
    }
    if (!strcmp(name, "pdeathsig")) return prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0);
    if (!strcmp(name, "seccomp")) {
        struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
        struct sock_fprog prog = {1, &allow};
        return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
    }
    if (!strcmp(name, "nproc")) {
        struct rlimit rl = {0, 0};
        return syscall(SYS_prlimit64, 0, RLIMIT_NPROC, &rl, NULL);
    }
    return -1;
}

/* Test-only behaviours, run after the jail is in place (see file header). */
static void run_test_mode(const char *mode, const jail_request *req, const char *src,
                          const char *key, const unsigned char *img)
{
    if (!strcmp(mode, "sleep")) {
        /* Block until the parent kills us or closes the socket. */
        char c;
        while (read(0, &c, 1) > 0) {
        }
        _exit(0);
    }
    if (!strcmp(mode, "spin")) {
        volatile unsigned long x = 0;
        for (;;)
            x++;
    }
    if (!strcmp(mode, "open")) {
        int fd = open("/etc/hostname", O_RDONLY);
        write_outcome(fd >= 0 ? "{\"ok\": true, \"repr\": \"'open succeeded'\"}"
                              : "{\"ok\": true, \"repr\": \"'open failed'\"}");
        _exit(0);
    }
    if (!strcmp(mode, "socket")) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        write_outcome(fd >= 0 ? "{\"ok\": true, \"repr\": \"'socket succeeded'\"}"
                              : "{\"ok\": true, \"repr\": \"'socket failed'\"}");
        _exit(0);
    }
    if (!strcmp(mode, "fork")) {
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        write_outcome(pid > 0 ? "{\"ok\": true, \"repr\": \"'fork succeeded'\"}"
                              : "{\"ok\": true, \"repr\": \"'fork failed'\"}");
        _exit(0);
    }
    /* Calls a jailed child has no business making (the zygote forks with
     * exactly the flags "clone" uses; set-up moves fds, drops capabilities,
     * sets limits and no_new_privs before the allowlist is loaded). */
    if (!strcmp(mode, "clone") || !strcmp(mode, "dup2") || !strcmp(mode, "sendto") ||
        !strcmp(mode, "prctl") || !strcmp(mode, "capset") || !strcmp(mode, "rlimit") ||
        !strncmp(mode, "call-", 5)) {
        long r = -1;
        if (!strncmp(mode, "call-", 5)) {
            r = forbidden_call(mode + 5);
        } else if (!strcmp(mode, "clone")) {
            r = syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), NULL, NULL, NULL, NULL);
            if (r == 0) _exit(0);
        } else if (!strcmp(mode, "dup2")) {
            r = dup2(1, 3);
        } else if (!strcmp(mode, "sendto")) {
            r = send(0, "x", 1, MSG_NOSIGNAL);
        } else if (!strcmp(mode, "prctl")) {
            r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        } else if (!strcmp(mode, "capset")) {
            struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
            struct __user_cap_data_struct data[2] = {{0, 0, 0}, {0, 0, 0}};
            r = (int)syscall(SYS_capset, &hdr, data);
        } else {
            struct rlimit rl = {3, 3};
            r = setrlimit(RLIMIT_NOFILE, &rl);
        }
        write_outcome(r >= 0 ? "{\"ok\": true, \"repr\": \"'call succeeded'\"}"
                             : "{\"ok\": true, \"repr\": \"'call failed'\"}");
        _exit(0);
    }
    if (!strcmp(mode, "exec")) {
        char *argv[] = {"/bin/true", NULL}, *envp[] = {NULL};
        execve("/bin/true", argv, envp);
        write_outcome("{\"ok\": true, \"repr\": \"'exec failed'\"}");
        _exit(0);
    }
    if (!strcmp(mode, "ptrace")) {
        long r = ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        write_outcome(r == 0 ? "{\"ok\": true, \"repr\": \"'ptrace succeeded'\"}"
                             : "{\"ok\": true, \"repr\": \"'ptrace failed'\"}");
        _exit(0);
    }
    if (!strcmp(mode, "alloc")) {
        /* Grow until the address-space limit says no. */
        size_t total = 0;
        for (;;) {
            char *p = malloc(16u << 20);
            if (p == NULL) break;
            memset(p, 1, 16u << 20);
            total += 16u << 20;
            if (total > ((size_t)64 << 30)) break; /* never: RLIMIT_AS is far lower */
        }
        write_outcome("{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"memory\"}");
        _exit(0);
    }
    if (!strcmp(mode, "flood")) {
        static char chunk[65536];
        memset(chunk, 'x', sizeof chunk);
        for (int i = 0; i < 64; i++)
            (void)!write(1, chunk, sizeof chunk);
        _exit(0);
    }
    if (!strcmp(mode, "silent")) _exit(0);
    if (!strcmp(mode, "linger")) {
        /* A malformed outcome, then hang on without exiting. */
        (void)write_all(1, "not json\n", 9);
        close(1);
        char c;
        while (read(0, &c, 1) > 0) {
        }
        volatile unsigned long x = 0;
        for (;;)
            x++;
    }
    if (!strcmp(mode, "echo")) {
        unsigned long sum = 0;
        for (uint64_t i = 0; img != NULL && i < req->image_len; i++)
            sum += img[i];
        json_t *o = json_pack("{s:b, s:i, s:s%, s:s, s:I, s:I}", "ok", 1, "kind", (int)req->kind,
                              "source", src, (size_t)req->source_len, "eval_key", key, "image_len",
                              (json_int_t)req->image_len, "image_sum", (json_int_t)sum);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        write_outcome(s ? s : "{}");
        _exit(0);
    }
    write_outcome("{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"UnknownTestMode\"}");
    _exit(0);
}

static int parse_opts(int argc, char **argv, jail_opts *o)
{
    memset(o, 0, sizeof *o);
    o->memory_mb = 512;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--memory-mb") && i + 1 < argc) {
            char *end;
            o->memory_mb = strtol(argv[++i], &end, 10);
            if (*end != '\0' || o->memory_mb < 16 || o->memory_mb > (1L << 20)) return -1;
        } else if (!strcmp(a, "--userns")) {
            o->userns = 1;
        } else if (!strcmp(a, "--netns")) {
            o->netns = 1;
        } else if (!strcmp(a, "--probe")) {
            o->probe = 1;
        } else if (!strcmp(a, "--zygote")) {
            o->zygote = 1;
        } else if (!strncmp(a, "--test-", 7) && a[7] != '\0') {
            o->test = a + 7;
        } else {
            return -1;
        }
    }
    return 0;
}

int sbx_child_main(int argc, char **argv)
{
    jail_opts o;
    if (parse_opts(argc, argv, &o) != 0) {
        fprintf(stderr,
                "failproofai-sidecar: the sandbox child is started by the sidecar itself\n");
        return 2;
    }
    if (o.zygote) return jail_zygote_main(&o);
    jail_layers got;
    memset(&got, 0, sizeof got);
    if (jail_ns_enter(o.userns, o.netns, &got) != 0) die_setup("giving up root");
    jail_prepared prep;
    if (jail_prepare(&prep) != 0) die_setup("compiling the seccomp filter");
    jail_enter(&o, &prep, &got);
    if (o.probe) {
        char line[224];
        int n = snprintf(line, sizeof line,
                         "{\"user_ns\": %d, \"net_ns\": %d, \"caps\": %d, \"rlimits\": %d, "
                         "\"no_new_privs\": %d, \"seccomp\": %d, \"unprivileged\": %d, "
                         "\"cap_bounding_empty\": %d}",
                         got.user_ns, got.net_ns, got.caps, got.rlimits, got.nnp, got.seccomp,
                         got.unprivileged, got.bounding);
        if (n > 0) write_outcome(line);
        _exit(0);
    }
    jail_serve(&o, &prep);
}

void jail_serve(const jail_opts *o, const jail_prepared *p)
{
    jail_request req;
    int img_fd;
    int rc = jail_recv_request(&req, &img_fd);
    if (rc == 1) _exit(0); /* pool shut down before we were needed */
    if (rc != 0) _exit(JAIL_EXIT_PROTO);
    if (req.flags & JAIL_REQ_SESSION) jail_evaluator_main(o, p, &req, img_fd);

    char *src, *key;
    jail_recv_body(&req, &src, &key);
    const unsigned char *img = NULL;
    if (req.flags & JAIL_REQ_IMAGE) {
        /* Mapped lazily: a read fault maps the pages around it too (the
         * kernel's fault-around), so a walk over the whole session costs
         * what MAP_POPULATE did, and an evaluation that reads only the event
         * records (or nothing) no longer maps every payload page up front. */
        void *m = mmap(NULL, req.image_len, PROT_READ, MAP_PRIVATE, img_fd, 0);
        if (m == MAP_FAILED) die_setup("mapping the session image");
        img = m;
        jail_check_image(img, req.image_len);
        /* The validation read every event record: a walk faults them in
         * again as it reaches them and drops them behind it. */
        if (req.image_len >= JAIL_DROP_MIN_IMAGE) (void)madvise(m, req.image_len, MADV_DONTNEED);
    }
    if (img_fd >= 0) close(img_fd);
    jail_lock_down(p, req.cpu_seconds);
    /* The image is a private read-only mapping: a walk over it may drop the
     * pages behind it (see JAIL_DROP_MIN_IMAGE). */
    unsigned flags = img && req.image_len >= JAIL_DROP_MIN_IMAGE ? LANG_IMAGE_MAPPED : 0;
    jail_evaluate(o, &req, src, key, img, flags);
}

void jail_evaluate(const jail_opts *o, const jail_request *req, const char *src, const char *key,
                   const unsigned char *img, unsigned lang_flags)
{
    if (o->test != NULL) run_test_mode(o->test, req, src, key, img);
    if (req->flags & JAIL_REQ_CHECK) {
        char *line = lang_check_line((lang_kind)req->kind, src, req->source_len);
        if (line == NULL) _exit(JAIL_EXIT_PROTO);
        write_outcome(line);
        _exit(0);
    }
    lang_limits limits = {0, (size_t)req->max_alloc_bytes, lang_flags, NULL};
    char *out = lang_eval((lang_kind)req->kind, src, req->source_len, req->key_len ? key : NULL,
                          img, img ? (size_t)req->image_len : 0, &limits);
    write_outcome(out ? out : JAIL_MEMORY_OUTCOME);
    /* _exit: no atexit handlers (nothing to flush; keeps LeakSanitizer's
     * exit-time scan, which needs ptrace, out of the jail). */
    _exit(0);
}
