/* sidecar/cmd_backtest: `backtest` (SPEC §9): runs the candidate
 * definitions over stored sessions through the backtest engine
 * (sidecar/backtest/backtest.h) and prints its summary; `--merge` prints
 * the summary of shards' rows. Exit codes: 0 when it ran, 1 with
 * --fail-on-regression when a pass->fail flip or a new error occurred (or
 * when the jail cannot start), 2 on usage errors. */
#include "common/cli.h"
#include "common/log.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/backtest/backtest.h"
#include "sidecar/commands.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *definitions, *baseline, *db, *since, *local_secret_file, *shard, *out, *format;
    cli_list sessions, locals, merge;
    long limit, local_concurrency, jobs;
    double local_timeout;
    int fail_on_regression, no_pin;
} bt_cli;

#define OFF(f) offsetof(bt_cli, f)
static const cli_opt opts[] = {
    {"--definitions", NULL, CLI_STR, OFF(definitions), "FILE",
     "candidate definitions (JSON array, the emulator's --definitions format)", 0, 0},
    {"--baseline", NULL, CLI_STR, OFF(baseline), "FILE|production",
     "baseline definitions, or the live runs' stored results", 0, 0},
    {"--sessions", NULL, CLI_LIST, OFF(sessions), "PATH",
     "a transcript file, a directory of them or a JSON-lines file (repeatable)", 0, 0},
    {"--db", NULL, CLI_STR, OFF(db), "PATH", "state database whose archive holds the sessions", 0,
     0},
    {"--since", NULL, CLI_STR, OFF(since), "TIME", "archive entries from this RFC 3339 time", 0, 0},
    {"--limit", NULL, CLI_INT, OFF(limit), "N", "at most N archive entries", 1, 1e9},
    {"--local", NULL, CLI_LIST, OFF(locals), "EVAL_KEY=URL",
     "send that key's runs to a local evaluator endpoint (repeatable)", 0, 0},
    {"--local-concurrency", NULL, CLI_INT, OFF(local_concurrency), "N",
     "concurrent local dispatches (default 4)", 1, 256},
    {"--local-timeout", NULL, CLI_DOUBLE, OFF(local_timeout), "S",
     "local run timeout (default: the definition's, else 300)", 0.001, 3600},
    {"--local-secret-file", NULL, CLI_STR, OFF(local_secret_file), "PATH",
     "key that signs the local dispatches", 0, 0},
    {"--jobs", NULL, CLI_INT, OFF(jobs), "N", "sessions evaluated at once (default 1)", 1, 64},
    {"--no-pin", NULL, CLI_FLAG, OFF(no_pin), NULL,
     "do not keep each job and its sandboxes on a CPU of its own (the default when --jobs is at "
     "most the CPUs allowed)",
     0, 0},
    {"--shard", NULL, CLI_STR, OFF(shard), "K/N", "only this shard of the sessions", 0, 0},
    {"--merge", NULL, CLI_LIST, OFF(merge), "ROWS.jsonl",
     "print the summary of shards' rows (repeatable)", 0, 0},
    {"--out", NULL, CLI_STR, OFF(out), "FILE.jsonl", "one JSON line per (session, eval_key)", 0, 0},
    {"--format", NULL, CLI_STR, OFF(format), "table|json", "summary format (default table)", 0, 0},
    {"--fail-on-regression", NULL, CLI_FLAG, OFF(fail_on_regression), NULL,
     "exit 1 on any pass->fail flip or new error", 0, 0},
};
static const cli_command command = {"backtest",
                                    "Run candidate definitions over stored sessions and compare.",
                                    opts, sizeof opts / sizeof opts[0]};

