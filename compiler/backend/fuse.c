/* fuse.c — pattern recognition for the bonded program: finds the op chains a
 * fused runtime kernel computes (GEMM + bias + activation + residual, RMSNorm
 * and LayerNorm written as op chains, decomposed attention) and records them
 * in a side table.  The IR is not changed, so it still prints as plain MIL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "milc/assert.h"

/* During fusion value->aux holds the one op using the value as an argument
 * (NULL if zero or several uses, or if the value is a function output). */
static IrOp *sole_user(const IrValue *v) { return v->uses == 1 ? (IrOp *)v->aux : NULL; }

static void find_users(IrFunction *f) {
    ir_function_count_uses(f);
    for (int i = 0; i < f->ninputs; i++) f->inputs[i]->aux = NULL;
    IR_FOR_EACH_OP(op, f) {
        op->aux = NULL;
        for (int r = 0; r < op->nresults; r++) op->results[r]->aux = NULL;
    }
    IR_FOR_EACH_OP(op, f) {
        for (int a = 0; a < op->nargs; a++) {
            IrArg *arg = &op->args[a];
            int n = arg->kind == IR_ARG_VALUE ? 1 : arg->kind == IR_ARG_TUPLE ? arg->nitems : 0;
            for (int k = 0; k < n; k++) {
                IrValue *v = arg->kind == IR_ARG_VALUE ? arg->value : arg->items[k];
                v->aux = op;
            }
        }
    }
    /* A function output's last "user" is the caller: never fuse it away. */
    for (int i = 0; i < f->noutputs; i++) f->outputs[i]->aux = NULL;
}

static IrValue *argv_(const IrOp *op, const char *name) {
    IrArg *a = ir_op_arg(op, name);
    return a && a->kind == IR_ARG_VALUE ? a->value : NULL;
}

/* A constant scalar (any rank, one element) in *out. */
static bool const_scalar(const IrValue *v, double *out) {
    const IrLiteral *l = v ? ir_value_const(v) : NULL;
    if (!l || l->kind != IR_LIT_DATA || l->count != 1 || !ir_dtype_is_float(l->type.dtype)) return false;
    *out = ir_lit_f64(l, 0);
    return true;
}
static bool is_const(const IrValue *v) { return v && ir_value_const(v); }

static bool dims_equal(const IrType *a, const IrType *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

/* The other operand of a binary op, given one. */
static IrValue *other_operand(const IrOp *op, const IrValue *v) {
    IrValue *x = argv_(op, "x"), *y = argv_(op, "y");
    return x == v ? y : y == v ? x : NULL;
}

typedef struct Builder {
    Arena *a;
    FuseTable *t;
    IrOp *members[64];
    int n;
} Builder;

static bool claim(Builder *b, IrOp *op) {
    if (op->aux || b->n == 64) return false;
    for (int i = 0; i < b->n; i++)
        if (b->members[i] == op) return true;
    b->members[b->n++] = op;
    return true;
}

static FuseGroup *commit(Builder *b, FuseGroup *g) {
    FuseGroup *G = ARENA_NEW(b->a, FuseGroup);
    *G = *g;
    G->members = ARENA_ARRAY(b->a, IrOp *, b->n);
    memcpy(G->members, b->members, sizeof(IrOp *) * (size_t)b->n);
    G->nmembers = b->n;
    G->root = b->members[0];
    for (int i = 0; i < b->n; i++) {
        b->members[i]->aux = G;
        /* the root is the member latest in program order */
        for (IrOp *o = G->root; o; o = o->next)
            if (o == b->members[i]) G->root = o;
    }
    G->result = G->root->results[0];
    FuseTable *t = b->t;
    if (t->ngroups == t->cap) {
        int cap = t->cap ? t->cap * 2 : 32;
        FuseGroup **ng = ARENA_ARRAY(b->a, FuseGroup *, cap);
        if (t->ngroups) memcpy(ng, t->groups, sizeof(FuseGroup *) * (size_t)t->ngroups);
        t->groups = ng, t->cap = cap;
    }
    t->groups[t->ngroups++] = G;
    if (G->kind == FUSE_GEMM)
        t->ngemm++;
    else if (G->kind == FUSE_NORM)
        t->nnorm++;
    else
        t->nattn++;
    return G;
}

/* ---- GEMM: conv 1x1 / linear with constant weight, then bias, activation, residual ---- */

bool backend_conv_is_1x1(const IrOp *op) {
    IrValue *w = argv_(op, "weight");
    const IrLiteral *wl = w ? ir_value_const(w) : NULL;
    if (!wl || w->type.rank < 3) return false;
    for (int i = 2; i < w->type.rank; i++)
        if (w->type.dims[i] != 1) return false;
    int64_t v[8];
    const IrLiteral *l;
    if ((l = ir_op_arg_const(op, "groups")) && ir_lit_i64(l, 0) != 1) return false;
    if ((l = ir_op_arg_const(op, "strides"))) {
        long n = ir_lit_to_i64(l, v, 8);
        for (long i = 0; i < n; i++)
            if (v[i] != 1) return false;
    }
    if ((l = ir_op_arg_const(op, "pad"))) {
        long n = ir_lit_to_i64(l, v, 8);
        for (long i = 0; i < n; i++)
            if (v[i] != 0) return false;
    }
    return true;
}

/* Does bias (a const) add one value per output feature along axis ax of y? */
static bool bias_along(const IrValue *bias, const IrType *y, int ax) {
    const IrType *t = &bias->type;
    if (t->rank > y->rank || ir_type_numel(t) != y->dims[ax]) return false;
    int off = y->rank - t->rank;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != 1 && i + off != ax) return false;
    return true;
}

