/* Unit tests of the sandbox jail (sandbox/jail/sbx_*.c, sandbox/jail/jail_child.c),
 * with real child processes of the sidecar binary ($FPS_BIN). Crafted
 * children (sbx_config.test_mode, i.e. jail_child.c's --test-<mode>) stand
 * in for a hostile interpreter: they act after the jail is installed.
 * Observes the jail from outside through /proc/<pid>, and checks the
 * parent for zombies, fd growth and RSS growth over 10,000 evaluations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox/jail/jail.h"
#include "sandbox/lang/lang.h"
#include "sandbox/jail/sbx.h"
#include "sandbox/lang/simg.h"

#include <dirent.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/stat.h>
#include <jansson.h>
#include <limits.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int g_no_helper, g_no_zygote;

static sbx_pool *make_pool(int slots, int prestart, const char *mode)
{
    sbx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.max_sandboxes = slots;
    cfg.memory_mb = 512;
    cfg.self_exe = getenv("FPS_BIN");
    cfg.prestart = prestart;
    cfg.test_mode = mode;
    cfg.no_helper = g_no_helper;
    cfg.no_zygote = g_no_zygote;
    fps_err err = {0};
    sbx_pool *p = sbx_pool_new(&cfg, &err);
    if (p == NULL) fprintf(stderr, "sbx_pool_new: %s\n", err.msg);
    assert_non_null(p);
    return p;
}

static void eval_src(sbx_pool *p, const char *src, double timeout, sbx_image *img,
                     atomic_int *cancel, sbx_outcome *out)
{
    sbx_request req;
    memset(&req, 0, sizeof req);
    req.kind = LANG_EVALUATOR;
    req.source = src;
    req.source_len = strlen(src);
    req.eval_key = "q";
    req.timeout_s = timeout;
    req.image = img;
    req.cancel = cancel;
    sbx_eval(p, &req, out);
}

static void eval_raw(sbx_pool *p, const char *src, sbx_outcome *out)
{
    sbx_request req;
    memset(&req, 0, sizeof req);
    req.kind = LANG_RAW;
    req.source = src;
    req.source_len = strlen(src);
    req.timeout_s = 10;
    sbx_eval(p, &req, out);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n - 1; /* the DIR's own fd */
}

static long status_field(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') v = strtol(line + kl + 1, NULL, 10);
    fclose(f);
    return v;
}

/* Where field `n` (1-based) of a /proc/<pid>/stat line begins, counting
 * from `after_comm` (the ')' that ends field 2), or NULL. */
static const char *stat_skip(const char *after_comm, int n)
{
    const char *q = after_comm + 2;
    for (int field = 3; field < n && q != NULL; field++) {
        q = strchr(q, ' ');
        if (q != NULL) q++;
    }
    return q;
}

/* Reads /proc/<pid>/stat into buf (cap bytes) and returns the ')' that
 * ends its command (field 2), or NULL when the process is gone. */
static const char *stat_line(int pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return NULL;
    size_t r = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[r] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp != NULL && rp[1] == ' ' ? rp : NULL;
}

/* One process's field `n` (1-based) of /proc/<pid>/stat, or -1. */
static long stat_field(int pid, int n)
{
    char buf[1024];
    const char *rp = stat_line(pid, buf, sizeof buf), *q = rp != NULL ? stat_skip(rp, n) : NULL;
    return q != NULL ? strtol(q, NULL, 10) : -1;
}

/* One process's state letter (field 3 of /proc/<pid>/stat), or 0. */
static char proc_state(int pid)
{
    char buf[1024];
    const char *rp = stat_line(pid, buf, sizeof buf);
    return rp != NULL ? rp[2] : 0;
}

/* Counts this process's zombie children; with `report`, names each on
 * stderr (pid and command, the wait status it left in field 52, and how
 * long ago it started, field 22), so a failure says which child was left:
 * one killed by us (status 9) or one that exited (0), and whether it is old
 * or was started a moment ago. */
static int zombies(int report)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t me = getpid();
    while (d != NULL && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        char buf[1024];
        const char *rp = stat_line(atoi(e->d_name), buf, sizeof buf);
        char state;
        int ppid;
        if (rp != NULL && sscanf(rp + 2, "%c %d", &state, &ppid) == 2 && ppid == me &&
            state == 'Z') {
            n++;
            if (report) {
                const char *st = stat_skip(rp, 52), *start = stat_skip(rp, 22);
                struct timespec boot;
                clock_gettime(CLOCK_BOOTTIME, &boot);
                double now_s = (double)boot.tv_sec + (double)boot.tv_nsec / 1e9;
                double start_s = start ? strtod(start, NULL) / (double)sysconf(_SC_CLK_TCK) : 0;
                double age_ms = (now_s - start_s) * 1e3;
                fprintf(stderr, "zombie child: %.*s, wait status %.*s, started %.0f ms ago\n",
                        (int)(rp + 1 - buf), buf, st ? (int)strcspn(st, " \n") : 1, st ? st : "?",
                        age_ms);
            }
        }
    }
    if (d != NULL) closedir(d);
    return n;
}

/* Waits until no child of this process is a zombie: children are reaped
 * in the background (the pool's reaper lets a batch gather first), and a
 * sanitizer build on a loaded machine stretches both the children's exit
 * and the reaper's turn, so the deadline is generous (30 s); a zombie
 * still there then is a leak, named on stderr. The scan that reports is the
 * one that decides: a child killed a moment ago is not a zombie until its
 * exit is done (an ASan child's takes milliseconds), so a second scan after
 * a clean one could find it and blame a reaper that had no chance yet. */
static void assert_no_zombies(const char *where)
{
    for (int i = 0;; i++) {
        int last = i == 2999, n = zombies(last);
        if (n == 0) return;
        if (last) fail_msg("%s: %d zombie children after 30 s", where, n);
        usleep(10000);
    }
}

/* Waits until the pool has waited for every child it made, the idle ones
 * apart: spawned == reaped + idle. Unlike a look at /proc this counts the
 * children still on their way out as well. */
static void assert_pool_reaped_all(sbx_pool *p, const char *where)
{
    sbx_stats s = sbx_pool_stats(p);
    for (int i = 0; i < 3000 && s.spawned != s.reaped + s.idle; i++) {
        usleep(10000);
        s = sbx_pool_stats(p);
    }
    if (s.spawned != s.reaped + s.idle)
        fail_msg("%s: %lu children made, %lu reaped and %lu idle after 30 s", where, s.spawned,
                 s.reaped, s.idle);
}

static void test_layers_and_mapping_helpers(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, -1, NULL);
    sbx_layers l = sbx_pool_layers(p);
    assert_int_equal(l.seccomp, 1);
    assert_int_equal(l.no_new_privs, 1);
    assert_int_equal(l.rlimits, 1);
    sbx_pool_free(p);

    assert_true(sbx_clamp_timeout(0) == 30.0);
    assert_true(sbx_clamp_timeout(-1) == 30.0);
    assert_true(sbx_clamp_timeout(1e9) == 60.0);
    assert_true(sbx_clamp_timeout(5) == 5.0);

    const char *d;
    sbx_outcome o;
    memset(&o, 0, sizeof o);
    o.status = SBX_OK;
    o.json = json_loads("{\"ok\": false, \"stage\": \"compile\", \"message\": \"bad\"}", 0, NULL);
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_COMPILE);
    assert_string_equal(d, "bad");
    json_decref(o.json);
    o.json = json_loads(
        "{\"ok\": false, \"stage\": \"runtime\", \"error_type\": \"ZeroDivisionError\"}", 0, NULL);
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_RUNTIME);
    assert_string_equal(d, "ZeroDivisionError");
    json_decref(o.json);
    o.json =
        json_loads("{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"steps\"}", 0, NULL);
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_LIMIT);
    assert_string_equal(d, "steps");
    json_decref(o.json);
    o.json = json_loads("{\"ok\": true, \"results\": [], \"summary\": null}", 0, NULL);
    assert_int_equal(sbx_outcome_end(&o, NULL), SBX_END_OK);
    json_decref(o.json);
    o.json = json_loads("{\"ok\": false, \"stage\": \"elsewhere\"}", 0, NULL);
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_CRASH);
    assert_string_equal(d, "");
    json_decref(o.json);
    o.json = NULL;
    o.status = SBX_TIMEOUT;
    snprintf(o.limit, sizeof o.limit, "memory");
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_LIMIT);
    assert_string_equal(d, "memory");
    char *line = sbx_outcome_line(&o);
    assert_string_equal(line, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"memory\"}");
    free(line);
    o.status = SBX_OUTPUT;
    snprintf(o.limit, sizeof o.limit, "output");
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_LIMIT);
    assert_string_equal(d, "output");
    o.status = SBX_JAIL_FAILURE;
    snprintf(o.detail, sizeof o.detail, "killed by seccomp");
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_CRASH);
    assert_string_equal(d, "killed by seccomp");
    o.status = SBX_CANCELLED;
    assert_int_equal(sbx_outcome_end(&o, NULL), SBX_END_CANCELLED);
}

/* The warm-up before any fork (jail_prepare) evaluates a built-in expression: it must
 * pass the checker and evaluate cleanly, or it warms up only the front end
 * (as it once did: it used generator expressions, which the language
 * rejects). */
static void test_warm_up_source_evaluates(void **state)
{
    (void)state;
    void *img = NULL;
    size_t len = 0;
    assert_int_equal(simg_build_text(jail_warm_transcript, strlen(jail_warm_transcript), NULL, 0,
                                     &img, &len, NULL),
                     0);
    lang_limits limits = {0};
    char *out = lang_eval(LANG_EVALUATOR, jail_warm_source, strlen(jail_warm_source), "q", img, len,
                          &limits);
    assert_non_null(out);
    json_t *o = json_loads(out, 0, NULL);
    if (o == NULL || !json_is_true(json_object_get(o, "ok"))) fail_msg("warm-up outcome: %s", out);
    /* The score (primary, "q"), one metric and one assertion. */
    assert_int_equal(json_array_size(json_object_get(o, "results")), 3);
    json_decref(o);
    free(out);
    free(img);
}

