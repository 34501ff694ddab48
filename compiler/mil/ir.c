/* ir.c — the IR's data helpers: dtypes, types, literals, the op list and
 * queries.  Everything allocates from the program's Arena. */
#include "milc/ir.h"
#include "milc/assert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[] = {
#define X(e, n, b) n,
    MILC_DTYPES(X)
#undef X
};
static const unsigned char dtype_bits[] = {
#define X(e, n, b) b,
    MILC_DTYPES(X)
#undef X
};
_Static_assert(sizeof dtype_names / sizeof *dtype_names == IR_DT_COUNT, "dtype table");

const char *ir_dtype_name(IrDType t) { return (unsigned)t < IR_DT_COUNT ? dtype_names[t] : "?"; }

bool ir_dtype_from_name(const char *s, size_t len, IrDType *out) {
    for (int i = 0; i < IR_DT_COUNT; i++)
        if (len > 0 && dtype_names[i][0] == s[0] && strncmp(dtype_names[i], s, len) == 0 && dtype_names[i][len] == 0) {
            *out = (IrDType)i;
            return true;
        }
    return false;
}

unsigned ir_dtype_bits(IrDType t) { return (unsigned)t < IR_DT_COUNT ? dtype_bits[t] : 0; }
bool ir_dtype_is_float(IrDType t) { return t == IR_DT_FP16 || t == IR_DT_FP32 || t == IR_DT_FP64; }
bool ir_dtype_is_unsigned(IrDType t) { return t >= IR_DT_UINT1 && t <= IR_DT_UINT64; }
bool ir_dtype_is_int(IrDType t) { return t >= IR_DT_INT4 && t <= IR_DT_UINT64; }

void ir_dtype_int_range(IrDType t, int64_t *lo, int64_t *hi) {
    unsigned bits = ir_dtype_bits(t);
    if (ir_dtype_is_unsigned(t)) {
        *lo = 0;
        *hi = bits >= 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << bits) - 1);
    } else if (bits >= 64) {
        *lo = INT64_MIN;
        *hi = INT64_MAX;
    } else {
        *lo = -(INT64_C(1) << (bits - 1));
        *hi = (INT64_C(1) << (bits - 1)) - 1;
    }
}

/* ---- types ---- */

bool ir_type_equal(const IrType *a, const IrType *b) {
    if (a->dtype != b->dtype || a->rank != b->rank || a->state != b->state || a->list != b->list) return false;
    if (a->list && a->list_len != b->list_len) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return false;
    return true;
}

int64_t ir_type_numel(const IrType *t) {
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) {
        int64_t d = t->dims[i];
        if (d < 0) return -1;
        if (d != 0 && n > INT64_MAX / d) return -1;
        n *= d;
    }
    return n;
}

IrType ir_type_make(Arena *a, IrDType dt, int rank, const int64_t *dims) {
    IrType t = {dt, rank, NULL, false, false, 0};
    if (rank > 0) {
        t.dims = ARENA_ARRAY(a, int64_t, rank);
        if (dims) memcpy(t.dims, dims, sizeof(int64_t) * (size_t)rank);
    }
    return t;
}

IrType ir_type_copy(Arena *a, const IrType *t) {
    IrType c = ir_type_make(a, t->dtype, t->rank, t->dims);
    c.state = t->state;
    c.list = t->list;
    c.list_len = t->list_len;
    return c;
}

char *ir_dims_format(const int64_t *dims, int rank, char *buf, size_t size) {
    size_t n = 0;
    if (size == 0) return buf;
    buf[0] = 0;
#define PUT(...)                                                                                                       \
    do {                                                                                                               \
        if (n < size) {                                                                                                \
            int k_ = snprintf(buf + n, size - n, __VA_ARGS__);                                                         \
            if (k_ > 0) n += (size_t)k_;                                                                               \
        }                                                                                                              \
    } while (0)
    PUT("[");
    for (int i = 0; i < rank; i++) {
        if (i) PUT(", ");
        if (dims[i] < 0)
            PUT("?");
        else
            PUT("%lld", (long long)dims[i]);
    }
    PUT("]");
#undef PUT
    return buf;
}

