/* whole.c — the whole model timed end to end: token ids through the
 * embedding, every chunk and the head to logits, built and looked up through
 * the same request path as `milc build --whole`, loaded from the cache as a
 * user's first call loads it.
 *
 * The cached first call and the steady prefill are taken in alternation (a
 * first call, then one forward of a chain loaded and warmed beforehand):
 * this VM's speed drifts over seconds, and each ratio sees one moment's
 * conditions.  Everything is in process with the cache already open: the
 * figures are the library's cost (lookup, load, first forward), not process
 * start-up, which `milc bench`'s fresh-process chunk figures show apart. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/chain.h"
#include "milc/whole.h"

static int build(Store *st, const WholeSpec *s, const JobSpec *spec, const char *dir, ChainBuilt *k, DiagSink *d) {
    return chain_build(st, s->tp, spec, &(RequestOptions){.verify_hits = s->verify_hits, .tmp_root = dir}, k, d);
}

/* ---- figures --------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static WholeStat stat_of(double *v, int n) {
    WholeStat s = {NAN, NAN, NAN, n};
    if (n <= 0) return s;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    s.min = v[0], s.max = v[n - 1];
    s.med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return s;
}

static void tell(const WholeSpec *s, const char *fmt, int a, int b) {
    if (!s->progress) return;
    char buf[256];
    snprintf(buf, sizeof buf, fmt, a, b);
    s->progress(s->ctx, buf);
}

static int open_cache(const char *dir, Cache **c) {
    char err[512] = "";
    int r = cache_open(c, dir, NULL, err, sizeof err); /* as a user's: synced, so hits verified once stay trusted */
    if (r != 0) lib_error("cache '%s': %s", dir, err[0] ? err : cache_strerror(r));
    return r == 0 ? MILC_OK : MILC_E_SYSTEM;
}

typedef struct Plan {
    JobSpec prefill, decode;
    int programs;
    int pos0; /* decode's position: ctx, or the last position the model has */
    char modes[2];
} Plan;

/* The request's shape, checked before anything is timed. */
static int plan(const WholeSpec *s, Plan *p, WholeResult *r, DiagSink *d) {
    p->modes[0] = (char)('0' + s->mode), p->modes[1] = 0;
    p->prefill = (JobSpec){.config = s->config,
                           .weights = s->weights,
                           .modes = p->modes,
                           .chunk = s->chunk,
                           .max_chunk_bytes = s->max_chunk_bytes,
                           .whole = true,
                           .extra = s->prefill,
                           .nextra = s->nprefill};
    p->decode = p->prefill;
    p->decode.extra = s->decode, p->decode.nextra = s->ndecode;
    JobList jobs = {0};
    int rc = jobs_expand(s->tp, &p->prefill, &jobs, d) == 0 && jobs_expand(s->tp, &p->decode, &jobs, d) == 0
                 ? MILC_OK
                 : MILC_E_INPUT;
    int64_t seq = 0, ctx = 0, positions = 0;
    if (rc == MILC_OK) {
        p->programs = jobs.nsplits ? jobs.splits[0].n + 2 : 0;
        r->programs = p->programs, r->chunks = p->programs - 2;
        GenConfig *pc = job_config(s->tp, &jobs.v[0], d), *dc = job_config(s->tp, &jobs.v[p->programs], d);
        if (!pc || !dc || !gen_config_get_int(pc, "seq", &seq) || !gen_config_get_int(dc, "ctx", &ctx))
            rc = MILC_E_INPUT;
        if (pc && !gen_config_get_int(pc, "positions", &positions)) positions = 0;
        if (rc != MILC_OK && !diag_failed(d))
            diag_error(d, (SrcLoc){0}, "template '%s' has no 'seq' or 'ctx' parameter", s->config);
        gen_config_free(pc);
        gen_config_free(dc);
    }
    jobs_free(&jobs);
    r->seq = (long)seq, r->ctx = (long)ctx;
    p->pos0 = positions > 0 && ctx >= positions ? (int)positions - 1 : (int)ctx;
    return rc;
}

/* Empty caches: every program compiles, then loads and runs once.  The
 * first cache stays, as the warm one. */
static int first_calls(const WholeSpec *s, const Plan *p, const char *warm, WholeResult *r, DiagSink *d) {
    double v[256], vb[256];
    int n = s->cold_repeat < 256 ? s->cold_repeat : 256, rc = MILC_OK;
    for (int i = 0; i < n && rc == MILC_OK; i++) {
        tell(s, "whole model: first call %d/%d on an empty cache (compiles every program)", i + 1, n);
        char dir[4200];
        if (i == 0)
            snprintf(dir, sizeof dir, "%s", warm);
        else
            snprintf(dir, sizeof dir, "%s/whole-cold-%d", s->root, i);
        Cache *c;
        if ((rc = open_cache(dir, &c)) != MILC_OK) break;
        Store *st = store_lmdb_wrap(c);
        ChainBuilt k = {0};
        Chain ch;
        long long t0 = lib_now_ns();
        double run_ms;
        rc = st ? build(st, s, &p->prefill, dir, &k, d) : (lib_error("out of memory"), MILC_E_SYSTEM);
        vb[i] = lib_ms_since(t0);
        if (rc == MILC_OK && k.misses != k.n) {
            lib_error("a new cache already held %d of the whole model's %d programs", k.n - k.misses, k.n);
            rc = MILC_E_SYSTEM;
        }
        if (rc == MILC_OK && (rc = chain_load(&ch, c, &k, s->nthreads, 0)) == MILC_OK) {
            rc = chain_run(&ch, &run_ms, NULL);
            v[i] = lib_ms_since(t0);
            if (i == 0) r->finite = chain_tensor_finite(chain_output(&ch, "logits"));
            chain_free(&ch);
        }
        r->artifact_bytes = k.artifact_bytes;
        chain_built_free(&k);
        store_close(st);
        cache_close(c);
        if (i > 0) lib_scratch_remove(dir);
    }
    if (rc == MILC_OK) r->first_ms = stat_of(v, n), r->first_build_ms = stat_of(vb, n);
    return rc;
}

