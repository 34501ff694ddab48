/* test_rt_loader.c — the artifact is untrusted input: file and cache forms
 * round-trip; every truncation is rejected; flipping any byte either fails
 * to load or loads and runs cleanly (ASan/UBSan builds watch for the rest),
 * and with checksums on every flip outside padding is caught; hand-made bad
 * indices, offsets and overlaps give their exact messages. */
#include <math.h>
#include <unistd.h>
#ifndef XXH_INLINE_ALL /* the cross build defines it for every target */
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "rt_test_util.h"
#include "test.h"

static int g_out_buf, g_nbuf;

/* A small mode-0 plan touching the ops with the richest parameters. */
static RtArtifact *build_small(void) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BOTH);
    int x = rtb_input(b, "x", RT_F16, 4, (const int64_t[]){1, 8, 1, 4});
    int idx = rtb_input(b, "idx", RT_I32, 1, (const int64_t[]){3});
    uint16_t w[16 * 8], bias[16];
    for (int i = 0; i < 128; i++) w[i] = float_to_half(rng_f());
    for (int i = 0; i < 16; i++) bias[i] = float_to_half(rng_f());
    int W = rtb_weight(b, "W", RT_F16, 2, (const int64_t[]){16, 8}, w);
    int B = rtb_weight(b, "b", RT_F16, 1, (const int64_t[]){16}, bias);
    int out = rtb_temp(b, RT_F32, 3, (const int64_t[]){1, 2, 4});
    for (int p = 0; p < 2; p++) {
        rtb_program(b, (RtProgram)p);
        int y = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 16, 1, 4});
        int hd = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, 4, 8});
        int at = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, 4, 8});
        int sm = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, 4, 8});
        int ga = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 2, 4, 3});
        RtGemmParams gp = {.layout = RT_GEMM_CHANNELS, .act = RT_ACT_GELU_EXACT, .has_bias = 1};
        rtb_op(b, RT_OP_GEMM, (const int[]){x, W, B}, 3, &y, 1, &gp, sizeof gp);
        RtCopyParams cp = {.rank = 4, .dims = {1, 2, 4, 8}, .src_stride = {0, 32, 1, 4}, .dst_stride = {0, 32, 8, 1}};
        rtb_op(b, RT_OP_COPY, &y, 1, &hd, 1, &cp, sizeof cp);
        int src = hd;
        if (p == 0) {
            RtAttnParams ap = {.scale = 0.3f, .causal = 1};
            rtb_op(b, RT_OP_ATTENTION, (const int[]){hd, hd, hd}, 3, &at, 1, &ap, sizeof ap);
            src = at;
        }
        RtAxisParams ax = {3};
        rtb_op(b, RT_OP_SOFTMAX, &src, 1, &sm, 1, &ax, sizeof ax);
        rtb_op(b, RT_OP_GATHER, (const int[]){sm, idx}, 2, &ga, 1, &ax, sizeof ax);
        RtReduceParams rp = {RT_RED_SUM, 1u << 3};
        rtb_op(b, RT_OP_REDUCE, &ga, 1, &out, 1, &rp, sizeof rp);
    }
    rtb_output(b, "y", out, RT_F32);
    RtArtifact *a = NULL;
    char err[200];
    if (rtb_finish(b, "program(1.3)", 12, &a, err, sizeof err)) fprintf(stderr, "build: %s\n", err);
    g_out_buf = out;
    rtb_free(b);
    (void)g_nbuf;
    return a;
}

/* Binds inputs the way the model describes them (so a flipped dtype or shape
 * is honoured, not fought), runs, returns rt_run's code. */
static int run_any(RtModel *m, int flags) {
    RtTensor in[4], out[4];
    void *mem[8] = {0};
    int ni = rt_model_ninputs(m), no = rt_model_noutputs(m), k = 0;
    if (ni > 4 || no > 4) return -100;
    for (int i = 0; i < ni + no; i++) {
        RtIoInfo io;
        if (i < ni)
            rt_model_input(m, i, &io);
        else
            rt_model_output(m, i - ni, &io);
        RtTensor *t = i < ni ? &in[i] : &out[i - ni];
        t->dtype = io.dtype;
        t->rank = io.rank;
        memcpy(t->dims, io.dims, sizeof t->dims);
        t->size = (size_t)numel_of(io.rank, io.dims) * rt_dtype_size(io.dtype);
        if (t->size > (64u << 20)) return -100;
        t->data = mem[k++] = calloc(1, t->size ? t->size : 1);
        if (i < ni && io.dtype == RT_I32)
            for (size_t j = 0; j < t->size / 4; j++) ((int32_t *)t->data)[j] = (int32_t)(j % 3);
    }
    int rc = rt_run(m, in, ni, out, no, flags, NULL);
    for (int i = 0; i < k; i++) free(mem[i]);
    return rc;
}

static unsigned char *file_form(RtArtifact *a, size_t *len) {
    *len = rt_artifact_file_size(a);
    /* 64-aligned like a mapping, so the weights' 16-byte rule holds */
    unsigned char *buf = aligned_alloc(64, (*len + 63) & ~(size_t)63);
    CHECK_EQ_INT(rt_artifact_write_mem(a, buf, *len, NULL, 0), RT_OK);
    return buf;
}

