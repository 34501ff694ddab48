/* ops.c — the op table and every op's shape/parameter rules.  The builder
 * runs these checks when an op is recorded and the loader runs them again on
 * untrusted bytes, so a kernel only ever sees an op that passed them. */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "rt_internal.h"

int rt_errf(char *err, size_t errlen, int code, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

size_t rt_dtype_size(RtDType t) {
    switch (t) {
    case RT_F32:
    case RT_I32: return 4;
    case RT_F16: return 2;
    case RT_BOOL:
    case RT_U8:
    case RT_I8: return 1;
    case RT_I16:
    case RT_U16: return 2;
    }
    return 0;
}

uint64_t rt_buf_storage(const RtBufRec *r) {
    size_t es = rt_dtype_size((RtDType)r->dtype);
    if (!es || r->rank > RT_MAX_RANK) return 0;
    uint64_t n = 1;
    for (uint32_t i = 0; i < r->rank; i++) {
        /* 2^31 per dim and 2^40 elements keep every index product in int64. */
        if (r->dims[i] < 1 || r->dims[i] > (INT64_C(1) << 31)) return 0;
        n *= (uint64_t)r->dims[i];
        if (n > (UINT64_C(1) << 40)) return 0;
    }
    if (r->flags & RT_BUFF_PANELS) {
        if (r->rank != 2 || (r->dtype != RT_F16 && r->dtype != RT_F32)) return 0;
        uint64_t panels = ((uint64_t)r->dims[0] + RT_PANEL - 1) / RT_PANEL;
        return panels * RT_PANEL * (uint64_t)r->dims[1] * es;
    }
    return n * es;
}

int rt_buf_init(RtBuf *b, const RtBufRec *r, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    if (r->kind < RT_BUF_INPUT || r->kind > RT_BUF_STATE)
        return rt_errf(err, errlen, RT_EFORMAT, "buffer kind %u invalid", r->kind);
    if ((r->flags & ~(uint32_t)(RT_BUFF_PANELS | RT_BUFF_ROWS)) || r->flags == (RT_BUFF_PANELS | RT_BUFF_ROWS))
        return rt_errf(err, errlen, RT_EFORMAT, "buffer flags %#x invalid", r->flags);
    if ((r->flags & RT_BUFF_PANELS) && r->kind != RT_BUF_WEIGHT)
        return rt_errf(err, errlen, RT_EFORMAT, "only weights can be packed");
    if ((r->flags & RT_BUFF_ROWS) && (r->kind != RT_BUF_TEMP || r->dtype != RT_I32 || r->rank < 1))
        return rt_errf(err, errlen, RT_EFORMAT, "only an int32 temp has its rows counted at run time");
    if (r->kind == RT_BUF_TEMP && r->dtype == RT_F16)
        return rt_errf(err, errlen, RT_EFORMAT, "fp16 is a weight or input type only");
    if (r->kind != RT_BUF_WEIGHT && r->dtype == RT_U8)
        return rt_errf(err, errlen, RT_EFORMAT, "packed indices (u8) are a weight type only");
    uint64_t bytes = rt_buf_storage(r);
    if (!bytes) return rt_errf(err, errlen, RT_EFORMAT, "buffer dtype %u / rank %u / dims invalid", r->dtype, r->rank);
    b->kind = r->kind;
    b->dtype = r->dtype;
    b->rank = r->rank;
    b->flags = r->flags;
    b->numel = 1;
    for (uint32_t i = 0; i < r->rank; i++) {
        b->dims[i] = r->dims[i];
        b->numel *= r->dims[i];
    }
    b->bytes = bytes;
    return RT_OK;
}

const char *rt_strerror(int code) {
    switch (code) {
    case RT_OK: return "ok";
    case RT_EINVAL: return "invalid argument";
    case RT_ENOMEM: return "out of memory";
    case RT_EIO: return "I/O error";
    case RT_EFORMAT: return "malformed artifact";
    case RT_EVERSION: return "unsupported artifact version or backend";
    case RT_ECHECKSUM: return "checksum mismatch";
    case RT_EBIND: return "tensors do not match the model";
    case RT_EINDEX: return "index out of range (a gather index, or a slice_update box outside its state)";
    case RT_ELOOP: return "a while_loop ran past its limit of " RT_MODE_STR(RT_LOOP_MAX_ITERS) " iterations";
    case RT_ESYS: return "system error";
    }
    return "unknown error";
}

/* ---- shape helpers ---- */
#define FAIL(...) return rt_errf(err, errlen, RT_EINVAL, __VA_ARGS__)
#define B(i)      (&bufs[op->in[i]])
#define O(i)      (&bufs[op->out[i]])

bool rt_same_dims(const RtBuf *a, const RtBuf *b) {
    if (a->rank != b->rank) return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* in broadcasts to out: right-aligned, each dim equal or 1. */
static bool bcast_to(const RtBuf *in, const RtBuf *out) {
    if (in->rank > out->rank) return false;
    for (uint32_t i = 0; i < in->rank; i++) {
        int64_t d = in->dims[in->rank - 1 - i], o = out->dims[out->rank - 1 - i];
        if (d != o && d != 1) return false;
    }
    return true;
}

/* out is exactly the broadcast shape of ins. */
bool rt_bcast_result(const RtBuf *const *ins, int n, const RtBuf *out) {
    uint32_t r = 0;
    for (int i = 0; i < n; i++) {
        if (!bcast_to(ins[i], out)) return false;
        if (ins[i]->rank > r) r = ins[i]->rank;
    }
    if (out->rank != r) return false;
    for (uint32_t d = 0; d < r; d++) { /* out dim d must come from some input */
        int64_t want = 1;
        for (int i = 0; i < n; i++) {
            int k = (int)d - (int)(r - ins[i]->rank);
            if (k >= 0 && ins[i]->dims[k] != 1) want = ins[i]->dims[k];
        }
        if (out->dims[d] != want) return false;
    }
    return true;
}

static int check_pack_tiles(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || x->rank < 2 || y->rank != 4) FAIL("pack_tiles: fp32 x [B, K, ...] and y of rank 4");
    int64_t pos = x->dims[0] > 0 && x->dims[1] > 0 ? x->numel / (x->dims[0] * x->dims[1]) : 0;
    if (y->dims[0] != x->dims[0] || y->dims[1] != (pos + RT_TILE_M - 1) / RT_TILE_M || y->dims[2] != x->dims[1] ||
        y->dims[3] != RT_TILE_M)
        FAIL("pack_tiles: y must be [%lld, %lld, %lld, %d]", (long long)x->dims[0],
             (long long)((pos + RT_TILE_M - 1) / RT_TILE_M), (long long)x->dims[1], RT_TILE_M);
    return RT_OK;
}

static int check_gemm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtGemmParams *p = &op->p.gemm;
    if (p->layout != RT_GEMM_ROWS && p->layout != RT_GEMM_CHANNELS && p->layout != RT_GEMM_PACKED)
        FAIL("gemm: bad layout %d", p->layout);
    if (p->act < RT_ACT_NONE || p->act > RT_ACT_SILU) FAIL("gemm: bad activation %d", p->act);
    if ((p->has_bias != 0 && p->has_bias != 1) || (p->has_residual != 0 && p->has_residual != 1))
        FAIL("gemm: bad flags");
    if ((int)op->nin != 2 + p->has_bias + p->has_residual || op->nout != 1) FAIL("gemm: wrong input count");
    const RtBuf *x = B(0), *w = B(1), *y = O(0);
    if (w->kind != RT_BUF_WEIGHT || w->rank != 2) FAIL("gemm: W must be a rank-2 weight [N, K]");
    if (w->dtype != RT_F32 && w->dtype != RT_F16) FAIL("gemm: W must be fp32 or fp16");
    if (x->dtype != RT_F32 || y->dtype != RT_F32) FAIL("gemm: x and y must be fp32");
    int64_t n = w->dims[0], k = w->dims[1];
    if (p->layout == RT_GEMM_PACKED) {
        int64_t pos = y->rank >= 2 && y->dims[0] > 0 && n > 0 ? y->numel / (y->dims[0] * n) : -1;
        if (x->rank != 4 || y->rank < 2 || x->dims[0] != y->dims[0] || x->dims[2] != k || x->dims[3] != RT_TILE_M ||
            y->dims[1] != n || x->dims[1] != (pos + RT_TILE_M - 1) / RT_TILE_M)
            FAIL("gemm: a packed x must be [B, ceil(S/%d), %lld, %d] for y [B, %lld, *spatial]", RT_TILE_M,
                 (long long)k, RT_TILE_M, (long long)n);
    } else {
        uint32_t ax = p->layout == RT_GEMM_ROWS ? x->rank - 1 : 1;
        if (x->rank < (p->layout == RT_GEMM_ROWS ? 1u : 2u) || x->rank != y->rank) FAIL("gemm: x/y rank");
        for (uint32_t i = 0; i < x->rank; i++) {
            if (i == ax) {
                if (x->dims[i] != k || y->dims[i] != n)
                    FAIL("gemm: x has %lld features, W [%lld, %lld]", (long long)x->dims[i], (long long)n,
                         (long long)k);
            } else if (x->dims[i] != y->dims[i])
                FAIL("gemm: y shape does not match x");
        }
    }
    int j = 2;
    if (p->has_bias) {
        const RtBuf *b = B(j++);
        if (b->dtype != RT_F32 || b->numel != n) FAIL("gemm: bias must be fp32 with N elements");
    }
    if (p->has_residual) {
        const RtBuf *r = B(j);
        if (r->dtype != RT_F32 || !rt_same_dims(r, y)) FAIL("gemm: residual must match y");
    }
    return RT_OK;
}

