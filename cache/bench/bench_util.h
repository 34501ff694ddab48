/* bench_util.h — what the cache's benchmarks share: a clock, medians (they
 * compare medians of alternated rounds), and bytes that neither compress nor
 * dedupe (a file system or a server may do either). */
#ifndef MILC_CACHE_BENCH_UTIL_H
#define MILC_CACHE_BENCH_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double bench_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (n >= 1); sorts v. */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Fill p with xorshift bytes; *state carries on from one call to the next
 * (start it at any nonzero value). */
static inline void bench_fill(uint8_t *p, size_t n, uint64_t *state) {
    uint64_t x = *state;
    for (size_t i = 0; i < n; i += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
    *state = x;
}

#endif
