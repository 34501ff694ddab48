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

/* ---- sample (resample, affine): points of an image, padded per mode ---- */

/* Tap i of a dim of n under the padding mode; -1: the constant. */
static int64_t smp_index(int64_t i, int64_t n, int pad) {
    if (i >= 0 && i < n) return i;
    if (pad == RT_PAD_CONSTANT) return -1;
    if (pad == RT_PAD_BORDER || n == 1) return i < 0 ? 0 : n - 1;
    int64_t per = pad == RT_PAD_REFLECTION ? 2 * (n - 1) : 2 * n, k = ((i % per) + per) % per;
    return k < n ? k : pad == RT_PAD_REFLECTION ? per - k : per - 1 - k;
}

/* A normalized coordinate c on a dim of n as a pixel coordinate. */
static double smp_pixel(double c, int64_t n, const RtSampleParams *p) {
    if (p->coord_mode == RT_COORD_ZERO_ONE)
        c = 2 * c - 1;
    else if (p->coord_mode == RT_COORD_PIXELS)
        return c;
    return p->align_corners ? (c + 1) / 2 * (double)(n - 1) : ((c + 1) * (double)n - 1) / 2;
}

/* Output position j of m in coord_mode's units (the affine op's grid). */
static double smp_grid(int64_t j, int64_t m, const RtSampleParams *p) {
    if (p->coord_mode == RT_COORD_PIXELS) return (double)j;
    double c =
        p->align_corners ? (m > 1 ? -1 + 2.0 * (double)j / (double)(m - 1) : 0) : (2.0 * (double)j + 1) / (double)m - 1;
    return p->coord_mode == RT_COORD_ZERO_ONE ? (c + 1) / 2 : c;
}

static float smp_tap(const float *img, int64_t H, int64_t W, int64_t r, int64_t c, const RtSampleParams *p) {
    int64_t rr = smp_index(r, H, p->pad), cc = smp_index(c, W, p->pad);
    return rr < 0 || cc < 0 ? p->pad_value : img[rr * W + cc];
}

static void rt_k_sample(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    (void)ex;
    const RtSampleParams *p = &op->p.smp;
    const RtBuf *xb = BUF_IN(0), *cb = BUF_IN(1), *yb = BUF_OUT(0);
    int64_t B = xb->dims[0], C = xb->dims[1], H = xb->dims[2], W = xb->dims[3], Ho = yb->dims[2], Wo = yb->dims[3], lo,
            hi;
    const float *x = IN(0), *cs = IN(1);
    float *y = OUT(0);
    split(B * Ho * Wo, ith, nth, &lo, &hi);
    for (int64_t e = lo; e < hi; e++) {
        int64_t b = e / (Ho * Wo), i = e / Wo % Ho, j = e % Wo;
        double u, v;
        if (p->affine) {
            const float *m = cs + (cb->dims[0] == 1 ? 0 : b * 6);
            double gp = smp_grid(j, Wo, p), gq = smp_grid(i, Ho, p);
            u = m[0] * gp + m[1] * gq + m[2], v = m[3] * gp + m[4] * gq + m[5];
        } else {
            u = cs[e * 2], v = cs[e * 2 + 1];
        }
        /* far outside the image every pad mode has settled (or repeats): a bound keeps the taps' int64 math defined */
        u = fmax(fmin(smp_pixel(u, W, p), 1e12), -1e12), v = fmax(fmin(smp_pixel(v, H, p), 1e12), -1e12);
        for (int64_t ch = 0; ch < C; ch++) {
            const float *img = x + (b * C + ch) * H * W;
            float out;
            if (!isfinite(u) || !isfinite(v)) {
                out = p->pad == RT_PAD_CONSTANT ? p->pad_value : NAN;
            } else if (p->mode == RT_SAMPLE_NEAREST) {
                out = smp_tap(img, H, W, (int64_t)nearbyint(v), (int64_t)nearbyint(u), p);
            } else {
                double fu = floor(u), fv = floor(v), au = u - fu, av = v - fv;
                int64_t c0 = (int64_t)fu, r0 = (int64_t)fv;
                out = (float)((1 - av) *
                                  ((1 - au) * smp_tap(img, H, W, r0, c0, p) + au * smp_tap(img, H, W, r0, c0 + 1, p)) +
                              av * ((1 - au) * smp_tap(img, H, W, r0 + 1, c0, p) +
                                    au * smp_tap(img, H, W, r0 + 1, c0 + 1, p)));
            }
            y[(b * C + ch) * Ho * Wo + i * Wo + j] = out;
        }
    }
}

/* RT_OP_CROP_RESIZE: a box's grid points along each dim, a chunk at a time */
enum { CROP_CHUNK = 64 };

