/* run_npy.c — `milc run`: a loaded model run on .npy files, its outputs
 * written as .npy files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "milc/model.h"
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
    case RT_U8: return "uint8";
    case RT_I8: return "int8";
    case RT_I16: return "int16";
    case RT_U16: return "uint16";
    }
    return "?";
}

static void shape_str(const int64_t *dims, int rank, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

static NpyDType npy_of(RtDType t) {
    switch (t) {
    case RT_F16: return NPY_DTYPE_F16;
    case RT_F32: return NPY_DTYPE_F32;
    case RT_I32: return NPY_DTYPE_I32;
    case RT_U8: return NPY_DTYPE_U8;
    case RT_I8: return NPY_DTYPE_I8;
    case RT_I16: return NPY_DTYPE_I16;
    case RT_U16: return NPY_DTYPE_U16;
    case RT_BOOL: break;
    }
    return NPY_DTYPE_BOOL;
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
    if (!t->data) {
        cli_error("out of memory");
        return EXIT_SYSTEM;
    }
    bool ok = true;
    if (io->dtype == RT_F16 && arr->dtype == NPY_DTYPE_F16)
        memcpy(t->data, arr->data, t->size);
    else if (io->dtype == RT_F16 && arr->dtype == NPY_DTYPE_F32)
        float_to_half_n(arr->data, t->data, n);
    else if (io->dtype == RT_F32 && arr->dtype == NPY_DTYPE_F32)
        memcpy(t->data, arr->data, t->size);
    else if (io->dtype == RT_F32 && arr->dtype == NPY_DTYPE_F16)
        half_to_float_n(arr->data, t->data, n);
    else if (io->dtype == RT_I32 && arr->dtype == NPY_DTYPE_I32)
        memcpy(t->data, arr->data, t->size);
    else if ((io->dtype == RT_BOOL || rt_dtype_narrow_int(io->dtype)) && arr->dtype == npy_of(io->dtype))
        memcpy(t->data, arr->data, t->size);
    else
        ok = false;
    if (!ok) {
        cli_error("%s: %s '%s' wants %s, the file holds %s", file, what, io->name, rt_dtype_str(io->dtype),
                  npy_dtype_name(arr->dtype));
        free(t->data);
        t->data = NULL;
        return EXIT_INPUT;
    }
    return EXIT_OK;
}


/* Whether spec (NAME=FILE, eq at its '=') names the input (state) called name. */
static bool names_input(const char *spec, const char *eq, const char *name) {
    size_t n = (size_t)(eq - spec);
    return strlen(name) == n && strncmp(name, spec, n) == 0;
}

/* io i of the model: an input, or (state) a state. */
static void io_of(const RtModel *m, int i, bool state, RtIoInfo *io) {
    if (state)
        rt_model_state(m, i, io);
    else
        rt_model_input(m, i, io);
}

/* Every --input (--state) must be NAME=FILE and name an input (a state) of m. */
static int check_inputs(RtModel *m, const char *const *inputs, int ninputs, bool state) {
    int nin = state ? rt_model_nstates(m) : rt_model_ninputs(m);
    const char *what = state ? "state" : "input";
    for (int k = 0; k < ninputs; k++) {
        const char *eq = strchr(inputs[k], '=');
        bool found = false;
        for (int i = 0; eq && i < nin; i++) {
            RtIoInfo io;
            io_of(m, i, state, &io);
            found |= names_input(inputs[k], eq, io.name);
        }
        if (!eq) {
            cli_usage_error("run", "--%s wants NAME=FILE.npy, not '%s'", what, inputs[k]);
            return EXIT_USAGE;
        }
        if (!found) {
            cli_error("the model has no %s '%.*s'", what, (int)(eq - inputs[k]), inputs[k]);
            return EXIT_INPUT;
        }
    }
    return EXIT_OK;
}

/* Every input of m read from its file into in[] (each given: check_inputs);
 * state: the states given a seed (the others keep data NULL: zero). */
