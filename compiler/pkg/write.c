/* write.c — the IR into a Core ML Model spec (protobuf) and a package or a
 * model.mil folder around it.  The bytes depend only on the program and its
 * weights: maps go out in the IR's order (the printer's for attributes), and
 * Manifest.json's identifiers are hashes of the content, not random UUIDs.
 * Weight files are copied, never re-encoded. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <xxhash.h>

#include "milc/mil.h"
#include "pkg_internal.h"

/* Everything the protobuf structs point at is allocated here and freed in
 * one go (the structs are filled by hand, not by protobuf-c's unpack). */
typedef struct Enc {
    Arena a;
    DiagSink *d;
    bool failed;
} Enc;

#define NEW(E, T, init) ((T *)enc_new((E), sizeof(T), &(T)init))
static void *enc_new(Enc *E, size_t size, const void *init) {
    void *p = arena_alloc(&E->a, size);
    memcpy(p, init, size);
    return p;
}
#define ARR(E, T, n) ARENA_ARRAY(&(E)->a, T, (n) ? (n) : 1)

static Cml__ValueType *enc_type(Enc *E, const IrType *t) {
    Cml__TensorType *tt = NEW(E, Cml__TensorType, CML__TENSOR_TYPE__INIT);
    if (!pkg_dtype_to_cml(t->dtype, &tt->datatype)) {
        diag_error(E->d, (SrcLoc){0}, "dtype %s has no Core ML DataType", ir_dtype_name(t->dtype));
        E->failed = true;
    }
    tt->rank = t->rank;
    tt->n_dimensions = (size_t)t->rank;
    tt->dimensions = ARR(E, Cml__Dimension *, t->rank);
    for (int i = 0; i < t->rank; i++) {
        Cml__Dimension *dm = tt->dimensions[i] = NEW(E, Cml__Dimension, CML__DIMENSION__INIT);
        if (t->dims[i] == IR_DIM_DYNAMIC) {
            dm->dimension_case = CML__DIMENSION__DIMENSION_UNKNOWN;
            dm->unknown = NEW(E, Cml__Dimension__UnknownDimension, CML__DIMENSION__UNKNOWN_DIMENSION__INIT);
        } else {
            dm->dimension_case = CML__DIMENSION__DIMENSION_CONSTANT;
            dm->constant = NEW(E, Cml__Dimension__ConstantDimension, CML__DIMENSION__CONSTANT_DIMENSION__INIT);
            dm->constant->size = (uint64_t)t->dims[i];
        }
    }
    Cml__ValueType *vt = NEW(E, Cml__ValueType, CML__VALUE_TYPE__INIT);
    vt->type_case = CML__VALUE_TYPE__TYPE_TENSOR_TYPE;
    vt->tensortype = tt;
    if (t->list) { /* list<tensor<...>, N>: a ListType of the element type and length */
        Cml__ListType *lt = NEW(E, Cml__ListType, CML__LIST_TYPE__INIT);
        lt->type = vt;
        lt->length = NEW(E, Cml__Dimension, CML__DIMENSION__INIT);
        if (t->list_len < 0) {
            lt->length->dimension_case = CML__DIMENSION__DIMENSION_UNKNOWN;
            lt->length->unknown = NEW(E, Cml__Dimension__UnknownDimension, CML__DIMENSION__UNKNOWN_DIMENSION__INIT);
        } else {
            lt->length->dimension_case = CML__DIMENSION__DIMENSION_CONSTANT;
            lt->length->constant = NEW(E, Cml__Dimension__ConstantDimension, CML__DIMENSION__CONSTANT_DIMENSION__INIT);
            lt->length->constant->size = (uint64_t)t->list_len;
        }
        Cml__ValueType *lv = NEW(E, Cml__ValueType, CML__VALUE_TYPE__INIT);
        lv->type_case = CML__VALUE_TYPE__TYPE_LIST_TYPE;
        lv->listtype = lt;
        return lv;
    }
    if (!t->state) return vt;
    /* state<tensor<...>>: a StateType wrapping the tensor type. */
    Cml__StateType *st = NEW(E, Cml__StateType, CML__STATE_TYPE__INIT);
    st->wrappedtype = vt;
    Cml__ValueType *sv = NEW(E, Cml__ValueType, CML__VALUE_TYPE__INIT);
    sv->type_case = CML__VALUE_TYPE__TYPE_STATE_TYPE;
    sv->statetype = st;
    return sv;
}

/* Elements as coremltools writes them: fp32 floats, fp64 doubles, int32
 * ints, 64-bit and uint32 longInts, bools, strings; fp16 and the other
 * integers as packed little-endian bytes. */
