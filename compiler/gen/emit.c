/* emit.c — configurations (parameters, presets, resolution, the canonical
 * parameter set) and generation: expand the template, assemble the MIL text
 * with a line map, make it canonical through the front end, write weights
 * and the manifest. */
#include "gen_internal.h"

#include "milc/assert.h"
#include "milc/blob.h"
#include "milc/mil.h"
#include "milc/osfile.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct GenConfig {
    GenTemplate *t;
    Arena arena;
    Value *vals; /* one per parameter */
    bool resolved;
    Scope *globals; /* parameters + top-level lets, after resolve */
    const char *preset;
};

static const char *type_word(GenParamType t) {
    return t == GEN_PARAM_INT ? "an integer" : t == GEN_PARAM_FLOAT ? "a number" : "a string";
}

/* Parse and range-check a value for parameter i; at is where it came from. */
static int set_value(GenConfig *c, int i, const char *text, SrcLoc at, DiagSink *d) {
    const GenParam *p = &c->t->params[i];
    Value v;
    if (!value_parse(&c->arena, p->type, text, &v)) {
        diag_error(d, at, "--%s: expected %s, got '%s'", p->name, type_word(p->type), text);
        return -1;
    }
    if (p->type == GEN_PARAM_INT || p->type == GEN_PARAM_FLOAT) {
        double x = p->type == GEN_PARAM_INT ? (double)v.i : v.f;
        if ((p->has_min && x < p->min) || (p->has_max && x > p->max)) {
            if (p->has_min && p->has_max)
                diag_error(d, at, "--%s: %s is outside %g..%g", p->name, text, p->min, p->max);
            else if (p->has_min)
                diag_error(d, at, "--%s: %s is below the minimum %g", p->name, text, p->min);
            else
                diag_error(d, at, "--%s: %s is above the maximum %g", p->name, text, p->max);
            return -1;
        }
    }
    if (p->type == GEN_PARAM_ENUM) {
        bool ok = false;
        for (int k = 0; k < p->nchoices; k++) ok |= strcmp(p->choices[k], text) == 0;
        if (!ok) {
            char list[256] = "";
            for (int k = 0; k < p->nchoices; k++) {
                size_t n = strlen(list);
                snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", p->choices[k]);
            }
            diag_error(d, at, "--%s: '%s' is not one of %s", p->name, text, list);
            return -1;
        }
    }
    c->vals[i] = v;
    c->resolved = false;
    return 0;
}

static GenConfig *config_new(GenTemplate *t, DiagSink *d) {
    GenConfig *c = calloc(1, sizeof *c);
    MILC_ASSERT(c != NULL);
    c->t = t;
    arena_init(&c->arena);
    c->vals = ARENA_ARRAY(&c->arena, Value, t->nparams + 1);
    int rc = 0;
    for (int i = 0; i < t->nparams; i++) {
        SrcLoc at = {diag_intern(d, t->path), t->param_lines[i], 0};
        if (set_value(c, i, t->params[i].default_value, at, d) != 0) rc = -1;
    }
    if (rc) {
        c->t = NULL; /* the caller still owns t on failure */
        gen_config_free(c);
        return NULL;
    }
    return c;
}

