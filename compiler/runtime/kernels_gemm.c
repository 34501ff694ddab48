/* kernels_gemm.c — GEMM with a weight operand, batched matmul and fused
 * attention, all on one register-blocked kernel: a 6×64 tile of C (AVX-512:
 * 24 accumulators; AVX2 and NEON: four 6×16 groups of 12 or 24, and one
 * 1×64 row for a GEMV) fed by broadcasts of A and vector loads of B, with B
 * either build-time packed 64-column panels (fp32, or fp16 converted on the
 * fly: half the bytes for bandwidth-bound decode) or a row-major runtime
 * tensor.  The epilogue (scale, bias, activation, residual) runs on the
 * tile.  No allocation: repacking of runtime operands uses the per-thread
 * scratch sized at load.  README.md has the measurements against BLAS
 * libraries that made us write it.  Compiled once per kernel variant, inside
 * kernels_variant.c: every function here is static. */
#include <float.h>
#include <string.h>

#include "milc/half.h"
#include "rt_internal.h"
#include "rt_math.h"

enum { MR = RT_TILE_M, NR = RT_PANEL }; /* tile: rows of A × columns of B */
/* K-blocking for many rows: a KC×64 fp32 sub-panel of B stays in L1 while
 * every tile of up to MB rows runs over it.  Without it each 6-row tile
 * streamed the whole K×64 panel (786 KB at K = 3072) from L2: that GEMM ran
 * at 0.45 of 1-thread peak, 0.63 with it.  KC and MB come from this CPU's
 * cache sizes (rt_blocking: half of L1 for the sub-panel; with a 32 KB L1
 * the 32 KB sub-panel of KC = 128 thrashed it, 0.50 of peak against 0.63 at
 * KC = 64).  Partial sums live in a stack block of up to MB_MAX×64 floats, so
 * rt_run still allocates nothing (gemm declares no per-thread scratch). */
enum { KC_MAX = RT_KC_MAX, MB_MAX = RT_MB_MAX };

/* Where a tile's results go: y(m, n) = act(alpha·acc + bias[n]) + res(m, n). */
typedef struct {
    float alpha;
    const float *bias; /* per column, indexed by absolute n; or NULL */
    int act;
    const float *res; /* res[m·rm + n·rn] or NULL */
    int64_t rm, rn;
    float *y; /* y[m·ym + n·yn] */
    int64_t ym, yn;
    /* Two shapes only: rows (yn = rn = 1) and the channels layout (ym =
     * rm = 1, yn = rn = positions), which tile_store tells apart by yn. */
} Epi;

/* A(m, k) = a[m·am + k·ak], and within a tile from m0: A(m0 + r, k) =
 * a[m0·am + r·ar + k·ak] (ar 0: am; a packed x, RT_GEMM_PACKED, has am = K,
 * ar = 1, ak = MR).  B(k, n0 + j) for j < 64: columns 0..31 at b0[k·ldb +
 * j], 32..63 at b1[k·ldb + j - 32] (two panels, or one row-major matrix with
 * b1 = b0 + 32).  nc ≤ 64 valid columns. */
typedef struct {
    const float *a;
    int64_t am, ak, k, ar;
    const void *b0, *b1;
    int64_t ldb;
    int f16;
} Opnd;

/* Rows of B a tile of 1-2 rows asks for ahead of its reads: 6 KB of fp16
 * panel.  A thread reads at most the bytes it has in flight per memory
 * latency (~200 ns on this VM): 4 KB ahead holds a thread near 20 GB/s.
 * This VM's 2-thread read probe swings between ~40 and 60-78 GB/s.  In
 * paired decode tokens, 48 rows beat 32 by 0.7-1.3% in the ~40 GB/s
 * minutes and by 0.6-6% in the fast ones; 64 rows gained up to 12% in fast
 * minutes but lost 0.6-1.5% in slow ones. */
enum { B_AHEAD = 48 };

/* Those rows, and the KV cache's bytes ahead of the attention loops, are
 * asked for into L2 (RT_PF_L2).  GPT-2 decode, 2 threads, paired tokens on
 * the Xeon: AVX2 1.57-1.71 -> 1.39-1.45 of its byte bound, AVX-512
 * 1.40-1.45 -> 1.05-1.34, against the same rows into L1; 32, 48 or 64 rows
 * ahead alike into L2; non-temporal 2.7-2.8. */

/* The lines of B's next K-block a tile asks for into L2 (kblock:
 * rt_ahead_slice), one every AHEAD_EVERY k-steps of its K loop rather than
 * all before it: a burst of 12-23 prefetches missing to memory at each
 * tile's start held up the tile's own loads on the Sapphire-Rapids-class
 * Xeon (an Intel core tracks a software prefetch in an L1 fill buffer until
 * its line arrives).  The best panel of a whole GPT-2 prefill went from
 * 0.65-0.66 to 0.71-0.73 of the AVX-512 peak at K = 3072 and 0.67-0.70 to
 * 0.70-0.76 at K = 768 (3 alternated pairs); AVX2 the same within noise.
 * Lines past the loop's slots are asked for after it (ahead_rest). */
typedef struct {
    const char *p;
    int lines;
} Ahead;
enum { AHEAD_EVERY = 4 };
static inline void ahead_rest(Ahead ah) {
    for (; ah.lines > 0; ah.lines--, ah.p += 64) RT_PF_L2(ah.p);
}

#ifdef RT_AVX512
/* full: all 64 columns valid, so plain loads.  A zero-masked 512-bit load
 * costs this Xeon an extra uop on the FMA ports: with the four masked B loads
 * of every k-step, a tile of 24 FMAs ran at 0.89 of the unmasked speed. */
static inline __attribute__((always_inline)) __m512 load_b(const void *base, int64_t off, __mmask16 k, int f16,
                                                           int full) {
    if (f16)
        return _mm512_cvtph_ps(full ? _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + off))
                                    : _mm256_maskz_loadu_epi16(k, (const uint16_t *)base + off));
    return full ? _mm512_loadu_ps((const float *)base + off) : _mm512_maskz_loadu_ps(k, (const float *)base + off);
}

/* The epilogue of a tile, out of line: it runs once per K-long loop, and
 * inlining it (with every activation) into each tile variant only bloats
 * the code.  t holds the mr×64 accumulators. */
