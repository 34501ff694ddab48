/* kernels_misc.c — every kernel but the GEMM family: norms, softmax,
 * elementwise (N-d broadcast), reductions, the strided copy behind all data
 * movement ops, gather, band_part, select and cast.  Each splits its work by
 * thread index (ith of nth) and touches only its own slice of the output.
 * Compiled once per kernel variant, inside kernels_variant.c. */
#include <float.h>
#include <limits.h>
#include <string.h>

#include "milc/half.h"
#include "rt_internal.h"
#include "rt_math.h"

#define IN(i)      (ex->ptr[op->in[i]])
#define OUT(i)     (ex->ptr[op->out[i]])
#define BUF_IN(i)  (&ex->bufs[op->in[i]])
#define BUF_OUT(i) (&ex->bufs[op->out[i]])

static void split(int64_t n, int ith, int nth, int64_t *lo, int64_t *hi) {
    *lo = n * ith / nth;
    *hi = n * (ith + 1) / nth;
}

/* x viewed as [outer, c, inner] around axes [a0, a1). */
static void view3(const RtBuf *x, int a0, int a1, int64_t *outer, int64_t *c, int64_t *inner) {
    *outer = *c = *inner = 1;
    for (int i = 0; i < (int)x->rank; i++) {
        if (i < a0)
            *outer *= x->dims[i];
        else if (i < a1)
            *c *= x->dims[i];
        else
            *inner *= x->dims[i];
    }
}

enum { COLS = 256 }; /* columns per chunk when reducing over a strided axis */

/* ---- layer_norm / rms_norm ---- */
static void rt_k_norm(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtNormParams *p = &op->p.norm;
    const float *x = IN(0);
    const float *g = p->has_gamma ? IN(1) : NULL, *bt = p->has_beta ? IN(1 + p->has_gamma) : NULL;
    float *y = OUT(0);
    int64_t outer, c, inner;
    view3(BUF_IN(0), p->axis_begin, p->axis_end, &outer, &c, &inner);
    bool rms = p->kind == RT_NORM_RMS;
    if (inner == 1) { /* contiguous rows */
        int64_t r0, r1;
        split(outer, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * c;
            float *yr = y + r * c;
            float mean = 0, var = 0;
            if (!rms) {
                for (int64_t i = 0; i < c; i++) mean += xr[i];
                mean /= (float)c;
            }
            for (int64_t i = 0; i < c; i++) var += (xr[i] - mean) * (xr[i] - mean);
            float inv = 1.0f / sqrtf(var / (float)c + p->eps);
            for (int64_t i = 0; i < c; i++) {
                float v = (xr[i] - mean) * inv;
                if (g) v *= g[i];
                if (bt) v += bt[i];
                yr[i] = v;
            }
        }
        return;
    }
    /* Strided: normalise each column of [c, inner] per outer, COLS at a time. */
    int64_t chunks = (inner + COLS - 1) / COLS, u0, u1;
    split(outer * chunks, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / chunks, j0 = (u % chunks) * COLS, w = inner - j0 < COLS ? inner - j0 : COLS;
        const float *xo = x + o * c * inner + j0;
        float *yo = y + o * c * inner + j0;
        float mean[COLS] = {0}, var[COLS] = {0};
        if (!rms) {
            for (int64_t i = 0; i < c; i++)
                for (int64_t j = 0; j < w; j++) mean[j] += xo[i * inner + j];
            for (int64_t j = 0; j < w; j++) mean[j] /= (float)c;
        }
        for (int64_t i = 0; i < c; i++)
            for (int64_t j = 0; j < w; j++) {
                float d = xo[i * inner + j] - mean[j];
                var[j] += d * d;
            }
        for (int64_t j = 0; j < w; j++) var[j] = 1.0f / sqrtf(var[j] / (float)c + p->eps);
        for (int64_t i = 0; i < c; i++) {
            float gi = g ? g[i] : 1.0f, bi = bt ? bt[i] : 0.0f;
            for (int64_t j = 0; j < w; j++) yo[i * inner + j] = (xo[i * inner + j] - mean[j]) * var[j] * gi + bi;
        }
    }
}

