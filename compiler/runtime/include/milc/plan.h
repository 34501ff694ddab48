/* plan.h — the CPU execution plan as the compiler backend builds it: numbered
 * buffers (inputs, outputs, weights, temporaries) and ops over them, recorded
 * through RtPlanBuilder and frozen into an artifact (milc/rt.h) by rtb_finish.
 * This header and rt.h are the whole contract between compiler and runtime. */
#ifndef MILC_PLAN_H
#define MILC_PLAN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- error codes (shared with rt.h); rt_strerror() names them ---- */
#define RT_OK        0
#define RT_EINVAL    (-1)  /* bad argument, shape or parameter */
#define RT_ENOMEM    (-2)  /* allocation failed */
#define RT_EIO       (-3)  /* file I/O failed (errno in the message) */
#define RT_EFORMAT   (-4)  /* artifact is malformed: bad magic, bounds, counts, indices */
#define RT_EVERSION  (-5)  /* artifact format version or backend not supported */
#define RT_ECHECKSUM (-6)  /* a checksum did not match */
#define RT_EBIND     (-7)  /* rt_run: tensors do not match the model's inputs/outputs */
#define RT_EINDEX    (-8)  /* rt_run: a gather index was out of range (rows zeroed) */
#define RT_ESYS      (-9)  /* thread creation or another system call failed */
#define RT_ECPU      (-10) /* the kernel variant asked for is not built in or this CPU lacks it */
#define RT_ELOOP     (-11) /* rt_run: a loop passed RT_LOOP_MAX_ITERS iterations (the run stops) */

/* The most iterations one execution of a loop (a MIL while_loop) may take:
 * a program whose loop would run longer is stopped with RT_ELOOP, so a
 * hostile or broken program cannot hang its caller. */
#define RT_LOOP_MAX_ITERS 1000000

#define RT_MAX_RANK      6 /* buffers */
#define RT_COPY_MAX_RANK 8 /* copy iteration space; tile doubles the rank */
#define RT_MAX_IN        6
#define RT_MAX_OUT       4
#define RT_NAME_MAX      64 /* including the NUL */

/* Element types.  Activations live as F32 / I32 / BOOL (1 byte, 0 or 1); F16 is
 * only a boundary type (graph inputs/outputs are converted at rt_run) and a
 * weight storage type (GEMM weights, converted on the fly).  The narrow
 * integers are boundary types too: an input or output of dtype U8, I8, I16
 * or U16 is an I32 buffer, widened at rt_run on the way in and narrowed on
 * the way out (wrapping, as a cast does). */
typedef enum {
    RT_F32 = 1,
    RT_F16 = 2,
    RT_I32 = 3,
    RT_BOOL = 4,
    RT_U8 = 5, /* raw bytes: a compressed weight's packed indices (weight storage); uint8 at the boundary */
    RT_I8 = 6,
    RT_I16 = 7,
    RT_U16 = 8,
} RtDType;

/* Is t a narrow integer boundary type (held in an I32 buffer)? */
static inline int rt_dtype_narrow_int(RtDType t) { return t == RT_U8 || t == RT_I8 || t == RT_I16 || t == RT_U16; }

/* Compile modes: which programs an artifact carries.  RT_MODE_TABLE is the
 * one place a mode is defined; the backend (what to lower), the artifact
 * format (what to accept), the loader, the key and note readers and the
 * CLI's parsing and help all read it, through rt_mode or these macros.
 *   X(ID, number, name, bonded program, non-bonded program, what it produces) */
#define RT_MODE_TABLE(X)                                                                                               \
    X(BONDED, 2, "bonded", 1, 0, "one fused program: few dispatches, no inspectable temporaries")                      \
    X(NONBONDED, 1, "non-bonded", 0, 1, "one dispatch per MIL op: every intermediate inspectable")                     \
    X(BOTH, 0, "both", 1, 1, "both programs in one artifact (run either; the ops checked the same)")
#define RT_MODE_DEFAULT_N         2 /* bonded */
#define RT_MODE_ENUM_(id, n, ...) RT_MODE_##id = n,
#define RT_MODE_COUNT_(...)       +1
enum { RT_MODE_TABLE(RT_MODE_ENUM_) RT_NMODES = 0 RT_MODE_TABLE(RT_MODE_COUNT_), RT_MODE_DEFAULT = RT_MODE_DEFAULT_N };
/* The modes for help text, a string literal:
 * "compile mode: 2=bonded 1=non-bonded 0=both (default 2)". */
#define RT_MODE_STR_(x)                 #x
#define RT_MODE_STR(x)                  RT_MODE_STR_(x)
#define RT_MODE_HELP_(id, n, name, ...) " " #n "=" name
#define RT_MODES_HELP                   "compile mode:" RT_MODE_TABLE(RT_MODE_HELP_) " (default " RT_MODE_STR(RT_MODE_DEFAULT_N) ")"
typedef struct RtModeInfo {
    int mode;
    const char *name;
    int bonded;    /* the artifact carries the bonded (fused) program */
    int nonbonded; /* ... the non-bonded one */
    const char *produces;
} RtModeInfo;
/* The mode's row, or NULL when mode is no compile mode. */
const RtModeInfo *rt_mode(int mode);
/* Programs inside a plan; mode 0 records both. */
typedef enum { RT_PROG_BONDED = 0, RT_PROG_NONBONDED = 1 } RtProgram;

