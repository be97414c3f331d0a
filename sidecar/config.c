/* sidecar/config: see config.h. */
#include "sidecar/config.h"
#include "common/cgroup.h"
#include "common/loopback.h"
#include "api/api.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(run_config, f)

static const cli_opt run_opts[] = {
    {"--server", "FAILPROOFAI_EVALUATOR_URL", CLI_STR, OFF(server_url), "URL",
     "FailproofAI server origin (https unless loopback)", 0, 0},
    {"--token-file", "FAILPROOFAI_EVALUATOR_TOKEN_FILE", CLI_STR, OFF(token_file), "PATH",
     "file holding the bearer token (else FAILPROOFAI_EVALUATOR_TOKEN)", 0, 0},
    {"--worker-id", "FAILPROOFAI_EVALUATOR_WORKER_ID", CLI_STR, OFF(worker_id), "ID",
     "worker id (default <hostname>-<pid>)", 0, 0},
    {"--concurrency", "FAILPROOFAI_EVALUATOR_CONCURRENCY", CLI_INT, OFF(concurrency), "N",
     "assignments processed at once (1..32, default 4)", 1, 32},
    {"--listen", "FAILPROOFAI_SIDECAR_LISTEN", CLI_STR, OFF(listen), "HOST:PORT",
     "admin API address (default 127.0.0.1:8787)", 0, 0},
    {"--db", "FAILPROOFAI_SIDECAR_DB", CLI_STR, OFF(db_path), "PATH",
     "SQLite database (default ./failproofai-sidecar.db)", 0, 0},
    {"--request-timeout", "FAILPROOFAI_EVALUATOR_REQUEST_TIMEOUT_SECONDS", CLI_DOUBLE,
     OFF(request_timeout), "S", "server request timeout in seconds (default 30)", 0.1, 600},
    {"--drain-timeout", "FAILPROOFAI_EVALUATOR_DRAIN_TIMEOUT_SECONDS", CLI_DOUBLE,
     OFF(drain_timeout), "S", "graceful shutdown budget in seconds (default 60)", 0, 3600},
    {"--max-sandboxes", "FAILPROOFAI_SIDECAR_MAX_SANDBOXES", CLI_INT, OFF(max_sandboxes), "N",
     "concurrent sandbox processes (default 4)", 1, 256},
    {"--sandbox-memory-mb", "FAILPROOFAI_SIDECAR_SANDBOX_MEMORY_MB", CLI_INT,
     OFF(sandbox_memory_mb), "N", "address-space limit per sandbox (default 512)", 32, 65536},
    {"--log-level", "FAILPROOFAI_SIDECAR_LOG_LEVEL", CLI_STR, OFF(log_level), "LEVEL",
     "debug|info|warn|error (default info)", 0, 0},
    {"--ca-bundle", "FAILPROOFAI_SIDECAR_CA_BUNDLE", CLI_STR, OFF(ca_bundle), "PATH",
     "CA certificates for the server's TLS (default: system store)", 0, 0},
    {"--admin-host", "FAILPROOFAI_SIDECAR_ADMIN_HOSTS", CLI_LIST, OFF(admin_hosts), "NAME",
     "extra Host name the admin API accepts (repeatable)", 0, 0},
    {"--admin-token-file", "FAILPROOFAI_SIDECAR_ADMIN_TOKEN_FILE", CLI_STR, OFF(admin_token_file),
     "PATH", "operator token (drain, /v1/evaluate, any registration); default: generated", 0, 0},
    {"--registration-token-file", "FAILPROOFAI_SIDECAR_REGISTRATION_TOKEN_FILE", CLI_STR,
     OFF(registration_token_file), "PATH",
     "token local evaluators present to register; default: generated", 0, 0},
    {"--insecure-open-admin", "FAILPROOFAI_SIDECAR_INSECURE_OPEN_ADMIN", CLI_FLAG,
     OFF(insecure_open_admin), NULL,
     "no tokens on loopback: any local process may drain, evaluate and register", 0, 0},
    {"--playground-sandboxes", "FAILPROOFAI_SIDECAR_PLAYGROUND_SANDBOXES", CLI_INT,
     OFF(playground_sandboxes), "N",
     "of --max-sandboxes, at most N for POST /v1/evaluate (default 1)", 1, 256},
    {"--playground-queue", "FAILPROOFAI_SIDECAR_PLAYGROUND_QUEUE", CLI_INT, OFF(playground_queue),
     "N", "POST /v1/evaluate requests that may wait for those slots; more get 429 (default 4)", 0,
     64},
    {"--allow-remote-admin", "FAILPROOFAI_SIDECAR_ALLOW_REMOTE_ADMIN", CLI_FLAG,
     OFF(allow_remote_admin), NULL, "permit a non-loopback --listen (needs the admin token)", 0, 0},
    {"--allow-evaluator-host", "FAILPROOFAI_SIDECAR_ALLOW_EVALUATOR_HOSTS", CLI_LIST,
     OFF(evaluator_hosts), "HOST", "non-loopback host local evaluators may use (repeatable)", 0, 0},
    {"--retention-hours", "FAILPROOFAI_SIDECAR_RETENTION_HOURS", CLI_DOUBLE, OFF(retention_hours),
     "H", "keep finished history this long (default 168)", 0, 87600},
    {"--retention-runs", "FAILPROOFAI_SIDECAR_RETENTION_RUNS", CLI_INT, OFF(retention_runs), "N",
     "keep at most this many finished runs (default 200000)", 0, 100000000},
    {"--archive-max-mb", "FAILPROOFAI_SIDECAR_ARCHIVE_MAX_MB", CLI_INT, OFF(archive_max_mb), "N",
     "keep the transcripts evaluated in <db>.archive, at most N MiB (default 0: off)", 0, 1048576},
    {"--archive-max-age-hours", "FAILPROOFAI_SIDECAR_ARCHIVE_MAX_AGE_HOURS", CLI_DOUBLE,
     OFF(archive_max_age_hours), "H", "archived transcripts older than this go (default 168)", 0,
     87600},
    {"--archive-prune-seconds", "FAILPROOFAI_SIDECAR_ARCHIVE_PRUNE_SECONDS", CLI_DOUBLE,
     OFF(archive_prune_seconds), "S",
     "how often archived transcripts past the age bound are evicted, inserts or not"
     " (default 60)",
     0.1, 86400},
    {"--backtest-sandboxes", "FAILPROOFAI_SIDECAR_BACKTEST_SANDBOXES", CLI_INT,
     OFF(backtest_sandboxes), "N",
     "sandbox slots a backtest of the admin API may use while no live evaluation waits"
     " (default 1)",
     1, 256},
    {"--memory-limit-mb", "FAILPROOFAI_SIDECAR_MEMORY_LIMIT_MB", CLI_INT, OFF(memory_limit_mb), "N",
     "memory budget of the whole process tree (default 90% of the cgroup's limit, none "
     "without one; 0: none)",
     0, 16777216},
    {"--sandbox-reserve-mb", "FAILPROOFAI_SIDECAR_SANDBOX_RESERVE_MB", CLI_INT,
     OFF(sandbox_reserve_mb), "N",
     "memory a sandbox is admitted against within the budget (default 64)", 1, 65536},
    {"--recent-max-mb", "FAILPROOFAI_SIDECAR_RECENT_MAX_MB", CLI_INT, OFF(recent_max_mb), "N",
     "session images of recent assignments kept for POST /v1/evaluate's assignment_id, at most N "
     "MiB (default 32; 0: none)",
     0, 4096},
};

