/* test_rt_more.c — the convolution, palettized and quantized linear kernels against
 * naive double-precision references, each through a one-op plan on 1 and 2
 * threads (ctest runs it once per kernel variant, and under qemu for NEON),
 * and the checks that refuse their bad parameters.  The elementwise,
 * reduction and pooling ops are checked end to end by tests/backend. */
#include "rt_internal.h"
#include "rt_test_util.h"
#include "test.h"

/* x [2, 3, 5, 4] -> [2, 7, 6, 3], padded 1 above and 2 to the left. */
TEST(pad_nhwc) {
    int64_t xd[4] = {2, 3, 5, 4}, yd[4] = {2, 7, 6, 3};
    float *x = rand_f32(numel_of(4, xd)), y[2 * 7 * 6 * 3];
    double ref[2 * 7 * 6 * 3];
    for (int b = 0; b < 2; b++)
        for (int h = 0; h < 7; h++)
            for (int w = 0; w < 6; w++)
                for (int c = 0; c < 3; c++) {
                    int ih = h - 1, iw = w - 2;
                    ref[((b * 7 + h) * 6 + w) * 3 + c] =
                        ih >= 0 && ih < 5 && iw >= 0 && iw < 4 ? x[((b * 3 + c) * 5 + ih) * 4 + iw] : 0;
                }
    RtConvParams p = {.nsp = 2,
                      .groups = 1,
                      .k = {3, 3, 1},
                      .stride = {1, 1, 1},
                      .dil = {1, 1, 1},
                      .pad_lo = {1, 2, 0},
                      .pad_hi = {1, 0, 0},
                      .out = {5, 4, 1}};
    TArg in[1] = {{RT_F32, 4, {2, 3, 5, 4}, x, 0}};
    for (int nth = 1; nth <= 2; nth++) {
        CHECK_EQ_INT(run_op(RT_OP_PAD_NHWC, &p, sizeof p, in, 1, RT_F32, 4, yd, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, 2 * 7 * 6 * 3) == 0);
    }
    free(x);
}

/* Kernel 3x2, strides (2, 1), dilations (1, 3), 70 output channels (two
 * panels, the second partial), on x already padded channels last; W
 * [Cout, KH·KW·C] (the builder packs it in panels). */
TEST(conv_gemm) {
    enum { B = 2, HP = 7, WP = 9, C = 5, KH = 3, KW = 2, CO = 70, HO = 3, WO = 6 };
    int64_t xd[4] = {B, HP, WP, C}, wd[2] = {CO, KH * KW * C}, yd[4] = {B, CO, HO, WO};
    float *x = rand_f32(B * HP * WP * C), *w = rand_f32(KH * KW * C * CO), *bias = rand_f32(CO);
    float *y = malloc(sizeof(float) * B * CO * HO * WO);
    double *ref = malloc(sizeof(double) * B * CO * HO * WO);
    for (int b = 0; b < B; b++)
        for (int n = 0; n < CO; n++)
            for (int oy = 0; oy < HO; oy++)
                for (int ox = 0; ox < WO; ox++) {
                    double s = bias[n];
                    for (int ky = 0; ky < KH; ky++)
                        for (int kx = 0; kx < KW; kx++)
                            for (int c = 0; c < C; c++)
                                s += (double)x[((b * HP + oy * 2 + ky) * WP + ox + kx * 3) * C + c] *
                                     w[n * KH * KW * C + (ky * KW + kx) * C + c];
                    ref[((b * CO + n) * HO + oy) * WO + ox] = s;
                }
    RtConvParams p = {.nsp = 2,
                      .groups = 1,
                      .has_bias = 1,
                      .k = {KH, KW, 1},
                      .stride = {2, 1, 1},
                      .dil = {1, 3, 1},
                      .out = {HO, WO, 1}};
    TArg in[3] = {{RT_F32, 4, {B, HP, WP, C}, x, 0}, {RT_F32, 2, {wd[0], wd[1]}, w, 1}, {RT_F32, 1, {CO}, bias, 1}};
    (void)xd;
    for (int nth = 1; nth <= 2; nth++) {
        CHECK_EQ_INT(run_op(RT_OP_CONV_GEMM, &p, sizeof p, in, 3, RT_F32, 4, yd, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, B * CO * HO * WO) < 2e-5);
    }
    /* an x one row short of the last output's taps is refused, not read past */
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int xi = rtb_input(b, "x", RT_F32, 4, (const int64_t[]){B, HP - 1, WP, C});
    int wi = rtb_weight(b, "w", RT_F32, 2, wd, w), bi = rtb_weight(b, "b", RT_F32, 1, (const int64_t[]){CO}, bias);
    int yi = rtb_temp(b, RT_F32, 4, yd);
    CHECK(rtb_op(b, RT_OP_CONV_GEMM, (const int[]){xi, wi, bi}, 3, &yi, 1, &p, sizeof p) < 0);
    CHECK(strstr(rtb_error(b), "short") != NULL);
    rtb_free(b);
    free(x), free(w), free(bias), free(y), free(ref);
}

