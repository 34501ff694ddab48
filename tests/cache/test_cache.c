/* test_cache.c — the store in one process: put/get round trips over many
 * section shapes (alignment, chunking, zero-copy), misses and record
 * mismatches, direct keys, statistics, ls/show/rm/clear, LRU eviction order,
 * the size limit, age-based gc, map growth and compaction. */
#include "test.h"
#include "util.h"

#include <sys/mman.h>

/* A clock the tests advance by hand: 1 s per reading. */
static uint64_t fake_now;
static uint64_t fake_clock(void *ctx) { return fake_now += 1000000000ull; }

static Cache *open_whole(const char *dir, uint64_t chunk, uint64_t whole, uint64_t map, uint64_t max_bytes) {
    CacheOptions o = {.chunk_bytes = chunk,
                      .whole_bytes = whole,
                      .map_size = map,
                      .max_bytes = max_bytes,
                      .no_sync = 1,
                      .now_ns = fake_clock};
    Cache *c = NULL;
    char err[512] = "";
    int rc = cache_open(&c, dir, &o, err, sizeof err);
    if (rc) fprintf(stderr, "cache_open: %s: %s\n", cache_strerror(rc), err);
    return c;
}

static Cache *open_dir(const char *dir, uint64_t chunk, uint64_t map, uint64_t max_bytes) {
    return open_whole(dir, chunk, 0, map, max_bytes);
}

TEST(open_creates_dir_0700_with_parents) {
    char *dir = tmpdir_new("open");
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/a/b/cache", dir);
    Cache *c = open_dir(sub, 0, 0, 0);
    CHECK(c != NULL);
    struct stat st;
    CHECK(stat(sub, &st) == 0 && (st.st_mode & 0777) == 0700);
    CHECK(file_bytes(sub, "data.mdb") > 0);
    cache_close(c);
    tmpdir_rm(dir);
}

/* Two hits of section i of a: zero-copy (the same address in the map each
 * time) or a private copy per hit.  1 if as expected. */
static int zero_copy_is(Cache *c, const TestArt *a, int i, int expect) {
    CacheHit *h1 = NULL, *h2 = NULL;
    const CacheSection *s1, *s2;
    int n1, n2, ok = 0;
    if (cache_get(c, &a->key, NULL, 0, 0, &h1) == 0 && cache_get(c, &a->key, NULL, 0, 0, &h2) == 0 &&
        cache_hit_sections(h1, &s1, &n1) == 0 && cache_hit_sections(h2, &s2, &n2) == 0)
        ok = (s1[i].data == s2[i].data) == expect && memcmp(s1[i].data, s2[i].data, (size_t)s1[i].size) == 0;
    cache_hit_release(h1), cache_hit_release(h2);
    if (!ok) fprintf(stderr, "section %d: expected %s\n", i, expect ? "zero-copy" : "a copy");
    return ok;
}

/* Shapes that exercise the layout: empty sections, odd sizes, sections that
 * fill a value exactly, and sections larger than a value, stored under
 * whole_bytes = whole: in a value of their own (whole 0, the default), split
 * over several values (whole = chunk: the layout of older milcs, which every
 * milc reads), or both in one entry (whole = 2 chunks). */
