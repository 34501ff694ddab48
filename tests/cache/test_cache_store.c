/* test_cache_store.c — the store path: the checksum built while copying
 * equals one computed independently, the writable map is read-only outside
 * a put (a stray write through a hit pointer faults), LMDB's copy path
 * (no_writemap) and the in-place path share a directory, every durability
 * setting round-trips, CACHE_GET_POPULATE hands out the same bytes, and
 * CACHE_GET_VERIFY_ONCE trusts a passed entry only while data.mdb is
 * unchanged by anyone but milc. */
#include <signal.h>
#include <sys/wait.h>
#include <xxhash.h>

#include <lmdb.h>

#include "../../cache/src/internal.h"
#include "test.h"
#include "util.h"

static Cache *open_with(const char *dir, CacheOptions o) {
    Cache *c = NULL;
    char err[512] = "";
    int rc = cache_open(&c, dir, &o, err, sizeof err);
    if (rc) fprintf(stderr, "cache_open: %s: %s\n", cache_strerror(rc), err);
    return c;
}

/* The entry checksum as cache/README.md defines it, from the bytes put. */
static void reference_checksum(const TestArt *a, uint8_t out[16]) {
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    for (int i = 0; i < a->n; i++) {
        uint8_t rec[24];
        for (int b = 0; b < 8; b++) rec[b] = (uint8_t)(a->secs[i].size >> (8 * b));
        XXH128_canonical_t d;
        XXH128_canonicalFromHash(&d, XXH3_128bits(a->secs[i].data, (size_t)a->secs[i].size));
        memcpy(rec + 8, d.digest, 16);
        XXH3_128bits_update(st, rec, sizeof rec);
    }
    XXH128_canonical_t cn;
    XXH128_canonicalFromHash(&cn, XXH3_128bits_digest(st));
    XXH3_freeState(st);
    memcpy(out, cn.digest, 16);
}

static int check_entry(Cache *c, TestArt *a, uint64_t seed, const uint64_t *sz, int n, unsigned flags) {
    CacheHit *h;
    int rc = cache_get(c, &a->key, a->rec.buf, a->rec.len, flags, &h);
    if (rc) {
        fprintf(stderr, "get seed %llu: %s: %s\n", (unsigned long long)seed, cache_strerror(rc), cache_errmsg(c));
        return 0;
    }
    uint8_t want[16];
    reference_checksum(a, want);
    int ok = hit_matches(h, seed, sz, n) && !memcmp(cache_hit_info(h)->checksum, want, 16);
    cache_hit_release(h);
    return ok;
}

TEST(checksum_built_while_copying_matches_reference) {
    char *dir = tmpdir_new("sum");
    /* Sections that straddle the 256 KiB copy blocks, split values (v < 2)
     * or a value of their own (v = 2), empties. */
    uint64_t sz[] = {0, 1, (256 << 10) - 1, (256 << 10) + 1, 3 << 20, 0, 77};
    for (int v = 0; v < 3; v++) {
        int classic = v == 1;
        Cache *c = open_with(
            dir, (CacheOptions){
                     .no_sync = 1, .chunk_bytes = 1 << 20, .whole_bytes = v < 2 ? 1 << 20 : 0, .no_writemap = classic});
        CHECK(c != NULL);
        if (!c) break;
        TestArt a;
        art_make(&a, 300 + (uint64_t)v, sz, 7);
        CHECK_EQ_INT(art_put(c, &a, "sum"), 0);
        CHECK(check_entry(c, &a, 300 + (uint64_t)v, sz, 7, 0));
        CHECK(check_entry(c, &a, 300 + (uint64_t)v, sz, 7, CACHE_GET_VERIFY));
        art_free(&a);
        cache_close(c);
    }
    tmpdir_rm(dir);
}

/* Without WRITEMAP, LMDB maps the file read-only and a bad write through a
 * hit pointer is a SIGSEGV.  The writable map must keep that property. */
