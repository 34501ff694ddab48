/* test_backend.c — the backend's passes and lowering on small hand-written
 * MIL: dead code, folding, what fuses and what must not, dumps that re-parse,
 * the SSA verifier, diagnostics for what the CPU backend cannot lower, and
 * fused vs unfused programs against a direct double-precision reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "milc/backend.h"
#include "milc/blob.h"
#include "milc/half.h"
#include "milc/mil.h"
#include "test.h"

typedef struct Compiled {
    Arena a;
    DiagSink d;
    IrProgram *p;
    RtArtifact *art;
    BackendStats st;
    char *dump;
    int rc;
} Compiled;

static void compile_ex(Compiled *c, const char *text, int mode, const char *dump, bool no_fuse) {
    memset(c, 0, sizeof *c);
    arena_init(&c->a);
    diag_init(&c->d);
    c->rc = -1;
    c->p = mil_parse(&c->a, &c->d, "t.mil", text, strlen(text));
    if (!c->p || !mil_check(c->p, NULL, &c->d)) return;
    BackendOptions o = {.mode = mode,
                        .model_path = ".",
                        .dump_stage = dump,
                        .dump_out = &c->dump,
                        .verify_ir = true,
                        .no_fuse = no_fuse};
    c->rc = backend_compile(c->p, &o, &c->art, &c->st, &c->d);
}
static void compile(Compiled *c, const char *text, int mode) { compile_ex(c, text, mode, NULL, false); }

static void release(Compiled *c) {
    if (c->art) rt_artifact_free(c->art);
    free(c->dump);
    diag_free(&c->d);
    arena_free(&c->a);
}

static char *diags(const Compiled *c) { return diag_render(&c->d); }

/* Run c's artifact: inputs fp32 arrays (converted to each input's io dtype),
 * outputs written as fp32.  Returns RT_OK or an error. */
static int run(const Compiled *c, const float *const *ins, float *const *outs, int flags) {
    const RtSection *secs;
    int n;
    rt_artifact_sections(c->art, &secs, &n);
    RtModel *m;
    char err[256];
    RtLoadOptions lo = {.nthreads = 2, .flags = RT_LOAD_VERIFY};
    int rc = rt_model_load(&m, secs, n, &lo, err, sizeof err);
    if (rc) {
        fprintf(stderr, "load: %s\n", err);
        return rc;
    }
    RtTensor in[8], out[8];
    int nin = rt_model_ninputs(m), nout = rt_model_noutputs(m);
    for (int i = 0; i < nin; i++) {
        RtIoInfo io;
        rt_model_input(m, i, &io);
        int64_t k = 1;
        for (int r = 0; r < io.rank; r++) k *= io.dims[r];
        in[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank, .size = (size_t)k * rt_dtype_size(io.dtype)};
        memcpy(in[i].dims, io.dims, sizeof io.dims);
        in[i].data = malloc(in[i].size + 1);
        for (int64_t e = 0; e < k; e++) {
            if (io.dtype == RT_F16)
                ((uint16_t *)in[i].data)[e] = float_to_half(ins[i][e]);
            else if (io.dtype == RT_I32)
                ((int32_t *)in[i].data)[e] = (int32_t)ins[i][e];
            else if (io.dtype == RT_BOOL)
                ((uint8_t *)in[i].data)[e] = ins[i][e] != 0;
            else
                ((float *)in[i].data)[e] = ins[i][e];
        }
    }
    for (int i = 0; i < nout; i++) {
        RtIoInfo io;
        rt_model_output(m, i, &io);
        int64_t k = 1;
        for (int r = 0; r < io.rank; r++) k *= io.dims[r];
        out[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank, .size = (size_t)k * rt_dtype_size(io.dtype)};
        memcpy(out[i].dims, io.dims, sizeof io.dims);
        out[i].data = malloc(out[i].size + 1);
    }
    rc = rt_run(m, in, nin, out, nout, flags, NULL);
    for (int i = 0; i < nout; i++) {
        size_t k = out[i].size / rt_dtype_size(out[i].dtype);
        for (size_t e = 0; e < k; e++)
            outs[i][e] = out[i].dtype == RT_F16    ? half_to_float(((uint16_t *)out[i].data)[e])
                         : out[i].dtype == RT_I32  ? (float)((int32_t *)out[i].data)[e]
                         : out[i].dtype == RT_BOOL ? (float)((uint8_t *)out[i].data)[e]
                                                   : ((float *)out[i].data)[e];
        free(out[i].data);
    }
    for (int i = 0; i < nin; i++) free(in[i].data);
    rt_model_free(m);
    return rc;
}

static double max_rel(const float *a, const double *b, int n) {
    double m = 1e-9, e = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(b[i]));
    for (int i = 0; i < n; i++) e = fmax(e, fabs(a[i] - b[i]));
    return e / m;
}

static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

#define HDR "program(1.3)\n{\n    func main<ios18>("

/* ---- passes ---- */

TEST(dce_removes_dead_chains) {
    const char *src = HDR "tensor<fp32, [4]> x) {\n"
                          "        tensor<fp32, [4]> a = exp(x = x);\n"
                          "        tensor<fp32, [4]> b = exp(x = a);\n"
                          "        tensor<fp32, [4]> y = sigmoid(x = x);\n"
                          "    } -> (y);\n}\n";
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "t.mil", src, strlen(src));
    CHECK(p && mil_check(p, NULL, &d));
    if (p) {
        IrFunction *f = ir_program_function(p, "main");
        CHECK_EQ_INT(backend_dce(f), 2);
        CHECK_EQ_INT(f->nops, 1);
        CHECK(backend_verify(f, "dce", &d));
        CHECK_EQ_INT(backend_dce(f), 0);
    }
    diag_free(&d);
    arena_free(&a);
}

TEST(fold_constants) {
    const char *src =
        HDR "tensor<fp32, [2, 3]> x) {\n"
            "        tensor<fp32, [3, 2]> c = const()[val = tensor<fp32, [3, 2]>([[1, 2], [3, 4], [5, 6]])];\n"
            "        tensor<int32, [2]> pm = const()[val = tensor<int32, [2]>([1, 0])];\n"
            "        tensor<fp32, [2, 3]> ct = transpose(x = c, perm = pm);\n"
            "        fp32 two = const()[val = fp32(2)];\n"
            "        tensor<fp32, [2, 3]> c2 = mul(x = ct, y = two);\n"
            "        tensor<int32, [2]> sh = const()[val = tensor<int32, [2]>([2, 3])];\n"
            "        tensor<fp32, [2, 3]> c3 = reshape(x = c2, shape = sh);\n"
            "        tensor<fp32, [2, 3]> y = add(x = x, y = c3);\n"
            "    } -> (y);\n}\n";
    Compiled c;
    compile_ex(&c, src, 2, "fold", false);
    CHECK_EQ_INT(c.rc, 0);
    /* the three const ops fold into one tensor; only the add stays */
    CHECK(c.dump && strstr(c.dump, "tensor<fp32, [2, 3]> c3 = const()"));
    CHECK(c.dump && strstr(c.dump, "[[0x1p+1, 0x1.8p+2, 0x1.4p+3], [0x1p+2, 0x1p+3, 0x1.8p+3]]"));
    CHECK(c.dump && !strstr(c.dump, "transpose("));
    CHECK_EQ_INT(c.st.ops_out, 1);
    float x[6] = {1, 1, 1, 1, 1, 1}, y[6];
    const float *in[1] = {x};
    float *out[1] = {y};
    if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
    const float want[6] = {3, 7, 11, 5, 9, 13};
    for (int i = 0; i < 6; i++) CHECK(y[i] == want[i]);
    release(&c);
}

