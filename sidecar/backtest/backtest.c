/* sidecar/backtest/backtest: the engine (backtest.h): reads the sessions
 * given as paths, evaluates the candidate's and the baseline's definitions
 * on each (one session image per session, every evaluation in the jail,
 * mapped to run statuses by sidecar/evaluation/), writes a row per
 * (session, eval_key) and builds the summary. */
#include "sidecar/backtest/backtest.h"

#include "common/canonjson.h"
#include "common/strbuf.h"
#include "common/timeutil.h"
#include "sandbox/lang/simg.h"
#include "store/archive.h"
#include "sidecar/evaluation/evaluation.h"
#include "sidecar/local/local.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <nettle/sha2.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *source; /* "path" or "path:line" */
    char *text;   /* owned transcript bytes; NULL: read when evaluated (archive_id, file) */
    size_t len;
    int file;            /* a whole regular file: `source` is read when evaluated (text NULL) */
    int64_t archive_id;  /* > 0: an archive entry, read when evaluated (text NULL) */
    char *assignment_id; /* owned; an archive entry's assignment (its live runs), else NULL */
    json_t *rows;        /* array of rows once evaluated; NULL: not in shard / input error */
} bt_input;

struct backtest {
    backtest_config cfg;
    json_t *cand, *base;    /* definition arrays (owned); base NULL: none */
    int production;         /* the baseline is the live runs' stored results */
    char *archive_path;     /* owned; NULL: no archive needed (sessions from paths only) */
    double since;           /* > 0: archive entries archived at or after this time */
    store_archive *archive; /* owned, read-only; NULL: sessions from paths, or it failed */
    local_client *local;    /* owned; NULL: no --local */
    json_t *local_urls;     /* eval_key -> URL (owned) */
    bt_input *in;
    size_t n, cap;
    json_t *input_errors;
    atomic_size_t next;
    atomic_long done, total;
    atomic_int cancel;
    pthread_mutex_t mu;
    pthread_t th;
    backtest_state state;
    json_t *summary;
    char error[BACKTEST_ERROR_MAX]; /* failed: why (the first reason; under mu) */
    int failed;                     /* under mu */
};

const char *backtest_state_name(backtest_state s)
{
    static const char *const n[] = {"queued", "running", "done", "failed", "cancelled"};
    return n[s];
}

/* The run cannot go on: records why (the first reason wins) and stops the
 * workers as a cancel does (running evaluations are killed); the backtest
 * ends "failed". */
__attribute__((format(printf, 2, 3))) static void fail(backtest *bt, const char *fmt, ...)
{
    pthread_mutex_lock(&bt->mu);
    if (!bt->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(bt->error, sizeof bt->error, fmt, ap);
        va_end(ap);
        bt->failed = 1;
    }
    pthread_mutex_unlock(&bt->mu);
    atomic_store(&bt->cancel, 1);
}

/* Writes one JSON value and a newline to rows_out (mu held). */
static void out_line(backtest *bt, const json_t *v)
{
    /* canonical JSON: floats as CPython's repr, as a live run's result */
    strbuf sb;
    strbuf_init(&sb);
    if (canonjson_append(&sb, v) == 0) {
        strbuf_putc(&sb, '\n');
        fwrite(sb.data, 1, sb.len, bt->cfg.rows_out);
    }
    strbuf_free(&sb);
}

/* Records an input error; rows_out gets it as an {"input_error": ...} line,
 * so that backtest_merge reports the shards' input errors. */
static void input_error(backtest *bt, const char *source, const char *msg)
{
    json_t *e = json_pack("{s:s, s:s}", "source", source, "message", msg);
    pthread_mutex_lock(&bt->mu);
    json_array_append(bt->input_errors, e);
    if (bt->cfg.rows_out) {
        json_t *line = json_pack("{s:O}", "input_error", e);
        out_line(bt, line);
        json_decref(line);
    }
    pthread_mutex_unlock(&bt->mu);
    json_decref(e);
}

/* Appends an input and returns it (borrowed: the next add may move it).
 * `text` is copied; NULL: its bytes are read when it is evaluated (the
 * caller marks it file or archive_id). */
static bt_input *add_input(backtest *bt, const char *source, const char *text, size_t len)
{
    if (bt->n == bt->cap) {
        bt->cap = bt->cap ? bt->cap * 2 : 64;
        bt->in = realloc(bt->in, bt->cap * sizeof *bt->in);
        if (bt->in == NULL) abort();
    }
    bt_input *it = &bt->in[bt->n++];
    memset(it, 0, sizeof *it);
    it->source = strdup(source);
    if (it->source == NULL) abort();
    if (text == NULL) return it;
    it->text = malloc(len + 1);
    if (it->text == NULL) abort();
    memcpy(it->text, text, len);
    it->text[len] = '\0';
    it->len = len;
    return it;
}

/* A file's bytes, NUL-terminated (malloc'd; *len without the NUL), or NULL
 * with errno set. A regular file is read into a buffer of its size at once. */
