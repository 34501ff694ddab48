/* print.c — the IR as canonical model.mil text: the form Apple's compiler
 * writes (arguments and attributes sorted, hex floats, 4-space indent), so
 * the same program always prints to the same bytes and hashes the same. */
#include "milc/mil.h"
#include "milc/assert.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Out {
    char *p;
    size_t n, cap;
    bool tensor_scalars; /* program(1.0) dialect */
} Out;

static void put(Out *o, const char *s, size_t n) {
    if (o->n + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n + 1) cap *= 2;
        o->p = realloc(o->p, cap);
        MILC_ASSERT(o->p != NULL);
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
    o->p[o->n] = 0;
}

static void puts_(Out *o, const char *s) { put(o, s, strlen(s)); }

static void putf(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(Out *o, const char *fmt, ...) {
    char buf[128]; /* only short integer and name formats come through here */
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    MILC_ASSERT(n >= 0 && (size_t)n < sizeof buf);
    put(o, buf, (size_t)n);
}

char *mil_format_hexfloat(double v, char *buf) {
    if (isnan(v)) return strcpy(buf, "nan");
    if (isinf(v)) return strcpy(buf, v < 0 ? "-inf" : "inf");
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    char *p = buf;
    if (bits >> 63) *p++ = '-';
    int e = (int)((bits >> 52) & 0x7ff);
    uint64_t m = bits & ((UINT64_C(1) << 52) - 1);
    if (e == 0 && m == 0) {
        strcpy(p, "0x0p+0");
        return buf;
    }
    if (e == 0) { /* subnormal double: normalise so every value prints as 0x1.xxx */
        e = 1;
        while (!(m & (UINT64_C(1) << 52))) {
            m <<= 1;
            e--;
        }
        m &= (UINT64_C(1) << 52) - 1;
    }
    static const char hex[] = "0123456789abcdef";
    char digits[13];
    int n = 0;
    for (int i = 0; i < 13; i++) digits[i] = hex[(m >> (48 - 4 * i)) & 0xf];
    for (n = 13; n > 0 && digits[n - 1] == '0'; n--) {}
    memcpy(p, "0x1", 3);
    p += 3;
    if (n) {
        *p++ = '.';
        memcpy(p, digits, (size_t)n);
        p += n;
    }
    sprintf(p, "p%+d", e - 1023);
    return buf;
}

static void print_type(Out *o, const IrType *t) {
    if (t->list) {
        IrType inner = *t;
        inner.list = false;
        puts_(o, "list<");
        bool ts = o->tensor_scalars;
        o->tensor_scalars = true; /* the element is always written as a tensor */
        print_type(o, &inner);
        o->tensor_scalars = ts;
        if (t->list_len >= 0)
            putf(o, ", %lld>", (long long)t->list_len);
        else
            puts_(o, ", ?>");
        return;
    }
    if (t->state) {
        IrType inner = *t;
        inner.state = false;
        puts_(o, "state<");
        print_type(o, &inner);
        puts_(o, ">");
        return;
    }
    if (t->rank == 0 && !o->tensor_scalars) {
        puts_(o, ir_dtype_name(t->dtype));
        return;
    }
    putf(o, "tensor<%s, [", ir_dtype_name(t->dtype));
    for (int i = 0; i < t->rank; i++) {
        if (i) puts_(o, ", ");
        if (t->dims[i] < 0)
            puts_(o, "?");
        else
            putf(o, "%lld", (long long)t->dims[i]);
    }
    puts_(o, "]>");
}

static void print_elem(Out *o, const IrLiteral *l, size_t i) {
    char buf[40];
    switch (l->type.dtype) {
    case IR_DT_STRING:
        puts_(o, "\"");
        puts_(o, l->data.s[i]);
        puts_(o, "\"");
        break;
    case IR_DT_BOOL: puts_(o, l->data.b[i] ? "true" : "false"); break;
    case IR_DT_FP16: puts_(o, mil_format_hexfloat(ir_half_to_double(l->data.f16[i]), buf)); break;
    case IR_DT_FP32: puts_(o, mil_format_hexfloat(l->data.f32[i], buf)); break;
    case IR_DT_FP64: puts_(o, mil_format_hexfloat(l->data.f64[i], buf)); break;
    case IR_DT_UINT64: putf(o, "%llu", (unsigned long long)(uint64_t)l->data.i[i]); break;
    default: putf(o, "%lld", (long long)l->data.i[i]); break;
    }
}

static void print_elems(Out *o, const IrLiteral *l, int d, size_t *idx) {
    if (d == l->type.rank) {
        print_elem(o, l, (*idx)++);
        return;
    }
    puts_(o, "[");
    for (int64_t i = 0; i < l->type.dims[d]; i++) {
        if (i) puts_(o, ", ");
        print_elems(o, l, d + 1, idx);
    }
    puts_(o, "]");
}

static void print_literal(Out *o, const IrLiteral *l);

static int cmp_dict(const void *a, const void *b, void *ctx);

/* Sorts v[0..n) with cmp(&v[i], &v[j], ctx): a merge sort, since qsort_r
 * is not C11 nor POSIX.1-2008, and BSD libcs order its arguments otherwise. */
static void sort_ctx(size_t *v, size_t n, int (*cmp)(const void *, const void *, void *), void *ctx) {
    size_t *t = malloc(sizeof(size_t) * (n ? n : 1));
    MILC_ASSERT(t != NULL);
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n, i = lo, j = mid, k = lo;
            while (i < mid && j < hi) t[k++] = cmp(&v[j], &v[i], ctx) < 0 ? v[j++] : v[i++];
            while (i < mid) t[k++] = v[i++];
            while (j < hi) t[k++] = v[j++];
        }
        memcpy(v, t, sizeof(size_t) * n);
    }
    free(t);
}

