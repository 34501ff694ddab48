/* ops_more.c — shape and parameter rules of the ops beyond the transformer
 * set: elementwise math, comparisons and logic, every reduction,
 * convolution (as columns for the GEMM, or direct) and pooling.  Like
 * ops.c, run by the builder when an op is recorded and by the loader on
 * untrusted bytes. */
#include <math.h>

#include "rt_internal.h"

#define FAIL(...) return rt_errf(err, errlen, RT_EINVAL, __VA_ARGS__)
#define B(i)      (&bufs[op->in[i]])
#define O(i)      (&bufs[op->out[i]])

/* Ops of RT_OP_ELTWISE that also take int32. */
static bool elt_int_ok(int e) {
    return e == RT_EL_ABS || e == RT_EL_SIGN || e == RT_EL_SQUARE || e == RT_EL_EXP2 || e == RT_EL_THRESHOLD;
}

int rt_check_eltwise(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtEltParams *p = &op->p.elt;
    const RtBuf *x = B(0), *y = O(0);
    if (p->op < 0 || p->op >= RT_EL_COUNT_) FAIL("eltwise: bad op %d", p->op);
    int want = p->op == RT_EL_PRELU ? 1 : p->op == RT_EL_SOFTPLUS_P ? 2 : 0;
    if (p->nparams != want || (int)op->nin != 1 + want) FAIL("eltwise: op %d takes %d per-channel inputs", p->op, want);
    if (!rt_same_dims(x, y) || x->dtype != y->dtype) FAIL("eltwise: y must match x");
    if (p->op == RT_EL_NOT) {
        if (x->dtype != RT_BOOL) FAIL("eltwise: logical_not takes bool");
    } else if (x->dtype != RT_F32 && !(x->dtype == RT_I32 && elt_int_ok(p->op))) {
        FAIL("eltwise: op %d takes fp32%s", p->op, elt_int_ok(p->op) ? " or int32" : "");
    }
    for (int i = 1; i <= want; i++)
        if (x->rank < 2 || B(i)->dtype != RT_F32 || B(i)->numel != x->dims[1])
            FAIL("eltwise: per-channel parameters must hold dims[1] fp32");
    return RT_OK;
}

int rt_check_binop(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *ins[2] = {B(0), B(1)}, *c = O(0);
    int o = op->p.bin.op;
    if (o < 0 || o >= RT_BO_COUNT_) FAIL("binop: bad op %d", o);
    if (ins[0]->dtype != ins[1]->dtype) FAIL("binop: operand dtypes differ");
    bool logic = o >= RT_BO_AND, cmp = o >= RT_BO_EQ;
    if (logic ? ins[0]->dtype != RT_BOOL : ins[0]->dtype != RT_F32 && ins[0]->dtype != RT_I32)
        FAIL("binop: op %d does not take dtype %u", o, ins[0]->dtype);
    if (c->dtype != (cmp ? RT_BOOL : ins[0]->dtype)) FAIL("binop: wrong result dtype");
    if (!rt_bcast_result(ins, 2, c)) FAIL("binop: result is not the broadcast shape");
    return RT_OK;
}

int rt_check_reducex(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    const RtReduceParams *p = &op->p.red;
    if (p->op < 0 || p->op >= RT_RX_COUNT_) FAIL("reducex: bad op %d", p->op);
    bool arg = p->op == RT_RX_ARGMAX || p->op == RT_RX_ARGMIN;
    if (x->dtype != RT_F32 && x->dtype != RT_I32) FAIL("reducex: fp32 or int32 only");
    if (y->dtype != (arg ? RT_I32 : x->dtype)) FAIL("reducex: wrong result dtype");
    if (x->rank < 32 && (p->axes >> x->rank)) FAIL("reducex: axis out of range");
    if (arg && (p->axes == 0 || (p->axes & (p->axes - 1)))) FAIL("reducex: arg reductions take one axis");
    int64_t kept = 1;
    for (uint32_t i = 0; i < x->rank; i++)
        if (!(p->axes >> i & 1)) kept *= x->dims[i];
    if (y->numel != kept) FAIL("reducex: result must hold the %lld kept elements", (long long)kept);
    return RT_OK;
}

