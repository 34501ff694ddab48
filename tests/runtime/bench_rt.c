/* bench_rt.c — runtime figures on this machine, in one run: fp32 FMA peak
 * (every thread), read bandwidth, prefill GEMM GFLOP/s as a share of peak,
 * decode GEMV time against weight bytes / bandwidth, and the cost of one
 * dispatch.  Built with the tests, not run by ctest:
 *   build/tests/runtime/bench_rt [threads] */
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "rt_test_util.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- peak: 16 independent FMA chains per thread, 0.5 s ----
 * At the width of the kernel variant the run measures (test_cpu()):
 * 512-bit for avx512, 256-bit for avx2 (on Zen 5 the two differ 2x), and
 * for the scalar variant the widest vector the CPU has (its ratio says how
 * far the correctness reference is from the machine).  Written in asm so no
 * compiler can spill or fold the 16 chains: acc += 1 * 1e-7 never reaches a
 * denormal or an assist.  The machine is shared: take the best of many 1 ms
 * bursts, like the best-of-N timings below, so both see the same quiet
 * moments. */
#if defined(__x86_64__)
/* n iterations of 16 FMAs of 16 lanes */
__attribute__((target("avx512f"))) static void fma_burst512(int64_t n) {
    static const float one = 1.0f, tiny = 1e-7f;
    __asm__ volatile("vbroadcastss %[one], %%zmm16\n\tvbroadcastss %[tiny], %%zmm17\n\t"
                     "vxorps %%xmm0, %%xmm0, %%xmm0\n\tvmovaps %%zmm0, %%zmm1\n\tvmovaps %%zmm0, %%zmm2\n\t"
                     "vmovaps %%zmm0, %%zmm3\n\tvmovaps %%zmm0, %%zmm4\n\tvmovaps %%zmm0, %%zmm5\n\t"
                     "vmovaps %%zmm0, %%zmm6\n\tvmovaps %%zmm0, %%zmm7\n\tvmovaps %%zmm0, %%zmm8\n\t"
                     "vmovaps %%zmm0, %%zmm9\n\tvmovaps %%zmm0, %%zmm10\n\tvmovaps %%zmm0, %%zmm11\n\t"
                     "vmovaps %%zmm0, %%zmm12\n\tvmovaps %%zmm0, %%zmm13\n\tvmovaps %%zmm0, %%zmm14\n\t"
                     "vmovaps %%zmm0, %%zmm15\n"
                     "1:\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm0\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm1\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm2\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm3\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm4\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm5\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm6\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm7\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm8\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm9\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm10\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm11\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm12\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm13\n\t"
                     "vfmadd231ps %%zmm16, %%zmm17, %%zmm14\n\tvfmadd231ps %%zmm16, %%zmm17, %%zmm15\n\t"
                     "dec %[n]\n\tjnz 1b\n"
                     : [n] "+r"(n)
                     : [one] "m"(one), [tiny] "m"(tiny)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                       "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "cc");
}
/* The same at 256 bits: AVX2 has 16 ymm registers, so 14 chains + 2 operands
 * would be the most; 12 chains keep two FMA pipes of latency 4 busy. */
__attribute__((target("avx2,fma"))) static void fma_burst256(int64_t n) {
    static const float one = 1.0f, tiny = 1e-7f;
    __asm__ volatile("vbroadcastss %[one], %%ymm14\n\tvbroadcastss %[tiny], %%ymm15\n\t"
                     "vxorps %%xmm0, %%xmm0, %%xmm0\n\tvmovaps %%ymm0, %%ymm1\n\tvmovaps %%ymm0, %%ymm2\n\t"
                     "vmovaps %%ymm0, %%ymm3\n\tvmovaps %%ymm0, %%ymm4\n\tvmovaps %%ymm0, %%ymm5\n\t"
                     "vmovaps %%ymm0, %%ymm6\n\tvmovaps %%ymm0, %%ymm7\n\tvmovaps %%ymm0, %%ymm8\n\t"
                     "vmovaps %%ymm0, %%ymm9\n\tvmovaps %%ymm0, %%ymm10\n\tvmovaps %%ymm0, %%ymm11\n"
                     "1:\n\t"
                     "vfmadd231ps %%ymm14, %%ymm15, %%ymm0\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm1\n\t"
                     "vfmadd231ps %%ymm14, %%ymm15, %%ymm2\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm3\n\t"
                     "vfmadd231ps %%ymm14, %%ymm15, %%ymm4\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm5\n\t"
                     "vfmadd231ps %%ymm14, %%ymm15, %%ymm6\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm7\n\t"
                     "vfmadd231ps %%ymm14, %%ymm15, %%ymm8\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm9\n\t"
                     "vfmadd231ps %%ymm14, %%ymm15, %%ymm10\n\tvfmadd231ps %%ymm14, %%ymm15, %%ymm11\n\t"
                     "dec %[n]\n\tjnz 1b\n"
                     : [n] "+r"(n)
                     : [one] "m"(one), [tiny] "m"(tiny)
                     : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11",
                       "xmm14", "xmm15", "cc");
}
#endif

/* FLOPs of one burst iteration at the probe's width (0: no probe here). */
static double fma_probe_flops(void) {
#if defined(__x86_64__)
    RtCpu v = test_cpu();
    if (v == RT_CPU_AVX512) return 16.0 * 16 * 2;
    if (v == RT_CPU_AVX2 || rt_cpu_check(RT_CPU_AVX2, NULL, 0) == RT_OK) return 12.0 * 8 * 2;
#endif
    return 0;
}

static void *fma_thread(void *arg) {
    double *flops = arg, t0 = now(), per = fma_probe_flops(), best = 0;
    while (per > 0 && now() - t0 < 0.5) {
        double tb = now();
#if defined(__x86_64__)
        if (per == 16.0 * 16 * 2)
            fma_burst512(10000);
        else
            fma_burst256(10000);
#endif
        double r = 10000.0 * per / (now() - tb);
        if (r > best) best = r;
    }
    *flops = best;
    return NULL;
}

static double fma_peak(int nth) {
    pthread_t th[64];
    double f[64];
    for (int i = 0; i < nth; i++) pthread_create(&th[i], NULL, fma_thread, &f[i]);
    double sum = 0;
    for (int i = 0; i < nth; i++) pthread_join(th[i], NULL), sum += f[i];
    return sum;
}

/* ---- read bandwidth over a set of byte ranges, nth threads ----
 * Each thread reads its own 1/nth of every range, in order.  Every pass is
 * timed as a whole: all threads start it together (a barrier) and it ends
 * when the last thread is done (another), so the figure is what nth threads
 * read at once.  Thread 0 keeps the time: a separate timing thread would be
 * one thread more than cores and wake late.  (Each thread keeping its own
 * best pass overstated the figure: a thread's best pass was often one it ran
 * after the others had finished, alone with the memory system.)  The best
 * pass counts; thread start-up is outside the timing, so cache-sized sets
 * measure too.
 * Passes alternate a plain read loop with one that asks for its bytes 8 KB
 * ahead: on Zen 5 the plain loop read 30-36 GB/s where the prefetching one
 * read 35-45 in the same minute, and the decode kernels prefetch, so the
 * plain loop alone understated what the machine can read by ~20%.  The sums
 * are of 32-bit integers: the ranges may hold any bits (fp16 weights), and
 * integer adds never take a denormal assist. */
enum { BW_AHEAD = 8192 };
typedef struct {
    const void *p;
    size_t bytes;
} BwRange;
typedef struct {
    const BwRange *r;
    int nr, ith, nth, reps;
    pthread_barrier_t *bar;
    double t; /* thread 0: the best pass */
} BwArg;
static volatile uint32_t isink;

/* The part of range r thread ith reads: whole 256-byte blocks. */
static size_t bw_slice(const BwRange *r, int ith, int nth, const char **start) {
    size_t blk = r->bytes / 256 / (size_t)nth;
    *start = (const char *)r->p + blk * 256 * (size_t)ith;
    return blk * 256;
}

/* The 32-bit sum of n bytes (a multiple of 256) at p, 256 bits at a time
 * where the CPU has AVX2, asking 8 KB ahead when `ahead`. */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint32_t bw_sum256(const char *p, size_t n, bool ahead) {
    __m256i v0 = _mm256_setzero_si256(), v1 = v0, v2 = v0, v3 = v0, v4 = v0, v5 = v0, v6 = v0, v7 = v0;
    for (size_t i = 0; i < n; i += 256) {
        if (ahead)
            for (int l = 0; l < 4; l++) _mm_prefetch(p + i + 64 * l + BW_AHEAD, _MM_HINT_T0);
        v0 = _mm256_add_epi32(v0, _mm256_loadu_si256((const __m256i *)(p + i)));
        v1 = _mm256_add_epi32(v1, _mm256_loadu_si256((const __m256i *)(p + i + 32)));
        v2 = _mm256_add_epi32(v2, _mm256_loadu_si256((const __m256i *)(p + i + 64)));
        v3 = _mm256_add_epi32(v3, _mm256_loadu_si256((const __m256i *)(p + i + 96)));
        v4 = _mm256_add_epi32(v4, _mm256_loadu_si256((const __m256i *)(p + i + 128)));
        v5 = _mm256_add_epi32(v5, _mm256_loadu_si256((const __m256i *)(p + i + 160)));
        v6 = _mm256_add_epi32(v6, _mm256_loadu_si256((const __m256i *)(p + i + 192)));
        v7 = _mm256_add_epi32(v7, _mm256_loadu_si256((const __m256i *)(p + i + 224)));
    }
    v0 = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(v0, v1), _mm256_add_epi32(v2, v3)),
                          _mm256_add_epi32(_mm256_add_epi32(v4, v5), _mm256_add_epi32(v6, v7)));
    uint32_t lane[8], s = 0;
    _mm256_storeu_si256((__m256i *)lane, v0);
    for (int l = 0; l < 8; l++) s += lane[l];
    return s;
}
#endif
static uint32_t bw_sum(const char *p, size_t n, bool ahead) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2")) return bw_sum256(p, n, ahead);
#endif
    uint32_t s = 0;
    for (size_t i = 0; i < n; i += 4) {
        if (ahead && (i & 255) == 0) __builtin_prefetch(p + i + BW_AHEAD);
        uint32_t x;
        memcpy(&x, p + i, 4);
        s += x;
    }
    return s;
}

