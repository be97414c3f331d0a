/* emulator/validate: request field checks with the reference's wording
 * ("worker_id must be a string", "lease_generation must be greater than
 * zero", ...), so a 422 names the field and the rule. `ctx` prefixes nested
 * fields ("definitions[2]"); NULL for top-level ones. */
#include "common/timeutil.h"
#include "emulator/emu_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NAME(buf, ctx, key)                                                                        \
    char buf[160];                                                                                 \
    if (ctx)                                                                                       \
        snprintf(buf, sizeof(buf), "%s.%s", ctx, key);                                             \
    else                                                                                           \
        snprintf(buf, sizeof(buf), "%s", key)

int emu_v_string(json_t *o, const char *key, const char *ctx, const char **out, fps_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v)) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be a string", f);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

int emu_v_opt_string(json_t *o, const char *key, const char *ctx, const char **out, fps_err *err)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v)) {
        *out = NULL;
        return 0;
    }
    if (!json_is_string(v)) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be a string or null", f);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

int emu_v_int(json_t *o, const char *key, const char *ctx, long long *out, fps_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v)) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be an integer", f);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

int emu_v_pos_int(json_t *o, const char *key, const char *ctx, long long *out, fps_err *err)
{
    if (emu_v_int(o, key, ctx, out, err) != 0) return -1;
    if (*out <= 0) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be greater than zero", f);
        return -1;
    }
    return 0;
}

int emu_v_nonneg_int(json_t *o, const char *key, const char *ctx, long long *out, fps_err *err)
{
    if (emu_v_int(o, key, ctx, out, err) != 0) return -1;
    if (*out < 0) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must not be negative", f);
        return -1;
    }
    return 0;
}

int emu_v_array(json_t *o, const char *key, const char *ctx, json_t **out, fps_err *err)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_array(v)) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be an array", f);
        return -1;
    }
    *out = v;
    return 0;
}

int emu_v_bounded(const char *s, const char *name, size_t max, fps_err *err)
{
    size_t len = strlen(s);
    if (len == 0) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must not be empty", name);
        return -1;
    }
    if (len > max) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s is %zu bytes; maximum is %zu", name, len,
                    max);
        return -1;
    }
    return 0;
}

int emu_v_no_control(const char *s, const char *name, fps_err *err)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p < 32 || *p == 127) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must not contain control characters",
                        name);
            return -1;
        }
    }
    return 0;
}

int emu_v_key(const char *s, const char *name, fps_err *err)
{
    if (emu_v_bounded(s, name, 128, err) != 0) return -1;
    int ok = s[0] >= 'a' && s[0] <= 'z';
    for (const char *p = s + 1; ok && *p; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
    if (!ok) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must match ^[a-z][a-z0-9_]*$", name);
        return -1;
    }
    return 0;
}

int emu_v_enum(json_t *o, const char *key, const char *ctx, const char *const *allowed,
               const char **out, fps_err *err)
{
    if (emu_v_string(o, key, ctx, out, err) != 0) return -1;
    for (size_t i = 0; allowed[i]; i++)
        if (!strcmp(*out, allowed[i])) return 0;
    NAME(f, ctx, key);
    char list[400];
    size_t off = 0;
    list[0] = '\0';
    for (size_t i = 0; allowed[i] && off < sizeof list; i++)
        off += (size_t)snprintf(list + off, sizeof list - off, "%s'%s'", i ? ", " : "", allowed[i]);
    fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be one of %s", f, list);
    return -1;
}

int emu_v_opt_number(json_t *o, const char *key, const char *ctx, int *present, double *out,
                     fps_err *err)
{
    json_t *v = json_object_get(o, key);
    *present = 0;
    if (v == NULL || json_is_null(v)) return 0;
    if (!json_is_number(v)) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be a number or null", f);
        return -1;
    }
    *out = json_number_value(v);
    if (!isfinite(*out)) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be finite", f);
        return -1;
    }
    *present = 1;
    return 0;
}

int emu_v_labels(json_t *o, const char *key, const char *ctx, fps_err *err)
{
    json_t *labels;
    if (emu_v_array(o, key, ctx, &labels, err) != 0) return -1;
    NAME(f, ctx, key);
    if (json_array_size(labels) > 20) {
        fps_err_set(err, EMU_EINVALID, 0, "invalid",
                    "%s has %zu entries; at most 20 labels are allowed", f,
                    json_array_size(labels));
        return -1;
    }
    for (size_t i = 0; i < json_array_size(labels); i++) {
        json_t *l = json_array_get(labels, i);
        char item[200];
        snprintf(item, sizeof item, "%s[%zu]", f, i);
        if (!json_is_string(l)) {
            fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be a string", item);
            return -1;
        }
        if (emu_v_bounded(json_string_value(l), item, 64, err) != 0) return -1;
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(json_string_value(l), json_string_value(json_array_get(labels, j)))) {
                fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be unique", f);
                return -1;
            }
        }
    }
    return 0;
}

int emu_v_timestamp(json_t *o, const char *key, const char *ctx, fps_err *err)
{
    const char *s;
    if (emu_v_string(o, key, ctx, &s, err) != 0) return -1;
    double t;
    if (time_parse_rfc3339(s, &t) != 0) {
        NAME(f, ctx, key);
        fps_err_set(err, EMU_EINVALID, 0, "invalid", "%s must be an RFC 3339 timestamp", f);
        return -1;
    }
    return 0;
}
