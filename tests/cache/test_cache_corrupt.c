/* test_cache_corrupt.c — damage: a truncated or overwritten data.mdb must
 * give a clear error naming the file and the cure (never a crash); damaged
 * entry bytes are a counted miss that verify reports and the next put heals;
 * cache_destroy recovers a damaged directory. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "test.h"
#include "util.h"

/* A small map keeps data.mdb (as long as the map: sparse) small to copy. */
static Cache *open_ok(const char *dir) {
    CacheOptions o = {.no_sync = 1, .map_size = 1 << 20};
    Cache *c = NULL;
    char err[512];
    int rc = cache_open(&c, dir, &o, err, sizeof err);
    if (rc) fprintf(stderr, "cache_open: %s\n", err);
    return c;
}

static int open_err(const char *dir, char *err, size_t errlen) {
    CacheOptions o = {.no_sync = 1, .map_size = 1 << 20};
    Cache *c = NULL;
    int rc = cache_open(&c, dir, &o, err, errlen);
    if (c) cache_close(c);
    return rc;
}

static void fill_cache(const char *dir, TestArt *a, int n, const uint64_t *sz, int nsz) {
    Cache *c = open_ok(dir);
    for (int i = 0; i < n; i++) {
        art_make(&a[i], 200 + i, sz, nsz);
        art_put(c, &a[i], "victim");
    }
    cache_close(c);
}

static uint8_t *slurp(const char *dir, size_t *len) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*len);
    if (fread(b, 1, *len, f) != *len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

static void poke(const char *dir, uint64_t off, const void *bytes, size_t n) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    int fd = open(p, O_WRONLY);
    if (pwrite(fd, bytes, n, (off_t)off) != (ssize_t)n) perror("pwrite");
    close(fd);
}

static int expect_damaged(const char *dir, const char *what) {
    char err[512] = "", path[4200];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    int rc = open_err(dir, err, sizeof err);
    int ok = rc == CACHE_ECORRUPT && strstr(err, path) && strstr(err, "cache_destroy") && !strstr(err, "milc ") &&
             strstr(err, what);
    if (!ok) fprintf(stderr, "rc %d (%s), message: %s\n", rc, cache_strerror(rc), err);
    return ok;
}

TEST(truncated_file_is_a_clear_error) {
    uint64_t sz[] = {300000, 5000};
    static const uint64_t cuts[] = {100, 4096, 4096 + 200, 8192, 3 * 4096, 0 /* half */, 1 /* minus a page */};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        char *dir = tmpdir_new("trunc");
        TestArt a[3];
        fill_cache(dir, a, 3, sz, 2);
        /* Cut into the pages in use (the file runs on, sparse, to the map's end). */
        uint64_t full = used_bytes(dir), cut = cuts[i];
        CHECK(full > 3 * 4096 && full <= file_bytes(dir, "data.mdb"));
        if (cut == 0) cut = full / 2;
        if (cut == 1) cut = full - 4096;
        char p[4200];
        snprintf(p, sizeof p, "%s/data.mdb", dir);
        CHECK(truncate(p, (off_t)cut) == 0);
        CHECK(expect_damaged(dir, "truncated"));
        /* The cure works. */
        char err[256];
        CHECK_EQ_INT(cache_destroy(dir, err, sizeof err), 0);
        Cache *c = open_ok(dir);
        CHECK(c != NULL);
        if (c) {
            CHECK_EQ_INT(art_put(c, &a[0], "again"), 0);
            cache_close(c);
        }
        for (int j = 0; j < 3; j++) art_free(&a[j]);
        tmpdir_rm(dir);
    }
}

/* Past the pages in use the file is only the map's sparse tail: cutting it
 * off loses nothing, and the next open maps (and extends) it again. */
