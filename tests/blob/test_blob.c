/* test_blob.c — MILBlob v2: the writer's exact layout (MIL.md's examples), the
 * reader's round trip, and every corruption case with its exact message. */
#include "milc/blob.h"
#include "test.h"

#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];

static const char *tmp_path(const char *name) {
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

static uint32_t u32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t u64(const uint8_t *p) { return u32(p) | (uint64_t)u32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

static uint64_t round_up(uint64_t x) { return (x + 63) & ~(uint64_t)63; }

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i]) return false;
    return true;
}

/* Two fp32[500] blobs: records at 64 and 2176 (MIL.md). */
TEST(writer_fp32_example) {
    DiagSink d;
    diag_init(&d);
    const char *path = tmp_path("a.bin");
    float a[500], b[500];
    for (int i = 0; i < 500; i++) a[i] = (float)i, b[i] = -(float)i;
    MilBlobWriter *w = milblob_writer_open(path, &d);
    CHECK(w != NULL);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP32, a, sizeof a), 64);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP32, b, sizeof b), 2176);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    size_t n;
    uint8_t *f = read_all(path, &n);
    CHECK(f != NULL);
    /* header, record, 2000 data bytes, 48 padding, record, 2000 data bytes; no tail padding */
    CHECK_EQ_INT(n, 2176 + 64 + 2000);
    CHECK_EQ_INT(u32(f), 2);
    CHECK_EQ_INT(u32(f + 4), 2);
    CHECK(all_zero(f + 8, 56));
    CHECK_EQ_INT(u32(f + 64), 0xDEADBEEF);
    CHECK_EQ_INT(u32(f + 68), 2);
    CHECK_EQ_INT(u64(f + 72), 2000);
    CHECK_EQ_INT(u64(f + 80), 128);
    CHECK_EQ_INT(u64(f + 88), 0);
    CHECK(all_zero(f + 96, 32));
    CHECK(memcmp(f + 128, a, 2000) == 0);
    CHECK(all_zero(f + 2128, 48));
    CHECK_EQ_INT(u32(f + 2176), 0xDEADBEEF);
    CHECK_EQ_INT(u64(f + 2176 + 16), 2240);
    CHECK(memcmp(f + 2240, b, 2000) == 0);

    MilBlobFile bf;
    CHECK_EQ_INT(milblob_open(&bf, path, &d), 0);
    CHECK_EQ_INT(bf.count, 2);
    const MilBlobRecord *r = milblob_find(&bf, 2176);
    CHECK(r != NULL && r->size == 2000 && r->dtype == MILBLOB_FP32 && memcmp(r->data, b, 2000) == 0);
    CHECK(milblob_find(&bf, 64) == &bf.records[0]);
    CHECK(milblob_find(&bf, 128) == NULL);

    /* The digest against xxhsum over the byte stream it is defined on:
     * per record, u32 dtype, u64 size, u64 padding_bits (LE), then the data. */
    const char *stream = tmp_path("a.stream");
    FILE *s = fopen(stream, "wb");
    for (int k = 0; k < 2; k++) {
        uint8_t tag[20] = {0};
        put32(tag, MILBLOB_FP32);
        put64(tag + 4, 2000);
        fwrite(tag, 1, sizeof tag, s);
        fwrite(k ? b : a, 1, 2000, s);
    }
    fclose(s);
    char cmd[512], want[40] = "", got[40];
    snprintf(cmd, sizeof cmd, "xxhsum -H2 %s", stream);
    FILE *p = popen(cmd, "r");
    CHECK(p && fscanf(p, "%32s", want) == 1);
    if (p) pclose(p);
    uint8_t h[16];
    milblob_file_digest(&bf, h);
    for (int i = 0; i < 16; i++) snprintf(got + 2 * i, 3, "%02x", h[i]);
    CHECK_STR(got, want);
    milblob_close(&bf);
    CHECK_EQ_INT(d.errors, 0);
    free(f);
    diag_free(&d);
}

