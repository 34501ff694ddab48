/* rt_math.h — private: the transcendental functions the kernels apply to whole
 * rows (exp, tanh, erf, the GELU and SiLU activations).  Each kernel variant
 * (kernels_variant.c) sees the instruction set of its own flags: AVX-512 runs
 * 16 lanes, AVX2 8 and NEON 4 through one vector layer (RtV), each function
 * written once over it, with a few ulp of error; the scalar variant uses libm. */
#ifndef MILC_RT_MATH_H
#define MILC_RT_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "milc/plan.h"

#if !defined(RT_VARIANT_SCALAR) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define RT_AVX512 1
#endif

/* ---- one vector type RtV of RT_VL lanes: AVX-512 16, AVX2 8, NEON 4 ----
 * The functions below it are written once over it.  (The GEMM's AVX-512
 * tile uses its own intrinsics: masks and 24 accumulators; its AVX2 / NEON
 * groups use this layer.) */
#if defined(RT_VARIANT_SCALAR)
/* plain C: no vector layer */
#elif defined(RT_AVX512)
#define RT_VL 16
typedef __m512 RtV;
static inline RtV v_set1(float x) { return _mm512_set1_ps(x); }
static inline RtV v_zero(void) { return _mm512_setzero_ps(); }
static inline RtV v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, RtV v) { _mm512_storeu_ps(p, v); }
static inline RtV v_load_h(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
/* RT_VL bytes widened to floats, as int8 (sgn) or uint8 */
static inline RtV v_load_q8(const uint8_t *p, int sgn) {
    __m128i b = _mm_loadu_si128((const __m128i *)p);
    return _mm512_cvtepi32_ps(sgn ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b));
}
/* RT_VL nibbles (RT_VL/2 bytes, low nibble first) widened to floats, as int4
 * (sgn) or uint4: each byte's two nibbles spread to two bytes, then as q8 */
