/* bench_report.c — medians, the least-squares fits, and the three forms of
 * `milc bench` results: the table on stdout, JSON and CSV.  The JSON and CSV
 * layouts are a stable interface, documented in cli/BENCH.md: add fields, do
 * not rename or remove them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

BenchStat bench_stat(const double *v, int n) {
    BenchStat s = {NAN, NAN, NAN, n};
    if (n <= 0) return s;
    double *t = malloc(sizeof *t * (size_t)n);
    if (!t) return s;
    memcpy(t, v, sizeof *t * (size_t)n);
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    s.min = t[0];
    s.max = t[n - 1];
    s.med = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    free(t);
    return s;
}

void bench_fit(BenchSweep *s) {
    double x[BENCH_MAX_POINTS], y[BENCH_MAX_POINTS];
    for (int i = 0; i < s->npts; i++) x[i] = s->pts[i].work, y[i] = s->pts[i].ms.med;
    est_fit(x, y, s->npts, &s->fit);
    s->has_fit = s->fit.ok;
    s->a_ms = s->fit.a, s->b_ms = s->fit.b, s->r2 = s->fit.r2;
}

/* The median over the points of what streaming each one's weights takes. */
static double sweep_stream_ms(const BenchSweep *s, bool per_work) {
    double v[BENCH_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < s->npts; i++)
        if (isfinite(s->pts[i].stream_ms)) v[n++] = s->pts[i].stream_ms / (per_work ? s->pts[i].work : 1);
    return bench_stat(v, n).med;
}

/* The mode the summary ratios are about: 2 (bonded, the production mode)
 * when measured, else the last one. */
/* The cold build's parts beside the disk: each as a ratio to the time the
 * cache's own file system took to write and fdatasync the artifacts' bytes. */
static void print_cold_path(FILE *f, const BenchModeResult *m) {
    double disk = m->disk_write_ms;
    if (!(disk > 0)) return;
    fprintf(f, "  cold build / disk write        %.2f   (disk: %.1f MB in %.1f ms, %.0f MB/s, write + fdatasync)\n",
            m->compile_ms.med / disk, m->artifact_bytes / 1e6, disk, m->artifact_bytes / 1e3 / disk);
    fprintf(f, "    generate %.2f, check %.3f, lower+pack %.2f, store %.2f (each / disk write)\n",
            m->cold_generate_ms.med / disk, m->cold_check_ms.med / disk, m->cold_lower_ms.med / disk,
            m->cold_store_ms.med / disk);
}

static const BenchModeResult *summary_mode(const BenchReport *r) {
    for (int i = 0; i < r->nmodes; i++)
        if (r->modes[i].mode == RT_MODE_DEFAULT) return &r->modes[i];
    return r->nmodes ? &r->modes[r->nmodes - 1] : NULL;
}

static double tok_s(long tokens, double ms) { return ms > 0 ? (double)tokens * 1000.0 / ms : NAN; }

/* ---- table ----------------------------------------------------------------- */

typedef double (*ModeValue)(const BenchReport *r, const BenchModeResult *m);
static double v_compile(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->compile_ms.med;
}
static double v_mb(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return (double)m->artifact_bytes / 1048576.0;
}
static double v_load(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->load_ms.med;
}
static double v_cold(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->ttft_cold_ms.med;
}
static double v_cold_tps(const BenchReport *r, const BenchModeResult *m) { return tok_s(r->seq, m->ttft_cold_ms.med); }
static double v_cached(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->ttft_cached_ms.med;
}
static double v_cached_tps(const BenchReport *r, const BenchModeResult *m) {
    return tok_s(r->seq, m->ttft_cached_ms.med);
}
static double v_c_start(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->cached_start_ms.med;
}
static double v_c_lookup(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->cached_lookup_ms.med;
}
static double v_c_run(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->cached_run_ms.med;
}
static double v_steady(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->prefill_ms.med;
}
static double v_steady_tps(const BenchReport *r, const BenchModeResult *m) { return tok_s(r->seq, m->prefill_ms.med); }
static double v_pdisp(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->prefill_dispatches;
}
static double v_decode(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->decode_ms.med;
}
static double v_ddisp(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->decode_dispatches;
}
static double v_rss(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->rss_cached.med / 1048576.0;
}
static double v_rss_cold(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->rss_cold.med / 1048576.0;
}
static double v_build(const BenchReport *r, const BenchModeResult *m) {
    (void)r;
    return m->build_warm_ms.med;
}

