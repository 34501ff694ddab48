/* test_npy.c — .npy: numpy-written files read back exactly, the writer's
 * bytes identical to numpy.save, and malformed headers with their messages.
 * Run as: test_npy PYTHON GEN_NPY_PY */
#include "milc/half.h"
#include "milc/npy.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

static char dir[64];

static const char *at(const char *name) {
    static char buf[2][256];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static uint8_t *slurp(const char *path, size_t *n) {
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

/* Read a numpy file, check its type, then write it back with npy_write_file
 * and compare the bytes with numpy's. */
static void roundtrip(const char *name, NpyDType dt, int rank, const int64_t *dims, bool same_bytes) {
    NpyFile f;
    char err[256] = "";
    int rc = npy_open(&f, at(name), err, sizeof err);
    CHECK_EQ_INT(rc, NPY_OK);
    if (rc != NPY_OK) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    CHECK_EQ_INT(f.arr.dtype, dt);
    CHECK_EQ_INT(f.arr.rank, rank);
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        CHECK_EQ_INT(f.arr.dims[i], dims[i]);
        count *= (size_t)dims[i];
    }
    CHECK_EQ_INT(f.arr.count, count);
    CHECK_EQ_INT(f.arr.nbytes, count * npy_dtype_size(dt));
    CHECK((uintptr_t)f.arr.data % npy_dtype_size(dt) == 0);
    rc = npy_write_file(at("out.npy"), f.arr.dtype, f.arr.rank, f.arr.dims, f.arr.data, err, sizeof err);
    CHECK_EQ_INT(rc, NPY_OK);
    size_t n1, n2;
    uint8_t *a = slurp(at(name), &n1), *b = slurp(at("out.npy"), &n2);
    if (same_bytes) {
        CHECK_EQ_INT(n1, n2);
        CHECK(a && b && n1 == n2 && memcmp(a, b, n1) == 0);
    } else { /* other versions: same data */
        CHECK(b && n2 >= f.arr.nbytes && memcmp(b + n2 - f.arr.nbytes, f.arr.data, f.arr.nbytes) == 0);
    }
    long hl = npy_header(dt, rank, dims, NULL, 0);
    CHECK_EQ_INT(hl % 64, 0);
    CHECK_EQ_INT((size_t)hl + f.arr.nbytes, n2);
    free(a);
    free(b);
    npy_close(&f);
}

TEST(numpy_files) {
    roundtrip("f32_2x3.npy", NPY_DTYPE_F32, 2, (int64_t[]){2, 3}, true);
    roundtrip("f16_5.npy", NPY_DTYPE_F16, 1, (int64_t[]){5}, true);
    roundtrip("i32_scalar.npy", NPY_DTYPE_I32, 0, NULL, true);
    roundtrip("b1_4.npy", NPY_DTYPE_BOOL, 1, (int64_t[]){4}, true);
    roundtrip("i64_0x3.npy", NPY_DTYPE_I64, 2, (int64_t[]){0, 3}, true);
    roundtrip("u8_2x2x2.npy", NPY_DTYPE_U8, 3, (int64_t[]){2, 2, 2}, true);
    roundtrip("i8_3.npy", NPY_DTYPE_I8, 1, (int64_t[]){3}, true);
    roundtrip("f32_rank5.npy", NPY_DTYPE_F32, 5, (int64_t[]){1, 2, 1, 3, 1}, true);
    roundtrip("f64_big_dim.npy", NPY_DTYPE_F64, 1, (int64_t[]){901}, true);
    roundtrip("f64_v2.npy", NPY_DTYPE_F64, 1, (int64_t[]){4}, false);
    roundtrip("f32_v3.npy", NPY_DTYPE_F32, 1, (int64_t[]){3}, false);
}

TEST(numpy_values) {
    NpyFile f;
    char err[256];
    CHECK_EQ_INT(npy_open(&f, at("f32_2x3.npy"), err, sizeof err), 0);
    const float *x = f.arr.data;
    for (int i = 0; i < 6; i++) CHECK(x[i] == 0.5f * (float)i);
    npy_close(&f);
    CHECK_EQ_INT(npy_open(&f, at("f16_5.npy"), err, sizeof err), 0);
    const uint16_t *h = f.arr.data;
    float want[5] = {1, -2, 0.5f, 65504, -0.0f};
    for (int i = 0; i < 5; i++) CHECK(half_to_float(h[i]) == want[i]);
    CHECK_EQ_INT(h[4], 0x8000);
    npy_close(&f);
    CHECK_EQ_INT(npy_open(&f, at("i32_scalar.npy"), err, sizeof err), 0);
    CHECK_EQ_INT(*(const int32_t *)f.arr.data, -7);
    CHECK_EQ_INT(f.arr.count, 1);
    npy_close(&f);
    CHECK_EQ_INT(npy_open(&f, at("b1_4.npy"), err, sizeof err), 0);
    CHECK(memcmp(f.arr.data, "\1\0\1\1", 4) == 0);
    npy_close(&f);
}

/* Fortran order (np.save of a transposed array) reads as the same array in
 * C order: element [i][j] of the file's array is at i * cols + j. */
TEST(numpy_fortran_order) {
    NpyFile f;
    char err[256];
    CHECK_EQ_INT(npy_open(&f, at("fortran.npy"), err, sizeof err), 0);
    const float want2[6] = {0, 1, 2, 3, 4, 5}; /* arange(6).reshape(2, 3) */
    CHECK(f.arr.rank == 2 && f.arr.dims[0] == 2 && f.arr.dims[1] == 3 && !f.arr.fortran_order);
    CHECK(memcmp(f.arr.data, want2, sizeof want2) == 0);
    npy_close(&f);
    CHECK_EQ_INT(npy_open(&f, at("fortran_t.npy"), err, sizeof err), 0);
    CHECK(f.arr.rank == 2 && f.arr.dims[0] == 4 && f.arr.dims[1] == 3 && f.arr.dtype == NPY_DTYPE_F16);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) /* arange(12).reshape(3, 4).T[i][j] = j * 4 + i */
            CHECK(half_to_float(((const uint16_t *)f.arr.data)[i * 3 + j]) == (float)(j * 4 + i));
    npy_close(&f);
    CHECK_EQ_INT(npy_open(&f, at("fortran_3d.npy"), err, sizeof err), 0);
    CHECK(f.arr.rank == 3 && f.arr.dims[0] == 2 && f.arr.dims[1] == 3 && f.arr.dims[2] == 4);
    for (int i = 0; i < 24; i++) CHECK_EQ_INT(((const int32_t *)f.arr.data)[i], i);
    npy_close(&f);
}