/* The request and the session image reach the child intact. */
static void test_request_and_image_hand_off(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, 1, "echo");
    json_t *t = json_pack(
        "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:[{s:s, s:s, s:s, s:{s:s}}]}",
        "schema_version", "2", "assignment_id", "a-1", "session_id", "s-1", "session_revision_id",
        "r-1", "agent_id", "agent", "environment", "test", "started_at",
        "2026-08-28T12:00:00.000000Z", "ended_at", "2026-08-28T12:00:01.000000Z", "event_count", 1,
        "events", "id", "e1", "ts", "2026-08-28T12:00:00.000000Z", "event_type", "tool_use",
        "payload", "k", "v\xc3\xa9");
    fps_err err;
    void *raw;
    size_t raw_len;
    char *text = json_dumps(t, JSON_COMPACT);
    assert_non_null(text);
    int built = simg_build_text(text, strlen(text), "a-1", 0, &raw, &raw_len, &err);
    if (built != 0) fprintf(stderr, "simg_build_text: %s\n", err.msg);
    assert_int_equal(built, 0);
    unsigned long sum = 0;
    for (size_t i = 0; i < raw_len; i++)
        sum += ((unsigned char *)raw)[i];
    free(raw);
    sbx_image *img = sbx_image_new(text, strlen(text), "a-1", 0, &err);
    free(text);
    json_decref(t);
    assert_non_null(img);
    for (int i = 0; i < 3; i++) {
        sbx_outcome o;
        const char *src = i == 1 ? "" : "len(session.events) \xe2\x9c\x93 \"q\"";
        eval_src(p, src, 10, i == 2 ? NULL : img, NULL, &o);
        assert_int_equal(o.status, SBX_OK);
        assert_non_null(o.line);
        assert_string_equal(json_string_value(json_object_get(o.json, "source")), src);
        assert_string_equal(json_string_value(json_object_get(o.json, "eval_key")), "q");
        assert_int_equal(json_integer_value(json_object_get(o.json, "image_len")),
                         i == 2 ? 0 : (json_int_t)raw_len);
        assert_int_equal(json_integer_value(json_object_get(o.json, "image_sum")),
                         i == 2 ? 0 : (json_int_t)sum);
        sbx_outcome_free(&o);
    }
    /* And through a session's evaluator, which maps the image once for all
     * of its evaluations: the same bytes reach each one. */
    for (int with_image = 0; with_image < 2; with_image++) {
        sbx_session *s = sbx_session_open(p, with_image ? img : NULL);
        assert_non_null(s);
        for (int i = 0; i < 3; i++) {
            sbx_request req;
            memset(&req, 0, sizeof req);
            req.kind = LANG_EVALUATOR;
            req.source = i == 1 ? "" : "x";
            req.source_len = strlen(req.source);
            req.eval_key = "k";
            req.timeout_s = 10;
            sbx_outcome o;
            sbx_session_eval(s, &req, &o);
            assert_int_equal(o.status, SBX_OK);
            assert_string_equal(json_string_value(json_object_get(o.json, "source")), req.source);
            assert_string_equal(json_string_value(json_object_get(o.json, "eval_key")), "k");
            assert_int_equal(json_integer_value(json_object_get(o.json, "image_len")),
                             with_image ? (json_int_t)raw_len : 0);
            assert_int_equal(json_integer_value(json_object_get(o.json, "image_sum")),
                             with_image ? (json_int_t)sum : 0);
            assert_true(o.pid > 0);
            sbx_outcome_free(&o);
        }
        sbx_session_close(s);
    }
    sbx_image_release(img);
    sbx_pool_free(p);
}

typedef struct {
    sbx_pool *pool;
    const char *src;
    double timeout;
    atomic_int *cancel;
    sbx_outcome out;
    double started, ended;
} eval_thread_arg;

static void *eval_thread(void *arg)
{
    eval_thread_arg *a = arg;
    a->started = now_ms();
    eval_src(a->pool, a->src, a->timeout, NULL, a->cancel, &a->out);
    a->ended = now_ms();
    return NULL;
}

/* While a child runs: empty environment, seccomp filter mode, no_new_privs,
 * no capabilities, a handful of fds, the rlimits in force. */
/* Starts an evaluation of p's "sleep" children on *th and returns its
 * child's pid once the child is jailed (seccomp on) and blocked. */
static int start_sleeper(sbx_pool *p, eval_thread_arg *a, atomic_int *cancel, pthread_t *th)
{
    *a = (eval_thread_arg){p, "1", 20, cancel, {0}, 0, 0};
    assert_int_equal(pthread_create(th, NULL, eval_thread, a), 0);
    int pid = 0;
    for (int i = 0; i < 500 && pid == 0; i++)
        if (sbx_pool_running_pids(p, &pid, 1) == 0) usleep(10000);
    assert_true(pid > 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    for (int i = 0; i < 300 && status_field(path, "Seccomp") != 2; i++)
        usleep(10000);
    assert_int_equal(status_field(path, "Seccomp"), 2);
    /* Both filters: the outer one of every child, and the inner one an
     * evaluating process adds with its own limits (where the kernel
     * reports the count). */
    for (int i = 0; i < 300 && status_field(path, "Seccomp_filters") == 1; i++)
        usleep(10000);
    long nf = status_field(path, "Seccomp_filters");
    assert_true(nf == -1 || nf == 2);
    return pid;
}

static void test_jail_observed_from_outside(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, -1, "sleep");
    atomic_int cancel = 0;
    eval_thread_arg a;
    pthread_t th;
    int pid = start_sleeper(p, &a, &cancel, &th);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    assert_int_equal(status_field(path, "NoNewPrivs"), 1);

    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    int caps_checked = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "CapEff:", 7) || !strncmp(line, "CapPrm:", 7)) {
            assert_int_equal(strtoull(line + 7, NULL, 16), 0);
            caps_checked++;
        }
    }
    fclose(f);
    assert_int_equal(caps_checked, 2);

    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    f = fopen(path, "r");
    assert_non_null(f);
    char env[4096];
    size_t n = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[n] = '\0';
#ifdef FPS_SANITIZE
    /* Only the sanitizer runtime's options. */
    assert_true(n == 0 || !strncmp(env, "ASAN_OPTIONS=", 13));
    assert_true(n == 0 || strlen(env) + 1 == n);
#else
    assert_int_equal(n, 0);
#endif

    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    int fds = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') fds++;
    closedir(d);
    assert_true(fds >= 2 && fds <= 4);

    snprintf(path, sizeof path, "/proc/%d/limits", pid);
    f = fopen(path, "r");
    assert_non_null(f);
    int seen = 0;
    while (fgets(line, sizeof line, f)) {
        char soft[32];
        if (sscanf(line + 26, "%31s", soft) != 1) continue;
        if (!strncmp(line, "Max cpu time", 12)) {
            assert_true(atol(soft) >= 1 && atol(soft) <= 61);
            seen++;
        } else if (!strncmp(line, "Max file size", 13)) {
            assert_string_equal(soft, "0");
            seen++;
        } else if (!strncmp(line, "Max processes", 13)) {
            assert_string_equal(soft, "0");
            seen++;
        } else if (!strncmp(line, "Max open files", 14)) {
            assert_string_equal(soft, "4");
            seen++;
        } else if (!strncmp(line, "Max core file size", 18)) {
            assert_string_equal(soft, "0");
            seen++;
        } else if (!strncmp(line, "Max address space", 17)) {
#ifndef FPS_SANITIZE
            assert_string_equal(soft, "536870912");
#else
            assert_string_not_equal(soft, "unlimited");
#endif
            seen++;
        }
    }
    fclose(f);
    assert_int_equal(seen, 6);

    /* It is a fresh exec of the child image (not a fork of this process). */
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    f = fopen(path, "r");
    assert_non_null(f);
    char cmd[512];
    size_t cl = fread(cmd, 1, sizeof cmd - 1, f);
    fclose(f);
    cmd[cl] = '\0';
    assert_true(cl > strlen(cmd) + 1);
    assert_string_equal(cmd + strlen(cmd) + 1, SBX_CHILD_ARG);
    snprintf(path, sizeof path, "/proc/%d/exe", pid);
    char exe[512];
    ssize_t el = readlink(path, exe, sizeof exe - 1);
    assert_true(el > 0);
    exe[el] = '\0';
    assert_non_null(strstr(exe, "failproofai-sandbox"));

    /* Cancellation kills it promptly. */
    double t = now_ms();
    atomic_store(&cancel, 1);
    pthread_join(th, NULL);
    assert_int_equal(a.out.status, SBX_CANCELLED);
    assert_true(now_ms() - t < 5000);
    sbx_outcome_free(&a.out);
    /* Reaped (in the background): gone, not a zombie. */
    for (int i = 0; i < 500 && kill(pid, 0) == 0; i++)
        usleep(10000);
    assert_int_equal(kill(pid, 0), -1);
    sbx_pool_free(p);
}

/* A crafted child that tries a forbidden call after jailing dies, including
 * the calls the zygote and a child's own set-up make before the allowlist is
 * loaded (forking the zygote's way, answering on fd 0, moving fds,
 * capabilities, no_new_privs, limits other than RLIMIT_CPU). */
