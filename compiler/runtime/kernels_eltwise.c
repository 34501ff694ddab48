/* kernels_eltwise.c — elementwise math beyond the transformer's (MIL's
 * unary ops and activations, fp32 and int32), comparisons and logic (to
 * bool), floor_div / mod, and every reduction over any axes.  Plain C loops
 * the variant's flags vectorise (min/max/multiply-add forms); the
 * transcendental ones call libm.  Compiled once per kernel variant, inside
 * kernels_variant.c, after kernels_misc.c (its split, view3 and broadcast
 * walk are used here). */
#include <math.h>

/* int32 2^x: 0 for negative x (the fraction truncated), wrapping past 31. */
static int32_t iexp2(int32_t v) { return v < 0 ? 0 : v > 31 ? 0 : (int32_t)(UINT32_C(1) << v); }

static void elt_i32(int e, const int32_t *x, int32_t *y, int64_t n, int32_t a) {
    for (int64_t i = 0; i < n; i++) {
        int32_t v = x[i];
        switch (e) {
        case RT_EL_ABS: y[i] = v < 0 ? (int32_t)(0u - (uint32_t)v) : v; break;
        case RT_EL_SIGN: y[i] = (v > 0) - (v < 0); break;
        case RT_EL_SQUARE: y[i] = (int32_t)((uint32_t)v * (uint32_t)v); break;
        case RT_EL_EXP2: y[i] = iexp2(v); break;
        default: y[i] = v > a ? v : a; break; /* threshold */
        }
    }
}

static float softplus1(float v) { return log1pf(expf(-fabsf(v))) + (v > 0 ? v : 0); }

/* The ops whose loops vectorise are written out one loop each. */
static void elt_f32(int e, const float *x, float *y, int64_t n, float a, float b) {
    switch (e) {
    case RT_EL_ABS:
        for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
        return;
    case RT_EL_SQUARE:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i];
        return;
    case RT_EL_RELU6:
        for (int64_t i = 0; i < n; i++) y[i] = fminf(fmaxf(x[i], 0.0f), 6.0f);
        return;
    case RT_EL_CLIP:
        for (int64_t i = 0; i < n; i++) y[i] = fminf(fmaxf(x[i], a), b);
        return;
    case RT_EL_THRESHOLD:
        for (int64_t i = 0; i < n; i++) y[i] = fmaxf(x[i], a);
        return;
    case RT_EL_THRESHOLDED_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] >= a ? x[i] : 0.0f;
        return;
    case RT_EL_LEAKY_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? a * x[i] : x[i];
        return;
    case RT_EL_LINEAR:
        for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + b;
        return;
    case RT_EL_SIGMOID_HARD:
        for (int64_t i = 0; i < n; i++) y[i] = fminf(fmaxf(a * x[i] + b, 0.0f), 1.0f);
        return;
    case RT_EL_CLAMPED_RELU:
        for (int64_t i = 0; i < n; i++) y[i] = fminf(fmaxf(x[i], 0.0f), b) + fminf(fminf(x[i], 0.0f) * a, b);
        return;
    case RT_EL_SOFTSIGN:
        for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + fabsf(x[i]));
        return;
    case RT_EL_INVERSE:
        for (int64_t i = 0; i < n; i++) y[i] = 1.0f / (x[i] + a);
        return;
    default: break;
    }
    for (int64_t i = 0; i < n; i++) {
        float v = x[i], r;
        switch (e) {
        case RT_EL_ACOS: r = acosf(v); break;
        case RT_EL_ASIN: r = asinf(v); break;
        case RT_EL_ATAN: r = atanf(v); break;
        case RT_EL_ATANH: r = atanhf(v); break;
        case RT_EL_CEIL: r = ceilf(v); break;
        case RT_EL_COS: r = cosf(v); break;
        case RT_EL_COSH: r = coshf(v); break;
        case RT_EL_ERF: r = erff(v); break;
        case RT_EL_EXP2: r = exp2f(v); break;
        case RT_EL_FLOOR: r = floorf(v); break;
        case RT_EL_LOG: r = logf(v + a); break;
        case RT_EL_ROUND: r = nearbyintf(v); break; /* the default rounding mode: half to even, as NumPy */
        case RT_EL_SIGN: r = (float)((v > 0) - (v < 0)); break;
        case RT_EL_SIN: r = sinf(v); break;
        case RT_EL_SINH: r = sinhf(v); break;
        case RT_EL_TAN: r = tanf(v); break;
        case RT_EL_SOFTPLUS: r = softplus1(v); break;
        case RT_EL_ELU: r = v > 0 ? v : a * expm1f(v); break;
        case RT_EL_SCALED_TANH: r = a * tanhf(b * v); break;
        default: r = v; break;
        }
        y[i] = r;
    }
}