static void expect_open(const char *name, int code, const char *msg_after_path) {
    NpyFile f;
    char err[256] = "", want[512];
    CHECK_EQ_INT(npy_open(&f, at(name), err, sizeof err), code);
    snprintf(want, sizeof want, "%s: %s", at(name), msg_after_path);
    CHECK_STR(err, want);
    CHECK(f.map == NULL && f.arr.data == NULL);
}

TEST(numpy_files_refused) {
    expect_open("bigendian.npy", NPY_EUNSUPPORTED, "big-endian dtype '>f4' is not supported");
    expect_open("complex.npy", NPY_EUNSUPPORTED, "unsupported dtype '<c8'");
    expect_open("missing.npy", NPY_EIO, "cannot open: No such file or directory");
}

/* Build a v1.0 image from a header dict (padded like numpy) plus data bytes. */
static uint8_t *image(const char *dict, size_t data_len, size_t *n) {
    size_t k = strlen(dict);
    size_t total = (10 + k + 1 + 63) / 64 * 64;
    *n = total + data_len;
    uint8_t *b = calloc(1, *n + 1);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)((total - 10) & 0xff);
    b[9] = (uint8_t)((total - 10) >> 8);
    memset(b + 10, ' ', total - 10);
    memcpy(b + 10, dict, k);
    b[total - 1] = '\n';
    return b;
}