/* The flags of a fit, as words; "" when none. */
static void flag_words(unsigned flags, char *buf, size_t len) {
    buf[0] = 0;
    for (unsigned bit = 1; bit <= EST_FIT_BENDS; bit <<= 1)
        if (flags & bit) {
            size_t at = strlen(buf);
            snprintf(buf + at, len - at, "%s%s", at ? ", " : "", est_fit_flag_name(bit));
        }
}

/* What a line's intercept is: time independent of the work, beside the time
 * it takes to stream the program's weights once; or why it is no cost. */
static void print_intercept(FILE *f, const BenchSweep *s, const char *work) {
    char fl[128];
    flag_words(s->fit.flags, fl, sizeof fl);
    if (s->fit.flags) {
        fprintf(f, "%.4f ms, FLAGGED (%s): not a cost", s->a_ms, fl);
        return;
    }
    fprintf(f, "%.4f ms = time independent of %s (not a dispatch cost)", s->a_ms, work);
    double st = sweep_stream_ms(s, false);
    if (s->work_name[0] == 't' && isfinite(st)) fprintf(f, "; streaming the chunk's weights once takes %.4f ms", st);
}

static void print_sweep(FILE *f, int mode, const BenchSweep *s, bool depth) {
    if (depth)
        fprintf(f, "\nmode %d, depth sweep (T=%d): time per forward vs layers per chunk\n", mode, s->fixed);
    else
        fprintf(f, "mode %d, token sweep (%d layers): time per forward vs tokens per dispatch\n", mode, s->fixed);
    fprintf(f, "  %-8s", s->work_name);
    for (int p = 0; p < s->npts; p++) fprintf(f, "%10g", s->pts[p].work);
    fprintf(f, "\n  %-8s", "ms");
    for (int p = 0; p < s->npts; p++) fprintf(f, "%10.3f", s->pts[p].ms.med);
    fprintf(f, "\n  %-8s", "stream");
    for (int p = 0; p < s->npts; p++)
        if (isfinite(s->pts[p].stream_ms))
            fprintf(f, "%10.3f", s->pts[p].stream_ms);
        else
            fprintf(f, "%10s", "-");
    fprintf(f, "\n  %-8s", "dispatch");
    for (int p = 0; p < s->npts; p++) fprintf(f, "%10.0f", s->pts[p].dispatches);
    fputc('\n', f);
    if (!s->has_fit) {
        fprintf(f, "  fit: needs two distinct %s values\n", s->work_name);
        return;
    }
    const char *unit = depth ? "layer" : "token";
    fprintf(f, "  line: time = %.4f ms + %.4f ms/%s (R^2 = %.4f)\n  intercept: ", s->a_ms, s->b_ms, unit, s->r2);
    print_intercept(f, s, depth ? "layers per chunk" : "tokens per dispatch");
    fputc('\n', f);
    if (s->fit.flags & EST_FIT_NEGATIVE_INTERCEPT)
        fprintf(f, "  negative intercept: no fixed cost is negative; the line is pulled by points it does not fit\n");
    if (s->fit.flags & EST_FIT_POOR)
        fprintf(f, "  poor fit: R^2 below %.2f, the points are not on a line\n", EST_FIT_MIN_R2);
    if (s->fit.flags & EST_FIT_BENDS)
        fprintf(
            f,
            "  bends at %g %ss: %.4f ms/%s up to it, %.4f after (R^2 = %.4f): past it the weights no longer fit in a"
            " cache, so the straight line is the wrong model\n",
            s->fit.knot, unit, s->fit.hb, unit, s->fit.hb + s->fit.hc, s->fit.hr2);
    if (depth && isfinite(sweep_stream_ms(s, true)))
        fprintf(f, "  streaming one layer's weights once takes %.4f ms (the slope's floor)\n",
                sweep_stream_ms(s, true));
}

