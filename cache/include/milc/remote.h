/* remote.h — a shared tier behind the local cache: entries on a Redis server,
 * in checksummed, authenticated chunks, published only when complete.  Like
 * the rest of the cache it knows nothing of MIL, never prints and never exits:
 * a failure is a code and a sentence.  Layout, trust and failure modes are in
 * cache/README.md ("Remote tier").
 *
 * The breaker: the first connection, timeout or protocol failure marks the
 * handle down for the rest of its life (every later call is CACHE_EIO at
 * once, without touching the network) and leaves one warning for the caller
 * to show (remote_warning).  So a dead, slow or frozen server costs a build at
 * most one connect timeout plus one command timeout, never its result. */
#ifndef MILC_REMOTE_H
#define MILC_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "milc/cache.h"

enum {
    REMOTE_SECRET_BYTES = 32,
    REMOTE_CHUNK_DEFAULT = 1 << 20,
    REMOTE_CHUNK_MAX = 64 << 20, /* a manifest naming larger chunks is refused */
};

/* redis://[user:pass@]host:port[/db], strictly: port 1-65535 required, db a
 * decimal 0-65535, user and password may use %XX escapes, nothing after the
 * db.  host is a name, an IPv4 address or an [IPv6] address.
 * Or a server on this host through its Unix-domain socket (redis-server's
 * `unixsocket`): unix://[user:pass@]/absolute/path[?db=N], the path with
 * %XX escapes allowed, at most REMOTE_PATH_MAX - 1 bytes, no control
 * character; nothing but db=N after a '?'. */
enum { REMOTE_PATH_MAX = 108 }; /* sizeof sockaddr_un.sun_path on Linux */
typedef struct RemoteUrl {
    char user[128], pass[256], host[256];
    char path[REMOTE_PATH_MAX]; /* non-empty: a Unix socket (host empty, port 0) */
    int port, db;
} RemoteUrl;
/* 0, or CACHE_EINVAL with a sentence naming what is wrong in err. */
int remote_url_parse(const char *url, RemoteUrl *u, char *err, size_t errlen);

/* The team secret from a key file, checked like ssh checks a private key: a
 * regular file (no symbolic link), owned by this user or root, not readable or
 * writable by group or others, 32 bytes to 64 KiB.  The secret is BLAKE2b-256
 * of the file's bytes.  0, or CACHE_EINVAL / CACHE_EIO with a sentence. */
int remote_key_load(const char *path, uint8_t secret[REMOTE_SECRET_BYTES], char *err, size_t errlen);

typedef struct RemoteOptions {
    const char *url;
    const uint8_t *secret;    /* REMOTE_SECRET_BYTES, or NULL: no entry can be read or
                                written (remote_stat and remote_list still work) */
    int readonly;             /* never write to the server */
    int connect_timeout_ms;   /* 0 = 1000 */
    int io_timeout_ms;        /* per reply, from asking to the last byte; 0 = 2000 */
    uint32_t chunk_bytes;     /* pushes cut entries into pieces this large; 0 = 1 MiB */
    uint64_t max_entry_bytes; /* 0 = 16 GiB: larger entries are neither pushed nor pulled */
} RemoteOptions;

typedef struct Remote Remote;

/* Check the options and the URL; connects lazily, at the first call that needs
 * the server.  0 and *out, or CACHE_EINVAL / CACHE_ENOMEM with err set. */
int remote_open(Remote **out, const RemoteOptions *o, char *err, size_t errlen);
void remote_close(Remote *r);
/* The last failure as a sentence ("" if none). */
const char *remote_errmsg(const Remote *r);
/* The warning of the failure that tripped the breaker, handed out once (then
 * NULL); NULL while the remote works. */
const char *remote_warning(Remote *r);
/* 1 while the breaker has not tripped. */
int remote_up(const Remote *r);
/* 1 if opened read-only. */
int remote_readonly(const Remote *r);
/* 0 if the server answers (connecting now if need be), else CACHE_EIO. */
int remote_ping(Remote *r);

/* An entry fetched and checked (remote_get): metadata and sections in memory,
 * owned by it until remote_entry_free. */
typedef struct RemoteEntry {
    CacheKey key;
    const uint8_t *record;
    size_t record_len;
    const char *description, *backend;
    int32_t mode;
    uint64_t created_ns, compile_ns, bytes;
    const CacheSection *secs; /* back to back in one 64-byte-aligned buffer */
    int nsecs;
    void *priv;
} RemoteEntry;
/* Fetch entry k and check it as remote_pull does, without storing it.
 * Codes as remote_pull; *out only on 0. */
int remote_get(Remote *r, const CacheKey *k, const void *record, size_t record_len, RemoteEntry **out);
/* Free an entry (before remote_close of the handle that got it: the handle
 * keeps the buffer for its next get). */
void remote_entry_free(RemoteEntry *e);