static void fuse_gemm(Builder *b, IrOp *op) {
    if (op->kind != OP_CONV && op->kind != OP_LINEAR) return;
    IrValue *x = argv_(op, "x"), *w = argv_(op, "weight"), *bias = argv_(op, "bias");
    if (!x || !w || is_const(x) || !is_const(w) || (bias && !is_const(bias))) return;
    FuseGroup g = {.kind = FUSE_GEMM, .x = x, .w = w, .bias = bias, .act = RT_ACT_NONE};
    if (op->kind == OP_CONV) {
        if (!backend_conv_is_1x1(op) || x->type.rank < 3) return;
        g.layout = RT_GEMM_CHANNELS;
    } else {
        if (w->type.rank != 2 || x->type.rank < 1) return;
        g.layout = RT_GEMM_ROWS;
    }
    b->n = 0;
    if (!claim(b, op)) return;
    IrValue *cur = op->results[0];
    int ax = g.layout == RT_GEMM_CHANNELS ? 1 : cur->type.rank - 1;
    IrOp *u = sole_user(cur);
    /* linear on [M, K] then transpose and reshape to [1, N, 1.., M]: the
     * projection of the ANE layout written with linear.  The epilogue (bias,
     * activation, residual) applies after the views, per channel. */
    if (op->kind == OP_LINEAR && cur->type.rank == 2 && u && u->kind == OP_TRANSPOSE) {
        const IrLiteral *pm = ir_op_arg_const(u, "perm");
        IrOp *r = sole_user(u->results[0]);
        const IrType *rt = r ? &r->results[0]->type : NULL;
        bool ok = pm && pm->count == 2 && ir_lit_i64(pm, 0) == 1 && r && r->kind == OP_RESHAPE && rt->rank >= 3 &&
                  rt->dims[0] == 1 && rt->dims[1] == cur->type.dims[1] && rt->dims[rt->rank - 1] == cur->type.dims[0];
        for (int i = 2; ok && i + 1 < rt->rank; i++) ok = rt->dims[i] == 1;
        if (ok && claim(b, u) && claim(b, r)) {
            g.post_views = true;
            cur = r->results[0];
            ax = 1;
            u = sole_user(cur);
        }
    }
    if (!g.bias && u && u->kind == OP_ADD) {
        IrValue *o = other_operand(u, cur);
        if (o && o != cur && is_const(o) && bias_along(o, &cur->type, ax) &&
            dims_equal(&u->results[0]->type, &cur->type) && claim(b, u)) {
            g.bias = o;
            cur = u->results[0];
            u = sole_user(cur);
        }
    }
    if (u && (u->kind == OP_GELU || u->kind == OP_SILU)) {
        int act = RT_ACT_SILU;
        if (u->kind == OP_GELU) {
            const IrLiteral *m = ir_op_arg_const(u, "mode");
            const char *s = m ? ir_lit_str(m, 0) : "EXACT";
            act = !s                                    ? -1
                  : !strcmp(s, "EXACT")                 ? RT_ACT_GELU_EXACT
                  : !strcmp(s, "TANH_APPROXIMATION")    ? RT_ACT_GELU_TANH
                  : !strcmp(s, "SIGMOID_APPROXIMATION") ? RT_ACT_GELU_SIGMOID
                                                        : -1;
        }
        if (act >= 0 && claim(b, u)) {
            g.act = act;
            cur = u->results[0];
            u = sole_user(cur);
        }
    }
    if (u && u->kind == OP_ADD) {
        IrValue *o = other_operand(u, cur);
        if (o && o != cur && !is_const(o) && dims_equal(&o->type, &cur->type) &&
            dims_equal(&u->results[0]->type, &cur->type) && claim(b, u))
            g.residual = o;
    }
    commit(b, &g);
}

