/* sidecar/worker_plan: the plan response checked against what the worker
 * asked for, and the source checksums of managed runs (see worker_plan.c).
 * Private to sidecar/; unit-tested (tests/unit/test_worker_plan.c). */
#ifndef FPS_WORKER_PLAN_H
#define FPS_WORKER_PLAN_H
#include "sidecar/cloud/cloud.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stddef.h>

/* One planned run of an assignment. */
typedef struct {
    const char *run_id;   /* borrowed from the plan (run->run_id) */
    const cloud_run *run; /* borrowed from the plan */
    const json_t *def;    /* borrowed: the definition descriptor */
    atomic_int cancel;    /* non-zero: kill its sandbox, submit nothing */
    atomic_int done;      /* finished (result built or cancelled) */
} wrun;

/* Matches plan `p` against `defs` (the assignment's definitions) and
 * `selected` (the {eval_key, eval_version} the worker sent): unless the plan
 * is an idempotent replay, its status must be "planned" (or "skipped" when
 * nothing was selected) and its runs exactly the selected definitions, each
 * once; every run must name a known definition with the same execution
 * mode. 0 with *runs (owned; free()) and *nruns, or -1 with a message. */
/* fps_err codes (names): a plan that breaks the contract ("protocol_error"),
 * a source that is not the definition's ("source_checksum_mismatch"). */
enum { WORKER_PLAN_EMISMATCH = -1, WORKER_PLAN_ECHECKSUM = -2, WORKER_PLAN_ENOMEM = -3 };
int worker_plan_match(const cloud_plan *p, const json_t *defs, const json_t *selected, wrun **runs,
                      size_t *nruns, fps_err *err);
/* SPEC §2 step 6 for every managed run: source_checksum must be
 * "sha256:" + hex(SHA-256(condition_source + NUL + evaluator_source)) and
 * match the definition's. 0, or -1 with a message naming the run. */
int worker_plan_verify_sources(const wrun *runs, size_t n, fps_err *err);

#endif
