/* ops.h — the one MIL op table.  Each line gives an op's enum, MIL name,
 * argument signature and shape rule; the parser (op names), the checker
 * (arguments, dtypes, shapes) and the printer all read it, so adding an op is
 * one line here plus its shape rule in compiler/mil/check.c.
 *
 * Signature language: space-separated arguments  name:TYPE[#RANK][FLAGS][=DEFAULT]
 *   TYPE   one uppercase letter = a dtype group; arguments sharing a letter must
 *          have the same dtype.  T, U: fp16 or fp32.  A, B: any dtype.
 *          I: any integer dtype.  Or a fixed dtype (int32, bool, string), or
 *          `any` (no constraint, no group), or `list` (a list<...> value).
 *          A letter may carry its dtypes in braces, with dtypes an opset adds
 *          after ';': T{fp16,fp32,int32;17:int8,uint8} (the DOM_* macros).
 *          A leading $ (input:$A) means a state<tensor<...>> of that group.
 *   #RANK  #0 scalar, #1 rank 1 (otherwise any rank; the shape rule checks).
 *   FLAGS  ! must be constant (a const value or an inline literal)
 *          ? optional (otherwise required)
 *          * a tuple of values, e.g. concat's values = (a, b, c)
 *          @ an axis (or axes, or a permutation) of the first argument: -k
 *            means rank - k and is made non-negative when the IR is built
 *            (axes.c); @+ counts against rank + 1 (stack), @^ against rank +
 *            the number of axes given (expand_dims)
 *          >NN the argument exists from opset iosNN on
 *          <NN the argument exists before opset iosNN only (a later
 *              opset replaced it: crop_resize's roi, nms's score_threshold)
 *          %GNN before opset iosNN the argument is in group G instead
 *   =DEFAULT the value when absent, as text: a number, false, a mode string,
 *          or a word: zeros, ones (per-dim 1s), all (every axis).
 * A signature may start with >NN: the op exists from opset iosNN on.
 * Arguments come from coremltools' op definitions (iOS15..iOS18).
 */
#ifndef MILC_OPS_H
#define MILC_OPS_H

#include <stdbool.h>
#include <stddef.h>

/* Dtype domains (coremltools' type domains; `;17:` adds dtypes from ios17 on). */
#define DOM_N      "{fp16,fp32,int32}"
#define DOM_DATA   "{bool,fp16,fp32,int32;17:int8,int16,uint8,uint16}"
#define DOM_DATA15 "{bool,fp16,fp32,int32}"
#define DOM_GATHER "{fp16,fp32,int32;17:int8,int16,uint8,uint16}"
#define DOM_INDEX  "{int32;16:int16,uint16;17:int8,uint8}"
#define DOM_Q      "{int8,uint8}"
#define DOM_STATE  "{bool,fp16,fp32,int8,int16,int32,uint8,uint16}"

#define MILC_UNARY_FLOAT "x:T"
#define MILC_UNARY_NUM   "x:T" DOM_N
#define MILC_BINARY      "x:A" DOM_N " y:A" DOM_N
#define MILC_COMPARE     "x:A" DOM_N " y:A" DOM_N
#define MILC_LOGICAL     "x:L{bool} y:L{bool}"
#define MILC_ACT1        "x:T alpha:U#0!%T17"
#define MILC_ACT2        "x:T alpha:U#0!%T17 beta:U#0!%T17"
#define MILC_REDUCE      "x:A" DOM_N " axes:int32#1!@?=all keep_dims:bool#0!?=false"
#define MILC_REDUCE_ARG  "x:A" DOM_N " axis:int32#0!@?=-1 keep_dims:bool#0!?=false output_dtype:string#0!?>17=int32"
#define MILC_POOL                                                                                                      \
    "x:T kernel_sizes:int32#1! strides:int32#1!?=ones pad_type:string#0! pad:int32#1!?=zeros "                         \
    "ceil_mode:bool#0!?=false"
#define MILC_RANDOM_SHAPE "shape:int32#1 seed:int32#0!?=-1"
#define MILC_SCATTER_MODE "mode:string#0!?=add validate_indices:bool#0!?>17=false"

