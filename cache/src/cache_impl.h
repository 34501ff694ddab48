/* cache_impl.h — the Cache and CacheHit structs and the entry value format,
 * shared by cache.c and bundle.c.  Private to the cache module. */
#ifndef MILC_CACHE_IMPL_H
#define MILC_CACHE_IMPL_H

#include <stdarg.h>

#include <lmdb.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>

#include "internal.h"

/* Entry value in the "meta" database (little-endian):
 *    0 u32 magic 'MCE1'   4 u32 version      8 u64 created_ns
 *   16 u64 compile_ns    24 u64 total bytes  32 i32 mode   36 u32 nsections
 *   40 u32 nchunks       44 u32 chunk bound  48 u8[16] checksum
 *   64 u32 record_len    68 u32 desc_len     72 u32 backend_len  76 u32 0
 *   80 section table: per section u32 first chunk, u32 offset, u64 size
 *      then the key record, description NUL, backend NUL. */
/* Version 2: the checksum hashes each section's digest, not its bytes. */
enum { ENTRY_HDR = 80, ENTRY_VERSION = 2 };
#define ENTRY_MAGIC 0x3145434Du /* "MCE1" */

typedef struct EntryView {
    uint64_t created, compile_ns, total;
    int32_t mode;
    uint32_t nsec, nchunks, bound, rlen;
    const uint8_t *checksum, *sectab, *record;
    const char *desc, *backend;
} EntryView;

enum {
    CTR_HITS,
    CTR_DIRECT_HITS,
    CTR_MISSES,
    CTR_ERRORS,
    CTR_SAVED_NS,
    CTR_ENTRIES,
    CTR_BYTES,
    CTR_MAX_BYTES,
    CTR_COUNT
};

/* data.mdb's ctime (stamp.c). */
typedef struct {
    uint64_t sec, nsec;
} CacheCtime;

enum { PENDING_MAX = 64, FLUSH_EVERY = 16 };
typedef struct Pending {
    CacheKey key;
    uint64_t last_used, hits;
    int verified;      /* a hit recomputed the checksum and it matched ... */
    CacheCtime vctime; /* ... with data.mdb at this ctime when it began */
    uint64_t load_ns;  /* cache_record_load: the caller's load time, 0 = none */
} Pending;

/* Usage value in the "usage" database: u64 last-used ns, u64 hits, u64 mark
 * of the last passed checksum (stamp.c; 0 = none), u64 the last load time a
 * caller recorded (cache_record_load; 0 = none).  Older milcs wrote 16 or 24
 * bytes; readers accept all three lengths. */
enum { USAGE_MIN = 16, USAGE_MARK = 24, USAGE_LEN = 32 };

struct Cache {
    char *dir, *datapath, *lockpath; /* owned */
    CacheOptions opt;
    MDB_env *env;
    MDB_dbi db_meta, db_data, db_usage, db_direct, db_count, db_notes;
    int dirfd;  /* the verified cache directory (owned by us, writable by nobody else) */
    int lockfd; /* milc.lock, shared flock held while open */
    uint64_t mapsize, psize;
    uint8_t *mapaddr; /* LMDB's map (WRITEMAP: kept PROT_READ outside writes) */
    uint8_t *stage;   /* a put's two 2 MB write-combining buffers (cache.c), lazily */
    int writemap;
    uint64_t boot;         /* tag of this boot (hash of the kernel's boot_id), 0 = unknown */
    int stampfd;           /* milc.stamp (stamp.c), or -1 */
    int stamp_locked;      /* a write transaction holds the stamp lock */
    uint64_t wtag, wepoch; /* the write transaction's mark (0: none) and epoch */
    uint64_t hepoch;       /* the epoch a cache_stamp_hold found */
    CacheCtime wctime;     /* data.mdb's ctime when that transaction began */
    int live_hits;         /* CacheHits holding read transactions */
    unsigned grows;        /* map growths by this handle (tests) */
    int txn_refetch;       /* the next write transaction may commit without a sync */
    int restarted;         /* cache_open discarded an unsynced file of an earlier boot */
    int broken;            /* a remap failed: LMDB may hold no map, no transaction may begin */
    Pending pend[PENDING_MAX];
    int npend;
    uint64_t pctr[CTR_COUNT]; /* counter deltas not yet written */
    char err[512];
};

struct CacheHit {
    Cache *c;
    MDB_txn *txn; /* owned; NULL while loading */
    CacheEntryInfo info;
    uint32_t nsec, nchunks, bound, split;
    CacheSection *secs;     /* data NULL for a split section until materialized */
    const uint8_t **chunkp; /* per chunk: pointer into the map */
    uint64_t *chunksz;
    const uint8_t *sectab; /* into the map */
    void **heap;           /* per section: materialized copy or NULL */
    int verified;          /* this load recomputed the checksum and it matched */
    CacheCtime vctime;     /* data.mdb's ctime before that */
};

typedef int (*TxnBody)(Cache *c, MDB_txn *txn, void *arg);

/* stamp.c: the mark an entry verified now may carry, if data.mdb is as milc
 * last left it (else 0); *now gets its ctime.  A write transaction brackets
 * itself with begin (stamp lock; sets wtag, wepoch, wctime) and end (records
 * the ctime its commit left, then unlocks). */
uint64_t cache_clean_tag(Cache *c, CacheCtime *now);
void cache_stamp_begin(Cache *c);
void cache_stamp_end(Cache *c, int committed);
/* Around milc's own changes to data.mdb's ctime that leave every entry's
 * bytes alone (LMDB truncating the file to the map size as it maps it, at
 * every open): if the stamp held before, it holds after. */
int cache_stamp_hold(Cache *c);
void cache_stamp_release(Cache *c, int held);

/* unsynced.c: the marker of commits that did not wait for the disk. */
int cache_unsynced_mark(Cache *c);
int cache_unsynced_present(Cache *c);
void cache_unsynced_clear(Cache *c);
int cache_unsynced_recover(Cache *c, char *err, size_t errlen);

uint64_t cache_now(Cache *c);
int cache_lmdb_err(Cache *c, int rc, const char *what);
int cache_read_txn(Cache *c, MDB_txn **txn);
int cache_write_txn(Cache *c, TxnBody body, void *arg, uint64_t grow_hint, const char *what);
int cache_entry_parse(const void *data, size_t size, EntryView *e, char *why, size_t whylen);
int cache_load(Cache *c, MDB_txn *txn, const CacheKey *k, const void *rec, size_t rlen, unsigned flags, CacheHit **out);
void cache_hit_free(CacheHit *h);

/* The entry checksum built incrementally: add each section's size and
 * digest in order to an XXH3-128 state, then take its canonical digest. */
void cache_checksum_add(XXH3_state_t *outer, uint64_t size, const uint8_t digest[16]);
void cache_checksum_digest(XXH3_state_t *st, uint8_t out[16]);
int cache_del_entry(Cache *c, MDB_txn *txn, const CacheKey *k, uint64_t *bytes);
int cache_evict_in(Cache *c, MDB_txn *txn, uint64_t limit, uint64_t age_cut, const CacheKey *keep, uint64_t *nev,
                   uint64_t *bytes_ev);
/* cache_put with a given creation time (0 = now) and precomputed checksum
 * (NULL = compute); import keeps the bundle's. */
int cache_put_at(Cache *c, const CacheKey *k, const void *record, size_t rlen, const CacheEntryMeta *m,
                 const CacheSection *secs, int nsecs, uint64_t created, const uint8_t *checksum,
                 const CachePutOptions *po);

#endif
