/* test_gen.c — the generator: expression language, parameters, presets,
 * listing, golden programs for the tiny configurations, determinism, chunk
 * composition of random weights, and every parameter and template error with
 * its exact diagnostic.  Goldens: UPDATE_GOLDEN=1 rewrites the golden .mil files. */
#include "test.h"

#include "../../compiler/gen/gen_internal.h"
#include "milc/blob.h"
#include "milc/gen.h"

#include <ftw.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

static const char *builtin[] = {MILC_TEMPLATE_DIR};
static const GenSearchPath SP = {builtin, 1, NULL};
static char tmpdir[64];

/* ---- helpers ---- */

/* Rendered diagnostics with the template dir and tmpdir replaced by $T and
 * $D, so expected texts are stable. */
static char *render(DiagSink *d) {
    char *s = diag_render(d);
    const char *pre[2] = {MILC_TEMPLATE_DIR, tmpdir};
    const char *rep[2] = {"$T", "$D"};
    for (int k = 0; k < 2; k++) {
        size_t pl = strlen(pre[k]);
        if (!pl) continue;
        char *out = malloc(strlen(s) + 1), *o = out;
        for (const char *p = s; *p;) {
            if (!strncmp(p, pre[k], pl)) {
                memcpy(o, rep[k], 2);
                o += 2;
                p += pl;
            } else
                *o++ = *p++;
        }
        *o = 0;
        free(s);
        s = out;
    }
    return s;
}

/* Only the "file:line: level: message" lines (no source excerpts). */
static char *headlines(DiagSink *d) {
    char *s = render(d), *out = calloc(strlen(s) + 1, 1);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        if (line[0] != ' ') {
            strcat(out, line);
            strcat(out, "\n");
        }
    free(s);
    return out;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    size_t got = fread(b, 1, (size_t)n, f);
    b[got] = 0;
    fclose(f);
    if (len) *len = got;
    return b;
}

/* Open name, apply "k=v" settings, resolve.  NULL on failure. */
static GenConfig *config(const GenSearchPath *sp, const char *name, const char *const *kv, DiagSink *d) {
    GenConfig *c = gen_config_open(sp, name, d);
    if (!c) return NULL;
    for (int i = 0; kv && kv[i]; i += 2)
        if (gen_config_set(c, kv[i], kv[i + 1], d) != 0) {
            gen_config_free(c);
            return NULL;
        }
    if (gen_config_resolve(c, d) != 0) {
        gen_config_free(c);
        return NULL;
    }
    return c;
}

