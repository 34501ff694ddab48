/* tier_io.c — the remote tier's read-through and write-back (tier_io.h). */
#include "milc/lib.h"
#include "tier_io.h"

void tier_io_warn(Store *remote) {
    const char *w = remote ? store_notice(remote) : NULL;
    if (w) lib_warn("%s", w);
}

static bool up(Store *remote) {
    return remote && (store_state(remote) & STORE_UP);
}

/* A refused entry is worth a line; a plain miss or a downed remote is not
 * (the notice says that once). */
static bool pulled(Store *remote, int rc) {
    if (rc == CACHE_ECORRUPT) lib_warn("%s; building it here", store_errmsg(remote));
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
    StoreEntry *e;
    int rc = store_get(remote, k, rec, rlen, STORE_GET_VERIFY, &e);
    if (!pulled(remote, rc)) return false;
    rc = store_put(local, k, e->record, e->record_len, &e->meta, e->secs, e->nsecs, STORE_PUT_REFETCHABLE);
    store_release(remote, e);
    return stored_locally(remote, local, rc);
}

/* The mapping and the entry it names; the entry is put only if the local
 * store lacks it, then the mapping beside it. */
bool tier_pull_direct(Store *remote, Store *local, const CacheKey *dkey, const void *drec, size_t dlen) {
    if (!up(remote)) return false;
    StoreEntry *e, *have;
    int rc = store_alias_get(remote, dkey, drec, dlen, STORE_GET_VERIFY, &e);
    if (!pulled(remote, rc)) return false;
    if (store_get(local, &e->key, NULL, 0, STORE_GET_NOTOUCH | STORE_GET_TRUSTED, &have) == 0) store_release(local, have);
    else rc = store_put(local, &e->key, e->record, e->record_len, &e->meta, e->secs, e->nsecs, STORE_PUT_REFETCHABLE);
    if (rc == 0) rc = store_alias_put(local, dkey, drec, dlen, &e->key);
    store_release(remote, e);
    return stored_locally(remote, local, rc);
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
