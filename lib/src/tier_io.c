/* tier_io.c — the remote tier's read-through and write-back (tier_io.h). */
#include "milc/lib.h"
#include "tier_io.h"

void tier_io_warn(Store *remote) {
    const char *w = remote ? store_notice(remote) : NULL;
    if (w) lib_warn("%s", w);
}

static bool up(Store *remote) { return remote && (store_state(remote) & STORE_UP); }

/* A refused entry is worth a line; a plain miss or a downed remote is not
 * (the notice says that once). */
static bool pulled(Store *remote, int rc) {
    if (rc == CACHE_ECORRUPT)
        lib_warn("%s; building it here", store_errmsg(remote));
    else if (rc != 0 && rc != CACHE_ENOTFOUND && rc != CACHE_EMISMATCH && rc != CACHE_EIO)
        lib_warn("remote cache: %s", store_errmsg(remote));
    tier_io_warn(remote);
    return rc == 0;
}

/* A pulled entry can be pulled again: its local put does not wait for the
 * disk (STORE_PUT_REFETCHABLE: a crash may cost the local copy, never serve
 * a torn one).  A failed local put is worded here, since its message is the
 * local store's, not the remote's. */
static bool stored_locally(Store *remote, Store *local, int rc) {
    if (rc == 0) return true;
    lib_warn("remote cache: storing the pulled entry locally: %s: %s", cache_strerror(rc), store_errmsg(local));
    tier_io_warn(remote);
    return false;
}

bool tier_pull(Store *remote, Store *local, const CacheKey *k, const void *rec, size_t rlen) {
    if (!up(remote)) return false;
    int put_failed;
    int rc = store_pull(remote, local, k, rec, rlen, STORE_PUT_REFETCHABLE, &put_failed);
    return put_failed ? stored_locally(remote, local, rc) : pulled(remote, rc);
}

/* The mapping and the entry it names; the entry is put only if the local
 * store lacks it, then the mapping beside it. */
bool tier_pull_direct(Store *remote, Store *local, const CacheKey *dkey, const void *drec, size_t dlen) {
    if (!up(remote)) return false;
    int put_failed;
    int rc = store_pull_alias(remote, local, dkey, drec, dlen, STORE_PUT_REFETCHABLE, &put_failed);
    return put_failed ? stored_locally(remote, local, rc) : pulled(remote, rc);
}

void tier_push(Store *remote, Store *local, const CacheKey *k, const CacheKey *dkey, const void *drec, size_t dlen) {
    if (!up(remote) || !(store_state(remote) & STORE_WRITABLE)) return;
    StoreEntry *e;
    int rc = store_get(local, k, NULL, 0, STORE_GET_NOTOUCH, &e);
    if (rc != 0) {
        lib_warn("remote cache: push failed: the local entry cannot be read: %s", cache_strerror(rc));
        return;
    }
    rc = store_put(remote, k, e->record, e->record_len, &e->meta, e->secs, e->nsecs, 0);
    store_release(local, e);
    if (rc == 0 && dkey) rc = store_alias_put(remote, dkey, drec, dlen, k);
    if (rc < 0 && rc != CACHE_EIO) lib_warn("remote cache: push failed: %s", store_errmsg(remote));
    tier_io_warn(remote);
}