/* Transposed, 2 groups, stride 2, dilation 2, a pad of 1: the direct kernel. */
TEST(conv_transpose_direct) {
    enum { B = 1, C = 4, H = 3, W = 4, OG = 3, G = 2, K = 2, HO = 5, WO = 7 };
    int64_t yd[4] = {B, OG * G, HO, WO};
    float *x = rand_f32(B * C * H * W), *w = rand_f32(C * OG * K * K), y[B * OG * G * HO * WO];
    double ref[B * OG * G * HO * WO] = {0};
    for (int ic = 0; ic < C; ic++)
        for (int o = 0; o < OG; o++)
            for (int i = 0; i < H; i++)
                for (int j = 0; j < W; j++)
                    for (int ky = 0; ky < K; ky++)
                        for (int kx = 0; kx < K; kx++) {
                            int oy = i * 2 + ky * 2 - 1, ox = j * 2 + kx * 2 - 1, oc = ic / (C / G) * OG + o;
                            if (oy >= 0 && oy < HO && ox >= 0 && ox < WO)
                                ref[(oc * HO + oy) * WO + ox] +=
                                    (double)x[(ic * H + i) * W + j] * w[((ic * OG + o) * K + ky) * K + kx];
                        }
    RtConvParams p = {.nsp = 2,
                      .groups = G,
                      .transpose = 1,
                      .k = {K, K, 1},
                      .stride = {2, 2, 1},
                      .dil = {2, 2, 1},
                      .pad_lo = {1, 1, 0},
                      .pad_hi = {1, 1, 0},
                      .out = {HO, WO, 1}};
    TArg in[2] = {{RT_F32, 4, {B, C, H, W}, x, 0}, {RT_F32, 4, {C, OG, K, K}, w, 1}};
    for (int nth = 1; nth <= 2; nth++) {
        CHECK_EQ_INT(run_op(RT_OP_CONV, &p, sizeof p, in, 2, RT_F32, 4, yd, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, B * OG * G * HO * WO) < 2e-5);
    }
    free(x), free(w);
}

/* bits-bit indices, BN x BK palettes, K = 256 (whole 128-chunks: the AVX-512
 * path) and K = 40 (the one-at-a-time path), M = 1 and 5 rows of x; one
 * block of columns at M = 1 is the decode path (two rows at a time: N odd
 * leaves one alone; a palette per row or per group of rows). */
