/* tier_io.c — the remote tier's read-through and write-back (tier_io.h). */
#include "lib.h"
#include "tier_io.h"

void tier_io_warn(Remote *r) {
    const char *w = r ? remote_warning(r) : NULL;
    if (w) lib_warn("%s", w);
}

/* A refused entry is worth a line; a plain miss or a downed remote is not
 * (the breaker says that once). */
static bool pulled(Remote *r, int rc) {
    if (rc == CACHE_ECORRUPT) lib_warn("%s; building it here", remote_errmsg(r));
    else if (rc != 0 && rc != CACHE_ENOTFOUND && rc != CACHE_EMISMATCH && rc != CACHE_EIO)
        lib_warn("remote cache: %s", remote_errmsg(r));
    tier_io_warn(r);
    return rc == 0;
}

bool tier_pull(Remote *r, Cache *c, const CacheKey *k, const void *rec, size_t rlen) {
    return r && remote_up(r) && pulled(r, remote_pull(r, c, k, rec, rlen));
}

bool tier_pull_direct(Remote *r, Cache *c, const CacheKey *dkey, const void *drec, size_t dlen) {
    return r && remote_up(r) && pulled(r, remote_pull_direct(r, c, dkey, drec, dlen, NULL));
}

void tier_push(Remote *r, Cache *c, const CacheKey *k, const CacheKey *dkey, const void *drec, size_t dlen) {
    if (!r || !remote_up(r) || remote_readonly(r)) return;
    int rc = remote_push(r, c, k);
    if (rc >= 0 && dkey) rc = remote_push_direct(r, dkey, drec, dlen, k);
    if (rc < 0 && rc != CACHE_EIO) lib_warn("remote cache: push failed: %s", remote_errmsg(r));
    tier_io_warn(r);
}
