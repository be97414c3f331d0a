/* sidecar/worker_conditions: an assignment's condition phase (SPEC §2
 * step 4). Every definition is selected or skipped with a reason: disabled
 * by the server, no condition, its condition (managed: through the jail;
 * local: the registry's condition) true, false or failing, or the lease
 * running out. The claim-time lease, minus a margin, bounds the whole
 * phase, so the plan still reaches the server in time. */
#include "sidecar/worker/worker_internal.h"

#include "common/log.h"
#include "common/timeutil.h"
#include "sandbox/jail/sbx.h"
#include "sidecar/evaluation/evaluation.h"
#include "sidecar/local/local.h"

#include <stdio.h>
#include <string.h>

#define LEASE_MARGIN_S 5.0

/* Disabled by the server (as registered when the assignment was picked up). */
static int is_disabled(const actx *x, const char *key)
{
    int hit = 0;
    for (size_t i = 0; i < json_array_size(x->disabled) && !hit; i++)
        hit = !strcmp(json_string_value(json_array_get(x->disabled, i)), key);
    return hit;
}

static void skip(wselection *s, const json_t *d, const char *reason, worker_shared *sh)
{
    json_array_append_new(s->skipped,
                          json_pack("{s:s, s:s, s:s}", "eval_key", cloud_jstr(d, "eval_key"),
                                    "eval_version", cloud_jstr(d, "eval_version"), "reason_code",
                                    reason));
    wcount(sh, WC_CONDITIONS_SKIPPED, 1);
    metrics_inc(METRIC_CONDITIONS, "outcome", "skipped", "reason", reason);
}

int worker_conditions(actx *x, const json_t *defs, sbx_image *img, wselection *s)
{
    const assign_env *env = x->env;
    worker_shared *sh = env->sh;
    /* The claim-time lease, minus the margin, bounds the whole phase. */
    double lease_end = x->a.lease_expires_epoch;
    double by_duration = x->claimed_at + (double)x->lease_duration_s;
    if (lease_end <= 0 || by_duration < lease_end) lease_end = by_duration;
    double deadline = lease_end - LEASE_MARGIN_S;
    for (size_t i = 0; i < json_array_size(defs); i++) {
        const json_t *d = json_array_get(defs, i);
        const char *key = cloud_jstr(d, "eval_key"), *ver = cloud_jstr(d, "eval_version");

        if (atomic_load(&x->cancel_conditions)) return -1;
        if (is_disabled(x, key)) {
            skip(s, d, "disabled_by_server", sh);
            continue;
        }
        int local = cloud_definition_mode(d) == CLOUD_MODE_LOCAL;
        const char *cond = local ? NULL : cloud_jstr(d, "condition_source");
        int has_local_cond = 0;
        if (local && env->local != NULL) {
            local_definition ld;
            if (local_registry_definition(env->local, key, ver, &ld) == 0) {
                has_local_cond = ld.condition != NULL;
                local_definition_free(&ld);
            }
        }
        if ((cond == NULL || *cond == '\0') && !has_local_cond) {
            json_array_append_new(s->selected,
                                  json_pack("{s:s, s:s}", "eval_key", key, "eval_version", ver));
            wcount(sh, WC_CONDITIONS_SELECTED, 1);
            metrics_inc(METRIC_CONDITIONS, "outcome", "selected", "reason", "none");
            continue;
        }
        double remaining = deadline - time_now();
        if (remaining <= 0) {
            skip(s, d, "lease_exhausted", sh);
            continue;
        }
        /* Its own timeout bounds the run; the lease bounds the wait for a
         * slot too: waiting on the sidecar's own overload is never the
         * definition's condition_error (the jail says which bound hit). */
        double t = sbx_clamp_timeout(cloud_jtimeout(d));
        const char *reason = NULL; /* NULL = selected */
        char rbuf[136];
        if (has_local_cond) {
            local_condition_outcome lo;
            memset(&lo, 0, sizeof lo);
            /* within the claim-time lease (budget_s): the pool's gate
             * counts its sandbox and never makes it wait */
            local_condition(env->local, env->pool, key, ver, img, t, remaining,
                            &x->cancel_conditions, &lo);
            if (!lo.applicable) {
                snprintf(rbuf, sizeof rbuf, "%s",
                         lo.reason_code[0] ? lo.reason_code : "condition_error");
                reason = rbuf;
            }
        } else {
            sbx_request rq = {.kind = LANG_CONDITION,
                              .source = cond,
                              .source_len = strlen(cond),
                              .eval_key = key,
                              .timeout_s = t,
                              .image = img,
                              .cancel = &x->cancel_conditions,
                              .budget_s = remaining};
            sbx_outcome out;
            memset(&out, 0, sizeof out);
            /* the assignment's jail session; counted by the gate, never waiting */
            worker_managed_eval(x, &rq, &out);
            if (out.status == SBX_CANCELLED) {
                sbx_outcome_free(&out);
                return -1;
            }
            reason = evaluation_condition_reason(&out, rbuf, sizeof rbuf);
            const char *d;
            sbx_end end = sbx_outcome_end(&out, &d);
            if (end != SBX_END_OK && end != SBX_END_LIMIT)
                log_warn("condition failed", LOG_S("assignment_id", x->a.assignment_id),
                         LOG_S("eval_key", key),
                         LOG_S("stage", cloud_jstr(out.json, "stage")
                                            ? cloud_jstr(out.json, "stage")
                                            : out.detail),
                         LOG_S("error_type", cloud_jstr(out.json, "error_type")
                                                 ? cloud_jstr(out.json, "error_type")
                                                 : ""));
            sbx_outcome_free(&out);
        }
        if (reason)
            skip(s, d, reason, sh);
        else {
            json_array_append_new(s->selected,
                                  json_pack("{s:s, s:s}", "eval_key", key, "eval_version", ver));
            wcount(sh, WC_CONDITIONS_SELECTED, 1);
            metrics_inc(METRIC_CONDITIONS, "outcome", "selected", "reason", "none");
        }
    }
    return 0;
}