static Cml__TensorValue *enc_tensor(Enc *E, const IrLiteral *l) {
    Cml__TensorValue *tv = NEW(E, Cml__TensorValue, CML__TENSOR_VALUE__INIT);
    IrDType dt = l->type.dtype;
    size_t n = l->count;
    if (dt == IR_DT_FP32) {
        tv->value_case = CML__TENSOR_VALUE__VALUE_FLOATS;
        tv->floats = NEW(E, Cml__TensorValue__RepeatedFloats, CML__TENSOR_VALUE__REPEATED_FLOATS__INIT);
        tv->floats->n_values = n;
        tv->floats->values = l->data.f32;
    } else if (dt == IR_DT_FP64) {
        tv->value_case = CML__TENSOR_VALUE__VALUE_DOUBLES;
        tv->doubles = NEW(E, Cml__TensorValue__RepeatedDoubles, CML__TENSOR_VALUE__REPEATED_DOUBLES__INIT);
        tv->doubles->n_values = n;
        tv->doubles->values = l->data.f64;
    } else if (dt == IR_DT_INT32) {
        tv->value_case = CML__TENSOR_VALUE__VALUE_INTS;
        tv->ints = NEW(E, Cml__TensorValue__RepeatedInts, CML__TENSOR_VALUE__REPEATED_INTS__INIT);
        tv->ints->n_values = n;
        tv->ints->values = ARR(E, int32_t, n);
        for (size_t i = 0; i < n; i++) tv->ints->values[i] = (int32_t)l->data.i[i];
    } else if (dt == IR_DT_INT64 || dt == IR_DT_UINT64 || dt == IR_DT_UINT32) {
        tv->value_case = CML__TENSOR_VALUE__VALUE_LONG_INTS;
        tv->longints = NEW(E, Cml__TensorValue__RepeatedLongInts, CML__TENSOR_VALUE__REPEATED_LONG_INTS__INIT);
        tv->longints->n_values = n;
        tv->longints->values = l->data.i;
    } else if (dt == IR_DT_BOOL) {
        tv->value_case = CML__TENSOR_VALUE__VALUE_BOOLS;
        tv->bools = NEW(E, Cml__TensorValue__RepeatedBools, CML__TENSOR_VALUE__REPEATED_BOOLS__INIT);
        tv->bools->n_values = n;
        tv->bools->values = ARR(E, protobuf_c_boolean, n);
        for (size_t i = 0; i < n; i++) tv->bools->values[i] = l->data.b[i];
    } else if (dt == IR_DT_STRING) {
        tv->value_case = CML__TENSOR_VALUE__VALUE_STRINGS;
        tv->strings = NEW(E, Cml__TensorValue__RepeatedStrings, CML__TENSOR_VALUE__REPEATED_STRINGS__INIT);
        tv->strings->n_values = n;
        tv->strings->values = (char **)l->data.s;
    } else {
        unsigned bits = ir_dtype_bits(dt);
        size_t nb = (n * bits + 7) / 8;
        uint8_t *b = ARR(E, uint8_t, nb);
        for (size_t i = 0; i < n; i++) {
            uint64_t u = dt == IR_DT_FP16 ? l->data.f16[i] : (uint64_t)l->data.i[i];
            for (unsigned k = 0; k < bits; k++) {
                size_t bit = i * bits + k;
                b[bit / 8] |= (uint8_t)((u >> k & 1) << (bit % 8));
            }
        }
        tv->value_case = CML__TENSOR_VALUE__VALUE_BYTES;
        tv->bytes = NEW(E, Cml__TensorValue__RepeatedBytes, CML__TENSOR_VALUE__REPEATED_BYTES__INIT);
        tv->bytes->values = (ProtobufCBinaryData){nb, b};
    }
    return tv;
}

static Cml__Value *enc_value(Enc *E, const IrLiteral *l);

/* Element i of a DATA literal as a scalar literal of its dtype. */
static IrLiteral *elem(Enc *E, const IrLiteral *l, size_t i) {
    IrType t = {l->type.dtype, 0, NULL, false, false, 0};
    IrLiteral *s = ir_literal_new(&E->a, &t);
    size_t sz = l->type.dtype == IR_DT_BOOL     ? 1
                : l->type.dtype == IR_DT_FP16   ? 2
                : l->type.dtype == IR_DT_FP32   ? 4
                : l->type.dtype == IR_DT_STRING ? sizeof(char *)
                                                : 8;
    memcpy(s->data.raw, (const char *)l->data.raw + i * sz, sz);
    return s;
}

