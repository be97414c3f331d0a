/* sidecar/cmd_demo: `failproofai-sidecar demo`: an in-process cloud emulator
 * with generated sessions and a few realistic managed definitions (one of
 * which fails on some sessions, so the error views have something to show),
 * the sidecar daemon against it (admin API on 127.0.0.1:8787 by default), a
 * trickle of new sessions so the admin page stays alive, optional server
 * faults (--faults), and a clean stop on Ctrl-C (the daemon drains, then the
 * emulator stops). examples/flaky_evaluator.py is a local evaluator to run
 * beside it that fails some of its runs. */
#include "common/cli.h"
#include "common/log.h"
#include "emulator/emulator.h"
#include "sidecar/commands.h"
#include "sidecar/config.h"
#include "sidecar/daemon.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    long sessions;
    double rate;
    const char *listen;
    const char *db;
    long concurrency;
    const char *log_level;
    const char *faults;
} demo_config;

#define OFF(f) offsetof(demo_config, f)
static const cli_opt demo_opts[] = {
    {"--sessions", NULL, CLI_INT, OFF(sessions), "N", "sample sessions to start with (default 50)",
     0, 100000},
    {"--rate", NULL, CLI_DOUBLE, OFF(rate), "PER_S",
     "new sessions per second afterwards (default 0.5; 0 = none)", 0, 1000},
    {"--listen", NULL, CLI_STR, OFF(listen), "HOST:PORT", "admin API (default 127.0.0.1:8787)", 0,
     0},
    {"--db", NULL, CLI_STR, OFF(db), "PATH", "SQLite database (default failproofai-demo.db)", 0, 0},
    {"--concurrency", NULL, CLI_INT, OFF(concurrency), "N", "assignments at once (default 4)", 1,
     32},
    {"--log-level", NULL, CLI_STR, OFF(log_level), "LEVEL", "debug|info|warn|error (default warn)",
     0, 0},
    {"--faults", NULL, CLI_STR, OFF(faults), "SPEC",
     "server faults: 'default' or 5xx=RATE,drop=RATE,latency-ms=N,lease-loss=RATE", 0, 0},
};
static const cli_command demo_command = {"demo",
                                         "Start the emulator, the sidecar and sample sessions.",
                                         demo_opts, sizeof demo_opts / sizeof demo_opts[0]};

/* Realistic managed definitions over the emulator's generated sessions
 * (agent_start, human_input, model_response, tool_use, tool_result,
 * agent_end events). */
static const char DEMO_DEFINITIONS[] =
    "["
    "{\"eval_key\":\"tool_success_rate\",\"eval_version\":\"1.0.0\","
    "\"display_name\":\"Tool success rate\",\"result_kind\":\"score\","
    "\"labels\":[\"tools\",\"reliability\"],"
    "\"condition_source\":\"ConditionResult(session.count('tool_result') > 0, 'no_tool_calls')\","
    "\"evaluator_source\":\"EvalResult(score=Score(1.0 - len([e for e in "
    "session.events_of_type('tool_result') if e.payload.get('status') == 'error']) / "
    "max(1, session.count('tool_result'))), metrics={'tool_errors': Metric(len([e for e in "
    "session.events_of_type('tool_result') if e.payload.get('status') == 'error']))}, "
    "summary=f\\\"{session.count('tool_result')} tool results\\\")\",\"timeout_seconds\":10},"
    "{\"eval_key\":\"latency_score\",\"eval_version\":\"1.0.0\","
    "\"display_name\":\"Tool latency score\",\"result_kind\":\"score\","
    "\"labels\":[\"latency\"],\"condition_source\":\"session.count('tool_result') > 0\","
    "\"evaluator_source\":\"EvalResult(score=Score(max(0.0, min(1.0, 1.0 - sum([e.payload.get("
    "'latency_ms', 0) for e in session.events_of_type('tool_result')]) / max(1, "
    "session.count('tool_result')) / 3000))), metrics={'mean_tool_latency_ms': Metric(round(sum("
    "[e.payload.get('latency_ms', 0) for e in session.events_of_type('tool_result')]) / max(1, "
    "session.count('tool_result')), 1), unit='ms')})\",\"timeout_seconds\":10},"
    "{\"eval_key\":\"conversation_length\",\"eval_version\":\"1.0.0\","
    "\"display_name\":\"Conversation length\",\"result_kind\":\"metric\","
    "\"labels\":[\"size\"],\"condition_source\":null,"
    "\"evaluator_source\":\"EvalResult(metrics={'conversation_length': "
    "Metric(session.event_count, unit='events'), 'model_turns': "
    "Metric(session.count('model_response'))})\",\"timeout_seconds\":null},"
    "{\"eval_key\":\"task_success\",\"eval_version\":\"1.0.0\","
    "\"display_name\":\"Task success\",\"result_kind\":\"assertion\","
    "\"labels\":[\"outcome\"],\"condition_source\":\"session.count('agent_end') > 0\","
    "\"evaluator_source\":\"EvalResult(assertions={'task_success': Assertion(any([e.payload.get("
    "'status') == 'success' for e in session.events_of_type('agent_end')]), "
    "description='the agent reported success')})\",\"timeout_seconds\":5},"
    "{\"eval_key\":\"model_cost_usd\",\"eval_version\":\"1.0.0\","
    "\"display_name\":\"Model cost\",\"result_kind\":\"metric\",\"labels\":[\"cost\"],"
    "\"condition_source\":null,"
    "\"evaluator_source\":\"EvalResult(metrics={'model_cost_usd': Metric(round(sum([e.payload.get("
    "'cost_usd', 0) for e in session.events_of_type('model_response')]), 6), unit='usd')})\","
    "\"timeout_seconds\":5},"
    /* Fails (KeyError) on sessions with a failed tool call, whose result
     * has no "output": a definition with a bug (it should use .get). */
    "{\"eval_key\":\"results_per_call\",\"eval_version\":\"1.0.0\","
    "\"display_name\":\"Results per tool call\",\"result_kind\":\"metric\","
    "\"labels\":[\"demo\"],\"condition_source\":null,"
    "\"evaluator_source\":\"EvalResult(metrics={'results_per_call': Metric(sum([e.payload["
    "'output']['count'] for e in session.events_of_type('tool_result')]) / max(1, "
    "session.count('tool_result')))})\",\"timeout_seconds\":5}"
    "]";

