/* test_cache_bundle.c — export → import round trips (bytes, metadata, key
 * records, split sections), and rejection of damaged bundles: every byte of a
 * small bundle flipped, every truncation, garbage — each rejected by import
 * with the target cache left untouched. */
#include <fcntl.h>

#include "test.h"
#include "util.h"

static Cache *open_dir(const char *dir) {
    CacheOptions o = {.no_sync = 1, .chunk_bytes = 8192, .whole_bytes = 8192}; /* split sections */
    Cache *c = NULL;
    char err[512];
    if (cache_open(&c, dir, &o, err, sizeof err)) fprintf(stderr, "cache_open: %s\n", err);
    return c;
}

static uint8_t *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len ? *len : 1);
    if (fread(b, 1, *len, f) != *len) *len = 0;
    fclose(f);
    return b;
}

static void write_all(const char *path, const uint8_t *b, size_t len) {
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, len, f);
    fclose(f);
}

static int count_entries(Cache *c) {
    CacheStats st;
    cache_stat(c, &st);
    return (int)st.entries;
}

TEST(export_import_round_trip) {
    char *src = tmpdir_new("bsrc"), *dst = tmpdir_new("bdst"), path[4200];
    snprintf(path, sizeof path, "%s/out.milcbundle", src);
    Cache *a = open_dir(src), *b = open_dir(dst);
    static const uint64_t sz[3][3] = {{100, 0, 20000}, {8192 * 3 + 5}, {1, 2, 3}};
    static const int n[3] = {3, 1, 3};
    TestArt art[3];
    for (int i = 0; i < 3; i++) {
        art_make(&art[i], 300 + i, sz[i], n[i]);
        CacheEntryMeta m = {
            .description = i ? "other" : "first", .backend = "cpu", .mode = i, .compile_ns = 1000u * (unsigned)(i + 1)};
        CHECK_EQ_INT(cache_put(a, &art[i].key, art[i].rec.buf, art[i].rec.len, &m, art[i].secs, n[i]), 0);
    }
    CHECK_EQ_INT(cache_export(a, path, NULL, 0), 3);
    /* No temp file left behind. */
    size_t len;
    uint8_t *bundle = read_all(path, &len);
    CHECK(bundle && len > 16 + 32);
    CHECK_EQ_INT(cache_bundle_check(bundle, len, NULL, 0), 3);
    CHECK_EQ_INT(cache_import(b, path), 3);
    for (int i = 0; i < 3; i++) {
        CacheHit *h, *ho;
        CHECK_EQ_INT(cache_get(b, &art[i].key, art[i].rec.buf, art[i].rec.len, CACHE_GET_VERIFY, &h), 0);
        CHECK(hit_matches(h, 300 + i, sz[i], n[i]));
        CHECK_EQ_INT(cache_get(a, &art[i].key, NULL, 0, CACHE_GET_NOTOUCH, &ho), 0);
        const CacheEntryInfo *x = cache_hit_info(h), *y = cache_hit_info(ho);
        CHECK_STR(x->description, y->description);
        CHECK_STR(x->backend, y->backend);
        CHECK(x->mode == y->mode && x->compile_ns == y->compile_ns && x->created_ns == y->created_ns);
        CHECK(memcmp(x->checksum, y->checksum, 16) == 0);
        cache_hit_release(h), cache_hit_release(ho);
    }
    /* A subset by key; an unknown key fails and writes nothing. */
    char path2[4200];
    snprintf(path2, sizeof path2, "%s/two.milcbundle", src);
    CacheKey two[2] = {art[2].key, art[0].key};
    CHECK_EQ_INT(cache_export(a, path2, two, 2), 2);
    free(bundle);
    bundle = read_all(path2, &len);
    CHECK_EQ_INT(cache_bundle_check(bundle, len, NULL, 0), 2);
    CacheKey missing = {{1, 2, 3}};
    char path3[4200];
    snprintf(path3, sizeof path3, "%s/none.milcbundle", src);
    CHECK_EQ_INT(cache_export(a, path3, &missing, 1), CACHE_ENOTFOUND);
    CHECK_EQ_INT(file_bytes(src, "none.milcbundle"), 0);
    /* Only the cache dir files and the two bundles: no temp files remain. */
    int files = 0;
    DIR *d = opendir(src);
    struct dirent *e;
    while ((e = readdir(d))) files += strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    CHECK_EQ_INT(files, 0);
    free(bundle);
    for (int i = 0; i < 3; i++) art_free(&art[i]);
    cache_close(a), cache_close(b);
    tmpdir_rm(src), tmpdir_rm(dst);
}