/* ---- ops ----
 * Each op reads in[0..nin) and writes out[0..nout) (buffer indices) and takes
 * a parameter struct of the listed type (or none).  Shapes are those of the
 * buffers; the loader checks every op's shapes and params before a run.      */
typedef enum {
    RT_OP_GEMM = 1,    /* RtGemmParams: x, W[, bias][, residual] -> y        */
    RT_OP_MATMUL,      /* RtMatmulParams: x, y -> z (batch dims broadcast)    */
    RT_OP_ATTENTION,   /* RtAttnParams: q, k, v[, mask] -> o                  */
    RT_OP_NORM,        /* RtNormParams: x[, gamma][, beta] -> y               */
    RT_OP_SOFTMAX,     /* RtAxisParams: x -> y                                */
    RT_OP_BINARY,      /* RtBinaryParams: a, b -> c (N-d broadcast)           */
    RT_OP_UNARY,       /* RtUnaryParams: x -> y                               */
    RT_OP_REDUCE,      /* RtReduceParams: x -> y                              */
    RT_OP_COPY,        /* RtCopyParams: x -> y (strided; y may be shared; F16 x -> F32 y converts) */
    RT_OP_GATHER,      /* RtAxisParams: x, indices(I32) -> y                  */
    RT_OP_BAND_PART,   /* RtBandParams: x -> y                                */
    RT_OP_SELECT,      /* none: cond(BOOL), a, b -> y (N-d broadcast)         */
    RT_OP_CAST,        /* RtCastParams: x -> y (F32/I32/BOOL)                 */
    RT_OP_ELTWISE,     /* RtEltParams: x[, a[, b]] -> y (elementwise math)    */
    RT_OP_BINOP,       /* RtBinaryParams with an RtBinop: a, b -> c (compare, logic, floor_div, mod) */
    RT_OP_REDUCEX,     /* RtReduceParams with an RtReduceXOp: x -> y (F32/I32)  */
    RT_OP_PAD_NHWC,    /* RtConvParams: x -> y (zero-padded, channels last)    */
    RT_OP_CONV_GEMM,   /* RtConvParams: x (PAD_NHWC's), W[, bias] -> y (one group, 2-D) */
    RT_OP_CONV,        /* RtConvParams: x, W[, bias] -> y (direct, any groups; transposed) */
    RT_OP_POOL,        /* RtConvParams: x -> y (max / avg / l2 pooling)       */
    RT_OP_LUT_GEMM,    /* RtLutParams: x, indices(U8), lut[, bias] -> y (palettized linear) */
    RT_OP_CUMSUM,      /* RtScanParams: x -> y (F32 or I32)                    */
    RT_OP_GATHER_AXIS, /* RtAxisParams: x, indices(I32, y's shape) -> y      */
    RT_OP_SCATTER,     /* RtScatterParams: data, indices(I32), updates -> y (data's shape) */
    RT_OP_SORT,        /* RtSortParams: x -> [values][, indices(I32)] (stable; first k along axis) */
    RT_OP_RANDOM,      /* RtRandomParams: [x] -> y (counter-based, keyed by the seed)   */
    /* A loop (while_loop), no params: LOOP_BEGIN, the test's ops, LOOP_TEST
     * (cond: one BOOL element; false leaves the loop, past its LOOP_END), the
     * body's ops, LOOP_END (back to the test).  Properly nested, one TEST per
     * loop at its own level; rt_run executes the control ops itself, and a
     * buffer live into a loop stays live to the loop's end. */
    RT_OP_LOOP_BEGIN, /* none -> none */
    RT_OP_LOOP_TEST,  /* cond(BOOL, 1 element) -> none */
    RT_OP_LOOP_END,   /* none -> none */
    RT_OP_UPDATE,     /* RtUpdateParams: x[, begin, end (I32)] -> y, written in place (a state's write) */
    RT_OP_GATHER_ND,  /* RtAxisParams (axis = batch_dims): x, indices(I32) -> y (see below) */
    RT_OP_SAMPLE,     /* RtSampleParams: x, coordinates or affine matrices -> y (resample, affine) */
    RT_OP_QGEMM,      /* RtQGemmParams: x, q(U8), scale, offset[, bias] -> y (8- or 4-bit quantized linear) */
    RT_OP_SPGEMM,     /* RtSpGemmParams: x, mask(U8), values, start(I32)[, bias] -> y (sparse linear) */
    RT_OP_PACK_TILES, /* none: x -> y (a channels GEMM's x by tiles of positions; see RT_GEMM_PACKED) */
    RT_OP_CROP_RESIZE, /* RtCropParams: x, boxes[, box indices (I32)] -> y (boxes cut and resized) */
    RT_OP_NMS,         /* RtNmsParams: boxes, scores -> boxes, scores, indices(I32)[, counts(I32)] */
    RT_OP_NON_ZERO,    /* none: x -> y (I32 [numel(x), rank(x)], rows: rtb_temp_rows) */
    RT_OP_COUNT_
} RtOpKind;

