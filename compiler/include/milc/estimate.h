/* estimate.h — small models over measured and published figures, pure
 * computation (no I/O, no printing): fitting a benchmark sweep honestly
 * (a line, flagged when it is not a cost; a hinge where the sweep bends),
 * and projecting a chunk plan onto the Apple Neural Engine from a chip's
 * published parameters.  The projection is an ESTIMATE: docs/ANE-ESTIMATE.md
 * says which parameters are measured, which are guesses, and how it compares
 * with published whole-model figures it was not fitted to. */
#ifndef MILC_ESTIMATE_H
#define MILC_ESTIMATE_H

#include <stdbool.h>
#include <stddef.h>

/* ---- fitting a sweep ------------------------------------------------------ */

/* Why a straight line's intercept must not be read as a cost. */
enum {
    EST_FIT_NEGATIVE_INTERCEPT = 1, /* a < 0: no fixed cost is negative */
    EST_FIT_POOR = 2,               /* R^2 below EST_FIT_MIN_R2 */
    EST_FIT_BENDS = 4,              /* the hinge explains the points far better (a cache cliff) */
};
#define EST_FIT_MIN_R2 0.98

typedef struct EstFit {
    bool ok;         /* at least two distinct x: a line exists */
    double a, b, r2; /* y = a + b x by least squares */
    unsigned flags;  /* EST_FIT_* */
    /* y = a + b x + c max(0, x - knot), the knot at an interior point: fitted
     * with 4 or more points; used (flag BENDS) when the line misfits. */
    bool has_hinge;
    double knot, ha, hb, hc, hr2;
} EstFit;

void est_fit(const double *x, const double *y, int n, EstFit *f);
/* "negative_intercept", "poor_fit", "bends" for one flag bit; NULL otherwise. */
const char *est_fit_flag_name(unsigned flag);

/* ---- the ANE projection ---------------------------------------------------- */

enum { EST_MAX_UTIL_POINTS = 16 };

/* One chip's parameters (a data file, est_chip_parse).  Times in ms, sizes in
 * bytes. */
typedef struct EstChip {
    char name[64];
    double fp16_tflops;                   /* peak fp16 throughput */
    double memory_gbs;                    /* bandwidth weights are streamed at, GB/s */
    double dispatch_ms_small;             /* fixed cost of one dispatch of a tiny program (direct client) */
    double dispatch_ms;                   /* the same at production sizes */
    double small_bytes, production_bytes; /* program weights at which each applies (log-interpolated between) */
    double coreml_factor;                 /* fixed cost through Core ML ÷ direct */
    double util_ops[EST_MAX_UTIL_POINTS], util[EST_MAX_UTIL_POINTS]; /* utilization vs ops per dispatch */
    int nutil;
    double compile_ms;             /* compile one program */
    double mode0_compile_factor;   /* mode 0 compiles both variants */
    int min_seq;                   /* token positions are padded up to a multiple of this */
    double sram_bytes, sram_cliff; /* a dispatch whose weights exceed SRAM loses this share of throughput */
    double max_program_bytes;      /* largest program known to run stably; 0 = no limit */
} EstChip;

/* Parse a chip file (JSON, "schema": "milc-ane-chip/1"; the layout is in
 * docs/ANE-ESTIMATE.md) as untrusted input: every field checked for type and
 * range, unknown fields refused.  0, or -1 with a message naming the field in
 * err (what: the file's name, for the message). */
int est_chip_parse(const char *text, size_t len, const char *what, EstChip *out, char *err, size_t errlen);

/* A chunk plan: what one forward pass through every program costs. */
typedef struct EstPlan {
    int programs;                  /* compiled programs (cold figures compile each) */
    int dispatches;                /* per forward pass */
    double ops_per_dispatch;       /* for utilization */
    double weight_bytes;           /* every program's weights, streamed once per forward */
    double flops_per_pos;          /* FLOPs per token position of one forward (weight matmuls) */
    double attn_flops_per_pos_ctx; /* FLOPs per position per attended position */
    double io_bytes_per_pos;       /* activations in and out of one dispatch, per position */
    double kv_bytes_per_ctx;       /* K and V cache read per attended position (every layer) */
} EstPlan;

/* A model from which plans of any depth are cut. */
typedef struct EstModel {
    int layers;
    double layer_weight_bytes, layer_flops_per_pos, layer_attn_flops_per_pos_ctx;
    double layer_ops;              /* ops per layer of a bonded program */
    double io_bytes_per_pos;       /* one program's activations in and out, per position */
    double layer_kv_bytes_per_ctx; /* K and V read per attended position */
} EstModel;

enum { EST_DIRECT = 0, EST_COREML = 1 };

/* The plan of m cut into chunks of depth layers, compiled in mode (RT_MODE_*:
 * a mode without a bonded program dispatches once per op, the others once
 * per program).  0, or -1 for a
 * depth outside 1..layers or a bad mode. */
int est_plan_depth(const EstModel *m, int depth, int mode, EstPlan *out);

typedef struct EstForward {
    int positions;                /* tokens padded to the chip's min_seq */
    double fixed_ms;              /* dispatches × fixed cost */
    double compute_ms, stream_ms; /* FLOPs ÷ (peak × utilization); bytes ÷ bandwidth */
    double ms;                    /* fixed + max(compute, stream) */
} EstForward;

/* One forward pass of `tokens` positions attending to ctx positions. */
void est_forward(const EstChip *c, const EstPlan *p, int tokens, int ctx, int path, EstForward *out);
/* Utilization at n ops per dispatch: piecewise linear in log(ops). */
double est_utilization(const EstChip *c, double ops);

typedef struct EstScenario {
    int prompt_tokens;     /* prefill length */
    int prefill_chunk;     /* tokens one prefill forward carries (1: token by token) */
    int ctx;               /* positions decode attends to */
    int path;              /* EST_DIRECT or EST_COREML */
    double compile_factor; /* 1, or the chip's mode0_compile_factor */
} EstScenario;

typedef struct EstResult {
    EstForward decode, prefill; /* one forward each */
    double decode_ms, decode_tok_s;
    double prefill_ms, prefill_tok_s;       /* cached: the whole prompt */
    double compile_ms, cold_ms, cold_tok_s; /* first call: compile every program, then prefill */
    bool over_max_program;                  /* a program is larger than the chip's stable limit */
} EstResult;

void est_project(const EstChip *c, const EstPlan *p, const EstScenario *s, EstResult *out);

#endif
