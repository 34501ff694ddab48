/* chip.c — reading a chip's parameter file (data/ane/NAME.json) for the ANE
 * projection.  Users edit these files with their own measurements, so the
 * file is untrusted: every field is checked for type and range, a missing or
 * unknown one is refused, and the message names the field. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "milc/estimate.h"

typedef struct {
    const char *what;
    char *err;
    size_t errlen;
} Ctx;

static int fail(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Ctx *c, const char *fmt, ...) {
    int n = snprintf(c->err, c->errlen, "%s: ", c->what);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < c->errlen) vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* A number field within [lo, hi]. */
static int num(Ctx *c, json_t *o, const char *key, double lo, double hi, double *v) {
    json_t *j = json_object_get(o, key);
    if (!j) return fail(c, "missing field '%s'", key);
    if (!json_is_number(j)) return fail(c, "field '%s' must be a number", key);
    *v = json_number_value(j);
    if (!isfinite(*v) || *v < lo || *v > hi) return fail(c, "field '%s' = %g is outside [%g, %g]", key, *v, lo, hi);
    return 0;
}

static int util_points(Ctx *c, json_t *o, EstChip *out) {
    json_t *u = json_object_get(o, "utilization");
    if (!u) return fail(c, "missing field 'utilization'");
    if (!json_is_array(u) || json_array_size(u) < 1 || json_array_size(u) > EST_MAX_UTIL_POINTS)
        return fail(c, "field 'utilization' must be a list of 1 to %d [ops, share] pairs", EST_MAX_UTIL_POINTS);
    for (size_t i = 0; i < json_array_size(u); i++) {
        json_t *p = json_array_get(u, i);
        json_t *a = json_array_get(p, 0), *b = json_array_get(p, 1);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_number(a) || !json_is_number(b))
            return fail(c, "utilization[%zu] must be [ops per dispatch, share of peak]", i);
        double ops = json_number_value(a), share = json_number_value(b);
        if (!(ops >= 1 && ops <= 1e6) || !(share > 0 && share <= 1))
            return fail(c, "utilization[%zu] = [%g, %g]: ops must be in [1, 1e6], share in (0, 1]", i, ops, share);
        if (i > 0 && !(ops > out->util_ops[i - 1]))
            return fail(c, "utilization[%zu]: ops must increase from one pair to the next", i);
        out->util_ops[i] = ops, out->util[i] = share;
    }
    out->nutil = (int)json_array_size(u);
    return 0;
}

static const char *const known[] = {"schema",
                                    "chip",
                                    "fp16_tflops",
                                    "memory_gbs",
                                    "dispatch_ms_small",
                                    "dispatch_ms",
                                    "small_bytes",
                                    "production_bytes",
                                    "coreml_factor",
                                    "utilization",
                                    "compile_ms",
                                    "mode0_compile_factor",
                                    "min_seq",
                                    "sram_bytes",
                                    "sram_cliff",
                                    "max_program_bytes",
                                    "sources",
                                    NULL};

static int check_keys(Ctx *c, json_t *o) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        int i = 0;
        while (known[i] && strcmp(known[i], k) != 0) i++;
        if (!known[i]) return fail(c, "unknown field '%s'", k);
    }
    json_t *s = json_object_get(o, "schema"), *n = json_object_get(o, "chip");
    if (!json_is_string(s) || strcmp(json_string_value(s), "milc-ane-chip/1") != 0)
        return fail(c, "field 'schema' must be \"milc-ane-chip/1\"");
    if (!json_is_string(n) || json_string_length(n) == 0 || json_string_length(n) >= 64)
        return fail(c, "field 'chip' must be a name of 1 to 63 characters");
    json_t *src = json_object_get(o, "sources");
    if (src && !json_is_object(src) && !json_is_string(src))
        return fail(c, "field 'sources' must be text or an object");
    return 0;
}

static int fields(Ctx *c, json_t *o, EstChip *out) {
    double seq;
    if (num(c, o, "fp16_tflops", 1e-3, 1e4, &out->fp16_tflops) ||
        num(c, o, "memory_gbs", 1e-3, 1e5, &out->memory_gbs) ||
        num(c, o, "dispatch_ms_small", 0, 1e3, &out->dispatch_ms_small) ||
        num(c, o, "dispatch_ms", 0, 1e3, &out->dispatch_ms) || num(c, o, "small_bytes", 1, 1e15, &out->small_bytes) ||
        num(c, o, "production_bytes", 1, 1e15, &out->production_bytes) ||
        num(c, o, "coreml_factor", 1, 100, &out->coreml_factor) || num(c, o, "compile_ms", 0, 1e7, &out->compile_ms) ||
        num(c, o, "mode0_compile_factor", 1, 10, &out->mode0_compile_factor) || num(c, o, "min_seq", 1, 4096, &seq) ||
        num(c, o, "sram_bytes", 0, 1e15, &out->sram_bytes) || num(c, o, "sram_cliff", 0, 0.99, &out->sram_cliff) ||
        num(c, o, "max_program_bytes", 0, 1e15, &out->max_program_bytes))
        return -1;
    if (seq != floor(seq)) return fail(c, "field 'min_seq' must be a whole number");
    out->min_seq = (int)seq;
    if (!(out->production_bytes > out->small_bytes)) return fail(c, "'production_bytes' must exceed 'small_bytes'");
    return util_points(c, o, out);
}

int est_chip_parse(const char *text, size_t len, const char *what, EstChip *out, char *err, size_t errlen) {
    Ctx c = {what ? what : "chip file", err, errlen};
    memset(out, 0, sizeof *out);
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return fail(&c, "line %d, column %d: %s", je.line, je.column, je.text);
    int rc = json_is_object(o) ? 0 : fail(&c, "must hold one JSON object");
    if (rc == 0) rc = check_keys(&c, o);
    if (rc == 0) rc = fields(&c, o, out);
    if (rc == 0) snprintf(out->name, sizeof out->name, "%s", json_string_value(json_object_get(o, "chip")));
    json_decref(o);
    return rc;
}