static void expect_read(const char *dict, size_t data_len, int code, const char *msg) {
    size_t n;
    uint8_t *b = image(dict, data_len, &n);
    NpyArray a;
    char err[256] = "";
    int rc = npy_read(b, n, &a, err, sizeof err);
    CHECK_EQ_INT(rc, code);
    CHECK_STR(err, msg);
    if (rc != code || strcmp(err, msg) != 0) fprintf(stderr, "  header: %s\n", dict);
    free(b);
}

#define OK_HDR(dict, len) expect_read(dict, len, NPY_OK, "")

TEST(headers) {
    OK_HDR("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 24);
    OK_HDR("{\"shape\":(2,3),\"fortran_order\":False,\"descr\":\"<f4\"}", 24);
    OK_HDR("{'descr': '<i1', 'fortran_order': True, 'shape': (3,), }", 3);
    OK_HDR("{'descr': '|u1', 'fortran_order': False, 'shape': (), }", 1);
    OK_HDR("{'descr': '<f2', 'fortran_order': False, 'shape': (0, 99999999999999), }", 0);
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, NPY_EFORMAT,
                "data is 20 bytes; 6 elements of '<f4' need 24");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28, NPY_EFORMAT,
                "data is 28 bytes; 6 elements of '<f4' need 24");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }", 12, NPY_EFORMAT,
                "header: 'shape' (3) is not a tuple; want (3,)");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }", 12, NPY_EFORMAT,
                "offset 61: header: bad 'shape' tuple: unexpected character");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24, NPY_EFORMAT,
                "offset 63: header: bad 'shape' tuple: unexpected character");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (2,, 3), }", 24, NPY_EFORMAT,
                "offset 63: header: bad 'shape' tuple: unexpected character");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0, NPY_EFORMAT,
                "offset 79: header: dimension too large");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0, NPY_EFORMAT,
                "shape has too many elements");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1), }", 4,
                NPY_EUNSUPPORTED, "shape has more than 16 dimensions");
    expect_read("{'descr': '<f4', 'fortran_order': False, }", 4, NPY_EFORMAT, "header: missing 'shape'");
    expect_read("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, NPY_EFORMAT,
                "offset 27: header: duplicate key 'descr'");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'x': 1}", 4, NPY_EFORMAT,
                "offset 64: header: unknown key 'x'");
    expect_read("{'descr': '<f4', 'fortran_order': 0, 'shape': (), }", 4, NPY_EFORMAT,
                "offset 44: header: 'fortran_order' must be True or False");
    expect_read("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (), }", 4, NPY_EUNSUPPORTED,
                "offset 20: header: 'descr' must be a simple dtype string");
    expect_read("{'descr': '<f4', 'fortran_order': False, 'shape': ()} x", 4, NPY_EFORMAT,
                "offset 64: header: text after the dict");
    expect_read("['descr']", 4, NPY_EFORMAT, "offset 10: header: expected '{'");
    expect_read("{'descr' '<f4'}", 4, NPY_EFORMAT, "offset 19: header: expected ':'");
    expect_read("{'descr': '<f4' 'shape': ()}", 4, NPY_EFORMAT, "offset 26: header: expected ',' or '}'");
    expect_read("{'descr': '<f4", 4, NPY_EUNSUPPORTED, "offset 20: header: 'descr' must be a simple dtype string");
    expect_read("{'descr': '<f\\4', 'fortran_order': False, 'shape': (), }", 4, NPY_EUNSUPPORTED,
                "offset 20: header: 'descr' must be a simple dtype string");
    expect_read("{'descr': '|f4', 'fortran_order': False, 'shape': (), }", 4, NPY_EUNSUPPORTED,
                "unsupported dtype '|f4'");
    expect_read("{'descr': '=f4', 'fortran_order': False, 'shape': (), }", 4, NPY_EUNSUPPORTED,
                "unsupported dtype '=f4'");
}