static __attribute__((noinline)) void tile_store(const Epi *e, int64_t m0, int mr, int64_t n0, const __mmask16 *msk,
                                                 const float (*t)[NR]) {
    __m512 alpha = _mm512_set1_ps(e->alpha);
    if (e->yn != 1) {
        /* The channels layout, y[n·yn + m]: a column's mr rows lie side by
         * side in y (and in res).  The rows are transposed in registers, 16
         * columns at a time, and each column stored as rows 0-3 and 4-5:
         * one gather per column (7% of a GPT-2 prefill in perf) made prefill
         * 2.2-3.2% slower (paired runs), mr scalar stores more. */
        const __mmask8 klo = (__mmask8)((1u << (mr < 4 ? mr : 4)) - 1),
                       khi = (__mmask8)((1u << (mr > 4 ? mr - 4 : 0)) - 1);
        for (int j = 0; j < 4; j++) {
            if (!msk[j]) continue;
            int64_t n = n0 + 16 * j;
            __m512 bias = e->bias ? _mm512_maskz_loadu_ps(msk[j], e->bias + n) : _mm512_setzero_ps();
            __m512 a[8];
            for (int r = 0; r < 8; r++)
                a[r] = r < mr ? rt_actv(_mm512_fmadd_ps(_mm512_loadu_ps(t[r] + 16 * j), alpha, bias), e->act)
                              : _mm512_setzero_ps();
            /* in each 128-bit lane L: q[i] = rows 0-3 and p[i] = rows 4-7 of column 4L + i */
            __m512 q[4], p[4];
            for (int h = 0; h < 2; h++) {
                __m512 t0 = _mm512_unpacklo_ps(a[4 * h], a[4 * h + 1]), t1 = _mm512_unpackhi_ps(a[4 * h], a[4 * h + 1]);
                __m512 t2 = _mm512_unpacklo_ps(a[4 * h + 2], a[4 * h + 3]),
                       t3 = _mm512_unpackhi_ps(a[4 * h + 2], a[4 * h + 3]);
                __m512 *d = h ? p : q;
                d[0] = _mm512_shuffle_ps(t0, t2, 0x44), d[1] = _mm512_shuffle_ps(t0, t2, 0xEE);
                d[2] = _mm512_shuffle_ps(t1, t3, 0x44), d[3] = _mm512_shuffle_ps(t1, t3, 0xEE);
            }
            int cnt = __builtin_popcount(msk[j]);
#define STORE_LANE(L)                                                                                                  \
    for (int i = 0; i < 4 && 4 * (L) + i < cnt; i++) {                                                                 \
        int64_t c = n + 4 * (L) + i;                                                                                   \
        __m128 lo = _mm512_extractf32x4_ps(q[i], L), hi = _mm512_extractf32x4_ps(p[i], L);                             \
        if (e->res) {                                                                                                  \
            lo = _mm_add_ps(lo, _mm_maskz_loadu_ps(klo, e->res + m0 + c * e->rn));                                     \
            hi = _mm_add_ps(hi, _mm_maskz_loadu_ps(khi, e->res + m0 + 4 + c * e->rn));                                 \
        }                                                                                                              \
        _mm_mask_storeu_ps(e->y + m0 + c * e->yn, klo, lo);                                                            \
        _mm_mask_storeu_ps(e->y + m0 + 4 + c * e->yn, khi, hi);                                                        \
    }
            STORE_LANE(0)
            STORE_LANE(1)
            STORE_LANE(2)
            STORE_LANE(3)
#undef STORE_LANE
        }
        return;
    }
    for (int j = 0; j < 4; j++) {
        if (!msk[j]) continue;
        int64_t n = n0 + 16 * j;
        __m512 bias = e->bias ? _mm512_maskz_loadu_ps(msk[j], e->bias + n) : _mm512_setzero_ps();
        for (int r = 0; r < mr; r++) {
            int64_t m = m0 + r;
            __m512 v = rt_actv(_mm512_fmadd_ps(_mm512_loadu_ps(t[r] + 16 * j), alpha, bias), e->act);
            if (e->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(msk[j], e->res + m * e->rm + n));
            _mm512_mask_storeu_ps(e->y + m * e->ym + n, msk[j], v);
        }
    }
}

/* One mr×64 tile.  The accumulators are named variables, not an array: GCC
 * keeps an array of them in memory and stores it every iteration. */
#define ACC_DECL(r) __m512 c##r##0 = z, c##r##1 = z, c##r##2 = z, c##r##3 = z
#define ACC_LOAD(r)                                                                                                    \
    if (mr > r) {                                                                                                      \
        c##r##0 = _mm512_loadu_ps(pin[r]);                                                                             \
        c##r##1 = _mm512_loadu_ps(pin[r] + 16);                                                                        \
        c##r##2 = _mm512_loadu_ps(pin[r] + 32);                                                                        \
        c##r##3 = _mm512_loadu_ps(pin[r] + 48);                                                                        \
    }
#define ACC_FMA(r)                                                                                                     \
    if (mr > r) {                                                                                                      \
        __m512 av = _mm512_set1_ps(ap[r * ar]);                                                                        \
        c##r##0 = _mm512_fmadd_ps(av, b0, c##r##0);                                                                    \
        c##r##1 = _mm512_fmadd_ps(av, b1, c##r##1);                                                                    \
        c##r##2 = _mm512_fmadd_ps(av, b2, c##r##2);                                                                    \
        c##r##3 = _mm512_fmadd_ps(av, b3, c##r##3);                                                                    \
    }