/* fp16[200] then fp16[5, 6272]: records at 64 and 576, the second filled in place. */
TEST(writer_fp16_reserve_example) {
    DiagSink d;
    diag_init(&d);
    const char *path = tmp_path("b.bin");
    uint16_t a[200];
    for (int i = 0; i < 200; i++) a[i] = (uint16_t)(0x3c00 + i);
    MilBlobWriter *w = milblob_writer_open(path, &d);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, a, sizeof a), 64);
    uint64_t off = 0;
    uint16_t *p = milblob_writer_reserve(w, MILBLOB_FP16, 5 * 6272 * 2, &off);
    CHECK(p != NULL);
    CHECK_EQ_INT(off, 576);
    for (int i = 0; i < 5 * 6272; i++) p[i] = (uint16_t)i;
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    size_t n;
    uint8_t *f = read_all(path, &n);
    CHECK_EQ_INT(n, 640 + 5 * 6272 * 2);
    CHECK_EQ_INT(u64(f + 576 + 8), 62720);
    CHECK_EQ_INT(u64(f + 576 + 16), 640);
    CHECK(all_zero(f + 128 + 400, 576 - 528));
    CHECK_EQ_INT(u32(f + 640 + 2 * 6271), 6271 | 6272u << 16);
    free(f);
    diag_free(&d);
}

/* A blob bigger than the staging buffer goes straight to the file. */
TEST(writer_large_and_digest) {
    DiagSink d;
    diag_init(&d);
    const char *path = tmp_path("c.bin");
    size_t big = 9u << 20;
    uint8_t *data = malloc(big);
    for (size_t i = 0; i < big; i++) data[i] = (uint8_t)(i * 7);
    MilBlobWriter *w = milblob_writer_open(path, &d);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_UINT8, data, 3), 64);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_INT8, data, big), 192);
    uint64_t off;
    uint8_t *r = milblob_writer_reserve(w, MILBLOB_INT8, big, &off);
    CHECK_EQ_INT(off, 256 + big);
    memcpy(r, data, big);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_INT4, data, 5), 256 + big + 64 + big);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    MilBlobFile bf;
    CHECK_EQ_INT(milblob_open(&bf, path, &d), 0);
    CHECK_EQ_INT(bf.count, 4);
    CHECK(memcmp(bf.records[1].data, data, big) == 0);
    CHECK(memcmp(bf.records[2].data, data, big) == 0);
    uint8_t h1[16], h2[16];
    milblob_file_digest(&bf, h1);
    /* Same bytes in memory: same digest; one flipped data byte: different. */
    MilBlobFile mf;
    uint8_t *copy = malloc(bf.size);
    memcpy(copy, bf.bytes, bf.size);
    CHECK_EQ_INT(milblob_parse(&mf, "m", copy, bf.size, &d), 0);
    milblob_file_digest(&mf, h2);
    CHECK(memcmp(h1, h2, 16) == 0);
    milblob_close(&mf);
    copy[192 + 64 + 100] ^= 1;
    CHECK_EQ_INT(milblob_parse(&mf, "m", copy, bf.size, &d), 0);
    milblob_file_digest(&mf, h2);
    CHECK(memcmp(h1, h2, 16) != 0);
    milblob_close(&mf);
    milblob_close(&bf);
    CHECK_EQ_INT(d.errors, 0);
    free(copy);
    free(data);
    diag_free(&d);
}

/* Empty blobs are legal (a zero-element tensor): the next record follows at once. */
TEST(writer_empty_blobs) {
    DiagSink d;
    diag_init(&d);
    const char *path = tmp_path("e.bin");
    MilBlobWriter *w = milblob_writer_open(path, &d);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, NULL, 0), 64);
    uint64_t off;
    CHECK(milblob_writer_reserve(w, MILBLOB_UINT4, 0, &off) != NULL);
    CHECK_EQ_INT(off, 128);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP32, "abcd", 4), 192);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP32, NULL, 0), 320);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    MilBlobFile f;
    CHECK_EQ_INT(milblob_open(&f, path, &d), 0);
    CHECK_EQ_INT(f.count, 4);
    CHECK_EQ_INT(f.size, 384);
    CHECK(f.records[2].size == 4 && memcmp(f.records[2].data, "abcd", 4) == 0);
    CHECK(f.records[3].size == 0 && f.records[3].data_offset == 384);
    milblob_close(&f);
    CHECK_EQ_INT(d.errors, 0);
    unlink(path);
    diag_free(&d);
}