TEST(stray_write_through_hit_pointer_faults) {
    char *dir = tmpdir_new("stray");
    uint64_t sz[] = {100000, 5000};
    TestArt a;
    art_make(&a, 310, sz, 2);
    Cache *c = open_with(dir, (CacheOptions){.no_sync = 1});
    CHECK_EQ_INT(art_put(c, &a, "stray"), 0);
    cache_close(c);
    pid_t pid = fork();
    if (pid == 0) {
        Cache *cc = open_with(dir, (CacheOptions){.no_sync = 1});
        CacheHit *h;
        const CacheSection *s;
        int n;
        if (!cc || cache_get(cc, &a.key, a.rec.buf, a.rec.len, 0, &h) || cache_hit_sections(h, &s, &n)) _exit(2);
        /* A put in between makes the map writable for a moment: it must be
         * read-only again afterwards. */
        uint64_t one[] = {10};
        TestArt b;
        art_make(&b, 311, one, 1);
        if (art_put(cc, &b, "between")) _exit(3);
        signal(SIGSEGV, SIG_DFL); /* not a sanitizer's report: the plain signal */
        ((volatile uint8_t *)s[0].data)[1000] ^= 1;
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    if (!WIFSIGNALED(st)) fprintf(stderr, "child exit %d\n", WEXITSTATUS(st));
    c = open_with(dir, (CacheOptions){.no_sync = 1});
    CHECK(check_entry(c, &a, 310, sz, 2, CACHE_GET_VERIFY));
    cache_close(c);
    art_free(&a);
    tmpdir_rm(dir);
}

/* Both store paths write the same format into the same file. */
TEST(copy_path_and_in_place_path_share_a_directory) {
    char *dir = tmpdir_new("mixed");
    uint64_t sz[] = {70000, 3 << 20, 10};
    TestArt a[4];
    for (int i = 0; i < 4; i++) {
        Cache *c = open_with(dir, (CacheOptions){.no_sync = 1, .map_size = 1 << 20, .no_writemap = i % 2});
        CHECK(c != NULL);
        if (!c) break;
        art_make(&a[i], 320 + (uint64_t)i, sz, 3);
        CHECK_EQ_INT(art_put(c, &a[i], "mixed"), 0);
        for (int j = 0; j <= i; j++) CHECK(check_entry(c, &a[j], 320 + (uint64_t)j, sz, 3, CACHE_GET_VERIFY));
        cache_close(c);
    }
    Cache *c = open_with(dir, (CacheOptions){.no_sync = 1});
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    CacheStats st;
    CHECK_EQ_INT(cache_stat(c, &st), 0);
    CHECK_EQ_INT(st.entries, 4);
    /* Disk space, not the sparse length: at least the data, far below the map. */
    CHECK(st.file_bytes >= 4 * (uint64_t)(70000 + (3 << 20)) && st.file_bytes < st.map_bytes);
    cache_close(c);
    for (int i = 0; i < 4; i++) art_free(&a[i]);
    tmpdir_rm(dir);
}

TEST(every_durability_setting_round_trips) {
    uint64_t sz[] = {200000, 3};
    CacheOptions opts[] = {
        {0}, {.meta_sync = 1}, {.no_sync = 1}, {.no_writemap = 1}, {.no_writemap = 1, .meta_sync = 1},
    };
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
        char *dir = tmpdir_new("dur");
        Cache *c = open_with(dir, opts[i]);
        CHECK(c != NULL);
        TestArt a;
        art_make(&a, 330 + i, sz, 2);
        CHECK_EQ_INT(art_put(c, &a, "durable"), 0);
        cache_close(c);
        c = open_with(dir, opts[i]);
        CHECK(check_entry(c, &a, 330 + i, sz, 2, CACHE_GET_VERIFY));
        cache_close(c);
        art_free(&a);
        tmpdir_rm(dir);
    }
}

static int has_marker(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/milc.unsynced", dir);
    return access(p, F_OK) == 0;
}

static int put_refetchable(Cache *c, TestArt *a, const CacheKey *dk) {
    CachePutOptions po = {.flags = CACHE_PUT_REFETCHABLE, .dkey = dk, .drecord = "drec", .drecord_len = 4};
    return cache_put_ex(c, &a->key, a->rec.buf, a->rec.len, NULL, a->secs, a->n, &po);
}

/* A pulled entry's put (CACHE_PUT_REFETCHABLE) commits without a sync, its
 * direct key with it; the marker of such commits stands until a durable
 * commit; an open that finds the marker of another boot (a crash may have
 * torn the file) starts the cache afresh, and one of this boot loses
 * nothing. */