TEST(roundtrip) {
    RtArtifact *a = build_small();
    CHECK(a != NULL);
    if (!a) return;
    size_t len;
    unsigned char *buf = file_form(a, &len);
    RtSection secs[32];
    int n;
    char err[200];
    CHECK_EQ_INT(rt_artifact_split(buf, len, secs, 32, &n, err, sizeof err), RT_OK);
    const RtSection *cs;
    int cn;
    rt_artifact_sections(a, &cs, &cn);
    CHECK_EQ_INT(n, cn);
    for (int i = 0; i < n && i < cn; i++)
        CHECK(secs[i].size == cs[i].size && memcmp(secs[i].data, cs[i].data, cs[i].size) == 0);
    CHECK_EQ_INT(rt_artifact_verify(secs, n, err, sizeof err), RT_OK);
    RtArtifactInfo info;
    CHECK_EQ_INT(rt_artifact_info(&secs[0], &info, err, sizeof err), RT_OK);
    CHECK_EQ_INT(info.mode, 0);
    CHECK_EQ_INT(info.format_version, RT_FORMAT_VERSION);
    CHECK_STR(info.milc_version, MILC_VERSION);
    /* the source MIL is kept verbatim */
    int found = 0;
    for (int i = 1; i < n; i++)
        if (secs[i].kind == RT_SEC_SOURCE) found = secs[i].size == 12 && memcmp(secs[i].data, "program(1.3)", 12) == 0;
    CHECK(found);

    /* MILC_RT_WRITE_SEED=FILE saves this artifact: a fuzzing seed. */
    if (getenv("MILC_RT_WRITE_SEED"))
        CHECK_EQ_INT(rt_artifact_write_file(a, getenv("MILC_RT_WRITE_SEED"), err, sizeof err), RT_OK);
    /* file on disk, atomically written */
    char path[] = "/tmp/milc_rt_test_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK_EQ_INT(rt_artifact_write_file(a, path, err, sizeof err), RT_OK);
    FILE *f = fopen(path, "rb");
    unsigned char *fb = aligned_alloc(64, (len + 63) & ~(size_t)63);
    CHECK(f && fread(fb, 1, len, f) == len && fgetc(f) == EOF);
    if (f) fclose(f);
    unlink(path);
    CHECK(memcmp(fb, buf, len) == 0);
    CHECK_EQ_INT(rt_artifact_write_file(a, "/nonexistent-dir/x.milc", err, sizeof err), RT_EIO);

    /* both programs agree; bind errors are reported, not crashed on */
    RtModel *m;
    RtLoadOptions lo = {.nthreads = 2, .flags = RT_LOAD_VERIFY};
    CHECK_EQ_INT(rt_model_load(&m, secs, n, &lo, err, sizeof err), RT_OK);
    uint16_t x[32];
    for (int i = 0; i < 32; i++) x[i] = float_to_half(rng_f());
    int32_t idx[3] = {0, 7, -1};
    float y0[8], y1[8];
    RtTensor in[2] = {{RT_F16, 4, {1, 8, 1, 4}, x, sizeof x}, {RT_I32, 1, {3}, idx, sizeof idx}};
    RtTensor out = {RT_F32, 3, {1, 2, 4}, y0, sizeof y0};
    RtRunStats st;
    CHECK_EQ_INT(rt_run(m, in, 2, &out, 1, 0, &st), RT_OK);
    CHECK_EQ_INT(st.dispatches, 1);
    out.data = y1;
    CHECK_EQ_INT(rt_run(m, in, 2, &out, 1, RT_RUN_NONBONDED, &st), RT_OK);
    CHECK_EQ_INT(st.dispatches, 5);
    for (int i = 0; i < 8; i++) CHECK(y0[i] > 0 && y0[i] < 1 && y1[i] > 0 && y1[i] < 1);
    /* idle long enough for the workers to sleep on the futex, then wake them */
    usleep(3000);
    float y2[8];
    out.data = y2;
    CHECK_EQ_INT(rt_run(m, in, 2, &out, 1, 0, NULL), RT_OK);
    CHECK(memcmp(y0, y2, sizeof y0) == 0);
    out.data = y1;
    in[0].dims[3] = 5;
    CHECK_EQ_INT(rt_run(m, in, 2, &out, 1, 0, NULL), RT_EBIND);
    in[0].dims[3] = 4;
    out.size = 4;
    CHECK_EQ_INT(rt_run(m, in, 2, &out, 1, 0, NULL), RT_EBIND);
    out.size = sizeof y0;
    in[1].dtype = RT_F32;
    CHECK_EQ_INT(rt_run(m, in, 2, &out, 1, 0, NULL), RT_EBIND);
    CHECK_EQ_INT(rt_run(m, in, 1, &out, 1, 0, NULL), RT_EBIND);
    RtIoInfo io;
    CHECK_EQ_INT(rt_model_input(m, 1, &io), RT_OK);
    CHECK_STR(io.name, "idx");
    CHECK_EQ_INT(rt_model_input(m, 2, &io), RT_EINVAL);
    CHECK_EQ_INT(rt_model_find(m, "idx", 0), 1);
    CHECK_EQ_INT(rt_model_find(m, "y", 1), 0);
    CHECK_EQ_INT(rt_model_find(m, "y", 0), RT_EINVAL);
    rt_model_free(m);

    /* a misaligned weight is refused (LMDB promises 16 bytes, nothing more) */
    unsigned char *shifted = malloc(len + 64);
    memcpy(shifted + 8, buf, len);
    RtSection s2[32];
    CHECK_EQ_INT(rt_artifact_split(shifted + 8, len, s2, 32, &n, err, sizeof err), RT_OK);
    CHECK_EQ_INT(rt_model_load(&m, s2, n, NULL, err, sizeof err), RT_EFORMAT);
    CHECK(strstr(err, "is not 16-byte aligned") != NULL);
    free(shifted);
    free(fb);
    free(buf);
    rt_artifact_free(a);
}

