/* cache.h — milc's artifact cache: bytes under 128-bit content keys in one
 * LMDB environment, with metadata, hit counting, eviction, verification and
 * a portable bundle format.  It knows nothing of MIL; the caller decides what
 * goes into a key and what the bytes mean.  This header is the manual.
 *
 * Errors: every function returning int returns 0 (or a count) on success and a
 * negative CACHE_E* code on failure; cache_strerror() names the code and
 * cache_errmsg() holds a sentence about the last failure on that handle.
 * Nothing here prints, exits or aborts on bad input or a damaged file.
 *
 * Threads and processes: a Cache handle is used by one thread at a time.  Any
 * number of processes may open the same directory and build, read and evict
 * concurrently.  Open a directory at most once per process (an LMDB rule), and
 * do not carry a handle across fork(): open it in the child.
 */
#ifndef MILC_CACHE_H
#define MILC_CACHE_H

#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------ */

enum {
    CACHE_OK = 0,
    CACHE_ENOTFOUND = -1, /* miss: no such key */
    CACHE_EMISMATCH = -2, /* miss: key found but its stored key record differs
                             (a hash collision or an input left out of the key) */
    CACHE_ECORRUPT = -3,  /* entry damaged (miss; counted; next put heals it), or
                             environment file damaged (see cache_errmsg) */
    CACHE_EIO = -4,       /* system call failed (message names it and errno) */
    CACHE_ENOMEM = -5,
    CACHE_EINVAL = -6,   /* bad argument */
    CACHE_EBUSY = -7,    /* needs exclusive use but other users exist */
    CACHE_EFULL = -8,    /* the map cannot grow (limit, disk, or a live CacheHit) */
    CACHE_EBUNDLE = -9,  /* bundle file malformed, truncated or tampered */
    CACHE_ELMDB = -10,   /* unexpected LMDB error (message has mdb_strerror), or an
                             LMDB of a version this cache does not know */
    CACHE_ENOTSUP = -11, /* the store does not offer this operation (store.h) */
};
/* The three outcomes a caller treats as "compile it". */
#define CACHE_IS_MISS(rc) ((rc) == CACHE_ENOTFOUND || (rc) == CACHE_EMISMATCH || (rc) == CACHE_ECORRUPT)

/* Static string for a CACHE_E* code ("not found", ...). */
const char *cache_strerror(int rc);

/* ---- keys -------------------------------------------------------------- */

/* A key is XXH3-128 of a key record, big-endian canonical form (as xxhsum). */
typedef struct CacheKey {
    uint8_t b[16];
} CacheKey;

/* A key record is a sequence of items, each
 *     u32 tag (LE) | u64 length n (LE) | n bytes
 * in the order added.  Tags are the caller's (a fourcc such as 'MODE' reads
 * well in `milc cache show`).  Length-prefixing makes the record unambiguous:
 * no two different item lists give the same bytes. */
typedef struct CacheKeyBuilder {
    uint8_t *buf; /* the record so far; owned by the builder */
    size_t len, cap;
    int err; /* sticky: CACHE_ENOMEM after a failed growth */
} CacheKeyBuilder;

void ckey_init(CacheKeyBuilder *b);
void ckey_free(CacheKeyBuilder *b);
/* Append one item.  Returns 0 or CACHE_ENOMEM (then the builder stays in error
 * and ckey_finish fails too, so callers may check once at the end). */
int ckey_add(CacheKeyBuilder *b, uint32_t tag, const void *bytes, size_t len);
int ckey_add_u64(CacheKeyBuilder *b, uint32_t tag, uint64_t v);    /* 8 bytes LE */
int ckey_add_str(CacheKeyBuilder *b, uint32_t tag, const char *s); /* without NUL */
/* Hash the record into *key.  The record stays readable in b->buf/b->len
 * (pass it to cache_get/cache_put) until ckey_free. */
int ckey_finish(CacheKeyBuilder *b, CacheKey *key);

/* XXH3-128 of any record bytes. */
void cache_key_of(const void *record, size_t len, CacheKey *key);
/* 32 lowercase hex digits + NUL. */
void cache_key_hex(const CacheKey *k, char out[33]);
/* Parse 32 hex digits (either case).  0 or CACHE_EINVAL. */
int cache_key_parse(const char *hex, CacheKey *k);