#define ACC_STORE(r)                                                                                                   \
    if (mr > r) {                                                                                                      \
        _mm512_storeu_ps(t[r], c##r##0);                                                                               \
        _mm512_storeu_ps(t[r] + 16, c##r##1);                                                                          \
        _mm512_storeu_ps(t[r] + 32, c##r##2);                                                                          \
        _mm512_storeu_ps(t[r] + 48, c##r##3);                                                                          \
    }

/* pin: partial sums to start from (NULL: zero); pout: where to leave the
 * sums for the next k-block (NULL: this is the last, run the epilogue). */
static inline __attribute__((always_inline)) void tile(const Opnd *o, int64_t m0, int mr, int64_t n0, int nc,
                                                       const Epi *e, int f16, int full, const float (*pin)[NR],
                                                       float (*pout)[NR], Ahead ah) {
    __mmask16 msk[4];
    for (int j = 0; j < 4; j++) {
        int c = nc - 16 * j;
        msk[j] = c >= 16 ? (__mmask16)0xFFFF : c <= 0 ? 0 : (__mmask16)((1u << c) - 1);
    }
    const __mmask16 k0 = msk[0], k1 = msk[1], k2 = msk[2], k3 = msk[3];
    const __m512 z = _mm512_setzero_ps();
    ACC_DECL(0);
    ACC_DECL(1);
    ACC_DECL(2);
    ACC_DECL(3);
    ACC_DECL(4);
    ACC_DECL(5);
    if (pin) {
        ACC_LOAD(0)
        ACC_LOAD(1)
        ACC_LOAD(2)
        ACC_LOAD(3)
        ACC_LOAD(4)
        ACC_LOAD(5)
    }
    const int64_t am = o->am, ar = o->ar ? o->ar : am, ak = o->ak, ldb = o->ldb, kn = o->k;
    const void *pb0 = o->b0, *pb1 = o->b1;
    /* The bias is cold by the epilogue (decode streams ~200 MB between two
     * reads of it): loaded there, its miss stalled every tile (perf: 3.5% of
     * a decode token); asked for now, it arrives during the K loop (decode
     * 1.4-2.3% faster, paired runs). */
    if (!pout && e->bias)
        for (int j = 0; j < 4; j++) _mm_prefetch((const char *)(e->bias + n0 + 16 * j), _MM_HINT_T0);
    const float *a = o->a + m0 * am;
    for (int64_t kk = 0; kk < kn; kk++) {
        int64_t bo = kk * ldb;
        if (mr <= 2) { /* bandwidth-bound: ask for B well ahead of use */
            RT_PF_L2((const char *)pb0 + (bo + B_AHEAD * ldb) * (f16 ? 2 : 4));
            RT_PF_L2((const char *)pb1 + (bo + B_AHEAD * ldb) * (f16 ? 2 : 4));
        }
        __m512 b0 = load_b(pb0, bo, k0, f16, full), b1 = load_b(pb0, bo + 16, k1, f16, full);
        __m512 b2 = load_b(pb1, bo, k2, f16, full), b3 = load_b(pb1, bo + 16, k3, f16, full);
        if (ah.lines && !(kk & (AHEAD_EVERY - 1))) {
            RT_PF_L2(ah.p);
            ah.p += 64, ah.lines--;
        }
        const float *ap = a + kk * ak;
        ACC_FMA(0)
        ACC_FMA(1)
        ACC_FMA(2)
        ACC_FMA(3)
        ACC_FMA(4)
        ACC_FMA(5)
    }
    ahead_rest(ah);
    float tl[MR][NR] __attribute__((aligned(64))), (*t)[NR] = pout ? pout : tl;
    ACC_STORE(0)
    ACC_STORE(1)
    ACC_STORE(2)
    ACC_STORE(3)
    ACC_STORE(4)
    ACC_STORE(5)
    if (!pout) tile_store(e, m0, mr, n0, msk, (const float(*)[NR])t);
}

#define TILE_CASES(F16, FULL)                                                                                          \
    switch (mr) {                                                                                                      \
    case 6: tile(o, m0, 6, n0, nc, e, F16, FULL, pin, pout, ah); break;                                                \
    case 5: tile(o, m0, 5, n0, nc, e, F16, FULL, pin, pout, ah); break;                                                \
    case 4: tile(o, m0, 4, n0, nc, e, F16, FULL, pin, pout, ah); break;                                                \
    case 3: tile(o, m0, 3, n0, nc, e, F16, FULL, pin, pout, ah); break;                                                \
    case 2: tile(o, m0, 2, n0, nc, e, F16, FULL, pin, pout, ah); break;                                                \
    default: tile(o, m0, 1, n0, nc, e, F16, FULL, pin, pout, ah); break;                                               \
    }

static void tile_any(const Opnd *o, int64_t m0, int mr, int64_t n0, int nc, const Epi *e, const float (*pin)[NR],
                     float (*pout)[NR], Ahead ah) {
    if (nc == NR) {
        if (o->f16)
            TILE_CASES(1, 1)
        else
            TILE_CASES(0, 1)
    } else if (o->f16)
        TILE_CASES(1, 0)
    else
        TILE_CASES(0, 0)
}
#else
/* ---- AVX2, NEON and scalar: the tile's sums land in t[mr][64], then one
 * epilogue in C (its activation through rt_act_row, vectorised per variant) ---- */

/* t[r][c] for columns [c0, c1) by plain loops: the scalar variant's whole
 * tile, and a vector variant's columns past the last full group (a B that
 * is not a padded panel must not be read past its nc columns). */
static void sums_scalar(const Opnd *o, int64_t m0, int mr, int c0, int c1, const float (*pin)[NR], float (*t)[NR]) {
    for (int r = 0; r < mr; r++)
        for (int c = c0; c < c1; c++) {
            const void *base = c < 32 ? o->b0 : o->b1;
            int64_t j = c < 32 ? c : c - 32;
            float s = pin ? pin[r][c] : 0.0f;
            for (int64_t kk = 0; kk < o->k; kk++) {
                int64_t off = kk * o->ldb + j;
                float bv = o->f16 ? half_to_float(((const uint16_t *)base)[off]) : ((const float *)base)[off];
                s += o->a[m0 * o->am + r * (o->ar ? o->ar : o->am) + kk * o->ak] * bv;
            }
            t[r][c] = s;
        }
}

/* y = act(alpha·t + bias) + res over the tile's mr × nc sums. */
static __attribute__((noinline)) void tile_store(const Epi *e, int64_t m0, int mr, int64_t n0, int nc, float (*t)[NR]) {
    for (int r = 0; r < mr; r++) {
        float *row = t[r];
        for (int c = 0; c < nc; c++) row[c] = row[c] * e->alpha + (e->bias ? e->bias[n0 + c] : 0.0f);
        rt_act_row(row, nc, e->act);
    }
    if (e->yn == 1) {
        for (int r = 0; r < mr; r++) {
            float *y = e->y + (m0 + r) * e->ym + n0;
            const float *res = e->res ? e->res + (m0 + r) * e->rm + n0 : NULL;
            for (int c = 0; c < nc; c++) y[c] = res ? t[r][c] + res[c] : t[r][c];
        }
        return;
    }
    /* the channels layout: a column's mr rows lie side by side in y */
    for (int c = 0; c < nc; c++) {
        float *y = e->y + m0 + (n0 + c) * e->yn;
        const float *res = e->res ? e->res + m0 + (n0 + c) * e->rn : NULL;
        for (int r = 0; r < mr; r++) y[r] = res ? t[r][c] + res[r] : t[r][c];
    }
}

#ifdef RT_VL
/* A group: 16 columns of the tile, GV vectors per row.  6×16 is 12 AVX2 or
 * 24 NEON accumulators with the B vectors beside them in the register file
 * (16 ymm, 32 q registers); a 64-column panel is four groups, each reading
 * its K-block's sub-panel from L1. */
enum { GW = 16, GV = GW / RT_VL, RV = NR / RT_VL };

static inline __attribute__((always_inline)) RtV load_bv(const void *base, int64_t off, int f16) {
    return f16 ? v_load_h((const uint16_t *)base + off) : v_load((const float *)base + off);
}

#define GACC_DECL(r) RtV c##r##0 = z, c##r##1 = z, c##r##2 = z, c##r##3 = z
#define GACC_IO(r, OP)                                                                                                 \
    if (mr > r) {                                                                                                      \
        OP(c##r##0, 0, r);                                                                                             \
        if (GV > 1) OP(c##r##1, 1, r);                                                                                 \
        if (GV > 2) OP(c##r##2, 2, r), OP(c##r##3, 3, r);                                                              \
    }
#define GLOAD(acc, j, r)  (acc = v_load(pin[r] + c0 + (j)*RT_VL))
#define GSTORE(acc, j, r) v_store(t[r] + c0 + (j)*RT_VL, acc)
#define GACC_FMA(r)                                                                                                    \
    if (mr > r) {                                                                                                      \
        RtV av = v_set1(ap[r * ar]);                                                                                   \
        c##r##0 = v_fma(av, b0, c##r##0);                                                                              \
        if (GV > 1) c##r##1 = v_fma(av, b1, c##r##1);                                                                  \
        if (GV > 2) c##r##2 = v_fma(av, b2, c##r##2), c##r##3 = v_fma(av, b3, c##r##3);                                \
    }

static inline __attribute__((always_inline)) void group(const Opnd *o, int64_t m0, int mr, int c0, int f16,
                                                        const float (*pin)[NR], float (*t)[NR], Ahead ah) {
    const RtV z = v_zero();
    GACC_DECL(0);
    GACC_DECL(1);
    GACC_DECL(2);
    GACC_DECL(3);
    GACC_DECL(4);
    GACC_DECL(5);
    if (pin) {
        GACC_IO(0, GLOAD)
        GACC_IO(1, GLOAD)
        GACC_IO(2, GLOAD)
        GACC_IO(3, GLOAD)
        GACC_IO(4, GLOAD)
        GACC_IO(5, GLOAD)
    }
    const void *pb = c0 < 32 ? o->b0 : o->b1;
    const int64_t am = o->am, ar = o->ar ? o->ar : am, ak = o->ak, ldb = o->ldb, kn = o->k, j0 = c0 & 31;
    const float *a = o->a + m0 * am;
    size_t es = f16 ? 2 : 4;
    for (int64_t kk = 0; kk < kn; kk++) {
        int64_t bo = kk * ldb + j0;
        if (mr <= 2 && c0 == 0) { /* bandwidth-bound: the first group asks for whole rows ahead */
            RT_PF_L2((const char *)o->b0 + (size_t)(kk * ldb + B_AHEAD * ldb) * es);
            RT_PF_L2((const char *)o->b1 + (size_t)(kk * ldb + B_AHEAD * ldb) * es);
        }
        if (ah.lines && !(kk & (AHEAD_EVERY - 1))) {
            RT_PF_L2(ah.p);
            ah.p += 64, ah.lines--;
        }
        RtV b0 = load_bv(pb, bo, f16), b1 = z, b2 = z, b3 = z;
        if (GV > 1) b1 = load_bv(pb, bo + RT_VL, f16);
        if (GV > 2) b2 = load_bv(pb, bo + 2 * RT_VL, f16), b3 = load_bv(pb, bo + 3 * RT_VL, f16);
        const float *ap = a + kk * ak;
        GACC_FMA(0)
        GACC_FMA(1)
        GACC_FMA(2)
        GACC_FMA(3)
        GACC_FMA(4)
        GACC_FMA(5)
    }
    ahead_rest(ah);
    GACC_IO(0, GSTORE)
    GACC_IO(1, GSTORE)
    GACC_IO(2, GSTORE)
    GACC_IO(3, GSTORE)
    GACC_IO(4, GSTORE)
    GACC_IO(5, GSTORE)
}

/* One row across the whole 64-column panel (a GEMV, decode's case): one
 * pass over each K row's bytes, RV accumulators. */
#define R_DECL(j) RtV s##j = pin ? v_load(pin[0] + (j)*RT_VL) : z
#define R_FMA(j)                                                                                                       \
    if (RV > j) s##j = v_fma(av, load_bv((j)*RT_VL < 32 ? o->b0 : o->b1, bo + ((j)*RT_VL & 31), f16), s##j)
#define R_STORE(j)                                                                                                     \
    if (RV > j) v_store(t[0] + (j)*RT_VL, s##j)
static inline __attribute__((always_inline)) void row64(const Opnd *o, int64_t m0, int f16, const float (*pin)[NR],
                                                        float (*t)[NR]) {
    const RtV z = v_zero();
    R_DECL(0);
    R_DECL(1);
    R_DECL(2);
    R_DECL(3);
    R_DECL(4);
    R_DECL(5);
    R_DECL(6);
    R_DECL(7);
    RtV s8 = z, s9 = z, s10 = z, s11 = z, s12 = z, s13 = z, s14 = z, s15 = z;
    if (RV > 8 && pin) {
        s8 = v_load(pin[0] + 8 * RT_VL), s9 = v_load(pin[0] + 9 * RT_VL), s10 = v_load(pin[0] + 10 * RT_VL);
        s11 = v_load(pin[0] + 11 * RT_VL), s12 = v_load(pin[0] + 12 * RT_VL), s13 = v_load(pin[0] + 13 * RT_VL);
        s14 = v_load(pin[0] + 14 * RT_VL), s15 = v_load(pin[0] + 15 * RT_VL);
    }
    const int64_t ak = o->ak, ldb = o->ldb, kn = o->k;
    const float *a = o->a + m0 * o->am;
    size_t es = f16 ? 2 : 4;
    for (int64_t kk = 0; kk < kn; kk++) {
        int64_t bo = kk * ldb;
        RT_PF_L2((const char *)o->b0 + (size_t)(bo + B_AHEAD * ldb) * es);
        RT_PF_L2((const char *)o->b1 + (size_t)(bo + B_AHEAD * ldb) * es);
        RtV av = v_set1(a[kk * ak]);
        R_FMA(0);
        R_FMA(1);
        R_FMA(2);
        R_FMA(3);
        R_FMA(4);
        R_FMA(5);
        R_FMA(6);
        R_FMA(7);
        R_FMA(8);
        R_FMA(9);
        R_FMA(10);
        R_FMA(11);
        R_FMA(12);
        R_FMA(13);
        R_FMA(14);
        R_FMA(15);
    }
    R_STORE(0);
    R_STORE(1);
    R_STORE(2);
    R_STORE(3);
    R_STORE(4);
    R_STORE(5);
    R_STORE(6);
    R_STORE(7);
    R_STORE(8);
    R_STORE(9);
    R_STORE(10);
    R_STORE(11);
    R_STORE(12);
    R_STORE(13);
    R_STORE(14);
    R_STORE(15);
}

#define GROUP_CASES(F16)                                                                                               \
    switch (mr) {                                                                                                      \
    case 6: group(o, m0, 6, c0, F16, pin, t, c0 ? (Ahead){0} : ah); break;                                             \
    case 5: group(o, m0, 5, c0, F16, pin, t, c0 ? (Ahead){0} : ah); break;                                             \
    case 4: group(o, m0, 4, c0, F16, pin, t, c0 ? (Ahead){0} : ah); break;                                             \
    case 3: group(o, m0, 3, c0, F16, pin, t, c0 ? (Ahead){0} : ah); break;                                             \
    case 2: group(o, m0, 2, c0, F16, pin, t, c0 ? (Ahead){0} : ah); break;                                             \
    default: group(o, m0, 1, c0, F16, pin, t, c0 ? (Ahead){0} : ah); break;                                            \
    }

/* The tile's sums in vector groups; columns past the last full group, plain. */
static void sums(const Opnd *o, int64_t m0, int mr, int nc, const float (*pin)[NR], float (*t)[NR], Ahead ah) {
    if (mr == 1 && nc == NR) {
        ahead_rest(ah);
        if (o->f16)
            row64(o, m0, 1, pin, t);
        else
            row64(o, m0, 0, pin, t);
        return;
    }
    int c0 = 0;
    for (; c0 + GW <= nc; c0 += GW)
        if (o->f16)
            GROUP_CASES(1)
        else
            GROUP_CASES(0)
    if (c0 < nc) sums_scalar(o, m0, mr, c0, nc, pin, t);
    if (!c0) ahead_rest(ah);
}
#else
static void sums(const Opnd *o, int64_t m0, int mr, int nc, const float (*pin)[NR], float (*t)[NR], Ahead ah) {
    ahead_rest(ah);
    sums_scalar(o, m0, mr, 0, nc, pin, t);
}
#endif

static void tile_any(const Opnd *o, int64_t m0, int mr, int64_t n0, int nc, const Epi *e, const float (*pin)[NR],
                     float (*pout)[NR], Ahead ah) {
    /* the bias is cold by the epilogue: asked for now (see the AVX-512 tile) */
    if (!pout && e->bias)
        for (int j = 0; j < nc; j += 16) __builtin_prefetch(e->bias + n0 + j);
    float tl[MR][NR] __attribute__((aligned(64))), (*t)[NR] = pout ? pout : tl;
    sums(o, m0, mr, nc, pin, t, ah);
    if (!pout) tile_store(e, m0, mr, n0, nc, t);
}
#endif

/* dst[k][0..64) = B(k, n0 + j) of o's fp16 operand, as fp32 (columns past
 * nc are zero: their masks never read them, but the tile loads whole rows). */
static void widen_block(const Opnd *o, int nc, float *dst) {
    for (int64_t kk = 0; kk < o->k; kk++)
        for (int h = 0; h < 2; h++) {
            const uint16_t *src = (const uint16_t *)(h ? o->b1 : o->b0) + kk * o->ldb;
            float *d = dst + kk * NR + 32 * h;
            int valid = nc - 32 * h < 0 ? 0 : nc - 32 * h > 32 ? 32 : nc - 32 * h;
#ifdef RT_AVX512
            __mmask32 m = valid >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << valid) - 1);
            __m512i v = _mm512_maskz_loadu_epi16(m, src);
            _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm512_castsi512_si256(v)));
            _mm512_storeu_ps(d + 16, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1)));
#elif defined(RT_VL)
            if (valid == 32)
                for (int j = 0; j < 32; j += RT_VL) v_store(d + j, v_load_h(src + j));
            else
                for (int j = 0; j < 32; j++) d[j] = j < valid ? half_to_float(src[j]) : 0.0f;
#else
            for (int j = 0; j < 32; j++) d[j] = j < valid ? half_to_float(src[j]) : 0.0f;
#endif
        }
}

/* Operand o for the 64 columns of B from n: panels (b = panel 0, panel
 * stride k·64, ldb 64) or row-major (panel_stride 0: columns at b + n). */
static Opnd panel_opnd(const Opnd *base, const void *b, int64_t panel_stride, int64_t n_total, int64_t n) {
    size_t es = base->f16 ? 2 : 4;
    Opnd o = *base;
    if (panel_stride) { /* n is a multiple of NR = RT_PANEL: one panel per tile */
        o.b0 = (const char *)b + (size_t)(n / RT_PANEL * panel_stride) * es;
        o.b1 = (const char *)o.b0 + 32 * es;
    } else {
        o.b0 = (const char *)b + (size_t)n * es;
        o.b1 = (const char *)b + (size_t)(n + 32 < n_total ? n + 32 : n) * es;
    }
    return o;
}

/* The length of the K-block at k0: a short tail joins the last block rather
 * than run alone. */
static int64_t kblock_len(int64_t k, int64_t k0, int64_t kc) { return k - k0 < kc + kc / 2 ? k - k0 : kc; }

/* The tiles of rows [mb, mbe) of panel o (columns from n, nc of them) over
 * its K-block [k0, k0 + kl): partial sums in part (row mb at part[0]) from
 * one block to the next, the epilogue after the last.  Meanwhile the nlen
 * bytes at nx, the K-block that comes next, are asked for into L2 a slice
 * per tile: fetched on demand by the next widen_block, its first touch
 * stalled (GPT-2 prefill 8-10% faster, 4 x 30 paired prefills; into L1
 * 5.7%). */
static void kblock(const Opnd *o, int64_t k0, int64_t kl, int64_t mb, int64_t mbe, int64_t n, int nc, const Epi *e,
                   float (*part)[NR], float *wide, const char *nx, size_t nlen) {
    size_t es = o->f16 ? 2 : 4;
    Opnd ok = *o;
    ok.k = kl;
    ok.a = o->a + k0 * o->ak;
    ok.b0 = (const char *)o->b0 + (size_t)(k0 * o->ldb) * es;
    ok.b1 = (const char *)o->b1 + (size_t)(k0 * o->ldb) * es;
    if (o->f16 && mbe - mb > 2 * MR) { /* an fp16 K-block widened: once per row block, not per tile */
        widen_block(&ok, nc, wide);
        ok.b0 = wide, ok.b1 = wide + 32, ok.ldb = NR, ok.f16 = 0;
    }
    bool last = k0 + kl >= o->k;
    size_t ntile = (size_t)((mbe - mb + MR - 1) / MR);
    for (int64_t m = mb; m < mbe; m += MR) {
        float(*pt)[NR] = part + (m - mb);
        size_t off;
        int lines = rt_ahead_slice(nlen, (size_t)((m - mb) / MR), ntile, &off);
        Ahead ah = {nx ? nx + off : NULL, nx ? lines : 0};
        tile_any(&ok, m, mbe - m < MR ? (int)(mbe - m) : MR, n, nc, e, k0 ? (const float(*)[NR])pt : NULL,
                 last ? NULL : pt, ah);
    }
}

/* Is a row block of A (rows × k floats) larger than L2?  Then the panels of
 * a group take turns inside each K-block (gemm_range).  Where A fits (K =
 * 3072, T = 128: 1.5 MB in a 2 MB L2) the panel-by-panel order keeps it
 * there: whole GPT-2 prefills by CPU time on AVX2 were 3-8% slower with the
 * group order from half of L2 up (4 of 4 alternated runs, load 8-22 on 2
 * cores).  Unknown L2: 1 MB. */
static bool a_crowds_l2(int64_t rows, int64_t k) {
    size_t l2 = rt_block.l2 ? rt_block.l2 : (size_t)1 << 20;
    return (size_t)(rows * k) * sizeof(float) > l2;
}

/* C[m0..m1) × [n0..n1) for B given as 64-column panels (b = panel 0, panel
 * stride k·64, ldb 64) or row-major (panel_stride 0: columns at b + n, ldb =
 * row).  acc: RT_MB_MAX × RT_GEMM_GROUP × 64 floats of partial sums (rt_s_gemm)
 * for the panel-group order, or NULL. */
static void gemm_range(const Opnd *base, const void *b, int64_t panel_stride, int64_t n_total, int64_t m0, int64_t m1,
                       int64_t n0, int64_t n1, const Epi *e, float *acc) {
    size_t es = base->f16 ? 2 : 4;
    const int64_t KC = rt_block.kc, MB = rt_block.mb;
    if (m1 - m0 <= MR || base->k <= KC + KC / 2) {
        for (int64_t n = n0; n < n1; n += NR) {
            Opnd o = panel_opnd(base, b, panel_stride, n_total, n);
            int nc = n1 - n < NR ? (int)(n1 - n) : NR;
            for (int64_t m = m0; m < m1; m += MR)
                tile_any(&o, m, m1 - m < MR ? (int)(m1 - m) : MR, n, nc, e, NULL, NULL, (Ahead){0});
        }
        return;
    }
    /* On a cache line: a stack array is only 16-byte aligned, and then every
     * 64-byte load of a row of the widened K-block spans two lines (GPT-2
     * prefill on the AVX-512 Xeon 0.48-0.49 -> 0.52-0.53 of the FMA peak,
     * 3 alternated pairs; single fp16 GEMMs 0.57-0.68 -> 0.62-0.73). */
    float wide[(KC_MAX + KC_MAX / 2) * NR] __attribute__((aligned(64)));
    /* Row blocks of equal size: 128 rows as 120 + 8 streamed the panel
     * a second time for 8 rows. */
    int64_t nmb = (m1 - m0 + MB - 1) / MB, mbs = ((m1 - m0 + nmb - 1) / nmb + MR - 1) / MR * MR;
    size_t nlen = (size_t)(KC * RT_PANEL) * es;
    if (acc && panel_stride && n1 - n0 > NR && a_crowds_l2(mbs, base->k)) {
        /* A larger than L2 is read once per group of panels, not once per
         * panel: each K-block of A runs over every panel of the group while
         * it is in L2, the group's partial sums in acc.  At K = 3072 and
         * T = 128 (1.5 MB of A) the panel-by-panel order re-read A from L3
         * per panel on the 2026-12-02 VM, whose L2 is smaller than that: 0.3
         * of the AVX2 peak, against 0.6 at K = 768. */
        for (int64_t g = n0; g < n1; g += RT_GEMM_GROUP * NR) {
            int64_t ge = n1 - g < RT_GEMM_GROUP * NR ? n1 : g + RT_GEMM_GROUP * NR;
            for (int64_t mb = m0; mb < m1; mb += mbs) {
                int64_t mbe = m1 - mb < mbs ? m1 : mb + mbs;
                for (int64_t k0 = 0, kl; k0 < base->k; k0 += kl) {
                    kl = kblock_len(base->k, k0, KC);
                    for (int64_t n = g; n < ge; n += NR) {
                        Opnd o = panel_opnd(base, b, panel_stride, n_total, n);
                        /* next: this K-block of the group's next panel, else the next K-block of its first */
                        const char *nx = NULL;
                        if (n + NR < ge)
                            nx = (const char *)o.b0 + (size_t)(panel_stride + k0 * RT_PANEL) * es;
                        else if (k0 + kl < base->k)
                            nx = (const char *)b + (size_t)(g / RT_PANEL * panel_stride + (k0 + kl) * RT_PANEL) * es;
                        else if (ge < n1)
                            nx = (const char *)b + (size_t)(ge / RT_PANEL * panel_stride) * es;
                        kblock(&o, k0, kl, mb, mbe, n, n1 - n < NR ? (int)(n1 - n) : NR, e,
                               (float(*)[NR])(acc + (size_t)((n - g) / NR * mbs * NR)), wide, nx, nlen);
                    }
                }
            }
        }
        return;
    }
    /* Panel by panel: a KC×64 sub-panel of B stays in L1 while every tile of
     * the row block runs over it, the block's partial sums on the stack. */
    float part[MB_MAX][NR] __attribute__((aligned(64)));
    for (int64_t n = n0; n < n1; n += NR) {
        Opnd o = panel_opnd(base, b, panel_stride, n_total, n);
        int nc = n1 - n < NR ? (int)(n1 - n) : NR;
        for (int64_t mb = m0; mb < m1; mb += mbs) {
            int64_t mbe = m1 - mb < mbs ? m1 : mb + mbs;
            for (int64_t k0 = 0, kl; k0 < base->k; k0 += kl) {
                kl = kblock_len(base->k, k0, KC);
                /* next: the panel's next K-block, or the next panel's first */
                const char *nx = NULL;
                if (k0 + kl < base->k)
                    nx = (const char *)o.b0 + (size_t)((k0 + kl) * o.ldb) * es;
                else if (n + NR < n1 && panel_stride)
                    nx = (const char *)o.b0 + (size_t)panel_stride * es;
                kblock(&o, k0, kl, mb, mbe, n, nc, e, part, wide, nx, (size_t)(KC * o.ldb) * es);
            }
        }
    }
}

/* Splits an M×N product over threads (rt_split_blocks says how). */
static void split_mn(int64_t m, int64_t n, int ith, int nth, int64_t *m0, int64_t *m1, int64_t *n0, int64_t *n1) {
    bool cols;
    int64_t b = rt_split_blocks(m, n, nth, &cols);
    *m0 = 0, *m1 = m, *n0 = 0, *n1 = n;
    if (cols) {
        *n0 = b * ith / nth * NR, *n1 = b * (ith + 1) / nth * NR;
        if (*n1 > n) *n1 = n;
    } else {
        *m0 = b * ith / nth * MR, *m1 = b * (ith + 1) / nth * MR;
        if (*m1 > m) *m1 = m;
    }
}

static void rt_k_gemm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtGemmParams *gp = &op->p.gemm;
    const RtBuf *xb = &ex->bufs[op->in[0]], *wb = &ex->bufs[op->in[1]];
    const float *x = ex->ptr[op->in[0]];
    const void *w = ex->ptr[op->in[1]];
    const float *bias = gp->has_bias ? ex->ptr[op->in[2]] : NULL;
    const float *res = gp->has_residual ? ex->ptr[op->in[2 + gp->has_bias]] : NULL;
    float *y = ex->ptr[op->out[0]];
    int64_t n = wb->dims[0], k = wb->dims[1];
    Opnd o = {.k = k, .ldb = RT_PANEL, .f16 = wb->dtype == RT_F16};
    Epi e = {.alpha = 1.0f, .bias = bias, .act = gp->act, .res = res};
    float *acc = ex->scratch_per_thread ? (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread) : NULL;
    if (gp->layout == RT_GEMM_ROWS) {
        int64_t m = rt_gemm_rows(xb, k, gp->layout), m0, m1, n0, n1;
        o.a = x, o.am = k, o.ak = 1;
        e.rm = n, e.rn = 1, e.y = y, e.ym = n, e.yn = 1;
        split_mn(m, n, ith, nth, &m0, &m1, &n0, &n1);
        gemm_range(&o, w, k * RT_PANEL, n, m0, m1, n0, n1, &e, acc);
    } else if (gp->layout == RT_GEMM_PACKED) {
        /* as the channels layout, x packed by tiles of positions (pack_tiles):
         * a tile from m0 (a multiple of MR) reads its MR values of a k side by side */
        const RtBuf *yb = &ex->bufs[op->out[0]];
        int64_t nb = xb->dims[0], t = xb->dims[1], s = yb->numel / (nb * n), m0, m1, n0, n1;
        split_mn(s, n, ith, nth, &m0, &m1, &n0, &n1);
        for (int64_t bi = 0; bi < nb; bi++) {
            o.a = x + bi * t * k * MR, o.am = k, o.ar = 1, o.ak = MR;
            e.res = res ? res + bi * n * s : NULL, e.rm = 1, e.rn = s;
            e.y = y + bi * n * s, e.ym = 1, e.yn = s;
            gemm_range(&o, w, k * RT_PANEL, n, m0, m1, n0, n1, &e, acc);
        }
    } else {
        /* y[b, n, s] = Σ_k W[n, k] x[b, k, s]: rows are positions s. */
        int64_t nb = xb->dims[0], s = rt_gemm_rows(xb, k, gp->layout), m0, m1, n0, n1;
        split_mn(s, n, ith, nth, &m0, &m1, &n0, &n1);
        for (int64_t bi = 0; bi < nb; bi++) {
            o.a = x + bi * k * s, o.am = 1, o.ak = s;
            e.res = res ? res + bi * n * s : NULL, e.rm = 1, e.rn = s;
            e.y = y + bi * n * s, e.ym = 1, e.yn = s;
            gemm_range(&o, w, k * RT_PANEL, n, m0, m1, n0, n1, &e, acc);
        }
    }
}

/* x [B, K, S] as tiles of MR positions, each k's MR values side by side
 * (RT_OP_PACK_TILES, read by RT_GEMM_PACKED).  Unpacked, a tile's values of
 * a k lie in one row of x, S floats from the next k's: at S = 128 every line
 * of a K-block falls in 8 of L1's 64 sets, and the channels GEMMs ran 5-8%
 * slower than on the same values in rows.  Split over x's rows (b, k). */
static void rt_k_pack_tiles(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = &ex->bufs[op->in[0]], *yb = &ex->bufs[op->out[0]];
    int64_t K = xb->dims[1], S = xb->numel / (xb->dims[0] * K), T = yb->dims[1], rows = xb->dims[0] * K;
    int64_t r0 = rows * ith / nth, r1 = rows * (ith + 1) / nth;
    const float *x = ex->ptr[op->in[0]];
    float *y = ex->ptr[op->out[0]];
    for (int64_t r = r0; r < r1; r++) {
        int64_t b = r / K, kk = r % K;
        const float *src = x + r * S;
        float *dst = y + (b * T * K + kk) * MR;
        int64_t p = 0;
        for (; p + MR <= S; p += MR, dst += K * MR) memcpy(dst, src + p, MR * sizeof(float));
        if (p < S) {
            float tail[MR] = {0};
            memcpy(tail, src + p, (size_t)(S - p) * sizeof(float));
            memcpy(dst, tail, sizeof tail);
        }
    }
}

/* The first bytes a part streams, asked for by a thread done with the op
 * before (RtOpInfo.prefetch): a new stream otherwise starts from nothing,
 * one memory latency (~200 ns here) before its first bytes and longer
 * before the hardware prefetcher is under way, once per op and thread.  A
 * token of GPT-2 decode 0.6-2.3% faster over 500 paired tokens; 4 KB or 16
 * KB (into L1), or 32-64 KB into L2, gained nothing. */
enum { HEAD_BYTES = 8192 };
static void prefetch_head(const void *p, size_t len) {
    for (size_t b = 0; b < len && b < HEAD_BYTES; b += 64) __builtin_prefetch((const char *)p + b);
}

static void rt_p_gemm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = &ex->bufs[op->in[0]], *wb = &ex->bufs[op->in[1]];
    int64_t n = wb->dims[0], k = wb->dims[1], m0, m1, n0, n1;
    split_mn(rt_gemm_rows(xb, k, op->p.gemm.layout), n, ith, nth, &m0, &m1, &n0, &n1);
    if (m1 <= m0 || n1 <= n0) return;
    size_t panel = (size_t)(k * RT_PANEL) * rt_dtype_size((RtDType)wb->dtype);
    prefetch_head((const char *)ex->ptr[op->in[1]] + (size_t)(n0 / RT_PANEL) * panel, panel);
}

