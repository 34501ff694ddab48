/* check.c — the type checker and IR verifier: every op against its op-table
 * signature (ops.h), then its shape rule, whose inferred result types must
 * equal the declared ones; BLOBFILE weights against their files; and with
 * target ANE the ANE path limits of docs/MIL.md.
 *
 * ANE policy: what the ANE path is known to reject, or to compute wrongly, is
 * an error (I/O not [1, C, 1, S] fp16 with S a multiple of 16 and >= 16,
 * dynamic dims, rank > 5, a dim > 65536, conv with bias, gelu without mode,
 * concat without interleave, sdpa with attn_mask (ignored: wrong results),
 * runtime matmul with an inner dim not a multiple of 32, unequal input or
 * output allocation sizes, > 2 GB of weights).  What is only a risk is a
 * warning: > 1 GB of weights (chunks under 1 GB are the safe choice) and I/O
 * declared out of alphabetical order (they bind in alphabetical order).
 */
#include "milc/mil.h"
#include "milc/assert.h"
#include "milc/blob.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { DIM_UNKNOWN = -2, MAX_RANK = 64, MAX_RESULTS = 64 }; /* DIM_UNKNOWN: the rule cannot tell */

typedef struct BlobEntry {
    char *path;
    MilBlobFile file;
    bool ok;
    char *error;
} BlobEntry;

typedef struct Checker {
    DiagSink *d;
    IrProgram *p;
    MilTarget target;
    const MilBlobFile *weights; /* MilCheckOptions.weights */
    char *model_dir;            /* malloc'd */
    BlobEntry *blobs;
    int nblobs;
    uint64_t weight_bytes;
} Checker;

/* One op being checked: its decoded signature and arguments by spec index. */
typedef struct OpCtx {
    Checker *c;
    IrOp *op;
    const char *opname;
    MilArgSpec specs[MIL_MAX_OP_ARGS];
    int nspecs;
    IrArg *args[MIL_MAX_OP_ARGS];
    IrType out[MAX_RESULTS];
    int64_t out_dims[MAX_RESULTS][MAX_RANK];
    int nout;
    bool ok; /* false once the rule reported an error: no result comparison */
} OpCtx;

static void op_error(OpCtx *x, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void op_error(OpCtx *x, SrcLoc loc, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(x->c->d, loc, "%s: %s", x->opname, msg);
    x->ok = false;
}
#define ERR(...) op_error(x, x->op->loc, __VA_ARGS__)

static char *fmt_dims(const int64_t *dims, int rank, char *buf, size_t size) {
    return ir_dims_format(dims, rank, buf, size);
}
static char *fmt_type(const IrType *t, char *buf, size_t size) { return ir_type_format(t, buf, size); }

/* ---- argument access ---- */

static int spec_index(const OpCtx *x, const char *name) {
    for (int i = 0; i < x->nspecs; i++)
        if (strcmp(x->specs[i].name, name) == 0) return i;
    MILC_ASSERT(!"shape rule asks for an argument its signature lacks");
    return -1;
}

static IrArg *arg_of(const OpCtx *x, const char *name) { return x->args[spec_index(x, name)]; }

/* The type of a non-tuple argument, NULL if absent. */
static const IrType *type_of(const OpCtx *x, const char *name) {
    IrArg *a = arg_of(x, name);
    if (!a) return NULL;
    if (a->kind == IR_ARG_VALUE) return &a->value->type;
    if (a->kind == IR_ARG_LITERAL) return &a->lit->type;
    return NULL;
}

static const IrLiteral *const_of(const OpCtx *x, const char *name) {
    IrArg *a = arg_of(x, name);
    if (!a) return NULL;
    const IrLiteral *l = a->kind == IR_ARG_LITERAL ? a->lit : a->kind == IR_ARG_VALUE ? ir_value_const(a->value) : NULL;
    return l && l->kind == IR_LIT_DATA ? l : NULL;
}

/* Constant integers of an argument into v[MAX_RANK]; returns the count, or -1
 * if absent or not constant. */
static int ints_of(const OpCtx *x, const char *name, int64_t *v) {
    const IrLiteral *l = const_of(x, name);
    if (!l || l->count > MAX_RANK) return -1;
    return (int)ir_lit_to_i64(l, v, MAX_RANK);
}

static bool int_of(const OpCtx *x, const char *name, int64_t dflt, int64_t *out) {
    int64_t v[MAX_RANK];
    if (!arg_of(x, name)) {
        *out = dflt;
        return true;
    }
    if (ints_of(x, name, v) != 1) return false;
    *out = v[0];
    return true;
}

static bool bool_of(const OpCtx *x, const char *name) {
    int64_t v = 0;
    return int_of(x, name, 0, &v) && v != 0;
}

/* A result type with dims storage inside x. */
static IrType *set_out(OpCtx *x, int i, IrDType dt, int rank, const int64_t *dims) {
    MILC_ASSERT(i < MAX_RESULTS && rank <= MAX_RANK);
    if (i >= x->nout) x->nout = i + 1;
    x->out[i] = (IrType){dt, rank, x->out_dims[i], false, false, 0};
    if (dims && rank) memcpy(x->out_dims[i], dims, sizeof(int64_t) * (size_t)rank);
    return &x->out[i];
}

/* Result i of type t whole: a list or a state stays one (cond's and
 * while_loop's results are their blocks' values). */
static void set_out_as(OpCtx *x, int i, const IrType *t) {
    IrType *o = set_out(x, i, t->dtype, t->rank, t->dims);
    o->state = t->state, o->list = t->list, o->list_len = t->list_len;
}

static bool dim_known(int64_t d) { return d >= 0; }

/* Shape arithmetic saturates: absurd parameters give an absurd (and then
 * mismatching) shape, never signed overflow. */
static int64_t sat_mul(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
}

/* Normalise axis against rank (negative counts from the end); false if out of range. */
static bool norm_axis(OpCtx *x, const char *what, int64_t axis, int rank, int64_t *out) {
    int64_t a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
        ERR("%s %lld is out of range for rank %d", what, (long long)axis, rank);
        return false;
    }
    *out = a;
    return true;
}

/* Broadcast two shapes NumPy style into out (rank max). */
static bool broadcast(const int64_t *a, int ra, const int64_t *b, int rb, int64_t *out, int *rank) {
    int r = ra > rb ? ra : rb;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
        int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
        if (da == db)
            out[i] = da;
        else if (da == 1)
            out[i] = db;
        else if (db == 1)
            out[i] = da;
        else if (!dim_known(da))
            out[i] = db;
        else if (!dim_known(db))
            out[i] = da;
        else
            return false;
    }
    *rank = r;
    return true;
}

static bool rank_at_most(OpCtx *x, const char *arg, const IrType *t) {
    if (t->rank <= MAX_RANK) return true;
    ERR("'%s' has rank %d; milc supports at most %d", arg, t->rank, MAX_RANK);
    return false;
}

/* ---- shape rules: infer_<rule>(x) fills x->out ---- */

static void check_blobfile(Checker *c, const IrLiteral *l);

static void infer_const(OpCtx *x) {
    IrAttr *val = ir_op_attr(x->op, "val");
    if (!val || !val->lit) {
        ERR("missing attribute 'val'");
        return;
    }
    const IrLiteral *l = val->lit;
    if (l->kind == IR_LIT_DICT) {
        ERR("'val' cannot be a dict");
        return;
    }
    if (l->kind == IR_LIT_BLOBFILE) check_blobfile(x->c, l);
    set_out(x, 0, l->type.dtype, l->type.rank, l->type.dims);
}

static void infer_same(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    if (rank_at_most(x, "x", t)) set_out(x, 0, t->dtype, t->rank, t->dims);
}

static void infer_broadcast(OpCtx *x) {
    const IrType *a = type_of(x, "x"), *b = type_of(x, "y");
    int64_t d[MAX_RANK];
    int r;
    if (!rank_at_most(x, "x", a) || !rank_at_most(x, "y", b)) return;
    if (!broadcast(a->dims, a->rank, b->dims, b->rank, d, &r)) {
        char s1[256], s2[256];
        ERR("shapes %s and %s do not broadcast", fmt_dims(a->dims, a->rank, s1, sizeof s1),
            fmt_dims(b->dims, b->rank, s2, sizeof s2));
        return;
    }
    set_out(x, 0, a->dtype, r, d);
}

static void infer_select(OpCtx *x) {
    const IrType *c = type_of(x, "cond"), *a = type_of(x, "a"), *b = type_of(x, "b");
    int64_t d1[MAX_RANK], d2[MAX_RANK];
    int r1, r2;
    if (!rank_at_most(x, "cond", c) || !rank_at_most(x, "a", a) || !rank_at_most(x, "b", b)) return;
    if (!broadcast(c->dims, c->rank, a->dims, a->rank, d1, &r1) || !broadcast(d1, r1, b->dims, b->rank, d2, &r2)) {
        char s1[256], s2[256], s3[256];
        ERR("shapes %s, %s and %s do not broadcast", fmt_dims(c->dims, c->rank, s1, sizeof s1),
            fmt_dims(a->dims, a->rank, s2, sizeof s2), fmt_dims(b->dims, b->rank, s3, sizeof s3));
        return;
    }
    set_out(x, 0, a->dtype, r2, d2);
}

static bool dims_match(int64_t a, int64_t b) { return a == b || !dim_known(a) || !dim_known(b); }

