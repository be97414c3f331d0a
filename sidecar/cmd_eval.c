/* sidecar/cmd_eval: `eval` and `check` (docs/LANGUAGE.md, last section). Every
 * evaluation, and every compile check, runs in the jail (sandbox/jail/sbx.h).
 * `--batch` owns the grouping of its lines into jail sessions: consecutive
 * lines on the same transcript (the same `transcript` text, or both on the
 * command's) share one session, up to --session-size lines each; sessions
 * run concurrently, up to the sandbox slot count, and the outcome lines are
 * printed in input order. Each distinct transcript is read and its session
 * image built once. */
#include "common/cli.h"
#include "common/log.h"
#include "sandbox/jail/sbx.h"
#include "sandbox/lang/simg.h"
#include "sidecar/commands.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    const char *transcript, *expr, *file, *batch, *kind, *eval_key;
    double timeout;
    long sandboxes, repeat, memory_mb, session_size;
    int strict;
} eval_config;

#define OFF(f) offsetof(eval_config, f)
#define OPT_EXPR                                                                                   \
    {                                                                                              \
        "--expr", NULL, CLI_STR, OFF(expr), "SRC", "expression source", 0, 0                       \
    }
#define OPT_FILE                                                                                   \
    {                                                                                              \
        "--file", NULL, CLI_STR, OFF(file), "PATH", "file holding the expression", 0, 0            \
    }
#define OPT_BATCH                                                                                  \
    {                                                                                              \
        "--batch", NULL, CLI_STR, OFF(batch), "PATH|-", "JSON lines {kind, source, eval_key?}", 0, \
            0                                                                                      \
    }
#define OPT_KIND                                                                                   \
    {                                                                                              \
        "--kind", NULL, CLI_STR, OFF(kind), "KIND", "raw|condition|evaluator (default evaluator)", \
            0, 0                                                                                   \
    }
#define OPT_STRICT                                                                                 \
    {                                                                                              \
        "--strict", NULL, CLI_FLAG, OFF(strict), NULL,                                             \
            "with --batch, exit 1 if any outcome is not ok", 0, 0                                  \
    }
#define OPT_TIMEOUT                                                                                \
    {                                                                                              \
        "--timeout", NULL, CLI_DOUBLE, OFF(timeout), "S",                                          \
            "budget per evaluation (default 30, max 60)", 0.001, 60                                \
    }
#define OPT_SANDBOXES                                                                              \
    {                                                                                              \
        "--max-sandboxes", "FAILPROOFAI_SIDECAR_MAX_SANDBOXES", CLI_INT, OFF(sandboxes), "N",      \
            "concurrent sandboxes (default 4)", 1, 64                                              \
    }
#define OPT_MEMORY                                                                                 \
    {                                                                                              \
        "--sandbox-memory-mb", "FAILPROOFAI_SIDECAR_SANDBOX_MEMORY_MB", CLI_INT, OFF(memory_mb),   \
            "N", "address-space limit per sandbox in MiB (default 512)", 32, 65536                 \
    }
#define OPT_SESSION                                                                                \
    {                                                                                              \
        "--session-size", NULL, CLI_INT, OFF(session_size), "N",                                   \
            "at most N consecutive --batch lines on one transcript (and their --repeat runs) "     \
            "share a sandbox session (default 64; 1 = each evaluation in a child of its own)",     \
            1, 1000000                                                                             \
    }
#define OPT_REPEAT                                                                                 \
    {                                                                                              \
        "--repeat", NULL, CLI_INT, OFF(repeat), "N", "evaluate each input N times (benchmarks)",   \
            1, 1000000                                                                             \
    }

static const cli_opt eval_opts[] = {
    {"--transcript", NULL, CLI_STR, OFF(transcript), "FILE",
     "transcript JSON file (default: an empty session)", 0, 0},
    OPT_EXPR,
    OPT_FILE,
    OPT_BATCH,
    OPT_KIND,
    {"--eval-key", NULL, CLI_STR, OFF(eval_key), "K", "eval key of the primary result (default q)",
     0, 0},
    OPT_STRICT,
    OPT_TIMEOUT,
    OPT_SANDBOXES,
    OPT_MEMORY,
    OPT_SESSION,
    OPT_REPEAT,
};
/* check runs only the source checks: no transcript, no eval key. */
static const cli_opt check_opts[] = {
    OPT_EXPR,    OPT_FILE,      OPT_BATCH,  OPT_KIND,   OPT_STRICT,
    OPT_TIMEOUT, OPT_SANDBOXES, OPT_MEMORY, OPT_REPEAT,
};
static const cli_command eval_command = {
    "eval", "Evaluate expressions against a transcript in the sandbox.", eval_opts,
    sizeof eval_opts / sizeof eval_opts[0]};