/* Sort the dict's pair indices by key (strings bytewise, numbers by value). */
static void print_dict(Out *o, const IrLiteral *l) {
    IrType kt = {l->keys->type.dtype, 0, NULL, false, false, 0}, vt = {l->values->type.dtype, 0, NULL, false, false, 0};
    puts_(o, "dict<");
    print_type(o, &kt);
    puts_(o, ", ");
    print_type(o, &vt);
    puts_(o, ">({");
    size_t n = l->count;
    size_t *order = malloc(sizeof(size_t) * (n ? n : 1));
    MILC_ASSERT(order != NULL);
    for (size_t i = 0; i < n; i++) order[i] = i;
    sort_ctx(order, n, cmp_dict, (void *)l->keys);
    for (size_t i = 0; i < n; i++) {
        puts_(o, i ? ", {" : "{");
        print_elem(o, l->keys, order[i]);
        puts_(o, ", ");
        print_elem(o, l->values, order[i]);
        puts_(o, "}");
    }
    free(order);
    puts_(o, "})");
}

static int cmp_dict(const void *a, const void *b, void *ctx) {
    const IrLiteral *k = ctx;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    if (k->type.dtype == IR_DT_STRING) return strcmp(k->data.s[i], k->data.s[j]);
    if (k->type.dtype == IR_DT_UINT64 || k->type.dtype == IR_DT_INT64) {
        int64_t a1 = k->data.i[i], b1 = k->data.i[j];
        int c = k->type.dtype == IR_DT_UINT64 ? ((uint64_t)a1 > (uint64_t)b1) - ((uint64_t)a1 < (uint64_t)b1)
                                              : (a1 > b1) - (a1 < b1);
        return c ? c : (i > j) - (i < j);
    }
    double x = ir_lit_f64(k, i), y = ir_lit_f64(k, j);
    if (isnan(x) || isnan(y)) { /* NaN keys last, among themselves in input order */
        if (isnan(x) != isnan(y)) return isnan(x) ? 1 : -1;
    } else if (x != y)
        return x < y ? -1 : 1;
    return (i > j) - (i < j);
}

static void print_literal(Out *o, const IrLiteral *l) {
    if (l->kind == IR_LIT_DICT) {
        print_dict(o, l);
        return;
    }
    print_type(o, &l->type);
    puts_(o, "(");
    if (l->kind == IR_LIT_BLOBFILE) {
        IrType st = {IR_DT_STRING, 0, NULL, false, false, 0}, ut = {IR_DT_UINT64, 0, NULL, false, false, 0};
        puts_(o, "BLOBFILE(path = ");
        print_type(o, &st);
        puts_(o, "(\"");
        puts_(o, l->blob_path);
        puts_(o, "\"), offset = ");
        print_type(o, &ut);
        putf(o, "(%llu))", (unsigned long long)l->blob_offset);
    } else {
        size_t idx = 0;
        print_elems(o, l, 0, &idx);
    }
    puts_(o, ")");
}

/* A name-sorted view of arguments and attributes ("name" included). */
typedef struct Item {
    const char *name;
    const IrArg *arg;
    const IrLiteral *lit;
} Item;

static int cmp_item(const void *a, const void *b) { return strcmp(((const Item *)a)->name, ((const Item *)b)->name); }

static void print_indent(Out *o, int depth) {
    for (int i = 0; i < depth; i++) puts_(o, "    ");
}

static void print_op(Out *o, const IrOp *op, int depth);

/* An op's nested blocks: ' {', each block as `(inputs) { ops } -> (outputs);`
 * one level deeper, then '}'. */
static void print_blocks(Out *o, const IrOp *op, int depth) {
    puts_(o, " {\n");
    for (int b = 0; b < op->nblocks; b++) {
        const IrBlock *bl = op->blocks[b];
        print_indent(o, depth + 1);
        puts_(o, "(");
        for (int i = 0; i < bl->ninputs; i++) {
            if (i) puts_(o, ", ");
            print_type(o, &bl->inputs[i]->type);
            puts_(o, " ");
            puts_(o, bl->inputs[i]->name);
        }
        puts_(o, ") {\n");
        for (const IrOp *k = bl->first; k; k = k->next) print_op(o, k, depth + 2);
        print_indent(o, depth + 1);
        puts_(o, "} -> (");
        for (int i = 0; i < bl->noutputs; i++) {
            if (i) puts_(o, ", ");
            puts_(o, bl->outputs[i]->name);
        }
        puts_(o, ");\n");
    }
    print_indent(o, depth);
    puts_(o, "}");
}

