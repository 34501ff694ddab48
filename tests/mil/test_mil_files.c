/* Data-driven MIL tests.  golden/NAME.mil must parse, check and print to
 * golden/NAME.expected byte for byte, and the printed text must print to
 * itself again.  errors/NAME.mil must render exactly errors/NAME.expected
 * (parse errors, else check errors; a name starting "ane_" checks for the ANE
 * target).  The weights BLOBFILEs name are written here with the milc_blob
 * writer into a temporary model dir.  MILC_UPDATE=1 rewrites the .expected
 * files (review the diff!). */
#include "milc/blob.h"
#include "milc/mil.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char model_dir[64];

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    s[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return s;
}

static void write_file(const char *path, const char *s) {
    FILE *f = fopen(path, "wb");
    fputs(s, f);
    fclose(f);
}

static uint16_t half_of(double v) { return ir_double_to_half(v); }

/* The weight file the golden programs point at.  Record offsets (what the
 * .mil files say) are asserted so a writer change shows up here first. */
static void write_weights(void) {
    char path[128];
    snprintf(path, sizeof path, "%s/weights", model_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/weights/weight.bin", model_dir);
    DiagSink d;
    diag_init(&d);
    MilBlobWriter *w = milblob_writer_open(path, &d);
    CHECK(w != NULL);
    if (!w) return;
    static uint16_t buf[768 * 768];
    for (int i = 0; i < 64; i++) buf[i] = half_of(1.0);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, buf, 64 * 2), 64); /* ln gamma [64] */
    for (int i = 0; i < 64; i++) buf[i] = 0;
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, buf, 64 * 2), 256); /* ln beta [64] */
    for (int i = 0; i < 192 * 64; i++) buf[i] = half_of(((i * 7) % 13 - 6) / 64.0);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, buf, 192 * 64 * 2), 448);  /* qkv [192, 64, 1, 1] */
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, buf, 64 * 64 * 2), 25088); /* out proj [64, 64, 1, 1] */
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) buf[i * 16 + j] = j <= i ? 0 : half_of(-30000.0);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, buf, 256 * 2), 33344); /* causal mask [1, 1, 16, 16] */
    float f[500];
    for (int i = 0; i < 500; i++) f[i] = (float)i;
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP32, f, sizeof f), 33920); /* fp32 [500] */
    for (int i = 0; i < 768 * 768; i++) buf[i] = half_of((i % 5) / 8.0);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, buf, sizeof buf), 36032); /* W [768, 768, 1, 1] */
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    diag_free(&d);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .mil files of dir, sorted (a stable order makes failures reproducible). */
static int list_cases(const char *dir, char **names, int max) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        size_t l = strlen(e->d_name);
        if (l > 4 && strcmp(e->d_name + l - 4, ".mil") == 0) names[n++] = strndup(e->d_name, l - 4);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    return n;
}

/* Compare got with dir/NAME.expected (or rewrite it under MILC_UPDATE). */
static int compare_expected(const char *dir, const char *name, const char *got) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s.expected", dir, name);
    if (getenv("MILC_UPDATE")) {
        write_file(path, got);
        return 1;
    }
    size_t len = 0;
    char *want = read_file(path, &len);
    int ok = want && strcmp(want, got) == 0;
    if (!ok)
        fprintf(stderr, "%s/%s: output differs from %s:\n--- got\n%s--- want\n%s", dir, name, path, got,
                want ? want : "(missing)\n");
    free(want);
    return ok;
}

TEST(golden) {
    char *names[256];
    int n = list_cases("golden", names, 256);
    CHECK(n >= 6);
    for (int i = 0; i < n; i++) {
        char file[512];
        snprintf(file, sizeof file, "golden/%s.mil", names[i]);
        size_t len = 0;
        char *text = read_file(file, &len);
        Arena a;
        arena_init(&a);
        DiagSink d;
        diag_init(&d);
        IrProgram *p = mil_parse(&a, &d, file, text, len);
        MilCheckOptions o = {.target = MIL_TARGET_CPU, .model_path = model_dir};
        if (strncmp(names[i], "ane_", 4) == 0) o.target = MIL_TARGET_ANE;
        bool ok = p && mil_check(p, &o, &d);
        if (!ok || d.count) {
            char *r = diag_render(&d);
            fprintf(stderr, "%s: unexpected diagnostics:\n%s", file, r);
            free(r);
            CHECK(0);
        }
        if (p) {
            size_t plen;
            char *out = mil_print(p, &plen);
            CHECK(compare_expected("golden", names[i], out));
            /* print -> parse -> print is the identity, and the reparse checks clean. */
            Arena a2;
            arena_init(&a2);
            DiagSink d2;
            diag_init(&d2);
            IrProgram *q = mil_parse(&a2, &d2, "reprint", out, plen);
            CHECK(q != NULL);
            if (q) {
                CHECK(mil_check(q, &o, &d2));
                char *out2 = mil_print(q, NULL);
                CHECK_STR(out2, out);
                free(out2);
            }
            arena_free(&a2);
            diag_free(&d2);
            free(out);
        }
        arena_free(&a);
        diag_free(&d);
        free(text);
        free(names[i]);
    }
}

TEST(errors) {
    char *names[256];
    int n = list_cases("errors", names, 256);
    CHECK(n >= 10);
    for (int i = 0; i < n; i++) {
        char file[512];
        snprintf(file, sizeof file, "errors/%s.mil", names[i]);
        size_t len = 0;
        char *text = read_file(file, &len);
        Arena a;
        arena_init(&a);
        DiagSink d;
        diag_init(&d);
        if (strncmp(names[i], "cap_", 4) == 0) d.max_errors = 3;
        IrProgram *p = mil_parse(&a, &d, file, text, len);
        MilCheckOptions o = {.target = MIL_TARGET_CPU, .model_path = model_dir};
        if (strncmp(names[i], "ane_", 4) == 0) o.target = MIL_TARGET_ANE;
        if (p) mil_check(p, &o, &d);
        CHECK(d.count > 0);
        char *r = diag_render(&d);
        CHECK(compare_expected("errors", names[i], r));
        free(r);
        arena_free(&a);
        diag_free(&d);
        free(text);
        free(names[i]);
    }
}

int main(void) {
    strcpy(model_dir, "/tmp/milc-mil-test-XXXXXX");
    if (!mkdtemp(model_dir)) return 2;
    write_weights();
    RUN(golden);
    RUN(errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", model_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", model_dir);
    TEST_MAIN_END();
}
