/* sidecar/backtest/backtest: the backtest engine (SPEC §9). It runs one set
 * of managed definitions (the candidate) over stored sessions and compares
 * each (session, eval_key) with a baseline: another set of definitions, the
 * results the live runs stored ("production"), or nothing.
 *
 * It owns: reading the sessions (transcript files, directories of them,
 * JSON lines of transcripts, or the transcript archive beside a state
 * database), sharding them, evaluating every definition on each session
 * exactly as the live worker does (conditions, the jail, its limits and
 * timeout clamp, result validation; each session is ingested once for all
 * its definitions), sending the keys given a local endpoint to it with the
 * live dispatch's body and signature, and the comparison: one row per
 * (session, eval_key) and the summary per eval_key.
 *
 * Shapes (fixed; scripts rely on them):
 *   OUTCOME  {"status": "succeeded"|"failed"|"timed_out"|"cancelled"|"skipped",
 *             "results": [wire result items, as a live run submits them],
 *             "summary": string|null,
 *             "error_type": string        (failed / timed_out only),
 *             "skip_reason": string}      (skipped only)
 *   row      {"session_id", "eval_key", "baseline": OUTCOME|null,
 *             "candidate": OUTCOME, "changed": bool,
 *             "deltas": {result_key: candidate - baseline numeric_value},
 *             "assignment_id"}  (sessions from the archive only: the
 *             assignment whose live runs hold the production results)
 *   summary  {"sessions": N, "input_errors": [{"source", "message"}],
 *             "eval_keys": [{"eval_key", "sessions", "evaluated", "skipped",
 *               "skipped_baseline", "no_baseline", "changed", "pass_to_fail",
 *               "fail_to_pass", "new_errors", "fixed_errors",
 *               "errors": {"baseline", "candidate"},
 *               "top_errors": {"baseline": [{"error_type", "count"}],
 *                              "candidate": [...]},      (at most 3 each)
 *               "mean_abs_delta": number|null, "max_abs_delta": number|null,
 *               "top_changed": [{"session_id", "baseline_status",
 *                 "candidate_status", "kind", "delta"}]}]}  (at most 10)
 *
 * Counting rules (per eval_key of the candidate, sorted by eval_key):
 *   sessions      the transcripts read (a malformed one is an input error,
 *                 not a session);
 *   evaluated     the candidate's evaluator ran (not skipped);
 *   skipped       the candidate's condition selected nothing;
 *   skipped_baseline  the same for the baseline;
 *   no_baseline   the baseline is null (no baseline given, the key is not in
 *                 the baseline's definitions, or no terminal live run was
 *                 stored for it: the run history was pruned);
 *   an error      a "failed" or "timed_out" outcome; errors.{baseline,
 *                 candidate} count them, top_errors their error_types;
 *   new_errors    baseline not an error (but not null) -> candidate error;
 *   fixed_errors  the reverse;
 *   pass_to_fail, fail_to_pass  only where both sides succeeded with a pass
 *                 value on the primary result (result_key = eval_key): an
 *                 assertion's bool_value, or a score's non-null bool_value;
 *                 a metric key reports 0 for both; error -> fail is a fixed
 *                 error, not a flip;
 *   changed       the baseline is not null and the status, error_type,
 *                 summary or any result differs;
 *   mean_abs_delta / max_abs_delta  over the rows where both sides carry the
 *                 primary result's numeric_value (null when none do);
 *   top_changed   the changed rows, pass->fail and new errors first, then
 *                 fail->pass and fixed errors, then by |primary delta|,
 *                 then by session_id ("kind" says which: "pass_to_fail",
 *                 "new_error", "fail_to_pass", "fixed_error", "changed";
 *                 "delta" the primary delta or null).
 * The summary depends only on the set of rows, never on their order: the
 * merge of shards' rows (backtest_merge) equals the unsharded summary.
 *
 * Bad input never stops the others: a malformed transcript is an input
 * error named by file and line ("path:line: message"), a definition whose
 * source does not compile is reported once ("definitions[i] (key):
 * line L, column C: message") and its evaluations are failed with
 * error_type "compile_error" without running; a failing local endpoint
 * gives that key failed outcomes. Definitions that are not a JSON array of
 * definitions or an unreadable path fail the start (nothing runs).
 *
 * A run that cannot go on ends "failed", with no summary and one precise
 * reason (backtest_error): the archive cannot be opened or listed (removed,
 * unreadable, not a database), it stops answering during the run (an
 * entry evicted since the start or damaged is only that session's input
 * error), the production baseline cannot be read from the state database,
 * or the jail cannot run a definition's compile check.
 *
 * Thread-safe: the handle's functions may be called from any thread while
 * the backtest runs on its own threads. */
#ifndef FPS_BACKTEST_H
#define FPS_BACKTEST_H
#include "common/err.h"
#include "common/secret.h"
#include "sandbox/jail/sbx.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

typedef struct backtest backtest;

/* fps_err codes of backtest_start / backtest_merge / backtest_wait (names
 * in quotes): BT_EINVALID "invalid_request" (bad definitions, bad flags'
 * values), BT_EIO "unreadable" (a path cannot be read), BT_EFAILED
 * "backtest_failed" (the run could not go on: backtest_error). */
enum { BT_EINVALID = -1, BT_EIO = -2, BT_EFAILED = -3 };