static void lut_case_f(int64_t m, int64_t k, int bits, int64_t N, int64_t BN, int64_t BK, int f16) {
    int64_t pal = INT64_C(1) << bits, rowb = k * bits / 8;
    float *x = rand_f32(m * k), *lut = rand_f32(BN * BK * pal), *bias = rand_f32(N), *y = malloc(sizeof(float) * 5 * 8);
    /* f16: every palette entry an fp16 value (as Core ML's are) but the
     * last palette's when f16 is 2 (the AVX2 decode reads fp16 palettes by
     * byte lookups, and falls back to fp32 lookups for a range with one that
     * is not) */
    for (int64_t i = 0; f16 && i < BN * BK * pal; i++)
        if (f16 == 1 || i < (BN * BK - 1) * pal) lut[i] = half_to_float(float_to_half(lut[i]));
    uint8_t *ix = malloc((size_t)(N * rowb));
    for (int64_t i = 0; i < N * rowb; i++) ix[i] = (uint8_t)rng_u32();
    double ref[5 * 8];
    for (int64_t r = 0; r < m; r++)
        for (int64_t n = 0; n < N; n++) {
            double s = bias[n];
            for (int64_t j = 0; j < k; j++) {
                unsigned id = 0; /* bit by bit, low bits first: no shortcut shared with the kernel */
                for (int b = 0; b < bits; b++) {
                    int64_t bit = j * bits + b;
                    id |= (unsigned)(ix[n * rowb + bit / 8] >> (bit % 8) & 1) << b;
                }
                s += (double)x[r * k + j] * lut[((n / (N / BN)) * BK + j / (k / BK)) * pal + id];
            }
            ref[r * N + n] = s;
        }
    RtLutParams p = {.bits = bits, .bn = (int32_t)BN, .bk = (int32_t)BK, .has_bias = 1};
    TArg in[4] = {{RT_F32, 2, {m, k}, x, 0},
                  {RT_U8, 2, {N, rowb}, ix, 1},
                  {RT_F32, 1, {BN * BK * pal}, lut, 1},
                  {RT_F32, 1, {N}, bias, 1}};
    for (int nth = 1; nth <= 2; nth++) {
        CHECK_EQ_INT(run_op(RT_OP_LUT_GEMM, &p, sizeof p, in, 4, RT_F32, 2, (const int64_t[]){m, N}, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, m * N) < 2e-5);
    }
    free(x), free(lut), free(bias), free(ix), free(y);
}
static void lut_case_n(int64_t m, int64_t k, int bits, int64_t N, int64_t BN, int64_t BK) {
    lut_case_f(m, k, bits, N, BN, BK, 0);
}
static void lut_case(int64_t m, int64_t k, int bits) { lut_case_n(m, k, bits, 6, 2, 2); }

TEST(lut_gemm) {
    lut_case(1, 256, 4);
    lut_case(5, 256, 4);
    lut_case(5, 40, 4);
    lut_case(1, 24, 8);
    lut_case_n(1, 384, 4, 7, 7, 1); /* decode: a palette per row, N odd */
    lut_case_n(1, 256, 4, 8, 2, 1); /* decode: 4 rows per palette */
    lut_case_n(3, 384, 4, 7, 1, 1);
    lut_case_n(2, 256, 4, 6, 3, 4); /* blocks of 64: one AVX2 chunk each */
    lut_case_f(1, 384, 4, 7, 7, 1, 1); /* decode, fp16 palettes: one per row, N odd */
    lut_case_f(1, 192, 4, 8, 2, 1, 1); /* decode, fp16 palettes of 4 rows */
    lut_case_f(1, 128, 4, 5, 1, 1, 1); /* decode, one fp16 palette */
    lut_case_f(1, 256, 4, 6, 3, 1, 2); /* decode, the last palette fp32: a thread falls back */
    /* 1- and 2-bit: whole AVX-512 chunks (512 and 256 indices), AVX2 chunks
     * only (256, 128), and a tail; 3- and 6-bit straddle bytes */
    lut_case_n(1, 1024, 1, 5, 5, 1);
    lut_case_n(3, 512, 1, 6, 2, 2);
    lut_case_n(5, 256, 2, 6, 1, 1);
    lut_case_n(1, 512, 2, 7, 7, 2);
    lut_case(2, 128, 2);
    lut_case(1, 48, 2);
    lut_case(3, 64, 3);
    lut_case(2, 32, 6);
}

/* RT_OP_NON_ZERO into a rows temp: the coordinates of x's nonzero elements
 * in row-major order, their count the output's rows; x an input of each
 * activation dtype or a weight, 1 and 2 threads. */