TEST(writer_errors_leave_no_file) {
    DiagSink d;
    diag_init(&d);
    const char *path = tmp_path("bad.bin");
    MilBlobWriter *w = milblob_writer_open(path, &d);
    uint8_t x[3] = {0};
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, x, 3), UINT64_MAX);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_UINT8, x, 3), UINT64_MAX); /* sticky */
    CHECK_EQ_INT(milblob_writer_finish(w, &d), -1);
    char *out = diag_render(&d);
    char want[512];
    snprintf(want, sizeof want, "%s: error: blob 0: size 3 is not a whole number of fp16 elements\n", path);
    CHECK_STR(out, want);
    free(out);
    CHECK(access(path, F_OK) != 0);
    w = milblob_writer_open(path, &d);
    milblob_writer_add(w, 99, x, 3);
    milblob_writer_abort(w);
    CHECK(access(path, F_OK) != 0);
    /* Only a.bin b.bin c.bin from earlier tests: no temp file left behind. */
    char cmd[256];
    snprintf(cmd, sizeof cmd, "test $(ls %s | grep -c tmp) -eq 0", dir);
    CHECK_EQ_INT(system(cmd), 0);
    diag_free(&d);
    diag_init(&d);
    CHECK(milblob_writer_open("/nonexistent-dir/w.bin", &d) == NULL);
    out = diag_render(&d);
    CHECK(out && strstr(out, "/nonexistent-dir/w.bin: error: cannot create /nonexistent-dir/.w.bin.tmp-") == out);
    free(out);
    diag_free(&d);
}

/* Blobs streamed in pieces (begin + take) are the bytes add() writes, the
 * digest made while writing is the reader's, and a 64 MiB blob streams
 * through a writer that may not grow: under an address-space limit far
 * below the blob, in a child. */
static void write_streamed(const char *path, const uint8_t *data, size_t big, size_t piece, DiagSink *d) {
    MilBlobWriter *w = milblob_writer_open(path, d);
    CHECK(w != NULL);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_UINT8, data, 3), 64);
    CHECK_EQ_INT(milblob_writer_begin(w, MILBLOB_INT8, big), 192);
    for (size_t at = 0; at < big; at += piece) {
        size_t n = big - at < piece ? big - at : piece;
        uint8_t *p = milblob_writer_take(w, n);
        CHECK(p != NULL);
        memcpy(p, data + at, n);
    }
    uint64_t off;
    uint8_t *r = milblob_writer_reserve(w, MILBLOB_FP16, 200, &off);
    CHECK_EQ_INT(off, round_up(192 + 64 + big));
    memcpy(r, data, 200);
    CHECK_EQ_INT(milblob_writer_begin(w, MILBLOB_FP32, 0), off + 64 + 256);
    uint8_t h[16], h2[16];
    milblob_writer_digest(w, h);
    CHECK_EQ_INT(milblob_writer_finish(w, d), 0);
    MilBlobFile bf;
    CHECK_EQ_INT(milblob_open(&bf, path, d), 0);
    milblob_file_digest(&bf, h2);
    CHECK(memcmp(h, h2, 16) == 0);
    milblob_close(&bf);
}

/* The streamed tests' bytes: BIG of a pattern (the caller frees them). */
enum { BIG = (9u << 20) + 13 };
static uint8_t *pattern(void) {
    uint8_t *data = malloc(BIG);
    for (size_t i = 0; data && i < BIG; i++) data[i] = (uint8_t)(i * 13 + (i >> 12));
    return data;
}

