/* kernels_lut.c — the compressed linear layers, each reading its weight as
 * it is stored: the palettized one its packed indices (a 4-bit weight: a
 * quarter of fp16's bytes, and decode is bound by the bytes it reads), the
 * 8-bit quantized one its integer bytes.  Each part takes a run of output
 * features n, so a thread streams one range of weight bytes.
 * AVX-512, 4-bit: a 64-byte load holds 128 indices; lane j's dword holds
 * indices 8j..8j+7, so shifting it by 4t bits puts index 8j + t in the low
 * nibble that vpermps reads: eight shifts and eight 16-entry lookups give
 * 128 weights in an order (t, j) that x is permuted into once per call.
 * Other variants, and 8-bit indices, look up one weight at a time.
 * Compiled once per kernel variant, inside kernels_variant.c. */

enum { LUT_MB = 4, LUT_CHUNK = 128 }; /* rows of x per pass (accumulators in registers); AVX-512 chunk */

static void lut_scalar(const uint8_t *ix, const float *pal, int bits, int64_t k0, int64_t k1, const float *x,
                       int64_t ldx, int mr, float *acc) {
    for (int64_t k = k0; k < k1; k++) {
        unsigned id = bits == 8 ? ix[k] : (unsigned)(ix[k >> 1] >> ((k & 1) * 4)) & 15u;
        float w = pal[id];
        for (int m = 0; m < mr; m++) acc[m] += x[m * ldx + k] * w;
    }
}

#ifdef RT_AVX512
/* x's 128-chunks in the order the lookups produce weights: xp[c·128 + 16t + j] = x[c·128 + 8j + t]. */
static void lut4_permute_x(const float *x, float *xp, int64_t k) {
    for (int64_t c = 0; c + LUT_CHUNK <= k; c += LUT_CHUNK)
        for (int t = 0; t < 8; t++)
            for (int j = 0; j < 16; j++) xp[c + 16 * t + j] = x[c + 8 * j + t];
}

/* Bytes of indices the decode rows ask for ahead of their reads: a thread
 * reads at most what it has in flight per memory latency (~200 ns here),
 * and a row of 384 bytes (K = 768) is too short for the hardware
 * prefetcher to run ahead of on its own. */
enum { LUT_AHEAD = 4096 };

/* Decode (one row of x): rows n of 4-bit indices [n0, n1), each K long in
 * one block of columns (bk = 1), pal(n) its palette.  Two rows at a time
 * (eight independent accumulators) and no call per row: at K = 768 a row
 * is six 64-byte chunks, and the per-row call, reduction and palette load
 * took more time than its lookups. */
static void lut4_decode(const uint8_t *ix, const float *lut, int64_t rn, int64_t n0, int64_t n1, int64_t K,
                        const float *xp, const float *bias, float *y) {
    int64_t rowb = K / 2;
    for (int64_t n = n0; n < n1; n += 2) {
        bool two = n + 1 < n1;
        const uint8_t *r0 = ix + n * rowb, *r1 = two ? r0 + rowb : r0;
        __m512 l0 = _mm512_loadu_ps(lut + (n / rn) * 16), l1 = _mm512_loadu_ps(lut + ((two ? n + 1 : n) / rn) * 16);
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, u0 = s0, u1 = s0, u2 = s0, u3 = s0;
        for (int64_t k = 0; k < K; k += LUT_CHUNK) {
            _mm_prefetch((const char *)r0 + k / 2 + LUT_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)r1 + k / 2 + LUT_AHEAD, _MM_HINT_T0);
            __m512i v = _mm512_loadu_si512((const void *)(r0 + k / 2)),
                    u = _mm512_loadu_si512((const void *)(r1 + k / 2));
            const float *xk = xp + k;
#define LUT_STEP(t, sa, sb)                                                                                            \
    {                                                                                                                  \
        __m512 xv = _mm512_loadu_ps(xk + 16 * (t));                                                                    \
        sa = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4 * (t)), l0), xv, sa);                        \
        sb = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(u, 4 * (t)), l1), xv, sb);                        \
    }
            LUT_STEP(0, s0, u0)
            LUT_STEP(1, s1, u1)
            LUT_STEP(2, s2, u2)
            LUT_STEP(3, s3, u3)
            LUT_STEP(4, s0, u0)
            LUT_STEP(5, s1, u1)
            LUT_STEP(6, s2, u2)
            LUT_STEP(7, s3, u3)
#undef LUT_STEP
        }
        y[n] =
            _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))) + (bias ? bias[n] : 0.0f);
        if (two)
            y[n + 1] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(u0, u1), _mm512_add_ps(u2, u3))) +
                       (bias ? bias[n + 1] : 0.0f);
    }
}

