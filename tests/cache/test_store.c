/* test_store.c — the storage seam (store.h): the same conformance checks
 * run against the LMDB cache and, when $MILC_TEST_REDIS_PORT names a
 * redis-server (tests/remote/test_store.sh starts one), the Redis tier; and
 * a copy from the shared tier into the local cache as a pull does it. */
#include <hiredis/hiredis.h>

#include "milc/store.h"
#include "test.h"
#include "util.h"

static uint8_t team_key[REMOTE_SECRET_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8};

static int entry_is(const StoreEntry *e, uint64_t seed, const uint64_t *sz, int n) {
    if (e->nsecs != n) return 0;
    for (int i = 0; i < n; i++)
        if (e->secs[i].size != sz[i] || !pattern_check(e->secs[i].data, sz[i], seed * 1000 + (uint64_t)i)) return 0;
    return 1;
}

typedef struct {
    CacheKey want;
    int seen, meta_ok;
} Seen;

static int seen_cb(void *ctx, const CacheKey *k, const uint8_t *record, size_t record_len, const StoreMeta *m,
                   uint64_t bytes) {
    Seen *s = ctx;
    (void)record, (void)record_len;
    if (memcmp(k->b, s->want.b, 16) != 0) return 0;
    s->seen++;
    s->meta_ok = !strcmp(m->description, "desc") && !strcmp(m->producer, "prod") && m->variant == 7 &&
                 m->cost_ns == 1234 && bytes == 300000 + 5 + 70000;
    return 0;
}

/* What every store must do (store.h). */
static void conform(Store *s, int has_notes, uint64_t seed) {
    uint64_t sz[] = {300000, 5, 70000};
    TestArt a, b;
    art_make(&a, seed, sz, 3), art_make(&b, seed + 1, sz, 3);
    StoreMeta m = {.description = "desc", .producer = "prod", .variant = 7, .cost_ns = 1234};
    CHECK_EQ_INT(store_put(s, &a.key, a.rec.buf, a.rec.len, &m, a.secs, a.n, 0), 0);
    StoreEntry *e = NULL;
    CHECK_EQ_INT(store_get(s, &a.key, a.rec.buf, a.rec.len, STORE_GET_VERIFY, &e), 0);
    if (e) {
        CHECK(entry_is(e, seed, sz, 3));
        CHECK(e->bytes == 370005 && e->record_len == a.rec.len && !memcmp(e->record, a.rec.buf, a.rec.len));
        CHECK(!strcmp(e->meta.description, "desc") && !strcmp(e->meta.producer, "prod") && e->meta.variant == 7);
        CHECK(e->meta.cost_ns == 1234 && e->meta.created_ns > 0);
        store_release(s, e);
    }
    /* An alias (the library's direct key) names the entry; its own record
     * is compared the same way. */
    uint64_t one = 1;
    TestArt al;
    art_make(&al, seed + 2, &one, 1);
    CHECK(store_state(s) & STORE_UP);
    CHECK(store_notice(s) == NULL);
    CHECK_EQ_INT(store_alias_get(s, &al.key, al.rec.buf, al.rec.len, 0, &e), CACHE_ENOTFOUND);
    CHECK_EQ_INT(store_alias_put(s, &al.key, al.rec.buf, al.rec.len, &a.key), 0);
    e = NULL;
    CHECK_EQ_INT(store_alias_get(s, &al.key, al.rec.buf, al.rec.len, STORE_GET_VERIFY, &e), 0);
    if (e) {
        CHECK(!memcmp(e->key.b, a.key.b, 16) && entry_is(e, seed, sz, 3) && e->checked);
        store_release(s, e);
    }
    CHECK_EQ_INT(store_alias_get(s, &al.key, a.rec.buf, a.rec.len, 0, &e), CACHE_EMISMATCH);
    art_free(&al);
    /* The record is compared: another one under the key is a miss. */
    CHECK_EQ_INT(store_get(s, &a.key, b.rec.buf, b.rec.len, 0, &e), CACHE_EMISMATCH);
    CHECK_EQ_INT(store_get(s, &b.key, b.rec.buf, b.rec.len, 0, &e), CACHE_ENOTFOUND);
    /* A put replaces. */
    CHECK_EQ_INT(store_put(s, &a.key, a.rec.buf, a.rec.len, &m, a.secs, a.n, STORE_PUT_REFETCHABLE), 0);
    Seen sn = {a.key, 0, 0};
    CHECK_EQ_INT(store_iterate(s, seen_cb, &sn), 0);
    CHECK_EQ_INT(sn.seen, 1);
    CHECK(sn.meta_ok);
    StoreStats st;
    CHECK_EQ_INT(store_stats(s, &st), 0);
    CHECK(st.entries >= 1);
    void *v = NULL;
    size_t vlen = 0;
    if (has_notes) {
        CHECK_EQ_INT(store_note_put(s, &b.key, b.rec.buf, b.rec.len, "memo", 4), 0);
        CHECK_EQ_INT(store_note_get(s, &b.key, b.rec.buf, b.rec.len, &v, &vlen), 0);
        CHECK(vlen == 4 && v && !memcmp(v, "memo", 4));
        free(v);
        CHECK_EQ_INT(store_note_get(s, &b.key, a.rec.buf, a.rec.len, &v, &vlen), CACHE_EMISMATCH);
    } else {
        CHECK_EQ_INT(store_note_put(s, &b.key, b.rec.buf, b.rec.len, "memo", 4), CACHE_ENOTSUP);
        CHECK_EQ_INT(store_note_get(s, &b.key, b.rec.buf, b.rec.len, &v, &vlen), CACHE_ENOTSUP);
    }
    CHECK_EQ_INT(store_remove(s, &a.key), 0);
    CHECK_EQ_INT(store_get(s, &a.key, a.rec.buf, a.rec.len, 0, &e), CACHE_ENOTFOUND);
    CHECK_EQ_INT(store_remove(s, &a.key), CACHE_ENOTFOUND);
    art_free(&a), art_free(&b);
}