/* The diagnostics of configuring (and generating) name with kv. */
static char *errors_of(const GenSearchPath *sp, const char *name, const char *const *kv) {
    DiagSink d;
    diag_init(&d);
    GenConfig *c = config(sp, name, kv, &d);
    if (c) {
        char dir[128];
        snprintf(dir, sizeof dir, "%s/out-err", tmpdir);
        gen_emit(c, &(GenOptions){.compile_mode = -1}, dir, &d);
        gen_config_free(c);
    }
    char *s = headlines(&d);
    diag_free(&d);
    return s;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* ---- expression language ---- */

static bool ev(const char *src, Value *v, DiagSink *d, Arena *a) {
    Scope *s = scope_new(a, NULL);
    scope_set(a, s, "dim", (Value){.kind = VAL_INT, .i = 768});
    scope_set(a, s, "heads", (Value){.kind = VAL_INT, .i = 12});
    scope_set(a, s, "phase", (Value){.kind = VAL_STR, .s = "decode"});
    scope_set(a, s, "eps", (Value){.kind = VAL_FLOAT, .f = 1e-5});
    ExprCtx x = {a, d, {"t.xml", 7, 0}, NULL};
    return expr_eval(&x, s, src, v);
}

static int64_t ev_int(const char *src) {
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    Value v = {0};
    bool ok = ev(src, &v, &d, &a);
    int64_t r = ok && v.kind == VAL_INT ? v.i : -999999;
    diag_free(&d);
    arena_free(&a);
    return r;
}

static char *ev_err(const char *src) {
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    Value v;
    ev(src, &v, &d, &a);
    char *s = headlines(&d);
    diag_free(&d);
    arena_free(&a);
    return s;
}

TEST(expr_arithmetic) {
    CHECK_EQ_INT(ev_int("1 + 2 * 3"), 7);
    CHECK_EQ_INT(ev_int("(1 + 2) * 3"), 9);
    CHECK_EQ_INT(ev_int("dim / heads"), 64);
    CHECK_EQ_INT(ev_int("7 // 2"), 3);
    CHECK_EQ_INT(ev_int("-7 // 2"), -4);
    CHECK_EQ_INT(ev_int("7 % 3"), 1);
    CHECK_EQ_INT(ev_int("-dim + 1"), -767);
    CHECK_EQ_INT(ev_int("dim % heads == 0"), 1);
    CHECK_EQ_INT(ev_int("dim > 1000 or heads >= 12"), 1);
    CHECK_EQ_INT(ev_int("dim > 1000 and heads >= 12"), 0);
    CHECK_EQ_INT(ev_int("not 0"), 1);
    CHECK_EQ_INT(ev_int("phase == 'decode' ? 1 : 2"), 1);
    CHECK_EQ_INT(ev_int("phase != \"decode\" ? 1 : 2"), 2);
    CHECK_EQ_INT(ev_int("max(3, 16)"), 16);
    CHECK_EQ_INT(ev_int("min(3, 16, 2)"), 2);
    CHECK_EQ_INT(ev_int("align(17, 16)"), 32);
    CHECK_EQ_INT(ev_int("int(2.75)"), 2);
    CHECK_EQ_INT(ev_int("1 < 2 and 2 <= 2 and 3 > 2"), 1);
}

TEST(expr_values) {
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    Value v;
    CHECK(ev("'l' + (dim - 1) + '_out'", &v, &d, &a));
    CHECK_STR(v.s, "l767_out");
    CHECK(ev("f16(eps)", &v, &d, &a));
    CHECK_STR(value_str(&a, v), "0x1.5p-17"); /* 1e-5 rounded to fp16 */
    CHECK(ev("f16(rsqrt(64))", &v, &d, &a));
    CHECK_STR(value_str(&a, v), "0x1p-3");
    CHECK(ev("f16(0.1)", &v, &d, &a));
    CHECK_STR(value_str(&a, v), "0x1.998p-4");
    ExprCtx x = {&a, &d, {"t.xml", 1, 0}, NULL};
    Scope *s = scope_new(&a, NULL);
    scope_set(&a, s, "S", (Value){.kind = VAL_INT, .i = 16});
    CHECK_STR(expr_interp(&x, s, "tensor<fp16, [1, {S * 2}, 1, {S}]> {{x}}"), "tensor<fp16, [1, 32, 1, 16]> {x}");
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
    arena_free(&a);
}

TEST(expr_errors) {
    char *s;
    CHECK_STR(s = ev_err("dim / 5"), "t.xml:7: error: 768 is not divisible by 5 (in 'dim / 5')\n");
    free(s);
    CHECK_STR(s = ev_err("dim % 0"), "t.xml:7: error: division by zero (in 'dim % 0')\n");
    free(s);
    CHECK_STR(s = ev_err("dims + 1"), "t.xml:7: error: unknown name 'dims' (in 'dims + 1')\n");
    free(s);
    CHECK_STR(s = ev_err("phase * 2"), "t.xml:7: error: arithmetic on a string (in 'phase * 2')\n");
    free(s);
    CHECK_STR(s = ev_err("(1 + 2"), "t.xml:7: error: expected ')' (in '(1 + 2')\n");
    free(s);
    CHECK_STR(s = ev_err("1 +"), "t.xml:7: error: unexpected end of expression (in '1 +')\n");
    free(s);
    CHECK_STR(s = ev_err("1 2"), "t.xml:7: error: unexpected '2' (in '1 2')\n");
    free(s);
    CHECK_STR(s = ev_err("frob(1)"), "t.xml:7: error: unknown function 'frob' (in 'frob(1)')\n");
    free(s);
    CHECK_STR(s = ev_err("phase == 1"), "t.xml:7: error: cannot compare string with int (in 'phase == 1')\n");
    free(s);
}

/* Integer arithmetic is checked: a result outside int64 is a clear error,
 * never a wrapped value or a SIGFPE (INT64_MIN / -1 traps on x86). */
TEST(expr_overflow) {
    char *s;
    CHECK_STR(s = ev_err("(-9223372036854775807 - 1) / -1"),
              "t.xml:7: error: integer overflow in -9223372036854775808 / -1 (in '(-9223372036854775807 - 1) / -1')\n");
    free(s);
    CHECK_STR(
        s = ev_err("(-9223372036854775807 - 1) // -1"),
        "t.xml:7: error: integer overflow in -9223372036854775808 // -1 (in '(-9223372036854775807 - 1) // -1')\n");
    free(s);
    CHECK_STR(s = ev_err("9223372036854775807 + 1"),
              "t.xml:7: error: integer overflow in 9223372036854775807 + 1 (in '9223372036854775807 + 1')\n");
    free(s);
    CHECK_STR(s = ev_err("-9223372036854775807 - 2"),
              "t.xml:7: error: integer overflow in -9223372036854775807 - 2 (in '-9223372036854775807 - 2')\n");
    free(s);
    CHECK_STR(s = ev_err("4294967296 * 4294967296"),
              "t.xml:7: error: integer overflow in 4294967296 * 4294967296 (in '4294967296 * 4294967296')\n");
    free(s);
    CHECK_STR(s = ev_err("-(-9223372036854775807 - 1)"),
              "t.xml:7: error: integer overflow in 0 - -9223372036854775808 (in '-(-9223372036854775807 - 1)')\n");
    free(s);
    CHECK_STR(s = ev_err("align(9223372036854775807, 16)"),
              "t.xml:7: error: integer overflow in 9223372036854775807 + 15 (in 'align(9223372036854775807, 16)')\n");
    free(s);
    CHECK_STR(s = ev_err("int(1e300)"), "t.xml:7: error: int(1e+300): out of the integer range (in 'int(1e300)')\n");
    free(s);
    /* The edges themselves are fine. */
    CHECK_EQ_INT(ev_int("(-9223372036854775807 - 1) % -1"), 0);
    CHECK_EQ_INT(ev_int("9223372036854775806 + 1"), INT64_MAX);
    CHECK_EQ_INT(ev_int("(-9223372036854775807 - 1) / 1"), INT64_MIN);
    CHECK_EQ_INT(ev_int("-9 / -1"), 9);
}

/* ---- API: names, listing, describe, canonical ---- */

TEST(name_matching) {
    CHECK(gen_name_matches("kv_heads", "kv_heads"));
    CHECK(gen_name_matches("kv_heads", "kv-heads"));
    CHECK(gen_name_matches("kv_heads", "--kv-heads"));
    CHECK(gen_name_matches("kv_heads", "--kv_heads"));
    CHECK(!gen_name_matches("kv_heads", "kv"));
    CHECK(!gen_name_matches("kv_heads", "kv_heads_"));
    CHECK(!gen_name_matches("heads", "-heads"));
    DiagSink d;
    diag_init(&d);
    GenTemplate *t = gen_template_load(&SP, "llama", &d);
    CHECK(t != NULL);
    if (t) {
        int i = gen_template_find_param(t, "--kv-heads");
        CHECK(i >= 0);
        if (i >= 0) CHECK_STR(gen_template_param(t, i)->name, "kv_heads");
        CHECK_EQ_INT(gen_template_find_param(t, "--nope"), -1);
        gen_template_free(t);
    }
    diag_free(&d);
}

TEST(listing) {
    DiagSink d;
    diag_init(&d);
    GenEntry *e;
    int n;
    CHECK_EQ_INT(gen_list(&SP, &e, &n, &d), 0);
    char got[1024] = "";
    for (int i = 0; i < n; i++) {
        char line[128];
        snprintf(line, sizeof line, "%s:%s:%s\n", e[i].name, e[i].kind == GEN_ENTRY_PRESET ? "preset" : "template",
                 e[i].template_name);
        strcat(got, line);
    }
    CHECK_STR(got, "gpt2:template:gpt2\ngpt2:preset:gpt2\ngpt2-medium:preset:gpt2\nllama:template:llama\n"
                   "llama-3.2-1b:preset:llama\ntiny:preset:gpt2\ntiny-llama:preset:llama\n");
    gen_list_free(e, n);
    CHECK_EQ_INT(d.count, 0);
    diag_free(&d);
}

TEST(describe) {
    DiagSink d;
    diag_init(&d);
    GenTemplate *t = gen_template_load(&SP, "llama", &d);
    CHECK(t != NULL);
    if (!t) return;
    char *s = gen_template_describe(t);
    CHECK(strstr(s, "  --kv_heads int           default 8, >= 1\n      key/value heads (grouped-query attention)\n"));
    CHECK(strstr(s, "  --phase enum             default prefill, one of prefill, decode\n"));
    CHECK(strstr(s, "  --rope_theta float       default 500000, >= 1\n"));
    CHECK(strstr(s, "  hd = dim / heads\n"));
    CHECK(strstr(s, "blocks: blocks/embed blocks/rmsnorm blocks/proj blocks/packed_in blocks/cols blocks/kv_state_at "
                    "blocks/rope blocks/kv_state blocks/attention blocks/packed_kv\n"));
    free(s);
    CHECK_EQ_INT(gen_template_param_count(t), 19);
    gen_template_free(t);
    diag_free(&d);
}

TEST(canonical_and_presets) {
    DiagSink d;
    diag_init(&d);
    const char *kv[] = {"--seq", "1", "--phase", "decode", NULL};
    GenConfig *c = config(&SP, "tiny-llama", kv, &d);
    CHECK(c != NULL);
    if (!c) return;
    char *s = gen_config_canonical(c);
    CHECK_STR(
        s, "template=llama\nctx=48\ndim=128\neps=0x1.4f8b588e368f1p-17\nffn=256\nfirst_layer=0\nheads=4\n"
           "io=packed\nkv=io\nkv_heads=2\nlayers=2\nmin_seq=16\nmodel_layers=2\npart=layers\nphase=decode\nproj=conv\n"
           "rope_theta=0x1.388p+13\nseq=1\ntied=1\nvocab=512\n");
    free(s);
    CHECK_STR(gen_config_preset(c), "tiny-llama");
    int64_t v;
    CHECK(gen_config_get_int(c, "S", &v) && v == 16); /* padded to min_seq */
    CHECK(gen_config_get_int(c, "hd", &v) && v == 32);
    const char *ph;
    CHECK(gen_config_get_str(c, "phase", &ph) && !strcmp(ph, "decode"));
    gen_config_free(c);
    /* the preset's values are defaults: the same options without the preset differ */
    c = config(&SP, "llama", kv, &d);
    s = c ? gen_config_canonical(c) : NULL;
    CHECK(s && strstr(s, "dim=2048\n"));
    free(s);
    gen_config_free(c);
    CHECK_EQ_INT(d.count, 0);
    diag_free(&d);
}

/* ---- golden programs ---- */

static void golden(const char *name, const char *file, const char *const *kv) {
    DiagSink d;
    diag_init(&d);
    GenConfig *c = config(&SP, name, kv, &d);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/g-%s", tmpdir, file);
    GenResult r;
    int rc = c ? gen_generate(c, &(GenOptions){.weights = "random:0", .compile_mode = -1}, dir, &r, &d) : -1;
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        char *s = render(&d);
        fprintf(stderr, "%s", s);
        free(s);
    } else {
        char path[128];
        snprintf(path, sizeof path, "golden/%s.mil", file);
        if (getenv("UPDATE_GOLDEN")) write_text(path, r.mil);
        char *want = read_all(path, NULL);
        CHECK(want != NULL);
        if (want && strcmp(want, r.mil) != 0) {
            CHECK_STR(r.mil, want);
            fprintf(stderr, "golden %s differs (UPDATE_GOLDEN=1 to accept)\n", path);
        }
        free(want);
        gen_result_free(&r);
    }
    gen_config_free(c);
    diag_free(&d);
}

