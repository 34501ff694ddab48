/* expr.c — the template expression language: integers, floats and strings,
 * + - * / // % comparisons, and/or/not, ?:, a few functions, and {expr}
 * interpolation in text.  Evaluated while parsing: expressions are one-liners
 * in attributes, so an AST would buy nothing.  Grammar in mil-templates/README.md. */
#include "gen_internal.h"

#include "milc/assert.h"
#include <stdarg.h>

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Scope *scope_new(Arena *a, Scope *parent) {
    Scope *s = ARENA_NEW(a, Scope);
    s->parent = parent;
    return s;
}

void scope_set(Arena *a, Scope *s, const char *name, Value v) {
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->vars[i].name, name) == 0) {
            s->vars[i].v = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 16;
        Var *nv = ARENA_ARRAY(a, Var, cap);
        if (s->n) memcpy(nv, s->vars, sizeof(Var) * (size_t)s->n);
        s->vars = nv;
        s->cap = cap;
    }
    s->vars[s->n++] = (Var){arena_strdup(a, name), v};
}

const Value *scope_get(const Scope *s, const char *name) {
    for (; s; s = s->parent)
        for (int i = 0; i < s->n; i++)
            if (strcmp(s->vars[i].name, name) == 0) return &s->vars[i].v;
    return NULL;
}

const char *value_str(Arena *a, Value v) {
    switch (v.kind) {
    case VAL_INT: return arena_printf(a, "%" PRId64, v.i);
    case VAL_FLOAT: return arena_printf(a, "%a", v.f);
    case VAL_STR: return v.s;
    }
    return "";
}

bool value_truthy(Value v) {
    switch (v.kind) {
    case VAL_INT: return v.i != 0;
    case VAL_FLOAT: return v.f != 0;
    case VAL_STR: return v.s[0] != 0;
    }
    return false;
}

bool value_parse(Arena *a, GenParamType type, const char *text, Value *out) {
    char *end;
    errno = 0;
    switch (type) {
    case GEN_PARAM_INT: {
        long long v = strtoll(text, &end, 10);
        if (end == text || *end || errno) return false;
        *out = (Value){.kind = VAL_INT, .i = v};
        return true;
    }
    case GEN_PARAM_FLOAT: {
        double v = strtod(text, &end);
        if (end == text || *end || errno || !isfinite(v)) return false;
        *out = (Value){.kind = VAL_FLOAT, .f = v};
        return true;
    }
    default: *out = (Value){.kind = VAL_STR, .s = arena_strdup(a, text)}; return true;
    }
}

/* ---- parser/evaluator ---- */

typedef struct P {
    ExprCtx *x;
    const Scope *scope;
    const char *src, *p;
    bool failed;
} P;

