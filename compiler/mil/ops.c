/* ops.c — names and signatures from the op table (ops.h), and the decoder of
 * its small signature language. */
#include "milc/ir.h"
#include "milc/ops.h"

#include <string.h>

static const char *const op_names[] = {
#define X(e, n, sig, rule) n,
    MILC_OPS(X)
#undef X
};
static const char *const op_sigs[] = {
#define X(e, n, sig, rule) sig,
    MILC_OPS(X)
#undef X
};
_Static_assert(sizeof op_names / sizeof *op_names == OP_COUNT, "op table");

int mil_opset_version(const char *s, size_t len) {
    static const struct {
        const char *prefix;
        int offset;
    } forms[] = {{"ios", 0}, {"CoreML", 10}};
    for (size_t f = 0; f < sizeof forms / sizeof *forms; f++) {
        size_t n = strlen(forms[f].prefix);
        if (len <= n || len > n + 2 || memcmp(s, forms[f].prefix, n) != 0) continue;
        int v = 0;
        for (size_t i = n; i < len; i++) {
            if (s[i] < '0' || s[i] > '9') return 0;
            v = v * 10 + (s[i] - '0');
        }
        v += forms[f].offset;
        return v >= 15 && v <= 18 ? v : 0;
    }
    return 0;
}

const char *mil_opset_name(int version) {
    static const char *const names[] = {"ios15", "ios16", "ios17", "ios18"};
    return version >= 15 && version <= 18 ? names[version - 15] : "?";
}

const char *mil_op_name(IrOpKind k) { return (unsigned)k < OP_COUNT ? op_names[k] : "?"; }
const char *mil_op_signature(IrOpKind k) { return (unsigned)k < OP_COUNT ? op_sigs[k] : ""; }

bool mil_op_lookup(const char *name, size_t len, IrOpKind *out) {
    for (int i = 0; i < OP_COUNT; i++)
        if (len > 0 && op_names[i][0] == name[0] && strncmp(op_names[i], name, len) == 0 && op_names[i][len] == 0) {
            *out = (IrOpKind)i;
            return true;
        }
    return false;
}

/* Copy [s, e) into a fixed buffer; the table's words are short by construction. */
static void copy_word(char *dst, size_t cap, const char *s, const char *e) {
    size_t n = (size_t)(e - s);
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static unsigned dt_bit(const char *s, size_t n) {
    IrDType dt;
    return ir_dtype_from_name(s, n, &dt) ? 1u << dt : 0;
}

/* A letter without braces: T, U float; I every integer; others any dtype. */
static void default_domain(MilArgSpec *s) {
    unsigned m = 0;
    if (s->group == 'T' || s->group == 'U')
        m = 1u << IR_DT_FP16 | 1u << IR_DT_FP32;
    else if (s->group == 'I')
        for (int d = 0; d < IR_DT_COUNT; d++) m |= ir_dtype_is_int((IrDType)d) ? 1u << d : 0;
    for (int v = 0; v < 4; v++) s->domain[v] = m;
}

/* "fp16,fp32;17:int8}" after the '{': the dtypes, then those an opset adds
 * from then on.  Returns the position after '}'. */
static const char *parse_domain(const char *p, MilArgSpec *s) {
    int from = 15;
    for (int v = 0; v < 4; v++) s->domain[v] = 0;
    while (*p && *p != '}') {
        if (*p == ',') {
            p++;
            continue;
        }
        if (*p == ';') {
            from = (p[1] - '0') * 10 + (p[2] - '0');
            p += 4; /* ";17:" */
            continue;
        }
        const char *w = p;
        while (*p && *p != ',' && *p != ';' && *p != '}') p++;
        for (int v = from - 15; v < 4; v++) s->domain[v] |= dt_bit(w, (size_t)(p - w));
    }
    return *p ? p + 1 : p;
}

/* ">18 " at the start of a signature: the op's first opset. */
static int since_prefix(const char **p) {
    if (**p != '>') return 15;
    int v = ((*p)[1] - '0') * 10 + ((*p)[2] - '0');
    *p += 3;
    return v;
}

int mil_op_since(IrOpKind k) {
    const char *p = mil_op_signature(k);
    return since_prefix(&p);
}

int mil_op_args(IrOpKind k, MilArgSpec *out, int max) {
    const char *p = mil_op_signature(k);
    int n = 0, op_since = since_prefix(&p);
    while (*p && n < max) {
        while (*p == ' ') p++;
        if (!*p) break;
        MilArgSpec *s = &out[n++];
        memset(s, 0, sizeof *s);
        s->dtype = -1;
        s->rank = -1;
        s->since = op_since;
        const char *q = strchr(p, ':');
        copy_word(s->name, sizeof s->name, p, q);
        p = q + 1;
        if (*p == '$') {
            s->state = true;
            p++;
        }
        const char *t = p;
        while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) p++;
        if (p - t == 1 && *t >= 'A' && *t <= 'Z') {
            s->group = *t;
            default_domain(s);
            if (*p == '{') p = parse_domain(p + 1, s);
        } else if (p - t == 3 && memcmp(t, "any", 3) == 0) {
            s->any = true;
        } else if (p - t == 4 && memcmp(t, "list", 4) == 0) {
            s->list = true;
        } else {
            IrDType dt;
            if (ir_dtype_from_name(t, (size_t)(p - t), &dt)) s->dtype = (int)dt;
        }
        for (; *p && *p != ' '; p++) {
            if (*p == '#')
                s->rank = *++p - '0';
            else if (*p == '!')
                s->is_const = true;
            else if (*p == '?')
                s->optional = true;
            else if (*p == '*')
                s->tuple = true;
            else if (*p == '>') {
                s->since = (p[1] - '0') * 10 + (p[2] - '0');
                p += 2;
            } else if (*p == '<') {
                s->until = (p[1] - '0') * 10 + (p[2] - '0');
                p += 2;
            } else if (*p == '%') {
                s->old_group = p[1];
                s->old_until = (p[2] - '0') * 10 + (p[3] - '0');
                p += 3;
            } else if (*p == '@')
                s->axis = p[1] == '+' || p[1] == '^' ? *++p : '@';
            else if (*p == '=') {
                const char *d = ++p;
                while (*p && *p != ' ') p++;
                copy_word(s->def, sizeof s->def, d, p);
                break;
            }
        }
    }
    return n;
}

void mil_op_attrs_as_args(IrOp *op) {
    if (strncmp(mil_op_name(op->kind), "constexpr_", 10) != 0) return;
    int kept = 0;
    for (int i = 0; i < op->nattrs; i++) {
        IrAttr at = op->attrs[i];
        MilArgSpec s;
        if (mil_op_arg_spec(op->kind, at.name, &s) && !ir_op_arg(op, at.name))
            ir_op_add_literal(op, at.name, at.lit)->loc = at.loc;
        else
            op->attrs[kept++] = at;
    }
    op->nattrs = kept;
}

bool mil_op_arg_spec(IrOpKind k, const char *name, MilArgSpec *out) {
    MilArgSpec specs[MIL_MAX_OP_ARGS];
    int n = mil_op_args(k, specs, MIL_MAX_OP_ARGS);
    for (int i = 0; i < n; i++)
        if (strcmp(specs[i].name, name) == 0) {
            *out = specs[i];
            return true;
        }
    return false;
}