static void infer_linear(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *w = type_of(x, "weight"), *b = type_of(x, "bias");
    char s1[256], s2[256];
    if (!rank_at_most(x, "x", t)) return;
    if (t->rank < 1) {
        ERR("'x' must have rank >= 1, not 0");
        return;
    }
    if (w->rank != 2) {
        ERR("'weight' must have rank 2 [Dout, Din], not %d", w->rank);
        return;
    }
    if (!dims_match(t->dims[t->rank - 1], w->dims[1])) {
        ERR("'x' %s and 'weight' %s: Din differs (%lld vs %lld)", fmt_dims(t->dims, t->rank, s1, sizeof s1),
            fmt_dims(w->dims, w->rank, s2, sizeof s2), (long long)t->dims[t->rank - 1], (long long)w->dims[1]);
        return;
    }
    if (b && (b->rank != 1 || !dims_match(b->dims[0], w->dims[0]))) {
        ERR("'bias' %s must be [%lld] to match 'weight' %s", fmt_dims(b->dims, b->rank, s1, sizeof s1),
            (long long)w->dims[0], fmt_dims(w->dims, w->rank, s2, sizeof s2));
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    o->dims[t->rank - 1] = w->dims[0];
}

static void infer_matmul(OpCtx *x) {
    const IrType *a = type_of(x, "x"), *b = type_of(x, "y");
    char s1[256], s2[256];
    if (!rank_at_most(x, "x", a) || !rank_at_most(x, "y", b)) return;
    if (a->rank < 1 || b->rank < 1) {
        ERR("'x' and 'y' must have rank >= 1");
        return;
    }
    /* NumPy: a vector x is [1, K] and a vector y is [K, 1], the padded dim dropped after. */
    int64_t da[MAX_RANK + 1], db[MAX_RANK + 1];
    int ra = a->rank, rb = b->rank;
    memcpy(da, a->dims, sizeof(int64_t) * (size_t)ra);
    memcpy(db, b->dims, sizeof(int64_t) * (size_t)rb);
    bool tx = bool_of(x, "transpose_x"), ty = bool_of(x, "transpose_y");
    if (ra >= 2 && tx) {
        int64_t t = da[ra - 1];
        da[ra - 1] = da[ra - 2];
        da[ra - 2] = t;
    }
    if (rb >= 2 && ty) {
        int64_t t = db[rb - 1];
        db[rb - 1] = db[rb - 2];
        db[rb - 2] = t;
    }
    bool xvec = ra == 1, yvec = rb == 1;
    if (xvec) {
        da[1] = da[0];
        da[0] = 1;
        ra = 2;
    }
    if (yvec) {
        db[1] = 1;
        rb = 2;
    }
    if (!dims_match(da[ra - 1], db[rb - 2])) {
        ERR("inner dimensions differ: 'x' %s%s and 'y' %s%s (%lld vs %lld)", fmt_dims(a->dims, a->rank, s1, sizeof s1),
            tx ? " transposed" : "", fmt_dims(b->dims, b->rank, s2, sizeof s2), ty ? " transposed" : "",
            (long long)da[ra - 1], (long long)db[rb - 2]);
        return;
    }
    int64_t batch[MAX_RANK];
    int rbatch;
    if (!broadcast(da, ra - 2, db, rb - 2, batch, &rbatch)) {
        ERR("batch dimensions of 'x' %s and 'y' %s do not broadcast", fmt_dims(a->dims, a->rank, s1, sizeof s1),
            fmt_dims(b->dims, b->rank, s2, sizeof s2));
        return;
    }
    int64_t d[MAX_RANK + 2];
    int r = rbatch;
    memcpy(d, batch, sizeof(int64_t) * (size_t)rbatch);
    if (!xvec) d[r++] = da[ra - 2];
    if (!yvec) d[r++] = db[rb - 1];
    if (r > MAX_RANK) {
        ERR("result rank too large");
        return;
    }
    set_out(x, 0, a->dtype, r, d);
}

static void infer_conv(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *w = type_of(x, "weight"), *b = type_of(x, "bias");
    char s1[256], s2[256];
    if (!rank_at_most(x, "x", t)) return;
    if (t->rank < 3) {
        ERR("'x' must be [N, Cin, *spatial] (rank >= 3), not rank %d", t->rank);
        return;
    }
    if (w->rank != t->rank) {
        ERR("'weight' %s must have the rank of 'x' %s", fmt_dims(w->dims, w->rank, s1, sizeof s1),
            fmt_dims(t->dims, t->rank, s2, sizeof s2));
        return;
    }
    int ns = t->rank - 2;
    int64_t groups = 1;
    if (!int_of(x, "groups", 1, &groups) || groups < 1) {
        ERR("'groups' must be a positive integer");
        return;
    }
    int64_t cin = t->dims[1], cout = w->dims[0];
    if (dim_known(cin) && dim_known(w->dims[1]) && cin != w->dims[1] * groups) {
        ERR("'x' has %lld input channels but 'weight' %s with groups = %lld expects %lld", (long long)cin,
            fmt_dims(w->dims, w->rank, s1, sizeof s1), (long long)groups, (long long)(w->dims[1] * groups));
        return;
    }
    if (dim_known(cout) && cout % groups != 0) {
        ERR("%lld output channels are not divisible by groups = %lld", (long long)cout, (long long)groups);
        return;
    }
    if (b && (b->rank != 1 || !dims_match(b->dims[0], cout))) {
        ERR("'bias' %s must be [%lld]", fmt_dims(b->dims, b->rank, s1, sizeof s1), (long long)cout);
        return;
    }
    int64_t strides[MAX_RANK], dil[MAX_RANK], pad[MAX_RANK];
    for (int i = 0; i < ns; i++) strides[i] = dil[i] = 1, pad[2 * i] = pad[2 * i + 1] = 0;
    struct {
        const char *name;
        int64_t *v;
        int n;
    } vecs[] = {{"strides", strides, ns}, {"dilations", dil, ns}, {"pad", pad, 2 * ns}};
    for (int k = 0; k < 3; k++) {
        if (!arg_of(x, vecs[k].name)) continue;
        int64_t v[MAX_RANK];
        int n = ints_of(x, vecs[k].name, v);
        if (n != vecs[k].n) {
            ERR("'%s' must have %d values, not %d", vecs[k].name, vecs[k].n, n);
            return;
        }
        for (int i = 0; i < n; i++) {
            if (v[i] < (k == 2 ? 0 : 1)) {
                ERR("'%s' values must be %s", vecs[k].name, k == 2 ? ">= 0" : ">= 1");
                return;
            }
            vecs[k].v[i] = v[i];
        }
    }
    const IrLiteral *pt = const_of(x, "pad_type");
    const char *mode = pt ? ir_lit_str(pt, 0) : "valid";
    bool valid = strcmp(mode, "valid") == 0, custom = strcmp(mode, "custom") == 0;
    bool same = strcmp(mode, "same") == 0 || strcmp(mode, "same_lower") == 0;
    if (!valid && !custom && !same) {
        ERR("unknown pad_type \"%s\" (valid, same, same_lower, custom)", mode);
        return;
    }
    if (x->op->fn && x->op->fn->opset_version == 15 && strcmp(mode, "same_lower") == 0) {
        ERR("pad_type \"same_lower\" needs opset ios16 or later");
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    o->dims[1] = cout;
    for (int i = 0; i < ns; i++) {
        int64_t d = t->dims[2 + i], k = w->dims[2 + i];
        if (!dim_known(d) || !dim_known(k)) {
            o->dims[2 + i] = IR_DIM_DYNAMIC;
            continue;
        }
        int64_t ek = sat_add(sat_mul(dil[i], k - 1), 1);
        int64_t p = custom ? sat_add(pad[2 * i], pad[2 * i + 1]) : 0;
        int64_t dp = sat_add(d, p);
        if (!same && dp < ek) {
            ERR("kernel %lld (dilated %lld) is larger than the padded input %lld in spatial dim %d", (long long)k,
                (long long)ek, (long long)dp, i);
            return;
        }
        int64_t od = same ? d / strides[i] + (d % strides[i] != 0) : (dp - ek) / strides[i] + 1;
        o->dims[2 + i] = od;
    }
}

static void infer_gelu(OpCtx *x) {
    const IrLiteral *m = const_of(x, "mode");
    if (m) {
        const char *s = ir_lit_str(m, 0);
        if (strcmp(s, "EXACT") && strcmp(s, "TANH_APPROXIMATION") && strcmp(s, "SIGMOID_APPROXIMATION")) {
            ERR("unknown mode \"%s\" (EXACT, TANH_APPROXIMATION, SIGMOID_APPROXIMATION)", s);
            return;
        }
    }
    infer_same(x);
}

static void infer_softmax(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axis, a;
    if (!int_of(x, "axis", -1, &axis)) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!norm_axis(x, "axis", axis, t->rank, &a)) return;
    infer_same(x);
}

/* Normalised, duplicate-free axes of an `axes` argument; all axes when absent.
 * Returns the count or -1 after an error. */
static int axes_of(OpCtx *x, const char *name, int rank, int64_t *axes, bool *mask) {
    int64_t v[MAX_RANK];
    int n;
    memset(mask, 0, sizeof(bool) * MAX_RANK);
    if (!arg_of(x, name)) {
        for (int i = 0; i < rank; i++) axes[i] = i, mask[i] = true;
        return rank;
    }
    n = ints_of(x, name, v);
    if (n < 0) return -1;
    for (int i = 0; i < n; i++) {
        if (!norm_axis(x, name, v[i], rank, &axes[i])) return -1;
        if (mask[axes[i]]) {
            ERR("'%s' names axis %lld twice", name, (long long)axes[i]);
            return -1;
        }
        mask[axes[i]] = true;
    }
    return n;
}

static void infer_reduce(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axes[MAX_RANK], d[MAX_RANK];
    bool mask[MAX_RANK];
    if (!rank_at_most(x, "x", t) || axes_of(x, "axes", t->rank, axes, mask) < 0) return;
    bool keep = bool_of(x, "keep_dims");
    int r = 0;
    for (int i = 0; i < t->rank; i++) {
        if (!mask[i])
            d[r++] = t->dims[i];
        else if (keep)
            d[r++] = 1;
    }
    set_out(x, 0, t->dtype, r, d);
}

static void infer_layer_norm(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axes[MAX_RANK], want[MAX_RANK];
    bool mask[MAX_RANK];
    char s1[256], s2[256];
    if (!rank_at_most(x, "x", t)) return;
    int n = axes_of(x, "axes", t->rank, axes, mask);
    if (n < 0) return;
    for (int i = 0; i < n; i++) want[i] = t->dims[axes[i]];
    const char *names[] = {"gamma", "beta"};
    for (int k = 0; k < 2; k++) {
        const IrType *g = type_of(x, names[k]);
        if (!g) continue;
        bool ok = g->rank == n;
        for (int i = 0; ok && i < n; i++) ok = dims_match(g->dims[i], want[i]);
        if (!ok) {
            ERR("'%s' %s must have the shape of 'x' on axes, %s", names[k], fmt_dims(g->dims, g->rank, s1, sizeof s1),
                fmt_dims(want, n, s2, sizeof s2));
            return;
        }
    }
    infer_same(x);
}

static void infer_reshape(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *st = type_of(x, "shape");
    int64_t v[MAX_RANK];
    char s1[256], s2[256];
    if (!rank_at_most(x, "x", t)) return;
    if (!dim_known(st->dims[0])) {
        x->nout = -1;
        return;
    } /* rank unknown: nothing to infer */
    if (st->dims[0] > MAX_RANK) {
        ERR("'shape' has more than %d entries", MAX_RANK);
        return;
    }
    int n = ints_of(x, "shape", v);
    IrType *o = set_out(x, 0, t->dtype, (int)st->dims[0], NULL);
    if (n < 0) {
        for (int i = 0; i < o->rank; i++) o->dims[i] = DIM_UNKNOWN;
        return;
    }
    int infer = -1;
    int64_t known = 1;
    bool dyn = false;
    for (int i = 0; i < n; i++) {
        int64_t d = v[i];
        if (d == 0) {
            if (i >= t->rank) {
                ERR("'shape' entry %d is 0 (copy) but 'x' has rank %d", i, t->rank);
                return;
            }
            d = t->dims[i];
        }
        if (d == -1) {
            if (infer >= 0) {
                ERR("'shape' has more than one -1");
                return;
            }
            infer = i;
        } else if (d < -1) {
            ERR("'shape' entry %lld is invalid", (long long)v[i]);
            return;
        } else if (!dim_known(d))
            dyn = true;
        else
            known = sat_mul(known, d);
        o->dims[i] = d;
    }
    int64_t total = ir_type_numel(t);
    if (total < 0 || dyn) {
        if (infer >= 0) o->dims[infer] = DIM_UNKNOWN;
        return;
    }
    if (infer >= 0) {
        if (known == 0 || total % known) {
            ERR("cannot reshape %s (%lld elements) to %s", fmt_dims(t->dims, t->rank, s1, sizeof s1), (long long)total,
                fmt_dims(v, n, s2, sizeof s2));
            return;
        }
        o->dims[infer] = total / known;
    } else if (known != total) {
        ERR("cannot reshape %s (%lld elements) to %s (%lld elements)", fmt_dims(t->dims, t->rank, s1, sizeof s1),
            (long long)total, fmt_dims(v, n, s2, sizeof s2), (long long)known);
    }
}

static void infer_transpose(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t v[MAX_RANK];
    bool seen[MAX_RANK] = {0};
    char s1[256];
    if (!rank_at_most(x, "x", t)) return;
    int n = ints_of(x, "perm", v);
    if (n != t->rank) {
        ERR("'perm' %s must have %d entries, one per dimension of 'x'", fmt_dims(v, n > 0 ? n : 0, s1, sizeof s1),
            t->rank);
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, NULL);
    for (int i = 0; i < n; i++) {
        int64_t a;
        if (!norm_axis(x, "perm entry", v[i], t->rank, &a)) return;
        if (seen[a]) {
            ERR("'perm' %s is not a permutation", fmt_dims(v, n, s1, sizeof s1));
            return;
        }
        seen[a] = true;
        o->dims[i] = t->dims[a];
    }
}

static void infer_concat(OpCtx *x) {
    IrArg *vals = arg_of(x, "values");
    char s1[256], s2[256];
    if (vals->nitems < 1) {
        ERR("'values' is empty");
        return;
    }
    const IrType *t0 = &vals->items[0]->type;
    int64_t axis, a;
    if (!rank_at_most(x, "values", t0) || !int_of(x, "axis", 0, &axis)) return;
    if (t0->rank == 0) {
        ERR("cannot concatenate scalars");
        return;
    }
    if (!norm_axis(x, "axis", axis, t0->rank, &a)) return;
    IrType *o = set_out(x, 0, t0->dtype, t0->rank, t0->dims);
    for (int i = 1; i < vals->nitems; i++) {
        const IrType *t = &vals->items[i]->type;
        bool ok = t->rank == t0->rank;
        for (int k = 0; ok && k < t->rank; k++) ok = k == a || dims_match(t->dims[k], t0->dims[k]);
        if (!ok) {
            ERR("'%s' %s does not match '%s' %s outside axis %lld", vals->items[i]->name,
                fmt_dims(t->dims, t->rank, s1, sizeof s1), vals->items[0]->name,
                fmt_dims(t0->dims, t0->rank, s2, sizeof s2), (long long)a);
            return;
        }
        o->dims[a] = dim_known(o->dims[a]) && dim_known(t->dims[a]) ? sat_add(o->dims[a], t->dims[a]) : IR_DIM_DYNAMIC;
    }
}

static void infer_split(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axis, a, sizes[MAX_RESULTS];
    if (!rank_at_most(x, "x", t) || !int_of(x, "axis", 0, &axis)) return;
    if (t->rank == 0) {
        ERR("cannot split a scalar");
        return;
    }
    if (!norm_axis(x, "axis", axis, t->rank, &a)) return;
    bool has_n = arg_of(x, "num_splits") != NULL, has_s = arg_of(x, "split_sizes") != NULL;
    if (has_n == has_s) {
        ERR("needs exactly one of 'num_splits' and 'split_sizes'");
        return;
    }
    int64_t d = t->dims[a];
    int n;
    if (has_n) {
        int64_t ns;
        if (!int_of(x, "num_splits", 1, &ns)) return;
        if (ns < 1 || ns > MAX_RESULTS) {
            ERR("'num_splits' %lld must be in 1..%d", (long long)ns, MAX_RESULTS);
            return;
        }
        if (dim_known(d) && d % ns) {
            ERR("dimension %lld of size %lld is not divisible into %lld splits", (long long)a, (long long)d,
                (long long)ns);
            return;
        }
        n = (int)ns;
        for (int i = 0; i < n; i++) sizes[i] = dim_known(d) ? d / ns : IR_DIM_DYNAMIC;
    } else {
        int64_t v[MAX_RANK];
        n = ints_of(x, "split_sizes", v);
        if (n < 1) {
            ERR("'split_sizes' is empty");
            return;
        }
        int64_t sum = 0;
        for (int i = 0; i < n; i++) {
            if (v[i] < 0) {
                ERR("'split_sizes' entry %lld is negative", (long long)v[i]);
                return;
            }
            sizes[i] = v[i];
            sum = sat_add(sum, v[i]);
        }
        if (dim_known(d) && sum != d) {
            ERR("'split_sizes' sum to %lld but dimension %lld has size %lld", (long long)sum, (long long)a,
                (long long)d);
            return;
        }
    }
    for (int i = 0; i < n; i++) set_out(x, i, t->dtype, t->rank, t->dims)->dims[a] = sizes[i];
}

/* The shape slice_by_index (and slice_update) selects from t into d[*n]:
 * 1, or 0 after an error, or -1 when the result rank is unknown. */
static int slice_shape(OpCtx *x, const IrType *t, int64_t *d, int *nout) {
    int r = t->rank;
    int64_t b[MAX_RANK], e[MAX_RANK], s[MAX_RANK], bm[MAX_RANK], em[MAX_RANK], sq[MAX_RANK];
    if (!rank_at_most(x, "x", t)) return 0;
    const char *names[] = {"begin", "end", "stride", "begin_mask", "end_mask", "squeeze_mask"};
    int64_t *vecs[] = {b, e, s, bm, em, sq};
    bool known[6];
    for (int k = 0; k < 6; k++) {
        known[k] = true;
        if (!arg_of(x, names[k])) {
            for (int i = 0; i < r; i++) vecs[k][i] = k == 2 ? 1 : 0;
            continue;
        }
        const IrType *vt = type_of(x, names[k]);
        if (dim_known(vt->dims[0]) && vt->dims[0] != r) {
            ERR("'%s' has %lld entries but 'x' has rank %d", names[k], (long long)vt->dims[0], r);
            return 0;
        }
        known[k] = ints_of(x, names[k], vecs[k]) == r;
    }
    int n = 0;
    for (int i = 0; i < r; i++) {
        if (known[5] && sq[i]) continue;
        int64_t dim = t->dims[i];
        if (!known[0] || !known[1] || !known[2] || !dim_known(dim)) {
            d[n++] = DIM_UNKNOWN;
            continue;
        }
        int64_t st = s[i];
        if (st == 0) {
            ERR("'stride' entry %d is 0", i);
            return 0;
        }
        int64_t lo = b[i], hi = e[i];
        /* Python slice semantics, with masks selecting the full range. */
        if (lo < 0) lo += dim;
        if (hi < 0) hi += dim;
        if (st > 0) {
            if (known[3] && bm[i]) lo = 0;
            if (known[4] && em[i]) hi = dim;
            lo = lo < 0 ? 0 : lo > dim ? dim : lo;
            hi = hi < 0 ? 0 : hi > dim ? dim : hi;
            d[n++] = hi > lo ? (hi - lo + st - 1) / st : 0;
        } else {
            if (known[3] && bm[i]) lo = dim - 1;
            if (known[4] && em[i]) hi = -1;
            lo = lo < -1 ? -1 : lo > dim - 1 ? dim - 1 : lo;
            hi = hi < -1 ? -1 : hi > dim - 1 ? dim - 1 : hi;
            d[n++] = lo > hi ? (lo - hi + (-st) - 1) / (-st) : 0;
        }
    }
    *nout = n;
    return known[5] ? 1 : -1;
}

static void infer_slice_by_index(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t d[MAX_RANK];
    int n = 0, k = slice_shape(x, t, d, &n);
    if (k < 0) x->nout = -1; /* result rank unknown */
    if (k > 0) set_out(x, 0, t->dtype, n, d);
}

/* slice_update: x with the slice slice_by_index would select replaced by
 * update, which must have that slice's shape (and rank >= 1). */
static void infer_slice_update(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *u = type_of(x, "update");
    int64_t d[MAX_RANK];
    int n = 0, k = slice_shape(x, t, d, &n);
    if (k == 0) return;
    if (u->rank == 0) {
        ERR("'update' cannot be a scalar; give it the slice's shape with rank >= 1");
        return;
    }
    bool ok = k < 0 || u->rank == n;
    for (int i = 0; ok && k > 0 && i < n; i++) ok = d[i] == DIM_UNKNOWN || dims_match(d[i], u->dims[i]);
    if (!ok) {
        char s1[256], s2[256];
        ERR("'update' %s must have the shape of the slice, %s", fmt_dims(u->dims, u->rank, s1, sizeof s1),
            fmt_dims(d, n, s2, sizeof s2));
        return;
    }
    set_out(x, 0, t->dtype, t->rank, t->dims);
}

static void infer_slice_by_size(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *bt = type_of(x, "begin");
    int64_t b[MAX_RANK], sz[MAX_RANK];
    int r = t->rank;
    if (!rank_at_most(x, "x", t)) return;
    int ns = ints_of(x, "size", sz);
    if (ns != r || (dim_known(bt->dims[0]) && bt->dims[0] != r)) {
        ERR("'begin' and 'size' must have %d entries, one per dimension of 'x'", r);
        return;
    }
    bool bk = ints_of(x, "begin", b) == r;
    IrType *o = set_out(x, 0, t->dtype, r, NULL);
    for (int i = 0; i < r; i++) {
        if (sz[i] >= 0) {
            if (bk && dim_known(t->dims[i]) && (b[i] < 0 || b[i] + sz[i] > t->dims[i])) {
                ERR("slice [%lld, %lld) is outside dimension %d of size %lld", (long long)b[i],
                    (long long)(b[i] + sz[i]), i, (long long)t->dims[i]);
                return;
            }
            o->dims[i] = sz[i];
        } else if (sz[i] == -1) {
            o->dims[i] = bk && dim_known(t->dims[i]) ? t->dims[i] - b[i] : DIM_UNKNOWN;
        } else {
            ERR("'size' entry %lld is invalid", (long long)sz[i]);
            return;
        }
    }
}

static void infer_gather(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *ix = type_of(x, "indices");
    int64_t axis, a, bd;
    if (!rank_at_most(x, "x", t) || !rank_at_most(x, "indices", ix)) return;
    if (!int_of(x, "axis", 0, &axis) || !int_of(x, "batch_dims", 0, &bd)) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!norm_axis(x, "axis", axis, t->rank, &a)) return;
    if (bd < 0 || bd > ix->rank || bd > a) {
        ERR("'batch_dims' %lld must be in 0..min(rank of indices, axis)", (long long)bd);
        return;
    }
    int64_t d[3 * MAX_RANK];
    int n = 0;
    for (int i = 0; i < a; i++) d[n++] = t->dims[i];
    for (int i = (int)bd; i < ix->rank; i++) d[n++] = ix->dims[i];
    for (int i = (int)a + 1; i < t->rank; i++) d[n++] = t->dims[i];
    if (n > MAX_RANK) {
        ERR("result rank too large");
        return;
    }
    set_out(x, 0, t->dtype, n, d);
}

static void infer_cast(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    const IrLiteral *l = const_of(x, "dtype");
    const char *s = l ? ir_lit_str(l, 0) : NULL;
    IrDType dt;
    /* coremltools' cast targets: four dtypes, and the 8- and 16-bit integers from ios17 on. */
    int opset = x->op->fn && x->op->fn->opset_version ? x->op->fn->opset_version : 18;
    unsigned ok = 1u << IR_DT_FP16 | 1u << IR_DT_FP32 | 1u << IR_DT_INT32 | 1u << IR_DT_BOOL;
    if (opset >= 17) ok |= 1u << IR_DT_INT8 | 1u << IR_DT_UINT8 | 1u << IR_DT_INT16 | 1u << IR_DT_UINT16;
    if (!s || !ir_dtype_from_name(s, strlen(s), &dt) || !(ok & 1u << dt)) {
        ERR("cannot cast to \"%s\" in %s (%s)", s ? s : "", opset >= 17 ? "ios17 and later" : "ios15 and ios16",
            opset >= 17 ? "fp16, fp32, int8, uint8, int16, uint16, int32, bool" : "fp16, fp32, int32, bool");
        return;
    }
    if (rank_at_most(x, "x", t)) set_out(x, 0, dt, t->rank, t->dims);
}

static void infer_band_part(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    if (t->rank < 2) {
        ERR("'x' must have rank >= 2, not %d", t->rank);
        return;
    }
    infer_same(x);
}

static void infer_expand_dims(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t v[MAX_RANK], axes[MAX_RANK];
    bool mask[MAX_RANK] = {0};
    if (!rank_at_most(x, "x", t)) return;
    int n = ints_of(x, "axes", v);
    int r = t->rank + n;
    if (n < 1 || r > MAX_RANK) {
        ERR("'axes' must have 1..%d entries", MAX_RANK - t->rank);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (!norm_axis(x, "axes entry", v[i], r, &axes[i])) return;
        if (mask[axes[i]]) {
            ERR("'axes' names axis %lld twice", (long long)axes[i]);
            return;
        }
        mask[axes[i]] = true;
    }
    IrType *o = set_out(x, 0, t->dtype, r, NULL);
    for (int i = 0, k = 0; i < r; i++) o->dims[i] = mask[i] ? 1 : t->dims[k++];
}

static void infer_squeeze(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axes[MAX_RANK], d[MAX_RANK];
    bool mask[MAX_RANK];
    if (!rank_at_most(x, "x", t)) return;
    bool given = arg_of(x, "axes") != NULL;
    if (axes_of(x, "axes", t->rank, axes, mask) < 0) return;
    int n = 0;
    for (int i = 0; i < t->rank; i++) {
        if (mask[i] && given && dim_known(t->dims[i]) && t->dims[i] != 1) {
            ERR("dimension %d of 'x' has size %lld, not 1", i, (long long)t->dims[i]);
            return;
        }
        if (mask[i] && !dim_known(t->dims[i]) && !given) {
            x->nout = -1;
            return;
        }
        if (!(mask[i] && (given || t->dims[i] == 1))) d[n++] = t->dims[i];
    }
    set_out(x, 0, t->dtype, n, d);
}

static void infer_tile(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *rt = type_of(x, "reps");
    int64_t v[MAX_RANK];
    if (!rank_at_most(x, "x", t)) return;
    if (dim_known(rt->dims[0]) && rt->dims[0] != t->rank) {
        ERR("'reps' has %lld entries but 'x' has rank %d", (long long)rt->dims[0], t->rank);
        return;
    }
    bool known = ints_of(x, "reps", v) == t->rank;
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    for (int i = 0; i < t->rank; i++) {
        if (known && v[i] < 0) {
            ERR("'reps' entry %lld is negative", (long long)v[i]);
            return;
        }
        o->dims[i] = !known ? DIM_UNKNOWN : dim_known(t->dims[i]) ? sat_mul(t->dims[i], v[i]) : IR_DIM_DYNAMIC;
    }
}