/* Iterate a record's items for display: start with *pos = 0; each call returns
 * 1 and fills tag/bytes/len (bytes point into rec), 0 at the end, or
 * CACHE_EINVAL when the record is malformed (an item runs past the end). */
int ckey_record_next(const void *rec, size_t len, size_t *pos, uint32_t *tag, const uint8_t **bytes,
                     uint64_t *item_len);

/* ---- the cache handle -------------------------------------------------- */

typedef struct Cache Cache;

typedef struct CacheOptions {
    uint64_t map_size;    /* initial LMDB map size; 0 = 1 GiB.  Grows by itself. */
    uint64_t max_bytes;   /* size limit for this handle; 0 = the limit stored by
                             cache_set_limit (0 there = unlimited) */
    uint64_t chunk_bytes; /* sections up to this size are packed into values of at
                             most this size; 0 = 64 MiB (rounded to 64) */
    uint64_t whole_bytes; /* a larger section up to this size gets one value of its
                             own, so a hit maps it without a copy; 0 = 1 GiB;
                             at least chunk_bytes (see cache_hit_sections) */
    int no_sync;          /* 1: do not fsync commits (tests, benchmarks).  A process
                             crash still loses nothing; an OS crash may damage the
                             file (then cache_open reports CACHE_ECORRUPT). */
    int meta_sync;        /* 1: also fsync the meta page on each commit, so a put
                             that returned survives an OS crash (see "Durability") */
    int no_writemap;      /* 1: LMDB's copy-and-pwrite store path instead of writing
                             values in place through the map (see "Stores") */
    /* Clock override for tests (ns since the epoch); NULL = CLOCK_REALTIME. */
    uint64_t (*now_ns)(void *ctx);
    void *now_ctx;
} CacheOptions;

/* Durability.  A put either commits whole or leaves no trace, also when the
 * process is killed at any instant.  By default each commit fsyncs the data
 * pages but not the meta page that names the new root (LMDB's NOMETASYNC):
 * after an OS crash or power loss the file is intact, but the last puts may be
 * gone — a cache miss, rebuilt by the next build.  meta_sync = 1 adds the
 * second fsync per commit; no_sync = 1 drops both (an OS crash may then leave
 * a damaged file: cache_open says so and cache_destroy cures it).  A put with
 * CACHE_PUT_REFETCHABLE (cache_put_ex, below) waits for no disk: an OS crash
 * before the next durable commit may cost the whole cache, never a torn
 * entry (cache/README.md, "Durability").
 *
 * Stores.  By default the map is opened writable (LMDB's WRITEMAP) and a put
 * copies each section once, straight into the file's pages, hashing it while
 * it is hot in cache.  Outside a write transaction the map is kept read-only
 * (mprotect), so a stray write through a hit pointer faults as it would
 * without WRITEMAP; during a put of this handle it is writable.  data.mdb is as
 * large as the map but sparse: disk blocks are reserved (fallocate) before
 * each write transaction, so a full disk is CACHE_EIO, never SIGBUS, and
 * CacheStats.file_bytes counts allocated bytes. */

/* Open (creating, mode 0700 with parents) the cache in directory dir: it holds
 * data.mdb, lock.mdb (LMDB) and milc.lock (see cache_gc).  opt may be NULL.
 * Checks the data file's meta pages and size before LMDB maps it and clears
 * reader slots of dead processes.  Blocks while another process compacts.
 * Returns 0 and *out, or an error with a message in err (if err != NULL):
 * CACHE_ECORRUPT names the damaged file (cache_destroy, or deleting the
 * directory, starts afresh: the caller words that for its users);
 * CACHE_EIO, CACHE_ENOMEM, CACHE_ELMDB (also: an LMDB other than 0.9, whose
 * file format this cache does not know). */
int cache_open(Cache **out, const char *dir, const CacheOptions *opt, char *err, size_t errlen);
/* Flush pending hit statistics and close.  Every CacheHit must be released first. */
void cache_close(Cache *c);
/* The last failure on this handle, as a sentence ("" if none).  Valid until
 * the next call on c. */
const char *cache_errmsg(const Cache *c);
/* Remove a cache directory's files (data.mdb, lock.mdb, milc.lock) — the cure
 * for a damaged environment; works without opening it.  CACHE_EBUSY if another
 * process has it open.  err as for cache_open. */
