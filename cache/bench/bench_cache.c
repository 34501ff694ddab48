/* bench_cache.c — figures for the cache: the hit path of a big artifact in a
 * fresh process (open, lookup, key-record check, pointers in hand; the
 * checksum pass timed separately), and a long run of stores of mixed sizes
 * under a size cap, comparing the last store of a probe size with the first.
 *
 *   bench_cache [--smoke] [--dir D] [--hit-mb 108] [--sections 50]
 *               [--stores 200] [--max-mb 150] [--cap-mb 3072] [--nosync]
 *               [--meta-sync] [--classic] [--cold-ms 1110]
 *
 * Issue #5 asks for the hit path of a GPT-2 4-layer mode-2 artifact (108 MB,
 * ~50 sections) to cost at most 2% of compiling that chunk cold (1.11 s in the
 * CLI, --cold-ms), and for the last store of the 200 to cost at most twice the
 * first of the same size; the lines marked "issue #5" print those ratios.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "milc/cache.h"

/* CPU time of this process: what a hit costs whatever else the machine runs. */
static double cpu_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_rand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static void fill_random(uint8_t *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = next_rand();
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++) p[i] = (uint8_t)next_rand();
}

/* Store-path options shared by every open (see CacheOptions). */
static int opt_meta_sync, opt_classic;

static Cache *open_or_die(const char *dir, int nosync, uint64_t cap) {
    CacheOptions o = {.no_sync = nosync, .max_bytes = cap, .meta_sync = opt_meta_sync, .no_writemap = opt_classic};
    Cache *c;
    char err[512];
    int rc = cache_open(&c, dir, &o, err, sizeof err);
    if (rc) {
        fprintf(stderr, "bench_cache: %s\n", err);
        exit(3);
    }
    return c;
}

static void key_for(const char *what, uint64_t n, CacheKeyBuilder *b, CacheKey *k) {
    ckey_init(b);
    ckey_add_str(b, 0x48434E42u /* BNCH */, what);
    ckey_add_u64(b, 0x4E5Fu, n);
    ckey_finish(b, k);
}

/* Split size bytes of buf into nsec sections of similar size. */
static int make_sections(uint8_t *buf, uint64_t size, int nsec, CacheSection *secs) {
    uint64_t per = size / (uint64_t)nsec, off = 0;
    for (int i = 0; i < nsec; i++) {
        uint64_t s = i == nsec - 1 ? size - off : per;
        secs[i] = (CacheSection){buf + off, s};
        off += s;
    }
    return nsec;
}

/* In a forked child (no LMDB state inherited): open, get, check; report the
 * times through a pipe.  verify selects the checksum pass. */
typedef struct HitTimes {
    double open_s, get_s, total_s, cpu_s; /* cpu_s: open + get, this process's CPU time */
    int rc, nsec, zero_copy;
} HitTimes;

static HitTimes hit_in_fresh_process(const char *dir, const char *what, uint64_t n, unsigned flags) {
    int fds[2];
    HitTimes t = {0};
    if (pipe(fds) != 0) exit(3);
    pid_t pid = fork();
    if (pid == 0) {
        CacheKeyBuilder b;
        CacheKey k;
        key_for(what, n, &b, &k);
        double t0 = bench_now_s(), c0 = cpu_now_s();
        Cache *c = open_or_die(dir, 1, 0);
        double t1 = bench_now_s();
        CacheHit *h;
        t.rc = cache_get(c, &k, b.buf, b.len, flags | CACHE_GET_NOTOUCH, &h);
        const CacheSection *secs;
        if (!t.rc && cache_hit_sections(h, &secs, &t.nsec) == 0) {
            double t2 = bench_now_s();
            t.open_s = t1 - t0, t.get_s = t2 - t1, t.total_s = t2 - t0, t.cpu_s = cpu_now_s() - c0;
            for (int i = 0; i < t.nsec; i++) t.zero_copy += ((uintptr_t)secs[i].data & 15) == 0;
            cache_hit_release(h);
        }
        cache_close(c);
        ckey_free(&b);
        if (write(fds[1], &t, sizeof t) != sizeof t) _exit(1);
        _exit(0);
    }
    close(fds[1]);
    if (read(fds[0], &t, sizeof t) != sizeof t) t.rc = -100;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return t;
}

