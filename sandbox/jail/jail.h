/* sandbox/jail/jail: runs each evaluation in a jailed process of its own.
 *
 * Internal contract between the parent side (sbx_*.c), the zygote
 * (jail_zygote.c) and the child (jail_child.c).
 *
 * How a child comes to be. The parent exec's one ZYGOTE per pool: a fresh
 * image of the small `failproofai-sandbox` binary, single-threaded, empty
 * environment, that enters the optional user+net namespaces, prepares the
 * seccomp program once, and then only ever forks. For each child the parent
 * sends the zygote the child's two channel fds; the zygote clones itself with
 * CLONE_PARENT (so the child is the PARENT's child: it waits for and kills it
 * exactly like an exec'd one) and the child installs its layers and waits for
 * its one request. The zygote never sees a request, a transcript or an
 * outcome, never runs the interpreter, and holds nothing a child may not
 * see, so a child forked from it starts from the same pristine state as a
 * fresh exec, at a fraction of the cost (exec + dynamic linking is ~2 ms of
 * CPU on a small VM; a fork of the zygote ~0.5 ms). This is NOT a fork of the
 * multi-threaded daemon: the daemon's memory, threads, sockets and secrets
 * are never in a child. Each evaluation still runs in a process of its own
 * (a single-use child, or a session's evaluator: below).
 * When no zygote is available the parent exec's each child directly:
 *
 *   argv: <exe> SBX_CHILD_ARG [--memory-mb N] [--userns] [--netns]
 *                              [--probe | --zygote] [--test-MODE]
 *   env:  empty (sanitizer builds add ASAN_OPTIONS for the runtime)
 *
 * A child (forked or exec'd) has exactly:
 *   fd 0: a unix stream socket to the parent (the request, and the session
 *         image's sealed memfd as SCM_RIGHTS)
 *   fd 1: the write end of the outcome pipe
 *   fd 2: /dev/null (the parent's stderr in sanitizer builds)
 * The zygote has fd 0 = a SOCK_SEQPACKET control socket to the parent
 * (jail_zygote_msg), fds 1 and 2 = /dev/null (2 = stderr in sanitizer
 * builds).
 *
 * The child installs its layers (capabilities dropped, rlimits,
 * no_new_privs, the outer seccomp filter; namespaces come from the zygote,
 * or are entered by an exec'd child itself) BEFORE it reads its first
 * request, so a pre-started child is already jailed while it waits. The
 * first request says what it becomes:
 *   - a single-use child (sbx_eval, sbx_check): it adds the inner filter and
 *     the evaluation's own limits (jail_lock_down), evaluates exactly that
 *     request, writes one outcome (JSON, at most 1 MiB) to fd 1 and exits;
 *   - a session's EVALUATOR (JAIL_REQ_SESSION, a session of sbx.h;
 *     jail_evaluator.c): it maps and validates the session's image once,
 *     locks itself down as a single-use child does and evaluates each
 *     further request on fd 0, one after another, each outcome on fd 1
 *     followed by one jail_report on fd 0, until it retires (or ends at a
 *     limit or a crash); the session's next request then gets a fresh child.
 *
 * Two seccomp filters, stacked (the kernel applies both, the stricter
 * answer wins): the OUTER one (jail_enter) also allows what a child needs to
 * lock itself down (drawing hash keys, installing the inner filter); the INNER one (jail_lock_down)
 * takes exactly those back, so that the two together are the evaluation's allowlist: no process
 * calls, no file, no socket but fd 0 (the request in, a session's reports out) and writing fds 1
 * and 2. No child can ever fork: the outer filter has no clone, and RLIMIT_NPROC is 0 in every
 * child (jail_enter). */
#ifndef FPS_JAIL_H
#define FPS_JAIL_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* argv[1] that makes the binary act as a sandbox child. */
#define SBX_CHILD_ARG "__sandbox-child"

/* Entry point of the child image (child, probe or zygote, by argv);
 * returns its exit status. */
int sbx_child_main(int argc, char **argv);

/* ---- between jail_child.c and jail_zygote.c ---- */

