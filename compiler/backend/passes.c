/* passes.c — the IR passes that rewrite the program: dead-code elimination,
 * constant folding, and the SSA verifier run between passes.  Each pass is
 * one function over one IrFunction; backend.c strings them together. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_internal.h"
#include "milc/assert.h"

/* ---- a pointer set (open addressing), for the verifier ---- */
typedef struct PtrSet {
    const void **slots;
    size_t cap, n;
} PtrSet;

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}
static void ptrset_init(PtrSet *s, size_t expect) {
    s->cap = 64;
    while (s->cap < expect * 2) s->cap *= 2;
    s->slots = calloc(s->cap, sizeof *s->slots);
    MILC_ASSERT(s->slots);
    s->n = 0;
}
static bool ptrset_has(const PtrSet *s, const void *p) {
    for (size_t i = ptr_hash(p) & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
        if (!s->slots[i]) return false;
        if (s->slots[i] == p) return true;
    }
}
static void ptrset_add(PtrSet *s, const void *p) {
    if ((s->n + 1) * 2 > s->cap) {
        PtrSet t;
        ptrset_init(&t, s->cap);
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i]) ptrset_add(&t, s->slots[i]);
        free(s->slots);
        *s = t;
    }
    size_t i = ptr_hash(p) & (s->cap - 1);
    while (s->slots[i] && s->slots[i] != p) i = (i + 1) & (s->cap - 1);
    if (!s->slots[i]) s->slots[i] = p, s->n++;
}

/* ---- verifier ---- */

static bool type_sane(const IrType *t) {
    return t->dtype >= 0 && t->dtype < IR_DT_COUNT && t->rank >= 0 && t->rank <= 16 && (t->rank == 0 || t->dims);
}

bool backend_verify(IrFunction *f, const char *stage, DiagSink *d) {
    int before = d->errors;
    PtrSet defined;
    ptrset_init(&defined, (size_t)f->nops * 2 + (size_t)f->ninputs + 8);
    for (int i = 0; i < f->ninputs; i++) ptrset_add(&defined, f->inputs[i]);
    int count = 0;
    IrOp *prev = NULL;
    IR_FOR_EACH_OP(op, f) {
        count++;
        if (op->prev != prev || op->fn != f || op->kind < 0 || op->kind >= OP_COUNT) {
            diag_error(d, op->loc, "IR verifier (after %s): op '%s' is badly linked", stage, op->name);
            break;
        }
        prev = op;
        for (int a = 0; a < op->nargs; a++) {
            IrArg *arg = &op->args[a];
            int n = arg->kind == IR_ARG_VALUE ? 1 : arg->kind == IR_ARG_TUPLE ? arg->nitems : 0;
            for (int k = 0; k < n; k++) {
                IrValue *v = arg->kind == IR_ARG_VALUE ? arg->value : arg->items[k];
                if (!v) {
                    diag_error(d, arg->loc, "IR verifier (after %s): argument '%s' of '%s' is dangling", stage,
                               arg->name, op->name);
                } else if (!ptrset_has(&defined, v)) {
                    diag_error(d, arg->loc, "IR verifier (after %s): '%s' used by '%s' before its definition", stage,
                               v->name, op->name);
                }
            }
        }
        for (int r = 0; r < op->nresults; r++) {
            IrValue *v = op->results[r];
            if (!v || v->def != op || v->result_index != r || !type_sane(&v->type)) {
                diag_error(d, op->loc, "IR verifier (after %s): result %d of '%s' is inconsistent", stage, r, op->name);
                continue;
            }
            if (ptrset_has(&defined, v))
                diag_error(d, v->loc, "IR verifier (after %s): '%s' is defined twice", stage, v->name);
            ptrset_add(&defined, v);
        }
    }
    if (count != f->nops || f->last != prev)
        diag_error(d, f->loc, "IR verifier (after %s): op list of '%s' holds %d ops, header says %d", stage, f->name,
                   count, f->nops);
    for (int i = 0; i < f->noutputs; i++)
        if (!f->outputs[i] || !ptrset_has(&defined, f->outputs[i]))
            diag_error(d, f->loc, "IR verifier (after %s): output %d of '%s' is not defined", stage, i, f->name);
    free(defined.slots);
    return d->errors == before;
}

