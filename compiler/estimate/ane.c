/* ane.c — the ANE projection: a forward pass costs a fixed time per dispatch
 * plus the larger of its compute (FLOPs ÷ peak × utilization at its ops per
 * dispatch) and its streaming (weights and activations ÷ bandwidth): a
 * roofline under a per-dispatch floor.  The first call also compiles every
 * program.  An estimate from published figures; docs/ANE-ESTIMATE.md. */
#include <math.h>
#include <string.h>

#include "milc/estimate.h"
#include "milc/plan.h"

/* Which programs each compile mode carries, from the one mode table. */
#define EST_MODE_(id, n, name, bonded, nonbonded, ...) [n] = {true, bonded, nonbonded},
static const struct { bool exists, bonded, nonbonded; } est_modes[RT_NMODES] = {RT_MODE_TABLE(EST_MODE_)};

int est_plan_depth(const EstModel *m, int depth, int mode, EstPlan *out) {
    memset(out, 0, sizeof *out);
    if (depth < 1 || depth > m->layers || mode < 0 || mode >= RT_NMODES || !est_modes[mode].exists) return -1;
    int programs = (m->layers + depth - 1) / depth;
    double ops = m->layer_ops * m->layers;
    out->programs = programs;
    /* A mode with a bonded program runs it; one without runs every op as its
     * own dispatch. */
    bool per_op = !est_modes[mode].bonded;
    out->dispatches = per_op ? (int)ceil(ops) : programs;
    out->ops_per_dispatch = per_op ? 1 : ops / programs;
    out->weight_bytes = m->layer_weight_bytes * m->layers;
    out->flops_per_pos = m->layer_flops_per_pos * m->layers;
    out->attn_flops_per_pos_ctx = m->layer_attn_flops_per_pos_ctx * m->layers;
    out->io_bytes_per_pos = m->io_bytes_per_pos;
    out->kv_bytes_per_ctx = m->layer_kv_bytes_per_ctx * m->layers;
    return 0;
}

double est_utilization(const EstChip *c, double ops) {
    if (c->nutil <= 0) return 1;
    if (ops <= c->util_ops[0]) return c->util[0];
    for (int i = 1; i < c->nutil; i++)
        if (ops <= c->util_ops[i]) {
            double t = log(ops / c->util_ops[i - 1]) / log(c->util_ops[i] / c->util_ops[i - 1]);
            return c->util[i - 1] + t * (c->util[i] - c->util[i - 1]);
        }
    return c->util[c->nutil - 1];
}

/* The fixed cost of one dispatch whose program part holds `bytes` of weights:
 * the small-program figure up to small_bytes, the production one from
 * production_bytes, log-interpolated between. */
static double fixed_ms(const EstChip *c, double bytes, int path) {
    double f;
    if (bytes <= c->small_bytes)
        f = c->dispatch_ms_small;
    else if (bytes >= c->production_bytes)
        f = c->dispatch_ms;
    else {
        double t = log(bytes / c->small_bytes) / log(c->production_bytes / c->small_bytes);
        f = c->dispatch_ms_small + t * (c->dispatch_ms - c->dispatch_ms_small);
    }
    return path == EST_COREML ? f * c->coreml_factor : f;
}

void est_forward(const EstChip *c, const EstPlan *p, int tokens, int ctx, int path, EstForward *out) {
    memset(out, 0, sizeof *out);
    int q = c->min_seq > 0 ? c->min_seq : 1;
    out->positions = tokens < 1 ? q : (tokens + q - 1) / q * q;
    double per_dispatch = p->dispatches > 0 ? p->weight_bytes / p->dispatches : 0;
    out->fixed_ms = p->dispatches * fixed_ms(c, per_dispatch, path);
    double flops = out->positions * (p->flops_per_pos + p->attn_flops_per_pos_ctx * (ctx > 0 ? ctx : 0));
    double rate = c->fp16_tflops * 1e12 * est_utilization(c, p->ops_per_dispatch);
    if (c->sram_bytes > 0 && per_dispatch > c->sram_bytes) rate *= 1 - c->sram_cliff;
    out->compute_ms = rate > 0 ? flops / rate * 1e3 : 0;
    double bytes = p->weight_bytes + p->io_bytes_per_pos * out->positions * p->dispatches +
                   p->kv_bytes_per_ctx * (ctx > 0 ? ctx : 0);
    out->stream_ms = c->memory_gbs > 0 ? bytes / (c->memory_gbs * 1e9) * 1e3 : 0;
    out->ms = out->fixed_ms + fmax(out->compute_ms, out->stream_ms);
}

void est_project(const EstChip *c, const EstPlan *p, const EstScenario *s, EstResult *out) {
    memset(out, 0, sizeof *out);
    est_forward(c, p, 1, s->ctx, s->path, &out->decode);
    out->decode_ms = out->decode.ms;
    out->decode_tok_s = 1e3 / out->decode_ms;
    /* The prompt in forwards of prefill_chunk tokens; each attends to the
     * positions it carries (a causal prompt attends to half on average: the
     * attention term is small next to the weights' either way). */
    int chunk = s->prefill_chunk > 0 ? s->prefill_chunk : s->prompt_tokens;
    int n = s->prompt_tokens > 0 ? (s->prompt_tokens + chunk - 1) / chunk : 0;
    est_forward(c, p, chunk, chunk, s->path, &out->prefill);
    out->prefill_ms = n * out->prefill.ms;
    out->prefill_tok_s = out->prefill_ms > 0 ? s->prompt_tokens * 1e3 / out->prefill_ms : NAN;
    out->compile_ms = p->programs * c->compile_ms * (s->compile_factor > 0 ? s->compile_factor : 1);
    out->cold_ms = out->compile_ms + out->prefill_ms;
    out->cold_tok_s = out->cold_ms > 0 ? s->prompt_tokens * 1e3 / out->cold_ms : NAN;
    out->over_max_program =
        c->max_program_bytes > 0 && p->programs > 0 && p->weight_bytes / p->programs > c->max_program_bytes;
}