static void infer_sdpa(OpCtx *x) {
    const IrType *q = type_of(x, "query"), *k = type_of(x, "key"), *v = type_of(x, "value"),
                 *m = type_of(x, "attn_mask");
    char s1[256], s2[256], s3[256];
    if (!rank_at_most(x, "query", q) || !rank_at_most(x, "key", k) || !rank_at_most(x, "value", v)) return;
    if (q->rank < 3 || k->rank != q->rank || v->rank != q->rank) {
        ERR("'query' %s, 'key' %s and 'value' %s must share one rank >= 3", fmt_dims(q->dims, q->rank, s1, sizeof s1),
            fmt_dims(k->dims, k->rank, s2, sizeof s2), fmt_dims(v->dims, v->rank, s3, sizeof s3));
        return;
    }
    int r = q->rank;
    bool ok = dims_match(q->dims[r - 1], k->dims[r - 1]) && dims_match(k->dims[r - 2], v->dims[r - 2]);
    for (int i = 0; ok && i < r - 2; i++) ok = dims_match(q->dims[i], k->dims[i]) && dims_match(q->dims[i], v->dims[i]);
    if (!ok) {
        ERR("'query' %s [B, *, L, E], 'key' %s [B, *, S, E] and 'value' %s [B, *, S, Ev] do not agree",
            fmt_dims(q->dims, q->rank, s1, sizeof s1), fmt_dims(k->dims, k->rank, s2, sizeof s2),
            fmt_dims(v->dims, v->rank, s3, sizeof s3));
        return;
    }
    if (m) {
        int64_t want[MAX_RANK], d[MAX_RANK];
        int rr;
        memcpy(want, q->dims, sizeof(int64_t) * (size_t)r);
        want[r - 1] = k->dims[r - 2];
        if (!rank_at_most(x, "attn_mask", m)) return;
        if (m->dtype != IR_DT_BOOL && m->dtype != q->dtype) {
            ERR("'attn_mask' must be bool or %s, not %s", ir_dtype_name(q->dtype), ir_dtype_name(m->dtype));
            return;
        }
        if (!broadcast(m->dims, m->rank, want, r, d, &rr) || rr != r) {
            ERR("'attn_mask' %s does not broadcast to [B, *, L, S] %s", fmt_dims(m->dims, m->rank, s1, sizeof s1),
                fmt_dims(want, r, s2, sizeof s2));
            return;
        }
    }
    IrType *o = set_out(x, 0, q->dtype, r, q->dims);
    o->dims[r - 1] = v->dims[r - 1];
}

/* Comparisons and logical ops: broadcast, then bool. */
static void infer_compare(OpCtx *x) {
    infer_broadcast(x);
    if (x->ok && x->nout == 1) x->out[0].dtype = IR_DT_BOOL;
}

/* prelu, softplus_parametric: one alpha (and beta) per channel of [B, C, *]. */
static void infer_prelu(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    char s1[256];
    if (t->rank < 3) {
        ERR("'x' must be [B, C, *] (rank >= 3), not rank %d", t->rank);
        return;
    }
    for (int i = 1; i < x->nspecs; i++) {
        const IrType *a = x->args[i] ? type_of(x, x->specs[i].name) : NULL;
        if (a && !dims_match(a->dims[0], t->dims[1])) {
            ERR("'%s' %s must have one value per channel of 'x' (%lld)", x->specs[i].name,
                fmt_dims(a->dims, a->rank, s1, sizeof s1), (long long)t->dims[1]);
            return;
        }
        const IrLiteral *l =
            x->op->kind == OP_PRELU && (t->rank == 3 || t->rank == 5) ? const_of(x, x->specs[i].name) : NULL;
        for (size_t k = 1; l && k < l->count; k++)
            if (ir_lit_f64(l, k) != ir_lit_f64(l, 0)) {
                ERR("'alpha' must hold one value repeated when 'x' has rank %d (per-channel alphas need rank 4)",
                    t->rank);
                return;
            }
    }
    infer_same(x);
}

/* reduce_argmax / reduce_argmin: one axis, integer indices. */
static void infer_reduce_arg(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axis, a, d[MAX_RANK];
    IrDType dt = IR_DT_INT32;
    if (!rank_at_most(x, "x", t) || !int_of(x, "axis", -1, &axis)) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!norm_axis(x, "axis", axis, t->rank, &a)) return;
    const IrLiteral *od = const_of(x, "output_dtype");
    if (od) {
        const char *s = ir_lit_str(od, 0);
        if (!s || !ir_dtype_from_name(s, strlen(s), &dt) || (dt != IR_DT_INT32 && dt != IR_DT_UINT16)) {
            ERR("'output_dtype' must be \"int32\" or \"uint16\", not \"%s\"", s ? s : "");
            return;
        }
    }
    bool keep = bool_of(x, "keep_dims");
    int r = 0;
    for (int i = 0; i < t->rank; i++)
        if (i != a)
            d[r++] = t->dims[i];
        else if (keep)
            d[r++] = 1;
    set_out(x, 0, dt, r, d);
}

/* l2_norm: normalises over every dim but the batch; x needs rank >= 3. */
static void infer_l2_norm(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    if (t->rank < 3) {
        ERR("'x' must have rank >= 3, not %d", t->rank);
        return;
    }
    infer_same(x);
}

/* Constant int vector argument name with n entries into v (dflt when absent). */
static bool spatial_vec(OpCtx *x, const char *name, int n, int64_t dflt, int64_t min, int64_t *v) {
    for (int i = 0; i < n; i++) v[i] = dflt;
    if (!arg_of(x, name)) return true;
    int64_t w[MAX_RANK];
    int got = ints_of(x, name, w);
    if (got != n) {
        ERR("'%s' must have %d values, not %d", name, n, got);
        return false;
    }
    for (int i = 0; i < n; i++) {
        if (w[i] < min) {
            ERR("'%s' values must be >= %lld", name, (long long)min);
            return false;
        }
        v[i] = w[i];
    }
    return true;
}

/* max_pool, avg_pool, l2_pool: x [N, C, *spatial] with 1 to 3 spatial dims. */
static void infer_pool(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t k[MAX_RANK], st[MAX_RANK], pad[MAX_RANK];
    if (t->rank < 3 || t->rank > 5) {
        ERR("'x' must be [N, C, *spatial] with 1 to 3 spatial dims (rank 3 to 5), not rank %d", t->rank);
        return;
    }
    int ns = t->rank - 2;
    if (!spatial_vec(x, "kernel_sizes", ns, 1, 1, k) || !spatial_vec(x, "strides", ns, 1, 1, st) ||
        !spatial_vec(x, "pad", 2 * ns, 0, 0, pad))
        return;
    const IrLiteral *pt = const_of(x, "pad_type");
    const char *mode = pt ? ir_lit_str(pt, 0) : "valid";
    bool custom = strcmp(mode, "custom") == 0, same = strcmp(mode, "same") == 0 || strcmp(mode, "same_lower") == 0;
    if (!custom && !same && strcmp(mode, "valid") != 0) {
        ERR("unknown pad_type \"%s\" (valid, same, same_lower, custom)", mode);
        return;
    }
    bool ceil_mode = bool_of(x, "ceil_mode");
    int opset = x->op->fn ? x->op->fn->opset_version : 0;
    if (opset == 15 && strcmp(mode, "same_lower") == 0) {
        ERR("pad_type \"same_lower\" needs opset ios16 or later");
        return;
    }
    if (strcmp(x->opname, "l2_pool") == 0 && ns > 2) {
        ERR("l2_pool pools 1 or 2 spatial dims, not %d", ns);
        return;
    }
    if (ceil_mode) {
        if (ns > 2) {
            ERR("'ceil_mode' works for 1-D and 2-D pooling only, not 3-D");
            return;
        }
        if (strcmp(mode, "same") == 0) {
            ERR("'ceil_mode' must be false with pad_type \"same\"");
            return;
        }
        for (int i = 0; arg_of(x, "pad") && i < ns; i++)
            if (pad[2 * i] != pad[2 * i + 1]) {
                ERR("'pad' must be symmetric when 'ceil_mode' is true");
                return;
            }
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    for (int i = 0; i < ns; i++) {
        int64_t d = t->dims[2 + i], s = st[i], od;
        if (!dim_known(d)) continue;
        /* Total padding: what "same" needs to give ceil(d / s) windows, the custom pads, or none. */
        int64_t p = same     ? sat_add(sat_mul(s, d / s + (d % s != 0)) - d, k[i] - s)
                    : custom ? sat_add(pad[2 * i], pad[2 * i + 1])
                             : 0;
        if (p < 0) p = 0;
        int64_t span = sat_add(d, p) - k[i];
        if (!ceil_mode)
            od = span >= 0 ? span / s + 1 : -((-span + s - 1) / s) + 1;
        else {
            od = (span + s - 1 >= 0 ? (span + s - 1) / s : -((-(span + s - 1) + s - 1) / s)) + 1;
            if (p > 0 && (od - 1) * s >= d + p / 2) od--; /* the last window would start in the padding */
        }
        if (od <= 0) {
            ERR("kernel %lld is larger than the padded input %lld in spatial dim %d", (long long)k[i],
                (long long)sat_add(d, p), i);
            return;
        }
        o->dims[2 + i] = od;
    }
}

static void infer_shape(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t r = t->rank;
    set_out(x, 0, IR_DT_INT32, 1, &r);
}

/* stack: every value the same shape; a new axis of length count. */
static void infer_stack(OpCtx *x) {
    IrArg *vals = arg_of(x, "values");
    char s1[256], s2[256];
    if (vals->nitems < 1) {
        ERR("'values' is empty");
        return;
    }
    const IrType *t0 = &vals->items[0]->type;
    int64_t axis, a, d[MAX_RANK];
    if (!rank_at_most(x, "values", t0) || !int_of(x, "axis", 0, &axis)) return;
    if (t0->rank + 1 > MAX_RANK) {
        ERR("result rank too large");
        return;
    }
    if (!norm_axis(x, "axis", axis, t0->rank + 1, &a)) return;
    for (int i = 1; i < vals->nitems; i++) {
        const IrType *t = &vals->items[i]->type;
        bool ok = t->rank == t0->rank;
        for (int k = 0; ok && k < t->rank; k++) ok = dims_match(t->dims[k], t0->dims[k]);
        if (!ok) {
            ERR("'%s' %s and '%s' %s must have the same shape", vals->items[i]->name,
                fmt_dims(t->dims, t->rank, s1, sizeof s1), vals->items[0]->name,
                fmt_dims(t0->dims, t0->rank, s2, sizeof s2));
            return;
        }
    }
    for (int i = 0, k = 0; i <= t0->rank; i++) d[i] = i == a ? vals->nitems : t0->dims[k++];
    set_out(x, 0, t0->dtype, t0->rank + 1, d);
}

/* The type of the op's first argument (x, data, input, ...). */
static const IrType *first_type(const OpCtx *x) { return type_of(x, x->specs[0].name); }

/* batch_norm, instance_norm, local_response_norm: x [N, C, *] (coremltools
 * checks no upper rank); per-channel parameters [C]. */
static void infer_norm(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    char s1[256];
    if (t->rank < 2) {
        ERR("'x' must be [N, C, *] (rank >= 2), not rank %d", t->rank);
        return;
    }
    for (int i = 1; i < x->nspecs; i++) {
        const IrType *p = x->args[i] && x->specs[i].rank == 1 ? type_of(x, x->specs[i].name) : NULL;
        if (p && !dims_match(p->dims[0], t->dims[1])) {
            ERR("'%s' %s must have one value per channel of 'x' (%lld)", x->specs[i].name,
                fmt_dims(p->dims, p->rank, s1, sizeof s1), (long long)t->dims[1]);
            return;
        }
    }
    infer_same(x);
}

/* cumsum: an axis of x, same type. */
static void infer_axis_same(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axis, a;
    if (!int_of(x, "axis", 0, &axis)) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (norm_axis(x, "axis", axis, t->rank, &a)) infer_same(x);
}

static void infer_reverse(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axes[MAX_RANK];
    bool mask[MAX_RANK];
    if (rank_at_most(x, "x", t) && axes_of(x, "axes", t->rank, axes, mask) >= 0) infer_same(x);
}

/* argsort: int32 indices in x's shape. */
static void infer_argsort(OpCtx *x) {
    infer_axis_same(x);
    if (x->ok && x->nout == 1) x->out[0].dtype = IR_DT_INT32;
}

/* flatten2d: [prod(dims before axis), prod(dims from axis)]; 0 <= axis <= rank. */
static void infer_flatten2d(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axis, d[2] = {1, 1};
    if (!rank_at_most(x, "x", t) || !int_of(x, "axis", 1, &axis)) return;
    if (axis < -t->rank || axis > t->rank) {
        ERR("axis %lld is out of range for rank %d", (long long)axis, t->rank);
        return;
    }
    if (axis < 0) axis += t->rank;
    for (int i = 0; i < t->rank; i++) {
        int64_t *p = &d[i >= axis];
        *p = dim_known(*p) && dim_known(t->dims[i]) ? sat_mul(*p, t->dims[i]) : IR_DIM_DYNAMIC;
    }
    set_out(x, 0, t->dtype, 2, d);
}

/* A shape argument: a constant int vector (dims), else its length (unknown dims). */
static bool shape_arg(OpCtx *x, const char *name, int *rank, int64_t *dims) {
    const IrType *st = type_of(x, name);
    int n = ints_of(x, name, dims);
    if (n >= 0) {
        for (int i = 0; i < n; i++)
            if (dims[i] < 0) {
                ERR("'%s' entry %lld is negative", name, (long long)dims[i]);
                return false;
            }
        *rank = n;
        return true;
    }
    if (!dim_known(st->dims[0])) {
        x->nout = -1;
        return false;
    }
    if (st->dims[0] > MAX_RANK) {
        ERR("'%s' has more than %d entries", name, MAX_RANK);
        return false;
    }
    *rank = (int)st->dims[0];
    for (int i = 0; i < *rank; i++) dims[i] = DIM_UNKNOWN;
    return true;
}

/* fill: the shape given, the value's dtype (fp32 by default). */
static void infer_fill(OpCtx *x) {
    int64_t d[MAX_RANK];
    int r;
    const IrType *v = type_of(x, "value");
    if (shape_arg(x, "shape", &r, d)) set_out(x, 0, v ? v->dtype : IR_DT_FP32, r, d);
}

/* random_*: the shape given; the dtype of the distribution's parameters (fp32 by default). */
static void infer_random(OpCtx *x) {
    int64_t d[MAX_RANK];
    int r;
    IrDType dt = IR_DT_FP32;
    for (int i = 1; i < x->nspecs; i++)
        if (x->args[i] && x->specs[i].group == 'T') dt = type_of(x, x->specs[i].name)->dtype;
    /* The parameters' defaults are fp32: an fp16 distribution gives them all. */
    for (int i = 1; i < x->nspecs; i++)
        if (!x->args[i] && x->specs[i].group == 'T' && dt != IR_DT_FP32) {
            ERR("the %s parameters are %s but '%s' defaults to fp32: give it as %s too", x->opname, ir_dtype_name(dt),
                x->specs[i].name, ir_dtype_name(dt));
            return;
        }
    if (shape_arg(x, "shape", &r, d)) set_out(x, 0, dt, r, d);
}

/* gather_along_axis: indices of x's rank, matching x off the axis; indices' shape. */
static void infer_gather_along_axis(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *ix = type_of(x, "indices");
    int64_t axis, a;
    char s1[256], s2[256];
    if (!int_of(x, "axis", 0, &axis)) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!norm_axis(x, "axis", axis, t->rank, &a)) return;
    bool ok = ix->rank == t->rank;
    for (int i = 0; ok && i < t->rank; i++) ok = i == a || dims_match(ix->dims[i], t->dims[i]);
    if (!ok) {
        ERR("'indices' %s must have the rank of 'x' %s and its dims off axis %lld",
            fmt_dims(ix->dims, ix->rank, s1, sizeof s1), fmt_dims(t->dims, t->rank, s2, sizeof s2), (long long)a);
        return;
    }
    set_out(x, 0, t->dtype, ix->rank, ix->dims);
}

/* scatter family: the result is data; the mode must be known. */
static void infer_scatter(OpCtx *x) {
    const IrType *t = type_of(x, "data");
    const IrLiteral *m = const_of(x, "mode");
    static const char *const modes[] = {"update", "add", "sub", "mul", "div", "max", "min"};
    const char *s = m ? ir_lit_str(m, 0) : "add";
    bool known = false;
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) known |= strcmp(s, modes[i]) == 0;
    if (!known) {
        ERR("unknown mode \"%s\" (update, add, sub, mul, div, max, min)", s);
        return;
    }
    if (t->rank == 0) {
        ERR("'data' must have rank >= 1");
        return;
    }
    const IrType *ix = type_of(x, "indices"), *u = type_of(x, "updates");
    int64_t want[MAX_RANK], a = 0;
    int nw = 0;
    char s1[256], s2[256];
    if (!rank_at_most(x, "data", t) || !rank_at_most(x, "indices", ix)) return;
    if (x->op->kind == OP_SCATTER_ND) {
        /* indices [*b, k] address data's first k dims; updates [*b, *data[k:]] */
        int64_t k = ix->rank ? ix->dims[ix->rank - 1] : IR_DIM_DYNAMIC;
        if (ix->rank < 1 || !dim_known(k) || k > t->rank) {
            ERR("'indices' %s must be [*batch, k] with k known and at most the rank of 'data' (%d)",
                fmt_dims(ix->dims, ix->rank, s1, sizeof s1), t->rank);
            return;
        }
        for (int i = 0; i < ix->rank - 1; i++) want[nw++] = ix->dims[i];
        for (int64_t i = k; i < t->rank; i++) want[nw++] = t->dims[i];
    } else {
        int64_t axis;
        if (!int_of(x, "axis", 0, &axis) || !norm_axis(x, "axis", axis, t->rank, &a)) return;
        if (x->op->kind == OP_SCATTER) { /* updates: data[:axis] + indices.shape + data[axis+1:] */
            if (t->rank - 1 + ix->rank > MAX_RANK) {
                ERR("'updates' would have rank above %d", MAX_RANK);
                return;
            }
            for (int64_t i = 0; i < a; i++) want[nw++] = t->dims[i];
            for (int i = 0; i < ix->rank; i++) want[nw++] = ix->dims[i];
            for (int64_t i = a + 1; i < t->rank; i++) want[nw++] = t->dims[i];
        } else { /* scatter_along_axis: indices and updates shaped like data but along axis */
            bool ok = ix->rank == t->rank;
            for (int i = 0; ok && i < t->rank; i++) ok = i == a || dims_match(ix->dims[i], t->dims[i]);
            if (!ok) {
                ERR("'indices' %s must have the shape of 'data' %s except along axis %lld",
                    fmt_dims(ix->dims, ix->rank, s1, sizeof s1), fmt_dims(t->dims, t->rank, s2, sizeof s2),
                    (long long)a);
                return;
            }
            nw = ix->rank;
            memcpy(want, ix->dims, sizeof(int64_t) * (size_t)nw);
        }
    }
    bool same = u->rank == nw;
    for (int i = 0; same && i < nw; i++) same = dims_match(u->dims[i], want[i]);
    if (!same) {
        ERR("'updates' %s must be %s", fmt_dims(u->dims, u->rank, s1, sizeof s1), fmt_dims(want, nw, s2, sizeof s2));
        return;
    }
    /* validate_indices (ios17): const indices must lie in [0, data.shape[axis]). */
    const IrLiteral *il =
        x->op->kind != OP_SCATTER_ND && bool_of(x, "validate_indices") ? const_of(x, "indices") : NULL;
    for (size_t i = 0; il && dim_known(t->dims[a]) && i < il->count; i++) {
        int64_t v = ir_lit_i64(il, i);
        if (v < 0 || v >= t->dims[a]) {
            ERR("'indices' entry %lld is outside [0, %lld) (validate_indices)", (long long)v, (long long)t->dims[a]);
            return;
        }
    }
    set_out(x, 0, t->dtype, t->rank, t->dims);
}

