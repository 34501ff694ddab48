/* test_estimate.c — milc_estimate: the sweep fit flags what is not a cost
 * (synthetic sweeps with a negative intercept, a cache cliff, noise), the
 * chip file is read as untrusted input, and the ANE projection of GPT-2 124M
 * is compared with published M4 Max figures it was not fitted to (the table
 * it prints is the validation of docs/ANE-ESTIMATE.md). */
#include <math.h>

#include "milc/estimate.h"
#include "test.h"

static EstFit fit_of(const double *x, const double *y, int n) {
    EstFit f;
    est_fit(x, y, n, &f);
    return f;
}

TEST(fit_clean_line) {
    double x[] = {1, 8, 16, 32, 64, 128}, y[6];
    for (int i = 0; i < 6; i++) y[i] = 2.5 + 0.125 * x[i];
    EstFit f = fit_of(x, y, 6);
    CHECK(f.ok && fabs(f.a - 2.5) < 1e-9 && fabs(f.b - 0.125) < 1e-9 && f.r2 > 0.999999);
    CHECK_EQ_INT(f.flags, 0);
}

TEST(fit_negative_intercept) {
    double x[] = {1, 2, 4}, y[] = {0.5, 1.5, 3.5}; /* y = -0.5 + x exactly */
    EstFit f = fit_of(x, y, 3);
    CHECK(f.ok && f.a < 0);
    CHECK_EQ_INT(f.flags, EST_FIT_NEGATIVE_INTERCEPT);
    CHECK_STR(est_fit_flag_name(EST_FIT_NEGATIVE_INTERCEPT), "negative_intercept");
}

/* The depth sweep of the issue: linear while the weights fit in cache, then
 * the 12-layer point far above the line.  The line's R^2 still reads 0.95. */
TEST(fit_cache_cliff) {
    double x[] = {1, 2, 4, 6, 12}, y[] = {0.9, 1.7, 3.3, 4.9, 14.5};
    EstFit f = fit_of(x, y, 5);
    CHECK(f.ok && f.r2 > 0.9);
    CHECK(f.flags & EST_FIT_BENDS);
    CHECK(f.flags & EST_FIT_NEGATIVE_INTERCEPT);
    CHECK(f.has_hinge && f.knot == 6);
    CHECK(fabs(f.hb - 0.8) < 1e-6 && fabs(f.hb + f.hc - 1.6) < 1e-6); /* the two slopes, exactly */
    CHECK(f.hr2 > 0.9999);
}

/* A few % of noise on a line is not a bend, and not a poor fit. */
TEST(fit_noise_is_not_a_bend) {
    double x[] = {1, 8, 16, 32, 64, 128}, y[6], noise[] = {0.03, -0.02, 0.025, -0.03, 0.01, -0.02};
    for (int i = 0; i < 6; i++) y[i] = (3 + 0.1 * x[i]) * (1 + noise[i]);
    EstFit f = fit_of(x, y, 6);
    CHECK_EQ_INT(f.flags, 0);
}

TEST(fit_poor) {
    double x[] = {1, 2, 3, 4}, y[] = {5, 1, 6, 2};
    EstFit f = fit_of(x, y, 4);
    CHECK(f.flags & EST_FIT_POOR);
}

TEST(fit_degenerate) {
    double x[] = {4, 4}, y[] = {1, 2};
    CHECK(!fit_of(x, y, 2).ok);
    CHECK(!fit_of(x, y, 1).ok);
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = malloc(1 << 16);
    *len = s ? fread(s, 1, (1 << 16) - 1, f) : 0;
    fclose(f);
    return s;
}

static bool load_chip(EstChip *c) {
    size_t len;
    char *text = slurp(MILC_DATA_DIR "/ane/m4-max.json", &len), err[512] = "";
    int rc = text ? est_chip_parse(text, len, "m4-max.json", c, err, sizeof err) : -1;
    if (rc) fprintf(stderr, "cannot read the chip file: %s\n", text ? err : "missing");
    free(text);
    return rc == 0;
}

TEST(chip_file) {
    EstChip c;
    CHECK(load_chip(&c));
    CHECK(c.fp16_tflops == 19.0 && c.min_seq == 16 && c.nutil == 2 && c.dispatch_ms == 0.2);
    CHECK(fabs(est_utilization(&c, 1) - 0.30) < 1e-12 && fabs(est_utilization(&c, 32) - 0.94) < 1e-12);
    CHECK(fabs(est_utilization(&c, 1000) - 0.94) < 1e-12);
    double mid = est_utilization(&c, sqrt(32.0)); /* halfway in log(ops) */
    CHECK(fabs(mid - 0.62) < 1e-9);
}