static Cml__Value *enc_dict(Enc *E, const IrLiteral *l) {
    Cml__DictionaryType *dt = NEW(E, Cml__DictionaryType, CML__DICTIONARY_TYPE__INIT);
    dt->keytype = enc_type(E, &(IrType){l->keys->type.dtype, 0, NULL, false, false, 0});
    dt->valuetype = enc_type(E, &(IrType){l->values->type.dtype, 0, NULL, false, false, 0});
    Cml__Value *v = NEW(E, Cml__Value, CML__VALUE__INIT);
    v->type = NEW(E, Cml__ValueType, CML__VALUE_TYPE__INIT);
    v->type->type_case = CML__VALUE_TYPE__TYPE_DICTIONARY_TYPE;
    v->type->dictionarytype = dt;
    Cml__DictionaryValue *dv = NEW(E, Cml__DictionaryValue, CML__DICTIONARY_VALUE__INIT);
    dv->n_values = l->count;
    dv->values = ARR(E, Cml__DictionaryValue__KeyValuePair *, l->count);
    for (size_t i = 0; i < l->count; i++) {
        Cml__DictionaryValue__KeyValuePair *kv = dv->values[i] =
            NEW(E, Cml__DictionaryValue__KeyValuePair, CML__DICTIONARY_VALUE__KEY_VALUE_PAIR__INIT);
        kv->key = enc_value(E, elem(E, l->keys, i));
        kv->value = enc_value(E, elem(E, l->values, i));
    }
    v->value_case = CML__VALUE__VALUE_IMMEDIATE_VALUE;
    v->immediatevalue = NEW(E, Cml__Value__ImmediateValue, CML__VALUE__IMMEDIATE_VALUE__INIT);
    v->immediatevalue->value_case = CML__VALUE__IMMEDIATE_VALUE__VALUE_DICTIONARY;
    v->immediatevalue->dictionary = dv;
    return v;
}

static Cml__Value *enc_value(Enc *E, const IrLiteral *l) {
    if (l->kind == IR_LIT_DICT) return enc_dict(E, l);
    Cml__Value *v = NEW(E, Cml__Value, CML__VALUE__INIT);
    v->type = enc_type(E, &l->type);
    if (l->kind == IR_LIT_BLOBFILE) {
        v->value_case = CML__VALUE__VALUE_BLOB_FILE_VALUE;
        v->blobfilevalue = NEW(E, Cml__Value__BlobFileValue, CML__VALUE__BLOB_FILE_VALUE__INIT);
        v->blobfilevalue->filename = (char *)l->blob_path;
        v->blobfilevalue->offset = l->blob_offset;
        return v;
    }
    v->value_case = CML__VALUE__VALUE_IMMEDIATE_VALUE;
    v->immediatevalue = NEW(E, Cml__Value__ImmediateValue, CML__VALUE__IMMEDIATE_VALUE__INIT);
    v->immediatevalue->value_case = CML__VALUE__IMMEDIATE_VALUE__VALUE_TENSOR;
    v->immediatevalue->tensor = enc_tensor(E, l);
    return v;
}

static Cml__ValueEntry *enc_entry(Enc *E, const char *key, Cml__Value *v) {
    Cml__ValueEntry *e = NEW(E, Cml__ValueEntry, CML__VALUE_ENTRY__INIT);
    e->key = (char *)key;
    e->value = v;
    return e;
}

static int cmp_attr(const void *a, const void *b) {
    return strcmp(((const IrAttr *)a)->name, ((const IrAttr *)b)->name);
}

/* Attributes sorted by name (the printer's order), "name" among them. */
static Cml__ValueEntry **enc_attrs(Enc *E, const IrAttr *attrs, int n, const char *opname, size_t *count) {
    IrAttr *all = ARR(E, IrAttr, n + 1);
    if (n > 0) memcpy(all, attrs, sizeof *all * (size_t)n); /* attrs is NULL when n is 0 */
    if (opname) all[n++] = (IrAttr){.name = "name", .lit = ir_literal_str(&E->a, opname)};
    qsort(all, (size_t)n, sizeof *all, cmp_attr);
    Cml__ValueEntry **out = ARR(E, Cml__ValueEntry *, n);
    for (int i = 0; i < n; i++) out[i] = enc_entry(E, all[i].name, enc_value(E, all[i].lit));
    *count = (size_t)n;
    return out;
}

static Cml__Argument__Binding *bind_name(Enc *E, const char *name) {
    Cml__Argument__Binding *b = NEW(E, Cml__Argument__Binding, CML__ARGUMENT__BINDING__INIT);
    b->binding_case = CML__ARGUMENT__BINDING__BINDING_NAME;
    b->name = (char *)name;
    return b;
}

