/* test_cache_procs.c — many processes on one cache: concurrent writers of
 * the same keys, readers checking every byte they are handed, eviction and
 * a refused compaction running alongside; SIGKILL at random instants during
 * big stores (MILC_CACHE_KILL_ITERS, default 30); growth of the map by
 * another process while this one has it open, and by several while others
 * open it with a small map. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"
#include "util.h"

/* Artifact `seed` has 1–4 sections whose sizes follow from the seed, so any
 * process can check any entry it finds. */
static int sizes_of(uint64_t seed, uint64_t max_section, uint64_t *sz) {
    uint64_t r = mix64(seed);
    int n = 1 + (int)(r % 4);
    for (int i = 0; i < n; i++) sz[i] = (mix64(r + (uint64_t)i) % max_section) + (i == 0);
    return n;
}

/* whole: CacheOptions.whole_bytes (1 MiB: sections over 1 MiB split over
 * several values, the layout older milcs wrote; 0: each in a value of its own) */
static Cache *open_layout(const char *dir, int no_sync, uint64_t map, uint64_t whole) {
    CacheOptions o = {.no_sync = no_sync, .map_size = map, .chunk_bytes = 1 << 20, .whole_bytes = whole};
    Cache *c = NULL;
    char err[512];
    int rc = cache_open(&c, dir, &o, err, sizeof err);
    if (rc) {
        fprintf(stderr, "[%d] cache_open: %s\n", (int)getpid(), err);
        _exit(10);
    }
    return c;
}

static Cache *open_or_die(const char *dir, int no_sync, uint64_t map) { return open_layout(dir, no_sync, map, 0); }

/* refetch: a pulled entry's put (no sync, its direct key in the same
 * transaction: the seed's key with a bit flipped, mapped to the entry). */
static int put_seed_as(Cache *c, uint64_t seed, uint64_t max_section, int refetch) {
    uint64_t sz[4];
    int n = sizes_of(seed, max_section, sz);
    TestArt a;
    art_make(&a, seed, sz, n);
    char desc[64];
    snprintf(desc, sizeof desc, "seed=%llu max=%llu", (unsigned long long)seed, (unsigned long long)max_section);
    CacheEntryMeta m = {.description = desc, .backend = "cpu", .mode = 2, .compile_ns = 1000};
    CacheKey dk = a.key;
    dk.b[0] ^= 0x80;
    CachePutOptions po = {.flags = CACHE_PUT_REFETCHABLE, .dkey = &dk, .drecord = "d", .drecord_len = 1};
    int rc = refetch ? cache_put_ex(c, &a.key, a.rec.buf, a.rec.len, &m, a.secs, a.n, &po) : art_put(c, &a, desc);
    art_free(&a);
    return rc;
}

static int put_seed(Cache *c, uint64_t seed, uint64_t max_section) { return put_seed_as(c, seed, max_section, 0); }

/* Look up seed; 1 = hit with the right bytes, 0 = miss, -1 = wrong bytes. */
static int check_seed(Cache *c, uint64_t seed, uint64_t max_section, unsigned flags) {
    uint64_t sz[4];
    int n = sizes_of(seed, max_section, sz);
    CacheKeyBuilder rec; /* the same record art_make builds */
    ckey_init(&rec);
    ckey_add_u64(&rec, 0x5645524Bu, 1);
    ckey_add_u64(&rec, 0x44454553u, seed);
    ckey_add_u64(&rec, 0x4E534543u, (uint64_t)n);
    CacheKey k;
    ckey_finish(&rec, &k);
    CacheHit *h;
    int rc = cache_get(c, &k, rec.buf, rec.len, flags, &h), out;
    if (rc == 0) {
        out = hit_matches(h, seed, sz, n) ? 1 : -1;
        cache_hit_release(h);
    } else {
        out = CACHE_IS_MISS(rc) && rc != CACHE_ECORRUPT ? 0 : -1;
        if (out < 0)
            fprintf(stderr, "[%d] get seed %llu: %s: %s\n", (int)getpid(), (unsigned long long)seed, cache_strerror(rc),
                    cache_errmsg(c));
    }
    ckey_free(&rec);
    return out;
}

