/* kernels_variant.c — one kernel variant: the kernels of kernels_gemm.c and
 * kernels_misc.c compiled with one instruction set's flags (CMake builds this
 * file once per variant, defining RT_KERNELS, the table's name, and
 * RT_KERNELS_CPU), collected into the table cpu.c picks from at load. */
#include "kernels_gemm.c"
#include "kernels_misc.c"
#include "kernels_eltwise.c"
#include "kernels_conv.c"
#include "kernels_lut.c"
#include "kernels_data.c"
#include "kernels_state.c"

/* rt_run's boundary conversions (half.h vectorises them where this
 * variant's flags carry F16C; NEON converts 4 at a time). */
static void rt_h2f(const uint16_t *src, float *dst, size_t n) {
#if defined(RT_VL) && !MILC_HALF_F16C
    size_t i = 0;
    for (; i + RT_VL <= n; i += RT_VL) v_store(dst + i, v_load_h(src + i));
    for (; i < n; i++) dst[i] = half_to_float(src[i]);
#else
    half_to_float_n(src, dst, n);
#endif
}
static void rt_f2h(const float *src, uint16_t *dst, size_t n) {
#if defined(RT_VARIANT_NEON)
    size_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++) dst[i] = float_to_half(src[i]);
#else
    float_to_half_n(src, dst, n);
#endif
}

/* Each variant must get the vector code it is named for, or it would run
 * another variant's instructions (or plain C) under its name. */
#if defined(RT_VARIANT_AVX512) && !defined(RT_AVX512)
#error "the avx512 variant needs -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c"
#elif defined(RT_VARIANT_AVX2) && (defined(RT_AVX512) || RT_VL != 8)
#error "the avx2 variant needs -mavx2 -mfma -mf16c and no AVX-512"
#elif defined(RT_VARIANT_NEON) && RT_VL != 4
#error "the neon variant needs an AArch64 target"
#elif defined(RT_VARIANT_SCALAR) && (defined(RT_AVX512) || defined(RT_VL))
#error "the scalar variant must not see vector code"
#endif

const RtKernels RT_KERNELS = {
    .cpu = RT_KERNELS_CPU,
    .kernel =
        {
            [RT_OP_GEMM] = rt_k_gemm,
            [RT_OP_MATMUL] = rt_k_matmul,
            [RT_OP_ATTENTION] = rt_k_attention,
            [RT_OP_NORM] = rt_k_norm,
            [RT_OP_SOFTMAX] = rt_k_softmax,
            [RT_OP_BINARY] = rt_k_binary,
            [RT_OP_UNARY] = rt_k_unary,
            [RT_OP_REDUCE] = rt_k_reduce,
            [RT_OP_COPY] = rt_k_copy,
            [RT_OP_GATHER] = rt_k_gather,
            [RT_OP_BAND_PART] = rt_k_band,
            [RT_OP_SELECT] = rt_k_select,
            [RT_OP_CAST] = rt_k_cast,
            [RT_OP_ELTWISE] = rt_k_eltwise,
            [RT_OP_BINOP] = rt_k_binop,
            [RT_OP_REDUCEX] = rt_k_reducex,
            [RT_OP_PAD_NHWC] = rt_k_pad_nhwc,
            [RT_OP_CONV_GEMM] = rt_k_conv_gemm,
            [RT_OP_CONV] = rt_k_conv,
            [RT_OP_POOL] = rt_k_pool,
            [RT_OP_LUT_GEMM] = rt_k_lut_gemm,
            [RT_OP_CUMSUM] = rt_k_cumsum,
            [RT_OP_GATHER_AXIS] = rt_k_gather_axis,
            [RT_OP_SCATTER] = rt_k_scatter,
            [RT_OP_SORT] = rt_k_sort,
            [RT_OP_RANDOM] = rt_k_random,
            [RT_OP_UPDATE] = rt_k_update,
            [RT_OP_GATHER_ND] = rt_k_gather_nd,
            [RT_OP_SAMPLE] = rt_k_sample,
            [RT_OP_QGEMM] = rt_k_qgemm,
            [RT_OP_SPGEMM] = rt_k_spgemm,
            [RT_OP_PACK_TILES] = rt_k_pack_tiles,
            [RT_OP_CROP_RESIZE] = rt_k_crop_resize,
            [RT_OP_NMS] = rt_k_nms,
            [RT_OP_NON_ZERO] = rt_k_non_zero,
        },
    .prefetch = {[RT_OP_GEMM] = rt_p_gemm, [RT_OP_ATTENTION] = rt_p_attention},
    .h2f = rt_h2f,
    .f2h = rt_f2h,
};