GenConfig *gen_config_open(const GenSearchPath *sp, const char *name, DiagSink *d) {
    /* A template of that name wins over a preset of that name: the preset
     * "gpt2" and the template "gpt2" describe the same model anyway. */
    xmlDoc *pdoc = NULL;
    char *pbytes = NULL, *ppath = NULL;
    xmlNode *preset = NULL;
    const char *tname = name;
    char *tpath = strcmp(name, "presets") != 0 ? gen_resolve(sp, name) : NULL;
    if (!tpath) {
        DiagSink quiet; /* a broken presets.xml must not hide "template not found" */
        diag_init(&quiet);
        preset = gen_find_preset(sp, name, &pdoc, &pbytes, &ppath, &quiet);
        diag_free(&quiet);
        if (preset) {
            xmlChar *tn = gx_prop(preset, "template");
            if (!tn) {
                diag_error(d, gen_loc(d, ppath, preset), "preset '%s' has no template attribute", name);
                gx_free_doc(pdoc);
                free(pbytes);
                free(ppath);
                return NULL;
            }
            tname = strdup((char *)tn);
            gx_free(tn);
        }
    }
    free(tpath);
    GenTemplate *t = gen_template_load(sp, tname, d);
    GenConfig *c = t ? config_new(t, d) : NULL;
    if (!c && t) gen_template_free(t);
    if (c && preset) {
        c->preset = arena_strdup(&c->arena, name);
        for (xmlAttr *a = preset->properties; a; a = a->next) {
            const char *an = (const char *)a->name;
            if (!strcmp(an, "name") || !strcmp(an, "template") || !strcmp(an, "doc")) continue;
            xmlChar *v = gx_prop(preset, (const char *)a->name);
            SrcLoc at = gen_loc(d, ppath, preset);
            int i = gen_template_find_param(t, an);
            if (i < 0) diag_error(d, at, "preset '%s': template '%s' has no parameter '%s'", name, tname, an);
            if (i < 0 || set_value(c, i, (char *)v, at, d) != 0) {
                gx_free(v);
                gen_config_free(c);
                c = NULL;
                break;
            }
            gx_free(v);
        }
    }
    if (preset) {
        gx_free_doc(pdoc);
        free(pbytes);
        free(ppath);
        free((char *)tname);
    }
    return c;
}

void gen_config_free(GenConfig *c) {
    if (!c) return;
    gen_template_free(c->t);
    arena_free(&c->arena);
    free(c);
}

const GenTemplate *gen_config_template(const GenConfig *c) { return c->t; }
const char *gen_config_preset(const GenConfig *c) { return c->preset; }

int gen_config_set(GenConfig *c, const char *option, const char *value, DiagSink *d) {
    int i = gen_template_find_param(c->t, option);
    if (i < 0) {
        const char *o = option[0] == '-' && option[1] == '-' ? option + 2 : option;
        diag_error(d, (SrcLoc){0}, "template '%s' has no parameter '%s' (see: milc templates show %s)", c->t->name, o,
                   c->t->name);
        return -1;
    }
    return set_value(c, i, value, (SrcLoc){0}, d);
}

static Scope *param_scope(GenConfig *c, Arena *a) {
    Scope *s = scope_new(a, NULL);
    for (int i = 0; i < c->t->nparams; i++) scope_set(a, s, c->t->params[i].name, c->vals[i]);
    return s;
}