/* Their three blobs, through add(): 3 bytes, BIG, 200. */
static void add_three(MilBlobWriter *w, const uint8_t *data) {
    milblob_writer_add(w, MILBLOB_UINT8, data, 3);
    milblob_writer_add(w, MILBLOB_INT8, data, BIG);
    milblob_writer_add(w, MILBLOB_FP16, data, 200);
}

TEST(writer_streamed) {
    DiagSink d;
    diag_init(&d);
    size_t big = BIG;
    uint8_t *data = pattern();
    write_streamed(tmp_path("s1.bin"), data, big, 4096, &d);
    write_streamed(tmp_path("s2.bin"), data, big, MILBLOB_TAKE_MAX, &d);
    /* the same file through add() */
    MilBlobWriter *w = milblob_writer_open(tmp_path("s3.bin"), &d);
    add_three(w, data);
    milblob_writer_add(w, MILBLOB_FP32, NULL, 0);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    size_t n1, n2, n3;
    uint8_t *f1 = read_all(tmp_path("s1.bin"), &n1), *f2 = read_all(tmp_path("s2.bin"), &n2);
    uint8_t *f3 = read_all(tmp_path("s3.bin"), &n3);
    CHECK(n1 == n3 && n2 == n3 && !memcmp(f1, f3, n3) && !memcmp(f2, f3, n3));
    free(f1), free(f2), free(f3), free(data);
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
    unlink(tmp_path("s1.bin")), unlink(tmp_path("s2.bin")), unlink(tmp_path("s3.bin"));
}

/* In memory, the writer faults its bytes in a step at a time as they are
 * written, telling on_grow first: the told bytes cover every byte written
 * before it is written, add them up to the image exactly, and come in a few
 * MiB at a time (a build's budget waits on each); the image is the file. */
typedef struct Told {
    uint64_t sum;
    int calls;
} Told;
static void told_grow(void *ctx, uint64_t n) {
    Told *t = ctx;
    t->sum += n;
    t->calls++;
}

TEST(writer_in_memory_grows_as_told) {
    DiagSink d;
    diag_init(&d);
    size_t big = BIG;
    uint8_t *data = pattern();
    MilBlobWriter *w = milblob_writer_open(tmp_path("m.bin"), &d);
    add_three(w, data);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    size_t n;
    uint8_t *file = read_all(tmp_path("m.bin"), &n);
    Told t = {0};
    w = milblob_writer_open_mem(n, &d);
    milblob_writer_on_grow(w, told_grow, &t);
    milblob_writer_add(w, MILBLOB_UINT8, data, 3);
    CHECK(t.sum >= 64 + 64 + 3 && t.calls == 1);
    uint64_t off = milblob_writer_begin(w, MILBLOB_INT8, big);
    CHECK(off != UINT64_MAX);
    for (size_t at = 0; at < big;) {
        size_t k = big - at < 100000 ? big - at : 100000;
        uint8_t *p = milblob_writer_take(w, k);
        CHECK(p != NULL && t.sum >= off + 64 + at + k); /* told before written */
        if (!p) break;
        memcpy(p, data + at, k);
        at += k;
    }
    milblob_writer_add(w, MILBLOB_FP16, data, 200);
    MilBlobImage img;
    CHECK_EQ_INT(milblob_writer_finish_mem(w, &img, &d), 0);
    CHECK(t.sum == n && t.calls >= 2 && t.calls <= 4);
    CHECK(img.size == n && file && !memcmp(img.bytes, file, n));
    milblob_image_free(&img);
    free(file), free(data);
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
    unlink(tmp_path("m.bin"));
}

/* The writer hands full buffers to its flusher thread and writes a blob
 * larger than its buffer straight from the caller's memory: the file must
 * hold every blob in order whatever was in flight (each blob read back and
 * compared; the digest made while writing is the reader's). */
