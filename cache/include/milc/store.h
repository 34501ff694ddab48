/* store.h — the storage seam: the few operations the library needs from a
 * place that keeps entries (bytes in sections under a 128-bit key, with the
 * key record compared on every get), whatever holds them.  Two
 * implementations: the local LMDB cache (store_lmdb_*, over cache.h) and the
 * shared Redis tier (store_redis_*, over remote.h).  A third (a directory of
 * files, an object store) implements StoreOps; cache/README.md ("The
 * storage seam") says what each operation must guarantee.
 *
 * Codes and messages are the cache's (CACHE_E*, cache_strerror); nothing here
 * prints, exits, or tells anyone what command to run: the caller words it.
 * A Store is used by one thread at a time. */
#ifndef MILC_STORE_H
#define MILC_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "milc/cache.h"
#include "milc/remote.h"

/* What an entry carries beside its bytes.  The store keeps these and never
 * interprets them. */
typedef struct StoreMeta {
    const char *description; /* the caller's text; NULL = "" */
    const char *producer;    /* the caller's name for what made the bytes; NULL = "" */
    int32_t variant;         /* the caller's small integer */
    uint64_t cost_ns;        /* what making the bytes cost (a cache saves it per hit) */
    uint64_t created_ns;     /* out only (get, iterate): when the entry was stored */
    uint64_t uses;           /* out only: times served, as the store counts them (0
                                where it does not): the library reports it */
} StoreMeta;

/* An entry handed out by store_get: every pointer is valid until
 * store_release, and no longer. */
typedef struct StoreEntry {
    CacheKey key;
    const uint8_t *record;
    size_t record_len;
    StoreMeta meta;
    const CacheSection *secs;
    int nsecs;
    uint64_t bytes; /* sum of section sizes */
    int checked;    /* this get checked every byte (a verify, first or forced) */
    void *priv;     /* the implementation's */
} StoreEntry;

typedef struct StoreStats {
    uint64_t entries, bytes;       /* what the store holds */
    uint64_t hits, misses, errors; /* as the store counts them (0 where it does not) */
    uint64_t capacity;             /* its size limit or memory, 0 = none or unknown */
} StoreStats;

/* Iteration hands out each entry's key and metadata (no bytes); record and
 * strings are valid only during the call; nonzero from fn stops. */
typedef int (*StoreIterFn)(void *ctx, const CacheKey *k, const uint8_t *record, size_t record_len, const StoreMeta *m,
                           uint64_t bytes);

enum {
    STORE_GET_VERIFY = 1u << 0, /* check every byte against the entry's checksum or MAC now */
    /* A local store's hit costs a lookup, not a read of every byte: a
     * caller that runs the bytes next says how much checking it wants and
     * whether the hit counts.  A store that checks every get ignores these. */
    STORE_GET_NOTOUCH = 1u << 1,      /* do not count the hit or update last-used */
    STORE_GET_POPULATE = 1u << 2,     /* the caller reads every byte next: map it all now */
    STORE_GET_TRUSTED = 1u << 3,      /* no check beyond the record (the caller's policy);
                                         without it or VERIFY, each entry is checked once */
    STORE_GET_COUNT_DIRECT = 1u << 4, /* count the hit as one found through an alias */
    STORE_UP = 1u << 0,               /* state(): reachable */
    STORE_WRITABLE = 1u << 1,         /* state(): puts allowed */
    STORE_PUT_REFETCHABLE = 1u << 0,  /* the bytes can be had again elsewhere: the store
                                       may trade durability for speed (cache.h,
                                       CACHE_PUT_REFETCHABLE), never serve a torn entry */
    STORE_PUT_CONSUME = 1u << 1,      /* the caller drops the sections after the put: the
                                       store may hand their pages back as it copies them
                                       (cache.h, CACHE_PUT_CONSUME); they read as zeros after */
};

/* How a put is made: its STORE_PUT_* flags and, with STORE_PUT_CONSUME,
 * whom to tell of each n bytes of the sections handed back (a build holding
 * two programs to one memory budget); a store that keeps the caller's bytes
 * to the end tells no one. */
typedef struct StorePut {
    unsigned flags;
    void (*consumed)(void *ctx, uint64_t n);
    void *ctx;
} StorePut;

typedef struct Store Store;

/* What an implementation provides.  Each returns 0 or a CACHE_E* code, with a
 * sentence for errmsg.  get compares record (NULL: skip, for a key the caller
 * did not derive) byte for byte with the stored one: CACHE_EMISMATCH if it
 * differs.  put replaces whole or leaves no trace, also when the process is
 * killed.  A store without notes returns CACHE_ENOTSUP from note_*. */
typedef struct StoreOps {
    const char *name; /* "lmdb", "redis" */
    int (*get)(Store *s, const CacheKey *k, const void *record, size_t record_len, unsigned flags, StoreEntry **out);
    void (*release)(Store *s, StoreEntry *e);
    int (*put)(Store *s, const CacheKey *k, const void *record, size_t record_len, const StoreMeta *m,
               const CacheSection *secs, int nsecs, const StorePut *how);
    int (*note_put)(Store *s, const CacheKey *k, const void *record, size_t record_len, const void *value,
                    size_t value_len);
    int (*note_get)(Store *s, const CacheKey *k, const void *record, size_t record_len, void **value,
                    size_t *value_len);
    /* An alias: a second key (with its own record, compared the same way)
     * that names an entry.  alias_get is get through it (out->key is the
     * entry's key); a store without aliases returns CACHE_ENOTSUP. */
    int (*alias_put)(Store *s, const CacheKey *alias, const void *record, size_t record_len, const CacheKey *target);
    int (*alias_get)(Store *s, const CacheKey *alias, const void *record, size_t record_len, unsigned flags,
                     StoreEntry **out);
    int (*iterate)(Store *s, StoreIterFn fn, void *ctx);
    int (*remove)(Store *s, const CacheKey *k);
    int (*stats)(Store *s, StoreStats *st);
    /* What a tier asks before it reads or writes (no round trip): STORE_UP
     * while reachable (a tripped breaker is not), STORE_WRITABLE unless
     * opened read-only. */
    unsigned (*state)(const Store *s);
    /* A message the store wants shown once (the breaker just tripped), or
     * NULL; each message is handed out once. */
    const char *(*notice)(Store *s);
    const char *(*errmsg)(const Store *s);
    void (*close)(Store *s);
} StoreOps;

