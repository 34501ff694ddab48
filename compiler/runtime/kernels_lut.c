/* kernels_lut.c — the compressed linear layers, each reading its weight as
 * it is stored: the palettized one its packed indices (a 4-bit weight: a
 * quarter of fp16's bytes, and decode is bound by the bytes it reads), the
 * 8-bit quantized one its integer bytes.  Each part takes a run of output
 * features n, so a thread streams one range of weight bytes.
 * AVX-512, b-bit indices (b = 1, 2, 4): a 64-byte load holds 512/b of them;
 * lane j's dword holds indices (32/b)j .. (32/b)j + 32/b - 1, so shifting
 * it by b·t bits puts index (32/b)j + t in the low bits that vpermps reads
 * (four of them: the palette is repeated to 16 entries, entry e holding
 * palette[e mod 2^b], so the bits above the index need no mask).  32/b
 * shifts and lookups give the chunk's weights in an order (t, j) that x is
 * permuted into once per call.  AVX2 the same at 256/b indices a load,
 * vpermps reading three bits: 4-bit palettes are two 8-entry halves and a
 * blend (lut_tab, lut_look).  AVX2 and NEON decode 4-bit indices over
 * fp16 palettes by byte lookups (lut_f16_decode).  The rest of NEON's, the
 * scalar reference, and 3-, 6- and 8-bit indices look up one weight at a
 * time.
 * Compiled once per kernel variant, inside kernels_variant.c. */

enum { LUT_MB = 4 }; /* rows of x per pass (accumulators in registers) */

/* Bytes of indices the rows ask for ahead of their reads: a thread reads
 * at most what it has in flight per memory latency (~200 ns here), and a
 * row of 384 bytes (K = 768) is too short for the hardware prefetcher to
 * run ahead of on its own.  Into L2, 8 KB ahead beat 4 KB: AVX-512 4-bit
 * decode 1.87-1.97 -> 1.75-1.85 of its bytes' time (3 alternated runs of
 * 25 pairs each; 12 KB 1.78-1.85). */
enum { LUT_AHEAD = 8192 };

/* Index k of a row of bits-bit indices, packed low bits first. */
static inline unsigned lut_id(const uint8_t *ix, int64_t k, int bits) {
    if (bits == 8) return ix[k];
    uint64_t bit = (uint64_t)k * (unsigned)bits;
    unsigned raw = ix[bit >> 3];
    if ((bit & 7) + (unsigned)bits > 8) raw |= (unsigned)ix[(bit >> 3) + 1] << 8;
    return raw >> (bit & 7) & ((1u << bits) - 1);
}

static void lut_scalar(const uint8_t *ix, const float *pal, int bits, int64_t k0, int64_t k1, const float *x,
                       int64_t ldx, int mr, float *acc) {
    for (int64_t k = k0; k < k1; k++) {
        float w = pal[lut_id(ix, k, bits)];
        for (int m = 0; m < mr; m++) acc[m] += x[m * ldx + k] * w;
    }
}

#if defined(RT_AVX512) || defined(RT_VARIANT_AVX2)
/* x in the lookups' order, per chunk of RT_VL · 32/bits indices:
 * xp[c + RT_VL·t + j] = x[c + (32/bits)·j + t] (a tail past the last whole
 * chunk is not read). */
static void lut_permute_x(const float *x, float *xp, int64_t k, int bits) {
    int per = 32 / bits;
    for (int64_t c = 0; c + per * RT_VL <= k; c += per * RT_VL)
        for (int t = 0; t < per; t++)
            for (int j = 0; j < RT_VL; j++) xp[c + RT_VL * t + j] = x[c + per * j + t];
}

/* Each variant's lookup: LutIdx a load of RT_VL dwords of indices, LutTab
 * a palette as vpermps tables, lut_look the weights of lookup t (index
 * (32/bits)·j + t in lane j). */
#ifdef RT_AVX512
typedef __m512i LutIdx;
typedef __m512 LutTab;
static inline LutIdx lut_idx(const uint8_t *p) { return _mm512_loadu_si512((const void *)p); }
/* the 16-entry table: entry e holds pal[e mod 2^bits], so an index need
 * not be masked off the bits above it */
static inline __attribute__((always_inline)) LutTab lut_tab(const float *pal, const int bits) {
    if (bits == 4) return _mm512_loadu_ps(pal);
    __m512 pv = _mm512_maskz_loadu_ps((__mmask16)((1u << (1 << bits)) - 1), pal);
    return _mm512_permutexvar_ps(_mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                  _mm512_set1_epi32((1 << bits) - 1)),
                                 pv);
}
static inline __attribute__((always_inline)) RtV lut_look(LutIdx v, const int bits, int t, LutTab tab) {
    return _mm512_permutexvar_ps(_mm512_srli_epi32(v, (unsigned)(bits * t)), tab);
}
#else
typedef __m256i LutIdx;
typedef struct {
    __m256 lo, hi;
} LutTab;
static inline LutIdx lut_idx(const uint8_t *p) { return _mm256_loadu_si256((const __m256i *)p); }
/* vpermps reads three bits: a 4-bit palette is two 8-entry halves (bit 3,
 * shifted into the sign, picks one by a blend); a 1- or 2-bit one is
 * repeated to 8 entries */
static inline __attribute__((always_inline)) LutTab lut_tab(const float *pal, const int bits) {
    if (bits == 4) return (LutTab){_mm256_loadu_ps(pal), _mm256_loadu_ps(pal + 8)};
    __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), n = _mm256_set1_epi32(1 << bits);
    __m256 pv = _mm256_maskload_ps(pal, _mm256_cmpgt_epi32(n, iota));
    return (LutTab){_mm256_permutevar8x32_ps(pv, _mm256_and_si256(iota, _mm256_set1_epi32((1 << bits) - 1))),
                    _mm256_setzero_ps()};
}
static inline __attribute__((always_inline)) RtV lut_look(LutIdx v, const int bits, int t, LutTab tab) {
    __m256i id = _mm256_srli_epi32(v, bits * t);
    if (bits != 4) return _mm256_permutevar8x32_ps(tab.lo, id);
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(tab.lo, id), _mm256_permutevar8x32_ps(tab.hi, id),
                            _mm256_castsi256_ps(_mm256_slli_epi32(v, 28 - bits * t)));
}
#endif

