/* test_gen_faults.c — generator behaviour when the weight file cannot be
 * written: a write error (here: the file-size limit, as a full disk would)
 * must come back as an error diagnostic naming the cause, with no partial
 * weight file left behind.  Regression for a silent failure found by
 * tests/torture/limits.sh (`milc build` on a full disk exited 1 saying nothing). */
#include "test.h"

#include "milc/gen.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *builtin[] = {MILC_TEMPLATE_DIR};
static const GenSearchPath SP = {builtin, 1, NULL};

TEST(weight_write_error_is_reported) {
    char dir[] = "/tmp/milc-gen-faults-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    DiagSink d;
    diag_init(&d);
    GenConfig *c = gen_config_open(&SP, "gpt2", &d);
    CHECK(c != NULL);
    const char *kv[] = {"--layers", "1", "--model_layers", "1", "--dim", "512", "--heads", "2", "--ffn", "2048", NULL};
    for (int i = 0; c && kv[i]; i += 2) CHECK_EQ_INT(gen_config_set(c, kv[i], kv[i + 1], &d), 0);
    CHECK(c && gen_config_resolve(c, &d) == 0);
    /* Over 4 MiB of weights, so the writer flushes mid-way (its staging
     * buffer holds 4 MiB) and a later blob meets the error.  Writes past
     * 64 KiB fail with EFBIG instead of killing us with SIGXFSZ. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim = {64 << 10, 64 << 10};
    getrlimit(RLIMIT_FSIZE, &old);
    lim.rlim_max = old.rlim_max;
    CHECK_EQ_INT(setrlimit(RLIMIT_FSIZE, &lim), 0);
    GenResult r;
    int rc = c ? gen_generate(c, &(GenOptions){.weights = "random:0", .compile_mode = -1}, dir, &r, &d) : 0;
    setrlimit(RLIMIT_FSIZE, &old);
    CHECK_EQ_INT(rc, -1);
    CHECK(d.errors >= 1);
    char *s = diag_render(&d);
    CHECK(strstr(s, "write failed: File too large") != NULL);
    if (!strstr(s, "write failed")) fprintf(stderr, "diagnostics: '%s'\n", s);
    free(s);
    /* Neither the weight file nor its temp file is left. */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "test -z \"$(find %s -type f)\"", dir);
    CHECK_EQ_INT(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
    gen_config_free(c);
    diag_free(&d);
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* A checkpoint's digest with no memory for its read buffers says so, not
 * "read error: Cannot allocate memory".  The address space is capped just
 * above what the process maps, so the buffers (512 KiB each, mmap'd) and
 * the threads' stacks cannot be had. */
TEST(digest_without_memory_says_so) {
#ifndef UNDER_ASAN /* its shadow memory needs terabytes of address space */
    char path[] = "/tmp/milc-gen-digest-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    static char block[1 << 16];
    for (int i = 0; i < 16; i++) CHECK(write(fd, block, sizeof block) == (ssize_t)sizeof block);
    close(fd);
    DiagSink d;
    diag_init(&d);
    uint8_t dig[16];
    long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld", &pages) == 1) {
        struct rlimit old, lim;
        getrlimit(RLIMIT_AS, &old);
        lim = (struct rlimit){(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (256u << 10), old.rlim_max};
        CHECK_EQ_INT(setrlimit(RLIMIT_AS, &lim), 0);
        int rc = gen_weights_digest(path, dig, &d);
        setrlimit(RLIMIT_AS, &old);
        CHECK_EQ_INT(rc, -1);
        CHECK_EQ_INT(gen_weights_digest(path, dig, &d), 0); /* and it works with memory */
        char *s = diag_render(&d);
        CHECK(strstr(s, "out of memory for the buffers that hash the checkpoint") != NULL);
        if (!strstr(s, "out of memory for the buffers")) fprintf(stderr, "diagnostics: '%s'\n", s);
        free(s);
    }
    if (f) fclose(f);
    diag_free(&d);
    unlink(path);
#endif
}

int main(void) {
    RUN(weight_write_error_is_reported);
    RUN(digest_without_memory_says_so);
    TEST_MAIN_END();
}