TEST(truncated) {
    RtArtifact *a = build_small();
    size_t len;
    unsigned char *buf = file_form(a, &len);
    RtSection secs[32];
    int n, bad = 0;
    for (size_t l = 0; l < len; l++) {
        unsigned char *t = malloc(l ? l : 1); /* exact size: ASan sees any overread */
        memcpy(t, buf, l);
        if (rt_artifact_split(t, l, secs, 32, &n, NULL, 0) == RT_OK) bad++;
        free(t);
    }
    CHECK_EQ_INT(bad, 0);
    /* a cache-form section list missing its last section */
    const RtSection *cs;
    int cn;
    char err[200];
    rt_artifact_sections(a, &cs, &cn);
    RtModel *m;
    CHECK_EQ_INT(rt_model_load(&m, cs, cn - 1, NULL, err, sizeof err), RT_EFORMAT);
    char want[64];
    snprintf(want, sizeof want, "%d sections given, the manifest lists %d", cn - 2, cn - 1);
    CHECK_STR(err, want);
    free(buf);
    rt_artifact_free(a);
}

TEST(every_byte_flipped) {
    RtArtifact *a = build_small();
    size_t len;
    unsigned char *buf = file_form(a, &len);
    RtSection secs[32];
    int n;
    CHECK_EQ_INT(rt_artifact_split(buf, len, secs, 32, &n, NULL, 0), RT_OK);
    /* bytes covered by a checksum: the manifest and every section */
    unsigned char *covered = calloc(len, 1);
    for (int i = 0; i < n; i++) memset(covered + ((const unsigned char *)secs[i].data - buf), 1, secs[i].size);
    unsigned char *t = aligned_alloc(64, (len + 63) & ~(size_t)63);
    int loaded = 0, ran = 0, verify_missed = 0;
    RtLoadOptions lo = {.nthreads = 1, .max_arena = 1 << 24};
    RtLoadOptions lov = {.nthreads = 1, .flags = RT_LOAD_VERIFY};
    for (size_t i = 0; i < len; i++) {
        for (int pass = 0; pass < 2; pass++) {
            memcpy(t, buf, len);
            t[i] ^= pass ? 0x01 : 0xFF;
            RtSection s[32];
            int sn;
            RtModel *m = NULL;
            if (rt_artifact_split(t, len, s, 32, &sn, NULL, 0)) continue;
            if (rt_model_load(&m, s, sn, &lo, NULL, 0) == RT_OK) {
                loaded++;
                ran += run_any(m, 0) == RT_OK;
                if (rt_model_mode(m) == 0) run_any(m, RT_RUN_NONBONDED);
                rt_model_free(m);
            }
            if (rt_model_load(&m, s, sn, &lov, NULL, 0) == RT_OK) {
                verify_missed += covered[i];
                rt_model_free(m);
            }
        }
    }
    fprintf(stderr, "every_byte_flipped: %zu bytes x 2 flips: %d loaded without checksums, %d ran\n", len, loaded, ran);
    CHECK_EQ_INT(verify_missed, 0);
    CHECK(loaded > 0); /* flips in weights and floats are legal artifacts */
    free(covered);
    free(t);
    free(buf);
    rt_artifact_free(a);
}

/* Corrupts one plan field in a cache-form copy and checks the message. */
static void expect_plan_error(RtArtifact *a, size_t off, const void *val, size_t vlen, const char *msg_part) {
    const RtSection *cs;
    int cn;
    rt_artifact_sections(a, &cs, &cn);
    RtSection s[32];
    memcpy(s, cs, sizeof(RtSection) * (size_t)cn);
    int pi = -1;
    for (int i = 0; i < cn; i++)
        if (s[i].kind == RT_SEC_PLAN && s[i].id == 0) pi = i;
    unsigned char *copy = malloc(s[pi].size);
    memcpy(copy, s[pi].data, s[pi].size);
    memcpy(copy + off, val, vlen);
    s[pi].data = copy;
    RtModel *m = NULL;
    char err[256] = "";
    int rc = rt_model_load(&m, s, cn, NULL, err, sizeof err);
    CHECK_EQ_INT(rc, RT_EFORMAT);
    if (!strstr(err, msg_part)) fprintf(stderr, "got '%s', want '%s'\n", err, msg_part);
    CHECK(strstr(err, msg_part) != NULL);
    /* and the checksum catches it too */
    CHECK_EQ_INT(rt_artifact_verify(s, cn, err, sizeof err), RT_ECHECKSUM);
    if (m) rt_model_free(m);
    free(copy);
}

