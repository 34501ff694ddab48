/* lower.c — lowering a checked (and, for the bonded program, fused) MIL
 * function to plan ops.  Every value maps to a strided view of a plan buffer;
 * in the bonded program reshape/transpose/slice/split only change the view
 * and a copy is emitted when a kernel needs a dense buffer, in the non-bonded
 * one every op is its own plan op and every intermediate is materialized. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "milc/assert.h"
#include "milc/blob.h"
#include "milc/half.h"

enum { MAXR = RT_MAX_RANK };
/* Why a value without elements (a dimension of 0) stops the lowering. */
#define NO_ELEMENTS "has no elements (a dimension of 0), and the CPU backend plans no empty buffers"

/* A strided window on a buffer, in elements. */
typedef struct View {
    int buf;
    int rank;
    int64_t dims[MAXR], strides[MAXR], offset;
} View;

/* What a value is in the program being lowered.  When pend is set the value
 * is v's elements in row-major order, shaped pdims (a reshape the strides of
 * v cannot express; resolved by a copy when needed). */
typedef struct LVal {
    bool has;
    View v;
    bool pend;
    int prank;
    int64_t pdims[MAXR];
} LVal;

typedef struct BufInfo {
    int rank;
    int64_t dims[MAXR];
    bool f16; /* an fp16 input read in place: ops other than attention need a converting copy */
} BufInfo;

typedef struct BlobOpen {
    char *path;
    MilBlobFile file;
    bool ok;
} BlobOpen;

struct LowerShared {
    RtPlanBuilder *b;
    IrFunction *f;
    DiagSink *d;
    const char *model_dir;
    const MilBlobFile *weights; /* BackendOptions.weights */
    int nvals;
    IrValue **vals;     /* id -> value */
    int *weight;        /* id -> weight buffer of a const (its own dims), -1 */
    int *weight2d;      /* id -> the const as a GEMM W [N, K], -1 */
    int *input_buf;     /* id -> input buffer, -1 */
    int *out_buf;       /* output index -> its temp */
    IrValue **reshaped; /* id -> the reshape that is the value's only use, or NULL */
    bool *out_done;     /* output index -> written by the current program */
    BufInfo *bi;
    int nbi, capbi;
    /* states (plan_states): per value id, a state input's last write (the
     * op position; an in-place slice_update's own), -1 for none; whether a
     * slice_update result is written into its state in place */
    int *wpos;
    bool *su_in_place;
    int opi; /* position of the op being lowered */
    BlobOpen blobs[8];
    int nblobs;
    /* per program */
    LVal *lv;
    const FuseTable *fuse;
    bool views;
    IrOp *cur; /* the op being lowered, for diagnostics */
    int nops, ncopies;
    bool failed;
};

static int vid(const IrValue *v) { return (int)(intptr_t)v->aux - 1; }