static void round_trip_shapes(const char *name, uint64_t whole) {
    char *dir = tmpdir_new(name);
    const uint64_t chunk = 64 * 1024;
    Cache *c = open_whole(dir, chunk, whole, 0, 0);
    CHECK(c != NULL);
    if (!c) return;
    static const uint64_t shapes[][8] = {
        {0},
        {1},
        {5, 0, 7},
        {63, 64, 65},
        {2000},
        {chunk},
        {chunk - 64, 64},
        {chunk - 63, 64},
        {chunk + 1},
        {3 * chunk + 100, 5, chunk * 2},
        {10, chunk * 5 / 2, 10, 0, 1000},
    };
    static const int counts[] = {1, 1, 3, 3, 1, 1, 2, 2, 1, 3, 5};
    int nshapes = (int)(sizeof counts / sizeof counts[0]);
    TestArt arts[16];
    for (int s = 0; s < nshapes; s++) {
        art_make(&arts[s], 100 + s, shapes[s], counts[s]);
        CHECK_EQ_INT(art_put(c, &arts[s], "shape"), 0);
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int s = 0; s < nshapes; s++) {
            CacheHit *h = NULL;
            int rc = cache_get(c, &arts[s].key, arts[s].rec.buf, arts[s].rec.len, pass ? CACHE_GET_VERIFY : 0, &h);
            CHECK_EQ_INT(rc, 0);
            if (rc) continue;
            if (!hit_matches(h, 100 + s, shapes[s], counts[s])) {
                fprintf(stderr, "shape %d differs\n", s);
                CHECK(0);
            }
            const CacheEntryInfo *in = cache_hit_info(h);
            CHECK_STR(in->description, "shape");
            CHECK_STR(in->backend, "cpu");
            CHECK_EQ_INT(in->mode, 2);
            CHECK_EQ_INT(in->nsections, counts[s]);
            cache_hit_release(h);
        }
    }
    /* Zero-copy: a section within one value points into the map, so two hits
     * see the same address; a split section is a private copy per hit. */
    CHECK(zero_copy_is(c, &arts[3], 1, 1));
    CHECK(zero_copy_is(c, &arts[8], 0, whole != chunk));
    CHECK(zero_copy_is(c, &arts[9], 0, whole == 0));
    CHECK(zero_copy_is(c, &arts[9], 1, 1));
    CHECK(zero_copy_is(c, &arts[9], 2, whole != chunk));
    CHECK(zero_copy_is(c, &arts[10], 1, whole == 0));
    CacheHit *h = NULL;
    CHECK_EQ_INT(cache_get(c, &arts[9].key, NULL, 0, 0, &h), 0);
    CHECK(h && cache_hit_info(h)->copied == (whole == 0 ? 0u : whole == chunk ? 2u : 1u));
    cache_hit_release(h);
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    for (int s = 0; s < nshapes; s++) art_free(&arts[s]);
    cache_close(c);
    tmpdir_rm(dir);
}

TEST(round_trip_many_shapes_whole) { round_trip_shapes("shapes", 0); }
TEST(round_trip_many_shapes_split) { round_trip_shapes("shapes-split", 64 * 1024); }
TEST(round_trip_many_shapes_mixed) { round_trip_shapes("shapes-mixed", 2 * 64 * 1024); }

/* A cache holds entries of both layouts, each read as it was written: a
 * handle with the default whole_bytes reads the split entries an older milc
 * (or a small whole_bytes) left, and the other way round. */
TEST(layouts_mix_in_one_cache) {
    char *dir = tmpdir_new("layouts");
    const uint64_t chunk = 64 * 1024, sz[] = {10, 3 * chunk + 100, 5};
    TestArt a, b;
    art_make(&a, 41, sz, 3), art_make(&b, 42, sz, 3);
    Cache *c = open_whole(dir, chunk, chunk, 0, 0);
    CHECK(c != NULL && art_put(c, &a, "split") == 0);
    cache_close(c);
    c = open_whole(dir, chunk, 0, 0, 0);
    CHECK(c != NULL && art_put(c, &b, "whole") == 0);
    CHECK(zero_copy_is(c, &a, 1, 0) && zero_copy_is(c, &b, 1, 1));
    cache_close(c);
    c = open_whole(dir, chunk, chunk, 0, 0);
    CHECK(c != NULL);
    for (int v = 0; c && v < 2; v++) {
        CacheHit *h = NULL;
        const TestArt *t = v ? &b : &a;
        CHECK_EQ_INT(cache_get(c, &t->key, t->rec.buf, t->rec.len, CACHE_GET_VERIFY, &h), 0);
        CHECK(h && hit_matches(h, 41 + (uint64_t)v, sz, 3));
        cache_hit_release(h);
    }
    CHECK(zero_copy_is(c, &b, 1, 1));
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    cache_close(c);
    art_free(&a), art_free(&b);
    tmpdir_rm(dir);
}