/* Decode (one row of x): rows n of bits-bit indices (1, 2 or 4) [n0, n1),
 * each K long in one block of columns (bk = 1), pal(n) its palette.  Two
 * rows at a time (eight independent accumulators) and no call per row: at
 * K = 768 a 4-bit row is six 64-byte chunks, and the per-row call,
 * reduction and palette load took more time than its lookups. */
static inline __attribute__((always_inline)) void lutn_decode(const uint8_t *ix, const float *lut, const int bits,
                                                              int64_t rn, int64_t n0, int64_t n1, int64_t K,
                                                              const float *xp, const float *bias, float *y) {
    const int per = 32 / bits, np = 1 << bits;
    int64_t rowb = K * bits / 8;
    for (int64_t n = n0; n < n1; n += 2) {
        bool two = n + 1 < n1;
        const uint8_t *r0 = ix + n * rowb, *r1 = two ? r0 + rowb : r0;
        LutTab l0 = lut_tab(lut + (n / rn) * np, bits), l1 = lut_tab(lut + ((two ? n + 1 : n) / rn) * np, bits);
        RtV s[4], u[4];
        for (int i = 0; i < 4; i++) s[i] = u[i] = v_zero();
        for (int64_t k = 0; k < K; k += RT_VL * per) {
            RT_PF_L2((const char *)r0 + k * bits / 8 + LUT_AHEAD);
            RT_PF_L2((const char *)r1 + k * bits / 8 + LUT_AHEAD);
            LutIdx v = lut_idx(r0 + k * bits / 8), w = lut_idx(r1 + k * bits / 8);
            for (int t = 0; t < per; t++) {
                RtV xv = v_load(xp + k + RT_VL * t);
                s[t & 3] = v_fma(lut_look(v, bits, t, l0), xv, s[t & 3]);
                u[t & 3] = v_fma(lut_look(w, bits, t, l1), xv, u[t & 3]);
            }
        }
        y[n] = v_sum(v_add(v_add(s[0], s[1]), v_add(s[2], s[3]))) + (bias ? bias[n] : 0.0f);
        if (two) y[n + 1] = v_sum(v_add(v_add(u[0], u[1]), v_add(u[2], u[3]))) + (bias ? bias[n + 1] : 0.0f);
    }
}

static void lut_decode(const uint8_t *ix, const float *lut, int bits, int64_t rn, int64_t n0, int64_t n1, int64_t K,
                       const float *xp, const float *bias, float *y) {
    switch (bits) {
    case 1: lutn_decode(ix, lut, 1, rn, n0, n1, K, xp, bias, y); break;
    case 2: lutn_decode(ix, lut, 2, rn, n0, n1, K, xp, bias, y); break;
    default: lutn_decode(ix, lut, 4, rn, n0, n1, K, xp, bias, y); break;
    }
}

/* Columns [k0, k1) (multiples of RT_VL · 32/bits) of one row of bits-bit
 * indices (1, 2 or 4), mr rows of x in the lookups' order. */
static inline __attribute__((always_inline)) void lutn_cols(const uint8_t *ix, const float *pal, const int bits,
                                                            int64_t k0, int64_t k1, const float *xp, int64_t ldx,
                                                            int mr, float *acc) {
    const int per = 32 / bits;
    LutTab tab = lut_tab(pal, bits);
    RtV a[LUT_MB][2];
    for (int m = 0; m < LUT_MB; m++) a[m][0] = a[m][1] = v_zero();
    for (int64_t k = k0; k < k1; k += RT_VL * per) {
        if (mr == 1) RT_PF_L2((const char *)ix + k * bits / 8 + LUT_AHEAD);
        LutIdx v = lut_idx(ix + k * bits / 8);
        for (int t = 0; t < per; t++) {
            RtV w = lut_look(v, bits, t, tab);
            for (int m = 0; m < mr; m++)
                a[m][t & 1] = v_fma(w, v_load(xp + m * ldx + k + RT_VL * t), a[m][t & 1]);
        }
    }
    for (int m = 0; m < mr; m++) acc[m] += v_sum(v_add(a[m][0], a[m][1]));
}

/* The variant's lutn_cols with bits a compile-time constant. */
static void lut_vec(const uint8_t *ix, const float *pal, int bits, int64_t k0, int64_t k1, const float *xp,
                    int64_t ldx, int mr, float *acc) {
    switch (bits) {
    case 1: lutn_cols(ix, pal, 1, k0, k1, xp, ldx, mr, acc); break;
    case 2: lutn_cols(ix, pal, 2, k0, k1, xp, ldx, mr, acc); break;
    default: lutn_cols(ix, pal, 4, k0, k1, xp, ldx, mr, acc); break;
    }
}
#endif

#if defined(RT_VARIANT_AVX2) || defined(RT_VARIANT_NEON)
/* 4-bit decode by byte lookups, for palettes whose entries are all exact
 * fp16 values (a Core ML palette is fp16): vpshufb (NEON: tbl) looks up
 * each byte of a vector in a 16-byte table, so each palette is two tables,
 * its fp16 values' low and high bytes.  A chunk of 8·RT_VL indices (a load
 * of 4·RT_VL bytes: low nibbles even k, high nibbles odd k) takes four
 * lookups and two byte interleaves to give its fp16 weights, widened to
 * fp32 as eight runs of RT_VL and multiplied in fp32: the same products as
 * the other paths'.  On AVX2 this is half the shuffle-port work of two
 * vpermps and a blend per 8 weights (an L1-resident loop: 0.12 -> 0.064 ns
 * a weight); NEON has no 16-entry fp32 lookup at all. */