char *ir_type_format(const IrType *t, char *buf, size_t size) {
    char dims[256], len[32] = "?";
    if (t->list && t->list_len >= 0) snprintf(len, sizeof len, "%lld", (long long)t->list_len);
    snprintf(buf, size, "%s%stensor<%s, %s>%s%s%s", t->state ? "state<" : "", t->list ? "list<" : "",
             ir_dtype_name(t->dtype), ir_dims_format(t->dims, t->rank, dims, sizeof dims), t->state ? ">" : "",
             t->list ? ", " : "", t->list ? len : "");
    if (t->list) {
        size_t n = strlen(buf);
        if (n + 1 < size) strcpy(buf + n, ">");
    }
    return buf;
}

/* ---- fp16 ---- */

double ir_half_to_double(uint16_t h) {
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp((double)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp((double)(m + 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

uint16_t ir_double_to_half(double v) {
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    if (isnan(v)) return sign | 0x7e00;
    double a = fabs(v);
    /* 65520 is halfway between the largest half (65504) and 2^16: ties go to even, i.e. inf. */
    if (a >= 65520.0) return sign | 0x7c00;
    if (a < 0x1p-14) /* subnormal: units of 2^-24, rint rounds to even; 1024 encodes the smallest normal */
        return sign | (uint16_t)rint(ldexp(a, 24));
    int e;
    frexp(a, &e);                      /* a = f * 2^e, f in [0.5, 1) */
    double m = rint(ldexp(a, 11 - e)); /* 11 significant bits, in [1024, 2048] */
    if (m >= 2048) {
        m = 1024;
        e++;
    }
    return sign | (uint16_t)(((e - 1 + 15) << 10) | ((int)m - 1024));
}

/* ---- literals ---- */

static size_t elem_size(IrDType dt) {
    switch (dt) {
    case IR_DT_BOOL: return 1;
    case IR_DT_FP16: return 2;
    case IR_DT_FP32: return 4;
    case IR_DT_FP64: return 8;
    case IR_DT_STRING: return sizeof(const char *);
    default: return 8; /* integers as int64 */
    }
}

IrLiteral *ir_literal_new(Arena *a, const IrType *t) {
    IrLiteral *l = ARENA_NEW(a, IrLiteral);
    l->kind = IR_LIT_DATA;
    l->type = ir_type_copy(a, t);
    int64_t n = ir_type_numel(t);
    MILC_ASSERT(n >= 0);
    l->count = (size_t)n;
    l->data.raw = arena_alloc(a, elem_size(t->dtype) * (size_t)(n ? n : 1));
    return l;
}

IrLiteral *ir_literal_i64(Arena *a, IrDType dt, int64_t v) {
    IrType t = {dt, 0, NULL, false, false, 0};
    IrLiteral *l = ir_literal_new(a, &t);
    if (dt == IR_DT_BOOL)
        l->data.b[0] = v != 0;
    else if (ir_dtype_is_float(dt))
        return ir_literal_f64(a, dt, (double)v);
    else
        l->data.i[0] = v;
    return l;
}

IrLiteral *ir_literal_f64(Arena *a, IrDType dt, double v) {
    IrType t = {dt, 0, NULL, false, false, 0};
    IrLiteral *l = ir_literal_new(a, &t);
    switch (dt) {
    case IR_DT_FP16: l->data.f16[0] = ir_double_to_half(v); break;
    case IR_DT_FP32: l->data.f32[0] = (float)v; break;
    case IR_DT_FP64: l->data.f64[0] = v; break;
    case IR_DT_BOOL: l->data.b[0] = v != 0; break;
    default: l->data.i[0] = (int64_t)v; break;
    }
    return l;
}

IrLiteral *ir_literal_bool(Arena *a, bool v) { return ir_literal_i64(a, IR_DT_BOOL, v); }

IrLiteral *ir_literal_str(Arena *a, const char *s) {
    IrType t = {IR_DT_STRING, 0, NULL, false, false, 0};
    IrLiteral *l = ir_literal_new(a, &t);
    l->data.s[0] = arena_strdup(a, s);
    return l;
}

IrLiteral *ir_literal_ints(Arena *a, const int64_t *v, int n) {
    int64_t dim = n;
    IrType t = {IR_DT_INT32, 1, &dim, false, false, 0};
    IrLiteral *l = ir_literal_new(a, &t);
    for (int i = 0; i < n; i++) l->data.i[i] = v[i];
    return l;
}

int64_t ir_lit_i64(const IrLiteral *l, size_t i) {
    MILC_ASSERT(l->kind == IR_LIT_DATA && i < l->count);
    switch (l->type.dtype) {
    case IR_DT_BOOL: return l->data.b[i];
    case IR_DT_FP16: return (int64_t)ir_half_to_double(l->data.f16[i]);
    case IR_DT_FP32: return (int64_t)l->data.f32[i];
    case IR_DT_FP64: return (int64_t)l->data.f64[i];
    case IR_DT_STRING: return 0;
    default: return l->data.i[i];
    }
}

double ir_lit_f64(const IrLiteral *l, size_t i) {
    MILC_ASSERT(l->kind == IR_LIT_DATA && i < l->count);
    switch (l->type.dtype) {
    case IR_DT_BOOL: return l->data.b[i];
    case IR_DT_FP16: return ir_half_to_double(l->data.f16[i]);
    case IR_DT_FP32: return l->data.f32[i];
    case IR_DT_FP64: return l->data.f64[i];
    case IR_DT_STRING: return 0;
    case IR_DT_UINT64: return (double)(uint64_t)l->data.i[i];
    default: return (double)l->data.i[i];
    }
}

const char *ir_lit_str(const IrLiteral *l, size_t i) {
    if (l->kind != IR_LIT_DATA || l->type.dtype != IR_DT_STRING || i >= l->count) return NULL;
    return l->data.s[i];
}

long ir_lit_to_i64(const IrLiteral *l, int64_t *out, size_t max) {
    if (!l || l->kind != IR_LIT_DATA || l->type.dtype == IR_DT_STRING) return -1;
    for (size_t i = 0; i < l->count && i < max; i++) out[i] = ir_lit_i64(l, i);
    return (long)l->count;
}

long ir_lit_to_f64(const IrLiteral *l, double *out, size_t max) {
    if (!l || l->kind != IR_LIT_DATA || l->type.dtype == IR_DT_STRING) return -1;
    for (size_t i = 0; i < l->count && i < max; i++) out[i] = ir_lit_f64(l, i);
    return (long)l->count;
}

/* ---- building ---- */

/* Grow an arena array by doubling; old storage is simply abandoned. */
static void *grow(Arena *a, void *p, int *cap, int n, size_t elem) {
    if (n < *cap) return p;
    int nc = *cap ? *cap * 2 : 4;
    void *q = arena_alloc(a, elem * (size_t)nc);
    if (p) memcpy(q, p, elem * (size_t)n);
    *cap = nc;
    return q;
}

bool ir_program_tensor_scalars(const IrProgram *p) { return p->major == 1 && p->minor == 0; }

IrProgram *ir_program_new(Arena *a, int major, int minor) {
    IrProgram *p = ARENA_NEW(a, IrProgram);
    p->arena = a;
    p->major = major;
    p->minor = minor;
    return p;
}

void ir_program_set_attr(IrProgram *p, const char *name, IrLiteral *lit) {
    for (int i = 0; i < p->nattrs; i++)
        if (strcmp(p->attrs[i].name, name) == 0) {
            p->attrs[i].lit = lit;
            return;
        }
    p->attrs = grow(p->arena, p->attrs, &p->cap_attrs, p->nattrs, sizeof(IrAttr));
    p->attrs[p->nattrs++] = (IrAttr){arena_strdup(p->arena, name), lit ? lit->loc : (SrcLoc){0}, lit};
}

IrFunction *ir_function_new(IrProgram *p, const char *name, const char *opset) {
    IrFunction *f = ARENA_NEW(p->arena, IrFunction);
    f->name = arena_strdup(p->arena, name);
    f->opset = arena_strdup(p->arena, opset);
    f->opset_version = mil_opset_version(opset, strlen(opset));
    f->prog = p;
    p->funcs = grow(p->arena, p->funcs, &p->cap_funcs, p->nfuncs, sizeof(IrFunction *));
    p->funcs[p->nfuncs++] = f;
    return f;
}

IrFunction *ir_program_function(const IrProgram *p, const char *name) {
    for (int i = 0; i < p->nfuncs; i++)
        if (strcmp(p->funcs[i]->name, name) == 0) return p->funcs[i];
    return NULL;
}

IrFunction *ir_program_entry(const IrProgram *p, const char *name) {
    IrFunction *f = ir_program_function(p, name ? name : "main");
    return f || name || p->nfuncs != 1 ? f : p->funcs[0];
}

IrValue *ir_function_add_input(IrFunction *f, const char *name, IrType type) {
    Arena *a = f->prog->arena;
    IrValue *v = ARENA_NEW(a, IrValue);
    v->name = arena_strdup(a, name);
    v->type = ir_type_copy(a, &type);
    f->inputs = grow(a, f->inputs, &f->cap_inputs, f->ninputs, sizeof(IrValue *));
    f->inputs[f->ninputs++] = v;
    return v;
}

void ir_function_add_output(IrFunction *f, IrValue *v) {
    Arena *a = f->prog->arena;
    int cap = f->cap_outputs;
    f->outputs = grow(a, f->outputs, &f->cap_outputs, f->noutputs, sizeof(IrValue *));
    f->output_locs = grow(a, f->output_locs, &cap, f->noutputs, sizeof(SrcLoc));
    f->output_locs[f->noutputs] = v->loc;
    f->outputs[f->noutputs++] = v;
}

IrOp *ir_op_new(IrFunction *f, IrOpKind kind, const char *name, int nresults) {
    Arena *a = f->prog->arena;
    IrOp *op = ARENA_NEW(a, IrOp);
    op->kind = kind;
    op->name = name ? arena_strdup(a, name) : NULL;
    op->fn = f;
    op->nresults = nresults;
    op->results = ARENA_ARRAY(a, IrValue *, nresults > 0 ? nresults : 1);
    return op;
}

IrValue *ir_op_set_result(IrOp *op, int i, const char *name, IrType type) {
    MILC_ASSERT(i >= 0 && i < op->nresults);
    Arena *a = op->fn->prog->arena;
    IrValue *v = op->results[i];
    if (!v) v = op->results[i] = ARENA_NEW(a, IrValue);
    v->name = arena_strdup(a, name);
    v->type = ir_type_copy(a, &type);
    v->def = op;
    v->result_index = i;
    if (!op->name) op->name = v->name;
    return v;
}

static IrArg *new_arg(IrOp *op, const char *name) {
    Arena *a = op->fn->prog->arena;
    op->args = grow(a, op->args, &op->cap_args, op->nargs, sizeof(IrArg));
    IrArg *arg = &op->args[op->nargs++];
    memset(arg, 0, sizeof *arg);
    arg->name = arena_strdup(a, name);
    return arg;
}

IrArg *ir_op_add_value(IrOp *op, const char *name, IrValue *v) {
    IrArg *arg = new_arg(op, name);
    arg->kind = IR_ARG_VALUE;
    arg->value = v;
    return arg;
}

IrArg *ir_op_add_literal(IrOp *op, const char *name, IrLiteral *lit) {
    IrArg *arg = new_arg(op, name);
    arg->kind = IR_ARG_LITERAL;
    arg->lit = lit;
    return arg;
}

IrArg *ir_op_add_tuple(IrOp *op, const char *name, IrValue **items, int n) {
    Arena *a = op->fn->prog->arena;
    IrArg *arg = new_arg(op, name);
    arg->kind = IR_ARG_TUPLE;
    arg->items = ARENA_ARRAY(a, IrValue *, n > 0 ? n : 1);
    if (n > 0) memcpy(arg->items, items, sizeof(IrValue *) * (size_t)n);
    arg->nitems = n;
    return arg;
}

IrAttr *ir_op_set_attr(IrOp *op, const char *name, IrLiteral *lit) {
    IrAttr *at = ir_op_attr(op, name);
    if (at) {
        at->lit = lit;
        return at;
    }
    Arena *a = op->fn->prog->arena;
    op->attrs = grow(a, op->attrs, &op->cap_attrs, op->nattrs, sizeof(IrAttr));
    at = &op->attrs[op->nattrs++];
    *at = (IrAttr){arena_strdup(a, name), lit ? lit->loc : (SrcLoc){0}, lit};
    return at;
}

IrOp *ir_op_new_const(IrFunction *f, const char *name, IrLiteral *lit) {
    IrOp *op = ir_op_new(f, OP_CONST, name, 1);
    ir_op_set_result(op, 0, name, lit->type);
    ir_op_set_attr(op, "val", lit);
    return op;
}

/* ---- the op list ---- */

void ir_op_append(IrFunction *f, IrOp *op) {
    op->fn = f;
    op->prev = f->last;
    op->next = NULL;
    if (f->last)
        f->last->next = op;
    else
        f->first = op;
    f->last = op;
    f->nops++;
}

IrBlock *ir_op_add_block(IrOp *op) {
    Arena *a = op->fn->prog->arena;
    IrBlock *b = ARENA_NEW(a, IrBlock);
    b->parent = op;
    IrBlock **bs = arena_alloc(a, sizeof *bs * (size_t)(op->nblocks + 1));
    if (op->nblocks) memcpy(bs, op->blocks, sizeof *bs * (size_t)op->nblocks);
    bs[op->nblocks++] = b;
    op->blocks = bs;
    return b;
}

IrValue *ir_block_add_input(IrBlock *b, const char *name, IrType type) {
    Arena *a = b->parent->fn->prog->arena;
    b->inputs = grow(a, b->inputs, &b->cap_inputs, b->ninputs, sizeof *b->inputs);
    IrValue *v = ARENA_NEW(a, IrValue);
    v->name = arena_strdup(a, name);
    v->type = ir_type_copy(a, &type);
    v->block = b;
    b->inputs[b->ninputs++] = v;
    return v;
}

void ir_block_add_output(IrBlock *b, IrValue *v, SrcLoc loc) {
    Arena *a = b->parent->fn->prog->arena;
    int cap = b->cap_outputs;
    b->outputs = grow(a, b->outputs, &b->cap_outputs, b->noutputs, sizeof *b->outputs);
    b->output_locs = grow(a, b->output_locs, &cap, b->noutputs, sizeof *b->output_locs);
    b->outputs[b->noutputs] = v;
    b->output_locs[b->noutputs++] = loc;
}

void ir_block_append(IrBlock *b, IrOp *op) {
    op->fn = b->parent->fn;
    op->block = b;
    op->prev = b->last;
    op->next = NULL;
    if (b->last)
        b->last->next = op;
    else
        b->first = op;
    b->last = op;
    b->nops++;
    for (int i = 0; i < op->nresults; i++) op->results[i]->block = b;
}

/* The list an op lives in: its block's or its function's. */
static IrOp **list_first(IrOp *op) { return op->block ? &op->block->first : &op->fn->first; }
static IrOp **list_last(IrOp *op) { return op->block ? &op->block->last : &op->fn->last; }
static int *list_count(IrOp *op) { return op->block ? &op->block->nops : &op->fn->nops; }

void ir_op_insert_before(IrOp *pos, IrOp *op) {
    op->fn = pos->fn;
    op->block = pos->block;
    op->next = pos;
    op->prev = pos->prev;
    if (pos->prev)
        pos->prev->next = op;
    else
        *list_first(pos) = op;
    pos->prev = op;
    (*list_count(pos))++;
}

void ir_op_insert_after(IrOp *pos, IrOp *op) {
    if (pos->next)
        ir_op_insert_before(pos->next, op);
    else if (pos->block)
        ir_block_append(pos->block, op);
    else
        ir_op_append(pos->fn, op);
}

void ir_op_remove(IrOp *op) {
    if (op->prev)
        op->prev->next = op->next;
    else
        *list_first(op) = op->next;
    if (op->next)
        op->next->prev = op->prev;
    else
        *list_last(op) = op->prev;
    op->prev = op->next = NULL;
    (*list_count(op))--;
}

/* ---- queries ---- */

IrArg *ir_op_arg(const IrOp *op, const char *name) {
    for (int i = 0; i < op->nargs; i++)
        if (strcmp(op->args[i].name, name) == 0) return &op->args[i];
    return NULL;
}

IrAttr *ir_op_attr(const IrOp *op, const char *name) {
    for (int i = 0; i < op->nattrs; i++)
        if (strcmp(op->attrs[i].name, name) == 0) return &op->attrs[i];
    return NULL;
}

const IrLiteral *ir_value_const(const IrValue *v) {
    if (!v || !v->def || v->def->kind != OP_CONST) return NULL;
    IrAttr *val = ir_op_attr(v->def, "val");
    return val ? val->lit : NULL;
}

const IrLiteral *ir_op_arg_const(const IrOp *op, const char *name) {
    IrArg *arg = ir_op_arg(op, name);
    if (!arg) return NULL;
    if (arg->kind == IR_ARG_LITERAL) return arg->lit;
    if (arg->kind == IR_ARG_VALUE) return ir_value_const(arg->value);
    return NULL;
}

/* Parse an op-table default ("-1", "1e-5", "false"); false for words like "all". */
static bool default_number(IrOpKind k, const char *name, double *out) {
    MilArgSpec s;
    if (!mil_op_arg_spec(k, name, &s) || !s.def[0]) return false;
    if (strcmp(s.def, "false") == 0) {
        *out = 0;
        return true;
    }
    if (strcmp(s.def, "true") == 0) {
        *out = 1;
        return true;
    }
    char *end;
    *out = strtod(s.def, &end); /* defaults are plain ASCII numbers: no locale issue in practice */
    return end != s.def && *end == 0;
}

bool ir_op_arg_i64(const IrOp *op, const char *name, int64_t *out) {
    const IrLiteral *l = ir_op_arg_const(op, name);
    if (!ir_op_arg(op, name)) {
        double d;
        if (!default_number(op->kind, name, &d)) return false;
        *out = (int64_t)d;
        return true;
    }
    if (!l || l->kind != IR_LIT_DATA || l->count != 1 || l->type.dtype == IR_DT_STRING) return false;
    *out = ir_lit_i64(l, 0);
    return true;
}

bool ir_op_arg_f64(const IrOp *op, const char *name, double *out) {
    const IrLiteral *l = ir_op_arg_const(op, name);
    if (!ir_op_arg(op, name)) return default_number(op->kind, name, out);
    if (!l || l->kind != IR_LIT_DATA || l->count != 1 || l->type.dtype == IR_DT_STRING) return false;
    *out = ir_lit_f64(l, 0);
    return true;
}

int64_t ir_value_numel(const IrValue *v) { return ir_type_numel(&v->type); }

static void zero_uses(IrOp *first) {
    for (IrOp *op = first; op; op = op->next) {
        for (int i = 0; i < op->nresults; i++) op->results[i]->uses = 0;
        for (int b = 0; b < op->nblocks; b++) {
            for (int i = 0; i < op->blocks[b]->ninputs; i++) op->blocks[b]->inputs[i]->uses = 0;
            zero_uses(op->blocks[b]->first);
        }
    }
}

static void add_uses(IrOp *first) {
    for (IrOp *op = first; op; op = op->next) {
        for (int i = 0; i < op->nargs; i++) {
            IrArg *arg = &op->args[i];
            if (arg->kind == IR_ARG_VALUE)
                arg->value->uses++;
            else if (arg->kind == IR_ARG_TUPLE)
                for (int j = 0; j < arg->nitems; j++) arg->items[j]->uses++;
        }
        for (int b = 0; b < op->nblocks; b++) {
            add_uses(op->blocks[b]->first);
            for (int i = 0; i < op->blocks[b]->noutputs; i++) op->blocks[b]->outputs[i]->uses++;
        }
    }
}

void ir_function_count_uses(IrFunction *f) {
    for (int i = 0; i < f->ninputs; i++) f->inputs[i]->uses = 0;
    zero_uses(f->first);
    add_uses(f->first);
    for (int i = 0; i < f->noutputs; i++) f->outputs[i]->uses++;
}

static int replace_in(IrOp *first, IrValue *old_v, IrValue *new_v) {
    int n = 0;
    for (IrOp *op = first; op; op = op->next) {
        for (int i = 0; i < op->nargs; i++) {
            IrArg *arg = &op->args[i];
            if (arg->kind == IR_ARG_VALUE && arg->value == old_v) {
                arg->value = new_v;
                n++;
            } else if (arg->kind == IR_ARG_TUPLE)
                for (int j = 0; j < arg->nitems; j++)
                    if (arg->items[j] == old_v) {
                        arg->items[j] = new_v;
                        n++;
                    }
        }
        for (int b = 0; b < op->nblocks; b++) {
            IrBlock *bl = op->blocks[b];
            n += replace_in(bl->first, old_v, new_v);
            for (int i = 0; i < bl->noutputs; i++)
                if (bl->outputs[i] == old_v) {
                    bl->outputs[i] = new_v;
                    n++;
                }
        }
    }
    return n;
}

int ir_value_replace_uses(IrFunction *f, IrValue *old_v, IrValue *new_v) {
    int n = replace_in(f->first, old_v, new_v);
    for (int i = 0; i < f->noutputs; i++)
        if (f->outputs[i] == old_v) {
            f->outputs[i] = new_v;
            n++;
        }
    return n;
}
