/* emulator/emulator: the in-process C API of emulator.h: configuration
 * defaults, start (instances from tokens, managed definitions, sessions,
 * then the HTTP server), adding sessions, stop. */
#include "common/ids.h"
#include "emulator/emu_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void emulator_config_defaults(emulator_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen = "127.0.0.1:8790";
    cfg->lease_seconds = 120;
    cfg->heartbeat_seconds = 30;
    cfg->poll_seconds = 10;
    cfg->max_attempts = 5;
    cfg->claim_limit = 0;
    cfg->seed = 42;
    cfg->max_transcript_bytes = 26214400;
    cfg->threads = 2;
    cfg->log_level = "info";
}

static int add_instance(emulator *e, const char *spec, fps_err *err)
{
    char tok[4096];
    snprintf(tok, sizeof tok, "%s", spec);
    emu_inst_kind kind = INST_CUSTOMER;
    char *colon = strrchr(tok, ':');
    if (colon != NULL) {
        if (!strcmp(colon + 1, "customer"))
            kind = INST_CUSTOMER, *colon = '\0';
        else if (!strcmp(colon + 1, "managed"))
            kind = INST_MANAGED, *colon = '\0';
        else if (!strcmp(colon + 1, "disabled"))
            kind = INST_DISABLED, *colon = '\0';
    }
    for (const unsigned char *p = (const unsigned char *)tok; *p; p++) {
        if (*p <= 32 || *p == 127) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid",
                        "--token: a token must not contain spaces or control characters");
            return -1;
        }
    }
    emu_instance *in = &e->instances[e->ninstances];
    in->token = secret_from_str(tok);
    if (in->token == NULL) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "--token: a token must not be empty");
        return -1;
    }
    in->kind = kind;
    ids_uuid(in->instance_id);
    in->catalog = json_array();
    e->ninstances++;
    return 0;
}

int emulator_start(const emulator_config *cfg, emulator **out, fps_err *err)
{
    *out = NULL;
    if (cfg->lease_seconds <= cfg->heartbeat_seconds) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "--lease-seconds (%ld) must be longer than --heartbeat-seconds (%ld)",
                    cfg->lease_seconds, cfg->heartbeat_seconds);
        return -1;
    }
    if (cfg->heartbeat_seconds < 1 || cfg->poll_seconds < 1 || cfg->max_attempts < 1) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "--heartbeat-seconds, --poll-seconds and --max-attempts must be >= 1");
        return -1;
    }
    const double rates[] = {cfg->fault_5xx, cfg->fault_drop, cfg->fault_lease_loss};
    for (size_t i = 0; i < 3; i++) {
        if (!(rates[i] >= 0 && rates[i] <= 1)) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "fault rates must be between 0 and 1");
            return -1;
        }
    }
    emulator *e = calloc(1, sizeof *e);
    if (e == NULL || emu_state_init(e) != 0) {
        free(e);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "out of memory");
        return -1;
    }
    e->lease_seconds = cfg->lease_seconds;
    e->heartbeat_seconds = cfg->heartbeat_seconds;
    e->poll_seconds = cfg->poll_seconds;
    e->max_attempts = cfg->max_attempts;
    e->claim_limit = cfg->claim_limit;
    atomic_init(&e->fault_5xx, cfg->fault_5xx);
    atomic_init(&e->fault_drop, cfg->fault_drop);
    atomic_init(&e->fault_lease_loss, cfg->fault_lease_loss);
    atomic_init(&e->fault_latency_ms, cfg->fault_latency_ms);
    e->max_transcript_bytes = cfg->max_transcript_bytes > 0 ? cfg->max_transcript_bytes : 26214400;
    e->seed = (uint64_t)cfg->seed;
    e->managed = json_array();
    e->managed_sources = json_array();
    e->disabled = json_array();
    for (size_t i = 0; i < cfg->disabled.len; i++)
        json_array_append_new(e->disabled, json_string(cfg->disabled.items[i]));
    size_t ntok = cfg->tokens.len ? cfg->tokens.len : 1;
    e->instances = calloc(ntok, sizeof *e->instances);
    if (e->instances == NULL) goto fail_oom;
    if (cfg->tokens.len == 0) {
        if (add_instance(e, "emulator-token", err) != 0) goto fail;
    }
    for (size_t i = 0; i < cfg->tokens.len; i++)
        if (add_instance(e, cfg->tokens.items[i], err) != 0) goto fail;
    if (emu_definitions_load(e, cfg->definitions_file, cfg->definitions_json, err) != 0) goto fail;
    if (cfg->transcripts_dir && emu_sessions_load_dir(e, cfg->transcripts_dir, err) != 0) goto fail;
    if (cfg->sessions > 0) emu_sessions_generate(e, cfg->sessions);
    if (emu_server_start(e, cfg->listen ? cfg->listen : "127.0.0.1:8790", cfg->threads, err) != 0)
        goto fail;
    *out = e;
    return 0;
fail_oom:
    fps_err_set(err, EMU_EINVALID, 0, "invalid", "out of memory");
fail:
    emulator_stop(e);
    return -1;
}

int emulator_port(const emulator *e)
{
    return e ? e->port : 0;
}

int emulator_add_session(emulator *e, const char *transcript_json, char *assignment_id,
                         fps_err *err)
{
    json_error_t jerr;
    json_t *t = json_loads(transcript_json ? transcript_json : "", JSON_REJECT_DUPLICATES, &jerr);
    if (t == NULL) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "transcript is not valid JSON: %s", jerr.text);
        return -1;
    }
    emu_assignment *a = emu_sessions_add_json(e, t, 0, err);
    json_decref(t);
    if (a == NULL) return -1;
    if (assignment_id) memcpy(assignment_id, a->id, 37);
    return 0;
}

int emulator_generate_sessions(emulator *e, long n)
{
    emu_sessions_generate(e, n);
    return 0;
}

void emulator_stop(emulator *e)
{
    if (e == NULL) return;
    emu_server_stop(e);
    for (size_t i = 0; i < e->ninstances; i++) {
        secret_free(e->instances[i].token);
        json_decref(e->instances[i].catalog);
    }
    free(e->instances);
    json_decref(e->managed);
    json_decref(e->managed_sources);
    json_decref(e->disabled);
    emu_state_free(e);
    free(e);
}