#ifdef RT_VARIANT_AVX2
typedef struct {
    __m256i lo, hi;
} LutF16;
typedef struct {
    __m256i h[4];
} LutF16Runs; /* eight runs of 8 fp16 weights, widened as they are read */

/* pal's 16 entries as tables, and whether each is an fp16 value */
static inline bool lut_f16_tables(const float *pal, LutF16 *t) {
    __m256 a = _mm256_loadu_ps(pal), b = _mm256_loadu_ps(pal + 8);
    __m128i ha = _mm256_cvtps_ph(a, _MM_FROUND_TO_NEAREST_INT), hb = _mm256_cvtps_ph(b, _MM_FROUND_TO_NEAREST_INT);
    __m256 same = _mm256_and_ps(_mm256_cmp_ps(_mm256_cvtph_ps(ha), a, _CMP_EQ_OQ),
                                _mm256_cmp_ps(_mm256_cvtph_ps(hb), b, _CMP_EQ_OQ));
    const __m128i split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m128i sa = _mm_shuffle_epi8(ha, split), sb = _mm_shuffle_epi8(hb, split);
    t->lo = _mm256_broadcastsi128_si256(_mm_unpacklo_epi64(sa, sb));
    t->hi = _mm256_broadcastsi128_si256(_mm_unpackhi_epi64(sa, sb));
    return _mm256_movemask_ps(same) == 0xff;
}

/* The chunk offset of weight i of run r (vpunpck{l,h}bw interleave within
 * 128-bit lanes). */
static inline int lut_f16_at(int r, int i) {
    static const int base[4] = {0, 16, 8, 24};
    return 2 * (base[r & 3] + i) + (r >> 2);
}

static inline __attribute__((always_inline)) void lut_f16_look(const uint8_t *p, const LutF16 *t, LutF16Runs *w) {
    const __m256i m = _mm256_set1_epi8(15);
    __m256i v = _mm256_loadu_si256((const __m256i *)p);
    __m256i e = _mm256_and_si256(v, m), o = _mm256_and_si256(_mm256_srli_epi16(v, 4), m);
    __m256i el = _mm256_shuffle_epi8(t->lo, e), eh = _mm256_shuffle_epi8(t->hi, e);
    __m256i ol = _mm256_shuffle_epi8(t->lo, o), oh = _mm256_shuffle_epi8(t->hi, o);
    w->h[0] = _mm256_unpacklo_epi8(el, eh), w->h[1] = _mm256_unpackhi_epi8(el, eh);
    w->h[2] = _mm256_unpacklo_epi8(ol, oh), w->h[3] = _mm256_unpackhi_epi8(ol, oh);
}
static inline RtV lut_f16_run(const LutF16Runs *w, int r) {
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)w->h + r));
}
/* widened from memory: vcvtph2ps's register form costs a shuffle-port uop
 * (the lookups' port), its memory form does not */
#define LUT_F16_IN_MEMORY(a, b) __asm__("" : "+m"(a), "+m"(b))
#else
typedef struct {
    uint8x16_t lo, hi;
} LutF16;
typedef struct {
    float32x4_t w[8];
} LutF16Runs;

static inline bool lut_f16_tables(const float *pal, LutF16 *t) {
    float16x4_t h[4];
    uint32x4_t same = vdupq_n_u32(~0u);
    for (int i = 0; i < 4; i++) {
        float32x4_t v = vld1q_f32(pal + 4 * i);
        h[i] = vcvt_f16_f32(v);
        same = vandq_u32(same, vceqq_f32(vcvt_f32_f16(h[i]), v));
    }
    uint8x16_t b0 = vreinterpretq_u8_f16(vcombine_f16(h[0], h[1])), b1 = vreinterpretq_u8_f16(vcombine_f16(h[2], h[3]));
    t->lo = vuzp1q_u8(b0, b1), t->hi = vuzp2q_u8(b0, b1);
    return vminvq_u32(same) == ~0u;
}

/* The chunk offset of weight i of run r (run r: half r & 1 of the zip
 * r >> 1, zip1 and zip2 of the even then of the odd indices). */
static inline int lut_f16_at(int r, int i) { return 2 * (8 * ((r >> 1) & 1) + 4 * (r & 1) + i) + (r >> 2); }

static inline __attribute__((always_inline)) void lut_f16_look(const uint8_t *p, const LutF16 *t, LutF16Runs *w) {
    uint8x16_t v = vld1q_u8(p), e = vandq_u8(v, vdupq_n_u8(15)), o = vshrq_n_u8(v, 4);
    uint8x16_t el = vqtbl1q_u8(t->lo, e), eh = vqtbl1q_u8(t->hi, e);
    uint8x16_t ol = vqtbl1q_u8(t->lo, o), oh = vqtbl1q_u8(t->hi, o);
    float16x8_t q[4] = {vreinterpretq_f16_u8(vzip1q_u8(el, eh)), vreinterpretq_f16_u8(vzip2q_u8(el, eh)),
                        vreinterpretq_f16_u8(vzip1q_u8(ol, oh)), vreinterpretq_f16_u8(vzip2q_u8(ol, oh))};
    for (int j = 0; j < 4; j++) w->w[2 * j] = vcvt_f32_f16(vget_low_f16(q[j])), w->w[2 * j + 1] = vcvt_high_f32_f16(q[j]);
}
static inline RtV lut_f16_run(const LutF16Runs *w, int r) { return w->w[r]; }
#define LUT_F16_IN_MEMORY(a, b) ((void)0)
#endif

