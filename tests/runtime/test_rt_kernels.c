/* test_rt_kernels.c — every kernel against a naive double-precision
 * reference written here, on random shapes (odd sizes, broadcasting), with 1
 * and 2 threads, each through a one-op plan built, loaded and run. */
#include "rt_internal.h"
#include "rt_test_util.h"
#include "test.h"

#define TOL 2e-5

static double act_ref(double x, int act) {
    switch (act) {
    case RT_ACT_RELU: return x > 0 ? x : 0;
    case RT_ACT_GELU_EXACT: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case RT_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case RT_ACT_GELU_SIGMOID: return x / (1 + exp(-1.702 * x));
    case RT_ACT_SILU: return x / (1 + exp(-x));
    }
    return x;
}

/* GEMM, both layouts, fp32 weights (library) and fp16 weights (panel kernel
 * for M <= 16), bias, every activation, residual.  The last 8 cases have a
 * long K and many rows: the K-blocked path, with a K tail that is not a
 * multiple of the block and more rows than one row block. */
/* One GEMM against a double reference: layout, fp16 weights, activation and
 * thread count from it's bits, the shape given. */
static void gemm_case(int it, int64_t m, int64_t k, int64_t n) {
    {
        int layout = it & 1, f16 = (it >> 1) & 1, act = (it / 4) % 6, nth = 1 + (it % 3 == 0);
        int64_t bt = layout ? rng_int(1, 2) : 1;
        float *x = rand_f32(bt * m * k), *w = rand_f32(n * k), *bias = rand_f32(n), *res = rand_f32(bt * m * n);
        uint16_t *wh = malloc((size_t)(n * k) * 2);
        for (int64_t i = 0; i < n * k; i++) {
            wh[i] = float_to_half(w[i]);
            if (f16) w[i] = half_to_float(wh[i]); /* reference sees the stored weights */
        }
        RtGemmParams p = {.layout = layout, .act = act, .has_bias = 1, .has_residual = it % 5 != 0};
        TArg in[4];
        int nin = 0;
        if (layout == RT_GEMM_ROWS)
            in[nin++] = (TArg){RT_F32, 3, {1, m, k}, x, 0};
        else
            in[nin++] = (TArg){RT_F32, 4, {bt, k, 1, m}, x, 0};
        in[nin++] = (TArg){f16 ? RT_F16 : RT_F32, 2, {n, k}, f16 ? (void *)wh : (void *)w, 1};
        in[nin++] = (TArg){RT_F32, 1, {n}, bias, 1};
        int64_t od[4];
        int orank;
        if (layout == RT_GEMM_ROWS)
            orank = 3, od[0] = 1, od[1] = m, od[2] = n;
        else
            orank = 4, od[0] = bt, od[1] = n, od[2] = 1, od[3] = m;
        if (p.has_residual) in[nin++] = (TArg){RT_F32, orank, {od[0], od[1], od[2], od[3]}, res, 0};
        float *y = malloc((size_t)(bt * m * n) * 4);
        double *ref = malloc((size_t)(bt * m * n) * 8);
        for (int64_t b = 0; b < bt; b++)
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) {
                    double s = bias[j];
                    for (int64_t kk = 0; kk < k; kk++)
                        s += (double)w[j * k + kk] * (layout ? x[(b * k + kk) * m + i] : x[i * k + kk]);
                    s = act_ref(s, act);
                    int64_t oi = layout ? (b * n + j) * m + i : i * n + j;
                    ref[oi] = s + (p.has_residual ? res[oi] : 0);
                }
        CHECK_EQ_INT(run_op(RT_OP_GEMM, &p, sizeof p, in, nin, RT_F32, orank, od, y, nth), RT_OK);
        double e = rel_max_err(y, ref, bt * m * n);
        if (e > 1e-4)
            fprintf(stderr, "gemm it %d layout %d f16 %d act %d m %ld k %ld n %ld: err %g\n", it, layout, f16, act,
                    (long)m, (long)k, (long)n, e);
        CHECK(e <= 1e-4);
        free(x), free(w), free(wh), free(bias), free(res), free(y), free(ref);
    }
}

TEST(gemm) {
    for (int it = 0; it < 32; it++) {
        int f16 = (it >> 1) & 1;
        int64_t m = f16 && (it & 4) ? rng_int(1, 16) : rng_int(1, 70), k = rng_int(1, 100), n = rng_int(1, 130);
        if (it >= 24) m = rng_int(7, 260), k = rng_int(193, 700);
        gemm_case(it, m, k, n);
    }
}

/* The order for an A that crowds L2 (a group of panels inside each K-block,
 * partial sums in the op's scratch), forced by a small L2: K-blocked shapes,
 * several panels per part, tails of rows, columns and K. */
TEST(gemm_a_crowds_l2) {
    RtBlocking saved = rt_block;
    rt_block.l2 = 8192;
    for (int it = 0; it < 12; it++) gemm_case(it, rng_int(7, 130), rng_int(193, 600), rng_int(65, 400));
    rt_block.l2 = saved.l2;
}

/* The next K-block asked for ahead a slice per tile, spread over each
 * tile's K loop with the rest after it: K-blocks of one or two tiles (more
 * lines than the loop has slots) and of many, with K tails; and the slices
 * themselves: every line of the block covered, few twice. */
TEST(gemm_ahead) {
    static const int64_t shapes[][3] = {{8, 450, 130}, {12, 700, 64}, {200, 300, 70}, {130, 257, 200}};
    for (int it = 0; it < 16; it++) gemm_case(it, shapes[it % 4][0], shapes[it % 4][1], shapes[it % 4][2]);
    static const size_t lens[] = {64 * 64 * 2, 128 * 64 * 4, 96 * 64 * 4, 100};
    for (size_t li = 0; li < sizeof lens / sizeof *lens; li++)
        for (size_t ntile = 1; ntile <= 40; ntile++) {
            size_t nlines = (lens[li] + 63) / 64, total = 0;
            unsigned char seen[512] = {0};
            for (size_t t = 0; t < ntile; t++) {
                size_t off;
                int n = rt_ahead_slice(lens[li], t, ntile, &off);
                CHECK(off % 64 == 0 && n >= 0);
                for (int l = 0; l < n; l++) {
                    CHECK(off / 64 + (size_t)l < nlines);
                    if (off / 64 + (size_t)l < nlines) seen[off / 64 + (size_t)l] = 1;
                }
                total += (size_t)n;
            }
            for (size_t l = 0; l < nlines; l++) CHECK(seen[l]);
            CHECK(total <= nlines + ntile);
        }
}

/* How ops are cut into parts: work in few equal units is dealt out evenly
 * (12 column blocks or heads: 6 parts on 2 threads, not 8 of 1 and 2),
 * plenty of units or none that divide: 4 parts per thread; serial ops and
 * one thread: 1. */
