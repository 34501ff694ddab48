/* checksum.c — the entry checksum (cache/README.md, "Checksums"):
 *
 *     XXH3-128( for each section: u64 LE size ‖ XXH3-128(section bytes) )
 *
 * with every XXH3-128 in canonical (big-endian) byte order.  Each section
 * hashes on its own, so verifying a hit runs on every core: one core reads
 * about 30 GB/s from DRAM, and the checksum is most of a verified hit. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache_impl.h"
#include "milc/ossys.h"

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14 */
#endif

/* A thread for every this many bytes, at most MAX_THREADS: below a few MB
 * starting a thread costs more than it saves. */
enum { BYTES_PER_THREAD = 8 << 20, MAX_THREADS = 8, POPULATE_MIN = 64 << 10 };

void cache_checksum_add(XXH3_state_t *outer, uint64_t size, const uint8_t digest[16]) {
    uint8_t rec[24];
    st64(rec, size);
    memcpy(rec + 8, digest, 16);
    XXH3_128bits_update(outer, rec, sizeof rec);
}

void cache_checksum_digest(XXH3_state_t *st, uint8_t out[16]) {
    XXH128_canonical_t cn;
    XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(st));
    memcpy(out, cn.digest, 16);
}

typedef struct {
    const CachePiece *pieces;
    const uint32_t *first;
    uint8_t (*dig)[16];
    long psize;      /* > 0: map the pages of large pieces in one call each first */
    uint32_t s0, s1; /* this thread's sections */
} DigestJob;

/* Each thread takes a contiguous run of sections: two threads mapping pages
 * of the same 2 MB region contend for its page-table lock. */
static void *digest_worker(void *arg) {
    DigestJob *j = arg;
    for (uint32_t i = j->s0; i < j->s1; i++) {
        XXH3_state_t st;
        XXH3_128bits_reset(&st);
        for (uint32_t p = j->first[i]; p < j->first[i + 1]; p++) {
            const CachePiece *pc = &j->pieces[p];
            if (j->psize > 0 && pc->size >= POPULATE_MIN) {
                /* A fault per page (or per 16) costs more than the hash of
                 * it; one call maps them all.  Best effort. */
                uintptr_t a = (uintptr_t)pc->data & ~(uintptr_t)(j->psize - 1);
                size_t n = (size_t)((uintptr_t)pc->data + pc->size - a);
                if (madvise((void *)a, n, MADV_POPULATE_READ) != 0 && errno == EINVAL)
                    madvise((void *)a, n, MADV_WILLNEED);
            }
            if (pc->size) XXH3_128bits_update(&st, pc->data, (size_t)pc->size);
        }
        XXH128_canonical_t cn;
        XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(&st));
        memcpy(j->dig[i], cn.digest, 16);
    }
    return NULL;
}

/* digests[i] = canonical XXH3-128 of section i, on as many threads as the
 * bytes are worth. */
static void digest_sections(const CachePiece *pieces, const uint32_t *first, uint32_t nsec, int populate,
                            uint8_t (*digests)[16]) {
    uint64_t bytes = 0;
    for (uint32_t p = 0; p < first[nsec]; p++) bytes += pieces[p].size;
    long cpus = os_cpu_count();
    uint64_t want = bytes / BYTES_PER_THREAD, have = cpus > 0 ? (uint64_t)cpus : 1;
    int nth = (int)(want < have ? want : have);
    if (nth > MAX_THREADS) nth = MAX_THREADS;
    if (nth > (int)nsec) nth = (int)nsec;
    if (nth < 1) nth = 1;
    DigestJob jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    long psize = populate ? sysconf(_SC_PAGESIZE) : 0;
    /* Cut the sections into nth runs of about equal bytes. */
    uint64_t acc = 0;
    uint32_t s = 0;
    for (int t = 0; t < nth; t++) {
        jobs[t] = (DigestJob){pieces, first, digests, psize, s, s};
        uint64_t end = bytes / (uint64_t)nth * (uint64_t)(t + 1);
        while (s < nsec && (t == nth - 1 || acc < end)) {
            for (uint32_t p = first[s]; p < first[s + 1]; p++) acc += pieces[p].size;
            s++;
        }
        jobs[t].s1 = s;
    }
    /* The caller's thread runs the first run; a run whose thread cannot
     * start runs on the caller's thread too. */
    for (int t = 1; t < nth; t++) started[t] = pthread_create(&th[t], NULL, digest_worker, &jobs[t]) == 0;
    digest_worker(&jobs[0]);
    for (int t = 1; t < nth; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            digest_worker(&jobs[t]);
    }
}

int cache_pieces_checksum(const CachePiece *pieces, const uint32_t *first, uint32_t nsec, int populate,
                          uint8_t out[16]) {
    uint8_t(*dig)[16] = malloc((nsec ? nsec : 1) * 16);
    if (!dig) return CACHE_ENOMEM;
    digest_sections(pieces, first, nsec, populate, dig);
    XXH3_state_t st;
    XXH3_128bits_reset(&st);
    for (uint32_t i = 0; i < nsec; i++) {
        uint64_t size = 0;
        for (uint32_t p = first[i]; p < first[i + 1]; p++) size += pieces[p].size;
        cache_checksum_add(&st, size, dig[i]);
    }
    cache_checksum_digest(&st, out);
    free(dig);
    return 0;
}

int cache_sections_checksum(const CacheSection *secs, int n, uint8_t out[16]) {
    CachePiece *pieces = malloc((size_t)(n ? n : 1) * sizeof *pieces);
    uint32_t *first = malloc((size_t)(n + 1) * sizeof *first);
    int rc = CACHE_ENOMEM;
    if (pieces && first) {
        for (int i = 0; i < n; i++) pieces[i] = (CachePiece){secs[i].data, secs[i].size}, first[i] = (uint32_t)i;
        first[n] = (uint32_t)n;
        rc = cache_pieces_checksum(pieces, first, (uint32_t)n, 0, out);
    }
    free(pieces), free(first);
    return rc;
}
