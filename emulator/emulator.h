/* emulator/: the local Evaluator v2 cloud emulator (SPEC §7): the server side
 * of the Evaluator v2 contract (tests/fixtures/evaluator-v2.json), for the demo, the tests and
 * users without a FailproofAI account.
 *
 * Two ways in: the `emulator` subcommand (emulator_main), and a small C API
 * so other code (the `demo` subcommand, tests) can run one in-process:
 *
 *   emulator_config cfg;
 *   emulator_config_defaults(&cfg);
 *   cfg.listen = "127.0.0.1:0";
 *   emulator *emu;
 *   if (emulator_start(&cfg, &emu, &err) != 0) ...;
 *   int port = emulator_port(emu);
 *   emulator_add_session(emu, transcript_json, id, &err);
 *   emulator_stop(emu);
 */
#ifndef FPS_EMULATOR_H
#define FPS_EMULATOR_H
#include "common/cli.h"
#include "common/err.h"
#include <stddef.h>

typedef struct emulator emulator;

typedef struct {
    const char *listen;           /* HOST:PORT; port 0 = ephemeral (default 127.0.0.1:8790) */
    cli_list tokens;              /* "TOKEN[:customer|managed|disabled]", each one evaluator
                                     instance; empty = one customer token "emulator-token".
                                     Borrowed. */
    long sessions;                /* generated sessions at start */
    const char *transcripts_dir;  /* load *.json transcripts from here, or NULL */
    const char *definitions_file; /* managed definitions (JSON array), or NULL */
    const char *definitions_json; /* same, as text (API users); used if no file */
    int sample_definitions;       /* subcommand: --sample-definitions */
    cli_list disabled;            /* eval keys sent in disabled_definitions. Borrowed. */
    long lease_seconds;           /* default 120 */
    long heartbeat_seconds;       /* default 30 */
    long poll_seconds;            /* default 10 */
    long max_attempts;            /* default 5 */
    long claim_limit;             /* 0 = the worker's max_concurrency */
    long seed;                    /* generated sessions and fault rolls */
    double fault_5xx;             /* probability of a retryable 500 internal_error */
    double fault_drop;            /* probability of commit-then-drop-the-connection */
    long fault_latency_ms;        /* added to every protocol response */
    double fault_lease_loss;      /* probability a fenced call loses its lease */
    long max_transcript_bytes;    /* 413 above this (default 26214400) */
    long threads;                 /* HTTP worker threads (default 2) */
    const char *log_level;        /* subcommand only */
} emulator_config;

/* `failproofai-sidecar emulator [flags]`; returns the exit status. */
int emulator_main(int argc, char **argv);

void emulator_config_defaults(emulator_config *cfg);

/* The fps_err code of every failure below and of the emulator's request
 * validators (name "invalid"): a configuration, transcript or request the
 * emulator refuses, or a server it cannot start. */
enum { EMU_EINVALID = -1 };

/* Starts a server in background threads. Returns 0 and sets *out, or -1 with
 * err filled. `cfg` is copied; its strings are borrowed only
 * during the call. */
int emulator_start(const emulator_config *cfg, emulator **out, fps_err *err);
/* The bound TCP port. */
int emulator_port(const emulator *e);
/* Adds one session from a transcript JSON (the contract's transcript shape;
 * missing metadata is filled in). On success returns 0 and writes the new
 * assignment id (37 bytes) to assignment_id if non-NULL. */
int emulator_add_session(emulator *e, const char *transcript_json, char *assignment_id,
                         fps_err *err);
/* Adds n generated sessions. Returns 0. */
int emulator_generate_sessions(emulator *e, long n);
/* The contract's sample-style managed definitions (a JSON array, static
 * storage): a few realistic expressions in the sandbox language. */
const char *emulator_sample_definitions(void);
/* The inspection API's state (GET /emulator/v1/state) as compact JSON;
 * malloc'd, the caller frees. */
char *emulator_state_json(emulator *e);
/* Stops the server and frees everything. NULL is a no-op. */
void emulator_stop(emulator *e);

/* Canonical JSON exactly as Python's json.dumps(v, ensure_ascii=False,
 * sort_keys=True, separators=(",", ":")): appended to *out (malloc'd, caller
 * frees). Returns 0, or -1 for values Python would refuse (NaN/Infinity). */
struct json_t;
int emulator_canonical_json(const struct json_t *v, char **out, size_t *len);
/* catalog_revision of a catalog (a JSON array of {eval_key, display_name,
 * eval_version, result_kind, labels}): "sha256:" + hex sha256 of the
 * canonical JSON of the entries sorted by eval_key, each reduced to those
 * five keys, labels sorted when sort_labels. out needs 72 bytes. */
int emulator_catalog_revision(const struct json_t *catalog, int sort_labels, char out[72]);
/* "sha256:" + sha256((condition_source or "") + "\0" + evaluator_source). */
void emulator_source_checksum(const char *condition_source, const char *evaluator_source,
                              char out[72]);

#endif