static Cml__ArgumentEntry *enc_arg(Enc *E, const IrArg *a) {
    Cml__Argument *arg = NEW(E, Cml__Argument, CML__ARGUMENT__INIT);
    int n = a->kind == IR_ARG_TUPLE ? a->nitems : 1;
    arg->n_arguments = (size_t)n;
    arg->arguments = ARR(E, Cml__Argument__Binding *, n);
    if (a->kind == IR_ARG_TUPLE)
        for (int i = 0; i < n; i++) arg->arguments[i] = bind_name(E, a->items[i]->name);
    else if (a->kind == IR_ARG_VALUE)
        arg->arguments[0] = bind_name(E, a->value->name);
    else {
        Cml__Argument__Binding *b = arg->arguments[0] = NEW(E, Cml__Argument__Binding, CML__ARGUMENT__BINDING__INIT);
        b->binding_case = CML__ARGUMENT__BINDING__BINDING_VALUE;
        b->value = enc_value(E, a->lit);
    }
    Cml__ArgumentEntry *e = NEW(E, Cml__ArgumentEntry, CML__ARGUMENT_ENTRY__INIT);
    e->key = (char *)a->name;
    e->value = arg;
    return e;
}

static int cmp_arg(const void *a, const void *b) { return strcmp(((const IrArg *)a)->name, ((const IrArg *)b)->name); }

static Cml__NamedValueType *enc_named(Enc *E, const IrValue *v) {
    Cml__NamedValueType *nt = NEW(E, Cml__NamedValueType, CML__NAMED_VALUE_TYPE__INIT);
    nt->name = (char *)v->name;
    nt->type = enc_type(E, &v->type);
    return nt;
}

static Cml__Operation **enc_ops(Enc *E, const IrOp *first, int nops, size_t *n);

/* A nested block: its inputs, ops and output names. */
static Cml__Block *enc_block(Enc *E, const IrBlock *bl) {
    Cml__Block *b = NEW(E, Cml__Block, CML__BLOCK__INIT);
    b->n_inputs = (size_t)bl->ninputs;
    b->inputs = ARR(E, Cml__NamedValueType *, bl->ninputs);
    for (int i = 0; i < bl->ninputs; i++) b->inputs[i] = enc_named(E, bl->inputs[i]);
    b->operations = enc_ops(E, bl->first, bl->nops, &b->n_operations);
    b->n_outputs = (size_t)bl->noutputs;
    b->outputs = ARR(E, char *, bl->noutputs);
    for (int i = 0; i < bl->noutputs; i++) b->outputs[i] = (char *)bl->outputs[i]->name;
    return b;
}

/* Core ML's constexpr ops of iOS16/17 take their constant arguments as
 * attributes (coremltools writes them so, in any function for the two that
 * iOS18 did not redefine); iOS18's constexpr ops take inputs.  The reader
 * takes both (mil_op_attrs_as_args). */
static bool args_as_attrs(const IrOp *op) {
    int opset = op->fn ? op->fn->opset_version : 0;
    switch (op->kind) {
    case OP_CONSTEXPR_AFFINE_DEQUANTIZE:
    case OP_CONSTEXPR_CAST: break;
    case OP_CONSTEXPR_LUT_TO_DENSE:
    case OP_CONSTEXPR_SPARSE_TO_DENSE:
        if (opset >= 18) return false;
        break;
    default: return false;
    }
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].kind != IR_ARG_LITERAL) return false;
    return true;
}

static Cml__Operation *enc_op(Enc *E, const IrOp *op) {
    Cml__Operation *o = NEW(E, Cml__Operation, CML__OPERATION__INIT);
    o->type = (char *)mil_op_name(op->kind);
    /* The arguments go out as inputs, or with the attributes (nin 0). */
    int nin = args_as_attrs(op) ? 0 : op->nargs, nat = op->nattrs + op->nargs - nin;
    IrArg *args = ARR(E, IrArg, nin);
    if (nin) memcpy(args, op->args, sizeof *args * (size_t)nin);
    qsort(args, (size_t)nin, sizeof *args, cmp_arg);
    o->n_inputs = (size_t)nin;
    o->inputs = ARR(E, Cml__ArgumentEntry *, nin);
    for (int i = 0; i < nin; i++) o->inputs[i] = enc_arg(E, &args[i]);
    IrAttr *attrs = ARR(E, IrAttr, nat);
    if (op->nattrs) memcpy(attrs, op->attrs, sizeof *attrs * (size_t)op->nattrs);
    for (int i = op->nattrs; i < nat; i++)
        attrs[i] = (IrAttr){.name = op->args[i - op->nattrs].name, .lit = op->args[i - op->nattrs].lit};
    o->attributes = enc_attrs(E, attrs, nat, op->name, &o->n_attributes);
    o->n_outputs = (size_t)op->nresults;
    o->outputs = ARR(E, Cml__NamedValueType *, op->nresults);
    for (int i = 0; i < op->nresults; i++) o->outputs[i] = enc_named(E, op->results[i]);
    o->n_blocks = (size_t)op->nblocks;
    o->blocks = ARR(E, Cml__Block *, op->nblocks);
    for (int i = 0; i < op->nblocks; i++) o->blocks[i] = enc_block(E, op->blocks[i]);
    return o;
}