/* ---- batched matmul ---- */
/* Element offset of z's batch `bi` in operand a (batch dims right-aligned,
 * broadcast dims contribute 0). */
static int64_t batch_offset(const RtBuf *z, const RtBuf *a, int64_t bi) {
    int zr = (int)z->rank - 2, ar = (int)a->rank - 2;
    int64_t off = 0, stride = a->dims[a->rank - 1] * a->dims[a->rank - 2];
    for (int d = zr - 1; d >= 0; d--) {
        int64_t idx = bi % z->dims[d];
        bi /= z->dims[d];
        int ad = d - (zr - ar);
        if (ad < 0) break;
        if (a->dims[ad] != 1) off += idx * stride;
        stride *= a->dims[ad];
    }
    return off;
}

static void transpose_into(const float *src, int64_t rows, int64_t cols, float *dst) {
    /* dst[c][r] = src[r][c] in 16×16 blocks to stay in cache */
    for (int64_t r0 = 0; r0 < rows; r0 += 16)
        for (int64_t c0 = 0; c0 < cols; c0 += 16)
            for (int64_t r = r0; r < r0 + 16 && r < rows; r++)
                for (int64_t c = c0; c < c0 + 16 && c < cols; c++) dst[c * rows + r] = src[r * cols + c];
}

