/* direct.c — listing the direct keys: what explains a miss (the CLI compares
 * a request's direct record with the stored ones) and what finds the request
 * behind an entry (its recipe). */
#include "cache_impl.h"

int cache_direct_ls(Cache *c, CacheDirectFn fn, void *ctx) {
    MDB_txn *txn;
    int rc = cache_read_txn(c, &txn), stop = 0;
    if (rc) return rc;
    MDB_cursor *cur;
    if ((rc = mdb_cursor_open(txn, c->db_direct, &cur)) != 0) {
        mdb_txn_abort(txn);
        return cache_lmdb_err(c, rc, "mdb_cursor_open");
    }
    MDB_val k, v;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !stop; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 16 || v.mv_size < 16) continue; /* not ours: skipped like a damaged entry */
        CacheKey dkey, akey;
        memcpy(dkey.b, k.mv_data, 16);
        memcpy(akey.b, v.mv_data, 16);
        stop = fn(ctx, &dkey, (const uint8_t *)v.mv_data + 16, v.mv_size - 16, &akey);
    }
    mdb_cursor_close(cur);
    mdb_txn_abort(txn);
    if (stop) return stop;
    return rc == MDB_NOTFOUND || rc == 0 ? 0 : cache_lmdb_err(c, rc, "mdb_cursor_get");
}
