/* common/cli: see cli.h. */
#include "common/cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int set_value(const cli_opt *o, const char *value, const char *source, void *cfg,
                     fps_err *err)
{
    char *field = (char *)cfg + o->offset;
    char *end = NULL;
    switch (o->type) {
    case CLI_STR:
        *(const char **)field = value;
        return 0;
    case CLI_FLAG: {
        int v = 1;
        if (value != NULL) {
            if (!strcmp(value, "1") || !strcmp(value, "true") || !strcmp(value, "yes"))
                v = 1;
            else if (!strcmp(value, "0") || !strcmp(value, "false") || !strcmp(value, "no") ||
                     !strcmp(value, ""))
                v = 0;
            else {
                fps_err_set(err, CLI_ERROR, 0, "usage", "%s: expected true or false, got '%s'",
                            source, value);
                return -1;
            }
        }
        *(int *)field = v;
        return 0;
    }
    case CLI_LIST: {
        cli_list *l = (cli_list *)field;
        const char **items = realloc(l->items, (l->len + 1) * sizeof *items);
        if (items == NULL) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: out of memory", source);
            return -1;
        }
        items[l->len++] = value;
        l->items = items;
        return 0;
    }
    case CLI_INT: {
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end != '\0') {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: expected an integer, got '%s'", source,
                        value);
            return -1;
        }
        if (o->min < o->max && (v < o->min || v > o->max)) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: %ld is out of range %.0f..%.0f", source, v,
                        o->min, o->max);
            return -1;
        }
        *(long *)field = v;
        return 0;
    }
    case CLI_DOUBLE: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end != '\0' || !isfinite(v)) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: expected a number, got '%s'", source,
                        value);
            return -1;
        }
        if (o->min < o->max && (v < o->min || v > o->max)) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: %g is out of range %g..%g", source, v,
                        o->min, o->max);
            return -1;
        }
        *(double *)field = v;
        return 0;
    }
    }
    return -1;
}

static const cli_opt *find(const cli_command *cmd, const char *name, size_t len)
{
    for (size_t i = 0; i < cmd->nopts; i++) {
        const cli_opt *o = &cmd->opts[i];
        if (strlen(o->name) == len && strncmp(o->name, name, len) == 0) return o;
    }
    return NULL;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, void *cfg, FILE *out, fps_err *err)
{
    /* Environment first, so flags override it. */
    for (size_t i = 0; i < cmd->nopts; i++) {
        const cli_opt *o = &cmd->opts[i];
        const char *v = o->env ? getenv(o->env) : NULL;
        if (v == NULL || (*v == '\0' && o->type != CLI_STR)) continue;
        if (o->type == CLI_LIST) {
            /* A list from the environment is comma-separated. */
            char *copy = strdup(v);
            if (copy == NULL) return CLI_ERROR;
            char *save = NULL;
            /* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): deliberate leak, see below */
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                /* The tokens must outlive this call: leak the copy deliberately
                 * (process-lifetime configuration, parsed once). */
                if (set_value(o, t, o->env, cfg, err)) return CLI_ERROR;
            }
            continue;
        }
        if (set_value(o, v, o->env, cfg, err)) return CLI_ERROR;
    }
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) {
            cli_usage(cmd, out);
            return CLI_HELP;
        }
        if (strncmp(arg, "--", 2) != 0) {
            fps_err_set(err, CLI_ERROR, 0, "usage",
                        "%s: unexpected argument '%s' (try '%s --help')", cmd->name, arg,
                        cmd->name);
            return CLI_ERROR;
        }
        const char *eq = strchr(arg, '=');
        size_t namelen = eq ? (size_t)(eq - arg) : strlen(arg);
        const cli_opt *o = find(cmd, arg, namelen);
        if (o == NULL) {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: unknown flag '%.*s' (try '%s --help')",
                        cmd->name, (int)namelen, arg, cmd->name);
            return CLI_ERROR;
        }
        const char *value = NULL;
        if (o->type == CLI_FLAG) {
            value = eq ? eq + 1 : NULL;
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fps_err_set(err, CLI_ERROR, 0, "usage", "%s: flag %s needs a value (%s)", cmd->name,
                        o->name, o->metavar ? o->metavar : "VALUE");
            return CLI_ERROR;
        }
        if (set_value(o, value, o->name, cfg, err)) return CLI_ERROR;
    }
    return CLI_OK;
}

void cli_usage(const cli_command *cmd, FILE *out)
{
    fprintf(out, "usage: failproofai-sidecar %s [flags]\n\n%s\n\nflags:\n", cmd->name,
            cmd->summary);
    for (size_t i = 0; i < cmd->nopts; i++) {
        const cli_opt *o = &cmd->opts[i];
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", o->name, o->metavar ? " " : "",
                 o->metavar ? o->metavar : "");
        fprintf(out, "  %-30s %s", left, o->help ? o->help : "");
        if (o->env) fprintf(out, " [env %s]", o->env);
        fputc('\n', out);
    }
    fprintf(out, "  %-30s %s\n", "--help", "show this help");
}

void cli_list_free(cli_list *l)
{
    free(l->items);
    l->items = NULL;
    l->len = 0;
}
