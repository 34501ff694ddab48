/* run_npy.c — `milc run`: a loaded model run on .npy files, its outputs
 * written as .npy files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "model.h"
#include "run_npy.h"
#include "milc/half.h"
#include "milc/npy.h"
#include "milc/osfile.h"

static const char *rt_dtype_str(RtDType t) {
    switch (t) {
    case RT_F32: return "fp32";
    case RT_F16: return "fp16";
    case RT_I32: return "int32";
    case RT_BOOL: return "bool";
    case RT_U8: return "u8";
    }
    return "?";
}

static void shape_str(const int64_t *dims, int rank, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++) k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* Copy an .npy array into a tensor of the model's dtype: the npy dtype must be
 * the input's, except that fp32 data may feed an fp16 input (rounded). */
static int bind_input(const RtIoInfo *io, const char *what, const char *file, const NpyArray *arr, RtTensor *t) {
    char want[128], got[128];
    shape_str(io->dims, io->rank, want, sizeof want);
    shape_str(arr->dims, arr->rank, got, sizeof got);
    bool same_shape = arr->rank == io->rank;
    for (int d = 0; same_shape && d < io->rank; d++) same_shape = arr->dims[d] == io->dims[d];
    if (!same_shape) {
        cli_error("%s: %s '%s' wants shape %s, the file has %s", file, what, io->name, want, got);
        return EXIT_INPUT;
    }
    size_t n = arr->count;
    *t = (RtTensor){.dtype = io->dtype, .rank = io->rank};
    memcpy(t->dims, io->dims, sizeof t->dims);
    t->size = n * rt_dtype_size(io->dtype);
    t->data = malloc(t->size ? t->size : 1);
    if (!t->data) { cli_error("out of memory"); return EXIT_SYSTEM; }
    bool ok = true;
    if (io->dtype == RT_F16 && arr->dtype == NPY_DTYPE_F16) memcpy(t->data, arr->data, t->size);
    else if (io->dtype == RT_F16 && arr->dtype == NPY_DTYPE_F32) float_to_half_n(arr->data, t->data, n);
    else if (io->dtype == RT_F32 && arr->dtype == NPY_DTYPE_F32) memcpy(t->data, arr->data, t->size);
    else if (io->dtype == RT_F32 && arr->dtype == NPY_DTYPE_F16) half_to_float_n(arr->data, t->data, n);
    else if (io->dtype == RT_I32 && arr->dtype == NPY_DTYPE_I32) memcpy(t->data, arr->data, t->size);
    else if (io->dtype == RT_BOOL && arr->dtype == NPY_DTYPE_BOOL) memcpy(t->data, arr->data, t->size);
    else ok = false;
    if (!ok) {
        cli_error("%s: %s '%s' wants %s, the file holds %s", file, what, io->name, rt_dtype_str(io->dtype),
                  npy_dtype_name(arr->dtype));
        free(t->data);
        t->data = NULL;
        return EXIT_INPUT;
    }
    return EXIT_OK;
}

/* The FILE of the NAME=FILE spec for name, or NULL. */
static const char *spec_file(const char *const *specs, int n, const char *name) {
    for (int k = 0; k < n; k++) {
        const char *eq = strchr(specs[k], '=');
        if (eq && strlen(name) == (size_t)(eq - specs[k]) && strncmp(name, specs[k], (size_t)(eq - specs[k])) == 0) return eq + 1;
    }
    return NULL;
}

/* io i of the model: an input, or (state) a state. */
static void io_of(const RtModel *m, int i, bool state, RtIoInfo *io) {
    if (state) rt_model_state(m, i, io);
    else rt_model_input(m, i, io);
}

