/* rt_math.h — private: the transcendental functions the kernels apply to whole
 * rows (exp, tanh, erf, the GELU and SiLU activations).  AVX-512 versions run
 * 16 lanes at a time with a few ulp of error; the scalar versions use libm
 * and are what a build without AVX-512 gets. */
#ifndef MILC_RT_MATH_H
#define MILC_RT_MATH_H

#include <math.h>
#include <stdint.h>

#include "milc/plan.h"

#ifdef __AVX512F__
#include <immintrin.h>
#define RT_AVX512 1

/* e^x: x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial, 2^n by
 * exponent arithmetic.  Saturates to 0 / +inf outside [-87.3, 88.7]. */
static inline __m512 rt_exp16(__m512 x) {
    const __m512 hi = _mm512_set1_ps(88.72f), lo = _mm512_set1_ps(-87.33f);
    __m512 xc = _mm512_max_ps(_mm512_min_ps(x, hi), lo);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145752f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860677e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    __m512 res = _mm512_scalef_ps(p, n);
    /* below the clamp the true value underflows to (nearly) 0 */
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), res, _mm512_setzero_ps());
}

/* tanh(x) = 1 - 2 / (e^{2x} + 1): no cancellation problem at the scale we need. */
static inline __m512 rt_tanh16(__m512 x) {
    __m512 e = rt_exp16(_mm512_add_ps(x, x));
    return _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
}

static inline __m512 rt_sigmoid16(__m512 x) {
    __m512 e = rt_exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
}

/* erf by Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7). */
static inline __m512 rt_erf16(__m512 x) {
    __m512 ax = _mm512_abs_ps(x);
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(ax, _mm512_set1_ps(0.3275911f), _mm512_set1_ps(1.0f)));
    __m512 p = _mm512_set1_ps(1.061405429f);
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-1.453152027f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
    p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
    p = _mm512_mul_ps(p, t);
    __m512 e = rt_exp16(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ax), ax));
    __m512 y = _mm512_fnmadd_ps(p, e, _mm512_set1_ps(1.0f));
    /* copy x's sign onto y */
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y),
                                               _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u))));
}

static inline __m512 rt_act16(__m512 x, int act) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    switch (act) {
    case RT_ACT_RELU: return _mm512_max_ps(x, _mm512_setzero_ps());
    case RT_ACT_GELU_EXACT:
        return _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, rt_erf16(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678f)))));
    case RT_ACT_GELU_TANH: {
        __m512 x3 = _mm512_mul_ps(_mm512_mul_ps(x, x), x);
        __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608f), _mm512_fmadd_ps(x3, _mm512_set1_ps(0.044715f), x));
        return _mm512_mul_ps(_mm512_mul_ps(half, x), _mm512_add_ps(one, rt_tanh16(u)));
    }
    case RT_ACT_GELU_SIGMOID: return _mm512_mul_ps(x, rt_sigmoid16(_mm512_mul_ps(x, _mm512_set1_ps(1.702f))));
    case RT_ACT_SILU: return _mm512_mul_ps(x, rt_sigmoid16(x));
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
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, rt_act16(_mm512_loadu_ps(y + i), act));
    if (i < n) {
        __mmask16 k = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, k, rt_act16(_mm512_maskz_loadu_ps(k, y + i), act));
    }
    return;
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
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

/* y[i] = exp(x[i] - m); returns the sum of the y[i]. */
static inline float rt_exp_row(const float *x, float *y, int64_t n, float m) {
    int64_t i = 0;
    float s = 0;
#ifdef RT_AVX512
    __m512 vs = _mm512_setzero_ps(), vm = _mm512_set1_ps(m);
    for (; i + 16 <= n; i += 16) {
        __m512 e = rt_exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        _mm512_storeu_ps(y + i, e);
        vs = _mm512_add_ps(vs, e);
    }
    s = _mm512_reduce_add_ps(vs);
#endif
    for (; i < n; i++) s += (y[i] = expf(x[i] - m));
    return s;
}

#endif