/* The "Name:\t..." line of /proc/<pid>/status, after the tab (into out). */
static int status_line(int pid, const char *name, char *out, size_t cap)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    int found = -1;
    size_t n = strlen(name);
    while (f != NULL && fgets(line, sizeof line, f))
        if (!strncmp(line, name, n) && line[n] == ':') {
            const char *v = line + n + 1;
            v += strspn(v, " \t");
            snprintf(out, cap, "%.*s", (int)strcspn(v, "\n"), v);
            found = 0;
        }
    if (f != NULL) fclose(f);
    return found;
}

/* A running (sleeping) child of p, seen from /proc: uid and gid are `id`
 * in all four positions, no supplementary groups when the sidecar was root,
 * no capability at all, and an empty bounding set when `bounding_empty`. */
static void check_child_identity(sbx_pool *p, unsigned id, int root, int bounding_empty)
{
    atomic_int cancel = 0;
    eval_thread_arg a;
    pthread_t th;
    int pid = start_sleeper(p, &a, &cancel, &th);
    char v[256], want[64];
    snprintf(want, sizeof want, "%u\t%u\t%u\t%u", id, id, id, id);
    assert_int_equal(status_line(pid, "Uid", v, sizeof v), 0);
    assert_string_equal(v, want);
    assert_int_equal(status_line(pid, "Gid", v, sizeof v), 0);
    if (root) assert_string_equal(v, want);
    assert_int_equal(status_line(pid, "Groups", v, sizeof v), 0);
    if (root) assert_string_equal(v, "");
    static const char *const caps[] = {"CapInh", "CapPrm", "CapEff", "CapAmb", "CapBnd"};
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        assert_int_equal(status_line(pid, caps[i], v, sizeof v), 0);
        if (strcmp(caps[i], "CapBnd") != 0 || bounding_empty)
            if (strtoull(v, NULL, 16) != 0) fail_msg("%s of a child is %s", caps[i], v);
    }
    atomic_store(&cancel, 1);
    pthread_join(th, NULL);
    sbx_outcome_free(&a.out);
}

/* Children never keep the sidecar's root: run as root they are uid/gid
 * 65534 with every capability set (bounding included) empty; run as
 * another user they keep that uid, with no capability, and an empty
 * bounding set inside their user namespace where one is allowed. As root,
 * the same test then runs again under setpriv as uid 65534. */
static void test_children_are_unprivileged(void **state)
{
    (void)state;
    unsigned me = (unsigned)getuid();
    int root = me == 0;
    for (int exec_only = 0; exec_only < 2; exec_only++) {
        g_no_zygote = exec_only;
        sbx_pool *p = make_pool(1, -1, "sleep");
        sbx_layers l = sbx_pool_layers(p);
        assert_int_equal(l.unprivileged, 1);
        assert_int_equal(l.cap_bounding_empty, root || l.user_ns);
        json_t *j = sbx_pool_jail_json(p);
        assert_true(json_is_true(json_object_get(j, "unprivileged")));
        assert_int_equal(json_is_true(json_object_get(j, "cap_bounding_empty")),
                         l.cap_bounding_empty);
        json_decref(j);
        check_child_identity(p, root ? 65534u : me, root, l.cap_bounding_empty);
        sbx_pool_free(p);
    }
    g_no_zygote = 0;
    if (root && getenv("FPS_JAIL_TEST_UNPRIVILEGED") == NULL) {
        char self[4096];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        assert_true(n > 0);
        self[n] = '\0';
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            setenv("FPS_JAIL_TEST_UNPRIVILEGED", "1", 1);
            execlp("setpriv", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", self,
                   "--identity-only", (char *)NULL);
            _exit(127);
        }
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fail_msg("the identity test as uid 65534 (setpriv) failed: status %d", st);
    }
}

static void test_forbidden_calls_kill_the_child(void **state)
{
    (void)state;
    const char *modes[] = {"open",         "socket",       "fork",           "exec",
                           "ptrace",       "clone",        "dup2",           "sendto",
                           "prctl",        "capset",       "rlimit",         "call-clone",
                           "call-wait4",   "call-getppid", "call-pdeathsig", "call-getrandom",
                           "call-seccomp", "call-nproc"};
    /* Both kinds of child: forked by the zygote, and exec'd. */
    for (int exec_child = 0; exec_child < 2; exec_child++) {
        g_no_zygote = exec_child;
        for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
            sbx_pool *p = make_pool(1, -1, modes[i]);
            sbx_outcome o;
            eval_src(p, "1", 10, NULL, NULL, &o);
            if (o.status != SBX_JAIL_FAILURE)
                fprintf(stderr, "mode %s (exec %d): status %d line %s\n", modes[i], exec_child,
                        o.status, o.line ? o.line : "");
            assert_int_equal(o.status, SBX_JAIL_FAILURE);
            assert_non_null(strstr(o.detail, "seccomp"));
            assert_int_equal(sbx_outcome_end(&o, NULL), SBX_END_CRASH);
            sbx_outcome_free(&o);
            sbx_pool_free(p);
        }
    }
    g_no_zygote = 0;
}

/* A child that writes garbage, closes its outcome pipe and then neither
 * reads nor exits cannot hold the evaluation (or a slot) past a short grace. */
static void test_lingering_child_is_killed(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(1, -1, "linger");
    sbx_outcome o;
    double t = now_ms();
    eval_src(p, "1", 30, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_JAIL_FAILURE);
    assert_non_null(strstr(o.detail, "did not exit"));
    assert_true(now_ms() - t < 15000);
    sbx_outcome_free(&o);
    /* The slot is free again. */
    eval_src(p, "1", 30, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_JAIL_FAILURE);
    sbx_outcome_free(&o);
    sbx_pool_free(p);
}

static void test_bounds(void **state)
{
    (void)state;
    sbx_outcome o;
    /* CPU loop: killed at the wall-clock deadline. */
    sbx_pool *p = make_pool(1, -1, "spin");
    double t = now_ms();
    eval_src(p, "1", 0.5, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_TIMEOUT);
    assert_string_equal(o.limit, "timeout");
    assert_true(now_ms() - t < 3000);
    sbx_outcome_free(&o);
    sbx_pool_free(p);

    /* Blocked (not spinning): the wall clock still ends it. */
    p = make_pool(1, -1, "sleep");
    t = now_ms();
    eval_src(p, "1", 0.3, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_TIMEOUT);
    assert_true(now_ms() - t < 3000);
    sbx_outcome_free(&o);
    sbx_pool_free(p);

    /* Memory: the address-space limit stops the allocation. */
    p = make_pool(1, -1, "alloc");
    eval_src(p, "1", 20, NULL, NULL, &o);
    const char *d;
    assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_LIMIT);
    assert_string_equal(d, "memory");
    sbx_outcome_free(&o);
    sbx_pool_free(p);

    /* Output flood: killed past 1 MiB. */
    p = make_pool(1, -1, "flood");
    eval_src(p, "1", 10, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_OUTPUT);
    assert_string_equal(o.limit, "output");
    char *line = sbx_outcome_line(&o);
    assert_string_equal(line, "{\"ok\": false, \"stage\": \"limit\", \"error_type\": \"output\"}");
    free(line);
    sbx_outcome_free(&o);
    sbx_pool_free(p);

    /* A child that ends without an outcome fails closed. */
    p = make_pool(1, -1, "silent");
    eval_src(p, "1", 10, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_JAIL_FAILURE);
    sbx_outcome_free(&o);
    sbx_pool_free(p);
}

/* More bombs than slots: the wait for a slot counts against each budget, so
 * no child is handed an evaluation after its deadline and the ones whose
 * deadline passed while waiting are never started (fewer children than
 * evaluations), and each ends within its budget plus the kill and reap.
 * The slack is for a loaded machine, where a killed child's reaping can
 * wait seconds for a core; the pool's own bookkeeping is what is asserted
 * exactly. */
static void test_more_bombs_than_slots(void **state)
{
    (void)state;
    enum { N = 10 };
    const double budget = 1.5; /* back to back, 10 on 2 slots would take 7.5 s */
    sbx_pool *p = make_pool(2, 2, "spin");
    eval_thread_arg a[N];
    pthread_t th[N];
    double t0 = now_ms();
    for (int i = 0; i < N; i++) {
        a[i] = (eval_thread_arg){p, "1", budget, NULL, {0}, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, eval_thread, &a[i]), 0);
    }
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    double total = now_ms() - t0;
    int ran = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(a[i].out.status, SBX_TIMEOUT);
        /* Each one ended within its own budget (plus kill/reap slack). */
        assert_true(a[i].ended - a[i].started < budget * 1e3 + 5000);
        if (a[i].out.run_ms > 0) {
            ran++;
            assert_true(a[i].out.wait_ms < budget * 1e3);
        }
        sbx_outcome_free(&a[i].out);
    }
    /* Not N/slots budgets back to back: at most one budget and the slack. */
    assert_true(total < budget * 1e3 + 5000);
    sbx_stats s = sbx_pool_stats(p);
    assert_int_equal(s.started, (unsigned long)ran);
    assert_true(s.started >= 2 && s.started < N);
    sbx_pool_free(p);
}

static void test_cancel_while_waiting_for_a_slot(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(1, -1, "sleep");
    atomic_int c1 = 0, c2 = 0;
    eval_thread_arg a = {p, "1", 20, &c1, {0}, 0, 0}, b = {p, "1", 20, &c2, {0}, 0, 0};
    pthread_t ta, tb;
    assert_int_equal(pthread_create(&ta, NULL, eval_thread, &a), 0);
    while (sbx_pool_active(p) < 1)
        usleep(1000);
    assert_int_equal(pthread_create(&tb, NULL, eval_thread, &b), 0);
    usleep(100000);
    atomic_store(&c2, 1);
    pthread_join(tb, NULL);
    assert_int_equal(b.out.status, SBX_CANCELLED);
    assert_true(b.out.run_ms == 0);
    atomic_store(&c1, 1);
    pthread_join(ta, NULL);
    assert_int_equal(a.out.status, SBX_CANCELLED);
    sbx_outcome_free(&a.out);
    sbx_outcome_free(&b.out);
    assert_int_equal(sbx_pool_stats(p).started, 1);
    sbx_pool_free(p);
}