static void *bw_thread(void *arg) {
    BwArg *a = arg;
    a->t = 1e9;
    for (int rep = 0; rep < 2 * a->reps; rep++) {
        bool ahead = rep & 1;
        pthread_barrier_wait(a->bar);
        double t0 = now();
        uint32_t s = 0; /* unsigned: the sums wrap */
        for (int k = 0; k < a->nr; k++) {
            const char *p;
            size_t n = bw_slice(&a->r[k], a->ith, a->nth, &p);
            s += bw_sum(p, n, ahead);
        }
        isink = s;
        pthread_barrier_wait(a->bar);
        double t = now() - t0;
        if (t < a->t) a->t = t;
    }
    return NULL;
}

/* Bytes per second nth threads read from the ranges: the best of reps passes
 * of each loop. */
static double bandwidth_ranges(const BwRange *r, int nr, int nth, int reps) {
    pthread_t th[64];
    BwArg a[64];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nth);
    for (int i = 0; i < nth; i++) {
        a[i] = (BwArg){r, nr, i, nth, reps, &bar, 0};
        pthread_create(&th[i], NULL, bw_thread, &a[i]);
    }
    for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    double bytes = 0;
    for (int k = 0; k < nr; k++)
        for (int i = 0; i < nth; i++) {
            const char *p;
            bytes += (double)bw_slice(&r[k], i, nth, &p);
        }
    return bytes / a[0].t;
}