TEST(dumps_reparse) {
    const char *src = HDR "tensor<fp16, [1, 8, 1, 4]> x) {\n"
                          "        tensor<fp16, [1, 8, 1, 4]> sq = mul(x = x, y = x);\n"
                          "        tensor<int32, [1]> ax = const()[val = tensor<int32, [1]>([1])];\n"
                          "        bool kd = const()[val = bool(true)];\n"
                          "        tensor<fp16, [1, 1, 1, 4]> ms = reduce_mean(x = sq, axes = ax, keep_dims = kd);\n"
                          "        fp16 eps = const()[val = fp16(0x1p-10)];\n"
                          "        tensor<fp16, [1, 1, 1, 4]> r = rsqrt(x = ms, epsilon = eps);\n"
                          "        tensor<fp16, [1, 8, 1, 4]> y = mul(x = x, y = r);\n"
                          "    } -> (y);\n}\n";
    const char *const *stages = backend_stage_names();
    int n = 0;
    for (int i = 0; stages[i]; i++, n++) {
        Compiled c;
        compile_ex(&c, src, 2, stages[i], false);
        CHECK_EQ_INT(c.rc, 0);
        CHECK(c.dump != NULL);
        if (c.dump) {
            Arena a;
            arena_init(&a);
            DiagSink d;
            diag_init(&d);
            IrProgram *p = mil_parse(&a, &d, "dump.mil", c.dump, strlen(c.dump));
            CHECK(p && mil_check(p, NULL, &d));
            if (!strcmp(stages[i], "fuse")) CHECK(strstr(c.dump, "// fused: 0 gemm, 1 norm, 0 attention") != NULL);
            diag_free(&d);
            arena_free(&a);
        }
        release(&c);
    }
    CHECK_EQ_INT(n, 5);
    Compiled c;
    compile_ex(&c, src, 2, "lower", false);
    char *s = diags(&c);
    CHECK_STR(s, "t.mil: error: unknown dump stage 'lower' (stages: parse, check, dce, fold, fuse)\n");
    free(s);
    release(&c);
}

TEST(verifier_catches_use_before_def) {
    const char *src = HDR "tensor<fp32, [4]> x) {\n"
                          "        tensor<fp32, [4]> a = exp(x = x);\n"
                          "        tensor<fp32, [4]> y = exp(x = a);\n"
                          "    } -> (y);\n}\n";
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "t.mil", src, strlen(src));
    CHECK(p != NULL);
    if (p) {
        IrFunction *f = ir_program_function(p, "main");
        IrOp *first = f->first, *second = first->next;
        ir_op_remove(first);
        ir_op_insert_after(second, first); /* y = exp(a) now precedes a's definition */
        CHECK(!backend_verify(f, "test", &d));
        char *s = diag_render(&d);
        CHECK(strstr(s, "t.mil:5:35: error: IR verifier (after test): 'a' used by 'y' before its definition") != NULL);
        if (!strstr(s, "t.mil:5:35")) fputs(s, stderr);
        free(s);
    }
    diag_free(&d);
    arena_free(&a);
}

/* ---- fusion ---- */

/* y = gelu(W x + b) + x as 1x1 conv on [1, C, 1, S] */
static const char *gemm_src(const char *extra_out) {
    static char buf[4096];
    snprintf(
        buf, sizeof buf,
        HDR "tensor<fp32, [1, 4, 1, 3]> x) {\n"
            "        tensor<fp32, [4, 4, 1, 1]> w = const()[val = tensor<fp32, [4, 4, 1, 1]>([[[[0.5]], [[-1]], "
            "[[0.25]], [[1]]], "
            "[[[1]], [[0.5]], [[0]], [[-0.5]]], [[[0]], [[2]], [[1]], [[0.5]]], [[[-1]], [[0]], [[0.5]], [[1.5]]]])];\n"
            "        string pt = const()[val = string(\"valid\")];\n"
            "        tensor<fp32, [1, 4, 1, 3]> mm = conv(x = x, weight = w, pad_type = pt);\n"
            "        tensor<fp32, [1, 4, 1, 1]> b = const()[val = tensor<fp32, [1, 4, 1, 1]>([[[[0.1]], [[0.2]], "
            "[[-0.3]], [[0.4]]]])];\n"
            "        tensor<fp32, [1, 4, 1, 3]> mb = add(x = mm, y = b);\n"
            "        string gm = const()[val = string(\"TANH_APPROXIMATION\")];\n"
            "        tensor<fp32, [1, 4, 1, 3]> g = gelu(x = mb, mode = gm);\n"
            "        tensor<fp32, [1, 4, 1, 3]> y = add(x = x, y = g);\n"
            "    } -> (y%s);\n}\n",
        extra_out);
    return buf;
}

static void gemm_reference(const float *x, double *y) {
    const double w[4][4] = {{0.5, -1, 0.25, 1}, {1, 0.5, 0, -0.5}, {0, 2, 1, 0.5}, {-1, 0, 0.5, 1.5}},
                 b[4] = {0.1, 0.2, -0.3, 0.4};
    for (int o = 0; o < 4; o++)
        for (int s = 0; s < 3; s++) {
            double acc = b[o];
            for (int i = 0; i < 4; i++) acc += w[o][i] * x[i * 3 + s];
            double g = 0.5 * acc * (1 + tanh(sqrt(2 / M_PI) * (acc + 0.044715 * acc * acc * acc)));
            y[o * 3 + s] = x[o * 3 + s] + g;
        }
}

TEST(gemm_bias_act_residual_fuse) {
    float x[12], y[12], y2[12];
    for (int i = 0; i < 12; i++) x[i] = frand();
    double ref[12];
    gemm_reference(x, ref);
    const float *in[1] = {x};
    for (int mode = 0; mode <= 2; mode++) {
        Compiled c;
        compile(&c, gemm_src(""), mode);
        CHECK_EQ_INT(c.rc, 0);
        if (mode != 1) {
            CHECK_EQ_INT(c.st.fused_gemm, 1);
            CHECK_EQ_INT(c.st.ops_out, 1); /* one GEMM with bias, gelu and residual */
        } else {
            CHECK_EQ_INT(c.st.ops_out, 4);
            CHECK_EQ_INT(c.st.dispatches, 4);
        }
        float *out[1] = {y};
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        CHECK(max_rel(y, ref, 12) < 1e-5);
        if (mode == 0) {
            float *o2[1] = {y2};
            CHECK_EQ_INT(run(&c, in, o2, RT_RUN_NONBONDED), RT_OK);
            CHECK(max_rel(y2, ref, 12) < 1e-5);
        }
        release(&c);
    }
    /* the biased value is also returned: bias fuses, gelu and residual cannot */
    Compiled c;
    compile(&c, gemm_src(", mb"), 2);
    CHECK_EQ_INT(c.rc, 0);
    CHECK_EQ_INT(c.st.fused_gemm, 1);
    CHECK_EQ_INT(c.st.ops_out, 3);
    float mb[12];
    float *out[2] = {y, mb};
    if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
    CHECK(max_rel(y, ref, 12) < 1e-5);
    release(&c);
}

