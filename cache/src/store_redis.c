/* store_redis.c — the shared Redis tier (remote.h) as a Store.  The
 * server layout, the MACs and the breaker stay in remote_redis.c; this file
 * only maps the seam onto remote.h. */
#include <stdlib.h>

#include "milc/store.h"

typedef struct RedisStore {
    Store base;
    Remote *r;
    int owned;
} RedisStore;

static RedisStore *rs_of(Store *s) { return (RedisStore *)s; }

static int rs_get(Store *s, const CacheKey *k, const void *record, size_t record_len, unsigned flags,
                  StoreEntry **out) {
    (void)flags; /* every get checks every MAC */
    *out = NULL;
    RemoteEntry *e;
    int rc = remote_get(rs_of(s)->r, k, record, record_len, &e);
    if (rc) return rc;
    StoreEntry *se = calloc(1, sizeof *se);
    if (!se) {
        remote_entry_free(e);
        return CACHE_ENOMEM;
    }
    *se = (StoreEntry){.key = e->key,
                       .record = e->record,
                       .record_len = e->record_len,
                       .meta = {.description = e->description,
                                .producer = e->backend,
                                .variant = e->mode,
                                .cost_ns = e->compile_ns,
                                .created_ns = e->created_ns},
                       .secs = e->secs,
                       .nsecs = e->nsecs,
                       .bytes = e->bytes,
                       .checked = 1,
                       .priv = e};
    *out = se;
    return 0;
}

static void rs_release(Store *s, StoreEntry *se) {
    (void)s;
    remote_entry_free(se->priv);
    free(se);
}

static int rs_put(Store *s, const CacheKey *k, const void *record, size_t record_len, const StoreMeta *m,
                  const CacheSection *secs, int nsecs, const StorePut *how) {
    (void)how; /* a publish is whole or absent (nothing to trade), and keeps the bytes to the end */
    CacheEntryMeta cm = {0};
    if (m)
        cm = (CacheEntryMeta){
            .description = m->description, .backend = m->producer, .mode = m->variant, .compile_ns = m->cost_ns};
    int rc = remote_put(rs_of(s)->r, k, record, record_len, &cm, secs, nsecs);
    return rc == 1 ? 0 : rc; /* already there, whole */
}

static int rs_note_put(Store *s, const CacheKey *k, const void *record, size_t rlen, const void *v, size_t vlen) {
    (void)s, (void)k, (void)record, (void)rlen, (void)v, (void)vlen;
    return CACHE_ENOTSUP;
}

static int rs_note_get(Store *s, const CacheKey *k, const void *record, size_t rlen, void **v, size_t *vlen) {
    (void)s, (void)k, (void)record, (void)rlen, (void)v, (void)vlen;
    return CACHE_ENOTSUP;
}

static int rs_alias_put(Store *s, const CacheKey *alias, const void *record, size_t rlen, const CacheKey *target) {
    return remote_push_direct(rs_of(s)->r, alias, record, rlen, target);
}

/* The mapping, then the entry it names: two reads, each authenticated. */
static int rs_alias_get(Store *s, const CacheKey *alias, const void *record, size_t rlen, unsigned flags,
                        StoreEntry **out) {
    *out = NULL;
    CacheKey target;
    int rc = remote_resolve_direct(rs_of(s)->r, alias, record, rlen, &target);
    return rc ? rc : rs_get(s, &target, NULL, 0, flags, out);
}

typedef struct {
    Remote *r;
    StoreIterFn fn;
    void *ctx;
    int stop;
} IterCtx;

static int rs_info_one(void *ctx, const CacheEntryInfo *e) {
    IterCtx *ic = ctx;
    StoreMeta m = {.description = e->description,
                   .producer = e->backend,
                   .variant = e->mode,
                   .cost_ns = e->compile_ns,
                   .created_ns = e->created_ns};
    return ic->stop = ic->fn(ic->ctx, &e->key, e->record, e->record_len, &m, e->bytes);
}

/* Entries removed or refused between the listing and their manifest's read
 * are skipped: the listing is a SCAN, not a snapshot, either way. */
static int rs_key_one(void *ctx, const CacheKey *k) {
    IterCtx *ic = ctx;
    int rc = remote_info(ic->r, k, rs_info_one, ic);
    if (ic->stop) return ic->stop;
    return rc == CACHE_ENOTFOUND || rc == CACHE_ECORRUPT ? 0 : rc;
}

static int rs_iterate(Store *s, StoreIterFn fn, void *ctx) {
    IterCtx ic = {rs_of(s)->r, fn, ctx, 0};
    return remote_list(rs_of(s)->r, rs_key_one, &ic);
}

static int rs_remove(Store *s, const CacheKey *k) { return remote_rm(rs_of(s)->r, k); }

static int rs_stats(Store *s, StoreStats *st) {
    RemoteStats rs;
    int rc = remote_stat(rs_of(s)->r, &rs);
    if (rc) return rc;
    *st = (StoreStats){.entries = rs.entries, .bytes = rs.used_memory, .capacity = rs.maxmemory};
    return 0;
}

static unsigned rs_state(const Store *s) {
    const Remote *r = ((const RedisStore *)s)->r;
    return (remote_up(r) ? STORE_UP : 0u) | (remote_readonly(r) ? 0u : STORE_WRITABLE);
}

static const char *rs_notice(Store *s) { return remote_warning(rs_of(s)->r); }

static const char *rs_errmsg(const Store *s) { return remote_errmsg(((const RedisStore *)s)->r); }

static void rs_close(Store *s) {
    RedisStore *rs = rs_of(s);
    if (rs->owned) remote_close(rs->r);
    free(rs);
}

static const StoreOps redis_ops = {"redis",     rs_get,       rs_release,   rs_put,     rs_note_put,
                                   rs_note_get, rs_alias_put, rs_alias_get, rs_iterate, rs_remove,
                                   rs_stats,    rs_state,     rs_notice,    rs_errmsg,  rs_close};

Store *store_redis_wrap(Remote *r) {
    RedisStore *rs = calloc(1, sizeof *rs);
    if (!rs) return NULL;
    rs->base.ops = &redis_ops, rs->r = r;
    return &rs->base;
}

int store_redis_open(Store **out, const RemoteOptions *o, char *err, size_t errlen) {
    *out = NULL;
    Remote *r;
    int rc = remote_open(&r, o, err, errlen);
    if (rc) return rc;
    Store *s = store_redis_wrap(r);
    if (!s) {
        remote_close(r);
        return CACHE_ENOMEM;
    }
    rs_of(s)->owned = 1;
    *out = s;
    return 0;
}

Remote *store_redis_remote(Store *s) { return s && s->ops == &redis_ops ? rs_of(s)->r : NULL; }