/* X(ENUM, "mil name", "signature", shape rule) */
#define MILC_OPS(X)                                                                                                    \
    X(CONST, "const", "", const)                                                                                       \
    X(LINEAR, "linear", "x:T weight:T! bias:T!?=zeros", linear)                                                        \
    X(MATMUL, "matmul", "x:T y:T transpose_x:bool#0!?=false transpose_y:bool#0!?=false", matmul)                       \
    X(CONV, "conv",                                                                                                    \
      "x:T weight:T bias:T!?=zeros strides:int32#1!?=ones pad_type:string#0!?=valid "                                  \
      "pad:int32#1!?=zeros dilations:int32#1!?=ones groups:int32#0!?=1",                                               \
      conv)                                                                                                            \
    X(ADD, "add", MILC_BINARY, broadcast)                                                                              \
    X(SUB, "sub", MILC_BINARY, broadcast)                                                                              \
    X(MUL, "mul", MILC_BINARY, broadcast)                                                                              \
    X(REAL_DIV, "real_div", MILC_BINARY, broadcast)                                                                    \
    X(POW, "pow", MILC_BINARY, broadcast)                                                                              \
    X(RSQRT, "rsqrt", "x:T epsilon:U#0!?%T17=1e-12", same)                                                             \
    X(SQRT, "sqrt", MILC_UNARY_FLOAT, same)                                                                            \
    X(EXP, "exp", MILC_UNARY_FLOAT, same)                                                                              \
    X(TANH, "tanh", MILC_UNARY_FLOAT, same)                                                                            \
    X(SIGMOID, "sigmoid", MILC_UNARY_FLOAT, same)                                                                      \
    X(SILU, "silu", MILC_UNARY_FLOAT, same)                                                                            \
    X(GELU, "gelu", "x:T mode:string#0!?=EXACT", gelu)                                                                 \
    X(SOFTMAX, "softmax", "x:T axis:int32#0!@?=-1", softmax)                                                           \
    X(REDUCE_MEAN, "reduce_mean", MILC_REDUCE, reduce)                                                                 \
    X(REDUCE_SUM, "reduce_sum", MILC_REDUCE, reduce)                                                                   \
    X(REDUCE_MAX, "reduce_max", MILC_REDUCE, reduce)                                                                   \
    X(LAYER_NORM, "layer_norm", "x:T axes:int32#1!@?=all gamma:T!? beta:T!? epsilon:T#0!?=1e-5", layer_norm)           \
    X(RESHAPE, "reshape", "x:A shape:int32#1", reshape)                                                                \
    X(TRANSPOSE, "transpose", "x:A perm:int32#1!@", transpose)                                                         \
    X(CONCAT, "concat", "values:A* axis:int32#0!@ interleave:bool#0!?=false", concat)                                  \
    X(SPLIT, "split", "x:A num_splits:int32#0!? split_sizes:int32#1!? axis:int32#0!@", split)                          \
    X(SLICE_BY_INDEX, "slice_by_index",                                                                                \
      "x:A begin:int32#1 end:int32#1 stride:int32#1!?=ones begin_mask:bool#1!?=false "                                 \
      "end_mask:bool#1!?=false squeeze_mask:bool#1!?=false",                                                           \
      slice_by_index)                                                                                                  \
    X(SLICE_BY_SIZE, "slice_by_size", "x:A begin:int32#1 size:int32#1!", slice_by_size)                                \
    X(GATHER, "gather",                                                                                                \
      "x:A" DOM_GATHER " indices:I" DOM_INDEX " axis:int32#0!@?=0 batch_dims:int32#0!?>16=0 "                          \
      "validate_indices:bool#0!?>17=false",                                                                            \
      gather)                                                                                                          \
    X(CAST, "cast", "x:A dtype:string#0!", cast)                                                                       \
    X(BAND_PART, "band_part", "x:A lower:int32#0!?=-1 upper:int32#0!?=-1", band_part)                                  \
    X(EXPAND_DIMS, "expand_dims", "x:A axes:int32#1!@^", expand_dims)                                                  \
    X(SQUEEZE, "squeeze", "x:A axes:int32#1!@?=all", squeeze)                                                          \
    X(TILE, "tile", "x:A reps:int32#1", tile)                                                                          \
    X(SELECT, "select", "cond:bool a:A b:A", select)                                                                   \
    X(SCALED_DOT_PRODUCT_ATTENTION, "scaled_dot_product_attention", ">18 query:T key:T value:T attn_mask:any?", sdpa)  \
    MILC_OPS_MORE(X)