static void rt_k_matmul(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtMatmulParams *p = &op->p.matmul;
    const RtBuf *xb = &ex->bufs[op->in[0]], *yb = &ex->bufs[op->in[1]], *zb = &ex->bufs[op->out[0]];
    const float *x = ex->ptr[op->in[0]], *y = ex->ptr[op->in[1]];
    float *z = ex->ptr[op->out[0]];
    int64_t m = zb->dims[zb->rank - 2], n = zb->dims[zb->rank - 1];
    int64_t k = xb->dims[xb->rank - 1 - p->transpose_x];
    int64_t batches = zb->numel / (m * n), b0, b1;
    float *pack = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
    Opnd o = {.k = k, .ldb = n, .f16 = 0};
    Epi e = {.alpha = 1.0f, .ym = n, .yn = 1};
    if (batches >= nth) { /* whole matrices per thread */
        b0 = batches * ith / nth, b1 = batches * (ith + 1) / nth;
    } else { /* few matrices: every thread takes part of each */
        b0 = 0, b1 = batches;
    }
    for (int64_t bi = b0; bi < b1; bi++) {
        int64_t m0 = 0, m1 = m, n0 = 0, n1 = n;
        if (batches < nth) split_mn(m, n, ith, nth, &m0, &m1, &n0, &n1);
        const float *xa = x + batch_offset(zb, xb, bi), *ya = y + batch_offset(zb, yb, bi);
        if (p->transpose_y) { /* y stored [N, K]: make it [K, N] */
            transpose_into(ya, n, k, pack);
            ya = pack;
        }
        o.a = xa, o.am = p->transpose_x ? 1 : k, o.ak = p->transpose_x ? m : 1;
        e.y = z + bi * m * n;
        if (m1 > m0 && n1 > n0) gemm_range(&o, ya, 0, n, m0, m1, n0, n1, &e, NULL);
    }
}

