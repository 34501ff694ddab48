/* kernels_data.c — scatter (three index forms, seven modes), a stable sort
 * along an axis (argsort, topk) and the counter-based random ops.  Plain C:
 * index-bound work the vector units do not help.  Compiled once per kernel
 * variant, inside kernels_variant.c, after kernels_misc.c (split, view3). */
#include <math.h>

/* ---- scatter ---- */

static float sc_f32(int mode, float y, float u) {
    switch (mode) {
    case RT_SCM_UPDATE: return u;
    case RT_SCM_ADD: return y + u;
    case RT_SCM_SUB: return y - u;
    case RT_SCM_MUL: return y * u;
    case RT_SCM_DIV: return y / u;
    case RT_SCM_MAX: return fmaxf(y, u);
    default: return fminf(y, u);
    }
}

static int32_t sc_i32(int mode, int32_t y, int32_t u) {
    switch (mode) {
    case RT_SCM_UPDATE: return u;
    case RT_SCM_ADD: return (int32_t)((uint32_t)y + (uint32_t)u);
    case RT_SCM_SUB: return (int32_t)((uint32_t)y - (uint32_t)u);
    case RT_SCM_MUL: return (int32_t)((uint32_t)y * (uint32_t)u);
    case RT_SCM_DIV: return u == 0 || (u == -1 && y == INT32_MIN) ? 0 : y / u;
    case RT_SCM_MAX: return y > u ? y : u;
    default: return y < u ? y : u;
    }
}

/* An index into a dim of n: negative counts from the end; -1 when outside. */
static int64_t sc_index(int64_t k, int64_t n) {
    if (k < 0) k += n;
    return k < 0 || k >= n ? -1 : k;
}

static void sc_apply(RtExec *ex, const RtOpRec *op, int64_t dst, int64_t src) {
    if (dst < 0) {
        atomic_store_explicit(&ex->index_error, 1, memory_order_relaxed);
        return;
    }
    int mode = op->p.scatter.mode;
    if (BUF_IN(0)->dtype == RT_F32) {
        float *y = OUT(0);
        y[dst] = sc_f32(mode, y[dst], ((const float *)IN(2))[src]);
    } else {
        int32_t *y = OUT(0);
        y[dst] = sc_i32(mode, y[dst], ((const int32_t *)IN(2))[src]);
    }
}

/* One part does it all, in order: duplicate indices then behave as a
 * sequential loop (the last update wins), with no atomics. */
static void rt_k_scatter(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    (void)nth;
    if (ith) return;
    const RtScatterParams *p = &op->p.scatter;
    const RtBuf *d = BUF_IN(0), *ib = BUF_IN(1), *u = BUF_IN(2);
    const int32_t *idx = IN(1);
    memcpy(OUT(0), IN(0), (size_t)d->numel * rt_dtype_size((RtDType)d->dtype));
    if (p->kind == RT_SC_AXIS) {
        int64_t outer, n, inner, c = ib->dims[0];
        view3(d, p->axis, p->axis + 1, &outer, &n, &inner);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < c; j++) {
                int64_t k = sc_index(idx[j], n);
                for (int64_t i = 0; i < inner; i++)
                    sc_apply(ex, op, k < 0 ? -1 : (o * n + k) * inner + i, (o * c + j) * inner + i);
            }
    } else if (p->kind == RT_SC_ALONG) {
        int64_t ds[RT_MAX_RANK], st = 1;
        for (int i = (int)d->rank - 1; i >= 0; i--) ds[i] = st, st *= d->dims[i];
        for (int64_t e = 0; e < u->numel; e++) {
            int64_t t = e, off = 0;
            bool ok = true;
            for (int i = (int)u->rank - 1; i >= 0; i--) {
                int64_t c = t % u->dims[i];
                t /= u->dims[i];
                if (i == p->axis) {
                    c = sc_index(idx[e], d->dims[i]);
                    ok = c >= 0;
                }
                off += c * ds[i];
            }
            sc_apply(ex, op, ok ? off : -1, e);
        }
    } else {
        int64_t kk = ib->dims[ib->rank - 1], rows = ib->numel / kk, inner = 1, ds[RT_MAX_RANK], st = 1;
        for (int i = (int)d->rank - 1; i >= 0; i--) ds[i] = st, st *= d->dims[i];
        for (int64_t i = kk; i < (int64_t)d->rank; i++) inner *= d->dims[i];
        for (int64_t r = 0; r < rows; r++) {
            int64_t off = 0;
            for (int64_t j = 0; j < kk && off >= 0; j++) {
                int64_t k = sc_index(idx[r * kk + j], d->dims[j]);
                off = k < 0 ? -1 : off + k * ds[j];
            }
            for (int64_t i = 0; i < inner; i++) sc_apply(ex, op, off < 0 ? -1 : off + i, r * inner + i);
        }
    }
}