static void bench_hit(const char *dir, uint64_t mb, int nsec, int nosync, double cold_ms) {
    uint64_t size = mb << 20;
    uint8_t *buf = malloc(size);
    CacheSection *secs = calloc((size_t)nsec, sizeof *secs);
    fill_random(buf, size);
    Cache *c = open_or_die(dir, nosync, 0);
    CacheKeyBuilder bs;
    CacheKey ks;
    key_for("hit-small", mb, &bs, &ks);
    make_sections(buf, size, nsec, secs);
    CacheEntryMeta m = {.description = "bench hit", .backend = "cpu", .mode = 2};
    /* Two warm-up stores of the same size under other keys (the first put in
     * a process or a fresh file pays for page-cache growth), then the one. */
    double put_s[3];
    int rc = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        CacheKeyBuilder bw;
        CacheKey kw;
        key_for(i < 2 ? "warm" : "hit", i < 2 ? (uint64_t)i : mb, &bw, &kw);
        double t0 = bench_now_s();
        rc = cache_put(c, &kw, bw.buf, bw.len, &m, secs, nsec);
        put_s[i] = bench_now_s() - t0;
        ckey_free(&bw);
    }
    /* The same section count at 1/100 of the bytes: the hit path must not care. */
    make_sections(buf, size / 100, nsec, secs);
    if (rc || cache_put(c, &ks, bs.buf, bs.len, &m, secs, nsec)) {
        fprintf(stderr, "put failed: %s\n", cache_errmsg(c));
        exit(3);
    }
    cache_close(c);
    ckey_free(&bs);
    free(buf), free(secs);
    printf("put: %llu MB in %d sections (checksum + copy + commit%s): first %.1f ms, then %.1f, %.1f ms "
           "(%.2f GB/s)\n",
           (unsigned long long)mb, nsec,
           nosync          ? ", no fsync"
           : opt_meta_sync ? " + 2 fsyncs"
                           : " + data fsync",
           put_s[0] * 1e3, put_s[1] * 1e3, put_s[2] * 1e3, (double)size / put_s[2] / 1e9);
    HitTimes best = {0}, bests = {0}, ver = {0}, pop = {0}, once = {0};
    for (int rep = 0; rep < 3; rep++) {
        HitTimes t = hit_in_fresh_process(dir, "hit", mb, 0), s = hit_in_fresh_process(dir, "hit-small", mb, 0);
        if (t.rc || s.rc) {
            fprintf(stderr, "hit failed: %s\n", cache_strerror(t.rc ? t.rc : s.rc));
            exit(3);
        }
        if (!rep || t.total_s < best.total_s) best = t;
        if (!rep || s.total_s < bests.total_s) bests = s;
    }
    /* Best of three for the verified hit too: other processes share the CPU. */
    for (int rep = 0; rep < 3; rep++) {
        HitTimes t = hit_in_fresh_process(dir, "hit", mb, CACHE_GET_VERIFY);
        HitTimes p = hit_in_fresh_process(dir, "hit", mb, CACHE_GET_POPULATE);
        HitTimes o = hit_in_fresh_process(dir, "hit", mb, CACHE_GET_VERIFY_ONCE | CACHE_GET_POPULATE);
        if (t.rc || p.rc || o.rc) {
            fprintf(stderr, "hit failed: %s\n", cache_strerror(t.rc ? t.rc : p.rc ? p.rc : o.rc));
            exit(3);
        }
        if (!rep || t.total_s < ver.total_s) ver = t;
        if (!rep || p.total_s < pop.total_s) pop = p;
        if (!rep || o.total_s < once.total_s) once = o;
    }
    printf("hit: fresh process, %llu MB: open %.3f ms + lookup/record check/pointers %.3f ms = %.3f ms; "
           "%d/%d sections zero-copy and 16-aligned\n",
           (unsigned long long)mb, best.open_s * 1e3, best.get_s * 1e3, best.total_s * 1e3, best.zero_copy, best.nsec);
    printf("hit: fresh process, %.1f MB (same %d sections): %.3f ms total (ratio big/small %.2f)\n", (double)mb / 100,
           nsec, bests.total_s * 1e3, best.total_s / bests.total_s);
    printf("hit: with CACHE_GET_POPULATE (all pages mapped, no checksum): %.2f ms total\n", pop.total_s * 1e3);
    double sum_s = ver.get_s - pop.get_s;
    printf("hit: with CACHE_GET_VERIFY (populate + checksum): %.1f ms total (CPU %.1f ms); checksum pass %.1f ms "
           "= %.2f GB/s\n",
           ver.total_s * 1e3, ver.cpu_s * 1e3, sum_s * 1e3, (double)size / sum_s / 1e9);
    printf("hit: with CACHE_GET_VERIFY_ONCE | POPULATE, already verified this boot (at put): %.2f ms total\n",
           once.total_s * 1e3);
    printf("issue #5: verified hit / cold compile (%.0f ms) = %.2f%% (goal <= 2%%); verified-once %.3f%%; "
           "unverified %.3f%%; put / cold compile = %.1f%%\n",
           cold_ms, 100 * ver.total_s * 1e3 / cold_ms, 100 * once.total_s * 1e3 / cold_ms,
           100 * best.total_s * 1e3 / cold_ms, 100 * put_s[2] * 1e3 / cold_ms);
}