static const cli_command check_command = {"check",
                                          "Compile-check expressions without running them.",
                                          check_opts, sizeof check_opts / sizeof check_opts[0]};

static const char exit_codes_help[] =
    "\nGive exactly one of --expr, --file, --batch. Each outcome is one JSON line on stdout.\n"
    "exit codes:\n"
    "  --expr/--file   0 if the outcome is ok, 1 if not (compile, runtime or limit)\n"
    "  --batch         0 once every line is evaluated, whatever the outcomes;\n"
    "                  with --strict, 1 if any outcome is not ok\n"
    "  2               usage error: bad flags, unreadable files, malformed batch lines\n";
/* eval's batch lines and their sessions (check has neither). */
static const char eval_batch_help[] =
    "batch lines: {\"kind\", \"source\", \"eval_key\"?, \"transcript\"?}. \"transcript\" is a\n"
    "transcript file's path (relative to the current directory) for that line;\n"
    "without it (or null) the line uses --transcript. Lines are on the same\n"
    "transcript when their \"transcript\" strings are identical byte for byte (both\n"
    "absent counts as the same): consecutive such lines share one sandbox session\n"
    "(one child, the image mapped once, each evaluation with its own budgets and\n"
    "fresh state), at most N lines each (N: --session-size). Blank and malformed\n"
    "lines do not break a run. How lines are grouped never changes an outcome.\n";

/* The empty session `eval` uses without --transcript: no events. */
static const char empty_session[] =
    "{\"schema_version\": \"2\", \"assignment_id\": \"\", "
    "\"session_id\": \"\", \"session_revision_id\": \"\", \"agent_id\": \"\", "
    "\"environment\": \"\", \"started_at\": \"1970-01-01T00:00:00.000000Z\", "
    "\"ended_at\": \"1970-01-01T00:00:00.000000Z\", \"event_count\": 0, \"events\": []}";

/* One input: owned strings. `line` is the outcome once evaluated;
 * `transcript` the line's own transcript path (NULL: the command's). */
typedef struct {
    char *source, *eval_key, *line, *transcript;
    size_t source_len;
    size_t image;  /* index into the batch's images once resolved */
    size_t lineno; /* the --batch line it came from (1-based; 0 without --batch) */
    lang_kind kind;
    int done, ok;
} eval_item;

/* One transcript's session image, built once for the whole batch: `path`
 * NULL for the command's own (--transcript or the empty session); `error`
 * (owned) instead of `img` when it could not be built. */
typedef struct {
    const char *path; /* borrowed from the first item naming it */
    sbx_image *img;   /* owned */
    char *error;
} eval_image;

/* Consecutive items [start, end) evaluated in one jail session. */
typedef struct {
    size_t start, end, image;
} eval_group;

typedef struct {
    sbx_pool *pool;
    eval_image *images; /* borrowed */
    eval_item *items;
    size_t n;
    eval_group *groups;
    size_t ngroups;
    atomic_size_t next; /* the next group to take */
    double timeout;
    int check_only;
    long repeat;
    long session_size; /* 1: every evaluation alone, --repeat's too */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} eval_job;

/* A file this command cannot read (fps_err name "unreadable"); apart from
 * simg.h's codes, which build_image also returns. */
enum { EVAL_EUNREADABLE = -10 };