static char *slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat st;
    size_t cap = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536;
    size_t n = 0;
    char *buf = malloc(cap);
    if (buf == NULL) abort();
    for (;;) {
        if (n + 1 == cap) { /* grew since the fstat, or not a regular file */
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (nb == NULL) abort();
            buf = nb;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int add_path(backtest *bt, const char *path, int top, fps_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return fps_err_set(err, BT_EIO, 0, "unreadable", "--sessions %s: %s", path,
                           strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        struct dirent **names = NULL;
        int k = scandir(path, &names, NULL, alphasort);
        if (k < 0)
            return fps_err_set(err, BT_EIO, 0, "unreadable", "--sessions %s: %s", path,
                               strerror(errno));
        int rc = 0;
        for (int i = 0; i < k; i++) {
            const char *nm = names[i]->d_name;
            if (rc == 0 && nm[0] != '.' && (ends_with(nm, ".json") || ends_with(nm, ".jsonl"))) {
                char *p = NULL;
                if (asprintf(&p, "%s/%s", path, nm) < 0) abort();
                rc = add_path(bt, p, 0, err);
                free(p);
            }
            free(names[i]);
        }
        free(names);
        return rc;
    }
    (void)top;
    int lines = ends_with(path, ".jsonl") || ends_with(path, ".ndjson");
    if (!lines && S_ISREG(st.st_mode)) {
        /* One session: checked readable now (an unreadable path fails the
         * start) and read by the job that evaluates it, so that reading
         * every file is no serial step before the jobs start and only the
         * sessions in flight are in memory. */
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return fps_err_set(err, BT_EIO, 0, "unreadable", "--sessions %s: %s", path,
                               strerror(errno));
        close(fd);
        add_input(bt, path, NULL, 0)->file = 1;
        return 0;
    }
    size_t len = 0;
    char *text = slurp(path, &len);
    if (text == NULL)
        return fps_err_set(err, BT_EIO, 0, "unreadable", "--sessions %s: %s", path,
                           strerror(errno));
    if (lines) {
        size_t line = 0;
        for (char *p = text, *end = text + len; p < end;) {
            char *nl = memchr(p, '\n', (size_t)(end - p));
            char *le = nl ? nl : end;
            line++;
            int blank = 1;
            for (char *q = p; q < le; q++)
                if (*q != ' ' && *q != '\t' && *q != '\r') blank = 0;
            if (!blank) {
                char src[1100];
                snprintf(src, sizeof src, "%.1000s:%zu", path, line);
                add_input(bt, src, p, (size_t)(le - p));
            }
            p = le + 1;
        }
    } else {
        add_input(bt, path, text, len);
    }
    free(text);
    return 0;
}

static int load_defs(const char *text, const char *what, json_t **out, fps_err *err)
{
    json_error_t je;
    json_t *a = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_array(a)) {
        json_decref(a);
        return fps_err_set(err, BT_EINVALID, 0, "invalid_request",
                           "%s: expected a JSON array of definitions (%s, line %d)", what,
                           a ? "not an array" : je.text, je.line);
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *d = json_array_get(a, i);
        if (!json_is_object(d) || !json_is_string(json_object_get(d, "eval_key")) ||
            !json_is_string(json_object_get(d, "evaluator_source"))) {
            json_decref(a);
            return fps_err_set(err, BT_EINVALID, 0, "invalid_request",
                               "%s[%zu] must be an object with string eval_key and "
                               "evaluator_source",
                               what, i);
        }
    }
    *out = a;
    return 0;
}

static const char *jstr(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

static json_t *outcome_new(const char *status)
{
    return json_pack("{s:s, s:[], s:n}", "status", status, "results", "summary");
}

/* One definition on one session, as the live worker runs it. */
static json_t *run_local(backtest *bt, const json_t *d, const char *url, const bt_input *in,
                         const char *kind)
{
    const char *key = jstr(d, "eval_key");
    double t = bt->cfg.local_timeout_s > 0
                   ? bt->cfg.local_timeout_s
                   : json_number_value(json_object_get(d, "timeout_seconds"));
    local_target tg = {.endpoint = url,
                       .name = url,
                       .result_kind = kind,
                       .key = bt->cfg.local_secret,
                       .timeout_s = t};
    local_dispatch_request rq = {.evaluation_run_id = in->source,
                                 .eval_key = key,
                                 .eval_version = jstr(d, "eval_version"),
                                 .result_kind = kind,
                                 .timeout_s = t,
                                 .transcript = in->text,
                                 .transcript_len = in->len,
                                 .cancel = &bt->cancel};
    local_dispatch_result res;
    local_client_dispatch(bt->local, &tg, &rq, &res);
    json_t *o = outcome_new(evaluation_status_name(res.status));
    if (res.status == EVAL_RUN_SUCCEEDED) {
        if (evaluation_results_valid(res.results, key, kind)) {
            json_object_set(o, "results", res.results);
            if (res.summary) json_object_set_new(o, "summary", json_string(res.summary));
        } else {
            json_object_set_new(o, "status", json_string(evaluation_status_name(EVAL_RUN_FAILED)));
            json_object_set_new(o, "error_type", json_string("invalid_result"));
        }
    } else if (res.status != EVAL_RUN_CANCELLED) {
        json_object_set_new(o, "error_type",
                            json_string(res.error_code[0] ? res.error_code : "eval_error"));
    }
    local_dispatch_result_free(&res);
    return o;
}

/* One evaluation of `src` (borrowed) in the session's jail, with the
 * backtest's cancel flag and slot priority; fills *out (caller frees). */
static void session_eval(backtest *bt, sbx_session *ss, sbx_image *img, lang_kind kind,
                         const char *src, const char *key, double timeout_s, sbx_outcome *out)
{
    sbx_request rq = {.background = bt->cfg.background,
                      .kind = kind,
                      .source = src,
                      .source_len = strlen(src),
                      .eval_key = key,
                      .timeout_s = timeout_s,
                      .image = img,
                      .cancel = &bt->cancel,
                      .playground = bt->cfg.background};
    memset(out, 0, sizeof *out);
    sbx_session_eval(ss, &rq, out);
}

static json_t *evaluate(backtest *bt, const json_t *d, sbx_image *img, sbx_session *ss,
                        const bt_input *in, int candidate)
{
    const char *key = jstr(d, "eval_key"), *cond = jstr(d, "condition_source");
    const char *kind = jstr(d, "result_kind") ? jstr(d, "result_kind") : "score";
    double t = sbx_clamp_timeout(json_number_value(json_object_get(d, "timeout_seconds")));
    if (cond != NULL && *cond && json_is_true(json_object_get(d, "__rejected_condition"))) {
        json_t *o = outcome_new("skipped"); /* as live: a rejected condition is condition_error */
        json_object_set_new(o, "skip_reason", json_string("condition_error"));
        return o;
    }
    if (cond != NULL && *cond) {
        sbx_outcome out;
        session_eval(bt, ss, img, LANG_CONDITION, cond, key, t, &out);
        char rbuf[136];
        if (out.status == SBX_CANCELLED) {
            sbx_outcome_free(&out);
            return outcome_new(evaluation_status_name(EVAL_RUN_CANCELLED));
        }
        const char *reason = evaluation_condition_reason(&out, rbuf, sizeof rbuf);
        if (reason) {
            json_t *o = outcome_new("skipped");
            json_object_set_new(o, "skip_reason", json_string(reason));
            sbx_outcome_free(&out);
            return o;
        }
        sbx_outcome_free(&out);
    }
    const char *url = candidate ? json_string_value(json_object_get(bt->local_urls, key)) : NULL;
    if (url != NULL) return run_local(bt, d, url, in, kind);
    if (json_is_true(json_object_get(d, "__rejected_evaluator"))) {
        /* reported once, never run */
        json_t *o = outcome_new(evaluation_status_name(EVAL_RUN_FAILED));
        json_object_set_new(o, "error_type", json_string("compile_error"));
        return o;
    }
    sbx_outcome out;
    session_eval(bt, ss, img, LANG_EVALUATOR, jstr(d, "evaluator_source"), key, t, &out);
    json_t *o = NULL;
    const char *detail = "";
    sbx_end end = sbx_outcome_end(&out, &detail);
    if (end == SBX_END_OK) {
        json_t *res = json_object_get(out.json, "results");
        if (!evaluation_results_valid(res, key, kind)) {
            o = outcome_new(evaluation_status_name(EVAL_RUN_FAILED));
            json_object_set_new(o, "error_type", json_string("invalid_result"));
        } else {
            o = outcome_new(evaluation_status_name(EVAL_RUN_SUCCEEDED));
            json_object_set(o, "results", res);
            json_t *sm = json_object_get(out.json, "summary");
            if (json_is_string(sm)) json_object_set(o, "summary", sm);
        }
    } else {
        const char *code;
        char msg[512];
        eval_run_status st = evaluation_map_outcome(&out, &code, msg, sizeof msg);
        o = outcome_new(evaluation_status_name(st));
        if (st != EVAL_RUN_CANCELLED)
            json_object_set_new(o, "error_type",
                                json_string(end == SBX_END_COMPILE ? "compile_error"
                                            : end == SBX_END_CRASH ? "sandbox_error"
                                            : detail && *detail    ? detail
                                                                   : "eval_error"));
    }
    sbx_outcome_free(&out);
    return o;
}

static const json_t *find_def(const json_t *defs, const char *key)
{
    for (size_t i = 0; i < json_array_size(defs); i++)
        if (!strcmp(jstr(json_array_get(defs, i), "eval_key"), key)) return json_array_get(defs, i);
    return NULL;
}

static int is_error(const json_t *o)
{
    const char *s = jstr(o, "status");
    return o && s &&
           (!strcmp(s, evaluation_status_name(EVAL_RUN_FAILED)) ||
            !strcmp(s, evaluation_status_name(EVAL_RUN_TIMED_OUT)));
}

static const json_t *primary_item(const json_t *o, const char *key)
{
    if (o == NULL || strcmp(jstr(o, "status"), evaluation_status_name(EVAL_RUN_SUCCEEDED)) != 0)
        return NULL;
    const json_t *res = json_object_get(o, "results");
    for (size_t i = 0; i < json_array_size(res); i++)
        if (!strcmp(jstr(json_array_get(res, i), "result_key") ?: "", key))
            return json_array_get(res, i);
    return NULL;
}

/* 1 pass, 0 fail, -1 no pass value. */
static int pass_value(const json_t *o, const char *key)
{
    const json_t *it = primary_item(o, key);
    const char *k = jstr(it, "result_kind");
    if (it == NULL || k == NULL || !strcmp(k, "metric")) return -1;
    const json_t *b = json_object_get(it, "bool_value");
    return json_is_boolean(b) ? json_is_true(b) : -1;
}

static int same_json(const json_t *a, const json_t *b)
{
    if (a == NULL || b == NULL) return a == b;
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_json(json_array_get(a, i), json_array_get(b, i))) return 0;
        return 1;
    }
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return 0;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)a, k, v)
        {
            if (!same_json(v, json_object_get(b, k))) return 0;
        }
        return 1;
    }
    return json_equal(a, b);
}