/* Columns [k0, k1) (multiples of 128) of one row of 4-bit indices, mr rows of x. */
static void lut4_avx512(const uint8_t *ix, const float *pal, int64_t k0, int64_t k1, const float *xp, int64_t ldx,
                        int mr, float *acc) {
    __m512 lz = _mm512_loadu_ps(pal), a[LUT_MB][2];
    for (int m = 0; m < LUT_MB; m++) a[m][0] = a[m][1] = _mm512_setzero_ps();
    for (int64_t k = k0; k < k1; k += LUT_CHUNK) {
        __m512i v = _mm512_loadu_si512((const void *)(ix + k / 2));
        for (int t = 0; t < 8; t++) {
            __m512 w = _mm512_permutexvar_ps(_mm512_srli_epi32(v, (unsigned)(4 * t)), lz);
            for (int m = 0; m < mr; m++)
                a[m][t & 1] = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp + m * ldx + k + 16 * t), a[m][t & 1]);
        }
    }
    for (int m = 0; m < mr; m++) acc[m] += _mm512_reduce_add_ps(_mm512_add_ps(a[m][0], a[m][1]));
}
#endif

static void rt_k_lut_gemm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtLutParams *p = &op->p.lut;
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
    int64_t K = xb->dims[xb->rank - 1], N = yb->dims[yb->rank - 1], M = xb->numel / K;
    int64_t rn = N / p->bn, kb = K / p->bk, pal_n = INT64_C(1) << p->bits, rowb = K * p->bits / 8, n0, n1;
    const float *x = IN(0), *lut = IN(2), *bias = p->has_bias ? IN(3) : NULL, *xs = x;
    const uint8_t *ix = IN(1);
    float *y = OUT(0);
    split(N, ith, nth, &n0, &n1);
    if (n1 <= n0) return;
    bool vec = false;
#ifdef RT_AVX512
    vec = p->bits == 4 && kb % LUT_CHUNK == 0;
    if (vec) {
        float *xp = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
        for (int64_t m = 0; m < M; m++) lut4_permute_x(x + m * K, xp + m * K, K);
        xs = xp;
        if (M == 1 && p->bk == 1) {
            lut4_decode(ix, lut, rn, n0, n1, K, xp, bias, y);
            return;
        }
    }
#endif
    for (int64_t m0 = 0; m0 < M; m0 += LUT_MB) {
        int mr = M - m0 < LUT_MB ? (int)(M - m0) : LUT_MB;
        for (int64_t n = n0; n < n1; n++) {
            float acc[LUT_MB] = {0};
            for (int64_t b = 0; b < p->bk; b++) {
                const float *pal = lut + ((n / rn) * p->bk + b) * pal_n;
#ifdef RT_AVX512
                if (vec) {
                    lut4_avx512(ix + n * rowb, pal, b * kb, (b + 1) * kb, xs + m0 * K, K, mr, acc);
                    continue;
                }
#endif
                lut_scalar(ix + n * rowb, pal, p->bits, b * kb, (b + 1) * kb, xs + m0 * K, K, mr, acc);
            }
            for (int m = 0; m < mr; m++) y[(m0 + m) * N + n] = acc[m] + (bias ? bias[n] : 0.0f);
        }
    }
    (void)vec;
}

/* ---- the 8-bit quantized linear layer (RT_OP_QGEMM) ----
 * The int8/uint8 weight stays as its bytes: decode reads a quarter of fp32's
 * and half of fp16's.  Each (row, K-block) is summed as s·(Σ x·q − z·Σ x),
 * Σ x of every block of x's rows made once per call; up to QMB rows of x
 * share each widened vector of q. */
/* QMB rows of x per pass; a decode row asks for its bytes Q8_AHEAD ahead
 * (rows of K bytes run back to back: the thread's one stream, but a 768-byte
 * row is too short for the hardware prefetcher to get ahead on its own). */
enum { QMB = 4, Q8_AHEAD = 4096 };

/* dot[m] = Σ_{k in [k0, k1)} x[m·ldx + k]·q[k], m < mr.  Called with mr and
 * sgn constant (q8_dot), so the accumulators stay in registers: indexed by a
 * run-time mr, GCC kept them in memory (the decode GEMV ran at 2.9x its
 * bytes' streaming time).  One row of x (decode) gets four accumulators, as
 * a chain of dependent FMAs is slower than the bytes arrive. */