/* The parts every convolution-like op shares: x [B, C, *in] F32, the
 * kernel geometry in range, unused dims past nsp neutral. */
static int check_geometry(const RtBuf *x, const RtConvParams *p, char *err, size_t errlen) {
    if (p->nsp < 1 || p->nsp > 3) FAIL("conv: %d spatial dims (1 to 3)", p->nsp);
    if (x->dtype != RT_F32 || (int)x->rank != 2 + p->nsp) FAIL("conv: x must be fp32 [B, C, %d spatial dims]", p->nsp);
    if (p->reserved[0] || p->reserved[1]) FAIL("conv: reserved fields set");
    int64_t taps = 1;
    for (int i = 0; i < 3; i++) {
        bool used = i < p->nsp;
        const int32_t lim = 1 << 16;
        if (p->k[i] < 1 || p->stride[i] < 1 || p->dil[i] < 1 || p->k[i] > lim || p->stride[i] > lim ||
            p->dil[i] > lim || p->pad_lo[i] < 0 || p->pad_hi[i] < 0 || p->pad_lo[i] > lim || p->pad_hi[i] > lim ||
            p->out[i] < 1)
            FAIL("conv: bad geometry on spatial dim %d", i);
        if (!used &&
            (p->k[i] != 1 || p->stride[i] != 1 || p->dil[i] != 1 || p->pad_lo[i] || p->pad_hi[i] || p->out[i] != 1))
            FAIL("conv: spatial dim %d is unused and must be neutral", i);
        taps *= p->k[i];
    }
    if (taps > (1 << 20)) FAIL("conv: %lld kernel taps", (long long)taps);
    return RT_OK;
}

static int check_out(const RtBuf *x, const RtBuf *y, int64_t channels, const RtConvParams *p, char *err,
                     size_t errlen) {
    if (y->dtype != RT_F32 || y->rank != x->rank || y->dims[0] != x->dims[0] || y->dims[1] != channels)
        FAIL("conv: y must be fp32 [B, %lld, ...]", (long long)channels);
    for (int i = 0; i < p->nsp; i++)
        if (y->dims[2 + i] != p->out[i])
            FAIL("conv: output spatial dim %d is %lld, params say %d", i, (long long)y->dims[2 + i], p->out[i]);
    return RT_OK;
}

int rt_check_pad_nhwc(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *x = B(0), *y = O(0);
    int rc = check_geometry(x, p, err, errlen);
    if (rc) return rc;
    if (p->nsp != 2 || p->groups != 1 || p->has_bias || p->transpose || p->pool || p->exclude_pad)
        FAIL("pad_nhwc: bad flags");
    /* any Hp, Wp: the kernel reads x only where the shifted index lies inside it */
    if (y->dtype != RT_F32 || y->rank != 4 || y->dims[0] != x->dims[0] || y->dims[3] != x->dims[1])
        FAIL("pad_nhwc: y must be fp32 [B, Hp, Wp, C]");
    return RT_OK;
}