/* Elementwise unary, activations, binary, comparison and logical ops. */
#define MILC_OPS_ELEMENTWISE(X)                                                                                        \
    X(ABS, "abs", MILC_UNARY_NUM, same)                                                                                \
    X(ACOS, "acos", MILC_UNARY_FLOAT, same)                                                                            \
    X(ASIN, "asin", MILC_UNARY_FLOAT, same)                                                                            \
    X(ATAN, "atan", MILC_UNARY_FLOAT, same)                                                                            \
    X(ATANH, "atanh", MILC_UNARY_FLOAT, same)                                                                          \
    X(CEIL, "ceil", MILC_UNARY_FLOAT, same)                                                                            \
    X(COS, "cos", MILC_UNARY_FLOAT, same)                                                                              \
    X(COSH, "cosh", MILC_UNARY_FLOAT, same)                                                                            \
    X(ERF, "erf", MILC_UNARY_FLOAT, same)                                                                              \
    X(EXP2, "exp2", MILC_UNARY_NUM, same)                                                                              \
    X(FLOOR, "floor", MILC_UNARY_FLOAT, same)                                                                          \
    X(INVERSE, "inverse", "x:T epsilon:U#0!?%T17=1e-4", same)                                                          \
    X(LOG, "log", "x:T epsilon:U#0!?%T17=1e-45", same)                                                                 \
    X(ROUND, "round", MILC_UNARY_FLOAT, same)                                                                          \
    X(SIGN, "sign", MILC_UNARY_NUM, same)                                                                              \
    X(SIN, "sin", MILC_UNARY_FLOAT, same)                                                                              \
    X(SINH, "sinh", MILC_UNARY_FLOAT, same)                                                                            \
    X(SQUARE, "square", MILC_UNARY_NUM, same)                                                                          \
    X(TAN, "tan", MILC_UNARY_FLOAT, same)                                                                              \
    X(RELU, "relu", MILC_UNARY_FLOAT, same)                                                                            \
    X(RELU6, "relu6", MILC_UNARY_FLOAT, same)                                                                          \
    X(SOFTPLUS, "softplus", MILC_UNARY_FLOAT, same)                                                                    \
    X(SOFTSIGN, "softsign", MILC_UNARY_FLOAT, same)                                                                    \
    X(CLIP, "clip", "x:T alpha:T#0! beta:T#0!", same)                                                                  \
    X(THRESHOLD, "threshold", "x:T" DOM_N " alpha:T" DOM_N "#0!", same)                                                \
    X(THRESHOLDED_RELU, "thresholded_relu", MILC_ACT1, same)                                                           \
    X(ELU, "elu", MILC_ACT1, same)                                                                                     \
    X(LEAKY_RELU, "leaky_relu", MILC_ACT1, same)                                                                       \
    X(CLAMPED_RELU, "clamped_relu", MILC_ACT2, same)                                                                   \
    X(LINEAR_ACTIVATION, "linear_activation", MILC_ACT2, same)                                                         \
    X(SCALED_TANH, "scaled_tanh", MILC_ACT2, same)                                                                     \
    X(SIGMOID_HARD, "sigmoid_hard", MILC_ACT2, same)                                                                   \
    X(PRELU, "prelu", "x:T alpha:U#1!%T17", prelu)                                                                     \
    X(SOFTPLUS_PARAMETRIC, "softplus_parametric", "x:T alpha:U#1!%T17 beta:U#1!%T17", prelu)                           \
    X(FLOOR_DIV, "floor_div", MILC_BINARY, broadcast)                                                                  \
    X(MAXIMUM, "maximum", MILC_BINARY, broadcast)                                                                      \
    X(MINIMUM, "minimum", MILC_BINARY, broadcast)                                                                      \
    X(MOD, "mod", MILC_BINARY, broadcast)                                                                              \
    X(EQUAL, "equal", MILC_COMPARE, compare)                                                                           \
    X(NOT_EQUAL, "not_equal", MILC_COMPARE, compare)                                                                   \
    X(GREATER, "greater", MILC_COMPARE, compare)                                                                       \
    X(GREATER_EQUAL, "greater_equal", MILC_COMPARE, compare)                                                           \
    X(LESS, "less", MILC_COMPARE, compare)                                                                             \
    X(LESS_EQUAL, "less_equal", MILC_COMPARE, compare)                                                                 \
    X(LOGICAL_AND, "logical_and", MILC_LOGICAL, compare)                                                               \
    X(LOGICAL_OR, "logical_or", MILC_LOGICAL, compare)                                                                 \
    X(LOGICAL_XOR, "logical_xor", MILC_LOGICAL, compare)                                                               \
    X(LOGICAL_NOT, "logical_not", "x:bool", same)