static RtBuf tbuf(int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    RtBuf b = {.kind = RT_BUF_TEMP, .dtype = RT_F32, .rank = 4, .dims = {d0, d1, d2, d3}, .numel = d0 * d1 * d2 * d3};
    return b;
}
TEST(op_parts) {
    static const struct {
        int64_t n, s;
        int nth, want;
    } g[] = {
        {768, 1, 2, 6},     /* decode q: 12 blocks */
        {3072, 1, 2, 8},    /* decode fc: 48 blocks */
        {768, 128, 2, 6},   /* prefill q: 12 blocks */
        {448, 1, 2, 8},     /* 7 blocks: no even split, the usual 8 */
        {96, 1, 2, 2},      /* 2 blocks */
        {768, 1, 3, 12},    /* 12 blocks on 3 threads: 12 parts of 1 */
        {768, 1, 1, 1},     /* one thread */
        {3072, 1, 64, 256}, /* many threads: more parts than a byte holds */
    };
    for (int i = 0; i < 8; i++) {
        RtBuf b[3] = {tbuf(1, 768, 1, g[i].s),
                      {.kind = RT_BUF_WEIGHT, .dtype = RT_F16, .rank = 2, .dims = {g[i].n, 768}, .numel = g[i].n * 768},
                      tbuf(1, g[i].n, 1, g[i].s)};
        RtOpRec op = {.kind = RT_OP_GEMM, .nin = 2, .nout = 1, .in = {0, 1}, .out = {2}};
        op.p.gemm.layout = RT_GEMM_CHANNELS;
        if (rt_op_parts(b, &op, g[i].nth) != g[i].want)
            fprintf(stderr, "op_parts gemm %d: %u, want %d\n", i, rt_op_parts(b, &op, g[i].nth), g[i].want);
        CHECK_EQ_INT((int)rt_op_parts(b, &op, g[i].nth), g[i].want);
    }
    /* decode attention, 12 heads of one query row; a tiny op is serial */
    RtBuf a[4] = {tbuf(1, 12, 1, 64), tbuf(1, 768, 1, 1024), tbuf(1, 768, 1, 1024), tbuf(1, 12, 1, 64)};
    RtOpRec at = {.kind = RT_OP_ATTENTION, .nin = 3, .nout = 1, .in = {0, 1, 2}, .out = {3}};
    at.p.attn.flags = RT_ATTN_K_T | RT_ATTN_V_T, at.p.attn.kv_heads = 12;
    CHECK_EQ_INT((int)rt_op_parts(a, &at, 2), 6);
    RtOpRec un = {.kind = RT_OP_UNARY, .nin = 1, .nout = 1, .in = {0}, .out = {3}};
    CHECK_EQ_INT((int)rt_op_parts(a, &un, 2), 1);
}

/* How threads claim parts: each takes its own region (a run of consecutive
 * parts) in order first, then what is left of the others'; every part is
 * claimed exactly once, also when some threads never come (descheduled) and
 * when threads outnumber regions. */
TEST(part_claim) {
    static const int nths[] = {1, 2, 3, 5, 14, 20, 64};
    for (int ti = 0; ti < 7; ti++)
        for (uint32_t parts = 1; parts <= 300; parts += parts < 20 ? 1 : 37)
            for (int absent = 0; absent < 2; absent++) { /* absent: only threads 0 and 1 come */
                int nth = nths[ti], nr = nth < RT_REGIONS ? nth : RT_REGIONS, come = absent && nth > 2 ? 2 : nth;
                RtOpSync s;
                memset(&s, 0, sizeof s);
                int seen[300] = {0}, last[64], claimed = 0;
                bool ordered = true, more = true;
                for (int t = 0; t < 64; t++) last[t] = -1;
                while (more) { /* round robin: one claim per thread per turn */
                    more = false;
                    for (int t = 0; t < come; t++) {
                        uint32_t k;
                        if (!rt_part_claim(&s, parts, t, nth, &k)) continue;
                        more = true;
                        CHECK(k < parts);
                        seen[k < parts ? k : 0]++, claimed++;
                        /* a region's parts go out in order */
                        uint32_t r = (uint32_t)(t % nr), lo = parts * r / (uint32_t)nr;
                        if (k >= lo && k < parts * (r + 1) / (uint32_t)nr && last[t] >= (int)lo &&
                            k <= (uint32_t)last[t])
                            ordered = false;
                        last[t] = (int)k;
                    }
                }
                CHECK_EQ_INT(claimed, (int)parts);
                for (uint32_t k = 0; k < parts; k++) CHECK_EQ_INT(seen[k], 1);
                CHECK(ordered);
            }
    /* two threads, 6 parts: 0 1 2 and 3 4 5 */
    RtOpSync s;
    memset(&s, 0, sizeof s);
    uint32_t k;
    for (uint32_t i = 0; i < 3; i++) {
        CHECK(rt_part_claim(&s, 6, 0, 2, &k));
        CHECK_EQ_INT((int)k, (int)i);
        CHECK(rt_part_claim(&s, 6, 1, 2, &k));
        CHECK_EQ_INT((int)k, (int)(3 + i));
    }
    CHECK(!rt_part_claim(&s, 6, 0, 2, &k));
    /* thread 1 never comes: thread 0 takes its region after its own */
    memset(&s, 0, sizeof s);
    for (uint32_t i = 0; i < 6; i++) {
        CHECK(rt_part_claim(&s, 6, 0, 2, &k));
        CHECK_EQ_INT((int)k, (int)i);
    }
    CHECK(!rt_part_claim(&s, 6, 1, 2, &k));
}

TEST(matmul) {
    for (int it = 0; it < 16; it++) {
        int tx = it & 1, ty = (it >> 1) & 1, nth = 1 + (it >> 2 & 1);
        int64_t m = rng_int(1, 40), k = rng_int(1, 40), n = rng_int(1, 40), b1 = rng_int(1, 3), b2 = rng_int(1, 3);
        /* x [b1, 1, M, K] broadcasts against y [b2, K, N] -> z [b1, b2, M, N] */
        int64_t xd[4] = {b1, 1, tx ? k : m, tx ? m : k}, yd[3] = {b2, ty ? n : k, ty ? k : n}, zd[4] = {b1, b2, m, n};
        float *x = rand_f32(b1 * m * k), *y = rand_f32(b2 * k * n), *z = malloc((size_t)(b1 * b2 * m * n) * 4);
        double *ref = malloc((size_t)(b1 * b2 * m * n) * 8);
        for (int64_t a = 0; a < b1; a++)
            for (int64_t c = 0; c < b2; c++)
                for (int64_t i = 0; i < m; i++)
                    for (int64_t j = 0; j < n; j++) {
                        double s = 0;
                        for (int64_t kk = 0; kk < k; kk++) {
                            double xv = tx ? x[a * m * k + kk * m + i] : x[a * m * k + i * k + kk];
                            double yv = ty ? y[c * k * n + j * k + kk] : y[c * k * n + kk * n + j];
                            s += xv * yv;
                        }
                        ref[((a * b2 + c) * m + i) * n + j] = s;
                    }
        RtMatmulParams p = {tx, ty};
        TArg in[2] = {{RT_F32, 4, {xd[0], xd[1], xd[2], xd[3]}, x, 0}, {RT_F32, 3, {yd[0], yd[1], yd[2]}, y, it & 8}};
        CHECK_EQ_INT(run_op(RT_OP_MATMUL, &p, sizeof p, in, 2, RT_F32, 4, zd, z, nth), RT_OK);
        CHECK(rel_max_err(z, ref, b1 * b2 * m * n) <= TOL * 10);
        free(x), free(y), free(z), free(ref);
    }
}

