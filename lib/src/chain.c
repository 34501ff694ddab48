/* chain.c — a model's programs built through the request path, loaded from
 * the cache (or adopted from this process's compiles) and run back to back
 * as one forward pass (chain.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "milc/chain.h"
#include "milc/half.h"
#include "milc/ossys.h"

/* ---- building ------------------------------------------------------------ */

typedef struct {
    ChainBuilt *out;
    bool oom;
} Collect;

static void collect(void *ctx, int idx, const char *label, const BuildResult *r) {
    (void)idx, (void)label;
    Collect *cl = ctx;
    ChainBuilt *b = cl->out;
    CacheKey *k = realloc(b->keys, sizeof *k * (size_t)(b->n + 1));
    if (!k) {
        cl->oom = true;
        return;
    }
    b->keys = k;
    b->keys[b->n++] = r->key;
    b->ms_total += r->ms_total;
    b->artifact_bytes += r->artifact_bytes;
    b->ms_generate += r->ms_generate, b->ms_check += r->ms_check;
    b->ms_lower += r->ms_passes + r->ms_lower, b->ms_store += r->ms_store;
    if (r->outcome == BUILD_MISS)
        b->misses++;
    else
        b->hits++, b->checksummed += r->checksummed;
}

int chain_build(Store *s, const TemplatePath *tp, const JobSpec *spec, const RequestOptions *o, ChainBuilt *out,
                DiagSink *d) {
    memset(out, 0, sizeof *out);
    Collect cl = {out, false};
    int rc = build_request(s, tp, spec, o, collect, &cl, d);
    if (rc == MILC_OK && cl.oom) lib_error("out of memory"), rc = MILC_E_SYSTEM;
    if (rc != MILC_OK) chain_built_free(out);
    return rc;
}

void chain_built_free(ChainBuilt *b) {
    free(b->keys);
    memset(b, 0, sizeof *b);
}

/* ---- tensors --------------------------------------------------------------- */

/* Tensors come from one mapping with huge pages asked for, each faulted in
 * when handed out: a page fault per 4 KB of them otherwise lands in the
 * first prefill (~1,300 for GPT-2's k/v outputs), or in load as many faults
 * as pages.  The reservation is address space only (MAP_NORESERVE). */
enum { CHAIN_MEM = 1u << 30 };
static void *chain_alloc(Chain *ch, size_t size) {
    if (!ch->mem) {
        if (!(ch->mem = os_reserve(CHAIN_MEM))) return NULL;
        ch->mem_len = CHAIN_MEM, ch->mem_used = 0;
    }
    size_t at = (ch->mem_used + 63) & ~(size_t)63, n = size ? size : 1;
    if (n > ch->mem_len - at) return NULL;
    ch->mem_used = at + n;
    os_populate(ch->mem + at, n);
    return ch->mem + at;
}

/* Token ids below any vocabulary milc has (97 < the tiny presets' 512),
 * positions from pos0 on, the mask and booleans zero, every other input —
 * hidden states, the KV caches of decode — fixed moderate values: random
 * ones keep LayerNorm and softmax on their ordinary paths (no NaN or
 * denormal slow paths), the same ones every run keep timings comparable. */
static void fill_input(RtTensor *t, const char *name, uint64_t seed, int pos0) {
    size_t n = t->size / rt_dtype_size(t->dtype);
    memset(t->data, 0, t->size);
    if (t->dtype == RT_I32) {
        bool pos = strcmp(name, "position_ids") == 0;
        for (size_t i = 0; i < n; i++) ((int32_t *)t->data)[i] = pos ? pos0 + (int32_t)i : (int32_t)(1 + i * 7 % 97);
        return;
    }
    if (strcmp(name, "mask") == 0 || (t->dtype != RT_F16 && t->dtype != RT_F32)) return;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
        float v = (float)(s >> 40) / (float)(1u << 24) - 0.5f;
        if (t->dtype == RT_F16)
            ((uint16_t *)t->data)[i] = float_to_half(v);
        else
            ((float *)t->data)[i] = v;
    }
}

static int tensor_for(Chain *ch, const RtIoInfo *io, RtTensor *t) {
    *t = (RtTensor){.dtype = io->dtype, .rank = io->rank};
    memcpy(t->dims, io->dims, sizeof t->dims);
    size_t n = rt_dtype_size(io->dtype);
    for (int d = 0; d < io->rank; d++) n *= (size_t)io->dims[d];
    t->size = n;
    t->data = chain_alloc(ch, n);
    return t->data ? 0 : -1;
}

/* x reads y as it lies: the same shape (split I/O), or x the first channels
 * of y ([1, C, 1, S], C the second axis), which is how a packed prefill
 * chunk's y stacks its hidden states before its keys and values
 * (mil-templates/README.md, "Packed I/O"). */