static bool fail_at(LowerShared *s, SrcLoc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail_at(LowerShared *s, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(s->d, DIAG_ERROR, loc, fmt, ap);
    va_end(ap);
    s->failed = true;
    return false;
}
static int fail_int(bool unused) {
    (void)unused;
    return -1;
}
#define FAIL(...) fail_int(fail_at(s, s->cur ? s->cur->loc : s->f->loc, __VA_ARGS__))

static RtDType rt_dt(IrDType t) {
    if (ir_dtype_is_float(t)) return RT_F32;
    if (t == IR_DT_BOOL) return RT_BOOL;
    if (ir_dtype_is_int(t)) return RT_I32;
    return 0;
}

static void note_buf(LowerShared *s, int id, int rank, const int64_t *dims) {
    if (id < 0) return;
    if (id >= s->capbi) {
        int cap = s->capbi ? s->capbi : 256;
        while (cap <= id) cap *= 2;
        s->bi = realloc(s->bi, sizeof(BufInfo) * (size_t)cap);
        MILC_ASSERT(s->bi);
        s->capbi = cap;
    }
    if (id >= s->nbi) s->nbi = id + 1;
    s->bi[id].rank = rank;
    s->bi[id].f16 = false;
    for (int i = 0; i < rank; i++) s->bi[id].dims[i] = dims[i];
}

/* Builder calls: a negative result becomes a diagnostic at the current op. */
static int check_rc(LowerShared *s, int rc) {
    if (rc < 0 && !s->failed) FAIL("CPU backend: %s", rtb_error(s->b));
    return rc < 0 ? -1 : rc;
}

static int new_temp(LowerShared *s, RtDType dt, int rank, const int64_t *dims) {
    int id = check_rc(s, rtb_temp(s->b, dt, rank, dims));
    note_buf(s, id, rank, dims);
    return id;
}

static int emit(LowerShared *s, RtOpKind k, const int *in, int nin, int out, const void *p, size_t plen) {
    if (s->failed) return -1;
    for (int i = 0; i < nin; i++)
        if (in[i] < 0) return -1;
    if (out < 0) return -1;
    if (check_rc(s, rtb_op(s->b, k, in, nin, &out, 1, p, plen)) < 0) return -1;
    s->nops++;
    if (k == RT_OP_COPY) s->ncopies++;
    return 0;
}

static void row_major(int rank, const int64_t *dims, int64_t *strides) {
    int64_t st = 1;
    for (int i = rank - 1; i >= 0; i--) strides[i] = st, st *= dims[i];
}

/* memcpy/memcmp of dims arrays that may be NULL at rank 0 */
static void dims_copy(int64_t *dst, const int64_t *src, int rank) {
    for (int i = 0; i < rank; i++) dst[i] = src[i];
}
static bool dims_same(int ra, const int64_t *a, int rb, const int64_t *b) {
    if (ra != rb) return false;
    for (int i = 0; i < ra; i++)
        if (a[i] != b[i]) return false;
    return true;
}

static void view_ident(View *v, int buf, int rank, const int64_t *dims) {
    v->buf = buf;
    v->rank = rank;
    v->offset = 0;
    dims_copy(v->dims, dims, rank);
    row_major(rank, dims, v->strides);
}

static bool view_contiguous(const View *v) {
    int64_t st = 1;
    for (int i = v->rank - 1; i >= 0; i--) {
        if (v->dims[i] != 1 && v->strides[i] != st) return false;
        st *= v->dims[i];
    }
    return true;
}

static int64_t view_numel(const View *v) {
    int64_t n = 1;
    for (int i = 0; i < v->rank; i++) n *= v->dims[i];
    return n;
}

static int64_t buf_numel(const LowerShared *s, int buf) {
    int64_t n = 1;
    for (int i = 0; i < s->bi[buf].rank; i++) n *= s->bi[buf].dims[i];
    return n;
}

/* The view is exactly buffer v->buf, as the buffer's own shape. */
static bool view_is_buffer(const LowerShared *s, const View *v) {
    const BufInfo *b = &s->bi[v->buf];
    if (v->offset || b->rank != v->rank || !view_contiguous(v)) return false;
    for (int i = 0; i < v->rank; i++)
        if (b->dims[i] != v->dims[i]) return false;
    return true;
}

/* Reshape a strided view without copying, if its strides allow (NumPy's rule:
 * each group of old axes merged into new ones must be contiguous). */
static bool view_reshape(const View *in, int rank, const int64_t *dims, View *out) {
    if (rank > MAXR) return false;
    int64_t od[MAXR], os[MAXR];
    int on = 0;
    for (int i = 0; i < in->rank; i++)
        if (in->dims[i] != 1) od[on] = in->dims[i], os[on] = in->strides[i], on++;
    View r = {.buf = in->buf, .rank = rank, .offset = in->offset};
    dims_copy(r.dims, dims, rank);
    int i = 0, j = 0;
    while (j < rank) {
        if (dims[j] == 1) {
            r.strides[j++] = 0;
            continue;
        }
        if (i >= on) return false;
        int i0 = i, j0 = j;
        int64_t po = od[i++], pn = dims[j++];
        while (po != pn) {
            if (po < pn) {
                if (i >= on) return false;
                po *= od[i++];
            } else {
                if (j >= rank) return false;
                pn *= dims[j++];
            }
        }
        for (int k = i0; k + 1 < i; k++)
            if (os[k] != os[k + 1] * od[k + 1]) return false;
        int64_t st = os[i - 1];
        for (int k = j - 1; k >= j0; k--) r.strides[k] = st, st *= dims[k];
    }
    if (i != on) return false;
    *out = r;
    return true;
}

/* ---- weights ---- */

static const MilBlobFile *blob_file(LowerShared *s, const char *written, SrcLoc loc) {
    if (s->weights) return s->weights;
    char path[4096];
    const char *pre = "@model_path";
    if (!strncmp(written, pre, strlen(pre)))
        snprintf(path, sizeof path, "%s%s", s->model_dir, written + strlen(pre));
    else if (written[0] == '/')
        snprintf(path, sizeof path, "%s", written);
    else
        snprintf(path, sizeof path, "%s/%s", s->model_dir, written);
    for (int i = 0; i < s->nblobs; i++)
        if (!strcmp(s->blobs[i].path, path)) return s->blobs[i].ok ? &s->blobs[i].file : NULL;
    if (s->nblobs == 8) {
        fail_at(s, loc, "too many weight files (at most 8)");
        return NULL;
    }
    BlobOpen *b = &s->blobs[s->nblobs++];
    b->path = strdup(path);
    MILC_ASSERT(b->path);
    b->ok = milblob_open(&b->file, path, s->d) == 0;
    if (!b->ok) s->failed = true;
    return b->ok ? &b->file : NULL;
}

/* Is v the result of a constexpr_* op (a compressed constant)? */
static bool backend_is_constexpr(const IrValue *v) {
    if (!v->def) return false;
    switch (v->def->kind) {
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

static float *lut_dense_floats(LowerShared *s, const IrValue *v);
static IrValue *arg_value(const IrOp *op, const char *name);
static double *sparse_pair_values(LowerShared *s, const IrValue *v);

static bool is_sparse_pair(const IrOp *op) {
    return op && (op->kind == OP_CONSTEXPR_LUT_TO_SPARSE || op->kind == OP_CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE);
}

/* ---- the other constexpr_* ops: dense weights built at compile time ---- */

/* The elements of constant v as doubles (malloc'd), from a literal or a
 * blob record of any element type (sub-byte ones packed low bits first),
 * or NULL after a diagnostic. */
static double *const_values(LowerShared *s, const IrValue *v) {
    const IrLiteral *l = ir_value_const(v);
    SrcLoc loc = v->def ? v->def->loc : v->loc;
    int64_t n = ir_type_numel(&v->type);
    if (!l && n >= 0 && is_sparse_pair(v->def)) return sparse_pair_values(s, v);
    if (!l || n < 0) return fail_at(s, loc, "'%s' must be a constant", v->name), NULL;
    double *d = malloc(sizeof(double) * (size_t)(n + 1));
    MILC_ASSERT(d);
    IrDType t = v->type.dtype;
    if (l->kind == IR_LIT_DATA) {
        for (int64_t i = 0; i < n; i++)
            d[i] = ir_dtype_is_float(t) ? ir_lit_f64(l, (size_t)i) : (double)ir_lit_i64(l, (size_t)i);
        return d;
    }
    const MilBlobFile *f = l->kind == IR_LIT_BLOBFILE ? blob_file(s, l->blob_path, loc) : NULL;
    const MilBlobRecord *r = f ? milblob_find(f, l->blob_offset) : NULL;
    unsigned bits = r ? milblob_dtype_bits(r->dtype) : 0;
    if (!r || !bits || r->size * 8 < (uint64_t)n * bits) {
        free(d);
        return f    ? fail_at(s, loc, "'%s': no record of %lld elements at offset %llu", v->name, (long long)n,
                              (unsigned long long)l->blob_offset),
               NULL : NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *p = r->data + (size_t)i * bits / 8;
        switch (r->dtype) {
        case MILBLOB_FP16: {
            uint16_t h;
            memcpy(&h, p, 2);
            d[i] = half_to_float(h);
            break;
        }
        case MILBLOB_FP32: {
            float x;
            memcpy(&x, p, 4);
            d[i] = x;
            break;
        }
        case MILBLOB_INT8: d[i] = (int8_t)*p; break;
        case MILBLOB_UINT8: d[i] = *p; break;
        case MILBLOB_INT16: {
            int16_t x;
            memcpy(&x, p, 2);
            d[i] = x;
            break;
        }
        case MILBLOB_UINT16: {
            uint16_t x;
            memcpy(&x, p, 2);
            d[i] = x;
            break;
        }
        case MILBLOB_INT32: {
            int32_t x;
            memcpy(&x, p, 4);
            d[i] = x;
            break;
        }
        case MILBLOB_UINT32: {
            uint32_t x;
            memcpy(&x, p, 4);
            d[i] = x;
            break;
        }
        default: { /* sub-byte, low bits first; int4 is signed */
            uint64_t bit = (uint64_t)i * bits;
            unsigned raw = r->data[bit / 8] | (bit % 8 + bits > 8 ? (unsigned)r->data[bit / 8 + 1] << 8 : 0u);
            unsigned u = (raw >> (bit % 8)) & ((1u << bits) - 1);
            d[i] = r->dtype == MILBLOB_INT4 && u >= 8 ? (double)u - 16 : (double)u;
        }
        }
    }
    return d;
}

/* Element i of a tensor of shape dims, read from p of shape pd (same rank,
 * each dim 1 or dividing): the block it falls in. */
static int64_t block_index(int rank, const int64_t *dims, const int64_t *pd, int64_t i) {
    int64_t c[MAXR], off = 0;
    for (int d = rank - 1; d >= 0; d--) c[d] = i % dims[d], i /= dims[d];
    for (int d = 0; d < rank; d++) off = off * pd[d] + c[d] / (dims[d] / pd[d]);
    return off;
}

/* A result of ios18's sparse-to-sparse ops, constexpr_lut_to_sparse and
 * constexpr_sparse_blockwise_shift_scale (read by a constexpr_sparse_to_dense):
 * result 0 is the mask, result 1 the nonzero values decompressed, in mask
 * order.  Each value finds its palette or scale block by its place in the
 * dense layout.  A vector palette widens dim vector_axis of both: the value
 * at [.., i·vec + k, ..] is entry k of index i's vector. */
static double *sparse_pair_values(LowerShared *s, const IrValue *v) {
    const IrOp *op = v->def;
    bool lut = op->kind == OP_CONSTEXPR_LUT_TO_SPARSE, want_mask = v == op->results[0];
    const IrValue *mv = arg_value(op, lut ? "indices_mask" : "data_mask"),
                  *nzv = arg_value(op, lut ? "indices_nonzero_data" : "nonzero_data"),
                  *pv = arg_value(op, lut ? "lut" : "scale"), *ov = lut ? NULL : arg_value(op, "offset");
    const IrType *t = &mv->type, *pt = &pv->type;
    int64_t n = ir_type_numel(t), nnz = ir_type_numel(&nzv->type), vec = lut ? pt->dims[pt->rank - 1] : 1;
    int64_t palette = lut ? pt->dims[pt->rank - 2] : 1, axis = 0;
    if (lut) ir_op_arg_i64(op, "vector_axis", &axis);
    if (axis < 0) axis += t->rank;
    double *m = const_values(s, mv), *nz = m ? const_values(s, nzv) : NULL, *p = nz ? const_values(s, pv) : NULL;
    double *off = p && ov ? const_values(s, ov) : NULL, *out = NULL;
    bool ok = p && (!ov || off);
    /* the dense layout's values (indices or quantized), 0 where the mask is clear */
    double *dense = ok ? calloc((size_t)n + 1, sizeof(double)) : NULL;
    int64_t j = 0;
    for (int64_t i = 0; dense && i < n; i++)
        if (m[i] != 0 && j++ < nnz) dense[i] = nz[j - 1];
    if (ok && j != nnz)
        ok = fail_at(s, op->loc, "%s: the mask sets %lld bits for %lld values", mil_op_name(op->kind), (long long)j,
                     (long long)nnz);
    for (int d = 0; ok && d < t->rank; d++)
        if (pt->dims[d] < 1 || t->dims[d] % pt->dims[d])
            ok = fail_at(s, op->loc, "%s: dim %d of '%s' does not divide into its blocks", mil_op_name(op->kind), d,
                         mv->name);
    if (ok) {
        out = malloc(sizeof(double) * (size_t)(n * vec + 1));
        MILC_ASSERT(out);
        int64_t o = 0, c[MAXR];
        for (int64_t e = 0; ok && e < n * vec; e++) { /* the output's elements in order */
            int64_t rest = e, i = 0, k = 0, blk = 0;
            for (int d = t->rank - 1; d >= 0; d--) {
                int64_t dim = t->dims[d] * (d == axis ? vec : 1);
                c[d] = rest % dim, rest /= dim;
                if (d == axis) k = c[d] % vec, c[d] /= vec;
            }
            for (int d = 0; d < t->rank; d++) i = i * t->dims[d] + c[d];
            if (m[i] == 0 && !want_mask) continue;
            if (want_mask) {
                out[o++] = m[i] != 0;
                continue;
            }
            blk = block_index(t->rank, t->dims, pt->dims, i); /* a palette's leading dims are its blocks */
            if (!lut) {
                out[o++] = (dense[i] - (off ? off[blk] : 0)) * p[blk];
                continue;
            }
            int64_t id = (int64_t)dense[i];
            if (id < 0 || id >= palette)
                ok = fail_at(s, op->loc, "constexpr_lut_to_sparse: index %lld is past the palette's %lld entries",
                             (long long)id, (long long)palette);
            else
                out[o++] = p[(blk * palette + id) * vec + k];
        }
    }
    free(m), free(nz), free(p), free(off), free(dense);
    if (!ok) free(out);
    return ok ? out : NULL;
}

/* Is element i set in constexpr_sparse_to_dense's mask b (const_values)?
 * The ios16/17 form (packed) holds the bits in bytes, least significant
 * first; ios18's is a uint1 tensor, an element per bit. */
static bool sparse_mask_set(const double *b, int64_t i, bool packed) {
    return packed ? ((int64_t)b[i / 8] >> (i % 8) & 1) != 0 : b[i] != 0;
}

/* The dense values of a constexpr_* result (malloc'd floats), or NULL. */
static float *constexpr_dense(LowerShared *s, const IrValue *v) {
    const IrOp *op = v->def;
    const IrType *t = &v->type;
    int64_t n = ir_type_numel(t);
    float *out = malloc(sizeof(float) * (size_t)(n + 1));
    MILC_ASSERT(out);
    double *a = NULL, *b = NULL, *c = NULL;
    bool ok = true;
    switch (op->kind) {
    case OP_CONSTEXPR_CAST:
        if ((ok = (a = const_values(s, arg_value(op, "source_val"))) != NULL))
            for (int64_t i = 0; i < n; i++) out[i] = (float)a[i];
        break;
    case OP_CONSTEXPR_AFFINE_DEQUANTIZE: { /* (q - zero_point) · scale, both scalar or along axis */
        IrValue *zp = arg_value(op, "zero_point"), *sc = arg_value(op, "scale");
        int64_t ax = 0;
        ir_op_arg_i64(op, "axis", &ax);
        ok = (a = const_values(s, arg_value(op, "quantized_data"))) && (b = const_values(s, zp)) &&
             (c = const_values(s, sc));
        int64_t inner = 1;
        for (int d = (int)ax + 1; d < t->rank; d++) inner *= t->dims[d];
        for (int64_t i = 0; ok && i < n; i++) {
            int64_t ch = i / inner % t->dims[ax];
            double z = ir_type_numel(&zp->type) == 1 ? b[0] : b[ch], k = ir_type_numel(&sc->type) == 1 ? c[0] : c[ch];
            out[i] = (float)((a[i] - z) * k);
        }
        break;
    }
    case OP_CONSTEXPR_BLOCKWISE_SHIFT_SCALE: { /* (data - offset[block]) · scale[block] */
        IrValue *sc = arg_value(op, "scale"), *of = arg_value(op, "offset");
        ok = (a = const_values(s, arg_value(op, "data"))) && (c = const_values(s, sc)) &&
             (!of || (b = const_values(s, of)));
        for (int64_t i = 0; ok && i < n; i++) {
            int64_t k = block_index(t->rank, t->dims, sc->type.dims, i);
            out[i] = (float)((a[i] - (b ? b[k] : 0)) * c[k]);
        }
        break;
    }
    case OP_CONSTEXPR_LUT_TO_DENSE: { /* ios16/17: lut [2^bits], indices packed in bytes, LSB first */
        ok = (a = const_values(s, arg_value(op, "lut"))) && (b = const_values(s, arg_value(op, "indices")));
        int64_t np = ok ? ir_type_numel(&arg_value(op, "lut")->type) : 0, bits = 0;
        while ((INT64_C(1) << bits) < np) bits++;
        for (int64_t i = 0; ok && i < n; i++) {
            unsigned id = 0;
            for (int64_t k = 0; k < bits; k++)
                id |= (unsigned)((int64_t)b[(i * bits + k) / 8] >> ((i * bits + k) % 8) & 1) << k;
            out[i] = (float)a[id < np ? id : 0];
        }
        break;
    }
    case OP_CONSTEXPR_SPARSE_TO_DENSE: { /* the mask's set bits take nonzero_data in order */
        ok = (a = const_values(s, arg_value(op, "nonzero_data"))) && (b = const_values(s, arg_value(op, "mask")));
        int64_t nz = ok ? ir_type_numel(&arg_value(op, "nonzero_data")->type) : 0, j = 0;
        bool packed = ir_op_arg(op, "shape") != NULL;
        for (int64_t i = 0; ok && i < n; i++) { /* every set bit counts, past the values too */
            bool set = sparse_mask_set(b, i, packed);
            out[i] = set && j < nz ? (float)a[j] : 0.0f;
            j += set;
        }
        if (ok && j != nz)
            ok = fail_at(s, op->loc, "constexpr_sparse_to_dense: the mask sets %lld bits for %lld values", (long long)j,
                         (long long)nz);
        break;
    }
    case OP_CONSTEXPR_LUT_TO_SPARSE:
    case OP_CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE:
        if ((ok = (a = sparse_pair_values(s, v)) != NULL))
            for (int64_t i = 0; i < n; i++) out[i] = (float)a[i];
        break;
    default: ok = fail_at(s, op->loc, "internal: %s is not a constexpr op", mil_op_name(op->kind));
    }
    free(a), free(b), free(c);
    if (!ok) free(out);
    return ok ? out : NULL;
}

/* The data of constant v as an RtDType array (fp16 stays fp16, fp32 stays
 * fp32, integers int32, bool bytes).  Returns malloc'd or borrowed bytes
 * (*owned tells) or NULL after a diagnostic. */
static const void *const_data(LowerShared *s, const IrValue *v, RtDType *dt, bool *owned) {
    const IrLiteral *l = ir_value_const(v);
    SrcLoc loc = v->def ? v->def->loc : v->loc;
    *owned = false;
    if (!l && backend_is_constexpr(v)) { /* decompressed here: a dense fp32 copy */
        *dt = RT_F32, *owned = true;
        return v->def->kind == OP_CONSTEXPR_LUT_TO_DENSE && !ir_op_arg(v->def, "shape") ? lut_dense_floats(s, v)
                                                                                        : constexpr_dense(s, v);
    }
    if (!l) return fail_at(s, loc, "'%s' is not a constant", v->name), NULL;
    int64_t n = ir_type_numel(&v->type);
    if (n < 0) return fail_at(s, loc, "constant '%s' has a dynamic shape", v->name), NULL;
    IrDType t = v->type.dtype;
    if (l->kind == IR_LIT_BLOBFILE) {
        const MilBlobFile *f = blob_file(s, l->blob_path, loc);
        if (!f) return NULL;
        const MilBlobRecord *r = milblob_find(f, l->blob_offset);
        if (!r)
            return fail_at(s, loc, "%s: no weight record at offset %llu", f->name, (unsigned long long)l->blob_offset),
                   NULL;
        uint32_t want = t == IR_DT_FP16    ? MILBLOB_FP16
                        : t == IR_DT_FP32  ? MILBLOB_FP32
                        : t == IR_DT_INT32 ? MILBLOB_INT32
                                           : 0;
        size_t es = t == IR_DT_FP16 ? 2 : 4;
        if (!want)
            return fail_at(s, loc, "weight '%s': dtype %s is not supported by the CPU backend", v->name,
                           ir_dtype_name(t)),
                   NULL;
        if (r->dtype != want || r->size != (uint64_t)n * es)
            return fail_at(s, loc,
                           "weight '%s': the record at offset %llu holds %llu bytes of %s, the type wants %lld %s",
                           v->name, (unsigned long long)l->blob_offset, (unsigned long long)r->size,
                           milblob_dtype_name(r->dtype) ? milblob_dtype_name(r->dtype) : "?", (long long)n,
                           ir_dtype_name(t)),
                   NULL;
        *dt = t == IR_DT_FP16 ? RT_F16 : t == IR_DT_FP32 ? RT_F32 : RT_I32;
        return r->data;
    }
    if (l->kind != IR_LIT_DATA || t == IR_DT_STRING)
        return fail_at(s, loc, "constant '%s' of type %s cannot be a tensor operand", v->name, ir_dtype_name(t)), NULL;
    *owned = true;
    if (t == IR_DT_FP16) {
        uint16_t *p = malloc((size_t)n * 2 + 1);
        MILC_ASSERT(p);
        memcpy(p, l->data.f16, (size_t)n * 2);
        *dt = RT_F16;
        return p;
    }
    if (t == IR_DT_BOOL) {
        uint8_t *p = malloc((size_t)n + 1);
        MILC_ASSERT(p);
        memcpy(p, l->data.b, (size_t)n);
        *dt = RT_BOOL;
        return p;
    }
    if (ir_dtype_is_float(t)) {
        float *p = malloc((size_t)n * 4 + 1);
        MILC_ASSERT(p);
        for (int64_t i = 0; i < n; i++) p[i] = (float)ir_lit_f64(l, (size_t)i);
        *dt = RT_F32;
        return p;
    }
    int32_t *p = malloc((size_t)n * 4 + 1);
    MILC_ASSERT(p);
    for (int64_t i = 0; i < n; i++) p[i] = (int32_t)ir_lit_i64(l, (size_t)i);
    *dt = RT_I32;
    return p;
}

/* A weight buffer named name (cut to RT_NAME_MAX), its shape noted.  borrowed:
 * blob bytes, which stay mapped until after rtb_finish (lower_shared_free),
 * so the builder reads them in place instead of copying every weight. */
static int named_weight(LowerShared *s, const char *name, RtDType dt, int rank, const int64_t *dims, const void *data,
                        bool borrowed) {
    char nm[RT_NAME_MAX];
    snprintf(nm, sizeof nm, "%s", name);
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= dims[i];
    if (n == 0) return FAIL("'%s' %s", name, NO_ELEMENTS);
    int id = check_rc(s, (borrowed ? rtb_weight_ref : rtb_weight)(s->b, nm, dt, rank, dims, data));
    note_buf(s, id, rank, dims);
    return id;
}

static int make_weight(LowerShared *s, const IrValue *v, int rank, const int64_t *dims, bool gemm) {
    RtDType dt;
    bool owned;
    const void *data = const_data(s, v, &dt, &owned);
    if (!data) return -1;
    if (gemm && dt != RT_F16 && dt != RT_F32) {
        if (owned) free((void *)data);
        return FAIL("weight '%s' of a projection must be fp16 or fp32", v->name);
    }
    int id = named_weight(s, v->name, dt, rank, dims, data, !owned);
    if (owned) free((void *)data);
    return id;
}

static int const_weight(LowerShared *s, const IrValue *v) {
    int id = vid(v);
    if (s->weight[id] < 0) s->weight[id] = make_weight(s, v, v->type.rank, v->type.dims, false);
    return s->weight[id];
}

static int gemm_weight(LowerShared *s, const IrValue *w) {
    int id = vid(w);
    if (s->weight2d[id] < 0) {
        int64_t dims[2] = {w->type.dims[0], 1};
        for (int i = 1; i < w->type.rank; i++) dims[1] *= w->type.dims[i];
        s->weight2d[id] = make_weight(s, w, 2, dims, true);
    }
    return s->weight2d[id];
}

/* ---- values ---- */

static LVal *lval(LowerShared *s, const IrValue *v) {
    LVal *L = &s->lv[vid(v)];
    if (!L->has && !s->failed) {
        if (!ir_value_const(v) && !backend_is_constexpr(v)) {
            FAIL("internal: '%s' has no lowering", v->name);
            return L;
        }
        int w = const_weight(s, v);
        if (w < 0) return L;
        view_ident(&L->v, w, v->type.rank, v->type.dims);
        L->has = true;
    }
    return L;
}

/* Emit y[dst region] = src view, merging axes both sides walk contiguously. */
static int emit_copy(LowerShared *s, const View *src, int dst, int64_t dst_offset, const int64_t *dst_strides) {
    RtCopyParams p;
    memset(&p, 0, sizeof p);
    p.src_offset = src->offset, p.dst_offset = dst_offset;
    int r = 0;
    for (int i = 0; i < src->rank; i++) {
        if (src->dims[i] == 1) continue;
        if (r && p.src_stride[r - 1] == src->strides[i] * src->dims[i] &&
            p.dst_stride[r - 1] == dst_strides[i] * src->dims[i]) {
            p.dims[r - 1] *= src->dims[i];
            p.src_stride[r - 1] = src->strides[i];
            p.dst_stride[r - 1] = dst_strides[i];
            continue;
        }
        p.dims[r] = src->dims[i], p.src_stride[r] = src->strides[i], p.dst_stride[r] = dst_strides[i];
        r++;
    }
    if (!r) p.dims[0] = 1, p.src_stride[0] = p.dst_stride[0] = 1, r = 1;
    p.rank = r;
    return emit(s, RT_OP_COPY, &src->buf, 1, dst, &p, sizeof p);
}

/* The output buffer reserved for v (first not yet written), or -1. */
static int output_slot(LowerShared *s, const IrValue *v) {
    for (int i = 0; i < s->f->noutputs; i++)
        if (s->f->outputs[i] == v && !s->out_done[i]) return i;
    return -1;
}

/* Where an op producing v writes: v's output buffer when v is returned and
 * the shape matches, else a new temp. */
static int result_buf(LowerShared *s, const IrValue *v, int rank, const int64_t *dims) {
    int i = output_slot(s, v);
    bool same = dims_same(rank, dims, v->type.rank, v->type.dims);
    if (i >= 0 && same) {
        s->out_done[i] = true;
        return s->out_buf[i];
    }
    return new_temp(s, rt_dt(v->type.dtype), rank, dims);
}

/* Where a copy producing v (concat, tile, a materialization) writes.  A copy
 * does not care about its destination's shape, so in the bonded program the
 * buffer takes the shape of the reshape chain v feeds, making the reshapes
 * free and the buffer directly usable by the kernel after them. */
static int copy_dest(LowerShared *s, const IrValue *v) {
    if (output_slot(s, v) >= 0 || !s->views) return result_buf(s, v, v->type.rank, v->type.dims);
    const IrValue *t = v;
    while (s->reshaped[vid(t)] && output_slot(s, s->reshaped[vid(t)]) < 0) t = s->reshaped[vid(t)];
    return new_temp(s, rt_dt(v->type.dtype), t->type.rank, t->type.dims);
}

static void set_buffer(LowerShared *s, const IrValue *v, int buf, int rank, const int64_t *dims) {
    LVal *L = &s->lv[vid(v)];
    memset(L, 0, sizeof *L);
    if (buf < 0) return;
    L->has = true;
    view_ident(&L->v, buf, rank, dims);
    if (!dims_same(rank, dims, v->type.rank, v->type.dims)) {
        View r;
        if (view_reshape(&L->v, v->type.rank, v->type.dims, &r))
            L->v = r;
        else
            L->pend = true, L->prank = v->type.rank, dims_copy(L->pdims, v->type.dims, v->type.rank);
    }
}

/* A plain strided view of v (a pending reshape is resolved, by copy if needed). */
static bool resolved_view(LowerShared *s, const IrValue *v, View *out);

/* A buffer of shape dims (same element count) holding v in row-major order:
 * v's own buffer when its view already is exactly that, else a copy into
 * dest (dest < 0: a new temp). */
static int buffer_as(LowerShared *s, const IrValue *v, int rank, const int64_t *dims, int dest) {
    LVal *L = lval(s, v);
    if (!L->has) return -1;
    View w;
    if (dest < 0 && view_reshape(&L->v, rank, dims, &w) && view_is_buffer(s, &w) && !s->bi[w.buf].f16) return w.buf;
    bool own = dims_same(rank, dims, v->type.rank, v->type.dims);
    bool mine = dest < 0;
    if (dest < 0) dest = own ? copy_dest(s, v) : new_temp(s, rt_dt(v->type.dtype), rank, dims);
    if (dest < 0) return -1;
    int64_t st[MAXR];
    row_major(L->v.rank, L->v.dims, st);
    if (emit_copy(s, &L->v, dest, 0, st) < 0) return -1;
    if (mine && own) {
        set_buffer(s, v, dest, s->bi[dest].rank, s->bi[dest].dims); /* later users read the dense copy */
        View w2;
        /* the caller wants a buffer shaped dims: a reshaped destination is not one */
        if (!view_reshape(&s->lv[vid(v)].v, rank, dims, &w2) || !view_is_buffer(s, &w2)) {
            const View *nv = &s->lv[vid(v)].v;
            int64_t st2[MAXR];
            row_major(nv->rank, nv->dims, st2);
            int t = new_temp(s, rt_dt(v->type.dtype), rank, dims);
            if (t < 0 || emit_copy(s, nv, t, 0, st2) < 0) return -1;
            return t;
        }
    }
    return dest;
}

static int materialize(LowerShared *s, const IrValue *v) { return buffer_as(s, v, v->type.rank, v->type.dims, -1); }

static bool resolved_view(LowerShared *s, const IrValue *v, View *out) {
    LVal *L = lval(s, v);
    if (!L->has) return false;
    if (L->pend) {
        View r;
        if (view_reshape(&L->v, L->prank, L->pdims, &r)) {
            L->v = r;
            L->pend = false;
        } else if (materialize(s, v) < 0)
            return false;
    }
    *out = L->v;
    return true;
}

/* A buffer of dims holding view w (w's dims in row-major order = dims); an
 * fp16 input is always copied (converted): only attention reads F16. */
static int buffer_of_view(LowerShared *s, const View *w, RtDType dt, int rank, const int64_t *dims) {
    View r;
    if (view_reshape(w, rank, dims, &r) && view_is_buffer(s, &r) && !s->bi[r.buf].f16) return r.buf;
    int t = new_temp(s, dt, rank, dims);
    if (t < 0) return -1;
    int64_t st[MAXR];
    row_major(w->rank, w->dims, st);
    return emit_copy(s, w, t, 0, st) < 0 ? -1 : t;
}

/* Record a view result; the non-bonded program materializes it at once. */
static int set_view(LowerShared *s, const IrValue *v, const View *w, bool pend) {
    LVal *L = &s->lv[vid(v)];
    memset(L, 0, sizeof *L);
    L->has = true;
    L->v = *w;
    if (pend) L->pend = true, L->prank = v->type.rank, dims_copy(L->pdims, v->type.dims, v->type.rank);
    if (!s->views) {
        int out = result_buf(s, v, v->type.rank, v->type.dims);
        if (out < 0 || buffer_as(s, v, v->type.rank, v->type.dims, out) < 0) return -1;
        set_buffer(s, v, out, v->type.rank, v->type.dims);
    }
    return 0;
}

/* ---- op helpers ---- */

static IrValue *arg_value(const IrOp *op, const char *name) {
    IrArg *a = ir_op_arg(op, name);
    return a && a->kind == IR_ARG_VALUE ? a->value : NULL;
}

static int normalize_axis(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

static int const_ints(LowerShared *s, const IrOp *op, const char *name, int64_t *out, int max) {
    const IrLiteral *l = ir_op_arg_const(op, name);
    if (!l)
        return ir_op_arg(op, name)
                   ? (FAIL("'%s' of %s must be a constant on the CPU backend", name, mil_op_name(op->kind)))
                   : -2;
    long n = ir_lit_to_i64(l, out, (size_t)max);
    return n < 0 ? FAIL("'%s' of %s must be integers", name, mil_op_name(op->kind)) : (int)n;
}

static const IrType *rtype(const IrOp *op) { return &op->results[0]->type; }

static int out_for(LowerShared *s, const IrOp *op) {
    const IrType *t = rtype(op);
    return result_buf(s, op->results[0], t->rank, t->dims);
}

static void done(LowerShared *s, const IrOp *op, int out) {
    if (out >= 0) set_buffer(s, op->results[0], out, s->bi[out].rank, s->bi[out].dims);
}

/* RT_OP_GEMM.  A channels GEMM over more than one tile of positions reads
 * its x packed by tiles (RT_OP_PACK_TILES into a temp, then
 * RT_GEMM_PACKED): in place, at 128 positions every line of a K-block
 * fell in 8 of L1's 64 sets (the runtime's kernels_gemm.c measures it). */
static int emit_gemm(LowerShared *s, int *in, int nin, int out, RtGemmParams *p) {
    const BufInfo *xb = in[0] >= 0 ? &s->bi[in[0]] : NULL;
    if (p->layout == RT_GEMM_CHANNELS && xb && xb->rank >= 2) {
        int64_t pos = 1;
        for (int i = 2; i < xb->rank; i++) pos *= xb->dims[i];
        if (pos > RT_PACK_TILE) {
            int64_t pd[4] = {xb->dims[0], (pos + RT_PACK_TILE - 1) / RT_PACK_TILE, xb->dims[1], RT_PACK_TILE};
            int pk = new_temp(s, RT_F32, 4, pd);
            if (emit(s, RT_OP_PACK_TILES, in, 1, pk, NULL, 0) < 0) return -1;
            in[0] = pk, p->layout = RT_GEMM_PACKED;
        }
    }
    return emit(s, RT_OP_GEMM, in, nin, out, p, sizeof *p);
}

static int lower_gemm(LowerShared *s, const IrOp *root, const IrValue *result, int layout, const IrValue *x,
                      const IrValue *w, const IrValue *bias, int act, const IrValue *res) {
    if (!ir_value_const(w) && !backend_is_constexpr(w))
        return FAIL("the weight of %s must be a constant on the CPU backend", mil_op_name(root->kind));
    if (bias && !ir_value_const(bias)) return FAIL("the bias of %s must be a constant", mil_op_name(root->kind));
    int in[4], n = 0;
    if (layout == RT_GEMM_ROWS && !res && s->views && x->type.rank == 2 && w->type.rank == 2) {
        /* linear on the transpose of a [1, K, *spatial] buffer (the ANE layout
         * read as rows): the channels GEMM reads that buffer as it is, and the
         * result is the transposed view of its [1, N, *spatial] output, so the
         * transposes around the linear cost nothing. */
        View xv;
        if (!resolved_view(s, x, &xv)) return -1;
        const BufInfo *bi = &s->bi[xv.buf];
        int64_t M = x->type.dims[0], K = x->type.dims[1], N = w->type.dims[0], cnt = 1;
        for (int i = 0; i < bi->rank; i++) cnt *= bi->dims[i];
        if (xv.offset == 0 && (xv.strides[0] == 1 || M == 1) && (xv.strides[1] == M || K == 1) && bi->rank >= 3 &&
            bi->dims[0] == 1 && bi->dims[1] == K && cnt == K * M) {
            int64_t od[MAXR];
            dims_copy(od, bi->dims, bi->rank);
            od[1] = N;
            in[n++] = xv.buf;
            in[n++] = gemm_weight(s, w);
            if (bias) in[n++] = const_weight(s, bias);
            RtGemmParams p = {.layout = RT_GEMM_CHANNELS, .act = act, .has_bias = bias != NULL};
            int out = new_temp(s, RT_F32, bi->rank, od);
            if (emit_gemm(s, in, n, out, &p) < 0) return -1;
            LVal *L = &s->lv[vid(result)];
            memset(L, 0, sizeof *L);
            L->has = true;
            L->v = (View){.buf = out, .rank = 2, .dims = {M, N}, .strides = {1, M}};
            return 0;
        }
    }
    in[n++] = materialize(s, x);
    in[n++] = gemm_weight(s, w);
    if (bias) in[n++] = const_weight(s, bias);
    if (res) in[n++] = materialize(s, res);
    RtGemmParams p = {.layout = layout, .act = act, .has_bias = bias != NULL, .has_residual = res != NULL};
    int out = result_buf(s, result, result->type.rank, result->type.dims);
    if (emit_gemm(s, in, n, out, &p) < 0) return -1;
    set_buffer(s, result, out, result->type.rank, result->type.dims);
    return 0;
}

/* A linear whose [M, N] result is transposed and reshaped to [1, N, 1.., M]
 * before its epilogue (fuse.c, post_views).  When x is the transpose of a
 * [1, K, *spatial] buffer the channels GEMM does it all in one op; otherwise
 * a rows GEMM with bias and activation, the views, and the residual add. */
static int lower_linear_post(LowerShared *s, const FuseGroup *g) {
    const IrValue *x = g->x, *w = g->w, *res = g->residual, *r = g->result;
    int64_t M = x->type.dims[0], N = w->type.dims[0];
    View xv;
    if (!resolved_view(s, x, &xv)) return -1;
    const BufInfo *bi = &s->bi[xv.buf];
    int64_t K = x->type.dims[1], cnt = 1;
    for (int i = 0; i < bi->rank; i++) cnt *= bi->dims[i];
    int in[4], n = 0;
    if (xv.offset == 0 && (xv.strides[0] == 1 || M == 1) && (xv.strides[1] == M || K == 1) && bi->rank >= 3 &&
        bi->dims[0] == 1 && bi->dims[1] == K && cnt == K * M) {
        int64_t od[MAXR];
        dims_copy(od, bi->dims, bi->rank);
        od[1] = N;
        in[n++] = xv.buf;
        in[n++] = gemm_weight(s, w);
        if (g->bias) in[n++] = const_weight(s, g->bias);
        if (res) in[n++] = buffer_as(s, res, bi->rank, od, -1);
        RtGemmParams p = {
            .layout = RT_GEMM_CHANNELS, .act = g->act, .has_bias = g->bias != NULL, .has_residual = res != NULL};
        int out = result_buf(s, r, bi->rank, od);
        if (emit_gemm(s, in, n, out, &p) < 0) return -1;
        set_buffer(s, r, out, bi->rank, od);
        return 0;
    }
    in[n++] = materialize(s, x);
    in[n++] = gemm_weight(s, w);
    if (g->bias) in[n++] = const_weight(s, g->bias);
    RtGemmParams p = {.layout = RT_GEMM_ROWS, .act = g->act, .has_bias = g->bias != NULL};
    int64_t yd[2] = {M, N};
    int y = new_temp(s, RT_F32, 2, yd);
    if (emit(s, RT_OP_GEMM, in, n, y, &p, sizeof p) < 0) return -1;
    View yt = {.buf = y, .rank = 2, .dims = {N, M}, .strides = {1, N}};
    if (!res) {
        View v;
        if (view_reshape(&yt, r->type.rank, r->type.dims, &v)) return set_view(s, r, &v, false);
        return set_view(s, r, &yt, true);
    }
    int b2[2] = {buffer_of_view(s, &yt, RT_F32, r->type.rank, r->type.dims), materialize(s, res)};
    RtBinaryParams add = {.op = RT_BIN_ADD};
    int out = result_buf(s, r, r->type.rank, r->type.dims);
    if (emit(s, RT_OP_BINARY, b2, 2, out, &add, sizeof add) < 0) return -1;
    set_buffer(s, r, out, r->type.rank, r->type.dims);
    return 0;
}

static int lower_norm(LowerShared *s, const IrValue *result, int kind, const IrValue *x, int ab, int ae,
                      const IrValue *gamma, const IrValue *beta, double eps) {
    int in[3], n = 0;
    in[n++] = materialize(s, x);
    if (gamma) in[n++] = const_weight(s, gamma);
    if (beta) in[n++] = const_weight(s, beta);
    RtNormParams p = {.kind = kind,
                      .axis_begin = ab,
                      .axis_end = ae,
                      .has_gamma = gamma != NULL,
                      .has_beta = beta != NULL,
                      .eps = (float)eps};
    int out = result_buf(s, result, result->type.rank, result->type.dims);
    if (emit(s, RT_OP_NORM, in, n, out, &p, sizeof p) < 0) return -1;
    set_buffer(s, result, out, result->type.rank, result->type.dims);
    return 0;
}

/* Is constant mask m (broadcast to [.., L, S]) exactly a causal mask: 0 where
 * key j <= query i + (S - L), a large negative number elsewhere? */
static bool mask_is_causal(LowerShared *s, const IrValue *m, int64_t L, int64_t S) {
    const IrType *t = &m->type;
    if (!ir_value_const(m) || t->rank < 2 || t->dims[t->rank - 2] != L || t->dims[t->rank - 1] != S) return false;
    for (int i = 0; i + 2 < t->rank; i++)
        if (t->dims[i] != 1) return false;
    RtDType dt;
    bool owned;
    const void *data = const_data(s, m, &dt, &owned);
    if (!data) return false;
    bool ok = dt == RT_F16 || dt == RT_F32;
    for (int64_t i = 0; ok && i < L; i++)
        for (int64_t j = 0; ok && j < S; j++) {
            float x =
                dt == RT_F16 ? half_to_float(((const uint16_t *)data)[i * S + j]) : ((const float *)data)[i * S + j];
            ok = j <= i + (S - L) ? x == 0 : x <= -1e4f;
        }
    if (owned) free((void *)data);
    return ok;
}

static void swap_last2(View *v) {
    int a = v->rank - 2, b = v->rank - 1;
    int64_t t = v->dims[a];
    v->dims[a] = v->dims[b], v->dims[b] = t;
    t = v->strides[a];
    v->strides[a] = v->strides[b], v->strides[b] = t;
}

/* The decode form: K and V read in place, transposed, possibly fp16 inputs,
 * possibly as cache ++ new without the concat (RtAttnParams flags). */
static int lower_attention_in_place(LowerShared *s, const FuseGroup *g) {
    const int64_t B = g->frame[0], H = g->frame[1], L = g->frame[2], S = g->frame[3];
    int64_t E = g->q->type.dims[3], qd[4] = {B, H, L, E};
    const int64_t *kd = g->k->type.dims, *vd = g->v->type.dims; /* [B, Hk, E, S] or [B, Hk, S, E] */
    RtAttnParams p = {.scale = (float)g->scale,
                      .causal = g->causal,
                      .kv_heads = (int32_t)kd[1],
                      .flags =
                          (g->k_t ? RT_ATTN_K_T : 0) | (g->v_t ? RT_ATTN_V_T : 0) | (g->split ? RT_ATTN_SPLIT : 0)};
    int in[6], n = 0;
    in[n++] = buffer_as(s, g->q, 4, qd, -1);
    for (int i = 0; i < (g->split ? 2 : 1); i++)
        for (int kv = 0; kv < 2; kv++) {
            const IrValue *val = g->split ? (kv ? g->v_parts[i] : g->k_parts[i]) : (kv ? g->v : g->k);
            const int64_t *full = kv ? vd : kd;
            int64_t d[4] = {full[0], full[1], full[2], full[3]};
            if (g->split) d[3] = val->type.dims[val->type.rank - 1]; /* split implies both transposed: S is last */
            View w;
            if (!resolved_view(s, val, &w)) return -1;
            /* the kernel reads elements in row-major order whatever the
             * buffer's dims: a whole dense buffer (an fp16 cache input, a
             * GEMM's [1, C, 1, S] result) is used as it is */
            if (!w.offset && view_contiguous(&w) && view_numel(&w) == buf_numel(s, w.buf))
                in[n++] = w.buf;
            else
                in[n++] = buffer_of_view(s, &w, RT_F32, 4, d);
        }
    if (g->mask) {
        if (L <= S && mask_is_causal(s, g->mask, L, S))
            p.causal = 1;
        else
            in[n++] = materialize(s, g->mask), p.has_mask = 1;
    }
    int64_t od[4] = {B, H, L, g->v_t ? vd[2] : vd[3]};
    int out = result_buf(s, g->result, 4, od);
    if (emit(s, RT_OP_ATTENTION, in, n, out, &p, sizeof p) < 0) return -1;
    set_buffer(s, g->result, out, 4, od);
    return 0;
}

static int lower_attention(LowerShared *s, const FuseGroup *g) {
    if (g->in_place) return lower_attention_in_place(s, g);
    const int64_t B = g->frame[0], H = g->frame[1], L = g->frame[2], S = g->frame[3];
    int64_t E = g->q->type.dims[3];
    int64_t qd[4] = {B, H, L, E};
    View kv, vv;
    if (!resolved_view(s, g->k, &kv) || !resolved_view(s, g->v, &vv)) return -1;
    if (g->k_t) swap_last2(&kv);
    if (g->v_t) swap_last2(&vv);
    int64_t kd[4] = {kv.dims[0], kv.dims[1], kv.dims[2], kv.dims[3]},
            vd[4] = {vv.dims[0], vv.dims[1], vv.dims[2], vv.dims[3]};
    int in[4];
    in[0] = buffer_as(s, g->q, 4, qd, -1);
    in[1] = buffer_of_view(s, &kv, RT_F32, 4, kd);
    in[2] = buffer_of_view(s, &vv, RT_F32, 4, vd);
    RtAttnParams p = {.scale = (float)g->scale, .causal = g->causal};
    int n = 3;
    if (g->mask) {
        if (L <= S && mask_is_causal(s, g->mask, L, S))
            p.causal = 1;
        else
            in[n++] = materialize(s, g->mask), p.has_mask = 1;
    }
    int64_t od[4] = {B, H, L, vd[3]};
    int out = result_buf(s, g->result, 4, od); /* the result's own buffer when the shapes agree */
    if (emit(s, RT_OP_ATTENTION, in, n, out, &p, sizeof p) < 0) return -1;
    set_buffer(s, g->result, out, 4, od);
    return 0;
}

static int lower_group(LowerShared *s, const FuseGroup *g) {
    switch (g->kind) {
    case FUSE_GEMM:
        if (g->post_views) return lower_linear_post(s, g);
        return lower_gemm(s, g->root, g->result, g->layout, g->x, g->w, g->bias, g->act, g->residual);
    case FUSE_NORM:
        return lower_norm(s, g->result, g->norm_kind, g->x, g->axis_begin, g->axis_end, g->gamma, g->beta, g->eps);
    case FUSE_ATTN: return lower_attention(s, g);
    }
    return FAIL("internal: bad fusion group");
}

static int lower_binary(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *y = arg_value(op, "y");
    const IrType *t = rtype(op);
    RtDType dt = rt_dt(t->dtype);
    if (dt != RT_F32 && dt != RT_I32)
        return FAIL("%s on %s is not supported by the CPU backend", mil_op_name(op->kind), ir_dtype_name(t->dtype));
    /* x * c and x / c with a scalar constant: one pass, no weight buffer */
    const IrLiteral *c = NULL;
    IrValue *other = NULL;
    if (dt == RT_F32 && (op->kind == OP_MUL || op->kind == OP_REAL_DIV)) {
        const IrLiteral *ly = ir_value_const(y), *lx = ir_value_const(x);
        if (ly && ly->kind == IR_LIT_DATA && ly->count == 1)
            c = ly, other = x;
        else if (op->kind == OP_MUL && lx && lx->kind == IR_LIT_DATA && lx->count == 1)
            c = lx, other = y;
        if (c && dims_same(other->type.rank, other->type.dims, t->rank, t->dims)) {
            double k = ir_lit_f64(c, 0);
            RtUnaryParams p = {.op = RT_UN_SCALE, .eps = (float)(op->kind == OP_MUL ? k : 1 / k)};
            int in = materialize(s, other), out = out_for(s, op);
            if (emit(s, RT_OP_UNARY, &in, 1, out, &p, sizeof p) < 0) return -1;
            done(s, op, out);
            return 0;
        }
    }
    static const int map[OP_COUNT] = {
        [OP_ADD] = RT_BIN_ADD, [OP_SUB] = RT_BIN_SUB,     [OP_MUL] = RT_BIN_MUL,    [OP_REAL_DIV] = RT_BIN_DIV,
        [OP_POW] = RT_BIN_POW, [OP_MAXIMUM] = RT_BIN_MAX, [OP_MINIMUM] = RT_BIN_MIN};
    RtBinaryParams p = {.op = map[op->kind]};
    int in[2] = {materialize(s, x), materialize(s, y)}, out = out_for(s, op);
    if (emit(s, RT_OP_BINARY, in, 2, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

static int lower_unary(LowerShared *s, const IrOp *op) {
    RtUnaryParams p = {0};
    switch (op->kind) {
    case OP_RSQRT: {
        double e = 1e-12;
        ir_op_arg_f64(op, "epsilon", &e);
        p.op = RT_UN_RSQRT, p.eps = (float)e;
        break;
    }
    case OP_SQRT: p.op = RT_UN_SQRT; break;
    case OP_EXP: p.op = RT_UN_EXP; break;
    case OP_TANH: p.op = RT_UN_TANH; break;
    case OP_SIGMOID: p.op = RT_UN_SIGMOID; break;
    case OP_SILU: p.op = RT_UN_SILU; break;
    case OP_GELU: {
        const IrLiteral *m = ir_op_arg_const(op, "mode");
        const char *mode = m ? ir_lit_str(m, 0) : "EXACT";
        if (!mode) return FAIL("gelu: mode must be a constant string");
        if (!strcmp(mode, "EXACT"))
            p.op = RT_UN_GELU_EXACT;
        else if (!strcmp(mode, "TANH_APPROXIMATION"))
            p.op = RT_UN_GELU_TANH;
        else if (!strcmp(mode, "SIGMOID_APPROXIMATION"))
            p.op = RT_UN_GELU_SIGMOID;
        else
            return FAIL("gelu: unknown mode '%s'", mode);
        break;
    }
    default: return FAIL("internal: not a unary op");
    }
    int in = materialize(s, arg_value(op, "x")), out = out_for(s, op);
    if (emit(s, RT_OP_UNARY, &in, 1, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

static int lower_reducex(LowerShared *s, const IrOp *op, IrValue *x, uint32_t axes);

static int lower_reduce(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    if (op->kind == OP_REDUCE_ARGMAX || op->kind == OP_REDUCE_ARGMIN) {
        int64_t a = -1;
        ir_op_arg_i64(op, "axis", &a);
        return lower_reducex(s, op, x, 1u << normalize_axis(a, x->type.rank));
    }
    int64_t ax[MAXR];
    int n = const_ints(s, op, "axes", ax, MAXR);
    if (n == -1) return -1;
    RtReduceParams p = {.op = op->kind == OP_REDUCE_SUM    ? RT_RED_SUM
                              : op->kind == OP_REDUCE_MEAN ? RT_RED_MEAN
                                                           : RT_RED_MAX};
    if (n == -2) p.axes = (1u << x->type.rank) - 1;
    for (int i = 0; i < n; i++) p.axes |= 1u << normalize_axis(ax[i], x->type.rank);
    bool basic = op->kind == OP_REDUCE_SUM || op->kind == OP_REDUCE_MEAN || op->kind == OP_REDUCE_MAX;
    if (rt_dt(x->type.dtype) != RT_F32 || !basic) return lower_reducex(s, op, x, p.axes);
    int in = materialize(s, x), out = out_for(s, op);
    if (emit(s, RT_OP_REDUCE, &in, 1, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

static int lower_layer_norm(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int r = x->type.rank;
    int64_t ax[MAXR];
    int n = const_ints(s, op, "axes", ax, MAXR);
    if (n == -1) return -1;
    int ab = 0, ae = r;
    if (n >= 0) {
        for (int i = 0; i < n; i++) ax[i] = normalize_axis(ax[i], r);
        for (int i = 1; i < n; i++)
            if (ax[i] != ax[i - 1] + 1) return FAIL("layer_norm: the CPU backend needs consecutive axes");
        ab = n ? (int)ax[0] : 0, ae = n ? (int)ax[n - 1] + 1 : r;
    }
    double eps = 1e-5;
    ir_op_arg_f64(op, "epsilon", &eps);
    IrValue *g = arg_value(op, "gamma"), *b = arg_value(op, "beta");
    if (b && !g) return FAIL("layer_norm: beta without gamma is not supported by the CPU backend");
    return lower_norm(s, op->results[0], RT_NORM_LAYER, x, ab, ae, g, b, eps);
}

static int lower_reshape(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *y = op->results[0];
    LVal *L = lval(s, x);
    if (!L->has) return -1;
    View w;
    if (!L->pend && view_reshape(&L->v, y->type.rank, y->type.dims, &w)) return set_view(s, y, &w, false);
    View r;
    if (L->pend && view_reshape(&L->v, y->type.rank, y->type.dims, &r)) return set_view(s, y, &r, false);
    return set_view(s, y, &L->v, true); /* still the same elements in the same order */
}

static int lower_transpose(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t perm[MAXR];
    int n = const_ints(s, op, "perm", perm, MAXR);
    View v, w;
    if (n < 0 || !resolved_view(s, x, &v)) return -1;
    w = v;
    for (int i = 0; i < n; i++) w.dims[i] = v.dims[perm[i]], w.strides[i] = v.strides[perm[i]];
    return set_view(s, op->results[0], &w, false);
}

/* Slice axis a of v: start, count, step. */
static bool slice_axis(View *v, int a, int64_t start, int64_t count, int64_t step) {
    if (step <= 0 || count < 1) return false;
    v->offset += start * v->strides[a];
    v->dims[a] = count;
    v->strides[a] *= step;
    return true;
}

/* The slice op describes of a tensor of type xt: v (its view, or the view
 * of a buffer of that shape) cut down to it, squeezed axes kept at extent 1. */
static int slice_region(LowerShared *s, const IrOp *op, const IrType *xt, View *v);

static int lower_slice(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    View v;
    if (!resolved_view(s, x, &v) || slice_region(s, op, &x->type, &v) < 0) return -1;
    /* squeezed axes have extent 1: the result type simply drops them */
    View w;
    if (!view_reshape(&v, rtype(op)->rank, rtype(op)->dims, &w)) return FAIL("internal: slice result shape");
    return set_view(s, op->results[0], &w, false);
}

static int slice_region(LowerShared *s, const IrOp *op, const IrType *xt, View *vp) {
    int r = xt->rank;
    View v = *vp;
    int64_t begin[MAXR], end[MAXR], size[MAXR], stride[MAXR], bm[MAXR] = {0}, em[MAXR] = {0}, sq[MAXR] = {0};
    if (const_ints(s, op, "begin", begin, MAXR) != r)
        return s->failed ? -1 : FAIL("slice: 'begin' must be a constant of rank %d", r);
    if (op->kind == OP_SLICE_BY_SIZE) {
        if (const_ints(s, op, "size", size, MAXR) != r) return s->failed ? -1 : FAIL("slice_by_size: bad 'size'");
    } else {
        if (const_ints(s, op, "end", end, MAXR) != r)
            return s->failed ? -1 : FAIL("slice_by_index: 'end' must be a constant of rank %d", r);
        for (int i = 0; i < r; i++) stride[i] = 1;
        if (const_ints(s, op, "stride", stride, MAXR) == -1 || const_ints(s, op, "begin_mask", bm, MAXR) == -1 ||
            const_ints(s, op, "end_mask", em, MAXR) == -1 || const_ints(s, op, "squeeze_mask", sq, MAXR) == -1)
            return -1;
    }
    for (int i = 0; i < r; i++) {
        int64_t d = xt->dims[i], b = begin[i], c;
        if (b < 0) b += d;
        if (op->kind == OP_SLICE_BY_SIZE) {
            c = size[i] < 0 ? d - b : size[i];
            if (!slice_axis(&v, i, b, c, 1)) return FAIL("slice_by_size: axis %d out of range", i);
            continue;
        }
        if (stride[i] <= 0) return FAIL("slice_by_index: negative strides are not supported by the CPU backend");
        if (bm[i]) b = 0;
        int64_t e = em[i] ? d : (end[i] < 0 ? end[i] + d : end[i]);
        if (e > d) e = d;
        if (b < 0) b = 0;
        c = sq[i] ? 1 : (e - b + stride[i] - 1) / stride[i];
        if (!slice_axis(&v, i, b, c, stride[i])) return FAIL("%s: empty slice on axis %d", mil_op_name(op->kind), i);
    }
    *vp = v;
    return 0;
}

/* ---- states ---- */

static bool is_write_of(const IrOp *op, const IrValue *st) {
    return (op->kind == OP_WRITE_STATE && arg_value(op, "input") == st) ||
           (op->kind == OP_COREML_UPDATE_STATE && arg_value(op, "state") == st);
}

static IrValue *written_value(const IrOp *op) { return arg_value(op, op->kind == OP_WRITE_STATE ? "data" : "value"); }

/* Decides, before lowering, where each state is written.  A slice_update is
 * done in place in its state's buffer (no copy of the state) when it updates
 * the state's own read (used by nothing else), its result is what the
 * state's only write stores, and no other read of the state lies between the
 * two: then no op can tell the write happened early. */
static void plan_states(LowerShared *s) {
    IrFunction *f = s->f;
    for (int i = 0; i < f->ninputs; i++) {
        IrValue *st = f->inputs[i];
        s->wpos[vid(st)] = -1;
        if (!st->type.state) continue;
        int nw = 0, pos = 0, wp = -1;
        IrOp *w = NULL;
        IR_FOR_EACH_OP(op, f) {
            if (is_write_of(op, st)) nw++, w = op, wp = pos;
            pos++;
        }
        s->wpos[vid(st)] = wp;
        IrValue *val = nw == 1 ? written_value(w) : NULL;
        IrOp *su = val ? val->def : NULL;
        if (!su || su->kind != OP_SLICE_UPDATE) continue;
        IrValue *x = arg_value(su, "x");
        IrOp *rd = x ? x->def : NULL;
        if (!rd || rd->kind != OP_READ_STATE || arg_value(rd, "input") != st || x->uses != 1) continue;
        bool between = false, after_rd = false;
        int supos = 0;
        pos = 0;
        IR_FOR_EACH_OP(op, f) {
            if (op == w) break;
            if (after_rd && op->kind == OP_READ_STATE && arg_value(op, "input") == st) between = true;
            if (op == rd) after_rd = true;
            if (op == su) supos = pos;
            pos++;
        }
        if (between) continue;
        s->su_in_place[vid(su->results[0])] = true;
        s->wpos[vid(st)] = supos;
    }
}

/* The state buffer of state input st. */
static int state_buf(LowerShared *s, const IrValue *st) {
    int b = st ? s->input_buf[vid(st)] : -1;
    if (b < 0 || !st->type.state) FAIL("internal: '%s' is not a state", st ? st->name : "?");
    return b;
}

/* read_state: a view of the state's buffer (no copy) when no write of the
 * state follows, or when only the in-place slice_update reads it; else a
 * copy of the value now, before a later write changes the buffer. */
static int lower_read_state(LowerShared *s, const IrOp *op) {
    IrValue *st = arg_value(op, "input"), *r = op->results[0];
    int b = state_buf(s, st);
    if (b < 0) return -1;
    View w;
    view_ident(&w, b, st->type.rank, st->type.dims);
    bool sole_su = false; /* read only by the slice_update done in place */
    for (IrOp *u = op->next; r->uses == 1 && u; u = u->next)
        if (u->kind == OP_SLICE_UPDATE && arg_value(u, "x") == r) {
            sole_su = s->su_in_place[vid(u->results[0])];
            break;
        }
    if (sole_su || s->wpos[vid(st)] < s->opi) return set_view(s, r, &w, false);
    int out = copy_dest(s, r);
    int64_t strides[MAXR];
    row_major(s->bi[out].rank, s->bi[out].dims, strides);
    View dv;
    view_ident(&dv, out, s->bi[out].rank, s->bi[out].dims);
    if (!view_reshape(&dv, st->type.rank, st->type.dims, &dv)) return FAIL("internal: read_state copy shape");
    if (emit_copy(s, &w, out, 0, dv.strides) < 0) return -1;
    set_buffer(s, r, out, s->bi[out].rank, s->bi[out].dims);
    return 0;
}

/* x, then begin and end as int32 [rank] (constants become weights). */
static int update_inputs(LowerShared *s, const IrOp *op, int rank, int *in) {
    for (int i = 0; i < 2; i++) {
        IrValue *v = arg_value(op, i ? "end" : "begin");
        if (!v) {
            const IrLiteral *l = ir_op_arg_const(op, i ? "end" : "begin");
            return l ? FAIL("slice_update: internal: constant '%s' without a value", i ? "end" : "begin")
                     : FAIL("slice_update: no '%s'", i ? "end" : "begin");
        }
        if (v->type.dtype != IR_DT_INT32 || ir_value_numel(v) != rank)
            return FAIL("slice_update: '%s' must be int32 [%d] on the CPU backend", i ? "end" : "begin", rank);
        in[1 + i] = materialize(s, v);
        if (in[1 + i] < 0) return -1;
    }
    return 0;
}

static int lower_slice_update_const(LowerShared *s, const IrOp *op);

/* slice_update: the update written into a box of x at a run-time begin.  In
 * place in the state (plan_states), else into a copy of x; with constant
 * begin and end (any stride) the copies of lower_slice_update_const. */
static int lower_slice_update(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *u = arg_value(op, "update"), *r = op->results[0];
    if (!s->su_in_place[vid(r)] && ir_op_arg_const(op, "begin") && ir_op_arg_const(op, "end"))
        return lower_slice_update_const(s, op);
    int rank = x->type.rank;
    int64_t stride[MAXR], m[3][MAXR];
    int n = const_ints(s, op, "stride", stride, MAXR);
    if (n == -1) return -1;
    for (int i = 0; i < n; i++)
        if (stride[i] != 1) return FAIL("slice_update: strides other than 1 are not supported by the CPU backend");
    RtUpdateParams p = {0};
    int32_t *mask[3] = {&p.begin_mask, &p.end_mask, &p.squeeze_mask};
    static const char *const mname[3] = {"begin_mask", "end_mask", "squeeze_mask"};
    for (int k = 0; k < 3; k++) {
        int c = const_ints(s, op, mname[k], m[k], MAXR);
        if (c == -1) return -1;
        for (int i = 0; i < c && i < rank; i++)
            if (m[k][i]) *mask[k] |= 1 << i;
    }
    /* the update with the squeezed axes back as 1s: x's rank */
    int64_t ud[MAXR];
    for (int i = 0, j = 0; i < rank; i++)
        ud[i] = (p.squeeze_mask >> i & 1) ? 1 : (j < u->type.rank ? u->type.dims[j++] : 1);
    int in[3];
    in[0] = buffer_as(s, u, rank, ud, -1);
    if (in[0] < 0 || update_inputs(s, op, rank, in) < 0) return -1;
    if (s->su_in_place[vid(r)]) {
        IrValue *st = x->def ? arg_value(x->def, "input") : NULL;
        int b = state_buf(s, st);
        if (b < 0 || emit(s, RT_OP_UPDATE, in, 3, b, &p, sizeof p) < 0) return -1;
        View w;
        view_ident(&w, b, rank, x->type.dims);
        return set_view(s, r, &w, false);
    }
    int out = result_buf(s, r, rank, x->type.dims);
    if (out < 0 || buffer_as(s, x, rank, x->type.dims, out) < 0) return -1;
    if (emit(s, RT_OP_UPDATE, in, 3, out, &p, sizeof p) < 0) return -1;
    set_buffer(s, r, out, rank, x->type.dims);
    return 0;
}

/* write_state / coreml_update_state: the value into the state's buffer
 * (nothing when an in-place slice_update already put it there). */
static int lower_write_state(LowerShared *s, const IrOp *op) {
    bool upd = op->kind == OP_COREML_UPDATE_STATE;
    IrValue *st = arg_value(op, upd ? "state" : "input"), *val = written_value(op);
    int b = state_buf(s, st);
    LVal *L = lval(s, val);
    if (b < 0 || !L->has) return -1;
    View w;
    view_ident(&w, b, st->type.rank, st->type.dims);
    bool there = !L->pend && L->v.buf == b && L->v.offset == 0 && dims_same(L->v.rank, L->v.dims, w.rank, w.dims) &&
                 !memcmp(L->v.strides, w.strides, sizeof(int64_t) * (size_t)w.rank);
    if (!there) {
        int x = buffer_as(s, val, st->type.rank, st->type.dims, -1);
        RtUpdateParams p = {0};
        if (x < 0 || emit(s, RT_OP_UPDATE, &x, 1, b, &p, sizeof p) < 0) return -1;
    }
    if (upd) s->lv[vid(op->results[0])] = *lval(s, val); /* the result is the value */
    return 0;
}

static int lower_split(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t a = 0;
    if (!ir_op_arg_i64(op, "axis", &a)) return FAIL("split: 'axis' must be a constant");
    int ax = normalize_axis(a, x->type.rank);
    View v;
    if (!resolved_view(s, x, &v)) return -1;
    int64_t off = 0;
    for (int i = 0; i < op->nresults; i++) {
        IrValue *y = op->results[i];
        View w = v;
        if (!slice_axis(&w, ax, off, y->type.dims[ax], 1)) return FAIL("internal: split");
        off += y->type.dims[ax];
        if (set_view(s, y, &w, false) < 0) return -1;
    }
    return 0;
}

static int lower_concat(LowerShared *s, const IrOp *op) {
    IrArg *vals = ir_op_arg(op, "values");
    int64_t a = 0, il = 0;
    if (!ir_op_arg_i64(op, "axis", &a)) return FAIL("concat: 'axis' must be a constant");
    if (ir_op_arg_i64(op, "interleave", &il) && il)
        return FAIL("concat: interleave is not supported by the CPU backend");
    const IrType *t = rtype(op);
    int ax = normalize_axis(a, t->rank);
    int out = copy_dest(s, op->results[0]);
    if (out < 0) return -1;
    int64_t st[MAXR], off = 0;
    row_major(t->rank, t->dims, st);
    int n = vals->kind == IR_ARG_TUPLE ? vals->nitems : 1;
    for (int i = 0; i < n; i++) {
        IrValue *part = vals->kind == IR_ARG_TUPLE ? vals->items[i] : vals->value;
        View v;
        if (!resolved_view(s, part, &v) || emit_copy(s, &v, out, off * st[ax], st) < 0) return -1;
        off += part->type.dims[ax];
    }
    done(s, op, out);
    return 0;
}

static int lower_tile(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int r = x->type.rank;
    int64_t reps[MAXR];
    if (const_ints(s, op, "reps", reps, MAXR) != r)
        return s->failed ? -1 : FAIL("tile: 'reps' must be a constant of rank %d", r);
    if (2 * r > RT_COPY_MAX_RANK) return FAIL("tile: rank %d is too high for the CPU backend", r);
    View v;
    if (!resolved_view(s, x, &v)) return -1;
    const IrType *t = rtype(op);
    int out = copy_dest(s, op->results[0]);
    int64_t ost[MAXR];
    row_major(t->rank, t->dims, ost);
    RtCopyParams p;
    memset(&p, 0, sizeof p);
    p.rank = 2 * r;
    p.src_offset = v.offset;
    for (int i = 0; i < r; i++) {
        p.dims[2 * i] = reps[i], p.src_stride[2 * i] = 0, p.dst_stride[2 * i] = v.dims[i] * ost[i];
        p.dims[2 * i + 1] = v.dims[i], p.src_stride[2 * i + 1] = v.strides[i], p.dst_stride[2 * i + 1] = ost[i];
    }
    if (!r) p.rank = 1, p.dims[0] = 1;
    if (emit(s, RT_OP_COPY, &v.buf, 1, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

static int lower_cast(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    IrDType to = rtype(op)->dtype, from = x->type.dtype;
    if (!rt_dt(to) || !rt_dt(from))
        return FAIL("cast between %s and %s is not supported", ir_dtype_name(from), ir_dtype_name(to));
    bool round = to == IR_DT_FP16 && from != IR_DT_FP16;
    if (rt_dt(to) == rt_dt(from) && !round && s->views) { /* fp16 <-> fp32 share fp32 storage */
        LVal *L = lval(s, x);
        if (!L->has) return -1;
        return set_view(s, op->results[0], &L->v, L->pend);
    }
    RtCastParams p = {.round_f16 = round};
    int in = materialize(s, x), out = out_for(s, op);
    if (emit(s, RT_OP_CAST, &in, 1, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

static int lower_sdpa(LowerShared *s, const IrOp *op) {
    IrValue *q = arg_value(op, "query"), *k = arg_value(op, "key"), *v = arg_value(op, "value"),
            *m = arg_value(op, "attn_mask");
    if (q->type.rank != 4 || k->type.rank != 4 || v->type.rank != 4)
        return FAIL("scaled_dot_product_attention: the CPU backend needs rank-4 query, key and value");
    if (m && !ir_dtype_is_float(m->type.dtype))
        return FAIL("scaled_dot_product_attention: only additive float masks are supported");
    RtAttnParams p = {.scale = (float)(1 / sqrt((double)q->type.dims[3])), .has_mask = m != NULL};
    int in[4] = {materialize(s, q), materialize(s, k), materialize(s, v), m ? materialize(s, m) : 0};
    int out = out_for(s, op);
    if (emit(s, RT_OP_ATTENTION, in, m ? 4 : 3, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

/* ---- the ops beyond the transformer set ---- */

static double arg_f64_or(const IrOp *op, const char *name, double def) {
    double v = def;
    ir_op_arg_f64(op, name, &v);
    return v;
}

static int emit_result(LowerShared *s, const IrOp *op, RtOpKind k, const int *in, int nin, const void *p, size_t plen) {
    int out = out_for(s, op);
    if (emit(s, k, in, nin, out, p, plen) < 0) return -1;
    done(s, op, out);
    return 0;
}

/* The RT_OP_ELTWISE op of a MIL elementwise op, or -1. */
static int elt_op(IrOpKind k) {
    switch (k) {
    case OP_ABS: return RT_EL_ABS;
    case OP_ACOS: return RT_EL_ACOS;
    case OP_ASIN: return RT_EL_ASIN;
    case OP_ATAN: return RT_EL_ATAN;
    case OP_ATANH: return RT_EL_ATANH;
    case OP_CEIL: return RT_EL_CEIL;
    case OP_COS: return RT_EL_COS;
    case OP_COSH: return RT_EL_COSH;
    case OP_ERF: return RT_EL_ERF;
    case OP_EXP2: return RT_EL_EXP2;
    case OP_FLOOR: return RT_EL_FLOOR;
    case OP_INVERSE: return RT_EL_INVERSE;
    case OP_LOG: return RT_EL_LOG;
    case OP_ROUND: return RT_EL_ROUND;
    case OP_SIGN: return RT_EL_SIGN;
    case OP_SIN: return RT_EL_SIN;
    case OP_SINH: return RT_EL_SINH;
    case OP_SQUARE: return RT_EL_SQUARE;
    case OP_TAN: return RT_EL_TAN;
    case OP_RELU6: return RT_EL_RELU6;
    case OP_SOFTPLUS: return RT_EL_SOFTPLUS;
    case OP_SOFTSIGN: return RT_EL_SOFTSIGN;
    case OP_CLIP: return RT_EL_CLIP;
    case OP_THRESHOLD: return RT_EL_THRESHOLD;
    case OP_THRESHOLDED_RELU: return RT_EL_THRESHOLDED_RELU;
    case OP_ELU: return RT_EL_ELU;
    case OP_LEAKY_RELU: return RT_EL_LEAKY_RELU;
    case OP_CLAMPED_RELU: return RT_EL_CLAMPED_RELU;
    case OP_LINEAR_ACTIVATION: return RT_EL_LINEAR;
    case OP_SCALED_TANH: return RT_EL_SCALED_TANH;
    case OP_SIGMOID_HARD: return RT_EL_SIGMOID_HARD;
    case OP_PRELU: return RT_EL_PRELU;
    case OP_SOFTPLUS_PARAMETRIC: return RT_EL_SOFTPLUS_P;
    case OP_LOGICAL_NOT: return RT_EL_NOT;
    default: return -1;
    }
}

static int lower_eltwise(LowerShared *s, const IrOp *op) {
    if (op->kind == OP_RELU) {
        RtUnaryParams u = {.op = RT_UN_RELU};
        int in = materialize(s, arg_value(op, "x"));
        return emit_result(s, op, RT_OP_UNARY, &in, 1, &u, sizeof u);
    }
    RtEltParams p = {.op = elt_op(op->kind)};
    switch (op->kind) {
    case OP_INVERSE: p.alpha = (float)arg_f64_or(op, "epsilon", 1e-4); break;
    case OP_LOG: p.alpha = (float)arg_f64_or(op, "epsilon", 1e-45); break;
    case OP_CLIP:
    case OP_CLAMPED_RELU:
    case OP_LINEAR_ACTIVATION:
    case OP_SCALED_TANH:
    case OP_SIGMOID_HARD: p.alpha = (float)arg_f64_or(op, "alpha", 0), p.beta = (float)arg_f64_or(op, "beta", 0); break;
    case OP_THRESHOLD:
    case OP_THRESHOLDED_RELU:
    case OP_ELU:
    case OP_LEAKY_RELU: p.alpha = (float)arg_f64_or(op, "alpha", 0); break;
    default: break;
    }
    int in[3], n = 0;
    in[n++] = materialize(s, arg_value(op, "x"));
    if (op->kind == OP_PRELU || op->kind == OP_SOFTPLUS_PARAMETRIC) {
        IrValue *a = arg_value(op, "alpha"), *b = arg_value(op, "beta");
        in[n++] = const_weight(s, a);
        if (b) in[n++] = const_weight(s, b);
        p.nparams = n - 1;
    }
    return emit_result(s, op, RT_OP_ELTWISE, in, n, &p, sizeof p);
}

static int lower_binop(LowerShared *s, const IrOp *op) {
    int bo;
    switch (op->kind) {
    case OP_FLOOR_DIV: bo = RT_BO_FLOOR_DIV; break;
    case OP_MOD: bo = RT_BO_MOD; break;
    case OP_EQUAL: bo = RT_BO_EQ; break;
    case OP_NOT_EQUAL: bo = RT_BO_NE; break;
    case OP_GREATER: bo = RT_BO_GT; break;
    case OP_GREATER_EQUAL: bo = RT_BO_GE; break;
    case OP_LESS: bo = RT_BO_LT; break;
    case OP_LESS_EQUAL: bo = RT_BO_LE; break;
    case OP_LOGICAL_AND: bo = RT_BO_AND; break;
    case OP_LOGICAL_OR: bo = RT_BO_OR; break;
    default: bo = RT_BO_XOR; break;
    }
    RtBinaryParams p = {.op = bo};
    int in[2] = {materialize(s, arg_value(op, "x")), materialize(s, arg_value(op, "y"))};
    return emit_result(s, op, RT_OP_BINOP, in, 2, &p, sizeof p);
}

/* The reductions RT_OP_REDUCE does not run (other ops, int32) as RT_OP_REDUCEX. */
static int lower_reducex(LowerShared *s, const IrOp *op, IrValue *x, uint32_t axes) {
    int r;
    switch (op->kind) {
    case OP_REDUCE_SUM: r = RT_RX_SUM; break;
    case OP_REDUCE_MEAN: r = RT_RX_MEAN; break;
    case OP_REDUCE_MAX: r = RT_RX_MAX; break;
    case OP_REDUCE_MIN: r = RT_RX_MIN; break;
    case OP_REDUCE_PROD: r = RT_RX_PROD; break;
    case OP_REDUCE_L1_NORM: r = RT_RX_L1; break;
    case OP_REDUCE_L2_NORM: r = RT_RX_L2; break;
    case OP_REDUCE_LOG_SUM: r = RT_RX_LOG_SUM; break;
    case OP_REDUCE_LOG_SUM_EXP: r = RT_RX_LOG_SUM_EXP; break;
    case OP_REDUCE_SUM_SQUARE: r = RT_RX_SUM_SQUARE; break;
    case OP_REDUCE_ARGMAX: r = RT_RX_ARGMAX; break;
    default: r = RT_RX_ARGMIN; break;
    }
    RtReduceParams p = {.op = r, .axes = axes};
    int in = materialize(s, x);
    return emit_result(s, op, RT_OP_REDUCEX, &in, 1, &p, sizeof p);
}

/* The values of constant v as floats (malloc'd), or NULL after a diagnostic. */
static float *const_floats(LowerShared *s, const IrValue *v) {
    RtDType dt;
    bool owned;
    const void *d = const_data(s, v, &dt, &owned);
    if (!d) return NULL;
    int64_t n = ir_type_numel(&v->type);
    float *f = malloc(sizeof(float) * (size_t)(n + 1));
    MILC_ASSERT(f);
    for (int64_t i = 0; i < n; i++)
        f[i] = dt == RT_F16   ? half_to_float(((const uint16_t *)d)[i])
               : dt == RT_F32 ? ((const float *)d)[i]
               : dt == RT_I32 ? (float)((const int32_t *)d)[i]
                              : (float)((const uint8_t *)d)[i];
    if (owned) free((void *)d);
    return f;
}

/* A per-channel F32 weight [C, 1, ...] (rank - 1 dims) broadcasting along
 * dim 1 of a rank-`rank` value. */
static int channel_weight(LowerShared *s, const char *name, const float *v, int64_t c, int rank) {
    int64_t dims[MAXR];
    dims[0] = c;
    for (int i = 1; i < rank - 1; i++) dims[i] = 1;
    int id = check_rc(s, rtb_weight(s->b, name, RT_F32, rank - 1, dims, v));
    note_buf(s, id, rank - 1, dims);
    return id;
}

/* y = x · scale[c] + shift[c] along dim 1, as two broadcast BINARY ops
 * (scale or shift NULL: that one skipped). */
static int channel_affine(LowerShared *s, const IrOp *op, int x, const float *scale, const float *shift) {
    const IrType *t = rtype(op);
    int64_t c = t->dims[1];
    RtBinaryParams mul = {.op = RT_BIN_MUL}, add = {.op = RT_BIN_ADD};
    int cur = x;
    if (scale) {
        int in[2] = {cur, channel_weight(s, "scale", scale, c, t->rank)};
        int out = shift ? new_temp(s, RT_F32, t->rank, t->dims) : out_for(s, op);
        if (emit(s, RT_OP_BINARY, in, 2, out, &mul, sizeof mul) < 0) return -1;
        cur = out;
    }
    if (shift) {
        int in[2] = {cur, channel_weight(s, "shift", shift, c, t->rank)};
        int out = out_for(s, op);
        if (emit(s, RT_OP_BINARY, in, 2, out, &add, sizeof add) < 0) return -1;
        cur = out;
    }
    done(s, op, cur);
    return 0;
}

static int lower_batch_norm(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *g = arg_value(op, "gamma"), *b = arg_value(op, "beta");
    if (x->type.rank < 2) return FAIL("batch_norm: x needs a channel dim");
    int64_t c = x->type.dims[1];
    double eps = arg_f64_or(op, "epsilon", 1e-5);
    float *mean = const_floats(s, arg_value(op, "mean")), *var = const_floats(s, arg_value(op, "variance"));
    float *gv = g ? const_floats(s, g) : NULL, *bv = b ? const_floats(s, b) : NULL;
    int rc = -1;
    if (mean && var && (!g || gv) && (!b || bv)) {
        /* folded at compile time: y = x · γ/√(σ² + ε) + (β - μ γ/√(σ² + ε)) */
        for (int64_t i = 0; i < c; i++) {
            float sc = (float)((gv ? gv[i] : 1.0) / sqrt((double)var[i] + eps));
            var[i] = sc;
            mean[i] = (bv ? bv[i] : 0.0f) - mean[i] * sc;
        }
        int in = materialize(s, x);
        rc = channel_affine(s, op, in, var, mean);
    }
    free(mean), free(var), free(gv), free(bv);
    return rc;
}

static int lower_instance_norm(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *g = arg_value(op, "gamma"), *b = arg_value(op, "beta");
    const IrType *t = rtype(op);
    if (t->rank < 3) return FAIL("instance_norm: x needs spatial dims");
    RtNormParams p = {
        .kind = RT_NORM_LAYER, .axis_begin = 2, .axis_end = t->rank, .eps = (float)arg_f64_or(op, "epsilon", 1e-5)};
    int in = materialize(s, x);
    if (!g && !b) return emit_result(s, op, RT_OP_NORM, &in, 1, &p, sizeof p);
    int mid = new_temp(s, RT_F32, t->rank, t->dims);
    if (emit(s, RT_OP_NORM, &in, 1, mid, &p, sizeof p) < 0) return -1;
    float *gv = g ? const_floats(s, g) : NULL, *bv = b ? const_floats(s, b) : NULL;
    int rc = (g && !gv) || (b && !bv) ? -1 : channel_affine(s, op, mid, gv, bv);
    free(gv), free(bv);
    return rc;
}

/* l2_norm: x / sqrt(Σ x² + ε) over the last three dims (coremltools'
 * definition), as a sum of squares, rsqrt and a broadcast multiply. */
static int lower_l2_norm(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    const IrType *t = rtype(op);
    if (t->rank < 3) return FAIL("l2_norm: x needs rank >= 3");
    int64_t rd[MAXR];
    for (int i = 0; i < t->rank; i++) rd[i] = i < t->rank - 3 ? t->dims[i] : 1;
    RtReduceParams rp = {.op = RT_RX_SUM_SQUARE, .axes = 7u << (t->rank - 3)};
    RtUnaryParams up = {.op = RT_UN_RSQRT, .eps = (float)arg_f64_or(op, "epsilon", 1e-6)};
    RtBinaryParams mp = {.op = RT_BIN_MUL};
    int in = materialize(s, x), ss = new_temp(s, RT_F32, t->rank, rd), r = new_temp(s, RT_F32, t->rank, rd);
    if (emit(s, RT_OP_REDUCEX, &in, 1, ss, &rp, sizeof rp) < 0 || emit(s, RT_OP_UNARY, &ss, 1, r, &up, sizeof up) < 0)
        return -1;
    int b[2] = {in, r};
    return emit_result(s, op, RT_OP_BINARY, b, 2, &mp, sizeof mp);
}

/* local_response_norm: x / (k + α/size · Σ x²)^β, the sum over a window of
 * `size` channels around each one ((size - 1) / 2 before it), as a square,
 * an average pool over channels ([B, 1, C, rest]: the window always counts
 * `size` taps, so avg = Σ / size), an affine map, a power and a multiply. */
static int lower_lrn(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    const IrType *t = rtype(op);
    int64_t size = 0;
    if (!ir_op_arg_i64(op, "size", &size) || size < 1)
        return FAIL("local_response_norm: 'size' must be a positive constant");
    if (t->rank < 3) return FAIL("local_response_norm: x needs rank >= 3");
    double alpha = arg_f64_or(op, "alpha", 1e-4), beta = arg_f64_or(op, "beta", 0.75), k = arg_f64_or(op, "k", 1);
    int64_t rest = 1;
    for (int i = 2; i < t->rank; i++) rest *= t->dims[i];
    int64_t v4[4] = {t->dims[0], 1, t->dims[1], rest};
    RtEltParams sq = {.op = RT_EL_SQUARE}, lin = {.op = RT_EL_LINEAR, .alpha = (float)alpha, .beta = (float)k};
    RtConvParams pp = {.nsp = 2,
                       .groups = 1,
                       .pool = RT_POOL_AVG,
                       .k = {(int32_t)size, 1, 1},
                       .stride = {1, 1, 1},
                       .dil = {1, 1, 1},
                       .pad_lo = {(int32_t)((size - 1) / 2), 0, 0},
                       .pad_hi = {(int32_t)(size - 1 - (size - 1) / 2), 0, 0},
                       .out = {(int32_t)t->dims[1], (int32_t)rest, 1}};
    RtBinaryParams pw = {.op = RT_BIN_POW}, mul = {.op = RT_BIN_MUL};
    float nb = (float)-beta;
    int64_t one = 1;
    int in = buffer_as(s, x, 4, v4, -1);
    int x2 = new_temp(s, RT_F32, 4, v4), av = new_temp(s, RT_F32, 4, v4), d = new_temp(s, RT_F32, 4, v4);
    int f = new_temp(s, RT_F32, 4, v4), e = check_rc(s, rtb_weight(s->b, "lrn_beta", RT_F32, 1, &one, &nb));
    note_buf(s, e, 1, &one);
    if (emit(s, RT_OP_ELTWISE, &in, 1, x2, &sq, sizeof sq) < 0 || emit(s, RT_OP_POOL, &x2, 1, av, &pp, sizeof pp) < 0 ||
        emit(s, RT_OP_ELTWISE, &av, 1, d, &lin, sizeof lin) < 0 ||
        emit(s, RT_OP_BINARY, (const int[]){d, e}, 2, f, &pw, sizeof pw) < 0)
        return -1;
    int y = new_temp(s, RT_F32, 4, v4);
    if (emit(s, RT_OP_BINARY, (const int[]){in, f}, 2, y, &mul, sizeof mul) < 0) return -1;
    set_buffer(s, op->results[0], y, 4, v4);
    return 0;
}

/* cumsum and gather_along_axis: one kernel each (kernels_eltwise.c). */
static int lower_cumsum(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t a = 0, ex = 0, rv = 0;
    ir_op_arg_i64(op, "axis", &a);
    ir_op_arg_i64(op, "exclusive", &ex);
    ir_op_arg_i64(op, "reverse", &rv);
    RtScanParams p = {.axis = normalize_axis(a, x->type.rank), .exclusive = ex != 0, .reverse = rv != 0};
    int in = materialize(s, x);
    return emit_result(s, op, RT_OP_CUMSUM, &in, 1, &p, sizeof p);
}

static int lower_gather_axis(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t a = 0;
    ir_op_arg_i64(op, "axis", &a);
    RtAxisParams p = {.axis = normalize_axis(a, x->type.rank)};
    int in[2] = {materialize(s, x), materialize(s, arg_value(op, "indices"))};
    return emit_result(s, op, RT_OP_GATHER_AXIS, in, 2, &p, sizeof p);
}

/* Padding of a convolution or pool on spatial dim i: lo and hi. */
static int conv_pads(LowerShared *s, const IrOp *op, int nsp, const int64_t *in, const int64_t *out, const int64_t *k,
                     const int64_t *st, const int64_t *dil, bool transpose, int64_t *lo, int64_t *hi) {
    const IrLiteral *pt = ir_op_arg_const(op, "pad_type");
    const char *mode = pt ? ir_lit_str(pt, 0) : "valid";
    if (!mode) return FAIL("%s: pad_type must be a constant string", mil_op_name(op->kind));
    int64_t pads[2 * 3] = {0};
    if (!strcmp(mode, "custom")) {
        if (const_ints(s, op, "pad", pads, 2 * 3) != 2 * nsp)
            return s->failed ? -1 : FAIL("%s: custom padding needs 'pad' of %d values", mil_op_name(op->kind), 2 * nsp);
    }
    for (int i = 0; i < nsp; i++) {
        int64_t span = (k[i] - 1) * dil[i] + 1, total;
        if (!strcmp(mode, "custom")) {
            lo[i] = pads[2 * i], hi[i] = pads[2 * i + 1];
            continue;
        }
        if (!strcmp(mode, "valid")) {
            lo[i] = hi[i] = 0;
            continue;
        }
        if (strcmp(mode, "same") && strcmp(mode, "same_lower"))
            return FAIL("%s: unknown pad_type '%s'", mil_op_name(op->kind), mode);
        total = transpose ? (in[i] - 1) * st[i] + span - out[i] : (out[i] - 1) * st[i] + span - in[i];
        if (total < 0) total = 0;
        lo[i] = !strcmp(mode, "same_lower") ? (total + 1) / 2 : total / 2;
        hi[i] = total - lo[i];
    }
    return 0;
}

/* Fills the geometry of p for x of rank 2 + nsp from the op's arguments. */
static int conv_geometry(LowerShared *s, const IrOp *op, const IrValue *x, const int64_t *k, bool transpose, bool pool,
                         RtConvParams *p) {
    int nsp = x->type.rank - 2;
    const IrType *t = rtype(op);
    if (nsp < 1 || nsp > 3) return FAIL("%s: the CPU backend takes 1 to 3 spatial dims", mil_op_name(op->kind));
    int64_t st[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, lo[3] = {0}, hi[3] = {0};
    if (const_ints(s, op, "strides", st, 3) == -1 || (!pool && const_ints(s, op, "dilations", dil, 3) == -1)) return -1;
    if (conv_pads(s, op, nsp, x->type.dims + 2, t->dims + 2, k, st, dil, transpose, lo, hi) < 0) return -1;
    memset(p, 0, sizeof *p);
    p->nsp = nsp, p->groups = 1, p->transpose = transpose;
    for (int i = 0; i < 3; i++) {
        bool u = i < nsp;
        p->k[i] = u ? (int32_t)k[i] : 1, p->stride[i] = u ? (int32_t)st[i] : 1, p->dil[i] = u ? (int32_t)dil[i] : 1;
        p->pad_lo[i] = u ? (int32_t)lo[i] : 0, p->pad_hi[i] = u ? (int32_t)hi[i] : 0,
        p->out[i] = u ? (int32_t)t->dims[2 + i] : 1;
    }
    return 0;
}

static const char *arg_str_or(const IrOp *op, const char *name, const char *def);

/* conv_quantized's weight, dense: W_q · quant_scale + quant_bias (each one
 * value, or one per output channel), as coremltools hands the op to Core
 * ML's convolution layer ('linear').  Its 'lut' form carries no table (that
 * mapping wants one) and is refused.  Malloc'd, or NULL after a diagnostic. */
static float *conv_quantized_weight(LowerShared *s, const IrOp *op, const IrValue *w) {
    const char *qt = arg_str_or(op, "quantization_type", NULL);
    if (!qt || strcmp(qt, "linear"))
        return FAIL("conv_quantized: 'quantization_type' %s is not run by the CPU backend (linear is: the op carries "
                    "no look-up table)",
                    qt ? qt : "?"),
               NULL;
    const IrValue *sv = arg_value(op, "quant_scale"), *bv = arg_value(op, "quant_bias");
    int64_t n = ir_type_numel(&w->type), cout = w->type.dims[0], ns = ir_type_numel(&sv->type),
            nb = ir_type_numel(&bv->type);
    if ((ns != 1 && ns != cout) || (nb != 1 && nb != cout))
        return FAIL("conv_quantized: 'quant_scale' and 'quant_bias' must hold 1 value or %lld (one per output "
                    "channel), not %lld and %lld",
                    (long long)cout, (long long)ns, (long long)nb),
               NULL;
    double *q = const_values(s, w), *sc = q ? const_values(s, sv) : NULL, *qb = sc ? const_values(s, bv) : NULL;
    float *out = qb ? malloc(sizeof(float) * (size_t)(n + 1)) : NULL;
    for (int64_t i = 0; out && i < n; i++) {
        int64_t o = i / (n / cout);
        out[i] = (float)(q[i] * sc[ns == 1 ? 0 : o] + qb[nb == 1 ? 0 : o]);
    }
    free(q), free(sc), free(qb);
    return out;
}

/* A constant's values as an F32 weight of its own shape (conv_quantized's
 * uint8 bias, read as the numbers it holds). */
static int float_weight(LowerShared *s, const IrValue *v) {
    double *d = const_values(s, v);
    if (!d) return -1;
    int64_t n = ir_type_numel(&v->type);
    float *f = malloc(sizeof(float) * (size_t)(n + 1));
    MILC_ASSERT(f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)d[i];
    int id = named_weight(s, v->name, RT_F32, v->type.rank, v->type.dims, f, false);
    free(d), free(f);
    return id;
}

static int lower_conv_general(LowerShared *s, const IrOp *op) {
    bool transpose = op->kind == OP_CONV_TRANSPOSE, quant = op->kind == OP_CONV_QUANTIZED;
    IrValue *x = arg_value(op, "x"), *w = arg_value(op, "weight"), *bias = arg_value(op, "bias");
    const IrType *t = rtype(op);
    RtConvParams p;
    if (conv_geometry(s, op, x, w->type.dims + 2, transpose, false, &p) < 0) return -1;
    int64_t groups = 1;
    ir_op_arg_i64(op, "groups", &groups);
    p.groups = (int32_t)groups;
    if (bias && !ir_value_const(bias))
        return FAIL("%s: the bias must be a constant on the CPU backend", mil_op_name(op->kind));
    if (quant && !ir_value_const(w)) return FAIL("conv_quantized: the weight must be a constant on the CPU backend");
    int xin = materialize(s, x), bw = !bias ? 0 : quant ? float_weight(s, bias) : const_weight(s, bias);
    if (!transpose && groups == 1 && p.nsp == 2 && (ir_value_const(w) || backend_is_constexpr(w))) {
        /* one group, 2-D: x channels last and padded once, then GEMMs that
         * read it where it lies */
        int64_t C = x->type.dims[1], cout = t->dims[1], kh = p.k[0], kw = p.k[1];
        int64_t pd[4] = {x->type.dims[0], (int64_t)(p.out[0] - 1) * p.stride[0] + (kh - 1) * p.dil[0] + 1,
                         (int64_t)(p.out[1] - 1) * p.stride[1] + (kw - 1) * p.dil[1] + 1, C};
        int xp = new_temp(s, RT_F32, 4, pd);
        if (emit(s, RT_OP_PAD_NHWC, &xin, 1, xp, &p, sizeof p) < 0) return -1;
        float *wv = quant ? conv_quantized_weight(s, op, w) : const_floats(s, w);
        if (!wv) return -1;
        float *wt = malloc(sizeof(float) * (size_t)(kh * kw * C * cout) + 1);
        MILC_ASSERT(wt);
        /* W [Cout, KH·KW·C], K in tap-major order: the builder packs it
         * into 64-column panels as a GEMM weight */
        for (int64_t o = 0; o < cout; o++)
            for (int64_t c = 0; c < C; c++)
                for (int64_t ky = 0; ky < kh; ky++)
                    for (int64_t kx = 0; kx < kw; kx++)
                        wt[o * kh * kw * C + (ky * kw + kx) * C + c] = wv[((o * C + c) * kh + ky) * kw + kx];
        int64_t wd[2] = {cout, kh * kw * C};
        char name[RT_NAME_MAX];
        snprintf(name, sizeof name, "%s", w->name);
        int wid = check_rc(s, rtb_weight(s->b, name, RT_F32, 2, wd, wt));
        note_buf(s, wid, 2, wd);
        free(wv), free(wt);
        p.has_bias = bias != NULL;
        int in[3] = {xp, wid, bw};
        RtConvParams q = p;
        q.pad_lo[0] = q.pad_lo[1] = q.pad_hi[0] = q.pad_hi[1] = 0; /* x comes padded */
        return emit_result(s, op, RT_OP_CONV_GEMM, in, bias ? 3 : 2, &q, sizeof q);
    }
    p.has_bias = bias != NULL;
    int wid;
    if (quant) {
        float *wv = conv_quantized_weight(s, op, w);
        wid = wv ? named_weight(s, w->name, RT_F32, w->type.rank, w->type.dims, wv, false) : -1;
        free(wv);
    } else {
        wid = materialize(s, w);
    }
    int in[3] = {xin, wid, bw};
    return emit_result(s, op, RT_OP_CONV, in, bias ? 3 : 2, &p, sizeof p);
}

static int lower_pool(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t k[3] = {1, 1, 1};
    if (const_ints(s, op, "kernel_sizes", k, 3) != x->type.rank - 2)
        return s->failed ? -1 : FAIL("%s: 'kernel_sizes' must give one size per spatial dim", mil_op_name(op->kind));
    RtConvParams p;
    if (conv_geometry(s, op, x, k, false, true, &p) < 0) return -1;
    p.pool = op->kind == OP_MAX_POOL ? RT_POOL_MAX : op->kind == OP_AVG_POOL ? RT_POOL_AVG : RT_POOL_L2;
    int64_t ex = 0;
    ir_op_arg_i64(op, "exclude_padding_from_average", &ex);
    p.exclude_pad = ex != 0;
    int in = materialize(s, x);
    return emit_result(s, op, RT_OP_POOL, &in, 1, &p, sizeof p);
}

/* ---- data movement as views ---- */

static int lower_identity(LowerShared *s, const IrOp *op) {
    LVal *L = lval(s, arg_value(op, "x"));
    if (!L->has) return -1;
    View v = L->v;
    return set_view(s, op->results[0], &v, L->pend);
}

static int lower_reverse(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t ax[MAXR];
    int n = const_ints(s, op, "axes", ax, MAXR);
    View v;
    if (n == -1 || !resolved_view(s, x, &v)) return -1;
    bool rev[MAXR] = {false};
    for (int i = 0; i < (n == -2 ? v.rank : n); i++) rev[n == -2 ? i : normalize_axis(ax[i], v.rank)] = true;
    for (int i = 0; i < v.rank; i++)
        if (rev[i]) v.offset += (v.dims[i] - 1) * v.strides[i], v.strides[i] = -v.strides[i];
    return set_view(s, op->results[0], &v, false);
}

static int lower_stack(LowerShared *s, const IrOp *op) {
    IrArg *vals = ir_op_arg(op, "values");
    int64_t a = 0;
    if (!ir_op_arg_i64(op, "axis", &a)) return FAIL("stack: 'axis' must be a constant");
    const IrType *t = rtype(op);
    int ax = normalize_axis(a, t->rank);
    int out = copy_dest(s, op->results[0]);
    if (out < 0) return -1;
    int64_t st[MAXR], dst[MAXR];
    row_major(t->rank, t->dims, st);
    for (int i = 0, j = 0; i < t->rank; i++)
        if (i != ax) dst[j++] = st[i];
    int n = vals->kind == IR_ARG_TUPLE ? vals->nitems : 1;
    for (int i = 0; i < n; i++) {
        IrValue *part = vals->kind == IR_ARG_TUPLE ? vals->items[i] : vals->value;
        View v;
        if (!resolved_view(s, part, &v) || emit_copy(s, &v, out, i * st[ax], dst) < 0) return -1;
    }
    done(s, op, out);
    return 0;
}

/* A constant result (fill, shape): one weight, broadcast by a copy when it
 * holds a single value. */
static int lower_const_result(LowerShared *s, const IrOp *op, RtDType dt, const void *data, int64_t n) {
    const IrType *t = rtype(op);
    int64_t one = 1, nel = ir_type_numel(t);
    int w =
        check_rc(s, rtb_weight(s->b, op->results[0]->name, dt, n == 1 ? 1 : t->rank, n == 1 ? &one : t->dims, data));
    if (w < 0) return -1;
    note_buf(s, w, n == 1 ? 1 : t->rank, n == 1 ? &one : t->dims);
    if (n != 1) {
        View v;
        view_ident(&v, w, t->rank, t->dims);
        return set_view(s, op->results[0], &v, false);
    }
    int out = out_for(s, op);
    RtCopyParams p;
    memset(&p, 0, sizeof p);
    p.rank = 1, p.dims[0] = nel, p.src_stride[0] = 0, p.dst_stride[0] = 1;
    if (emit(s, RT_OP_COPY, &w, 1, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

/* op's result, every element v (in the result's dtype). */
static int lower_splat(LowerShared *s, const IrOp *op, double v) {
    RtDType dt = rt_dt(rtype(op)->dtype);
    float f = (float)v;
    int32_t i = (int32_t)v;
    uint8_t b = v != 0;
    return lower_const_result(s, op, dt, dt == RT_F32 ? (const void *)&f : dt == RT_I32 ? (const void *)&i : &b, 1);
}

static int lower_fill(LowerShared *s, const IrOp *op) { return lower_splat(s, op, arg_f64_or(op, "value", 0)); }

static int lower_shape(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int32_t d[MAXR];
    for (int i = 0; i < x->type.rank; i++) d[i] = (int32_t)x->type.dims[i];
    if (x->type.rank == 0) return FAIL("shape: of a scalar is an empty tensor, which the CPU backend cannot hold");
    return lower_const_result(s, op, RT_I32, d, x->type.rank);
}

/* space_to_depth / depth_to_space with TensorFlow's order (Core ML's): the
 * channel of block offset (i, j) and input channel c is (i·bs + j)·C + c.
 * upsample_nearest_neighbor with integer scales: each element repeated. */
static int lower_rearrange(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    View v, w;
    if (!resolved_view(s, x, &v)) return -1;
    if (v.rank != 4) return FAIL("%s: the CPU backend needs x of rank 4", mil_op_name(op->kind));
    int64_t B = v.dims[0], C = v.dims[1], H = v.dims[2], W = v.dims[3];
    int64_t sb = v.strides[0], sc = v.strides[1], sh = v.strides[2], sw = v.strides[3];
    w = v;
    w.rank = 6;
    if (op->kind == OP_UPSAMPLE_NEAREST_NEIGHBOR) {
        double fh = arg_f64_or(op, "scale_factor_height", 1), fw = arg_f64_or(op, "scale_factor_width", 1);
        if (fh != floor(fh) || fw != floor(fw) || fh < 1 || fw < 1)
            return FAIL("upsample_nearest_neighbor: the CPU backend needs integer scale factors");
        int64_t d[6] = {B, C, H, (int64_t)fh, W, (int64_t)fw}, st[6] = {sb, sc, sh, 0, sw, 0};
        dims_copy(w.dims, d, 6), dims_copy(w.strides, st, 6);
        return set_view(s, op->results[0], &w, true);
    }
    int64_t bs = 0;
    if (!ir_op_arg_i64(op, "block_size", &bs) || bs < 1)
        return FAIL("%s: 'block_size' must be a positive constant", mil_op_name(op->kind));
    if (op->kind == OP_SPACE_TO_DEPTH) { /* [B, C, H/bs, i, W/bs, j] read as [B, i, j, C, H/bs, W/bs] */
        int64_t d[6] = {B, bs, bs, C, H / bs, W / bs}, st[6] = {sb, sh, sw, sc, bs * sh, bs * sw};
        dims_copy(w.dims, d, 6), dims_copy(w.strides, st, 6);
    } else { /* [B, i, j, C', H, W] read as [B, C', H, i, W, j] */
        int64_t c2 = C / (bs * bs);
        int64_t d[6] = {B, c2, H, bs, W, bs}, st[6] = {sb, sc, sh, bs * c2 * sc, sw, c2 * sc};
        dims_copy(w.dims, d, 6), dims_copy(w.strides, st, 6);
    }
    return set_view(s, op->results[0], &w, true);
}

/* ---- palettized weights (constexpr_lut_to_dense) ---- */

/* A constant's elements as packed bytes, low bits first (MILBlob's layout):
 * a blob record's bytes as they lie (*owned false), or a literal packed here.
 * what names the argument in messages ("constexpr_lut_to_dense: 'indices'").
 * NULL after a diagnostic. */
static const uint8_t *packed_bytes(LowerShared *s, const IrValue *iv, int bits, const char *what, bool *owned) {
    const IrLiteral *l = ir_value_const(iv);
    SrcLoc loc = iv->def ? iv->def->loc : iv->loc;
    int64_t n = ir_type_numel(&iv->type);
    size_t bytes = (size_t)((n * bits + 7) / 8);
    *owned = false;
    if (!l || n < 0) return fail_at(s, loc, "%s must be a constant", what), NULL;
    if (l->kind == IR_LIT_BLOBFILE) {
        const MilBlobFile *f = blob_file(s, l->blob_path, loc);
        const MilBlobRecord *r = f ? milblob_find(f, l->blob_offset) : NULL;
        if (!f) return NULL;
        if (!r || milblob_dtype_bits(r->dtype) != (unsigned)bits || r->size < bytes)
            return fail_at(s, loc, "%s: the record at offset %llu does not hold %lld %d-bit values", what,
                           (unsigned long long)l->blob_offset, (long long)n, bits),
                   NULL;
        return r->data;
    }
    if (l->kind != IR_LIT_DATA) return fail_at(s, loc, "%s: bad literal", what), NULL;
    uint8_t *p = calloc(bytes + 1, 1);
    MILC_ASSERT(p);
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)ir_lit_i64(l, (size_t)i) & ((1u << bits) - 1), bit = (uint64_t)i * (uint64_t)bits;
        p[bit / 8] |= (uint8_t)(v << (bit % 8));
        if (bit % 8 + (uint64_t)bits > 8) p[bit / 8 + 1] |= (uint8_t)(v >> (8 - bit % 8));
    }
    *owned = true;
    return p;
}

static const uint8_t *lut_indices(LowerShared *s, const IrValue *iv, int bits, bool *owned) {
    return packed_bytes(s, iv, bits, "constexpr_lut_to_dense: 'indices'", owned);
}

/* What a constexpr_lut_to_dense value is made of, or false after a diagnostic. */
typedef struct {
    const IrValue *ix, *lut;
    int bits;
    int64_t palette, vec; /* vec: entries per palette slot (a vector palette widens dim axis) */
    int axis;
} LutInfo;

static bool lut_info(LowerShared *s, const IrValue *v, LutInfo *li) {
    const IrOp *op = v->def;
    li->ix = arg_value(op, "indices"), li->lut = arg_value(op, "lut");
    li->bits = (int)ir_dtype_bits(li->ix->type.dtype);
    const IrType *lt = &li->lut->type;
    li->palette = lt->dims[lt->rank - 2];
    li->vec = lt->dims[lt->rank - 1];
    int64_t ax = 0;
    ir_op_arg_i64(op, "vector_axis", &ax);
    li->axis = (int)(ax < 0 ? ax + li->ix->type.rank : ax);
    return true;
}

/* The dense values of a constexpr_lut_to_dense result (malloc'd), for
 * consumers other than a linear layer (which reads the indices as they are). */
static float *lut_dense_floats(LowerShared *s, const IrValue *v) {
    LutInfo li;
    if (!lut_info(s, v, &li)) return NULL;
    bool owned;
    const uint8_t *ix = lut_indices(s, li.ix, li.bits, &owned);
    float *lut = ix ? const_floats(s, li.lut) : NULL;
    if (!lut) {
        if (owned) free((void *)ix);
        return NULL;
    }
    const IrType *t = &li.ix->type, *lt = &li.lut->type;
    int64_t n = ir_type_numel(t), vec = li.vec;
    float *w = malloc(sizeof(float) * (size_t)(n * vec + 1));
    MILC_ASSERT(w);
    /* index i (coordinates c) fills output coordinates c with c[axis] · vec + k, k < vec */
    int64_t ost[MAXR], st = 1;
    for (int d = t->rank - 1; d >= 0; d--) ost[d] = st, st *= t->dims[d] * (vec > 1 && d == li.axis ? vec : 1);
    for (int64_t i = 0; i < n; i++) {
        uint64_t bit = (uint64_t)i * (uint64_t)li.bits;
        unsigned raw = ix[bit / 8] | (bit % 8 + (uint64_t)li.bits > 8 ? (unsigned)ix[bit / 8 + 1] << 8 : 0u);
        unsigned id = (raw >> (bit % 8)) & ((1u << li.bits) - 1);
        int64_t blk = 0, rest = i, off = 0;
        int64_t coord[MAXR];
        for (int d = t->rank - 1; d >= 0; d--) coord[d] = rest % t->dims[d], rest /= t->dims[d];
        for (int d = 0; d < t->rank; d++) {
            blk = blk * lt->dims[d] + coord[d] / (t->dims[d] / lt->dims[d]);
            off += coord[d] * (vec > 1 && d == li.axis ? vec : 1) * ost[d];
        }
        for (int64_t k = 0; k < vec; k++)
            w[off + k * (vec > 1 ? ost[li.axis] : 0)] = lut[(blk * li.palette + id) * vec + k];
    }
    free(lut);
    if (owned) free((void *)ix);
    return w;
}

/* linear whose weight is a palettized [N, K] (1- to 8-bit indices, each
 * row a whole number of bytes): RT_OP_LUT_GEMM on the packed indices
 * (stored in the artifact as they are: a 4-bit weight is a quarter of
 * fp16's bytes, a 2-bit one an eighth) and the palettes. */
static int lower_lut_linear(LowerShared *s, const IrOp *op, const IrValue *w) {
    IrValue *x = arg_value(op, "x"), *bias = arg_value(op, "bias");
    LutInfo li;
    if (!lut_info(s, w, &li)) return -1;
    if (li.vec != 1) /* vector palettes: the dense weight (lut_dense_floats) */
        return lower_gemm(s, op, op->results[0], RT_GEMM_ROWS, x, w, bias, RT_ACT_NONE, NULL);
    const IrType *t = &li.ix->type, *lt = &li.lut->type;
    int64_t N = t->dims[0], K = t->dims[1];
    if (t->rank != 2 || K * li.bits % 8) /* rows not whole bytes: the dense weight */
        return lower_gemm(s, op, op->results[0], RT_GEMM_ROWS, x, w, bias, RT_ACT_NONE, NULL);
    if (bias && !ir_value_const(bias)) return FAIL("the bias of linear must be a constant");
    bool owned;
    const uint8_t *ix = lut_indices(s, li.ix, li.bits, &owned);
    float *lut = ix ? const_floats(s, li.lut) : NULL;
    if (!lut) {
        if (owned) free((void *)ix);
        return -1;
    }
    int64_t idims[2] = {N, K * li.bits / 8}, ld = ir_type_numel(lt);
    int ixw = named_weight(s, li.ix->name, RT_U8, 2, idims, ix, !owned);
    int lw = named_weight(s, li.lut->name, RT_F32, 1, &ld, lut, false);
    if (owned) free((void *)ix);
    free(lut);
    RtLutParams p = {.bits = li.bits, .bn = (int32_t)lt->dims[0], .bk = (int32_t)lt->dims[1], .has_bias = bias != NULL};
    int in[4] = {materialize(s, x), ixw, lw, bias ? const_weight(s, bias) : 0};
    return emit_result(s, op, RT_OP_LUT_GEMM, in, bias ? 4 : 3, &p, sizeof p);
}

/* linear whose weight is 8- or 4-bit integers with a scale and offset per
 * block of [N, K] (constexpr_affine_dequantize per tensor or per output
 * channel; constexpr_blockwise_shift_scale): RT_OP_QGEMM on the bytes as
 * stored (half of an fp16 weight's, a quarter of fp32's; 4-bit: half
 * that), the scales and offsets as fp32.  1: the weight has another form (a
 * scale per input channel, 4-bit blocks that split a byte), which the
 * caller makes dense. */
static int lower_q_linear(LowerShared *s, const IrOp *op, const IrValue *w) {
    const IrOp *d = w->def;
    bool affine = d->kind == OP_CONSTEXPR_AFFINE_DEQUANTIZE;
    const IrValue *q = arg_value(d, affine ? "quantized_data" : "data"), *sc = arg_value(d, "scale"),
                  *zp = arg_value(d, affine ? "zero_point" : "offset");
    const IrType *t = &q->type;
    bool q4 = t->dtype == IR_DT_INT4 || t->dtype == IR_DT_UINT4;
    if ((t->dtype != IR_DT_INT8 && t->dtype != IR_DT_UINT8 && !q4) || t->rank != 2 || !sc) return 1;
    int64_t N = t->dims[0], K = t->dims[1], ns = ir_type_numel(&sc->type), nz = zp ? ir_type_numel(&zp->type) : 1;
    int64_t bn = 1, bk = 1;
    if (affine) {
        int64_t ax = 0;
        ir_op_arg_i64(d, "axis", &ax);
        if ((ns > 1 || nz > 1) && ax != 0) return 1;
        bn = ns > 1 || nz > 1 ? N : 1;
    } else if (sc->type.rank == 2) {
        bn = sc->type.dims[0], bk = sc->type.dims[1];
    } else {
        return 1;
    }
    if (bn < 1 || bk < 1 || N % bn || K % bk || (ns != 1 && ns != bn * bk) || (nz != 1 && nz != bn * bk)) return 1;
    if (q4 && (K / bk) % 2) return 1;
    IrValue *x = arg_value(op, "x"), *bias = arg_value(op, "bias");
    if (bias && !ir_value_const(bias)) return FAIL("the bias of linear must be a constant");
    double *vs = const_values(s, sc), *vz = vs && zp ? const_values(s, zp) : NULL;
    if (!vs || (zp && !vz)) {
        free(vs);
        return -1;
    }
    bool owned;
    const uint8_t *bytes = packed_bytes(
        s, q, q4 ? 4 : 8,
        affine ? "constexpr_affine_dequantize: 'quantized_data'" : "constexpr_blockwise_shift_scale: 'data'", &owned);
    int64_t nb = bn * bk, qd[2] = {N, q4 ? K / 2 : K};
    float *fs = malloc(sizeof(float) * (size_t)(2 * nb)), *fz = fs + nb;
    MILC_ASSERT(fs);
    for (int64_t i = 0; i < nb; i++) fs[i] = (float)vs[ns == 1 ? 0 : i], fz[i] = vz ? (float)vz[nz == 1 ? 0 : i] : 0.0f;
    free(vs), free(vz);
    int rc = -1;
    if (bytes) {
        int qw = named_weight(s, q->name, RT_U8, 2, qd, bytes, !owned);
        int sw = named_weight(s, sc->name, RT_F32, 1, &nb, fs, false);
        char on[RT_NAME_MAX];
        snprintf(on, sizeof on, "%s_offset", q->name);
        int ow = named_weight(s, on, RT_F32, 1, &nb, fz, false);
        int flags = (t->dtype == IR_DT_INT8 || t->dtype == IR_DT_INT4 ? RT_QG_SIGNED : 0) | (q4 ? RT_QG_INT4 : 0);
        RtQGemmParams p = {.flags = flags, .bn = (int32_t)bn, .bk = (int32_t)bk, .has_bias = bias != NULL};
        int in[5] = {materialize(s, x), qw, sw, ow, bias ? const_weight(s, bias) : 0};
        rc = emit_result(s, op, RT_OP_QGEMM, in, bias ? 5 : 4, &p, sizeof p);
        if (owned) free((void *)bytes);
    }
    free(fs);
    return rc;
}

/* linear whose weight is constexpr_sparse_to_dense [N, K]: RT_OP_SPGEMM on
 * the mask, one byte-aligned row of bits per output, and the nonzero values
 * in their own dtype (fp16 stays fp16), so nothing is made dense.  1: the
 * weight is not [N, K] (the caller makes it dense). */
static int lower_sparse_linear(LowerShared *s, const IrOp *op, const IrValue *w) {
    const IrOp *d = w->def;
    const IrValue *nzv = arg_value(d, "nonzero_data"), *mv = arg_value(d, "mask");
    if (w->type.rank != 2 || !nzv || !mv) return 1;
    int64_t N = w->type.dims[0], K = w->type.dims[1], nnz = ir_type_numel(&nzv->type), rb = (K + 7) / 8;
    if (nnz < 0 || nnz > INT32_MAX - 16) return 1;
    IrValue *x = arg_value(op, "x"), *bias = arg_value(op, "bias");
    if (bias && !ir_value_const(bias)) return FAIL("the bias of linear must be a constant");
    double *a = const_values(s, nzv), *b = a ? const_values(s, mv) : NULL;
    if (!b) {
        free(a);
        return -1;
    }
    bool packed = ir_op_arg(d, "shape") != NULL, f16 = nzv->type.dtype == IR_DT_FP16;
    uint8_t *mask = calloc((size_t)(N * rb) + 1, 1);
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(N + 1));
    void *vals = calloc((size_t)(nnz + 16), f16 ? 2 : 4);
    MILC_ASSERT(mask && start && vals);
    int64_t j = 0;
    for (int64_t n = 0; n < N; n++) {
        start[n] = (int32_t)(j < nnz ? j : nnz);
        for (int64_t k = 0; k < K; k++) {
            int64_t i = n * K + k;
            if (!sparse_mask_set(b, i, packed)) continue;
            if (j < nnz) {
                if (f16)
                    ((uint16_t *)vals)[j] = float_to_half((float)a[j]);
                else
                    ((float *)vals)[j] = (float)a[j];
            }
            j++;
            mask[n * rb + k / 8] |= (uint8_t)(1u << (k % 8));
        }
    }
    start[N] = (int32_t)(j < nnz ? j : nnz);
    free(a), free(b);
    int rc = -1;
    if (j != nnz) {
        fail_at(s, d->loc, "constexpr_sparse_to_dense: the mask sets %lld bits for %lld values", (long long)j,
                (long long)nnz);
    } else {
        char nm[RT_NAME_MAX];
        int64_t md[2] = {N, rb}, vd = nnz + 16, sd = N + 1;
        snprintf(nm, sizeof nm, "%s_mask", w->name);
        int mw = named_weight(s, nm, RT_U8, 2, md, mask, false);
        snprintf(nm, sizeof nm, "%s_values", w->name);
        int vw = named_weight(s, nm, f16 ? RT_F16 : RT_F32, 1, &vd, vals, false);
        snprintf(nm, sizeof nm, "%s_start", w->name);
        int sw = named_weight(s, nm, RT_I32, 1, &sd, start, false);
        RtSpGemmParams p = {.has_bias = bias != NULL};
        int in[5] = {materialize(s, x), mw, vw, sw, bias ? const_weight(s, bias) : 0};
        rc = emit_result(s, op, RT_OP_SPGEMM, in, bias ? 5 : 4, &p, sizeof p);
    }
    free(mask), free(start), free(vals);
    return rc;
}

/* ---- scatter, sort, quantization and random ops ---- */

/* A string argument (its default when absent), or NULL when not constant. */
static const char *arg_str_or(const IrOp *op, const char *name, const char *def) {
    if (!ir_op_arg(op, name)) return def;
    const IrLiteral *l = ir_op_arg_const(op, name);
    return l ? ir_lit_str(l, 0) : NULL;
}

/* An op with several results: each result its own buffer. */
static int emit_results(LowerShared *s, const IrOp *op, RtOpKind k, const int *in, int nin, int nout, const void *p,
                        size_t plen) {
    int out[RT_MAX_OUT];
    for (int i = 0; i < nout; i++) {
        const IrType *t = &op->results[i]->type;
        if ((out[i] = result_buf(s, op->results[i], t->rank, t->dims)) < 0) return -1;
    }
    for (int i = 0; i < nin; i++)
        if (in[i] < 0) return -1;
    if (s->failed || check_rc(s, rtb_op(s->b, k, in, nin, out, nout, p, plen)) < 0) return -1;
    s->nops++;
    for (int i = 0; i < nout; i++) set_buffer(s, op->results[i], out[i], s->bi[out[i]].rank, s->bi[out[i]].dims);
    return 0;
}

static int lower_scatter(LowerShared *s, const IrOp *op) {
    static const char *const modes[RT_SCM_COUNT_] = {"update", "add", "sub", "mul", "div", "max", "min"};
    const char *m = arg_str_or(op, "mode", "add");
    RtScatterParams p = {.kind = op->kind == OP_SCATTER              ? RT_SC_AXIS
                                 : op->kind == OP_SCATTER_ALONG_AXIS ? RT_SC_ALONG
                                                                     : RT_SC_ND,
                         .mode = -1};
    for (int i = 0; m && i < RT_SCM_COUNT_; i++)
        if (strcmp(m, modes[i]) == 0) p.mode = i;
    if (p.mode < 0)
        return FAIL("%s: 'mode' must be a constant update, add, sub, mul, div, max or min", mil_op_name(op->kind));
    IrValue *d = arg_value(op, "data"), *ix = arg_value(op, "indices"), *u = arg_value(op, "updates");
    if (!d || !ix || !u) return FAIL("%s: 'data', 'indices' and 'updates' must be tensors", mil_op_name(op->kind));
    if (p.kind != RT_SC_ND) {
        int64_t a = 0;
        if (!ir_op_arg_i64(op, "axis", &a)) return FAIL("%s: 'axis' must be a constant", mil_op_name(op->kind));
        p.axis = normalize_axis(a, d->type.rank);
    }
    /* the shape rules the checker leaves to the backend, said in MIL's terms */
    const IrType *dt = &d->type, *it = &ix->type, *ut = &u->type;
    bool ok = true;
    if (p.kind == RT_SC_AXIS) {
        ok = it->rank == 1 && ut->rank == dt->rank;
        for (int i = 0; ok && i < dt->rank; i++) ok = ut->dims[i] == (i == p.axis ? it->dims[0] : dt->dims[i]);
        if (!ok) return FAIL("scatter: 'indices' must be [C] and 'updates' data's shape with dim %d = C", p.axis);
    } else if (p.kind == RT_SC_ALONG) {
        ok = it->rank == dt->rank && dims_same(it->rank, it->dims, ut->rank, ut->dims);
        for (int i = 0; ok && i < dt->rank; i++) ok = i == p.axis || ut->dims[i] <= dt->dims[i];
        if (!ok)
            return FAIL("scatter_along_axis: 'indices' and 'updates' must have one shape, data's rank, within data off "
                        "the axis");
    } else {
        int64_t k = it->rank ? it->dims[it->rank - 1] : 0;
        ok = it->rank >= 1 && k >= 1 && k <= dt->rank && ut->rank == it->rank - 1 + dt->rank - k;
        for (int i = 0; ok && i + 1 < it->rank; i++) ok = ut->dims[i] == it->dims[i];
        for (int64_t i = k; ok && i < dt->rank; i++) ok = ut->dims[it->rank - 1 + i - k] == dt->dims[i];
        if (!ok)
            return FAIL(
                "scatter_nd: 'updates' must be indices' dims but the last (K), then data's dims after the first K");
    }
    int in[3] = {materialize(s, d), materialize(s, ix), materialize(s, u)};
    return emit_result(s, op, RT_OP_SCATTER, in, 3, &p, sizeof p);
}

/* argsort (indices only, every element) and topk (values, and indices
 * unless return_indices is false; the first k). */
static int lower_sort(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t a = -1, asc = 0, k = 1;
    ir_op_arg_i64(op, "axis", &a);
    ir_op_arg_i64(op, "ascending", &asc);
    int ax = normalize_axis(a, x->type.rank);
    if (x->type.rank < 1) return FAIL("%s: 'x' must have rank >= 1", mil_op_name(op->kind));
    RtSortParams p = {.axis = ax, .ascending = asc != 0};
    if (op->kind == OP_ARGSORT) {
        p.k = (int32_t)x->type.dims[ax], p.has_indices = 1;
    } else {
        if (!ir_op_arg_i64(op, "k", &k)) return FAIL("topk: 'k' must be a constant on the CPU backend");
        if (k < 1 || k > x->type.dims[ax])
            return FAIL("topk: 'k' %lld is not in 1..%lld", (long long)k, (long long)x->type.dims[ax]);
        p.k = (int32_t)k, p.has_values = 1, p.has_indices = op->nresults > 1;
    }
    if (x->type.dims[ax] > INT32_MAX) return FAIL("%s: the axis is too long", mil_op_name(op->kind));
    int in = materialize(s, x);
    return emit_results(s, op, RT_OP_SORT, &in, 1, p.has_values + p.has_indices, &p, sizeof p);
}

/* A constant scale or zero point of quantize / dequantize as an F32 weight
 * broadcasting over x: a scalar, or a vector along axis. */
static int quant_param(LowerShared *s, const IrOp *op, const char *name, const IrValue *x, int axis) {
    IrValue *v = arg_value(op, name);
    float *f = v ? const_floats(s, v) : NULL;
    if (!f) return v ? -1 : FAIL("%s: '%s' must be a constant", mil_op_name(op->kind), name);
    int64_t n = ir_type_numel(&v->type), dims[MAXR];
    int rank = x->type.rank;
    for (int i = 0; i < rank; i++) dims[i] = 1;
    if (n != 1) {
        if (axis < 0 || v->type.rank != 1 || n != x->type.dims[axis]) {
            free(f);
            return FAIL("%s: '%s' must be a scalar, or a vector of dim 'axis' of the input (%lld) with 'axis' given",
                        mil_op_name(op->kind), name, axis < 0 ? -1LL : (long long)x->type.dims[axis]);
        }
        dims[axis] = n;
    }
    char wn[RT_NAME_MAX];
    snprintf(wn, sizeof wn, "%s.%s", op->results[0]->name, name);
    int id = check_rc(s, rtb_weight(s->b, wn, RT_F32, rank ? rank : 1, rank ? dims : &n, f));
    free(f);
    note_buf(s, id, rank ? rank : 1, rank ? dims : &n);
    return id;
}

static int emit_temp(LowerShared *s, RtOpKind k, const int *in, int nin, RtDType dt, const IrType *t, const void *p,
                     size_t plen) {
    int out = new_temp(s, dt, t->rank, t->dims);
    return emit(s, k, in, nin, out, p, plen) < 0 ? -1 : out;
}

/* quantize: clip(round(x / scale) + zero_point) to int8 / uint8 (round half
 * to even, as NumPy's around); dequantize: (x - zero_point) · scale. */
static int lower_quant(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "input");
    const IrType *t = rtype(op);
    int64_t a = -1;
    if (ir_op_arg(op, "axis") && !ir_op_arg_i64(op, "axis", &a))
        return FAIL("%s: 'axis' must be a constant", mil_op_name(op->kind));
    int axis = ir_op_arg(op, "axis") ? normalize_axis(a, x->type.rank) : -1;
    if (x->type.rank < 1) return FAIL("%s: 'input' must have rank >= 1", mil_op_name(op->kind));
    int sc = quant_param(s, op, "scale", x, axis);
    int zp = ir_op_arg(op, "zero_point") ? quant_param(s, op, "zero_point", x, axis) : -2;
    if (sc < 0 || zp == -1) return -1;
    int in = materialize(s, x);
    if (op->kind == OP_DEQUANTIZE) {
        RtCastParams c = {0};
        int v = emit_temp(s, RT_OP_CAST, &in, 1, RT_F32, t, &c, sizeof c);
        if (zp >= 0) {
            RtBinaryParams b = {.op = RT_BIN_SUB};
            int i2[2] = {v, zp};
            v = emit_temp(s, RT_OP_BINARY, i2, 2, RT_F32, t, &b, sizeof b);
        }
        RtBinaryParams m = {.op = RT_BIN_MUL};
        int i3[2] = {v, sc};
        return emit_result(s, op, RT_OP_BINARY, i3, 2, &m, sizeof m);
    }
    bool u8 = t->dtype == IR_DT_UINT8;
    RtBinaryParams dv = {.op = RT_BIN_DIV}, ad = {.op = RT_BIN_ADD};
    RtEltParams rnd = {.op = RT_EL_ROUND}, clip = {.op = RT_EL_CLIP, .alpha = u8 ? 0 : -128, .beta = u8 ? 255 : 127};
    int i2[2] = {in, sc};
    int v = emit_temp(s, RT_OP_BINARY, i2, 2, RT_F32, t, &dv, sizeof dv);
    v = emit_temp(s, RT_OP_ELTWISE, &v, 1, RT_F32, t, &rnd, sizeof rnd);
    if (zp >= 0) {
        int i3[2] = {v, zp};
        v = emit_temp(s, RT_OP_BINARY, i3, 2, RT_F32, t, &ad, sizeof ad);
    }
    v = emit_temp(s, RT_OP_ELTWISE, &v, 1, RT_F32, t, &clip, sizeof clip);
    RtCastParams c = {0};
    return emit_result(s, op, RT_OP_CAST, &v, 1, &c, sizeof c);
}

/* The random ops: RT_OP_RANDOM's counter-based generator keyed by 'seed'
 * (-1, the default, is a seed like any other: every run is reproducible). */
static int lower_random(LowerShared *s, const IrOp *op) {
    int64_t seed = -1;
    if (!ir_op_arg_i64(op, "seed", &seed)) return FAIL("%s: 'seed' must be a constant", mil_op_name(op->kind));
    RtRandomParams p = {.seed = seed};
    switch (op->kind) {
    case OP_RANDOM_UNIFORM:
        p.kind = RT_RAND_UNIFORM, p.a = (float)arg_f64_or(op, "low", 0), p.b = (float)arg_f64_or(op, "high", 1);
        break;
    case OP_RANDOM_NORMAL:
        p.kind = RT_RAND_NORMAL, p.a = (float)arg_f64_or(op, "mean", 0), p.b = (float)arg_f64_or(op, "stddev", 1);
        break;
    case OP_RANDOM_BERNOULLI: p.kind = RT_RAND_BERNOULLI, p.a = (float)arg_f64_or(op, "prob", 0.5); break;
    default: {
        const char *m = arg_str_or(op, "mode", "logits");
        if (!m || (strcmp(m, "logits") && strcmp(m, "probs")))
            return FAIL("random_categorical: 'mode' must be \"logits\" or \"probs\"");
        p.kind = RT_RAND_CATEGORICAL, p.probs = strcmp(m, "probs") == 0;
        int in = materialize(s, arg_value(op, "x"));
        return emit_result(s, op, RT_OP_RANDOM, &in, 1, &p, sizeof p);
    }
    }
    if (!isfinite(p.a) || !isfinite(p.b)) return FAIL("%s: its parameters must be finite", mil_op_name(op->kind));
    int out = out_for(s, op);
    if (s->failed || out < 0 || check_rc(s, rtb_op(s->b, RT_OP_RANDOM, NULL, 0, &out, 1, &p, sizeof p)) < 0) return -1;
    s->nops++;
    done(s, op, out);
    return 0;
}

/* ---- layout and index ops: views, copies, gathers ---- */

/* fill_like: ref_tensor's shape filled with value; range_1d with constant
 * bounds (its length is then known): its values, computed here. */
static int lower_fill_like(LowerShared *s, const IrOp *op) { return lower_fill(s, op); }

static int lower_range(LowerShared *s, const IrOp *op) {
    const IrType *t = rtype(op);
    double st = 0, step = 1;
    if (!ir_op_arg_f64(op, "start", &st) || !ir_op_arg_f64(op, "step", &step))
        return FAIL("range_1d: the CPU backend needs constant 'start', 'end' and 'step'");
    int64_t n = t->dims[0];
    if (n < 1) return FAIL("range_1d: an empty range is an empty tensor, which the CPU backend cannot hold");
    bool fl = rt_dt(t->dtype) == RT_F32;
    void *d = malloc((size_t)n * 4);
    MILC_ASSERT(d);
    for (int64_t i = 0; i < n; i++) {
        if (fl)
            ((float *)d)[i] = (float)(st + (double)i * step);
        else
            ((int32_t *)d)[i] = (int32_t)((int64_t)st + i * (int64_t)step);
    }
    int rc = lower_const_result(s, op, fl ? RT_F32 : RT_I32, d, n);
    free(d);
    return rc;
}

/* crop: the last two dims cut by crop_height [top, bottom] and crop_width
 * [left, right]. */
static int lower_crop(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t ch[2], cw[2];
    View v;
    if (const_ints(s, op, "crop_height", ch, 2) != 2 || const_ints(s, op, "crop_width", cw, 2) != 2)
        return s->failed ? -1 : FAIL("crop: 'crop_height' and 'crop_width' must be two constants each");
    if (!resolved_view(s, x, &v)) return -1;
    int r = v.rank;
    if (r < 2 || !slice_axis(&v, r - 2, ch[0], rtype(op)->dims[r - 2], 1) ||
        !slice_axis(&v, r - 1, cw[0], rtype(op)->dims[r - 1], 1))
        return FAIL("crop: crops out of range");
    return set_view(s, op->results[0], &v, false);
}

/* pixel_shuffle (PyTorch's order): y[n, c, h·f + i, w·f + j] = x[n, c·f² + i·f + j, h, w];
 * pixel_unshuffle the inverse.  Both one strided view. */
static int lower_pixel_shuffle(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t f = 0;
    View v, w;
    bool up = op->kind == OP_PIXEL_SHUFFLE;
    if (!ir_op_arg_i64(op, up ? "upscale_factor" : "downscale_factor", &f) || f < 1)
        return FAIL("%s: the factor must be a positive constant", mil_op_name(op->kind));
    if (!resolved_view(s, x, &v)) return -1;
    if (v.rank != 4) return FAIL("%s: the CPU backend needs x of rank 4", mil_op_name(op->kind));
    const int64_t *d = v.dims, *st = v.strides;
    w = v;
    w.rank = 6;
    if (up) { /* read as [N, C', H, i, W, j] */
        int64_t dd[6] = {d[0], d[1] / (f * f), d[2], f, d[3], f},
                ss[6] = {st[0], f * f * st[1], st[2], f * st[1], st[3], st[1]};
        dims_copy(w.dims, dd, 6), dims_copy(w.strides, ss, 6);
    } else { /* read as [N, C, i, j, H', W'] */
        int64_t dd[6] = {d[0], d[1], f, f, d[2] / f, d[3] / f},
                ss[6] = {st[0], st[1], st[2], st[3], f * st[2], f * st[3]};
        dims_copy(w.dims, dd, 6), dims_copy(w.strides, ss, 6);
    }
    return set_view(s, op->results[0], &w, true);
}

/* sliding_windows: window k of dim axis is x[.., k·stride : k·stride + size, ..]:
 * overlapping strides of one view. */
static int lower_sliding_windows(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    int64_t a = 0, stride = 1;
    View v, w;
    ir_op_arg_i64(op, "axis", &a);
    ir_op_arg_i64(op, "stride", &stride);
    if (!resolved_view(s, x, &v)) return -1;
    if (v.rank + 1 > MAXR) return FAIL("sliding_windows: the result's rank is above the CPU backend's %d", MAXR);
    int ax = normalize_axis(a, v.rank);
    const IrType *t = rtype(op);
    w = v;
    w.rank = v.rank + 1;
    for (int i = 0, k = 0; i < v.rank; i++) {
        if (i != ax) {
            w.dims[k] = v.dims[i], w.strides[k++] = v.strides[i];
            continue;
        }
        w.dims[k] = t->dims[k], w.strides[k++] = stride * v.strides[i];
        w.dims[k] = t->dims[k], w.strides[k++] = v.strides[i];
    }
    return set_view(s, op->results[0], &w, false);
}

/* pad on the last K dims (pad [2K]: before, after).  constant: the value
 * broadcast, then x copied inside; reflect / replicate: one gather per
 * padded dim with its source indices computed here. */
static int lower_pad(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    const IrType *t = rtype(op);
    int64_t pad[2 * MAXR];
    int np = const_ints(s, op, "pad", pad, 2 * MAXR);
    const char *mode = arg_str_or(op, "mode", "constant");
    if (np < 0 || np % 2 || np / 2 > x->type.rank)
        return s->failed ? -1 : FAIL("pad: 'pad' must be a constant of 2 values per padded dim");
    if (!mode || (strcmp(mode, "constant") && strcmp(mode, "reflect") && strcmp(mode, "replicate")))
        return FAIL("pad: 'mode' must be constant, reflect or replicate");
    int r = x->type.rank, k = np / 2;
    if (strcmp(mode, "constant") == 0) {
        double c = arg_f64_or(op, "constant_val", 0);
        float cv = (float)c;
        int32_t ci = (int32_t)c;
        RtDType dt = rt_dt(t->dtype);
        int w = check_rc(
            s, rtb_weight(s->b, op->results[0]->name, dt, 1, (int64_t[]){1}, dt == RT_I32 ? (const void *)&ci : &cv));
        int out = out_for(s, op);
        if (w < 0 || out < 0) return -1;
        note_buf(s, w, 1, (int64_t[]){1});
        RtCopyParams p;
        memset(&p, 0, sizeof p);
        p.rank = 1, p.dims[0] = ir_type_numel(t), p.dst_stride[0] = 1;
        if (emit(s, RT_OP_COPY, &w, 1, out, &p, sizeof p) < 0) return -1;
        View v;
        int64_t st[MAXR], off = 0;
        row_major(r, t->dims, st);
        for (int i = 0; i < k; i++) off += pad[2 * i] * st[r - k + i];
        if (!resolved_view(s, x, &v) || emit_copy(s, &v, out, off, st) < 0) return -1;
        done(s, op, out);
        return 0;
    }
    bool reflect = strcmp(mode, "reflect") == 0;
    int cur = materialize(s, x);
    int64_t dims[MAXR];
    dims_copy(dims, x->type.dims, r);
    for (int i = 0; i < k; i++) {
        int a = r - k + i;
        int64_t lo = pad[2 * i], hi = pad[2 * i + 1], n = dims[a], m = n + lo + hi;
        if (!lo && !hi) continue;
        if (reflect && (lo >= n || hi >= n)) return FAIL("pad: reflect needs pads below the dim (%lld)", (long long)n);
        int32_t *ix = malloc(sizeof(int32_t) * (size_t)m);
        MILC_ASSERT(ix);
        for (int64_t j = 0; j < m; j++) {
            int64_t q = j - lo;
            if (q < 0) q = reflect ? -q : 0;
            if (q >= n) q = reflect ? 2 * (n - 1) - q : n - 1;
            ix[j] = (int32_t)q;
        }
        char name[RT_NAME_MAX];
        snprintf(name, sizeof name, "%s.pad%d", op->results[0]->name, a);
        int iw = check_rc(s, rtb_weight(s->b, name, RT_I32, 1, &m, ix));
        free(ix);
        if (iw < 0) return -1;
        note_buf(s, iw, 1, &m);
        dims[a] = m;
        bool last = true;
        for (int j = i + 1; j < k; j++) last = last && !pad[2 * j] && !pad[2 * j + 1];
        int out = last ? out_for(s, op) : new_temp(s, rt_dt(t->dtype), r, dims);
        RtAxisParams p = {.axis = a};
        int in[2] = {cur, iw};
        if (emit(s, RT_OP_GATHER, in, 2, out, &p, sizeof p) < 0) return -1;
        cur = out;
    }
    done(s, op, cur);
    return 0;
}

/* one_hot: equal(indices with a unit dim at axis, 0..D-1 along axis), then
 * select(on_value, off_value). */
static int lower_one_hot(LowerShared *s, const IrOp *op) {
    IrValue *ix = arg_value(op, "indices");
    const IrType *t = rtype(op);
    int64_t a = -1;
    ir_op_arg_i64(op, "axis", &a);
    int ax = (int)(a < 0 ? a + t->rank : a), r = t->rank;
    int64_t depth = t->dims[ax], idims[MAXR], odims[MAXR];
    for (int i = 0, k = 0; i < r; i++) idims[i] = i == ax ? 1 : ix->type.dims[k++], odims[i] = i == ax ? depth : 1;
    int32_t *iota = malloc(sizeof(int32_t) * (size_t)(depth + 1));
    MILC_ASSERT(iota);
    for (int64_t i = 0; i < depth; i++) iota[i] = (int32_t)i;
    char name[RT_NAME_MAX];
    snprintf(name, sizeof name, "%s.iota", op->results[0]->name);
    int iw = check_rc(s, rtb_weight(s->b, name, RT_I32, r, odims, iota));
    free(iota);
    if (iw < 0) return -1;
    note_buf(s, iw, r, odims);
    RtDType dt = rt_dt(t->dtype);
    double on = arg_f64_or(op, "on_value", 1), off = arg_f64_or(op, "off_value", 0);
    int vals[2];
    for (int k = 0; k < 2; k++) {
        double v = k ? off : on;
        float f = (float)v;
        int32_t i = (int32_t)v;
        uint8_t b = v != 0;
        snprintf(name, sizeof name, "%s.%s", op->results[0]->name, k ? "off" : "on");
        vals[k] = check_rc(s, rtb_weight(s->b, name, dt, 1, (int64_t[]){1},
                                         dt == RT_F32   ? (const void *)&f
                                         : dt == RT_I32 ? (const void *)&i
                                                        : &b));
        if (vals[k] < 0) return -1;
        note_buf(s, vals[k], 1, (int64_t[]){1});
    }
    int in0 = buffer_as(s, ix, r, idims, -1);
    RtBinaryParams eq = {.op = RT_BO_EQ};
    int in[2] = {in0, iw};
    int m = emit_temp(s, RT_OP_BINOP, in, 2, RT_BOOL, t, &eq, sizeof eq);
    int sel[3] = {m, vals[0], vals[1]};
    return emit_result(s, op, RT_OP_SELECT, sel, 3, NULL, 0);
}

/* gather_nd: RT_OP_GATHER_ND (any batch_dims; an index component outside
 * its dim is RT_EINDEX, never wrapped into another row). */
static int lower_gather_nd(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *ix = arg_value(op, "indices");
    int64_t bd = 0;
    ir_op_arg_i64(op, "batch_dims", &bd);
    RtAxisParams p = {.axis = (int32_t)bd};
    int in[2] = {materialize(s, x), materialize(s, ix)};
    return emit_result(s, op, RT_OP_GATHER_ND, in, 2, &p, sizeof p);
}

/* einsum in Core ML's two forms: abc,cbd->abd and abcd,adce->abce, a
 * batched matmul over (b) or (a, c) after transposing views. */
static int lower_einsum(LowerShared *s, const IrOp *op) {
    IrArg *vals = ir_op_arg(op, "values");
    if (!vals || vals->kind != IR_ARG_TUPLE || vals->nitems != 2) return FAIL("einsum: needs two tensors");
    if (rt_dt(rtype(op)->dtype) != RT_F32) return FAIL("einsum: the CPU backend runs it on fp16 and fp32 only");
    View a, b;
    if (!resolved_view(s, vals->items[0], &a) || !resolved_view(s, vals->items[1], &b)) return -1;
    int r = a.rank;
    static const int pa3[] = {1, 0, 2}, pb3[] = {1, 0, 2}, pa4[] = {0, 2, 1, 3}, pb4[] = {0, 2, 1, 3};
    const int *pa = r == 3 ? pa3 : pa4, *pb = r == 3 ? pb3 : pb4;
    View ta = a, tb = b;
    for (int i = 0; i < r; i++)
        ta.dims[i] = a.dims[pa[i]], ta.strides[i] = a.strides[pa[i]], tb.dims[i] = b.dims[pb[i]],
        tb.strides[i] = b.strides[pb[i]];
    const IrType *t = rtype(op);
    int64_t md[MAXR];
    for (int i = 0; i < r; i++) md[i] = t->dims[pa[i]];
    int in[2] = {buffer_of_view(s, &ta, RT_F32, r, ta.dims), buffer_of_view(s, &tb, RT_F32, r, tb.dims)};
    int m = new_temp(s, RT_F32, r, md);
    RtMatmulParams p = {0};
    if (emit(s, RT_OP_MATMUL, in, 2, m, &p, sizeof p) < 0) return -1;
    View mv, w;
    view_ident(&mv, m, r, md);
    w = mv;
    for (int i = 0; i < r; i++) w.dims[i] = mv.dims[pa[i]], w.strides[i] = mv.strides[pa[i]];
    return set_view(s, op->results[0], &w, false);
}

/* slice_update with constant begin and end: y = x, then update copied over
 * the slice of y that slice_by_index's arguments describe (squeezed axes
 * dropped from update).  Run-time bounds and a state's in-place update:
 * lower_slice_update. */
static int lower_slice_update_const(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *u = arg_value(op, "update");
    const IrType *t = rtype(op);
    int out = out_for(s, op);
    View xv, region, uv;
    int64_t st[MAXR], dst[MAXR];
    if (out < 0 || !resolved_view(s, x, &xv)) return -1;
    row_major(t->rank, t->dims, st);
    if (emit_copy(s, &xv, out, 0, st) < 0) return -1;
    view_ident(&region, out, t->rank, t->dims);
    if (slice_region(s, op, t, &region) < 0 || !resolved_view(s, u, &uv)) return -1;
    int64_t sq[MAXR] = {0};
    if (const_ints(s, op, "squeeze_mask", sq, MAXR) == -1) return -1;
    int k = 0;
    for (int i = 0; i < t->rank; i++) {
        if (sq[i]) continue;
        if (k >= uv.rank || uv.dims[k] != region.dims[i])
            return FAIL("slice_update: 'update' must have the slice's shape");
        dst[k++] = region.strides[i];
    }
    if (k != uv.rank) return FAIL("slice_update: 'update' must have the slice's shape");
    if (emit_copy(s, &uv, out, region.offset, dst) < 0) return -1;
    done(s, op, out);
    return 0;
}

/* An I32 weight of dims holding v (n values), named after op's result. */
static int int_weight(LowerShared *s, const IrOp *op, const char *what, int rank, const int64_t *dims,
                      const int32_t *v) {
    char name[RT_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", op->results[0]->name, what);
    int id = check_rc(s, rtb_weight(s->b, name, RT_I32, rank, dims, v));
    note_buf(s, id, rank, dims);
    return id;
}

/* reverse_sequence: per batch b, the first lengths[b] positions of seq_axis
 * reversed: a gather_along_axis with index t < L[b] ? L[b] - 1 - t : t,
 * computed at run time from lengths (an index past the axis: RT_EINDEX). */
static int lower_reverse_sequence(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *len = arg_value(op, "lengths");
    int64_t sa = 0, ba = 0;
    ir_op_arg_i64(op, "seq_axis", &sa);
    ir_op_arg_i64(op, "batch_axis", &ba);
    int r = x->type.rank, sx = normalize_axis(sa, r), bx = normalize_axis(ba, r);
    if (sx == bx) return FAIL("reverse_sequence: 'seq_axis' and 'batch_axis' must differ");
    int64_t B = x->type.dims[bx], T = x->type.dims[sx];
    if (ir_type_numel(&len->type) != B)
        return FAIL("reverse_sequence: 'lengths' must hold one length per batch (%lld)", (long long)B);
    int32_t *iota = malloc(sizeof(int32_t) * (size_t)(T + 1));
    MILC_ASSERT(iota);
    for (int64_t i = 0; i < T; i++) iota[i] = (int32_t)i;
    int64_t jd[2] = {1, T}, ld[2] = {B, 1}, bt[2] = {B, T}, one = 1;
    int32_t onev = 1;
    int jw = int_weight(s, op, "iota", 2, jd, iota), ow = int_weight(s, op, "one", 1, &one, &onev);
    free(iota);
    IrType tt = {.dtype = IR_DT_INT32, .rank = 2, .dims = bt};
    int L = buffer_as(s, len, 2, ld, -1);
    RtBinaryParams lt = {.op = RT_BO_LT}, sub = {.op = RT_BIN_SUB};
    int a[2] = {jw, L}, b2[2] = {L, jw};
    int m = emit_temp(s, RT_OP_BINOP, a, 2, RT_BOOL, &tt, &lt, sizeof lt);
    int d = emit_temp(s, RT_OP_BINARY, b2, 2, RT_I32, &tt, &sub, sizeof sub);
    int d1[2] = {d, ow};
    int rv = emit_temp(s, RT_OP_BINARY, d1, 2, RT_I32, &tt, &sub, sizeof sub);
    int sel[3] = {m, rv, jw};
    int idx = emit_temp(s, RT_OP_SELECT, sel, 3, RT_I32, &tt, NULL, 0);
    if (idx < 0) return -1;
    View iv;
    view_ident(&iv, idx, 2, bt);
    View full = iv;
    full.rank = r;
    for (int i = 0; i < r; i++) {
        full.dims[i] = x->type.dims[i];
        full.strides[i] = i == bx ? T : i == sx ? 1 : 0;
    }
    int in[2] = {materialize(s, x), buffer_of_view(s, &full, RT_I32, r, x->type.dims)};
    RtAxisParams p = {.axis = sx};
    return emit_result(s, op, RT_OP_GATHER_AXIS, in, 2, &p, sizeof p);
}

/* space_to_batch / batch_to_space with TensorFlow's order (what converters
 * map them from): batch (i·bw + j)·N + n holds the spatial offset (i, j)
 * of image n.  space_to_batch: x zero-padded into a buffer, read as one view;
 * batch_to_space: one view copied dense, then the crops sliced off. */
static int lower_space_batch(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    bool down = op->kind == OP_SPACE_TO_BATCH;
    int64_t bs[2], pc[4];
    if (const_ints(s, op, "block_shape", bs, 2) != 2 || const_ints(s, op, down ? "paddings" : "crops", pc, 4) != 4)
        return s->failed ? -1
                         : FAIL("%s: 'block_shape' and '%s' must be constants [2] and [2, 2]", mil_op_name(op->kind),
                                down ? "paddings" : "crops");
    View v, w;
    if (!resolved_view(s, x, &v)) return -1;
    if (v.rank != 4 || bs[0] < 1 || bs[1] < 1)
        return FAIL("%s: the CPU backend needs x of rank 4 and positive blocks", mil_op_name(op->kind));
    const IrType *t = rtype(op);
    if (down) {
        int64_t N = v.dims[0], C = v.dims[1], pd[4] = {N, C, v.dims[2] + pc[0] + pc[1], v.dims[3] + pc[2] + pc[3]},
                st[4];
        row_major(4, pd, st);
        int buf = new_temp(s, RT_F32, 4, pd);
        float zero = 0;
        char name[RT_NAME_MAX];
        snprintf(name, sizeof name, "%s.zero", op->results[0]->name);
        int z = check_rc(s, rtb_weight(s->b, name, RT_F32, 1, (int64_t[]){1}, &zero));
        if (buf < 0 || z < 0) return -1;
        note_buf(s, z, 1, (int64_t[]){1});
        RtCopyParams p;
        memset(&p, 0, sizeof p);
        p.rank = 1, p.dims[0] = N * C * pd[2] * pd[3], p.dst_stride[0] = 1;
        if (emit(s, RT_OP_COPY, &z, 1, buf, &p, sizeof p) < 0 ||
            emit_copy(s, &v, buf, pc[0] * st[2] + pc[2] * st[3], st) < 0)
            return -1;
        /* read as [i, j, N, C, H', W'] */
        int64_t dd[6] = {bs[0], bs[1], N, C, t->dims[2], t->dims[3]},
                ss[6] = {st[2], st[3], st[0], st[1], bs[0] * st[2], bs[1] * st[3]};
        view_ident(&w, buf, 4, pd);
        w.rank = 6;
        dims_copy(w.dims, dd, 6), dims_copy(w.strides, ss, 6);
        return set_view(s, op->results[0], &w, true);
    }
    int64_t N = v.dims[0] / (bs[0] * bs[1]), H = v.dims[2], W = v.dims[3], C = v.dims[1];
    /* y[n, c, h·bh + i, w·bw + j] = x[(i·bw + j)·N + n, c, h, w]: read as [N, C, H, i, W, j] */
    int64_t dd[6] = {N, C, H, bs[0], W, bs[1]};
    int64_t ss[6] = {v.strides[0], v.strides[1],    v.strides[2], bs[1] * N * v.strides[0],
                     v.strides[3], N * v.strides[0]};
    w = v;
    w.rank = 6;
    dims_copy(w.dims, dd, 6), dims_copy(w.strides, ss, 6);
    int64_t fd[4] = {N, C, H * bs[0], W * bs[1]};
    int full = buffer_of_view(s, &w, RT_F32, 4, fd);
    if (full < 0) return -1;
    View f;
    view_ident(&f, full, 4, fd);
    if (!slice_axis(&f, 2, pc[0], t->dims[2], 1) || !slice_axis(&f, 3, pc[2], t->dims[3], 1))
        return FAIL("batch_to_space: crops out of range");
    return set_view(s, op->results[0], &f, false);
}

/* Resampling on the last two dims, one dim at a time, at grid points g[i]
 * in input coordinates (rt_grid_point, plan.h): nearest is one
 * gather at floor(g); bilinear two gathers at floor(g) and the next,
 * weighted by 1 - frac and frac (weights [m, 1] or [m]: broadcast). */
static int resample_axis(LowerShared *s, const IrOp *op, int cur, int a, int mode, const int64_t *dims, int rank,
                         int out) {
    int64_t in = s->bi[cur].dims[a], m = dims[a];
    int32_t *i0 = malloc(sizeof(int32_t) * 2 * (size_t)m), *i1 = i0 + m;
    float *w0 = malloc(sizeof(float) * 2 * (size_t)m), *w1 = w0 + m;
    MILC_ASSERT(i0 && w0);
    for (int64_t i = 0; i < m; i++) {
        double g = rt_grid_point(mode, i, (double)in, m), f = floor(g);
        i0[i] = (int32_t)f, i1[i] = (int32_t)(f + 1 < (double)in ? f + 1 : f);
        w1[i] = (float)(g - f), w0[i] = (float)(1 - (g - f));
    }
    char nm[24];
    snprintf(nm, sizeof nm, "i0_%d", a);
    int iw0 = int_weight(s, op, nm, 1, &m, i0);
    snprintf(nm, sizeof nm, "i1_%d", a);
    int iw1 = mode == RT_GRID_NEAREST ? -1 : int_weight(s, op, nm, 1, &m, i1);
    int fw[2] = {-1, -1};
    for (int k = 0; k < 2 && mode != RT_GRID_NEAREST; k++) {
        char name[RT_NAME_MAX];
        snprintf(name, sizeof name, "%s.w%d_%d", op->results[0]->name, k, a);
        int wr = rank - a; /* [m, 1, ..]: broadcast over the dims after a */
        int64_t wdims[MAXR] = {m};
        for (int j = 1; j < wr; j++) wdims[j] = 1;
        fw[k] = check_rc(s, rtb_weight(s->b, name, RT_F32, wr, wdims, k ? w1 : w0));
        note_buf(s, fw[k], wr, wdims);
    }
    free(i0), free(w0);
    RtAxisParams ax = {.axis = a};
    IrType t = {.dtype = IR_DT_FP32, .rank = rank, .dims = (int64_t *)dims};
    int g0[2] = {cur, iw0};
    if (iw0 < 0 || (mode != RT_GRID_NEAREST && iw1 < 0)) return -1;
    if (mode == RT_GRID_NEAREST) return emit(s, RT_OP_GATHER, g0, 2, out, &ax, sizeof ax) < 0 ? -1 : out;
    int g1[2] = {cur, iw1};
    int x0 = emit_temp(s, RT_OP_GATHER, g0, 2, RT_F32, &t, &ax, sizeof ax);
    int x1 = emit_temp(s, RT_OP_GATHER, g1, 2, RT_F32, &t, &ax, sizeof ax);
    RtBinaryParams mul = {.op = RT_BIN_MUL}, add = {.op = RT_BIN_ADD};
    int m0[2] = {x0, fw[0]}, m1[2] = {x1, fw[1]};
    int p0 = emit_temp(s, RT_OP_BINARY, m0, 2, RT_F32, &t, &mul, sizeof mul);
    int p1 = emit_temp(s, RT_OP_BINARY, m1, 2, RT_F32, &t, &mul, sizeof mul);
    int sum[2] = {p0, p1};
    return emit(s, RT_OP_BINARY, sum, 2, out, &add, sizeof add) < 0 ? -1 : out;
}

/* A string argument's index in names (n of them), or -1 after a diagnostic naming it. */
static int arg_choice(LowerShared *s, const IrOp *op, const char *arg, const char *def, const char *const *names,
                      int n) {
    const char *v = arg_str_or(op, arg, def);
    for (int i = 0; v && i < n; i++)
        if (!strcmp(v, names[i])) return i;
    return FAIL("%s: '%s' %s is not run by the CPU backend", mil_op_name(op->kind), arg, v ? v : "?");
}

/* Buffer buf holding a value of dtype dt, shaped rank/dims, as fp32: itself,
 * or an RT_OP_CAST of it (integer coordinates and boxes). */
static int as_f32(LowerShared *s, int buf, IrDType dt, int rank, int64_t *dims) {
    if (buf < 0 || rt_dt(dt) == RT_F32) return buf;
    RtCastParams cp = {0};
    IrType ft = {.dtype = IR_DT_FP32, .rank = rank, .dims = dims};
    return emit_temp(s, RT_OP_CAST, &buf, 1, RT_F32, &ft, &cp, sizeof cp);
}

/* resample and affine: RT_OP_SAMPLE on x [B, C, H, W] (integer coordinates cast to fp32 first). */
static int lower_sample(LowerShared *s, const IrOp *op) {
    static const char *const modes[] = {"bilinear", "nearest"},
                             *const pads[] = {"constant", "border", "reflection", "symmetric"},
                             *const coords[] = {"unnormalized", "normalized_minus_one_to_one",
                                                "normalized_zero_to_one"};
    bool affine = op->kind == OP_AFFINE;
    IrValue *x = arg_value(op, "x"), *c = arg_value(op, affine ? "transform_matrix" : "coordinates");
    int64_t ac = 0;
    ir_op_arg_i64(op, "align_corners", &ac);
    RtSampleParams p = {.mode = arg_choice(s, op, "sampling_mode", "bilinear", modes, 2),
                        .pad = arg_choice(s, op, "padding_mode", "constant", pads, 4),
                        .coord_mode = arg_choice(s, op, "coordinates_mode", "normalized_minus_one_to_one", coords, 3),
                        .align_corners = ac != 0,
                        .affine = affine,
                        .pad_value = (float)arg_f64_or(op, "padding_value", 0)};
    if (s->failed) return -1;
    if (x->type.rank != 4) return FAIL("%s: 'x' must have rank 4", mil_op_name(op->kind));
    int in[2] = {materialize(s, x), as_f32(s, materialize(s, c), c->type.dtype, c->type.rank, c->type.dims)};
    return emit_result(s, op, RT_OP_SAMPLE, in, 2, &p, sizeof p);
}

static int arg_choice(LowerShared *s, const IrOp *op, const char *arg, const char *def, const char *const *names,
                      int n);

/* The RT_GRID_* of an op's 'sampling_mode' (resize_bilinear, resize,
 * crop_resize), or -1 after a diagnostic. */
static int sampling_grid(LowerShared *s, const IrOp *op) {
    static const char *const names[] = {"ALIGN_CORNERS", "STRICT_ALIGN_CORNERS", "UNALIGN_CORNERS", "DEFAULT",
                                        "OFFSET_CORNERS"};
    static const int grids[] = {RT_GRID_ALIGN, RT_GRID_ALIGN_STRICT, RT_GRID_HALF, RT_GRID_DEFAULT, RT_GRID_OFFSET};
    int i = arg_choice(s, op, "sampling_mode", "DEFAULT", names, 5);
    return i < 0 ? -1 : grids[i];
}

/* crop_resize: RT_OP_CROP_RESIZE on x [B, C, H, W].  ios15/16's roi
 * [K, 1, 4 or 5, 1, 1] is read as [K, 4 or 5]: four coordinates cut every
 * box from every image (y [K, B, C, h, w], one [K·B, C, h, w] buffer); five
 * name the image first (for one image only: see the refusal).  ios17's
 * boxes [K, 4] take box_indices [K] (by default box k is cut from image k). */
static int lower_crop_resize(LowerShared *s, const IrOp *op) {
    static const char *const box_modes[] = {"CORNERS_HEIGHT_FIRST", "CORNERS_WIDTH_FIRST", "CENTER_SIZE_HEIGHT_FIRST",
                                            "CENTER_SIZE_WIDTH_FIRST"};
    IrValue *x = arg_value(op, "x"), *roi = arg_value(op, "roi"), *bv = roi ? roi : arg_value(op, "boxes"),
            *bi = arg_value(op, "box_indices");
    int64_t norm = 0;
    if (ir_op_arg(op, "normalized_coordinates")) ir_op_arg_i64(op, "normalized_coordinates", &norm);
    RtCropParams p = {.grid = sampling_grid(s, op),
                      .box_mode = arg_choice(s, op, "box_coordinate_mode", "CORNERS_HEIGHT_FIRST", box_modes, 4),
                      .normalized = norm != 0,
                      .spatial_scale = (float)arg_f64_or(op, "spatial_scale", 1),
                      .pad_value = (float)arg_f64_or(op, "pad_value", 0)};
    if (s->failed) return -1;
    const IrType *bt = &bv->type, *t = rtype(op);
    int64_t K = bt->dims[0], cols = roi ? bt->dims[2] : 4, bd[2] = {K, cols};
    p.roi_index = cols == 5, p.all_batches = roi && cols == 4, p.has_indices = bi != NULL;
    if (p.roi_index && x->type.dims[0] != 1)
        return FAIL("crop_resize: a roi of 5 (an image index, then the box) over a batch of %lld images: coremltools "
                    "types the result [N, B, C, h, w], Core ML's layer gives [N, 1, C, h, w]; the CPU backend runs "
                    "it for a batch of 1, where the two agree",
                    (long long)x->type.dims[0]);
    int in[3] = {materialize(s, x), as_f32(s, buffer_as(s, bv, 2, bd, -1), bt->dtype, 2, bd),
                 bi ? materialize(s, bi) : 0};
    int64_t yd[4] = {t->dims[0] * (p.all_batches ? t->dims[1] : 1), x->type.dims[1], t->dims[t->rank - 2],
                     t->dims[t->rank - 1]};
    int out = result_buf(s, op->results[0], 4, yd);
    if (emit(s, RT_OP_CROP_RESIZE, in, bi ? 3 : 2, out, &p, sizeof p) < 0) return -1;
    done(s, op, out);
    return 0;
}

/* The list ops on a fixed-length list, which backend_lists_as_tensors made a
 * tensor [N, *elem]: make_list is zeros, list_length the constant N,
 * list_read / list_gather a gather of rows, list_write / list_scatter a copy
 * of the list with rows scattered in.  An index out of range is RT_EINDEX
 * at run time, as for gather and scatter.  A list that grows at run time
 * is refused. */
static int lower_list_op(LowerShared *s, const IrOp *op) {
    const IrValue *ls = op->kind == OP_MAKE_LIST ? op->results[0] : arg_value(op, "ls");
    const IrType *t = &ls->type;
    if (t->list)
        return FAIL("op %s is not run by the cpu backend: list '%s' grows at run time (dynamic_length, or an "
                    "init_length known only then) and the CPU backend plans every buffer at compile time; a "
                    "fixed-length list (dynamic_length = false, constant init_length and elem_shape) runs",
                    mil_op_name(op->kind), ls->name);
    if (t->dims[0] < 1) return FAIL("%s: the CPU backend needs a list of at least one element", mil_op_name(op->kind));
    switch (op->kind) {
    case OP_MAKE_LIST: return lower_splat(s, op, 0);
    case OP_LIST_LENGTH: {
        int32_t n = (int32_t)t->dims[0];
        return lower_const_result(s, op, RT_I32, &n, 1);
    }
    case OP_LIST_READ:
    case OP_LIST_GATHER: {
        RtAxisParams p = {.axis = 0};
        int in[2] = {materialize(s, ls), materialize(s, arg_value(op, op->kind == OP_LIST_READ ? "index" : "indices"))};
        return emit_result(s, op, RT_OP_GATHER, in, 2, &p, sizeof p);
    }
    default: { /* list_write, list_scatter */
        bool write = op->kind == OP_LIST_WRITE;
        IrValue *ix = arg_value(op, write ? "index" : "indices"), *u = arg_value(op, "value");
        int64_t k = write ? 1 : ix->type.dims[0], ud[MAXR] = {k};
        dims_copy(ud + 1, t->dims + 1, t->rank - 1);
        if (ir_type_numel(&u->type) != ir_type_numel(&(IrType){.rank = t->rank, .dims = ud}))
            return FAIL("%s: 'value' must hold %s the list's element shape", mil_op_name(op->kind),
                        write ? "exactly" : "one per index of");
        RtScatterParams p = {.kind = RT_SC_AXIS, .mode = RT_SCM_UPDATE, .axis = 0};
        int in[3] = {materialize(s, ls), buffer_as(s, ix, 1, &k, -1), buffer_as(s, u, t->rank, ud, -1)};
        return emit_result(s, op, RT_OP_SCATTER, in, 3, &p, sizeof p);
    }
    }
}

/* non_maximum_suppression: RT_OP_NMS (plan.h has the rules).  ios15/16:
 * boxes [B, N, 4], scores [B, N, K], a score_threshold and a fourth result,
 * the counts; ios17's form (three results) has boxes [B, 4, N], scores
 * [B, K, N] and no threshold: every box is a candidate. */
static int lower_nms(LowerShared *s, const IrOp *op) {
    int64_t m = 0, pc = 0;
    if (!ir_op_arg_i64(op, "max_boxes", &m) || m < 1 || m > INT32_MAX)
        return FAIL("non_maximum_suppression: 'max_boxes' must be a positive constant");
    if (ir_op_arg(op, "per_class_suppression")) ir_op_arg_i64(op, "per_class_suppression", &pc);
    bool v17 = op->nresults == 3;
    RtNmsParams p = {.iou_threshold = (float)arg_f64_or(op, "iou_threshold", 0),
                     .score_threshold = v17 ? -INFINITY : (float)arg_f64_or(op, "score_threshold", 0),
                     .max_boxes = (int32_t)m,
                     .per_class = pc != 0,
                     .boxes_last = v17,
                     .has_counts = !v17};
    int in[2] = {materialize(s, arg_value(op, "boxes")), materialize(s, arg_value(op, "scores"))};
    return emit_results(s, op, RT_OP_NMS, in, 2, op->nresults, &p, sizeof p);
}

/* resize_nearest_neighbor (input index floor(i · in / out)), resize_bilinear
 * (its sampling modes) and upsample_bilinear (align_corners,
 * half_pixel_centers). */
static int lower_resize(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x");
    const IrType *t = rtype(op);
    int r = t->rank, mode = RT_GRID_NEAREST;
    if (r < 2) return FAIL("%s: 'x' must have rank >= 2", mil_op_name(op->kind));
    if (op->kind == OP_RESIZE_BILINEAR) {
        if ((mode = sampling_grid(s, op)) < 0) return -1;
    } else if (op->kind == OP_UPSAMPLE_BILINEAR) {
        int64_t ac = 1, hp = -1;
        ir_op_arg_i64(op, "align_corners", &ac);
        if (ir_op_arg(op, "half_pixel_centers")) ir_op_arg_i64(op, "half_pixel_centers", &hp);
        if (hp < 0) hp = !ac;
        if (ac && hp) return FAIL("upsample_bilinear: 'half_pixel_centers' needs 'align_corners' false");
        mode = ac ? RT_GRID_ALIGN_STRICT : hp ? RT_GRID_HALF : RT_GRID_LEGACY;
    }
    int64_t nd = 2;
    if (op->kind == OP_RESIZE) {
        const char *im = arg_str_or(op, "interpolation_mode", "LINEAR"),
                   *sm = arg_str_or(op, "sampling_mode", "DEFAULT");
        bool nearest = im && !strcmp(im, "NEAREST_NEIGHBOR");
        if ((mode = sampling_grid(s, op)) < 0) return -1;
        if (nearest && mode != RT_GRID_DEFAULT)
            return FAIL("resize: NEAREST_NEIGHBOR runs with 'sampling_mode' DEFAULT only on the CPU backend, not %s",
                        sm);
        if (nearest) mode = RT_GRID_NEAREST;
        if (!nearest && rt_dt(t->dtype) != RT_F32)
            return FAIL("resize: LINEAR on int32 is not run by the CPU backend (NEAREST_NEIGHBOR is)");
        if (!ir_op_arg_i64(op, "resized_dims", &nd) || nd < 0 || nd > r) return FAIL("resize: bad 'resized_dims'");
    }
    /* every resized dim, unchanged sizes too: a mode's grid need not be the identity */
    int cur = materialize(s, x);
    int64_t dims[MAXR];
    dims_copy(dims, x->type.dims, r);
    if (cur < 0) return -1;
    for (int a = r - (int)nd; a < r; a++) {
        dims[a] = t->dims[a];
        int out = a == r - 1 ? out_for(s, op) : new_temp(s, rt_dt(t->dtype), r, dims);
        if (out < 0 || (cur = resample_axis(s, op, cur, a, mode, dims, r, out)) < 0) return -1;
    }
    done(s, op, cur);
    return 0;
}

/* The RT_OP_UNARY of a recurrent activation name; -1 linear, -2 unknown. */
static int recurrent_act(const char *a) {
    return !a                      ? -2
           : !strcmp(a, "tanh")    ? RT_UN_TANH
           : !strcmp(a, "sigmoid") ? RT_UN_SIGMOID
           : !strcmp(a, "relu")    ? RT_UN_RELU
           : !strcmp(a, "linear")  ? -1
                                   : -2;
}

/* The activations names[i] of a recurrent op (defaults defs[i]) as
 * RT_UN_* (-1: linear) into un, or -1 after a diagnostic naming the argument. */
static int rec_acts(LowerShared *s, const IrOp *op, const char *const *names, const char *const *defs, int n, int *un) {
    for (int i = 0; i < n; i++) {
        const char *a = arg_str_or(op, names[i], defs[i]);
        if ((un[i] = recurrent_act(a)) == -2)
            return FAIL("%s: '%s' %s is not run by the CPU backend (tanh, sigmoid, relu and linear are)",
                        mil_op_name(op->kind), names[i], a ? a : "?");
    }
    return 0;
}

/* A step's h [B, H] copied to its place in the sequence output. */
static int step_out(LowerShared *s, int h, const int64_t *hd, int yseq, int64_t off) {
    View hv;
    int64_t st[2];
    view_ident(&hv, h, 2, hd);
    row_major(2, hd, st);
    return emit_copy(s, &hv, yseq, off, st);
}

/* rnn, unrolled over its static sequence: the input projection for every
 * step in one GEMM (with the bias), then per step h = act(W_hh h + that
 * step's projection) (a GEMM with the step as its residual, then the
 * activation).  Step k's h is row k of the sequence output: reverse runs
 * from the last time and comes out in that order, as Core ML gives it
 * (coremltools' tests check Core ML's reverse rnn, lstm and gru against
 * PyTorch on the flipped sequence, not flipped back). */
static int lower_rnn(LowerShared *s, IrOp *op) {
    IrValue *x = arg_value(op, "x"), *h0 = arg_value(op, "initial_h"), *wi = arg_value(op, "weight_ih"),
            *wh = arg_value(op, "weight_hh");
    IrValue *bias = arg_value(op, "bias");
    const char *dir = arg_str_or(op, "direction", "forward");
    int64_t seq = 0;
    ir_op_arg_i64(op, "output_sequence", &seq);
    int un;
    if (rec_acts(s, op, (const char *const[]){"activation"}, (const char *const[]){"tanh"}, 1, &un) < 0) return -1;
    if (!dir || (strcmp(dir, "forward") && strcmp(dir, "reverse")))
        return FAIL("rnn: 'direction' must be forward or reverse");
    if (!h0 || !wi || !wh) return FAIL("rnn: 'initial_h', 'weight_ih' and 'weight_hh' must be tensors");
    int64_t S = x->type.dims[0], B = x->type.dims[1], I = x->type.dims[2], H = wi->type.dims[0];
    if (wi->type.dims[1] != I || wh->type.dims[0] != H || wh->type.dims[1] != H || h0->type.dims[0] != B ||
        h0->type.dims[1] != H)
        return FAIL("rnn: 'weight_ih' must be [H, %lld], 'weight_hh' [H, H] and 'initial_h' [%lld, H]", (long long)I,
                    (long long)B);
    int64_t xd[2] = {S * B, I}, pd[2] = {S * B, H}, hd[2] = {B, H};
    RtGemmParams gp = {.layout = RT_GEMM_ROWS, .has_bias = bias != NULL};
    int in[4] = {buffer_as(s, x, 2, xd, -1), gemm_weight(s, wi), bias ? const_weight(s, bias) : 0};
    int pre = new_temp(s, RT_F32, 2, pd);
    if (emit(s, RT_OP_GEMM, in, bias ? 3 : 2, pre, &gp, sizeof gp) < 0) return -1;
    IrValue *ys = op->results[0], *yh = op->results[1];
    int yseq = result_buf(s, ys, ys->type.rank, ys->type.dims), h = materialize(s, h0), whw = gemm_weight(s, wh);
    if (yseq < 0 || h < 0 || whw < 0) return -1;
    bool rev = strcmp(dir, "reverse") == 0;
    int64_t st[2];
    row_major(2, hd, st);
    for (int64_t k = 0; k < S; k++) {
        int64_t t = rev ? S - 1 - k : k;
        View pv;
        view_ident(&pv, pre, 2, hd);
        pv.offset = t * B * H;
        int r = buffer_of_view(s, &pv, RT_F32, 2, hd);
        RtGemmParams rp = {.layout = RT_GEMM_ROWS, .has_residual = 1};
        int g[3] = {h, whw, r};
        bool last = k == S - 1;
        int nh = last && un < 0 ? result_buf(s, yh, 2, hd) : new_temp(s, RT_F32, 2, hd);
        if (emit(s, RT_OP_GEMM, g, 3, nh, &rp, sizeof rp) < 0) return -1;
        if (un >= 0) {
            RtUnaryParams u = {.op = un};
            int a = last ? result_buf(s, yh, 2, hd) : new_temp(s, RT_F32, 2, hd);
            if (emit(s, RT_OP_UNARY, &nh, 1, a, &u, sizeof u) < 0) return -1;
            nh = a;
        }
        h = nh;
        if ((seq || last) && step_out(s, h, hd, yseq, seq ? k * B * H : 0) < 0) return -1;
    }
    set_buffer(s, ys, yseq, s->bi[yseq].rank, s->bi[yseq].dims);
    set_buffer(s, yh, h, 2, hd);
    return 0;
}

/* act(v) for a view v of [B, H] (copied dense first when it is not), into out (or a new temp). */
static int act_of(LowerShared *s, const View *v, int un, const int64_t *hd, int out) {
    int x = buffer_of_view(s, v, RT_F32, 2, hd);
    if (x < 0) return -1;
    if (un < 0 && out < 0) return x;
    if (out < 0) out = new_temp(s, RT_F32, 2, hd);
    if (un < 0) {
        View xv;
        int64_t st[2];
        view_ident(&xv, x, 2, hd);
        row_major(2, hd, st);
        return emit_copy(s, &xv, out, 0, st) < 0 ? -1 : out;
    }
    RtUnaryParams u = {.op = un};
    return emit(s, RT_OP_UNARY, &x, 1, out, &u, sizeof u) < 0 ? -1 : out;
}

static int emit_bin(LowerShared *s, int op, int a, int b, const int64_t *hd, int out) {
    RtBinaryParams p = {.op = op};
    int in[2] = {a, b};
    if (out < 0) out = new_temp(s, RT_F32, 2, hd);
    return emit(s, RT_OP_BINARY, in, 2, out, &p, sizeof p) < 0 ? -1 : out;
}

/* One direction of an unrolled lstm or gru: the input projections of every
 * step ([S·B, G·H]: W_ih x + bias, gates as columns), and where each step's
 * h lands in the sequence output (rows of `width`, from column `col`):
 * row k for step k, or row t for time t (the backward half of a
 * bidirectional lstm, which PyTorch's and Core ML's outputs keep at its
 * own time); with output_sequence false, the last step's h is row 0. */
typedef struct {
    int64_t S, B, H, width, col;
    int pre, yseq;
    bool rev, seq, own_time;
} RecDir;

/* A constant F32 weight of row blocks of src ([*, cols], blocks of H rows)
 * in the order `blocks` gives (-1: zeros); cols 0 makes it a vector. */
static int rec_weight(LowerShared *s, const IrOp *op, const char *tag, const float *src, int64_t cols,
                      const int *blocks, int nb, int64_t H) {
    int64_t w = cols ? cols : 1, n = nb * H * w;
    float *d = calloc((size_t)n + 1, sizeof(float));
    MILC_ASSERT(d);
    for (int j = 0; j < nb; j++)
        if (blocks[j] >= 0 && src) memcpy(d + j * H * w, src + blocks[j] * H * w, sizeof(float) * (size_t)(H * w));
    char name[RT_NAME_MAX];
    snprintf(name, sizeof name, "%s.%s", op->results[0]->name, tag);
    int64_t dims[2] = {nb * H, cols};
    int id = check_rc(s, rtb_weight(s->b, name, RT_F32, cols ? 2 : 1, dims, d));
    free(d);
    note_buf(s, id, cols ? 2 : 1, dims);
    return id;
}

/* The input projections of every step: x [S, B, I] as [S·B, I] times W (G·H rows) plus bias. */
static int rec_pre(LowerShared *s, const IrValue *x, int w, int bias, int64_t gh) {
    int64_t xd[2] = {x->type.dims[0] * x->type.dims[1], x->type.dims[2]}, pd[2] = {xd[0], gh};
    RtGemmParams gp = {.layout = RT_GEMM_ROWS, .has_bias = bias >= 0};
    int in[3] = {buffer_as(s, x, 2, xd, -1), w, bias};
    int pre = new_temp(s, RT_F32, 2, pd);
    if (w < 0 || emit(s, RT_OP_GEMM, in, bias >= 0 ? 3 : 2, pre, &gp, sizeof gp) < 0) return -1;
    return pre;
}

/* Columns [col, col + n) of buffer b ([B, W]) as a dense [B, n] buffer. */
static int rec_cols(LowerShared *s, int b, int64_t B, int64_t W, int64_t col, int64_t n) {
    View v;
    view_ident(&v, b, 2, (int64_t[]){B, W});
    v.dims[1] = n, v.offset = col;
    return buffer_of_view(s, &v, RT_F32, 2, v.dims);
}

/* Rows of time t of the projections: [B, n] from column col. */
static int rec_step(LowerShared *s, const RecDir *d, int64_t gw, int64_t t, int64_t col, int64_t n) {
    View v;
    view_ident(&v, d->pre, 2, (int64_t[]){d->S * d->B, gw});
    v.dims[0] = d->B, v.dims[1] = n, v.offset = t * d->B * gw + col;
    return buffer_of_view(s, &v, RT_F32, 2, v.dims);
}

static int act_buf(LowerShared *s, int b, int un, const int64_t *hd, int out) {
    View v;
    view_ident(&v, b, 2, hd);
    return b < 0 ? -1 : act_of(s, &v, un, hd, out);
}

/* h [B, H] of step k (time t) into the sequence output. */
static int rec_out(LowerShared *s, const RecDir *d, int h, int64_t k, int64_t t) {
    if (!d->seq && k != d->S - 1) return 0;
    int64_t row = !d->seq ? 0 : d->own_time ? t : k, hd[2] = {d->B, d->H}, st[2] = {d->width, 1};
    View hv;
    view_ident(&hv, h, 2, hd);
    return emit_copy(s, &hv, d->yseq, row * d->B * d->width + d->col, st);
}

typedef struct {
    int ra, ca, ha; /* RT_UN_* or -1 (linear) */
    bool has_clip;
    float clip;
} LstmActs;

/* One lstm direction: gates [i, f, o, z] = the step's projection + W_hh h
 * (+ peephole p_i, p_f times c_{t-1}), c = f·c + i·z (clipped to ±clip),
 * o's peephole on the new c, h = o·act(c).  *h and *c hold the initial
 * state and get the final one, written into hout / cout when those are set. */
static int lstm_dir(LowerShared *s, const RecDir *d, const LstmActs *a, int whw, const int *peep, int *h, int *c,
                    int hout, int cout) {
    int64_t B = d->B, H = d->H, gd[2] = {B, 4 * H}, hd[2] = {B, H};
    for (int64_t k = 0; k < d->S; k++) {
        int64_t t = d->rev ? d->S - 1 - k : k;
        bool last = k == d->S - 1;
        int g = new_temp(s, RT_F32, 2, gd), gi[3] = {*h, whw, rec_step(s, d, 4 * H, t, 0, 4 * H)};
        RtGemmParams rp = {.layout = RT_GEMM_ROWS, .has_residual = 1};
        if (emit(s, RT_OP_GEMM, gi, 3, g, &rp, sizeof rp) < 0) return -1;
        int gate[4];
        for (int q = 0; q < 4; q++) {
            if (q == 2) continue; /* o: after the new c */
            int pq = rec_cols(s, g, B, 4 * H, q * H, H);
            if (peep && q < 2) pq = emit_bin(s, RT_BIN_ADD, pq, emit_bin(s, RT_BIN_MUL, *c, peep[q], hd, -1), hd, -1);
            if ((gate[q] = act_buf(s, pq, q == 3 ? a->ca : a->ra, hd, -1)) < 0) return -1;
        }
        int fc = emit_bin(s, RT_BIN_MUL, gate[1], *c, hd, -1), iz = emit_bin(s, RT_BIN_MUL, gate[0], gate[3], hd, -1);
        int nc = emit_bin(s, RT_BIN_ADD, fc, iz, hd, last && !a->has_clip ? cout : -1);
        if (a->has_clip) {
            RtEltParams cp = {.op = RT_EL_CLIP, .alpha = -a->clip, .beta = a->clip};
            int out = last && cout >= 0 ? cout : new_temp(s, RT_F32, 2, hd);
            if (nc < 0 || emit(s, RT_OP_ELTWISE, &nc, 1, out, &cp, sizeof cp) < 0) return -1;
            nc = out;
        }
        int po = rec_cols(s, g, B, 4 * H, 2 * H, H);
        if (peep) po = emit_bin(s, RT_BIN_ADD, po, emit_bin(s, RT_BIN_MUL, nc, peep[2], hd, -1), hd, -1);
        int o = act_buf(s, po, a->ra, hd, -1), ac = act_buf(s, nc, a->ha, hd, -1);
        int nh = emit_bin(s, RT_BIN_MUL, o, ac, hd, last ? hout : -1);
        if (nh < 0 || nc < 0) return -1;
        *h = nh, *c = nc;
        if (rec_out(s, d, nh, k, t) < 0) return -1;
    }
    return 0;
}

/* The three peephole vectors [H] of p ([3H], order i, f, o), or NULL. */
static const int *lstm_peep(LowerShared *s, const IrOp *op, const IrValue *p, const char *tag, int64_t H, int *out) {
    if (!p) return NULL;
    float *v = const_floats(s, p);
    if (!v) return NULL;
    for (int q = 0; q < 3; q++) {
        char t[32];
        snprintf(t, sizeof t, "%s%d", tag, q);
        out[q] = rec_weight(s, op, t, v, 0, (int[]){q}, 1, H);
    }
    free(v);
    return out;
}

/* lstm, unrolled like rnn (forward, reverse or bidirectional: the backward
 * direction with its own weights on columns [H, 2H) of the states and the
 * outputs). */
static int lower_lstm(LowerShared *s, IrOp *op) {
    IrValue *x = arg_value(op, "x"), *h0 = arg_value(op, "initial_h"), *c0 = arg_value(op, "initial_c");
    const char *dir = arg_str_or(op, "direction", "forward");
    int un[3];
    if (rec_acts(s, op, (const char *const[]){"recurrent_activation", "cell_activation", "activation"},
                 (const char *const[]){"sigmoid", "tanh", "tanh"}, 3, un) < 0)
        return -1;
    LstmActs a = {un[0], un[1], un[2], ir_op_arg(op, "clip") != NULL, (float)arg_f64_or(op, "clip", 0)};
    int64_t seq = 0;
    ir_op_arg_i64(op, "output_sequence", &seq);
    bool bi = dir && !strcmp(dir, "bidirectional");
    if (!dir || (strcmp(dir, "forward") && strcmp(dir, "reverse") && !bi))
        return FAIL("lstm: 'direction' must be forward, reverse or bidirectional");
    if (!h0 || !c0) return FAIL("lstm: 'initial_h' and 'initial_c' must be tensors");
    int D = bi ? 2 : 1;
    int64_t S = x->type.dims[0], B = x->type.dims[1], I = x->type.dims[2];
    static const char *const wn[2][4] = {{"weight_ih", "weight_hh", "bias", "peephole"},
                                         {"weight_ih_back", "weight_hh_back", "bias_back", "peephole_back"}};
    IrValue *ys = op->results[0], *yh = op->results[1], *yc = op->results[2];
    int64_t H = ys->type.dims[2] / D, hd[2] = {B, H}, sd[2] = {B, D * H}, st[2] = {D * H, 1};
    if (ir_type_numel(&h0->type) != B * D * H || ir_type_numel(&c0->type) != B * D * H)
        return FAIL("lstm: the initial states must be [%lld, %lld]", (long long)B, (long long)(D * H));
    int yseq = result_buf(s, ys, ys->type.rank, ys->type.dims), hs = buffer_as(s, h0, 2, sd, -1),
        cs = buffer_as(s, c0, 2, sd, -1);
    int hres = result_buf(s, yh, 2, bi ? sd : hd), cres = result_buf(s, yc, 2, bi ? sd : hd);
    if (yseq < 0 || hs < 0 || cs < 0 || hres < 0 || cres < 0) return -1;
    for (int k = 0; k < D; k++) {
        IrValue *wi = arg_value(op, wn[k][0]), *wh = arg_value(op, wn[k][1]), *bias = arg_value(op, wn[k][2]);
        if (!wi || !wh || wi->type.dims[0] != 4 * H || wi->type.dims[1] != I || wh->type.dims[0] != 4 * H ||
            wh->type.dims[1] != H)
            return FAIL("lstm: '%s' must be [%lld, %lld] and '%s' [%lld, %lld]", wn[k][0], (long long)(4 * H),
                        (long long)I, wn[k][1], (long long)(4 * H), (long long)H);
        RecDir d = {S, B, H, D * H, k * H, -1, yseq, bi ? k == 1 : !strcmp(dir, "reverse"), seq != 0, k == 1};
        d.pre = rec_pre(s, x, gemm_weight(s, wi), bias ? const_weight(s, bias) : -1, 4 * H);
        int pw[3];
        const int *peep = lstm_peep(s, op, arg_value(op, wn[k][3]), k ? "pb" : "pf", H, pw);
        int h = bi ? rec_cols(s, hs, B, 2 * H, k * H, H) : hs, c = bi ? rec_cols(s, cs, B, 2 * H, k * H, H) : cs;
        if (s->failed || d.pre < 0 ||
            lstm_dir(s, &d, &a, gemm_weight(s, wh), peep, &h, &c, bi ? -1 : hres, bi ? -1 : cres) < 0)
            return -1;
        if (bi) {
            View v;
            view_ident(&v, h, 2, hd);
            if (emit_copy(s, &v, hres, k * H, st) < 0) return -1;
            view_ident(&v, c, 2, hd);
            if (emit_copy(s, &v, cres, k * H, st) < 0) return -1;
        }
    }
    set_buffer(s, ys, yseq, s->bi[yseq].rank, s->bi[yseq].dims);
    set_buffer(s, yh, hres, 2, bi ? sd : hd);
    set_buffer(s, yc, cres, 2, bi ? sd : hd);
    return 0;
}

/* gru, unrolled like lstm.  Core ML's weights stack the gates [r, o, z]
 * (reset, output, update); they are restacked [r, z, o] at compile time so
 * that r and z are one GEMM on h with the step's projection as residual:
 *   r, z = act_r(W_i x + b + W_h h)
 *   o    = act(W_io x + b_o + W_ho (r·h))             (reset_after false)
 *   o    = act(W_io x + b_io + r·(W_ho h + b_ho))      (reset_after true:
 *          input_bias is b_i, bias is b_h; otherwise both are summed)
 *   h    = (1 - z)·o + z·h = o + z·(h - o). */
static int lower_gru(LowerShared *s, IrOp *op) {
    IrValue *x = arg_value(op, "x"), *h0 = arg_value(op, "initial_h"), *wi = arg_value(op, "weight_ih"),
            *wh = arg_value(op, "weight_hh"), *bias = arg_value(op, "bias"), *ib = arg_value(op, "input_bias");
    const char *dir = arg_str_or(op, "direction", "forward");
    int un[2];
    if (rec_acts(s, op, (const char *const[]){"recurrent_activation", "activation"},
                 (const char *const[]){"sigmoid", "tanh"}, 2, un) < 0)
        return -1;
    int ra = un[0], ha = un[1];
    int64_t seq = 0, after = 0;
    ir_op_arg_i64(op, "output_sequence", &seq);
    ir_op_arg_i64(op, "reset_after", &after);
    if (!dir || (strcmp(dir, "forward") && strcmp(dir, "reverse")))
        return FAIL("gru: 'direction' must be forward or reverse");
    if (!h0 || !wi || !wh) return FAIL("gru: 'initial_h', 'weight_ih' and 'weight_hh' must be tensors");
    int64_t S = x->type.dims[0], B = x->type.dims[1], I = x->type.dims[2], H = wh->type.dims[1];
    if (wi->type.dims[0] != 3 * H || wi->type.dims[1] != I || wh->type.dims[0] != 3 * H ||
        ir_type_numel(&h0->type) != B * H)
        return FAIL("gru: the weights must be [3H, %lld] and [3H, H], 'initial_h' [%lld, H]", (long long)I,
                    (long long)B);
    float *fi = const_floats(s, wi), *fh = const_floats(s, wh), *fb = bias ? const_floats(s, bias) : NULL,
          *fib = ib ? const_floats(s, ib) : NULL, *pb = calloc((size_t)(3 * H), sizeof(float));
    MILC_ASSERT(pb);
    if (fi && fh && (!bias || fb) && (!ib || fib))
        for (int64_t j = 0; j < 3 * H; j++) /* b_ho stays out of the projection when reset_after */
            pb[j] = (fib ? fib[j] : 0) + (fb && !(after && j >= H && j < 2 * H) ? fb[j] : 0);
    static const int rzo[3] = {0, 2, 1}, rz[2] = {0, 2}, o_[1] = {1};
    int wiw = fi ? rec_weight(s, op, "wi", fi, I, rzo, 3, H) : -1, bw = rec_weight(s, op, "b", pb, 0, rzo, 3, H);
    int wrz = fh ? rec_weight(s, op, "wrz", fh, H, rz, 2, H) : -1,
        wo = fh ? rec_weight(s, op, "wo", fh, H, o_, 1, H) : -1;
    int bho = after && fb ? rec_weight(s, op, "bho", fb, 0, o_, 1, H) : -1;
    free(fi), free(fh), free(fb), free(fib), free(pb);
    IrValue *ys = op->results[0], *yh = op->results[1];
    int64_t hd[2] = {B, H}, rd[2] = {B, 2 * H};
    RecDir d = {S,        B,    H, H, 0, -1, result_buf(s, ys, ys->type.rank, ys->type.dims), !strcmp(dir, "reverse"),
                seq != 0, false};
    d.pre = rec_pre(s, x, wiw, bw, 3 * H);
    int h = buffer_as(s, h0, 2, hd, -1), hres = result_buf(s, yh, 2, hd);
    if (s->failed || d.pre < 0 || d.yseq < 0 || h < 0 || hres < 0 || wrz < 0 || wo < 0) return -1;
    for (int64_t k = 0; k < S; k++) {
        int64_t t = d.rev ? S - 1 - k : k;
        int g = new_temp(s, RT_F32, 2, rd), gi[3] = {h, wrz, rec_step(s, &d, 3 * H, t, 0, 2 * H)};
        RtGemmParams rp = {.layout = RT_GEMM_ROWS, .has_residual = 1};
        if (emit(s, RT_OP_GEMM, gi, 3, g, &rp, sizeof rp) < 0) return -1;
        int r = act_buf(s, rec_cols(s, g, B, 2 * H, 0, H), ra, hd, -1),
            z = act_buf(s, rec_cols(s, g, B, 2 * H, H, H), ra, hd, -1), po = rec_step(s, &d, 3 * H, t, 2 * H, H);
        int q = new_temp(s, RT_F32, 2, hd);
        if (after) { /* po + r·(W_ho h + b_ho) */
            RtGemmParams op2 = {.layout = RT_GEMM_ROWS, .has_bias = bho >= 0};
            int in[3] = {h, wo, bho};
            if (emit(s, RT_OP_GEMM, in, bho >= 0 ? 3 : 2, q, &op2, sizeof op2) < 0) return -1;
            q = emit_bin(s, RT_BIN_ADD, po, emit_bin(s, RT_BIN_MUL, r, q, hd, -1), hd, -1);
        } else { /* W_ho (r·h) + po */
            int in[3] = {emit_bin(s, RT_BIN_MUL, r, h, hd, -1), wo, po};
            if (emit(s, RT_OP_GEMM, in, 3, q, &rp, sizeof rp) < 0) return -1;
        }
        int o = act_buf(s, q, ha, hd, -1);
        int m = emit_bin(s, RT_BIN_MUL, z, emit_bin(s, RT_BIN_SUB, h, o, hd, -1), hd, -1);
        h = emit_bin(s, RT_BIN_ADD, o, m, hd, k == S - 1 ? hres : -1);
        if (h < 0 || rec_out(s, &d, h, k, t) < 0) return -1;
    }
    set_buffer(s, ys, d.yseq, s->bi[d.yseq].rank, s->bi[d.yseq].dims);
    set_buffer(s, yh, h, 2, hd);
    return 0;
}

/* ---- control flow ---- */

static int lower_op(LowerShared *s, IrOp *op);

/* The ops of a nested block, in order, in the program being built. */
static int lower_block(LowerShared *s, IrBlock *b) {
    for (IrOp *o = b->first; o; o = o->next) {
        o->aux = NULL; /* fusion groups are function-level: none here */
        if (lower_op(s, o) < 0 || s->failed) return -1;
    }
    return 0;
}

/* cond: a constant predicate lowers the branch it takes; otherwise both
 * branches run and each result is select(pred, true's, false's).  Branch
 * ops have no side effects (states are not in a branch's reach here), so
 * that is the program's meaning; the cost is running both, and an index
 * error in the branch not taken is still reported. */
static int lower_cond(LowerShared *s, IrOp *op) {
    IrValue *pred = arg_value(op, "pred");
    const IrLiteral *l = ir_op_arg_const(op, "pred");
    if (op->nblocks != 2) return FAIL("cond: needs a true and a false branch");
    for (int k = 0; k < 2; k++)
        if (op->blocks[k]->noutputs != op->nresults)
            return FAIL("cond: each branch must return %d values", op->nresults);
    if (l) {
        IrBlock *b = op->blocks[ir_lit_i64(l, 0) != 0 ? 0 : 1];
        if (lower_block(s, b) < 0) return -1;
        s->cur = op;
        for (int i = 0; i < op->nresults; i++) {
            LVal *L = lval(s, b->outputs[i]);
            if (!L->has) return -1;
            View v = L->v;
            if (set_view(s, op->results[i], &v, L->pend) < 0) return -1;
        }
        return 0;
    }
    if (!pred) return FAIL("cond: 'pred' must be a bool value");
    if (lower_block(s, op->blocks[0]) < 0 || lower_block(s, op->blocks[1]) < 0) return -1;
    s->cur = op;
    for (int i = 0; i < op->nresults; i++) {
        IrValue *r = op->results[i];
        int in[3] = {materialize(s, pred), materialize(s, op->blocks[0]->outputs[i]),
                     materialize(s, op->blocks[1]->outputs[i])};
        int out = result_buf(s, r, r->type.rank, r->type.dims);
        if (emit(s, RT_OP_SELECT, in, 3, out, NULL, 0) < 0) return -1;
        set_buffer(s, r, out, s->bi[out].rank, s->bi[out].dims);
    }
    return 0;
}

/* A loop's control op (RT_OP_LOOP_*): no output. */
static int emit_control(LowerShared *s, RtOpKind k, const int *in, int nin) {
    if (s->failed || (nin && in[0] < 0)) return -1;
    if (check_rc(s, rtb_op(s->b, k, in, nin, NULL, 0, NULL, 0)) < 0) return -1;
    s->nops++;
    return 0;
}

/* Is v defined inside one of op's nested blocks (at any depth)? */
static bool inside(const IrValue *v, const IrOp *op) {
    for (const IrBlock *b = v->block; b; b = b->parent ? b->parent->block : NULL)
        if (b->parent == op) return true;
    return false;
}

/* while_loop: each loop variable lives in a buffer of its own (C), set from
 * its initial value before the loop; LOOP_BEGIN, the condition block on C,
 * LOOP_TEST, the body on C, its results copied out (all of them first, then
 * into C: a body may swap variables), LOOP_END.  The results are C after the
 * loop.  RT_LOOP_MAX_ITERS bounds each execution of the loop (RT_ELOOP). */
static int lower_while(LowerShared *s, IrOp *op) {
    IrArg *lv = ir_op_arg(op, "loop_vars");
    int n = lv && lv->kind == IR_ARG_TUPLE ? lv->nitems : lv && lv->kind == IR_ARG_VALUE ? 1 : 0;
    IrBlock *cb = op->nblocks == 2 ? op->blocks[0] : NULL, *body = op->nblocks == 2 ? op->blocks[1] : NULL;
    if (!n || !cb || cb->ninputs != n || body->ninputs != n || body->noutputs != n || cb->noutputs != 1 ||
        op->nresults != n)
        return FAIL("while_loop: needs loop variables, a condition and a body that agree on them");
    int *c = malloc(sizeof(int) * 2 * (size_t)n), *t = c + n;
    LVal *saved = malloc(sizeof(LVal) * (size_t)s->nvals);
    MILC_ASSERT(c && saved);
    int rc = -1;
    for (int i = 0; i < n; i++) {
        IrValue *init = lv->kind == IR_ARG_TUPLE ? lv->items[i] : lv->value;
        View v;
        const IrType *ty = &init->type;
        int64_t st[MAXR];
        row_major(ty->rank, ty->dims, st);
        c[i] = new_temp(s, rt_dt(ty->dtype), ty->rank, ty->dims);
        if (c[i] < 0 || !resolved_view(s, init, &v) || emit_copy(s, &v, c[i], 0, st) < 0) goto out;
    }
    /* Values outside the loop that its blocks materialize get their copies
     * inside the loop, which may run no iteration: after the loop they are
     * read as they were before it. */
    memcpy(saved, s->lv, sizeof(LVal) * (size_t)s->nvals);
    if (emit_control(s, RT_OP_LOOP_BEGIN, NULL, 0) < 0) goto out;
    for (int i = 0; i < n; i++) set_buffer(s, cb->inputs[i], c[i], s->bi[c[i]].rank, s->bi[c[i]].dims);
    if (lower_block(s, cb) < 0) goto out;
    s->cur = op;
    int pred = materialize(s, cb->outputs[0]);
    if (pred < 0 || emit_control(s, RT_OP_LOOP_TEST, &pred, 1) < 0) goto out;
    for (int i = 0; i < n; i++) set_buffer(s, body->inputs[i], c[i], s->bi[c[i]].rank, s->bi[c[i]].dims);
    if (lower_block(s, body) < 0) goto out;
    s->cur = op;
    for (int i = 0; i < n; i++) {
        const IrType *ty = &body->outputs[i]->type;
        View v;
        int64_t st[MAXR];
        row_major(ty->rank, ty->dims, st);
        t[i] = new_temp(s, rt_dt(ty->dtype), ty->rank, ty->dims);
        if (t[i] < 0 || !resolved_view(s, body->outputs[i], &v) || emit_copy(s, &v, t[i], 0, st) < 0) goto out;
    }
    for (int i = 0; i < n; i++) {
        View v;
        int64_t st[MAXR];
        view_ident(&v, t[i], s->bi[t[i]].rank, s->bi[t[i]].dims);
        row_major(v.rank, v.dims, st);
        if (emit_copy(s, &v, c[i], 0, st) < 0) goto out;
    }
    if (emit_control(s, RT_OP_LOOP_END, NULL, 0) < 0) goto out;
    for (int id = 0; id < s->nvals; id++)
        if (!inside(s->vals[id], op)) s->lv[id] = saved[id];
    for (int i = 0; i < n; i++) {
        IrValue *r = op->results[i];
        int out = result_buf(s, r, r->type.rank, r->type.dims);
        View v;
        int64_t st[MAXR];
        view_ident(&v, c[i], s->bi[c[i]].rank, s->bi[c[i]].dims);
        row_major(v.rank, v.dims, st);
        if (out < 0 || emit_copy(s, &v, out, 0, st) < 0) goto out;
        set_buffer(s, r, out, s->bi[out].rank, s->bi[out].dims);
    }
    rc = 0;
out:
    free(c), free(saved);
    return s->failed ? -1 : rc;
}

/* The ops of this section; lower_op's default case comes here. */
static bool lower_data_op(IrOpKind k) {
    switch (k) {
    case OP_SCATTER:
    case OP_SCATTER_ALONG_AXIS:
    case OP_SCATTER_ND:
    case OP_ARGSORT:
    case OP_TOPK:
    case OP_QUANTIZE:
    case OP_DEQUANTIZE:
    case OP_RANDOM_UNIFORM:
    case OP_RANDOM_NORMAL:
    case OP_RANDOM_BERNOULLI:
    case OP_RANDOM_CATEGORICAL:
    case OP_COND:
    case OP_WHILE_LOOP:
    case OP_FILL_LIKE:
    case OP_RANGE_1D:
    case OP_CROP:
    case OP_PIXEL_SHUFFLE:
    case OP_PIXEL_UNSHUFFLE:
    case OP_SLIDING_WINDOWS:
    case OP_PAD:
    case OP_ONE_HOT:
    case OP_GATHER_ND:
    case OP_EINSUM:
    case OP_RESHAPE_LIKE:
    case OP_REVERSE_SEQUENCE:
    case OP_SPACE_TO_BATCH:
    case OP_BATCH_TO_SPACE:
    case OP_RESIZE_NEAREST_NEIGHBOR:
    case OP_RESIZE_BILINEAR:
    case OP_UPSAMPLE_BILINEAR:
    case OP_RESIZE:
    case OP_CROP_RESIZE:
    case OP_NON_MAXIMUM_SUPPRESSION:
    case OP_MAKE_LIST:
    case OP_LIST_LENGTH:
    case OP_LIST_READ:
    case OP_LIST_WRITE:
    case OP_LIST_GATHER:
    case OP_LIST_SCATTER:
    case OP_AFFINE:
    case OP_RESAMPLE:
    case OP_RNN:
    case OP_LSTM:
    case OP_GRU: return true;
    default: return false;
    }
}

static int lower_data(LowerShared *s, IrOp *op) {
    switch (op->kind) {
    case OP_SCATTER:
    case OP_SCATTER_ALONG_AXIS:
    case OP_SCATTER_ND: return lower_scatter(s, op);
    case OP_ARGSORT:
    case OP_TOPK: return lower_sort(s, op);
    case OP_QUANTIZE:
    case OP_DEQUANTIZE: return lower_quant(s, op);
    case OP_COND: return lower_cond(s, op);
    case OP_WHILE_LOOP: return lower_while(s, op);
    case OP_FILL_LIKE: return lower_fill_like(s, op);
    case OP_RANGE_1D: return lower_range(s, op);
    case OP_CROP: return lower_crop(s, op);
    case OP_PIXEL_SHUFFLE:
    case OP_PIXEL_UNSHUFFLE: return lower_pixel_shuffle(s, op);
    case OP_SLIDING_WINDOWS: return lower_sliding_windows(s, op);
    case OP_PAD: return lower_pad(s, op);
    case OP_ONE_HOT: return lower_one_hot(s, op);
    case OP_GATHER_ND: return lower_gather_nd(s, op);
    case OP_EINSUM: return lower_einsum(s, op);
    case OP_RESHAPE_LIKE: return lower_reshape(s, op);
    case OP_REVERSE_SEQUENCE: return lower_reverse_sequence(s, op);
    case OP_SPACE_TO_BATCH:
    case OP_BATCH_TO_SPACE: return lower_space_batch(s, op);
    case OP_RESIZE_NEAREST_NEIGHBOR:
    case OP_RESIZE_BILINEAR:
    case OP_UPSAMPLE_BILINEAR:
    case OP_RESIZE: return lower_resize(s, op);
    case OP_CROP_RESIZE: return lower_crop_resize(s, op);
    case OP_NON_MAXIMUM_SUPPRESSION: return lower_nms(s, op);
    case OP_MAKE_LIST:
    case OP_LIST_LENGTH:
    case OP_LIST_READ:
    case OP_LIST_WRITE:
    case OP_LIST_GATHER:
    case OP_LIST_SCATTER: return lower_list_op(s, op);
    case OP_AFFINE:
    case OP_RESAMPLE: return lower_sample(s, op);
    case OP_RNN: return lower_rnn(s, op);
    case OP_LSTM: return lower_lstm(s, op);
    case OP_GRU: return lower_gru(s, op);
    default: return lower_random(s, op);
    }
}

/* non_zero of a constant has a shape (the checker counted it) and folds to
 * a constant; of run-time data it is an output whose rows rt_run counts. */
bool backend_folds_only(const IrOp *op) {
    return op->kind == OP_NON_ZERO && op->nresults == 1 && ir_value_numel(op->results[0]) >= 0;
}

/* v's rows are known only at run time: non_zero of run-time data. */
static bool counted_rows(const IrValue *v) {
    return v->def && v->def->kind == OP_NON_ZERO && ir_value_numel(v) < 0;
}

/* non_zero of run-time data: an RT_OP_NON_ZERO into its output's buffer of
 * [numel(x), rank] rows at most, of which the run counts the ones written.
 * No op may read it: every op's shapes are planned at compile time. */
static int lower_non_zero(LowerShared *s, const IrOp *op) {
    IrValue *x = arg_value(op, "x"), *y = op->results[0];
    int slot = output_slot(s, y);
    if (slot < 0 || y->uses != 1)
        return FAIL("non_zero of run-time data: its rows are counted at run time, so the CPU backend can only return "
                    "'%s' as it is; no op may read it (every op's shapes are planned at compile time)",
                    y->name);
    if (x->type.rank < 1) return FAIL("non_zero: x must have a rank of at least 1");
    int in = materialize(s, x), out = s->out_buf[slot];
    s->out_done[slot] = true;
    return emit(s, RT_OP_NON_ZERO, &in, 1, out, NULL, 0) < 0 ? -1 : 0;
}

bool backend_lowers(IrOpKind k) {
    /* The ops lower_op's switch handles; every other op of the table is
     * checked but not run yet. */
    static const IrOpKind lowered[] = {
        OP_CONST,
        OP_NON_ZERO,
        OP_LINEAR,
        OP_CONV,
        OP_MATMUL,
        OP_ADD,
        OP_SUB,
        OP_MUL,
        OP_REAL_DIV,
        OP_POW,
        OP_RSQRT,
        OP_SQRT,
        OP_EXP,
        OP_TANH,
        OP_SIGMOID,
        OP_SILU,
        OP_GELU,
        OP_SOFTMAX,
        OP_REDUCE_MEAN,
        OP_REDUCE_SUM,
        OP_REDUCE_MAX,
        OP_LAYER_NORM,
        OP_RESHAPE,
        OP_EXPAND_DIMS,
        OP_SQUEEZE,
        OP_TRANSPOSE,
        OP_CONCAT,
        OP_SPLIT,
        OP_SLICE_BY_INDEX,
        OP_SLICE_BY_SIZE,
        OP_GATHER,
        OP_CAST,
        OP_BAND_PART,
        OP_TILE,
        OP_SELECT,
        OP_SCALED_DOT_PRODUCT_ATTENTION,
        /* elementwise math, activations, comparisons and logic */
        OP_ABS,
        OP_ACOS,
        OP_ASIN,
        OP_ATAN,
        OP_ATANH,
        OP_CEIL,
        OP_COS,
        OP_COSH,
        OP_ERF,
        OP_EXP2,
        OP_FLOOR,
        OP_INVERSE,
        OP_LOG,
        OP_ROUND,
        OP_SIGN,
        OP_SIN,
        OP_SINH,
        OP_SQUARE,
        OP_TAN,
        OP_RELU,
        OP_RELU6,
        OP_SOFTPLUS,
        OP_SOFTSIGN,
        OP_CLIP,
        OP_THRESHOLD,
        OP_THRESHOLDED_RELU,
        OP_ELU,
        OP_LEAKY_RELU,
        OP_CLAMPED_RELU,
        OP_LINEAR_ACTIVATION,
        OP_SCALED_TANH,
        OP_SIGMOID_HARD,
        OP_PRELU,
        OP_SOFTPLUS_PARAMETRIC,
        OP_FLOOR_DIV,
        OP_MAXIMUM,
        OP_MINIMUM,
        OP_MOD,
        OP_EQUAL,
        OP_NOT_EQUAL,
        OP_GREATER,
        OP_GREATER_EQUAL,
        OP_LESS,
        OP_LESS_EQUAL,
        OP_LOGICAL_AND,
        OP_LOGICAL_OR,
        OP_LOGICAL_XOR,
        OP_LOGICAL_NOT,
        /* reductions, normalizations, convolution and pooling */
        OP_REDUCE_MIN,
        OP_REDUCE_PROD,
        OP_REDUCE_L1_NORM,
        OP_REDUCE_L2_NORM,
        OP_REDUCE_LOG_SUM,
        OP_REDUCE_LOG_SUM_EXP,
        OP_REDUCE_SUM_SQUARE,
        OP_REDUCE_ARGMAX,
        OP_REDUCE_ARGMIN,
        OP_BATCH_NORM,
        OP_INSTANCE_NORM,
        OP_MAX_POOL,
        OP_AVG_POOL,
        OP_L2_POOL,
        OP_CONV_TRANSPOSE,
        OP_CONV_QUANTIZED,
        OP_L2_NORM,
        OP_LOCAL_RESPONSE_NORM,
        OP_CUMSUM,
        OP_GATHER_ALONG_AXIS,
        /* data movement */
        OP_IDENTITY,
        OP_FLATTEN2D,
        OP_REVERSE,
        OP_STACK,
        OP_FILL,
        OP_SHAPE,
        OP_SPACE_TO_DEPTH,
        OP_DEPTH_TO_SPACE,
        OP_UPSAMPLE_NEAREST_NEIGHBOR,
        OP_CONSTEXPR_LUT_TO_DENSE,
        OP_CONSTEXPR_CAST,
        OP_CONSTEXPR_AFFINE_DEQUANTIZE,
        OP_CONSTEXPR_BLOCKWISE_SHIFT_SCALE,
        OP_CONSTEXPR_SPARSE_TO_DENSE,
        OP_CONSTEXPR_LUT_TO_SPARSE,
        OP_CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE,
        /* states */
        OP_READ_STATE,
        OP_WRITE_STATE,
        OP_COREML_UPDATE_STATE,
        OP_SLICE_UPDATE,
    };
    for (size_t i = 0; i < sizeof lowered / sizeof *lowered; i++)
        if (lowered[i] == k) return true;
    return lower_data_op(k);
}

static int lower_op(LowerShared *s, IrOp *op) {
    s->cur = op;
    if (s->fuse && op->aux) {
        const FuseGroup *g = op->aux;
        return g->root == op ? lower_group(s, g) : 0;
    }
    if (backend_folds_only(op))
        return FAIL("op %s of a constant of more than %d elements is not folded, and the cpu backend runs it only "
                    "folded",
                    mil_op_name(op->kind), BACKEND_FOLD_MAX_ELEMS);
    if (!backend_lowers(op->kind)) return FAIL("op %s is not supported by the cpu backend yet", mil_op_name(op->kind));
    if (op->kind == OP_NON_ZERO) return lower_non_zero(s, op);
    for (int r = 0; r < op->nresults; r++)
        if (ir_value_numel(op->results[r]) < 0)
            return FAIL("'%s' has a dynamic shape; the CPU backend needs static shapes", op->results[r]->name);
        else if (ir_value_numel(op->results[r]) == 0 && op->kind != OP_CONST)
            return FAIL("'%s' %s", op->results[r]->name, NO_ELEMENTS);
    switch (op->kind) {
    case OP_CONST: return 0; /* a weight when first used as a tensor */
    case OP_CONSTEXPR_LUT_TO_DENSE:
    case OP_CONSTEXPR_CAST:
    case OP_CONSTEXPR_AFFINE_DEQUANTIZE:
    case OP_CONSTEXPR_BLOCKWISE_SHIFT_SCALE:
    case OP_CONSTEXPR_SPARSE_TO_DENSE:
    case OP_CONSTEXPR_LUT_TO_SPARSE:
    case OP_CONSTEXPR_SPARSE_BLOCKWISE_SHIFT_SCALE:
        return 0; /* its consumer reads it (lower_lut_linear) or makes it dense (const_data) */
    case OP_LINEAR: {
        IrValue *w = arg_value(op, "weight");
        if (w && w->def && w->def->kind == OP_CONSTEXPR_LUT_TO_DENSE && !ir_op_arg(w->def, "shape"))
            return lower_lut_linear(s, op, w);
        if (w && w->def &&
            (w->def->kind == OP_CONSTEXPR_AFFINE_DEQUANTIZE || w->def->kind == OP_CONSTEXPR_BLOCKWISE_SHIFT_SCALE)) {
            int rc = lower_q_linear(s, op, w);
            if (rc <= 0) return rc;
        }
        if (w && w->def && w->def->kind == OP_CONSTEXPR_SPARSE_TO_DENSE) {
            int rc = lower_sparse_linear(s, op, w);
            if (rc <= 0) return rc;
        }
    }
        return lower_gemm(s, op, op->results[0], RT_GEMM_ROWS, arg_value(op, "x"), arg_value(op, "weight"),
                          arg_value(op, "bias"), RT_ACT_NONE, NULL);
    case OP_CONV_QUANTIZED: return lower_conv_general(s, op);
    case OP_CONV:
        if (!backend_conv_is_1x1(op)) return lower_conv_general(s, op);
        return lower_gemm(s, op, op->results[0], RT_GEMM_CHANNELS, arg_value(op, "x"), arg_value(op, "weight"),
                          arg_value(op, "bias"), RT_ACT_NONE, NULL);
    case OP_MATMUL: {
        IrValue *x = arg_value(op, "x"), *y = arg_value(op, "y");
        if (x->type.rank < 2 || y->type.rank < 2) return FAIL("matmul: the CPU backend needs operands of rank >= 2");
        int64_t tx = 0, ty = 0;
        ir_op_arg_i64(op, "transpose_x", &tx);
        ir_op_arg_i64(op, "transpose_y", &ty);
        RtMatmulParams p = {.transpose_x = tx != 0, .transpose_y = ty != 0};
        int in[2] = {materialize(s, x), materialize(s, y)}, out = out_for(s, op);
        if (emit(s, RT_OP_MATMUL, in, 2, out, &p, sizeof p) < 0) return -1;
        done(s, op, out);
        return 0;
    }
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_REAL_DIV:
    case OP_POW:
    case OP_MAXIMUM:
    case OP_MINIMUM: return lower_binary(s, op);
    case OP_RSQRT:
    case OP_SQRT:
    case OP_EXP:
    case OP_TANH:
    case OP_SIGMOID:
    case OP_SILU:
    case OP_GELU: return lower_unary(s, op);
    case OP_SOFTMAX: {
        int64_t a = -1;
        ir_op_arg_i64(op, "axis", &a);
        RtAxisParams p = {.axis = normalize_axis(a, rtype(op)->rank)};
        int in = materialize(s, arg_value(op, "x")), out = out_for(s, op);
        if (emit(s, RT_OP_SOFTMAX, &in, 1, out, &p, sizeof p) < 0) return -1;
        done(s, op, out);
        return 0;
    }
    case OP_REDUCE_MEAN:
    case OP_REDUCE_SUM:
    case OP_REDUCE_MAX:
    case OP_REDUCE_MIN:
    case OP_REDUCE_PROD:
    case OP_REDUCE_L1_NORM:
    case OP_REDUCE_L2_NORM:
    case OP_REDUCE_LOG_SUM:
    case OP_REDUCE_LOG_SUM_EXP:
    case OP_REDUCE_SUM_SQUARE:
    case OP_REDUCE_ARGMAX:
    case OP_REDUCE_ARGMIN: return lower_reduce(s, op);
    case OP_FLOOR_DIV:
    case OP_MOD:
    case OP_EQUAL:
    case OP_NOT_EQUAL:
    case OP_GREATER:
    case OP_GREATER_EQUAL:
    case OP_LESS:
    case OP_LESS_EQUAL:
    case OP_LOGICAL_AND:
    case OP_LOGICAL_OR:
    case OP_LOGICAL_XOR: return lower_binop(s, op);
    case OP_BATCH_NORM: return lower_batch_norm(s, op);
    case OP_INSTANCE_NORM: return lower_instance_norm(s, op);
    case OP_L2_NORM: return lower_l2_norm(s, op);
    case OP_LOCAL_RESPONSE_NORM: return lower_lrn(s, op);
    case OP_CUMSUM: return lower_cumsum(s, op);
    case OP_GATHER_ALONG_AXIS: return lower_gather_axis(s, op);
    case OP_MAX_POOL:
    case OP_AVG_POOL:
    case OP_L2_POOL: return lower_pool(s, op);
    case OP_CONV_TRANSPOSE: return lower_conv_general(s, op);
    case OP_LAYER_NORM: return lower_layer_norm(s, op);
    case OP_RESHAPE:
    case OP_EXPAND_DIMS:
    case OP_SQUEEZE:
    case OP_FLATTEN2D: return lower_reshape(s, op);
    case OP_IDENTITY: return lower_identity(s, op);
    case OP_REVERSE: return lower_reverse(s, op);
    case OP_STACK: return lower_stack(s, op);
    case OP_FILL: return lower_fill(s, op);
    case OP_SHAPE: return lower_shape(s, op);
    case OP_SPACE_TO_DEPTH:
    case OP_DEPTH_TO_SPACE:
    case OP_UPSAMPLE_NEAREST_NEIGHBOR: return lower_rearrange(s, op);
    case OP_TRANSPOSE: return lower_transpose(s, op);
    case OP_CONCAT: return lower_concat(s, op);
    case OP_SPLIT: return lower_split(s, op);
    case OP_SLICE_BY_INDEX:
    case OP_SLICE_BY_SIZE: return lower_slice(s, op);
    case OP_READ_STATE: return lower_read_state(s, op);
    case OP_WRITE_STATE:
    case OP_COREML_UPDATE_STATE: return lower_write_state(s, op);
    case OP_SLICE_UPDATE: return lower_slice_update(s, op);
    case OP_GATHER: {
        int64_t a = 0, bd = 0;
        ir_op_arg_i64(op, "axis", &a);
        ir_op_arg_i64(op, "batch_dims", &bd);
        if (bd) return FAIL("gather: batch_dims is not supported by the CPU backend");
        IrValue *x = arg_value(op, "x");
        RtAxisParams p = {.axis = normalize_axis(a, x->type.rank)};
        int in[2] = {materialize(s, x), materialize(s, arg_value(op, "indices"))}, out = out_for(s, op);
        if (emit(s, RT_OP_GATHER, in, 2, out, &p, sizeof p) < 0) return -1;
        done(s, op, out);
        return 0;
    }
    case OP_CAST: return lower_cast(s, op);
    case OP_BAND_PART: {
        int64_t lo = -1, up = -1;
        ir_op_arg_i64(op, "lower", &lo);
        ir_op_arg_i64(op, "upper", &up);
        RtBandParams p = {.lower = (int32_t)lo, .upper = (int32_t)up};
        int in = materialize(s, arg_value(op, "x")), out = out_for(s, op);
        if (emit(s, RT_OP_BAND_PART, &in, 1, out, &p, sizeof p) < 0) return -1;
        done(s, op, out);
        return 0;
    }
    case OP_TILE: return lower_tile(s, op);
    case OP_SELECT: {
        int in[3] = {materialize(s, arg_value(op, "cond")), materialize(s, arg_value(op, "a")),
                     materialize(s, arg_value(op, "b"))};
        int out = out_for(s, op);
        if (emit(s, RT_OP_SELECT, in, 3, out, NULL, 0) < 0) return -1;
        done(s, op, out);
        return 0;
    }
    case OP_SCALED_DOT_PRODUCT_ATTENTION: return lower_sdpa(s, op);
    default:
        if (op->kind == OP_RELU || elt_op(op->kind) >= 0) return lower_eltwise(s, op);
        if (lower_data_op(op->kind)) return lower_data(s, op);
        break;
    }
    return FAIL("%s: not supported by the CPU backend", mil_op_name(op->kind));
}

/* ---- entry points ---- */

void lower_shared_weights(LowerShared *s, const MilBlobFile *weights) { s->weights = weights; }

/* The values of op's nested blocks (control flow), numbered from id on
 * when vals is given: their count. */
static int nested_values(IrOp *op, IrValue **vals, int id) {
    int n = 0;
    for (int k = 0; k < op->nblocks; k++) {
        IrBlock *b = op->blocks[k];
        for (int i = 0; i < b->ninputs; i++, n++)
            if (vals) vals[id + n] = b->inputs[i], b->inputs[i]->aux = (void *)(intptr_t)(id + n + 1);
        for (IrOp *o = b->first; o; o = o->next) {
            for (int r = 0; r < o->nresults; r++, n++)
                if (vals) vals[id + n] = o->results[r], o->results[r]->aux = (void *)(intptr_t)(id + n + 1);
            n += nested_values(o, vals, vals ? id + n : 0);
        }
    }
    return n;
}

LowerShared *lower_shared_new(RtPlanBuilder *b, IrFunction *f, const char *model_dir, DiagSink *d) {
    LowerShared *s = calloc(1, sizeof *s);
    MILC_ASSERT(s);
    s->b = b, s->f = f, s->d = d, s->model_dir = model_dir;
    int n = f->ninputs;
    IR_FOR_EACH_OP(op, f) n += op->nresults + nested_values(op, NULL, 0);
    s->vals = calloc((size_t)n + 1, sizeof *s->vals);
    s->weight = malloc(sizeof(int) * ((size_t)n + 1));
    s->weight2d = malloc(sizeof(int) * ((size_t)n + 1));
    s->input_buf = malloc(sizeof(int) * ((size_t)n + 1));
    s->lv = calloc((size_t)n + 1, sizeof *s->lv);
    s->out_buf = malloc(sizeof(int) * ((size_t)f->noutputs + 1));
    s->out_done = calloc((size_t)f->noutputs + 1, 1);
    MILC_ASSERT(s->vals && s->weight && s->weight2d && s->input_buf && s->lv && s->out_buf && s->out_done);
    for (int i = 0; i < n; i++) s->weight[i] = s->weight2d[i] = s->input_buf[i] = -1;
    int id = 0;
    for (int i = 0; i < f->ninputs; i++)
        s->vals[id] = f->inputs[i], f->inputs[i]->aux = (void *)(intptr_t)(id + 1), id++;
    IR_FOR_EACH_OP(op, f) {
        for (int r = 0; r < op->nresults; r++) {
            s->vals[id] = op->results[r];
            op->results[r]->aux = (void *)(intptr_t)(id + 1);
            id++;
        }
        id += nested_values(op, s->vals, id);
    }
    s->nvals = id;
    s->reshaped = calloc((size_t)n + 1, sizeof *s->reshaped);
    s->wpos = malloc(sizeof(int) * ((size_t)n + 1));
    s->su_in_place = calloc((size_t)n + 1, 1);
    MILC_ASSERT(s->reshaped && s->wpos && s->su_in_place);
    ir_function_count_uses(f);
    plan_states(s);
    IR_FOR_EACH_OP(op, f) {
        if (op->kind != OP_RESHAPE && op->kind != OP_EXPAND_DIMS && op->kind != OP_SQUEEZE) continue;
        IrArg *x = ir_op_arg(op, "x");
        if (x && x->kind == IR_ARG_VALUE && x->value->uses == 1) s->reshaped[vid(x->value)] = op->results[0];
    }
    return s;
}

void lower_shared_free(LowerShared *s) {
    if (!s) return;
    for (int i = 0; i < s->nblobs; i++) {
        if (s->blobs[i].ok) milblob_close(&s->blobs[i].file);
        free(s->blobs[i].path);
    }
    free(s->vals), free(s->reshaped), free(s->weight), free(s->weight2d), free(s->input_buf), free(s->lv);
    free(s->out_buf), free(s->out_done), free(s->bi), free(s->wpos), free(s->su_in_place);
    free(s);
}

static int io_dtype(LowerShared *s, const IrValue *v, SrcLoc loc, RtDType *out) {
    switch (v->type.dtype) {
    case IR_DT_FP16: *out = RT_F16; return 0;
    case IR_DT_FP32: *out = RT_F32; return 0;
    case IR_DT_INT32: *out = RT_I32; return 0;
    case IR_DT_BOOL: *out = RT_BOOL; return 0;
    case IR_DT_INT8: *out = RT_I8; return 0; /* the narrow integers: int32 inside, converted at rt_run */
    case IR_DT_UINT8: *out = RT_U8; return 0;
    case IR_DT_INT16: *out = RT_I16; return 0;
    case IR_DT_UINT16: *out = RT_U16; return 0;
    default:
        fail_at(s, loc,
                "'%s': %s inputs and outputs are not supported by the CPU backend (fp16, fp32, int32, int16, uint16, "
                "int8, uint8, bool)",
                v->name, ir_dtype_name(v->type.dtype));
        return -1;
    }
}

/* Is input v a part a fused attention reads in place (a KV cache)? */
static bool read_in_place(const FuseTable *fuse, const IrValue *v) {
    for (int i = 0; fuse && i < fuse->ngroups; i++) {
        const FuseGroup *g = fuse->groups[i];
        if (g->kind == FUSE_ATTN && g->split)
            for (int j = 0; j < 2; j++)
                if (g->k_parts[j] == v || g->v_parts[j] == v) return true;
    }
    return false;
}

int lower_inputs_outputs(LowerShared *s, const FuseTable *fuse) {
    IrFunction *f = s->f;
    for (int i = 0; i < f->ninputs; i++) {
        IrValue *v = f->inputs[i];
        RtDType dt;
        if (io_dtype(s, v, v->loc, &dt) < 0) return -1;
        if (ir_value_numel(v) < 0)
            return fail_at(s, v->loc,
                           "input '%s' has a flexible shape: the CPU backend compiles one size of it (milc compile "
                           "and run: --shape %s=D0,D1,..; run takes it from the input's file)",
                           v->name, v->name),
                   -1;
        if (ir_value_numel(v) == 0) return fail_at(s, v->loc, "input '%s' %s", v->name, NO_ELEMENTS), -1;
        if (v->type.state && rt_dtype_narrow_int(dt))
            return fail_at(s, v->loc, "state '%s': %s states are not supported by the CPU backend (fp16, fp32, int32, bool)",
                           v->name, ir_dtype_name(v->type.dtype)),
                   -1;
        if (v->type.state) { /* the model's own buffer, in its declared dtype */
            int id = check_rc(s, rtb_state(s->b, v->name, dt, v->type.rank, v->type.dims));
            if (id < 0) return -1;
            note_buf(s, id, v->type.rank, v->type.dims);
            s->bi[id].f16 = dt == RT_F16;
            s->input_buf[vid(v)] = id;
            continue;
        }
        /* A KV cache the attention kernel reads as fp16 stays fp16: no
         * conversion pass at rt_run, half the bytes read. */
        bool raw = dt == RT_F16 && read_in_place(fuse, v);
        int id = check_rc(s, raw ? rtb_input_f16(s->b, v->name, v->type.rank, v->type.dims)
                                 : rtb_input(s->b, v->name, dt, v->type.rank, v->type.dims));
        if (id < 0) return -1;
        note_buf(s, id, v->type.rank, v->type.dims);
        s->bi[id].f16 = raw;
        s->input_buf[vid(v)] = id;
    }
    for (int i = 0; i < f->noutputs; i++) {
        IrValue *v = f->outputs[i];
        SrcLoc at = f->output_locs ? f->output_locs[i] : f->loc;
        RtDType dt;
        if (io_dtype(s, v, at, &dt) < 0) return -1;
        for (int j = 0; j < i; j++)
            if (f->outputs[j] == v)
                return fail_at(s, at,
                               "'%s' is returned twice: the CPU backend names each output after its value, so it "
                               "returns a value once (return an identity of it for the second)",
                               v->name),
                       -1;
        if (ir_value_numel(v) == 0) return fail_at(s, at, "output '%s' %s", v->name, NO_ELEMENTS), -1;
        if (counted_rows(v)) { /* rows up to x's elements: non_zero's kernel counts them */
            const IrValue *x = arg_value(v->def, "x");
            int64_t bound[2] = {ir_value_numel(x), x->type.rank};
            if (bound[0] <= 0) return fail_at(s, at, "output '%s': non_zero of a dynamic shape", v->name), -1;
            s->out_buf[i] = check_rc(s, rtb_temp_rows(s->b, 2, bound));
            note_buf(s, s->out_buf[i], 2, bound);
            if (s->out_buf[i] < 0) return -1;
            continue;
        }
        if (ir_value_numel(v) < 0) { /* of a non_zero's rows: the op reading them says so when lowered */
            s->out_buf[i] = -1;
            continue;
        }
        s->out_buf[i] = new_temp(s, rt_dt(v->type.dtype), v->type.rank, v->type.dims);
        if (s->out_buf[i] < 0) return -1;
    }
    return 0;
}

int lower_bind_outputs(LowerShared *s) {
    for (int i = 0; i < s->f->noutputs; i++) {
        IrValue *v = s->f->outputs[i];
        RtDType dt;
        if (io_dtype(s, v, s->f->loc, &dt) < 0) return -1;
        if (check_rc(s, rtb_output(s->b, v->name, s->out_buf[i], dt)) < 0) return -1;
    }
    return 0;
}

int lower_program(LowerShared *s, const FuseTable *fuse, bool views, int *nops, int *ncopies) {
    IrFunction *f = s->f;
    s->fuse = fuse, s->views = views, s->nops = s->ncopies = 0, s->cur = NULL;
    memset(s->lv, 0, sizeof(LVal) * (size_t)s->nvals);
    memset(s->out_done, 0, (size_t)f->noutputs);
    for (int i = 0; i < f->ninputs; i++) {
        IrValue *v = f->inputs[i];
        s->lv[vid(v)].has = true;
        view_ident(&s->lv[vid(v)].v, s->input_buf[vid(v)], v->type.rank, v->type.dims);
    }
    s->opi = 0;
    IR_FOR_EACH_OP(op, f) {
        if (lower_op(s, op) < 0 || s->failed) return -1;
        s->opi++;
    }
    s->cur = NULL;
    for (int i = 0; i < f->noutputs; i++) {
        if (s->out_done[i]) continue;
        IrValue *v = f->outputs[i];
        s->out_done[i] = true;
        if (s->out_buf[i] < 0) return FAIL("output '%s' has a dynamic shape", v->name);
        if (buffer_as(s, v, v->type.rank, v->type.dims, s->out_buf[i]) < 0) return -1;
    }
    *nops = s->nops, *ncopies = s->ncopies;
    return s->failed ? -1 : 0;
}