/* space_to_depth [N, C, H, W] -> [N, C*b*b, H/b, W/b]; depth_to_space the reverse. */
static void infer_space_to_depth(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t b;
    if (t->rank != 4) {
        ERR("'x' must be [N, C, H, W], not rank %d", t->rank);
        return;
    }
    if (!int_of(x, "block_size", 1, &b) || b < 1) {
        ERR("'block_size' must be a positive integer");
        return;
    }
    bool down = x->op->kind == OP_SPACE_TO_DEPTH;
    IrType *o = set_out(x, 0, t->dtype, 4, t->dims);
    int64_t bb = sat_mul(b, b);
    if (down) {
        for (int i = 2; i < 4; i++)
            if (dim_known(t->dims[i]) && t->dims[i] % b) {
                ERR("dim %d (%lld) is not divisible by 'block_size' %lld", i, (long long)t->dims[i], (long long)b);
                return;
            }
        o->dims[1] = dim_known(t->dims[1]) ? sat_mul(t->dims[1], bb) : IR_DIM_DYNAMIC;
        for (int i = 2; i < 4; i++) o->dims[i] = dim_known(t->dims[i]) ? t->dims[i] / b : IR_DIM_DYNAMIC;
    } else {
        if (dim_known(t->dims[1]) && t->dims[1] % bb) {
            ERR("channels (%lld) are not divisible by 'block_size'^2 %lld", (long long)t->dims[1], (long long)bb);
            return;
        }
        o->dims[1] = dim_known(t->dims[1]) ? t->dims[1] / bb : IR_DIM_DYNAMIC;
        for (int i = 2; i < 4; i++) o->dims[i] = dim_known(t->dims[i]) ? sat_mul(t->dims[i], b) : IR_DIM_DYNAMIC;
    }
}