/* coreml_update_state is not an op of the Core ML wire format: Core ML
 * (and coremltools when it saves) spells it write_state(data = value,
 * input = state) named NAME_write_state, then NAME = read_state(input =
 * state).  The package read back holds those two ops. */
static void enc_update_state(Enc *E, const IrOp *op, Cml__Operation **out) {
    const IrArg *st = ir_op_arg(op, "state"), *val = ir_op_arg(op, "value");
    Cml__Operation *w = NEW(E, Cml__Operation, CML__OPERATION__INIT);
    w->type = (char *)mil_op_name(OP_WRITE_STATE);
    IrArg wargs[2] = {*val, *st};
    wargs[0].name = "data";
    wargs[1].name = "input";
    w->n_inputs = 2;
    w->inputs = ARR(E, Cml__ArgumentEntry *, 2);
    for (int i = 0; i < 2; i++) w->inputs[i] = enc_arg(E, &wargs[i]);
    w->attributes = enc_attrs(E, NULL, 0, arena_printf(&E->a, "%s_write_state", op->name), &w->n_attributes);
    Cml__Operation *r = NEW(E, Cml__Operation, CML__OPERATION__INIT);
    r->type = (char *)mil_op_name(OP_READ_STATE);
    IrArg rarg = *st;
    rarg.name = "input";
    r->n_inputs = 1;
    r->inputs = ARR(E, Cml__ArgumentEntry *, 1);
    r->inputs[0] = enc_arg(E, &rarg);
    r->n_outputs = 1;
    r->outputs = ARR(E, Cml__NamedValueType *, 1);
    r->outputs[0] = enc_named(E, op->results[0]);
    r->attributes = enc_attrs(E, op->attrs, op->nattrs, op->name, &r->n_attributes);
    out[0] = w;
    out[1] = r;
}

/* The ops of a list (nops of them from first), in order. */
static Cml__Operation **enc_ops(Enc *E, const IrOp *first, int nops, size_t *n) {
    int max_ops = 2 * nops; /* coreml_update_state goes out as two ops */
    Cml__Operation **ops = ARR(E, Cml__Operation *, max_ops);
    size_t i = 0;
    for (const IrOp *op = first; op; op = op->next) {
        if (op->kind == OP_COREML_UPDATE_STATE && op->nresults == 1 && ir_op_arg(op, "state") &&
            ir_op_arg(op, "value")) {
            enc_update_state(E, op, &ops[i]);
            i += 2;
        } else {
            ops[i++] = enc_op(E, op);
        }
    }
    *n = i;
    return ops;
}

static Cml__FunctionEntry *enc_function(Enc *E, const IrFunction *fn) {
    const char *cml = pkg_opset_to_cml(fn->opset);
    if (!cml) {
        diag_error(E->d, fn->loc, "function '%s': opset '%s' has no Core ML version (ios15..ios18)", fn->name,
                   fn->opset);
        E->failed = true;
        cml = "";
    }
    Cml__Block *b = NEW(E, Cml__Block, CML__BLOCK__INIT);
    b->n_operations = (size_t)fn->nops;
    b->operations = enc_ops(E, fn->first, fn->nops, &b->n_operations);
    b->n_outputs = (size_t)fn->noutputs;
    b->outputs = ARR(E, char *, fn->noutputs);
    for (int k = 0; k < fn->noutputs; k++) b->outputs[k] = (char *)fn->outputs[k]->name;
    Cml__BlockEntry *be = NEW(E, Cml__BlockEntry, CML__BLOCK_ENTRY__INIT);
    be->key = (char *)cml;
    be->value = b;
    Cml__Function *f = NEW(E, Cml__Function, CML__FUNCTION__INIT);
    f->opset = (char *)cml;
    f->n_block_specializations = 1;
    f->block_specializations = ARR(E, Cml__BlockEntry *, 1);
    f->block_specializations[0] = be;
    f->n_inputs = (size_t)fn->ninputs;
    f->inputs = ARR(E, Cml__NamedValueType *, fn->ninputs);
    for (int k = 0; k < fn->ninputs; k++) f->inputs[k] = enc_named(E, fn->inputs[k]);
    Cml__FunctionEntry *fe = NEW(E, Cml__FunctionEntry, CML__FUNCTION_ENTRY__INIT);
    fe->key = (char *)fn->name;
    fe->value = f;
    return fe;
}

