/* rt_test_util.h — helpers for the runtime tests: a seeded RNG, error norms,
 * and run_op(), which builds a one-op plan with the public builder, loads it
 * and runs it, so every kernel test goes through the real artifact path. */
#ifndef RT_TEST_UTIL_H
#define RT_TEST_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/half.h"
#include "milc/rt.h"

/* The kernel variant the tests run: $MILC_CPU (ctest runs the numeric tests
 * once per variant), else the best this CPU has.  A variant this CPU lacks
 * exits 77, which ctest reports as skipped. */
static inline RtCpu test_cpu(void) {
    static int v = -1;
    if (v >= 0) return (RtCpu)v;
    const char *e = getenv("MILC_CPU");
    RtCpu c = RT_CPU_AUTO;
    char err[256];
    if (e && *e && rt_cpu_parse(e, &c, err, sizeof err)) {
        fprintf(stderr, "MILC_CPU: %s\n", err);
        exit(2);
    }
    if (rt_cpu_check(c, err, sizeof err)) {
        fprintf(stderr, "skipped: %s\n", err);
        exit(77);
    }
    v = (int)(c == RT_CPU_AUTO ? rt_cpu_best() : c);
    return (RtCpu)v;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static inline uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
static inline int rng_int(int lo, int hi) { return lo + (int)(rng_u32() % (uint32_t)(hi - lo + 1)); }
static inline float rng_f(void) { return (float)(rng_u32() & 0xFFFFFF) / 16777216.0f * 2.0f - 1.0f; }
static inline float *rand_f32(int64_t n) {
    float *p = malloc((size_t)(n ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) p[i] = rng_f();
    return p;
}
static inline int64_t numel_of(int rank, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= d[i];
    return n;
}

/* max |a - b| / max(1e-6, max |b|) */
static inline double rel_max_err(const float *a, const double *b, int64_t n) {
    double m = 1e-6, e = 0;
    for (int64_t i = 0; i < n; i++) {
        if (fabs(b[i]) > m) m = fabs(b[i]);
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= e)) e = d; /* NaN propagates as a failure */
    }
    return e / m;
}
static inline double rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return sqrt(num / den);
}

typedef struct {
    RtDType dtype; /* F32 / I32 / BOOL, or F16 for a weight given as fp16 */
    int rank;
    int64_t dims[RT_MAX_RANK];
    const void *data;
    int weight; /* 0: an input; 1: a constant in the artifact (copied); 2: an fp16
                 * input read in place (rtb_input_f16); 3: a borrowed constant (rtb_weight_ref) */
} TArg;

/* Builds in -> op -> out, runs it on nth threads, copies the result to out.
 * Returns the first error code. */
static inline int run_op(RtOpKind kind, const void *params, size_t plen, const TArg *ins, int nin, RtDType odt,
                         int orank, const int64_t *odims, void *out, int nth) {
    char err[256] = "";
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int ids[RT_MAX_IN];
    RtTensor tin[RT_MAX_IN];
    int ntin = 0;
    for (int i = 0; i < nin; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        if (ins[i].weight == 1 || ins[i].weight == 3)
            ids[i] = (ins[i].weight == 1 ? rtb_weight : rtb_weight_ref)(b, name, ins[i].dtype, ins[i].rank, ins[i].dims,
                                                                        ins[i].data);
        else {
            ids[i] = ins[i].weight == 2 ? rtb_input_f16(b, name, ins[i].rank, ins[i].dims)
                                        : rtb_input(b, name, ins[i].dtype, ins[i].rank, ins[i].dims);
            RtTensor t = {.dtype = ins[i].dtype,
                          .rank = ins[i].rank,
                          .data = (void *)ins[i].data,
                          .size = (size_t)numel_of(ins[i].rank, ins[i].dims) * rt_dtype_size(ins[i].dtype)};
            memcpy(t.dims, ins[i].dims, sizeof t.dims);
            tin[ntin++] = t;
        }
    }
    int o = rtb_temp(b, odt, orank, odims);
    rtb_op(b, kind, ids, nin, &o, 1, params, plen);
    rtb_output(b, "out", o, odt);
    RtArtifact *a = NULL;
    int rc = rtb_finish(b, NULL, 0, &a, err, sizeof err);
    rtb_free(b);
    if (rc) {
        fprintf(stderr, "run_op(%s): finish: %s\n", rt_op_name(kind), err);
        return rc;
    }
    const RtSection *secs;
    int ns;
    rt_artifact_sections(a, &secs, &ns);
    RtModel *m = NULL;
    RtLoadOptions lo = {.nthreads = nth, .flags = RT_LOAD_VERIFY, .cpu = test_cpu()};
    rc = rt_model_load(&m, secs, ns, &lo, err, sizeof err);
    if (rc) {
        fprintf(stderr, "run_op(%s): load: %s\n", rt_op_name(kind), err);
        rt_artifact_free(a);
        return rc;
    }
    RtTensor tout = {
        .dtype = odt, .rank = orank, .data = out, .size = (size_t)numel_of(orank, odims) * rt_dtype_size(odt)};
    memcpy(tout.dims, odims, sizeof(int64_t) * (size_t)orank);
    rc = rt_run(m, tin, ntin, &tout, 1, 0, NULL);
    rt_model_free(m);
    rt_artifact_free(a);
    return rc;
}

#endif