TEST(writer_flusher_keeps_order) {
    DiagSink d;
    diag_init(&d);
    size_t a = (9u << 20) + 5, b = (6u << 20) + 3, c = (5u << 20) + 1;
    uint8_t *data = malloc(a);
    for (size_t i = 0; i < a; i++) data[i] = (uint8_t)(i * 7 + (i >> 10));
    MilBlobWriter *w = milblob_writer_open(tmp_path("f1.bin"), &d);
    CHECK(w != NULL);
    uint64_t o1 = milblob_writer_begin(w, MILBLOB_UINT8, a);
    for (size_t at = 0; at < a; at += MILBLOB_TAKE_MAX) {
        size_t n = a - at < MILBLOB_TAKE_MAX ? a - at : MILBLOB_TAKE_MAX;
        uint8_t *p = milblob_writer_take(w, n);
        CHECK(p != NULL);
        memcpy(p, data + at, n);
    }
    uint64_t o2 = milblob_writer_add(w, MILBLOB_INT8, data + 1, b); /* past the buffer: written directly */
    uint64_t o3 = milblob_writer_begin(w, MILBLOB_UINT8, c);
    for (size_t at = 0; at < c; at += 4096) {
        size_t n = c - at < 4096 ? c - at : 4096;
        uint8_t *p = milblob_writer_take(w, n);
        CHECK(p != NULL);
        memcpy(p, data + 2 + at, n);
    }
    uint8_t h[16], h2[16];
    milblob_writer_digest(w, h);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), 0);
    MilBlobFile f;
    CHECK_EQ_INT(milblob_open(&f, tmp_path("f1.bin"), &d), 0);
    const MilBlobRecord *r1 = milblob_find(&f, o1), *r2 = milblob_find(&f, o2), *r3 = milblob_find(&f, o3);
    CHECK(r1 && r2 && r3);
    CHECK(r1 && r1->size == a && memcmp(r1->data, data, a) == 0);
    CHECK(r2 && r2->size == b && memcmp(r2->data, data + 1, b) == 0);
    CHECK(r3 && r3->size == c && memcmp(r3->data, data + 2, c) == 0);
    milblob_file_digest(&f, h2);
    CHECK(memcmp(h, h2, 16) == 0);
    milblob_close(&f);
    unlink(tmp_path("f1.bin"));
    free(data);
    CHECK_EQ_INT(d.errors, 0);
    diag_free(&d);
}

TEST(writer_streamed_bounded) {
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* 48 MiB more address space than now: a writer staging the blob
         * whole (as reserve() does) cannot. */
        size_t vsz = 0;
        FILE *st = fopen("/proc/self/statm", "r");
        if (!st || fscanf(st, "%zu", &vsz) != 1) _exit(0); /* no /proc: nothing to limit against */
        fclose(st);
        struct rlimit rl = {vsz * (size_t)sysconf(_SC_PAGESIZE) + (48u << 20), RLIM_INFINITY};
        rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(0);
        DiagSink d;
        diag_init(&d);
        const uint64_t big = 64u << 20;
        MilBlobWriter *w = milblob_writer_open(tmp_path("huge.bin"), &d);
        if (!w || milblob_writer_begin(w, MILBLOB_FP16, big) != 64) _exit(3);
        for (uint64_t at = 0; at < big; at += MILBLOB_TAKE_MAX) {
            uint16_t *p = milblob_writer_take(w, MILBLOB_TAKE_MAX);
            if (!p) _exit(4);
            for (size_t i = 0; i < MILBLOB_TAKE_MAX / 2; i++) p[i] = (uint16_t)(at / 2 + i);
        }
        _exit(milblob_writer_finish(w, &d) == 0 ? 0 : 5);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat sb;
    CHECK(stat(tmp_path("huge.bin"), &sb) == 0 && sb.st_size == 64 + 64 + (64 << 20));
    MilBlobFile f;
    DiagSink d;
    diag_init(&d);
    CHECK_EQ_INT(milblob_open_records(&f, tmp_path("huge.bin"), &d), 0);
    CHECK(f.count == 1 && f.records[0].size == 64u << 20);
    milblob_close(&f);
    diag_free(&d);
    unlink(tmp_path("huge.bin"));
}