TEST(miss_mismatch_and_replace) {
    char *dir = tmpdir_new("miss");
    Cache *c = open_dir(dir, 0, 0, 0);
    uint64_t sz[] = {1000, 3000};
    TestArt a;
    art_make(&a, 7, sz, 2);
    CacheHit *h = (CacheHit *)1;
    CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, 0, &h), CACHE_ENOTFOUND);
    CHECK(h == NULL);
    CHECK_EQ_INT(art_put(c, &a, "x"), 0);
    /* Same key, different record: a miss, never the wrong artifact. */
    uint8_t other[64];
    memcpy(other, a.rec.buf, a.rec.len);
    other[a.rec.len - 1] ^= 1;
    CHECK_EQ_INT(cache_get(c, &a.key, other, a.rec.len, 0, &h), CACHE_EMISMATCH);
    CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len - 1, 0, &h), CACHE_EMISMATCH);
    CHECK(strstr(cache_errmsg(c), "key record") != NULL);
    /* Replacing an entry (a rebuild) gives the new bytes. */
    uint64_t sz2[] = {50};
    TestArt b;
    art_make(&b, 8, sz2, 1);
    CacheEntryMeta m = {.description = "new"};
    CHECK_EQ_INT(cache_put(c, &a.key, a.rec.buf, a.rec.len, &m, b.secs, 1), 0);
    CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, CACHE_GET_VERIFY, &h), 0);
    CHECK(hit_matches(h, 8, sz2, 1));
    CHECK_STR(cache_hit_info(h)->description, "new");
    cache_hit_release(h);
    CacheStats st;
    cache_stat(c, &st);
    CHECK_EQ_INT(st.entries, 1);
    CHECK_EQ_INT(st.bytes, 50);
    CHECK_EQ_INT(st.misses, 3);
    CHECK_EQ_INT(st.hits, 1);
    art_free(&a), art_free(&b);
    cache_close(c);
    tmpdir_rm(dir);
}

TEST(direct_keys_and_stats) {
    char *dir = tmpdir_new("direct");
    Cache *c = open_dir(dir, 0, 0, 0);
    uint64_t sz[] = {4096};
    TestArt a;
    art_make(&a, 9, sz, 1);
    CacheEntryMeta m = {.description = "gpt2 L4", .backend = "cpu", .mode = 1, .compile_ns = 250000000};
    CHECK_EQ_INT(cache_put(c, &a.key, a.rec.buf, a.rec.len, &m, a.secs, 1), 0);
    CacheKeyBuilder d;
    ckey_init(&d);
    ckey_add_str(&d, 1, "template bytes + params");
    CacheKey dk, ak;
    ckey_finish(&d, &dk);
    CacheHit *h;
    CHECK_EQ_INT(cache_get_direct(c, &dk, d.buf, d.len, 0, &h, &ak), CACHE_ENOTFOUND);
    CHECK_EQ_INT(cache_direct_put(c, &dk, d.buf, d.len, &a.key), 0);
    CHECK_EQ_INT(cache_get_direct(c, &dk, d.buf, d.len, CACHE_GET_VERIFY, &h, &ak), 0);
    CHECK(memcmp(ak.b, a.key.b, 16) == 0);
    CHECK(hit_matches(h, 9, sz, 1));
    cache_hit_release(h);
    CHECK_EQ_INT(cache_get_direct(c, &dk, d.buf, d.len - 1, 0, &h, NULL), CACHE_EMISMATCH);
    CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, 0, &h), 0);
    cache_hit_release(h);
    CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, CACHE_GET_NOTOUCH, &h), 0);
    cache_hit_release(h);
    CacheStats st;
    CHECK_EQ_INT(cache_stat(c, &st), 0); /* pending counts are included */
    CHECK_EQ_INT(st.direct_hits, 1);
    CHECK_EQ_INT(st.hits, 1);
    CHECK_EQ_INT(st.misses, 0);
    CHECK_EQ_INT(st.saved_ns, 500000000);
    cache_close(c);
    /* And they were written at close: a new handle sees them, and the entry's
     * hit count and last-used time. */
    c = open_dir(dir, 0, 0, 0);
    cache_stat(c, &st);
    CHECK_EQ_INT(st.direct_hits, 1);
    CHECK_EQ_INT(st.hits, 1);
    CHECK_EQ_INT(st.entries, 1);
    CHECK_EQ_INT(st.bytes, 4096);
    CHECK_EQ_INT(cache_get(c, &a.key, NULL, 0, CACHE_GET_NOTOUCH, &h), 0);
    CHECK_EQ_INT(cache_hit_info(h)->hits, 2);
    CHECK(cache_hit_info(h)->last_used_ns > cache_hit_info(h)->created_ns);
    cache_hit_release(h);
    CHECK_EQ_INT(cache_zero_stats(c), 0);
    cache_stat(c, &st);
    CHECK(st.hits == 0 && st.direct_hits == 0 && st.saved_ns == 0 && st.entries == 1);
    ckey_free(&d);
    art_free(&a);
    cache_close(c);
    tmpdir_rm(dir);
}

