/* bundle.c — export cache entries to a portable file and import them back.
 * Import trusts nothing: the whole file is verified before the cache is touched.
 *
 * Bundle format, version 1 (all integers little-endian):
 *
 *   header, 16 bytes:   "MILCBNDL"  u32 version = 1  u32 flags = 0
 *   entries, back to back, each:
 *     u8[16]  key (XXH3-128 of the key record, canonical big-endian)
 *     u64     created_ns       u64 compile_ns
 *     i32     mode             u32 nsections
 *     u32     record_len       u32 description_len   u32 backend_len   u32 0
 *     u8[16]  checksum: XXH3-128 over, per section, its size as u64 LE and its bytes
 *     u64     size of each section            (nsections of them)
 *     record bytes, description bytes, backend bytes (no NULs)
 *     section bytes, back to back, no padding
 *   trailer, 32 bytes:  "MILCEND1"  u64 entry count
 *                       u8[16] XXH3-128 of every byte before the trailer
 *
 * A reader checks, in order: magic and version; the trailer magic and the
 * whole-file hash; then per entry that every length and count fits in what
 * is left of the file, that strings hold no NUL, that key == hash(record) and
 * that the section checksum holds; finally that the entries end exactly at the
 * trailer and their number equals the trailer's count.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_impl.h"
#include "milc/osfile.h"

/* Version 2: entry checksums hash section digests (as entries of version 2). */
enum { HDR_SIZE = 16, TRAILER_SIZE = 32, ENT_FIXED = 72, BUNDLE_VERSION = 2 };
static const char bundle_magic[8] = {'M', 'I', 'L', 'C', 'B', 'N', 'D', 'L'};
static const char trailer_magic[8] = {'M', 'I', 'L', 'C', 'E', 'N', 'D', '1'};

typedef struct BundleEntry {
    CacheKey key;
    uint64_t created, compile_ns;
    int32_t mode;
    uint32_t nsec;
    const uint8_t *record, *checksum, *sizes, *data;
    uint32_t rlen, dlen, blen;
    const char *desc, *backend; /* not NUL-terminated */
} BundleEntry;

typedef int (*BundleEntryFn)(void *ctx, const BundleEntry *e, const CacheSection *secs);

static int bad(char *err, size_t errlen, const char *why, uint64_t at) {
    cache_fmt(err, errlen, "bad bundle: %s (at byte %llu)", why, (unsigned long long)at);
    return CACHE_EBUNDLE;
}

/* Verify buf completely; if fn != NULL call it per entry afterwards (only once
 * everything checked out).  Returns the entry count or CACHE_EBUNDLE/ENOMEM. */