static double bandwidth_over(const void *p, size_t bytes, int nth, int reps) {
    BwRange r = {p, bytes};
    return bandwidth_ranges(&r, 1, nth, reps);
}

/* Appends an artifact's weight sections to r (at most max in all): the
 * bytes a model streams, where they lie.  Memory is not uniform here: in
 * the same seconds a fresh buffer read 75-83 GB/s and a decode's own
 * weights 42-48 (the VM's memory sits on more than one host node), so a
 * kernel is measured against the bandwidth of its own bytes. */
static int artifact_ranges(const RtArtifact *a, BwRange *r, int n, int max) {
    const RtSection *s;
    int ns;
    rt_artifact_sections(a, &s, &ns);
    for (int i = 0; i < ns && n < max; i++)
        if (s[i].kind == RT_SEC_WEIGHT) r[n++] = (BwRange){s[i].data, s[i].size};
    return n;
}

static double bandwidth(size_t bytes, int nth, int reps) {
    size_t n = bytes / 4;
    float *p = aligned_alloc(64, (n * 4 + 63) & ~(size_t)63);
    for (size_t i = 0; i < n; i++) p[i] = 1.0f;
    double bw = bandwidth_over(p, bytes, nth, reps);
    free(p);
    return bw;
}

/* ---- a plan of `nl` GEMM layers [M, K] -> [M, N], loaded once ---- */
typedef struct {
    RtArtifact *a;
    RtModel *m;
    RtTensor in, out;
    double flops, wbytes;
} Chain;

/* RT_U8 weights are 8-bit quantized (RT_OP_QGEMM, chain_q8 = 8), 4-bit
 * quantized in blocks of 32 along K (chain_q8 = 4) or half of them zero,
 * stored sparse with fp16 values (RT_OP_SPGEMM, chain_q8 = 1) rather than
 * 4-bit palettes. */
static int chain_lut_bits = 4; /* the palettized chains' index width */
static int chain_lut_f32 = 0;  /* palettes of fp32 values (fp16 ones by default) */
static int chain_q8;
/* GEMMs in the channels layout (x [1, K, M], as the GPT-2 templates' [1, C, 1, S]) rather than rows. */
static bool chain_channels;

/* A stack of layers, each a list of (K, N) GEMMs applied to the same x; a
 * projection back to K closes each layer so layers chain. */