typedef enum {
    RT_ACT_NONE = 0,
    RT_ACT_RELU,
    RT_ACT_GELU_EXACT,   /* x/2 (1 + erf(x/sqrt 2)) */
    RT_ACT_GELU_TANH,    /* x/2 (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) */
    RT_ACT_GELU_SIGMOID, /* x sigmoid(1.702 x) */
    RT_ACT_SILU,
} RtAct;

/* GEMM with a weight operand W (a weight buffer of shape [N, K]).
 *   layout RT_GEMM_ROWS:     x [..., K] (M = product of leading dims),
 *                            y [..., N]            y = x Wᵀ (+ bias[N])
 *   layout RT_GEMM_CHANNELS: x [B, K, *spatial] (S = product of spatial),
 *                            y [B, N, *spatial]    y = W x  (+ bias[N] per channel)
 *                            — the 1×1 conv on [1, C, 1, S].
 *   layout RT_GEMM_PACKED:   x [B, T, K, RT_PACK_TILE], T = ceil(S / RT_PACK_TILE)
 *                            (a channels x packed by RT_OP_PACK_TILES),
 *                            y [B, N, *spatial] as for RT_GEMM_CHANNELS.
 * Then act, then + residual (same shape as y) if has_residual.  Inputs:
 * x, W, then bias if has_bias, then residual if has_residual. */
enum { RT_GEMM_ROWS = 0, RT_GEMM_CHANNELS = 1, RT_GEMM_PACKED = 2 };
/* RT_OP_PACK_TILES: x [B, K, *spatial] -> y [B, T, K, RT_PACK_TILE],
 * y[b, t, k, r] = x[b, k, t·RT_PACK_TILE + r] (0 past S): each tile of
 * positions the GEMM computes at once, its values of a k side by side. */
enum { RT_PACK_TILE = 6 };
typedef struct {
    int32_t layout, act, has_bias, has_residual;
} RtGemmParams;

/* NumPy matmul of two runtime tensors on their last two dims, batch dims
 * broadcast; x [.., M, K] (or [.., K, M] transposed), y [.., K, N]. Rank >= 2. */
typedef struct {
    int32_t transpose_x, transpose_y;
} RtMatmulParams;

/* Fused attention per (batch, head): o = softmax(q kᵀ · scale + mask) v.
 * q [B, H, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev], o [B, H, L, Ev];
 * H a multiple of Hk (grouped-query: head h uses kv head h / (H / Hk)).
 * mask (optional, has_mask) is additive F32 broadcastable to [B, H, L, S].
 * causal: query i sees key j only if j <= i + (S - L) (a KV cache of S - L
 * earlier positions precedes the L new ones).
 * flags (the decode form, made to read a KV cache where it lies):
 *   RT_ATTN_K_T   k is [B, Hk, E, S] (the [1, C, 1, S] cache layout)
 *   RT_ATTN_V_T   v is [B, Hk, Ev, S]
 *   RT_ATTN_SPLIT k and v come in two parts along S: inputs q, k0, v0, k1,
 *                 v1[, mask]; S = S0 + S1 (cache ++ new positions, no concat)
 * With any flag set, k and v may be F16 buffers (fp16 graph inputs, read in
 * place), and their buffers' own dims do not matter, only their elements in
 * row-major order: kv_heads gives Hk, q gives B and E, o gives Ev, and each
 * part's S_i is its element count / (B Hk E).  So a [1, C, 1, S] cache input
 * is read as [1, Hk, E, S] without a reshape.  Without flags, inputs are
 * q, k, v[, mask], all F32 of the shapes above, and kv_heads is 0. */
enum { RT_ATTN_K_T = 1, RT_ATTN_V_T = 2, RT_ATTN_SPLIT = 4, RT_ATTN_FLAGS_ALL = 7 };
typedef struct {
    float scale;
    int32_t causal, has_mask, flags, kv_heads;
} RtAttnParams;

/* layer_norm / rms_norm over the contiguous axes [axis_begin, axis_end) of x:
 * x viewed as [outer, C, inner]; gamma/beta (optional) hold C elements. */
enum { RT_NORM_LAYER = 0, RT_NORM_RMS = 1 };
typedef struct {
    int32_t kind, axis_begin, axis_end, has_gamma, has_beta;
    float eps;
} RtNormParams;

typedef struct {
    int32_t axis; /* non-negative, < rank of x */
} RtAxisParams;

typedef enum {
    RT_BIN_ADD = 0,
    RT_BIN_SUB,
    RT_BIN_MUL,
    RT_BIN_DIV,
    RT_BIN_POW,
    RT_BIN_MAX,
    RT_BIN_MIN,
    RT_BIN_COUNT_
} RtBinaryOp;
typedef struct {
    int32_t op; /* RtBinaryOp; F32 or I32 operands (same dtype as output) */
} RtBinaryParams;

typedef enum {
    RT_UN_RSQRT = 0, /* 1/sqrt(x + eps) */
    RT_UN_SQRT,
    RT_UN_EXP,
    RT_UN_TANH,
    RT_UN_SIGMOID,
    RT_UN_SILU,
    RT_UN_GELU_EXACT,
    RT_UN_GELU_TANH,
    RT_UN_GELU_SIGMOID,
    RT_UN_RELU,
    RT_UN_NEG,
    RT_UN_ABS,
    RT_UN_LOG,
    RT_UN_SCALE, /* x * eps (a scalar multiply) */
    RT_UN_COUNT_
} RtUnaryOp;
typedef struct {
    int32_t op;
    float eps;
} RtUnaryParams;