/* RMSNorm and LayerNorm chains, [1, 8, 1, 4] over channels, with gamma (and beta). */
static const char *norm_src =
    HDR "tensor<fp32, [1, 8, 1, 4]> x) {\n"
        "        tensor<int32, [1]> ax = const()[val = tensor<int32, [1]>([1])];\n"
        "        bool kd = const()[val = bool(true)];\n"
        "        fp32 eps = const()[val = fp32(0x1p-10)];\n"
        "        tensor<fp32, [1, 8, 1, 1]> g = const()[val = tensor<fp32, [1, 8, 1, 1]>([[[[1]], [[2]], [[0.5]], "
        "[[1]], [[-1]], [[1]], [[1.5]], [[1]]]])];\n"
        "        tensor<fp32, [1, 8, 1, 1]> b = const()[val = tensor<fp32, [1, 8, 1, 1]>([[[[0]], [[0.5]], [[0]], "
        "[[1]], [[0]], [[0]], [[-2]], [[0]]]])];\n"
        "        tensor<fp32, [1, 8, 1, 4]> sq = mul(x = x, y = x);\n"
        "        tensor<fp32, [1, 1, 1, 4]> ms = reduce_mean(x = sq, axes = ax, keep_dims = kd);\n"
        "        tensor<fp32, [1, 1, 1, 4]> r = rsqrt(x = ms, epsilon = eps);\n"
        "        tensor<fp32, [1, 8, 1, 4]> n = mul(x = r, y = x);\n"
        "        tensor<fp32, [1, 8, 1, 4]> rms = mul(x = n, y = g);\n"
        "        tensor<fp32, [1, 1, 1, 4]> mu = reduce_mean(x = x, axes = ax, keep_dims = kd);\n"
        "        tensor<fp32, [1, 8, 1, 4]> xc = sub(x = x, y = mu);\n"
        "        tensor<fp32, [1, 8, 1, 4]> xc2 = mul(x = xc, y = xc);\n"
        "        tensor<fp32, [1, 1, 1, 4]> var = reduce_mean(x = xc2, axes = ax, keep_dims = kd);\n"
        "        tensor<fp32, [1, 1, 1, 4]> ve = add(x = var, y = eps);\n"
        "        fp32 e0 = const()[val = fp32(0)];\n"
        "        tensor<fp32, [1, 1, 1, 4]> rs = rsqrt(x = ve, epsilon = e0);\n"
        "        tensor<fp32, [1, 8, 1, 4]> ln0 = mul(x = xc, y = rs);\n"
        "        tensor<fp32, [1, 8, 1, 4]> ln1 = mul(x = ln0, y = g);\n"
        "        tensor<fp32, [1, 8, 1, 4]> ln = add(x = ln1, y = b);\n"
        "    } -> (rms, ln);\n}\n";

TEST(norm_chains_fuse) {
    float x[32], rms[32], ln[32];
    for (int i = 0; i < 32; i++) x[i] = frand() * 3;
    const double g[8] = {1, 2, 0.5, 1, -1, 1, 1.5, 1}, b[8] = {0, 0.5, 0, 1, 0, 0, -2, 0}, eps = 1.0 / 1024;
    double rr[32], rl[32];
    for (int s = 0; s < 4; s++) {
        double ms = 0, mu = 0, var = 0;
        for (int c = 0; c < 8; c++) ms += x[c * 4 + s] * x[c * 4 + s] / 8, mu += x[c * 4 + s] / 8.0;
        for (int c = 0; c < 8; c++) var += (x[c * 4 + s] - mu) * (x[c * 4 + s] - mu) / 8;
        for (int c = 0; c < 8; c++) {
            rr[c * 4 + s] = x[c * 4 + s] / sqrt(ms + eps) * g[c];
            rl[c * 4 + s] = (x[c * 4 + s] - mu) / sqrt(var + eps) * g[c] + b[c];
        }
    }
    const float *in[1] = {x};
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, norm_src, mode);
        CHECK_EQ_INT(c.rc, 0);
        CHECK_EQ_INT(c.st.fused_norm, mode == 2 ? 2 : 0);
        if (mode == 2) CHECK_EQ_INT(c.st.ops_out, 2);
        float *out[2] = {rms, ln};
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        CHECK(max_rel(rms, rr, 32) < 1e-5);
        CHECK(max_rel(ln, rl, 32) < 1e-5);
        release(&c);
    }
}

/* Decomposed attention on [1, H, L, E] with a real_div scale and an additive
 * mask input: fused in mode 2, and not fused when the scores are returned. */
static const char *attn_src(const char *extra) {
    static char buf[4096];
    snprintf(buf, sizeof buf,
             HDR "tensor<fp32, [1, 2, 3, 4]> q, tensor<fp32, [1, 2, 5, 4]> k, tensor<fp32, [1, 2, 5, 4]> v, "
                 "tensor<fp32, [1, 1, 3, 5]> m) {\n"
                 "        bool f = const()[val = bool(false)];\n"
                 "        bool t = const()[val = bool(true)];\n"
                 "        tensor<fp32, [1, 2, 3, 5]> s = matmul(x = q, y = k, transpose_x = f, transpose_y = t);\n"
                 "        fp32 d = const()[val = fp32(2)];\n"
                 "        tensor<fp32, [1, 2, 3, 5]> sd = real_div(x = s, y = d);\n"
                 "        tensor<fp32, [1, 2, 3, 5]> sm = add(x = sd, y = m);\n"
                 "        int32 am = const()[val = int32(-1)];\n"
                 "        tensor<fp32, [1, 2, 3, 5]> p = softmax(x = sm, axis = am);\n"
                 "        tensor<fp32, [1, 2, 3, 4]> y = matmul(x = p, y = v, transpose_x = f, transpose_y = f);\n"
                 "    } -> (y%s);\n}\n",
             extra);
    return buf;
}

TEST(attention_fuses) {
    float q[24], k[40], v[40], m[15], y[24], sd[30];
    for (int i = 0; i < 24; i++) q[i] = frand() * 2;
    for (int i = 0; i < 40; i++) k[i] = frand() * 2, v[i] = frand();
    for (int i = 0; i < 15; i++) m[i] = (i % 5) > (i / 5) + 2 ? -1e4f : 0.1f * (float)i;
    double ref[24];
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 3; l++) {
            double s[5], mx = -1e300, sum = 0;
            for (int j = 0; j < 5; j++) {
                s[j] = 0;
                for (int e = 0; e < 4; e++) s[j] += q[(h * 3 + l) * 4 + e] * k[(h * 5 + j) * 4 + e];
                s[j] = s[j] / 2 + m[l * 5 + j];
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j < 5; j++) sum += s[j] = exp(s[j] - mx);
            for (int e = 0; e < 4; e++) {
                double acc = 0;
                for (int j = 0; j < 5; j++) acc += s[j] / sum * v[(h * 5 + j) * 4 + e];
                ref[(h * 3 + l) * 4 + e] = acc;
            }
        }
    const float *in[4] = {q, k, v, m};
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, attn_src(""), mode);
        CHECK_EQ_INT(c.rc, 0);
        CHECK_EQ_INT(c.st.fused_attn, mode == 2);
        if (mode == 2) CHECK_EQ_INT(c.st.ops_out, 1);
        float *out[1] = {y};
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        CHECK(max_rel(y, ref, 24) < 1e-5);
        release(&c);
    }
    /* mode 0 with same_ops: both programs hold the one fused op */
    Compiled c;
    memset(&c, 0, sizeof c);
    arena_init(&c.a);
    diag_init(&c.d);
    c.p = mil_parse(&c.a, &c.d, "t.mil", attn_src(""), strlen(attn_src("")));
    BackendOptions o = {.mode = 0, .same_ops = true, .verify_ir = true};
    CHECK(c.p && mil_check(c.p, NULL, &c.d) && backend_compile(c.p, &o, &c.art, &c.st, &c.d) == 0);
    for (int flags = 0; flags <= RT_RUN_NONBONDED; flags += RT_RUN_NONBONDED) {
        float *out[1] = {y};
        memset(y, 0, sizeof y);
        if (c.art) CHECK_EQ_INT(run(&c, in, out, flags), RT_OK);
        CHECK(max_rel(y, ref, 24) < 1e-5);
    }
    release(&c);
    compile(&c, attn_src(", sd"), 2);
    CHECK_EQ_INT(c.rc, 0);
    CHECK_EQ_INT(c.st.fused_attn, 0);
    float *out[2] = {y, sd};
    if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
    CHECK(max_rel(y, ref, 24) < 1e-5);
    release(&c);
}