/* Whether every palette of rows [n0, n1) (rn rows each) is fp16. */
static bool lut_f16_all(const float *lut, int64_t rn, int64_t n0, int64_t n1) {
    LutF16 t;
    for (int64_t q = n0 / rn; q <= (n1 - 1) / rn; q++)
        if (!lut_f16_tables(lut + q * 16, &t)) return false;
    return true;
}

/* x in the runs' order: xp[c + RT_VL·r + i] = x[c + lut_f16_at(r, i)]. */
static void lut_f16_permute_x(const float *x, float *xp, int64_t k) {
    for (int64_t c = 0; c + 8 * RT_VL <= k; c += 8 * RT_VL)
        for (int r = 0; r < 8; r++)
            for (int i = 0; i < RT_VL; i++) xp[c + RT_VL * r + i] = x[c + lut_f16_at(r, i)];
}

/* lutn_decode's two rows at a time, by byte lookups (K a multiple of 8·RT_VL). */
static void lut_f16_decode(const uint8_t *ix, const float *lut, int64_t rn, int64_t n0, int64_t n1, int64_t K,
                           const float *xp, const float *bias, float *y) {
    int64_t rowb = K / 2;
    for (int64_t n = n0; n < n1; n += 2) {
        bool two = n + 1 < n1;
        const uint8_t *r0 = ix + n * rowb, *r1 = two ? r0 + rowb : r0;
        LutF16 t0, t1;
        lut_f16_tables(lut + (n / rn) * 16, &t0);
        lut_f16_tables(lut + ((two ? n + 1 : n) / rn) * 16, &t1);
        RtV s[4], u[4];
        for (int i = 0; i < 4; i++) s[i] = u[i] = v_zero();
        for (int64_t k = 0; k < K; k += 8 * RT_VL) {
            RT_PF_L2((const char *)r0 + k / 2 + LUT_AHEAD);
            RT_PF_L2((const char *)r1 + k / 2 + LUT_AHEAD);
            LutF16Runs a, b;
            lut_f16_look(r0 + k / 2, &t0, &a);
            lut_f16_look(r1 + k / 2, &t1, &b);
            LUT_F16_IN_MEMORY(a, b);
            for (int r = 0; r < 8; r++) {
                RtV xv = v_load(xp + k + RT_VL * r);
                s[r & 3] = v_fma(lut_f16_run(&a, r), xv, s[r & 3]);
                u[r & 3] = v_fma(lut_f16_run(&b, r), xv, u[r & 3]);
            }
        }
        y[n] = v_sum(v_add(v_add(s[0], s[1]), v_add(s[2], s[3]))) + (bias ? bias[n] : 0.0f);
        if (two) y[n + 1] = v_sum(v_add(v_add(u[0], u[1]), v_add(u[2], u[3]))) + (bias ? bias[n + 1] : 0.0f);
    }
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
#if defined(RT_VARIANT_AVX2) || defined(RT_VARIANT_NEON)
    if (M == 1 && p->bk == 1 && p->bits == 4 && K % (8 * RT_VL) == 0 && lut_f16_all(lut, rn, n0, n1)) {
        float *xp = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
        lut_f16_permute_x(x, xp, K);
        lut_f16_decode(ix, lut, rn, n0, n1, K, xp, bias, y);
        return;
    }
#endif
#if defined(RT_AVX512) || defined(RT_VARIANT_AVX2)
    vec = (p->bits == 1 || p->bits == 2 || p->bits == 4) && kb % (32 / p->bits * RT_VL) == 0;
    if (vec) {
        float *xp = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
        for (int64_t m = 0; m < M; m++) lut_permute_x(x + m * K, xp + m * K, K, p->bits);
        xs = xp;
        if (M == 1 && p->bk == 1) {
            lut_decode(ix, lut, p->bits, rn, n0, n1, K, xp, bias, y);
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
#if defined(RT_AVX512) || defined(RT_VARIANT_AVX2)
                if (vec) {
                    lut_vec(ix + n * rowb, pal, p->bits, b * kb, (b + 1) * kb, xs + m0 * K, K, mr, acc);
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

/* ---- the 8- and 4-bit quantized linear layer (RT_OP_QGEMM) ----
 * The integer weight stays as its bytes (or nibbles): decode reads a
 * quarter (an eighth) of fp32's and half (a quarter) of fp16's.  Each (row,
 * K-block) is summed as s·(Σ x·q − z·Σ x), Σ x of every block of x's rows
 * made once per call; up to QMB rows of x share each widened vector of q. */
/* QMB rows of x per pass; a decode row asks for its bytes Q8_AHEAD ahead
 * (rows of K bytes run back to back: the thread's one stream, but a 768-byte
 * row is too short for the hardware prefetcher to get ahead on its own). */
enum { QMB = 4, Q8_AHEAD = 4096 };
/* Into L2 (RT_PF_L2), these streams' decode went 1.25-1.40 -> 1.19-1.21 of
 * its bytes at 8 bits and 1.88-2.04 -> 1.62-1.96 at 4 (paired runs, one
 * thread); the palettized and sparse ones stayed within noise. */

/* q[k] of a row: a byte, or (q4) a nibble of byte k/2, low nibble first */
static inline float q_at(const uint8_t *q, int64_t k, int sgn, int q4) {
    if (q4) {
        int u = q[k >> 1] >> (4 * (k & 1)) & 15;
        return (float)(sgn ? (u ^ 8) - 8 : u);
    }
    return sgn ? (float)(int8_t)q[k] : (float)q[k];
}

/* dot[m] = Σ_{k in [k0, k1)} x[m·ldx + k]·q[k], m < mr (k0 even for q4).
 * Called with mr, sgn and q4 constant (q8_dot), so the accumulators stay in
 * registers: indexed by a run-time mr, GCC kept them in memory (the decode
 * GEMV ran at 2.9x its bytes' streaming time).  One row of x (decode) gets
 * four accumulators, as a chain of dependent FMAs is slower than the bytes
 * arrive. */
static inline __attribute__((always_inline)) void q8_dot_n(const uint8_t *q, const int sgn, const int q4,
                                                           const float *x, int64_t ldx, const int mr, int64_t k0,
                                                           int64_t k1, float *dot) {
    int64_t k = k0;
    for (int m = 0; m < mr; m++) dot[m] = 0.0f;
#ifdef RT_VL
    enum { NA = 4 };
    const int na = mr == 1 ? NA : 1;
    RtV a[QMB][NA];
    for (int m = 0; m < mr; m++)
        for (int t = 0; t < na; t++) a[m][t] = v_zero();
    for (; k + na * RT_VL <= k1; k += na * RT_VL) {
        if (mr == 1) RT_PF_L2(q + (q4 ? k / 2 : k) + Q8_AHEAD);
        for (int t = 0; t < na; t++) {
            int64_t j = k + t * RT_VL;
            RtV w = q4 ? v_load_q4(q + j / 2, sgn) : v_load_q8(q + j, sgn);
            for (int m = 0; m < mr; m++) a[m][t] = v_fma(w, v_load(x + m * ldx + j), a[m][t]);
        }
    }
    for (; k + RT_VL <= k1; k += RT_VL) {
        RtV w = q4 ? v_load_q4(q + k / 2, sgn) : v_load_q8(q + k, sgn);
        for (int m = 0; m < mr; m++) a[m][0] = v_fma(w, v_load(x + m * ldx + k), a[m][0]);
    }
    for (int m = 0; m < mr; m++) {
        RtV v = a[m][0];
        for (int t = 1; t < na; t++) v = v_add(v, a[m][t]);
        dot[m] = v_sum(v);
    }
#endif
    for (; k < k1; k++) {
        float w = q_at(q, k, sgn, q4);
        for (int m = 0; m < mr; m++) dot[m] += x[m * ldx + k] * w;
    }
}

/* A run-time row count (1..4) as the compile-time MR of an always-inline
 * kernel: CALL(args..., MR). */
#define MR_CASES(mr, CALL, ...)                                                                                        \
    switch (mr) {                                                                                                      \
    case 1: CALL(__VA_ARGS__, 1); break;                                                                               \
    case 2: CALL(__VA_ARGS__, 2); break;                                                                               \
    case 3: CALL(__VA_ARGS__, 3); break;                                                                               \
    default: CALL(__VA_ARGS__, 4); break;                                                                              \
    }

static void q8_dot(const uint8_t *q, int flags, const float *x, int64_t ldx, int mr, int64_t k0, int64_t k1,
                   float *dot) {
#define Q8_DOT(SGN, Q4, MR) q8_dot_n(q, SGN, Q4, x, ldx, MR, k0, k1, dot)
    switch (flags) {
    case RT_QG_SIGNED | RT_QG_INT4: MR_CASES(mr, Q8_DOT, 1, 1) break;
    case RT_QG_INT4: MR_CASES(mr, Q8_DOT, 0, 1) break;
    case RT_QG_SIGNED: MR_CASES(mr, Q8_DOT, 1, 0) break;
    default: MR_CASES(mr, Q8_DOT, 0, 0) break;
    }
#undef Q8_DOT
}

#ifdef RT_VL
/* Blocks shorter than QSHORT vectors (4-bit LLM weights come in blocks of
 * 32): out[m] = Σ_b sc[b]·(Σ_{k in b} x·q) − Σ_b sc[b]·of[b]·Σ_{k in b} x,
 * each block's sums kept as vectors and scaled there, so a block costs no
 * horizontal sum (q8_dot per block: 13x the streaming time of the bytes).
 * kb a multiple of RT_VL; sc, of and xsum at the row's first block. */
enum { QSHORT = 8 };
static inline __attribute__((always_inline)) void qrow_short_n(const uint8_t *q, const int sgn, const int q4,
                                                               const float *x, int64_t ldx, const int mr, int64_t bk,
                                                               int64_t kb, const float *sc, const float *of,
                                                               const float *xsum, float *out) {
    RtV acc[QMB];
    float off[QMB];
    for (int m = 0; m < mr; m++) acc[m] = v_zero(), off[m] = 0.0f;
    /* the row's scales and offsets are streams of their own, asked for as far ahead as its bytes */
    int64_t ahead = Q8_AHEAD / (q4 ? kb / 2 : kb);
    for (int64_t b = 0; b < bk; b += 16) RT_PF_L2(sc + ahead + b), RT_PF_L2(of + ahead + b);
    for (int64_t b = 0, k = 0; b < bk; b++) {
        if (mr == 1) RT_PF_L2(q + (q4 ? k / 2 : k) + Q8_AHEAD);
        RtV d[QMB];
        for (int m = 0; m < mr; m++) d[m] = v_zero();
        for (int64_t e = k + kb; k < e; k += RT_VL) {
            RtV w = q4 ? v_load_q4(q + k / 2, sgn) : v_load_q8(q + k, sgn);
            for (int m = 0; m < mr; m++) d[m] = v_fma(w, v_load(x + m * ldx + k), d[m]);
        }
        RtV s = v_set1(sc[b]);
        for (int m = 0; m < mr; m++) acc[m] = v_fma(s, d[m], acc[m]), off[m] += sc[b] * of[b] * xsum[m * bk + b];
    }
    for (int m = 0; m < mr; m++) out[m] = v_sum(acc[m]) - off[m];
}

static void qrow_short(const uint8_t *q, int flags, const float *x, int64_t ldx, int mr, int64_t bk, int64_t kb,
                       const float *sc, const float *of, const float *xsum, float *out) {
#define QROW_SHORT(SGN, Q4, MR) qrow_short_n(q, SGN, Q4, x, ldx, MR, bk, kb, sc, of, xsum, out)
    switch (flags) {
    case RT_QG_SIGNED | RT_QG_INT4: MR_CASES(mr, QROW_SHORT, 1, 1) break;
    case RT_QG_INT4: MR_CASES(mr, QROW_SHORT, 0, 1) break;
    case RT_QG_SIGNED: MR_CASES(mr, QROW_SHORT, 1, 0) break;
    default: MR_CASES(mr, QROW_SHORT, 0, 0) break;
    }
#undef QROW_SHORT
}
#endif

#ifdef RT_AVX512
/* 4-bit blocks of a multiple of 32 on AVX-512: 16 bytes widened to 16
 * lanes give 32 weights, the low nibbles (even k) and the high ones (odd k)
 * each turned into floats by one vpermps from a 16-entry table (it reads an
 * index's low four bits only: no masking).  x comes de-interleaved the same
 * way (xp: every 32 of a row as its 16 even then its 16 odd elements), so a
 * block of 32 is a load, a widening, a shift, two lookups and two FMAs
 * (qrow_short's unpacking: 2.0-2.3x the bytes' streaming time). */
static inline __attribute__((always_inline)) void qrow_q4tab_n(const uint8_t *q, const int sgn, const float *xp,
                                                               int64_t ldx, const int mr, int64_t bk, int64_t kb,
                                                               const float *sc, const float *of, const float *xsum,
                                                               float *out) {
    const __m512 tab = sgn ? _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1)
                           : _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 acc[QMB];
    for (int m = 0; m < mr; m++) acc[m] = _mm512_setzero_ps();
    int64_t ahead = Q8_AHEAD / (kb / 2);
    for (int64_t b = 0; b < bk; b += 16) RT_PF_L2(sc + ahead + b), RT_PF_L2(of + ahead + b);
    for (int64_t b = 0, k = 0; b < bk; b++) {
        if (mr == 1) RT_PF_L2(q + k / 2 + Q8_AHEAD);
        __m512 d[QMB], h[QMB]; /* even and odd k apart: a long block is two chains, not one */
        for (int m = 0; m < mr; m++) d[m] = h[m] = _mm512_setzero_ps();
        for (int64_t e = k + kb; k < e; k += 32) {
            __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(q + k / 2)));
            __m512 lo = _mm512_permutexvar_ps(v, tab), hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), tab);
            for (int m = 0; m < mr; m++) {
                d[m] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xp + m * ldx + k), d[m]);
                h[m] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xp + m * ldx + k + 16), h[m]);
            }
        }
        __m512 s = _mm512_set1_ps(sc[b]);
        for (int m = 0; m < mr; m++) acc[m] = _mm512_fmadd_ps(s, _mm512_add_ps(d[m], h[m]), acc[m]);
    }
    /* the offsets' share, Σ_b sc[b]·of[b]·Σx of block b, as vectors */
    for (int m = 0; m < mr; m++) {
        __m512 o = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 16 <= bk; b += 16)
            o = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(sc + b), _mm512_loadu_ps(of + b)),
                                _mm512_loadu_ps(xsum + m * bk + b), o);
        float t = _mm512_reduce_add_ps(o);
        for (; b < bk; b++) t += sc[b] * of[b] * xsum[m * bk + b];
        out[m] = _mm512_reduce_add_ps(acc[m]) - t;
    }
}