/* Reductions, normalizations, pooling and tensor ops. */
#define MILC_OPS_MORE(X)                                                                                               \
    MILC_OPS_ELEMENTWISE(X)                                                                                            \
    X(REDUCE_MIN, "reduce_min", MILC_REDUCE, reduce)                                                                   \
    X(REDUCE_PROD, "reduce_prod", MILC_REDUCE, reduce)                                                                 \
    X(REDUCE_L1_NORM, "reduce_l1_norm", MILC_REDUCE, reduce)                                                           \
    X(REDUCE_L2_NORM, "reduce_l2_norm", MILC_REDUCE, reduce)                                                           \
    X(REDUCE_LOG_SUM, "reduce_log_sum", MILC_REDUCE, reduce)                                                           \
    X(REDUCE_LOG_SUM_EXP, "reduce_log_sum_exp", MILC_REDUCE, reduce)                                                   \
    X(REDUCE_SUM_SQUARE, "reduce_sum_square", MILC_REDUCE, reduce)                                                     \
    X(REDUCE_ARGMAX, "reduce_argmax", MILC_REDUCE_ARG, reduce_arg)                                                     \
    X(REDUCE_ARGMIN, "reduce_argmin", MILC_REDUCE_ARG, reduce_arg)                                                     \
    X(L2_NORM, "l2_norm", "x:T epsilon:U#0!?%T17=1e-6", l2_norm)                                                       \
    X(MAX_POOL, "max_pool", MILC_POOL, pool)                                                                           \
    X(AVG_POOL, "avg_pool", MILC_POOL " exclude_padding_from_average:bool#0!?=false", pool)                            \
    X(L2_POOL, "l2_pool", MILC_POOL, pool)                                                                             \
    X(SHAPE, "shape", "x:A" DOM_DATA15, shape)                                                                         \
    X(STACK, "stack", "values:A* axis:int32#0!@+", stack)                                                              \
    MILC_OPS_TENSOR(X)

/* Normalizations, scans and sorts, gather/scatter, resampling, random ops,
 * quantization and the constexpr_* weight decompression family. */