/* linear -> transpose -> reshape [1, N, 1, M] -> + bias -> silu -> + residual,
 * on an x that is not the transpose of a channels buffer: the rows-GEMM
 * fallback of the fused group must equal the unfused program. */
TEST(linear_post_views_fallback) {
    const char *src = HDR
        "tensor<fp32, [3, 4]> x, tensor<fp32, [1, 2, 1, 3]> r) {\n"
        "        tensor<fp32, [2, 4]> w = const()[val = tensor<fp32, [2, 4]>([[1, -0.5, 0.25, 2], [0, 1, -1, 0.5]])];\n"
        "        tensor<fp32, [3, 2]> l = linear(x = x, weight = w);\n"
        "        tensor<int32, [2]> pm = const()[val = tensor<int32, [2]>([1, 0])];\n"
        "        tensor<fp32, [2, 3]> lt = transpose(x = l, perm = pm);\n"
        "        tensor<int32, [4]> s4 = const()[val = tensor<int32, [4]>([1, 2, 1, 3])];\n"
        "        tensor<fp32, [1, 2, 1, 3]> l4 = reshape(x = lt, shape = s4);\n"
        "        tensor<fp32, [1, 2, 1, 1]> b = const()[val = tensor<fp32, [1, 2, 1, 1]>([[[[0.5]], [[-1]]]])];\n"
        "        tensor<fp32, [1, 2, 1, 3]> lb = add(x = l4, y = b);\n"
        "        tensor<fp32, [1, 2, 1, 3]> ls = silu(x = lb);\n"
        "        tensor<fp32, [1, 2, 1, 3]> y = add(x = ls, y = r);\n"
        "    } -> (y);\n}\n";
    float x[12], r[6], y[6];
    for (int i = 0; i < 12; i++) x[i] = frand() * 2;
    for (int i = 0; i < 6; i++) r[i] = frand();
    const double W[2][4] = {{1, -0.5, 0.25, 2}, {0, 1, -1, 0.5}}, B[2] = {0.5, -1};
    double ref[6];
    for (int n = 0; n < 2; n++)
        for (int m = 0; m < 3; m++) {
            double a = B[n];
            for (int k = 0; k < 4; k++) a += W[n][k] * x[m * 4 + k];
            ref[n * 3 + m] = a / (1 + exp(-a)) + r[n * 3 + m];
        }
    const float *in[2] = {x, r};
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        CHECK_EQ_INT(c.st.fused_gemm, mode == 2);
        float *out[1] = {y};
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        CHECK(max_rel(y, ref, 6) < 1e-5);
        release(&c);
    }
}

/* ---- diagnostics ---- */

/* A 3x3 convolution was once refused ("1x1 convolutions only"); it runs
 * now, as im2col + GEMM.  All-ones weights: each output is its window's sum. */
TEST(conv_3x3_runs) {
    const char *src = HDR "tensor<fp32, [1, 2, 4, 4]> x) {\n"
                          "        tensor<fp32, [1, 2, 3, 3]> w = const()[val = tensor<fp32, [1, 2, 3, 3]>([[[[1, 1, "
                          "1], [1, 1, 1], [1, 1, 1]], [[1, 1, 1], [1, 1, 1], [1, 1, 1]]]])];\n"
                          "        string pt = const()[val = string(\"valid\")];\n"
                          "        tensor<fp32, [1, 1, 2, 2]> y = conv(x = x, weight = w, pad_type = pt);\n"
                          "    } -> (y);\n}\n";
    float x[32], y[4];
    double ref[4] = {0};
    for (int i = 0; i < 32; i++) x[i] = (float)i;
    for (int oy = 0; oy < 2; oy++)
        for (int ox = 0; ox < 2; ox++)
            for (int c = 0; c < 2; c++)
                for (int ky = 0; ky < 3; ky++)
                    for (int kx = 0; kx < 3; kx++) ref[oy * 2 + ox] += x[c * 16 + (oy + ky) * 4 + ox + kx];
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        const float *in[1] = {x};
        float *out[1] = {y};
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        CHECK(max_rel(y, ref, 4) < 1e-6);
        release(&c);
    }
}

/* An int8 weight stays int8 (issue #16: compressed weights stay compressed):
 * linear over constexpr_affine_dequantize per output channel, [64, 256], is
 * one weight section of exactly its 16 KB of bytes, and the artifact's
 * weights together are under what the fp16 dense weight alone would take. */
/* src (x [1, K] -> y [1, n]) compiled in modes 1 and 2: exactly one weight
 * section of `form` bytes (the compressed form: no widened copy), all of
 * them under `under` bytes, and y within 1e-5 of ref. */
static void compressed_runs(const char *src, const float *xv, const double *ref, int n, size_t form, size_t under) {
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        if (!c.art) {
            release(&c);
            continue;
        }
        const RtSection *secs;
        int ns;
        size_t wbytes = 0, exact = 0;
        rt_artifact_sections(c.art, &secs, &ns);
        for (int i = 0; i < ns; i++)
            if (secs[i].kind == RT_SEC_WEIGHT) wbytes += secs[i].size, exact += secs[i].size == form;
        CHECK(exact == 1);
        CHECK(wbytes < under);
        float y[256];
        const float *in[1] = {xv};
        float *out[1] = {y};
        CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        CHECK(max_rel(y, ref, n) < 1e-5);
        release(&c);
    }
}

/* linear over an 8-bit (constexpr_affine_dequantize, a scale per output
 * channel) or 4-bit (constexpr_blockwise_shift_scale, blocks of 32 along K
 * with offsets) weight: the artifact holds the integers at their own width,
 * not a widened copy, and the result matches the dequantized product. */
static void quant_weight_case(int bits) {
    enum { N = 64, K = 256, BK = K / 32 };
    const char *qt = bits == 8 ? "int8" : "int4";
    int lo = bits == 8 ? -125 : -8, span = bits == 8 ? 251 : 16;
    size_t cap = (size_t)N * K * 6 + 65536, len = 0;
    char *src = malloc(cap);
    len += (size_t)snprintf(src + len, cap - len,
                            HDR "tensor<fp32, [1, %d]> x) {\n        tensor<%s, [%d, %d]> q = const()[val = "
                                "tensor<%s, [%d, %d]>([",
                            K, qt, N, K, qt, N, K);
    static int q[N * K];
    float sc[N * BK], xv[K];
    int of[N * BK];
    double ref[N];
    for (int i = 0; i < N * K; i++) q[i] = (i * 37 + 11) % span + lo;
    for (int n = 0; n < N; n++) {
        len += (size_t)snprintf(src + len, cap - len, "%s[", n ? ", " : "");
        for (int k = 0; k < K; k++) len += (size_t)snprintf(src + len, cap - len, "%s%d", k ? ", " : "", q[n * K + k]);
        len += (size_t)snprintf(src + len, cap - len, "]");
    }
    for (int i = 0; i < N * BK; i++) sc[i] = 0.01f + 0.001f * (float)(i % 97), of[i] = i % 5 - 2;
    if (bits == 8) {
        len += (size_t)snprintf(src + len, cap - len, "])];\n        tensor<fp32, [%d]> sc = const()[val = "
                                "tensor<fp32, [%d]>([", N, N);
        for (int i = 0; i < N; i++) len += (size_t)snprintf(src + len, cap - len, "%s%.9g", i ? ", " : "", (double)sc[i]);
    } else {
        len += (size_t)snprintf(src + len, cap - len, "])];\n        tensor<fp32, [%d, %d]> sc = const()[val = "
                                "tensor<fp32, [%d, %d]>([", N, BK, N, BK);
        for (int i = 0; i < N * BK; i++)
            len += (size_t)snprintf(src + len, cap - len, "%s%s%.9g%s", i ? ", " : "", i % BK ? "" : "[", (double)sc[i],
                                    i % BK == BK - 1 ? "]" : "");
    }
    if (bits == 8) {
        snprintf(src + len, cap - len,
                 "])];\n        tensor<fp32, [%d, %d]> w = constexpr_affine_dequantize(quantized_data = q, zero_point = "
                 "int8(3), scale = sc, axis = int32(0));\n        tensor<fp32, [1, %d]> y = linear(x = x, weight = w);\n"
                 "    } -> (y);\n}\n",
                 N, K, N);
    } else {
        len += (size_t)snprintf(src + len, cap - len,
                                "])];\n        tensor<int4, [%d, %d]> of = const()[val = tensor<int4, [%d, %d]>([", N,
                                BK, N, BK);
        for (int i = 0; i < N * BK; i++)
            len += (size_t)snprintf(src + len, cap - len, "%s%s%d%s", i ? ", " : "", i % BK ? "" : "[", of[i],
                                    i % BK == BK - 1 ? "]" : "");
        snprintf(src + len, cap - len,
                 "])];\n        tensor<fp32, [%d, %d]> w = constexpr_blockwise_shift_scale(data = q, scale = sc, "
                 "offset = of);\n        tensor<fp32, [1, %d]> y = linear(x = x, weight = w);\n    } -> (y);\n}\n",
                 N, K, N);
    }
    for (int k = 0; k < K; k++) xv[k] = frand();
    for (int n = 0; n < N; n++) {
        ref[n] = 0;
        for (int k = 0; k < K; k++) {
            int b = bits == 8 ? n : n * BK + k / 32;
            ref[n] += (double)xv[k] * ((double)q[n * K + k] - (bits == 8 ? 3 : of[b])) * sc[b];
        }
    }
    compressed_runs(src, xv, ref, N, (size_t)N * K * bits / 8, (size_t)N * K * bits / 4);
    free(src);
}