static void print_op(Out *o, const IrOp *op, int depth) {
    print_indent(o, depth);
    for (int i = 0; i < op->nresults; i++) {
        if (i) puts_(o, ", ");
        print_type(o, &op->results[i]->type);
        puts_(o, " ");
        puts_(o, op->results[i]->name);
    }
    if (op->nresults) puts_(o, " = ");
    puts_(o, mil_op_name(op->kind));
    puts_(o, "(");
    int n = op->nargs > op->nattrs + 1 ? op->nargs : op->nattrs + 1;
    Item stack[32], *items = n <= 32 ? stack : malloc(sizeof(Item) * (size_t)n);
    MILC_ASSERT(items != NULL);
    for (int i = 0; i < op->nargs; i++) items[i] = (Item){op->args[i].name, &op->args[i], NULL};
    qsort(items, (size_t)op->nargs, sizeof *items, cmp_item);
    for (int i = 0; i < op->nargs; i++) {
        const IrArg *arg = items[i].arg;
        if (i) puts_(o, ", ");
        puts_(o, arg->name);
        puts_(o, " = ");
        if (arg->kind == IR_ARG_VALUE)
            puts_(o, arg->value->name);
        else if (arg->kind == IR_ARG_LITERAL)
            print_literal(o, arg->lit);
        else {
            puts_(o, "(");
            for (int j = 0; j < arg->nitems; j++) {
                if (j) puts_(o, ", ");
                puts_(o, arg->items[j]->name);
            }
            puts_(o, ")");
        }
    }
    puts_(o, ")[");
    /* Every statement is named: an op built without a name takes its first result's. */
    IrType st = {IR_DT_STRING, 0, NULL, false, false, 0};
    int m = 0;
    items[m++] = (Item){"name", NULL, NULL};
    for (int i = 0; i < op->nattrs; i++) items[m++] = (Item){op->attrs[i].name, NULL, op->attrs[i].lit};
    qsort(items, (size_t)m, sizeof *items, cmp_item);
    for (int i = 0; i < m; i++) {
        if (i) puts_(o, ", ");
        puts_(o, items[i].name);
        puts_(o, " = ");
        if (items[i].lit)
            print_literal(o, items[i].lit);
        else {
            print_type(o, &st);
            puts_(o, "(\"");
            puts_(o, op->name ? op->name : op->nresults ? op->results[0]->name : mil_op_name(op->kind));
            puts_(o, "\")");
        }
    }
    puts_(o, "]");
    if (op->nblocks) print_blocks(o, op, depth);
    puts_(o, ";\n");
    if (items != stack) free(items);
}

static void print_function(Out *o, const IrFunction *f) {
    puts_(o, "    func ");
    puts_(o, f->name);
    puts_(o, "<");
    puts_(o, f->opset);
    puts_(o, ">(");
    for (int i = 0; i < f->ninputs; i++) {
        if (i) puts_(o, ", ");
        print_type(o, &f->inputs[i]->type);
        puts_(o, " ");
        puts_(o, f->inputs[i]->name);
    }
    puts_(o, ")");
    if (f->attr_text) {
        puts_(o, " ");
        puts_(o, f->attr_text);
    }
    puts_(o, " {\n");
    IR_FOR_EACH_OP(op, f) print_op(o, op, 2);
    puts_(o, "    } -> (");
    for (int i = 0; i < f->noutputs; i++) {
        if (i) puts_(o, ", ");
        puts_(o, f->outputs[i]->name);
    }
    puts_(o, ");\n");
}

char *mil_print(const IrProgram *p, size_t *len) {
    Out o = {0};
    o.tensor_scalars = ir_program_tensor_scalars(p);
    putf(&o, "program(%d.%d)\n", p->major, p->minor);
    if (p->nattrs) {
        Item *items = malloc(sizeof(Item) * (size_t)p->nattrs);
        MILC_ASSERT(items != NULL);
        for (int i = 0; i < p->nattrs; i++) items[i] = (Item){p->attrs[i].name, NULL, p->attrs[i].lit};
        qsort(items, (size_t)p->nattrs, sizeof *items, cmp_item);
        puts_(&o, "[");
        for (int i = 0; i < p->nattrs; i++) {
            if (i) puts_(&o, ", ");
            puts_(&o, items[i].name);
            puts_(&o, " = ");
            print_literal(&o, items[i].lit);
        }
        puts_(&o, "]\n");
        free(items);
    }
    puts_(&o, "{\n");
    for (int i = 0; i < p->nfuncs; i++) print_function(&o, p->funcs[i]);
    puts_(&o, "}\n");
    if (len) *len = o.n;
    return o.p;
}