/* Bad files: each refused with the field (or place) named. */
TEST(chip_bad) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"", "line 1"},
        {"[1]", "one JSON object"},
        {"{\"schema\":\"milc-ane-chip/9\"}", "schema"},
        {"{\"schema\":\"milc-ane-chip/1\",\"chip\":\"x\",\"typo\":1}", "unknown field 'typo'"},
        {"{\"schema\":\"milc-ane-chip/1\",\"chip\":\"x\"}", "missing field 'fp16_tflops'"},
        {"{\"schema\":\"milc-ane-chip/1\",\"chip\":\"x\",\"fp16_tflops\":\"19\"}", "'fp16_tflops' must be a number"},
        {"{\"schema\":\"milc-ane-chip/1\",\"chip\":\"x\",\"fp16_tflops\":-1}", "'fp16_tflops' = -1 is outside"},
        {"{\"a\":1,\"a\":2}", "duplicate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        EstChip c;
        char err[512] = "";
        int rc = est_chip_parse(cases[i].text, strlen(cases[i].text), "bad.json", &c, err, sizeof err);
        if (rc != -1 || !strstr(err, cases[i].want) || strncmp(err, "bad.json: ", 10) != 0) {
            fprintf(stderr, "case %zu: rc %d, '%s' (want '%s')\n", i, rc, err, cases[i].want);
            CHECK(0);
        }
    }
    /* A utilization list out of order, and a share above 1. */
    size_t len;
    char *text = slurp(MILC_DATA_DIR "/ane/m4-max.json", &len);
    CHECK(text != NULL);
    if (!text) return;
    text[len] = 0;
    const char *swaps[][2] = {{"[[1, 0.30], [32, 0.94]]", "[[32, 0.94], [1, 0.30]]"},
                              {"[[1, 0.30], [32, 0.94]]", "[[1, 0.30], [32, 1.5]]"},
                              {"\"min_seq\": 16", "\"min_seq\": 16.5"}};
    for (int k = 0; k < 3; k++) {
        char buf[1 << 16];
        char *at = strstr(text, swaps[k][0]);
        CHECK(at != NULL);
        if (!at) continue;
        snprintf(buf, sizeof buf, "%.*s%s%s", (int)(at - text), text, swaps[k][1], at + strlen(swaps[k][0]));
        EstChip c;
        char err[512] = "";
        CHECK(est_chip_parse(buf, strlen(buf), "edited.json", &c, err, sizeof err) == -1);
        CHECK(strstr(err, k < 2 ? "utilization[" : "min_seq") != NULL);
    }
    free(text);
}

/* GPT-2 124M: 12 layers, C=768, FF=3072, fp16 weights. */
enum { C = 768, FF = 3072, LAYERS = 12 };
static EstModel gpt2(double ops_per_layer) {
    double params = 4.0 * C * C + 2.0 * C * FF + 9.0 * C + FF; /* matmuls, biases, 2 LayerNorms */
    return (EstModel){.layers = LAYERS,
                      .layer_weight_bytes = 2 * params,
                      .layer_flops_per_pos = 2 * (4.0 * C * C + 2.0 * C * FF),
                      .layer_attn_flops_per_pos_ctx = 4.0 * C,
                      .layer_ops = ops_per_layer,
                      .io_bytes_per_pos = 2.0 * C * 2,
                      .layer_kv_bytes_per_ctx = 2.0 * C * 2};
}

static double err_pct(double got, double want) { return (got - want) / want * 100; }

/* The validation: parameters from the dispatch micro-measurements and the
 * chip's specification only (data/ane/m4-max.json), against Orion's table
 * (arXiv 2603.06728, GPT-2 124M on an M4 Max).  The plan: Orion's 24
 * programs (two per layer), each dispatch padded to 16 positions; the
 * prompt runs token by token (the table's cached prefill, 165 tok/s, is its
 * decode speed, 170 tok/s); a 16-token prompt (a guess).  docs/ANE-ESTIMATE.md. */