/* linear over a 2-bit palettized weight (a palette of 4 per output row):
 * the artifact holds the packed indices, N·K/4 bytes, and nothing wider.
 * (Palettes below 4 bits were once refused in a linear layer.) */
TEST(lut2_weight_stays_2bit) {
    enum { N = 32, K = 512 };
    size_t cap = (size_t)N * K * 4 + 65536, len = 0;
    char *src = malloc(cap);
    static int ix[N * K];
    float pal[N * 4], xv[K];
    double ref[N];
    for (int i = 0; i < N * K; i++) ix[i] = (i * 7 + i / 5) % 4;
    for (int i = 0; i < N * 4; i++) pal[i] = (float)((i * 13) % 17 - 8) / 8.0f;
    len += (size_t)snprintf(src + len, cap - len,
                            HDR "tensor<fp32, [1, %d]> x) {\n        tensor<uint2, [%d, %d]> ix = const()[val = "
                                "tensor<uint2, [%d, %d]>([",
                            K, N, K, N, K);
    for (int n = 0; n < N; n++) {
        len += (size_t)snprintf(src + len, cap - len, "%s[", n ? ", " : "");
        for (int k = 0; k < K; k++) len += (size_t)snprintf(src + len, cap - len, "%s%d", k ? ", " : "", ix[n * K + k]);
        len += (size_t)snprintf(src + len, cap - len, "]");
    }
    len += (size_t)snprintf(src + len, cap - len,
                            "])];\n        tensor<fp32, [%d, 1, 4, 1]> lut = const()[val = tensor<fp32, [%d, 1, 4, 1]>([",
                            N, N);
    for (int n = 0; n < N; n++)
        len += (size_t)snprintf(src + len, cap - len, "%s[[[%.9g], [%.9g], [%.9g], [%.9g]]]", n ? ", " : "",
                                (double)pal[4 * n], (double)pal[4 * n + 1], (double)pal[4 * n + 2], (double)pal[4 * n + 3]);
    snprintf(src + len, cap - len,
             "])];\n        tensor<fp32, [%d, %d]> w = constexpr_lut_to_dense(indices = ix, lut = lut);\n"
             "        tensor<fp32, [1, %d]> y = linear(x = x, weight = w);\n    } -> (y);\n}\n",
             N, K, N);
    for (int k = 0; k < K; k++) xv[k] = frand();
    for (int n = 0; n < N; n++) {
        ref[n] = 0;
        for (int k = 0; k < K; k++) ref[n] += (double)xv[k] * pal[4 * n + ix[n * K + k]];
    }
    compressed_runs(src, xv, ref, N, (size_t)N * K / 4, (size_t)N * K / 2);
    free(src);
}

/* linear over constexpr_sparse_to_dense (iOS18's uint1 mask, about a third
 * set): the artifact holds the mask bits and the nonzero values, no dense
 * weight, and the result matches the dense product. */
TEST(sparse_weight_stays_sparse) {
    enum { N = 64, K = 256 };
    size_t cap = (size_t)N * K * 16 + 65536, len = 0;
    char *src = malloc(cap);
    static float w[N * K];
    float xv[K];
    double ref[N];
    int nnz = 0;
    for (int i = 0; i < N * K; i++) w[i] = (i * 7919 % 13) < 4 ? (float)((i % 97) - 48) / 64.0f : 0.0f, nnz += w[i] != 0;
    len += (size_t)snprintf(src + len, cap - len,
                            HDR "tensor<fp32, [1, %d]> x) {\n        tensor<fp32, [%d]> nz = const()[val = "
                                "tensor<fp32, [%d]>([",
                            K, nnz, nnz);
    for (int i = 0, j = 0; i < N * K; i++)
        if (w[i] != 0) len += (size_t)snprintf(src + len, cap - len, "%s%.9g", j++ ? ", " : "", (double)w[i]);
    len += (size_t)snprintf(src + len, cap - len,
                            "])];\n        tensor<uint1, [%d, %d]> m = const()[val = tensor<uint1, [%d, %d]>([", N, K, N,
                            K);
    for (int n = 0; n < N; n++) {
        len += (size_t)snprintf(src + len, cap - len, "%s[", n ? ", " : "");
        for (int k = 0; k < K; k++) len += (size_t)snprintf(src + len, cap - len, "%s%d", k ? ", " : "", w[n * K + k] != 0);
        len += (size_t)snprintf(src + len, cap - len, "]");
    }
    snprintf(src + len, cap - len,
             "])];\n        tensor<fp32, [%d, %d]> w = constexpr_sparse_to_dense(nonzero_data = nz, mask = m);\n"
             "        tensor<fp32, [1, %d]> y = linear(x = x, weight = w);\n    } -> (y);\n}\n",
             N, K, N);
    for (int k = 0; k < K; k++) xv[k] = frand();
    for (int n = 0; n < N; n++) {
        ref[n] = 0;
        for (int k = 0; k < K; k++) ref[n] += (double)xv[k] * w[n * K + k];
    }
    compressed_runs(src, xv, ref, N, (size_t)N * K / 8, (size_t)N * K * 2);
    free(src);
}

TEST(int8_weight_stays_int8) { quant_weight_case(8); }
TEST(int4_weight_stays_int4) { quant_weight_case(4); }

/* src fails to compile in modes 1 and 2 with a diagnostic holding each of want[]. */
static void check_refused(const char *src, const char *const *want, int nwant) {
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, -1);
        CHECK(c.art == NULL);
        char *s = diags(&c);
        bool all = true;
        for (int i = 0; i < nwant; i++) all = all && strstr(s, want[i]);
        CHECK(all);
        if (!all) fputs(s, stderr);
        free(s);
        release(&c);
    }
}

