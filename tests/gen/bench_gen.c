/* bench_gen.c — the generator's cold-path figures as ratios, every one
 * measured in the same run beside its yardstick (the machine is shared and
 * noisy: absolute times mean little, ratios a lot).  Best of REPS each.
 *
 *   bench_gen [TMPDIR] [--model PRESET] [--layers N] [--reps N]
 *
 * 1. Random fp16 weights into memory, one core: GB/s of output, portable
 *    and AVX2+F16C loops, against memcpy of the same bytes (goal: >= 1 GB/s).
 * 2. The weight file of a chunk (default: Llama-3.2-1B, 4 layers, 464 MB),
 *    random weights, written as a build writes it (scratch: not fsynced):
 *    against `cp` of that file and against the disk (write + fdatasync of
 *    the same bytes, next to it).
 * 3. The same weight file from a safetensors checkpoint (BF16 as Llama 3.2
 *    ships, and F16), against `cp` of the checkpoint (goal: <= 1.5x), the
 *    two interleaved; wall and CPU time (user + system, cp's included).
 *    Beside it, what a build adds once per checkpoint: opening it for a key
 *    (header, digest of every byte).  emit writes without that digest.
 * Not a test: prints a figure per line.  Run by the bench_gen target. */
#include "../../compiler/gen/gen_internal.h"

#include "milc/blob.h"
#include "milc/half.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static clockid_t clock_used = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(clock_used, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "bench_gen: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void die_diag(DiagSink *d) {
    char *s = diag_render(d);
    fprintf(stderr, "%s", s);
    free(s);
    exit(2);
}

static int reps = 3;
static const char *tmp;

#define BEST(var, body)                                                                                                \
    do {                                                                                                               \
        var = 1e30;                                                                                                    \
        for (int r_ = 0; r_ < reps; r_++) {                                                                            \
            double t0_ = now();                                                                                        \
            body;                                                                                                      \
            double t_ = now() - t0_;                                                                                   \
            if (t_ < var) var = t_;                                                                                    \
        }                                                                                                              \
    } while (0)

/* CPU seconds of this process and its waited-for children (cp), user and
 * system: on a machine shared by many, a figure the other users' load
 * stretches far less than the wall clock. */
static double cpu_now(void) {
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (double)(a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) +
           (a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec) / 1e6;
}

/* The wall and CPU time of one run's own work: a file run measures itself,
 * so what it clears up before or after (unlinking the last run's file: up
 * to 25 ms for 120 MB of cached pages) is no part of its figure. */
typedef struct {
    double wall, cpu;
} Span;
static Span span_begin(void) { return (Span){now(), cpu_now()}; }
static Span span_end(Span s) { return (Span){now() - s.wall, cpu_now() - s.cpu}; }

/* The least wall time of reps runs of call (a Span) in wall_, the least
 * CPU time in cpu_. */
#define BEST_SPAN(wall_, cpu_, call)                                                                                      \
    do {                                                                                                               \
        wall_ = cpu_ = 1e30;                                                                                              \
        for (int r_ = 0; r_ < reps; r_++) {                                                                            \
            Span s_ = call;                                                                                            \
            if (s_.wall < wall_) wall_ = s_.wall;                                                                          \
            if (s_.cpu < cpu_) cpu_ = s_.cpu;                                                                            \
        }                                                                                                              \
    } while (0)

/* ---- 1. random fp16 into memory ---- */

static void fill_random(uint16_t *out, uint64_t count) {
    GenWeight w = {.name = "w",
                   .rank = 1,
                   .shape = {(int64_t)count},
                   .count = count,
                   .dtype = MILBLOB_FP16,
                   .init = "normal",
                   .args = {0.02},
                   .nargs = 1,
                   .seed_key = 12345};
    for (uint64_t i = 0; i < count; i += 4096) {
        size_t n = count - i < 4096 ? (size_t)(count - i) : 4096;
        gen_init_piece(&w, 7, i, n, out + i);
    }
}

static void bench_memory(void) {
    const uint64_t count = 64u << 20; /* 128 MiB of fp16 */
    size_t bytes = count * 2;
    uint16_t *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) die("malloc");
    memset(a, 1, bytes), memset(b, 2, bytes); /* faulted in before timing */
    double t_copy, t_port, t_avx2, t_best;
    /* Per core used: this thread's CPU time, not the wall clock a shared
     * machine stretches (the threads of other users are not ours). */
    clock_used = CLOCK_THREAD_CPUTIME_ID;
    BEST(t_copy, memcpy(b, a, bytes));
    gen_fill_select(0);
    BEST(t_port, fill_random(a, count));
    gen_fill_select(1);
    BEST(t_avx2, fill_random(b, count));
    if (memcmp(a, b, bytes) != 0) fprintf(stderr, "bench_gen: the fill loops disagree!\n");
    gen_fill_select(2);
    BEST(t_best, fill_random(b, count));
    clock_used = CLOCK_MONOTONIC;
    if (memcmp(a, b, bytes) != 0) fprintf(stderr, "bench_gen: the fill loops disagree!\n");
    double gb = bytes / 1e9;
    printf("random fp16, 1 core    %7.3f cpu-s  %6.2f GB/s   (AVX2 loop %.2f GB/s, portable %.2f GB/s)\n", t_best,
           gb / t_best, gb / t_avx2, gb / t_port);
    printf("memcpy, same bytes     %7.3f cpu-s  %6.2f GB/s\n", t_copy, gb / t_copy);
    printf("  random / memcpy      %7.2f    random / 1 GB/s goal  %.2f\n", t_best / t_copy, t_best / gb);
    free(a), free(b);
}

