/* test_rt_noalloc.c — rt_run allocates nothing: this executable interposes
 * malloc and friends for the whole process (the GEMM library included) and
 * counts the calls made while rt_run is running, from any thread. */
#include <stdatomic.h>
#include <stddef.h>

#include "rt_test_util.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__)
#define NO_INTERPOSE 1 /* ASan owns malloc */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NO_INTERPOSE 1
#endif
#endif

static atomic_int counting, calls;

#ifndef NO_INTERPOSE
void *__libc_malloc(size_t);
void *__libc_calloc(size_t, size_t);
void *__libc_realloc(void *, size_t);
void *__libc_memalign(size_t, size_t);
void __libc_free(void *);

void *malloc(size_t n) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
    return __libc_realloc(p, n);
}
void *aligned_alloc(size_t al, size_t n) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
    return __libc_memalign(al, n);
}
void *memalign(size_t al, size_t n) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
    return __libc_memalign(al, n);
}
int posix_memalign(void **p, size_t al, size_t n) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) atomic_fetch_add(&calls, 1);
    *p = __libc_memalign(al, n);
    return *p ? 0 : 12;
}
void free(void *p) { __libc_free(p); }
#endif

/* Under ASan the counters stay 0 (no interposition): the runs still execute.
 * GEMMs on both weight forms (fp32 panels at M = 64, fp16 at M = 4), attention. */
TEST(run_does_not_allocate) {
    for (int mm = 0; mm < 2; mm++) {
        int64_t m = mm ? 4 : 64, k = 96, n = 80;
        RtPlanBuilder *b = rtb_new(RT_MODE_BOTH);
        int x = rtb_input(b, "x", RT_F16, 2, (const int64_t[]){m, k});
        uint16_t *w = malloc((size_t)(n * k) * 2);
        for (int64_t i = 0; i < n * k; i++) w[i] = float_to_half(rng_f());
        int W = rtb_weight(b, "W", RT_F16, 2, (const int64_t[]){n, k}, w);
        free(w);
        int y = rtb_temp(b, RT_F32, 2, (const int64_t[]){m, n});
        int a = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, m, 40});
        int o = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, m, 40});
        /* a KV cache bound in place (fp16) read by the decode attention, cache ++ new */
        int kc = rtb_input_f16(b, "kc", 4, (const int64_t[]){1, 80, 1, 50});
        int o2 = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, m, 40});
        for (int p = 0; p < 2; p++) {
            rtb_program(b, (RtProgram)p);
            RtGemmParams gp = {.layout = RT_GEMM_ROWS, .act = RT_ACT_GELU_TANH};
            rtb_op(b, RT_OP_GEMM, (const int[]){x, W}, 2, &y, 1, &gp, sizeof gp);
            RtCopyParams cp = {.rank = 3, .dims = {2, m, 40}, .src_stride = {40, n, 1}, .dst_stride = {m * 40, 40, 1}};
            rtb_op(b, RT_OP_COPY, &y, 1, &a, 1, &cp, sizeof cp);
            RtAttnParams ap = {.scale = 0.1f, .causal = 1};
            rtb_op(b, RT_OP_ATTENTION, (const int[]){a, a, a}, 3, &o, 1, &ap, sizeof ap);
            RtAttnParams kp = {.scale = 0.1f, .flags = RT_ATTN_K_T | RT_ATTN_V_T | RT_ATTN_SPLIT, .kv_heads = 2};
            rtb_op(b, RT_OP_ATTENTION, (const int[]){a, kc, kc, a, a}, 5, &o2, 1, &kp, sizeof kp);
        }
        rtb_output(b, "o", o, RT_F16);
        rtb_output(b, "o2", o2, RT_F32);
        RtArtifact *art;
        char err[200];
        CHECK_EQ_INT(rtb_finish(b, NULL, 0, &art, err, sizeof err), RT_OK);
        rtb_free(b);
        const RtSection *s;
        int ns;
        rt_artifact_sections(art, &s, &ns);
        RtModel *model;
        RtLoadOptions lo = {.nthreads = 2};
        CHECK_EQ_INT(rt_model_load(&model, s, ns, &lo, err, sizeof err), RT_OK);
        uint16_t *xin = calloc((size_t)(m * k), 2), *out = calloc((size_t)(2 * m * 40), 2), *kin = calloc(80 * 50, 2);
        float *out2 = calloc((size_t)(2 * m * 40), 4);
        RtTensor in[2] = {{RT_F16, 2, {m, k}, xin, (size_t)(m * k) * 2}, {RT_F16, 4, {1, 80, 1, 50}, kin, 80 * 50 * 2}};
        RtTensor ot[2] = {{RT_F16, 4, {1, 2, m, 40}, out, (size_t)(2 * m * 40) * 2},
                          {RT_F32, 4, {1, 2, m, 40}, out2, (size_t)(2 * m * 40) * 4}};
        CHECK_EQ_INT(rt_run(model, in, 2, ot, 2, 0, NULL), RT_OK); /* first run: thread-local setup in libraries */
        atomic_store(&calls, 0);
        atomic_store(&counting, 1);
        for (int r = 0; r < 3; r++) {
            CHECK_EQ_INT(rt_run(model, in, 2, ot, 2, 0, NULL), RT_OK);
            CHECK_EQ_INT(rt_run(model, in, 2, ot, 2, RT_RUN_NONBONDED, NULL), RT_OK);
        }
        atomic_store(&counting, 0);
        CHECK_EQ_INT(atomic_load(&calls), 0);
        rt_model_free(model);
        rt_artifact_free(art);
        free(xin), free(out), free(kin), free(out2);
    }
}

int main(void) {
    RUN(run_does_not_allocate);
    TEST_MAIN_END();
}