TEST(non_zero_read_by_an_op_is_diagnosed) {
    /* non_zero of run-time data is returned as it is, its rows counted at
     * run time; an op reading it is refused, saying why */
    const char *src = HDR "tensor<fp32, [2, 3]> x) {\n"
                          "        tensor<int32, [?, 2]> r = non_zero(x = x);\n"
                          "        tensor<int32, [?, 2]> y = add(x = r, y = int32(1));\n"
                          "    } -> (y);\n}\n";
    const char *want[] = {":4:35: error: non_zero of run-time data: its rows are counted at run time, so the CPU "
                          "backend can only return 'r' as it is; no op may read it (every op's shapes are planned at "
                          "compile time)\n"};
    check_refused(src, want, 1);
    /* returned and also read */
    const char *both = HDR "tensor<fp32, [2, 3]> x) {\n"
                           "        tensor<int32, [?, 2]> r = non_zero(x = x);\n"
                           "        tensor<int32, [?, 2]> y = add(x = r, y = int32(1));\n"
                           "    } -> (r, y);\n}\n";
    check_refused(both, want, 1);
}

/* non_zero of run-time data runs as an output: its rows are the run's count
 * (none, some, all), the coordinates row-major, in both modes. */
TEST(non_zero_of_run_time_data_is_counted) {
    const char *src = HDR "tensor<fp32, [2, 3]> x) {\n"
                          "        tensor<int32, [?, 2]> r = non_zero(x = x);\n"
                          "    } -> (r);\n}\n";
    static const struct {
        float x[6];
        int64_t rows;
        int32_t want[12];
    } cases[] = {{{0, 3, 0, 5, 0, -7}, 3, {0, 1, 1, 0, 1, 2}},
                 {{0, 0, 0, 0, 0, 0}, 0, {0}},
                 {{1, 2, 3, 4, 5, 6}, 6, {0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2}}};
    for (int mode = 0; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        const RtSection *secs;
        int n;
        RtModel *m = NULL;
        char err[256];
        if (c.art) rt_artifact_sections(c.art, &secs, &n);
        CHECK(c.art && rt_model_load(&m, secs, n, &(RtLoadOptions){.nthreads = 2, .flags = RT_LOAD_VERIFY}, err,
                                     sizeof err) == RT_OK);
        if (!m) {
            release(&c);
            continue;
        }
        RtIoInfo io;
        CHECK_EQ_INT(rt_model_output(m, 0, &io), RT_OK);
        CHECK(io.bounded && io.rank == 2 && io.dims[0] == 6 && io.dims[1] == 2);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            int32_t y[12];
            memset(y, 0x55, sizeof y);
            RtTensor in = {.dtype = RT_F32, .rank = 2, .dims = {2, 3}, .data = (void *)cases[k].x, .size = 24};
            RtTensor out = {.dtype = RT_I32, .rank = 2, .dims = {6, 2}, .data = y, .size = sizeof y};
            CHECK_EQ_INT(rt_run(m, &in, 1, &out, 1, 0, NULL), RT_OK);
            CHECK_EQ_INT((int)out.dims[0], (int)cases[k].rows);
            CHECK(out.dims[1] == 2 && !memcmp(y, cases[k].want, sizeof(int32_t) * 2 * (size_t)cases[k].rows));
            /* the caller's rows past the count are untouched */
            CHECK(cases[k].rows == 6 || y[2 * cases[k].rows] == 0x55555555);
        }
        rt_model_free(m);
        release(&c);
    }
}

/* non_zero of a constant has a shape and folds: it runs, exactly, in both
 * modes; one of a constant too large to fold is refused, saying so. */
TEST(non_zero_of_a_constant_folds) {
    const char *src = HDR "tensor<int32, [3, 2]> x) {\n"
                          "        tensor<int32, [3, 2]> r = non_zero(x = tensor<fp32, [2, 3]>([[0, 3, 0], [5, 0, -7]]));\n"
                          "        tensor<int32, [3, 2]> y = add(x = x, y = r);\n"
                          "    } -> (y);\n}\n";
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        float xin[6] = {10, 20, 30, 40, 50, 60}, y[6];
        const float *ins[] = {xin};
        float *outs[] = {y};
        if (c.art) CHECK_EQ_INT(run(&c, ins, outs, 0), RT_OK);
        const float want[6] = {10, 21, 31, 40, 51, 62}; /* x + [[0, 1], [1, 0], [1, 2]] */
        CHECK(c.art && !memcmp(y, want, sizeof want));
        release(&c);
    }
    /* 257 × 256 elements, one of them non-zero: past what the folder takes */
    size_t cap = 300000, at = 0;
    char *big = malloc(cap);
    at += (size_t)snprintf(big, cap, "%s", HDR "tensor<int32, [1, 2]> x) {\n"
                                              "        tensor<int32, [1, 2]> r = non_zero(x = tensor<fp16, [257, 256]>([");
    for (int i = 0; i < 257; i++) {
        big[at++] = '[';
        for (int j = 0; j < 256; j++) at += (size_t)snprintf(big + at, cap - at, j ? ", %d" : "%d", i == 9 && j == 4);
        at += (size_t)snprintf(big + at, cap - at, i < 256 ? "], " : "]");
    }
    snprintf(big + at, cap - at, "]));\n        tensor<int32, [1, 2]> y = add(x = x, y = r);\n    } -> (y);\n}\n");
    const char *want[] = {"error: op non_zero of a constant of more than 65536 elements is not folded, "
                          "and the cpu backend runs it only folded\n"};
    check_refused(big, want, 1);
    free(big);
}

/* What the CPU backend refuses by name: an op by design (with the reason),
 * or an argument value it does not run (naming the argument). */