TEST(golden_programs) {
    golden("tiny", "gpt2_prefill", NULL);
    golden("tiny", "gpt2_decode", (const char *[]){"--phase", "decode", "--seq", "1", NULL});
    golden("tiny-llama", "llama_prefill", NULL);
    golden("tiny-llama", "llama_decode", (const char *[]){"--phase", "decode", "--seq", "1", NULL});
    golden("tiny-llama", "llama_prefill_linear", (const char *[]){"--proj", "linear", "--layers", "1", NULL});
    golden("tiny", "gpt2_decode_split", (const char *[]){"--phase", "decode", "--seq", "1", "--io", "split", NULL});
    golden("tiny-llama", "llama_decode_split",
           (const char *[]){"--phase", "decode", "--seq", "1", "--io", "split", NULL});
}

TEST(result_io_contract) {
    DiagSink d;
    diag_init(&d);
    GenConfig *c =
        config(&SP, "tiny-llama",
               (const char *[]){"--phase", "decode", "--seq", "1", "--layers", "1", "--io", "split", NULL}, &d);
    GenResult r;
    CHECK(c && gen_generate(c, NULL, NULL, &r, &d) == 0);
    if (c && !diag_failed(&d)) {
        char got[512] = "";
        for (int i = 0; i < r.ninputs; i++) {
            char b[96];
            snprintf(b, sizeof b, "in %s [%lld,%lld,%lld,%lld]\n", r.inputs[i].name, (long long)r.inputs[i].shape[0],
                     (long long)r.inputs[i].shape[1], (long long)r.inputs[i].shape[2], (long long)r.inputs[i].shape[3]);
            strcat(got, b);
        }
        for (int i = 0; i < r.noutputs; i++) {
            char b[96];
            snprintf(b, sizeof b, "out %s [%lld,%lld,%lld,%lld]\n", r.outputs[i].name, (long long)r.outputs[i].shape[0],
                     (long long)r.outputs[i].shape[1], (long long)r.outputs[i].shape[2],
                     (long long)r.outputs[i].shape[3]);
            strcat(got, b);
        }
        CHECK_STR(got,
                  "in k_cache_0 [1,64,1,48]\nin mask [1,64,1,16]\nin rope_cos [1,32,1,16]\nin rope_sin [1,32,1,16]\n"
                  "in v_cache_0 [1,64,1,48]\nin x [1,128,1,16]\n"
                  "out k_0 [1,64,1,16]\nout v_0 [1,64,1,16]\nout y [1,128,1,16]\n");
        CHECK_EQ_INT(r.weight_file_bytes, 0);
        gen_result_free(&r);
    }
    gen_config_free(c);
    diag_free(&d);
}

/* The packed layout (the default): one input [1, kvd, 1, W] whose column
 * blocks are the hidden states (dim / kvd = 2 blocks of S = 16), cos, sin
 * (16 each), the mask (48 + 16) and the caches (48 each); one output whose
 * rows are the hidden states (128), then k_0, v_0 (64 each). */
TEST(result_io_packed) {
    DiagSink d;
    diag_init(&d);
    GenConfig *c =
        config(&SP, "tiny-llama", (const char *[]){"--phase", "decode", "--seq", "1", "--layers", "1", NULL}, &d);
    GenResult r;
    CHECK(c && gen_generate(c, NULL, NULL, &r, &d) == 0);
    if (c && !diag_failed(&d)) {
        CHECK_EQ_INT(r.ninputs, 1);
        CHECK_EQ_INT(r.noutputs, 1);
        if (r.ninputs == 1 && r.noutputs == 1) {
            CHECK_STR(r.inputs[0].name, "x");
            CHECK_EQ_INT(r.inputs[0].shape[1], 64);
            CHECK_EQ_INT(r.inputs[0].shape[3], 32 + 16 + 16 + 64 + 2 * 48);
            CHECK_STR(r.outputs[0].name, "y");
            CHECK_EQ_INT(r.outputs[0].shape[1], 128 + 2 * 64);
            CHECK_EQ_INT(r.outputs[0].shape[3], 16);
        }
        gen_result_free(&r);
    }
    gen_config_free(c);
    diag_free(&d);
}

/* ---- determinism and composition ---- */

static bool same_file(const char *a, const char *b) {
    size_t la = 0, lb = 0;
    char *x = read_all(a, &la), *y = read_all(b, &lb);
    bool same = x && y && la == lb && memcmp(x, y, la) == 0;
    free(x);
    free(y);
    return same;
}

