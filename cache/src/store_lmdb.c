/* store_lmdb.c — the local LMDB cache (cache.h) as a Store, and store_copy / store_pull.
 * Everything that knows LMDB and its file is behind cache.h (cache.c,
 * envfile.c, stamp.c, unsynced.c); this file only maps the seam onto it. */
#include <stdlib.h>

#include "milc/store.h"

typedef struct LmdbStore {
    Store base;
    Cache *c;
    int owned; /* store_lmdb_open: closed with the store */
} LmdbStore;

typedef struct LmdbEntry {
    StoreEntry e;
    CacheHit *hit;
} LmdbEntry;

static LmdbStore *ls_of(Store *s) { return (LmdbStore *)s; }

static StoreMeta meta_of(const CacheEntryInfo *i) {
    return (StoreMeta){.description = i->description,
                       .producer = i->backend,
                       .variant = i->mode,
                       .cost_ns = i->compile_ns,
                       .created_ns = i->created_ns,
                       .uses = i->hits};
}

static unsigned cache_flags(unsigned flags) {
    unsigned cf = flags & STORE_GET_VERIFY ? CACHE_GET_VERIFY : flags & STORE_GET_TRUSTED ? 0 : CACHE_GET_VERIFY_ONCE;
    if (flags & STORE_GET_NOTOUCH) cf |= CACHE_GET_NOTOUCH;
    if (flags & STORE_GET_POPULATE) cf |= CACHE_GET_POPULATE;
    if (flags & STORE_GET_COUNT_DIRECT) cf |= CACHE_GET_COUNT_DIRECT;
    return cf;
}

/* get, or (alias) get through a direct key (cache_get_direct). */
static int lookup(Store *s, const CacheKey *k, const void *record, size_t record_len, unsigned flags, int alias,
                  StoreEntry **out) {
    *out = NULL;
    LmdbEntry *le = calloc(1, sizeof *le);
    if (!le) return CACHE_ENOMEM;
    int rc = alias ? cache_get_direct(ls_of(s)->c, k, record, record_len, cache_flags(flags), &le->hit, NULL)
                   : cache_get(ls_of(s)->c, k, record, record_len, cache_flags(flags), &le->hit);
    const CacheSection *secs;
    int n;
    if (!rc && (rc = cache_hit_sections(le->hit, &secs, &n)) != 0) cache_hit_release(le->hit);
    if (rc) {
        free(le);
        return rc;
    }
    const CacheEntryInfo *i = cache_hit_info(le->hit);
    le->e = (StoreEntry){.key = i->key,
                         .record = i->record,
                         .record_len = i->record_len,
                         .meta = meta_of(i),
                         .secs = secs,
                         .nsecs = n,
                         .bytes = i->bytes,
                         .checked = i->checked,
                         .priv = le};
    *out = &le->e;
    return 0;
}

static int ls_get(Store *s, const CacheKey *k, const void *record, size_t record_len, unsigned flags,
                  StoreEntry **out) {
    return lookup(s, k, record, record_len, flags, 0, out);
}

static int ls_alias_get(Store *s, const CacheKey *alias, const void *record, size_t record_len, unsigned flags,
                        StoreEntry **out) {
    return lookup(s, alias, record, record_len, flags, 1, out);
}

static int ls_alias_put(Store *s, const CacheKey *alias, const void *record, size_t record_len,
                        const CacheKey *target) {
    return cache_direct_put(ls_of(s)->c, alias, record, record_len, target);
}

static void ls_release(Store *s, StoreEntry *e) {
    (void)s;
    LmdbEntry *le = e->priv;
    cache_hit_release(le->hit);
    free(le);
}

static int ls_put(Store *s, const CacheKey *k, const void *record, size_t record_len, const StoreMeta *m,
                  const CacheSection *secs, int nsecs, const StorePut *how) {
    CacheEntryMeta cm = {0};
    if (m)
        cm = (CacheEntryMeta){
            .description = m->description, .backend = m->producer, .mode = m->variant, .compile_ns = m->cost_ns};
    CachePutOptions po = {.flags = (how->flags & STORE_PUT_REFETCHABLE ? CACHE_PUT_REFETCHABLE : 0) |
                                   (how->flags & STORE_PUT_CONSUME ? CACHE_PUT_CONSUME : 0),
                          .consumed = how->consumed,
                          .consumed_ctx = how->ctx};
    return cache_put_ex(ls_of(s)->c, k, record, record_len, &cm, secs, nsecs, &po);
}

static int ls_note_put(Store *s, const CacheKey *k, const void *record, size_t rlen, const void *v, size_t vlen) {
    return cache_note_put(ls_of(s)->c, k, record, rlen, v, vlen);
}

static int ls_note_get(Store *s, const CacheKey *k, const void *record, size_t rlen, void **v, size_t *vlen) {
    return cache_note_get(ls_of(s)->c, k, record, rlen, v, vlen);
}

typedef struct {
    StoreIterFn fn;
    void *ctx;
} IterCtx;