/* upsample_nearest_neighbor: the last two dims scaled (fractional scales round down). */
static void infer_upsample(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    const char *names[] = {"scale_factor_height", "scale_factor_width"};
    if (t->rank < 3) {
        ERR("'x' must have rank >= 3, not %d", t->rank);
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    for (int k = 0; k < 2; k++) {
        const IrLiteral *l = const_of(x, names[k]);
        double s = l ? ir_lit_f64(l, 0) : 1;
        if (!(s > 0)) {
            ERR("'%s' must be positive", names[k]);
            return;
        }
        int64_t d = t->dims[t->rank - 2 + k];
        o->dims[t->rank - 2 + k] = dim_known(d) ? (int64_t)((double)d * s) : IR_DIM_DYNAMIC;
    }
}

/* quantize: input's shape in output_dtype (int8 or uint8). */
static void infer_quantize(OpCtx *x) {
    const IrType *t = first_type(x);
    const IrLiteral *l = const_of(x, "output_dtype");
    const char *s = l ? ir_lit_str(l, 0) : "";
    IrDType dt;
    if (!ir_dtype_from_name(s, strlen(s), &dt) || (dt != IR_DT_INT8 && dt != IR_DT_UINT8)) {
        ERR("'output_dtype' must be \"int8\" or \"uint8\", not \"%s\"", s);
        return;
    }
    set_out(x, 0, dt, t->rank, t->dims);
}

/* dequantize and the affine / blockwise constexpr ops: the data's shape in scale's dtype. */
static void infer_dequantize(OpCtx *x) {
    const IrType *t = first_type(x);
    set_out(x, 0, type_of(x, "scale")->dtype, t->rank, t->dims);
}

static void infer_constexpr_cast(OpCtx *x) {
    const IrType *t = type_of(x, "source_val");
    const IrLiteral *l = const_of(x, "output_dtype");
    const char *s = l ? ir_lit_str(l, 0) : "";
    if (strcmp(s, "fp32") != 0) {
        ERR("'output_dtype' must be \"fp32\", not \"%s\"", s);
        return;
    }
    set_out(x, 0, IR_DT_FP32, t->rank, t->dims);
}

/* The dense shape a palette gives (constexpr_lut_to_dense and _to_sparse):
 * indices [*d] of dtype ixdt pick entries of lut [*blocks, palette, vector];
 * each blocks dim divides its d, palette = 2^bits(ixdt), and vector > 1
 * widens dim vector_axis.  *vec gets the vector size, *axis that dim (-1 if none). */
static bool lut_shape(OpCtx *x, const char *ixname, const IrType *ix, IrDType ixdt, int64_t *out, int64_t *vec,
                      int64_t *axis) {
    const IrType *lut = type_of(x, "lut");
    char s1[256], s2[256];
    if (ix->rank < 1) {
        ERR("'%s' must have rank >= 1, not a scalar", ixname);
        return false;
    }
    if (lut->rank != ix->rank + 2 || ix->rank > MAX_RANK) {
        ERR("'lut' %s must have the rank of '%s' %s plus 2 [*blocks, palette, vector]",
            fmt_dims(lut->dims, lut->rank, s1, sizeof s1), ixname, fmt_dims(ix->dims, ix->rank, s2, sizeof s2));
        return false;
    }
    for (int i = 0; i < ix->rank; i++)
        if (dim_known(ix->dims[i]) && dim_known(lut->dims[i]) &&
            (lut->dims[i] == 0 || ix->dims[i] % lut->dims[i] != 0)) {
            ERR("'%s' dim %d (%lld) is not divisible by the lut's blocks in that dim (%lld)", ixname, i,
                (long long)ix->dims[i], (long long)lut->dims[i]);
            return false;
        }
    int64_t palette = lut->dims[ix->rank];
    *vec = lut->dims[ix->rank + 1];
    if (dim_known(palette) && palette != (INT64_C(1) << ir_dtype_bits(ixdt))) {
        ERR("'lut' has %lld entries per palette but %s indices need %lld", (long long)palette, ir_dtype_name(ixdt),
            (long long)(INT64_C(1) << ir_dtype_bits(ixdt)));
        return false;
    }
    memcpy(out, ix->dims, sizeof(int64_t) * (size_t)ix->rank);
    *axis = -1;
    if (arg_of(x, "vector_axis")) {
        int64_t va;
        if (!int_of(x, "vector_axis", 0, &va) || !norm_axis(x, "vector_axis", va, ix->rank, axis)) return false;
    } else if (*vec != 1) {
        ERR("'vector_axis' is needed when the lut's vector size is %lld", (long long)*vec);
        return false;
    }
    if (*vec != 1) out[*axis] = sat_mul(out[*axis], *vec);
    return true;
}

/* The sparse pair (nonzero_data [n], mask): n must be the mask's count of ones. */
static bool sparse_pair(OpCtx *x, const char *data, const char *mask) {
    const IrType *d = type_of(x, data);
    if (d->rank != 1) {
        ERR("'%s' must have rank 1, not %d", data, d->rank);
        return false;
    }
    const IrLiteral *m = const_of(x, mask);
    if (!m || !dim_known(d->dims[0])) return true;
    int64_t ones = 0;
    for (size_t i = 0; i < m->count; i++) ones += ir_lit_i64(m, i) != 0;
    if (ones != d->dims[0]) {
        ERR("'%s' has %lld ones but '%s' has %lld values", mask, (long long)ones, data, (long long)d->dims[0]);
        return false;
    }
    return true;
}

/* The ios16/17 forms of constexpr_lut_to_dense and constexpr_sparse_to_dense
 * give their dense shape as 'shape' (uint32 [K]) and pack their indices /
 * mask bits into uint8 bytes, least significant bit first: n elements of
 * `bits` bits take ceil(n·bits/8) bytes.  The shape into d, its rank returned;
 * -1 after a diagnostic. */
static int packed_shape(OpCtx *x, const char *packed, int64_t bits, int64_t *d, int64_t *numel) {
    const IrType *p = type_of(x, packed);
    int k = ints_of(x, "shape", d);
    if (p->rank != 1) {
        ERR("'%s' must have rank 1 (packed bytes), not %d", packed, p->rank);
        return -1;
    }
    if (k < 1) {
        ERR("'shape' must be a constant uint32 vector of at most %d dims", MAX_RANK);
        return -1;
    }
    *numel = 1;
    for (int i = 0; i < k; i++) *numel = sat_mul(*numel, d[i]);
    int64_t want = *numel > INT64_MAX / 8 ? -1 : (*numel * bits + 7) / 8;
    if (dim_known(p->dims[0]) && p->dims[0] != want) {
        ERR("'%s' has %lld bytes but 'shape' needs ceil(%lld · %lld / 8) = %lld", packed, (long long)p->dims[0],
            (long long)*numel, (long long)bits, (long long)want);
        return -1;
    }
    return k;
}

static void infer_lut_packed(OpCtx *x) {
    const IrType *lut = type_of(x, "lut");
    int64_t d[MAX_RANK], n, bits = 0;
    if (lut->rank != 1) {
        ERR("'lut' must have rank 1 (the palette), not %d", lut->rank);
        return;
    }
    while (bits < 9 && (INT64_C(1) << bits) != lut->dims[0]) bits++;
    if (bits == 0 || bits == 3 || bits == 5 || bits == 7 || bits > 8) {
        ERR("'lut' has %lld entries; it must have 2, 4, 16, 64 or 256", (long long)lut->dims[0]);
        return;
    }
    int k = packed_shape(x, "indices", bits, d, &n);
    if (k > 0) set_out(x, 0, lut->dtype, k, d);
}

static void infer_sparse_packed(OpCtx *x) {
    const IrType *nz = type_of(x, "nonzero_data");
    const IrLiteral *m = const_of(x, "mask");
    int64_t d[MAX_RANK], n;
    int k = packed_shape(x, "mask", 1, d, &n);
    if (k < 0) return;
    if (m && dim_known(nz->dims[0])) {
        int64_t ones = 0, tail = 0;
        for (size_t i = 0; i < m->count; i++)
            for (int b = 0; b < 8; b++)
                if (ir_lit_i64(m, i) >> b & 1) (int64_t) i * 8 + b < n ? ones++ : tail++;
        if (tail) {
            ERR("'mask' sets %lld padding bits past the %lld elements of 'shape'; they must be 0", (long long)tail,
                (long long)n);
            return;
        }
        if (ones != nz->dims[0]) {
            ERR("'mask' has %lld ones but 'nonzero_data' has %lld values", (long long)ones, (long long)nz->dims[0]);
            return;
        }
    }
    set_out(x, 0, nz->dtype, k, d);
}

/* constexpr_lut_to_dense (ios18): the palette's dense shape in the lut's
 * dtype.  constexpr_lut_to_sparse: the mask (widened like the indices) and
 * the nonzero values (every dim times the vector size). */
static void infer_constexpr_lut(OpCtx *x) {
    int64_t d[MAX_RANK], vec, axis;
    const IrType *lut = type_of(x, "lut");
    if (x->op->kind == OP_CONSTEXPR_LUT_TO_DENSE && arg_of(x, "shape")) {
        infer_lut_packed(x);
        return;
    }
    if (x->op->kind == OP_CONSTEXPR_LUT_TO_DENSE) {
        const IrType *ix = type_of(x, "indices");
        if (lut_shape(x, "indices", ix, ix->dtype, d, &vec, &axis)) set_out(x, 0, lut->dtype, ix->rank, d);
        return;
    }
    const IrType *m = type_of(x, "indices_mask"), *nz = type_of(x, "indices_nonzero_data");
    if (!sparse_pair(x, "indices_nonzero_data", "indices_mask") ||
        !lut_shape(x, "indices_mask", m, nz->dtype, d, &vec, &axis))
        return;
    set_out(x, 0, IR_DT_UINT1, m->rank, d);
    set_out(x, 1, lut->dtype, 1, nz->dims)->dims[0] = sat_mul(nz->dims[0], vec);
}

/* constexpr_blockwise_shift_scale (ios18): data [*d] in scale's dtype; scale
 * [*blocks] with each block dim dividing its d; offset shaped like scale, of
 * a float dtype or the data's.  The sparse form takes data as (nonzero_data,
 * data_mask) and gives the mask and the dequantized nonzero values. */
static void infer_shift_scale(OpCtx *x) {
    bool sparse = x->op->kind == OP_CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE;
    const IrType *data = type_of(x, sparse ? "data_mask" : "data"), *sc = type_of(x, "scale"),
                 *off = type_of(x, "offset");
    IrDType ddt = type_of(x, sparse ? "nonzero_data" : "data")->dtype;
    char s1[256], s2[256];
    if (sparse && !sparse_pair(x, "nonzero_data", "data_mask")) return;
    if (data->rank != sc->rank) {
        ERR("'scale' %s must have the rank of the data %s", fmt_dims(sc->dims, sc->rank, s1, sizeof s1),
            fmt_dims(data->dims, data->rank, s2, sizeof s2));
        return;
    }
    if (data->rank < 1) {
        ERR("the data must have rank >= 1, not a scalar");
        return;
    }
    for (int i = 0; i < data->rank; i++)
        if (dim_known(data->dims[i]) && dim_known(sc->dims[i]) &&
            (sc->dims[i] == 0 || data->dims[i] % sc->dims[i] != 0)) {
            ERR("data dim %d (%lld) is not divisible by the number of scales in that dim (%lld)", i,
                (long long)data->dims[i], (long long)sc->dims[i]);
            return;
        }
    if (off) {
        bool same = off->rank == sc->rank;
        for (int i = 0; same && i < sc->rank; i++) same = dims_match(off->dims[i], sc->dims[i]);
        if (!same) {
            ERR("'offset' %s must have the shape of 'scale' %s", fmt_dims(off->dims, off->rank, s1, sizeof s1),
                fmt_dims(sc->dims, sc->rank, s2, sizeof s2));
            return;
        }
        if (!ir_dtype_is_float(off->dtype) && off->dtype != ddt) {
            ERR("'offset' is %s: it must be fp16, fp32 or the data's dtype (%s)", ir_dtype_name(off->dtype),
                ir_dtype_name(ddt));
            return;
        }
    }
    if (!sparse) {
        set_out(x, 0, sc->dtype, data->rank, data->dims);
        return;
    }
    const IrType *nz = type_of(x, "nonzero_data");
    set_out(x, 0, IR_DT_UINT1, data->rank, data->dims);
    set_out(x, 1, sc->dtype, 1, nz->dims);
}

/* constexpr_sparse_to_dense (ios18): mask's shape in the data's dtype
 * (the ios16/17 form: infer_sparse_packed). */
static void infer_constexpr_sparse(OpCtx *x) {
    const IrType *m = type_of(x, "mask");
    if (arg_of(x, "shape")) {
        infer_sparse_packed(x);
        return;
    }
    if (m->dtype != IR_DT_UINT1) { /* uint8 (packed) is the ios16/17 form's */
        ERR("argument 'mask' must be uint1, not %s", ir_dtype_name(m->dtype));
        return;
    }
    if (!sparse_pair(x, "nonzero_data", "mask")) return;
    set_out(x, 0, type_of(x, "nonzero_data")->dtype, m->rank, m->dims);
}

/* conv_transpose: x [N, Cin, *d], weight [Cin, Cout/groups, *k]; each spatial
 * dim grows to s*(d-1) + dilated k (valid), s*d (same), minus the pads
 * (custom); or output_shape when given. */
static void infer_conv_transpose(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *w = type_of(x, "weight"), *b = type_of(x, "bias");
    int64_t st[MAX_RANK], dil[MAX_RANK], pad[MAX_RANK], groups, d[MAX_RANK];
    char s1[256], s2[256];
    if (t->rank < 3 || w->rank != t->rank) {
        ERR("'x' %s must be [N, Cin, *spatial] and 'weight' %s [Cin, Cout/groups, *kernel] of the same rank",
            fmt_dims(t->dims, t->rank, s1, sizeof s1), fmt_dims(w->dims, w->rank, s2, sizeof s2));
        return;
    }
    int ns = t->rank - 2;
    if (!int_of(x, "groups", 1, &groups) || groups < 1) {
        ERR("'groups' must be a positive integer");
        return;
    }
    if (!dims_match(t->dims[1], w->dims[0])) {
        ERR("'x' has %lld input channels but 'weight' %s has %lld", (long long)t->dims[1],
            fmt_dims(w->dims, w->rank, s1, sizeof s1), (long long)w->dims[0]);
        return;
    }
    int64_t cout = dim_known(w->dims[1]) ? sat_mul(w->dims[1], groups) : IR_DIM_DYNAMIC;
    if (b && (b->rank != 1 || !dims_match(b->dims[0], cout))) {
        ERR("'bias' %s must be [%lld]", fmt_dims(b->dims, b->rank, s1, sizeof s1), (long long)cout);
        return;
    }
    if (!spatial_vec(x, "strides", ns, 1, 1, st) || !spatial_vec(x, "dilations", ns, 1, 1, dil) ||
        !spatial_vec(x, "pad", 2 * ns, 0, 0, pad))
        return;
    int n = ints_of(x, "output_shape", d);
    if (arg_of(x, "output_shape")) {
        if (n != t->rank || !dims_match(d[0], t->dims[0]) || !dims_match(d[1], cout)) {
            ERR("'output_shape' must be [N, Cout, *spatial] = [%lld, %lld, ...] with rank %d", (long long)t->dims[0],
                (long long)cout, t->rank);
            return;
        }
        set_out(x, 0, t->dtype, n, d);
        return;
    }
    const IrLiteral *pt = const_of(x, "pad_type");
    const char *mode = pt ? ir_lit_str(pt, 0) : "valid";
    bool same = strcmp(mode, "same") == 0, custom = strcmp(mode, "custom") == 0;
    if (!same && !custom && strcmp(mode, "valid") != 0) {
        ERR("pad_type \"%s\" must be valid, same or custom", mode);
        return;
    }
    if (custom && !arg_of(x, "pad")) {
        ERR("pad_type \"custom\" needs 'pad'");
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    o->dims[1] = cout;
    for (int i = 0; i < ns; i++) {
        int64_t di = t->dims[2 + i], k = w->dims[2 + i];
        if (!dim_known(di) || !dim_known(k)) {
            o->dims[2 + i] = IR_DIM_DYNAMIC;
            continue;
        }
        int64_t ek = sat_add(sat_mul(k - 1, dil[i]), 1);
        int64_t od = same ? sat_mul(st[i], di)
                          : sat_add(sat_mul(st[i], di - 1), ek) - (custom ? pad[2 * i] + pad[2 * i + 1] : 0);
        if (od <= 0) {
            ERR("spatial dim %d has output size %lld", i, (long long)od);
            return;
        }
        o->dims[2 + i] = od;
    }
}

/* read_state: the tensor inside the state. */
static void infer_read_state(OpCtx *x) {
    const IrType *t = type_of(x, "input");
    set_out(x, 0, t->dtype, t->rank, t->dims);
}

/* write_state (no result) and coreml_update_state (the value): the value must
 * have the state's tensor type. */
static void infer_write_state(OpCtx *x) {
    bool update = x->op->kind == OP_COREML_UPDATE_STATE;
    const IrType *st = type_of(x, update ? "state" : "input"), *v = type_of(x, update ? "value" : "data");
    IrType inner = *st;
    inner.state = false;
    if (!ir_type_equal(&inner, v)) {
        char s1[256], s2[256];
        ERR("'%s' %s does not match the state's %s", update ? "value" : "data", fmt_type(v, s1, sizeof s1),
            fmt_type(&inner, s2, sizeof s2));
        return;
    }
    if (update)
        set_out(x, 0, v->dtype, v->rank, v->dims);
    else
        x->nout = 0;
}

/* pad: the last len(pad)/2 dims grow by their (before, after) pads; a
 * run-time pad must give both for every dim (the result dims are then unknown). */
static void infer_pad(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *pt = type_of(x, "pad");
    const IrLiteral *m = const_of(x, "mode");
    const char *mode = m ? ir_lit_str(m, 0) : "constant";
    int64_t p[MAX_RANK];
    if (!rank_at_most(x, "x", t)) return;
    if (strcmp(mode, "constant") != 0 && strcmp(mode, "reflect") != 0 && strcmp(mode, "replicate") != 0) {
        ERR("unknown mode \"%s\" (constant, reflect, replicate)", mode);
        return;
    }
    int n = ints_of(x, "pad", p);
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    if (n < 0) {
        if (dim_known(pt->dims[0]) && pt->dims[0] != 2 * (int64_t)t->rank) {
            ERR("a run-time 'pad' must have %d entries (before and after for each dim of 'x'), not %lld", 2 * t->rank,
                (long long)pt->dims[0]);
            return;
        }
        for (int i = 0; i < t->rank; i++) o->dims[i] = DIM_UNKNOWN;
        return;
    }
    if (n % 2 || n / 2 > t->rank) {
        ERR("'pad' has %d entries: it needs an even count, at most %d (before and after for the last dims of 'x')", n,
            2 * t->rank);
        return;
    }
    for (int i = 0; i < n; i++)
        if (p[i] < 0) {
            ERR("'pad' entry %d is %lld; pads must be non-negative", i, (long long)p[i]);
            return;
        }
    for (int i = 0; i < n / 2; i++) {
        int k = t->rank - n / 2 + i;
        o->dims[k] = dim_known(t->dims[k]) ? sat_add(t->dims[k], p[2 * i] + p[2 * i + 1]) : IR_DIM_DYNAMIC;
    }
}

/* topk: values (and, unless return_indices is false, their indices) with
 * dim axis cut to k. */
static void infer_topk(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t k, axis, a;
    if (!rank_at_most(x, "x", t)) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!int_of(x, "k", 1, &k) || !int_of(x, "axis", -1, &axis) || !norm_axis(x, "axis", axis, t->rank, &a)) return;
    if (k < 1 || (dim_known(t->dims[a]) && k > t->dims[a])) {
        ERR("'k' %lld must be in 1..%lld, the size of axis %lld", (long long)k, (long long)t->dims[a], (long long)a);
        return;
    }
    bool indices = !arg_of(x, "return_indices") || bool_of(x, "return_indices");
    const IrLiteral *l = const_of(x, "output_indices_dtype");
    const char *s = l ? ir_lit_str(l, 0) : "int32";
    if (l && !indices) {
        ERR("'output_indices_dtype' is given but 'return_indices' is false");
        return;
    }
    IrDType idt = IR_DT_INT32;
    if (strcmp(s, "uint16") == 0)
        idt = IR_DT_UINT16;
    else if (strcmp(s, "int32") != 0) {
        ERR("'output_indices_dtype' must be \"int32\" or \"uint16\", not \"%s\"", s);
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    o->dims[a] = k;
    if (indices) set_out(x, 1, idt, t->rank, o->dims);
}

/* gather_nd: indices [*I, D] pick slices x[b..., i_0..i_D-1, ...]: the result
 * is I + x's dims after batch_dims + D. */
static void infer_gather_nd(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *ix = type_of(x, "indices");
    int64_t bd, d[MAX_RANK * 2];
    if (!rank_at_most(x, "x", t) || !rank_at_most(x, "indices", ix)) return;
    if (!int_of(x, "batch_dims", 0, &bd)) return;
    if (ix->rank < 1) {
        ERR("'indices' must have rank >= 1 (its last dim is the index depth)");
        return;
    }
    int64_t depth = ix->dims[ix->rank - 1];
    if (!dim_known(depth)) {
        x->nout = -1;
        return;
    }
    if (bd < 0 || bd >= ix->rank || depth + bd > t->rank) {
        ERR("'indices' depth %lld plus 'batch_dims' %lld must be at most the rank of 'x' (%d), with batch_dims in "
            "0..%d",
            (long long)depth, (long long)bd, t->rank, ix->rank - 1);
        return;
    }
    int n = 0;
    for (int i = 0; i < ix->rank - 1; i++) d[n++] = ix->dims[i];
    for (int i = (int)(bd + depth); i < t->rank; i++) d[n++] = t->dims[i];
    if (n > MAX_RANK) {
        ERR("result rank too large");
        return;
    }
    set_out(x, 0, t->dtype, n, d);
}

/* one_hot: indices' shape with one_hot_vector_size inserted at axis, in
 * on_value's dtype (int32 by default; off_value must match). */
static void infer_one_hot(OpCtx *x) {
    const IrType *ix = type_of(x, "indices"), *on = type_of(x, "on_value"), *off = type_of(x, "off_value");
    int64_t axis, size, d[MAX_RANK];
    if (!rank_at_most(x, "indices", ix) || ix->rank + 1 > MAX_RANK) return;
    IrDType don = on ? on->dtype : IR_DT_INT32, doff = off ? off->dtype : IR_DT_INT32;
    if (don != doff) {
        ERR("'on_value' is %s but 'off_value' is %s; they must have the same dtype (both default to int32)",
            ir_dtype_name(don), ir_dtype_name(doff));
        return;
    }
    if (!int_of(x, "axis", -1, &axis)) return;
    int64_t a = axis < 0 ? axis + ix->rank + 1 : axis; /* the default -1 (a given axis is normalized) */
    if (a < 0 || a > ix->rank) {
        ERR("axis %lld is out of range for rank %d", (long long)axis, ix->rank + 1);
        return;
    }
    size = DIM_UNKNOWN;
    int64_t v[MAX_RANK];
    if (ints_of(x, "one_hot_vector_size", v) == 1) size = v[0];
    if (size != DIM_UNKNOWN && size < 0) {
        ERR("'one_hot_vector_size' %lld is negative", (long long)size);
        return;
    }
    for (int i = 0, k = 0; i <= ix->rank; i++) d[i] = i == a ? size : ix->dims[k++];
    set_out(x, 0, don, ix->rank + 1, d);
}

/* The letters of one einsum term [s, e) as numbers in order of first use
 * across the equation (map); the count, or -1 for a non-letter. */
static int einsum_term(const char *s, const char *e, char *map, int *nmap, int *out) {
    int n = 0;
    for (const char *p = s; p < e; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')) || n >= 8) return -1;
        int k = 0;
        while (k < *nmap && map[k] != *p) k++;
        if (k == *nmap) map[(*nmap)++] = *p;
        out[n++] = k;
    }
    return n;
}

/* einsum: the two batched matmul forms Core ML has, "abc,cbd->abd" (rank 3)
 * and "abcd,adce->abce" (rank 4), letters free. */
static void infer_einsum(OpCtx *x) {
    const IrArg *a = arg_of(x, "values");
    const IrLiteral *l = const_of(x, "equation");
    const char *eq = l ? ir_lit_str(l, 0) : "";
    if (a->nitems != 2) {
        ERR("'values' must hold 2 tensors, not %d", a->nitems);
        return;
    }
    const IrType *t = &a->items[0]->type, *u = &a->items[1]->type;
    char s1[256], s2[256];
    if (t->rank != u->rank || (t->rank != 3 && t->rank != 4)) {
        ERR("'values' %s and %s must both have rank 3 or both rank 4", fmt_dims(t->dims, t->rank, s1, sizeof s1),
            fmt_dims(u->dims, u->rank, s2, sizeof s2));
        return;
    }
    const char *comma = strchr(eq, ','), *arrow = strstr(eq, "->");
    char map[32];
    int nmap = 0, v[3][8], n[3] = {-1, -1, -1};
    if (comma && arrow && comma < arrow) {
        n[0] = einsum_term(eq, comma, map, &nmap, v[0]);
        n[1] = einsum_term(comma + 1, arrow, map, &nmap, v[1]);
        n[2] = einsum_term(arrow + 2, eq + strlen(eq), map, &nmap, v[2]);
    }
    static const int r3[3][4] = {{0, 1, 2}, {2, 1, 3}, {0, 1, 3}},
                     r4[3][4] = {{0, 1, 2, 3}, {0, 3, 2, 4}, {0, 1, 2, 4}};
    bool ok = true;
    for (int k = 0; k < 3; k++) {
        ok = ok && n[k] == t->rank;
        for (int i = 0; ok && i < t->rank; i++) ok = v[k][i] == (t->rank == 3 ? r3 : r4)[k][i];
    }
    if (!ok) {
        ERR("equation \"%s\" is not a form Core ML has for rank %d (%s)", eq, t->rank,
            t->rank == 3 ? "abc,cbd->abd" : "abcd,adce->abce");
        return;
    }
    int r = t->rank;
    int64_t d[4];
    if (!dims_match(t->dims[r - 1], u->dims[r - 3])) {
        ERR("'values' %s and %s: the contracted dims differ (%lld vs %lld)", fmt_dims(t->dims, r, s1, sizeof s1),
            fmt_dims(u->dims, r, s2, sizeof s2), (long long)t->dims[r - 1], (long long)u->dims[r - 3]);
        return;
    }
    for (int i = 0; i < r; i++) d[i] = t->dims[i];
    d[r - 1] = u->dims[r - 1];
    for (int i = r == 4 ? 0 : 1; i < r - 1; i += r == 4 ? 2 : 1) { /* the broadcast batch dims */
        int64_t p = t->dims[i], q = u->dims[i];
        if (dim_known(p) && dim_known(q) && p != q && p != 1 && q != 1) {
            ERR("'values' %s and %s: dim %d does not broadcast (%lld vs %lld)", fmt_dims(t->dims, r, s1, sizeof s1),
                fmt_dims(u->dims, r, s2, sizeof s2), i, (long long)p, (long long)q);
            return;
        }
        d[i] = !dim_known(p) ? p : !dim_known(q) ? q : p > q ? p : q;
    }
    set_out(x, 0, t->dtype, r, d);
}

/* range_1d: ceil((end - start) / step) values when all three are known. */
static void infer_range_1d(OpCtx *x) {
    const IrLiteral *e = const_of(x, "end"), *s = const_of(x, "start"), *st = const_of(x, "step");
    const IrType *t = type_of(x, "start");
    int64_t d = DIM_UNKNOWN;
    if (e && s && st) {
        double step = ir_lit_f64(st, 0), n = ceil((ir_lit_f64(e, 0) - ir_lit_f64(s, 0)) / step);
        if (step == 0) {
            ERR("'step' is 0");
            return;
        }
        if (!(n >= 0 && n < 1e15)) {
            ERR("the range from 'start' to 'end' by 'step' has %g values", n);
            return;
        }
        d = (int64_t)n;
    }
    set_out(x, 0, t->dtype, 1, &d);
}

/* fill_like: ref_tensor's shape filled with value (fp32 0 by default). */
static void infer_fill_like(OpCtx *x) {
    const IrType *r = type_of(x, "ref_tensor"), *v = type_of(x, "value");
    if (rank_at_most(x, "ref_tensor", r)) set_out(x, 0, v ? v->dtype : IR_DT_FP32, r->rank, r->dims);
}

/* The constant scalar integer held by tuple item i of argument name. */
static bool tuple_int(OpCtx *x, const char *name, int i, int64_t *out) {
    const IrArg *a = arg_of(x, name);
    const IrLiteral *l = i < a->nitems ? ir_value_const(a->items[i]) : NULL;
    if (!l || l->kind != IR_LIT_DATA || l->type.rank != 0) {
        ERR("'%s' item %d must be a const scalar", name, i);
        return false;
    }
    ir_lit_to_i64(l, out, 1);
    return true;
}

/* reshape_like: x reshaped to the concatenation of ref_tensors[i]'s dims
 * [begins[i]:ends[i]] (or [begins[i]:] with end_masks[i]), all known. */
static void infer_reshape_like(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    const IrArg *refs = arg_of(x, "ref_tensors");
    int n = refs->nitems;
    int64_t d[MAX_RANK];
    int r = 0;
    if (!rank_at_most(x, "x", t)) return;
    if (arg_of(x, "begins")->nitems != n || arg_of(x, "ends")->nitems != n || arg_of(x, "end_masks")->nitems != n) {
        ERR("'ref_tensors', 'begins', 'ends' and 'end_masks' must have the same length (%d, %d, %d, %d)", n,
            arg_of(x, "begins")->nitems, arg_of(x, "ends")->nitems, arg_of(x, "end_masks")->nitems);
        return;
    }
    for (int i = 0; i < n; i++) {
        const IrType *rt = &refs->items[i]->type;
        if (rt->list) { /* 'any' lets a list through; only a tensor has dims to lend */
            ERR("'ref_tensors' item %d is a list; read a tensor from it with list_read", i);
            return;
        }
        int64_t b, e, m;
        if (!tuple_int(x, "begins", i, &b) || !tuple_int(x, "ends", i, &e) || !tuple_int(x, "end_masks", i, &m)) return;
        int64_t len = rt->rank;
        if (m) e = len;
        b = b < 0 ? (b + len < 0 ? 0 : b + len) : b > len ? len : b;
        e = e < 0 ? (e + len < 0 ? 0 : e + len) : e > len ? len : e;
        for (int64_t k = b; k < e; k++) {
            if (r >= MAX_RANK) {
                ERR("result rank too large");
                return;
            }
            if (!dim_known(rt->dims[k])) {
                ERR("'ref_tensors' item %d has an unknown dim %lld; the result shape must be known", i, (long long)k);
                return;
            }
            d[r++] = rt->dims[k];
        }
    }
    int64_t pin = 1, pout = 1;
    bool known = true;
    for (int i = 0; i < t->rank; i++) known = known && dim_known(t->dims[i]), pin = sat_mul(pin, t->dims[i]);
    for (int i = 0; i < r; i++) pout = sat_mul(pout, d[i]);
    if (known && pin != pout) {
        char s1[256], s2[256];
        ERR("cannot reshape %s (%lld elements) to %s (%lld elements)", fmt_dims(t->dims, t->rank, s1, sizeof s1),
            (long long)pin, fmt_dims(d, r, s2, sizeof s2), (long long)pout);
        return;
    }
    set_out(x, 0, t->dtype, r, d);
}

/* non_zero: [count, rank of x] int32 coordinates; count known for a const x. */
static void infer_non_zero(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    const IrLiteral *l = const_of(x, "x");
    int64_t d[2] = {DIM_UNKNOWN, t->rank};
    if (l) {
        d[0] = 0;
        for (size_t i = 0; i < l->count; i++) d[0] += ir_lit_f64(l, i) != 0;
    }
    set_out(x, 0, IR_DT_INT32, 2, d);
}

/* pixel_shuffle [N, C, H, W] -> [N, C/f^2, H*f, W*f]; pixel_unshuffle the reverse. */
static void infer_pixel_shuffle(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    bool up = x->op->kind == OP_PIXEL_SHUFFLE;
    const char *fname = up ? "upscale_factor" : "downscale_factor";
    int64_t f;
    if (t->rank != 4) {
        ERR("'x' must be [N, C, H, W], not rank %d", t->rank);
        return;
    }
    if (!int_of(x, fname, 1, &f) || f < 1 || f > 65536) {
        ERR("'%s' must be a positive integer", fname);
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, 4, t->dims);
    int64_t ff = f * f;
    if (up) {
        if (dim_known(t->dims[1]) && t->dims[1] % ff) {
            ERR("channels (%lld) are not divisible by '%s'^2 %lld", (long long)t->dims[1], fname, (long long)ff);
            return;
        }
        o->dims[1] = dim_known(t->dims[1]) ? t->dims[1] / ff : IR_DIM_DYNAMIC;
        for (int i = 2; i < 4; i++) o->dims[i] = dim_known(t->dims[i]) ? sat_mul(t->dims[i], f) : IR_DIM_DYNAMIC;
    } else {
        for (int i = 2; i < 4; i++)
            if (dim_known(t->dims[i]) && t->dims[i] % f) {
                ERR("dim %d (%lld) is not divisible by '%s' %lld", i, (long long)t->dims[i], fname, (long long)f);
                return;
            }
        o->dims[1] = dim_known(t->dims[1]) ? sat_mul(t->dims[1], ff) : IR_DIM_DYNAMIC;
        for (int i = 2; i < 4; i++) o->dims[i] = dim_known(t->dims[i]) ? t->dims[i] / f : IR_DIM_DYNAMIC;
    }
}

/* sliding_windows: dim axis becomes the window count (d - size) / stride + 1
 * and a dim of size follows it. */
static void infer_sliding_windows(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t axis, a, size, stride, d[MAX_RANK];
    if (!rank_at_most(x, "x", t) || t->rank + 1 > MAX_RANK) return;
    if (t->rank == 0) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!int_of(x, "axis", 0, &axis) || !norm_axis(x, "axis", axis, t->rank, &a)) return;
    if (!int_of(x, "size", 1, &size) || !int_of(x, "stride", 1, &stride)) return;
    if (size < 1 || stride < 1 || (dim_known(t->dims[a]) && size > t->dims[a])) {
        ERR("'size' %lld must be in 1..%lld (dim %lld of 'x') and 'stride' %lld positive", (long long)size,
            (long long)t->dims[a], (long long)a, (long long)stride);
        return;
    }
    for (int i = 0, k = 0; i < t->rank; i++) {
        d[k++] = i != a ? t->dims[i] : dim_known(t->dims[i]) ? (t->dims[i] - size) / stride + 1 : IR_DIM_DYNAMIC;
        if (i == a) d[k++] = size;
    }
    set_out(x, 0, t->dtype, t->rank + 1, d);
}

/* reverse_sequence: x's type; both axes inside x. */
static void infer_reverse_sequence(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t s, b, a;
    if (!int_of(x, "seq_axis", 0, &s) || !int_of(x, "batch_axis", 0, &b)) return;
    if (!norm_axis(x, "seq_axis", s, t->rank, &a) || !norm_axis(x, "batch_axis", b, t->rank, &a)) return;
    infer_same(x);
}

/* space_to_batch [N, C, H, W] -> [N*bh*bw, C, (H+pads)/bh, (W+pads)/bw];
 * batch_to_space the reverse, cropping after. */
static void infer_space_to_batch(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    bool down = x->op->kind == OP_SPACE_TO_BATCH;
    const char *pname = down ? "paddings" : "crops";
    const IrType *pt = type_of(x, pname);
    int64_t bs[MAX_RANK], p[MAX_RANK];
    if (t->rank != 4) {
        ERR("'x' must be [N, C, H, W], not rank %d", t->rank);
        return;
    }
    if (ints_of(x, "block_shape", bs) != 2 || pt->rank != 2 || pt->dims[0] != 2 || pt->dims[1] != 2 ||
        ints_of(x, pname, p) != 4) {
        ERR("'block_shape' must have 2 entries and '%s' shape [2, 2]", pname);
        return;
    }
    for (int i = 0; i < 2; i++)
        if (bs[i] < 1 || p[2 * i] < 0 || p[2 * i + 1] < 0) {
            ERR("'block_shape' entries must be positive and '%s' non-negative", pname);
            return;
        }
    IrType *o = set_out(x, 0, t->dtype, 4, t->dims);
    int64_t prod = sat_mul(bs[0], bs[1]);
    if (down) {
        o->dims[0] = dim_known(t->dims[0]) ? sat_mul(t->dims[0], prod) : IR_DIM_DYNAMIC;
        for (int i = 0; i < 2; i++) {
            int64_t d = t->dims[2 + i];
            if (!dim_known(d)) {
                o->dims[2 + i] = IR_DIM_DYNAMIC;
                continue;
            }
            d = sat_add(d, p[2 * i] + p[2 * i + 1]);
            if (d % bs[i]) {
                ERR("padded dim %d (%lld) is not divisible by 'block_shape' entry %lld", 2 + i, (long long)d,
                    (long long)bs[i]);
                return;
            }
            o->dims[2 + i] = d / bs[i];
        }
    } else {
        if (dim_known(t->dims[0]) && t->dims[0] % prod) {
            ERR("batch (%lld) is not divisible by the product of 'block_shape' (%lld)", (long long)t->dims[0],
                (long long)prod);
            return;
        }
        o->dims[0] = dim_known(t->dims[0]) ? t->dims[0] / prod : IR_DIM_DYNAMIC;
        for (int i = 0; i < 2; i++) {
            int64_t d = t->dims[2 + i];
            if (!dim_known(d)) {
                o->dims[2 + i] = IR_DIM_DYNAMIC;
                continue;
            }
            d = sat_mul(d, bs[i]) - p[2 * i] - p[2 * i + 1];
            if (d < 0) {
                ERR("'crops' remove more than dim %d holds", 2 + i);
                return;
            }
            o->dims[2 + i] = d;
        }
    }
}

/* crop: the last two dims lose crop_height = [top, bottom] and crop_width = [left, right]. */
static void infer_crop(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t c[2][MAX_RANK];
    const char *names[] = {"crop_height", "crop_width"};
    if (!rank_at_most(x, "x", t)) return;
    if (t->rank < 3) {
        ERR("'x' must have rank >= 3, not %d", t->rank);
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    for (int k = 0; k < 2; k++) {
        if (ints_of(x, names[k], c[k]) != 2) {
            ERR("'%s' must have 2 entries", names[k]);
            return;
        }
        int64_t d = t->dims[t->rank - 2 + k];
        if (c[k][0] < 0 || c[k][1] < 0 || (dim_known(d) && c[k][0] + c[k][1] > d)) {
            ERR("'%s' [%lld, %lld] must be non-negative and leave some of the dim (%lld)", names[k], (long long)c[k][0],
                (long long)c[k][1], (long long)d);
            return;
        }
        o->dims[t->rank - 2 + k] = dim_known(d) ? d - c[k][0] - c[k][1] : IR_DIM_DYNAMIC;
    }
}

/* resize_nearest_neighbor, resize_bilinear: the last two dims set to the target sizes. */
static void infer_resize(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t h, w;
    if (!rank_at_most(x, "x", t)) return;
    if (t->rank < 3) {
        ERR("'x' must have rank >= 3, not %d", t->rank);
        return;
    }
    if (x->op->kind == OP_RESIZE_BILINEAR) {
        const IrLiteral *l = const_of(x, "sampling_mode");
        const char *m = l ? ir_lit_str(l, 0) : "DEFAULT";
        static const char *const modes[] = {"STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT",
                                            "OFFSET_CORNERS"};
        bool known = false;
        for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) known |= strcmp(m, modes[i]) == 0;
        if (!known) {
            ERR("unknown sampling_mode \"%s\" (STRICT_ALIGN_CORNERS, ALIGN_CORNERS, UNALIGN_CORNERS, DEFAULT, "
                "OFFSET_CORNERS)",
                m);
            return;
        }
    }
    if (!int_of(x, "target_size_height", 1, &h) || !int_of(x, "target_size_width", 1, &w)) return;
    if (h < 1 || w < 1) {
        ERR("the target sizes must be positive, not %lld x %lld", (long long)h, (long long)w);
        return;
    }
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    o->dims[t->rank - 2] = h;
    o->dims[t->rank - 1] = w;
}

/* rnn, gru, lstm: x [seq, batch, input]; weight_hh [k*H, H] with k = 1, 3, 4
 * gates; results [seq or 1, batch, d*H] and the last state [batch, d*H]
 * (lstm: and the cell state), d = 2 for a bidirectional lstm. */
static void infer_recurrent(OpCtx *x) {
    const IrType *t = type_of(x, "x"), *wi = type_of(x, "weight_ih"), *wh = type_of(x, "weight_hh");
    bool lstm = x->op->kind == OP_LSTM;
    int gates = lstm ? 4 : x->op->kind == OP_GRU ? 3 : 1;
    const IrLiteral *dl = const_of(x, "direction");
    const char *dir = dl ? ir_lit_str(dl, 0) : "forward";
    char s1[256], s2[256];
    if (t->rank != 3) {
        ERR("'x' must be [seq, batch, input], not rank %d", t->rank);
        return;
    }
    if (wi->rank != 2 || wh->rank != 2) {
        ERR("'weight_ih' and 'weight_hh' must have rank 2");
        return;
    }
    bool bi = strcmp(dir, "bidirectional") == 0;
    if (strcmp(dir, "forward") != 0 && strcmp(dir, "reverse") != 0 && !(lstm && bi)) {
        ERR("direction \"%s\" must be forward or reverse%s", dir, lstm ? " or bidirectional" : "");
        return;
    }
    if (bi && (!arg_of(x, "weight_ih_back") || !arg_of(x, "weight_hh_back"))) {
        ERR("a bidirectional lstm needs 'weight_ih_back' and 'weight_hh_back'");
        return;
    }
    const char *acts[] = {"activation", "recurrent_activation", "cell_activation"};
    for (int k = 0; lstm && k < 3; k++) {
        const IrLiteral *l = const_of(x, acts[k]);
        const char *a = l ? ir_lit_str(l, 0) : "tanh";
        static const char *const ok[] = {"tanh", "scaled_tanh", "sigmoid", "hard_sigmoid", "relu", "linear"};
        bool known = false;
        for (int i = 0; i < 6; i++) known |= strcasecmp(a, ok[i]) == 0;
        if (!known) {
            ERR("'%s' \"%s\" is not one of tanh, scaled_tanh, sigmoid, hard_sigmoid, relu, linear", acts[k], a);
            return;
        }
    }
    int64_t h = x->op->kind == OP_RNN ? wi->dims[0] : wh->dims[1];
    bool gated = x->op->kind != OP_RNN;
    if (dim_known(h) && (h <= 0 || (gated && dim_known(wh->dims[0]) && wh->dims[0] != gates * h) ||
                         (gated && dim_known(wi->dims[0]) && wi->dims[0] != gates * h))) {
        ERR("'weight_ih' %s and 'weight_hh' %s must be [%d*H, input] and [%d*H, H]",
            fmt_dims(wi->dims, 2, s1, sizeof s1), fmt_dims(wh->dims, 2, s2, sizeof s2), gates, gates);
        return;
    }
    int64_t hd = dim_known(h) ? h * (bi ? 2 : 1) : IR_DIM_DYNAMIC;
    int64_t seq[3] = {bool_of(x, "output_sequence") ? t->dims[0] : 1, t->dims[1], hd}, st[2] = {t->dims[1], hd};
    set_out(x, 0, t->dtype, 3, seq);
    set_out(x, 1, t->dtype, 2, st);
    if (lstm) set_out(x, 2, t->dtype, 2, st);
}

/* random_categorical: x's dims but the last, which becomes size. */
static void infer_random_categorical(OpCtx *x) {
    const IrType *t = type_of(x, "x");
    int64_t size, d[MAX_RANK];
    if (!rank_at_most(x, "x", t)) return;
    if (t->rank < 1) {
        ERR("'x' must have rank >= 1");
        return;
    }
    if (!int_of(x, "size", 1, &size) || size < 1) {
        ERR("'size' must be a positive integer");
        return;
    }
    memcpy(d, t->dims, sizeof(int64_t) * (size_t)t->rank);
    d[t->rank - 1] = size;
    set_out(x, 0, t->dtype, t->rank, d);
}

/* cond: two blocks without inputs (true, false branch) whose outputs agree;
 * the results have their types. */
static bool block_types_equal(const IrType *a, const IrType *b) {
    if (a->dtype != b->dtype || a->rank != b->rank || a->state != b->state || a->list != b->list) return false;
    if (a->list && !dims_match(a->list_len, b->list_len)) return false;
    for (int i = 0; i < a->rank; i++)
        if (!dims_match(a->dims[i], b->dims[i])) return false;
    return true;
}

static void infer_cond(OpCtx *x) {
    IrOp *op = x->op;
    char s1[256], s2[256];
    if (op->nblocks != 2 || op->blocks[0]->ninputs || op->blocks[1]->ninputs) {
        ERR("needs two blocks without inputs (the true and the false branch), not %d", op->nblocks);
        return;
    }
    IrBlock *t = op->blocks[0], *f = op->blocks[1];
    if (t->noutputs != f->noutputs) {
        ERR("the branches give %d and %d outputs; they must give the same", t->noutputs, f->noutputs);
        return;
    }
    for (int i = 0; i < t->noutputs; i++) {
        const IrType *a = &t->outputs[i]->type, *b = &f->outputs[i]->type;
        if (!block_types_equal(a, b)) {
            ERR("output %d is %s in the true branch but %s in the false branch", i, fmt_type(a, s1, sizeof s1),
                fmt_type(b, s2, sizeof s2));
            return;
        }
        set_out_as(x, i, a);
    }
    if (t->noutputs == 0) x->nout = 0;
}

/* while_loop: a condition block and a body block, each taking the loop
 * variables; the condition gives one bool, the body the loop variables'
 * new values (same types); the results are the final loop variables. */
static void infer_while_loop(OpCtx *x) {
    IrOp *op = x->op;
    const IrArg *lv = arg_of(x, "loop_vars");
    char s1[256], s2[256];
    if (op->nblocks != 2) {
        ERR("needs two blocks (condition, body), not %d", op->nblocks);
        return;
    }
    if (lv->nitems < 1) {
        ERR("'loop_vars' is empty");
        return;
    }
    for (int k = 0; k < 2; k++) {
        IrBlock *b = op->blocks[k];
        const char *what = k ? "body" : "condition";
        if (b->ninputs != lv->nitems) {
            ERR("the %s block takes %d inputs but there are %d loop variables", what, b->ninputs, lv->nitems);
            return;
        }
        for (int i = 0; i < b->ninputs; i++)
            if (!block_types_equal(&b->inputs[i]->type, &lv->items[i]->type)) {
                ERR("the %s block's input '%s' is %s but loop variable '%s' is %s", what, b->inputs[i]->name,
                    fmt_type(&b->inputs[i]->type, s1, sizeof s1), lv->items[i]->name,
                    fmt_type(&lv->items[i]->type, s2, sizeof s2));
                return;
            }
    }
    IrBlock *c = op->blocks[0], *body = op->blocks[1];
    if (c->noutputs != 1 || c->outputs[0]->type.dtype != IR_DT_BOOL || c->outputs[0]->type.rank != 0) {
        ERR("the condition block must give one bool scalar");
        return;
    }
    if (body->noutputs != lv->nitems) {
        ERR("the body gives %d outputs but there are %d loop variables", body->noutputs, lv->nitems);
        return;
    }
    for (int i = 0; i < lv->nitems; i++) {
        const IrType *a = &lv->items[i]->type, *b = &body->outputs[i]->type;
        if (!block_types_equal(a, b)) {
            ERR("the body's output %d is %s but loop variable '%s' is %s", i, fmt_type(b, s1, sizeof s1),
                lv->items[i]->name, fmt_type(a, s2, sizeof s2));
            return;
        }
        set_out_as(x, i, a);
    }
}

/* A const string argument, or dflt when absent. */
static const char *str_of(const OpCtx *x, const char *name, const char *dflt) {
    const IrLiteral *l = const_of(x, name);
    const char *v = l ? ir_lit_str(l, 0) : NULL;
    return v ? v : dflt;
}

/* Whether string argument name is one of the NULL-terminated modes
 * (case-insensitively when nocase), reporting the choices when not. */
static bool mode_ok(OpCtx *x, const char *name, const char *dflt, const char *const *modes, bool nocase) {
    const char *v = str_of(x, name, dflt);
    char list[256] = "";
    for (int i = 0; modes[i]; i++) {
        if (nocase ? strcasecmp(v, modes[i]) == 0 : strcmp(v, modes[i]) == 0) return true;
        size_t n = strlen(list);
        snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", modes[i]);
    }
    ERR("unknown %s \"%s\" (%s)", name, v, list);
    return false;
}

static const char *const SAMPLING_MODES[] = {
    "STRICT_ALIGN_CORNERS", "ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT", "OFFSET_CORNERS", NULL};

/* resize (ios17): the last resized_dims dims of x become the last
 * resized_dims entries of shape (0 keeps x's dim); shape has at most rank(x)
 * entries.  A run-time shape leaves those dims unknown. */
static void infer_resize_nd(OpCtx *x) {
    static const char *const interp[] = {"LINEAR", "NEAREST_NEIGHBOR", NULL};
    const IrType *t = type_of(x, "x"), *sh = type_of(x, "shape");
    int64_t n, v[MAX_RANK];
    if (!rank_at_most(x, "x", t) || !int_of(x, "resized_dims", 0, &n)) return;
    int nv = ints_of(x, "shape", v);
    int64_t len = nv >= 0 ? nv : sh->dims[0];
    if (dim_known(len) && n > len) {
        ERR("'resized_dims' %lld is more than the %lld entries of 'shape'", (long long)n, (long long)len);
        return;
    }
    if (dim_known(len) && len > t->rank) {
        ERR("'shape' has %lld entries but 'x' has rank %d", (long long)len, t->rank);
        return;
    }
    if (n > t->rank) {
        ERR("'resized_dims' %lld is more than the rank of 'x' (%d)", (long long)n, t->rank);
        return;
    }
    if (!mode_ok(x, "interpolation_mode", "LINEAR", interp, false) ||
        !mode_ok(x, "sampling_mode", "DEFAULT", SAMPLING_MODES, false))
        return;
    IrType *o = set_out(x, 0, t->dtype, t->rank, t->dims);
    for (int64_t i = 0; i < n; i++) {
        int64_t at = t->rank - n + i;
        if (nv < 0) {
            o->dims[at] = IR_DIM_DYNAMIC;
            continue;
        }
        int64_t want = v[nv - n + i];
        if (want < 0) {
            ERR("'shape' entry %lld is negative", (long long)want);
            return;
        }
        if (want) o->dims[at] = want;
    }
}

/* affine (ios15): x [N, C, H, W] sampled through transform_matrix [*, 6]
 * into [N, C, output_height, output_width]; Core ML defines only bilinear
 * sampling, constant zero padding and normalized [-1, 1] coordinates. */
static void infer_affine(OpCtx *x) {
    static const char *const bilinear[] = {"bilinear", NULL}, *const constant[] = {"constant", NULL},
                             *const coords[] = {"normalized_minus_one_to_one", NULL};
    const IrType *t = type_of(x, "x"), *m = type_of(x, "transform_matrix");
    int64_t h, w;
    double pv = 0;
    if (t->rank != 4) {
        ERR("'x' must be [N, C, H, W] (rank 4), not rank %d", t->rank);
        return;
    }
    if (m->rank != 2) {
        ERR("'transform_matrix' must be [N, 6] (rank 2), not rank %d", m->rank);
        return;
    }
    if (!mode_ok(x, "sampling_mode", "", bilinear, true) || !mode_ok(x, "coordinates_mode", "", coords, true) ||
        !mode_ok(x, "padding_mode", "", constant, true))
        return;
    const IrLiteral *l = const_of(x, "padding_value");
    if (l) pv = ir_lit_f64(l, 0);
    if (pv != 0) {
        ERR("'padding_value' must be 0 (the only padding Core ML defines), not %g", pv);
        return;
    }
    if (dim_known(m->dims[1]) && m->dims[1] != 6) {
        ERR("'transform_matrix' rows must have 6 entries [a0, a1, a2, b0, b1, b2], not %lld", (long long)m->dims[1]);
        return;
    }
    if (!int_of(x, "output_height", 1, &h) || !int_of(x, "output_width", 1, &w)) return;
    if (h < 1 || w < 1) {
        ERR("the output size must be positive, not %lld x %lld", (long long)h, (long long)w);
        return;
    }
    int64_t d[4] = {t->dims[0], t->dims[1], h, w};
    set_out(x, 0, t->dtype, 4, d);
}

/* resample (ios15): x [N, C, H, W] sampled at coordinates [N, h, w, 2] into
 * [N, C, h, w]. */
static void infer_resample(OpCtx *x) {
    static const char *const sampling[] = {"bilinear", "nearest", NULL},
                             *const padding[] = {"constant", "border", "reflection", "symmetric", NULL},
                             *const coords[] = {"unnormalized", "normalized_minus_one_to_one", "normalized_zero_to_one",
                                                NULL};
    const IrType *t = type_of(x, "x"), *c = type_of(x, "coordinates");
    if (t->rank != 4) {
        ERR("'x' must be [N, C, H, W] (rank 4), not rank %d", t->rank);
        return;
    }
    if (c->rank != 4) {
        ERR("'coordinates' must be [N, H_out, W_out, 2] (rank 4), not rank %d", c->rank);
        return;
    }
    if (!dims_match(t->dims[0], c->dims[0])) {
        ERR("'x' has batch %lld but 'coordinates' %lld", (long long)t->dims[0], (long long)c->dims[0]);
        return;
    }
    if (dim_known(c->dims[3]) && c->dims[3] != 2) {
        ERR("'coordinates' last dim must be 2 (x, y), not %lld", (long long)c->dims[3]);
        return;
    }
    if (!mode_ok(x, "sampling_mode", "", sampling, true) || !mode_ok(x, "padding_mode", "", padding, true) ||
        !mode_ok(x, "coordinates_mode", "", coords, true))
        return;
    int64_t d[4] = {t->dims[0], t->dims[1], c->dims[1], c->dims[2]};
    set_out(x, 0, t->dtype, 4, d);
}

/* crop_resize: x [B, C, H, W]; boxes cut and resized to target_height x
 * target_width.  ios15/16: roi [N, B, 4 or 5, 1, 1] gives [N, B, C, h, w];
 * ios17: boxes [N, 4] with box_indices [N] into x's batch (default 0..N-1)
 * gives [N, C, h, w]. */
static void infer_crop_resize(OpCtx *x) {
    static const char *const boxes_modes[] = {"CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST",
                                              "CENTER_SIZE_WIDTH_FIRST", NULL};
    const IrType *t = type_of(x, "x");
    int64_t h, w;
    bool v17 = !x->op->fn || x->op->fn->opset_version == 0 || x->op->fn->opset_version >= 17;
    if (t->rank != 4) {
        ERR("'x' must be [B, C, H, W] (rank 4), not rank %d", t->rank);
        return;
    }
    if (!int_of(x, "target_height", 1, &h) || !int_of(x, "target_width", 1, &w)) return;
    if (!v17) {
        const IrType *r = type_of(x, "roi");
        if (r->rank != 5) {
            ERR("'roi' must be [N, B, 4 or 5, 1, 1] (rank 5), not rank %d", r->rank);
            return;
        }
        if (!mode_ok(x, "box_coordinate_mode", "CORNERS_HEIGHT_FIRST", boxes_modes, false) ||
            !mode_ok(x, "sampling_mode", "DEFAULT", SAMPLING_MODES, false))
            return;
        int64_t d[5] = {r->dims[0], t->dims[0], t->dims[1], h, w};
        set_out(x, 0, t->dtype, 5, d);
        return;
    }
    const IrType *b = type_of(x, "boxes"), *bi = type_of(x, "box_indices");
    if (b->rank != 2 || (dim_known(b->dims[1]) && b->dims[1] != 4)) {
        ERR("'boxes' must be [N, 4]");
        return;
    }
    int64_t n = b->dims[0];
    if (!bi && dim_known(n) && dim_known(t->dims[0]) && n > t->dims[0]) {
        ERR("%lld boxes but 'x' has batch %lld: give 'box_indices' (the default 0..N-1 leaves x)", (long long)n,
            (long long)t->dims[0]);
        return;
    }
    if (bi && (bi->rank != 1 || !dims_match(bi->dims[0], n))) {
        ERR("'box_indices' must be [%lld], one per box", (long long)n);
        return;
    }
    const IrLiteral *il = bi ? const_of(x, "box_indices") : NULL;
    for (size_t i = 0; il && dim_known(t->dims[0]) && i < il->count; i++)
        if (ir_lit_i64(il, i) >= t->dims[0]) {
            ERR("'box_indices' entry %lld is past the batch of 'x' (%lld)", (long long)ir_lit_i64(il, i),
                (long long)t->dims[0]);
            return;
        }
    if (!mode_ok(x, "box_coordinate_mode", "CORNERS_HEIGHT_FIRST", boxes_modes, false) ||
        !mode_ok(x, "sampling_mode", "DEFAULT", SAMPLING_MODES, false))
        return;
    if (bool_of(x, "normalized_coordinates") && !ir_dtype_is_float(b->dtype)) {
        ERR("normalized_coordinates needs fp16 or fp32 'boxes', not %s", ir_dtype_name(b->dtype));
        return;
    }
    int64_t d[4] = {n, t->dims[1], h, w};
    set_out(x, 0, t->dtype, 4, d);
}

/* non_maximum_suppression: scores [B, N, K] (ios17: [B, K, N]) keep at most
 * max_boxes boxes per batch.  ios15/16: boxes [B, max, 4], scores [B, max, K],
 * indices [B, max], counts [B]; ios17: boxes [B, 4, max], scores [B, K, max],
 * indices [B, max]. */
static void infer_nms(OpCtx *x) {
    const IrType *b = type_of(x, "boxes"), *sc = type_of(x, "scores");
    bool v17 = !x->op->fn || x->op->fn->opset_version == 0 || x->op->fn->opset_version >= 17;
    int64_t m;
    if (sc->rank != 3) {
        ERR("'scores' must have rank 3, not %d", sc->rank);
        return;
    }
    if (b->rank != 3) {
        ERR("'boxes' must have rank 3, not %d", b->rank);
        return;
    }
    if (!int_of(x, "max_boxes", 1, &m)) return;
    if (m < 1) {
        ERR("'max_boxes' must be positive, not %lld", (long long)m);
        return;
    }
    int64_t bt = sc->dims[0], k = sc->dims[v17 ? 1 : 2];
    if (v17) {
        set_out(x, 0, b->dtype, 3, (int64_t[]){bt, 4, m});
        set_out(x, 1, sc->dtype, 3, (int64_t[]){bt, k, m});
        set_out(x, 2, IR_DT_INT32, 2, (int64_t[]){bt, m});
        return;
    }
    set_out(x, 0, b->dtype, 3, (int64_t[]){bt, m, 4});
    set_out(x, 1, sc->dtype, 3, (int64_t[]){bt, m, k});
    set_out(x, 2, IR_DT_INT32, 2, (int64_t[]){bt, m});
    set_out(x, 3, IR_DT_INT32, 1, (int64_t[]){bt});
}

/* make_list: a list of dtype tensors shaped elem_shape (a tuple of const
 * ints; a string item is a dimension known only at run time).  Its length is
 * init_length when dynamic_length is false, else unknown (the list grows). */
static void infer_make_list(OpCtx *x) {
    const IrArg *es = arg_of(x, "elem_shape");
    const char *dts = str_of(x, "dtype", "fp32");
    IrDType dt;
    int64_t d[MAX_RANK], len;
    if (!ir_dtype_from_name(dts, strlen(dts), &dt) || dt == IR_DT_STRING) {
        ERR("unknown element 'dtype' \"%s\"", dts);
        return;
    }
    if (es->nitems > MAX_RANK) {
        ERR("'elem_shape' has %d items; milc supports rank %d", es->nitems, MAX_RANK);
        return;
    }
    for (int i = 0; i < es->nitems; i++) {
        const IrLiteral *l = ir_value_const(es->items[i]);
        if (!l || l->kind != IR_LIT_DATA || l->count != 1 ||
            (l->type.dtype != IR_DT_INT32 && l->type.dtype != IR_DT_STRING)) {
            ERR("'elem_shape' item '%s' must be an int32 or string scalar const", es->items[i]->name);
            return;
        }
        d[i] = l->type.dtype == IR_DT_STRING ? IR_DIM_DYNAMIC : ir_lit_i64(l, 0);
        if (l->type.dtype != IR_DT_STRING && d[i] < 0) {
            ERR("'elem_shape' item '%s' is negative (%lld)", es->items[i]->name, (long long)d[i]);
            return;
        }
    }
    len = 1;
    if (arg_of(x, "init_length") && !const_of(x, "init_length"))
        len = IR_DIM_DYNAMIC; /* known at run time */
    else if (!int_of(x, "init_length", 1, &len))
        return;
    else if (len < 0) {
        ERR("'init_length' must be >= 0, not %lld", (long long)len);
        return;
    }
    bool dynamic = !arg_of(x, "dynamic_length") || bool_of(x, "dynamic_length");
    IrType *o = set_out(x, 0, dt, es->nitems, d);
    o->list = true;
    o->list_len = dynamic ? IR_DIM_DYNAMIC : len;
}

/* Whether tensor type v fits a list's element type el (a '?' in either fits any dim). */
static bool fits_elem(const IrType *v, const int64_t *vdims, int vrank, const IrType *el) {
    if (v->dtype != el->dtype || vrank != el->rank) return false;
    for (int i = 0; i < vrank; i++)
        if (!dims_match(vdims[i], el->dims[i])) return false;
    return true;
}

/* list_length (int32), list_read (an element), list_gather ([len(indices),
 * *element]), list_write and list_scatter (the list, after value, or each
 * value[i] of scatter, is checked against the element type). */
static void infer_list_op(OpCtx *x) {
    const IrType *ls = type_of(x, "ls");
    char s1[256], s2[256];
    IrType el = *ls;
    el.list = false;
    IrOpKind k = x->op->kind;
    if (k == OP_LIST_LENGTH) {
        set_out(x, 0, IR_DT_INT32, 0, NULL);
        return;
    }
    if (k == OP_LIST_READ) {
        set_out(x, 0, el.dtype, el.rank, el.dims);
        return;
    }
    if (k == OP_LIST_GATHER) {
        int64_t d[MAX_RANK];
        if (el.rank + 1 > MAX_RANK) {
            ERR("the list's elements have rank %d; milc supports %d", el.rank, MAX_RANK - 1);
            return;
        }
        d[0] = type_of(x, "indices")->dims[0];
        if (el.rank) memcpy(d + 1, el.dims, sizeof(int64_t) * (size_t)el.rank);
        set_out(x, 0, el.dtype, el.rank + 1, d);
        return;
    }
    const IrType *v = type_of(x, "value");
    bool scatter = k == OP_LIST_SCATTER;
    if (scatter) {
        int64_t n = type_of(x, "indices")->dims[0];
        if (v->rank < 1 || !dims_match(v->dims[0], n)) {
            ERR("'value' %s must hold one element per index (%lld)", fmt_dims(v->dims, v->rank, s1, sizeof s1),
                (long long)n);
            return;
        }
    }
    if (!fits_elem(v, v->dims + scatter, v->rank - scatter, &el)) {
        ERR("'value' %s%s does not fit the list's element type %s", scatter ? "element of " : "",
            fmt_type(v, s1, sizeof s1), fmt_type(&el, s2, sizeof s2));
        return;
    }
    IrType *o = set_out(x, 0, el.dtype, el.rank, el.dims);
    o->list = true;
    o->list_len = ls->list_len;
}

typedef void (*InferFn)(OpCtx *);
static const InferFn infer_fns[] = {
#define X(e, n, sig, rule) infer_##rule,
    MILC_OPS(X)
#undef X
};
_Static_assert(sizeof infer_fns / sizeof *infer_fns == OP_COUNT, "a shape rule per op");

/* ---- signature checks ---- */

/* "fp16 or fp32", "fp16, fp32 or int32": the dtypes a domain mask allows. */
static const char *domain_text(unsigned m, char *buf, size_t size) {
    int n = 0, total = __builtin_popcount(m);
    buf[0] = 0;
    if (!m) return "a numeric or bool dtype";
    for (int d = 0; d < IR_DT_COUNT; d++) {
        if (!(m & 1u << d)) continue;
        size_t len = strlen(buf);
        snprintf(buf + len, size - len, "%s%s",
                 n == 0           ? ""
                 : n == total - 1 ? " or "
                                  : ", ",
                 ir_dtype_name((IrDType)d));
        n++;
    }
    return buf;
}

static bool domain_allows(unsigned m, IrDType dt) {
    if (!m) return dt != IR_DT_STRING; /* no op of the table takes string tensors as data */
    return (m & 1u << dt) != 0;
}

/* The domain of spec s in the opset of x's function (ios18 when unknown). */
static unsigned domain_of(const OpCtx *x, const MilArgSpec *s) {
    int v = x->op->fn ? x->op->fn->opset_version : 0;
    return s->domain[v >= 15 && v <= 18 ? v - 15 : 3];
}

/* A const, or the result of a constexpr_* op (a compressed weight is
 * decompressed at load: Core ML takes it wherever a const is required). */
static bool value_is_const(const IrValue *v) {
    if (!v->def) return false;
    switch (v->def->kind) {
    case OP_CONST:
    case OP_CONSTEXPR_AFFINE_DEQUANTIZE:
    case OP_CONSTEXPR_CAST:
    case OP_CONSTEXPR_BLOCKWISE_SHIFT_SCALE:
    case OP_CONSTEXPR_LUT_TO_DENSE:
    case OP_CONSTEXPR_SPARSE_TO_DENSE:
    case OP_CONSTEXPR_LUT_TO_SPARSE:
    case OP_CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE: return true;
    default: return false;
    }
}

/* A literal, a const value, or a tuple of const values (make_list's elem_shape). */
static bool arg_is_const(const IrArg *a) {
    if (a->kind == IR_ARG_LITERAL) return true;
    if (a->kind == IR_ARG_VALUE) return value_is_const(a->value);
    for (int i = 0; i < a->nitems; i++)
        if (!value_is_const(a->items[i])) return false;
    return true;
}

/* Check one argument's dtype and rank against its spec and group.  first[g]
 * is the first argument seen of group g (its dtype rules the group). */
static void check_arg_type(OpCtx *x, const MilArgSpec *s, const IrArg *a, const IrType *t, const char *what,
                           const IrArg **first, const IrType **first_t) {
    char tb[256];
    if (s->list != t->list && !(s->any && t->list)) {
        op_error(x, a->loc,
                 s->list ? "argument '%s' must be a list (make one with make_list), not %s"
                         : "argument '%s' cannot be a list (%s); read it with list_read or list_gather",
                 what, fmt_type(t, tb, sizeof tb));
        return;
    }
    if (s->list) return;
    if (s->state != t->state) {
        op_error(x, a->loc,
                 s->state ? "argument '%s' must be a state (state<tensor<...>>), not %s"
                          : "argument '%s' cannot be a state (%s); read it with read_state",
                 what, fmt_type(t, tb, sizeof tb));
        return;
    }
    if (s->dtype >= 0 && t->dtype != (IrDType)s->dtype) {
        op_error(x, a->loc, "argument '%s' must be %s, not %s", what, ir_dtype_name((IrDType)s->dtype),
                 ir_dtype_name(t->dtype));
        return;
    }
    if (s->group) {
        int opset = x->op->fn ? x->op->fn->opset_version : 0;
        int g = (s->old_group && opset && opset < s->old_until ? s->old_group : s->group) - 'A';
        unsigned dom = domain_of(x, s);
        if (!domain_allows(dom, t->dtype)) {
            char db[160];
            op_error(x, a->loc, "argument '%s' must be %s, not %s", what, domain_text(dom, db, sizeof db),
                     ir_dtype_name(t->dtype));
            return;
        }
        if (!first[g]) {
            first[g] = a;
            first_t[g] = t;
        } else if (first_t[g]->dtype != t->dtype) {
            op_error(x, a->loc, "argument '%s' is %s but '%s' is %s; they must have the same dtype", what,
                     ir_dtype_name(t->dtype), first[g]->name, ir_dtype_name(first_t[g]->dtype));
            return;
        }
    }
    if (s->rank >= 0 && t->rank != s->rank)
        op_error(x, a->loc, "argument '%s' must be %s, not %s", what, s->rank == 0 ? "a scalar" : "rank 1",
                 fmt_type(t, tb, sizeof tb));
}

static void check_op(Checker *c, IrOp *op) {
    OpCtx x = {0};
    x.c = c;
    x.op = op;
    x.ok = true;
    x.opname = mil_op_name(op->kind);
    x.nspecs = mil_op_args(op->kind, x.specs, MIL_MAX_OP_ARGS);
    int opset = op->fn ? op->fn->opset_version : 0;
    if (opset && opset < mil_op_since(op->kind)) {
        op_error(&x, op->loc, "needs opset ios%d or later; function '%s' is %s", mil_op_since(op->kind), op->fn->name,
                 op->fn->opset);
        return;
    }
    for (int i = 0; i < op->nargs; i++) {
        IrArg *a = &op->args[i];
        int k = -1;
        for (int j = 0; j < x.nspecs; j++)
            if (strcmp(x.specs[j].name, a->name) == 0) k = j;
        if (k < 0) {
            op_error(&x, a->loc, "unknown argument '%s'", a->name);
            continue;
        }
        if (opset && opset < x.specs[k].since) {
            op_error(&x, a->loc, "argument '%s' needs opset ios%d or later; function '%s' is %s", a->name,
                     x.specs[k].since, op->fn->name, op->fn->opset);
            continue;
        }
        if (opset && x.specs[k].until && opset >= x.specs[k].until) {
            op_error(&x, a->loc, "argument '%s' exists only before opset ios%d; function '%s' is %s", a->name,
                     x.specs[k].until, op->fn->name, op->fn->opset);
            continue;
        }
        if (x.args[k]) {
            op_error(&x, a->loc, "duplicate argument '%s'", a->name);
            continue;
        }
        x.args[k] = a;
        if (a->kind == IR_ARG_LITERAL && a->lit->kind == IR_LIT_BLOBFILE) check_blobfile(c, a->lit);
        if (a->kind == IR_ARG_LITERAL && a->lit->kind == IR_LIT_DICT) {
            op_error(&x, a->loc, "argument '%s' cannot be a dict", a->name);
            x.args[k] = NULL;
        }
    }
    for (int k = 0; k < x.nspecs; k++)
        if (!x.args[k] && !x.specs[k].optional &&
            !(opset && (opset < x.specs[k].since || (x.specs[k].until && opset >= x.specs[k].until))))
            op_error(&x, op->loc, "missing argument '%s'", x.specs[k].name);
    if (op->kind == OP_CONST) {
        for (int i = 0; i < op->nattrs; i++)
            if (strcmp(op->attrs[i].name, "val") != 0)
                op_error(&x, op->attrs[i].loc, "unknown attribute '%s'", op->attrs[i].name);
    } else {
        for (int i = 0; i < op->nattrs; i++)
            op_error(&x, op->attrs[i].loc, "unknown attribute '%s'", op->attrs[i].name);
    }
    const IrArg *first[26] = {0};
    const IrType *first_t[26] = {0};
    for (int k = 0; k < x.nspecs; k++) {
        const MilArgSpec *s = &x.specs[k];
        const IrArg *a = x.args[k];
        if (!a) continue;
        if (s->tuple != (a->kind == IR_ARG_TUPLE)) {
            op_error(&x, a->loc,
                     s->tuple ? "argument '%s' must be a tuple (a, b, ...)" : "argument '%s' cannot be a tuple",
                     a->name);
            continue;
        }
        if (s->is_const && !arg_is_const(a)) {
            const char *what = a->kind == IR_ARG_VALUE ? a->value->name : "?";
            for (int j = 0; a->kind == IR_ARG_TUPLE && j < a->nitems; j++)
                if (!value_is_const(a->items[j])) {
                    what = a->items[j]->name;
                    break;
                }
            op_error(&x, a->loc, "argument '%s' must be a const, but '%s' is computed at run time", a->name, what);
            continue;
        }
        if (a->kind == IR_ARG_TUPLE) {
            for (int j = 0; j < a->nitems; j++) {
                char what[96];
                snprintf(what, sizeof what, "%s' item '%s", a->name, a->items[j]->name);
                check_arg_type(&x, s, a, &a->items[j]->type, what, first, first_t);
            }
        } else {
            check_arg_type(&x, s, a, a->kind == IR_ARG_VALUE ? &a->value->type : &a->lit->type, a->name, first,
                           first_t);
        }
    }
    if (op->nblocks && op->kind != OP_COND && op->kind != OP_WHILE_LOOP)
        op_error(&x, op->loc, "takes no nested blocks (only cond and while_loop do)");
    if (!x.ok) return;
    infer_fns[op->kind](&x);
    if (!x.ok || x.nout < 0) return;
    if (x.nout != op->nresults) {
        op_error(&x, op->loc, "gives %d result%s but %d %s declared", x.nout, x.nout == 1 ? "" : "s", op->nresults,
                 op->nresults == 1 ? "is" : "are");
        return;
    }
    for (int i = 0; i < x.nout; i++) {
        const IrType *want = &op->results[i]->type, *got = &x.out[i];
        bool ok = want->dtype == got->dtype && want->rank == got->rank && want->list == got->list &&
                  (!want->list || dims_match(want->list_len, got->list_len));
        bool refine = false;
        for (int k = 0; ok && k < want->rank; k++) {
            ok = dims_match(want->dims[k], got->dims[k]);
            refine |= !dim_known(want->dims[k]) && dim_known(got->dims[k]);
        }
        if (!ok) {
            char s1[512], s2[512];
            op_error(&x, op->results[i]->loc, "'%s' is declared %s but the op gives %s", op->results[i]->name,
                     fmt_type(want, s1, sizeof s1), fmt_type(got, s2, sizeof s2));
        } else if (refine && !want->list) { /* a declared '?' the inference knows: the size, as coremltools infers it */
            int64_t dims[16];
            for (int k = 0; k < want->rank && k < 16; k++) dims[k] = dim_known(want->dims[k]) ? want->dims[k] : got->dims[k];
            bool state = want->state;
            op->results[i]->type = ir_type_make(c->p->arena, want->dtype, want->rank, dims);
            op->results[i]->type.state = state;
        }
    }
}

/* ---- BLOBFILE ---- */

static int blob_dtype(IrDType t) {
    switch (t) {
    case IR_DT_FP16: return MILBLOB_FP16;
    case IR_DT_FP32: return MILBLOB_FP32;
    case IR_DT_UINT8: return MILBLOB_UINT8;
    case IR_DT_INT8: return MILBLOB_INT8;
    case IR_DT_INT16: return MILBLOB_INT16;
    case IR_DT_UINT16: return MILBLOB_UINT16;
    case IR_DT_INT4: return MILBLOB_INT4;
    case IR_DT_UINT1: return MILBLOB_UINT1;
    case IR_DT_UINT2: return MILBLOB_UINT2;
    case IR_DT_UINT3: return MILBLOB_UINT3;
    case IR_DT_UINT4: return MILBLOB_UINT4;
    case IR_DT_UINT6: return MILBLOB_UINT6;
    case IR_DT_INT32: return MILBLOB_INT32;
    case IR_DT_UINT32: return MILBLOB_UINT32;
    default: return -1;
    }
}

static BlobEntry *blob_get(Checker *c, const char *path) {
    for (int i = 0; i < c->nblobs; i++)
        if (strcmp(c->blobs[i].path, path) == 0) return &c->blobs[i];
    c->blobs = realloc(c->blobs, sizeof(BlobEntry) * (size_t)(c->nblobs + 1));
    MILC_ASSERT(c->blobs != NULL);
    BlobEntry *e = &c->blobs[c->nblobs++];
    memset(e, 0, sizeof *e);
    e->path = strdup(path);
    MILC_ASSERT(e->path != NULL);
    /* The reader's own error (naming file and byte offset) is kept and
     * reported at each BLOBFILE that needs the file. */
    DiagSink tmp;
    diag_init(&tmp);
    /* Only the layout is checked: the records, not gigabytes of data
     * (a causal mask grows with the square of --seq). */
    e->ok = c->weights ? true : milblob_open_records(&e->file, path, &tmp) == 0;
    if (!e->ok) {
        e->error = strdup(tmp.count ? tmp.items[0].msg : "cannot read");
        MILC_ASSERT(e->error != NULL);
    }
    diag_free(&tmp);
    return e;
}

static void check_blobfile(Checker *c, const IrLiteral *l) {
    char tb[256];
    int64_t numel = ir_type_numel(&l->type);
    int bdt = blob_dtype(l->type.dtype);
    if (bdt < 0) {
        diag_error(c->d, l->loc, "BLOBFILE: %s has no MILBlob dtype", ir_dtype_name(l->type.dtype));
        return;
    }
    if (numel < 0) {
        diag_error(c->d, l->loc, "BLOBFILE: %s has a dynamic dimension", fmt_type(&l->type, tb, sizeof tb));
        return;
    }
    if ((uint64_t)numel > UINT64_MAX / 64) {
        diag_error(c->d, l->loc, "BLOBFILE: %s is too large", fmt_type(&l->type, tb, sizeof tb));
        return;
    }
    uint64_t need = ((uint64_t)numel * ir_dtype_bits(l->type.dtype) + 7) / 8;
    c->weight_bytes += need;
    /* Weights live inside the model dir, as in a compiled model: a program
     * text cannot make the checker open an arbitrary file (or a FIFO). */
    char path[4096];
    const char *why;
    if (mil_blob_path(c->model_dir, l->blob_path, path, sizeof path, &why) != 0) {
        diag_error(c->d, l->loc, "BLOBFILE path \"%s\" %s", l->blob_path, why);
        return;
    }
    BlobEntry *e = blob_get(c, path);
    if (!e->ok) {
        diag_error(c->d, l->loc, "BLOBFILE '%s': %s", l->blob_path, e->error);
        return;
    }
    const MilBlobRecord *r = milblob_find(c->weights ? c->weights : &e->file, l->blob_offset);
    if (!r) {
        diag_error(c->d, l->loc, "BLOBFILE: no blob record at offset %llu in '%s'", (unsigned long long)l->blob_offset,
                   l->blob_path);
        return;
    }
    if ((int)r->dtype != bdt) {
        const char *dname = milblob_dtype_name(r->dtype);
        diag_error(c->d, l->loc, "BLOBFILE: the record at offset %llu holds %s but the tensor type is %s",
                   (unsigned long long)l->blob_offset, dname ? dname : "an unknown dtype",
                   ir_dtype_name(l->type.dtype));
        return;
    }
    if (r->size != need)
        diag_error(c->d, l->loc, "BLOBFILE: the record at offset %llu holds %llu bytes but %s needs %llu",
                   (unsigned long long)l->blob_offset, (unsigned long long)r->size, fmt_type(&l->type, tb, sizeof tb),
                   (unsigned long long)need);
}

/* ---- ANE path limits ---- */

enum { ANE_MAX_RANK = 5, ANE_MAX_DIM = 65536 };

static void ane_check_type(Checker *c, SrcLoc loc, const char *name, const IrType *t) {
    char tb[256];
    if (t->rank > ANE_MAX_RANK) {
        diag_error(c->d, loc, "ane: '%s' has rank %d; the ANE path allows at most %d", name, t->rank, ANE_MAX_RANK);
        return;
    }
    for (int i = 0; i < t->rank; i++) {
        if (t->dims[i] < 0) {
            diag_error(c->d, loc, "ane: '%s' %s has a dynamic dimension", name, fmt_type(t, tb, sizeof tb));
            return;
        }
        if (t->dims[i] > ANE_MAX_DIM) {
            diag_error(c->d, loc, "ane: '%s' %s has a dimension above %d", name, fmt_type(t, tb, sizeof tb),
                       ANE_MAX_DIM);
            return;
        }
    }
}

static void ane_check_io(Checker *c, IrValue **vals, const SrcLoc *locs, int n, const char *what) {
    char tb[256];
    int64_t size0 = -1;
    for (int i = 0; i < n; i++) {
        const IrType *t = &vals[i]->type;
        SrcLoc loc = locs ? locs[i] : vals[i]->loc;
        if (t->dtype != IR_DT_FP16 || t->rank != 4 || t->dims[0] != 1 || t->dims[2] != 1 || t->dims[3] < 16 ||
            t->dims[3] % 16 != 0) {
            diag_error(c->d, loc,
                       "ane: %s '%s' is %s; the ANE path needs fp16 [1, C, 1, S] with S a multiple of 16 and >= 16",
                       what, vals[i]->name, fmt_type(t, tb, sizeof tb));
            continue;
        }
        int64_t size = ir_type_numel(t);
        if (size0 < 0)
            size0 = size;
        else if (size != size0)
            diag_error(c->d, loc,
                       "ane: %s '%s' has %lld elements but '%s' has %lld; ANE %ss need equal allocation sizes", what,
                       vals[i]->name, (long long)size, vals[0]->name, (long long)size0, what);
        if (i > 0 && strcmp(vals[i - 1]->name, vals[i]->name) > 0)
            diag_warn(c->d, loc, "ane: %ss bind in alphabetical order of name, not declaration order ('%s' after '%s')",
                      what, vals[i]->name, vals[i - 1]->name);
    }
}

static void ane_check_op(Checker *c, const IrOp *op) {
    const char *name = mil_op_name(op->kind);
    for (int i = 0; i < op->nresults; i++)
        ane_check_type(c, op->results[i]->loc, op->results[i]->name, &op->results[i]->type);
    switch (op->kind) {
    case OP_CONV:
        if (ir_op_arg(op, "bias"))
            diag_error(c->d, ir_op_arg(op, "bias")->loc,
                       "ane: conv with 'bias' fails on the ANE path; add the bias separately");
        break;
    case OP_GELU:
        if (!ir_op_arg(op, "mode")) diag_error(c->d, op->loc, "ane: give gelu its 'mode' on the ANE path");
        break;
    case OP_CONCAT:
        if (!ir_op_arg(op, "interleave"))
            diag_error(c->d, op->loc, "ane: give concat its 'interleave' on the ANE path");
        break;
    case OP_SCALED_DOT_PRODUCT_ATTENTION:
        if (ir_op_arg(op, "attn_mask"))
            diag_error(c->d, ir_op_arg(op, "attn_mask")->loc,
                       "ane: the ANE path ignores the attn_mask of %s; decompose attention (matmul, scale, add mask, "
                       "softmax, matmul)",
                       name);
        break;
    case OP_MATMUL: {
        IrArg *a = ir_op_arg(op, "x"), *b = ir_op_arg(op, "y");
        if (!a || !b || a->kind != IR_ARG_VALUE || b->kind != IR_ARG_VALUE) break;
        if (ir_value_const(a->value) && ir_value_const(b->value)) break;
        const IrType *t = &a->value->type;
        int64_t tx = 0;
        ir_op_arg_i64(op, "transpose_x", &tx);
        int64_t inner = t->rank >= 2 && tx ? t->dims[t->rank - 2] : t->rank ? t->dims[t->rank - 1] : 1;
        if (inner >= 0 && inner % 32 != 0)
            diag_error(c->d, op->loc,
                       "ane: matmul with a runtime operand needs an inner dimension that is a multiple of 32, not %lld",
                       (long long)inner);
        break;
    }
    default: break;
    }
}

static void ane_check(Checker *c) {
    for (int f = 0; f < c->p->nfuncs; f++) {
        IrFunction *fn = c->p->funcs[f];
        ane_check_io(c, fn->inputs, NULL, fn->ninputs, "input");
        ane_check_io(c, fn->outputs, fn->output_locs, fn->noutputs, "output");
        IR_FOR_EACH_OP(op, fn) ane_check_op(c, op);
    }
    SrcLoc ploc = {c->p->file, 0, 0}; /* the program as a whole */
    double gb = (double)c->weight_bytes / (1 << 30);
    if (c->weight_bytes > (UINT64_C(2) << 30))
        diag_error(c->d, ploc, "ane: %.2f GiB of weights; the ANE path takes about 2 GiB per program at most", gb);
    else if (c->weight_bytes > (UINT64_C(1) << 30))
        diag_warn(c->d, ploc, "ane: %.2f GiB of weights; chunks under 1 GiB are the safe choice", gb);
}

/* ---- SSA verification (passes may break what the parser guaranteed) ---- */

typedef struct ValueSet {
    const void **slots;
    size_t cap, n;
} ValueSet;

static size_t ptr_hash(const void *p) { return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull); }