/* ---- NORM: RMSNorm and LayerNorm written as op chains ---- */

/* reduce_mean over contiguous axes with keep_dims: the axis range. */
static bool mean_axes(const IrOp *op, const IrValue *x, int *ab, int *ae) {
    if (op->kind != OP_REDUCE_MEAN || argv_(op, "x") != x) return false;
    int64_t kd = 0;
    if (!ir_op_arg_i64(op, "keep_dims", &kd) || !kd) return false;
    const IrLiteral *l = ir_op_arg_const(op, "axes");
    int64_t ax[8];
    long n = l ? ir_lit_to_i64(l, ax, 8) : -1;
    int r = x->type.rank;
    if (n < 1) return false;
    for (long i = 0; i < n; i++) {
        if (ax[i] < 0) ax[i] += r;
        if (ax[i] < 0 || ax[i] >= r || (i && ax[i] != ax[i - 1] + 1)) return false;
    }
    *ab = (int)ax[0], *ae = (int)ax[n - 1] + 1;
    return true;
}

/* From the variance value v: [add eps] -> rsqrt(eps).  Returns the rsqrt's
 * result and adds its epsilon(s) to *eps. */
static IrValue *eps_rsqrt(Builder *b, IrValue *v, double *eps) {
    IrOp *u = sole_user(v);
    double c;
    if (u && u->kind == OP_ADD && const_scalar(other_operand(u, v), &c) && claim(b, u)) {
        *eps += c;
        v = u->results[0];
        u = sole_user(v);
    }
    double e = 0;
    if (!u || u->kind != OP_RSQRT || !ir_op_arg_f64(u, "epsilon", &e) || !claim(b, u)) return NULL;
    *eps += e;
    return u->results[0];
}

/* n -> [mul gamma] -> [add beta]. */
static IrValue *affine(Builder *b, IrValue *n, FuseGroup *g) {
    int64_t C = 1;
    for (int i = g->axis_begin; i < g->axis_end; i++) C *= n->type.dims[i];
    IrOp *u = sole_user(n);
    IrValue *o;
    if (u && u->kind == OP_MUL && (o = other_operand(u, n)) && is_const(o) && ir_value_numel(o) == C &&
        bias_along(o, &n->type, g->axis_begin) && dims_equal(&u->results[0]->type, &n->type) && claim(b, u)) {
        g->gamma = o;
        n = u->results[0];
        u = sole_user(n);
    }
    if (g->norm_kind == RT_NORM_LAYER && u && u->kind == OP_ADD && (o = other_operand(u, n)) && is_const(o) &&
        ir_value_numel(o) == C && bias_along(o, &n->type, g->axis_begin) &&
        dims_equal(&u->results[0]->type, &n->type) && claim(b, u)) {
        if (!g->gamma) return n; /* beta without gamma: the kernel needs gamma first */
        g->beta = o;
        n = u->results[0];
    }
    return n;
}

/* The op u is mul(a, r) or mul(r, a). */
static bool is_mul_of(const IrOp *u, const IrValue *a, const IrValue *r) {
    if (!u || u->kind != OP_MUL) return false;
    IrValue *x = argv_(u, "x"), *y = argv_(u, "y");
    return (x == a && y == r) || (x == r && y == a);
}