/* ---- feature descriptions ---- */

static Cml__FeatureDescription *enc_feature(Enc *E, const IrValue *v) {
    Cml__ArrayFeatureType *at = NEW(E, Cml__ArrayFeatureType, CML__ARRAY_FEATURE_TYPE__INIT);
    switch (v->type.dtype) {
    case IR_DT_FP16: at->datatype = CML__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT16; break;
    case IR_DT_FP32: at->datatype = CML__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__FLOAT32; break;
    case IR_DT_FP64: at->datatype = CML__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__DOUBLE; break;
    case IR_DT_INT32: at->datatype = CML__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT32; break;
    case IR_DT_INT8: at->datatype = CML__ARRAY_FEATURE_TYPE__ARRAY_DATA_TYPE__INT8; break;
    default:
        diag_error(E->d, v->loc, "'%s': a %s feature has no Core ML multi-array type (fp16, fp32, fp64, int32, int8)",
                   v->name, ir_dtype_name(v->type.dtype));
        E->failed = true;
    }
    at->n_shape = (size_t)v->type.rank;
    at->shape = ARR(E, int64_t, v->type.rank);
    for (int i = 0; i < v->type.rank; i++) {
        if (v->type.dims[i] == IR_DIM_DYNAMIC) {
            diag_error(E->d, v->loc, "'%s': a feature with a dynamic dimension (shape ranges are not written)",
                       v->name);
            E->failed = true;
        }
        at->shape[i] = v->type.dims[i];
    }
    Cml__FeatureType *ft = NEW(E, Cml__FeatureType, CML__FEATURE_TYPE__INIT);
    if (v->type.state) { /* a state feature: the array it holds */
        ft->type_case = CML__FEATURE_TYPE__TYPE_STATE_TYPE;
        ft->statetype = NEW(E, Cml__StateFeatureType, CML__STATE_FEATURE_TYPE__INIT);
        ft->statetype->type_case = CML__STATE_FEATURE_TYPE__TYPE_ARRAY_TYPE;
        ft->statetype->arraytype = at;
    } else {
        ft->type_case = CML__FEATURE_TYPE__TYPE_MULTI_ARRAY_TYPE;
        ft->multiarraytype = at;
    }
    Cml__FeatureDescription *fd = NEW(E, Cml__FeatureDescription, CML__FEATURE_DESCRIPTION__INIT);
    fd->name = (char *)v->name;
    fd->type = ft;
    return fd;
}

/* The features of vs that are states (states true) or not, in order; the
 * count in *n.  Core ML lists a function's state inputs apart from its inputs. */
static Cml__FeatureDescription **enc_features(Enc *E, IrValue *const *vs, int nv, bool states, size_t *n) {
    Cml__FeatureDescription **out = ARR(E, Cml__FeatureDescription *, nv);
    *n = 0;
    for (int i = 0; i < nv; i++)
        if (vs[i]->type.state == states) out[(*n)++] = enc_feature(E, vs[i]);
    return out;
}

/* One function: the description's inputs and outputs.  Several: one
 * FunctionDescription each, the default being "main" (or the first). */
static Cml__ModelDescription *enc_description(Enc *E, const IrProgram *p) {
    Cml__ModelDescription *md = NEW(E, Cml__ModelDescription, CML__MODEL_DESCRIPTION__INIT);
    const IrFunction *def = ir_program_function(p, "main") ? ir_program_function(p, "main") : p->funcs[0];
    md->input = enc_features(E, def->inputs, def->ninputs, false, &md->n_input);
    md->state = enc_features(E, def->inputs, def->ninputs, true, &md->n_state);
    md->output = enc_features(E, def->outputs, def->noutputs, false, &md->n_output);
    if (p->nfuncs > 1) {
        md->defaultfunctionname = (char *)def->name;
        md->n_functions = (size_t)p->nfuncs;
        md->functions = ARR(E, Cml__FunctionDescription *, p->nfuncs);
        for (int i = 0; i < p->nfuncs; i++) {
            const IrFunction *fn = p->funcs[i];
            Cml__FunctionDescription *fd = md->functions[i] =
                NEW(E, Cml__FunctionDescription, CML__FUNCTION_DESCRIPTION__INIT);
            fd->name = (char *)fn->name;
            fd->input = enc_features(E, fn->inputs, fn->ninputs, false, &fd->n_input);
            fd->state = enc_features(E, fn->inputs, fn->ninputs, true, &fd->n_state);
            fd->output = enc_features(E, fn->outputs, fn->noutputs, false, &fd->n_output);
        }
    }
    return md;
}

