/* bench_project.c — the ANE projection of `milc estimate` and `milc bench
 * --project`: the model's per-layer plan read from a real compiled program
 * (one decode layer in mode 1: one plan op per MIL op, and its weights), cut
 * at every depth and mode, projected with a chip's parameters
 * (milc_estimate), and printed — labelled an ESTIMATE everywhere. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "json.h"

const char *bench_chip_path(const char *arg, char *buf, size_t len) {
    /* A bare name is one of milc's chip files; anything else is a path. */
    if (arg && (strchr(arg, '/') || strstr(arg, ".json"))) return arg;
    snprintf(buf, len, "%s/ane/%s.json", MILC_DATA_DIR, arg ? arg : "m4-max");
    return buf;
}

int bench_chip_load(const char *path, EstChip *c) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_error("chip file '%s': %s", path, strerror(errno));
        return EXIT_INPUT;
    }
    char *text = malloc(1 << 20);
    size_t n = text ? fread(text, 1, 1 << 20, f) : 0;
    bool err = text && ferror(f), big = text && n == 1 << 20;
    fclose(f);
    if (!text) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    if (err || big) {
        free(text);
        cli_error("chip file '%s': %s", path, err ? "read error" : "larger than 1 MB");
        return err ? EXIT_SYSTEM : EXIT_INPUT;
    }
    char msg[512];
    int rc = est_chip_parse(text, n, path, c, msg, sizeof msg);
    free(text);
    if (rc != 0) {
        cli_error("%s", msg);
        return EXIT_INPUT;
    }
    return EXIT_OK;
}

static double weight_bytes_of(const RtArtifact *a) {
    const RtSection *s;
    int n;
    double sum = 0;
    rt_artifact_sections(a, &s, &n);
    for (int i = 0; i < n; i++)
        if (s[i].kind == RT_SEC_WEIGHT) sum += (double)s[i].size;
    return sum;
}

int bench_project_model(const TemplatePath *tp, const BenchParams *decode, const char *dir, EstModel *m, DiagSink *d) {
    memset(m, 0, sizeof *m);
    JobList jobs = {0};
    JobSpec spec = {.config = decode->config,
                    .weights = decode->weights,
                    .modes = "1",
                    .chunk = 1,
                    .extra = decode->v,
                    .nextra = decode->n};
    if (jobs_expand(tp, &spec, &jobs, d) != 0 || jobs.n < 1) {
        jobs_free(&jobs);
        return EXIT_INPUT;
    }
    GenConfig *gc = job_config(tp, &jobs.v[0], d);
    int64_t dim = 0;
    bool have = gc != NULL;
    if (gc) gen_config_get_int(gc, "dim", &dim);
    gen_config_free(gc);
    RtArtifact *a = NULL;
    BackendStats st = {0};
    int rc = have && bench_compile_job(tp, &jobs.v[0], dir, &(BackendOptions){.mode = 1}, &a, &st, d) == 0 ? EXIT_OK
             : diag_failed(d)                                                                              ? EXIT_INPUT
                              : EXIT_SYSTEM;
    if (rc == EXIT_OK) {
        /* fp16 weights: 2 bytes and 2 FLOPs (a multiply-add) per parameter;
         * fp16 hidden states in and out, and K and V rows, of dim each. */
        double wb = weight_bytes_of(a);
        *m = (EstModel){.layers = jobs.n,
                        .layer_weight_bytes = wb,
                        .layer_flops_per_pos = wb,
                        .layer_attn_flops_per_pos_ctx = 4.0 * (double)dim,
                        .layer_ops = st.dispatches,
                        .io_bytes_per_pos = 4.0 * (double)dim,
                        .layer_kv_bytes_per_ctx = 4.0 * (double)dim};
    } else if (rc == EXIT_SYSTEM)
        cli_error("cannot compile a layer of '%s' to count its ops", decode->config);
    rt_artifact_free(a);
    jobs_free(&jobs);
    return rc;
}

/* A mode that compiles both programs pays the chip's factor for it. */
static double compile_factor(const BenchProjection *p, int mode) {
    const RtModeInfo *mi = rt_mode(mode);
    return mi && mi->bonded && mi->nonbonded ? p->chip.mode0_compile_factor : 1;
}

void bench_project_run(BenchProjection *p) {
    for (int mi = 0; mi < p->nmodes; mi++)
        for (int di = 0; di < p->ndepths; di++) {
            EstPlan *pl = &p->plan[mi][di];
            if (est_plan_depth(&p->model, p->depths[di], p->modes[mi], pl) != 0) continue;
            for (int path = 0; path < 2; path++) {
                EstScenario s = {.prompt_tokens = p->prompt,
                                 .prefill_chunk = p->prompt,
                                 .ctx = p->ctx,
                                 .path = path,
                                 .compile_factor = compile_factor(p, p->modes[mi])};
                est_project(&p->chip, pl, &s, &p->res[mi][di][path]);
            }
        }
}

/* The depth with the least decode time per token among programs of a stable
 * size; -1 if none. */
