/* bench_whole.c — printing `milc bench --whole`: the whole model's figures
 * the library measured (whole.c), as Orion's table reports a model: first
 * call on an empty cache, cached first call, steady prefill, decode. */
#include <math.h>

#include "bench.h"

static double tok_s(long tokens, double ms) { return ms > 0 ? (double)tokens * 1000.0 / ms : NAN; }

void bench_whole_table(FILE *f, const BenchReport *r) {
    const WholeResult *w = r->whole;
    fprintf(f, "\nwhole model (%s: embedding, %d chunk%s, head; mode %d; T=%ld; in process, cache open):\n", r->config,
            w->chunks, w->chunks == 1 ? "" : "s", r->whole_mode, w->seq);
    fprintf(f, "  first call, empty cache        %10.1f ms  %10.1f prefill tok/s  (builds %.1f ms; %d run%s)\n",
            w->first_ms.med, tok_s(w->seq, w->first_ms.med), w->first_build_ms.med, w->first_ms.n,
            w->first_ms.n == 1 ? "" : "s");
    fprintf(f, "  first call, cached             %10.2f ms  %10.1f prefill tok/s  (lookup %.2f, load %.2f ms)\n",
            w->cached_ms.med, tok_s(w->seq, w->cached_ms.med), w->cached_lookup_ms.med, w->cached_load_ms.med);
    fprintf(f, "  steady prefill                 %10.2f ms  %10.1f prefill tok/s\n", w->steady_ms.med,
            tok_s(w->seq, w->steady_ms.med));
    fprintf(f, "  decode at ctx %-6ld           %10.3f ms  %10.1f tok/s\n", w->ctx, w->decode_ms.med,
            tok_s(1, w->decode_ms.med));
    fprintf(f, "  cached first call / steady     %10.3f     (goal <= 1.10; %d pairs side by side, %.3f-%.3f)%s\n",
            w->ratio.med, w->ratio.n, w->ratio.min, w->ratio.max, w->finite ? "" : "  LOGITS NOT FINITE");
}

static json_t *jstat(WholeStat s) {
    return cli_json_obj("median", cli_json_g(s.med), "min", cli_json_g(s.min), "max", cli_json_g(s.max), "n",
                        json_integer(s.n), NULL);
}

json_t *bench_whole_json(const BenchReport *r) {
    const WholeResult *w = r->whole;
    if (!w) return json_null();
    return cli_json_obj(
        "mode", json_integer(r->whole_mode), "programs", json_integer(w->programs), "chunks", json_integer(w->chunks),
        "seq", json_integer(w->seq), "ctx", json_integer(w->ctx), "artifact_bytes",
        json_integer((json_int_t)w->artifact_bytes), "first_call_ms", jstat(w->first_ms), "first_call_build_ms",
        jstat(w->first_build_ms), "cached_call_ms", jstat(w->cached_ms), "cached_lookup_ms", jstat(w->cached_lookup_ms),
        "cached_load_ms", jstat(w->cached_load_ms), "steady_prefill_ms", jstat(w->steady_ms), "decode_ms",
        jstat(w->decode_ms), "cached_over_steady", jstat(w->ratio), "first_call_prefill_tok_s",
        cli_json_g(tok_s(w->seq, w->first_ms.med)), "cached_prefill_tok_s", cli_json_g(tok_s(w->seq, w->cached_ms.med)),
        "steady_prefill_tok_s", cli_json_g(tok_s(w->seq, w->steady_ms.med)), "decode_tok_s",
        cli_json_g(tok_s(1, w->decode_ms.med)), "logits_finite", json_boolean(w->finite), NULL);
}