int rt_check_conv_gemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *x = B(0), *w = B(1), *y = O(0);
    if (p->nsp != 2 || p->groups != 1 || (p->has_bias & ~1) || p->transpose || p->pool || p->exclude_pad ||
        p->reserved[0] || p->reserved[1] || p->k[2] != 1 || p->stride[2] != 1 || p->dil[2] != 1 || p->out[2] != 1)
        FAIL("conv_gemm: bad flags");
    if ((int)op->nin != 2 + p->has_bias) FAIL("conv_gemm: wrong input count");
    if (x->dtype != RT_F32 || x->rank != 4) FAIL("conv_gemm: x must be fp32 [B, Hp, Wp, C]");
    int64_t c = x->dims[3], span[2];
    for (int i = 0; i < 2; i++) {
        const int32_t lim = 1 << 16;
        if (p->k[i] < 1 || p->stride[i] < 1 || p->dil[i] < 1 || p->k[i] > lim || p->stride[i] > lim ||
            p->dil[i] > lim || p->out[i] < 1)
            FAIL("conv_gemm: bad geometry on spatial dim %d", i);
        /* every tap of every output inside x: the GEMM reads x where it lies */
        span[i] = (int64_t)(p->out[i] - 1) * p->stride[i] + (int64_t)(p->k[i] - 1) * p->dil[i] + 1;
        if (span[i] > x->dims[1 + i])
            FAIL("conv_gemm: x's dim %d (%lld) is short of %lld", 1 + i, (long long)x->dims[1 + i], (long long)span[i]);
    }
    if (w->dtype != RT_F32 || w->rank != 2 || w->dims[1] != (int64_t)p->k[0] * p->k[1] * c)
        FAIL("conv_gemm: W must be fp32 [Cout, KH·KW·C]");
    int64_t cout = w->dims[0];
    if (y->dtype != RT_F32 || y->rank != 4 || y->dims[0] != x->dims[0] || y->dims[1] != cout ||
        y->dims[2] != p->out[0] || y->dims[3] != p->out[1])
        FAIL("conv_gemm: y must be fp32 [B, Cout, out0, out1]");
    if (p->has_bias && (B(2)->dtype != RT_F32 || B(2)->numel != cout))
        FAIL("conv_gemm: bias must hold %lld fp32", (long long)cout);
    return RT_OK;
}

int rt_check_conv(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *x = B(0), *w = B(1), *y = O(0);
    int rc = check_geometry(x, p, err, errlen);
    if (rc) return rc;
    if ((p->has_bias | p->transpose) & ~1 || p->pool || p->exclude_pad) FAIL("conv: bad flags");
    if ((int)op->nin != 2 + p->has_bias) FAIL("conv: wrong input count");
    if (p->groups < 1 || x->dims[1] % p->groups)
        FAIL("conv: %d groups do not divide %lld channels", p->groups, (long long)x->dims[1]);
    if (w->dtype != RT_F32 || w->rank != x->rank) FAIL("conv: W must be fp32 of x's rank");
    for (int i = 0; i < p->nsp; i++)
        if (w->dims[2 + i] != p->k[i]) FAIL("conv: W's kernel dims disagree with the params");
    int64_t cout;
    if (!p->transpose) {
        cout = w->dims[0];
        if (w->dims[1] * p->groups != x->dims[1] || cout % p->groups) FAIL("conv: W must be [Cout, C/groups, ...]");
    } else {
        cout = w->dims[1] * p->groups;
        if (w->dims[0] != x->dims[1]) FAIL("conv_transpose: W must be [C, Cout/groups, ...]");
    }
    if ((rc = check_out(x, y, cout, p, err, errlen))) return rc;
    if (p->has_bias && (B(2)->dtype != RT_F32 || B(2)->numel != cout))
        FAIL("conv: bias must hold %lld fp32", (long long)cout);
    return RT_OK;
}

int rt_check_pool(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtConvParams *p = &op->p.conv;
    const RtBuf *x = B(0), *y = O(0);
    int rc = check_geometry(x, p, err, errlen);
    if (rc) return rc;
    if (p->groups != 1 || p->has_bias || p->transpose || p->pool < RT_POOL_MAX || p->pool > RT_POOL_L2 ||
        p->exclude_pad & ~1)
        FAIL("pool: bad flags");
    for (int i = 0; i < p->nsp; i++)
        if (p->dil[i] != 1) FAIL("pool: dilation must be 1");
    return check_out(x, y, x->dims[1], p, err, errlen);
}