const char *demo_definitions_json(void);
const char *demo_definitions_json(void)
{
    return DEMO_DEFINITIONS;
}

typedef struct {
    emulator *emu;
    double rate;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} feeder;

/* Adds one generated session every 1/rate seconds until stopped (sleeps on
 * a condition variable). */
static void *feed_main(void *arg)
{
    feeder *f = arg;
    long period_ms = (long)(1000.0 / f->rate);
    pthread_mutex_lock(&f->mu);
    while (!f->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += period_ms / 1000;
        ts.tv_nsec += (period_ms % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&f->cv, &f->mu, &ts) == ETIMEDOUT && !f->stop) {
            pthread_mutex_unlock(&f->mu);
            emulator_generate_sessions(f->emu, 1);
            pthread_mutex_lock(&f->mu);
        }
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Parses --faults into the emulator's fault rates: "default" (a few of
 * each), or comma-separated 5xx=RATE, drop=RATE, lease-loss=RATE (0..1) and
 * latency-ms=N (0..10000). Returns 0, or -1 with a message in err. */
static int parse_faults(const char *spec, emulator_config *ec, fps_err *err)
{
    if (!strcmp(spec, "default")) spec = "5xx=0.05,drop=0.01,latency-ms=20,lease-loss=0.005";
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
        fps_err_set(err, CLI_ERROR, 0, "usage", "--faults: too long");
        return -1;
    }
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '='), *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : 0;
        if (eq == NULL || end == eq + 1 || *end != '\0' || !(v >= 0)) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "--faults: '%s' is not NAME=NUMBER", item);
            return -1;
        }
        *eq = '\0';
        int rate = strcmp(item, "latency-ms") != 0;
        if ((rate && v > 1) || (!rate && v > 10000)) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "--faults: %s=%g is out of range (%s)", item, v,
                        rate ? "a rate from 0 to 1" : "0 to 10000 ms");
            return -1;
        }
        if (!strcmp(item, "5xx"))
            ec->fault_5xx = v;
        else if (!strcmp(item, "drop"))
            ec->fault_drop = v;
        else if (!strcmp(item, "lease-loss"))
            ec->fault_lease_loss = v;
        else if (!rate)
            ec->fault_latency_ms = (long)v;
        else {
            fps_err_set(err, CLI_ERROR, 0, "usage",
                        "--faults: unknown fault '%s' (5xx, drop, latency-ms or lease-loss)", item);
            return -1;
        }
    }
    return 0;
}

