/* backend_run.c — test driver: compile DIR/model.mil with the backend in a
 * compile mode, run it on .npy inputs and write .npy outputs, for the
 * PyTorch comparison script (check_chunks.py).
 *   backend_run DIR MODE IODIR [--nonbonded] [--threads N] [--dump STAGE] [--no-fuse] [--reps N]
 * Inputs: IODIR/in_NAME.npy (fp32, converted to the model's dtype).
 * Outputs: IODIR/out_NAME.npy (fp32).  Prints one line of statistics.
 * Exit 1 on a compile error (diagnostics on stderr), 3 on a run error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "milc/backend.h"
#include "milc/half.h"
#include "milc/mil.h"
#include "milc/npy.h"

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) free(s), s = NULL;
    fclose(f);
    if (s) s[n] = 0, *len = (size_t)n;
    return s;
}

static int64_t numel(int rank, const int64_t *d) {
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= d[i];
    return n;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: backend_run DIR MODE IODIR [--nonbonded] [--threads N] [--dump STAGE] [--no-fuse]\n");
        return 2;
    }
    const char *dir = argv[1], *iodir = argv[3];
    int mode = atoi(argv[2]), threads = 1, flags = 0, reps = 1;
    const char *dump = NULL;
    bool no_fuse = false;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--nonbonded"))
            flags |= RT_RUN_NONBONDED;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dump") && i + 1 < argc)
            dump = argv[++i];
        else if (!strcmp(argv[i], "--no-fuse"))
            no_fuse = true;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.mil", dir);
    size_t len;
    char *text = read_file(path, &len);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        return 3;
    }
    DiagSink d;
    diag_init(&d);
    Arena a;
    arena_init(&a);
    IrProgram *p = mil_parse(&a, &d, path, text, len);
    MilCheckOptions co = {.target = MIL_TARGET_CPU, .model_path = dir};
    RtArtifact *art = NULL;
    BackendStats st;
    char *dumped = NULL;
    int rc = 1;
    if (p && mil_check(p, &co, &d)) {
        BackendOptions o = {.mode = mode,
                            .model_path = dir,
                            .verify_ir = true,
                            .dump_stage = dump,
                            .dump_out = &dumped,
                            .no_fuse = no_fuse};
        rc = backend_compile(p, &o, &art, &st, &d) == 0 ? 0 : 1;
    }
    char *msgs = diag_render(&d);
    fputs(msgs, stderr);
    free(msgs);
    if (dumped) fputs(dumped, stdout), free(dumped);
    if (rc) return 1;
    const RtSection *secs;
    int nsec;
    rt_artifact_sections(art, &secs, &nsec);
    RtModel *m;
    char err[512];
    RtCpu cpu = RT_CPU_AUTO; /* MILC_CPU: ctest runs the op checks per kernel variant */
    const char *ce = getenv("MILC_CPU");
    if (ce && *ce && (rt_cpu_parse(ce, &cpu, err, sizeof err) || rt_cpu_check(cpu, err, sizeof err))) {
        fprintf(stderr, "MILC_CPU: %s\n", err);
        return 2;
    }
    RtLoadOptions lo = {.nthreads = threads, .flags = RT_LOAD_VERIFY, .cpu = cpu};
    if (rt_model_load(&m, secs, nsec, &lo, err, sizeof err)) {
        fprintf(stderr, "load: %s\n", err);
        return 3;
    }
    int nin = rt_model_ninputs(m), nout = rt_model_noutputs(m);
    RtTensor in[16], out[16];
    for (int i = 0; i < nin && i < 16; i++) {
        RtIoInfo io;
        rt_model_input(m, i, &io);
        snprintf(path, sizeof path, "%s/in_%s.npy", iodir, io.name);
        NpyFile f;
        if (npy_open(&f, path, err, sizeof err) || f.arr.dtype != NPY_DTYPE_F32 ||
            (int64_t)f.arr.count != numel(io.rank, io.dims)) {
            fprintf(stderr, "input %s: %s\n", io.name, err);
            return 3;
        }
        size_t n = f.arr.count, es = rt_dtype_size(io.dtype);
        void *buf = malloc(n * es + 1);
        const float *src = f.arr.data;
        for (size_t k = 0; k < n; k++) {
            if (io.dtype == RT_F16)
                ((uint16_t *)buf)[k] = float_to_half(src[k]);
            else if (io.dtype == RT_F32)
                ((float *)buf)[k] = src[k];
            else if (io.dtype == RT_I32)
                ((int32_t *)buf)[k] = (int32_t)src[k];
            else if (io.dtype == RT_I8 || io.dtype == RT_U8)
                ((uint8_t *)buf)[k] = (uint8_t)(int32_t)src[k];
            else if (io.dtype == RT_I16 || io.dtype == RT_U16)
                ((uint16_t *)buf)[k] = (uint16_t)(int32_t)src[k];
            else
                ((uint8_t *)buf)[k] = src[k] != 0;
        }
        npy_close(&f);
        in[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank, .data = buf, .size = n * es};
        memcpy(in[i].dims, io.dims, sizeof io.dims);
    }
    for (int i = 0; i < nout && i < 16; i++) {
        RtIoInfo io;
        rt_model_output(m, i, &io);
        size_t n = (size_t)numel(io.rank, io.dims), es = rt_dtype_size(io.dtype);
        out[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank, .data = malloc(n * es + 1), .size = n * es};
        memcpy(out[i].dims, io.dims, sizeof io.dims);
    }
    RtRunStats rs;
    double best = 1e30;
    for (int r = 0; r < reps; r++) { /* --reps: best of several runs, for timing */
        if ((rc = rt_run(m, in, nin, out, nout, flags, &rs))) {
            fprintf(stderr, "run: %s\n", rt_strerror(rc));
            return 3;
        }
        if (rs.seconds < best) best = rs.seconds;
    }
    rs.seconds = best;
    for (int i = 0; i < nout; i++) {
        RtIoInfo io;
        rt_model_output(m, i, &io);
        memcpy(io.dims, out[i].dims, sizeof io.dims); /* as the run wrote it: a bounded output's rows */
        size_t n = (size_t)numel(io.rank, io.dims);
        float *f = malloc(n * 4 + 1);
        for (size_t k = 0; k < n; k++)
            f[k] = io.dtype == RT_F16    ? half_to_float(((uint16_t *)out[i].data)[k])
                   : io.dtype == RT_I32  ? (float)((int32_t *)out[i].data)[k]
                   : io.dtype == RT_BOOL ? (float)((uint8_t *)out[i].data)[k]
                   : io.dtype == RT_U8   ? (float)((uint8_t *)out[i].data)[k]
                   : io.dtype == RT_I8   ? (float)((int8_t *)out[i].data)[k]
                   : io.dtype == RT_I16  ? (float)((int16_t *)out[i].data)[k]
                   : io.dtype == RT_U16  ? (float)((uint16_t *)out[i].data)[k]
                                         : ((float *)out[i].data)[k];
        snprintf(path, sizeof path, "%s/out_%s.npy", iodir, io.name);
        if (npy_write_file(path, NPY_DTYPE_F32, io.rank, io.dims, f, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return 3;
        }
        free(f);
        free(out[i].data);
    }
    for (int i = 0; i < nin; i++) free(in[i].data);
    printf("mode=%d ops_in=%d ops_out=%d dispatches=%llu copies=%d gemm=%d norm=%d attn=%d ms_passes=%.2f "
           "ms_lower=%.2f ms_pack=%.2f run_ms=%.3f\n",
           mode, st.ops_in, st.ops_out, (unsigned long long)rs.dispatches, st.copies, st.fused_gemm, st.fused_norm,
           st.fused_attn, st.ms_passes, st.ms_lower, st.ms_pack, rs.seconds * 1e3);
    rt_model_free(m);
    rt_artifact_free(art);
    arena_free(&a);
    diag_free(&d);
    free(text);
    return 0;
}