TEST(targeted_corruption) {
    RtArtifact *a = build_small();
    const RtSection *cs;
    int cn;
    rt_artifact_sections(a, &cs, &cn);
    uint32_t nbuf;
    memcpy(&nbuf, cs[1].data, 4); /* meta head */
    size_t ops = 16 + (size_t)nbuf * 8, rec = 272;
    int32_t big = 999, neg = -1;
    uint32_t kind = 77, plen = 3;
    expect_plan_error(a, ops + 16, &big, 4, "plan 0 op 0: gemm: input 0: buffer 999 out of range");
    expect_plan_error(a, ops + 1 * rec + 40, &neg, 4, "plan 0 op 1: copy: output 0: buffer -1 out of range");
    expect_plan_error(a, ops, &kind, 4, "plan 0 op 0: op kind 77 unknown");
    expect_plan_error(a, ops + 12, &plen, 4, "plan 0 op 0: gemm: params are 3 bytes, want 16");
    /* copy's source walk made to leave its input */
    int64_t stride = 1000;
    expect_plan_error(a, ops + 1 * rec + 56 + 8 + 64 + 8 + 8, &stride, 8, "copy: source walk leaves x");
    /* attention made non-causal-compatible: L > S is not the point; scale NaN is */
    float nan = NAN;
    expect_plan_error(a, ops + 2 * rec + 56, &nan, 4, "attention: scale must be finite");
    /* arena: an offset past the end, then two live buffers on the same bytes */
    uint64_t arena;
    memcpy(&arena, (const char *)cs[2].data + 8, 8);
    uint64_t past = arena + 64;
    uint32_t xbuf = 0; /* input x: live from the start */
    expect_plan_error(a, 16 + xbuf * 8, &past, 8, "outside the");
    uint64_t off_out; /* buffer 5: the gemm's output, live while x is read */
    memcpy(&off_out, (const char *)cs[2].data + 16 + 5 * 8, 8);
    expect_plan_error(a, 16 + xbuf * 8, &off_out, 8, "share arena bytes while both live");
    uint64_t odd = 8;
    expect_plan_error(a, 16 + xbuf * 8, &odd, 8, "arena offset 8");
    uint64_t huge = UINT64_C(1) << 39;
    expect_plan_error(a, 8, &huge, 8, "exceeds its buffers");
    rt_artifact_free(a);
}

/* y = x·Wᵀ, x [m, k] fp32, W [k, k] fp16, through a temp: an arena of
 * m·k floats, bigger than build_small's. */
static RtArtifact *build_gemm(int64_t m, int64_t k) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int x = rtb_input(b, "x", RT_F32, 2, (const int64_t[]){m, k});
    uint16_t *w = malloc((size_t)(k * k) * sizeof *w);
    for (int64_t i = 0; i < k * k; i++) w[i] = float_to_half(rng_f() * 0.05f);
    int W = rtb_weight(b, "W", RT_F16, 2, (const int64_t[]){k, k}, w);
    free(w);
    int t = rtb_temp(b, RT_F32, 2, (const int64_t[]){m, k}), y = rtb_temp(b, RT_F32, 2, (const int64_t[]){m, k});
    RtGemmParams gp = {.layout = RT_GEMM_ROWS, .act = RT_ACT_GELU_EXACT};
    rtb_op(b, RT_OP_GEMM, (const int[]){x, W}, 2, &t, 1, &gp, sizeof gp);
    gp.act = 0;
    rtb_op(b, RT_OP_GEMM, (const int[]){t, W}, 2, &y, 1, &gp, sizeof gp);
    rtb_output(b, "y", y, RT_F32);
    RtArtifact *a = NULL;
    char err[200];
    if (rtb_finish(b, "program(1.3)", 12, &a, err, sizeof err)) fprintf(stderr, "build: %s\n", err);
    rtb_free(b);
    return a;
}

/* Runs m on fixed inputs; y (8 floats) gets the output. */
static int run_fixed(RtModel *m, float *y) {
    uint16_t x[32];
    int32_t idx[3] = {2, 0, 1};
    for (int i = 0; i < 32; i++) x[i] = float_to_half((float)(i % 7) * 0.25f - 0.7f);
    RtTensor in[2] = {{RT_F16, 4, {1, 8, 1, 4}, x, sizeof x}, {RT_I32, 1, {3}, idx, sizeof idx}};
    RtTensor out = {RT_F32, 3, {1, 2, 4}, y, 8 * sizeof *y};
    return rt_run(m, in, 2, &out, 1, 0, NULL);
}

/* Models loaded on one pool (the chunks of a chain) run in turn with the
 * results of models with pools of their own, and the pool outlives any one
 * of them. */
/* Rewrites the checksums of a cache-form copy, as anyone can: they are not
 * keyed, so they catch damage, never intent. */
static void reseal(RtSection *s, int n, unsigned char *manifest) {
    for (int i = 1; i < n; i++) {
        uint64_t h = XXH3_64bits(s[i].data, s[i].size);
        memcpy(manifest + 64 + 32 * (size_t)(i - 1) + 24, &h, 8);
    }
    memset(manifest + 24, 0, 8);
    uint64_t h = XXH3_64bits(manifest, s[0].size);
    memcpy(manifest + 24, &h, 8);
}

/* Output names become file names (`milc run -o DIR` writes DIR/NAME.npy):
 * a resealed artifact naming its output "../../x" must not load. */