static void print_dispatch(FILE *f, const BenchReport *r) {
    if (!r->has_dispatch) return;
    const BenchDispatch *d = &r->dispatch;
    fprintf(
        f,
        "  per-dispatch overhead          %.3f us (measured: the decode chunks bonded, %d dispatches, vs one per op,"
        " %d; median of %d alternated pairs, %.3f..%.3f)\n",
        d->us.med, d->bonded, d->per_op, d->pairs, d->us.min, d->us.max);
    if (!(d->us.med > 0))
        fprintf(f, "                                 (not above this run's noise: more pairs with --repeat)\n");
}

void bench_print_table(FILE *f, const BenchReport *r) {
    static const struct {
        const char *label, *fmt;
        ModeValue v;
    } rows[] = {
        {"compile, all chunks (ms)", "%.1f", v_compile},
        {"artifact (MB)", "%.1f", v_mb},
        {"cached load (ms)", "%.2f", v_load},
        {"ttft cold (ms)", "%.1f", v_cold},
        {"  prefill tok/s, cold", "%.1f", v_cold_tps},
        {"ttft cached (ms)", "%.2f", v_cached},
        {"  prefill tok/s, cached", "%.1f", v_cached_tps},
        {"  process start (ms)", "%.2f", v_c_start},
        {"  lookup+verify (ms)", "%.2f", v_c_lookup},
        {"  first prefill run (ms)", "%.2f", v_c_run},
        {"steady prefill (ms)", "%.2f", v_steady},
        {"  prefill tok/s, steady", "%.1f", v_steady_tps},
        {"  dispatches / prefill", "%.0f", v_pdisp},
        {"decode (ms/token)", "%.3f", v_decode},
        {"  dispatches / token", "%.0f", v_ddisp},
        {"peak RSS, cached (MB)", "%.1f", v_rss},
        {"peak RSS, cold (MB)", "%.1f", v_rss_cold},
        {"warm `milc build` (ms)", "%.2f", v_build},
    };
    fprintf(f, "milc bench: %s, %ld layers in %ld chunk%s of %ld; prefill T=%ld, decode T=1 at ctx %ld\n", r->config,
            r->layers, r->nchunks, r->nchunks == 1 ? "" : "s", r->chunk, r->seq, r->ctx);
    fprintf(f, "medians of %d runs (cold: %d), %d thread%s%s; spreads in --json / --csv\n\n", r->repeat, r->cold_repeat,
            r->threads, r->threads == 1 ? "" : "s",
            r->verify == BUILD_VERIFY_NONE   ? ", hits not checksummed"
            : r->verify == BUILD_VERIFY_FULL ? ", every hit checksummed"
                                             : "");
    fprintf(f, "%-26s", "");
    for (int i = 0; i < r->nmodes; i++) fprintf(f, "%14s %d", "mode", r->modes[i].mode);
    fputc('\n', f);
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        fprintf(f, "%-26s",
                rows[k].v == v_c_lookup && r->verify == BUILD_VERIFY_NONE ? "  lookup, no checksum (ms)"
                                                                          : rows[k].label);
        for (int i = 0; i < r->nmodes; i++) {
            char buf[64];
            double v = rows[k].v(r, &r->modes[i]);
            if (isfinite(v))
                snprintf(buf, sizeof buf, rows[k].fmt, v);
            else
                snprintf(buf, sizeof buf, "-");
            fprintf(f, "%16s", buf);
        }
        fputc('\n', f);
    }
    for (int i = 0; i < r->nmodes; i++)
        if (r->modes[i].has_sweeps) {
            print_sweep(f, r->modes[i].mode, &r->modes[i].depth, true);
            print_sweep(f, r->modes[i].mode, &r->modes[i].tokens, false);
        }
    const BenchModeResult *m = summary_mode(r);
    if (!m) return;
    fprintf(f, "\nsummary (%s, chunks of %ld, mode %d, T=%ld):\n", r->config, r->chunk, m->mode, r->seq);
    fprintf(f, "  ttft cached / steady prefill   %.3f   (goal <= 1.10); run by run: median %.3f, %.3f-%.3f\n",
            m->ttft_cached_ms.med / m->prefill_ms.med, m->ttft_pair.med, m->ttft_pair.min, m->ttft_pair.max);
    fprintf(f, "  ttft cold / ttft cached        %.2f\n", m->ttft_cold_ms.med / m->ttft_cached_ms.med);
    print_cold_path(f, m);
    print_dispatch(f, r);
    if (m->has_sweeps && m->tokens.has_fit) {
        fprintf(f, "  token-sweep intercept          ");
        print_intercept(f, &m->tokens, "tokens per dispatch");
        fprintf(f, "\n  depth-sweep intercept          ");
        print_intercept(f, &m->depth, "layers per chunk");
        fputc('\n', f);
    }
    fprintf(f, "  warm `milc build`, whole process, all %ld chunks   %.2f ms (goal <= 20)\n", r->nchunks,
            m->build_warm_ms.med);
    if (r->projection) bench_project_table(f, r->projection);
    if (r->whole) bench_whole_table(f, r);
}

