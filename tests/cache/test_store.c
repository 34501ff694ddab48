/* test_store.c — the storage seam (store.h): the same conformance checks
 * run against the LMDB cache and, when $MILC_TEST_REDIS_PORT names a
 * redis-server (tests/remote/test_store.sh starts one), the Redis tier; and
 * a copy from the shared tier into the local cache as a pull does it. */
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

int main(void) {
    RUN(lmdb_store_conforms);
    RUN(redis_store_conforms);
    RUN(copy_from_redis_into_lmdb);
    TEST_MAIN_END();
}