static json_t *deltas(const json_t *b, const json_t *c)
{
    json_t *d = json_object();
    const char *ok = evaluation_status_name(EVAL_RUN_SUCCEEDED);
    if (b == NULL || strcmp(jstr(b, "status"), ok) || strcmp(jstr(c, "status"), ok)) return d;
    const json_t *rb = json_object_get(b, "results"), *rc = json_object_get(c, "results");
    for (size_t i = 0; i < json_array_size(rc); i++) {
        const json_t *ic = json_array_get(rc, i);
        const json_t *nc = json_object_get(ic, "numeric_value");
        if (!json_is_number(nc)) continue;
        for (size_t j = 0; j < json_array_size(rb); j++) {
            const json_t *ib = json_array_get(rb, j);
            const json_t *nb = json_object_get(ib, "numeric_value");
            if (json_is_number(nb) &&
                !strcmp(jstr(ib, "result_key") ?: "", jstr(ic, "result_key") ?: ""))
                json_object_set_new(d, jstr(ic, "result_key"),
                                    json_real(json_number_value(nc) - json_number_value(nb)));
        }
    }
    return d;
}

/* The error_type of a stored live run: what the candidate's outcome would
 * say for the same end (the run kept only its error code and message). */
static const char *stored_error_type(const store_archive_baseline_run *r, char *buf, size_t cap)
{
    static const char raised[] = "evaluation raised ";
    const char *m = r->error_message ? r->error_message : "";
    if (!strcmp(r->status, evaluation_status_name(EVAL_RUN_TIMED_OUT))) return "timeout";
    if (!strncmp(m, raised, sizeof raised - 1)) {
        snprintf(buf, cap, "%s", m + sizeof raised - 1);
        return buf;
    }
    if (!strncmp(m, "evaluator source rejected", 25)) return "compile_error";
    if (!strcmp(m, EVALUATION_NO_PRIMARY)) return "invalid_result";
    if (r->error_code && !strcmp(r->error_code, "sandbox_error")) return "sandbox_error";
    return r->error_code && *r->error_code ? r->error_code : "eval_error";
}

/* eval_key -> OUTCOME of the production baseline for a session (owned),
 * or NULL with why in err (the backtest fails: every row would read "no
 * baseline", a wrong answer, not a partial one). */
static json_t *production_outcomes(backtest *bt, const char *sid, char *err, size_t cap)
{
    json_t *map = json_object();
    store_archive_baseline_run *r = NULL;
    size_t n = 0;
    store_err se;
    if (store_archive_baseline(bt->archive, sid, &r, &n, &se) != STORE_OK) {
        snprintf(err, cap,
                 "the production baseline of session %.200s cannot be read from the state"
                 " database: %s",
                 sid, se.msg);
        json_decref(map);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *o = outcome_new(r[i].status);
        if (r[i].summary) json_object_set_new(o, "summary", json_string(r[i].summary));
        json_t *res = r[i].results_json ? json_loads(r[i].results_json, 0, NULL) : NULL;
        if (json_is_array(res))
            json_object_set_new(o, "results", res);
        else
            json_decref(res);
        char buf[160];
        if (!strcmp(r[i].status, evaluation_status_name(EVAL_RUN_FAILED)) ||
            !strcmp(r[i].status, evaluation_status_name(EVAL_RUN_TIMED_OUT)))
            json_object_set_new(o, "error_type",
                                json_string(stored_error_type(&r[i], buf, sizeof buf)));
        if (!strcmp(r[i].status, "skipped"))
            json_object_set_new(o, "skip_reason",
                                json_string(r[i].skip_reason ? r[i].skip_reason : ""));
        json_object_set_new(map, r[i].eval_key, o);
    }
    store_archive_baseline_free(r, n);
    return map;
}

/* A session made ready for its evaluation (prepare): its transcript read,
 * its image built and its production baseline read. What preparing found
 * that must be reported (an input error, the run's failure) waits here for
 * the session's turn (run_prepared), so that input errors, rows and a
 * failure come in the order the sessions are evaluated, as if each were
 * prepared only then. */
typedef struct {
    bt_input *in;     /* NULL: no session left (or cancelled) */
    sbx_image *img;   /* owned; NULL: nothing to evaluate */
    json_t *prod;     /* owned: the production baseline (bt->production) */
    char sid[512];    /* the session id, from the image */
    int skip;         /* not in this shard */
    int archive_gone; /* the archive no longer answers: `msg` says why (fail) */
    int failed;       /* the run fails: `msg` is the reason (fail) */
    char msg[1024];   /* the input error, when img is NULL and none of the above */
} bt_prep;