static int bundle_walk(const uint8_t *buf, size_t len, char *err, size_t errlen, BundleEntryFn fn, void *ctx) {
    if (len < HDR_SIZE + TRAILER_SIZE) return bad(err, errlen, "too short", len);
    if (memcmp(buf, bundle_magic, 8) != 0) return bad(err, errlen, "not a milc bundle", 0);
    if (ld32(buf + 8) != BUNDLE_VERSION) {
        char why[96];
        snprintf(why, sizeof why, "unsupported version %u (this milc reads version %d)", ld32(buf + 8), BUNDLE_VERSION);
        return bad(err, errlen, why, 8);
    }
    if (ld32(buf + 12) != 0) return bad(err, errlen, "unknown flags", 12);
    const uint8_t *tr = buf + len - TRAILER_SIZE;
    if (memcmp(tr, trailer_magic, 8) != 0) return bad(err, errlen, "no trailer (truncated?)", len - TRAILER_SIZE);
    XXH128_canonical_t cn;
    XXH128_canonicalFromHash(&cn, XXH3_128bits(buf, len - TRAILER_SIZE));
    if (memcmp(cn.digest, tr + 16, 16) != 0) return bad(err, errlen, "file checksum mismatch", len - 16);
    uint64_t count = ld64(tr + 8);
    size_t end = len - TRAILER_SIZE;
    CacheSection *secs = NULL;
    int rc = 0;
    /* Two passes over the same parser: the first only checks, the second hands
     * out entries, so nothing is stored from a bundle that fails later on. */
    for (int pass = 0; pass < (fn ? 2 : 1) && !rc; pass++) {
        size_t pos = HDR_SIZE;
        uint64_t n = 0;
        while (pos < end && !rc) {
            BundleEntry e;
            const uint8_t *p = buf + pos;
            if (end - pos < ENT_FIXED) {
                rc = bad(err, errlen, "entry header truncated", pos);
                break;
            }
            memcpy(e.key.b, p, 16);
            e.created = ld64(p + 16), e.compile_ns = ld64(p + 24);
            e.mode = (int32_t)ld32(p + 32), e.nsec = ld32(p + 36);
            e.rlen = ld32(p + 40), e.dlen = ld32(p + 44), e.blen = ld32(p + 48);
            e.checksum = p + 56;
            if (ld32(p + 52) != 0) {
                rc = bad(err, errlen, "reserved field not zero", pos + 52);
                break;
            }
            size_t left = end - pos - ENT_FIXED;
            uint64_t var = (uint64_t)e.nsec * 8 + e.rlen + e.dlen + e.blen;
            if (var > left) {
                rc = bad(err, errlen, "entry lengths exceed the file", pos);
                break;
            }
            e.sizes = p + ENT_FIXED;
            e.record = e.sizes + (size_t)e.nsec * 8;
            e.desc = (const char *)e.record + e.rlen;
            e.backend = e.desc + e.dlen;
            e.data = (const uint8_t *)e.backend + e.blen;
            left -= (size_t)var;
            if (memchr(e.desc, 0, e.dlen) || memchr(e.backend, 0, e.blen)) {
                rc = bad(err, errlen, "NUL in a string", pos);
                break;
            }
            CacheKey k;
            cache_key_of(e.record, e.rlen, &k);
            if (memcmp(k.b, e.key.b, 16) != 0) {
                rc = bad(err, errlen, "key is not the hash of its record", pos);
                break;
            }
            free(secs);
            secs = malloc((e.nsec ? e.nsec : 1) * sizeof *secs);
            if (!secs) {
                rc = CACHE_ENOMEM;
                break;
            }
            uint64_t off = 0;
            for (uint32_t i = 0; i < e.nsec && !rc; i++) {
                uint64_t sz = ld64(e.sizes + 8 * (size_t)i);
                if (sz > left - off) rc = bad(err, errlen, "section exceeds the file", pos);
                secs[i] = (CacheSection){e.data + off, sz};
                off += sz;
            }
            if (rc) break;
            if (pass == 0) {
                uint8_t sum[16];
                if ((rc = cache_sections_checksum(secs, (int)e.nsec, sum)) != 0) break;
                if (memcmp(sum, e.checksum, 16) != 0) {
                    rc = bad(err, errlen, "section checksum mismatch", pos);
                    break;
                }
            } else if ((rc = fn(ctx, &e, secs)) != 0) {
                break;
            }
            pos = (size_t)(e.data + off - buf);
            n++;
        }
        if (!rc && n != count) rc = bad(err, errlen, "entry count differs from the trailer", len - 24);
        if (!rc && pass == 0 && n > INT32_MAX) rc = bad(err, errlen, "too many entries", 0);
        if (!rc && pass == (fn ? 1 : 0)) rc = (int)n;
    }
    free(secs);
    return rc;
}

int cache_bundle_check(const void *buf, size_t len, char *err, size_t errlen) {
    return bundle_walk(buf, len, err, errlen, NULL, NULL);
}

/* ---- export ---------------------------------------------------------------- */

typedef struct BundleWriter {
    FILE *f;
    XXH3_state_t hash;
    int failed;
} BundleWriter;

static void bw_write(BundleWriter *w, const void *p, size_t n) {
    if (!n || w->failed) return;
    XXH3_128bits_update(&w->hash, p, n);
    if (fwrite(p, 1, n, w->f) != n) w->failed = errno ? errno : EIO;
}

static int export_entry(BundleWriter *w, const CacheEntryInfo *info, const CacheSection *secs) {
    uint8_t h[ENT_FIXED] = {0};
    size_t dlen = strlen(info->description), blen = strlen(info->backend);
    memcpy(h, info->key.b, 16);
    st64(h + 16, info->created_ns), st64(h + 24, info->compile_ns);
    st32(h + 32, (uint32_t)info->mode), st32(h + 36, info->nsections);
    st32(h + 40, (uint32_t)info->record_len), st32(h + 44, (uint32_t)dlen), st32(h + 48, (uint32_t)blen);
    memcpy(h + 56, info->checksum, 16);
    bw_write(w, h, sizeof h);
    for (uint32_t i = 0; i < info->nsections; i++) {
        uint8_t le[8];
        st64(le, secs[i].size);
        bw_write(w, le, 8);
    }
    bw_write(w, info->record, info->record_len);
    bw_write(w, info->description, dlen);
    bw_write(w, info->backend, blen);
    for (uint32_t i = 0; i < info->nsections; i++) bw_write(w, secs[i].data, (size_t)secs[i].size);
    return w->failed;
}