/* An fp32 tensor of the shape the model's input or output has (no data yet). */
static void io_tensor(RtTensor *t, const RtIoInfo *io) {
    *t = (RtTensor){.dtype = RT_F32, .rank = io->rank};
    size_t n = 1;
    for (int d = 0; d < io->rank; d++) t->dims[d] = io->dims[d], n *= (size_t)io->dims[d];
    t->size = n * 4;
}

static int chain_build(Chain *c, int mode, int64_t m, const int64_t (*kn)[2], int ng, int layers, RtDType wdt,
                       int nth) {
    memset(c, 0, sizeof *c);
    RtPlanBuilder *b = rtb_new(mode);
    int64_t k0 = kn[0][0];
    int x = chain_channels ? rtb_input(b, "x", RT_F32, 3, (const int64_t[]){1, k0, m})
                           : rtb_input(b, "x", RT_F32, 2, (const int64_t[]){m, k0});
    int cur = x;
    for (int l = 0; l < layers; l++) {
        for (int g = 0; g < ng; g++) {
            int64_t k = kn[g][0], n = kn[g][1];
            size_t cnt = (size_t)(k * n);
            int y = chain_channels ? rtb_temp(b, RT_F32, 3, (const int64_t[]){1, n, m})
                                   : rtb_temp(b, RT_F32, 2, (const int64_t[]){m, n});
            if (wdt == RT_U8 && chain_q8 == 1) { /* sparse: a mask bit per weight, fp16 values of the set ones */
                int64_t rb = (k + 7) / 8, nnz = 0;
                uint8_t *mk = malloc((size_t)(n * rb));
                uint16_t *v = malloc(sizeof(uint16_t) * (size_t)(n * k + 16));
                int32_t *st = malloc(sizeof(int32_t) * (size_t)(n + 1));
                for (int64_t r = 0; r < n; r++) {
                    st[r] = (int32_t)nnz;
                    for (int64_t j = 0; j < rb; j++) {
                        mk[r * rb + j] = (uint8_t)(rng_f() * 256);
                        for (int bit = 0; bit < 8; bit++)
                            if (mk[r * rb + j] >> bit & 1) v[nnz++] = float_to_half(rng_f() * 0.06f);
                    }
                }
                st[n] = (int32_t)nnz;
                for (int i = 0; i < 16; i++) v[nnz + i] = 0;
                int mi = rtb_weight(b, "m", RT_U8, 2, (const int64_t[]){n, rb}, mk);
                int vi = rtb_weight(b, "v", RT_F16, 1, (const int64_t[]){nnz + 16}, v);
                int si = rtb_weight(b, "s", RT_I32, 1, (const int64_t[]){n + 1}, st);
                free(mk), free(v), free(st);
                RtSpGemmParams sp = {0};
                rtb_op(b, RT_OP_SPGEMM, (const int[]){cur, mi, vi, si}, 4, &y, 1, &sp, sizeof sp);
                cur = y;
                c->flops += 2.0 * (double)(m * k * n);
                c->wbytes += (double)(n * rb) + 2.0 * (double)(nnz + 16) + 4.0 * (double)(n + 1);
                continue;
            }
            if (wdt == RT_U8 && chain_q8) { /* quantized: the integers, a scale and offset per row (per block) */
                int q4 = chain_q8 == 4;
                int64_t bk = q4 ? k / 32 : 1, nb = n * bk, qb = q4 ? (int64_t)cnt / 2 : (int64_t)cnt;
                uint8_t *q = malloc((size_t)qb);
                float *so = malloc(sizeof(float) * (size_t)(2 * nb));
                for (int64_t i = 0; i < qb; i++) q[i] = (uint8_t)(rng_f() * 1e4f);
                /* weights of about the 8-bit ones' size (4-bit values are 16x smaller), so
                 * the 96 layers neither blow up nor sink into denormals (which cost ~100x) */
                for (int64_t i = 0; i < nb; i++)
                    so[i] = rng_f() * (q4 ? 16e-3f : 1e-3f), so[nb + i] = (float)(int)(rng_f() * (q4 ? 4 : 8));
                int wi = rtb_weight(b, "q", RT_U8, 2, (const int64_t[]){n, q4 ? k / 2 : k}, q);
                int si = rtb_weight(b, "sc", RT_F32, 1, (const int64_t[]){nb}, so);
                int oi = rtb_weight(b, "of", RT_F32, 1, (const int64_t[]){nb}, so + nb);
                free(q), free(so);
                RtQGemmParams qp = {.flags = RT_QG_SIGNED | (q4 ? RT_QG_INT4 : 0), .bn = (int32_t)n, .bk = (int32_t)bk};
                rtb_op(b, RT_OP_QGEMM, (const int[]){cur, wi, si, oi}, 4, &y, 1, &qp, sizeof qp);
                cur = y;
                c->flops += 2.0 * (double)(m * k * n);
                c->wbytes += (double)qb + (double)(sizeof(float) * (size_t)(2 * nb));
                continue;
            }
            if (wdt == RT_U8) { /* palettized (chain_lut_bits): packed indices, one palette per weight */
                int bits = chain_lut_bits, np = 1 << bits;
                size_t nb = cnt * (size_t)bits / 8;
                uint8_t *ix = malloc(nb);
                float pal[16];
                for (size_t i = 0; i < nb; i++) ix[i] = (uint8_t)(rng_f() * 1e4f);
                /* a palette of zero mean and rms 0.0265: across the 4 layer shapes
                 * (K = 768, 2304, 768, 3072) the chain's values keep their size (a
                 * random palette's mean made them overflow to inf and NaN by the
                 * 30th of the 96 layers) */
                double rms = 0;
                for (int i = 0; i < np; i++) rms += (i - (np - 1) / 2.0) * (i - (np - 1) / 2.0) / np;
                for (int i = 0; i < np; i++) pal[i] = (float)((i - (np - 1) / 2.0) * 0.0265 / sqrt(rms));
                /* fp16 values, as a Core ML palette's are (lut32: fp32 ones) */
                for (int i = 0; i < np && !chain_lut_f32; i++) pal[i] = half_to_float(float_to_half(pal[i]));
                int wi = rtb_weight(b, "ix", RT_U8, 2, (const int64_t[]){n, k * bits / 8}, ix);
                int li = rtb_weight(b, "lut", RT_F32, 1, (const int64_t[]){np}, pal);
                free(ix);
                RtLutParams lp = {.bits = bits, .bn = 1, .bk = 1};
                rtb_op(b, RT_OP_LUT_GEMM, (const int[]){cur, wi, li}, 3, &y, 1, &lp, sizeof lp);
                cur = y;
                c->flops += 2.0 * (double)(m * k * n);
                c->wbytes += (double)(nb + sizeof(float) * (size_t)np);
                continue;
            }
            void *w = malloc(cnt * 4);
            if (wdt == RT_F16)
                for (size_t i = 0; i < cnt; i++) ((uint16_t *)w)[i] = float_to_half(rng_f() * 0.03f);
            else
                for (size_t i = 0; i < cnt; i++) ((float *)w)[i] = rng_f() * 0.03f;
            int wi = rtb_weight(b, "w", wdt, 2, (const int64_t[]){n, k}, w);
            free(w);
            RtGemmParams p = {.layout = chain_channels ? RT_GEMM_CHANNELS : RT_GEMM_ROWS};
            rtb_op(b, RT_OP_GEMM, (const int[]){cur, wi}, 2, &y, 1, &p, sizeof p);
            cur = y;
            c->flops += 2.0 * (double)(m * k * n);
            c->wbytes += (double)(k * n) * (double)rt_dtype_size(wdt);
        }
    }
    rtb_output(b, "y", cur, RT_F32);
    char err[256];
    int rc = rtb_finish(b, NULL, 0, &c->a, err, sizeof err);
    rtb_free(b);
    if (rc) {
        fprintf(stderr, "chain: %s\n", err);
        return rc;
    }
    const RtSection *s;
    int n;
    rt_artifact_sections(c->a, &s, &n);
    RtLoadOptions lo = {.nthreads = nth, .cpu = test_cpu()};
    if ((rc = rt_model_load(&c->m, s, n, &lo, err, sizeof err))) {
        fprintf(stderr, "chain load: %s\n", err);
        return rc;
    }
    RtIoInfo io;
    rt_model_input(c->m, 0, &io);
    io_tensor(&c->in, &io);
    c->in.data = rand_f32((int64_t)(c->in.size / 4));
    rt_model_output(c->m, 0, &io);
    io_tensor(&c->out, &io);
    c->out.data = malloc(c->out.size);
    return RT_OK;
}

