/* store/store_version: the store's change version, which moves whenever any
 * connection (this process's or another's) commits: the admin API's response
 * cache keys its pages by it. */
#include "store/store_int.h"

/* ------------------------------------------------------- change version */

static const char SQL_DATA_VERSION[] = "PRAGMA data_version";

/* Both parts are read under probe_mu, so the (commit_seq, probe_moves) pairs
 * are ordered by the mutex and each part only grows along that order: the sum
 * moves iff either part moved. An in-process commit moves both (the writer is
 * "another connection" for the probe); that costs nothing but a larger step.
 *
 * Outside writers are seen only through SQLite's own API (PRAGMA
 * data_version on the probe connection). Reading the -shm file's WAL-index
 * header directly would save the probe's two fcntl calls, but it needs this
 * process to open and close that file itself, and closing any descriptor of
 * a file drops every POSIX lock the process holds on it: SQLite's own
 * shared-memory locks included. Another process could then reset the -shm
 * file under our connections (a mapped page past its new end is SIGBUS) and
 * SQLite's locking would no longer hold. */
int store_change_version(store *st, uint64_t *out, store_err *err)
{
    int code = STORE_OK;
    pthread_mutex_lock(&st->probe_mu);
    uint64_t local = __atomic_load_n(&st->commit_seq, __ATOMIC_ACQUIRE);
    if (st->probe.db != NULL) {
        sqlite3_stmt *s = st_stmt(&st->probe, SQL_DATA_VERSION);
        int rc = s ? sqlite3_step(s) : sqlite3_errcode(st->probe.db);
        if (rc == SQLITE_ROW) {
            int64_t dv = sqlite3_column_int64(s, 0);
            if (dv != st->probe_dv) {
                st->probe_dv = dv;
                st->probe_moves++;
            }
        } else {
            code = st_sqlfail(err, st->probe.db, rc, "read data version");
        }
        if (s) sqlite3_reset(s);
    }
    *out = local + st->probe_moves;
    pthread_mutex_unlock(&st->probe_mu);
    return code;
}