TEST(io_names_are_identifiers) {
    RtArtifact *a = build_small();
    const RtSection *cs;
    int cn;
    rt_artifact_sections(a, &cs, &cn);
    static const char *const bad[] = {"../../x", "a/b", "..", "x\x1b[2J", "/etc/passwd", "9lives"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        RtSection s[32];
        memcpy(s, cs, sizeof(RtSection) * (size_t)cn);
        unsigned char *man = malloc(s[0].size), *meta = NULL;
        memcpy(man, s[0].data, s[0].size);
        s[0].data = man;
        for (int i = 1; i < cn; i++)
            if (s[i].kind == RT_SEC_META) {
                meta = malloc(s[i].size);
                memcpy(meta, s[i].data, s[i].size);
                s[i].data = meta;
            }
        uint32_t head[4];
        memcpy(head, meta, sizeof head);
        size_t out_rec = 16 + (size_t)head[0] * 64 + (size_t)head[1] * 72;
        memset(meta + out_rec + 8, 0, RT_NAME_MAX);
        memcpy(meta + out_rec + 8, bad[k], strlen(bad[k]));
        reseal(s, cn, man);
        char err[256] = "";
        CHECK_EQ_INT(rt_artifact_verify(s, cn, err, sizeof err), RT_OK); /* the checksums pass */
        RtModel *m = NULL;
        CHECK_EQ_INT(
            rt_model_load(&m, s, cn, &(RtLoadOptions){.nthreads = 1, .flags = RT_LOAD_VERIFY}, err, sizeof err),
            RT_EFORMAT);
        if (!strstr(err, "output 0: name")) fprintf(stderr, "%s: got '%s'\n", bad[k], err);
        CHECK(strstr(err, "output 0: name") && strstr(err, "is not an identifier"));
        CHECK(!strchr(err, 0x1b)); /* shown escaped */
        CHECK(!rt_name_ok(bad[k]));
        if (m) rt_model_free(m);
        free(man);
        free(meta);
    }
    CHECK(rt_name_ok("y") && rt_name_ok("_x9") && !rt_name_ok(""));
    char longname[RT_NAME_MAX + 1];
    memset(longname, 'a', RT_NAME_MAX);
    longname[RT_NAME_MAX] = 0;
    CHECK(!rt_name_ok(longname));
    longname[RT_NAME_MAX - 1] = 0;
    CHECK(rt_name_ok(longname));
    /* the builder refuses them too */
    RtPlanBuilder *b = rtb_new(RT_MODE_BOTH);
    int x = rtb_input(b, "x", RT_F32, 1, (const int64_t[]){4});
    CHECK_EQ_INT(rtb_output(b, "../y", x, RT_F32), RT_EINVAL);
    rtb_free(b);
    rt_artifact_free(a);
}