/* A streamed blob must be supplied whole, in pieces no larger than it lacks. */
TEST(writer_streamed_errors) {
    DiagSink d;
    diag_init(&d);
    const char *path = tmp_path("short.bin");
    char want[512];
    MilBlobWriter *w = milblob_writer_open(path, &d);
    CHECK_EQ_INT(milblob_writer_begin(w, MILBLOB_FP16, 100), 64);
    CHECK(milblob_writer_take(w, 60) != NULL);
    CHECK_EQ_INT(milblob_writer_finish(w, &d), -1); /* 40 bytes never supplied */
    char *out = diag_render(&d);
    snprintf(want, sizeof want, "%s: error: blob 0: 40 bytes of its data were never supplied\n", path);
    CHECK_STR(out, want);
    free(out);
    CHECK(access(path, F_OK) != 0);
    diag_free(&d);

    diag_init(&d);
    w = milblob_writer_open(path, &d);
    CHECK_EQ_INT(milblob_writer_begin(w, MILBLOB_FP16, 100), 64);
    CHECK(milblob_writer_take(w, 60) != NULL);
    CHECK(milblob_writer_take(w, 42) == NULL);                              /* 2 more than it lacks */
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, "ab", 2), UINT64_MAX); /* sticky */
    CHECK_EQ_INT(milblob_writer_finish(w, &d), -1);
    out = diag_render(&d);
    snprintf(want, sizeof want, "%s: error: blob 0: a piece of 42 bytes is more than the 40 it lacks (or than %u)\n",
             path, (unsigned)MILBLOB_TAKE_MAX);
    CHECK_STR(out, want);
    free(out);
    diag_free(&d);

    diag_init(&d);
    w = milblob_writer_open(path, &d);
    CHECK_EQ_INT(milblob_writer_begin(w, MILBLOB_FP16, 100), 64);
    CHECK_EQ_INT(milblob_writer_add(w, MILBLOB_FP16, "ab", 2), UINT64_MAX); /* before the blob is whole */
    milblob_writer_abort(w);
    CHECK(access(path, F_OK) != 0);
    diag_free(&d);
}

/* A valid two-blob image to corrupt: fp32[500] x 2 as in MIL.md. */
static uint8_t *good_image(size_t *n) {
    *n = 2176 + 64 + 2000;
    uint8_t *b = calloc(1, *n);
    put32(b, 2);
    put32(b + 4, 2);
    for (int k = 0; k < 2; k++) {
        uint8_t *r = b + (k ? 2176 : 64);
        put32(r, 0xDEADBEEF);
        put32(r + 4, 2);
        put64(r + 8, 2000);
        put64(r + 16, (k ? 2176 : 64) + 64);
        memset(r + 64, 0x40 + k, 2000);
    }
    return b;
}

/* Parse the image and return the rendered diagnostics ("" when valid). */
static char *parse_msg(const uint8_t *b, size_t n) {
    DiagSink d;
    diag_init(&d);
    MilBlobFile f;
    int rc = milblob_parse(&f, "weight.bin", b, n, &d);
    char *out = diag_render(&d);
    if (rc == 0) {
        CHECK_EQ_INT(d.errors, 0);
        milblob_close(&f);
    } else {
        CHECK_EQ_INT(d.errors, 1);
        CHECK(f.records == NULL && f.count == 0);
    }
    diag_free(&d);
    /* The records-only reader (pread, no data) judges the same file the
     * same way, in the same words. */
    const char *path = tmp_path("weight.bin");
    FILE *w = fopen(path, "wb");
    CHECK(w != NULL && fwrite(b, 1, n, w) == n);
    fclose(w);
    diag_init(&d);
    int rrc = milblob_open_records(&f, path, &d);
    char *rout = diag_render(&d);
    CHECK_EQ_INT(rrc, rc);
    if (rrc == 0) {
        CHECK(f.bytes == NULL && (f.count == 0 || f.records[0].data == NULL));
        milblob_close(&f);
    }
    size_t dl = strlen(dir);
    CHECK(rc == 0 ? rout[0] == 0 : strncmp(rout, dir, dl) == 0 && rout[dl] == '/' && !strcmp(rout + dl + 1, out));
    free(rout);
    diag_free(&d);
    unlink(path);
    return out;
}

