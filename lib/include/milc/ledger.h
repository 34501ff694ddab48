/* ledger.h — the cost ledger of the cache's entries (compile time, bytes,
 * load time, hits, time saved) as `cache stat` totals it and as
 * `cache gc --policy value` spends it. */
#ifndef MILC_LIB_LEDGER_H
#define MILC_LIB_LEDGER_H

#include "milc/jobs.h"
#include "milc/cache.h"

typedef struct LedgerTotals {
    uint64_t compile_ns;     /* summed over entries: what rebuilding them all would cost */
    uint64_t saved_ns;       /* summed hits x compile time of the entries held */
    uint64_t loads, load_ns; /* entries with a recorded load time, and its sum */
    CacheKey top[3];         /* the most time saved per byte */
    double top_value[3];
    int ntop;
} LedgerTotals;
int ledger_totals(Cache *c, LedgerTotals *t);

/* Evict the entries that save the least compile time per byte of cache —
 * compile time x (hits + 1) / bytes, the older first on a tie — until the
 * artifact bytes are at most max_bytes.  Counts what went into *evicted and
 * *evicted_bytes.  0 or a CACHE_E* code. */
int ledger_evict_by_value(Cache *c, uint64_t max_bytes, uint64_t *evicted, uint64_t *evicted_bytes);

/* The order prewarm builds jobs in: costliest first (so with N workers the
 * long compiles start first and the run ends sooner), by job_cost in
 * ledger.c.  order[] gets a permutation of 0..jobs->n-1. */
void ledger_order(Cache *c, const TemplatePath *tp, const JobList *jobs, int *order);

#endif