/* ---- softmax ---- */
static void rt_k_softmax(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const float *x = IN(0);
    float *y = OUT(0);
    int a = op->p.axis.axis;
    int64_t outer, c, inner;
    view3(BUF_IN(0), a, a + 1, &outer, &c, &inner);
    if (inner == 1) {
        int64_t r0, r1;
        split(outer, ith, nth, &r0, &r1);
        for (int64_t r = r0; r < r1; r++) {
            const float *xr = x + r * c;
            float *yr = y + r * c, mx = -FLT_MAX;
            for (int64_t i = 0; i < c; i++) mx = xr[i] > mx ? xr[i] : mx;
            float s = rt_exp_row(xr, yr, c, mx), inv = s > 0 ? 1.0f / s : 0.0f;
            for (int64_t i = 0; i < c; i++) yr[i] *= inv;
        }
        return;
    }
    int64_t chunks = (inner + COLS - 1) / COLS, u0, u1;
    split(outer * chunks, ith, nth, &u0, &u1);
    for (int64_t u = u0; u < u1; u++) {
        int64_t o = u / chunks, j0 = (u % chunks) * COLS, w = inner - j0 < COLS ? inner - j0 : COLS;
        const float *xo = x + o * c * inner + j0;
        float *yo = y + o * c * inner + j0;
        float mx[COLS], sum[COLS] = {0};
        for (int64_t j = 0; j < w; j++) mx[j] = -FLT_MAX;
        for (int64_t i = 0; i < c; i++)
            for (int64_t j = 0; j < w; j++) mx[j] = xo[i * inner + j] > mx[j] ? xo[i * inner + j] : mx[j];
        for (int64_t i = 0; i < c; i++)
            for (int64_t j = 0; j < w; j++) sum[j] += (yo[i * inner + j] = expf(xo[i * inner + j] - mx[j]));
        for (int64_t j = 0; j < w; j++) sum[j] = sum[j] > 0 ? 1.0f / sum[j] : 0.0f;
        for (int64_t i = 0; i < c; i++)
            for (int64_t j = 0; j < w; j++) yo[i * inner + j] *= sum[j];
    }
}

/* ---- N-d broadcasting iteration ----
 * The output is walked row by row (its last dim); each operand has a stride
 * per output dim (0 where it broadcasts).  `ith` gets a range of rows. */
typedef struct {
    int rank;
    int64_t dims[RT_MAX_RANK];
    int64_t stride[3][RT_MAX_RANK];
} Bcast;

static void bcast_init(Bcast *bc, const RtBuf *out, const RtBuf *const *ins, int n) {
    bc->rank = (int)out->rank;
    for (int d = 0; d < bc->rank; d++) bc->dims[d] = out->dims[d];
    for (int i = 0; i < n; i++) {
        int64_t st = 1;
        for (int d = bc->rank - 1; d >= 0; d--) {
            int id = d - (bc->rank - (int)ins[i]->rank);
            int64_t dim = id >= 0 ? ins[i]->dims[id] : 1;
            bc->stride[i][d] = dim == 1 ? 0 : st;
            st *= dim;
        }
    }
}

/* Offsets of operands at the start of output row r. */
static void bcast_row(const Bcast *bc, int64_t r, int n, int64_t *off) {
    for (int i = 0; i < n; i++) off[i] = 0;
    for (int d = bc->rank - 2; d >= 0; d--) {
        int64_t idx = r % bc->dims[d];
        r /= bc->dims[d];
        for (int i = 0; i < n; i++) off[i] += idx * bc->stride[i][d];
    }
}

#define BIN_LOOP(T, EXPR)                                                                                              \
    for (int64_t j = 0; j < w; j++) {                                                                                  \
        T av = a[j * sa], bv = b[j * sb];                                                                              \
        c[j] = (EXPR);                                                                                                 \
    }

static void bin_row_f32(int op, const float *a, int64_t sa, const float *b, int64_t sb, float *c, int64_t w) {
    switch (op) {
    case RT_BIN_ADD: BIN_LOOP(float, av + bv) break;
    case RT_BIN_SUB: BIN_LOOP(float, av - bv) break;
    case RT_BIN_MUL: BIN_LOOP(float, av *bv) break;
    case RT_BIN_DIV: BIN_LOOP(float, av / bv) break;
    case RT_BIN_POW: BIN_LOOP(float, powf(av, bv)) break;
    case RT_BIN_MAX: BIN_LOOP(float, av > bv ? av : bv) break;
    case RT_BIN_MIN: BIN_LOOP(float, av < bv ? av : bv) break;
    }
}