TEST(notes) {
    /* A note comes back byte for byte under its record; another record under
     * the key is a mismatch; it is no entry (ls, stat) and clear drops it. */
    char *dir = tmpdir_new("notes");
    Cache *c = open_dir(dir, 0, 0, 0);
    CacheKeyBuilder r;
    ckey_init(&r);
    ckey_add_str(&r, 7, "request");
    CacheKey k;
    ckey_finish(&r, &k);
    void *v;
    size_t n;
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len, &v, &n), CACHE_ENOTFOUND);
    CHECK(v == NULL && n == 0);
    static const char val[] = "three keys\0and labels";
    CHECK_EQ_INT(cache_note_put(c, &k, r.buf, r.len, val, sizeof val), 0);
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len, &v, &n), 0);
    CHECK(n == sizeof val && v && memcmp(v, val, n) == 0);
    free(v);
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len - 1, &v, &n), CACHE_EMISMATCH);
    CHECK(v == NULL);
    CHECK_EQ_INT(cache_note_put(c, &k, r.buf, r.len, NULL, 0), 0); /* replaced; an empty value is a value */
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len, &v, &n), 0);
    CHECK(n == 0 && v != NULL);
    free(v);
    CHECK_EQ_INT(cache_note_put(c, &k, r.buf, r.len, val, (size_t)CACHE_NOTE_MAX + 1), CACHE_EINVAL);
    CacheStats st;
    CHECK_EQ_INT(cache_stat(c, &st), 0);
    CHECK_EQ_INT(st.entries, 0);
    cache_close(c);
    c = open_dir(dir, 0, 0, 0); /* it was committed */
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len, &v, &n), 0);
    free(v);
    CHECK_EQ_INT(cache_clear(c), 0);
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len, &v, &n), CACHE_ENOTFOUND);
    CHECK_EQ_INT(cache_note_put(c, &k, r.buf, r.len, val, sizeof val), 0);
    CacheGcReport g;
    CHECK_EQ_INT(cache_gc(c, 0, 0, 0, &g), 0); /* gc forgets notes too */
    CHECK_EQ_INT(cache_note_get(c, &k, r.buf, r.len, &v, &n), CACHE_ENOTFOUND);
    ckey_free(&r);
    cache_close(c);
    tmpdir_rm(dir);
}

typedef struct LsAcc {
    int n;
    char desc[8][32];
    uint8_t rec[256];
    size_t rec_len;
} LsAcc;

static int ls_cb(void *ctx, const CacheEntryInfo *e) {
    LsAcc *a = ctx;
    if (a->n < 8) snprintf(a->desc[a->n], 32, "%s", e->description);
    if (e->record_len <= sizeof a->rec) memcpy(a->rec, e->record, e->record_len), a->rec_len = e->record_len;
    a->n++;
    return 0;
}