/* ---- gather_nd: one row of x's trailing dims per index tuple ---- */
static void rt_k_gather_nd(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtBuf *xb = BUF_IN(0), *ib = BUF_IN(1);
    int bd = op->p.axis.axis;
    int64_t kk = ib->dims[ib->rank - 1], nb = 1, ni = ib->numel / kk, row = 1, ds[RT_MAX_RANK], lo, hi;
    for (int i = 0; i < bd; i++) nb *= xb->dims[i];
    ni /= nb;
    for (int i = (int)xb->rank - 1; i >= 0; i--) ds[i] = row, row *= xb->dims[i];
    row = ds[bd + kk - 1];
    size_t es = rt_dtype_size((RtDType)xb->dtype), rb = (size_t)row * es;
    const unsigned char *x = IN(0);
    const int32_t *idx = IN(1);
    unsigned char *y = OUT(0);
    split(nb * ni, ith, nth, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t off = bd ? (u / ni) * ds[bd - 1] : 0;
        for (int64_t j = 0; j < kk && off >= 0; j++) {
            int64_t k = sc_index(idx[u * kk + j], xb->dims[bd + j]);
            off = k < 0 ? -1 : off + k * ds[bd + j];
        }
        if (off < 0) {
            memset(y + u * rb, 0, rb);
            atomic_store_explicit(&ex->index_error, 1, memory_order_relaxed);
            continue;
        }
        memcpy(y + u * rb, x + off * es, rb);
    }
}

/* ---- sort: a stable merge sort of index lines ---- */

typedef struct {
    const void *x;
    bool f32, asc;
    int64_t base, stride;
} SortLine;

static double sort_key(const SortLine *l, int32_t i) {
    int64_t e = l->base + i * l->stride;
    return l->f32 ? (double)((const float *)l->x)[e] : (double)((const int32_t *)l->x)[e];
}

/* Does index b come strictly before index a?  NaN is the largest value. */
static bool sort_before(const SortLine *l, int32_t b, int32_t a) {
    double kb = sort_key(l, b), ka = sort_key(l, a);
    if (isnan(kb) || isnan(ka)) return l->asc ? isnan(ka) && !isnan(kb) : isnan(kb) && !isnan(ka);
    return l->asc ? kb < ka : kb > ka;
}

static void sort_line(const SortLine *l, int32_t *a, int32_t *tmp, int64_t n) {
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, o = lo;
            while (i < mid && j < hi) tmp[o++] = sort_before(l, a[j], a[i]) ? a[j++] : a[i++];
            while (i < mid) tmp[o++] = a[i++];
            while (j < hi) tmp[o++] = a[j++];
        }
        memcpy(a, tmp, sizeof(int32_t) * (size_t)n);
    }
}

static void rt_k_sort(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtSortParams *p = &op->p.sort;
    const RtBuf *xb = BUF_IN(0);
    int64_t outer, n, inner, lo, hi;
    view3(xb, p->axis, p->axis + 1, &outer, &n, &inner);
    int32_t *a = (int32_t *)(ex->scratch + (size_t)ith * ex->scratch_per_thread), *tmp = a + n;
    SortLine l = {.x = IN(0), .f32 = xb->dtype == RT_F32, .asc = p->ascending != 0, .stride = inner};
    split(outer * inner, ith, nth, &lo, &hi);
    for (int64_t u = lo; u < hi; u++) {
        int64_t o = u / inner, in = u % inner;
        l.base = o * n * inner + in;
        for (int64_t i = 0; i < n; i++) a[i] = (int32_t)i;
        sort_line(&l, a, tmp, n);
        int64_t yb = o * p->k * inner + in;
        for (int64_t i = 0; i < p->k; i++) {
            int64_t src = l.base + a[i] * inner, dst = yb + i * inner;
            if (p->has_values) {
                if (l.f32)
                    ((float *)OUT(0))[dst] = ((const float *)IN(0))[src];
                else
                    ((int32_t *)OUT(0))[dst] = ((const int32_t *)IN(0))[src];
            }
            if (p->has_indices) ((int32_t *)OUT(p->has_values))[dst] = a[i];
        }
    }
}

/* ---- random: splitmix64 as a counter-based generator ---- */

static uint64_t rnd_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static double rnd_u(uint64_t key, uint64_t j) {
    return (double)(rnd_mix(key + (j + 1) * UINT64_C(0x9E3779B97F4A7C15)) >> 40) * (1.0 / 16777216.0);
}

static void rt_k_random(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtRandomParams *p = &op->p.rnd;
    uint64_t key = rnd_mix((uint64_t)p->seed);
    float *y = OUT(0);
    int64_t lo, hi;
    if (p->kind == RT_RAND_CATEGORICAL) {
        const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
        int64_t n = xb->dims[xb->rank - 1], size = yb->dims[yb->rank - 1];
        double *cdf = (double *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
        split(xb->numel / n, ith, nth, &lo, &hi);
        for (int64_t r = lo; r < hi; r++) {
            const float *x = (const float *)IN(0) + r * n;
            double m = -INFINITY, acc = 0;
            if (!p->probs)
                for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
            for (int64_t j = 0; j < n; j++) cdf[j] = acc += p->probs ? (x[j] > 0 ? x[j] : 0) : exp(x[j] - m);
            for (int64_t s = 0; s < size; s++) {
                double t = rnd_u(key, (uint64_t)(r * size + s)) * acc;
                int64_t j = 0;
                while (j < n - 1 && !(cdf[j] > t)) j++;
                y[r * size + s] = (float)j;
            }
        }
        return;
    }
    split(BUF_OUT(0)->numel, ith, nth, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        double v;
        if (p->kind == RT_RAND_UNIFORM)
            v = p->a + ((double)p->b - p->a) * rnd_u(key, (uint64_t)i);
        else if (p->kind == RT_RAND_BERNOULLI)
            v = rnd_u(key, (uint64_t)i) < p->a ? 1 : 0;
        else
            v = p->a + p->b * sqrt(-2 * log(1 - rnd_u(key, 2 * (uint64_t)i))) *
                           cos(6.283185307179586 * rnd_u(key, 2 * (uint64_t)i + 1));
        y[i] = (float)v;
    }
}