#define EXPECT(mutation, want)                                                                                         \
    do {                                                                                                               \
        size_t len_;                                                                                                   \
        uint8_t *img_ = good_image(&len_);                                                                             \
        uint8_t *b = img_;                                                                                             \
        size_t n = len_;                                                                                               \
        mutation;                                                                                                      \
        char *msg_ = parse_msg(b, n);                                                                                  \
        CHECK_STR(msg_, want);                                                                                         \
        free(msg_);                                                                                                    \
        free(img_);                                                                                                    \
        (void)b;                                                                                                       \
        (void)n;                                                                                                       \
    } while (0)

TEST(reader_corruptions) {
    EXPECT((void)0, "");
    EXPECT(n = 0, "weight.bin: error: empty file (a weight file starts with a 64-byte header)\n");
    EXPECT(n = 10, "weight.bin: error: offset 0: truncated header: 10 bytes (want 64)\n");
    EXPECT(put32(b + 4, 3), "weight.bin: error: offset 4: unsupported version 3 (want 2)\n");
    EXPECT(b[40] = 7, "weight.bin: error: offset 40: nonzero reserved byte 0x07 in header\n");
    EXPECT(put32(b, 0xFFFFFFFF),
           "weight.bin: error: offset 0: header count 4294967295 cannot fit in a 4240-byte file\n");
    EXPECT(put32(b, 3), "weight.bin: error: offset 4240: file ends after 2 blobs (header count 3)\n");
    EXPECT(put32(b, 1), "weight.bin: error: offset 2176: data after the last blob (header count 1)\n");
    EXPECT(put32(b + 2176, 0), "weight.bin: error: blob 1 at offset 2176: bad sentinel 0x00000000 (want 0xdeadbeef)\n");
    EXPECT(put32(b + 68, 18), "weight.bin: error: blob 0 at offset 64: unknown dtype 18\n");
    EXPECT(put32(b + 68, 0), "weight.bin: error: blob 0 at offset 64: unknown dtype 0\n");
    EXPECT(put64(b + 80, 130),
           "weight.bin: error: blob 0 at offset 64: misaligned data_offset 130 (not a multiple of 64)\n");
    EXPECT(put64(b + 80, 192),
           "weight.bin: error: blob 0 at offset 64: data_offset 192 does not follow its record (want 128)\n");
    EXPECT(b[2176 + 63] = 1, "weight.bin: error: blob 1 at offset 2176: nonzero reserved byte 0x01 at offset 2239\n");
    EXPECT(put64(b + 2176 + 8, 2004), "weight.bin: error: blob 1 at offset 2176: data of 2004 bytes at offset 2240 "
                                      "runs past the end of the file (4240 bytes)\n");
    EXPECT(put64(b + 2176 + 8, UINT64_MAX), "weight.bin: error: blob 1 at offset 2176: data of 18446744073709551615 "
                                            "bytes at offset 2240 runs past the end of the file (4240 bytes)\n");
    EXPECT(put64(b + 72, 1998),
           "weight.bin: error: blob 0 at offset 64: size 1998 is not a whole number of fp32 elements (4 bytes each)\n");
    EXPECT(put64(b + 88, 4), "weight.bin: error: blob 0 at offset 64: padding_bits 4 must be 0 for fp32\n");
    EXPECT(b[2130] = 9, "weight.bin: error: blob 0 at offset 64: nonzero padding byte at offset 2130\n");
    EXPECT(n = 4200, "weight.bin: error: blob 1 at offset 2176: data of 2000 bytes at offset 2240 runs past the end of "
                     "the file (4200 bytes)\n");
    EXPECT(n = 2200, "weight.bin: error: blob 1 at offset 2176: truncated record: file ends at 2200\n");
    EXPECT(n = 2176, "weight.bin: error: offset 2176: file ends after 1 blobs (header count 2)\n");
    /* A size that runs into the next record: its bytes are not zero padding. */
    EXPECT(put64(b + 72, 2064), "weight.bin: error: blob 0 at offset 64: nonzero padding byte at offset 2192\n");
}