static bool x_of_y(const RtTensor *x, const RtTensor *y) {
    if (x->dtype != y->dtype || x->rank != y->rank || x->rank < 2) return false;
    for (int a = 0; a < x->rank; a++)
        if (a == 1 ? x->dims[a] > y->dims[a] : x->dims[a] != y->dims[a]) return false;
    return x->dims[0] == 1;
}

/* ---- loading and running --------------------------------------------------- */

/* The chain's arrays for n programs and its thread pool.  MILC_OK or
 * MILC_E_SYSTEM reported (ch freed). */
static int chain_start(Chain *ch, int n, int nthreads, int pos0) {
    memset(ch, 0, sizeof *ch);
    ch->pos0 = pos0;
    ch->lm = calloc((size_t)n + 1, sizeof *ch->lm);
    ch->in = calloc((size_t)n + 1, sizeof *ch->in);
    ch->out = calloc((size_t)n + 1, sizeof *ch->out);
    ch->nin = calloc((size_t)n + 1, sizeof *ch->nin);
    ch->nout = calloc((size_t)n + 1, sizeof *ch->nout);
    if (!ch->lm || !ch->in || !ch->out || !ch->nin || !ch->nout) {
        chain_free(ch);
        lib_error("out of memory");
        return MILC_E_SYSTEM;
    }
    int pr = rt_pool_new(&ch->pool, nthreads);
    if (pr != RT_OK) {
        lib_error("cannot start the runtime's threads: %s", rt_strerror(pr));
        chain_free(ch);
        return MILC_E_SYSTEM;
    }
    return MILC_OK;
}

/* Tensors for program i, whose model is loaded: outputs, then inputs, the
 * hidden state x reading what program i-1 wrote to y.  0 or -1 (ENOMEM). */
static int chain_bind(Chain *ch, int i) {
    RtModel *m = ch->lm[i].model;
    ch->nin[i] = rt_model_ninputs(m);
    ch->nout[i] = rt_model_noutputs(m);
    ch->in[i] = calloc((size_t)ch->nin[i] + 1, sizeof(RtTensor));
    ch->out[i] = calloc((size_t)ch->nout[i] + 1, sizeof(RtTensor));
    if (!ch->in[i] || !ch->out[i]) return -1;
    for (int k = 0; k < ch->nout[i]; k++) {
        RtIoInfo io;
        rt_model_output(m, k, &io);
        if (tensor_for(ch, &io, &ch->out[i][k]) != 0) return -1;
    }
    int py = i > 0 ? rt_model_find(ch->lm[i - 1].model, "y", 1) : -1;
    for (int k = 0; k < ch->nin[i]; k++) {
        RtIoInfo io;
        RtTensor *t = &ch->in[i][k];
        rt_model_input(m, k, &io);
        *t = (RtTensor){.dtype = io.dtype, .rank = io.rank};
        memcpy(t->dims, io.dims, sizeof t->dims);
        t->size = rt_dtype_size(io.dtype);
        for (int d = 0; d < io.rank; d++) t->size *= (size_t)io.dims[d];
        /* Chain the hidden states: this program reads what the last wrote. */
        if (py >= 0 && strcmp(io.name, "x") == 0 && x_of_y(t, &ch->out[i - 1][py])) {
            t->data = ch->out[i - 1][py].data;
            continue;
        }
        if (tensor_for(ch, &io, t) != 0) return -1;
        fill_input(t, io.name, (uint64_t)(i * 131 + k + 1), ch->pos0);
    }
    return 0;
}

int chain_load(Chain *ch, Cache *c, const ChainBuilt *b, int nthreads, int pos0) {
    int rc = chain_start(ch, b->n, nthreads, pos0);
    if (rc != MILC_OK) return rc;
    if (!(ch->store = store_lmdb_wrap(c))) goto nomem;
    for (int i = 0; i < b->n; i++) {
        char hex[33];
        cache_key_hex(&b->keys[i], hex);
        StoreEntry *hit;
        /* The request just found or stored this key (and checked it on a
         * hit).  The pages are mapped now, in one call per value: faulted in
         * by the first prefill instead they cost it ~7 ms, against ~3 ms here. */
        int r = store_get(ch->store, &b->keys[i], NULL, 0, STORE_GET_NOTOUCH | STORE_GET_POPULATE | STORE_GET_TRUSTED,
                          &hit);
        if (r != 0) {
            lib_error("cache entry %s: %s", hex, cache_strerror(r));
            chain_free(ch);
            return MILC_E_SYSTEM;
        }
        rc = model_load_hit(&ch->lm[i], ch->store, hit, &(ModelLoad){.nthreads = nthreads, .pool = ch->pool}, hex);
        ch->n = i + 1;
        if (rc != MILC_OK) {
            chain_free(ch);
            return rc;
        }
        if (chain_bind(ch, i) != 0) goto nomem;
    }
    return MILC_OK;
nomem:
    chain_free(ch);
    lib_error("out of memory");
    return MILC_E_SYSTEM;
}