TEST(refetchable_puts_are_dropped_whole_after_a_restart) {
    char *dir = tmpdir_new("refetch");
    uint64_t sz[] = {300000, 17};
    TestArt a, b, d, e;
    art_make(&a, 501, sz, 2), art_make(&b, 502, sz, 2), art_make(&d, 503, sz, 2), art_make(&e, 504, sz, 2);
    CacheKey dk = b.key;
    dk.b[15] ^= 1;
    Cache *c = open_with(dir, (CacheOptions){0});
    CHECK(c != NULL);
    CHECK_EQ_INT(art_put(c, &a, "durable"), 0);
    CHECK(!has_marker(dir));
    CHECK_EQ_INT(put_refetchable(c, &b, &dk), 0);
    CHECK(has_marker(dir));
    CacheHit *h;
    CacheKey ak;
    CHECK_EQ_INT(cache_get_direct(c, &dk, "drec", 4, 0, &h, &ak), 0);
    CHECK(!memcmp(ak.b, b.key.b, 16) && hit_matches(h, 502, sz, 2));
    cache_hit_release(h);
    cache_close(c);
    /* The same boot: a process exited before a durable commit; all is there. */
    c = open_with(dir, (CacheOptions){0});
    CacheStats st;
    CHECK_EQ_INT(cache_stat(c, &st), 0);
    CHECK_EQ_INT(st.restarted, 0);
    CHECK(check_entry(c, &b, 502, sz, 2, CACHE_GET_VERIFY));
    CHECK(has_marker(dir));
    CHECK_EQ_INT(art_put(c, &d, "durable"), 0); /* its sync covers b's pages */
    CHECK(!has_marker(dir));
    CHECK_EQ_INT(put_refetchable(c, &e, NULL), 0);
    CHECK(has_marker(dir));
    cache_close(c);
    /* A restart (the marker names another boot): nothing of the file is
     * trusted, not even the durable entries it may have made unreachable. */
    char p[4200];
    snprintf(p, sizeof p, "%s/milc.unsynced", dir);
    FILE *f = fopen(p, "r+b");
    CHECK(f != NULL);
    if (f) fwrite("\x01\x02\x03\x04\x05\x06\x07\x09", 1, 8, f), fclose(f);
    c = open_with(dir, (CacheOptions){0});
    CHECK(c != NULL);
    CHECK_EQ_INT(cache_stat(c, &st), 0);
    CHECK_EQ_INT(st.restarted, 1);
    CHECK_EQ_INT(st.entries, 0);
    CHECK(!has_marker(dir));
    CHECK_EQ_INT(cache_get(c, &a.key, a.rec.buf, a.rec.len, 0, &h), CACHE_ENOTFOUND);
    CHECK_EQ_INT(art_put(c, &a, "again"), 0);
    CHECK(check_entry(c, &a, 501, sz, 2, CACHE_GET_VERIFY));
    cache_close(c);
    art_free(&a), art_free(&b), art_free(&d), art_free(&e);
    tmpdir_rm(dir);
}

TEST(populate_hands_out_the_same_bytes) {
    char *dir = tmpdir_new("pop");
    uint64_t sz[] = {5 << 20, 4097, 0, 1 << 20};
    TestArt a;
    art_make(&a, 340, sz, 4);
    Cache *c = open_with(dir, (CacheOptions){.no_sync = 1, .chunk_bytes = 2 << 20});
    CHECK_EQ_INT(art_put(c, &a, "pop"), 0);
    cache_close(c);
    c = open_with(dir, (CacheOptions){.no_sync = 1});
    CHECK(check_entry(c, &a, 340, sz, 4, CACHE_GET_POPULATE));
    CHECK(check_entry(c, &a, 340, sz, 4, CACHE_GET_POPULATE | CACHE_GET_VERIFY));
    cache_close(c);
    art_free(&a);
    tmpdir_rm(dir);
}

/* Flip one byte of data.mdb inside every copy of `needle` (32 bytes of a
 * section; freed pages may hold stale copies).  1 if any was found. */
static int damage_file(const char *dir, const uint8_t *needle) {
    char p[8400];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    FILE *f = fopen(p, "r+b");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    size_t len = (size_t)ftell(f);
    uint8_t *b = malloc(len);
    fseek(f, 0, SEEK_SET);
    int found = 0;
    uint8_t *at = b && fread(b, 1, len, f) == len ? b : NULL;
    while (at && (at = memmem(at, len - (size_t)(at - b), needle, 32)) != NULL) {
        uint8_t x = at[7] ^ 0x10;
        fseek(f, (long)(at - b) + 7, SEEK_SET);
        found |= fwrite(&x, 1, 1, f) == 1;
        at += 32;
    }
    fclose(f);
    free(b);
    return found;
}

/* cache_get on a fresh handle: the result code, and in *checked whether
 * the checksum was recomputed. */
static int get_rc2(const char *dir, TestArt *a, unsigned flags, int *checked) {
    Cache *c = open_with(dir, (CacheOptions){.no_sync = 1, .map_size = 1 << 20});
    CacheHit *h;
    int rc = c ? cache_get(c, &a->key, a->rec.buf, a->rec.len, flags, &h) : -100;
    *checked = -1;
    if (rc == 0) *checked = cache_hit_info(h)->checked, cache_hit_release(h);
    if (c) cache_close(c);
    return rc;
}
static int get_rc(const char *dir, TestArt *a, unsigned flags) {
    int checked;
    return get_rc2(dir, a, flags, &checked);
}