enum { KEYS = 24, WRITERS = 3, READERS = 2 };

/* Start line: each child reports that it has the cache open, then waits until
 * the parent closes the go pipe, so all run at once. */
static int ready_pipe[2], go_pipe[2];
static void start_line(void) {
    char b;
    if (write(ready_pipe[1], "r", 1) != 1) _exit(20);
    close(go_pipe[1]);
    if (read(go_pipe[0], &b, 1) != 0) _exit(21);
}
#define MAXSEC (600u << 10)

static void writer(const char *dir, int w) {
    Cache *c = open_or_die(dir, 1, 4 << 20);
    start_line();
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < KEYS; i++) {
            int k = (i * (w + 1) * 7 + round) % KEYS; /* each writer its own order */
            int rc = put_seed(c, 1000 + (uint64_t)k, MAXSEC);
            if (rc) {
                fprintf(stderr, "[writer %d] put: %s: %s\n", w, cache_strerror(rc), cache_errmsg(c));
                _exit(1);
            }
        }
    cache_close(c);
    _exit(0);
}

static void reader(const char *dir, int r) {
    Cache *c = open_or_die(dir, 1, 4 << 20);
    start_line();
    int hits = 0;
    for (int i = 0; i < 3000 && hits < 100; i++) {
        usleep(1000);
        int res = check_seed(c, 1000 + mix64((uint64_t)(r * 1000 + i)) % KEYS, MAXSEC, i % 2 ? CACHE_GET_VERIFY : 0);
        if (res < 0) _exit(1);
        hits += res;
    }
    cache_close(c);
    _exit(hits > 0 ? 0 : 2);
}

static void evictor(const char *dir) {
    Cache *c = open_or_die(dir, 1, 4 << 20);
    start_line();
    for (int i = 0; i < 20; i++) {
        CacheGcReport r;
        int rc = cache_gc(c, 4u << 20, 0, 1, &r);
        /* Others have the cache open: compaction must be skipped, not done. */
        if (rc || r.compacted) {
            fprintf(stderr, "[evictor] gc rc %d compacted %d: %s\n", rc, r.compacted, cache_errmsg(c));
            _exit(1);
        }
        usleep(2000);
    }
    cache_close(c);
    _exit(0);
}

static int wait_all(pid_t *pids, int n) {
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int st;
        waitpid(pids[i], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "child %d: %s %d\n", i, WIFEXITED(st) ? "exit" : "signal",
                    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
            bad++;
        }
    }
    return bad;
}

typedef struct Sum {
    uint64_t n, bytes;
} Sum;
static int sum_cb(void *ctx, const CacheEntryInfo *e) {
    Sum *s = ctx;
    s->n++, s->bytes += e->bytes;
    return 0;
}

TEST(writers_readers_evictor_at_once) {
    char *dir = tmpdir_new("procs");
    pid_t pids[WRITERS + READERS + 1];
    int n = 0;
    CHECK(pipe(ready_pipe) == 0 && pipe(go_pipe) == 0);
    for (int w = 0; w < WRITERS; w++)
        if ((pids[n++] = fork()) == 0) writer(dir, w);
    for (int r = 0; r < READERS; r++)
        if ((pids[n++] = fork()) == 0) reader(dir, r);
    if ((pids[n++] = fork()) == 0) evictor(dir);
    char b;
    for (int i = 0; i < n; i++) CHECK(read(ready_pipe[0], &b, 1) == 1);
    close(go_pipe[1]);
    CHECK_EQ_INT(wait_all(pids, n), 0);
    close(go_pipe[0]), close(ready_pipe[0]), close(ready_pipe[1]);
    Cache *c = open_or_die(dir, 1, 0);
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    Sum s = {0};
    cache_ls(c, sum_cb, &s);
    CacheStats st;
    cache_stat(c, &st);
    CHECK_EQ_INT(st.entries, s.n);
    CHECK_EQ_INT(st.bytes, s.bytes);
    CHECK(s.n > 0);
    for (int i = 0; i < KEYS; i++) CHECK(check_seed(c, 1000 + (uint64_t)i, MAXSEC, CACHE_GET_VERIFY) >= 0);
    /* Now alone: compaction goes ahead. */
    CacheGcReport r;
    CHECK_EQ_INT(cache_gc(c, 0, 0, 1, &r), 0);
    CHECK_EQ_INT(r.compacted, 1);
    cache_close(c);
    tmpdir_rm(dir);
}