/* Prepares `in` into *p (zeroed here). Reports nothing itself: see bt_prep. */
static void prepare(backtest *bt, bt_input *in, bt_prep *p)
{
    memset(p, 0, sizeof *p);
    p->in = in;
    if (in->archive_id > 0 && in->text == NULL) {
        store_err se;
        char *data = NULL;
        size_t len = 0;
        int code = store_archive_read(bt->archive, in->archive_id, &data, &len, NULL, &se);
        if (code != STORE_OK) {
            /* one entry evicted since the start or damaged (its SHA-256, its
             * blob) is that session's input error; an archive that no longer
             * answers at all stops the run */
            store_archive_filter one = {.limit = 1};
            store_archive_entry *e = NULL;
            size_t n = 0;
            store_err pe;
            int whole = code != STORE_NOTFOUND && code != STORE_CORRUPT
                            ? code
                            : store_archive_list(bt->archive, &one, &e, &n, &pe);
            store_archive_entries_free(e, n);
            p->archive_gone = whole != STORE_OK;
            snprintf(p->msg, sizeof p->msg, "%s", se.msg);
            return;
        }
        in->text = data;
        in->len = len;
    }
    if (in->file && in->text == NULL) {
        size_t len = 0;
        char *data = slurp(in->source, &len);
        if (data == NULL) { /* readable at the start: removed or changed since */
            snprintf(p->msg, sizeof p->msg, "unreadable: %s", strerror(errno));
            return;
        }
        in->text = data;
        in->len = len;
    }
    void *simg = NULL;
    size_t slen = 0;
    fps_err e;
    if (simg_build_text(in->text, in->len, NULL, 0, &simg, &slen, &e) != 0) {
        json_error_t je;
        json_t *j = json_loadb(in->text, in->len, 0, &je);
        if (j == NULL)
            snprintf(p->msg, sizeof p->msg, "line %d, column %d: %s", je.line, je.column, je.text);
        else
            snprintf(p->msg, sizeof p->msg, "%s", e.msg);
        json_decref(j);
        return;
    }
    /* from the image: the transcript is parsed once, by its builder */
    snprintf(p->sid, sizeof p->sid, "%s", simg_session_id(simg));
    if (bt->cfg.shard_n > 1) {
        uint8_t h[SHA256_DIGEST_SIZE];
        struct sha256_ctx c;
        sha256_init(&c);
        sha256_update(&c, strlen(p->sid), (const uint8_t *)p->sid);
        sha256_digest(&c, sizeof h, h);
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
            v = v << 8 | h[i];
        if (v % (uint64_t)bt->cfg.shard_n != (uint64_t)bt->cfg.shard_k) {
            free(simg);
            p->skip = 1;
            return;
        }
    }
    p->img = sbx_image_adopt(simg, slen, &e);
    if (p->img == NULL) {
        snprintf(p->msg, sizeof p->msg, "%s", e.msg);
        return;
    }
    if (bt->production &&
        (p->prod = production_outcomes(bt, p->sid, p->msg, sizeof p->msg)) == NULL) {
        sbx_image_release(p->img);
        p->img = NULL;
        p->failed = 1;
    }
}

/* Lets go of a prepared session (evaluated or not): its image, its baseline
 * and the transcript read for it (read again if ever needed: no copy kept). */
static void prep_release(bt_prep *p)
{
    sbx_image_release(p->img);
    p->img = NULL;
    json_decref(p->prod);
    p->prod = NULL;
    bt_input *in = p->in;
    if (in != NULL && (in->archive_id > 0 || in->file)) {
        free(in->text);
        in->text = NULL;
        in->len = 0;
    }
}

/* The session's turn: reports what preparing found, or evaluates every
 * definition on it and writes its rows. */
static void run_prepared(backtest *bt, bt_prep *p, int cpu)
{
    bt_input *in = p->in;
    if (p->archive_gone) {
        fail(bt, "the transcript archive %s cannot be read (after %ld of %ld sessions): %s",
             bt->archive_path, (long)atomic_load(&bt->done), (long)atomic_load(&bt->total), p->msg);
        return;
    }
    if (p->failed) {
        fail(bt, "%s", p->msg);
        return;
    }
    if (p->skip) return;
    if (p->img == NULL) {
        input_error(bt, in->source, p->msg);
        return;
    }
    sbx_image *img = p->img;
    const char *sid = p->sid;
    json_t *prod = p->prod;
    /* one jail session per transcript: all its evaluations (conditions and
     * evaluators, candidate and baseline), one child serving them in turn */
    sbx_session *ss = sbx_session_open(bt->cfg.pool, img);
    if (ss == NULL) {
        input_error(bt, in->source, "out of memory");
        return;
    }
    if (cpu >= 0) sbx_session_set_cpu(ss, cpu);
    json_t *rows = json_array();
    for (size_t i = 0; i < json_array_size(bt->cand); i++) {
        const json_t *d = json_array_get(bt->cand, i);
        const char *key = jstr(d, "eval_key");
        json_t *c = evaluate(bt, d, img, ss, in, 1);
        const json_t *bd = bt->base ? find_def(bt->base, key) : NULL;
        json_t *b = bd                           ? evaluate(bt, bd, img, ss, in, 0)
                    : json_object_get(prod, key) ? json_incref(json_object_get(prod, key))
                                                 : json_null();
        int changed =
            !json_is_null(b) &&
            (strcmp(jstr(b, "status"), jstr(c, "status")) ||
             !same_json(json_object_get(b, "error_type"), json_object_get(c, "error_type")) ||
             !same_json(json_object_get(b, "summary"), json_object_get(c, "summary")) ||
             !same_json(json_object_get(b, "results"), json_object_get(c, "results")));
        json_t *row = json_pack("{s:s, s:s, s:o, s:o, s:b, s:o}", "session_id", sid, "eval_key",
                                key, "baseline", b, "candidate", c, "changed", changed, "deltas",
                                deltas(json_is_null(b) ? NULL : b, c));
        if (in->assignment_id)
            json_object_set_new(row, "assignment_id", json_string(in->assignment_id));
        json_array_append_new(rows, row);
    }
    sbx_session_close(ss);
    pthread_mutex_lock(&bt->mu);
    in->rows = rows;
    if (bt->cfg.rows_out) {
        for (size_t i = 0; i < json_array_size(rows); i++)
            out_line(bt, json_array_get(rows, i));
    }
    pthread_mutex_unlock(&bt->mu);
}

/* Keeps the calling thread on `cpu` (>= 0). Best effort: a thread left
 * unpinned still does its work. */