/* ---- JSON ------------------------------------------------------------------ */

static json_t *jspread(BenchStat s) {
    return cli_json_obj("min", cli_json_g(s.min), "max", cli_json_g(s.max), "n", json_integer(s.n), NULL);
}

static json_t *jflags(unsigned flags) {
    json_t *a = json_array();
    for (unsigned bit = 1; bit <= EST_FIT_BENDS; bit <<= 1)
        if (flags & bit) cli_json_push(a, json_string(est_fit_flag_name(bit)));
    return a;
}

static json_t *jhinge(const BenchSweep *s) {
    if (!s->has_fit || !(s->fit.flags & EST_FIT_BENDS)) return json_null();
    return cli_json_obj("knot", cli_json_g(s->fit.knot), "a_ms", cli_json_g(s->fit.ha), "b_ms", cli_json_g(s->fit.hb),
                        "b_after_ms", cli_json_g(s->fit.hb + s->fit.hc), "r2", cli_json_g(s->fit.hr2), NULL);
}

static json_t *jsweep(const BenchSweep *s, const char *fixed_name) {
    json_t *pts = json_array();
    for (int p = 0; p < s->npts; p++) {
        const BenchPoint *pt = &s->pts[p];
        cli_json_push(pts,
                      cli_json_obj("work", cli_json_g(pt->work), "ms", cli_json_g(pt->ms.med), "min",
                                   cli_json_g(pt->ms.min), "max", cli_json_g(pt->ms.max), "n", json_integer(pt->ms.n),
                                   "dispatches", cli_json_g(pt->dispatches), "weight_bytes",
                                   cli_json_g(pt->weight_bytes), "stream_ms", cli_json_g(pt->stream_ms), NULL));
    }
    return cli_json_obj("work", cli_json_str(s->work_name), fixed_name, json_integer(s->fixed), "a_ms",
                        cli_json_g(s->has_fit ? s->a_ms : NAN), "b_ms", cli_json_g(s->has_fit ? s->b_ms : NAN), "r2",
                        cli_json_g(s->has_fit ? s->r2 : NAN), "a_means", json_string("time independent of work"),
                        "flags", jflags(s->has_fit ? s->fit.flags : 0), "stream_ms",
                        cli_json_g(sweep_stream_ms(s, false)), "hinge", jhinge(s), "points", pts, NULL);
}

static json_t *jdispatch(const BenchReport *r) {
    if (!r->has_dispatch) return json_null();
    const BenchDispatch *d = &r->dispatch;
    return cli_json_obj("us", cli_json_g(d->us.med), "min", cli_json_g(d->us.min), "max", cli_json_g(d->us.max), "n",
                        json_integer(d->us.n), "bonded_dispatches", json_integer(d->bonded), "per_op_dispatches",
                        json_integer(d->per_op), NULL);
}

/* What the cached first prefill took, part by part; and the cold build's
 * parts beside the disk write. */