static void qrow_q4tab(const uint8_t *q, int sgn, const float *xp, int64_t ldx, int mr, int64_t bk, int64_t kb,
                       const float *sc, const float *of, const float *xsum, float *out) {
#define QROW_Q4TAB(SGN, MR) qrow_q4tab_n(q, SGN, xp, ldx, MR, bk, kb, sc, of, xsum, out)
    if (sgn)
        MR_CASES(mr, QROW_Q4TAB, 1)
    else
        MR_CASES(mr, QROW_Q4TAB, 0)
#undef QROW_Q4TAB
}

/* xp: every 32 elements of x's rows as their 16 even then their 16 odd ones */
static void q4_deinterleave(const float *x, int64_t n, float *xp) {
    const __m512i ev = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                  od = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t i = 0; i < n; i += 32) {
        __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        _mm512_storeu_ps(xp + i, _mm512_permutex2var_ps(a, ev, b));
        _mm512_storeu_ps(xp + i + 16, _mm512_permutex2var_ps(a, od, b));
    }
}
#endif

/* xp: x de-interleaved for qrow_q4tab (AVX-512, 4-bit blocks of 32s), or NULL */
static void qgemm_rows(const RtQGemmParams *p, const float *x, const float *xp, const uint8_t *q, const float *sc,
                       const float *of, const float *bias, const float *xsum, int64_t M, int64_t K, int64_t N,
                       int64_t n0, int64_t n1, float *y) {
    int64_t rn = N / p->bn, kb = K / p->bk, row = p->flags & RT_QG_INT4 ? K / 2 : K;
    for (int64_t m0 = 0; m0 < M; m0 += QMB) {
        int mr = M - m0 < QMB ? (int)(M - m0) : QMB;
        for (int64_t n = n0; n < n1; n++) {
            float acc[QMB] = {0}, dot[QMB];
#ifdef RT_AVX512
            if (xp) {
                int64_t b0 = (n / rn) * p->bk;
                qrow_q4tab(q + n * row, p->flags & RT_QG_SIGNED, xp + m0 * K, K, mr, p->bk, kb, sc + b0, of + b0,
                           xsum + m0 * p->bk, acc);
                for (int m = 0; m < mr; m++) y[(m0 + m) * N + n] = acc[m] + (bias ? bias[n] : 0.0f);
                continue;
            }
#endif
#ifdef RT_VL
            if (p->bk > 1 && kb % RT_VL == 0 && kb < QSHORT * RT_VL) {
                int64_t b0 = (n / rn) * p->bk;
                qrow_short(q + n * row, p->flags, x + m0 * K, K, mr, p->bk, kb, sc + b0, of + b0, xsum + m0 * p->bk,
                           acc);
                for (int m = 0; m < mr; m++) y[(m0 + m) * N + n] = acc[m] + (bias ? bias[n] : 0.0f);
                continue;
            }
#endif
            for (int64_t b = 0; b < p->bk; b++) {
                int64_t blk = (n / rn) * p->bk + b;
                q8_dot(q + n * row, p->flags, x + m0 * K, K, mr, b * kb, (b + 1) * kb, dot);
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
    const float *xp = NULL;
#ifdef RT_AVX512
    if ((p->flags & RT_QG_INT4) && kb % 32 == 0) { /* scratch: rt_s_qgemm */
        float *d = xsum + M * p->bk;
        q4_deinterleave(x, M * K, d);
        xp = d;
    }
#endif
    qgemm_rows(p, x, xp, IN(1), sc, of, bias, xsum, M, K, N, n0, n1, OUT(0));
}

/* ---- the sparse linear layer (RT_OP_SPGEMM) ----
 * The weight stays a bit mask and its nonzero values: decode reads the mask
 * (an eighth of a byte a weight) and the values, nothing for a zero.  On
 * AVX-512 each 16 bits of a row's mask expand the next popcount values into
 * their lanes (vexpandps); elsewhere the set bits are walked one by one. */
enum { SP_AHEAD = 4096 }; /* bytes of values ahead (the mask: a quarter of that) */
#ifdef RT_VARIANT_AVX2
/* AVX2 has no vexpandps: for each mask byte b, lane j's value is the
 * popcount(b & (2^j - 1))-th of the byte's values, its index in nibble j of
 * SP_PERM[b] (a vpermps index; lanes whose bit is clear are zeroed apart). */
static const uint32_t SP_PERM[256] = {
    0x00000000, 0x00000000, 0x00000000, 0x00000010, 0x00000000, 0x00000100, 0x00000100, 0x00000210,
    0x00000000, 0x00001000, 0x00001000, 0x00002010, 0x00001000, 0x00002100, 0x00002100, 0x00003210,
    0x00000000, 0x00010000, 0x00010000, 0x00020010, 0x00010000, 0x00020100, 0x00020100, 0x00030210,
    0x00010000, 0x00021000, 0x00021000, 0x00032010, 0x00021000, 0x00032100, 0x00032100, 0x00043210,
    0x00000000, 0x00100000, 0x00100000, 0x00200010, 0x00100000, 0x00200100, 0x00200100, 0x00300210,
    0x00100000, 0x00201000, 0x00201000, 0x00302010, 0x00201000, 0x00302100, 0x00302100, 0x00403210,
    0x00100000, 0x00210000, 0x00210000, 0x00320010, 0x00210000, 0x00320100, 0x00320100, 0x00430210,
    0x00210000, 0x00321000, 0x00321000, 0x00432010, 0x00321000, 0x00432100, 0x00432100, 0x00543210,
    0x00000000, 0x01000000, 0x01000000, 0x02000010, 0x01000000, 0x02000100, 0x02000100, 0x03000210,
    0x01000000, 0x02001000, 0x02001000, 0x03002010, 0x02001000, 0x03002100, 0x03002100, 0x04003210,
    0x01000000, 0x02010000, 0x02010000, 0x03020010, 0x02010000, 0x03020100, 0x03020100, 0x04030210,
    0x02010000, 0x03021000, 0x03021000, 0x04032010, 0x03021000, 0x04032100, 0x04032100, 0x05043210,
    0x01000000, 0x02100000, 0x02100000, 0x03200010, 0x02100000, 0x03200100, 0x03200100, 0x04300210,
    0x02100000, 0x03201000, 0x03201000, 0x04302010, 0x03201000, 0x04302100, 0x04302100, 0x05403210,
    0x02100000, 0x03210000, 0x03210000, 0x04320010, 0x03210000, 0x04320100, 0x04320100, 0x05430210,
    0x03210000, 0x04321000, 0x04321000, 0x05432010, 0x04321000, 0x05432100, 0x05432100, 0x06543210,
    0x00000000, 0x10000000, 0x10000000, 0x20000010, 0x10000000, 0x20000100, 0x20000100, 0x30000210,
    0x10000000, 0x20001000, 0x20001000, 0x30002010, 0x20001000, 0x30002100, 0x30002100, 0x40003210,
    0x10000000, 0x20010000, 0x20010000, 0x30020010, 0x20010000, 0x30020100, 0x30020100, 0x40030210,
    0x20010000, 0x30021000, 0x30021000, 0x40032010, 0x30021000, 0x40032100, 0x40032100, 0x50043210,
    0x10000000, 0x20100000, 0x20100000, 0x30200010, 0x20100000, 0x30200100, 0x30200100, 0x40300210,
    0x20100000, 0x30201000, 0x30201000, 0x40302010, 0x30201000, 0x40302100, 0x40302100, 0x50403210,
    0x20100000, 0x30210000, 0x30210000, 0x40320010, 0x30210000, 0x40320100, 0x40320100, 0x50430210,
    0x30210000, 0x40321000, 0x40321000, 0x50432010, 0x40321000, 0x50432100, 0x50432100, 0x60543210,
    0x10000000, 0x21000000, 0x21000000, 0x32000010, 0x21000000, 0x32000100, 0x32000100, 0x43000210,
    0x21000000, 0x32001000, 0x32001000, 0x43002010, 0x32001000, 0x43002100, 0x43002100, 0x54003210,
    0x21000000, 0x32010000, 0x32010000, 0x43020010, 0x32010000, 0x43020100, 0x43020100, 0x54030210,
    0x32010000, 0x43021000, 0x43021000, 0x54032010, 0x43021000, 0x54032100, 0x54032100, 0x65043210,
    0x21000000, 0x32100000, 0x32100000, 0x43200010, 0x32100000, 0x43200100, 0x43200100, 0x54300210,
    0x32100000, 0x43201000, 0x43201000, 0x54302010, 0x43201000, 0x54302100, 0x54302100, 0x65403210,
    0x32100000, 0x43210000, 0x43210000, 0x54320010, 0x43210000, 0x54320100, 0x54320100, 0x65430210,
    0x43210000, 0x54321000, 0x54321000, 0x65432010, 0x54321000, 0x65432100, 0x65432100, 0x76543210,
};
#endif
/* The values and the mask are two streams: asked for ahead, a line at a
 * time (every 64 columns). */
static inline __attribute__((always_inline)) void sp_ahead(const uint8_t *mk, const void *vals, int f16, int64_t idx, int64_t k) {
    if (k & 63) return;
    RT_PF_L2((const char *)vals + (idx << (f16 ? 1 : 2)) + SP_AHEAD);
    RT_PF_L2(mk + k / 8 + SP_AHEAD / 4);
}

static inline __attribute__((always_inline)) void sp_row_n(const uint8_t *mk, const void *vals, const int f16,
                                                           int64_t idx, int64_t nv, const float *x, int64_t K,
                                                           const int mr, float *out) {
    for (int m = 0; m < mr; m++) out[m] = 0.0f;
    if (idx < 0 || idx > nv) return; /* a start no builder writes: the row counts as zero */
    int64_t k = 0;
#ifdef RT_AVX512
    __m512 acc[QMB];
    for (int m = 0; m < mr; m++) acc[m] = _mm512_setzero_ps();
    for (; k + 16 <= K; k += 16) {
        unsigned m16 = (unsigned)mk[k / 8] | (unsigned)mk[k / 8 + 1] << 8;
        if (!m16) continue;
        if (idx + 16 > nv) break; /* past the padding: only a damaged start or mask; the tail bounds it */
        sp_ahead(mk, vals, f16, idx, k);
        /* a load, then the expand in registers: the expand from memory stalled
         * every chunk on this Xeon (the GEMV at 2.95x its bytes' time) */
        __m512 v = f16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)vals + idx)))
                       : _mm512_loadu_ps((const float *)vals + idx);
        __m512 w = _mm512_maskz_expand_ps((__mmask16)m16, v);
        idx += __builtin_popcount(m16);
        for (int m = 0; m < mr; m++) acc[m] = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + m * K + k), acc[m]);
    }
    for (int m = 0; m < mr; m++) out[m] = _mm512_reduce_add_ps(acc[m]);