int pkg_encode_spec(const IrProgram *p, void **data, size_t *len, DiagSink *d) {
    Enc E = {.d = d};
    arena_init(&E.a);
    Cml__Program *pr = NEW(&E, Cml__Program, CML__PROGRAM__INIT);
    pr->version = p->major;
    pr->n_functions = (size_t)p->nfuncs;
    pr->functions = ARR(&E, Cml__FunctionEntry *, p->nfuncs);
    int spec_version = 0;
    for (int i = 0; i < p->nfuncs; i++) {
        pr->functions[i] = enc_function(&E, p->funcs[i]);
        int v = pkg_spec_version(p->funcs[i]->opset);
        if (v > spec_version) spec_version = v;
    }
    pr->attributes = enc_attrs(&E, p->attrs, p->nattrs, NULL, &pr->n_attributes);
    Cml__Model m = CML__MODEL__INIT;
    /* Several functions need the multi-function spec (Core ML 8, version 9). */
    m.specificationversion = p->nfuncs > 1 && spec_version < 9 ? 9 : spec_version;
    m.description = enc_description(&E, p);
    m.type_case = CML__MODEL__TYPE_ML_PROGRAM;
    m.mlprogram = pr;
    int rc = -1;
    if (!E.failed) {
        *len = cml__model__get_packed_size(&m);
        *data = malloc(*len ? *len : 1);
        if (*data) {
            cml__model__pack(&m, *data);
            rc = 0;
        } else
            diag_syserror(d, (SrcLoc){0}, "out of memory");
    }
    arena_free(&E.a);
    return rc;
}

/* ---- the files ---- */