int gen_config_resolve(GenConfig *c, DiagSink *d) {
    c->globals = param_scope(c, &c->arena);
    c->resolved = gen_resolve_globals(c->t, &c->arena, c->globals, d) == 0;
    return c->resolved ? 0 : -1;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

char *gen_config_canonical(const GenConfig *c) {
    if (!c->resolved) return NULL;
    int n = c->t->nparams;
    const char **names = malloc(sizeof(char *) * (size_t)(n + 1));
    MILC_ASSERT(names != NULL);
    for (int i = 0; i < n; i++) names[i] = c->t->params[i].name;
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    Arena a;
    arena_init(&a);
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    MILC_ASSERT(out != NULL);
    for (int k = -1; k < n; k++) {
        const char *line;
        if (k < 0)
            line = arena_printf(&a, "template=%s\n", c->t->name);
        else
            line = arena_printf(&a, "%s=%s\n", names[k], value_str(&a, *scope_get(c->globals, names[k])));
        size_t l = strlen(line);
        while (len + l + 1 > cap) {
            cap *= 2;
            out = realloc(out, cap);
            MILC_ASSERT(out != NULL);
        }
        memcpy(out + len, line, l + 1);
        len += l;
    }
    arena_free(&a);
    free(names);
    return out;
}

bool gen_config_get_int(const GenConfig *c, const char *name, int64_t *out) {
    const Value *v = c->globals ? scope_get(c->globals, name) : NULL;
    if (!v || v->kind != VAL_INT) return false;
    *out = v->i;
    return true;
}

bool gen_config_get_float(const GenConfig *c, const char *name, double *out) {
    const Value *v = c->globals ? scope_get(c->globals, name) : NULL;
    if (!v || v->kind != VAL_FLOAT) return false;
    *out = v->f;
    return true;
}

bool gen_config_get_str(const GenConfig *c, const char *name, const char **out) {
    const Value *v = c->globals ? scope_get(c->globals, name) : NULL;
    if (!v || v->kind != VAL_STR) return false;
    *out = v->s;
    return true;
}

/* ---- generation ---- */

typedef struct {
    char *p;
    size_t n, cap;
} Buf;
static void bput(Buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        while (b->n + n + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 4096;
        b->p = realloc(b->p, b->cap);
        MILC_ASSERT(b->p != NULL);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void bputs(Buf *b, const char *s) { bput(b, s, strlen(s)); }

static char *shape_text(Arena *a, const GenIo *io) {
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%stensor<%s, [", io->state ? "state<" : "", io->dtype);
    for (int i = 0; i < io->rank; i++)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%" PRId64, i ? ", " : "", io->shape[i]);
    snprintf(buf + n, sizeof buf - (size_t)n, "]>%s", io->state ? ">" : "");
    return arena_strdup(a, buf);
}

static int mkdir_p(const char *dir, DiagSink *d) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) break;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) {
        diag_syserror(d, ((SrcLoc){diag_intern(d, dir), 0, 0}), "cannot create directory: %s", strerror(errno));
        return -1;
    }
    return 0;
}

static GenIo copy_io(const GenIo *io) {
    GenIo r = *io;
    r.name = strdup(io->name);
    r.dtype = strdup(io->dtype);
    return r;
}

static json_t *io_json(const GenIo *io) {
    json_t *o = json_object(), *sh = json_array();
    for (int i = 0; i < io->rank; i++) json_array_append_new(sh, json_integer(io->shape[i]));
    json_object_set_new(o, "name", json_string(io->name));
    json_object_set_new(o, "dtype", json_string(io->dtype));
    json_object_set_new(o, "shape", sh);
    if (io->state) json_object_set_new(o, "state", json_true());
    return o;
}

static char *manifest(GenConfig *c, const GenOptions *o, const GenProgram *p, uint64_t wbytes) {
    json_t *m = json_object();
    json_object_set_new(m, "format", json_string("milc-manifest"));
    json_object_set_new(m, "version", json_integer(1));
    json_object_set_new(m, "template", json_string(c->t->name));
    json_object_set_new(m, "preset", c->preset ? json_string(c->preset) : json_null());
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", c->t->digest[i]);
    json_object_set_new(m, "template_digest", json_string(hex));
    json_t *params = json_object();
    int n = c->t->nparams;
    const char **names = malloc(sizeof(char *) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) names[i] = c->t->params[i].name;
    qsort(names, (size_t)n, sizeof *names, name_cmp);
    for (int k = 0; k < n; k++) {
        const Value *v = scope_get(c->globals, names[k]);
        json_object_set_new(params, names[k],
                            v->kind == VAL_INT     ? json_integer(v->i)
                            : v->kind == VAL_FLOAT ? json_real(v->f)
                                                   : json_string(v->s));
    }
    free(names);
    json_object_set_new(m, "params", params);
    json_t *w = json_object();
    json_object_set_new(w, "source", json_string(o && o->weights ? o->weights : "random:0"));
    json_object_set_new(w, "file", json_string("weights/weight.bin"));
    json_object_set_new(w, "count", json_integer(p->nweights));
    json_object_set_new(w, "bytes", json_integer((json_int_t)wbytes));
    json_object_set_new(m, "weights", w);
    json_t *in = json_array(), *out = json_array();
    for (int i = 0; i < p->ninputs; i++) json_array_append_new(in, io_json(&p->inputs[i]));
    for (int i = 0; i < p->noutputs; i++) json_array_append_new(out, io_json(&p->outputs[i]));
    json_object_set_new(m, "inputs", in);
    json_object_set_new(m, "outputs", out);
    char *s = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(m);
    size_t l = strlen(s);
    char *r = malloc(l + 2);
    memcpy(r, s, l);
    r[l] = '\n';
    r[l + 1] = 0;
    free(s);
    return r;
}

/* Move diagnostics from the front end's sink to d, adding under each one
 * in the generated text a note with the template line that produced it. */
static void forward_diags(DiagSink *from, DiagSink *d, const char *genfile, const SrcLoc *map, int nmap) {
    for (int i = 0; i < from->count; i++) {
        const Diag *x = &from->items[i];
        SrcLoc loc = x->loc;
        if (loc.file) loc.file = diag_intern(d, loc.file);
        diag_add(d, x->level, loc, "%s", x->msg);
        if (x->level != DIAG_NOTE && x->loc.file && strcmp(x->loc.file, genfile) == 0 && x->loc.line >= 1 &&
            x->loc.line <= nmap && map[x->loc.line - 1].file)
            diag_note(d, map[x->loc.line - 1], "generated from this template line");
    }
}

/* The weights of p, from o's source, to the file at path or into *image. */
static int write_weights(const GenProgram *p, const GenOptions *o, const char *path, MilBlobImage *image,
                         uint8_t digest[16], DiagSink *d) {
    GenWeights *own = NULL;
    const GenWeights *src = o->source;
    if (!src && gen_weights_open_unkeyed(o->weights, &own, d) != 0) return -1;
    if (!src) src = own;
    int rc = path ? gen_weights_write(p, src, path, o->scratch, digest, d) : gen_weights_make(p, src, o, image, digest, d);
    gen_weights_close(own);
    return rc;
}

static void sort_io(GenIo *io, SrcLoc *locs, int n) {
    for (int i = 1; i < n; i++) /* insertion sort: a few dozen names, stable */
        for (int j = i; j > 0 && strcmp(io[j - 1].name, io[j].name) > 0; j--) {
            GenIo t = io[j];
            io[j] = io[j - 1];
            io[j - 1] = t;
            if (locs) {
                SrcLoc l = locs[j];
                locs[j] = locs[j - 1];
                locs[j - 1] = l;
            }
        }
}

int gen_config_expand(GenConfig *c, Arena *a, GenProgram *p, DiagSink *d) {
    if (!c->resolved && gen_config_resolve(c, d) != 0) return -1;
    return gen_expand(c->t, a, param_scope(c, a), 0, p, d);
}

int gen_config_weight_bytes(GenConfig *c, uint64_t *bytes, DiagSink *d) {
    Arena a;
    arena_init(&a);
    GenProgram p;
    int rc = gen_config_expand(c, &a, &p, d);
    if (rc == 0) *bytes = p.blob_end;
    arena_free(&a);
    return rc;
}

int gen_generate(GenConfig *c, const GenOptions *o, const char *dir, GenResult *r, DiagSink *d) {
    memset(r, 0, sizeof *r);
    if (!c->resolved && gen_config_resolve(c, d) != 0) return -1;
    GenOptions defaults = {.weights = NULL, .compile_mode = -1};
    if (!o) o = &defaults;
    Arena a;
    arena_init(&a);
    GenProgram p;
    Buf b = {0};
    SrcLoc *map = NULL;
    int rc = -1, nmap = 0;
    char *canon = NULL;
    /* Released at done: set before the first goto can jump past them. */
    MilBlobImage image = {0};
    MilBlobFile imagef = {0};
    if (gen_expand(c->t, &a, param_scope(c, &a), o->max_memory / 32, &p, d) != 0) goto done;
    /* A build holds every weight in memory (its artifact); emit streams them
     * to the file, so its weights may be larger than the limit. */
    if (o->max_memory && dir && (o->scratch || o->in_memory) && p.blob_end > o->max_memory) {
        diag_error(d, gen_loc(d, c->t->path, gx_root(c->t->xml)),
                   "the program's weights take %llu bytes, more than the memory limit of %llu (--max-memory)",
                   (unsigned long long)p.blob_end, (unsigned long long)o->max_memory);
        goto done;
    }
    if (p.noutputs == 0) {
        diag_error(d, gen_loc(d, c->t->path, gx_root(c->t->xml)), "the template declares no <output>");
        goto done;
    }

    /* The ANE binds inputs and outputs in alphabetical order of their names,
     * whatever the declaration order: declare them in that order so the two
     * agree and nobody is surprised. */
    sort_io(p.inputs, NULL, p.ninputs);
    sort_io(p.outputs, p.output_locs, p.noutputs);

    /* Assemble the text; map[k] is the template line of generated line k+1. */
    map = calloc((size_t)p.nlines + 16, sizeof *map);
    MILC_ASSERT(map != NULL);
    SrcLoc root = gen_loc(d, c->t->path, gx_root(c->t->xml));
    bputs(&b, "program(1.3)\n");
    map[nmap++] = root;
    bputs(&b, "[buildInfo = dict<string, string>({{\"coremlc-component-MIL\", \"3510.2.1\"}, {\"coremlc-version\", "
              "\"3505.4.1\"}, {\"coremltools-component-milinternal\", \"\"}, {\"coremltools-version\", \"9.0\"}");
    if (o->compile_mode >= 0) {
        char m[64];
        snprintf(m, sizeof m, ", {\"milc-compile-mode\", \"%d\"}", o->compile_mode);
        bputs(&b, m);
    }
    bputs(&b, "})]\n{\n");
    map[nmap++] = root;
    map[nmap++] = root;
    bputs(&b, "    func main<ios18>(");
    for (int i = 0; i < p.ninputs; i++) {
        if (i) bputs(&b, ", ");
        bputs(&b, shape_text(&a, &p.inputs[i]));
        bputs(&b, " ");
        bputs(&b, p.inputs[i].name);
    }
    bputs(&b, ") {\n");
    map[nmap++] = root;
    for (int i = 0; i < p.nlines; i++) {
        bputs(&b, "        ");
        bputs(&b, p.lines[i].text);
        bputs(&b, "\n");
        map[nmap++] = p.lines[i].loc;
    }
    bputs(&b, "    } -> (");
    for (int i = 0; i < p.noutputs; i++) {
        if (i) bputs(&b, ", ");
        bputs(&b, p.outputs[i].name);
    }
    bputs(&b, ");\n}\n");
    map[nmap++] = p.noutputs ? p.output_locs[0] : root;
    map[nmap++] = root;

    char genfile[PATH_MAX];
    if (dir)
        snprintf(genfile, sizeof genfile, "%s/model.mil", dir);
    else
        snprintf(genfile, sizeof genfile, "%s.mil", c->t->name);

    uint64_t wbytes = 0;
    uint8_t wdigest[16] = {0};
    if (dir && o->in_memory) {
        if (write_weights(&p, o, NULL, &image, wdigest, d) != 0) goto done;
        /* our own bytes, just laid out: the parse only indexes the records */
        if (milblob_parse(&imagef, "weights/weight.bin", image.bytes, image.size, d) != 0) goto done;
        wbytes = image.size;
    } else if (dir) {
        char wdir[PATH_MAX], wpath[PATH_MAX];
        snprintf(wdir, sizeof wdir, "%s/weights", dir);
        snprintf(wpath, sizeof wpath, "%s/weights/weight.bin", dir);
        /* DIR is the user's; a weights entry in it that is a link (or a file)
         * would redirect weight.bin elsewhere, so it must be a real directory. */
        char err[600];
        if (mkdir_p(dir, d) != 0) goto done;
        if (os_mkdir_real(wdir, 0777, err, sizeof err) != 0) {
            diag_syserror(d, ((SrcLoc){diag_intern(d, wdir), 0, 0}), "%s", err);
            goto done;
        }
        if (write_weights(&p, o, wpath, NULL, wdigest, d) != 0) goto done;
        wbytes = 64; /* the header; no padding follows the last blob */
        if (p.nweights) {
            const GenWeight *last = &p.weights[p.nweights - 1];
            wbytes = last->offset + 64 + last->count * (last->dtype == MILBLOB_FP16 ? 2 : 4);
        }
    } else if (o->weights && strncmp(o->weights, "random", 6) == 0) {
        uint8_t dg[16]; /* nothing is written, but a bad seed is still an error */
        if (gen_weights_digest(o->weights, dg, d) != 0) goto done;
    }

    if (o->raw) {
        canon = strdup(b.p);
    } else {
        /* Canonical text: parse, check, print.  The front end reports into
         * its own sink so each error can get its template-line note. */
        DiagSink fe;
        diag_init(&fe);
        Arena ia;
        arena_init(&ia);
        diag_add_source(d, genfile, b.p, b.n);
        IrProgram *prog = mil_parse(&ia, &fe, genfile, b.p, b.n);
        MilCheckOptions co = {.target = MIL_TARGET_CPU, .model_path = dir, .weights = o->in_memory ? &imagef : NULL};
        if (prog && dir) mil_check(prog, &co, &fe);
        if (prog && !diag_failed(&fe)) canon = mil_print(prog, NULL);
        forward_diags(&fe, d, genfile, map, nmap);
        bool failed = diag_failed(&fe);
        diag_free(&fe);
        arena_free(&ia);
        if (failed || !canon) {
            free(canon);
            canon = NULL;
            goto done;
        }
    }
    r->mil = canon;
    r->mil_len = strlen(canon);
    canon = NULL;
    r->manifest = manifest(c, o, &p, wbytes);
    r->inputs = calloc((size_t)p.ninputs + 1, sizeof(GenIo));
    r->outputs = calloc((size_t)p.noutputs + 1, sizeof(GenIo));
    for (int i = 0; i < p.ninputs; i++) r->inputs[i] = copy_io(&p.inputs[i]);
    for (int i = 0; i < p.noutputs; i++) r->outputs[i] = copy_io(&p.outputs[i]);
    r->ninputs = p.ninputs;
    r->noutputs = p.noutputs;
    r->nweights = p.nweights;
    r->weight_file_bytes = wbytes;
    memcpy(r->weights_digest, wdigest, 16);
    r->weights = image;
    image = (MilBlobImage){0};
    rc = 0;
done:
    milblob_close(&imagef);
    milblob_image_free(&image);
    free(canon);
    free(map);
    free(b.p);
    arena_free(&a);
    return rc;
}

void gen_result_free(GenResult *r) {
    milblob_image_free(&r->weights);
    free(r->mil);
    free(r->manifest);
    for (int i = 0; i < r->ninputs; i++) {
        free(r->inputs[i].name);
        free(r->inputs[i].dtype);
    }
    for (int i = 0; i < r->noutputs; i++) {
        free(r->outputs[i].name);
        free(r->outputs[i].dtype);
    }
    free(r->inputs);
    free(r->outputs);
    memset(r, 0, sizeof *r);
}

static int write_file(const char *path, const char *text, size_t len, DiagSink *d) {
    char err[600];
    if (os_publish_file(path, text, len, 0666, err, sizeof err) == 0) return 0;
    diag_syserror(d, ((SrcLoc){diag_intern(d, path), 0, 0}), "%s", err);
    return -1;
}

int gen_emit(GenConfig *c, const GenOptions *o, const char *dir, DiagSink *d) {
    if (mkdir_p(dir, d) != 0) return -1;
    GenResult r;
    if (gen_generate(c, o, dir, &r, d) != 0) return -1;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/model.mil", dir);
    int rc = write_file(path, r.mil, r.mil_len, d);
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    if (rc == 0) rc = write_file(path, r.manifest, strlen(r.manifest), d);
    gen_result_free(&r);
    return rc;
}