/* Every listed entry must carry a description put_seed wrote. */
typedef struct Audit {
    int bad, n;
} Audit;
static int audit_cb(void *ctx, const CacheEntryInfo *e) {
    Audit *a = ctx;
    unsigned long long seed, max;
    if (sscanf(e->description, "seed=%llu max=%llu", &seed, &max) != 2) {
        a->bad++;
        return 0;
    }
    a->n++;
    return 0;
}

TEST(sigkill_during_stores_never_leaves_a_partial_entry) {
    const char *env = getenv("MILC_CACHE_KILL_ITERS");
    int iters = env ? atoi(env) : 30;
    char *dir = tmpdir_new("kill");
    {
        Cache *c = open_or_die(dir, 1, 0);
        cache_set_limit(c, 48u << 20);
        cache_close(c);
    }
    srand((unsigned)time(NULL));
    int total_seen = 0;
    for (int it = 0; it < iters; it++) {
        pid_t pid = fork();
        if (pid == 0) {
            /* Durable, unsynced (no_sync) and pulled (refetchable) stores,
             * large sections whole or split. */
            Cache *c = open_layout(dir, it % 3 == 1, 8 << 20, it % 2 ? 1 << 20 : 0);
            for (uint64_t j = 0;; j++)
                if (put_seed_as(c, (uint64_t)it * 1000 + j, 6u << 20, it % 3 == 2) != 0) _exit(1);
        }
        usleep((useconds_t)(rand() % 150000));
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st)); /* it died mid-work, not by failing */
        Cache *c = open_or_die(dir, 1, 0);
        int bad = cache_verify(c, 0, NULL, NULL);
        CHECK_EQ_INT(bad, 0);
        Audit a = {0, 0};
        cache_ls(c, audit_cb, &a);
        CHECK_EQ_INT(a.bad, 0);
        total_seen += a.n;
        /* Every entry present holds exactly the bytes its seed says. */
        for (int back = 0; back <= it; back++)
            for (uint64_t j = 0; j < 40; j++)
                if (check_seed(c, (uint64_t)back * 1000 + j, 6u << 20, CACHE_GET_NOTOUCH) < 0) {
                    CHECK(0);
                    back = it + 1;
                    break;
                }
        cache_close(c);
        if (bad) break;
    }
    CHECK(total_seen > 0);
    tmpdir_rm(dir);
}

