/* sandbox/lang/lang: the managed-evaluation language (docs/LANGUAGE.md),
 * in-process. This is the interpreter's whole public surface; the jail child
 * (sandbox/jail/jail_child.c) and the tests call it. Never call lang_eval on
 * untrusted source in the daemon's own process: go through sbx_eval
 * (sandbox/jail/sbx.h), which runs it in a jailed child.
 *
 * Pipeline (one file per stage): lexer.c -> parser.c (AST mirroring CPython's
 * ast classes, ast.h) -> checker.c (docs/LANGUAGE.md source checks) -> eval.c
 * (tree-walking evaluator over the values of value.h). */
#ifndef FPS_LANG_H
#define FPS_LANG_H
#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

typedef enum { LANG_RAW = 0, LANG_CONDITION, LANG_EVALUATOR } lang_kind;

/* Parses "raw" | "condition" | "evaluator"; returns 0 or -1. */
int lang_kind_parse(const char *s, lang_kind *out);

/* What one evaluation used: the steps it counted and the bytes it allocated
 * from the collected heap (all of them, freed or not). */
typedef struct {
    uint64_t steps;
    uint64_t alloc_bytes;
} lang_stats;

/* Deterministic in-interpreter bounds; zero fields mean the defaults. */
typedef struct {
    uint64_t max_steps;     /* evaluation steps before a "steps" limit   */
    size_t max_alloc_bytes; /* live bytes allocated before a "memory" limit */
    unsigned flags;         /* LANG_IMAGE_MAPPED */
    lang_stats *stats;      /* borrowed, may be NULL: filled by lang_eval once the
                               evaluation has run (left alone by a compile error) */
} lang_limits;

/* lang_limits.flags: the session image is a read-only private mapping of a
 * file (MAP_PRIVATE, PROT_READ), whose pages the evaluation may drop once
 * read (they fault in again from the file). Never for an image in
 * anonymous memory (a malloc'd buffer), which dropping would zero. */
enum { LANG_IMAGE_MAPPED = 1u };

/* Draws a fresh random key for string hashing (SipHash-1-3, as CPython).
 * The jail calls it in each child before loading its seccomp filter (it
 * makes the getrandom system call); otherwise the first evaluation does.
 * 0, or -1 when no randomness was available. */
int lang_hash_seed(void);

/* Sets the string-hash key to k0, k1 (drawn by the caller: an evaluating
 * process that serves several evaluations draws their keys before its
 * filter forbids getrandom). */
void lang_hash_set_key(uint64_t k0, uint64_t k1);

/* Readies this process for another evaluation once lang_eval has returned
 * (a session's evaluator, sandbox/jail/jail_evaluator.c): every value of the
 * evaluations before is collected, and no cache keeps anything of them (the
 * string cursors, the free block lists, the hashes cached on the shared
 * strings, which were computed under the old key). The collector keeps its
 * heap mapped, so the next evaluation allocates from pages already there.
 * Set the next key (lang_hash_set_key) before the next lang_eval. */
void lang_recycle(void);
/* The collector's heap in bytes: its high-water mark in this process
 * (collecting frees blocks, it does not give the heap back). */
size_t lang_heap_bytes(void);

/* Source checks only (docs/LANGUAGE.md table). Returns 0 if the source is
 * accepted; otherwise LANG_EREJECTED with e (common/err.h) named
 * "source_rejected" and its message (without the "evaluator source
 * rejected: " prefix), e.g. "evaluator_source must be one expression". The
 * field name is condition_source for LANG_CONDITION and evaluator_source
 * otherwise. */
enum { LANG_EREJECTED = -1 };
int lang_check(lang_kind kind, const char *src, size_t len, fps_err *e);

/* The source checks as one outcome line of docs/LANGUAGE.md's `check`:
 * {"ok": true} or the compile outcome, which for a syntax error also carries
 * "line" and "column" (1-based; column in code points). malloc'd, or NULL
 * when out of memory. */
char *lang_check_line(lang_kind kind, const char *src, size_t len);

/* Checks and evaluates `src` against the session image `img` (sandbox/lang/simg.h,
 * may be NULL for no session: then `session` raises NameError) and returns
 * the outcome as one JSON object without a trailing newline, exactly in the
 * format of docs/LANGUAGE.md's last section ({"ok": ..., "stage": ...}; a compile
 * outcome as lang_check_line writes it).
 * `eval_key` names the primary result of an evaluator. Returns a malloc'd
 * string the caller frees, or NULL only if memory for the outcome itself
 * could not be allocated. */
char *lang_eval(lang_kind kind, const char *src, size_t len, const char *eval_key, const void *img,
                size_t img_len, const lang_limits *limits);

#endif