/* ---- dead-code elimination ---- */

static void for_each_value_arg(IrOp *op, void (*fn)(IrValue *)) {
    for (int a = 0; a < op->nargs; a++) {
        IrArg *arg = &op->args[a];
        if (arg->kind == IR_ARG_VALUE)
            fn(arg->value);
        else if (arg->kind == IR_ARG_TUPLE)
            for (int k = 0; k < arg->nitems; k++) fn(arg->items[k]);
    }
}
static void drop_use(IrValue *v) { v->uses--; }

int backend_dce(IrFunction *f) {
    ir_function_count_uses(f);
    int removed = 0;
    /* Backwards: removing an op drops its uses before its producers are seen,
     * so a dead chain goes in one sweep. */
    for (IrOp *op = f->last, *prev; op; op = prev) {
        prev = op->prev;
        /* a state's write is its effect, whatever uses its result */
        bool live = op->kind == OP_WRITE_STATE || op->kind == OP_COREML_UPDATE_STATE;
        for (int r = 0; r < op->nresults; r++) live |= op->results[r]->uses > 0;
        if (live) continue;
        for_each_value_arg(op, drop_use);
        ir_op_remove(op);
        removed++;
    }
    return removed;
}

/* ---- constant folding ---- */


static bool small_const(const IrValue *v, const IrLiteral **out) {
    const IrLiteral *l = ir_value_const(v);
    if (!l || l->kind != IR_LIT_DATA || l->type.dtype == IR_DT_STRING || l->count > BACKEND_FOLD_MAX_ELEMS) return false;
    *out = l;
    return true;
}

static void lit_store(IrLiteral *l, size_t i, double v) {
    switch (l->type.dtype) {
    case IR_DT_FP16: l->data.f16[i] = ir_double_to_half(v); break;
    case IR_DT_FP32: l->data.f32[i] = (float)v; break;
    case IR_DT_FP64: l->data.f64[i] = v; break;
    case IR_DT_BOOL: l->data.b[i] = v != 0; break;
    default: l->data.i[i] = (int64_t)v; break; /* integers (MIL casts truncate) */
    }
}

/* Flat index into `in` (broadcast against out) of out's flat element i. */
static size_t bcast_index(const IrType *out, const IrType *in, size_t i) {
    size_t idx = 0, stride = 1;
    for (int d = out->rank - 1, e = in->rank - 1; d >= 0; d--, e--) {
        size_t c = i % (size_t)out->dims[d];
        i /= (size_t)out->dims[d];
        if (e < 0) continue;
        size_t n = (size_t)in->dims[e];
        idx += (n == 1 ? 0 : c) * stride;
        stride *= n;
    }
    return idx;
}

static bool fold_binary(IrOpKind k, double x, double y, double *r, bool is_int) {
    switch (k) {
    case OP_ADD: *r = x + y; return true;
    case OP_SUB: *r = x - y; return true;
    case OP_MUL: *r = x * y; return true;
    case OP_REAL_DIV:
        if (is_int) {
            if (y == 0) return false;
            *r = trunc(x / y);
        } else
            *r = x / y;
        return true;
    case OP_POW: *r = pow(x, y); return true;
    default: return false;
    }
}