/* VERIFY_ONCE trusts bytes that passed the checksum in this boot (at put,
 * or at a counted verified hit) while nothing but milc has written the file
 * since; any other write to data.mdb, or a lost stamp, makes it check again. */
TEST(verify_once_trusts_only_an_unchanged_file) {
    char *src = tmpdir_new("once-src"), *dst = tmpdir_new("once-dst"), bundle[8400], path[8400];
    uint64_t sz[] = {150000, 9000}, sz2[] = {70000};
    TestArt a, b;
    art_make(&a, 350, sz, 2);
    art_make(&b, 351, sz2, 1);
    int checked;
    Cache *c = open_with(src, (CacheOptions){.no_sync = 1, .map_size = 1 << 20});
    CHECK_EQ_INT(art_put(c, &a, "once"), 0);
    snprintf(bundle, sizeof bundle, "%s/a.milcbundle", dst);
    CHECK_EQ_INT(cache_export(c, bundle, &a.key, 1), 1);
    cache_close(c);
    /* Stored by put: trusted, until another program writes the file. */
    CHECK_EQ_INT(get_rc2(src, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 0);
    CHECK_EQ_INT(get_rc2(src, &a, CACHE_GET_VERIFY, &checked), 0);
    CHECK_EQ_INT(checked, 1);
    CHECK(damage_file(src, (const uint8_t *)a.secs[0].data + 5000));
    CHECK_EQ_INT(get_rc(src, &a, CACHE_GET_VERIFY_ONCE), CACHE_ECORRUPT);
    CHECK_EQ_INT(get_rc(src, &a, CACHE_GET_VERIFY), CACHE_ECORRUPT);
    /* Imported with the bundle's checksum: never passed here, so checked;
     * a counted pass is trusted next time, a NOTOUCH one is not recorded. */
    c = open_with(dst, (CacheOptions){.no_sync = 1, .map_size = 1 << 20});
    CHECK_EQ_INT(cache_import(c, bundle), 1);
    cache_close(c);
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE | CACHE_GET_NOTOUCH, &checked), 0);
    CHECK_EQ_INT(checked, 1);
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 1);
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 0);
    /* milc's own writes (another entry stored) keep the marks... */
    c = open_with(dst, (CacheOptions){.no_sync = 1, .map_size = 1 << 20});
    CHECK_EQ_INT(art_put(c, &b, "other"), 0);
    cache_close(c);
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 0);
    /* ... a lost stamp does not... */
    snprintf(path, sizeof path, "%s/milc.stamp", dst);
    CHECK(truncate(path, 0) == 0);
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 1);
    /* ... and damage anywhere, even in another entry, is seen. */
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 0);
    CHECK(damage_file(dst, (const uint8_t *)b.secs[0].data + 100));
    CHECK_EQ_INT(get_rc2(dst, &a, CACHE_GET_VERIFY_ONCE, &checked), 0);
    CHECK_EQ_INT(checked, 1);
    CHECK_EQ_INT(get_rc(dst, &b, CACHE_GET_VERIFY_ONCE), CACHE_ECORRUPT);
    CHECK(damage_file(dst, (const uint8_t *)a.secs[1].data + 300));
    CHECK_EQ_INT(get_rc(dst, &a, CACHE_GET_VERIFY_ONCE), CACHE_ECORRUPT);
    art_free(&a);
    art_free(&b);
    tmpdir_rm(src);
    tmpdir_rm(dst);
}

/* The LMDB this cache runs with is one whose file format it knows, and only
 * 0.9 is such: an LMDB 1.0 (another page layout) must be refused at open. */
TEST(only_lmdb_0_9_is_known) {
    int major, minor;
    mdb_version(&major, &minor, NULL);
    CHECK(cache_lmdb_known(major, minor));
    CHECK(cache_lmdb_known(0, 9));
    CHECK(!cache_lmdb_known(1, 0));
    CHECK(!cache_lmdb_known(0, 8));
    CHECK(!cache_lmdb_known(0, 10));
}

int main(void) {
    RUN(only_lmdb_0_9_is_known);
    RUN(checksum_built_while_copying_matches_reference);
    RUN(stray_write_through_hit_pointer_faults);
    RUN(copy_path_and_in_place_path_share_a_directory);
    RUN(every_durability_setting_round_trips);
    RUN(refetchable_puts_are_dropped_whole_after_a_restart);
    RUN(populate_hands_out_the_same_bytes);
    RUN(verify_once_trusts_only_an_unchanged_file);
    TEST_MAIN_END();
}
