/* expand.c — runs a template: its body is a small program of statements
 * (let, require, if/else, repeat, include, input, output, weight, mil) that
 * produces MIL statements, each tagged with the template line it came from,
 * plus the declared inputs, outputs and weights. */
#include "gen_internal.h"

#include "milc/assert.h"
#include "milc/blob.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

typedef struct Exec {
    const GenTemplate *t;
    Arena *a;
    DiagSink *d;
    GenProgram *p;
    int depth;
    int64_t steps; /* elements run: a budget, so no template runs forever */
} Exec;

enum { MAX_STEPS = 5000000 };

static int exec_list(Exec *e, const char *path, xmlNode *n, Scope *s);

static bool is_elem(xmlNode *n, const char *name) {
    return n->type == XML_ELEMENT_NODE && strcmp((const char *)n->name, name) == 0;
}

#define GROW(arr, n, cap)                                                                                              \
    do {                                                                                                               \
        if ((n) == (cap)) {                                                                                            \
            (cap) = (cap) ? (cap)*2 : 16;                                                                              \
            void *nv_ = arena_alloc(e->a, sizeof(*(arr)) * (size_t)(cap));                                             \
            if (n) memcpy(nv_, (arr), sizeof(*(arr)) * (size_t)(n));                                                   \
            (arr) = nv_;                                                                                               \
        }                                                                                                              \
    } while (0)

/* An attribute evaluated as an expression. */
static bool attr_eval(Exec *e, const char *path, xmlNode *n, Scope *s, const char *name, Value *out) {
    const char *src = gen_attr(e->a, n, name);
    SrcLoc at = gen_loc(e->d, path, n);
    if (!src) {
        diag_error(e->d, at, "<%s> needs a %s attribute", (const char *)n->name, name);
        return false;
    }
    ExprCtx x = {e->a, e->d, at, name};
    return expr_eval(&x, s, src, out);
}

/* An attribute as text with {expr} interpolated; NULL when absent (*err
 * false) or on error (*err true). */
static const char *attr_text(Exec *e, const char *path, xmlNode *n, Scope *s, const char *name, bool *err) {
    const char *src = gen_attr(e->a, n, name);
    if (!src) return NULL;
    ExprCtx x = {e->a, e->d, gen_loc(e->d, path, n), name};
    const char *r = expr_interp(&x, s, src);
    if (!r) *err = true;
    return r;
}

static bool ident_ok(const char *s) {
    if (!isalpha((unsigned char)*s) && *s != '_') return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

/* "1, dim, 1, S": comma-separated expressions (commas inside parentheses
 * belong to function calls). */
static bool eval_shape(Exec *e, const char *path, xmlNode *n, Scope *s, int *rank, int64_t *shape) {
    const char *src = gen_attr(e->a, n, "shape");
    SrcLoc at = gen_loc(e->d, path, n);
    if (!src) {
        diag_error(e->d, at, "<%s> needs a shape attribute", (const char *)n->name);
        return false;
    }
    *rank = 0;
    const char *p = src;
    while (*p == ' ') p++;
    if (!*p) return true; /* rank 0 */
    for (;;) {
        const char *q = p;
        int depth = 0;
        while (*q && !(depth == 0 && *q == ',')) {
            if (*q == '(') depth++;
            if (*q == ')') depth--;
            q++;
        }
        if (*rank == 8) {
            diag_error(e->d, at, "shape '%s' has more than 8 dimensions", src);
            return false;
        }
        ExprCtx x = {e->a, e->d, at, "shape"};
        Value v;
        if (!expr_eval(&x, s, arena_strndup(e->a, p, (size_t)(q - p)), &v)) return false;
        if (v.kind != VAL_INT || v.i < 1) {
            diag_error(e->d, at, "shape '%s': dimension %d is %s, not a positive integer", src, *rank,
                       value_str(e->a, v));
            return false;
        }
        shape[(*rank)++] = v.i;
        if (!*q) return true;
        p = q + 1;
    }
}

static const char *type_text(Arena *a, const char *dtype, int rank, const int64_t *shape) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "tensor<%s, [", dtype);
    for (int i = 0; i < rank; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]>");
    return arena_strdup(a, buf);
}

