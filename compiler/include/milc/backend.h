/* backend.h — the CPU compiler backend: IR passes (dead code, constant
 * folding, fusion) and lowering of a checked MIL function to an execution plan
 * (milc/plan.h) frozen into an artifact (milc/rt.h), per compile mode.
 *
 * Pipeline (backend_compile, read top to bottom in backend.c):
 *   check -> dce -> fold -> dce -> fuse -> lower -> finish (pack, arena plan)
 * Every stage can be dumped as valid MIL text (BackendOptions.dump_stage).
 *
 * Fusion never rewrites the IR into ops MIL has no name for: the "fuse" stage
 * records its decisions in a side table the lowering consumes, so the IR (and
 * every dump) stays plain, parseable MIL.  The "fuse" dump appends the groups
 * as `//` comments after the program text.
 *
 * Modes (DESIGN.md): 2 bonded (fused kernels, views instead of copies, one
 * program), 1 non-bonded (each MIL op its own plan op, every intermediate
 * materialized, one dispatch per op), 0 both programs in one artifact.
 */
#ifndef MILC_BACKEND_H
#define MILC_BACKEND_H

#include <stdbool.h>

#include "milc/blob.h"
#include "milc/diag.h"
#include "milc/ir.h"
#include "milc/rt.h"

typedef struct BackendOptions {
    int mode;               /* RT_MODE_* (milc/plan.h's table) */
    const char *model_path; /* directory @model_path names; NULL: the MIL file's directory */
    /* Or NULL; else the file every BLOBFILE names (a build's weights, made
     * in memory), and with weights_image its memory: each weight's pages go
     * back to the OS once packed into the artifact. */
    const MilBlobFile *weights;
    const MilBlobImage *weights_image;
    const char *dump_stage; /* NULL, or one of backend_stage_names() */
    char **dump_out;        /* receives the malloc'd MIL text of dump_stage (caller frees) */
    int threads;            /* reserved: the thread count is a load option (RtLoadOptions) */
    bool verify_ir;         /* verify the IR after every pass (always on in tests) */
    bool no_fuse;           /* mode 2 without pattern fusion (views still used) */
    bool same_ops;          /* mode 0: the non-bonded program gets the bonded program's ops
                               (fused), one dispatch each: isolates per-dispatch overhead */
    const char *function;   /* the function compiled; NULL: "main", or the program's only one */
} BackendOptions;

typedef struct BackendStats {
    double ms_passes, ms_lower, ms_pack;    /* wall time of the passes, lowering, rtb_finish */
    int ops_in;                             /* non-const ops of main after checking */
    int ops_out;                            /* plan ops of the bonded program (mode 1: of the non-bonded one) */
    int dispatches;                         /* per forward of the default program: 1 bonded, ops_out non-bonded */
    int fused_gemm, fused_norm, fused_attn; /* fusion groups found (mode 0/2) */
    int copies;                             /* COPY ops in the default program */
} BackendStats;

/* Compiles function "main" of p (which must have passed mil_check; the passes
 * edit it in place, in p's arena) into a new artifact, which embeds p's
 * canonical text as it was before the passes.  On success returns 0
 * and *out is owned by the caller (rt_artifact_free).  On failure returns -1
 * with errors in d (bad input: at the op's SrcLoc; an unknown dump stage;
 * a weight file that cannot be read).  st may be NULL.  When o->dump_stage
 * names a stage, *o->dump_out receives that stage's MIL text even if a later
 * stage fails (NULL if the pipeline stopped before it). */
int backend_compile(IrProgram *p, const BackendOptions *o, RtArtifact **out, BackendStats *st, DiagSink *d);

/* The stage names accepted by dump_stage, NULL-terminated: "parse", "check",
 * "dce", "fold", "fuse" ("parse" and "check" print the input program). */
const char *const *backend_stage_names(void);

/* ---- the passes, one function each (also used by tests) ---- */

/* Turns every inline literal argument into a const op defining a value, so
 * later passes and the lowering see arguments only as values.  Returns the
 * number of literals hoisted. */
int backend_hoist_literals(IrFunction *f);
/* Removes ops none of whose results are used (function outputs count as
 * uses).  Returns the number of ops removed. */
int backend_dce(IrFunction *f);
/* Folds ops whose value inputs are all small constants (shape math, scalar
 * arithmetic, reshape/transpose/cast of constants) into const ops.  Returns
 * the number of ops folded. */
int backend_fold(IrFunction *f);
/* Checks SSA structure: every argument value defined before use in f (or an
 * input), result back-pointers, output liveness, op kinds.  Errors go to d
 * with stage in the message; false if any. */
bool backend_verify(IrFunction *f, const char *stage, DiagSink *d);
/* Whether the CPU backend lowers op kind k at all (it may still refuse some
 * of its dtypes or arguments); other ops compile to a clean error. */
bool backend_lowers(IrOpKind k);
/* An op the backend runs only once backend_fold made it a constant (non_zero
 * of a constant, whose result has a shape and may feed any op); backend_fold
 * folds constants of up to BACKEND_FOLD_MAX_ELEMS elements. */
bool backend_folds_only(const IrOp *op);
enum { BACKEND_FOLD_MAX_ELEMS = 1 << 16 };

#endif