static int check_matmul(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtMatmulParams *p = &op->p.matmul;
    const RtBuf *x = B(0), *y = B(1), *z = O(0);
    if ((p->transpose_x | p->transpose_y) & ~1) FAIL("matmul: bad transpose flags");
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || z->dtype != RT_F32) FAIL("matmul: fp32 only");
    if (x->rank < 2 || y->rank < 2) FAIL("matmul: operands need rank >= 2");
    int64_t m = x->dims[x->rank - 2 + p->transpose_x], k = x->dims[x->rank - 1 - p->transpose_x];
    int64_t k2 = y->dims[y->rank - 2 + p->transpose_y], n = y->dims[y->rank - 1 - p->transpose_y];
    if (k != k2) FAIL("matmul: inner dims %lld and %lld differ", (long long)k, (long long)k2);
    uint32_t r = x->rank > y->rank ? x->rank : y->rank;
    if (z->rank != r || z->dims[r - 2] != m || z->dims[r - 1] != n) FAIL("matmul: result shape");
    for (uint32_t i = 0; i + 2 < r; i++) {
        int xi = (int)i - (int)(r - x->rank), yi = (int)i - (int)(r - y->rank);
        int64_t xd = xi >= 0 ? x->dims[xi] : 1, yd = yi >= 0 ? y->dims[yi] : 1;
        if (xd != yd && xd != 1 && yd != 1) FAIL("matmul: batch dims do not broadcast");
        if (z->dims[i] != (xd > yd ? xd : yd)) FAIL("matmul: result batch shape");
    }
    return RT_OK;
}