/* The folded literal of op, or NULL when op does not fold. */
static IrLiteral *fold_op(Arena *a, IrOp *op) {
    if (op->nresults != 1) return NULL;
    IrValue *res = op->results[0];
    int64_t n = ir_type_numel(&res->type);
    if (n < 0 || n > BACKEND_FOLD_MAX_ELEMS || res->type.dtype == IR_DT_STRING) return NULL;
    const IrLiteral *x = NULL, *y = NULL;
    IrArg *ax = ir_op_arg(op, "x");
    if (!ax || ax->kind != IR_ARG_VALUE || !small_const(ax->value, &x)) return NULL;
    switch (op->kind) {
    case OP_ADD:
    case OP_SUB:
    case OP_MUL:
    case OP_REAL_DIV:
    case OP_POW: {
        IrArg *ay = ir_op_arg(op, "y");
        if (!ay || ay->kind != IR_ARG_VALUE || !small_const(ay->value, &y)) return NULL;
        IrLiteral *l = ir_literal_new(a, &res->type);
        bool is_int = ir_dtype_is_int(res->type.dtype);
        for (size_t i = 0; i < (size_t)n; i++) {
            double r;
            size_t xi = bcast_index(&res->type, &x->type, i), yi = bcast_index(&res->type, &y->type, i);
            if (!fold_binary(op->kind, ir_lit_f64(x, xi), ir_lit_f64(y, yi), &r, is_int)) return NULL;
            lit_store(l, i, r);
        }
        return l;
    }
    case OP_RSQRT:
    case OP_SQRT:
    case OP_EXP: {
        if (!ir_dtype_is_float(res->type.dtype)) return NULL;
        double eps = 0;
        if (op->kind == OP_RSQRT && !ir_op_arg_f64(op, "epsilon", &eps)) return NULL;
        IrLiteral *l = ir_literal_new(a, &res->type);
        for (size_t i = 0; i < (size_t)n; i++) {
            double v = ir_lit_f64(x, i);
            lit_store(l, i, op->kind == OP_RSQRT ? 1 / sqrt(v + eps) : op->kind == OP_SQRT ? sqrt(v) : exp(v));
        }
        return l;
    }
    case OP_RESHAPE:
    case OP_EXPAND_DIMS:
    case OP_SQUEEZE:
    case OP_CAST: {
        /* Same elements in the same order; only the type (or dtype) changes. */
        if ((size_t)n != x->count) return NULL;
        IrLiteral *l = ir_literal_new(a, &res->type);
        bool to_int = ir_dtype_is_int(res->type.dtype) || res->type.dtype == IR_DT_BOOL;
        for (size_t i = 0; i < (size_t)n; i++)
            lit_store(l, i, to_int && !ir_dtype_is_float(x->type.dtype) ? (double)ir_lit_i64(x, i) : ir_lit_f64(x, i));
        return l;
    }
    case OP_TRANSPOSE: {
        const IrLiteral *perm = ir_op_arg_const(op, "perm");
        int r = x->type.rank;
        if (!perm || (int)perm->count != r || r > 16) return NULL;
        int64_t in_stride[16];
        for (int d = r - 1, s = 1; d >= 0; d--) in_stride[d] = s, s *= (int)x->type.dims[d];
        IrLiteral *l = ir_literal_new(a, &res->type);
        for (size_t i = 0; i < (size_t)n; i++) {
            size_t rem = i, src = 0;
            for (int d = r - 1; d >= 0; d--) {
                size_t c = rem % (size_t)res->type.dims[d];
                rem /= (size_t)res->type.dims[d];
                src += c * (size_t)in_stride[ir_lit_i64(perm, (size_t)d)];
            }
            lit_store(l, i, ir_lit_f64(x, src));
        }
        return l;
    }
    case OP_NON_ZERO: {
        /* Of a constant: the coordinates of its non-zero elements, in
         * row-major order, as the checker counted them. */
        int r = x->type.rank;
        if (res->type.rank != 2 || res->type.dims[1] != r || (int64_t)x->count != ir_type_numel(&x->type)) return NULL;
        IrLiteral *l = ir_literal_new(a, &res->type);
        size_t at = 0;
        for (size_t i = 0; i < x->count; i++) {
            if (ir_lit_f64(x, i) == 0) continue;
            if (at + (size_t)r > (size_t)n) return NULL;
            size_t rem = i;
            for (int d = r - 1; d >= 0; d--) {
                lit_store(l, at + (size_t)d, (double)(rem % (size_t)x->type.dims[d]));
                rem /= (size_t)x->type.dims[d];
            }
            at += (size_t)r;
        }
        return at == (size_t)n ? l : NULL;
    }
    default: return NULL;
    }
}