static void non_zero_case(RtDType dt, int rank, const int64_t *dims, int weight) {
    int64_t n = numel_of(rank, dims);
    float *xf = rand_f32(n);
    int32_t *xi = malloc(sizeof(int32_t) * (size_t)n), *y = malloc(sizeof(int32_t) * (size_t)(n * rank)),
            *want = malloc(sizeof(int32_t) * (size_t)(n * rank));
    uint8_t *xb = malloc((size_t)n);
    int64_t rows = 0;
    for (int64_t i = 0; i < n; i++) {
        bool nz = xf[i] > 0.2f; /* about 40%: runs of both */
        xf[i] = nz ? xf[i] : 0.0f, xi[i] = nz ? (int32_t)(xf[i] * 100) + 1 : 0, xb[i] = nz;
        if (nz)
            for (int d = rank - 1, r = (int)i; d >= 0; d--) want[rows * rank + d] = r % (int)dims[d], r /= (int)dims[d];
        rows += nz;
    }
    const void *x = dt == RT_F32 ? (const void *)xf : dt == RT_I32 ? (const void *)xi : (const void *)xb;
    for (int nth = 1; nth <= 2; nth++) {
        RtPlanBuilder *b = rtb_new(RT_MODE_BOTH);
        int xin = weight ? rtb_weight(b, "x", dt, rank, dims, x) : rtb_input(b, "x", dt, rank, dims);
        int o = rtb_temp_rows(b, 2, (const int64_t[]){n, rank});
        for (int prog = 0; prog < 2; prog++) {
            rtb_program(b, (RtProgram)prog);
            rtb_op(b, RT_OP_NON_ZERO, &xin, 1, &o, 1, NULL, 0);
        }
        rtb_output(b, "y", o, RT_I32);
        RtArtifact *a = NULL;
        char err[256];
        CHECK_EQ_INT(rtb_finish(b, NULL, 0, &a, err, sizeof err), RT_OK);
        rtb_free(b);
        const RtSection *secs;
        int ns;
        rt_artifact_sections(a, &secs, &ns);
        RtModel *m = NULL;
        CHECK_EQ_INT(rt_model_load(&m, secs, ns, &(RtLoadOptions){.nthreads = nth}, err, sizeof err), RT_OK);
        for (int flags = 0; m && flags <= RT_RUN_NONBONDED; flags += RT_RUN_NONBONDED) {
            RtTensor in = {.dtype = dt, .rank = rank, .data = (void *)x, .size = (size_t)n * rt_dtype_size(dt)};
            memcpy(in.dims, dims, sizeof(int64_t) * (size_t)rank);
            RtTensor out = {.dtype = RT_I32, .rank = 2, .dims = {n, rank}, .data = y, .size = sizeof(int32_t) * (size_t)(n * rank)};
            CHECK_EQ_INT(rt_run(m, &in, weight ? 0 : 1, &out, 1, flags, NULL), RT_OK);
            CHECK(out.dims[0] == rows && out.dims[1] == rank);
            CHECK(!memcmp(y, want, sizeof(int32_t) * (size_t)(rows * rank)));
            int64_t bd[RT_MAX_RANK];
            const void *data;
            CHECK(rt_model_buffer(m, o, &data, NULL, NULL, bd) == RT_OK && bd[0] == rows);
        }
        rt_model_free(m);
        rt_artifact_free(a);
    }
    free(xf), free(xi), free(xb), free(y), free(want);
}

TEST(non_zero) {
    non_zero_case(RT_F32, 2, (const int64_t[]){7, 9}, 0);
    non_zero_case(RT_I32, 1, (const int64_t[]){300}, 0);
    non_zero_case(RT_BOOL, 4, (const int64_t[]){2, 3, 4, 5}, 0);
    non_zero_case(RT_F32, 3, (const int64_t[]){4, 1, 6}, 1);
}

/* A rows temp is written only by NON_ZERO and read by no op; NON_ZERO writes
 * only one, of x's shape. */
TEST(non_zero_refuses_misuse) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){2, 3});
    int r = rtb_temp_rows(b, 2, (const int64_t[]){6, 2}), t = rtb_temp(b, RT_I32, 2, (const int64_t[]){6, 2});
    CHECK(rtb_op(b, RT_OP_NON_ZERO, &x, 1, &t, 1, NULL, 0) < 0);
    CHECK(strstr(rtb_error(b), "non_zero: y must be int32 [6, 2] with its rows counted at run time") != NULL);
    rtb_free(b);
    b = rtb_new(RT_MODE_BONDED);
    x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){2, 3});
    r = rtb_temp_rows(b, 2, (const int64_t[]){5, 2});
    CHECK(rtb_op(b, RT_OP_NON_ZERO, &x, 1, &r, 1, NULL, 0) < 0); /* 5 rows bound 6 elements */
    rtb_free(b);
    b = rtb_new(RT_MODE_BONDED);
    int xi = rtb_input(b, "x", RT_I32, 2, (const int64_t[]){6, 2});
    r = rtb_temp_rows(b, 2, (const int64_t[]){6, 2});
    RtUnaryParams up = {0};
    CHECK(rtb_op(b, RT_OP_UNARY, &xi, 1, &r, 1, &up, sizeof up) < 0);
    CHECK(strstr(rtb_error(b), "output 0 has its rows counted at run time (only non_zero writes one)") != NULL);
    rtb_free(b);
    b = rtb_new(RT_MODE_BONDED);
    x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){3, 2});
    r = rtb_temp_rows(b, 2, (const int64_t[]){6, 2});
    rtb_op(b, RT_OP_NON_ZERO, &x, 1, &r, 1, NULL, 0);
    t = rtb_temp(b, RT_I32, 2, (const int64_t[]){6, 2});
    RtCastParams cp = {0};
    CHECK(rtb_op(b, RT_OP_CAST, &r, 1, &t, 1, &cp, sizeof cp) < 0);
    CHECK(strstr(rtb_error(b), "input 0 has its rows counted at run time (only an output reads it)") != NULL);
    rtb_free(b);
}