/* The flagged form: K and V possibly transposed ([.., E, S]), possibly fp16,
 * possibly in two parts along S (a cache and the new positions). */
static int check_attention_kv(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtAttnParams *p = &op->p.attn;
    int nparts = (p->flags & RT_ATTN_SPLIT) ? 2 : 1;
    if ((int)op->nin != 1 + 2 * nparts + p->has_mask) FAIL("attention: wrong input count");
    if (!isfinite(p->scale)) FAIL("attention: scale must be finite");
    /* K_T / V_T only change the kernel's walk, not the sizes checked here */
    const RtBuf *q = B(0), *o = O(0);
    if (q->dtype != RT_F32 || q->rank != 4 || o->dtype != RT_F32 || o->rank != 4)
        FAIL("attention: q and output must be fp32 rank 4");
    int64_t b = q->dims[0], h = q->dims[1], l = q->dims[2], e = q->dims[3], hk = p->kv_heads, ev = o->dims[3], s = 0;
    if (hk < 1 || hk > h) FAIL("attention: bad kv_heads %lld", (long long)hk);
    for (int i = 0; i < nparts; i++) {
        const RtBuf *k = B(1 + 2 * i), *v = B(2 + 2 * i);
        if ((k->dtype != RT_F32 && k->dtype != RT_F16) || (v->dtype != RT_F32 && v->dtype != RT_F16) ||
            ((k->flags | v->flags) & RT_BUFF_PANELS))
            FAIL("attention: k and v must be fp32 or fp16");
        int64_t ks = k->numel / (b * hk * e);
        if (ks < 1 || k->numel != b * hk * e * ks || v->numel != b * hk * ev * ks)
            FAIL("attention: q/k/v sizes disagree");
        s += ks;
    }
    if (h % hk) FAIL("attention: %lld heads not a multiple of %lld kv heads", (long long)h, (long long)hk);
    if (o->dims[0] != b || o->dims[1] != h || o->dims[2] != l || o->dims[3] != ev) FAIL("attention: output shape");
    if (p->causal && l > s) FAIL("attention: causal needs L <= S");
    if (p->has_mask) {
        const RtBuf *m = B(1 + 2 * nparts);
        RtBuf full = {.rank = 4, .dims = {b, h, l, s}};
        if (m->dtype != RT_F32 || !bcast_to(m, &full)) FAIL("attention: mask must broadcast to [B, H, L, S]");
    }
    return RT_OK;
}