/* ---- files ---- */

static Span run_cp(const char *from, const char *to) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    unlink(to);
    Span s = span_begin();
    if (system(cmd) != 0) die("cp");
    s = span_end(s);
    unlink(to);
    return s;
}

/* What the disk takes to write and fdatasync `bytes` (4 MiB writes). */
static Span run_disk(const char *path, uint64_t bytes) {
    size_t blk = 4u << 20;
    char *buf = malloc(blk);
    if (!buf) die("malloc");
    for (size_t i = 0; i < blk; i++) buf[i] = (char)(i * 31);
    unlink(path);
    Span s = span_begin();
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die(path);
    for (uint64_t at = 0; at < bytes;) {
        size_t n = bytes - at < blk ? (size_t)(bytes - at) : blk;
        if (write(fd, buf, n) != (ssize_t)n) die("write");
        at += n;
    }
    if (fdatasync(fd) != 0) die("fdatasync");
    close(fd);
    s = span_end(s);
    unlink(path);
    free(buf);
    return s;
}

static GenConfig *open_config(const char *model, const char *layers, DiagSink *d) {
    const char *dirs[] = {MILC_TEMPLATE_DIR};
    GenSearchPath sp = {dirs, 1, NULL};
    GenConfig *c = gen_config_open(&sp, model, d);
    if (!c || gen_config_set(c, "layers", layers, d) != 0 || gen_config_resolve(c, d) != 0) die_diag(d);
    return c;
}

/* gen_generate as a build runs it: weights into a scratch dir, not fsynced. */
static Span run_generate(GenConfig *c, const char *weights, const char *dir, uint64_t *bytes) {
    DiagSink d;
    diag_init(&d);
    GenResult r;
    /* The last run's file goes first, untimed: cp's yardstick writes a new
     * file too, and freeing the old one's pages is no part of either. */
    char old[700];
    snprintf(old, sizeof old, "%s/weights/weight.bin", dir);
    unlink(old);
    Span s = span_begin();
    if (gen_generate(c, &(GenOptions){.weights = weights, .compile_mode = 2, .scratch = true}, dir, &r, &d) != 0)
        die_diag(&d);
    s = span_end(s);
    *bytes = r.weight_file_bytes;
    gen_result_free(&r);
    diag_free(&d);
    return s;
}

/* Opening a checkpoint: its header read, its bytes hashed (the key). */
static Span run_open(const char *path) {
    DiagSink d;
    diag_init(&d);
    GenWeights *w;
    Span s = span_begin();
    if (gen_weights_open(path, &w, &d) != 0) die_diag(&d);
    s = span_end(s);
    gen_weights_close(w);
    diag_free(&d);
    return s;
}

static void report(const char *what, double t, double t_cp, double t_disk, uint64_t bytes) {
    printf("%-22s %7.3f s  %6.2f GB/s   / cp %.2f", what, t, bytes / 1e9 / t, t / t_cp);
    if (t_disk > 0) printf("   / disk %.2f", t / t_disk);
    printf("\n");
}

/* ---- 3. a checkpoint of the program's sources ---- */

/* Every weight with a source as a tensor of that name, its shape without
 * the 1-dims (the Hugging Face layout of a template without transforms). */
static void write_checkpoint(const GenProgram *p, const char *path, bool bf16) {
    size_t cap = 1 << 16, len = 0;
    char *hdr = malloc(cap);
    uint64_t off = 0;
    len += (size_t)snprintf(hdr + len, cap - len, "{");
    for (int i = 0; i < p->nweights; i++) {
        const GenWeight *w = &p->weights[i];
        if (!w->source) continue;
        if (w->transform && *w->transform) {
            fprintf(stderr, "bench_gen: transforms not supported\n");
            exit(2);
        }
        if (cap - len < 512) hdr = realloc(hdr, cap *= 2);
        len += (size_t)snprintf(hdr + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", len > 1 ? "," : "",
                                w->source, bf16 ? "BF16" : "F16");
        int nd = 0;
        for (int k = 0; k < w->rank; k++)
            if (w->shape[k] != 1)
                len += (size_t)snprintf(hdr + len, cap - len, "%s%lld", nd++ ? "," : "", (long long)w->shape[k]);
        len += (size_t)snprintf(hdr + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + w->count * 2));
        off += w->count * 2;
    }
    len += (size_t)snprintf(hdr + len, cap - len, "}");
    while (len % 8) hdr[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) die(path);
    uint64_t hl = len;
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)(hl >> 8 * k);
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, len, f);
    uint16_t *buf = malloc(1 << 21);
    for (int i = 0; i < p->nweights; i++) {
        const GenWeight *w = &p->weights[i];
        if (!w->source) continue;
        GenWeight g = *w;
        g.init = "normal", g.args[0] = 0.02, g.dtype = MILBLOB_FP16;
        for (uint64_t at = 0; at < w->count; at += 4096) {
            size_t n = w->count - at < 4096 ? (size_t)(w->count - at) : 4096;
            gen_init_piece(&g, 1, at, n, buf);
            if (bf16)
                for (size_t k = 0; k < n; k++) {
                    float v = half_to_float(buf[k]);
                    uint32_t u;
                    memcpy(&u, &v, 4);
                    buf[k] = (uint16_t)(u >> 16);
                }
            fwrite(buf, 2, n, f);
        }
    }
    free(buf);
    free(hdr);
    if (fclose(f) != 0) die(path);
}