static int best_depth(const BenchProjection *p, int mi, int path) {
    int best = -1;
    for (int di = 0; di < p->ndepths; di++) {
        const EstResult *r = &p->res[mi][di][path];
        if (r->over_max_program || !(r->decode_ms > 0)) continue;
        if (best < 0 || r->decode_ms < p->res[mi][best][path].decode_ms) best = di;
    }
    return best;
}

static const char *path_name(int path) { return path == EST_COREML ? "coreml" : "direct"; }

void bench_project_table(FILE *f, const BenchProjection *p) {
    fprintf(f, "\nANE ESTIMATE (projected from published figures, NOT measured): %s, chip file %s\n", p->chip.name,
            p->chip_path);
    fprintf(f,
            "%d layers; per layer %.1f MB of weights, %.0f MIL ops; prompt %d tokens, decode at ctx %d;"
            " positions padded to %d. How: docs/ANE-ESTIMATE.md\n",
            p->model.layers, p->model.layer_weight_bytes / 1e6, p->model.layer_ops, p->prompt, p->ctx, p->chip.min_seq);
    for (int path = 0; path < 2; path++) {
        fprintf(f, "\n  %s path%s\n", path_name(path),
                path == EST_COREML ? " (fixed cost per dispatch x the chip's Core ML factor)"
                                   : " (the private client)");
        fprintf(f, "  %4s %5s %8s %9s %11s %10s %11s %10s %11s\n", "mode", "depth", "programs", "dispatch", "decode ms",
                "decode t/s", "prefill t/s", "compile ms", "cold t/s");
        for (int mi = 0; mi < p->nmodes; mi++)
            for (int di = 0; di < p->ndepths; di++) {
                const EstResult *r = &p->res[mi][di][path];
                const EstPlan *pl = &p->plan[mi][di];
                if (!pl->programs) continue;
                fprintf(f, "  %4d %5d %8d %9d %11.3f %10.1f %11.1f %10.0f %11.1f%s\n", p->modes[mi], p->depths[di],
                        pl->programs, pl->dispatches, r->decode_ms, r->decode_tok_s, r->prefill_tok_s, r->compile_ms,
                        r->cold_tok_s, r->over_max_program ? "  (program above the chip's stable size)" : "");
            }
        for (int mi = 0; mi < p->nmodes; mi++) {
            int b = best_depth(p, mi, path);
            if (b >= 0)
                fprintf(f, "  mode %d: least time per token at depth %d (%.3f ms/token, estimate)\n", p->modes[mi],
                        p->depths[b], p->res[mi][b][path].decode_ms);
        }
    }
}

static json_t *json_row(const BenchProjection *p, int mi, int di, int path) {
    const EstResult *r = &p->res[mi][di][path];
    const EstPlan *pl = &p->plan[mi][di];
    return cli_json_obj("mode", json_integer(p->modes[mi]), "depth", json_integer(p->depths[di]), "path",
                        json_string(path_name(path)), "programs", json_integer(pl->programs), "dispatches_per_token",
                        json_integer(pl->dispatches), "ops_per_dispatch", cli_json_g(pl->ops_per_dispatch), "decode_ms",
                        cli_json_g(r->decode_ms), "decode_tok_s", cli_json_g(r->decode_tok_s), "decode_fixed_ms",
                        cli_json_g(r->decode.fixed_ms), "decode_compute_ms", cli_json_g(r->decode.compute_ms),
                        "decode_stream_ms", cli_json_g(r->decode.stream_ms), "prefill_ms", cli_json_g(r->prefill_ms),
                        "prefill_tok_s", cli_json_g(r->prefill_tok_s), "compile_ms", cli_json_g(r->compile_ms),
                        "cold_ms", cli_json_g(r->cold_ms), "cold_tok_s", cli_json_g(r->cold_tok_s), "over_max_program",
                        json_boolean(r->over_max_program), NULL);
}

json_t *bench_project_json(const BenchProjection *p) {
    json_t *rows = json_array(), *best = json_array();
    for (int path = 0; path < 2; path++)
        for (int mi = 0; mi < p->nmodes; mi++)
            for (int di = 0; di < p->ndepths; di++)
                if (p->plan[mi][di].programs) cli_json_push(rows, json_row(p, mi, di, path));
    for (int path = 0; path < 2; path++)
        for (int mi = 0; mi < p->nmodes; mi++) {
            int b = best_depth(p, mi, path);
            if (b >= 0)
                cli_json_push(best, cli_json_obj("mode", json_integer(p->modes[mi]), "path",
                                                 json_string(path_name(path)), "depth", json_integer(p->depths[b]),
                                                 "decode_ms", cli_json_g(p->res[mi][b][path].decode_ms), NULL));
        }
    return cli_json_obj("estimate", json_true(), "note",
                        json_string("projected from published figures, not measured: docs/ANE-ESTIMATE.md"), "chip",
                        cli_json_str(p->chip.name), "chip_file", cli_json_str(p->chip_path), "layers",
                        json_integer(p->model.layers), "layer_weight_bytes", cli_json_g(p->model.layer_weight_bytes),
                        "layer_ops", cli_json_g(p->model.layer_ops), "prompt", json_integer(p->prompt), "ctx",
                        json_integer(p->ctx), "min_seq", json_integer(p->chip.min_seq), "rows", rows, "best", best,
                        NULL);
}