/* ---- fused attention ---- */

/* ---- flagged attention: K/V transposed, fp16, in two parts (decode) ----
 * One query row at a time: scores over every key, softmax, then the weighted
 * sum of V.  Each K/V row is streamed once per query row straight from where
 * it lies (an fp16 cache input included): decode is bound by those bytes. */

/* How far ahead of its reads the K/V loops ask for the cache's bytes.  A
 * head's K or V rows are one 128 KB run (64 rows × 1024 positions of fp16);
 * the hardware prefetcher alone kept a thread near the read loop's speed,
 * and asking 8 KB (4 rows) ahead made decode 1.5-4% faster over 240 paired
 * tokens on Zen 5 (2 KB: no better than none; 16 KB: worse). */
enum { KV_AHEAD = 8192 };

/* y[0..n) += a * x[0..n), x fp32 or fp16 */
static void axpy_any(float *y, float a, const void *x, bool f16, int64_t n) {
    int64_t i = 0;
#ifdef RT_AVX512
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16) {
        if ((i * (f16 ? 2 : 4) & 63) == 0) RT_PF_L2((const char *)x + i * (f16 ? 2 : 4) + KV_AHEAD);
        __m512 xv = f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)x + i)))
                        : _mm512_loadu_ps((const float *)x + i);
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, xv, _mm512_loadu_ps(y + i)));
    }