static double chain_time(Chain *c, int reps, RtRunStats *st) {
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        rt_run(c->m, &c->in, 1, &c->out, 1, 0, st);
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* The same, timed by the calling thread's CPU clock: with one thread every
 * part runs on the caller, so the time the scheduler gives other processes
 * is left out.  On a machine with ~4 runnable threads per core a 15 ms GEMM
 * never runs a whole time slice alone, and its wall time measures the load. */
static double chain_cpu_time(Chain *c, int reps) {
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        rt_run(c->m, &c->in, 1, &c->out, 1, 0, NULL);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        double t = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
        if (t < best) best = t;
    }
    return best;
}

static void chain_free(Chain *c) {
    rt_model_free(c->m);
    rt_artifact_free(c->a);
    free(c->in.data);
    free(c->out.data);
}

/* n tiny unary ops on 16 floats: mode 1 = n dispatches, mode 2 = one. */
static double dispatch_cost(int mode, int n, int nth, double *per_op) {
    RtPlanBuilder *b = rtb_new(mode);
    int cur = rtb_input(b, "x", RT_F32, 1, (const int64_t[]){16});
    for (int i = 0; i < n; i++) {
        int y = rtb_temp(b, RT_F32, 1, (const int64_t[]){16});
        RtUnaryParams p = {RT_UN_NEG, 0};
        rtb_op(b, RT_OP_UNARY, &cur, 1, &y, 1, &p, sizeof p);
        cur = y;
    }
    rtb_output(b, "y", cur, RT_F32);
    RtArtifact *a;
    rtb_finish(b, NULL, 0, &a, NULL, 0);
    rtb_free(b);
    const RtSection *s;
    int ns;
    rt_artifact_sections(a, &s, &ns);
    RtModel *m;
    RtLoadOptions lo = {.nthreads = nth, .cpu = test_cpu()};
    rt_model_load(&m, s, ns, &lo, NULL, 0);
    float x[16] = {0}, y[16];
    RtTensor in = {RT_F32, 1, {16}, x, sizeof x}, out = {RT_F32, 1, {16}, y, sizeof y};
    RtRunStats st = {0};
    double best = 1e9;
    for (int r = 0; r < 20; r++) {
        double t0 = now();
        rt_run(m, &in, 1, &out, 1, 0, &st);
        double t = now() - t0;
        if (t < best) best = t;
    }
    rt_model_free(m);
    rt_artifact_free(a);
    *per_op = best / n;
    return best / (double)(st.dispatches ? st.dispatches : 1);
}

