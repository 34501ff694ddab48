/* cpufeat.c — the instruction-set features milc was compiled for, as a key
 * field: an artifact compiled by a milc built for other features is another
 * entry (and `cache verify --stale` lists it). */
#include "milc/pipeline.h"

const char *pipeline_cpu_features(void) {
    return ""
#if defined(__x86_64__)
           "x86_64"
#elif defined(__aarch64__)
           "aarch64"
#else
           "other"
#endif
#ifdef __SSE4_2__
           " sse4.2"
#endif
#ifdef __AVX__
           " avx"
#endif
#ifdef __AVX2__
           " avx2"
#endif
#ifdef __FMA__
           " fma"
#endif
#ifdef __F16C__
           " f16c"
#endif
#ifdef __AVX512F__
           " avx512f"
#endif
#ifdef __AVX512BW__
           " avx512bw"
#endif
#ifdef __AVX512VL__
           " avx512vl"
#endif
#ifdef __AVX512FP16__
           " avx512fp16"
#endif
#ifdef __AVX512BF16__
           " avx512bf16"
#endif
#ifdef __ARM_NEON
           " neon"
#endif
#ifdef __ARM_FEATURE_FP16_VECTOR_ARITHMETIC
           " fp16"
#endif
           "";
}