TEST(preamble) {
    char err[256];
    NpyArray a;
    size_t n;
    uint8_t *b = image("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, &n);
    CHECK_EQ_INT(npy_read(b, 0, &a, err, sizeof err), NPY_EFORMAT);
    CHECK_STR(err, "too short for a .npy file (0 bytes)");
    CHECK_EQ_INT(npy_read(b, 9, &a, err, sizeof err), NPY_EFORMAT);
    CHECK_STR(err, "too short for a .npy file (9 bytes)");
    CHECK_EQ_INT(npy_read(b, 40, &a, err, sizeof err), NPY_EFORMAT);
    CHECK_STR(err, "header of 118 bytes runs past the end of the file (40 bytes)");
    b[127] = ' ';
    CHECK_EQ_INT(npy_read(b, n, &a, err, sizeof err), NPY_EFORMAT);
    CHECK_STR(err, "header does not end with a newline");
    b[127] = '\n';
    b[6] = 4;
    CHECK_EQ_INT(npy_read(b, n, &a, err, sizeof err), NPY_EUNSUPPORTED);
    CHECK_STR(err, "unsupported .npy version 4.0");
    b[6] = 1, b[7] = 1;
    CHECK_EQ_INT(npy_read(b, n, &a, err, sizeof err), NPY_EUNSUPPORTED);
    CHECK_STR(err, "unsupported .npy version 1.1");
    b[7] = 0, b[1] = 'n';
    CHECK_EQ_INT(npy_read(b, n, &a, err, sizeof err), NPY_EFORMAT);
    CHECK_STR(err, "bad magic (not a .npy file)");
    b[1] = 'N';
    CHECK_EQ_INT(npy_read(b, n, &a, NULL, 0), NPY_OK);
    CHECK(a.data == b + 128 && a.count == 1 && a.nbytes == 4 && a.rank == 0);
    /* Version 2.0 with a 32-bit header length that points past the end. */
    b[6] = 2, b[8] = 0, b[9] = 0, b[10] = 0, b[11] = 0x80;
    CHECK_EQ_INT(npy_read(b, n, &a, err, sizeof err), NPY_EFORMAT);
    CHECK_STR(err, "header of 2147483648 bytes runs past the end of the file (132 bytes)");
    free(b);
}

TEST(writer_args_and_errors) {
    char err[256];
    float x[2] = {1, 2};
    CHECK_EQ_INT(npy_write_file(at("w.npy"), NPY_DTYPE_COUNT, 1, (int64_t[]){2}, x, err, sizeof err), NPY_EINVAL);
    CHECK_EQ_INT(npy_write_file(at("w.npy"), NPY_DTYPE_F32, 1, (int64_t[]){-2}, x, err, sizeof err), NPY_EINVAL);
    CHECK_EQ_INT(npy_write_file(at("w.npy"), NPY_DTYPE_F32, 17, (int64_t[17]){0}, x, err, sizeof err), NPY_EINVAL);
    CHECK(access(at("w.npy"), F_OK) != 0);
    CHECK_EQ_INT(npy_write_file("/nonexistent/w.npy", NPY_DTYPE_F32, 1, (int64_t[]){2}, x, err, sizeof err), NPY_EIO);
    CHECK(strstr(err, "cannot create /nonexistent/.w.npy.tmp-") == err);
    CHECK(strstr(err, ": No such file or directory") != NULL);
    CHECK_STR(npy_strerror(NPY_EFORMAT), "invalid .npy file");
    CHECK_STR(npy_dtype_name(NPY_DTYPE_F16), "fp16");
    CHECK_STR(npy_dtype_descr(NPY_DTYPE_BOOL), "|b1");
    CHECK(npy_dtype_name(NPY_DTYPE_COUNT) == NULL);
}

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    snprintf(dir, sizeof dir, "/tmp/milc-test-npy-XXXXXX");
    if (!mkdtemp(dir)) return 2;
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s", argv[1], argv[2], dir);
    if (system(cmd) != 0) return fprintf(stderr, "generator failed: %s\n", cmd), 2;
    RUN(numpy_files);
    RUN(numpy_values);
    RUN(numpy_files_refused);
    RUN(numpy_fortran_order);
    RUN(headers);
    RUN(preamble);
    RUN(writer_args_and_errors);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 2;
    TEST_MAIN_END();
}