int main(int argc, char **argv) {
    const char *model = "llama-3.2-1b", *layers = "4";
    tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else
            tmp = argv[i];
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s/milc-bench-gen.XXXXXX", tmp);
    if (!mkdtemp(dir)) die(dir);
    printf("bench_gen: best of %d, in %s\n", reps, dir);
    bench_memory();

    DiagSink d;
    diag_init(&d);
    GenConfig *c = open_config(model, layers, &d);
    char out[600], copy[600], disk[600], ckpt[600];
    snprintf(out, sizeof out, "%s/out", dir);
    snprintf(copy, sizeof copy, "%s/copy.bin", dir);
    snprintf(disk, sizeof disk, "%s/disk.bin", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.safetensors", dir);
    char wpath[700];
    snprintf(wpath, sizeof wpath, "%s/weights/weight.bin", out);
    uint64_t bytes = 0;
    double t_gen, t_cp, t_disk;
    double cpu_unused;
    BEST_SPAN(t_gen, cpu_unused, run_generate(c, "random:0", out, &bytes));
    BEST_SPAN(t_cp, cpu_unused, run_cp(wpath, copy));
    BEST_SPAN(t_disk, cpu_unused, run_disk(disk, bytes));
    printf("%s --layers %s: weight file %.1f MB\n", model, layers, bytes / 1e6);
    report("generate (random)", t_gen, t_cp, t_disk, bytes);
    printf("%-22s %7.3f s  %6.2f GB/s\n", "cp of the weight file", t_cp, bytes / 1e9 / t_cp);
    printf("%-22s %7.3f s  %6.2f GB/s\n", "disk write+fdatasync", t_disk, bytes / 1e9 / t_disk);

    Arena a;
    arena_init(&a);
    GenProgram p;
    if (gen_config_expand(c, &a, &p, &d) != 0) die_diag(&d);
    for (int bf = 1; bf >= 0; bf--) {
        write_checkpoint(&p, ckpt, bf);
        struct stat sb;
        if (stat(ckpt, &sb) != 0) die(ckpt);
        /* Interleaved, each from an empty dirty-page pool (sync, untimed):
         * the kernel's writeback state, which other users' writes move,
         * otherwise decides more than either program. */
        double t_st = 1e30, t_stcp = 1e30, t_open = 1e30, c_st = 1e30, c_stcp = 1e30, c_open = 1e30, t, u;
        int keep = reps;
        reps = 1;
        for (int r = 0; r < keep; r++) {
            sync();
            BEST_SPAN(t, u, run_generate(c, ckpt, out, &bytes));
            t_st = t < t_st ? t : t_st, c_st = u < c_st ? u : c_st;
            sync();
            BEST_SPAN(t, u, run_cp(ckpt, copy));
            t_stcp = t < t_stcp ? t : t_stcp, c_stcp = u < c_stcp ? u : c_stcp;
            BEST_SPAN(t, u, run_open(ckpt));
            t_open = t < t_open ? t : t_open, c_open = u < c_open ? u : c_open;
        }
        reps = keep;
        char what[64];
        snprintf(what, sizeof what, "from safetensors %s", bf ? "BF16" : "F16");
        report(what, t_st, t_stcp, 0, bytes);
        printf("%-22s %7.3f s  %6.2f GB/s   (%.1f MB checkpoint)\n", "cp of the checkpoint", t_stcp,
               sb.st_size / 1e9 / t_stcp, sb.st_size / 1e6);
        printf("  a build's key, open+digest %7.3f s   / cp %.2f   (once per build; with it / cp %.2f)\n", t_open,
               t_open / t_stcp, (t_st + t_open) / t_stcp);
        printf("  CPU time: %.3f s, cp %.3f s: / cp %.2f   (open+digest %.3f s, / cp %.2f)\n", c_st, c_stcp,
               c_st / c_stcp, c_open, c_open / c_stcp);
    }
    arena_free(&a);
    gen_config_free(c);
    diag_free(&d);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : 2;
}
