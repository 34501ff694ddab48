/* test_hit_ownership.c — a full-key hit whose direct-key write fails hands
 * nothing out and holds nothing (lib/src/pipeline.c).  The failure is real:
 * the cache lives on a small tmpfs (test_hit_ownership.sh mounts it) that
 * this test fills, so reserving disk for the direct key fails in the kernel.
 *
 *     test_hit_ownership CACHE_DIR (on the tmpfs) SCRATCH_DIR (elsewhere) TEMPLATE_DIR
 *
 * A build's hit held on (the defect) stops the map from growing, so after
 * the failure, with the disk freed again, the same handle must be able to
 * grow its map: a store larger than the map succeeds. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "milc/jobs.h"
#include "milc/pipeline.h"

/* Every check is fatal: what follows one depends on it. */
#define CHECK(c)                                                                                                       \
    do {                                                                                                               \
        if (!(c)) {                                                                                                    \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);                                      \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static int build(Store *c, const TemplatePath *tp, const char *scratch, const char *ctx, StoreEntry **hit,
                 BuildResult *res) {
    DiagSink d;
    diag_init(&d);
    BuildJob j = {.config = "tiny",
                  .nparams = ctx ? 2 : 1,
                  .names = (char *[]){"layers", "ctx"},
                  .values = (char *[]){"1", (char *)ctx}};
    GenConfig *cfg = job_config(tp, &j, &d);
    CHECK(cfg != NULL);
    int rc = pipeline_build(c,
                            &(BuildRequest){.config = cfg,
                                            .mode = RT_MODE_BONDED,
                                            .tmp_root = scratch,
                                            .verify_hits = BUILD_VERIFY_NONE,
                                            .hit_out = hit},
                            res, &d);
    gen_config_free(cfg);
    diag_free(&d);
    return rc;
}

/* Fill the file system of dir: a file written until the kernel says ENOSPC. */
static void fill(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    static char block[64 << 10];
    ssize_t w;
    size_t total = 0;
    while ((w = write(fd, block, sizeof block)) > 0) total += (size_t)w;
    CHECK(w < 0 && errno == ENOSPC);
    while (write(fd, block, 1) == 1) total++; /* the last partial block too */
    CHECK(fsync(fd) == 0 || errno == ENOSPC);
    close(fd);
    printf("filled the disk with %zu bytes\n", total);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: test_hit_ownership CACHE_DIR SCRATCH_DIR TEMPLATE_DIR\n");
        return 2;
    }
    const char *dir = argv[1], *scratch = argv[2];
    TemplatePath tp;
    CHECK(tpath_init(&tp, argv[3]) == 0);
    Cache *c;
    char err[512];
    CHECK(cache_open(&c, dir, &(CacheOptions){.map_size = 1 << 20}, err, sizeof err) == 0);
    Store *s = store_lmdb_wrap(c); /* the library's view of c */
    CHECK(s != NULL);

    /* The artifact, under its full key and the first direct key. */
    StoreEntry *hit = NULL;
    BuildResult res;
    CHECK(build(s, &tp, scratch, NULL, &hit, &res) == MILC_OK && res.outcome == BUILD_MISS && hit);
    store_release(s, hit);

    /* The same program asked another way (ctx does not change a prefill):
     * a direct miss, a full-key hit, and a direct key to write on a full disk. */
    char filler[4096];
    snprintf(filler, sizeof filler, "%s/../filler", dir);
    fill(filler);
    hit = (StoreEntry *)&hit; /* not NULL: pipeline_build must clear it */
    int rc = build(s, &tp, scratch, "64", &hit, &res);
    printf("full-key hit, direct key on a full disk: rc %d, outcome %d, hit %p\n", rc, res.outcome, (void *)hit);
    CHECK(rc == MILC_E_SYSTEM);
    CHECK(res.outcome == BUILD_HIT_FULL);
    CHECK(hit == NULL);

    /* Nothing is held: with the disk free again, this handle's map grows
     * for a store larger than the map (a live hit would make it CACHE_EFULL). */
    CHECK(unlink(filler) == 0);
    size_t big = 3 << 20;
    uint8_t *bytes = calloc(1, big);
    CHECK(bytes != NULL);
    CacheKey k;
    CacheKeyBuilder kb;
    ckey_init(&kb);
    ckey_add_str(&kb, KEY_TAG('T', 'E', 'S', 'T'), "filler entry");
    CHECK(ckey_finish(&kb, &k) == 0);
    int pr = cache_put(c, &k, kb.buf, kb.len, &(CacheEntryMeta){.description = "big", .mode = RT_MODE_BONDED},
                       &(CacheSection){bytes, big}, 1);
    printf("a %zu-byte store after it: %d (%s)\n", big, pr, pr ? cache_errmsg(c) : "ok");
    CHECK(pr == 0);
    ckey_free(&kb);
    free(bytes);

    /* And the request that failed now succeeds, as a direct hit next time. */
    CHECK(build(s, &tp, scratch, "64", &hit, &res) == MILC_OK && hit && res.outcome == BUILD_HIT_FULL);
    store_release(s, hit);
    CHECK(build(s, &tp, scratch, "64", &hit, &res) == MILC_OK && hit && res.outcome == BUILD_HIT_DIRECT);
    store_release(s, hit);
    store_close(s);
    cache_close(c);
    tpath_free(&tp);
    printf("ok\n");
    return 0;
}