static void pin_self(int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* One job: a worker (worker_main) evaluates the sessions its preparer
 * (prep_main) has made ready, one ahead of it: the next session is read,
 * its image built and its baseline read while the jail runs this one's
 * evaluations, so that the job's own CPU work does not sit between two
 * sessions' evaluations. At most one prepared session (one image) waits
 * per job, besides the one being evaluated. */
typedef struct {
    backtest *bt;
    int cpu; /* >= 0 (cfg.pin): the CPU the job's two threads and its
                sessions' evaluators are kept on; -1: not pinned */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bt_prep next; /* under mu, when `ready`; owned by the job until taken */
    int ready;    /* under mu */
    int stop;     /* under mu: the worker is done; the preparer ends */
} bt_job;

/* Claims the next input and prepares it; p->in NULL when none is left or
 * the backtest is cancelled. */
static void prepare_next(backtest *bt, bt_prep *p)
{
    size_t i = atomic_fetch_add(&bt->next, 1);
    if (i >= bt->n || atomic_load(&bt->cancel)) {
        memset(p, 0, sizeof *p);
        return;
    }
    prepare(bt, &bt->in[i], p);
}

static void *prep_main(void *arg)
{
    bt_job *j = arg;
    pin_self(j->cpu);
    for (;;) {
        pthread_mutex_lock(&j->mu);
        while (j->ready && !j->stop)
            pthread_cond_wait(&j->cv, &j->mu);
        int stop = j->stop;
        pthread_mutex_unlock(&j->mu);
        if (stop) break;
        bt_prep p;
        prepare_next(j->bt, &p);
        pthread_mutex_lock(&j->mu);
        j->next = p;
        j->ready = 1;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        if (p.in == NULL) break;
    }
    return NULL;
}

/* A job's worker. main_thread sets j->bt and j->cpu (chosen once for all
 * the jobs) and keeps *j until the thread is joined; the rest of *j is
 * this thread's and its preparer's. */
static void *worker_main(void *arg)
{
    bt_job *j = arg;
    backtest *bt = j->bt;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    pthread_t th;
    pin_self(j->cpu);
    /* A background backtest (the daemon's) prepares each session at its
     * turn: it yields to live work, and the memory budget does not count
     * the images in this process, so it keeps one per job as before. So
     * does a worker without a preparer thread. */
    int ahead = !bt->cfg.background && pthread_create(&th, NULL, prep_main, j) == 0;
    for (;;) {
        bt_prep p;
        if (ahead) {
            pthread_mutex_lock(&j->mu);
            while (!j->ready)
                pthread_cond_wait(&j->cv, &j->mu);
            p = j->next;
            j->ready = 0;
            pthread_cond_broadcast(&j->cv);
            pthread_mutex_unlock(&j->mu);
        } else {
            prepare_next(bt, &p);
        }
        if (p.in == NULL) break;
        if (atomic_load(&bt->cancel)) { /* failed or cancelled meanwhile */
            prep_release(&p);
            break;
        }
        run_prepared(bt, &p, j->cpu);
        prep_release(&p);
        atomic_fetch_add(&bt->done, 1);
        if (bt->cfg.progress) {
            long d = atomic_load(&bt->done);
            int w = bt->n ? (int)(40 * d / (long)bt->n) : 40;
            fprintf(stderr, "\r[%-40.*s] %ld/%zu", w, "########################################", d,
                    bt->n);
            if ((size_t)d == bt->n) fputc('\n', stderr);
        }
    }
    if (ahead) {
        pthread_mutex_lock(&j->mu);
        j->stop = 1;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        pthread_join(th, NULL);
        if (j->ready) prep_release(&j->next); /* prepared, never evaluated */
    }
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    return NULL;
}

/* ---- the summary: a function of the set of rows ---- */

typedef struct {
    const char *sid;
    int rank;
    double delta; /* NAN: none */
    const char *bs, *cs, *kind;
} changed_row;

static int cmp_changed(const void *a, const void *b)
{
    const changed_row *x = a, *y = b;
    if (x->rank != y->rank) return x->rank - y->rank;
    double dx = isnan(x->delta) ? -1 : fabs(x->delta), dy = isnan(y->delta) ? -1 : fabs(y->delta);
    if (dx != dy) return dx > dy ? -1 : 1;
    return strcmp(x->sid, y->sid);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static json_t *top_errors(json_t *counts)
{
    json_t *out = json_array();
    for (int k = 0; k < 3; k++) {
        const char *best = NULL;
        json_int_t bn = 0;
        const char *t;
        json_t *v;
        json_object_foreach(counts, t, v)
        {
            json_int_t n = json_integer_value(v);
            if (n > bn || (n == bn && best && strcmp(t, best) < 0)) {
                best = t;
                bn = n;
            }
        }
        if (best == NULL) break;
        json_array_append_new(out, json_pack("{s:s, s:I}", "error_type", best, "count", bn));
        json_object_del(counts, best);
    }
    return out;
}

static json_t *key_summary(const char *key, json_t *const *rows, size_t n)
{
    long sessions = 0, evaluated = 0, skipped = 0, skipped_b = 0, no_b = 0, changed = 0, p2f = 0,
         f2p = 0, newe = 0, fixed = 0, eb = 0, ec = 0;
    json_t *tb = json_object(), *tc = json_object();
    double *ad = calloc(n + 1, sizeof *ad);
    changed_row *cr = calloc(n + 1, sizeof *cr);
    size_t nad = 0, ncr = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *r = rows[i], *b = json_object_get(r, "baseline"),
                     *c = json_object_get(r, "candidate");
        if (json_is_null(b)) b = NULL;
        sessions++;
        int cskip = !strcmp(jstr(c, "status"), "skipped");
        cskip ? skipped++ : evaluated++;
        if (b == NULL) no_b++;
        if (b && !strcmp(jstr(b, "status"), "skipped")) skipped_b++;
        if (is_error(b)) {
            eb++;
            const char *t = jstr(b, "error_type") ?: "eval_error";
            json_object_set_new(tb, t,
                                json_integer(json_integer_value(json_object_get(tb, t)) + 1));
        }
        if (is_error(c)) {
            ec++;
            const char *t = jstr(c, "error_type") ?: "eval_error";
            json_object_set_new(tc, t,
                                json_integer(json_integer_value(json_object_get(tc, t)) + 1));
        }
        const char *kind = "changed";
        int rank = 2;
        if (b && !is_error(b) && is_error(c)) newe++, kind = "new_error", rank = 0;
        if (b && is_error(b) && !is_error(c)) fixed++, kind = "fixed_error", rank = 1;
        int pb = pass_value(b, key), pc = pass_value(c, key);
        if (pb == 1 && pc == 0) p2f++, kind = "pass_to_fail", rank = 0;
        if (pb == 0 && pc == 1) f2p++, kind = "fail_to_pass", rank = 1;
        const json_t *dv = json_object_get(json_object_get(r, "deltas"), key);
        double delta = json_is_number(dv) ? json_number_value(dv) : NAN;
        if (!isnan(delta)) ad[nad++] = fabs(delta);
        if (json_is_true(json_object_get(r, "changed"))) {
            changed++;
            cr[ncr++] = (changed_row){jstr(r, "session_id"), rank, delta, jstr(b, "status"),
                                      jstr(c, "status"),     kind};
        }
    }
    qsort(ad, nad, sizeof *ad, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < nad; i++)
        sum += ad[i];
    qsort(cr, ncr, sizeof *cr, cmp_changed);
    json_t *top = json_array();
    for (size_t i = 0; i < ncr && i < 10; i++)
        json_array_append_new(
            top, json_pack("{s:s, s:s?, s:s, s:s, s:o}", "session_id", cr[i].sid, "baseline_status",
                           cr[i].bs, "candidate_status", cr[i].cs, "kind", cr[i].kind, "delta",
                           isnan(cr[i].delta) ? json_null() : json_real(cr[i].delta)));
    json_t *o = json_pack(
        "{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:{s:i, s:i}, s:{s:o, s:o}, "
        "s:o, s:o, s:o}",
        "eval_key", key, "sessions", (int)sessions, "evaluated", (int)evaluated, "skipped",
        (int)skipped, "skipped_baseline", (int)skipped_b, "no_baseline", (int)no_b, "changed",
        (int)changed, "pass_to_fail", (int)p2f, "fail_to_pass", (int)f2p, "new_errors", (int)newe,
        "fixed_errors", (int)fixed, "errors", "baseline", (int)eb, "candidate", (int)ec,
        "top_errors", "baseline", top_errors(tb), "candidate", top_errors(tc), "mean_abs_delta",
        nad ? json_real(sum / (double)nad) : json_null(), "max_abs_delta",
        nad ? json_real(ad[nad - 1]) : json_null(), "top_changed", top);
    json_decref(tb);
    json_decref(tc);
    free(ad);
    free(cr);
    return o;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* rows: every row (borrowed); keys from the rows themselves. */
static json_t *summarize(const json_t *rows, long sessions, const json_t *input_errors)
{
    size_t n = json_array_size(rows);
    const char **keys = calloc(n + 1, sizeof *keys);
    size_t nk = 0;
    for (size_t i = 0; i < n; i++) {
        const char *k = jstr(json_array_get(rows, i), "eval_key");
        size_t j = 0;
        while (j < nk && strcmp(keys[j], k))
            j++;
        if (j == nk) keys[nk++] = k;
    }
    qsort(keys, nk, sizeof *keys, cmp_str);
    json_t *arr = json_array();
    json_t **sel = calloc(n + 1, sizeof *sel);
    for (size_t k = 0; k < nk; k++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(jstr(json_array_get(rows, i), "eval_key"), keys[k]))
                sel[m++] = json_array_get(rows, i);
        json_array_append_new(arr, key_summary(keys[k], sel, m));
    }
    free(sel);
    free(keys);
    return json_pack("{s:i, s:O, s:o}", "sessions", (int)sessions, "input_errors", input_errors,
                     "eval_keys", arr);
}

/* Compile-checks one source of a definition once, in the jail; 0 if it
 * compiles, else 1 with the input error reported ("what[i] (key): line L,
 * column C: message"). */
static int rejected(backtest *bt, const json_t *d, const char *field, lang_kind kind,
                    const char *what, size_t i)
{
    const char *src = jstr(d, field);
    if (src == NULL || *src == '\0') return 0;
    sbx_request rq = {.background = bt->cfg.background,
                      .kind = kind,
                      .source = src,
                      .source_len = strlen(src),
                      .eval_key = jstr(d, "eval_key"),
                      .timeout_s = 10,
                      .playground = bt->cfg.background};
    sbx_outcome out;
    memset(&out, 0, sizeof out);
    sbx_check(bt->cfg.pool, &rq, &out);
    if (out.status == SBX_JAIL_FAILURE) /* nothing could be evaluated either */
        fail(bt, "%s[%zu] (%.128s): the jail could not run the compile check of its %s: %s", what,
             i, jstr(d, "eval_key"), field, out.detail);
    int bad = out.status == SBX_OK && !json_is_true(json_object_get(out.json, "ok"));
    if (bad) {
        char where[300], msg[700];
        snprintf(where, sizeof where, "%s[%zu] (%.128s).%s", what, i, jstr(d, "eval_key"), field);
        const json_t *ln = json_object_get(out.json, "line"),
                     *col = json_object_get(out.json, "column");
        if (json_is_integer(ln) && json_is_integer(col))
            snprintf(msg, sizeof msg, "line %lld, column %lld: %.500s",
                     (long long)json_integer_value(ln), (long long)json_integer_value(col),
                     jstr(out.json, "message") ? jstr(out.json, "message") : "rejected");
        else
            snprintf(msg, sizeof msg, "%.600s",
                     jstr(out.json, "message") ? jstr(out.json, "message") : "rejected");
        input_error(bt, where, msg);
    }
    sbx_outcome_free(&out);
    return bad;
}

static void check_defs(backtest *bt, json_t *defs, const char *what)
{
    for (size_t i = 0; i < json_array_size(defs); i++) {
        json_t *d = json_array_get(defs, i);
        if (rejected(bt, d, "condition_source", LANG_CONDITION, what, i))
            json_object_set_new(d, "__rejected_condition", json_true());
        if (rejected(bt, d, "evaluator_source", LANG_EVALUATOR, what, i))
            json_object_set_new(d, "__rejected_evaluator", json_true());
    }
}

/* Opens the archive (the sessions' source, or the production baseline's)
 * and, when the sessions come from it, lists them (backtest_start, so that
 * the total is known at once). An archive removed, unreadable or not a
 * database fails the backtest (fail): it still starts, and ends "failed"
 * at once, so that the reason stays with it. */
static void open_archive(backtest *bt)
{
    if (bt->archive_path == NULL) return;
    store_archive_options ao = {.path = bt->archive_path, .state_db_path = bt->cfg.db_path};
    store_err se;
    if (store_archive_open(&ao, &bt->archive, &se) != STORE_OK) {
        fail(bt, "the transcript archive %s cannot be read: %s", bt->archive_path, se.msg);
        return;
    }
    if (bt->cfg.npaths > 0) return;
    store_archive_filter f = {.since = bt->since,
                              .limit = bt->cfg.limit > 0 ? (int)bt->cfg.limit : 0};
    store_archive_entry *ents = NULL;
    size_t ne = 0;
    if (store_archive_list(bt->archive, &f, &ents, &ne, &se) != STORE_OK) {
        fail(bt, "the transcript archive %s cannot be read: %s", bt->archive_path, se.msg);
        return;
    }
    for (size_t i = 0; i < ne; i++) {
        char src[64];
        snprintf(src, sizeof src, "archive:%lld", (long long)ents[i].id);
        bt_input *it = add_input(bt, src, NULL, 0);
        it->archive_id = ents[i].id;
        it->assignment_id = ents[i].assignment_id;
        ents[i].assignment_id = NULL;
    }
    store_archive_entries_free(ents, ne);
    atomic_store(&bt->total, (long)bt->n);
}

static void *main_thread(void *arg)
{
    backtest *bt = arg;
    int ok = !atomic_load(&bt->cancel); /* not failed at the start, nor cancelled */
    /* each definition is compile-checked once, not once per session */
    if (ok) check_defs(bt, bt->cand, "definitions");
    if (ok) check_defs(bt, bt->base, "baseline");
    int jobs = bt->cfg.jobs > 0 ? bt->cfg.jobs : 1;
    if (jobs > 64) jobs = 64;
    pthread_t th[64];
    bt_job w[64];
    /* cfg.pin: job k on the k-th CPU allowed to this process, when there
     * are enough of them for one each; else no job is pinned. Never a
     * background backtest: it shares the CPUs with live work. */
    cpu_set_t allowed;
    int pin = bt->cfg.pin && !bt->cfg.background &&
              sched_getaffinity(0, sizeof allowed, &allowed) == 0 && jobs <= CPU_COUNT(&allowed);
    for (int i = 0, c = 0; i < jobs; i++) {
        while (pin && !CPU_ISSET(c, &allowed))
            c++;
        w[i] = (bt_job){.bt = bt, .cpu = pin ? c++ : -1}; /* the rest: worker_main's */
    }
    int started = 0;
    pthread_mutex_lock(&bt->mu);
    bt->state = BT_RUNNING;
    pthread_mutex_unlock(&bt->mu);
    for (int i = 0; i < jobs && ok && !atomic_load(&bt->cancel); i++)
        if (pthread_create(&th[started], NULL, worker_main, &w[started]) == 0) started++;
    if (started == 0 && ok && !atomic_load(&bt->cancel)) worker_main(&w[0]);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    json_t *all = json_array();
    long sessions = 0;
    for (size_t i = 0; i < bt->n; i++)
        if (bt->in[i].rows) {
            sessions++;
            json_array_extend(all, bt->in[i].rows);
        }
    json_t *s = atomic_load(&bt->cancel) ? NULL : summarize(all, sessions, bt->input_errors);
    json_decref(all);
    pthread_mutex_lock(&bt->mu);
    bt->summary = s;
    bt->state = bt->failed ? BT_FAILED : s ? BT_DONE : BT_CANCELLED;
    pthread_mutex_unlock(&bt->mu);
    return NULL;
}

backtest *backtest_start(const backtest_config *cfg, fps_err *err)
{
    backtest *bt = calloc(1, sizeof *bt);
    if (bt == NULL) abort();
    bt->cfg = *cfg;
    bt->cfg.paths = NULL;
    bt->input_errors = json_array();
    pthread_mutex_init(&bt->mu, NULL);
    if (cfg->pool == NULL || cfg->definitions == NULL) {
        fps_err_set(err, BT_EINVALID, 0, "invalid_request", "a pool and definitions are required");
        goto fail;
    }
    if (cfg->shard_n > 1 && (cfg->shard_k < 0 || cfg->shard_k >= cfg->shard_n)) {
        fps_err_set(err, BT_EINVALID, 0, "invalid_request", "shard K/N needs 0 <= K < N");
        goto fail;
    }
    if (load_defs(cfg->definitions, "definitions", &bt->cand, err) != 0) goto fail;
    bt->local_urls = json_object();
    for (size_t i = 0; i < cfg->nlocals; i++) {
        const char *u = cfg->locals[i].url;
        if (u == NULL || (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))) {
            fps_err_set(err, BT_EINVALID, 0, "invalid_request",
                        "--local %s: the endpoint must be an http:// or https:// URL",
                        cfg->locals[i].eval_key);
            goto fail;
        }
        json_object_set_new(bt->local_urls, cfg->locals[i].eval_key, json_string(u));
    }
    if (cfg->nlocals > 0 &&
        (bt->local = local_client_new(cfg->local_concurrency > 0 ? cfg->local_concurrency : 4)) ==
            NULL) {
        fps_err_set(err, BT_EIO, 0, "cannot_start", "cannot create the local dispatch client");
        goto fail;
    }
    bt->production = cfg->baseline && !strcmp(cfg->baseline, "production");
    if (cfg->baseline && !bt->production &&
        load_defs(cfg->baseline, "baseline", &bt->base, err) != 0)
        goto fail;
    if (cfg->npaths == 0 || bt->production) {
        char apath[4096];
        if (cfg->db_path == NULL ||
            store_archive_path_for(cfg->db_path, apath, sizeof apath) != 0) {
            fps_err_set(err, BT_EINVALID, 0, "invalid_request",
                        cfg->npaths ? "--baseline production needs --db"
                                    : "give --sessions, or --db for the archive beside it");
            goto fail;
        }
        if ((bt->archive_path = strdup(apath)) == NULL) abort();
    }
    if (cfg->npaths == 0 && cfg->since && time_parse_rfc3339(cfg->since, &bt->since) != 0) {
        fps_err_set(err, BT_EINVALID, 0, "invalid_request",
                    "--since must be an RFC 3339 time, e.g. 2026-01-01T00:00:00Z");
        goto fail;
    }
    for (size_t i = 0; i < cfg->npaths; i++)
        if (add_path(bt, cfg->paths[i], 1, err) != 0) goto fail;
    atomic_store(&bt->total, (long)bt->n);
    open_archive(bt); /* one that cannot be read fails the backtest, not the start */
    if (pthread_create(&bt->th, NULL, main_thread, bt) != 0) {
        fps_err_set(err, BT_EIO, 0, "cannot_start", "cannot start a thread");
        goto fail;
    }
    return bt;
fail:
    json_decref(bt->cand);
    json_decref(bt->base);
    json_decref(bt->input_errors);
    free(bt->archive_path);
    local_client_free(bt->local);
    json_decref(bt->local_urls);
    for (size_t i = 0; i < bt->n; i++) {
        free(bt->in[i].source);
        free(bt->in[i].text);
        free(bt->in[i].assignment_id);
    }
    free(bt->in);
    pthread_mutex_destroy(&bt->mu);
    free(bt);
    return NULL;
}