#elif defined(RT_VL)
    RtV va = v_set1(a);
    size_t es = f16 ? 2 : 4;
    for (; i + RT_VL <= n; i += RT_VL) {
        if ((i * (int64_t)es & 63) == 0) RT_PF_L2((const char *)x + i * (int64_t)es + KV_AHEAD);
        RtV xv = f16 ? v_load_h((const uint16_t *)x + i) : v_load((const float *)x + i);
        v_store(y + i, v_fma(va, xv, v_load(y + i)));
    }
#endif
    if (f16)
        for (; i < n; i++) y[i] += a * half_to_float(((const uint16_t *)x)[i]);
    else
        for (; i < n; i++) y[i] += a * ((const float *)x)[i];
}

/* Σ a[i] x[i], x fp32 or fp16 */
static float dot_any(const float *a, const void *x, bool f16, int64_t n) {
    if (!f16) return rt_dot(a, x, n);
    int64_t i = 0;
    float s = 0;
#ifdef RT_AVX512
    __m512 v0 = _mm512_setzero_ps(), v1 = _mm512_setzero_ps();
    const uint16_t *h = x;
    for (; i + 32 <= n; i += 32) {
        RT_PF_L2((const char *)(h + i) + KV_AHEAD);
        v0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))), v0);
        v1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16),
                             _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i + 16))), v1);
    }
    s = _mm512_reduce_add_ps(_mm512_add_ps(v0, v1));
#elif defined(RT_VL)
    RtV v0 = v_zero(), v1 = v_zero();
    const uint16_t *h = x;
    for (; i + 2 * RT_VL <= n; i += 2 * RT_VL) {
        if ((i * 2 & 63) == 0) RT_PF_L2((const char *)(h + i) + KV_AHEAD);
        v0 = v_fma(v_load(a + i), v_load_h(h + i), v0);
        v1 = v_fma(v_load(a + i + RT_VL), v_load_h(h + i + RT_VL), v1);
    }
    s = v_sum(v_add(v0, v1));
#endif
    for (; i < n; i++) s += a[i] * half_to_float(((const uint16_t *)x)[i]);
    return s;
}

typedef struct {
    const unsigned char *k, *v;
    bool kf16, vf16;
    int64_t s, off; /* positions in this part, first position */
} KvPart;

/* Where the K or V rows (rows × s positions, es bytes each) of the query
 * unit u's kv head begin: the kernel's and the prefetch's one mapping. */
static const unsigned char *kv_rows(const unsigned char *base, int64_t u, int64_t H, int64_t L, int64_t Hk,
                                    int64_t rows, int64_t s, size_t es) {
    int64_t b = u / (H * L), hk = u / L % H / (H / Hk);
    return base + (size_t)((b * Hk + hk) * rows * s) * es;
}