static inline RtV v_load_q4(const uint8_t *p, int sgn) {
    __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)p));
    __m128i b = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(0x0F)), _mm_and_si128(_mm_slli_epi16(w, 4), _mm_set1_epi16(0x0F00)));
    __m512i v = _mm512_cvtepu8_epi32(b);
    if (sgn) v = _mm512_sub_epi32(_mm512_xor_si512(v, _mm512_set1_epi32(8)), _mm512_set1_epi32(8));
    return _mm512_cvtepi32_ps(v);
}
static inline RtV v_add(RtV a, RtV b) { return _mm512_add_ps(a, b); }
static inline RtV v_sub(RtV a, RtV b) { return _mm512_sub_ps(a, b); }
static inline RtV v_mul(RtV a, RtV b) { return _mm512_mul_ps(a, b); }
static inline RtV v_div(RtV a, RtV b) { return _mm512_div_ps(a, b); }
static inline RtV v_min(RtV a, RtV b) { return _mm512_min_ps(a, b); }
static inline RtV v_max(RtV a, RtV b) { return _mm512_max_ps(a, b); }
static inline RtV v_fma(RtV a, RtV b, RtV c) { return _mm512_fmadd_ps(a, b, c); }
static inline RtV v_fnma(RtV a, RtV b, RtV c) { return _mm512_fnmadd_ps(a, b, c); }
static inline RtV v_abs(RtV a) { return _mm512_abs_ps(a); }
static inline RtV v_round(RtV a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* p·2^n for integral n in [-126, 128] */
static inline RtV v_ldexp(RtV p, RtV n) { return _mm512_scalef_ps(p, n); }
static inline RtV v_sel_lt(RtV a, RtV b, RtV x, RtV y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), x, y);
}
static inline RtV v_copysign(RtV mag, RtV sgn) {
    const __m512i m = _mm512_set1_epi32((int)0x80000000u);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_andnot_si512(m, _mm512_castps_si512(mag)),
                                               _mm512_and_si512(m, _mm512_castps_si512(sgn))));
}
static inline float v_sum(RtV v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define RT_VL 8
typedef __m256 RtV;
typedef __m256i RtVi;
static inline RtV v_set1(float x) { return _mm256_set1_ps(x); }
static inline RtV v_zero(void) { return _mm256_setzero_ps(); }
static inline RtV v_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, RtV v) { _mm256_storeu_ps(p, v); }
/* RT_VL halves widened to floats */
static inline RtV v_load_h(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline RtV v_load_q8(const uint8_t *p, int sgn) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return _mm256_cvtepi32_ps(sgn ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b));
}
static inline RtV v_load_q4(const uint8_t *p, int sgn) {
    uint32_t u;
    memcpy(&u, p, 4);
    __m128i w = _mm_cvtepu8_epi16(_mm_cvtsi32_si128((int)u));
    __m128i b = _mm_or_si128(_mm_and_si128(w, _mm_set1_epi16(0x0F)), _mm_and_si128(_mm_slli_epi16(w, 4), _mm_set1_epi16(0x0F00)));
    __m256i v = _mm256_cvtepu8_epi32(b);
    if (sgn) v = _mm256_sub_epi32(_mm256_xor_si256(v, _mm256_set1_epi32(8)), _mm256_set1_epi32(8));
    return _mm256_cvtepi32_ps(v);
}
static inline RtV v_add(RtV a, RtV b) { return _mm256_add_ps(a, b); }
static inline RtV v_sub(RtV a, RtV b) { return _mm256_sub_ps(a, b); }
static inline RtV v_mul(RtV a, RtV b) { return _mm256_mul_ps(a, b); }
static inline RtV v_div(RtV a, RtV b) { return _mm256_div_ps(a, b); }
static inline RtV v_min(RtV a, RtV b) { return _mm256_min_ps(a, b); }
static inline RtV v_max(RtV a, RtV b) { return _mm256_max_ps(a, b); }
static inline RtV v_fma(RtV a, RtV b, RtV c) { return _mm256_fmadd_ps(a, b, c); }   /* a·b + c */
static inline RtV v_fnma(RtV a, RtV b, RtV c) { return _mm256_fnmadd_ps(a, b, c); } /* c − a·b */
static inline RtV v_abs(RtV a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline RtV v_round(RtV a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
/* 2^n for integral n in [-126, 127] */
static inline RtV v_pow2i(RtV n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}
/* lanes where a < b take y, the others x */
static inline RtV v_sel_lt(RtV a, RtV b, RtV x, RtV y) {
    return _mm256_blendv_ps(x, y, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
}
static inline RtV v_copysign(RtV mag, RtV sgn) {
    const RtV m = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(m, mag), _mm256_and_ps(m, sgn));
}
static inline float v_sum(RtV v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
#elif defined(__aarch64__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define RT_VL 4
typedef float32x4_t RtV;
static inline RtV v_set1(float x) { return vdupq_n_f32(x); }
static inline RtV v_zero(void) { return vdupq_n_f32(0.0f); }
static inline RtV v_load(const float *p) { return vld1q_f32(p); }
static inline void v_store(float *p, RtV v) { vst1q_f32(p, v); }
static inline RtV v_load_h(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline RtV v_load_q8(const uint8_t *p, int sgn) {
    uint32_t w;
    memcpy(&w, p, 4);
    uint8x8_t b = vcreate_u8(w);
    if (sgn) return vcvtq_f32_s32(vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u8(b)))));
    return vcvtq_f32_u32(vmovl_u16(vget_low_u16(vmovl_u8(b))));
}
static inline RtV v_load_q4(const uint8_t *p, int sgn) {
    uint16_t h;
    memcpy(&h, p, 2);
    uint8x8_t b = vcreate_u8(h);
    uint8x8_t z = vzip1_u8(vand_u8(b, vdup_n_u8(15)), vshr_n_u8(b, 4)); /* the nibbles in order */
    int32x4_t v = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(z))));
    if (sgn) v = vsubq_s32(veorq_s32(v, vdupq_n_s32(8)), vdupq_n_s32(8));
    return vcvtq_f32_s32(v);
}
static inline RtV v_add(RtV a, RtV b) { return vaddq_f32(a, b); }
static inline RtV v_sub(RtV a, RtV b) { return vsubq_f32(a, b); }
static inline RtV v_mul(RtV a, RtV b) { return vmulq_f32(a, b); }
static inline RtV v_div(RtV a, RtV b) { return vdivq_f32(a, b); }
static inline RtV v_min(RtV a, RtV b) { return vminq_f32(a, b); }
static inline RtV v_max(RtV a, RtV b) { return vmaxq_f32(a, b); }
static inline RtV v_fma(RtV a, RtV b, RtV c) { return vfmaq_f32(c, a, b); }
static inline RtV v_fnma(RtV a, RtV b, RtV c) { return vfmsq_f32(c, a, b); }
static inline RtV v_abs(RtV a) { return vabsq_f32(a); }
static inline RtV v_round(RtV a) { return vrndnq_f32(a); }
static inline RtV v_pow2i(RtV n) {
    return vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23));
}
static inline RtV v_sel_lt(RtV a, RtV b, RtV x, RtV y) { return vbslq_f32(vcltq_f32(a, b), y, x); }
static inline RtV v_copysign(RtV mag, RtV sgn) { return vbslq_f32(vdupq_n_u32(0x80000000u), sgn, mag); }
static inline float v_sum(RtV v) { return vaddvq_f32(v); }
#endif

