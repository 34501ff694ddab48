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

#include "milc/half.h"
#include "milc/model.h"
#include "milc/request.h"
#include "milc/whole.h"

/* ---- building ------------------------------------------------------------ */

typedef struct Keys {
    CacheKey *v;
    int n, misses;
    uint64_t bytes;
    bool oom;
} Keys;

static void collect(void *ctx, int idx, const char *label, const BuildResult *r) {
    (void)idx, (void)label;
    Keys *k = ctx;
    CacheKey *v = realloc(k->v, sizeof *v * (size_t)(k->n + 1));
    if (!v) {
        k->oom = true;
        return;
    }
    k->v = v;
    k->v[k->n++] = r->key;
    k->misses += r->outcome == BUILD_MISS;
    k->bytes += r->artifact_bytes;
}

static int build(Store *st, const WholeSpec *s, const JobSpec *spec, const char *dir, Keys *k, DiagSink *d) {
    memset(k, 0, sizeof *k);
    int rc = build_request(st, s->tp, spec, &(RequestOptions){.verify_hits = s->verify_hits, .tmp_root = dir}, collect,
                           k, d);
    if (rc == MILC_OK && k->oom) lib_error("out of memory"), rc = MILC_E_SYSTEM;
    if (rc != MILC_OK) free(k->v), k->v = NULL;
    return rc;
}

/* ---- the loaded chain ------------------------------------------------------ */

typedef struct Chain {
    int n;
    RtPool *pool;
    Store *store; /* the models' entries live in its read transactions */
    LoadedModel *lm;
    RtTensor **in, **out;
    int *nin, *nout;
    void **mem; /* every tensor's bytes the chain allocated (not the borrowed x) */
    int nmem, capmem;
} Chain;

/* Token ids below any vocabulary milc has (97 < the tiny presets' 512),
 * positions from pos0 on, the mask zero (attend everywhere), every other
 * input — the KV caches of decode — fixed moderate values, so each forward
 * does the same work on the ordinary arithmetic paths. */
static void fill(RtTensor *t, const char *name, uint64_t seed, int pos0) {
    size_t n = t->size / rt_dtype_size(t->dtype);
    memset(t->data, 0, t->size);
    if (t->dtype == RT_I32) {
        bool pos = strcmp(name, "position_ids") == 0;
        for (size_t i = 0; i < n; i++) ((int32_t *)t->data)[i] = pos ? pos0 + (int32_t)i : (int32_t)(1 + i * 7 % 97);
        return;
    }
    if (strcmp(name, "mask") == 0 || (t->dtype != RT_F16 && t->dtype != RT_F32)) return;
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float v = (float)(x >> 40) / (float)(1u << 24) - 0.5f;
        if (t->dtype == RT_F16)
            ((uint16_t *)t->data)[i] = float_to_half(v);
        else
            ((float *)t->data)[i] = v;
    }
}

static void tensor_shape(const RtIoInfo *io, RtTensor *t) {
    *t = (RtTensor){.dtype = io->dtype, .rank = io->rank};
    memcpy(t->dims, io->dims, sizeof t->dims);
    size_t n = rt_dtype_size(io->dtype);
    for (int k = 0; k < io->rank; k++) n *= (size_t)io->dims[k];
    t->size = n;
}

static int tensor_alloc(Chain *ch, RtTensor *t) {
    if (ch->nmem == ch->capmem) {
        int cap = ch->capmem ? ch->capmem * 2 : 64;
        void **v = realloc(ch->mem, sizeof *v * (size_t)cap);
        if (!v) return -1;
        ch->mem = v, ch->capmem = cap;
    }
    t->data = aligned_alloc(64, (t->size + 63) / 64 * 64 + 64);
    if (!t->data) return -1;
    ch->mem[ch->nmem++] = t->data;
    return 0;
}