static int check_attention(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtAttnParams *p = &op->p.attn;
    if ((p->causal | p->has_mask) & ~1 || (uint32_t)p->flags & ~(uint32_t)RT_ATTN_FLAGS_ALL)
        FAIL("attention: bad flags");
    if (p->flags) return check_attention_kv(bufs, op, err, errlen);
    if (p->kv_heads) FAIL("attention: kv_heads is for the flagged form");
    if ((int)op->nin != 3 + p->has_mask) FAIL("attention: wrong input count");
    if (!isfinite(p->scale)) FAIL("attention: scale must be finite");
    const RtBuf *q = B(0), *k = B(1), *v = B(2), *o = O(0);
    for (int i = 0; i < 3; i++)
        if (B(i)->dtype != RT_F32 || B(i)->rank != 4) FAIL("attention: q, k, v must be fp32 rank 4");
    if (o->dtype != RT_F32 || o->rank != 4) FAIL("attention: output must be fp32 rank 4");
    int64_t b = q->dims[0], h = q->dims[1], l = q->dims[2], e = q->dims[3];
    int64_t hk = k->dims[1], s = k->dims[2];
    if (k->dims[0] != b || v->dims[0] != b || v->dims[1] != hk || v->dims[2] != s || k->dims[3] != e)
        FAIL("attention: q/k/v shapes disagree");
    if (h % hk) FAIL("attention: %lld heads not a multiple of %lld kv heads", (long long)h, (long long)hk);
    if (o->dims[0] != b || o->dims[1] != h || o->dims[2] != l || o->dims[3] != v->dims[3])
        FAIL("attention: output shape");
    if (p->causal && l > s) FAIL("attention: causal needs L <= S");
    if (p->has_mask) {
        const RtBuf *m = B(3);
        RtBuf full = {.rank = 4, .dims = {b, h, l, s}};
        if (m->dtype != RT_F32 || !bcast_to(m, &full)) FAIL("attention: mask must broadcast to [B, H, L, S]");
    }
    return RT_OK;
}

static int check_norm(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtNormParams *p = &op->p.norm;
    const RtBuf *x = B(0), *y = O(0);
    if (p->kind != RT_NORM_LAYER && p->kind != RT_NORM_RMS) FAIL("norm: bad kind");
    if ((p->has_gamma | p->has_beta) & ~1) FAIL("norm: bad flags");
    if ((int)op->nin != 1 + p->has_gamma + p->has_beta) FAIL("norm: wrong input count");
    if (!(p->eps >= 0 && isfinite(p->eps))) FAIL("norm: bad epsilon");
    if (x->dtype != RT_F32 || !rt_same_dims(x, y) || y->dtype != RT_F32) FAIL("norm: y must match x (fp32)");
    if (p->axis_begin < 0 || p->axis_begin >= p->axis_end || p->axis_end > (int)x->rank) FAIL("norm: bad axes");
    int64_t c = 1;
    for (int i = p->axis_begin; i < p->axis_end; i++) c *= x->dims[i];
    for (int i = 1; i < (int)op->nin; i++)
        if (B(i)->dtype != RT_F32 || B(i)->numel != c) FAIL("norm: gamma/beta must hold %lld fp32", (long long)c);
    return RT_OK;
}

static int check_softmax(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || !rt_same_dims(x, y)) FAIL("softmax: y must match x (fp32)");
    if (op->p.axis.axis < 0 || op->p.axis.axis >= (int)x->rank) FAIL("softmax: bad axis");
    return RT_OK;
}

static int check_binary(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *ins[2] = {B(0), B(1)}, *c = O(0);
    if (op->p.bin.op < 0 || op->p.bin.op >= RT_BIN_COUNT_) FAIL("binary: bad op");
    if (c->dtype != RT_F32 && c->dtype != RT_I32) FAIL("binary: fp32 or int32 only");
    if (ins[0]->dtype != c->dtype || ins[1]->dtype != c->dtype) FAIL("binary: dtypes differ");
    if (c->dtype == RT_I32 && op->p.bin.op == RT_BIN_POW) FAIL("binary: pow is fp32 only");
    if (!rt_bcast_result(ins, 2, c)) FAIL("binary: result is not the broadcast shape");
    return RT_OK;
}

static int check_unary(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    if (op->p.un.op < 0 || op->p.un.op >= RT_UN_COUNT_) FAIL("unary: bad op");
    if (!isfinite(op->p.un.eps)) FAIL("unary: bad epsilon");
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || !rt_same_dims(x, y)) FAIL("unary: y must match x (fp32)");
    return RT_OK;
}

static int check_reduce(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    const RtReduceParams *p = &op->p.red;
    if (p->op < 0 || p->op >= RT_RED_COUNT_) FAIL("reduce: bad op");
    if (x->dtype != RT_F32 || y->dtype != RT_F32) FAIL("reduce: fp32 only");
    if (x->rank < 32 && (p->axes >> x->rank)) FAIL("reduce: axis out of range");
    int64_t kept = 1;
    for (uint32_t i = 0; i < x->rank; i++)
        if (!(p->axes >> i & 1)) kept *= x->dims[i];
    if (y->numel != kept) FAIL("reduce: result must hold the %lld kept elements", (long long)kept);
    return RT_OK;
}

/* Whether a strided walk stays inside [0, n); negative strides (reversed
 * slices) allowed only when neg_ok.  Overflow counts as leaving. */