static int count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Children come from the zygote, which is itself jailed as far as forking
 * allows, and the pool survives losing it. */
/* A batch (sbx_eval_batch) on one image: a memory bomb (2nd of 5) or a CPU
 * bomb (3rd of 5) ends with its limit, and every other evaluation has the
 * outcome it has alone. The evaluations before the bomb and the bomb ran in
 * one evaluator; the memory bomb (refused by the interpreter, a clean
 * outcome) made it retire, the CPU bomb (killed at its deadline) took it
 * with it, and either way the evaluations after it ran in a fresh one. */
static void test_batch_contains_bombs(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, 1, NULL);
    json_t *t =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:[{s:s, s:s, s:s, s:{s:s}}]}",
                  "schema_version", "2", "assignment_id", "a-b", "session_id", "s-b",
                  "session_revision_id", "r-b", "agent_id", "agent", "environment", "test",
                  "started_at", "2026-08-28T12:00:00.000000Z", "ended_at",
                  "2026-08-28T12:00:01.000000Z", "event_count", 1, "events", "id", "e1", "ts",
                  "2026-08-28T12:00:00.000000Z", "event_type", "tool_use", "payload", "k", "v");
    fps_err err;
    char *text = json_dumps(t, JSON_COMPACT);
    assert_non_null(text);
    sbx_image *img = sbx_image_new(text, strlen(text), "a-b", 0, &err);
    free(text);
    json_decref(t);
    assert_non_null(img);
    const char *plain[] = {"len(session.events)", "{str(i): i for i in range(1000)}['7']",
                           "session.events[0].payload['k'] * 3", "sorted([3, 1, 2])",
                           "'x'.join(['a', 'b'])"};
    const char *bomb[] = {"[0] * (2 ** 40)", "len([0 for i in range(10 ** 12) if i < 0])"};
    const char *limit[] = {"memory", "timeout"};
    for (int b = 0; b < 2; b++) {
        int at = b == 0 ? 1 : 2;
        sbx_request reqs[5];
        sbx_outcome outs[5];
        memset(reqs, 0, sizeof reqs);
        for (int i = 0; i < 5; i++) {
            reqs[i].kind = LANG_RAW;
            reqs[i].source = i == at ? bomb[b] : plain[i];
            reqs[i].source_len = strlen(reqs[i].source);
            reqs[i].timeout_s = i == at ? 1 : 10;
        }
        unsigned long holders0 = sbx_pool_stats(p).holders;
        sbx_eval_batch(p, img, reqs, 5, outs);
        assert_int_equal(sbx_pool_stats(p).holders - holders0, 2);
        /* One evaluator serves the evaluations before the bomb and the bomb;
         * a fresh one serves those after it. */
        for (int i = 0; i < 5; i++) {
            assert_true(outs[i].pid > 0);
            if (i <= at) assert_int_equal(outs[i].pid, outs[0].pid);
            if (i > at + 1) assert_int_equal(outs[i].pid, outs[at + 1].pid);
            for (int j = 0; j <= at && i > at; j++)
                assert_int_not_equal(outs[i].pid, outs[j].pid);
        }
        for (int i = 0; i < 5; i++) {
            char *line = sbx_outcome_line(&outs[i]);
            assert_non_null(line);
            if (i == at) {
                assert_non_null(strstr(line, "\"stage\": \"limit\""));
                assert_non_null(strstr(line, limit[b]));
            } else {
                sbx_outcome alone;
                sbx_request r = reqs[i];
                r.image = img;
                sbx_eval(p, &r, &alone);
                char *want = sbx_outcome_line(&alone);
                if (outs[i].status != SBX_OK) fprintf(stderr, "batch %d/%d: %s\n", b, i, line);
                assert_int_equal(outs[i].status, SBX_OK);
                assert_string_equal(line, want);
                free(want);
                sbx_outcome_free(&alone);
            }
            free(line);
            sbx_outcome_free(&outs[i]);
        }
    }
    sbx_image_release(img);
    sbx_pool_free(p);
}

/* ---- sessions: one evaluator per session, serving its evaluations in turn ---- */

/* A session image of `n` events (every third a message, the rest tool_use
 * with payload {"k": "v", "n": i}). */
static sbx_image *make_image(int n, const char *id)
{
    json_t *events = json_array();
    for (int i = 0; i < n; i++) {
        char eid[32];
        snprintf(eid, sizeof eid, "e%d", i);
        json_array_append_new(events, json_pack("{s:s, s:s, s:s, s:{s:s, s:i}}", "id", eid, "ts",
                                                "2026-08-28T12:00:00.000000Z", "event_type",
                                                i % 3 ? "tool_use" : "message", "payload", "k", "v",
                                                "n", i));
    }
    json_t *t =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:o}", "schema_version", "2",
                  "assignment_id", id, "session_id", id, "session_revision_id", "r", "agent_id",
                  "agent", "environment", "test", "started_at", "2026-08-28T12:00:00.000000Z",
                  "ended_at", "2026-08-28T12:00:01.000000Z", "event_count", n, "events", events);
    char *text = json_dumps(t, JSON_COMPACT);
    json_decref(t);
    assert_non_null(text);
    fps_err err;
    sbx_image *img = sbx_image_new(text, strlen(text), id, 0, &err);
    free(text);
    assert_non_null(img);
    return img;
}

static sbx_request raw_req(const char *src, double timeout, atomic_int *cancel)
{
    sbx_request r;
    memset(&r, 0, sizeof r);
    r.kind = LANG_RAW;
    r.source = src;
    r.source_len = strlen(src);
    r.timeout_s = timeout;
    r.cancel = cancel;
    return r;
}

static void sess_raw(sbx_session *s, const char *src, double timeout, sbx_outcome *out)
{
    sbx_request r = raw_req(src, timeout, NULL);
    sbx_session_eval(s, &r, out);
}

/* `src` as the first evaluation of a session of its own. */
static void first_of_session(sbx_pool *p, sbx_image *img, const char *src, sbx_outcome *out)
{
    sbx_session *s = sbx_session_open(p, img);
    assert_non_null(s);
    sess_raw(s, src, 30, out);
    sbx_session_close(s);
}

/* The first process whose parent is `ppid`, or 0. */
static int child_of(int ppid)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int found = 0;
    while (d != NULL && found == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        int pid = atoi(e->d_name);
        if (stat_field(pid, 4) == ppid) found = pid;
    }
    if (d != NULL) closedir(d);
    return found;
}

/* The inode of the one session image (memfd) that /proc/<pid>/maps and
 * /proc/<pid>/fd show: 0 when none, -1 when more than one. */
static long session_image_inode(int pid)
{
    char path[64], line[512];
    long ino = 0;
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
        if (!strstr(line, "fps-session-image")) continue;
        long i = -1;
        assert_int_equal(sscanf(line, "%*s %*s %*s %*s %ld", &i), 1);
        if (ino != 0 && ino != i) ino = -1;
        if (ino == 0) ino = i;
    }
    fclose(f);
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char link[300], target[256];
        if (e->d_name[0] == '.') continue;
        snprintf(link, sizeof link, "/proc/%d/fd/%s", pid, e->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        struct stat st;
        if (n <= 0) continue;
        target[n] = '\0';
        if (!strstr(target, "fps-session-image") || stat(link, &st) != 0) continue;
        if (ino != 0 && ino != (long)st.st_ino) ino = -1;
        if (ino == 0) ino = (long)st.st_ino;
    }
    closedir(d);
    return ino;
}

/* In one session, an evaluation that builds a huge dict and interns many
 * strings leaves nothing behind: the evaluation after it has the outcome,
 * step count and bytes allocated it has as the first of a session (and the
 * outcome it has alone, through sbx_eval), and in the plain build its peak
 * RSS within 10 % (the bomb's heap grew past JAIL_EVALUATOR_HEAP, so its
 * evaluator retired). One that stays under that bound, having filled the
 * caches (a dict, a set of interned strings, string methods), is followed in
 * the same evaluator by evaluations with their outcomes, steps and bytes
 * alone. Their peak RSS is each one's own (reset before it), but counts the
 * pages the evaluator kept resident for them, so it is not compared. */