/* Every spec must be NAME=FILE and name an input (a state). */
static int specs_check(const RtModel *m, const char *const *specs, int n, bool state) {
    int count = state ? rt_model_nstates(m) : rt_model_ninputs(m);
    for (int k = 0; k < n; k++) {
        const char *eq = strchr(specs[k], '=');
        if (!eq) { cli_usage_error("run", "--%s wants NAME=FILE.npy, not '%s'", state ? "state" : "input", specs[k]); return EXIT_USAGE; }
        bool found = false;
        for (int i = 0; i < count; i++) {
            RtIoInfo io;
            io_of(m, i, state, &io);
            found |= spec_file(specs + k, 1, io.name) != NULL;
        }
        if (!found) { cli_error("the model has no %s '%.*s'", state ? "state" : "input", (int)(eq - specs[k]), specs[k]); return EXIT_INPUT; }
    }
    return EXIT_OK;
}

/* Reads FILE.npy into t for io (an input, a state). */
static int read_npy(const RtIoInfo *io, const char *what, const char *file, RtTensor *t) {
    NpyFile nf;
    char err[512];
    int r = npy_open(&nf, file, err, sizeof err);
    if (r != 0) { cli_error("%s", err); return r == NPY_EIO ? EXIT_SYSTEM : EXIT_INPUT; }
    int rc = bind_input(io, what, file, &nf.arr, t);
    npy_close(&nf);
    return rc;
}

static NpyDType npy_of(RtDType t) {
    return t == RT_F16 ? NPY_DTYPE_F16 : t == RT_F32 ? NPY_DTYPE_F32 : t == RT_I32 ? NPY_DTYPE_I32 : NPY_DTYPE_BOOL;
}

