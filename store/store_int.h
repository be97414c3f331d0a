/* store/store_int: internals shared by the store's source files (not part of
 * the API): the handle, connections with their statement caches, error
 * mapping, the write-transaction discipline and binding/column helpers. */
#ifndef FPS_STORE_INT_H
#define FPS_STORE_INT_H
#include "common/periodic.h"
#include "store/store.h"

#include <pthread.h>
#include <stddef.h>
#include <sqlite3.h>
#include <stdint.h>

/* Everything below is shared by the store's files only: hidden from any
 * shared object the library ends up in. */
#pragma GCC visibility push(hidden)

#define SCACHE_SLOTS 128

typedef struct st_op st_op; /* a deferred update (store_deferred.c) */

/* One SQLite connection and its prepared statements, cached by the address of
 * their (static) SQL text. Used by one thread at a time (the writer mutex or
 * the read pool guarantees it). */
typedef struct {
    sqlite3 *db;
    const char *keys[SCACHE_SLOTS];
    sqlite3_stmt *stmts[SCACHE_SLOTS];
    int in_use;           /* read pool bookkeeping */
    int64_t since_ms;     /* monotonic time it was taken from the pool (under rmu) */
    const char *last_sql; /* static text of the statement last prepared on it (atomic) */
} sconn;

struct store {
    char *path;
    int memory; /* ":memory:": one connection, no durability */
    store_options opt;
    int lock_fd; /* flock'ed descriptor of the database file, -1 if none */
    int wal_fd;  /* descriptor of the -wal file (fdatasync for durability), -1 if none */

    pthread_mutex_t wmu; /* the write discipline: held for every write transaction */
    sconn w;

    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    sconn *readers;
    int nreaders;

    pthread_mutex_t sync_mu;
    uint64_t commit_seq; /* durable-needing commits so far (written under wmu, atomics) */
    uint64_t synced_seq; /* commits known durable (under sync_mu) */

    periodic *maint; /* owned: store_prune's thread (maintenance_interval_s > 0) */

    /* Checkpoints run on their own connection and thread, never inside a
     * worker's commit: the WAL hook on the writer only signals. */
    sconn ck;
    pthread_t ckpt;
    int ckpt_running;
    int ckpt_stop;
    int ckpt_wanted;
    pthread_mutex_t ckpt_mu;
    pthread_cond_t ckpt_cv; /* the thread waits on it; writers above the WAL bound too */
    int64_t page_size;
    int64_t w_since_ms; /* monotonic time the open write transaction began, 0 if none (atomic) */
    const char *w_op;   /* its operation (static text; atomic) */
    /* Figures (atomics; see store_stats). */
    uint64_t ckpt_count, ckpt_blocked, rows_pruned;
    int64_t ckpt_last_us;
    int write_blocked;          /* 0, STORE_FULL or STORE_READONLY */
    int64_t blocked_logged_ms;  /* last "checkpoint blocked" warning */
    int64_t ckpt_err_logged_ms; /* last "checkpoint failed" warning */
    int vacuum_pending;         /* auto_vacuum is off: the full VACUUM waits (atomic) */
    int vacuum_why;             /* why it waits (store_vacuum.c), for its log */
    int64_t vacuum_logged_ms;

    /* Deferred updates (see store_deferred.c) and their flusher thread. */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    st_op *qhead, *qtail;
    size_t qlen;
    st_op *inflight; /* drained into the open transaction (writer mutex): freed on
                        commit, put back at the head of the queue on rollback */
    pthread_t flusher;
    int flusher_running;
    int flusher_stop;

    /* Change detection (store_change_version): a read-only connection used
     * only for PRAGMA data_version, which moves when any other connection
     * (ours or another process's) commits. Under probe_mu. */
    sconn probe;
    pthread_mutex_t probe_mu;
    int64_t probe_dv;     /* data_version last seen on the probe */
    uint64_t probe_moves; /* times it was seen to move */

    int schema_version;
};

/* Applies every queued deferred update inside the open write transaction
 * (writer mutex held), each in its own savepoint. */
