/* backend.c — the compile pipeline of the CPU backend, top to bottom:
 * check, dead code, folding, fusion, lowering per compile mode, finish.
 * Each stage can be dumped as MIL text; the verifier runs between passes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend_internal.h"
#include "milc/mil.h"

static const char *const stage_names[] = {"parse", "check", "dce", "fold", "fuse", NULL};

const char *const *backend_stage_names(void) { return stage_names; }

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

typedef struct Ctx {
    IrProgram *p;
    IrFunction *f;
    const BackendOptions *o;
    DiagSink *d;
} Ctx;

/* After a stage: dump it if asked, verify if asked.  false stops the pipeline. */
static bool stage_done(Ctx *c, const char *stage, const char *extra) {
    const BackendOptions *o = c->o;
    if (o->dump_stage && o->dump_out && !strcmp(o->dump_stage, stage)) {
        size_t n = 0;
        char *text = mil_print(c->p, &n);
        if (text && extra) {
            size_t m = strlen(extra);
            char *t = realloc(text, n + m + 1);
            if (t) memcpy(t + n, extra, m + 1), text = t;
        }
        *o->dump_out = text;
    }
    if (o->verify_ir && strcmp(stage, "parse") && strcmp(stage, "check")) {
        if (!backend_verify(c->f, stage, c->d)) return false;
        MilCheckOptions co = {.target = MIL_TARGET_CPU, .model_path = o->model_path, .weights = o->weights};
        /* Types after a pass must still check; weights were checked already. */
        if (!mil_check(c->p, &co, c->d)) return false;
    }
    return true;
}

static int count_ops(const IrFunction *f) {
    int n = 0;
    IR_FOR_EACH_OP(op, f) n += op->kind != OP_CONST;
    return n;
}

static char *model_dir_of(const IrProgram *p, const BackendOptions *o) {
    if (o->model_path) return strdup(o->model_path);
    const char *file = p->file ? p->file : "";
    const char *slash = strrchr(file, '/');
    if (!slash) return strdup(".");
    size_t n = (size_t)(slash - file);
    char *s = malloc(n + 2);
    if (!s) return NULL;
    memcpy(s, file, n ? n : 1);
    s[n ? n : 1] = 0;
    return s;
}

static void discard_weight(void *image, const void *data, size_t n) { milblob_image_discard(image, data, n); }

/* The function to compile (ir_program_entry), or NULL after a diagnostic
 * listing what there is. */
