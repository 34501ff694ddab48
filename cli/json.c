/* json.c — the CLI's JSON writer over Jansson (json.h). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"

/* Length of the well-formed UTF-8 sequence at s (1..4), or 0. */
static int utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    int n = s[0] >= 0xC2 && s[0] <= 0xDF ? 2 : s[0] >= 0xE0 && s[0] <= 0xEF ? 3 : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    /* Overlong, surrogate and beyond-U+10FFFF forms are not UTF-8 either. */
    if ((n == 3 && s[0] == 0xE0 && s[1] < 0xA0) || (n == 3 && s[0] == 0xED && s[1] >= 0xA0) ||
        (n == 4 && s[0] == 0xF0 && s[1] < 0x90) || (n == 4 && s[0] == 0xF4 && s[1] >= 0x90))
        return 0;
    return n;
}

json_t *cli_json_str(const char *s) {
    if (!s) return json_null();
    size_t n = strlen(s), k = 0;
    char *buf = malloc(3 * n + 1); /* a bad byte becomes the 3 bytes of U+FFFD */
    if (!buf) return NULL;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int l = utf8_len(p);
        if (l)
            memcpy(buf + k, p, (size_t)l), k += (size_t)l, p += l;
        else
            memcpy(buf + k, "\xEF\xBF\xBD", 3), k += 3, p++;
    }
    json_t *v = json_stringn(buf, k);
    free(buf);
    return v;
}

json_t *cli_json_real(double v, int decimals) {
    if (!isfinite(v)) return json_null();
    double scale = pow(10, decimals);
    return json_real(round(v * scale) / scale);
}

json_t *cli_json_g(double v) {
    if (!isfinite(v)) return json_null();
    char buf[32];
    snprintf(buf, sizeof buf, "%.6g", v);
    /* Digits alone ("45") stay an integer; "1.5" and "1.41957e+07" a real. */
    if (strspn(buf, "-0123456789") == strlen(buf)) return json_integer(strtoll(buf, NULL, 10));
    return json_real(strtod(buf, NULL));
}

json_t *cli_json_obj(const char *key, ...) {
    json_t *o = json_object();
    bool ok = o != NULL;
    va_list ap;
    va_start(ap, key);
    for (const char *k = key; k; k = va_arg(ap, const char *)) {
        json_t *v = va_arg(ap, json_t *);
        ok &= v != NULL && json_object_set_new(o, k, v) == 0;
    }
    va_end(ap);
    if (!ok) json_decref(o);
    return ok ? o : NULL;
}

void cli_json_push(json_t *a, json_t *v) {
    if (a && v)
        json_array_append_new(a, v);
    else
        json_decref(v);
}

int cli_json_print(FILE *f, json_t *v) {
    /* 15 significant digits: a rounded real prints as written ("1.25"). */
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15) | JSON_ENCODE_ANY) : NULL;
    json_decref(v);
    if (!s) {
        cli_error("out of memory");
        return -1;
    }
    fputs(s, f);
    fputc('\n', f);
    free(s);
    return 0;
}

void cli_json_diags(FILE *f, const DiagSink *d) {
    static const char *const levels[] = {[DIAG_ERROR] = "error", [DIAG_WARNING] = "warning", [DIAG_NOTE] = "note"};
    json_t *a = json_array();
    for (int i = 0; i < d->count; i++) {
        const Diag *g = &d->items[i];
        cli_json_push(a, cli_json_obj("file", cli_json_str(g->loc.file ? g->loc.file : ""), "line",
                                      json_integer(g->loc.line), "col", json_integer(g->loc.col), "level",
                                      json_string(levels[g->level]), "message", cli_json_str(g->msg), NULL));
    }
    cli_json_print(f, cli_json_obj("diagnostics", a, NULL));
}