/* Insert; false if already present. */
static bool set_add(ValueSet *s, const void *p) {
    if ((s->n + 1) * 2 > s->cap) {
        ValueSet g = {calloc(s->cap ? s->cap * 2 : 256, sizeof(void *)), s->cap ? s->cap * 2 : 256, 0};
        MILC_ASSERT(g.slots != NULL);
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) set_add(&g, s->slots[i]);
        free(s->slots);
        *s = g;
    }
    size_t i = ptr_hash(p) & (s->cap - 1);
    while (s->slots[i]) {
        if (s->slots[i] == p) return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->slots[i] = p;
    s->n++;
    return true;
}

static bool set_has(const ValueSet *s, const void *p) {
    if (!s->cap) return false;
    size_t i = ptr_hash(p) & (s->cap - 1);
    while (s->slots[i]) {
        if (s->slots[i] == p) return true;
        i = (i + 1) & (s->cap - 1);
    }
    return false;
}

static void verify_use(Checker *c, const ValueSet *defined, const IrValue *v, SrcLoc loc) {
    if (!set_has(defined, v)) diag_error(c->d, loc, "'%s' is used before its definition", v->name);
}

/* Every value defined once and before its uses; every output defined. */
/* Values of block b are seen from block from: b is from or encloses it. */
static bool block_visible(const IrBlock *from, const IrBlock *b) {
    for (const IrBlock *k = from; k; k = k->parent->block)
        if (k == b) return true;
    return b == NULL;
}