/* int32 arithmetic wraps (computed unsigned) and x/0 is 0: no UB on any input. */
static int32_t idiv(int32_t a, int32_t b) { return b == 0 || (a == INT32_MIN && b == -1) ? 0 : a / b; }
static void bin_row_i32(int op, const int32_t *a, int64_t sa, const int32_t *b, int64_t sb, int32_t *c, int64_t w) {
    switch (op) {
    case RT_BIN_ADD: BIN_LOOP(int32_t, (int32_t)((uint32_t)av + (uint32_t)bv)) break;
    case RT_BIN_SUB: BIN_LOOP(int32_t, (int32_t)((uint32_t)av - (uint32_t)bv)) break;
    case RT_BIN_MUL: BIN_LOOP(int32_t, (int32_t)((uint32_t)av * (uint32_t)bv)) break;
    case RT_BIN_DIV: BIN_LOOP(int32_t, idiv(av, bv)) break;
    case RT_BIN_MAX: BIN_LOOP(int32_t, av > bv ? av : bv) break;
    case RT_BIN_MIN: BIN_LOOP(int32_t, av < bv ? av : bv) break;
    }
}

static void rt_k_binary(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *ins[2] = {BUF_IN(0), BUF_IN(1)}, *cb = BUF_OUT(0);
    Bcast bc;
    bcast_init(&bc, cb, ins, 2);
    int64_t w = cb->rank ? cb->dims[cb->rank - 1] : 1, rows = cb->numel / w, r0, r1;
    int64_t sa = cb->rank ? bc.stride[0][cb->rank - 1] : 0, sb = cb->rank ? bc.stride[1][cb->rank - 1] : 0;
    split(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[2];
        bcast_row(&bc, r, 2, off);
        if (cb->dtype == RT_F32)
            bin_row_f32(op->p.bin.op, (const float *)IN(0) + off[0], sa, (const float *)IN(1) + off[1], sb,
                        (float *)OUT(0) + r * w, w);
        else
            bin_row_i32(op->p.bin.op, (const int32_t *)IN(0) + off[0], sa, (const int32_t *)IN(1) + off[1], sb,
                        (int32_t *)OUT(0) + r * w, w);
    }
}

static void rt_k_select(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *ins[3] = {BUF_IN(0), BUF_IN(1), BUF_IN(2)}, *yb = BUF_OUT(0);
    Bcast bc;
    bcast_init(&bc, yb, ins, 3);
    int64_t w = yb->rank ? yb->dims[yb->rank - 1] : 1, rows = yb->numel / w, r0, r1;
    int64_t s[3];
    for (int i = 0; i < 3; i++) s[i] = yb->rank ? bc.stride[i][yb->rank - 1] : 0;
    size_t es = rt_dtype_size((RtDType)yb->dtype);
    split(rows, ith, nth, &r0, &r1);
    const uint8_t *cond = IN(0);
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[3];
        bcast_row(&bc, r, 3, off);
        const unsigned char *a = (const unsigned char *)IN(1) + off[1] * es,
                            *b = (const unsigned char *)IN(2) + off[2] * es;
        unsigned char *y = (unsigned char *)OUT(0) + r * w * es;
        for (int64_t j = 0; j < w; j++)
            memcpy(y + j * es, cond[off[0] + j * s[0]] ? a + j * s[1] * es : b + j * s[2] * es, es);
    }
}