static void perr(P *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void perr(P *p, const char *fmt, ...) {
    if (p->failed) return; /* the first error is the useful one */
    p->failed = true;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    diag_error(p->x->diag, p->x->loc, "%s (in '%s')", msg, p->src);
}

static void skip(P *p) {
    while (isspace((unsigned char)*p->p)) p->p++;
}

static bool accept(P *p, const char *tok) {
    skip(p);
    size_t n = strlen(tok);
    if (strncmp(p->p, tok, n) != 0) return false;
    /* keywords must not be the start of a longer identifier */
    if (isalpha((unsigned char)tok[0]) && (isalnum((unsigned char)p->p[n]) || p->p[n] == '_')) return false;
    p->p += n;
    return true;
}

static Value v_int(int64_t i) { return (Value){.kind = VAL_INT, .i = i}; }

/* Integer a op b, checked: a result outside int64 (INT64_MIN / -1 among
 * them, which traps on x86) is an error in the template, not a wrapped
 * shape.  Division and modulo by zero are refused before this.  false with
 * the error reported. */
static bool int_op(P *p, int op, int64_t a, int64_t b, int64_t *r) {
    bool over;
    switch (op) {
    case '+': over = __builtin_add_overflow(a, b, r); break;
    case '-': over = __builtin_sub_overflow(a, b, r); break;
    case '*': over = __builtin_mul_overflow(a, b, r); break;
    default: /* '/', '%', 'f' (floor division): only INT64_MIN by -1 overflows */
        if (a == INT64_MIN && b == -1) {
            over = op != '%';
            *r = 0;
            break;
        }
        over = false;
        *r = op == '%' ? a % b : op == 'f' ? a / b - ((a % b != 0) && ((a < 0) != (b < 0))) : a / b;
        break;
    }
    const char *name = op == 'f' ? "//" : op == '+' ? "+" : op == '-' ? "-" : op == '*' ? "*" : op == '/' ? "/" : "%";
    if (over) perr(p, "integer overflow in %" PRId64 " %s %" PRId64, a, name, b);
    return !over;
}
static Value v_float(double f) { return (Value){.kind = VAL_FLOAT, .f = f}; }
static double as_f(Value v) { return v.kind == VAL_INT ? (double)v.i : v.f; }

static const char *kind_name(ValKind k) { return k == VAL_INT ? "int" : k == VAL_FLOAT ? "float" : "string"; }

static Value expr(P *p);

/* Round to the nearest fp16 value (ties to even), in double. */
static double round_f16(double v) {
    if (!isfinite(v) || v == 0) return v;
    double a = fabs(v);
    if (a >= 65520.0) return v > 0 ? INFINITY : -INFINITY;
    int e;
    frexp(a, &e);         /* a = m * 2^e, m in [0.5, 1) */
    int q = e - 11;       /* 11 significant bits */
    if (q < -24) q = -24; /* subnormal spacing 2^-24 */
    double r = nearbyint(ldexp(a, -q));
    return copysign(ldexp(r, q), v);
}

static Value call(P *p, const char *fn, Value *args, int n) {
#define NEED(k)                                                                                                        \
    do {                                                                                                               \
        if (n != (k)) {                                                                                                \
            perr(p, "%s() takes %d argument%s, got %d", fn, (k), (k) == 1 ? "" : "s", n);                              \
            return v_int(0);                                                                                           \
        }                                                                                                              \
    } while (0)
    for (int i = 0; i < n; i++)
        if (args[i].kind == VAL_STR && strcmp(fn, "str") != 0) {
            perr(p, "%s() takes numbers, not a string", fn);
            return v_int(0);
        }
    if (!strcmp(fn, "str")) {
        NEED(1);
        return (Value){.kind = VAL_STR, .s = value_str(p->x->arena, args[0])};
    }
    if (!strcmp(fn, "max") || !strcmp(fn, "min")) {
        if (n < 1) {
            perr(p, "%s() needs arguments", fn);
            return v_int(0);
        }
        Value r = args[0];
        bool mx = fn[1] == 'a';
        for (int i = 1; i < n; i++) {
            if (r.kind == VAL_INT && args[i].kind == VAL_INT) {
                if (mx ? args[i].i > r.i : args[i].i < r.i) r = args[i];
            } else {
                double a = as_f(r), b = as_f(args[i]);
                r = v_float(mx ? fmax(a, b) : fmin(a, b));
            }
        }
        return r;
    }
    if (!strcmp(fn, "align")) { /* round up to a multiple */
        NEED(2);
        if (args[0].kind != VAL_INT || args[1].kind != VAL_INT || args[1].i <= 0) {
            perr(p, "align() takes two integers, the second positive");
            return v_int(0);
        }
        int64_t r;
        if (!int_op(p, '+', args[0].i, args[1].i - 1, &r)) return v_int(0);
        return v_int(r / args[1].i * args[1].i);
    }
    if (!strcmp(fn, "sqrt")) {
        NEED(1);
        return v_float(sqrt(as_f(args[0])));
    }
    if (!strcmp(fn, "rsqrt")) {
        NEED(1);
        return v_float(1.0 / sqrt(as_f(args[0])));
    }
    if (!strcmp(fn, "f16")) {
        NEED(1);
        return v_float(round_f16(as_f(args[0])));
    }
    if (!strcmp(fn, "float")) {
        NEED(1);
        return v_float(as_f(args[0]));
    }
    if (!strcmp(fn, "int")) {
        NEED(1);
        if (args[0].kind == VAL_INT) return args[0];
        /* A float outside int64 (or NaN) has no integer: converting it is undefined. */
        if (!(args[0].f > -9223372036854775808.0 && args[0].f < 9223372036854775808.0)) {
            perr(p, "int(%g): out of the integer range", args[0].f);
            return v_int(0);
        }
        return v_int((int64_t)args[0].f);
    }
    perr(p, "unknown function '%s'", fn);
    return v_int(0);
#undef NEED
}

static Value primary(P *p) {
    skip(p);
    const char *s = p->p;
    if (*s == '(') {
        p->p++;
        Value v = expr(p);
        if (!accept(p, ")")) perr(p, "expected ')'");
        return v;
    }
    if (*s == '\'' || *s == '"') {
        const char *e = strchr(s + 1, *s);
        if (!e) {
            perr(p, "unterminated string");
            return v_int(0);
        }
        p->p = e + 1;
        return (Value){.kind = VAL_STR, .s = arena_strndup(p->x->arena, s + 1, (size_t)(e - s - 1))};
    }
    if (isdigit((unsigned char)*s) || (*s == '.' && isdigit((unsigned char)s[1]))) {
        char *e1, *e2;
        errno = 0;
        long long i = strtoll(s, &e1, 10);
        double f = strtod(s, &e2);
        if (e2 > e1) {
            p->p = e2;
            return v_float(f);
        }
        if (errno) {
            perr(p, "integer out of range");
            return v_int(0);
        }
        p->p = e1;
        return v_int(i);
    }
    if (isalpha((unsigned char)*s) || *s == '_') {
        const char *e = s;
        while (isalnum((unsigned char)*e) || *e == '_') e++;
        char name[64];
        size_t n = (size_t)(e - s);
        if (n >= sizeof name) {
            perr(p, "name too long");
            return v_int(0);
        }
        memcpy(name, s, n);
        name[n] = 0;
        p->p = e;
        skip(p);
        if (*p->p == '(') {
            p->p++;
            Value args[8];
            int na = 0;
            skip(p);
            if (*p->p != ')') {
                do {
                    if (na == 8) {
                        perr(p, "too many arguments");
                        return v_int(0);
                    }
                    args[na++] = expr(p);
                } while (accept(p, ","));
            }
            if (!accept(p, ")")) {
                perr(p, "expected ')' after arguments of %s()", name);
                return v_int(0);
            }
            if (p->failed) return v_int(0);
            return call(p, name, args, na);
        }
        const Value *v = scope_get(p->scope, name);
        if (!v) {
            perr(p, "unknown name '%s'", name);
            return v_int(0);
        }
        return *v;
    }
    if (*s == 0)
        perr(p, "unexpected end of expression");
    else
        perr(p, "unexpected '%c'", *s);
    return v_int(0);
}

static Value unary(P *p) {
    if (accept(p, "-")) {
        Value v = unary(p);
        if (v.kind == VAL_STR) {
            perr(p, "cannot negate a string");
            return v;
        }
        if (v.kind == VAL_INT && !int_op(p, '-', 0, v.i, &v.i)) return v;
        return v.kind == VAL_INT ? v : v_float(-v.f);
    }
    if (accept(p, "not") || accept(p, "!")) return v_int(!value_truthy(unary(p)));
    return primary(p);
}

static Value mul(P *p) {
    Value a = unary(p);
    for (;;) {
        int op;
        if (accept(p, "//"))
            op = 'f';
        else if (accept(p, "*"))
            op = '*';
        else if (accept(p, "/"))
            op = '/';
        else if (accept(p, "%"))
            op = '%';
        else
            return a;
        Value b = unary(p);
        if (p->failed) return a;
        if (a.kind == VAL_STR || b.kind == VAL_STR) {
            perr(p, "arithmetic on a string");
            return a;
        }
        if (a.kind == VAL_INT && b.kind == VAL_INT) {
            if (op != '*' && b.i == 0) {
                perr(p, "division by zero");
                return a;
            }
            if (op == '/' && b.i != -1 && a.i % b.i != 0) {
                /* Exact division is what shapes need; a silent floor would
                 * produce a program with the wrong shapes. */
                perr(p, "%" PRId64 " is not divisible by %" PRId64, a.i, b.i);
                return a;
            }
            if (!int_op(p, op, a.i, b.i, &a.i)) return a;
        } else {
            double x = as_f(a), y = as_f(b);
            if (op == '*')
                a = v_float(x * y);
            else if (op == '/')
                a = v_float(x / y);
            else if (op == 'f')
                a = v_float(floor(x / y));
            else
                a = v_float(fmod(x, y));
        }
    }
}

static Value add(P *p) {
    Value a = mul(p);
    for (;;) {
        int op;
        if (accept(p, "+"))
            op = '+';
        else if (accept(p, "-"))
            op = '-';
        else
            return a;
        Value b = mul(p);
        if (p->failed) return a;
        if (op == '+' && (a.kind == VAL_STR || b.kind == VAL_STR)) { /* concatenation */
            a = (Value){.kind = VAL_STR,
                        .s = arena_printf(p->x->arena, "%s%s", value_str(p->x->arena, a), value_str(p->x->arena, b))};
            continue;
        }
        if (a.kind == VAL_STR || b.kind == VAL_STR) {
            perr(p, "arithmetic on a string");
            return a;
        }
        if (a.kind == VAL_INT && b.kind == VAL_INT) {
            if (!int_op(p, op, a.i, b.i, &a.i)) return a;
        } else
            a = v_float(op == '+' ? as_f(a) + as_f(b) : as_f(a) - as_f(b));
    }
}

static Value cmp(P *p) {
    Value a = add(p);
    const char *ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    for (int k = 0; k < 6; k++) {
        if (!accept(p, ops[k])) continue;
        Value b = add(p);
        if (p->failed) return a;
        int c;
        if (a.kind == VAL_STR || b.kind == VAL_STR) {
            if (a.kind != b.kind) {
                perr(p, "cannot compare %s with %s", kind_name(a.kind), kind_name(b.kind));
                return a;
            }
            c = strcmp(a.s, b.s);
        } else if (a.kind == VAL_INT && b.kind == VAL_INT) {
            c = (a.i > b.i) - (a.i < b.i);
        } else {
            c = (as_f(a) > as_f(b)) - (as_f(a) < as_f(b));
        }
        bool r = k == 0 ? c == 0 : k == 1 ? c != 0 : k == 2 ? c <= 0 : k == 3 ? c >= 0 : k == 4 ? c < 0 : c > 0;
        return v_int(r);
    }
    return a;
}

static Value and_(P *p) {
    Value a = cmp(p);
    while (accept(p, "and") || accept(p, "&&")) {
        Value b = cmp(p);
        a = v_int(value_truthy(a) && value_truthy(b));
    }
    return a;
}

static Value or_(P *p) {
    Value a = and_(p);
    while (accept(p, "or") || accept(p, "||")) {
        Value b = and_(p);
        a = v_int(value_truthy(a) || value_truthy(b));
    }
    return a;
}

static Value expr(P *p) {
    Value c = or_(p);
    if (!accept(p, "?")) return c;
    Value a = expr(p);
    if (!accept(p, ":")) {
        perr(p, "expected ':' in ?:");
        return c;
    }
    Value b = expr(p);
    return value_truthy(c) ? a : b;
}

bool expr_eval(ExprCtx *x, const Scope *s, const char *text, Value *out) {
    P p = {x, s, text, text, false};
    Value v = expr(&p);
    skip(&p);
    if (!p.failed && *p.p) perr(&p, "unexpected '%s'", p.p);
    if (p.failed) return false;
    *out = v;
    return true;
}

char *expr_interp(ExprCtx *x, const Scope *s, const char *text) {
    size_t cap = strlen(text) * 2 + 64, n = 0;
    char *buf = malloc(cap);
    MILC_ASSERT(buf != NULL);
    for (const char *q = text; *q;) {
        const char *piece = NULL;
        size_t plen = 0;
        if (q[0] == '{' && q[1] == '{') {
            piece = "{";
            plen = 1;
            q += 2;
        } else if (q[0] == '}' && q[1] == '}') {
            piece = "}";
            plen = 1;
            q += 2;
        } else if (q[0] == '{') {
            const char *e = strchr(q, '}');
            if (!e) {
                diag_error(x->diag, x->loc, "unclosed '{' in '%s'", text);
                free(buf);
                return NULL;
            }
            char *src = arena_strndup(x->arena, q + 1, (size_t)(e - q - 1));
            Value v;
            if (!expr_eval(x, s, src, &v)) {
                free(buf);
                return NULL;
            }
            piece = value_str(x->arena, v);
            plen = strlen(piece);
            q = e + 1;
        } else if (q[0] == '}') {
            diag_error(x->diag, x->loc, "stray '}' in '%s' (write '}}' for a brace)", text);
            free(buf);
            return NULL;
        } else {
            const char *e = q;
            while (*e && *e != '{' && *e != '}') e++;
            piece = q;
            plen = (size_t)(e - q);
            q = e;
        }
        if (n + plen + 1 > cap) {
            while (n + plen + 1 > cap) cap *= 2;
            buf = realloc(buf, cap);
            MILC_ASSERT(buf != NULL);
        }
        memcpy(buf + n, piece, plen);
        n += plen;
    }
    buf[n] = 0;
    char *r = arena_strndup(x->arena, buf, n);
    free(buf);
    return r;
}