TEST(lut_gemm_refuses_bad_shapes) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    uint8_t ix[6 * 20] = {0};
    float lut[16] = {0};
    int x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){1, 40});
    int iw = rtb_weight(b, "ix", RT_U8, 2, (const int64_t[]){6, 19}, ix); /* 40 4-bit indices are 20 bytes */
    int lw = rtb_weight(b, "lut", RT_F32, 1, (const int64_t[]){16}, lut);
    int y = rtb_temp(b, RT_F32, 2, (const int64_t[]){1, 6});
    RtLutParams p = {.bits = 4, .bn = 1, .bk = 1};
    CHECK(rtb_op(b, RT_OP_LUT_GEMM, (const int[]){x, iw, lw}, 3, &y, 1, &p, sizeof p) < 0);
    CHECK(strstr(rtb_error(b), "indices must be [6, 20]") != NULL);
    rtb_free(b);
    b = rtb_new(RT_MODE_BONDED); /* packed indices are a weight type, never an activation */
    CHECK(rtb_temp(b, RT_U8, 1, (const int64_t[]){4}) < 0);
    rtb_free(b);
}

/* 8-bit quantized weights [N, K] with BN x BK blocks of scale and offset,
 * int8 or uint8 bytes: K = 40 (vector loop and a tail in every variant),
 * 64 and 256; M = 1 (decode) and 5 (more rows than one pass of QMB). */
/* q4: nibbles, two a byte, low first; sgn: two's complement values */
static void qgemm_case(int64_t m, int64_t k, int64_t N, int64_t BN, int64_t BK, int sgn, int q4) {
    float *x = rand_f32(m * k), *sc = rand_f32(BN * BK), *of = rand_f32(BN * BK), *bias = rand_f32(N);
    float *y = malloc(sizeof(float) * (size_t)(m * N));
    int64_t row = q4 ? k / 2 : k;
    uint8_t *q = malloc((size_t)(N * row));
    double *ref = malloc(sizeof(double) * (size_t)(m * N));
    for (int64_t i = 0; i < N * row; i++) q[i] = (uint8_t)rng_u32();
    for (int64_t i = 0; i < BN * BK; i++) of[i] = (float)(int)(of[i] * 8); /* zero points are integers */
    for (int64_t r = 0; r < m; r++)
        for (int64_t n = 0; n < N; n++) {
            double s = bias[n];
            for (int64_t j = 0; j < k; j++) {
                int64_t blk = (n / (N / BN)) * BK + j / (k / BK);
                int v;
                if (q4) {
                    v = q[n * row + j / 2] >> (j % 2 ? 4 : 0) & 15;
                    if (sgn && v >= 8) v -= 16;
                } else {
                    v = sgn ? (int8_t)q[n * row + j] : q[n * row + j];
                }
                s += (double)x[r * k + j] * ((v - of[blk]) * sc[blk]);
            }
            ref[r * N + n] = s;
        }
    RtQGemmParams p = {.flags = (sgn ? RT_QG_SIGNED : 0) | (q4 ? RT_QG_INT4 : 0),
                       .bn = (int32_t)BN,
                       .bk = (int32_t)BK,
                       .has_bias = 1};
    TArg in[5] = {{RT_F32, 2, {m, k}, x, 0},
                  {RT_U8, 2, {N, row}, q, 1},
                  {RT_F32, 1, {BN * BK}, sc, 1},
                  {RT_F32, 1, {BN * BK}, of, 1},
                  {RT_F32, 1, {N}, bias, 1}};
    for (int nth = 1; nth <= 2; nth++) {
        CHECK_EQ_INT(run_op(RT_OP_QGEMM, &p, sizeof p, in, 5, RT_F32, 2, (const int64_t[]){m, N}, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, m * N) < 2e-5);
    }
    free(x), free(sc), free(of), free(bias), free(y), free(q), free(ref);
}

