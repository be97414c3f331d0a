/* store/store_stmt: the one way a store statement is run: its values bound
 * from an st_arg array, stepped to its end, its rows handed to a callback, and
 * its failure mapped to a store status, so that each operation states only its
 * SQL and values. */
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

static void bind_args(sqlite3_stmt *s, const st_arg *a, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int i = (int)k + 1;
        switch (a[k].kind) {
        case ST_A_NULL:
            sqlite3_bind_null(s, i);
            break;
        case ST_A_TEXT:
            st_bind_text(s, i, a[k].p);
            break;
        case ST_A_TEXTN:
            st_bind_textn(s, i, a[k].p, a[k].n);
            break;
        case ST_A_INT:
            st_bind_int(s, i, a[k].i);
            break;
        case ST_A_DBL:
            st_bind_dbl(s, i, a[k].d);
            break;
        case ST_A_TIME:
            st_bind_time(s, i, a[k].d);
            break;
        case ST_A_BLOB:
            sqlite3_bind_blob64(s, i, a[k].p, a[k].n, SQLITE_STATIC);
            break;
        }
    }
}

int st_exec(store *st, const char *sql, const char *op, store_err *err, const st_arg *args,
            size_t nargs)
{
    sqlite3_stmt *s = st_w(st, sql);
    if (s) bind_args(s, args, nargs);
    return st_step_done(st, s, op, err);
}

int st_exec_tx(store *st, const char *sql, const char *op, store_err *err, const st_arg *args,
               size_t nargs)
{
    int code = st_wbegin(st, op, err);
    if (code) return code;
    code = st_exec(st, sql, op, err, args, nargs);
    return st_wend(st, code, op, err);
}

/* Runs sql on c with args bound, calling row per row, for at most `max` rows
 * (0: all). *rows gets how many were read. */
static int query_rows(sconn *c, const char *sql, const char *op, store_err *err, st_row_fn row,
                      void *ctx, const st_arg *args, size_t nargs, size_t max, size_t *rows)
{
    *rows = 0;
    sqlite3_stmt *s = st_stmt(c, sql);
    if (!s) return st_sqlfail(err, c->db, sqlite3_errcode(c->db), op);
    bind_args(s, args, nargs);
    int rc = SQLITE_DONE;
    while ((max == 0 || *rows < max) && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        row(s, ctx);
        ++*rows;
    }
    sqlite3_reset(s);
    if (max != 0 && *rows == max) return STORE_OK;
    return rc == SQLITE_DONE ? STORE_OK : st_sqlfail(err, c->db, rc, op);
}

int st_query(sconn *c, const char *sql, const char *op, store_err *err, st_row_fn row, void *ctx,
             const st_arg *args, size_t nargs)
{
    size_t rows;
    return query_rows(c, sql, op, err, row, ctx, args, nargs, 0, &rows);
}

int st_query_one(sconn *c, const char *sql, const char *op, store_err *err, st_row_fn row,
                 void *ctx, const st_arg *args, size_t nargs)
{
    size_t rows;
    int code = query_rows(c, sql, op, err, row, ctx, args, nargs, 1, &rows);
    return code == STORE_OK && rows == 0 ? STORE_NOTFOUND : code;
}

/* query_rows on a pooled read connection. */
static int read_rows(store *st, const char *sql, const char *op, store_err *err, st_row_fn row,
                     void *ctx, const st_arg *args, size_t nargs, size_t max, size_t *rows)
{
    sconn *c = st_rget(st);
    int code = query_rows(c, sql, op, err, row, ctx, args, nargs, max, rows);
    st_rput(st, c);
    return code;
}

int st_read_all(store *st, const char *sql, const char *op, store_err *err, st_vec *v,
                const st_arg *args, size_t nargs)
{
    size_t rows;
    int code = read_rows(st, sql, op, err, st_row_push, v, args, nargs, 0, &rows);
    if (code) {
        st_rows_free(v->t, v->items, v->n);
        v->items = NULL;
        v->n = v->cap = 0;
    }
    return code;
}