TEST(truncating_the_unused_tail_is_harmless) {
    char *dir = tmpdir_new("tail");
    uint64_t sz[] = {300000, 5000};
    TestArt a[2];
    fill_cache(dir, a, 2, sz, 2);
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    uint64_t used = used_bytes(dir);
    CHECK(used > 0 && used < file_bytes(dir, "data.mdb"));
    CHECK(truncate(p, (off_t)used) == 0);
    Cache *c = open_ok(dir);
    CHECK(c != NULL);
    for (int i = 0; c && i < 2; i++) {
        CacheHit *h;
        CHECK_EQ_INT(cache_get(c, &a[i].key, a[i].rec.buf, a[i].rec.len, CACHE_GET_VERIFY, &h), 0);
        CHECK(hit_matches(h, 200 + (uint64_t)i, sz, 2));
        cache_hit_release(h);
    }
    if (c) cache_close(c);
    for (int j = 0; j < 2; j++) art_free(&a[j]);
    tmpdir_rm(dir);
}

TEST(overwritten_meta_page_is_a_clear_error) {
    uint64_t sz[] = {10000};
    struct {
        uint64_t off;
        uint8_t bytes[8];
        const char *what;
    } cases[] = {
        {16, {0, 0, 0, 0}, "bad magic in meta page 0"},
        {4096 + 16, {1, 2, 3, 4}, "bad magic in meta page 1"},
        {20, {9}, "unknown LMDB format version 9"},
        {16 + 120, {0xff, 0xff, 0xff, 0, 0, 0, 0, 0}, "truncated?"},        /* last_pg */
        {4096 + 16 + 120, {0x40, 0x42, 0x0f, 0, 0, 0, 0, 0}, "truncated?"}, /* last_pg */
        {16 + 24 + 48 + 40, {0x77, 0x77, 0, 0, 0, 0, 0, 0}, "main tree: root page out of range"},
        /* Database records LMDB trusts: flags claiming sorted duplicates made
         * it abort in mdb_cursor_init (tests/torture/repro/lmdb-abort.sh). */
        {4096 + 16 + 24 + 4, {0xff, 0xff, 0xff, 0xff}, "meta page 1: free-list tree: unexpected database flags"},
        {16 + 24 + 4, {0x04, 0}, "meta page 0: free-list tree: unexpected database flags"},
        {16 + 24 + 48 + 4, {0x04, 0}, "meta page 0: main tree: unexpected database flags"},
        {4096 + 16 + 24 + 48 + 6, {33, 0}, "meta page 1: main tree: bad tree depth"},
        /* LMDB sized a buffer by the newer meta's page size (fuzz_cachefile: 4 GB calloc). */
        {4096 + 16 + 24, {0, 0, 0xff, 0xfe, 8, 0, 0, 0}, "meta page 1: page size 4278124544 differs"},
        /* ... and divided by it: SIGFPE (tests/torture/repro/lmdb-damage.sh, lmdb-fpe). */
        {4096 + 16 + 24, {0, 0, 0, 0, 8, 0, 0, 0}, "meta page 1: page size 0 differs"},
        {16 + 24, {0x01, 0x30, 0, 0}, "bad page size"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = tmpdir_new("meta");
        TestArt a[1];
        fill_cache(dir, a, 1, sz, 1);
        poke(dir, cases[i].off, cases[i].bytes, 8);
        if (!expect_damaged(dir, cases[i].what)) {
            fprintf(stderr, "case %zu\n", i);
            CHECK(0);
        }
        art_free(&a[0]);
        tmpdir_rm(dir);
    }
}

/* The record of named database `name` in the main DB's leaf page(s): a node
 * u16 lo=48, u16 hi=0, u16 flags=F_SUBDATA, u16 key size, key, then the
 * 48-byte MDB_db (u32 pad, u16 flags, u16 depth, 4 x u64, u64 root).  Older
 * copies of the page may match too; all are changed. */
static int poke_db_record(const char *dir, const char *name, size_t field, const void *bytes, size_t n) {
    size_t len, klen = strlen(name);
    uint8_t *b = slurp(dir, &len), pat[8 + 16] = {48, 0, 0, 0, 2, 0, (uint8_t)klen, 0};
    memcpy(pat + 8, name, klen);
    int found = 0;
    for (size_t o = 0; b && o + 8 + klen + 48 <= len; o++)
        if (!memcmp(b + o, pat, 8 + klen)) poke(dir, o + 8 + klen + field, bytes, n), found++;
    free(b);
    return found;
}

TEST(damaged_database_records_are_a_clear_error) {
    uint64_t sz[] = {10000};
    struct {
        const char *db;
        size_t field;
        uint8_t bytes[8];
        size_t n;
        const char *what;
    } cases[] = {
        {"data", 4, {0x04, 0}, 2, "unexpected database flags"}, /* MDB_DUPSORT */
        {"meta", 4, {0xff, 0xff}, 2, "unexpected database flags"},
        {"usage", 4, {0x08, 0}, 2, "unexpected database flags"}, /* MDB_INTEGERKEY */
        {"data", 6, {0, 0}, 2, "bad tree depth"},
        {"counters", 6, {40, 0}, 2, "bad tree depth"},
        {"meta", 40, {0x00, 0x00, 0x10, 0, 0, 0, 0, 0}, 8, "root page out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *dir = tmpdir_new("dbrec");
        TestArt a[1];
        fill_cache(dir, a, 1, sz, 1);
        CHECK(poke_db_record(dir, cases[i].db, cases[i].field, cases[i].bytes, cases[i].n) > 0);
        if (!expect_damaged(dir, cases[i].what)) {
            fprintf(stderr, "case %zu\n", i);
            CHECK(0);
        }
        art_free(&a[0]);
        tmpdir_rm(dir);
    }
}

static int nbad;
static void on_bad(void *ctx, const CacheKey *k, const char *why) {
    nbad++;
    if (!strstr(why, (const char *)ctx)) fprintf(stderr, "unexpected reason: %s\n", why), nbad += 1000;
}

TEST(damaged_entry_bytes_are_a_counted_miss_and_heal) {
    char *dir = tmpdir_new("bytes");
    uint64_t sz[] = {200000, 7000};
    TestArt a[2];
    fill_cache(dir, a, 2, sz, 2);
    size_t len;
    uint8_t *file = slurp(dir, &len);
    /* Find section 1 of entry 0 in the file and flip a byte in its middle. */
    uint8_t *hit = memmem(file, len, (const uint8_t *)a[0].secs[1].data + 3000, 32);
    CHECK(hit != NULL);
    uint8_t x = hit[5] ^ 0x40;
    poke(dir, (uint64_t)(hit - file) + 5, &x, 1);
    free(file);
    Cache *c = open_ok(dir);
    CacheHit *h;
    /* Without verification the damage is not seen (the documented fast path). */
    CHECK_EQ_INT(cache_get(c, &a[0].key, a[0].rec.buf, a[0].rec.len, 0, &h), 0);
    cache_hit_release(h);
    CHECK_EQ_INT(cache_get(c, &a[0].key, a[0].rec.buf, a[0].rec.len, CACHE_GET_VERIFY, &h), CACHE_ECORRUPT);
    CHECK(strstr(cache_errmsg(c), "checksum mismatch") != NULL);
    CHECK_EQ_INT(cache_get(c, &a[1].key, a[1].rec.buf, a[1].rec.len, CACHE_GET_VERIFY, &h), 0);
    cache_hit_release(h);
    CacheStats st;
    cache_stat(c, &st);
    CHECK_EQ_INT(st.errors, 1);
    nbad = 0;
    CHECK_EQ_INT(cache_verify(c, 0, on_bad, "checksum mismatch"), 1);
    CHECK_EQ_INT(nbad, 1);
    cache_stat(c, &st);
    CHECK_EQ_INT(st.entries, 2);
    /* The next store heals it. */
    CHECK_EQ_INT(art_put(c, &a[0], "healed"), 0);
    CHECK_EQ_INT(cache_get(c, &a[0].key, a[0].rec.buf, a[0].rec.len, CACHE_GET_VERIFY, &h), 0);
    CHECK(hit_matches(h, 200, sz, 2));
    cache_hit_release(h);
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    cache_close(c);
    for (int j = 0; j < 2; j++) art_free(&a[j]);
    tmpdir_rm(dir);
}

TEST(damaged_entry_metadata_is_a_miss_and_repair_removes_it) {
    char *dir = tmpdir_new("emeta");
    uint64_t sz[] = {5000};
    TestArt a[2];
    fill_cache(dir, a, 2, sz, 1);
    size_t len;
    uint8_t *file = slurp(dir, &len);
    /* Entry metadata starts with "MCE1"; make each copy's section 0 one byte longer. */
    int n = 0;
    for (uint8_t *p = file; (p = memmem(p, len - (size_t)(p - file), "MCE1", 4)) != NULL; p += 4) {
        uint8_t x = p[80 + 8] ^ 1; /* low byte of section 0's size */
        poke(dir, (uint64_t)(p - file) + 80 + 8, &x, 1);
        n++;
    }
    CHECK(n >= 2); /* older copies of the pages may still be in the file */
    free(file);
    Cache *c = open_ok(dir);
    CacheHit *h;
    CHECK_EQ_INT(cache_get(c, &a[0].key, a[0].rec.buf, a[0].rec.len, 0, &h), CACHE_ECORRUPT);
    CHECK(strstr(cache_errmsg(c), "section 0 out of bounds") != NULL);
    nbad = 0;
    CHECK_EQ_INT(cache_verify(c, 1, on_bad, "damaged"), 2);
    CHECK_EQ_INT(nbad, 2);
    CacheStats st;
    cache_stat(c, &st);
    CHECK_EQ_INT(st.entries, 0);
    CHECK_EQ_INT(st.bytes, 0);
    CHECK_EQ_INT(cache_get(c, &a[0].key, a[0].rec.buf, a[0].rec.len, 0, &h), CACHE_ENOTFOUND);
    cache_close(c);
    for (int j = 0; j < 2; j++) art_free(&a[j]);
    tmpdir_rm(dir);
}

TEST(destroy_refuses_while_open) {
    char *dir = tmpdir_new("destroy");
    Cache *c = open_ok(dir);
    char err[512];
    CHECK_EQ_INT(cache_destroy(dir, err, sizeof err), CACHE_EBUSY);
    CHECK(strstr(err, "in use") != NULL);
    cache_close(c);
    CHECK_EQ_INT(cache_destroy(dir, err, sizeof err), 0);
    CHECK_EQ_INT(file_bytes(dir, "data.mdb"), 0);
    tmpdir_rm(dir);
}

static int count_cb(void *ctx, const CacheEntryInfo *e) {
    ++*(int *)ctx;
    return 0;
}

/* Bytes overwritten in LMDB's own B-tree pages (branch and leaf pages, where
 * LMDB would follow garbage offsets and page numbers): every operation either
 * works or fails with an error; the process never dies.  Each trial runs in a
 * child so a crash is seen as a signal.  MILC_CACHE_CORRUPT_ITERS sets the
 * number of trials (default 150). */
TEST(overwritten_tree_pages_never_crash) {
    const char *env = getenv("MILC_CACHE_CORRUPT_ITERS");
    int iters = env ? atoi(env) : 150;
    char *dir = tmpdir_new("tree");
    Cache *c = open_ok(dir);
    TestArt a[40];
    for (int i = 0; i < 40; i++) {
        uint64_t sz[] = {1000 + (uint64_t)i * 300, 20000, 10};
        art_make(&a[i], (uint64_t)i, sz, 3);
        art_put(c, &a[i], "x");
    }
    cache_close(c);
    size_t len;
    uint8_t *orig = slurp(dir, &len);
    /* Tree pages: flags at byte 10 of a page say branch (1) or leaf (2). */
    size_t pages[1024], np = 0;
    for (size_t pg = 2; pg < len / 4096 && np < 1024; pg++)
        if (orig[pg * 4096 + 10] == 1 || orig[pg * 4096 + 10] == 2) pages[np++] = pg;
    CHECK(np >= 10);
    char path[4200], lock[4200];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    snprintf(lock, sizeof lock, "%s/lock.mdb", dir);
    int crashes = 0, refused = 0;
    uint64_t r = 12345;
    for (int it = 0; it < iters && np; it++) {
        FILE *f = fopen(path, "wb");
        fwrite(orig, 1, len, f);
        fclose(f);
        unlink(lock);
        for (int k = 0; k < 3; k++) {
            r = mix64(r);
            size_t pg = pages[r % np];
            /* Half the hits in the page header and node offsets, half anywhere. */
            size_t off = pg * 4096 + ((r >> 20) % 2 ? (r >> 32) % 64 : (r >> 32) % 4096);
            uint8_t b = (uint8_t)(r >> 8);
            poke(dir, off, &b, 1);
        }
        pid_t pid = fork();
        if (pid == 0) {
            Cache *cc;
            char err[512];
            CacheOptions o = {.no_sync = 1, .map_size = 1 << 20};
            if (cache_open(&cc, dir, &o, err, sizeof err) != 0)
                _exit(strstr(err, "cache_destroy") && !strstr(err, "milc ") ? 3 : 4);
            int n = 0;
            cache_ls(cc, count_cb, &n);
            for (int i = 0; i < 40; i++) {
                CacheHit *h;
                if (cache_get(cc, &a[i].key, a[i].rec.buf, a[i].rec.len, CACHE_GET_VERIFY, &h) == 0) {
                    if (!hit_matches(h, (uint64_t)i, (uint64_t[]){1000 + (uint64_t)i * 300, 20000, 10}, 3)) _exit(5);
                    cache_hit_release(h);
                }
            }
            cache_verify(cc, 1, NULL, NULL);
            uint64_t sz[] = {5000};
            TestArt b;
            art_make(&b, 999, sz, 1);
            art_put(cc, &b, "after");
            cache_close(cc);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3)) {
            fprintf(stderr, "trial %d: %s %d\n", it, WIFSIGNALED(st) ? "signal" : "exit",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
            crashes++;
        }
        refused += WIFEXITED(st) && WEXITSTATUS(st) == 3;
    }
    CHECK_EQ_INT(crashes, 0);
    CHECK(refused > 0); /* the walk at open did catch damage */
    free(orig);
    for (int i = 0; i < 40; i++) art_free(&a[i]);
    tmpdir_rm(dir);
}

/* The txnids of both meta pages: any commit changes one of them. */
static uint64_t meta_txnids(const char *dir) {
    size_t len;
    uint8_t *b = slurp(dir, &len);
    uint64_t t0 = 0, t1 = 0;
    if (b && len >= 8192) memcpy(&t0, b + 16 + 128, 8), memcpy(&t1, b + 4096 + 16 + 128, 8);
    free(b);
    return t0 * 1000003u + t1;
}

/* Verify without repair only reads (it must run on a full disk), even with
 * statistics pending and a damaged entry; repair writes. */
TEST(verify_without_repair_writes_nothing) {
    char *dir = tmpdir_new("verro");
    uint64_t sz[] = {20000, 3000};
    TestArt a[3];
    fill_cache(dir, a, 3, sz, 2);
    /* Damage entry 1's bytes (a pattern run only its seed has). */
    size_t len;
    uint8_t *b = slurp(dir, &len), probe[64];
    pattern_fill(probe, sizeof probe, 201 * 1000);
    for (size_t o = 0; b && o + 64 <= len; o++)
        if (!memcmp(b + o, probe, 64)) {
            poke(dir, o + 10, "\xff", 1);
            break;
        }
    free(b);
    Cache *c = open_ok(dir);
    CacheHit *h;
    CHECK_EQ_INT(cache_get(c, &a[0].key, a[0].rec.buf, a[0].rec.len, 0, &h), 0);
    cache_hit_release(h); /* one hit pending */
    uint64_t t = meta_txnids(dir);
    nbad = 0;
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 1);
    CHECK(meta_txnids(dir) == t);
    CHECK_EQ_INT(cache_verify(c, 1, NULL, NULL), 1);
    CHECK(meta_txnids(dir) != t);
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    CacheStats st;
    CHECK_EQ_INT(cache_stat(c, &st), 0);
    CHECK_EQ_INT(st.entries, 2);
    CHECK_EQ_INT(st.hits, 1);
    cache_close(c);
    for (int i = 0; i < 3; i++) art_free(&a[i]);
    tmpdir_rm(dir);
}

static int fill_disk(const char *dir) {
    char p[4200];
    snprintf(p, sizeof p, "%s/fill", dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    static uint8_t buf[1 << 16];
    memset(buf, 1, sizeof buf);
    ssize_t w;
    while ((w = write(fd, buf, sizeof buf)) > 0) {}
    while ((w = write(fd, buf, 512)) > 0) {}
    int full = w < 0 && errno == ENOSPC;
    close(fd);
    return full;
}

/* On a full disk (a small tmpfs; needs root, else skipped) everything that
 * only reads works: open, hits (whose statistics cannot be written), ls,
 * show, stat, verify; a store fails cleanly with CACHE_EIO.  Runs in a child
 * so a SIGBUS is a failure, not a crash of the test. */
TEST(full_disk_reads_still_work) {
    char *dir = tmpdir_new("full");
    if (mount("tmpfs", dir, "tmpfs", 0, "size=8m") != 0) {
        fprintf(stderr, "full_disk_reads_still_work: skipped (cannot mount tmpfs: %s)\n", strerror(errno));
        tmpdir_rm(dir);
        return;
    }
    char cdir[4200];
    snprintf(cdir, sizeof cdir, "%s/c", dir);
    uint64_t sz[] = {300000, 5000};
    TestArt a[2];
    fill_cache(cdir, a, 2, sz, 2);
    pid_t pid = fork();
    if (pid == 0) {
        if (!fill_disk(dir)) _exit(10);
        for (int round = 0; round < 2; round++) {
            Cache *c = open_ok(cdir);
            if (!c) _exit(11);
            for (int k = 0; k < 20; k++) /* past FLUSH_EVERY: flushes are attempted and fail */
                for (int i = 0; i < 2; i++) {
                    CacheHit *h;
                    if (cache_get(c, &a[i].key, a[i].rec.buf, a[i].rec.len, CACHE_GET_VERIFY, &h)) _exit(12);
                    if (!hit_matches(h, 200 + (uint64_t)i, sz, 2)) _exit(13);
                    cache_hit_release(h);
                }
            int n = 0;
            CacheStats st;
            if (cache_ls(c, count_cb, &n) || n != 2) _exit(14);
            if (cache_show(c, &a[0].key, count_cb, &n) || n != 3) _exit(15);
            if (cache_stat(c, &st) || st.entries != 2 || st.hits < 40) _exit(16);
            if (cache_verify(c, 0, NULL, NULL) != 0) _exit(17);
            uint64_t big[] = {4u << 20};
            TestArt b;
            art_make(&b, 999, big, 1);
            int rc = art_put(c, &b, "no room");
            art_free(&b);
            if (rc != CACHE_EIO && rc != CACHE_EFULL) _exit(18);
            cache_close(c);
        }
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "child: %s %d\n", WIFEXITED(st) ? "exit" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    umount2(dir, MNT_DETACH);
    for (int i = 0; i < 2; i++) art_free(&a[i]);
    tmpdir_rm(dir);
}

/* A store that fails part way (a full disk: a small tmpfs, needs root; a
 * file-size limit: RLIMIT_FSIZE, EFBIG) publishes nothing: the entries
 * before it are served intact, the failed one is a miss, the file verifies,
 * the message names the errno as it is, and once there is room the same put
 * succeeds.  Both store paths: in place (disk reserved first, so the failure
 * comes before any byte is written) and LMDB's copy path (its pwrites at
 * commit fail in the middle).  In a child, so a SIGBUS or SIGXFSZ is a
 * failure, not a crash of the test. */
static int failed_put_leaves_nothing(const char *cdir, int classic, const char *errname, uint64_t fail_mb) {
    CacheOptions o = {.no_writemap = classic, .map_size = 1u << 20}; /* grows as the put needs */
    Cache *c;
    char err[512];
    if (cache_open(&c, cdir, &o, err, sizeof err) != 0) return 20;
    uint64_t big[] = {fail_mb << 20, 1000};
    TestArt b;
    art_make(&b, 777, big, 2);
    int rc = art_put(c, &b, "too big");
    int named = strstr(cache_errmsg(c), errname) != NULL;
    if (!named) fprintf(stderr, "message: %s\n", cache_errmsg(c));
    int out = rc != CACHE_EIO ? 21 : !named ? 22 : 0;
    CacheHit *h;
    if (!out && cache_get(c, &b.key, b.rec.buf, b.rec.len, 0, &h) != CACHE_ENOTFOUND) out = 23;
    art_free(&b);
    cache_close(c);
    return out;
}

TEST(failed_write_mid_stream_publishes_nothing) {
    for (int classic = 0; classic < 2; classic++) {
        char *dir = tmpdir_new("midfail");
        int mounted = mount("tmpfs", dir, "tmpfs", 0, "size=24m") == 0;
        if (!mounted) fprintf(stderr, "failed_write_mid_stream: no tmpfs (%s): ENOSPC case skipped\n", strerror(errno));
        char cdir[4200];
        snprintf(cdir, sizeof cdir, "%s/c", dir);
        uint64_t sz[] = {3u << 20, 5000};
        TestArt a[2];
        fill_cache(cdir, a, 2, sz, 2);
        for (int lim = !mounted; lim < 2; lim++) {
            pid_t pid = fork();
            if (pid == 0) {
                if (lim) {
                    /* A file-size limit just past what the file holds now. */
                    struct stat st;
                    char p[4300];
                    snprintf(p, sizeof p, "%s/data.mdb", cdir);
                    signal(SIGXFSZ, SIG_IGN);
                    if (stat(p, &st) != 0) _exit(30);
                    struct rlimit rl = {(rlim_t)st.st_size + (2u << 20), (rlim_t)st.st_size + (2u << 20)};
                    if (!classic) rl.rlim_cur = rl.rlim_max = (rlim_t)st.st_size; /* the map cannot grow */
                    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(31);
                    _exit(failed_put_leaves_nothing(cdir, classic, "EFBIG", 80));
                }
                _exit(failed_put_leaves_nothing(cdir, classic, "ENOSPC", 30));
            }
            int st;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                fprintf(stderr, "classic=%d lim=%d child: %s %d\n", classic, lim, WIFEXITED(st) ? "exit" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            /* What was there is served whole; the file verifies. */
            Cache *c = open_ok(cdir);
            CHECK(c != NULL);
            if (!c) break;
            for (int i = 0; i < 2; i++) {
                CacheHit *h;
                CHECK_EQ_INT(cache_get(c, &a[i].key, a[i].rec.buf, a[i].rec.len, CACHE_GET_VERIFY, &h), 0);
                if (h) {
                    CHECK(hit_matches(h, 200 + (uint64_t)i, sz, 2));
                    cache_hit_release(h);
                }
            }
            CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
            cache_close(c);
        }
        if (mounted) umount2(dir, MNT_DETACH);
        for (int i = 0; i < 2; i++) art_free(&a[i]);
        tmpdir_rm(dir);
    }
}

int main(void) {
    RUN(verify_without_repair_writes_nothing);
    RUN(full_disk_reads_still_work);
    RUN(failed_write_mid_stream_publishes_nothing);
    RUN(truncated_file_is_a_clear_error);
    RUN(truncating_the_unused_tail_is_harmless);
    RUN(overwritten_meta_page_is_a_clear_error);
    RUN(damaged_database_records_are_a_clear_error);
    RUN(damaged_entry_bytes_are_a_counted_miss_and_heal);
    RUN(damaged_entry_metadata_is_a_miss_and_repair_removes_it);
    RUN(destroy_refuses_while_open);
    RUN(overwritten_tree_pages_never_crash);
    TEST_MAIN_END();
}