TEST(attention) {
    for (int it = 0; it < 16; it++) {
        int64_t B = rng_int(1, 2), Hk = rng_int(1, 3), G = rng_int(1, 3), H = Hk * G, E = rng_int(1, 40),
                Ev = rng_int(1, 40);
        int64_t S = rng_int(1, 70), L = it % 3 == 0 ? rng_int(1, 4) : rng_int(1, (int)S);
        int causal = it & 1, has_mask = (it >> 1) & 1, nth = 1 + (it >> 2 & 1);
        /* Causal over several query blocks (RT_ATT_LB rows each), each of
         * which stops at its last row's keys: S = L and S > L, the last
         * block short. */
        if (it >= 12) L = rng_int(2 * RT_ATT_LB + 1, 3 * RT_ATT_LB - 1), S = L + (it & 1) * rng_int(1, 20), causal = 1;
        float scale = 1.0f / sqrtf((float)E);
        float *q = rand_f32(B * H * L * E), *k = rand_f32(B * Hk * S * E), *v = rand_f32(B * Hk * S * Ev);
        float *mask = rand_f32(L * S); /* [1, 1, L, S] */
        float *o = malloc((size_t)(B * H * L * Ev) * 4);
        double *ref = malloc((size_t)(B * H * L * Ev) * 8), *sc = malloc((size_t)S * 8);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < L; i++) {
                    int64_t hk = h / G;
                    double mx = -1e300, sum = 0;
                    for (int64_t j = 0; j < S; j++) {
                        double s = 0;
                        for (int64_t e = 0; e < E; e++)
                            s += (double)q[((b * H + h) * L + i) * E + e] * k[((b * Hk + hk) * S + j) * E + e];
                        s = s * scale + (has_mask ? mask[i * S + j] : 0);
                        if (causal && j > i + S - L) s = -INFINITY;
                        sc[j] = s;
                        if (s > mx) mx = s;
                    }
                    for (int64_t j = 0; j < S; j++) sum += (sc[j] = exp(sc[j] - mx));
                    for (int64_t e = 0; e < Ev; e++) {
                        double acc = 0;
                        for (int64_t j = 0; j < S; j++) acc += sc[j] / sum * v[((b * Hk + hk) * S + j) * Ev + e];
                        ref[((b * H + h) * L + i) * Ev + e] = acc;
                    }
                }
        RtAttnParams p = {.scale = scale, .causal = causal, .has_mask = has_mask};
        TArg in[4] = {{RT_F32, 4, {B, H, L, E}, q, 0},
                      {RT_F32, 4, {B, Hk, S, E}, k, 0},
                      {RT_F32, 4, {B, Hk, S, Ev}, v, 0},
                      {RT_F32, 4, {1, 1, L, S}, mask, 1}};
        int64_t od[4] = {B, H, L, Ev};
        CHECK_EQ_INT(run_op(RT_OP_ATTENTION, &p, sizeof p, in, 3 + has_mask, RT_F32, 4, od, o, nth), RT_OK);
        double e = rel_max_err(o, ref, B * H * L * Ev);
        if (e > 1e-4) fprintf(stderr, "attention it %d: err %g\n", it, e);
        CHECK(e <= 1e-4);
        free(q), free(k), free(v), free(mask), free(o), free(ref), free(sc);
    }
}

/* The flagged (decode) attention: K and/or V transposed, fp16 cache inputs
 * read in place, cache ++ new positions given as two parts, against the
 * reference on the concatenation. */
TEST(attention_kv) {
    for (int it = 0; it < 40; it++) {
        int kt = it & 1, vt = (it >> 1) & 1, split = (it >> 2) & 1, f16 = (it >> 3) & 1, nth = 1 + (it % 3 == 0);
        if (!kt && !vt) kt = 1; /* with no layout flag only SPLIT/fp16 select this kernel */
        int64_t B = rng_int(1, 2), Hk = rng_int(1, 3), G = rng_int(1, 2), H = Hk * G, L = rng_int(1, 4);
        int64_t E = rng_int(1, 40), Ev = rng_int(1, 40), S0 = rng_int(1, 70), S1 = split ? rng_int(1, 3) : 0,
                S = S0 + S1;
        int causal = L <= S && it % 5 == 1, has_mask = it % 4 == 2;
        float scale = 0.3f;
        /* logical K [B, Hk, S, E] and V [B, Hk, S, Ev]; fp16-rounded where stored as fp16 */
        float *K = rand_f32(B * Hk * S * E), *V = rand_f32(B * Hk * S * Ev), *q = rand_f32(B * H * L * E);
        float *mask = rand_f32(L * S);
        int64_t np = split ? 2 : 1, ps[2] = {split ? S0 : S, S1}, po[2] = {0, S0};
        void *kp[2], *vp[2];
        for (int i = 0; i < np; i++) {
            int half = f16 && i == 0; /* the cache part */
            size_t es = half ? 2 : 4;
            kp[i] = malloc((size_t)(B * Hk * E * ps[i]) * es), vp[i] = malloc((size_t)(B * Hk * Ev * ps[i]) * es);
            for (int64_t b = 0; b < B * Hk; b++)
                for (int64_t j = 0; j < ps[i]; j++) {
                    for (int64_t e = 0; e < E; e++) {
                        float *src = &K[(b * S + po[i] + j) * E + e];
                        int64_t at = kt ? (b * E + e) * ps[i] + j : (b * ps[i] + j) * E + e;
                        if (half)
                            ((uint16_t *)kp[i])[at] = float_to_half(*src),
                                       *src = half_to_float(((uint16_t *)kp[i])[at]);
                        else
                            ((float *)kp[i])[at] = *src;
                    }
                    for (int64_t e = 0; e < Ev; e++) {
                        float *src = &V[(b * S + po[i] + j) * Ev + e];
                        int64_t at = vt ? (b * Ev + e) * ps[i] + j : (b * ps[i] + j) * Ev + e;
                        if (half)
                            ((uint16_t *)vp[i])[at] = float_to_half(*src),
                                       *src = half_to_float(((uint16_t *)vp[i])[at]);
                        else
                            ((float *)vp[i])[at] = *src;
                    }
                }
        }
        double *ref = malloc((size_t)(B * H * L * Ev) * 8), *sc = malloc((size_t)S * 8);
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < L; i++) {
                    int64_t hk = h / G;
                    double mx = -1e300, sum = 0;
                    for (int64_t j = 0; j < S; j++) {
                        double s = 0;
                        for (int64_t e = 0; e < E; e++)
                            s += (double)q[((b * H + h) * L + i) * E + e] * K[((b * Hk + hk) * S + j) * E + e];
                        s = s * scale + (has_mask ? mask[i * S + j] : 0);
                        if (causal && j > i + S - L) s = -INFINITY;
                        sc[j] = s;
                        if (s > mx) mx = s;
                    }
                    for (int64_t j = 0; j < S; j++) sum += (sc[j] = exp(sc[j] - mx));
                    for (int64_t e = 0; e < Ev; e++) {
                        double acc = 0;
                        for (int64_t j = 0; j < S; j++) acc += sc[j] / sum * V[((b * Hk + hk) * S + j) * Ev + e];
                        ref[((b * H + h) * L + i) * Ev + e] = acc;
                    }
                }
        RtAttnParams p = {.scale = scale,
                          .causal = causal,
                          .has_mask = has_mask,
                          .kv_heads = (int32_t)Hk,
                          .flags = (kt ? RT_ATTN_K_T : 0) | (vt ? RT_ATTN_V_T : 0) | (split ? RT_ATTN_SPLIT : 0)};
        TArg in[6];
        int n = 0;
        in[n++] = (TArg){RT_F32, 4, {B, H, L, E}, q, 0};
        for (int i = 0; i < np; i++) {
            int half = f16 && i == 0;
            /* transposed parts as [B, Hk·E, 1, S_i] (the cache layout): only element order counts */
            if (kt)
                in[n++] = (TArg){half ? RT_F16 : RT_F32, 4, {B, Hk * E, 1, ps[i]}, kp[i], half ? 2 : 0};
            else
                in[n++] = (TArg){half ? RT_F16 : RT_F32, 4, {B, Hk, ps[i], E}, kp[i], half ? 2 : 0};
            if (vt)
                in[n++] = (TArg){half ? RT_F16 : RT_F32, 4, {B, Hk * Ev, 1, ps[i]}, vp[i], half ? 2 : 0};
            else
                in[n++] = (TArg){half ? RT_F16 : RT_F32, 4, {B, Hk, ps[i], Ev}, vp[i], half ? 2 : 0};
        }
        if (has_mask) in[n++] = (TArg){RT_F32, 4, {1, 1, L, S}, mask, 1};
        float *o = malloc((size_t)(B * H * L * Ev) * 4);
        int64_t od[4] = {B, H, L, Ev};
        CHECK_EQ_INT(run_op(RT_OP_ATTENTION, &p, sizeof p, in, n, RT_F32, 4, od, o, nth), RT_OK);
        double e = rel_max_err(o, ref, B * H * L * Ev);
        if (e > 1e-4)
            fprintf(stderr, "attention_kv it %d kt %d vt %d split %d f16 %d: err %g\n", it, kt, vt, split, f16, e);
        CHECK(e <= 1e-4);
        for (int i = 0; i < np; i++) free(kp[i]), free(vp[i]);
        free(K), free(V), free(q), free(mask), free(o), free(ref), free(sc);
    }
    /* the checker: wrong kv_heads, sizes that do not divide, fp16 without a flag */
    float z[64] = {0};
    uint16_t h[64] = {0};
    RtAttnParams bad = {.scale = 1, .flags = RT_ATTN_K_T, .kv_heads = 3};
    TArg in[3] = {{RT_F32, 4, {1, 2, 1, 4}, z, 0}, {RT_F32, 4, {1, 8, 1, 4}, z, 0}, {RT_F32, 4, {1, 8, 1, 4}, z, 0}};
    int64_t od[4] = {1, 2, 1, 4};
    float o[8];
    CHECK_EQ_INT(run_op(RT_OP_ATTENTION, &bad, sizeof bad, in, 3, RT_F32, 4, od, o, 1), RT_EINVAL);
    bad.kv_heads = 2;
    CHECK_EQ_INT(run_op(RT_OP_ATTENTION, &bad, sizeof bad, in, 3, RT_F32, 4, od, o, 1), RT_OK);
    in[2].dims[3] = 3; /* V holds 24 elements, K 32: S disagrees */
    CHECK_EQ_INT(run_op(RT_OP_ATTENTION, &bad, sizeof bad, in, 3, RT_F32, 4, od, o, 1), RT_EINVAL);
    RtAttnParams plain = {.scale = 1};
    TArg in16[3] = {{RT_F32, 4, {1, 2, 4, 4}, z, 0}, {RT_F16, 4, {1, 2, 4, 4}, h, 2}, {RT_F32, 4, {1, 2, 4, 4}, z, 0}};
    int64_t od2[4] = {1, 2, 4, 4};
    float o2[32];
    CHECK_EQ_INT(run_op(RT_OP_ATTENTION, &plain, sizeof plain, in16, 3, RT_F32, 4, od2, o2, 1), RT_EINVAL);
}