/* One cached first call: look every program up (the request's note), load,
 * run once.  The chain is freed untimed. */
static int cached_call(const WholeSpec *s, const Plan *p, Cache *c, const char *dir, double *ms, double *lookup,
                       double *load, DiagSink *d) {
    Store *st = store_lmdb_wrap(c);
    if (!st) {
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    ChainBuilt k;
    Chain ch;
    double run_ms;
    long long t0 = lib_now_ns();
    int rc = build(st, s, &p->prefill, dir, &k, d);
    *lookup = lib_ms_since(t0);
    if (rc == MILC_OK && k.misses) {
        lib_error("the warm cache missed %d of the whole model's programs", k.misses);
        rc = MILC_E_SYSTEM;
    }
    long long t1 = lib_now_ns();
    if (rc == MILC_OK && (rc = chain_load(&ch, c, &k, s->nthreads, 0)) == MILC_OK) {
        *load = lib_ms_since(t1);
        rc = chain_run(&ch, &run_ms, NULL);
        *ms = lib_ms_since(t0);
        chain_free(&ch);
    }
    chain_built_free(&k);
    store_close(st);
    return rc;
}

/* Load and warm a chain (one untimed forward), then n timed forwards. */
static int steady_chain(const WholeSpec *s, const JobSpec *spec, Cache *c, const char *dir, int pos0, Chain *ch,
                        DiagSink *d) {
    Store *st = store_lmdb_wrap(c);
    if (!st) {
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    ChainBuilt k;
    double ms;
    int rc = build(st, s, spec, dir, &k, d);
    store_close(st);
    if (rc != MILC_OK) return rc;
    rc = chain_load(ch, c, &k, s->nthreads, pos0);
    chain_built_free(&k);
    if (rc == MILC_OK && (rc = chain_run(ch, &ms, NULL)) != MILC_OK) chain_free(ch);
    return rc;
}

static int cached_pairs(const WholeSpec *s, const Plan *p, Cache *c, const char *warm, WholeResult *r, DiagSink *d) {
    Chain steady;
    int n = s->repeat < 256 ? s->repeat : 256;
    tell(s, "whole model: %d cached first call(s), each with a steady prefill (%d tokens)", n, (int)r->seq);
    int rc = steady_chain(s, &p->prefill, c, warm, 0, &steady, d);
    if (rc != MILC_OK) return rc;
    double vc[256], vs[256], vr[256], vl[256], vd[256];
    for (int i = 0; i < n && rc == MILC_OK; i++) {
        if ((rc = cached_call(s, p, c, warm, &vc[i], &vl[i], &vd[i], d)) == MILC_OK)
            rc = chain_run(&steady, &vs[i], NULL);
        vr[i] = vc[i] / vs[i];
    }
    chain_free(&steady);
    if (rc != MILC_OK) return rc;
    r->cached_ms = stat_of(vc, n), r->steady_ms = stat_of(vs, n), r->ratio = stat_of(vr, n);
    r->cached_lookup_ms = stat_of(vl, n), r->cached_load_ms = stat_of(vd, n);
    return MILC_OK;
}

static int decode_tokens(const WholeSpec *s, const Plan *p, Cache *c, const char *warm, WholeResult *r, DiagSink *d) {
    int n = s->tokens < 1024 ? s->tokens : 1024;
    tell(s, "whole model: decode at ctx %d, %d tokens (compiles the decode programs)", (int)r->ctx, n);
    Chain ch;
    int rc = steady_chain(s, &p->decode, c, warm, p->pos0, &ch, d);
    if (rc != MILC_OK) return rc;
    double v[1024];
    for (int i = 0; i < n && rc == MILC_OK; i++) rc = chain_run(&ch, &v[i], NULL);
    chain_free(&ch);
    if (rc == MILC_OK) r->decode_ms = stat_of(v, n);
    return rc;
}

int whole_bench(const WholeSpec *s, WholeResult *r, DiagSink *d) {
    memset(r, 0, sizeof *r);
    Plan p;
    int rc = plan(s, &p, r, d);
    if (rc != MILC_OK) return rc;
    char warm[4200];
    snprintf(warm, sizeof warm, "%s/whole-warm", s->root);
    Cache *c = NULL;
    if ((rc = first_calls(s, &p, warm, r, d)) == MILC_OK && (rc = open_cache(warm, &c)) == MILC_OK) {
        rc = cached_pairs(s, &p, c, warm, r, d);
        if (rc == MILC_OK) rc = decode_tokens(s, &p, c, warm, r, d);
        cache_close(c);
    }
    lib_scratch_remove(warm);
    return rc;
}