int model_run_npy(LoadedModel *lm, const char *const *inputs, int ninputs, const char *const *states, int nstates,
                  const char *outdir, int json, int repeat, int quiet) {
    RtModel *m = lm->model;
    int nin = rt_model_ninputs(m), nout = rt_model_noutputs(m), nst = rt_model_nstates(m);
    RtTensor *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)nout + (size_t)nst + 1, sizeof *out);
    RtTensor *st_in = calloc((size_t)nst + 1, sizeof *st_in); /* the seeds: data NULL for a state left at zero */
    int rc = EXIT_OK;
    json_t *outs = NULL; /* --json: the outputs written */
    if (!in || !out || !st_in) { cli_error("out of memory"); rc = EXIT_SYSTEM; goto done; }
    /* Every --input must name an input, and every input must be given;
     * every --state must name a state (the others start at zero). */
    if ((rc = specs_check(m, inputs, ninputs, false)) || (rc = specs_check(m, states, nstates, true))) goto done;
    for (int i = 0; i < nin; i++) {
        RtIoInfo io;
        rt_model_input(m, i, &io);
        const char *file = spec_file(inputs, ninputs, io.name);
        char shape[128];
        shape_str(io.dims, io.rank, shape, sizeof shape);
        if (!file) { cli_error("missing --input %s=FILE.npy (%s %s)", io.name, rt_dtype_str(io.dtype), shape); rc = EXIT_USAGE; goto done; }
        if ((rc = read_npy(&io, "input", file, &in[i]))) goto done;
    }
    for (int i = 0; i < nst; i++) {
        RtIoInfo io;
        rt_model_state(m, i, &io);
        const char *file = spec_file(states, nstates, io.name);
        if (file && (rc = read_npy(&io, "state", file, &st_in[i]))) goto done;
    }
    /* Inputs are right: now the arena and scratch (checked against --max-memory). */
    if ((rc = model_realize(lm)) != EXIT_OK) goto done;
    m = lm->model;
    for (int i = 0; i < nout + nst; i++) { /* the outputs, then each state's final value */
        RtIoInfo io;
        if (i < nout) rt_model_output(m, i, &io);
        else rt_model_state(m, i - nout, &io);
        out[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank};
        memcpy(out[i].dims, io.dims, sizeof out[i].dims);
        size_t n = rt_dtype_size(io.dtype);
        for (int d = 0; d < io.rank; d++) n *= (size_t)io.dims[d];
        out[i].size = n;
        out[i].data = malloc(n ? n : 1);
        if (!out[i].data) { cli_error("out of memory"); rc = EXIT_SYSTEM; goto done; }
    }
    RtRunStats st = {0};
    double best = 1e30;
    for (int k = 0; k < (repeat > 0 ? repeat : 1); k++) {
        /* every repeat starts from the seeds: the same run each time */
        rt_model_state_reset(m);
        for (int i = 0; i < nst; i++)
            if (st_in[i].data && rt_model_state_set(m, i, &st_in[i]) != 0) { cli_error("internal: state %d seed", i); rc = EXIT_SYSTEM; goto done; }
        int r = rt_run(m, in, nin, out, nout, 0, &st);
        if (r == RT_EINDEX) { /* an input's fault: a token id or position past its table */
            cli_error("run failed: an index input is out of range (a token id at or above the vocabulary, a position "
                      "at or above the model's positions, or a state update outside its state)");
            rc = EXIT_INPUT;
            goto done;
        }
        if (r != 0) { cli_error("run failed: %s", rt_strerror(r)); rc = r == RT_EBIND ? EXIT_INPUT : EXIT_SYSTEM; goto done; }
        if (st.seconds < best) best = st.seconds;
    }
    for (int i = 0; i < nst; i++)
        if (rt_model_state_get(m, i, &out[nout + i]) != 0) { cli_error("internal: state %d", i); rc = EXIT_SYSTEM; goto done; }
    outs = json_array();
    for (int i = 0; i < nout + nst; i++) {
        RtIoInfo io;
        if (i < nout) rt_model_output(m, i, &io);
        else rt_model_state(m, i - nout, &io);
        char path[4096], err[512], shape[128];
        shape_str(io.dims, io.rank, shape, sizeof shape);
        if (!rt_name_ok(io.name)) { /* the loader refused it already: a file name must never leave outdir */
            rt_name_show(io.name, err, sizeof err);
            cli_error("refusing to write output \"%s\": not an identifier", err);
            rc = EXIT_INPUT;
            goto done;
        }
        snprintf(path, sizeof path, "%s/%s.npy", outdir, io.name);
        if (npy_write_file(path, npy_of(io.dtype), io.rank, io.dims, out[i].data, err, sizeof err) != 0) {
            cli_error("%s", err);
            rc = EXIT_SYSTEM;
            goto done;
        }
        if (json) {
            json_t *dims = json_array();
            for (int d = 0; d < io.rank; d++) cli_json_push(dims, json_integer(io.dims[d]));
            cli_json_push(outs, cli_json_obj("name", cli_json_str(io.name), "file", cli_json_str(path), "dtype",
                                             json_string(rt_dtype_str(io.dtype)), "shape", dims, "state",
                                             json_boolean(i >= nout), NULL));
        } else if (!quiet) fprintf(stderr, "wrote %s (%s%s %s)\n", path, i >= nout ? "state, " : "", rt_dtype_str(io.dtype), shape);
    }
    if (json)
        cli_json_print(stdout, cli_json_obj("run_ms", cli_json_real(best * 1e3, 4), "dispatches",
                                            json_integer((json_int_t)st.dispatches), "ops", json_integer((json_int_t)st.ops),
                                            "outputs", outs, NULL)),
            outs = NULL;
    else if (!quiet) fprintf(stderr, "ran in %.3f ms, %llu dispatch%s, %llu ops\n", best * 1e3, (unsigned long long)st.dispatches,
                 st.dispatches == 1 ? "" : "es", (unsigned long long)st.ops);
done:
    for (int i = 0; in && i < nin; i++) free(in[i].data);
    for (int i = 0; out && i < nout + nst; i++) free(out[i].data);
    for (int i = 0; st_in && i < nst; i++) free(st_in[i].data);
    free(st_in);
    free(in);
    free(out);
    json_decref(outs);
    return rc;
}