/* An fp16 input read in place: a converting copy (strided), and a borrowed
 * constant (rtb_weight_ref) packed for a GEMM; the borrowed bytes stay as given. */
TEST(f16_input_and_borrowed_weight) {
    int64_t r = 37, c = 29;
    uint16_t *x = malloc((size_t)(r * c) * 2);
    for (int64_t i = 0; i < r * c; i++) x[i] = float_to_half(rng_f() * 100);
    RtCopyParams p = {.rank = 2, .dims = {c, r}, .src_stride = {1, c}, .dst_stride = {r, 1}}; /* transpose */
    TArg in[1] = {{RT_F16, 2, {r, c}, x, 2}};
    int64_t od[2] = {c, r};
    float *y = malloc((size_t)(r * c) * 4);
    CHECK_EQ_INT(run_op(RT_OP_COPY, &p, sizeof p, in, 1, RT_F32, 2, od, y, 2), RT_OK);
    int bad = 0;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) bad += y[j * r + i] != half_to_float(x[i * c + j]);
    CHECK_EQ_INT(bad, 0);
    /* a unary op may not read fp16 storage */
    RtUnaryParams up = {.op = RT_UN_NEG};
    CHECK_EQ_INT(run_op(RT_OP_UNARY, &up, sizeof up, in, 1, RT_F32, 2, (int64_t[]){r, c}, y, 1), RT_EINVAL);
    free(x), free(y);

    int64_t m = 5, k = 70, n = 45;
    float *a = rand_f32(m * k), *w = rand_f32(n * k), *w0 = malloc((size_t)(n * k) * 4),
          *out = malloc((size_t)(m * n) * 4);
    memcpy(w0, w, (size_t)(n * k) * 4);
    double *ref = malloc((size_t)(m * n) * 8);
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t kk = 0; kk < k; kk++) s += (double)a[i * k + kk] * w[j * k + kk];
            ref[i * n + j] = s;
        }
    RtGemmParams gp = {.layout = RT_GEMM_ROWS};
    TArg gin[2] = {{RT_F32, 2, {m, k}, a, 0}, {RT_F32, 2, {n, k}, w, 3}};
    CHECK_EQ_INT(run_op(RT_OP_GEMM, &gp, sizeof gp, gin, 2, RT_F32, 2, (int64_t[]){m, n}, out, 2), RT_OK);
    CHECK(rel_max_err(out, ref, m * n) <= 1e-5);
    CHECK(memcmp(w, w0, (size_t)(n * k) * 4) == 0);
    free(a), free(w), free(w0), free(out), free(ref);
}

TEST(norm) {
    for (int it = 0; it < 16; it++) {
        int kind = it & 1, lastaxis = (it >> 1) & 1, nth = 1 + (it >> 2 & 1);
        int64_t d0 = rng_int(1, 3), c = rng_int(1, 300), s = rng_int(1, 300);
        /* x [d0, C, 1, S] over axis 1, or x [d0, S, C] over the last axis */
        int64_t xd[4] = {0, 0, 0, 0};
        int rank;
        if (lastaxis)
            rank = 3, xd[0] = d0, xd[1] = s, xd[2] = c;
        else
            rank = 4, xd[0] = d0, xd[1] = c, xd[2] = 1, xd[3] = s;
        int64_t n = d0 * c * s;
        float *x = rand_f32(n), *g = rand_f32(c), *bt = rand_f32(c), *y = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) x[i] = x[i] * 3 + 1; /* non-zero mean */
        double *ref = malloc((size_t)n * 8);
        for (int64_t a = 0; a < d0; a++)
            for (int64_t j = 0; j < s; j++) {
#define XI(i) (lastaxis ? (a * s + j) * c + (i) : (a * c + (i)) * s + j)
                double mean = 0, var = 0;
                if (kind == RT_NORM_LAYER) {
                    for (int64_t i = 0; i < c; i++) mean += x[XI(i)];
                    mean /= c;
                }
                for (int64_t i = 0; i < c; i++) var += (x[XI(i)] - mean) * (x[XI(i)] - mean);
                var /= c;
                for (int64_t i = 0; i < c; i++)
                    ref[XI(i)] = (x[XI(i)] - mean) / sqrt(var + 1e-5) * g[i] + (kind == RT_NORM_LAYER ? bt[i] : 0);
#undef XI
            }
        RtNormParams p = {.kind = kind,
                          .axis_begin = lastaxis ? 2 : 1,
                          .axis_end = lastaxis ? 3 : 2,
                          .has_gamma = 1,
                          .has_beta = kind == RT_NORM_LAYER,
                          .eps = 1e-5f};
        TArg in[3] = {
            {RT_F32, rank, {xd[0], xd[1], xd[2], xd[3]}, x, 0}, {RT_F32, 1, {c}, g, 1}, {RT_F32, 1, {c}, bt, 1}};
        CHECK_EQ_INT(run_op(RT_OP_NORM, &p, sizeof p, in, 2 + p.has_beta, RT_F32, rank, xd, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, n) <= 1e-4);
        free(x), free(g), free(bt), free(y), free(ref);
    }
}