static int emit(const char *name, const char *const *kv, const char *weights, const char *sub) {
    DiagSink d;
    diag_init(&d);
    GenConfig *c = config(&SP, name, kv, &d);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    int rc = c ? gen_emit(c, &(GenOptions){.weights = weights, .compile_mode = 2}, dir, &d) : -1;
    if (rc) {
        char *s = render(&d);
        fprintf(stderr, "%s", s);
        free(s);
    }
    gen_config_free(c);
    diag_free(&d);
    return rc;
}

TEST(determinism) {
    CHECK_EQ_INT(emit("tiny", NULL, "random:7", "det1"), 0);
    CHECK_EQ_INT(emit("tiny", NULL, "random:7", "det2"), 0);
    CHECK_EQ_INT(emit("tiny", NULL, "random:8", "det3"), 0);
    char a[128], b[128];
    const char *files[] = {"model.mil", "manifest.json", "weights/weight.bin"};
    for (int i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s/det1/%s", tmpdir, files[i]);
        snprintf(b, sizeof b, "%s/det2/%s", tmpdir, files[i]);
        CHECK(same_file(a, b));
    }
    snprintf(a, sizeof a, "%s/det1/weights/weight.bin", tmpdir);
    snprintf(b, sizeof b, "%s/det3/weights/weight.bin", tmpdir);
    CHECK(!same_file(a, b)); /* the seed matters */
    snprintf(a, sizeof a, "%s/det1/model.mil", tmpdir);
    char *m = read_all(a, NULL);
    CHECK(m && strstr(m, "{\"milc-compile-mode\", \"2\"}"));
    free(m);
}

/* name -> bytes of every weight of an emitted dir (by scanning the MIL). */
typedef struct {
    char name[64];
    const uint8_t *data;
    uint64_t size;
} W;

static int weights_of(const char *sub, MilBlobFile *bf, W *w, int max) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s/weights/weight.bin", tmpdir, sub);
    DiagSink d;
    diag_init(&d);
    if (milblob_open(bf, path, &d) != 0) {
        diag_free(&d);
        return -1;
    }
    diag_free(&d);
    snprintf(path, sizeof path, "%s/%s/model.mil", tmpdir, sub);
    char *mil = read_all(path, NULL);
    int n = 0;
    for (char *line = strtok(mil, "\n"); line && n < max; line = strtok(NULL, "\n")) {
        char *off = strstr(line, "offset = uint64(");
        char *eq = strstr(line, " = const()");
        if (!off || !eq) continue;
        char *nm = eq;
        while (nm > line && nm[-1] != ' ') nm--;
        snprintf(w[n].name, sizeof w[n].name, "%.*s", (int)(eq - nm), nm);
        const MilBlobRecord *r = milblob_find(bf, strtoull(off + 16, NULL, 10));
        if (!r) {
            free(mil);
            return -1;
        }
        w[n].data = r->data;
        w[n].size = r->size;
        n++;
    }
    free(mil);
    return n;
}

TEST(chunks_compose) {
    /* A 2-layer chunk's weights equal those of two 1-layer chunks at
     * first_layer 0 and 1: random values depend on the global layer. */
    CHECK_EQ_INT(emit("tiny-llama", NULL, NULL, "c2"), 0);
    CHECK_EQ_INT(emit("tiny-llama", (const char *[]){"--layers", "1", NULL}, NULL, "c0"), 0);
    CHECK_EQ_INT(emit("tiny-llama", (const char *[]){"--layers", "1", "--first_layer", "1", NULL}, NULL, "c1"), 0);
    static W all[64], part[64];
    MilBlobFile f2, f0, f1;
    int n2 = weights_of("c2", &f2, all, 64);
    int n0 = weights_of("c0", &f0, part, 64);
    int n1 = weights_of("c1", &f1, part + n0, 64 - n0);
    CHECK(n2 > 10);
    int matched = 0;
    for (int i = 0; i < n2; i++)
        for (int j = 0; j < n0 + n1; j++)
            if (!strcmp(all[i].name, part[j].name)) {
                CHECK_EQ_INT(all[i].size, part[j].size);
                CHECK(memcmp(all[i].data, part[j].data, all[i].size) == 0);
                matched++;
                break;
            }
    CHECK_EQ_INT(matched, n2); /* the shared tables (mask, rope) appear in both halves */
    CHECK(all[3].size != all[4].size || memcmp(all[3].data, all[4].data, all[3].size) != 0);
    milblob_close(&f2);
    milblob_close(&f0);
    milblob_close(&f1);
}

/* The AVX2+F16C and AVX-512 fill loops and the portable ones write the
 * same bytes (seq 37: vector tails in every table), and the digest
 * gen_generate makes while writing is the reader's. */
TEST(fill_variants_agree) {
    const char *const kv[] = {"--seq", "37", NULL};
    char a[128], b[128];
    snprintf(a, sizeof a, "%s/fill0/weights/weight.bin", tmpdir);
    for (int level = 0; level <= 2; level++) {
        char name[16];
        snprintf(name, sizeof name, "fill%d", level);
        gen_fill_select(level);
        CHECK_EQ_INT(emit("tiny-llama", kv, "random:3", name), 0);
        snprintf(b, sizeof b, "%s/%s/weights/weight.bin", tmpdir, name);
        CHECK(same_file(a, b));
    }

    DiagSink d;
    diag_init(&d);
    GenConfig *c = config(&SP, "tiny-llama", kv, &d);
    GenResult r;
    snprintf(a, sizeof a, "%s/fillr", tmpdir);
    CHECK(c && gen_generate(c, &(GenOptions){.weights = "random:3", .compile_mode = -1}, a, &r, &d) == 0);
    snprintf(b, sizeof b, "%s/fillr/weights/weight.bin", tmpdir);
    MilBlobFile f;
    uint8_t want[16];
    CHECK_EQ_INT(milblob_open(&f, b, &d), 0);
    milblob_file_digest(&f, want);
    CHECK(memcmp(want, r.weights_digest, 16) == 0);
    size_t n = 0;
    char *file = read_all(b, &n);
    gen_result_free(&r);
    /* Made in memory (a build's): the same bytes and digest, no file. */
    snprintf(a, sizeof a, "%s/fillm", tmpdir);
    CHECK(gen_generate(c, &(GenOptions){.weights = "random:3", .compile_mode = -1, .in_memory = true}, a, &r, &d) == 0);
    CHECK(r.weights.bytes && r.weights.size == n && !memcmp(r.weights.bytes, file, n));
    CHECK(memcmp(want, r.weights_digest, 16) == 0);
    CHECK(access(a, F_OK) != 0);
    free(file);
    milblob_close(&f);
    gen_result_free(&r);
    gen_config_free(c);
    diag_free(&d);
}

