/* internal.h — what the cache's source files share and nobody else sees:
 * little-endian load/store (values in the map are only 2-byte aligned, so no
 * struct casts), the private assertion, and the error-message helper. */
#ifndef MILC_CACHE_INTERNAL_H
#define MILC_CACHE_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/cache.h"

/* The cache may not include compiler headers, so it has its own always-on
 * assertion for broken invariants (never for bad input or bad files). */
#define CACHE_ASSERT(cond)                                                                                             \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "milc: internal error: %s:%d: assertion '%s' failed\n", __FILE__, __LINE__, #cond);        \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

static inline uint32_t ld32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ld64(const uint8_t *p) { return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32; }
static inline void st32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static inline void st64(uint8_t *p, uint64_t v) { st32(p, (uint32_t)v), st32(p + 4, (uint32_t)(v >> 32)); }

/* Bytes of a section, which may lie in several pieces (a split section). */
typedef struct {
    const uint8_t *data;
    uint64_t size;
} CachePiece;

/* The entry checksum (checksum.c), as stored per entry and per bundle entry:
 * XXH3-128 over each section's size (u64 LE) and its own XXH3-128, so moving
 * a boundary changes it and sections hash in parallel.  Section i is pieces
 * [first[i], first[i + 1]); populate: map each large piece's pages in one
 * call before reading it.  0, or CACHE_ENOMEM (nothing computed). */
int cache_pieces_checksum(const CachePiece *pieces, const uint32_t *first, uint32_t nsec, int populate,
                          uint8_t out[16]);
/* The same over whole sections. */
int cache_sections_checksum(const CacheSection *secs, int n, uint8_t out[16]);

/* Store-path techniques a benchmark can switch off to measure what each one
 * is worth (bench/bench_store.c); 0, the default, uses them all.  Process
 * wide, read at each put; not part of the API. */
enum {
    CACHE_TUNE_NO_PWRITE = 1u << 0,   /* write values through the map (memcpy), not pwrite */
    CACHE_TUNE_NO_MPROTECT = 1u << 1, /* leave the map writable between write transactions */
};
extern unsigned cache_tune;

/* The LMDB versions whose file format envfile.c and the store path know
 * (0.9.x: data format 1).  Checked at every open against the library milc
 * runs with (mdb_version) and the header it was built with. */
static inline int cache_lmdb_known(int major, int minor) { return major == 0 && minor == 9; }

/* snprintf into a fixed message buffer; NULL-safe. */
void cache_fmt(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Check data.mdb's two meta pages against the file before LMDB maps it (LMDB
 * trusts them and would fault on a truncated file).  0, or CACHE_ECORRUPT /
 * CACHE_EIO with a message naming the file and the cure. */
int cache_envfile_check(const char *path, const char *dir, char *err, size_t errlen);
/* Walk every B-tree of snapshot txnid with pread, bounds-checking what LMDB
 * would follow.  Call inside a read transaction of that txnid (which keeps its
 * pages from being reused).  0, CACHE_ECORRUPT (message as above), CACHE_EBUSY
 * (the snapshot's meta page was overwritten meanwhile: retry), CACHE_EIO. */
int cache_envfile_walk(const char *path, const char *dir, uint64_t txnid, char *err, size_t errlen);

#endif
