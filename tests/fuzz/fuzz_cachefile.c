/* fuzz_cachefile.c — libFuzzer target: arbitrary bytes as a cache's LMDB
 * data file.  Opening it, listing, looking every listed key up (with and
 * without the checksum), reading the sections and verifying must end in a
 * result or an error code — never a crash.  This is the "damaged cache file"
 * case of tests/torture/corrupt.sh, in process and coverage-guided.  LMDB
 * itself keeps no page checksums; what this target reaches past cache_open's
 * meta-page checks measures how far a damaged file can get.  A request note
 * is read back too (seed note.mdb has one). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "milc/assert.h"
#include "milc/cache.h"

static char dir[64], data[96];

static void cleanup(void) {
    char p[128];
    const char *files[] = {"data.mdb", "lock.mdb", "milc.lock", "data.mdb.compact", "milc.stamp"};
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        unlink(p);
    }
    rmdir(dir);
}

typedef struct Keys {
    CacheKey k[32];
    int n;
} Keys;

static int collect(void *ctx, const CacheEntryInfo *e) {
    Keys *ks = ctx;
    volatile size_t sink = strlen(e->description) + strlen(e->backend);
    (void)sink;
    if (ks->n < 32) ks->k[ks->n++] = e->key;
    return 0;
}

static void read_entry(Cache *c, const CacheKey *k, unsigned flags) {
    CacheHit *h;
    if (cache_get(c, k, NULL, 0, flags, &h) != 0) return;
    const CacheSection *secs;
    int n;
    if (cache_hit_sections(h, &secs, &n) == 0) {
        volatile uint8_t sink = 0;
        for (int i = 0; i < n; i++)
            if (secs[i].size)
                sink ^= ((const uint8_t *)secs[i].data)[0] ^ ((const uint8_t *)secs[i].data)[secs[i].size - 1];
        (void)sink;
    }
    cache_hit_release(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *bytes, size_t size) {
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/milc-fuzz-cachefile-XXXXXX");
        MILC_ASSERT(mkdtemp(dir) != NULL);
        snprintf(data, sizeof data, "%s/data.mdb", dir);
        atexit(cleanup);
    }
    cleanup();
    MILC_ASSERT(mkdir(dir, 0700) == 0);
    FILE *f = fopen(data, "wb");
    MILC_ASSERT(f != NULL);
    if (size) MILC_ASSERT(fwrite(bytes, 1, size, f) == size);
    fclose(f);

    Cache *c;
    char err[256];
    CacheOptions o = {.map_size = 4u << 20, .no_sync = 1};
    if (cache_open(&c, dir, &o, err, sizeof err) != 0) return 0;
    Keys ks = {.n = 0};
    cache_ls(c, collect, &ks);
    CacheStats st;
    cache_stat(c, &st);
    for (int i = 0; i < ks.n; i++) {
        read_entry(c, &ks.k[i], CACHE_GET_NOTOUCH);
        read_entry(c, &ks.k[i], CACHE_GET_VERIFY);
    }
    /* A note under the key the seed `note.mdb` stores one at: its value is
     * copied out whole, so a damaged length shows here. */
    CacheKey nk;
    cache_key_of("fuzz-note", 9, &nk);
    void *v;
    size_t n;
    if (cache_note_get(c, &nk, "fuzz-note", 9, &v, &n) == 0) {
        volatile uint8_t sink = n ? ((const uint8_t *)v)[0] ^ ((const uint8_t *)v)[n - 1] : 0;
        (void)sink;
        free(v);
    }
    cache_verify(c, 0, NULL, NULL);
    cache_close(c);
    return 0;
}