int rt_check_lut_gemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtLutParams *p = &op->p.lut;
    const RtBuf *x = B(0), *ix = B(1), *lut = B(2), *y = O(0);
    if ((p->bits < 1 || p->bits > 8 || p->bits == 5 || p->bits == 7) || (p->has_bias & ~1) ||
        (int)op->nin != 3 + p->has_bias)
        FAIL("lut_gemm: bad params");
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || x->rank < 1 || x->rank != y->rank)
        FAIL("lut_gemm: x and y must be fp32 of one rank");
    if (ix->dtype != RT_U8 || ix->kind != RT_BUF_WEIGHT || ix->rank != 2)
        FAIL("lut_gemm: indices must be a u8 weight [N, K·bits/8]");
    int64_t k = x->dims[x->rank - 1], n = y->dims[y->rank - 1];
    for (uint32_t i = 0; i + 1 < x->rank; i++)
        if (x->dims[i] != y->dims[i]) FAIL("lut_gemm: y's leading dims must be x's");
    if (k * p->bits % 8 || ix->dims[0] != n || ix->dims[1] != k * p->bits / 8)
        FAIL("lut_gemm: indices must be [%lld, %lld]", (long long)n, (long long)(k * p->bits / 8));
    if (p->bn < 1 || p->bk < 1 || n % p->bn || k % p->bk)
        FAIL("lut_gemm: %d x %d palettes do not divide [%lld, %lld]", p->bn, p->bk, (long long)n, (long long)k);
    if (lut->dtype != RT_F32 || lut->numel != (int64_t)p->bn * p->bk << p->bits)
        FAIL("lut_gemm: lut must hold %d x %d palettes of %d fp32", p->bn, p->bk, 1 << p->bits);
    if (p->has_bias && (B(3)->dtype != RT_F32 || B(3)->numel != n))
        FAIL("lut_gemm: bias must hold %lld fp32", (long long)n);
    return RT_OK;
}

/* The vector kernels' copy of x in their lookup order (the others use none). */
size_t rt_s_lut_gemm(const RtBuf *bufs, const RtOpRec *op) { return (size_t)bufs[op->in[0]].numel * sizeof(float); }

int rt_check_qgemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtQGemmParams *p = &op->p.qg;
    const RtBuf *x = B(0), *q = B(1), *sc = B(2), *of = B(3), *y = O(0);
    if ((p->flags & ~(RT_QG_SIGNED | RT_QG_INT4)) || (p->has_bias & ~1) || (int)op->nin != 4 + p->has_bias)
        FAIL("qgemm: bad params");
    bool q4 = p->flags & RT_QG_INT4;
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || x->rank < 1 || x->rank != y->rank)
        FAIL("qgemm: x and y must be fp32 of one rank");
    if (q->dtype != RT_U8 || q->kind != RT_BUF_WEIGHT || q->rank != 2) FAIL("qgemm: q must be a u8 weight [N, K]");
    int64_t k = x->dims[x->rank - 1], n = y->dims[y->rank - 1];
    for (uint32_t i = 0; i + 1 < x->rank; i++)
        if (x->dims[i] != y->dims[i]) FAIL("qgemm: y's leading dims must be x's");
    if (q4 && k % 2) FAIL("qgemm: 4-bit weights need an even K, not %lld", (long long)k);
    if (q->dims[0] != n || q->dims[1] != (q4 ? k / 2 : k))
        FAIL("qgemm: q must be [%lld, %lld]", (long long)n, (long long)(q4 ? k / 2 : k));
    if (p->bn < 1 || p->bk < 1 || n % p->bn || k % p->bk)
        FAIL("qgemm: %d x %d blocks do not divide [%lld, %lld]", p->bn, p->bk, (long long)n, (long long)k);
    if (q4 && (k / p->bk) % 2) FAIL("qgemm: 4-bit blocks of %lld along K do not start on a byte", (long long)(k / p->bk));
    int64_t nb = (int64_t)p->bn * p->bk;
    if (sc->dtype != RT_F32 || sc->numel != nb || of->dtype != RT_F32 || of->numel != nb)
        FAIL("qgemm: scale and offset must hold %lld fp32 each", (long long)nb);
    if (p->has_bias && (B(4)->dtype != RT_F32 || B(4)->numel != n))
        FAIL("qgemm: bias must hold %lld fp32", (long long)n);
    return RT_OK;
}