static json_t *jbreakdown(const BenchModeResult *m) {
    return cli_json_obj("start_ms", cli_json_g(m->cached_start_ms.med), "open_ms", cli_json_g(m->cached_open_ms.med),
                        "lookup_ms", cli_json_g(m->cached_lookup_ms.med), "load_ms", cli_json_g(m->load_ms.med),
                        "run_ms", cli_json_g(m->cached_run_ms.med), NULL);
}

static json_t *jcold_path(const BenchModeResult *m) {
    return cli_json_obj("generate_ms", cli_json_g(m->cold_generate_ms.med), "check_ms",
                        cli_json_g(m->cold_check_ms.med), "lower_pack_ms", cli_json_g(m->cold_lower_ms.med), "store_ms",
                        cli_json_g(m->cold_store_ms.med), "disk_write_ms", cli_json_g(m->disk_write_ms),
                        "compile_over_disk", cli_json_g(m->compile_ms.med / m->disk_write_ms), "store_over_disk",
                        cli_json_g(m->cold_store_ms.med / m->disk_write_ms), NULL);
}

static json_t *jmode_spread(const BenchModeResult *m) {
    return cli_json_obj("compile_ms", jspread(m->compile_ms), "load_ms", jspread(m->load_ms), "ttft_cold_ms",
                        jspread(m->ttft_cold_ms), "ttft_cached_ms", jspread(m->ttft_cached_ms), "prefill_ms",
                        jspread(m->prefill_ms), "decode_ms_per_token", jspread(m->decode_ms), "peak_rss_bytes",
                        jspread(m->rss_cached), "peak_rss_cold_bytes", jspread(m->rss_cold), "build_warm_ms",
                        jspread(m->build_warm_ms), NULL);
}

static json_t *jmode(const BenchReport *r, const BenchModeResult *m) {
    json_t *sweeps = m->has_sweeps
                         ? cli_json_obj("depth", jsweep(&m->depth, "seq"), "tokens", jsweep(&m->tokens, "layers"), NULL)
                         : json_null();
    return cli_json_obj(
        "mode", json_integer(m->mode), "layers_per_chunk", json_integer(r->chunk), "chunks", json_integer(r->nchunks),
        "seq", json_integer(r->seq), "compile_ms", cli_json_g(m->compile_ms.med), "artifact_bytes",
        json_integer((json_int_t)m->artifact_bytes), "load_ms", cli_json_g(m->load_ms.med), "ttft_cold_ms",
        cli_json_g(m->ttft_cold_ms.med), "ttft_cold_tok_s", cli_json_g(tok_s(r->seq, m->ttft_cold_ms.med)),
        "ttft_cached_ms", cli_json_g(m->ttft_cached_ms.med), "ttft_cached_tok_s",
        cli_json_g(tok_s(r->seq, m->ttft_cached_ms.med)), "ttft_cached_breakdown", jbreakdown(m), "prefill_ms",
        cli_json_g(m->prefill_ms.med), "prefill_tok_s", cli_json_g(tok_s(r->seq, m->prefill_ms.med)),
        "prefill_dispatches", cli_json_g(m->prefill_dispatches), "decode_ms_per_token", cli_json_g(m->decode_ms.med),
        "dispatches_per_token", cli_json_g(m->decode_dispatches), "decode_ops", cli_json_g(m->decode_ops),
        "decode_weight_bytes", cli_json_g(m->decode_weight_bytes), "decode_read_gbs",
        cli_json_g(m->decode_gbs > 0 ? m->decode_gbs : NAN), "peak_rss_bytes", cli_json_g(m->rss_cached.med),
        "peak_rss_cold_bytes", cli_json_g(m->rss_cold.med), "build_warm_ms", cli_json_g(m->build_warm_ms.med),
        "cold_path", jcold_path(m), "spread", jmode_spread(m), "sweeps", sweeps, NULL);
}

