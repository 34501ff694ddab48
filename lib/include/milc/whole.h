/* whole.h — a whole model (embedding → chunks → head) measured the way
 * Orion's table measures one: the first call with an empty cache (every
 * program compiles), the cached first call, the steady prefill and decode,
 * and the cached first call ÷ the steady prefill taken side by side.  The
 * figures are product logic (`milc bench --whole` prints them). */
#ifndef MILC_LIB_WHOLE_H
#define MILC_LIB_WHOLE_H

#include "milc/jobs.h"

typedef struct WholeSpec {
    const TemplatePath *tp;
    const char *config, *weights;
    const MilcParam *prefill; /* the prefill programs' parameters (seq, ...) */
    int nprefill;
    const MilcParam *decode; /* the decode programs' (phase decode, seq 1, ctx) */
    int ndecode;
    long chunk;               /* K, or JOBS_CHUNK_AUTO */
    uint64_t max_chunk_bytes; /* auto's ceiling (0: the default) */
    int mode;
    int nthreads;     /* 0: every CPU */
    int verify_hits;  /* BUILD_VERIFY_* */
    int cold_repeat;  /* first calls on an empty cache */
    int repeat;       /* cached first calls, each with a steady prefill */
    int tokens;       /* decode tokens timed */
    const char *root; /* a scratch directory: the caches are made under it */
    /* Optional: told before each stage (for a progress line). */
    void (*progress)(void *ctx, const char *what);
    void *ctx;
} WholeSpec;

typedef struct WholeStat {
    double med, min, max; /* NAN when n == 0 */
    int n;
} WholeStat;

typedef struct WholeResult {
    int programs, chunks;     /* embedding + chunks + head; the chunks */
    long seq, ctx;            /* prefill tokens; decode context */
    uint64_t artifact_bytes;  /* the prefill chain's artifacts */
    WholeStat first_ms;       /* empty cache: build (compile) every program, load, one forward, to logits */
    WholeStat first_build_ms; /* of which the builds */
    WholeStat cached_ms;      /* warm cache, open: look every program up, load, one forward, to logits */
    WholeStat cached_lookup_ms, cached_load_ms; /* of which */
    WholeStat steady_ms; /* one forward of the loaded, warmed chain, right after each cached call */
    WholeStat ratio;     /* each cached call ÷ its steady forward */
    WholeStat decode_ms; /* one token through embedding, chunks and head */
    bool finite;         /* the first call's logits are all numbers */
} WholeResult;

/* Build, load and time the whole chain of s (JobSpec.whole) in fresh caches
 * under s->root (removed before it returns).  MILC_OK, MILC_E_INPUT with
 * diagnostics in d, or MILC_E_SYSTEM with a message reported. */
int whole_bench(const WholeSpec *s, WholeResult *r, DiagSink *d);

#endif