TEST(qgemm) {
    qgemm_case(1, 40, 6, 6, 1, 1, 0);  /* decode, per output channel */
    qgemm_case(1, 256, 7, 1, 1, 0, 0); /* per tensor, uint8 */
    qgemm_case(5, 64, 6, 3, 2, 1, 0);  /* blocks along both dims */
    qgemm_case(5, 40, 8, 8, 1, 0, 0);
    qgemm_case(9, 256, 5, 5, 4, 1, 0);
}

/* 4-bit: every vector width's loads (K = 256: 16-lane blocks and the
 * 4-accumulator decode loop), a tail past the last vector (K = 44), blocks
 * of 22 and 10 nibbles that start mid-vector but on a byte. */
TEST(qgemm_int4) {
    qgemm_case(1, 256, 6, 6, 1, 1, 1);
    qgemm_case(1, 256, 7, 1, 1, 0, 1);
    qgemm_case(1, 44, 6, 6, 2, 1, 1);
    qgemm_case(5, 64, 6, 3, 2, 1, 1);
    qgemm_case(5, 40, 8, 8, 4, 0, 1);
    qgemm_case(9, 512, 5, 5, 8, 1, 1);
}

/* One qgemm op over q [6, 40], 3 scales and offsets, bn x 1 blocks: the builder's message. */
static const char *qgemm_refusal(RtPlanBuilder *b, int bn) {
    static uint8_t q[6 * 40];
    static float sc[3], of[3];
    int x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){1, 40});
    int qw = rtb_weight(b, "q", RT_U8, 2, (const int64_t[]){6, 40}, q);
    int sw = rtb_weight(b, "sc", RT_F32, 1, (const int64_t[]){3}, sc);
    int ow = rtb_weight(b, "of", RT_F32, 1, (const int64_t[]){3}, of);
    int y = rtb_temp(b, RT_F32, 2, (const int64_t[]){1, 6});
    RtQGemmParams p = {.flags = RT_QG_SIGNED, .bn = bn, .bk = 1};
    return rtb_op(b, RT_OP_QGEMM, (const int[]){x, qw, sw, ow}, 4, &y, 1, &p, sizeof p) < 0 ? rtb_error(b) : "";
}

TEST(qgemm_refuses_bad_shapes) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    CHECK(strstr(qgemm_refusal(b, 4), "qgemm: 4 x 1 blocks do not divide [6, 40]") != NULL);
    rtb_free(b);
    b = rtb_new(RT_MODE_BONDED);
    CHECK(strstr(qgemm_refusal(b, 6), "qgemm: scale and offset must hold 6 fp32 each") != NULL);
    rtb_free(b);
}

/* One 4-bit qgemm op, x [1, k] and q [6, qk], 1 x bk blocks: the builder's message. */
static const char *qgemm4_refusal(RtPlanBuilder *b, int64_t k, int64_t qk, int bk) {
    static uint8_t q[6 * 40];
    static float so[8];
    int x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){1, k});
    int qw = rtb_weight(b, "q", RT_U8, 2, (const int64_t[]){6, qk}, q);
    int sw = rtb_weight(b, "sc", RT_F32, 1, (const int64_t[]){bk}, so);
    int ow = rtb_weight(b, "of", RT_F32, 1, (const int64_t[]){bk}, so);
    int y = rtb_temp(b, RT_F32, 2, (const int64_t[]){1, 6});
    RtQGemmParams p = {.flags = RT_QG_INT4, .bn = 1, .bk = bk};
    return rtb_op(b, RT_OP_QGEMM, (const int[]){x, qw, sw, ow}, 4, &y, 1, &p, sizeof p) < 0 ? rtb_error(b) : "";
}

TEST(qgemm_int4_refuses_bad_shapes) {
    static const struct {
        int64_t k, qk;
        int bk;
        const char *msg;
    } c[] = {
        {40, 40, 1, "qgemm: q must be [6, 20]"}, /* a byte per value given for nibbles */
        {39, 20, 1, "qgemm: 4-bit weights need an even K, not 39"},
        {36, 18, 4, "qgemm: 4-bit blocks of 9 along K do not start on a byte"},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
        const char *m = qgemm4_refusal(b, c[i].k, c[i].qk, c[i].bk);
        if (!strstr(m, c[i].msg)) fprintf(stderr, "case %zu: %s\n", i, m);
        CHECK(strstr(m, c[i].msg) != NULL);
        rtb_free(b);
    }
}