int cache_destroy(const char *dir, char *err, size_t errlen);

/* ---- storing ----------------------------------------------------------- */

/* One contiguous piece of an artifact (e.g. the plan, or one weight tensor). */
typedef struct CacheSection {
    const void *data;
    uint64_t size;
} CacheSection;

typedef struct CacheEntryMeta {
    const char *description; /* free text for `cache ls`; NULL = "" */
    const char *backend;     /* e.g. "cpu"; NULL = "" */
    int32_t mode;            /* compile mode */
    uint64_t compile_ns;     /* what building this cost; summed per hit as "saved" */
} CacheEntryMeta;

/* Store (or replace) the artifact for key k, with its key record, metadata and
 * sections, in one write transaction that it opens and commits itself: do the
 * expensive work (compiling) before calling, never inside.  A reader sees the
 * whole entry or none of it, also if this process is killed mid-call.  Two
 * processes putting the same key end with one valid entry.  Replacing an entry
 * heals a damaged one.  After the put, if the cache exceeds its size limit,
 * least-recently-used entries (never this one) are evicted in the same
 * transaction.  The map grows as needed — unless a CacheHit of this handle is
 * live (growing remaps and would move its pointers): then CACHE_EFULL.
 * A section larger than chunk_bytes gets a value of its own; only one larger
 * than whole_bytes is stored in several LMDB values (see cache_hit_sections
 * for what that costs on a hit).
 * Returns 0, CACHE_EINVAL, CACHE_EFULL, CACHE_EIO (e.g. disk full), CACHE_ENOMEM,
 * CACHE_ECORRUPT (environment damaged), CACHE_ELMDB. */
int cache_put(Cache *c, const CacheKey *k, const void *record, size_t record_len, const CacheEntryMeta *m,
              const CacheSection *secs, int nsecs);

/* A put with options (cache_put_ex).  flags: CACHE_PUT_REFETCHABLE says the
 * bytes can be fetched again from elsewhere (a pull from a shared tier): the
 * commit then does not wait for the disk.  The crash contract of such a put
 * (cache/README.md, "Durability"): a process killed at any instant loses
 * nothing that was committed; an OS crash or power loss before the next
 * durable commit of the directory (any put without the flag, a statistics
 * flush, a gc, in any process) may lose the whole local cache, which the
 * next cache_open after the reboot then starts afresh (see
 * CacheStats.restarted) — never a torn entry.  Where the boot cannot be told
 * apart (no boot id), the flag is ignored and the put is durable.
 * dkey: also map this direct key to the entry (as cache_direct_put), in the
 * same transaction; NULL: none.
 * fill: the sections' bytes come from fill instead of secs[i].data (which may
 * be NULL; only the sizes are read): called in order, each call for the next
 * n bytes of the sections back to back, written straight into their place in
 * the cache file.  It returns 0, or a CACHE_E* code that aborts the put (the
 * put returns that code; nothing is stored).  It runs inside the write
 * transaction: a stream from a socket lands once, without a buffer for the
 * whole entry.  A put that would need the bytes a second time (the map had to
 * grow after all) fails with CACHE_EFULL and stores nothing.
 * fill_sync (optional, with fill): for a fill that goes on reading its bytes
 * after handing them over (checking them on another thread).  The cache
 * calls fill_sync(ctx, CACHE_FILL_REUSE) whenever it has written out a block
 * of staged bytes (or, without WRITEMAP, before LMDB may move them): after
 * that call returns it may overwrite what fill wrote before the previous
 * such call, never what came since.  CACHE_FILL_COMMIT
 * comes after the last byte, before the commit, CACHE_FILL_ABORT before an
 * abort: after either, the fill's owner reads none of those bytes again.
 * Nonzero from REUSE or COMMIT aborts the put with that code.
 * CACHE_PUT_CONSUME (without fill): the caller drops the sections' bytes
 * after the put, so the cache hands their memory back (whole pages, as
 * os_mem_discard) as soon as it has copied them: a build's store of one
 * program then shrinks while the next is made, instead of holding both.
 * The sections read as zeros after the put, whatever it returned; a put
 * that would need them a second time fails with CACHE_EFULL.  consumed, if
 * set, is told of each n bytes handed back (on the putting thread). */