int rt_check_spgemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtSpGemmParams *p = &op->p.sp;
    const RtBuf *x = B(0), *mk = B(1), *v = B(2), *st = B(3), *y = O(0);
    if ((p->has_bias & ~1) || p->reserved[0] || p->reserved[1] || p->reserved[2] || (int)op->nin != 4 + p->has_bias)
        FAIL("spgemm: bad params");
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || x->rank < 1 || x->rank != y->rank)
        FAIL("spgemm: x and y must be fp32 of one rank");
    int64_t k = x->dims[x->rank - 1], n = y->dims[y->rank - 1];
    for (uint32_t i = 0; i + 1 < x->rank; i++)
        if (x->dims[i] != y->dims[i]) FAIL("spgemm: y's leading dims must be x's");
    if (mk->dtype != RT_U8 || mk->kind != RT_BUF_WEIGHT || mk->rank != 2 || mk->dims[0] != n || mk->dims[1] != (k + 7) / 8)
        FAIL("spgemm: mask must be a u8 weight [%lld, %lld]", (long long)n, (long long)((k + 7) / 8));
    if ((v->dtype != RT_F16 && v->dtype != RT_F32) || v->kind != RT_BUF_WEIGHT || v->rank != 1 || v->numel < 16)
        FAIL("spgemm: values must be an fp16 or fp32 weight of rank 1, 16 padding elements included");
    if (st->dtype != RT_I32 || st->kind != RT_BUF_WEIGHT || st->numel != n + 1)
        FAIL("spgemm: start must be an i32 weight of %lld", (long long)(n + 1));
    if (p->has_bias && (B(4)->dtype != RT_F32 || B(4)->numel != n))
        FAIL("spgemm: bias must hold %lld fp32", (long long)n);
    return RT_OK;
}

/* Σ x over each K-block of every row of x (the offset's share of a block);
 * with 4-bit weights also x de-interleaved for the AVX-512 kernel. */
size_t rt_s_qgemm(const RtBuf *bufs, const RtOpRec *op) {
    const RtBuf *x = &bufs[op->in[0]];
    size_t sums = (size_t)(x->numel / x->dims[x->rank - 1]) * (size_t)op->p.qg.bk;
    return (sums + (op->p.qg.flags & RT_QG_INT4 ? (size_t)x->numel : 0)) * sizeof(float);
}

int rt_check_cumsum(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtScanParams *p = &op->p.scan;
    const RtBuf *x = B(0), *y = O(0);
    if ((x->dtype != RT_F32 && x->dtype != RT_I32) || x->dtype != y->dtype || !rt_same_dims(x, y))
        FAIL("cumsum: y must match x (fp32 or int32)");
    if (p->axis < 0 || p->axis >= (int)x->rank || (p->exclusive | p->reverse) & ~1 || p->reserved)
        FAIL("cumsum: bad params");
    return RT_OK;
}

int rt_check_gather_axis(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *ix = B(1), *y = O(0);
    int a = op->p.axis.axis;
    if (ix->dtype != RT_I32 || x->dtype == RT_F16 || x->dtype == RT_U8 || y->dtype != x->dtype)
        FAIL("gather_along_axis: dtypes");
    if (a < 0 || a >= (int)x->rank || !rt_same_dims(ix, y) || x->rank != y->rank)
        FAIL("gather_along_axis: bad axis or shapes");
    for (uint32_t i = 0; i < x->rank; i++)
        if ((int)i != a && x->dims[i] != y->dims[i]) FAIL("gather_along_axis: y must match x but on the axis");
    return RT_OK;
}

