/* diag.c — the diagnostic sink and its renderers. */
#include "milc/diag.h"
#include "milc/assert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct DiagSource {
    DiagSource *next;
    char *name;
    char *text;
    size_t len;
};

void diag_init(DiagSink *s) { memset(s, 0, sizeof *s); }

void diag_clear(DiagSink *s) {
    for (int i = 0; i < s->count; i++) free(s->items[i].msg);
    s->count = s->errors = s->warnings = s->system_errors = 0;
    s->truncated = false;
}

void diag_free(DiagSink *s) {
    for (int i = 0; i < s->count; i++) free(s->items[i].msg);
    free(s->items);
    DiagSource *src = s->sources;
    while (src) {
        DiagSource *next = src->next;
        free(src->name);
        free(src->text);
        free(src);
        src = next;
    }
    memset(s, 0, sizeof *s);
}

static DiagSource *find_source(const DiagSink *s, const char *name) {
    for (DiagSource *src = s->sources; src; src = src->next)
        if (src->name == name || strcmp(src->name, name) == 0) return src;
    return NULL;
}

static DiagSource *new_source(DiagSink *s, const char *name) {
    DiagSource *src = calloc(1, sizeof *src);
    MILC_ASSERT(src != NULL);
    src->name = strdup(name);
    MILC_ASSERT(src->name != NULL);
    src->next = s->sources;
    s->sources = src;
    return src;
}

const char *diag_intern(DiagSink *s, const char *name) {
    DiagSource *src = find_source(s, name);
    if (!src) src = new_source(s, name);
    return src->name;
}

const char *diag_add_source(DiagSink *s, const char *name, const char *text, size_t len) {
    DiagSource *src = find_source(s, name);
    if (!src) src = new_source(s, name);
    free(src->text);
    src->text = malloc(len + 1);
    MILC_ASSERT(src->text != NULL);
    memcpy(src->text, text, len);
    src->text[len] = 0;
    src->len = len;
    return src->name;
}

void diag_vadd(DiagSink *s, DiagLevel level, SrcLoc loc, const char *fmt, va_list ap) {
    int cap = s->max_errors > 0 ? s->max_errors : 100;
    if (level == DIAG_ERROR) {
        s->errors++;
        if (s->errors > cap) {
            s->truncated = true;
            return;
        }
    } else if (s->truncated) {
        return; /* notes and warnings of dropped errors would confuse */
    }
    if (level == DIAG_WARNING) s->warnings++;
    if (s->count == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->items = realloc(s->items, sizeof(Diag) * (size_t)s->cap);
        MILC_ASSERT(s->items != NULL);
    }
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *msg = malloc((size_t)(n > 0 ? n : 0) + 1);
    MILC_ASSERT(msg != NULL);
    vsnprintf(msg, (size_t)(n > 0 ? n : 0) + 1, fmt, ap2);
    va_end(ap2);
    s->items[s->count++] = (Diag){level, loc, msg};
}

void diag_add(DiagSink *s, DiagLevel level, SrcLoc loc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(s, level, loc, fmt, ap);
    va_end(ap);
}

bool diag_failed(const DiagSink *s) { return s->errors > 0 || (s->warn_as_error && s->warnings > 0); }

/* A growable string for the renderers. */
typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void buf_put(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = realloc(b->p, cap);
        MILC_ASSERT(b->p != NULL);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        buf_put(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    MILC_ASSERT(big != NULL);
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    buf_put(b, big, (size_t)n);
    free(big);
}

static const char *level_name(DiagLevel l) {
    return l == DIAG_ERROR ? "error" : l == DIAG_WARNING ? "warning" : "note";
}

/* Find line `line` (1-based) of a source; returns its start and length. */
static bool source_line(const DiagSource *src, int line, const char **start, size_t *len) {
    if (!src || !src->text || line < 1) return false;
    const char *p = src->text, *end = src->text + src->len;
    for (int l = 1; l < line; l++) {
        p = memchr(p, '\n', (size_t)(end - p));
        if (!p) return false;
        p++;
    }
    const char *e = memchr(p, '\n', (size_t)(end - p));
    if (!e) e = end;
    if (e > p && e[-1] == '\r') e--;
    *start = p;
    *len = (size_t)(e - p);
    return true;
}

char *diag_render(const DiagSink *s) {
    Buf b = {0};
    buf_put(&b, "", 0);
    for (int i = 0; i < s->count; i++) {
        const Diag *d = &s->items[i];
        if (d->loc.file && d->loc.line > 0 && d->loc.col > 0)
            buf_printf(&b, "%s:%d:%d: ", d->loc.file, d->loc.line, d->loc.col);
        else if (d->loc.file && d->loc.line > 0)
            buf_printf(&b, "%s:%d: ", d->loc.file, d->loc.line);
        else if (d->loc.file)
            buf_printf(&b, "%s: ", d->loc.file);
        buf_printf(&b, "%s: %s\n", level_name(d->level), d->msg);
        const char *ls;
        size_t ll;
        if (d->loc.file && source_line(find_source(s, d->loc.file), d->loc.line, &ls, &ll)) {
            /* Tabs kept as tabs so the caret lines up under them. */
            buf_printf(&b, "    %.*s\n", (int)ll, ls);
            if (d->loc.col > 0) {
                buf_put(&b, "    ", 4);
                for (int c = 1; c < d->loc.col && (size_t)(c - 1) < ll; c++)
                    buf_put(&b, ls[c - 1] == '\t' ? "\t" : " ", 1);
                buf_put(&b, "^\n", 2);
            }
        }
    }
    if (s->truncated) {
        int cap = s->max_errors > 0 ? s->max_errors : 100;
        buf_printf(&b, "note: too many errors; stopped after %d\n", cap);
    }
    return b.p;
}