typedef enum { RT_RED_SUM = 0, RT_RED_MEAN, RT_RED_MAX, RT_RED_COUNT_ } RtReduceOp;
typedef struct {
    int32_t op;
    uint32_t axes; /* bit i set: reduce axis i of x; y holds the kept dims in order */
} RtReduceParams;

/* Strided copy: for every index (i0..i{rank-1}) < dims,
 *   y[dst_offset + Σ i_d dst_stride_d] = x[src_offset + Σ i_d src_stride_d]
 * in elements.  Source strides may be 0 (tile / broadcast) or negative
 * (reversed slice); destination strides are > 0 on every dim above 1, and
 * the walk takes no more steps than y has elements.  Expresses
 * transpose, slices, reshape, expand/squeeze, concat (one copy per part into a
 * shared y), split (one copy per output) and tile.  x and y have the same
 * dtype, or x is F16 and y F32 (the copy converts). */
typedef struct {
    int32_t rank, reserved;
    int64_t dims[RT_COPY_MAX_RANK];
    int64_t src_offset, src_stride[RT_COPY_MAX_RANK];
    int64_t dst_offset, dst_stride[RT_COPY_MAX_RANK];
} RtCopyParams;

/* band_part on the last two dims: keep x[.., i, j] when (lower < 0 || i - j <= lower)
 * and (upper < 0 || j - i <= upper), else 0. */
typedef struct {
    int32_t lower, upper;
} RtBandParams;

/* cast between F32, I32, BOOL; round_f16 rounds an F32 result to fp16
 * precision (MIL's cast to fp16, kept in fp32 storage). */
typedef struct {
    int32_t round_f16;
} RtCastParams;

/* Elementwise math beyond RT_OP_UNARY, on F32 (x and y), some on I32 (abs,
 * sign, square, exp2, threshold: y I32) and logical_not on BOOL.  alpha and
 * beta are the op's scalar parameters; PRELU and SOFTPLUS_P take theirs per
 * channel (dim 1 of x) from inputs a (and b), F32 vectors of dims[1]. */
typedef enum {
    RT_EL_ABS = 0,
    RT_EL_ACOS,
    RT_EL_ASIN,
    RT_EL_ATAN,
    RT_EL_ATANH,
    RT_EL_CEIL,
    RT_EL_COS,
    RT_EL_COSH,
    RT_EL_ERF,
    RT_EL_EXP2,
    RT_EL_FLOOR,
    RT_EL_INVERSE /* 1/(x+alpha) */,
    RT_EL_LOG /* log(x+alpha) */,
    RT_EL_ROUND /* half to even */,
    RT_EL_SIGN,
    RT_EL_SIN,
    RT_EL_SINH,
    RT_EL_SQUARE,
    RT_EL_TAN,
    RT_EL_RELU6,
    RT_EL_SOFTPLUS,
    RT_EL_SOFTSIGN,
    RT_EL_CLIP /* min(max(x, alpha), beta) */,
    RT_EL_THRESHOLD /* max(x, alpha) */,
    RT_EL_THRESHOLDED_RELU /* x >= alpha ? x : 0 */,
    RT_EL_ELU,
    RT_EL_LEAKY_RELU,
    RT_EL_CLAMPED_RELU,
    RT_EL_LINEAR /* alpha x + beta */,
    RT_EL_SCALED_TANH /* alpha tanh(beta x) */,
    RT_EL_SIGMOID_HARD /* min(max(alpha x + beta, 0), 1) */,
    RT_EL_PRELU,
    RT_EL_SOFTPLUS_P /* a log(1 + exp(b x)) */,
    RT_EL_NOT,
    RT_EL_COUNT_
} RtEltOp;
typedef struct {
    int32_t op, nparams; /* nparams: per-channel inputs after x (PRELU 1, SOFTPLUS_P 2, else 0) */
    float alpha, beta;
} RtEltParams;

/* RT_OP_BINOP: a and b of one dtype (F32 or I32; BOOL for the logical
 * ops), N-d broadcast; comparisons and logical ops give BOOL, floor_div
 * and mod the operands' dtype (mod takes the divisor's sign; int32 x/0 and
 * x%0 give 0). */
typedef enum {
    RT_BO_FLOOR_DIV = 0,
    RT_BO_MOD,
    RT_BO_EQ,
    RT_BO_NE,
    RT_BO_GT,
    RT_BO_GE,
    RT_BO_LT,
    RT_BO_LE,
    RT_BO_AND,
    RT_BO_OR,
    RT_BO_XOR,
    RT_BO_COUNT_
} RtBinop;

/* RT_OP_REDUCEX: every MIL reduction, F32 or I32 x (y the same dtype; int32
 * sums wrap, the mean truncates); ARGMAX / ARGMIN take exactly one axis and
 * give I32 (the first index of the extreme). */