static inline __attribute__((always_inline)) void q8_dot_n(const uint8_t *q, const int sgn, const float *x, int64_t ldx,
                                                           const int mr, int64_t k0, int64_t k1, float *dot) {
    int64_t k = k0;
    for (int m = 0; m < mr; m++) dot[m] = 0.0f;
#ifdef RT_VL
    enum { NA = 4 };
    const int na = mr == 1 ? NA : 1;
    RtV a[QMB][NA];
    for (int m = 0; m < mr; m++)
        for (int t = 0; t < na; t++) a[m][t] = v_zero();
    for (; k + na * RT_VL <= k1; k += na * RT_VL) {
        if (mr == 1) __builtin_prefetch(q + k + Q8_AHEAD, 0, 3);
        for (int t = 0; t < na; t++) {
            RtV w = v_load_q8(q + k + t * RT_VL, sgn);
            for (int m = 0; m < mr; m++) a[m][t] = v_fma(w, v_load(x + m * ldx + k + t * RT_VL), a[m][t]);
        }
    }
    for (; k + RT_VL <= k1; k += RT_VL) {
        RtV w = v_load_q8(q + k, sgn);
        for (int m = 0; m < mr; m++) a[m][0] = v_fma(w, v_load(x + m * ldx + k), a[m][0]);
    }
    for (int m = 0; m < mr; m++) {
        RtV v = a[m][0];
        for (int t = 1; t < na; t++) v = v_add(v, a[m][t]);
        dot[m] = v_sum(v);
    }
#endif
    for (; k < k1; k++) {
        float w = sgn ? (float)(int8_t)q[k] : (float)q[k];
        for (int m = 0; m < mr; m++) dot[m] += x[m * ldx + k] * w;
    }
}

#define Q8_DOT_CASES(SGN)                                                                                              \
    switch (mr) {                                                                                                      \
    case 1: q8_dot_n(q, SGN, x, ldx, 1, k0, k1, dot); break;                                                           \
    case 2: q8_dot_n(q, SGN, x, ldx, 2, k0, k1, dot); break;                                                           \
    case 3: q8_dot_n(q, SGN, x, ldx, 3, k0, k1, dot); break;                                                           \
    default: q8_dot_n(q, SGN, x, ldx, 4, k0, k1, dot); break;                                                          \
    }

static void q8_dot(const uint8_t *q, int sgn, const float *x, int64_t ldx, int mr, int64_t k0, int64_t k1, float *dot) {
    if (sgn)
        Q8_DOT_CASES(1)
    else
        Q8_DOT_CASES(0)
}

static void qgemm_rows(const RtQGemmParams *p, int sgn, const float *x, const uint8_t *q, const float *sc,
                       const float *of, const float *bias, const float *xsum, int64_t M, int64_t K, int64_t N,
                       int64_t n0, int64_t n1, float *y) {
    int64_t rn = N / p->bn, kb = K / p->bk;
    for (int64_t m0 = 0; m0 < M; m0 += QMB) {
        int mr = M - m0 < QMB ? (int)(M - m0) : QMB;
        for (int64_t n = n0; n < n1; n++) {
            float acc[QMB] = {0}, dot[QMB];
            for (int64_t b = 0; b < p->bk; b++) {
                int64_t blk = (n / rn) * p->bk + b;
                q8_dot(q + n * K, sgn, x + m0 * K, K, mr, b * kb, (b + 1) * kb, dot);
                for (int m = 0; m < mr; m++) acc[m] += sc[blk] * (dot[m] - of[blk] * xsum[(m0 + m) * p->bk + b]);
            }
            for (int m = 0; m < mr; m++) y[(m0 + m) * N + n] = acc[m] + (bias ? bias[n] : 0.0f);
        }
    }
}

static void rt_k_qgemm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtQGemmParams *p = &op->p.qg;
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
    int64_t K = xb->dims[xb->rank - 1], N = yb->dims[yb->rank - 1], M = xb->numel / K, kb = K / p->bk, n0, n1;
    const float *x = IN(0), *sc = IN(2), *of = IN(3), *bias = p->has_bias ? IN(4) : NULL;
    split(N, ith, nth, &n0, &n1);
    if (n1 <= n0) return;
    float *xsum = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
    for (int64_t m = 0; m < M; m++)
        for (int64_t b = 0; b < p->bk; b++) {
            float s = 0.0f;
            for (int64_t k = b * kb; k < (b + 1) * kb; k++) s += x[m * K + k];
            xsum[m * p->bk + b] = s;
        }
    qgemm_rows(p, p->is_signed, x, IN(1), sc, of, bias, xsum, M, K, N, n0, n1, OUT(0)); /* q8_dot instantiates sgn */
}
