/* compile.c — a program file (a .mil file, a folder holding one, a
 * .mlpackage) read, checked and compiled into an artifact file, with no
 * cache: `milc compile`, and the reading and checking every file-taking
 * command shares. */
#include <stdlib.h>
#include <string.h>

#include "milc/pipeline.h"
#include "milc/arena.h"
#include "milc/backend.h"
#include "milc/rt.h"

static int failed_rc(const DiagSink *d) { return d->system_errors ? MILC_E_SYSTEM : MILC_E_INPUT; }

int pipeline_load_program_with(Arena *arena, const char *path, const ProgramLoadOptions *o, PkgProgram *out,
                               DiagSink *d) {
    memset(out, 0, sizeof *out);
    if (pkg_load(arena, d, path, o->model_path, out) != 0) return failed_rc(d);
    if (!mil_specialize(out->prog, o->function, o->shapes, o->nshapes, false, d) ||
        !mil_specialize(out->prog, o->function, o->from_data, o->nfrom_data, true, d))
        return failed_rc(d);
    MilCheckOptions co = {.target = o->target, .model_path = out->model_dir};
    return mil_check(out->prog, &co, d) ? MILC_OK : failed_rc(d);
}

int pipeline_load_program(Arena *arena, const char *path, const char *model_path, MilTarget target, PkgProgram *out,
                          DiagSink *d) {
    return pipeline_load_program_with(arena, path, &(ProgramLoadOptions){.model_path = model_path, .target = target},
                                      out, d);
}

char *pipeline_artifact_path(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    char *out = malloc(n + 6);
    if (!out) return NULL;
    memcpy(out, path, n);
    out[n] = 0;
    static const char *const exts[] = {".mil", ".mlpackage", ".mlmodelc"};
    for (int i = 0; i < 3; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && strcmp(out + n - e, exts[i]) == 0) {
            out[n - e] = 0;
            break;
        }
    }
    strcat(out, ".milc");
    return out;
}

bool pipeline_stage_known(const char *stage) {
    for (const char *const *s = backend_stage_names(); *s; s++)
        if (strcmp(*s, stage) == 0) return true;
    return false;
}

/* Write art to out_path (atomically: the runtime's temp file and rename). */
static int write_artifact(const RtArtifact *art, const char *out_path, CompileFileResult *res) {
    char err[512];
    if (rt_artifact_write_file(art, out_path, err, sizeof err) != 0) {
        lib_error("%s", err);
        return MILC_E_SYSTEM;
    }
    res->bytes = rt_artifact_file_size(art);
    return MILC_OK;
}

int pipeline_compile_file(const char *path, const char *out_path, const CompileFileOptions *o, CompileFileResult *res,
                          DiagSink *d) {
    memset(res, 0, sizeof *res);
    long long t0 = lib_now_ns();
    Arena arena;
    arena_init(&arena);
    PkgProgram pp;
    RtArtifact *art = NULL;
    ProgramLoadOptions lo = {.model_path = o->model_path,
                             .target = MIL_TARGET_CPU,
                             .function = o->function,
                             .shapes = o->shapes,
                             .nshapes = o->nshapes};
    int rc = pipeline_load_program_with(&arena, path, &lo, &pp, d);
    res->ms_check = lib_ms_since(t0);
    if (rc == MILC_OK) {
        BackendOptions bo = {.mode = o->mode,
                             .model_path = pp.model_dir,
                             .dump_stage = o->dump_stage,
                             .dump_out = o->dump_stage ? &res->dump : NULL,
                             .no_fuse = o->no_fuse,
                             .function = o->function};
        BackendStats st = {0};
        if (backend_compile(pp.prog, &bo, &art, &st, d) != 0) rc = failed_rc(d);
        res->ops_in = st.ops_in, res->ops_out = st.ops_out, res->dispatches = st.dispatches;
        res->ms_passes = st.ms_passes, res->ms_lower = st.ms_lower, res->ms_pack = st.ms_pack;
    } else if (o->dump_stage && pp.prog && strcmp(o->dump_stage, "parse") == 0) {
        /* It parsed but failed its checks: the parse stage is still there to show. */
        res->dump = mil_print(pp.prog, NULL);
    }
    /* Warnings-as-errors and errors the stages reported without failing
     * (none today) still keep the file from being written. */
    if (rc == MILC_OK && diag_failed(d)) rc = failed_rc(d);
    if (rc == MILC_OK) rc = write_artifact(art, out_path, res);
    res->ms_total = lib_ms_since(t0);
    if (art) rt_artifact_free(art);
    arena_free(&arena);
    return rc;
}
