/* ops.h — the one MIL op table.  Each line gives an op's enum, MIL name,
 * argument signature and shape rule; the parser (op names), the checker
 * (arguments, dtypes, shapes) and the printer all read it, so adding an op is
 * one line here plus its shape rule in compiler/mil/check.c.
 *
 * Signature language: space-separated arguments  name:TYPE[#RANK][FLAGS][=DEFAULT]
 *   TYPE   one uppercase letter = a dtype group; arguments sharing a letter must
 *          have the same dtype.  T, U: fp16 or fp32.  A, B: any dtype.
 *          I: any integer dtype.  Or a fixed dtype (int32, bool, string), or
 *          `any` (no constraint, no group).
 *   #RANK  #0 scalar, #1 rank 1 (otherwise any rank; the shape rule checks).
 *   FLAGS  ! must be constant (a const value or an inline literal)
 *          ? optional (otherwise required)
 *          * a tuple of values, e.g. concat's values = (a, b, c)
 *          @ an axis (or axes, or a permutation) of the first argument: -k
 *            means rank - k and is made non-negative when the IR is built
 *            (axes.c); @+ counts against rank + 1 (stack), @^ against rank +
 *            the number of axes given (expand_dims)
 *   =DEFAULT the value when absent, as text: a number, false, a mode string,
 *          or a word: zeros, ones (per-dim 1s), all (every axis).
 * Arguments come from coremltools' op definitions (iOS15..iOS18).
 */
#ifndef MILC_OPS_H
#define MILC_OPS_H

#include <stdbool.h>
#include <stddef.h>

#define MILC_UNARY_FLOAT "x:T"
#define MILC_BINARY "x:A y:A"
#define MILC_REDUCE "x:A axes:int32#1!@?=all keep_dims:bool#0!?=false"

/* X(ENUM, "mil name", "signature", shape rule) */
#define MILC_OPS(X)                                                                            \
    X(CONST, "const", "", const)                                                               \
    X(LINEAR, "linear", "x:T weight:T! bias:T!?=zeros", linear)                                \
    X(MATMUL, "matmul", "x:T y:T transpose_x:bool#0!?=false transpose_y:bool#0!?=false", matmul) \
    X(CONV, "conv",                                                                            \
      "x:T weight:T bias:T!?=zeros strides:int32#1!?=ones pad_type:string#0!?=valid "          \
      "pad:int32#1!?=zeros dilations:int32#1!?=ones groups:int32#0!?=1",                       \
      conv)                                                                                    \
    X(ADD, "add", MILC_BINARY, broadcast)                                                      \
    X(SUB, "sub", MILC_BINARY, broadcast)                                                      \
    X(MUL, "mul", MILC_BINARY, broadcast)                                                      \
    X(REAL_DIV, "real_div", MILC_BINARY, broadcast)                                            \
    X(POW, "pow", "x:T y:T", broadcast)                                                        \
    X(RSQRT, "rsqrt", "x:T epsilon:T#0!?=1e-12", same)                                         \
    X(SQRT, "sqrt", MILC_UNARY_FLOAT, same)                                                    \
    X(EXP, "exp", MILC_UNARY_FLOAT, same)                                                      \
    X(TANH, "tanh", MILC_UNARY_FLOAT, same)                                                    \
    X(SIGMOID, "sigmoid", MILC_UNARY_FLOAT, same)                                              \
    X(SILU, "silu", MILC_UNARY_FLOAT, same)                                                    \
    X(GELU, "gelu", "x:T mode:string#0!?=EXACT", gelu)                                         \
    X(SOFTMAX, "softmax", "x:T axis:int32#0!@?=-1", softmax)                                    \
    X(REDUCE_MEAN, "reduce_mean", MILC_REDUCE, reduce)                                         \
    X(REDUCE_SUM, "reduce_sum", MILC_REDUCE, reduce)                                           \
    X(REDUCE_MAX, "reduce_max", MILC_REDUCE, reduce)                                           \
    X(LAYER_NORM, "layer_norm",                                                                \
      "x:T axes:int32#1!@?=all gamma:T!? beta:T!? epsilon:T#0!?=1e-5", layer_norm)              \
    X(RESHAPE, "reshape", "x:A shape:int32#1", reshape)                                        \
    X(TRANSPOSE, "transpose", "x:A perm:int32#1!@", transpose)                                  \
    X(CONCAT, "concat", "values:A* axis:int32#0!@ interleave:bool#0!?=false", concat)           \
    X(SPLIT, "split", "x:A num_splits:int32#0!? split_sizes:int32#1!? axis:int32#0!@", split)   \
    X(SLICE_BY_INDEX, "slice_by_index",                                                        \
      "x:A begin:int32#1 end:int32#1 stride:int32#1!?=ones begin_mask:bool#1!?=false "         \
      "end_mask:bool#1!?=false squeeze_mask:bool#1!?=false",                                   \
      slice_by_index)                                                                          \
    X(SLICE_BY_SIZE, "slice_by_size", "x:A begin:int32#1 size:int32#1!", slice_by_size)        \
    X(GATHER, "gather",                                                                        \
      "x:A indices:I axis:int32#0!@?=0 batch_dims:int32#0!?=0 validate_indices:bool#0!?=false", \
      gather)                                                                                  \
    X(CAST, "cast", "x:A dtype:string#0!", cast)                                               \
    X(BAND_PART, "band_part", "x:A lower:int32#0!?=-1 upper:int32#0!?=-1", band_part)          \
    X(EXPAND_DIMS, "expand_dims", "x:A axes:int32#1!@^", expand_dims)                            \
    X(SQUEEZE, "squeeze", "x:A axes:int32#1!@?=all", squeeze)                                   \
    X(TILE, "tile", "x:A reps:int32#1", tile)                                                  \
    X(SELECT, "select", "cond:bool a:A b:A", select)                                           \
    X(SCALED_DOT_PRODUCT_ATTENTION, "scaled_dot_product_attention",                            \
      "query:T key:T value:T attn_mask:any?", sdpa)

typedef enum IrOpKind {
#define X(e, n, sig, rule) OP_##e,
    MILC_OPS(X)
#undef X
    OP_COUNT
} IrOpKind;

enum { MIL_MAX_OP_ARGS = 16, MIL_ARG_NAME_MAX = 24, MIL_ARG_DEFAULT_MAX = 16 };

/* One argument of an op signature, decoded. */
typedef struct MilArgSpec {
    char name[MIL_ARG_NAME_MAX];
    char group;    /* 'T' 'U' 'A' 'B' 'I', or 0 when dtype or `any` applies */
    int dtype;     /* a fixed IrDType, or -1 */
    int rank;      /* 0 scalar, 1 vector, -1 any */
    bool is_const; /* must be a const value or an inline literal */
    bool optional;
    bool tuple;
    char axis; /* 0, or '@' '+' '^': an axis argument and what its rank is */
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
/* The spec of argument name of op k; false if the op has no such argument. */
bool mil_op_arg_spec(IrOpKind k, const char *name, MilArgSpec *out);

#endif
