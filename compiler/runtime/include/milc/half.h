/* half.h — IEEE fp16 <-> fp32 conversion, round-to-nearest-even, with
 * subnormals, infinities and NaNs right.  Header-only so the compiler and the
 * runtime share it without a link dependency.  Uses F16C when the build
 * enables it (-march with f16c); otherwise a bit-exact portable version.
 * NaNs come out quiet with their sign and top payload bits, as F16C does. */
#ifndef MILC_HALF_H
#define MILC_HALF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__F16C__) && !defined(MILC_HALF_PORTABLE)
#include <immintrin.h>
#define MILC_HALF_F16C 1
#else
#define MILC_HALF_F16C 0
#endif

static inline uint32_t half_f32_bits_(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float half_bits_f32_(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* fp16 bits -> fp32 (exact: every half is a float). */
static inline float half_to_float(uint16_t h) {
#if MILC_HALF_F16C
    return _cvtsh_ss(h);
#else
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0x1f) /* Inf stays Inf; a NaN is made quiet */
        return half_bits_f32_(sign | 0x7f800000u | (mant ? 0x400000u | mant << 13 : 0));
    if (exp == 0) /* zero or subnormal: mant * 2^-24 is exact in fp32 */
        return half_bits_f32_(sign | half_f32_bits_((float)mant * 0x1p-24f));
    return half_bits_f32_(sign | (exp + 112) << 23 | mant << 13);
#endif
}

/* fp32 -> fp16 bits, round to nearest, ties to even. */
static inline uint16_t float_to_half(float f) {
#if MILC_HALF_F16C
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
    uint32_t x = half_f32_bits_(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* Inf, or NaN made quiet keeping the top payload bits */
        return sign | (x > 0x7f800000u ? (uint16_t)(0x7e00u | (x >> 13 & 0x3ffu)) : 0x7c00u);
    if (x >= 0x477ff000u) /* >= 65520 rounds past the largest half, 65504 */
        return sign | 0x7c00u;
    if (x < 0x38800000u) {
        /* Below the smallest normal half, 2^-14.  Adding 0.5 puts the value's
         * half-subnormal bits at the bottom of a float's mantissa, and the
         * FPU's own round-to-nearest-even does the rounding. */
        float t = half_bits_f32_(x) + 0.5f;
        return sign | (uint16_t)(half_f32_bits_(t) - 0x3f000000u);
    }
    /* Normal: rebias the exponent and round away the low 13 mantissa bits;
     * adding 0xfff plus the kept lsb rounds ties to even, and a carry into
     * the exponent is the right answer (up to Inf). */
    uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd; /* (15 - 127) << 23, mod 2^32 */
    return sign | (uint16_t)(x >> 13);
#endif
}

/* n halves -> floats.  src and dst must not overlap. */
static inline void half_to_float_n(const uint16_t *src, float *dst, size_t n) {
#if MILC_HALF_F16C && defined(__AVX__)
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    if (i < n) { /* the tail through one padded vector */
        uint16_t t[8] = {0};
        float o[8];
        memcpy(t, src + i, (n - i) * sizeof *t);
        _mm256_storeu_ps(o, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t)));
        memcpy(dst + i, o, (n - i) * sizeof *o);
    }
#else
    for (size_t i = 0; i < n; i++) dst[i] = half_to_float(src[i]);
#endif
}

/* n floats -> halves, round to nearest even.  src and dst must not overlap. */
static inline void float_to_half_n(const float *src, uint16_t *dst, size_t n) {
#if MILC_HALF_F16C && defined(__AVX__)
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    if (i < n) {
        float t[8] = {0};
        uint16_t o[8];
        memcpy(t, src + i, (n - i) * sizeof *t);
        _mm_storeu_si128((__m128i *)o, _mm256_cvtps_ph(_mm256_loadu_ps(t), _MM_FROUND_TO_NEAREST_INT));
        memcpy(dst + i, o, (n - i) * sizeof *o);
    }
#else
    for (size_t i = 0; i < n; i++) dst[i] = float_to_half(src[i]);
#endif
}

#endif