enum { CACHE_PUT_REFETCHABLE = 1u << 0, CACHE_PUT_CONSUME = 1u << 1 };
enum { CACHE_FILL_REUSE, CACHE_FILL_COMMIT, CACHE_FILL_ABORT };
typedef int (*CacheFillFn)(void *ctx, uint8_t *dst, uint64_t n);
typedef struct CachePutOptions {
    unsigned flags;
    const CacheKey *dkey;
    const void *drecord;
    size_t drecord_len;
    CacheFillFn fill;
    int (*fill_sync)(void *ctx, int when); /* CACHE_FILL_* */
    void *fill_ctx;
    void (*consumed)(void *ctx, uint64_t n); /* CACHE_PUT_CONSUME */
    void *consumed_ctx;
} CachePutOptions;
/* cache_put with options (po NULL = cache_put). */
int cache_put_ex(Cache *c, const CacheKey *k, const void *record, size_t record_len, const CacheEntryMeta *m,
                 const CacheSection *secs, int nsecs, const CachePutOptions *po);

/* Map a direct key (template bytes, parameters, weight-source digest) to the
 * artifact key akey.  The direct record is stored and compared like a key record. */
int cache_direct_put(Cache *c, const CacheKey *dkey, const void *drecord, size_t drecord_len, const CacheKey *akey);

/* Notes: a small value under a key, with the key's record stored beside it
 * and compared on every get like an entry's, so a collision is a miss.  For
 * what a caller remembers about its own requests (milc's request memo); a
 * note is not an entry: ls, verify, export and the size limit do not see it,
 * clear drops it.  Its bytes are the caller's to check: they are untrusted
 * input like the rest of the file.  Record and value at most CACHE_NOTE_MAX. */
enum { CACHE_NOTE_MAX = 1 << 20 };
int cache_note_put(Cache *c, const CacheKey *k, const void *record, size_t record_len, const void *value,
                   size_t value_len);
/* *value: a malloc'd copy (the caller frees it).  0, CACHE_ENOTFOUND,
 * CACHE_EMISMATCH (another record under k), CACHE_EINVAL, CACHE_ENOMEM,
 * CACHE_ELMDB. */
int cache_note_get(Cache *c, const CacheKey *k, const void *record, size_t record_len, void **value, size_t *value_len);

/* Call fn for every direct key, in key order, with its stored record and the
 * artifact key it maps to (the artifact may be gone: evicted or removed).
 * record is valid only during the call; a nonzero return stops (and is
 * returned).  For explaining a miss: the records are the caller's to read. */
typedef int (*CacheDirectFn)(void *ctx, const CacheKey *dkey, const uint8_t *record, size_t record_len,
                             const CacheKey *akey);
int cache_direct_ls(Cache *c, CacheDirectFn fn, void *ctx);

/* Set the persistent size limit in bytes of artifact data (0 = unlimited),
 * shared by every process using the directory. */
int cache_set_limit(Cache *c, uint64_t max_bytes);

/* ---- hits -------------------------------------------------------------- */

typedef struct CacheHit CacheHit;

/* Metadata of an entry, as cache_ls and cache_hit_info give it.  Strings and
 * record point into the map or the handle's memory: valid only as long as
 * stated by the function that handed the struct out. */
typedef struct CacheEntryInfo {
    CacheKey key;
    const char *description, *backend; /* NUL-terminated */
    int32_t mode;
    uint32_t nsections;
    uint64_t bytes; /* sum of section sizes */
    uint64_t created_ns, last_used_ns, hits, compile_ns;
    const uint8_t *record; /* the key record */
    size_t record_len;
    uint8_t checksum[16]; /* XXH3-128 over the sections (see cache/README.md) */
    int checked;          /* a hit: this lookup recomputed the checksum (and it
                              matched); 0 if it was trusted or not asked for */
    uint64_t load_ns;     /* the last load time recorded by cache_record_load, 0 = none */
    uint32_t copied;      /* sections split over several values, which a hit copies
                             (cache_hit_sections); 0: a hit maps every section */
} CacheEntryInfo;