static const struct {
    const char *src, *line, *msg;
} refusals[] = {
    {HDR "tensor<fp32, [2]> v) {\n"
         "        int32 e0 = const()[val = int32(2)];\n"
         "        list<tensor<fp32, [2]>, ?> ls = make_list(dtype = string(\"fp32\"), elem_shape = (e0), init_length = "
         "int32(3));\n"
         "        list<tensor<fp32, [2]>, ?> l2 = list_write(ls = ls, index = int32(1), value = v);\n"
         "        tensor<fp32, [2]> y = list_read(ls = l2, index = int32(1));\n"
         "    } -> (y);\n}\n",
     "t.mil:5:",
     "error: op make_list is not run by the cpu backend: list 'ls' grows at run time (dynamic_length, or an "
     "init_length known only then) and the CPU backend plans every buffer at compile time; a fixed-length list "
     "(dynamic_length = false, constant init_length and elem_shape) runs"},
    {HDR "tensor<fp32, [2, 1, 3]> x, tensor<fp32, [1, 2]> h) {\n"
         "        tensor<fp32, [6, 3]> wi = const()[val = tensor<fp32, [6, 3]>([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, "
         "0, 0], "
         "[0, 1, 0], [0, 0, 1]])];\n"
         "        tensor<fp32, [6, 2]> wh = const()[val = tensor<fp32, [6, 2]>([[1, 0], [0, 1], [1, 0], [0, 1], [1, "
         "0], [0, "
         "1]])];\n"
         "        tensor<fp32, [1, 1, 2]> y, tensor<fp32, [1, 2]> yh = gru(x = x, initial_h = h, weight_ih = wi, "
         "weight_hh = wh, activation = string(\"hard_sigmoid\"));\n"
         "    } -> (y);\n}\n",
     "t.mil:6:",
     "error: gru: 'activation' hard_sigmoid is not run by the CPU backend (tanh, sigmoid, relu and linear are)"},
    {HDR "tensor<fp32, [1, 2, 3]> x) {\n"
         "        tensor<int32, [2]> sh = const()[val = tensor<int32, [2]>([4, 6])];\n"
         "        tensor<fp32, [1, 4, 6]> y = resize(x = x, shape = sh, resized_dims = uint32(2), interpolation_mode = "
         "string(\"NEAREST_NEIGHBOR\"), sampling_mode = string(\"ALIGN_CORNERS\"));\n"
         "    } -> (y);\n}\n",
     "t.mil:5:",
     "error: resize: NEAREST_NEIGHBOR runs with 'sampling_mode' DEFAULT only on the CPU backend, not ALIGN_CORNERS"},
    {HDR "tensor<fp32, [2, 3]> x) {\n"
         "        tensor<uint1, [2, 3]> m = const()[val = tensor<uint1, [2, 3]>([[1, 0, 1], [0, 1, 0]])];\n"
         "        tensor<uint2, [4]> ix = const()[val = tensor<uint2, [4]>([0, 1, 2, 3])];\n"
         "        tensor<fp32, [1, 1, 4, 1]> lut = const()[val = tensor<fp32, [1, 1, 4, 1]>([[[[1], [2], [3], [4]]]])];\n"
         "        tensor<uint1, [2, 3]> wm, tensor<fp32, [4]> wv = constexpr_lut_to_sparse(indices_mask = m, "
         "indices_nonzero_data = ix, lut = lut);\n"
         "        tensor<fp32, [2, 3]> w = constexpr_sparse_to_dense(nonzero_data = wv, mask = wm);\n"
         "        tensor<fp32, [2, 3]> y = add(x = x, y = w);\n"
         "    } -> (y);\n}\n",
     "t.mil:7:58:", "error: constexpr_lut_to_sparse: 'indices_mask' has 3 ones but 'indices_nonzero_data' has 4 values"},
    {"program(1.0)\n{\n    func main<ios16>(tensor<fp32, [2, 3, 4, 4]> x, tensor<fp32, [1, 1, 5, 1, 1]> r) {\n"
     "        tensor<fp32, [1, 2, 3, 2, 2]> y = crop_resize(x = x, roi = r, target_height = int32(2), target_width = "
     "int32(2));\n"
     "    } -> (y);\n}\n",
     "t.mil:4:", "error: crop_resize: a roi of 5 (an image index, then the box) over a batch of 2 images"},
    {"program(1.0)\n{\n    func main<ios16>(tensor<fp32, [1, 2, 4, 4]> x) {\n"
     "        tensor<uint8, [3, 2, 1, 1]> w = const()[val = tensor<uint8, [3, 2, 1, 1]>([[[[1]], [[2]]], [[[3]], [[4]]], "
     "[[[5]], [[6]]]])];\n"
     "        tensor<fp32, [1, 3, 4, 4]> y = conv_quantized(x = x, weight = w, quantization_type = string(\"lut\"), "
     "quant_scale = fp32(0.5), quant_bias = fp32(0));\n"
     "    } -> (y);\n}\n",
     "t.mil:5:", "error: conv_quantized: 'quantization_type' lut is not run by the CPU backend (linear is: the op "
     "carries no look-up table)"},
    /* coremltools builds these: a value returned twice, and empty tensors */
    {HDR "tensor<fp32, [2]> x) {\n        tensor<fp32, [2]> y = relu(x = x);\n    } -> (y, y);\n}\n", "t.mil:5:14:",
     "error: 'y' is returned twice: the CPU backend names each output after its value, so it returns a value once "
     "(return an identity of it for the second)"},
    {HDR "tensor<fp32, [0, 3]> x) {\n        tensor<fp32, [0, 3]> y = relu(x = x);\n    } -> (y);\n}\n", "t.mil:3:43:",
     "error: input 'x' has no elements (a dimension of 0), and the CPU backend plans no empty buffers"},
    {HDR "tensor<fp32, [1, 3]> x) {\n        tensor<int32, [0, 1]> n = const()[val = tensor<int32, [0, 1]>([])];\n"
         "        tensor<int32, [1, 1]> s = reduce_sum(x = n, axes = tensor<int32, [1]>([0]), keep_dims = "
         "bool(true));\n"
         "        tensor<fp32, [1, 1]> c = cast(x = s, dtype = string(\"fp32\"));\n"
         "        tensor<fp32, [1, 3]> y = add(x = x, y = c);\n    } -> (y);\n}\n",
     "t.mil:5:", "error: 'n' has no elements (a dimension of 0), and the CPU backend plans no empty buffers"},
};

TEST(cpu_refusals_are_diagnosed) {
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
        const char *want[] = {refusals[i].line, refusals[i].msg};
        check_refused(refusals[i].src, want, 2);
    }
}

/* Scatter misuse is refused with a clear error at the op (since the checker
 * follows coremltools' shape rule for updates, it is the checker that says so). */
TEST(scatter_misuse_is_diagnosed) {
    const char *src =
        HDR "tensor<fp32, [4, 5]> d, tensor<fp32, [4, 3]> u) {\n"
            "        tensor<int32, [2]> i = const()[val = tensor<int32, [2]>([1, 2])];\n"
            "        tensor<fp32, [4, 5]> y = scatter(data = d, indices = i, updates = u, axis = int32(1));\n"
            "    } -> (y);\n}\n";
    const char *want[] = {"t.mil:5:", "error: scatter: 'updates' [4, 3] must be [4, 2]"};
    check_refused(src, want, 2);
}

/* src compiles in modes 1 and 2, and its run fails with want. */
static void check_run_fails(const char *src, const float *const *in, float *const *out, int want) {
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), want);
        release(&c);
    }
}

/* An index out of range is RT_EINDEX at run time, its update skipped. */
TEST(scatter_index_out_of_range_is_an_error) {
    const char *src =
        HDR "tensor<fp32, [4]> d, tensor<fp32, [2]> u) {\n"
            "        tensor<int32, [2, 1]> i = const()[val = tensor<int32, [2, 1]>([[1], [4]])];\n"
            "        tensor<fp32, [4]> y = scatter_nd(data = d, indices = i, updates = u, mode = string(\"update\"));\n"
            "    } -> (y);\n}\n";
    float d[4] = {1, 2, 3, 4}, u[2] = {10, 20}, y[4];
    const float *in[2] = {d, u};
    float *out[1] = {y};
    check_run_fails(src, in, out, RT_EINDEX);
}

/* A gather_nd index component outside its dim is RT_EINDEX; it used to be
 * taken modulo the dim, so [0, 3] of a [4, 3] x read row 0's first element. */
TEST(gather_nd_index_out_of_range_is_an_error) {
    const char *src = HDR "tensor<fp32, [4, 3]> x) {\n"
                          "        tensor<int32, [2, 2]> i = const()[val = tensor<int32, [2, 2]>([[1, 1], [0, 3]])];\n"
                          "        tensor<fp32, [2]> y = gather_nd(x = x, indices = i);\n"
                          "    } -> (y);\n}\n";
    float x[12] = {0}, y[2];
    const float *in[1] = {x};
    float *out[1] = {y};
    check_run_fails(src, in, out, RT_EINDEX);
}

/* crop_resize's roi names its image by a float: past the batch, negative or
 * not whole is RT_EINDEX (the crop zeroed), never a read outside x. */
TEST(crop_resize_bad_image_index_is_an_error) {
    const char *src = "program(1.0)\n{\n    func main<ios16>(tensor<fp32, [1, 1, 2, 2]> x, tensor<fp32, [1, 1, 5, 1, 1]> r) {\n"
                      "        tensor<fp32, [1, 1, 1, 2, 2]> y = crop_resize(x = x, roi = r, target_height = int32(2), "
                      "target_width = int32(2));\n"
                      "    } -> (y);\n}\n";
    float x[4] = {1, 2, 3, 4}, y[4];
    const float bad[][5] = {{1, 0, 0, 1, 1}, {-1, 0, 0, 1, 1}, {0.5f, 0, 0, 1, 1}, {NAN, 0, 0, 1, 1}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const float *in[2] = {x, bad[i]};
        float *out[1] = {y};
        check_run_fails(src, in, out, RT_EINDEX);
    }
}