int backend_fold(IrFunction *f) {
    Arena *a = f->prog->arena;
    int folded = 0;
    for (IrOp *op = f->first, *next; op; op = next) {
        next = op->next;
        if (op->kind == OP_CONST) continue;
        IrLiteral *l = fold_op(a, op);
        if (!l) continue;
        IrValue *old = op->results[0];
        l->loc = op->loc;
        IrOp *c = ir_op_new_const(f, old->name, l);
        c->loc = op->loc;
        c->results[0]->loc = old->loc;
        ir_op_insert_before(op, c);
        ir_value_replace_uses(f, old, c->results[0]);
        ir_op_remove(op);
        folded++;
    }
    return folded;
}

/* The literals of the ops from first on, nested blocks' ops included. */
static int hoist_in(IrFunction *f, IrOp *first, int n) {
    for (IrOp *op = first; op; op = op->next) {
        for (int b = 0; b < op->nblocks; b++) n = hoist_in(f, op->blocks[b]->first, n);
        if (op->kind == OP_CONST) continue;
        for (int i = 0; i < op->nargs; i++) {
            IrArg *a = &op->args[i];
            if (a->kind != IR_ARG_LITERAL) continue;
            char *name = arena_printf(f->prog->arena, "%s__%s_lit%d", op->name ? op->name : "op", a->name, n);
            IrOp *c = ir_op_new_const(f, name, a->lit);
            c->loc = a->loc;
            c->results[0]->loc = a->loc;
            c->results[0]->block = op->block;
            ir_op_insert_before(op, c);
            a->kind = IR_ARG_VALUE;
            a->value = c->results[0];
            n++;
        }
    }
    return n;
}

int backend_hoist_literals(IrFunction *f) {
    /* Inline literal arguments (`axis = int32(1)`, `y = fp16(0.5)`) become
     * const ops, so the passes and the lowering see one form: every argument
     * is a value, and constants are values defined by a const op.  A literal
     * in a nested block (cond, while_loop) gets its const in that block. */
    return hoist_in(f, f->first, 0);
}

/* ---- fixed-length lists as tensors, for the lowering ---- */

static void fix_list_type(Arena *a, ListTypes *lt, IrType *t) {
    if (!t->list || t->list_len < 0 || t->rank + 1 > RT_MAX_RANK) return;
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] < 0) return;
    if (lt->n == lt->cap) {
        lt->cap = lt->cap ? 2 * lt->cap : 16;
        lt->at = realloc(lt->at, sizeof *lt->at * (size_t)lt->cap);
        lt->was = realloc(lt->was, sizeof *lt->was * (size_t)lt->cap);
        MILC_ASSERT(lt->at && lt->was);
    }
    lt->at[lt->n] = t, lt->was[lt->n++] = *t;
    int64_t *d = ARENA_ARRAY(a, int64_t, t->rank + 1);
    d[0] = t->list_len;
    for (int i = 0; i < t->rank; i++) d[i + 1] = t->dims[i];
    t->dims = d, t->rank++, t->list = false, t->list_len = 0;
}

static void fix_lists_in(Arena *a, ListTypes *lt, IrOp *first) {
    for (IrOp *op = first; op; op = op->next) {
        for (int r = 0; r < op->nresults; r++) fix_list_type(a, lt, &op->results[r]->type);
        for (int b = 0; b < op->nblocks; b++) {
            for (int i = 0; i < op->blocks[b]->ninputs; i++) fix_list_type(a, lt, &op->blocks[b]->inputs[i]->type);
            fix_lists_in(a, lt, op->blocks[b]->first);
        }
    }
}

void backend_lists_as_tensors(IrFunction *f, ListTypes *lt) {
    memset(lt, 0, sizeof *lt);
    fix_lists_in(f->prog->arena, lt, f->first);
}

void backend_lists_restore(ListTypes *lt) {
    for (int i = 0; i < lt->n; i++) *lt->at[i] = lt->was[i];
    free(lt->at), free(lt->was);
    memset(lt, 0, sizeof *lt);
}
