/* bench_backend.c — GPT-2 124M through the whole compiler, as 3 chunks of 4
 * layers, on this machine, in one run (not a test; figures for the report):
 *   - prefill T=128, mode 2: effective GFLOP/s / fp32 FMA peak (same run)
 *   - decode T=1 against a 1024-position KV cache, mode 2: ms/token / (fp16
 *     weight bytes per token / read bandwidth)
 *   - per-dispatch overhead: decode in mode 1 vs mode 2, time = a + b * dispatches
 *   - compile time of the 12 layers (parse -> artifact) next to one prefill
 * Usage: bench_backend [WORKDIR] [threads]   (WORKDIR default /tmp/milc-bench) */
#include <sys/stat.h>

/* The runtime benchmark's FMA-peak and bandwidth probes, reused as they are. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#define main bench_rt_main
#include "../runtime/bench_rt.c"
#undef main
#pragma GCC diagnostic pop

#include "milc/backend.h"
#include "milc/gen.h"
#include "milc/mil.h"

enum { CHUNKS = 3, LAYERS = 4, C = 768, FF = 3072, CTX = 1024 };

static int generate(const char *dir, int first, const char *phase, int seq) {
    const char *dirs[1] = {MILC_TEMPLATE_DIR};
    GenSearchPath sp = {dirs, 1};
    DiagSink d;
    diag_init(&d);
    GenConfig *c = gen_config_open(&sp, "gpt2", &d);
    char f[16], s[16], ctx[16];
    snprintf(f, sizeof f, "%d", first), snprintf(s, sizeof s, "%d", seq), snprintf(ctx, sizeof ctx, "%d", CTX);
    int rc = !c || gen_config_set(c, "layers", "4", &d) || gen_config_set(c, "first_layer", f, &d) ||
             gen_config_set(c, "phase", phase, &d) || gen_config_set(c, "seq", s, &d) ||
             gen_config_set(c, "min_seq", "1", &d) || gen_config_set(c, "ctx", ctx, &d) || gen_config_resolve(c, &d) ||
             gen_emit(c, &(GenOptions){.weights = "random:1", .compile_mode = -1}, dir, &d);
    if (rc) {
        char *m = diag_render(&d);
        fputs(m, stderr);
        free(m);
    }
    gen_config_free(c);
    diag_free(&d);
    return rc ? -1 : 0;
}

typedef struct Chunk {
    RtArtifact *art;
    RtModel *m;
    RtTensor in[16], out[16];
    int nin, nout;
    double compile_ms, parse_ms, check_ms;
    BackendStats st;
    int dispatches;
} Chunk;

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    fclose(f);
    *len = (size_t)n;
    return s;
}

static bool same_ops;

/* Parse -> check -> backend -> artifact (timed), then load and bind random inputs. */
static int chunk_build(Chunk *k, const char *dir, int mode, int nth) {
    memset(k, 0, sizeof *k);
    char path[2048];
    snprintf(path, sizeof path, "%s/model.mil", dir);
    size_t len;
    char *text = slurp(path, &len);
    if (!text) return -1;
    DiagSink d;
    diag_init(&d);
    Arena a;
    arena_init(&a);
    double t0 = now();
    IrProgram *p = mil_parse(&a, &d, path, text, len);
    double t1 = now();
    MilCheckOptions co = {.model_path = dir};
    BackendOptions o = {.mode = mode, .model_path = dir, .same_ops = same_ops};
    BackendStats st = {0};
    bool ok = p && mil_check(p, &co, &d);
    double t2 = now();
    int rc = ok && backend_compile(p, &o, &k->art, &st, &d) == 0 ? 0 : -1;
    k->compile_ms = (now() - t0) * 1e3;
    k->parse_ms = (t1 - t0) * 1e3, k->check_ms = (t2 - t1) * 1e3;
    k->st = st;
    k->dispatches = st.dispatches;
    if (rc) {
        char *m = diag_render(&d);
        fputs(m, stderr);
        free(m);
    }
    arena_free(&a);
    diag_free(&d);
    free(text);
    if (rc) return -1;
    const RtSection *secs;
    int n;
    rt_artifact_sections(k->art, &secs, &n);
    char err[256];
    RtLoadOptions lo = {.nthreads = nth};
    if (rt_model_load(&k->m, secs, n, &lo, err, sizeof err)) {
        fprintf(stderr, "load: %s\n", err);
        return -1;
    }
    k->nin = rt_model_ninputs(k->m), k->nout = rt_model_noutputs(k->m);
    for (int io = 0; io < 2; io++)
        for (int i = 0; i < (io ? k->nout : k->nin); i++) {
            RtIoInfo info;
            (io ? rt_model_output : rt_model_input)(k->m, i, &info);
            RtTensor *t = io ? &k->out[i] : &k->in[i];
            int64_t e = numel_of(info.rank, info.dims);
            *t = (RtTensor){.dtype = info.dtype, .rank = info.rank, .size = (size_t)e * rt_dtype_size(info.dtype)};
            memcpy(t->dims, info.dims, sizeof info.dims);
            t->data = malloc(t->size);
            if (!io)
                for (int64_t j = 0; j < e; j++)
                    ((uint16_t *)t->data)[j] = float_to_half(strcmp(info.name, "mask") ? rng_f() : 0.0f);
        }
    return 0;
}