/* A sparse weight [N, k] of about `density` nonzeros, values fp16 (f16) or
 * fp32, against the dense product; start: the row starts as built, or
 * damaged (every row's start out of range) to check nothing reads out of
 * bounds and the rows count as zero. */
static void spgemm_case(int64_t m, int64_t k, int64_t N, double density, int f16, int damaged) {
    int64_t rb = (k + 7) / 8, nnz = 0;
    float *x = rand_f32(m * k), *bias = rand_f32(N), *y = malloc(sizeof(float) * (size_t)(m * N));
    uint8_t *mask = calloc((size_t)(N * rb), 1);
    float *dense = calloc((size_t)(N * k), sizeof(float)), *v32 = calloc((size_t)(N * k + 16), sizeof(float));
    uint16_t *v16 = calloc((size_t)(N * k + 16), sizeof(uint16_t));
    int32_t *start = malloc(sizeof(int32_t) * (size_t)(N + 1));
    double *ref = malloc(sizeof(double) * (size_t)(m * N));
    for (int64_t n = 0; n < N; n++) {
        start[n] = damaged ? (int32_t)(n % 2 ? -5 : N * k + 100) : (int32_t)nnz;
        for (int64_t j = 0; j < k; j++)
            if ((rng_u32() % 1000) < density * 1000) {
                float w = half_to_float(float_to_half(rng_f() - 0.5f)); /* exact in fp16 too */
                mask[n * rb + j / 8] |= (uint8_t)(1u << (j % 8));
                dense[n * k + j] = w, v32[nnz] = w, v16[nnz] = float_to_half(w), nnz++;
            }
    }
    start[N] = damaged ? 0 : (int32_t)nnz;
    for (int64_t r = 0; r < m; r++)
        for (int64_t n = 0; n < N; n++) {
            double acc = bias[n];
            for (int64_t j = 0; j < k && !damaged; j++) acc += (double)x[r * k + j] * dense[n * k + j];
            ref[r * N + n] = acc;
        }
    RtSpGemmParams p = {.has_bias = 1};
    TArg in[5] = {{RT_F32, 2, {m, k}, x, 0},
                  {RT_U8, 2, {N, rb}, mask, 1},
                  {f16 ? RT_F16 : RT_F32, 1, {nnz + 16}, f16 ? (const void *)v16 : v32, 1},
                  {RT_I32, 1, {N + 1}, start, 1},
                  {RT_F32, 1, {N}, bias, 1}};
    for (int nth = 1; nth <= 2; nth++) {
        CHECK_EQ_INT(run_op(RT_OP_SPGEMM, &p, sizeof p, in, 5, RT_F32, 2, (const int64_t[]){m, N}, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, m * N) < 2e-5);
    }
    free(x), free(bias), free(y), free(mask), free(dense), free(v32), free(v16), free(start), free(ref);
}

TEST(spgemm) {
    spgemm_case(1, 256, 7, 0.5, 1, 0);   /* decode, fp16 values */
    spgemm_case(1, 256, 7, 0.5, 0, 0);   /* fp32 values */
    spgemm_case(5, 44, 6, 0.3, 1, 0);    /* rows of x in one pass; K past the last 16 bits */
    spgemm_case(9, 100, 5, 0.9, 0, 0);   /* dense enough that rows run off the padding's end */
    spgemm_case(3, 64, 4, 0.0, 1, 0);    /* no nonzero at all: only the padding */
    spgemm_case(2, 72, 6, 0.5, 1, 1);    /* starts out of range: zeros, no read outside */
}

TEST(spgemm_refuses_bad_shapes) {
    static uint8_t mask[6 * 5];
    static float vals[32];
    static int32_t start[7];
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){1, 40});
    int mw = rtb_weight(b, "m", RT_U8, 2, (const int64_t[]){6, 4}, mask);
    int vw = rtb_weight(b, "v", RT_F32, 1, (const int64_t[]){32}, vals);
    int sw = rtb_weight(b, "s", RT_I32, 1, (const int64_t[]){7}, start);
    int y = rtb_temp(b, RT_F32, 2, (const int64_t[]){1, 6});
    RtSpGemmParams p = {0};
    CHECK(rtb_op(b, RT_OP_SPGEMM, (const int[]){x, mw, vw, sw}, 4, &y, 1, &p, sizeof p) < 0);
    CHECK(strstr(rtb_error(b), "spgemm: mask must be a u8 weight [6, 5]") != NULL);
    rtb_free(b);
}