TEST(lmdb_store_conforms) {
    char *dir = tmpdir_new("store");
    Store *s = NULL;
    char err[512];
    CHECK_EQ_INT(store_lmdb_open(&s, dir, NULL, err, sizeof err), 0);
    if (s) {
        CHECK(!strcmp(s->ops->name, "lmdb") && store_lmdb_cache(s) != NULL && store_redis_remote(s) == NULL);
        conform(s, 1, 800);
        store_close(s);
    }
    tmpdir_rm(dir);
}

static int open_redis(Store **s, const char *port) {
    char url[64], err[512] = "";
    snprintf(url, sizeof url, "redis://127.0.0.1:%s", port);
    RemoteOptions o = {.url = url, .secret = team_key};
    int rc = store_redis_open(s, &o, err, sizeof err);
    if (rc) fprintf(stderr, "store_redis_open: %s\n", err);
    return rc;
}

TEST(redis_store_conforms) {
    const char *port = getenv("MILC_TEST_REDIS_PORT");
    if (!port || !*port) {
        fprintf(stderr,
                "redis_store_conforms: skipped (no $MILC_TEST_REDIS_PORT; tests/remote/test_store.sh sets it)\n");
        return;
    }
    Store *s = NULL;
    CHECK_EQ_INT(open_redis(&s, port), 0);
    if (!s) return;
    CHECK(!strcmp(s->ops->name, "redis") && store_redis_remote(s) != NULL);
    conform(s, 0, 900);
    store_close(s);
}

/* A pull is a copy from the shared tier into the local cache, refetchable:
 * the local put waits for no disk, and the marker of that stands. */
TEST(copy_from_redis_into_lmdb) {
    const char *port = getenv("MILC_TEST_REDIS_PORT");
    if (!port || !*port) return;
    Store *r = NULL, *l = NULL;
    char *dir = tmpdir_new("storecp"), err[512];
    CHECK_EQ_INT(open_redis(&r, port), 0);
    CHECK_EQ_INT(store_lmdb_open(&l, dir, NULL, err, sizeof err), 0);
    if (r && l) {
        uint64_t sz[] = {2500000, 1};
        TestArt a;
        art_make(&a, 950, sz, 2);
        CHECK_EQ_INT(store_put(r, &a.key, a.rec.buf, a.rec.len, NULL, a.secs, a.n, 0), 0);
        CHECK_EQ_INT(store_copy(r, l, &a.key, a.rec.buf, a.rec.len, STORE_PUT_REFETCHABLE), 0);
        char p[4200];
        snprintf(p, sizeof p, "%s/milc.unsynced", dir);
        CHECK(access(p, F_OK) == 0);
        StoreEntry *e = NULL;
        CHECK_EQ_INT(store_get(l, &a.key, a.rec.buf, a.rec.len, STORE_GET_VERIFY, &e), 0);
        if (e) {
            CHECK(entry_is(e, 950, sz, 2));
            store_release(l, e);
        }
        CHECK_EQ_INT(store_remove(r, &a.key), 0);
        CHECK_EQ_INT(store_copy(r, l, &a.key, a.rec.buf, a.rec.len, 0), CACHE_ENOTFOUND);
        art_free(&a);
    }
    store_close(l);
    store_close(r);
    tmpdir_rm(dir);
}

/* A pull streams each chunk into the local cache file and checks its tag on
 * the way (store_pull): many small chunks (the tags on their own thread, the
 * staging halves reused many times) and one chunk (checked inline), into a
 * cache with and without WRITEMAP.  A chunk changed on the server, one of
 * the wrong size and one gone are refused with nothing stored locally, and
 * the same handle pulls again afterwards (the connection is dropped, not the
 * remote). */