static void test_session_state_isolation(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, 1, NULL);
    sbx_image *img = make_image(300, "a-iso");
    const char *bomb = "len({str(i) * 3: [i, str(i), {'k': str(i)}] for i in range(200000)}) + "
                       "len(set([str(i % 7919) + 'x' for i in range(200000)]))";
    const char *filler = "len({str(i) * 2: [i, str(i).upper()] for i in range(5000)}) + "
                         "len(set([str(i % 997) + 'y' for i in range(5000)])) + "
                         "len(' '.join([e.event_type for e in session.events]).split())";
    const char *after[] = {"len([e for e in session.events if e.event_type == 'tool_use'])",
                           "{str(i): i for i in range(2000)}['77']",
                           "sorted([e.payload['n'] for e in session.events if "
                           "e.event_type == 'tool_use'])[-3:]",
                           "'-'.join([str(i) for i in range(300)])[-20:]"};
    enum { N = sizeof after / sizeof after[0] };
    sbx_outcome alone[N];
    for (int i = 0; i < N; i++) {
        first_of_session(p, img, after[i], &alone[i]);
        assert_int_equal(alone[i].status, SBX_OK);
        assert_true(alone[i].has_stats && alone[i].steps > 0 && alone[i].peak_rss_kb > 0);
        sbx_outcome single;
        sbx_request r = raw_req(after[i], 30, NULL);
        r.image = img;
        sbx_eval(p, &r, &single);
        assert_int_equal(single.status, SBX_OK);
        assert_string_equal(alone[i].line, single.line);
        sbx_outcome_free(&single);
    }
    /* The bomb, then each evaluation in turn. */
    for (int i = 0; i < N; i++) {
        sbx_session *s = sbx_session_open(p, img);
        assert_non_null(s);
        sbx_outcome b, o;
        sess_raw(s, bomb, 60, &b);
        if (b.status != SBX_OK) fail_msg("the bomb: %s", b.detail);
        assert_string_equal(b.line, "{\"ok\": true, \"repr\": \"207919\"}");
        assert_true(b.has_stats);
        assert_true(b.alloc_bytes > ((unsigned long long)20 << 20));
        /* Its heap grew past JAIL_EVALUATOR_HEAP: its evaluator retired. */
        assert_int_equal(sbx_session_pid(s), -1);
        sess_raw(s, after[i], 30, &o);
        assert_int_equal(o.status, SBX_OK);
        assert_true(o.pid > 0 && o.pid != b.pid);
        fprintf(stderr,
                "after the bomb: %s steps %llu alloc %llu rss %ld kB; alone: rss %ld kB "
                "(the bomb: rss %ld kB)\n",
                o.line, o.steps, o.alloc_bytes, o.peak_rss_kb, alone[i].peak_rss_kb, b.peak_rss_kb);
        assert_string_equal(o.line, alone[i].line);
        assert_true(o.has_stats);
        assert_true(o.steps == alone[i].steps);
        assert_true(o.alloc_bytes == alone[i].alloc_bytes);
        assert_true(o.peak_rss_kb > 0 && o.peak_rss_kb * 2 < b.peak_rss_kb);
#ifndef FPS_SANITIZE
        assert_true(labs(o.peak_rss_kb - alone[i].peak_rss_kb) * 10 <= alone[i].peak_rss_kb);
#endif
        sbx_outcome_free(&o);
        sbx_outcome_free(&b);
        sbx_session_close(s);
    }
    /* The filler, then all of them in the same evaluator. */
    sbx_session *s = sbx_session_open(p, img);
    assert_non_null(s);
    sbx_outcome f;
    sess_raw(s, filler, 30, &f);
    assert_int_equal(f.status, SBX_OK);
    assert_int_equal(sbx_session_pid(s), f.pid);
    for (int i = 0; i < N; i++) {
        sbx_outcome o;
        sess_raw(s, after[i], 30, &o);
        assert_int_equal(o.status, SBX_OK);
        assert_int_equal(o.pid, f.pid);
        assert_string_equal(o.line, alone[i].line);
        assert_true(o.has_stats);
        assert_true(o.steps == alone[i].steps);
        assert_true(o.alloc_bytes == alone[i].alloc_bytes);
        assert_true(o.peak_rss_kb > 0 && o.peak_rss_kb < f.peak_rss_kb + 1024);
        sbx_outcome_free(&o);
    }
    sbx_session_close(s);
    sbx_outcome_free(&f);
    for (int i = 0; i < N; i++)
        sbx_outcome_free(&alone[i]);
    sbx_image_release(img);
    sbx_pool_free(p);
}

/* Each evaluation of a session draws its own string-hash key, as separate
 * children do: the iteration order of a set of strings differs. */
static void test_session_fresh_hash_key(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, 1, NULL);
    const char *src = "str(list({'alpha', 'beta', 'gamma', 'delta', 'eps', 'zeta', 'eta', "
                      "'theta', 'iota', 'kappa', 'lam', 'mu'}))";
    enum { N = 4 };
    char *lines[N];
    sbx_session *s = sbx_session_open(p, NULL);
    assert_non_null(s);
    for (int i = 0; i < N; i++) {
        sbx_outcome o;
        sess_raw(s, src, 10, &o);
        assert_int_equal(o.status, SBX_OK);
        lines[i] = strdup(o.line);
        sbx_outcome_free(&o);
    }
    sbx_session_close(s);
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < N; j++)
            assert_string_not_equal(lines[i], lines[j]);
    /* As between separate children. */
    sbx_outcome x, y;
    eval_raw(p, src, &x);
    eval_raw(p, src, &y);
    assert_int_equal(x.status, SBX_OK);
    assert_string_not_equal(x.line, y.line);
    sbx_outcome_free(&x);
    sbx_outcome_free(&y);
    for (int i = 0; i < N; i++)
        free(lines[i]);
    sbx_pool_free(p);
}

typedef struct {
    sbx_session *s;
    const char *src;
    atomic_int *cancel;
    sbx_outcome out;
} sess_thread_arg;

static void *sess_thread(void *arg)
{
    sess_thread_arg *a = arg;
    sbx_request r = raw_req(a->src, 30, a->cancel);
    sbx_session_eval(a->s, &r, &a->out);
    return NULL;
}

/* Two sessions open at once: two evaluators, no pid shared, each the
 * parent's own child, mapping its own session's image and not the other's
 * (and no open memfd), with both filters, RLIMIT_NPROC 0 and no child of its
 * own; cancelling a running evaluation kills its evaluator, which is reaped,
 * and the session goes on in a fresh one. */
static void test_sessions_observed_from_outside(void **state)
{
    (void)state;
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    sbx_pool *p = make_pool(2, 2, NULL);
    sbx_image *ia = make_image(50, "a-1"), *ib = make_image(60, "a-2");
    sbx_session *a = sbx_session_open(p, ia), *b = sbx_session_open(p, ib);
    assert_non_null(a);
    assert_non_null(b);
    int pids[4];
    for (int i = 0; i < 2; i++) {
        sbx_outcome oa, ob;
        sess_raw(a, "len(session.events)", 10, &oa);
        sess_raw(b, "len(session.events)", 10, &ob);
        assert_string_equal(oa.line, "{\"ok\": true, \"repr\": \"50\"}");
        assert_string_equal(ob.line, "{\"ok\": true, \"repr\": \"60\"}");
        pids[(size_t)2 * i] = oa.pid;
        pids[2 * i + 1] = ob.pid;
        sbx_outcome_free(&oa);
        sbx_outcome_free(&ob);
    }
    int ha = sbx_session_pid(a), hb = sbx_session_pid(b);
    assert_true(ha > 0 && hb > 0 && ha != hb);
    assert_int_equal(stat_field(ha, 4), getpid());
    assert_int_equal(stat_field(hb, 4), getpid());
    /* Each session's evaluations, in the one evaluator of its own. */
    assert_int_equal(pids[0], ha);
    assert_int_equal(pids[2], ha);
    assert_int_equal(pids[1], hb);
    assert_int_equal(pids[3], hb);
    int evs[2] = {ha, hb};
    long inodes[2];
    for (int i = 0; i < 2; i++) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/status", evs[i]);
        assert_int_equal(status_field(path, "NoNewPrivs"), 1);
        assert_int_equal(status_field(path, "Seccomp"), 2);
        long nf = status_field(path, "Seccomp_filters");
        assert_true(nf == -1 || nf == 2);
        inodes[i] = session_image_inode(evs[i]);
        assert_true(inodes[i] > 0);
        snprintf(path, sizeof path, "/proc/%d/fd", evs[i]);
        assert_int_equal(count_dir(path), 3); /* the request socket, the outcome pipe, stderr */
        snprintf(path, sizeof path, "/proc/%d/limits", evs[i]);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char line[256];
        int nproc_zero = 0;
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "Max processes", 13)) {
                char soft[32];
                nproc_zero = sscanf(line + 26, "%31s", soft) == 1 && !strcmp(soft, "0");
            }
        fclose(f);
        assert_true(nproc_zero);
    }
    assert_int_not_equal(inodes[0], inodes[1]);

    /* A running evaluation, seen from outside (in the evaluator itself, which
     * has no child), then cancelled. */
    atomic_int cancel = 0;
    sess_thread_arg t = {a, "len([0 for i in range(10 ** 12) if i < 0])", &cancel, {0}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, sess_thread, &t), 0);
    long cpu0 = stat_field(ha, 14) + stat_field(ha, 15);
    for (int i = 0; i < 1000 && stat_field(ha, 14) + stat_field(ha, 15) < cpu0 + 5; i++)
        usleep(5000);
    assert_true(stat_field(ha, 14) + stat_field(ha, 15) >= cpu0 + 5);
    assert_int_equal(child_of(ha), 0);
    atomic_store(&cancel, 1);
    pthread_join(th, NULL);
    assert_int_equal(t.out.status, SBX_CANCELLED);
    sbx_outcome_free(&t.out);
    assert_int_equal(sbx_session_pid(a), -1);
    /* Gone, reaped. */
    for (int i = 0; i < 500 && kill(ha, 0) == 0; i++)
        usleep(10000);
    assert_int_equal(kill(ha, 0), -1);
    sbx_outcome again;
    sess_raw(a, "len(session.events)", 10, &again);
    assert_string_equal(again.line, "{\"ok\": true, \"repr\": \"50\"}");
    assert_true(sbx_session_pid(a) > 0 && sbx_session_pid(a) != ha);
    sbx_outcome_free(&again);
    sbx_session_close(a);
    sbx_session_close(b);
    sbx_image_release(ia);
    sbx_image_release(ib);
    sbx_pool_free(p);
    assert_no_zombies("sessions observed from outside");
    assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
}

/* The one CPU pid may run on, or -1 when it may run on several (or is
 * gone). */
static int only_cpu(int pid)
{
    cpu_set_t set;
    if (sched_getaffinity(pid, sizeof set, &set) != 0 || CPU_COUNT(&set) != 1) return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set)) return c;
    return -1;
}

/* sbx_session_set_cpu keeps the session's evaluator on the CPU, the one it
 * has (a pre-started one) and a fresh one after a cancel; the outcome is
 * what it is unpinned. */