#define MILC_OPS_TENSOR(X)                                                                                             \
    X(BATCH_NORM, "batch_norm",                                                                                        \
      "x:T mean:U#1!%T17 variance:U#1!%T17 gamma:U#1!?%T17 beta:U#1!?%T17 epsilon:U#0!?%T17=1e-5", norm)               \
    X(INSTANCE_NORM, "instance_norm", "x:T gamma:U#1!?%T17 beta:U#1!?%T17 epsilon:U#0!?%T17=1e-5", norm)               \
    X(LOCAL_RESPONSE_NORM, "local_response_norm",                                                                      \
      "x:T size:int32#0! alpha:U#0!?%T17=1e-4 beta:U#0!?%T17=0.75 k:U#0!?%T17=1", norm)                                \
    X(CUMSUM, "cumsum", "x:A" DOM_N " axis:int32#0!@?=0 exclusive:bool#0!?=false reverse:bool#0!?=false", axis_same)   \
    X(REVERSE, "reverse", "x:A" DOM_DATA " axes:int32#1!@?=all", reverse)                                              \
    X(ARGSORT, "argsort", "x:A" DOM_N " axis:int32#0!@?=-1 ascending:bool#0!?=false", argsort)                         \
    X(IDENTITY, "identity", "x:A", same)                                                                               \
    X(FLATTEN2D, "flatten2d", "x:A" DOM_DATA15 " axis:int32#0!?=1", flatten2d)                                         \
    X(FILL, "fill", "shape:int32#1 value:A" DOM_DATA15 "#0!?=0", fill)                                                 \
    X(GATHER_ALONG_AXIS, "gather_along_axis",                                                                          \
      "x:A" DOM_GATHER " indices:I" DOM_INDEX " axis:int32#0!@?=0 validate_indices:bool#0!?>17=false",                 \
      gather_along_axis)                                                                                               \
    X(SCATTER, "scatter", "data:A" DOM_N " indices:int32 updates:A" DOM_N " axis:int32#0!@?=0 " MILC_SCATTER_MODE,     \
      scatter)                                                                                                         \
    X(SCATTER_ALONG_AXIS, "scatter_along_axis",                                                                        \
      "data:A" DOM_N " indices:int32 updates:A" DOM_N " axis:int32#0!@?=0 " MILC_SCATTER_MODE, scatter)                \
    X(SCATTER_ND, "scatter_nd", "data:A" DOM_N " indices:int32 updates:A" DOM_N " " MILC_SCATTER_MODE, scatter)        \
    X(SPACE_TO_DEPTH, "space_to_depth", "x:T block_size:int32#0!", space_to_depth)                                     \
    X(DEPTH_TO_SPACE, "depth_to_space", "x:T block_size:int32#0!", space_to_depth)                                     \
    X(UPSAMPLE_NEAREST_NEIGHBOR, "upsample_nearest_neighbor",                                                          \
      "x:T scale_factor_height:S{fp32,int32}#0!?=1 scale_factor_width:S{fp32,int32}#0!?=1", upsample)                  \
    X(RANDOM_NORMAL, "random_normal", "shape:int32#1 mean:T#0!?=0 stddev:T#0!?=1 seed:int32#0!?=-1", random)           \
    X(RANDOM_UNIFORM, "random_uniform", "shape:int32#1 low:T#0!?=0 high:T#0!?=1 seed:int32#0!?=-1", random)            \
    X(RANDOM_BERNOULLI, "random_bernoulli", "shape:int32#1 prob:T#0!?=0.5 seed:int32#0!?=-1", random)                  \
    X(QUANTIZE, "quantize", ">17 input:T zero_point:Q" DOM_Q "!? scale:T! axis:int32#0!@? output_dtype:string#0!",     \
      quantize)                                                                                                        \
    X(DEQUANTIZE, "dequantize", ">17 input:Q" DOM_Q " zero_point:Q" DOM_Q "!? scale:T! axis:int32#0!@?", dequantize)   \
    X(CONSTEXPR_AFFINE_DEQUANTIZE, "constexpr_affine_dequantize",                                                      \
      ">16 quantized_data:Q" DOM_Q "! zero_point:Z{fp32,int8,uint8}! scale:T! axis:int32#0!@", dequantize)             \
    X(CONSTEXPR_CAST, "constexpr_cast", ">16 source_val:fp16! output_dtype:string#0!", constexpr_cast)                 \
    X(CONSTEXPR_BLOCKWISE_SHIFT_SCALE, "constexpr_blockwise_shift_scale",                                              \
      ">18 data:S{fp16,fp32,int4,int8,uint4,uint8}! scale:T! offset:O{fp16,fp32,int4,int8,uint4,uint8}!?",             \
      shift_scale)                                                                                                     \
    X(CONSTEXPR_LUT_TO_DENSE, "constexpr_lut_to_dense",                                                                \
      ">16 indices:I{uint8;18:uint1,uint2,uint3,uint4,uint6}! lut:T{fp16,fp32,int8,uint8}! vector_axis:int32#0!?>18 "  \
      "shape:uint32#1!<18",                                                                                            \
      constexpr_lut)                                                                                                   \
    X(CONSTEXPR_SPARSE_TO_DENSE, "constexpr_sparse_to_dense",                                                          \
      ">16 nonzero_data:T{fp16,fp32,int8,uint8;18:int4,uint4}#1! mask:M{uint8;18:uint1}! shape:uint32#1!<18",          \
      constexpr_sparse)                                                                                                \
    X(CONV_TRANSPOSE, "conv_transpose",                                                                                \
      "x:T weight:U%T17 bias:U!?%T17 pad:int32#1!? output_shape:int32#1!? pad_type:string#0!?=valid "                  \
      "strides:int32#1!?=ones dilations:int32#1!?=ones groups:int32#0!?=1",                                            \
      conv_transpose)                                                                                                  \
    X(READ_STATE, "read_state", ">18 input:$A" DOM_STATE, read_state)                                                  \
    X(WRITE_STATE, "write_state", ">18 input:$A" DOM_STATE " data:A" DOM_STATE, write_state)                           \
    X(COREML_UPDATE_STATE, "coreml_update_state", ">18 state:$A" DOM_STATE " value:A" DOM_STATE, write_state)          \
    MILC_OPS_LAYOUT(X)