int rt_check_sample(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtSampleParams *p = &op->p.smp;
    const RtBuf *x = B(0), *c = B(1), *y = O(0);
    if ((uint32_t)p->mode > RT_SAMPLE_NEAREST || (uint32_t)p->pad > RT_PAD_SYMMETRIC ||
        (uint32_t)p->coord_mode > RT_COORD_ZERO_ONE || (p->align_corners | p->affine) & ~1)
        FAIL("sample: bad params");
    if (x->dtype != RT_F32 || c->dtype != RT_F32 || y->dtype != RT_F32 || x->rank != 4 || y->rank != 4 ||
        y->dims[0] != x->dims[0] || y->dims[1] != x->dims[1])
        FAIL("sample: x and y must be fp32 [B, C, H, W] and [B, C, Ho, Wo]");
    if (p->affine ? c->rank != 2 || c->dims[1] != 6 || (c->dims[0] != 1 && c->dims[0] != x->dims[0])
                  : c->rank != 4 || c->dims[0] != x->dims[0] || c->dims[1] != y->dims[2] || c->dims[2] != y->dims[3] ||
                        c->dims[3] != 2)
        FAIL("sample: the coordinates must be [B, Ho, Wo, 2], the affine matrices [1 or B, 6]");
    return RT_OK;
}

int rt_check_crop_resize(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtCropParams *p = &op->p.crop;
    const RtBuf *x = B(0), *bx = B(1), *y = O(0);
    if ((uint32_t)p->grid > RT_GRID_OFFSET || p->grid == RT_GRID_NEAREST || (uint32_t)p->box_mode > RT_BOX_CENTER_W ||
        (p->normalized | p->roi_index | p->has_indices | p->all_batches) & ~1 ||
        (p->has_indices && (p->roi_index || op->nin != 3)) || (!p->has_indices && op->nin != 2) ||
        !isfinite(p->spatial_scale))
        FAIL("crop_resize: bad params");
    if (x->dtype != RT_F32 || bx->dtype != RT_F32 || y->dtype != RT_F32 || x->rank != 4 || y->rank != 4 ||
        bx->rank != 2 || bx->dims[1] != 4 + p->roi_index)
        FAIL("crop_resize: x, y must be fp32 [B, C, H, W], [K, C, Ho, Wo] and the boxes fp32 [K, 4 or 5]");
    int64_t k = bx->dims[0] * (p->all_batches ? x->dims[0] : 1);
    if (y->dims[0] != k || y->dims[1] != x->dims[1]) FAIL("crop_resize: y must be [%lld, C, Ho, Wo]", (long long)k);
    if (p->has_indices && (B(2)->dtype != RT_I32 || B(2)->rank != 1 || B(2)->dims[0] != bx->dims[0]))
        FAIL("crop_resize: the box indices must be int32 [K]");
    if (p->all_batches && (p->roi_index || p->has_indices)) FAIL("crop_resize: bad params");
    return RT_OK;
}

int rt_check_nms(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtNmsParams *p = &op->p.nms;
    const RtBuf *bx = B(0), *sc = B(1);
    if ((p->per_class | p->boxes_last | p->has_counts) & ~1 || p->max_boxes < 1 || isnan(p->iou_threshold) ||
        isnan(p->score_threshold) || (int)op->nout != 3 + p->has_counts)
        FAIL("nms: bad params");
    int n = p->boxes_last ? 2 : 1, c = 3 - n;
    if (bx->dtype != RT_F32 || sc->dtype != RT_F32 || bx->rank != 3 || sc->rank != 3 || bx->dims[c] != 4 ||
        sc->dims[0] != bx->dims[0] || sc->dims[n] != bx->dims[n] || bx->dims[n] < 1 || bx->dims[n] > INT32_MAX)
        FAIL("nms: boxes and scores must be fp32 [B, N, 4] and [B, N, K] (ios17: [B, 4, N], [B, K, N])");
    int64_t B = bx->dims[0], M = p->max_boxes, ob[3] = {B, M, M}, os[3] = {B, M, M};
    ob[c] = 4, os[c] = sc->dims[c];
    const RtBuf *y[4] = {O(0), O(1), O(2), p->has_counts ? O(3) : NULL};
    for (int i = 0; i < 2; i++)
        if (y[i]->dtype != RT_F32 || y[i]->rank != 3 || y[i]->dims[0] != B || y[i]->dims[1] != (i ? os : ob)[1] ||
            y[i]->dims[2] != (i ? os : ob)[2])
            FAIL("nms: the kept boxes and scores must be shaped like the inputs with max_boxes for N");
    if (y[2]->dtype != RT_I32 || y[2]->rank != 2 || y[2]->dims[0] != B || y[2]->dims[1] != M ||
        (y[3] && (y[3]->dtype != RT_I32 || y[3]->rank != 1 || y[3]->dims[0] != B)))
        FAIL("nms: indices must be int32 [B, max_boxes], counts int32 [B]");
    return RT_OK;
}

