/* axes.c — negative axes and permutation entries made non-negative once, right
 * after parsing, so no checker rule, pass or lowering has to remember that
 * -1 means the last axis.  Which arguments are axes is in the op table (ops.h,
 * flag @). */
#include "milc/mil.h"

#include <string.h>

/* The rank an axis argument of op counts against (see ops.h, flag @). */
static int axis_rank(const IrOp *op, const MilArgSpec *ref, const MilArgSpec *s, const IrLiteral *l) {
    const IrArg *a = ir_op_arg(op, ref->name);
    if (!a) return -1;
    const IrType *t = a->kind == IR_ARG_VALUE     ? &a->value->type
                      : a->kind == IR_ARG_LITERAL ? &a->lit->type
                      : a->nitems > 0             ? &a->items[0]->type
                                                  : NULL;
    if (!t) return -1;
    if (s->axis == '+') return t->rank + 1;
    if (s->axis == '^') return t->rank + (int)l->count;
    return t->rank;
}

/* A copy of l with every entry in [-rank, 0) moved up by rank; NULL when
 * nothing changes (entries out of range stay as written: the checker reports
 * them). */
static IrLiteral *normalized(Arena *a, const IrLiteral *l, int rank) {
    if (l->kind != IR_LIT_DATA || !ir_dtype_is_int(l->type.dtype) || rank < 0) return NULL;
    bool change = false;
    for (size_t i = 0; i < l->count; i++) change |= l->data.i[i] < 0 && l->data.i[i] >= -rank;
    if (!change) return NULL;
    IrLiteral *n = ir_literal_new(a, &l->type);
    n->loc = l->loc;
    for (size_t i = 0; i < l->count; i++) {
        int64_t v = l->data.i[i];
        n->data.i[i] = v < 0 && v >= -rank ? v + rank : v;
    }
    return n;
}

static void normalize_op(Arena *a, IrOp *op) {
    MilArgSpec specs[MIL_MAX_OP_ARGS];
    int n = mil_op_args(op->kind, specs, MIL_MAX_OP_ARGS);
    for (int k = 0; k < n; k++) {
        IrArg *arg = specs[k].axis ? ir_op_arg(op, specs[k].name) : NULL;
        if (!arg) continue;
        if (arg->kind == IR_ARG_LITERAL) {
            IrLiteral *l = normalized(a, arg->lit, axis_rank(op, &specs[0], &specs[k], arg->lit));
            if (l) arg->lit = l;
            continue;
        }
        const IrLiteral *c = arg->kind == IR_ARG_VALUE ? ir_value_const(arg->value) : NULL;
        IrLiteral *l = c ? normalized(a, c, axis_rank(op, &specs[0], &specs[k], c)) : NULL;
        if (!l) continue;
        if (arg->value->uses == 1) {
            /* The const serves this argument only: rewrite it in place, so the
             * program keeps its shape (`axes = ax`) with ax non-negative. */
            ir_op_set_attr(arg->value->def, "val", l);
        } else {
            arg->kind = IR_ARG_LITERAL;
            arg->lit = l;
            arg->value = NULL;
        }
    }
}

static void normalize_ops(Arena *a, IrOp *first) {
    for (IrOp *op = first; op; op = op->next) {
        if (op->kind != OP_CONST) normalize_op(a, op);
        for (int b = 0; b < op->nblocks; b++) normalize_ops(a, op->blocks[b]->first);
    }
}

void mil_normalize_axes(IrProgram *p) {
    for (int f = 0; f < p->nfuncs; f++) {
        IrFunction *fn = p->funcs[f];
        ir_function_count_uses(fn);
        normalize_ops(p->arena, fn->first);
        ir_function_count_uses(fn);
    }
}