/* Slicing, padding, sorting, index and layout ops, and image resizing. */
#define DOM_N17      "{fp16,fp32,int32;17:int8,int16,uint8,uint16}"
#define DOM_DATA16   "{bool,fp16,fp32,int32;17:int8,int16,uint8,uint16}"
#define DOM_K        "{int32;17:int8,int16}"
#define DOM_SLICE_IX "{int8,int16,int32}"
#define MILC_OPS_LAYOUT(X)                                                                                             \
    X(SLICE_UPDATE, "slice_update",                                                                                    \
      ">18 x:A" DOM_STATE " update:A" DOM_STATE " begin:U" DOM_SLICE_IX "#1 end:U" DOM_SLICE_IX "#1 "                  \
      "stride:U" DOM_SLICE_IX                                                                                          \
      "#1!?=ones begin_mask:bool#1!?=false end_mask:bool#1!?=false squeeze_mask:bool#1!?=false",                       \
      slice_update)                                                                                                    \
    X(PAD, "pad", "x:T pad:int32#1 mode:string#0!?=constant constant_val:T#0!?=0", pad)                                \
    X(TOPK, "topk",                                                                                                    \
      "x:A" DOM_N17 " k:K" DOM_K "#0!?=1 axis:int32#0!@?=-1 ascending:bool#0!?=false "                                 \
      "sort:bool#0!?>16=true return_indices:bool#0!?>16=true output_indices_dtype:string#0!?>17=int32",                \
      topk)                                                                                                            \
    X(GATHER_ND, "gather_nd",                                                                                          \
      "x:A" DOM_GATHER " indices:I" DOM_INDEX " batch_dims:int32#0!?>16=0 validate_indices:bool#0!?>17=false",         \
      gather_nd)                                                                                                       \
    X(ONE_HOT, "one_hot",                                                                                              \
      "indices:int32 one_hot_vector_size:int32#0 axis:int32#0!@+?=-1 on_value:A" DOM_DATA15 "#0!?=1 "                  \
      "off_value:A" DOM_DATA15 "#0!?=0",                                                                               \
      one_hot)                                                                                                         \
    X(EINSUM, "einsum", "values:A* equation:string#0!", einsum)                                                        \
    X(RANGE_1D, "range_1d", "end:T" DOM_N "#0 start:T" DOM_N "#0 step:T" DOM_N "#0", range_1d)                         \
    X(FILL_LIKE, "fill_like", ">16 ref_tensor:A" DOM_DATA15 " value:B" DOM_DATA15 "#0!?=0", fill_like)                 \
    X(RESHAPE_LIKE, "reshape_like",                                                                                    \
      ">16 x:A" DOM_DATA16 " ref_tensors:any* begins:int32* ends:int32* end_masks:bool*", reshape_like)                \
    X(NON_ZERO, "non_zero", "x:A" DOM_DATA15, non_zero)                                                                \
    X(PIXEL_SHUFFLE, "pixel_shuffle", "x:T upscale_factor:int32#0!", pixel_shuffle)                                    \
    X(PIXEL_UNSHUFFLE, "pixel_unshuffle", ">16 x:T downscale_factor:uint32#0!", pixel_shuffle)                         \
    X(SLIDING_WINDOWS, "sliding_windows",                                                                              \
      "x:A{fp16,fp32,int32;17:bool,int8,int16,uint8,uint16} axis:int32#0!@ size:int32#0! stride:int32#0!?=1",          \
      sliding_windows)                                                                                                 \
    X(REVERSE_SEQUENCE, "reverse_sequence",                                                                            \
      "x:A" DOM_DATA16 " lengths:U" DOM_K " seq_axis:int32#0!@?=0 batch_axis:int32#0!@?=0", reverse_sequence)          \
    X(SPACE_TO_BATCH, "space_to_batch", "x:T block_shape:int32#1! paddings:int32!", space_to_batch)                    \
    X(BATCH_TO_SPACE, "batch_to_space", "x:T block_shape:int32#1! crops:int32!", space_to_batch)                       \
    X(CROP, "crop", "x:T crop_height:int32! crop_width:int32!", crop)                                                  \
    X(RESIZE_NEAREST_NEIGHBOR, "resize_nearest_neighbor",                                                              \
      "x:T target_size_height:int32#0! target_size_width:int32#0!", resize)                                            \
    X(RESIZE_BILINEAR, "resize_bilinear",                                                                              \
      "x:T target_size_height:int32#0!?=1 target_size_width:int32#0!?=1 sampling_mode:string#0!?=DEFAULT", resize)     \
    X(UPSAMPLE_BILINEAR, "upsample_bilinear",                                                                          \
      "x:T scale_factor_height:S{fp32,int32}#0!?=1 scale_factor_width:S{fp32,int32}#0!?=1 "                            \
      "align_corners:bool#0!?=true half_pixel_centers:bool#0!?>16=false",                                              \
      upsample)                                                                                                        \
    X(RNN, "rnn",                                                                                                      \
      "x:T{fp32;17:fp16} initial_h:T weight_ih:T! weight_hh:T! bias:T!? direction:string#0!?=forward "                 \
      "output_sequence:bool#0!?=false activation:string#0!?=tanh",                                                     \
      recurrent)                                                                                                       \
    X(GRU, "gru",                                                                                                      \
      "x:T{fp32;17:fp16} initial_h:T weight_ih:T! weight_hh:T! bias:T!? direction:string#0!?=forward "                 \
      "output_sequence:bool#0!?=false recurrent_activation:string#0!?=sigmoid activation:string#0!?=tanh "             \
      "reset_after:bool#0!?>18=false input_bias:T!?>18",                                                               \
      recurrent)                                                                                                       \
    X(LSTM, "lstm",                                                                                                    \
      "x:T{fp32;17:fp16} initial_h:T initial_c:T weight_ih:T! weight_hh:T! bias:T!? peephole:T!? "                     \
      "weight_ih_back:T!? weight_hh_back:T!? bias_back:T!? peephole_back:T!? direction:string#0!?=forward "            \
      "output_sequence:bool#0!?=false recurrent_activation:string#0!?=sigmoid cell_activation:string#0!?=tanh "        \
      "activation:string#0!?=tanh clip:T#0!?",                                                                         \
      recurrent)                                                                                                       \
    X(RANDOM_CATEGORICAL, "random_categorical", "x:T mode:string#0!?=logits size:int32#0!?=1 seed:int32#0!?=-1",       \
      random_categorical)                                                                                              \
    X(COND, "cond", "pred:bool#0", cond)                                                                               \
    X(WHILE_LOOP, "while_loop", "loop_vars:any*", while_loop)                                                          \
    MILC_OPS_VISION(X)                                                                                                 \
    MILC_OPS_LIST(X)

