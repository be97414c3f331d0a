/* store/store_err: store statuses: their names, SQLite result codes mapped
 * to them (with the errno behind an I/O failure), and the store_err an
 * operation fills when it fails. */
#include "store/store_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

const char *store_status_name(int status)
{
    switch (status) {
    case STORE_OK:
        return "ok";
    case STORE_NOTFOUND:
        return "not_found";
    case STORE_ERROR:
        return "error";
    case STORE_BUSY:
        return "busy";
    case STORE_CORRUPT:
        return "corrupt";
    case STORE_FULL:
        return "full";
    case STORE_READONLY:
        return "readonly";
    case STORE_INVALID:
        return "invalid";
    case STORE_CONFLICT:
        return "conflict";
    case STORE_STALE:
        return "stale";
    case STORE_SCHEMA:
        return "schema";
    default:
        return "unknown";
    }
}

int st_errf(store_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        err->http_status = 0;
        snprintf(err->name, sizeof err->name, "%s", store_status_name(code));
        int n = snprintf(err->msg, sizeof err->msg, "store: ");
        vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return code;
}

int st_map_rc(sqlite3 *db, int rc)
{
    int e = db ? sqlite3_system_errno(db) : 0;
    switch (rc & 0xff) {
    case SQLITE_OK:
    case SQLITE_ROW:
    case SQLITE_DONE:
        return STORE_OK;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return STORE_BUSY;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return STORE_CORRUPT;
    case SQLITE_FULL:
        return STORE_FULL;
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return STORE_READONLY;
    case SQLITE_CONSTRAINT:
        return STORE_CONFLICT;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
        if (e == ENOSPC || e == EFBIG || e == EDQUOT) return STORE_FULL;
        if (e == EROFS || e == EACCES || e == EPERM) return STORE_READONLY;
        return STORE_ERROR;
    default:
        return STORE_ERROR;
    }
}

int st_sqlfail(store_err *err, sqlite3 *db, int rc, const char *op)
{
    int code = st_map_rc(db, rc);
    if (code == STORE_OK) code = STORE_ERROR;
    const char *why = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    int e = db ? sqlite3_system_errno(db) : 0;
    const char *hint = "";
    switch (code) {
    case STORE_BUSY:
        hint = " (the database is locked by another process)";
        break;
    case STORE_CORRUPT:
        hint = " (the file is not a valid sidecar database)";
        break;
    case STORE_FULL:
        hint = " (no space left for the database)";
        break;
    case STORE_READONLY:
        hint = " (the database or its directory is not writable)";
        break;
    default:
        break;
    }
    if (e && (code == STORE_FULL || code == STORE_READONLY || code == STORE_ERROR))
        return st_errf(err, code, "%s: %s [%s]%s", op, why, strerror(e), hint);
    return st_errf(err, code, "%s: %s%s", op, why, hint);
}
