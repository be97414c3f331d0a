/* emulator/emulator_main: the `emulator` subcommand: flags, start, print the
 * bound address as one JSON line on stdout ({"listening": "HOST:PORT"}, so
 * scripts and tests can find an ephemeral port), run until SIGINT/SIGTERM. */
#include "common/log.h"
#include "emulator/emu_internal.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define OFF(f) offsetof(emulator_config, f)

static const cli_opt emulator_opts[] = {
    {"--listen", "FAILPROOFAI_EMULATOR_LISTEN", CLI_STR, OFF(listen), "HOST:PORT",
     "address to serve on; port 0 picks a free one (default 127.0.0.1:8790)", 0, 0},
    {"--token", NULL, CLI_LIST, OFF(tokens), "TOKEN[:KIND]",
     "accepted bearer token, one evaluator instance each; KIND customer (default), managed or "
     "disabled; repeatable (default: one customer token 'emulator-token')",
     0, 0},
    {"--sessions", NULL, CLI_INT, OFF(sessions), "N", "generate N realistic sessions at start", 0,
     10000000},
    {"--transcripts", NULL, CLI_STR, OFF(transcripts_dir), "DIR",
     "load every *.json transcript in DIR as a session", 0, 0},
    {"--definitions", NULL, CLI_STR, OFF(definitions_file), "FILE",
     "managed definitions: a JSON array of {eval_key, eval_version, display_name, result_kind, "
     "labels, condition_source, evaluator_source, timeout_seconds}",
     0, 0},
    {"--sample-definitions", NULL, CLI_FLAG, OFF(sample_definitions), NULL,
     "serve a few built-in realistic managed definitions (when no --definitions)", 0, 0},
    {"--disable", NULL, CLI_LIST, OFF(disabled), "EVAL_KEY",
     "list EVAL_KEY in disabled_definitions (repeatable)", 0, 0},
    {"--lease-seconds", NULL, CLI_INT, OFF(lease_seconds), "S", "lease duration (default 120)", 1,
     86400},
    {"--heartbeat-seconds", NULL, CLI_INT, OFF(heartbeat_seconds), "S",
     "heartbeat interval advertised (default 30)", 1, 86400},
    {"--poll-seconds", NULL, CLI_INT, OFF(poll_seconds), "S",
     "poll interval advertised (default 10)", 1, 86400},
    {"--max-attempts", NULL, CLI_INT, OFF(max_attempts), "N",
     "leases per assignment before it is dead-lettered (default 5)", 1, 1000},
    {"--claim-limit", NULL, CLI_INT, OFF(claim_limit), "N",
     "claim_limit advertised and enforced (default: the worker's max_concurrency)", 1, 32},
    {"--seed", NULL, CLI_INT, OFF(seed), "N", "seed for generated sessions and faults (default 42)",
     0, 0},
    {"--fault-5xx", NULL, CLI_DOUBLE, OFF(fault_5xx), "RATE",
     "answer this fraction of protocol calls with a retryable 500 internal_error", 0, 1},
    {"--fault-drop", NULL, CLI_DOUBLE, OFF(fault_drop), "RATE",
     "commit, then drop the connection without answering, for this fraction of calls", 0, 1},
    {"--fault-latency-ms", NULL, CLI_INT, OFF(fault_latency_ms), "N",
     "delay every protocol answer by N ms", 0, 600000},
    {"--fault-lease-loss", NULL, CLI_DOUBLE, OFF(fault_lease_loss), "RATE",
     "fenced calls lose their lease (409 lease_lost) with this probability", 0, 1},
    {"--max-transcript-bytes", NULL, CLI_INT, OFF(max_transcript_bytes), "N",
     "413 transcript_too_large above N bytes (default 26214400)", 1, 1L << 40},
    {"--threads", NULL, CLI_INT, OFF(threads), "N", "HTTP worker threads (default 2)", 1, 64},
    {"--log-level", "FAILPROOFAI_EMULATOR_LOG_LEVEL", CLI_STR, OFF(log_level), "LEVEL",
     "debug, info, warn or error (default info)", 0, 0},
};

static const cli_command emulator_command = {
    "emulator", "Run the local Evaluator v2 cloud emulator (the server side of the protocol).",
    emulator_opts, sizeof emulator_opts / sizeof emulator_opts[0]};

int emulator_main(int argc, char **argv)
{
    emulator_config cfg;
    emulator_config_defaults(&cfg);
    fps_err err;
    int status = 2;
    emulator *emu = NULL;
    int rc = cli_parse(&emulator_command, argc, argv, &cfg, stdout, &err);
    if (rc == CLI_HELP) {
        status = 0;
        goto done;
    }
    log_level lvl;
    if (rc == CLI_OK && log_parse_level(cfg.log_level, &lvl) != 0) {
        fps_err_set(&err, CLI_ERROR, 0, "usage", "--log-level: unknown level '%s'", cfg.log_level);
        rc = CLI_ERROR;
    }
    if (rc != CLI_OK) {
        fprintf(stderr, "failproofai-sidecar: emulator: %s\n", err.msg);
        goto done;
    }
    log_set_level(lvl);
    if (cfg.sample_definitions && cfg.definitions_file == NULL)
        cfg.definitions_json = emulator_sample_definitions();
    /* Block the stop signals before threads start, so only sigwait sees them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (emulator_start(&cfg, &emu, &err) != 0) {
        fprintf(stderr, "failproofai-sidecar: emulator: %s\n", err.msg);
        status = 1;
        goto done;
    }
    char host[256];
    const char *colon = strrchr(cfg.listen, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - cfg.listen), cfg.listen);
    printf("{\"listening\": \"%s:%d\"}\n", host, emulator_port(emu));
    fflush(stdout);
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", host, emulator_port(emu));
    log_info("emulator listening", LOG_S("address", addr), LOG_I("sessions", emu->nassignments),
             LOG_I("managed_definitions", (long)json_array_size(emu->managed)),
             LOG_I("instances", (long)emu->ninstances));
    int sig = 0;
    sigwait(&set, &sig);
    log_info("emulator stopping", LOG_I("signal", sig));
    emulator_stop(emu);
    status = 0;
done:
    cli_list_free(&cfg.tokens);
    cli_list_free(&cfg.disabled);
    return status;
}
