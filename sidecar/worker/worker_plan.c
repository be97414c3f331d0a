/* sidecar/worker_plan: the plan response checked against what the worker
 * asked for (SPEC §2 step 5: the runs must be exactly the selected
 * definitions, unless the server replays an earlier plan) and the source
 * checksums of managed runs (step 6, fail closed). Pure functions over the
 * cloud client's validated JSON, so they are unit-tested on their own. */
#include "sidecar/worker/worker_plan.h"

#include "common/ids.h"
#include "common/strbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const json_t *find_def(const json_t *defs, const char *key, const char *ver)
{
    for (size_t i = 0; i < json_array_size(defs); i++) {
        const json_t *d = json_array_get(defs, i);
        if (!strcmp(cloud_jstr(d, "eval_key"), key) && !strcmp(cloud_jstr(d, "eval_version"), ver))
            return d;
    }
    return NULL;
}

int worker_plan_match(const cloud_plan *p, const json_t *defs, const json_t *selected,
                      wrun **runs_out, size_t *nruns, fps_err *err)
{
    size_t nsel = json_array_size(selected), n = p->nruns;
    *runs_out = NULL;
    *nruns = 0;
    if (!p->idempotent_replay) {
        const char *expect = nsel ? "planned" : "skipped";
        if (p->status != (nsel ? CLOUD_PLAN_PLANNED : CLOUD_PLAN_SKIPPED)) {
            fps_err_set(err, WORKER_PLAN_EMISMATCH, 0, "protocol_error",
                        "plan status '%.32s' where '%s' was expected", p->assignment_status,
                        expect);
            return -1;
        }
        if (n != nsel) {
            fps_err_set(err, WORKER_PLAN_EMISMATCH, 0, "protocol_error",
                        "plan has %zu runs for %zu selected definitions", n, nsel);
            return -1;
        }
    }
    wrun *runs = calloc(n ? n : 1, sizeof *runs);
    if (runs == NULL) {
        fps_err_set(err, WORKER_PLAN_ENOMEM, 0, "out_of_memory", "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const cloud_run *run = &p->runs[i];
        const char *key = run->eval_key, *ver = run->eval_version;
        const json_t *d = find_def(defs, key, ver);
        if (d == NULL) {
            fps_err_set(err, WORKER_PLAN_EMISMATCH, 0, "protocol_error",
                        "plan run %s names an unknown definition", run->run_id);
            goto fail;
        }
        if (!p->idempotent_replay) {
            int found = 0;
            for (size_t k = 0; k < nsel && !found; k++) {
                const json_t *sel = json_array_get(selected, k);
                found = !strcmp(cloud_jstr(sel, "eval_key"), key) &&
                        !strcmp(cloud_jstr(sel, "eval_version"), ver);
            }
            for (size_t k = 0; k < i && found; k++)
                if (!strcmp(runs[k].run->eval_key, key) && !strcmp(runs[k].run->eval_version, ver))
                    found = 0;
            if (!found) {
                fps_err_set(err, WORKER_PLAN_EMISMATCH, 0, "protocol_error",
                            "plan run for %s@%s was not selected (or repeats)", key, ver);
                goto fail;
            }
        }
        if (run->mode != cloud_definition_mode(d)) {
            fps_err_set(err, WORKER_PLAN_EMISMATCH, 0, "protocol_error",
                        "plan changed the execution_mode of %s", key);
            goto fail;
        }
        runs[i].run = run;
        runs[i].def = d;
        runs[i].run_id = run->run_id;
    }
    *runs_out = runs;
    *nruns = n;
    return 0;
fail:
    free(runs);
    return -1;
}

/* SPEC §2 step 6, for every managed run before any runs. */
int worker_plan_verify_sources(const wrun *runs, size_t n, fps_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const cloud_run *run = runs[i].run;
        const json_t *d = runs[i].def;
        if (run->mode != CLOUD_MODE_PYTHON) continue;
        const char *src = run->evaluator_source, *sum = run->source_checksum;
        if (src == NULL || *src == '\0' || sum == NULL || *sum == '\0') {
            fps_err_set(err, WORKER_PLAN_ECHECKSUM, 0, "source_checksum_mismatch",
                        "managed run %s lacks evaluator_source or source_checksum", runs[i].run_id);
            return -1;
        }
        const char *cond = cloud_jstr(d, "condition_source");
        strbuf b;
        strbuf_init(&b);
        strbuf_puts(&b, cond ? cond : "");
        strbuf_putc(&b, '\0');
        strbuf_puts(&b, src);
        char hex[65], expect[80];
        ids_sha256_hex(b.data, b.len, hex);
        strbuf_free(&b);
        snprintf(expect, sizeof expect, "sha256:%s", hex);
        const char *dsum = cloud_jstr(d, "source_checksum");
        if (strcmp(expect, sum) != 0 || (dsum && *dsum && strcmp(dsum, sum) != 0)) {
            fps_err_set(err, WORKER_PLAN_ECHECKSUM, 0, "source_checksum_mismatch",
                        "source_checksum mismatch for run %s (%s)", runs[i].run_id, run->eval_key);
            return -1;
        }
    }
    return 0;
}