/* Lists (make_list's value, list<tensor<...>, N>): TensorFlow's tensor arrays. */
#define DOM_LIST "{bool,fp16,fp32,int32}"
#define MILC_OPS_LIST(X)                                                                                               \
    X(MAKE_LIST, "make_list",                                                                                          \
      "init_length:int32#0?=1 dynamic_length:bool#0!?=true elem_shape:any#0!* "                                        \
      "dtype:string#0!?=fp32",                                                                                         \
      make_list)                                                                                                       \
    X(LIST_LENGTH, "list_length", "ls:list", list_op)                                                                  \
    X(LIST_WRITE, "list_write", "ls:list index:int32#0 value:T" DOM_LIST, list_op)                                     \
    X(LIST_READ, "list_read", "ls:list index:int32#0", list_op)                                                        \
    X(LIST_GATHER, "list_gather", "ls:list indices:int32#1", list_op)                                                  \
    X(LIST_SCATTER, "list_scatter", "ls:list indices:int32#1 value:T" DOM_LIST, list_op)

/* Image sampling, detection and the remaining compressed-weight forms. */
#define DOM_RESAMPLE_COORD "{fp32,int32;16:fp16;17:int8,int16,uint8,uint16}"
#define MILC_SAMPLER                                                                                                   \
    "sampling_mode:string#0! padding_mode:string#0! padding_value:T#0! coordinates_mode:string#0! "                    \
    "align_corners:bool#0!"
