/* sidecar/worker_assign: the orchestration of one claimed assignment (SPEC
 * §2 steps 3-8): transcript, definitions (definitions_url, else the local
 * catalog as local definitions), the condition phase (worker_conditions.c),
 * the plan and its matching (worker_plan.c), the runs with heartbeats
 * (worker_runs.c, worker_hb.c), and how an assignment ends early (failure,
 * lost lease). */
#include "sidecar/worker/worker_internal.h"

#include "common/log.h"
#include "common/timeutil.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/worker/recent.h"
#include "store/archive.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void worker_fail_assignment(actx *x, const char *code, const char *msg, const cloud_error *e)
{
    worker_shared *sh = x->env->sh;
    wcount(sh, WC_ASSIGNMENTS_FAILED, 1);
    if (e && e->err.code == CLOUD_PROTOCOL) wcount(sh, WC_PROTOCOL_ERRORS, 1);
    if (e && e->err.code == CLOUD_TRANSPORT) wcount(sh, WC_TRANSPORT_ERRORS, 1);
    ws_finish(x, "failed", code, msg);
    log_error("assignment failed", LOG_S("assignment_id", x->a.assignment_id), LOG_S("code", code),
              LOG_S("error", msg), LOG_S("request_id", e ? e->request_id : ""));
    worker_note_error(sh, code, msg);
}

static void lease_lost(actx *x, const char *where)
{
    if (atomic_exchange(&x->lost, 1) == 0) {
        wcount(x->env->sh, WC_LEASES_LOST, 1);
        metrics_inc(METRIC_LEASES_LOST);
        log_warn("lease lost", LOG_S("assignment_id", x->a.assignment_id), LOG_S("during", where),
                 LOG_I("lease_generation", x->a.lease_generation));
        ws_finish(x, "lost", "lease_lost", where);
    }
    for (size_t i = 0; i < x->nruns; i++)
        atomic_store(&x->runs[i].cancel, 1);
    atomic_store(&x->cancel_conditions, 1);
}

void worker_managed_eval(actx *x, const sbx_request *req, sbx_outcome *out)
{
    pthread_mutex_lock(&x->ss_mu);
    if (x->ss != NULL)
        sbx_session_eval(x->ss, req, out);
    else
        sbx_eval(x->env->pool, req, out);
    pthread_mutex_unlock(&x->ss_mu);
}

/* Call failed: lease_lost ends the assignment quietly, anything else fails it. */
static void call_failed(actx *x, const char *what, const cloud_error *e)
{
    if (e->err.code == CLOUD_ABORTED) return;
    if (e->errc == CLOUD_ERRC_LEASE_LOST) {
        lease_lost(x, what);
        return;
    }
    char msg[700];
    snprintf(msg, sizeof msg, "%s: %s", what, e->err.msg);
    worker_fail_assignment(x, e->err.name, msg, e);
}

/* The local catalog (as registered when the assignment was picked up) as
 * `local` definitions (no definitions_url). */
static json_t *local_definitions(const actx *x)
{
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(x->catalog); i++) {
        json_t *d = json_deep_copy(json_array_get(x->catalog, i));
        json_object_set_new(d, "execution_mode", json_string("local"));
        json_array_append_new(out, d);
    }
    return out;
}

/* At most how many managed evaluations the definitions can take: each
 * managed definition's evaluator, and its condition if it has one. */
static size_t managed_evaluations(const json_t *defs)
{
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(defs); i++) {
        const json_t *d = json_array_get(defs, i);
        if (cloud_definition_mode(d) == CLOUD_MODE_LOCAL) continue;
        const char *cond = cloud_jstr(d, "condition_source");
        n += 1 + (cond != NULL && *cond != '\0');
    }
    return n;
}

/* 1 if a definition of `defs` runs on a local evaluator. */
static int defs_have_local(const json_t *defs)
{
    size_t i;
    const json_t *d;
    json_array_foreach(defs, i, d)
    {
        if (cloud_definition_mode(d) == CLOUD_MODE_LOCAL) return 1;
    }
    return 0;
}

/* The assignment lets go of the bytes as received (*transcript, NULL
 * after; a no-op when already gone): from now on it holds its image (and
 * its runs' small state), and its reservation shrinks to that. */