void st_drain_deferred(store *st);
/* After the transaction: committed = 1 frees the in-flight updates, 0 puts
 * them back at the head of the queue (writer mutex held). */
void st_deferred_done(store *st, int committed);

/* Prepared statement for `sql` (static storage: cached by address) on c, reset
 * and with bindings cleared. NULL on error (message in c->db). */
sqlite3_stmt *st_stmt(sconn *c, const char *sql);
void st_finalize_all(sconn *c);

/* Fills err (if not NULL) and returns code. */
int st_errf(store_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Maps an SQLite result code on db to a store_status, fills err with
 * "store: <op>: <reason>" and returns the status. */
int st_sqlfail(store_err *err, sqlite3 *db, int rc, const char *op);
int st_map_rc(sqlite3 *db, int rc);

/* Write transactions: wbegin takes the writer mutex and begins IMMEDIATE;
 * wcommit commits and releases (on failure it rolls back); wabort rolls back
 * and releases. `durable`: wait until the commit is on disk (group commit). */
int st_wbegin(store *st, const char *op, store_err *err);
int st_wcommit(store *st, const char *op, int durable, store_err *err);
void st_wabort(store *st);
/* Ends the transaction of work that returned `code`: rolls back and returns
 * `code` when the work failed, else commits (not waiting for the disk). */
int st_wend(store *st, int code, const char *op, store_err *err);
/* Commits without waiting for the disk; *ticket is for store_durable_wait. */
int st_wcommit_ticket(store *st, const char *op, uint64_t *ticket, store_err *err);

/* Read connections: a pooled read-only connection (or the writer, locked, for
 * ":memory:"). Always paired. */
sconn *st_rget(store *st);
void st_rput(store *st, sconn *c);

/* Binding helpers: NULL strings bind SQL NULL. Text is SQLITE_STATIC: bound
 * strings must outlive the step. */
void st_bind_text(sqlite3_stmt *s, int i, const char *v);
void st_bind_int(sqlite3_stmt *s, int i, int64_t v);
void st_bind_dbl(sqlite3_stmt *s, int i, double v);
/* Binds a time, NULL when v <= 0. */
void st_bind_time(sqlite3_stmt *s, int i, double v);
/* Binds at most `max` bytes of v (cut at a UTF-8 boundary), NULL if v is NULL. */
void st_bind_textn(sqlite3_stmt *s, int i, const char *v, size_t max);
char *st_col_dup(sqlite3_stmt *s, int i);
double st_col_dbl(sqlite3_stmt *s, int i);

/* Statements run through one helper (store_stmt.c): a statement's values are
 * an array of st_arg, bound to ?1, ?2, ... in order. Strings and blobs are
 * borrowed: they must outlive the call. */
typedef enum {
    ST_A_NULL,
    ST_A_TEXT,
    ST_A_TEXTN,
    ST_A_INT,
    ST_A_DBL,
    ST_A_TIME,
    ST_A_BLOB
} st_akind;
typedef struct {
    st_akind kind;
    const void *p; /* ST_A_TEXT, ST_A_TEXTN, ST_A_BLOB */
    size_t n;      /* ST_A_TEXTN: most bytes kept; ST_A_BLOB: length */
    int64_t i;
    double d;
} st_arg;
#define ST_NULL ((st_arg){.kind = ST_A_NULL})
#define ST_TEXT(v) ((st_arg){.kind = ST_A_TEXT, .p = (v)})
#define ST_TEXTN(v, max) ((st_arg){.kind = ST_A_TEXTN, .p = (v), .n = (max)})
#define ST_INT(v) ((st_arg){.kind = ST_A_INT, .i = (v)})
#define ST_DBL(v) ((st_arg){.kind = ST_A_DBL, .d = (v)})
#define ST_TIME(v) ((st_arg){.kind = ST_A_TIME, .d = (v)})
#define ST_BLOB(v, len) ((st_arg){.kind = ST_A_BLOB, .p = (v), .n = (len)})
/* `array, count` of the values given, for the helpers below. */
#define ST_ARGS(...)                                                                               \
    (const st_arg[]){__VA_ARGS__}, sizeof((const st_arg[]){__VA_ARGS__}) / sizeof(st_arg)

/* Writer held: runs sql on the writer with args bound, to its end. */
int st_exec(store *st, const char *sql, const char *op, store_err *err, const st_arg *args,
            size_t nargs);
/* One statement as its own write transaction (takes and releases the writer). */
int st_exec_tx(store *st, const char *sql, const char *op, store_err *err, const st_arg *args,
               size_t nargs);

/* Row callback reading column 0 into the int64_t ctx points to. */
void st_row_int64(sqlite3_stmt *s, void *ctx);

/* A row struct read from a query's columns in order: each column names the
 * field it fills (text and blob fields are owned, NULL for SQL NULL). */
typedef enum { ST_C_TEXT, ST_C_DBL, ST_C_INT64, ST_C_INT, ST_C_BLOB } st_ctype;
typedef struct {
    st_ctype type;
    size_t off;     /* the field: char * (TEXT, BLOB), double, int64_t or int */
    size_t len_off; /* ST_C_BLOB: its size_t length (the bytes are NUL-terminated too) */
} st_col;
typedef struct {
    const st_col *cols;
    size_t ncols;
    size_t size; /* of the row struct */
} st_table;
#define ST_COL(type, T, field)                                                                     \
    {                                                                                              \
        ST_C_##type, offsetof(T, field), 0                                                         \
    }
#define ST_COL_BLOB(T, field, len_field)                                                           \
    {                                                                                              \
        ST_C_BLOB, offsetof(T, field), offsetof(T, len_field)                                      \
    }
#define ST_TABLE(T, cols)                                                                          \
    {                                                                                              \
        cols, sizeof cols / sizeof *cols, sizeof(T)                                                \
    }
/* Reads the current row of s into dst (zeroed by the caller). */
void st_cols_read(sqlite3_stmt *s, const st_table *t, void *dst);
/* Frees the owned fields of row (not row itself). */
void st_cols_free(const st_table *t, void *row);
/* Frees n rows of t and the array. */
void st_rows_free(const st_table *t, void *rows, size_t n);

/* The rows a query read, as an array of t's row struct (items: malloc'ed, the
 * caller owns it and frees it with st_rows_free). */
typedef struct {
    const st_table *t;
    void *items;
    size_t n, cap;
} st_vec;
/* Called once per row a query returns (ctx: the caller's). */
typedef void (*st_row_fn)(sqlite3_stmt *s, void *ctx);
/* Row callback reading the row into one row struct: ctx is an st_into. */
typedef struct {
    const st_table *t;
    void *dst; /* zeroed by the caller */
} st_into;
void st_row_into(sqlite3_stmt *s, void *ctx);
/* Row callback appending the row to the st_vec ctx points to. */
void st_row_push(sqlite3_stmt *s, void *ctx);
/* Runs the query sql on c with args bound, calling row for each row.
 * STORE_OK when all rows were read, else the failure (err names op). */
int st_query(sconn *c, const char *sql, const char *op, store_err *err, st_row_fn row, void *ctx,
             const st_arg *args, size_t nargs);
/* The same for a query of at most one row: STORE_NOTFOUND (err untouched)
 * when it returns none. */
int st_query_one(sconn *c, const char *sql, const char *op, store_err *err, st_row_fn row,
                 void *ctx, const st_arg *args, size_t nargs);
/* st_query on a pooled read connection, every row appended to v. On failure
 * the rows read are freed and v is left empty. */
int st_read_all(store *st, const char *sql, const char *op, store_err *err, st_vec *v,
                const st_arg *args, size_t nargs);
/* st_query_one on a pooled read connection. */
int st_read_one(store *st, const char *sql, const char *op, store_err *err, st_row_fn row,
                void *ctx, const st_arg *args, size_t nargs);

/* Terminal assignment statuses as an SQL list literal. */
#define ST_TERMINAL_SQL "('completed','skipped','failed','lost','dropped')"
#define ST_ACTIVE_SQL "('claimed','planned')"

/* The checkpoint thread (store_checkpoint.c): started by store_open, stopped
 * by store_close; st_wal_hook is the writer's WAL hook. */
int st_ckpt_start(store *st, store_err *err);
void st_ckpt_stop(store *st);
int st_wal_hook(void *ctx, sqlite3 *db, const char *name, int pages);
/* Size of the -wal file now (0 for ":memory:"). */
int64_t st_wal_bytes(store *st);
/* Before a write transaction (no lock held): waits, bounded, while the WAL is
 * past its hard bound and the checkpoint thread is shrinking it. */
void st_wal_bound_wait(store *st);
/* Records a failed write's status: STORE_FULL / STORE_READONLY mark the store
 * blocked until the checkpoint thread's probe finds writes working again. */
void st_note_write_status(store *st, int code);
/* Free bytes for an unprivileged writer on the database's file system; -1 if
 * unknown. */
int64_t st_free_bytes(const store *st);
/* A small durable write (the meta table's opened_at): proves the database
 * takes writes. */
int st_write_probe(store *st, store_err *err);
/* One-row PRAGMA (or SELECT) on db, its first column as text or integer;
 * an SQLite result code (store.c). */
int st_pragma_text(sqlite3 *db, const char *sql, char *out, size_t cap);
int st_pragma_int(sqlite3 *db, const char *sql, int64_t *out);
/* Brings the writer's database to the latest (or opt.schema_target) schema
 * (store_schema.c). */
int st_migrate(store *st, store_err *err);
/* The threads store_open starts: the deferred-update flusher
 * (store_deferred.c), and the maintenance job (store_prune.c: pruning, then
 * the incremental vacuum; ud the store) run on a periodic thread. */
void *st_flusher_main(void *arg);
void st_maintain(void *ud);
/* Incremental vacuum and the one-time full VACUUM that turns it on
 * (store_vacuum.c). st_vacuum_at_open runs before the read pool and the
 * checkpoint connection exist; it fails only if the database could not
 * return to WAL mode. */
int st_vacuum_at_open(store *st, store_err *err);
void st_vacuum_after_prune(store *st);

/* Latency histogram buckets (store_metrics.c writes them, store_query.c reads). */
int st_latency_bucket(int64_t ms);
double st_bucket_value(int bucket);

/* Completion check after a run state change (writer held). */
int st_maybe_complete(store *st, const char *assignment_id, double now);

/* Longest error code and message kept on a row (longer ones are cut). */
#define ST_MAX_ERR_CODE 64
#define ST_MAX_ERR_MSG 4096

/* The writer's cached statement for sql (writer held). */
sqlite3_stmt *st_w(store *st, const char *sql);
/* Steps a write statement expecting SQLITE_DONE; on failure fills err. */
int st_step_done(store *st, sqlite3_stmt *s, const char *op, store_err *err);
/* 1 if s equals one of the NULL-terminated set. */
int st_is_one_of(const char *s, const char *const *set);

/* Protocol steps as write-transaction bodies (writer held, transaction open):
 * store_deferred.c runs them now or queues them. */
int st_claimed_tx(store *st, const store_claim *claims, size_t n, double now, store_err *err);
int st_planned_tx(store *st, const char *assignment_id, int64_t lease_generation,
                  const char *definitions_json, const char *plan_request_json,
                  const char *plan_response_json, int skipped, const store_plan_run *runs, size_t n,
                  double now, store_err *err);
int st_lease_tx(store *st, const char *assignment_id, int64_t lease_generation,
                double lease_expires_at, store_err *err);
int st_heartbeat_tx(store *st, const char *assignment_id, int64_t lease_generation, double at,
                    const char *outcome, const char *error_code, double lease_expires_at,
                    store_err *err);
int st_afinish_tx(store *st, const char *assignment_id, int64_t lease_generation,
                  const char *status, const char *error_code, const char *error_message, double now,
                  store_err *err);
int st_started_tx(store *st, const char *const *run_ids, size_t n, double now, size_t *changed,
                  store_err *err);
int st_record_tx(store *st, const char *submission_id, const store_attempt *a, store_err *err);
/* "committed", "replayed", "retry", "rejected"; NULL for an unknown outcome. */
const char *st_outcome_name(store_submit_outcome o);

#pragma GCC visibility pop

#endif