static void tamper(const char *port, const CacheKey *k, uint32_t chunk, const char *how) {
    redisContext *rc = redisConnect("127.0.0.1", atoi(port));
    char hex[33], pat[96];
    cache_key_hex(k, hex);
    snprintf(pat, sizeof pat, "milc:c:%s:*:%u", hex, chunk);
    redisReply *keys = redisCommand(rc, "KEYS %s", pat);
    CHECK(keys && keys->type == REDIS_REPLY_ARRAY && keys->elements == 1);
    if (keys && keys->type == REDIS_REPLY_ARRAY && keys->elements == 1) {
        const char *name = keys->element[0]->str;
        redisReply *r = !strcmp(how, "flip")   ? redisCommand(rc, "SETRANGE %s 77 X", name)
                        : !strcmp(how, "grow") ? redisCommand(rc, "APPEND %s Z", name)
                                               : redisCommand(rc, "DEL %s", name);
        CHECK(r && r->type == REDIS_REPLY_INTEGER);
        freeReplyObject(r);
    }
    freeReplyObject(keys);
    redisFree(rc);
}

static int local_has(Store *l, const TestArt *a) {
    StoreEntry *e = NULL;
    int rc = store_get(l, &a->key, a->rec.buf, a->rec.len, STORE_GET_VERIFY, &e);
    store_release(l, e);
    return rc == 0;
}

TEST(pull_streams_and_refuses) {
    const char *port = getenv("MILC_TEST_REDIS_PORT");
    if (!port || !*port) return;
    char url[64], err[512];
    snprintf(url, sizeof url, "redis://127.0.0.1:%s", port);
    Store *r = NULL;
    CHECK_EQ_INT(
        store_redis_open(&r, &(RemoteOptions){.url = url, .secret = team_key, .chunk_bytes = 65536}, err, sizeof err),
        0);
    if (!r) return;
    struct {
        uint64_t sz[3];
        int n;
        uint32_t bad;
    } shapes[] = {
        {{2500000, 1, 900000}, 3, 31}, /* 52 chunks */
        {{40000, 0, 0}, 1, 0},         /* one chunk */
    };
    for (int wm = 0; wm < 2; wm++)
        for (int sh = 0; sh < 2; sh++) {
            char *dir = tmpdir_new("pull");
            Store *l = NULL;
            CHECK_EQ_INT(store_lmdb_open(&l, dir, &(CacheOptions){.no_writemap = wm}, err, sizeof err), 0);
            uint64_t seed = 960 + (uint64_t)(wm * 2 + sh);
            TestArt a;
            art_make(&a, seed, shapes[sh].sz, shapes[sh].n);
            int put_failed = -1;
            CHECK_EQ_INT(store_put(r, &a.key, a.rec.buf, a.rec.len, NULL, a.secs, a.n, 0), 0);
            CHECK_EQ_INT(store_pull(r, l, &a.key, a.rec.buf, a.rec.len, STORE_PUT_REFETCHABLE, &put_failed), 0);
            CHECK_EQ_INT(put_failed, 0);
            StoreEntry *e = NULL;
            CHECK_EQ_INT(store_get(l, &a.key, a.rec.buf, a.rec.len, STORE_GET_VERIFY, &e), 0);
            if (e) {
                CHECK(entry_is(e, seed, shapes[sh].sz, shapes[sh].n));
                store_release(l, e);
            }
            static const char *hows[] = {"flip", "grow", "del"};
            static const int codes[] = {CACHE_ECORRUPT, CACHE_ECORRUPT, CACHE_ENOTFOUND};
            for (int t = 0; t < 3; t++) {
                CHECK_EQ_INT(store_remove(l, &a.key), 0);
                CHECK_EQ_INT(store_put(r, &a.key, a.rec.buf, a.rec.len, NULL, a.secs, a.n, 0), 0);
                tamper(port, &a.key, shapes[sh].bad, hows[t]);
                CHECK_EQ_INT(store_pull(r, l, &a.key, a.rec.buf, a.rec.len, STORE_PUT_REFETCHABLE, &put_failed),
                             codes[t]);
                CHECK_EQ_INT(put_failed, 0);
                CHECK(!local_has(l, &a));
                CHECK(strstr(store_errmsg(r), t < 2 ? "refused" : "is gone") != NULL);
                /* The refused entry is pushed anew (a rebuild heals the remote), then pulled whole. */
                CHECK_EQ_INT(store_put(r, &a.key, a.rec.buf, a.rec.len, NULL, a.secs, a.n, 0), 0);
                CHECK_EQ_INT(store_pull(r, l, &a.key, a.rec.buf, a.rec.len, STORE_PUT_REFETCHABLE, &put_failed), 0);
                CHECK(local_has(l, &a));
                CHECK(store_state(r) & STORE_UP);
            }
            CHECK_EQ_INT(store_remove(r, &a.key), 0);
            art_free(&a);
            store_close(l);
            tmpdir_rm(dir);
        }
    store_close(r);
}

int main(void) {
    RUN(lmdb_store_conforms);
    RUN(redis_store_conforms);
    RUN(copy_from_redis_into_lmdb);
    RUN(pull_streams_and_refuses);
    TEST_MAIN_END();
}