typedef struct {
    long memory_mb;
    int userns, netns, probe, zygote;
    const char *test; /* NULL or the mode after "--test-" */
} jail_opts;

typedef struct {
    int user_ns, net_ns, caps, rlimits, nnp, seccomp;
    int unprivileged; /* not root: given up, or never had it */
    int bounding;     /* the capability bounding set is empty */
} jail_layers;

/* What a process prepares once before it serves (or forks) children: the
 * compiled seccomp program and process-wide lazy initialisations (one
 * evaluation of a built-in expression has run, so the interpreter's lazily
 * built tables exist before any fork). Lives as long as the process
 * (children inherit it). */
typedef struct {
    void *filter;   /* owned: struct sock_filter[], the inner filter (jail_lock_down) */
    size_t nfilter; /* instructions                                            */
    void *outer;    /* owned: the outer filter (jail_enter)                     */
    size_t nouter;
} jail_prepared;

/* The seccomp programs: the OUTER filter (the evaluating allowlist plus the
 * lock-down calls), the INNER one (a short list of denials: the lock-down
 * calls, everything else allowed, so it only ever narrows the outer one),
 * and the EVALUATING allowlist itself, which no process loads: what outer
 * and inner stacked must amount to (tests/unit/test_jail.c compares them).
 * Compiles `which` into a malloc'd struct sock_filter[] (*prog, *nprog
 * instructions): 0, or -1 with errno set. */
typedef enum { JAIL_FILTER_OUTER, JAIL_FILTER_INNER, JAIL_FILTER_EVALUATING } jail_filter;
int jail_compile_filter(jail_filter which, void **prog, size_t *nprog);

/* Prepares `p` (0, or -1 with errno set). Call before any child layer. */
int jail_prepare(jail_prepared *p);
/* Installs the per-child layers (caps, rlimits, no_new_privs, the outer
 * seccomp filter from `p`); records them in `got`. Returns only on success:
 * on any failure it writes the reason to fd 1 and _exits with
 * JAIL_EXIT_SETUP (fail closed). */
void jail_enter(const jail_opts *o, const jail_prepared *p, jail_layers *got);
/* What an evaluating process adds before it evaluates (a single-use child,
 * a session's evaluator): RLIMIT_CPU at `cpu_seconds`
 * (1..60), a fresh string-hash key (lang_hash_seed) and the inner filter.
 * Returns only on success (else as jail_enter). */
void jail_lock_down(const jail_prepared *p, uint32_t cpu_seconds);
/* The built-in session (transcript JSON) and evaluator jail_prepare runs. */
extern const char jail_warm_transcript[];
extern const char jail_warm_source[];
/* Serves the first request on fd 0 (a single evaluation, or a session as its
 * evaluator) and _exits. Never returns. */
__attribute__((noreturn)) void jail_serve(const jail_opts *o, const jail_prepared *p);
/* The zygote's loop (jail_zygote.c); returns the process's exit status. */
int jail_zygote_main(const jail_opts *o);

/* Descriptor passing (jail_fds.c). jail_send_fds sends iov with `nfds`
 * (<= JAIL_MAX_PASSED_FDS) descriptors attached, MSG_NOSIGNAL added to
 * `flags`; returns bytes sent or -1. jail_recv_fds receives up to `len`
 * bytes and at most `maxfds` descriptors (close-on-exec; extra ones are
 * closed) into fds / *nfds; returns bytes (0 = peer closed) or -1 (errno;
 * a truncated message is EMSGSIZE and keeps no descriptor). */
#define JAIL_MAX_PASSED_FDS 2
ssize_t jail_send_fds(int sock, const struct iovec *iov, int iovcnt, const int *fds, int nfds,
                      int flags);
ssize_t jail_recv_fds(int sock, void *buf, size_t len, int *fds, int maxfds, int *nfds);

/* Zygote control messages (SOCK_SEQPACKET, one message each). After its
 * set-up the zygote sends one HELLO (pid = its own pid, value = 0, or -errno
 * when it cannot serve). Then per child: the parent sends FORK with two fds
 * attached (SCM_RIGHTS: the child's request socket, then the write end of
 * its outcome pipe); the zygote answers FORKED with pid = the child's pid
 * (> 0) or value = -errno. */