static void add_line(Exec *e, char *text, SrcLoc loc) {
    GenProgram *p = e->p;
    GROW(p->lines, p->nlines, p->cap_lines);
    p->lines[p->nlines++] = (GenLine){text, loc};
    p->text_bytes += strlen(text) + 9; /* the indent and newline it is printed with */
}

/* Give a statement `[name = string("VAR")]` when it has no name attribute,
 * VAR being the last result: every MIL statement needs one, and writing it
 * by hand on every template line is noise. */
static char *auto_name(Arena *a, const char *s) {
    const char *eq = strchr(s, '=');
    if (!eq) return (char *)s;
    const char *v1 = eq;
    while (v1 > s && isspace((unsigned char)v1[-1])) v1--;
    const char *v0 = v1;
    while (v0 > s && (isalnum((unsigned char)v0[-1]) || v0[-1] == '_')) v0--;
    if (v0 == v1) return (char *)s;
    const char *q = eq + 1;
    while (isspace((unsigned char)*q)) q++;
    while (isalnum((unsigned char)*q) || *q == '_') q++;
    while (isspace((unsigned char)*q)) q++;
    if (*q != '(') return (char *)s;
    int depth = 0;
    for (; *q; q++) {
        if (*q == '"') {
            q = strchr(q + 1, '"');
            if (!q) return (char *)s;
            continue;
        }
        if (*q == '(') depth++;
        if (*q == ')' && --depth == 0) break;
    }
    if (!*q) return (char *)s;
    q++;
    while (isspace((unsigned char)*q)) q++;
    int vl = (int)(v1 - v0);
    if (*q == ';') return arena_printf(a, "%.*s[name = string(\"%.*s\")]%s", (int)(q - s), s, vl, v0, q);
    if (*q != '[') return (char *)s;
    /* Is there a top-level `name =` in the attribute list? */
    depth = 0;
    for (const char *r = q; *r; r++) {
        if (*r == '"') {
            r = strchr(r + 1, '"');
            if (!r) break;
            continue;
        }
        if (*r == '[' || *r == '(') depth++;
        if (*r == ']' || *r == ')') depth--;
        if (depth == 1 && (r[-1] == '[' || r[-1] == ',' || r[-1] == ' ') && strncmp(r, "name", 4) == 0) {
            const char *t = r + 4;
            while (*t == ' ') t++;
            if (*t == '=') return (char *)s;
        }
        if (depth == 0) break;
    }
    return arena_printf(a, "%.*s[name = string(\"%.*s\"), %s", (int)(q - s), s, vl, v0, q + 1);
}

static int exec_mil(Exec *e, const char *path, xmlNode *n, Scope *s) {
    int line = (int)gx_line(n);
    const char *file = diag_intern(e->d, path);
    /* Join lines into statements (ended by ';'), remembering the line each
     * statement starts on: the line map's entries. */
    size_t cap = 1024, len = 0;
    char *buf = malloc(cap);
    int rc = 0;
    int stmt_line = 0;
    for (xmlNode *c = n->children; c; c = c->next) {
        if (c->type != XML_TEXT_NODE && c->type != XML_CDATA_SECTION_NODE) {
            if (c->type == XML_ELEMENT_NODE) {
                diag_error(e->d, gen_loc(e->d, path, c), "<mil> holds text only; close it before <%s>",
                           (const char *)c->name);
                rc = -1;
                break;
            }
            continue;
        }
        for (const char *q = (const char *)c->content; q && *q;) {
            const char *nl = strchr(q, '\n');
            size_t l = nl ? (size_t)(nl - q) : strlen(q);
            /* trim */
            const char *b = q, *t = q + l;
            while (b < t && isspace((unsigned char)*b)) b++;
            while (t > b && isspace((unsigned char)t[-1])) t--;
            if (t > b && !(t - b >= 2 && b[0] == '/' && b[1] == '/')) {
                if (len == 0) stmt_line = line;
                if (len + (size_t)(t - b) + 2 > cap) {
                    while (len + (size_t)(t - b) + 2 > cap) cap *= 2;
                    buf = realloc(buf, cap);
                    MILC_ASSERT(buf != NULL);
                }
                if (len) buf[len++] = ' ';
                memcpy(buf + len, b, (size_t)(t - b));
                len += (size_t)(t - b);
                buf[len] = 0;
                if (t[-1] == ';') { /* a statement ends here */
                    SrcLoc at = {file, stmt_line, 0};
                    ExprCtx x = {e->a, e->d, at, NULL};
                    char *txt = expr_interp(&x, s, buf);
                    if (!txt)
                        rc = -1;
                    else
                        add_line(e, auto_name(e->a, txt), at);
                    len = 0;
                }
            }
            if (!nl) break;
            line++;
            q = nl + 1;
        }
    }
    if (len && rc == 0) {
        diag_error(e->d, ((SrcLoc){file, stmt_line, 0}), "MIL statement does not end with ';'");
        rc = -1;
    }
    free(buf);
    return rc;
}

