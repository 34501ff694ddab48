/* bench_scale.c — how compile and load time grow with the op count.  For
 * each size N it generates a MIL program of N elementwise ops in one chain
 * (add, mul, sub of the running value and the input), then times check
 * (parse + mil_check), compile (backend_compile alone), load (rt_model_load)
 * and one run, and prints ops per second for each and compile ÷ check per
 * op (goal: ≤ 2 at every size).  A step that grows faster than N shows as
 * falling ops/s down the table.
 *   bench_scale [N ...]     (default 10000 100000 1000000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "milc/backend.h"
#include "milc/mil.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The chain as MIL text (malloc'd). */
static char *chain_mil(long n, size_t *len) {
    size_t cap = 256 + (size_t)n * 96, k = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    static const char *const ops[] = {"add", "mul", "sub"};
    k += (size_t)snprintf(s + k, cap - k, "program(1.3)\n{\n    func main<ios18>(tensor<fp32, [1, 64]> x) {\n");
    for (long i = 0; i < n; i++) {
        char prev[24];
        snprintf(prev, sizeof prev, i ? "v%ld" : "x", i - 1);
        k += (size_t)snprintf(s + k, cap - k,
                              "        tensor<fp32, [1, 64]> v%ld = %s(x = %s, y = x)[name = string(\"v%ld\")];\n", i,
                              ops[i % 3], prev, i);
    }
    k += (size_t)snprintf(s + k, cap - k, "    } -> (v%ld);\n}\n", n - 1);
    *len = k;
    return s;
}

/* One size: 0, or 1 with a message on stderr. */
static int bench(long n) {
    size_t len;
    char *text = chain_mil(n, &len);
    if (!text) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    Arena a;
    arena_init(&a);
    DiagSink d;
    diag_init(&d);
    RtArtifact *art = NULL;
    RtModel *m = NULL;
    char err[256];
    int rc = 1;
    double t0 = now_s();
    IrProgram *p = mil_parse(&a, &d, "chain.mil", text, len);
    if (!p || !mil_check(p, &(MilCheckOptions){.target = MIL_TARGET_CPU, .model_path = "."}, &d)) goto diag;
    double t_check = now_s() - t0;
    BackendStats st = {0};
    t0 = now_s();
    if (backend_compile(p, &(BackendOptions){.mode = 2, .model_path = "."}, &art, &st, &d) != 0) goto diag;
    double t_compile = now_s() - t0;
    const RtSection *secs;
    int ns;
    rt_artifact_sections(art, &secs, &ns);
    t0 = now_s();
    if (rt_model_load(&m, secs, ns, &(RtLoadOptions){.nthreads = 1}, err, sizeof err) != 0) {
        fprintf(stderr, "load: %s\n", err);
        goto out;
    }
    double t_load = now_s() - t0;
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = 1.0f / (float)(i + 1);
    RtTensor in = {.dtype = RT_F32, .rank = 2, .dims = {1, 64}, .data = x, .size = sizeof x};
    RtTensor out = {.dtype = RT_F32, .rank = 2, .dims = {1, 64}, .data = y, .size = sizeof y};
    RtRunStats rs = {0};
    t0 = now_s();
    if (rt_run(m, &in, 1, &out, 1, 0, &rs) != 0) {
        fprintf(stderr, "run failed\n");
        goto out;
    }
    double t_run = now_s() - t0;
    printf("%9ld | %12.0f %12.0f %12.0f %12.0f | %6.2f\n", n, n / t_check, n / t_compile, n / t_load, n / t_run,
           t_compile / t_check);
    rc = 0;
    goto out;
diag : {
    char *msg = diag_render(&d);
    fprintf(stderr, "%s", msg ? msg : "error\n");
    free(msg);
}
out:
    if (m) rt_model_free(m);
    if (art) rt_artifact_free(art);
    diag_free(&d);
    arena_free(&a);
    free(text);
    return rc;
}

int main(int argc, char **argv) {
    static const long def[] = {10000, 100000, 1000000};
    printf("ops of one chain, per second of each step; compile/check: the two times' ratio (goal <= 2)\n");
    printf("%9s | %12s %12s %12s %12s | %6s\n", "ops", "check", "compile", "load", "run", "c/chk");
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        long n = strtol(argv[i], NULL, 10);
        if (n < 1) {
            fprintf(stderr, "usage: bench_scale [N ...]\n");
            return 2;
        }
        rc |= bench(n);
    }
    if (argc == 1)
        for (size_t i = 0; i < sizeof def / sizeof *def; i++) rc |= bench(def[i]);
    return rc;
}