static bool same_shape(const RtTensor *a, const RtTensor *b) {
    return a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* Program i's tensors: its input x is program i-1's output y (the
 * embedding's hidden states into the first chunk, the last chunk's into the
 * head), so the chain computes one forward pass.  0, or -1 out of memory. */
static int bind(Chain *ch, int i, int pos0) {
    RtModel *m = ch->lm[i].model;
    ch->nin[i] = rt_model_ninputs(m), ch->nout[i] = rt_model_noutputs(m);
    ch->in[i] = calloc((size_t)ch->nin[i] + 1, sizeof(RtTensor));
    ch->out[i] = calloc((size_t)ch->nout[i] + 1, sizeof(RtTensor));
    if (!ch->in[i] || !ch->out[i]) return -1;
    for (int k = 0; k < ch->nout[i]; k++) {
        RtIoInfo io;
        rt_model_output(m, k, &io);
        tensor_shape(&io, &ch->out[i][k]);
        if (tensor_alloc(ch, &ch->out[i][k]) != 0) return -1;
    }
    int py = i > 0 ? rt_model_find(ch->lm[i - 1].model, "y", 1) : -1;
    for (int k = 0; k < ch->nin[i]; k++) {
        RtIoInfo io;
        RtTensor *t = &ch->in[i][k];
        rt_model_input(m, k, &io);
        tensor_shape(&io, t);
        if (py >= 0 && strcmp(io.name, "x") == 0 && same_shape(t, &ch->out[i - 1][py])) {
            t->data = ch->out[i - 1][py].data;
            continue;
        }
        if (tensor_alloc(ch, t) != 0) return -1;
        fill(t, io.name, (uint64_t)(i * 131 + k + 1), pos0);
    }
    return 0;
}

static void chain_free(Chain *ch) {
    for (int i = 0; i < ch->n; i++) model_free(&ch->lm[i]);
    store_close(ch->store); /* after the entries the models held */
    rt_pool_free(ch->pool);
    for (int i = 0; ch->in && ch->out && i < ch->n; i++) {
        free(ch->in[i]);
        free(ch->out[i]);
    }
    for (int i = 0; i < ch->nmem; i++) free(ch->mem[i]);
    free(ch->mem);
    free(ch->lm);
    free(ch->in);
    free(ch->out);
    free(ch->nin);
    free(ch->nout);
    memset(ch, 0, sizeof *ch);
}

/* Load every program of k from c as a first call does (the pipeline just
 * found or stored each, so the record compare and checksum are not
 * repeated; the pages are mapped at once).  MILC_OK or MILC_E_* reported. */
static int chain_load(Chain *ch, Cache *c, const Keys *k, int nthreads, int pos0) {
    memset(ch, 0, sizeof *ch);
    ch->lm = calloc((size_t)k->n + 1, sizeof *ch->lm);
    ch->in = calloc((size_t)k->n + 1, sizeof *ch->in);
    ch->out = calloc((size_t)k->n + 1, sizeof *ch->out);
    ch->nin = calloc((size_t)k->n + 1, sizeof *ch->nin);
    ch->nout = calloc((size_t)k->n + 1, sizeof *ch->nout);
    ch->store = store_lmdb_wrap(c);
    if (!ch->lm || !ch->in || !ch->out || !ch->nin || !ch->nout || !ch->store) goto nomem;
    int r = rt_pool_new(&ch->pool, nthreads);
    if (r != RT_OK) {
        lib_error("cannot start the runtime's threads: %s", rt_strerror(r));
        chain_free(ch);
        return MILC_E_SYSTEM;
    }
    for (int i = 0; i < k->n; i++) {
        char hex[33];
        cache_key_hex(&k->v[i], hex);
        StoreEntry *hit;
        r = store_get(ch->store, &k->v[i], NULL, 0, STORE_GET_NOTOUCH | STORE_GET_POPULATE | STORE_GET_TRUSTED, &hit);
        if (r != 0) {
            lib_error("cache entry %s: %s", hex, cache_strerror(r));
            chain_free(ch);
            return MILC_E_SYSTEM;
        }
        int rc = model_load_hit(&ch->lm[i], ch->store, hit, &(ModelLoad){.nthreads = nthreads, .pool = ch->pool}, hex);
        ch->n = i + 1;
        if (rc != MILC_OK) {
            chain_free(ch);
            return rc;
        }
        if (bind(ch, i, pos0) != 0) goto nomem;
    }
    return MILC_OK;
nomem:
    chain_free(ch);
    lib_error("out of memory");
    return MILC_E_SYSTEM;
}

static int chain_run(Chain *ch, double *ms) {
    long long t0 = lib_now_ns();
    for (int i = 0; i < ch->n; i++) {
        int r = rt_run(ch->lm[i].model, ch->in[i], ch->nin[i], ch->out[i], ch->nout[i], 0, NULL);
        if (r != 0) {
            lib_error("the whole chain's program %d of %d failed: %s", i + 1, ch->n, rt_strerror(r));
            return MILC_E_SYSTEM;
        }
    }
    *ms = lib_ms_since(t0);
    return MILC_OK;
}

/* The head's logits are all numbers: a timing of NaNs measures nothing. */
static bool logits_finite(const Chain *ch) {
    int i = ch->n - 1, li = i >= 0 ? rt_model_find(ch->lm[i].model, "logits", 1) : -1;
    if (li < 0) return false;
    const RtTensor *t = &ch->out[i][li];
    size_t n = t->size / rt_dtype_size(t->dtype);
    bool ok = t->dtype == RT_F16 || t->dtype == RT_F32;
    for (size_t k = 0; ok && k < n; k++)
        ok = isfinite(t->dtype == RT_F16 ? half_to_float(((const uint16_t *)t->data)[k]) : ((const float *)t->data)[k]);
    return ok;
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
        Keys k = {0};
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
            rc = chain_run(&ch, &run_ms);
            v[i] = lib_ms_since(t0);
            if (i == 0) r->finite = logits_finite(&ch);
            chain_free(&ch);
        }
        r->artifact_bytes = k.bytes;
        free(k.v);
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
    Keys k;
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
        rc = chain_run(&ch, &run_ms);
        *ms = lib_ms_since(t0);
        chain_free(&ch);
    }
    free(k.v);
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
    Keys k;
    double ms;
    int rc = build(st, s, spec, dir, &k, d);
    store_close(st);
    if (rc != MILC_OK) return rc;
    rc = chain_load(ch, c, &k, s->nthreads, pos0);
    free(k.v);
    if (rc == MILC_OK && (rc = chain_run(ch, &ms)) != MILC_OK) chain_free(ch);
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
        if ((rc = cached_call(s, p, c, warm, &vc[i], &vl[i], &vd[i], d)) == MILC_OK) rc = chain_run(&steady, &vs[i]);
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
    for (int i = 0; i < n && rc == MILC_OK; i++) rc = chain_run(&ch, &v[i]);
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
