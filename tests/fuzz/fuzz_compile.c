/* libFuzzer target for the back end: a program that parses and checks clean
 * for the CPU is compiled in both modes, and each artifact is loaded and run
 * once on zeros.  The contract under test: a checked program compiles or is
 * refused with a diagnostic, and a compiled one runs; nothing aborts.  Seeds:
 * corpus/compile, a checked program per op (made from the coremltools
 * agreement test's cases), and the front end's corpus (run.sh). */
#include "milc/backend.h"
#include "milc/mil.h"
#include "milc/rt.h"
#include "fuzz_util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Values past this many elements in all make a run too slow for a fuzzer
 * (the kernels are linear in them), so such programs are skipped. */
enum { MAX_ELEMS = 1 << 18 };

/* The elements of the results of ops from first on, nested blocks' too, added
 * to *sum; false past MAX_ELEMS or at a loop (its trip count is data). */
static bool ops_small(const IrOp *first, int64_t *sum) {
    for (const IrOp *op = first; op; op = op->next) {
        if (op->kind == OP_WHILE_LOOP) return false;
        for (int r = 0; r < op->nresults; r++) {
            int64_t n = ir_value_numel(op->results[r]);
            if (n > 0 && (*sum += n) > MAX_ELEMS) return false;
        }
        for (int b = 0; b < op->nblocks; b++)
            if (!ops_small(op->blocks[b]->first, sum)) return false;
    }
    return true;
}

static bool small_enough(const IrFunction *f) {
    int64_t sum = 0;
    for (int i = 0; i < f->ninputs; i++) {
        int64_t n = ir_value_numel(f->inputs[i]);
        if (n < 0 || (sum += n) > MAX_ELEMS) return false;
    }
    return ops_small(f->first, &sum);
}

/* The compiler's own artifact must load; then it runs once on zeros. */
static void run_once(RtArtifact *art) {
    const RtSection *secs;
    int n;
    rt_artifact_sections(art, &secs, &n);
    RtModel *m;
    char err[256];
    RtLoadOptions lo = {.nthreads = 1, .flags = RT_LOAD_VERIFY};
    if (rt_model_load(&m, secs, n, &lo, err, sizeof err) != 0) abort();
    fuzz_run_model(m, 0);
    rt_model_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int mode = 1; mode <= 2; mode++) {
        FuzzParse fp;
        fuzz_parse(&fp, data, size);
        MilCheckOptions o = {.target = MIL_TARGET_CPU, .model_path = "/nonexistent-milc-fuzz"};
        IrFunction *f = fp.p ? ir_program_function(fp.p, "main") : NULL;
        if (f && mil_check(fp.p, &o, &fp.d) && !fp.d.errors && small_enough(f)) {
            RtArtifact *art = NULL;
            BackendStats st;
            BackendOptions bo = {.mode = mode, .model_path = "/nonexistent-milc-fuzz", .verify_ir = true};
            if (backend_compile(fp.p, &bo, &art, &st, &fp.d) == 0) {
                run_once(art);
                rt_artifact_free(art);
            } else if (!fp.d.errors) {
                abort(); /* refused without saying why */
            }
        }
        fuzz_parse_free(&fp);
    }
    return 0;
}