int chain_adopt(Chain *ch, RtArtifact **arts, int n, int nthreads) {
    int rc = chain_start(ch, n, nthreads, 0);
    if (rc != MILC_OK) {
        for (int i = 0; i < n; i++) rt_artifact_free(arts[i]);
        free(arts);
        return rc;
    }
    ch->arts = arts, ch->narts = n;
    for (int i = 0; i < n; i++) {
        const RtSection *secs;
        int ns;
        char err[512];
        rt_artifact_sections(arts[i], &secs, &ns);
        int r = rt_model_load(&ch->lm[i].model, secs, ns, &(RtLoadOptions){.nthreads = nthreads, .pool = ch->pool}, err,
                              sizeof err);
        if (r != 0) {
            lib_error("a compiled program does not load: %s", err);
            chain_free(ch);
            return MILC_E_SYSTEM;
        }
        ch->n = i + 1;
        if (chain_bind(ch, i) != 0) {
            chain_free(ch);
            lib_error("out of memory");
            return MILC_E_SYSTEM;
        }
    }
    return MILC_OK;
}

int chain_run(Chain *ch, double *ms, uint64_t *dispatches) {
    long long t0 = lib_now_ns();
    uint64_t nd = 0, ops = 0;
    for (int i = 0; i < ch->n; i++) {
        RtRunStats st = {0};
        int r = rt_run(ch->lm[i].model, ch->in[i], ch->nin[i], ch->out[i], ch->nout[i], ch->run_flags, &st);
        if (r != 0) {
            lib_error("the chain's program %d of %d failed: %s", i + 1, ch->n, rt_strerror(r));
            return MILC_E_SYSTEM;
        }
        nd += st.dispatches;
        ops += st.ops;
    }
    ch->last_ops = ops;
    *ms = lib_ms_since(t0);
    if (dispatches) *dispatches = nd;
    return MILC_OK;
}

const RtTensor *chain_output(const Chain *ch, const char *name) {
    int i = ch->n - 1, k = i >= 0 ? rt_model_find(ch->lm[i].model, name, 1) : -1;
    return k >= 0 ? &ch->out[i][k] : NULL;
}

bool chain_tensor_finite(const RtTensor *t) {
    if (!t || (t->dtype != RT_F16 && t->dtype != RT_F32)) return false;
    size_t n = t->size / rt_dtype_size(t->dtype);
    bool ok = true;
    for (size_t k = 0; ok && k < n; k++)
        ok = isfinite(t->dtype == RT_F16 ? half_to_float(((const uint16_t *)t->data)[k]) : ((const float *)t->data)[k]);
    return ok;
}

/* Section i's kind from the manifest's table (compiler/runtime/ARTIFACT.md:
 * 64-byte header, then 32-byte entries, kind first; entry k is section k+1).
 * A cache hit's sections carry no kind of their own; the model loaded, so
 * the table is valid. */
static uint32_t section_kind(const RtSection *secs, int i) {
    const RtSection *m = &secs[0];
    size_t at = 64 + 32 * (size_t)(i - 1);
    uint32_t kind = 0;
    if (i >= 1 && at + 4 <= m->size) memcpy(&kind, (const unsigned char *)m->data + at, 4);
    return kind;
}

double chain_weight_bytes(const Chain *ch, ChainRange *r, int *nr, int max) {
    double sum = 0;
    int n = 0;
    for (int i = 0; i < ch->n; i++)
        for (int k = 1; k < ch->lm[i].nsecs; k++)
            if (section_kind(ch->lm[i].secs, k) == RT_SEC_WEIGHT) {
                sum += (double)ch->lm[i].secs[k].size;
                if (r && n < max) r[n++] = (ChainRange){ch->lm[i].secs[k].data, ch->lm[i].secs[k].size};
            }
    if (nr) *nr = n;
    return sum;
}

void chain_free(Chain *ch) {
    for (int i = 0; i < ch->n; i++) model_free(&ch->lm[i]);
    store_close(ch->store); /* after the entries the models held */
    rt_pool_free(ch->pool);
    for (int i = 0; ch->in && ch->out && i < ch->n; i++) {
        free(ch->in[i]);
        free(ch->out[i]);
    }
    os_unreserve(ch->mem, ch->mem_len);
    for (int i = 0; i < ch->narts; i++) rt_artifact_free(ch->arts[i]); /* after the models that ran on them */
    free(ch->arts);
    free(ch->lm);
    free(ch->in);
    free(ch->out);
    free(ch->nin);
    free(ch->nout);
    memset(ch, 0, sizeof *ch);
}