TEST(weights_digest) {
    DiagSink d;
    diag_init(&d);
    uint8_t a[16], b[16], c[16];
    CHECK_EQ_INT(gen_weights_digest("random:0", a, &d), 0);
    CHECK_EQ_INT(gen_weights_digest(NULL, b, &d), 0);
    CHECK(memcmp(a, b, 16) == 0); /* default = random:0 */
    CHECK_EQ_INT(gen_weights_digest("random:1", c, &d), 0);
    CHECK(memcmp(a, c, 16) != 0);
    CHECK_EQ_INT(gen_weights_digest("random:x", c, &d), -1);
    char *s = headlines(&d);
    CHECK_STR(s, "error: bad weight source 'random:x'\n");
    free(s);
    diag_free(&d);
}

/* A checkpoint's digest (its key) is the documented tree: XXH3-128 of
 * "file:", the size, then each 16 MiB piece's XXH3-128, whatever the number
 * of threads that hashed the pieces; a byte changed in any piece, or one
 * more byte, changes it. */
static void tree_digest(const uint8_t *data, uint64_t size, uint8_t out[16]) {
    XXH3_state_t *st = XXH3_createState();
    XXH3_128bits_reset(st);
    uint8_t head[13] = {'f', 'i', 'l', 'e', ':'};
    for (int b = 0; b < 8; b++) head[5 + b] = (uint8_t)(size >> 8 * b);
    XXH3_128bits_update(st, head, sizeof head);
    for (uint64_t off = 0; off < size; off += 16u << 20) {
        uint64_t n = size - off < (16u << 20) ? size - off : (16u << 20);
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits(data + off, (size_t)n));
        XXH3_128bits_update(st, c.digest, 16);
    }
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
    XXH3_freeState(st);
    memcpy(out, c.digest, 16);
}

static int digest_of(const char *path, const uint8_t *data, size_t n, uint8_t out[16], DiagSink *d) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) return -2;
    return gen_weights_digest(path, out, d);
}

TEST(checkpoint_digest_is_the_tree) {
    DiagSink d;
    diag_init(&d);
    size_t n = (40u << 20) + 7; /* three pieces, the last short */
    uint8_t *data = malloc(n + 1);
    for (size_t i = 0; i <= n; i++) data[i] = (uint8_t)(i * 2654435761u >> 13);
    char path[128];
    snprintf(path, sizeof path, "%s/digest.bin", tmpdir);
    uint8_t got[16], want[16], other[16];
    CHECK_EQ_INT(digest_of(path, data, n, got, &d), 0);
    tree_digest(data, n, want);
    CHECK(memcmp(got, want, 16) == 0);
    data[(32u << 20) + 3] ^= 1; /* the third piece */
    CHECK_EQ_INT(digest_of(path, data, n, other, &d), 0);
    CHECK(memcmp(got, other, 16) != 0);
    data[(32u << 20) + 3] ^= 1;
    CHECK_EQ_INT(digest_of(path, data, n + 1, other, &d), 0);
    CHECK(memcmp(got, other, 16) != 0);
    CHECK_EQ_INT(digest_of(path, data, 0, got, &d), 0); /* empty: no piece */
    tree_digest(data, 0, want);
    CHECK(memcmp(got, want, 16) == 0);
    unlink(path);
    free(data);
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
}

/* Every bf16 value, at every alignment and tail length, gives the same
 * fp16 bytes through each loop this CPU has (the weight file, and so the
 * cache key, must not depend on the CPU), and the portable loop rounds as
 * IEEE says on the values where it matters. */
TEST(bf16_variants_agree) {
    enum { N = 65536 };
    uint16_t *src = malloc((N + 64) * 2), *want = malloc(N * 2), *got = malloc((N + 64) * 2);
    for (uint32_t i = 0; i < N; i++) src[i] = (uint16_t)i;
    GenConvertFn fn[4];
    const char *name[4];
    int n = gen_bf16_variants(fn, name, 4);
    CHECK(n >= 1 && !strcmp(name[0], "portable"));
    fn[0](src, want, N);
    static const uint16_t cases[][2] = {
        {0x3f80, 0x3c00}, {0xbf80, 0xbc00}, {0x0000, 0x0000}, {0x8000, 0x8000}, /* ±1, ±0 */
        {0x477f, 0x7bf8}, {0x4780, 0x7c00},                                     /* 65280; 65536 overflows */
        {0x7f80, 0x7c00}, {0xff80, 0xfc00}, {0x7fc0, 0x7e00},                   /* ±Inf, a quiet NaN */
        {0x3380, 0x0001}, {0x3300, 0x0000}, {0x3340, 0x0001}, /* 2^-24; 2^-25 ties to 0; 1.5*2^-25 up */
        {0x3f81, 0x3c08}, {0x0001, 0x0000},                   /* 1 + 2^-7; a bf16 subnormal */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        if (want[cases[k][0]] != cases[k][1])
            printf("  bf16 %04x -> %04x, want %04x\n", cases[k][0], want[cases[k][0]], cases[k][1]);
        CHECK(want[cases[k][0]] == cases[k][1]);
    }
    for (int v = 1; v < n; v++) {
        memset(got, 0, N * 2);
        fn[v](src, got, N);
        if (memcmp(got, want, N * 2)) printf("  %s differs from portable\n", name[v]);
        CHECK(memcmp(got, want, N * 2) == 0);
        for (size_t at = 0; at < 17; at++) { /* unaligned starts, every tail length */
            size_t len = 4096 + 1 - at;
            memset(got, 0xee, (len + 2) * 2);
            fn[v](src + 1000 + at, got + 1, len);
            CHECK(memcmp(got + 1, want + 1000 + at, len * 2) == 0 && got[0] == 0xeeee && got[len + 1] == 0xeeee);
        }
    }
    free(src), free(want), free(got);
}

/* A checkpoint of zeros holding every tensor p maps, in F16 (the shapes
 * without their 1-dims, as Hugging Face stores them). */
static void write_zero_checkpoint(const GenProgram *p, const char *path) {
    char hdr[1 << 15];
    size_t len = 0;
    uint64_t off = 0;
    len += (size_t)snprintf(hdr, sizeof hdr, "{");
    for (int i = 0; i < p->nweights; i++) {
        const GenWeight *w = &p->weights[i];
        if (!w->source) continue;
        len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s\"%s\":{\"dtype\":\"F16\",\"shape\":[",
                                len > 1 ? "," : "", w->source);
        for (int k = 0, nd = 0; k < w->rank; k++)
            if (w->shape[k] != 1)
                len += (size_t)snprintf(hdr + len, sizeof hdr - len, "%s%lld", nd++ ? "," : "", (long long)w->shape[k]);
        len += (size_t)snprintf(hdr + len, sizeof hdr - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + w->count * 2));
        off += w->count * 2;
    }
    len += (size_t)snprintf(hdr + len, sizeof hdr - len, "}");
    CHECK(len < sizeof hdr);
    FILE *f = fopen(path, "wb");
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)((uint64_t)len >> 8 * k);
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, len, f);
    for (uint64_t k = 0; k < off; k++) fputc(0, f);
    fclose(f);
}