TEST(softmax) {
    for (int it = 0; it < 12; it++) {
        int64_t d[3] = {rng_int(1, 5), rng_int(1, 40), rng_int(1, 300)};
        int axis = it % 3, nth = 1 + (it >> 2 & 1);
        int64_t n = d[0] * d[1] * d[2], st[3] = {d[1] * d[2], d[2], 1};
        float *x = rand_f32(n), *y = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) x[i] *= 8;
        double *ref = malloc((size_t)n * 8);
        for (int64_t i = 0; i < n; i++) {
            int64_t base = i - ((i / st[axis]) % d[axis]) * st[axis];
            double mx = -1e300, s = 0;
            for (int64_t j = 0; j < d[axis]; j++) mx = fmax(mx, x[base + j * st[axis]]);
            for (int64_t j = 0; j < d[axis]; j++) s += exp(x[base + j * st[axis]] - mx);
            ref[i] = exp(x[i] - mx) / s;
        }
        RtAxisParams p = {axis};
        TArg in[1] = {{RT_F32, 3, {d[0], d[1], d[2]}, x, 0}};
        CHECK_EQ_INT(run_op(RT_OP_SOFTMAX, &p, sizeof p, in, 1, RT_F32, 3, d, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, n) <= TOL);
        free(x), free(y), free(ref);
    }
}

static double bin_ref(int op, double a, double b) {
    switch (op) {
    case RT_BIN_ADD: return a + b;
    case RT_BIN_SUB: return a - b;
    case RT_BIN_MUL: return a * b;
    case RT_BIN_DIV: return a / b;
    case RT_BIN_POW: return pow(a, b);
    case RT_BIN_MAX: return a > b ? a : b;
    case RT_BIN_MIN: return a < b ? a : b;
    }
    return 0;
}

TEST(binary_broadcast) {
    for (int it = 0; it < 28; it++) {
        int op = it % RT_BIN_COUNT_, nth = 1 + (it / 7 & 1);
        int64_t od[4] = {rng_int(1, 3), rng_int(1, 4), rng_int(1, 5), rng_int(1, 33)};
        /* a: full rank with random 1s; b: lower rank with random 1s */
        int64_t ad[4], bd[3];
        for (int i = 0; i < 4; i++) ad[i] = rng_int(0, 2) ? od[i] : 1;
        for (int i = 0; i < 3; i++) bd[i] = rng_int(0, 2) ? od[i + 1] : 1;
        for (int i = 0; i < 4; i++) /* make od exactly the broadcast shape */
            od[i] = ad[i] > 1 ? ad[i] : (i > 0 && bd[i - 1] > 1 ? bd[i - 1] : 1);
        int64_t n = numel_of(4, od), na = numel_of(4, ad), nb = numel_of(3, bd);
        float *a = rand_f32(na), *b = rand_f32(nb), *c = malloc((size_t)n * 4);
        if (op == RT_BIN_POW)
            for (int64_t i = 0; i < na; i++) a[i] = fabsf(a[i]) + 0.1f;
        if (op == RT_BIN_DIV)
            for (int64_t i = 0; i < nb; i++) b[i] = b[i] >= 0 ? b[i] + 0.5f : b[i] - 0.5f;
        double *ref = malloc((size_t)n * 8);
        for (int64_t i = 0; i < n; i++) {
            int64_t idx[4], t = i;
            for (int d = 3; d >= 0; d--) idx[d] = t % od[d], t /= od[d];
            int64_t ai = 0, bi = 0;
            for (int d = 0; d < 4; d++) ai = ai * ad[d] + (ad[d] == 1 ? 0 : idx[d]);
            for (int d = 0; d < 3; d++) bi = bi * bd[d] + (bd[d] == 1 ? 0 : idx[d + 1]);
            ref[i] = bin_ref(op, a[ai], b[bi]);
        }
        RtBinaryParams p = {op};
        TArg in[2] = {{RT_F32, 4, {ad[0], ad[1], ad[2], ad[3]}, a, 0}, {RT_F32, 3, {bd[0], bd[1], bd[2]}, b, it & 1}};
        CHECK_EQ_INT(run_op(RT_OP_BINARY, &p, sizeof p, in, 2, RT_F32, 4, od, c, nth), RT_OK);
        CHECK(rel_max_err(c, ref, n) <= TOL);
        free(a), free(b), free(c), free(ref);
    }
    /* int32 add with a scalar */
    int32_t a[5] = {1, -2, 3, 2147483647, 0}, s = 5, c[5];
    RtBinaryParams p = {RT_BIN_ADD};
    TArg in[2] = {{RT_I32, 1, {5}, a, 0}, {RT_I32, 0, {0}, &s, 1}};
    int64_t od[1] = {5};
    CHECK_EQ_INT(run_op(RT_OP_BINARY, &p, sizeof p, in, 2, RT_I32, 1, od, c, 2), RT_OK);
    CHECK(c[0] == 6 && c[1] == 3 && c[2] == 8 && c[3] == INT32_MIN + 4 && c[4] == 5);
}

TEST(unary) {
    for (int op = 0; op < RT_UN_COUNT_; op++) {
        int64_t n = rng_int(1, 1000);
        float *x = rand_f32(n), *y = malloc((size_t)n * 4);
        double *ref = malloc((size_t)n * 8);
        float eps = 1e-3f;
        for (int64_t i = 0; i < n; i++) {
            x[i] *= 6;
            if (op == RT_UN_RSQRT || op == RT_UN_SQRT || op == RT_UN_LOG) x[i] = fabsf(x[i]) + 0.01f;
            double v = x[i];
            switch (op) {
            case RT_UN_RSQRT: ref[i] = 1 / sqrt(v + eps); break;
            case RT_UN_SQRT: ref[i] = sqrt(v); break;
            case RT_UN_EXP: ref[i] = exp(v); break;
            case RT_UN_TANH: ref[i] = tanh(v); break;
            case RT_UN_SIGMOID: ref[i] = 1 / (1 + exp(-v)); break;
            case RT_UN_SILU: ref[i] = act_ref(v, RT_ACT_SILU); break;
            case RT_UN_GELU_EXACT: ref[i] = act_ref(v, RT_ACT_GELU_EXACT); break;
            case RT_UN_GELU_TANH: ref[i] = act_ref(v, RT_ACT_GELU_TANH); break;
            case RT_UN_GELU_SIGMOID: ref[i] = act_ref(v, RT_ACT_GELU_SIGMOID); break;
            case RT_UN_RELU: ref[i] = v > 0 ? v : 0; break;
            case RT_UN_NEG: ref[i] = -v; break;
            case RT_UN_ABS: ref[i] = fabs(v); break;
            case RT_UN_LOG: ref[i] = log(v); break;
            case RT_UN_SCALE: ref[i] = v * eps; break;
            }
        }
        RtUnaryParams p = {op, eps};
        TArg in[1] = {{RT_F32, 2, {1, n}, x, 0}};
        int64_t od[2] = {1, n};
        CHECK_EQ_INT(run_op(RT_OP_UNARY, &p, sizeof p, in, 1, RT_F32, 2, od, y, 1 + (op & 1)), RT_OK);
        double e = rel_max_err(y, ref, n);
        if (e > TOL) fprintf(stderr, "unary op %d: err %g\n", op, e);
        CHECK(e <= TOL);
        free(x), free(y), free(ref);
    }
}