/* ---- unary ---- */
static void rt_k_unary(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const float *x = IN(0);
    float *y = OUT(0);
    int64_t lo, hi;
    split(BUF_IN(0)->numel, ith, nth, &lo, &hi);
    float eps = op->p.un.eps;
    int act = -1;
    switch (op->p.un.op) {
    case RT_UN_RSQRT:
        for (int64_t i = lo; i < hi; i++) y[i] = 1.0f / sqrtf(x[i] + eps);
        return;
    case RT_UN_SQRT:
        for (int64_t i = lo; i < hi; i++) y[i] = sqrtf(x[i]);
        return;
    case RT_UN_EXP:
        if (hi > lo) rt_exp_row(x + lo, y + lo, hi - lo, 0.0f);
        return;
    case RT_UN_TANH:
        for (int64_t i = lo; i < hi; i++) y[i] = tanhf(x[i]);
        return;
    case RT_UN_SIGMOID:
        for (int64_t i = lo; i < hi; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
        return;
    case RT_UN_NEG:
        for (int64_t i = lo; i < hi; i++) y[i] = -x[i];
        return;
    case RT_UN_ABS:
        for (int64_t i = lo; i < hi; i++) y[i] = fabsf(x[i]);
        return;
    case RT_UN_LOG:
        for (int64_t i = lo; i < hi; i++) y[i] = logf(x[i]);
        return;
    case RT_UN_SCALE:
        for (int64_t i = lo; i < hi; i++) y[i] = x[i] * eps;
        return;
    case RT_UN_SILU: act = RT_ACT_SILU; break;
    case RT_UN_GELU_EXACT: act = RT_ACT_GELU_EXACT; break;
    case RT_UN_GELU_TANH: act = RT_ACT_GELU_TANH; break;
    case RT_UN_GELU_SIGMOID: act = RT_ACT_GELU_SIGMOID; break;
    case RT_UN_RELU: act = RT_ACT_RELU; break;
    }
    if (hi > lo) {
        memcpy(y + lo, x + lo, (size_t)(hi - lo) * sizeof(float));
        rt_act_row(y + lo, hi - lo, act);
    }
}

/* ---- reductions ---- */
static void rt_k_reduce(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0);
    const float *x = IN(0);
    float *y = OUT(0);
    uint32_t axes = op->p.red.axes;
    /* kept and reduced dims with their strides in x */
    int nk = 0, nr = 0;
    int64_t kd[RT_MAX_RANK], ks[RT_MAX_RANK], rd[RT_MAX_RANK], rs[RT_MAX_RANK], st = 1, rcount = 1;
    for (int d = (int)xb->rank - 1; d >= 0; d--) {
        if (axes >> d & 1)
            rd[nr] = xb->dims[d], rs[nr++] = st, rcount *= xb->dims[d];
        else
            kd[nk] = xb->dims[d], ks[nk++] = st;
        st *= xb->dims[d];
    }
    /* kd/rd are innermost first */
    int64_t lo, hi;
    split(BUF_OUT(0)->numel, ith, nth, &lo, &hi);
    int rop = op->p.red.op;
    for (int64_t o = lo; o < hi; o++) {
        int64_t base = 0, t = o;
        for (int i = 0; i < nk; i++) base += (t % kd[i]) * ks[i], t /= kd[i];
        float acc = rop == RT_RED_MAX ? -INFINITY : 0.0f;
        int64_t idx[RT_MAX_RANK] = {0};
        for (int64_t e = 0; e < rcount; e++) {
            int64_t off = base;
            for (int i = 0; i < nr; i++) off += idx[i] * rs[i];
            float v = x[off];
            acc = rop == RT_RED_MAX ? (v > acc ? v : acc) : acc + v;
            for (int i = 0; i < nr && ++idx[i] == rd[i]; i++) idx[i] = 0;
        }
        y[o] = rop == RT_RED_MEAN ? acc / (float)rcount : acc;
    }
}