static int ls_iter_one(void *ctx, const CacheEntryInfo *e) {
    IterCtx *ic = ctx;
    StoreMeta m = meta_of(e);
    return ic->fn(ic->ctx, &e->key, e->record, e->record_len, &m, e->bytes);
}

static int ls_iterate(Store *s, StoreIterFn fn, void *ctx) {
    IterCtx ic = {fn, ctx};
    return cache_ls(ls_of(s)->c, ls_iter_one, &ic);
}

static int ls_remove(Store *s, const CacheKey *k) { return cache_rm(ls_of(s)->c, k); }

static int ls_stats(Store *s, StoreStats *st) {
    CacheStats cs;
    int rc = cache_stat(ls_of(s)->c, &cs);
    if (rc) return rc;
    *st = (StoreStats){.entries = cs.entries,
                       .bytes = cs.bytes,
                       .hits = cs.hits + cs.direct_hits,
                       .misses = cs.misses,
                       .errors = cs.errors,
                       .capacity = cs.max_bytes};
    return 0;
}

static unsigned ls_state(const Store *s) {
    (void)s;
    return STORE_UP | STORE_WRITABLE;
}

static const char *ls_notice(Store *s) {
    (void)s;
    return NULL;
}

static const char *ls_errmsg(const Store *s) { return cache_errmsg(((const LmdbStore *)s)->c); }

static void ls_close(Store *s) {
    LmdbStore *ls = ls_of(s);
    if (ls->owned) cache_close(ls->c);
    free(ls);
}

static const StoreOps lmdb_ops = {"lmdb",      ls_get,       ls_release,   ls_put,     ls_note_put,
                                  ls_note_get, ls_alias_put, ls_alias_get, ls_iterate, ls_remove,
                                  ls_stats,    ls_state,     ls_notice,    ls_errmsg,  ls_close};

Store *store_lmdb_wrap(Cache *c) {
    LmdbStore *ls = calloc(1, sizeof *ls);
    if (!ls) return NULL;
    ls->base.ops = &lmdb_ops, ls->c = c;
    return &ls->base;
}

int store_lmdb_open(Store **out, const char *dir, const CacheOptions *opt, char *err, size_t errlen) {
    *out = NULL;
    Cache *c;
    int rc = cache_open(&c, dir, opt, err, errlen);
    if (rc) return rc;
    Store *s = store_lmdb_wrap(c);
    if (!s) {
        cache_close(c);
        return CACHE_ENOMEM;
    }
    ls_of(s)->owned = 1;
    *out = s;
    return 0;
}

Cache *store_lmdb_cache(Store *s) { return s && s->ops == &lmdb_ops ? ls_of(s)->c : NULL; }

/* From the Redis tier into the LMDB cache, a pull streams (remote.h): only
 * for a put that may skip the sync, as every pull's is. */
static Remote *streams(Store *from, Store *to, unsigned put_flags, Cache **c) {
    *c = store_lmdb_cache(to);
    Remote *r = store_redis_remote(from);
    return r && *c && (put_flags & STORE_PUT_REFETCHABLE) ? r : NULL;
}

static int put_side(int rc, int failed_put, int *put_failed) {
    if (put_failed) *put_failed = rc && failed_put;
    return rc;
}

int store_pull(Store *from, Store *to, const CacheKey *k, const void *record, size_t record_len, unsigned put_flags,
               int *put_failed) {
    Cache *c;
    Remote *r = streams(from, to, put_flags, &c);
    if (r) {
        int rc = remote_pull(r, c, k, record, record_len);
        return put_side(rc, remote_failed_locally(r), put_failed);
    }
    StoreEntry *e;
    int rc = store_get(from, k, record, record_len, STORE_GET_VERIFY, &e);
    if (rc) return put_side(rc, 0, put_failed);
    rc = store_put(to, k, e->record, e->record_len, &e->meta, e->secs, e->nsecs, put_flags);
    store_release(from, e);
    return put_side(rc, 1, put_failed);
}

int store_copy(Store *from, Store *to, const CacheKey *k, const void *record, size_t record_len, unsigned put_flags) {
    return store_pull(from, to, k, record, record_len, put_flags, NULL);
}

int store_pull_alias(Store *from, Store *to, const CacheKey *alias, const void *record, size_t record_len,
                     unsigned put_flags, int *put_failed) {
    Cache *c;
    Remote *r = streams(from, to, put_flags, &c);
    if (r) {
        int rc = remote_pull_direct(r, c, alias, record, record_len, NULL);
        return put_side(rc, remote_failed_locally(r), put_failed);
    }
    StoreEntry *e, *have;
    int rc = store_alias_get(from, alias, record, record_len, STORE_GET_VERIFY, &e);
    if (rc) return put_side(rc, 0, put_failed);
    if (store_get(to, &e->key, NULL, 0, STORE_GET_NOTOUCH | STORE_GET_TRUSTED, &have) == 0)
        store_release(to, have);
    else
        rc = store_put(to, &e->key, e->record, e->record_len, &e->meta, e->secs, e->nsecs, put_flags);
    if (rc == 0) rc = store_alias_put(to, alias, record, record_len, &e->key);
    store_release(from, e);
    return put_side(rc, 1, put_failed);
}