TEST(models_share_a_pool) {
    RtArtifact *a = build_small();
    CHECK(a != NULL);
    if (!a) return;
    const RtSection *secs;
    int n;
    rt_artifact_sections(a, &secs, &n);
    char err[200];
    RtModel *own = NULL, *m1 = NULL, *m2 = NULL;
    RtPool *pool = NULL;
    CHECK_EQ_INT(rt_pool_new(&pool, 2), RT_OK);
    CHECK_EQ_INT(rt_model_load(&own, secs, n, &(RtLoadOptions){.nthreads = 2}, err, sizeof err), RT_OK);
    CHECK_EQ_INT(rt_model_load(&m1, secs, n, &(RtLoadOptions){.pool = pool}, err, sizeof err), RT_OK);
    CHECK_EQ_INT(rt_model_load(&m2, secs, n, &(RtLoadOptions){.nthreads = 7, .pool = pool}, err, sizeof err), RT_OK);
    float want[8], y1[8], y2[8];
    CHECK_EQ_INT(run_fixed(own, want), RT_OK);
    for (int r = 0; r < 3; r++) {
        CHECK_EQ_INT(run_fixed(m1, y1), RT_OK);
        CHECK_EQ_INT(run_fixed(m2, y2), RT_OK);
        for (int i = 0; i < 8; i++) CHECK(fabsf(y1[i] - want[i]) <= 1e-6f && fabsf(y2[i] - want[i]) <= 1e-6f);
    }
    /* A model with a bigger arena grows the chain's memory: the ones loaded
     * before rebind to it, and everything still computes the same. */
    RtArtifact *big = build_gemm(64, 256);
    CHECK(big != NULL);
    if (big) {
        const RtSection *bs;
        int bn;
        rt_artifact_sections(big, &bs, &bn);
        RtModel *mb = NULL, *mb_own = NULL;
        CHECK_EQ_INT(rt_model_load(&mb, bs, bn, &(RtLoadOptions){.pool = pool}, err, sizeof err), RT_OK);
        CHECK_EQ_INT(rt_model_load(&mb_own, bs, bn, &(RtLoadOptions){.nthreads = 2}, err, sizeof err), RT_OK);
        float *x = malloc(64 * 256 * sizeof *x), *g1 = malloc(64 * 256 * sizeof *g1),
              *g2 = malloc(64 * 256 * sizeof *g2);
        for (int i = 0; i < 64 * 256; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
        RtTensor in = {RT_F32, 2, {64, 256}, x, 64 * 256 * sizeof *x};
        RtTensor o1 = {RT_F32, 2, {64, 256}, g1, 64 * 256 * sizeof *g1},
                 o2 = {RT_F32, 2, {64, 256}, g2, 64 * 256 * sizeof *g2};
        for (int r = 0; r < 2; r++) {
            CHECK_EQ_INT(run_fixed(m2, y2), RT_OK);
            for (int i = 0; i < 8; i++) CHECK(fabsf(y2[i] - want[i]) <= 1e-6f);
            CHECK_EQ_INT(rt_run(mb, &in, 1, &o1, 1, 0, NULL), RT_OK);
        }
        CHECK_EQ_INT(rt_run(mb_own, &in, 1, &o2, 1, 0, NULL), RT_OK);
        CHECK(memcmp(g1, g2, 64 * 256 * sizeof *g1) == 0);
        free(x), free(g1), free(g2);
        rt_model_free(mb);
        rt_model_free(mb_own);
        rt_artifact_free(big);
    }
    rt_model_free(m1);
    CHECK_EQ_INT(run_fixed(m2, y2), RT_OK);
    for (int i = 0; i < 8; i++) CHECK(fabsf(y2[i] - want[i]) <= 1e-6f);
    rt_model_free(m2);
    rt_model_free(own);
    rt_pool_free(pool);
    rt_artifact_free(a);
}

/* The plan b with its temp out as the output "old", built (NULL, said, on
 * failure). */
static RtArtifact *finish_old(RtPlanBuilder *b, int out) {
    rtb_output(b, "old", out, RT_F32);
    RtArtifact *a = NULL;
    char err[200];
    if (rtb_finish(b, "", 0, &a, err, sizeof err)) fprintf(stderr, "build: %s\n", err);
    rtb_free(b);
    return a;
}

/* States: an fp16 state s [6] read (widened), added to x, written back with
 * an UPDATE at a run-time begin; its old value is the output.  Kept from run
 * to run, set and read by name, checked by shape and dtype; a box outside
 * the state writes nothing; hostile state records are refused. */
static RtArtifact *build_state(void) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BOTH);
    int s = rtb_state(b, "s", RT_F16, 1, (const int64_t[]){6});
    int x = rtb_input(b, "x", RT_F32, 1, (const int64_t[]){2});
    int at = rtb_input(b, "at", RT_I32, 1, (const int64_t[]){1});
    int out = rtb_temp(b, RT_F32, 1, (const int64_t[]){6});
    for (int p = 0; p < 2; p++) {
        rtb_program(b, (RtProgram)p);
        int part = rtb_temp(b, RT_F32, 1, (const int64_t[]){2}), sum = rtb_temp(b, RT_F32, 1, (const int64_t[]){2});
        int end = rtb_temp(b, RT_I32, 1, (const int64_t[]){1});
        RtCopyParams cp = {.rank = 1, .dims = {6}, .src_stride = {1}, .dst_stride = {1}};
        rtb_op(b, RT_OP_COPY, &s, 1, &out, 1, &cp, sizeof cp); /* the old value, before the write */
        RtCopyParams c2 = {.rank = 1, .dims = {2}, .src_stride = {1}, .dst_stride = {1}};
        rtb_op(b, RT_OP_COPY, &s, 1, &part, 1, &c2, sizeof c2);
        RtBinaryParams bp = {RT_BIN_ADD};
        rtb_op(b, RT_OP_BINARY, (const int[]){part, x}, 2, &sum, 1, &bp, sizeof bp);
        int two = rtb_weight(b, "two", RT_I32, 1, (const int64_t[]){1}, (const int32_t[]){2});
        rtb_op(b, RT_OP_BINARY, (const int[]){at, two}, 2, &end, 1, &bp, sizeof bp);
        RtUpdateParams up = {0};
        rtb_op(b, RT_OP_UPDATE, (const int[]){sum, at, end}, 3, &s, 1, &up, sizeof up);
    }
    return finish_old(b, out);
}

/* UPDATE into a rank-4 fp16 state [1, 6, 1, 9], a decode's [1, dim, 1,
 * ctx]: x [1, c, 1, w] (fp32, rounded to fp16 on the way) at a run-time
 * begin, one row of w per channel; the threads cut the rows anywhere, so a
 * part starts mid-way through the channels.  The old state is the output. */
static RtArtifact *build_update4(int64_t c, int64_t w) {
    RtPlanBuilder *b = rtb_new(RT_MODE_BOTH);
    int s = rtb_state(b, "s", RT_F16, 4, (const int64_t[]){1, 6, 1, 9});
    int x = rtb_input(b, "x", RT_F32, 4, (const int64_t[]){1, c, 1, w});
    int at = rtb_input(b, "at", RT_I32, 1, (const int64_t[]){4});
    int end = rtb_input(b, "end", RT_I32, 1, (const int64_t[]){4});
    int out = rtb_temp(b, RT_F32, 4, (const int64_t[]){1, 6, 1, 9});
    for (int p = 0; p < 2; p++) {
        rtb_program(b, (RtProgram)p);
        RtCopyParams cp = {.rank = 1, .dims = {54}, .src_stride = {1}, .dst_stride = {1}};
        rtb_op(b, RT_OP_COPY, &s, 1, &out, 1, &cp, sizeof cp);
        RtUpdateParams up = {0};
        rtb_op(b, RT_OP_UPDATE, (const int[]){x, at, end}, 3, &s, 1, &up, sizeof up);
    }
    return finish_old(b, out);
}