static void fuse_rms(Builder *b, IrOp *op) {
    /* sq = mul(x, x); ms = reduce_mean(sq); r = rsqrt(ms + eps); n = mul(x, r) [* gamma] */
    if (op->kind != OP_MUL) return;
    IrValue *x = argv_(op, "x");
    if (!x || argv_(op, "y") != x || is_const(x)) return;
    FuseGroup g = {.kind = FUSE_NORM, .norm_kind = RT_NORM_RMS, .x = x};
    b->n = 0;
    IrValue *sq = op->results[0];
    IrOp *m = sole_user(sq);
    if (!claim(b, op) || !m || !mean_axes(m, sq, &g.axis_begin, &g.axis_end) || !claim(b, m)) return;
    IrValue *r = eps_rsqrt(b, m->results[0], &g.eps);
    if (!r) return;
    IrOp *u = sole_user(r);
    if (!is_mul_of(u, x, r) || !dims_equal(&u->results[0]->type, &x->type) || !claim(b, u)) return;
    affine(b, u->results[0], &g);
    commit(b, &g);
}

static void fuse_layernorm_chain(Builder *b, IrOp *op) {
    /* mu = reduce_mean(x); xc = sub(x, mu); var = reduce_mean(mul(xc, xc));
     * r = rsqrt(var + eps); n = mul(xc, r) [* gamma] [+ beta] */
    if (op->kind != OP_REDUCE_MEAN) return;
    IrValue *x = argv_(op, "x");
    FuseGroup g = {.kind = FUSE_NORM, .norm_kind = RT_NORM_LAYER, .x = x};
    if (!x || is_const(x) || !mean_axes(op, x, &g.axis_begin, &g.axis_end)) return;
    b->n = 0;
    IrValue *mu = op->results[0];
    IrOp *s = sole_user(mu);
    if (!claim(b, op) || !s || s->kind != OP_SUB || argv_(s, "x") != x || argv_(s, "y") != mu || !claim(b, s)) return;
    IrValue *xc = s->results[0];
    if (xc->uses != 3) return; /* mul(xc, xc) and mul(xc, r) */
    IrOp *sqop = NULL, *nop = NULL;
    for (IrOp *o = s->next; o; o = o->next) {
        if (o->kind == OP_MUL && argv_(o, "x") == xc && argv_(o, "y") == xc)
            sqop = o;
        else if (o->kind == OP_MUL && (argv_(o, "x") == xc || argv_(o, "y") == xc))
            nop = o;
    }
    if (!sqop || !nop || !claim(b, sqop)) return;
    int ab, ae;
    IrOp *m2 = sole_user(sqop->results[0]);
    if (!m2 || !mean_axes(m2, sqop->results[0], &ab, &ae) || ab != g.axis_begin || ae != g.axis_end || !claim(b, m2))
        return;
    IrValue *r = eps_rsqrt(b, m2->results[0], &g.eps);
    if (!r || sole_user(r) != nop || !is_mul_of(nop, xc, r) || !claim(b, nop)) return;
    affine(b, nop->results[0], &g);
    commit(b, &g);
}

/* ---- ATTENTION: matmul(q, k) [scale] [+ mask] softmax matmul(., v) ---- */

static bool reshape_keeps_last(const IrOp *op) {
    IrValue *x = argv_(op, "x");
    const IrType *a = &x->type, *r = &op->results[0]->type;
    return a->rank >= 1 && r->rank >= 1 && a->dims[a->rank - 1] == r->dims[r->rank - 1];
}

static bool bcasts_to(const IrType *m, const int64_t *frame) {
    if (m->rank > 4) return false;
    for (int i = 0; i < m->rank; i++) {
        int64_t d = m->dims[m->rank - 1 - i], f = frame[3 - i];
        if (d != 1 && d != f) return false;
    }
    return true;
}

enum { ATTN_MIN_ROWS = 32 }; /* query rows per KV head below which a transposed K is read in place */

/* v (K or V of an attention, [B, Hk, E, S]) as reshapes that keep the last
 * dim of a concat of two parts along that last dim: claims them and returns
 * the parts.  The kernel then reads cache and new positions where they lie. */
static bool concat_parts(Builder *b, IrValue *v, IrValue **parts) {
    IrValue *cur = v;
    while (cur->def && cur->def->kind == OP_RESHAPE) {
        if (cur->uses != 1 || !reshape_keeps_last(cur->def) || !claim(b, cur->def)) return false;
        cur = argv_(cur->def, "x");
    }
    IrOp *c = cur->def;
    int64_t ax = 0, il = 0;
    if (!c || c->kind != OP_CONCAT || cur->uses != 1 || !ir_op_arg_i64(c, "axis", &ax)) return false;
    if (ir_op_arg_i64(c, "interleave", &il) && il) return false;
    int r = cur->type.rank;
    IrArg *vals = ir_op_arg(c, "values");
    if ((ax != -1 && ax != r - 1) || !vals || vals->kind != IR_ARG_TUPLE || vals->nitems != 2) return false;
    for (int i = 0; i < 2; i++)
        if (vals->items[i]->type.rank != r) return false;
    if (!claim(b, c)) return false;
    parts[0] = vals->items[0], parts[1] = vals->items[1];
    return true;
}

