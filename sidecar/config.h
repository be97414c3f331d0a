/* sidecar/config: the `run` daemon's configuration: defaults, environment
 * variables (the reference SDK's FAILPROOFAI_EVALUATOR_* names plus
 * FAILPROOFAI_SIDECAR_* for what only the sidecar has), flags; and the
 * validation that turns bad configuration into one clear line. */
#ifndef FPS_CONFIG_H
#define FPS_CONFIG_H
#include "common/cli.h"
#include "common/err.h"
#include "common/log.h"
#include <stddef.h>

typedef struct {
    const char *server_url;              /* --server / FAILPROOFAI_EVALUATOR_URL */
    const char *token;                   /* FAILPROOFAI_EVALUATOR_TOKEN (env only, never a flag) */
    const char *token_file;              /* --token-file */
    const char *worker_id;               /* --worker-id; default <hostname>-<pid> */
    long concurrency;                    /* --concurrency, 1..32 */
    const char *listen;                  /* --listen HOST:PORT (admin) */
    const char *db_path;                 /* --db */
    double request_timeout;              /* --request-timeout seconds */
    double drain_timeout;                /* --drain-timeout seconds */
    long max_sandboxes;                  /* --max-sandboxes */
    long sandbox_memory_mb;              /* --sandbox-memory-mb */
    const char *log_level;               /* --log-level */
    const char *ca_bundle;               /* --ca-bundle */
    cli_list admin_hosts;                /* --admin-host (extra accepted Host names) */
    const char *admin_token_file;        /* --admin-token-file */
    int allow_remote_admin;              /* --allow-remote-admin */
    cli_list evaluator_hosts;            /* --allow-evaluator-host */
    const char *registration_token_file; /* --registration-token-file */
    int insecure_open_admin;             /* --insecure-open-admin */
    long playground_sandboxes;           /* --playground-sandboxes */
    long playground_queue;               /* --playground-queue */
    double retention_hours;              /* --retention-hours */
    long retention_runs;                 /* --retention-runs */
    long archive_max_mb;                 /* --archive-max-mb (0: no archive) */
    double archive_max_age_hours;        /* --archive-max-age-hours */
    double archive_prune_seconds;        /* --archive-prune-seconds: the age bound's timer */
    long backtest_sandboxes;             /* --backtest-sandboxes */
    long memory_limit_mb;                /* --memory-limit-mb (-1: from the cgroup; 0: none) */
    long sandbox_reserve_mb;             /* --sandbox-reserve-mb */
    long recent_max_mb;                  /* --recent-max-mb (0: no recent ring) */
    /* Called once the admin API listens, with the port it bound (the one
     * the kernel chose for --listen HOST:0); NULL: nobody to tell. */
    void (*on_listening)(int port, void *ud);
    void *on_listening_ud; /* borrowed, passed to on_listening */
} run_config;

/* Fills `cfg` with the defaults. */
void config_defaults(run_config *cfg);
/* The option table of `run` (static storage). */
const cli_command *config_run_command(void);
/* Checks cross-field rules (URL scheme, listen address, ...). Returns 0, or -1
 * with a one-line message in err. */
enum { CONFIG_EINVALID = -1 }; /* fps_err name "invalid_config" */
int config_validate(const run_config *cfg, fps_err *err);
void config_free(run_config *cfg);

/* The memory budget of the whole process tree, in bytes (0: none):
 * --memory-limit-mb when given (0 turns it off), else 90 % of the
 * container's cgroup limit (common/cgroup.h), else none. `source` (may be
 * NULL) gets where it came from: "--memory-limit-mb", the cgroup file, or
 * "none". -1 with err when the cgroup's limit file is not a limit. */
int config_memory_budget(const run_config *cfg, unsigned long long *bytes, char *source,
                         size_t scap, fps_err *err);
/* The smallest budget `run` accepts: the tree measured at start (`base`,
 * bytes) plus one sandbox reservation. 0, or -1 with a one-line message. */
int config_check_budget(const run_config *cfg, unsigned long long budget, unsigned long long base,
                        fps_err *err);

#endif