TEST(state_update_rank4) {
    static const int64_t shapes[][2] = {{6, 1}, {3, 2}, {5, 4}};
    for (int k = 0; k < 3; k++) {
        int64_t c = shapes[k][0], w = shapes[k][1];
        RtArtifact *a = build_update4(c, w);
        CHECK(a != NULL);
        if (!a) return;
        const RtSection *cs;
        int cn;
        rt_artifact_sections(a, &cs, &cn);
        for (int nth = 1; nth <= 4; nth++) {
            char err[256] = "";
            RtModel *m = NULL;
            CHECK_EQ_INT(rt_model_load(&m, cs, cn, &(RtLoadOptions){.nthreads = nth}, err, sizeof err), RT_OK);
            if (!m) break;
            float want[54] = {0}, x[24], old[54];
            for (int r = 0; r < 3; r++) { /* each run at its own place, on what the last left */
                int32_t at[4] = {0, (int32_t)((6 - c) * (r % 2)), 0, (int32_t)(r * 2 + (9 - w) / 3)};
                int32_t end[4] = {1, at[1] + (int32_t)c, 1, at[3] + (int32_t)w};
                for (int i = 0; i < c * w; i++) x[i] = (float)(r * 100 + i) + 0.25f;
                RtTensor in[3] = {
                    {.dtype = RT_F32, .rank = 4, .dims = {1, c, 1, w}, .data = x, .size = (size_t)(c * w) * 4},
                    {.dtype = RT_I32, .rank = 1, .dims = {4}, .data = at, .size = sizeof at},
                    {.dtype = RT_I32, .rank = 1, .dims = {4}, .data = end, .size = sizeof end}};
                RtTensor o = {.dtype = RT_F32, .rank = 4, .dims = {1, 6, 1, 9}, .data = old, .size = sizeof old};
                CHECK_EQ_INT(rt_run(m, in, 3, &o, 1, 0, NULL), RT_OK);
                for (int i = 0; i < 54; i++) CHECK(old[i] == want[i]);
                for (int ch = 0; ch < c; ch++) /* fp16-exact values */
                    for (int j = 0; j < w; j++) want[(at[1] + ch) * 9 + at[3] + j] = x[ch * w + j];
            }
            uint16_t h[54];
            RtTensor st = {.dtype = RT_F16, .rank = 4, .dims = {1, 6, 1, 9}, .data = h, .size = sizeof h};
            CHECK_EQ_INT(rt_model_state_get(m, 0, &st), RT_OK);
            for (int i = 0; i < 54; i++) CHECK(half_to_float(h[i]) == want[i]);
            rt_model_free(m);
        }
        rt_artifact_free(a);
    }
}

static int run_state(RtModel *m, float x0, float x1, int32_t at, float *old, int flags) {
    float x[2] = {x0, x1};
    RtTensor in[2] = {{.dtype = RT_F32, .rank = 1, .dims = {2}, .data = x, .size = sizeof x},
                      {.dtype = RT_I32, .rank = 1, .dims = {1}, .data = &at, .size = sizeof at}};
    RtTensor out = {.dtype = RT_F32, .rank = 1, .dims = {6}, .data = old, .size = 6 * sizeof(float)};
    return rt_run(m, in, 2, &out, 1, flags, NULL);
}