void backtest_progress(backtest *bt, long *done, long *total)
{
    *done = atomic_load(&bt->done);
    *total = atomic_load(&bt->total);
}

backtest_state backtest_get_state(backtest *bt)
{
    pthread_mutex_lock(&bt->mu);
    backtest_state s = bt->state;
    pthread_mutex_unlock(&bt->mu);
    return s;
}

void backtest_cancel(backtest *bt)
{
    atomic_store(&bt->cancel, 1);
}

backtest_state backtest_wait(backtest *bt, fps_err *err)
{
    if (bt->th) {
        pthread_join(bt->th, NULL);
        bt->th = 0;
    }
    backtest_state s = backtest_get_state(bt);
    if (s == BT_FAILED && err != NULL) {
        char why[sizeof bt->error];
        backtest_error(bt, why, sizeof why);
        fps_err_set(err, BT_EFAILED, 0, "backtest_failed", "%s", why);
    }
    return s;
}

int backtest_error(backtest *bt, char *buf, size_t cap)
{
    pthread_mutex_lock(&bt->mu);
    int failed = bt->state == BT_FAILED;
    if (cap > 0) snprintf(buf, cap, "%s", failed ? bt->error : "");
    pthread_mutex_unlock(&bt->mu);
    return failed;
}

json_t *backtest_summary(backtest *bt)
{
    pthread_mutex_lock(&bt->mu);
    json_t *s = json_incref(bt->summary);
    pthread_mutex_unlock(&bt->mu);
    return s;
}