enum {
    CACHE_GET_VERIFY = 1u << 0,       /* recompute the checksum over all bytes (costs a
                                    pass over the artifact, on every core); the
                                    key record compare always happens */
    CACHE_GET_NOTOUCH = 1u << 1,      /* do not count the hit or update last-used */
    CACHE_GET_POPULATE = 1u << 2,     /* map every page of the artifact now, in one call
                                     per value (MADV_POPULATE_READ), rather than on
                                     first touch; a checksum pass implies it */
    CACHE_GET_VERIFY_ONCE = 1u << 3,  /* CACHE_GET_VERIFY, unless the entry already
                                     passed its checksum (at its put, whose checksum
                                     is built from the bytes as copied into place, or
                                     at a counted verified hit) in this boot of the
                                     machine and nothing but milc has written
                                     data.mdb since: milc records the ctime its own
                                     writes leave (milc.stamp), and any other write
                                     changes it.  Blind to a change of the disk under
                                     the page cache within one boot, and to another
                                     program's write in the instant of a milc commit
                                     (cache/README.md, "Checksums"). */
    CACHE_GET_COUNT_DIRECT = 1u << 4, /* count the hit as a direct one: the caller
                                     found the key without generating (in a note) */
};

/* Look up key k.  record/record_len is the caller's key record; it must equal
 * the stored one byte for byte, else CACHE_EMISMATCH.  record == NULL skips the
 * compare — only for a key the caller did not derive itself (`milc run KEY`,
 * or a key its own note gave it, whose record was compared instead).
 * On a hit returns 0 and *hit, which owns a read transaction: every pointer it
 * hands out stays valid until cache_hit_release(*hit), and no longer.  Holding a
 * hit keeps the pages it sees from being reused, so release it when the
 * artifact is no longer read (it does not block writers).
 * Misses: CACHE_ENOTFOUND, CACHE_EMISMATCH (counted as misses), CACHE_ECORRUPT
 * (a bad entry or checksum: counted as an error; the next put heals it).
 * Other errors: CACHE_ENOMEM, CACHE_ELMDB, CACHE_EFULL (the map must grow to
 * adopt another process's growth while this handle holds a hit). */
int cache_get(Cache *c, const CacheKey *k, const void *record, size_t record_len, unsigned flags, CacheHit **hit);

/* The same through a direct key: compares the stored direct record, then loads
 * the artifact it names (its key record is not compared: the caller has none
 * yet; the direct record stands for it).  Counts a direct hit.  *akey (may be
 * NULL) receives the artifact key, also on CACHE_ENOTFOUND of the artifact. */
int cache_get_direct(Cache *c, const CacheKey *dkey, const void *drecord, size_t drecord_len, unsigned flags,
                     CacheHit **hit, CacheKey *akey);

/* The artifact's sections, in the order put, as one contiguous pointer each,
 * 16-byte aligned (LMDB places large values 16 bytes past a page boundary and
 * sections sit at 64-byte offsets within a value).  A section stored within one
 * value (size <= whole_bytes: every section of a model milc builds) points into
 * the map: zero-copy.  A larger one (or one an older milc split at its 64 MiB
 * chunk size) was split over several values; the first call copies it into one
 * heap buffer owned by the hit (a malloc + memcpy of that section).
 * Valid until cache_hit_release.  Returns 0 or CACHE_ENOMEM. */
int cache_hit_sections(CacheHit *h, const CacheSection **secs, int *nsecs);
/* Entry metadata; valid until cache_hit_release.  hits/last_used are as stored
 * before this hit. */
const CacheEntryInfo *cache_hit_info(const CacheHit *h);
/* End the read transaction: every pointer from this hit dies here. */
void cache_hit_release(CacheHit *h);

/* The cost ledger: what loading entry k took the caller (mapping it and
 * making it runnable), kept with its hit statistics (batched the same way)
 * and shown as CacheEntryInfo.load_ns.  The compile time, bytes and hits are
 * the others; time saved is hits x compile time. */
void cache_record_load(Cache *c, const CacheKey *k, uint64_t load_ns);

/* Hit statistics (hits, last-used, time saved) are batched in the handle and
 * written in one small write transaction by the next put/rm/gc, every 16 hits,
 * at close, or now by cache_flush.  Lookups never fail because statistics
 * could not be written (e.g. a full disk): they stay pending, and only
 * cache_flush reports the error. */
int cache_flush(Cache *c);

/* ---- maintenance (the CLI's `milc cache ...`) --------------------------- */