static bool walk_inside(int rank, const int64_t *dims, int64_t off, const int64_t *stride, int64_t n, bool neg_ok) {
    int64_t lo = off, hi = off;
    for (int i = 0; i < rank; i++) {
        int64_t t;
        if ((stride[i] < 0 && !neg_ok) || __builtin_mul_overflow(dims[i] - 1, stride[i], &t)) return false;
        if (t < 0 ? __builtin_add_overflow(lo, t, &lo) : __builtin_add_overflow(hi, t, &hi)) return false;
    }
    return lo >= 0 && hi < n;
}

static int check_copy(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtCopyParams *p = &op->p.copy;
    const RtBuf *x = B(0), *y = O(0);
    if (x->dtype != y->dtype && !(x->dtype == RT_F16 && y->dtype == RT_F32)) FAIL("copy: dtypes differ");
    if (p->rank < 0 || p->rank > RT_COPY_MAX_RANK || p->reserved) FAIL("copy: bad rank");
    int64_t n = 1;
    for (int i = 0; i < p->rank; i++) {
        if (p->dims[i] < 1 || p->dims[i] > (INT64_C(1) << 31)) FAIL("copy: bad dims");
        if (__builtin_mul_overflow(n, p->dims[i], &n) || n > (INT64_C(1) << 40)) FAIL("copy: too many elements");
    }
    /* Every step writes y: more steps than y has elements, or a repeated
     * destination, is a bad plan (and unbounded work on corrupt bytes). */
    if (n > y->numel) FAIL("copy: %lld steps into %lld elements", (long long)n, (long long)y->numel);
    for (int i = 0; i < p->rank; i++)
        if (p->dims[i] > 1 && p->dst_stride[i] == 0) FAIL("copy: destination stride 0 on dim %d", i);
    if (!walk_inside(p->rank, p->dims, p->src_offset, p->src_stride, x->numel, true))
        FAIL("copy: source walk leaves x");
    if (!walk_inside(p->rank, p->dims, p->dst_offset, p->dst_stride, y->numel, false))
        FAIL("copy: destination walk leaves y");
    return RT_OK;
}

static int check_gather(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *idx = B(1), *y = O(0);
    int a = op->p.axis.axis;
    if (idx->dtype != RT_I32) FAIL("gather: indices must be int32");
    if (x->dtype == RT_F16 || y->dtype != x->dtype) FAIL("gather: y dtype must match x");
    if (a < 0 || a >= (int)x->rank) FAIL("gather: bad axis");
    if (y->rank != x->rank - 1 + idx->rank) FAIL("gather: result rank");
    uint32_t j = 0;
    for (int i = 0; i < a; i++)
        if (y->dims[j++] != x->dims[i]) FAIL("gather: result shape");
    for (uint32_t i = 0; i < idx->rank; i++)
        if (y->dims[j++] != idx->dims[i]) FAIL("gather: result shape");
    for (uint32_t i = a + 1; i < x->rank; i++)
        if (y->dims[j++] != x->dims[i]) FAIL("gather: result shape");
    return RT_OK;
}

static int check_band(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    if (x->dtype != RT_F32 || y->dtype != RT_F32 || !rt_same_dims(x, y) || x->rank < 2)
        FAIL("band_part: y must match x (fp32, rank >= 2)");
    return RT_OK;
}

static int check_select(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *ins[3] = {B(0), B(1), B(2)}, *y = O(0);
    if (ins[0]->dtype != RT_BOOL) FAIL("select: cond must be bool");
    if (ins[1]->dtype != y->dtype || ins[2]->dtype != y->dtype || y->dtype == RT_F16) FAIL("select: dtypes differ");
    if (!rt_bcast_result(ins, 3, y)) FAIL("select: result is not the broadcast shape");
    return RT_OK;
}

static int check_cast(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    const RtBuf *x = B(0), *y = O(0);
    if (x->dtype == RT_F16 || y->dtype == RT_F16 || !rt_same_dims(x, y)) FAIL("cast: y must match x");
    if (op->p.cast.round_f16 & ~1 || (op->p.cast.round_f16 && y->dtype != RT_F32)) FAIL("cast: bad round_f16");
    return RT_OK;
}

/* ---- per-part scratch of the kernels that need one ---- */
size_t rt_s_gemm(const RtBuf *bufs, const RtOpRec *op) {
    /* partial sums of a row block (up to RT_MB_MAX rows) over a group of panels */
    const RtBuf *w = &bufs[op->in[1]];
    int64_t rows = rt_gemm_rows(&bufs[op->in[0]], w->dims[1], op->p.gemm.layout);
    int64_t panels = (w->dims[0] + RT_PANEL - 1) / RT_PANEL;
    if (rows <= RT_TILE_M || panels < 2) return 0;
    rows = (rows + RT_TILE_M - 1) / RT_TILE_M * RT_TILE_M;
    rows = rows < RT_MB_MAX ? rows : RT_MB_MAX;
    panels = panels < RT_GEMM_GROUP ? panels : RT_GEMM_GROUP;
    return (size_t)(rows * panels * RT_PANEL) * sizeof(float);
}