/* The weights compiled are the bytes hashed: a checkpoint written in place
 * or cut after it was opened (and hashed) fails the build, naming why, and
 * one replaced by a rename is still read from the file that was opened. */
TEST(checkpoint_changed_while_open) {
    const char *const kv[] = {"--layers", "1", NULL};
    DiagSink d;
    diag_init(&d);
    GenConfig *c = config(&SP, "tiny-llama", kv, &d);
    Arena a;
    arena_init(&a);
    GenProgram p;
    CHECK(c && gen_config_expand(c, &a, &p, &d) == 0);
    char ck[128], out[128];
    snprintf(ck, sizeof ck, "%s/zero.safetensors", tmpdir);
    snprintf(out, sizeof out, "%s/ckout", tmpdir);
    for (int how = 0; how < 3; how++) {
        write_zero_checkpoint(&p, ck);
        GenWeights *w = NULL;
        CHECK_EQ_INT(gen_weights_open(ck, &w, &d), 0);
        struct stat sb;
        CHECK(stat(ck, &sb) == 0);
        if (how == 0) { /* in place, once the clock has moved past the open's stat */
            usleep(30000);
            FILE *f = fopen(ck, "r+b");
            fseek(f, -2, SEEK_END);
            fputc(1, f);
            fclose(f);
        } else if (how == 1) {
            CHECK(truncate(ck, sb.st_size / 2) == 0);
        } else { /* replaced: another file now has the name */
            char tmp[160];
            snprintf(tmp, sizeof tmp, "%s.new", ck);
            write_text(tmp, "not a checkpoint");
            CHECK(rename(tmp, ck) == 0);
        }
        GenResult r;
        int rc = gen_generate(c, &(GenOptions){.weights = ck, .source = w, .compile_mode = -1}, out, &r, &d);
        char *s = headlines(&d);
        if (how == 2) {
            CHECK_EQ_INT(rc, 0);
            CHECK_STR(s, "");
            if (rc == 0) gen_result_free(&r);
        } else {
            CHECK_EQ_INT(rc, -1);
            CHECK(d.system_errors > 0);
            CHECK(
                strstr(s, how == 0 ? "the file was changed while milc read it" : "the file shrank while it was read"));
            if (!strstr(s, "zero.safetensors")) printf("  got: %s", s);
        }
        free(s);
        gen_weights_close(w);
        diag_free(&d);
        diag_init(&d);
    }
    arena_free(&a);
    gen_config_free(c);
    diag_free(&d);
}

/* ---- parameter errors ---- */

TEST(parameter_errors) {
    char *s;
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--heads", "5", NULL}),
              "$T/gpt2.xml:26: error: 128 is not divisible by 5 (in 'dim / heads')\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--dim", "abc", NULL}),
              "error: --dim: expected an integer, got 'abc'\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--eps", "x", NULL}),
              "error: --eps: expected a number, got 'x'\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--phase", "train", NULL}),
              "error: --phase: 'train' is not one of prefill, decode\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--seq", "0", NULL}),
              "error: --seq: 0 is outside 1..65536\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--first-layer", "-1", NULL}),
              "error: --first_layer: -1 is below the minimum 0\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--kv-heads", "2", NULL}),
              "error: template 'gpt2' has no parameter 'kv-heads' (see: milc templates show gpt2)\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny", (const char *[]){"--first_layer", "1", NULL}),
              "$T/gpt2.xml:38: error: layers 1..2 do not exist in a 2-layer model\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny-llama", (const char *[]){"--kv_heads", "3", NULL}),
              "$T/llama.xml:40: error: heads (4) must be a multiple of kv_heads (3)\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "tiny-llama", (const char *[]){"--heads", "128", "--kv-heads", "128", NULL}),
              "$T/llama.xml:41: error: the head dimension dim / heads = 1 must be even for RoPE\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "nosuch", NULL), "error: template 'nosuch' not found in the template path\n");
    free(s);
    CHECK_STR(s = errors_of(&SP, "../gpt2", NULL),
              "error: bad template name '../gpt2': use letters, digits, '_', '-' and '/'\n");
    free(s);
}

/* ---- template errors ---- */

static const char *HEAD = "<?xml version=\"1.0\"?>\n";

/* Write dir/NAME.xml (creating subdirs) under tmpdir/tpl. */
static void tpl(const char *name, const char *body) {
    char path[256];
    snprintf(path, sizeof path, "%s/tpl/%s.xml", tmpdir, name);
    char *slash = strrchr(path, '/');
    *slash = 0;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", path);
    if (system(cmd) != 0) exit(2);
    *slash = '/';
    char *text = malloc(strlen(HEAD) + strlen(body) + 1);
    strcpy(text, HEAD);
    strcat(text, body);
    write_text(path, text);
    free(text);
}

static char *tpl_errors(const char *name) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/tpl", tmpdir);
    const char *dirs[] = {dir};
    GenSearchPath sp = {dirs, 1, NULL};
    return errors_of(&sp, name, NULL);
}

#define MINI_OK                                                                                                        \
    "<input name=\"x\" shape=\"1, 8\"/>\n"                                                                             \
    "<mil><![CDATA[\n  tensor<fp16, [1, 8]> y = exp(x = x);\n]]></mil>\n<output name=\"y\" shape=\"1, 8\"/>\n"

