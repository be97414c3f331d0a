/* sandbox/jail: runs each evaluation in its own jailed child process.
 *
 * Internal contract between the parent side (sbx.c) and the child image
 * (jail_child.c). The child is a fresh exec of this binary:
 *
 *   argv: <exe> SBX_CHILD_ARG [--memory-mb N] [--userns] [--netns]
 *                              [--probe] [--test-MODE]
 *   env:  empty (sanitizer builds add ASAN_OPTIONS for the runtime)
 *   fd 0: a unix stream socket to the parent (the request, and the session
 *         image's sealed memfd as SCM_RIGHTS)
 *   fd 1: the write end of the outcome pipe
 *   fd 2: /dev/null (the parent's stderr in sanitizer builds)
 *   nothing else.
 *
 * The child installs every layer (namespaces if asked, capabilities dropped,
 * rlimits, no_new_privs, seccomp) BEFORE it reads its request, so a
 * pre-started child is already jailed while it waits. The parent tightens
 * RLIMIT_CPU to the request's budget with prlimit(2) from outside just before
 * it sends the request. The child evaluates exactly one request, writes one
 * outcome (JSON, at most 1 MiB) to fd 1 and exits. */
#ifndef FPS_JAIL_H
#define FPS_JAIL_H
#include <stdint.h>

/* argv[1] that makes the binary act as a sandbox child. */
#define SBX_CHILD_ARG "__sandbox-child"

/* Entry point of the child image; returns its exit status. */
int sbx_child_main(int argc, char **argv);

/* The request header, sent once over fd 0 (with the image memfd attached as
 * SCM_RIGHTS when JAIL_REQ_IMAGE is set), followed by source_len bytes of
 * source and key_len bytes of eval_key. */
#define JAIL_REQ_MAGIC 0x58535046u /* "FPSX" */
#define JAIL_REQ_IMAGE 1u
#define JAIL_REQ_CHECK 2u /* lang_check only */
typedef struct {
    uint32_t magic;
    uint32_t kind;        /* lang_kind */
    uint32_t flags;       /* JAIL_REQ_IMAGE */
    uint32_t key_len;     /* 0 = no eval_key */
    uint32_t cpu_seconds; /* RLIMIT_CPU soft limit for this evaluation */
    uint32_t reserved;
    uint64_t source_len;
    uint64_t image_len;
    uint64_t max_alloc_bytes;
} jail_request;

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

/* Optional namespaces (jail_ns.c). Each `want_*` is attempted; `got_*` say
 * what took effect. Returns 0 (namespaces are never required). */
int jail_ns_enter(int want_user, int want_net, int *got_user, int *got_net);
/* Drops every capability (effective, permitted, inheritable). 0 or -1. */
int jail_drop_caps(void);

#endif