/* ---- strided copy ---- */
static void rt_k_copy(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtCopyParams *p = &op->p.copy;
    size_t es = rt_dtype_size((RtDType)BUF_IN(0)->dtype);
    bool widen = BUF_IN(0)->dtype == RT_F16 && BUF_OUT(0)->dtype == RT_F32;
    const unsigned char *x = IN(0);
    unsigned char *y = OUT(0);
    int r = p->rank;
    int64_t w = r ? p->dims[r - 1] : 1, ss = r ? p->src_stride[r - 1] : 0, ds = r ? p->dst_stride[r - 1] : 0;
    int64_t rows = 1;
    for (int d = 0; d + 1 < r; d++) rows *= p->dims[d];
    int64_t r0, r1;
    split(rows, ith, nth, &r0, &r1);
    for (int64_t row = r0; row < r1; row++) {
        int64_t so = p->src_offset, dof = p->dst_offset, t = row;
        for (int d = r - 2; d >= 0; d--) {
            int64_t i = t % p->dims[d];
            t /= p->dims[d];
            so += i * p->src_stride[d];
            dof += i * p->dst_stride[d];
        }
        if (widen) {
            const uint16_t *xs = (const uint16_t *)x + so;
            float *yd = (float *)y + dof;
            if (ss == 1 && ds == 1)
                half_to_float_n(xs, yd, (size_t)w);
            else
                for (int64_t j = 0; j < w; j++) yd[j * ds] = half_to_float(xs[j * ss]);
        } else if (ss == 1 && ds == 1) {
            memcpy(y + dof * es, x + so * es, (size_t)w * es);
        } else if (es == 4) {
            const uint32_t *xs = (const uint32_t *)(x + so * es);
            uint32_t *yd = (uint32_t *)(y + dof * es);
            for (int64_t j = 0; j < w; j++) yd[j * ds] = xs[j * ss];
        } else {
            for (int64_t j = 0; j < w; j++) memcpy(y + (dof + j * ds) * es, x + (so + j * ss) * es, es);
        }
    }
}

/* ---- gather ---- */
static void rt_k_gather(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0), *ib = BUF_IN(1);
    int a = op->p.axis.axis;
    int64_t pre, dim, post;
    view3(xb, a, a + 1, &pre, &dim, &post);
    size_t es = rt_dtype_size((RtDType)xb->dtype), row = (size_t)post * es;
    const unsigned char *x = IN(0);
    const int32_t *idx = IN(1);
    unsigned char *y = OUT(0);
    int64_t ni = ib->numel, lo, hi;
    split(pre * ni, ith, nth, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t pi = u / ni, k = idx[u % ni];
        if (k < 0) k += dim; /* MIL allows negative indices */
        if (k < 0 || k >= dim) {
            memset(y + u * row, 0, row);
            atomic_store_explicit(&ex->index_error, 1, memory_order_relaxed);
            continue;
        }
        memcpy(y + u * row, x + (pi * dim + k) * row, row);
    }
}

/* ---- band_part ---- */
static void rt_k_band(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0);
    const float *x = IN(0);
    float *y = OUT(0);
    int64_t R = xb->dims[xb->rank - 2], C = xb->dims[xb->rank - 1], lo, hi;
    int32_t lower = op->p.band.lower, upper = op->p.band.upper;
    split(xb->numel / C, ith, nth, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) {
        int64_t i = r % R;
        for (int64_t j = 0; j < C; j++) {
            bool keep = (lower < 0 || i - j <= lower) && (upper < 0 || j - i <= upper);
            y[r * C + j] = keep ? x[r * C + j] : 0.0f;
        }
    }
}

/* ---- cast ---- */
static int32_t f2i(float v) {
    /* C leaves out-of-range float->int undefined; saturate like the ANE does. */
    if (!(v == v)) return 0;
    if (v >= 2147483647.0f) return INT32_MAX;
    if (v <= -2147483648.0f) return INT32_MIN;
    return (int32_t)v;
}

static void rt_k_cast(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    uint32_t from = BUF_IN(0)->dtype, to = BUF_OUT(0)->dtype;
    int64_t lo, hi;
    split(BUF_IN(0)->numel, ith, nth, &lo, &hi);
    const void *x = IN(0);
    void *y = OUT(0);
    for (int64_t i = lo; i < hi; i++) {
        float v = from == RT_F32   ? ((const float *)x)[i]
                  : from == RT_I32 ? (float)((const int32_t *)x)[i]
                                   : (float)((const uint8_t *)x)[i];
        if (to == RT_F32) {
            ((float *)y)[i] = op->p.cast.round_f16 ? half_to_float(float_to_half(v)) : v;
        } else if (to == RT_I32) {
            ((int32_t *)y)[i] = from == RT_I32 ? ((const int32_t *)x)[i] : f2i(v);
        } else {
            ((uint8_t *)y)[i] = from == RT_I32 ? ((const int32_t *)x)[i] != 0 : v != 0.0f;
        }
    }
}