TEST(ls_show_rm_clear) {
    char *dir = tmpdir_new("ls");
    Cache *c = open_dir(dir, 0, 0, 0);
    uint64_t sz[] = {100};
    TestArt a[3];
    for (int i = 0; i < 3; i++) {
        char d[16];
        snprintf(d, sizeof d, "e%d", i);
        art_make(&a[i], 20 + i, sz, 1);
        CHECK_EQ_INT(art_put(c, &a[i], d), 0);
    }
    LsAcc acc = {0};
    CHECK_EQ_INT(cache_ls(c, ls_cb, &acc), 0);
    CHECK_EQ_INT(acc.n, 3);
    memset(&acc, 0, sizeof acc);
    CHECK_EQ_INT(cache_show(c, &a[1].key, ls_cb, &acc), 0);
    CHECK_EQ_INT(acc.n, 1);
    CHECK_STR(acc.desc[0], "e1");
    CHECK(acc.rec_len == a[1].rec.len && memcmp(acc.rec, a[1].rec.buf, acc.rec_len) == 0);
    CHECK_EQ_INT(cache_rm(c, &a[1].key), 0);
    CHECK_EQ_INT(cache_rm(c, &a[1].key), CACHE_ENOTFOUND);
    CHECK_EQ_INT(cache_show(c, &a[1].key, ls_cb, &acc), CACHE_ENOTFOUND);
    CacheHit *h;
    CHECK_EQ_INT(cache_get(c, &a[1].key, NULL, 0, 0, &h), CACHE_ENOTFOUND);
    CacheStats st;
    cache_stat(c, &st);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.bytes, 200);
    CHECK_EQ_INT(cache_clear(c), 0);
    cache_stat(c, &st);
    CHECK(st.entries == 0 && st.bytes == 0 && st.hits == 0 && st.misses == 0);
    memset(&acc, 0, sizeof acc);
    cache_ls(c, ls_cb, &acc);
    CHECK_EQ_INT(acc.n, 0);
    for (int i = 0; i < 3; i++) art_free(&a[i]);
    cache_close(c);
    tmpdir_rm(dir);
}

static int present(Cache *c, TestArt *a) {
    CacheHit *h;
    if (cache_get(c, &a->key, NULL, 0, CACHE_GET_NOTOUCH, &h) != 0) return 0;
    cache_hit_release(h);
    return 1;
}

/* Eviction follows last use, not creation: touch the oldest entry and it
 * survives while the next-oldest goes. */
TEST(size_limit_evicts_lru) {
    char *dir = tmpdir_new("lru");
    Cache *c = open_dir(dir, 0, 0, 0);
    CHECK_EQ_INT(cache_set_limit(c, 350000), 0);
    uint64_t sz[] = {100000};
    TestArt a[5];
    for (int i = 0; i < 3; i++) {
        art_make(&a[i], 30 + i, sz, 1);
        CHECK_EQ_INT(art_put(c, &a[i], "lru"), 0);
    }
    CacheHit *h;
    CHECK_EQ_INT(cache_get(c, &a[0].key, NULL, 0, 0, &h), 0); /* 0 is now most recent */
    cache_hit_release(h);
    art_make(&a[3], 33, sz, 1);
    CHECK_EQ_INT(art_put(c, &a[3], "lru"), 0); /* 400000 > 350000: evict one */
    CHECK(present(c, &a[0]) && !present(c, &a[1]) && present(c, &a[2]) && present(c, &a[3]));
    art_make(&a[4], 34, sz, 1);
    CHECK_EQ_INT(art_put(c, &a[4], "lru"), 0);
    CHECK(present(c, &a[0]) && !present(c, &a[2]) && present(c, &a[3]) && present(c, &a[4]));
    CacheStats st;
    cache_stat(c, &st);
    CHECK_EQ_INT(st.entries, 3);
    CHECK_EQ_INT(st.bytes, 300000);
    CHECK_EQ_INT(st.max_bytes, 350000);
    /* gc down to 150000 keeps only the most recent (a[4]). */
    CacheGcReport r;
    CHECK_EQ_INT(cache_gc(c, 150000, 0, 0, &r), 0);
    CHECK_EQ_INT(r.evicted, 2);
    CHECK_EQ_INT(r.evicted_bytes, 200000);
    CHECK(!present(c, &a[0]) && !present(c, &a[3]) && present(c, &a[4]));
    for (int i = 0; i < 5; i++) art_free(&a[i]);
    cache_close(c);
    tmpdir_rm(dir);
}