static char *read_file(const char *path, size_t *len, fps_err *err)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (f == NULL) {
        fps_err_set(err, EVAL_EUNREADABLE, 0, "unreadable", "cannot read %s: %s", path,
                    strerror(errno));
        return NULL;
    }
    /* a regular file is read in one go (a transcript can be 25 MiB) */
    struct stat st;
    size_t cap = 4096, n = 0;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        cap = (size_t)st.st_size + 2;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f);
    if (f != stdin) fclose(f);
    if (buf == NULL || bad) {
        fps_err_set(err, EVAL_EUNREADABLE, 0, "unreadable", "cannot read %s: %s", path,
                    buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The session image of the transcript file at `path`, straight from its
 * bytes (Python json semantics, as the language's `session` reads it). A
 * regular file is mapped, not copied: the parser reads it in place. 0, or
 * simg.h's codes, or EVAL_EUNREADABLE when the file cannot be read. */
static int build_image(const char *path, void **simg, size_t *simg_len, fps_err *e)
{
    int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
        size_t len = (size_t)st.st_size;
        void *text = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
        close(fd);
        if (text == MAP_FAILED)
            return fps_err_set(e, EVAL_EUNREADABLE, 0, "unreadable", "cannot read %s: %s", path,
                               strerror(errno));
        int rc = simg_build_text(text, len, NULL, 0, simg, simg_len, e);
        munmap(text, len);
        return rc;
    }
    if (fd >= 0) close(fd);
    size_t len = 0;
    char *text = read_file(path, &len, e);
    if (text == NULL) return e->code;
    int rc = simg_build_text(text, len, NULL, 0, simg, simg_len, e);
    free(text);
    return rc;
}

static char *input_error_line(size_t lineno, const char *msg)
{
    json_t *o = json_object();
    char text[300];
    snprintf(text, sizeof text, "batch line %zu: %s", lineno, msg);
    json_object_set_new(o, "ok", json_false());
    json_object_set_new(o, "stage", json_string("input"));
    json_object_set_new(o, "message", json_string(text));
    char *s = json_dumps(o, JSON_PRESERVE_ORDER);
    json_decref(o);
    return s;
}

/* Parses the --batch text into items. Malformed lines become items whose
 * outcome is already set (an "input" error); *bad counts them. */
static eval_item *parse_batch(char *text, size_t len, const char *def_key, size_t *count, int *bad)
{
    size_t cap = 64, n = 0, lineno = 0;
    eval_item *items = calloc(cap, sizeof *items);
    char *p = text, *end = text + len;
    while (items != NULL && p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        lineno++;
        size_t ll = (size_t)(le - p);
        if (ll > 0 && p[ll - 1] == '\r') ll--;
        int blank = 1;
        for (size_t i = 0; i < ll; i++)
            if (p[i] != ' ' && p[i] != '\t') blank = 0;
        if (!blank) {
            if (n == cap) {
                eval_item *ni = realloc(items, cap * 2 * sizeof *items);
                if (ni == NULL) break;
                items = ni;
                cap *= 2;
            }
            eval_item *it = &items[n++];
            memset(it, 0, sizeof *it);
            it->lineno = lineno;
            json_error_t jerr;
            json_t *o = json_loadb(p, ll, 0, &jerr);
            const char *kind = NULL, *key = def_key;
            json_t *src = json_object_get(o, "source");
            json_t *jk = json_object_get(o, "kind"), *jkey = json_object_get(o, "eval_key");
            json_t *jt = json_object_get(o, "transcript");
            if (!json_is_object(o)) {
                it->line = input_error_line(lineno, "not a JSON object");
            } else if (!json_is_string(src)) {
                it->line = input_error_line(lineno, "\"source\" must be a string");
            } else if (jk != NULL && !json_is_string(jk)) {
                it->line = input_error_line(lineno, "\"kind\" must be a string");
            } else if (jkey != NULL && !json_is_null(jkey) && !json_is_string(jkey)) {
                it->line = input_error_line(lineno, "\"eval_key\" must be a string");
            } else if (jt != NULL && !json_is_null(jt) &&
                       (!json_is_string(jt) || json_string_length(jt) == 0 ||
                        strlen(json_string_value(jt)) != json_string_length(jt))) {
                it->line = input_error_line(lineno, "\"transcript\" must be a file path");
            } else if (json_is_string(jt) && !strcmp(json_string_value(jt), "-")) {
                it->line = input_error_line(
                    lineno, "\"transcript\" cannot be standard input (\"-\"): name a file");
            } else {
                kind = jk ? json_string_value(jk) : "evaluator";
                if (lang_kind_parse(kind, &it->kind) != 0) {
                    it->line =
                        input_error_line(lineno, "\"kind\" must be raw, condition or evaluator");
                } else {
                    if (json_is_string(jkey)) key = json_string_value(jkey);
                    it->source_len = json_string_length(src);
                    it->source = malloc(it->source_len + 1);
                    it->eval_key = strdup(key);
                    if (it->source) memcpy(it->source, json_string_value(src), it->source_len + 1);
                    if (json_is_string(jt)) it->transcript = strdup(json_string_value(jt));
                }
            }
            if (it->line != NULL) {
                it->done = 1;
                (*bad)++;
            }
            json_decref(o);
        }
        p = le + 1;
    }
    *count = n;
    return items;
}

static void item_done(eval_job *job, eval_item *it, char *line, int ok)
{
    pthread_mutex_lock(&job->mu);
    it->line = line
                   ? line
                   : strdup("{\"ok\": false, \"stage\": \"jail\", \"message\": \"out of memory\"}");
    it->ok = line != NULL && ok;
    it->done = 1;
    pthread_cond_broadcast(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

/* Evaluates the group's items in order (each --repeat times): in one jail
 * session when there is more than one evaluation (and --session-size is not
 * 1), else each alone (sbx_eval); compile checks each on their own
 * (sbx_check). */
static void eval_group_run(eval_job *job, const eval_group *g)
{
    sbx_image *img = job->images[g->image].img;
    size_t evals = (g->end - g->start) * (size_t)job->repeat;
    sbx_session *ss = NULL;
    if (!job->check_only && evals > 1 && job->session_size > 1)
        ss = sbx_session_open(job->pool, img);
    for (size_t i = g->start; i < g->end; i++) {
        eval_item *it = &job->items[i];
        if (it->done) continue;
        sbx_request req;
        memset(&req, 0, sizeof req);
        req.kind = it->kind;
        req.source = it->source ? it->source : "";
        req.source_len = it->source ? it->source_len : 0;
        req.eval_key = it->eval_key;
        req.timeout_s = job->timeout;
        req.image = img;
        char *line = NULL;
        int ok = 0;
        for (long r = 0; r < job->repeat; r++) {
            sbx_outcome out;
            if (job->check_only)
                sbx_check(job->pool, &req, &out);
            else if (ss != NULL)
                sbx_session_eval(ss, &req, &out);
            else
                sbx_eval(job->pool, &req, &out); /* alone, or no memory for a session */
            free(line);
            line = sbx_outcome_line(&out);
            ok = out.status == SBX_OK && json_is_true(json_object_get(out.json, "ok"));
            sbx_outcome_free(&out);
        }
        item_done(job, it, line, ok);
    }
    sbx_session_close(ss);
}

static void *eval_worker(void *arg)
{
    eval_job *job = arg;
    for (;;) {
        size_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->ngroups) break;
        eval_group_run(job, &job->groups[i]);
    }
    return NULL;
}

/* Evaluates every group with `nthreads` workers; prints outcomes in order
 * as they become available. */
static void run_items(eval_job *job, int nthreads)
{
    pthread_t th[64];
    int started = 0;
    if (nthreads > 64) nthreads = 64;
    if ((size_t)nthreads > job->ngroups) nthreads = (int)job->ngroups;
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[started], NULL, eval_worker, job) == 0) started++;
    if (started == 0) eval_worker(job);
    for (size_t i = 0; i < job->n; i++) {
        pthread_mutex_lock(&job->mu);
        while (!job->items[i].done)
            pthread_cond_wait(&job->cv, &job->mu);
        pthread_mutex_unlock(&job->mu);
        fputs(job->items[i].line, stdout);
        fputc('\n', stdout);
        if (job->n > 1) fflush(stdout);
    }
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    fflush(stdout);
}

/* The image of transcript `path` (NULL: the command's, images[0]): found
 * among those built so far or built now and appended. Returns its index. */
static size_t image_for(eval_image *images, size_t *nimages, const char *path)
{
    if (path == NULL) return 0;
    for (size_t k = 1; k < *nimages; k++)
        if (!strcmp(images[k].path, path)) return k;
    eval_image *im = &images[(*nimages)++];
    memset(im, 0, sizeof *im);
    im->path = path;
    void *simg = NULL;
    size_t simg_len = 0;
    fps_err e;
    if (build_image(path, &simg, &simg_len, &e) == 0) im->img = sbx_image_adopt(simg, simg_len, &e);
    if (im->img == NULL) {
        size_t cap = strlen(path) + strlen(e.msg) + 32;
        im->error = malloc(cap);
        if (im->error) snprintf(im->error, cap, "transcript %s: %s", path, e.msg);
    }
    return *nimages - 1;
}

/* Resolves every item's transcript when `resolve` (an unusable one makes
 * that line an "input" error, *bad counting it; without `resolve`, compile
 * checks, every item is on images[0]) and splits the items into groups:
 * consecutive items on one image, at most `size` evaluated items each.
 * 0, or -1 when out of memory. */
static int plan_groups(eval_item *items, size_t n, eval_image *images, size_t *nimages, int resolve,
                       long size, int *bad, eval_group **groups, size_t *ngroups)
{
    eval_group *gs = calloc(n ? n : 1, sizeof *gs);
    if (gs == NULL) return -1;
    size_t ng = 0, in_group = 0;
    for (size_t i = 0; i < n; i++) {
        eval_item *it = &items[i];
        if (!it->done && resolve) {
            it->image = image_for(images, nimages, it->transcript);
            if (images[it->image].img == NULL) {
                const char *why =
                    images[it->image].error ? images[it->image].error : "transcript: out of memory";
                it->line = input_error_line(it->lineno, why);
                it->done = 1;
                (*bad)++;
            }
        }
        if (it->done) { /* not evaluated: joins whatever group is open */
            if (ng > 0) gs[ng - 1].end = i + 1;
            continue;
        }
        if (ng == 0 || gs[ng - 1].image != it->image || in_group >= (size_t)size) {
            gs[ng].start = ng > 0 ? gs[ng - 1].end : 0;
            gs[ng].image = it->image;
            ng++;
            in_group = 0;
        }
        gs[ng - 1].end = i + 1;
        in_group++;
    }
    *groups = gs;
    *ngroups = ng;
    return 0;
}

static int usage_error(const char *cmd, const char *msg)
{
    fprintf(stderr, "failproofai-sidecar %s: %s (try 'failproofai-sidecar %s --help')\n", cmd, msg,
            cmd);
    return 2;
}

static int common(const cli_command *cmd, int check_only, int argc, char **argv)
{
    eval_config cfg = {.kind = "evaluator",
                       .eval_key = "q",
                       .timeout = 30,
                       .sandboxes = 4,
                       .repeat = 1,
                       .memory_mb = 512,
                       .session_size = 64};
    fps_err err;
    int rc = cli_parse(cmd, argc, argv, &cfg, stdout, &err);
    if (rc == CLI_HELP) {
        fputs(exit_codes_help, stdout);
        if (!check_only) fputs(eval_batch_help, stdout);
        return 0;
    }
    if (rc != CLI_OK) {
        fprintf(stderr, "failproofai-sidecar: %s\n", err.msg);
        return 2;
    }
    int sources = (cfg.expr != NULL) + (cfg.file != NULL) + (cfg.batch != NULL);
    if (sources != 1) return usage_error(cmd->name, "give exactly one of --expr, --file, --batch");
    lang_kind kind;
    if (lang_kind_parse(cfg.kind, &kind) != 0)
        return usage_error(cmd->name, "--kind must be raw, condition or evaluator");

    int status = 2;
    eval_image *images = NULL; /* [0]: the command's transcript; then the lines' own */
    size_t nimages = 1;
    eval_group *groups = NULL;
    size_t ngroups = 0;
    sbx_pool *pool = NULL;
    eval_item *items = NULL;
    size_t nitems = 0;
    int bad = 0;
    char *batch_text = NULL;

    images = calloc(1, sizeof *images);
    if (images == NULL) goto done;
    if (!check_only) {
        void *simg = NULL;
        size_t simg_len = 0;
        fps_err e;
        int built = cfg.transcript ? build_image(cfg.transcript, &simg, &simg_len, &e)
                                   : simg_build_text(empty_session, sizeof empty_session - 1, NULL,
                                                     0, &simg, &simg_len, &e);
        images[0].img = built == 0 ? sbx_image_adopt(simg, simg_len, &e) : NULL;
        if (images[0].img == NULL) {
            fprintf(stderr, "failproofai-sidecar %s: transcript %s: %s\n", cmd->name,
                    cfg.transcript ? cfg.transcript : "(empty session)", e.msg);
            goto done;
        }
    }

    if (cfg.batch != NULL) {
        size_t len;
        batch_text = read_file(cfg.batch, &len, &err);
        if (batch_text == NULL) {
            fprintf(stderr, "failproofai-sidecar %s: %s\n", cmd->name, err.msg);
            goto done;
        }
        items = parse_batch(batch_text, len, cfg.eval_key, &nitems, &bad);
        if (items == NULL) {
            fprintf(stderr, "failproofai-sidecar %s: out of memory\n", cmd->name);
            goto done;
        }
    } else {
        items = calloc(1, sizeof *items);
        if (items == NULL) goto done;
        nitems = 1;
        items[0].kind = kind;
        items[0].eval_key = strdup(cfg.eval_key);
        if (cfg.expr != NULL) {
            items[0].source = strdup(cfg.expr);
            items[0].source_len = strlen(cfg.expr);
        } else {
            items[0].source = read_file(cfg.file, &items[0].source_len, &err);
            if (items[0].source == NULL) {
                fprintf(stderr, "failproofai-sidecar %s: %s\n", cmd->name, err.msg);
                goto done;
            }
        }
    }

    if (!check_only) { /* the lines' own transcripts: room for one per item */
        eval_image *ni = realloc(images, (nitems + 1) * sizeof *images);
        if (ni == NULL) goto done;
        images = ni;
    }
    if (plan_groups(items, nitems, images, &nimages, !check_only, check_only ? 1 : cfg.session_size,
                    &bad, &groups, &ngroups) != 0) {
        fprintf(stderr, "failproofai-sidecar %s: out of memory\n", cmd->name);
        goto done;
    }

    /* Outcome lines go to stdout; only problems belong on stderr. */
    if (log_get_level() < LOG_WARN) log_set_level(LOG_WARN);
    sbx_config sc;
    memset(&sc, 0, sizeof sc);
    sc.max_sandboxes = (int)cfg.sandboxes;
    sc.memory_mb = cfg.memory_mb;
    /* Pre-started children pay off only when there is more than one input. */
    sc.prestart = nitems * (size_t)cfg.repeat > 1 ? 0 : -1;
    /* ... and so does the zygote (one exec'd child is cheaper for one). */
    sc.no_zygote = sc.prestart < 0;
    fps_err pe;
    pool = sbx_pool_new(&sc, &pe);
    if (pool == NULL) {
        fprintf(stderr, "failproofai-sidecar %s: %s\n", cmd->name, pe.msg);
        status = 1;
        goto done;
    }
    eval_job job;
    memset(&job, 0, sizeof job);
    job.pool = pool;
    job.images = images;
    job.items = items;
    job.n = nitems;
    job.groups = groups;
    job.ngroups = ngroups;
    atomic_init(&job.next, 0);
    job.timeout = cfg.timeout;
    job.check_only = check_only;
    job.repeat = cfg.repeat;
    job.session_size = cfg.session_size;
    pthread_mutex_init(&job.mu, NULL);
    pthread_cond_init(&job.cv, NULL);
    run_items(&job, (int)cfg.sandboxes);
    pthread_cond_destroy(&job.cv);
    pthread_mutex_destroy(&job.mu);
    size_t not_ok = 0;
    for (size_t i = 0; i < nitems; i++)
        not_ok += !items[i].ok;
    if (bad)
        status = 2;
    else if (cfg.batch == NULL || cfg.strict)
        status = not_ok ? 1 : 0;
    else
        status = 0;
    if (bad)
        fprintf(stderr,
                "failproofai-sidecar %s: %d malformed batch line%s (see the \"input\" outcomes)\n",
                cmd->name, bad, bad == 1 ? "" : "s");
done:
    for (size_t i = 0; items != NULL && i < nitems; i++) {
        free(items[i].source);
        free(items[i].eval_key);
        free(items[i].line);
        free(items[i].transcript);
    }
    free(items);
    free(groups);
    free(batch_text);
    sbx_pool_free(pool);
    for (size_t k = 0; images != NULL && k < nimages; k++) {
        sbx_image_release(images[k].img);
        free(images[k].error);
    }
    free(images);
    return status;
}

int cmd_eval(int argc, char **argv)
{
    return common(&eval_command, 0, argc, argv);
}

int cmd_check(int argc, char **argv)
{
    return common(&check_command, 1, argc, argv);
}