#define JAIL_ZYG_MAGIC 0x5a535046u /* "FPSZ" */
#define JAIL_ZYG_HELLO 1u
#define JAIL_ZYG_FORK 2u
#define JAIL_ZYG_FORKED 3u
typedef struct {
    uint32_t magic;
    uint32_t op;
    int32_t pid;
    int32_t value;
    uint32_t user_ns, net_ns; /* HELLO: namespaces in effect */
    uint32_t bounding;        /* HELLO: the bounding set is empty */
} jail_zygote_msg;

/* The request header, sent once over fd 0 (with the image memfd attached as
 * SCM_RIGHTS when JAIL_REQ_IMAGE is set), followed by source_len bytes of
 * source and key_len bytes of eval_key. */
#define JAIL_REQ_MAGIC 0x58535046u /* "FPSX" */
#define JAIL_REQ_IMAGE 1u
#define JAIL_REQ_CHECK 2u /* lang_check only */
#define JAIL_REQ_SESSION                                                                           \
    4u /* become the evaluator of a session (no source, no key):                                   \
          the image fd (JAIL_REQ_IMAGE) comes with this one;                                       \
          the session's requests after it carry none */
typedef struct {
    uint32_t magic;
    uint32_t kind;        /* lang_kind */
    uint32_t flags;       /* JAIL_REQ_IMAGE | JAIL_REQ_CHECK | JAIL_REQ_SESSION */
    uint32_t key_len;     /* 0 = no eval_key */
    uint32_t cpu_seconds; /* RLIMIT_CPU soft limit for this evaluation */
    uint32_t reserved;
    uint64_t source_len;
    uint64_t image_len;
    uint64_t max_alloc_bytes;
} jail_request;

/* A session's evaluator's word after each evaluation, on fd 0 once its
 * outcome is on fd 1: what the evaluation used, and whether the evaluator
 * retires (exits now; the session's next request gets a fresh child). An
 * evaluator that ends without one (a limit, a crash, a test mode) leaves its
 * exit status as the parent's word. */
#define JAIL_REP_MAGIC 0x52535046u /* "FPSR" */
#define JAIL_REP_RETIRE 1u
typedef struct {
    uint32_t magic;
    uint32_t flags;     /* JAIL_REP_RETIRE                                        */
    uint32_t has_stats; /* 1: steps and alloc_bytes were reported (lang_stats)    */
    uint32_t reserved;
    int64_t maxrss_kb;    /* its peak resident set (ru_maxrss) since the parent last */
                          /* reset it (sbx_session.c), else over its life            */
    int64_t cpu_us;       /* its user + system CPU time since its last report       */
    int64_t minflt;       /* its minor page faults since then                       */
    uint64_t steps;       /* lang_stats                                             */
    uint64_t alloc_bytes; /* lang_stats                                             */
} jail_report;

/* An evaluator serves a session's evaluations one after another while each
 * leaves it as it would leave a fresh one (jail_evaluator.c). It retires
 * after an evaluation that ended at a limit or could not write its outcome,
 * once its collector's heap has grown past JAIL_EVALUATOR_HEAP (what a
 * later evaluation's peak memory would otherwise include), once it has used
 * JAIL_EVALUATOR_CPU_US of CPU (so that each evaluation's RLIMIT_CPU, set
 * on top of what it used, stays within the hard limit) and after
 * JAIL_EVALUATOR_MAX evaluations (the hash keys it drew up front). */
#define JAIL_EVALUATOR_MAX 64
#define JAIL_EVALUATOR_HEAP ((size_t)32 << 20)
#define JAIL_EVALUATOR_CPU_US 1000000

/* An evaluating process's walk over a session image from this size on
 * drops the pages behind it (LANG_IMAGE_MAPPED: a child then holds a few
 * hundred KiB of a 25 MiB session rather than all of it). Every image is
 * a read-only mapping of its memfd, in a single-use child as in a
 * session's evaluator (jail_evaluator.c). Dropping costs about 0.3 ms per
 * MiB walked (each page is mapped and unmapped again), more than a cheap
 * evaluation over a small session spends, and saves at most the image's
 * size. */