static void rt_k_eltwise(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtEltParams *p = &op->p.elt;
    const RtBuf *xb = BUF_IN(0);
    int64_t lo, hi;
    split(xb->numel, ith, nth, &lo, &hi);
    if (hi <= lo) return;
    if (p->op == RT_EL_NOT) {
        const uint8_t *x = IN(0);
        uint8_t *y = OUT(0);
        for (int64_t i = lo; i < hi; i++) y[i] = !x[i];
        return;
    }
    if (xb->dtype == RT_I32) {
        elt_i32(p->op, (const int32_t *)IN(0) + lo, (int32_t *)OUT(0) + lo, hi - lo, (int32_t)p->alpha);
        return;
    }
    const float *x = IN(0);
    float *y = OUT(0);
    if (!p->nparams) {
        elt_f32(p->op, x + lo, y + lo, hi - lo, p->alpha, p->beta);
        return;
    }
    /* per channel (dim 1): runs of `inner` elements share a parameter */
    int64_t outer, c, inner;
    view3(xb, 1, 2, &outer, &c, &inner);
    const float *pa = IN(1), *pb = p->nparams > 1 ? IN(2) : NULL;
    for (int64_t i = lo; i < hi;) {
        int64_t ch = i / inner % c, end = (i / inner + 1) * inner;
        if (end > hi) end = hi;
        float a = pa[ch];
        if (p->op == RT_EL_PRELU)
            for (int64_t j = i; j < end; j++) y[j] = x[j] > 0 ? x[j] : a * x[j];
        else
            for (int64_t j = i; j < end; j++) y[j] = a * softplus1(pb[ch] * x[j]);
        i = end;
    }
}

/* ---- comparisons, logic, floor_div, mod ---- */
#define BO_LOOP(T, R, EXPR)                                                                                            \
    for (int64_t j = 0; j < w; j++) {                                                                                  \
        T av = ((const T *)a)[j * sa], bv = ((const T *)b)[j * sb];                                                    \
        ((R *)c)[j] = (EXPR);                                                                                          \
    }