#elif defined(RT_VARIANT_AVX2)
    __m256 acc[QMB];
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28),
                  bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    for (int m = 0; m < mr; m++) acc[m] = _mm256_setzero_ps();
    for (; k + 8 <= K; k += 8) {
        unsigned b = mk[k / 8];
        if (!b) continue;
        if (idx + 8 > nv) break; /* as above */
        sp_ahead(mk, vals, f16, idx, k);
        __m256 v = f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)vals + idx)))
                       : _mm256_loadu_ps((const float *)vals + idx);
        __m256i set = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b), bits), bits);
        __m256 w = _mm256_and_ps(_mm256_permutevar8x32_ps(v, _mm256_srlv_epi32(_mm256_set1_epi32((int)SP_PERM[b]), shifts)),
                                 _mm256_castsi256_ps(set));
        idx += __builtin_popcount(b);
        for (int m = 0; m < mr; m++) acc[m] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x + m * K + k), acc[m]);
    }
    for (int m = 0; m < mr; m++) out[m] = v_sum(acc[m]);
#endif
    /* one weight at a time, without a branch on the bit (a random mask
     * mispredicts half of them): a clear bit adds zero and moves nothing */
    for (; k < K && idx < nv; k++) {
        int bit = mk[k >> 3] >> (k & 7) & 1;
        float w = f16 ? half_to_float(((const uint16_t *)vals)[idx]) : ((const float *)vals)[idx];
        w = bit ? w : 0.0f;
        idx += bit;
        for (int m = 0; m < mr; m++) out[m] += w * x[m * K + k];
    }
}