static float crop_tap(const float *img, int64_t H, int64_t W, double v, double u, float pad) {
    if (!(v >= 0 && v <= (double)(H - 1) && u >= 0 && u <= (double)(W - 1))) return pad;
    int64_t r0 = (int64_t)v, c0 = (int64_t)u, r1 = r0 + 1 < H ? r0 + 1 : r0, c1 = c0 + 1 < W ? c0 + 1 : c0;
    double av = v - (double)r0, au = u - (double)c0;
    return (float)((1 - av) * ((1 - au) * img[r0 * W + c0] + au * img[r0 * W + c1]) +
                   av * ((1 - au) * img[r1 * W + c0] + au * img[r1 * W + c1]));
}

static void rt_k_crop_resize(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtCropParams *p = &op->p.crop;
    const RtBuf *xb = BUF_IN(0), *yb = BUF_OUT(0);
    int64_t B = xb->dims[0], C = xb->dims[1], H = xb->dims[2], W = xb->dims[3], Ho = yb->dims[2], Wo = yb->dims[3];
    int64_t K = yb->dims[0], nb = p->all_batches ? B : 1, lo, hi, cols = 4 + p->roi_index;
    const float *x = IN(0), *boxes = IN(1);
    const int32_t *bidx = p->has_indices ? IN(2) : NULL;
    float *y = OUT(0);
    double pv[CROP_CHUNK], pu[CROP_CHUNK];
    split(K, ith, nth, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) {
        const float *bx = boxes + k / nb * cols + p->roi_index;
        double roi = p->roi_index ? (double)bx[-1] : 0; /* a float index: whole and in range, or an error */
        bool bad = p->roi_index && !(roi >= 0 && roi < (double)B && roi == floor(roi));
        int64_t b = bad ? -1 : p->all_batches ? k % nb : p->roi_index ? (int64_t)roi : bidx ? bidx[k] : k;
        float *yk = y + k * C * Ho * Wo;
        if (b < 0 || b >= B) {
            memset(yk, 0, sizeof(float) * (size_t)(C * Ho * Wo));
            atomic_store_explicit(&ex->index_error, 1, memory_order_relaxed);
            continue;
        }
        double c[4] = {bx[0], bx[1], bx[2], bx[3]}, hs, he, ws, we;
        bool wfirst = p->box_mode == RT_BOX_CORNERS_W || p->box_mode == RT_BOX_CENTER_W;
        double a0 = c[wfirst], a1 = c[!wfirst], a2 = c[2 + wfirst], a3 = c[2 + !wfirst]; /* h, w, h, w */
        if (p->box_mode >= RT_BOX_CENTER_H)
            hs = a0 - a2 / 2, he = a0 + a2 / 2, ws = a1 - a3 / 2, we = a1 + a3 / 2;
        else
            hs = a0, ws = a1, he = a2, we = a3;
        double sh = p->spatial_scale * (p->normalized ? (double)(H - 1) : 1),
               sw = p->spatial_scale * (p->normalized ? (double)(W - 1) : 1);
        for (int64_t i0 = 0; i0 < Ho; i0 += CROP_CHUNK)
            for (int64_t j0 = 0; j0 < Wo; j0 += CROP_CHUNK) {
                int64_t ni = Ho - i0 < CROP_CHUNK ? Ho - i0 : CROP_CHUNK,
                        nj = Wo - j0 < CROP_CHUNK ? Wo - j0 : CROP_CHUNK;
                for (int64_t i = 0; i < ni; i++)
                    pv[i] = hs * sh + rt_grid_point(p->grid, i0 + i, (he - hs) * sh + 1, Ho);
                for (int64_t j = 0; j < nj; j++)
                    pu[j] = ws * sw + rt_grid_point(p->grid, j0 + j, (we - ws) * sw + 1, Wo);
                for (int64_t ch = 0; ch < C; ch++) {
                    const float *img = x + (b * C + ch) * H * W;
                    for (int64_t i = 0; i < ni; i++)
                        for (int64_t j = 0; j < nj; j++)
                            yk[(ch * Ho + i0 + i) * Wo + j0 + j] = crop_tap(img, H, W, pv[i], pu[j], p->pad_value);
                }
            }
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

/* ---- non_zero: the coordinates of x's nonzero elements, row-major (serial) ---- */

static void rt_k_non_zero(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    (void)ith, (void)nth;
    const RtBuf *xb = BUF_IN(0);
    int r = (int)xb->rank;
    int32_t *y = OUT(0), c[RT_MAX_RANK] = {0};
    int64_t rows = 0;
    for (int64_t i = 0; i < xb->numel; i++) {
        bool nz = xb->dtype == RT_F32   ? ((const float *)IN(0))[i] != 0.0f
                  : xb->dtype == RT_I32 ? ((const int32_t *)IN(0))[i] != 0
                                        : ((const uint8_t *)IN(0))[i] != 0;
        if (nz) memcpy(y + rows++ * r, c, sizeof(int32_t) * (size_t)r);
        for (int d = r - 1; d >= 0 && ++c[d] == xb->dims[d]; d--) c[d] = 0; /* the next coordinate */
    }
    ex->rows[op->out[0]] = rows;
}

/* ---- nms: greedy non-maximum suppression, one batch per thread's share ---- */

static float nms_iou(const float *a, const float *b) { /* centre x, centre y, width, height */
    double iw = fmin(a[0] + a[2] / 2, b[0] + b[2] / 2) - fmax(a[0] - a[2] / 2, b[0] - b[2] / 2),
           ih = fmin(a[1] + a[3] / 2, b[1] + b[3] / 2) - fmax(a[1] - a[3] / 2, b[1] - b[3] / 2);
    double inter = iw > 0 && ih > 0 ? iw * ih : 0, uni = (double)a[2] * a[3] + (double)b[2] * b[3] - inter;
    return uni > 0 ? (float)(inter / uni) : 0;
}

static void rt_k_nms(RtExec *ex, const RtOpRec *op, int ith, int nth) {
    const RtNmsParams *p = &op->p.nms;
    const RtBuf *bb = BUF_IN(0), *sb = BUF_IN(1);
    bool last = p->boxes_last != 0;
    int64_t B = bb->dims[0], N = bb->dims[last ? 2 : 1], K = sb->dims[last ? 1 : 2], M = p->max_boxes, lo, hi;
    /* element (n, c) of a batch's [N, C] (or [C, N] with boxes_last) */
#define NMS_AT(base, n, c, C)     (base)[last ? (c) * N + (n) : (n) * (C) + (c)]
#define NMS_AT_OUT(base, k, c, C) (base)[last ? (c) * M + (k) : (k) * (C) + (c)]
    float *best = (float *)(ex->scratch + (size_t)ith * ex->scratch_per_thread);
    int32_t *cls = (int32_t *)(best + N), *order = cls + N, *tmp = order + N, *kept = tmp + N;
    SortLine l = {.x = best, .f32 = true, .asc = false, .stride = 1};
    split(B, ith, nth, &lo, &hi);
    for (int64_t b = lo; b < hi; b++) {
        const float *bx = (const float *)IN(0) + b * N * 4, *sc = (const float *)IN(1) + b * N * K;
        float *ybx = (float *)OUT(0) + b * M * 4, *ysc = (float *)OUT(1) + b * M * K;
        int32_t *yix = (int32_t *)OUT(2) + b * M;
        for (int64_t n = 0; n < N; n++) {
            best[n] = NMS_AT(sc, n, 0, K), cls[n] = 0, order[n] = (int32_t)n;
            for (int64_t c = 1; c < K; c++)
                if (NMS_AT(sc, n, c, K) > best[n]) best[n] = NMS_AT(sc, n, c, K), cls[n] = (int32_t)c;
        }
        sort_line(&l, order, tmp, N);
        int64_t cnt = 0;
        for (int64_t t = 0; t < N && cnt < M; t++) {
            int32_t i = order[t];
            if (!(best[i] >= p->score_threshold)) continue;
            float bi[4] = {NMS_AT(bx, i, 0, 4), NMS_AT(bx, i, 1, 4), NMS_AT(bx, i, 2, 4), NMS_AT(bx, i, 3, 4)};
            bool keep = true;
            for (int64_t k = 0; keep && k < cnt; k++) {
                int32_t j = kept[k];
                float bj[4] = {NMS_AT(bx, j, 0, 4), NMS_AT(bx, j, 1, 4), NMS_AT(bx, j, 2, 4), NMS_AT(bx, j, 3, 4)};
                keep = (p->per_class && cls[j] != cls[i]) || !(nms_iou(bi, bj) > p->iou_threshold);
            }
            if (keep) kept[cnt++] = i;
        }
        if (cnt == 0) kept[cnt++] = order[0]; /* never empty: the best box */
        for (int64_t k = 0; k < M; k++) {
            for (int64_t c = 0; c < 4; c++) NMS_AT_OUT(ybx, k, c, 4) = k < cnt ? NMS_AT(bx, kept[k], c, 4) : 0;
            for (int64_t c = 0; c < K; c++) NMS_AT_OUT(ysc, k, c, K) = k < cnt ? NMS_AT(sc, kept[k], c, K) : 0;
            yix[k] = k < cnt ? kept[k] : -1;
        }
        if (p->has_counts) ((int32_t *)OUT(3))[b] = (int32_t)cnt;
    }
#undef NMS_AT
#undef NMS_AT_OUT
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