TEST(gc_by_age_then_compact_shrinks_file) {
    char *dir = tmpdir_new("gc");
    Cache *c = open_dir(dir, 0, 0, 0);
    uint64_t sz[] = {2 << 20, 1 << 20};
    TestArt a[6];
    for (int i = 0; i < 6; i++) {
        art_make(&a[i], 40 + i, sz, 2);
        CHECK_EQ_INT(art_put(c, &a[i], "gc"), 0);
    }
    /* Each clock reading adds a second; age 0..5 entries are 6..1 readings old
     * at gc time.  max_age 3 s keeps those used within the last 3 readings. */
    CacheGcReport r;
    CHECK_EQ_INT(cache_gc(c, 0, 3, 1, &r), 0);
    CHECK_EQ_INT(r.evicted, 3);
    CHECK_EQ_INT(r.compacted, 1);
    CHECK(r.file_after < r.file_before / 2 + 1024 * 1024);
    CHECK_EQ_INT(disk_bytes(dir, "data.mdb"), r.file_after);
    CacheStats st;
    CHECK_EQ_INT(cache_stat(c, &st), 0);
    CHECK_EQ_INT(st.file_bytes, r.file_after);
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(present(c, &a[i]), i >= 3);
    /* The handle keeps working after compaction reopened it. */
    CacheHit *h;
    CHECK_EQ_INT(cache_get(c, &a[5].key, a[5].rec.buf, a[5].rec.len, CACHE_GET_VERIFY, &h), 0);
    CHECK(hit_matches(h, 45, sz, 2));
    /* No gc while a hit is live. */
    CHECK_EQ_INT(cache_gc(c, 0, 0, 1, &r), CACHE_EBUSY);
    cache_hit_release(h);
    CHECK_EQ_INT(art_put(c, &a[0], "again"), 0);
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    for (int i = 0; i < 6; i++) art_free(&a[i]);
    cache_close(c);
    tmpdir_rm(dir);
}

TEST(map_grows_when_full) {
    char *dir = tmpdir_new("grow");
    Cache *c = open_dir(dir, 1 << 20, 1 << 20, 0); /* 1 MiB map */
    uint64_t sz[] = {3 << 20, 100, 5 << 19};
    TestArt a[4];
    for (int i = 0; i < 4; i++) {
        art_make(&a[i], 50 + i, sz, 3);
        CHECK_EQ_INT(art_put(c, &a[i], "grow"), 0);
    }
    CacheStats st;
    cache_stat(c, &st);
    CHECK(st.map_bytes >= 4 * (uint64_t)(11 << 19));
    for (int i = 0; i < 4; i++) {
        CacheHit *h;
        CHECK_EQ_INT(cache_get(c, &a[i].key, a[i].rec.buf, a[i].rec.len, CACHE_GET_VERIFY, &h), 0);
        CHECK(hit_matches(h, 50 + i, sz, 3));
        /* While a hit is live the map may not move: a put that needs growth
         * fails cleanly instead of invalidating the hit's pointers. */
        if (i == 3) {
            uint64_t big[] = {st.map_bytes};
            TestArt b;
            art_make(&b, 59, big, 1);
            CHECK_EQ_INT(art_put(c, &b, "too big"), CACHE_EFULL);
            CHECK(hit_matches(h, 50 + i, sz, 3));
            art_free(&b);
        }
        cache_hit_release(h);
    }
    for (int i = 0; i < 4; i++) art_free(&a[i]);
    cache_close(c);
    tmpdir_rm(dir);
}

TEST(bad_arguments) {
    char *dir = tmpdir_new("args");
    Cache *c = NULL;
    char err[256];
    CHECK_EQ_INT(cache_open(&c, "", NULL, err, sizeof err), CACHE_EINVAL);
    char file[4200];
    snprintf(file, sizeof file, "%s/plain", dir);
    FILE *f = fopen(file, "w");
    fclose(f);
    CHECK_EQ_INT(cache_open(&c, file, NULL, err, sizeof err), CACHE_EIO);
    CHECK(strstr(err, "plain") != NULL);
    c = open_dir(dir, 0, 0, 0);
    CacheKey k = {{0}};
    CacheSection s = {NULL, 10};
    CHECK_EQ_INT(cache_put(c, &k, NULL, 0, NULL, &s, 1), CACHE_EINVAL);
    CHECK_EQ_INT(cache_put(c, &k, NULL, 0, NULL, NULL, -1), CACHE_EINVAL);
    CHECK_EQ_INT(cache_put(c, &k, NULL, 0, NULL, NULL, 0), 0); /* an empty artifact is fine */
    CacheHit *h;
    CHECK_EQ_INT(cache_get(c, &k, NULL, 0, CACHE_GET_VERIFY, &h), 0);
    const CacheSection *ss;
    int n = -1;
    cache_hit_sections(h, &ss, &n);
    CHECK_EQ_INT(n, 0);
    CHECK_STR(cache_hit_info(h)->description, "");
    cache_hit_release(h);
    cache_close(c);
    tmpdir_rm(dir);
}