int st_read_one(store *st, const char *sql, const char *op, store_err *err, st_row_fn row,
                void *ctx, const st_arg *args, size_t nargs)
{
    size_t rows;
    int code = read_rows(st, sql, op, err, row, ctx, args, nargs, 1, &rows);
    return code == STORE_OK && rows == 0 ? STORE_NOTFOUND : code;
}

void st_row_int64(sqlite3_stmt *s, void *ctx)
{
    *(int64_t *)ctx = sqlite3_column_int64(s, 0);
}

void st_row_into(sqlite3_stmt *s, void *ctx)
{
    const st_into *in = ctx;
    st_cols_read(s, in->t, in->dst);
}

void st_row_push(sqlite3_stmt *s, void *ctx)
{
    st_vec *v = ctx;
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->items = realloc(v->items, v->cap * v->t->size);
        if (!v->items) abort();
    }
    void *row = (char *)v->items + v->n++ * v->t->size;
    memset(row, 0, v->t->size);
    st_cols_read(s, v->t, row);
}

void st_cols_read(sqlite3_stmt *s, const st_table *t, void *dst)
{
    for (size_t k = 0; k < t->ncols; k++) {
        char *f = (char *)dst + t->cols[k].off;
        int i = (int)k;
        switch (t->cols[k].type) {
        case ST_C_TEXT:
            *(char **)f = st_col_dup(s, i);
            break;
        case ST_C_DBL:
            *(double *)f = st_col_dbl(s, i);
            break;
        case ST_C_INT64:
            *(int64_t *)f = sqlite3_column_int64(s, i);
            break;
        case ST_C_INT:
            *(int *)f = sqlite3_column_int(s, i);
            break;
        case ST_C_BLOB: {
            const void *b = sqlite3_column_blob(s, i);
            size_t n = (size_t)sqlite3_column_bytes(s, i);
            char *p = malloc(n + 1);
            if (!p) abort();
            if (n) memcpy(p, b, n);
            p[n] = '\0';
            *(char **)f = p;
            *(size_t *)((char *)dst + t->cols[k].len_off) = n;
            break;
        }
        }
    }
}

void st_cols_free(const st_table *t, void *row)
{
    for (size_t k = 0; k < t->ncols; k++)
        if (t->cols[k].type == ST_C_TEXT || t->cols[k].type == ST_C_BLOB)
            free(*(char **)((char *)row + t->cols[k].off));
}

void st_rows_free(const st_table *t, void *rows, size_t n)
{
    if (!rows) return;
    for (size_t i = 0; i < n; i++)
        st_cols_free(t, (char *)rows + i * t->size);
    free(rows);
}

int st_is_one_of(const char *s, const char *const *set)
{
    if (!s) return 0;
    for (; *set; set++)
        if (strcmp(s, *set) == 0) return 1;
    return 0;
}

/* ------------------------------------------------------------ bind helpers */

void st_bind_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

void st_bind_textn(sqlite3_stmt *s, int i, const char *v, size_t max)
{
    if (!v) {
        sqlite3_bind_null(s, i);
        return;
    }
    size_t n = strlen(v);
    if (n > max) {
        n = max;
        while (n > 0 && ((unsigned char)v[n] & 0xC0) == 0x80)
            n--; /* UTF-8 boundary */
    }
    sqlite3_bind_text(s, i, v, (int)n, SQLITE_STATIC);
}

void st_bind_int(sqlite3_stmt *s, int i, int64_t v)
{
    sqlite3_bind_int64(s, i, v);
}

void st_bind_dbl(sqlite3_stmt *s, int i, double v)
{
    sqlite3_bind_double(s, i, v);
}

void st_bind_time(sqlite3_stmt *s, int i, double v)
{
    if (v > 0)
        sqlite3_bind_double(s, i, v);
    else
        sqlite3_bind_null(s, i);
}

char *st_col_dup(sqlite3_stmt *s, int i)
{
    if (sqlite3_column_type(s, i) == SQLITE_NULL) return NULL;
    const unsigned char *t = sqlite3_column_text(s, i);
    int n = sqlite3_column_bytes(s, i);
    char *p = malloc((size_t)n + 1);
    if (!p) abort();
    memcpy(p, t ? (const char *)t : "", (size_t)n);
    p[n] = '\0';
    return p;
}

double st_col_dbl(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL ? 0 : sqlite3_column_double(s, i);
}