static void test_session_pinned_to_a_cpu(void **state)
{
    (void)state;
    cpu_set_t allowed;
    assert_int_equal(sched_getaffinity(0, sizeof allowed, &allowed), 0);
    int cpu = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &allowed)) cpu = c; /* the last allowed */
    assert_true(cpu >= 0);
    sbx_pool *p = make_pool(2, 1, NULL);
    sbx_image *img = make_image(50, "a-pin");
    for (int i = 0; i < 500 && sbx_pool_stats(p).idle < 1; i++)
        usleep(10000);
    sbx_session *s = sbx_session_open(p, img);
    assert_non_null(s);
    assert_true(sbx_session_pid(s) > 0); /* the pre-started child, pinned now */
    sbx_session_set_cpu(s, cpu);
    sbx_outcome o;
    sess_raw(s, "len(session.events)", 10, &o);
    assert_string_equal(o.line, "{\"ok\": true, \"repr\": \"50\"}");
    sbx_outcome_free(&o);
    int h = sbx_session_pid(s);
    assert_true(h > 0);
    assert_int_equal(only_cpu(h), cpu);
    for (int round = 0; round < 2; round++) {
        atomic_int cancel = 0;
        sess_thread_arg t = {s, "len([0 for i in range(10 ** 12) if i < 0])", &cancel, {0}};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, sess_thread, &t), 0);
        h = 0; /* the evaluator, as the pool lists it (thread-safe) */
        for (int i = 0; i < 1000 && sbx_pool_running_pids(p, &h, 1) < 1; i++)
            usleep(5000);
        assert_true(h > 0);
        assert_int_equal(only_cpu(h), cpu);
        atomic_store(&cancel, 1);
        pthread_join(th, NULL);
        assert_int_equal(t.out.status, SBX_CANCELLED);
        sbx_outcome_free(&t.out);
    }
    sess_raw(s, "len(session.events)", 10, &o);
    assert_string_equal(o.line, "{\"ok\": true, \"repr\": \"50\"}");
    assert_int_equal(only_cpu(sbx_session_pid(s)), cpu);
    sbx_outcome_free(&o);
    sbx_session_close(s);
    sbx_image_release(img);
    sbx_pool_free(p);
    assert_no_zombies("session pinned to a cpu");
}

/* A session's evaluators are held to the bounds and the allowlist of a
 * single-use child: forbidden calls (forking included) kill them, and a
 * spin, an output flood, an allocation past RLIMIT_AS and a silent exit
 * end as they do alone; after each, the session goes on. */
static void test_session_bounds(void **state)
{
    (void)state;
    const char *forbidden[] = {"fork", "clone", "exec", "open", "socket", "prctl", "rlimit",
                               "sendto",
                               /* what only lock-down needs, and what forking would */
                               "call-clone", "call-wait4", "call-getppid",
#ifndef FPS_SANITIZE
                               "call-getpid", /* the sanitizer runtimes' */
#endif
                               "call-getrandom", "call-pdeathsig", "call-seccomp", "call-nproc"};
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++) {
        sbx_pool *p = make_pool(1, -1, forbidden[i]);
        sbx_session *s = sbx_session_open(p, NULL);
        for (int k = 0; k < 2; k++) {
            sbx_outcome o;
            sess_raw(s, "1", 10, &o);
            if (o.status != SBX_JAIL_FAILURE || !strstr(o.detail, "seccomp"))
                fail_msg("mode %s: status %d detail %s", forbidden[i], o.status, o.detail);
            sbx_outcome_free(&o);
        }
        sbx_session_close(s);
        sbx_pool_free(p);
    }
    struct {
        const char *mode;
        double timeout;
        sbx_status status;
        const char *limit;
    } cases[] = {{"spin", 0.5, SBX_TIMEOUT, "timeout"},
                 {"linger", 30, SBX_JAIL_FAILURE, NULL},
                 {"flood", 10, SBX_OUTPUT, "output"},
                 {"alloc", 20, SBX_OK, NULL},
                 {"silent", 10, SBX_JAIL_FAILURE, NULL}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sbx_pool *p = make_pool(1, -1, cases[i].mode);
        sbx_session *s = sbx_session_open(p, NULL);
        for (int k = 0; k < 2; k++) {
            sbx_outcome o;
            double t = now_ms();
            sess_raw(s, "1", cases[i].timeout, &o);
            assert_int_equal(o.status, cases[i].status);
            if (cases[i].limit != NULL) assert_string_equal(o.limit, cases[i].limit);
            if (cases[i].status == SBX_OK) {
                const char *d;
                assert_int_equal(sbx_outcome_end(&o, &d), SBX_END_LIMIT);
                assert_string_equal(d, "memory");
            }
            assert_true(
                now_ms() - t <
                (cases[i].status == SBX_JAIL_FAILURE ? 15000 : cases[i].timeout * 1e3 + 5000));
            if (!strcmp(cases[i].mode, "linger")) assert_non_null(strstr(o.detail, "did not exit"));
            sbx_outcome_free(&o);
        }
        sbx_session_close(s);
        sbx_pool_free(p);
    }
}

/* ---- the seccomp programs, run outside the kernel ---- */

/* What one classic-BPF seccomp program answers for `d` (the kernel's
 * interpreter, for the instructions libseccomp emits); *args_read gets a
 * bit per argument the run loaded. Fails the test on anything else. */
static uint32_t bpf_run(const struct sock_filter *f, size_t n, const struct seccomp_data *d,
                        unsigned *args_read)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    for (size_t pc = 0; pc < n; pc++) {
        const struct sock_filter *i = &f[pc];
        uint32_t k = i->k;
        switch (i->code) {
        case BPF_LD | BPF_W | BPF_ABS:
            if (k % 4 != 0 || k + 4 > sizeof *d) fail_msg("load at %u", k);
            memcpy(&a, (const char *)d + k, 4);
            if (k >= offsetof(struct seccomp_data, args))
                *args_read |= 1u << ((k - offsetof(struct seccomp_data, args)) / 8);
            break;
        case BPF_LD | BPF_IMM:
            a = k;
            break;
        case BPF_LDX | BPF_IMM:
            x = k;
            break;
        case BPF_LD | BPF_MEM:
            a = mem[k % BPF_MEMWORDS];
            break;
        case BPF_LDX | BPF_MEM:
            x = mem[k % BPF_MEMWORDS];
            break;
        case BPF_ST:
            mem[k % BPF_MEMWORDS] = a;
            break;
        case BPF_STX:
            mem[k % BPF_MEMWORDS] = x;
            break;
        case BPF_MISC | BPF_TAX:
            x = a;
            break;
        case BPF_MISC | BPF_TXA:
            a = x;
            break;
        case BPF_ALU | BPF_AND | BPF_K:
            a &= k;
            break;
        case BPF_ALU | BPF_OR | BPF_K:
            a |= k;
            break;
        case BPF_RET | BPF_K:
            return k;
        case BPF_RET | BPF_A:
            return a;
        case BPF_JMP | BPF_JA:
            pc += k;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            pc += a == k ? i->jt : i->jf;
            break;
        case BPF_JMP | BPF_JGT | BPF_K:
            pc += a > k ? i->jt : i->jf;
            break;
        case BPF_JMP | BPF_JGE | BPF_K:
            pc += a >= k ? i->jt : i->jf;
            break;
        case BPF_JMP | BPF_JSET | BPF_K:
            pc += (a & k) ? i->jt : i->jf;
            break;
        case BPF_JMP | BPF_JEQ | BPF_X:
            pc += a == x ? i->jt : i->jf;
            break;
        case BPF_JMP | BPF_JGT | BPF_X:
            pc += a > x ? i->jt : i->jf;
            break;
        case BPF_JMP | BPF_JGE | BPF_X:
            pc += a >= x ? i->jt : i->jf;
            break;
        default:
            fail_msg("BPF opcode 0x%x", i->code);
        }
    }
    fail_msg("BPF program ran off its end");
    return 0;
}

/* Stacked filters as the kernel combines them (seccomp_run_filters): every
 * one runs, the lowest action (as s32) wins, the newest on a tie. */
static uint32_t bpf_stacked(const struct sock_filter *newest, size_t nn,
                            const struct sock_filter *oldest, size_t no,
                            const struct seccomp_data *d, unsigned *args_read)
{
    uint32_t r1 = bpf_run(newest, nn, d, args_read), r2 = bpf_run(oldest, no, d, args_read);
    return (int32_t)(r2 & SECCOMP_RET_ACTION_FULL) < (int32_t)(r1 & SECCOMP_RET_ACTION_FULL) ? r2
                                                                                             : r1;
}

/* An evaluating process runs under the outer filter and the inner one on
 * top: that stack answers every call exactly as the evaluating allowlist
 * does (action and errno alike), for every system call number of every
 * architecture the kernel may report and every argument value the rules
 * tell apart (each constant they compare, its neighbours, its high-word
 * variants). The lock-down calls are among the answers that differ: the
 * outer filter alone allows them, the stack kills them; and what a process
 * that forks would need, the outer filter alone already kills. */