/* A put whose bytes come from a fill (cache_put_ex): handed out in order,
 * each byte once, landing where a plain put puts them; the staging halves
 * alternate under fill_sync; a fill's failure aborts with its code and
 * stores nothing; so does a failed fill_sync at the commit. */
typedef struct {
    const TestArt *a;
    int sec;
    uint64_t off, handed, fail_at;
    int reuse, commit, abort_, commit_rc;
    const uint8_t *last_dst[2];
} Fill;

static int fill_fn(void *ctx, uint8_t *dst, uint64_t n) {
    Fill *f = ctx;
    if (f->fail_at && f->handed + n > f->fail_at) return CACHE_ECORRUPT;
    for (uint64_t done = 0; done < n;) {
        while (f->off == f->a->secs[f->sec].size) f->sec++, f->off = 0;
        uint64_t k = f->a->secs[f->sec].size - f->off < n - done ? f->a->secs[f->sec].size - f->off : n - done;
        memcpy(dst + done, (const uint8_t *)f->a->secs[f->sec].data + f->off, (size_t)k);
        done += k, f->off += k;
    }
    f->handed += n;
    return 0;
}

static int fill_sync_fn(void *ctx, int when) {
    Fill *f = ctx;
    if (when == CACHE_FILL_REUSE) f->reuse++;
    if (when == CACHE_FILL_COMMIT) return f->commit++, f->commit_rc;
    if (when == CACHE_FILL_ABORT) f->abort_++;
    return 0;
}

/* A fresh unsynced cache in a new directory *dir, with WRITEMAP unless
 * nowm; NULL (the directory gone) if it cannot be opened. */
static Cache *open_fresh(const char *name, int nowm, char **dir) {
    char err[512];
    Cache *c = NULL;
    *dir = tmpdir_new(name);
    CHECK_EQ_INT(cache_open(&c, *dir, &(CacheOptions){.no_sync = 1, .no_writemap = nowm}, err, sizeof err), 0);
    if (!c) tmpdir_rm(*dir);
    return c;
}

TEST(put_from_a_fill) {
    for (int wm = 0; wm < 2; wm++) {
        char *dir;
        Cache *c = open_fresh("fill", wm, &dir);
        if (!c) continue;
        uint64_t sz[] = {5000001, 3, 0, 700000};
        TestArt a;
        art_make(&a, 4242 + (uint64_t)wm, sz, 4);
        CacheSection secs[4];
        for (int i = 0; i < 4; i++) secs[i] = (CacheSection){NULL, sz[i]};
        Fill f = {.a = &a};
        CachePutOptions po = {.fill = fill_fn, .fill_sync = fill_sync_fn, .fill_ctx = &f};
        CHECK_EQ_INT(cache_put_ex(c, &a.key, a.rec.buf, a.rec.len, NULL, secs, 4, &po), 0);
        CHECK(f.handed == 5000001 + 3 + 700000 && f.commit == 1 && f.abort_ == 0);
        CHECK(wm || f.reuse >= 3); /* 5.7 MB through 2 MB halves with WRITEMAP */
        CacheHit *h = NULL;
        CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, CACHE_GET_VERIFY, &h), 0);
        if (h) {
            CHECK(hit_matches(h, 4242 + (uint64_t)wm, sz, 4));
            cache_hit_release(h);
        }
        /* A failing fill: its code, nothing stored (the old entry stays). */
        TestArt b;
        art_make(&b, 5252, sz, 4);
        Fill g = {.a = &b, .fail_at = 3000000};
        po.fill_ctx = &g;
        CHECK_EQ_INT(cache_put_ex(c, &b.key, b.rec.buf, b.rec.len, NULL, secs, 4, &po), CACHE_ECORRUPT);
        CHECK(g.commit == 0 && g.abort_ == 1);
        CHECK_EQ_INT(cache_get(c, &b.key, b.rec.buf, b.rec.len, 0, &h), CACHE_ENOTFOUND);
        /* A commit refused by fill_sync: the same. */
        Fill k = {.a = &b, .commit_rc = CACHE_ECORRUPT};
        po.fill_ctx = &k;
        CHECK_EQ_INT(cache_put_ex(c, &b.key, b.rec.buf, b.rec.len, NULL, secs, 4, &po), CACHE_ECORRUPT);
        CHECK(k.commit == 1 && k.abort_ == 1);
        CHECK_EQ_INT(cache_get(c, &b.key, b.rec.buf, b.rec.len, 0, &h), CACHE_ENOTFOUND);
        CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, CACHE_GET_VERIFY, &h), 0);
        if (h) cache_hit_release(h);
        art_free(&a), art_free(&b);
        cache_close(c);
        tmpdir_rm(dir);
    }
}