static int usage(const char *msg)
{
    fprintf(stderr,
            "failproofai-sidecar backtest: %s (try 'failproofai-sidecar backtest --help')\n", msg);
    return 2;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (nb == NULL) free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

static int print_summary(json_t *s, const bt_cli *c)
{
    if (!strcmp(c->format, "json")) {
        char *t = json_dumps(s, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", t);
        free(t);
    } else {
        backtest_print_table(s, stdout);
    }
    fflush(stdout);
    return c->fail_on_regression && backtest_regressed(s) ? 1 : 0;
}

int cmd_backtest(int argc, char **argv)
{
    bt_cli c = {.format = "table"};
    fps_err err;
    int rc = cli_parse(&command, argc, argv, &c, stdout, &err);
    int status = 2;
    char *defs = NULL, *base = NULL;
    sbx_pool *pool = NULL;
    backtest *bt = NULL;
    FILE *out = NULL;
    secret *key = NULL;
    char *local_keys_all[64] = {0};
    size_t nlocal_keys = 0;
    if (rc == CLI_HELP) {
        status = 0;
        goto done;
    }
    if (rc != CLI_OK) {
        fprintf(stderr, "failproofai-sidecar: %s\n", err.msg);
        goto done;
    }
    if (strcmp(c.format, "table") && strcmp(c.format, "json")) {
        status = usage("--format must be table or json");
        goto done;
    }
    if (c.merge.len > 0) {
        json_t *s = backtest_merge(c.merge.items, c.merge.len, &err);
        if (s == NULL) {
            fprintf(stderr, "failproofai-sidecar backtest: %s\n", err.msg);
            goto done;
        }
        status = print_summary(s, &c);
        json_decref(s);
        goto done;
    }
    if (c.definitions == NULL) {
        status = usage("--definitions is required");
        goto done;
    }
    int k = 0, n = 0;
    if (c.shard) {
        char tail;
        if (sscanf(c.shard, "%d/%d%c", &k, &n, &tail) != 2 || n < 1 || k < 0 || k >= n) {
            status = usage("--shard must be K/N with 0 <= K < N");
            goto done;
        }
    }
    backtest_local locals[64];
    char *local_keys[64] = {0};
    if (c.locals.len > 64) {
        status = usage("at most 64 --local");
        goto done;
    }
    for (size_t i = 0; i < c.locals.len; i++) {
        const char *eq = strchr(c.locals.items[i], '=');
        if (eq == NULL || eq == c.locals.items[i]) {
            for (size_t j = 0; j < i; j++)
                free(local_keys[j]);
            status = usage("--local takes EVAL_KEY=URL");
            goto done;
        }
        local_keys[i] = strndup(c.locals.items[i], (size_t)(eq - c.locals.items[i]));
        locals[i] = (backtest_local){local_keys[i], eq + 1};
    }
    nlocal_keys = c.locals.len;
    memcpy(local_keys_all, local_keys, sizeof local_keys);
    if (c.local_secret_file && (key = secret_from_file(c.local_secret_file, &err)) == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: %s\n", err.msg);
        goto done;
    }
    if ((defs = read_all(c.definitions)) == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: cannot read %s: %s\n", c.definitions,
                strerror(errno));
        goto done;
    }
    if (c.baseline && strcmp(c.baseline, "production") && (base = read_all(c.baseline)) == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: cannot read %s: %s\n", c.baseline,
                strerror(errno));
        goto done;
    }
    if (c.out && (out = fopen(c.out, "w")) == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: cannot write %s: %s\n", c.out,
                strerror(errno));
        goto done;
    }
    if (log_get_level() < LOG_WARN) log_set_level(LOG_WARN);
    int jobs = c.jobs > 0 ? (int)c.jobs : 1;
    sbx_config sc = {.max_sandboxes = jobs, .memory_mb = 512};
    fps_err pe;
    pool = sbx_pool_new(&sc, &pe);
    if (pool == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: %s\n", pe.msg);
        status = 1;
        goto done;
    }
    backtest_config bc = {.pool = pool,
                          .jobs = jobs,
                          .definitions = defs,
                          /* from the archive, the default baseline is production */
                          .baseline = base                          ? base
                                      : c.baseline                  ? c.baseline
                                      : c.sessions.len == 0 && c.db ? "production"
                                                                    : NULL,
                          .paths = c.sessions.items,
                          .npaths = c.sessions.len,
                          .db_path = c.db,
                          .since = c.since,
                          .limit = c.limit,
                          .shard_k = k,
                          .shard_n = n,
                          .rows_out = out,
                          .locals = locals,
                          .nlocals = c.locals.len,
                          .local_concurrency = (int)c.local_concurrency,
                          .local_timeout_s = c.local_timeout,
                          .local_secret = key,
                          .progress = isatty(STDERR_FILENO),
                          .pin = !c.no_pin};
    bt = backtest_start(&bc, &err);
    if (bt == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: %s\n", err.msg);
        goto done;
    }
    if (backtest_wait(bt, &err) == BT_FAILED) {
        fprintf(stderr, "failproofai-sidecar backtest: %s\n", err.msg);
        goto done; /* 2, as when the sessions cannot be read at the start */
    }
    json_t *s = backtest_summary(bt);
    if (s == NULL) {
        fprintf(stderr, "failproofai-sidecar backtest: the backtest did not finish\n");
        status = 1;
        goto done;
    }
    status = print_summary(s, &c);
    json_decref(s);
done:
    backtest_free(bt);
    secret_free(key);
    for (size_t i = 0; i < nlocal_keys; i++)
        free(local_keys_all[i]);
    if (out) fclose(out);
    sbx_pool_free(pool);
    free(defs);
    free(base);
    cli_list_free(&c.sessions);
    cli_list_free(&c.locals);
    cli_list_free(&c.merge);
    return status;
}