static void bench_stores(const char *dir, int stores, uint64_t max_mb, uint64_t cap_mb, int nosync) {
    uint64_t maxb = max_mb << 20, probe = maxb / 2 > (64u << 20) ? (64u << 20) : maxb / 2;
    uint8_t *buf = malloc(maxb);
    fill_random(buf, maxb);
    Cache *c = open_or_die(dir, nosync, cap_mb << 20);
    CacheSection secs[64];
    double first_probe = 0, last_probe = 0, min_probe = 0, max_probe = 0, total_s = 0, t_all = bench_now_s();
    uint64_t total_b = 0;
    int probes = 0;
    for (int i = 0; i < stores; i++) {
        /* Log-uniform sizes between 1 MB and max; every 10th store a fixed
         * probe size, to compare like with like over time. */
        int is_probe = i % 10 == 0 || i == stores - 1;
        uint64_t size =
            is_probe
                ? probe
                : (uint64_t)((double)(1u << 20) * exp(log((double)max_mb) * (double)(next_rand() % 10000) / 10000.0));
        if (size > maxb) size = maxb;
        int nsec = 1 + (int)(size / (8u << 20));
        if (nsec > 50) nsec = 50;
        buf[next_rand() % size] ^= 1; /* not byte-identical across stores */
        make_sections(buf, size, nsec, secs);
        CacheKeyBuilder b;
        CacheKey k;
        key_for("store", (uint64_t)i, &b, &k);
        CacheEntryMeta m = {.description = "bench store", .backend = "cpu", .mode = 2};
        double t0 = bench_now_s();
        int rc = cache_put(c, &k, b.buf, b.len, &m, secs, nsec);
        double dt = bench_now_s() - t0;
        ckey_free(&b);
        if (rc) {
            fprintf(stderr, "store %d failed: %s\n", i, cache_errmsg(c));
            exit(3);
        }
        total_s += dt, total_b += size;
        if (is_probe) {
            if (!probes++) first_probe = min_probe = max_probe = dt;
            last_probe = dt;
            min_probe = dt < min_probe ? dt : min_probe;
            max_probe = dt > max_probe ? dt : max_probe;
        }
    }
    CacheStats st;
    cache_stat(c, &st);
    cache_close(c);
    free(buf);
    printf("stores: %d artifacts, 1-%llu MB (log-uniform), cap %llu MB: %.2f GB in %.1f s (%.2f GB/s in put), wall "
           "%.1f s\n",
           stores, (unsigned long long)max_mb, (unsigned long long)cap_mb, (double)total_b / 1e9, total_s,
           (double)total_b / total_s / 1e9, bench_now_s() - t_all);
    printf("stores: probe %llu MB: first %.1f ms, last %.1f ms, min %.1f, max %.1f (%d probes)\n",
           (unsigned long long)(probe >> 20), first_probe * 1e3, last_probe * 1e3, min_probe * 1e3, max_probe * 1e3,
           probes);
    printf("issue #5: last/first store of the same size = %.2f (goal <= 2)\n", last_probe / first_probe);
    printf("stores: end state %llu entries, %.1f MB of artifacts, data.mdb %.1f MB\n", (unsigned long long)st.entries,
           (double)st.bytes / 1e6, (double)st.file_bytes / 1e6);
}

int main(int argc, char **argv) {
    const char *dir = NULL;
    uint64_t hit_mb = 108, max_mb = 150, cap_mb = 3072;
    double cold_ms = 1110;
    int nsec = 50, stores = 200, nosync = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--smoke"))
            hit_mb = 4, nsec = 5, stores = 12, max_mb = 2, cap_mb = 6, nosync = 1;
        else if (!strcmp(a, "--nosync"))
            nosync = 1;
        else if (!strcmp(a, "--meta-sync"))
            opt_meta_sync = 1;
        else if (!strcmp(a, "--classic"))
            opt_classic = 1;
        else if (!strcmp(a, "--cold-ms") && v)
            cold_ms = atof(v), i++;
        else if (!strcmp(a, "--dir") && v)
            dir = v, i++;
        else if (!strcmp(a, "--hit-mb") && v)
            hit_mb = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--sections") && v)
            nsec = atoi(v), i++;
        else if (!strcmp(a, "--stores") && v)
            stores = atoi(v), i++;
        else if (!strcmp(a, "--max-mb") && v)
            max_mb = strtoull(v, NULL, 10), i++;
        else if (!strcmp(a, "--cap-mb") && v)
            cap_mb = strtoull(v, NULL, 10), i++;
        else {
            fprintf(stderr, "usage: bench_cache [--smoke] [--dir D] [--hit-mb N] [--sections N] [--stores N] "
                            "[--max-mb N] [--cap-mb N] [--nosync] [--meta-sync] [--classic] [--cold-ms MS]\n");
            return 2;
        }
    }
    if (nsec < 1 || nsec > 64 || !hit_mb || !max_mb || stores < 1) return 2;
    char tmpl[] = "/tmp/milc-bench-XXXXXX", hitdir[4200], storedir[4200];
    if (!dir && !(dir = mkdtemp(tmpl))) return 3;
    snprintf(hitdir, sizeof hitdir, "%s/hit", dir);
    snprintf(storedir, sizeof storedir, "%s/stores", dir);
    bench_hit(hitdir, hit_mb, nsec, nosync, cold_ms > 0 ? cold_ms : 1110);
    cache_destroy(hitdir, NULL, 0);
    bench_stores(storedir, stores, max_mb, cap_mb, nosync);
    cache_destroy(storedir, NULL, 0);
    rmdir(hitdir), rmdir(storedir);
    if (dir == tmpl) rmdir(dir);
    return 0;
}