int rt_check_non_zero(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    if (x->dtype != RT_F32 && x->dtype != RT_I32 && x->dtype != RT_BOOL) FAIL("non_zero: x must be fp32, int32 or bool");
    if (!(y->flags & RT_BUFF_ROWS) || y->rank != 2 || y->dims[0] != x->numel || y->dims[1] != (int64_t)x->rank)
        FAIL("non_zero: y must be int32 [%lld, %u] with its rows counted at run time", (long long)x->numel, x->rank);
    return RT_OK;
}

size_t rt_s_nms(const RtBuf *bufs, const RtOpRec *op) {
    int64_t n = bufs[op->in[0]].dims[op->p.nms.boxes_last ? 2 : 1];
    return (size_t)(n * 4 + op->p.nms.max_boxes) * sizeof(int32_t);
}

int rt_check_gather_nd(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *ix = B(1), *y = O(0);
    int64_t bd = op->p.axis.axis, k = ix->rank ? ix->dims[ix->rank - 1] : 0;
    if (ix->dtype != RT_I32 || x->dtype == RT_F16 || x->dtype == RT_U8 || y->dtype != x->dtype)
        FAIL("gather_nd: dtypes");
    if (bd < 0 || ix->rank < bd + 1 || k < 1 || bd + k > (int64_t)x->rank ||
        y->rank != ix->rank - 1 + x->rank - (uint32_t)(bd + k))
        FAIL("gather_nd: batch_dims %lld, index depth %lld and the ranks disagree", (long long)bd, (long long)k);
    for (uint32_t i = 0; i < (uint32_t)bd; i++)
        if (ix->dims[i] != x->dims[i]) FAIL("gather_nd: indices' batch dims must be x's");
    for (uint32_t i = 0; i + 1 < ix->rank; i++)
        if (y->dims[i] != ix->dims[i]) FAIL("gather_nd: y's leading dims must be indices'");
    for (uint32_t i = (uint32_t)(bd + k); i < x->rank; i++)
        if (y->dims[ix->rank - 1 + i - (bd + k)] != x->dims[i]) FAIL("gather_nd: y's trailing dims must be x's");
    return RT_OK;
}

int rt_check_scatter(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtScatterParams *p = &op->p.scatter;
    const RtBuf *d = B(0), *ix = B(1), *u = B(2), *y = O(0);
    if (p->kind < RT_SC_AXIS || p->kind > RT_SC_ND || p->mode < 0 || p->mode >= RT_SCM_COUNT_ || p->reserved)
        FAIL("scatter: bad params");
    if ((d->dtype != RT_F32 && d->dtype != RT_I32) || u->dtype != d->dtype || y->dtype != d->dtype ||
        !rt_same_dims(d, y))
        FAIL("scatter: data, updates and y must be one dtype (fp32 or int32), y data's shape");
    if (ix->dtype != RT_I32) FAIL("scatter: indices must be int32");
    if (p->kind != RT_SC_ND && (p->axis < 0 || p->axis >= (int)d->rank)) FAIL("scatter: axis %d out of range", p->axis);
    if (p->kind == RT_SC_AXIS) {
        if (ix->rank != 1 || u->rank != d->rank) FAIL("scatter: indices must be [C] and updates of data's rank");
        for (uint32_t i = 0; i < d->rank; i++)
            if (u->dims[i] != ((int)i == p->axis ? ix->dims[0] : d->dims[i]))
                FAIL("scatter: updates must be data's shape with dim %d = %lld", p->axis, (long long)ix->dims[0]);
    } else if (p->kind == RT_SC_ALONG) {
        if (!rt_same_dims(ix, u) || u->rank != d->rank)
            FAIL("scatter_along_axis: indices and updates must have one shape, of data's rank");
        for (uint32_t i = 0; i < d->rank; i++)
            if ((int)i != p->axis && u->dims[i] > d->dims[i])
                FAIL("scatter_along_axis: updates exceed data on dim %u", i);
    } else {
        if (ix->rank < 1) FAIL("scatter_nd: indices must have rank >= 1");
        int64_t k = ix->dims[ix->rank - 1];
        if (k < 1 || k > (int64_t)d->rank || u->rank != ix->rank - 1 + d->rank - (uint32_t)k)
            FAIL("scatter_nd: updates must be indices' leading dims then data's dims after the first %lld",
                 (long long)k);
        for (uint32_t i = 0; i + 1 < ix->rank; i++)
            if (u->dims[i] != ix->dims[i]) FAIL("scatter_nd: updates' leading dims must be indices'");
        for (uint32_t i = (uint32_t)k; i < d->rank; i++)
            if (u->dims[ix->rank - 1 + i - k] != d->dims[i]) FAIL("scatter_nd: updates' trailing dims must be data's");
    }
    return RT_OK;
}