static int add_io(Exec *e, const char *path, xmlNode *n, Scope *s, bool output) {
    bool err = false;
    SrcLoc at = gen_loc(e->d, path, n);
    const char *name = attr_text(e, path, n, s, "name", &err);
    const char *dtype = attr_text(e, path, n, s, "dtype", &err);
    const char *state = attr_text(e, path, n, s, "state", &err);
    if (err) return -1;
    if (state && (output || (strcmp(state, "1") && strcmp(state, "0")))) {
        diag_error(e->d, at, "state=\"%s\": an <input> takes state=\"1\" or \"0\"", state);
        return -1;
    }
    if (!name || !ident_ok(name)) {
        diag_error(e->d, at, "<%s> needs a name that is a MIL identifier (got '%s')", (const char *)n->name,
                   name ? name : "");
        return -1;
    }
    GenIo io = {.name = (char *)name, .dtype = (char *)(dtype ? dtype : "fp16"), .state = state && !strcmp(state, "1")};
    if (!eval_shape(e, path, n, s, &io.rank, io.shape)) return -1;
    GenProgram *p = e->p;
    GenIo *list = output ? p->outputs : p->inputs;
    int cnt = output ? p->noutputs : p->ninputs;
    for (int i = 0; i < cnt; i++)
        if (strcmp(list[i].name, name) == 0) {
            diag_error(e->d, at, "%s '%s' declared twice", output ? "output" : "input", name);
            return -1;
        }
    if (output) {
        if (p->noutputs == p->cap_outputs) {
            int cap = p->cap_outputs;
            GROW(p->outputs, p->noutputs, p->cap_outputs);
            SrcLoc *nl = ARENA_ARRAY(e->a, SrcLoc, p->cap_outputs);
            if (cap) memcpy(nl, p->output_locs, sizeof(SrcLoc) * (size_t)p->noutputs);
            p->output_locs = nl;
        }
        p->output_locs[p->noutputs] = at;
        p->outputs[p->noutputs++] = io;
    } else {
        GROW(p->inputs, p->ninputs, p->cap_inputs);
        p->inputs[p->ninputs++] = io;
    }
    return 0;
}

static const char *const inits[] = {"normal",   "zeros",     "ones",        "fill", "rope_cos",
                                    "rope_sin", "rope_sign", "causal_mask", NULL};

