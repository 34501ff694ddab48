/* ledger.c — the cost ledger: every entry carries its compile time, bytes,
 * hits and the last load time (cache_record_load); time saved is hits x
 * compile time.  `cache gc --policy value` evicts by time saved per byte;
 * the default stays by age (cache/README.md, "Cost ledger", says why). */
#include <stdlib.h>
#include <string.h>

#include "milc/ledger.h"
#include "milc/pipeline.h"

/* What keeping an entry is worth per byte: the compile time it saves each
 * time it is used, weighted by how often it was (once more for the build
 * that made it). */
static double value_of(const CacheEntryInfo *e) {
    return (double)e->compile_ns * (double)(e->hits + 1) / (double)(e->bytes ? e->bytes : 1);
}

static int add_totals(void *ctx, const CacheEntryInfo *e) {
    LedgerTotals *t = ctx;
    t->compile_ns += e->compile_ns;
    t->saved_ns += e->compile_ns * e->hits;
    if (e->load_ns) t->loads++, t->load_ns += e->load_ns;
    double v = value_of(e);
    if (t->ntop == 3 && t->top_value[2] >= v) return 0;
    int at = t->ntop < 3 ? t->ntop++ : 2;
    t->top[at] = e->key, t->top_value[at] = v;
    for (int i = at; i > 0 && t->top_value[i] > t->top_value[i - 1]; i--) {
        CacheKey k = t->top[i];
        double x = t->top_value[i];
        t->top[i] = t->top[i - 1], t->top_value[i] = t->top_value[i - 1];
        t->top[i - 1] = k, t->top_value[i - 1] = x;
    }
    return 0;
}

int ledger_totals(Cache *c, LedgerTotals *t) {
    memset(t, 0, sizeof *t);
    return cache_ls(c, add_totals, t);
}

typedef struct {
    CacheKey key;
    uint64_t bytes, last_used;
    double value;
} Item;

typedef struct {
    Item *v;
    int n, cap;
    uint64_t total;
} Items;

static int collect(void *ctx, const CacheEntryInfo *e) {
    Items *it = ctx;
    if (it->n == it->cap) {
        it->cap = it->cap ? 2 * it->cap : 64;
        Item *v = realloc(it->v, (size_t)it->cap * sizeof *v);
        if (!v) return CACHE_ENOMEM;
        it->v = v;
    }
    it->v[it->n++] = (Item){e->key, e->bytes, e->last_used_ns, value_of(e)};
    it->total += e->bytes;
    return 0;
}

static int by_value(const void *a, const void *b) {
    const Item *x = a, *y = b;
    if (x->value != y->value) return x->value < y->value ? -1 : 1;
    return (x->last_used > y->last_used) - (x->last_used < y->last_used);
}

int ledger_evict_by_value(Cache *c, uint64_t max_bytes, uint64_t *evicted, uint64_t *evicted_bytes) {
    Items it = {0};
    int rc = cache_ls(c, collect, &it);
    *evicted = *evicted_bytes = 0;
    if (rc == 0) qsort(it.v, (size_t)it.n, sizeof *it.v, by_value);
    for (int i = 0; rc == 0 && i < it.n && it.total > max_bytes; i++) {
        int r = cache_rm(c, &it.v[i].key);
        if (r == CACHE_ENOTFOUND) continue; /* another process removed it */
        if ((rc = r) == 0) it.total -= it.v[i].bytes, ++*evicted, *evicted_bytes += it.v[i].bytes;
    }
    free(it.v);
    return rc;
}

/* ---- prewarm order ---- */

typedef struct {
    const char *desc;
    int mode;
    uint64_t compile_ns;
} Known;

typedef struct {
    Known *v;
    int n, cap;
    char **descs;
} KnownList;

static int know(void *ctx, const CacheEntryInfo *e) {
    KnownList *k = ctx;
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        Known *v = realloc(k->v, (size_t)k->cap * sizeof *v);
        char **d = realloc(k->descs, (size_t)k->cap * sizeof *d);
        if (v) k->v = v;
        if (d) k->descs = d;
        if (!v || !d) return CACHE_ENOMEM;
    }
    k->descs[k->n] = strdup(e->description);
    if (!k->descs[k->n]) return CACHE_ENOMEM;
    k->v[k->n] = (Known){k->descs[k->n], e->mode, e->compile_ns};
    k->n++;
    return 0;
}

/* What job j will cost: 0 if its direct key hits; else the compile time the
 * ledger holds for the same parameters and mode (another milc's build, or
 * an evicted entry's), else unknown (UINT64_MAX: never built, so assume it is
 * the expensive kind). */
static uint64_t job_cost(Cache *c, const TemplatePath *tp, const BuildJob *j, const KnownList *k) {
    DiagSink quiet;
    diag_init(&quiet);
    GenConfig *cfg = job_config(tp, j, &quiet);
    char *params = cfg ? gen_config_canonical(cfg) : NULL;
    uint64_t cost = UINT64_MAX;
    CacheKeyBuilder db;
    CacheKey dkey;
    if (params && pipeline_direct_record(&(BuildRequest){.config = cfg, .weights = j->weights, .mode = j->mode}, params,
                                         &db, &dkey, &quiet) == MILC_OK) {
        CacheHit *h;
        if (cache_get_direct(c, &dkey, db.buf, db.len, CACHE_GET_NOTOUCH, &h, NULL) == 0)
            cache_hit_release(h), cost = 0;
        ckey_free(&db);
        for (char *p = params; *p; p++)
            if (*p == '\n') *p = ' ';
        /* Entries keep the parameters cut to a description's size: compare that much. */
        size_t cut = sizeof((BuildResult *)0)->description - 1;
        for (int i = 0; cost && i < k->n; i++)
            if (k->v[i].mode == j->mode && strncmp(k->v[i].desc, params, cut) == 0 &&
                strlen(k->v[i].desc) == (strlen(params) < cut ? strlen(params) : cut))
                cost = k->v[i].compile_ns;
    }
    free(params);
    gen_config_free(cfg);
    diag_free(&quiet);
    return cost;
}

void ledger_order(Cache *c, const TemplatePath *tp, const JobList *jobs, int *order) {
    KnownList k = {0};
    uint64_t *cost = calloc((size_t)jobs->n + 1, sizeof *cost);
    for (int i = 0; i < jobs->n; i++) order[i] = i;
    if (cost && cache_ls(c, know, &k) == 0) {
        for (int i = 0; i < jobs->n; i++) cost[i] = job_cost(c, tp, &jobs->v[i], &k);
        for (int i = 1; i < jobs->n; i++) /* stable: equal costs keep the manifest's order */
            for (int m = i; m > 0 && cost[order[m]] > cost[order[m - 1]]; m--) {
                int t = order[m];
                order[m] = order[m - 1], order[m - 1] = t;
            }
    }
    for (int i = 0; i < k.n; i++) free(k.descs[i]);
    free(k.descs), free(k.v), free(cost);
}