/* CACHE_PUT_CONSUME: the entry is the caller's bytes, and the caller's
 * memory is handed back as it is copied (whole pages: an interior page of
 * a section reads as zeros after the put), with and without WRITEMAP. */
static void count_consumed(void *ctx, uint64_t n) { *(uint64_t *)ctx += n; }

TEST(put_consumes_its_sections) {
    for (int wm = 0; wm < 2; wm++) {
        char *dir;
        Cache *c = open_fresh("consume", wm, &dir);
        if (!c) continue;
        uint64_t sz[] = {5000001, 3, 700000};
        TestArt a;
        art_make(&a, 777 + (uint64_t)wm, sz, 3);
        CacheSection secs[3];
        uint8_t *copy[3];
        for (int i = 0; i < 3; i++) {
            copy[i] = mmap(NULL, sz[i], PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            CHECK(copy[i] != MAP_FAILED);
            memcpy(copy[i], a.secs[i].data, sz[i]);
            secs[i] = (CacheSection){copy[i], sz[i]};
        }
        uint64_t told = 0;
        CachePutOptions po = {.flags = CACHE_PUT_CONSUME, .consumed = count_consumed, .consumed_ctx = &told};
        CHECK_EQ_INT(cache_put_ex(c, &a.key, a.rec.buf, a.rec.len, NULL, secs, 3, &po), 0);
        CHECK(told == sz[0] + sz[1] + sz[2]); /* every byte handed back was said */
#ifdef __linux__
        CHECK(copy[0][4096 * 300] == 0 && copy[2][4096 * 100] == 0 && copy[0][4096 * 300 + 5] == 0);
        CHECK(((const uint8_t *)a.secs[0].data)[4096 * 300 + 5] != 0 || ((const uint8_t *)a.secs[0].data)[4096 * 300 + 6] != 0);
#endif
        CacheHit *h = NULL;
        CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, CACHE_GET_VERIFY, &h), 0);
        if (h) {
            CHECK(hit_matches(h, 777 + (uint64_t)wm, sz, 3));
            cache_hit_release(h);
        }
        for (int i = 0; i < 3; i++) munmap(copy[i], sz[i]);
        art_free(&a);
        cache_close(c);
        tmpdir_rm(dir);
    }
}

int main(void) {
    RUN(put_from_a_fill);
    RUN(put_consumes_its_sections);
    RUN(open_creates_dir_0700_with_parents);
    RUN(round_trip_many_shapes_whole);
    RUN(round_trip_many_shapes_split);
    RUN(round_trip_many_shapes_mixed);
    RUN(layouts_mix_in_one_cache);
    RUN(notes);
    RUN(miss_mismatch_and_replace);
    RUN(direct_keys_and_stats);
    RUN(ls_show_rm_clear);
    RUN(size_limit_evicts_lru);
    RUN(gc_by_age_then_compact_shrinks_file);
    RUN(map_grows_when_full);
    RUN(bad_arguments);
    TEST_MAIN_END();
}