static const cli_command run_command = {
    "run", "Run the evaluation sidecar daemon against a FailproofAI server.", run_opts,
    sizeof run_opts / sizeof run_opts[0]};

void config_defaults(run_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->concurrency = 4;
    cfg->listen = "127.0.0.1:8787";
    cfg->db_path = "failproofai-sidecar.db";
    cfg->request_timeout = 30;
    cfg->drain_timeout = 60;
    cfg->max_sandboxes = 4;
    cfg->playground_sandboxes = 1;
    cfg->playground_queue = 4;
    cfg->sandbox_memory_mb = 512;
    cfg->log_level = "info";
    cfg->retention_hours = 168;
    cfg->retention_runs = 200000;
    cfg->archive_max_age_hours = 168;
    cfg->archive_prune_seconds = 60;
    cfg->backtest_sandboxes = 1;
    cfg->memory_limit_mb = -1;
    cfg->sandbox_reserve_mb = 64;
    cfg->recent_max_mb = 32;
    /* The token comes only from the environment or a file, never a flag (argv
     * is world-readable in /proc). */
    cfg->token = getenv("FAILPROOFAI_EVALUATOR_TOKEN");
}

const cli_command *config_run_command(void)
{
    return &run_command;
}

/* Host part of a URL ("https://h:1/x" -> "h"), copied into out. */
static int url_host(const char *url, char *out, size_t cap)
{
    const char *p = strstr(url, "://");
    if (p == NULL) return -1;
    p += 3;
    size_t n;
    if (*p == '[') {
        const char *e = strchr(p, ']');
        if (e == NULL) return -1;
        p++;
        n = (size_t)(e - p);
    } else {
        n = strcspn(p, ":/?#");
    }
    if (n == 0 || n >= cap) return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

int config_validate(const run_config *cfg, fps_err *err)
{
    char host[256];
    if (cfg->server_url == NULL || *cfg->server_url == '\0') {
        fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                    "run: no server URL (use --server or FAILPROOFAI_EVALUATOR_URL)");
        return -1;
    }
    if (url_host(cfg->server_url, host, sizeof host) != 0 ||
        (strncmp(cfg->server_url, "https://", 8) != 0 &&
         strncmp(cfg->server_url, "http://", 7) != 0)) {
        fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                    "run: --server '%s' is not an http(s) URL", cfg->server_url);
        return -1;
    }
    if (strncmp(cfg->server_url, "http://", 7) == 0 && !loopback_host(host)) {
        fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                    "run: --server must use https for non-loopback host '%s' (the bearer token "
                    "is never sent in cleartext)",
                    host);
        return -1;
    }
    if (cfg->token == NULL && cfg->token_file == NULL) {
        fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                    "run: no token (set FAILPROOFAI_EVALUATOR_TOKEN or use --token-file)");
        return -1;
    }
    if (cfg->worker_id != NULL) {
        size_t n = strlen(cfg->worker_id);
        if (n == 0 || n > 128) {
            fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                        "run: --worker-id must be 1..128 bytes");
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)cfg->worker_id[i];
            if (c < 0x20 || c == 0x7f) {
                fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                            "run: --worker-id contains a control character");
                return -1;
            }
        }
    }
    log_level lvl;
    if (log_parse_level(cfg->log_level, &lvl) != 0) {
        fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                    "run: --log-level '%s' is not one of debug|info|warn|error", cfg->log_level);
        return -1;
    }
    char b[256];
    fps_err perr;
    if (api_listen_split(cfg->listen, b, sizeof b, NULL, &perr) != 0) {
        fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                    "run: --listen '%s' is not HOST:PORT", cfg->listen);
        return -1;
    }
    if (!loopback_host(b)) {
        if (!cfg->allow_remote_admin) {
            fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                        "run: --listen %s is not loopback; pass --allow-remote-admin and "
                        "--admin-token-file to expose the admin API",
                        cfg->listen);
            return -1;
        }
        if (cfg->admin_token_file == NULL || cfg->insecure_open_admin) {
            fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                        "run: a non-loopback --listen requires --admin-token-file (and no "
                        "--insecure-open-admin)");
            return -1;
        }
    }
    return 0;
}

