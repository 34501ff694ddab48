/* bench_probe.c — the read bandwidth of a chain's own weights, where they
 * lie, so a sweep point's time can be set beside the time it takes just to
 * stream its weights once (bytes ÷ bandwidth).  The VM's memory is not
 * uniform: a buffer of the probe's own would measure other memory. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { PROBE_AHEAD = 8192, PROBE_MAX_THREADS = 64 };

/* Threads wait at the gate until all exist (go = 1), or leave (go = -1) if
 * one could not be started: the barrier needs them all. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;
} Gate;

typedef struct {
    const ChainRange *r;
    int nr, ith, nth, reps;
    pthread_barrier_t *bar;
    Gate *gate;
    double best_ms; /* thread 0: the fastest pass of all threads together */
} ProbeArg;

static volatile uint64_t probe_sink;

/* This thread's share of every range, read in 64-byte lines with the lines
 * 8 KB ahead asked for: decode's kernels prefetch too, and a plain loop
 * understates what the machine reads. */
static uint64_t read_share(const ProbeArg *a) {
    uint64_t s = 0;
    for (int k = 0; k < a->nr; k++) {
        size_t lines = a->r[k].bytes / 64 / (size_t)a->nth;
        const unsigned char *p = (const unsigned char *)a->r[k].p + lines * 64 * (size_t)a->ith;
        for (size_t i = 0; i < lines * 64; i += 64) {
            __builtin_prefetch(p + i + PROBE_AHEAD);
            uint64_t w;
            memcpy(&w, p + i, sizeof w);
            s += w;
        }
    }
    return s;
}

static void *probe_thread(void *arg) {
    ProbeArg *a = arg;
    a->best_ms = 1e300;
    pthread_mutex_lock(&a->gate->mu);
    while (a->gate->go == 0) pthread_cond_wait(&a->gate->cv, &a->gate->mu);
    int go = a->gate->go;
    pthread_mutex_unlock(&a->gate->mu);
    if (go < 0) return NULL;
    for (int rep = 0; rep < a->reps; rep++) {
        pthread_barrier_wait(a->bar);
        long long t0 = cli_now_ns();
        probe_sink += read_share(a);
        pthread_barrier_wait(a->bar);
        double ms = (double)(cli_now_ns() - t0) / 1e6;
        if (ms < a->best_ms) a->best_ms = ms;
    }
    return NULL;
}

double bench_bandwidth(const ChainRange *r, int nr, int nthreads, int reps) {
    int nth = nthreads < 1 ? 1 : nthreads > PROBE_MAX_THREADS ? PROBE_MAX_THREADS : nthreads;
    pthread_t th[PROBE_MAX_THREADS];
    ProbeArg a[PROBE_MAX_THREADS];
    pthread_barrier_t bar;
    if (nr <= 0 || pthread_barrier_init(&bar, NULL, (unsigned)nth) != 0) return 0;
    Gate gate = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int started = 0;
    for (int i = 0; i < nth; i++) {
        a[i] = (ProbeArg){r, nr, i, nth, reps, &bar, &gate, 0};
        if (pthread_create(&th[i], NULL, probe_thread, &a[i]) != 0) break;
        started++;
    }
    pthread_mutex_lock(&gate.mu);
    gate.go = started == nth ? 1 : -1;
    pthread_cond_broadcast(&gate.cv);
    pthread_mutex_unlock(&gate.mu);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    if (started < nth) return 0; /* no figure rather than one from fewer threads */
    double bytes = 0;
    for (int k = 0; k < nr; k++) bytes += (double)(r[k].bytes / 64 / (size_t)nth * 64 * (size_t)nth);
    return a[0].best_ms > 0 ? bytes / (a[0].best_ms / 1e3) : 0;
}