TEST(template_errors) {
    char *s;
    tpl("ok", "<template>\n" MINI_OK "</template>\n");
    CHECK_STR(s = tpl_errors("ok"), "");
    free(s);

    tpl("badxml", "<template>\n<param name=\"a\" default=\"1\">\n</template>\n");
    CHECK_STR(s = tpl_errors("badxml"),
              "$D/tpl/badxml.xml:4:12: error: XML: Opening and ending tag mismatch: param line 3 and template\n");
    free(s);

    tpl("doctype", "<!DOCTYPE t [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>\n<template>&e;</template>\n");
    CHECK_STR(s = tpl_errors("doctype"), "$D/tpl/doctype.xml:1: error: a DOCTYPE is not allowed in templates\n");
    free(s);

    tpl("notpl", "<block/>\n");
    CHECK_STR(s = tpl_errors("notpl"),
              "$D/tpl/notpl.xml:2: error: 'notpl' is not a template (root element must be <template>)\n");
    free(s);

    tpl("dotdot", "<template>\n<include block=\"../ok\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("dotdot"), "$D/tpl/dotdot.xml:3: error: bad block name '../ok': use letters, digits, '_', "
                                        "'-' and '/' (no '..', no absolute paths)\n");
    free(s);

    tpl("absolute", "<template>\n<include block=\"/etc/passwd\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("absolute"), "$D/tpl/absolute.xml:3: error: bad block name '/etc/passwd': use letters, "
                                          "digits, '_', '-' and '/' (no '..', no absolute paths)\n");
    free(s);

    /* a symlink inside the directory pointing outside it */
    char outside[160], link[160];
    snprintf(outside, sizeof outside, "%s/outside.xml", tmpdir);
    write_text(outside, "<?xml version=\"1.0\"?>\n<block/>\n");
    tpl("blocks/placeholder", "<block/>\n");
    snprintf(link, sizeof link, "%s/tpl/blocks/evil.xml", tmpdir);
    CHECK_EQ_INT(symlink(outside, link), 0);
    tpl("symlink", "<template>\n<include block=\"blocks/evil\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("symlink"),
              "$D/tpl/symlink.xml:3: error: block 'blocks/evil' not found in the template path\n");
    free(s);

    tpl("dynblock", "<template>\n<include block=\"blocks/{x}\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("dynblock"), "$D/tpl/dynblock.xml:3: error: include block names are literal (no {…}), so "
                                          "a template's files are known before it runs\n");
    free(s);

    tpl("badparam",
        "<template>\n<param name=\"a\" type=\"complex\" default=\"1\"/>\n<param name=\"b\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("badparam"),
              "$D/tpl/badparam.xml:3: error: parameter 'a': unknown type 'complex' (int, float, enum, string)\n"
              "$D/tpl/badparam.xml:4: error: parameter 'b' needs a default\n");
    free(s);

    tpl("baddefault", "<template>\n<param name=\"a\" default=\"x\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("baddefault"), "$D/tpl/baddefault.xml:3: error: --a: expected an integer, got 'x'\n");
    free(s);

    tpl("unknown", "<template>\n" MINI_OK "<frob/>\n</template>\n");
    CHECK_STR(s = tpl_errors("unknown"), "$D/tpl/unknown.xml:8: error: unknown element <frob>\n");
    free(s);

    tpl("blocks/b", "<block>\n<arg name=\"x\"/>\n<arg name=\"n\" default=\"4\"/>\n"
                    "<mil><![CDATA[\n  tensor<fp16, [1, {n}]> y = exp(x = {x});\n]]></mil>\n</block>\n");
    tpl("noarg", "<template>\n<input name=\"x\" shape=\"1, 4\"/>\n<include block=\"blocks/b\"/>\n"
                 "<output name=\"y\" shape=\"1, 4\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("noarg"), "$D/tpl/noarg.xml:4: error: block 'blocks/b' needs argument 'x'\n"
                                       "$D/tpl/blocks/b.xml:3: note: declared here\n");
    free(s);
    tpl("extraarg", "<template>\n<input name=\"x\" shape=\"1, 4\"/>\n<include block=\"blocks/b\" x=\"x\" m=\"1\"/>\n"
                    "<output name=\"y\" shape=\"1, 4\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("extraarg"), "$D/tpl/extraarg.xml:4: error: block 'blocks/b' has no argument 'm'\n");
    free(s);
    tpl("blockok", "<template>\n<input name=\"x\" shape=\"1, 4\"/>\n<include block=\"blocks/b\" x=\"x\"/>\n"
                   "<output name=\"y\" shape=\"1, 4\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("blockok"), "");
    free(s);

    tpl("interp", "<template>\n<input name=\"x\" shape=\"1, 8\"/>\n<mil><![CDATA[\n\n"
                  "  tensor<fp16, [1, {width}]> y = exp(x = x);\n]]></mil>\n</template>\n");
    CHECK_STR(s = tpl_errors("interp"), "$D/tpl/interp.xml:6: error: unknown name 'width' (in 'width')\n");
    free(s);

    tpl("nosemi", "<template>\n<mil><![CDATA[\n  tensor<fp16, [1, 8]> y = exp(x = x)\n]]></mil>\n</template>\n");
    CHECK_STR(s = tpl_errors("nosemi"), "$D/tpl/nosemi.xml:4: error: MIL statement does not end with ';'\n");
    free(s);

    tpl("require", "<template>\n<param name=\"n\" default=\"3\"/>\n<require test=\"n % 2 == 0\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("require"), "$D/tpl/require.xml:4: error: requirement failed: n % 2 == 0\n");
    free(s);

    tpl("noout", "<template>\n<input name=\"x\" shape=\"1, 8\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("noout"), "$D/tpl/noout.xml:2: error: the template declares no <output>\n");
    free(s);

    tpl("badshape", "<template>\n<input name=\"x\" shape=\"1, 8 - 8\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("badshape"),
              "$D/tpl/badshape.xml:3: error: shape '1, 8 - 8': dimension 1 is 0, not a positive integer\n");
    free(s);

    tpl("badinit", "<template>\n<weight name=\"w\" shape=\"4\" init=\"uniform(1)\"/>\n</template>\n");
    CHECK_STR(s = tpl_errors("badinit"), "$D/tpl/badinit.xml:3: error: weight 'w': unknown initializer 'uniform' "
                                         "(normal, zeros, ones, fill, rope_cos, rope_sin, rope_sign, causal_mask)\n");
    free(s);

    tpl("else", "<template>\n<else/>\n</template>\n");
    CHECK_STR(s = tpl_errors("else"), "$D/tpl/else.xml:3: error: <else> must follow an <if>\n");
    free(s);
}

TEST(generated_error_points_at_template) {
    /* An error the MIL checker finds is reported at the generated line, with
     * a note at the template line that produced it. */
    tpl("milerr",
        "<template>\n<input name=\"x\" shape=\"1, 8\"/>\n<mil><![CDATA[\n"
        "  tensor<fp16, [1, 8]> a = exp(x = x);\n"
        "  tensor<fp16, [1, 8]> y = frobnicate(x = a);\n]]></mil>\n<output name=\"y\" shape=\"1, 8\"/>\n</template>\n");
    char *s = tpl_errors("milerr");
    CHECK(strstr(s, "$D/out-err/model.mil:6:") != NULL);
    CHECK(strstr(s, "frobnicate") != NULL);
    CHECK(strstr(s, "$D/tpl/milerr.xml:6: note: generated from this template line\n") != NULL);
    free(s);
}

TEST(digest_covers_blocks) {
    char dir[128];
    snprintf(dir, sizeof dir, "%s/tpl", tmpdir);
    const char *dirs[] = {dir};
    GenSearchPath sp = {dirs, 1, NULL};
    DiagSink d;
    diag_init(&d);
    GenTemplate *t = gen_template_load(&sp, "blockok", &d);
    uint8_t a[16], b[16];
    CHECK(t != NULL);
    if (t) gen_template_digest(t, a);
    gen_template_free(t);
    tpl("blocks/b", "<block>\n<arg name=\"x\"/>\n<arg name=\"n\" default=\"4\"/>\n"
                    "<mil><![CDATA[\n  tensor<fp16, [1, {n}]> y = exp(x = {x}); // changed\n]]></mil>\n</block>\n");
    t = gen_template_load(&sp, "blockok", &d);
    CHECK(t != NULL);
    if (t) gen_template_digest(t, b);
    gen_template_free(t);
    CHECK(memcmp(a, b, 16) != 0);
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
}

TEST(template_set_shares_one_load) {
    /* Through a path with a set, a template is read once: later loads return
     * the same object (the file's later content is not seen), configs opened
     * through the path share it, and every load pairs with one free. */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/tpl", tmpdir);
    const char *dirs[] = {dir};
    GenSearchPath sp = {dirs, 1, gen_template_set_new()};
    CHECK(sp.loaded != NULL);
    tpl("shared", "<template>\n" MINI_OK "</template>\n");
    DiagSink d;
    diag_init(&d);
    GenTemplate *a = gen_template_load(&sp, "shared", &d);
    uint8_t da[16], db[16];
    if (a) gen_template_digest(a, da);
    tpl("shared", "<template>\n" MINI_OK "<!-- changed -->\n</template>\n");
    GenTemplate *b = gen_template_load(&sp, "shared", &d);
    CHECK(a != NULL && a == b);
    GenConfig *c1 = gen_config_open(&sp, "shared", &d), *c2 = gen_config_open(&sp, "shared", &d);
    CHECK(c1 && c2 && gen_config_template(c1) == a && gen_config_template(c2) == a);
    gen_template_free(a);
    gen_config_free(c1);
    gen_template_free(b);
    gen_config_free(c2);
    gen_template_set_free(sp.loaded); /* the last reference: ASan sees a leak or a double free */
    /* Without a set each load reads the file: the change is seen. */
    sp.loaded = NULL;
    GenTemplate *t = gen_template_load(&sp, "shared", &d);
    CHECK(t != NULL);
    if (t) gen_template_digest(t, db);
    CHECK(memcmp(da, db, 16) != 0);
    gen_template_free(t);
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
}

TEST(path_digest_sees_every_template_file) {
    /* The digest moves with any *.xml under a directory of the path (content,
     * a new file, a nested one) and with the directories themselves; other
     * files do not count. */
    char dir[128], other[160], path[256];
    snprintf(dir, sizeof dir, "%s/pd", tmpdir);
    snprintf(other, sizeof other, "%s/pd-absent", tmpdir);
    const char *dirs[] = {dir, other};
    GenSearchPath sp = {dirs, 2, NULL};
    uint8_t a[16], b[16];
    snprintf(path, sizeof path, "mkdir -p '%s/blocks'", dir);
    CHECK(system(path) == 0);
    snprintf(path, sizeof path, "%s/t.xml", dir);
    write_text(path, "<template/>");
    CHECK_EQ_INT(gen_path_digest(&sp, a), 0);
    CHECK_EQ_INT(gen_path_digest(&sp, b), 0);
    CHECK(memcmp(a, b, 16) == 0);
    snprintf(path, sizeof path, "%s/README.md", dir);
    write_text(path, "not a template");
    CHECK_EQ_INT(gen_path_digest(&sp, b), 0);
    CHECK(memcmp(a, b, 16) == 0);
    const char *steps[][2] = {{"t.xml", "<template/> "}, {"u.xml", "<template/>"}, {"blocks/x.xml", "<block/>"}};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, steps[i][0]);
        write_text(path, steps[i][1]);
        CHECK_EQ_INT(gen_path_digest(&sp, b), 0);
        CHECK(memcmp(a, b, 16) != 0);
        memcpy(a, b, 16);
    }
    snprintf(path, sizeof path, "mkdir -p '%s'", other);
    CHECK(system(path) == 0);
    CHECK_EQ_INT(gen_path_digest(&sp, b), 0);
    CHECK(memcmp(a, b, 16) != 0);
    /* A directory that is no template directory (thousands of entries, as a
     * home directory has) is given up on, not walked. */
    for (int i = 0; i < 16400; i++) {
        snprintf(path, sizeof path, "%s/f%05d", other, i);
        FILE *f = fopen(path, "w");
        if (f) fclose(f);
    }
    CHECK_EQ_INT(gen_path_digest(&sp, b), -1);
}

TEST(user_dir_shadows_and_adds) {
    /* A template dropped into a later directory is usable by name; an earlier
     * directory's template of the same name wins. */
    char dir[128];
    snprintf(dir, sizeof dir, "%s/tpl", tmpdir);
    const char *dirs[] = {MILC_TEMPLATE_DIR, dir};
    GenSearchPath sp = {dirs, 2, NULL};
    tpl("gpt2", "<template>\n" MINI_OK "</template>\n");
    DiagSink d;
    diag_init(&d);
    GenTemplate *t = gen_template_load(&sp, "gpt2", &d);
    CHECK(t && strstr(gen_template_path(t), MILC_TEMPLATE_DIR) == gen_template_path(t));
    gen_template_free(t);
    t = gen_template_load(&sp, "ok", &d);
    CHECK(t != NULL);
    gen_template_free(t);
    /* listing: the user's templates appear, broken files are warnings */
    GenEntry *e;
    int n, found_ok = 0, gpt2 = 0;
    CHECK_EQ_INT(gen_list(&sp, &e, &n, &d), 0);
    for (int i = 0; i < n; i++) {
        found_ok += !strcmp(e[i].name, "ok");
        gpt2 += !strcmp(e[i].name, "gpt2") && e[i].kind == GEN_ENTRY_TEMPLATE;
    }
    CHECK_EQ_INT(found_ok, 1);
    CHECK_EQ_INT(gpt2, 1);
    gen_list_free(e, n);
    CHECK_EQ_INT(d.errors, 0);
    char *s = headlines(&d);
    CHECK(strstr(
        s, "$D/tpl/badxml.xml:4: warning: skipped: XML: Opening and ending tag mismatch: param line 3 and template\n"));
    free(s);
    diag_free(&d);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/milc-gen-XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    RUN(expr_arithmetic);
    RUN(expr_values);
    RUN(expr_errors);
    RUN(expr_overflow);
    RUN(name_matching);
    RUN(listing);
    RUN(describe);
    RUN(canonical_and_presets);
    RUN(golden_programs);
    RUN(result_io_packed);
    RUN(result_io_contract);
    RUN(determinism);
    RUN(chunks_compose);
    RUN(fill_variants_agree);
    RUN(weights_digest);
    RUN(checkpoint_digest_is_the_tree);
    RUN(bf16_variants_agree);
    RUN(checkpoint_changed_while_open);
    RUN(parameter_errors);
    RUN(template_errors);
    RUN(generated_error_points_at_template);
    RUN(digest_covers_blocks);
    RUN(template_set_shares_one_load);
    RUN(path_digest_sees_every_template_file);
    RUN(user_dir_shadows_and_adds);
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    TEST_MAIN_END();
}