#define JAIL_DROP_MIN_IMAGE ((uint64_t)16 << 20)

/* ---- between jail_child.c and jail_evaluator.c ---- */

/* Receives a request header and (optionally) one fd (*img_fd, else -1).
 * 0, 1 when the parent closed the socket without sending one, -1 malformed. */
int jail_recv_request(jail_request *req, int *img_fd);
/* Reads the source and key that follow a header into malloc'd,
 * NUL-terminated buffers; _exits with JAIL_EXIT_PROTO on failure. */
void jail_recv_body(const jail_request *req, char **src, char **key);
/* Full reads/writes (EINTR retried). 0 or -1. */
int jail_read_all(int fd, void *buf, size_t len);
int jail_write_all(int fd, const void *buf, size_t len);
/* Writes "jail: <what>: <strerror>" to fd 1 and _exits JAIL_EXIT_SETUP. */
__attribute__((noreturn)) void jail_die_setup(const char *what);
/* Checks a session image the parent sent (simg_validate); on failure writes
 * the reason to fd 1 and _exits JAIL_EXIT_PROTO. */
void jail_check_image(const void *img, size_t len);
/* Evaluates one request in this (locked-down) process: a test mode, a
 * compile check or lang_eval over `img` (may be NULL) with `lang_flags`
 * (LANG_IMAGE_MAPPED or 0); writes the outcome line to fd 1 and _exits 0. */
__attribute__((noreturn)) void jail_evaluate(const jail_opts *o, const jail_request *req,
                                             const char *src, const char *key,
                                             const unsigned char *img, unsigned lang_flags);
/* The outcome of an evaluation whose outcome line could not be allocated. */
#define JAIL_MEMORY_OUTCOME "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"memory\"}"
/* Writes an outcome line (a newline added) to fd 1 in one write: the parent
 * may act on the newline before this process has done anything else.
 * `last`: closes fd 1 after it (EOF for the parent, before this process's
 * teardown). _exits 0 when the parent is gone. */
void jail_write_outcome(const char *s, int last);
/* A session's evaluator's life (jail_evaluator.c): takes the session's
 * image from `first` and `img_fd`, locks down, then serves the session's
 * requests on fd 0 until it retires or fd 0 closes: each outcome on fd 1,
 * each jail_report on fd 0. Never returns. */
__attribute__((noreturn)) void jail_evaluator_main(const jail_opts *o, const jail_prepared *p,
                                                   const jail_request *first, int img_fd);

/* Largest source the parent will hand to a child (the language's own limit
 * is 128 KiB; anything past this is rejected by the parent outright). */
#define JAIL_MAX_SOURCE (4u << 20)
#define JAIL_MAX_KEY 4096u
/* Largest outcome the parent reads back before it kills the child. */
#define JAIL_MAX_OUTCOME (1u << 20)

/* Child exit statuses besides 0 (outcome written). */
#define JAIL_EXIT_SETUP 3    /* a layer could not be installed; reason on fd 1 */
#define JAIL_EXIT_PROTO 4    /* malformed request                               */
#define JAIL_EXIT_SIGSYS 159 /* sanitizer builds: seccomp trap handler         */

/* Identity (jail_ns.c): as root, gives up root (empty bounding set, no
 * groups, uid and gid 65534) and sets got->unprivileged; then each `want_*`
 * namespace is attempted and got->user_ns / net_ns say what took effect.
 * Returns 0, or -1 if root could not be given up (fail closed); namespaces
 * are never required. */
int jail_ns_enter(int want_user, int want_net, jail_layers *got);
/* Drops every capability: the bounding set where this process may (sets
 * *bounding_empty, may be NULL), ambient, effective, permitted, inheritable.
 * 0, or -1 if an effective, permitted or inheritable one is left. */
int jail_drop_caps(int *bounding_empty);

#endif