static int read_inputs(RtModel *m, const char *const *inputs, int ninputs, bool state, RtTensor *in) {
    for (int i = 0; i < (state ? rt_model_nstates(m) : rt_model_ninputs(m)); i++) {
        RtIoInfo io;
        io_of(m, i, state, &io);
        const char *file = NULL;
        for (int k = 0; k < ninputs; k++)
            if (names_input(inputs[k], strchr(inputs[k], '='), io.name)) file = strchr(inputs[k], '=') + 1;
        char shape[128];
        shape_str(io.dims, io.rank, shape, sizeof shape);
        if (!file && state) continue;
        if (!file) {
            cli_error("missing --input %s=FILE.npy (%s %s)", io.name, rt_dtype_str(io.dtype), shape);
            return EXIT_USAGE;
        }
        NpyFile nf;
        char err[512];
        int r = npy_open(&nf, file, err, sizeof err);
        if (r != 0) {
            cli_error("%s", err);
            return r == NPY_EIO ? EXIT_SYSTEM : EXIT_INPUT;
        }
        int rc = bind_input(&io, state ? "state" : "input", file, &nf.arr, &in[i]);
        npy_close(&nf);
        if (rc) return rc;
    }
    return EXIT_OK;
}

/* Output (or, past the outputs, state) i of m. */
static void out_of(const RtModel *m, int i, RtIoInfo *io) {
    int nout = rt_model_noutputs(m);
    if (i < nout)
        rt_model_output(m, i, io);
    else
        rt_model_state(m, i - nout, io);
}

/* The outputs, then a tensor for each state's final value. */
static int alloc_outputs(RtModel *m, RtTensor *out) {
    for (int i = 0; i < rt_model_noutputs(m) + rt_model_nstates(m); i++) {
        RtIoInfo io;
        out_of(m, i, &io);
        out[i] = (RtTensor){.dtype = io.dtype, .rank = io.rank};
        memcpy(out[i].dims, io.dims, sizeof out[i].dims);
        size_t n = rt_dtype_size(io.dtype);
        for (int d = 0; d < io.rank; d++) n *= (size_t)io.dims[d];
        out[i].size = n;
        out[i].data = malloc(n ? n : 1);
        if (!out[i].data) {
            cli_error("out of memory");
            return EXIT_SYSTEM;
        }
    }
    return EXIT_OK;
}

/* Run repeat times (at least once), each from the state seeds (seeds[i].data
 * NULL: zero), so every repeat is the same run; *best: the fastest run's
 * seconds.  Then each state's final value into out[noutputs + i]. */
static int run_repeat(RtModel *m, RtTensor *in, const RtTensor *seeds, RtTensor *out, int repeat, RtRunStats *st,
                      double *best) {
    *best = 1e30;
    int nout = rt_model_noutputs(m), nst = rt_model_nstates(m);
    for (int k = 0; k < (repeat > 0 ? repeat : 1); k++) {
        rt_model_state_reset(m);
        for (int i = 0; i < nst; i++)
            if (seeds[i].data && rt_model_state_set(m, i, &seeds[i]) != 0) {
                cli_error("internal: state %d seed", i);
                return EXIT_SYSTEM;
            }
        int r = rt_run(m, in, rt_model_ninputs(m), out, nout, 0, st);
        if (r == RT_EINDEX) { /* an input's fault: a token id or position past its table */
            cli_error("run failed: an index input is out of range (a token id at or above the vocabulary, a position "
                      "at or above the model's positions, or a state update outside its state)");
            return EXIT_INPUT;
        }
        if (r != 0) {
            cli_error("run failed: %s", rt_strerror(r));
            return r == RT_EBIND || r == RT_ELOOP ? EXIT_INPUT : EXIT_SYSTEM;
        }
        if (st->seconds < *best) *best = st->seconds;
    }
    for (int i = 0; i < nst; i++)
        if (rt_model_state_get(m, i, &out[nout + i]) != 0) {
            cli_error("internal: state %d", i);
            return EXIT_SYSTEM;
        }
    return EXIT_OK;
}

/* Each output and each state's final value as OUTDIR/NAME.npy, listed in
 * outs (--json) or on stderr. */
