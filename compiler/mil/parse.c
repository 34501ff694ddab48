/* parse.c — lexer and recursive-descent parser for the model.mil text form
 * (docs/MIL.md) into the IR.  One function per grammar rule, the rule in a
 * comment above it.  Errors go to the DiagSink; a bad statement is skipped to
 * its ';' so one run reports every error. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l: number parsing must not depend on the process locale */
#endif
#include "milc/mil.h"
#include "milc/assert.h"

#include <errno.h>
#include <fenv.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lexer ---- */

typedef enum TokKind {
    TK_EOF,
    TK_IDENT,
    TK_NUMBER,
    TK_STRING,
    TK_LPAREN,
    TK_RPAREN,
    TK_LBRACK,
    TK_RBRACK,
    TK_LBRACE,
    TK_RBRACE,
    TK_LT,
    TK_GT,
    TK_COMMA,
    TK_EQ,
    TK_SEMI,
    TK_ARROW,
    TK_MINUS,
    TK_QUESTION,
} TokKind;

typedef struct Token {
    TokKind kind;
    const char *s; /* into the source; a string's s/len exclude the quotes */
    int len;
    int line, col;
} Token;

typedef struct Parser {
    Arena *a;
    DiagSink *d;
    const char *file;
    /* Tokens are lexed on demand (so diagnostics come out in source order)
     * into fixed chunks that never move: Token pointers stay valid. */
    Token **chunks;
    int nchunks, ntok, pos;
    const char *lp, *end, *line_start; /* lexer position */
    int line;
    bool lex_done;
    IrProgram *prog;
    IrFunction *fn;
    IrBlock *blk; /* the nested block being parsed; NULL at function level */
    int block_depth;
    IrValue **defs; /* defined inside nested blocks (defs_push) */
    size_t ndefs, cap_defs;
    IrValue **scope; /* open-addressing name -> value map of the current function */
    size_t scope_cap, scope_n;
    locale_t c_locale;
    bool failed;
    bool eof_reported;
    int depth; /* literal nesting */
} Parser;

static SrcLoc tok_loc(const Parser *P, const Token *t) { return (SrcLoc){P->file, t->line, t->col}; }