#if defined(RT_VL) && !defined(RT_AVX512)
/* p·2^n for integral n in [-126, 128], in two halves: 2^n alone is out of
 * the exponent's range at both ends. */
static inline RtV v_ldexp(RtV p, RtV n) {
    RtV h = v_round(v_mul(n, v_set1(0.5f)));
    return v_mul(v_mul(p, v_pow2i(h)), v_pow2i(v_sub(n, h)));
}
#endif

#ifdef RT_VL
/* e^x: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n by
 * exponent arithmetic (a few ulp).  0 below -87.33 (where the true value is
 * (nearly) 0), +inf above 88.72. */
static inline RtV rt_expv(RtV x) {
    const RtV hi = v_set1(88.72f), lo = v_set1(-87.33f);
    RtV xc = v_max(v_min(x, hi), lo);
    RtV n = v_round(v_mul(xc, v_set1(1.44269504f)));
    RtV r = v_fnma(n, v_set1(0.693145752f), xc);
    r = v_fnma(n, v_set1(1.42860677e-6f), r);
    RtV p = v_set1(1.0f / 720);
    p = v_fma(p, r, v_set1(1.0f / 120));
    p = v_fma(p, r, v_set1(1.0f / 24));
    p = v_fma(p, r, v_set1(1.0f / 6));
    p = v_fma(p, r, v_set1(0.5f));
    p = v_fma(p, r, v_set1(1.0f));
    p = v_fma(p, r, v_set1(1.0f));
    RtV res = v_sel_lt(x, lo, v_ldexp(p, n), v_zero());
    return v_sel_lt(hi, x, res, v_set1(INFINITY));
}

/* tanh(x) = 1 - 2 / (e^{2x} + 1): no cancellation problem at the scale we need. */
static inline RtV rt_tanhv(RtV x) {
    RtV e = rt_expv(v_add(x, x));
    return v_sub(v_set1(1.0f), v_div(v_set1(2.0f), v_add(e, v_set1(1.0f))));
}

static inline RtV rt_sigmoidv(RtV x) {
    RtV e = rt_expv(v_sub(v_zero(), x));
    return v_div(v_set1(1.0f), v_add(e, v_set1(1.0f)));
}

/* erf by Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7). */
static inline RtV rt_erfv(RtV x) {
    RtV ax = v_abs(x);
    RtV t = v_div(v_set1(1.0f), v_fma(ax, v_set1(0.3275911f), v_set1(1.0f)));
    RtV p = v_set1(1.061405429f);
    p = v_fma(p, t, v_set1(-1.453152027f));
    p = v_fma(p, t, v_set1(1.421413741f));
    p = v_fma(p, t, v_set1(-0.284496736f));
    p = v_fma(p, t, v_set1(0.254829592f));
    p = v_mul(p, t);
    RtV e = rt_expv(v_mul(v_sub(v_zero(), ax), ax));
    return v_copysign(v_fnma(p, e, v_set1(1.0f)), x);
}