static IrFunction *pick_function(const IrProgram *p, const char *name, SrcLoc at, DiagSink *d) {
    IrFunction *f = ir_program_entry(p, name);
    if (f) return f;
    char list[512] = "";
    size_t n = 0;
    for (int i = 0; i < p->nfuncs && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s'%s'", i ? ", " : "", p->funcs[i]->name);
    if (name || p->nfuncs == 0)
        diag_error(d, at, "the program has no function '%s'%s%s", name ? name : "main", p->nfuncs ? "; it has " : "",
                   list);
    else
        diag_error(d, at, "the program has %d functions (%s), none of them 'main': name the one to compile", p->nfuncs,
                   list);
    return NULL;
}

int backend_compile(IrProgram *p, const BackendOptions *o, RtArtifact **out, BackendStats *st, DiagSink *d) {
    BackendStats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    *out = NULL;
    if (o->dump_out) *o->dump_out = NULL;
    SrcLoc ploc = {p->file, 0, 0};
    if (!rt_mode(o->mode)) {
        diag_error(d, ploc, "compile mode %d: want%s", o->mode, RT_MODE_TABLE(RT_MODE_HELP_));
        return -1;
    }
    if (o->dump_stage) {
        bool known = false;
        for (int i = 0; stage_names[i]; i++) known |= !strcmp(stage_names[i], o->dump_stage);
        if (!known) {
            diag_error(d, ploc, "unknown dump stage '%s' (stages: parse, check, dce, fold, fuse)", o->dump_stage);
            return -1;
        }
    }
    IrFunction *f = pick_function(p, o->function, ploc, d);
    if (!f) return -1;
    Ctx c = {p, f, o, d};
    double t0 = now_ms();
    /* The artifact embeds the program as given (canonical text), not as the
     * passes left it: that is the text its cache key and users know. */
    size_t mlen = 0;
    char *mil = mil_print(p, &mlen);
    st->ops_in = count_ops(f);

    /* ---- passes ---- */
    FuseTable fuse = {0};
    const RtModeInfo *mi = rt_mode(o->mode);
    bool fusing = mi->bonded && !o->no_fuse;
    if (!stage_done(&c, "parse", NULL) || !stage_done(&c, "check", NULL)) goto fail;
    /* Ops the backend does not run stop here, before any pass sees them. */
    bool lowerable = true;
    IR_FOR_EACH_OP(op, f)
    if (!backend_lowers(op->kind)) {
        diag_error(d, op->loc, "op %s is not supported by the cpu backend yet", mil_op_name(op->kind));
        lowerable = false;
    }
    if (!lowerable) goto fail;
    backend_hoist_literals(f);
    backend_dce(f);
    if (!stage_done(&c, "dce", NULL)) goto fail;
    if (backend_fold(f)) backend_dce(f);
    if (!stage_done(&c, "fold", NULL)) goto fail;
    if (fusing) backend_fuse(f, p->arena, &fuse);
    char *desc = fusing ? backend_fuse_describe(&fuse) : NULL;
    bool ok = stage_done(&c, "fuse", desc);
    free(desc);
    if (!ok) goto fail;
    st->fused_gemm = fuse.ngemm, st->fused_norm = fuse.nnorm, st->fused_attn = fuse.nattn;
    double t1 = now_ms();
    st->ms_passes = t1 - t0;

    /* ---- lowering: the bonded program first (mode 0's default), then the non-bonded one ---- */
    RtPlanBuilder *b = rtb_new(o->mode);
    char *dir = model_dir_of(p, o);
    if (!b || !dir) {
        rtb_free(b);
        free(dir);
        diag_error(d, ploc, "out of memory");
        goto fail;
    }
    LowerShared *ls = lower_shared_new(b, f, dir, d);
    if (o->weights) lower_shared_weights(ls, o->weights);
    if (o->weights && o->weights_image) rtb_on_consumed(b, discard_weight, (void *)o->weights_image);
    ListTypes lists;
    backend_lists_as_tensors(f, &lists);
    int rc = lower_inputs_outputs(ls, fusing ? &fuse : NULL);
    int nops = 0, ncopies = 0;
    if (rc == 0 && mi->bonded) {
        rc = rtb_program(b, RT_PROG_BONDED) < 0 ? -1 : lower_program(ls, fusing ? &fuse : NULL, true, &nops, &ncopies);
        st->ops_out = nops, st->copies = ncopies, st->dispatches = 1;
    }
    if (rc == 0 && mi->nonbonded) {
        bool same = o->same_ops && mi->bonded;
        rc = rtb_program(b, RT_PROG_NONBONDED) < 0
                 ? -1
                 : lower_program(ls, same && fusing ? &fuse : NULL, same, &nops, &ncopies);
        if (!mi->bonded) st->ops_out = nops, st->copies = ncopies, st->dispatches = nops;
    }
    if (rc == 0) rc = lower_bind_outputs(ls);
    backend_lists_restore(&lists);
    double t2 = now_ms();
    st->ms_lower = t2 - t1;
    if (rc == 0) {
        char err[512];
        int frc = rtb_finish(b, mil, mil ? mlen : 0, out, err, sizeof err);
        if (frc < 0) {
            diag_error(d, ploc, "CPU backend: %s", err);
            rc = -1;
        }
    } else if (!diag_failed(d)) {
        diag_error(d, ploc, "CPU backend: lowering failed");
    }
    st->ms_pack = now_ms() - t2;
    lower_shared_free(ls);
    rtb_free(b);
    free(dir);
    free(mil);
    return rc;
fail:
    free(mil);
    return -1;
}