TEST(states) {
    RtArtifact *a = build_state();
    CHECK(a != NULL);
    if (!a) return;
    const RtSection *cs;
    int cn;
    rt_artifact_sections(a, &cs, &cn);
    char err[256] = "";
    for (int flags = 0; flags <= RT_RUN_NONBONDED; flags++) {
        RtModel *m = NULL;
        CHECK_EQ_INT(rt_model_load(&m, cs, cn, &(RtLoadOptions){.nthreads = 2}, err, sizeof err), RT_OK);
        if (!m) return;
        RtIoInfo si;
        CHECK(rt_model_nstates(m) == 1 && rt_model_state(m, 0, &si) == RT_OK && !strcmp(si.name, "s") &&
              si.dtype == RT_F16);
        CHECK_EQ_INT(rt_model_find_state(m, "s"), 0);
        CHECK_EQ_INT(rt_model_find_state(m, "x"), RT_EINVAL);
        uint16_t h[6];
        float old[6], want[6] = {0};
        RtTensor st = {.dtype = RT_F16, .rank = 1, .dims = {6}, .data = h, .size = sizeof h};
        CHECK_EQ_INT(rt_model_state_get(m, 0, &st), RT_OK);
        for (int i = 0; i < 6; i++) CHECK(h[i] == 0); /* zero at load */
        /* three runs: each reads what the one before left */
        const int32_t ats[3] = {0, 4, 1};
        for (int r = 0; r < 3; r++) {
            CHECK_EQ_INT(run_state(m, 1.5f + (float)r, -2.0f, ats[r], old, flags), RT_OK);
            for (int i = 0; i < 6; i++) CHECK(old[i] == want[i]);
            /* the new box: the state's first two, plus x, at ats[r] (fp16 exact here) */
            float first[2] = {want[0], want[1]};
            want[ats[r]] = first[0] + 1.5f + (float)r, want[ats[r] + 1] = first[1] - 2.0f;
        }
        CHECK_EQ_INT(rt_model_state_get(m, 0, &st), RT_OK);
        for (int i = 0; i < 6; i++) CHECK(half_to_float(h[i]) == want[i]);
        /* a box past the end: RT_EINDEX, nothing written; -3 (end -1): from the end */
        CHECK_EQ_INT(run_state(m, 9, 9, 5, old, flags), RT_EINDEX);
        CHECK_EQ_INT(run_state(m, 9, 9, -7, old, flags), RT_EINDEX);
        CHECK_EQ_INT(rt_model_state_get(m, 0, &st), RT_OK);
        for (int i = 0; i < 6; i++) CHECK(half_to_float(h[i]) == want[i]);
        CHECK_EQ_INT(run_state(m, 0, 0, -3, old, flags), RT_OK);
        want[3] = want[0], want[4] = want[1];
        /* seeds: the state's own dtype and shape only */
        for (int i = 0; i < 6; i++) h[i] = float_to_half((float)i);
        CHECK_EQ_INT(rt_model_state_set(m, 0, &st), RT_OK);
        CHECK_EQ_INT(run_state(m, 0, 0, 0, old, flags), RT_OK);
        for (int i = 0; i < 6; i++) CHECK(old[i] == (float)i);
        float f[6] = {0};
        RtTensor bad = {.dtype = RT_F32, .rank = 1, .dims = {6}, .data = f, .size = sizeof f};
        CHECK_EQ_INT(rt_model_state_set(m, 0, &bad), RT_EBIND);
        bad = (RtTensor){.dtype = RT_F16, .rank = 1, .dims = {5}, .data = h, .size = sizeof h};
        CHECK_EQ_INT(rt_model_state_set(m, 0, &bad), RT_EBIND);
        bad = (RtTensor){.dtype = RT_F16, .rank = 1, .dims = {6}, .data = h, .size = 4};
        CHECK_EQ_INT(rt_model_state_get(m, 0, &bad), RT_EBIND);
        CHECK_EQ_INT(rt_model_state_set(m, 1, &st), RT_EINVAL);
        rt_model_state_reset(m);
        CHECK_EQ_INT(rt_model_state_get(m, 0, &st), RT_OK);
        for (int i = 0; i < 6; i++) CHECK(h[i] == 0);
        rt_model_free(m);
    }
    /* hostile state records (resealed): each refused with its message */
    struct {
        size_t off; /* in the state record, after the outputs' */
        uint32_t val;
        const char *msg;
    } bad[] = {{0, 1, "is not a state"}, {4, RT_F32, "is not its buffer's"}, {0, 99, "is not a state"}};
    for (int k = 0; k < 4; k++) {
        RtSection s[32];
        memcpy(s, cs, sizeof(RtSection) * (size_t)cn);
        unsigned char *man = malloc(s[0].size), *meta = NULL;
        memcpy(man, s[0].data, s[0].size);
        s[0].data = man;
        for (int i = 1; i < cn; i++)
            if (s[i].kind == RT_SEC_META) {
                meta = malloc(s[i].size);
                memcpy(meta, s[i].data, s[i].size);
                s[i].data = meta;
            }
        uint32_t head[4];
        memcpy(head, meta, sizeof head);
        const char *msg;
        if (k < 3) {
            size_t rec = 16 + (size_t)head[0] * 64 + (size_t)(head[1] + head[2]) * 72;
            memcpy(meta + rec + bad[k].off, &bad[k].val, 4);
            msg = bad[k].msg;
        } else { /* a state buffer without its record: the count says none */
            head[3] = 0;
            memcpy(meta, head, sizeof head);
            /* the meta keeps its bytes: its size no longer matches the counts */
            msg = "meta section is";
        }
        reseal(s, cn, man);
        RtModel *m = NULL;
        CHECK_EQ_INT(rt_model_load(&m, s, cn, &(RtLoadOptions){.nthreads = 1}, err, sizeof err), RT_EFORMAT);
        if (!strstr(err, msg)) fprintf(stderr, "state case %d: got '%s'\n", k, err);
        CHECK(strstr(err, msg) != NULL);
        if (m) rt_model_free(m);
        free(man);
        free(meta);
    }
    rt_artifact_free(a);
    /* only an UPDATE writes a state; a state is never an output */
    RtPlanBuilder *b = rtb_new(RT_MODE_BONDED);
    int s = rtb_state(b, "s", RT_F32, 1, (const int64_t[]){2});
    int x = rtb_input(b, "x", RT_F32, 1, (const int64_t[]){2});
    RtCopyParams cp = {.rank = 1, .dims = {2}, .src_stride = {1}, .dst_stride = {1}};
    CHECK(rtb_op(b, RT_OP_COPY, &x, 1, &s, 1, &cp, sizeof cp) < 0 && strstr(rtb_error(b), "not a temp"));
    rtb_free(b);
    b = rtb_new(RT_MODE_BONDED);
    s = rtb_state(b, "s", RT_F32, 1, (const int64_t[]){2});
    CHECK(rtb_output(b, "s", s, RT_F32) < 0 && strstr(rtb_error(b), "a state"));
    rtb_free(b);
}

int main(void) {
    RUN(roundtrip);
    RUN(truncated);
    RUN(every_byte_flipped);
    RUN(targeted_corruption);
    RUN(io_names_are_identifiers);
    RUN(models_share_a_pool);
    RUN(states);
    RUN(state_update_rank4);
    TEST_MAIN_END();
}