static json_t *jsummary(const BenchReport *r) {
    const BenchModeResult *m = summary_mode(r);
    if (!m) return json_null();
    bool tf = m->has_sweeps && m->tokens.has_fit, df = m->has_sweeps && m->depth.has_fit;
    return cli_json_obj(
        "mode", json_integer(m->mode), "ttft_cached_over_steady", cli_json_g(m->ttft_cached_ms.med / m->prefill_ms.med),
        "ttft_cached_over_steady_paired", cli_json_g(m->ttft_pair.med), "ttft_cold_over_cached",
        cli_json_g(m->ttft_cold_ms.med / m->ttft_cached_ms.med), "dispatch_overhead_ms",
        cli_json_g(r->has_dispatch ? r->dispatch.us.med / 1e3 : NAN), "tokens_intercept_ms",
        cli_json_g(tf ? m->tokens.a_ms : NAN), "tokens_stream_ms",
        cli_json_g(tf ? sweep_stream_ms(&m->tokens, false) : NAN), "depth_intercept_ms",
        cli_json_g(df ? m->depth.a_ms : NAN), "tokens_flags", jflags(tf ? m->tokens.fit.flags : 0), "depth_flags",
        jflags(df ? m->depth.fit.flags : 0), "build_warm_ms", cli_json_g(m->build_warm_ms.med), NULL);
}

void bench_write_json(FILE *f, const BenchReport *r) {
    json_t *modes = json_array();
    for (int i = 0; i < r->nmodes; i++) cli_json_push(modes, jmode(r, &r->modes[i]));
    /* --project: an ESTIMATE, not a measurement */
    json_t *proj = r->projection ? bench_project_json(r->projection) : json_null();
    cli_json_print(f, cli_json_obj("schema", json_string("milc-bench/2"), "milc_version", cli_json_str(MILC_VERSION),
                                   "config", cli_json_str(r->config), "layers", json_integer(r->layers),
                                   "layers_per_chunk", json_integer(r->chunk), "chunks", json_integer(r->nchunks),
                                   "seq", json_integer(r->seq), "ctx", json_integer(r->ctx), "repeat",
                                   json_integer(r->repeat), "cold_repeat", json_integer(r->cold_repeat), "threads",
                                   json_integer(r->threads), "depth_seq", json_integer(r->depth_seq), "verify_hits",
                                   json_boolean(r->verify != BUILD_VERIFY_NONE), "verify_policy",
                                   json_string(r->verify == BUILD_VERIFY_NONE   ? "none"
                                               : r->verify == BUILD_VERIFY_FULL ? "full"
                                                                                : "once"),
                                   "dispatch", jdispatch(r), "modes", modes, "projection", proj, "summary", jsummary(r),
                                   "whole", bench_whole_json(r), NULL));
}

/* ---- CSV ------------------------------------------------------------------- */

/* One tidy row per figure: mode,section,metric,work,median,min,max,n. */
static void crow(FILE *f, int mode, const char *section, const char *metric, double work, BenchStat s) {
    fprintf(f, "%d,%s,%s,", mode, section, metric);
    if (isfinite(work)) fprintf(f, "%g", work);
    double v[3] = {s.med, s.min, s.max};
    for (int i = 0; i < 3; i++) {
        fputc(',', f);
        if (isfinite(v[i])) fprintf(f, "%.6g", v[i]);
    }
    fprintf(f, ",%d\n", s.n);
}

static BenchStat one(double v) { return (BenchStat){v, v, v, 1}; }

/* A fit's flags and hinge as rows: 1 when flagged. */
static void csv_fit_extra(FILE *f, int md, const char *section, const BenchSweep *s) {
    for (unsigned bit = 1; bit <= EST_FIT_BENDS; bit <<= 1)
        crow(f, md, section, est_fit_flag_name(bit), NAN, one((s->fit.flags & bit) ? 1 : 0));
    crow(f, md, section, "stream_ms", NAN, one(sweep_stream_ms(s, false)));
    if (!(s->fit.flags & EST_FIT_BENDS)) return;
    crow(f, md, section, "hinge_knot", NAN, one(s->fit.knot));
    crow(f, md, section, "hinge_b_ms", NAN, one(s->fit.hb));
    crow(f, md, section, "hinge_b_after_ms", NAN, one(s->fit.hb + s->fit.hc));
    crow(f, md, section, "hinge_r2", NAN, one(s->fit.hr2));
}