size_t rt_s_matmul(const RtBuf *bufs, const RtOpRec *op) {
    /* a transposed y is repacked row-major [K, N] per batch */
    if (!op->p.matmul.transpose_y) return 0;
    const RtBuf *y = &bufs[op->in[1]];
    return (size_t)(y->dims[y->rank - 1] * y->dims[y->rank - 2]) * sizeof(float);
}

size_t rt_s_attention(const RtBuf *bufs, const RtOpRec *op) {
    const RtAttnParams *p = &op->p.attn;
    if (p->flags) { /* one score row of S plus the scaled query */
        int np = (p->flags & RT_ATTN_SPLIT) ? 2 : 1;
        int64_t s = 0;
        const RtBuf *q = &bufs[op->in[0]];
        for (int i = 0; i < np; i++) s += bufs[op->in[1 + 2 * i]].numel / (q->dims[0] * p->kv_heads * q->dims[3]);
        return (size_t)(s + bufs[op->in[0]].dims[3]) * sizeof(float);
    }
    const RtBuf *k = &bufs[op->in[1]];
    int64_t s = k->dims[2], e = k->dims[3];
    return (size_t)(RT_ATT_LB * s + e * s) * sizeof(float); /* scores + kᵀ */
}

static int check_loop_op(const RtBuf *bufs, const RtOpRec *op, char *err, size_t errlen) {
    if (op->kind == RT_OP_LOOP_TEST && (B(0)->dtype != RT_BOOL || B(0)->numel != 1))
        FAIL("loop_test: cond must be one bool");
    return RT_OK;
}

enum { LOOP_MAX_DEPTH = 32 };

int rt_loops(const RtOpRec *ops, uint32_t nops, uint32_t *jump, char *err, size_t errlen) {
    uint32_t stack[LOOP_MAX_DEPTH];
    int depth = 0, n = 0;
    for (uint32_t i = 0; i < nops; i++) {
        jump[i] = 0;
        switch (ops[i].kind) {
        case RT_OP_LOOP_BEGIN:
            if (depth == LOOP_MAX_DEPTH) FAIL("op %u: loops nested deeper than %d", i, LOOP_MAX_DEPTH);
            stack[depth++] = i;
            jump[i] = UINT32_MAX; /* its TEST, not seen yet */
            n++;
            break;
        case RT_OP_LOOP_TEST:
            if (!depth || jump[stack[depth - 1]] != UINT32_MAX)
                FAIL("op %u: a loop test outside a loop, or a second one", i);
            jump[stack[depth - 1]] = i;
            break;
        case RT_OP_LOOP_END: {
            if (!depth) FAIL("op %u: a loop end without its begin", i);
            uint32_t b = stack[--depth];
            if (jump[b] == UINT32_MAX) FAIL("op %u: a loop without a test", i);
            jump[jump[b]] = i + 1;
            jump[i] = b + 1;
            break;
        }
        default: break;
        }
    }
    if (depth) FAIL("a loop begun at op %u never ends", stack[depth - 1]);
    return n;
}

/* Ends come in program order, an inner loop's before its outer one's: a
 * lifetime stretched to an inner END is then seen by the outer loop. */
void rt_loops_extend(const RtOpRec *ops, uint32_t nops, const uint32_t *jump, uint32_t nbuf, const int64_t *first,
                     int64_t *last) {
    for (uint32_t e = 0; e < nops; e++) {
        if (ops[e].kind != RT_OP_LOOP_END) continue;
        int64_t b = (int64_t)jump[e] - 1;
        for (uint32_t i = 0; i < nbuf; i++)
            if (first[i] < b && last[i] >= b && last[i] < (int64_t)e) last[i] = e;
    }
}