TEST(every_flipped_byte_and_truncation_is_rejected) {
    char *src = tmpdir_new("bflip"), *dst = tmpdir_new("bflipdst"), path[4200], bad[4200];
    snprintf(path, sizeof path, "%s/small.milcbundle", src);
    snprintf(bad, sizeof bad, "%s/bad.milcbundle", src);
    Cache *a = open_dir(src), *b = open_dir(dst);
    uint64_t sz[] = {40, 0, 9};
    TestArt art;
    art_make(&art, 400, sz, 3);
    CHECK_EQ_INT(art_put(a, &art, "tiny"), 0);
    CHECK_EQ_INT(cache_export(a, path, NULL, 0), 1);
    size_t len;
    uint8_t *orig = read_all(path, &len), *buf = malloc(len);
    int accepted = 0, import_ok = 0;
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(buf, orig, len);
            buf[i] ^= (uint8_t)(1u << bit);
            char err[256] = "";
            if (cache_bundle_check(buf, len, err, sizeof err) != CACHE_EBUNDLE || !strstr(err, "bad bundle"))
                accepted++;
            if (bit == 0) {
                write_all(bad, buf, len);
                if (cache_import(b, bad) != CACHE_EBUNDLE) import_ok++;
            }
        }
    }
    CHECK_EQ_INT(accepted, 0);
    CHECK_EQ_INT(import_ok, 0);
    for (size_t cut = 0; cut < len; cut++) {
        if (cache_bundle_check(orig, cut, NULL, 0) != CACHE_EBUNDLE) accepted++;
        if (cut % 7 == 0) {
            write_all(bad, orig, cut);
            if (cache_import(b, bad) != CACHE_EBUNDLE) import_ok++;
        }
    }
    CHECK_EQ_INT(accepted, 0);
    CHECK_EQ_INT(import_ok, 0);
    CHECK_EQ_INT(count_entries(b), 0); /* untouched throughout */
    /* Appended junk is rejected as well; the intact file imports. */
    uint8_t *longer = malloc(len + 1);
    memcpy(longer, orig, len);
    longer[len] = 0;
    CHECK_EQ_INT(cache_bundle_check(longer, len + 1, NULL, 0), CACHE_EBUNDLE);
    CHECK_EQ_INT(cache_import(b, path), 1);
    CHECK_EQ_INT(count_entries(b), 1);
    char nofile[4200];
    snprintf(nofile, sizeof nofile, "%s/absent", src);
    CHECK_EQ_INT(cache_import(b, nofile), CACHE_EIO);
    CHECK(strstr(cache_errmsg(b), "absent") != NULL);
    free(longer), free(orig), free(buf);
    art_free(&art);
    cache_close(a), cache_close(b);
    tmpdir_rm(src), tmpdir_rm(dst);
}

/* A bundle can be internally consistent yet lie: entries whose key is not
 * the hash of their record.  Built by hand, with a valid trailer. */
TEST(key_must_be_hash_of_record) {
    char *src = tmpdir_new("bkey"), path[4200];
    snprintf(path, sizeof path, "%s/k.milcbundle", src);
    Cache *a = open_dir(src);
    uint64_t sz[] = {10};
    TestArt art;
    art_make(&art, 500, sz, 1);
    art_put(a, &art, "k");
    CHECK_EQ_INT(cache_export(a, path, NULL, 0), 1);
    size_t len;
    uint8_t *buf = read_all(path, &len);
    buf[16] ^= 1; /* first byte of the entry's key */
    /* Re-seal: recompute the whole-file hash into the trailer. */
    CacheKey whole;
    cache_key_of(buf, len - 32, &whole);
    memcpy(buf + len - 16, whole.b, 16);
    char err[256] = "";
    CHECK_EQ_INT(cache_bundle_check(buf, len, err, sizeof err), CACHE_EBUNDLE);
    CHECK(strstr(err, "key is not the hash of its record") != NULL);
    free(buf);
    art_free(&art);
    cache_close(a);
    tmpdir_rm(src);
}

int main(void) {
    RUN(export_import_round_trip);
    RUN(every_flipped_byte_and_truncation_is_rejected);
    RUN(key_must_be_hash_of_record);
    TEST_MAIN_END();
}