/* Pull entry k into the local cache c (remote_get, then cache_put).  record (may be NULL: only for a key the
 * caller did not derive, as `milc cache pull KEY`) must equal the entry's key
 * record.  The manifest's MAC, the key (XXH3-128 of the record), every chunk's
 * size and MAC are checked before cache_put; nothing is stored otherwise.
 * 0 stored; CACHE_ENOTFOUND not on the server, or not whole (a chunk evicted or
 * lost); CACHE_EMISMATCH another record under k; CACHE_ECORRUPT refused (a MAC,
 * size or format check failed: tampered or damaged; the message says which);
 * CACHE_EIO the server failed (breaker tripped); CACHE_EINVAL no secret; or
 * what cache_put returned. */
int remote_pull(Remote *r, Cache *c, const CacheKey *k, const void *record, size_t record_len);
/* 1 if the last remote_pull or remote_pull_direct failed storing into the
 * local cache (the entry itself was fine; the message names the local
 * failure), 0 if it failed on the remote's side or did not fail. */
int remote_failed_locally(const Remote *r);

/* A direct key's mapping (cache_direct_put) on the server: if present and
 * authentic, with drecord equal to the stored one, pull its artifact and store
 * the mapping locally.  *akey (may be NULL) receives the artifact key.  Codes
 * as remote_pull. */
int remote_pull_direct(Remote *r, Cache *c, const CacheKey *dkey, const void *drecord, size_t drecord_len,
                       CacheKey *akey);
/* The artifact key a direct key's mapping on the server names (authentic,
 * drecord equal to the stored one), nothing fetched or stored: the Redis
 * store's alias lookup (store.h).  Codes as remote_pull_direct. */
int remote_resolve_direct(Remote *r, const CacheKey *dkey, const void *drecord, size_t drecord_len, CacheKey *akey);

/* Push local entry k, unless the server already holds it whole and authentic.
 * Chunks go under a fresh staging name (expiring in an hour), then one atomic
 * script publishes the manifest, only if the entry it replaces (or its
 * absence) is what this push saw, and makes the chunks permanent.
 * 0 pushed, 1 already there; CACHE_ENOTFOUND not in the local cache;
 * CACHE_EINVAL read-only or no secret; CACHE_EIO the server failed. */
int remote_push(Remote *r, Cache *c, const CacheKey *k);
/* Push an entry held in memory (not in a local cache), as remote_push does:
 * record is required and k must be its XXH3-128.  0 pushed, 1 already there;
 * CACHE_EINVAL (bad arguments, read-only, no secret), CACHE_EIO. */
int remote_put(Remote *r, const CacheKey *k, const void *record, size_t record_len, const CacheEntryMeta *m,
               const CacheSection *secs, int nsecs);
/* Entry k's metadata from its manifest (MAC checked; no chunk read): fn
 * once, as cache_show.  CACHE_ENOTFOUND, CACHE_ECORRUPT, CACHE_EIO. */
int remote_info(Remote *r, const CacheKey *k, CacheEntryFn fn, void *ctx);
/* Remove entry k from the server (manifest and chunks, in one command).
 * 0, CACHE_ENOTFOUND, CACHE_EINVAL (read-only, no secret), CACHE_EIO. */
int remote_rm(Remote *r, const CacheKey *k);

/* Push a direct key's mapping to artifact akey (after remote_push of akey). */
int remote_push_direct(Remote *r, const CacheKey *dkey, const void *drecord, size_t drecord_len, const CacheKey *akey);

/* Call fn for the key of every entry manifest on the server (SCAN: an entry
 * published meanwhile may or may not be seen); nonzero from fn stops. */
int remote_list(Remote *r, int (*fn)(void *ctx, const CacheKey *k), void *ctx);

typedef struct RemoteStats {
    uint64_t entries, directs, chunks, other_keys; /* from one SCAN of the db */
    uint64_t used_memory, maxmemory, evicted_keys;
    char version[32], policy[32]; /* redis_version, maxmemory_policy */
} RemoteStats;
int remote_stat(Remote *r, RemoteStats *s);

/* Check a manifest held in memory as a pull does (MAC under secret first,
 * then every field and bound; the key is the one it names): 0 or
 * CACHE_ECORRUPT with a reason in err.  For fuzzing. */
int remote_manifest_check(const uint8_t secret[REMOTE_SECRET_BYTES], const void *buf, size_t len, char *err,
                          size_t errlen);

/* Chunk replies (at most 32 KiB of them) read as a pull reads them from the
 * server, for an entry of `total` bytes of payload cut every `chunk` bytes and
 * tagged under secret: 0 only if the bytes came back whole and equal, else
 * the code a pull would return, with a reason in err.  For fuzzing. */
int remote_chunks_check(const uint8_t secret[REMOTE_SECRET_BYTES], uint32_t chunk, const uint8_t *payload,
                        uint32_t total, const void *replies, size_t len, char *err, size_t errlen);

#endif