/* exp across the whole fp32 range, every variant's vector path: up to 88.72
 * the true value is finite (the AVX2 / NEON exp once clamped its argument at
 * 88.37 there: 13% low at 88.5), past it +inf; below -87.33, (nearly) 0. */
TEST(exp_range) {
    enum { N = 4099 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    for (int i = 0; i < N; i++) x[i] = -87.3f + (88.7f + 87.3f) * (float)i / (N - 1);
    x[0] = 88.5f, x[1] = 88.71f, x[2] = 88.376f, x[3] = -87.32f, x[4] = 0.0f;
    RtUnaryParams p = {RT_UN_EXP, 0};
    TArg in[1] = {{RT_F32, 1, {N}, x, 0}};
    int64_t od[1] = {N};
    CHECK_EQ_INT(run_op(RT_OP_UNARY, &p, sizeof p, in, 1, RT_F32, 1, od, y, 1), RT_OK);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double r = exp((double)x[i]), e = fabs(y[i] - r) / r;
        if (e > worst) worst = e;
    }
    if (worst > 1e-5) fprintf(stderr, "exp: relative error %g\n", worst);
    CHECK(worst <= 1e-5);
    static const float over[] = {88.73f, 89.0f, 100.0f, 1e30f}, under[] = {-87.5f, -100.0f, -1e30f};
    for (int i = 0; i < 4; i++) x[i] = over[i];
    for (int i = 0; i < 3; i++) x[4 + i] = under[i];
    for (int i = 7; i < 16; i++) x[i] = 1.0f;
    in[0].dims[0] = od[0] = 16;
    CHECK_EQ_INT(run_op(RT_OP_UNARY, &p, sizeof p, in, 1, RT_F32, 1, od, y, 1), RT_OK);
    for (int i = 0; i < 4; i++) CHECK(isinf(y[i]) && y[i] > 0);
    for (int i = 4; i < 7; i++) CHECK(y[i] >= 0 && y[i] < 1.2e-38f);
    free(x), free(y);
}

TEST(reduce) {
    for (int it = 0; it < 18; it++) {
        int op = it % 3, nth = 1 + (it & 1);
        int64_t d[4] = {rng_int(1, 4), rng_int(1, 7), rng_int(1, 5), rng_int(1, 40)};
        uint32_t axes = (uint32_t)rng_int(1, 15);
        int64_t n = numel_of(4, d), kept = 1, od[4];
        int orank = 0;
        for (int i = 0; i < 4; i++)
            if (!(axes >> i & 1)) kept *= d[i], od[orank++] = d[i];
        if (orank == 0) od[orank++] = 1;
        float *x = rand_f32(n), *y = malloc((size_t)kept * 4);
        double *ref = calloc((size_t)kept, 8);
        int64_t *cnt = calloc((size_t)kept, 8);
        for (int64_t i = 0; i < kept; i++) ref[i] = op == RT_RED_MAX ? -1e300 : 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t idx[4], t = i, o = 0;
            for (int dd = 3; dd >= 0; dd--) idx[dd] = t % d[dd], t /= d[dd];
            for (int dd = 0; dd < 4; dd++)
                if (!(axes >> dd & 1)) o = o * d[dd] + idx[dd];
            ref[o] = op == RT_RED_MAX ? fmax(ref[o], x[i]) : ref[o] + x[i];
            cnt[o]++;
        }
        if (op == RT_RED_MEAN)
            for (int64_t i = 0; i < kept; i++) ref[i] /= cnt[i];
        RtReduceParams p = {op, axes};
        TArg in[1] = {{RT_F32, 4, {d[0], d[1], d[2], d[3]}, x, 0}};
        CHECK_EQ_INT(run_op(RT_OP_REDUCE, &p, sizeof p, in, 1, RT_F32, orank, od, y, nth), RT_OK);
        CHECK(rel_max_err(y, ref, kept) <= TOL);
        free(x), free(y), free(ref), free(cnt);
    }
}

/* transpose by a random permutation, and a tile, expressed as strided copies */
TEST(copy_transpose_tile) {
    for (int it = 0; it < 12; it++) {
        int64_t d[4] = {rng_int(1, 4), rng_int(1, 6), rng_int(1, 5), rng_int(1, 9)};
        int perm[4] = {0, 1, 2, 3};
        for (int i = 3; i > 0; i--) {
            int j = rng_int(0, i), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        int64_t st[4] = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}, od[4], ost[4];
        for (int i = 0; i < 4; i++) od[i] = d[perm[i]];
        ost[3] = 1;
        for (int i = 2; i >= 0; i--) ost[i] = ost[i + 1] * od[i + 1];
        int64_t n = numel_of(4, d);
        int32_t *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) x[i] = (int32_t)i;
        RtCopyParams p = {.rank = 4};
        for (int i = 0; i < 4; i++) p.dims[i] = od[i], p.src_stride[i] = st[perm[i]], p.dst_stride[i] = ost[i];
        TArg in[1] = {{RT_I32, 4, {d[0], d[1], d[2], d[3]}, x, 0}};
        CHECK_EQ_INT(run_op(RT_OP_COPY, &p, sizeof p, in, 1, RT_I32, 4, od, y, 1 + (it & 1)), RT_OK);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t idx[4], t = i, src = 0;
            for (int dd = 3; dd >= 0; dd--) idx[dd] = t % od[dd], t /= od[dd];
            for (int dd = 0; dd < 4; dd++) src += idx[dd] * st[perm[dd]];
            bad += y[i] != x[src];
        }
        CHECK_EQ_INT(bad, 0);
        free(x), free(y);
    }
    /* tile [2, 3] by reps [2, 2] -> [4, 6]: iteration [r0, d0, r1, d1], stride 0 on r */
    float x[6] = {1, 2, 3, 4, 5, 6}, y[24];
    RtCopyParams p = {.rank = 4, .dims = {2, 2, 2, 3}, .src_stride = {0, 3, 0, 1}, .dst_stride = {12, 6, 3, 1}};
    TArg in[1] = {{RT_F32, 2, {2, 3}, x, 0}};
    int64_t od[2] = {4, 6};
    CHECK_EQ_INT(run_op(RT_OP_COPY, &p, sizeof p, in, 1, RT_F32, 2, od, y, 2), RT_OK);
    float want[24] = {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6, 1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6};
    CHECK(memcmp(y, want, sizeof want) == 0);
    /* reversed last axis: x[:, ::-1] */
    RtCopyParams rv = {.rank = 2, .dims = {2, 3}, .src_offset = 2, .src_stride = {3, -1}, .dst_stride = {3, 1}};
    int64_t rd[2] = {2, 3};
    float r[6];
    CHECK_EQ_INT(run_op(RT_OP_COPY, &rv, sizeof rv, in, 1, RT_F32, 2, rd, r, 1), RT_OK);
    CHECK(r[0] == 3 && r[1] == 2 && r[2] == 1 && r[3] == 6 && r[5] == 4);
    rv.src_offset = 1; /* would read x[-1] */
    CHECK_EQ_INT(run_op(RT_OP_COPY, &rv, sizeof rv, in, 1, RT_F32, 2, rd, r, 1), RT_EINVAL);
}