typedef enum {
    RT_RX_SUM = 0,
    RT_RX_MEAN,
    RT_RX_MAX,
    RT_RX_MIN,
    RT_RX_PROD,
    RT_RX_L1,
    RT_RX_L2,
    RT_RX_LOG_SUM,
    RT_RX_LOG_SUM_EXP,
    RT_RX_SUM_SQUARE,
    RT_RX_ARGMAX,
    RT_RX_ARGMIN,
    RT_RX_COUNT_
} RtReduceXOp;

/* Convolution and pooling over nsp = 1..3 spatial dims of x [B, C, *in]
 * (F32), output spatial dims out[], kernel k[], stride, dilation (pooling:
 * 1), zero padding pad_lo before each dim (pad_hi after: it bounds the
 * padded extent avg_pool counts).  Output position o reads input
 * o·stride + j·dil - pad_lo for kernel tap j; positions outside x are 0.
 *   PAD_NHWC (nsp 2): y [B, Hp, Wp, C] = x moved channels last, zero
 *           padded: y[b, h, w, c] = x[b, c, h - pad_lo0, w - pad_lo1] inside x, else 0;
 *   CONV_GEMM (nsp 2, one group): x is PAD_NHWC's y (its Hp, Wp cover every
 *           tap), W [Cout, KH·KW·C] with column (ky, kx, c), packed in
 *           64-column panels as a GEMM's W, bias [Cout]: each output row is
 *           a sum of GEMMs over the kernel rows (dilation 1 across: one GEMM
 *           of depth KW·C per kernel row, whose A rows are spans of x as it
 *           lies), written in y's channels-first layout;
 *   CONV:   W [Cout, C/groups, *k] (transposed: [C, Cout/groups, *k], and
 *           input i feeds output i·stride + j·dil - pad_lo), bias [Cout];
 *   POOL:   kind max, avg (exclude_pad: divide by the taps inside x, else
 *           by those inside the padded extent) or l2 (sqrt of the sum of squares). */
enum { RT_POOL_MAX = 0, RT_POOL_AVG, RT_POOL_L2 };
typedef struct {
    int32_t nsp, groups, has_bias, transpose, pool, exclude_pad, reserved[2];
    int32_t k[3], stride[3], dil[3], pad_lo[3], pad_hi[3], out[3];
} RtConvParams;

/* y[.., n] = Σ_k x[.., k] W[n, k] (+ bias[n]) with W palettized and read
 * that way: W [N, K] is `bits`-bit indices (1, 2, 3, 4, 6 or 8; K·bits a
 * whole number of bytes), row-major, packed low bits first (MILBlob's
 * order: index k of a 4-bit row in the low nibble of byte k/2 when k is
 * even; a 3-bit index may straddle two bytes), into the U8 weight indices
 * [N, K·bits/8];
 * lut F32 holds bn × bk palettes of 2^bits entries, palette (n / (N/bn), k /
 * (K/bk)) for W[n, k] (per-tensor: bn = bk = 1; per output channel: bn = N). */
typedef struct {
    int32_t bits, bn, bk, has_bias;
} RtLutParams;

/* y[.., n] = Σ_k x[.., k] W[n, k] (+ bias[n]) with W stored as 8-bit or
 * 4-bit integers and read that way: W[n, k] = (q[n, k] − offset[b]) ·
 * scale[b], b = (n / (N/bn)) · bk + k / (K/bk).  q is the U8 weight [N, K]
 * of bytes, or with RT_QG_INT4 [N, K/2] of nibbles (q[n, k] in the low four
 * bits of byte k/2 when k is even, the high four when odd: MILBlob's order;
 * K and K/bk even); the values are signed (two's complement) with
 * RT_QG_SIGNED.  scale and offset are F32 [bn · bk] (per tensor: bn = bk =
 * 1; per output channel: bn = N; blocks along K: bk > 1).  Each block is
 * summed as scale · (Σ x·q − offset · Σ x). */
enum { RT_QG_SIGNED = 1, RT_QG_INT4 = 2 };
typedef struct {
    int32_t flags, bn, bk, has_bias;
} RtQGemmParams;

/* y[.., n] = Σ_k x[.., k] W[n, k] (+ bias[n]) with W stored sparse and read
 * that way: mask U8 [N, ceil(K/8)] holds row n's bit k at bit k % 8 of byte
 * k / 8 of its row; values (F16 or F32, rank 1) holds the set bits' weights
 * in row-major order, then 16 more elements (zeros: a vector reads past the
 * last); start I32 [N + 1] is where each row's values begin.  Values past a
 * start or mask that point outside them count as zero, never a read out of
 * bounds. */
typedef struct {
    int32_t has_bias, reserved[3];
} RtSpGemmParams;

/* cumsum along axis: exclusive leaves each element out of its own sum,
 * reverse sums from the end.  int32 sums wrap. */
typedef struct {
    int32_t axis, exclusive, reverse, reserved;
} RtScanParams;

