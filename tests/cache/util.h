/* util.h — helpers shared by the cache tests: scratch directories, a
 * deterministic byte pattern (so any process can check any entry's bytes
 * without talking to the writer), and artifact builders. */
#ifndef MILC_TEST_CACHE_UTIL_H
#define MILC_TEST_CACHE_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "milc/cache.h"

/* A fresh directory under $TMPDIR (or /tmp); caller frees and removes it. */
static inline char *tmpdir_new(const char *tag) {
    const char *base = getenv("TMPDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/milc-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        exit(2);
    }
    return p;
}

static inline void tmpdir_rm(char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4200];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
            char *q = strdup(p);
            tmpdir_rm(q);
        } else
            unlink(p);
    }
    if (d) closedir(d);
    rmdir(dir);
    free(dir);
}

/* splitmix64: byte i of stream `seed` is a pure function of (seed, i). */
static inline uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
static inline void pattern_fill(uint8_t *p, size_t n, uint64_t seed) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = mix64(seed ^ (i * 0x100000001B3ull));
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = mix64(seed ^ (i * 0x100000001B3ull));
        memcpy(p + i, &v, n - i);
    }
}
static inline int pattern_check(const uint8_t *p, size_t n, uint64_t seed) {
    uint8_t tmp[4096];
    for (size_t off = 0; off < n; off += sizeof tmp) {
        size_t m = n - off < sizeof tmp ? n - off : sizeof tmp;
        /* Regenerate the window; off is a multiple of 8, so words line up. */
        size_t i = 0;
        for (; i + 8 <= m; i += 8) {
            uint64_t v = mix64(seed ^ ((off + i) * 0x100000001B3ull));
            memcpy(tmp + i, &v, 8);
        }
        if (i < m) {
            uint64_t v = mix64(seed ^ ((off + i) * 0x100000001B3ull));
            memcpy(tmp + i, &v, m - i);
        }
        if (memcmp(tmp, p + off, m) != 0) return 0;
    }
    return 1;
}

/* An artifact of n sections with the given sizes; section i has seed
 * (seed * 1000 + i).  Free with art_free. */
typedef struct TestArt {
    CacheSection secs[64];
    int n;
    CacheKeyBuilder rec;
    CacheKey key;
} TestArt;

static inline void art_make(TestArt *a, uint64_t seed, const uint64_t *sizes, int n) {
    a->n = n;
    for (int i = 0; i < n; i++) {
        uint8_t *p = malloc(sizes[i] ? sizes[i] : 1);
        pattern_fill(p, sizes[i], seed * 1000 + i);
        a->secs[i] = (CacheSection){p, sizes[i]};
    }
    ckey_init(&a->rec);
    ckey_add_u64(&a->rec, 0x5645524Bu /* KREV */, 1);
    ckey_add_u64(&a->rec, 0x44454553u /* SEED */, seed);
    ckey_add_u64(&a->rec, 0x4E534543u /* NSEC */, (uint64_t)n);
    ckey_finish(&a->rec, &a->key);
}

static inline void art_free(TestArt *a) {
    for (int i = 0; i < a->n; i++) free((void *)a->secs[i].data);
    ckey_free(&a->rec);
}

static inline int art_put(Cache *c, TestArt *a, const char *desc) {
    CacheEntryMeta m = {.description = desc, .backend = "cpu", .mode = 2, .compile_ns = 1000};
    return cache_put(c, &a->key, a->rec.buf, a->rec.len, &m, a->secs, a->n);
}

/* Does hit h hold exactly artifact (seed, sizes)? */
static inline int hit_matches(CacheHit *h, uint64_t seed, const uint64_t *sizes, int n) {
    const CacheSection *s;
    int ns;
    if (cache_hit_sections(h, &s, &ns) != 0 || ns != n) return 0;
    for (int i = 0; i < n; i++) {
        if (s[i].size != sizes[i] || ((uintptr_t)s[i].data & 15)) return 0;
        if (!pattern_check(s[i].data, s[i].size, seed * 1000 + i)) return 0;
    }
    return 1;
}

static inline uint64_t file_bytes(const char *dir, const char *name) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Disk space a file takes (data.mdb is sparse: as long as the map). */
static inline uint64_t disk_bytes(const char *dir, const char *name) {
    char p[8400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_blocks * 512 : 0;
}

/* Bytes of data.mdb in use: pages up to last_pg of the newer meta page
 * (LMDB 0.9 layout, 4 KiB pages: last_pg at 16 + 120, txnid at 16 + 128). */
static inline uint64_t used_bytes(const char *dir) {
    char p[4200 + 16];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    FILE *f = fopen(p, "rb");
    uint8_t m[2][4096];
    int ok = f && fread(m, 1, sizeof m, f) == sizeof m;
    if (f) fclose(f);
    if (!ok) return 0;
    uint64_t last[2], txn[2];
    for (int i = 0; i < 2; i++) memcpy(&last[i], m[i] + 136, 8), memcpy(&txn[i], m[i] + 144, 8);
    return (last[txn[1] > txn[0]] + 1) * 4096;
}

#endif