int cache_export(Cache *c, const char *path, const CacheKey *keys, int nkeys) {
    if (!c || !path || nkeys < 0 || (nkeys && !keys)) return CACHE_EINVAL;
    c->err[0] = 0;
    CacheKey *all = NULL;
    int explicit_keys = keys != NULL;
    if (!keys) {
        /* Snapshot the key list first; entries removed meanwhile are skipped. */
        MDB_txn *txn;
        int rc = cache_read_txn(c, &txn);
        if (rc) return rc;
        MDB_cursor *cur;
        size_t cap = 0;
        nkeys = 0;
        if ((rc = mdb_cursor_open(txn, c->db_meta, &cur)) == 0) {
            MDB_val k, v;
            for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
                if (k.mv_size != 16) continue;
                if ((size_t)nkeys == cap) {
                    CacheKey *na = realloc(all, (cap = cap ? 2 * cap : 64) * sizeof *na);
                    if (!na) {
                        rc = ENOMEM;
                        break;
                    }
                    all = na;
                }
                memcpy(all[nkeys++].b, k.mv_data, 16);
            }
            mdb_cursor_close(cur);
        }
        mdb_txn_abort(txn);
        if (rc != MDB_NOTFOUND) {
            free(all);
            return cache_lmdb_err(c, rc, "scan entries");
        }
        keys = all;
    }
    /* Created through open() with 0666, so the umask applies as for any file
     * the user creates (mkstemp's 0600 ignored it). */
    OsPublish pub;
    if (os_publish_begin(&pub, path, 0666, c->err, sizeof c->err) != 0) {
        free(all);
        return CACHE_EIO;
    }
    int wfd = dup(pub.fd); /* the FILE's own; pub.fd stays for the commit */
    BundleWriter w = {.f = wfd >= 0 ? fdopen(wfd, "wb") : NULL};
    if (!w.f) {
        snprintf(c->err, sizeof c->err, "cannot write %s: %s", path, strerror(errno));
        if (wfd >= 0) close(wfd);
        os_publish_abort(&pub);
        free(all);
        return CACHE_EIO;
    }
    XXH3_128bits_reset(&w.hash);
    uint8_t hdr[HDR_SIZE] = {0};
    memcpy(hdr, bundle_magic, 8);
    st32(hdr + 8, BUNDLE_VERSION);
    bw_write(&w, hdr, sizeof hdr);
    int rc = 0;
    uint64_t n = 0;
    for (int i = 0; i < nkeys && !rc && !w.failed; i++) {
        CacheHit *h;
        /* Verify on the way out: a bundle never carries damaged bytes. */
        int gr = cache_get(c, &keys[i], NULL, 0, CACHE_GET_NOTOUCH | CACHE_GET_VERIFY, &h);
        if (gr != 0) {
            if (explicit_keys || !CACHE_IS_MISS(gr)) rc = gr;
            continue;
        }
        const CacheSection *secs;
        int ns;
        if ((rc = cache_hit_sections(h, &secs, &ns)) == 0) {
            export_entry(&w, cache_hit_info(h), secs);
            n++;
        }
        cache_hit_release(h);
    }
    uint8_t tr[TRAILER_SIZE];
    memcpy(tr, trailer_magic, 8);
    st64(tr + 8, n);
    XXH128_canonical_t cn;
    XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(&w.hash));
    memcpy(tr + 16, cn.digest, 16);
    if (!rc && !w.failed && fwrite(tr, 1, sizeof tr, w.f) != sizeof tr) w.failed = errno ? errno : EIO;
    if (fclose(w.f) != 0 && !w.failed) w.failed = errno ? errno : EIO;
    if (!rc && w.failed) {
        snprintf(c->err, sizeof c->err, "cannot write %s: %s", pub.tmp, strerror(w.failed));
        rc = CACHE_EIO;
    }
    if (!rc && os_publish_commit(&pub, c->err, sizeof c->err) != 0) rc = CACHE_EIO;
    os_publish_abort(&pub);
    free(all);
    return rc ? rc : (int)n;
}

/* ---- import ---------------------------------------------------------------- */

static int import_entry(void *ctx, const BundleEntry *e, const CacheSection *secs) {
    Cache *c = ctx;
    char *desc = strndup(e->desc, e->dlen), *backend = strndup(e->backend, e->blen);
    int rc = CACHE_ENOMEM;
    if (desc && backend) {
        CacheEntryMeta m = {.description = desc, .backend = backend, .mode = e->mode, .compile_ns = e->compile_ns};
        rc = cache_put_at(c, &e->key, e->record, e->rlen, &m, secs, (int)e->nsec, e->created, e->checksum, NULL);
    }
    free(desc), free(backend);
    return rc;
}

int cache_import(Cache *c, const char *path) {
    if (!c || !path) return CACHE_EINVAL;
    c->err[0] = 0;
    /* Read into owned memory, not mapped: a bundle truncated while it is
     * imported is an I/O error, never a SIGBUS.  A pipe or FIFO is refused at
     * once ("not a regular file"), not waited on. */
    void *map;
    size_t len;
    int orc = os_read_file(path, 0, &map, &len, c->err, sizeof c->err);
    if (orc) return orc == -EINVAL ? CACHE_EBUNDLE : orc == -ENOMEM ? CACHE_ENOMEM : CACHE_EIO;
    char why[256];
    int rc = bundle_walk(map, len, why, sizeof why, import_entry, c);
    /* The caller names the error class ("bad bundle"); the message says where and why. */
    const char *w = strncmp(why, "bad bundle: ", 12) == 0 ? why + 12 : why;
    if (rc == CACHE_EBUNDLE) snprintf(c->err, sizeof c->err, "%s: %s", path, w);
    free(map);
    return rc;
}
