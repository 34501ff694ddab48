/* chain.c — an app of libmilc, built against the installed library with
 * `pkg-config --cflags --libs milc` (test_install.sh): build a model in
 * chunks through the cache, then run the chain in this process, the output
 * y of each chunk the input x of the next.  Writes the first x and the last y
 * as .npy files for the CLI's `milc run` to be compared with.
 *
 *     chain CACHE_DIR MODEL X.npy Y.npy
 *
 * Exit 0, or 1 with what failed on stderr. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <milc.h>

static int fail(const char *what, int st) {
    fprintf(stderr, "chain: %s: %s (%d): %s\n", what, milc_strerror(st), st, milc_last_error());
    return 1;
}

/* fp16 bits of v, for the values written here (k/8, |k| <= 8: exact in fp16). */
static uint16_t half_of(float v) {
    union {
        float f;
        uint32_t u;
    } b = {v};
    uint32_t sign = (b.u >> 16) & 0x8000u;
    if ((b.u & 0x7fffffffu) == 0) return (uint16_t)sign;
    int e = (int)((b.u >> 23) & 0xff) - 127 + 15;
    return (uint16_t)(sign | (uint32_t)e << 10 | ((b.u >> 13) & 0x3ffu));
}

/* An fp16 .npy file of the tensor's shape. */
static int write_npy(const char *path, const MilcTensorInfo *t, const void *data) {
    char shape[128] = "";
    size_t l = 0;
    for (int d = 0; d < t->rank; d++)
        l += (size_t)snprintf(shape + l, sizeof shape - l, "%lld, ", (long long)t->dims[d]);
    char hdr[256];
    int n =
        snprintf(hdr, sizeof hdr, "{'descr': '<f2', 'fortran_order': False, 'shape': (%.*s), }", (int)(l - 2), shape);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint16_t hl = (uint16_t)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(hl & 0xff, f), fputc(hl >> 8, f);
    fwrite(hdr, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, t->bytes, f);
    return fclose(f);
}

/* Run every chunk of b in order: x through the chain into x. */
static int run_chain(MilcCache *c, const MilcBuild *b, void **x, MilcTensorInfo *xi) {
    for (int i = 0; i < milc_build_count(b); i++) {
        MilcProgramInfo p;
        MilcModel *m;
        int st = milc_build_program(b, i, &p);
        if (st || (st = milc_model_load(c, p.key, &m))) return fail("load", st);
        int nin = milc_model_ninputs(m), nout = milc_model_noutputs(m), xin = milc_model_find(m, "x", 0),
            yout = milc_model_find(m, "y", 1);
        if (nin != 1 || xin != 0 || yout < 0) {
            fprintf(stderr, "chain: chunk %d is not x -> y\n", i);
            return 1;
        }
        MilcTensorInfo ti;
        milc_model_input(m, 0, &ti);
        if (ti.bytes != xi->bytes) {
            fprintf(stderr, "chain: chunk %d takes %zu bytes, not %zu\n", i, ti.bytes, xi->bytes);
            return 1;
        }
        void *outs[8] = {0};
        for (int o = 0; o < nout && o < 8; o++) {
            milc_model_output(m, o, &ti);
            outs[o] = malloc(ti.bytes);
        }
        MilcRunStats rs;
        const void *ins[1] = {*x};
        if ((st = milc_model_run(m, ins, outs, &rs))) return fail("run", st);
        if (rs.dispatches == 0) {
            fprintf(stderr, "chain: a run with no dispatch\n");
            return 1;
        }
        /* chunks with the cache as inputs and outputs keep no state: resetting none is fine,
         * an index past them a usage error */
        char one[4];
        if (milc_model_nstates(m) != 0 || (st = milc_model_reset_states(m)) != MILC_OK ||
            (st = milc_model_state_read(m, 0, one, sizeof one)) != MILC_E_USAGE || !*milc_last_error()) {
            fprintf(stderr, "chain: states: %d\n", st);
            return 1;
        }
        free(*x);
        *x = outs[yout];
        for (int o = 0; o < nout && o < 8; o++)
            if (o != yout) free(outs[o]);
        milc_model_free(m);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: chain CACHE_DIR MODEL X.npy Y.npy\n");
        return 2;
    }
    MilcCache *c;
    int st = milc_cache_open(&c, argv[1], NULL);
    if (st) return fail("open", st);
    MilcParam bad = {"no_such_parameter", "1"};
    MilcBuild *b;
    if ((st = milc_build(c, &(MilcRequest){.model = argv[2], .params = &bad, .nparams = 1, .mode = MILC_MODE_DEFAULT},
                         &b)) != MILC_E_INPUT ||
        !strstr(milc_last_error(), "no_such_parameter")) {
        fprintf(stderr, "chain: a bad parameter gave %d: %s\n", st, milc_last_error());
        return 1;
    }
    /* split I/O: each chunk's y is the next one's x as it is */
    MilcParam split = {"io", "split"};
    MilcRequest req = {.model = argv[2], .mode = MILC_MODE_DEFAULT, .chunk = 1, .params = &split, .nparams = 1};
    for (int pass = 0; pass < 2; pass++) { /* the second finds every chunk */
        if ((st = milc_build(c, &req, &b))) return fail("build", st);
        for (int i = 0; i < milc_build_count(b); i++) {
            MilcProgramInfo p;
            milc_build_program(b, i, &p);
            if ((p.outcome == MILC_BUILT) != (pass == 0)) {
                fprintf(stderr, "chain: pass %d chunk %d: outcome %d\n", pass, i, p.outcome);
                return 1;
            }
        }
        if (pass == 0) milc_build_free(b);
    }
    if (milc_build_count(b) < 2) {
        fprintf(stderr, "chain: %d chunks, not a chain\n", milc_build_count(b));
        return 1;
    }
    MilcProgramInfo p0;
    MilcModel *m0;
    milc_build_program(b, 0, &p0);
    if ((st = milc_model_load(c, p0.key, &m0))) return fail("load", st);
    MilcTensorInfo xi;
    milc_model_input(m0, 0, &xi);
    milc_model_free(m0);
    if (xi.dtype != MILC_F16) {
        fprintf(stderr, "chain: x is not fp16\n");
        return 1;
    }
    uint16_t *x = malloc(xi.bytes);
    for (size_t i = 0; i < xi.bytes / 2; i++) x[i] = half_of((float)((int)(i * 7 % 17) - 8) / 8.0f);
    if (write_npy(argv[3], &xi, x) != 0) {
        perror(argv[3]);
        return 1;
    }
    void *y = x;
    if (run_chain(c, b, &y, &xi)) return 1;
    if (write_npy(argv[4], &xi, y) != 0) {
        perror(argv[4]);
        return 1;
    }
    printf("chain: %d chunks of %s run in one process\n", milc_build_count(b), argv[2]);
    free(y);
    milc_build_free(b);
    milc_cache_close(c);
    return 0;
}
