/* common/metrics: the process's Prometheus metrics: counters (with labels),
 * gauges and histograms in one process-wide registry, rendered in the text
 * exposition format (version 0.0.4) for GET /metrics.
 *
 *   metrics_inc(METRIC_RUNS, "mode", "python", "status", "succeeded");
 *   metrics_observe(METRIC_EVAL_SECONDS, 0.012, "mode", "python");
 *   metrics_gauge_set(METRIC_OUTBOX_DEPTH, 3);
 *
 * Labels are given as name/value string pairs (at most METRICS_MAX_LABELS
 * pairs); the order of the pairs does not matter. Families listed below are
 * pre-declared with help text and, for histograms, buckets; an unknown name
 * is created on first use (counter/gauge/histogram by the function used,
 * default buckets). A name used with the wrong kind, a bad name or bad label
 * is ignored and logged once: metrics never fail their caller. The number of
 * series is capped (METRICS_MAX_SERIES); beyond it new series are dropped.
 *
 * Persistence: counters survive restarts. The store keeps them
 * (store_metrics_restore seeds the registry through metrics_counter_seed;
 * store_metrics_persist saves what metrics_counters_foreach reports) and the
 * daemon calls those at start, periodically and at exit. The key is the
 * canonical series text `name{a="x",b="y"}` (labels sorted by name; `name`
 * alone when unlabelled); metrics_key_split and metrics_key_join convert it
 * to and from the (name, label text) pair the store's rows hold.
 *
 * Thread-safe (one mutex; updates are a hash lookup and an add). No
 * allocation is owned by callers; all strings passed in are copied. */
#ifndef FPS_METRICS_H
#define FPS_METRICS_H
#include "common/strbuf.h"

#include <stddef.h>

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_SERIES 4096

/* ---- families (names follow Prometheus conventions) ------------------- */
/* counters */
#define METRIC_ASSIGNMENTS_CLAIMED "failproofai_sidecar_assignments_claimed_total"
#define METRIC_RETRIES "failproofai_sidecar_server_retries_total"
#define METRIC_RETRY_BUDGET_EXHAUSTED "failproofai_sidecar_retry_budget_exhausted_total"
#define METRIC_BREAKER_OPENED "failproofai_sidecar_circuit_breaker_opened_total"
/* labels: mode=python|local, status=succeeded|failed|timed_out|cancelled,
 * eval_key=metrics_eval_key(key) */
#define METRIC_RUNS "failproofai_sidecar_runs_total"
/* labels: outcome=selected|skipped, reason=<reason_code or "none"> */
#define METRIC_CONDITIONS "failproofai_sidecar_conditions_total"
#define METRIC_HEARTBEAT_FAILURES "failproofai_sidecar_heartbeat_failures_total"
#define METRIC_LEASES_LOST "failproofai_sidecar_leases_lost_total"
/* labels: call=register|claim|transcript|definitions|plan|heartbeat|result, code=<error code> */
#define METRIC_PROTOCOL_ERRORS "failproofai_sidecar_protocol_errors_total"
/* labels: outcome=committed|idempotent_replay|rejected|retried */
#define METRIC_SUBMISSIONS "failproofai_sidecar_result_submissions_total"
/* labels: call=plan|result */
#define METRIC_REPLAYS "failproofai_sidecar_idempotent_replays_total"
#define METRIC_REGISTRATIONS "failproofai_sidecar_registrations_total"
#define METRIC_TRANSCRIPTS_TOO_LARGE "failproofai_sidecar_transcripts_too_large_total"
/* labels: operation=<the worker's store operation>, status=full|readonly|busy|... */
#define METRIC_STORE_FAILURES "failproofai_sidecar_store_operation_failures_total"
/* labels: outcome=succeeded|failed|timed_out|cancelled, reason=<error_code or "none">,
 * evaluator=<registered name> */
#define METRIC_LOCAL_DISPATCHES "failproofai_sidecar_local_dispatches_total"
/* labels: code=<http status class, "2xx".."5xx"> */
#define METRIC_ADMIN_REQUESTS "failproofai_sidecar_admin_requests_total"
#define METRIC_ADMIN_CACHE_HITS "failproofai_sidecar_admin_cache_hits_total"
#define METRIC_ADMIN_CACHE_MISSES "failproofai_sidecar_admin_cache_misses_total"
/* the transcript archive (store/archive.h); failures labels:
 * reason=queue_full|disk_full|readonly|busy|corrupt|too_large|memory|error */