TEST(growth_by_another_process_is_adopted) {
    char *dir = tmpdir_new("resize");
    int go[2], done[2];
    CHECK(pipe(go) == 0 && pipe(done) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        if (read(go[0], &b, 1) != 1) _exit(3);
        Cache *c = open_or_die(dir, 1, 1 << 20);
        int rc = put_seed(c, 77, 8u << 20) || put_seed(c, 78, 8u << 20);
        cache_close(c);
        _exit(rc ? 1 : 0);
    }
    Cache *c = open_or_die(dir, 1, 1 << 20);
    CHECK_EQ_INT(put_seed(c, 76, 1000), 0);
    CacheStats before;
    cache_stat(c, &before);
    CHECK(write(go[1], "x", 1) == 1);
    CHECK_EQ_INT(wait_all(&pid, 1), 0);
    CHECK_EQ_INT(check_seed(c, 77, 8u << 20, CACHE_GET_VERIFY), 1);
    CHECK_EQ_INT(check_seed(c, 78, 8u << 20, CACHE_GET_VERIFY), 1);
    CHECK_EQ_INT(check_seed(c, 76, 1000, CACHE_GET_VERIFY), 1);
    CacheStats after;
    cache_stat(c, &after);
    CHECK(after.map_bytes > before.map_bytes);
    CHECK_EQ_INT(after.entries, 3);
    cache_close(c);
    close(go[0]), close(go[1]), close(done[0]), close(done[1]);
    tmpdir_rm(dir);
}

/* With WRITEMAP, LMDB ftruncates data.mdb to the map size of whoever maps
 * it.  Processes that open with a small map while others grow it must never
 * cut the file under a writer (that writer would die of SIGBUS mid-store). */
static void grower(const char *dir, int g) {
    start_line();
    for (int i = 0; i < 6; i++) {
        Cache *c = open_or_die(dir, 1, 1 << 20);
        if (put_seed(c, 5000 + (uint64_t)(g * 100 + i), 3u << 20) != 0) _exit(1);
        cache_close(c);
    }
    _exit(0);
}

static void small_opener(const char *dir) {
    start_line();
    for (int i = 0; i < 60; i++) {
        Cache *c = open_or_die(dir, 1, 1 << 20);
        if (check_seed(c, 5000 + (uint64_t)(i % 6), 3u << 20, 0) < 0) _exit(1);
        cache_close(c);
    }
    _exit(0);
}

TEST(small_maps_never_cut_the_file_under_a_grower) {
    char *dir = tmpdir_new("shrink");
    pid_t pids[4];
    int n = 0;
    CHECK(pipe(ready_pipe) == 0 && pipe(go_pipe) == 0);
    for (int g = 0; g < 2; g++)
        if ((pids[n++] = fork()) == 0) grower(dir, g);
    for (int o = 0; o < 2; o++)
        if ((pids[n++] = fork()) == 0) small_opener(dir);
    char b;
    for (int i = 0; i < n; i++) CHECK(read(ready_pipe[0], &b, 1) == 1);
    close(go_pipe[1]);
    CHECK_EQ_INT(wait_all(pids, n), 0);
    close(go_pipe[0]), close(ready_pipe[0]), close(ready_pipe[1]);
    Cache *c = open_or_die(dir, 1, 1 << 20);
    CHECK_EQ_INT(cache_verify(c, 0, NULL, NULL), 0);
    for (int g = 0; g < 2; g++)
        for (int i = 0; i < 6; i++) CHECK_EQ_INT(check_seed(c, 5000 + (uint64_t)(g * 100 + i), 3u << 20, 0), 1);
    cache_close(c);
    tmpdir_rm(dir);
}

/* Every operation adopts growth by another process (MDB_MAP_RESIZED from
 * mdb_txn_begin): this handle maps 1 MiB, a child grows the file past it,
 * then the operation runs.  Each op gets a fresh directory, so the file only
 * has to grow once per op. */
enum {
    OP_GET,
    OP_LS,
    OP_SHOW,
    OP_STAT,
    OP_VERIFY,
    OP_REPAIR,
    OP_EXPORT,
    OP_IMPORT,
    OP_FLUSH,
    OP_PUT,
    OP_LIMIT,
    OP_ZERO,
    OP_GC,
    OP_COMPACT,
    OP_COUNT
};