json_t *backtest_rows(backtest *bt, int changed_only, const char *eval_key, size_t offset,
                      size_t limit, size_t *total)
{
    json_t *out = json_array();
    size_t m = 0;
    if (backtest_get_state(bt) == BT_DONE)
        for (size_t i = 0; i < bt->n; i++)
            for (size_t j = 0; j < json_array_size(bt->in[i].rows); j++) {
                json_t *r = json_array_get(bt->in[i].rows, j);
                if (changed_only && !json_is_true(json_object_get(r, "changed"))) continue;
                if (eval_key && strcmp(jstr(r, "eval_key"), eval_key)) continue;
                if (m >= offset && json_array_size(out) < limit) json_array_append(out, r);
                m++;
            }
    if (total) *total = m;
    return out;
}

void backtest_free(backtest *bt)
{
    if (bt == NULL) return;
    backtest_cancel(bt);
    backtest_wait(bt, NULL);
    json_decref(bt->cand);
    json_decref(bt->base);
    json_decref(bt->input_errors);
    json_decref(bt->summary);
    store_archive_close(bt->archive);
    free(bt->archive_path);
    local_client_free(bt->local);
    json_decref(bt->local_urls);
    for (size_t i = 0; i < bt->n; i++) {
        free(bt->in[i].source);
        free(bt->in[i].text);
        free(bt->in[i].assignment_id);
        json_decref(bt->in[i].rows);
    }
    free(bt->in);
    pthread_mutex_destroy(&bt->mu);
    free(bt);
}