#define METRIC_ARCHIVE_ARCHIVED "failproofai_sidecar_archive_archived_total"
#define METRIC_ARCHIVE_EVICTIONS "failproofai_sidecar_archive_evictions_total"
#define METRIC_ARCHIVE_FAILURES "failproofai_sidecar_archive_failures_total"
/* gauges */
#define METRIC_ARCHIVE_BYTES "failproofai_sidecar_archive_bytes"
#define METRIC_ARCHIVE_ENTRIES "failproofai_sidecar_archive_entries"
#define METRIC_ACTIVE_ASSIGNMENTS "failproofai_sidecar_active_assignments"
#define METRIC_ACTIVE_RUNS "failproofai_sidecar_active_runs"
#define METRIC_ACTIVE_SANDBOXES "failproofai_sidecar_active_sandboxes"
#define METRIC_OUTBOX_DEPTH "failproofai_sidecar_outbox_depth"
#define METRIC_MEMORY_BUDGET "failproofai_sidecar_memory_budget_bytes"
#define METRIC_MEMORY_TREE "failproofai_sidecar_memory_tree_bytes"
#define METRIC_MEMORY_ACCOUNTED "failproofai_sidecar_memory_accounted_bytes"
#define METRIC_MEMORY_WAITING "failproofai_sidecar_memory_waiting"
#define METRIC_MEMORY_RERUNS "failproofai_sidecar_memory_reruns_total"
#define METRIC_MEMORY_REFUSED "failproofai_sidecar_memory_refused_total"
#define METRIC_BREAKER_OPEN "failproofai_sidecar_circuit_breaker_open"
#define METRIC_LOCAL_EVALUATORS "failproofai_sidecar_local_evaluators"
#define METRIC_LOCAL_DEFINITIONS "failproofai_sidecar_local_definitions"
#define METRIC_READY "failproofai_sidecar_ready"
#define METRIC_DRAINING "failproofai_sidecar_draining"
#define METRIC_UPTIME "failproofai_sidecar_uptime_seconds"
/* labels: version; always 1 */
#define METRIC_BUILD_INFO "failproofai_sidecar_build_info"
/* the process (read from /proc at each render; standard names) */
#define METRIC_PROCESS_CPU "process_cpu_seconds_total"
#define METRIC_PROCESS_RSS "process_resident_memory_bytes"
#define METRIC_PROCESS_FDS "process_open_fds"
#define METRIC_PROCESS_START "process_start_time_seconds"
/* histograms (seconds) */
/* labels: mode=python|local|condition, eval_key=metrics_eval_key(key) (runs only) */
#define METRIC_EVAL_SECONDS "failproofai_sidecar_evaluation_duration_seconds"
#define METRIC_SANDBOX_START_SECONDS "failproofai_sidecar_sandbox_start_seconds"
/* labels: call=register|claim|transcript|definitions|plan|heartbeat|result */
#define METRIC_SERVER_REQUEST_SECONDS "failproofai_sidecar_server_request_duration_seconds"
/* labels: route (a route template such as "/v1/runs/{id}") */
#define METRIC_ADMIN_REQUEST_SECONDS "failproofai_sidecar_admin_request_duration_seconds"

/* ---- updates ----------------------------------------------------------- */
/* `labels` is a NULL-terminated array of name, value, name, value, ... */
void metrics_counter_add(const char *name, double delta, const char *const *labels);
void metrics_gauge_set_l(const char *name, double value, const char *const *labels);
void metrics_gauge_add_l(const char *name, double delta, const char *const *labels);
void metrics_histogram_observe(const char *name, double value, const char *const *labels);

#define METRICS_LABELS_(...) ((const char *const[]){__VA_ARGS__ __VA_OPT__(, ) NULL})
/* metrics_inc(name, "k", "v", ...) adds 1; metrics_add(name, n, "k", "v", ...) adds n. */
#define metrics_inc(name, ...) metrics_counter_add((name), 1.0, METRICS_LABELS_(__VA_ARGS__))
#define metrics_add(name, n, ...) metrics_counter_add((name), (n), METRICS_LABELS_(__VA_ARGS__))
#define metrics_gauge_set(name, v, ...)                                                            \
    metrics_gauge_set_l((name), (v), METRICS_LABELS_(__VA_ARGS__))
#define metrics_gauge_add(name, v, ...)                                                            \
    metrics_gauge_add_l((name), (v), METRICS_LABELS_(__VA_ARGS__))
#define metrics_observe(name, v, ...)                                                              \
    metrics_histogram_observe((name), (v), METRICS_LABELS_(__VA_ARGS__))

/* The eval_key label value for `key`: the key itself for the first
 * METRICS_EVAL_KEY_CAP distinct keys this process has seen, "other" after
 * that (bounded cardinality; the cap is documented in the README). Borrowed
 * static text or `key`. */
#define METRICS_EVAL_KEY_CAP 100
const char *metrics_eval_key(const char *key);

/* Sum of every series of a counter or gauge family (0 if none). */
double metrics_family_total(const char *name);

/* Current value of a counter or gauge series (0 if absent); for tests and
 * /v1/status. */
double metrics_value(const char *name, const char *const *labels);

/* ---- exposition -------------------------------------------------------- */
/* Appends the whole registry in the Prometheus text format (HELP/TYPE lines,
 * families sorted by name, series in creation order). A declared family with
 * no series yet is rendered as one unlabelled zero sample, so every family
 * exists from the first scrape (absent()/increase() alerts work). The
 * process_* families are refreshed from /proc first. */
void metrics_render(strbuf *out);
/* Content-Type of metrics_render's output. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- persistence of counters ------------------------------------------ */
/* Calls fn for every counter series with its canonical key; stops early and
 * returns fn's value if fn returns non-zero, else 0. Runs under the
 * registry lock: fn must not call back into metrics_*. */
typedef int (*metrics_counter_fn)(const char *key, double value, void *ud);
int metrics_counters_foreach(metrics_counter_fn fn, void *ud);
/* Sets a counter series from a saved canonical key (creating it); returns 0,
 * or -1 if the key does not parse or names a gauge/histogram family. */
int metrics_counter_seed(const char *key, double value);

/* A canonical key's family name and label text (between the braces, "" when
 * unlabelled), as spans into key (borrowed). Returns 0, or -1 if key is
 * empty, starts with a brace or opens one it does not close at its end. */
int metrics_key_split(const char *key, size_t *name_len, const char **labels, size_t *labels_len);
/* Writes the canonical key of name and label text ("name{labels}", or "name"
 * when labels is NULL or "") into out. Returns 0, or -1 if it does not fit
 * in cap bytes (out is then ""). */
int metrics_key_join(char *out, size_t cap, const char *name, const char *labels);

/* Clears every series (tests). Families stay declared. */
void metrics_reset(void);

#endif