/* Every implementation's handle begins with this. */
struct Store {
    const StoreOps *ops;
};

static inline int store_get(Store *s, const CacheKey *k, const void *record, size_t record_len, unsigned flags,
                            StoreEntry **out) {
    return s->ops->get(s, k, record, record_len, flags, out);
}
static inline void store_release(Store *s, StoreEntry *e) {
    if (e) s->ops->release(s, e);
}
static inline int store_put(Store *s, const CacheKey *k, const void *record, size_t record_len, const StoreMeta *m,
                            const CacheSection *secs, int nsecs, unsigned flags) {
    StorePut how = {flags, NULL, NULL};
    return s->ops->put(s, k, record, record_len, m, secs, nsecs, &how);
}
static inline int store_put_how(Store *s, const CacheKey *k, const void *record, size_t record_len,
                                const StoreMeta *m, const CacheSection *secs, int nsecs, const StorePut *how) {
    return s->ops->put(s, k, record, record_len, m, secs, nsecs, how);
}
static inline int store_note_put(Store *s, const CacheKey *k, const void *record, size_t record_len, const void *value,
                                 size_t value_len) {
    return s->ops->note_put(s, k, record, record_len, value, value_len);
}
static inline int store_note_get(Store *s, const CacheKey *k, const void *record, size_t record_len, void **value,
                                 size_t *value_len) {
    return s->ops->note_get(s, k, record, record_len, value, value_len);
}
static inline int store_alias_put(Store *s, const CacheKey *alias, const void *record, size_t record_len,
                                  const CacheKey *target) {
    return s->ops->alias_put(s, alias, record, record_len, target);
}
static inline int store_alias_get(Store *s, const CacheKey *alias, const void *record, size_t record_len,
                                  unsigned flags, StoreEntry **out) {
    return s->ops->alias_get(s, alias, record, record_len, flags, out);
}
static inline int store_iterate(Store *s, StoreIterFn fn, void *ctx) { return s->ops->iterate(s, fn, ctx); }
static inline int store_remove(Store *s, const CacheKey *k) { return s->ops->remove(s, k); }
static inline int store_stats(Store *s, StoreStats *st) { return s->ops->stats(s, st); }
static inline unsigned store_state(const Store *s) { return s->ops->state(s); }
static inline const char *store_notice(Store *s) { return s->ops->notice(s); }
static inline const char *store_errmsg(const Store *s) { return s->ops->errmsg(s); }
static inline void store_close(Store *s) {
    if (s) s->ops->close(s);
}

/* Copy entry k from one store to another (a pull from a shared tier into the
 * local cache, or a push back): get from `from`, put into `to` with
 * put_flags.  Codes of the get, then of the put (whose message is in
 * store_errmsg(to)). */
int store_copy(Store *from, Store *to, const CacheKey *k, const void *record, size_t record_len, unsigned put_flags);
/* store_copy, saying which side failed: *put_failed (may be NULL) is 1 when
 * the put did (its message is store_errmsg(to)), 0 when the get did (in
 * store_errmsg(from)).  From the Redis tier into the LMDB cache with
 * STORE_PUT_REFETCHABLE the entry streams: each chunk goes from the socket
 * into its place in the cache file, its MAC checked there, and the put
 * commits only after every chunk passed (remote_pull); no copy of the whole
 * entry is held in memory. */
int store_pull(Store *from, Store *to, const CacheKey *k, const void *record, size_t record_len, unsigned put_flags,
               int *put_failed);
/* The entry an alias names in `from` (record is the alias's, compared as
 * alias_get does), copied into `to` unless `to` holds it, then the alias
 * beside it.  Codes and *put_failed as store_pull; it streams likewise. */
int store_pull_alias(Store *from, Store *to, const CacheKey *alias, const void *record, size_t record_len,
                     unsigned put_flags, int *put_failed);

/* ---- the LMDB cache (cache.h) ------------------------------------------- */

/* Open a cache directory as a store (cache_open; err as there). */
int store_lmdb_open(Store **out, const char *dir, const CacheOptions *opt, char *err, size_t errlen);
/* A store over an open Cache handle the caller keeps (and closes after the
 * store): for code that holds a Cache already.  NULL on out of memory. */
Store *store_lmdb_wrap(Cache *c);
/* The Cache under an LMDB store (for what only the cache offers: gc,
 * export, the cost ledger). */
Cache *store_lmdb_cache(Store *s);

/* ---- the shared Redis tier (remote.h) ------------------------------------ */

/* Open a remote tier as a store (remote_open; connects lazily).  get
 * checks the MAC of the manifest and of every chunk, always; put publishes
 * whole or not at all; iterate reads each entry's manifest; remove deletes
 * the manifest, then the chunks; no notes (CACHE_ENOTSUP).  A failure of the
 * server trips the remote's breaker (remote.h): CACHE_EIO from then on. */
int store_redis_open(Store **out, const RemoteOptions *o, char *err, size_t errlen);
Store *store_redis_wrap(Remote *r);
Remote *store_redis_remote(Store *s);

#endif