static void verify_use_in(Checker *c, const ValueSet *defined, const IrValue *v, SrcLoc loc, const IrBlock *in) {
    if (set_has(defined, v) && !block_visible(in, v->block))
        diag_error(c->d, loc, "'%s' is defined inside a nested block and is not visible here", v->name);
    else
        verify_use(c, defined, v, loc);
}

/* Ops of one list (in block in, NULL at function level), nested blocks
 * included: every use defined before it and visible from it. */
static void verify_ops(Checker *c, ValueSet *defined, IrOp *first, const IrBlock *in) {
    for (IrOp *op = first; op; op = op->next) {
        for (int i = 0; i < op->nargs; i++) {
            IrArg *a = &op->args[i];
            if (a->kind == IR_ARG_VALUE)
                verify_use_in(c, defined, a->value, a->loc, in);
            else if (a->kind == IR_ARG_TUPLE)
                for (int j = 0; j < a->nitems; j++) verify_use_in(c, defined, a->items[j], a->loc, in);
        }
        for (int b = 0; b < op->nblocks; b++) {
            IrBlock *bl = op->blocks[b];
            for (int i = 0; i < bl->ninputs; i++)
                if (!set_add(defined, bl->inputs[i]))
                    diag_error(c->d, bl->inputs[i]->loc, "'%s' is defined twice", bl->inputs[i]->name);
            verify_ops(c, defined, bl->first, bl);
            for (int i = 0; i < bl->noutputs; i++) verify_use_in(c, defined, bl->outputs[i], bl->output_locs[i], bl);
        }
        for (int i = 0; i < op->nresults; i++)
            if (!set_add(defined, op->results[i]))
                diag_error(c->d, op->results[i]->loc, "'%s' is defined twice", op->results[i]->name);
    }
}