static void chunk_free(Chunk *k) {
    for (int i = 0; i < k->nin; i++) free(k->in[i].data);
    for (int i = 0; i < k->nout; i++) free(k->out[i].data);
    rt_model_free(k->m);
    rt_artifact_free(k->art);
}

/* Best-of-reps seconds of one forward through the 3 chunks (y feeds x). */
static double forward(Chunk *ks, int reps, int flags) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int c = 0; c < CHUNKS; c++) {
            if (c) memcpy(ks[c].in[0].data, ks[c - 1].out[ks[c - 1].nout - 1].data, ks[c].in[0].size);
            if (rt_run(ks[c].m, ks[c].in, ks[c].nin, ks[c].out, ks[c].nout, flags, NULL)) return -1;
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    return best;
}

static int build_all(Chunk *ks, const char *work, const char *phase, int mode, int nth, double *compile_ms, int *disp) {
    *compile_ms = 0, *disp = 0;
    for (int c = 0; c < CHUNKS; c++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/%s_%d", work, phase, c);
        if (chunk_build(&ks[c], dir, mode, nth)) return -1;
        *compile_ms += ks[c].compile_ms;
        *disp += ks[c].dispatches;
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *work = argc > 1 ? argv[1] : "/tmp/milc-bench";
    int nth = argc > 2 ? atoi(argv[2]) : 2, T = 128;
    mkdir(work, 0755);
    for (int c = 0; c < CHUNKS; c++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/prefill_%d", work, c);
        if (generate(dir, c * LAYERS, "prefill", T)) return 1;
        snprintf(dir, sizeof dir, "%s/decode_%d", work, c);
        if (generate(dir, c * LAYERS, "decode", 1)) return 1;
    }
    double peak = fma_peak(nth), bw = bandwidth((size_t)512 << 20, nth, 3);
    printf("machine: fp32 FMA peak %.1f GFLOP/s (%d threads), read bandwidth %.1f GB/s\n", peak / 1e9, nth, bw / 1e9);

    Chunk ks[CHUNKS];
    double cms;
    int disp;
    /* prefill, mode 2 */
    if (build_all(ks, work, "prefill", 2, nth, &cms, &disp)) return 1;
    forward(ks, 2, 0);
    double tp = forward(ks, 5, 0);
    double L = CHUNKS * LAYERS;
    double flops = L * (2.0 * T * (4.0 * C * C + 2.0 * C * FF) + 4.0 * T * T * C);
    printf("prefill T=%d mode 2: %.2f ms, %.1f GFLOP/s effective = %.2f of peak (goal >= 0.55); dispatches %d\n", T,
           tp * 1e3, flops / tp / 1e9, flops / tp / peak, disp);
    printf("compile 12 layers (parse -> artifact, mode 2): %.1f ms = %.1f prefills\n", cms, cms / 1e3 / tp);
    double ph[5] = {0};
    for (int c = 0; c < CHUNKS; c++)
        ph[0] += ks[c].parse_ms, ph[1] += ks[c].check_ms, ph[2] += ks[c].st.ms_passes, ph[3] += ks[c].st.ms_lower,
            ph[4] += ks[c].st.ms_pack;
    printf("  parse %.1f ms, check %.1f ms, passes %.1f ms, lower (weights read) %.1f ms, finish (pack, arena, "
           "serialise) %.1f ms\n", ph[0], ph[1], ph[2], ph[3], ph[4]);
    for (int c = 0; c < CHUNKS; c++) chunk_free(&ks[c]);

    /* decode T=1 against a 1024-position cache: mode 2, then mode 1 */
    double wbytes = L * (4.0 * C * C + 2.0 * C * FF) * 2, t2 = 0, t1 = 0;
    int d2 = 0, d1 = 0;
    double cms2 = 0, cms1 = 0;
    if (build_all(ks, work, "decode", 2, nth, &cms2, &d2)) return 1;
    forward(ks, 3, 0);
    t2 = forward(ks, 20, 0);
    for (int c = 0; c < CHUNKS; c++) chunk_free(&ks[c]);
    double ideal = wbytes / bw;
    printf("decode T=1 ctx=%d mode 2: %.3f ms/token; fp16 weights %.1f MB / bandwidth = %.3f ms; ratio %.2f (goal <= 1.3)\n",
           CTX, t2 * 1e3, wbytes / 1e6, ideal * 1e3, t2 / ideal);
    if (build_all(ks, work, "decode", 1, nth, &cms1, &d1)) return 1;
    forward(ks, 3, 0);
    t1 = forward(ks, 20, 0);
    for (int c = 0; c < CHUNKS; c++) chunk_free(&ks[c]);
    double b = (t1 - t2) / (d1 - d2), a = t2 - b * d2;
    printf("decode mode 1: %.3f ms/token, %d dispatches vs %d; fit a = %.3f ms, b = %.2f us per dispatch "
           "(includes the unfused ops' extra work)\n",
           t1 * 1e3, d1, d2, a * 1e3, b * 1e6);
    /* The same fused ops once as one program and once one dispatch per op
     * (mode 0 with same_ops): the time difference is dispatch overhead only. */
    same_ops = true;
    double cms0;
    int d0;
    if (build_all(ks, work, "decode", 0, nth, &cms0, &d0)) return 1;
    same_ops = false;
    RtRunStats rs;
    rt_run(ks[0].m, ks[0].in, ks[0].nin, ks[0].out, ks[0].nout, RT_RUN_NONBONDED, &rs);
    int per_chunk = (int)rs.dispatches;
    forward(ks, 3, 0);
    double tb = forward(ks, 20, 0);
    forward(ks, 3, RT_RUN_NONBONDED);
    double tn = forward(ks, 20, RT_RUN_NONBONDED);
    for (int c = 0; c < CHUNKS; c++) chunk_free(&ks[c]);
    int dn = CHUNKS * per_chunk;
    b = (tn - tb) / (dn - CHUNKS), a = tb - b * CHUNKS;
    printf("decode, same fused ops: %.3f ms bonded (%d dispatches), %.3f ms non-bonded (%d); fit a = %.3f ms, "
           "b = %.2f us per dispatch (goal <= 2 us)\n",
           tb * 1e3, CHUNKS, tn * 1e3, dn, a * 1e3, b * 1e6);
    printf("compile 12 layers decode: mode 2 %.1f ms, mode 1 %.1f ms\n", cms2, cms1);
    return 0;
}