/* concat along axis 1 as two copies into one buffer, split as copies out */
TEST(concat_split) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int a = rtb_input(b, "a", RT_F32, 2, (const int64_t[]){2, 3}),
        c = rtb_input(b, "c", RT_F32, 2, (const int64_t[]){2, 1});
    int y = rtb_temp(b, RT_F32, 2, (const int64_t[]){2, 4}), s = rtb_temp(b, RT_F32, 2, (const int64_t[]){2, 2});
    RtCopyParams pa = {.rank = 2, .dims = {2, 3}, .src_stride = {3, 1}, .dst_stride = {4, 1}};
    RtCopyParams pc = {.rank = 2, .dims = {2, 1}, .src_stride = {1, 1}, .dst_offset = 3, .dst_stride = {4, 1}};
    RtCopyParams ps = {.rank = 2, .dims = {2, 2}, .src_offset = 2, .src_stride = {4, 1}, .dst_stride = {2, 1}};
    CHECK_EQ_INT(rtb_op(b, RT_OP_COPY, &a, 1, &y, 1, &pa, sizeof pa), RT_OK);
    CHECK_EQ_INT(rtb_op(b, RT_OP_COPY, &c, 1, &y, 1, &pc, sizeof pc), RT_OK);
    CHECK_EQ_INT(rtb_op(b, RT_OP_COPY, &y, 1, &s, 1, &ps, sizeof ps), RT_OK);
    rtb_output(b, "y", y, RT_F32);
    rtb_output(b, "s", s, RT_F32);
    RtArtifact *art;
    char err[128];
    CHECK_EQ_INT(rtb_finish(b, NULL, 0, &art, err, sizeof err), RT_OK);
    rtb_free(b);
    const RtSection *secs;
    int n;
    rt_artifact_sections(art, &secs, &n);
    RtModel *m;
    CHECK_EQ_INT(rt_model_load(&m, secs, n, &(RtLoadOptions){.cpu = test_cpu()}, err, sizeof err), RT_OK);
    float av[6] = {1, 2, 3, 4, 5, 6}, cv[2] = {7, 8}, yv[8], sv[4];
    RtTensor in[2] = {{RT_F32, 2, {2, 3}, av, sizeof av}, {RT_F32, 2, {2, 1}, cv, sizeof cv}};
    RtTensor out[2] = {{RT_F32, 2, {2, 4}, yv, sizeof yv}, {RT_F32, 2, {2, 2}, sv, sizeof sv}};
    CHECK_EQ_INT(rt_run(m, in, 2, out, 2, 0, NULL), RT_OK);
    float wy[8] = {1, 2, 3, 7, 4, 5, 6, 8}, ws[4] = {3, 7, 6, 8};
    CHECK(memcmp(yv, wy, sizeof wy) == 0 && memcmp(sv, ws, sizeof ws) == 0);
    rt_model_free(m);
    rt_artifact_free(art);
}

TEST(gather) {
    for (int it = 0; it < 8; it++) {
        int64_t d[3] = {rng_int(1, 4), rng_int(1, 10), rng_int(1, 20)}, ni = rng_int(1, 12);
        int axis = it % 3;
        int32_t *idx = malloc((size_t)ni * 4);
        for (int64_t i = 0; i < ni; i++) idx[i] = rng_int(-(int)d[axis], (int)d[axis] - 1);
        int64_t od[3];
        for (int i = 0; i < 3; i++) od[i] = i == axis ? ni : d[i];
        int64_t n = numel_of(3, od);
        float *x = rand_f32(numel_of(3, d)), *y = malloc((size_t)n * 4);
        double *ref = malloc((size_t)n * 8);
        for (int64_t i = 0; i < n; i++) {
            int64_t idv[3], t = i;
            for (int dd = 2; dd >= 0; dd--) idv[dd] = t % od[dd], t /= od[dd];
            int64_t k = idx[idv[axis]];
            idv[axis] = k < 0 ? k + d[axis] : k;
            ref[i] = x[(idv[0] * d[1] + idv[1]) * d[2] + idv[2]];
        }
        RtAxisParams p = {axis};
        TArg in[2] = {{RT_F32, 3, {d[0], d[1], d[2]}, x, it & 1}, {RT_I32, 1, {ni}, idx, 0}};
        CHECK_EQ_INT(run_op(RT_OP_GATHER, &p, sizeof p, in, 2, RT_F32, 3, od, y, 1 + (it >> 1 & 1)), RT_OK);
        CHECK(rel_max_err(y, ref, n) == 0);
        free(idx), free(x), free(y), free(ref);
    }
    /* out-of-range index: zero row and RT_EINDEX, no crash */
    float x[6] = {1, 2, 3, 4, 5, 6}, y[4] = {9, 9, 9, 9};
    int32_t idx[2] = {1, 7};
    RtAxisParams p = {0};
    TArg in[2] = {{RT_F32, 2, {3, 2}, x, 1}, {RT_I32, 1, {2}, idx, 0}};
    int64_t od[2] = {2, 2};
    CHECK_EQ_INT(run_op(RT_OP_GATHER, &p, sizeof p, in, 2, RT_F32, 2, od, y, 1), RT_EINDEX);
}

TEST(band_select_cast) {
    float x[2 * 3 * 4];
    for (int i = 0; i < 24; i++) x[i] = (float)(i + 1);
    float y[24];
    RtBandParams bp = {-1, 0}; /* causal lower triangle */
    TArg in[1] = {{RT_F32, 3, {2, 3, 4}, x, 0}};
    int64_t d[3] = {2, 3, 4};
    CHECK_EQ_INT(run_op(RT_OP_BAND_PART, &bp, sizeof bp, in, 1, RT_F32, 3, d, y, 2), RT_OK);
    int bad = 0;
    for (int i = 0; i < 24; i++) {
        int r = (i / 4) % 3, c = i % 4;
        bad += y[i] != (c <= r ? x[i] : 0.0f);
    }
    CHECK_EQ_INT(bad, 0);
    RtBandParams bp2 = {0, 1};
    CHECK_EQ_INT(run_op(RT_OP_BAND_PART, &bp2, sizeof bp2, in, 1, RT_F32, 3, d, y, 1), RT_OK);
    CHECK(y[0] == 1 && y[1] == 2 && y[2] == 0 && y[4] == 0 && y[5] == 6 && y[6] == 7 && y[7] == 0);

    /* select(cond [3,1], a [3,4], b scalar) */
    uint8_t cond[3] = {1, 0, 1};
    float a[12], bsc = -1, out[12];
    for (int i = 0; i < 12; i++) a[i] = (float)i;
    TArg sin[3] = {{RT_BOOL, 2, {3, 1}, cond, 0}, {RT_F32, 2, {3, 4}, a, 0}, {RT_F32, 0, {0}, &bsc, 1}};
    int64_t sd[2] = {3, 4};
    CHECK_EQ_INT(run_op(RT_OP_SELECT, NULL, 0, sin, 3, RT_F32, 2, sd, out, 2), RT_OK);
    bad = 0;
    for (int i = 0; i < 12; i++) bad += out[i] != (cond[i / 4] ? a[i] : -1.0f);
    CHECK_EQ_INT(bad, 0);

    /* casts: fp32 -> int32 truncates and saturates, -> bool, round to fp16 */
    float f[5] = {1.7f, -2.5f, 3e10f, NAN, 1.0009765625f + 0.0001f};
    int32_t iv[5];
    RtCastParams cp = {0};
    TArg cin[1] = {{RT_F32, 1, {5}, f, 0}};
    int64_t cd[1] = {5};
    CHECK_EQ_INT(run_op(RT_OP_CAST, &cp, sizeof cp, cin, 1, RT_I32, 1, cd, iv, 1), RT_OK);
    CHECK(iv[0] == 1 && iv[1] == -2 && iv[2] == INT32_MAX && iv[3] == 0 && iv[4] == 1);
    uint8_t bv[5];
    CHECK_EQ_INT(run_op(RT_OP_CAST, &cp, sizeof cp, cin, 1, RT_BOOL, 1, cd, bv, 1), RT_OK);
    CHECK(bv[0] == 1 && bv[1] == 1 && bv[2] == 1);
    RtCastParams rp = {1};
    float fr[5];
    CHECK_EQ_INT(run_op(RT_OP_CAST, &rp, sizeof rp, cin, 1, RT_F32, 1, cd, fr, 2), RT_OK);
    CHECK(fr[0] == half_to_float(float_to_half(1.7f)) && fr[4] == 1.0009765625f);
}