static void verify_function(Checker *c, IrFunction *fn) {
    ValueSet defined = {0};
    for (int i = 0; i < fn->ninputs; i++) {
        set_add(&defined, fn->inputs[i]);
        if (!mil_is_identifier(fn->inputs[i]->name))
            diag_error(c->d, fn->inputs[i]->loc, "input name '%s' of function '%s' is not an identifier",
                       fn->inputs[i]->name, fn->name);
        if (fn->inputs[i]->type.list)
            diag_error(c->d, fn->inputs[i]->loc,
                       "input '%s' of function '%s' is a list; functions take tensors and states", fn->inputs[i]->name,
                       fn->name);
    }
    for (int i = 0; i < fn->noutputs; i++) {
        if (!mil_is_identifier(fn->outputs[i]->name))
            diag_error(c->d, fn->output_locs[i], "output name '%s' of function '%s' is not an identifier",
                       fn->outputs[i]->name, fn->name);
        if (fn->outputs[i]->type.list)
            diag_error(c->d, fn->output_locs[i], "output '%s' of function '%s' is a list; give a tensor (list_gather)",
                       fn->outputs[i]->name, fn->name);
    }
    verify_ops(c, &defined, fn->first, NULL);
    for (int i = 0; i < fn->noutputs; i++)
        if (!set_has(&defined, fn->outputs[i]) || fn->outputs[i]->block)
            diag_error(c->d, fn->output_locs[i], "output '%s' is not defined in function '%s'", fn->outputs[i]->name,
                       fn->name);
    free(defined.slots);
}

/* ---- driver ---- */

static char *dir_of(const char *file) {
    const char *slash = file ? strrchr(file, '/') : NULL;
    if (!slash) return strdup(".");
    if (slash == file) return strdup("/");
    return strndup(file, (size_t)(slash - file));
}

/* Every op of a list, then the ops of its nested blocks. */
static void check_ops(Checker *c, IrOp *first) {
    for (IrOp *op = first; op && !c->d->truncated; op = op->next) {
        check_op(c, op);
        for (int b = 0; b < op->nblocks; b++) check_ops(c, op->blocks[b]->first);
    }
}

bool mil_check(IrProgram *p, const MilCheckOptions *o, DiagSink *d) {
    int errors0 = d->errors;
    Checker c = {0};
    c.d = d;
    c.p = p;
    c.target = o ? o->target : MIL_TARGET_CPU;
    c.model_dir = o && o->model_path ? strdup(o->model_path) : dir_of(p->file);
    c.weights = o ? o->weights : NULL;
    MILC_ASSERT(c.model_dir != NULL);
    for (int f = 0; f < p->nfuncs; f++) {
        IrFunction *fn = p->funcs[f];
        verify_function(&c, fn);
        check_ops(&c, fn->first);
    }
    if (c.target == MIL_TARGET_ANE && !d->truncated) ane_check(&c);
    for (int i = 0; i < c.nblobs; i++) {
        if (c.blobs[i].ok) milblob_close(&c.blobs[i].file);
        free(c.blobs[i].path);
        free(c.blobs[i].error);
    }
    free(c.blobs);
    free(c.model_dir);
    return d->errors == errors0;
}

int mil_blob_path(const char *model_dir, const char *blob_path, char *out, size_t outlen, const char **why) {
    static const char prefix[] = "@model_path/";
    size_t plen = sizeof prefix - 1;
    const char *rel = blob_path + plen;
    *why = "must be @model_path/ followed by a path inside the model";
    if (strncmp(blob_path, prefix, plen) != 0 || !*rel || rel[0] == '/') return -1;
    for (const char *p = rel; *p;) { /* no ".." component */
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return -1;
        p += n;
        while (*p == '/') p++;
    }
    if ((size_t)snprintf(out, outlen, "%s/%s", model_dir, rel) >= outlen) {
        *why = "is too long";
        return -1;
    }
    /* Symlinks may rearrange a model folder but not leave it. */
    char real_dir[PATH_MAX], real_file[PATH_MAX];
    if (!realpath(model_dir, real_dir) || !realpath(out, real_file)) return 0; /* missing: opening reports it */
    size_t dl = strlen(real_dir);
    if (strncmp(real_file, real_dir, dl) != 0 || (real_file[dl] != '/' && !(dl == 1 && real_dir[0] == '/'))) {
        *why = "resolves (through a symbolic link) to a file outside the model directory";
        return -1;
    }
    return 0;
}
