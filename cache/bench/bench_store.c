/* bench_store.c — a cache put against the disk it lands on (issue #21 item 1):
 * the time to store an artifact of S bytes, durably, against the time to
 * write S bytes to a new file next to the cache and fdatasync it (what the
 * file system itself allows), measured alternately in one run, medians.  The
 * cache's default durability (data pages fsynced at commit) is the same as
 * that file's.  Each put goes into a fresh cache directory, as in a cold
 * build; open and close are not timed.
 *
 * The same run measures the store path's techniques by switching each off
 * (internal.h's cache_tune): writing values with pwrite in 2 MB blocks
 * instead of through the map, and keeping the map read-only between write
 * transactions (mprotect); and LMDB's own copy path (no WRITEMAP).
 *
 *   bench_store [--dir D] [--mb 50,460] [--rounds 3] [--sections 40] [--smoke]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "milc/cache.h"
#include "../src/internal.h"

static void die(const char *what, const char *why) {
    fprintf(stderr, "bench_store: %s: %s\n", what, why);
    exit(3);
}

/* The file system's own figure: write n bytes in 2 MB writes to a new file
 * beside the cache, fdatasync, as a put's commit does. */
static double raw_write(const char *dir, const uint8_t *buf, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s/raw.bin", dir);
    unlink(path);
    double t0 = bench_now_s();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) die(path, strerror(errno));
    for (size_t o = 0; o < n;) {
        size_t b = n - o < (2u << 20) ? n - o : (2u << 20);
        ssize_t w = write(fd, buf + o, b);
        if (w <= 0) die(path, strerror(errno));
        o += (size_t)w;
    }
    if (fdatasync(fd) != 0) die(path, strerror(errno));
    double t = bench_now_s() - t0;
    close(fd);
    unlink(path);
    return t;
}

enum { V_DEFAULT, V_NO_PWRITE, V_NO_MPROTECT, V_CLASSIC, NV };
static const char *const vname[NV] = {"put (pwrite + mprotect: default)", "put, values through the map (no pwrite)",
                                      "put, map left writable (no mprotect)", "put, LMDB copy path (no WRITEMAP)"};

static void rm_cache(const char *d) {
    static const char *const f[] = {"data.mdb", "lock.mdb", "milc.lock", "milc.stamp"};
    char p[4096 + 16];
    for (int i = 0; i < 4; i++) snprintf(p, sizeof p, "%s/%s", d, f[i]), unlink(p);
    rmdir(d);
}

static double put_once(const char *dir, int v, const uint8_t *buf, size_t n, int nsec) {
    char d[4096], err[512];
    snprintf(d, sizeof d, "%.4000s/c", dir);
    rm_cache(d);
    cache_tune = v == V_NO_PWRITE ? CACHE_TUNE_NO_PWRITE : v == V_NO_MPROTECT ? CACHE_TUNE_NO_MPROTECT : 0;
    CacheOptions o = {.no_writemap = v == V_CLASSIC};
    Cache *c;
    if (cache_open(&c, d, &o, err, sizeof err) != 0) die(d, err);
    CacheSection *s = calloc((size_t)nsec, sizeof *s);
    for (int i = 0; i < nsec; i++) {
        size_t a = n / (size_t)nsec * (size_t)i, b = i + 1 == nsec ? n : n / (size_t)nsec * (size_t)(i + 1);
        s[i] = (CacheSection){buf + a, b - a};
    }
    CacheKeyBuilder kb;
    CacheKey k;
    ckey_init(&kb);
    ckey_add_u64(&kb, 0x54534E42u, n);
    ckey_finish(&kb, &k);
    double t0 = bench_now_s();
    int rc = cache_put(c, &k, kb.buf, kb.len, NULL, s, nsec);
    double t = bench_now_s() - t0;
    if (rc) die("cache_put", cache_errmsg(c));
    ckey_free(&kb);
    free(s);
    cache_close(c);
    cache_tune = 0;
    rm_cache(d);
    return t;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *mbs = "50,460";
    int rounds = 3, nsec = 40;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--mb") && i + 1 < argc)
            mbs = argv[++i];
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--sections") && i + 1 < argc)
            nsec = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--smoke"))
            mbs = "4", rounds = 1;
        else {
            fprintf(stderr, "usage: bench_store [--dir D] [--mb 50,460] [--rounds 3] [--sections 40] [--smoke]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 99 || nsec < 1 || nsec > 10000) die("options", "rounds 1-99, sections 1-10000");
    char tmpl[] = "/var/tmp/bench_store.XXXXXX";
    if (!dir && !(dir = mkdtemp(tmpl))) die("mkdtemp", strerror(errno));
    for (const char *p = mbs; *p;) {
        char *end;
        long mb = strtol(p, &end, 10);
        if (mb < 1 || mb > 65536 || (*end && *end != ',')) die("--mb", "a list of sizes in MB, 1-65536");
        p = *end ? end + 1 : end;
        size_t n = (size_t)mb << 20;
        uint8_t *buf = aligned_alloc(64, n);
        if (!buf) die("buffer", "out of memory");
        uint64_t seed = 0x9E3779B97F4A7C15ull;
        bench_fill(buf, n, &seed);
        double raw[99], put[NV][99];
        /* Alternate so that the machine's load falls on every variant alike. */
        for (int r = 0; r < rounds; r++) {
            raw[r] = raw_write(dir, buf, n);
            for (int v = 0; v < NV; v++) put[v][r] = put_once(dir, v, buf, n, nsec);
        }
        double rm = bench_median(raw, rounds), pm[NV];
        printf("%ld MB in %d sections, %d rounds, medians:\n", mb, nsec, rounds);
        printf("  write + fdatasync of a file beside the cache  %8.1f ms  %6.0f MB/s\n", rm * 1e3, (double)mb / rm);
        for (int v = 0; v < NV; v++) {
            pm[v] = bench_median(put[v], rounds);
            printf("  %-44s %8.1f ms  %6.0f MB/s  %.2fx the file system\n", vname[v], pm[v] * 1e3, (double)mb / pm[v],
                   rm / pm[v]);
        }
        printf("  issue #21: cache put / disk bandwidth = %.2f (goal >= 0.8); without pwrite %.2f, without "
               "mprotect %.2f of the default's throughput\n",
               rm / pm[V_DEFAULT], pm[V_DEFAULT] / pm[V_NO_PWRITE], pm[V_DEFAULT] / pm[V_NO_MPROTECT]);
        fflush(stdout);
        free(buf);
    }
    if (dir == tmpl) rmdir(dir);
    return 0;
}