/* RT_OP_SCATTER: y = data, then every update applied in order (update:
 * y[i] = u; add, sub, mul, div, max, min: y[i] = y[i] op u; int32 div
 * truncates, x/0 gives 0).  F32 or I32 data, updates of its dtype.
 *   AXIS   indices [C], updates = data's shape with dim `axis` C:
 *          y[.., indices[c], ..] op= updates[.., c, ..]
 *   ALONG  indices and updates of one shape, data's rank, dims ≤ data's
 *          off the axis: y[p with p[axis] = indices[p]] op= updates[p]
 *   ND     indices [*I, K], updates [*I, *data.dims[K:]]:
 *          y[indices[i], ...] op= updates[i, ...]
 * Negative indices count from the end; an index out of range skips its
 * update and sets RT_EINDEX.  Applied by one part, in order: the last of
 * duplicate updates wins. */
enum { RT_SC_AXIS = 0, RT_SC_ALONG, RT_SC_ND };
enum { RT_SCM_UPDATE = 0, RT_SCM_ADD, RT_SCM_SUB, RT_SCM_MUL, RT_SCM_DIV, RT_SCM_MAX, RT_SCM_MIN, RT_SCM_COUNT_ };
typedef struct {
    int32_t kind, mode, axis, reserved;
} RtScatterParams;

/* RT_OP_SORT along axis of x (F32 or I32), stable (equal values keep their
 * order), ascending or descending, the first k of each line: outputs values
 * (x's dtype) if has_values, then indices (I32) if has_indices, each x's
 * shape with dim axis k.  NaN sorts as the largest value. */
typedef struct {
    int32_t axis, ascending, k, has_values, has_indices, reserved;
} RtSortParams;

/* RT_OP_RANDOM: element i of y draws from the counter-based generator
 * r(j) = splitmix64's finalizer of key + (j + 1)·0x9E3779B97F4A7C15, key =
 * the finalizer of the seed (as uint64).  u(j) = (r(j) >> 40) · 2⁻²⁴ in [0, 1).
 *   UNIFORM    y = a + (b - a) · u(i)
 *   NORMAL     y = a + b · sqrt(-2 ln(1 - u(2i))) · cos(2π u(2i + 1))
 *   BERNOULLI  y = u(i) < a ? 1 : 0
 *   CATEGORICAL x [.., N] (logits, or probabilities when probs is set),
 *              y [.., size] (F32): the index of the first category whose
 *              cumulative probability exceeds u(row · size + s). */
enum { RT_RAND_UNIFORM = 0, RT_RAND_NORMAL, RT_RAND_BERNOULLI, RT_RAND_CATEGORICAL, RT_RAND_COUNT_ };
typedef struct {
    int32_t kind, probs;
    int64_t seed;
    float a, b;
} RtRandomParams;
/* RT_OP_UPDATE writes x into the box of y that starts at begin (input 1;
 * all zeros without inputs 1 and 2) and leaves the rest of y as it is: y is a
 * state (rtb_state), or a temp an earlier op filled.  x has y's rank and
 * dims <= y's; an F16 y (an fp16 state) gets x rounded to fp16.  begin and
 * end are I32 [rank of y], read at run time: negative values count from the
 * end of the axis; bit a of begin_mask starts axis a at 0, of end_mask ends
 * it at y's dim, of squeeze_mask makes it one element at begin.  A box outside
 * y, or one whose extent (end - begin) is not x's, writes nothing and rt_run
 * returns RT_EINDEX. */
typedef struct {
    int32_t begin_mask, end_mask, squeeze_mask, reserved;
} RtUpdateParams;

/* RT_OP_GATHER_ND with B = batch_dims (RtAxisParams.axis): x [*b, *d, *r]
 * (b: B dims, d: K dims), indices [*b, *i, K], y [*b, *i, *r]:
 * y[b, i, ...] = x[b, indices[b, i, 0], .., indices[b, i, K-1], ...].  A
 * component counts from the end when negative; one outside -n..n-1 makes its
 * row zeros and rt_run return RT_EINDEX (no wrap: another row's data). */

/* RT_OP_SAMPLE: y[b, c, i, j] = x[b, c] (F32 [B, C, H, W]) sampled at the
 * point (u, v) (u along W, v along H) given for output position (i, j):
 *   affine 0  input 1 is F32 [B, Ho, Wo, 2]: (u, v) = in1[b, i, j, 0..1];
 *   affine 1  input 1 is F32 [D, 6], D = B or 1 (then shared): the output's
 *             own grid point (p, q) in coord_mode's units maps to
 *             u = a0 p + a1 q + a2, v = b0 p + b1 q + b2.
 * coord_mode: RT_COORD_PIXELS (as given), RT_COORD_MINUS_ONE_ONE ([-1, 1]),
 * RT_COORD_ZERO_ONE ([0, 1]); with align_corners the range's ends are the
 * corner pixels' centres (u = (c + 1)/2 · (W - 1)), without it their outer
 * edges (u = ((c + 1) W - 1)/2).  Nearest rounds half to even; bilinear
 * weights the four taps around (u, v).  A tap outside the image reads the
 * image padded per pad: constant (pad_value), border (the edge repeated),
 * reflection (mirrored about the edge pixel: |1 2 3| → 3 2 |1 2 3| 2 1),
 * symmetric (mirrored with the edge repeated: 2 1 |1 2 3| 3 2). */