static float fmodf_floor(float a, float b) {
    float r = fmodf(a, b);
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}
static int32_t ifloordiv(int32_t a, int32_t b) {
    if (b == 0 || (a == INT32_MIN && b == -1)) return 0;
    int32_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static int32_t imod(int32_t a, int32_t b) {
    if (b == 0 || b == -1) return 0;
    int32_t r = a % b;
    return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

static void bo_row(int o, uint32_t dt, const void *a, int64_t sa, const void *b, int64_t sb, void *c, int64_t w) {
    if (dt == RT_BOOL) {
        switch (o) {
        case RT_BO_AND: BO_LOOP(uint8_t, uint8_t, av && bv) return;
        case RT_BO_OR: BO_LOOP(uint8_t, uint8_t, av || bv) return;
        default: BO_LOOP(uint8_t, uint8_t, !av != !bv) return;
        }
    }
    if (dt == RT_F32) {
        switch (o) {
        case RT_BO_FLOOR_DIV: BO_LOOP(float, float, floorf(av / bv)) return;
        case RT_BO_MOD: BO_LOOP(float, float, fmodf_floor(av, bv)) return;
        case RT_BO_EQ: BO_LOOP(float, uint8_t, av == bv) return;
        case RT_BO_NE: BO_LOOP(float, uint8_t, av != bv) return;
        case RT_BO_GT: BO_LOOP(float, uint8_t, av > bv) return;
        case RT_BO_GE: BO_LOOP(float, uint8_t, av >= bv) return;
        case RT_BO_LT: BO_LOOP(float, uint8_t, av < bv) return;
        default: BO_LOOP(float, uint8_t, av <= bv) return;
        }
    }
    switch (o) {
    case RT_BO_FLOOR_DIV: BO_LOOP(int32_t, int32_t, ifloordiv(av, bv)) return;
    case RT_BO_MOD: BO_LOOP(int32_t, int32_t, imod(av, bv)) return;
    case RT_BO_EQ: BO_LOOP(int32_t, uint8_t, av == bv) return;
    case RT_BO_NE: BO_LOOP(int32_t, uint8_t, av != bv) return;
    case RT_BO_GT: BO_LOOP(int32_t, uint8_t, av > bv) return;
    case RT_BO_GE: BO_LOOP(int32_t, uint8_t, av >= bv) return;
    case RT_BO_LT: BO_LOOP(int32_t, uint8_t, av < bv) return;
    default: BO_LOOP(int32_t, uint8_t, av <= bv) return;
    }
}

static void rt_k_binop(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *ins[2] = {BUF_IN(0), BUF_IN(1)}, *cb = BUF_OUT(0);
    Bcast bc;
    bcast_init(&bc, cb, ins, 2);
    int64_t w = cb->rank ? cb->dims[cb->rank - 1] : 1, rows = cb->numel / w, r0, r1;
    int64_t sa = cb->rank ? bc.stride[0][cb->rank - 1] : 0, sb = cb->rank ? bc.stride[1][cb->rank - 1] : 0;
    size_t ie = rt_dtype_size((RtDType)ins[0]->dtype), oe = rt_dtype_size((RtDType)cb->dtype);
    split(rows, ith, nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t off[2];
        bcast_row(&bc, r, 2, off);
        bo_row(op->p.bin.op, ins[0]->dtype, (const char *)IN(0) + off[0] * ie, sa, (const char *)IN(1) + off[1] * ie,
               sb, (char *)OUT(0) + r * w * oe, w);
    }
}

/* ---- every reduction ---- */
typedef struct {
    int nk, nr;
    int64_t kd[RT_MAX_RANK], ks[RT_MAX_RANK], rd[RT_MAX_RANK], rs[RT_MAX_RANK], rcount;
} RedWalk;

static void redwalk_init(RedWalk *w, const RtBuf *xb, uint32_t axes) {
    int64_t st = 1;
    w->nk = w->nr = 0, w->rcount = 1;
    for (int d = (int)xb->rank - 1; d >= 0; d--) { /* innermost first */
        if (axes >> d & 1)
            w->rd[w->nr] = xb->dims[d], w->rs[w->nr++] = st, w->rcount *= xb->dims[d];
        else
            w->kd[w->nk] = xb->dims[d], w->ks[w->nk++] = st;
        st *= xb->dims[d];
    }
}

/* Offset in x of reduced element e of the output whose base offset is base. */
static int64_t redwalk_off(const RedWalk *w, int64_t base, int64_t e) {
    for (int i = 0; i < w->nr; i++) base += (e % w->rd[i]) * w->rs[i], e /= w->rd[i];
    return base;
}

static float red_f32(int op, const float *x, const RedWalk *w, int64_t base) {
    int64_t n = w->rcount;
    /* a contiguous innermost run: the common case (reduce over the last axis) */
    bool dense = w->nr == 1 && w->rs[0] == 1;
#define RX_FOR(BODY)                                                                                                   \
    for (int64_t e = 0; e < n; e++) {                                                                                  \
        float v = x[dense ? base + e : redwalk_off(w, base, e)];                                                       \
        BODY;                                                                                                          \
    }
    float acc = 0.0f;
    switch (op) {
    case RT_RX_MAX:
        acc = -INFINITY;
        RX_FOR(acc = v > acc ? v : acc)
        return acc;
    case RT_RX_MIN:
        acc = INFINITY;
        RX_FOR(acc = v < acc ? v : acc)
        return acc;
    case RT_RX_PROD:
        acc = 1.0f;
        RX_FOR(acc *= v)
        return acc;
    case RT_RX_L1: RX_FOR(acc += fabsf(v)) return acc;
    case RT_RX_L2: RX_FOR(acc += v * v) return sqrtf(acc);
    case RT_RX_SUM_SQUARE: RX_FOR(acc += v * v) return acc;
    case RT_RX_LOG_SUM: RX_FOR(acc += v) return logf(acc);
    case RT_RX_MEAN: RX_FOR(acc += v) return acc / (float)n;
    case RT_RX_LOG_SUM_EXP: {
        float mx = -INFINITY;
        RX_FOR(mx = v > mx ? v : mx)
        if (!isfinite(mx)) return mx;
        RX_FOR(acc += expf(v - mx))
        return mx + logf(acc);
    }
    default: RX_FOR(acc += v) return acc;
    }
#undef RX_FOR
}

static int32_t red_i32(int op, const int32_t *x, const RedWalk *w, int64_t base) {
    int64_t n = w->rcount;
    uint32_t acc = op == RT_RX_PROD ? 1u : 0u;
    int32_t ext = op == RT_RX_MAX ? INT32_MIN : INT32_MAX;
    for (int64_t e = 0; e < n; e++) {
        int32_t v = x[redwalk_off(w, base, e)];
        switch (op) {
        case RT_RX_MAX: ext = v > ext ? v : ext; break;
        case RT_RX_MIN: ext = v < ext ? v : ext; break;
        case RT_RX_PROD: acc *= (uint32_t)v; break;
        case RT_RX_L1: acc += v < 0 ? 0u - (uint32_t)v : (uint32_t)v; break;
        case RT_RX_SUM_SQUARE:
        case RT_RX_L2: acc += (uint32_t)v * (uint32_t)v; break;
        default: acc += (uint32_t)v; break;
        }
    }
    switch (op) {
    case RT_RX_MAX:
    case RT_RX_MIN: return ext;
    case RT_RX_MEAN: return (int32_t)((double)(int32_t)acc / (double)n); /* wraps like the sum, truncates */
    case RT_RX_L2: return (int32_t)sqrt((double)acc);
    case RT_RX_LOG_SUM: return (int32_t)log((double)(int32_t)acc);
    default: return (int32_t)acc;
    }
}

/* First index of the extreme along the one reduced axis (NaN: never chosen
 * unless first, as NumPy's for a NaN-free row). */
static int32_t red_arg(int op, const void *x, bool f32, const RedWalk *w, int64_t base) {
    int32_t best = 0;
    for (int64_t e = 1; e < w->rcount; e++) {
        int64_t o = base + e * w->rs[0], ob = base + best * w->rs[0];
        double v = f32 ? ((const float *)x)[o] : ((const int32_t *)x)[o];
        double b = f32 ? ((const float *)x)[ob] : ((const int32_t *)x)[ob];
        if (op == RT_RX_ARGMAX ? v > b : v < b) best = (int32_t)e;
    }
    return best;
}

static void rt_k_reducex(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0);
    RedWalk w;
    redwalk_init(&w, xb, op->p.red.axes);
    int rop = op->p.red.op;
    bool f32 = xb->dtype == RT_F32, arg = rop == RT_RX_ARGMAX || rop == RT_RX_ARGMIN;
    int64_t lo, hi;
    split(BUF_OUT(0)->numel, ith, nth, &lo, &hi);
    for (int64_t o = lo; o < hi; o++) {
        int64_t base = 0, t = o;
        for (int i = 0; i < w.nk; i++) base += (t % w.kd[i]) * w.ks[i], t /= w.kd[i];
        if (arg)
            ((int32_t *)OUT(0))[o] = red_arg(rop, IN(0), f32, &w, base);
        else if (f32)
            ((float *)OUT(0))[o] = red_f32(rop, IN(0), &w, base);
        else
            ((int32_t *)OUT(0))[o] = red_i32(rop, IN(0), &w, base);
    }
}

/* ---- cumsum: one line of the axis per (outer, inner) pair ---- */
static void rt_k_cumsum(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtScanParams *p = &op->p.scan;
    const RtBuf *xb = BUF_IN(0);
    int64_t outer, c, inner, lo, hi;
    view3(xb, p->axis, p->axis + 1, &outer, &c, &inner);
    split(outer * inner, ith, nth, &lo, &hi);
    bool f32 = xb->dtype == RT_F32;
    for (int64_t u = lo; u < hi; u++) {
        int64_t base = u / inner * c * inner + u % inner;
        double acc = 0;
        uint32_t iacc = 0;
        for (int64_t j = 0; j < c; j++) {
            int64_t e = base + (p->reverse ? c - 1 - j : j) * inner;
            if (f32) {
                float v = ((const float *)IN(0))[e];
                if (!p->exclusive) acc += v;
                ((float *)OUT(0))[e] = (float)acc;
                if (p->exclusive) acc += v;
            } else {
                uint32_t v = (uint32_t)((const int32_t *)IN(0))[e];
                if (!p->exclusive) iacc += v;
                ((int32_t *)OUT(0))[e] = (int32_t)iacc;
                if (p->exclusive) iacc += v;
            }
        }
    }
}

/* ---- gather_along_axis: y[.., i, ..] = x[.., idx[.., i, ..], ..] ---- */
static void rt_k_gather_axis(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
    int a = op->p.axis.axis;
    int64_t outer, c, inner, yo, yc, yi, lo, hi;
    view3(xb, a, a + 1, &outer, &c, &inner);
    view3(yb, a, a + 1, &yo, &yc, &yi);
    size_t es = rt_dtype_size((RtDType)xb->dtype);
    const int32_t *idx = IN(1);
    split(yb->numel, ith, nth, &lo, &hi);
    for (int64_t e = lo; e < hi; e++) {
        int64_t o = e / (yc * yi), in = e % yi;
        int64_t k = idx[e];
        if (k < 0) k += c; /* negative indices count from the end */
        unsigned char *dst = (unsigned char *)OUT(0) + e * es;
        if (k < 0 || k >= c) {
            memset(dst, 0, es);
            atomic_store_explicit(&ex->index_error, 1, memory_order_relaxed);
            continue;
        }
        memcpy(dst, (const unsigned char *)IN(0) + ((o * c + k) * inner + in) * es, es);
    }
}