static void attention_kv(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtAttnParams *p = &op->p.attn;
    bool kt = p->flags & RT_ATTN_K_T, vt = p->flags & RT_ATTN_V_T;
    int np = (p->flags & RT_ATTN_SPLIT) ? 2 : 1;
    const RtBuf *qb = &ex->bufs[op->in[0]];
    const float *q = ex->ptr[op->in[0]];
    float *o = ex->ptr[op->out[0]];
    int64_t B = qb->dims[0], H = qb->dims[1], L = qb->dims[2], E = qb->dims[3];
    int64_t Hk = p->kv_heads, Ev = ex->bufs[op->out[0]].dims[3], S = 0;
    KvPart part[2];
    for (int i = 0; i < np; i++) {
        const RtBuf *kb = &ex->bufs[op->in[1 + 2 * i]], *vb = &ex->bufs[op->in[2 + 2 * i]];
        part[i] = (KvPart){.k = ex->ptr[op->in[1 + 2 * i]],
                           .v = ex->ptr[op->in[2 + 2 * i]],
                           .kf16 = kb->dtype == RT_F16,
                           .vf16 = vb->dtype == RT_F16,
                           .s = kb->numel / (B * Hk * E),
                           .off = S};
        S += part[i].s;
    }
    const float *mask = p->has_mask ? ex->ptr[op->in[1 + 2 * np]] : NULL;
    int64_t ms[4] = {0, 0, 0, 0};
    if (mask) {
        const RtBuf *mb = &ex->bufs[op->in[1 + 2 * np]];
        int64_t st = 1;
        for (int d = 3, md = (int)mb->rank - 1; d >= 0 && md >= 0; d--, md--) {
            ms[d] = mb->dims[md] == 1 ? 0 : st;
            st *= mb->dims[md];
        }
    }
    float *row = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread), *qs = row + S;
    int64_t units = B * H * L, u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
    for (int64_t u = u0; u < u1; u++) {
        int64_t b = u / (H * L), h = u / L % H, li = u % L;
        const float *qr = q + u * E;
        for (int64_t e = 0; e < E; e++) qs[e] = qr[e] * p->scale;
        for (int i = 0; i < np; i++) {
            const KvPart *pt = &part[i];
            size_t es = pt->kf16 ? 2 : 4;
            const unsigned char *kh = kv_rows(pt->k, u, H, L, Hk, E, pt->s, es);
            float *sr = row + pt->off;
            if (kt) { /* K rows [E][s]: scores = Σ_e q[e] K[e][:], one row per pass: the
                         * scores stay in L1 either way, and one stream of K reads faster
                         * than four at once (attention 10% faster on Zen 5, alternating
                         * runs, than passes over four rows) */
                memset(sr, 0, (size_t)pt->s * sizeof *sr);
                for (int64_t e = 0; e < E; e++) axpy_any(sr, qs[e], kh + (size_t)(e * pt->s) * es, pt->kf16, pt->s);
            } else {
                for (int64_t j = 0; j < pt->s; j++) sr[j] = dot_any(qs, kh + (size_t)(j * E) * es, pt->kf16, E);
            }
        }
        int64_t lim = p->causal ? li + (S - L) + 1 : S;
        if (mask) {
            const float *mr = mask + b * ms[0] + h * ms[1] + li * ms[2];
            for (int64_t j = 0; j < lim; j++) row[j] += mr[j * ms[3]];
        }
        float mx = -FLT_MAX;
        for (int64_t j = 0; j < lim; j++) mx = row[j] > mx ? row[j] : mx;
        float sum = rt_exp_row(row, row, lim, mx);
        float inv = sum > 0 ? 1.0f / sum : 0.0f;
        for (int64_t j = 0; j < lim; j++) row[j] *= inv;
        for (int64_t j = lim; j < S; j++) row[j] = 0.0f;
        float *orow = o + u * Ev;
        memset(orow, 0, (size_t)Ev * sizeof *orow);
        for (int i = 0; i < np; i++) {
            const KvPart *pt = &part[i];
            size_t es = pt->vf16 ? 2 : 4;
            const unsigned char *vh = kv_rows(pt->v, u, H, L, Hk, Ev, pt->s, es);
            const float *pr = row + pt->off;
            if (vt) /* V rows [Ev][s]: o[e] = Σ_j p[j] V[e][j] */
                for (int64_t e = 0; e < Ev; e++) orow[e] += dot_any(pr, vh + (size_t)(e * pt->s) * es, pt->vf16, pt->s);
            else
                for (int64_t j = 0; j < pt->s; j++) axpy_any(orow, pr[j], vh + (size_t)(j * Ev) * es, pt->vf16, Ev);
        }
    }
}

/* Decode attention's part starts with its first head's K rows. */
static void rt_p_attention(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtAttnParams *p = &op->p.attn;
    if (!p->flags) return;
    const RtBuf *qb = &ex->bufs[op->in[0]], *kb = &ex->bufs[op->in[1]];
    int64_t B = qb->dims[0], H = qb->dims[1], L = qb->dims[2], E = qb->dims[3], Hk = p->kv_heads;
    int64_t s = kb->numel / (B * Hk * E);
    size_t es = rt_dtype_size((RtDType)kb->dtype);
    prefetch_head(kv_rows(ex->ptr[op->in[1]], B * H * L * ith / nth, H, L, Hk, E, s, es), (size_t)(E * s) * es);
}

static void rt_k_attention(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtAttnParams *p = &op->p.attn;
    if (p->flags) {
        attention_kv(ex, op, ith, nth);
        return;
    }
    const RtBuf *qb = &ex->bufs[op->in[0]], *kb = &ex->bufs[op->in[1]], *vb = &ex->bufs[op->in[2]];
    const float *q = ex->ptr[op->in[0]], *k = ex->ptr[op->in[1]], *v = ex->ptr[op->in[2]];
    const float *mask = p->has_mask ? ex->ptr[op->in[3]] : NULL;
    float *o = ex->ptr[op->out[0]];
    int64_t B = qb->dims[0], H = qb->dims[1], L = qb->dims[2], E = qb->dims[3];
    int64_t Hk = kb->dims[1], S = kb->dims[2], Ev = vb->dims[3];
    int64_t ms[4] = {0, 0, 0, 0}; /* mask strides over [B, H, L, S], 0 where it broadcasts */
    if (mask) {
        const RtBuf *mb = &ex->bufs[op->in[3]];
        int64_t st = 1;
        for (int d = 3, md = (int)mb->rank - 1; d >= 0 && md >= 0; d--, md--) {
            ms[d] = mb->dims[md] == 1 ? 0 : st;
            st *= mb->dims[md];
        }
    }
    float *sc = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread), *kt = sc + RT_ATT_LB * S;
    int64_t lblocks = (L + RT_ATT_LB - 1) / RT_ATT_LB, units = B * H * lblocks;
    int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth, packed = -1;
    for (int64_t u = u0; u < u1; u++) {
        int64_t bh = u / lblocks, l0 = (u % lblocks) * RT_ATT_LB, lb = L - l0 < RT_ATT_LB ? L - l0 : RT_ATT_LB;
        int64_t b = bh / H, h = bh % H, hk = h / (H / Hk);
        const float *qh = q + ((b * H + h) * L + l0) * E, *kh = k + (b * Hk + hk) * S * E;
        /* Causal: no row of the block sees a key past its last row's, so the
         * scores and P·V stop there (GPT-2 prefill, T = 128 in blocks of 48:
         * 71% of the products). */
        int64_t kn = p->causal && l0 + lb + (S - L) < S ? l0 + lb + (S - L) : S;
        if (kn < 1) kn = 1;
        if (lb < 8) { /* decode: a few rows of dot products beat transposing k */
            for (int64_t i = 0; i < lb; i++)
                for (int64_t j = 0; j < kn; j++) sc[i * S + j] = p->scale * rt_dot(qh + i * E, kh + j * E, E);
        } else {
            if (packed != b * Hk + hk) { /* kᵀ [E, S] of this kv head, reused across its query heads */
                transpose_into(kh, S, E, kt);
                packed = b * Hk + hk;
            }
            Opnd qk = {.a = qh, .am = E, .ak = 1, .k = E, .ldb = S};
            Epi es = {.alpha = p->scale, .y = sc, .ym = S, .yn = 1};
            gemm_range(&qk, kt, 0, S, 0, lb, 0, kn, &es, NULL);
        }
        for (int64_t i = 0; i < lb; i++) {
            float *row = sc + i * S;
            int64_t li = l0 + i, lim = p->causal ? li + (S - L) + 1 : S;
            if (mask) {
                const float *mr = mask + b * ms[0] + h * ms[1] + li * ms[2];
                for (int64_t j = 0; j < lim; j++) row[j] += mr[j * ms[3]];
            }
            float mx = -FLT_MAX;
            for (int64_t j = 0; j < lim; j++) mx = row[j] > mx ? row[j] : mx;
            float sum = rt_exp_row(row, row, lim, mx);
            float inv = sum > 0 ? 1.0f / sum : 0.0f;
            for (int64_t j = 0; j < lim; j++) row[j] *= inv;
            for (int64_t j = lim; j < S; j++) row[j] = 0.0f;
        }
        Opnd pv = {.a = sc, .am = S, .ak = 1, .k = kn, .ldb = Ev};
        Epi eo = {.alpha = 1.0f, .y = o + ((b * H + h) * L + l0) * Ev, .ym = Ev, .yn = 1};
        gemm_range(&pv, v + (b * Hk + hk) * S * Ev, 0, Ev, 0, lb, 0, Ev, &eo, NULL);
    }
}