/* A UUID-shaped identifier from a hash of what the item holds. */
static void content_id(const void *data, size_t len, const char *salt, char out[37]) {
    XXH3_state_t *st = XXH3_createState();
    MILC_ASSERT(st);
    XXH3_128bits_reset(st);
    XXH3_128bits_update(st, salt, strlen(salt));
    XXH3_128bits_update(st, data, len);
    XXH128_hash_t h = XXH3_128bits_digest(st);
    XXH3_freeState(st);
    uint8_t b[16];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(h.high64 >> (56 - 8 * i)), b[8 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 layout, as Core ML's tools write */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02X%02X%02X%02X-%02X%02X-%02X%02X-%02X%02X-%02X%02X%02X%02X%02X%02X", b[0], b[1], b[2], b[3],
             b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

static json_t *item(const char *desc, const char *name, const char *path) {
    return json_pack("{s:s, s:s, s:s, s:s}", "author", "com.apple.CoreML", "description", desc, "name", name, "path",
                     path);
}

static int write_manifest(DiagSink *d, const char *dir, const void *spec, size_t len, bool weights) {
    char path[PATH_MAX + 32];
    char mid[37], wid[37];
    content_id(spec, len, "model", mid);
    content_id(spec, len, "weights", wid);
    json_t *items = json_object();
    json_object_set_new(items, mid,
                        item("CoreML Model Specification", "model.mlmodel", "com.apple.CoreML/model.mlmodel"));
    if (weights) json_object_set_new(items, wid, item("CoreML Model Weights", "weights", "com.apple.CoreML/weights"));
    json_t *root = json_pack("{s:s, s:o, s:s}", "fileFormatVersion", "1.0.0", "itemInfoEntries", items,
                             "rootModelIdentifier", mid);
    char *text = root ? json_dumps(root, JSON_INDENT(4) | JSON_SORT_KEYS) : NULL;
    json_decref(root);
    snprintf(path, sizeof path, "%s/Manifest.json", dir);
    int rc = text ? pkg_write_bytes(d, path, text, strlen(text)) : (diag_syserror(d, (SrcLoc){0}, "out of memory"), -1);
    free(text);
    return rc;
}

/* Each distinct weight file the program names, copied from model_dir to
 * the same place under dst. */
static int copy_weights(const IrProgram *p, const char *model_dir, const char *dst, DiagSink *d, bool *any) {
    const char **done = NULL;
    int ndone = 0, rc = 0;
    for (int f = 0; f < p->nfuncs && rc == 0; f++) IR_FOR_EACH_OP(op, p->funcs[f]) {
            for (int i = 0; i < op->nattrs + op->nargs && rc == 0; i++) {
                const IrLiteral *l = i < op->nattrs                                    ? op->attrs[i].lit
                                     : op->args[i - op->nattrs].kind == IR_ARG_LITERAL ? op->args[i - op->nattrs].lit
                                                                                       : NULL;
                if (!l || l->kind != IR_LIT_BLOBFILE) continue;
                bool seen = false;
                for (int k = 0; k < ndone; k++) seen |= strcmp(done[k], l->blob_path) == 0;
                if (seen) continue;
                const char **nd = realloc(done, sizeof *done * (size_t)(ndone + 1));
                if (!nd) {
                    rc = -1;
                    break;
                }
                (done = nd)[ndone++] = l->blob_path;
                char src[PATH_MAX], out[PATH_MAX * 2];
                const char *why;
                if (mil_blob_path(model_dir ? model_dir : ".", l->blob_path, src, sizeof src, &why) != 0) {
                    diag_error(d, l->loc, "weight file '%s': %s", l->blob_path, why);
                    rc = -1;
                    break;
                }
                const char *rel = l->blob_path + strlen("@model_path/");
                snprintf(out, sizeof out, "%s/%s", dst, rel);
                rc = pkg_make_dirs(d, dst, rel) == 0 ? pkg_copy_file(d, src, out) : -1;
                *any = true;
            }
        }
    free(done);
    return rc;
}

static int write_tree(const IrProgram *p, const char *model_dir, PkgFormat fmt, const char *tmp, DiagSink *d) {
    char dir[PATH_MAX + 32], path[PATH_MAX + 64];
    bool weights = false;
    if (fmt == PKG_OUT_MIL_DIR) {
        size_t len;
        char *text = mil_print(p, &len);
        snprintf(path, sizeof path, "%s/model.mil", tmp);
        int rc = text ? pkg_write_bytes(d, path, text, len) : -1;
        free(text);
        return rc == 0 ? copy_weights(p, model_dir, tmp, d, &weights) : -1;
    }
    void *spec;
    size_t len;
    if (pkg_encode_spec(p, &spec, &len, d) != 0) return -1;
    snprintf(dir, sizeof dir, "%s/Data/com.apple.CoreML", tmp);
    snprintf(path, sizeof path, "%s/model.mlmodel", dir);
    int rc = pkg_make_dirs(d, tmp, "Data/com.apple.CoreML/") == 0 && pkg_write_bytes(d, path, spec, len) == 0 &&
                     copy_weights(p, model_dir, dir, d, &weights) == 0 &&
                     write_manifest(d, tmp, spec, len, weights) == 0
                 ? 0
                 : -1;
    free(spec);
    return rc;
}

/* Remove a tree this module made; links are removed, never followed. */
static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

static void rm_tree(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

int pkg_write(const IrProgram *p, const char *model_dir, PkgFormat fmt, const char *out, DiagSink *d) {
    char tmp[PATH_MAX], old[PATH_MAX + 8];
    SrcLoc at = {diag_intern(d, out), 0, 0};
    size_t n = strlen(out);
    while (n > 1 && out[n - 1] == '/') n--; /* "x.mlpackage/" names x.mlpackage */
    if (n + 16 >= sizeof tmp) {
        diag_error(d, at, "path too long");
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%.*s.tmp-XXXXXX", (int)n, out);
    if (!mkdtemp(tmp)) {
        diag_syserror(d, at, "cannot create a folder beside it: %s", strerror(errno));
        return -1;
    }
    if (write_tree(p, model_dir, fmt, tmp, d) != 0) {
        rm_tree(tmp);
        return -1;
    }
    char dst[PATH_MAX];
    snprintf(dst, sizeof dst, "%.*s", (int)n, out);
    struct stat st;
    bool replace = lstat(dst, &st) == 0;
    snprintf(old, sizeof old, "%s.old", tmp);
    if (replace && !S_ISDIR(st.st_mode)) {
        diag_error(d, at, "exists and is not a folder; not replaced");
        rm_tree(tmp);
        return -1;
    }
    if ((replace && rename(dst, old) != 0) || rename(tmp, dst) != 0) {
        diag_syserror(d, at, "cannot move the new %s into place: %s", fmt == PKG_OUT_MLPACKAGE ? "package" : "folder",
                      strerror(errno));
        if (replace) rename(old, dst);
        rm_tree(tmp);
        return -1;
    }
    if (replace) rm_tree(old);
    return 0;
}