void config_free(run_config *cfg)
{
    cli_list_free(&cfg->admin_hosts);
    cli_list_free(&cfg->evaluator_hosts);
}

int config_memory_budget(const run_config *cfg, unsigned long long *bytes, char *source,
                         size_t scap, fps_err *err)
{
    *bytes = 0;
    if (cfg->memory_limit_mb >= 0) {
        *bytes = (unsigned long long)cfg->memory_limit_mb << 20;
        if (source)
            snprintf(source, scap, "%s", cfg->memory_limit_mb ? "--memory-limit-mb" : "none");
        return 0;
    }
    uint64_t lim = 0;
    char file[512] = "";
    int rc = cgroup_memory_limit("", &lim, file, sizeof file, err);
    if (rc == CGROUP_EINVALID) return -1;
    if (rc == CGROUP_LIMIT) {
        *bytes = (unsigned long long)lim / 10 * 9;
        if (source) snprintf(source, scap, "90%% of %s", file);
        return 0;
    }
    if (source) snprintf(source, scap, "none");
    return 0;
}

int config_check_budget(const run_config *cfg, unsigned long long budget, unsigned long long base,
                        fps_err *err)
{
    unsigned long long reserve = (unsigned long long)cfg->sandbox_reserve_mb << 20;
    if (budget == 0 || budget >= base + reserve) return 0;
    fps_err_set(err, CONFIG_EINVALID, 0, "invalid_config",
                "run: the memory budget (%llu MiB) is below the process tree at start (%llu MiB) "
                "plus one sandbox reservation (--sandbox-reserve-mb %ld): give "
                "--memory-limit-mb at least %llu",
                budget >> 20, (base + (1 << 20) - 1) >> 20, cfg->sandbox_reserve_mb,
                (base + reserve + (1 << 20) - 1) >> 20);
    return -1;
}
