/* backend_internal.h — what the backend's passes, fusion and lowering share:
 * the fusion side table and the lowering entry point.  Private to
 * compiler/backend. */
#ifndef MILC_BACKEND_INTERNAL_H
#define MILC_BACKEND_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "milc/arena.h"
#include "milc/backend.h"
#include "milc/ir.h"
#include "milc/plan.h"

typedef enum FuseKind { FUSE_GEMM = 1, FUSE_NORM, FUSE_ATTN } FuseKind;

/* One fusion decision.  Members are the ops the group replaces; root is the
 * last of them in program order (where the fused kernel is emitted, since
 * every outside input is defined before it) and defines `result`. */
typedef struct FuseGroup {
    FuseKind kind;
    IrOp *root;
    IrValue *result;
    IrOp **members;
    int nmembers;
    /* GEMM: y = act(W x + bias) + residual */
    int layout;                       /* RT_GEMM_ROWS (linear) or RT_GEMM_CHANNELS (1x1 conv) */
    IrValue *x, *w, *bias, *residual; /* w, bias: consts */
    int act;                          /* RtAct */
    bool post_views;                  /* linear [M, K] -> transpose -> reshape [1, N, 1.., M] before the epilogue */
    /* NORM */
    int norm_kind; /* RT_NORM_LAYER / RT_NORM_RMS */
    int axis_begin, axis_end;
    IrValue *gamma, *beta; /* consts or NULL */
    double eps;
    /* ATTENTION: softmax(q kᵀ scale + mask) v in the frame [B, H, L, S] */
    IrValue *q, *k, *v, *mask;        /* q as [.., M, E]; k as [.., E, S] if k_t else [.., S, E] */
    bool k_t, v_t;                    /* v as [.., Ev, S] if v_t else [.., S, Ev] */
    bool causal;                      /* the mask is a constant causal mask: use the flag */
    bool in_place;                    /* few query rows and K or V transposed: the kernel reads
                                * them where they lie (RtAttnParams flags), no transpose */
    bool split;                       /* in_place, and K, V are concats along S of two parts each */
    IrValue *k_parts[2], *v_parts[2]; /* split: the concat inputs, [B, C, 1.., S_i] */
    double scale;
    int64_t frame[4]; /* B, H, L, S of the softmax */
} FuseGroup;

/* The fusion table: op->aux of every member points at its group.  Built by
 * backend_fuse in the program's arena; valid while the IR is unchanged. */
typedef struct FuseTable {
    FuseGroup **groups;
    int ngroups, cap;
    int ngemm, nnorm, nattn;
} FuseTable;

void backend_fuse(IrFunction *f, Arena *a, FuseTable *t);
/* For the lowering only: fixed-length lists (a constant length and element
 * shape) typed as tensors [N, *elem], one buffer each like any value; a list
 * that grows at run time keeps its list type, and the lowering refuses its
 * ops.  backend_lists_restore puts the list types back, so the program
 * stays what the checker accepted (the passes' verifier re-checks it). */
typedef struct ListTypes {
    IrType **at;
    IrType *was;
    int n, cap;
} ListTypes;
void backend_lists_as_tensors(IrFunction *f, ListTypes *lt);
void backend_lists_restore(ListTypes *lt);
/* A conv the GEMM kernel computes: constant [Cout, Cin, 1.., 1] weight, groups 1,
 * unit strides, no padding. */
bool backend_conv_is_1x1(const IrOp *op);
/* "// fused ..." lines describing t, malloc'd. */
char *backend_fuse_describe(const FuseTable *t);

/* Lower f into b for program prog; fuse (NULL: no fusion) and views
 * (bonded: reshapes/transposes/slices are strided views, materialized only
 * when a kernel needs them) select the bonded flavour.  Weights are shared
 * across both programs of mode 0 through ctx.  Returns 0 or -1 (errors in d). */
typedef struct LowerShared LowerShared;
LowerShared *lower_shared_new(RtPlanBuilder *b, IrFunction *f, const char *model_dir, DiagSink *d);
/* Every BLOBFILE reads weights (BackendOptions.weights), no file. */
void lower_shared_weights(LowerShared *s, const MilBlobFile *weights);
void lower_shared_free(LowerShared *s);
/* fuse (may be NULL) tells which fp16 inputs a fused attention reads in place:
 * those become F16 buffers bound without conversion. */
int lower_inputs_outputs(LowerShared *s, const FuseTable *fuse);
int lower_program(LowerShared *s, const FuseTable *fuse, bool views, int *nops, int *ncopies);
int lower_bind_outputs(LowerShared *s);

#endif