int backtest_regressed(const json_t *summary)
{
    const json_t *ks = json_object_get(summary, "eval_keys");
    for (size_t i = 0; i < json_array_size(ks); i++) {
        const json_t *k = json_array_get(ks, i);
        if (json_integer_value(json_object_get(k, "pass_to_fail")) > 0 ||
            json_integer_value(json_object_get(k, "new_errors")) > 0)
            return 1;
    }
    return 0;
}

void backtest_print_table(const json_t *summary, FILE *out)
{
    fprintf(out, "%-24s %8s %9s %7s %7s %9s %7s %9s %9s %7s %6s %10s %10s\n", "eval_key",
            "sessions", "evaluated", "skipped", "changed", "pass>fail", "fail>pass", "new_err",
            "fixed", "err_b", "err_c", "mean|d|", "max|d|");
    const json_t *ks = json_object_get(summary, "eval_keys");
    for (size_t i = 0; i < json_array_size(ks); i++) {
        const json_t *k = json_array_get(ks, i);
#define I(f) (long)json_integer_value(json_object_get(k, f))
        const json_t *e = json_object_get(k, "errors");
        fprintf(out, "%-24s %8ld %9ld %7ld %7ld %9ld %7ld %9ld %9ld %7ld %6ld %10.4g %10.4g\n",
                jstr(k, "eval_key"), I("sessions"), I("evaluated"), I("skipped"), I("changed"),
                I("pass_to_fail"), I("fail_to_pass"), I("new_errors"), I("fixed_errors"),
                (long)json_integer_value(json_object_get(e, "baseline")),
                (long)json_integer_value(json_object_get(e, "candidate")),
                json_number_value(json_object_get(k, "mean_abs_delta")),
                json_number_value(json_object_get(k, "max_abs_delta")));
#undef I
    }
    const json_t *ie = json_object_get(summary, "input_errors");
    for (size_t i = 0; i < json_array_size(ie); i++)
        fprintf(out, "input error: %s: %s\n", jstr(json_array_get(ie, i), "source"),
                jstr(json_array_get(ie, i), "message"));
}

json_t *backtest_merge(const char *const *paths, size_t npaths, fps_err *err)
{
    /* seen: the input errors already taken ("source\nmessage"): every shard
     * reports the same compile errors and unreadable transcripts */
    json_t *all = json_array(), *ie = json_array(), *sids = json_object(), *seen = json_object();
    for (size_t p = 0; p < npaths; p++) {
        size_t len = 0;
        char *text = slurp(paths[p], &len);
        if (text == NULL) {
            fps_err_set(err, BT_EIO, 0, "unreadable", "--merge %s: %s", paths[p], strerror(errno));
            goto fail;
        }
        size_t line = 0;
        for (char *s = text, *end = text + len; s < end;) {
            char *nl = memchr(s, '\n', (size_t)(end - s));
            char *le = nl ? nl : end;
            line++;
            if (le > s) {
                json_t *r = json_loadb(s, (size_t)(le - s), 0, NULL);
                json_t *e = json_object_get(r, "input_error");
                if (e != NULL && jstr(e, "source") && jstr(e, "message")) {
                    char *k = NULL;
                    if (asprintf(&k, "%s\n%s", jstr(e, "source"), jstr(e, "message")) < 0) abort();
                    if (json_object_get(seen, k) == NULL) {
                        json_object_set_new(seen, k, json_true());
                        json_array_append_new(ie,
                                              json_pack("{s:s, s:s}", "source", jstr(e, "source"),
                                                        "message", jstr(e, "message")));
                    }
                    free(k);
                    json_decref(r);
                    s = le + 1;
                    continue;
                }
                if (!json_is_object(r) || !jstr(r, "session_id") || !jstr(r, "eval_key") ||
                    !json_is_object(json_object_get(r, "candidate"))) {
                    json_decref(r);
                    fps_err_set(err, BT_EINVALID, 0, "invalid_request",
                                "--merge %s:%zu: not a backtest row", paths[p], line);
                    free(text);
                    goto fail;
                }
                json_object_set_new(sids, jstr(r, "session_id"), json_true());
                json_array_append_new(all, r);
            }
            s = le + 1;
        }
        free(text);
    }
    json_t *s = summarize(all, (long)json_object_size(sids), ie);
    json_decref(all);
    json_decref(ie);
    json_decref(sids);
    json_decref(seen);
    return s;
fail:
    json_decref(all);
    json_decref(ie);
    json_decref(sids);
    json_decref(seen);
    return NULL;
}