static void sp_row(const uint8_t *mk, const void *vals, int f16, int64_t idx, int64_t nv, const float *x, int64_t K,
                   int mr, float *out) {
#define SP_ROW(F16, MR) sp_row_n(mk, vals, F16, idx, nv, x, K, MR, out)
    if (f16)
        MR_CASES(mr, SP_ROW, 1)
    else
        MR_CASES(mr, SP_ROW, 0)
#undef SP_ROW
}

static void rt_k_spgemm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0), *vb = BUF_IN(2);
    int64_t K = xb->dims[xb->rank - 1], N = yb->dims[yb->rank - 1], M = xb->numel / K, rb = (K + 7) / 8, n0, n1;
    const float *x = IN(0), *bias = op->p.sp.has_bias ? IN(4) : NULL;
    const uint8_t *mask = IN(1);
    const int32_t *start = IN(3);
    float *y = OUT(0);
    split(N, ith, nth, &n0, &n1);
    for (int64_t m0 = 0; m0 < M; m0 += QMB) {
        int mr = M - m0 < QMB ? (int)(M - m0) : QMB;
        for (int64_t n = n0; n < n1; n++) {
            float out[QMB];
            sp_row(mask + n * rb, IN(2), vb->dtype == RT_F16, start[n], vb->numel, x + m0 * K, K, mr, out);
            for (int m = 0; m < mr; m++) y[(m0 + m) * N + n] = out[m] + (bias ? bias[n] : 0.0f);
        }
    }
}