static void fuse_attention(Builder *b, IrOp *sm) {
    if (sm->kind != OP_SOFTMAX) return;
    IrValue *in = argv_(sm, "x");
    int64_t axis = -1;
    if (!in || in->type.rank != 4 || !ir_op_arg_i64(sm, "axis", &axis) || (axis != -1 && axis != 3)) return;
    FuseGroup g = {.kind = FUSE_ATTN, .scale = 1};
    memcpy(g.frame, in->type.dims, sizeof g.frame);
    b->n = 0;
    if (!claim(b, sm)) return;
    /* backwards from the softmax input to the scores matmul */
    IrValue *cur = in;
    IrOp *qk = NULL;
    while (!qk) {
        IrOp *d = cur->def;
        if (!d || sole_user(cur) == NULL || !claim(b, d)) return;
        double c;
        switch (d->kind) {
        case OP_RESHAPE:
            if (!reshape_keeps_last(d)) return;
            cur = argv_(d, "x");
            break;
        case OP_ADD: {
            IrValue *x = argv_(d, "x"), *y = argv_(d, "y");
            bool xchain = x->def && x->uses == 1 && !is_const(x) && dims_equal(&x->type, &d->results[0]->type);
            IrValue *chain = xchain ? x : y, *mask = xchain ? y : x;
            if (g.mask || !ir_dtype_is_float(mask->type.dtype) || !dims_equal(&d->results[0]->type, &in->type) ||
                !dims_equal(&chain->type, &in->type) || !bcasts_to(&mask->type, g.frame))
                return;
            g.mask = mask;
            cur = chain;
            break;
        }
        case OP_BAND_PART: {
            int64_t lo = 0, up = 0;
            if (!ir_op_arg_i64(d, "lower", &lo) || !ir_op_arg_i64(d, "upper", &up) || lo != -1 || up != 0 ||
                !dims_equal(&d->results[0]->type, &in->type))
                return;
            g.causal = true;
            cur = argv_(d, "x");
            break;
        }
        case OP_MUL:
            if (const_scalar(argv_(d, "y"), &c))
                cur = argv_(d, "x");
            else if (const_scalar(argv_(d, "x"), &c))
                cur = argv_(d, "y");
            else
                return;
            g.scale *= c;
            break;
        case OP_REAL_DIV:
            if (!const_scalar(argv_(d, "y"), &c) || c == 0) return;
            g.scale /= c;
            cur = argv_(d, "x");
            break;
        case OP_MATMUL: qk = d; break;
        default: return;
        }
    }
    int64_t tx = 0, ty = 0;
    if (!ir_op_arg_i64(qk, "transpose_x", &tx) || !ir_op_arg_i64(qk, "transpose_y", &ty) || tx) return;
    IrValue *q = argv_(qk, "x"), *k = argv_(qk, "y");
    g.k_t = !ty;
    /* a scalar scale applied to q first */
    double c;
    if (q->def && q->uses == 1 && (q->def->kind == OP_MUL || q->def->kind == OP_REAL_DIV)) {
        IrOp *d = q->def;
        if (const_scalar(argv_(d, "y"), &c) && (d->kind == OP_MUL || c != 0) && claim(b, d)) {
            g.scale = d->kind == OP_MUL ? g.scale * c : g.scale / c;
            q = argv_(d, "x");
        } else if (d->kind == OP_MUL && const_scalar(argv_(d, "x"), &c) && claim(b, d)) {
            g.scale *= c;
            q = argv_(d, "y");
        }
    }
    /* forwards from the softmax result to the PV matmul */
    IrValue *p = sm->results[0];
    IrOp *pv = NULL;
    while (!pv) {
        IrOp *u = sole_user(p);
        if (!u || !claim(b, u)) return;
        if (u->kind == OP_RESHAPE && reshape_keeps_last(u))
            p = u->results[0];
        else if (u->kind == OP_MATMUL && argv_(u, "x") == p)
            pv = u;
        else
            return;
    }
    int64_t ptx = 0, pty = 0;
    if (!ir_op_arg_i64(pv, "transpose_x", &ptx) || !ir_op_arg_i64(pv, "transpose_y", &pty) || ptx) return;
    IrValue *v = argv_(pv, "y");
    g.v_t = pty != 0;
    /* shapes: scores [B, Hs, M, S] = the frame [B, H, L, S] regrouped */
    const IrType *st = &qk->results[0]->type, *qt = &q->type, *kt = &k->type, *vt = &v->type;
    const int64_t *f = g.frame;
    if (st->rank != 4 || qt->rank != 4 || kt->rank != 4 || vt->rank != 4) return;
    int64_t B = st->dims[0], Hs = st->dims[1], M = st->dims[2], S = st->dims[3];
    if (B != f[0] || S != f[3] || Hs * M != f[1] * f[2] || M % f[2] || f[1] % Hs) return;
    if (qt->dims[0] != B || qt->dims[1] != Hs || qt->dims[2] != M) return;
    int64_t Hk = kt->dims[1];
    if (kt->dims[0] != B || (Hk != Hs && Hk != 1)) return;
    if (kt->dims[g.k_t ? 3 : 2] != S || kt->dims[g.k_t ? 2 : 3] != qt->dims[3]) return;
    if (vt->dims[0] != B || vt->dims[1] != Hk || vt->dims[g.v_t ? 3 : 2] != S) return;
    if (!dims_equal(&argv_(pv, "x")->type, st)) return;
    /* The kernel reads K as [S, E] rows.  K given as [E, S] (the [1, C, 1, S]
     * layout) costs a transposing copy of the whole cache; with few queries
     * (decode) matmul + softmax + matmul reading K and V in place is cheaper. */
    if ((g.k_t || g.v_t) && f[2] * (f[1] / Hk) < ATTN_MIN_ROWS) {
        g.in_place = true;
        int n0 = b->n;
        if (g.k_t && g.v_t && concat_parts(b, k, g.k_parts) && concat_parts(b, v, g.v_parts) &&
            g.k_parts[0]->type.dims[g.k_parts[0]->type.rank - 1] ==
                g.v_parts[0]->type.dims[g.v_parts[0]->type.rank - 1])
            g.split = true;
        else
            b->n = n0; /* not both concats: K and V stay whole */
    }
    g.q = q, g.k = k, g.v = v;
    commit(b, &g);
}