/* A loop that never ends stops at RT_LOOP_MAX_ITERS with RT_ELOOP. */
TEST(endless_while_loop_is_stopped) {
    const char *src = HDR "tensor<fp32, [2]> x) {\n"
                          "        tensor<fp32, [2]> y = while_loop(loop_vars = (x)) {\n"
                          "            (tensor<fp32, [2]> s) {\n"
                          "                bool go = const()[val = bool(true)];\n"
                          "            } -> (go);\n"
                          "            (tensor<fp32, [2]> s) {\n"
                          "                tensor<fp32, [2]> t = add(x = s, y = fp32(1));\n"
                          "            } -> (t);\n"
                          "        };\n"
                          "    } -> (y);\n}\n";
    float x[2] = {0, 1}, y[2];
    const float *in[1] = {x};
    float *out[1] = {y};
    check_run_fails(src, in, out, RT_ELOOP);
}

TEST(missing_weight_file_is_diagnosed) {
    const char *src = HDR "tensor<fp16, [1, 4]> x) {\n"
                          "        tensor<fp16, [4, 4]> w = const()[val = tensor<fp16, [4, 4]>(BLOBFILE(path = "
                          "string(\"@model_path/nowhere/weight.bin\"), offset = uint64(64)))];\n"
                          "        tensor<fp16, [1, 4]> y = linear(x = x, weight = w);\n"
                          "    } -> (y);\n}\n";
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    IrProgram *p = mil_parse(&a, &d, "t.mil", src, strlen(src));
    CHECK(p != NULL);
    RtArtifact *art = NULL;
    BackendOptions o = {.mode = 2, .model_path = "/nonexistent-milc"};
    if (p) CHECK_EQ_INT(backend_compile(p, &o, &art, NULL, &d), -1);
    CHECK(art == NULL && d.errors >= 1);
    char *s = diag_render(&d);
    CHECK(strstr(s, "/nonexistent-milc/nowhere/weight.bin") != NULL);
    free(s);
    diag_free(&d);
    arena_free(&a);
}

/* A sparse weight's mask in a weight file (where the checker cannot count
 * it) with more bits set than there are values: an error naming both, where
 * the bits past the values were once dropped and the weight built short. */
TEST(sparse_mask_past_its_values_is_diagnosed) {
    char dir[] = "/tmp/milc-sparse-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/weight.bin", dir);
    DiagSink d;
    diag_init(&d);
    MilBlobWriter *w = milblob_writer_open(path, &d);
    const uint8_t mask = 0x2d; /* 1, 0, 1, 1, 0, 1: four of six */
    const float vals[3] = {1, 2, 3};
    uint64_t om = w ? milblob_writer_add(w, MILBLOB_UINT1, &mask, 1) : 0;
    uint64_t ov = w ? milblob_writer_add(w, MILBLOB_FP32, vals, sizeof vals) : 0;
    CHECK(om && ov && milblob_writer_finish(w, &d) == 0);
    diag_free(&d);
    char src[1024];
    snprintf(src, sizeof src,
             HDR "tensor<fp32, [2, 3]> x) {\n"
                 "        tensor<uint1, [2, 3]> m = const()[val = tensor<uint1, [2, 3]>(BLOBFILE(path = "
                 "string(\"@model_path/weight.bin\"), offset = uint64(%llu)))];\n"
                 "        tensor<fp32, [3]> nz = const()[val = tensor<fp32, [3]>(BLOBFILE(path = "
                 "string(\"@model_path/weight.bin\"), offset = uint64(%llu)))];\n"
                 "        tensor<fp32, [2, 3]> w = constexpr_sparse_to_dense(nonzero_data = nz, mask = m);\n"
                 "        tensor<fp32, [2, 3]> y = add(x = x, y = w);\n"
                 "    } -> (y);\n}\n",
             (unsigned long long)om, (unsigned long long)ov);
    Arena a;
    arena_init(&a);
    diag_init(&d);
    /* straight to the backend, a library entry of its own: it must not lean on the checker */
    IrProgram *p = mil_parse(&a, &d, "t.mil", src, strlen(src));
    CHECK(p != NULL);
    RtArtifact *art = NULL;
    BackendOptions o = {.mode = 1, .model_path = dir};
    if (p) CHECK_EQ_INT(backend_compile(p, &o, &art, NULL, &d), -1);
    char *msg = diag_render(&d);
    bool named = strstr(msg, "t.mil:6:") && strstr(msg, "constexpr_sparse_to_dense: the mask sets 4 bits for 3 values");
    CHECK(named);
    if (!named) fputs(msg, stderr);
    free(msg);
    diag_free(&d);
    arena_free(&a);
    unlink(path);
    rmdir(dir);
}

/* ---- views: reshape/transpose/slice/concat chains fold into copies ---- */

TEST(view_chain_is_one_copy) {
    const char *src = HDR "tensor<fp32, [1, 8, 1, 6]> x) {\n"
                          "        tensor<int32, [5]> s5 = const()[val = tensor<int32, [5]>([1, 2, 4, 1, 6])];\n"
                          "        tensor<fp32, [1, 2, 4, 1, 6]> a = reshape(x = x, shape = s5);\n"
                          "        tensor<int32, [5]> pm = const()[val = tensor<int32, [5]>([0, 1, 3, 4, 2])];\n"
                          "        tensor<fp32, [1, 2, 1, 6, 4]> b = transpose(x = a, perm = pm);\n"
                          "        tensor<int32, [4]> s4 = const()[val = tensor<int32, [4]>([1, 2, 6, 4])];\n"
                          "        tensor<fp32, [1, 2, 6, 4]> y = reshape(x = b, shape = s4);\n"
                          "    } -> (y);\n}\n";
    float x[48], y[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i;
    const float *in[1] = {x};
    for (int mode = 1; mode <= 2; mode++) {
        Compiled c;
        compile(&c, src, mode);
        CHECK_EQ_INT(c.rc, 0);
        CHECK_EQ_INT(c.st.ops_out, mode == 2 ? 1 : 3);
        CHECK_EQ_INT(c.st.copies, c.st.ops_out);
        float *out[1] = {y};
        if (c.art) CHECK_EQ_INT(run(&c, in, out, 0), RT_OK);
        /* y[0, h, s, d] = x[0, h * 4 + d, 0, s] */
        int bad = 0;
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < 6; s++)
                for (int d = 0; d < 4; d++) bad += y[(h * 6 + s) * 4 + d] != x[(h * 4 + d) * 6 + s];
        CHECK_EQ_INT(bad, 0);
        release(&c);
    }
}

int main(void) {
    RUN(dce_removes_dead_chains);
    RUN(fold_constants);
    RUN(dumps_reparse);
    RUN(verifier_catches_use_before_def);
    RUN(gemm_bias_act_residual_fuse);
    RUN(norm_chains_fuse);
    RUN(attention_fuses);
    RUN(linear_post_views_fallback);
    RUN(conv_3x3_runs);
    RUN(int8_weight_stays_int8);
    RUN(int4_weight_stays_int4);
    RUN(sparse_weight_stays_sparse);
    RUN(non_zero_read_by_an_op_is_diagnosed);
    RUN(non_zero_of_run_time_data_is_counted);
    RUN(non_zero_of_a_constant_folds);
    RUN(scatter_misuse_is_diagnosed);
    RUN(scatter_index_out_of_range_is_an_error);
    RUN(gather_nd_index_out_of_range_is_an_error);
    RUN(crop_resize_bad_image_index_is_an_error);
    RUN(lut2_weight_stays_2bit);
    RUN(sparse_mask_past_its_values_is_diagnosed);
    RUN(cpu_refusals_are_diagnosed);
    RUN(endless_while_loop_is_stopped);
    RUN(missing_weight_file_is_diagnosed);
    RUN(view_chain_is_one_copy);
    TEST_MAIN_END();
}