static int add_weight(Exec *e, const char *path, xmlNode *n, Scope *s) {
    bool err = false;
    SrcLoc at = gen_loc(e->d, path, n);
    const char *name = attr_text(e, path, n, s, "name", &err);
    const char *dtype = attr_text(e, path, n, s, "dtype", &err);
    const char *source = attr_text(e, path, n, s, "source", &err);
    const char *transform = attr_text(e, path, n, s, "transform", &err);
    const char *init = gen_attr(e->a, n, "init");
    if (err) return -1;
    if (source && !*source) source = NULL; /* source="" from a block argument: none */
    if (transform && !*transform) transform = NULL;
    if (!name || !ident_ok(name)) {
        diag_error(e->d, at, "<weight> needs a name that is a MIL identifier (got '%s')", name ? name : "");
        return -1;
    }
    if (!dtype) dtype = "fp16";
    if (strcmp(dtype, "fp16") != 0 && strcmp(dtype, "fp32") != 0) {
        diag_error(e->d, at, "weight '%s': dtype '%s' (fp16 or fp32)", name, dtype);
        return -1;
    }
    GenWeight w = {.name = name, .source = source, .transform = transform, .loc = at};
    if (!eval_shape(e, path, n, s, &w.rank, w.shape)) return -1;
    w.count = 1;
    for (int i = 0; i < w.rank; i++) {
        if (w.count > (1ull << 36) / (uint64_t)w.shape[i]) {
            diag_error(e->d, at, "weight '%s' has more than 2^36 elements", name);
            return -1;
        }
        w.count *= (uint64_t)w.shape[i];
    }
    /* init="normal(0.02)": a name and expression arguments */
    if (!init) init = "zeros";
    const char *paren = strchr(init, '(');
    w.init = arena_strndup(e->a, init, paren ? (size_t)(paren - init) : strlen(init));
    while (*w.init == ' ') w.init++;
    bool known = false;
    for (int i = 0; inits[i]; i++) known |= strcmp(inits[i], w.init) == 0;
    if (!known) {
        diag_error(e->d, at,
                   "weight '%s': unknown initializer '%s' (normal, zeros, ones, fill, rope_cos, rope_sin, rope_sign, "
                   "causal_mask)",
                   name, w.init);
        return -1;
    }
    if (paren) {
        const char *end = strrchr(init, ')');
        if (!end || end < paren) {
            diag_error(e->d, at, "weight '%s': bad init '%s'", name, init);
            return -1;
        }
        const char *p = paren + 1;
        while (p < end) {
            const char *q = p;
            int depth = 0;
            while (q < end && !(depth == 0 && *q == ',')) {
                if (*q == '(') depth++;
                if (*q == ')') depth--;
                q++;
            }
            if (w.nargs == 4) {
                diag_error(e->d, at, "weight '%s': too many init arguments", name);
                return -1;
            }
            ExprCtx x = {e->a, e->d, at, "init"};
            Value v;
            if (!expr_eval(&x, s, arena_strndup(e->a, p, (size_t)(q - p)), &v)) return -1;
            if (v.kind == VAL_STR) {
                diag_error(e->d, at, "weight '%s': init arguments are numbers", name);
                return -1;
            }
            w.args[w.nargs++] = v.kind == VAL_INT ? (double)v.i : v.f;
            p = q < end ? q + 1 : q;
        }
    }
    int need = !strcmp(w.init, "normal") || !strcmp(w.init, "fill") || !strcmp(w.init, "rope_cos") ||
               !strcmp(w.init, "rope_sin");
    if (w.nargs != need) {
        diag_error(e->d, at, "weight '%s': %s() takes %d argument%s", name, w.init, need, need == 1 ? "" : "s");
        return -1;
    }
    GenProgram *p = e->p;
    for (int i = 0; i < p->nweights; i++)
        if (strcmp(p->weights[i].name, name) == 0) {
            diag_error(e->d, at, "weight '%s' declared twice", name);
            return -1;
        }
    /* Random values depend on the weight's name only (which carries the
     * global layer index), so chunks of one model compose. */
    w.seed_key = XXH3_64bits(name, strlen(name));
    uint64_t bytes = w.count * (strcmp(dtype, "fp16") == 0 ? 2 : 4);
    w.offset = p->blob_end;
    p->blob_end = (w.offset + 64 + bytes + 63) / 64 * 64;
    const char *ty = type_text(e->a, dtype, w.rank, w.shape);
    w.dtype = strcmp(dtype, "fp16") == 0 ? MILBLOB_FP16 : MILBLOB_FP32;
    GROW(p->weights, p->nweights, p->cap_weights);
    p->weights[p->nweights++] = w;
    add_line(e,
             arena_printf(e->a,
                          "%s %s = const()[name = string(\"%s\"), val = %s(BLOBFILE(path = "
                          "string(\"@model_path/weights/weight.bin\"), offset = uint64(%llu)))];",
                          ty, name, name, ty, (unsigned long long)w.offset),
             at);
    return 0;
}

