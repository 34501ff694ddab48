/* test_cache_key.c — key records and keys: exact record bytes, the hash
 * against the xxhsum tool as an independent reference, hex round trips and
 * record decoding (including malformed records). */
#include "test.h"
#include "util.h"

TEST(record_bytes_are_tag_len_bytes) {
    CacheKeyBuilder b;
    ckey_init(&b);
    ckey_add_str(&b, 0x41424344u, "hi");
    ckey_add_u64(&b, 7, 0x0102030405060708ull);
    ckey_add(&b, 9, NULL, 0);
    static const uint8_t want[] = {
        0x44, 0x43, 0x42, 0x41, 2, 0, 0, 0, 0, 0, 0, 0, 'h', 'i', 7, 0, 0, 0, 8, 0, 0, 0, 0,
        0,    0,    0,    8,    7, 6, 5, 4, 3, 2, 1, 9, 0,   0,   0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    CHECK_EQ_INT(b.len, sizeof want);
    CHECK(memcmp(b.buf, want, sizeof want) == 0);
    ckey_free(&b);
}

TEST(length_prefix_makes_records_unambiguous) {
    /* "ab"+"c" and "a"+"bc" must differ. */
    CacheKeyBuilder x, y;
    CacheKey kx, ky;
    ckey_init(&x), ckey_init(&y);
    ckey_add_str(&x, 1, "ab"), ckey_add_str(&x, 1, "c");
    ckey_add_str(&y, 1, "a"), ckey_add_str(&y, 1, "bc");
    ckey_finish(&x, &kx), ckey_finish(&y, &ky);
    CHECK(memcmp(kx.b, ky.b, 16) != 0);
    ckey_free(&x), ckey_free(&y);
}

/* The key must be XXH3-128 in xxhsum's canonical form, so `xxhsum -H2` on a
 * dumped record reproduces it — an independent implementation. */
TEST(key_matches_xxhsum) {
    if (system("command -v xxhsum >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skip: no xxhsum\n");
        return;
    }
    char *dir = tmpdir_new("key");
    for (int round = 0; round < 3; round++) {
        CacheKeyBuilder b;
        ckey_init(&b);
        uint8_t blob[3000];
        pattern_fill(blob, sizeof blob, (uint64_t)round);
        ckey_add_str(&b, 0x4D494C43u, "milc 0.1.0");
        ckey_add(&b, 0x54584554u, blob, (size_t)(round * 1000 + 17));
        CacheKey k;
        ckey_finish(&b, &k);
        char path[4200], cmd[8600], hex[33], got[80] = "";
        snprintf(path, sizeof path, "%s/rec.bin", dir);
        FILE *f = fopen(path, "wb");
        fwrite(b.buf, 1, b.len, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "xxhsum -H2 '%s'", path);
        FILE *p = popen(cmd, "r");
        CHECK(p && fscanf(p, "%79s", got) == 1);
        if (p) pclose(p);
        cache_key_hex(&k, hex);
        /* xxhsum may prefix the algorithm name ("XXH128_..."); compare the digits. */
        const char *digits = strlen(got) >= 32 ? got + strlen(got) - 32 : got;
        CHECK_STR(hex, digits);
        CacheKey k2;
        cache_key_of(b.buf, b.len, &k2);
        CHECK(memcmp(k.b, k2.b, 16) == 0);
        ckey_free(&b);
    }
    tmpdir_rm(dir);
}

TEST(hex_round_trip_and_rejects) {
    CacheKey k, k2;
    for (int i = 0; i < 16; i++) k.b[i] = (uint8_t)(i * 17 + 3);
    char hex[33];
    cache_key_hex(&k, hex);
    CHECK_STR(hex, "031425364758697a8b9cadbecfe0f102");
    CHECK_EQ_INT(cache_key_parse(hex, &k2), 0);
    CHECK(memcmp(k.b, k2.b, 16) == 0);
    CHECK_EQ_INT(cache_key_parse("031425364758697A8B9CADBECFE0F102", &k2), 0);
    CHECK(memcmp(k.b, k2.b, 16) == 0);
    CHECK_EQ_INT(cache_key_parse("0314", &k2), CACHE_EINVAL);
    CHECK_EQ_INT(cache_key_parse("031425364758697a8b9cadbecfe0f10g", &k2), CACHE_EINVAL);
    CHECK_EQ_INT(cache_key_parse(NULL, &k2), CACHE_EINVAL);
}

TEST(record_decodes_items_in_order) {
    CacheKeyBuilder b;
    ckey_init(&b);
    ckey_add_str(&b, 1, "alpha");
    ckey_add_u64(&b, 2, 42);
    ckey_add(&b, 3, "", 0);
    size_t pos = 0;
    uint32_t tag;
    const uint8_t *bytes;
    uint64_t n;
    CHECK_EQ_INT(ckey_record_next(b.buf, b.len, &pos, &tag, &bytes, &n), 1);
    CHECK_EQ_INT(tag, 1);
    CHECK(n == 5 && memcmp(bytes, "alpha", 5) == 0);
    CHECK_EQ_INT(ckey_record_next(b.buf, b.len, &pos, &tag, &bytes, &n), 1);
    CHECK(tag == 2 && n == 8 && bytes[0] == 42);
    CHECK_EQ_INT(ckey_record_next(b.buf, b.len, &pos, &tag, &bytes, &n), 1);
    CHECK(tag == 3 && n == 0);
    CHECK_EQ_INT(ckey_record_next(b.buf, b.len, &pos, &tag, &bytes, &n), 0);
    /* Every truncation of the record is malformed except at item boundaries. */
    int bad = 0, ends = 0;
    for (size_t len = 0; len < b.len; len++) {
        size_t p = 0;
        int rc;
        while ((rc = ckey_record_next(b.buf, len, &p, &tag, &bytes, &n)) == 1) {}
        if (rc == CACHE_EINVAL)
            bad++;
        else
            ends++;
    }
    CHECK_EQ_INT(ends, 3); /* lengths 0, 17 and 37 */
    CHECK_EQ_INT(bad, (int)b.len - 3);
    /* A length field pointing far past the end. */
    uint8_t evil[12] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    pos = 0;
    CHECK_EQ_INT(ckey_record_next(evil, sizeof evil, &pos, &tag, &bytes, &n), CACHE_EINVAL);
    ckey_free(&b);
}

TEST(strerror_names_codes) {
    CHECK_STR(cache_strerror(CACHE_ENOTFOUND), "not found");
    CHECK_STR(cache_strerror(CACHE_EBUNDLE), "bad bundle");
    CHECK(CACHE_IS_MISS(CACHE_EMISMATCH) && CACHE_IS_MISS(CACHE_ECORRUPT) && !CACHE_IS_MISS(CACHE_EIO));
}

int main(void) {
    RUN(record_bytes_are_tag_len_bytes);
    RUN(length_prefix_makes_records_unambiguous);
    RUN(key_matches_xxhsum);
    RUN(hex_round_trip_and_rejects);
    RUN(record_decodes_items_in_order);
    RUN(strerror_names_codes);
    TEST_MAIN_END();
}