enum { RT_SAMPLE_BILINEAR = 0, RT_SAMPLE_NEAREST };
enum { RT_PAD_CONSTANT = 0, RT_PAD_BORDER, RT_PAD_REFLECTION, RT_PAD_SYMMETRIC };
enum { RT_COORD_PIXELS = 0, RT_COORD_MINUS_ONE_ONE, RT_COORD_ZERO_ONE };
typedef struct {
    int32_t mode, pad, coord_mode, align_corners, affine;
    float pad_value;
} RtSampleParams;

/* The sampling grids of a bilinear resize along one dim, shared by the
 * backend's resize ops and RT_OP_CROP_RESIZE: output point i of m taken
 * from an extent of n input pixels (a whole dim, or a crop box's end -
 * start + 1), clamped to [0, n - 1].
 *   RT_GRID_ALIGN         ALIGN_CORNERS: i (n-1)/(m-1); m = 1: the middle
 *   RT_GRID_ALIGN_STRICT  STRICT_ALIGN_CORNERS: the same; m = 1: 0
 *   RT_GRID_HALF          UNALIGN_CORNERS: (i + 1/2) n/m - 1/2
 *   RT_GRID_LEGACY        upsample_bilinear without either flag: i n/m
 *   RT_GRID_DEFAULT       DEFAULT: i (n - n/m)/(m-1); m = 1: 0
 *   RT_GRID_OFFSET        OFFSET_CORNERS: (i + 1/2) max(1, n-1)/m
 * RT_GRID_NEAREST (floor(i n/m), unclamped) is resize_nearest_neighbor's. */
enum { RT_GRID_NEAREST, RT_GRID_ALIGN, RT_GRID_ALIGN_STRICT, RT_GRID_HALF, RT_GRID_LEGACY, RT_GRID_DEFAULT, RT_GRID_OFFSET };
static inline double rt_grid_point(int mode, int64_t i, double n, int64_t out) {
    double g, m = (double)out, di = (double)i;
    switch (mode) {
    case RT_GRID_NEAREST: return (double)(int64_t)(di * n / m);
    case RT_GRID_ALIGN:
    case RT_GRID_ALIGN_STRICT: g = out > 1 ? di * (n - 1) / (m - 1) : mode == RT_GRID_ALIGN ? (n - 1) / 2 : 0; break;
    case RT_GRID_HALF: g = (di + 0.5) * n / m - 0.5; break;
    case RT_GRID_LEGACY: g = di * n / m; break;
    case RT_GRID_DEFAULT: g = out > 1 ? di * (n - n / m) / (m - 1) : 0; break;
    default: g = (di + 0.5) * (n - 1 > 1 ? n - 1 : 1) / m;
    }
    return g < 0 ? 0 : g > n - 1 ? n - 1 : g;
}

/* RT_OP_CROP_RESIZE: y[k, c, i, j] = x[b_k, c] (F32 [B, C, H, W]) sampled
 * bilinearly at the grid point (i, j) of box k, resized to y's [Ho, Wo].
 * boxes is F32 [K, 4] (roi_index 0) or [K, 5] with the batch index first
 * (roi_index 1); b_k is that index, box indices[k] (I32 [K], has_indices),
 * or k.  Four coordinates per box in box_mode's order (RT_BOX_*: corners
 * or centre and size, height or width first), times spatial_scale, and
 * with normalized times (H - 1) or (W - 1), give the box [s, e] along each
 * dim; point i is s + rt_grid_point(grid, i, e - s + 1, Ho).  A point
 * outside the image reads pad_value.  all_batches (the ios15/16 roi of 4
 * coordinates): y is [K·B, C, Ho, Wo], every box cut from every image,
 * box-major.  A batch index outside [0, B) reads zeros and makes rt_run
 * return RT_EINDEX. */
enum { RT_BOX_CORNERS_H, RT_BOX_CORNERS_W, RT_BOX_CENTER_H, RT_BOX_CENTER_W };
typedef struct {
    int32_t grid, box_mode, normalized, roi_index, has_indices, all_batches;
    float spatial_scale, pad_value;
} RtCropParams;

/* RT_OP_NMS (non-maximum suppression), per batch b: boxes F32 [B, N, 4]
 * (centre x, centre y, width, height) and scores F32 [B, N, K]; with
 * boxes_last [B, 4, N] and [B, K, N] (ios17), the outputs likewise.  A box's
 * score is its best class's (the first on a tie).  Boxes with a score of at
 * least score_threshold (NaN never), best first (the lower index on a tie),
 * are kept unless one kept before (of the same best class, with per_class)
 * overlaps it with an IoU above iou_threshold, up to max_boxes of them.
 * Outputs: boxes [B, max_boxes, 4], scores [B, max_boxes, K], indices I32
 * [B, max_boxes] of the kept boxes in that order, padded with 0, 0 and -1;
 * counts I32 [B] (has_counts).  When no box passes the threshold, the best
 * box is given with a count of 1 (Core ML's NMS layer: never empty). */
typedef struct {
    float iou_threshold, score_threshold;
    int32_t max_boxes, per_class, boxes_last, has_counts;
} RtNmsParams;

/* ---- the builder ---- */
typedef struct RtPlanBuilder RtPlanBuilder;
typedef struct RtArtifact RtArtifact; /* see rt.h */

/* A new empty plan for a compile mode (RT_MODE_*).  NULL when out of memory or
 * mode is invalid.  Owned by the caller; free with rtb_free. */