static Value value_auto(Arena *a, const char *s) {
    char *end;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (*s && !*end && !errno) return (Value){.kind = VAL_INT, .i = i};
    double f = strtod(s, &end);
    if (*s && !*end && end != s) return (Value){.kind = VAL_FLOAT, .f = f};
    return (Value){.kind = VAL_STR, .s = s};
}

static int exec_include(Exec *e, const char *path, xmlNode *n, Scope *s) {
    SrcLoc at = gen_loc(e->d, path, n);
    const char *bname = gen_attr(e->a, n, "block");
    const GenBlock *b = bname ? gen_template_block(e->t, bname) : NULL;
    MILC_ASSERT(b != NULL); /* loaded at gen_template_load */
    if (e->depth >= 16) {
        diag_error(e->d, at, "includes nested too deeply (a block includes itself?)");
        return -1;
    }
    xmlNode *root = gx_root(b->doc);
    Scope *bs = scope_new(e->a, NULL); /* a block sees its arguments only */
    int rc = 0;
    for (xmlNode *c = root->children; c; c = c->next) {
        if (!is_elem(c, "arg")) continue;
        const char *an = gen_attr(e->a, c, "name");
        if (!an) {
            diag_error(e->d, gen_loc(e->d, b->path, c), "<arg> needs a name");
            rc = -1;
            continue;
        }
        bool err = false;
        const char *v = attr_text(e, path, n, s, an, &err);
        if (err) {
            rc = -1;
            continue;
        }
        if (!v) v = gen_attr(e->a, c, "default");
        if (!v) {
            diag_error(e->d, at, "block '%s' needs argument '%s'", bname, an);
            diag_note(e->d, gen_loc(e->d, b->path, c), "declared here");
            rc = -1;
            continue;
        }
        scope_set(e->a, bs, an, value_auto(e->a, v));
    }
    for (xmlAttr *attr = n->properties; attr; attr = attr->next) {
        const char *an = (const char *)attr->name;
        if (!strcmp(an, "block") || !strcmp(an, "if")) continue;
        bool found = false;
        for (xmlNode *c = root->children; c && !found; c = c->next) {
            if (!is_elem(c, "arg")) continue;
            xmlChar *cn = gx_prop(c, "name");
            found = cn && strcmp((char *)cn, an) == 0;
            gx_free(cn);
        }
        if (!found) {
            diag_error(e->d, at, "block '%s' has no argument '%s'", bname, an);
            rc = -1;
        }
    }
    if (rc) return -1;
    e->depth++;
    rc = exec_list(e, b->path, root->children, bs);
    e->depth--;
    return rc;
}