static void drop_bytes(actx *x, rcbuf **transcript, size_t image_len)
{
    if (*transcript == NULL) return;
    rcbuf_release(*transcript);
    *transcript = NULL;
    worker_memory_settle(x, (uint64_t)image_len + image_len / 8);
}

void worker_process(actx *x)
{
    const assign_env *env = x->env;
    worker_shared *sh = env->sh;
    cloud_error e;
    json_t *defs = NULL;
    rcbuf *transcript = NULL; /* the bytes as received */
    sbx_image *img = NULL;
    wselection s = {json_array(), json_array()};
    cloud_plan plan;
    memset(&plan, 0, sizeof plan);
    fps_err err;
    x->ss = NULL;
    pthread_mutex_init(&x->ss_mu, NULL);

    int64_t tm[8] = {worker_mono_us()};
    void *simg = NULL;
    size_t simg_len = 0;
    /* The bytes as received are kept only when something may read them
     * after the image is built: the archive, or a local run (possible only
     * when the catalog, as registered at pickup, has a local evaluator;
     * one registered since gets them fetched again, see below). Otherwise
     * the build consumes them (cloud_transcript without raw): the parent
     * does not hold the bytes and the whole image at once. */
    int keep = env->archive != NULL || json_array_size(x->catalog) > 0;
    if (cloud_transcript_sized(env->cloud, &x->a, worker_memory_sized, x, keep ? &transcript : NULL,
                               &simg, &simg_len, &e) != 0) {
        if (e.errc == CLOUD_ERRC_TRANSCRIPT_TOO_LARGE) {
            wcount(sh, WC_TRANSCRIPTS_TOO_LARGE, 1);
            metrics_inc(METRIC_TRANSCRIPTS_TOO_LARGE);
            wcount(sh, WC_ASSIGNMENTS_FAILED, 1);
            log_warn("transcript too large; assignment ends",
                     LOG_S("assignment_id", x->a.assignment_id), LOG_S("error", e.err.msg),
                     LOG_S("request_id", e.request_id));
            worker_note_error(sh, e.err.name, e.err.msg);
            ws_finish(x, "failed", "transcript_too_large", e.err.msg);
        } else {
            call_failed(x, "transcript", &e);
        }
        goto done;
    }
    if (!x->mem_sized) { /* no Content-Length: its size is known now (or the image's) */
        char unused[8];
        (void)worker_memory_sized(x, transcript ? rcbuf_len(transcript) : simg_len, unused,
                                  sizeof unused);
    }
    if (env->archive != NULL && x->a.session_id != NULL) {
        /* queued with a reference (no copy); never waits, never fails the run */
        store_archive_meta am = {x->a.session_id, x->a.session_revision_id, x->a.assignment_id, 0};
        (void)store_archive_submit(env->archive, &am, transcript);
    }
    /* one image per assignment, shared by its conditions and managed runs */
    fps_err ie;
    size_t image_len = simg_len;
    img = sbx_image_adopt(simg, simg_len, &ie);
    if (img == NULL) {
        worker_fail_assignment(x, ie.name, ie.msg, NULL);
        goto done;
    }
    recent_put(env->recent, x->a.assignment_id, img);
    /* with no bytes kept, the image is all the assignment holds from now */
    if (transcript == NULL) worker_memory_settle(x, (uint64_t)image_len + image_len / 8);
    tm[1] = worker_mono_us();
    if (x->a.definitions_url != NULL) {
        if (cloud_definitions(env->cloud, &x->a, &defs, &e) != 0) {
            call_failed(x, "definitions", &e);
            goto done;
        }
    } else {
        defs = local_definitions(x);
    }
    tm[2] = worker_mono_us();
    /* The bytes as received serve local runs only (the ring and the
     * archive hold their own references). A plan's run keeps its
     * definition's mode (worker_plan_match), so without a local definition
     * no run needs them: only the image stays through the conditions, the
     * plan and the runs. */
    if (!defs_have_local(defs)) drop_bytes(x, &transcript, image_len);
    /* One jail session serves its managed evaluations in turn (closed at the
     * end, whichever way the assignment ends); with at most one, a session
     * would only add its report: that one runs alone. */
    if (managed_evaluations(defs) > 1)
        x->ss = sbx_session_open(env->pool, img); /* NULL: each evaluation alone */
    if (worker_conditions(x, defs, img, &s) != 0) goto done;
    tm[3] = worker_mono_us();
    if (cloud_plan_submit(env->cloud, &x->a, s.selected, s.skipped, &plan, &e) != 0) {
        call_failed(x, "plan", &e);
        goto done;
    }
    tm[4] = worker_mono_us();
    if (plan.idempotent_replay) metrics_inc(METRIC_REPLAYS, "call", "plan");
    if (worker_plan_match(&plan, defs, s.selected, &x->runs, &x->nruns, &err) != 0) {
        memset(&e, 0, sizeof e);
        cloud_set_protocol_error(&e, "%s", err.msg);
        metrics_inc(METRIC_PROTOCOL_ERRORS, "call", "plan", "code", "plan_mismatch");
        worker_fail_assignment(x, e.err.name, err.msg, &e);
        goto done;
    }
    ws_planned(x, defs, s.selected, s.skipped, plan.obj, plan.status == CLOUD_PLAN_SKIPPED);
    if (x->nruns == 0) {
        if (plan.status != CLOUD_PLAN_SKIPPED) ws_finish(x, "completed", NULL, NULL);
        wcount(sh, WC_ASSIGNMENTS_SKIPPED, 1);
        log_info("assignment skipped", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_I("skipped", (long long)json_array_size(s.skipped)));
        goto done;
    }
    if (worker_plan_verify_sources(x->runs, x->nruns, &err) != 0) {
        wcount(sh, WC_CHECKSUM_MISMATCHES, 1);
        worker_fail_assignment(x, err.name, err.msg, NULL);
        goto done;
    }
    /* a local definition the plan did not select: no run needs the bytes */
    int local_runs = 0;
    for (size_t i = 0; i < x->nruns && !local_runs; i++)
        local_runs = x->runs[i].run->mode == CLOUD_MODE_LOCAL;
    if (!local_runs) drop_bytes(x, &transcript, image_len);
    if (local_runs && transcript == NULL) {
        /* a local evaluator registered after pickup: the bytes were not
         * kept (see above), so they are fetched again (the image too, and
         * it is dropped: the assignment has its own) */
        void *again = NULL;
        size_t again_len = 0;
        int rc = cloud_transcript(env->cloud, &x->a, &transcript, &again, &again_len, &e);
        free(again);
        if (rc != 0) {
            call_failed(x, "transcript", &e);
            goto done;
        }
    }
    ws_runs_started(x);
    worker_hb_add(env->hb, x);
    tm[5] = worker_mono_us();
    worker_execute_runs(x, transcript, img);
    worker_hb_remove(env->hb, x);
    tm[6] = worker_mono_us();
    if (log_get_level() <= LOG_DEBUG)
        log_debug("assignment timing", LOG_S("assignment_id", x->a.assignment_id),
                  LOG_D("transcript_ms", (tm[1] - tm[0]) / 1000.0),
                  LOG_D("definitions_ms", (tm[2] - tm[1]) / 1000.0),
                  LOG_D("conditions_ms", (tm[3] - tm[2]) / 1000.0),
                  LOG_D("plan_ms", (tm[4] - tm[3]) / 1000.0),
                  LOG_D("prepare_ms", (tm[5] - tm[4]) / 1000.0),
                  LOG_D("runs_ms", (tm[6] - tm[5]) / 1000.0),
                  LOG_D("eval_sum_ms", atomic_load(&x->tm_eval_us) / 1000.0),
                  LOG_D("durable_sum_ms", atomic_load(&x->tm_store_us) / 1000.0),
                  LOG_D("submit_sum_ms", atomic_load(&x->tm_submit_us) / 1000.0),
                  LOG_D("since_claim_ms", (time_now() - x->claimed_at) * 1000.0));
    if (!atomic_load(&x->lost)) {
        wcount(sh, WC_ASSIGNMENTS_COMPLETED, 1);
        log_info("assignment runs finished", LOG_S("assignment_id", x->a.assignment_id),
                 LOG_I("runs", (long long)x->nruns));
    }
done:
    sbx_session_close(x->ss); /* its child ends before the image it maps goes */
    x->ss = NULL;
    pthread_mutex_destroy(&x->ss_mu);
    sbx_image_release(img);
    cloud_plan_free(&plan);
    rcbuf_release(transcript);
    json_decref(defs);
    json_decref(s.selected);
    json_decref(s.skipped);
}
