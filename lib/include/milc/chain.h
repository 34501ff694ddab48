/* chain.h — a model's programs built through the request path, loaded and
 * run back to back as one forward pass: what `milc bench` and the whole-model
 * figures (whole.h) time.  Product logic: the CLI only prints what it gives. */
#ifndef MILC_LIB_CHAIN_H
#define MILC_LIB_CHAIN_H

#include "milc/model.h"
#include "milc/request.h"

/* The programs of one build request, in model order. */
typedef struct ChainBuilt {
    CacheKey *keys; /* [n]; owned */
    int n;
    int misses, hits;
    int checksummed;         /* hits whose checksum was recomputed */
    double ms_total;         /* pipeline_build time summed: compile on a miss, lookup on a hit */
    uint64_t artifact_bytes; /* summed over the programs */
    /* a miss's parts, summed: generate, parse+check, passes+lower+pack, store */
    double ms_generate, ms_check, ms_lower, ms_store;
} ChainBuilt;

/* Build (or find) every program of spec in s with o.  MILC_OK, MILC_E_INPUT
 * with diagnostics in d, or MILC_E_SYSTEM with a message reported; on
 * failure out holds nothing. */
int chain_build(Store *s, const TemplatePath *tp, const JobSpec *spec, const RequestOptions *o, ChainBuilt *out,
                DiagSink *d);
void chain_built_free(ChainBuilt *b);

/* Loaded programs run in order as one forward pass: each program's input `x`
 * is the previous program's output `y` when their shapes agree, or its first
 * channels where a packed prefill chunk's `y` stacks the hidden states
 * before its keys and values (the chunk I/O contract of
 * mil-templates/README.md); every other input holds fixed
 * data: token ids below any vocabulary, positions from pos0 on, `mask`
 * zeros (attend everywhere), the rest small pseudo-random values, so each
 * forward does the same work on the ordinary arithmetic paths.  Holds one
 * cache hit (read transaction) per program until chain_free: build nothing
 * into the same cache meanwhile. */
typedef struct Chain {
    int n;
    RtPool *pool;    /* one thread pool for the whole chain: its programs run in turn */
    LoadedModel *lm; /* [n] */
    Store *store;    /* chain_load: the cache as the models' entries' store */
    RtTensor **in;   /* [n][nin[i]] */
    RtTensor **out;  /* [n][nout[i]] */
    int *nin, *nout;
    unsigned char *mem; /* every tensor, bump-allocated in one huge-page mapping */
    size_t mem_len, mem_used;
    RtArtifact **arts; /* chain_adopt: the artifacts the models run on; owned */
    int narts;
    int pos0;          /* the first position of position_ids */
    int run_flags;     /* rt_run flags of every program (RT_RUN_NONBONDED: mode 0's per-op variant) */
    uint64_t last_ops; /* plan ops the last forward ran */
} Chain;

/* Load every program of b from c, as a first call does right after the
 * request found or stored each: neither the record compare nor the
 * checksum is repeated, and the pages are mapped at once.  MILC_OK or
 * MILC_E_* with a message reported (ch freed). */
int chain_load(Chain *ch, Cache *c, const ChainBuilt *b, int nthreads, int pos0);
/* Load artifacts compiled in this process (not from a cache); the chain
 * takes arts and every artifact in it, also on failure. */
int chain_adopt(Chain *ch, RtArtifact **arts, int n, int nthreads);
/* One forward pass: wall ms of all programs and their dispatches summed
 * (dispatches may be NULL).  MILC_OK or MILC_E_SYSTEM reported. */
int chain_run(Chain *ch, double *ms, uint64_t *dispatches);
/* Output name of the last program, or NULL if it has none of that name. */
const RtTensor *chain_output(const Chain *ch, const char *name);
/* Every value of t (fp16 or fp32) is a number: a timing of NaNs measures
 * nothing. */
bool chain_tensor_finite(const RtTensor *t);

typedef struct ChainRange {
    const void *p;
    size_t bytes;
} ChainRange;
/* Weight bytes of a cache-loaded chain's programs; with r, their ranges where
 * they lie (at most max, count in *nr). */
double chain_weight_bytes(const Chain *ch, ChainRange *r, int *nr, int max);
void chain_free(Chain *ch);

#endif