static int exec_one(Exec *e, const char *path, xmlNode *n, Scope *s, int *if_state) {
    const char *name = (const char *)n->name;
    SrcLoc at = gen_loc(e->d, path, n);
    bool is_if = !strcmp(name, "if"), is_else = !strcmp(name, "else");
    if (is_else) {
        if (*if_state < 0) {
            diag_error(e->d, at, "<else> must follow an <if>");
            return -1;
        }
        int taken = *if_state;
        *if_state = -1;
        return taken ? 0 : exec_list(e, path, n->children, s);
    }
    *if_state = -1;
    if (is_if) {
        Value v;
        if (!attr_eval(e, path, n, s, "test", &v)) return -1;
        *if_state = value_truthy(v);
        return *if_state ? exec_list(e, path, n->children, s) : 0; /* no new scope: lets inside are seen after */
    }
    /* Any other statement may carry if="expr". */
    if (gx_has_prop(n, "if")) {
        Value v;
        if (!attr_eval(e, path, n, s, "if", &v)) return -1;
        if (!value_truthy(v)) return 0;
    }
    if (!strcmp(name, "let")) {
        const char *ln = gen_attr(e->a, n, "name");
        if (!ln || !ident_ok(ln)) {
            diag_error(e->d, at, "<let> needs a name that is an identifier");
            return -1;
        }
        Value v;
        if (!attr_eval(e, path, n, s, "value", &v)) return -1;
        scope_set(e->a, s, ln, v);
        return 0;
    }
    if (!strcmp(name, "require")) {
        Value v;
        if (!attr_eval(e, path, n, s, "test", &v)) return -1;
        if (value_truthy(v)) return 0;
        bool err = false;
        const char *msg = attr_text(e, path, n, s, "message", &err);
        if (err) return -1;
        if (msg)
            diag_error(e->d, at, "%s", msg);
        else
            diag_error(e->d, at, "requirement failed: %s", gen_attr(e->a, n, "test"));
        return -1;
    }
    if (!strcmp(name, "repeat")) {
        const char *var = gen_attr(e->a, n, "var");
        if (!var || !ident_ok(var)) {
            diag_error(e->d, at, "<repeat> needs var=\"NAME\"");
            return -1;
        }
        Value cnt;
        if (!attr_eval(e, path, n, s, "count", &cnt)) return -1;
        if (cnt.kind != VAL_INT || cnt.i < 0 || cnt.i > 100000) {
            diag_error(e->d, at, "<repeat> count is %s, not an integer in 0..100000", value_str(e->a, cnt));
            return -1;
        }
        for (int64_t i = 0; i < cnt.i; i++) {
            Scope *is = scope_new(e->a, s);
            scope_set(e->a, is, var, (Value){.kind = VAL_INT, .i = i});
            if (exec_list(e, path, n->children, is) != 0) return -1;
        }
        return 0;
    }
    if (!strcmp(name, "include")) return exec_include(e, path, n, s);
    if (!strcmp(name, "input")) return add_io(e, path, n, s, false);
    if (!strcmp(name, "output")) return add_io(e, path, n, s, true);
    if (!strcmp(name, "weight")) return add_weight(e, path, n, s);
    if (!strcmp(name, "mil")) return exec_mil(e, path, n, s);
    if (!strcmp(name, "param") || !strcmp(name, "doc") || !strcmp(name, "arg")) return 0;
    diag_error(e->d, at, "unknown element <%s>", name);
    return -1;
}

static int exec_list(Exec *e, const char *path, xmlNode *n, Scope *s) {
    int if_state = -1;
    for (; n; n = n->next) {
        if (n->type != XML_ELEMENT_NODE) continue;
        if (++e->steps > MAX_STEPS) {
            diag_error(e->d, gen_loc(e->d, path, n), "the template runs more than %d elements; is a count too large?",
                       MAX_STEPS);
            return -1;
        }
        if (exec_one(e, path, n, s, &if_state) != 0) return -1;
        if (e->d->errors > 0 && e->d->truncated) return -1;
        if (e->p->max_text && e->p->text_bytes > e->p->max_text) {
            /* Parsing and checking take ~30 bytes per byte of text: stop
             * before the program outgrows the memory limit, not after. */
            diag_error(e->d, gen_loc(e->d, path, n),
                       "the template generates more than %llu bytes of MIL, the most the memory limit allows"
                       " (--max-memory); is a count too large?",
                       (unsigned long long)e->p->max_text);
            return -1;
        }
    }
    return 0;
}

int gen_expand(const GenTemplate *t, Arena *a, Scope *globals, uint64_t max_text, GenProgram *p, DiagSink *d) {
    memset(p, 0, sizeof *p);
    p->blob_end = 64;
    p->max_text = max_text;
    Exec e = {t, a, d, p, 0, 0};
    xmlNode *root = gx_root(t->xml);
    return exec_list(&e, t->path, root->children, globals);
}

/* Only the top-level let/require statements: derived values and parameter
 * checks, without generating anything. */
int gen_resolve_globals(const GenTemplate *t, Arena *a, Scope *globals, DiagSink *d) {
    GenProgram scratch;
    memset(&scratch, 0, sizeof scratch);
    Exec e = {t, a, d, &scratch, 0, 0};
    xmlNode *root = gx_root(t->xml);
    int rc = 0, if_state = -1;
    for (xmlNode *n = root->children; n; n = n->next) {
        if (!is_elem(n, "let") && !is_elem(n, "require")) continue;
        if (exec_one(&e, t->path, n, globals, &if_state) != 0) rc = -1;
        if (rc && is_elem(n, "let")) break; /* later values would cascade */
    }
    return rc;
}