/* What the banner tells (borrowed from cmd_demo's frame). */
typedef struct {
    const char *emulator_url;
    long sessions;
    int feeding;
    const emulator_config *ec;
} demo_banner;

/* The daemon's on_listening hook: the banner goes out once the admin API
 * listens, so the URL it prints carries the port actually bound (the
 * kernel's, for --listen 127.0.0.1:0) and works when it is read. */
static void print_banner(int port, void *ud)
{
    const demo_banner *b = ud;
    printf(
        "failproofai-sidecar demo\n"
        "  emulator:  %s (%ld sessions, 6 managed definitions, results_per_call fails on some%s)\n"
        "  faults:    5xx %g, dropped answers %g, lease loss %g, latency %ld ms\n"
        "  admin UI:  http://127.0.0.1:%d/\n"
        "  a local evaluator that fails some runs: python3 examples/flaky_evaluator.py "
        "http://127.0.0.1:%d\n"
        "  Ctrl-C to stop.\n",
        b->emulator_url, b->sessions, b->feeding ? ", new sessions trickling in" : "",
        b->ec->fault_5xx, b->ec->fault_drop, b->ec->fault_lease_loss, b->ec->fault_latency_ms, port,
        port);
    fflush(stdout);
}

int cmd_demo(int argc, char **argv)
{
    demo_config dc = {50, 0.5, "127.0.0.1:8787", "failproofai-demo.db", 4, "warn", NULL};
    fps_err err;
    int rc = cli_parse(&demo_command, argc, argv, &dc, stdout, &err);
    if (rc == CLI_HELP) return 0;
    if (rc != CLI_OK) {
        fprintf(stderr, "failproofai-sidecar: %s\n", err.msg);
        return 2;
    }
    log_level lvl;
    if (log_parse_level(dc.log_level, &lvl) != 0) {
        fprintf(stderr, "failproofai-sidecar: demo: bad --log-level '%s'\n", dc.log_level);
        return 2;
    }
    log_set_level(lvl);
    /* Threads created from here on (emulator, feeder, daemon) inherit the
     * mask: only the daemon's sigwait sees SIGINT/SIGTERM. */
    daemon_block_signals();

    emulator_config ec;
    emulator_config_defaults(&ec);
    ec.listen = "127.0.0.1:0";
    ec.sessions = dc.sessions;
    ec.definitions_json = DEMO_DEFINITIONS;
    ec.poll_seconds = 1;
    ec.heartbeat_seconds = 10;
    ec.lease_seconds = 60;
    if (dc.faults != NULL && parse_faults(dc.faults, &ec, &err) != 0) {
        fprintf(stderr, "failproofai-sidecar: demo: %s\n", err.msg);
        return 2;
    }
    emulator *emu = NULL;
    if (emulator_start(&ec, &emu, &err) != 0) {
        fprintf(stderr, "failproofai-sidecar: demo: cannot start the emulator: %s\n", err.msg);
        return 1;
    }
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", emulator_port(emu));

    run_config cfg;
    config_defaults(&cfg);
    cfg.server_url = url;
    cfg.token = "emulator-token";
    cfg.token_file = NULL;
    cfg.listen = dc.listen;
    cfg.db_path = dc.db;
    cfg.concurrency = dc.concurrency;
    cfg.log_level = dc.log_level;
    cfg.drain_timeout = 10;
    cfg.insecure_open_admin = 1; /* a local playground: no tokens to copy around */
    cfg.archive_max_mb = 256;    /* keeps the sessions, for the page's backtests */
    if (config_validate(&cfg, &err) != 0) {
        fprintf(stderr, "failproofai-sidecar: demo: %s\n", err.msg);
        emulator_stop(emu);
        return 2;
    }
    feeder f = {.emu = emu, .rate = dc.rate};
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    pthread_t ft;
    int feeding = dc.rate > 0 && pthread_create(&ft, NULL, feed_main, &f) == 0;

    demo_banner banner = {url, dc.sessions, feeding, &ec};
    cfg.on_listening = print_banner;
    cfg.on_listening_ud = &banner;

    int status = daemon_run(&cfg);

    if (feeding) {
        pthread_mutex_lock(&f.mu);
        f.stop = 1;
        pthread_cond_broadcast(&f.cv);
        pthread_mutex_unlock(&f.mu);
        pthread_join(ft, NULL);
    }
    pthread_mutex_destroy(&f.mu);
    pthread_cond_destroy(&f.cv);
    emulator_stop(emu);
    config_free(&cfg);
    printf("demo stopped\n");
    return status;
}