static void perr(Parser *P, const Token *t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void perr(Parser *P, const Token *t, const char *fmt, ...) {
    /* Running out of input breaks every enclosing rule at once: say it once. */
    if (t->kind == TK_EOF && P->eof_reported) return;
    if (t->kind == TK_EOF) P->eof_reported = true;
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(P->d, DIAG_ERROR, tok_loc(P, t), fmt, ap);
    va_end(ap);
    P->failed = true;
}

enum { TOK_CHUNK = 1024 };

static Token *tok_at(const Parser *P, int i) { return &P->chunks[i / TOK_CHUNK][i % TOK_CHUNK]; }

static void push_tok(Parser *P, TokKind k, const char *s, int len, int line, int col) {
    if (P->ntok == P->nchunks * TOK_CHUNK) {
        P->chunks = realloc(P->chunks, sizeof(Token *) * (size_t)(P->nchunks + 1));
        MILC_ASSERT(P->chunks != NULL);
        P->chunks[P->nchunks] = malloc(sizeof(Token) * TOK_CHUNK);
        MILC_ASSERT(P->chunks[P->nchunks] != NULL);
        P->nchunks++;
    }
    *tok_at(P, P->ntok++) = (Token){k, s, len, line, col};
}

static bool is_ident_start(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_ident_char(int c) { return is_ident_start(c) || is_digit(c); }
bool mil_is_identifier(const char *name) {
    if (!name || !is_ident_start((unsigned char)name[0])) return false;
    for (const char *p = name + 1; *p; p++)
        if (!is_ident_char((unsigned char)*p)) return false;
    return true;
}

static bool is_hex(int c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/* Lex one more token (or EOF) into the token array. */
static void lex_one(Parser *P) {
    const char *p = P->lp, *end = P->end, *line_start = P->line_start;
    int line = P->line, before = P->ntok;
    while (p < end && P->ntok == before) {
        int c = (unsigned char)*p;
        int col = (int)(p - line_start) + 1;
        Token here = {TK_STRING, p, 0, line, col}; /* any kind but EOF */
        if (c == '\n') {
            p++;
            line++;
            line_start = p;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') {
            p++;
            continue;
        }
        if (c == '/' && p + 1 < end && p[1] == '/') {
            while (p < end && *p != '\n') p++;
            continue;
        }
        if (is_ident_start(c)) {
            const char *s = p;
            while (p < end && is_ident_char((unsigned char)*p)) p++;
            push_tok(P, TK_IDENT, s, (int)(p - s), line, col);
            continue;
        }
        if (is_digit(c) || (c == '.' && p + 1 < end && is_digit((unsigned char)p[1]))) {
            const char *s = p;
            if (c == '0' && p + 1 < end && (p[1] == 'x' || p[1] == 'X')) {
                p += 2;
                while (p < end && (is_hex((unsigned char)*p) || *p == '.')) p++;
                if (p < end && (*p == 'p' || *p == 'P')) {
                    p++;
                    if (p < end && (*p == '+' || *p == '-')) p++;
                    while (p < end && is_digit((unsigned char)*p)) p++;
                }
            } else {
                while (p < end && (is_digit((unsigned char)*p) || *p == '.')) p++;
                if (p < end && (*p == 'e' || *p == 'E')) {
                    p++;
                    if (p < end && (*p == '+' || *p == '-')) p++;
                    while (p < end && is_digit((unsigned char)*p)) p++;
                }
            }
            push_tok(P, TK_NUMBER, s, (int)(p - s), line, col);
            continue;
        }
        if (c == '"') {
            const char *s = ++p;
            bool bad = false;
            while (p < end && *p != '"' && *p != '\n') {
                unsigned char b = (unsigned char)*p;
                if (!bad && (b < 0x20 || b > 0x7e || b == '\\')) {
                    Token at = {TK_STRING, p, 1, line, (int)(p - line_start) + 1};
                    perr(P, &at,
                         "byte 0x%02x is not allowed in a string: milc accepts printable ASCII "
                         "other than '\"' and '\\'",
                         b);
                    bad = true; /* one report per string is enough */
                }
                p++;
            }
            if (p >= end || *p != '"') {
                perr(P, &here, "unterminated string");
                push_tok(P, TK_STRING, s, (int)(p - s), line, col);
                continue;
            }
            push_tok(P, TK_STRING, s, (int)(p - s), line, col);
            p++;
            continue;
        }
        TokKind k;
        int n = 1;
        switch (c) {
        case '(': k = TK_LPAREN; break;
        case ')': k = TK_RPAREN; break;
        case '[': k = TK_LBRACK; break;
        case ']': k = TK_RBRACK; break;
        case '{': k = TK_LBRACE; break;
        case '}': k = TK_RBRACE; break;
        case '<': k = TK_LT; break;
        case '>': k = TK_GT; break;
        case ',': k = TK_COMMA; break;
        case '=': k = TK_EQ; break;
        case ';': k = TK_SEMI; break;
        case '?': k = TK_QUESTION; break;
        case '-':
            if (p + 1 < end && p[1] == '>') {
                k = TK_ARROW;
                n = 2;
            } else
                k = TK_MINUS;
            break;
        default:
            if (c >= 0x21 && c <= 0x7e)
                perr(P, &here, "unexpected character '%c'", c);
            else
                perr(P, &here, "unexpected byte 0x%02x", c);
            p++;
            continue;
        }
        push_tok(P, k, p, n, line, col);
        p += n;
    }
    if (p >= end && P->ntok == before) {
        push_tok(P, TK_EOF, p, 0, line, (int)(p - line_start) + 1);
        P->lex_done = true;
    }
    P->lp = p;
    P->line_start = line_start;
    P->line = line;
}

/* ---- token helpers ---- */

static Token *peek_at(Parser *P, int k) {
    int i = P->pos + k;
    while (P->ntok <= i && !P->lex_done) lex_one(P);
    return tok_at(P, i < P->ntok ? i : P->ntok - 1);
}
static Token *peek(Parser *P) { return peek_at(P, 0); }
static Token *next(Parser *P) {
    Token *t = peek(P);
    if (t->kind != TK_EOF) P->pos++;
    return t;
}
/* word is always a string literal: its length is a compile-time constant. */
#define tok_is(t, word) tok_is_n((t), (word), sizeof(word) - 1)
static bool tok_is_n(const Token *t, const char *word, size_t n) {
    return t->kind == TK_IDENT && (size_t)t->len == n && memcmp(t->s, word, n) == 0;
}

static const char *kind_text(TokKind k) {
    static const char *const names[] = {
        "end of input", "a name", "a number", "a string", "'('", "')'", "'['",  "']'", "'{'",
        "'}'",          "'<'",    "'>'",      "','",      "'='", "';'", "'->'", "'-'", "'?'",
    };
    return names[k];
}

/* "'name'" or "';'" or "end of input", for "expected X, found Y". */
static const char *tok_text(const Token *t, char *buf, size_t size) {
    if (t->kind == TK_EOF) return "end of input";
    if (t->kind == TK_STRING) return "a string";
    int n = t->len > 24 ? 24 : t->len;
    snprintf(buf, size, "'%.*s%s'", n, t->s, t->len > n ? "..." : "");
    return buf;
}

static bool expect(Parser *P, TokKind k) {
    Token *t = peek(P);
    if (t->kind == k) {
        next(P);
        return true;
    }
    char buf[48];
    perr(P, t, "expected %s, found %s", kind_text(k), tok_text(t, buf, sizeof buf));
    return false;
}

static bool expect_word(Parser *P, const char *word) {
    Token *t = peek(P);
    if (tok_is_n(t, word, strlen(word))) {
        next(P);
        return true;
    }
    char buf[48];
    perr(P, t, "expected '%s', found %s", word, tok_text(t, buf, sizeof buf));
    return false;
}

static Token *expect_ident(Parser *P, const char *what) {
    Token *t = peek(P);
    if (t->kind == TK_IDENT) return next(P);
    char buf[48];
    perr(P, t, "expected %s, found %s", what, tok_text(t, buf, sizeof buf));
    return NULL;
}

static char *tok_str(Parser *P, const Token *t) { return arena_strndup(P->a, t->s, (size_t)t->len); }

/* ---- scope: name -> value, per function ---- */

static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static IrValue **scope_slot(Parser *P, const char *s, size_t n) {
    size_t mask = P->scope_cap - 1, i = (size_t)hash_name(s, n) & mask;
    while (P->scope[i]) {
        const char *k = P->scope[i]->name;
        if (k[0] == s[0] && strncmp(k, s, n) == 0 && k[n] == 0) break;
        i = (i + 1) & mask;
    }
    return &P->scope[i];
}

static void scope_reset(Parser *P) {
    if (!P->scope) {
        P->scope_cap = 256;
        P->scope = malloc(sizeof(IrValue *) * P->scope_cap);
        MILC_ASSERT(P->scope != NULL);
    }
    memset(P->scope, 0, sizeof(IrValue *) * P->scope_cap);
    P->scope_n = 0;
}

static IrValue *scope_find(Parser *P, const Token *t) { return *scope_slot(P, t->s, (size_t)t->len); }

static void defs_push(Parser *P, IrValue *v);

/* Define v; reports a redefinition and returns false if the name is taken. */
static bool scope_define(Parser *P, IrValue *v, const Token *t) {
    IrValue **slot = scope_slot(P, t->s, (size_t)t->len);
    if (*slot) {
        perr(P, t, "redefinition of '%s'", v->name);
        diag_note(P->d, (*slot)->loc, "'%s' was first defined here", v->name);
        return false;
    }
    *slot = v;
    defs_push(P, v);
    if (++P->scope_n * 2 > P->scope_cap) { /* keep the load under one half */
        IrValue **old = P->scope;
        size_t oldcap = P->scope_cap;
        P->scope_cap *= 2;
        P->scope = calloc(P->scope_cap, sizeof(IrValue *));
        MILC_ASSERT(P->scope != NULL);
        for (size_t i = 0; i < oldcap; i++)
            if (old[i]) *scope_slot(P, old[i]->name, strlen(old[i]->name)) = old[i];
        free(old);
    }
    return true;
}

/* Take v's name out of the table (backward-shift deletion: every later
 * entry of the probe run moves up when its home slot allows). */
static void scope_remove(Parser *P, const IrValue *v) {
    size_t mask = P->scope_cap - 1;
    IrValue **slot = scope_slot(P, v->name, strlen(v->name));
    if (*slot != v) return;
    size_t i = (size_t)(slot - P->scope), j = i;
    P->scope[i] = NULL;
    P->scope_n--;
    for (;;) {
        j = (j + 1) & mask;
        if (!P->scope[j]) return;
        size_t k = (size_t)hash_name(P->scope[j]->name, strlen(P->scope[j]->name)) & mask;
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (stays) continue;
        P->scope[i] = P->scope[j];
        P->scope[j] = NULL;
        i = j;
    }
}

/* Values defined inside nested blocks, in order, so a block's names leave
 * the scope when it closes (sibling blocks may reuse them). */
static void defs_push(Parser *P, IrValue *v) {
    if (!P->blk) return;
    if (P->ndefs == P->cap_defs) {
        P->cap_defs = P->cap_defs ? 2 * P->cap_defs : 64;
        P->defs = realloc(P->defs, sizeof *P->defs * P->cap_defs);
        MILC_ASSERT(P->defs != NULL);
    }
    P->defs[P->ndefs++] = v;
}

static void defs_pop_to(Parser *P, size_t mark) {
    while (P->ndefs > mark) scope_remove(P, P->defs[--P->ndefs]);
}

/* ---- types ---- */

static bool parse_dtype(Parser *P, IrDType *dt) {
    Token *t = expect_ident(P, "a dtype");
    if (!t) return false;
    if (ir_dtype_from_name(t->s, (size_t)t->len, dt)) return true;
    perr(P, t, "unknown dtype '%.*s'", t->len, t->s);
    return false;
}

enum { MAX_DIM_LOG2 = 40 };

/* Parse a dimension token into *out; false (with an error) if not one.
 * Dimensions are capped at 2^40 so shape arithmetic stays far from int64
 * overflow (2^40 elements of fp16 is already 2 TiB). */
static bool parse_count(Parser *P, const Token *t, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < t->len; i++) {
        if (!is_digit((unsigned char)t->s[i])) {
            perr(P, t, "expected a dimension, found '%.*s'", t->len, t->s);
            return false;
        }
        v = v * 10 + (t->s[i] - '0');
        if (v > (INT64_C(1) << MAX_DIM_LOG2)) {
            perr(P, t, "dimension %.*s is larger than 2^%d", t->len, t->s, MAX_DIM_LOG2);
            return false;
        }
    }
    *out = v;
    return true;
}

/* type := 'tensor' '<' DTYPE ',' '[' [dim (',' dim)*] ']' '>' | DTYPE
 *       | 'state' '<' 'tensor' '<' ... '>' '>'    (ios18 states)
 *       | 'list' '<' type ',' dim '>'            (make_list's value: element type, length)
 * dim  := NUMBER | '?' */
static bool parse_type(Parser *P, IrType *ty) {
    if (tok_is(peek(P), "list") && peek_at(P, 1)->kind == TK_LT) {
        Token *start = next(P);
        next(P);
        /* Checked before recursing: nested list<list<...>> must not be able to
         * recurse as deep as the input is long. */
        if (tok_is(peek(P), "list") || tok_is(peek(P), "state")) {
            perr(P, start, "a list holds tensors, not lists or states");
            return false;
        }
        if (!parse_type(P, ty) || !expect(P, TK_COMMA)) return false;
        Token *t = next(P);
        ty->list_len = IR_DIM_DYNAMIC;
        if (t->kind == TK_NUMBER) {
            if (!parse_count(P, t, &ty->list_len)) return false;
        } else if (t->kind != TK_QUESTION) {
            char buf[48];
            perr(P, t, "expected the list's length (a number or ?), found %s", tok_text(t, buf, sizeof buf));
            return false;
        }
        if (!expect(P, TK_GT)) return false;
        ty->list = true;
        return true;
    }
    if (tok_is(peek(P), "state") && peek_at(P, 1)->kind == TK_LT) {
        next(P);
        next(P);
        Token *t = peek(P);
        if (!tok_is(t, "tensor")) {
            char buf[48];
            perr(P, t, "expected a tensor type inside state<...>, found %s", tok_text(t, buf, sizeof buf));
            return false;
        }
        if (!parse_type(P, ty) || !expect(P, TK_GT)) return false;
        ty->state = true;
        return true;
    }
    if (tok_is(peek(P), "tensor") && peek_at(P, 1)->kind == TK_LT) {
        next(P);
        next(P);
        IrDType dt;
        if (!parse_dtype(P, &dt) || !expect(P, TK_COMMA) || !expect(P, TK_LBRACK)) return false;
        int64_t dims[64];
        int rank = 0;
        if (peek(P)->kind != TK_RBRACK) {
            for (;;) {
                Token *t = next(P);
                if (rank == 64) {
                    perr(P, t, "rank above 64");
                    return false;
                }
                if (t->kind == TK_QUESTION)
                    dims[rank++] = IR_DIM_DYNAMIC;
                else if (t->kind == TK_NUMBER) {
                    if (!parse_count(P, t, &dims[rank++])) return false;
                } else {
                    char buf[48];
                    perr(P, t, "expected a dimension, found %s", tok_text(t, buf, sizeof buf));
                    return false;
                }
                if (peek(P)->kind != TK_COMMA) break;
                next(P);
            }
        }
        if (!expect(P, TK_RBRACK) || !expect(P, TK_GT)) return false;
        *ty = ir_type_make(P->a, dt, rank, dims);
        return true;
    }
    IrDType dt;
    if (!parse_dtype(P, &dt)) return false;
    *ty = (IrType){dt, 0, NULL, false, false, 0};
    return true;
}

/* ---- literals ---- */

/* Copy a number's text (with an optional sign) NUL-terminated into buf. */
static bool number_text(Parser *P, bool neg, const Token *t, char *buf, size_t size) {
    if ((size_t)t->len + 2 > size) {
        perr(P, t, "number too long");
        return false;
    }
    size_t n = 0;
    if (neg) buf[n++] = '-';
    memcpy(buf + n, t->s, (size_t)t->len);
    buf[n + (size_t)t->len] = 0;
    return true;
}

static bool is_hex_number(const Token *t) { return t->len > 2 && t->s[0] == '0' && (t->s[1] == 'x' || t->s[1] == 'X'); }
static bool is_float_number(const Token *t) {
    bool hex = is_hex_number(t);
    for (int i = 0; i < t->len; i++) {
        char c = t->s[i];
        if (c == '.' || (hex && (c == 'p' || c == 'P')) || (!hex && (c == 'e' || c == 'E'))) return true;
    }
    return false;
}

/* True when |d| lies exactly halfway between two adjacent halves. */
static bool half_midpoint(double d) {
    d = fabs(d);
    if (d == 0 || !isfinite(d)) return false;
    double s = d < 0x1p-14 ? ldexp(d, 24) : ldexp(d, 10 - ilogb(d));
    return s - floor(s) == 0.5;
}

/* Text -> half, correctly rounded.  Going through the nearest double v is
 * exact unless v sits on a tie between two halves while the text does not:
 * then parsing with directed rounding brackets the text's value and tells
 * which side of the tie it is on. */
static uint16_t text_to_half(Parser *P, const char *text, double v) {
    if (!half_midpoint(v)) return ir_double_to_half(v);
    int mode = fegetround();
    fesetround(FE_DOWNWARD);
    double lo = strtod_l(text, NULL, P->c_locale);
    fesetround(FE_UPWARD);
    double hi = strtod_l(text, NULL, P->c_locale);
    fesetround(mode);
    if (lo == hi) return ir_double_to_half(v); /* the text is the tie itself: ties to even */
    return half_midpoint(lo) ? ir_double_to_half(hi) : ir_double_to_half(lo);
}

/* scalar := STRING | 'true' | 'false' | ['-'] NUMBER | ['-'] ('inf' | 'nan')
 * Stores element i of l, checked against l's dtype. */
static bool parse_scalar(Parser *P, IrLiteral *l, size_t i) {
    IrDType dt = l->type.dtype;
    Token *start = peek(P);
    char buf[80];
    if (dt == IR_DT_STRING) {
        if (start->kind != TK_STRING) {
            perr(P, start, "expected a string, found %s", tok_text(start, buf, sizeof buf));
            return false;
        }
        next(P);
        l->data.s[i] = tok_str(P, start);
        return true;
    }
    if (dt == IR_DT_BOOL) {
        Token *t = next(P);
        if (tok_is(t, "true"))
            l->data.b[i] = 1;
        else if (tok_is(t, "false"))
            l->data.b[i] = 0;
        else {
            perr(P, t, "expected true or false, found %s", tok_text(t, buf, sizeof buf));
            return false;
        }
        return true;
    }
    bool neg = false;
    if (peek(P)->kind == TK_MINUS) {
        next(P);
        neg = true;
    }
    Token *t = next(P);
    if (ir_dtype_is_float(dt)) {
        double v;
        if (tok_is(t, "inf"))
            v = neg ? -INFINITY : INFINITY;
        else if (tok_is(t, "nan"))
            v = neg ? -NAN : NAN;
        else if (t->kind == TK_NUMBER) {
            if (!number_text(P, neg, t, buf, sizeof buf)) return false;
            char *end;
            if (dt == IR_DT_FP32) { /* direct, to avoid rounding twice through double */
                float f = strtof_l(buf, &end, P->c_locale);
                if (*end) {
                    perr(P, t, "malformed number '%s'", buf);
                    return false;
                }
                l->data.f32[i] = f;
                return true;
            }
            v = strtod_l(buf, &end, P->c_locale);
            if (*end) {
                perr(P, t, "malformed number '%s'", buf);
                return false;
            }
        } else {
            perr(P, t, "expected a number for %s, found %s", ir_dtype_name(dt), tok_text(t, buf, sizeof buf));
            return false;
        }
        if (dt == IR_DT_FP16)
            l->data.f16[i] = t->kind == TK_NUMBER ? text_to_half(P, buf, v) : ir_double_to_half(v);
        else if (dt == IR_DT_FP32)
            l->data.f32[i] = (float)v;
        else
            l->data.f64[i] = v;
        return true;
    }
    /* integers */
    if (t->kind != TK_NUMBER || is_float_number(t)) {
        perr(P, t, "expected an integer for %s, found %s", ir_dtype_name(dt), tok_text(t, buf, sizeof buf));
        return false;
    }
    if (!number_text(P, false, t, buf, sizeof buf)) return false;
    char *end;
    errno = 0;
    unsigned long long u = strtoull(buf, &end, is_hex_number(t) ? 16 : 10);
    if (*end) {
        perr(P, t, "malformed integer '%s'", buf);
        return false;
    }
    bool overflow = errno == ERANGE;
    int64_t lo, hi;
    ir_dtype_int_range(dt, &lo, &hi);
    if (dt == IR_DT_UINT64 && !neg && !overflow) { /* the full unsigned range, as a bit pattern */
        l->data.i[i] = (int64_t)u;
        return true;
    }
    int64_t v = 0;
    if (!overflow) {
        if (neg) {
            if (u > (unsigned long long)INT64_MAX + 1)
                overflow = true;
            else
                v = u == (unsigned long long)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
        } else if (u > (unsigned long long)INT64_MAX)
            overflow = true;
        else
            v = (int64_t)u;
    }
    if (overflow || v < lo || v > hi) {
        perr(P, t, "integer %s%.*s out of range for %s", neg ? "-" : "", t->len, t->s, ir_dtype_name(dt));
        return false;
    }
    l->data.i[i] = v;
    return true;
}

/* elems(d) := scalar                     when d == rank
 *           | '[' [elems(d+1) (',' elems(d+1))*] ']' */
static bool parse_elems(Parser *P, IrLiteral *l, int d, size_t *idx) {
    /* `tensor<int32, [1]>(1)`: a one-element tensor written as its element
     * (Apple's and others' files do); it reads as `([1])`. */
    bool bare_one = d == 0 && l->count == 1 && peek(P)->kind != TK_LBRACK;
    if (d == l->type.rank || bare_one) {
        if (*idx >= l->count) return false; /* unreachable: counts are checked per level */
        return parse_scalar(P, l, (*idx)++);
    }
    Token *open = peek(P);
    if (!expect(P, TK_LBRACK)) return false;
    int64_t want = l->type.dims[d], got = 0;
    if (peek(P)->kind != TK_RBRACK) {
        for (;;) {
            if (got == want) {
                char tb[160];
                perr(P, open, "too many elements in dimension %d of %s (expected %lld)", d,
                     ir_type_format(&l->type, tb, sizeof tb), (long long)want);
                return false;
            }
            if (!parse_elems(P, l, d + 1, idx)) return false;
            got++;
            if (peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    if (got != want) {
        char tb[160];
        perr(P, open, "expected %lld elements in dimension %d of %s, found %lld", (long long)want, d,
             ir_type_format(&l->type, tb, sizeof tb), (long long)got);
        return false;
    }
    return expect(P, TK_RBRACK);
}

static IrLiteral *parse_literal(Parser *P);

/* blobfile := 'BLOBFILE' '(' 'path' '=' literal ',' 'offset' '=' literal ')'  (either order) */
static bool parse_blobfile(Parser *P, IrLiteral *l) {
    Token *kw = next(P);
    if (!expect(P, TK_LPAREN)) return false;
    bool have_path = false, have_offset = false;
    for (;;) {
        Token *name = expect_ident(P, "'path' or 'offset'");
        if (!name || !expect(P, TK_EQ)) return false;
        Token *vt = peek(P);
        IrLiteral *v = parse_literal(P);
        if (!v) return false;
        if (tok_is(name, "path") && !have_path) {
            if (v->kind != IR_LIT_DATA || v->type.dtype != IR_DT_STRING || v->count != 1) {
                perr(P, vt, "BLOBFILE path must be a string");
                return false;
            }
            l->blob_path = v->data.s[0];
            have_path = true;
        } else if (tok_is(name, "offset") && !have_offset) {
            if (v->kind != IR_LIT_DATA || v->type.dtype != IR_DT_UINT64 || v->count != 1) {
                perr(P, vt, "BLOBFILE offset must be a uint64");
                return false;
            }
            l->blob_offset = (uint64_t)v->data.i[0];
            have_offset = true;
        } else {
            perr(P, name, "unexpected BLOBFILE argument '%.*s'", name->len, name->s);
            return false;
        }
        if (peek(P)->kind != TK_COMMA) break;
        next(P);
    }
    if (!expect(P, TK_RPAREN)) return false;
    if (!have_path || !have_offset) {
        perr(P, kw, "BLOBFILE needs both path and offset");
        return false;
    }
    return true;
}

/* dst[i] = the single element of src (same dtype). */
static void copy_elem(IrLiteral *dst, size_t i, const IrLiteral *src) {
    switch (dst->type.dtype) {
    case IR_DT_BOOL: dst->data.b[i] = src->data.b[0]; break;
    case IR_DT_FP16: dst->data.f16[i] = src->data.f16[0]; break;
    case IR_DT_FP32: dst->data.f32[i] = src->data.f32[0]; break;
    case IR_DT_FP64: dst->data.f64[i] = src->data.f64[0]; break;
    case IR_DT_STRING: dst->data.s[i] = src->data.s[0]; break;
    default: dst->data.i[i] = src->data.i[0]; break;
    }
}

/* Order of two single-element key literals: strings bytewise, numbers by
 * value (NaN after everything, and never equal to anything). */
static int cmp_key(const void *a, const void *b) {
    const IrLiteral *x = *(IrLiteral *const *)a, *y = *(IrLiteral *const *)b;
    if (x->type.dtype == IR_DT_STRING) return strcmp(x->data.s[0], y->data.s[0]);
    double u = ir_lit_f64(x, 0), v = ir_lit_f64(y, 0);
    if (isnan(u) || isnan(v)) return isnan(u) && isnan(v) ? (x < y ? -1 : x > y) : isnan(u) ? 1 : -1;
    if (x->type.dtype == IR_DT_UINT64 || x->type.dtype == IR_DT_INT64) { /* beyond double precision */
        int64_t i = x->data.i[0], j = y->data.i[0];
        if (x->type.dtype == IR_DT_UINT64) return (uint64_t)i < (uint64_t)j ? -1 : (uint64_t)i > (uint64_t)j;
        return i < j ? -1 : i > j;
    }
    return u < v ? -1 : u > v;
}

/* dict := 'dict' '<' type ',' type '>' '(' '{' [pair (',' pair)*] '}' ')'
 * pair := '{' scalar ',' scalar '}' */
static IrLiteral *parse_dict(Parser *P) {
    Token *kw = next(P);
    next(P); /* '<' */
    IrType ktt, vtt;
    Token *kt_tok = peek(P);
    if (!parse_type(P, &ktt) || !expect(P, TK_COMMA) || !parse_type(P, &vtt) || !expect(P, TK_GT)) return NULL;
    if (ktt.rank != 0 || vtt.rank != 0) {
        perr(P, kt_tok, "dict keys and values must be scalars");
        return NULL;
    }
    if (!expect(P, TK_LPAREN) || !expect(P, TK_LBRACE)) return NULL;
    IrDType kt = ktt.dtype, vt = vtt.dtype;
    /* Pairs go into growing scalar arrays, then into the dict's two vectors. */
    IrLiteral **ks = NULL, **vs = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    IrType kst = {kt, 0, NULL, false, false, 0}, vst = {vt, 0, NULL, false, false, 0};
    if (peek(P)->kind != TK_RBRACE) {
        for (;;) {
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                ks = realloc(ks, sizeof *ks * cap);
                vs = realloc(vs, sizeof *vs * cap);
                MILC_ASSERT(ks && vs);
            }
            ks[n] = ir_literal_new(P->a, &kst);
            vs[n] = ir_literal_new(P->a, &vst);
            if (!expect(P, TK_LBRACE) || !parse_scalar(P, ks[n], 0) || !expect(P, TK_COMMA) ||
                !parse_scalar(P, vs[n], 0) || !expect(P, TK_RBRACE)) {
                ok = false;
                break;
            }
            n++;
            if (!ok || peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    if (ok && n > 1) { /* duplicate keys: sort a copy, compare neighbours */
        IrLiteral **sorted = malloc(sizeof *sorted * n);
        MILC_ASSERT(sorted != NULL);
        memcpy(sorted, ks, sizeof *sorted * n);
        qsort(sorted, n, sizeof *sorted, cmp_key);
        for (size_t i = 1; i < n && ok; i++)
            if (cmp_key(&sorted[i - 1], &sorted[i]) == 0) {
                if (kt == IR_DT_STRING)
                    perr(P, kw, "duplicate key \"%s\" in dict", sorted[i]->data.s[0]);
                else
                    perr(P, kw, "duplicate key in dict");
                ok = false;
            }
        free(sorted);
    }
    IrLiteral *l = NULL;
    if (ok) {
        int64_t dim = (int64_t)n;
        IrType ktype = {kt, 1, &dim, false, false, 0}, vtype = {vt, 1, &dim, false, false, 0};
        l = ARENA_NEW(P->a, IrLiteral);
        l->kind = IR_LIT_DICT;
        l->loc = tok_loc(P, kw);
        l->type = ir_type_make(P->a, vt, 1, &dim);
        l->count = n;
        l->keys = ir_literal_new(P->a, &ktype);
        l->values = ir_literal_new(P->a, &vtype);
        for (size_t i = 0; i < n; i++) {
            copy_elem(l->keys, i, ks[i]);
            copy_elem(l->values, i, vs[i]);
        }
    }
    free(ks);
    free(vs);
    if (!l) return NULL;
    if (!expect(P, TK_RBRACE) || !expect(P, TK_RPAREN)) return NULL;
    return l;
}

/* literal := type '(' (blobfile | elems(0)) ')' | dict */
static IrLiteral *parse_literal_inner(Parser *P, Token *start);

static IrLiteral *parse_literal(Parser *P) {
    Token *start = peek(P);
    /* BLOBFILE arguments are literals themselves: bound the recursion. */
    if (P->depth >= 4) {
        perr(P, start, "literal nested too deeply");
        return NULL;
    }
    P->depth++;
    IrLiteral *l = parse_literal_inner(P, start);
    P->depth--;
    return l;
}

/* A bare `true`, `-1`, `0.5` or "s" where MIL needs a typed literal: say
 * which literal to write.  want is the dtype the argument takes, or -1. */
static bool at_bare_value(Parser *P) {
    Token *t = peek(P);
    if (t->kind == TK_NUMBER || t->kind == TK_STRING) return true;
    if (t->kind == TK_MINUS) return peek_at(P, 1)->kind == TK_NUMBER || tok_is(peek_at(P, 1), "inf");
    return (tok_is(t, "true") || tok_is(t, "false")) && peek_at(P, 1)->kind != TK_LPAREN;
}

static void bare_value_error(Parser *P, int want) {
    Token *t = next(P);
    bool neg = t->kind == TK_MINUS;
    Token *v = neg ? next(P) : t;
    const char *dt;
    if (v->kind == TK_STRING)
        dt = "string";
    else if (v->kind == TK_IDENT && !tok_is(v, "inf"))
        dt = "bool";
    else if (want >= 0 && want != IR_DT_STRING && want != IR_DT_BOOL)
        dt = ir_dtype_name((IrDType)want);
    else
        dt = is_float_number(v) || tok_is(v, "inf") ? "fp32" : "int32";
    const char *q = v->kind == TK_STRING ? "\"" : "";
    if (P->prog && ir_program_tensor_scalars(P->prog))
        perr(P, t, "a bare value is not a MIL literal: write tensor<%s, []>(%s%s%.*s%s)", dt, neg ? "-" : "", q, v->len,
             v->s, q);
    else
        perr(P, t, "a bare value is not a MIL literal: write %s(%s%s%.*s%s)", dt, neg ? "-" : "", q, v->len, v->s, q);
}

static IrLiteral *parse_literal_inner(Parser *P, Token *start) {
    if (at_bare_value(P)) {
        bare_value_error(P, -1);
        return NULL;
    }
    if (tok_is(start, "dict") && peek_at(P, 1)->kind == TK_LT) return parse_dict(P);
    IrType ty;
    if (!parse_type(P, &ty)) return NULL;
    if (ty.state || ty.list) {
        perr(P, start,
             ty.state ? "a literal cannot be a state" : "a literal cannot be a list (build one with make_list)");
        return NULL;
    }
    for (int i = 0; i < ty.rank; i++)
        if (ty.dims[i] < 0) {
            perr(P, start, "a literal cannot have a dynamic dimension");
            return NULL;
        }
    if (ir_type_numel(&ty) < 0 || ir_type_numel(&ty) > (INT64_C(1) << 40)) {
        perr(P, start, "literal too large");
        return NULL;
    }
    if (!expect(P, TK_LPAREN)) return NULL;
    IrLiteral *l;
    if (tok_is(peek(P), "BLOBFILE")) {
        l = ARENA_NEW(P->a, IrLiteral);
        l->kind = IR_LIT_BLOBFILE;
        l->type = ty;
        l->count = (size_t)ir_type_numel(&ty);
        if (!parse_blobfile(P, l)) return NULL;
    } else {
        /* Every element takes at least one byte of text: a type claiming more
         * elements than the rest of the input holds is rejected before its
         * storage is allocated. */
        if ((uint64_t)ir_type_numel(&ty) > (uint64_t)(P->end - peek(P)->s) + 1) {
            char tb[160];
            perr(P, start, "%s literal has fewer elements than its type", ir_type_format(&ty, tb, sizeof tb));
            return NULL;
        }
        l = ir_literal_new(P->a, &ty);
        size_t idx = 0;
        if (!parse_elems(P, l, 0, &idx)) return NULL;
    }
    l->loc = tok_loc(P, start);
    if (!expect(P, TK_RPAREN)) return NULL;
    return l;
}

/* True when the next tokens start a literal rather than a variable name. */
static bool at_literal(Parser *P) {
    Token *t = peek(P), *t1 = peek_at(P, 1);
    if (t->kind != TK_IDENT) return false;
    if ((tok_is(t, "tensor") || tok_is(t, "dict")) && t1->kind == TK_LT) return true;
    return t1->kind == TK_LPAREN;
}

/* ---- statements ---- */

/* Is a value of block b visible in the block being parsed (b itself or one
 * enclosing it)?  Names stay unique in a function; a nested block's values
 * are not seen outside it. */
static bool visible(const Parser *P, const IrBlock *b) {
    for (const IrBlock *c = P->blk; c; c = c->parent->block)
        if (c == b) return true;
    return b == NULL;
}

static IrValue *resolve(Parser *P, const Token *t) {
    IrValue *v = scope_find(P, t);
    if (!v)
        perr(P, t, "undefined variable '%.*s'", t->len, t->s);
    else if (!visible(P, v->block)) {
        perr(P, t, "'%.*s' is defined inside a nested block of op '%s' and is not visible here", t->len, t->s,
             v->block->parent->name ? v->block->parent->name : mil_op_name(v->block->parent->kind));
        return NULL;
    }
    return v;
}

/* The dtype argument name of op takes: its fixed dtype, or the dtype of an
 * argument already given that shares its dtype group; -1 if unknown. */
static int arg_dtype_hint(const IrOp *op, const char *name) {
    MilArgSpec spec, other;
    if (!mil_op_arg_spec(op->kind, name, &spec)) return -1;
    if (spec.dtype >= 0 || !spec.group) return spec.dtype;
    for (int i = 0; i < op->nargs; i++)
        if (op->args[i].kind == IR_ARG_VALUE && mil_op_arg_spec(op->kind, op->args[i].name, &other) &&
            other.group == spec.group)
            return (int)op->args[i].value->type.dtype;
    return -1;
}

/* arg := IDENT '=' (IDENT | literal | '(' IDENT (',' IDENT)* ')') */
static bool parse_arg(Parser *P, IrOp *op) {
    Token *name = expect_ident(P, "an argument name");
    if (!name || !expect(P, TK_EQ)) return false;
    if (op->nargs == MIL_MAX_OP_ARGS * 4) { /* far beyond any op: stop quadratic lookups early */
        perr(P, name, "too many arguments");
        return false;
    }
    char *nm = tok_str(P, name);
    IrArg *arg;
    if (peek(P)->kind == TK_LPAREN) {
        next(P);
        IrValue *items[1024];
        int n = 0;
        bool ok = true;
        if (peek(P)->kind != TK_RPAREN) {
            for (;;) {
                Token *t = expect_ident(P, "a variable name");
                if (!t) return false;
                if (n == 1024) {
                    perr(P, t, "tuple longer than 1024");
                    return false;
                }
                IrValue *v = resolve(P, t);
                if (!v) ok = false;
                items[n++] = v;
                if (peek(P)->kind != TK_COMMA) break;
                next(P);
            }
        }
        if (!expect(P, TK_RPAREN) || !ok) return false;
        arg = ir_op_add_tuple(op, nm, items, n);
    } else if (at_bare_value(P) && !(peek(P)->kind == TK_IDENT && scope_find(P, peek(P)))) {
        bare_value_error(P, arg_dtype_hint(op, nm));
        return false;
    } else if (at_literal(P)) {
        IrLiteral *l = parse_literal(P);
        if (!l) return false;
        arg = ir_op_add_literal(op, nm, l);
    } else {
        Token *t = expect_ident(P, "a variable or a literal");
        if (!t) return false;
        IrValue *v = resolve(P, t);
        if (!v) return false;
        arg = ir_op_add_value(op, nm, v);
    }
    arg->loc = tok_loc(P, name);
    return true;
}

/* attrs := '[' attr (',' attr)* ']'   attr := IDENT '=' literal
 * For a statement, name is taken out into op->name. */
static bool parse_attrs(Parser *P, IrOp *op, bool program) {
    if (!expect(P, TK_LBRACK)) return false;
    bool have_name = false;
    for (;;) {
        Token *name = expect_ident(P, "an attribute name");
        if (!name || !expect(P, TK_EQ)) return false;
        if ((program ? P->prog->nattrs : op->nattrs) >= 64) {
            perr(P, name, "too many attributes");
            return false;
        }
        IrLiteral *l = parse_literal(P);
        if (!l) return false;
        char *nm = tok_str(P, name);
        bool dup;
        if (program)
            dup = false;
        else
            dup = (strcmp(nm, "name") == 0) ? have_name : ir_op_attr(op, nm) != NULL;
        if (program)
            for (int i = 0; i < P->prog->nattrs; i++)
                if (strcmp(P->prog->attrs[i].name, nm) == 0) dup = true;
        if (dup) {
            perr(P, name, "duplicate attribute '%s'", nm);
            return false;
        }
        if (program) {
            ir_program_set_attr(P->prog, nm, l);
            P->prog->attrs[P->prog->nattrs - 1].loc = tok_loc(P, name);
        } else if (strcmp(nm, "name") == 0) {
            if (l->kind != IR_LIT_DATA || l->type.dtype != IR_DT_STRING || l->count != 1 || l->type.rank != 0) {
                perr(P, name, "attribute 'name' must be a string");
                return false;
            }
            op->name = l->data.s[0];
            have_name = true;
        } else {
            ir_op_set_attr(op, nm, l)->loc = tok_loc(P, name);
        }
        if (peek(P)->kind != TK_COMMA) break;
        next(P);
    }
    return expect(P, TK_RBRACK);
}

typedef struct Result {
    IrType type;
    Token *name;
} Result;

static bool parse_blocks(Parser *P, IrOp *op);

/* Append op where the parser is: the nested block, else the function. */
static void place_op(Parser *P, IrOp *op) {
    if (P->blk)
        ir_block_append(P->blk, op);
    else
        ir_op_append(P->fn, op);
}

/* The part of a statement after its results: '=' IDENT '(' [arg (',' arg)*] ')' [attrs] ';'
 * *opp gets the op as soon as it exists, even when a later part fails. */
static bool parse_stmt_rest(Parser *P, int nres, IrOp **opp) {
    if (nres > 0 && !expect(P, TK_EQ)) return false;
    Token *opt = expect_ident(P, "an op name");
    if (!opt) return false;
    IrOpKind kind;
    if (!mil_op_lookup(opt->s, (size_t)opt->len, &kind)) {
        perr(P, opt, "unknown op '%.*s'", opt->len, opt->s);
        return false;
    }
    IrOp *op = *opp = ir_op_new(P->fn, kind, NULL, nres);
    op->loc = tok_loc(P, opt);
    op->block = P->blk; /* before it is placed: its own blocks look outward through it */
    if (!expect(P, TK_LPAREN)) return false;
    bool ok = true;
    if (peek(P)->kind != TK_RPAREN) {
        for (;;) {
            if (!parse_arg(P, op)) {
                ok = false;
                /* Skip to the next argument so later ones still get checked. */
                int depth = 0;
                for (;;) {
                    TokKind k = peek(P)->kind;
                    if (k == TK_EOF || k == TK_SEMI) return false;
                    if (depth == 0 && (k == TK_COMMA || k == TK_RPAREN)) break;
                    if (k == TK_LPAREN || k == TK_LBRACK) depth++;
                    if (k == TK_RPAREN || k == TK_RBRACK) depth--;
                    next(P);
                }
            }
            if (peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    if (!expect(P, TK_RPAREN)) return false;
    if (peek(P)->kind == TK_LBRACK && !parse_attrs(P, op, false)) return false;
    mil_op_attrs_as_args(op);
    if (peek(P)->kind == TK_LBRACE && !parse_blocks(P, op)) return false;
    return expect(P, TK_SEMI) && ok;
}

/* stmt    := results '=' IDENT '(' [arg (',' arg)*] ')' [attrs] ';'
 * results := '(' type IDENT (',' type IDENT)* ')' | type IDENT (',' type IDENT)* */
static bool is_dtype_word(const Token *t);

static bool parse_stmt(Parser *P) {
    Result res[64];
    int nres = 0;
    /* An op with no results (write_state) is a statement of its own. */
    if (peek(P)->kind == TK_IDENT && peek_at(P, 1)->kind == TK_LPAREN && !is_dtype_word(peek(P))) {
        IrOp *op = NULL;
        if (!parse_stmt_rest(P, 0, &op)) return false;
        if (!op->name) op->name = mil_op_name(op->kind);
        place_op(P, op);
        return true;
    }
    bool paren = peek(P)->kind == TK_LPAREN;
    if (paren) next(P);
    for (;;) {
        if (nres == 64) {
            perr(P, peek(P), "more than 64 results");
            return false;
        }
        if (!parse_type(P, &res[nres].type)) return false;
        if (!(res[nres].name = expect_ident(P, "a variable name"))) return false;
        nres++;
        if (peek(P)->kind != TK_COMMA) break;
        next(P);
    }
    if (paren && !expect(P, TK_RPAREN)) return false;
    IrOp *op = NULL;
    bool ok = parse_stmt_rest(P, nres, &op);
    /* Define the results even when the statement is bad, so their later uses
     * do not cascade into "undefined variable" errors. */
    if (!op) op = ir_op_new(P->fn, OP_CONST, NULL, nres);
    for (int i = 0; i < nres; i++) {
        IrValue *v = ir_op_set_result(op, i, tok_str(P, res[i].name), res[i].type);
        v->loc = tok_loc(P, res[i].name);
        v->block = P->blk;
        if (!scope_define(P, v, res[i].name)) ok = false;
    }
    if (!ok) return false;
    if (!op->name) op->name = op->results[0]->name;
    place_op(P, op);
    return true;
}

static void sync_stmt(Parser *P);

/* block  := '(' [type IDENT (',' type IDENT)*] ')' '{' stmt* '}' '->' '(' [IDENT (',' IDENT)*] ')' ';'
 * blocks := '{' block* '}'   after an op's attributes: cond's two branches,
 * while_loop's condition and body.  A block sees the values around it; its
 * own are not seen outside it. */
static bool parse_block(Parser *P, IrOp *op) {
    IrBlock *b = ir_op_add_block(op);
    b->loc = tok_loc(P, peek(P));
    if (!expect(P, TK_LPAREN)) return false;
    IrBlock *outer = P->blk;
    P->blk = b;
    size_t mark = P->ndefs;
    bool ok = true, names_ok = true; /* syntax; names (a bad name still lets the block parse on) */
    if (peek(P)->kind != TK_RPAREN) {
        for (;;) {
            IrType ty;
            Token *in = NULL;
            if (!parse_type(P, &ty) || !(in = expect_ident(P, "a block input name"))) {
                ok = false;
                break;
            }
            IrValue *v = ir_block_add_input(b, tok_str(P, in), ty);
            v->loc = tok_loc(P, in);
            names_ok &= scope_define(P, v, in);
            if (peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    ok = ok && expect(P, TK_RPAREN) && expect(P, TK_LBRACE);
    while (ok && peek(P)->kind != TK_RBRACE && peek(P)->kind != TK_EOF) {
        if (P->d->truncated) {
            ok = false;
            break;
        }
        if (!parse_stmt(P)) sync_stmt(P);
    }
    ok = ok && expect(P, TK_RBRACE) && expect(P, TK_ARROW) && expect(P, TK_LPAREN);
    if (ok && peek(P)->kind != TK_RPAREN) {
        for (;;) {
            Token *t = expect_ident(P, "a block output name");
            if (!t) {
                ok = false;
                break;
            }
            IrValue *v = resolve(P, t);
            if (v)
                ir_block_add_output(b, v, tok_loc(P, t));
            else
                names_ok = false;
            if (peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    defs_pop_to(P, mark);
    P->blk = outer;
    return ok && expect(P, TK_RPAREN) && expect(P, TK_SEMI) && names_ok;
}

static bool parse_blocks(Parser *P, IrOp *op) {
    Token *open = next(P); /* '{' */
    if (++P->block_depth > 32) {
        perr(P, open, "nested blocks deeper than 32");
        return false;
    }
    bool ok = true, all = true;
    while (ok && peek(P)->kind != TK_RBRACE && peek(P)->kind != TK_EOF) {
        if (op->nblocks == 8) {
            perr(P, peek(P), "more than 8 blocks in one op");
            ok = false;
            break;
        }
        /* A block that failed on a name only has been read to its end: go on. */
        int before = P->pos;
        bool good = parse_block(P, op);
        all &= good;
        ok = good || (P->pos > before && tok_at(P, P->pos - 1)->kind == TK_SEMI);
    }
    P->block_depth--;
    return ok && expect(P, TK_RBRACE) && all;
}

/* After a bad statement: skip past its ';', or stop before the function's
 * closing '} ->' so the function still ends cleanly. */
static bool is_dtype_word(const Token *t) {
    IrDType dt;
    return t->kind == TK_IDENT && ir_dtype_from_name(t->s, (size_t)t->len, &dt);
}

/* Does a statement start here: `tensor<...> NAME`, `DTYPE NAME` or `(TYPE`? */
static bool at_stmt_start(Parser *P) {
    Token *t = peek(P);
    if (t->kind == TK_LPAREN) {
        Token *t1 = peek_at(P, 1);
        return is_dtype_word(t1) || (tok_is(t1, "tensor") && peek_at(P, 2)->kind == TK_LT);
    }
    if (is_dtype_word(t)) return peek_at(P, 1)->kind == TK_IDENT;
    if (!(tok_is(t, "tensor") || tok_is(t, "list")) || peek_at(P, 1)->kind != TK_LT) return false;
    for (int k = 2; k < 200; k++) {
        TokKind kk = peek_at(P, k)->kind;
        if (kk == TK_GT) return peek_at(P, k + 1)->kind == TK_IDENT;
        if (kk == TK_EOF || kk == TK_SEMI || kk == TK_LPAREN) return false;
    }
    return false;
}

/* After a bad statement: skip past its ';', or stop at what looks like the
 * next statement on a new line (a forgotten ';'), or before the function's
 * closing '} ->' so the function still ends cleanly. */
static void sync_stmt(Parser *P) {
    if (P->pos > 0 && tok_at(P, P->pos - 1)->kind == TK_SEMI) return; /* the statement was complete */
    for (;;) {
        Token *t = peek(P);
        if (t->kind == TK_EOF) return;
        if (t->kind == TK_RBRACE && peek_at(P, 1)->kind == TK_ARROW) return;
        if (P->pos > 0 && t->line > tok_at(P, P->pos - 1)->line && at_stmt_start(P)) return;
        next(P);
        if (t->kind == TK_SEMI) return;
    }
}

/* fattrs := '[' IDENT '=' ... ']'   (brackets balanced)
 * Function attributes such as Apple's [FlexibleShapeInformation = tuple<...>(...)]
 * describe shapes for the runtime; milc does not interpret them but keeps
 * their text, so a program prints back with them.  Returns that text. */
static const char *skip_func_attrs(Parser *P) {
    Token *open = next(P);
    if (!expect_ident(P, "an attribute name") || !expect(P, TK_EQ)) return NULL;
    int depth = 1;
    const char *end = open->s;
    while (depth > 0) {
        Token *t = next(P);
        if (t->kind == TK_EOF) {
            perr(P, t, "unterminated function attribute list");
            return NULL;
        }
        if (t->kind == TK_LBRACK) depth++;
        if (t->kind == TK_RBRACK) depth--;
        end = t->s + t->len;
    }
    return arena_strndup(P->a, open->s, (size_t)(end - open->s));
}

/* func := 'func' IDENT '<' OPSET '>' '(' [type IDENT (',' type IDENT)*] ')' [fattrs]
 *         '{' stmt* '}' '->' '(' [IDENT (',' IDENT)*] ')' ';'
 * OPSET: ios15..ios18, or CoreML5..CoreML8 (the same opsets, read as ios15..ios18). */
static bool parse_func(Parser *P) {
    if (!expect_word(P, "func")) return false;
    Token *name = expect_ident(P, "a function name");
    if (!name || !expect(P, TK_LT)) return false;
    Token *opset = expect_ident(P, "an opset such as ios18");
    if (!opset || !expect(P, TK_GT) || !expect(P, TK_LPAREN)) return false;
    int version = mil_opset_version(opset->s, (size_t)opset->len);
    if (!version)
        perr(P, opset, "unknown opset '%.*s' (ios15, ios16, ios17, ios18; or CoreML5 to CoreML8)", opset->len,
             opset->s);
    char *nm = tok_str(P, name);
    if (ir_program_function(P->prog, nm)) perr(P, name, "duplicate function '%s'", nm);
    IrFunction *f = ir_function_new(P->prog, nm, version ? mil_opset_name(version) : tok_str(P, opset));
    f->loc = tok_loc(P, name);
    P->fn = f;
    scope_reset(P);
    if (peek(P)->kind != TK_RPAREN) {
        for (;;) {
            IrType ty;
            if (!parse_type(P, &ty)) return false;
            Token *in = expect_ident(P, "an input name");
            if (!in) return false;
            IrValue *v = ir_function_add_input(f, tok_str(P, in), ty);
            v->loc = tok_loc(P, in);
            scope_define(P, v, in);
            if (peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    if (!expect(P, TK_RPAREN)) return false;
    if (peek(P)->kind == TK_LBRACK && !(f->attr_text = skip_func_attrs(P))) return false;
    if (!expect(P, TK_LBRACE)) return false;
    while (peek(P)->kind != TK_RBRACE && peek(P)->kind != TK_EOF) {
        if (P->d->truncated) return false;
        if (!parse_stmt(P)) sync_stmt(P);
    }
    if (!expect(P, TK_RBRACE) || !expect(P, TK_ARROW) || !expect(P, TK_LPAREN)) return false;
    if (peek(P)->kind != TK_RPAREN) {
        for (;;) {
            Token *t = expect_ident(P, "an output name");
            if (!t) return false;
            IrValue *v = scope_find(P, t);
            if (!v)
                perr(P, t, "output '%.*s' is not defined in function '%s'", t->len, t->s, f->name);
            else {
                ir_function_add_output(f, v);
                f->output_locs[f->noutputs - 1] = tok_loc(P, t);
            }
            if (peek(P)->kind != TK_COMMA) break;
            next(P);
        }
    }
    return expect(P, TK_RPAREN) && expect(P, TK_SEMI);
}

/* MAJOR.MINOR, or MAJOR alone (`program(1)`, as some files write it) = MAJOR.0. */
static bool program_version(const char *s, int *major, int *minor, int *used) {
    if (sscanf(s, "%4d.%4d%n", major, minor, used) == 2) return true;
    *minor = 0;
    return sscanf(s, "%4d%n", major, used) == 1;
}

/* program := 'program' '(' NUMBER ')' [attrs] '{' func* '}' */
static void parse_program(Parser *P) {
    if (!expect_word(P, "program") || !expect(P, TK_LPAREN)) return;
    Token *ver = next(P);
    int major = 0, minor = 0, used = 0;
    char vbuf[32];
    if (ver->kind != TK_NUMBER || ver->len >= (int)sizeof vbuf ||
        (memcpy(vbuf, ver->s, (size_t)ver->len), vbuf[ver->len] = 0,
         !program_version(vbuf, &major, &minor, &used) || used != ver->len || major < 0 || minor < 0)) {
        char buf[48];
        perr(P, ver, "expected a program version MAJOR.MINOR, found %s", tok_text(ver, buf, sizeof buf));
        return;
    }
    if (major != 1) {
        perr(P, ver, "program version %d.%d is not a MIL version (they are 1.x; write program(1.3))", major, minor);
        return;
    }
    P->prog = ir_program_new(P->a, major, minor);
    P->prog->file = P->file;
    if (!expect(P, TK_RPAREN)) return;
    if (peek(P)->kind == TK_LBRACK && !parse_attrs(P, NULL, true)) {
        /* Resynchronise at the program body: '{' followed by 'func'. */
        while (peek(P)->kind != TK_EOF && !(peek(P)->kind == TK_LBRACE && tok_is(peek_at(P, 1), "func"))) next(P);
    }
    if (!expect(P, TK_LBRACE)) return;
    while (peek(P)->kind != TK_RBRACE && peek(P)->kind != TK_EOF) {
        if (P->d->truncated) return;
        if (!parse_func(P)) {
            /* Resynchronise at the next function. */
            while (peek(P)->kind != TK_EOF && !(tok_is(peek(P), "func") && peek_at(P, 1)->kind == TK_IDENT)) next(P);
        }
    }
    if (!expect(P, TK_RBRACE)) return;
    if (peek(P)->kind != TK_EOF) {
        char buf[48];
        perr(P, peek(P), "expected end of input, found %s", tok_text(peek(P), buf, sizeof buf));
    }
    if (P->prog->nfuncs == 0 && !P->failed) perr(P, ver, "program has no function");
}

IrProgram *mil_parse(Arena *a, DiagSink *d, const char *file, const char *text, size_t len) {
    Parser P = {0};
    P.a = a;
    P.d = d;
    P.file = diag_add_source(d, file ? file : "<input>", text, len);
    P.c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    MILC_ASSERT(P.c_locale != (locale_t)0);
    P.lp = P.line_start = text;
    P.end = text + len;
    P.line = 1;
    parse_program(&P);
    for (int i = 0; i < P.nchunks; i++) free(P.chunks[i]);
    free(P.chunks);
    free(P.scope);
    free(P.defs);
    freelocale(P.c_locale);
    if (P.failed) return NULL;
    mil_normalize_axes(P.prog);
    return P.prog;
}