void backend_fuse(IrFunction *f, Arena *a, FuseTable *t) {
    memset(t, 0, sizeof *t);
    find_users(f);
    Builder b = {.a = a, .t = t};
    /* Attention first: its chains hold adds and muls the others could take. */
    IR_FOR_EACH_OP(op, f) if (!op->aux) fuse_attention(&b, op);
    /* LayerNorm before RMSNorm: a LayerNorm's tail is an RMSNorm of x - mean. */
    IR_FOR_EACH_OP(op, f) if (!op->aux) fuse_layernorm_chain(&b, op);
    IR_FOR_EACH_OP(op, f) if (!op->aux) fuse_rms(&b, op);
    IR_FOR_EACH_OP(op, f) if (!op->aux) fuse_gemm(&b, op);
    /* value->aux was scratch; the lowering sets its own. */
    for (int i = 0; i < f->ninputs; i++) f->inputs[i]->aux = NULL;
    IR_FOR_EACH_OP(op, f) for (int r = 0; r < op->nresults; r++) op->results[r]->aux = NULL;
}

char *backend_fuse_describe(const FuseTable *t) {
    size_t cap = 256 + (size_t)t->ngroups * 160, n = 0;
    char *s = malloc(cap);
    MILC_ASSERT(s);
    n += (size_t)snprintf(s + n, cap - n, "// fused: %d gemm, %d norm, %d attention\n", t->ngemm, t->nnorm, t->nattn);
    for (int i = 0; i < t->ngroups && n < cap; i++) {
        const FuseGroup *g = t->groups[i];
        const char *k = g->kind == FUSE_GEMM ? "gemm" : g->kind == FUSE_NORM ? "norm" : "attention";
        n += (size_t)snprintf(s + n, cap - n, "// %s %s <- %d ops from %s%s%s%s\n", k, g->result->name, g->nmembers,
                              g->members[0]->name, g->kind == FUSE_GEMM && g->bias ? " +bias" : "",
                              g->kind == FUSE_GEMM && g->act ? " +act" : "",
                              g->kind == FUSE_GEMM && g->residual ? " +residual" : "");
    }
    return s;
}