void bench_write_csv(FILE *f, const BenchReport *r) {
    fputs("mode,section,metric,work,median,min,max,n\n", f);
    /* The run-wide figure is about every mode: mode -1. */
    if (r->has_dispatch) {
        crow(f, -1, "dispatch", "us", NAN, r->dispatch.us);
        crow(f, -1, "dispatch", "bonded_dispatches", NAN, one(r->dispatch.bonded));
        crow(f, -1, "dispatch", "per_op_dispatches", NAN, one(r->dispatch.per_op));
    }
    for (int i = 0; i < r->nmodes; i++) {
        const BenchModeResult *m = &r->modes[i];
        int md = m->mode;
        crow(f, md, "headline", "layers_per_chunk", NAN, one((double)r->chunk));
        crow(f, md, "headline", "chunks", NAN, one((double)r->nchunks));
        crow(f, md, "headline", "seq", NAN, one((double)r->seq));
        crow(f, md, "headline", "compile_ms", NAN, m->compile_ms);
        crow(f, md, "headline", "artifact_bytes", NAN, one((double)m->artifact_bytes));
        crow(f, md, "headline", "load_ms", NAN, m->load_ms);
        crow(f, md, "headline", "ttft_cold_ms", NAN, m->ttft_cold_ms);
        crow(f, md, "headline", "ttft_cached_ms", NAN, m->ttft_cached_ms);
        crow(f, md, "ttft_cached", "start_ms", NAN, m->cached_start_ms);
        crow(f, md, "ttft_cached", "open_ms", NAN, m->cached_open_ms);
        crow(f, md, "ttft_cached", "lookup_ms", NAN, m->cached_lookup_ms);
        crow(f, md, "ttft_cached", "run_ms", NAN, m->cached_run_ms);
        crow(f, md, "headline", "prefill_ms", NAN, m->prefill_ms);
        crow(f, md, "headline", "prefill_tok_s", NAN, one(tok_s(r->seq, m->prefill_ms.med)));
        crow(f, md, "headline", "prefill_dispatches", NAN, one(m->prefill_dispatches));
        crow(f, md, "headline", "decode_ms_per_token", NAN, m->decode_ms);
        crow(f, md, "headline", "dispatches_per_token", NAN, one(m->decode_dispatches));
        crow(f, md, "headline", "decode_ops", NAN, one(m->decode_ops));
        crow(f, md, "headline", "decode_weight_bytes", NAN, one(m->decode_weight_bytes));
        crow(f, md, "headline", "decode_read_gbs", NAN, one(m->decode_gbs > 0 ? m->decode_gbs : NAN));
        crow(f, md, "headline", "peak_rss_bytes", NAN, m->rss_cached);
        crow(f, md, "headline", "peak_rss_cold_bytes", NAN, m->rss_cold);
        crow(f, md, "headline", "build_warm_ms", NAN, m->build_warm_ms);
        if (!m->has_sweeps) continue;
        const BenchSweep *sw[2] = {&m->depth, &m->tokens};
        const char *names[2] = {"depth", "tokens"}, *fits[2] = {"depth_fit", "tokens_fit"};
        for (int k = 0; k < 2; k++) {
            for (int p = 0; p < sw[k]->npts; p++) {
                crow(f, md, names[k], "ms", sw[k]->pts[p].work, sw[k]->pts[p].ms);
                crow(f, md, names[k], "dispatches", sw[k]->pts[p].work, one(sw[k]->pts[p].dispatches));
                crow(f, md, names[k], "weight_bytes", sw[k]->pts[p].work, one(sw[k]->pts[p].weight_bytes));
                crow(f, md, names[k], "stream_ms", sw[k]->pts[p].work, one(sw[k]->pts[p].stream_ms));
            }
            if (!sw[k]->has_fit) continue;
            crow(f, md, fits[k], "a_ms", NAN, one(sw[k]->a_ms));
            crow(f, md, fits[k], "b_ms", NAN, one(sw[k]->b_ms));
            crow(f, md, fits[k], "r2", NAN, one(sw[k]->r2));
            csv_fit_extra(f, md, fits[k], sw[k]);
        }
    }
}