static int write_outputs(RtModel *m, const RtTensor *out, const char *outdir, json_t *outs, int quiet) {
    int nout = rt_model_noutputs(m);
    for (int i = 0; i < nout + rt_model_nstates(m); i++) {
        RtIoInfo io;
        out_of(m, i, &io);
        memcpy(io.dims, out[i].dims, sizeof io.dims); /* as the run wrote it (a counted output's rows) */
        char path[4096], err[512], shape[128];
        shape_str(io.dims, io.rank, shape, sizeof shape);
        if (!rt_name_ok(io.name)) { /* the loader refused it already: a file name must never leave outdir */
            rt_name_show(io.name, err, sizeof err);
            cli_error("refusing to write output \"%s\": not an identifier", err);
            return EXIT_INPUT;
        }
        snprintf(path, sizeof path, "%s/%s.npy", outdir, io.name);
        if (npy_write_file(path, npy_of(io.dtype), io.rank, io.dims, out[i].data, err, sizeof err) != 0) {
            cli_error("%s", err);
            return EXIT_SYSTEM;
        }
        if (outs) {
            json_t *dims = json_array();
            for (int d = 0; d < io.rank; d++) cli_json_push(dims, json_integer(io.dims[d]));
            cli_json_push(outs, cli_json_obj("name", cli_json_str(io.name), "file", cli_json_str(path), "dtype",
                                             json_string(rt_dtype_str(io.dtype)), "shape", dims, "state",
                                             json_boolean(i >= nout), NULL));
        } else if (!quiet)
            fprintf(stderr, "wrote %s (%s%s %s)\n", path, i >= nout ? "state, " : "", rt_dtype_str(io.dtype), shape);
    }
    return EXIT_OK;
}

int model_run_npy(LoadedModel *lm, const char *const *inputs, int ninputs, const char *const *states, int nstates,
                  const char *outdir, int json, int repeat, int quiet) {
    int nin = rt_model_ninputs(lm->model), nout = rt_model_noutputs(lm->model), nst = rt_model_nstates(lm->model);
    RtTensor *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)nout + (size_t)nst + 1, sizeof *out);
    RtTensor *seeds = calloc((size_t)nst + 1, sizeof *seeds); /* data NULL: a state left at zero */
    json_t *outs = json ? json_array() : NULL;                /* --json: the outputs written */
    RtRunStats st = {0};
    double best = 0;
    int rc = EXIT_OK;
    if (!in || !out || !seeds || (json && !outs)) {
        cli_error("out of memory");
        rc = EXIT_SYSTEM;
    }
    if (rc == EXIT_OK) rc = check_inputs(lm->model, inputs, ninputs, false);
    if (rc == EXIT_OK) rc = check_inputs(lm->model, states, nstates, true);
    if (rc == EXIT_OK) rc = read_inputs(lm->model, inputs, ninputs, false, in);
    if (rc == EXIT_OK) rc = read_inputs(lm->model, states, nstates, true, seeds);
    /* Inputs are right: now the arena and scratch (checked against --max-memory). */
    if (rc == EXIT_OK) rc = model_realize(lm);
    if (rc == EXIT_OK) rc = alloc_outputs(lm->model, out);
    if (rc == EXIT_OK) rc = run_repeat(lm->model, in, seeds, out, repeat, &st, &best);
    if (rc == EXIT_OK) rc = write_outputs(lm->model, out, outdir, outs, quiet);
    if (rc == EXIT_OK && json)
        cli_json_print(stdout, cli_json_obj("run_ms", cli_json_real(best * 1e3, 4), "dispatches",
                                            json_integer((json_int_t)st.dispatches), "ops",
                                            json_integer((json_int_t)st.ops), "outputs", outs, NULL)),
            outs = NULL;
    else if (rc == EXIT_OK && !quiet)
        fprintf(stderr, "ran in %.3f ms, %llu dispatch%s, %llu ops\n", best * 1e3, (unsigned long long)st.dispatches,
                st.dispatches == 1 ? "" : "es", (unsigned long long)st.ops);
    for (int i = 0; in && i < nin; i++) free(in[i].data);
    for (int i = 0; out && i < nout + nst; i++) free(out[i].data);
    for (int i = 0; seeds && i < nst; i++) free(seeds[i].data);
    free(seeds);
    free(in);
    free(out);
    json_decref(outs);
    return rc;
}