static void test_inner_filter_takes_back_only_the_lock_down_calls(void **state)
{
    (void)state;
    void *outer, *inner, *eval;
    size_t no, ni, ne;
    assert_int_equal(jail_compile_filter(JAIL_FILTER_OUTER, &outer, &no), 0);
    assert_int_equal(jail_compile_filter(JAIL_FILTER_INNER, &inner, &ni), 0);
    assert_int_equal(jail_compile_filter(JAIL_FILTER_EVALUATING, &eval, &ne), 0);
    print_message("seccomp programs: outer %zu, inner %zu, evaluating %zu instructions\n", no, ni,
                  ne);
    assert_true(ni < ne);
    uint64_t vals[96];
    size_t nv = 0;
    for (uint64_t v = 0; v <= 40; v++)
        vals[nv++] = v;
    const uint64_t odd[] = {0xff,       0x100 | SIGCHLD, 0x7fffffff, 0x80000000,
                            0xffffffff, 0x12345678,      1ull << 32, ~0ull};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        vals[nv++] = odd[i];
    for (uint64_t v = 0; v <= 24; v++)
        vals[nv++] = (1ull << 32) | v;
    const uint32_t arches[] = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, 0};
    const struct sock_filter *fo = outer, *fi = inner, *fe = eval;
    unsigned long compared = 0, arg_dependent = 0;
    for (size_t ai = 0; ai < sizeof arches / sizeof arches[0]; ai++) {
        for (int64_t nr = -1; nr < 0x40000000 + 1100; nr++) {
            if (nr == 1100) nr = 0x40000000 - 1; /* x32's numbers from here */
            struct seccomp_data d;
            memset(&d, 0, sizeof d);
            d.arch = arches[ai];
            d.nr = (int)nr;
            unsigned read = 0;
            uint32_t want = bpf_run(fe, ne, &d, &read);
            uint32_t got = bpf_stacked(fi, ni, fo, no, &d, &read);
            compared++;
            if (got != want)
                fail_msg("arch 0x%x nr %lld: stacked 0x%x, allowlist 0x%x", d.arch, (long long)nr,
                         got, want);
            if (read == 0) continue; /* nothing looked at an argument: the answer is nr's */
            if (read & ~7u)
                fail_msg("nr %lld: an argument past the third is compared", (long long)nr);
            arg_dependent++;
            for (size_t i = 0; i < nv; i++)
                for (size_t j = 0; j < nv; j++)
                    for (size_t k = 0; k < nv; k++) {
                        d.args[0] = vals[i];
                        d.args[1] = vals[j];
                        d.args[2] = vals[k];
                        unsigned r = 0;
                        want = bpf_run(fe, ne, &d, &r);
                        got = bpf_stacked(fi, ni, fo, no, &d, &r);
                        compared++;
                        if (got != want)
                            fail_msg("arch 0x%x nr %lld args 0x%llx 0x%llx 0x%llx: stacked 0x%x, "
                                     "allowlist 0x%x",
                                     d.arch, (long long)nr, (unsigned long long)d.args[0],
                                     (unsigned long long)d.args[1], (unsigned long long)d.args[2],
                                     got, want);
                    }
        }
    }
    print_message("compared %lu inputs, %lu system calls with arguments compared\n", compared,
                  arg_dependent);
    assert_true(arg_dependent >= 8);
    /* The lock-down calls: allowed by the outer filter alone, killed by the
     * stack. A forking process's calls: killed by the outer filter. */
    const struct {
        int nr, outer_allows;
        uint64_t a0, a1;
    } calls[] = {{__NR_getrandom, 1, 0, 0},
                 {__NR_prctl, 1, PR_SET_SECCOMP, 0},
                 {__NR_clone, 0, SIGCHLD, 0},
                 {__NR_wait4, 0, 0, 0},
                 {__NR_getppid, 0, 0, 0},
                 {__NR_socketpair, 0, AF_UNIX, 0},
                 {__NR_dup3, 0, 4, 0},
                 {__NR_prctl, 0, PR_SET_PDEATHSIG, 0},
                 {__NR_prlimit64, 0, 0, RLIMIT_NPROC},
                 {__NR_read, 0, 3, 0},
                 {__NR_write, 0, 3, 0}};
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
        struct seccomp_data d;
        memset(&d, 0, sizeof d);
        d.arch = AUDIT_ARCH_X86_64;
        d.nr = calls[i].nr;
        d.args[0] = calls[i].a0;
        d.args[1] = calls[i].a1;
        d.args[2] = 0x1000; /* prlimit64: a new limit */
        unsigned r = 0;
        if ((bpf_run(fo, no, &d, &r) == SECCOMP_RET_ALLOW) != calls[i].outer_allows)
            fail_msg("call %d (0x%llx): the outer filter %s it", calls[i].nr,
                     (unsigned long long)calls[i].a0, calls[i].outer_allows ? "refuses" : "allows");
        if (bpf_stacked(fi, ni, fo, no, &d, &r) == SECCOMP_RET_ALLOW)
            fail_msg("call %d is allowed in an evaluating process", calls[i].nr);
    }
    free(outer);
    free(inner);
    free(eval);
}

static void test_zygote(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, -1, NULL);
    assert_int_equal(sbx_pool_layers(p).zygote, 1);
    int zpid = sbx_pool_zygote_pid(p);
    assert_true(zpid > 0);

    /* The zygote from outside: our child, a fresh exec of the child image
     * in zygote mode, no environment, no_new_privs, fds 0-2 only. */
    assert_int_equal(stat_field(zpid, 4), getpid());
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/cmdline", zpid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    int saw_zygote = 0;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (!strcmp(buf + i, "--zygote")) saw_zygote = 1;
    assert_true(saw_zygote);
    snprintf(path, sizeof path, "/proc/%d/status", zpid);
    assert_int_equal(status_field(path, "NoNewPrivs"), 1);
    f = fopen(path, "r");
    assert_non_null(f);
    int caps_zero = 0;
    while (fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "CapEff:", 7) || !strncmp(buf, "CapPrm:", 7))
            caps_zero += strtoull(buf + 7, NULL, 16) == 0;
    fclose(f);
    assert_int_equal(caps_zero, 2);
    snprintf(path, sizeof path, "/proc/%d/fd", zpid);
    assert_int_equal(count_dir(path), 3);
#ifndef FPS_SANITIZE
    snprintf(path, sizeof path, "/proc/%d/environ", zpid);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof buf, f), 0);
    fclose(f);
#endif

    sbx_outcome o;
    eval_src(p, "EvalResult(score=Score(0.25))", 10, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_OK);
    assert_true(json_is_true(json_object_get(o.json, "ok")));
    sbx_outcome_free(&o);
    sbx_stats s = sbx_pool_stats(p);
    assert_true(s.forked >= 1);
    assert_int_equal(s.zygotes, 1);

    /* Lose the zygote: the next child comes from a new one. */
    assert_int_equal(kill(zpid, SIGKILL), 0);
    for (int i = 0; i < 3; i++) {
        eval_raw(p, "1 + 2", &o);
        assert_int_equal(o.status, SBX_OK);
        assert_string_equal(json_string_value(json_object_get(o.json, "repr")), "3");
        sbx_outcome_free(&o);
    }
    s = sbx_pool_stats(p);
    assert_int_equal(s.zygotes, 2);
    int z2 = sbx_pool_zygote_pid(p);
    assert_true(z2 > 0 && z2 != zpid);
    assert_int_equal(kill(zpid, 0), -1); /* the old one was reaped */
    sbx_pool_free(p);
    assert_int_equal(kill(z2, 0), -1); /* and the new one on free */

    /* A running child forked by the zygote is OUR child (CLONE_PARENT). */
    p = make_pool(1, -1, "sleep");
    atomic_int cancel = 0;
    eval_thread_arg a;
    pthread_t th;
    int pid = start_sleeper(p, &a, &cancel, &th);
    assert_int_equal(stat_field(pid, 4), getpid());
    atomic_store(&cancel, 1);
    pthread_join(th, NULL);
    assert_int_equal(a.out.status, SBX_CANCELLED);
    sbx_outcome_free(&a.out);
    sbx_pool_free(p);

    /* Without the zygote every child is exec'd. */
    g_no_zygote = 1;
    p = make_pool(1, -1, NULL);
    assert_int_equal(sbx_pool_layers(p).zygote, 0);
    assert_int_equal(sbx_pool_zygote_pid(p), -1);
    eval_raw(p, "2 * 21", &o);
    assert_int_equal(o.status, SBX_OK);
    assert_string_equal(json_string_value(json_object_get(o.json, "repr")), "42");
    sbx_outcome_free(&o);
    assert_int_equal(sbx_pool_stats(p).forked, 0);
    sbx_pool_free(p);
    g_no_zygote = 0;
}

/* The fallback child image (the sidecar itself, SBX_CHILD_ARG) works the
 * same when the small failproofai-sandbox image is not installed. */
static void test_fallback_child_image(void **state)
{
    (void)state;
    g_no_helper = 1;
    sbx_pool *p = make_pool(1, -1, "echo");
    sbx_outcome o;
    eval_src(p, "1 + 1", 10, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_OK);
    assert_string_equal(json_string_value(json_object_get(o.json, "source")), "1 + 1");
    sbx_outcome_free(&o);
    sbx_pool_free(p);
    p = make_pool(1, -1, "socket");
    eval_src(p, "1", 10, NULL, NULL, &o);
    assert_int_equal(o.status, SBX_JAIL_FAILURE);
    sbx_outcome_free(&o);
    sbx_pool_free(p);
    g_no_helper = 0;
}

typedef struct {
    sbx_pool *pool;
    int n, bad;
    char first[256]; /* the first failure: its index and outcome line */
} loop_arg;

static void *loop_thread(void *arg)
{
    loop_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        sbx_outcome o;
        /* The longest budget there is: a trivial evaluation's deadline
         * covers its slot wait and its child's start, which a sanitizer
         * build on a loaded machine can stretch to seconds; this test is
         * about leaks, not speed. */
        eval_src(a->pool, "1", 60, NULL, NULL, &o);
        if (o.status != SBX_OK && a->bad++ == 0) {
            char *line = sbx_outcome_line(&o); /* what went wrong, for the log */
            snprintf(a->first, sizeof a->first, "evaluation %d: %s", i, line ? line : "?");
            fprintf(stderr, "%s\n", a->first);
            free(line);
        }
        sbx_outcome_free(&o);
    }
    return NULL;
}