/* A channels GEMM on x packed by tiles of positions: pack_tiles' layout
 * (zeros past S), then the packed GEMM against the double product, bias,
 * residual and a ReLU included.  K = 300 takes the K-blocked path; N = 70 a
 * partial panel; S = 13 and 128 a last tile of 1 and of 2 positions. */
static void packed_gemm_case(int64_t B, int64_t K, int64_t S, int64_t N) {
    int64_t T = (S + RT_PACK_TILE - 1) / RT_PACK_TILE;
    float *x = rand_f32(B * K * S), *bias = rand_f32(N), *res = rand_f32(B * N * S);
    float *pk = malloc(sizeof(float) * (size_t)(B * T * K * RT_PACK_TILE)), *y = malloc(sizeof(float) * (size_t)(B * N * S));
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)(N * K));
    double *ref = malloc(sizeof(double) * (size_t)(B * N * S));
    for (int64_t i = 0; i < N * K; i++) w[i] = float_to_half(rng_f() - 0.5f);
    for (int64_t b = 0; b < B; b++)
        for (int64_t n = 0; n < N; n++)
            for (int64_t pos = 0; pos < S; pos++) {
                double acc = bias[n];
                for (int64_t k = 0; k < K; k++) acc += (double)half_to_float(w[n * K + k]) * x[(b * K + k) * S + pos];
                ref[(b * N + n) * S + pos] = (acc > 0 ? acc : 0) + res[(b * N + n) * S + pos];
            }
    for (int nth = 1; nth <= 2; nth++) {
        TArg pin[1] = {{RT_F32, 3, {B, K, S}, x, 0}};
        CHECK_EQ_INT(run_op(RT_OP_PACK_TILES, NULL, 0, pin, 1, RT_F32, 4, (const int64_t[]){B, T, K, RT_PACK_TILE}, pk, nth),
                     RT_OK);
        int bad = 0;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < T; t++)
                for (int64_t k = 0; k < K; k++)
                    for (int r = 0; r < RT_PACK_TILE; r++) {
                        int64_t pos = t * RT_PACK_TILE + r;
                        float want = pos < S ? x[(b * K + k) * S + pos] : 0.0f;
                        bad += pk[((b * T + t) * K + k) * RT_PACK_TILE + r] != want;
                    }
        CHECK_EQ_INT(bad, 0);
        RtGemmParams p = {.layout = RT_GEMM_PACKED, .act = RT_ACT_RELU, .has_bias = 1, .has_residual = 1};
        TArg gin[4] = {{RT_F32, 4, {B, T, K, RT_PACK_TILE}, pk, 0},
                       {RT_F16, 2, {N, K}, w, 1},
                       {RT_F32, 1, {N}, bias, 1},
                       {RT_F32, 3, {B, N, S}, res, 0}};
        CHECK_EQ_INT(run_op(RT_OP_GEMM, &p, sizeof p, gin, 4, RT_F32, 3, (const int64_t[]){B, N, S}, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, B * N * S) < 2e-5);
    }
    free(x), free(bias), free(res), free(pk), free(y), free(w), free(ref);
}

TEST(packed_gemm) {
    packed_gemm_case(2, 40, 13, 70);
    packed_gemm_case(1, 300, 128, 128);
    packed_gemm_case(1, 64, 7, 64);
}

int main(void) {
    RUN(pad_nhwc);
    RUN(conv_gemm);
    RUN(conv_transpose_direct);
    RUN(lut_gemm);
    RUN(lut_gemm_refuses_bad_shapes);
    RUN(non_zero);
    RUN(non_zero_refuses_misuse);
    RUN(qgemm);
    RUN(qgemm_refuses_bad_shapes);
    RUN(qgemm_int4);
    RUN(qgemm_int4_refuses_bad_shapes);
    RUN(spgemm);
    RUN(spgemm_refuses_bad_shapes);
    RUN(packed_gemm);
    TEST_MAIN_END();
}