static const RtOpInfo op_table[RT_OP_COUNT_] = {
    [RT_OP_GEMM] = {"gemm", sizeof(RtGemmParams), 2, 4, 1, 1, check_gemm, rt_s_gemm, .f16_in = 2},
    [RT_OP_MATMUL] = {"matmul", sizeof(RtMatmulParams), 2, 2, 1, 1, check_matmul, rt_s_matmul},
    [RT_OP_ATTENTION] = {"attention", sizeof(RtAttnParams), 3, 6, 1, 1, check_attention, rt_s_attention},
    [RT_OP_NORM] = {"norm", sizeof(RtNormParams), 1, 3, 1, 1, check_norm, NULL},
    [RT_OP_SOFTMAX] = {"softmax", sizeof(RtAxisParams), 1, 1, 1, 1, check_softmax, NULL},
    [RT_OP_BINARY] = {"binary", sizeof(RtBinaryParams), 2, 2, 1, 1, check_binary, NULL},
    [RT_OP_UNARY] = {"unary", sizeof(RtUnaryParams), 1, 1, 1, 1, check_unary, NULL},
    [RT_OP_REDUCE] = {"reduce", sizeof(RtReduceParams), 1, 1, 1, 1, check_reduce, NULL},
    [RT_OP_COPY] = {"copy", sizeof(RtCopyParams), 1, 1, 1, 1, check_copy, NULL},
    [RT_OP_GATHER] = {"gather", sizeof(RtAxisParams), 2, 2, 1, 1, check_gather, NULL},
    [RT_OP_BAND_PART] = {"band_part", sizeof(RtBandParams), 1, 1, 1, 1, check_band, NULL},
    [RT_OP_SELECT] = {"select", 0, 3, 3, 1, 1, check_select, NULL},
    [RT_OP_CAST] = {"cast", sizeof(RtCastParams), 1, 1, 1, 1, check_cast, NULL},
    [RT_OP_ELTWISE] = {"eltwise", sizeof(RtEltParams), 1, 3, 1, 1, rt_check_eltwise, NULL},
    [RT_OP_BINOP] = {"binop", sizeof(RtBinaryParams), 2, 2, 1, 1, rt_check_binop, NULL},
    [RT_OP_REDUCEX] = {"reducex", sizeof(RtReduceParams), 1, 1, 1, 1, rt_check_reducex, NULL},
    [RT_OP_PAD_NHWC] = {"pad_nhwc", sizeof(RtConvParams), 1, 1, 1, 1, rt_check_pad_nhwc, NULL},
    [RT_OP_CONV_GEMM] = {"conv_gemm", sizeof(RtConvParams), 2, 3, 1, 1, rt_check_conv_gemm, NULL, 1},
    [RT_OP_CONV] = {"conv", sizeof(RtConvParams), 2, 3, 1, 1, rt_check_conv, NULL},
    [RT_OP_LUT_GEMM] = {"lut_gemm", sizeof(RtLutParams), 3, 4, 1, 1, rt_check_lut_gemm, rt_s_lut_gemm},
    [RT_OP_CUMSUM] = {"cumsum", sizeof(RtScanParams), 1, 1, 1, 1, rt_check_cumsum, NULL},
    [RT_OP_GATHER_AXIS] = {"gather_along_axis", sizeof(RtAxisParams), 2, 2, 1, 1, rt_check_gather_axis, NULL},
    [RT_OP_POOL] = {"pool", sizeof(RtConvParams), 1, 1, 1, 1, rt_check_pool, NULL},
    [RT_OP_SCATTER] = {"scatter", sizeof(RtScatterParams), 3, 3, 1, 1, rt_check_scatter, NULL},
    [RT_OP_SORT] = {"sort", sizeof(RtSortParams), 1, 1, 1, 2, rt_check_sort, rt_s_sort},
    [RT_OP_RANDOM] = {"random", sizeof(RtRandomParams), 0, 1, 1, 1, rt_check_random, rt_s_random},
    [RT_OP_LOOP_BEGIN] = {"loop_begin", 0, 0, 0, 0, 0, check_loop_op, NULL},
    [RT_OP_LOOP_TEST] = {"loop_test", 0, 1, 1, 0, 0, check_loop_op, NULL},
    [RT_OP_LOOP_END] = {"loop_end", 0, 0, 0, 0, 0, check_loop_op, NULL},
    [RT_OP_UPDATE] = {"update", sizeof(RtUpdateParams), 1, 3, 1, 1, rt_check_update, NULL},
    [RT_OP_GATHER_ND] = {"gather_nd", sizeof(RtAxisParams), 2, 2, 1, 1, rt_check_gather_nd, NULL},
    [RT_OP_SAMPLE] = {"sample", sizeof(RtSampleParams), 2, 2, 1, 1, rt_check_sample, NULL},
    [RT_OP_QGEMM] = {"qgemm", sizeof(RtQGemmParams), 4, 5, 1, 1, rt_check_qgemm, rt_s_qgemm},
    [RT_OP_SPGEMM] = {"spgemm", sizeof(RtSpGemmParams), 4, 5, 1, 1, rt_check_spgemm, NULL, .f16_in = 3},
    [RT_OP_PACK_TILES] = {"pack_tiles", 0, 1, 1, 1, 1, check_pack_tiles, NULL},
    [RT_OP_CROP_RESIZE] = {"crop_resize", sizeof(RtCropParams), 2, 3, 1, 1, rt_check_crop_resize, NULL},
    [RT_OP_NMS] = {"nms", sizeof(RtNmsParams), 2, 2, 3, 4, rt_check_nms, rt_s_nms},
    [RT_OP_NON_ZERO] = {"non_zero", 0, 1, 1, 1, 1, rt_check_non_zero, NULL},
};