/* Children that end unobserved: a pre-started child and the zygote killed
 * from outside (the OOM killer, an operator), and a child of the sandbox
 * image the pool never knew of, are reaped by the pool within seconds,
 * with no evaluation to notice them, so none lingers as a zombie; the dead
 * idle child is replaced, and the next evaluation gets a fresh zygote. */
static void test_children_that_end_unobserved_are_reaped(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, 2, NULL);
    for (int i = 0; i < 1000 && sbx_pool_stats(p).idle < 2; i++)
        usleep(10000);
    assert_int_equal(sbx_pool_stats(p).idle, 2);
    int idle[2];
    assert_int_equal(sbx_pool_idle_pids(p, idle, 2), 2);
    int zpid = sbx_pool_zygote_pid(p);
    assert_true(zpid > 0);
    unsigned long spawned = sbx_pool_stats(p).spawned;
    assert_int_equal(kill(idle[0], SIGKILL), 0);
    assert_int_equal(kill(zpid, SIGKILL), 0);
    /* Until reaped, each stays in /proc (a zombie takes signals too). */
    for (int i = 0; i < 3000 && (kill(idle[0], 0) == 0 || kill(zpid, 0) == 0); i++)
        usleep(10000);
    if (kill(idle[0], 0) == 0 || kill(zpid, 0) == 0) {
        zombies(1);
        fail_msg("the killed idle child %d or zygote %d not reaped after 30 s", idle[0], zpid);
    }
    assert_no_zombies("an idle child and the zygote killed");
    /* The killed child's place is taken by a new one; the other is still
     * there. */
    for (int i = 0; i < 1000 && sbx_pool_stats(p).spawned == spawned; i++)
        usleep(10000);
    for (int i = 0; i < 1000 && sbx_pool_stats(p).idle < 2; i++)
        usleep(10000);
    int now[2];
    assert_int_equal(sbx_pool_idle_pids(p, now, 2), 2);
    assert_true(now[0] == idle[1] || now[1] == idle[1]);
    assert_true(now[0] != idle[0] && now[1] != idle[0]);
    for (int k = 0; k < 3; k++) {
        sbx_outcome o;
        eval_src(p, "EvalResult(score=Score(0.5))", 10, NULL, NULL, &o);
        assert_int_equal(o.status, SBX_OK);
        sbx_outcome_free(&o);
    }
    int z2 = sbx_pool_zygote_pid(p);
    assert_true(z2 > 0 && z2 != zpid);

    /* A child of the sandbox image the pool never knew of (a fork whose
     * reply came too late) is reaped too; a child of another program is
     * left to whoever started it. */
    char image[PATH_MAX];
    const char *bin = getenv("FPS_BIN"); /* main checked it is set */
    const char *slash = bin != NULL ? strrchr(bin, '/') : NULL;
    snprintf(image, sizeof image, "%.*s/failproofai-sandbox", slash ? (int)(slash - bin) : 1,
             slash ? bin : ".");
    char *image_argv[] = {image, NULL}, *true_argv[] = {"true", NULL}, *no_env[] = {NULL};
    pid_t stray, other;
    assert_int_equal(posix_spawn(&stray, image, NULL, NULL, image_argv, no_env), 0);
    assert_int_equal(posix_spawnp(&other, "true", NULL, NULL, true_argv, no_env), 0);
    for (int i = 0; i < 3000 && kill(stray, 0) == 0; i++)
        usleep(10000);
    assert_int_equal(kill(stray, 0), -1);
    int st = -1;
    assert_int_equal(waitpid(other, &st, 0), other);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    sbx_pool_free(p);
    assert_no_zombies("after the pool");
}

/* A session's holder that dies between evaluations has an owner, the
 * session, which waits for it at its next evaluation: the reaper's sweep
 * for lost children leaves it alone however many sweeps pass (reaping it
 * behind the session's back would aim the session's later kill at
 * whatever process reuses the pid). The next evaluation gets a fresh
 * holder, and the dead one is reaped then. */
static void test_holder_that_dies_is_left_to_its_session(void **state)
{
    (void)state;
    sbx_pool *p = make_pool(2, 0, NULL);
    sbx_image *img = make_image(20, "held");
    sbx_session *s = sbx_session_open(p, img);
    assert_non_null(s);
    sbx_outcome o;
    sess_raw(s, "len(session.events)", 10, &o);
    assert_string_equal(o.line, "{\"ok\": true, \"repr\": \"20\"}");
    sbx_outcome_free(&o);
    int holder = sbx_session_pid(s);
    assert_true(holder > 0);
    assert_int_equal(kill(holder, SIGKILL), 0);
    for (int i = 0; i < 3000 && proc_state(holder) != 'Z'; i++)
        usleep(10000);
    assert_int_equal(proc_state(holder), 'Z');
    /* Three sweeps after it died: one more than the sweep needs. */
    unsigned long sweeps = sbx_pool_stats(p).sweeps;
    for (int i = 0; i < 3000 && sbx_pool_stats(p).sweeps < sweeps + 3; i++)
        usleep(10000);
    assert_true(sbx_pool_stats(p).sweeps >= sweeps + 3);
    assert_int_equal(proc_state(holder), 'Z');
    sess_raw(s, "len(session.events)", 10, &o);
    assert_string_equal(o.line, "{\"ok\": true, \"repr\": \"20\"}");
    sbx_outcome_free(&o);
    assert_true(sbx_session_pid(s) > 0 && sbx_session_pid(s) != holder);
    for (int i = 0; i < 3000 && proc_state(holder) != 0; i++)
        usleep(10000);
    assert_int_equal(proc_state(holder), 0);
    sbx_session_close(s);
    sbx_image_release(img);
    sbx_pool_free(p);
    assert_no_zombies("a holder that died between evaluations");
}

/* 10,000 evaluations: no zombie, no fd growth, flat parent RSS. */
static void test_many_evaluations_leak_nothing(void **state)
{
    (void)state;
#ifdef FPS_SANITIZE
    const int total = 300; /* each child pays the sanitizer runtime's start-up */
#else
    const int total = 10000;
#endif
    int fds_before = count_fds();
    sbx_pool *p = make_pool(4, 4, "echo");
    /* Warm up (thread stacks, allocator arenas), then measure. */
    loop_arg w = {p, 40, 0, ""};
    loop_thread(&w);
    long rss0 = status_field("/proc/self/status", "VmRSS");
    loop_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (loop_arg){p, total / 4, 0, ""};
        assert_int_equal(pthread_create(&th[i], NULL, loop_thread, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    /* The failure itself in the assertion's message, so that it reaches the
     * test log whatever else the run printed. */
    for (int i = 0; i < 4; i++)
        if (a[i].bad != 0)
            fail_msg("thread %d: %d of %d evaluations failed; first %s", i, a[i].bad, a[i].n,
                     a[i].first);
    assert_int_equal(w.bad, 0);
    assert_pool_reaped_all(p, "many evaluations");
    assert_no_zombies("many evaluations");
    long rss1 = status_field("/proc/self/status", "VmRSS");
    fprintf(stderr, "RSS before %ld kB, after %d evaluations %ld kB\n", rss0, total, rss1);
#ifndef FPS_SANITIZE
    assert_true(rss1 - rss0 < 4096);
#else
    /* ASan keeps freed memory in its quarantine (up to 256 MiB): RSS is not
     * a leak signal there; LeakSanitizer at exit is. */
    assert_true(rss1 - rss0 < 300 * 1024);
#endif
    sbx_stats s = sbx_pool_stats(p);
    assert_int_equal(s.started, (unsigned long)total + 40);
    sbx_pool_free(p);
    /* Every child, pre-started ones included, has been reaped. */
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    assert_int_equal(count_fds(), fds_before);
}

int main(int argc, char **argv)
{
    if (getenv("FPS_BIN") == NULL) {
        fprintf(stderr, "FPS_BIN must name the failproofai-sidecar binary\n");
        return 1;
    }
    if (argc > 1 && !strcmp(argv[1], "--identity-only")) {
        const struct CMUnitTest only[] = {cmocka_unit_test(test_children_are_unprivileged)};
        return cmocka_run_group_tests(only, NULL, NULL);
    }
    /* FPS_TEST_FILTER: a pattern of test names to run alone (debugging). */
    if (getenv("FPS_TEST_FILTER") != NULL) cmocka_set_test_filter(getenv("FPS_TEST_FILTER"));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layers_and_mapping_helpers),
        cmocka_unit_test(test_warm_up_source_evaluates),
        cmocka_unit_test(test_request_and_image_hand_off),
        cmocka_unit_test(test_jail_observed_from_outside),
        cmocka_unit_test(test_children_are_unprivileged),
        cmocka_unit_test(test_forbidden_calls_kill_the_child),
        cmocka_unit_test(test_inner_filter_takes_back_only_the_lock_down_calls),
        cmocka_unit_test(test_lingering_child_is_killed),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_more_bombs_than_slots),
        cmocka_unit_test(test_cancel_while_waiting_for_a_slot),
        cmocka_unit_test(test_fallback_child_image),
        cmocka_unit_test(test_zygote),
        cmocka_unit_test(test_batch_contains_bombs),
        cmocka_unit_test(test_session_state_isolation),
        cmocka_unit_test(test_session_fresh_hash_key),
        cmocka_unit_test(test_sessions_observed_from_outside),
        cmocka_unit_test(test_session_bounds),
        cmocka_unit_test(test_session_pinned_to_a_cpu),
        cmocka_unit_test(test_children_that_end_unobserved_are_reaped),
        cmocka_unit_test(test_holder_that_dies_is_left_to_its_session),
        cmocka_unit_test(test_many_evaluations_leak_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