TEST(validation_orion_gpt2) {
    EstChip c;
    CHECK(load_chip(&c));
    EstModel m = gpt2(16); /* ~8 ANE ops in each of a layer's two programs: a guess */
    EstPlan p;
    CHECK(est_plan_depth(&m, 1, 2, &p) == 0);
    p.programs = p.dispatches = 2 * LAYERS; /* Orion: attention and FFN programs */
    p.ops_per_dispatch = 8;
    EstScenario s = {.prompt_tokens = 16, .prefill_chunk = 1, .ctx = 16, .path = EST_DIRECT, .compile_factor = 1};
    EstResult r;
    est_project(&c, &p, &s, &r);
    const struct {
        const char *what;
        double got, want;
        bool goal;
    } rows[] = {
        {"decode, ms/token", r.decode_ms, 5.76, true},
        {"cached prefill, tok/s", r.prefill_tok_s, 165, true},
        {"first-call prefill, tok/s", r.cold_tok_s, 12, true},
        {"compile, 24 programs, ms", r.compile_ms, 1015, false},
    };
    printf("ANE ESTIMATE vs published (GPT-2 124M, M4 Max, Orion): %d dispatches x %.3f ms fixed, compute %.3f ms,"
           " streaming %.3f ms per forward\n",
           p.dispatches, r.decode.fixed_ms / p.dispatches, r.decode.compute_ms, r.decode.stream_ms);
    printf("%-28s %10s %10s %8s\n", "figure", "projected", "published", "error");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double e = err_pct(rows[i].got, rows[i].want);
        printf("%-28s %10.2f %10.2f %+7.1f%%%s\n", rows[i].what, rows[i].got, rows[i].want, e,
               fabs(e) <= 25  ? ""
               : rows[i].goal ? "  (over the 25% goal)"
                              : "  (not a goal; see docs)");
        if (rows[i].goal) CHECK(fabs(e) <= 25);
    }
    /* Decode is dispatch-bound: 24 fixed costs are most of the token. */
    CHECK(r.decode.fixed_ms > 0.7 * r.decode_ms);
}

/* Deeper chunks mean fewer dispatches: decode falls with depth, mode 1 (a
 * dispatch per op) costs far more, Core ML multiplies the fixed part, and a
 * program above the chip's stable size is marked. */
TEST(projection_shapes) {
    EstChip c;
    CHECK(load_chip(&c));
    EstModel m = gpt2(16);
    EstScenario s = {.prompt_tokens = 128, .prefill_chunk = 128, .ctx = 1024, .path = EST_DIRECT, .compile_factor = 1};
    double prev = INFINITY;
    for (int d = 1; d <= LAYERS; d++) {
        EstPlan p;
        EstResult r;
        if (est_plan_depth(&m, d, 2, &p) != 0 || (12 % d)) continue;
        est_project(&c, &p, &s, &r);
        CHECK(r.decode_ms < prev);
        prev = r.decode_ms;
        CHECK(!r.over_max_program);
    }
    EstPlan p1, p2;
    EstResult r1, r2, rc;
    CHECK(est_plan_depth(&m, 4, 1, &p1) == 0 && est_plan_depth(&m, 4, 2, &p2) == 0);
    CHECK_EQ_INT(p1.dispatches, 16 * 12);
    CHECK_EQ_INT(p2.dispatches, 3);
    est_project(&c, &p1, &s, &r1);
    est_project(&c, &p2, &s, &r2);
    CHECK(r1.decode_ms > 10 * r2.decode_ms);
    s.path = EST_COREML;
    est_project(&c, &p2, &s, &rc);
    CHECK(fabs(rc.decode.fixed_ms - 3 * r2.decode.fixed_ms) < 1e-9);
    CHECK(r2.prefill.positions == 128);
    EstForward f;
    est_forward(&c, &p2, 17, 17, EST_DIRECT, &f);
    CHECK_EQ_INT(f.positions, 32); /* padded to a multiple of 16 */
    c.max_program_bytes = 1e6;
    est_project(&c, &p2, &s, &r2);
    CHECK(r2.over_max_program);
    CHECK(est_plan_depth(&m, 0, 2, &p1) == -1 && est_plan_depth(&m, 13, 2, &p1) == -1 &&
          est_plan_depth(&m, 4, 3, &p1) == -1);
}

int main(void) {
    RUN(fit_clean_line);
    RUN(fit_negative_intercept);
    RUN(fit_cache_cliff);
    RUN(fit_noise_is_not_a_bend);
    RUN(fit_poor);
    RUN(fit_degenerate);
    RUN(chip_file);
    RUN(chip_bad);
    RUN(validation_orion_gpt2);
    RUN(projection_shapes);
    TEST_MAIN_END();
}