static inline RtV rt_actv(RtV x, int act) {
    const RtV half = v_set1(0.5f), one = v_set1(1.0f);
    switch (act) {
    case RT_ACT_RELU: return v_max(x, v_zero());
    case RT_ACT_GELU_EXACT: return v_mul(v_mul(half, x), v_add(one, rt_erfv(v_mul(x, v_set1(0.70710678f)))));
    case RT_ACT_GELU_TANH: {
        RtV x3 = v_mul(v_mul(x, x), x);
        RtV u = v_mul(v_set1(0.7978845608f), v_fma(x3, v_set1(0.044715f), x));
        return v_mul(v_mul(half, x), v_add(one, rt_tanhv(u)));
    }
    case RT_ACT_GELU_SIGMOID: return v_mul(x, rt_sigmoidv(v_mul(x, v_set1(1.702f))));
    case RT_ACT_SILU: return v_mul(x, rt_sigmoidv(x));
    }
    return x;
}
#endif

static inline float rt_act1(float x, int act) {
    switch (act) {
    case RT_ACT_RELU: return x > 0 ? x : 0;
    case RT_ACT_GELU_EXACT: return 0.5f * x * (1.0f + erff(x * 0.70710678f));
    case RT_ACT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
    case RT_ACT_GELU_SIGMOID: return x / (1.0f + expf(-1.702f * x));
    case RT_ACT_SILU: return x / (1.0f + expf(-x));
    }
    return x;
}

/* y[i] = act(y[i]) for n floats. */
static inline void rt_act_row(float *y, int64_t n, int act) {
    if (act == RT_ACT_NONE) return;
    int64_t i = 0;
#ifdef RT_AVX512
    for (; i + 16 <= n; i += 16) v_store(y + i, rt_actv(v_load(y + i), act));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, rt_actv(_mm512_maskz_loadu_ps(k, y + i), act));
    }
    return;
#elif defined(RT_VL)
    for (; i + RT_VL <= n; i += RT_VL) v_store(y + i, rt_actv(v_load(y + i), act));
#endif
    for (; i < n; i++) y[i] = rt_act1(y[i], act);
}

/* Σ a[i] b[i] over n floats. */
static inline float rt_dot(const float *a, const float *b, int64_t n) {
    int64_t i = 0;
    float s = 0;
#ifdef RT_AVX512
    __m512 v0 = _mm512_setzero_ps(), v1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        v0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), v0);
        v1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), v1);
    }
    for (; i < n; i += 16) {
        __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        v0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + i), _mm512_maskz_loadu_ps(k, b + i), v0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(v0, v1));
#elif defined(RT_VL)
    RtV v0 = v_zero(), v1 = v_zero();
    for (; i + 2 * RT_VL <= n; i += 2 * RT_VL) {
        v0 = v_fma(v_load(a + i), v_load(b + i), v0);
        v1 = v_fma(v_load(a + i + RT_VL), v_load(b + i + RT_VL), v1);
    }
    s = v_sum(v_add(v0, v1));
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[i] = exp(x[i] - m); returns the sum of the y[i]. */
static inline float rt_exp_row(const float *x, float *y, int64_t n, float m) {
    int64_t i = 0;
    float s = 0;
#ifdef RT_VL
    RtV vs = v_zero(), vm = v_set1(m);
    for (; i + RT_VL <= n; i += RT_VL) {
        RtV e = rt_expv(v_sub(v_load(x + i), vm));
        v_store(y + i, e);
        vs = v_add(vs, e);
    }
    s = v_sum(vs);
#endif
    for (; i < n; i++) s += (y[i] = expf(x[i] - m));
    return s;
}

#endif