/* Call fn for every entry, in key order; a nonzero return stops (and is
 * returned).  e is valid only during the call. */
typedef int (*CacheEntryFn)(void *ctx, const CacheEntryInfo *e);
int cache_ls(Cache *c, CacheEntryFn fn, void *ctx);
/* One entry (for `show`): fn once, or CACHE_ENOTFOUND. */
int cache_show(Cache *c, const CacheKey *k, CacheEntryFn fn, void *ctx);

typedef struct CacheStats {
    uint64_t direct_hits, hits, misses, errors; /* counted since the last zeroing */
    uint64_t entries, bytes;                    /* artifact bytes stored */
    uint64_t saved_ns;                          /* sum over hits of the entry's compile_ns */
    uint64_t max_bytes;                         /* effective size limit, 0 = none */
    uint64_t file_bytes;                        /* disk space data.mdb takes (allocated blocks; the file
                            itself is sparse and as long as the map) */
    uint64_t map_bytes;                         /* current map size */
    int restarted;                              /* this handle's open found the file of an earlier boot
                            with commits that never reached the disk (after a
                            CACHE_PUT_REFETCHABLE put) and started the cache afresh */
} CacheStats;
int cache_stat(Cache *c, CacheStats *s);
int cache_zero_stats(Cache *c);

/* Remove one entry: 0 or CACHE_ENOTFOUND. */
int cache_rm(Cache *c, const CacheKey *k);
/* Remove every entry, direct key and counter (the file keeps its size until
 * cache_gc compacts it). */
int cache_clear(Cache *c);

/* Check every entry: metadata, all values present and sized, checksum.  Calls
 * fn(ctx, key, why) for each bad entry (fn may be NULL); with repair != 0 bad
 * entries are removed and the entries/bytes counters recounted.  Without
 * repair it only reads (no write transaction, no disk reserved), so it works
 * on a full disk.  Returns the number of bad entries (>= 0) or an error. */
typedef void (*CacheBadFn)(void *ctx, const CacheKey *k, const char *why);
int cache_verify(Cache *c, int repair, CacheBadFn fn, void *ctx);

typedef struct CacheGcReport {
    uint64_t evicted, evicted_bytes;
    uint64_t file_before, file_after; /* disk space of data.mdb, as file_bytes */
    int compacted;                    /* 0 if not asked for, or skipped because the cache was in use */
} CacheGcReport;
/* Evict entries unused for more than max_age_s seconds (0 = no age limit), then
 * least-recently-used entries until artifact bytes <= max_bytes (0 = use the
 * size limit), and forget every note (a memo its caller writes again at the
 * next use; one per request and template state, they would only pile up),
 * then, if compact != 0, rewrite data.mdb without free pages:
 * LMDB never shrinks its file.  Compaction copies the environment to
 * data.mdb.compact and renames it over data.mdb, which is only safe while no
 * other process has it mapped.  Locking: every open handle holds a shared
 * flock on milc.lock for its whole life; compaction takes it exclusively
 * (without waiting) around copy + rename, so it runs only when this handle is
 * the sole user — otherwise it is skipped (compacted = 0, still returns 0) —
 * and cache_open in other processes waits for it.  No CacheHit may be live. */
int cache_gc(Cache *c, uint64_t max_bytes, uint64_t max_age_s, int compact, CacheGcReport *r);

/* ---- bundles (export / import) ------------------------------------------ */

/* Write the given entries (keys == NULL: all) to a bundle file, via a temp
 * file in the same directory renamed into place.  The format is specified in
 * cache/bundle.c and cache/README.md.  Returns the number of entries written
 * or an error; a key not in the cache is CACHE_ENOTFOUND (nothing written). */
int cache_export(Cache *c, const char *path, const CacheKey *keys, int nkeys);
/* Read a bundle, verify all of it (structure, every bound, every checksum,
 * key == hash(record)) and only then store its entries.  A bad bundle is
 * CACHE_EBUNDLE with the cache untouched.  Returns the number imported. */
int cache_import(Cache *c, const char *path);

/* Verify a bundle held in memory without any cache: returns the entry count,
 * or CACHE_EBUNDLE with a reason in err.  For tools and fuzzing. */
int cache_bundle_check(const void *buf, size_t len, char *err, size_t errlen);

#endif