/* Sub-byte dtypes: padding_bits says how many bits of the last byte are unused. */
TEST(reader_subbyte) {
    uint8_t b[64 + 64 + 3] = {0};
    put32(b, 1);
    put32(b + 4, 2);
    put32(b + 64, 0xDEADBEEF);
    put32(b + 68, MILBLOB_UINT3);
    put64(b + 72, 3);
    put64(b + 80, 128);
    put64(b + 88, 0); /* 24 bits = 8 uint3 */
    char *m = parse_msg(b, sizeof b);
    CHECK_STR(m, "");
    free(m);
    put64(b + 88, 3); /* 21 bits = 7 uint3 */
    m = parse_msg(b, sizeof b);
    CHECK_STR(m, "");
    free(m);
    put64(b + 88, 2);
    m = parse_msg(b, sizeof b);
    CHECK_STR(m, "weight.bin: error: blob 0 at offset 64: size 3 bytes less padding_bits 2 is not a whole number of "
                 "uint3 elements (3 bits each)\n");
    free(m);
    put64(b + 88, 8);
    m = parse_msg(b, sizeof b);
    CHECK_STR(m,
              "weight.bin: error: blob 0 at offset 64: padding_bits 8 invalid for uint3 (want 0..7, 0 when empty)\n");
    free(m);
}

TEST(empty_weight_file_and_open_errors) {
    uint8_t b[64] = {0};
    put32(b + 4, 2);
    char *m = parse_msg(b, sizeof b);
    CHECK_STR(m, "");
    free(m);
    DiagSink d;
    diag_init(&d);
    MilBlobFile f;
    CHECK_EQ_INT(milblob_open(&f, "/nonexistent/weight.bin", &d), -1);
    m = diag_render(&d);
    CHECK_STR(m, "/nonexistent/weight.bin: error: cannot open: No such file or directory\n");
    free(m);
    diag_free(&d);
    diag_init(&d);
    const char *path = tmp_path("empty.bin");
    FILE *e = fopen(path, "wb");
    fclose(e);
    CHECK_EQ_INT(milblob_open(&f, path, &d), -1);
    CHECK_EQ_INT(d.errors, 1);
    CHECK(strstr(d.items[0].msg, "empty file") == d.items[0].msg);
    unlink(path);
    diag_free(&d);
}

TEST(dtype_table) {
    CHECK_EQ_INT(milblob_dtype_bits(MILBLOB_FP16), 16);
    CHECK_EQ_INT(milblob_dtype_bits(MILBLOB_UINT6), 6);
    CHECK_EQ_INT(milblob_dtype_bits(MILBLOB_FP8E5M2), 8);
    CHECK_EQ_INT(milblob_dtype_bits(0), 0);
    CHECK_EQ_INT(milblob_dtype_bits(18), 0);
    CHECK_STR(milblob_dtype_name(MILBLOB_INT32), "int32");
    CHECK_STR(milblob_dtype_name(MILBLOB_BF16), "bf16");
    CHECK(milblob_dtype_name(1000) == NULL);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/milc-test-blob-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    RUN(writer_fp32_example);
    RUN(writer_fp16_reserve_example);
    RUN(writer_large_and_digest);
    RUN(writer_empty_blobs);
    RUN(writer_errors_leave_no_file);
    RUN(writer_streamed);
    RUN(writer_in_memory_grows_as_told);
    RUN(writer_flusher_keeps_order);
    RUN(writer_streamed_bounded);
    RUN(writer_streamed_errors);
    RUN(reader_corruptions);
    RUN(reader_subbyte);
    RUN(empty_weight_file_and_open_errors);
    RUN(dtype_table);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 2;
    TEST_MAIN_END();
}