/* One --local EVAL_KEY=URL: that key's runs go to URL. */
typedef struct {
    const char *eval_key, *url; /* borrowed */
} backtest_local;

typedef struct {
    sbx_pool *pool; /* borrowed; required; its slots bound the evaluations */
    int jobs;       /* sessions evaluated at once (<= 0: 1)               */
    int background; /* 1: evaluations wait behind live work (the pool's
                       playground budget: only while no live evaluation
                       waits); the daemon sets it                        */
    /* The candidate: a JSON array of managed definitions, the emulator's
     * --definitions format (eval_key, eval_version, result_kind,
     * condition_source, evaluator_source, timeout_seconds, ...). */
    const char *definitions;
    /* The baseline: NULL (none), "production" (the live runs' stored
     * results; needs db_path) or a JSON array as `definitions`. */
    const char *baseline;
    /* The sessions: `paths` (files, directories, *.jsonl files; borrowed)
     * or, when npaths is 0, the archive beside the state database db_path
     * (`<db>.archive`), filtered by since (RFC 3339 or NULL) and limit
     * (<= 0: all), newest first. */
    const char *const *paths;
    size_t npaths;
    const char *db_path;
    const char *since;
    long limit;
    int shard_k, shard_n; /* shard_n > 1: only the sessions whose
                             SHA-256(session_id), first 8 bytes read as a
                             big-endian integer, is shard_k mod shard_n */
    const backtest_local *locals;
    size_t nlocals;
    int local_concurrency;      /* concurrent dispatches (<= 0: 4)         */
    double local_timeout_s;     /* <= 0: the definition's, else 300        */
    const secret *local_secret; /* borrowed; signs the dispatches; NULL: unsigned */
    FILE *rows_out;             /* borrowed; NULL: none. One row per line,
                                   written as each session finishes, and
                                   one {"input_error": {"source",
                                   "message"}} line per input error        */
    int keep_rows;              /* 1: keep the rows for backtest_rows      */
    /* 1: when jobs <= the CPUs this process may run on (sched_getaffinity),
     * job k's two threads (worker, preparer) and its sessions' jail children run on the
     * k-th of them only: each job's handoffs to its children stay on one
     * CPU, no cross-CPU wake-up each (the CLI's default; never the
     * daemon's, whose backtests share the CPUs with live work). */
    int pin;
    int progress; /* 1: a progress bar on stderr             */
} backtest_config;

typedef enum {
    BT_QUEUED,
    BT_RUNNING,
    BT_DONE,
    BT_FAILED,
    BT_CANCELLED,
} backtest_state;
/* "queued" | "running" | "done" | "failed" | "cancelled" (static). */
const char *backtest_state_name(backtest_state s);

/* Validates the configuration and the definitions (JSON shape only; the
 * compile checks run with the backtest), enumerates the sessions and starts
 * the backtest on its own threads (an archive that cannot be read gives a
 * backtest that ends "failed" at once, with the reason). Everything in cfg is copied or only read
 * during this call, except pool, rows_out and local_secret, which must
 * outlive the backtest. NULL with err filled on failure (nothing runs). */
backtest *backtest_start(const backtest_config *cfg, fps_err *err);

/* Sessions finished (evaluated, out of the shard, or malformed) and in all.
 * total is known from the start. */
void backtest_progress(backtest *bt, long *done, long *total);
backtest_state backtest_get_state(backtest *bt);
/* Asks the backtest to stop: running evaluations are killed, it ends
 * "cancelled" and keeps no summary. Returns at once. */
void backtest_cancel(backtest *bt);
/* Waits for the end; returns the final state (failed: err, if not NULL,
 * filled with BT_EFAILED and the reason). */
backtest_state backtest_wait(backtest *bt, fps_err *err);
/* The longest reason backtest_error gives, with its NUL. */
#define BACKTEST_ERROR_MAX 768
/* 1 when the backtest ended "failed", with why in buf (cap bytes,
 * BACKTEST_ERROR_MAX holds any); else 0 and buf "". */
int backtest_error(backtest *bt, char *buf, size_t cap);

/* The summary document (shape above): a new reference once done, NULL
 * before. */
json_t *backtest_summary(backtest *bt);
/* Rows kept (cfg.keep_rows), in the order the sessions were read: those
 * with changed == true when changed_only, of eval_key when not NULL; from
 * `offset`, at most `limit`. *total (if not NULL) gets how many match. A
 * new array; empty before the end or without keep_rows. */
json_t *backtest_rows(backtest *bt, int changed_only, const char *eval_key, size_t offset,
                      size_t limit, size_t *total);
/* Cancels if still running, waits, frees. NULL is a no-op. */
void backtest_free(backtest *bt);

/* The summary of rows read back from `paths` (JSON-lines files of rows, as
 * cfg.rows_out writes them; the shards of one backtest): what the unsharded
 * run prints, its input_errors those of every shard (their input_error
 * lines, each (source, message) once: every shard reports the same
 * definitions that do not compile and the same unreadable transcripts). A
 * new reference, or NULL with err filled (a line that is neither a row nor
 * an input error is named by file and line). */
json_t *backtest_merge(const char *const *paths, size_t npaths, fps_err *err);

/* The summary as the CLI's table (what `--format table` prints). */
void backtest_print_table(const json_t *summary, FILE *out);
/* 1 if the summary has a pass->fail flip or a new error (--fail-on-regression). */
int backtest_regressed(const json_t *summary);

#endif