int rt_check_sort(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtSortParams *p = &op->p.sort;
    const RtBuf *x = B(0);
    if ((p->ascending | p->has_values | p->has_indices) & ~1 || p->reserved || !(p->has_values | p->has_indices) ||
        (int)op->nout != p->has_values + p->has_indices)
        FAIL("sort: bad params");
    if ((x->dtype != RT_F32 && x->dtype != RT_I32) || p->axis < 0 || p->axis >= (int)x->rank)
        FAIL("sort: x must be fp32 or int32, axis in range");
    if (p->k < 1 || p->k > x->dims[p->axis]) FAIL("sort: k %d is not in 1..%lld", p->k, (long long)x->dims[p->axis]);
    for (int o = 0; o < (int)op->nout; o++) {
        const RtBuf *y = O(o);
        bool vals = p->has_values && o == 0;
        if (y->dtype != (vals ? x->dtype : RT_I32) || y->rank != x->rank)
            FAIL("sort: output %d has the wrong dtype or rank", o);
        for (uint32_t i = 0; i < x->rank; i++)
            if (y->dims[i] != ((int)i == p->axis ? p->k : x->dims[i]))
                FAIL("sort: output %d must be x's shape with dim %d = %d", o, p->axis, p->k);
    }
    return RT_OK;
}

/* Two int32 index lines of the axis (merge sort's source and target). */
size_t rt_s_sort(const RtBuf *bufs, const RtOpRec *op) {
    return (size_t)bufs[op->in[0]].dims[op->p.sort.axis] * 2 * sizeof(int32_t);
}

int rt_check_random(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtRandomParams *p = &op->p.rnd;
    const RtBuf *y = O(0);
    if (p->kind < 0 || p->kind >= RT_RAND_COUNT_ || p->probs & ~1) FAIL("random: bad params");
    if (y->dtype != RT_F32) FAIL("random: y must be fp32");
    if ((int)op->nin != (p->kind == RT_RAND_CATEGORICAL)) FAIL("random: categorical takes x, the others no input");
    if (!isfinite(p->a) || !isfinite(p->b)) FAIL("random: parameters must be finite");
    if (p->kind == RT_RAND_CATEGORICAL) {
        const RtBuf *x = B(0);
        if (x->dtype != RT_F32 || x->rank < 1 || y->rank != x->rank)
            FAIL("random_categorical: x and y must be fp32 of one rank");
        for (uint32_t i = 0; i + 1 < x->rank; i++)
            if (x->dims[i] != y->dims[i]) FAIL("random_categorical: y's leading dims must be x's");
    }
    return RT_OK;
}

/* One row of cumulative probabilities (double). */
size_t rt_s_random(const RtBuf *bufs, const RtOpRec *op) {
    if (op->p.rnd.kind != RT_RAND_CATEGORICAL) return 0;
    const RtBuf *x = &bufs[op->in[0]];
    return (size_t)x->dims[x->rank - 1] * sizeof(double);
}