const RtOpInfo *rt_op_info(uint32_t kind) {
    /* a kind without a row (a new enum value someone forgot) is unknown, not a NULL call */
    if (kind < 1 || kind >= RT_OP_COUNT_ || !op_table[kind].check) return NULL;
    return &op_table[kind];
}

static uint64_t g_op_digest;
static pthread_once_t g_op_digest_once = PTHREAD_ONCE_INIT;

static void op_digest_init(void) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a: a fingerprint, not a defence */
    for (uint32_t k = 0; k < RT_OP_COUNT_; k++) {
        const RtOpInfo *oi = &op_table[k];
        char row[96];
        int n = snprintf(row, sizeof row, "%u:%s:%u:%d:%d:%d:%d:%u;", k, oi->name ? oi->name : "", oi->plen, oi->min_in,
                         oi->max_in, oi->min_out, oi->max_out, oi->rev);
        for (int i = 0; i < n && i < (int)sizeof row; i++) h = (h ^ (uint8_t)row[i]) * 0x100000001b3ull;
    }
    g_op_digest = h;
}

/* Once per process: every key asks for it, and the table never changes. */
uint64_t rt_op_table_digest(void) {
    pthread_once(&g_op_digest_once, op_digest_init);
    return g_op_digest;
}

const char *rt_op_name(RtOpKind kind) {
    const RtOpInfo *oi = rt_op_info((uint32_t)kind);
    return oi ? oi->name : "?";
}

int rt_op_check(const RtBuf *bufs, uint32_t nbuf, const RtOpRec *op, bool loading, char *err, size_t errlen) {
    const RtOpInfo *oi = rt_op_info(op->kind);
    if (!oi) FAIL("op kind %u unknown", op->kind);
    if ((int)op->nin < oi->min_in || (int)op->nin > oi->max_in || (int)op->nout < oi->min_out ||
        (int)op->nout > oi->max_out)
        FAIL("%s: %u inputs / %u outputs", oi->name, op->nin, op->nout);
    if (op->plen != oi->plen) FAIL("%s: params are %u bytes, want %u", oi->name, op->plen, oi->plen);
    for (uint32_t i = 0; i < op->nin; i++) {
        if (op->in[i] < 0 || (uint32_t)op->in[i] >= nbuf)
            FAIL("%s: input %u: buffer %d out of range", oi->name, i, op->in[i]);
        const RtBuf *b = &bufs[op->in[i]];
        /* fp16 storage is read only by an op's f16_in (a GEMM's W, a sparse
         * GEMM's values), a conv GEMM's W, a converting copy and the K/V
         * operands of a flagged attention (the kernels convert on the fly). */
        bool is_w = (op->kind == RT_OP_GEMM || op->kind == RT_OP_CONV_GEMM) && i == 1;
        bool f16_ok = is_w || i + 1 == oi->f16_in || (op->kind == RT_OP_COPY && i == 0) ||
                      (op->kind == RT_OP_ATTENTION && op->p.attn.flags && i >= 1 &&
                       i <= ((op->p.attn.flags & RT_ATTN_SPLIT) ? 4u : 2u));
        if (b->dtype == RT_F16 && !f16_ok) FAIL("%s: input %u is fp16 storage", oi->name, i);
        if ((b->flags & RT_BUFF_PANELS) && !is_w) FAIL("%s: input %u is a packed weight", oi->name, i);
        if (b->flags & RT_BUFF_ROWS) FAIL("%s: input %u has its rows counted at run time (only an output reads it)", oi->name, i);
        if (loading && is_w && !(b->flags & RT_BUFF_PANELS)) FAIL("%s: W must be packed", oi->name);
    }
    for (uint32_t i = 0; i < op->nout; i++) {
        if (op->out[i] < 0 || (uint32_t)op->out[i] >= nbuf)
            FAIL("%s: output %u: buffer %d out of range", oi->name, i, op->out[i]);
        /* a state changes only by an UPDATE: its one in-place writer */
        uint32_t ok = bufs[op->out[i]].kind;
        if (ok != RT_BUF_TEMP && !(ok == RT_BUF_STATE && op->kind == RT_OP_UPDATE))
            FAIL("%s: output %u is not a temp", oi->name, i);
        if ((bufs[op->out[i]].flags & RT_BUFF_ROWS) && op->kind != RT_OP_NON_ZERO)
            FAIL("%s: output %u has its rows counted at run time (only non_zero writes one)", oi->name, i);
        for (uint32_t j = 0; j < op->nin; j++)
            if (op->in[j] == op->out[i]) FAIL("%s: buffer %d is both input and output", oi->name, op->out[i]);
    }
    return oi->check(bufs, op, err, errlen);
}