static int run_op(Cache *c, int op, const char *dir) {
    char bundle[4200];
    snprintf(bundle, sizeof bundle, "%s.bndl", dir);
    CacheStats st;
    CacheGcReport r;
    Sum sum = {0};
    switch (op) {
    case OP_GET: return check_seed(c, 76, 1000, CACHE_GET_VERIFY) == 1 ? 0 : -100;
    case OP_LS: return cache_ls(c, sum_cb, &sum) ? -100 : sum.n == 2 ? 0 : -101;
    case OP_SHOW: {
        CacheKeyBuilder b;
        ckey_init(&b);
        ckey_add_u64(&b, 0x5645524Bu, 1), ckey_add_u64(&b, 0x44454553u, 76);
        uint64_t sz[4];
        ckey_add_u64(&b, 0x4E534543u, (uint64_t)sizes_of(76, 1000, sz));
        CacheKey k;
        ckey_finish(&b, &k);
        ckey_free(&b);
        return cache_show(c, &k, sum_cb, &sum) ? -100 : sum.n == 1 ? 0 : -101;
    }
    case OP_STAT: return cache_stat(c, &st) ? -100 : st.entries == 2 ? 0 : -101;
    case OP_VERIFY: return cache_verify(c, 0, NULL, NULL);
    case OP_REPAIR: return cache_verify(c, 1, NULL, NULL);
    case OP_EXPORT: {
        int rc = cache_export(c, bundle, NULL, 0); /* entries written */
        unlink(bundle);
        return rc == 2 ? 0 : rc < 0 ? rc : -101;
    }
    case OP_IMPORT: {
        int rc = cache_import(c, bundle); /* written before the growth */
        unlink(bundle);
        return rc < 0 ? rc : 0;
    }
    case OP_FLUSH: return cache_flush(c);
    case OP_PUT: return put_seed(c, 79, 1000);
    case OP_LIMIT: return cache_set_limit(c, 1u << 30);
    case OP_ZERO: return cache_zero_stats(c);
    case OP_GC: return cache_gc(c, 1u << 30, 0, 0, &r);
    case OP_COMPACT: return cache_gc(c, 1u << 30, 0, 1, &r) ? -100 : r.compacted == 1 ? 0 : -101;
    }
    return -1;
}

TEST(every_operation_adopts_growth_by_another_process) {
    for (int op = 0; op < OP_COUNT; op++) {
        char *dir = tmpdir_new("adopt");
        Cache *c = open_or_die(dir, 1, 1 << 20);
        CHECK_EQ_INT(put_seed(c, 76, 1000), 0);
        check_seed(c, 76, 1000, 0); /* a pending hit for flush to write */
        if (op == OP_IMPORT) {
            char bundle[4200];
            snprintf(bundle, sizeof bundle, "%s.bndl", dir);
            CHECK_EQ_INT(cache_export(c, bundle, NULL, 0), 1);
        }
        CacheStats before;
        cache_stat(c, &before);
        pid_t pid = fork();
        if (pid == 0) {
            Cache *g = open_or_die(dir, 1, 1 << 20);
            int rc = put_seed(g, 77, 8u << 20);
            cache_close(g);
            _exit(rc ? 1 : 0);
        }
        CHECK_EQ_INT(wait_all(&pid, 1), 0);
        CHECK(file_bytes(dir, "data.mdb") > before.map_bytes);
        int rc = run_op(c, op, dir);
        if (rc) fprintf(stderr, "op %d: rc %d: %s\n", op, rc, cache_errmsg(c));
        CHECK_EQ_INT(rc, 0);
        CHECK_EQ_INT(check_seed(c, 77, 8u << 20, CACHE_GET_VERIFY), 1);
        cache_close(c);
        tmpdir_rm(dir);
    }
}

int main(void) {
    RUN(every_operation_adopts_growth_by_another_process);
    RUN(writers_readers_evictor_at_once);
    RUN(sigkill_during_stores_never_leaves_a_partial_entry);
    RUN(growth_by_another_process_is_adopted);
    RUN(small_maps_never_cut_the_file_under_a_grower);
    TEST_MAIN_END();
}