#define MILC_OPS_VISION(X)                                                                                             \
    X(RESIZE, "resize",                                                                                                \
      ">17 x:T{fp16,fp32,int32} shape:U{int16,int32,uint16,uint32}#1 resized_dims:uint32#0! "                          \
      "interpolation_mode:string#0!?=LINEAR sampling_mode:string#0!?=DEFAULT",                                         \
      resize_nd)                                                                                                       \
    X(AFFINE, "affine", "x:T transform_matrix:T output_height:int32#0! output_width:int32#0! " MILC_SAMPLER, affine)   \
    X(RESAMPLE, "resample", "x:T coordinates:U" DOM_RESAMPLE_COORD " " MILC_SAMPLER, resample)                         \
    X(CROP_RESIZE, "crop_resize",                                                                                      \
      "x:T roi:T<17 boxes:B{fp16,fp32,uint16}>17 box_indices:I{int32,uint16}?>17 "                                     \
      "target_height:int32#0!?=1 target_width:int32#0!?=1 normalized_coordinates:bool#0!?=false "                      \
      "spatial_scale:fp32#0!?=1 box_coordinate_mode:string#0!?=CORNERS_HEIGHT_FIRST "                                  \
      "sampling_mode:string#0!?=DEFAULT pad_value:T#0!?>16=0",                                                         \
      crop_resize)                                                                                                     \
    X(NON_MAXIMUM_SUPPRESSION, "non_maximum_suppression",                                                              \
      "boxes:T scores:T iou_threshold:T#0! score_threshold:T#0!<17 max_boxes:int32#0! "                                \
      "per_class_suppression:bool#0!?=false",                                                                          \
      nms)                                                                                                             \
    X(CONV_QUANTIZED, "conv_quantized",                                                                                \
      "x:T weight:U{uint8} bias:U{uint8}!? quantization_type:string#0! nbits:int32#0!?=8 "                             \
      "quant_scale:T! quant_bias:T! strides:int32#1!?=ones pad_type:string#0!?=valid "                                 \
      "pad:int32#1!?=zeros dilations:int32#1!?=ones groups:int32#0!?=1",                                               \
      conv)                                                                                                            \
    X(CONSTEXPR_LUT_TO_SPARSE, "constexpr_lut_to_sparse",                                                              \
      ">18 indices_mask:uint1! indices_nonzero_data:I{uint1,uint2,uint3,uint4,uint6,uint8}! "                          \
      "lut:T{fp16,fp32,int8,uint8}! vector_axis:int32#0!?",                                                            \
      constexpr_lut)                                                                                                   \
    X(CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE, "constexpr_sparse_blockwise_shift_scale",                                \
      ">18 data_mask:uint1! nonzero_data:S{fp16,fp32,int4,int8,uint4,uint8}! scale:T! "                                \
      "offset:O{fp16,fp32,int4,int8,uint4,uint8}!?",                                                                   \
      shift_scale)

typedef enum IrOpKind {
#define X(e, n, sig, rule) OP_##e,
    MILC_OPS(X)
#undef X
        OP_COUNT
} IrOpKind;

/* lstm has 17 arguments; test_mil_ops checks every signature fits */
enum { MIL_MAX_OP_ARGS = 20, MIL_ARG_NAME_MAX = 32, MIL_ARG_DEFAULT_MAX = 24 };

/* One argument of an op signature, decoded. */
typedef struct MilArgSpec {
    char name[MIL_ARG_NAME_MAX];
    char group;         /* an uppercase letter, or 0 when dtype or `any` applies */
    unsigned domain[4]; /* group's dtypes (1u << IrDType) in opsets ios15..ios18; 0: any */
    int dtype;          /* a fixed IrDType, or -1 */
    int rank;           /* 0 scalar, 1 vector, -1 any */
    bool is_const;      /* must be a const value or an inline literal */
    bool optional;
    bool tuple;
    bool state;     /* a state<tensor<...>> value (only these take states) */
    bool list;      /* a list<...> value (only the list ops take lists) */
    bool any;       /* `any`: no constraint at all (while_loop's loop variables) */
    char axis;      /* 0, or '@' '+' '^': an axis argument and what its rank is */
    int since;      /* first opset (15..18) with this argument */
    int until;      /* the opset (16..18) that dropped it; 0: every later opset has it */
    char old_group; /* the group before opset old_until (0: none) */
    int old_until;
    char def[MIL_ARG_DEFAULT_MAX]; /* default as text, "" if none */
} MilArgSpec;

/* The opset a function tag names: "ios15".."ios18" or "CoreML5".."CoreML8"
 * (the same opsets) give 15..18; anything else 0. */
int mil_opset_version(const char *s, size_t len);
const char *mil_opset_name(int version); /* 15 -> "ios15" */

const char *mil_op_name(IrOpKind k);
const char *mil_op_signature(IrOpKind k);
/* The op called name (len bytes); false if no such op. */
bool mil_op_lookup(const char *name, size_t len, IrOpKind *out);
/* Decode k's signature into out[max]; returns the argument count. */
int mil_op_args(IrOpKind k, MilArgSpec *out, int max);
/* The first opset (15..18) that has op k. */
int mil_op_since(IrOpKind k);
/* The spec of argument name of op k; false if the op has no such argument. */
bool mil_op_arg_spec(IrOpKind k, const char *name, MilArgSpec *out);
/* A constexpr op's attributes that name its arguments, made arguments.  Core
 * ML's constexpr ops of iOS16/17 carry their (constant) arguments as
 * attributes, in the protobuf and in Apple's model.mil text:
 * constexpr_affine_dequantize()[axis = ..., quantized_data = ..., ...].  The
 * parser and the package reader call this, so every later stage reads one
 * form.  An attribute that is also given as an argument stays, to be refused. */
struct IrOp;
void mil_op_attrs_as_args(struct IrOp *op);

#endif