RtPlanBuilder *rtb_new(int mode);
void rtb_free(RtPlanBuilder *b);

/* Every rtb_* returning int gives a non-negative result (a buffer index or 0)
 * or a negative RT_E* code; the first error sticks: later calls return it and
 * rtb_finish reports it with its message.  Names are copied. */

/* A graph input.  io_dtype is the type the caller passes at rt_run (F16, F32,
 * I32 or BOOL); inside, F16 and F32 become an F32 buffer.  Returns its index. */
int rtb_input(RtPlanBuilder *b, const char *name, RtDType io_dtype, int rank, const int64_t *dims);
/* An fp16 graph input kept as an F16 buffer: rt_run binds the caller's
 * tensor in place (no conversion, no copy).  Only a COPY (converting to F32)
 * and a flagged ATTENTION's K/V read F16 buffers.  Returns its index. */
int rtb_input_f16(RtPlanBuilder *b, const char *name, int rank, const int64_t *dims);
/* A state (MIL's state<tensor<...>>): a buffer of dtype F32, F16, I32 or
 * BOOL (its own: an fp16 state stays fp16) that the loaded model keeps
 * across runs, zero at load, set and read by name (rt_model_state_set/get).
 * Ops read it like an input (F16: a converting COPY or a flagged ATTENTION's
 * K/V); only RT_OP_UPDATE writes it.  Returns its index. */
int rtb_state(RtPlanBuilder *b, const char *name, RtDType dtype, int rank, const int64_t *dims);
/* A constant: data (numel × element size bytes, dense row-major) is copied.
 * dtype F32, F16, I32 or BOOL.  An F16 weight read by any op but a GEMM (as
 * its W) becomes F32 at that rtb_op; rtb_finish repacks every GEMM W into
 * 64-column panels of its own dtype (a weight also read by another op, which
 * made it F32, keeps that form and gets a packed twin). */
int rtb_weight(RtPlanBuilder *b, const char *name, RtDType dtype, int rank, const int64_t *dims, const void *data);
/* As rtb_weight, but data is borrowed, not copied: it must stay valid and
 * unchanged until rtb_finish returns (or the builder is freed).  Saves a copy
 * of every weight that rtb_finish repacks anyway (e.g. from a mapped file). */
int rtb_weight_ref(RtPlanBuilder *b, const char *name, RtDType dtype, int rank, const int64_t *dims, const void *data);
/* fn(ctx, data, n) is called (from any of rtb_finish's threads) once the
 * bytes of a borrowed weight were read for the last time, packed or copied;
 * never for bytes two weights share.  The owner may drop them then: a
 * build's weights and its packed artifact are then never both whole. */
void rtb_on_consumed(RtPlanBuilder *b, void (*fn)(void *ctx, const void *data, size_t n), void *ctx);
/* An intermediate of internal dtype F32, I32 or BOOL.  rtb_finish places it
 * in the arena of each program that uses it (both programs of mode 0 may
 * write the same output buffer). */
int rtb_temp(RtPlanBuilder *b, RtDType dtype, int rank, const int64_t *dims);
/* An I32 temp whose dims[0] is an upper bound on its rows: the one op that
 * writes it (RT_OP_NON_ZERO: the coordinates of x's nonzero elements, in
 * row-major order) sets how many rows a run wrote.  No op reads it; it is
 * returned as an output, whose rows rt_run reports (RtIoInfo.bounded). */
int rtb_temp_rows(RtPlanBuilder *b, int rank, const int64_t *dims);
/* Selects the program later rtb_op calls append to (mode 0 records both;
 * the default is the program of the builder's mode, bonded for mode 0). */
int rtb_program(RtPlanBuilder *b, RtProgram p);
/* Appends an op.  params points at the op's parameter struct (plen bytes,
 * exactly its size) or is NULL with plen 0 for ops without one.  Shapes are
 * checked here, so a bad op is reported at its call. */
int rtb_op(RtPlanBuilder *b, RtOpKind kind, const int *in, int nin, const int *out, int nout, const void *params,
           size_t plen);
/* Marks buffer buf (an input, temp or weight) as the graph output `name`,
 * returned to the caller as io_dtype (F16/F32 for F32 buffers). */
int rtb_output(RtPlanBuilder *b, const char *name, int buf, RtDType io_dtype);
/* Freezes the plan (call once): checks that every program writes every
 * output, packs GEMM weights for their kernels, plans each program's arena (bonded: by liveness;
 * non-bonded: every temp its own region) and serialises the artifact with
 * source_mil (opaque bytes, may be NULL/0) embedded.  On success *out is a new
 * artifact owned by the caller (rt_artifact_free); the builder stays owned by
 * the caller and may only be freed afterwards.  On failure returns RT_E* and
 * writes a message to err. */
int rtb_finish(RtPlanBuilder *b, const char *source_mil, size_t mlen, RtArtifact **out, char *err, size_t errlen);

/* Message of the first error, or "" (valid until the builder is freed). */
const char *rtb_error(const RtPlanBuilder *b);

const char *rt_strerror(int code);
const char *rt_op_name(RtOpKind kind);
size_t rt_dtype_size(RtDType t); /* 0 for an unknown type */

#ifdef __cplusplus
}
#endif
#endif