/* Decode over 4-bit palettized weights (RT_OP_LUT_GEMM, issue #16's goal:
 * <= 1.5x the time to stream the packed bytes), GPT-2's layer GEMMs times
 * 24 (~99 MB of indices, past the caches), against the bandwidth of
 * reading its own weight sections; the fp16 GEMV of the same shapes beside
 * it.  Paired: each round times the GEMV (best of 2 tokens) and then
 * streams the same bytes (the better of the probe's two loops), so both
 * see the same moment's load, and the ratio printed is the median of the
 * rounds' ratios (single unpaired figures swung 1.3-4.3 on a loaded
 * machine). */
static int lut_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double lut_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, lut_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { LUT_ROUNDS = 25 };
/* q8: the 8-bit quantized GEMV (bench_rt N q8) instead of the palettized one. */
/* q8: 0 palettized, 8 or 4 quantized (chain_q8) */
static void lut_decode(int nth, int q8) {
    static const int64_t layer[][2] = {{768, 2304}, {2304, 768}, {768, 3072}, {3072, 768}};
    const char *what = q8 == 8   ? "8-bit quantized"
                       : q8 == 4 ? "4-bit quantized (blocks of 32)"
                       : q8 == 1 ? "sparse (half zero, fp16 values)"
                       : chain_lut_bits == 2 ? "2-bit palettized"
                       : chain_lut_f32       ? "4-bit palettized (fp32 palette)"
                                             : "4-bit palettized";
    Chain c4, c16;
    chain_q8 = q8;
    chain_build(&c4, RT_MODE_BONDED, 1, layer, 4, 24, RT_U8, nth);
    chain_build(&c16, RT_MODE_BONDED, 1, layer, 4, 24, RT_F16, nth);
    BwRange w4[256], w16[256];
    int n4 = artifact_ranges(c4.a, w4, 0, 256), n16 = artifact_ranges(c16.a, w16, 0, 256);
    double r4[LUT_ROUNDS], r16[LUT_ROUNDS], ms4[LUT_ROUNDS], gb4[LUT_ROUNDS];
    printf("decode GEMV M=1, 24 layers, %d threads: %s %.1f MB, fp16 %.1f MB; %d paired rounds\n", nth, what,
           c4.wbytes * 1e-6, c16.wbytes * 1e-6, LUT_ROUNDS);
    for (int r = 0; r < LUT_ROUNDS; r++) {
        double t4 = chain_time(&c4, 2, NULL), bw4 = bandwidth_ranges(w4, n4, nth, 1);
        double t16 = chain_time(&c16, 2, NULL), bw16 = bandwidth_ranges(w16, n16, nth, 1);
        r4[r] = t4 / (c4.wbytes / bw4), r16[r] = t16 / (c16.wbytes / bw16), ms4[r] = t4 * 1e3, gb4[r] = bw4 * 1e-9;
        if (getenv("BENCH_VERBOSE"))
            printf("  round %d: %s %.3f ms, streaming its bytes %.3f ms (%.1f GB/s): ratio %.2f; fp16 ratio %.2f\n", r,
                   what, t4 * 1e3, c4.wbytes / bw4 * 1e3, bw4 * 1e-9, r4[r], r16[r]);
    }
    double m4 = lut_median(r4, LUT_ROUNDS), lo = r4[0], hi = r4[LUT_ROUNDS - 1];
    printf("%s GEMV / streaming its bytes: median %.2f (%.2f-%.2f) over %d paired rounds "
           "(median %.3f ms, %.1f GB/s); fp16 GEMV: median %.2f\n",
           what, m4, lo, hi, LUT_ROUNDS, lut_median(ms4, LUT_ROUNDS), lut_median(gb4, LUT_ROUNDS),
           lut_median(r16, LUT_ROUNDS));
    chain_free(&c4);
    chain_free(&c16);
}

