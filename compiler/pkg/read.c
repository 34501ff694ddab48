/* read.c — a Core ML Model spec (protobuf bytes) into the IR, through the IR
 * builder the text parser uses, with the parser's rules: names resolve in
 * order, a redefinition or an unknown op is an error, strings and names are
 * what MIL text can carry.  So a package and its model.mil text give the same
 * IR and the same canonical text.  Every diagnostic names the spec file and
 * the field (functions["main"].operations[3] ...). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/mil.h"
#include "pkg_internal.h"

typedef struct Reader {
    Arena *a;
    DiagSink *d;
    const char *file;
    char where[512]; /* the field being read, for messages */
    SrcLoc loc;      /* file + where of the current function or op */
    IrFunction *fn;
    IrBlock *blk;    /* the nested block being read; NULL at function level */
    int depth;       /* of nested blocks */
    IrValue **scope; /* open addressing by name */
    size_t scope_cap, scope_n;
    bool failed;
} Reader;

static void rerr(Reader *R, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rerr(Reader *R, const char *field, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    SrcLoc at = {R->file, 0, 0};
    diag_error(R->d, at, "%s%s%s: %s", R->where, field && *field ? "." : "", field ? field : "", msg);
    R->failed = true;
}

/* The op or function being read becomes the location of everything made
 * from it, so the checker's later messages name the field too. */
static void set_where(Reader *R, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_where(Reader *R, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(R->where, sizeof R->where, fmt, ap);
    va_end(ap);
    char full[1024];
    snprintf(full, sizeof full, "%s: %s", R->file, R->where);
    R->loc = (SrcLoc){diag_intern(R->d, full), 0, 0};
}

/* ---- scope ---- */

static size_t name_hash(const char *s) {
    size_t h = 1469598103934665603u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static IrValue **scope_slot(Reader *R, const char *name) {
    size_t i = name_hash(name) & (R->scope_cap - 1);
    while (R->scope[i] && strcmp(R->scope[i]->name, name) != 0) i = (i + 1) & (R->scope_cap - 1);
    return &R->scope[i];
}

static void scope_reset(Reader *R) {
    free(R->scope);
    R->scope_cap = 256;
    R->scope_n = 0;
    R->scope = calloc(R->scope_cap, sizeof *R->scope);
    MILC_ASSERT(R->scope);
}

static bool scope_define(Reader *R, IrValue *v, const char *field) {
    IrValue **slot = scope_slot(R, v->name);
    if (*slot) {
        rerr(R, field, "redefinition of '%s'", v->name);
        return false;
    }
    *slot = v;
    if (++R->scope_n * 2 > R->scope_cap) {
        IrValue **old = R->scope;
        size_t oldcap = R->scope_cap;
        R->scope_cap *= 2;
        R->scope = calloc(R->scope_cap, sizeof *R->scope);
        MILC_ASSERT(R->scope);
        for (size_t i = 0; i < oldcap; i++)
            if (old[i]) *scope_slot(R, old[i]->name) = old[i];
        free(old);
    }
    return true;
}

/* Take v's name out of the table (backward-shift deletion, as the parser). */
static void scope_remove(Reader *R, const IrValue *v) {
    size_t mask = R->scope_cap - 1;
    IrValue **slot = scope_slot(R, v->name);
    if (*slot != v) return;
    size_t i = (size_t)(slot - R->scope), j = i;
    R->scope[i] = NULL;
    R->scope_n--;
    for (;;) {
        j = (j + 1) & mask;
        if (!R->scope[j]) return;
        size_t k = name_hash(R->scope[j]->name) & mask;
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        R->scope[i] = R->scope[j];
        R->scope[j] = NULL;
        i = j;
    }
}

/* ---- types ---- */

static bool read_tensor_type(Reader *R, const Cml__TensorType *tt, const char *field, IrType *out) {
    IrDType dt;
    if (!pkg_dtype_from_cml(tt->datatype, &dt)) {
        rerr(R, field, "dataType %d is not one milc reads", (int)tt->datatype);
        return false;
    }
    if (tt->rank < 0 || tt->rank > 16 || (size_t)tt->rank != tt->n_dimensions) {
        rerr(R, field, "rank %lld does not match its %zu dimensions (at most 16)", (long long)tt->rank,
             tt->n_dimensions);
        return false;
    }
    int64_t dims[16];
    for (size_t i = 0; i < tt->n_dimensions; i++) {
        const Cml__Dimension *dm = tt->dimensions[i];
        if (dm->dimension_case == CML__DIMENSION__DIMENSION_CONSTANT && dm->constant->size <= (UINT64_C(1) << 40))
            dims[i] = (int64_t)dm->constant->size;
        else if (dm->dimension_case == CML__DIMENSION__DIMENSION_UNKNOWN && !dm->unknown->variadic)
            dims[i] = IR_DIM_DYNAMIC;
        else {
            rerr(R, field, "dimensions[%zu]: neither a size up to 2^40 nor an unknown (non-variadic) dimension", i);
            return false;
        }
    }
    *out = ir_type_make(R->a, dt, (int)tt->rank, dims);
    return true;
}

/* states: a state type is allowed (a function's inputs, as in MIL text). */
static bool read_type(Reader *R, const Cml__ValueType *vt, const char *field, IrType *out, bool states) {
    if (!vt) {
        rerr(R, field, "missing type");
        return false;
    }
    if (vt->type_case == CML__VALUE_TYPE__TYPE_STATE_TYPE) {
        if (!states) {
            rerr(R, field, "a state type: only a function's inputs can be states");
            return false;
        }
        /* state<tensor<...>>: only a tensor can be wrapped (and not a state). */
        const Cml__ValueType *w = vt->statetype->wrappedtype;
        if (!w || w->type_case != CML__VALUE_TYPE__TYPE_TENSOR_TYPE) {
            rerr(R, field, "a state type must wrap a tensor type");
            return false;
        }
        if (!read_tensor_type(R, w->tensortype, field, out)) return false;
        out->state = true;
        return true;
    }
    if (vt->type_case == CML__VALUE_TYPE__TYPE_LIST_TYPE) { /* make_list's value: element type and length */
        const Cml__ValueType *w = vt->listtype->type;
        const Cml__Dimension *n = vt->listtype->length;
        if (!w || w->type_case != CML__VALUE_TYPE__TYPE_TENSOR_TYPE ||
            !read_tensor_type(R, w->tensortype, field, out)) {
            if (!w || w->type_case != CML__VALUE_TYPE__TYPE_TENSOR_TYPE)
                rerr(R, field, "a list type must hold a tensor type");
            return false;
        }
        out->list = true;
        out->list_len = IR_DIM_DYNAMIC;
        if (n && n->dimension_case == CML__DIMENSION__DIMENSION_CONSTANT) {
            if (n->constant->size > (UINT64_C(1) << 40)) {
                rerr(R, field, "a list length of %llu", (unsigned long long)n->constant->size);
                return false;
            }
            out->list_len = (int64_t)n->constant->size;
        }
        return true;
    }
    if (vt->type_case != CML__VALUE_TYPE__TYPE_TENSOR_TYPE) {
        rerr(R, field, "a %s type: milc reads tensors only",
             vt->type_case == CML__VALUE_TYPE__TYPE_LIST_TYPE         ? "list"
             : vt->type_case == CML__VALUE_TYPE__TYPE_TUPLE_TYPE      ? "tuple"
             : vt->type_case == CML__VALUE_TYPE__TYPE_DICTIONARY_TYPE ? "dictionary"
                                                                      : "missing");
        return false;
    }
    return read_tensor_type(R, vt->tensortype, field, out);
}

static bool read_name(Reader *R, const char *name, const char *field) {
    if (!pkg_identifier(name)) {
        rerr(R, field, "'%.64s' is not a MIL name ([A-Za-z_][A-Za-z0-9_]*)", name);
        return false;
    }
    return true;
}

/* ---- values ---- */
/* A bytes payload holds fp16 as little-endian halves and integers packed at
 * their bit width, least significant bit first (MILBlob's order). */

static bool fill_ints(Reader *R, IrLiteral *l, const char *field, size_t n, const int32_t *v32, const int64_t *v64) {
    int64_t lo, hi;
    ir_dtype_int_range(l->type.dtype, &lo, &hi);
    for (size_t i = 0; i < n; i++) {
        int64_t x = v32 ? v32[i] : v64[i];
        if (l->type.dtype != IR_DT_UINT64 && (x < lo || x > hi)) {
            rerr(R, field, "element %zu (%lld) is out of range for %s", i, (long long)x, ir_dtype_name(l->type.dtype));
            return false;
        }
        l->data.i[i] = x;
    }
    return true;
}

static bool fill_bytes(Reader *R, IrLiteral *l, const char *field, const ProtobufCBinaryData *b) {
    IrDType dt = l->type.dtype;
    unsigned bits = ir_dtype_bits(dt);
    if (!(dt == IR_DT_FP16 || ir_dtype_is_int(dt))) {
        rerr(R, field, "bytes cannot hold %s elements", ir_dtype_name(dt));
        return false;
    }
    if (b->len != (l->count * bits + 7) / 8) {
        rerr(R, field, "%zu bytes for %zu %s elements", b->len, l->count, ir_dtype_name(dt));
        return false;
    }
    for (size_t i = 0; i < l->count; i++) {
        if (dt == IR_DT_FP16) {
            l->data.f16[i] = (uint16_t)(b->data[2 * i] | b->data[2 * i + 1] << 8);
            continue;
        }
        uint64_t u = 0;
        for (unsigned k = 0; k < bits; k++) {
            size_t bit = i * bits + k;
            u |= (uint64_t)(b->data[bit / 8] >> (bit % 8) & 1) << k;
        }
        int64_t x = (int64_t)u;
        if (!ir_dtype_is_unsigned(dt) && bits < 64 && (u >> (bits - 1) & 1))
            x = (int64_t)(u | ~((UINT64_C(1) << bits) - 1));
        l->data.i[i] = x;
    }
    return true;
}

static bool fill_tensor(Reader *R, IrLiteral *l, const Cml__TensorValue *tv, const char *field) {
    IrDType dt = l->type.dtype;
    size_t n = l->count;
#define COUNT_IS(m)                                                                                                    \
    if (tv->m->n_values != n) {                                                                                        \
        rerr(R, field, "%zu values for a %s tensor of %zu elements", tv->m->n_values, ir_dtype_name(dt), n);           \
        return false;                                                                                                  \
    }
    switch (tv->value_case) {
    case CML__TENSOR_VALUE__VALUE_FLOATS:
        if (!ir_dtype_is_float(dt)) break;
        COUNT_IS(floats);
        for (size_t i = 0; i < n; i++)
            if (dt == IR_DT_FP32)
                l->data.f32[i] = tv->floats->values[i];
            else if (dt == IR_DT_FP16)
                l->data.f16[i] = ir_double_to_half(tv->floats->values[i]);
            else
                l->data.f64[i] = tv->floats->values[i];
        return true;
    case CML__TENSOR_VALUE__VALUE_DOUBLES:
        if (!ir_dtype_is_float(dt)) break;
        COUNT_IS(doubles);
        for (size_t i = 0; i < n; i++)
            if (dt == IR_DT_FP64)
                l->data.f64[i] = tv->doubles->values[i];
            else if (dt == IR_DT_FP32)
                l->data.f32[i] = (float)tv->doubles->values[i];
            else
                l->data.f16[i] = ir_double_to_half(tv->doubles->values[i]);
        return true;
    case CML__TENSOR_VALUE__VALUE_INTS:
        if (!ir_dtype_is_int(dt)) break;
        COUNT_IS(ints);
        return fill_ints(R, l, field, n, tv->ints->values, NULL);
    case CML__TENSOR_VALUE__VALUE_LONG_INTS:
        if (!ir_dtype_is_int(dt)) break;
        COUNT_IS(longints);
        return fill_ints(R, l, field, n, NULL, tv->longints->values);
    case CML__TENSOR_VALUE__VALUE_BOOLS:
        if (dt != IR_DT_BOOL) break;
        COUNT_IS(bools);
        for (size_t i = 0; i < n; i++) l->data.b[i] = tv->bools->values[i] != 0;
        return true;
    case CML__TENSOR_VALUE__VALUE_STRINGS:
        if (dt != IR_DT_STRING) break;
        COUNT_IS(strings);
        for (size_t i = 0; i < n; i++) {
            if (!pkg_safe_string(tv->strings->values[i])) {
                rerr(R, field,
                     "string %zu holds a byte MIL text cannot carry (printable ASCII other than '\"' and '\\')", i);
                return false;
            }
            l->data.s[i] = arena_strdup(R->a, tv->strings->values[i]);
        }
        return true;
    case CML__TENSOR_VALUE__VALUE_BYTES: return fill_bytes(R, l, field, &tv->bytes->values);
    default: break;
    }
#undef COUNT_IS
    rerr(R, field, "a %s tensor's values are missing or of another kind (field %d)", ir_dtype_name(dt),
         (int)tv->value_case);
    return false;
}

static IrLiteral *read_dict(Reader *R, const Cml__Value *v, const char *field);

/* A Value into a literal.  Immediate tensors must hold exactly their
 * type's element count; BLOBFILE references are taken as written (the
 * loader checks the path and offset against the package). */
static IrLiteral *read_value(Reader *R, const Cml__Value *v, const char *field) {
    if (!v) {
        rerr(R, field, "missing value");
        return NULL;
    }
    if (v->type && v->type->type_case == CML__VALUE_TYPE__TYPE_DICTIONARY_TYPE) return read_dict(R, v, field);
    IrType t;
    if (!read_type(R, v->type, field, &t, false)) return NULL;
    if (ir_type_numel(&t) < 0 || ir_type_numel(&t) > (INT64_C(1) << 32)) {
        rerr(R, field, "a value needs static dimensions and at most 2^32 elements");
        return NULL;
    }
    if (v->value_case == CML__VALUE__VALUE_BLOB_FILE_VALUE) {
        const Cml__Value__BlobFileValue *bf = v->blobfilevalue;
        if (!pkg_safe_string(bf->filename) || !*bf->filename) {
            rerr(R, field, "blobFileValue.fileName is empty or holds bytes MIL text cannot carry");
            return NULL;
        }
        IrLiteral *l = ARENA_NEW(R->a, IrLiteral);
        l->kind = IR_LIT_BLOBFILE;
        l->type = t;
        l->count = (size_t)ir_type_numel(&t);
        l->blob_path = arena_strdup(R->a, bf->filename);
        l->blob_offset = bf->offset;
        l->loc = R->loc;
        return l;
    }
    if (v->value_case != CML__VALUE__VALUE_IMMEDIATE_VALUE ||
        v->immediatevalue->value_case != CML__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR) {
        rerr(R, field, "neither an immediate tensor nor a blobFileValue");
        return NULL;
    }
    if (t.dtype == IR_DT_STRING && ir_type_numel(&t) > (INT64_C(1) << 24)) {
        rerr(R, field, "too many strings");
        return NULL;
    }
    IrLiteral *l = ir_literal_new(R->a, &t);
    l->loc = R->loc;
    return fill_tensor(R, l, v->immediatevalue->tensor, field) ? l : NULL;
}

static int cmp_lit_key(const void *pa, const void *pb) {
    const IrLiteral *a = *(IrLiteral *const *)pa, *b = *(IrLiteral *const *)pb;
    if (a->type.dtype == IR_DT_STRING) return strcmp(a->data.s[0], b->data.s[0]);
    int64_t x = ir_lit_i64(a, 0), y = ir_lit_i64(b, 0);
    return (x > y) - (x < y);
}

/* A dictionary of scalars (buildInfo) into a DICT literal. */
static IrLiteral *read_dict(Reader *R, const Cml__Value *v, const char *field) {
    if (v->value_case != CML__VALUE__VALUE_IMMEDIATE_VALUE ||
        v->immediatevalue->value_case != CML__VALUE__IMMEDIATE_VALUE__VALUE_DICTIONARY) {
        rerr(R, field, "a dictionary type without a dictionary value");
        return NULL;
    }
    const Cml__DictionaryValue *dv = v->immediatevalue->dictionary;
    size_t n = dv->n_values;
    if (n == 0 || n > 4096) {
        rerr(R, field, "a dictionary of %zu pairs (1 to 4096)", n);
        return NULL;
    }
    IrLiteral **ks = calloc(n, sizeof *ks), **vs = calloc(n, sizeof *vs);
    MILC_ASSERT(ks && vs);
    IrLiteral *out = NULL;
    char f[96];
    for (size_t i = 0; i < n; i++) {
        snprintf(f, sizeof f, "%s.dictionary[%zu]", field, i);
        ks[i] = read_value(R, dv->values[i]->key, f);
        vs[i] = read_value(R, dv->values[i]->value, f);
        if (!ks[i] || !vs[i]) goto out;
        if (ks[i]->kind != IR_LIT_DATA || ks[i]->type.rank || vs[i]->kind != IR_LIT_DATA || vs[i]->type.rank ||
            ks[i]->type.dtype != ks[0]->type.dtype || vs[i]->type.dtype != vs[0]->type.dtype) {
            rerr(R, f, "dictionary keys and values must be scalars of one dtype each");
            goto out;
        }
    }
    IrLiteral **sorted = malloc(n * sizeof *sorted);
    MILC_ASSERT(sorted);
    memcpy(sorted, ks, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_lit_key);
    bool dup = false;
    for (size_t i = 1; i < n; i++) dup |= cmp_lit_key(&sorted[i - 1], &sorted[i]) == 0;
    free(sorted);
    if (dup) {
        rerr(R, field, "duplicate key in dictionary");
        goto out;
    }
    int64_t dim = (int64_t)n;
    IrType kt = {ks[0]->type.dtype, 1, &dim, false, false, 0}, vt = {vs[0]->type.dtype, 1, &dim, false, false, 0};
    out = ARENA_NEW(R->a, IrLiteral);
    out->kind = IR_LIT_DICT;
    out->loc = R->loc;
    out->type = ir_type_make(R->a, vt.dtype, 1, &dim);
    out->count = n;
    out->keys = ir_literal_new(R->a, &kt);
    out->values = ir_literal_new(R->a, &vt);
    size_t esz[2] = {0};
    for (size_t i = 0; i < n; i++) {
        esz[0] = esz[1] = 0;
        IrLiteral *dst[2] = {out->keys, out->values}, *src[2] = {ks[i], vs[i]};
        for (int k = 0; k < 2; k++) {
            IrDType dt = dst[k]->type.dtype;
            if (dt == IR_DT_STRING)
                dst[k]->data.s[i] = src[k]->data.s[0];
            else if (dt == IR_DT_BOOL)
                dst[k]->data.b[i] = src[k]->data.b[0];
            else if (dt == IR_DT_FP16)
                dst[k]->data.f16[i] = src[k]->data.f16[0];
            else if (dt == IR_DT_FP32)
                dst[k]->data.f32[i] = src[k]->data.f32[0];
            else if (dt == IR_DT_FP64)
                dst[k]->data.f64[i] = src[k]->data.f64[0];
            else
                dst[k]->data.i[i] = src[k]->data.i[0];
        }
    }
out:
    free(ks);
    free(vs);
    return out;
}

/* ---- ops ---- */

/* Names are unique in a function; a nested block's values are seen only
 * inside it (as in MIL text). */
static bool visible(const Reader *R, const IrBlock *b) {
    for (const IrBlock *c = R->blk; c; c = c->parent->block)
        if (c == b) return true;
    return b == NULL;
}

static IrValue *resolve(Reader *R, const char *name, const char *field) {
    IrValue *v = *scope_slot(R, name);
    if (!v)
        rerr(R, field, "undefined variable '%.64s'", name);
    else if (!visible(R, v->block)) {
        rerr(R, field, "'%.64s' is defined inside a nested block and is not visible here", name);
        return NULL;
    }
    return v;
}

static void read_arg(Reader *R, IrOp *op, const Cml__ArgumentEntry *e, size_t i) {
    char f[160];
    snprintf(f, sizeof f, "inputs[\"%.64s\"]", e->key);
    if (!read_name(R, e->key, f)) return;
    const Cml__Argument *arg = e->value;
    size_t n = arg ? arg->n_arguments : 0;
    MilArgSpec spec;
    bool tuple = mil_op_arg_spec(op->kind, e->key, &spec) && spec.tuple;
    if (n == 0 || n > 1024 || (!tuple && n != 1)) {
        rerr(R, f, "%zu bindings (%s)", n, tuple ? "1 to 1024" : "exactly 1: the op takes no tuple here");
        return;
    }
    if (ir_op_arg(op, e->key)) {
        rerr(R, f, "duplicate input");
        return;
    }
    IrArg *a;
    if (tuple) {
        IrValue **items = ARENA_ARRAY(R->a, IrValue *, n);
        for (size_t k = 0; k < n; k++) {
            if (arg->arguments[k]->binding_case != CML__ARGUMENT__BINDING__BINDING_NAME) {
                rerr(R, f, "binding %zu: a tuple binds variables, not values", k);
                return;
            }
            if (!(items[k] = resolve(R, arg->arguments[k]->name, f))) return;
        }
        a = ir_op_add_tuple(op, arena_strdup(R->a, e->key), items, (int)n);
    } else if (arg->arguments[0]->binding_case == CML__ARGUMENT__BINDING__BINDING_NAME) {
        IrValue *v = resolve(R, arg->arguments[0]->name, f);
        if (!v) return;
        a = ir_op_add_value(op, arena_strdup(R->a, e->key), v);
    } else {
        IrLiteral *l = read_value(R, arg->arguments[0]->value, f);
        if (!l) return;
        a = ir_op_add_literal(op, arena_strdup(R->a, e->key), l);
    }
    a->loc = R->loc;
    (void)i;
}

static void read_attrs(Reader *R, IrOp *op, Cml__ValueEntry **attrs, size_t n) {
    if (n > 64) {
        rerr(R, "attributes", "%zu attributes (at most 64)", n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        char f[160];
        snprintf(f, sizeof f, "attributes[\"%.64s\"]", attrs[i]->key);
        if (!read_name(R, attrs[i]->key, f)) continue;
        IrLiteral *l = read_value(R, attrs[i]->value, f);
        if (!l) continue;
        if (strcmp(attrs[i]->key, "name") == 0) {
            if (l->kind != IR_LIT_DATA || l->type.dtype != IR_DT_STRING || l->type.rank != 0)
                rerr(R, f, "must be a string");
            else
                op->name = l->data.s[0];
        } else if (ir_op_attr(op, attrs[i]->key)) {
            rerr(R, f, "duplicate attribute");
        } else {
            ir_op_set_attr(op, arena_strdup(R->a, attrs[i]->key), l)->loc = R->loc;
        }
    }
}

static void read_op(Reader *R, const Cml__Operation *o, const char *path, size_t idx);

/* The nested blocks of op (o's), read into it; path names o. */
static bool read_blocks(Reader *R, IrOp *op, const Cml__Operation *o, const char *path) {
    if (o->n_blocks > 8 || R->depth >= 32) {
        rerr(R, "blocks", "%zu blocks at depth %d (at most 8 per op, 32 deep)", o->n_blocks, R->depth);
        return false;
    }
    IrBlock *outer = R->blk;
    bool ok = true;
    R->depth++;
    for (size_t k = 0; k < o->n_blocks && !R->d->truncated; k++) {
        const Cml__Block *cb = o->blocks[k];
        char bpath[600];
        snprintf(bpath, sizeof bpath, "%.400s.blocks[%zu]", path, k);
        IrBlock *b = ir_op_add_block(op);
        b->loc = R->loc;
        R->blk = b;
        set_where(R, "%s", bpath);
        for (size_t i = 0; i < cb->n_inputs; i++) {
            char f[48];
            snprintf(f, sizeof f, "inputs[%zu]", i);
            IrType t;
            if (!read_name(R, cb->inputs[i]->name, f) || !read_type(R, cb->inputs[i]->type, f, &t, false)) {
                ok = false;
                continue;
            }
            IrValue *v = ir_block_add_input(b, arena_strdup(R->a, cb->inputs[i]->name), t);
            v->loc = R->loc;
            ok &= scope_define(R, v, f);
        }
        if (cb->n_operations > 100000) {
            rerr(R, "operations", "%zu operations (at most 100000)", cb->n_operations);
            ok = false;
        }
        for (size_t i = 0; ok && i < cb->n_operations && !R->d->truncated; i++) read_op(R, cb->operations[i], bpath, i);
        set_where(R, "%s", bpath);
        for (size_t i = 0; i < cb->n_outputs; i++) {
            char f[48];
            snprintf(f, sizeof f, "outputs[%zu]", i);
            IrValue *v = resolve(R, cb->outputs[i], f);
            if (v)
                ir_block_add_output(b, v, R->loc);
            else
                ok = false;
        }
        /* The block's names leave the scope (sibling blocks may reuse them). */
        for (int i = 0; i < b->ninputs; i++) scope_remove(R, b->inputs[i]);
        for (IrOp *bo = b->first; bo; bo = bo->next)
            for (int i = 0; i < bo->nresults; i++) scope_remove(R, bo->results[i]);
        R->blk = outer;
    }
    R->depth--;
    R->blk = outer;
    return ok;
}

static void read_op(Reader *R, const Cml__Operation *o, const char *path, size_t idx) {
    set_where(R, "%s.operations[%zu] (%.48s)", path, idx, o->type);
    IrOpKind kind;
    bool known = mil_op_lookup(o->type, strlen(o->type), &kind);
    if (!known) rerr(R, "type", "unknown op '%.64s'", o->type);
    if (known && kind == OP_COREML_UPDATE_STATE) { /* the writer spells it so too */
        rerr(
            R, "type",
            "coreml_update_state is not an op of the Core ML format: a package spells it write_state, then read_state");
        return;
    }
    /* write_state alone has no results (as in MIL text). */
    size_t min_out = known && kind == OP_WRITE_STATE ? 0 : 1;
    bool bad_out = o->n_outputs < min_out || o->n_outputs > 64;
    if (bad_out) rerr(R, "outputs", "%zu outputs (%zu to 64)", o->n_outputs, min_out);
    if (o->n_inputs > 64) rerr(R, "inputs", "%zu inputs (at most 64)", o->n_inputs);
    if (bad_out || o->n_inputs > 64) return;
    /* An unknown op still defines its results (as the parser does), so
     * later uses report nothing more than the op itself. */
    IrOp *op = ir_op_new(R->fn, known ? kind : OP_CONST, NULL, (int)o->n_outputs);
    op->loc = R->loc;
    op->block = R->blk; /* before it is placed: its own blocks look outward through it */
    bool ok = known;
    if (known)
        for (size_t i = 0; i < o->n_inputs; i++) read_arg(R, op, o->inputs[i], i);
    if (o->n_blocks) {
        /* Blocks come before the op's results, which they cannot see. */
        char opath[600];
        snprintf(opath, sizeof opath, "%.300s.operations[%zu] (%.48s)", path, idx, o->type);
        ok &= read_blocks(R, op, o, opath);
        set_where(R, "%s", opath);
    }
    for (size_t i = 0; i < o->n_outputs; i++) {
        char f[48];
        snprintf(f, sizeof f, "outputs[%zu]", i);
        const Cml__NamedValueType *nt = o->outputs[i];
        IrType t = {0};
        bool good = read_name(R, nt->name, f) && read_type(R, nt->type, f, &t, false);
        IrValue *v = ir_op_set_result(op, (int)i, good ? nt->name : arena_printf(R->a, "_bad_%zu_%zu", idx, i), t);
        v->loc = R->loc;
        v->block = R->blk;
        ok &= good && scope_define(R, v, f);
    }
    if (known) {
        read_attrs(R, op, o->attributes, o->n_attributes);
        mil_op_attrs_as_args(op);
    }
    if (!ok) return;
    if (!op->name) op->name = op->nresults ? op->results[0]->name : mil_op_name(op->kind);
    if (R->blk)
        ir_block_append(R->blk, op);
    else
        ir_op_append(R->fn, op);
}

static const Cml__Block *main_block(Reader *R, const Cml__Function *f) {
    const char *opset = pkg_opset_from_cml(f->opset);
    if (!opset) {
        rerr(R, "opset", "'%.32s' is not an opset milc knows (CoreML5..CoreML8)", f->opset);
        return NULL;
    }
    for (size_t i = 0; i < f->n_block_specializations; i++)
        if (strcmp(f->block_specializations[i]->key, f->opset) == 0 && f->block_specializations[i]->value)
            return f->block_specializations[i]->value;
    rerr(R, "block_specializations", "no block for the function's opset '%s'", f->opset);
    return NULL;
}

static void read_function(Reader *R, IrProgram *p, const Cml__FunctionEntry *e) {
    set_where(R, "functions[\"%.64s\"]", e->key);
    if (!read_name(R, e->key, NULL) || !e->value) {
        if (!e->value) rerr(R, NULL, "missing function");
        return;
    }
    if (ir_program_function(p, e->key)) {
        rerr(R, NULL, "duplicate function");
        return;
    }
    const Cml__Function *f = e->value;
    const Cml__Block *b = main_block(R, f);
    if (!b) return;
    IrFunction *fn = R->fn = ir_function_new(p, arena_strdup(R->a, e->key), pkg_opset_from_cml(f->opset));
    fn->loc = R->loc;
    scope_reset(R);
    if (b->n_inputs) rerr(R, "inputs", "a function's block has no inputs of its own");
    for (size_t i = 0; i < f->n_inputs; i++) {
        char fl[48];
        snprintf(fl, sizeof fl, "inputs[%zu]", i);
        IrType t;
        if (!read_name(R, f->inputs[i]->name, fl) || !read_type(R, f->inputs[i]->type, fl, &t, true)) continue;
        IrValue *v = ir_function_add_input(fn, arena_strdup(R->a, f->inputs[i]->name), t);
        v->loc = R->loc;
        scope_define(R, v, fl);
    }
    char fpath[96];
    snprintf(fpath, sizeof fpath, "functions[\"%.64s\"]", fn->name);
    for (size_t i = 0; i < b->n_operations && !R->d->truncated; i++) read_op(R, b->operations[i], fpath, i);
    set_where(R, "functions[\"%s\"]", fn->name);
    for (size_t i = 0; i < b->n_outputs; i++) {
        char fl[48];
        snprintf(fl, sizeof fl, "outputs[%zu]", i);
        IrValue *v = *scope_slot(R, b->outputs[i]);
        if (!v || v->block)
            rerr(R, fl, "output '%.64s' is not defined in function '%s'", b->outputs[i], fn->name);
        else {
            ir_function_add_output(fn, v);
            fn->output_locs[fn->noutputs - 1] = R->loc;
        }
    }
}

/* program(1.3) goes with ios18 and 1.0 with the earlier opsets (MIL.md):
 * the spec records only the major version. */
static int minor_for(const IrProgram *p) {
    for (int i = 0; i < p->nfuncs; i++)
        if (strcmp(p->funcs[i]->opset, "ios18") == 0) return 3;
    return 0;
}

static IrProgram *read_program(Reader *R, const Cml__Program *pr) {
    set_where(R, "mlProgram");
    if (pr->version != 1) {
        rerr(R, "version", "%lld (milc reads version 1)", (long long)pr->version);
        return NULL;
    }
    if (pr->n_functions == 0 || pr->n_functions > 1024) {
        rerr(R, "functions", "%zu functions (1 to 1024)", pr->n_functions);
        return NULL;
    }
    if (pr->n_attributes > 64) {
        rerr(R, "attributes", "%zu attributes (at most 64)", pr->n_attributes);
        return NULL;
    }
    IrProgram *p = ir_program_new(R->a, 1, 0);
    p->file = R->file;
    for (size_t i = 0; i < pr->n_attributes; i++) {
        set_where(R, "mlProgram.attributes[\"%.64s\"]", pr->attributes[i]->key);
        IrLiteral *l =
            read_name(R, pr->attributes[i]->key, NULL) ? read_value(R, pr->attributes[i]->value, NULL) : NULL;
        if (l) ir_program_set_attr(p, arena_strdup(R->a, pr->attributes[i]->key), l);
    }
    for (size_t i = 0; i < pr->n_functions && !R->d->truncated; i++) read_function(R, p, pr->functions[i]);
    p->minor = minor_for(p);
    return p;
}

/* protobuf-c decodes nested messages by recursion with no depth bound: a
 * hostile spec of a few MB could nest deep enough to overflow the stack.
 * This walk follows the schema over the wire bytes first, iteratively per
 * level, and refuses nesting past WIRE_MAX_DEPTH (real specs nest < 20). */
enum { WIRE_MAX_DEPTH = 48 };

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool wire_nesting_ok(const ProtobufCMessageDescriptor *md, const uint8_t *p, size_t len, int depth) {
    if (depth > WIRE_MAX_DEPTH) return false;
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t tag, n;
        if (!wire_varint(&p, end, &tag)) return false;
        switch (tag & 7) {
        case 0:
            if (!wire_varint(&p, end, &n)) return false;
            break;
        case 1:
            if (end - p < 8) return false;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return false;
            p += 4;
            break;
        case 2: {
            if (!wire_varint(&p, end, &n) || n > (uint64_t)(end - p)) return false;
            const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(md, (unsigned)(tag >> 3));
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !wire_nesting_ok(f->descriptor, p, (size_t)n, depth + 1))
                return false;
            p += n;
            break;
        }
        default: return false;
        }
    }
    return true;
}

IrProgram *pkg_read_spec(Arena *a, DiagSink *d, const char *spec_name, const void *spec, size_t len) {
    Reader R = {.a = a, .d = d, .file = diag_intern(d, spec_name)};
    R.loc = (SrcLoc){R.file, 0, 0};
    if (len > PKG_MAX_SPEC) {
        diag_error(d, R.loc, "model spec too large (%zu bytes, at most %d)", len, PKG_MAX_SPEC);
        return NULL;
    }
    if (!wire_nesting_ok(&cml__model__descriptor, spec, len, 0)) {
        diag_error(d, R.loc, "not a Core ML model spec: the protobuf is malformed or nested more than %d deep",
                   WIRE_MAX_DEPTH);
        return NULL;
    }
    Cml__Model *m = cml__model__unpack(NULL, len, spec);
    if (!m) {
        diag_error(d, R.loc, "not a Core ML model spec: the protobuf does not decode");
        return NULL;
    }
    IrProgram *p = NULL;
    if (m->type_case != CML__MODEL__TYPE_ML_PROGRAM || !m->mlprogram)
        diag_error(d, R.loc,
                   "mlProgram: missing: the model is not an ML Program (a neural network or other model kind)");
    else
        p = read_program(&R, m->mlprogram);
    cml__model__free_unpacked(m, NULL);
    free(R.scope);
    if (R.failed) return NULL;
    /* Like mil_parse: a program read from a package has non-negative axes. */
    if (p) mil_normalize_axes(p);
    return p;
}
