/* Every op of the table: a good case whose declared result type is the
 * inferred one, and bad cases (rank, dims, const-ness, dtype mixing) with
 * their exact diagnostic text.  Each case is a function body around
 * `func main<ios18>(INPUTS)` returning y. */
#include "milc/mil.h"
#include "test.h"

typedef struct Case {
    const char *inputs;
    const char *body;
    const char *want; /* "" = no diagnostics; else the messages, one per line */
} Case;

#define F16 "tensor<fp16, "
static const Case cases[] = {
    /* const */
    {"", "tensor<fp16, [2]> y = const()[name = string(\"y\"), val = tensor<fp16, [2]>([1, -2.5])];", ""},
    {"", "tensor<fp16, [3]> y = const()[name = string(\"y\"), val = tensor<fp16, [2]>([1, -2.5])];",
     "const: 'y' is declared tensor<fp16, [3]> but the op gives tensor<fp16, [2]>"},
    {"", "tensor<fp16, [2]> y = const(x = fp16(1))[val = tensor<fp16, [2]>([1, 2])];", "const: unknown argument 'x'"},
    /* linear */
    {F16 "[2, 3]> x",
     F16 "[2, 2]> y = linear(bias = " F16 "[2]>([1, 2]), weight = " F16
         "[2, 3]>([[1, 0, 0], [0, 1, 0]]), x = x)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3]> x",
     F16 "[2, 2]> y = linear(weight = " F16 "[2, 4]>([[1, 0, 0, 0], [0, 1, 0, 0]]), x = x)[name = string(\"y\")];",
     "linear: 'x' [2, 3] and 'weight' [2, 4]: Din differs (3 vs 4)"},
    {F16 "[2, 3]> x, " F16 "[2, 3]> w", F16 "[2, 2]> y = linear(weight = w, x = x)[name = string(\"y\")];",
     "linear: argument 'weight' must be a const, but 'w' is computed at run time"},
    {F16 "[2, 3]> x",
     F16 "[2, 2]> y = linear(weight = tensor<fp32, [2, 3]>([[1, 0, 0], [0, 1, 0]]), x = x)[name = string(\"y\")];",
     "linear: argument 'weight' is fp32 but 'x' is fp16; they must have the same dtype"},
    {F16 "[2, 3]> x", F16 "[2, 2]> y = linear(weight = " F16 "[3]>([1, 0, 0]), x = x)[name = string(\"y\")];",
     "linear: 'weight' must have rank 2 [Dout, Din], not 1"},
    /* matmul */
    {F16 "[2, 1, 3, 4]> a, " F16 "[5, 4, 6]> b", F16 "[2, 5, 3, 6]> y = matmul(x = a, y = b)[name = string(\"y\")];",
     ""},
    {F16 "[4, 3]> a, " F16 "[6, 4]> b",
     F16 "[3, 6]> y = matmul(transpose_x = bool(true), transpose_y = bool(true), x = a, y = b)[name = string(\"y\")];",
     ""},
    {F16 "[4]> a, " F16 "[4, 6]> b", F16 "[6]> y = matmul(x = a, y = b)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a, " F16 "[4, 6]> b", F16 "[2, 6]> y = matmul(x = a, y = b)[name = string(\"y\")];",
     "matmul: inner dimensions differ: 'x' [2, 3] and 'y' [4, 6] (3 vs 4)"},
    {F16 "[2, 2, 3]> a, " F16 "[3, 3, 6]> b", F16 "[2, 2, 6]> y = matmul(x = a, y = b)[name = string(\"y\")];",
     "matmul: batch dimensions of 'x' [2, 2, 3] and 'y' [3, 3, 6] do not broadcast"},
    {F16 "[2, 3]> a, bool t, " F16 "[3, 6]> b",
     F16 "[2, 6]> y = matmul(transpose_x = t, x = a, y = b)[name = string(\"y\")];",
     "matmul: argument 'transpose_x' must be a const, but 't' is computed at run time"},
    {F16 "[2, 3]> a, tensor<fp32, [3, 6]> b", F16 "[2, 6]> y = matmul(x = a, y = b)[name = string(\"y\")];",
     "matmul: argument 'y' is fp32 but 'x' is fp16; they must have the same dtype"},
    /* conv */
    {F16 "[1, 8, 1, 16]> x, " F16 "[4, 8, 1, 1]> w",
     F16 "[1, 4, 1, 16]> y = conv(weight = w, x = x)[name = string(\"y\")];", ""},
    {F16 "[1, 2, 9, 9]> x, " F16 "[3, 2, 3, 3]> w",
     F16 "[1, 3, 5, 5]> y = conv(pad_type = string(\"same\"), strides = tensor<int32, [2]>([2, 2]), weight = w, x = "
         "x)[name = string(\"y\")];",
     ""},
    {F16 "[1, 2, 9, 9]> x, " F16 "[3, 2, 3, 3]> w",
     F16 "[1, 3, 9, 7]> y = conv(pad = tensor<int32, [4]>([1, 1, 0, 0]), pad_type = string(\"custom\"), weight = w, x "
         "= x)[name = string(\"y\")];",
     ""},
    {F16 "[1, 4, 6]> x, " F16 "[6, 2, 3]> w",
     F16 "[1, 6, 2]> y = conv(dilations = tensor<int32, [1]>([2]), groups = int32(2), weight = w, x = x)[name = "
         "string(\"y\")];",
     ""},
    {F16 "[1, 8, 1, 16]> x, " F16 "[4, 6, 1, 1]> w",
     F16 "[1, 4, 1, 16]> y = conv(weight = w, x = x)[name = string(\"y\")];",
     "conv: 'x' has 8 input channels but 'weight' [4, 6, 1, 1] with groups = 1 expects 6"},
    {F16 "[1, 8, 1, 16]> x, " F16 "[4, 8, 1, 1]> w",
     F16 "[1, 4, 1, 16]> y = conv(strides = tensor<int32, [1]>([1]), weight = w, x = x)[name = string(\"y\")];",
     "conv: 'strides' must have 2 values, not 1"},
    {F16 "[1, 8, 1, 16]> x, " F16 "[4, 8, 1, 1]> w",
     F16 "[1, 4, 1, 16]> y = conv(pad_type = string(\"full\"), weight = w, x = x)[name = string(\"y\")];",
     "conv: unknown pad_type \"full\" (valid, same, same_lower, custom)"},
    {F16 "[1, 8, 16]> x, " F16 "[4, 8, 1, 1]> w", F16 "[1, 4, 16]> y = conv(weight = w, x = x)[name = string(\"y\")];",
     "conv: 'weight' [4, 8, 1, 1] must have the rank of 'x' [1, 8, 16]"},
    /* elementwise binary */
    {F16 "[2, 1, 4]> a, " F16 "[3, 1]> b", F16 "[2, 3, 4]> y = add(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<int32, [3]> a", "tensor<int32, [3]> y = sub(x = a, y = int32(1))[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = real_div(x = a, y = fp16(0x1p+1))[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a, " F16 "[3, 2]> b", F16 "[2, 3]> y = mul(x = a, y = b)[name = string(\"y\")];",
     "mul: shapes [2, 3] and [3, 2] do not broadcast"},
    {"tensor<bool, [3]> a", "tensor<bool, [3]> y = pow(x = a, y = a)[name = string(\"y\")];",
     "pow: argument 'x' must be int32, fp16 or fp32, not bool\npow: argument 'y' must be int32, fp16 or fp32, not "
     "bool"},
    /* unary */
    {F16 "[2, 3]> a", F16 "[2, 3]> y = rsqrt(epsilon = fp16(0x1p-10), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = rsqrt(epsilon = " F16 "[1]>([1]), x = a)[name = string(\"y\")];",
     "rsqrt: argument 'epsilon' must be a scalar, not tensor<fp16, [1]>"},
    {F16 "[2, 3]> a", F16 "[3, 2]> y = sqrt(x = a)[name = string(\"y\")];",
     "sqrt: 'y' is declared tensor<fp16, [3, 2]> but the op gives tensor<fp16, [2, 3]>"},
    {"tensor<fp32, [2, 3]> a", "tensor<fp32, [2, 3]> y = silu(x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = gelu(mode = string(\"FAST\"), x = a)[name = string(\"y\")];",
     "gelu: unknown mode \"FAST\" (EXACT, TANH_APPROXIMATION, SIGMOID_APPROXIMATION)"},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = softmax(axis = int32(-2), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = softmax(axis = int32(2), x = a)[name = string(\"y\")];",
     "softmax: axis 2 is out of range for rank 2"},
    /* reductions */
    {F16 "[2, 3, 4]> a", F16 "[3]> y = reduce_sum(axes = tensor<int32, [2]>([0, -1]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 4]> a", F16 "[1, 1, 1]> y = reduce_max(keep_dims = bool(true), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3, 4]> a", F16 "[3]> y = reduce_mean(axes = tensor<int32, [2]>([0, -3]), x = a)[name = string(\"y\")];",
     "reduce_mean: 'axes' names axis 0 twice"},
    /* layer_norm */
    {F16 "[2, 3, 4]> a",
     F16 "[2, 3, 4]> y = layer_norm(axes = tensor<int32, [1]>([-1]), epsilon = fp16(0x1p-10), gamma = " F16
         "[4]>([1, 1, 1, 1]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 4]> a",
     F16 "[2, 3, 4]> y = layer_norm(axes = tensor<int32, [2]>([1, 2]), beta = " F16
         "[4]>([1, 1, 1, 1]), x = a)[name = string(\"y\")];",
     "layer_norm: 'beta' [4] must have the shape of 'x' on axes, [3, 4]"},
    {F16 "[2, 3, 4]> a, " F16 "[4]> g", F16 "[2, 3, 4]> y = layer_norm(gamma = g, x = a)[name = string(\"y\")];",
     "layer_norm: argument 'gamma' must be a const, but 'g' is computed at run time"},
    /* reshape */
    {F16 "[2, 3, 4]> a",
     F16 "[2, 2, 6]> y = reshape(shape = tensor<int32, [3]>([0, -1, 6]), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3, 4]> a, tensor<int32, [2]> s", F16 "[4, 6]> y = reshape(shape = s, x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3, 4]> a", F16 "[2, 12]> y = reshape(shape = tensor<int32, [2]>([-1, -1]), x = a)[name = string(\"y\")];",
     "reshape: 'shape' has more than one -1"},
    {F16 "[2, 3, 4]> a", F16 "[5, 5]> y = reshape(shape = tensor<int32, [2]>([5, 5]), x = a)[name = string(\"y\")];",
     "reshape: cannot reshape [2, 3, 4] (24 elements) to [5, 5] (25 elements)"},
    /* transpose */
    {F16 "[2, 3, 4]> a",
     F16 "[4, 2, 3]> y = transpose(perm = tensor<int32, [3]>([2, 0, 1]), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3, 4]> a",
     F16 "[3, 2, 4]> y = transpose(perm = tensor<int32, [2]>([1, 0]), x = a)[name = string(\"y\")];",
     "transpose: 'perm' [1, 0] must have 3 entries, one per dimension of 'x'"},
    /* concat */
    {F16 "[2, 3]> a, " F16 "[2, 5]> b",
     F16 "[2, 11]> y = concat(axis = int32(-1), interleave = bool(false), values = (a, b, a))[name = string(\"y\")];",
     ""},
    {F16 "[2, 3]> a, " F16 "[3, 3]> b",
     F16 "[2, 6]> y = concat(axis = int32(1), values = (a, b))[name = string(\"y\")];",
     "concat: 'b' [3, 3] does not match 'a' [2, 3] outside axis 1"},
    {F16 "[2, 3]> a, int32 ax", F16 "[4, 3]> y = concat(axis = ax, values = (a, a))[name = string(\"y\")];",
     "concat: argument 'axis' must be a const, but 'ax' is computed at run time"},
    /* split */
    {F16 "[2, 6]> a",
     F16 "[2, 2]> y, " F16
         "[2, 4]> z = split(axis = int32(1), split_sizes = tensor<int32, [2]>([2, 4]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 6]> a",
     F16 "[2, 2]> y, " F16 "[2, 2]> z = split(axis = int32(1), num_splits = int32(4), x = a)[name = string(\"y\")];",
     "split: dimension 1 of size 6 is not divisible into 4 splits"},
    /* slice_by_index */
    {F16 "[4, 10]> a",
     F16 "[2, 3]> y = slice_by_index(begin = tensor<int32, [2]>([1, 1]), end = tensor<int32, [2]>([3, -2]), stride = "
         "tensor<int32, [2]>([1, 3]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[4, 10]> a",
     F16 "[10]> y = slice_by_index(begin = tensor<int32, [2]>([2, 5]), begin_mask = tensor<bool, [2]>([false, true]), "
         "end = tensor<int32, [2]>([3, 0]), end_mask = tensor<bool, [2]>([false, true]), squeeze_mask = tensor<bool, "
         "[2]>([true, false]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[4, 10]> a",
     F16 "[4, 5]> y = slice_by_index(begin = tensor<int32, [2]>([0, 9]), end = tensor<int32, [2]>([4, 0]), stride = "
         "tensor<int32, [2]>([1, -2]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[4, 10]> a",
     F16 "[4, 10]> y = slice_by_index(begin = tensor<int32, [1]>([0]), end = tensor<int32, [2]>([4, 10]), x = a)[name "
         "= string(\"y\")];",
     "slice_by_index: 'begin' has 1 entries but 'x' has rank 2"},
    /* slice_by_size */
    {F16 "[4, 10]> a, tensor<int32, [2]> b",
     F16 "[2, 3]> y = slice_by_size(begin = b, size = tensor<int32, [2]>([2, 3]), x = a)[name = string(\"y\")];", ""},
    {F16 "[4, 10]> a",
     F16 "[2, 3]> y = slice_by_size(begin = tensor<int32, [2]>([3, 0]), size = tensor<int32, [2]>([2, 3]), x = a)[name "
         "= string(\"y\")];",
     "slice_by_size: slice [3, 5) is outside dimension 0 of size 4"},
    /* gather */
    {F16 "[4, 10, 3]> a, tensor<int32, [2, 5]> i",
     F16 "[4, 2, 5, 3]> y = gather(axis = int32(1), indices = i, x = a)[name = string(\"y\")];", ""},
    {F16 "[4, 10, 3]> a, tensor<int32, [4, 5]> i",
     F16 "[4, 5, 3]> y = gather(axis = int32(1), batch_dims = int32(1), indices = i, x = a)[name = string(\"y\")];",
     ""},
    {F16 "[4, 10]> a, tensor<int32, [5]> i",
     F16 "[5, 10]> y = gather(axis = int32(0), batch_dims = int32(1), indices = i, x = a)[name = string(\"y\")];",
     "gather: 'batch_dims' 1 must be in 0..min(rank of indices, axis)"},
    /* cast */
    {F16 "[2, 3]> a", "tensor<fp32, [2, 3]> y = cast(dtype = string(\"fp32\"), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", "tensor<fp32, [2, 3]> y = cast(dtype = string(\"fp8\"), x = a)[name = string(\"y\")];",
     "cast: cannot cast to \"fp8\" in ios17 and later (fp16, fp32, int8, uint8, int16, uint16, int32, bool)"},
    {F16 "[2, 3]> a, string d", "tensor<fp32, [2, 3]> y = cast(dtype = d, x = a)[name = string(\"y\")];",
     "cast: argument 'dtype' must be a const, but 'd' is computed at run time"},
    /* band_part */
    {F16 "[2, 3, 3]> a",
     F16 "[2, 3, 3]> y = band_part(lower = int32(-1), upper = int32(0), x = a)[name = string(\"y\")];", ""},
    {F16 "[3]> a", F16 "[3]> y = band_part(x = a)[name = string(\"y\")];", "band_part: 'x' must have rank >= 2, not 1"},
    /* expand_dims / squeeze */
    {F16 "[2, 3]> a",
     F16 "[1, 2, 3, 1]> y = expand_dims(axes = tensor<int32, [2]>([0, -1]), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[1, 2, 3]> y = expand_dims(axes = tensor<int32, [2]>([0, 0]), x = a)[name = string(\"y\")];",
     "expand_dims: 'axes' names axis 0 twice"},
    {F16 "[1, 2, 1, 3]> a", F16 "[2, 3]> y = squeeze(x = a)[name = string(\"y\")];", ""},
    {F16 "[1, 2, 1, 3]> a", F16 "[1, 2, 3]> y = squeeze(axes = tensor<int32, [1]>([1]), x = a)[name = string(\"y\")];",
     "squeeze: dimension 1 of 'x' has size 2, not 1"},
    /* tile */
    {F16 "[2, 3]> a", F16 "[4, 9]> y = tile(reps = tensor<int32, [2]>([2, 3]), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[4, 3]> y = tile(reps = tensor<int32, [1]>([2]), x = a)[name = string(\"y\")];",
     "tile: 'reps' has 1 entries but 'x' has rank 2"},
    /* select */
    {"tensor<bool, [2, 1]> c, " F16 "[3]> a",
     F16 "[2, 3]> y = select(a = a, b = fp16(0), cond = c)[name = string(\"y\")];", ""},
    {F16 "[2, 1]> c, " F16 "[3]> a", F16 "[2, 3]> y = select(a = a, b = a, cond = c)[name = string(\"y\")];",
     "select: argument 'cond' must be bool, not fp16"},
    /* scaled_dot_product_attention */
    {F16 "[1, 4, 8, 16]> q, " F16 "[1, 4, 12, 16]> k, " F16 "[1, 4, 12, 32]> v, tensor<bool, [8, 12]> m",
     F16 "[1, 4, 8, 32]> y = scaled_dot_product_attention(attn_mask = m, key = k, query = q, value = v)[name = "
         "string(\"y\")];",
     ""},
    {F16 "[1, 4, 8, 16]> q, " F16 "[1, 4, 12, 8]> k, " F16 "[1, 4, 12, 32]> v",
     F16 "[1, 4, 8, 32]> y = scaled_dot_product_attention(key = k, query = q, value = v)[name = string(\"y\")];",
     "scaled_dot_product_attention: 'query' [1, 4, 8, 16] [B, *, L, E], 'key' [1, 4, 12, 8] [B, *, S, E] and 'value' "
     "[1, 4, 12, 32] [B, *, S, Ev] do not agree"},
    {F16 "[1, 4, 8, 16]> q, " F16 "[1, 4, 12, 16]> k, " F16 "[1, 4, 12, 32]> v, tensor<int32, [8, 12]> m",
     F16 "[1, 4, 8, 32]> y = scaled_dot_product_attention(attn_mask = m, key = k, query = q, value = v)[name = "
         "string(\"y\")];",
     "scaled_dot_product_attention: 'attn_mask' must be bool or fp16, not int32"},
    /* the rest of the elementwise family */
    {F16 "[2, 3]> a, " F16 "[1, 3]> b", F16 "[2, 3]> y = mul(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp32, [2, 3]> a", "tensor<fp32, [2, 3]> y = pow(x = a, y = fp32(0x1.8p+1))[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = sqrt(x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = exp(x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = tanh(x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = sigmoid(x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a", F16 "[2, 3]> y = gelu(mode = string(\"SIGMOID_APPROXIMATION\"), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 4]> a",
     F16
     "[2, 1, 4]> y = reduce_mean(axes = tensor<int32, [1]>([1]), keep_dims = bool(true), x = a)[name = string(\"y\")];",
     ""},
    /* dynamic dims flow through */
    {F16 "[?, 3]> a, " F16 "[3, 5]> b", F16 "[?, 5]> y = matmul(x = a, y = b)[name = string(\"y\")];", ""},
    /* elementwise unary (fp16/fp32; abs sign square exp2 also int32) */
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = acos(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = asin(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = atan(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = atanh(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = ceil(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = cos(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = cosh(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = erf(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = floor(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = round(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = sin(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = sinh(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = tan(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = relu(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = relu6(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = softplus(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = softsign(x = x)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> x", "tensor<int32, [2, 3]> y = abs(x = x)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> x", "tensor<int32, [2, 3]> y = sign(x = x)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> x", "tensor<int32, [2, 3]> y = square(x = x)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> x", "tensor<int32, [2, 3]> y = exp2(x = x)[name = string(\"y\")];", ""},
    {"tensor<int32, [2]> x", "tensor<int32, [2]> y = relu(x = x)[name = string(\"y\")];",
     "relu: argument 'x' must be fp16 or fp32, not int32"},
    {"tensor<bool, [2]> x", "tensor<bool, [2]> y = abs(x = x)[name = string(\"y\")];",
     "abs: argument 'x' must be int32, fp16 or fp32, not bool"},
    {"tensor<fp16, [2]> x", "tensor<fp16, [2]> y = log(epsilon = fp16(0.001), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2]> x", "tensor<fp16, [2]> y = inverse(x = x)[name = string(\"y\")];", ""},
    /* activations with parameters */
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = elu(alpha = fp16(0.5), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = leaky_relu(alpha = fp16(0.5), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = thresholded_relu(alpha = fp16(0.5), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = clamped_relu(alpha = fp16(0.5), beta = fp16(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = linear_activation(alpha = fp16(0.5), beta = fp16(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = scaled_tanh(alpha = fp16(0.5), beta = fp16(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = sigmoid_hard(alpha = fp16(0.5), beta = fp16(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = clip(alpha = fp16(0.5), beta = fp16(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = threshold(alpha = fp16(0.5), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3]> x, fp16 a", "tensor<fp16, [2, 3]> y = elu(alpha = a, x = x)[name = string(\"y\")];",
     "elu: argument 'alpha' must be a const, but 'a' is computed at run time"},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = leaky_relu(alpha = tensor<fp16, [1]>([0.5]), x = x)[name = string(\"y\")];",
     "leaky_relu: argument 'alpha' must be a scalar, not tensor<fp16, [1]>"},
    {"tensor<fp16, [1, 3, 2, 2]> x",
     "tensor<fp16, [1, 3, 2, 2]> y = prelu(alpha = tensor<fp16, [3]>([1, 2, 3]), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [1, 3, 2, 2]> x",
     "tensor<fp16, [1, 3, 2, 2]> y = softplus_parametric(alpha = tensor<fp16, [3]>([1, 2, 3]), beta = tensor<fp16, "
     "[3]>([1, 2, 3]), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 3, 2, 2]> x",
     "tensor<fp16, [1, 3, 2, 2]> y = prelu(alpha = tensor<fp16, [2]>([1, 2]), x = x)[name = string(\"y\")];",
     "prelu: 'alpha' [2] must have one value per channel of 'x' (3)"},
    {"tensor<fp16, [1, 3, 2]> x",
     "tensor<fp16, [1, 3, 2]> y = prelu(alpha = tensor<fp16, [3]>([1, 2, 3]), x = x)[name = string(\"y\")];",
     "prelu: 'alpha' must hold one value repeated when 'x' has rank 3 (per-channel alphas need rank 4)"},
    {"tensor<fp16, [3, 2]> x",
     "tensor<fp16, [3, 2]> y = prelu(alpha = tensor<fp16, [3]>([1, 2, 3]), x = x)[name = string(\"y\")];",
     "prelu: 'x' must be [B, C, *] (rank >= 3), not rank 2"},
    /* binary, comparison, logical */
    {"tensor<int32, [2, 3]> a, tensor<int32, [3]> b",
     "tensor<int32, [2, 3]> y = floor_div(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> a, tensor<int32, [3]> b",
     "tensor<int32, [2, 3]> y = maximum(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> a, tensor<int32, [3]> b",
     "tensor<int32, [2, 3]> y = minimum(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> a, tensor<int32, [3]> b",
     "tensor<int32, [2, 3]> y = mod(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [1]> b",
     "tensor<bool, [2, 3]> y = equal(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [1]> b",
     "tensor<bool, [2, 3]> y = not_equal(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [1]> b",
     "tensor<bool, [2, 3]> y = greater(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [1]> b",
     "tensor<bool, [2, 3]> y = greater_equal(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [1]> b",
     "tensor<bool, [2, 3]> y = less(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [1]> b",
     "tensor<bool, [2, 3]> y = less_equal(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<bool, [2, 3]> a, tensor<bool, [2, 1]> b",
     "tensor<bool, [2, 3]> y = logical_and(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<bool, [2, 3]> a, tensor<bool, [2, 1]> b",
     "tensor<bool, [2, 3]> y = logical_or(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<bool, [2, 3]> a, tensor<bool, [2, 1]> b",
     "tensor<bool, [2, 3]> y = logical_xor(x = a, y = b)[name = string(\"y\")];", ""},
    {"tensor<bool, [2]> a", "tensor<bool, [2]> y = logical_not(x = a)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [2]> b",
     "tensor<bool, [2, 3]> y = less(x = a, y = b)[name = string(\"y\")];",
     "less: shapes [2, 3] and [2] do not broadcast"},
    {"tensor<fp16, [2]> a, tensor<fp16, [2]> b",
     "tensor<bool, [2]> y = logical_or(x = a, y = b)[name = string(\"y\")];",
     "logical_or: argument 'x' must be bool, not fp16\nlogical_or: argument 'y' must be bool, not fp16"},
    {"tensor<fp16, [2]> a, tensor<fp16, [2]> b", "tensor<fp16, [2]> y = equal(x = a, y = b)[name = string(\"y\")];",
     "equal: 'y' is declared tensor<fp16, [2]> but the op gives tensor<bool, [2]>"},
    /* reductions */
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_min(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = x)[name = "
     "string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_prod(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = x)[name = "
     "string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_l1_norm(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = x)[name "
     "= string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_l2_norm(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = x)[name "
     "= string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_log_sum(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = x)[name "
     "= string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_log_sum_exp(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = "
     "x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<fp16, [2, 1, 4]> y = reduce_sum_square(axes = tensor<int32, [1]>([-2]), keep_dims = bool(true), x = "
     "x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<int32, [2, 3]> y = reduce_argmax(axis = int32(-1), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<int32, [2, 3]> y = reduce_argmin(axis = int32(-1), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<int32, [2, 3]> y = reduce_argmax(axis = int32(3), x = x)[name = string(\"y\")];",
     "reduce_argmax: axis 3 is out of range for rank 3"},
    {"tensor<fp16, [2, 3, 4]> x",
     "tensor<int32, [2, 3]> y = reduce_argmax(axis = int32(-1), output_dtype = string(\"fp16\"), x = x)[name = "
     "string(\"y\")];",
     "reduce_argmax: 'output_dtype' must be \"int32\" or \"uint16\", not \"fp16\""},
    {"tensor<fp16, [2, 3]> x, tensor<int32, [1]> ax",
     "tensor<fp16, [2]> y = reduce_min(axes = ax, x = x)[name = string(\"y\")];",
     "reduce_min: argument 'axes' must be a const, but 'ax' is computed at run time"},
    /* normalization, pooling, shape, stack */
    {"tensor<fp16, [1, 3, 4]> x", "tensor<fp16, [1, 3, 4]> y = l2_norm(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [3, 4]> x", "tensor<fp16, [3, 4]> y = l2_norm(x = x)[name = string(\"y\")];",
     "l2_norm: 'x' must have rank >= 3, not 2"},
    {"tensor<fp16, [1, 2, 9, 9]> x",
     "tensor<fp16, [1, 2, 4, 4]> y = max_pool(kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = string(\"valid\"), "
     "strides = tensor<int32, [2]>([2, 2]), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 2, 9, 9]> x",
     "tensor<fp16, [1, 2, 4, 4]> y = avg_pool(kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = string(\"valid\"), "
     "strides = tensor<int32, [2]>([2, 2]), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 2, 9, 9]> x",
     "tensor<fp16, [1, 2, 4, 4]> y = l2_pool(kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = string(\"valid\"), "
     "strides = tensor<int32, [2]>([2, 2]), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 2, 9, 9]> x",
     "tensor<fp16, [1, 2, 5, 5]> y = max_pool(kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = string(\"same\"), "
     "strides = tensor<int32, [2]>([2, 2]), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 2, 9, 9]> x",
     "tensor<fp16, [1, 2, 5, 5]> y = max_pool(ceil_mode = bool(true), kernel_sizes = tensor<int32, [2]>([3, 3]), "
     "pad_type = string(\"valid\"), strides = tensor<int32, [2]>([2, 2]), x = x)[name = string(\"y\")];",
     "max_pool: 'y' is declared tensor<fp16, [1, 2, 5, 5]> but the op gives tensor<fp16, [1, 2, 4, 4]>"},
    {"tensor<fp16, [1, 2, 2, 2]> x",
     "tensor<fp16, [1, 2, 1, 1]> y = avg_pool(kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = string(\"valid\"), "
     "x = x)[name = string(\"y\")];",
     "avg_pool: kernel 3 is larger than the padded input 2 in spatial dim 0"},
    {"tensor<fp16, [2, 9]> x",
     "tensor<fp16, [2, 4]> y = max_pool(kernel_sizes = tensor<int32, [1]>([3]), pad_type = string(\"valid\"), x = "
     "x)[name = string(\"y\")];",
     "max_pool: 'x' must be [N, C, *spatial] with 1 to 3 spatial dims (rank 3 to 5), not rank 2"},
    {"tensor<fp16, [1, 2, 9]> x",
     "tensor<fp16, [1, 2, 7]> y = max_pool(kernel_sizes = tensor<int32, [2]>([3, 3]), pad_type = string(\"valid\"), x "
     "= x)[name = string(\"y\")];",
     "max_pool: 'kernel_sizes' must have 1 values, not 2"},
    {"tensor<fp16, [2, 3]> x", "tensor<int32, [2]> y = shape(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [2, 3]> b",
     "tensor<fp16, [2, 2, 3]> y = stack(axis = int32(-2), values = (a, b))[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> a, tensor<fp16, [3, 3]> b",
     "tensor<fp16, [2, 2, 3]> y = stack(axis = int32(0), values = (a, b))[name = string(\"y\")];",
     "stack: 'b' [3, 3] and 'a' [2, 3] must have the same shape"},
    {"tensor<fp16, [2, 3]> a",
     "tensor<fp16, [2, 2, 3]> y = stack(axis = int32(3), values = (a, a))[name = string(\"y\")];",
     "stack: axis 3 is out of range for rank 3"},

    /* normalizations, scans, gather/scatter, resampling, random, quantization, constexpr_* */
    {"tensor<fp16, [1, 2, 3]> x",
     "tensor<fp16, [1, 2, 3]> y = batch_norm(mean = tensor<fp16, [2]>([1, 2]), variance = tensor<fp16, [2]>([1, 2]), x "
     "= x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 2, 3]> x, tensor<fp16, [2]> m",
     "tensor<fp16, [1, 2, 3]> y = batch_norm(mean = m, variance = tensor<fp16, [2]>([1, 2]), x = x)[name = "
     "string(\"y\")];",
     "batch_norm: argument 'mean' must be a const, but 'm' is computed at run time"},
    {"tensor<fp16, [1, 2, 3]> x",
     "tensor<fp16, [1, 2, 3]> y = instance_norm(gamma = tensor<fp16, [2]>([1, 2]), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [1, 3, 3]> x",
     "tensor<fp16, [1, 3, 3]> y = instance_norm(gamma = tensor<fp16, [2]>([1, 2]), x = x)[name = string(\"y\")];",
     "instance_norm: 'gamma' [2] must have one value per channel of 'x' (3)"},
    {"tensor<fp16, [1, 2, 3]> x",
     "tensor<fp16, [1, 2, 3]> y = local_response_norm(size = int32(1), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [3]> x", "tensor<fp16, [3]> y = local_response_norm(size = int32(1), x = x)[name = string(\"y\")];",
     "local_response_norm: 'x' must be [N, C, *] (rank >= 2), not rank 1"},
    {"tensor<int32, [2, 3]> x", "tensor<int32, [2, 3]> y = cumsum(axis = int32(-1), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = reverse(axes = tensor<int32, [1]>([0]), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<int32, [2, 3]> y = argsort(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = argsort(x = x)[name = string(\"y\")];",
     "argsort: 'y' is declared tensor<fp16, [2, 3]> but the op gives tensor<int32, [2, 3]>"},
    {"tensor<fp16, [2, 3]> x", "tensor<fp16, [2, 3]> y = identity(x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3, 4]> x", "tensor<fp16, [6, 4]> y = flatten2d(axis = int32(2), x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3, 4]> x", "tensor<fp16, [6, 4]> y = flatten2d(axis = int32(4), x = x)[name = string(\"y\")];",
     "flatten2d: axis 4 is out of range for rank 3"},
    {"", "tensor<int32, [2, 3]> y = fill(shape = tensor<int32, [2]>([2, 3]), value = int32(7))[name = string(\"y\")];",
     ""},
    {"tensor<int32, [2]> s", "tensor<fp32, [?, ?]> y = fill(shape = s)[name = string(\"y\")];", ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [2, 1]> y = gather_along_axis(axis = int32(1), indices = tensor<int32, [2, 1]>([[0], [2]]), x = "
     "x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<fp16, [3, 1]> y = gather_along_axis(axis = int32(1), indices = tensor<int32, [3, 1]>([[0], [2], [1]]), x "
     "= x)[name = string(\"y\")];",
     "gather_along_axis: 'indices' [3, 1] must have the rank of 'x' [2, 3] and its dims off axis 1"},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [2, 2]> u",
     "tensor<fp16, [2, 3]> y = scatter(axis = int32(1), data = d, indices = tensor<int32, [2]>([0, 2]), updates = "
     "u)[name = string(\"y\")];",
     ""},
    /* updates must be data[:axis] + indices.shape + data[axis+1:] (milc took any updates before) */
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [2, 1]> u",
     "tensor<fp16, [2, 3]> y = scatter(axis = int32(1), data = d, indices = tensor<int32, [2, 1]>([[0], [2]]), updates "
     "= u)[name = string(\"y\")];",
     "scatter: 'updates' [2, 1] must be [2, 2, 1]"},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [2, 2]> u",
     "tensor<fp16, [2, 3]> y = scatter(axis = int32(1), data = d, indices = tensor<int32, [2]>([0, 3]), updates = u, "
     "validate_indices = bool(true))[name = string(\"y\")];",
     "scatter: 'indices' entry 3 is outside [0, 3) (validate_indices)"},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [3, 1]> u",
     "tensor<fp16, [2, 3]> y = scatter_along_axis(axis = int32(1), data = d, indices = tensor<int32, [2, 1]>([[0], "
     "[2]]), updates = u)[name = string(\"y\")];",
     "scatter_along_axis: 'updates' [3, 1] must be [2, 1]"},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [1, 2]> u",
     "tensor<fp16, [2, 3]> y = scatter_nd(data = d, indices = tensor<int32, [1, 1]>([[0]]), updates = u)[name = "
     "string(\"y\")];",
     "scatter_nd: 'updates' [1, 2] must be [1, 3]"},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [2, 1]> u",
     "tensor<fp16, [2, 3]> y = scatter_along_axis(axis = int32(1), data = d, indices = tensor<int32, [2, 1]>([[0], "
     "[2]]), updates = u)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [1, 3]> u",
     "tensor<fp16, [2, 3]> y = scatter_nd(data = d, indices = tensor<int32, [1, 1]>([[0]]), mode = string(\"update\"), "
     "updates = u)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3]> d, tensor<fp16, [1, 3]> u",
     "tensor<fp16, [2, 3]> y = scatter_nd(data = d, indices = tensor<int32, [1, 1]>([[0]]), mode = string(\"xor\"), "
     "updates = u)[name = string(\"y\")];",
     "scatter_nd: unknown mode \"xor\" (update, add, sub, mul, div, max, min)"},
    {"tensor<fp16, [1, 2, 4, 6]> x",
     "tensor<fp16, [1, 8, 2, 3]> y = space_to_depth(block_size = int32(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [1, 8, 2, 3]> x",
     "tensor<fp16, [1, 2, 4, 6]> y = depth_to_space(block_size = int32(2), x = x)[name = string(\"y\")];", ""},
    {"tensor<fp16, [1, 2, 3]> x",
     "tensor<fp16, [1, 8, 1]> y = space_to_depth(block_size = int32(2), x = x)[name = string(\"y\")];",
     "space_to_depth: 'x' must be [N, C, H, W], not rank 3"},
    {"tensor<fp16, [1, 2, 3, 4]> x",
     "tensor<fp16, [1, 2, 6, 8]> y = upsample_nearest_neighbor(scale_factor_height = int32(2), scale_factor_width = "
     "int32(2), x = x)[name = string(\"y\")];",
     ""},
    {"",
     "tensor<fp32, [2, 3]> y = random_normal(seed = int32(1), shape = tensor<int32, [2]>([2, 3]))[name = "
     "string(\"y\")];",
     ""},
    {"",
     "tensor<fp32, [4]> y = random_uniform(high = fp32(2), low = fp32(-1), shape = tensor<int32, [1]>([4]))[name = "
     "string(\"y\")];",
     ""},
    {"",
     "tensor<fp16, [4]> y = random_bernoulli(prob = fp16(0.25), shape = tensor<int32, [1]>([4]))[name = "
     "string(\"y\")];",
     ""},
    {"", "tensor<fp16, [4]> y = random_normal(mean = fp16(0), shape = tensor<int32, [1]>([4]))[name = string(\"y\")];",
     "random_normal: the random_normal parameters are fp16 but 'stddev' defaults to fp32: give it as fp16 too"},
    {"tensor<fp16, [2, 3]> x",
     "tensor<int8, [2, 3]> y = quantize(input = x, output_dtype = string(\"int8\"), scale = fp16(0.5))[name = "
     "string(\"y\")];",
     ""},
    {"tensor<fp16, [2, 3]> x",
     "tensor<int8, [2, 3]> y = quantize(input = x, output_dtype = string(\"int32\"), scale = fp16(0.5))[name = "
     "string(\"y\")];",
     "quantize: 'output_dtype' must be \"int8\" or \"uint8\", not \"int32\""},
    {"tensor<uint8, [2, 3]> x",
     "tensor<fp16, [2, 3]> y = dequantize(input = x, scale = fp16(0.5), zero_point = uint8(3))[name = string(\"y\")];",
     ""},
    {"",
     "tensor<fp16, [2, 2]> y = constexpr_affine_dequantize(axis = int32(0), quantized_data = tensor<uint8, [2, "
     "2]>([[1, 2], [3, 4]]), scale = fp16(0.5), zero_point = uint8(1))[name = string(\"y\")];",
     ""},
    /* Apple's form of the iOS16 constexpr ops: the arguments as attributes */
    {"",
     "tensor<fp16, [2, 2]> y = constexpr_affine_dequantize()[axis = int32(0), name = string(\"y\"), quantized_data "
     "= tensor<uint8, [2, 2]>([[1, 2], [3, 4]]), scale = fp16(0.5), zero_point = uint8(1)];",
     ""},
    {"",
     "tensor<fp16, [2, 2]> y = constexpr_affine_dequantize(axis = int32(0))[axis = int32(1), name = string(\"y\"), "
     "quantized_data = tensor<uint8, [2, 2]>([[1, 2], [3, 4]]), scale = fp16(0.5), zero_point = uint8(1)];",
     "constexpr_affine_dequantize: unknown attribute 'axis'"},
    {"tensor<uint8, [2, 2]> q",
     "tensor<fp16, [2, 2]> y = constexpr_affine_dequantize(axis = int32(0), quantized_data = q, scale = fp16(0.5), "
     "zero_point = uint8(1))[name = string(\"y\")];",
     "constexpr_affine_dequantize: argument 'quantized_data' must be a const, but 'q' is computed at run time"},
    {"",
     "tensor<fp32, [2]> y = constexpr_cast(output_dtype = string(\"fp32\"), source_val = tensor<fp16, [2]>([1, "
     "2]))[name = string(\"y\")];",
     ""},
    {"",
     "tensor<fp16, [2, 2]> y = constexpr_blockwise_shift_scale(data = tensor<int8, [2, 2]>([[1, 2], [3, 4]]), scale = "
     "tensor<fp16, [2, 1]>([[1], [2]]))[name = string(\"y\")];",
     ""},
    {"",
     "tensor<fp16, [2, 4]> y = constexpr_lut_to_dense(indices = tensor<uint1, [2, 4]>([[0, 1, 1, 0], [1, 1, 0, 0]]), "
     "lut = tensor<fp16, [1, 1, 2, 1]>([[[[1], [2]]]]))[name = string(\"y\")];",
     ""},
    {"",
     "tensor<fp16, [2, 4]> y = constexpr_lut_to_dense(indices = tensor<uint2, [2, 4]>([[0, 1, 1, 0], [1, 1, 0, 0]]), "
     "lut = tensor<fp16, [1, 1, 2, 1]>([[[[1], [2]]]]))[name = string(\"y\")];",
     "constexpr_lut_to_dense: 'lut' has 2 entries per palette but uint2 indices need 4"},
    {"",
     "tensor<fp16, [2, 2]> y = constexpr_sparse_to_dense(mask = tensor<uint1, [2, 2]>([[1, 0], [0, 1]]), nonzero_data "
     "= tensor<fp16, [2]>([5, 6]))[name = string(\"y\")];",
     ""},

    /* states (ios18) */
    {"state<tensor<fp16, [2]>> s", "tensor<fp16, [2]> y = read_state(input = s)[name = string(\"y\")];", ""},
    {"state<tensor<fp16, [2]>> s, tensor<fp16, [2]> y", "write_state(data = y, input = s)[name = string(\"w\")];", ""},
    {"state<tensor<fp16, [2]>> s, tensor<fp16, [2]> v",
     "tensor<fp16, [2]> y = coreml_update_state(state = s, value = v)[name = string(\"y\")];", ""},
    {"state<tensor<fp16, [2]>> s, tensor<fp16, [3]> v",
     "tensor<fp16, [3]> y = coreml_update_state(state = s, value = v)[name = string(\"y\")];",
     "coreml_update_state: 'value' tensor<fp16, [3]> does not match the state's tensor<fp16, [2]>"},
    /* conv_transpose */
    {"tensor<fp16, [1, 2, 3, 3]> x, tensor<fp16, [2, 4, 3, 3]> w",
     "tensor<fp16, [1, 4, 7, 7]> y = conv_transpose(strides = tensor<int32, [2]>([2, 2]), weight = w, x = x)[name = "
     "string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 2, 3, 3]> x, tensor<fp16, [2, 4, 3, 3]> w",
     "tensor<fp16, [1, 4, 6, 6]> y = conv_transpose(pad_type = string(\"same\"), strides = tensor<int32, [2]>([2, 2]), "
     "weight = w, x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp16, [1, 3, 3, 3]> x, tensor<fp16, [2, 4, 3, 3]> w",
     "tensor<fp16, [1, 4, 5, 5]> y = conv_transpose(weight = w, x = x)[name = string(\"y\")];",
     "conv_transpose: 'x' has 3 input channels but 'weight' [2, 4, 3, 3] has 2"},
    {"tensor<fp16, [1, 2, 3, 3]> x, tensor<fp16, [2, 4, 3, 3]> w",
     "tensor<fp16, [1, 4, 5, 5]> y = conv_transpose(pad_type = string(\"same_lower\"), weight = w, x = x)[name = "
     "string(\"y\")];",
     "conv_transpose: pad_type \"same_lower\" must be valid, same or custom"},
    /* slice_update */
    {F16 "[1, 4, 8, 16]> kv, " F16 "[1, 4, 1, 16]> u",
     F16 "[1, 4, 8, 16]> y = slice_update(begin = tensor<int32, [4]>([0, 0, 3, 0]), end = tensor<int32, [4]>([1, 4, 4, "
         "16]), update = u, x = kv)[name = string(\"y\")];",
     ""},
    {F16 "[1, 4, 8, 16]> kv, " F16 "[1, 4, 2, 16]> u",
     F16 "[1, 4, 8, 16]> y = slice_update(begin = tensor<int32, [4]>([0, 0, 3, 0]), end = tensor<int32, [4]>([1, 4, 4, "
         "16]), update = u, x = kv)[name = string(\"y\")];",
     "slice_update: 'update' [1, 4, 2, 16] must have the shape of the slice, [1, 4, 1, 16]"},
    {F16 "[4]> x, fp16 u",
     F16 "[4]> y = slice_update(begin = tensor<int32, [1]>([1]), end = tensor<int32, [1]>([2]), squeeze_mask = "
         "tensor<bool, [1]>([true]), update = u, x = x)[name = string(\"y\")];",
     "slice_update: 'update' cannot be a scalar; give it the slice's shape with rank >= 1"},
    /* pad */
    {F16 "[2, 3]> a", F16 "[3, 8]> y = pad(pad = tensor<int32, [4]>([1, 0, 2, 3]), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 3]> a",
     F16 "[2, 5]> y = pad(mode = string(\"reflect\"), pad = tensor<int32, [2]>([1, 1]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3]> a",
     F16 "[2, 3]> y = pad(mode = string(\"wrap\"), pad = tensor<int32, [2]>([0, 0]), x = a)[name = string(\"y\")];",
     "pad: unknown mode \"wrap\" (constant, reflect, replicate)"},
    {F16 "[2, 3]> a, tensor<int32, [2]> p", F16 "[2, 3]> y = pad(pad = p, x = a)[name = string(\"y\")];",
     "pad: a run-time 'pad' must have 4 entries (before and after for each dim of 'x'), not 2"},
    {"tensor<int32, [2, 3]> a",
     "tensor<int32, [2, 3]> y = pad(pad = tensor<int32, [2]>([0, 0]), x = a)[name = string(\"y\")];",
     "pad: argument 'x' must be fp16 or fp32, not int32"},
    /* topk */
    {F16 "[2, 5]> a", F16 "[2, 3]> y, tensor<int32, [2, 3]> i = topk(k = int32(3), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 5]> a",
     F16 "[1, 5]> y = topk(axis = int32(-2), return_indices = bool(false), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 5]> a", F16 "[2, 6]> y, tensor<int32, [2, 6]> i = topk(k = int32(6), x = a)[name = string(\"y\")];",
     "topk: 'k' 6 must be in 1..5, the size of axis 1"},
    {F16 "[2, 5]> a",
     F16
     "[2, 1]> y, tensor<int8, [2, 1]> i = topk(output_indices_dtype = string(\"int8\"), x = a)[name = string(\"y\")];",
     "topk: 'output_indices_dtype' must be \"int32\" or \"uint16\", not \"int8\""},
    /* gather_nd */
    {F16 "[4, 5, 6]> a, tensor<int32, [3, 2]> i",
     F16 "[3, 6]> y = gather_nd(indices = i, x = a)[name = string(\"y\")];", ""},
    {F16 "[4, 5, 6]> a, tensor<int32, [4, 3, 1]> i",
     F16 "[4, 3, 6]> y = gather_nd(batch_dims = int32(1), indices = i, x = a)[name = string(\"y\")];", ""},
    {F16 "[4, 5]> a, tensor<int32, [3, 3]> i", F16 "[3]> y = gather_nd(indices = i, x = a)[name = string(\"y\")];",
     "gather_nd: 'indices' depth 3 plus 'batch_dims' 0 must be at most the rank of 'x' (2), with batch_dims in 0..1"},
    {F16 "[4, 5]> a, " F16 "[3, 1]> i", F16 "[3, 5]> y = gather_nd(indices = i, x = a)[name = string(\"y\")];",
     "gather_nd: argument 'indices' must be int8, int16, int32, uint8 or uint16, not fp16"},
    /* one_hot */
    {"tensor<int32, [2, 3]> i",
     "tensor<int32, [2, 3, 4]> y = one_hot(indices = i, one_hot_vector_size = int32(4))[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> i",
     F16 "[4, 2, 3]> y = one_hot(axis = int32(0), indices = i, off_value = fp16(0), on_value = fp16(1), "
         "one_hot_vector_size = int32(4))[name = string(\"y\")];",
     ""},
    {"tensor<int32, [2, 3]> i",
     F16
     "[2, 3, 4]> y = one_hot(indices = i, on_value = fp16(1), one_hot_vector_size = int32(4))[name = string(\"y\")];",
     "one_hot: 'on_value' is fp16 but 'off_value' is int32; they must have the same dtype (both default to int32)"},
    {"tensor<int32, [2, 3]> i",
     "tensor<int32, [2, 3, 4]> y = one_hot(axis = int32(3), indices = i, one_hot_vector_size = int32(4))[name = "
     "string(\"y\")];",
     "one_hot: axis 3 is out of range for rank 3"},
    /* einsum */
    {F16 "[2, 3, 4]> a, " F16 "[4, 3, 5]> b",
     F16 "[2, 3, 5]> y = einsum(equation = string(\"abc,cbd->abd\"), values = (a, b))[name = string(\"y\")];", ""},
    {F16 "[1, 2, 3, 4]> a, " F16 "[2, 4, 3, 5]> b",
     F16 "[2, 2, 3, 5]> y = einsum(equation = string(\"nchw,nwhr->nchr\"), values = (a, b))[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 4]> a, " F16 "[4, 3, 5]> b",
     F16 "[2, 3, 5]> y = einsum(equation = string(\"abc,cbd->adb\"), values = (a, b))[name = string(\"y\")];",
     "einsum: equation \"abc,cbd->adb\" is not a form Core ML has for rank 3 (abc,cbd->abd)"},
    {F16 "[2, 3, 4]> a, " F16 "[5, 3, 5]> b",
     F16 "[2, 3, 5]> y = einsum(equation = string(\"abc,cbd->abd\"), values = (a, b))[name = string(\"y\")];",
     "einsum: 'values' [2, 3, 4] and [5, 3, 5]: the contracted dims differ (4 vs 5)"},
    /* range_1d */
    {"", "tensor<int32, [3]> y = range_1d(end = int32(10), start = int32(1), step = int32(3))[name = string(\"y\")];",
     ""},
    {"fp32 e", "tensor<fp32, [?]> y = range_1d(end = e, start = fp32(0), step = fp32(0.5))[name = string(\"y\")];", ""},
    {"", "tensor<int32, [4]> y = range_1d(end = int32(10), start = fp32(1), step = int32(3))[name = string(\"y\")];",
     "range_1d: argument 'start' is fp32 but 'end' is int32; they must have the same dtype"},
    {"", "tensor<int32, [4]> y = range_1d(end = int32(10), start = int32(1), step = int32(0))[name = string(\"y\")];",
     "range_1d: 'step' is 0"},
    /* fill_like */
    {"tensor<int32, [2, 3]> r", "tensor<fp32, [2, 3]> y = fill_like(ref_tensor = r)[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> r",
     F16 "[2, 3]> y = fill_like(ref_tensor = r, value = fp16(0x1p+1))[name = string(\"y\")];", ""},
    {"tensor<int32, [2, 3]> r, fp16 v", F16 "[2, 3]> y = fill_like(ref_tensor = r, value = v)[name = string(\"y\")];",
     "fill_like: argument 'value' must be a const, but 'v' is computed at run time"},
    /* reshape_like */
    {F16 "[2, 6]> a, " F16 "[3, 4, 7]> r",
     "int32 b0 = const()[name = string(\"b0\"), val = int32(0)]; int32 e0 = const()[name = string(\"e0\"), val = "
     "int32(-1)]; bool m0 = const()[name = string(\"m0\"), val = bool(false)]; " F16
     "[3, 4]> y = reshape_like(begins = (b0), end_masks = (m0), ends = (e0), ref_tensors = (r), x = a)[name = "
     "string(\"y\")];",
     ""},
    {F16 "[2, 6]> a, " F16 "[3, 4, 7]> r, int32 e0",
     "int32 b0 = const()[name = string(\"b0\"), val = int32(0)]; bool m0 = const()[name = string(\"m0\"), val = "
     "bool(false)]; " F16 "[3, 4]> y = reshape_like(begins = (b0), end_masks = (m0), ends = (e0), ref_tensors = (r), x "
     "= a)[name = string(\"y\")];",
     "reshape_like: 'ends' item 0 must be a const scalar"},
    {F16 "[2, 6]> a, " F16 "[3, 4, 7]> r",
     "int32 b0 = const()[name = string(\"b0\"), val = int32(1)]; int32 e0 = const()[name = string(\"e0\"), val = "
     "int32(0)]; bool m0 = const()[name = string(\"m0\"), val = bool(true)]; " F16
     "[4, 7]> y = reshape_like(begins = (b0), end_masks = (m0), ends = (e0), ref_tensors = (r), x = a)[name = "
     "string(\"y\")];",
     "reshape_like: cannot reshape [2, 6] (12 elements) to [4, 7] (28 elements)"},
    /* the refs lend dims only: their dtypes may differ from x's and each other's (coremltools) */
    {F16 "[2, 6]> a, tensor<int32, [3, 5]> r, tensor<bool, [4]> q",
     "int32 b0 = const()[name = string(\"b0\"), val = int32(0)]; int32 b1 = const()[name = string(\"b1\"), val = "
     "int32(0)]; int32 e0 = const()[name = string(\"e0\"), val = int32(1)]; int32 e1 = const()[name = string(\"e1\"), "
     "val = int32(1)]; bool m0 = const()[name = string(\"m0\"), val = bool(false)]; bool m1 = const()[name = "
     "string(\"m1\"), val = bool(false)]; " F16
     "[3, 4]> y = reshape_like(begins = (b0, b1), end_masks = (m0, m1), ends = (e0, e1), ref_tensors = (r, q), x = "
     "a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 6]> a",
     "int32 d0 = const()[name = string(\"d0\"), val = int32(12)]; list<tensor<fp32, [12]>, 1> l = "
     "make_list(dtype = string(\"fp32\"), dynamic_length = bool(false), elem_shape = (d0), init_length = "
     "int32(1))[name = string(\"l\")]; int32 b0 = const()[name = string(\"b0\"), val = int32(0)]; int32 e0 = "
     "const()[name = string(\"e0\"), val = int32(1)]; bool m0 = const()[name = string(\"m0\"), val = "
     "bool(false)]; " F16
     "[12]> y = reshape_like(begins = (b0), end_masks = (m0), ends = (e0), ref_tensors = (l), x = a)[name = "
     "string(\"y\")];",
     "reshape_like: 'ref_tensors' item 0 is a list; read a tensor from it with list_read"},
    /* non_zero */
    {F16 "[2, 3]> a", "tensor<int32, [?, 2]> y = non_zero(x = a)[name = string(\"y\")];", ""},
    {"", "tensor<int32, [2, 1]> y = non_zero(x = tensor<int32, [3]>([0, 4, 5]))[name = string(\"y\")];", ""},
    {"string s", "tensor<int32, [?, 0]> y = non_zero(x = s)[name = string(\"y\")];",
     "non_zero: argument 'x' must be bool, int32, fp16 or fp32, not string"},
    /* pixel_shuffle, pixel_unshuffle */
    {F16 "[1, 8, 2, 3]> a",
     F16 "[1, 2, 4, 6]> y = pixel_shuffle(upscale_factor = int32(2), x = a)[name = string(\"y\")];", ""},
    {F16 "[1, 6, 2, 3]> a",
     F16 "[1, 1, 4, 6]> y = pixel_shuffle(upscale_factor = int32(2), x = a)[name = string(\"y\")];",
     "pixel_shuffle: channels (6) are not divisible by 'upscale_factor'^2 4"},
    {F16 "[1, 2, 4, 6]> a",
     F16 "[1, 8, 2, 3]> y = pixel_unshuffle(downscale_factor = uint32(2), x = a)[name = string(\"y\")];", ""},
    {F16 "[1, 2, 4, 6]> a",
     F16 "[1, 8, 2, 3]> y = pixel_unshuffle(downscale_factor = int32(2), x = a)[name = string(\"y\")];",
     "pixel_unshuffle: argument 'downscale_factor' must be uint32, not int32"},
    /* sliding_windows */
    {F16 "[2, 10]> a",
     F16 "[2, 4, 4]> y = sliding_windows(axis = int32(-1), size = int32(4), stride = int32(2), x = a)[name = "
         "string(\"y\")];",
     ""},
    {F16 "[2, 10]> a",
     F16 "[2, 1, 11]> y = sliding_windows(axis = int32(1), size = int32(11), x = a)[name = string(\"y\")];",
     "sliding_windows: 'size' 11 must be in 1..10 (dim 1 of 'x') and 'stride' 1 positive"},
    /* reverse_sequence */
    {F16 "[2, 10]> a, tensor<int32, [2]> l",
     F16 "[2, 10]> y = reverse_sequence(batch_axis = int32(0), lengths = l, seq_axis = int32(1), x = a)[name = "
         "string(\"y\")];",
     ""},
    {F16 "[2, 10]> a, tensor<int32, [2]> l",
     F16 "[2, 10]> y = reverse_sequence(lengths = l, seq_axis = int32(2), x = a)[name = string(\"y\")];",
     "reverse_sequence: seq_axis 2 is out of range for rank 2"},
    /* space_to_batch, batch_to_space */
    {F16 "[1, 3, 4, 6]> a",
     F16 "[4, 3, 3, 3]> y = space_to_batch(block_shape = tensor<int32, [2]>([2, 2]), paddings = tensor<int32, [2, "
         "2]>([[1, 1], [0, 0]]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[4, 3, 3, 3]> a",
     F16 "[1, 3, 4, 6]> y = batch_to_space(block_shape = tensor<int32, [2]>([2, 2]), crops = tensor<int32, [2, "
         "2]>([[1, 1], [0, 0]]), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[3, 3, 3, 3]> a",
     F16 "[1, 3, 6, 6]> y = batch_to_space(block_shape = tensor<int32, [2]>([2, 2]), crops = tensor<int32, [2, "
         "2]>([[0, 0], [0, 0]]), x = a)[name = string(\"y\")];",
     "batch_to_space: batch (3) is not divisible by the product of 'block_shape' (4)"},
    {F16 "[1, 3, 4, 6]> a",
     F16 "[4, 3, 2, 3]> y = space_to_batch(block_shape = tensor<int32, [2]>([2, 2]), paddings = tensor<int32, [4]>([0, "
         "0, 0, 0]), x = a)[name = string(\"y\")];",
     "space_to_batch: 'block_shape' must have 2 entries and 'paddings' shape [2, 2]"},
    /* crop */
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 5, 6]> y = crop(crop_height = tensor<int32, [2]>([1, 2]), crop_width = tensor<int32, [2]>([0, 2]), x "
         "= a)[name = string(\"y\")];",
     ""},
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 5, 8]> y = crop(crop_height = tensor<int32, [3]>([1, 2, 0]), crop_width = tensor<int32, [2]>([0, 0]), "
         "x = a)[name = string(\"y\")];",
     "crop: 'crop_height' must have 2 entries"},
    /* resize_nearest_neighbor, resize_bilinear, upsample_bilinear */
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 5, 16]> y = resize_nearest_neighbor(target_size_height = int32(5), target_size_width = int32(16), x = "
         "a)[name = string(\"y\")];",
     ""},
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 4, 4]> y = resize_bilinear(sampling_mode = string(\"ALIGN_CORNERS\"), target_size_height = int32(4), "
         "target_size_width = int32(4), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 4, 4]> y = resize_bilinear(sampling_mode = string(\"CUBIC\"), target_size_height = int32(4), "
         "target_size_width = int32(4), x = a)[name = string(\"y\")];",
     "resize_bilinear: unknown sampling_mode \"CUBIC\" (STRICT_ALIGN_CORNERS, ALIGN_CORNERS, UNALIGN_CORNERS, DEFAULT, "
     "OFFSET_CORNERS)"},
    {F16 "[8, 8]> a",
     F16 "[4, 4]> y = resize_nearest_neighbor(target_size_height = int32(4), target_size_width = int32(4), x = a)[name "
         "= string(\"y\")];",
     "resize_nearest_neighbor: 'x' must have rank >= 3, not 2"},
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 16, 12]> y = upsample_bilinear(align_corners = bool(false), half_pixel_centers = bool(true), "
         "scale_factor_height = fp32(2), scale_factor_width = fp32(1.5), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 16, 16]> y = upsample_bilinear(scale_factor_height = fp32(2), scale_factor_width = int32(2), x = "
         "a)[name = string(\"y\")];",
     "upsample_bilinear: argument 'scale_factor_width' is int32 but 'scale_factor_height' is fp32; they must have the "
     "same dtype"},
    /* rnn, gru, lstm, random_categorical */
    {"tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 4]> h, tensor<fp32, [4, 3]> wi, tensor<fp32, [4, 4]> wh",
     "tensor<fp32, [5, 2, 4]> y, tensor<fp32, [2, 4]> hn = rnn(initial_h = h, output_sequence = bool(true), weight_hh "
     "= wh, weight_ih = wi, x = x)[name = string(\"y\")];",
     "rnn: argument 'weight_ih' must be a const, but 'wi' is computed at run time\nrnn: argument 'weight_hh' must be a "
     "const, but 'wh' is computed at run time"},
    {"tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 2]> h",
     "tensor<fp32, [2, 3]> wi = const()[name = string(\"wi\"), val = tensor<fp32, [2, 3]>([[1, 0, 0], [0, 1, 0]])]; "
     "tensor<fp32, [2, 2]> wh = const()[name = string(\"wh\"), val = tensor<fp32, [2, 2]>([[1, 0], [0, 1]])]; "
     "tensor<fp32, [5, 2, 2]> y, tensor<fp32, [2, 2]> hn = rnn(initial_h = h, output_sequence = bool(true), weight_hh "
     "= wh, weight_ih = wi, x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 1]> h",
     "tensor<fp32, [3, 3]> wi = const()[name = string(\"wi\"), val = tensor<fp32, [3, 3]>([[1, 0, 0], [0, 1, 0], [0, "
     "0, 1]])]; tensor<fp32, [3, 1]> wh = const()[name = string(\"wh\"), val = tensor<fp32, [3, 1]>([[1], [0], [1]])]; "
     "tensor<fp32, [1, 2, 1]> y, tensor<fp32, [2, 1]> hn = gru(initial_h = h, weight_hh = wh, weight_ih = wi, x = "
     "x)[name = string(\"y\")];",
     ""},
    /* weight_hh must have exactly 3*H rows: 7 rows with H = 2 was taken (7 / 2 == 3) */
    {"tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 2]> h",
     "tensor<fp32, [6, 3]> wi = const()[name = string(\"wi\"), val = tensor<fp32, [6, 3]>([[1, 0, 0], [0, 1, 0], [0, "
     "0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])]; tensor<fp32, [7, 2]> wh = const()[name = string(\"wh\"), val = "
     "tensor<fp32, [7, 2]>([[1, 0], [0, 1], [1, 0], [0, 1], [1, 0], [0, 1], [1, 1]])]; "
     "tensor<fp32, [1, 2, 2]> y, tensor<fp32, [2, 2]> hn = gru(initial_h = h, weight_hh = wh, weight_ih = wi, x = "
     "x)[name = string(\"y\")];",
     "gru: 'weight_ih' [6, 3] and 'weight_hh' [7, 2] must be [3*H, input] and [3*H, H]"},
    {"tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 1]> h, tensor<fp32, [2, 1]> c",
     "tensor<fp32, [4, 3]> wi = const()[name = string(\"wi\"), val = tensor<fp32, [4, 3]>([[1, 0, 0], [0, 1, 0], [0, "
     "0, 1], [1, 1, 1]])]; tensor<fp32, [4, 1]> wh = const()[name = string(\"wh\"), val = tensor<fp32, [4, 1]>([[1], "
     "[0], [1], [0]])]; "
     "tensor<fp32, [5, 2, 1]> y, tensor<fp32, [2, 1]> hn, tensor<fp32, [2, 1]> cn = lstm(initial_c = c, initial_h = h, "
     "output_sequence = bool(true), weight_hh = wh, weight_ih = wi, x = x)[name = string(\"y\")];",
     ""},
    {"tensor<fp32, [5, 2, 3]> x, tensor<fp32, [2, 1]> h, tensor<fp32, [2, 1]> c",
     "tensor<fp32, [4, 3]> wi = const()[name = string(\"wi\"), val = tensor<fp32, [4, 3]>([[1, 0, 0], [0, 1, 0], [0, "
     "0, 1], [1, 1, 1]])]; tensor<fp32, [4, 1]> wh = const()[name = string(\"wh\"), val = tensor<fp32, [4, 1]>([[1], "
     "[0], [1], [0]])]; "
     "tensor<fp32, [1, 2, 2]> y, tensor<fp32, [2, 2]> hn, tensor<fp32, [2, 2]> cn = lstm(direction = "
     "string(\"bidirectional\"), initial_c = c, initial_h = h, weight_hh = wh, weight_ih = wi, x = x)[name = "
     "string(\"y\")];",
     "lstm: a bidirectional lstm needs 'weight_ih_back' and 'weight_hh_back'"},
    {F16 "[2, 5]> a",
     F16 "[2, 3]> y = random_categorical(seed = int32(7), size = int32(3), x = a)[name = string(\"y\")];", ""},
    {F16 "[2, 5]> a", F16 "[2, 3]> y = random_categorical(size = int32(0), x = a)[name = string(\"y\")];",
     "random_categorical: 'size' must be a positive integer"},
    /* cond, while_loop: nested blocks */
    {"bool p, " F16 "[2]> x",
     F16 "[2]> y = cond(pred = p)[name = string(\"y\")] { () { " F16
         "[2]> a = relu(x = x)[name = string(\"a\")]; } -> (a); () { } -> (x); };",
     ""},
    {"bool p, " F16 "[2]> x, " F16 "[3]> z",
     F16 "[2]> y = cond(pred = p)[name = string(\"y\")] { () { } -> (x); () { } -> (z); };",
     "cond: output 0 is tensor<fp16, [2]> in the true branch but tensor<fp16, [3]> in the false branch"},
    {"bool p, " F16 "[2]> x", F16 "[2]> y = cond(pred = p)[name = string(\"y\")] { () { } -> (x); };",
     "cond: needs two blocks without inputs (the true and the false branch), not 1"},
    {"bool p, " F16 "[2]> x",
     F16 "[2]> y = cond(pred = p)[name = string(\"y\")] { () { " F16
         "[2]> a = relu(x = x)[name = string(\"a\")]; } -> (a); () { } -> (a); };",
     "undefined variable 'a'"},
    {"int32 i0, " F16 "[2]> x",
     "int32 n, " F16 "[2]> y = while_loop(loop_vars = (i0, x))[name = string(\"y\")] { (int32 i, " F16
     "[2]> s) { bool go = less(x = i, y = int32(3))[name = string(\"go\")]; } -> (go); "
     "(int32 i, " F16 "[2]> s) { int32 j = add(x = i, y = int32(1))[name = string(\"j\")]; " F16
     "[2]> t = add(x = s, y = x)[name = string(\"t\")]; } -> (j, t); };",
     ""},
    {"int32 i0, " F16 "[2]> x",
     "int32 n, " F16 "[2]> y = while_loop(loop_vars = (i0, x))[name = string(\"y\")] { (int32 i, " F16
     "[2]> s) { } -> (i); (int32 i, " F16 "[2]> s) { } -> (i, s); };",
     "while_loop: the condition block must give one bool scalar"},
    {"int32 i0, " F16 "[2]> x",
     "int32 n, " F16 "[2]> y = while_loop(loop_vars = (i0, x))[name = string(\"y\")] { (int32 i, " F16
     "[2]> s) { bool go = less(x = i, y = int32(3))[name = string(\"go\")]; } -> (go); "
     "(int32 i, " F16
     "[2]> s) { tensor<fp32, [2]> t = cast(dtype = string(\"fp32\"), x = s)[name = string(\"t\")]; } -> (i, t); };",
     "while_loop: the body's output 1 is tensor<fp32, [2]> but loop variable 'x' is tensor<fp16, [2]>"},
    {"int32 i0, " F16 "[2]> x",
     "int32 n, " F16 "[2]> y = while_loop(loop_vars = (i0, x))[name = string(\"y\")] { (int32 i) { bool go = less(x = "
     "i, y = int32(3))[name = string(\"go\")]; } -> (go); "
     "(int32 i, " F16 "[2]> s) { } -> (i, s); };",
     "while_loop: the condition block takes 1 inputs but there are 2 loop variables"},
    {F16 "[2]> x", F16 "[2]> y = relu(x = x)[name = string(\"y\")] { () { } -> (x); };",
     "relu: takes no nested blocks (only cond and while_loop do)"},
    /* resize (ios17) */
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 4, 8]> y = resize(resized_dims = uint32(2), shape = tensor<int32, [2]>([4, 0]), x = a)[name = "
         "string(\"y\")];",
     ""},
    {F16 "[1, 3, 8, 8]> a, tensor<int32, [2]> s",
     F16 "[1, 3, ?, ?]> y = resize(resized_dims = uint32(2), shape = s, x = a)[name = string(\"y\")];", ""},
    {F16 "[1, 3, 8, 8]> a",
     F16 "[1, 3, 4, 8]> y = resize(resized_dims = uint32(1), sampling_mode = string(\"CUBIC\"), shape = tensor<int32, "
         "[1]>([4]), x = a)[name = string(\"y\")];",
     "resize: unknown sampling_mode \"CUBIC\" (STRICT_ALIGN_CORNERS, ALIGN_CORNERS, UNALIGN_CORNERS, DEFAULT, "
     "OFFSET_CORNERS)"},
    /* affine, resample */
    {F16 "[2, 3, 8, 8]> a, " F16 "[2, 6]> m",
     F16 "[2, 3, 4, 5]> y = affine(align_corners = bool(true), coordinates_mode = "
         "string(\"normalized_minus_one_to_one\"), output_height = int32(4), output_width = int32(5), "
         "padding_mode = string(\"constant\"), padding_value = fp16(0), sampling_mode = string(\"bilinear\"), "
         "transform_matrix = m, x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 8, 8]> a, " F16 "[2, 4]> m",
     F16 "[2, 3, 4, 5]> y = affine(align_corners = bool(true), coordinates_mode = "
         "string(\"normalized_minus_one_to_one\"), output_height = int32(4), output_width = int32(5), "
         "padding_mode = string(\"constant\"), padding_value = fp16(0), sampling_mode = string(\"bilinear\"), "
         "transform_matrix = m, x = a)[name = string(\"y\")];",
     "affine: 'transform_matrix' rows must have 6 entries [a0, a1, a2, b0, b1, b2], not 4"},
    {F16 "[2, 3, 8, 8]> a, tensor<int32, [2, 4, 5, 2]> c",
     F16 "[2, 3, 4, 5]> y = resample(align_corners = bool(false), coordinates = c, coordinates_mode = "
         "string(\"unnormalized\"), padding_mode = string(\"border\"), "
         "padding_value = fp16(0), sampling_mode = string(\"nearest\"), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 8, 8]> a, tensor<int32, [1, 4, 5, 2]> c",
     F16 "[2, 3, 4, 5]> y = resample(align_corners = bool(false), coordinates = c, coordinates_mode = "
         "string(\"unnormalized\"), padding_mode = string(\"border\"), "
         "padding_value = fp16(0), sampling_mode = string(\"nearest\"), x = a)[name = string(\"y\")];",
     "resample: 'x' has batch 2 but 'coordinates' 1"},
    /* crop_resize (ios17 form), non_maximum_suppression (ios17 form) */
    {F16 "[2, 3, 8, 8]> a, " F16 "[3, 4]> b",
     F16 "[3, 3, 2, 4]> y = crop_resize(box_indices = tensor<int32, [3]>([0, 1, 1]), boxes = b, target_height = "
         "int32(2), target_width = int32(4), x = a)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3, 8, 8]> a, " F16 "[3, 4]> b",
     F16 "[3, 3, 1, 1]> y = crop_resize(boxes = b, x = a)[name = string(\"y\")];",
     "crop_resize: 3 boxes but 'x' has batch 2: give 'box_indices' (the default 0..N-1 leaves x)"},
    {F16 "[1, 4, 7]> b, " F16 "[1, 2, 7]> s",
     F16 "[1, 4, 3]> y, " F16 "[1, 2, 3]> ys, tensor<int32, [1, 3]> yi = non_maximum_suppression(boxes = b, "
         "iou_threshold = fp16(0.5), max_boxes = int32(3), scores = s)[name = string(\"y\")];",
     ""},
    {F16 "[1, 4, 7]> b, " F16 "[2, 7]> s",
     F16 "[1, 4, 3]> y, " F16 "[1, 2, 3]> ys, tensor<int32, [1, 3]> yi = non_maximum_suppression(boxes = b, "
         "iou_threshold = fp16(0.5), max_boxes = int32(3), scores = s)[name = string(\"y\")];",
     "non_maximum_suppression: 'scores' must have rank 3, not 2"},
    /* conv_quantized */
    {F16 "[1, 2, 5, 5]> a, tensor<uint8, [4, 2, 3, 3]> w",
     F16 "[1, 4, 3, 3]> y = conv_quantized(quant_bias = fp16(0), quant_scale = fp16(0.1), quantization_type = "
         "string(\"linear\"), weight = w, x = a)[name = string(\"y\")];",
     ""},
    {F16 "[1, 2, 5, 5]> a, tensor<uint8, [4, 2, 3, 3]> w, fp16 qs",
     F16 "[1, 4, 3, 3]> y = conv_quantized(quant_bias = fp16(0), quant_scale = qs, quantization_type = "
         "string(\"linear\"), weight = w, x = a)[name = string(\"y\")];",
     "conv_quantized: argument 'quant_scale' must be a const, but 'qs' is computed at run time"},
    /* constexpr_lut_to_sparse, constexpr_sparse_blockwise_shift_scale (ios18) */
    {"",
     "tensor<uint1, [2, 4]> y, tensor<fp16, [6]> v = constexpr_lut_to_sparse(indices_mask = tensor<uint1, [2, 2]>([[1, "
     "0], [1, 1]]), indices_nonzero_data = tensor<uint1, [3]>([0, 1, 1]), "
     "lut = tensor<fp16, [1, 1, 2, 2]>([[[[1, 2], [3, 4]]]]), vector_axis = int32(1))[name = string(\"y\")];",
     ""},
    {"",
     "tensor<uint1, [2, 2]> y, tensor<fp16, [3]> v = constexpr_lut_to_sparse(indices_mask = tensor<uint1, [2, 2]>([[1, "
     "0], [1, 1]]), indices_nonzero_data = tensor<uint1, [3]>([0, 1, 1]), "
     "lut = tensor<fp16, [1, 1, 2, 2]>([[[[1, 2], [3, 4]]]]))[name = string(\"y\")];",
     "constexpr_lut_to_sparse: 'vector_axis' is needed when the lut's vector size is 2"},
    {"",
     "tensor<uint1, [4]> y, tensor<fp16, [3]> v = constexpr_sparse_blockwise_shift_scale(data_mask = tensor<uint1, "
     "[4]>([1, 0, 1, 1]), nonzero_data = tensor<int8, [3]>([1, 2, 3]), "
     "offset = tensor<int8, [2]>([1, 0]), scale = tensor<fp16, [2]>([0.5, 2]))[name = string(\"y\")];",
     ""},
    {"",
     "tensor<uint1, [4]> y, tensor<fp16, [3]> v = constexpr_sparse_blockwise_shift_scale(data_mask = tensor<uint1, "
     "[4]>([1, 0, 1, 1]), nonzero_data = tensor<int8, [3]>([1, 2, 3]), "
     "scale = tensor<fp16, [3]>([0.5, 2, 1]))[name = string(\"y\")];",
     "constexpr_sparse_blockwise_shift_scale: data dim 0 (4) is not divisible by the number of scales in that dim (3)"},
/* lists: make_list, list_write, list_read, list_gather, list_scatter, list_length */
#define MKLIST                                                                                                         \
    "int32 e0 = const()[name = string(\"e0\"), val = int32(3)]; list<tensor<fp16, [3]>, ?> ls = make_list(dtype = "    \
    "string(\"fp16\"), elem_shape = (e0))[name = string(\"ls\")]; "
    {F16 "[3]> v",
     MKLIST
     "list<tensor<fp16, [3]>, ?> l2 = list_write(index = int32(0), ls = ls, value = v)[name = string(\"l2\")]; " F16
     "[3]> y = list_read(index = int32(0), ls = l2)[name = string(\"y\")];",
     ""},
    {F16 "[2, 3]> v",
     MKLIST "list<tensor<fp16, [3]>, ?> l2 = list_scatter(indices = tensor<int32, [2]>([0, 1]), ls = ls, value = "
            "v)[name = string(\"l2\")]; " F16
            "[2, 3]> y = list_gather(indices = tensor<int32, [2]>([1, 0]), ls = l2)[name = string(\"y\")];",
     ""},
    {"", MKLIST "int32 y = list_length(ls = ls)[name = string(\"y\")];", ""},
    /* a list through a while_loop and a cond stays a list (their results once lost the flag) */
    {"",
     MKLIST "int32 i0 = const()[name = string(\"i0\"), val = int32(0)]; "
            "int32 m, list<tensor<fp16, [3]>, ?> lo = while_loop(loop_vars = (i0, ls))[name = string(\"lo\")] { "
            "(int32 i, list<tensor<fp16, [3]>, ?> l) { bool go = less(x = i, y = int32(2))[name = string(\"go\")]; } "
            "-> (go); (int32 i, list<tensor<fp16, [3]>, ?> l) { int32 j = add(x = i, y = int32(1))[name = "
            "string(\"j\")]; } -> (j, l); }; "
            "list<tensor<fp16, [3]>, ?> lc = cond(pred = bool(true))[name = string(\"lc\")] { () { } -> (lo); "
            "() { } -> (ls); }; int32 y = list_length(ls = lc)[name = string(\"y\")];",
     ""},
    {"",
     "int32 e0 = const()[name = string(\"e0\"), val = int32(2)]; list<tensor<int32, [2]>, 4> ls = make_list(dtype = "
     "string(\"int32\"), dynamic_length = bool(false), elem_shape = (e0), init_length = int32(4))[name = "
     "string(\"ls\")]; "
     "tensor<int32, [1, 2]> y = list_gather(indices = tensor<int32, [1]>([3]), ls = ls)[name = string(\"y\")];",
     ""},
    {"tensor<fp32, [3]> v",
     MKLIST
     "list<tensor<fp16, [3]>, ?> l2 = list_write(index = int32(0), ls = ls, value = v)[name = string(\"l2\")]; " F16
     "[3]> y = list_read(index = int32(0), ls = l2)[name = string(\"y\")];",
     "list_write: 'value' tensor<fp32, [3]> does not fit the list's element type tensor<fp16, [3]>"},
    {F16 "[3, 3]> v",
     MKLIST "list<tensor<fp16, [3]>, ?> l2 = list_scatter(indices = tensor<int32, [2]>([0, 1]), ls = ls, value = "
            "v)[name = string(\"l2\")]; " F16 "[3]> y = list_read(index = int32(0), ls = l2)[name = string(\"y\")];",
     "list_scatter: 'value' [3, 3] must hold one element per index (2)"},
    {F16 "[3]> v", F16 "[3]> y = list_read(index = int32(0), ls = v)[name = string(\"y\")];",
     "list_read: argument 'ls' must be a list (make one with make_list), not tensor<fp16, [3]>"},
    {"", MKLIST F16 "[3]> y = relu(x = ls)[name = string(\"y\")];",
     "relu: argument 'x' cannot be a list (list<tensor<fp16, [3]>, ?>); read it with list_read or list_gather"},
    {"int32 n",
     "int32 e0 = const()[name = string(\"e0\"), val = int32(3)]; list<tensor<fp16, [3]>, ?> ls = make_list(dtype = "
     "string(\"fp16\"), elem_shape = (n, e0))[name = string(\"ls\")]; " F16
     "[3]> y = list_read(index = int32(0), ls = ls)[name = string(\"y\")];",
     "make_list: argument 'elem_shape' must be a const, but 'n' is computed at run time"},
};

/* Parse and check one case; returns the messages, one per line (caller frees). */
static char *run_case(const Case *c) {
    char text[4096];
    snprintf(text, sizeof text, "program(1.3)\n{\n    func main<ios18>(%s) {\n        %s\n    } -> (y);\n}\n",
             c->inputs, c->body);
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "case.mil", text, strlen(text));
    if (p) {
        mil_check(p, NULL, &d);
        /* A checked program prints and reparses to the same text. */
        char *s = mil_print(p, NULL);
        Arena a2;
        arena_init(&a2);
        DiagSink d2;
        diag_init(&d2);
        IrProgram *q = mil_parse(&a2, &d2, "re.mil", s, strlen(s));
        CHECK(q != NULL);
        if (q) {
            char *s2 = mil_print(q, NULL);
            CHECK_STR(s2, s);
            free(s2);
        }
        free(s);
        arena_free(&a2);
        diag_free(&d2);
    }
    size_t cap = 1, n = 0;
    for (int i = 0; i < d.count; i++) cap += strlen(d.items[i].msg) + 1;
    char *out = malloc(cap);
    out[0] = 0;
    for (int i = 0; i < d.count; i++) n += (size_t)sprintf(out + n, "%s%s", i ? "\n" : "", d.items[i].msg);
    if (!p && d.count == 0) strcpy(out, "(parse failed)");
    arena_free(&a);
    diag_free(&d);
    return out;
}

TEST(every_op_case) {
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *got = run_case(&cases[i]);
        if (strcmp(got, cases[i].want) != 0) fprintf(stderr, "case %zu: %s\n", i, cases[i].body);
        CHECK_STR(got, cases[i].want);
        free(got);
    }
}

/* Every op of the table has at least one good case above. */
TEST(every_op_covered) {
    for (int k = 0; k < OP_COUNT; k++) {
        char needle[64];
        snprintf(needle, sizeof needle, "= %s(", mil_op_name((IrOpKind)k));
        bool found = false;
        for (size_t i = 0; i < sizeof cases / sizeof *cases && !found; i++)
            found = cases[i].want[0] == 0 && (strstr(cases[i].body, needle) != NULL ||
                                              /* an op without results starts its statement */
                                              strncmp(cases[i].body, needle + 2, strlen(needle + 2)) == 0);
        if (!found) fprintf(stderr, "no good case for %s\n", mil_op_name((IrOpKind)k));
        CHECK(found);
    }
}

/* No signature has more arguments than mil_op_args decodes: the ones past
 * MIL_MAX_OP_ARGS were dropped, so lstm's 17th, clip, was "unknown". */
TEST(every_signature_fits) {
    for (int k = 0; k < OP_COUNT; k++) {
        const char *p = mil_op_signature((IrOpKind)k);
        int words = 0;
        for (const char *q = p; *q; q++)
            if (*q != ' ' && (q == p || q[-1] == ' ') && *q != '>') words++;
        if (words > MIL_MAX_OP_ARGS) fprintf(stderr, "%s has %d arguments\n", mil_op_name((IrOpKind)k), words);
        CHECK(words <= MIL_MAX_OP_ARGS);
        MilArgSpec specs[MIL_MAX_OP_ARGS];
        CHECK_EQ_INT(mil_op_args((IrOpKind)k, specs, MIL_MAX_OP_ARGS), words);
    }
    MilArgSpec clip;
    CHECK(mil_op_arg_spec(OP_LSTM, "clip", &clip));
}

int main(void) {
    RUN(every_op_case);
    RUN(every_signature_fits);
    RUN(every_op_covered);
    TEST_MAIN_END();
}