int main(int argc, char **argv) {
    int nth = argc > 1 ? atoi(argv[1]) : 2;
    if (nth < 1 || nth > 64) {
        fprintf(stderr, "usage: bench_rt [THREADS (1..64, default 2)] [decode|prefill|prefill-ch|lut|lut32|lut2|q8|q4|sparse]\n");
        return 2;
    }
    if (argc > 2 && !strcmp(argv[2], "lut32")) {
        chain_lut_f32 = 1;
        lut_decode(nth, 0);
        return 0;
    }
    if (argc > 2 && !strcmp(argv[2], "lut2")) {
        chain_lut_bits = 2;
        lut_decode(nth, 0);
        return 0;
    }
    if (argc > 2 && (!strcmp(argv[2], "lut") || !strcmp(argv[2], "q8") || !strcmp(argv[2], "q4") ||
                     !strcmp(argv[2], "sparse"))) { /* just a compressed decode */
        lut_decode(nth, argv[2][0] == 'q' ? argv[2][1] - '0' : argv[2][0] == 's');
        return 0;
    }
    if (argc > 2 && strcmp(argv[2], "decode") == 0) { /* just the 12-layer decode, for profiling */
        static const int64_t layer[][2] = {{768, 2304}, {2304, 768}, {768, 3072}, {3072, 768}};
        Chain c;
        chain_build(&c, RT_MODE_BONDED, 1, layer, 4, 12, RT_F16, nth);
        printf("decode 12 layers: %.3f ms\n", chain_time(&c, 50, NULL) * 1e3);
        chain_free(&c);
        return 0;
    }
    /* the GEMM shapes alone, for tuning ("prefill-ch": in the channels layout) */
    bool prefill_only = argc > 2 && strncmp(argv[2], "prefill", 7) == 0;
    chain_channels = prefill_only && strcmp(argv[2], "prefill-ch") == 0;
    double peak1 = fma_peak(1), peak = fma_peak(nth);
    printf("kernel variant %s (MILC_CPU); fp32 FMA peak at its width: %.1f GFLOP/s on 1 thread, %.1f GFLOP/s on %d "
           "threads\n",
           rt_cpu_name(test_cpu()), peak1 * 1e-9, peak * 1e-9, nth);
    double bw_dram = prefill_only ? 0 : bandwidth((size_t)1 << 30, nth, 5);
    if (!prefill_only) printf("read bandwidth, 1 GiB buffer, %d threads: %.1f GB/s\n", nth, bw_dram * 1e-9);

    /* prefill: T = 128 tokens through GPT-2's GEMM shapes, fp32 and fp16 weights */
    static const int64_t shapes[3][2] = {{768, 768}, {768, 3072}, {3072, 768}};
    Chain c;
    for (int s = 0; s < 6; s++) {
        RtDType wdt = s < 3 ? RT_F32 : RT_F16;
        chain_build(&c, RT_MODE_BONDED, 128, &shapes[s % 3], 1, 1, wdt, nth);
        double t = chain_time(&c, 50, NULL);
        printf("prefill GEMM%s T=128 K=%ld -> N=%ld, %s weights: %.3f ms, %.1f GFLOP/s = %.2f of %d-thread peak",
               chain_channels ? " (channels)" : "", (long)shapes[s % 3][0], (long)shapes[s % 3][1], wdt == RT_F32 ? "fp32" : "fp16", t * 1e3,
               c.flops / t * 1e-9, c.flops / t / peak, nth);
        if (nth == 1) {
            double tc = chain_cpu_time(&c, 50);
            printf("; by CPU time %.3f ms = %.2f", tc * 1e3, c.flops / tc / peak);
        }
        printf("\n");
        chain_free(&c);
    }
    if (prefill_only) return 0;

    /* decode: one token through a GPT-2 124M layer stack's GEMMs, fp16 weights */
    static const int64_t layer[][2] = {{768, 2304}, {2304, 768}, {768, 3072}, {3072, 768}};
    for (int layers = 1; layers <= 12; layers += 11) {
        chain_build(&c, RT_MODE_BONDED, 1, layer, 4, layers, RT_F16, nth);
        double t = chain_time(&c, 20, NULL);
        BwRange wr[64];
        double bw = bandwidth_ranges(wr, artifact_ranges(c.a, wr, 0, 64), nth, 20);
        printf("decode GEMV M=1, %2d layers, %.1f MB fp16 weights: %.3f ms; weights/bandwidth (%.1f GB/s reading them) "
               "= %.3f ms; ratio %.2f\n",
               layers, c.wbytes * 1e-6, t * 1e3, bw * 1e-9, c.wbytes / bw * 1e3, t / (c.wbytes / bw));
        printf("   same against the 1 GiB (DRAM) bandwidth: ratio %.2f\n", t / (c.wbytes / bw_dram));
        chain_free(&c);
    }
    chain_q8 = true;
    for (int64_t m = 16; m <= 128; m *= 2) {
        Chain c16, c32, c8;
        chain_build(&c16, RT_MODE_BONDED, m, layer, 4, 1, RT_F16, nth);
        chain_build(&c32, RT_MODE_BONDED, m, layer, 4, 1, RT_F32, nth);
        chain_build(&c8, RT_MODE_BONDED, m, layer, 4, 1, RT_U8, nth);
        double t16 = chain_time(&c16, 20, NULL), t32 = chain_time(&c32, 20, NULL), t8 = chain_time(&c8, 20, NULL);
        printf("one layer's GEMMs at M=%ld: fp16 weights %.3f ms, fp32 weights %.3f ms, int8 weights %.3f ms\n",
               (long)m, t16 * 1e3, t32 * 1e3, t8 * 1e3);
        chain_free(&c16);
        chain_free(&c32);
        chain_free(&c8);
    }

    /* fused causal attention, GPT-2 124M shapes: 12 heads of 64, prefill T = 128 and decode 1 vs 128 cached */
    for (int dec = 0; dec < 2; dec++) {
        int64_t L = dec ? 1 : 128, S = 128;
        RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
        int q = rtb_input(b, "q", RT_F32, 4, (const int64_t[]){1, 12, L, 64});
        int k = rtb_input(b, "k", RT_F32, 4, (const int64_t[]){1, 12, S, 64});
        int v = rtb_input(b, "v", RT_F32, 4, (const int64_t[]){1, 12, S, 64});
        int o = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 12, L, 64});
        RtAttnParams ap = {.scale = 0.125f, .causal = 1};
        rtb_op(b, RT_OP_ATTENTION, (const int[]){q, k, v}, 3, &o, 1, &ap, sizeof ap);
        rtb_output(b, "o", o, RT_F32);
        RtArtifact *a;
        rtb_finish(b, NULL, 0, &a, NULL, 0);
        rtb_free(b);
        const RtSection *s;
        int ns;
        rt_artifact_sections(a, &s, &ns);
        RtModel *m;
        RtLoadOptions lo = {.nthreads = nth, .cpu = test_cpu()};
        rt_model_load(&m, s, ns, &lo, NULL, 0);
        float *qd = rand_f32(12 * L * 64), *kd = rand_f32(12 * S * 64), *vd = rand_f32(12 * S * 64),
              *od = malloc((size_t)(12 * L * 64) * 4);
        RtTensor in[3] = {{RT_F32, 4, {1, 12, L, 64}, qd, (size_t)(12 * L * 64) * 4},
                          {RT_F32, 4, {1, 12, S, 64}, kd, (size_t)(12 * S * 64) * 4},
                          {RT_F32, 4, {1, 12, S, 64}, vd, (size_t)(12 * S * 64) * 4}};
        RtTensor out = {RT_F32, 4, {1, 12, L, 64}, od, (size_t)(12 * L * 64) * 4};
        double best = 1e9;
        for (int r = 0; r < 50; r++) {
            double t0 = now();
            rt_run(m, in, 3, &out, 1, 0, NULL);
            if (now() - t0 < best) best = now() - t0;
        }
        double fl = 2.0 * 2 * 12 * L * S * 64;
        printf("attention 12 heads x 64, L=%ld S=%ld causal: %.3f ms (%.1f GFLOP/s counting the full L x S)\n", (long)L,
               (long)S, best * 1e3, fl / best * 1e-9);
        rt_model_free(m);
        rt_artifact_free(a);
        free(qd), free(kd), free(vd), free(od);
    }

    for (int t = 1; t <= nth; t++) {
        double op2, op1;
        dispatch_cost(RT_MODE_BONDED, 2000, t, &op2);
        double d1 = dispatch_cost(RT_MODE_NONBONDED, 2000, t, &op1);
        printf("%d thread(s): non-bonded %.2f us per dispatch (tiny op); bonded %.2f us per op (barrier only)\n", t,
               d1 * 1e6, op2 * 1e6);
    }
    return 0;
}