/* Shape errors are caught when the op is recorded, with a message. */
TEST(builder_rejects) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int64_t d1[2] = {4, 8}, d2[2] = {4, 9};
    int x = rtb_input(b, "x", RT_F16, 2, d1), y = rtb_temp(b, RT_F32, 2, d2);
    RtUnaryParams p = {RT_UN_EXP, 0};
    CHECK_EQ_INT(rtb_op(b, RT_OP_UNARY, &x, 1, &y, 1, &p, sizeof p), RT_EINVAL);
    CHECK_STR(rtb_error(b), "op 0 (unary): unary: y must match x (fp32)");
    /* the first error sticks */
    CHECK_EQ_INT(rtb_output(b, "y", y, RT_F16), RT_EINVAL);
    RtArtifact *a;
    char err[128];
    CHECK_EQ_INT(rtb_finish(b, NULL, 0, &a, err, sizeof err), RT_EINVAL);
    CHECK_STR(err, "op 0 (unary): unary: y must match x (fp32)");
    rtb_free(b);

    b = rtb_new(RT_MODE_BONDED);
    x = rtb_input(b, "x", RT_F32, 2, d1);
    y = rtb_temp(b, RT_F32, 2, d1);
    int z = rtb_temp(b, RT_F32, 2, d1);
    int in2[2] = {x, z};
    RtBinaryParams bp = {RT_BIN_ADD};
    CHECK_EQ_INT(rtb_op(b, RT_OP_BINARY, in2, 2, &y, 1, &bp, sizeof bp), RT_OK);
    CHECK_EQ_INT(rtb_output(b, "y", y, RT_F16), RT_OK);
    CHECK_EQ_INT(rtb_finish(b, NULL, 0, &a, err, sizeof err), RT_EINVAL);
    CHECK_STR(err, "bonded program: op 0 (binary) reads buffer 2 before any op writes it");
    rtb_free(b);
    CHECK(rtb_new(3) == NULL);
    b = rtb_new(RT_MODE_BONDED);
    rtb_input(b, "x", RT_F32, 2, d1);
    CHECK_EQ_INT(rtb_input(b, "x", RT_F32, 2, d1), RT_EINVAL);
    CHECK_STR(rtb_error(b), "input x declared twice");
    rtb_free(b);
}

/* Kernel variants by name; one this build lacks (or this CPU) is refused at
 * load with RT_ECPU and a message, never run. */
TEST(kernel_variants) {
    char err[256];
    RtCpu v;
    CHECK_EQ_INT(rt_cpu_parse("avx2", &v, err, sizeof err), RT_OK);
    CHECK(v == RT_CPU_AVX2 && !strcmp(rt_cpu_name(v), "avx2"));
    CHECK_EQ_INT(rt_cpu_parse("sse9", &v, err, sizeof err), RT_EINVAL);
    CHECK(strstr(err, "unknown kernel variant 'sse9'") != NULL);
    CHECK_EQ_INT(rt_cpu_check(rt_cpu_best(), err, sizeof err), RT_OK);
    CHECK_EQ_INT(rt_cpu_check(RT_CPU_SCALAR, err, sizeof err), RT_OK);
#if defined(__x86_64__)
    RtCpu absent = RT_CPU_NEON;
#else
    RtCpu absent = RT_CPU_AVX2;
#endif
    CHECK_EQ_INT(rt_cpu_check(absent, err, sizeof err), RT_ECPU);
    CHECK(strstr(err, "is not built into this milc") != NULL);
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int x = rtb_input(b, "x", RT_F32, 1, (const int64_t[]){4}), y = rtb_temp(b, RT_F32, 1, (const int64_t[]){4});
    RtUnaryParams up = {.op = RT_UN_NEG};
    CHECK_EQ_INT(rtb_op(b, RT_OP_UNARY, &x, 1, &y, 1, &up, sizeof up), RT_OK);
    rtb_output(b, "y", y, RT_F32);
    RtArtifact *art;
    CHECK_EQ_INT(rtb_finish(b, NULL, 0, &art, err, sizeof err), RT_OK);
    rtb_free(b);
    const RtSection *secs;
    int n;
    rt_artifact_sections(art, &secs, &n);
    RtModel *m = NULL;
    CHECK_EQ_INT(rt_model_load(&m, secs, n, &(RtLoadOptions){.cpu = absent}, err, sizeof err), RT_ECPU);
    CHECK(m == NULL && strstr(err, rt_cpu_name(absent)) != NULL);
    /* every variant this CPU runs gives the same answer */
    for (int c = RT_CPU_SCALAR; c < RT_CPU_COUNT_; c++) {
        if (rt_cpu_check((RtCpu)c, NULL, 0)) continue;
        CHECK_EQ_INT(rt_model_load(&m, secs, n, &(RtLoadOptions){.cpu = (RtCpu)c}, err, sizeof err), RT_OK);
        float xv[4] = {1, -2, 3, -4}, yv[4];
        RtTensor in = {RT_F32, 1, {4}, xv, sizeof xv}, out = {RT_F32, 1, {4}, yv, sizeof yv};
        CHECK_EQ_INT(rt_run(m, &in, 1, &out, 1, 0, NULL), RT_OK);
        CHECK(yv[0] == -1 && yv[3] == 4);
        rt_model_free(m);
    }
    rt_artifact_free(art);
}

int main(void) {
    RUN(kernel_variants);
    RUN(gemm);
    RUN(gemm_a_crowds_l2);
    RUN(gemm_ahead);
    RUN(op_parts);
    RUN(part_claim);
    RUN(matmul);
    RUN(attention);
    RUN(attention_kv);
    RUN(f16_input_and_borrowed_weight);
    RUN(norm);
    RUN(softmax);
    RUN(binary_broadcast);
    RUN(unary);
    RUN(exp_range);
    RUN(reduce);
    RUN(copy_transpose_tile);
    RUN(concat_split);
    RUN(gather);
    RUN(band_select_cast);
    RUN(builder_rejects);
    TEST_MAIN_END();
}
